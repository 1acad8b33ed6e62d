/* w4a16_gemv_frag.c - the decode GEMVs with W as the mma A operand: nibbles into A fragments from global memory (gemv_frag, gemv1, gemv1_xr) or from a TMA ring (gemv1_tma). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../common/qc_env_opts.h"
#include "../common/qc_gemv1_plan.h"
#include "../common/qc_gemv1_xr_plan.h"
#include "../common/qc_tma_pipe_src.h"
#include "w4a16_cuda_src.h"
#include "w4a16_impl.h"

qc_status w4_register_frag_kernels(const qc_host_api *api, qc_host *host);

/*
 * w4a16.gemv_frag_sym: y[m,n] = x[m,k] . W[n,k]^T for 1 <= m <= 16, sym
 * scheme, groups 32/64/128, k % 128 == 0, x bf16 ("x.bf16"), W in
 * pack_version 2 (row-major words of 8 codes, code 2p at bits 4p and 2p + 1
 * at bits 16 + 4p of its word), f32 y.
 *
 * Computed transposed, y^T = W x^T, with mma.sync.m16n8k16 (bf16, f32
 * accumulation): A = 16 rows of W by 16 k, B = x^T (16 k by 8 x rows; two
 * mmas when m > 8).  PTX ISA "Matrix Fragments for mma.m16n8k16 with floating
 * point type": lane (g = lane >> 2, t = lane & 3) holds A registers
 * {a0,a1} row g cols 2t,2t+1; {a2,a3} row g+8 cols 2t,2t+1; {a4,a5} row g
 * cols 2t+8,2t+9; {a6,a7} row g+8 cols 2t+8,2t+9; B {b0,b1} k rows 2t,2t+1 of
 * column g, {b2,b3} k rows 2t+8,2t+9; D {c0,c1} row g cols 2t,2t+1, {c2,c3}
 * row g+8.  So a lane owns W rows g and g+8 of its 16-row tile (its scales
 * are its own: no shuffles) and the same k slots in A and B.
 *
 * The 16 k slots of one mma need not be 16 consecutive codes, only the same
 * codes in A and B.  (w >> 4s) & 0x000f000f | 0x43004300 is the bf16x2 pair
 * (128 + q_2s, 128 + q_2s+1), one bf16x2 fma by (1, -136) makes it (q - 8)
 * exactly.  With a word A of row g and B of row g+8 (same codes), two mmas:
 * h = 0 takes pairs s = 0 (slots 2t,2t+1) and s = 1 (slots 2t+8,2t+9), h = 1
 * takes s = 2 and s = 3.  x's B registers are the same codes: 8 bf16 of x
 * (one 16-byte load) are the pairs (e0,e1), (e2,e3), (e4,e5), (e6,e7) as
 * loaded.  Per word (8 weights): 3 shifts, 4 lop3, 4 bf16x2 fma = 11
 * instructions, 2 mmas (pack_version 1 needed 4 byte_perms of x as well).
 *
 * K goes in chunks of 128 codes (64 bytes a row).  Each mma must lie in one
 * group (the scale is applied per group), so within a chunk lane t's word
 * j (0..3) holds codes (j / GW) G + 8 GW t + 8 (j % GW) .. +7 with GW = G /
 * 32: one 16-byte load of the row at g128, two 8-byte loads at g64, four
 * 4-byte loads at g32 (a quad covers whole groups).  x's 16-byte loads
 * follow the same codes.
 *
 * Exactness as w4a16_cuda.c: the tensor cores sum x (q - 8) of one group in
 * f32 (products exact), then part * s is added into the f32 total
 * (fmaf), one promotion per group and row.
 *
 * Work: a warp owns R = 1 or 2 tiles of 16 W rows (x's B registers serve
 * both; where W4F_BOTH says they do not fit, a 32-row block runs its tiles
 * in turn) and a contiguous slice of the chunks; the KS = blockDim / 32 warps
 * of a block split K and add their totals in shared memory, in warp order
 * (deterministic), at the very end.  The main loop holds two register
 * stages: the next chunk's codes, scales and x are loaded before the
 * current chunk is computed (codes with ld.global.nc.L1::no_allocate, x and
 * scales through L1).  No barrier, no shared memory in the loop.  R and KS
 * are the host's (w4f_plan); the device reads KS from blockDim and R from
 * gridDim (R = 1 iff 16 gridDim >= n).  Rows past n are read clamped to
 * n - 1 and not stored; x rows past m read row m - 1 (no predicated loads:
 * an mma's D column depends on its own B column only) and are not stored.
 * The rows g + 8 are addressed by 32-bit offsets from rows g and the
 * pointers advance by two chunks a loop trip: that freed the registers
 * for R = 2 with two x tiles (m > 8) at g128 (W4F_BOTH).
 */

#define W4F_MAX_KS 16

/* Which 32-row blocks run both W tiles at once (R = 2 in registers): GW = group / 32 words of a row a load, NB =
 * n8 tiles of x (2 when m > 8).  The one place of the rule: the device source gets it as text (W4F_STR), the
 * host's plan calls it (R = 2 only where it holds; QC_W4F_R=2 elsewhere runs the two tiles in turn).  g32 keeps
 * four scale words a row a stage; at m > 8 only g128 fits (one scale a row a stage: 128 registers, nothing
 * spilled inside the loops; g64 spilled there), test_w4a16_frag_unit checks the builds. */
#define W4F_BOTH(GW, NB) ((NB) == 1 ? (GW) != 1 : (GW) == 4)
#define W4F_STR_(x) #x
#define W4F_STR(x) W4F_STR_(x)

