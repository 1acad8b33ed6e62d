/* w4a16_wgmma.c - the Hopper (sm_90a) w4a16 prefill GEMM: TMA x tiles, int4 dequantized into wgmma A registers. */
#include <stdlib.h>
#include <string.h>

#include "../common/qc_env_opts.h"
#include "../common/qc_tma_pipe_src.h"
#include "../common/qc_wgmma_ra_src.h"
#include "w4a16_impl.h"

qc_status w4_register_wgmma_kernels(const qc_host_api *api, qc_host *host);

/*
 * y[m,n] = x[m,k] . W[n,k]^T with x bf16 ("x.bf16"), W in pack_version 2
 * (row-major words of 8 codes, code 2p at bits 4p and 2p + 1 at bits
 * 16 + 4p; per-row group scales), f32 out.  Computed transposed, y^T =
 * W x^T, so that the weight is wgmma's A operand, which may come from
 * registers: each consumer thread turns its rows' int4 codes straight into
 * the bf16 A fragment (codes (2t, 2t+1) and (2t+8, 2t+9) of rows g and g+8
 * of its warp's 16 rows, the layout of mma.sync's A), and x^T is the B
 * operand, K-major in shared memory exactly as TMA's 128-byte swizzle puts
 * x's rows (the same descriptor as bf16.linear_wgmma's W).  No dequantized
 * weight is ever stored, not even to shared memory.
 *
 * Exactness as in w4a16_cuda.c: A holds q - z (exact in bf16) and wgmma
 * sums x (q - z) for one group into `part` (f32); the CUDA cores then add
 * s * part into `acc` (two-level accumulation, one promotion per group, or
 * per 64-k block when the block is all a warpgroup sees of a group).  In the
 * transposed accumulator a thread holds only two W rows (g and g+8 of its
 * warp), so a promotion needs two scales.
 *
 * Block: 384 threads, persistent (at most 132 blocks, the H200's SMs).
 * Warpgroup 0 is the producer (setmaxnreg 56): thread 0 issues the TMA
 * boxes of x (64 rows x 64 k each, 1 or 2 per stage), all 128 threads copy
 * the stage's packed rows (32 bytes a row, cp.async 16 B, halves swapped on
 * every other 4-row group so the consumers' 16-byte loads hit distinct
 * banks) and the 4-byte words holding each row's scale (and zero) of the
 * groups the stage touches; the stage's "full" mbarrier completes on the
 * TMA bytes plus 128 cp.async arrivals.  Warpgroups 1 and 2 consume
 * (setmaxnreg 224).  Tiles (w4w_cfg, kept in step with the host): BM = 128
 * x rows when m > 64, else 64 (wgmma N); 128 W rows, each consumer owning
 * 64 (wgmma M), unless such tiles would not fill the 132 SMs: then 64 W
 * rows, the consumers taking the even and odd 64-k blocks and meeting in
 * shared memory at the end (twice the blocks; for m <= 64 the weights are
 * what must stream, from as many SMs as possible).  The split is kept for
 * when it is needed: per k a tile reads 2 BM bytes of x (from L2) for
 * NT / 2 bytes of W, so narrower tiles read x more often.  10 stages at
 * BM 128, 12 or 16 at BM 64.  Groups 32 and 64, each 64-k block: wait for
 * the stage, build the 4 A fragments one k16 step at a time (wgmma.fence,
 * wgmma each), then wgmma.wait 0, release the stage, promote at a group's
 * end; the other consumer's wgmmas keep the tensor cores busy meanwhile.
 * Group 128 (W4W_PF, the default): a block's 4 fragments are built from two
 * 16-byte loads a row and go after one fence, and the next group's (K
 * split: the consumer's next block's) fragments are built before this
 * group's wgmmas are waited for, so the promotion is followed at once by
 * wgmmas instead of a load-and-dequantize chain (H200, session 8: with the
 * descriptor built once per stage and pack_version 2, 4096^3 went 336 ->
 * 243 us; the consumers' instruction stream was the limit).
 * Per stage: x (BM x 64 bf16), W (NT x 32 B), scale and zero words
 * (2 groups x NT x 4 B each).  Rows past n are clamped to n - 1 (never
 * stored); x rows past m read as zero (TMA) and x boxes wholly past m are
 * not loaded (those columns of y^T are not stored either).
 *
 * Split-K across blocks (gridDim.y > 1; the host's w4w_splits decides, the
 * device only reads gridDim.y): when even the K-split tiles leave SMs idle
 * (o and down at m <= 128 on Llama-3-8B shapes), blockIdx.y takes whole
 * 128-k pairs [kb, ke) of every tile its blockIdx.x walks.  Each split's
 * sums go to its own slot of the kernel's workspace ("work",
 * w4w_workspace: 256 counter words, then the slots); the last split of a
 * tile to arrive (an atomic counter per tile) adds the slots in split
 * order, so the result does not depend on which one is last, stores y and
 * puts the counter back to zero.  No block waits for another.
 *
 * Takes sym and asym, groups 32, 64 and 128, k a multiple of 32 and of the
 * group, n a multiple of 8.  fmin (w = d q + m) would need the group sums
 * of x per column as well; it is refused ("scheme") and w4a16.mma_fmin runs.
 *
 * The mbarrier / TMA / cp.async helpers (qcp_*) come from
 * plugins/common/qc_tma_pipe_src.h, shared with mxfp4.wgmma.
 */

#define W4W_SMS 132
#define W4W_THREADS 384
/* stages of the 128-x-row tiles: 10 x 22 KiB (K split: 10 x 19 KiB + its 32 KiB meeting place) fit the 227 KiB */
#define W4W_ST128 10
#define W4W_STR_(x) #x
#define W4W_STR(x) W4W_STR_(x)

