/* qc_kernels_gemv.c - bf16.linear_gemv: the memory-bound bf16 decode linear for 1 <= M <= 16. */
#include <string.h>

#include "qc_kernels_gemv.h"
#include "qc_util.h"

/*
 * y[m,n] = bf16(x)[m,k] . W[n,k]^T, W bf16 row-major, x f32 rounded to bf16
 * (to nearest even, as the bf16 format's quantize_activations and the C
 * reference do) while it is staged in shared memory, f32 accumulation.
 *
 * At small M the layer is a stream of W: every byte of W is read once, with
 * 16-byte non-allocating loads (8 bf16), and each loaded W vector is used by
 * all M rows of x.  A block of 8 warps owns R rows of W at a time (R = 8 for
 * M <= 2, else 4) and loops over row groups (grid-stride); its warps split K
 * (warp w, lane l read elements 8 (32 w + l) + 2048 j of each row), so every
 * lane holds R loads in flight per step.  x is staged as bf16 [MT][KC] in
 * dynamic shared memory (MT = m rounded up to 1, 2, 4, 8, 16, zero rows
 * above m), 8 float4 loads in flight per thread: once per block when K fits
 * in the budget (64 Ki elements: K <= 4096 at M = 16, 16384 at M = 4), else
 * per K chunk of each row group, which is correct but slow (eligible()
 * refuses those problems with "shape", so selection never picks them).
 * Partial sums: a warp-shuffle reduction per warp, then the 8 warps through
 * shared memory (double-buffered by row-group parity, so one barrier per
 * group).  When k is not a multiple of 8 (or W is not 16-byte aligned) the
 * same schedule runs with 2-byte loads: correct for any k, slower.
 *
 * The grid is capped at 132 SMs x the blocks that fit by shared memory (at
 * most 4): sized for the H200; on other parts it is only a wave count.
 */

#define GEMV_THREADS 256
#define GEMV_XS_ELEMS 65536 /* x staging budget: 128 KiB of bf16 */
#define GEMV_SMS 132
#define GEMV_SMEM_PER_SM (227 * 1024)