/* The device helpers both GEMVs share: mma, the code pair, f16 scale, the streamed code load. */
#define W4F_HELPERS                                                                                               \
    QC_CUDA_GRID_DEP_SRC                                                                                          \
    "typedef unsigned int u32;\n"                                                                                 \
    "typedef unsigned short u16;\n"                                                                               \
    "typedef unsigned char u8;\n"                                                                                 \
    "typedef long long ll;\n"                                                                                     \
    "#define W4F_ONES 0x3F803F80u /* bf16x2 (1, 1) */\n"                                                           \
    "#define W4F_NEG136 0xC308C308u /* bf16x2 (-136, -136): 128 + 8 */\n"                                         \
    "__device__ __forceinline__ void w4f_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {\n"        \
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"                                 \
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"                              \
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"                                  \
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"                      \
    "}\n"                                                                                                         \
    "/* pair s of a word, shifted down already: (128 + q_2s, 128 + q_2s+1) - 136, exact */\n"                   \
    "__device__ __forceinline__ u32 w4f_pair(u32 w) {\n"                                                          \
    "    u32 v, d;\n"                                                                                             \
    "    /* one lop3 (a & b) | c: written as C, ptxas emits an and and an or */\n"                                  \
    "    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(v) : \"r\"(w), \"n\"(0x000F000F), \"n\"(0x43004300));\n"     \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(v), \"r\"(W4F_ONES), \"r\"(W4F_NEG136));\n"     \
    "    return d;\n"                                                                                             \
    "}\n"                                                                                                         \
    "__device__ __forceinline__ float w4f_h2f(u32 h) {\n"                                                         \
    "    float f;\n"                                                                                              \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((u16)h));\n"                                             \
    "    return f;\n"                                                                                             \
    "}\n"                                                                                                         \
    "/* codes: streamed once, kept out of L1 */\n"                                                                \
    "template <int GW> __device__ __forceinline__ void w4f_ldq(const u8 *p, u32 *w) {\n"                          \
    "    if constexpr (GW == 4) {\n"                                                                              \
    "        asm(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"                                  \
    "            : \"=r\"(w[0]), \"=r\"(w[1]), \"=r\"(w[2]), \"=r\"(w[3]) : \"l\"(p));\n"                        \
    "    } else if constexpr (GW == 2) {\n"                                                                       \
    "        asm(\"ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\" : \"=r\"(w[0]), \"=r\"(w[1]) : \"l\"(p));\n" \
    "    } else {\n"                                                                                              \
    "        asm(\"ld.global.nc.L1::no_allocate.u32 %0, [%1];\" : \"=r\"(w[0]) : \"l\"(p));\n"                     \
    "    }\n"                                                                                                     \
    "}\n"

#define W4F_SRC                                                                                                   \
    "/* qcore w4a16 GEMV, W as the mma A operand: y[m,n] = x[m,k] . W4[n,k]^T, m <= 16, sym */\n"              \
    W4F_HELPERS                                                                                                   \
    "/* one chunk (128 codes) of a warp's rows: codes of rows g and g + 8 per tile, their scale words (x is read\n" \
    "   where it is used: L1-resident for the small m that matter, and two stages of it would cost 32 registers) */\n" \
    "template <int R, int NB> struct W4fStage {\n"                                                                \
    "    u32 wa[R][4], wb[R][4]; /* word j of rows g, g + 8 */\n"                                                 \
    "    u32 sa[R][2], sb[R][2]; /* the chunk's 4 / GW f16 scales of rows g, g + 8 */\n"                          \
    "};\n"                                                                                                        \
    "/* x row at word j's 8 codes of chunk c (rows past m read row m - 1: their D columns are not stored) */\n"   \
    "template <int GW> __device__ __forceinline__ uint4 w4f_ldx(const u16 *xr, int c, int j) {\n"                 \
    "    return __ldg((const uint4 *)(xr + c * 128 + (j / GW) * 32 * GW + 8 * (j % GW)));\n"                     \
    "}\n"                                                                                                         \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_load(W4fStage<R, NB> &s, int c, const u8 *const *qa, const int *dq,\n" \
    "                                         const u16 *const *sa, const int *ds) {\n"                  \
    "    constexpr int GPC = 4 / GW; /* groups per chunk */\n"                                                    \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++) {\n"                                                                         \
    "#pragma unroll\n"                                                                                            \
    "        for (int l = 0; l < GPC; l++) {\n"                                                                   \
    "            w4f_ldq<GW>(qa[r] + c * 64 + l * 16 * GW, &s.wa[r][l * GW]);\n"                                  \
    "            w4f_ldq<GW>(qa[r] + dq[r] + c * 64 + l * 16 * GW, &s.wb[r][l * GW]);\n"                                  \
    "        }\n"                                                                                                 \
    "        if constexpr (GPC == 4) {\n"                                                                         \
    "            const uint2 a = __ldg((const uint2 *)(sa[r] + c * 4)), b = __ldg((const uint2 *)(sa[r] + ds[r] + c * 4));\n" \
    "            s.sa[r][0] = a.x; s.sa[r][1] = a.y; s.sb[r][0] = b.x; s.sb[r][1] = b.y;\n"                      \
    "        } else if constexpr (GPC == 2) {\n"                                                                  \
    "            s.sa[r][0] = __ldg((const unsigned int *)(sa[r] + c * 2));\n"                                    \
    "            s.sb[r][0] = __ldg((const unsigned int *)(sa[r] + ds[r] + c * 2));\n"                                    \
    "        } else {\n"                                                                                          \
    "            s.sa[r][0] = __ldg(sa[r] + c);\n"                                                                \
    "            s.sb[r][0] = __ldg(sa[r] + ds[r] + c);\n"                                                                \
    "        }\n"                                                                                                 \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "/* f16 scale of group gq of the chunk from its scale words */\n"                                             \
    "template <int GW> __device__ __forceinline__ float w4f_scale(const u32 *sw, int gq) {\n"                    \
    "    if constexpr (GW == 4) return w4f_h2f(sw[0]);\n"                                                         \
    "    else return w4f_h2f(sw[gq >> 1] >> (16 * (gq & 1)));\n"                                                  \
    "}\n"                                                                                                         \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_compute(const W4fStage<R, NB> &s, float (*acc)[NB][4], int c,\n"            \
    "                                            const u16 *const *xr) {\n"                                      \
    "    constexpr int GPC = 4 / GW;\n"                                                                           \
    "    uint4 xv[NB][4];\n"                                                                             \
    "#pragma unroll\n"                                                                                            \
    "    for (int nb = 0; nb < NB; nb++)\n"                                                                       \
    "#pragma unroll\n"                                                                                            \
    "        for (int j = 0; j < 4; j++)\n"                                                                      \
    "            xv[nb][j] = w4f_ldx<GW>(xr[nb], c, j);\n"                                      \
    "#pragma unroll\n"                                                                                            \
    "    for (int gq = 0; gq < GPC; gq++) {\n"                                                                    \
    "        float part[R][NB][4];\n"                                                                             \
    "#pragma unroll\n"                                                                                            \
    "        for (int r = 0; r < R; r++)\n"                                                                       \
    "#pragma unroll\n"                                                                                            \
    "            for (int nb = 0; nb < NB; nb++)\n"                                                               \
    "#pragma unroll\n"                                                                                            \
    "                for (int e = 0; e < 4; e++) part[r][nb][e] = 0.f;\n"                                         \
    "#pragma unroll\n"                                                                                            \
    "        for (int jj = 0; jj < GW; jj++) {\n"                                                                 \
    "            const int j = gq * GW + jj;\n"                                                                   \
    "            u32 b[NB][4]; /* B registers: (e0,e1), (e2,e3) for h = 0; (e4,e5), (e6,e7) for h = 1 */\n"      \
    "#pragma unroll\n"                                                                                            \
    "            for (int nb = 0; nb < NB; nb++) {\n"                                                             \
    "                const uint4 v = xv[nb][j];\n"                               \
    "                b[nb][0] = v.x;\n"                                                                           \
    "                b[nb][1] = v.y;\n"                                                                           \
    "                b[nb][2] = v.z;\n"                                                                           \
    "                b[nb][3] = v.w;\n"                                                                           \
    "            }\n"                                                                                             \
    "#pragma unroll\n"                                                                                            \
    "            for (int r = 0; r < R; r++) {\n"                                                                 \
    "                const u32 A = s.wa[r][j], B = s.wb[r][j];\n"                                                 \
    "#pragma unroll\n"                                                                                            \
    "                for (int h = 0; h < 2; h++) {\n"                                                             \
    "                    const u32 a0 = w4f_pair(A >> (8 * h)), a1 = w4f_pair(B >> (8 * h));\n"                   \
    "                    const u32 a2 = w4f_pair(A >> (8 * h + 4)), a3 = w4f_pair(B >> (8 * h + 4));\n"           \
    "#pragma unroll\n"                                                                                            \
    "                    for (int nb = 0; nb < NB; nb++) w4f_mma(part[r][nb], a0, a1, a2, a3, b[nb][2 * h], b[nb][2 * h + 1]);\n" \
    "                }\n"                                                                                         \
    "            }\n"                                                                                             \
    "        }\n"                                                                                                 \
    "        /* promotion: c0, c1 are row g, c2, c3 row g + 8 */\n"                                               \
    "#pragma unroll\n"                                                                                            \
    "        for (int r = 0; r < R; r++) {\n"                                                                     \
    "            const float s0 = w4f_scale<GW>(s.sa[r], gq), s1 = w4f_scale<GW>(s.sb[r], gq);\n"                 \
    "#pragma unroll\n"                                                                                            \
    "            for (int nb = 0; nb < NB; nb++)\n"                                                               \
    "#pragma unroll\n"                                                                                            \
    "                for (int e = 0; e < 4; e++) acc[r][nb][e] = fmaf(e < 2 ? s0 : s1, part[r][nb][e], acc[r][nb][e]);\n" \
    "        }\n"                                                                                                 \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                         int n0, float *red) {\n"                                            \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"             \
    "    const int ks = blockDim.x >> 5;\n"                                                                       \
    "    const ll ng = k / (32 * GW), chunks = k >> 7;\n"                                                         \
    "    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;\n"   \
    "    const u8 *qa[R]; /* rows g + 8 at dq / ds from rows g (clamped rows too): fewer 64-bit pointers */\n"                                                                              \
    "    const u16 *sa[R], *xr[NB];\n"                                                                            \
    "    int dq[R], ds[R];\n"                                                                    \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++) {\n"                                                                         \
    "        int ra = n0 + 16 * r + g, rb = ra + 8;\n"                                                            \
    "        ra = ra < n ? ra : n - 1;\n"                                                                         \
    "        rb = rb < n ? rb : n - 1;\n"                                                                         \
    "        qa[r] = q + (ll)ra * (k / 2) + 4 * GW * t;\n"                                                        \
    "        dq[r] = (rb - ra) * (int)(k / 2);\n"                                                        \
    "        sa[r] = sc + ra * ng;\n"                                                                             \
    "        ds[r] = (rb - ra) * (int)ng;\n"                                                                             \
    "    }\n"                                                                                                     \
    "#pragma unroll\n"                                                                                            \
    "    for (int nb = 0; nb < NB; nb++) {\n"                                                                     \
    "        const int xi = g + 8 * nb < m ? g + 8 * nb : m - 1;\n"                                               \
    "        xr[nb] = x + (ll)xi * k + 8 * GW * t;\n"                                                             \
    "    }\n"                                                                                                     \
    "    float acc[R][NB][4];\n"                                                                                  \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++)\n"                                                                           \
    "#pragma unroll\n"                                                                                            \
    "        for (int nb = 0; nb < NB; nb++)\n"                                                                   \
    "#pragma unroll\n"                                                                                            \
    "            for (int e = 0; e < 4; e++) acc[r][nb][e] = 0.f;\n"                                              \
    "    /* two register stages, loaded one chunk ahead; the loop body is unrolled by two so no stage is copied,\n" \
    "       and the pointers advance by two chunks a trip (the offsets in the loop are immediates) */\n"          \
    "    constexpr int GPC = 4 / GW;\n"                                                                           \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++) qa[r] += c0 * 64, sa[r] += c0 * GPC;\n"  \
    "#pragma unroll\n"                                                                                            \
    "    for (int nb = 0; nb < NB; nb++) xr[nb] += c0 * 128;\n"                                                   \
    "    W4fStage<R, NB> s0, s1;\n"                                                                               \
    "    if (c0 < c1) w4f_load<GW, R, NB>(s0, 0, qa, dq, sa, ds);\n"                                              \
    "    qc_grid_wait(); /* codes and scales are never written: x, y, red only from here on */\n"              \
    "    for (ll c = c0; c < c1; c += 2) {\n"                                                                     \
    "        if (c + 1 < c1) w4f_load<GW, R, NB>(s1, 1, qa, dq, sa, ds);\n"                                       \
    "        w4f_compute<GW, R, NB>(s0, acc, 0, xr);\n"                                                           \
    "        if (c + 1 >= c1) break;\n"                                                                           \
    "        if (c + 2 < c1) w4f_load<GW, R, NB>(s0, 2, qa, dq, sa, ds);\n"                                       \
    "        w4f_compute<GW, R, NB>(s1, acc, 1, xr);\n"                                                           \
    "#pragma unroll\n"                                                                                            \
    "        for (int r = 0; r < R; r++) qa[r] += 128, sa[r] += 2 * GPC;\n"       \
    "#pragma unroll\n"                                                                                            \
    "        for (int nb = 0; nb < NB; nb++) xr[nb] += 256;\n"                                                    \
    "    }\n"                                                                                                     \
    "    /* the K split: warps 1.. leave their totals, warp 0 adds them in warp order and stores */\n"            \
    "    constexpr int NA = R * NB * 4;\n"                                                                        \
    "    if (ks > 1) {\n"                                                                                         \
    "        if (warp > 0) {\n"                                                                                   \
    "#pragma unroll\n"                                                                                            \
    "            for (int i = 0; i < NA; i++) red[((warp - 1) * NA + i) * 32 + lane] = (&acc[0][0][0])[i];\n"     \
    "        }\n"                                                                                                 \
    "        __syncthreads();\n"                                                                                  \
    "        if (warp == 0)\n"                                                                                    \
    "            for (int w = 1; w < ks; w++)\n"                                                                  \
    "#pragma unroll\n"                                                                                            \
    "                for (int i = 0; i < NA; i++) (&acc[0][0][0])[i] += red[((w - 1) * NA + i) * 32 + lane];\n"   \
    "        __syncthreads(); /* red is free again (the m > 8 path comes back for its second tile) */\n"         \
    "    }\n"                                                                                                     \
    "    if (warp > 0) return;\n"                                                                                 \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++)\n"                                                                           \
    "#pragma unroll\n"                                                                                            \
    "        for (int nb = 0; nb < NB; nb++)\n"                                                                   \
    "#pragma unroll\n"                                                                                            \
    "            for (int e = 0; e < 4; e++) {\n"                                                                 \
    "                const int xi = 8 * nb + 2 * t + (e & 1), wi = n0 + 16 * r + g + 8 * (e >> 1);\n"             \
    "                if (xi < m && wi < n) y[(ll)xi * n + wi] = acc[r][nb][e];\n"                                 \
    "            }\n"                                                                                             \
    "}\n"                                                                                                         \
    "/* a 32-row block (R = 2): both W tiles at once where they fit in registers (W4F_BOTH: x's B registers\n" \
    "   serve both, twice the codes in flight), else the two tiles in turn (the host plans R = 1 there) */\n" \
    "template <int GW, int NB> __device__ __forceinline__ constexpr bool w4f_both() { return " W4F_STR(W4F_BOTH(GW, NB)) "; }\n" \
    "template <int GW, int NB>\n"                                                                                \
    "__device__ __forceinline__ void w4f_go_nb(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                          int R, float *red) {\n"                                            \
    "    const int n0 = blockIdx.x * (16 * R); /* n < 2^31 (eligibility) */\n"                                    \
    "    if (R == 1) {\n"                                                                                          \
    "        w4f_gemv<GW, 1, NB>(x, q, sc, y, m, n, k, n0, red);\n"                                               \
    "    } else if constexpr (w4f_both<GW, NB>()) {\n"                                                            \
    "        w4f_gemv<GW, 2, NB>(x, q, sc, y, m, n, k, n0, red);\n"                                               \
    "    } else {\n"                                                                                              \
    "        w4f_gemv<GW, 1, NB>(x, q, sc, y, m, n, k, n0, red);\n"                                               \
    "        if (n0 + 16 < n) w4f_gemv<GW, 1, NB>(x, q, sc, y, m, n, k, n0 + 16, red);\n"                         \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "template <int GW>\n"                                                                                         \
    "__device__ __forceinline__ void w4f_go(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                       int R, float *red) {\n"                                               \
    "    if (m > 8) w4f_go_nb<GW, 2>(x, q, sc, y, m, n, k, R, red); /* two n8 tiles of x */\n"                    \
    "    else w4f_go_nb<GW, 1>(x, q, sc, y, m, n, k, R, red);\n"                                                  \
    "}\n"                                                                                                         \
    "extern \"C\" __global__ void __launch_bounds__(512) qc_w4f_gemv_sym(const u16 *x, const u8 *q, const u16 *s,\n" \
    "        float *y, ll m, ll n, ll k, ll gs) {\n"                                                              \
    "    extern __shared__ float red[];\n"                                                                        \
    "    qc_grid_trigger(); /* the next kernel's blocks may start (they wait for this one) */\n"                \
    "    if (m <= 0 || m > 16 || n <= 0 || k <= 0 || (k & 127)) return;\n"                                        \
    "    /* the host's tile count: R = 1 gives 16-row blocks (then 16 gridDim >= n), R = 2 32-row ones */\n"      \
    "    const int R = (ll)gridDim.x * 16 >= n ? 1 : 2;\n"                                                        \
    "    if (gs == 128) w4f_go<4>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                                \
    "    else if (gs == 64) w4f_go<2>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                            \
    "    else if (gs == 32) w4f_go<1>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                            \
    "}\n"

