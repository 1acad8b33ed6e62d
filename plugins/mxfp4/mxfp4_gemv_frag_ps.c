/* mxfp4_gemv_frag_ps.c - the mxfp4 decode GEMV for m 5..16: w4a16.gemv_frag_sym's plan with the block scale folded into the A fragments (no per-block promotion). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/qc_env_opts.h"
#include "../common/qc_gemv1_plan.h"
#include "../common/qc_gemv1_xr_plan.h"
#include "../common/qc_tma_pipe_src.h"
#include "mxfp4_cuda.h"
#include "mxfp4_cuda_src.h"

/*
 * mxfp4.gemv_frag_ps: y[m,n] = x[m,k] . dec(W)[n,k]^T for 1 <= m <= 16,
 * k % 128 == 0, x bf16 ("x.bf16"), W in the format's own layout (qweight
 * u8 [n, k/2], element 2i in the low nibble of byte i; scales E8M0
 * [n, k/32]; no repack, no second copy), f32 y.  Registered after
 * mxfp4.gemv_frag (m <= 4) and before mxfp4.gemv, so the engine picks it
 * for m 5..16.
 *
 * Why another kernel.  mxfp4.gemv_frag keeps a 32-element block's halves
 * apart in x's columns so that it can promote each block's f32 sum by the
 * block scale: four tokens per n8 tile, so above m = 4 it issues twice
 * w4a16's mma count (NB = 2, 4 tiles), 147 / 204 SASS instructions per 16
 * bytes of codes at m <= 8 / 16.  Here the scale is applied before the
 * tensor cores instead, as mxfp4.gemv does: the decoded bf16 weight is the
 * exact E2M1 value times 2^(e-127) (bf16 has f32's exponent range: exact
 * unless it overflows, as in the f32 reference; subnormal weights for
 * e <= 1, as in mxfp4.gemv), so an mma may mix blocks with different
 * scales and no promotion is needed at all.  Then lane t of a quad can
 * own a whole block: one 16-byte ld.global.nc.L1::no_allocate.v4 of row g
 * (bytes 16 t .. 16 t + 15 of the 64-byte chunk = block t) and one of row
 * g + 8, exactly w4a16.gemv_frag_sym's group-128 load pattern, and the
 * lane needs one scale byte a row a chunk (its block's; an LDG.U8).
 *
 * Fragments (PTX ISA, mma.m16n8k16 bf16): lane (g = lane >> 2, t = lane &
 * 3) holds A row g (a0 k slots 2t,2t+1; a2 2t+8,2t+9) and row g + 8 (a1,
 * a3), B column g (b0 slots 2t,2t+1, b1 2t+8,2t+9), D row g columns 2t,
 * 2t+1 (c0, c1) and row g + 8 (c2, c3).  A word of 8 codes (code i at bits
 * 4i) gives 4 bf16x2 pairs p = (code p, code p + 4); mma h of word j takes
 * pairs 2h (slots 2t, 2t+1) and 2h + 1 (slots 2t+8, 2t+9), and x's B
 * registers are the same 8 elements of x (one 16-byte load) permuted into
 * (e0,e4), (e1,e5), (e2,e6), (e3,e7) by 4 byte_perms, as in w4a16.  Column
 * j of n8 tile nb is token 8 nb + j: NB = 1 tile at m <= 8, 2 above (the
 * same mma count as w4a16.gemv_frag_sym: half of mxfp4.gemv_frag's).
 *
 * Decode of pair p, q' = q (p = 0, 1) or q >> 8 (p = 2, 3):
 *   v = ((q' & 0x000F000F) * 4160) & 0x81C081C0   (p even)
 *   v = ((q' & 0x00F000F0) *  260) & 0x81C081C0   (p odd)
 * is the E2M1 value times 2^-126 in bf16 bits (mxfp4_gemv_frag.c), and one
 * fma.rn.bf16x2 v * S + (-0, -0) with S = 2^(e-1) in both halves makes it
 * value * 2^(e-127), exact (S = ((e + 126) << 7) * 0x10001, a bf16 for e
 * <= 128).  Per word: 1 shift, 4 x (and, imad, and), 4 fma = 17, the same
 * as mxfp4.gemv_frag's (w4a16's is 11).  Scale bytes above 128 (2^(e-1) is
 * no bf16) and 0xFF (NaN) take a second copy of the chunk's code picked by
 * a warp vote (a branch per word would be predicated into every chunk):
 * there S = 2^126 (NaN for 0xFF) and a second bf16x2 multiply by
 * 2^(e-127), mxfp4.gemv's factors.  Never, for a real model's weights.
 *
 * Work, as w4a16.gemv_frag_sym: a warp owns R = 1 or 2 tiles of 16 rows
 * (R = 2 with at least 528 tiles, e.g. gate_up: x's B registers serve
 * both, and a warp has twice the codes in flight; w4a16 runs its two tiles
 * in turn above m = 8 for lack of registers, here R = 2 with NB = 2 fits
 * in 125) and a contiguous slice of the k / 128 chunks; the KS = blockDim
 * / 32 warps of a block split K (about 16 warps an SM, one wave) and add
 * their totals in shared memory in warp order (deterministic) at the end.
 * Two register stages: the next chunk's codes and scale bytes are loaded
 * before the current chunk is computed; x is read where it is used (L1).
 * (QC_MXP_STAGES=3 at registration builds three stages, two chunks ahead,
 * 1.5x the codes in flight: an A/B knob, not measured yet; there R = 2 at
 * m > 8 runs the two tiles in turn, as two at once would spill.)  Rows
 * past n are read clamped to n - 1 and not stored; tokens past m read x's
 * row m - 1 (no predicated loads, no zero fill) and are not stored (an
 * mma's D column depends on its own B column only).  The device reads KS
 * from blockDim and R from gridDim (R = 1 iff 16 gridDim >= n).
 *
 * Expected cost.  SASS of the chunk loops for sm_90a on the common path
 * (test_mxfp4_frag_unit), instructions per 16 bytes of codes a lane
 * streams: R = 1: 94 at m <= 8, 115 at m <= 16; R = 2: 86 / 95 (decode
 * 32 LOP3 + 16 IMAD + 16 HMUL2 + 4 SHF of it; 4 NB HMMA; 4 NB PRMT / R).
 * mxfp4.gemv_frag: 110 at m <= 4 (R = 1), 147 at m <= 8, 204 at m <= 16;
 * w4a16.gemv_frag_sym's decode is 11 a word instead of 17, so about 75-95
 * there.  Loads per chunk a lane (R = 1): 2 x 16 B of codes (w4a16's
 * group-128 pattern), 2 scale bytes, 4 NB x 16 B of x from L1.  The mma
 * count is w4a16's (half of mxfp4.gemv_frag's above m = 4).  Bytes in
 * flight a warp are w4a16's (two stages of 32 B a lane a tile), and that,
 * not issue, bounds these kernels on the H200: w4a16 runs at 0.77-1.3 TB/s
 * at m = 16 on the Llama shapes while its issue would allow several times
 * that.  So the aim is w4a16.gemv_frag_sym's time (o 11.8, down 26.0 us at
 * m = 16) plus a little for the longer decode, and below it on gate_up
 * (R = 2 at m > 8).  mxfp4.gemv (same decode) loads x inside its quad loop
 * at m > 8 with 8 warps an SM and splits K only 4 ways.
 *
 * Called anyway with k % 128 != 0, m > 16 or misaligned pointers (codes
 * and x 16-byte aligned), the kernel writes NaN to every output, as
 * mxfp4.gemv does.
 */