#define W4W_SRC_BODY                                                                                               \
    "typedef unsigned int u32;\n"                                                                                  \
    "typedef unsigned short u16;\n"                                                                                \
    "typedef unsigned char u8;\n"                                                                                  \
    "typedef long long ll;\n"                                                                                      \
    "typedef unsigned long long u64;\n"                                                                            \
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"                                                           \
    "#define W4_SYM 1\n"                                                                                           \
    "#define W4_ASYM 2\n"                                                                                          \
    "#define W4W_SMS 132\n"                                                                                        \
    "#define W4W_ST128 " W4W_STR(W4W_ST128) "\n"                                                                 \
    "#define W4_ONES 0x3F803F80u /* bf16x2 (1, 1) */\n"                                                            \
    "#define W4_NEG136 0xC308C308u /* bf16x2 (-136, -136): 128 + z for z = 8 */\n"                                 \
    "/* x rows per tile 128 (m > 64) or 64; the consumers split K when 128-W-row tiles would not fill the SMs:\n"   \
    "   0: 128 W rows x 128, 1: 64 x 128 K split, 2: 128 x 64, 3: 64 x 64 K split */\n"                          \
    "__device__ __forceinline__ int w4w_cfg(ll m, ll n) {\n"                                                       \
    "    const ll bm = m <= 64 ? 64 : 128;\n"                                                                      \
    "    return (bm == 64 ? 2 : 0) + (((m + bm - 1) / bm) * ((n + 127) / 128) < W4W_SMS ? 1 : 0);\n"              \
    "}\n"                                                                                                          \
    "__device__ __forceinline__ float w4w_h2f(u32 h) {\n"                                                          \
    "    float f;\n"                                                                                               \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((u16)h));\n"                                              \
    "    return f;\n"                                                                                              \
    "}\n"                                                                                                          \
    "/* bf16x2 -(128 + z) in both halves */\n"                                                                     \
    "__device__ __forceinline__ u32 w4w_negz(u32 z) { return (0xC300u | z) * 0x10001u; }\n"                         \
    "#ifndef W4W_PF /* 1: group 128's loop with the next block prepared ahead; 0: the block loop below */\n"     \
    "#define W4W_PF 1\n"                                                                                          \
    "#endif\n"                                                                                                    \
    "/* nibbles t and t + 4 of w (pack_version 2: codes 2t and 2t + 1) give the bf16x2 pair (q(2t) - z, q(2t+1) - z):\n" \
    "   w >> 4t puts them at bits 0-3 and 16-19, one lop3 (a & b) | c keeps them under 0x4300 (each 128 + q: not an\n" \
    "   and and an or, as ptxas makes of the C expression with two immediates), one bf16x2 fma subtracts 128 + z */\n" \
    "__device__ __forceinline__ u32 w4w_deq(u32 w, u32 sh, u32 negz) {\n"                                          \
    "    u32 v, d;\n"                                                                                              \
    "    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(v) : \"r\"(w >> sh), \"r\"(0x000F000Fu), \"r\"(0x43004300u));\n" \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(v), \"r\"(W4_ONES), \"r\"(negz));\n"             \
    "    return d;\n"                                                                                              \
    "}\n"

/* wgmma with A from registers: D[64 x N] (+)= A[64 x 16] B[16 x N], B K-major in shared memory */
#define W4W_SRC_WGMMA \
    QC_WGMMA_RA_SRC \
    "template <int N> __device__ __forceinline__ void w4w_wgmma(float *d, const u32 *a, u64 db, int scale_d) {\n" \
    "    if constexpr (N == 128) qc_wgmma_ra128<0>(d, a, db, scale_d);\n"                                          \
    "    else qc_wgmma_ra64<0>(d, a, db, scale_d);\n"                                                              \
    "}\n"