static const char W4F_SRC_SYM[] = W4F_SRC;

/* What both m = 1 whole-line GEMVs compile (gemv1_sym, gemv1_tma_sym): the helpers, a step's registers, its mmas */
#define W4G_STEP_SRC                                                                                              \
    W4F_HELPERS                                                                                                   \
    "/* one step: 512 bytes of each of a warp's rows (1024 codes, eight g128 groups) and the lanes' scales */\n" \
    "struct W4gStage {\n" \
    "    u32 wa[2][4], wb[2][4]; /* 16 bytes of rows ra, rb of each row pair: segment g, piece t */\n" \
    "    u16 sa[2], sb[2];       /* their scales of group 8 c + g */\n" \
    "};\n" \
    "/* the mmas of one step on the lane's x (xv[j]: x at its codes' word j); only D[g][g] (rows ra) and D[g + 8][g]\n" \
    "   (rows rb) are kept: c0 / c1 of lane (g, g / 2) by g's parity, c2 / c3 likewise */\n" \
    "__device__ __forceinline__ void w4g_step(const W4gStage &s, float (*acc)[2], const uint4 *xv, bool odd) {\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++) {\n" \
    "        float part[4] = {0.f, 0.f, 0.f, 0.f};\n" \
    "#pragma unroll\n" \
    "        for (int j = 0; j < 4; j++) {\n" \
    "            const u32 A = s.wa[r][j], B = s.wb[r][j];\n" \
    "            const u32 b[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};\n" \
    "#pragma unroll\n" \
    "            for (int h = 0; h < 2; h++) {\n" \
    "                const u32 a0 = w4f_pair(A >> (8 * h)), a1 = w4f_pair(B >> (8 * h));\n" \
    "                const u32 a2 = w4f_pair(A >> (8 * h + 4)), a3 = w4f_pair(B >> (8 * h + 4));\n" \
    "                w4f_mma(part, a0, a1, a2, a3, b[2 * h], b[2 * h + 1]);\n" \
    "            }\n" \
    "        }\n" \
    "        acc[r][0] = fmaf(w4f_h2f(s.sa[r]), odd ? part[1] : part[0], acc[r][0]);\n" \
    "        acc[r][1] = fmaf(w4f_h2f(s.sb[r]), odd ? part[3] : part[2], acc[r][1]);\n" \
    "    }\n" \
    "}\n"

