/* mxfp4_cuda.c - the mxfp4 GPU kernels: decode GEMV (m <= 16), prefill mma.sync GEMM, the sm_100a build. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxfp4_cuda.h"

/*
 * All three compute y[m,n] = x[m,k] . dec(W)[n,k]^T with x already bf16
 * ("x.bf16"), W the format's own packing (qweight u8 [n, k/2], element 2i
 * in the low nibble of byte i; scales E8M0 [n, k/32]), f32 accumulation on
 * bf16 tensor cores (mma.sync m16n8k16).  Decoded weights are exact in
 * bf16: an E2M1 value (at most 3 significant bits) times 2^(e-127) is a
 * bf16 number (subnormal down to 2^-128 included) unless it overflows, and
 * then it is inf as in the f32 reference; 0xFF is NaN.  So the products are
 * the reference's, and only the f32 summation order differs.  BF16 weights
 * are never written to device memory: the GEMV dequantizes in registers, the
 * GEMM into shared-memory tiles.
 *
 * k must be a multiple of 32 (the format's k_align; eligible() says
 * "align_k"); called anyway, with qweight or x not 16-byte aligned, or the
 * GEMV with m > 16, the kernels write NaN to every output, as the C
 * reference does for what it cannot honour.  Any n >= 1 is handled (rows
 * past n are computed from a clamped row and not stored).
 */