#define W4W_SRC_GEMM \
    "/* S scheme, BM x rows per tile (wgmma N), KS 1 or 2 (K split over the consumers), ST stages, GS = group / 16 */\n" \
    "template <int S, int BM, int KS, int ST, int GS>\n" \
    "__device__ __forceinline__ void w4w_gemm(const QcTmap *tmx, const u8 *q, const u16 *sc, const u8 *zp, float *y,\n" \
    "                                         ll m, ll n, ll k, unsigned char *smem, u64 *bars, float *work) {\n" \
    "    constexpr int NT = 128 / KS;                     /* W rows per tile */\n" \
    "    constexpr int XB = BM * 128, WB = NT * 32, MB = 2 * NT * 4;\n" \
    "    constexpr int STAGE = (XB + WB + 2 * MB + 1023) / 1024 * 1024;\n" \
    "    constexpr int GPS = GS == 2 ? 2 : 1;             /* groups in a stage's 64 k */\n" \
    "    const int tid = threadIdx.x, wg = tid >> 7;\n" \
    "    if (tid == 0) {\n" \
    "        const u32 full = qcp_smem(bars), empty = full + 8 * ST;\n" \
    "        for (int s = 0; s < ST; s++) {\n" \
    "            qcp_mbar_init(full + 8 * s, 129);            /* thread 0's expect_tx + 128 cp.async arrivals */\n" \
    "            qcp_mbar_init(empty + 8 * s, 4 * (3 - KS));  /* the consumer warps that read the stage */\n" \
    "        }\n" \
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n" \
    "    }\n" \
    "    __syncthreads();\n" \
    "/* what both roles need, computed after setmaxnreg so that nothing lives across it (ptxas would spill it) */\n" \
    "#define W4W_SETUP                                                                                          \\\n" \
    "    const u32 sbase = qcp_smem(smem), base = (sbase + 1023u) & ~1023u; /* the swizzle repeats every 1 KiB */ \\\n" \
    "    unsigned char *al = smem + (base - sbase);                                                             \\\n" \
    "    const u32 full = qcp_smem(bars), empty = full + 8 * ST;                                                \\\n" \
    "    const ll tiles_m = (m + BM - 1) / BM, tiles_n = (n + NT - 1) / NT, tiles = tiles_m * tiles_n;          \\\n" \
    "    const int kt_n = (int)((k + 63) / 64);                                                                 \\\n" \
    "    const ll ng = k / (16 * GS), kh = k / 2;                                                               \\\n" \
    "    /* split-K over blocks (gridDim.y > 1): this block's 64-k blocks [kb, ke), whole 128-k pairs */          \\\n" \
    "    const int kpr = (kt_n + 1) / 2, nsp_ = work ? (int)gridDim.y : 1, spl_ = work ? (int)blockIdx.y : 0;       \\\n" \
    "    const int kb = KS == 1 ? 0 : 2 * (int)((ll)kpr * spl_ / nsp_);                                         \\\n" \
    "    const int ke = KS == 1 ? kt_n : min(kt_n, 2 * (int)((ll)kpr * (spl_ + 1) / nsp_));                      \\\n" \
    "    (void)al, (void)kh, (void)kb, (void)ke;\n" \
    "    if (wg == 0) {\n" \
    "        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 56;\\n\" ::: \"memory\");\n" \
    "        W4W_SETUP\n" \
    "        const int pt = tid;\n" \
    "        if (pt == 0) asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((u64)tmx) : \"memory\");\n" \
    "        int s = 0;\n" \
    "        u32 ph = 0;\n" \
    "        for (ll t = blockIdx.x; t < tiles; t += gridDim.x) {\n" \
    "            ll tm, tn;\n" \
    "            qcp_tile(t, tiles_m, tiles_n, &tm, &tn);\n" \
    "            const int m0 = (int)(tm * BM);\n" \
    "            const ll n0 = tn * NT;\n" \
    "            const int nb = BM == 128 && m0 + 64 < m ? 2 : 1; /* x boxes of 64 rows not wholly past m */\n" \
    "            for (int kt = kb; kt < ke; kt++) {\n" \
    "                qcp_wait(empty + 8 * s, ph ^ 1u); /* a fresh barrier passes parity 1 at once */\n" \
    "                const u32 sx = base + s * STAGE, sw = sx + XB, ss = sw + WB, sz = ss + MB, fb = full + 8 * s;\n" \
    "                if (pt == 0) {\n" \
    "                    qcp_expect_tx(fb, nb * 8192u);\n" \
    "                    for (int b = 0; b < nb; b++) qcp_tma2d(sx + b * 8192, tmx, kt * 64, m0 + 64 * b, fb);\n" \
    "                }\n" \
    "#pragma unroll\n" \
    "                for (int i = 0; i < 2 * NT / 128; i++) { /* 16-byte halves of the stage's W rows */\n" \
    "                    const int c = pt + 128 * i, row = c >> 1, h = c & 1;\n" \
    "                    if ((ll)kt * 64 + 32 * h < k) { /* a half past k (k % 64 == 32) is never read */\n" \
    "                        const ll r = n0 + row < n ? n0 + row : n - 1;\n" \
    "                        qcp_cp16(sw + row * 32 + 16 * (h ^ ((row >> 2) & 1)), q + r * kh + kt * 32 + 16 * h);\n" \
    "                    }\n" \
    "                }\n" \
    "                if (pt < NT) { /* the aligned words holding each row's scale (and zero) */\n" \
    "                    const ll r = n0 + pt < n ? n0 + pt : n - 1;\n" \
    "#pragma unroll\n" \
    "                    for (int gq = 0; gq < GPS; gq++) {\n" \
    "                        const ll gi = GS == 2 ? 2 * (ll)kt + gq : (ll)kt * 4 / GS;\n" \
    "                        if (gi < ng) {\n" \
    "                            const ll e = r * ng + gi;\n" \
    "                            qcp_cp4(ss + (gq * NT + pt) * 4, sc + (e & ~1ll));\n" \
    "                            if (S == W4_ASYM) qcp_cp4(sz + (gq * NT + pt) * 4, zp + (e & ~3ll));\n" \
    "                        }\n" \
    "                    }\n" \
    "                }\n" \
    "                qcp_cp_arrive(fb);\n" \
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "            }\n" \
    "        }\n" \
    "    } else {\n" \
    "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 224;\\n\" ::: \"memory\");\n" \
    "        W4W_SETUP\n" \
    "        const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;\n" \
    "        const int rl = (KS == 1 ? 64 * c : 0) + 16 * warp + g; /* tile row of A row g; A row g + 8 is rl + 8 */\n" \
    "        const int swz = (rl >> 2) & 1;                        /* the same for rl + 8 */\n" \
    "        const u32 sel = 4u * (u32)t; /* the shift that brings lane t's pair down (w4w_deq) */\n" \
    "        float acc[BM / 2], part[BM / 2];\n" \
    "        int s = 0;\n" \
    "        u32 ph = 0;\n" \
    "        for (ll tt = blockIdx.x; tt < tiles; tt += gridDim.x) {\n" \
    "            ll tm, tn;\n" \
    "            qcp_tile(tt, tiles_m, tiles_n, &tm, &tn);\n" \
    "            const ll m0 = tm * BM, n0 = tn * NT;\n" \
    "            const ll rc0 = n0 + rl < n ? n0 + rl : n - 1, rc1 = n0 + rl + 8 < n ? n0 + rl + 8 : n - 1;\n" \
    "#pragma unroll\n" \
    "            for (int i = 0; i < BM / 2; i++) acc[i] = 0.f;\n" \
    "            /* W4W_PF (default 1), g128: without the K split a group is blocks 2i and 2i + 1; with it each consumer takes\n" \
    "               every other block, each block its own promotion.  Each block's four A fragments\n" \
    "               come from two 16-byte loads a row (two k16 steps each) and go to the tensor cores after one wgmma.fence; the\n" \
    "               next group's first block is waited for, loaded and dequantized before this group's wgmmas are waited for, so\n" \
    "               that after the promotion its wgmmas issue at once instead of after the load-and-dequantize chain (the\n" \
    "               consumers' gap at every group end).  Two register sets take turns (the loop is unrolled by two groups). */\n" \
    "            if constexpr (W4W_PF && GS == 8) {\n" \
    "                /* scale and zero of this lane's rows for block kt's group, from stage st's words */\n" \
    "                auto scales = [&](int st, int kt, float &f0, float &f1, u32 &q0, u32 &q1) {\n" \
    "                    const unsigned char *ms = al + st * STAGE + XB + WB, *zs = ms + MB;\n" \
    "                    const ll gi = (ll)kt / 2, e0 = rc0 * ng + gi, e1 = rc1 * ng + gi;\n" \
    "                    const u32 a = *(const u32 *)(ms + rl * 4), b = *(const u32 *)(ms + (rl + 8) * 4);\n" \
    "                    f0 = w4w_h2f((e0 & 1) ? a >> 16 : a);\n" \
    "                    f1 = w4w_h2f((e1 & 1) ? b >> 16 : b);\n" \
    "                    if (S == W4_ASYM) {\n" \
    "                        const u32 za = *(const u32 *)(zs + rl * 4), zb = *(const u32 *)(zs + (rl + 8) * 4);\n" \
    "                        q0 = w4w_negz((za >> (8 * (int)(e0 & 3))) & 15u);\n" \
    "                        q1 = w4w_negz((zb >> (8 * (int)(e1 & 3))) & 15u);\n" \
    "                    } else {\n" \
    "                        q0 = q1 = W4_NEG136;\n" \
    "                    }\n" \
    "                };\n" \
    "                /* the four A fragments of stage st's block */\n" \
    "                auto build = [&](int st, u32 q0, u32 q1, u32 (*a)[4]) {\n" \
    "                    const unsigned char *ws = al + st * STAGE + XB;\n" \
    "#pragma unroll\n" \
    "                    for (int h = 0; h < 2; h++) {\n" \
    "                        const uint4 r0 = *(const uint4 *)(ws + rl * 32 + 16 * (h ^ swz));\n" \
    "                        const uint4 r1 = *(const uint4 *)(ws + (rl + 8) * 32 + 16 * (h ^ swz));\n" \
    "                        a[2 * h][0] = w4w_deq(r0.x, sel, q0);\n" \
    "                        a[2 * h][1] = w4w_deq(r1.x, sel, q1);\n" \
    "                        a[2 * h][2] = w4w_deq(r0.y, sel, q0);\n" \
    "                        a[2 * h][3] = w4w_deq(r1.y, sel, q1);\n" \
    "                        a[2 * h + 1][0] = w4w_deq(r0.z, sel, q0);\n" \
    "                        a[2 * h + 1][1] = w4w_deq(r1.z, sel, q1);\n" \
    "                        a[2 * h + 1][2] = w4w_deq(r0.w, sel, q0);\n" \
    "                        a[2 * h + 1][3] = w4w_deq(r1.w, sel, q1);\n" \
    "                    }\n" \
    "                };\n" \
    "                auto issue = [&](int st, const u32 (*a)[4], bool first) {\n" \
    "                    const u64 d = qcp_desc(base + st * STAGE);\n" \
    "                    qcp_fence();\n" \
    "#pragma unroll\n" \
    "                    for (int j = 0; j < 4; j++) w4w_wgmma<BM>(part, a[j], d + 2 * j, !first || j > 0);\n" \
    "                };\n" \
    "                /* commit this consumer's wgmmas, build its next block (kt + 2) into `nxt` while they run, wait */\n" \
    "                auto ahead = [&](int kt, u32 (*nxt)[4], float &h0, float &h1, u32 &q0, u32 &q1) {\n" \
    "                    qcp_commit();\n" \
    "                    if (kt + 2 < ke) {\n" \
    "                        qcp_wait(full + 8 * s, ph);\n" \
    "                        scales(s, kt + 2, h0, h1, q0, q1);\n" \
    "                        build(s, q0, q1, nxt);\n" \
    "                    }\n" \
    "                    qcp_wg_wait<0>();\n" \
    "                };\n" \
    "                auto promote = [&](float f0, float f1) {\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) acc[i] = fmaf((i & 2) ? f1 : f0, part[i], acc[i]);\n" \
    "                };\n" \
    "                /* group kt / 2 from `cur` (built, with its scales f and zeros z); the next group's first block into `nxt` */\n" \
    "                auto group = [&](int kt, u32 (*cur)[4], float f0, float f1, u32 y0, u32 y1, u32 (*nxt)[4], float &h0,\n" \
    "                                 float &h1, u32 &q0, u32 &q1) {\n" \
    "                    const int sa = s;\n" \
    "                    if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "                    issue(sa, cur, true);\n" \
    "                    const int sb = s;\n" \
    "                    const u32 pb = ph;\n" \
    "                    if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "                    u32 ab[4][4];\n" \
    "                    qcp_wait(full + 8 * sb, pb);\n" \
    "                    build(sb, y0, y1, ab);\n" \
    "                    issue(sb, ab, false);\n" \
    "                    ahead(kt, nxt, h0, h1, q0, q1);\n" \
    "                    if (lane == 0) {\n" \
    "                        qcp_arrive(empty + 8 * sa);\n" \
    "                        qcp_arrive(empty + 8 * sb);\n" \
    "                    }\n" \
    "                    promote(f0, f1);\n" \
    "                };\n" \
    "                /* K split: this consumer's block kt (kt % 2 == c) from `cur`, its next one (kt + 2) into `nxt` */\n" \
    "                auto half = [&](int kt, u32 (*cur)[4], float f0, float f1, u32 (*nxt)[4], float &h0, float &h1, u32 &q0,\n" \
    "                                u32 &q1) {\n" \
    "                    const int sa = s;\n" \
    "                    for (int i = 0; i < 2; i++)\n" \
    "                        if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "                    issue(sa, cur, true);\n" \
    "                    ahead(kt, nxt, h0, h1, q0, q1);\n" \
    "                    if (lane == 0) qcp_arrive(empty + 8 * sa);\n" \
    "                    promote(f0, f1);\n" \
    "                };\n" \
    "                u32 ra[4][4], rb[4][4];\n" \
    "                float f0, f1, h0 = 0.f, h1 = 0.f;\n" \
    "                u32 z0, z1, y0 = W4_NEG136, y1 = W4_NEG136;\n" \
    "                const int s0 = s;\n" \
    "                const u32 p0 = ph;\n" \
    "                if (KS == 2 && c == 1) {\n" \
    "                    if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "                }\n" \
    "                const int kt0 = kb + (KS == 2 ? c : 0);\n" \
    "                if (kt0 < ke) {\n" \
    "                    qcp_wait(full + 8 * s, ph);\n" \
    "                    scales(s, kt0, f0, f1, z0, z1);\n" \
    "                    build(s, z0, z1, ra);\n" \
    "                }\n" \
    "                for (int kt = kt0; kt < ke; kt += 4) {\n" \
    "                    if constexpr (KS == 1) {\n" \
    "                        group(kt, ra, f0, f1, z0, z1, rb, h0, h1, y0, y1);\n" \
    "                        if (kt + 2 >= ke) break;\n" \
    "                        group(kt + 2, rb, h0, h1, y0, y1, ra, f0, f1, z0, z1);\n" \
    "                    } else {\n" \
    "                        half(kt, ra, f0, f1, rb, h0, h1, y0, y1);\n" \
    "                        if (kt + 2 >= ke) break;\n" \
    "                        half(kt + 2, rb, h0, h1, ra, f0, f1, z0, z1);\n" \
    "                    }\n" \
    "                }\n" \
    "                /* the ring position of the next tile's first block, whichever blocks this consumer took */\n" \
    "                s = (int)((s0 + ke - kb) % ST);\n" \
    "                ph = p0 ^ (u32)(((s0 + ke - kb) / ST) & 1);\n" \
    "            } else {\n" \
    "            /* g128 without the K split: a group's two blocks in one unrolled pass, so that the first block's\n" \
    "               wgmmas (and their A registers) stay in flight while the second block is built */\n" \
    "            constexpr int KPI = GS == 8 && KS == 1 ? 2 : 1;\n" \
    "            int sp = 0;\n" \
    "            for (int kt0 = kb; kt0 < ke; kt0 += KPI)\n" \
    "#pragma unroll\n" \
    "            for (int u = 0; u < KPI; u++) {\n" \
    "                const int kt = kt0 + u; /* kt_n is even when KPI is 2 (k % 128 == 0) */\n" \
    "                if (KS == 1 || (kt & 1) == c) {\n" \
    "                    qcp_wait(full + 8 * s, ph);\n" \
    "                    const u32 sx = base + s * STAGE;\n" \
    "                    /* the stage's descriptor; k16 step j starts 32 bytes on, + 2 in its address field (sx is\n" \
    "                       1 KiB-aligned: no carry), so no mask and shift per step */\n" \
    "                    const u64 dx = qcp_desc(sx);\n" \
    "                    const unsigned char *ws = al + s * STAGE + XB, *ms = ws + WB, *zs = ms + MB;\n" \
    "                    float s0[GPS], s1[GPS];\n" \
    "                    u32 z0[GPS], z1[GPS];\n" \
    "#pragma unroll\n" \
    "                    for (int gq = 0; gq < GPS; gq++) {\n" \
    "                        const ll gi = GS == 2 ? 2 * (ll)kt + gq : (ll)kt * 4 / GS;\n" \
    "                        const ll e0 = rc0 * ng + gi, e1 = rc1 * ng + gi;\n" \
    "                        const u32 a = *(const u32 *)(ms + (gq * NT + rl) * 4), b = *(const u32 *)(ms + (gq * NT + rl + 8) * 4);\n" \
    "                        s0[gq] = w4w_h2f((e0 & 1) ? a >> 16 : a);\n" \
    "                        s1[gq] = w4w_h2f((e1 & 1) ? b >> 16 : b);\n" \
    "                        if (S == W4_ASYM) {\n" \
    "                            const u32 za = *(const u32 *)(zs + (gq * NT + rl) * 4), zb = *(const u32 *)(zs + (gq * NT + rl + 8) * 4);\n" \
    "                            z0[gq] = w4w_negz((za >> (8 * (int)(e0 & 3))) & 15u);\n" \
    "                            z1[gq] = w4w_negz((zb >> (8 * (int)(e1 & 3))) & 15u);\n" \
    "                        } else {\n" \
    "                            z0[gq] = z1[gq] = W4_NEG136;\n" \
    "                        }\n" \
    "                    }\n" \
    "                    /* GS 8 without the K split: one group over two blocks */\n" \
    "                    const bool first = KS == 2 || GS != 8 || (kt & 1) == 0, last = KS == 2 || GS != 8 || (kt & 1) == 1;\n" \
    "                    const bool half = GS == 2 && (ll)kt * 64 + 32 >= k; /* the K tail: only the block's first 32 k */\n" \
    "                    u32 a[4][4];\n" \
    "#pragma unroll\n" \
    "                    for (int j = 0; j < 4; j++) {\n" \
    "                        if (j == 2 && half) break;\n" \
    "                        /* A of k16 step j: words 2j and 2j + 1 (k 16j .. 16j + 15) of rows g and g + 8, built just\n" \
    "                           before its wgmma; each step's registers stay untouched until the wait */\n" \
    "                        const int off = 16 * ((j >> 1) ^ swz) + 8 * (j & 1), gq = GS == 2 ? j >> 1 : 0;\n" \
    "                        const uint2 r0 = *(const uint2 *)(ws + rl * 32 + off);\n" \
    "                        const uint2 r1 = *(const uint2 *)(ws + (rl + 8) * 32 + off);\n" \
    "                        a[j][0] = w4w_deq(r0.x, sel, z0[gq]);\n" \
    "                        a[j][1] = w4w_deq(r1.x, sel, z1[gq]);\n" \
    "                        a[j][2] = w4w_deq(r0.y, sel, z0[gq]);\n" \
    "                        a[j][3] = w4w_deq(r1.y, sel, z1[gq]);\n" \
    "                        qcp_fence();\n" \
    "                        w4w_wgmma<BM>(part, a[j], dx + 2 * j, GS == 2 ? (j & 1) : (j > 0 || !first));\n" \
    "                        if (GS == 2 && (j & 1)) { /* two groups per block: promote after each pair of steps */\n" \
    "                            qcp_commit();\n" \
    "                            qcp_wg_wait<0>();\n" \
    "#pragma unroll\n" \
    "                            for (int i = 0; i < BM / 2; i++) acc[i] = fmaf((i & 2) ? s1[j >> 1] : s0[j >> 1], part[i], acc[i]);\n" \
    "                        }\n" \
    "                    }\n" \
    "                    if (GS != 2) qcp_commit();\n" \
    "                    if (KPI == 2 && u == 0) {\n" \
    "                        sp = s; /* released with the pair's second block */\n" \
    "                    } else {\n" \
    "                        if (GS != 2) qcp_wg_wait<0>();\n" \
    "                        if (lane == 0) { /* the stage (stages) has been read */\n" \
    "                            qcp_arrive(empty + 8 * s);\n" \
    "                            if (KPI == 2) qcp_arrive(empty + 8 * sp);\n" \
    "                        }\n" \
    "                        if (GS != 2 && last) {\n" \
    "#pragma unroll\n" \
    "                            for (int i = 0; i < BM / 2; i++) acc[i] = fmaf((i & 2) ? s1[0] : s0[0], part[i], acc[i]);\n" \
    "                        }\n" \
    "                    }\n" \
    "                }\n" \
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "            }\n" \
    "            } /* W4W_PF */\n" \
    "            /* accumulator i: W row rl (+8 for i & 2), x row 8 (i / 4) + 2 t + (i & 1) */\n" \
    "            if (KS == 2) { /* the consumers' halves of K meet in shared memory */\n" \
    "                float *red = (float *)(al + ST * STAGE);\n" \
    "                const int ti = tid & 127;\n" \
    "                if (c == 1) {\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) red[i * 128 + ti] = acc[i];\n" \
    "                }\n" \
    "                qcp_bar_sync(1);\n" \
    "                if (c == 0) {\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) acc[i] += red[i * 128 + ti];\n" \
    "                }\n" \
    "                qcp_bar_sync(2);\n" \
    "            }\n" \
    "            if (KS == 1 || c == 0) {\n" \
    "                if (KS == 2 && gridDim.y > 1 && work) { /* (the host splits only the K-split configurations) */\n" \
    "                    const int nsp = (int)gridDim.y, spl = (int)blockIdx.y;\n" \
    "                    /* split-K: each split's sums to its slot of the workspace (after 256 words of per-tile\n" \
    "                       counters); the last of the tile's splits to arrive adds the slots in split order (the\n" \
    "                       same sum whichever is last), stores y and puts the counter back to zero */\n" \
    "                    __shared__ int w4w_last;\n" \
    "                    constexpr int NW = KS == 1 ? 256 : 128, SLOT = NW * (BM / 2);\n" \
    "                    const int wi = tid - 128;\n" \
    "                    float *tile_slots = work + 256 + tt * nsp * (ll)SLOT;\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) tile_slots[spl * (ll)SLOT + i * NW + wi] = acc[i];\n" \
    "                    __threadfence();\n" \
    "                    qcp_bar_n(3, NW);\n" \
    "                    if (wi == 0) w4w_last = atomicAdd((int *)work + tt, 1) == nsp - 1;\n" \
    "                    qcp_bar_n(3, NW);\n" \
    "                    if (!w4w_last) continue;\n" \
    "                    __threadfence();\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) acc[i] = __ldcg(tile_slots + i * NW + wi);\n" \
    "                    for (int j = 1; j < nsp; j++)\n" \
    "#pragma unroll\n" \
    "                        for (int i = 0; i < BM / 2; i++) acc[i] += __ldcg(tile_slots + j * (ll)SLOT + i * NW + wi);\n" \
    "                    if (wi == 0) ((int *)work)[tt] = 0;\n" \
    "                }\n" \
    "#pragma unroll\n" \
    "                for (int i = 0; i < BM / 2; i++) {\n" \
    "                    const ll r = m0 + 8 * (i >> 2) + 2 * t + (i & 1), cn = n0 + rl + ((i & 2) ? 8 : 0);\n" \
    "                    if (r < m && cn < n) y[r * n + cn] = acc[i];\n" \
    "                }\n" \
    "            }\n" \
    "        }\n" \
    "    }\n" \
    "#undef W4W_SETUP\n" \
    "}\n" \
    "template <int S>\n" \
    "__device__ __forceinline__ void w4w_go(const QcTmap *tmx, const u8 *q, const u16 *sc, const u8 *zp, float *y, ll m,\n" \
    "                                       ll n, ll k, ll gs, float *work) {\n" \
    "    extern __shared__ __align__(1024) unsigned char smem[];\n" \
    "    __shared__ __align__(8) u64 bars[2 * 16];\n" \
    "    if (m <= 0 || n <= 0 || k <= 0) return;\n" \
    "    if (!work && blockIdx.y > 0) return; /* no workspace: unsplit, blockIdx.y 0 takes all of K */\n" \
    "    switch (w4w_cfg(m, n) * 4 + (int)(gs >> 5)) { /* gs / 32: 1, 2 or 4 */\n" \
    "#define W4W_CASE(cfg, BM, KS, ST)                                                                                \\\n" \
    "    case cfg * 4 + 1: w4w_gemm<S, BM, KS, ST, 2>(tmx, q, sc, zp, y, m, n, k, smem, bars, work); break;               \\\n" \
    "    case cfg * 4 + 2: w4w_gemm<S, BM, KS, ST, 4>(tmx, q, sc, zp, y, m, n, k, smem, bars, work); break;               \\\n" \
    "    case cfg * 4 + 4: w4w_gemm<S, BM, KS, ST, 8>(tmx, q, sc, zp, y, m, n, k, smem, bars, work); break;\n" \
    "    W4W_CASE(0, 128, 1, W4W_ST128)\n" \
    "    W4W_CASE(1, 128, 2, W4W_ST128)\n" \
    "    W4W_CASE(2, 64, 1, 12)\n" \
    "    W4W_CASE(3, 64, 2, 16)\n" \
    "#undef W4W_CASE\n" \
    "    default: break; /* the host's eligibility refuses other groups */\n" \
    "    }\n" \
    "}\n"

static const char W4W_SRC_SYM[] =
    "/* qcore w4a16 Hopper GEMM (sym): y[m,n] = x[m,k] . W4[n,k]^T; TMA + wgmma, A dequantized in registers */\n"
    W4W_SRC_BODY QC_TMA_PIPE_SRC W4W_SRC_WGMMA W4W_SRC_GEMM
    "/* x is read only through its tensor map (built by the host from the same pointer) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_w4_wgmma_sym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        float *y, ll m, ll n, ll k, ll gs, float *work, const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    w4w_go<W4_SYM>(&tmx, q, s, 0, y, m, n, k, gs, work);\n"
    "}\n";

static const char W4W_SRC_ASYM[] =
    "/* qcore w4a16 Hopper GEMM (asym): y[m,n] = x[m,k] . W4[n,k]^T; TMA + wgmma, A dequantized in registers */\n"
    W4W_SRC_BODY QC_TMA_PIPE_SRC W4W_SRC_WGMMA W4W_SRC_GEMM
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_w4_wgmma_asym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u8 *z, float *y, ll m, ll n, ll k, ll gs, float *work, const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    w4w_go<W4_ASYM>(&tmx, q, s, z, y, m, n, k, gs, work);\n"
    "}\n";

/* The device's w4w_cfg and w4w_gemm's stage layout, for the launch; splits: blocks that share each tile's K
 * (gridDim.y, which the device reads: the rule lives only here), grid_x: blocks per split. */
typedef struct w4w_plan {
    int cfg, bm, ks, stages, splits;
    uint32_t smem;
    int64_t tiles, grid_x;
} w4w_plan;

/* Split-K across blocks: only the K-split configurations (tiles that do not fill the SMs), at most
 * W4W_SPLIT_MAX ways (QC_W4W_SPLIT=1..4 overrides it, for A/B runs), each split at least 4 groups of 128 k.
 * Time: the passes a block makes (ceil(tiles / blocks a split)) times a pass's cost, about 1400 k worth of
 * fixed cost (pipeline fill, epilogue, the partial sums' trip through L2) plus its k / splits (fitted to
 * the H200 at m = 64, s10: o 22.8 -> 16.2 us with 2 splits, down 65.3 -> 37.8; qkv's 96 tiles in 3 passes
 * of 4 splits took 26.0 against 23.2 unsplit, which this cost refuses); the fewest splits among equals. */
#define W4W_SPLIT_MAX 4
static int g_w4w_split_max = W4W_SPLIT_MAX;
static int w4w_splits(int64_t tiles, int64_t k) {
    int64_t pairs = (k + 127) / 128, best = 0;
    int pick = 1;
    for (int sp = 1; sp <= g_w4w_split_max; sp++) {
        if (sp > 1 && pairs / sp < 4) break;
        int64_t per = W4W_SMS / sp, passes = (tiles + per - 1) / per, cost = passes * (1400 + k / sp);
        if (sp == 1 || cost < best) best = cost, pick = sp;
    }
    return pick;
}
/* the workspace the splits use (any m): 256 counter words, then a slot of 128 threads x 64 sums per split
 * of each tile (tiles < W4W_SMS when splitting) */
#define W4W_WORK_BYTES (1024ull + (uint64_t)W4W_SPLIT_MAX * W4W_SMS * 128 * 64 * 4)
static uint64_t w4w_workspace(const qc_problem *p) {
    (void)p;
    return W4W_WORK_BYTES;
}

static void w4w_plan_of(int64_t m, int64_t n, int64_t k, w4w_plan *p) {
    memset(p, 0, sizeof *p);
    if (m <= 0 || n <= 0) return;
    int64_t bm = m <= 64 ? 64 : 128;
    p->cfg = (bm == 64 ? 2 : 0) + (((m + bm - 1) / bm) * ((n + 127) / 128) < W4W_SMS ? 1 : 0);
    static const int bms[4] = {128, 128, 64, 64}, kss[4] = {1, 2, 1, 2}, sts[4] = {W4W_ST128, W4W_ST128, 12, 16};
    p->bm = bms[p->cfg], p->ks = kss[p->cfg], p->stages = sts[p->cfg];
    uint32_t nt = 128u / (uint32_t)p->ks, xb = (uint32_t)p->bm * 128u, wb = nt * 32u, mb = 2u * nt * 4u;
    uint32_t stage = (xb + wb + 2u * mb + 1023u) / 1024u * 1024u;
    /* the ring, the K-split meeting place, slack to align the ring to 1024 B */
    p->smem = (uint32_t)p->stages * stage + (p->ks == 2 ? (uint32_t)p->bm * 256u : 0u) + 1024u;
    p->tiles = ((m + p->bm - 1) / p->bm) * ((n + nt - 1) / nt);
    p->splits = p->ks == 2 && p->tiles < W4W_SMS && k > 0 ? w4w_splits(p->tiles, k) : 1;
    int64_t per = W4W_SMS / p->splits;
    p->grid_x = p->tiles < per ? p->tiles : per;
}

static void w4w_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    w4w_plan pl;
    w4w_plan_of(p->m, p->n, p->k, &pl);
    d->grid[0] = (uint32_t)pl.grid_x;
    d->grid[1] = (uint32_t)pl.splits;
    d->grid[2] = 1;
    d->block[0] = W4W_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = pl.smem;
}