#define W4G_SRC                                                                                                   \
    "/* qcore w4a16 GEMV for m = 1, whole-line loads: y[n] = x[k] . W4[n,k]^T, g128, sym */\n"              \
    W4G_STEP_SRC                                                                                                  \
    "__device__ __forceinline__ void w4g_load(W4gStage &s, int c, const u8 *const *qa, const int *dq, const u16 *const *sp,\n" \
    "                                         const int *ds) {\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++) {\n" \
    "        w4f_ldq<4>(qa[r] + c * 512, s.wa[r]);\n" \
    "        w4f_ldq<4>(qa[r] + dq[r] + c * 512, s.wb[r]);\n" \
    "        s.sa[r] = __ldg(sp[r] + c * 8);\n" \
    "        s.sb[r] = __ldg(sp[r] + ds[r] + c * 8);\n" \
    "    }\n" \
    "}\n" \
    "/* one step with x from global memory (through L1) */\n" \
    "__device__ __forceinline__ void w4g_compute(const W4gStage &s, float (*acc)[2], int c, const u16 *xr, bool odd) {\n" \
    "    uint4 xv[4];\n" \
    "#pragma unroll\n" \
    "    for (int j = 0; j < 4; j++) xv[j] = __ldg((const uint4 *)(xr + c * 1024 + 8 * j));\n" \
    "    w4g_step(s, acc, xv, odd);\n" \
    "}\n" \
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_w4g_gemv1_sym(const u16 *x, const u8 *q, const u16 *sc,\n" \
    "        float *y, ll m, ll n, ll k, ll gs) {\n" \
    "    extern __shared__ float red[];\n" \
    "    qc_grid_trigger(); /* the next kernel's blocks may start (they wait for this one) */\n" \
    "    if (m != 1 || n <= 0 || k <= 0 || (k & 1023) || gs != 128) return;\n" \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n" \
    "    const int ks = blockDim.x >> 5;\n" \
    "    const ll ng = k >> 7, steps = k >> 10;\n" \
    "    const ll spw = (steps + ks - 1) / ks, c0 = warp * spw, c1 = c0 + spw < steps ? c0 + spw : steps;\n" \
    "    const ll n0 = (ll)blockIdx.x * 4;\n" \
    "    const u8 *qa[2];\n" \
    "    const u16 *sp[2];\n" \
    "    int dq[2], ds[2];\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++) {\n" \
    "        ll ra = n0 + 2 * r, rb = ra + 1;\n" \
    "        ra = ra < n ? ra : n - 1;\n" \
    "        rb = rb < n ? rb : n - 1;\n" \
    "        qa[r] = q + ra * (k / 2) + 64 * g + 16 * t + c0 * 512;\n" \
    "        dq[r] = (int)(rb - ra) * (int)(k / 2);\n" \
    "        sp[r] = sc + ra * ng + g + c0 * 8;\n" \
    "        ds[r] = (int)(rb - ra) * (int)ng;\n" \
    "    }\n" \
    "    const u16 *xr = x + 128 * g + 32 * t + c0 * 1024;\n" \
    "    const bool odd = g & 1;\n" \
    "    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};\n" \
    "    /* two register stages, loaded one step ahead; unrolled by two so that no stage is copied */\n" \
    "    W4gStage s0, s1;\n" \
    "    if (c0 < c1) w4g_load(s0, 0, qa, dq, sp, ds);\n" \
    "    qc_grid_wait(); /* codes and scales are never written: x, y, red only from here on */\n" \
    "    for (ll c = c0; c < c1; c += 2) {\n" \
    "        if (c + 1 < c1) w4g_load(s1, 1, qa, dq, sp, ds);\n" \
    "        w4g_compute(s0, acc, 0, xr, odd);\n" \
    "        if (c + 1 >= c1) break;\n" \
    "        if (c + 2 < c1) w4g_load(s0, 2, qa, dq, sp, ds);\n" \
    "        w4g_compute(s1, acc, 1, xr, odd);\n" \
    "#pragma unroll\n" \
    "        for (int r = 0; r < 2; r++) qa[r] += 1024, sp[r] += 16;\n" \
    "        xr += 2048;\n" \
    "    }\n" \
    "    /* the diagonal: lane (g, g / 2) holds segment g's sums; the warp adds its eight segments (fixed order) */\n" \
    "    const bool diag = t == (g >> 1);\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++)\n" \
    "#pragma unroll\n" \
    "        for (int e = 0; e < 2; e++) {\n" \
    "            float v = diag ? acc[r][e] : 0.f;\n" \
    "#pragma unroll\n" \
    "            for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n" \
    "            acc[r][e] = v;\n" \
    "        }\n" \
    "    /* the K split: warps 1.. leave their four sums, warp 0 adds them in warp order and stores */\n" \
    "    if (ks > 1) {\n" \
    "        if (warp > 0 && lane == 0)\n" \
    "#pragma unroll\n" \
    "            for (int i = 0; i < 4; i++) red[(warp - 1) * 4 + i] = (&acc[0][0])[i];\n" \
    "        __syncthreads();\n" \
    "        if (warp == 0)\n" \
    "            for (int w = 1; w < ks; w++)\n" \
    "#pragma unroll\n" \
    "                for (int i = 0; i < 4; i++) (&acc[0][0])[i] += red[(w - 1) * 4 + i];\n" \
    "    }\n" \
    "    if (warp > 0 || lane > 0) return;\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++)\n" \
    "#pragma unroll\n" \
    "        for (int e = 0; e < 2; e++)\n" \
    "            if (n0 + 2 * r + e < n) y[n0 + 2 * r + e] = acc[r][e];\n" \
    "}\n"


/* ---- the launch plan (the device reads KS from blockDim and R from gridDim) ---- */

/* Warps wanted in all: 16 per SM of an H200 (128 registers a thread), one wave. */
#define W4F_WANT_WARPS 2112

typedef struct w4f_plan {
    int r, ks;
    int64_t blocks;
} w4f_plan;

/* R = 2 (x's registers serve two tiles, twice the codes in flight a warp)
 * where the device runs both tiles at once (W4F_BOTH) unless that leaves
 * fewer than two blocks per SM's worth of 16-row tiles (so gate_up, 1792
 * tiles, takes R = 2 at every m for g128, as mxfp4.gemv_frag_ps does); KS doubles while the warps stay
 * under the target and each keeps at least two chunks.  QC_W4F_R and
 * QC_W4F_KS override (tuning on the device; the device follows the launch). */
static void w4f_plan_of(int64_t m, int64_t n, int64_t k, int64_t g, w4f_plan *p) {
    memset(p, 0, sizeof *p);
    if (m <= 0 || n <= 0 || k < 128) return;
    int64_t chunks = k / 128, tiles = (n + 15) / 16;
    /* R = 2 only where the device runs both tiles at once (W4F_BOTH: g64 / g128 at m <= 8, g128 above) */
    p->r = tiles >= 2 * 264 && W4F_BOTH(g / 32, m > 8 ? 2 : 1) ? 2 : 1;
    const char *er = getenv("QC_W4F_R"), *ek = getenv("QC_W4F_KS");
    if (er && (atoi(er) == 1 || atoi(er) == 2)) p->r = atoi(er);
    if (tiles == 1) p->r = 1; /* 16 gridDim >= n then reads as R = 1 */
    p->blocks = (tiles + p->r - 1) / p->r;
    p->ks = 1;
    while (p->ks < W4F_MAX_KS && p->blocks * p->ks * 2 <= W4F_WANT_WARPS && chunks >= 4 * p->ks) p->ks *= 2;
    if (ek) {
        int v = atoi(ek);
        if (v >= 1 && v <= W4F_MAX_KS) p->ks = v;
    }
}

static uint32_t w4f_red_bytes(int64_t m, const w4f_plan *p) {
    int nb = m > 8 ? 2 : 1;
    return p->ks > 1 ? (uint32_t)(p->ks - 1) * (uint32_t)(p->r * nb * 4) * 32u * 4u : 0u;
}

static void w4f_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    w4f_plan pl;
    w4f_plan_of(p->m, p->n, p->k, p->group_size, &pl);
    if (pl.blocks <= 0 || pl.blocks > 0x7fffffffLL) return;
    d->grid[0] = (uint32_t)pl.blocks;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (uint32_t)pl.ks;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = w4f_red_bytes(p->m, &pl);
}

