/* mxfp4_wgmma.c - the Hopper (sm_90a) mxfp4 prefill GEMM: TMA x tiles, E2M1 codes and E8M0 scales decoded into wgmma A registers. */
#include <stdlib.h>
#include <string.h>

#include "../common/qc_tma_pipe_src.h"
#include "../common/qc_wgmma_ra_src.h"
#include "mxfp4_cuda.h"

/*
 * y[m,n] = x[m,k] . dec(W)[n,k]^T, x bf16 ("x.bf16"), W in the format's own
 * packing (qweight u8 [n, k/2], element 2i in the low nibble of byte i;
 * scales E8M0 u8 [n, k/32]), f32 out: the same parameters as mxfp4.gemv and
 * mxfp4.linear_mma.  Computed transposed, y^T = W x^T, so that the weight is
 * wgmma's A operand, which may come from registers (as in w4a16.wgmma_*,
 * whose pipeline this follows): x^T is the B operand, K-major in shared
 * memory as TMA's 128-byte swizzle puts x's rows.  No decoded weight is ever
 * stored, not even to shared memory.
 *
 * Exactness.  An E2M1 value times its block's 2^(e-127) is a bf16 number
 * (subnormals included) unless it overflows, and then it is inf as in the
 * C reference; e = 0xFF gives NaN.  So A holds the weights exactly, the
 * products are exact in f32, and wgmma accumulates all of K in f32 with no
 * promotion step (unlike w4a16, whose scales are not powers of two): only
 * the summation order differs from the reference.
 *
 * Decoding one A register.  A thread's A registers are mma.sync's A layout:
 * rows g and g + 8 of its warp's 16, k pairs (2t, 2t + 1) and (2t + 8,
 * 2t + 9) of each k16 step, i.e. byte t of each packed 32-bit word (8
 * elements) of those rows: low nibble = element 2t, high = 2t + 1.  With
 * y = word >> 8t, lo = y & 0xF, hi = y & 0xF0,
 *     (lo * 4160 + hi * 0x01040000) & 0x81C081C0
 * writes lo at bits 6..9 and 12..15 and hi at 22..25 and 28..31 (no carries:
 * the four copies do not overlap), and the mask keeps each magnitude's three
 * bits at 6..8 / 22..24 and its sign at 15 / 31: the bf16x2 bits of the two
 * E2M1 values times 2^-126 (codes 0.5 are bf16 subnormals, which
 * fma.rn.bf16x2 keeps).  One bf16x2 multiply by 2^(e-1) (mxfp4.gemv's mx_s1
 * factor) makes them value * 2^(e-127).  For e > 128, 2^(e-1) is no bf16:
 * the factor is 2^126 and a second multiply by 2^(e-127) follows; a warp
 * vote per stage takes that path only when a lane of the warp has such a
 * block (real weights have e < 128: |w| < 2).
 *
 * Block: 384 threads, persistent (at most 132 blocks).  Warpgroup 0 is the
 * producer (setmaxnreg 56): thread 0 issues the TMA boxes of x (64 rows x 64
 * k each, 1 or 2 per stage), all 128 threads copy the stage's packed rows
 * (32 bytes a row, cp.async 16 B, halves swapped on every other 4-row group
 * so that the consumers' 16-byte loads hit distinct banks) and the aligned
 * 4-byte word holding each row's two scale bytes of the stage (k % 64 == 0:
 * the pair never straddles a word); the stage's "full" mbarrier completes
 * on the TMA bytes plus 128 cp.async arrivals.  Warpgroups 1 and 2 consume
 * (setmaxnreg 224), 64 W rows each of a 128-row tile; x rows per tile
 * (wgmma N) 128 when m > 64, else 64.  Per 64-k stage a consumer builds its
 * 4 A fragments, fences once, issues 4 wgmmas and commits; the next
 * stage's fragments are built before this stage's wgmmas are waited for,
 * so the tensor cores are not left idle while a consumer decodes (two
 * register sets take turns; the loop is unrolled by two stages).  10 stages
 * of 21 KiB at 128 x rows, 16 of 13 KiB at 64.  Rows past n are clamped to
 * n - 1 (never stored); x rows past m read as zero (TMA), boxes wholly past m
 * are not loaded.
 *
 * Takes k a multiple of 64 ("align_k" otherwise: mxfp4.linear_mma takes any
 * multiple of 32), n and m below 2^31 (TMA coordinates).
 */

