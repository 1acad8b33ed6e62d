# test_ra_gemm_emu.py - qc_ra_gemm_src.h's register-A GEMM (mxfp4.wgmma, w4a16.wgmma_bf16_*) replayed on the CPU.
# A line-by-line transcription (keep it in step with the sources: the lines it copies are checked as anchors below): the
# host plan (qc_ra_tail_split, qc_ra_plan_of: BM and the last wave's split sp by the cost in x-row stages, QC_RA_SPLIT
# forcing, refused or ignored; qc_ra_gemm_dims, qc_ra_ring_bytes, qc_ra_workspace_bytes) and the kernel's pick of BM and
# sp from its dynamic smem size (qc_ra_go); QC_RA_SETUP's split (dfull, sp, dw, units: refused without a workspace, when
# tail x sp > 132 or kt < sp), qc_ra_unit and the persistent walk over units (whole tiles, then each tail tile's sp
# units of consecutive stages [kb, ke)); qcp_tile; the producer warpgroup's stages kb..ke-1 (x boxes of 64 rows, those
# wholly past m not loaded; W row halves swapped on every other 4-row group, rows clamped to n - 1; the format's
# metadata words at pt * 4, + 512 for the second); each consumer thread's lane mapping and its format's build() with the
# same bit operations (MxDec: mxw_pair, mxw_f1 / mxw_f2, the warp vote `big`; W4Bf16<MODE> for MODE 0 sym, 1 asym and 2
# fmin: w4bw_s2, the lop3 and the two bf16x2 fmas of w4bw_deq, fmin's w4bw_c2 (m + 8 d in f32, then bf16) and
# w4bw_fmin); fma.rn.bf16x2 emulated exactly (the product and sum in float64, checked exact, one round to nearest even,
# bf16 subnormals kept, overflow to inf, the -0 addend); the ring of ST stages with its mbarriers (wgmma_replay.py's
# MBar and scheduler); the two register sets taking turns with one wgmma group kept in flight (commit, wait_group 1, the
# stage before freed, the next stage built into its registers; wait_group 0 and the last stage freed after a unit);
# scale-d off only for a unit's first wgmma (kt > kb || j > 0); the wgmma descriptors (decoded back into the stage and
# k16 step they address); the accumulator layout; a split unit's epilogue: bar 1 of the 256 consumer threads, the
# arrival (atomicAdd on arrived[tail]) and qc_ra_last, the slot store of all but the last of two (acc[i] of thread wi at
# slot word i * 256 + wi), __threadfence, the count on written[tail], the last's wait for written >= sp - keep, its sum
# (of two: the other's slot added to its registers; of more: slots 0..sp-1 in split order) and its reset of both
# counters; the masked y stores into a NaN-poisoned y.
# The grid runs as one: every block's producer warpgroup and two consumer warpgroups are actors of one scheduler
# (under eager, lazy, random and starved interleavings), each x box, each producer warp's cp.asyncs and each
# warpgroup's slot stores land as separate events (a slot store is visible to other blocks only once landed;
# __threadfence waits for the warpgroup's own stores), bar 1 is a rendezvous of the block's two consumer actors, and
# the last unit's spin on `written` is a wait the atomicAdd that satisfies it ends (one that never comes is a
# deadlock).  The workspace is one zero-filled buffer of qc_ra_workspace_bytes a case, reused by each interleaving's
# launch in turn: int counters arrived[0..255] and written[256..511], then f32 slots from word 512; every slot word
# carries a tag of its writer (launch, tile, split), and a read of a word its unit has not stored (landed) in this
# launch is an error.  Arithmetic: wgmma is a plain matrix product of the A fragments (placed by mma.sync's m16n8k16
# A layout) with the stage's x rows in float64 (exact products, float64 sums); it reads its operands when issued and
# they are checked unchanged when its group retires.  A whole tile's y is that float64 accumulator.  A split unit's
# sums are rounded to f32 once when its stages are done (standing for the kernel's f32 registers), and the slots, the
# last unit's adds and y are f32 from there (numpy float32: each add rounded to nearest even, NaN canonical as the
# GPU makes it): so which unit arrives last can change y bitwise only if the kernel's order of f32 adds depends on it.
# Not modelled: f32 rounding inside a unit's wgmma chain and overflow in it, threads of a warpgroup running apart
# (each warpgroup is one actor; a producer warp's 32 cp.async arrivals come together), memory ordering beyond the
# slot stores' landing and __threadfence (acquire/release scopes, L1 and __ldcg), the 128-byte swizzle's byte
# placement, setmaxnreg and how many blocks are resident (a grid smaller than the plan's stands in for more tiles
# than SMs).
# Checked: every A fragment bit for bit against the format's defined weights (mxfp4: E2M1 * 2^(e-127), inf past
# bf16, NaN for e = 255; w4a16: bf16_rn(bf16_rn(s) (q - z)), rounded here by another method; fmin: bf16_rn(bf16(d)
# (q - 8) + bf16(f32(m) + 8 d)), one rounding of the exact value, done here in integers); y against a float64
# x . W^T (within 1e-9 of sum |x w| for whole tiles, (sp + 1) 2^-24 + 1e-9 for split tiles, NaN and inf positions
# exact); a split tile's y bit for bit the f32 sum of its units' f32 sums in split order, whichever unit was last; y
# bitwise equal across interleavings (which vary the unit that arrives last: covered); every output written exactly
# once; every counter back to zero after each launch; no deadlock; no stage read before it landed or overwritten
# under a wgmma, no A registers rewritten under one, no accumulator read with a group in flight; no slot read before
# its writer's store landed, or holding another tile's or launch's sums; no copy, counter or slot out of bounds or
# misaligned; the host's plan over shapes (the one the device then runs: BM, sp, units, grid; every tile whole
# without a workspace) and QC_RA_SETUP / qc_ra_unit over tiles x grids x asked splits x stages (each stage of each
# tile in exactly one unit).  Deliberate bugs are injected at the end and each must be caught.  Exit 77 (skip)
# without numpy.
import os, sys, time
from types import SimpleNamespace
try:
    import numpy as np
except ImportError:
    print("test_ra_gemm_emu: skip: numpy is not installed")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # wgmma_replay.py, whatever the working directory
import wgmma_replay as rp
from wgmma_replay import Actor, Fault, MBar, cdiv, qc_desc

PROG = "test_ra_gemm_emu"
T0 = time.time()
VERBOSE = bool(os.environ.get("QC_RA_GEMM_EMU_VERBOSE"))
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
COV = set()  # which paths the cases took (checked against a list after the case groups)

# ---- constants of qc_ra_gemm_src.h -----------------------------------------------------------------------------------
QC_RA_SMS, QC_RA_THREADS, QC_RA_FIXED = 132, 384, 128
QC_RA_ST64, QC_RA_ST128, QC_RA_ST256 = 16, 10, 6
QC_RA_SPLIT_MAX, QC_RA_SPLIT_FIX, QC_RA_SPLIT_PER, QC_RA_SPLIT_MIN = 8, 2, 4, 4
SMEM_OPTIN = 232448                 # sm_90's dynamic + static shared memory a block
SMEM_STATIC = 2 * QC_RA_ST64 * 8 + 4  # bars[2 * QC_RA_ST64] and qc_ra_last
WS_WRITTEN, WS_SLOTS = 256, 512     # workspace words: arrived[tail] at tail, written[tail] at 256 + tail, slots at 512
DYN0 = 0x0100                       # shared-window address of the dynamic smem (after bars; any 16-aligned value)
XBOX = 64 * 64 * 2                  # one TMA box of x: 64 rows x 64 k of bf16 (8192 bytes)
TOL = 1e-9                          # |y - ref| <= TOL * sum |x w|: both sums are float64 sums of exact products
F32_EPS = 2.0 ** -24                # f32's unit roundoff: a split tile's y is within (sp + 1) of it (times sum |x w|)