/* ---- C reference: exactly the kernel's parameters, x as bf16 bits ---- */

static void w4f_ref_sym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                        int64_t n, int64_t k, int64_t group_size) {
    /* the host checks eligibility first; this only keeps a bad call in bounds */
    if (!xb || !qweight || !scales || !y || m <= 0 || group_size <= 0 || group_size > 128 ||
        !w4_shape_ok(n, k, (uint32_t)group_size, NULL) || (size_t)m > SIZE_MAX / sizeof(float) / (size_t)k)
        return;
    float *x = malloc((size_t)m * (size_t)k * sizeof(float));
    if (!x) return;
    for (size_t i = 0; i < (size_t)m * (size_t)k; i++) x[i] = qc_bf16_to_f32(xb[i]);
    w4_view v = {.n = n, .k = k, .g = (uint32_t)group_size, .scheme = W4A16_SCHEME_SYM, .ng = k / group_size,
                 .q = qweight, .s = scales};
    w4_linear(&v, x, y, m);
    free(x);
}

/* ---- eligibility ---- */

/* both GEMVs take the sym scheme only (scheme 0 reads as sym), without act-order permutation */
static int w4f_scheme_ok(const char *id, const qc_problem *p, qc_reason *why) {
    uint32_t s = p->struct_size >= offsetof(qc_problem, scheme) + sizeof p->scheme ? p->scheme : 0;
    if (s == 0) s = W4A16_SCHEME_SYM;
    if (s == (W4A16_SCHEME_SYM | W4A16_SCHEME_PERM)) {
        w4_why(why, "perm", "%s does not take act-order weights (scheme %s): the stored K order needs x permuted", id,
               w4_scheme_name(s));
        return 0;
    }
    if (s != W4A16_SCHEME_SYM) {
        w4_why(why, "scheme", "%s takes scheme sym only (w4a16.gemv_asym / gemv_fmin run the others), the weight is "
               "%s (0x%x)", id, w4_scheme_name(s), s);
        return 0;
    }
    return 1;
}

static int w4f_el_sym(const qc_problem *p, qc_reason *why) {
    static const char id[] = "w4a16.gemv_frag_sym";
    if (!w4f_scheme_ok(id, p, why)) return 0;
    if (!w4_group_ok(p->group_size)) {
        w4_why(why, "group", "%s needs the weight's group size (32, 64 or 128), problem has %u", id, p->group_size);
        return 0;
    }
    if (!w4_shape_ok(p->n, p->k, p->group_size, why)) return 0;
    if (p->k % 128) {
        w4_why(why, "align_k", "%s streams K in chunks of 128 codes, layer has K=%lld (w4a16.gemv_sym takes it)", id,
               (long long)p->k);
        return 0;
    }
    if (p->k > (1LL << 28)) { /* rows g + 8 sit 4 k bytes past rows g: a 32-bit offset in the kernel */
        w4_why(why, "shape", "%s: k = %lld is above 2^28 (its row offsets are 32-bit)", id, (long long)p->k);
        return 0;
    }
    if ((p->n + 15) / 16 > 0x7fffffffLL) {
        w4_why(why, "shape", "%s: n = %lld needs more blocks than a grid holds", id, (long long)p->n);
        return 0;
    }
    return 1;
}