/* ---- C references: exactly each kernel's parameters, x as bf16 bits ---- */

static void w4w_ref_sym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                        int64_t n, int64_t k, int64_t group_size, void *work) {
    (void)work; /* the kernels' "work" is theirs alone: the references take it and leave it alone */
    w4_ref_bx(W4A16_SCHEME_SYM, 0, xb, qweight, scales, NULL, NULL, y, m, n, k, group_size);
}
static void w4w_ref_asym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                         float *y, int64_t m, int64_t n, int64_t k, int64_t group_size, void *work) {
    (void)work;
    w4_ref_bx(W4A16_SCHEME_ASYM, 0, xb, qweight, scales, zeros, NULL, y, m, n, k, group_size);
}

/* ---- eligibility ---- */

static int w4w_ok(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    /* scheme (fmin has its own GEMM), act order, group, and k a multiple of 32 and of g, n of 8, both below
     * 2^31 (the TMA coordinates and the row clamps) */
    if (!w4_gpu_takes(p, want, id, why)) return 0;
    if (p->m < 1 || p->m > (1ll << 31) - 128) {
        w4_why(why, "m_range", "%s takes 1 <= m < 2^31 - 128 (32-bit TMA row coordinates), batch has m = %lld", id,
               (long long)p->m);
        return 0;
    }
    return 1;
}