/* The device code computes the same plan from (m, k). */
static const char GEMV_SRC[] =
    "/* qcore bf16 gemv: y[m,n] = bf16(x)[m,k] . W[n,k]^T for m <= 16, f32 accumulate, W streamed once */\n"
    "#define GEMV_THREADS 256\n"
    "#define GEMV_WARPS 8\n"
    "#define GEMV_XS_ELEMS 65536\n"
    "#define GEMV_RED 64 /* R * MT at most */\n"
    "__device__ unsigned short qc_f2bf(float f) {\n"
    "    unsigned u = __float_as_uint(f);\n"
    "    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "    u += 0x7fffu + ((u >> 16) & 1u);\n"
    "    return (unsigned short)(u >> 16);\n"
    "}\n"
    "__device__ __forceinline__ uint4 qc_ld_stream(const unsigned short *p) {\n"
    "    uint4 v;\n"
    "    asm(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "        : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ void qc_unpack8(uint4 v, float *f) {\n"
    "    f[0] = __uint_as_float(v.x << 16); f[1] = __uint_as_float(v.x & 0xffff0000u);\n"
    "    f[2] = __uint_as_float(v.y << 16); f[3] = __uint_as_float(v.y & 0xffff0000u);\n"
    "    f[4] = __uint_as_float(v.z << 16); f[5] = __uint_as_float(v.z & 0xffff0000u);\n"
    "    f[6] = __uint_as_float(v.w << 16); f[7] = __uint_as_float(v.w & 0xffff0000u);\n"
    "}\n"
    "template <int MT, int R, int V>\n"
    "__device__ __forceinline__ void qc_gemv(const float *x, const unsigned short *w, float *y, long long m,\n"
    "                                        long long n, long long k, long long kc, unsigned short *xs,\n"
    "                                        float *red) {\n"
    "    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;\n"
    "    const long long groups = (n + R - 1) / R;\n"
    "    const int nchunks = (int)((k + kc - 1) / kc);\n"
    "    const int kk0 = (warp * 32 + lane) * V;\n"
    "    const bool x4 = (k & 3) == 0 && ((unsigned long long)x & 15) == 0;\n"
    "    int par = 0;\n"
    "    for (long long g = blockIdx.x; g < groups; g += gridDim.x, par ^= 1) {\n"
    "        const long long r0 = g * R;\n"
    "        const unsigned short *wr[R];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < R; r++) wr[r] = w + (r0 + r < n ? r0 + r : n - 1) * k; /* rows past n: discarded */\n"
    "        float acc[R][MT];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < MT; i++) acc[r][i] = 0.f;\n"
    "        for (int c = 0; c < nchunks; c++) {\n"
    "            const long long k0 = (long long)c * kc;\n"
    "            const int len = (int)(k - k0 < kc ? k - k0 : kc);\n"
    "            if (nchunks > 1 || g == blockIdx.x) {\n"
    "                if (V == 8 && kk0 < len) /* start W on its way while x is staged */\n"
    "#pragma unroll\n"
    "                    for (int r = 0; r < R; r++) asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(wr[r] + k0 + kk0));\n"
    "                __syncthreads();\n"
    "                if (x4) { /* 8 float4 loads in flight per thread, then 8 packed stores */\n"
    "                    const int q = (int)(kc / 4), total = MT * q;\n"
    "                    for (int j0 = tid; j0 < total; j0 += GEMV_THREADS * 8) {\n"
    "                        float4 v[8];\n"
    "#pragma unroll\n"
    "                        for (int u = 0; u < 8; u++) {\n"
    "                            int j = j0 + u * GEMV_THREADS, i = j / q, t = j - i * q;\n"
    "                            v[u] = j < total && i < m && 4 * t < len\n"
    "                                       ? *(const float4 *)(x + (long long)i * k + k0 + 4 * t)\n"
    "                                       : make_float4(0.f, 0.f, 0.f, 0.f);\n"
    "                        }\n"
    "#pragma unroll\n"
    "                        for (int u = 0; u < 8; u++) {\n"
    "                            int j = j0 + u * GEMV_THREADS, i = j / q, t = j - i * q;\n"
    "                            if (j < total) {\n"
    "                                uint2 p;\n"
    "                                p.x = qc_f2bf(v[u].x) | ((unsigned)qc_f2bf(v[u].y) << 16);\n"
    "                                p.y = qc_f2bf(v[u].z) | ((unsigned)qc_f2bf(v[u].w) << 16);\n"
    "                                *(uint2 *)(xs + i * kc + 4 * t) = p;\n"
    "                            }\n"
    "                        }\n"
    "                    }\n"
    "                } else {\n"
    "                    for (int i = 0; i < MT; i++) {\n"
    "                        const float *xr = x + (long long)i * k + k0;\n"
    "                        for (int t = tid; t < kc; t += GEMV_THREADS)\n"
    "                            xs[i * kc + t] = i < m && t < len ? qc_f2bf(xr[t]) : (unsigned short)0;\n"
    "                    }\n"
    "                }\n"
    "                __syncthreads();\n"
    "            }\n"
    "            if (V == 8) {\n"
    "#pragma unroll 2\n"
    "                for (int kk = kk0; kk < len; kk += GEMV_THREADS * 8) {\n"
    "                    uint4 wv[R];\n"
    "#pragma unroll\n"
    "                    for (int r = 0; r < R; r++) wv[r] = qc_ld_stream(wr[r] + k0 + kk);\n"
    "                    float wf[R][8];\n"
    "#pragma unroll\n"
    "                    for (int r = 0; r < R; r++) qc_unpack8(wv[r], wf[r]);\n"
    "#pragma unroll\n"
    "                    for (int i = 0; i < MT; i++) {\n"
    "                        float xf[8];\n"
    "                        qc_unpack8(*(const uint4 *)(xs + i * kc + kk), xf);\n"
    "#pragma unroll\n"
    "                        for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "                            for (int e = 0; e < 8; e++) acc[r][i] = fmaf(xf[e], wf[r][e], acc[r][i]);\n"
    "                    }\n"
    "                }\n"
    "            } else {\n"
    "                for (int kk = kk0; kk < len; kk += GEMV_THREADS) {\n"
    "                    float wf[R];\n"
    "#pragma unroll\n"
    "                    for (int r = 0; r < R; r++) wf[r] = __uint_as_float((unsigned)wr[r][k0 + kk] << 16);\n"
    "#pragma unroll\n"
    "                    for (int i = 0; i < MT; i++) {\n"
    "                        float xf = __uint_as_float((unsigned)xs[i * kc + kk] << 16);\n"
    "#pragma unroll\n"
    "                        for (int r = 0; r < R; r++) acc[r][i] = fmaf(xf, wf[r], acc[r][i]);\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        float *rb = red + par * GEMV_WARPS * GEMV_RED;\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < R; r++)\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < MT; i++) {\n"
    "                float v = acc[r][i];\n"
    "                for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "                if (lane == 0) rb[warp * GEMV_RED + r * MT + i] = v;\n"
    "            }\n"
    "        __syncthreads();\n"
    "        for (int j = tid; j < R * MT; j += GEMV_THREADS) {\n"
    "            int r = j / MT, i = j % MT;\n"
    "            long long row = r0 + r;\n"
    "            if (i < m && row < n) {\n"
    "                float s = 0.f;\n"
    "                for (int q = 0; q < GEMV_WARPS; q++) s += rb[q * GEMV_RED + j];\n"
    "                y[(long long)i * n + row] = s;\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(GEMV_THREADS) qc_bf16_linear_gemv(const float *x,\n"
    "        const unsigned short *w, float *y, long long m, long long n, long long k) {\n"
    "    extern __shared__ __align__(16) unsigned short xs[];\n"
    "    __shared__ float red[2 * GEMV_WARPS * GEMV_RED];\n"
    "    if (m <= 0 || n <= 0 || m > 16) return;\n"
    "    if (k <= 0) { /* an empty sum */\n"
    "        for (long long t = (long long)blockIdx.x * GEMV_THREADS + threadIdx.x; t < m * n;\n"
    "             t += (long long)gridDim.x * GEMV_THREADS) y[t] = 0.f;\n"
    "        return;\n"
    "    }\n"
    "    const int mt = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16;\n"
    "    const long long kpad = (k + 255) / 256 * 256, cap = GEMV_XS_ELEMS / mt;\n"
    "    const long long kc = kpad < cap ? kpad : cap;\n"
    "    const bool vec = (k & 7) == 0 && ((unsigned long long)w & 15) == 0;\n"
    "    switch (mt * 2 + (vec ? 1 : 0)) {\n"
    "    case 3: qc_gemv<1, 8, 8>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 2: qc_gemv<1, 8, 1>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 5: qc_gemv<2, 8, 8>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 4: qc_gemv<2, 8, 1>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 9: qc_gemv<4, 4, 8>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 8: qc_gemv<4, 4, 1>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 17: qc_gemv<8, 4, 8>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 16: qc_gemv<8, 4, 1>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    case 33: qc_gemv<16, 4, 8>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    default: qc_gemv<16, 4, 1>(x, w, y, m, n, k, kc, xs, red); break;\n"
    "    }\n"
    "}\n";

void qc_gemv_plan(int64_t m, int64_t k, int *mt, int *rows, int64_t *kc) {
    int t = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16;
    int64_t kpad = k > 0 ? (k + 255) / 256 * 256 : 256, cap = GEMV_XS_ELEMS / t;
    *mt = t;
    *rows = t <= 2 ? 8 : 4;
    *kc = kpad < cap ? kpad : cap;
}

/* m, n, k of the linear problem */
static void gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int mt, rows;
    int64_t kc;
    qc_gemv_plan(p->m, p->k, &mt, &rows, &kc);
    uint32_t smem = (uint32_t)(mt * kc * 2);
    int64_t groups = p->m > 0 && p->n > 0 ? (p->n + rows - 1) / rows : 0;
    int64_t per_sm = GEMV_SMEM_PER_SM / (smem + 5 * 1024);
    if (per_sm > 4) per_sm = 4;
    if (per_sm < 1) per_sm = 1;
    int64_t cap = GEMV_SMS * per_sm;
    d->grid[0] = (uint32_t)(groups < cap ? groups : cap);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = GEMV_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = smem;
}

