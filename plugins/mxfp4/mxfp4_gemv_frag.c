/* mxfp4_gemv_frag.c - the mxfp4 decode GEMV with W as the mma A operand, scale blocks kept apart by x's columns, f32 promotion per block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxfp4_cuda.h"

/*
 * mxfp4.gemv_frag: y[m,n] = x[m,k] . dec(W)[n,k]^T for 1 <= m <= 16,
 * k % 128 == 0, x bf16 ("x.bf16"), W in the format's layout (qweight u8
 * [n, k/2], element 2i in the low nibble of byte i; scales E8M0 [n, k/32]),
 * f32 y.  The technique of w4a16.gemv_frag_sym (plugins/w4a16/
 * w4a16_gemv_frag.c): y^T = W x^T with mma.sync.m16n8k16 (bf16, f32
 * accumulation), lane (g = lane >> 2, t = lane & 3) holding A rows g and
 * g + 8 of a 16-row tile (k slots 2t, 2t+1 in a0/a1, 2t+8, 2t+9 in a2/a3),
 * B k slots 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1) of column g, D row g columns
 * 2t, 2t+1 (c0, c1) and row g + 8 (c2, c3).
 *
 * The scale block is 32 elements, 16 bytes of a row.  Per-block f32
 * promotion needs the 16 k slots of a row in one mma to share a scale, i.e.
 * a block spread over the four lanes of a quad (4 bytes each: one 4-byte
 * load per block, two loads per 32-byte sector).  Instead the block's
 * halves stay apart in the columns of x: lane t loads 8 contiguous bytes of
 * a 32-byte sector (ld.global.nc.L1::no_allocate.v2, a quad reads one whole
 * sector of a row), so lanes 0, 1 hold block 2s of sector s and lanes 2, 3
 * block 2s + 1.  Column j of an n8 tile of x is token 4 nb + (j >> 1),
 * block half h = j & 1: its B registers are x where h == t >> 1 (the lane's
 * own block) and zero elsewhere.  Then D[row][2 tok + h] is the row's sum
 * over the sector's block h alone, and lane (g, t) ends with token t's two
 * block sums of rows g and g + 8 in c0..c3: c0 s(g, 2s) + c1 s(g, 2s+1) is
 * added into the f32 total of (row g, token t), exactly the per-group
 * promotion of w4a16.  Four tokens an n8 tile: NB = 1, 2, 4 tiles for m
 * <= 4, <= 8, <= 16 (the same mma count as w4a16 at m <= 4, twice above).
 *
 * Decode, a word q of 8 codes (code i at bits 4i) into 4 bf16x2 pairs p =
 * (code p, code p + 4), q' = q (p = 0, 1) or q >> 8 (p = 2, 3):
 *   ((q' & 0x000F000F) * 4160) & 0x81C081C0   (p even; 4160 = 2^6 + 2^12)
 *   ((q' & 0x00F000F0) *  260) & 0x81C081C0   (p odd;   260 = 2^2 + 2^8)
 * writes each nibble twice without carries and keeps the magnitude at bits
 * 6..8 and the sign at 15: the bf16 bits of the E2M1 value times 2^-126
 * (code 1 a bf16 subnormal, which fma.rn.bf16x2 keeps); one bf16x2 fma by
 * (2^126, 2^126) with -0 added makes it the exact E2M1 value, sign of zero
 * kept.  Per word: 1 shift, 4 x (and, imad, and), 4 bf16x2 fma = 17.  (A byte_perm
 * table of 2|v| in {0,1,2,3,4,6,8,12} as 0x4300 | m needs the 3 magnitude
 * bits masked out of the selector, since prmt reads selector bit 3 as its
 * sign-replicate mode, a pair-building permute and a sign xor per pair: more
 * instructions than the multiply.)  x's B registers: 8 bf16 of x (one
 * 16-byte load) permuted by 4 byte_perms into (e0,e4), (e1,e5), (e2,e6),
 * (e3,e7), serving R tiles of W.
 *
 * Exactness: the tensor cores sum x v of one block half (products exact in
 * f32: 8 by 2 significant bits), the sum times the block's 2^(e-127) (a
 * power of two: exact unless it leaves f32's range) is added into the f32
 * total, so only the f32 summation order differs from the reference.  The
 * scale's f32 bits are e << 23 for e in 1..254 (a shift and a mask per
 * block); e = 0 (2^-127, an f32 subnormal) and e = 255 (NaN) are found per
 * chunk by a byte test on the scale words, and a warp vote then runs the
 * chunk through a second copy of its code with the exact conversion (never,
 * for a real model's weights; a branch inside one copy was predicated).
 *
 * Work, as w4a16.gemv_frag_sym: a warp owns R = 1 or 2 tiles of 16 rows (R
 * = 2 only at NB = 1) and a contiguous slice of the k / 128 chunks (64
 * bytes a row: both sectors, and the row's 4 scale bytes as one u32); the
 * KS = blockDim / 32 warps of a block split K and add their totals in
 * shared memory in warp order (deterministic) at the end.  Two register
 * stages: the next chunk's codes and scales are loaded before the current
 * chunk is computed; x is read where it is used (L1).  The host plans R and
 * KS (mxf_plan_of); the device reads KS from blockDim and R from gridDim (R
 * = 1 iff 16 gridDim >= n).  Rows past n are read clamped to n - 1 and not
 * stored; tokens past m are zero columns and not stored.  The four variants
 * (R = 2 at m <= 4; R = 1 at NB = 1, 2, 4) are __noinline__ functions, each
 * allocated on its own: inlined together, ptxas spilled at 128 registers.
 * sm_80's ptxas still spilled the NB = 4 loop, so it keeps one register
 * stage there.  SASS of the common path for sm_90a (test_mxfp4_frag_unit):
 * about 100 instructions per 16 bytes of codes a lane at m <= 4, 147 at m
 * <= 8, 204 above (w4a16's decode is 11 per 8 weights, this one 17).
 * Called anyway with k % 128 != 0, m > 16 or misaligned pointers, the
 * kernel writes NaN to every output, as mxfp4.gemv does.
 */

