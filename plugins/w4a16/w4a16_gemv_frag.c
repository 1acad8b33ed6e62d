/* w4a16_gemv_frag.c - the decode GEMVs with W as the mma A operand: nibbles straight into A fragments, from registers or a cp.async ring. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "w4a16_impl.h"

qc_status w4_register_frag_kernels(const qc_host_api *api, qc_host *host);

/*
 * w4a16.gemv_frag_sym: y[m,n] = x[m,k] . W[n,k]^T for 1 <= m <= 16, sym
 * scheme, groups 32/64/128, k % 128 == 0, x bf16 ("x.bf16"), W in
 * pack_version 1 (row-major nibbles, code 2i the low nibble of byte i), f32 y.
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
 * The packed layout needs no repack: the 16 k slots of one mma need not be
 * 16 consecutive codes, only the same codes in A and B.  A 32-bit word of
 * row-major codes holds codes e = 0..7 at bits 4e; (w >> 4s) & 0x000f000f
 * | 0x43004300 is the bf16x2 pair (128 + q_s, 128 + q_s+4), one bf16x2 fma
 * by (1, -136) makes it (q - 8) exactly.  With a word A of row g and B of
 * row g+8 (same codes), two mmas: h = 0 takes pairs s = 0 (slots 2t,2t+1)
 * and s = 1 (slots 2t+8,2t+9), h = 1 takes s = 2 and s = 3.  x's B
 * registers are the same codes: 8 bf16 of x (one 16-byte load) permuted
 * with 4 byte_perms into (e0,e4), (e1,e5), (e2,e6), (e3,e7).  Per word (8
 * weights): 3 shifts, 4 lop3, 4 bf16x2 fma = 11 instructions, 2 mmas.
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
 * both) and a contiguous slice of the chunks; the KS = blockDim / 32 warps
 * of a block split K and add their totals in shared memory, in warp order
 * (deterministic), at the very end.  The main loop holds two register
 * stages: the next chunk's codes, scales and x are loaded before the
 * current chunk is computed (codes with ld.global.nc.L1::no_allocate, x and
 * scales through L1).  No barrier, no shared memory in the loop.  R and KS
 * are the host's (w4f_plan); the device reads KS from blockDim and R from
 * gridDim (R = 1 iff 16 gridDim >= n).  Rows past n are read clamped to
 * n - 1 and not stored; x rows past m are zeros and not stored.
 */

#define W4F_MAX_KS 16