static int gemv_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k % 8 != 0) { /* runs (2-byte loads), but the 8-aligned layers are what it is for */
        qc_reason_set(why, "align_k", "bf16.linear_gemv: k = %lld is not a multiple of 8", (long long)p->k);
        return 0;
    }
    int mt, rows;
    int64_t kc;
    qc_gemv_plan(p->m, p->k, &mt, &rows, &kc);
    if (kc < p->k) { /* x restaged per K chunk of every row group: far from the HBM floor */
        qc_reason_set(why, "shape", "bf16.linear_gemv: %lld rows of k = %lld do not fit its shared memory",
                      (long long)p->m, (long long)p->k);
        return 0;
    }
    return 1;
}

/* the same signature as bf16.linear_ref: x, w.weight, y, m, n, k */
static const qc_kernel_param GEMV_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"w.weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

/*
 * bf16.linear_gemv_bx: the same product with x already bf16 ("x.bf16", as
 * the engine's norms and swiglu write it), for 1 <= m <= 16.  No staging:
 * each warp owns R = 2 rows of W and walks all of K, lane l reading the
 * 16-byte vectors l, l + 32, ... (8 per row in flight at m <= 2, 4 at m <= 8, 2 above), x read through the
 * read-only path (at most 16 x K bf16, held in L1/L2).  Only warp
 * shuffles reduce, so blocks are light (8 warps, 16 rows) and a whole
 * layer's blocks are resident in one wave.  k % 8 == 0 and 16-byte aligned
 * rows are required ("align_k").
 */