/* ---- w4a16.gemv1_sym ---- */
/*
 * w4a16.gemv1_sym: the same product for m = 1 (batch-1 decode), group 128,
 * k % 1024 == 0, with loads that cover whole 128-byte lines.  The fragment
 * GEMV's loads cover 8 rows x 64 bytes (a quad's 4 x 16 bytes of each row g):
 * on the H200 a load-only kernel with that pattern read gate_up's codes in
 * 22-24 us after a memset, one reading 512 contiguous bytes a warp load in
 * 19 us (15 us back to back: bench/probe, docs/perf.md).  Here the 8 mma rows g of a tile are not 8 W
 * rows but the 8 64-byte segments of ONE 512-byte run of W row ra, and rows
 * g + 8 the same segments of row rb: lane (g, t) loads bytes 64 g + 16 t of
 * the run, so one warp load is 512 contiguous bytes.  B's column g is x at
 * segment g's codes (lane (g, t) loads its own 16 bytes of x), so D[g][g]
 * is row ra's sum over segment g and D[g + 8][g] row rb's; the other 112
 * outputs of each mma are discarded (at m = 1 the fragment GEMV keeps 16 of
 * 128 as well).  A segment is 128 codes: one g128 group, so each mma lies in
 * one group and the promotion is as exact as the fragment GEMV's (f32 sums
 * of exact products, then part * s by fmaf), per lane: lane (g, g / 2)
 * holds segment g's totals, the warp adds its eight segments with shuffles
 * in a fixed order, and the KS warps of a block (the K split) add theirs in
 * warp order through shared memory: deterministic.  A warp owns two row
 * pairs (4 rows, x's registers serve both) and a contiguous slice of the
 * 512-byte steps; two register stages, one step loaded ahead.  Rows past n
 * are read clamped to n - 1 and not stored.  Measured (bench/probe) against
 * 3, 4, 6 or 8 register stages, 2 or 8 rows a warp and persistent warps:
 * this was the fastest.
 */

static const char W4G_SRC_SYM[] = W4G_SRC;

/* the launch: 4 rows a block, QC_W4G_KS overrides the K split (plugins/common/qc_gemv1_plan.h) */
static void w4g_dims(const qc_problem *p, qc_launch_dims *d) { qc_gemv1_dims(p, "QC_W4G_KS", d); }

/* what the m = 1 whole-line GEMVs (gemv1, gemv1_tma) need of the weight and shape */
static int w4g_shape_ok(const char *id, const qc_problem *p, qc_reason *why) {
    if (!w4f_scheme_ok(id, p, why)) return 0;
    if (p->group_size != 128) {
        w4_why(why, "group", "%s needs group size 128 (a 64-byte segment is one group), the weight has %u "
               "(w4a16.gemv_frag_sym takes 32 and 64)", id, p->group_size);
        return 0;
    }
    if (!w4_shape_ok(p->n, p->k, p->group_size, why)) return 0;
    if (p->k % 1024) {
        w4_why(why, "align_k", "%s streams K in 512-byte runs (1024 codes), layer has K=%lld (w4a16.gemv_frag_sym "
               "takes K %% 128 == 0)", id, (long long)p->k);
        return 0;
    }
    if (p->k > (1LL << 28)) { /* row rb sits k / 2 bytes past row ra: a 32-bit offset in the kernel */
        w4_why(why, "shape", "%s: k = %lld is above 2^28 (its row offsets are 32-bit)", id, (long long)p->k);
        return 0;
    }
    if ((p->n + 3) / 4 > 0x7fffffffLL) {
        w4_why(why, "shape", "%s: n = %lld needs more blocks than a grid holds", id, (long long)p->n);
        return 0;
    }
    return 1;
}

static int w4g_el_sym(const qc_problem *p, qc_reason *why) {
    static const char id[] = "w4a16.gemv1_sym";
    const char *off = getenv("QC_W4G"); /* A/B runs: the fragment GEMV takes m = 1 again */
    if (off && strcmp(off, "off") == 0) {
        w4_why(why, "off", "%s is switched off (QC_W4G=off)", id);
        return 0;
    }
    return w4g_shape_ok(id, p, why);
}

/* ---- w4a16.gemv1_tma_sym ---- */
/*
 * w4a16.gemv1_tma_sym: gemv1's steps (the same sums in the same order, so
 * the same y bit for bit as gemv1 with K split 1) on codes that TMA bulk
 * copies bring into shared memory, for the long layers (gate_up).  A stage
 * is 4 whole rows: their codes (4 k / 2 contiguous bytes) and their scales
 * (4 k / 128 contiguous f16) are two cp.async.bulk, issued by one producer
 * lane into a ring of W4T_NS stages; each of the W4T_W consumer warps takes
 * whole stages (warp w: stages w, w + W4T_W, ...), runs gemv1's steps from
 * shared memory, frees the stage and stores its 4 rows.  x is laid out once
 * a block in shared memory so that each of a step's four x loads reads 512
 * contiguous bytes.  Blocks of W4T_RPB(n) consecutive rows, two an SM.
 * The ring is a multiple of the warps: a slot then serves one warp only,
 * which knows that the slot's previous fill has completed (a parity wait
 * only tells phases one apart: rings of 7 for 8 warps hung on the H200).
 * Measured (bench/results/2026-12-01-h200-s15): gate_up 19.4 us back to
 * back against gemv1's 21.8 (23.9 / 26.6 after a memset); alone slower
 * than gemv1 on o and qkv, but with no PDL trigger (W4T_TRIGGER 0) the
 * batch-1 decode step is fastest with it on qkv, o and gate_up (session
 * 16: 2.097 ms against 2.163 on gate_up only and 2.248 without it).
 */
#define W4T_W 8                /* consumer warps a block */
#define W4T_NS 8               /* ring stages: a multiple of W4T_W */
#define W4T_BLOCKS 264         /* 2 blocks an SM of an H200 */
#define W4T_MIN_N 1            /* no row bound by default; QC_W4T_MIN_N raises it (A/B runs) */
#define W4T_SMEM_MAX 116224    /* 2 blocks an SM: half of the 227 KiB an H200 SM offers a block, less 1 KiB */
#define W4T_RPB(n) ((((n) + W4T_BLOCKS - 1) / W4T_BLOCKS + 3) / 4 * 4)
/* x (2 k bytes), then the ring (W4T_NS stages of 4 rows: 2 k code bytes, k / 16 scale bytes), then 2 W4T_NS barriers */
#define W4T_SMEM(k) (2 * (k) + W4T_NS * (2 * (k) + (k) / 16) + 16 * W4T_NS)