#define MXP_SRC_BODY                                                                                                            \
    "/* qcore mxfp4 GEMV, block scale in the A fragments: y[m,n] = x[m,k] . dec(W)[n,k]^T, m <= 16 */\n"                        \
    "#ifndef MXP_QSTEP /* bytes of a row, scale bytes, x elements per chunk step: 128 codes (gemv_frag_ps) */\n"           \
    "#define MXP_QSTEP 64\n"                                                                                                    \
    "#define MXP_SSTEP 4\n"                                                                                                     \
    "#define MXP_XSTEP 128\n"                                                                                                   \
    "#endif\n"                                                                                                                  \
    "#ifndef MXP_STAGES\n"                                                                                                      \
    "#define MXP_STAGES 2 /* register stages of codes a lane: 2 (w4a16's), or 3 (QC_MXP_STAGES=3) */\n"                         \
    "#endif\n"                                                                                                                  \
    "typedef unsigned int u32;\n"                                                                                               \
    "typedef unsigned short u16;\n"                                                                                             \
    "typedef unsigned char u8;\n"                                                                                               \
    "typedef long long ll;\n"                                                                                                   \
    "#define MXP_P126 0x7E807E80u /* bf16x2 (2^126, 2^126) */\n"                                                                \
    "#define MXP_NAN2 0x7FC07FC0u\n"                                                                                            \
    "__device__ __forceinline__ void mxp_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {\n"                     \
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"                                               \
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"                                           \
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"                                               \
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"                                   \
    "}\n"                                                                                                                       \
    "/* a * b in bf16x2, exact here (+ (-0, -0) keeps the sign of a zero) */\n"                                                 \
    "__device__ __forceinline__ u32 mxp_mul2(u32 a, u32 b) {\n"                                                                 \
    "    u32 d;\n"                                                                                                              \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(0x80008000u));\n"                        \
    "    return d;\n"                                                                                                           \
    "}\n"                                                                                                                       \
    "/* pair (code p, code p + 4) of a word as value * 2^-126: MASK/MUL 0x000F000F/4160 (p even), 0x00F000F0/260 (odd) */\n"    \
    "template <u32 MASK, u32 MUL> __device__ __forceinline__ u32 mxp_raw(u32 q) { return ((q & MASK) * MUL) & 0x81C081C0u; }\n" \
    "/* the factor that makes value * 2^-126 the value times 2^(e-127): 2^(e-1), e <= 128 (the common path) */\n"               \
    "__device__ __forceinline__ u32 mxp_s(u32 e) { return ((e + 126u) << 7) * 0x10001u; }\n"                                    \
    "/* the rare path's two factors, any e: 2^(e-1) and 1, or 2^126 and 2^(e-127) above 128; NaN for 0xFF */\n"                 \
    "__device__ __forceinline__ u32 mxp_s1(u32 e) { return e <= 128u ? mxp_s(e) : e < 255u ? MXP_P126 : MXP_NAN2; }\n"          \
    "__device__ __forceinline__ u32 mxp_s2(u32 e) { return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3F803F80u; }\n"       \
    "/* codes: streamed once, kept out of L1 */\n"                                                                              \
    "__device__ __forceinline__ void mxp_ld16(const u8 *p, u32 *w) {\n"                                                         \
    "    asm(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"                                                    \
    "        : \"=r\"(w[0]), \"=r\"(w[1]), \"=r\"(w[2]), \"=r\"(w[3]) : \"l\"(p));\n"                                           \
    "}\n"                                                                                                                       \
    "/* one chunk (128 codes) of a warp's rows: this lane's block (16 bytes) of rows g and g + 8 per tile, and\n"               \
    "   their scale bytes */\n"                                                                                                 \
    "template <int R> struct MxpStage {\n"                                                                                      \
    "    u32 wa[R][4], wb[R][4];\n"                                                                                             \
    "    u32 ea[R], eb[R];\n"                                                                                                   \
    "};\n"                                                                                                                      \
    "/* chunk c (0 .. 2 S - 2: immediate offsets) from the lane's pointers */\n"                                                \
    "template <int R>\n"                                                                                                        \
    "__device__ __forceinline__ void mxp_load(MxpStage<R> &s, int c, const u8 *const *qa, const u8 *const *qb,\n"               \
    "                                         const u8 *const *sa, const u8 *const *sb) {\n"                                    \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        mxp_ld16(qa[r] + c * MXP_QSTEP, s.wa[r]);\n"                                                                       \
    "        mxp_ld16(qb[r] + c * MXP_QSTEP, s.wb[r]);\n"                                                                       \
    "        s.ea[r] = __ldg(sa[r] + c * MXP_SSTEP);\n"                                                                         \
    "        s.eb[r] = __ldg(sb[r] + c * MXP_SSTEP);\n"                                                                         \
    "    }\n"                                                                                                                   \
    "}\n"                                                                                                                       \
    "/* one chunk.  BIG: a scale byte above 128 (or 0xFF) in the warp's chunk, never in a real model's weights; a\n"            \
    "   warp vote picks this copy, as a branch inside would be predicated and cost every chunk */\n"                            \
    "template <int R, int NB, bool BIG>\n"                                                                                      \
    "__device__ __forceinline__ void mxp_compute(const MxpStage<R> &s, float (*acc)[NB][4], int c, const u16 *const *xr) {\n"   \
    "    uint4 xv[NB][4];\n"                                                                                                    \
    "#pragma unroll\n"                                                                                                          \
    "    for (int nb = 0; nb < NB; nb++)\n"                                                                                     \
    "#pragma unroll\n"                                                                                                          \
    "        for (int j = 0; j < 4; j++)\n"                                                                                     \
    "            xv[nb][j] = __ldg((const uint4 *)(xr[nb] + c * MXP_XSTEP + 8 * j));\n"                                         \
    "    u32 fa[R], fb[R], ga[R], gb[R];\n"                                                                                     \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        fa[r] = BIG ? mxp_s1(s.ea[r]) : mxp_s(s.ea[r]);\n"                                                                 \
    "        fb[r] = BIG ? mxp_s1(s.eb[r]) : mxp_s(s.eb[r]);\n"                                                                 \
    "        ga[r] = BIG ? mxp_s2(s.ea[r]) : 0u;\n"                                                                             \
    "        gb[r] = BIG ? mxp_s2(s.eb[r]) : 0u;\n"                                                                             \
    "    }\n"                                                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "    for (int j = 0; j < 4; j++) {\n"                                                                                       \
    "        u32 b[NB][4]; /* B registers: (e0,e4), (e1,e5) for h = 0; (e2,e6), (e3,e7) for h = 1 */\n"                         \
    "#pragma unroll\n"                                                                                                          \
    "        for (int nb = 0; nb < NB; nb++) {\n"                                                                               \
    "            const uint4 v = xv[nb][j];\n"                                                                                  \
    "            b[nb][0] = __byte_perm(v.x, v.z, 0x5410);\n"                                                                   \
    "            b[nb][1] = __byte_perm(v.x, v.z, 0x7632);\n"                                                                   \
    "            b[nb][2] = __byte_perm(v.y, v.w, 0x5410);\n"                                                                   \
    "            b[nb][3] = __byte_perm(v.y, v.w, 0x7632);\n"                                                                   \
    "        }\n"                                                                                                               \
    "#pragma unroll\n"                                                                                                          \
    "        for (int r = 0; r < R; r++) {\n"                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "            for (int h = 0; h < 2; h++) {\n"                                                                               \
    "                const u32 A = h ? s.wa[r][j] >> 8 : s.wa[r][j], B = h ? s.wb[r][j] >> 8 : s.wb[r][j];\n"                   \
    "                u32 a0 = mxp_mul2(mxp_raw<0x000F000Fu, 4160u>(A), fa[r]);\n"                                               \
    "                u32 a1 = mxp_mul2(mxp_raw<0x000F000Fu, 4160u>(B), fb[r]);\n"                                               \
    "                u32 a2 = mxp_mul2(mxp_raw<0x00F000F0u, 260u>(A), fa[r]);\n"                                                \
    "                u32 a3 = mxp_mul2(mxp_raw<0x00F000F0u, 260u>(B), fb[r]);\n"                                                \
    "                if (BIG) {\n"                                                                                              \
    "                    a0 = mxp_mul2(a0, ga[r]), a1 = mxp_mul2(a1, gb[r]);\n"                                                 \
    "                    a2 = mxp_mul2(a2, ga[r]), a3 = mxp_mul2(a3, gb[r]);\n"                                                 \
    "                }\n"                                                                                                       \
    "#pragma unroll\n"                                                                                                          \
    "                for (int nb = 0; nb < NB; nb++) mxp_mma(acc[r][nb], a0, a1, a2, a3, b[nb][2 * h], b[nb][2 * h + 1]);\n"    \
    "            }\n"                                                                                                           \
    "        }\n"                                                                                                               \
    "    }\n"                                                                                                                   \
    "}\n"                                                                                                                       \
    "template <int R, int NB>\n"                                                                                                \
    "__device__ __forceinline__ void mxp_chunk(const MxpStage<R> &s, float (*acc)[NB][4], int c, const u16 *const *xr) {\n"     \
    "    u32 e = 0;\n"                                                                                                          \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        e = e > s.ea[r] ? e : s.ea[r];\n"                                                                                  \
    "        e = e > s.eb[r] ? e : s.eb[r];\n"                                                                                  \
    "    }\n"                                                                                                                   \
    "    if (__any_sync(0xffffffffu, e > 128u)) mxp_compute<R, NB, true>(s, acc, c, xr);\n"                                     \
    "    else mxp_compute<R, NB, false>(s, acc, c, xr);\n"                                                                      \
    "}\n"                                                                                                                       \
    "/* the same with x handed in (xv[nb][j]: x at the lane's word j; mxfp4.gemv1_tma reads it from shared memory):\n"            \
    "   mxp_compute's and mxp_chunk's bodies, kept apart so that their own code generation stays as it was */\n"                            \
    "template <int R, int NB, bool BIG>\n"                                                                                      \
    "__device__ __forceinline__ void mxp_compute_xv(const MxpStage<R> &s, float (*acc)[NB][4], const uint4 (*xv)[4]) {\n"   \
    "    u32 fa[R], fb[R], ga[R], gb[R];\n"                                                                                     \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        fa[r] = BIG ? mxp_s1(s.ea[r]) : mxp_s(s.ea[r]);\n"                                                                 \
    "        fb[r] = BIG ? mxp_s1(s.eb[r]) : mxp_s(s.eb[r]);\n"                                                                 \
    "        ga[r] = BIG ? mxp_s2(s.ea[r]) : 0u;\n"                                                                             \
    "        gb[r] = BIG ? mxp_s2(s.eb[r]) : 0u;\n"                                                                             \
    "    }\n"                                                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "    for (int j = 0; j < 4; j++) {\n"                                                                                       \
    "        u32 b[NB][4]; /* B registers: (e0,e4), (e1,e5) for h = 0; (e2,e6), (e3,e7) for h = 1 */\n"                         \
    "#pragma unroll\n"                                                                                                          \
    "        for (int nb = 0; nb < NB; nb++) {\n"                                                                               \
    "            const uint4 v = xv[nb][j];\n"                                                                                  \
    "            b[nb][0] = __byte_perm(v.x, v.z, 0x5410);\n"                                                                   \
    "            b[nb][1] = __byte_perm(v.x, v.z, 0x7632);\n"                                                                   \
    "            b[nb][2] = __byte_perm(v.y, v.w, 0x5410);\n"                                                                   \
    "            b[nb][3] = __byte_perm(v.y, v.w, 0x7632);\n"                                                                   \
    "        }\n"                                                                                                               \
    "#pragma unroll\n"                                                                                                          \
    "        for (int r = 0; r < R; r++) {\n"                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "            for (int h = 0; h < 2; h++) {\n"                                                                               \
    "                const u32 A = h ? s.wa[r][j] >> 8 : s.wa[r][j], B = h ? s.wb[r][j] >> 8 : s.wb[r][j];\n"                   \
    "                u32 a0 = mxp_mul2(mxp_raw<0x000F000Fu, 4160u>(A), fa[r]);\n"                                               \
    "                u32 a1 = mxp_mul2(mxp_raw<0x000F000Fu, 4160u>(B), fb[r]);\n"                                               \
    "                u32 a2 = mxp_mul2(mxp_raw<0x00F000F0u, 260u>(A), fa[r]);\n"                                                \
    "                u32 a3 = mxp_mul2(mxp_raw<0x00F000F0u, 260u>(B), fb[r]);\n"                                                \
    "                if (BIG) {\n"                                                                                              \
    "                    a0 = mxp_mul2(a0, ga[r]), a1 = mxp_mul2(a1, gb[r]);\n"                                                 \
    "                    a2 = mxp_mul2(a2, ga[r]), a3 = mxp_mul2(a3, gb[r]);\n"                                                 \
    "                }\n"                                                                                                       \
    "#pragma unroll\n"                                                                                                          \
    "                for (int nb = 0; nb < NB; nb++) mxp_mma(acc[r][nb], a0, a1, a2, a3, b[nb][2 * h], b[nb][2 * h + 1]);\n"    \
    "            }\n"                                                                                                           \
    "        }\n"                                                                                                               \
    "    }\n"                                                                                                                   \
    "}\n"                                                                                                                       \
    "template <int R, int NB>\n"                                                                                                \
    "__device__ __forceinline__ void mxp_chunk_xv(const MxpStage<R> &s, float (*acc)[NB][4], const uint4 (*xv)[4]) {\n"     \
    "    u32 e = 0;\n"                                                                                                          \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        e = e > s.ea[r] ? e : s.ea[r];\n"                                                                                  \
    "        e = e > s.eb[r] ? e : s.eb[r];\n"                                                                                  \
    "    }\n"                                                                                                                   \
    "    if (__any_sync(0xffffffffu, e > 128u)) mxp_compute_xv<R, NB, true>(s, acc, xv);\n"                                     \
    "    else mxp_compute_xv<R, NB, false>(s, acc, xv);\n"                                                                      \
    "}\n"                                                                                                                       \
    "#ifndef MXP_GEMV1\n"                                                                                                       \
    "/* not inlined: each variant gets its own register allocation */\n"                                                        \
    "template <int R, int NB>\n"                                                                                                \
    "__device__ __noinline__ void mxp_gemv(const u16 *x, const u8 *q, const u8 *sc, float *y, int m, int n, ll k,\n"            \
    "                                      int n0, float *red) {\n"                                                             \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"                            \
    "    const int ks = blockDim.x >> 5;\n"                                                                                     \
    "    const ll chunks = k >> 7;\n"                                                                                           \
    "    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;\n"                 \
    "    const u8 *qa[R], *qb[R], *sa[R], *sb[R];\n"                                                                            \
    "    const u16 *xr[NB];\n"                                                                                                  \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++) {\n"                                                                                       \
    "        int ra = n0 + 16 * r + g, rb = ra + 8;\n"                                                                          \
    "        ra = ra < n ? ra : n - 1;\n"                                                                                       \
    "        rb = rb < n ? rb : n - 1;\n"                                                                                       \
    "        qa[r] = q + (ll)ra * (k / 2) + c0 * 64 + 16 * t; /* block t of each chunk */\n"                                    \
    "        qb[r] = q + (ll)rb * (k / 2) + c0 * 64 + 16 * t;\n"                                                                \
    "        sa[r] = sc + (ll)ra * (k / 32) + c0 * 4 + t;\n"                                                                    \
    "        sb[r] = sc + (ll)rb * (k / 32) + c0 * 4 + t;\n"                                                                    \
    "    }\n"                                                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "    for (int nb = 0; nb < NB; nb++) { /* a token past m reads row m - 1: its column is not stored */\n"                    \
    "        const int tok = g + 8 * nb < m ? g + 8 * nb : m - 1;\n"                                                            \
    "        xr[nb] = x + (ll)tok * k + c0 * 128 + 32 * t;\n"                                                                   \
    "    }\n"                                                                                                                   \
    "    float acc[R][NB][4];\n"                                                                                                \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++)\n"                                                                                         \
    "#pragma unroll\n"                                                                                                          \
    "        for (int nb = 0; nb < NB; nb++)\n"                                                                                 \
    "#pragma unroll\n"                                                                                                          \
    "            for (int e = 0; e < 4; e++) acc[r][nb][e] = 0.f;\n"                                                            \
    "    /* S register stages, loaded S - 1 chunks ahead; the loop body is unrolled by S so no stage is copied, and\n"          \
    "       the pointers advance by S chunks a trip (offsets in the loop are immediates) */\n"                                  \
    "    constexpr int S = MXP_STAGES;\n"                                                                                       \
    "    MxpStage<R> st[S];\n"                                                                                                  \
    "#pragma unroll\n"                                                                                                          \
    "    for (int i = 0; i < S - 1; i++)\n"                                                                                     \
    "        if (c0 + i < c1) mxp_load<R>(st[i], i, qa, qb, sa, sb);\n"                                                         \
    "    for (ll c = c0; c < c1; c += S) {\n"                                                                                   \
    "#pragma unroll\n"                                                                                                          \
    "        for (int i = 0; i < S; i++) {\n"                                                                                   \
    "            if (c + i >= c1) break;\n"                                                                                     \
    "            if (c + i + S - 1 < c1) mxp_load<R>(st[(i + S - 1) % S], i + S - 1, qa, qb, sa, sb);\n"                        \
    "            mxp_chunk<R, NB>(st[i], acc, i, xr);\n"                                                                        \
    "        }\n"                                                                                                               \
    "#pragma unroll\n"                                                                                                          \
    "        for (int r = 0; r < R; r++) qa[r] += 64 * S, qb[r] += 64 * S, sa[r] += 4 * S, sb[r] += 4 * S;\n"                   \
    "#pragma unroll\n"                                                                                                          \
    "        for (int nb = 0; nb < NB; nb++) xr[nb] += 128 * S;\n"                                                              \
    "    }\n"                                                                                                                   \
    "    /* the K split: warps 1.. leave their totals, warp 0 adds them in warp order and stores */\n"                          \
    "    constexpr int NA = R * NB * 4;\n"                                                                                      \
    "    if (ks > 1) {\n"                                                                                                       \
    "        if (warp > 0) {\n"                                                                                                 \
    "#pragma unroll\n"                                                                                                          \
    "            for (int i = 0; i < NA; i++) red[((warp - 1) * NA + i) * 32 + lane] = (&acc[0][0][0])[i];\n"                   \
    "        }\n"                                                                                                               \
    "        __syncthreads();\n"                                                                                                \
    "        if (warp == 0)\n"                                                                                                  \
    "            for (int w = 1; w < ks; w++)\n"                                                                                \
    "#pragma unroll\n"                                                                                                          \
    "                for (int i = 0; i < NA; i++) (&acc[0][0][0])[i] += red[((w - 1) * NA + i) * 32 + lane];\n"                 \
    "        __syncthreads(); /* red is free again (3 stages, m > 8: back for the second tile of the block) */\n"               \
    "    }\n"                                                                                                                   \
    "    if (warp > 0) return;\n"                                                                                               \
    "#pragma unroll\n"                                                                                                          \
    "    for (int r = 0; r < R; r++)\n"                                                                                         \
    "#pragma unroll\n"                                                                                                          \
    "        for (int nb = 0; nb < NB; nb++)\n"                                                                                 \
    "#pragma unroll\n"                                                                                                          \
    "            for (int e = 0; e < 4; e++) {\n"                                                                               \
    "                const int xi = 8 * nb + 2 * t + (e & 1), wi = n0 + 16 * r + g + 8 * (e >> 1);\n"                           \
    "                if (xi < m && wi < n) y[(ll)xi * n + wi] = acc[r][nb][e];\n"                                               \
    "            }\n"                                                                                                           \
    "}\n"                                                                                                                       \
    "/* NaN everywhere: the answer to arguments the kernel cannot honour */\n"                                                  \
    "__device__ void mxp_fill_nan(float *y, ll count) {\n"                                                                      \
    "    const ll step = (ll)gridDim.x * blockDim.x;\n"                                                                         \
    "    for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) y[i] = __uint_as_float(0x7fc00000u);\n"   \
    "}\n"                                                                                                                       \
    "extern \"C\" __global__ void __launch_bounds__(512) qc_mxfp4_gemv_frag_ps(const u16 *x, const u8 *q, const u8 *sc,\n"      \
    "        float *y, ll m, ll n, ll k) {\n"                                                                                   \
    "    extern __shared__ float red[];\n"                                                                                      \
    "    if (m <= 0 || n <= 0) return;\n"                                                                                       \
    "    if (m > 16 || k <= 0 || (k & 127) || n > 2147483647LL - 32 || ((unsigned long long)q & 15) ||\n"                       \
    "        ((unsigned long long)x & 15)) {\n"                                                                                 \
    "        mxp_fill_nan(y, m * n);\n"                                                                                         \
    "        return;\n"                                                                                                         \
    "    }\n"                                                                                                                   \
    "    /* the host's tile count: R = 1 gives 16-row blocks (then 16 gridDim >= n), R = 2 32-row ones */\n"                    \
    "    const int R = (ll)gridDim.x * 16 >= n ? 1 : 2;\n"                                                                      \
    "    const int n0 = blockIdx.x * (16 * R), mi = (int)m, ni = (int)n; /* n < 2^31 (eligibility) */\n"                        \
    "    if (R == 2 && m > 8) { /* two n8 tiles of x */\n"                                                                      \
    "#if MXP_STAGES == 2\n"                                                                                                     \
    "        mxp_gemv<2, 2>(x, q, sc, y, mi, ni, k, n0, red);\n"                                                                \
    "#else /* three stages: the W tiles of the block in turn (two at once would spill) */\n"                                    \
    "        mxp_gemv<1, 2>(x, q, sc, y, mi, ni, k, n0, red);\n"                                                                \
    "        if (n0 + 16 < n) mxp_gemv<1, 2>(x, q, sc, y, mi, ni, k, n0 + 16, red);\n"                                          \
    "#endif\n"                                                                                                                  \
    "    } else if (m > 8) {\n"                                                                                                 \
    "        mxp_gemv<1, 2>(x, q, sc, y, mi, ni, k, n0, red);\n"                                                                \
    "    } else if (R == 2) {\n"                                                                                                \
    "        mxp_gemv<2, 1>(x, q, sc, y, mi, ni, k, n0, red);\n"                                                                \
    "    } else {\n"                                                                                                            \
    "        mxp_gemv<1, 1>(x, q, sc, y, mi, ni, k, n0, red);\n"                                                                \
    "    }\n"                                                                                                                   \
    "}\n"                                                                                                                       \
    "#else\n"                                                                                                                   \
    MXG_ENTRY                                                                                                                   \
    "#endif\n"