static const char GEMV_BX_SRC[] =
    "/* qcore bf16 gemv, bf16 x: y[m,n] = x[m,k] . W[n,k]^T for m <= 16, f32 accumulate */\n"
    QC_CUDA_GRID_DEP_SRC
    "#define BX_WARPS 8\n"
    "#define BX_R 2\n"
    "__device__ __forceinline__ uint4 qc_ld_w(const unsigned short *p) {\n"
    "    uint4 v;\n"
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "        : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float qc_dot8(uint4 a, uint4 b, float acc) {\n"
    "    acc = fmaf(__uint_as_float(a.x << 16), __uint_as_float(b.x << 16), acc);\n"
    "    acc = fmaf(__uint_as_float(a.x & 0xffff0000u), __uint_as_float(b.x & 0xffff0000u), acc);\n"
    "    acc = fmaf(__uint_as_float(a.y << 16), __uint_as_float(b.y << 16), acc);\n"
    "    acc = fmaf(__uint_as_float(a.y & 0xffff0000u), __uint_as_float(b.y & 0xffff0000u), acc);\n"
    "    acc = fmaf(__uint_as_float(a.z << 16), __uint_as_float(b.z << 16), acc);\n"
    "    acc = fmaf(__uint_as_float(a.z & 0xffff0000u), __uint_as_float(b.z & 0xffff0000u), acc);\n"
    "    acc = fmaf(__uint_as_float(a.w << 16), __uint_as_float(b.w << 16), acc);\n"
    "    acc = fmaf(__uint_as_float(a.w & 0xffff0000u), __uint_as_float(b.w & 0xffff0000u), acc);\n"
    "    return acc;\n"
    "}\n"
    "template <int MT, int U>\n"
    "__device__ __forceinline__ void qc_gemv_bx(const unsigned short *x, const unsigned short *w, float *y,\n"
    "                                           long long m, long long n, long long k) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    const long long row0 = ((long long)blockIdx.x * BX_WARPS + warp) * BX_R;\n"
    "    if (row0 >= n) return;\n"
    "    const long long nv = k / 8; /* 16-byte vectors per row */\n"
    "    const uint4 *wr[BX_R];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < BX_R; r++) wr[r] = (const uint4 *)(w + (row0 + r < n ? row0 + r : row0) * k);\n"
    "    const uint4 *xr = (const uint4 *)x;\n"
    "    float acc[BX_R][MT];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < BX_R; r++)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) acc[r][i] = 0.f;\n"
    "    long long v = lane;\n"
    "    for (; v + 32 * (U - 1) < nv; v += 32 * U) { /* U vectors per row in flight */\n"
    "        uint4 a[BX_R][U];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < BX_R; r++)\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < U; u++) a[r][u] = qc_ld_w((const unsigned short *)(wr[r] + v + 32 * u));\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++)\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < U; u++) {\n"
    "                uint4 b = i < m ? __ldg(xr + i * nv + v + 32 * u) : make_uint4(0, 0, 0, 0);\n"
    "#pragma unroll\n"
    "                for (int r = 0; r < BX_R; r++) acc[r][i] = qc_dot8(a[r][u], b, acc[r][i]);\n"
    "            }\n"
    "    }\n"
    "    for (; v < nv; v += 32) {\n"
    "        uint4 a[BX_R];\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < BX_R; r++) a[r] = qc_ld_w((const unsigned short *)(wr[r] + v));\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) {\n"
    "            uint4 b = i < m ? __ldg(xr + i * nv + v) : make_uint4(0, 0, 0, 0);\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < BX_R; r++) acc[r][i] = qc_dot8(a[r], b, acc[r][i]);\n"
    "        }\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < BX_R; r++)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) {\n"
    "            float s = acc[r][i];\n"
    "            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);\n"
    "            if (lane == 0 && i < m && row0 + r < n) y[(long long)i * n + row0 + r] = s;\n"
    "        }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_bf16_linear_gemv_bx(const unsigned short *x,\n"
    "        const unsigned short *w, float *y, long long m, long long n, long long k) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    if (m <= 0 || m > 16 || n <= 0) return;\n"
    "    if (m <= 1) qc_gemv_bx<1, 8>(x, w, y, m, n, k);\n"
    "    else if (m <= 2) qc_gemv_bx<2, 8>(x, w, y, m, n, k);\n"
    "    else if (m <= 4) qc_gemv_bx<4, 4>(x, w, y, m, n, k);\n"
    "    else if (m <= 8) qc_gemv_bx<8, 4>(x, w, y, m, n, k);\n"
    "    else qc_gemv_bx<16, 2>(x, w, y, m, n, k);\n"
    "}\n";

