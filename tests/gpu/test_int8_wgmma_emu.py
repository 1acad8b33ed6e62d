# test_int8_wgmma_emu.py - qc_i8_linear_wgmma (WGMMA_SRC in plugins/w8a8_int8/w8a8_int8_cuda.c, the Hopper W8A8
# INT8 GEMM) replayed on the CPU, no GPU needed.
# The behavioural model below is a HAND TRANSCRIPTION of the kernel's index and synchronization logic and of its
# host side (wgmma_plan, i8_wgmma_splits, wgmma_dims, I8_WORK_BYTES in w8a8_int8_cuda.c, qc_split_k_ways in
# plugins/common/qc_split_k.h): keep it in step with the kernel (what it shares with the fp8 kernel's replay: in
# wgmma_replay.py).  Only the source-text checks read WGMMA_SRC itself (the C string literal is parsed out of the C
# file at run time): anchors that the transcribed lines are still there, the tile-width table and the template
# switch, and that no load of xs or sw sits inside the store loop.
#
# Actors: per block the producer thread and, per consumer warpgroup, its 4 warps as separate actors (mbarrier waits,
# wgmma groups and the named barrier `bar.sync 1+c, 128` are per warp; a warp's wgmma covers its own 16 rows of the
# m64 tile, which lets the warps drift further apart than the hardware would: a conservative model).  mbarriers as
# PTX defines them (arrival count, tx bytes, phase parity; a fresh barrier passes parity 1 at once).  Every TMA box
# and every 4-byte cp.async lands as its own scheduler event (or, for cp.async, at the issuing warp's
# cp.async.wait_group 0 at the latest).  Shared memory the warps share is tagged: each sws cell with the tile whose
# cp.async wrote it, qc_last[c] with the tile whose atomicAdd wrote it, each ring stage with the boxes it holds; a
# read that finds another tile's tag (or nothing) is a race.  Interleavings: eager, lazy (copies land as late as
# possible), laggard (one warp of each warpgroup runs only when nothing else can), starve (one warpgroup likewise),
# random.  A case fails on a deadlock, a stage read before its data landed or overwritten under an in-flight wgmma
# group, an sws/qc_last race, an out-of-bounds read of xs/sw/work or store past y, an output written twice or never,
# a counter left non-zero, y differing between interleavings, or y not bit-identical to the numpy reference
# y = f32(f32(f32(acc) * xs[r]) * sw[c]) with acc the exact int64 dot product.  Not modelled: memory ordering
# (fences), the swizzle's byte placement, tensor-map encoding, I8_SKIP_MMA / I8_SKIP_EPI (defaults 0 only).
# Mutations (deliberate bugs) at the end must each be detected.  Exit 77 (skip) without numpy.
import os, re, sys, time
try:
    import numpy as np
except ImportError:
    print("test_int8_wgmma_emu: skip: numpy is not installed")
    sys.exit(77)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # wgmma_replay.py, whatever the working directory
import wgmma_replay as rp
from wgmma_replay import WG_SMS, WG_BM, WG_BK, Actor, Fault, MBar, TmaBox, cdiv, qc_desc, qc_split_k_ways, tile_walk

T0 = time.time()
np.seterr(all='ignore')
f32 = np.float32
VERBOSE = bool(os.environ.get("QC_INT8_WGMMA_EMU_VERBOSE"))
SRC_C = os.path.join(HERE, "../../plugins/w8a8_int8/w8a8_int8_cuda.c")

# ---- constants of w8a8_int8_cuda.c (WG_SMS, WG_BM, WG_BK, WG_GROUP_M: wgmma_replay's) ------------------------------
WG_A_BYTES = WG_BM * WG_BK
W_BOX_ROWS = 64
WG_BOX_B_BYTES = W_BOX_ROWS * WG_BK
ST_OF = {256: 4, 192: 5, 128: 6}          # the entry's switch: qc_wg_gemm<256, 4>, <192, 5>, <128, 6>
I8_SPLIT_MAX, I8_SPLIT_STAGES = 4, 24
I8_WORK_BYTES = 2048 + WG_SMS * 2 * 128 * 128 * 4
SMEM_OPTIN = 232448
SMEM_STATIC = 2 * 6 * 8 + 2 * 256 * 4 + 2 * 4   # bars[12], sws[512], qc_last[2]
DYN0 = 0x0A10                                    # shared-window address of the dynamic smem (any value works)

COV = set()


# ---- WGMMA_SRC, parsed out of the C file ----------------------------------------------------------------------------
def c_string(text, name):
    i = text.index("static const char %s[] =" % name) + len("static const char %s[] =" % name)
    out, esc = [], {'n': '\n', 't': '\t', '"': '"', '\\': '\\', "'": "'", '0': '\0'}
    while True:
        while text[i].isspace():
            i += 1
        if text[i] == ';':
            return "".join(out)
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif text[i] == '"':
            i += 1
            while text[i] != '"':
                if text[i] == '\\':
                    out.append(esc[text[i + 1]])
                    i += 2
                else:
                    out.append(text[i])
                    i += 1
            i += 1
        else:
            raise ValueError("unexpected %r in %s" % (text[i:i + 20], name))


