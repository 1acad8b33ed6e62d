/* mxfp4_cuda.c - the mxfp4 GPU kernels: decode GEMV (m <= 16), prefill mma.sync GEMM, the sm_100a build. */
#include <stdarg.h>
#include <stdio.h>
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

static void why_set(qc_reason *why, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(qc_reason *why, const char *code, const char *fmt, ...) {
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
 * mxfp4.gemv (1 <= m <= 16).  A block of 8 warps owns 16*T rows of W (T = 1
 * for m <= 4, else 2) and its warps split K in chunks of 4U blocks of 32
 * (U = 4, resp. 2).  Lane (g, t) = (lane/4, lane%4) streams, for each of its
 * rows g and g+8 of each 16-row tile, U consecutive 16-byte vectors (one
 * 32-element block each, one E8M0 byte each) with non-allocating loads: all
 * T*2*U loads of a chunk are in flight together.  The weights are the A
 * operand of m16n8k16 (16 W rows x 16 k), x the B operand (8 tokens; two
 * n-tiles for m > 8).  Because a dot product does not care about the order
 * of k, the k16 step s of block u takes from lane t the elements 4s..4s+3
 * of its own block: bytes 2s and 2s+1 of the vector, i.e. the register
 * pairs a0/a1 (row g / g+8, low nibble first) and a2/a3, while the x
 * fragment is x[token][4s .. 4s+3] of the same block, 8 contiguous bytes.
 *
 * Decoding a byte (two elements) is one PRMT and one shared-memory load: a
 * 256-entry table of bf16x2 pairs, replicated per lane so that lane l always
 * reads bank l (entry v of lane l at byte offset 256 v + 4 l; PRMT builds
 * that offset from the packed word and 4 l in one instruction), then one
 * bf16x2 multiply by the block scale.  The table (64 KiB, half of it used)
 * is built while the first loads are in flight and is reused after the loop
 * for the cross-warp reduction of the partial sums.
 */
static const char GEMV_SRC[] = "/* qcore mxfp4 gemv: y[m,n] = x[m,k] . dec(W)[n,k]^T, m <= 16, x bf16, f32 accumulate */\n" MX_COMMON
    "#define MXG_WARPS 8\n"
    "__device__ __forceinline__ uint4 mx_ld16(const unsigned char *p) {\n"
    "    uint4 v;\n"
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "                 : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ unsigned mx_word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }\n"
    "/* byte p of w decoded through lane l's copy of the table */\n"
    "__device__ __forceinline__ unsigned mx_lut(const unsigned char *lut, unsigned w, unsigned lane4, int p) {\n"
    "    return *(const unsigned *)(lut + __byte_perm(w, lane4, 0x5504u | ((unsigned)p << 4)));\n"
    "}\n"
    "template <int MT, int T, int U>\n"
    "__device__ __forceinline__ void mx_gemv(const unsigned short *x, const unsigned char *qw, const unsigned char *sc,\n"
    "                                        float *y, long long m, long long n, long long k, unsigned char *smem) {\n"
    "    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "    const long long r0 = (long long)blockIdx.x * (16 * T), nb = k >> 5, rowb = k >> 1;\n"
    "    const long long nchunks = (nb + 4 * U - 1) / (4 * U);\n"
    "    const unsigned char *qr[T][2];\n"
    "    const unsigned char *sr[T][2];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int h = 0; h < 2; h++) {\n"
    "            long long row = r0 + 16 * i + 8 * h + g;\n"
    "            if (row >= n) row = n - 1; /* computed, never stored */\n"
    "            qr[i][h] = qw + row * rowb;\n"
    "            sr[i][h] = sc + row * nb;\n"
    "        }\n"
    "    float acc[T][MT][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < MT; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "    uint4 q[T][2][U];\n"
    "    unsigned se[T][2][U];\n"
    "    /* chunk c: lane t's blocks c*4U + t*U + u; past the row: zero codes, scale 1 */\n"
    "    auto load = [&](long long c) {\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) {\n"
    "            long long b = c * (4 * U) + t * U + u;\n"
    "            bool ok = c < nchunks && b < nb;\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "                for (int h = 0; h < 2; h++) {\n"
    "                    q[i][h][u] = ok ? mx_ld16(qr[i][h] + b * 16) : make_uint4(0u, 0u, 0u, 0u);\n"
    "                    se[i][h][u] = ok ? (unsigned)__ldg(sr[i][h] + b) : 127u;\n"
    "                }\n"
    "        }\n"
    "    };\n"
    "    long long c = warp;\n"
    "    load(c);\n"
    "    mx_table(smem, 256, warp, lane); /* while the first loads are in flight */\n"
    "    __syncthreads();\n"
    "    const unsigned lane4 = (unsigned)lane * 4u;\n"
    "    for (; c < nchunks; c += MXG_WARPS) {\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) {\n"
    "            const long long b = c * (4 * U) + t * U + u;\n"
    "            const bool ok = b < nb;\n"
    "            uint4 xv[MT][4];\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < MT; j++) {\n"
    "                const long long tok = 8 * j + g;\n"
    "                const uint4 *xp = (const uint4 *)(x + tok * k + b * 32);\n"
    "#pragma unroll\n"
    "                for (int v = 0; v < 4; v++) xv[j][v] = ok && tok < m ? __ldg(xp + v) : make_uint4(0u, 0u, 0u, 0u);\n"
    "            }\n"
    "            unsigned s2[T][2];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < T; i++)\n"
    "#pragma unroll\n"
    "                for (int h = 0; h < 2; h++) s2[i][h] = mx_scale2(se[i][h][u]);\n"
    "#pragma unroll\n"
    "            for (int s = 0; s < 8; s++) {\n"
    "                const int p = 2 * (s & 1);\n"
    "#pragma unroll\n"
    "                for (int i = 0; i < T; i++) {\n"
    "                    const unsigned w0 = mx_word(q[i][0][u], s >> 1), w1 = mx_word(q[i][1][u], s >> 1);\n"
    "                    unsigned a[4];\n"
    "                    a[0] = mx_mul2(mx_lut(smem, w0, lane4, p), s2[i][0]);\n"
    "                    a[1] = mx_mul2(mx_lut(smem, w1, lane4, p), s2[i][1]);\n"
    "                    a[2] = mx_mul2(mx_lut(smem, w0, lane4, p + 1), s2[i][0]);\n"
    "                    a[3] = mx_mul2(mx_lut(smem, w1, lane4, p + 1), s2[i][1]);\n"
    "#pragma unroll\n"
    "                    for (int j = 0; j < MT; j++) {\n"
    "                        const uint4 &xx = xv[j][s >> 1];\n"
    "                        unsigned bb[2];\n"
    "                        bb[0] = (s & 1) ? xx.z : xx.x;\n"
    "                        bb[1] = (s & 1) ? xx.w : xx.y;\n"
    "                        mx_mma(acc[i][j], a, bb);\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        if (c + MXG_WARPS < nchunks) load(c + MXG_WARPS);\n"
    "    }\n"
    "    /* partial sums of the 8 warps through the (now free) table memory */\n"
    "    __syncthreads();\n"
    "    float *red = (float *)smem;\n"
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
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_mxfp4_gemv(const unsigned short *x, const unsigned char *qw,\n"
    "        const unsigned char *sc, float *y, long long m, long long n, long long k) {\n"
    "    extern __shared__ __align__(16) unsigned char smem[];\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (m > 16 || k <= 0 || (k & 31) || ((unsigned long long)qw & 15) || ((unsigned long long)x & 15)) {\n"
    "        mx_fill_nan(y, m * n);\n"
    "        return;\n"
    "    }\n"
    "    if (m <= 4) mx_gemv<1, 1, 4>(x, qw, sc, y, m, n, k, smem);\n"
    "    else if (m <= 8) mx_gemv<1, 2, 2>(x, qw, sc, y, m, n, k, smem);\n"
    "    else mx_gemv<2, 2, 2>(x, qw, sc, y, m, n, k, smem);\n"
    "}\n";

#define GEMV_SMEM 65536u

static int64_t gemv_rows(int64_t m) { return m <= 4 ? 16 : 32; }

/* m, n, k: one block per 16 or 32 rows of W */
static void gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t rows = gemv_rows(p->m);
    int64_t blocks = p->m > 0 && p->n > 0 ? (p->n + rows - 1) / rows : 0;
    d->grid[0] = blocks <= 2147483647LL ? (uint32_t)blocks : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = GEMV_SMEM;
}

static int gemv_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 32) {
        why_set(why, "align_k", "mxfp4.gemv: k = %lld is not a positive multiple of 32", (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || (p->n + 15) / 16 > 2147483647LL) {
        why_set(why, "shape", "mxfp4.gemv: n = %lld rows do not fit its grid", (long long)p->n);
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
        why_set(why, "align_k", "mxfp4.linear_mma: k = %lld is not a positive multiple of 32",
                         (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || (p->n + 127) / 128 > 2147483647LL) {
        why_set(why, "shape", "mxfp4.linear_mma: n = %lld columns do not fit its grid", (long long)p->n);
        return 0;
    }
    return 1;
}

static const qc_kernel_param MX_BX_PARAMS[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};

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
    qc_status st = api->register_kernel(host, &gemv);
    if (st == QC_OK) st = api->register_kernel(host, &mma);
    if (st == QC_OK) st = api->register_kernel(host, &b100);
    return st;
}