#define MXG_ENTRY                                                                                                                   \
    "/* mxfp4.gemv1 (m = 1): w4a16.gemv1_sym's whole-line loads.  mma rows g = 0..7 are the eight 64-byte segments of\n" \
    "   one 512-byte run of row ra (lane (g, t) loads block 32 c + 4 g + t, 16 bytes), rows g + 8 the same run of row\n" \
    "   rb; B column g is x at segment g's codes; D[g][g], D[g + 8][g] (lane (g, g / 2), c0 / c1 and c2 / c3 by g's\n" \
    "   parity) are the rows' sums over segment g.  The block scales are in the A fragments, so D sums all steps. */\n" \
    "__device__ void mxg_fill_nan(float *y, ll count) {\n" \
    "    const ll step = (ll)gridDim.x * blockDim.x;\n" \
    "    for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) y[i] = __uint_as_float(0x7fc00000u);\n" \
    "}\n" \
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_mxfp4_gemv1(const u16 *x, const u8 *q, const u8 *sc, float *y,\n" \
    "                                                                   ll m, ll n, ll k) {\n" \
    "    extern __shared__ float red[];\n" \
    "    qc_grid_trigger(); /* the next kernel's blocks may start (they wait for this one) */\n" \
    "    if (m <= 0 || n <= 0) return;\n" \
    "    if (m != 1 || k <= 0 || (k & 1023) || n > 2147483647LL - 32 || ((unsigned long long)q & 15) ||\n" \
    "        ((unsigned long long)x & 15)) {\n" \
    "        qc_grid_wait();\n" \
    "        mxg_fill_nan(y, m * n);\n" \
    "        return;\n" \
    "    }\n" \
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n" \
    "    const int ks = blockDim.x >> 5;\n" \
    "    const ll steps = k >> 10;\n" \
    "    const ll spw = (steps + ks - 1) / ks, c0 = warp * spw, c1 = c0 + spw < steps ? c0 + spw : steps;\n" \
    "    const ll n0 = (ll)blockIdx.x * 4;\n" \
    "    const u8 *qa[2], *qb[2], *sa[2], *sb[2];\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++) {\n" \
    "        ll ra = n0 + 2 * r, rb = ra + 1;\n" \
    "        ra = ra < n ? ra : n - 1;\n" \
    "        rb = rb < n ? rb : n - 1;\n" \
    "        qa[r] = q + ra * (k / 2) + c0 * 512 + 64 * g + 16 * t;\n" \
    "        qb[r] = q + rb * (k / 2) + c0 * 512 + 64 * g + 16 * t;\n" \
    "        sa[r] = sc + ra * (k / 32) + c0 * 32 + 4 * g + t;\n" \
    "        sb[r] = sc + rb * (k / 32) + c0 * 32 + 4 * g + t;\n" \
    "    }\n" \
    "    const u16 *xr[1] = {x + c0 * 1024 + 128 * g + 32 * t};\n" \
    "    float acc[2][1][4] = {{{0.f, 0.f, 0.f, 0.f}}, {{0.f, 0.f, 0.f, 0.f}}};\n" \
    "    constexpr int S = MXP_STAGES;\n" \
    "    MxpStage<2> st[S];\n" \
    "#pragma unroll\n" \
    "    for (int i = 0; i < S - 1; i++)\n" \
    "        if (c0 + i < c1) mxp_load<2>(st[i], i, qa, qb, sa, sb);\n" \
    "    qc_grid_wait(); /* codes and scales are never written: x, y, red only from here on */\n" \
    "    for (ll c = c0; c < c1; c += S) {\n" \
    "#pragma unroll\n" \
    "        for (int i = 0; i < S; i++) {\n" \
    "            if (c + i >= c1) break;\n" \
    "            if (c + i + S - 1 < c1) mxp_load<2>(st[(i + S - 1) % S], i + S - 1, qa, qb, sa, sb);\n" \
    "            mxp_chunk<2, 1>(st[i], acc, i, xr);\n" \
    "        }\n" \
    "#pragma unroll\n" \
    "        for (int r = 0; r < 2; r++) qa[r] += 512 * S, qb[r] += 512 * S, sa[r] += 32 * S, sb[r] += 32 * S;\n" \
    "        xr[0] += 1024 * S;\n" \
    "    }\n" \
    "    /* the diagonal, then the warp's eight segments added in a fixed order */\n" \
    "    const bool diag = t == (g >> 1), odd = g & 1;\n" \
    "    float tot[4];\n" \
    "#pragma unroll\n" \
    "    for (int r = 0; r < 2; r++)\n" \
    "#pragma unroll\n" \
    "        for (int e = 0; e < 2; e++) {\n" \
    "            float v = diag ? (odd ? acc[r][0][2 * e + 1] : acc[r][0][2 * e]) : 0.f;\n" \
    "#pragma unroll\n" \
    "            for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n" \
    "            tot[2 * r + e] = v;\n" \
    "        }\n" \
    "    /* the K split: warps 1.. leave their four sums, warp 0 adds them in warp order and stores */\n" \
    "    if (ks > 1) {\n" \
    "        if (warp > 0 && lane == 0)\n" \
    "#pragma unroll\n" \
    "            for (int i = 0; i < 4; i++) red[(warp - 1) * 4 + i] = tot[i];\n" \
    "        __syncthreads();\n" \
    "        if (warp == 0)\n" \
    "            for (int w = 1; w < ks; w++)\n" \
    "#pragma unroll\n" \
    "                for (int i = 0; i < 4; i++) tot[i] += red[(w - 1) * 4 + i];\n" \
    "    }\n" \
    "    if (warp > 0 || lane > 0) return;\n" \
    "#pragma unroll\n" \
    "    for (int i = 0; i < 4; i++)\n" \
    "        if (n0 + i < n) y[n0 + i] = tot[i];\n" \
    "}\n"

static const char MXP_SRC[] = MXP_SRC_BODY;
static const char MXP_SRC3[] = "#define MXP_STAGES 3\n" MXP_SRC_BODY;
/* mxfp4.gemv1: the same body with 512-byte steps and the m = 1 entry (MXG_ENTRY) in place of gemv_frag_ps's */
static const char MXG_SRC[] = "#define MXP_GEMV1\n#define MXP_QSTEP 512\n#define MXP_SSTEP 32\n#define MXP_XSTEP 1024\n"
    QC_CUDA_GRID_DEP_SRC MXP_SRC_BODY;

/* ---- the launch plan (the device reads KS from blockDim and R from gridDim) ---- */

/* R = 2 (x's registers serve two tiles, twice the codes in flight a warp) at every m: w4a16's plan, but R = 2
 * at m > 8 too, where w4a16 ran its tiles in turn for lack of registers until session 7 (mxfp4_frag_plan_of,
 * QC_MXP_R / QC_MXP_KS override) */
static void mxp_plan_of(int64_t m, int64_t n, int64_t k, mxfp4_frag_plan *p) {
    mxfp4_frag_plan_of(m, n, k, 1, "QC_MXP_R", "QC_MXP_KS", p);
}

/* the floats each lane leaves for the reduction: R tiles x NB x 4 (the 3-stage build runs the tiles of m > 8
 * in turn and needs half of it) */
static uint32_t mxp_red_bytes(int64_t m, const mxfp4_frag_plan *p) {
    int nb = m > 8 ? 2 : 1, r = p->r;
    return p->ks > 1 ? (uint32_t)(p->ks - 1) * (uint32_t)(r * nb * 4) * 32u * 4u : 0u;
}

static void mxp_dims(const qc_problem *p, qc_launch_dims *d) {
    mxfp4_frag_plan pl;
    mxp_plan_of(p->m, p->n, p->k, &pl);
    mxfp4_frag_dims(&pl, mxp_red_bytes(p->m, &pl), d);
}

/* ---- eligibility ---- */

static int mxp_eligible(const qc_problem *p, qc_reason *why) { return mxfp4_frag_eligible("mxfp4.gemv_frag_ps", p, why); }

qc_status mxfp4_frag_ps_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void)) {
    /* QC_MXP_STAGES=3: three register stages of codes (two chunks loaded ahead, 1.5x the bytes in flight a lane,
     * about 10 more registers), an A/B knob for the device; read when the plugin registers */
    const char *es = getenv("QC_MXP_STAGES");
    int three = es && strcmp(es, "3") == 0;
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .id = "mxfp4.gemv_frag_ps",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1, /* the engine reaches it from m = 5: mxfp4.gemv_frag, registered before it, takes m <= 4 */
        .m_max = 16,
        .arch = {80, QC_SM_ANY}, /* mma.sync bf16 and bf16x2 fma: sm_80 */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref, /* mxfp4.gemv's: the same product, in-order f32 sum */
        .cuda_source = three ? MXP_SRC3 : MXP_SRC,
        .cuda_entry = "qc_mxfp4_gemv_frag_ps",
        .launch_dims = mxp_dims,
        .eligible = mxp_eligible,
    };
    return api->register_kernel(host, &d);
}