static int w4w_el_sym(const qc_problem *p, qc_reason *why) {
    return w4w_ok(p, W4A16_SCHEME_SYM, "w4a16.wgmma_sym", why);
}
static int w4w_el_asym(const qc_problem *p, qc_reason *why) {
    return w4w_ok(p, W4A16_SCHEME_ASYM, "w4a16.wgmma_asym", why);
}

/* ---- parameters, tensor map and registration ---- */

#define W4W_HEAD W4_GP_HEAD
#define W4W_TAIL W4_GP_TAIL, {"work", QC_PARAM_PTR}
static const qc_kernel_param w4w_p_sym[] = {W4W_HEAD, W4W_TAIL};
static const qc_kernel_param w4w_p_asym[] = {W4W_HEAD, {"w.zeros", QC_PARAM_PTR}, W4W_TAIL};

/* x in boxes of 64 rows x 64 k (128 bytes: the 128-byte swizzle span); a
 * 128-row tile takes two.  The packed weight has no I64 parameter for its
 * row length (k / 2 bytes), so it comes by cp.async instead. */
static const qc_tensor_map_spec w4w_maps[] = {
    {"x.bf16", QC_DT_BF16, "m", "k", 64, 64, 128},
};

/* QC_W4_WGMMA_OPTS="-DW4W_PF=0" (commas or spaces): extra NVRTC options for both kernels, for A/B runs on the
 * device without a rebuild; at most 8 options of up to 63 characters, each starting with -D (anything else is
 * ignored with a warning).  Read once per registration; the arrays live as long as the plugin. */