#define MXW_SMS 132
#define MXW_THREADS 384
/* stages of the rings by x rows per tile (BM): 16 x 13 KiB, 10 x 21 KiB, 6 x 37 KiB */
#define MXW_ST64 16
#define MXW_ST128 10
#define MXW_ST256 6
#define MXW_STR_(x) #x
#define MXW_STR(x) MXW_STR_(x)

static const char MXW_SRC[] =
    "/* qcore mxfp4 Hopper GEMM: y[m,n] = x[m,k] . dec(W)[n,k]^T; TMA + wgmma, A decoded in registers */\n"
    "typedef unsigned int u32;\n"
    "typedef unsigned char u8;\n"
    "typedef long long ll;\n"
    "typedef unsigned long long u64;\n"
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"
    "#define MXW_SMS " MXW_STR(MXW_SMS) "\n"
    "#define MXW_ST64 " MXW_STR(MXW_ST64) "\n"
    "#define MXW_ST128 " MXW_STR(MXW_ST128) "\n"
    "#define MXW_ST256 " MXW_STR(MXW_ST256) "\n"
    "#define MXW_GROUP_M 8\n"
    QC_TMA_PIPE_SRC QC_WGMMA_RA_SRC
    "/* the first bf16x2 factor of a scale byte: 2^(e-1); 2^126 for e > 128 (a second multiply follows); NaN for 255 */\n"
    "__device__ __forceinline__ u32 mxw_f1(u32 e) {\n"
    "    return e <= 128u ? ((e + 126u) << 7) * 0x10001u : e < 255u ? 0x7e807e80u : 0x7fc07fc0u;\n"
    "}\n"
    "/* the second factor for e in 129..254: 2^(e-127); 1 otherwise */\n"
    "__device__ __forceinline__ u32 mxw_f2(u32 e) { return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3f803f80u; }\n"
    "__device__ __forceinline__ u32 mxw_mul(u32 a, u32 b) { /* exact here; the -0 addend keeps a zero's sign */\n"
    "    u32 d;\n"
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(0x80008000u));\n"
    "    return d;\n"
    "}\n"
    "/* byte t of w (sh = 8 t: elements 2t, 2t + 1 of the word) -> bf16x2 of their E2M1 values times 2^-126 */\n"
    "__device__ __forceinline__ u32 mxw_pair(u32 w, u32 sh) {\n"
    "    const u32 y = w >> sh;\n"
    "    return ((y & 0xFu) * 4160u + (y & 0xF0u) * 0x01040000u) & 0x81C081C0u;\n"
    "}\n"
    "/* tile t -> (x row tile, W row tile): groups of MXW_GROUP_M x tiles, x fastest, so that the blocks running\n"
    "   together share their W tiles in L2 */\n"
    "__device__ __forceinline__ void mxw_tile(ll t, ll tiles_m, ll tiles_n, ll *tm, ll *tn) {\n"
    "    const ll per_group = (ll)MXW_GROUP_M * tiles_n;\n"
    "    const ll first_m = t / per_group * MXW_GROUP_M, in_g = t % per_group;\n"
    "    const ll gsz = tiles_m - first_m < MXW_GROUP_M ? tiles_m - first_m : MXW_GROUP_M;\n"
    "    *tm = first_m + in_g % gsz;\n"
    "    *tn = in_g / gsz;\n"
    "}\n"
    "template <int BM> __device__ __forceinline__ void mxw_wgmma(float *d, const u32 *a, u64 db, int scale_d) {\n"
    "    if constexpr (BM == 256) qc_wgmma_ra256<0>(d, a, db, scale_d);\n"
    "    else if constexpr (BM == 128) qc_wgmma_ra128<0>(d, a, db, scale_d);\n"
    "    else qc_wgmma_ra64<0>(d, a, db, scale_d);\n"
    "}\n"
    "/* the dynamic shared memory of the BM-row ring: ST stages + 1 KiB to align it (the host's launch size) */\n"
    "template <int BM, int ST> __device__ constexpr u32 mxw_ring() { return (u32)ST * ((BM * 128 + 128 * 32 + 128 * 4 + 1023) / 1024 * 1024) + 1024u; }\n"
    "/* BM x rows per tile (wgmma N), ST stages */\n"
    "template <int BM, int ST>\n"
    "__device__ __forceinline__ void mxw_gemm(const QcTmap *tmx, const u8 *q, const u8 *sc, float *y, ll m, ll n, ll k,\n"
    "                                         unsigned char *smem, u64 *bars) {\n"
    "    constexpr int XB = BM * 128, WB = 128 * 32, SB = 128 * 4;\n"
    "    constexpr int STAGE = (XB + WB + SB + 1023) / 1024 * 1024;\n"
    "    const int tid = threadIdx.x, wg = tid >> 7;\n"
    "    if (tid == 0) {\n"
    "        const u32 full = qcp_smem(bars), empty = full + 8 * ST;\n"
    "        for (int s = 0; s < ST; s++) {\n"
    "            qcp_mbar_init(full + 8 * s, 129); /* thread 0's expect_tx + 128 cp.async arrivals */\n"
    "            qcp_mbar_init(empty + 8 * s, 8);  /* the 8 consumer warps */\n"
    "        }\n"
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n"
    "    }\n"
    "    __syncthreads();\n"
    "/* what both roles need, computed after setmaxnreg so that nothing lives across it */\n"
    "#define MXW_SETUP                                                                                          \\\n"
    "    const u32 sbase = qcp_smem(smem), base = (sbase + 1023u) & ~1023u; /* the swizzle repeats every 1 KiB */ \\\n"
    "    const unsigned char *al = smem + (base - sbase);                                                       \\\n"
    "    const u32 full = qcp_smem(bars), empty = full + 8 * ST;                                                \\\n"
    "    const ll tiles_m = (m + BM - 1) / BM, tiles_n = (n + 127) / 128, tiles = tiles_m * tiles_n;            \\\n"
    "    const int kt_n = (int)(k / 64);                                                                        \\\n"
    "    const ll nb = k / 32, kh = k / 2;                                                                      \\\n"
    "    (void)al, (void)nb, (void)kh;\n"
    "    if (wg == 0) {\n"
    "        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\" ::: \"memory\");\n"
    "        MXW_SETUP\n"
    "        const int pt = tid;\n"
    "        if (pt == 0) asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((u64)tmx) : \"memory\");\n"
    "        int s = 0;\n"
    "        u32 ph = 0;\n"
    "        for (ll t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
    "            ll tm, tn;\n"
    "            mxw_tile(t, tiles_m, tiles_n, &tm, &tn);\n"
    "            const int m0 = (int)(tm * BM);\n"
    "            const ll n0 = tn * 128;\n"
    "            const int left = (int)((m - m0 + 63) / 64), nbox = left < BM / 64 ? left : BM / 64; /* boxes not wholly past m */\n"
    "            /* this thread's two 16-byte halves of W rows and its row's scale word, clamped to row n - 1 */\n"
    "            const int row0 = pt >> 1, row1 = (pt + 128) >> 1, h = pt & 1;\n"
    "            const ll r0 = n0 + row0 < n ? n0 + row0 : n - 1, r1 = n0 + row1 < n ? n0 + row1 : n - 1;\n"
    "            const ll rs = n0 + pt < n ? n0 + pt : n - 1;\n"
    "            const u8 *q0 = q + r0 * kh + 16 * h, *q1 = q + r1 * kh + 16 * h;\n"
    "            const u32 d0 = row0 * 32 + 16 * (h ^ ((row0 >> 2) & 1)), d1 = row1 * 32 + 16 * (h ^ ((row1 >> 2) & 1));\n"
    "            for (int kt = 0; kt < kt_n; kt++) {\n"
    "                qcp_wait(empty + 8 * s, ph ^ 1u); /* a fresh barrier passes parity 1 at once */\n"
    "                const u32 sx = base + s * STAGE, sw = sx + XB, ss = sw + WB, fb = full + 8 * s;\n"
    "                if (pt == 0) {\n"
    "                    qcp_expect_tx(fb, nbox * 8192u);\n"
    "                    for (int b = 0; b < nbox; b++) qcp_tma2d(sx + b * 8192, tmx, kt * 64, m0 + 64 * b, fb);\n"
    "                }\n"
    "                qcp_cp16(sw + d0, q0 + kt * 32);\n"
    "                qcp_cp16(sw + d1, q1 + kt * 32);\n"
    "                qcp_cp4(ss + pt * 4, sc + ((rs * nb + 2 * kt) & ~3ll));\n"
    "                qcp_cp_arrive(fb);\n"
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n"
    "            }\n"
    "        }\n"
    "    } else {\n"
    "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::: \"memory\");\n"
    "        MXW_SETUP\n"
    "        const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "        const int rl = 64 * c + 16 * warp + g; /* tile row of A row g; A row g + 8 is rl + 8 */\n"
    "        const int swz = (rl >> 2) & 1;        /* the same for rl + 8 */\n"
    "        const u32 sh = 8u * (u32)t;           /* byte t of each word */\n"
    "        float acc[BM / 2];\n"
    "        int s = 0;\n"
    "        u32 ph = 0;\n"
    "        for (ll tt = blockIdx.x; tt < tiles; tt += gridDim.x) {\n"
    "            ll tm, tn;\n"
    "            mxw_tile(tt, tiles_m, tiles_n, &tm, &tn);\n"
    "            const ll m0 = tm * BM, n0 = tn * 128;\n"
    "            const ll rc0 = n0 + rl < n ? n0 + rl : n - 1, rc1 = n0 + rl + 8 < n ? n0 + rl + 8 : n - 1;\n"
    "            /* the four A fragments of stage st (k block kt), decoded and scaled */\n"
    "            auto build = [&](int st, int kt, u32 (*a)[4]) {\n"
    "                const unsigned char *ws = al + st * STAGE + XB, *ms = ws + WB;\n"
    "                const u32 wa = *(const u32 *)(ms + rl * 4), wb = *(const u32 *)(ms + (rl + 8) * 4);\n"
    "                const u32 s0 = 8u * (u32)((rc0 * nb + 2 * kt) & 3), s1 = 8u * (u32)((rc1 * nb + 2 * kt) & 3);\n"
    "                const u32 e00 = (wa >> s0) & 255u, e01 = (wa >> (s0 + 8)) & 255u; /* row rl, blocks 0 and 1 */\n"
    "                const u32 e10 = (wb >> s1) & 255u, e11 = (wb >> (s1 + 8)) & 255u; /* row rl + 8 */\n"
    "                const bool big = __any_sync(0xffffffffu, (e00 > 128u && e00 < 255u) || (e01 > 128u && e01 < 255u) ||\n"
    "                                                          (e10 > 128u && e10 < 255u) || (e11 > 128u && e11 < 255u));\n"
    "#pragma unroll\n"
    "                for (int b = 0; b < 2; b++) { /* 32-element block b: k16 steps 2b, 2b + 1 */\n"
    "                    const uint4 r0 = *(const uint4 *)(ws + rl * 32 + 16 * (b ^ swz));\n"
    "                    const uint4 r1 = *(const uint4 *)(ws + (rl + 8) * 32 + 16 * (b ^ swz));\n"
    "                    const u32 f0 = mxw_f1(b ? e01 : e00), f1 = mxw_f1(b ? e11 : e10);\n"
    "                    a[2 * b][0] = mxw_mul(mxw_pair(r0.x, sh), f0);\n"
    "                    a[2 * b][1] = mxw_mul(mxw_pair(r1.x, sh), f1);\n"
    "                    a[2 * b][2] = mxw_mul(mxw_pair(r0.y, sh), f0);\n"
    "                    a[2 * b][3] = mxw_mul(mxw_pair(r1.y, sh), f1);\n"
    "                    a[2 * b + 1][0] = mxw_mul(mxw_pair(r0.z, sh), f0);\n"
    "                    a[2 * b + 1][1] = mxw_mul(mxw_pair(r1.z, sh), f1);\n"
    "                    a[2 * b + 1][2] = mxw_mul(mxw_pair(r0.w, sh), f0);\n"
    "                    a[2 * b + 1][3] = mxw_mul(mxw_pair(r1.w, sh), f1);\n"
    "                    if (big) { /* scale bytes above 128: the second factor */\n"
    "                        const u32 g0 = mxw_f2(b ? e01 : e00), g1 = mxw_f2(b ? e11 : e10);\n"
    "#pragma unroll\n"
    "                        for (int j = 2 * b; j < 2 * b + 2; j++) {\n"
    "                            a[j][0] = mxw_mul(a[j][0], g0);\n"
    "                            a[j][1] = mxw_mul(a[j][1], g1);\n"
    "                            a[j][2] = mxw_mul(a[j][2], g0);\n"
    "                            a[j][3] = mxw_mul(a[j][3], g1);\n"
    "                        }\n"
    "                    }\n"
    "                }\n"
    "            };\n"
    "            /* stage kt from `cur` (built); the next stage into `nxt` while its wgmmas run */\n"
    "            auto step = [&](int kt, u32 (*cur)[4], u32 (*nxt)[4]) {\n"
    "                const int sa = s;\n"
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n"
    "                const u64 d = qcp_desc(base + sa * STAGE);\n"
    "                qcp_fence();\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < 4; j++) mxw_wgmma<BM>(acc, cur[j], d + 2 * j, kt > 0 || j > 0);\n"
    "                qcp_commit();\n"
    "                if (kt + 1 < kt_n) {\n"
    "                    qcp_wait(full + 8 * s, ph);\n"
    "                    build(s, kt + 1, nxt);\n"
    "                }\n"
    "                qcp_wg_wait<0>();\n"
    "                if (lane == 0) qcp_arrive(empty + 8 * sa);\n"
    "            };\n"
    "            u32 ra[4][4], rb[4][4];\n"
    "            qcp_wait(full + 8 * s, ph);\n"
    "            build(s, 0, ra);\n"
    "            for (int kt = 0; kt < kt_n; kt += 2) {\n"
    "                step(kt, ra, rb);\n"
    "                if (kt + 1 >= kt_n) break;\n"
    "                step(kt + 1, rb, ra);\n"
    "            }\n"
    "            /* accumulator i: W row rl (+8 for i & 2), x row 8 (i / 4) + 2 t + (i & 1) */\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < BM / 2; i++) {\n"
    "                const ll r = m0 + 8 * (i >> 2) + 2 * t + (i & 1), cn = n0 + rl + ((i & 2) ? 8 : 0);\n"
    "                if (r < m && cn < n) y[r * n + cn] = acc[i];\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "#undef MXW_SETUP\n"
    "}\n"
    "/* x is read only through its tensor map (built by the host from the same pointer) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_mxfp4_wgmma(const unsigned short *x, const u8 *q,\n"
    "        const u8 *sc, float *y, ll m, ll n, ll k, const __grid_constant__ QcTmap tmx) {\n"
    "    extern __shared__ __align__(1024) unsigned char smem[];\n"
    "    __shared__ __align__(8) u64 bars[2 * MXW_ST64];\n"
    "    (void)x;\n"
    "    if (m <= 0 || n <= 0 || k <= 0 || (k & 63)) return; /* eligibility refuses these */\n"
    "    /* the tile height the host chose (mxw_plan), told by the ring size it launched with */\n"
    "    u32 dsm;\n"
    "    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(dsm));\n"
    "    if (dsm == mxw_ring<256, MXW_ST256>()) mxw_gemm<256, MXW_ST256>(&tmx, q, sc, y, m, n, k, smem, bars);\n"
    "    else if (dsm == mxw_ring<128, MXW_ST128>()) mxw_gemm<128, MXW_ST128>(&tmx, q, sc, y, m, n, k, smem, bars);\n"
    "    else if (dsm == mxw_ring<64, MXW_ST64>()) mxw_gemm<64, MXW_ST64>(&tmx, q, sc, y, m, n, k, smem, bars);\n"
    "}\n";