#define W4F_DEV                                                                                                   \
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
    "/* pair s of a word, shifted down already: (128 + q_s, 128 + q_s+4) - 136, exact */\n"                      \
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
    "/* codes: streamed once, kept out of L1 (W4F_L2: an L2 prefetch size, \".L2::256B\", for tuning runs) */\n"  \
    "#ifndef W4F_L2\n"                                                                                          \
    "#define W4F_L2 \"\"\n"                                                                                     \
    "#endif\n"                                                                \
    "template <int GW> __device__ __forceinline__ void w4f_ldq(const u8 *p, u32 *w) {\n"                          \
    "    if constexpr (GW == 4) {\n"                                                                              \
    "        asm(\"ld.global.nc.L1::no_allocate\" W4F_L2 \".v4.u32 {%0,%1,%2,%3}, [%4];\"\n"                                  \
    "            : \"=r\"(w[0]), \"=r\"(w[1]), \"=r\"(w[2]), \"=r\"(w[3]) : \"l\"(p));\n"                        \
    "    } else if constexpr (GW == 2) {\n"                                                                       \
    "        asm(\"ld.global.nc.L1::no_allocate\" W4F_L2 \".v2.u32 {%0,%1}, [%2];\" : \"=r\"(w[0]), \"=r\"(w[1]) : \"l\"(p));\n" \
    "    } else {\n"                                                                                              \
    "        asm(\"ld.global.nc.L1::no_allocate\" W4F_L2 \".u32 %0, [%1];\" : \"=r\"(w[0]) : \"l\"(p));\n"                     \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "/* one chunk (128 codes) of a warp's rows: codes of rows g and g + 8 per tile, their scale words (x is read\n" \
    "   where it is used: L1-resident for the small m that matter, and two stages of it would cost 32 registers) */\n" \
    "template <int R, int NB> struct W4fStage {\n"                                                                \
    "    u32 wa[R][4], wb[R][4]; /* word j of rows g, g + 8 */\n"                                                 \
    "    u32 sa[R][2], sb[R][2]; /* the chunk's 4 / GW f16 scales of rows g, g + 8 */\n"                          \
    "};\n"                                                                                                        \
    "/* x row at word j's 8 codes of chunk c; zeros past m */\n"                                                  \
    "template <int GW> __device__ __forceinline__ uint4 w4f_ldx(const u16 *xr, bool ok, ll c, int j) {\n"        \
    "    return ok ? __ldg((const uint4 *)(xr + c * 128 + (j / GW) * 32 * GW + 8 * (j % GW))) : make_uint4(0u, 0u, 0u, 0u);\n" \
    "}\n"                                                                                                         \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_load(W4fStage<R, NB> &s, ll c, const u8 *const *qa, const u8 *const *qb,\n" \
    "                                         const u16 *const *sa, const u16 *const *sb, const u16 *const *xr,\n" \
    "                                         const bool *xok) {\n"                                               \
    "    constexpr int GPC = 4 / GW; /* groups per chunk */\n"                                                    \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++) {\n"                                                                         \
    "#pragma unroll\n"                                                                                            \
    "        for (int l = 0; l < GPC; l++) {\n"                                                                   \
    "            w4f_ldq<GW>(qa[r] + c * 64 + l * 16 * GW, &s.wa[r][l * GW]);\n"                                  \
    "            w4f_ldq<GW>(qb[r] + c * 64 + l * 16 * GW, &s.wb[r][l * GW]);\n"                                  \
    "        }\n"                                                                                                 \
    "        if constexpr (GPC == 4) {\n"                                                                         \
    "            const uint2 a = __ldg((const uint2 *)(sa[r] + c * 4)), b = __ldg((const uint2 *)(sb[r] + c * 4));\n" \
    "            s.sa[r][0] = a.x; s.sa[r][1] = a.y; s.sb[r][0] = b.x; s.sb[r][1] = b.y;\n"                      \
    "        } else if constexpr (GPC == 2) {\n"                                                                  \
    "            s.sa[r][0] = __ldg((const unsigned int *)(sa[r] + c * 2));\n"                                    \
    "            s.sb[r][0] = __ldg((const unsigned int *)(sb[r] + c * 2));\n"                                    \
    "        } else {\n"                                                                                          \
    "            s.sa[r][0] = __ldg(sa[r] + c);\n"                                                                \
    "            s.sb[r][0] = __ldg(sb[r] + c);\n"                                                                \
    "        }\n"                                                                                                 \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "/* f16 scale of group gq of the chunk from its scale words */\n"                                             \
    "template <int GW> __device__ __forceinline__ float w4f_scale(const u32 *sw, int gq) {\n"                    \
    "    if constexpr (GW == 4) return w4f_h2f(sw[0]);\n"                                                         \
    "    else return w4f_h2f(sw[gq >> 1] >> (16 * (gq & 1)));\n"                                                  \
    "}\n"                                                                                                         \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_compute(const W4fStage<R, NB> &s, float (*acc)[NB][4], ll c,\n"            \
    "                                            const u16 *const *xr, const bool *xok) {\n"                     \
    "    constexpr int GPC = 4 / GW;\n"                                                                           \
    "    uint4 xv[NB][4];\n"                                                                                      \
    "#pragma unroll\n"                                                                                            \
    "    for (int nb = 0; nb < NB; nb++)\n"                                                                       \
    "#pragma unroll\n"                                                                                            \
    "        for (int j = 0; j < 4; j++) xv[nb][j] = w4f_ldx<GW>(xr[nb], xok[nb], c, j);\n"                       \
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
    "            u32 b[NB][4]; /* B registers: (e0,e4), (e1,e5) for h = 0; (e2,e6), (e3,e7) for h = 1 */\n"      \
    "#pragma unroll\n"                                                                                            \
    "            for (int nb = 0; nb < NB; nb++) {\n"                                                             \
    "                const uint4 v = xv[nb][j];\n"                                                                \
    "                b[nb][0] = __byte_perm(v.x, v.z, 0x5410);\n"                                                 \
    "                b[nb][1] = __byte_perm(v.x, v.z, 0x7632);\n"                                                 \
    "                b[nb][2] = __byte_perm(v.y, v.w, 0x5410);\n"                                                 \
    "                b[nb][3] = __byte_perm(v.y, v.w, 0x7632);\n"                                                 \
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
    "/* the K split: warps 1.. leave their totals, warp 0 adds them in warp order and stores */\n"    \
    "template <int R, int NB>\n"    \
    "__device__ __forceinline__ void w4f_finish(float (*acc)[NB][4], float *y, int m, int n, int n0, float *red) {\n" \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3, ks = blockDim.x >> 5;\n" \
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
    "}\n"

#define W4F_FRAG                                                                                                  \
    "template <int GW, int R, int NB>\n"                                                                          \
    "__device__ __forceinline__ void w4f_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                         int n0, float *red) {\n"                                            \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"             \
    "    const int ks = blockDim.x >> 5;\n"                                                                       \
    "    const ll ng = k / (32 * GW), chunks = k >> 7;\n"                                                         \
    "    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;\n"   \
    "    const u8 *qa[R], *qb[R];\n"                                                                              \
    "    const u16 *sa[R], *sb[R], *xr[NB];\n"                                                                    \
    "    bool xok[NB];\n"                                                                                         \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++) {\n"                                                                         \
    "        int ra = n0 + 16 * r + g, rb = ra + 8;\n"                                                            \
    "        ra = ra < n ? ra : n - 1;\n"                                                                         \
    "        rb = rb < n ? rb : n - 1;\n"                                                                         \
    "        qa[r] = q + (ll)ra * (k / 2) + 4 * GW * t;\n"                                                        \
    "        qb[r] = q + (ll)rb * (k / 2) + 4 * GW * t;\n"                                                        \
    "        sa[r] = sc + ra * ng;\n"                                                                             \
    "        sb[r] = sc + rb * ng;\n"                                                                             \
    "    }\n"                                                                                                     \
    "#pragma unroll\n"                                                                                            \
    "    for (int nb = 0; nb < NB; nb++) {\n"                                                                     \
    "        xok[nb] = g + 8 * nb < m;\n"                                                                         \
    "        xr[nb] = x + (xok[nb] ? (ll)(g + 8 * nb) * k : 0) + 8 * GW * t;\n"                                   \
    "    }\n"                                                                                                     \
    "    float acc[R][NB][4];\n"                                                                                  \
    "#pragma unroll\n"                                                                                            \
    "    for (int r = 0; r < R; r++)\n"                                                                           \
    "#pragma unroll\n"                                                                                            \
    "        for (int nb = 0; nb < NB; nb++)\n"                                                                   \
    "#pragma unroll\n"                                                                                            \
    "            for (int e = 0; e < 4; e++) acc[r][nb][e] = 0.f;\n"                                              \
    "    /* two register stages, loaded one chunk ahead; the loop body is unrolled by two so no stage is copied */\n" \
    "    W4fStage<R, NB> s0, s1;\n"                                                                               \
    "    if (c0 < c1) w4f_load<GW, R, NB>(s0, c0, qa, qb, sa, sb, xr, xok);\n"                                    \
    "    for (ll c = c0; c < c1; c += 2) {\n"                                                                     \
    "        if (c + 1 < c1) w4f_load<GW, R, NB>(s1, c + 1, qa, qb, sa, sb, xr, xok);\n"                          \
    "        w4f_compute<GW, R, NB>(s0, acc, c, xr, xok);\n"                                                                  \
    "        if (c + 1 >= c1) break;\n"                                                                           \
    "        if (c + 2 < c1) w4f_load<GW, R, NB>(s0, c + 2, qa, qb, sa, sb, xr, xok);\n"                          \
    "        w4f_compute<GW, R, NB>(s1, acc, c + 1, xr, xok);\n"                                                                  \
    "    }\n"                                                                                                     \
    "    w4f_finish<R, NB>(acc, y, m, n, n0, red);\n"                                                            \
    "}\n"                                                                                                    \
    "/* m > 8 (two n8 tiles of x) and g32 (four scale words a row a stage) run one 16-row tile at a time, the\n" \
    "   tiles of a 32-row block in turn: two W tiles would not fit 128 registers (the host plans R = 1 for them) */\n" \
    "template <int GW>\n"                                                                                         \
    "__device__ __forceinline__ void w4f_go(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                       int R, float *red) {\n"                                               \
    "    const int n0 = blockIdx.x * (16 * R); /* n < 2^31 (eligibility) */\n"                                    \
    "    if (m > 8) {\n"                                                                                          \
    "        w4f_gemv<GW, 1, 2>(x, q, sc, y, m, n, k, n0, red);\n"                                                \
    "        if (R == 2 && n0 + 16 < n) w4f_gemv<GW, 1, 2>(x, q, sc, y, m, n, k, n0 + 16, red);\n"                \
    "    } else if (R == 2 && GW == 1) {\n"                                                                       \
    "        w4f_gemv<GW, 1, 1>(x, q, sc, y, m, n, k, n0, red);\n"                                                \
    "        if (n0 + 16 < n) w4f_gemv<GW, 1, 1>(x, q, sc, y, m, n, k, n0 + 16, red);\n"                          \
    "    } else if (R == 2) {\n"                                                                                  \
    "        w4f_gemv<GW, 2, 1>(x, q, sc, y, m, n, k, n0, red);\n"                                                \
    "    } else {\n"                                                                                              \
    "        w4f_gemv<GW, 1, 1>(x, q, sc, y, m, n, k, n0, red);\n"                                                \
    "    }\n"                                                                                                     \
    "}\n"                                                                                                         \
    "extern \"C\" __global__ void __launch_bounds__(512) qc_w4f_gemv_sym(const u16 *x, const u8 *q, const u16 *s,\n" \
    "        float *y, ll m, ll n, ll k, ll gs) {\n"                                                              \
    "    extern __shared__ float red[];\n"                                                                        \
    "    if (m <= 0 || m > 16 || n <= 0 || k <= 0 || (k & 127)) return;\n"                                        \
    "    /* the host's tile count: R = 1 gives 16-row blocks (then 16 gridDim >= n), R = 2 32-row ones */\n"      \
    "    const int R = (ll)gridDim.x * 16 >= n ? 1 : 2;\n"                                                        \
    "    if (gs == 128) w4f_go<4>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                                \
    "    else if (gs == 64) w4f_go<2>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                            \
    "    else if (gs == 32) w4f_go<1>(x, q, s, y, (int)m, (int)n, k, R, red);\n"                                            \
    "}\n"

#define W4R_RING                                                                                                  \
    "/* cp.async: a stage goes global -> shared without registers, so bytes in flight no longer cost registers */\n" \
    "__device__ __forceinline__ u32 w4r_sa(const void *p) { return (u32)__cvta_generic_to_shared(p); }\n"          \
    "__device__ __forceinline__ void w4r_cp16(u32 dst, const void *src) {\n"                                       \
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" ::\"r\"(dst), \"l\"(src) : \"memory\");\n"     \
    "}\n"                                                                                                          \
    "__device__ __forceinline__ void w4r_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"  \
    "template <int N> __device__ __forceinline__ void w4r_wait() { asm volatile(\"cp.async.wait_group %0;\" ::\"n\"(N) : \"memory\"); }\n" \
    "/* A warp streams one 16-row tile; a stage is 8 chunks (1024 codes): 512 contiguous bytes of each row, copied one\n" \
    "   row per instruction (lane l the l-th 16 bytes), then the rows' 8 x (4 / GW) f16 scales.  W4R_S slots. */\n" \
    "#define W4R_S 3\n"                                                                                            \
    "template <int GW> struct W4rRing {\n"                                                                         \
    "    static constexpr int CODES = 16 * 512, SCALES = 16 * 16 * (4 / GW), SLOT = CODES + SCALES, BYTES = W4R_S * SLOT;\n" \
    "};\n"                                                                                                         \
    "/* XOR swizzle of a row's byte offsets (16-byte units stay whole) so that the fragment reads of one phase hit\n" \
    "   distinct banks: rows g, g + 1 (16-byte reads, 8 lanes a phase), g..g + 3 (8-byte, 16 lanes), g..g + 7 (4-byte) */\n" \
    "template <int GW> __device__ __forceinline__ int w4r_swz(int row) {\n"                                        \
    "    if constexpr (GW == 4) return (row & 1) << 6;\n"                                                          \
    "    else if constexpr (GW == 2) return ((row & 1) << 6) | ((row & 2) << 4);\n"                                \
    "    else return (row & 7) << 4;\n"                                                                            \
    "}\n"                                                                                                          \
    "/* copy stage a (codes a * 1024 ..) of the tile's rows into slot sl */\n"                                     \
    "template <int GW>\n"                                                                                          \
    "__device__ __forceinline__ void w4r_issue(u32 ring, int sl, ll a, const u8 *q0, ll rowb, const u16 *s0, ll ng,\n" \
    "                                          int lane, int nrows) {\n"                                           \
    "    const u32 base = ring + sl * W4rRing<GW>::SLOT;\n"                                                        \
    "#pragma unroll\n"                                                                                             \
    "    for (int r = 0; r < 16; r++) {\n"                                                                         \
    "        const int rr = r < nrows ? r : nrows - 1; /* rows past n read the last one, not stored */\n"          \
    "        w4r_cp16(base + r * 512 + ((16 * lane) ^ w4r_swz<GW>(r)), q0 + rr * rowb + a * 512 + 16 * lane);\n"   \
    "    }\n"                                                                                                      \
    "    /* scales: row r's 8 (4 / GW) f16 are (4 / GW) units of 16 bytes; 16 (4 / GW) units in all */\n"          \
    "#pragma unroll\n"                                                                                             \
    "    for (int u = lane; u < 16 * (4 / GW); u += 32) {\n"                                                       \
    "        const int r = u / (4 / GW), p = u % (4 / GW), rr = r < nrows ? r : nrows - 1;\n"                      \
    "        w4r_cp16(base + W4rRing<GW>::CODES + u * 16, s0 + rr * ng + a * 8 * (4 / GW) + p * 8);\n"             \
    "    }\n"                                                                                                      \
    "}\n"                                                                                                          \
    "/* chunk j of one row of slot sl: the words and scale words w4f_load would have loaded for it */\n"           \
    "template <int GW>\n"                                                                                          \
    "__device__ __forceinline__ void w4r_row(u32 *w, u32 *sc, const unsigned char *base, int row, int j, int t) {\n" \
    "    const unsigned char *rp = base + row * 512;\n"                                                            \
    "    const int sw = w4r_swz<GW>(row), o = j * 64;\n"                                                           \
    "    if constexpr (GW == 4) {\n"                                                                               \
    "        const uint4 v = *(const uint4 *)(rp + ((o + 16 * t) ^ sw));\n"                                        \
    "        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;\n"                                                    \
    "    } else if constexpr (GW == 2) {\n"                                                                        \
    "        const uint2 v0 = *(const uint2 *)(rp + ((o + 8 * t) ^ sw)), v1 = *(const uint2 *)(rp + ((o + 32 + 8 * t) ^ sw));\n" \
    "        w[0] = v0.x; w[1] = v0.y; w[2] = v1.x; w[3] = v1.y;\n"                                                \
    "    } else {\n"                                                                                               \
    "#pragma unroll\n"                                                                                             \
    "        for (int l = 0; l < 4; l++) w[l] = *(const u32 *)(rp + ((o + 16 * l + 4 * t) ^ sw));\n"               \
    "    }\n"                                                                                                      \
    "    const unsigned char *sp = base + W4rRing<GW>::CODES + row * 16 * (4 / GW);\n"                             \
    "    if constexpr (GW == 4) sc[0] = *(const u16 *)(sp + 2 * j);\n"                                             \
    "    else if constexpr (GW == 2) sc[0] = *(const u32 *)(sp + 4 * j);\n"                                        \
    "    else { sc[0] = *(const u32 *)(sp + 8 * j); sc[1] = *(const u32 *)(sp + 8 * j + 4); }\n"                   \
    "}\n"                                                                                                          \
    "/* chunk j of slot sl into the registers w4f_compute takes: rows g and g + 8 of lane (g, t) */\n"             \
    "template <int GW, int NB>\n"                                                                                  \
    "__device__ __forceinline__ void w4r_fill(W4fStage<1, NB> &s, const unsigned char *ring, int sl, int j, int lane) {\n" \
    "    const unsigned char *base = ring + sl * W4rRing<GW>::SLOT;\n"                                             \
    "    w4r_row<GW>(s.wa[0], s.sa[0], base, lane >> 2, j, lane & 3);\n"                                           \
    "    w4r_row<GW>(s.wb[0], s.sb[0], base, (lane >> 2) + 8, j, lane & 3);\n"                                     \
    "}\n"                                                                                                          \
    "template <int GW, int NB>\n"                                                                                  \
    "__device__ __forceinline__ void w4r_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,\n" \
    "                                         int n0, unsigned char *smem) {\n"                                    \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"               \
    "    const int ks = blockDim.x >> 5;\n"                                                                        \
    "    const ll ng = k / (32 * GW), stages = k >> 10;\n"                                                         \
    "    const ll spw = (stages + ks - 1) / ks, a0 = warp * spw, a1 = a0 + spw < stages ? a0 + spw : stages;\n"    \
    "    const int nst = a1 > a0 ? (int)(a1 - a0) : 0;\n"                                                          \
    "    unsigned char *ring = smem + warp * W4rRing<GW>::BYTES;\n"                                                \
    "    float *red = (float *)(smem + ks * W4rRing<GW>::BYTES);\n"                                                \
    "    const u32 ring_sa = w4r_sa(ring);\n"                                                                      \
    "    const int nrows = n - n0 < 16 ? n - n0 : 16;\n"                                                           \
    "    const u8 *q0 = q + (ll)n0 * (k / 2);\n"                                                                   \
    "    const u16 *s0 = sc + (ll)n0 * ng;\n"                                                                      \
    "    const u16 *xr[NB];\n"                                                                                     \
    "    bool xok[NB];\n"                                                                                          \
    "#pragma unroll\n"                                                                                             \
    "    for (int nb = 0; nb < NB; nb++) {\n"                                                                      \
    "        xok[nb] = g + 8 * nb < m;\n"                                                                          \
    "        xr[nb] = x + (xok[nb] ? (ll)(g + 8 * nb) * k : 0) + 8 * GW * t;\n"                                    \
    "    }\n"                                                                                                      \
    "    float acc[1][NB][4];\n"                                                                                   \
    "#pragma unroll\n"                                                                                             \
    "    for (int nb = 0; nb < NB; nb++)\n"                                                                        \
    "#pragma unroll\n"                                                                                             \
    "        for (int e = 0; e < 4; e++) acc[0][nb][e] = 0.f;\n"                                                   \
    "    /* W4R_S - 1 stages in flight ahead of the one computed; a group is committed every step (empty ones too) so\n" \
    "       wait_group counts stages */\n"                                                                         \
    "#pragma unroll\n"                                                                                             \
    "    for (int i = 0; i < W4R_S - 1; i++) {\n"                                                                  \
    "        if (i < nst) w4r_issue<GW>(ring_sa, i, a0 + i, q0, k / 2, s0, ng, lane, nrows);\n"                    \
    "        w4r_commit();\n"                                                                                      \
    "    }\n"                                                                                                      \
    "    for (int i = 0; i < nst; i++) {\n"                                                                        \
    "        const int nx = i + W4R_S - 1;\n"                                                                      \
    "        if (nx < nst) w4r_issue<GW>(ring_sa, nx % W4R_S, a0 + nx, q0, k / 2, s0, ng, lane, nrows);\n"         \
    "        w4r_commit();\n"                                                                                      \
    "        w4r_wait<W4R_S - 1>();\n"                                                                             \
    "        __syncwarp(); /* the slot was copied by every lane */\n"                                              \
    "        const int sl = i % W4R_S;\n"                                                                          \
    "#pragma unroll 2\n"                                                                                           \
    "        for (int j = 0; j < 8; j++) {\n"                                                                      \
    "            W4fStage<1, NB> s;\n"                                                                             \
    "            w4r_fill<GW, NB>(s, ring, sl, j, lane);\n"                                                        \
    "            w4f_compute<GW, 1, NB>(s, acc, 8 * (a0 + i) + j, xr, xok);\n"                                     \
    "        }\n"                                                                                                  \
    "        __syncwarp(); /* slot sl is refilled next step */\n"                                                  \
    "    }\n"                                                                                                      \
    "    w4r_wait<0>();\n"                                                                                         \
    "    w4f_finish<1, NB>(acc, y, m, n, n0, red);\n"                                                              \
    "}\n"                                                                                                          \
    "extern \"C\" __global__ void __launch_bounds__(256) qc_w4r_gemv_sym(const u16 *x, const u8 *q, const u16 *s,\n" \
    "        float *y, ll m, ll n, ll k, ll gs) {\n"                                                               \
    "    extern __shared__ __align__(16) unsigned char smem[];\n"                                                  \
    "    if (m <= 0 || m > 16 || n <= 0 || k <= 0 || (k & 1023)) return;\n"                                        \
    "    const int n0 = blockIdx.x * 16; /* n < 2^31 (eligibility) */\n"                                           \
    "    if (m > 8) {\n"                                                                                           \
    "        if (gs == 128) w4r_gemv<4, 2>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                            \
    "        else if (gs == 64) w4r_gemv<2, 2>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                        \
    "        else if (gs == 32) w4r_gemv<1, 2>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                        \
    "    } else {\n"                                                                                               \
    "        if (gs == 128) w4r_gemv<4, 1>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                            \
    "        else if (gs == 64) w4r_gemv<2, 1>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                        \
    "        else if (gs == 32) w4r_gemv<1, 1>(x, q, s, y, (int)m, (int)n, k, n0, smem);\n"                        \
    "    }\n"                                                                                                      \
    "}\n"