# ---- host side: the launch plan ------------------------------------------------------------------------------------
def qc_ra_ring_bytes(bm):
    st = QC_RA_ST256 if bm == 256 else QC_RA_ST128 if bm == 128 else QC_RA_ST64
    return st * ((bm * 128 + 128 * 32 + 2 * 512 + 1023) // 1024 * 1024) + 1024


def atoll(s):
    """C's atoll: leading white space, a sign, the digits that follow; 0 when none."""
    s = s.lstrip(" \t\n\v\f\r")
    i = 1 if s[:1] in ("+", "-") else 0
    j = i
    while j < len(s) and s[j].isdigit():
        j += 1
    return int(s[:j]) if j > i else 0


def qc_ra_tail_split(tail, kt, env_sp):
    """The best split of `tail` tiles of kt stages (1: none) and its time in stages: (sp, stages); env_sp (the value
    of QC_RA_SPLIT, None when unset; 1..8, else ignored) forces one."""
    best, cost = 1, kt
    if tail <= 0:
        return 1, 0
    forced = atoll(env_sp) if env_sp is not None else 0
    if forced < 1 or forced > QC_RA_SPLIT_MAX:  # outside 1..8: ignored, the plan's pick
        forced = 0
    for sp in range(2, QC_RA_SPLIT_MAX + 1):
        if tail * sp > QC_RA_SMS or kt < sp or (not forced and kt // sp < QC_RA_SPLIT_MIN):
            break
        c = (kt + sp - 1) // sp + QC_RA_SPLIT_FIX + QC_RA_SPLIT_PER * sp
        if (sp == forced) if forced else (c < cost):
            best, cost = sp, c
    return best, (kt if best == 1 else cost)


def qc_ra_plan_of(m, n, k, env_bm=None, env_sp=None):
    """qc_ra_plan_of: SimpleNamespace(bm, tiles, splits, units); env_bm the value of QC_MXW_BM / QC_W4BW_BM, env_sp
    that of QC_RA_SPLIT (None when unset)."""
    pl = SimpleNamespace(bm=64, tiles=0, splits=1, units=0)
    forced = int(env_bm) if env_bm in ("64", "128", "256") else 0
    lo = forced if forced else 64 if m <= 64 else 128
    hi = forced if forced else 64 if m <= 64 else 256
    best, tn, kt = -1, (n + 127) // 128, k // 64
    if m <= 0 or n <= 0:
        return pl
    bm = lo
    while bm <= hi:
        tiles = (m + bm - 1) // bm * tn
        splits, last = qc_ra_tail_split(tiles % QC_RA_SMS, kt, env_sp)
        units = tiles - tiles % QC_RA_SMS + tiles % QC_RA_SMS * splits
        cost = (bm + QC_RA_FIXED) * (tiles // QC_RA_SMS * kt + last)
        if best < 0 or cost <= best:  # a tie: the wider tile
            best, pl = cost, SimpleNamespace(bm=bm, tiles=tiles, splits=splits, units=units)
        bm *= 2
    return pl


def qc_ra_gemm_dims(m, n, k, env=None, env_sp=None):
    """(grid x, block x, dynamic shared bytes) of the launch; zeros for an empty problem."""
    if m <= 0 or n <= 0:
        return 0, 0, 0
    pl = qc_ra_plan_of(m, n, k, env, env_sp)
    return (pl.units if pl.units < QC_RA_SMS else QC_RA_SMS), QC_RA_THREADS, qc_ra_ring_bytes(pl.bm) + 16 * (
        pl.splits - 1)


def qc_ra_workspace_bytes(k):
    return 2048 + QC_RA_SMS * 128 * 256 * 4 if k >= 128 else 0


# ---- device side: sizes, the pick of BM and sp, the work units, the tile order ---------------------------------------
def qc_ra_stage(BM):  # x, W rows, 2 words a row of metadata, rounded up to 1 KiB
    return (BM * 128 + 128 * 32 + 2 * 512 + 1023) // 1024 * 1024


def qc_ra_ring(BM, ST):
    return ST * qc_ra_stage(BM) + 1024


def qc_ra_go(dsm, m, n, k):
    """The kernel body: (BM, ST, sp_in) of the qc_ra_gemm it runs for a dynamic smem size (the ring of BM, then 16
    bytes a split past the first), None when it returns at once."""
    if m <= 0 or n <= 0 or k <= 0 or (k & 63):
        return None
    span = 16 * QC_RA_SPLIT_MAX
    for BM, ST in ((256, QC_RA_ST256), (128, QC_RA_ST128), (64, QC_RA_ST64)):
        r = qc_ra_ring(BM, ST)
        if dsm >= r and dsm - r < span and (dsm - r) % 16 == 0:
            return BM, ST, 1 + (dsm - r) // 16
    return None


def qc_ra_setup(m, n, k, BM, grid, sp_in, work, mut=frozenset()):
    """QC_RA_SETUP's tile counts and split: (tiles_m, tiles_n, kt_n, sp, dw, units); work: the pointer is not NULL."""
    tiles_m, tiles_n = (m + BM - 1) // BM, (n + 127) // 128
    tiles, kt_n = tiles_m * tiles_n, k // 64
    dfull = tiles // grid * grid
    ok = sp_in > 1 and (work or "nowork" in mut) and (tiles - dfull) * sp_in <= QC_RA_SMS and (
        kt_n >= sp_in or "dev_kt" in mut)
    sp = sp_in if ok else 1
    dw = dfull if sp > 1 else tiles
    return tiles_m, tiles_n, kt_n, sp, dw, dw + (tiles - dw) * sp


def qc_ra_unit(u, d, sp, kt_n, mut=frozenset()):
    """Work unit u: (tile, kb, ke, j): stages [kb, ke) of the tile, split j of it (-1: the whole tile)."""
    if u < d:
        return u, 0, kt_n, -1
    v = u - d
    t, j = d + v // sp, v % sp
    kb, ke = kt_n * j // sp, kt_n * (j + 1) // sp
    if "unit_gap" in mut and j > 0:  # each split past the first starts a stage late
        kb += 1
    if "unit_overlap" in mut and j < sp - 1:  # each split but the last runs one stage into the next
        ke += 1
    return t, kb, ke, j


def qcp_tile(t, tiles_m, tiles_n, mut=frozenset()):
    """Tile t -> (x row tile, W row tile): groups of 8 x tiles, x fastest."""
    per_group = 8 * tiles_n
    first_m, in_g = t // per_group * 8, t % per_group
    gsz = tiles_m - first_m if tiles_m - first_m < 8 else 8
    if "tile" in mut:
        gsz = 8
    return first_m + in_g % gsz, in_g // gsz


# ---- bf16 arithmetic -------------------------------------------------------------------------------------------------
def bf16_val(b):
    """bf16 bits (the low 16 of each int) -> float64, exactly."""
    b = (np.asarray(b, np.int64) & 0xFFFF).astype(np.uint32) << 16
    return b.view(np.float32).astype(np.float64)


def bf16_round(v, mode="rn"):
    """float64 -> bf16 bits: to nearest even ("rn") or toward zero ("rz"); subnormals kept (quantum 2^-133 below
    2^-126), overflow to inf (rn) or the largest finite (rz), NaN -> the canonical 0x7FFF."""
    v = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        a = np.abs(v)
        _, ex = np.frexp(a)  # a = f 2^ex, f in [0.5, 1): 8 significant bits leave a quantum of 2^(ex - 8)
        qu = np.ldexp(1.0, np.maximum(ex - 8, -133))
        r = (np.round(a / qu) if mode == "rn" else np.trunc(a / qu)) * qu  # np.round: halves to even
        if mode == "rz":
            r = np.where(np.isinf(a), a, np.minimum(r, 255 * 2.0 ** 120))  # toward zero: the largest finite
        bits = np.where(r >= 2.0 ** 128, 0x7F80, (r.astype(np.float32).view(np.uint32) >> 16).astype(np.int64))
    bits = bits | (np.signbit(v).astype(np.int64) << 15)
    return np.where(np.isnan(v), 0x7FFF, bits)


def fma_bf16x2(a, b, c, mode="rn"):
    """fma.rn.bf16x2: per 16-bit half, a * b + c computed exactly (the products of two bf16 are exact in float64, and
    the addends used here, -0, -(128 + z) and fmin's bf16 centre, add exactly: checked), then one rounding to bf16."""
    a, b, c = np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(c, np.int64)
    out = 0
    with np.errstate(all="ignore"):
        for sh in (0, 16):
            p, q = bf16_val(a >> sh) * bf16_val(b >> sh), bf16_val(c >> sh)
            v = p + q
            bb = v - p  # TwoSum: the float64 sum's error, which must be 0 for the emulation to be exact
            err = (p - (v - bb)) + (q - bb)
            assert not (np.isfinite(v) & (err != 0)).any(), "fma_bf16x2: an inexact float64 sum"
            out = out | (bf16_round(v, mode) << sh)
    return out


def bf16_ref_bits(f32):
    """The reference's rounding of f32 values to bf16 bits, another method than bf16_round's: the f32 bits plus
    0x7FFF plus the kept lsb, shifted down (a carry into the exponent rounds up a binade or to inf).  Finite inputs."""
    u = np.asarray(f32, np.float32).view(np.uint32).astype(np.int64)
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def f16_val(h):
    return (np.asarray(h, np.int64) & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)


def lds(buf, off, words, what):
    """A shared-memory load of `words` 32-bit words (1: u32, 4: uint4) at byte offsets off (one a thread):
    (words, threads) little-endian words; misaligned or out of the region is a Fault."""
    off = np.asarray(off, np.int64)
    if (off % (4 * words)).any() or off.min() < 0 or (off + 4 * words).max() > buf.size:
        raise Fault("%s: a %d-byte shared load at %d (region of %d bytes)" %
                    (what, 4 * words, int(off.max()), buf.size))
    w = buf.view("<u4").astype(np.int64)
    return np.stack([w[off // 4 + i] for i in range(words)])


def warp_any(p):  # __any_sync(0xffffffff, p) for the warpgroup's 4 warps of 32 lanes
    return np.repeat(p.reshape(4, 32).any(axis=1), 32)


# ---- mxfp4.wgmma (plugins/mxfp4/mxfp4_wgmma.c): MxDec ----------------------------------------------------------------
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxw_f1(e, mut):  # 2^(e-1); 2^126 for e > 128 (a second multiply follows); NaN for 255
    lim = 127 if "mx_f1" in mut else 128
    return np.where(e <= lim, ((e + 126) << 7) * 0x10001, np.where(e < 255, 0x7E807E80, 0x7FC07FC0))


def mxw_f2(e):  # 2^(e-127) for e in 129..254; 1 otherwise
    return np.where((e > 128) & (e < 255), (e << 7) * 0x10001, 0x3F803F80)


def mxw_mul(a, b, mut):  # fma.rn.bf16x2 with the -0 addend
    return fma_bf16x2(a, b, 0 if "mx_zero" in mut else 0x80008000)


def mxw_pair(w, sh):  # byte t of w (sh = 8 t) -> bf16x2 of the E2M1 values of elements 2t, 2t + 1 times 2^-126
    y = w >> sh
    return ((y & 0xF) * 4160 + (y & 0xF0) * 0x01040000) & 0x81C081C0


class MxFmt:
    """mxfp4: qweight u8 [n, k/2] (element 2i in the low nibble of byte i), scales E8M0 u8 [n, k/32]."""

    def __init__(self, rng, n, k, specials, erange=(112, 140)):
        self.n, self.k, nb = n, k, k // 32
        codes = rng.integers(0, 16, (n, k))
        e = rng.integers(erange[0], erange[1] + 1, (n, nb))  # by default both sides of 128, mixed in warps
        for r, b, v in specials:  # (row, block, byte): 0 (2^-127), 128, 129, 254 (overflow to inf), 255 (NaN)
            e[r % n, b % nb] = v
        self.e = e
        self.buf = {"w.qweight": (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).reshape(-1),
                    "w.scales": e.astype(np.uint8).reshape(-1)}
        # the defined weights, in float64: E2M1(code) 2^(e - 127), inf past bf16's range, NaN for e = 255
        mag = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)  # code 8 is -0
        W = np.ldexp(mag, np.repeat(e, 32, axis=1) - 127)
        W = np.where(np.abs(W) >= 2.0 ** 128, np.copysign(np.inf, W), W)
        W[np.repeat(e == 255, 32, axis=1)] = np.nan
        self.W, self.Wnan = W, np.isnan(W)
        with np.errstate(all="ignore"):  # every finite value here is a bf16 number: its f32's upper half
            self.Wbits = (W.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
        self.name = "mxfp4"

    def meta(self, r, kt, mut):
        """MxDec::meta: [(word, buffer, byte offset)] of row r's words of stage kt (qcp_cp4 each)."""
        off = r * (self.k // 32) + 2 * kt
        return [(0, "w.scales", off if "mx_word" in mut else off & ~3)]

    def build(self, c, mut):
        """MxDec::build for the 128 threads of a consumer warpgroup: a[j][i] as an array (4, 4, 128)."""
        a = np.zeros((4, 4, 128), np.int64)
        nb = c.k // 32
        sh = (4 if "mx_nibble" in mut else 8) * c.t
        wa, wb = lds(c.ms, c.rl * 4, 1, "wa")[0], lds(c.ms, (c.rl + 8) * 4, 1, "wb")[0]
        s0, s1 = 8 * ((c.rc0 * nb + 2 * c.kt) & 3), 8 * ((c.rc1 * nb + 2 * c.kt) & 3)
        e00, e01 = (wa >> s0) & 255, (wa >> (s0 + 8)) & 255  # row rl, blocks 0 and 1
        e10, e11 = (wb >> s1) & 255, (wb >> (s1 + 8)) & 255  # row rl + 8
        big_rl = warp_any(((e00 > 128) & (e00 < 255)) | ((e01 > 128) & (e01 < 255)))
        big = warp_any(((e00 > 128) & (e00 < 255)) | ((e01 > 128) & (e01 < 255)) |
                       ((e10 > 128) & (e10 < 255)) | ((e11 > 128) & (e11 < 255)))
        if (big != big_rl).any():
            COV.add("mxfp4 big vote from rows rl + 8 only")
        if "mx_vote" in mut:  # the vote misses row rl + 8's bytes
            big = big_rl
        for b in range(2):  # 32-element block b: k16 steps 2b, 2b + 1
            r0 = lds(c.ws, c.rl * 32 + 16 * (b ^ c.swz), 4, "r0")
            r1 = lds(c.ws, (c.rl + 8) * 32 + 16 * (b ^ c.swz), 4, "r1")
            f0, f1 = mxw_f1(e01 if b else e00, mut), mxw_f1(e11 if b else e10, mut)
            a[2 * b][0] = mxw_mul(mxw_pair(r0[0], sh), f0, mut)
            a[2 * b][1] = mxw_mul(mxw_pair(r1[0], sh), f1, mut)
            a[2 * b][2] = mxw_mul(mxw_pair(r0[1], sh), f0, mut)
            a[2 * b][3] = mxw_mul(mxw_pair(r1[1], sh), f1, mut)
            a[2 * b + 1][0] = mxw_mul(mxw_pair(r0[2], sh), f0, mut)
            a[2 * b + 1][1] = mxw_mul(mxw_pair(r1[2], sh), f1, mut)
            a[2 * b + 1][2] = mxw_mul(mxw_pair(r0[3], sh), f0, mut)
            a[2 * b + 1][3] = mxw_mul(mxw_pair(r1[3], sh), f1, mut)
            if big.any() and "mx_big" not in mut:  # scale bytes above 128: the second factor (per warp: `big`)
                COV.add("mxfp4 big vote, mixed lanes" if not big.all() else "mxfp4 big vote")
                g0, g1 = mxw_f2(e01 if b else e00), mxw_f2(e11 if b else e10)
                for j in range(2 * b, 2 * b + 2):
                    a[j][0] = np.where(big, mxw_mul(a[j][0], g0, mut), a[j][0])
                    a[j][1] = np.where(big, mxw_mul(a[j][1], g1, mut), a[j][1])
                    a[j][2] = np.where(big, mxw_mul(a[j][2], g0, mut), a[j][2])
                    a[j][3] = np.where(big, mxw_mul(a[j][3], g1, mut), a[j][3])
        return a


# ---- w4a16.wgmma_bf16_sym / _asym / _fmin (plugins/w4a16/w4a16_wgmma_bf16.c): W4Bf16<MODE> --------------------------
def w4bw_s2(h, mut):  # cvt.f32.f16, then cvt.rn.bf16x2.f32 of it twice
    return bf16_round(f16_val(h), "rz" if "w4_s2rz" in mut else "rn") * 0x10001


def w4bw_deq(w, sh, negz, s2, mut):  # nibbles t and t + 4 of w (sh = 4t) -> bf16x2 of bf16(s) (q - z)
    v = ((w >> sh) & 0x000F000F) | 0x43004300  # lop3 0xEA: (a & b) | c
    d = fma_bf16x2(v, 0x3F803F80, negz)
    return fma_bf16x2(d, s2, 0x80008000, "rz" if "w4_rz" in mut else "rn")


def w4bw_c2(mh, dh, mut):  # fmin: bf16x2 of the f16 pair's centre m + 8 d (__fadd_rn in f32, 8 d exact), then RN
    if "w4_fmc" in mut:  # the centre without 8 d: bf16(m)
        return w4bw_s2(mh, mut)
    with np.errstate(all="ignore"):
        c = f16_val(mh).astype(np.float32) + np.float32(8) * f16_val(dh).astype(np.float32)  # float32 add: RN
    return bf16_round(c.astype(np.float64)) * 0x10001


def w4bw_fmin(w, sh, d2, c2, mut):  # fmin: bf16x2 of d (q - 8) + (m + 8 d), one rounding
    v = ((w >> sh) & 0x000F000F) | 0x43004300  # lop3 0xEA: 128 + q
    qb = fma_bf16x2(v, 0x3F803F80, 0xC300C300 if "w4_fm128" in mut else 0xC308C308)  # q - 8, exact
    return fma_bf16x2(qb, d2, c2, "rz" if "w4_rz" in mut else "rn")


def fmin_weight_bits(d16, m16, q):
    """fmin's defined weights as bf16 bits: bf16_rn(bf16(d) (q - 8) + bf16(f32(m) + 8 f32(d))) with one rounding of
    the exact value (w4_round_bf16_exact), rounded here in integers: every term is a multiple of 2^-24 (the f16
    quantum, which bf16 and f32 roundings of f16-derived values keep) and small, so the value is N 2^-24 with N an
    int64 below 2^52 (both asserted); N is cut to 8 significant bits, half to even.  d16, m16 are float16 arrays broadcast against the codes q."""
    db = bf16_val(bf16_ref_bits(d16.astype(np.float32)))
    c32 = m16.astype(np.float32) + np.float32(8) * d16.astype(np.float32)  # the f32 centre (rounded to nearest)
    cb = bf16_val(bf16_ref_bits(c32))
    v = db * (np.asarray(q) - 8) + cb  # exact in float64: checked through N below
    N = np.ldexp(v, 24)
    assert (np.abs(N) < 2.0 ** 52).all() and (N == np.round(N)).all(), "fmin_weight_bits: not a multiple of 2^-24"
    N = N.astype(np.int64)
    a = np.abs(N)
    nbits = np.frexp(a.astype(np.float64))[1]  # bit length of |N| (exact below 2^53)
    cut = np.maximum(nbits - 8, 0)
    keep, rem = a >> cut, a & ((np.int64(1) << cut) - 1)
    half = np.where(cut > 0, np.int64(1) << np.maximum(cut - 1, 0), 1)  # cut 0: rem is 0, nothing to round
    keep = keep + ((rem > half) | ((rem == half) & ((keep & 1) == 1)))
    r = np.ldexp((keep << cut).astype(np.float64), -24)  # at most 9 significant bits: exact in f32
    bits = (r.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    return bits | np.where(N < 0, 0x8000, 0)  # an exact 0 is +0, as the fma's round to nearest gives it


# fmin groups set apart from the random d > 0, m ~ -8 d (row, group, d, m / d or, with "abs", m itself): the centre
# m + 8 d rounded in f32 (an f16 subnormal d under m = 1000), exactly 0, m far above or below -8 d, m = -0, a large d
FMIN_SPECIALS = [(0, 0, 2.0 ** -20, (1000.0, "abs")), (1, -1, 0.75, -8.0), (2, 0, 0.01, 3.0), (3, 1, 0.002, -40.0),
                 (4, 0, 0.03, (-0.0, "abs")), (5, -1, 300.0, (-2000.0, "abs")), (6, 1, 2.0 ** -14, -7.0)]


class W4Fmt:
    """W4Bf16<MODE>, MODE 0 (sym), 1 (asym) or 2 (fmin; `asym` is the mode: False / 0, True / 1 or 2).  pack_version
    2: row j's elements 8w..8w+7 in its little-endian word w, element 8w + i at nibble (i >> 1) + 4 (i & 1); scales
    f16 [n, k/g], zeros u8 [n, k/g] (asym; sym means z = 8), fmin: scales d and mins m f16 [n, k/g] (w = d q + m)."""

    def __init__(self, rng, n, k, g, asym):
        self.mode = int(asym)  # W4Bf16<0> sym, W4Bf16<1> asym, W4Bf16<2> fmin
        self.n, self.k, self.g, self.asym = n, k, g, self.mode == 1
        self.gsh = 5 if g == 32 else 6 if g == 64 else 7  # the kernel's {q, s, z, gs == 32 ? 5 : gs == 64 ? 6 : 7}
        ng = k // g
        q = rng.integers(0, 16, (n, k))
        if self.mode == 2:
            self._fmin(rng, n, k, g, q)
            return
        s = (rng.normal(size=(n, ng)) * np.exp2(rng.integers(-8, 2, (n, ng)))).astype(np.float16)
        s[0, 0], s[1 % n, ng - 1] = np.float16(2.0 ** -20), np.float16(-0.0)  # an f16 subnormal, a -0 scale
        z = rng.integers(0, 16, (n, ng)) if asym else np.full((n, ng), 8)
        self.buf = {"w.qweight": self.pack(q).reshape(-1), "w.scales": s.astype("<f2").view(np.uint8).reshape(-1)}
        if asym:
            self.buf["w.zeros"] = z.astype(np.uint8).reshape(-1)
        # the defined weights: Wb = bf16_rn(bf16_rn(s) (q - z)); bf16(s) (q - z) is exact in f32
        sb = bf16_val(bf16_ref_bits(s.astype(np.float32)))
        prod = np.repeat(sb, g, axis=1) * (q - np.repeat(z, g, axis=1))
        self.Wbits = bf16_ref_bits(prod.astype(np.float32))
        self.W = bf16_val(self.Wbits)
        self.Wnan = np.zeros(self.W.shape, bool)
        self.name = "w4a16 %s g%d" % ("asym" if asym else "sym", g)

    @staticmethod
    def pack(q):  # codes [n, k] -> pack_version 2 bytes [n, k / 2]
        qb = np.zeros((q.shape[0], q.shape[1] // 2), np.uint8)
        for i in range(8):
            p = (i >> 1) + 4 * (i & 1)  # nibble p of word w: byte 4w + p / 2, high half when p is odd
            qb[:, p // 2::4] |= (q[:, i::8] << (4 * (p & 1))).astype(np.uint8)
        return qb

    def _fmin(self, rng, n, k, g, q):
        """fmin data like GGUF Q4_1: d > 0 (range / 15), m the group's min, about -8 d (-7.5 d for a centred group),
        and FMIN_SPECIALS; the weights bf16_rn(bf16(d) (q - 8) + bf16(f32(m) + 8 f32(d))), never all zero."""
        ng = k // g
        d = (np.abs(rng.normal(size=(n, ng))) + 0.05) * np.exp2(rng.integers(-8, 3, (n, ng)))
        mm = -d * (7.5 + 0.6 * rng.normal(size=(n, ng)))
        for r, gi, dv, mv in FMIN_SPECIALS:
            d[r % n, gi % ng] = dv
            mm[r % n, gi % ng] = mv[0] if isinstance(mv, tuple) else mv * np.float64(np.float16(dv))
        d16, m16 = d.astype(np.float16), mm.astype(np.float16)
        assert (d16 > 0).all() and np.isfinite(m16).all()
        self.buf = {"w.qweight": self.pack(q).reshape(-1), "w.scales": d16.astype("<f2").view(np.uint8).reshape(-1),
                    "w.mins": m16.astype("<f2").view(np.uint8).reshape(-1)}
        self.Wbits = fmin_weight_bits(np.repeat(d16, g, axis=1), np.repeat(m16, g, axis=1), q)
        self.W = bf16_val(self.Wbits)
        self.Wnan = np.zeros(self.W.shape, bool)
        assert (self.W != 0).any()
        self.name = "w4a16 fmin g%d" % g
        c64 = m16.astype(np.float64) + 8 * d16.astype(np.float64)
        c32 = m16.astype(np.float32) + np.float32(8) * d16.astype(np.float32)
        if (c32 != c64).any():
            COV.add("fmin centre rounded in f32")
        if (c32 == 0).any():
            COV.add("fmin centre 0")
        if (np.abs(c64) > 2 * d16).any():
            COV.add("fmin m far from -8 d")

    def meta(self, r, kt, mut):
        """W4Bf16::meta: the aligned scale word (u16 pairs), asym the aligned zero word (u8 quads), fmin the aligned
        min word (u16 pairs)."""
        e = r * (self.k >> self.gsh) + ((kt * 64) >> self.gsh)
        words = [(0, "w.scales", 2 * (e & ~1))]
        if self.mode == 1:
            words.append((1, "w.zeros", e & ~3))
        if self.mode == 2:
            words.append((1, "w.mins", 2 * (e & ~1)))
        return words

    def build(self, c, mut):
        """W4Bf16<MODE>::build for the 128 threads of a consumer warpgroup: a[j][i] as an array (4, 4, 128)."""
        a = np.zeros((4, 4, 128), np.int64)
        ng = c.k >> self.gsh
        sh = (8 if "w4_nibble" in mut else 4) * c.t
        wa, wb = lds(c.ms, c.rl * 4, 1, "wa")[0], lds(c.ms, (c.rl + 8) * 4, 1, "wb")[0]
        za = zb = 0
        if self.mode:
            zo = 0 if "w4_fmword" in mut and self.mode == 2 else 512  # the mutation reads the min from the scale word
            za, zb = lds(c.ms, zo + c.rl * 4, 1, "za")[0], lds(c.ms, zo + (c.rl + 8) * 4, 1, "zb")[0]
        for b in range(2):  # the stage's k 32 b .. 32 b + 31: k16 steps 2b, 2b + 1
            gi = (c.kt * 64 + (0 if "w4_gi" in mut else 32 * b)) >> self.gsh
            e0, e1 = c.rc0 * ng + gi, c.rc1 * ng + gi
            if "w4_shalf" in mut:
                s0, s1 = w4bw_s2(np.where(e0 & 1, wa, wa >> 16), mut), w4bw_s2(np.where(e1 & 1, wb, wb >> 16), mut)
            else:
                s0, s1 = w4bw_s2(np.where(e0 & 1, wa >> 16, wa), mut), w4bw_s2(np.where(e1 & 1, wb >> 16, wb), mut)
            n0 = n1 = 0xC308C308  # -(128 + 8); fmin: bf16x2 of m + 8 d
            if self.mode == 2:
                n0 = w4bw_c2(np.where(e0 & 1, za >> 16, za), np.where(e0 & 1, wa >> 16, wa), mut)
                n1 = w4bw_c2(np.where(e1 & 1, zb >> 16, zb), np.where(e1 & 1, wb >> 16, wb), mut)
            if self.mode == 1:
                zs = 4 if "w4_zshift" in mut else 8
                zm = 7 if "w4_zmask" in mut else 15
                n0 = (0xC300 | ((za >> (zs * (e0 & 3))) & zm)) * 0x10001
                n1 = (0xC300 | ((zb >> (zs * (e1 & 3))) & zm)) * 0x10001
            r0 = lds(c.ws, c.rl * 32 + 16 * (b ^ c.swz), 4, "r0")
            r1 = lds(c.ws, (c.rl + 8) * 32 + 16 * (b ^ c.swz), 4, "r1")
            w8 = [r0[0], r1[0], r0[1], r1[1], r0[2], r1[2], r0[3], r1[3]]  # {r0.x, r1.x, r0.y, ... r1.w}
            for i in range(8):  # a[2b + i / 4][i % 4]: rows rl (i even) and rl + 8
                if self.mode == 2:
                    a[2 * b + (i >> 2)][i & 3] = w4bw_fmin(w8[i], sh, s1 if i & 1 else s0, n1 if i & 1 else n0, mut)
                else:
                    a[2 * b + (i >> 2)][i & 3] = w4bw_deq(w8[i], sh, n1 if i & 1 else n0, s1 if i & 1 else s0, mut)
        return a


# ---- one launch: global memory, the workspace, each block's ring, y --------------------------------------------------
class Work:
    """The kernel's workspace as the engine hands it: qc_ra_workspace_bytes of zeros, made once for a case and reused
    by each of its launches (so the counters must come back to zero, and a slot may hold an earlier launch's sums):
    int counter words 0..255 (arrivals) and 256..511 (stored slots), one each a tail tile, then f32 slots from word 512.
    tag: who last stored each word (launch, tile, split; 0: never) for the check of the reads."""

    def __init__(self, nbytes):
        self.f = np.zeros(nbytes // 4, np.float32)
        self.i = self.f.view(np.int32)  # the same words as ints
        self.tag = np.zeros(nbytes // 4, np.int64)
        self.launches = 0


def slot_tag(serial, tt, j):
    return (serial << 24) | (tt << 4) | j


class Launch(rp.LaunchBase):
    def __init__(self, F, x, m, n, k, env=None, grid=None, mut=frozenset(), split=None, dsm_sp=None, work=None):
        self.F, self.x, self.m, self.n, self.k, self.mut = F, x, m, n, k, mut
        self.plan = qc_ra_plan_of(m, n, k, env, split)
        gx, threads, self.dsm = qc_ra_gemm_dims(m, n, k, env, split)
        if dsm_sp:  # a launch that asks the device for dsm_sp splits whatever the host's plan says
            self.dsm = qc_ra_ring_bytes(self.plan.bm) + 16 * (dsm_sp - 1)
        self.BM, self.ST, self.sp_in = qc_ra_go(self.dsm, m, n, k)
        assert threads == QC_RA_THREADS
        self.STAGE = qc_ra_stage(self.BM)
        self.grid = grid or gx  # a smaller grid stands in for more tiles than QC_RA_SMS (several units a block)
        self.ws = work  # None: the kernel's `work` is NULL
        if work is not None:
            work.launches += 1
            self.serial = work.launches
        self.tiles_m, self.tiles_n, self.kt_n, self.sp, self.dw, self.units = qc_ra_setup(
            m, n, k, self.BM, self.grid, self.sp_in, work is not None, mut)
        self.y = np.full(m * n, np.nan)
        self.ytol = np.full(m * n, TOL)  # per output: the tolerance, times sum |x w| (looser for split tiles)
        self.writes = np.zeros(m * n, np.int64)
        self.errors, self.frags, self.tail_words = [], 0, 0
        self.ready, self.events = [], [[], [], []]  # the grid's actors; TMA boxes, cp.asyncs, slot stores in flight
        self.spinners = []  # (Spin, actor) of the last units waiting for `written`
        self.partials = {}  # (tile, split, consumer) -> its f32 sums as they left its registers
        self.lasts = {}  # split tile -> the split that arrived last
        # each global buffer with 16 bytes of garbage after it (the rest of an aligned word, read but never used)
        self.gmem = {name: np.concatenate([b, np.full(16, 0xFF, np.uint8)]) for name, b in F.buf.items()}

    def units_of(self, bx):  # for (u = blockIdx.x; u < units; u += gridDim.x)
        return range(bx, self.units, self.grid)

    def gread(self, name, off, nbytes):
        """A cp.async source of nbytes at byte offsets off: misaligned, or starting past the tensor, is a Fault; a
        4-byte word running past its end reads garbage there (counted)."""
        size = self.gmem[name].size - 16
        off = np.asarray(off, np.int64)
        if (off % nbytes).any():
            raise Fault("cp.async %d from %s + %d: misaligned" % (nbytes, name, int(off[(off % nbytes) != 0][0])))
        if off.min() < 0 or off.max() >= size or (nbytes == 16 and (off + 16).max() > size):
            raise Fault("cp.async %d from %s + %d: outside its %d bytes" % (nbytes, name, int(off.max()), size))
        self.tail_words += int((off + nbytes > size).sum())
        return self.gmem[name][off[:, None] + np.arange(nbytes)]

    # the workspace: counters (ints, words 0..511) and slots (f32, from word 512), bounds checked
    def ctr(self, w):
        if self.ws is None:
            raise Fault("a split unit touches the workspace, and `work` is NULL")
        if not 0 <= w < WS_SLOTS:
            raise Fault("counter word %d: outside the workspace's %d counter words" % (w, WS_SLOTS))
        return w

    def atomic_add(self, w, v):  # atomicAdd(int *, v): the old value; wakes the last units waiting for this word
        old = int(self.ws.i[self.ctr(w)])
        self.ws.i[w] = old + v
        for sa in list(self.spinners):
            if sa[0].w == w and self.ws.i[w] >= sa[0].want:
                self.spinners.remove(sa)
                self.ready.append(sa[1])
        return old

    def slot_words(self, idx):
        if self.ws is None:
            raise Fault("a split unit touches the workspace, and `work` is NULL")
        if idx.min() < WS_SLOTS or idx.max() >= self.ws.f.size:
            raise Fault("slot word %d: outside the workspace's f32 slots (words %d..%d)" % (
                int(idx.max() if idx.max() >= self.ws.f.size else idx.min()), WS_SLOTS, self.ws.f.size - 1))
        return idx

    def slot_store(self, idx, v, tt, j, fence):
        """A warpgroup's f32 stores of a split's sums (tagged with their writer): in flight until the scheduler lands
        them (the grid's third queue); `fence` counts them for the warpgroup's __threadfence."""
        self.events[2].append(SlotStore(self, self.slot_words(idx), v.copy(), slot_tag(self.serial, tt, j), fence))
        fence.n += 1

    def slot_load(self, idx, tt, j, who):
        """__ldcg of tile tt's split j's sums: each word must have been stored by that unit in this launch."""
        got, want = self.ws.tag[self.slot_words(idx)], slot_tag(self.serial, tt, j)
        if (got != want).any():
            g = int(got.ravel()[np.argmax((got != want).ravel())])
            raise Fault("%s reads slot %d of tile %d (split %d's sums) holding %s" % (
                who, (int(idx.min()) - WS_SLOTS) // (128 * self.BM), tt, j,
                "nothing stored yet" if g == 0 else "an earlier launch's sums" if g >> 24 != self.serial else
                "tile %d split %d's sums" % ((g >> 4) & 0xFFFFF, g & 15)))
        return self.ws.f[idx]


class SlotStore:  # a warpgroup's stores into a slot, visible to the other blocks once landed
    def __init__(self, L, idx, v, tag, fence):
        self.L, self.idx, self.v, self.tag, self.fence = L, idx, v, tag, fence

    def land(self):
        self.L.ws.f[self.idx] = self.v
        self.L.ws.tag[self.idx] = self.tag
        self.fence.landed()


class Fence:
    """A warpgroup's __threadfence() after its slot stores: it waits until they have landed (so that the atomicAdd on
    `written` that follows is a release of them)."""

    def __init__(self, name, ready):
        self.name, self.ready, self.n, self.waiter = name, ready, 0, None

    def arrive(self, actor):
        if self.n == 0:
            return True
        self.waiter = actor
        return False

    def landed(self):
        self.n -= 1
        if self.n == 0 and self.waiter is not None:
            self.ready.append(self.waiter)
            self.waiter = None


class NBar:
    """bar.sync 1, 256 of a block: its two consumer warpgroups (an actor each) meet there."""

    def __init__(self, name, ready):
        self.name, self.ready, self.waiting = name, ready, []

    def arrive(self, actor):  # True: this arrival releases it (the others go back to the ready list)
        if not self.waiting:
            self.waiting.append(actor)
            return False
        self.ready.extend(self.waiting)
        self.waiting = []
        return True


class Spin:
    """Thread wi == 0's ld.acquire loop on `written` until it reaches want, as a wait: the atomicAdd that gets it there
    puts the actor back on the ready list; one that never comes is a deadlock."""

    def __init__(self, L, w, want):
        self.L, self.w, self.want = L, w, want
        self.name = "spin until written[%d] >= %d" % (w - WS_WRITTEN, want)

    def arrive(self, actor):
        if self.L.ws.i[self.w] >= self.want:
            return True
        self.L.spinners.append((self, actor))
        return False


class Block:
    """A block's shared memory (the ring's stages: x rows, W rows, metadata words; stale until written), its
    mbarriers, its named barrier 1 and qc_ra_last; its copies in flight join the grid's queues."""

    def __init__(self, L, rng, bx):
        ST, BM = L.ST, L.BM
        self.base = (DYN0 + 1023) & ~1023  # the swizzle repeats every 1 KiB
        if self.base + ST * L.STAGE > DYN0 + L.dsm:
            raise Fault("the ring runs past the dynamic shared memory")
        self.X = np.full((ST, BM, 64), np.nan)  # x rows of each stage (K-major), NaN: never written
        self.xtag = [[None] * (BM // 64) for _ in range(ST)]  # (tile, kt) of the box last landed there
        self.xver = [0] * ST  # boxes landed in the stage: a wgmma's stage must not change before its wait
        self.W = rng.integers(0, 256, (ST, 128 * 32), dtype=np.uint8)  # W rows: 32 bytes a row
        self.M = rng.integers(0, 256, (ST, 1024), dtype=np.uint8)  # metadata: word i of row r at 4 r + 512 i
        self.wtag = [[None] * 4 for _ in range(ST)]  # (tile, kt) of each producer warp's copies last landed
        self.ready = L.ready
        self.full = [MBar("b%d full[%d]" % (bx, s), 129, self.ready, True) for s in range(ST)]  # expect_tx + 128
        self.empty = [MBar("b%d empty[%d]" % (bx, s), 8, self.ready, True) for s in range(ST)]  # 8 consumer warps
        self.events = L.events  # TMA boxes, each producer warp's cp.asyncs
        self.bar1 = NBar("b%d bar 1" % bx, self.ready)
        self.last = None  # __shared__ int qc_ra_last


class Box:  # a TMA box of x (64 rows x 64 k at element coordinates c0 inner, c1 rows; rows past m read zero)
    def __init__(self, L, B, st, b, c0, c1, bar, tag):
        self.L, self.B, self.st, self.b, self.c0, self.c1, self.bar, self.tag = L, B, st, b, c0, c1, bar, tag

    def land(self):
        L, B = self.L, self.B
        if 64 * (self.b + 1) > L.BM:
            raise Fault("x box %d lands past the stage's %d x rows" % (self.b, L.BM))
        if self.c0 < 0 or self.c0 + 64 > L.k:  # a stage outside [0, k): no unit may have one
            raise Fault("x box at k %d: outside x's %d columns" % (self.c0, L.k))
        rows = self.c1 + np.arange(64)
        v = np.zeros((64, 64))
        v[rows < L.m] = L.x[rows[rows < L.m], self.c0:self.c0 + 64]
        B.X[self.st, 64 * self.b:64 * self.b + 64] = v
        B.xtag[self.st][self.b] = self.tag
        B.xver[self.st] += 1
        self.bar.complete_tx(XBOX)


class CpWarp:  # one producer warp's cp.asyncs of a stage (2 W row halves and the metadata words a thread), then its
    # 32 cp.async.mbarrier.arrive.noinc on the stage's full barrier
    def __init__(self, L, B, st, w, src0, src1, d0, d1, rs, kt, bar, tag):
        self.L, self.B, self.st, self.w, self.bar, self.tag = L, B, st, w, bar, tag
        sl = slice(32 * w, 32 * w + 32)
        self.src0, self.src1, self.d0, self.d1, self.rs, self.kt = src0[sl], src1[sl], d0[sl], d1[sl], rs[sl], kt

    def land(self):
        L, B, st = self.L, self.B, self.st
        for src, dst in ((self.src0, self.d0), (self.src1, self.d1)):
            if (dst % 16).any() or dst.min() < 0 or (dst + 16).max() > 128 * 32:
                raise Fault("cp.async 16 to W rows + %d: outside the stage's W rows or misaligned" % int(dst.max()))
            B.W[st][dst[:, None] + np.arange(16)] = L.gread("w.qweight", src, 16)
        pt = 32 * self.w + np.arange(32)
        for i, name, off in L.F.meta(self.rs, self.kt, L.mut):  # F::meta(fa, ss + pt * 4, rs, kt, k)
            B.M[st][(pt * 4 + 512 * i)[:, None] + np.arange(4)] = L.gread(name, off, 4)
        B.wtag[st][self.w] = self.tag
        for _ in range(32):
            self.bar.arrive()


def producer(L, B, bx):
    """Warpgroup 0 (its 128 threads in lockstep): per tile and stage, thread 0's expect_tx and x boxes, every thread's
    two W row halves and metadata, the cp.async arrivals."""
    m, n, k, BM, ST, mut = L.m, L.n, L.k, L.BM, L.ST, L.mut
    pt = np.arange(128)
    s, ph = 0, 0
    for u in L.units_of(bx):
        t, kb, ke, sj = qc_ra_unit(u, L.dw, L.sp, L.kt_n, mut)
        tm, tn = qcp_tile(t, L.tiles_m, L.tiles_n, mut)
        m0, n0 = tm * BM, tn * 128
        left = (m - m0) // 64 if "nbox" in mut else (m - m0 + 63) // 64
        nbox = left if left < BM // 64 else BM // 64  # boxes not wholly past m
        if nbox < BM // 64:
            COV.add("BM %d: x boxes past m not loaded" % BM)
        row0, h = pt >> 1, pt & 1
        row1 = row0 + 64
        r0 = np.where(n0 + row0 < n, n0 + row0, n - 1)
        r1 = np.where(n0 + row1 < n, n0 + row1, n - 1)
        rs = n0 + pt if "rs_clamp" in mut else np.where(n0 + pt < n, n0 + pt, n - 1)
        if n0 + 128 > n:
            COV.add("W rows past n clamped")
        q0, q1 = r0 * (k // 2) + 16 * h, r1 * (k // 2) + 16 * h
        if "swap_prod" in mut:
            d0, d1 = row0 * 32 + 16 * h, row1 * 32 + 16 * h
        else:
            d0, d1 = row0 * 32 + 16 * (h ^ ((row0 >> 2) & 1)), row1 * 32 + 16 * (h ^ ((row1 >> 2) & 1))
        if tm >= 8:
            COV.add("x row tiles past a group of 8")
        for kt in range(kb, ke):
            yield ('m', B.empty[s], ph if "prod_parity" in mut else ph ^ 1)  # a fresh barrier passes parity 1
            fb = B.full[s]
            nexp = BM // 64 if "expect" in mut else nbox
            fb.arrive_expect_tx(nexp * XBOX)  # pt == 0
            for b in range(nbox):
                B.events[0].append(Box(L, B, s, b, kt * 64, m0 + 64 * b, fb, (t, kt)))
            for w in range(4):
                B.events[1].append(CpWarp(L, B, s, w, q0 + kt * 32, q1 + kt * 32, d0, d1, rs, kt, fb, (t, kt)))
            s += 1
            if s == ST:
                s, ph = 0, ph ^ 1
                COV.add("ring wrap ST %d" % ST)
            yield None


# mma.sync's m16n8k16 A layout (wgmma's A from registers, warp w's rows 16 w ..) and wgmma's D layout, per thread
TH = np.arange(128)
TH_WARP, TH_G, TH_T = TH >> 5, (TH & 31) >> 2, TH & 3
A_ROW, A_COL = 16 * TH_WARP + TH_G, 2 * TH_T  # a0: (row, col, col + 1); a1: row + 8; a2: col + 8; a3: both


def assemble_a(a):
    """A thread's 4 registers of a k16 step -> the 64 x 16 A bits of the warpgroup (low half = the lower k)."""
    A = np.zeros((64, 16), np.int64)
    for i, (dr, dc) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
        A[A_ROW + dr, A_COL + dc] = a[i] & 0xFFFF
        A[A_ROW + dr, A_COL + dc + 1] = (a[i] >> 16) & 0xFFFF
    return A


def d_layout(BM):  # thread th's accumulator i is D[16 w + g (+8 for i % 4 >= 2), 8 (i / 4) + 2 t + i % 2]
    i = np.arange(BM // 2)
    rows = (16 * TH_WARP + TH_G)[:, None] + 8 * ((i >> 1) & 1)[None, :]
    cols = 8 * (i >> 2)[None, :] + 2 * TH_T[:, None] + (i & 1)[None, :]
    return rows, cols


def wgmma(L, B, c, acc, a, desc, scale_d, tt, m0, n0, kt):
    """qc_ra_wgmma<BM>: D (+)= A B with A the fragments, B = x^T read through the descriptor: exact in float64.
    Also checks the fragments bit for bit against the format's weights for the rows and k they multiply."""
    addr = (desc & 0x3FFF) << 4  # start address >> 4 in bits 0-13
    st, off = divmod(addr - B.base, L.STAGE)
    if not 0 <= st < L.ST or off % 32 or off >= 128:
        raise Fault("wgmma descriptor addresses %#x: not a k16 step of a stage's x" % addr)
    jj = off // 32
    for b in range(L.BM // 64):
        if m0 + 64 * b < L.m and B.xtag[st][b] != (tt, kt):
            raise Fault("wgmma reads x box %d of stage %d holding %s, not tile %d stage %d" %
                        (b, st, B.xtag[st][b], tt, kt))
    Abits = assemble_a(a)
    A = bf16_val(Abits)
    rows = np.minimum(n0 + 64 * c + np.arange(64), L.n - 1)
    cols = kt * 64 + 16 * jj + np.arange(16)
    want, wnan = L.F.Wbits[np.ix_(rows, cols)], L.F.Wnan[np.ix_(rows, cols)]
    bad = np.where(wnan, ~np.isnan(A), Abits != want)
    L.frags += 1
    if bad.any():
        r, q = np.argwhere(bad)[0]
        L.err("A of W row %d, k %d (tile %d, consumer %d): bits %#06x, the weight is %#06x%s" % (
            rows[r], cols[q], tt, c, Abits[r, q], want[r, q], " (NaN)" if wnan[r, q] else ""))
    with np.errstate(all="ignore"):
        D = A @ B.X[st][:, 16 * jj:16 * jj + 16].T
        return acc + D if scale_d else D


def f32(v):
    """float64 sums -> the f32 values the kernel holds (round to nearest even; NaN canonical, as the GPU makes it)."""
    with np.errstate(all="ignore"):
        r = np.asarray(v).astype(np.float32)
    return np.where(np.isnan(r), np.float32(np.nan), r)


def f32add(a, b):  # an f32 add (FADD): one rounding to nearest even, NaN canonical
    with np.errstate(all="ignore"):
        r = a + b
    return np.where(np.isnan(r), np.float32(np.nan), r)


def consumer(L, B, bx, c):
    """Consumer warpgroup c (its 128 threads in lockstep, vectorized): per work unit, the stages' builds and wgmmas with
    two register sets taking turns, each stage released by the 4 warps' lane 0; a split unit's arrival, slot store and
    (the last of its tile) sum of the slots; then the epilogue."""
    F, m, n, k, BM, ST, mut, kt_n, sp = L.F, L.m, L.n, L.k, L.BM, L.ST, L.mut, L.kt_n, L.sp
    warp, lane = TH >> 5, TH & 31
    g = lane >> 2
    cs = SimpleNamespace(k=k)
    cs.rl = 64 * c + 16 * warp + g  # tile row of A row g; A row g + 8 is rl + 8
    cs.swz = ((cs.rl >> 3) if "swz" in mut else (cs.rl >> 2)) & 1
    cs.t = lane & 3
    acc = np.full((64, BM), np.nan)  # never initialized: the first wgmma of a unit must overwrite it
    DR, DC = d_layout(BM)
    SLOT = 128 * BM  # 256 consumer threads x BM / 2 sums
    wi = 128 * c + TH  # tid - 128
    sidx = np.arange(BM // 2)[None, :] * 256 + wi[:, None]  # acc[i] of thread wi: word i * 256 + wi of a slot
    s, ph = 0, 0
    ra, rb = np.zeros((4, 4, 128), np.int64), np.zeros((4, 4, 128), np.int64)
    cur_t = SimpleNamespace()

    def build(st, kt, a):
        if B.wtag[st] != [(cur_t.tt, kt)] * 4:
            raise Fault("consumer %d builds tile %d stage %d from ring stage %d holding %s" %
                        (c, cur_t.tt, kt, st, B.wtag[st]))
        cs.ws, cs.ms, cs.kt = B.W[st], B.M[st], kt
        a[...] = F.build(cs, mut)

    pending = []  # wgmma groups in flight, oldest first: (A registers, a copy of them, ring stage, its x version, kt)
    prev = SimpleNamespace(s=0)  # sprev: the ring stage of the group before the newest

    def wg_wait(n_keep):  # qcp_wg_wait<N>: all but the newest N groups retire; their operands must not have changed
        while len(pending) > n_keep:
            cur, held, sa, xv, kt = pending.pop(0)
            if not np.array_equal(cur, held):
                raise Fault("consumer %d: A registers of stage %d rewritten before its wgmmas retired" % (c, kt))
            if B.xver[sa] != xv:
                raise Fault("consumer %d: ring stage %d's x overwritten under its wgmmas (tile %d stage %d)" %
                            (c, sa, cur_t.tt, kt))

    def free(st):  # lane 0 of each of the 4 warps
        for _ in range(4):
            B.empty[st].arrive()

    def step(kt, cur, nxt, kb, ke):
        """stage kt from cur (built), issued behind stage kt - 1's wgmmas; once those are done (wait_group 1) their
        stage is freed and the next stage is built into nxt (kt - 1's registers) while kt's run."""
        nonlocal s, ph, acc
        sa = s
        s += 1
        if s == (ST - 1 if "cons_wrap" in mut else ST):
            s, ph = 0, ph ^ 1
        d = qc_desc(B.base + sa * L.STAGE)
        for j in range(4):
            scale_d = (kt > kb) if "scale_d" in mut else (kt > 0 or j > 0) if "scale_kb" in mut else (kt > kb or j > 0)
            acc = wgmma(L, B, c, acc, cur[j], d + 2 * j, scale_d, cur_t.tt, cur_t.m0, cur_t.n0, kt)
        pending.append((cur, cur.copy(), sa, B.xver[sa], kt))  # qcp_commit: what the group reads until it retires
        yield None  # others may run while the wgmmas are in flight
        if "no_wait1" not in mut:
            wg_wait(1)
        if kt > kb:
            free(prev.s)
        prev.s = sa
        if kt + 1 < (kt_n if "next_kt" in mut else ke):
            yield ('m', B.full[s], ph)
            build(s, kt + 1, nxt)
        yield None

    nunits, kinds, split_tiles = 0, set(), set()
    who = "block %d consumer %d" % (bx, c)
    fence = Fence("b%d consumer %d's __threadfence" % (bx, c), L.ready)
    for u in L.units_of(bx):
        tt, kb, ke, sj = qc_ra_unit(u, L.dw, sp, kt_n, mut)
        tm, tn = qcp_tile(tt, L.tiles_m, L.tiles_n, mut)
        m0, n0 = tm * BM, tn * 128
        cur_t.tt, cur_t.m0, cur_t.n0 = tt, m0, n0
        cs.rc0 = np.where(n0 + cs.rl < n, n0 + cs.rl, n - 1)
        cs.rc1 = n0 + cs.rl + 8 if "rc1" in mut else np.where(n0 + cs.rl + 8 < n, n0 + cs.rl + 8, n - 1)
        prev.s = 0  # int sprev = 0;
        yield ('m', B.full[s], ph)
        build(s, kb, ra)
        kt = kb
        while kt < ke:
            yield from step(kt, ra, rb, kb, ke)
            if kt + 1 >= ke:
                break
            yield from step(kt + 1, rb, rb if "regs" in mut else ra, kb, ke)
            kt += 2
        if "no_wait0" not in mut:
            wg_wait(0)
        free(prev.s)
        if pending:
            raise Fault("consumer %d: the accumulator read with %d wgmma groups in flight (tile %d)" % (
                c, len(pending), tt))
        av = acc[DR, DC]  # (thread, i): thread th's acc[i]
        nunits += 1
        kinds.add(sj >= 0)
        if sj >= 0:  # a split unit: the tile's last to arrive adds the others' sums to its own
            if tt in split_tiles:
                COV.add("two splits of a tile on one block")
            split_tiles.add(tt)
            av = f32(av)  # the f32 sums its registers hold (this model: rounded once, here)
            L.partials[(tt, sj, c)] = av
            tail = u - L.dw if "slot_u" in mut else tt - L.dw
            arrived, written = tail, tail + WS_WRITTEN  # int *arrived = (int *)work + tail, *written = arrived + 256
            slots = WS_SLOTS + tail * (1 if "slot_sp" in mut else sp) * SLOT  # work + 512 + tail * sp * SLOT
            yield ('n', B.bar1)  # an earlier unit's reads of qc_ra_last are done
            if c == 0:  # wi == 0
                B.last = L.atomic_add(L.ctr(arrived), 1) == sp - 1
            yield ('n', B.bar1)
            last = B.last
            keep = last and (sp == 2 or "keep_all" in mut)
            if not keep:
                L.slot_store(slots + sj * SLOT + sidx, av, tt, sj, fence)
                if "no_fence" not in mut:
                    yield ('n', fence)  # __threadfence()
                yield ('n', B.bar1)
                if c == 0:
                    L.atomic_add(L.ctr(written), 1)
            if not last and "store_nonlast" not in mut:
                continue
            if last:
                # the others have arrived, so they are running and store without waiting for anything
                if c == 0 and "no_wait" not in mut:
                    yield ('n', Spin(L, L.ctr(written), sp if "spin_sp" in mut else sp - keep))
                yield ('n', B.bar1)
                # __threadfence(), then __ldcg of the slots
                if keep and sp == 2:
                    o = sj if "keep_own" in mut else 1 - sj
                    av = f32add(av, L.slot_load(slots + o * SLOT + sidx, tt, o, who))
                    COV.add("split sp 2: the last keeps its sums")
                elif keep:  # keep_all of more than two: its own sums, then the others' in split order
                    for j in range(sp):
                        if j != sj:
                            av = f32add(av, L.slot_load(slots + j * SLOT + sidx, tt, j, who))
                else:  # slots 0, 1, .. in split order, its own among them
                    av = L.slot_load(slots + sidx, tt, 0, who)
                    for j in range(1, sp):
                        av = f32add(av, L.slot_load(slots + j * SLOT + sidx, tt, j, who))
                    COV.add("split sp > 2: the slots added in split order")
                if c == 0 and "no_reset" not in mut:
                    L.ws.i[arrived] = 0
                    L.ws.i[written] = 0
                # what y must be, whichever unit was last: the units' f32 sums added in split order (a + b = b + a)
                parts = [L.partials.get((tt, j, c)) for j in range(sp)]
                if any(p is None for p in parts):
                    L.err("tile %d: the last unit summed before split %s finished" % (
                        tt, [j for j in range(sp) if parts[j] is None]))
                else:
                    want = parts[0]
                    for p in parts[1:]:
                        want = f32add(want, p)
                    if not np.array_equal(want.view(np.uint32), av.view(np.uint32)):
                        L.err("tile %d (split %d last): y is not the f32 sum of its %d units' sums in split order" % (
                            tt, sj, sp))
                if c == 0:
                    L.lasts[tt] = sj
            av = av.astype(np.float64)
        # accumulator i: W row rl (+8 for i & 2), x row 8 (i / 4) + 2 t + (i & 1)
        i = np.arange(BM // 2)[None, :]
        if "epi_row" in mut:
            r = m0 + 8 * (i >> 2) + 2 * cs.t[:, None] + ((i >> 1) & 1)
            cn = n0 + cs.rl[:, None] + np.where(i & 1, 8, 0)
        else:
            r = m0 + 8 * (i >> 2) + 2 * cs.t[:, None] + (i & 1)
            cn = n0 + cs.rl[:, None] + np.where(i & 2, 8, 0)
        mask = (r < m) if "epi_mask" in mut else (r < m) & (cn < n)
        L.store((r * n + cn).ravel(), av.ravel(), mask.ravel())
        if sj >= 0:  # f32 sums, rounded when they left the registers and at each add
            L.ytol[(r * n + cn)[mask]] = TOL + (sp + 1) * F32_EPS
        yield None
    if nunits > 1:
        COV.add("several units a block")
    if len(kinds) == 2:
        COV.add("whole and split units on one block")


POLICIES = ("eager", "lazy", "random", "starve")


def simulate(L, policy, seed):
    """The grid's blocks run together (split units of a tile meet through the workspace): each block's producer and
    consumers are actors of one scheduler, its copies land from the grid's queues."""
    actors, blocks = [], []
    for bx in range(L.grid):
        B = Block(L, np.random.default_rng(seed + bx), bx)
        blocks.append(B)
        actors += [Actor("b%d producer" % bx, producer(L, B, bx), "p"),
                   Actor("b%d consumer 0" % bx, consumer(L, B, bx, 0), "c0"),
                   Actor("b%d consumer 1" % bx, consumer(L, B, bx, 1), "c1")]
    L.ready[:] = actors
    steps = L.grid * 400 + 60 * (L.kt_n + 4) * (L.units + L.grid)
    rp.run_actors(actors, L.ready, L.events, policy, seed, steps, held=lambda a: a.role == "c0")
    for B in blocks:
        for bar in B.full + B.empty:
            if not bar.at_rest():
                raise Fault("%s left with %d arrivals / %d bytes pending" % (bar.name, bar.pending, bar.tx))
        if B.bar1.waiting:
            raise Fault("%s left with a warpgroup waiting" % B.bar1.name)
    if L.spinners:
        raise Fault("%d last units left spinning" % len(L.spinners))


def make_x(rng, m, k):
    """Random bf16 values of mixed magnitudes, never zero."""
    v = rng.normal(size=(m, k)) * np.exp2(rng.integers(-3, 4, (m, k)))
    b = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    b[(b & 0x7FFF) == 0] = 0x3F80
    return bf16_val(b)


def run_case(fmt, m, n, k, env=None, grid=None, policies=POLICIES, mut=frozenset(), seed=1, split=None, dsm_sp=None,
             work=True, want_sp=None):
    """One problem: fmt is ("mx", specials) or ("w4", g, mode) (mode False / True: sym / asym, 2: fmin); env the tile
    height variable's value, split QC_RA_SPLIT's, grid a smaller grid than the plan's, dsm_sp the splits the launch asks
    of the device whatever the plan says, work False: `work` NULL; want_sp the splits the device must run (a check of
    the case itself).  One workspace serves each interleaving's launch in turn.  Returns (errors, description)."""
    rng = np.random.default_rng(seed)
    F = MxFmt(rng, n, k, *fmt[1:]) if fmt[0] == "mx" else W4Fmt(rng, n, k, fmt[1], fmt[2])
    x = make_x(rng, m, k)
    with np.errstate(all="ignore"):
        ref = x @ F.W.T
        S = np.abs(x) @ np.where(np.isfinite(F.W), np.abs(F.W), 0.0).T
    ws = Work(qc_ra_workspace_bytes(k)) if work and qc_ra_workspace_bytes(k) else None
    last = []

    def launch():
        last.append(Launch(F, x, m, n, k, env, grid, mut, split, dsm_sp, ws))
        return last[-1]

    def check(L):
        errs = list(L.errors) + rp.write_errors(L.writes, n)
        if want_sp is not None and L.sp != want_sp:
            errs.append("the device runs sp %d, the case wants %d" % (L.sp, want_sp))
        if L.ws is not None and L.ws.i[:WS_SLOTS].any():
            nz = np.flatnonzero(L.ws.i[:WS_SLOTS])
            errs.append("%d counters left nonzero (first %s[%d] = %d)" % (
                nz.size, "arrived" if nz[0] < WS_WRITTEN else "written", nz[0] % WS_WRITTEN, L.ws.i[nz[0]]))
        y = L.y.reshape(m, n)
        bad = np.isnan(y) != np.isnan(ref)
        bad |= np.isinf(ref) & (y != ref)
        with np.errstate(all="ignore"):
            bad |= np.isfinite(ref) & ~(np.abs(y - ref) <= L.ytol.reshape(m, n) * S + (L.ytol.reshape(m, n) > TOL) *
                                        2.0 ** -126)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            errs.append("%d outputs off the reference (first y[%d,%d] = %r, ref %r)" % (
                bad.sum(), i, j, float(y[i, j]), float(ref[i, j])))
        if L.tail_words:
            COV.add("aligned metadata words past the tensor's end")
        return errs

    probe = Launch(F, x, m, n, k, env, grid, mut, split, dsm_sp, None)  # the device's sp, given a workspace
    probe_sp = qc_ra_setup(m, n, k, probe.BM, probe.grid, probe.sp_in, ws is not None, mut)[3]
    errs = rp.replay(policies, seed, launch, simulate, check,
                     " (a split tile's sums must not depend on which unit is last)" if probe_sp > 1 else "")
    L = last[0]
    COV.add("%s BM %d" % (fmt[0], L.BM))
    COV.add("%s k %d" % (fmt[0], k))
    if fmt[0] == "w4":
        COV.add("w4 g%d %s" % (fmt[1], ("sym", "asym", "fmin")[int(fmt[2])]))
        if F.mode == 2:
            COV.update(["fmin BM %d" % L.BM, "fmin k %d" % k])
    else:
        COV.update("mx e=%d" % v for v in (0, 128, 129, 254, 255) if (F.e == v).any())
    varied = 0
    if L.sp > 1:
        COV.add("split BM %d" % L.BM)
        if L.kt_n % L.sp:
            COV.add("split stages uneven")
        if L.dw > 0:
            COV.add("split tiles after whole ones")
        if split is None and dsm_sp is None:
            COV.add("the plan itself splits")
        lasts = {}
        for Lp in last:
            for tt, j in Lp.lasts.items():
                lasts.setdefault(tt, set()).add(j)
        varied = sum(len(v) > 1 for v in lasts.values())
        if varied:
            COV.add("the last to arrive differs across interleavings (sp %s)" % ("2" if L.sp == 2 else "> 2"))
    elif L.sp_in > 1 and L.tiles_m * L.tiles_n % L.grid:  # a tail the device would have split
        COV.add("a split asked, refused by the device (%s)" % ("work NULL" if L.ws is None else "kt < sp"
                                                               if L.kt_n < L.sp_in else "tail x sp > 132"))
    elif split is not None and atoll(split) > 1:
        COV.add("a forced split refused by the plan")
    desc = "%-17s m=%3d n=%3d k=%4d BM %3d grid %3d: %d tiles, sp %d (%d asked), %d units%s%s%s" % (
        F.name, m, n, k, L.BM, L.grid, L.tiles_m * L.tiles_n, L.sp, L.sp_in, L.units, " env %s" % env if env else "",
        " QC_RA_SPLIT=%s" % split if split is not None else "", "" if L.ws is not None else " work NULL")
    if not errs:
        desc += ": %d A fragments exact, y within %s of sum|xw|, NaN/inf exact" % (
            L.frags, "%g" % TOL if L.sp == 1 else "(sp + 1) 2^-24")
        if L.sp > 1:
            desc += "; the last unit differed for %d of %d split tiles" % (varied, len(L.lasts))
        if L.tail_words:
            desc += "; %d scale words ran past the tensor (bytes unused)" % L.tail_words
    return errs, desc


T = rp.Tally(PROG, VERBOSE)
report = T.report


# ---- the emulation's own arithmetic, and the host rules --------------------------------------------------------------
def arith_checks():
    rng = np.random.default_rng(5)
    # bf16_round (the replay's fma) against bf16_ref_bits (the references') on f32 values: normals, ties, subnormals,
    # overflow
    u = np.concatenate([rng.integers(0, 1 << 32, 20000), rng.integers(0, 1 << 16, 2000) << 16 | 0x8000,
                        rng.integers(0, 1 << 23, 2000), [0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x00008000, 0x80018000]])
    u = u.astype(np.uint32)
    f = u.view(np.float32)
    f = f[np.isfinite(f)]
    got, want = bf16_round(f.astype(np.float64)), bf16_ref_bits(f)
    report((got == want).all(), "bf16 round to nearest even: two methods agree on %d f32 values (ties, subnormals, "
           "overflow)%s" % (f.size, "" if (got == want).all() else ": first %r" % f[got != want][0]))
    # fma.rn.bf16x2's -0 addend keeps a product's sign; a subnormal product stays; NaN stays NaN
    r = fma_bf16x2(np.array([0x80000000 | 0x0040, 0x7FC00000 | 0x3F80]), 0x3F003F00, 0x80008000)
    report(list(r) == [0x80000020, 0x7FFF3F00], "fma_bf16x2: -0 and subnormal halves, NaN: %s" % [hex(v) for v in r])
    # MxDec's decode of every code and scale byte = E2M1 * 2^(e-127) (inf past bf16, NaN for 255), one lane at a time
    codes = np.arange(256)  # a byte: two codes
    ok = True
    for e in range(256):
        big = 128 < e < 255
        v = mxw_mul(mxw_pair(codes, 0), mxw_f1(np.int64(e), ()), ())
        if big:
            v = mxw_mul(v, mxw_f2(np.int64(e)), ())
        for half, cd in ((0, codes & 15), (16, codes >> 4)):
            want = np.ldexp(E2M1[cd & 7] * np.where(cd & 8, -1.0, 1.0), e - 127)
            want = np.where(np.abs(want) >= 2.0 ** 128, np.copysign(np.inf, want), want)
            got = bf16_val(v >> half)
            if e == 255:
                ok &= bool(np.isnan(got).all())
            else:
                ok &= bool(((got == want) & (np.signbit(got) == np.signbit(want))).all())
    report(ok, "mxw_pair / mxw_f1 / mxw_f2 / mxw_mul: all 16 codes x 256 scale bytes, signs of zero included")
    # fmin's decode (w4bw_s2, w4bw_c2, w4bw_fmin) of every code against fmin_weight_bits, one (d, m) pair a lane:
    # random d > 0 over f16's range (subnormals included) with m around -8 d, and m anywhere
    d = np.concatenate([np.exp2(rng.uniform(-24, 12, 3000)) * rng.uniform(1, 2, 3000), [2.0 ** -24, 65504.0, 1.0]])
    mm = np.concatenate([-d[:2000] * rng.normal(8, 0.7, 2000), rng.normal(size=1003) * np.exp2(rng.uniform(-24, 15,
                                                                                                        1003))])
    d16, m16 = d.astype(np.float16), np.clip(mm, -65504, 65504).astype(np.float16)
    m16[-3:] = -0.0, -32752.0, -8.0  # d = 2^-24 with m = -0; the largest d with c = 16 d - 32752; d = 1, c = 0
    keep = d16 > 0
    d16, m16 = d16[keep], m16[keep]
    dh, mh = d16.view(np.uint16).astype(np.int64), m16.view(np.uint16).astype(np.int64)
    s2, c2 = w4bw_s2(dh, ()), w4bw_c2(mh, dh, ())
    ok, bad = True, ""
    for qq in range(16):
        w = np.full(d16.size, (qq << 16) | qq)  # codes in nibbles 0 and 4 (sh = 0)
        got = w4bw_fmin(w, 0, s2, c2, ())
        want = fmin_weight_bits(d16, m16, qq)
        for half in (0, 16):
            h = (got >> half) & 0xFFFF
            if (h != want).any():
                i = np.argmax(h != want)
                ok, bad = False, ": q %d d %r m %r: %#06x, want %#06x" % (qq, d16[i], m16[i], h[i], want[i])
    report(ok, "w4bw_s2 / w4bw_c2 / w4bw_fmin: all 16 codes x %d (d, m) f16 pairs against the integer-rounded fmin "
           "weights%s" % (d16.size, bad))


def host_checks():
    # the plans the comments and the session's shapes name: (m, n, k, env_bm, QC_RA_SPLIT) -> (bm, tiles, splits, units)
    picks = [((1024, 6144, 4096, None, None), (256, 192, 2, 252)),   # 132 whole + 60 tail tiles split 2
             ((1024, 6144, 4096, None, "1"), (256, 192, 1, 192)),    # unsplit: the qkv tie goes to the wider tile
             ((1024, 6144, 1024, None, None), (256, 192, 1, 192)),   # kt 16: split 2 costs 8 + 2 + 8 stages
             ((64, 4096, 4096, None, None), (64, 32, 4, 128)),       # m <= 64: BM 64, 32 tiles split 4
             ((17, 4096, 4096, None, None), (64, 32, 4, 128)),
             ((256, 4096, 4096, None, None), (128, 64, 2, 128)),     # o at m = 256: 2 splits of 128 rows
             ((2048, 4096, 4096, None, None), (256, 256, 1, 256)),   # a tail of 124: 248 units would not fit
             ((1024, 14336, 4096, None, None), (256, 448, 2, 500)),
             ((300, 4096, 4096, None, None), (256, 64, 2, 128)),
             ((65, 128, 4096, None, None), (128, 1, 4, 4)), ((129, 128, 4096, None, None), (128, 2, 4, 8)),
             ((64, 2176, 4096, None, None), (64, 17, 4, 68)),
             ((40, 200, 1472, None, None), (64, 2, 2, 4)),           # kt 23: 12 + 2 + 8 < 23, 8 + 2 + 12 is not
             ((100, 100, 1984, None, None), (128, 1, 3, 3)),         # kt 31: 3 ways (11 + 14 < 16 + 10)
             ((100, 200, 832, None, None), (128, 2, 1, 2)),          # kt 13: no split pays
             ((4096, 4096, 4096, "64", None), (64, 2048, 1, 2048)), ((17, 128, 4096, "256", None), (256, 1, 4, 4)),
             ((4096, 4096, 4096, "32", None), (256, 512, 1, 512)),
             ((4096, 4096, 4096, "abc", None), (256, 512, 1, 512)),
             ((64, 4096, 4096, None, "3"), (64, 32, 3, 96)),         # forced: 3
             ((100, 200, 512, None, "2"), (128, 2, 2, 4)),           # forced, where the plan would not split
             ((64, 4096, 4096, None, "8"), (64, 32, 1, 32)),         # forced, refused: 32 x 8 > 132
             ((64, 4096, 128, None, "3"), (64, 32, 1, 32)),          # forced, refused: kt 2 < 3
             ((64, 4096, 4096, None, "9"), (64, 32, 4, 128)),        # outside 1..8: ignored, the plan's own
             ((64, 4096, 4096, None, "-2"), (64, 32, 4, 128)), ((64, 4096, 4096, None, "0"), (64, 32, 4, 128)),
             ((64, 4096, 4096, None, "abc"), (64, 32, 4, 128)),      # atoll 0: the plan's own
             ((64, 4096, 4096, None, "1"), (64, 32, 1, 32))]         # QC_RA_SPLIT=1: no split
    bad = []
    for a, w in picks:
        pl = qc_ra_plan_of(*a)
        if (pl.bm, pl.tiles, pl.splits, pl.units) != w:
            bad.append("m=%d n=%d k=%d env %s split %s -> %s, want %s" % (a + ((pl.bm, pl.tiles, pl.splits, pl.units),
                                                                                w)))
    report(not bad, "qc_ra_plan_of: %s" % (
        bad or "%d plans (BM by stages x (BM + 128), the last wave split while tail x sp <= 132 and kt / sp >= 4 by "
               "ceil(kt / sp) + 2 + 4 sp, ties to the wider tile, QC_RA_SPLIT forcing, refused or ignored)" % len(
                   picks)))
    dims = qc_ra_gemm_dims(1024, 6144, 4096)
    ok = dims == (132, QC_RA_THREADS, qc_ra_ring_bytes(256) + 16) and qc_ra_gemm_dims(64, 4096, 4096) == (
        128, QC_RA_THREADS, qc_ra_ring_bytes(64) + 48) and qc_ra_plan_of(1024, 6144, 4096).bm == 256
    ok &= qc_ra_workspace_bytes(64) == 0 and qc_ra_workspace_bytes(128) == 2048 + 132 * 128 * 256 * 4
    report(ok, "qc_ra_gemm_dims (1024 x 6144 x 4096: grid 132, ring + 16; 64 x 4096 x 4096: grid 128, ring + 48) "
           "and qc_ra_workspace_bytes (0 for k 64, 2048 + 132 slots of 128 x 256 f32 from k 128): %s" % (
               "ok" if ok else dims))
    # the three rings fit sm_90 with the static barriers and 16 bytes a split past the first, are told apart by their
    # sizes (sp included), and the host's bytes are the device's qc_ra_ring; stages are 1 KiB multiples holding x,
    # W rows and 2 words a row
    bad = []
    sizes = {}
    for bm, st in ((64, QC_RA_ST64), (128, QC_RA_ST128), (256, QC_RA_ST256)):
        sizes[bm] = qc_ra_ring_bytes(bm)
        if sizes[bm] != qc_ra_ring(bm, st):
            bad.append("BM %d: host %d bytes, device %d" % (bm, sizes[bm], qc_ra_ring(bm, st)))
        if sizes[bm] + 16 * (QC_RA_SPLIT_MAX - 1) + SMEM_STATIC > SMEM_OPTIN:
            bad.append("BM %d: %d + %d bytes of shared memory" % (bm, sizes[bm] + 16 * (QC_RA_SPLIT_MAX - 1),
                                                                 SMEM_STATIC))
        if qc_ra_stage(bm) % 1024 or qc_ra_stage(bm) < bm * 128 + 128 * 32 + 2 * 512 or st > QC_RA_ST64:
            bad.append("BM %d: stage of %d bytes, %d stages" % (bm, qc_ra_stage(bm), st))
        for sp in range(1, QC_RA_SPLIT_MAX + 1):
            if qc_ra_go(sizes[bm] + 16 * (sp - 1), 100, 100, 64) != (bm, st, sp):
                bad.append("BM %d sp %d: the kernel runs %s" % (bm, sp, qc_ra_go(sizes[bm] + 16 * (sp - 1), 100, 100,
                                                                                  64)))
        for off in (16 * QC_RA_SPLIT_MAX, 8, -16):  # past the span, misaligned, below the ring: nothing runs
            if qc_ra_go(sizes[bm] + off, 100, 100, 64) is not None:
                bad.append("BM %d: dsm ring %+d runs %s" % (bm, off, qc_ra_go(sizes[bm] + off, 100, 100, 64)))
    if len(set(sizes.values())) != 3 or min(abs(a - b) for a in sizes.values() for b in sizes.values() if a != b) < \
            16 * QC_RA_SPLIT_MAX:
        bad.append("ring sizes not distinct: %s" % sizes)
    report(not bad, "rings: %s" % (bad or "%s bytes, + 16 (sp - 1) for sp 1..%d, distinct, within sm_90's %d with the "
                                          "barriers; the kernel picks the host's BM and sp" % (
                                              sorted(sizes.values()), QC_RA_SPLIT_MAX, SMEM_OPTIN)))
    # the launch: grid min(units, 132), 384 threads; the kernel runs the host's plan (BM, sp, units) with a workspace,
    # each tile whole without one, and its counters and slots fit the workspace; it returns for bad shapes
    bad, nsplit = [], 0
    for m in (1, 17, 64, 65, 100, 129, 256, 300, 1000, 1024, 2048, 4096, 8192):
        for n in (1, 8, 75, 128, 129, 1000, 4096, 6144, 14336, 28672):
            for k in (64, 128, 832, 4096):
                for split in (None, "2", "8"):
                    gx, th, sm = qc_ra_gemm_dims(m, n, k, None, split)
                    pl = qc_ra_plan_of(m, n, k, None, split)
                    go = qc_ra_go(sm, m, n, k)
                    if gx != min(pl.units, QC_RA_SMS) or th != QC_RA_THREADS or go is None or go[0] != pl.bm or \
                            go[2] != pl.splits:
                        bad.append("m=%d n=%d k=%d split %s: grid %d, the kernel runs %s" % (m, n, k, split, gx, go))
                        continue
                    for work in (True, False):
                        tm, tn, kt_n, sp, dw, units = qc_ra_setup(m, n, k, go[0], gx, go[2], work and
                                                                  qc_ra_workspace_bytes(k) > 0)
                        want = (pl.splits, pl.units) if work and qc_ra_workspace_bytes(k) else (1, pl.tiles)
                        tail = tm * tn - dw
                        if (sp, units) != want or tm * tn != pl.tiles or (sp > 1 and (
                                tail >= WS_WRITTEN or 4 * (WS_SLOTS + tail * sp * 128 * go[0]) >
                                qc_ra_workspace_bytes(k))):
                            bad.append("m=%d n=%d k=%d split %s work %d: the kernel runs sp %d, %d units" % (
                                m, n, k, split, work, sp, units))
                        nsplit += sp > 1
    if qc_ra_gemm_dims(0, 8, 128) != (0, 0, 0) or qc_ra_go(qc_ra_ring_bytes(64), 8, 8, 96) is not None:
        bad.append("empty or k % 64 problems")
    report(not bad, "qc_ra_gemm_dims / qc_ra_go / QC_RA_SETUP over m x n x k x QC_RA_SPLIT: %s" % (
        bad[:3] or "the kernel runs the host's BM, sp and units (%d of them split), every tile whole without a "
                   "workspace; counters and slots inside it" % nsplit))
    # QC_RA_SETUP and qc_ra_unit over tiles, grids, asked splits and stage counts: every stage of every tile in exactly
    # one unit, no unit empty, a split tile's units consecutive stages in split order, tail x sp <= 132 slots
    bad, seen = [], 0
    for tiles in list(range(1, 34)) + [131, 132, 133, 192, 263, 264, 265, 400]:
        for grid in (1, 2, 3, 5, 16, 17, 66, 131, 132):
            for sp_in in range(1, QC_RA_SPLIT_MAX + 1):
                for kt_n in (1, 2, 3, 7, 8, 13, 64):
                    _, _, _, sp, dw, units = qc_ra_setup(tiles * 64, 128, kt_n * 64, 64, grid, sp_in, True)
                    want_sp = sp_in if (tiles - tiles // grid * grid) * sp_in <= QC_RA_SMS and kt_n >= sp_in else 1
                    if sp != want_sp or (sp > 1 and ((tiles - dw) * sp > QC_RA_SMS or dw % grid)):
                        bad.append("tiles %d grid %d sp %d kt %d: sp %d dw %d" % (tiles, grid, sp_in, kt_n, sp, dw))
                        continue
                    if sp == 1 and dw != tiles:
                        bad.append("tiles %d: unsplit, %d whole" % (tiles, dw))
                    seen += sp > 1
                    nxt = {}  # tile -> (next split, next stage)
                    for u in range(dw, units):
                        t, kb, ke, j = qc_ra_unit(u, dw, sp, kt_n)
                        if nxt.get(t, (0, 0)) != (j, kb) or ke <= kb or not dw <= t < tiles:
                            bad.append("tiles %d grid %d sp %d kt %d: unit %d is tile %d split %d [%d, %d)" % (
                                tiles, grid, sp, kt_n, u, t, j, kb, ke))
                            break
                        nxt[t] = (j + 1, ke)
                    if any(v != (sp, kt_n) for v in nxt.values()) or len(nxt) != tiles - dw or (
                            dw and qc_ra_unit(dw - 1, dw, sp, kt_n) != (dw - 1, 0, kt_n, -1)):
                        bad.append("tiles %d grid %d sp %d kt %d: the split tiles' stages %s" % (
                            tiles, grid, sp, kt_n, sorted(nxt.items())[:2]))
    report(not bad, "QC_RA_SETUP / qc_ra_unit: %s" % (bad[:3] or "%d split launches: each tile's stages once, in "
                                                                "units of at least one stage, split order" % seen))
    # qcp_tile covers each tile once
    gaps = []
    for tiles_m in range(1, 21):
        for tiles_n in range(1, 13):
            got = sorted(qcp_tile(t, tiles_m, tiles_n) for t in range(tiles_m * tiles_n))
            if got != [(a, b) for a in range(tiles_m) for b in range(tiles_n)]:
                gaps.append("%d x %d" % (tiles_m, tiles_n))
    report(not gaps, "qcp_tile covers each tile once: %s" % (gaps[:3] or "1..20 x 1..12 tiles"))
    # the descriptors of a stage's k16 steps (+2 each) never carry out of the address field
    bad = []
    base = (DYN0 + 1023) & ~1023
    for bm, st in ((64, QC_RA_ST64), (128, QC_RA_ST128), (256, QC_RA_ST256)):
        for s in range(st):
            d = qc_desc(base + s * qc_ra_stage(bm))
            if ((d & 0x3FFF) + 6) >> 14 or (((d + 6) & 0x3FFF) << 4) != base + s * qc_ra_stage(bm) + 96:
                bad.append("BM %d stage %d" % (bm, s))
    report(not bad, "descriptors: + 2 per k16 step stays in the address field: %s" % (bad[:2] or "every stage"))


def anchors():
    """The source lines this replay transcribes, verbatim (as they appear in the C string literals)."""
    want = {
        "plugins/common/qc_tma_pipe_src.h": [
            "const long long per_group = 8ll * tiles_n;",
            "const long long gsz = tiles_m - first_m < 8 ? tiles_m - first_m : 8;",
        ],
        "plugins/common/qc_ra_gemm_src.h": [
            "const int left = (int)((m - m0 + 63) / 64), nbox = left < BM / 64 ? left : BM / 64;",
            "const int row0 = pt >> 1, row1 = row0 + 64, h = pt & 1;",
            "const ll rs = n0 + pt < n ? n0 + pt : n - 1;",
            "const u8 *q0 = fa.q + r0 * (k / 2) + 16 * h, *q1 = fa.q + r1 * (k / 2) + 16 * h;",
            "const u32 d0 = row0 * 32 + 16 * (h ^ ((row0 >> 2) & 1)), d1 = row1 * 32 + 16 * (h ^ ((row1 >> 2) & 1));",
            "qcp_wait(empty + 8 * s, ph ^ 1u);", "qcp_expect_tx(fb, nbox * 8192u);",
            "qcp_tma2d(sx + b * 8192, tmx, kt * 64, m0 + 64 * b, fb);", "F::meta(fa, ss + pt * 4, rs, kt, k);",
            "qcp_mbar_init(full + 8 * s, 129);", "qcp_mbar_init(empty + 8 * s, 8);",
            "cs.rl = 64 * c + 16 * warp + g;", "cs.swz = (cs.rl >> 2) & 1;", "cs.t = (u32)(lane & 3);",
            "cs.rc1 = n0 + cs.rl + 8 < n ? n0 + cs.rl + 8 : n - 1;",
            "for (int j = 0; j < 4; j++) qc_ra_wgmma<BM>(acc, cur[j], d + 2 * j, kt > kb || j > 0);",
            "step(kt, ra, rb);", "step(kt + 1, rb, ra);", "qcp_commit();", "qcp_wg_wait<1>();",
            "if (kt > kb && lane == 0) qcp_arrive(empty + 8 * sprev);", "sprev = sa;", "int sprev = 0;",
            "qcp_wg_wait<0>();", "if (lane == 0) qcp_arrive(empty + 8 * sprev);",
            "const ll r = m0 + 8 * (i >> 2) + 2 * cs.t + (i & 1), cn = n0 + cs.rl + ((i & 2) ? 8 : 0);",
            "if (r < m && cn < n) y[r * n + cn] = acc[i];",
            "#define QC_RA_FIXED 128", "#define QC_RA_ST64 16", "#define QC_RA_ST128 10", "#define QC_RA_ST256 6",
            # the work units: QC_RA_SETUP's split, qc_ra_unit, the walks over units and stages
            "const ll dfull = tiles / gridDim.x * gridDim.x; /* the tiles of full waves */",
            "const int sp = sp_in > 1 && work && (tiles - dfull) * sp_in <= QC_RA_SMS && kt_n >= sp_in ? sp_in : 1;",
            "const ll dw = sp > 1 ? dfull : tiles, units = dw + (tiles - dw) * sp;",
            "*t = u, *kb = 0, *ke = kt_n, *j = -1;", "*t = d + v / sp, *j = (int)(v % sp);",
            "*kb = (int)((ll)kt_n * *j / sp), *ke = (int)((ll)kt_n * (*j + 1) / sp);",
            "for (ll u = blockIdx.x; u < units; u += gridDim.x) {", "qc_ra_unit(u, dw, sp, kt_n, &t, &kb, &ke, &sj);",
            "qc_ra_unit(u, dw, sp, kt_n, &tt, &kb, &ke, &sj);", "for (int kt = kb; kt < ke; kt++) {",
            "if (kt + 1 < ke) {", "build(s, kb, ra);", "for (int kt = kb; kt < ke; kt += 2) {",
            "if (kt + 1 >= ke) break;",
            # the split unit's epilogue
            "if (sj >= 0) {", "constexpr int SLOT = 128 * BM;", "const int wi = tid - 128;", "const ll tail = tt - dw;",
            "int *arrived = (int *)work + tail, *written = arrived + 256;",
            "float *slots = work + 512 + tail * sp * (ll)SLOT;",
            "qcp_bar_n(1, 256); /* an earlier unit's reads of qc_ra_last are done */",
            "if (wi == 0) qc_ra_last = atomicAdd(arrived, 1) == sp - 1;",
            "const int last = qc_ra_last, keep = last && sp == 2;", "if (!keep) {",
            "for (int i = 0; i < BM / 2; i++) slots[sj * (ll)SLOT + i * 256 + wi] = acc[i];",
            "if (wi == 0) atomicAdd(written, 1);", "if (!last) continue;", "if (w >= sp - keep) break;",
            "const float *other = slots + (1 - sj) * (ll)SLOT;",
            "for (int i = 0; i < BM / 2; i++) acc[i] += __ldcg(other + i * 256 + wi);",
            "for (int i = 0; i < BM / 2; i++) acc[i] = __ldcg(slots + i * 256 + wi);", "for (int j = 1; j < sp; j++)",
            "for (int i = 0; i < BM / 2; i++) acc[i] += __ldcg(slots + j * (ll)SLOT + i * 256 + wi);",
            "if (wi == 0) *arrived = 0, *written = 0;",
            # qc_ra_go: BM and sp from the dynamic smem size
            "span = 16u * QC_RA_SPLIT_MAX;",
            "if (dsm >= r256 && dsm - r256 < span && (dsm - r256) % 16 == 0)",
            "else if (dsm >= r128 && dsm - r128 < span && (dsm - r128) % 16 == 0)",
            "else if (dsm >= r64 && dsm - r64 < span && (dsm - r64) % 16 == 0)",
            "F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r256) / 16, smem, bars);",
            "F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r128) / 16, smem, bars);",
            "F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r64) / 16, smem, bars);",
            # the host plan
            "#define QC_RA_SPLIT_MAX 8", "#define QC_RA_SPLIT_FIX 2", "#define QC_RA_SPLIT_MIN 4",
            "int64_t forced = env_sp ? atoll(env_sp) : 0;",
            "if (forced < 1 || forced > QC_RA_SPLIT_MAX) forced = 0;",
            "if (tail * sp > QC_RA_SMS || kt < sp || (!forced && kt / sp < QC_RA_SPLIT_MIN)) break;",
            "int64_t c = (kt + sp - 1) / sp + QC_RA_SPLIT_FIX + QC_RA_SPLIT_PER * sp;", "#define QC_RA_SPLIT_PER 4",
            "if (forced ? sp == forced : c < cost) best = sp, cost = c;", "*stages = best == 1 ? kt : cost;",
            'const char *e = env_bm ? getenv(env_bm) : NULL, *esp = getenv("QC_RA_SPLIT");',
            'int64_t forced = e && (!strcmp(e, "64") || !strcmp(e, "128") || !strcmp(e, "256")) ? atoi(e) : 0;',
            "int64_t lo = forced ? forced : m <= 64 ? 64 : 128, hi = forced ? forced : m <= 64 ? 64 : 256, best = -1;",
            "c.tiles = (m + bm - 1) / bm * tn;", "c.splits = qc_ra_tail_split(c.tiles % QC_RA_SMS, kt, esp, &last);",
            "c.units = c.tiles - c.tiles % QC_RA_SMS + c.tiles % QC_RA_SMS * c.splits;",
            "int64_t cost = (bm + QC_RA_FIXED) * (c.tiles / QC_RA_SMS * kt + last);",
            "if (best < 0 || cost <= best) best = cost, pl = c;",
            "d->grid[0] = (uint32_t)(pl.units < QC_RA_SMS ? pl.units : QC_RA_SMS);",
            "d->shared_bytes = (uint32_t)(qc_ra_ring_bytes(pl.bm) + 16 * (pl.splits - 1));",
            "return p->k >= 128 ? 2048u + (uint64_t)QC_RA_SMS * 128 * 256 * 4 : 0;"],
        "plugins/mxfp4/mxfp4_wgmma.c": [
            "return e <= 128u ? ((e + 126u) << 7) * 0x10001u : e < 255u ? 0x7e807e80u : 0x7fc07fc0u;",
            "return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3f803f80u;",
            "return ((y & 0xFu) * 4160u + (y & 0xF0u) * 0x01040000u) & 0x81C081C0u;",
            "qcp_cp4(dst, fa.sc + ((r * (k / 32) + 2 * kt) & ~3ll));", "const u32 sh = 8u * c.t;",
            "s0 = 8u * (u32)((c.rc0 * nb + 2 * c.kt) & 3), s1 = 8u * (u32)((c.rc1 * nb + 2 * c.kt) & 3);",
            "a[2 * b + 1][3] = mxw_mul(mxw_pair(r1.w, sh), f1);", "a[j][3] = mxw_mul(a[j][3], g1);",
            "const uint4 r1 = *(const uint4 *)(c.ws + (c.rl + 8) * 32 + 16 * (b ^ c.swz));",
            "const u8 *sc, float *y, ll m, ll n, ll k, float *work, const __grid_constant__ QcTmap tmx) {",
            "qc_ra_go<MxDec>(&tmx, fa, y, m, n, k, work);", ".workspace_bytes = qc_ra_workspace_bytes,"],
        "plugins/w4a16/w4a16_wgmma_bf16.c": [
            "const ll e = r * (k >> fa.gsh) + ((kt * 64) >> fa.gsh);", "qcp_cp4(dst, fa.sc + (e & ~1ll));",
            "if (MODE == 1) qcp_cp4(dst + 512, (const u8 *)fa.zm + (e & ~3ll));", "const u32 sh = 4u * c.t;",
            "if (MODE) za = *(const u32 *)(c.ms + 512 + c.rl * 4), zb = *(const u32 *)(c.ms + 512 + (c.rl + 8) * 4);",
            "const ll gi = (c.kt * 64 + 32 * b) >> fa.gsh, e0 = c.rc0 * ng + gi, e1 = c.rc1 * ng + gi;",
            "const u32 s0 = w4bw_s2((e0 & 1) ? wa >> 16 : wa), s1 = w4bw_s2((e1 & 1) ? wb >> 16 : wb);",
            "n0 = (0xC300u | ((za >> (8 * (int)(e0 & 3))) & 15u)) * 0x10001u;",
            "const u32 w8[8] = {r0.x, r1.x, r0.y, r1.y, r0.z, r1.z, r0.w, r1.w};",
            "a[2 * b + (i >> 2)][i & 3] = MODE == 2 ? w4bw_fmin(w8[i], sh, (i & 1) ? s1 : s0, (i & 1) ? n1 : n0)",
            ": w4bw_deq(w8[i], sh, (i & 1) ? n1 : n0, (i & 1) ? s1 : s0);",
            "u32 n0 = 0xC308C308u, n1 = 0xC308C308u;",
            "__device__ __forceinline__ u32 w4bw_deq(u32 w, u32 sh, u32 negz, u32 s2) {",
            r'\"r\"(w >> sh), \"r\"(0x000F000Fu), \"r\"(0x43004300u)', "lop3.b32 %0, %1, %2, %3, 0xEA;",
            r'\"r\"(v), \"r\"(0x3F803F80u), \"r\"(negz)', r'\"r\"(d), \"r\"(s2), \"r\"(0x80008000u)',
            r'asm(\"cvt.rn.bf16x2.f32 %0, %1, %1;\"',
            "gs == 32 ? 5 : gs == 64 ? 6 : 7",
            # fmin (W4Bf16<2>): the min word, the centre, the decode, the kernel's arguments
            "if (MODE == 2) qcp_cp4(dst + 512, (const u16 *)fa.zm + (e & ~1ll));",
            "struct Args { const u8 *q; const u16 *sc; const void *zm; int gsh; };",
            "n0 = w4bw_c2((e0 & 1) ? za >> 16 : za, (e0 & 1) ? wa >> 16 : wa);",
            "n1 = w4bw_c2((e1 & 1) ? zb >> 16 : zb, (e1 & 1) ? wb >> 16 : wb);",
            "__device__ __forceinline__ u32 w4bw_c2(u32 mh, u32 dh) {",
            r'asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(fm) : \"h\"((u16)mh));',
            r'asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(fd) : \"h\"((u16)dh));',
            "const float c = __fadd_rn(fm, 8.f * fd);",
            r'asm(\"cvt.rn.bf16x2.f32 %0, %1, %1;\" : \"=r\"(d) : \"f\"(c));',
            "__device__ __forceinline__ u32 w4bw_fmin(u32 w, u32 sh, u32 d2, u32 c2) {",
            r'\"=r\"(qb) : \"r\"(v), \"r\"(0x3F803F80u), \"r\"(0xC308C308u));',
            r'asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(qb), \"r\"(d2), \"r\"(c2));',
            "const u16 *s, const u16 *mn, float *y, ll m, ll n, ll k, ll gs, float *work,",
            "const W4Bf16<2>::Args fa = {q, s, mn, gs == 32 ? 5 : gs == 64 ? 6 : 7};",
            "qc_ra_go<W4Bf16<2>>(&tmx, fa, y, m, n, k, work);", "qc_ra_go<W4Bf16<0>>(&tmx, fa, y, m, n, k, work);",
            "qc_ra_go<W4Bf16<1>>(&tmx, fa, y, m, n, k, work);",
            '#define W4BW_TAIL W4_GP_TAIL, {"work", QC_PARAM_PTR}',
            "w4bw_dims, NULL, qc_ra_workspace_bytes);",
            '{W4BW_HEAD, {"w.mins", QC_PARAM_PTR}, W4BW_TAIL}'],
    }
    missing = []
    for path, lines in want.items():
        with open(os.path.join(ROOT, path)) as f:
            src = f.read()
        missing += ["%s: %s" % (path.split("/")[-1], s) for s in lines if s not in src]
    report(not missing, "anchors: %s" % (missing[:3] or "%d transcribed lines found verbatim in the sources"
                                          % sum(len(v) for v in want.values())))


def group(name, cases):
    t0, ok0 = time.time(), T.passed
    for c in cases:
        errs, desc = run_case(*c[:4], seed=len(name) * 100 + T.passed + T.failed, **(c[4] if len(c) > 4 else {}))
        report(not errs, "%s%s" % (desc, ": " + "; ".join(errs[:3]) if errs else ""))
    print("%s: %-30s %2d of %2d cases pass x %d interleavings (%.1f s)" % (
        PROG, name, T.passed - ok0, len(cases), len(POLICIES), time.time() - t0))


arith_checks()
host_checks()
anchors()
print("%s: arithmetic, host rules, anchors: %d checks, %d failed" % (PROG, T.passed + T.failed, T.failed))

MX_SPECIALS = [(1, 0, 0), (2, 1, 128), (3, 0, 129), (4, 1, 254), (9, 0, 255), (10, 1, 0)]
# scale bytes up to 128 but for rows 8..15 of some warps' 16 (rows rl + 8 only): the vote must count them
MX_LOW = (MX_SPECIALS + [(8 + 16 * w + w % 8, w, 129 + 5 * w) for w in range(12)], (100, 128))
group("mxfp4.wgmma", [
    (("mx", MX_SPECIALS), 17, 75, 64),                       # BM 64, one stage, m tail, odd n < 128 (rows clamped)
    (("mx", MX_SPECIALS), 100, 131, 320),                    # BM 128, 5 stages, a 3-row W tile, box 1 partly past m
    (("mx", MX_SPECIALS), 300, 77, 192, dict(env="256")),    # BM 256, 2 x tiles: the second loads 1 box of 4
    (("mx", MX_SPECIALS), 200, 260, 320, dict(env="64", grid=2)),   # 12 tiles on 2 blocks: ring wraps (ST 16)
    (("mx", MX_SPECIALS), 129, 200, 320, dict(env="256", grid=1)),  # 2 tiles on 1 block, 10 stages on ST 6
    (("mx", MX_SPECIALS), 70, 128, 128),                     # BM 128, n exactly one tile
    (("mx", MX_SPECIALS), 600, 130, 64, dict(env="64", grid=3)),    # 10 x tiles: a group of 8 and one of 2
    (("mx",) + MX_LOW, 90, 200, 128),                        # the big vote carried by rows rl + 8 alone
])
group("w4a16.wgmma_bf16", [
    (("w4", 32, True), 17, 72, 64, dict(env="64")),          # BM 64, one stage, groups of 32 (two a stage)
    (("w4", 64, False), 100, 200, 320),                      # BM 128, 5 stages, n tail
    (("w4", 128, True), 300, 136, 384, dict(env="256", grid=1)),    # BM 256, 4 tiles on a block, 24 stages on ST 6
    (("w4", 32, False), 130, 8, 192, dict(env="128")),       # 2 x tiles: the second holds 2 rows, its box 1 skipped
    (("w4", 128, True), 65, 264, 128, dict(env="64", grid=2)),      # 6 tiles on 2 blocks
    (("w4", 64, True), 257, 128, 320, dict(env="256")),      # the second x tile holds 1 row
    (("w4", 32, True), 70, 200, 320, dict(env="128")),       # asym groups of 32, 5 stages
])
group("w4a16.wgmma_bf16_fmin", [
    (("w4", 32, 2), 17, 72, 64, dict(env="64")),             # BM 64, one stage, groups of 32 (two a stage), m tail
    (("w4", 64, 2), 100, 200, 192),                          # BM 128, 3 stages, n tail
    (("w4", 64, 2), 300, 136, 320, dict(env="256", grid=1)), # BM 256, 4 tiles on a block, 20 stages on ST 6
    (("w4", 32, 2), 130, 8, 320, dict(env="128")),           # 2 x tiles: the second holds 2 rows, its box 1 skipped
    (("w4", 128, 2), 65, 264, 128, dict(env="64", grid=2)),  # groups of 128, 6 tiles on 2 blocks
    (("w4", 128, 2), 257, 128, 384, dict(env="256")),        # the second x tile holds 1 row, 6 stages
])
# The last wave split over K: natural plans, forced ways (QC_RA_SPLIT) with uneven stage counts, splits after whole
# tiles, several splits of a tile on one block, refusals by the plan and by the device, `work` NULL
group("last wave split over K", [
    (("w4", 64, False), 40, 200, 1472, dict(want_sp=2)),       # the plan's: BM 64 (m <= 64), 2 tiles x 2 (11 + 12)
    (("mx", MX_SPECIALS), 100, 100, 1984, dict(want_sp=3)),   # the plan's: BM 128, 1 tile x 3 (10, 10, 11 stages)
    (("w4", 32, True), 300, 200, 320, dict(env="128", split="2", grid=4, want_sp=2)),  # 4 whole, then 2 x 2 (2 + 3)
    (("w4", 64, 2), 40, 100, 448, dict(split="3", grid=2, want_sp=3)),  # fmin, 2 + 2 + 3 on 2 blocks
    (("mx", MX_SPECIALS), 300, 100, 704, dict(env="256", split="8", grid=5, want_sp=8)),  # 8 of 1..2 stages, BM 256
    (("w4", 64, True), 40, 300, 640, dict(split="2", grid=2, want_sp=2)),  # a whole tile, then a split (5 + 5)
    (("w4", 128, False), 100, 72, 128, dict(split="3", want_sp=1)),     # forced, refused by the plan: kt 2 < 3
    (("mx", MX_SPECIALS), 100, 72, 128, dict(dsm_sp=3, grid=3, want_sp=1)),  # asked of the device: kt 2 < 3
    (("w4", 32, False), 100, 200, 448, dict(dsm_sp=4, grid=8, work=False, want_sp=1)),  # asked, work NULL
])
want = ["%s BM %d" % (f, b) for f in ("mx", "w4") for b in (64, 128, 256)] + \
    ["%s k %d" % (f, kk) for f in ("mx", "w4") for kk in (64, 128, 320)] + \
    ["w4 g%d %s" % (gg, a) for gg in (32, 64, 128) for a in ("sym", "asym", "fmin") if (gg, a) != (128, "sym")] + \
    ["fmin BM %d" % b for b in (64, 128, 256)] + ["fmin k %d" % kk for kk in (64, 192, 320)] + \
    ["fmin centre rounded in f32", "fmin centre 0", "fmin m far from -8 d"] + \
    ["mx e=%d" % v for v in (0, 128, 129, 254, 255)] + \
    ["BM %d: x boxes past m not loaded" % b for b in (128, 256)] + \
    ["W rows past n clamped", "ring wrap ST 6", "ring wrap ST 16", "several units a block",
     "x row tiles past a group of 8", "mxfp4 big vote, mixed lanes", "mxfp4 big vote from rows rl + 8 only"] + \
    ["split BM %d" % b for b in (64, 128, 256)] + \
    ["the plan itself splits", "split stages uneven", "split tiles after whole ones",
     "whole and split units on one block", "two splits of a tile on one block", "split sp 2: the last keeps its sums",
     "split sp > 2: the slots added in split order", "the last to arrive differs across interleavings (sp 2)",
     "the last to arrive differs across interleavings (sp > 2)", "a forced split refused by the plan",
     "a split asked, refused by the device (kt < sp)", "a split asked, refused by the device (work NULL)"]
missing = [w for w in want if w not in COV]
report(not missing, "coverage: %s" % ("missing " + ", ".join(missing) if missing else "%d paths taken" % len(want)))
print("%s: coverage: %s" % (PROG, "MISSING " + ", ".join(missing) if missing else
                            "every listed path taken (%d: each BM and k per format, groups per w4a16 mode, fmin's "
                            "BM / k / centres, scale bytes 0/128/129/254/255, boxes past m, clamped rows, ring wraps, "
                            "several units a block, the big vote; the split: each BM, the plan's own, uneven stages, "
                            "after whole tiles, on shared blocks, sp 2 and > 2 with the last unit varying, refusals)"
                            % len(want)))
if "aligned metadata words past the tensor's end" in COV:
    print("%s: note: mxfp4.wgmma's aligned scale word of the last row runs up to 2 bytes past w.scales when n * k / 32 "
          "%% 4 == 2 (bytes never used; inside the word's 4-byte-aligned span)" % PROG)

# Mutations: each deliberate bug must be caught (a deadlock, a fault or a failed check) by at least one case.
MUTATIONS = [
    ("swap_prod", "the producer stores W row halves without the swap (16 h)"),
    ("swz", "the consumer's half swap from (rl >> 3) & 1"),
    ("rs_clamp", "the producer's metadata row not clamped to n - 1"),
    ("rc1", "rc1 (row rl + 8) not clamped to n - 1"),
    ("nbox", "the box count rounds down: a box partly past m not loaded"),
    ("expect", "expect_tx counts BM / 64 boxes, loaded or not"),
    ("scale_d", "scale-d = kt > kb: each stage's first wgmma overwrites D"),
    ("epi_row", "the epilogue swaps the roles of i & 1 and i & 2"),
    ("epi_mask", "the epilogue's store test drops cn < n"),
    ("tile", "qcp_tile's group height always 8"),
    ("prod_parity", "the producer waits empty with parity ph instead of ph ^ 1"),
    ("cons_wrap", "the consumer's ring wraps at ST - 1"),
    ("no_wait1", "no wait_group 1: the stage before is freed and its registers rebuilt while its wgmmas may run"),
    ("no_wait0", "no wait_group 0 after a unit's stages: the accumulator read with wgmmas in flight"),
    ("regs", "the second step of the unrolled pair builds into the registers its wgmmas read"),
    ("mx_nibble", "mxfp4: sh = 4 t (nibble t) instead of byte t"),
    ("mx_big", "mxfp4: the second multiply for scale bytes 129..254 dropped"),
    ("mx_f1", "mxfp4: mxw_f1's one-multiply range e <= 127"),
    ("mx_vote", "mxfp4: the warp vote misses row rl + 8's bytes"),
    ("mx_zero", "mxfp4: the fma addend +0 instead of -0 (a -0 weight turns +0)"),
    ("mx_word", "mxfp4: the scale word's address not aligned down (& ~3 dropped)"),
    ("w4_nibble", "w4a16: sh = 8 t (byte t) instead of nibble t"),
    ("w4_zshift", "w4a16: the zero byte at 4 (e & 3) instead of 8 (e & 3)"),
    ("w4_zmask", "w4a16: the zero masked with 7"),
    ("w4_shalf", "w4a16: the scale's u16 half picked the other way round"),
    ("w4_gi", "w4a16: the group of block b without + 32 b"),
    ("w4_s2rz", "w4a16: w4bw_s2 truncates the f16 scale to bf16"),
    ("w4_rz", "w4a16: the scale multiply rounds toward zero"),
    ("w4_fm128", "w4a16 fmin: q - 8 formed with -128 instead of -136 (d q + c)"),
    ("w4_fmc", "w4a16 fmin: the addend bf16(m) instead of bf16(m + 8 d)"),
    ("w4_fmword", "w4a16 fmin: the min taken from the scale word (ms + 0 instead of + 512)"),
]
MUT_CASES = [
    (("mx", MX_SPECIALS), 100, 75, 320, dict(env="128")),
    (("mx",) + MX_LOW, 90, 200, 128, {}),
    (("w4", 32, True), 130, 72, 192, dict(env="128")),
    (("mx", MX_SPECIALS), 300, 200, 320, dict(env="256", grid=1, policies=("starve",))),
    (("w4", 64, True), 200, 136, 128, dict(env="64", grid=3)),
    (("w4", 32, 2), 130, 72, 192, dict(env="128")),
]


# The split's mutations, hunted in split cases (the cases above run every tile whole)
SPLIT_MUTATIONS = [
    ("scale_kb", "scale-d = kt > 0 || j > 0: a split unit's first wgmma adds to the previous unit's sums"),
    ("unit_gap", "qc_ra_unit: each split past the first starts a stage late (a gap)"),
    ("unit_overlap", "qc_ra_unit: each split but the last ends a stage late (an overlap)"),
    ("next_kt", "the next stage built while kt + 1 < kt_n instead of ke: past the unit's stages"),
    ("no_wait", "the last unit does not wait for `written`: it reads slots before they are stored"),
    ("no_fence", "no __threadfence between the slot stores and the count of `written`: counted before they land"),
    ("spin_sp", "the last waits for written >= sp even when it keeps its sums (sp 2): it waits forever"),
    ("keep_all", "the last keeps its sums for any sp: of more than two, the sum depends on which unit is last"),
    ("keep_own", "the last of two adds its own slot (never stored) instead of the other's"),
    ("no_reset", "the counters not put back to zero"),
    ("store_nonlast", "a unit that is not the last stores y too"),
    ("slot_u", "the counters and slots indexed by the unit (u - dw) instead of the tile (tt - dw)"),
    ("slot_sp", "the slots of tail tile t at t x SLOT instead of t x sp x SLOT (tiles share slots)"),
    ("nowork", "the device splits without checking that `work` is there"),
    ("dev_kt", "the device splits without checking kt_n >= sp (empty units)"),
]
SPLIT_MUT_CASES = [
    (("w4", 32, True), 300, 200, 320, dict(env="128", split="2", grid=4)),  # 4 whole tiles, then 2 split 2
    (("mx", MX_SPECIALS), 40, 200, 448, dict(split="3", grid=6)),           # 2 tiles split 3 (2 + 2 + 3)
    (("w4", 32, False), 100, 200, 448, dict(dsm_sp=4, grid=8, work=False)),  # split asked, work NULL
    (("mx", MX_SPECIALS), 100, 72, 128, dict(dsm_sp=3, grid=3)),            # split asked, kt 2 < 3
]


def caught(c, name):  # the first error of the mutated case, after its format and shape
    kw = dict(c[4])
    # the split's in lazy order (copies and slot stores land only when no warpgroup can run: reads outrun them)
    kw.setdefault("policies", ("lazy",) if name in dict(SPLIT_MUTATIONS) else ("eager", "random"))
    errs, desc = run_case(*c[:4], mut=frozenset([name]), seed=17, **kw)
    return "%s: %s" % (desc.split(" BM")[0], errs[0]) if errs else None


for muts, cases in ((MUTATIONS, MUT_CASES), (SPLIT_MUTATIONS, SPLIT_MUT_CASES)):
    t0 = time.time()
    T.hunt(muts, cases, caught)
    print("%s: %d mutations hunted (%.1f s)" % (PROG, len(muts), time.time() - t0))
T.finish(" (%.1f s)" % (time.time() - T0))