/* The launch: BM x rows per tile (wgmma N) among 64, 128, 256, the device told by the ring size (mxw_ring).
 * Wider tiles decode each A fragment for more x rows (the consumers' instruction stream is the cost that
 * grows with W), narrower ones make more tiles: the pick minimises waves x per-tile cost, a tile of BM rows
 * costing BM x (1 + MXW_FIXED / BM) (MXW_FIXED: the decode and pipeline work that does not grow with BM, in x
 * rows).  m <= 64 always takes 64.  QC_MXW_BM=64|128|256 forces it (A/B runs on the device). */
#define MXW_FIXED 128
static int64_t mxw_ring_bytes(int64_t bm) {
    int64_t st = bm == 256 ? MXW_ST256 : bm == 128 ? MXW_ST128 : MXW_ST64;
    return st * ((bm * 128 + 128 * 32 + 128 * 4 + 1023) / 1024 * 1024) + 1024;
}
static int64_t mxw_bm(int64_t m, int64_t n) {
    const char *e = getenv("QC_MXW_BM");
    if (e && (!strcmp(e, "64") || !strcmp(e, "128") || !strcmp(e, "256"))) return atoi(e);
    if (m <= 64) return 64;
    int64_t best = 0, pick = 128, tn = (n + 127) / 128;
    for (int64_t bm = 128; bm <= 256; bm *= 2) {
        int64_t tiles = (m + bm - 1) / bm * tn, waves = (tiles + MXW_SMS - 1) / MXW_SMS, cost = waves * (bm + MXW_FIXED);
        if (bm == 128 || cost < best) best = cost, pick = bm;
    }
    return pick;
}
static void mxw_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m <= 0 || p->n <= 0) return;
    int64_t bm = mxw_bm(p->m, p->n), tiles = ((p->m + bm - 1) / bm) * ((p->n + 127) / 128);
    d->grid[0] = (uint32_t)(tiles < MXW_SMS ? tiles : MXW_SMS);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = MXW_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)mxw_ring_bytes(bm);
}