/* ---- mxfp4.gemv1_tma: mxfp4.gemv1's steps on a TMA bulk-copy ring (w4a16.gemv1_tma_sym's layout) ---- */
/*
 * As w4a16.gemv1_tma_sym (w4a16_gemv_frag.c says why and what was
 * measured): a stage is 4 whole rows, their codes (4 k / 2 contiguous
 * bytes) and their scale bytes (4 k / 32), two cp.async.bulk issued by one
 * producer lane into a ring of MXT_NS stages; each of MXT_W consumer warps
 * takes whole stages and runs mxfp4.gemv1's chunks (block scales in the A
 * fragments, the warp vote for large scale bytes) from shared memory, in
 * gemv1's order, so y equals gemv1's with K split 1 bit for bit.  x is
 * laid out once a block in shared memory as w4a16.gemv1_tma_sym lays it
 * out (a step's load j reads 512 contiguous bytes; read through L1 instead
 * it was slower than mxfp4.gemv1, H200 session 15).  Two blocks an SM;
 * any n (QC_MXT_MIN_N sets a bound), k <= 5120 (shared memory).  Misaligned pointers, m != 1
 * or k % 1024 != 0: NaN in every output, as mxfp4.gemv1.
 */
#define MXT_W 8
#define MXT_NS 8 /* a multiple of MXT_W: each slot serves one warp */
#define MXT_BLOCKS 264
#define MXT_MIN_N 1 /* no row bound by default (session 16); QC_MXT_MIN_N raises it */
#define MXT_SMEM_MAX 116224
#define MXT_RPB(n) ((((n) + MXT_BLOCKS - 1) / MXT_BLOCKS + 3) / 4 * 4)
/* x (2 k bytes), the ring (MXT_NS stages of 4 rows: 2 k code bytes, k / 8 scale bytes), then 2 MXT_NS barriers */
#define MXT_SMEM(k) (2 * (k) + MXT_NS * (2 * (k) + (k) / 8) + 16 * MXT_NS)
#define MXT_STR_(x) #x
#define MXT_STR(x) MXT_STR_(x)

