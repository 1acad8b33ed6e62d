# test_ra_gemm_emu.py - qc_ra_gemm_src.h's register-A GEMM (mxfp4.wgmma, w4a16.wgmma_bf16_*) replayed on the CPU, no GPU needed.
# A line-by-line transcription (keep it in step with the sources: the lines it copies are checked as anchors below):
# the host plan (qc_ra_gemm_bm, qc_ra_ring_bytes, qc_ra_gemm_dims) and the kernel's pick of BM from its ring size
# (qc_ra_go); qcp_tile and the persistent tile walk; the producer warpgroup's stage (x boxes of 64 rows, those
# wholly past m not loaded; W row halves swapped on every other 4-row group, rows clamped to n - 1; the format's
# metadata words at pt * 4, + 512 for the second); each consumer thread's lane mapping and its format's build() with
# the same bit operations (MxDec: mxw_pair, mxw_f1 / mxw_f2, the warp vote `big`; W4Bf16<MODE> for MODE 0 sym, 1 asym
# and 2 fmin: w4bw_s2, the lop3 and the two bf16x2 fmas of w4bw_deq, fmin's w4bw_c2 (m + 8 d in f32, then bf16) and
# w4bw_fmin); fma.rn.bf16x2 emulated exactly (the product and sum in float64, checked exact, one round to nearest
# even, bf16 subnormals kept, overflow to inf, the -0 addend); the ring of ST stages with its mbarriers
# (wgmma_replay.py's MBar and scheduler: the producer warpgroup and each consumer warpgroup are actors, each x box and
# each producer warp's cp.asyncs land as separate events, under eager, lazy, random and starved interleavings); the
# two register sets taking turns; the wgmma descriptors (decoded back into the stage and k16 step they address); the
# accumulator layout and the epilogue's masked stores into a NaN-poisoned y.  wgmma is a plain matrix product of the
# A fragments (placed by mma.sync's m16n8k16 A layout) with the stage's x rows, exact in float64; it reads its
# operands when issued and they are checked unchanged at the wait.  Not modelled: threads of a warpgroup running
# apart (each warpgroup is one actor; a producer warp's 32 cp.async arrivals come together), memory ordering, the
# 128-byte swizzle's byte placement, f32 rounding and overflow in the accumulator.
# Checked: every A fragment bit for bit against the format's defined weights (mxfp4: E2M1 * 2^(e-127), inf past
# bf16, NaN for e = 255; w4a16: bf16_rn(bf16_rn(s) (q - z)), rounded here by another method; fmin: bf16_rn(bf16(d)
# (q - 8) + bf16(f32(m) + 8 d)), one rounding of the exact value, done here in integers); y against a float64
# x . W^T (within 1e-9 of sum |x w|, NaN and inf positions exact); every output written once; no deadlock; no stage
# read before it landed or overwritten under a wgmma; no copy out of bounds or misaligned; y bitwise equal across
# interleavings.  Deliberate bugs are injected at the end and each must be caught.  Exit 77 (skip) without numpy.
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
SMEM_OPTIN = 232448                 # sm_90's dynamic + static shared memory a block
SMEM_STATIC = 2 * QC_RA_ST64 * 8    # bars[2 * QC_RA_ST64]
DYN0 = 0x0100                       # shared-window address of the dynamic smem (after bars; any 16-aligned value)
XBOX = 64 * 64 * 2                  # one TMA box of x: 64 rows x 64 k of bf16 (8192 bytes)
TOL = 1e-9                          # |y - ref| <= TOL * sum |x w|: both sums are float64 sums of exact products