static const char W4F_SRC_SYM[] =
    "/* qcore w4a16 GEMV, W as the mma A operand: y[m,n] = x[m,k] . W4[n,k]^T, m <= 16, sym */\n" W4F_DEV W4F_FRAG;
static const char W4R_SRC_SYM[] =
    "/* qcore w4a16 GEMV, W as the mma A operand, codes through a cp.async ring: m <= 16, sym */\n" W4F_DEV W4R_RING;

/* ---- the launch plan (the device reads KS from blockDim and R from gridDim) ---- */

/* Warps wanted in all: 16 per SM of an H200 (128 registers a thread), one wave. */
#define W4F_WANT_WARPS 2112

typedef struct w4f_plan {
    int r, ks;
    int64_t blocks;
} w4f_plan;

/* R = 2 (x's registers serve two tiles) unless that leaves fewer than two
 * blocks per SM's worth of 16-row tiles; KS doubles while the warps stay
 * under the target and each keeps at least two chunks.  QC_W4F_R and
 * QC_W4F_KS override (tuning on the device; the device follows the launch). */
static void w4f_plan_of(int64_t m, int64_t n, int64_t k, int64_t g, w4f_plan *p) {
    memset(p, 0, sizeof *p);
    if (m <= 0 || n <= 0 || k < 128) return;
    int64_t chunks = k / 128, tiles = (n + 15) / 16;
    p->r = tiles >= 2 * 264 && m <= 8 && g != 32 ? 2 : 1; /* the device runs m > 8 and g32 a tile at a time */
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

/* The ring GEMV: one 16-row tile a warp, K split over KS <= 8 warps of a
 * block.  Warps wanted in all: 8 per SM of an H200, what its shared memory
 * holds (W4R_S = 3 slots of 8 KiB of codes and their scales a warp): with
 * two stages ahead, up to 16 KiB in flight a warp, ~128 KiB an SM. */
#define W4R_WANT_WARPS 1056
#define W4R_MAX_KS 8
#define W4R_SLOTS 3
#define W4R_SLOT_BYTES(g) ((uint32_t)(16 * 512 + 16 * 16 * 4 * 32 / (g)))

/* KS doubles while the warps stay under the target and each keeps at least
 * two stages (1024 codes each).  QC_W4R_KS overrides. */
static void w4r_plan_of(int64_t m, int64_t n, int64_t k, w4f_plan *p) {
    memset(p, 0, sizeof *p);
    if (m <= 0 || n <= 0 || k < 1024) return;
    int64_t stages = k / 1024, tiles = (n + 15) / 16;
    p->r = 1;
    p->blocks = tiles;
    p->ks = 1;
    while (p->ks < W4R_MAX_KS && p->blocks * p->ks * 2 <= W4R_WANT_WARPS && stages >= 2 * p->ks) p->ks *= 2;
    const char *ek = getenv("QC_W4R_KS");
    if (ek) {
        int v = atoi(ek);
        if (v >= 1 && v <= W4R_MAX_KS) p->ks = v;
    }
}

static void w4r_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    w4f_plan pl;
    w4r_plan_of(p->m, p->n, p->k, &pl);
    if (pl.blocks <= 0 || pl.blocks > 0x7fffffffLL || p->group_size < 32) return;
    d->grid[0] = (uint32_t)pl.blocks;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (uint32_t)pl.ks;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)pl.ks * W4R_SLOTS * W4R_SLOT_BYTES(p->group_size) + w4f_red_bytes(p->m, &pl);
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