static const char MXT_SRC[] = "#define MXP_GEMV1\n#define MXP_QSTEP 512\n#define MXP_SSTEP 32\n#define MXP_XSTEP 1024\n"
    QC_CUDA_GRID_DEP_SRC MXP_SRC_BODY QC_TMA_PIPE_SRC
    "#define MXT_W " MXT_STR(MXT_W) "\n"
    "#define MXT_NS " MXT_STR(MXT_NS) "\n"
    "#define MXT_BLOCKS " MXT_STR(MXT_BLOCKS) "\n"
    "extern \"C\" __global__ void __launch_bounds__(32 * (MXT_W + 1), 2) qc_mxfp4_gemv1_tma(const u16 *x, const u8 *q,\n"
    "        const u8 *sc, float *y, ll m, ll n, ll k) {\n"
    "#ifndef MXT_TRIGGER /* PDL: 0 dependents launch when it ends, 1 when its blocks are done, 2 at the start */\n"
    "#define MXT_TRIGGER 0\n"
    "#endif\n"
    "    extern __shared__ __align__(128) unsigned char mxt_sm[];\n"
    "#if MXT_TRIGGER == 2\n"
    "    qc_grid_trigger();\n"
    "#endif\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (m != 1 || k <= 0 || (k & 1023) || n > 2147483647LL - 32 || ((unsigned long long)q & 15) ||\n"
    "        ((unsigned long long)x & 15) || ((unsigned long long)sc & 15)) {\n"
    "        qc_grid_wait();\n"
    "        mxg_fill_nan(y, m * n);\n"
    "        return;\n"
    "    }\n"
    "    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
    "    const ll rpb = ((n + MXT_BLOCKS - 1) / MXT_BLOCKS + 3) / 4 * 4; /* the host's MXT_RPB */\n"
    "    const ll r0 = (ll)blockIdx.x * rpb, r1 = r0 + rpb < n ? r0 + rpb : n;\n"
    "    if (r0 >= n) return;\n"
    "    const int rowb = (int)(k / 2), sbr = (int)(k / 32), steps = (int)(k / 1024);\n"
    "    const int cb = 4 * rowb, stage = cb + 4 * sbr; /* 4 rows of codes, then their scale bytes */\n"
    "    const int groups = (int)((r1 - r0 + 3) / 4);\n"
    "    uint4 *xs = (uint4 *)mxt_sm;\n"
    "    unsigned char *ring = mxt_sm + 2 * k;\n"
    "    const unsigned rb = qcp_smem(ring), full = rb + MXT_NS * stage, empty = full + 8 * MXT_NS;\n"
    "    if (threadIdx.x == 0) {\n"
    "        for (int i = 0; i < MXT_NS; i++) qcp_mbar_init(full + 8 * i, 1), qcp_mbar_init(empty + 8 * i, 1);\n"
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (warp == MXT_W) { /* producer: one lane; codes and scales are never written, so no qc_grid_wait */\n"
    "        if (lane) return;\n"
    "        unsigned long long pol;\n"
    "        asm volatile(\"createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\\n\" : \"=l\"(pol));\n"
    "        for (int j = 0; j < groups; j++) {\n"
    "            const int st = j % MXT_NS;\n"
    "            const ll row0 = r0 + 4 * j;\n"
    "            const int nr = r1 - row0 < 4 ? (int)(r1 - row0) : 4;\n"
    "            qcp_wait(empty + 8 * st, ((j / MXT_NS) & 1) ^ 1);\n"
    "            qcp_expect_tx(full + 8 * st, (unsigned)(nr * (rowb + sbr)));\n"
    "            qcp_bulk(rb + st * stage, q + row0 * rowb, (unsigned)(nr * rowb), full + 8 * st, pol);\n"
    "            qcp_bulk(rb + st * stage + cb, sc + row0 * sbr, (unsigned)(nr * sbr), full + 8 * st, pol);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    qc_grid_wait(); /* x and y from here on */\n"
    "    /* x's 16-byte chunk nn of step c (lane 4 g + t's load j in gemv1: nn = 16 g + 4 t + j) goes to\n"
    "       c * 128 + 32 j + 4 g + t, so that load j of a step reads 512 contiguous bytes */\n"
    "    for (int i = threadIdx.x; i < (int)(k / 8); i += 32 * MXT_W) {\n"
    "        const int c = i >> 7, nn = i & 127;\n"
    "        xs[c * 128 + (nn & 3) * 32 + (nn >> 4) * 4 + ((nn >> 2) & 3)] = __ldg((const uint4 *)x + i);\n"
    "    }\n"
    "    qcp_bar_n(1, 32 * MXT_W);\n"
    "    const int g = lane >> 2, t = lane & 3;\n"
    "    const bool diag = t == (g >> 1), odd = g & 1;\n"
    "    for (int j = warp; j < groups; j += MXT_W) {\n"
    "        const int st = j % MXT_NS;\n"
    "        const ll row0 = r0 + 4 * j;\n"
    "        qcp_wait(full + 8 * st, (j / MXT_NS) & 1);\n"
    "        const unsigned char *cs = ring + st * stage, *ss = cs + cb;\n"
    "        float acc[2][1][4] = {{{0.f, 0.f, 0.f, 0.f}}, {{0.f, 0.f, 0.f, 0.f}}};\n"
    "        for (int c = 0; c < steps; c++) {\n"
    "            MxpStage<2> sg;\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < 2; r++) {\n"
    "                const uint4 va = *(const uint4 *)(cs + 2 * r * rowb + c * 512 + 64 * g + 16 * t);\n"
    "                const uint4 vb = *(const uint4 *)(cs + (2 * r + 1) * rowb + c * 512 + 64 * g + 16 * t);\n"
    "                sg.wa[r][0] = va.x, sg.wa[r][1] = va.y, sg.wa[r][2] = va.z, sg.wa[r][3] = va.w;\n"
    "                sg.wb[r][0] = vb.x, sg.wb[r][1] = vb.y, sg.wb[r][2] = vb.z, sg.wb[r][3] = vb.w;\n"
    "                sg.ea[r] = ss[2 * r * sbr + c * 32 + 4 * g + t];\n"
    "                sg.eb[r] = ss[(2 * r + 1) * sbr + c * 32 + 4 * g + t];\n"
    "            }\n"
    "            uint4 xv[1][4];\n"
    "#pragma unroll\n"
    "            for (int jj = 0; jj < 4; jj++) xv[0][jj] = xs[c * 128 + jj * 32 + lane];\n"
    "            mxp_chunk_xv<2, 1>(sg, acc, xv);\n"
    "        }\n"
    "        __syncwarp();\n"
    "        if (lane == 0) qcp_arrive(empty + 8 * st); /* the stage's reads are done: the producer may refill it */\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < 2; r++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 2; e++) {\n"
    "                float v = diag ? (odd ? acc[r][0][2 * e + 1] : acc[r][0][2 * e]) : 0.f;\n"
    "#pragma unroll\n"
    "                for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "                const ll row = row0 + 2 * r + e;\n"
    "                if (lane == 0 && row < r1) y[row] = v;\n"
    "            }\n"
    "    }\n"
    "#if MXT_TRIGGER == 1 /* dependents launch once every block is done with its stages */\n"
    "    qc_grid_trigger();\n"
    "#endif\n"
    "}\n";

/* what the m = 1 whole-line GEMVs (gemv1, gemv1_tma, gemv1_xr) need beyond the fragment GEMVs: K in 512-byte runs */
static int mx_whole_steps(const char *id, const qc_problem *p, qc_reason *why) {
    if (!mxfp4_frag_eligible(id, p, why)) return 0;
    if (p->k % 1024) {
        mxfp4_why(why, "align_k", "%s streams K in 512-byte runs (1024 codes), layer has K=%lld (mxfp4.gemv_frag_ps "
                  "takes K %% 128 == 0)", id, (long long)p->k);
        return 0;
    }
    return 1;
}

static void mxt_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m != 1 || p->n <= 0 || p->k < 1024 || MXT_SMEM(p->k) > MXT_SMEM_MAX) return;
    d->grid[0] = (uint32_t)((p->n + MXT_RPB(p->n) - 1) / MXT_RPB(p->n));
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (MXT_W + 1);
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)MXT_SMEM(p->k);
}