#define W4T_SRC                                                                                                   \
    "/* qcore w4a16 GEMV for m = 1 on a TMA bulk-copy ring: y[n] = x[k] . W4[n,k]^T, g128, sym */\n"          \
    W4G_STEP_SRC                                                                                                  \
    QC_TMA_PIPE_SRC                                                                                               \
    "#define W4T_W " W4F_STR(W4T_W) "\n"                                                                          \
    "#define W4T_NS " W4F_STR(W4T_NS) "\n"                                                                        \
    "#define W4T_BLOCKS " W4F_STR(W4T_BLOCKS) "\n"                                                                \
    "#ifndef W4T_TRIGGER /* PDL: 0 dependents launch when it ends, 1 when its blocks are done, 2 at the start */\n" \
    "#define W4T_TRIGGER 0\n"                                                                                     \
    "#endif\n"                                                                                                    \
    "extern \"C\" __global__ void __launch_bounds__(32 * (W4T_W + 1), 2) qc_w4t_gemv1_sym(const u16 *x, const u8 *q,\n" \
    "        const u16 *sc, float *y, ll m, ll n, ll k, ll gs) {\n"                                               \
    "    extern __shared__ __align__(128) unsigned char w4t_sm[];\n"                                             \
    "#if W4T_TRIGGER == 2\n"                                                                                     \
    "    qc_grid_trigger();\n"                                                                                    \
    "#endif\n"                                                                                                    \
    "    if (m != 1 || n <= 0 || k <= 0 || (k & 1023) || gs != 128) return;\n"                                   \
    "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"                                          \
    "    const ll rpb = ((n + W4T_BLOCKS - 1) / W4T_BLOCKS + 3) / 4 * 4; /* the host's W4T_RPB */\n"              \
    "    const ll r0 = (ll)blockIdx.x * rpb, r1 = r0 + rpb < n ? r0 + rpb : n;\n"                                \
    "    if (r0 >= n) return;\n"                                                                                  \
    "    const int rowb = (int)(k / 2), ng = (int)(k / 128), steps = (int)(k / 1024);\n"                          \
    "    const int cb = 4 * rowb, stage = cb + 8 * ng; /* 4 rows of codes, then their scales */\n"               \
    "    const int groups = (int)((r1 - r0 + 3) / 4);\n"                                                        \
    "    uint4 *xs = (uint4 *)w4t_sm;\n"                                                                          \
    "    unsigned char *ring = w4t_sm + 2 * k;\n"                                                                 \
    "    const unsigned rb = qcp_smem(ring), full = rb + W4T_NS * stage, empty = full + 8 * W4T_NS;\n"          \
    "    if (threadIdx.x == 0) {\n"                                                                               \
    "        for (int i = 0; i < W4T_NS; i++) qcp_mbar_init(full + 8 * i, 1), qcp_mbar_init(empty + 8 * i, 1);\n"  \
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n"                        \
    "    }\n"                                                                                                     \
    "    __syncthreads();\n"                                                                                      \
    "    if (warp == W4T_W) { /* producer: one lane; codes and scales are never written, so no qc_grid_wait */\n" \
    "        if (lane) return;\n"                                                                                 \
    "        unsigned long long pol;\n"                                                                                          \
    "        asm volatile(\"createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\\n\" : \"=l\"(pol));\n"          \
    "        for (int j = 0; j < groups; j++) {\n"                                                                \
    "            const int st = j % W4T_NS;\n"                                                                    \
    "            const ll row0 = r0 + 4 * j;\n"                                                                   \
    "            const int nr = r1 - row0 < 4 ? (int)(r1 - row0) : 4;\n"                                          \
    "            qcp_wait(empty + 8 * st, ((j / W4T_NS) & 1) ^ 1);\n"                                             \
    "            qcp_expect_tx(full + 8 * st, (unsigned)(nr * (rowb + 2 * ng)));\n"                              \
    "            qcp_bulk(rb + st * stage, q + row0 * rowb, (unsigned)(nr * rowb), full + 8 * st, pol);\n"        \
    "            qcp_bulk(rb + st * stage + cb, sc + row0 * ng, (unsigned)(nr * ng * 2), full + 8 * st, pol);\n" \
    "        }\n"                                                                                                 \
    "        return;\n"                                                                                           \
    "    }\n"                                                                                                     \
    "    qc_grid_wait(); /* x and y from here on */\n"                                                           \
    "    /* x's 16-byte chunk nn of step c (lane 4 g + t's load j in gemv1: nn = 16 g + 4 t + j) goes to\n"      \
    "       c * 128 + 32 j + 4 g + t, so that load j of a step reads 512 contiguous bytes */\n"                 \
    "    for (int i = threadIdx.x; i < (int)(k / 8); i += 32 * W4T_W) {\n"                                        \
    "        const int c = i >> 7, nn = i & 127;\n"                                                               \
    "        xs[c * 128 + (nn & 3) * 32 + (nn >> 4) * 4 + ((nn >> 2) & 3)] = __ldg((const uint4 *)x + i);\n"    \
    "    }\n"                                                                                                     \
    "    qcp_bar_n(1, 32 * W4T_W);\n"                                                                             \
    "    const int g = lane >> 2, t = lane & 3;\n"                                                                \
    "    const bool odd = g & 1, diag = t == (g >> 1);\n"                                                         \
    "    for (int j = warp; j < groups; j += W4T_W) {\n"                                                          \
    "        const int st = j % W4T_NS;\n"                                                                        \
    "        const ll row0 = r0 + 4 * j;\n"                                                                       \
    "        qcp_wait(full + 8 * st, (j / W4T_NS) & 1);\n"                                                       \
    "        const unsigned char *cs = ring + st * stage;\n"                                                      \
    "        const u16 *ss = (const u16 *)(cs + cb);\n"                                                           \
    "        float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};\n"                                                       \
    "#pragma unroll 2\n"                                                                                          \
    "        for (int c = 0; c < steps; c++) {\n"                                                                 \
    "            W4gStage sg;\n"                                                                                  \
    "#pragma unroll\n"                                                                                            \
    "            for (int r = 0; r < 2; r++) {\n"                                                                 \
    "                const uint4 va = *(const uint4 *)(cs + 2 * r * rowb + c * 512 + 64 * g + 16 * t);\n"         \
    "                const uint4 vb = *(const uint4 *)(cs + (2 * r + 1) * rowb + c * 512 + 64 * g + 16 * t);\n"   \
    "                sg.wa[r][0] = va.x, sg.wa[r][1] = va.y, sg.wa[r][2] = va.z, sg.wa[r][3] = va.w;\n"           \
    "                sg.wb[r][0] = vb.x, sg.wb[r][1] = vb.y, sg.wb[r][2] = vb.z, sg.wb[r][3] = vb.w;\n"           \
    "                sg.sa[r] = ss[2 * r * ng + c * 8 + g];\n"                                                    \
    "                sg.sb[r] = ss[(2 * r + 1) * ng + c * 8 + g];\n"                                              \
    "            }\n"                                                                                             \
    "            uint4 xv[4];\n"                                                                                  \
    "#pragma unroll\n"                                                                                            \
    "            for (int jj = 0; jj < 4; jj++) xv[jj] = xs[c * 128 + jj * 32 + lane];\n"                        \
    "            w4g_step(sg, acc, xv, odd);\n"                                                                \
    "        }\n"                                                                                                 \
    "        __syncwarp();\n"                                                                                     \
    "        if (lane == 0) qcp_arrive(empty + 8 * st); /* the stage's reads are done: the producer may refill it */\n" \
    "#pragma unroll\n"                                                                                            \
    "        for (int r = 0; r < 2; r++)\n"                                                                       \
    "#pragma unroll\n"                                                                                            \
    "            for (int e = 0; e < 2; e++) {\n"                                                                 \
    "                float v = diag ? acc[r][e] : 0.f;\n"                                                         \
    "#pragma unroll\n"                                                                                            \
    "                for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"               \
    "                const ll row = row0 + 2 * r + e;\n"                                                          \
    "                if (lane == 0 && row < r1) y[row] = v;\n"                                                    \
    "            }\n"                                                                                             \
    "    }\n"                                                                                                     \
    "#if W4T_TRIGGER == 1 /* dependents launch once every block is done with its stages */\n"                  \
    "    qc_grid_trigger();\n"                                                                                    \
    "#endif\n"                                                                                                    \
    "}\n"

static const char W4T_SRC_SYM[] = W4T_SRC;

/* the launch: W4T_BLOCKS blocks of W4T_RPB(n) rows (fewer when n is small), 8 + 1 warps, x + ring + barriers */
static void w4t_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m != 1 || p->n <= 0 || p->k < 1024 || W4T_SMEM(p->k) > W4T_SMEM_MAX) return;
    d->grid[0] = (uint32_t)((p->n + W4T_RPB(p->n) - 1) / W4T_RPB(p->n));
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (W4T_W + 1);
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)W4T_SMEM(p->k);
}