void mxfp4_why(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

/* Shared device helpers, prepended to each kernel's source. */
#define MX_COMMON                                                                                                      \
    "__device__ __forceinline__ unsigned mx_e2m1_bf16(unsigned c) { /* exact bf16 bits of an E2M1 code */\n"          \
    "    unsigned m = c & 7u;\n"                                                                                       \
    "    unsigned b = m < 2u ? m * 0x3f00u : (((m >> 1) + 126u) << 7) | ((m & 1u) << 6);\n"                           \
    "    return b | ((c & 8u) << 12);\n"                                                                               \
    "}\n"                                                                                                              \
    "/* a packed byte -> bf16x2 (element 2i in the low half, as the low nibble) */\n"                                  \
    "__device__ __forceinline__ unsigned mx_pair(unsigned b) { return mx_e2m1_bf16(b & 15u) | (mx_e2m1_bf16(b >> 4) << 16); }\n" \
    "/* E8M0 byte -> bf16x2 of 2^(e-127): e = 0 is the subnormal 2^-127, 0xFF NaN */\n"                               \
    "__device__ __forceinline__ unsigned mx_scale2(unsigned e) {\n"                                                    \
    "    unsigned s = e == 0u ? 0x0040u : e == 255u ? 0x7fc0u : e << 7;\n"                                            \
    "    return s | (s << 16);\n"                                                                                      \
    "}\n"                                                                                                              \
    "/* a * b in bf16x2, exact here (fma with -0 keeps the sign of a zero product) */\n"                               \
    "__device__ __forceinline__ unsigned mx_mul2(unsigned a, unsigned b) {\n"                                          \
    "    unsigned d;\n"                                                                                                \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(0x80008000u));\n"               \
    "    return d;\n"                                                                                                  \
    "}\n"                                                                                                              \
    "__device__ __forceinline__ void mx_mma(float *d, const unsigned *a, const unsigned *b) {\n"                     \
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"                                     \
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"                                   \
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"                                       \
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"               \
    "}\n"                                                                                                              \
    "/* The 256-entry bf16x2 pair table, one copy per lane: entry v of lane l at\n"       \
    "   tab + stride v + 4 l (stride 256 or 128), so lane l always reads bank l.  Warp w\n" \
    "   (of 8) decodes entries 32 w .. 32 w + 31, one per lane, and stores them as\n"        \
    "   16-byte chunks (4 lanes' copies), a warp covering 4 whole entries per store. */\n"     \
    "__device__ __forceinline__ void mx_table(unsigned char *tab, int stride, int warp, int lane) {\n"   \
    "    const unsigned p = mx_pair((unsigned)(warp * 32 + lane));\n"                        \
    "#pragma unroll\n"                                                                         \
    "    for (int j = 0; j < 8; j++) {\n"                                                      \
    "        const int e = j * 4 + (lane >> 3);\n"                                            \
    "        const unsigned v = __shfl_sync(0xffffffffu, p, e);\n"                          \
    "        *(uint4 *)(tab + (warp * 32 + e) * stride + (lane & 7) * 16) = make_uint4(v, v, v, v);\n" \
    "    }\n"                                                                                  \
    "}\n"                                                                                      \
    "/* NaN everywhere: the kernels' answer to arguments they cannot honour */\n"                                      \
    "__device__ void mx_fill_nan(float *y, long long count) {\n"                                                      \
    "    long long step = (long long)gridDim.x * gridDim.y * blockDim.x;\n"                                            \
    "    long long i0 = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;\n"                \
    "    for (long long i = i0; i < count; i += step) y[i] = __uint_as_float(0x7fc00000u);\n"                          \
    "}\n"

/*
 * mxfp4.gemv (1 <= m <= 16): a stream of W with the products on bf16 tensor
 * cores (mma.sync m16n8k16: 16 W rows x 16 k as A, 8 tokens of x as B), the
 * weights decoded in registers by integer arithmetic (no table, no shared
 * memory in the loop).  The layout is the format's own (module comment
 * above): one 16-byte vector is one 32-element block of one row, with one
 * scale byte.
 *
 * Work split.  A block of MXG_WARPS (4) warps owns 16*T rows (T row
 * tiles of 16) and its warps split K: a row's blocks are grouped in quads
 * (4 consecutive blocks, 64 bytes), warp w takes quads [w*qpw, (w+1)*qpw),
 * qpw = ceil(quads / 4), and lane (g, t) = (lane/4, lane%4) reads block
 * 4*quad + t of rows g and g+8 of each tile: one 16-byte
 * ld.global.nc.L1::no_allocate per row (four lanes read 64 contiguous bytes
 * of a row) and its scale byte.  Each lane keeps a ring of D quads in
 * registers (D = 4 for T = 1, 2 for T = 2: 8 vectors of 16 bytes) and asks
 * for quad j + D as soon as quad j is decoded, so every lane has 2*T*D loads
 * in flight all along its range; at 128 registers 4 blocks (16 warps) fit
 * on an SM.  Partial sums of the warps meet in shared memory (8 KiB at
 * most); rows past n are computed from a clamped row and not stored.  Small
 * blocks and T = 1 below MXG_T2_ROWS rows keep the grid at several blocks
 * per SM for the decode shapes (4096 rows: 256 blocks on 132 SMs).
 *
 * Scale factors come from a table in shared memory (mx_s1 and mx_s2 of
 * every byte and of 256, whose factor 0 marks a block past the row: its
 * codes are not loaded and the zero factor cancels them), built once per
 * block while the first loads are in flight.
 *
 * Decode.  Word j of a vector holds elements 8j..8j+7 (nibble i = element
 * 8j+i).  It becomes 4 bf16x2 words, pair p = (element p, element p+4),
 * without a table: for q' = q (p = 0, 1) or q >> 8 (p = 2, 3),
 *   ((q' & 0x000F000F) * 4160) & 0x81C081C0     (p even; 4160 = 65 << 6)
 *   ((q' & 0x00F000F0) *  260) & 0x81C081C0     (p odd;   260 = 65 << 2)
 * The multiply writes the nibble twice (at bits 6..9 and 12..15 of each
 * half, no carries since the copies do not overlap) and the mask keeps the
 * magnitude at bits 6..8 and the sign at bit 15: the bf16 bits of the E2M1
 * value times 2^-126 (codes 0 and 1 are bf16 subnormals, which
 * fma.rn.bf16x2 keeps).  One bf16x2 multiply by 2^(e-1) then gives the
 * exact value times the block scale 2^(e-127) (e = 0 included: 2^-1; 0xFF:
 * NaN).  For e > 128, 2^(e-1) is no bf16, so the value is multiplied by
 * 2^126 and then by 2^(e-127): a second multiply, in a second copy of the
 * quad's code that a warp vote picks when a lane has such a block (a
 * per-word branch would be predicated and cost issue slots every time).
 *
 * The k order inside an mma is free as long as A and B agree: k16 step 2j
 * of a block takes from lane t the pairs p = 0, 1 of word j (A registers
 * a0/a1: rows g, g+8, pair 0; a2/a3: pair 1), step 2j+1 the pairs 2, 3; the
 * B registers are x[token][block*32 + 8j + p, + p + 4], built from one
 * 16-byte load of x (8 elements, read-only path, L1) by byte permutes; at
 * m <= 8 a quad's x is loaded while the previous quad is computed.  At
 * m <= 8 one n-tile (token g), above two (tokens g, 8 + g); tokens past m
 * read row m - 1 (their columns are not stored).  T = 2 only for m > 8 and
 * n >= MXG_T2_ROWS, so that both x tiles serve 32 rows.  Products are exact
 * in f32 (E2M1 x bf16), so only the f32 summation order differs from the
 * reference.  One difference in kind: a lane past the end of a row (k/32
 * not a multiple of 4) multiplies its zeroed weights with x of the row's
 * last block, so an infinite x there makes that output NaN where the
 * reference has an infinity.
 */
#define MXG_WARPS 4          /* per block: 4 blocks of 128 threads per SM at 128 registers */
#define MXG_T2_ROWS 16384    /* T = 2 (m > 8) from here: 512 blocks of 32 rows, about 4 per SM of an H200 */
#define MXG_STR_(v) #v
#define MXG_STR(v) MXG_STR_(v)

static const char GEMV_SRC[] = "/* qcore mxfp4 gemv: y[m,n] = x[m,k] . dec(W)[n,k]^T, m <= 16, x bf16, f32 accumulate */\n" MX_COMMON
    "#define MXG_WARPS " MXG_STR(MXG_WARPS) "\n"
    "#define MXG_T2_ROWS " MXG_STR(MXG_T2_ROWS) "\n"
    "__device__ __forceinline__ uint4 mx_ld16(const unsigned char *p) {\n"
    "    uint4 v;\n"
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "                 : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ unsigned mx_word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }\n"
    "/* 8 E2M1 codes -> 4 bf16x2 of value * 2^-126, pair p = (nibble p, nibble p + 4) */\n"
    "__device__ __forceinline__ void mx_dec8(unsigned q, unsigned *o) {\n"
    "    const unsigned q2 = q >> 8;\n"
    "    o[0] = ((q & 0x000F000Fu) * 4160u) & 0x81C081C0u;\n"
    "    o[1] = ((q & 0x00F000F0u) * 260u) & 0x81C081C0u;\n"
    "    o[2] = ((q2 & 0x000F000Fu) * 4160u) & 0x81C081C0u;\n"
    "    o[3] = ((q2 & 0x00F000F0u) * 260u) & 0x81C081C0u;\n"
    "}\n"
    "/* 8 bf16 of x -> the B pairs (x[p], x[p + 4]), p = 0..3 */\n"
    "__device__ __forceinline__ void mx_xpairs(const uint4 &v, unsigned *b) {\n"
    "    b[0] = __byte_perm(v.x, v.z, 0x5410);\n"
    "    b[1] = __byte_perm(v.x, v.z, 0x7632);\n"
    "    b[2] = __byte_perm(v.y, v.w, 0x5410);\n"
    "    b[3] = __byte_perm(v.y, v.w, 0x7632);\n"
    "}\n"
    "/* the bf16x2 factor that turns value * 2^-126 into value * 2^(e-127): 2^(e-1), or 2^126 when\n"
    "   e > 128; NaN for 255; 0 for 256 (mx_load's mark of a block past the row) */\n"
    "__device__ __forceinline__ unsigned mx_s1(unsigned e) {\n"
    "    return e <= 128u ? ((e + 126u) << 7) * 0x10001u : e < 255u ? 0x7e807e80u : e == 255u ? 0x7fc07fc0u : 0u;\n"
    "}\n"
    "/* the second factor for e in 129..254: 2^(e-127); 1 otherwise */\n"
    "__device__ __forceinline__ unsigned mx_s2(unsigned e) {\n"
    "    return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3f803f80u;\n"
    "}\n"
    "__device__ __forceinline__ void mx_mma_nv(float *d, const unsigned *a, unsigned b0, unsigned b1) {\n"
    "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "        \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "/* one quad from registers: lane t's block of rows g, g + 8 of each tile; s1t: the factors by scale\n"
    "   byte (mx_s1 at e, mx_s2 at 257 + e, in shared memory).  x comes from xq, this lane's 32 elements of the block (or of\n"
    "   the row's last block for a lane past the row, whose weights the zero factor cancels) */\n"
    "template <int MT, int T, bool BIG>\n"
    "__device__ __forceinline__ void mx_quad(const uint4 (&q)[T][2], const unsigned (&se)[T][2], const unsigned (&s1)[T][2],\n"
    "                                        const unsigned *s1t, const uint4 (&xv)[MT][4], float (&acc)[T][MT][4]) {\n"
    "#pragma unroll\n"
    "    for (int w = 0; w < 4; w++) {\n"
    "        unsigned xb[MT][4];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < MT; j++) mx_xpairs(xv[j][w], xb[j]);\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < T; i++) {\n"
    "            unsigned d0[4], d1[4];\n"
    "            mx_dec8(mx_word(q[i][0], w), d0);\n"
    "            mx_dec8(mx_word(q[i][1], w), d1);\n"
    "#pragma unroll\n"
    "            for (int p = 0; p < 4; p++) {\n"
    "                d0[p] = mx_mul2(d0[p], s1[i][0]);\n"
    "                d1[p] = mx_mul2(d1[p], s1[i][1]);\n"
    "            }\n"
    "            if (BIG) { /* a block scale above 2^1 in the warp: rare */\n"
    "                const unsigned s20 = s1t[257 + se[i][0]], s21 = s1t[257 + se[i][1]];\n"
    "#pragma unroll\n"
    "                for (int p = 0; p < 4; p++) {\n"
    "                    d0[p] = mx_mul2(d0[p], s20);\n"
    "                    d1[p] = mx_mul2(d1[p], s21);\n"
    "                }\n"
    "            }\n"
    "            const unsigned a0[4] = {d0[0], d1[0], d0[1], d1[1]}, a1[4] = {d0[2], d1[2], d0[3], d1[3]};\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < MT; j++) {\n"
    "                mx_mma_nv(acc[i][j], a0, xb[j][0], xb[j][1]);\n"
    "                mx_mma_nv(acc[i][j], a1, xb[j][2], xb[j][3]);\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "/* this lane's quad at byte offset 64 d from wp[i][h] (scale at sp + 4 d); a block past the row\n"
    "   gets scale 256 (factor 0) and no load */\n"
    "template <int T>\n"
    "__device__ __forceinline__ void mx_load(uint4 (&q)[T][2], unsigned (&se)[T][2], const unsigned char *const (&wp)[T][2],\n"
    "                                        const unsigned char *const (&sp)[T][2], int d, bool ok) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int h = 0; h < 2; h++) {\n"
    "            if (ok) q[i][h] = mx_ld16(wp[i][h] + 64 * d);\n"
    "            se[i][h] = ok ? (unsigned)__ldg(sp[i][h] + 4 * d) : 256u;\n"
    "        }\n"
    "}\n"
    "/* D quads in flight per lane (a ring of registers): quad j + D is requested as soon as j is decoded */\n"
    "template <int MT, int T, int D>\n"
    "__device__ __forceinline__ void mx_gemv(const unsigned short *x, const unsigned char *qw, const unsigned char *sc,\n"
    "                                        float *y, long long m, long long n, long long k, float *red, unsigned *s1t) {\n"
    "    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "    const long long r0 = (long long)blockIdx.x * (16 * T), rowb = k >> 1;\n"
    "    const int nb = (int)(k >> 5), nq = (nb + 3) >> 2, qpw = (nq + MXG_WARPS - 1) / MXG_WARPS;\n"
    "    const int qlo = warp * qpw, mine = (qlo + qpw < nq ? qlo + qpw : nq) - qlo; /* quads of this warp */\n"
    "    const int b0 = qlo * 4 + t; /* this lane's first block; its j-th is b0 + 4 j */\n"
    "    const unsigned char *wp[T][2];\n"
    "    const unsigned char *sp[T][2];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int h = 0; h < 2; h++) {\n"
    "            long long row = r0 + 16 * i + 8 * h + g;\n"
    "            if (row >= n) row = n - 1; /* computed, never stored */\n"
    "            wp[i][h] = qw + row * rowb + (long long)b0 * 16;\n"
    "            sp[i][h] = sc + row * nb + b0;\n"
    "        }\n"
    "    /* x of this lane's token (clamped to m - 1) from its first block; quad j reads block b0 + 4 j, or\n"
    "       the row's last one past the row: offset min(4 j, nb - 1 - b0) blocks */\n"
    "    const uint4 *xl[MT];\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < MT; j++) xl[j] = (const uint4 *)(x + (8 * j + g < m ? 8 * j + g : m - 1) * k) + 4 * b0;\n"
    "    const int xlast = nb - 1 - b0;\n"
    "    /* XP (one n-tile): x loaded one quad ahead, in two buffers by quad parity (D is even, so no\n"
    "       copies); two n-tiles have no registers for that and load x at the quad */\n"
    "    constexpr bool XP = MT == 1;\n"
    "    uint4 xb[XP ? 2 : 1][MT][4];\n"
    "    auto xload = [&](uint4 (&xv)[MT][4], int j) {\n"
    "        const int o = 4 * (4 * j < xlast ? 4 * j : xlast);\n"
    "#pragma unroll\n"
    "        for (int jj = 0; jj < MT; jj++)\n"
    "#pragma unroll\n"
    "            for (int w = 0; w < 4; w++) xv[jj][w] = __ldg(xl[jj] + o + w);\n"
    "    };\n"
    "    if (XP && mine > 0) xload(xb[0], 0);\n"
    "    float acc[T][MT][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < MT; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "    uint4 q[D][T][2] = {}; /* a lane past the row keeps (finite) old codes, cancelled by a zero factor */\n"
    "    unsigned se[D][T][2];\n"
    "#pragma unroll\n"
    "    for (int d = 0; d < D; d++)\n"
    "        if (d < mine) mx_load<T>(q[d], se[d], wp, sp, d, b0 + 4 * d < nb);\n"
    "    /* the factor table while the first loads are in flight */\n"
    "    for (int e = tid; e <= 256; e += MXG_WARPS * 32) {\n"
    "        s1t[e] = mx_s1((unsigned)e);\n"
    "        s1t[257 + e] = mx_s2((unsigned)e);\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int j0 = 0; j0 < mine; j0 += D) {\n"
    "#pragma unroll\n"
    "        for (int d = 0; d < D; d++) {\n"
    "            const int j = j0 + d, blk = b0 + 4 * j;\n"
    "            if (j >= mine) break; /* warp-uniform */\n"
    "            if (!XP) xload(xb[0], j);\n"
    "            else if (j + 1 < mine) xload(xb[XP ? (d + 1) & 1 : 0], j + 1);\n"
    "            const uint4 (&xv)[MT][4] = xb[XP ? d & 1 : 0];\n"
    "            unsigned s1[T][2];\n"
    "            bool b = false;\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "                for (int h = 0; h < 2; h++) {\n"
    "                    s1[i][h] = s1t[se[d][i][h]];\n"
    "                    b |= s1[i][h] == 0x7e807e80u;\n"
    "                }\n"
    "            /* a whole quad per path: a branch per word would be predicated, costing issue slots */\n"
    "            if (__any_sync(0xffffffffu, b)) mx_quad<MT, T, true>(q[d], se[d], s1, s1t, xv, acc);\n"
    "            else mx_quad<MT, T, false>(q[d], se[d], s1, s1t, xv, acc);\n"
    "            if (j + D < mine) mx_load<T>(q[d], se[d], wp, sp, d + D, blk + 4 * D < nb);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "            for (int h = 0; h < 2; h++) {\n"
    "                wp[i][h] += 64 * D;\n"
    "                sp[i][h] += 4 * D;\n"
    "            }\n"
    "    }\n"
    "    /* partial sums of the 8 warps: [warp][acc index][lane] */\n"
    "    const int per = T * MT * 4;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < MT; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) red[(warp * per + (i * MT + j) * 4 + e) * 32 + lane] = acc[i][j][e];\n"
    "    __syncthreads();\n"
    "    for (int o = tid; o < per * 32; o += MXG_WARPS * 32) {\n"
    "        const int idx = o >> 5, l = o & 31, e = idx & 3, j = (idx >> 2) % MT, i = (idx >> 2) / MT;\n"
    "        const long long row = r0 + 16 * i + (l >> 2) + (e >= 2 ? 8 : 0), tok = 8 * j + 2 * (l & 3) + (e & 1);\n"
    "        if (row < n && tok < m) {\n"
    "            float s = 0.f;\n"
    "#pragma unroll\n"
    "            for (int w = 0; w < MXG_WARPS; w++) s += red[(w * per + idx) * 32 + l];\n"
    "            y[tok * n + row] = s;\n"
    "        }\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(MXG_WARPS * 32, 4) qc_mxfp4_gemv(const unsigned short *x, const unsigned char *qw,\n"
    "        const unsigned char *sc, float *y, long long m, long long n, long long k) {\n"
    "    __shared__ float red[MXG_WARPS * 16 * 32];\n"
    "    __shared__ unsigned s1t[2 * 257]; /* mx_s1, then mx_s2, of every scale byte and of 256 */\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (m > 16 || k <= 0 || (k & 31) || k > 2147483647LL || ((unsigned long long)qw & 15) ||\n"
    "        ((unsigned long long)x & 15)) {\n"
    "        mx_fill_nan(y, m * n);\n"
    "        return;\n"
    "    }\n"
    "    if (m <= 8) mx_gemv<1, 1, 4>(x, qw, sc, y, m, n, k, red, s1t);\n"
    "    else if (n >= MXG_T2_ROWS) mx_gemv<2, 2, 2>(x, qw, sc, y, m, n, k, red, s1t);\n"
    "    else mx_gemv<2, 1, 4>(x, qw, sc, y, m, n, k, red, s1t);\n"
    "}\n";

/* rows per block: the device code's choice of T, times 16 */
static int64_t gemv_rows(int64_t m, int64_t n) { return m > 8 && n >= MXG_T2_ROWS ? 32 : 16; }

/* m, n, k: one block of MXG_WARPS warps per 16 (or 32) rows of W; no dynamic shared memory */
static void gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t rows = gemv_rows(p->m, p->n);
    int64_t blocks = p->m > 0 && p->n > 0 ? (p->n + rows - 1) / rows : 0;
    d->grid[0] = blocks <= 2147483647LL ? (uint32_t)blocks : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = MXG_WARPS * 32;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = 0;
}

static int gemv_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 32) {
        mxfp4_why(why, "align_k", "mxfp4.gemv: k = %lld is not a positive multiple of 32", (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || (p->n + 15) / 16 > 2147483647LL) {
        mxfp4_why(why, "shape", "mxfp4.gemv: n = %lld rows do not fit its grid", (long long)p->n);
        return 0;
    }
    return 1;
}

/*
 * mxfp4.linear_mma (m >= 17): a 128x128 output tile per block of 8 warps
 * (2 x 4, 64x32 each), k in steps of 64 (two E8M0 blocks).  x (bf16) comes
 * by cp.async into a 128x64 swizzled tile; each thread loads one 16-byte
 * block of W (and its scale byte) into registers one step ahead, and
 * decodes it into the 128x64 bf16 W tile in shared memory after the step's
 * MMAs, two weights per lookup in a per-lane copy of the 256-entry pair table
 * (32 KiB, entry v of lane l at 128 v + 4 l: conflict-free); both tiles are
 * double-buffered, one barrier per step.  Fragments by
 * ldmatrix, m16n8k16 bf16 MMA, f32 accumulators.  Rows past m or n are zero
 * and not stored; a K tail of one block (k % 64 == 32) is zero-filled.
 */
static const char MMA_SRC[] = "/* qcore mxfp4 linear, tiled: y[m,n] = x[m,k] . dec(W)[n,k]^T, x bf16, f32 accumulate */\n" MX_COMMON
    "#define TBM 128\n"
    "#define TBN 128\n"
    "#define TBK 64\n"
    "#define TILE_BYTES (128 * TBK * 2) /* one bf16 tile, 16 KiB */\n"
    "/* byte offset of 16-byte chunk c (0..7) of row r in a [rows][64] bf16 tile (128-byte XOR swizzle) */\n"
    "__device__ __forceinline__ unsigned mx_sw(int r, int c) { return (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)); }\n"
    "__device__ __forceinline__ void mx_cp16(unsigned dst, const void *src, bool valid) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(valid ? 16 : 0));\n"
    "}\n"
    "__device__ __forceinline__ void mx_ldm4(unsigned *r, unsigned addr) {\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_mxfp4_linear_mma(const unsigned short *x,\n"
    "        const unsigned char *qw, const unsigned char *sc, float *y, long long m, long long n, long long k) {\n"
    "    extern __shared__ __align__(128) unsigned char smem[];\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (k <= 0 || (k & 31) || ((unsigned long long)qw & 15) || ((unsigned long long)x & 15)) {\n"
    "        mx_fill_nan(y, m * n);\n"
    "        return;\n"
    "    }\n"
    "    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);\n"
    "    const unsigned xs0 = sbase, ws0 = sbase + 2 * TILE_BYTES; /* x tiles [2], W tiles [2], then the table */\n"
    "    unsigned char *lut = smem + 4 * TILE_BYTES;\n"
    "    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
    "    const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;\n"
    "    const long long row0 = (long long)blockIdx.y * TBM, col0 = (long long)blockIdx.x * TBN;\n"
    "    const long long nb = k >> 5, rowb = k >> 1;\n"
    "    const int kt_n = (int)((k + TBK - 1) / TBK);\n"
    "    /* this thread's W block: row wr of the tile, block wb (0, 1) of the step */\n"
    "    const int wr = tid >> 1, wb = tid & 1;\n"
    "    const long long wrow = col0 + wr < n ? col0 + wr : n - 1;\n"
    "    const unsigned char *wq = qw + wrow * rowb, *ws = sc + wrow * nb;\n"
    "    auto load_x = [&](int buf, int kt) {\n"
    "        const long long k0 = (long long)kt * TBK;\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "            int idx = tid + 256 * j, r = idx >> 3, c = idx & 7;\n"
    "            long long gr = row0 + r, gk = k0 + c * 8;\n"
    "            bool ok = gr < m && gk < k;\n"
    "            mx_cp16(xs0 + buf * TILE_BYTES + mx_sw(r, c), x + (ok ? gr * k + gk : 0), ok);\n"
    "        }\n"
    "    };\n"
    "    uint4 wv;\n"
    "    unsigned we;\n"
    "    auto load_w = [&](int kt) {\n"
    "        long long b = (long long)kt * 2 + wb;\n"
    "        bool ok = b < nb;\n"
    "        wv = ok ? *(const uint4 *)(wq + b * 16) : make_uint4(0u, 0u, 0u, 0u);\n"
    "        we = ok ? (unsigned)__ldg(ws + b) : 127u;\n"
    "    };\n"
    "    /* the 32 decoded elements: chunks 4 wb .. 4 wb + 3 of row wr; byte v of lane l's\n"
    "       copy of the pair table at lut + 128 v + 4 l (one bank per lane) */\n"
    "    const unsigned lane4 = (unsigned)lane * 4u;\n"
    "    auto store_w = [&](int buf) {\n"
    "        const unsigned s2 = mx_scale2(we);\n"
    "        unsigned o[16];\n"
    "        const unsigned wd[4] = {wv.x, wv.y, wv.z, wv.w};\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 16; i++) {\n"
    "            const unsigned w = wd[i >> 2], sh = 8 * (i & 3);\n"
    "            const unsigned off = (sh == 0 ? w << 7 : w >> (sh - 7)) & 0x7f80u;\n"
    "            o[i] = mx_mul2(*(const unsigned *)(lut + (off | lane4)), s2);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int c = 0; c < 4; c++)\n"
    "            asm volatile(\"st.shared.v4.u32 [%0], {%1,%2,%3,%4};\\n\" ::\"r\"(ws0 + buf * TILE_BYTES + mx_sw(wr, 4 * wb + c)),\n"
    "                         \"r\"(o[4 * c]), \"r\"(o[4 * c + 1]), \"r\"(o[4 * c + 2]), \"r\"(o[4 * c + 3]));\n"
    "    };\n"
    "    float acc[4][4][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "    load_x(0, 0);\n"
    "    asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    load_w(0);\n"
    "    mx_table(lut, 128, warp, lane); /* the pair table (32 KiB) while the first tiles load */\n"
    "    __syncthreads();\n"
    "    store_w(0);\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "    __syncthreads();\n"
    "    for (int kt = 0; kt < kt_n; kt++) {\n"
    "        const int cur = kt & 1;\n"
    "        const bool more = kt + 1 < kt_n;\n"
    "        if (more) {\n"
    "            load_x(cur ^ 1, kt + 1);\n"
    "            load_w(kt + 1);\n"
    "        }\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "        const unsigned ab = xs0 + cur * TILE_BYTES, bb = ws0 + cur * TILE_BYTES;\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < 4; kk++) {\n"
    "            unsigned a[4][4], b[4][2];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) {\n"
    "                int r = wm * 64 + i * 16 + (lane & 15);\n"
    "                mx_ldm4(a[i], ab + mx_sw(r, kk * 2 + (lane >> 4)));\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < 2; j++) {\n"
    "                int r = wn * 32 + j * 16 + (lane & 7) + ((lane >> 4) << 3);\n"
    "                unsigned qq[4];\n"
    "                mx_ldm4(qq, bb + mx_sw(r, kk * 2 + ((lane >> 3) & 1)));\n"
    "                b[2 * j][0] = qq[0];\n"
    "                b[2 * j][1] = qq[1];\n"
    "                b[2 * j + 1][0] = qq[2];\n"
    "                b[2 * j + 1][1] = qq[3];\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < 4; j++) mx_mma(acc[i][j], a[i], b[j]);\n"
    "        }\n"
    "        if (more) store_w(cur ^ 1);\n"
    "        asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "        __syncthreads();\n"
    "    }\n"
    "    const bool pairs = (n & 1) == 0;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "            for (int h = 0; h < 2; h++) {\n"
    "                long long r = row0 + wm * 64 + i * 16 + g + h * 8;\n"
    "                long long cn = col0 + wn * 32 + j * 8 + 2 * t;\n"
    "                if (r >= m) continue;\n"
    "                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];\n"
    "                if (pairs && cn + 1 < n) {\n"
    "                    *(float2 *)(y + r * n + cn) = make_float2(v0, v1);\n"
    "                } else {\n"
    "                    if (cn < n) y[r * n + cn] = v0;\n"
    "                    if (cn + 1 < n) y[r * n + cn + 1] = v1;\n"
    "                }\n"
    "            }\n"
    "}\n";

#define MMA_SMEM (4u * 128u * 64u * 2u + 32768u) /* x and W bf16 tiles, double-buffered, and the table: 96 KiB */
#define MMA_M_TILES_MAX 65535LL

/* m, n, k: grid.x over 128-column tiles of W, grid.y over 128-row tiles of x */
static void mma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t tn = p->n > 0 ? (p->n + 127) / 128 : 0, tm = p->m > 0 ? (p->m + 127) / 128 : 0;
    d->grid[0] = tn <= 2147483647LL ? (uint32_t)tn : 0;
    d->grid[1] = tm <= MMA_M_TILES_MAX ? (uint32_t)tm : 0;
    d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = MMA_SMEM;
}

static int mma_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 32) {
        mxfp4_why(why, "align_k", "mxfp4.linear_mma: k = %lld is not a positive multiple of 32",
                         (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || (p->n + 127) / 128 > 2147483647LL) {
        mxfp4_why(why, "shape", "mxfp4.linear_mma: n = %lld columns do not fit its grid", (long long)p->n);
        return 0;
    }
    return 1;
}

const qc_kernel_param MX_BX_PARAMS[MX_BX_NPARAMS] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};

#define FRAG_MAX_KS 16
#define FRAG_WANT_WARPS 2112 /* 16 warps per SM of an H200 (128 registers a thread), one wave */

void mxfp4_frag_plan_of(int64_t m, int64_t n, int64_t k, int r2_ok, const char *env_r, const char *env_ks,
                        mxfp4_frag_plan *p) {
    memset(p, 0, sizeof *p);
    if (m <= 0 || n <= 0 || k < 128) return;
    int64_t chunks = k / 128, tiles = (n + 15) / 16;
    p->r = tiles >= 2 * 264 && r2_ok ? 2 : 1;
    const char *er = getenv(env_r), *ek = getenv(env_ks);
    if (er && (atoi(er) == 1 || atoi(er) == 2)) p->r = atoi(er);
    if (tiles == 1) p->r = 1; /* 16 gridDim >= n then reads as R = 1 */
    p->blocks = (tiles + p->r - 1) / p->r;
    p->ks = 1;
    while (p->ks < FRAG_MAX_KS && p->blocks * p->ks * 2 <= FRAG_WANT_WARPS && chunks >= 4 * p->ks) p->ks *= 2;
    if (ek) {
        int v = atoi(ek);
        if (v >= 1 && v <= FRAG_MAX_KS) p->ks = v;
    }
}

void mxfp4_frag_dims(const mxfp4_frag_plan *pl, uint32_t red_bytes, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (pl->blocks <= 0 || pl->blocks > 0x7fffffffLL) return;
    d->grid[0] = (uint32_t)pl->blocks;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (uint32_t)pl->ks;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = red_bytes;
}

int mxfp4_frag_eligible(const char *id, const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 128) {
        mxfp4_why(why, "align_k", "%s streams K in chunks of 128 elements (4 scale blocks), layer has K=%lld "
                  "(mxfp4.gemv takes any multiple of 32)", id, (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || p->n > 0x7fffffffLL - 32) {
        mxfp4_why(why, "shape", "%s: n = %lld rows do not fit its 32-bit row index", id, (long long)p->n);
        return 0;
    }
    return 1;
}

qc_status mxfp4_cuda_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void)) {
    qc_kernel_desc gemv = {
        .struct_size = sizeof gemv,
        .id = "mxfp4.gemv",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 16,
        .arch = {80, QC_SM_ANY},
        .n_params = sizeof MX_BX_PARAMS / sizeof MX_BX_PARAMS[0],
        .params = MX_BX_PARAMS,
        .reference = bx_ref,
        .cuda_source = GEMV_SRC,
        .cuda_entry = "qc_mxfp4_gemv",
        .launch_dims = gemv_dims,
        .eligible = gemv_eligible,
    };
    qc_kernel_desc mma = gemv;
    mma.id = "mxfp4.linear_mma";
    mma.m_min = 17;
    mma.m_max = MMA_M_TILES_MAX * 128;
    mma.cuda_source = MMA_SRC;
    mma.cuda_entry = "qc_mxfp4_linear_mma";
    mma.launch_dims = mma_dims;
    mma.eligible = mma_eligible;
    /*
     * sm_100: FP4 tensor cores (tcgen05.mma kind::mxf4 block_scale) multiply
     * FP4 by FP4, i.e. they would need the activations quantized to MXFP4 as
     * well: other numerics than this weight-only format's reference.  What
     * runs there is the same weight-only decode GEMV compiled for sm_100a,
     * registered for its own arch so that the engine prefers it on sm_100
     * and the reason `arch` shows below it.  Not an FP4 tensor-core kernel.
     */
    qc_kernel_desc b100 = gemv;
    b100.id = "mxfp4.gemv_sm100";
    b100.arch = (qc_arch_range){100, 100};
    /* mxfp4.gemv_frag_ps first, for M 1..16: on the H200 (session 7, gemm-bench, the four Llama-3-8B shapes at
     * M = 1, 4, 8, 16) it was faster than mxfp4.gemv_frag at every M and shape where both ran (by up to 11% on
     * gate_up at M = 1) and than mxfp4.gemv everywhere but qkv at M <= 8 (up to 7% slower there); at M = 16
     * gate_up 35.1 us against mxfp4.gemv's 43.2.  Then mxfp4.gemv for what it refuses (k % 128), then
     * mxfp4.gemv_frag (M 1..16, never picked: A/B runs and its tests).  QC_MXF_PS=off restores session 6's
     * order: mxfp4.gemv_frag first for M <= MXF_FRAG_M_MAX, mxfp4.gemv, then mxfp4.gemv_frag_ps. */
    const char *penv = getenv("QC_MXF_PS");
    const int ps_first = !(penv && strcmp(penv, "off") == 0);
    qc_status st = mxfp4_gemv1_register(api, host, bx_ref); /* m = 1 only (whole-line loads) */
    if (st == QC_OK)
        st = ps_first ? mxfp4_frag_ps_register(api, host, bx_ref) : mxfp4_frag_register(api, host, bx_ref, MXF_FRAG_M_MAX);
    if (st == QC_OK) st = api->register_kernel(host, &gemv);
    if (st == QC_OK) st = ps_first ? mxfp4_frag_register(api, host, bx_ref, 16) : mxfp4_frag_ps_register(api, host, bx_ref);
    if (st == QC_OK) st = api->register_kernel(host, &mma);
    if (st == QC_OK) st = mxfp4_wgmma_register(api, host, (mxfp4_bx_ref_fn)bx_ref); /* bx_ref is mx_linear_bx_ref */
    if (st == QC_OK) st = api->register_kernel(host, &b100);
    return st;
}