static int mxt_eligible(const qc_problem *p, qc_reason *why) {
    static const char id[] = "mxfp4.gemv1_tma";
    const char *off = getenv("QC_MXT");
    if (off && strcmp(off, "off") == 0) {
        mxfp4_why(why, "off", "%s is switched off (QC_MXT=off)", id);
        return 0;
    }
    if (!mx_whole_steps(id, p, why)) return 0;
    if (MXT_SMEM(p->k) > MXT_SMEM_MAX) {
        mxfp4_why(why, "shared_memory", "%s keeps x and 8 stages of 4 rows in shared memory, %lld bytes at K=%lld; two "
                  "blocks an SM allow %d (mxfp4.gemv1 takes it)", id, (long long)MXT_SMEM(p->k), (long long)p->k,
                  MXT_SMEM_MAX);
        return 0;
    }
    const int min_n = qc_env_int("mxfp4", "QC_MXT_MIN_N", 1, INT_MAX, MXT_MIN_N);
    if (p->n < min_n) {
        mxfp4_why(why, "n_range", "%s: n = %lld is below QC_MXT_MIN_N = %d", id, (long long)p->n, min_n);
        return 0;
    }
    return 1;
}

/* ---- mxfp4.gemv1: m = 1, K % 1024, whole-line loads (w4a16.gemv1_sym's technique, docs/perf.md session 9) ---- */

