# test_fp8_wgmma_emu.py - plugins/fp8/cuda/wgmma.cu (the fp8 W8A8 wgmma GEMM) replayed on the CPU, no GPU needed.
# A line-by-line transcription of the kernel's index and synchronization logic and of its host side (fp8_wgmma_plan,
# fp8_wgmma_splits, wgmma_dims, FP8_WORK_BYTES in plugins/fp8/fp8_kernels.c, qc_split_k_ways in qc_split_k.h); keep
# it in step with the kernel (what it shares with the int8 kernel's replay: in wgmma_replay.py).  Each block's
# producer thread and its two consumer warpgroups are separate actors over the same tile sequence, run by a scheduler
# that picks any runnable actor (eager, lazy-copy, starved-consumer and random interleavings per case; every TMA box
# lands as its own event), over mbarriers modelled as PTX defines them
# (arrival count, tx count, phase parity: a wait passes once the phase of that parity completed, so a fresh barrier
# passes parity 1 at once).  Transcribed: the ring's slot and phase walk, expect_tx bytes and the boxes past n that are
# not loaded (W in boxes of choose_wbox's rows: 128 by default, 64 with 192 columns in the plan, 32 with 160,
# QC_FP8_WBOX where it divides them; the device's WG_BOX_ROWS the same; a box partly past n lands whole, zeros past n,
# and counts all its bytes; a stage's W rows are kept as 32-row pieces, so a box of the map's rows that the device
# placed for other rows shows), the descriptors (decoded back into the stage rows and k32 slice they address), `issued`
# (the next tile's first stage issued before the epilogue), the per-warp empty arrivals, the promotion every FP8_P
# stages, the block mode's scales one stage ahead, the K range [kt_b, kt_e) of each split, the slots, counters and the
# last arriver's sum in split order, the epilogue's scale products and masked stores into a NaN-poisoned y, the wgmma
# wait after the epilogue; and the pair builds (FP8_CLUSTER=2): row-tile pairs on clusters of two blocks, each block's
# half of the w boxes multicast into both rings (two boxes in flight, landing independently), empty barriers of 16
# arrivals fed by both blocks' consumer warps, the cluster barrier before exit (an arrival on an exited block fails).
# The tile widths 256, 192, 160, 128 under the plan's weights (each build's own g_fp8_eff, since session 22 0/0/0/90
# for all: 128 only, and the device's switch compiles no width of weight 0; QC_FP8_BN_EFF, which the cases may pass
# (EFF_S20 = 110,0,0,90: session 20-21's 256 and 128), sets both, host and device alike; 0 never takes a width; the pair
# builds never take 256).  Ring stages FP8_ST256/192/160/128 = 4, 4, 4, 6 (the host's sts, g_fp8_st128 = 6): 128-column
# tiles stage no bf16 rows (FP8_STG128 0); QC_FP8_ST128=N (2..5; the cases' st128) sets FP8_ST128 N, FP8_STG128 1 and
# the host's staging, the layout before session 22.  FP8_DBL128 (default; BN 128, FP8_P 1, no clusters): two
# accumulators; from each range's kt_b, while FP8_DBL_TURN (the source's default: 8, the block build 16; the cases' turn) stages are left, a
# turn of them alternating acc and acc1 (stage q issued, wait_group 1, stage q - 1's empty arrivals and promotion with
# its scale products, taken after its issue; wait_group 0 and the last stage's at the turn's end), then pairs (kt into
# acc, kt + 1 into acc1, wait_group 1, kt's empty arrivals and promotion, wait_group 0, kt + 1's), a lone last stage
# alone, the next tile's first stage pre-issued into acc; wgmma
# groups are modelled as PTX has them (committed in order, wait_group N completes all but the newest N, an accumulator's
# registers unreadable (NaN) until the group writing it completes).  BN 256 runs each stage as NH = 2 halves of BNW =
# 128 columns through one acc: half h's W descriptor h * BNW * 128 bytes further, the full-barrier wait at h = 0 only,
# the empty arrivals after the last half, half h promoted into tot[64 h ..] (block mode: weight block b0 + h's scales),
# only half 0 of the next tile's
# first stage pre-issued, workspace slots of 128 sums.  The optional bf16 output (y.bf16): at 192, 160 (and 128 with
# QC_FP8_ST128 <= 5) staged rows after the ring (addresses checked against the shared memory the host sizes) copied
# out by bulk copies that read the staging when they land (a wait_group.read before the rows are rewritten, a
# wait_group before exit); straight from the registers at 128 (every mode, n % 16 == 0) and 256 (channel and block
# modes): lanes 2q, 2q + 1 swap their chunk pairs through a shuffle and store 8 bytes each; otherwise (256's tensor
# mode, n % 16 != 0) and in the pair builds 4 bytes.  wgmma itself is a plain matrix product
# here: each k32 step exact in float64, rounded to f32, handed to the threads through the m64nNk32 accumulator layout;
# it reads its stage when issued and the stage is checked unchanged when its group completes.  Not
# modelled: the tensor cores' shorter accumulator inside a stage, threads of one warpgroup running apart (a warpgroup
# is one actor in lockstep, so named barriers, cp.async groups and setmaxnreg hold trivially), memory ordering (every
# write is visible at once: no fences), the 128-byte swizzle's byte placement and the tensor maps' encoding.  A
# deadlock (nothing runnable, something unfinished) fails the case, as does a stage overwritten under a wgmma or read
# before it holds its data, an output written twice, never or past y, a workspace counter left non-zero, y differing
# between interleavings, or y away from a float64 reference (bf16: within its rounding).  The transcribed tables and
# key lines are checked against the sources (a change there fails until this follows).  Deliberate bugs are injected
# at the end to show that the checks fire.  Exit 77 (skip) without numpy.
import os, sys, time
try:
    import numpy as np
except ImportError:
    print("test_fp8_wgmma_emu: skip: numpy is not installed")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # wgmma_replay.py, whatever the working directory
import wgmma_replay as rp
from wgmma_replay import (WG_SMS, WG_BM, WG_BK, WG_GROUP_M, Actor, Fault, MBar, TmaBox, cdiv, qc_desc,
                          qc_split_k_ways, qc_wg_tile, tile_walk)

T0 = time.time()
f32, f64 = np.float32, np.float64
VERBOSE = bool(os.environ.get("QC_FP8_WGMMA_EMU_VERBOSE"))

# ---- constants of wgmma.cu / fp8_kernels.c (WG_SMS, WG_BM, WG_BK, WG_GROUP_M: wgmma_replay's) ---------------------
WG_A_BYTES = WG_BM * WG_BK
WG_BOX_ROWS = 128  # the device's default rows of W per TMA box (-DWG_BOX_ROWS=R when choose_wbox picks another R)
PIECE = 32  # the emulator keeps a stage's W rows as pieces of 32 (the smallest box), whatever the boxes' rows
WG_SW = 256  # column scales per buffer: the widest tile
QC_FP8_BLOCK = 128
FP8_BNS = (256, 192, 160, 128)  # fp8_wgmma_plan's bns, qc_wg_bn's bns
# FP8_ST256, FP8_ST192, FP8_ST160, FP8_ST128 defaults (the host's sts; 128: FP8_ST128 = (FP8_STG128 ? 5 : 6) with
# FP8_STG128 0, the host's g_fp8_st128 = 6: no bf16 staging at 128)
FP8_ST = {256: 4, 192: 4, 160: 4, 128: 6}
ST128_DEF, ST128_STAGED = 6, 5  # g_fp8_st128's default; FP8_ST128's default and bound with FP8_STG128 1
# the plan's speed weights of 256/192/160/128 columns (0: never that width): g_fp8_eff[0] = FP8_EFF* of the row-scaled
# builds (channel, tensor), g_fp8_eff[1] = the block build's; QC_FP8_BN_EFF replaces both
EFF_ROW, EFF_BLOCK = (0, 0, 0, 90), (0, 0, 0, 90)  # g_fp8_eff[0], [1] (session 22: 128 only)
EFF_S20 = (110, 0, 0, 90)  # QC_FP8_BN_EFF=110,0,0,90: the defaults of sessions 20-21 (256 and 128)
EFF_S19 = (110, 100, 0, 90)  # QC_FP8_BN_EFF=110,100,0,90: the row builds' weights of session 19 (192 in: 64-row boxes)
EFF_OLD = (0, 100, 96, 90)  # QC_FP8_BN_EFF=100,96,90 (the three-width form: 256 off), the weights before session 19
EFF_256 = (100, 0, 0, 0)  # QC_FP8_BN_EFF=100,0,0,0: 256 columns wherever allowed (the pair builds: 128)
WG_STG_PAD = 16  # bytes after each staged bf16 output row
FP8_SPLIT_MAX = 4
FP8_WORK_BYTES = 2048 + WG_SMS * 2 * 128 * 128 * 4  # slots of 128 sums a thread (the widest tile's, BN 256)
FP8_WORK_BYTES_96 = 2048 + WG_SMS * 2 * 128 * 96 * 4  # the size before BN 256 (the mutation work96)
X_BOX_ROWS = 128  # MAPS_W8A8: xq boxes of WG_BM rows, w boxes of choose_wbox's rows (128 by default), both WG_BK wide
SMEM_OPTIN = 232448  # sm_90's dynamic + static shared memory per block
# bars, sws (read in the channel mode only: the other builds are taken to drop it), and qc_last[2] of each
# qc_fp8_gemm instantiation (a function-scope __shared__: one per BN, 4 unpaired)
SMEM_STATIC = {0: 2 * 6 * 8 + 2 * 2 * WG_SW * 4 + 4 * 2 * 4, 1: 2 * 6 * 8 + 4 * 2 * 4, 2: 2 * 6 * 8 + 4 * 2 * 4}
DYN0 = 0x0D00  # shared-window address of the dynamic smem (after the static arrays; any value works)

SRC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../plugins/fp8")
with open(os.path.join(SRC_DIR, "cuda/wgmma.cu")) as _f:
    KSRC = _f.read()
with open(os.path.join(SRC_DIR, "fp8_kernels.c")) as _f:
    HSRC = _f.read()
# FP8_DBL_TURN's default, as the source has it (host_checks fails unless it is one of 2, 4, 8, 16); the cases that
# pass turn= model other builds of it
_turn = __import__("re").findall(r"#define FP8_DBL_TURN \(FP8_MODE == 2 \? (\d+) : (\d+)\)\n", KSRC)
TURN_BLOCK, TURN_ROW = (int(_turn[0][0]), int(_turn[0][1])) if len(_turn) == 1 else (16, 8)
FP8_DBL_TURN = None  # a case's default turn: its mode's (turn_of)


def turn_of(mode):  # FP8_DBL_TURN's default in the build of FP8_MODE mode
    return TURN_BLOCK if mode == 2 else TURN_ROW

MODES = ("channel", "tensor", "block")
COV = set()  # which paths of the kernel the cases took (checked against the list at the end of the case groups)
TOL = 1e-5  # see check(): the model's own f32 roundings, not the tensor cores' (test_gpu_fp8.c's 2e-3 covers those)


# ---- host side: fp8_kernels.c and qc_split_k.h --------------------------------------------------------------------
def eff_of(mode):  # the default weights of a build: g_fp8_eff[block != 0]
    return EFF_BLOCK if mode == 2 else EFF_ROW


def fp8_wgmma_plan(m, n, pair=False, eff=EFF_ROW, st128=ST128_DEF, mut=()):
    """eff: g_fp8_eff[block] (QC_FP8_BN_EFF); st128: g_fp8_st128 (QC_FP8_ST128); mut: the host's mutations"""
    bns, sts = FP8_BNS, (4, 4, 4, 5 if 'host_sts5' in mut else st128)
    tm, best = cdiv(m, WG_BM) if m > 0 else 0, -1
    if pair:
        tm = (tm + 1) & ~1
    pick = 3
    for i in range(4):
        if eff[i] <= 0 or (pair and bns[i] == 256):
            continue
        tn = cdiv(n, bns[i]) if n > 0 else 0
        waves = cdiv(tm * tn, WG_SMS)
        score = tm * n * eff[i] // (waves * bns[i]) if waves > 0 else 0
        if score > best:
            best, pick = score, i
    bn, st = bns[pick], sts[pick]
    # the ring, then the bf16 output's staging (not at 256, nor at 128 with 6 stages): a row of BN * 2 + WG_STG_PAD
    # bytes per row of the tile
    staged = bn != 256 and not (bn == 128 and (st128 == 6 or 'host_nostg' in mut))
    smem = st * (WG_BM * WG_BK + bn * WG_BK) + (WG_BM * (bn * 2 + WG_STG_PAD) if staged else 0) + 1024
    return bn, st, smem, tm * cdiv(n, bn) if n > 0 else 0


def read_st128(env):
    """fp8_kernels.c's read_st128: QC_FP8_ST128 (None: unset) -> (g_fp8_st128, the -D options it appends); qc_env_int's
    strtol number (leading blanks, a sign) with nothing after it, 2..6, else ignored (empty: quietly, else warned)."""
    import re
    if env is None:
        return ST128_DEF, []
    mt = re.match(r"[ \t\n\v\f\r]*[+-]?\d+", env)
    if not mt or mt.end() != len(env) or not 2 <= int(mt.group()) <= 6:
        return ST128_DEF, []
    v = int(mt.group())
    return v, ["-DFP8_ST128=%d" % v, "-DFP8_STG128=%d" % (0 if v == 6 else 1)]


def fp8_wgmma_splits(tiles, k):
    return qc_split_k_ways(tiles, cdiv(k, WG_BK) if k > 0 else 0, WG_SMS, 4, FP8_SPLIT_MAX)


def wgmma_dims(m, n, k, pair=False, eff=EFF_ROW, st128=ST128_DEF):  # wgmma_dims / wgmma_pair_dims
    bn, st, smem, tiles = fp8_wgmma_plan(m, n, pair, eff, st128)
    grid_x = min(tiles, WG_SMS)  # dims_1d (tiles < 65535 * 32 here; paired, tiles and WG_SMS are even)
    return grid_x, fp8_wgmma_splits(tiles, k), smem


def wbox_fits(tables, r):  # fp8_kernels.c's wbox_fits: r divides 128 and every width with a nonzero weight in either
    return r > 0 and 128 % r == 0 and all(t[i] <= 0 or FP8_BNS[i] % r == 0 for t in tables for i in range(4))


def choose_wbox(tables=(EFF_ROW, EFF_BLOCK), env=None):
    """fp8_kernels.c's choose_wbox: W's rows per TMA box, the largest of 128, 64, 32 dividing every tile width with a
    nonzero weight in either g_fp8_eff table (QC_FP8_BN_EFF sets both) and 128 (the kernel always holds the 128-column
    path); env (QC_FP8_WBOX: 32, 64, 128) replaces it when it divides them too, else it is ignored (256 always).  The
    map's box rows; the device gets them as WG_BOX_ROWS."""
    wbox = 128 if wbox_fits(tables, 128) else 64 if wbox_fits(tables, 64) else 32
    if env is not None and env in (32, 64, 128) and wbox_fits(tables, env):
        wbox = env
    return wbox


def wbox_builds(eff, rows):  # wgmma.cu's #error: WG_BOX_ROWS divides 128 and every tile width built in (FP8_EFF* > 0)
    return 128 % rows == 0 and all(e <= 0 or bn % rows == 0 for bn, e in zip(FP8_BNS, eff))


# ---- device helpers: wgmma.cu ---------------------------------------------------------------------------------------
def qc_wg_bn(m, n, pair=False, eff=EFF_ROW):  # eff: -DFP8_EFF256/192/160/128; pair: FP8_CLUSTER == 2
    bns, e = FP8_BNS, (0 if pair else eff[0], eff[1], eff[2], eff[3])
    tm, best = (m + WG_BM - 1) // WG_BM, -1
    if pair:
        tm = (tm + 1) & ~1
    pick = 128
    for i in range(4):
        if e[i] <= 0:
            continue
        tn = (n + bns[i] - 1) // bns[i]
        waves = (tm * tn + WG_SMS - 1) // WG_SMS
        score = tm * n * e[i] // (waves * bns[i])
        if score > best:
            best, pick = score, bns[i]
    return pick


def entry_bn(m, n, pair=False, eff=EFF_ROW):
    """the entry's switch on qc_wg_bn: its cases compiled only for widths of weight > 0 (`#if FP8_CLUSTER == 1 &&
    FP8_EFF256 > 0`, `#if FP8_EFF192 > 0`, `#if FP8_EFF160 > 0`), default 128"""
    bn = qc_wg_bn(m, n, pair, eff)
    built = {256: not pair and eff[0] > 0, 192: eff[1] > 0, 160: eff[2] > 0}
    return bn if built.get(bn, False) else 128


def qc_desc_lo(addr):
    return (((addr & 0x3FFFF) >> 4) | (1 << 16)) & 0xFFFFFFFF


def qc_desc_of(lo):
    return (lo & 0xFFFFFFFF) | ((1024 >> 4) << 32) | (1 << 62)


# ---- E4M3 -------------------------------------------------------------------------------------------------------------
def e4m3_value(c):
    sign = -1.0 if c & 0x80 else 1.0
    e, mant = (c >> 3) & 15, c & 7
    if (c & 0x7F) == 0x7F:
        return np.nan
    return sign * (mant / 8.0 * 2.0 ** -6 if e == 0 else (1 + mant / 8.0) * 2.0 ** (e - 7))


LUT = np.array([e4m3_value(c) for c in range(256)])