static int mxw_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 64) {
        mxfp4_why(why, "align_k",
                  "mxfp4.wgmma: k = %lld is not a positive multiple of 64 (two scale blocks a stage; "
                  "mxfp4.linear_mma takes any multiple of 32)",
                  (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || p->n > (1ll << 31) - 128 || p->k > (1ll << 31) - 64) {
        mxfp4_why(why, "shape", "mxfp4.wgmma: n = %lld, k = %lld: the row clamps and TMA coordinates are 32-bit",
                  (long long)p->n, (long long)p->k);
        return 0;
    }
    if (p->m < 1 || p->m > (1ll << 31) - 128) {
        mxfp4_why(why, "m_range", "mxfp4.wgmma takes 1 <= m < 2^31 - 128 (32-bit TMA row coordinates), m = %lld",
                  (long long)p->m);
        return 0;
    }
    return 1;
}

/* x in boxes of 64 rows x 64 k (128 bytes: the 128-byte swizzle span); a 128-row tile takes two */
static const qc_tensor_map_spec mxw_maps[] = {
    {"x.bf16", QC_DT_BF16, "m", "k", 64, 64, 128},
};

qc_status mxfp4_wgmma_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void)) {
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .id = "mxfp4.wgmma",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 17, /* the GEMVs take m <= 16 */
        .m_max = (1ll << 31) - 128,
        .arch = {90, 90}, /* sm_90a only: wgmma and setmaxnreg */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref,
        .cuda_source = MXW_SRC,
        .cuda_entry = "qc_mxfp4_wgmma",
        .launch_dims = mxw_dims,
        .eligible = mxw_eligible,
        .n_tensor_maps = sizeof mxw_maps / sizeof mxw_maps[0],
        .tensor_maps = mxw_maps,
    };
    return api->register_kernel(host, &d);
}