/* id streams K in chunks of kc codes */
static int w4f_el_common(const qc_problem *p, qc_reason *why, const char *id, int64_t kc) {
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
    if (!w4_group_ok(p->group_size)) {
        w4_why(why, "group", "%s needs the weight's group size (32, 64 or 128), problem has %u", id, p->group_size);
        return 0;
    }
    if (!w4_shape_ok(p->n, p->k, p->group_size, why)) return 0;
    if (p->k % kc) {
        w4_why(why, "align_k", "%s streams K in chunks of %lld codes, layer has K=%lld (w4a16.gemv_sym takes it)", id,
               (long long)kc, (long long)p->k);
        return 0;
    }
    if ((p->n + 15) / 16 > 0x7fffffffLL) {
        w4_why(why, "shape", "%s: n = %lld needs more blocks than a grid holds", id, (long long)p->n);
        return 0;
    }
    return 1;
}

static int w4f_el_sym(const qc_problem *p, qc_reason *why) {
    return w4f_el_common(p, why, "w4a16.gemv_frag_sym", 128);
}

/* 1024: a ring stage is 512 bytes of each row, and its scales are whole aligned 16-byte copies */
static int w4r_el_sym(const qc_problem *p, qc_reason *why) {
    return w4f_el_common(p, why, "w4a16.gemv_ring_sym", 1024);
}