/* m, n, k: one block of 8 warps per 16 rows of W */
static void gemv_bx_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t blocks = p->m > 0 && p->n > 0 ? (p->n + 15) / 16 : 0;
    d->grid[0] = blocks <= 2147483647LL ? (uint32_t)blocks : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
}

static int gemv_bx_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 8 != 0) {
        qc_reason_set(why, "align_k", "bf16.linear_gemv_bx: k = %lld is not a positive multiple of 8",
                      (long long)p->k);
        return 0;
    }
    return 1;
}

static const qc_kernel_param GEMV_BX_PARAMS[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

qc_status qc_gemv_kernels_register(const qc_host_api *api, qc_host *host, void (*bf16_linear_ref)(void),
                                   void (*bf16_linear_bx_ref)(void)) {
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = "bf16.linear_gemv",
        .format = "bf16",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 16,
        .arch = {80, QC_SM_ANY},
        .n_params = sizeof GEMV_PARAMS / sizeof GEMV_PARAMS[0],
        .params = GEMV_PARAMS,
        .reference = bf16_linear_ref,
        .cuda_source = GEMV_SRC,
        .cuda_entry = "qc_bf16_linear_gemv",
        .launch_dims = gemv_dims,
        .eligible = gemv_eligible,
    };
    qc_kernel_desc bx = k;
    bx.id = "bf16.linear_gemv_bx";
    bx.m_max = 16;
    bx.params = GEMV_BX_PARAMS;
    bx.n_params = sizeof GEMV_BX_PARAMS / sizeof GEMV_BX_PARAMS[0];
    bx.reference = bf16_linear_bx_ref;
    bx.cuda_source = GEMV_BX_SRC;
    bx.cuda_entry = "qc_bf16_linear_gemv_bx";
    bx.launch_dims = gemv_bx_dims;
    bx.eligible = gemv_bx_eligible;
    bx.flags = QC_KERNEL_GRID_DEP; /* qc_grid_dep() first */
    /* the bf16-x one first: at equal M ranges the engine takes the first registered */
    qc_status st = api->register_kernel(host, &bx);
    return st == QC_OK ? api->register_kernel(host, &k) : st;
}