# The m64nNk32 f32 accumulator layout (PTX ISA, wgmma D fragments; the kernel's comment at the epilogue): register
# i of thread ti holds row 16 warp + lane/4 (+8 for i%4 >= 2), column 8 (i/4) + 2 (lane%4) + i%2.
TI = np.arange(128)
WARP, LANE = TI >> 5, TI & 31


def acc_layout(BN):
    i = np.arange(BN // 2)
    rows = 16 * WARP[:, None] + (LANE[:, None] >> 2) + 8 * ((i[None, :] >> 1) & 1)
    cols = 8 * (i[None, :] >> 2) + 2 * (LANE[:, None] & 3) + (i[None, :] & 1)
    return rows, cols


LAYOUT = {bn: acc_layout(bn) for bn in (128, 160, 192)}  # BN 256: two halves of 128 through the one acc


def bf16_bits(v):  # cvt.rn.bf16x2.f32's halves: nearest even (finite values), NaN -> 0x7FFF
    u = np.asarray(v, f32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FFF), r)


def bf16_f32(b):
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(f32)


class Data:
    """One problem: codes, scales, the float64 reference and S (sum |a w| times the scales, per output)."""

    def __init__(self, mode, m, n, k, seed):
        rng = np.random.default_rng(seed)
        self.mode, self.m, self.n, self.k = mode, m, n, k
        self.kt_n = cdiv(k, WG_BK)
        X = rng.integers(0, 256, size=(m, k)).astype(np.uint8)
        W = rng.integers(0, 256, size=(n, k)).astype(np.uint8)
        X[(X & 0x7F) == 0x7F] -= 1  # no NaN codes
        W[(W & 0x7F) == 0x7F] -= 1
        self.Xd, self.Wd = LUT[X], LUT[W]
        nblk = cdiv(n, QC_FP8_BLOCK)
        if mode == 2:
            self.xs = rng.uniform(0.5, 2.0, size=m * self.kt_n).astype(f32)
            self.ws = rng.uniform(0.5, 2.0, size=nblk * self.kt_n).astype(f32)
            self.ref, self.S = np.zeros((m, n)), np.zeros((m, n))
            for g in range(self.kt_n):
                sl = slice(g * WG_BK, min(k, (g + 1) * WG_BK))
                sc = self.xs.reshape(m, -1)[:, g].astype(f64)[:, None] * \
                    np.repeat(self.ws.reshape(nblk, -1)[:, g].astype(f64), QC_FP8_BLOCK)[None, :n]
                self.ref += (self.Xd[:, sl] @ self.Wd[:, sl].T) * sc  # exact sums: < 2^53 in units of 2^-18
                self.S += (np.abs(self.Xd[:, sl]) @ np.abs(self.Wd[:, sl]).T) * sc
        else:
            self.xs = rng.uniform(0.5, 2.0, size=m).astype(f32)
            self.ws = rng.uniform(0.5, 2.0, size=1 if mode == 1 else n).astype(f32)
            sc = self.xs.astype(f64)[:, None] * (np.full(n, f64(self.ws[0])) if mode == 1 else self.ws.astype(f64))[None, :]
            self.ref = (self.Xd @ self.Wd.T) * sc
            self.S = (np.abs(self.Xd) @ np.abs(self.Wd).T) * sc
        self.boxes = {}

    def box(self, which, c0, c1):
        """A TMA box (128 rows of xq) or a 32-row piece of one of w's boxes: rows c1.., K bytes c0..c0+127; out of
        the tensor reads zeros."""
        key = (which, c0, c1)
        b = self.boxes.get(key)
        if b is None:
            M, rows = (self.Xd, X_BOX_ROWS) if which == 'x' else (self.Wd, PIECE)
            b = np.zeros((rows, WG_BK))
            r_lo, r_hi = max(c1, 0), min(c1 + rows, M.shape[0])
            k_lo, k_hi = max(c0, 0), min(c0 + WG_BK, M.shape[1])
            if r_lo < r_hi and k_lo < k_hi:
                b[r_lo - c1:r_hi - c1, k_lo - c0:k_hi - c0] = M[r_lo:r_hi, k_lo:k_hi]
            self.boxes[key] = b
        return b