# ---- host side: the launch plan ------------------------------------------------------------------------------------
def qc_ra_ring_bytes(bm):
    st = QC_RA_ST256 if bm == 256 else QC_RA_ST128 if bm == 128 else QC_RA_ST64
    return st * ((bm * 128 + 128 * 32 + 2 * 512 + 1023) // 1024 * 1024) + 1024


def qc_ra_gemm_bm(m, n, env=None):
    """BM among 64, 128, 256 (env: the value of QC_MXW_BM / QC_W4BW_BM, None when unset)."""
    if env in ("64", "128", "256"):
        return int(env)
    if m <= 64:
        return 64
    best, pick, tn = 0, 128, (n + 127) // 128
    bm = 128
    while bm <= 256:
        tiles = (m + bm - 1) // bm * tn
        waves = (tiles + QC_RA_SMS - 1) // QC_RA_SMS
        cost = waves * (bm + QC_RA_FIXED)
        if bm == 128 or cost <= best:  # a tie: the wider tile
            best, pick = cost, bm
        bm *= 2
    return pick


def qc_ra_gemm_dims(m, n, env=None):
    """(grid x, block x, dynamic shared bytes) of the launch; zeros for an empty problem."""
    if m <= 0 or n <= 0:
        return 0, 0, 0
    bm = qc_ra_gemm_bm(m, n, env)
    tiles = ((m + bm - 1) // bm) * ((n + 127) // 128)
    return (tiles if tiles < QC_RA_SMS else QC_RA_SMS), QC_RA_THREADS, qc_ra_ring_bytes(bm)


# ---- device side: sizes, the pick of BM, the tile order --------------------------------------------------------------
def qc_ra_stage(BM):  # x, W rows, 2 words a row of metadata, rounded up to 1 KiB
    return (BM * 128 + 128 * 32 + 2 * 512 + 1023) // 1024 * 1024


def qc_ra_ring(BM, ST):
    return ST * qc_ra_stage(BM) + 1024


def qc_ra_go(dsm, m, n, k):
    """The kernel body: (BM, ST) of the qc_ra_gemm it runs for a dynamic smem size, None when it returns at once."""
    if m <= 0 or n <= 0 or k <= 0 or (k & 63):
        return None
    if dsm == qc_ra_ring(256, QC_RA_ST256):
        return 256, QC_RA_ST256
    if dsm == qc_ra_ring(128, QC_RA_ST128):
        return 128, QC_RA_ST128
    if dsm == qc_ra_ring(64, QC_RA_ST64):
        return 64, QC_RA_ST64
    return None


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


# ---- one launch: global memory, each block's ring, y -----------------------------------------------------------------
class Launch(rp.LaunchBase):
    def __init__(self, F, x, m, n, k, env=None, grid=None, mut=frozenset()):
        self.F, self.x, self.m, self.n, self.k, self.mut = F, x, m, n, k, mut
        gx, threads, self.dsm = qc_ra_gemm_dims(m, n, env)
        self.BM, self.ST = qc_ra_go(self.dsm, m, n, k)
        assert threads == QC_RA_THREADS
        self.STAGE = qc_ra_stage(self.BM)
        self.grid = grid or gx  # a smaller grid stands in for more tiles than QC_RA_SMS (several tiles a block)
        self.tiles_m, self.tiles_n, self.kt_n = cdiv(m, self.BM), cdiv(n, 128), k // 64
        self.y = np.full(m * n, np.nan)
        self.writes = np.zeros(m * n, np.int64)
        self.errors, self.frags, self.tail_words = [], 0, 0
        # each global buffer with 16 bytes of garbage after it (the rest of an aligned word, read but never used)
        self.gmem = {name: np.concatenate([b, np.full(16, 0xFF, np.uint8)]) for name, b in F.buf.items()}

    def tiles(self, bx):  # for (t = blockIdx.x; t < tiles; t += gridDim.x)
        t = bx
        while t < self.tiles_m * self.tiles_n:
            yield t
            t += self.grid

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


class Block:
    """A block's shared memory (the ring's stages: x rows, W rows, metadata words; stale until written), its
    mbarriers and the copies in flight."""

    def __init__(self, L, rng):
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
        self.ready = []
        self.full = [MBar("full[%d]" % s, 129, self.ready, True) for s in range(ST)]  # expect_tx + 128 cp.async
        self.empty = [MBar("empty[%d]" % s, 8, self.ready, True) for s in range(ST)]  # the 8 consumer warps
        self.events = [[], []]  # TMA boxes, each producer warp's cp.asyncs


class Box:  # a TMA box of x (64 rows x 64 k at element coordinates c0 inner, c1 rows; rows past m read zero)
    def __init__(self, L, B, st, b, c0, c1, bar, tag):
        self.L, self.B, self.st, self.b, self.c0, self.c1, self.bar, self.tag = L, B, st, b, c0, c1, bar, tag

    def land(self):
        L, B = self.L, self.B
        if 64 * (self.b + 1) > L.BM:
            raise Fault("x box %d lands past the stage's %d x rows" % (self.b, L.BM))
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
    for t in L.tiles(bx):
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
        for kt in range(L.kt_n):
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


def consumer(L, B, bx, c):
    """Consumer warpgroup c (its 128 threads in lockstep, vectorized): per tile, the stages' builds and wgmmas with two
    register sets taking turns, each stage released by the 4 warps' lane 0, then the epilogue."""
    F, m, n, k, BM, ST, mut, kt_n = L.F, L.m, L.n, L.k, L.BM, L.ST, L.mut, L.kt_n
    warp, lane = TH >> 5, TH & 31
    g = lane >> 2
    cs = SimpleNamespace(k=k)
    cs.rl = 64 * c + 16 * warp + g  # tile row of A row g; A row g + 8 is rl + 8
    cs.swz = ((cs.rl >> 3) if "swz" in mut else (cs.rl >> 2)) & 1
    cs.t = lane & 3
    acc = np.full((64, BM), np.nan)  # never initialized: the first wgmma of a tile must overwrite it
    DR, DC = d_layout(BM)
    s, ph = 0, 0
    ra, rb = np.zeros((4, 4, 128), np.int64), np.zeros((4, 4, 128), np.int64)
    cur_t = SimpleNamespace()

    def build(st, kt, a):
        if B.wtag[st] != [(cur_t.tt, kt)] * 4:
            raise Fault("consumer %d builds tile %d stage %d from ring stage %d holding %s" %
                        (c, cur_t.tt, kt, st, B.wtag[st]))
        cs.ws, cs.ms, cs.kt = B.W[st], B.M[st], kt
        a[...] = F.build(cs, mut)

    def step(kt, cur, nxt):  # stage kt from cur (built); the next stage into nxt while its wgmmas run
        nonlocal s, ph, acc
        sa = s
        s += 1
        if s == (ST - 1 if "cons_wrap" in mut else ST):
            s, ph = 0, ph ^ 1
        d = qc_desc(B.base + sa * L.STAGE)
        held, xv = cur.copy(), B.xver[sa]  # what the wgmmas read until the wait
        for j in range(4):
            acc = wgmma(L, B, c, acc, cur[j], d + 2 * j, (kt > 0) if "scale_d" in mut else (kt > 0 or j > 0),
                        cur_t.tt, cur_t.m0, cur_t.n0, kt)
        if "early" in mut:  # the stage released before the wgmmas retire
            for _ in range(4):
                B.empty[sa].arrive()
        if kt + 1 < kt_n:
            yield ('m', B.full[s], ph)
            build(s, kt + 1, nxt)
        yield None  # others may run while the wgmmas are in flight
        # qcp_wg_wait<0>(): the wgmmas retire
        if not np.array_equal(cur, held):
            raise Fault("consumer %d: A registers of stage %d rewritten before its wgmmas retired" % (c, kt))
        if B.xver[sa] != xv:
            raise Fault("consumer %d: ring stage %d's x overwritten under its wgmmas (tile %d stage %d)" %
                        (c, sa, cur_t.tt, kt))
        if "early" not in mut:
            for _ in range(4):  # lane 0 of each warp
                B.empty[sa].arrive()

    ntiles = 0
    for tt in L.tiles(bx):
        tm, tn = qcp_tile(tt, L.tiles_m, L.tiles_n, mut)
        m0, n0 = tm * BM, tn * 128
        cur_t.tt, cur_t.m0, cur_t.n0 = tt, m0, n0
        cs.rc0 = np.where(n0 + cs.rl < n, n0 + cs.rl, n - 1)
        cs.rc1 = n0 + cs.rl + 8 if "rc1" in mut else np.where(n0 + cs.rl + 8 < n, n0 + cs.rl + 8, n - 1)
        yield ('m', B.full[s], ph)
        build(s, 0, ra)
        kt = 0
        while kt < kt_n:
            yield from step(kt, ra, rb)
            if kt + 1 >= kt_n:
                break
            yield from step(kt + 1, rb, rb if "regs" in mut else ra)
            kt += 2
        # accumulator i: W row rl (+8 for i & 2), x row 8 (i / 4) + 2 t + (i & 1)
        av = acc[DR, DC]
        i = np.arange(BM // 2)[None, :]
        if "epi_row" in mut:
            r = m0 + 8 * (i >> 2) + 2 * cs.t[:, None] + ((i >> 1) & 1)
            cn = n0 + cs.rl[:, None] + np.where(i & 1, 8, 0)
        else:
            r = m0 + 8 * (i >> 2) + 2 * cs.t[:, None] + (i & 1)
            cn = n0 + cs.rl[:, None] + np.where(i & 2, 8, 0)
        mask = (r < m) if "epi_mask" in mut else (r < m) & (cn < n)
        L.store((r * n + cn).ravel(), av.ravel(), mask.ravel())
        ntiles += 1
        yield None
    if ntiles > 1:
        COV.add("several tiles a block")


POLICIES = ("eager", "lazy", "random", "starve")


def simulate(L, policy, seed):
    """Each block of the grid on its own (blocks share nothing but y): producer and consumers as actors."""
    for bx in range(L.grid):
        B = Block(L, np.random.default_rng(seed + bx))
        actors = [Actor("producer", producer(L, B, bx), "p"),
                  Actor("consumer 0", consumer(L, B, bx, 0), "c0"), Actor("consumer 1", consumer(L, B, bx, 1), "c1")]
        B.ready[:] = actors
        steps = 400 + 40 * L.kt_n * (L.tiles_m * L.tiles_n // L.grid + 1)
        rp.run_actors(actors, B.ready, B.events, policy, seed + bx, steps, held=lambda a: a.role == "c0")
        for bar in B.full + B.empty:
            if not bar.at_rest():
                raise Fault("block %d: %s left with %d arrivals / %d bytes pending" %
                            (bx, bar.name, bar.pending, bar.tx))


def make_x(rng, m, k):
    """Random bf16 values of mixed magnitudes, never zero."""
    v = rng.normal(size=(m, k)) * np.exp2(rng.integers(-3, 4, (m, k)))
    b = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    b[(b & 0x7FFF) == 0] = 0x3F80
    return bf16_val(b)


def run_case(fmt, m, n, k, env=None, grid=None, policies=POLICIES, mut=frozenset(), seed=1):
    """One problem: fmt is ("mx", specials) or ("w4", g, mode) (mode False / True: sym / asym, 2: fmin).  Returns
    (errors, description)."""
    rng = np.random.default_rng(seed)
    F = MxFmt(rng, n, k, *fmt[1:]) if fmt[0] == "mx" else W4Fmt(rng, n, k, fmt[1], fmt[2])
    x = make_x(rng, m, k)
    with np.errstate(all="ignore"):
        ref = x @ F.W.T
        S = np.abs(x) @ np.where(np.isfinite(F.W), np.abs(F.W), 0.0).T
    last = []

    def launch():
        last.append(Launch(F, x, m, n, k, env, grid, mut))
        return last[-1]

    def check(L):
        errs = list(L.errors) + rp.write_errors(L.writes, n)
        y = L.y.reshape(m, n)
        bad = np.isnan(y) != np.isnan(ref)
        bad |= np.isinf(ref) & (y != ref)
        with np.errstate(all="ignore"):
            bad |= np.isfinite(ref) & ~(np.abs(y - ref) <= TOL * S)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            errs.append("%d outputs off the reference (first y[%d,%d] = %r, ref %r)" % (
                bad.sum(), i, j, float(y[i, j]), float(ref[i, j])))
        if L.tail_words:
            COV.add("aligned metadata words past the tensor's end")
        return errs

    errs = rp.replay(policies, seed, launch, simulate, check)
    L = last[0]
    COV.add("%s BM %d" % (fmt[0], L.BM))
    COV.add("%s k %d" % (fmt[0], k))
    if fmt[0] == "w4":
        COV.add("w4 g%d %s" % (fmt[1], ("sym", "asym", "fmin")[int(fmt[2])]))
        if F.mode == 2:
            COV.update(["fmin BM %d" % L.BM, "fmin k %d" % k])
    else:
        COV.update("mx e=%d" % v for v in (0, 128, 129, 254, 255) if (F.e == v).any())
    desc = "%-17s m=%3d n=%3d k=%3d BM %3d ST %2d grid %2d (%d tiles)%s" % (
        F.name, m, n, k, L.BM, L.ST, L.grid, L.tiles_m * L.tiles_n, " env %s" % env if env else "")
    if not errs:
        desc += ": %d A fragments exact, y within %g of sum|xw|, NaN/inf exact" % (L.frags, TOL)
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
    # the picks the comments name
    picks = [((17, 4096, None), 64), ((64, 128, None), 64), ((65, 128, None), 128), ((300, 4096, None), 128),
             ((1024, 6144, None), 256), ((4096, 4096, None), 256), ((4096, 4096, "64"), 64), ((17, 128, "256"), 256),
             ((4096, 4096, "32"), 256), ((4096, 4096, "abc"), 256), ((129, 128, None), 128)]
    bad = ["m=%d n=%d env %s -> %d, want %d" % (a + (qc_ra_gemm_bm(*a), w)) for a, w in picks if qc_ra_gemm_bm(*a) != w]
    report(not bad, "qc_ra_gemm_bm picks: %s" % (bad or "m <= 64 -> 64, 128 / 256 by waves x (BM + 128), a tie "
                                                        "(qkv 6144 at m = 1024) -> 256, env 64/128/256 forces"))
    # the three rings fit sm_90 with the static barriers, are told apart by their sizes, and the host's bytes are
    # the device's qc_ra_ring; stages are 1 KiB multiples holding x, W rows and 2 words a row
    bad = []
    sizes = {}
    for bm, st in ((64, QC_RA_ST64), (128, QC_RA_ST128), (256, QC_RA_ST256)):
        sizes[bm] = qc_ra_ring_bytes(bm)
        if sizes[bm] != qc_ra_ring(bm, st):
            bad.append("BM %d: host %d bytes, device %d" % (bm, sizes[bm], qc_ra_ring(bm, st)))
        if sizes[bm] + SMEM_STATIC > SMEM_OPTIN:
            bad.append("BM %d: %d + %d bytes of shared memory" % (bm, sizes[bm], SMEM_STATIC))
        if qc_ra_stage(bm) % 1024 or qc_ra_stage(bm) < bm * 128 + 128 * 32 + 2 * 512 or st > QC_RA_ST64:
            bad.append("BM %d: stage of %d bytes, %d stages" % (bm, qc_ra_stage(bm), st))
        if qc_ra_go(sizes[bm], 100, 100, 64) != (bm, st):
            bad.append("BM %d: the kernel runs %s" % (bm, qc_ra_go(sizes[bm], 100, 100, 64)))
    if len(set(sizes.values())) != 3:
        bad.append("ring sizes not distinct: %s" % sizes)
    report(not bad, "rings: %s" % (bad or "%s bytes, distinct, within sm_90's %d with the barriers; the kernel "
                                          "picks the host's BM" % (sorted(sizes.values()), SMEM_OPTIN)))
    # the launch: grid min(tiles, 132), 384 threads, the ring of the pick; the kernel returns for bad shapes
    bad = []
    for m in (1, 17, 64, 65, 100, 129, 256, 300, 1000, 1024, 2048, 4096, 8192):
        for n in (1, 8, 75, 128, 129, 1000, 4096, 6144, 14336, 28672):
            gx, th, sm = qc_ra_gemm_dims(m, n)
            bm = qc_ra_gemm_bm(m, n)
            tiles = cdiv(m, bm) * cdiv(n, 128)
            if gx != min(tiles, QC_RA_SMS) or th != QC_RA_THREADS or qc_ra_go(sm, m, n, 128) is None:
                bad.append("m=%d n=%d" % (m, n))
    if qc_ra_gemm_dims(0, 8) != (0, 0, 0) or qc_ra_go(qc_ra_ring_bytes(64), 8, 8, 96) is not None:
        bad.append("empty or k % 64 problems")
    report(not bad, "qc_ra_gemm_dims: grid, block and ring over m x n: %s" % (bad[:3] or "ok"))
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
            "const u32 d0 = row0 * 32 + 16 * (h ^ ((row0 >> 2) & 1)), d1 = row1 * 32 + 16 * (h ^ ((row1 >> 2) & 1));",
            "qcp_wait(empty + 8 * s, ph ^ 1u);", "qcp_expect_tx(fb, nbox * 8192u);",
            "qcp_tma2d(sx + b * 8192, tmx, kt * 64, m0 + 64 * b, fb);", "F::meta(fa, ss + pt * 4, rs, kt, k);",
            "qcp_mbar_init(full + 8 * s, 129);", "qcp_mbar_init(empty + 8 * s, 8);",
            "cs.rl = 64 * c + 16 * warp + g;", "cs.swz = (cs.rl >> 2) & 1;", "cs.t = (u32)(lane & 3);",
            "cs.rc1 = n0 + cs.rl + 8 < n ? n0 + cs.rl + 8 : n - 1;",
            "for (int j = 0; j < 4; j++) qc_ra_wgmma<BM>(acc, cur[j], d + 2 * j, kt > 0 || j > 0);",
            "step(kt, ra, rb);", "step(kt + 1, rb, ra);", "if (lane == 0) qcp_arrive(empty + 8 * sa);",
            "const ll r = m0 + 8 * (i >> 2) + 2 * cs.t + (i & 1), cn = n0 + cs.rl + ((i & 2) ? 8 : 0);",
            "if (r < m && cn < n) y[r * n + cn] = acc[i];",
            "if (bm == 128 || cost <= best) best = cost, pick = bm;", "#define QC_RA_FIXED 128",
            "#define QC_RA_ST64 16", "#define QC_RA_ST128 10", "#define QC_RA_ST256 6"],
        "plugins/mxfp4/mxfp4_wgmma.c": [
            "return e <= 128u ? ((e + 126u) << 7) * 0x10001u : e < 255u ? 0x7e807e80u : 0x7fc07fc0u;",
            "return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3f803f80u;",
            "return ((y & 0xFu) * 4160u + (y & 0xF0u) * 0x01040000u) & 0x81C081C0u;",
            "qcp_cp4(dst, fa.sc + ((r * (k / 32) + 2 * kt) & ~3ll));", "const u32 sh = 8u * c.t;",
            "s0 = 8u * (u32)((c.rc0 * nb + 2 * c.kt) & 3), s1 = 8u * (u32)((c.rc1 * nb + 2 * c.kt) & 3);",
            "a[2 * b + 1][3] = mxw_mul(mxw_pair(r1.w, sh), f1);", "a[j][3] = mxw_mul(a[j][3], g1);",
            "const uint4 r1 = *(const uint4 *)(c.ws + (c.rl + 8) * 32 + 16 * (b ^ c.swz));"],
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
            "const u16 *s, const u16 *mn, float *y, ll m, ll n, ll k, ll gs, const __grid_constant__ QcTmap tmx) {",
            "const W4Bf16<2>::Args fa = {q, s, mn, gs == 32 ? 5 : gs == 64 ? 6 : 7};",
            "qc_ra_go<W4Bf16<2>>(&tmx, fa, y, m, n, k);",
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
want = ["%s BM %d" % (f, b) for f in ("mx", "w4") for b in (64, 128, 256)] + \
    ["%s k %d" % (f, kk) for f in ("mx", "w4") for kk in (64, 128, 320)] + \
    ["w4 g%d %s" % (gg, a) for gg in (32, 64, 128) for a in ("sym", "asym", "fmin") if (gg, a) != (128, "sym")] + \
    ["fmin BM %d" % b for b in (64, 128, 256)] + ["fmin k %d" % kk for kk in (64, 192, 320)] + \
    ["fmin centre rounded in f32", "fmin centre 0", "fmin m far from -8 d"] + \
    ["mx e=%d" % v for v in (0, 128, 129, 254, 255)] + \
    ["BM %d: x boxes past m not loaded" % b for b in (128, 256)] + \
    ["W rows past n clamped", "ring wrap ST 6", "ring wrap ST 16", "several tiles a block",
     "x row tiles past a group of 8", "mxfp4 big vote, mixed lanes", "mxfp4 big vote from rows rl + 8 only"]
missing = [w for w in want if w not in COV]
report(not missing, "coverage: %s" % ("missing " + ", ".join(missing) if missing else "%d paths taken" % len(want)))
print("%s: coverage: %s" % (PROG, "MISSING " + ", ".join(missing) if missing else
                            "every listed path taken (%d: each BM and k per format, groups per w4a16 mode, fmin's "
                            "BM / k / centres, scale bytes 0/128/129/254/255, boxes past m, clamped rows, ring wraps, "
                            "several tiles a block, the big vote)"
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
    ("scale_d", "scale-d = kt > 0: the stage's first wgmmas overwrite D"),
    ("epi_row", "the epilogue swaps the roles of i & 1 and i & 2"),
    ("epi_mask", "the epilogue's store test drops cn < n"),
    ("tile", "qcp_tile's group height always 8"),
    ("prod_parity", "the producer waits empty with parity ph instead of ph ^ 1"),
    ("cons_wrap", "the consumer's ring wraps at ST - 1"),
    ("early", "a stage released before its wgmmas retire (arrive before wait_group 0)"),
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


def caught(c, name):  # the first error of the mutated case, after its format and shape
    kw = dict(c[4])
    kw.setdefault("policies", ("eager", "random"))
    errs, desc = run_case(*c[:4], mut=frozenset([name]), seed=17, **kw)
    return "%s: %s" % (desc.split(" BM")[0], errs[0]) if errs else None


T.hunt(MUTATIONS, MUT_CASES, caught)
T.finish(" (%.1f s)" % (time.time() - T0))