#define W4W_XOPTS 8
static char w4w_xbuf[W4W_XOPTS][QC_ENV_OPT_LEN];
static const char *w4w_xopts[W4W_XOPTS + 1];
static const char *const *w4w_extra_opts(void) {
    int n = qc_env_defines("w4a16", "QC_W4_WGMMA_OPTS", w4w_xbuf, W4W_XOPTS);
    for (int i = 0; i < n; i++) w4w_xopts[i] = w4w_xbuf[i];
    w4w_xopts[n] = NULL;
    return n ? w4w_xopts : NULL;
}

qc_status w4_register_wgmma_kernels(const qc_host_api *api, qc_host *host) {
    const char *const *xopts = w4w_extra_opts();
    g_w4w_split_max = qc_env_int("w4a16", "QC_W4W_SPLIT", 1, W4W_SPLIT_MAX, W4W_SPLIT_MAX);
    static const w4_sm90_row rows[] = {
        {"w4a16.wgmma_sym", "qc_w4_wgmma_sym", W4W_SRC_SYM, w4w_p_sym, sizeof w4w_p_sym / sizeof w4w_p_sym[0],
         (void (*)(void))w4w_ref_sym, w4w_el_sym},
        {"w4a16.wgmma_asym", "qc_w4_wgmma_asym", W4W_SRC_ASYM, w4w_p_asym, sizeof w4w_p_asym / sizeof w4w_p_asym[0],
         (void (*)(void))w4w_ref_asym, w4w_el_asym},
    };
    return w4_register_sm90(api, host, rows, sizeof rows / sizeof rows[0], w4w_dims, xopts, w4w_workspace);
}