static int w4t_el_sym(const qc_problem *p, qc_reason *why) {
    static const char id[] = "w4a16.gemv1_tma_sym";
    const char *off = getenv("QC_W4T");
    if (off && strcmp(off, "off") == 0) {
        w4_why(why, "off", "%s is switched off (QC_W4T=off)", id);
        return 0;
    }
    if (!w4g_shape_ok(id, p, why)) return 0;
    if (W4T_SMEM(p->k) > W4T_SMEM_MAX) {
        w4_why(why, "shared_memory", "%s keeps x and 8 stages of 4 rows in shared memory, %lld bytes at K=%lld; two "
               "blocks an SM allow %d (w4a16.gemv1_sym takes it)", id, (long long)W4T_SMEM(p->k), (long long)p->k,
               W4T_SMEM_MAX);
        return 0;
    }
    const int min_n = qc_env_int("w4a16", "QC_W4T_MIN_N", 1, INT_MAX, W4T_MIN_N);
    if (p->n < min_n) {
        w4_why(why, "n_range", "%s: n = %lld is below QC_W4T_MIN_N = %d", id, (long long)p->n, min_n);
        return 0;
    }
    return 1;
}

/* ---- w4a16.gemv1_xr_sym ---- */
/*
 * w4a16.gemv1_xr_sym (plugins/common/cuda/gemv1_xr.cuh and cuda/gemv1_xr.cu say how): gemv1's fragments and
 * its weight conditions (sym, g128, K % 1024), with each warp holding x of its K slice in registers for all of its
 * rows, and 7 instructions a word of codes instead of 11 (the per-weight bf16 subtract becomes one per-segment
 * correction from x).  A block is RG row groups x KS K slices (S = 2 steps of 512 bytes a slice when the step
 * count is even, else 1; KS = steps / S, at most 16), over row pairs b P / G .. (b + 1) P / G; the slices' sums
 * meet in shared memory in slice order.  The launch: plugins/common/qc_gemv1_xr_plan.h.
 */
static int g_w4x_warps = QC_XR_WARPS; /* QC_W4X_WARPS, read at registration */

static void w4x_dims(const qc_problem *p, qc_launch_dims *d) { qc_xr_dims(p, g_w4x_warps, d); }

static int w4x_el_sym(const qc_problem *p, qc_reason *why) {
    static const char id[] = "w4a16.gemv1_xr_sym";
    const char *on = getenv("QC_W4X"); /* opt-in: measured slower than gemv1 / gemv1_tma (session 23) */
    if (!on || strcmp(on, "on") != 0) {
        w4_why(why, "off", "%s is opt-in (QC_W4X=on): on the H100 it ran 2-22%% slower than gemv1_tma / gemv1 "
               "(docs/perf.md, session 23)", id);
        return 0;
    }
    if (!w4g_shape_ok(id, p, why)) return 0;
    qc_xr_plan pl;
    if (!qc_xr_plan_of(p->n, p->k, g_w4x_warps, &pl)) {
        w4_why(why, "k_range", "%s gives each of at most %d warps one or two 512-byte steps of K: K=%lld has %lld "
               "(w4a16.gemv1_sym takes it)", id, QC_XR_MAX_WARPS, (long long)p->k, (long long)(p->k / 1024));
        return 0;
    }
    return 1;
}

/* ---- registration ---- */

static const qc_kernel_param w4f_p_sym[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},        {"group_size", QC_PARAM_I64},
};

/* Registered before w4a16.gemv_sym, which it ties with in the engine's
 * selection (same arch and M range): measured faster on the H200, it is
 * the default for symmetric weights with K a multiple of 128. */
qc_status w4_register_frag_kernels(const qc_host_api *api, qc_host *host) {
    /* the GEMVs share their parameters, C reference and flag (codes and scales start loading before qc_grid_wait);
     * the arch is per row: mma.sync bf16 and bf16x2 fma need sm_80, the bulk copies of gemv1_tma sm_90 */
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .format = "w4a16",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .arch = {80, QC_SM_ANY},
        .n_params = sizeof w4f_p_sym / sizeof w4f_p_sym[0],
        .params = w4f_p_sym,
        .reference = (void (*)(void))w4f_ref_sym,
        .flags = QC_KERNEL_GRID_DEP,
    };
    /* what differs; the m = 1 GEMVs first: the engine ranks the narrower M range first, so they take batch-1 decode
     * where they are eligible, in registration order: gemv1_xr (only with QC_W4X=on), then gemv1_tma (sm_90 only),
     * then gemv1 */
    static const struct {
        const char *id, *source, *entry;
        int64_t m_max;
        void (*dims)(const qc_problem *, qc_launch_dims *);
        int (*eligible)(const qc_problem *, qc_reason *);
        int sm_min;
    } rows[] = {
        {"w4a16.gemv1_xr_sym", W4X_SRC_SYM, "qc_w4x_gemv1_sym", 1, w4x_dims, w4x_el_sym, 80},
        {"w4a16.gemv1_tma_sym", W4T_SRC_SYM, "qc_w4t_gemv1_sym", 1, w4t_dims, w4t_el_sym, 90},
        {"w4a16.gemv1_sym", W4G_SRC_SYM, "qc_w4g_gemv1_sym", 1, w4g_dims, w4g_el_sym, 80},
        {"w4a16.gemv_frag_sym", W4F_SRC_SYM, "qc_w4f_gemv_sym", 16, w4f_dims, w4f_el_sym, 80},
    };
    /* QC_W4T_TRIGGER=0..2 (A/B runs): gemv1_tma's W4T_TRIGGER; QC_W4X_OPTS: -D options of gemv1_xr (XR_D, XR_EXACT,
     * XR_PF, XR_TRIGGER); QC_W4X_WARPS: its warps a block */
    static char w4t_buf[32];
    static const char *w4t_list[2];
    const char *const *w4t_opts =
        qc_env_define_int("w4a16", "QC_W4T_TRIGGER", "W4T_TRIGGER", 0, 2, w4t_buf, sizeof w4t_buf, w4t_list);
    static char w4x_buf[8][QC_ENV_OPT_LEN];
    static const char *w4x_list[10];
    const int w4x_n = qc_env_defines("w4a16", "QC_W4X_OPTS", w4x_buf, 8);
    const char *const *w4x_opts = w4x_n ? qc_env_option_list(NULL, w4x_buf, w4x_n, w4x_list) : NULL;
    g_w4x_warps = qc_env_int("w4a16", "QC_W4X_WARPS", 1, QC_XR_MAX_WARPS, QC_XR_WARPS);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        d.id = rows[i].id;
        d.m_max = rows[i].m_max;
        d.cuda_source = rows[i].source;
        d.cuda_entry = rows[i].entry;
        d.launch_dims = rows[i].dims;
        d.eligible = rows[i].eligible;
        d.arch.min_sm = rows[i].sm_min;
        d.nvrtc_options = i == 0 ? w4x_opts : i == 1 ? w4t_opts : NULL;
        qc_status st = api->register_kernel(host, &d);
        if (st != QC_OK) return st;
    }
    return QC_OK;
}