static const char MXF_SRC[] =
    "/* qcore mxfp4 GEMV, W as the mma A operand: y[m,n] = x[m,k] . dec(W)[n,k]^T, m <= 16 */\n"
    "typedef unsigned int u32;\n"
    "typedef unsigned short u16;\n"
    "typedef unsigned char u8;\n"
    "typedef long long ll;\n"
    "#define MXF_P126 0x7E807E80u /* bf16x2 (2^126, 2^126) */\n"
    "__device__ __forceinline__ void mxf_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "/* pair (code p, code p + 4) of a word, exact: MASK/MUL 0x000F000F/4160 (p even) or 0x00F000F0/260 (p odd) */\n"
    "template <u32 MASK, u32 MUL> __device__ __forceinline__ u32 mxf_pair(u32 q) {\n"
    "    const u32 v = ((q & MASK) * MUL) & 0x81C081C0u; /* value * 2^-126 */\n"
    "    u32 d;\n"
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(v), \"r\"(MXF_P126), \"r\"(0x80008000u));\n"
    "    return d;\n"
    "}\n"
    "/* nonzero when a byte of the scale word may be 0x00 or 0xFF (false positives possible, no misses) */\n"
    "__device__ __forceinline__ u32 mxf_special(u32 w) {\n"
    "    const u32 d = (w ^ (w >> 1)) & 0x7F7F7F7Fu; /* zero byte iff all 8 bits of the scale byte equal */\n"
    "    return (d - 0x01010101u) & 0x80808080u;\n"
    "}\n"
    "/* 2^(e-127) of byte J of a scale word, e in 1..254 */\n"
    "template <int J> __device__ __forceinline__ float mxf_scale(u32 w) {\n"
    "    const u32 b = J == 0 ? w << 23 : J == 1 ? w << 15 : J == 2 ? w << 7 : w >> 1;\n"
    "    return __uint_as_float(b & 0x7F800000u);\n"
    "}\n"
    "/* any e: 0 is the subnormal 2^-127, 255 NaN */\n"
    "__device__ __forceinline__ float mxf_scale_any(u32 w, int j) {\n"
    "    const u32 e = (w >> (8 * j)) & 255u;\n"
    "    return __uint_as_float(e == 0u ? 0x00400000u : e == 255u ? 0x7FC00000u : e << 23);\n"
    "}\n"
    "/* one chunk (128 codes, 64 bytes a row) of a warp's rows: words of rows g and g + 8 per tile (sector s in\n"
    "   words 2s, 2s + 1), and their scale words */\n"
    "template <int R> struct MxfStage {\n"
    "    u32 wa[R][4], wb[R][4];\n"
    "    u32 sa[R], sb[R];\n"
    "};\n"
    "__device__ __forceinline__ void mxf_ld8(const u8 *p, u32 &a, u32 &b) {\n"
    "    asm(\"ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\" : \"=r\"(a), \"=r\"(b) : \"l\"(p));\n"
    "}\n"
    "/* codes at byte offset o (a multiple of 64: chunk c0 + o / 64) from the lane's row pointers, scales at o / 16 */\n"
    "template <int R>\n"
    "__device__ __forceinline__ void mxf_load(MxfStage<R> &s, const u8 *const *qa, const u8 *const *qb,\n"
    "                                         const u8 *const *sa, const u8 *const *sb, int o) {\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++) {\n"
    "        mxf_ld8(qa[r] + o, s.wa[r][0], s.wa[r][1]);\n"
    "        mxf_ld8(qa[r] + o + 32, s.wa[r][2], s.wa[r][3]);\n"
    "        mxf_ld8(qb[r] + o, s.wb[r][0], s.wb[r][1]);\n"
    "        mxf_ld8(qb[r] + o + 32, s.wb[r][2], s.wb[r][3]);\n"
    "        s.sa[r] = __ldg((const u32 *)(sa[r] + o / 16));\n"
    "        s.sb[r] = __ldg((const u32 *)(sb[r] + o / 16));\n"
    "    }\n"
    "}\n"
    "template <int R> __device__ __forceinline__ bool mxf_any_special(const MxfStage<R> &s) {\n"
    "    u32 sp = 0;\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++) sp |= mxf_special(s.sa[r]) | mxf_special(s.sb[r]);\n"
    "    return __any_sync(0xffffffffu, sp != 0u);\n"
    "}\n"
    "/* one chunk; x at element offset o from the lane's x row (tile nb's token 4 nb rows further, xs elements a\n"
    "   tile).  SPECIAL: a scale byte 0 or 0xFF may be in the warp's chunk (never in a real model's weights); a\n"
    "   warp vote picks this copy, as a branch inside would be predicated and cost every chunk */\n"
    "template <int R, int NB, bool SPECIAL>\n"
    "__device__ __forceinline__ void mxf_compute(const MxfStage<R> &s, float (*acc)[NB][2], const u16 *xr, ll xs,\n"
    "                                            const bool *xok, int o) {\n"
    "#pragma unroll\n"
    "    for (int sec = 0; sec < 2; sec++) {\n"
    "        float part[R][NB][4];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "            for (int nb = 0; nb < NB; nb++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) part[r][nb][e] = 0.f;\n"
    "#pragma unroll\n"
    "        for (int h = 0; h < 2; h++) {\n"
    "            u32 a[R][8]; /* rows g, g + 8: pairs 0, 1 (one mma), then 2, 3 */\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < R; r++) {\n"
    "                const u32 A = s.wa[r][2 * sec + h], B = s.wb[r][2 * sec + h], A2 = A >> 8, B2 = B >> 8;\n"
    "                a[r][0] = mxf_pair<0x000F000Fu, 4160u>(A), a[r][1] = mxf_pair<0x000F000Fu, 4160u>(B);\n"
    "                a[r][2] = mxf_pair<0x00F000F0u, 260u>(A), a[r][3] = mxf_pair<0x00F000F0u, 260u>(B);\n"
    "                a[r][4] = mxf_pair<0x000F000Fu, 4160u>(A2), a[r][5] = mxf_pair<0x000F000Fu, 4160u>(B2);\n"
    "                a[r][6] = mxf_pair<0x00F000F0u, 260u>(A2), a[r][7] = mxf_pair<0x00F000F0u, 260u>(B2);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int nb = 0; nb < NB; nb++) {\n"
    "                /* 8 bf16 of x where the column is this lane's block half, else zeros; B registers (e0,e4),\n"
    "                   (e1,e5) for the pairs 0, 1; (e2,e6), (e3,e7) for 2, 3 */\n"
    "                const uint4 v = xok[nb] ? __ldg((const uint4 *)(xr + nb * xs + o + sec * 64 + h * 8))\n"
    "                                        : make_uint4(0u, 0u, 0u, 0u);\n"
    "                const u32 b0 = __byte_perm(v.x, v.z, 0x5410), b1 = __byte_perm(v.x, v.z, 0x7632);\n"
    "                const u32 b2 = __byte_perm(v.y, v.w, 0x5410), b3 = __byte_perm(v.y, v.w, 0x7632);\n"
    "#pragma unroll\n"
    "                for (int r = 0; r < R; r++) {\n"
    "                    mxf_mma(part[r][nb], a[r][0], a[r][1], a[r][2], a[r][3], b0, b1);\n"
    "                    mxf_mma(part[r][nb], a[r][4], a[r][5], a[r][6], a[r][7], b2, b3);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        /* promotion: c0, c1 are row g's sums of blocks 2 sec, 2 sec + 1; c2, c3 row g + 8's */\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < R; r++) {\n"
    "            const u32 wa = s.sa[r] >> (16 * sec), wb = s.sb[r] >> (16 * sec);\n"
    "            const float s0 = SPECIAL ? mxf_scale_any(wa, 0) : mxf_scale<0>(wa);\n"
    "            const float s1 = SPECIAL ? mxf_scale_any(wa, 1) : mxf_scale<1>(wa);\n"
    "            const float s2 = SPECIAL ? mxf_scale_any(wb, 0) : mxf_scale<0>(wb);\n"
    "            const float s3 = SPECIAL ? mxf_scale_any(wb, 1) : mxf_scale<1>(wb);\n"
    "#pragma unroll\n"
    "            for (int nb = 0; nb < NB; nb++) {\n"
    "                acc[r][nb][0] = fmaf(s1, part[r][nb][1], fmaf(s0, part[r][nb][0], acc[r][nb][0]));\n"
    "                acc[r][nb][1] = fmaf(s3, part[r][nb][3], fmaf(s2, part[r][nb][2], acc[r][nb][1]));\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "template <int R, int NB>\n"
    "__device__ __forceinline__ void mxf_chunk(const MxfStage<R> &s, float (*acc)[NB][2], const u16 *xr, ll xs,\n"
    "                                          const bool *xok, int o) {\n"
    "    if (mxf_any_special<R>(s)) mxf_compute<R, NB, true>(s, acc, xr, xs, xok, o);\n"
    "    else mxf_compute<R, NB, false>(s, acc, xr, xs, xok, o);\n"
    "}\n"
    "/* not inlined: each variant gets its own register allocation (inlined together, ptxas spilled them) */\n"
    "template <int R, int NB>\n"
    "__device__ __noinline__ void mxf_gemv(const u16 *x, const u8 *q, const u8 *sc, float *y, int m, int n, ll k,\n"
    "                                         int n0, float *red) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"
    "    const int ks = blockDim.x >> 5;\n"
    "    const ll chunks = k >> 7;\n"
    "    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;\n"
    "    /* the lane's pointers at chunk c0, advanced by two chunks a trip (offsets in the loop are immediates) */\n"
    "    const u8 *qa[R], *qb[R], *sa[R], *sb[R];\n"
    "    bool xok[NB];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++) {\n"
    "        int ra = n0 + 16 * r + g, rb = ra + 8;\n"
    "        ra = ra < n ? ra : n - 1;\n"
    "        rb = rb < n ? rb : n - 1;\n"
    "        qa[r] = q + (ll)ra * (k / 2) + c0 * 64 + 8 * t;\n"
    "        qb[r] = q + (ll)rb * (k / 2) + c0 * 64 + 8 * t;\n"
    "        sa[r] = sc + (ll)ra * (k / 32) + c0 * 4;\n"
    "        sb[r] = sc + (ll)rb * (k / 32) + c0 * 4;\n"
    "    }\n"
    "    /* column g of tile nb: token 4 nb + g / 2, block half g & 1; nonzero where that is this lane's half */\n"
    "#pragma unroll\n"
    "    for (int nb = 0; nb < NB; nb++) xok[nb] = 4 * nb + (g >> 1) < m && (g & 1) == (t >> 1);\n"
    "    const ll xs = 4 * k; /* tile nb + 1's token is 4 rows of x further */\n"
    "    const u16 *xr = x + (xok[0] ? (ll)(g >> 1) * k : 0) + c0 * 128 + 16 * t;\n"
    "    float acc[R][NB][2];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "        for (int nb = 0; nb < NB; nb++) acc[r][nb][0] = acc[r][nb][1] = 0.f;\n"
    "    /* two register stages, loaded one chunk ahead; the loop body is unrolled by two so no stage is copied.\n"
    "       sm_80's ptxas spills the m > 8 variant in its loop at 128 registers: one stage there */\n"
    "#if __CUDA_ARCH__ < 900\n"
    "    constexpr bool TWO = NB < 4;\n"
    "#else\n"
    "    constexpr bool TWO = true;\n"
    "#endif\n"
    "    if (TWO) {\n"
    "        MxfStage<R> s0, s1;\n"
    "        if (c0 < c1) mxf_load<R>(s0, qa, qb, sa, sb, 0);\n"
    "        for (ll c = c0; c < c1; c += 2) {\n"
    "            if (c + 1 < c1) mxf_load<R>(s1, qa, qb, sa, sb, 64);\n"
    "            mxf_chunk<R, NB>(s0, acc, xr, xs, xok, 0);\n"
    "            if (c + 1 >= c1) break;\n"
    "            if (c + 2 < c1) mxf_load<R>(s0, qa, qb, sa, sb, 128);\n"
    "            mxf_chunk<R, NB>(s1, acc, xr, xs, xok, 128);\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < R; r++) qa[r] += 128, qb[r] += 128, sa[r] += 8, sb[r] += 8;\n"
    "            xr += 256;\n"
    "        }\n"
    "    } else {\n"
    "        for (ll c = c0; c < c1; c++) {\n"
    "            MxfStage<R> s0;\n"
    "            mxf_load<R>(s0, qa, qb, sa, sb, 0);\n"
    "            mxf_chunk<R, NB>(s0, acc, xr, xs, xok, 0);\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < R; r++) qa[r] += 64, qb[r] += 64, sa[r] += 4, sb[r] += 4;\n"
    "            xr += 128;\n"
    "        }\n"
    "    }\n"
    "    /* the K split: warps 1.. leave their totals, warp 0 adds them in warp order and stores */\n"
    "    constexpr int NA = R * NB * 2;\n"
    "    if (ks > 1) {\n"
    "        if (warp > 0) {\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < NA; i++) red[((warp - 1) * NA + i) * 32 + lane] = (&acc[0][0][0])[i];\n"
    "        }\n"
    "        __syncthreads();\n"
    "        if (warp == 0)\n"
    "            for (int w = 1; w < ks; w++)\n"
    "#pragma unroll\n"
    "                for (int i = 0; i < NA; i++) (&acc[0][0][0])[i] += red[((w - 1) * NA + i) * 32 + lane];\n"
    "        __syncthreads(); /* red is free again (the second tile of a 32-row block comes back for it) */\n"
    "    }\n"
    "    if (warp > 0) return;\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "        for (int nb = 0; nb < NB; nb++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 2; e++) {\n"
    "                const int tok = 4 * nb + t, wi = n0 + 16 * r + g + 8 * e;\n"
    "                if (tok < m && wi < n) y[(ll)tok * n + wi] = acc[r][nb][e];\n"
    "            }\n"
    "}\n"
    "/* NaN everywhere: the answer to arguments the kernel cannot honour */\n"
    "__device__ void mxf_fill_nan(float *y, ll count) {\n"
    "    const ll step = (ll)gridDim.x * blockDim.x;\n"
    "    for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) y[i] = __uint_as_float(0x7fc00000u);\n"
    "}\n"
    "/* m > 4 (two or four n8 tiles of x) runs one 16-row tile at a time, the tiles of a 32-row block in turn */\n"
    "template <int NB>\n"
    "__device__ __forceinline__ void mxf_go(const u16 *x, const u8 *q, const u8 *sc, float *y, int m, int n, ll k, int R,\n"
    "                                       float *red) {\n"
    "    const int n0 = blockIdx.x * (16 * R); /* n < 2^31 (eligibility) */\n"
    "    if (NB == 1 && R == 2) {\n"
    "        mxf_gemv<2, 1>(x, q, sc, y, m, n, k, n0, red);\n"
    "    } else {\n"
    "        mxf_gemv<1, NB>(x, q, sc, y, m, n, k, n0, red);\n"
    "        if (R == 2 && n0 + 16 < n) mxf_gemv<1, NB>(x, q, sc, y, m, n, k, n0 + 16, red);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(512) qc_mxfp4_gemv_frag(const u16 *x, const u8 *q, const u8 *sc,\n"
    "        float *y, ll m, ll n, ll k) {\n"
    "    extern __shared__ float red[];\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (m > 16 || k <= 0 || (k & 127) || n > 2147483647LL - 32 || ((unsigned long long)q & 7) ||\n"
    "        ((unsigned long long)x & 15) || ((unsigned long long)sc & 3)) {\n"
    "        mxf_fill_nan(y, m * n);\n"
    "        return;\n"
    "    }\n"
    "    /* the host's tile count: R = 1 gives 16-row blocks (then 16 gridDim >= n), R = 2 32-row ones */\n"
    "    const int R = (ll)gridDim.x * 16 >= n ? 1 : 2;\n"
    "    if (m <= 4) mxf_go<1>(x, q, sc, y, (int)m, (int)n, k, R, red);\n"
    "    else if (m <= 8) mxf_go<2>(x, q, sc, y, (int)m, (int)n, k, R, red);\n"
    "    else mxf_go<4>(x, q, sc, y, (int)m, (int)n, k, R, red);\n"
    "}\n";

/* ---- the launch plan (the device reads KS from blockDim and R from gridDim) ---- */

/* R = 2 (x's registers serve two tiles) only at m <= 4: the device runs m > 4 a tile at a time
 * (mxfp4_frag_plan_of, QC_MXF_R / QC_MXF_KS override) */
static void mxf_plan_of(int64_t m, int64_t n, int64_t k, mxfp4_frag_plan *p) {
    mxfp4_frag_plan_of(m, n, k, m <= 4, "QC_MXF_R", "QC_MXF_KS", p);
}

/* the floats each lane leaves for the reduction: R tiles (the device runs one at a time above m = 4) x NB x 2 */
static uint32_t mxf_red_bytes(int64_t m, const mxfp4_frag_plan *p) {
    int nb = m <= 4 ? 1 : m <= 8 ? 2 : 4, r = m <= 4 ? p->r : 1;
    return p->ks > 1 ? (uint32_t)(p->ks - 1) * (uint32_t)(r * nb * 2) * 32u * 4u : 0u;
}

static void mxf_dims(const qc_problem *p, qc_launch_dims *d) {
    mxfp4_frag_plan pl;
    mxf_plan_of(p->m, p->n, p->k, &pl);
    mxfp4_frag_dims(&pl, mxf_red_bytes(p->m, &pl), d);
}

/* ---- eligibility ---- */

static int mxf_eligible(const qc_problem *p, qc_reason *why) { return mxfp4_frag_eligible("mxfp4.gemv_frag", p, why); }

qc_status mxfp4_frag_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void), int64_t m_max) {
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .id = "mxfp4.gemv_frag",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = m_max, /* the kernel itself takes 1..16 */
        .arch = {80, QC_SM_ANY}, /* mma.sync bf16 and bf16x2 fma: sm_80 */
        .n_params = MX_BX_NPARAMS,
        .params = MX_BX_PARAMS,
        .reference = bx_ref, /* mxfp4.gemv's: the same product, in-order f32 sum */
        .cuda_source = MXF_SRC,
        .cuda_entry = "qc_mxfp4_gemv_frag",
        .launch_dims = mxf_dims,
        .eligible = mxf_eligible,
    };
    return api->register_kernel(host, &d);
}