with open(SRC_C) as _f:
    C_TEXT = _f.read()
WGMMA_SRC = c_string(C_TEXT, "WGMMA_SRC")


# ---- host side (transcribed) ------------------------------------------------------------------------------------------
def wgmma_plan(m, n):  # its tables: bns, eff, sts
    return rp.wg_plan(m, n, (256, 192, 128), (100, 96, 88), (4, 5, 6))


def i8_wgmma_splits(tiles, k, split_max=I8_SPLIT_MAX):
    return qc_split_k_ways(tiles, cdiv(k, WG_BK) if k > 0 else 0, WG_SMS, I8_SPLIT_STAGES, split_max)


def wgmma_dims(m, n, k, split_max=I8_SPLIT_MAX):
    bn, st, smem, tiles = wgmma_plan(m, n)
    return min(tiles, WG_SMS), i8_wgmma_splits(tiles, k, split_max), smem


# ---- device helpers (transcribed) ---------------------------------------------------------------------------------------
def qc_wg_bn(m, n):  # its tables: bns, eff
    return rp.qc_wg_bn(m, n, (256, 192, 128), (100, 96, 88))


# The m64nNk32 s32 accumulator layout: register i of lane l of a warp holds row l/4 (+8 for i%4 >= 2) of the warp's
# 16, column 8 (i/4) + 2 (l%4) + i%2.
LANE = np.arange(32)
LAYOUT = {}
for _bn in (128, 192, 256):
    _i = np.arange(_bn // 2)
    LAYOUT[_bn] = ((LANE[:, None] >> 2) + 8 * ((_i[None, :] >> 1) & 1),
                   8 * (_i[None, :] >> 2) + 2 * (LANE[:, None] & 3) + (_i[None, :] & 1))


class Data:
    def __init__(self, m, n, k, seed):
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k = m, n, k
        self.X = rng.integers(-127, 128, size=(m, k)).astype(np.int64)
        self.W = rng.integers(-127, 128, size=(n, k)).astype(np.int64)
        self.xs = rng.uniform(0.001, 0.05, size=m).astype(f32)
        self.sw = rng.uniform(-0.02, 0.02, size=n).astype(f32)
        if m > 3:  # special values: a NaN row (quant_act's bad row), a zero-scale row, an infinite row
            self.xs[m // 2] = np.nan
            self.xs[1] = 0.0
            self.xs[m - 1] = np.inf
            COV.add("special xs")
        self.sw[0] = 0.0
        acc = self.X @ self.W.T  # exact int64
        self.ref = (acc.astype(f32) * self.xs[:, None]) * self.sw[None, :]
        self.Xf, self.Wf = self.X.astype(np.float64), self.W.astype(np.float64)
        self.boxes = {}

    def box(self, tag):
        b = self.boxes.get(tag)
        if b is None:
            which, kt, r0 = tag
            M, rows = (self.Xf, WG_BM) if which == 'x' else (self.Wf, W_BOX_ROWS)
            b = np.zeros((rows, WG_BK))  # TMA: out of the tensor reads zeros
            k0 = kt * WG_BK
            rh, kh = min(r0 + rows, M.shape[0]), min(k0 + WG_BK, M.shape[1])
            if r0 < rh and k0 < kh:
                b[:rh - r0, :kh - k0] = M[r0:rh, k0:kh]
            self.boxes[tag] = b
        return b


# ---- named barriers and cp.async (mbarriers and TMA boxes: wgmma_replay's) ------------------------------------------------
class NamedBar:
    """bar.sync id, 128: the 4 warps of one consumer warpgroup."""
    __slots__ = ('name', 'arrived', 'gen', 'waiters', 'ready')

    def __init__(self, name, ready):
        self.name, self.arrived, self.gen, self.waiters, self.ready = name, 0, 0, [], ready

    def arrive(self, actor):
        self.arrived += 1
        if self.arrived == 4:
            self.arrived, self.gen = 0, self.gen + 1
            self.ready.extend(self.waiters)
            self.waiters = []
            return True
        self.waiters.append(actor)
        return False


class CpAsync:
    __slots__ = ('B', 'cell', 'tile', 'val', 'owner', 'landed')

    def __init__(self, B, cell, tile, val, owner):
        self.B, self.cell, self.tile, self.val, self.owner, self.landed = B, cell, tile, val, owner, False

    def land(self):
        if not self.landed:
            self.landed = True
            self.B.sws_tag[self.cell] = self.tile
            self.B.sws_val[self.cell] = self.val


class Block:
    def __init__(self, L, bx, by):
        self.name = "block (%d,%d)" % (bx, by)
        self.bx, self.by = bx, by
        self.base = (DYN0 + 1023) & ~1023
        if self.base + L.ST * L.STAGE > DYN0 + L.smem:
            raise Fault("the ring ends past the %d bytes of dynamic shared memory" % L.smem)
        if 2 * L.ST > 12:
            raise Fault("%d stages need %d mbarriers, bars[] holds 12" % (L.ST, 2 * L.ST))
        self.full = [MBar("full[%d]" % s, 1, L.ready, strict=True) for s in range(L.ST)]
        self.empty = [MBar("empty[%d]" % s, 8, L.ready, strict=True) for s in range(L.ST)]  # one per consumer warp
        self.nbar = [NamedBar("bar %d" % (1 + c), L.ready) for c in range(2)]
        self.sa = [None] * L.ST
        self.sb = [[None] * (L.BN // W_BOX_ROWS) for _ in range(L.ST)]
        self.sws_tag = np.full(512, -1, np.int64)  # which tile's cp.async wrote the cell (-1: never)
        self.sws_val = np.full(512, np.nan, f32)
        self.qc_last = [None, None]  # (tile, value)
        self.nsp, self.spl = L.grid_y, by
        self.kt_b, self.kt_e = L.kt_n * by // L.grid_y, L.kt_n * (by + 1) // L.grid_y

    def snapshot(self, st):
        return (self.sa[st], tuple(self.sb[st]))


class Launch(rp.LaunchBase):  # rd, err, store: LaunchBase's
    max_errors = 10

    def __init__(self, D, grid_x, grid_y, mut=frozenset()):
        self.D, self.m, self.n, self.k = D, D.m, D.n, D.k
        self.grid_x, self.grid_y, self.mut = grid_x, grid_y, mut
        self.BN = qc_wg_bn(self.m, self.n)
        self.ST = ST_OF[self.BN]
        self.STAGE = WG_A_BYTES + self.BN * WG_BK
        self.smem = wgmma_plan(self.m, self.n)[2]
        self.tiles_m, self.tiles_n = cdiv(self.m, WG_BM), cdiv(self.n, self.BN)
        self.tiles = self.tiles_m * self.tiles_n
        self.kt_n = cdiv(self.k, WG_BK)
        self.y = np.full(self.m * self.n, np.nan, f32)
        self.writes = np.zeros(self.m * self.n, np.int64)
        self.work = np.random.default_rng(5).integers(-2**31, 2**31, I8_WORK_BYTES // 4).astype(np.int64)
        self.work[:512] = 0  # counters start at zero (the workspace contract); the slots hold garbage
        self.tmas, self.cps, self.ready, self.errors, self.blocks = [], [], [], [], []
        self.stage_cache = {}

    def wslot(self, idx, what):
        if idx.min() < 512 or idx.max() >= self.work.size:
            raise Fault("%s work word %d outside the slots (512..%d)" % (what, int(idx.max()), self.work.size - 1))
        return idx

    # -- TMA and wgmma through shared addresses --
    def tma2d(self, B, dst, which, kt, c1, bar):
        rel = dst - B.base
        st, off = divmod(rel, self.STAGE)
        if rel < 0 or st >= self.ST:
            raise Fault("TMA into %#x, outside the ring" % dst)
        if which == 'x':
            if off:
                raise Fault("x box at stage offset %d" % off)
            slot, nbytes = -1, WG_A_BYTES
        else:
            b, r = divmod(off - WG_A_BYTES, WG_BOX_B_BYTES)
            if off < WG_A_BYTES or r or b >= self.BN // W_BOX_ROWS:
                raise Fault("w box at stage offset %d" % off)
            slot, nbytes = b, WG_BOX_B_BYTES
        self.tmas.append(TmaBox(B, st, slot, (which, kt, c1), B.full[bar], nbytes))

    def stage_rows(self, B, st):
        key = B.snapshot(st)
        M = self.stage_cache.get(key)
        if M is None:
            parts = [self.D.box(B.sa[st]) if B.sa[st] else np.full((WG_BM, WG_BK), 99.0)]
            parts += [self.D.box(tg) if tg else np.full((W_BOX_ROWS, WG_BK), 99.0) for tg in B.sb[st]]
            M = self.stage_cache[key] = np.concatenate(parts)
        return M

    def operand(self, B, desc, rows):
        lo = desc & 0xFFFFFFFF
        if (lo >> 14) != (1 << 2) or ((desc >> 32) & 0x3FFF) != 1024 >> 4 or (desc >> 62) != 1:
            raise Fault("descriptor %#x: carry out of the address field or wrong SBO/swizzle" % desc)
        rel = ((lo & 0x3FFF) << 4) - B.base
        st, off = divmod(rel, self.STAGE)
        kofs = off % 1024
        row0 = (off - kofs) // WG_BK
        if rel < 0 or st >= self.ST or kofs >= WG_BK or kofs % 32 or row0 + rows > WG_BM + self.BN:
            raise Fault("descriptor address %#x is not a %d-row operand of a stage" % (rel + B.base, rows))
        return st, self.stage_rows(B, st)[row0:row0 + rows, kofs:kofs + 32]

    def wgmma(self, B, acc, w, da, db, scale_d, group, expect, who):
        sta, A = self.operand(B, da, 64)
        stb, Bm = self.operand(B, db, self.BN)
        row0, col0, kt, nb = expect
        for st in {sta, stb}:
            got = B.snapshot(st)
            want = (('x', kt, row0), tuple(('w', kt, col0 + W_BOX_ROWS * b) for b in range(nb)))
            if got[0] != want[0] or got[1][:nb] != want[1]:
                self.err("%s read stage %d before its data landed (holds %s, wants k step %d of rows %d cols %d..)" %
                         (who, st, got, kt, row0, col0))
            group.append((st, got))
        P = (A[16 * w:16 * w + 16] @ Bm.T).astype(np.int64)  # exact: |sum| < 2^53
        if scale_d:
            acc += P
        else:
            acc[:] = P

    def retire(self, B, groups, keep, who):
        """wgmma.wait_group keep: every group but the newest `keep` has finished reading its stages."""
        done = groups[:len(groups) - keep] if keep else groups
        for g in done:
            for st, snap in g:
                if B.snapshot(st) != snap:
                    self.err("%s: stage %d overwritten under an in-flight wgmma (%s -> %s)" %
                             (who, st, snap[0], B.snapshot(st)[0]))
        return groups[len(groups) - keep:] if keep else []

    # -- warpgroup 0, thread 0 --
    def producer(self, B):
        BN, ST, mut = self.BN, self.ST, self.mut
        s, ph = 0, 0
        for t, tm, tn in tile_walk(B.bx, self.grid_x, self.tiles_m, self.tiles_n):
            row0, col0 = tm * WG_BM, tn * BN
            left = self.n - col0
            nb = BN // 64 if left >= BN else (left + 63) // 64
            if nb < BN // 64:
                COV.add("BN %d partial tile" % BN)
            nbytes = WG_A_BYTES + nb * WG_BOX_B_BYTES
            for kt in range(B.kt_b, B.kt_e):
                yield ('m', B.empty[s], ph if 'prod_parity' in mut else ph ^ 1)
                fb, sa = s, B.base + s * self.STAGE
                sb = sa + WG_A_BYTES
                B.full[fb].arrive_expect_tx(nbytes)
                self.tma2d(B, sa, 'x', kt, row0, fb)
                for b in range(nb):
                    self.tma2d(B, sb + b * WG_BOX_B_BYTES, 'w', kt, col0 + 64 * b, fb)
                s += 1
                if s == ST:
                    s, ph = 0, ph ^ 1
                    COV.add("ring wrap ST %d" % ST)
                yield None

    # -- warpgroups 1 and 2: warp w of consumer c --
    def warp(self, B, c, w):
        m, n, BN, ST, mut, D = self.m, self.n, self.BN, self.ST, self.mut, self.D
        who = "%s consumer %d warp %d" % (B.name, c, w)
        kt_b, kt_e, nsp, spl = B.kt_b, B.kt_e, B.nsp, B.spl
        ti = 32 * w + LANE
        ROW, COL = LAYOUT[BN]
        me = {'pending': []}
        s, prev, ph = 0, 0, 0
        ntile = 0
        for t, tm, tn in tile_walk(B.bx, self.grid_x, self.tiles_m, self.tiles_n):
            ntile += 1
            if ntile == 2:
                COV.add("several tiles a block")
            wsc = c * 256
            if 'tile_bar' not in mut:
                yield ('n', B.nbar[c])
            for q in (ti, ti + 128):  # for (q = tid & 127; q < BN; q += 128) if (tn * BN + q < n) cp.async
                q = q[(q < BN) & ((tn * BN + q < n) | ('cp_mask' in mut))]
                if q.size:
                    vals = self.rd(D.sw, tn * BN + q, "sw")
                    for qq, v in zip(q.tolist(), vals.tolist()):
                        cp = CpAsync(B, wsc + qq, t, v, me)
                        self.cps.append(cp)
                        me['pending'].append(cp)
            # cp.async.commit_group
            r0 = tm * WG_BM + c * 64 + w * 16 + (LANE >> 2)
            r1 = r0 + 8
            s0 = np.where(r0 < m, self.rd(D.xs, np.where(r0 < m, r0, 0), "xs"), f32(0)).astype(f32)
            s1 = np.where(r1 < m, self.rd(D.xs, np.where(r1 < m, r1, 0), "xs"), f32(0)).astype(f32)
            if (r0 >= m).any() or (r1 >= m).any():
                COV.add("rows past m")
            acc = np.zeros((16, BN), np.int64)
            groups = []
            left = n - tn * BN
            expect_nb = BN // 64 if left >= BN else cdiv(left, 64)
            for kt in range(0 if 'k0' in mut else kt_b, kt_e):
                yield ('m', B.full[s], ph)
                sa = B.base + s * self.STAGE + c * (64 * 128)
                sb = B.base + s * self.STAGE + WG_A_BYTES
                g = []
                for kk in range(WG_BK // 32):
                    self.wgmma(B, acc, w, qc_desc(sa + 32 * kk), qc_desc(sb + 32 * kk), kt > kt_b or kk > 0, g,
                               (tm * WG_BM, tn * BN, kt, expect_nb), who)
                groups.append(g)  # commit
                if kt > kt_b:
                    groups = self.retire(B, groups, 1, who)
                    B.empty[prev].arrive()  # lane 0
                prev = s
                s += 1
                if s == ST:
                    s, ph = 0, ph ^ 1
                yield None
            groups = self.retire(B, groups, 0, who)
            if kt_e > kt_b:
                B.empty[prev].arrive()
            regs = acc[ROW, COL]  # [lane, i]
            store = True
            if nsp > 1:
                SLOT = 128 * (BN // 2)
                slots = 512 + (t * nsp * 2 + c) * SLOT
                cell = np.arange(BN // 2)[None, :] * 128 + ti[:, None]
                self.work[self.wslot(slots + 2 * spl * SLOT + cell, "slot write")] = regs
                yield None  # __threadfence
                yield ('n', B.nbar[c])
                if w == 0:  # ti == 0
                    word = 2 * t + c
                    if not 0 <= word < 512:
                        raise Fault("counter word %d outside the 512 counters" % word)
                    old = int(self.work[word])
                    self.work[word] += 1
                    B.qc_last[c] = (t, old == (nsp if 'last' in mut else nsp - 1))
                yield None
                if 'split_bar2' not in mut:
                    yield ('n', B.nbar[c])
                ql = B.qc_last[c]
                if ql is None or ql[0] != t:
                    self.err("%s: qc_last[%d] read for tile %d holds %s (race)" % (who, c, t, ql and "tile %d's" % ql[0]))
                store = bool(ql and ql[1])
                COV.add("split %d" % nsp)
                if kt_b == kt_e:
                    COV.add("empty K range")
                if store:
                    for j in range(nsp):
                        if j != spl:
                            regs = regs + self.work[self.wslot(slots + 2 * j * SLOT + cell, "slot read")]
                    if w == 0:
                        self.work[2 * t + c] = 0
            cb = tn * BN + 2 * (LANE & 3)
            J = np.arange(BN // 8)[None, :]
            cn = cb[:, None] + 8 * J
            ok = store & (cn < n)
            if (cn >= n).any():
                COV.add("columns past n")
            q = 8 * J + 2 * (LANE[:, None] & 3)

            def read_sws():
                cells = wsc + np.where(ok, q, 0)
                for cc in (cells, cells + 1):
                    bad = ok & (B.sws_tag[cc] != t)
                    if bad.any():
                        i = np.argwhere(bad)[0]
                        tg = int(B.sws_tag[cc[i[0], i[1]]])
                        self.err("%s: sws[%d] read for tile %d holds %s (race)" %
                                 (who, int(cc[i[0], i[1]]), t, "nothing" if tg < 0 else "tile %d's scale" % tg))
                return B.sws_val[cells], B.sws_val[cells + 1]
            if 'early_read' in mut:
                wv = read_sws()
            for cp in me['pending']:  # cp.async.wait_group 0: this thread's copies
                cp.land()
            me['pending'] = []
            if 'epi_bar' not in mut:
                yield ('n', B.nbar[c])  # then the others'
            else:
                yield None
            if 'early_read' not in mut:
                wv = read_sws()
            w0, w1 = wv
            y0, y1 = r0[:, None] * n, r1[:, None] * n
            a = regs.astype(f32)  # __int2float_rn

            def mul(av, sv, wv):  # __fmul_rn(__fmul_rn(acc, s), w); the 'order' mutation: acc * (s * w)
                return av * (sv[:, None] * wv) if 'order' in mut else (av * sv[:, None]) * wv
            self.store(y0 + cn, mul(a[:, 4 * J[0]], s0, w0), ok & (r0[:, None] < m))
            self.store(y0 + cn + 1, mul(a[:, 4 * J[0] + 1], s0, w1), ok & (r0[:, None] < m))
            self.store(y1 + cn, mul(a[:, 4 * J[0] + 2], s1, w0), ok & (r1[:, None] < m))
            self.store(y1 + cn + 1, mul(a[:, 4 * J[0] + 3], s1, w1), ok & (r1[:, None] < m))
            yield None
        if me['pending']:
            self.err("%s exits with cp.async in flight" % who)


# ---- the scheduler ------------------------------------------------------------------------------------------------------
POLICIES = ("eager", "lazy", "laggard", "starve", "random")


def simulate(L, policy, seed):
    """Runs every block's producer thread and its consumer warps (4 per warpgroup) with the TMA boxes and cp.async
    copies in flight under wgmma_replay's scheduler; `laggard` holds back one warp of each consumer warpgroup,
    `starve` one consumer warpgroup of every block."""
    actors, ready = [], L.ready
    for by in range(L.grid_y):
        for bx in range(L.grid_x):
            B = Block(L, bx, by)
            L.blocks.append(B)
            actors.append(Actor(B.name + " producer", L.producer(B), 'p'))
            for c in range(2):
                for w in range(4):
                    actors.append(Actor("%s consumer %d warp %d" % (B.name, c, w), L.warp(B, c, w), (c, w)))
    ready.extend(actors)
    lag_w, starved = seed % 4, seed % 2

    def held(a):  # laggard: warp lag_w of each consumer warpgroup; starve: consumer warpgroup `starved`
        return a.role != 'p' and (a.role[1] == lag_w if policy == "laggard" else a.role[0] == starved)

    def tidy():  # cp.async copies that landed at their warp's wait_group leave the queue
        if L.cps and L.cps[0].landed:
            L.cps[:] = [cp for cp in L.cps if not cp.landed]
            return True
        return False
    rp.run_actors(actors, ready, [L.tmas, L.cps], policy, seed, 3000000, held=held, tidy=tidy)


def check(L):
    D = L.D
    errs = list(L.errors) + rp.write_errors(L.writes, L.n)
    y, ref = L.y.reshape(L.m, L.n), D.ref
    yn, rn = np.isnan(y), np.isnan(ref)
    bad = (yn != rn) | (~yn & (y.view(np.uint32) != ref.view(np.uint32)))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        errs.append("%d outputs not bit-exact (first y[%d,%d] = %.9g, ref %.9g)" % (int(bad.sum()), i, j, y[i, j], ref[i, j]))
    if L.work[:512].any():
        errs.append("%d workspace counters left non-zero" % int(np.count_nonzero(L.work[:512])))
    for B in L.blocks:
        for bar in B.full + B.empty:
            if not bar.at_rest():
                errs.append("%s: %s not at rest at exit" % (B.name, bar.name))
                break
        for nb in B.nbar:
            if nb.arrived:
                errs.append("%s: named %s has %d warps waiting at exit" % (B.name, nb.name, nb.arrived))
    return errs


def run_case(m, n, k, grid_x=None, grid_y=None, mut=frozenset(), policies=POLICIES, seed=0, D=None):
    hx, hy, _ = wgmma_dims(m, n, k)
    gx, gy = grid_x or hx, grid_y or hy
    D = D or Data(m, n, k, seed)
    BN = qc_wg_bn(m, n)
    desc = "m=%4d n=%5d k=%5d BN %d ST %d grid %dx%d" % (m, n, k, BN, ST_OF[BN], gx, gy)
    return rp.replay(policies, seed, lambda: Launch(D, gx, gy, mut), simulate, check), desc


T = rp.Tally("test_int8_wgmma_emu", VERBOSE)
report = T.report


# ---- source-text checks ---------------------------------------------------------------------------------------------------
ANCHORS = [  # lines the model transcribes; a change here means the model needs a look
    "const int bns[3] = {256, 192, 128}, eff[3] = {100, 96, 88};",
    "qc_mbar_init(empty + 8 * s, 8);",
    "qc_mbar_init(full + 8 * s, 1);",
    "qc_mbar_wait(empty + 8 * s, ph ^ 1u);",
    "qc_mbar_wait(full + 8 * s, ph);",
    "const int kt_b = (int)((long long)kt_n * spl / nsp), kt_e = (int)((long long)kt_n * (spl + 1) / nsp);",
    "const int nb = left >= BN ? BN / 64 : (int)((left + 63) / 64);",
    "for (int kt = kt_b; kt < kt_e; kt++) {",
    "if (kt > kt_b) {",
    "qc_wg_wait<1>();",
    "if (kt_e > kt_b && lane == 0) qc_mbar_arrive(empty + 8 * prev);",
    "for (int q = tid & 127; q < BN; q += 128)",
    "if (tn * BN + q < n)",
    "cp.async.wait_group 0;",
    "if (ti == 0) qc_last[c] = atomicAdd(work + 2 * t + c, 1) == nsp - 1;",
    "int *slots = work + 512 + ((long long)t * nsp * 2 + c) * SLOT;",
    "slots[2 * spl * SLOT + i * 128 + ti] = acc[i];",
    "if (ti == 0) work[2 * t + c] = 0;",
    "if (store && cn < n) {",
    "const float2 w = *(const float2 *)(wsc + 8 * j + 2 * (lane & 3));",
    "__fmul_rn(__fmul_rn(__int2float_rn(acc[4 * j]), s0), w.x)",
    "__syncthreads();",
]


def store_loop_body(src):
    """The body of the epilogue's store loop: the first `for (int j = 0; j < BN / 8; j++)` after the wait."""
    i = src.index("cp.async.wait_group 0;")
    i = src.index("for (int j = 0; j < BN / 8; j++)", i)
    i = src.index("{", i)
    depth, j = 0, i
    while True:
        depth += {'{': 1, '}': -1}.get(src[j], 0)
        if depth == 0:
            return src[i:j + 1]
        j += 1


def scale_loads_outside_store_loop(src):
    try:
        body = store_loop_body(src)
    except ValueError:
        return False, "store loop not found"
    hits = re.findall(r"[^\n]*\b(?:xs|sw)\b[^\n]*", body)
    if hits:
        return False, "load in the store loop: %s" % hits[0].strip()
    cons = src.index("setmaxnreg.inc")
    kloop = src.index("for (int kt = kt_b; kt < kt_e; kt++)", cons)
    if not re.search(r"\bxs\[r0\]", src[cons:kloop]) or not re.search(r"\bsw \+ tn \* BN \+ q", src[cons:kloop]):
        return False, "row or column scales not loaded before the consumer's K loop"
    return True, "xs/sw loaded at tile start, none in the store loop"


def source_checks():
    missing = [a for a in ANCHORS if a not in WGMMA_SRC]
    report(not missing, "WGMMA_SRC (%d chars parsed from the C file) holds the transcribed lines: %s" %
           (len(WGMMA_SRC), missing[:2] or "%d anchors" % len(ANCHORS)))
    nbar = WGMMA_SRC.count('bar.sync %0, 128;')
    report(nbar == 4, "WGMMA_SRC has the 4 named barriers modelled (tile start, 2 in the split path, epilogue): %d" % nbar)
    cases = re.findall(r"case (\d+): qc_wg_gemm<(\d+), (\d+)>", WGMMA_SRC)
    dflt = re.findall(r"default: qc_wg_gemm<(\d+), (\d+)>", WGMMA_SRC)
    got = {int(a): int(c) for a, b, c in cases if a == b}
    got.update({int(b): int(c) for b, c in dflt})
    report(got == ST_OF, "the entry's switch <BN, ST> = %s (model %s)" % (got, ST_OF))
    host = re.search(r"static void wgmma_plan\(.*?bns\[3\] = \{([\d, ]+)\}, eff\[3\] = \{([\d, ]+)\}, sts\[3\] = \{([\d, ]+)\}",
                     C_TEXT, re.S)
    ok = host is not None and host.group(1) == "256, 192, 128" and host.group(2) == "100, 96, 88" and \
        [int(x) for x in host.group(3).split(",")] == [ST_OF[b] for b in (256, 192, 128)]
    report(ok, "host wgmma_plan's tables equal the device's and the switch's stages")
    m_ok = re.search(r"#define I8_SPLIT_MAX (\d+)", C_TEXT) and re.search(r"#define I8_SPLIT_STAGES (\d+)", C_TEXT)
    report(bool(m_ok) and int(m_ok.group(0).split()[-1]) == I8_SPLIT_STAGES, "I8_SPLIT_STAGES = %d" % I8_SPLIT_STAGES)
    ok, why = scale_loads_outside_store_loop(WGMMA_SRC)
    report(ok, "row/column scales: %s" % why)
    return ok


def host_checks():
    probs = []
    for m in list(range(1, 400, 3)) + [511, 512, 513, 1024, 1100, 2047, 4096, 8192, 16384]:
        for n in list(range(16, 1600, 16)) + [2048, 4096, 5648, 6144, 8464, 11264, 12688, 14336, 28672]:
            if qc_wg_bn(m, n) != wgmma_plan(m, n)[0]:
                probs.append("qc_wg_bn(%d, %d) = %d, wgmma_plan %d" % (m, n, qc_wg_bn(m, n), wgmma_plan(m, n)[0]))
    report(not probs, "qc_wg_bn (device) equals wgmma_plan (host): %s" % (probs[:2] or "m 1..16384 x n 16..28672"))
    probs = []
    for m in (1, 9, 16, 64, 129, 300, 512, 1024, 4096, 8192):
        for n in (16, 144, 400, 1040, 2048, 4096, 5648, 8464, 14336, 28672):
            for k in (16, 400, 3072, 6160, 9232, 12304, 16384, 28672):
                bn, st, smem, tiles = wgmma_plan(m, n)
                tag = "m=%d n=%d k=%d" % (m, n, k)
                kt_n = cdiv(k, WG_BK)
                if smem + SMEM_STATIC > SMEM_OPTIN:
                    probs.append("%s: %d + %d bytes of shared memory" % (tag, smem, SMEM_STATIC))
                if st != ST_OF[bn] or 2 * st > 12:
                    probs.append("%s: %d stages" % (tag, st))
                for smax in range(1, I8_SPLIT_MAX + 1):
                    gx, gy, _ = wgmma_dims(m, n, k, smax)
                    if gy > 1:
                        if tiles >= WG_SMS or gx != tiles:
                            probs.append("%s: split %d with %d tiles" % (tag, gy, tiles))
                        if kt_n // gy < I8_SPLIT_STAGES:
                            probs.append("%s: split %d of %d stages leaves a split under %d" % (tag, gy, kt_n, I8_SPLIT_STAGES))
                        if gy > smax or tiles * gy > WG_SMS:
                            probs.append("%s: split %d x %d tiles, more than one pass" % (tag, gy, tiles))
                    if 512 + 2 * tiles * gy * 128 * (bn // 2) > I8_WORK_BYTES // 4 and gy > 1 or 2 * tiles > 512 and gy > 1:
                        probs.append("%s: split %d x %d tiles overflows the workspace" % (tag, gy, tiles))
    report(not probs, "wgmma_dims: shared memory fits %d, splits only under %d tiles with >= %d stages each, "
           "workspace covers the slots: %s" % (SMEM_OPTIN, WG_SMS, I8_SPLIT_STAGES, probs[:3] or "sweep"))
    probs = rp.tile_walk_gaps(20, 12)
    report(not probs, "qc_wg_tile covers each tile once: %s" % (probs[:3] or "1..20 x 1..12"))


def group(name, cases):
    t0, ok0 = time.time(), T.passed
    for c in cases:
        kw = dict(c[3]) if len(c) > 3 else {}
        errs, desc = run_case(*c[:3], seed=len(name) * 100 + T.passed + T.failed, **kw)
        report(not errs, "%s: %s" % (desc, "; ".join(errs[:3]) if errs else "bit-exact"))
    print("test_int8_wgmma_emu: %-22s %2d of %2d cases pass x %d interleavings (%.1f s)" %
          (name, T.passed - ok0, len(cases), len(POLICIES), time.time() - t0))


src_ok = source_checks()
host_checks()
print("test_int8_wgmma_emu: source and host rules: %d checks, %d failed" % (T.passed + T.failed, T.failed))

group("host plan", [
    (1, 16, 16),            # one stage, one tile (xs without specials at m = 1)
    (9, 144, 400),          # partial tile, k tail
    (16, 400, 3200),        # 4 tiles, 25 stages: no split (under 2 x 24)
    (9, 144, 12304),        # 2 tiles, 97 stages: split 4, k tail
    (64, 1040, 6160),       # 9 tiles: split 2, k tail
    (129, 144, 9232),       # 4 tiles: split 3 of 73 stages
    (300, 1040, 144),       # 3 x 9 tiles
    (300, 5648, 16),        # BN 192 on the host's 90 blocks, k of 16
])
group("wide tiles, small grid", [
    (300, 8464, 144, dict(grid_x=10)),   # BN 256, 102 tiles on 10 blocks, last tile 16 columns wide
    (129, 8464, 400, dict(grid_x=9)),    # BN 192, 90 tiles on 9 blocks, last tile 16 wide, k tail
    (64, 1040, 1040, dict(grid_x=2)),    # BN 128, 9 tiles on 2 blocks, ring wraps
])
group("forced grid / split", [
    (16, 400, 400, dict(grid_y=3)),            # 4 stages in 3 splits
    (9, 144, 208, dict(grid_y=4)),             # 2 stages in 4 splits: two empty K ranges
    (1, 16, 16, dict(grid_y=2)),               # one stage, split 0 empty
    (129, 400, 1040, dict(grid_x=3, grid_y=2)),  # 8 tiles on 3 blocks, split 2
    (300, 144, 400, dict(grid_x=1, grid_y=4)),   # every tile in one block row, split 4, k tail
    (64, 1040, 272, dict(grid_x=4, grid_y=3)),   # 9 tiles on 4 blocks, split 3
])
want = ["BN %d partial tile" % b for b in (128, 192, 256)] + ["ring wrap ST %d" % s for s in (4, 5, 6)] + \
    ["split 2", "split 3", "split 4", "empty K range", "several tiles a block", "rows past m", "columns past n",
     "special xs"]
missing = [x for x in want if x not in COV]
report(not missing, "coverage: %s" % ("missing " + ", ".join(missing) if missing else "%d paths" % len(want)))
print("test_int8_wgmma_emu: coverage: %s" % ("MISSING " + ", ".join(missing) if missing else ", ".join(want)))

MUTATIONS = [
    ("tile_bar", "drop the tile-start bar.sync before the cp.async of the column scales"),
    ("early_read", "read sws before cp.async.wait_group 0"),
    ("epi_bar", "skip the epilogue's bar.sync after the wait"),
    ("split_bar2", "drop the split path's second bar.sync (qc_last read before written)"),
    ("last", "last-arriver test == nsp instead of == nsp - 1"),
    ("k0", "consumer K loop starts at 0 instead of kt_b"),
    ("prod_parity", "producer waits empty with parity ph instead of ph ^ 1"),
    ("order", "epilogue multiplies acc * (xs * sw) instead of (acc * xs) * sw"),
    ("cp_mask", "the cp.async of the column scales without its `tn * BN + q < n` test"),
]
MUT_CASES = [(129, 400, 1040, dict(grid_x=3, grid_y=2)), (64, 1040, 400, dict(grid_x=2)),
             (300, 144, 400, dict(grid_x=1, grid_y=4))]


def caught(c, name):  # the first error of the mutated case
    errs, desc = run_case(*c[:3], mut=frozenset([name]), seed=17, **c[3])
    return "%s: %s" % (desc, errs[0]) if errs else None


T.hunt(MUTATIONS, MUT_CASES, caught)

# the row-scale load moved after the stores (a performance bug): the text check must fail on a mutated copy
_line = "const float s0 = r0 < m ? xs[r0] : 0.f, s1 = r1 < m ? xs[r1] : 0.f;"
if _line in WGMMA_SRC:
    _mut = WGMMA_SRC.replace(_line, "float s0, s1;", 1)
    _mut = _mut.replace("if (store && cn < n) {", "if (store && cn < n) {\n" + _line.replace("const float ", ""), 1)
    _ok, _why = scale_loads_outside_store_loop(_mut)
    print("test_int8_wgmma_emu: mutation %-12s %s -- row-scale load moved into the store loop (text check: %s)" %
          ("xs_late", "NOT DETECTED" if _ok else "detected", _why))
    report(not _ok, "mutation xs_late")
else:
    report(False, "mutation xs_late: the row-scale line is not in WGMMA_SRC")

print("test_int8_wgmma_emu: runtime %.1f s" % (time.time() - T0))
T.finish()