/* ---- registration ---- */

static const qc_kernel_param w4f_p_sym[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},        {"group_size", QC_PARAM_I64},
};

/* Both are registered before w4a16.gemv_sym, which they tie with in the
 * engine's selection (same arch and M range), the ring first: measured
 * faster on the H200 (docs/perf.md).  QC_W4R_LAST=1 registers the ring
 * after the fragment GEMV (A/B runs of the engine). */
qc_status w4_register_frag_kernels(const qc_host_api *api, qc_host *host) {
    qc_kernel_desc f = {
        .struct_size = sizeof f,
        .id = "w4a16.gemv_frag_sym",
        .format = "w4a16",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 16,
        .arch = {80, QC_SM_ANY}, /* mma.sync bf16 and bf16x2 fma: sm_80 */
        .n_params = sizeof w4f_p_sym / sizeof w4f_p_sym[0],
        .params = w4f_p_sym,
        .reference = (void (*)(void))w4f_ref_sym,
        .cuda_source = W4F_SRC_SYM,
        .cuda_entry = "qc_w4f_gemv_sym",
        .launch_dims = w4f_dims,
        .eligible = w4f_el_sym,
    };
    qc_kernel_desc r = f;
    r.id = "w4a16.gemv_ring_sym";
    r.cuda_source = W4R_SRC_SYM;
    r.cuda_entry = "qc_w4r_gemv_sym";
    r.launch_dims = w4r_dims;
    r.eligible = w4r_el_sym;
    /* QC_W4F_L2=128B|256B: the fragment GEMV's code loads with that L2 prefetch size (tuning runs) */
    static char src_l2[sizeof W4F_SRC_SYM + 64];
    const char *l2 = getenv("QC_W4F_L2");
    if (l2 && (!strcmp(l2, "128B") || !strcmp(l2, "256B"))) {
        snprintf(src_l2, sizeof src_l2, "#define W4F_L2 \".L2::%s\"\n%s", l2, W4F_SRC_SYM);
        f.cuda_source = src_l2;
    }
    const char *last = getenv("QC_W4R_LAST");
    int ring_first = !(last && atoi(last) == 1);
    qc_status st = api->register_kernel(host, ring_first ? &r : &f);
    if (st != QC_OK) return st;
    return api->register_kernel(host, ring_first ? &f : &r);
}