/* the launch: w4a16.gemv1_sym's (plugins/common/qc_gemv1_plan.h), QC_MXG_KS overrides the K split */
static void mxg_dims(const qc_problem *p, qc_launch_dims *d) { qc_gemv1_dims(p, "QC_MXG_KS", d); }

static int mxg_eligible(const qc_problem *p, qc_reason *why) {
    const char *off = getenv("QC_MXG"); /* A/B runs: mxfp4.gemv_frag_ps takes m = 1 again */
    if (off && strcmp(off, "off") == 0) {
        mxfp4_why(why, "off", "mxfp4.gemv1 is switched off (QC_MXG=off)");
        return 0;
    }
    if (!mx_whole_steps("mxfp4.gemv1", p, why)) return 0;
    return 1;
}

/* ---- mxfp4.gemv1_xr: m = 1, K % 1024, x held in registers (plugins/common/cuda/gemv1_xr.cuh, cuda/gemv1_xr.cu) ---- */

static int g_mxx_warps = QC_XR_WARPS; /* QC_MXX_WARPS, read at registration */

static void mxx_dims(const qc_problem *p, qc_launch_dims *d) { qc_xr_dims(p, g_mxx_warps, d); }

static int mxx_eligible(const qc_problem *p, qc_reason *why) {
    static const char id[] = "mxfp4.gemv1_xr";
    const char *on = getenv("QC_MXX"); /* opt-in: measured slower than gemv1 / gemv1_tma (session 23) */
    if (!on || strcmp(on, "on") != 0) {
        mxfp4_why(why, "off", "%s is opt-in (QC_MXX=on): on the H100 its decode step was 3%% slower than with "
                  "gemv1_tma / gemv1 (docs/perf.md, session 23)", id);
        return 0;
    }
    if (!mx_whole_steps(id, p, why)) return 0;
    qc_xr_plan pl;
    if (!qc_xr_plan_of(p->n, p->k, g_mxx_warps, &pl)) {
        mxfp4_why(why, "k_range", "%s gives each of at most %d warps one or two 512-byte steps of K: K=%lld has %lld "
                  "(mxfp4.gemv1 takes it)", id, QC_XR_MAX_WARPS, (long long)p->k, (long long)(p->k / 1024));
        return 0;
    }
    return 1;
}