qc_status w4_register_sm90(const qc_host_api *api, qc_host *host, const w4_sm90_row *rows, size_t n_rows,
                           void (*launch_dims)(const qc_problem *, qc_launch_dims *), const char *const *xopts,
                           uint64_t (*workspace_bytes)(const qc_problem *)) {
    for (size_t i = 0; i < n_rows; i++) {
        qc_kernel_desc d = {
            .struct_size = sizeof d,
            .id = rows[i].id,
            .format = "w4a16",
            .phases = QC_PHASE_ANY,
            .m_min = 17, /* the GEMVs take m <= 16 */
            .m_max = (1ll << 31) - 128,
            .arch = {90, 90}, /* sm_90a only: wgmma and setmaxnreg */
            .n_params = rows[i].n_params,
            .params = rows[i].params,
            .reference = rows[i].reference,
            .cuda_source = rows[i].source,
            .cuda_entry = rows[i].entry,
            .nvrtc_options = xopts,
            .launch_dims = launch_dims,
            .eligible = rows[i].eligible,
            .n_tensor_maps = sizeof w4w_maps / sizeof w4w_maps[0],
            .tensor_maps = w4w_maps,
            .workspace_bytes = workspace_bytes,
        };
        qc_status st = api->register_kernel(host, &d);
        if (st != QC_OK) return st;
    }
    return QC_OK;
}