class Block:
    def __init__(self, L, bx, by):
        self.L, self.bx, self.by = L, bx, by
        self.name = "block (%d,%d)" % (bx, by)
        # qc_fp8_gemm's prologue (tid 0, then __syncthreads)
        self.base = (DYN0 + 1023) & ~1023
        self.full = [MBar("full[%d]" % s, 1, L.ready) for s in range(L.ST)]
        # 8 * FP8_CLUSTER: each consumer warp of both blocks of a pair arrives on its own and its partner's
        ne = (4 if 'empty4' in L.mut else 8) * (1 if not L.pair or 'empty8p' in L.mut else 2)
        self.empty = [MBar("empty[%d]" % s, ne, L.ready) for s in range(L.ST)]
        self.rank, self.partner, self.exited = bx & 1, None, False  # %cluster_ctarank; the other block (simulate)
        self.sa = [None] * L.ST  # the x box a stage holds: ('x', c0, c1), None = never written
        self.sb = [[None] * (L.BN // PIECE) for _ in range(L.ST)]  # its w rows, in pieces of 32 (from the boxes)
        self.sws = [np.full(WG_SW, np.nan, f32) for _ in range(4)]  # stale shared memory
        self.cp_pending = {}
        self.filled, self.used = 0, [0, 0]
        # the dynamic shared memory past the ring (the bf16 staging rows; none at BN 256), as bf16 words
        self.stg_lo = self.base + L.ST * L.STAGE
        self.stg = np.full(max(0, (DYN0 + L.smem_bytes - self.stg_lo) // 2), 0x7FC1, np.uint16)
        self.bulk = [BulkGroup("%s consumer %d's bulk copies" % (self.name, c), L.ready) for c in range(2)]
        nsp = L.grid_y if L.work else 1
        spl = by if L.work else 0
        self.nsp, self.spl = nsp, spl
        self.kt_b, self.kt_e = L.kt_n * spl // nsp, L.kt_n * (spl + 1) // nsp
        if L.tiles_m > WG_GROUP_M:
            COV.add("row tiles past a group of 8")

    def snapshot(self, st):
        return (self.sa[st], tuple(self.sb[st]))


class WBox(TmaBox):
    """A box of W in flight: nbytes / 128 rows from W row tag[2] on, into the stage's 32-row pieces from `slot` on
    (a partly-past box lands whole, zeros past n, and counts all its bytes)."""
    __slots__ = ()

    def land(self):
        which, c0, c1 = self.tag
        for j in range(self.nbytes // (PIECE * WG_BK)):
            self.B.sb[self.st][self.slot + j] = (which, c0, c1 + PIECE * j)
        self.bar.complete_tx(self.nbytes)


class BulkGroup:
    """A consumer warpgroup's cp.async.bulk groups (its four warps' lanes 0-15, in lockstep): `pending` copies in
    flight; as a named barrier of the scheduler, cp.async.bulk.wait_group(.read) 0 passes once they all landed."""
    __slots__ = ('name', 'pending', 'waiters', 'ready')

    def __init__(self, name, ready):
        self.name, self.pending, self.waiters, self.ready = name, 0, [], ready

    def arrive(self, actor):  # the wait: True passes at once
        if self.pending == 0:
            return True
        self.waiters.append(actor)
        return False

    def landed(self):
        self.pending -= 1
        if self.pending == 0:
            self.ready.extend(self.waiters)
            self.waiters = []


class BulkCopy:
    """One warp's cp.async.bulk.global.shared::cta copies of its staged bf16 rows (one per lane 0-15 below m): they
    read the staging when they land (not when issued), so a row rewritten before the copy read it shows."""
    __slots__ = ('L', 'B', 'c', 'rows', 'srcs', 'col0', 'nbytes')

    def __init__(self, L, B, c, rows, srcs, col0, nbytes):
        self.L, self.B, self.c, self.rows, self.srcs, self.col0, self.nbytes = L, B, c, rows, srcs, col0, nbytes

    def land(self):
        L, B = self.L, self.B
        if B.exited:
            raise Fault("%s: a bulk copy read its shared memory after the block exited" % B.name)
        for row, src, col0 in zip(self.rows, self.srcs, self.col0):
            nb = int(self.nbytes)
            if src % 16 or nb % 16 or (int(row) * L.n + int(col0)) * 2 % 16:
                raise Fault("%s: bulk copy of %d bytes from %#x to y.bf16 word %d: not 16-byte aligned" %
                            (B.name, nb, src, int(row) * L.n + int(col0)))
            if src < B.stg_lo or src + nb > B.stg_lo + 2 * B.stg.size:
                raise Fault("%s: bulk copy from shared %#x..%#x, outside the staging the host sizes" %
                            (B.name, src, src + nb))
            w = (src - B.stg_lo) // 2
            L.store_b16(int(row) * L.n + int(col0) + np.arange(nb // 2), B.stg[w:w + nb // 2])
        B.bulk[self.c].landed()


# ---- the kernel -----------------------------------------------------------------------------------------------------------
class Launch(rp.LaunchBase):  # rd, err: LaunchBase's
    def __init__(self, D, grid_x, grid_y, ST=None, P=1, ahead=1, mut=frozenset(), pair=False, eff=None, bf16=False,
                 dbl=1, wbox=None, st128=ST128_DEF, turn=FP8_DBL_TURN):
        self.D, self.mode, self.m, self.n, self.k = D, D.mode, D.m, D.n, D.k
        self.grid_x, self.grid_y, self.mut, self.pair = grid_x, grid_y, mut, pair
        self.bf16 = bf16  # the optional y.bf16 given: bf16 bits there, y left alone
        # W's box rows: the host's map (choose_wbox over both g_fp8_eff tables: QC_FP8_BN_EFF sets both to eff;
        # wbox: QC_FP8_WBOX), and the device's WG_BOX_ROWS (-DWG_BOX_ROWS=R when R != 128: the same R)
        self.R_map = 32 if 'wbox_map32' in mut else choose_wbox((eff, eff) if eff else (EFF_ROW, EFF_BLOCK), wbox)
        self.R = 32 if 'wbox_dev32' in mut else 128 if 'wbox_map32' in mut else self.R_map
        eff = eff or eff_of(D.mode)
        if not wbox_builds(eff, self.R):
            raise ValueError("wgmma.cu's #error: WG_BOX_ROWS %d does not divide a width of weights %s" % (self.R, eff))
        self.BOX_B_BYTES = self.R * WG_BK  # WG_BOX_B_BYTES
        if pair and grid_x % 2:
            raise ValueError("the pair builds run whole clusters of two: an even grid")
        self.work = True
        self.BN = entry_bn(self.m, self.n, pair, eff)  # the entry's switch on qc_wg_bn
        # QC_FP8_ST128=N (st128; the host's g_fp8_st128) passes -DFP8_ST128=N -DFP8_STG128=(N == 6 ? 0 : 1); unset,
        # FP8_STG128 0 and FP8_ST128 (FP8_STG128 ? 5 : 6) = 6, the host's default
        g_st, opts = read_st128(None if st128 == ST128_DEF else str(st128))
        if g_st != st128:
            raise ValueError("QC_FP8_ST128=%s is ignored by the host (2..6)" % st128)
        self.stg128 = "-DFP8_STG128=1" in opts  # FP8_STG128 (default 0)
        BN_ = self.BN
        # FP8_ST128: the host's N, else its default (FP8_STG128 ? 5 : 6); the #error's bound the same
        st128_dev = int(opts[0].split("=")[1]) if opts else ST128_STAGED if self.stg128 else 6
        st_max = (ST128_STAGED if self.stg128 else 6) if BN_ == 128 else FP8_ST[BN_]
        self.ST = ST if ST is not None else st128_dev if BN_ == 128 else FP8_ST[BN_]  # ST: -DFP8_ST<BN> (WGMMA_OPTS)
        if not (2 <= self.ST <= st_max):
            raise ValueError("FP8_ST*: 2 up to the stages the host sizes shared memory for")
        turn = turn_of(D.mode) if turn is None else turn
        if turn not in (2, 4, 8, 16):
            raise ValueError("FP8_DBL_TURN: 2, 4, 8 or 16 (wgmma.cu's #error)")
        self.turn = turn  # FP8_DBL_TURN
        # constexpr bool STG (bf16 rows staged in shared memory: FP8_STAGED_OUT, not at 256, nor at 128 without
        # FP8_STG128) and XCHG (8-byte exchanged stores: FP8_CLUSTER 1; at 128 without FP8_STG128, in every mode; at
        # 256 except in the tensor mode)
        self.STG = not pair and BN_ != 256 and (BN_ != 128 or self.stg128) or \
            ('stage256' in mut and BN_ == 256) or ('stage128' in mut and BN_ == 128 and not pair)
        self.XCHG = not pair and ((not self.stg128) if BN_ == 128 else BN_ == 256 and self.mode != 1)
        self.P = 1 if self.mode == 2 else P  # FP8_P
        if eff[0] > 0 and self.P > 1:
            raise ValueError("FP8_PROMOTE > 1 needs FP8_EFF256=0 (wgmma.cu's #error)")
        self.ahead = ahead  # FP8_SCALE_AHEAD
        # constexpr bool DBL = FP8_DBL128 && BN == 128 && FP8_P == 1 && FP8_CLUSTER == 1: two accumulators, stages in pairs
        self.dbl = bool(dbl) and self.BN == 128 and self.P == 1 and not pair
        self.STAGE = WG_A_BYTES + self.BN * WG_BK
        self.tiles_m, self.tiles_n = cdiv(self.m, WG_BM), cdiv(self.n, self.BN)
        # qc_wg_tiles: with clusters, pairs of row tiles (an odd last one gets an empty partner past m)
        self.tiles = (2 * cdiv(self.tiles_m, 2) if pair else self.tiles_m) * self.tiles_n
        self.kt_n = cdiv(self.k, WG_BK)
        self.y = np.full(self.m * self.n, np.nan, f32)
        self.writes = np.zeros(self.m * self.n, np.int64)
        self.cnt = np.zeros(512, np.int64)  # work's first 2048 bytes: the counters (int)
        # the same buffer as floats (slots from word 512)
        self.wk = np.full((FP8_WORK_BYTES_96 if 'work96' in mut else FP8_WORK_BYTES) // 4, np.nan, f32)
        self.yb = np.full(self.m * self.n, 0x7FC1, np.uint16)  # y.bf16, NaN-poisoned
        self.copies, self.bulk, self.errors, self.blocks, self.ready = [], [], [], [], []
        self.smem_bytes = fp8_wgmma_plan(self.m, self.n, pair, eff, st128, mut)[2]
        self.stage_cache = {}

    def tile_of(self, t):  # qc_wg_tile_of
        if not self.pair:
            return qc_wg_tile(t, self.tiles_m, self.tiles_n)
        pm, tn = qc_wg_tile(t >> 1, cdiv(self.tiles_m, 2), self.tiles_n)
        if 2 * pm + 1 >= self.tiles_m and (t & 1):
            COV.add("pair: a row tile past m")
        return 2 * pm + (t & 1), tn

    def walk(self, bx):  # for (t = blockIdx.x; t < tiles; t += gridDim.x)
        t = bx
        while t < self.tiles:
            yield (t,) + self.tile_of(t)
            t += self.grid_x

    def cluster_sync(self, B, who):  # barrier.cluster.arrive.release + wait.acquire: both blocks' 6 actors
        yield ('n', B.csync)
    # -- memory --
    def store(self, idx, val, mask):
        if val.dtype != f32:
            raise Fault("a float2 store of %s values (the emulator lost f32 somewhere)" % val.dtype)
        super().store(idx, val, mask)

    def store_b16(self, idx, val, mask=None):
        """bf16 words into y.bf16 (a u32 store from the registers, or a bulk copy's row), counted per output."""
        if mask is not None:
            idx, val = idx[mask], val[mask]
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.yb.size:
            raise Fault("store to y.bf16[%d], past the %d outputs" % (int(idx.max() if idx.max() >= 0 else idx.min()), self.yb.size))
        np.add.at(self.writes, idx, 1)
        self.yb[idx] = val

    def sts32(self, B, addr, lo, hi, mask):
        """st.shared.u32 of bf16x2 words (lo at the lower address) into the staging past the ring."""
        a, lo, hi = addr[mask], lo[mask], hi[mask]
        if a.size == 0:
            return
        top = B.stg_lo + 2 * B.stg.size
        if a.min() < B.stg_lo or a.max() + 4 > top or (a % 4).any():
            raise Fault("%s: staged bf16 store at shared %#x: outside the %d bytes past the ring the host sizes "
                        "(dynamic shared memory ends at %#x)" % (B.name, int(a.max() if a.max() + 4 > top else a.min()),
                                                                   max(0, top - B.stg_lo), top))
        w = (a - B.stg_lo) // 2
        B.stg[w], B.stg[w + 1] = lo, hi

    def work_idx(self, idx, what):
        if idx.min() < 512 or idx.max() >= self.wk.size:
            raise Fault("%s work word %d: outside the slots (words 512..%d)" % (what, int(idx.min() if idx.min() < 512 else idx.max()), self.wk.size - 1))
        return idx

    def atomic_add(self, word, v):
        if not 0 <= word < 512:
            raise Fault("counter word %d outside the 512 counter words" % word)
        old = int(self.cnt[word])
        self.cnt[word] += v
        return old

    # -- TMA and wgmma through the shared-memory addresses --
    def tma2d(self, B, dst, which, c0, c1, bar):
        rel = dst - B.base
        st, off = divmod(rel, self.STAGE)
        if rel < 0 or st >= self.ST:
            raise Fault("%s TMA into shared address %#x, outside the ring" % (B.name, dst))
        if which == 'x':
            if off != 0:
                raise Fault("%s x box at stage %d offset %d" % (B.name, st, off))
            slot, nbytes = -1, X_BOX_ROWS * WG_BK
        else:  # the map's box of R_map rows (the host's), at the offset the device computed from its WG_BOX_ROWS
            p, r = divmod(off - WG_A_BYTES, PIECE * WG_BK)
            if off < WG_A_BYTES or r:
                raise Fault("%s w box at stage %d offset %d" % (B.name, st, off))
            if p + self.R_map // PIECE > self.BN // PIECE:
                raise Fault("%s: a w box of %d rows (the map's) at stage %d, W row %d, runs past the stage's %d W rows "
                            "(the device places boxes of %d)" % (B.name, self.R_map, st, p * PIECE, self.BN, self.R))
            slot, nbytes = p, self.R_map * WG_BK
        if dst + nbytes > DYN0 + self.smem_bytes:
            raise Fault("%s TMA past the %d bytes of dynamic shared memory the host sizes" % (B.name, self.smem_bytes))
        if B.exited:
            raise Fault("%s: a TMA box issued into it after it exited" % B.name)
        self.copies.append((TmaBox if which == 'x' else WBox)(B, st, slot, (which, c0, c1), B.full[bar], nbytes))

    def stage_rows(self, B, st):
        """The stage as (128 + BN) rows of 128 K: the x box, then the BN/32 w boxes (NaN where never written)."""
        key = B.snapshot(st)
        M = self.stage_cache.get(key)
        if M is None:
            parts = [self.D.box(*B.sa[st]) if B.sa[st] else np.full((X_BOX_ROWS, WG_BK), np.nan)]
            for tg in B.sb[st]:
                parts.append(self.D.box(*tg) if tg else np.full((PIECE, WG_BK), np.nan))
            M = np.concatenate(parts)
            self.stage_cache[key] = M
        return M

    def operand(self, B, desc, rows, who):
        """K-major, 128-byte swizzle, SBO 1024: the stage, rows and 32-byte K slice a descriptor addresses."""
        lo = desc & 0xFFFFFFFF
        if (lo >> 14) != (1 << 2) or ((desc >> 32) & 0x3FFF) != 1024 >> 4 or (desc >> 62) != 1:
            raise Fault("%s: descriptor %#x has a carry out of its address field or wrong LBO/SBO/swizzle" % (who, desc))
        rel = ((lo & 0x3FFF) << 4) - B.base
        st, off = divmod(rel, self.STAGE)
        kofs = off % 1024
        row0 = (off - kofs) // WG_BK
        if rel < 0 or st >= self.ST or kofs >= WG_BK or kofs % 32 or row0 % 8 or \
                row0 + rows > WG_BM + self.BN or (row0 < WG_BM < row0 + rows):
            raise Fault("%s: descriptor address %#x is not a %d-row operand of a stage" % (who, rel + B.base, rows))
        return st, self.stage_rows(B, st)[row0:row0 + rows, kofs:kofs + 32]

    def wgmma(self, B, R, name, da, db, scale_d, who, expect, BNW):  # m64nBNWk32 into accumulator `name`
        """One wgmma of the open group (BNW: the tile, or its half at 256).  R is the warpgroup's state: 'regs' (acc
        and, with DBL, acc1, as the threads hold them), 'pend' (each accumulator's latest sum still in the tensor
        cores), 'open' (the group being issued) and 'groups' (committed, oldest first: the stages they read and
        the sums they write)."""
        sta, A = self.operand(B, da, 64, who)
        stb, Bm = self.operand(B, db, BNW, who)
        g = R['open']
        if g is None:
            g = R['open'] = {'reads': [], 'vals': {}}
        for st in {sta, stb}:
            g['reads'].append((st, B.snapshot(st)))
            if expect is not None:
                row0, col0, kt, npc = expect  # npc: the 32-row pieces of W the stage's boxes loaded
                want = (('x', kt * WG_BK, row0), tuple(('w', kt * WG_BK, col0 + PIECE * b) for b in range(npc)))
                got = B.snapshot(st)
                if got[0] != want[0] or got[1][:npc] != want[1]:
                    self.err("%s read stage %d holding x %s / w rows %s, its stage is k %d of rows %d, cols %d..%d" %
                             (who, st, got[0] and got[0][1:], [b and b[1:] for b in got[1][:npc]], kt * WG_BK, row0,
                              col0, col0 + PIECE * npc - 1))
        # The k32 step, exact in float64, rounded to f32.  The sum in flight is kept as the 64 x BNW matrix; the
        # registers get it through the accumulator layout when its group completes (the same values: the rounding
        # is per element).
        D = A @ Bm.T
        if scale_d:
            cur = R['pend'].get(name)
            if cur is None:  # continuing from the registers
                cur = np.empty((64, BNW), f32)
                cur[LAYOUT[BNW]] = R['regs'][name]
            D = cur.astype(f64) + D
        g['vals'][name] = R['pend'][name] = D.astype(f32)
        R['regs'][name] = np.full_like(R['regs'][name], np.nan)  # the tensor cores' until its group completes

    @staticmethod
    def wg_commit(R):  # wgmma.commit_group
        if R['open'] is not None:
            R['groups'].append(R['open'])
            R['open'] = None

    def wg_wait(self, B, R, N, who):
        """wgmma.wait_group N: every committed group but the newest N completes, oldest first; the stages each read
        must still hold what they held at its issue, and an accumulator no later group writes goes back to the
        registers."""
        def held(snap):
            x, w = snap
            return "x k %s rows %s, w k %s cols %s" % (x[1], x[2], w[0][1], w[0][2]) if x and w[0] else str(snap)
        while len(R['groups']) > N:
            g = R['groups'].pop(0)
            for st, snap in g['reads']:
                if B.snapshot(st) != snap:
                    self.err("%s: stage %d was overwritten while its wgmma group was in flight (%s -> %s)" %
                             (who, st, held(snap), held(B.snapshot(st))))
            for name, val in g['vals'].items():
                if R['pend'].get(name) is val:
                    R['regs'][name] = val[LAYOUT[val.shape[1]]]
                    del R['pend'][name]

    def wg_wait0(self, B, R, who):
        self.wg_wait(B, R, 0, who)

    def wait(self, B, bar, parity, who):
        yield ('m', bar, parity)
        if not bar.passed(parity):
            raise Fault("resumed before its barrier passed")

    # -- warpgroup 0, thread 0 --
    def producer(self, B):
        BN, ST, mut, R, BB = self.BN, self.ST, self.mut, self.R, self.BOX_B_BYTES  # R, BB: WG_BOX_ROWS, _B_BYTES
        s, ph = 0, 0
        COV.add("W boxes of %d rows" % R if R == self.R_map else "W boxes of %d rows, the map's %d" % (R, self.R_map))
        for t, tm, tn in self.walk(B.bx):
            row0, col0 = tm * WG_BM, tn * BN
            left = self.n - col0
            nb = BN // R if left >= BN else (left + (0 if 'nb' in mut else R - 1)) // R
            nbytes = WG_A_BYTES + nb * BB  # a partly-past box counts all its bytes (TMA fills zeros past n)
            if nb < BN // R or left < BN:
                COV.add("BN %d partial tile" % BN)
                if self.dbl:
                    COV.add("DBL: a partial tile")
                if left % R:
                    COV.add("a W box partly past n (%d rows)" % R)
                if BN == 256:  # half 1 (W rows 128..255 of the stage): partly loaded, or none of it (stale rows)
                    COV.add("BN 256 half 1 partial" if nb * R > 128 else "BN 256 half 1 wholly past n")
            if self.pair and B.rank >= nb:
                COV.add("pair: a rank copies no W box")
            for kt in range(B.kt_b, B.kt_e):
                yield from self.wait(B, B.empty[s], ph if 'prod_parity' in mut else ph ^ 1, "producer")
                fb, sa = s, B.base + s * self.STAGE
                sb = sa + WG_A_BYTES
                B.full[fb].arrive_expect_tx(nbytes)
                self.tma2d(B, sa, 'x', kt * WG_BK, row0, fb)
                if self.pair:  # half the w boxes, each multicast: the same offset and barrier in both blocks
                    for b in range(B.rank, nb, 2):
                        for dst in ((B,) if 'mc_self' in mut else (B, B.partner)):
                            self.tma2d(dst, sb + b * BB, 'w', kt * WG_BK, col0 + R * b, fb)
                    COV.add("pair: multicast stage")
                else:
                    for b in range(nb):
                        self.tma2d(B, sb + b * BB, 'w', kt * WG_BK, col0 + R * b, fb)
                B.filled += 1
                s += 1
                if s == ST:
                    s, ph = 0, ph ^ 1
                    COV.add("ring wrap ST %d" % ST)
                yield None
        if self.pair and 'no_csync' not in mut:
            yield from self.cluster_sync(B, "%s producer" % B.name)

    # -- warpgroups 1 and 2 --
    def consumer(self, B, c):
        mode, m, n, BN, ST, P, mut = self.mode, self.m, self.n, self.BN, self.ST, self.P, self.mut
        NH = 2 if BN == 256 else 1  # constexpr NH, BNW: BN 256 runs each stage as two 128-column halves
        BNW = BN // NH
        D, NI, who = self.D, BN // 2, "%s consumer %d" % (B.name, c)
        kt_b, kt_e, nsp, spl = B.kt_b, B.kt_e, B.nsp, B.spl
        if mode == 2:
            kb, nblk = self.kt_n, cdiv(n, QC_FP8_BLOCK)
        st_ = {'s': 0, 'ph': 0}  # s, ph of the kernel (the issue lambda captures them by reference)
        parity = 0
        if mode == 1:
            wt = self.rd(D.ws, 0, "ws")
        la0, lb0 = qc_desc_lo(B.base + c * (64 * WG_BK)), qc_desc_lo(B.base + WG_A_BYTES)
        R = {'regs': {a: np.full((128, BNW // 2), np.nan, f32) for a in (('acc', 'acc1') if self.dbl else ('acc',))},
             'pend': {}, 'open': None, 'groups': []}
        RS = BN * 2 + WG_STG_PAD  # a staged bf16 row

        def issue_to(a, stg, first, h, expect):  # half h of stage stg into accumulator a (waits for its bytes at h = 0)
            if h == 0:
                yield from self.wait(B, B.full[stg], st_['ph'], "consumer %d" % c)
                B.used[c] += 1
            hofs = 0 if 'half_w' in mut else h * (BNW * WG_BK >> 4)  # half h: W rows [h BNW, (h + 1) BNW)
            la, lb = la0 + stg * (self.STAGE >> 4), lb0 + stg * (self.STAGE >> 4) + hofs
            for kk in range(WG_BK // 32):
                self.wgmma(B, R, a, qc_desc_of(la + 2 * kk), qc_desc_of(lb + 2 * kk), kk > 0 or not first, who,
                           expect, BNW)
            self.wg_commit(R)

        def issue(stg, first, h, expect):
            yield from issue_to('acc', stg, first, h, expect)

        def advance():
            st_['s'] += 1
            if st_['s'] == (ST - 1 if 'cons_wrap' in mut else ST):
                st_['s'] = 0
                if 'cons_noflip' not in mut:
                    st_['ph'] ^= 1

        def expect_of(t_, kt):  # the emulator's own bookkeeping: what the stage it waits on must hold
            tm_, tn_ = self.tile_of(t_)
            left = n - tn_ * BN  # W rows to col0 + left, in whole boxes of the map's rows: its 32-row pieces
            return tm_ * WG_BM, tn_ * BN, kt, BN // PIECE if left >= BN else \
                cdiv(left, self.R_map) * self.R_map // PIECE

        def retire(a, slot, ps0, ps1, arrive=True):  # DBL's retire: a's stage (at slot) is read
            if arrive:
                for w in range(4):  # if (lane == 0) qc_mbar_arrive(empty + 8 * slot): each warp's lane 0
                    B.empty[slot].arrive()
                yield None
            acc = R['regs'][a]
            if mode == 2:  # qc_promote_scaled<0, 16>(tot, a, ps0, ps1): 128 | col0, one weight block
                sv = np.where((np.arange(NI) & 2)[None, :] != 0, ps1[:, None], ps0[:, None]).astype(f64)
                tot[:] = (acc.astype(f64) * sv + tot.astype(f64)).astype(f32)  # fmaf
            else:
                tot[:] = tot + acc

        issued = False
        tot = np.zeros((128, NI), f32)
        for t, tm, tn in self.walk(B.bx):
            if mode == 0:  # the tile's column scales by cp.async, waited for in the epilogue
                swi = c * 2 + parity
                ci = TI
                cn = tn * BN + 2 * ci
                ok = (ci < BN // 2) & (cn < n)
                if (2 * ci[ok] + 1 >= WG_SW).any():
                    raise Fault("%s: column scale %d past the %d of a buffer" % (who, int(2 * ci[ok].max() + 1), WG_SW))
                B.cp_pending[swi] = (2 * ci[ok], self.rd(D.ws, cn[ok], "ws"), self.rd(D.ws, cn[ok] + 1, "ws"))
            r0 = tm * WG_BM + c * 64 + WARP * 16 + (LANE >> 2)
            r1 = r0 + 8
            if mode != 2:
                f0 = np.where(r0 < m, self.rd(D.xs, np.where(r0 < m, r0, 0), "xs"), f32(0))
                f1 = np.where(r1 < m, self.rd(D.xs, np.where(r1 < m, r1, 0), "xs"), f32(0))
            else:
                xs0, xs1 = np.where(r0 < m, r0, 0) * kb, np.where(r1 < m, r1, 0) * kb
                b0 = tn * BN // QC_FP8_BLOCK
                b1 = b0 + 1 if b0 + 1 < nblk else b0
                wsa, wsb = b0 * kb, b1 * kb
                split = (QC_FP8_BLOCK - (tn * BN) % QC_FP8_BLOCK) // 8
                sc = [self.rd(D.xs, xs0 + kt_b, "xs"), self.rd(D.xs, xs1 + kt_b, "xs"),
                      self.rd(D.ws, wsa + kt_b, "ws"), self.rd(D.ws, wsb + kt_b, "ws")]

                def load_sc(kt):
                    if kt < kt_e:
                        sc[:] = [self.rd(D.xs, xs0 + kt, "xs"), self.rd(D.xs, xs1 + kt, "xs"),
                                 self.rd(D.ws, wsa + kt, "ws"), self.rd(D.ws, wsb + kt, "ws")]
            if self.dbl:  # if constexpr (DBL): turns of FP8_DBL_TURN stages, then pairs (kt: acc, kt + 1: acc1)
                nst = kt_e - kt_b
                COV.add("DBL: an empty K range" if nst == 0 else "DBL: a one-stage K range" if nst == 1 else
                        "DBL: a K range of %s stages" % ("an odd number of" if nst % 2 else "an even number of"))
                if nsp > 1:
                    COV.add("DBL: split-K")
                TURN = self.turn
                if TURN == 2:
                    COV.add("DBL: pairs only (FP8_DBL_TURN 2)")
                elif 2 <= nst < TURN:
                    COV.add("DBL: a K range shorter than a turn (pairs only)")
                kt = kb if 'shadow' in mut and mode == 2 else kt_b
                turns = 0
                while kt < kt_e:
                    # #if FP8_DBL_TURN > 2: TURN stages a turn while as many are left, acc and acc1 alternating with
                    # one group in flight but at the turn's end
                    if TURN > 2 and kt + TURN <= kt_e:
                        junk = np.full(128, np.nan, f32)  # float pq[2][2]: not yet written (a read shows as NaN)
                        sl, pq = [None, None], [[junk, junk], [junk, junk]]
                        COV.add("DBL: a turn of %d stages" % TURN)
                        if turns:
                            COV.add("DBL: turns back to back")
                        if nsp > 1:
                            COV.add("DBL: a turn in a split-K range")
                        for q in range(TURN):
                            a, prev = ('acc1', 'acc') if q & 1 else ('acc', 'acc1')
                            if mode == 2:
                                kq = kt + (0 if 'turn_scale' in mut else q)
                                qx0, qx1, qw = self.rd(D.xs, xs0 + kq, "xs"), self.rd(D.xs, xs1 + kq, "xs"), \
                                    self.rd(D.ws, wsa + kq, "ws")
                                COV.add("DBL: block scales in a turn")
                            if q > 0 or kt > kt_b or (not issued and 'issued' not in mut) or 'turn_pre' in mut:
                                yield from issue_to(a, st_['s'], True, 0, expect_of(t, kt + q))
                            elif issued:
                                COV.add("DBL: a turn's first stage pre-issued")
                            sl[q & 1] = st_['s']
                            advance()
                            if st_['s'] == 0:
                                COV.add("DBL: ring wrap inside a turn (ST %d)" % ST if q < TURN - 1 else
                                        "DBL: ring wrap at a turn's end (ST %d)" % ST)
                            if q > 0:
                                self.wg_wait(B, R, 1, who)
                                yield None
                                pp = pq[q & 1] if 'turn_pq' in mut else pq[(q - 1) & 1]
                                yield from retire(prev, sl[q & 1] if 'turn_slot' in mut else sl[(q - 1) & 1],
                                                  pp[0], pp[1])
                            if mode == 2:  # the scale products of stage q, after its issue (and q - 1's retire)
                                pq[q & 1] = [qx0 * qw, qx1 * qw]  # f32, the scale product first
                            else:
                                pq[q & 1] = [None, None]
                        self.wg_wait(B, R, 1 if 'turn_wait1' in mut else 0, who)
                        yield None
                        yield from retire('acc' if 'turn_acc' in mut else 'acc1', sl[1], pq[1][0], pq[1][1])
                        turns += 1
                        kt += TURN - (1 if 'turn_step' in mut else 2)  # and 2 more at the loop's end
                        kt += 2
                        if kt < kt_e and kt + TURN > kt_e:
                            COV.add("DBL: a turn, then a lone stage" if kt + 1 == kt_e else "DBL: a turn, then pairs")
                        continue
                    two = kt + 1 < kt_e
                    if mode == 2:  # loaded before the issue, used after the waits
                        xa0, xa1, wa = self.rd(D.xs, xs0 + kt, "xs"), self.rd(D.xs, xs1 + kt, "xs"), \
                            self.rd(D.ws, wsa + kt, "ws")
                        if two:
                            xb0, xb1, wb = self.rd(D.xs, xs0 + kt + 1, "xs"), self.rd(D.xs, xs1 + kt + 1, "xs"), \
                                self.rd(D.ws, wsa + kt + 1, "ws")
                        else:
                            xb0 = xb1 = np.zeros(128, f32)
                            wb = f32(0)
                        COV.add("DBL: block scales")
                    if kt > kt_b or (not issued and 'issued' not in mut):
                        yield from issue_to('acc', st_['s'], True, 0, expect_of(t, kt))
                    elif issued:
                        COV.add("DBL: the first stage pre-issued before the previous tile's epilogue")
                    sa_ = st_['s']
                    advance()
                    if two:
                        if st_['s'] == 0:
                            COV.add("DBL: ring wrap between a pair's stages (ST %d)" % ST)
                        yield from issue_to('acc1', st_['s'], True, 0, expect_of(t, kt + 1))
                        if 'dbl_nowait1' not in mut:
                            self.wg_wait(B, R, 1, who)
                    else:
                        if st_['s'] == 0:
                            COV.add("DBL: ring wrap after a lone last stage (ST %d)" % ST)
                        self.wg_wait(B, R, 0, who)
                    yield None
                    if mode == 2:
                        pa0, pa1 = xa0 * wa, xa1 * wa  # f32, the scale product first
                        pb0, pb1 = (pa0, pa1) if 'dbl_scale' in mut else (xb0 * wb, xb1 * wb)
                    else:
                        pa0 = pa1 = pb0 = pb1 = None
                    yield from retire('acc', st_['s'] if 'dbl_slot' in mut else sa_, pa0, pa1)
                    if two:
                        sb_ = st_['s']
                        advance()
                        if st_['s'] == 0:
                            COV.add("DBL: ring wrap after a pair (ST %d)" % ST)
                        if 'dbl_rel1' in mut:  # kt + 1's slot released before its group completed
                            for w in range(4):
                                B.empty[sb_].arrive()
                            yield None
                        self.wg_wait(B, R, 0, who)
                        yield None
                        yield from retire('acc1', sb_, pb0, pb1, 'dbl_rel1' not in mut)
                    kt += 2
            elif BN == 128 and P == 1 and not self.pair:
                COV.add("BN 128 with one accumulator (FP8_DBL128=0)")
            for kt in range(kb if 'shadow' in mut and mode == 2 else kt_b, kt_e) if not self.dbl else ():
                if mode == 2 and self.ahead:
                    xa0, xa1, wa, wb = sc
                    load_sc(kt + 2 if 'scale_ahead' in mut else kt + 1)
                elif mode == 2:
                    load_sc(kt)
                    xa0, xa1, wa, wb = sc
                # the group goes on in acc (FP8_P > 1, so NH = 1)
                defer = P > 1 and (kt - kt_b) % P != P - 1 and kt != kt_e - 1
                for h in range(NH):
                    if kt > kt_b or h > 0 or (not issued and 'issued' not in mut):
                        yield from issue(st_['s'], (kt - kt_b) % P == 0, h, expect_of(t, kt))
                    if defer:
                        break
                    if P > 1:
                        COV.add("PROMOTE %d, %s group" % (P, "full" if (kt - kt_b) % P == P - 1 else "short"))
                    if 'early' not in mut:
                        self.wg_wait0(B, R, who)
                        yield None
                    if h == (0 if 'empty_h0' in mut else NH - 1):
                        for w in range(4):  # lane 0 of each warp: the group's stages are read, the producer may refill
                            j, sj = 0, st_['s']
                            while j <= (0 if 'release' in mut else (kt - kt_b) % P):
                                B.empty[sj].arrive()
                                if self.pair and 'no_peer' not in mut:  # qc_mbar_arrive_peer
                                    if B.partner.exited:
                                        raise Fault("%s arrives on %s, which has exited" % (who, B.partner.name))
                                    B.partner.empty[sj].arrive()
                                j, sj = j + 1, sj - 1 if sj > 0 else ST - 1
                    yield None
                    if 'early' in mut:
                        self.wg_wait0(B, R, who)
                    acc = R['regs']['acc']
                    o = 0 if 'half_tot' in mut else h * (BNW // 2)  # half h's slice of tot
                    if mode == 2:
                        s0a, s1a, s0b, s1b = xa0 * wa, xa1 * wa, xa0 * wb, xa1 * wb  # f32, the scale product first

                        def promote_scaled(J0, J1, s0, s1, to=0):  # qc_promote_scaled(tot + to, acc, s0, s1)
                            i = np.arange(4 * J0, 4 * J1)
                            sv = np.where((i & 2)[None, :] != 0, s1[:, None], s0[:, None]).astype(f64)
                            tot[:, to + i] = (acc[:, i].astype(f64) * sv + tot[:, to + i].astype(f64)).astype(f32)  # fmaf

                        def promote_split(J):
                            JA = J if J < BN // 8 else BN // 8
                            promote_scaled(0, JA, s0a, s1a)
                            if JA < BN // 8:
                                promote_scaled(JA, BN // 8, s0b, s1b)
                        if BN == 256:  # 256 | col0: half h is weight block b0 + h
                            hb = h and 'half_scale' not in mut
                            promote_scaled(0, 16, s0b if hb else s0a, s1b if hb else s1a, o)
                            COV.add("block scales BN 256" + (", half 1 past the last weight block" if b1 == b0 else ""))
                        elif BN == 128 or split == 16:
                            promote_split(16)
                        elif split == 8:
                            promote_split(8)
                        elif BN == 160 and split == 12:
                            promote_split(12)
                        elif BN == 160:
                            promote_split(4)
                        if BN != 256:
                            COV.add("block scales BN %d split %d" % (BN, split))
                    else:
                        tot[:, o:o + BNW // 2] = tot[:, o:o + BNW // 2] + acc
                advance()
            # the next tile's first stage (the same ring slot order as the producer's): half 0 of it at BN 256
            issued = kt_b < kt_e and t + self.grid_x < self.tiles
            if issued:
                COV.add("next tile's first stage issued early" + (" (split %d)" % nsp if nsp > 1 else "") +
                        (" (BN 256: half 0)" if NH > 1 else ""))
                if self.dbl:
                    COV.add("DBL: the next tile's first stage issued early" + (" (split-K)" if nsp > 1 else ""))
                for h in range(0 if 'pre_none' in mut else NH if 'pre_both' in mut else 1):
                    yield from issue(st_['s'], 'pre_first' not in mut, h, expect_of(t + self.grid_x, kt_b))
            cb = tn * BN + 2 * (LANE & 3)
            y0, y1 = r0 * n, r1 * n
            # bf16 rows through shared memory (STG: not at 256, nor at 128 without FP8_STG128; not in the pair builds)
            staged = self.STG and self.bf16 and not (n & 7)
            if staged and 'bulk_read' not in mut:
                yield ('n', B.bulk[c])  # the previous tile's copies out of these rows have read them
            store = True
            if nsp > 1:
                SLOT = 128 * (96 if 'slot96' in mut else NI)
                slots = 512 + (t * nsp * 2 + c) * SLOT
                cell = np.arange(NI)[None, :] * 128 + TI[:, None]
                self.wk[self.work_idx(slots + 2 * spl * SLOT + cell, "slot write")] = tot
                yield None  # __threadfence, bar.sync: the other blocks may run here
                last = self.atomic_add(2 * t + c, 1) == (nsp if 'last' in mut else nsp - 1)
                store = last
                COV.add("split %d" % nsp)
                if BN == 256:
                    COV.add("split %d at BN 256" % nsp)
                if kt_b == kt_e:
                    COV.add("empty K range")
                if store:
                    order = [spl] + [j for j in range(nsp) if j != spl] if 'order' in mut else list(range(nsp))
                    tot = self.wk[self.work_idx(slots + 2 * order[0] * SLOT + cell, "slot read")].copy()
                    for j in order[1:]:
                        tot = tot + self.wk[self.work_idx(slots + 2 * j * SLOT + cell, "slot read")]
                    self.cnt[2 * t + c] = 0
            if mode == 0:  # cp.async.wait_group 0, bar.sync 1 + c
                dst, v0, v1 = B.cp_pending.pop(swi)
                B.sws[swi][dst], B.sws[swi][dst + 1] = v0, v1
                sw = B.sws[swi]
            # for (j = 0; j < BN / 8; j++): every j at once, as a second axis [thread, j]
            j = np.arange(BN // 8)[None, :]
            cn = cb[:, None] + 8 * j
            ok = store & (cn < (n + 1 if 'mask' in mut else n))
            r0c, r1c = r0[:, None], r1[:, None]
            # bf16 rows straight from the registers as 8-byte stores (XCHG: BN 128 without FP8_STG128, BN 256 but in
            # the tensor mode; n % 16 == 0)
            xchg = self.XCHG and not (n & 15)
            if mode == 2:
                v00, v01, v10, v11 = tot[:, 4 * j[0]], tot[:, 4 * j[0] + 1], tot[:, 4 * j[0] + 2], tot[:, 4 * j[0] + 3]
            else:
                if mode == 1:
                    w0 = w1 = wt
                else:
                    wi = np.where(ok, 8 * j + 2 * (LANE[:, None] & 3), 0)
                    w0, w1 = self.rd(sw, wi, "sws"), self.rd(sw, wi + 1, "sws")
                f0c, f1c = f0[:, None], f1[:, None]
                v00, v01 = tot[:, 4 * j[0]] * (f0c * w0), tot[:, 4 * j[0] + 1] * (f0c * w1)
                v10, v11 = tot[:, 4 * j[0] + 2] * (f1c * w0), tot[:, 4 * j[0] + 3] * (f1c * w1)
            if staged:  # bf16 into this warp's 16 rows of staging, after the ring
                st0 = B.base + ST * self.STAGE + (c * 64 + WARP * 16 + (LANE >> 2))[:, None] * RS + \
                    4 * (LANE[:, None] & 3) + 16 * j
                self.sts32(B, st0, bf16_bits(v00), bf16_bits(v01), ok)
                self.sts32(B, st0 + 8 * RS, bf16_bits(v10), bf16_bits(v11), ok)
                COV.add("bf16 rows staged (BN %d)" % BN)
            elif self.bf16 and xchg:  # 8 bytes a lane: lanes 2q, 2q + 1 swap their chunk pairs (2i, 2i + 1)
                jo = np.arange(1, BN // 8, 2)  # the odd chunks, where the stores are
                odd = (LANE & 1)[:, None] != 0
                for yr, rc, va, vb in ((y0, r0c, v00, v01), (y1, r1c, v10, v11)):
                    p = bf16_bits(va).astype(np.uint64) | bf16_bits(vb).astype(np.uint64) << 16  # qc_bf16x2
                    ev = np.where(ok[:, jo - 1], p[:, jo - 1], 0)  # ev0 / ev1: kept at the even chunk
                    x = np.where(odd, ev, p[:, jo])[TI ^ 1]  # __shfl_xor_sync(.., odd ? ev : p, 1)
                    w = np.where(odd, x | p[:, jo] << 32, (x | ev << 32) if 'xchg_swap' in mut else (ev | x << 32))
                    cs = np.where(odd, cn[:, jo] - 2, cn[:, jo] - (6 if 'xchg_cs' in mut else 8))
                    msk = ok[:, jo] & (rc < m)
                    a = yr[:, None] + cs
                    if (a[msk] % 4).any():
                        raise Fault("%s: an 8-byte bf16 store at y.bf16 word %d: not 8-byte aligned" %
                                    (who, int(a[msk][a[msk] % 4 != 0][0])))
                    for q in range(4):  # the u64's four bf16 words, lowest address first
                        self.store_b16(a + q, ((w >> (16 * q)) & 0xFFFF).astype(np.uint16), msk)
                COV.add("bf16 rows from the registers (BN %d, 8-byte pairs, %s)" % (BN, MODES[mode]) +
                        (", a partial tile" if n - tn * BN < BN else ""))
            elif self.bf16:  # bf16 straight from the registers: a u32 store, column cn in its low half
                for yr, rc, va, vb in ((y0, r0c, v00, v01), (y1, r1c, v10, v11)):
                    self.store_b16(yr[:, None] + cn, bf16_bits(va), ok & (rc < m))
                    self.store_b16(yr[:, None] + cn + 1, bf16_bits(vb), ok & (rc < m))
                COV.add("bf16 rows from the registers (%s)" % ("pair" if self.pair else "BN %d%s" % (
                    BN, ", n % 16 != 0" if self.XCHG and n & 15 else ", n % 8 != 0" if self.STG else "")))
            else:
                self.store(y0[:, None] + cn, v00, ok & (r0c < m))
                self.store(y0[:, None] + cn + 1, v01, ok & (r0c < m))
                self.store(y1[:, None] + cn, v10, ok & (r1c < m))
                self.store(y1[:, None] + cn + 1, v11, ok & (r1c < m))
            if staged and store:  # fence.proxy.async, then lane i < 16 copies row i of its warp's 16 (below n)
                yield None
                row, col0 = r0 - (LANE >> 2) + LANE, cb - 2 * (LANE & 3)
                for w in range(4):
                    ln = (WARP == w) & (LANE < 16)
                    sel = ln & (row < m)
                    src = B.base + ST * self.STAGE + (c * 64 + w * 16 + LANE[sel]) * RS
                    nbytes = (n - col0[0] if n - col0[0] < BN else BN) * 2
                    self.bulk.append(BulkCopy(self, B, c, row[sel], src, col0[sel], nbytes))
                    B.bulk[c].pending += 1  # the warp's cp.async.bulk.commit_group
            self.wg_wait0(B, R, who)  # the next tile's first stage, waited for after the epilogue (session 17)
            tot = np.zeros((128, NI), f32)
            parity ^= 1
        if R['groups'] or R['open'] is not None:
            self.err("%s exits with a wgmma group in flight" % who)
        # the last bf16 rows are written before the block (and its shared memory) goes
        if self.STG and self.bf16 and not (n & 7) and 'bulk_exit' not in mut:
            yield ('n', B.bulk[c])
        if self.pair and 'no_csync' not in mut:
            yield from self.cluster_sync(B, who)


# ---- the scheduler ----------------------------------------------------------------------------------------------------------
class ClusterBar:
    """barrier.cluster.arrive + wait of a cluster of two: every thread of both blocks, here their 6 actors."""
    __slots__ = ('name', 'arrived', 'waiters', 'ready', 'blocks')

    def __init__(self, name, ready, blocks):
        self.name, self.arrived, self.waiters, self.ready, self.blocks = name, 0, [], ready, blocks

    def arrive(self, actor):
        self.arrived += 1
        if self.arrived == 6:
            self.arrived = 0
            self.ready.extend(self.waiters)
            self.waiters = []
            return True
        self.waiters.append(actor)
        return False


POLICIES = ("eager", "lazy", "starve", "random")


def simulate(L, policy, seed):
    """Runs every block's actors (its producer thread and its two consumer warpgroups, each in lockstep) and the
    copies in flight under wgmma_replay's scheduler; `starve` holds back one consumer warpgroup of every block."""
    actors, ready = [], L.ready
    if L.m <= 0 or L.n <= 0:
        return
    for by in range(L.grid_y):
        if by > 0 and (not L.work or L.k <= 0):
            continue
        row = [Block(L, bx, by) for bx in range(L.grid_x)]
        if L.pair:  # clusters of two along x: blocks 2c and 2c + 1; one cluster barrier for both blocks' actors
            for c in range(0, L.grid_x, 2):
                row[c].partner, row[c + 1].partner = row[c + 1], row[c]
                row[c].csync = row[c + 1].csync = ClusterBar("cluster (%d,%d)" % (c // 2, by), ready,
                                                             (row[c], row[c + 1]))
        for B in row:
            L.blocks.append(B)

            def gen(g, B=B):  # the block exits when all three of its actors are done
                yield from g
                B.done_actors += 1
                if B.done_actors == 3:
                    B.exited = True
            B.done_actors = 0
            actors.append(Actor(B.name + " producer", gen(L.producer(B)), 'p'))
            actors.append(Actor(B.name + " consumer 0", gen(L.consumer(B, 0)), 'c0'))
            actors.append(Actor(B.name + " consumer 1", gen(L.consumer(B, 1)), 'c1'))
    ready.extend(actors)
    starved = 'c1' if seed & 1 else 'c0'
    rp.run_actors(actors, ready, [L.copies, L.bulk], policy, seed, 5000000, held=lambda a: a.role == starved,
                  blocked=lambda a: "%s (phase %d, %d arrivals and %d bytes pending)" %
                  (a.what, a.bar.phase, a.bar.pending, a.bar.tx) if a.bar is not None else a.what)


def check(L):
    """Every output written once, y near the reference, the workspace counters back at zero, the ring at rest."""
    D = L.D
    errs = list(L.errors) + rp.write_errors(L.writes, L.n, times=True)
    # Tolerance: the model's sums are exact per k32 step and its roundings are f32 (each step's result, each
    # promotion, the slots' sum, the scale products): |y - ref| <= (5 kt_n + 4) 2^-24 S ~ 5e-6 S at kt_n = 16.  A lost,
    # repeated or misplaced stage or column is off by ~S / sqrt(k) (test_gpu_fp8.c's note), far above 1e-5 S.
    # bf16 outputs add their rounding, at most 2^-8 |y| (half a unit of 8 significant bits).
    rnd = 0.0
    if L.bf16:
        if not np.isnan(L.y).all():
            errs.append("%d f32 outputs written although y.bf16 was given" % int((~np.isnan(L.y)).sum()))
        L.y = bf16_f32(L.yb)  # what the interleavings must agree on
        rnd = 2.0 ** -8
    y = L.y.reshape(L.m, L.n).astype(f64)
    d = np.abs(y - D.ref)
    bad = ~(d <= TOL * D.S * (1 + rnd) + rnd * np.abs(D.ref) + 1e-30)
    worst = float(np.max(np.maximum(d - rnd * np.abs(D.ref), 0) / (D.S + 1e-30))) if not np.isnan(y).any() \
        else float('inf')
    if bad.any():
        i, j = np.argwhere(bad)[0]
        errs.append("%d outputs out of tolerance (first y[%d,%d] = %.9g, ref %.9g)" % (int(bad.sum()), i, j, y[i, j], D.ref[i, j]))
    if L.cnt.any():
        errs.append("%d workspace counters left non-zero" % int(np.count_nonzero(L.cnt)))
    for B in L.blocks:
        for bar in B.full + B.empty:
            if not bar.at_rest():
                errs.append("%s: %s not at rest at exit (%d arrivals, %d bytes pending)" % (B.name, bar.name, bar.pending, bar.tx))
                break
        if B.used[0] != B.filled or B.used[1] != B.filled:
            errs.append("%s: producer filled %d stages, consumers took %d and %d" % (B.name, B.filled, B.used[0], B.used[1]))
    return errs, worst


def run_case(mode, m, n, k, grid_x=None, grid_y=None, ST=None, P=1, ahead=1, mut=frozenset(), policies=POLICIES,
             seed=0, D=None, pair=False, eff=None, bf16=False, dbl=1, wbox=None, st128=ST128_DEF, turn=FP8_DBL_TURN):
    """One problem under several interleavings: (errors, description, worst |d|/S).  eff: the plan's weights
    (QC_FP8_BN_EFF, host and device; None: each build's g_fp8_eff); bf16: a y.bf16 output given; dbl: FP8_DBL128;
    wbox: QC_FP8_WBOX (W's box rows, host map and device, where choose_wbox takes it); st128: QC_FP8_ST128 (host and
    device: 2..5 stage the 128-column tiles' bf16 rows); turn: FP8_DBL_TURN."""
    eff_env, eff = eff, eff or eff_of(mode)
    hx, hy, _ = wgmma_dims(m, n, k, pair, eff, st128)
    gx, gy = grid_x or hx, grid_y or hy
    D = D or Data(mode, m, n, k, seed)
    worst, last = 0.0, None

    def launch():
        nonlocal last
        last = Launch(D, gx, gy, ST, P, ahead, mut, pair, eff_env, bf16, dbl, wbox, st128, turn)
        return last

    def checked(L):  # check's errors, keeping the worst |d|/S
        nonlocal worst
        e, w = check(L)
        worst = max(worst, w)
        return e
    errs = rp.replay(policies, seed, launch, simulate, checked, " (the split sum's order moved?)")
    desc = "%-7s m=%4d n=%5d k=%4d BN %d ST %d P %d%s%s%s%s%s%s box %d grid %dx%d" % (
        MODES[mode], m, n, k, last.BN, last.ST, last.P, "" if ahead else " ahead 0",
        " pair" if pair else "", "" if eff == eff_of(mode) else " eff %s" % ",".join(map(str, eff)),
        " bf16" if bf16 else "", " STG128" if last.stg128 else "",
        " DBL turn %d" % last.turn if last.dbl else "", last.R, gx, gy)
    return errs, desc, worst


# ---- host rules -------------------------------------------------------------------------------------------------------------------------
T = rp.Tally("test_fp8_wgmma_emu", VERBOSE)
report = T.report

# weights the checks try (QC_FP8_BN_EFF): the default, the old three-width form, 256 only, 128 only, 160 only, all
# four, lopsided ones
EFFS = (EFF_ROW, EFF_S20, EFF_S19, EFF_OLD, EFF_256, (0, 0, 0, 1), (0, 0, 1, 0), (100, 100, 96, 90), (1000, 1, 1, 1),
        (50, 100, 0, 90), (0, 100, 0, 0))
# FP8_DBL128's K loop (wgmma.cu, `if constexpr (DBL)`), in source order: retire, next_slot, then the loop: a turn of
# FP8_DBL_TURN stages while as many are left, else a pair of stages.  The emulator's consumer transcribes these; each
# must follow the one before it.
DBL_SEQ = (
    "auto retire = [&](float *a, int slot, float ps0, float ps1) {",
    "if (lane == 0) qc_mbar_arrive(empty + 8 * slot);",
    "qc_promote_scaled<0, 16>(tot, a, ps0, ps1);",
    "for (int i = 0; i < BNW / 2; i++) tot[i] += a[i];",
    "auto next_slot = [&]() {",
    "if (++s == ST) { s = 0; ph ^= 1u; }",
    "for (int kt = kt_b; kt < kt_e; kt += 2) {",
    "#if FP8_DBL_TURN > 2",
    "if (kt + FP8_DBL_TURN <= kt_e) {",
    "int sl[2];",
    "float pq[2][2];",
    "for (int q = 0; q < FP8_DBL_TURN; q++) {",
    "float *a = (q & 1) ? acc1 : acc, *prev = (q & 1) ? acc : acc1;",
    "#if FP8_MODE == 2",
    "const float qx0 = xs0[kt + q], qx1 = xs1[kt + q], qw = wsa[kt + q];",
    "if (q > 0 || kt > kt_b || !issued) issue_to(a, s, true, 0);",
    "sl[q & 1] = s;",
    "next_slot();",
    "if (q > 0) {",
    "qc_wg_wait<1>();",
    "retire(prev, sl[(q - 1) & 1], pq[(q - 1) & 1][0], pq[(q - 1) & 1][1]);",
    "}\n#if FP8_MODE == 2",
    "pq[q & 1][0] = qx0 * qw, pq[q & 1][1] = qx1 * qw;",
    "#else",
    "pq[q & 1][0] = pq[q & 1][1] = 0.f;",
    "#endif\n                        }",
    "qc_wg_wait<0>();",
    "retire(acc1, sl[1], pq[1][0], pq[1][1]);",
    "kt += FP8_DBL_TURN - 2; /* and 2 more at the loop's end */",
    "continue;\n                    }\n#endif",
    "const bool two = kt + 1 < kt_e;",
    "const float xa0 = xs0[kt], xa1 = xs1[kt], wa = wsa[kt];",
    "const float xb0 = two ? xs0[kt + 1] : 0.f, xb1 = two ? xs1[kt + 1] : 0.f, wb = two ? wsa[kt + 1] : 0.f;",
    "if (kt > kt_b || !issued) issue_to(acc, s, true, 0);",
    "const int sa_ = s;",
    "next_slot();",
    "if (two) {",
    "issue_to(acc1, s, true, 0);",
    "qc_wg_wait<1>();",
    "} else {",
    "qc_wg_wait<0>();",
    "pa0 = xa0 * wa, pa1 = xa1 * wa, pb0 = xb0 * wb, pb1 = xb1 * wb;",
    "retire(acc, sa_, pa0, pa1);",
    "if (two) {",
    "const int sb_ = s;",
    "next_slot();",
    "qc_wg_wait<0>();",
    "retire(acc1, sb_, pb0, pb1);",
    "} else\n            for (int kt = kt_b; kt < kt_e; kt++) {")


def smem_plan(bn, st128=ST128_DEF):  # fp8_wgmma_plan's shared memory for width bn
    st = st128 if bn == 128 else FP8_ST[bn]
    staged = bn != 256 and not (bn == 128 and st128 == 6)
    return st * (WG_BM * WG_BK + bn * WG_BK) + (WG_BM * (bn * 2 + WG_STG_PAD) if staged else 0) + 1024


def smem_device(bn, st, stg):  # what qc_fp8_gemm addresses: the base rounded up to 1 KiB, the ring, the staging
    return 1023 + st * (WG_A_BYTES + bn * WG_BK) + (WG_BM * (bn * 2 + WG_STG_PAD) if stg else 0)


def host_checks():
    import re
    # the tables transcribed here are the sources' (a change there fails this until the emulator follows)
    probs = []
    keff = {}  # FP8_EFF<bn> per FP8_MODE: "V" or "(FP8_MODE == 2 ? B : R)"
    for bn, v, b, r in re.findall(r"#define FP8_EFF(\d+) (?:(\d+)|\(FP8_MODE == 2 \? (\d+) : (\d+)\))\n", KSRC):
        keff[int(bn)] = (int(v),) * 3 if v else (int(r), int(r), int(b))
    kst = {int(a): int(b) for a, b in re.findall(r"#define FP8_ST(\d+) (\d+)\n", KSRC)}
    # FP8_ST128 = (FP8_STG128 ? S : U), FP8_STG128's default: the emulator's 128-column ring (6 unstaged, 5 staged)
    k128 = re.findall(r"#define FP8_ST128 \(FP8_STG128 \? (\d+) : (\d+)\)\n", KSRC)
    kstg = re.findall(r"#define FP8_STG128 (\d+)\n", KSRC)
    if len(k128) == 1 and kstg in (["0"], ["1"]):
        kst[128] = int(k128[0][0] if kstg[0] == "1" else k128[0][1])
        if (int(k128[0][0]), int(k128[0][1]), kstg[0]) != (ST128_STAGED, 6, "0"):
            probs.append("wgmma.cu's FP8_ST128 (FP8_STG128 ? %s : %s), FP8_STG128 %s (the emulator: 5, 6, 0)" %
                         (k128[0] + (kstg[0],)))
    kturn = re.findall(r"#define FP8_DBL_TURN \(FP8_MODE == 2 \? (\d+) : (\d+)\)\n", KSRC)
    if kturn != [(str(TURN_BLOCK), str(TURN_ROW))] or TURN_BLOCK not in (2, 4, 8, 16) or TURN_ROW not in (2, 4, 8, 16):
        probs.append("wgmma.cu's FP8_DBL_TURN %s (the emulator's default turns: block %d, row %d)" %
                     (kturn, TURN_BLOCK, TURN_ROW))
    hst = re.findall(r"static int g_fp8_st128 = (\d+);", HSRC)
    if hst != [str(ST128_DEF)]:
        probs.append("fp8_kernels.c's g_fp8_st128 %s (the emulator: %d)" % (hst, ST128_DEF))
    heff = re.search(r"static int g_fp8_eff\[2\]\[4\] = \{\{([\d, ]+)\}, \{([\d, ]+)\}\};", HSRC)
    if keff != {bn: tuple(eff_of(md)[i] for md in range(3)) for i, bn in enumerate(FP8_BNS)} or kst != FP8_ST:
        probs.append("wgmma.cu's FP8_EFF* %s / FP8_ST* %s" % (keff, kst))
    if not heff or tuple(int(v) for v in heff.group(1).split(",")) != EFF_ROW or \
            tuple(int(v) for v in heff.group(2).split(",")) != EFF_BLOCK:
        probs.append("fp8_kernels.c's g_fp8_eff %s" % (heff and heff.groups(),))
    kbox = re.findall(r"#define WG_BOX_ROWS (\d+)", KSRC)
    hbox = re.findall(r'\{"w\.qweight", QC_DT_F8_E4M3, "n", "k", (\d+), WG_BK, 128\}', HSRC)
    hwb = re.findall(r"static int g_fp8_wbox = (\d+);", HSRC)
    if kbox != [str(WG_BOX_ROWS)] or hbox != [str(WG_BOX_ROWS)] or hwb != [str(WG_BOX_ROWS)]:
        probs.append("W box rows: wgmma.cu's WG_BOX_ROWS %s, MAPS_W8A8's %s, g_fp8_wbox %s (the emulator: %d)" %
                     (kbox, hbox, hwb, WG_BOX_ROWS))
    if re.findall(r"#define FP8_DBL128 (\d+)", KSRC) != ["1"]:
        probs.append("wgmma.cu's FP8_DBL128 default is not 1 (the emulator's dbl=1)")
    d0 = KSRC.find("if constexpr (DBL) {")
    d1 = KSRC.find("for (int kt = kt_b; kt < kt_e; kt++) {", d0)
    at = d0
    for line in DBL_SEQ:
        at = KSRC.find(line, at) if at >= 0 else -1
        if at < 0 or at > d1 + 100:
            probs.append("wgmma.cu's DBL loop no longer has, in this order, '%s'" % line)
            break
        at += len(line)
    for src, name, anchor in (
            (HSRC, "fp8_kernels.c", "static const int bns[4] = {256, 192, 160, 128};"),
            (HSRC, "fp8_kernels.c", "const int sts[4] = {4, 4, 4, g_fp8_st128}; /* 160: 4, see FP8_ST160 */"),
            (HSRC, "fp8_kernels.c", "static int g_fp8_st128 = 6;"),
            (HSRC, "fp8_kernels.c", "const int v = qc_env_int(\"fp8\", \"QC_FP8_ST128\", 2, 6, 0);"),
            (HSRC, "fp8_kernels.c", "g_fp8_st128 = v;"),
            (HSRC, "fp8_kernels.c", "QC_ENV_OPT_LEN, \"-DFP8_ST128=%d\", g_fp8_st128);"),
            (HSRC, "fp8_kernels.c", "QC_ENV_OPT_LEN, \"-DFP8_STG128=%d\", v == 6 ? 0 : 1);"),
            (HSRC, "fp8_kernels.c", "read_bn_eff();\n    choose_wbox();\n    read_st128();"),
            (HSRC, "fp8_kernels.c", "#define X_HOST_OPTS 7 /*"),
            (HSRC, "fp8_kernels.c", "if (eff[i] <= 0 || (paired && bns[i] == 256)) continue;"),
            (HSRC, "fp8_kernels.c", "const int *eff = g_fp8_eff[block != 0];"),
            (HSRC, "fp8_kernels.c", "FN(block_wg_ref), wgmma_block_dims,"),
            (HSRC, "fp8_kernels.c", "FN(block_wg_ref), wgmma_pair_block_dims,"),
            (HSRC, "fp8_kernels.c", "g_fp8_eff[0][i] = g_fp8_eff[1][i] = v[i];"),
            (HSRC, "fp8_kernels.c", "const int staged = bns[pick] != 256 && !(bns[pick] == 128 && g_fp8_st128 == 6);"),
            (HSRC, "fp8_kernels.c", "(staged ? (uint32_t)WG_BM * ((uint32_t)bns[pick] * 2 + WG_STG_PAD) : 0u)"),
            (HSRC, "fp8_kernels.c", "#define FP8_WORK_BYTES (2048ull + (uint64_t)WG_SMS * 2 * 128 * 128 * 4)"),
            (KSRC, "wgmma.cu", "#define WG_SW 256"),
            (KSRC, "wgmma.cu", "eff[4] = {FP8_CLUSTER == 2 ? 0 : FP8_EFF256, FP8_EFF192"),
            (KSRC, "wgmma.cu", "if (eff[i] <= 0) continue;"),
            (KSRC, "wgmma.cu", "constexpr int NH = BN == 256 ? 2 : 1, BNW = BN / NH;"),
            (KSRC, "wgmma.cu", "if (h == 0 && !FP8_SKIP_TMA) qc_mbar_wait(full + 8 * st_, ph);"),
            (KSRC, "wgmma.cu", "lb = lb0 + st_ * (STAGE >> 4) + h * (BNW * WG_BK >> 4);"),
            (KSRC, "wgmma.cu", "if (kt > kt_b || h > 0 || !issued) issue(s, (kt - kt_b) % FP8_P == 0, h);"),
            (KSRC, "wgmma.cu", "if (h == NH - 1 && lane == 0)"),
            (KSRC, "wgmma.cu", "qc_promote_scaled<0, 16>(tot + 64 * h, acc, h ? s0b : s0a, h ? s1b : s1a);"),
            (KSRC, "wgmma.cu", "for (int i = 0; i < BNW / 2; i++) tot[h * (BNW / 2) + i] += acc[i];"),
            (KSRC, "wgmma.cu", "if (issued) issue(s, true, 0);"),
            (KSRC, "wgmma.cu", "constexpr long long SLOT = 128 * (BN / 2);"),
            (KSRC, "wgmma.cu", "#define FP8_ST128 (FP8_STG128 ? 5 : 6)"),
            (KSRC, "wgmma.cu", "#define FP8_STG128 0"),
            (KSRC, "wgmma.cu", "FP8_ST128 > (FP8_STG128 ? 5 : 6) ||"),
            (KSRC, "wgmma.cu", "#if FP8_DBL_TURN != 2 && FP8_DBL_TURN != 4 && FP8_DBL_TURN != 8 && FP8_DBL_TURN != 16"),
            (KSRC, "wgmma.cu", "__shared__ __align__(8) unsigned long long bars[2 * 6];"),
            (KSRC, "wgmma.cu", "constexpr bool STG = FP8_STAGED_OUT && BN != 256 && (BN != 128 || FP8_STG128);"),
            (KSRC, "wgmma.cu", "const bool staged = STG && yb && !(n & 7);"),
            (KSRC, "wgmma.cu", "if (STG && yb && !(n & 7) && (tid & 31) < 16)"),
            (KSRC, "wgmma.cu", "#if FP8_EFF256 > 0 && FP8_P > 1"),
            (KSRC, "wgmma.cu", "constexpr bool XCHG = FP8_CLUSTER == 1 && (BN == 128 ? !FP8_STG128 : BN == 256 && FP8_MODE != 1);"),
            (KSRC, "wgmma.cu", "if constexpr (STG) epi_of(QcTag<0>{});"),
            (KSRC, "wgmma.cu", "} else if (yb && xchg) {\n                    if constexpr (XCHG) epi_of(QcTag<1>{});"),
            (KSRC, "wgmma.cu", "const bool xchg = XCHG && !(n & 15);"),
            (KSRC, "wgmma.cu", "const u32 x0 = __shfl_xor_sync(0xffffffffu, odd ? ev0 : p0, 1);"),
            (KSRC, "wgmma.cu", "const long long cs = odd ? cn - 2 : cn - 8;"),
            (KSRC, "wgmma.cu", "*(u64 *)(yb + r0 * n + cs) = odd ? (u64)x0 | (u64)p0 << 32 : (u64)ev0 | (u64)x0 << 32;"),
            (KSRC, "wgmma.cu", "} else {\n                                ev0 = p0, ev1 = p1;"),
            (KSRC, "wgmma.cu", "#if FP8_CLUSTER == 1 && FP8_EFF256 > 0\n    case 256: qc_fp8_gemm<256, FP8_ST256>"),
            (KSRC, "wgmma.cu", "#if FP8_EFF192 > 0\n    case 192: qc_fp8_gemm<192, FP8_ST192>"),
            (KSRC, "wgmma.cu", "#if FP8_EFF160 > 0\n    case 160: qc_fp8_gemm<160, FP8_ST160>"),
            (KSRC, "wgmma.cu", "default: qc_fp8_gemm<128, FP8_ST128>"),
            (KSRC, "wgmma.cu", "constexpr bool DBL = FP8_DBL128 && BN == 128 && FP8_P == 1 && FP8_CLUSTER == 1;"),
            (KSRC, "wgmma.cu", "auto issue = [&](int st_, bool first, int h) { issue_to(acc, st_, first, h); };"),
            (KSRC, "wgmma.cu", "qc_wgmma<BNW>(a, qc_desc_of(la + 2 * kk), qc_desc_of(lb + 2 * kk), kk > 0 || !first);"),
            (KSRC, "wgmma.cu", "qc_wg_wait<0>();\n                    if (h == NH - 1 && lane == 0)"),
            (KSRC, "wgmma.cu", "#define WG_BOX_B_BYTES (WG_BOX_ROWS * WG_BK)"),
            (KSRC, "wgmma.cu", "const int nb = left >= BN ? BN / WG_BOX_ROWS : (int)((left + WG_BOX_ROWS - 1) / WG_BOX_ROWS);"),
            (KSRC, "wgmma.cu", "const unsigned bytes = WG_A_BYTES + (unsigned)nb * WG_BOX_B_BYTES;"),
            (KSRC, "wgmma.cu", "for (int b = (int)qc_cluster_rank(); b < nb; b += 2)"),
            (KSRC, "wgmma.cu", "qc_tma2d_mc(sb + b * WG_BOX_B_BYTES, tmw, kt * WG_BK, col0 + WG_BOX_ROWS * b, fb);"),
            (KSRC, "wgmma.cu", "qc_tma2d(sb + b * WG_BOX_B_BYTES, tmw, kt * WG_BK, col0 + WG_BOX_ROWS * b, fb);"),
            (KSRC, "wgmma.cu", "#if (128 % WG_BOX_ROWS) || (FP8_EFF256 > 0 && 256 % WG_BOX_ROWS) || (FP8_EFF192 > 0 && 192 % WG_BOX_ROWS) || \\\n"
                               "    (FP8_EFF160 > 0 && 160 % WG_BOX_ROWS) || (FP8_EFF128 > 0 && 128 % WG_BOX_ROWS)"),
            (HSRC, "fp8_kernels.c", "if (r <= 0 || 128 % r) return 0;"),
            (HSRC, "fp8_kernels.c", "if (g_fp8_eff[b][i] > 0 && bns[i] % r) return 0;"),
            (HSRC, "fp8_kernels.c", "g_fp8_wbox = wbox_fits(128) ? 128 : wbox_fits(64) ? 64 : 32;"),
            (HSRC, "fp8_kernels.c", "if ((r != 32 && r != 64 && r != 128) || !wbox_fits(r))"),
            (HSRC, "fp8_kernels.c", "MAPS_W8A8[1].box_rows = (uint32_t)g_fp8_wbox;"),
            (HSRC, "fp8_kernels.c", "if (g_fp8_wbox != 128) snprintf(g_xbuf[X_WGMMA][g_xn[X_WGMMA]++], QC_ENV_OPT_LEN, \"-DWG_BOX_ROWS=%d\", g_fp8_wbox);"),
            (HSRC, "fp8_kernels.c", '"-DWG_BOX_ROWS=%d", g_fp8_wbox);'),
            (HSRC, "fp8_kernels.c", "read_bn_eff();\n    choose_wbox();")):
        if anchor not in src:
            probs.append("%s no longer has '%s'" % (name, anchor))
    report(not probs, "the emulator's tables and transcribed lines are the sources': %s" % (probs[:3] or "tables, anchors"))
    # the device's tile width = the host plan's (m, n > 0), under every weight set; a weight-0 width never taken
    probs, zero = [], []
    ms = list(range(1, 300, 7)) + [383, 384, 385, 1000, 1024, 1100, 1500, 2047, 4096, 8192, 16384]
    ns = list(range(16, 1200, 16)) + [1536, 2048, 2400, 4096, 6144, 8192, 8448, 14336, 28656, 28672]
    taken = set()
    widths = {}  # the widths each weight set's plan takes, unpaired and paired (the W box rows must divide them)
    for eff in EFFS:
        for m in ms:
            for n in ns:
                bd, bh = entry_bn(m, n, False, eff), fp8_wgmma_plan(m, n, False, eff)[0]
                if bd != bh:
                    probs.append("eff %s: qc_wg_bn(%d, %d) = %d, fp8_wgmma_plan says %d" % (eff, m, n, bd, bh))
                if eff[FP8_BNS.index(bh)] <= 0:
                    zero.append("eff %s m=%d n=%d: %d" % (eff, m, n, bh))
                widths.setdefault(eff, set()).add(bh)
    for block, eff in ((False, EFF_ROW), (True, EFF_BLOCK)):  # each build's defaults, g_fp8_eff[block]
        taken |= {(block, bn) for bn in widths[eff]}
    want_taken = {(False, 128), (True, 128)}
    report(not probs and not zero and taken == want_taken,
           "qc_wg_bn (device) equals fp8_wgmma_plan (host), weight-0 widths never taken (nor compiled): %s" %
           (probs[:2] or zero[:2] or ("default weights take %s" % sorted(taken) if taken != want_taken else
                                      "%d weight sets over m 1..16384, n 16..28672 (defaults: every build 128 only)"
                                      % len(EFFS))))
    probs = []  # the pair builds: the same with row tiles in pairs, never 256; whole clusters; the split rule on pairs
    for eff in EFFS:
        for m in (129, 200, 300, 385, 1000, 1024, 1100, 2047, 4096):
            for n in (16, 144, 400, 1040, 4096, 6144, 8192, 14336, 28672):
                for k in (16, 400, 4096):
                    bn, st, smem, tiles = fp8_wgmma_plan(m, n, True, eff)
                    gx, gy, _ = wgmma_dims(m, n, k, True, eff)
                    widths.setdefault(eff, set()).add(bn)
                    if entry_bn(m, n, True, eff) != bn or bn == 256:
                        probs.append("eff %s pair qc_wg_bn(%d, %d) = %d, plan %d" % (eff, m, n, entry_bn(m, n, True, eff), bn))
                    if eff[FP8_BNS.index(bn)] <= 0 and any(e > 0 for e in eff[1:]):
                        probs.append("eff %s pair m=%d n=%d: width %d of weight 0" % (eff, m, n, bn))
                    if eff == EFF_256 and bn != 128:  # no width allowed: both fall back to 128
                        probs.append("eff %s pair m=%d n=%d: %d, not the fallback 128" % (eff, m, n, bn))
                    if tiles % 2 or gx % 2 or gx > WG_SMS or (gy > 1 and (gx != tiles or 2 * tiles > 512)):
                        probs.append("pair m=%d n=%d k=%d: %d tiles on %d x %d blocks" % (m, n, k, tiles, gx, gy))
    report(not probs, "pair builds: device width = host plan, never 256 (256 only: 128), even grids, splits only on "
           "one tile a block: %s" % (probs[:2] or "%d weight sets, m 129..4096 x n x k" % len(EFFS)))
    # W's box rows (choose_wbox; the device's WG_BOX_ROWS): the defaults' 128, 64 with 192 in, 32 with 160 in;
    # QC_FP8_WBOX taken only where it divides every enabled width; the device builds with them (its #error) and
    # every width the plan takes is whole boxes (a stage's W rows are nb boxes stacked)
    probs, known, got = [], [], {}
    for eff in (None,) + EFFS:
        tables = (eff, eff) if eff else (EFF_ROW, EFF_BLOCK)
        for env in (None, 32, 64, 128, 256, 96):
            r = choose_wbox(tables, env)
            got[(eff, env)] = r
            tag = "QC_FP8_BN_EFF=%s QC_FP8_WBOX=%s" % (eff and ",".join(map(str, eff)), env)
            if r not in (128, 64, 32):
                probs.append("%s: %d rows" % (tag, r))
            for e in ((EFF_ROW, EFF_BLOCK) if eff is None else (eff,)):
                if not wbox_builds(e, r):
                    probs.append("%s: the build with FP8_EFF* = %s refuses WG_BOX_ROWS %d" % (tag, e, r))
                bad = sorted(bn for bn in widths[e] if bn % r)
                if bad:
                    (probs if env is None else known).append("%s: %d-row W boxes, but the plan takes %s columns" %
                                                             (tag, r, bad))
    want = {(None, None): 128, (EFF_S19, None): 64, (EFF_OLD, None): 32, (EFF_256, None): 128,
            (None, 32): 32, (None, 64): 64, (None, 256): 128, (None, 96): 128, (EFF_S19, 128): 64,
            (EFF_OLD, 64): 32, (EFF_256, 256): 128}
    probs += ["%s: %d rows, not %d" % (key, got[key], v) for key, v in want.items() if got[key] != v]
    report(not probs, "choose_wbox: W box rows divide every width each build may take, the device builds with "
           "them: %s" % (probs[:2] or "%d weight sets x QC_FP8_WBOX (defaults 128, 192 in 64, 160 in 32)" %
                         (len(EFFS) + 1)))
    # (fixed, session 20: QC_FP8_WBOX=256 with 256-only weights was accepted, and the pair builds' 128-column fallback
    # then had no whole box; now no override may leave a width any build takes short of whole boxes)
    report(not known, "choose_wbox: no QC_FP8_WBOX override leaves a width the plan takes short of whole boxes: %s" %
           ("; ".join(known[:2]) or "none of %d" % (len(EFFS) + 1)))
    # the launch the host plans: shared memory, workspace, split K ranges (each build's default weights, and 256 forced)
    probs, old96 = [], []
    for mode, eff in ((0, EFF_ROW), (1, EFF_ROW), (2, EFF_BLOCK), (0, EFF_256), (2, EFF_256), (0, EFF_S20)):
        for m in (17, 64, 100, 129, 256, 300, 512, 700, 1024, 2048, 4096, 8192):
            for n in (16, 144, 400, 608, 1040, 2048, 4096, 6144, 8448, 14336, 28672):
                for k in (16, 112, 400, 512, 1040, 2048, 4096, 14336):
                    bn, st, smem, tiles = fp8_wgmma_plan(m, n, False, eff)
                    gx, gy, _ = wgmma_dims(m, n, k, False, eff)
                    kt_n = cdiv(k, WG_BK)
                    tag = "mode %d eff %s m=%d n=%d k=%d" % (mode, ",".join(map(str, eff)), m, n, k)
                    if smem + SMEM_STATIC[mode] > SMEM_OPTIN or DYN0 + smem > 1 << 18:
                        probs.append("%s: BN %d, %d + %d static bytes of shared memory" % (tag, bn, smem, SMEM_STATIC[mode]))
                    if st != FP8_ST[bn]:
                        probs.append("%s: host sizes %d stages, the kernel's default is %d" % (tag, st, FP8_ST[bn]))
                    if gy > 1:
                        if gx != tiles:
                            probs.append("%s: split %d with %d tiles on %d blocks (several tiles a block)" % (tag, gy, tiles, gx))
                        if any(kt_n * s // gy == kt_n * (s + 1) // gy for s in range(gy)):
                            probs.append("%s: split %d leaves a block an empty K range" % (tag, gy))
                        if 512 + 2 * tiles * gy * 128 * (bn // 2) > FP8_WORK_BYTES // 4 or 2 * tiles > 512:
                            probs.append("%s: split %d x %d tiles overflows the workspace" % (tag, gy, tiles))
                        if 512 + 2 * tiles * gy * 128 * (bn // 2) > FP8_WORK_BYTES_96 // 4:
                            old96.append(tag)
    report(not probs and old96, "wgmma_dims: shared memory fits, splits only on one tile a block with non-empty K "
           "ranges, workspace holds the slots (which slots of 96 sums would not: %s): %s" %
           (old96[:1] or "none found", probs[:3] or "m x n x k sweep, default weights and 256 forced"))
    # every width's plan fits the opt-in shared memory beside the static arrays (sws grew to 256 scales a buffer);
    # 128 columns under every QC_FP8_ST128 (2..6) too
    probs, known = [], []
    for mode in range(3):
        for bn, st128 in [(bn, ST128_DEF) for bn in FP8_BNS] + [(128, v) for v in range(2, 6)]:
            need = smem_plan(bn, st128) + SMEM_STATIC[mode]
            if need > SMEM_OPTIN:
                (probs if eff_of(mode)[FP8_BNS.index(bn)] > 0 else known).append(
                    "%s BN %d (ST128 %d): %d + %d static = %d bytes > %d" % (
                        MODES[mode], bn, st128, smem_plan(bn, st128), SMEM_STATIC[mode], need, SMEM_OPTIN))
    report(not probs, "each default-weighted width's shared memory fits beside the static arrays: %s" %
           (probs[:2] or "every build, 128 columns with 2..6 stages"))
    # QC_FP8_ST128 (read_st128): the host's stages and staging and the device's FP8_ST128 / FP8_STG128 agree for
    # every value it takes; the device's #error passes; what the device addresses fits what the host sizes; the
    # ring's stages fit the entry's bars[2 * 6]; the host's extra options fit X_HOST_OPTS
    probs = []
    for env in (None, "6", "5", "4", "3", "2", " 5", "+4", "1", "7", "0", "-5", "5x", "", "5 ", "six"):
        g, opts = read_st128(env)
        want = int(env) if env is not None and env.strip().lstrip("+").isdigit() and env == env.rstrip() and \
            2 <= int(env) <= 6 else ST128_DEF
        stg = "-DFP8_STG128=1" in opts  # the device's FP8_STG128 (default 0)
        dev_st = int(opts[0].split("=")[1]) if opts else (ST128_STAGED if stg else 6)  # FP8_ST128
        bn, st, smem, _ = fp8_wgmma_plan(1024, 1024, False, EFF_ROW, g)
        tag = "QC_FP8_ST128=%r" % env
        if g != want or (opts and opts[0] != "-DFP8_ST128=%d" % g):
            probs.append("%s: g_fp8_st128 %d, options %s" % (tag, g, opts))
        if bn != 128 or st != dev_st:
            probs.append("%s: the host plans %d stages of %d, the device rings %d" % (tag, st, bn, dev_st))
        if dev_st > (ST128_STAGED if stg else 6) or dev_st < 2:
            probs.append("%s: FP8_ST128 %d, FP8_STG128 %d: wgmma.cu's #error" % (tag, dev_st, stg))
        if (smem != smem_plan(128, g)) or (stg != (g != 6)) or smem_device(128, dev_st, stg) > smem:
            probs.append("%s: the device addresses %d bytes (staged %d), the host sizes %d" %
                         (tag, smem_device(128, dev_st, stg), stg, smem))
    if max(list(FP8_ST.values()) + [ST128_STAGED]) > 6:
        probs.append("a ring of more than the 6 stages of bars[2 * 6]")
    if 4 + 1 + 2 != int((re.findall(r"#define X_HOST_OPTS (\d+)", HSRC) or ["0"])[0]):
        probs.append("X_HOST_OPTS is not QC_FP8_BN_EFF's 4 + choose_wbox's 1 + QC_FP8_ST128's 2")
    report(not probs, "QC_FP8_ST128: host stages and staging = the device's FP8_ST128 / FP8_STG128, which build and "
           "fit: %s" % (probs[:2] or "2..6 and ignored values"))
    # QC_FP8_WGMMA_OPTS=-DFP8_STG128=1 alone would build a 5-stage ring with staging while the host sizes 6 stages
    # without (more than the host sizes): read_extra_opts drops any -DFP8_STG128 from the list, with a warning
    over = smem_device(128, ST128_STAGED, True) - smem_plan(128, ST128_DEF)
    drop = 'strncmp(g_xbuf[family][i], "-DFP8_STG128", 12)' in HSRC and "g_xn[family]--, i--;" in HSRC
    report(over <= 0 or drop, "QC_FP8_WGMMA_OPTS=-DFP8_STG128 (would need %d bytes more than the host sizes) is "
           "dropped by the host's read_extra_opts" % over)
    if known:  # reported, not fixed here: a width only QC_FP8_BN_EFF enables
        print("test_fp8_wgmma_emu: NOTE (known, not counted): QC_FP8_BN_EFF enabling it plans a launch over the "
              "opt-in shared memory: %s" % "; ".join(known))
    # qc_wg_tile is a bijection onto the tile grid
    probs = rp.tile_walk_gaps(20, 12)
    report(not probs, "qc_wg_tile covers each tile once: %s" % (probs[:3] or "1..20 x 1..12 tiles"))
    # FP8_DESC_OLD's descriptors = the default build's (+2 per k32 step, no carry out of the address field), for
    # each half of a 256-column stage too, whose W rows start 1 KiB-aligned
    probs = []
    for bn in FP8_BNS:
        STAGE, NH = WG_A_BYTES + bn * WG_BK, 2 if bn == 256 else 1
        BNW = bn // NH
        for base in range(0, 1 << 18, 1 << 10):
            if base + FP8_ST[bn] * STAGE > 1 << 18:
                break
            for c in range(2):
                la0, lb0 = qc_desc_lo(base + c * 64 * WG_BK), qc_desc_lo(base + WG_A_BYTES)
                for st in range(FP8_ST[bn]):
                    for h in range(NH):
                        sa = base + st * STAGE + c * 64 * WG_BK
                        sb = base + st * STAGE + WG_A_BYTES + h * (BNW * WG_BK)
                        if sb % 1024:
                            probs.append("BN %d half %d at %#x: not 1 KiB-aligned" % (bn, h, sb))
                        for kk in range(4):
                            if qc_desc(sa + 32 * kk) != qc_desc_of(la0 + st * (STAGE >> 4) + 2 * kk) or \
                                    qc_desc(sb + 32 * kk) != qc_desc_of(lb0 + st * (STAGE >> 4) + h * (BNW * WG_BK >> 4) + 2 * kk):
                                probs.append("BN %d base %#x c %d stage %d half %d kk %d" % (bn, base, c, st, h, kk))
    report(not probs, "descriptors: FP8_DESC_OLD 0 and 1 agree: %s" %
           (probs[:2] or "every width, stage, half, warpgroup, k32 step"))


def group(name, cases):
    t0, ok0, worst = time.time(), T.passed, 0.0
    for c in cases:
        kw = dict(c[4]) if len(c) > 4 else {}
        errs, desc, w = run_case(*c[:4], seed=len(name) * 1000 + T.passed + T.failed, **kw)
        worst = max(worst, w)
        report(not errs, "%s: %s" % (desc, "; ".join(errs[:3]) if errs else "worst |d|/S %.2g" % w))
    print("test_fp8_wgmma_emu: %-34s %2d of %2d cases pass x %d interleavings, worst |d|/S %.2g (%.1f s)" %
          (name, T.passed - ok0, len(cases), len(POLICIES), worst, time.time() - t0))


host_checks()
print("test_fp8_wgmma_emu: host rules: %d checks, %d failed" % (T.passed + T.failed, T.failed))

# (mode, m, n, k[, options]): grid and split from wgmma_dims unless grid_x / grid_y are given; eff: QC_FP8_BN_EFF
# (host and device), bf16: a y.bf16 output, dbl: FP8_DBL128, wbox: QC_FP8_WBOX, st128: QC_FP8_ST128 (2..5: the
# 128-column tiles' bf16 rows staged), turn: FP8_DBL_TURN.  The default weights take 128 columns only; 256, 192 and 160
# only with QC_FP8_BN_EFF (EFF_S20: sessions 20-21's 256 and 128, where one wave of tiles (up to 132) takes 128 and
# 256 comes with more than ~105 tiles of 128; EFF_S19: session 19's row weights, 192 in; EFF_OLD: the weights before
# 256, "100,96,90"), which also takes W's boxes down to 64 and 32 rows.
group("host plan", [
    (0, 1, 16, 16),           # one stage, one tile
    (0, 17, 144, 400),        # a partial tile (w boxes past n not loaded: stale), k tail
    (1, 17, 16, 1040),        # split 2, k tail
    (2, 17, 144, 1040),       # block, split 2
    (0, 64, 400, 208),        # 4 column tiles, the last 16 columns wide
    (2, 64, 608, 272),
    (1, 129, 352, 2048),      # 2 x 3 tiles, split 4
    (2, 129, 352, 1552),      # split 3 of 13 stages
    (0, 300, 1040, 144),      # 3 x 9 tiles
    (2, 300, 1040, 400),
    (0, 300, 400, 1040),      # 12 tiles, split 2
    (1, 1100, 32, 144),       # 9 row tiles: a group of 8 and a group of 1
    (2, 1, 16, 2048),         # m = 1, split 4
    (0, 129, 16, 1552),       # split 3
])
group("wide tiles (BN 160, 192)", [
    (2, 1100, 1808, 144, dict(grid_x=12, eff=EFF_OLD)),  # BN 160: tiles 0/32/64/96 columns into a weight block, last 48 wide
    (0, 1100, 1808, 272, dict(grid_x=20, eff=EFF_OLD)),
    (2, 1100, 2256, 272, dict(grid_x=12, eff=EFF_S19)),   # BN 192: tiles 0 and 64 columns into a weight block, last 144 wide
    (1, 17, 21136, 16, dict(eff=EFF_S19)),   # BN 192 on the host's 111 blocks, one row tile (rows past m read zeros)
    (2, 129, 8464, 144, dict(grid_x=9, ST=2, eff=EFF_OLD)),  # BN 160, the shallowest ring
    (0, 17, 21136, 400, dict(grid_x=8, P=3, eff=EFF_OLD)),   # BN 192, promotion every 3 stages (256 off)
])
# BN 256: each stage as two 128-column halves through one acc (EFF_S20, sessions 20-21's defaults, where the plan takes
# it; split-K at 256 only with 256 forced, EFF_256: one wave of 256 tiles scores below 128's)
# (some pass EFF_S19: 192 in, so W comes in 64-row boxes, four a stage)
group("BN 256 (two halves a stage)", [
    (0, 1024, 4096, 256, dict(eff=EFF_S20, bf16=True)),  # 8 x 16 tiles, one wave; bf16 as 8-byte pairs
    (1, 1000, 28656, 400, dict(eff=EFF_S20, policies=("random",))),  # 896 tiles, 7 a block; the last 240 wide: half 1 partial
    (2, 881, 3568, 400, dict(eff=EFF_S19, bf16=True)),  # 7 x 14 tiles, the last 240 wide, the last row tile 113 rows
    (2, 1500, 2400, 272, dict(eff=EFF_S20)),     # the last tile 96 wide: half 1 wholly past n (and past the last
    (1, 1500, 2400, 272, dict(eff=EFF_S20, bf16=True)),  # weight block: b1 = b0); tensor mode: bf16 as 4-byte pairs
    (0, 8192, 1024, 256, dict(eff=EFF_S20)),     # 256 tiles on 132 blocks: two a block (half 0 pre-issued)
    (2, 1000, 8192, 112, dict(eff=EFF_S19)),     # one stage, K's first is its last
    (0, 33, 960, 1536, dict(eff=EFF_256)),       # split 3, the last tile 192 wide
    (2, 90, 6144, 1088, dict(eff=EFF_256)),      # split 2 of 9 stages
    (1, 90, 6144, 1088, dict(eff=EFF_256, bf16=True)),
    (2, 17, 512, 2048, dict(eff=EFF_256)),       # split 4
    (0, 300, 1040, 528, dict(eff=EFF_256, grid_x=3, grid_y=2)),  # 5 tiles a block and split; the last 16 wide
    (2, 300, 1040, 400, dict(eff=EFF_256, ST=2, grid_x=2)),      # the shallowest ring
    (1, 64, 400, 16, dict(eff=EFF_256, grid_y=4)),               # three of four splits empty
    (2, 129, 1040, 272, dict(eff=EFF_256, ahead=0, grid_x=3)),
    (0, 300, 400, 400, dict(eff=EFF_256, pair=True)),            # pair builds never take 256 (the fallback 128)
])
# 128 columns store bf16 rows from the registers as 8-byte exchanged pairs in every mode (n % 16 == 0), else 4 bytes;
# QC_FP8_ST128 <= 5 (st128) stages them as before session 22, as 192 and 160 do
group("bf16 output (y.bf16)", [
    (0, 300, 400, 400, dict(grid_x=2, bf16=True, st128=5)),    # BN 128 staged, 6 tiles a block (staging reused)
    (2, 1100, 2256, 272, dict(grid_x=12, eff=EFF_S19, bf16=True)),          # BN 192 staged
    (1, 1100, 1808, 144, dict(grid_x=6, eff=EFF_OLD, bf16=True)),  # BN 160 staged
    (0, 129, 352, 1040, dict(grid_y=2, bf16=True, st128=4)),   # split 2, the last arriver stages (4 stages)
    (0, 17, 144, 400, dict(bf16=True, st128=5)),               # a 16-column tile: 32-byte rows
    (2, 300, 400, 656, dict(pair=True, grid_x=4, bf16=True)),  # pair builds: straight from the registers
    (0, 300, 400, 1040, dict(grid_x=2, grid_y=1, bf16=True)),  # BN 128 8-byte pairs (channel), the last tile 16 wide
    (1, 300, 400, 1040, dict(grid_x=3, grid_y=1, bf16=True)),  # tensor mode: 8-byte pairs at 128 too
    (2, 300, 400, 1296, dict(grid_x=2, grid_y=1, bf16=True)),  # block mode, a turn, a pair, a lone stage
    (0, 129, 352, 1040, dict(grid_y=2, bf16=True)),            # split 2: the last arriver's 8-byte pairs
    (0, 129, 392, 400, dict(bf16=True)),                       # n % 16 == 8: 4-byte stores, the last tile 8 wide
    (2, 17, 200, 1040, dict(bf16=True)),                       # block, n % 16 == 8, a 72-column tile
    (1, 64, 100, 656, dict(bf16=True)),                        # n % 8 == 4: 4-byte stores, one partial tile
    (0, 300, 392, 400, dict(grid_x=2, bf16=True, st128=5)),    # staged with n % 16 == 8 (n % 8 == 0)
])
group("forced grid / split", [
    (0, 300, 400, 400, dict(grid_x=2, grid_y=1)),     # several tiles a block
    (2, 300, 400, 1040, dict(grid_x=4, grid_y=2)),    # several tiles a block, split
    (1, 129, 1040, 272, dict(grid_x=5, grid_y=3)),    # one stage a split
    (0, 17, 144, 208, dict(grid_y=3)),                # split 0 has an empty K range
    (2, 64, 400, 16, dict(grid_y=4)),                 # three of four splits empty
    (1, 17, 400, 400, dict(grid_y=4)),                # one stage a split, 3 tiles
    (2, 129, 608, 400, dict(grid_x=3, grid_y=4)),     # 8 tiles on 3 blocks, 4 splits of 1 stage
    (0, 300, 144, 1040, dict(grid_x=1, grid_y=4)),    # every tile in one block row
    (1, 64, 1040, 528, dict(grid_x=7, grid_y=2)),
])
# fp8.gemm_*_wgmma_pair (FP8_CLUSTER=2): clusters of two on row-tile pairs, w boxes multicast into both rings
group("pair builds (clusters of two)", [
    (0, 300, 400, 400, dict(pair=True)),                # 3 row tiles: the last pair's second tile is past m
    (2, 129, 1040, 272, dict(pair=True, grid_x=4)),     # several pairs a cluster, block scales
    (1, 1100, 1808, 144, dict(pair=True, grid_x=6, eff=EFF_OLD)),  # BN 160, 9 row tiles (5 pairs), partial last tile
    (0, 256, 608, 1040, dict(pair=True, grid_y=2)),     # split 2 (every pair's K in two)
    (2, 300, 144, 656, dict(pair=True, ST=2, grid_x=2)),  # the shallowest ring, one cluster
    (1, 300, 400, 1040, dict(pair=True, grid_x=4, st128=5, bf16=True)),  # QC_FP8_ST128=5: 5 stages, still no staging
])
# FP8_DBL128 (default): 128-column tiles take K through acc and acc1; FP8_DBL_TURN=2 (turn=2): in pairs of stages
# only (wait_group 1 between), a lone last stage alone; each K range [kt_b, kt_e) pairs from kt_b; the next tile's first
# stage pre-issued into acc.  (st128=5: the 5-stage ring before session 22.)
group("BN 128, DBL in pairs (turn 2)", [
    (0, 300, 400, 1040, dict(grid_x=2, grid_y=1, turn=2, st128=5)),  # 9 stages a tile (a lone last one), 6 tiles a
    (2, 300, 400, 1024, dict(grid_x=3, grid_y=1, turn=2, st128=5)),  # block: ST 5 wraps inside and after pairs; block
                                                                     # scales, 8 stages
    (1, 129, 352, 1552, dict(turn=2)),   # split 3 of 13 stages: 4, 4, 5 a range
    (2, 129, 400, 656, dict(grid_x=4, grid_y=2, turn=2)),  # 3 stages a split (odd ranges), several tiles a block
    (0, 17, 400, 400, dict(grid_y=4, turn=2)),  # one stage a split: two == false from kt_b, pre-issued or not
    (2, 17, 144, 208, dict(grid_x=1, grid_y=3, turn=2)),  # ranges of 0, 1, 1 stages, two tiles a block
    (1, 300, 400, 1040, dict(ST=2, grid_x=2, turn=2)),     # the shallowest ring: a pair holds both slots
    (2, 300, 144, 784, dict(ST=3, grid_x=1, turn=2)),      # 7 stages a tile on 3 slots
    (0, 300, 400, 1040, dict(grid_x=2, grid_y=1, turn=2)),  # the ring of 6: wraps inside and after pairs
    (0, 1, 16, 16),                      # one stage, one tile, m = 1
    (2, 300, 400, 1040, dict(grid_x=2, grid_y=1, bf16=True, turn=2, st128=5)),  # rows staged under the next stage
    (2, 300, 400, 656, dict(grid_x=2, dbl=0)),     # FP8_DBL128=0: one accumulator at 128, as before
    (0, 129, 400, 1040, dict(grid_y=2, dbl=0)),
])
# FP8_DBL_TURN (the source's default: 8, the block build 16; the block cases below pin 8 unless said): turns of that many stages while as many are left (acc, acc1 alternating, one
# group in flight, wait_group 0 at the turn's end), then pairs and a lone stage; the ring of 6 wraps inside turns
group("BN 128, DBL in turns", [
    (0, 300, 400, 1040, dict(grid_x=2, grid_y=1)),  # 9 stages: a turn and a lone stage, 6 tiles a block (pre-issued)
    (2, 300, 400, 1296, dict(turn=8, grid_x=3, grid_y=1)),  # block scales: a turn, a pair, a lone stage; 4 tiles a block
    (1, 129, 400, 2048, dict(grid_y=2)),    # split 2 of 16 stages: a turn a range
    (0, 129, 352, 2304, dict(grid_y=2)),    # split 2 of 18: a turn and a lone stage a range
    (2, 129, 400, 2048, dict(turn=8, grid_x=4, grid_y=2)),  # split 2, two tiles a block: a range's first turn pre-issued
    (2, 300, 144, 2048, dict(turn=8, grid_x=1, grid_y=1)),  # 16 stages: two turns back to back, 6 tiles in one block
    (0, 300, 400, 1280, dict(ST=2, grid_x=2, grid_y=1)),  # the shallowest ring under a turn and a pair
    (2, 300, 400, 1040, dict(turn=8, ST=3, grid_x=2, grid_y=1)),  # 3 slots: wraps inside a turn, after a lone stage
    (1, 129, 400, 1296, dict(grid_x=2, turn=4)),  # FP8_DBL_TURN=4, split 2 (5, 6 stages): a turn, a pair or a lone one
    (2, 129, 144, 2304, dict(turn=16, grid_x=1, grid_y=1)),  # FP8_DBL_TURN=16: a turn and a pair, 4 tiles a block
    (0, 129, 272, 3328, dict(turn=16, grid_y=1)),  # 26 stages: a turn of 16, then pairs
    (2, 300, 400, 1040, dict(turn=8, grid_x=2, grid_y=1, bf16=True)),  # 8-byte bf16 pairs while the next tile's stage runs
    (2, 300, 400, 2432, dict(grid_x=2, grid_y=1)),  # the block build's default turn of 16 (19 stages): a turn, a pair, a lone stage
])
# W's TMA boxes (choose_wbox, QC_FP8_WBOX): 128 rows by default (one box a 128 stage, two at 256), 64 with 192 in the
# plan, 32 with 160; a box partly past n loads whole (zeros), boxes wholly past n are not loaded
group("W boxes (128, 64, 32 rows)", [
    (0, 300, 400, 400, dict(grid_x=2, eff=EFF_S19)),     # 64-row boxes at BN 128 (two a stage, DBL), the last tile 16 wide
    (2, 300, 1040, 272, dict(grid_x=3, eff=EFF_S19)),    # 64-row boxes at BN 128, block scales
    (1, 300, 400, 656, dict(grid_x=2, wbox=32)),         # QC_FP8_WBOX=32 with the default widths: four a 128 stage
    (0, 300, 1040, 400, dict(eff=EFF_256, grid_x=3, wbox=64)),  # BN 256 in 64-row boxes, the last tile 16 wide
    (2, 300, 1040, 272, dict(eff=EFF_256, grid_x=3, wbox=256)),  # QC_FP8_WBOX=256 ignored: 128-row boxes
    (1, 1100, 2256, 144, dict(pair=True, grid_x=6, eff=EFF_S19)),  # pair, BN 192 in 64-row boxes: ranks copy 2 and 1
])
group("build options (ST, PROMOTE, AHEAD)", [
    (0, 129, 400, 1040, dict(ST=2)),
    (2, 300, 144, 656, dict(ST=2, grid_x=2)),
    (1, 129, 352, 1040, dict(P=2, eff=EFF_OLD)),  # FP8_PROMOTE > 1 builds only with FP8_EFF256=0
    (0, 64, 400, 784, dict(P=3, ST=3, grid_x=2, eff=EFF_OLD)),
    (1, 17, 144, 1552, dict(P=4, ST=4, eff=EFF_OLD)),
    (0, 129, 352, 2048, dict(P=5, ST=5, grid_y=2, eff=EFF_OLD)),
    (0, 300, 400, 656, dict(P=2, ST=2, grid_x=4, eff=EFF_OLD)),
    (2, 129, 608, 528, dict(ahead=0)),
    (2, 300, 400, 400, dict(ahead=0, ST=3, grid_x=2, grid_y=2, dbl=0)),  # (DBL loads each pair's scales itself)
    (1, 300, 1040, 208, dict(ST=3, grid_x=5)),
    (1, 129, 400, 1040, dict(P=2, grid_x=2)),  # FP8_PROMOTE 2 with the default weights (256 not built): one acc at 128
    (0, 129, 352, 1040, dict(ST=5, grid_x=2)),  # a 5-stage ring of the unstaged layout (-DFP8_ST128=5)
    (2, 129, 400, 1040, dict(st128=3, grid_x=2)),  # QC_FP8_ST128=3: 3 stages and the staging (no bf16 here)
])

want = ["BN %d partial tile" % b for b in (128, 160, 192)] + ["ring wrap ST %d" % s for s in (2, 3, 4, 5, 6)] + \
    ["PROMOTE %d, %s group" % (p, g) for p in (2, 3) for g in ("full", "short")] + \
    ["block scales BN 128 split 16", "block scales BN 160 split 16", "block scales BN 160 split 12",
     "block scales BN 160 split 8", "block scales BN 160 split 4", "block scales BN 192 split 16",
     "block scales BN 192 split 8", "next tile's first stage issued early", "split 2", "split 3", "split 4",
     "next tile's first stage issued early (split 2)", "empty K range", "row tiles past a group of 8",
     "pair: multicast stage", "pair: a row tile past m",
     "BN 256 partial tile", "BN 256 half 1 partial", "BN 256 half 1 wholly past n", "block scales BN 256",
     "block scales BN 256, half 1 past the last weight block", "split 2 at BN 256", "split 3 at BN 256",
     "split 4 at BN 256", "next tile's first stage issued early (BN 256: half 0)",
     "next tile's first stage issued early (split 2) (BN 256: half 0)", "bf16 rows staged (BN 128)",
     "bf16 rows staged (BN 160)", "bf16 rows staged (BN 192)", "bf16 rows from the registers (BN 256)",
     "bf16 rows from the registers (BN 256, 8-byte pairs, channel)",
     "bf16 rows from the registers (BN 256, 8-byte pairs, block), a partial tile",
     "bf16 rows from the registers (pair)",
     # 128 columns unstaged (FP8_STG128 0): 8-byte pairs in every mode, whole and partial tiles; 4 bytes, n % 16 != 0
     "bf16 rows from the registers (BN 128, 8-byte pairs, channel)",
     "bf16 rows from the registers (BN 128, 8-byte pairs, channel), a partial tile",
     "bf16 rows from the registers (BN 128, 8-byte pairs, tensor)",
     "bf16 rows from the registers (BN 128, 8-byte pairs, tensor), a partial tile",
     "bf16 rows from the registers (BN 128, 8-byte pairs, block)",
     "bf16 rows from the registers (BN 128, 8-byte pairs, block), a partial tile",
     "bf16 rows from the registers (BN 128, n % 16 != 0)",
     # FP8_DBL128 (BN 128, two accumulators) and W's box rows (choose_wbox)
     "DBL: a K range of an even number of stages", "DBL: a K range of an odd number of stages",
     "DBL: a one-stage K range", "DBL: an empty K range", "DBL: split-K", "DBL: block scales", "DBL: a partial tile",
     "DBL: the first stage pre-issued before the previous tile's epilogue",
     "DBL: the next tile's first stage issued early", "DBL: the next tile's first stage issued early (split-K)",
     "DBL: ring wrap between a pair's stages (ST 5)", "DBL: ring wrap after a pair (ST 5)",
     "DBL: ring wrap after a lone last stage (ST 5)", "DBL: ring wrap between a pair's stages (ST 2)",
     "DBL: ring wrap after a pair (ST 2)", "DBL: ring wrap between a pair's stages (ST 3)",
     "DBL: ring wrap between a pair's stages (ST 6)", "DBL: ring wrap after a pair (ST 6)",
     "DBL: ring wrap after a lone last stage (ST 6)",
     "BN 128 with one accumulator (FP8_DBL128=0)",
     # FP8_DBL_TURN: turns (the default's, 4, 16) and what follows them, in split-K ranges, pre-issued, wrapping
     "DBL: pairs only (FP8_DBL_TURN 2)", "DBL: a K range shorter than a turn (pairs only)",
     "DBL: a turn of %d stages" % TURN_ROW, "DBL: a turn of 4 stages", "DBL: a turn of %d stages" % TURN_BLOCK,
     "DBL: a turn, then pairs", "DBL: a turn, then a lone stage", "DBL: turns back to back",
     "DBL: a turn in a split-K range", "DBL: a turn's first stage pre-issued", "DBL: block scales in a turn",
     "DBL: ring wrap inside a turn (ST 6)", "DBL: ring wrap inside a turn (ST 2)", "DBL: ring wrap inside a turn (ST 3)",
     "DBL: ring wrap at a turn's end (ST 6)", "DBL: ring wrap at a turn's end (ST 2)",
     "W boxes of 128 rows", "W boxes of 64 rows", "W boxes of 32 rows",
     "a W box partly past n (128 rows)", "a W box partly past n (64 rows)", "a W box partly past n (32 rows)",
     "pair: a rank copies no W box"]
missing = [w for w in want if w not in COV]
if os.environ.get("QC_FP8_WGMMA_EMU_COV"):  # every path the cases took (to pick the list above from)
    print("\n".join(sorted(COV)))
report(not missing, "coverage: %s" % ("missing " + ", ".join(missing) if missing else "%d kernel paths taken" % len(want)))
print("test_fp8_wgmma_emu: coverage: %s" % ("MISSING " + ", ".join(missing) if missing else
                                           "every listed path taken (%d: partial tiles of each width, ring wraps at "
                                           "ST 2-6, PROMOTE groups, each block-scale split, splits 2-4, empty K ranges, "
                                           "early next-tile stages, BN 256's halves partial / past n, its block scales "
                                           "and splits, bf16 rows staged and from the registers (8-byte pairs at 128 in "
                                           "each mode, 4 bytes); DBL's even, odd, one- and no-stage ranges, wraps "
                                           "inside / after pairs and turns, turns of 4, 8, 16 then pairs or a lone "
                                           "stage, pre-issue, split-K, block scales, partial tiles; W boxes of 128, 64, "
                                           "32 rows, partly past n)" %
                                           len(want)))

# Two hazards this test found, which the host never launches (checked above), fixed in the kernel: an empty K range
# with several tiles a block no longer pre-issues the next tile's first stage (the producer fills nothing), and
# FP8_PROMOTE above the ring's stages is a compile error (a consumer holds P stages before releasing one).
errs, desc, _ = run_case(0, 300, 400, 208, policies=("eager", "random"), grid_x=2, grid_y=3)
report(not errs, "%s (an empty K range with several tiles a block): %s" % (desc, errs[0] if errs else "runs"))
report("#if FP8_P > FP8_ST192 || FP8_P > FP8_ST160 || FP8_P > FP8_ST128" in KSRC,
       "wgmma.cu refuses FP8_PROMOTE above the ring's stages at compile time")
# Found by this test, fixed in session 20: QC_FP8_BN_EFF=x,0,0,0 (256 only) let QC_FP8_WBOX=256 through choose_wbox,
# but the pair builds never take 256 and fall back to 128-column tiles, where nb = 128 / 256 = 0 (no W box loaded)
# and a partial tile's one 256-row box landed past its stage's 128 W rows.  choose_wbox now ignores 256 (the pair
# build runs with 128-row boxes) and wgmma.cu's #error requires 128 % WG_BOX_ROWS == 0.
errs, desc, _ = run_case(0, 300, 400, 400, policies=("eager",), pair=True, eff=EFF_256, wbox=256)
report(not errs, "%s (QC_FP8_WBOX=256 asked for, 256-only weights, a pair build's 128 columns): %s" %
       (desc, errs[0][:160] if errs else "runs with 128-row boxes"))
report(not wbox_builds(EFF_256, 256), "wgmma.cu refuses WG_BOX_ROWS 256 (the 128-column path is always built)")

# Mutations: each deliberate bug must be caught (a deadlock, a fault or a failed check) on at least one case.
MUTATIONS = [
    ("shadow", "block mode's kb (= kt_n) shadows the split's first stage: consumers skip every stage the producer fills"),
    ("cons_noflip", "consumer ring wrap without the phase flip"),
    ("cons_wrap", "consumer ring wraps at ST - 1 (off by one)"),
    ("prod_parity", "producer waits empty with parity ph instead of ph ^ 1"),
    ("empty4", "empty barriers initialized for 4 arrivals (one warpgroup) instead of 8"),
    ("issued", "a tile's first stage left to the pre-issue (the `|| !issued` dropped): the first tile's never issued"),
    ("nb", "the producer's box count rounds down (the last tile's box partly past n not loaded)"),
    ("release", "with FP8_PROMOTE > 1, only the group's last stage goes back to the producer"),
    ("early", "a stage goes back to the producer before its wgmma group retired (arrive before wait_group 0)"),
    ("pre_first", "the next tile's first stage issued with scale-d 1 (adds to the old acc)"),
    ("last", "the last arriver's test == nsp instead of == nsp - 1"),
    ("order", "the last arriver adds the slots from its own split on (arrival order)"),
    ("mask", "the epilogue's column mask cn < n + 1"),
    ("scale_ahead", "block mode loads the scales two stages ahead"),
    ("empty8p", "pair builds: empty barriers for 8 arrivals (one block's warps) instead of 16"),
    ("no_peer", "pair builds: consumers do not arrive on the partner's empty barrier"),
    ("mc_self", "pair builds: w boxes copied into the issuing block only (no multicast)"),
    ("no_csync", "pair builds: no cluster barrier before exit"),
]
MUT_CASES = [(2, 300, 400, 400, dict(grid_x=2, grid_y=2)), (2, 300, 400, 400, dict(grid_x=2, grid_y=2, dbl=0)),
             (0, 129, 352, 1040, dict(grid_y=2)),
             (1, 17, 400, 1040, dict(grid_y=4)), (0, 129, 400, 1040, dict(P=2, ST=3, eff=EFF_OLD)),
             (0, 300, 400, 656, dict(pair=True, grid_x=4, ST=3))]
# BN 256's halves, the workspace's slots, the bf16 output
MUTATIONS_256 = [
    ("half_w", "BN 256: half 1 reads half 0's W rows (no h * BNW * 128-byte offset in its descriptor)"),
    ("empty_h0", "BN 256: the stage goes back to the producer after half 0, while half 1 still has to read it"),
    ("half_tot", "BN 256: half 1 promoted into tot's first slice (tot[0..63], not tot[64..127])"),
    ("half_scale", "BN 256 block mode: weight block b0's scales for both halves (half 1 is block b0 + 1)"),
    ("slot96", "the split-K workspace slot still sized for 96 sums a thread: slots overlap at BN 256"),
    ("work96", "the host's workspace still sized for slots of 96 sums: 256-column splits run past it"),
    ("pre_both", "the next tile's pre-issue issues both halves of its first stage (half 1 then overwrites acc)"),
    ("pre_none", "the next tile's pre-issue issues nothing, `issued` still set"),
    ("stage256", "bf16 rows staged at BN 256 too (the host sizes no staging there)"),
    ("stage128", "bf16 rows staged at BN 128 with FP8_STG128 0 (the host sizes 6 stages and no staging there)"),
    ("host_nostg", "the host sizes no staging at 128 whatever QC_FP8_ST128 (FP8_STG128 1 stages rows past the ring)"),
    ("host_sts5", "the host's sts keeps 5 stages at 128 (the old table) while the device rings 6"),
    ("bulk_read", "staged bf16 rows rewritten before the previous tile's bulk copies read them (no wait_group.read)"),
    ("bulk_exit", "the block exits with its last staged bf16 rows still being copied (no wait_group 0)"),
    ("xchg_swap", "8-byte bf16 stores: the even lane puts its partner's pair first"),
    ("xchg_cs", "8-byte bf16 stores: the even lane's store 6 columns back instead of 8"),
]
MUT_CASES_256 = [(2, 300, 1040, 528, dict(eff=EFF_256, grid_x=3, grid_y=2, bf16=True)),
                 (0, 300, 400, 400, dict(grid_x=2, bf16=True, st128=5)),
                 (0, 33, 8448, 2048, dict(eff=EFF_256, policies=("eager",))),  # 33 tiles x 4 splits: 132 slots
                 (1, 300, 400, 400, dict(grid_x=2, bf16=True))]


# FP8_DBL128's pairs of stages and W's box rows
MUTATIONS_DBL = [
    ("dbl_rel1", "DBL: kt + 1's slot goes back to the producer before its wait_group 0 (acc1's group still reads it)"),
    ("dbl_nowait1", "DBL: no wait_group 1 after kt + 1's issue: acc promoted while its group is in flight"),
    ("dbl_scale", "DBL block mode: acc1 (stage kt + 1) promoted with stage kt's scales"),
    ("dbl_slot", "DBL: acc's retire arrives on the slot after next_slot (kt + 1's), not on kt's sa_"),
    ("wbox_dev32", "the device places 32-row W boxes (WG_BOX_ROWS 32, nb and expect_tx of 32) while the map's are 128"),
    ("wbox_map32", "the host's map keeps 32-row W boxes (the old MAPS_W8A8 literal) while the device counts 128"),
]
MUT_CASES_DBL = [(2, 300, 400, 656, dict(grid_x=2, ST=2)), (0, 300, 400, 1040, dict(grid_x=3))]
# FP8_DBL_TURN's turns (8: the block case pins the row builds' default), and the 8-byte bf16 pairs at 128 (tensor mode)
MUTATIONS_TURN = [
    ("turn_acc", "DBL turn: the turn's last stage retired from acc (stage T - 2's, promoted again), not acc1"),
    ("turn_wait1", "DBL turn: wait_group 1 at the turn's end, not 0: acc1 promoted while its group is in flight"),
    ("turn_pre", "DBL turn: the first stage issued again although pre-issued (the `|| !issued` test dropped)"),
    ("turn_slot", "DBL turn: stage q - 1's retire arrives on stage q's slot (sl[q & 1], still being read)"),
    ("turn_scale", "DBL turn block mode: every stage of a turn promoted with the turn's first stage's scales (kt, not kt + q)"),
    ("turn_pq", "DBL turn block mode: stage q - 1 promoted with pq[q & 1] (stage q - 2's products; unwritten at q = 1)"),
    ("turn_step", "DBL turn: kt += FP8_DBL_TURN - 1 after a turn (a stage skipped)"),
]
MUT_CASES_TURN = [(2, 300, 400, 1296, dict(turn=8, grid_x=2, grid_y=1)), (1, 129, 400, 2048, dict(grid_y=2, bf16=True))]


def caught(c, name):  # the first error of the mutated case, after its mode and shape
    errs, desc, _ = run_case(*c[:4], mut=frozenset([name]), seed=17, **c[4])
    return "%s: %s" % (desc.split(" grid")[0].split()[0] + " m=%d n=%d k=%d" % c[1:4], errs[0]) if errs else None


T.hunt(MUTATIONS, MUT_CASES, caught)
T.hunt(MUTATIONS_256, MUT_CASES_256, caught)
T.hunt(MUTATIONS_DBL, MUT_CASES_DBL, caught)
T.hunt(MUTATIONS_TURN, MUT_CASES_TURN, caught)
T.hunt([("xchg_swap", "the 8-byte bf16 stores at 128 (tensor mode): the even lane puts its partner's pair first"),
        ("xchg_cs", "the 8-byte bf16 stores at 128 (tensor mode): the even lane's store 6 columns back, not 8")],
       [(1, 300, 400, 400, dict(grid_x=2, bf16=True))], caught)
T.finish(" (%.1f s)" % (time.time() - T0))