qc_status mxfp4_gemv1_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void)) {
    /* mxfp4.gemv1_xr first (only with QC_MXX=on), then mxfp4.gemv1_tma: the same M range, so registration order
     * puts them ahead where they are eligible.  QC_MXX_OPTS: -D options of gemv1_xr (XR_D, XR_PF, XR_TRIGGER);
     * QC_MXX_WARPS: its warps a block */
    static char mxx_buf[8][QC_ENV_OPT_LEN];
    static const char *mxx_list[10];
    const int mxx_n = qc_env_defines("mxfp4", "QC_MXX_OPTS", mxx_buf, 8);
    g_mxx_warps = qc_env_int("mxfp4", "QC_MXX_WARPS", 1, QC_XR_MAX_WARPS, QC_XR_WARPS);
    qc_kernel_desc dx = {
        .struct_size = sizeof dx,
        .id = "mxfp4.gemv1_xr",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 1,
        .arch = {80, QC_SM_ANY}, /* mma.sync bf16 and bf16x2 fma: sm_80 */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref,
        .cuda_source = MXX_SRC,
        .cuda_entry = "qc_mxfp4_gemv1_xr",
        .launch_dims = mxx_dims,
        .eligible = mxx_eligible,
        .nvrtc_options = mxx_n ? qc_env_option_list(NULL, mxx_buf, mxx_n, mxx_list) : NULL,
        .flags = QC_KERNEL_GRID_DEP, /* the first row pairs' codes and scales load before qc_grid_wait */
    };
    qc_status sx = api->register_kernel(host, &dx);
    if (sx != QC_OK) return sx;
    static char mxt_buf[32]; /* QC_MXT_TRIGGER=0..2 (A/B runs): the kernel's MXT_TRIGGER */
    static const char *mxt_list[2];
    const char *const *mxt_opts =
        qc_env_define_int("mxfp4", "QC_MXT_TRIGGER", "MXT_TRIGGER", 0, 2, mxt_buf, sizeof mxt_buf, mxt_list);
    qc_kernel_desc dt = {
        .struct_size = sizeof dt,
        .id = "mxfp4.gemv1_tma",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 1,
        .arch = {90, QC_SM_ANY}, /* cp.async.bulk and mbarrier transaction counts: sm_90 */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref,
        .cuda_source = MXT_SRC,
        .cuda_entry = "qc_mxfp4_gemv1_tma",
        .launch_dims = mxt_dims,
        .eligible = mxt_eligible,
        .nvrtc_options = mxt_opts,
        .flags = QC_KERNEL_GRID_DEP, /* the producer's copies start before qc_grid_wait */
    };
    qc_status st = api->register_kernel(host, &dt);
    if (st != QC_OK) return st;
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .id = "mxfp4.gemv1",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 1, /* the narrowest M range: the engine takes it for batch-1 decode where it is eligible */
        .arch = {80, QC_SM_ANY}, /* mma.sync bf16 and bf16x2 fma: sm_80 */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref,
        .cuda_source = MXG_SRC,
        .cuda_entry = "qc_mxfp4_gemv1",
        .launch_dims = mxg_dims,
        .eligible = mxg_eligible,
        .flags = QC_KERNEL_GRID_DEP, /* the first stage of codes and scales loads before qc_grid_wait */
    };
    return api->register_kernel(host, &d);
}
