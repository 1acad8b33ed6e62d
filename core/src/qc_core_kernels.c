/* qc_core_kernels.c - the core GPU kernels (rmsnorm, rope, swiglu, embedding, argmax, bf16 linears) and C references. */
#include <math.h>
#include <string.h>

#include "qc_core_kernels.h"
#include "qc_util.h"

/*
 * Each kernel is one qc_kernel_desc: a parameter list, a C reference with
 * exactly that signature (called through libffi) and CUDA source whose entry
 * takes the same parameters in the same order (launched with cuLaunchKernel
 * from the same argument array).  The references define the numerics; the
 * GPU versions differ only by f32 summation order and the last bits of
 * sqrt/exp/sin/cos.
 *
 * The ABI ties every kernel to a format of its plugin, so the non-linear
 * ones ("core.*") are registered under "bf16", the core's format.  They are
 * meant to be found by id (qc_kernel_find), never picked for a linear layer:
 * their eligibility check refuses every problem, with the least informative
 * code, so format selection skips them and keeps a better reason.
 *
 * qc_problem fields each launch_dims reads are given per kernel.  Kernels
 * that give a block per row take m <= 2^31 - 1 rows (the grid's x limit).
 */

#define ROWS_MAX 2147483647LL
/* elementwise kernels loop over the rest, so their grid never exceeds this */
#define GRID_CAP (1u << 20)
/* the canonical quiet NaN an embedding row gets for an id outside the table */
#define BAD_ID_NAN_BITS 0x7fc00000u

static uint32_t blocks_for(int64_t work, uint32_t per_block) {
    if (work <= 0) return 0;
    int64_t b = (work + per_block - 1) / per_block;
    return b > GRID_CAP ? GRID_CAP : (uint32_t)b;
}

static void dims_set(qc_launch_dims *d, uint32_t grid_x, uint32_t grid_y, uint32_t block) {
    memset(d, 0, sizeof *d);
    d->grid[0] = grid_x;
    d->grid[1] = grid_y;
    d->grid[2] = 1;
    d->block[0] = block;
    d->block[1] = d->block[2] = 1;
}

static int not_for_selection(const qc_problem *p, qc_reason *why) {
    (void)p;
    qc_reason_set(why, "missing", "a core kernel: found by id, not a linear kernel");
    return 0;
}

/* ---- CUDA source of the non-linear kernels (one translation unit) ---- */

static const char CORE_SRC[] =
    "/* qcore core kernels: f32 rmsnorm, rope, swiglu, embedding gather, argmax */\n"
    QC_CUDA_GRID_DEP_SRC
    "__device__ float qc_block_sum(float v) {\n"
    "    __shared__ float part[32];\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
    "    if (lane == 0) part[wid] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < nw ? part[lane] : 0.f;\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "\n"
    "/* one block per row: y = x / sqrt(mean(x^2) + eps) * w */\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_rmsnorm_f32(const float *x, const float *w, float *y,\n"
    "                                                                  long long m, long long n, float eps) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    const float *xr = x + r * n;\n"
    "    float *yr = y + r * n;\n"
    "    float ss = 0.f;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);\n"
    "    ss = qc_block_sum(ss);\n"
    "    float inv = 1.0f / sqrtf(ss / (float)n + eps);\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * w[i];\n"
    "}\n"
    "\n"
    "/* one thread per rotated pair; the angle is reduced in double so that\n"
    "   large positions keep f32 accuracy.  y may be x. */\n"
    "__device__ void qc_rope(const float *x, float *y, const int *pos, const float *inv_freq, long long m,\n"
    "                        int heads, int head_dim, bool adjacent) {\n"
    "    long long half = head_dim / 2, total = m * heads * half;\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {\n"
    "        long long i = t % half, rh = t / half, r = rh / heads;\n"
    "        const float *v = x + rh * head_dim;\n"
    "        float *o = y + rh * head_dim;\n"
    "        double a = (double)pos[r] * (double)inv_freq[i];\n"
    "        a -= 6.283185307179586 * rint(a * 0.15915494309189535);\n"
    "        float s, c;\n"
    "        sincosf((float)a, &s, &c);\n"
    "        long long i0 = adjacent ? 2 * i : i, i1 = adjacent ? 2 * i + 1 : i + half;\n"
    "        float a0 = v[i0], a1 = v[i1];\n"
    "        if ((head_dim & 1) && i == 0) o[head_dim - 1] = v[head_dim - 1];\n"
    "        o[i0] = a0 * c - a1 * s;\n"
    "        o[i1] = a0 * s + a1 * c;\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void qc_rope_pairs_f32(const float *x, float *y, const int *pos, const float *inv_freq,\n"
    "                                              long long m, int heads, int head_dim) {\n"
    "    qc_rope(x, y, pos, inv_freq, m, heads, head_dim, true);\n"
    "}\n"
    "extern \"C\" __global__ void qc_rope_half_f32(const float *x, float *y, const int *pos, const float *inv_freq,\n"
    "                                             long long m, int heads, int head_dim) {\n"
    "    qc_rope(x, y, pos, inv_freq, m, heads, head_dim, false);\n"
    "}\n"
    "\n"
    "/* y = silu(gate) * up */\n"
    "extern \"C\" __global__ void qc_swiglu_f32(const float *gate, const float *up, float *y, long long m,\n"
    "                                          long long n) {\n"
    "    long long total = m * n, step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n"
    "        float g = gate[i];\n"
    "        y[i] = g / (1.0f + expf(-g)) * up[i];\n"
    "    }\n"
    "}\n"
    "\n"
    "/* one block per token; an id outside [0, vocab) gives a row of NaN, never\n"
    "   a read outside the table */\n"
    "extern \"C\" __global__ void qc_embed_f32(const float *table, const int *ids, float *y, long long m,\n"
    "                                         long long n, long long vocab) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    long long id = ids[r];\n"
    "    float *yr = y + r * n;\n"
    "    if (id < 0 || id >= vocab) {\n"
    "        for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __uint_as_float(0x7fc00000u);\n"
    "        return;\n"
    "    }\n"
    "    const float *src = table + id * n;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = src[i];\n"
    "}\n"
    "\n"
    "/* (v, i) beats (bv, bi): larger value, then lower index; bi < 0 is none */\n"
    "__device__ bool qc_better(float v, int i, float bv, int bi) {\n"
    "    return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));\n"
    "}\n"
    "__device__ void qc_warp_best(float &bv, int &bi) {\n"
    "    for (int o = 16; o > 0; o >>= 1) {\n"
    "        float ov = __shfl_xor_sync(0xffffffffu, bv, o);\n"
    "        int oi = __shfl_xor_sync(0xffffffffu, bi, o);\n"
    "        if (qc_better(ov, oi, bv, bi)) { bv = ov; bi = oi; }\n"
    "    }\n"
    "}\n"
    "/* one block per row: index of the largest value, the lowest on ties; NaN\n"
    "   never wins; a row of NaN gives -1 */\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_argmax_f32(const float *x, int *ids, long long m,\n"
    "                                                                  long long n) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    __shared__ float sv[32];\n"
    "    __shared__ int si[32];\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    const float *xr = x + r * n;\n"
    "    float bv = 0.f;\n"
    "    int bi = -1;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) {\n"
    "        float v = xr[i];\n"
    "        if (v == v && qc_better(v, (int)i, bv, bi)) { bv = v; bi = (int)i; }\n"
    "    }\n"
    "    qc_warp_best(bv, bi);\n"
    "    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
    "    if (lane == 0) { sv[wid] = bv; si[wid] = bi; }\n"
    "    __syncthreads();\n"
    "    if (wid != 0) return;\n"
    "    bv = lane < nw ? sv[lane] : 0.f;\n"
    "    bi = lane < nw ? si[lane] : -1;\n"
    "    qc_warp_best(bv, bi);\n"
    "    if (lane == 0) ids[r] = bi;\n"
    "}\n";

/* ---- rmsnorm ---- */

/* y[m, n] = x / sqrt(mean(x^2) + eps) * weight, the sum of squares in double. */
static void rmsnorm_ref(const float *x, const float *w, float *y, int64_t m, int64_t n, float eps) {
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        for (int64_t i = 0; i < n; i++) y[r * n + i] = xr[i] * inv * w[i];
    }
}

/* m rows of n */
static void rmsnorm_dims(const qc_problem *p, qc_launch_dims *d) {
    dims_set(d, p->m > 0 ? (uint32_t)p->m : 0, 1, 256);
}

static const qc_kernel_param RMSNORM_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},      {"eps", QC_PARAM_F32},
};

/* ---- rope ---- */

/* Rotate pairs of each head of x[m, heads, head_dim] by pos[row] * inv_freq[i]
 * (i < head_dim / 2): adjacent pairs (2i, 2i+1) as GGUF Llama stores q/k, or
 * the half split (i, i + head_dim/2) as Hugging Face does.  The angle in
 * double; y may be x; an odd last element is copied. */
static void rope_ref(const float *x, float *y, const int32_t *pos, const float *inv_freq, int64_t m, int32_t heads,
                     int32_t head_dim, int adjacent) {
    int64_t half = head_dim / 2;
    for (int64_t r = 0; r < m; r++) {
        for (int64_t h = 0; h < heads; h++) {
            const float *v = x + (r * heads + h) * head_dim;
            float *o = y + (r * heads + h) * head_dim;
            if (head_dim & 1) o[head_dim - 1] = v[head_dim - 1];
            for (int64_t i = 0; i < half; i++) {
                double a = (double)pos[r] * (double)inv_freq[i];
                float c = (float)cos(a), s = (float)sin(a);
                int64_t i0 = adjacent ? 2 * i : i, i1 = adjacent ? 2 * i + 1 : i + half;
                float a0 = v[i0], a1 = v[i1];
                o[i0] = a0 * c - a1 * s;
                o[i1] = a0 * s + a1 * c;
            }
        }
    }
}

static void rope_pairs_ref(const float *x, float *y, const int32_t *pos, const float *inv_freq, int64_t m,
                           int32_t heads, int32_t head_dim) {
    rope_ref(x, y, pos, inv_freq, m, heads, head_dim, 1);
}

static void rope_half_ref(const float *x, float *y, const int32_t *pos, const float *inv_freq, int64_t m,
                          int32_t heads, int32_t head_dim) {
    rope_ref(x, y, pos, inv_freq, m, heads, head_dim, 0);
}

/* m rows, n heads, k head_dim */
static void rope_dims(const qc_problem *p, qc_launch_dims *d) {
    int64_t pairs = p->m > 0 && p->n > 0 && p->k > 1 ? p->m * p->n * (p->k / 2) : 0;
    dims_set(d, blocks_for(pairs, 256), 1, 256);
}

static const qc_kernel_param ROPE_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},     {"pos", QC_PARAM_PTR},      {"inv_freq", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32},
};

/* ---- swiglu ---- */

/* y[m, n] = silu(gate) * up, as the CPU forward pass computes it */
static void swiglu_ref(const float *gate, const float *up, float *y, int64_t m, int64_t n) {
    int64_t total = m * n;
    for (int64_t i = 0; i < total; i++) {
        float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* m rows of n */
static void swiglu_dims(const qc_problem *p, qc_launch_dims *d) {
    dims_set(d, blocks_for(p->m > 0 && p->n > 0 ? p->m * p->n : 0, 256), 1, 256);
}

static const qc_kernel_param SWIGLU_PARAMS[] = {
    {"gate", QC_PARAM_PTR}, {"up", QC_PARAM_PTR}, {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},
};

/* ---- embedding gather ---- */

/* y[m, n] = table[ids[r], :]; an id outside [0, vocab) gives a NaN row */
static void embed_ref(const float *table, const int32_t *ids, float *y, int64_t m, int64_t n, int64_t vocab) {
    float bad;
    uint32_t bits = BAD_ID_NAN_BITS;
    memcpy(&bad, &bits, 4);
    for (int64_t r = 0; r < m; r++) {
        int64_t id = ids[r];
        float *yr = y + r * n;
        if (id < 0 || id >= vocab)
            for (int64_t i = 0; i < n; i++) yr[i] = bad;
        else
            memcpy(yr, table + id * n, (size_t)n * sizeof(float));
    }
}

/* m tokens, n dim (k = vocab is not needed for the geometry) */
static void embed_dims(const qc_problem *p, qc_launch_dims *d) {
    dims_set(d, p->m > 0 ? (uint32_t)p->m : 0, 1, 256);
}

static const qc_kernel_param EMBED_PARAMS[] = {
    {"table", QC_PARAM_PTR}, {"ids", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},     {"n", QC_PARAM_I64},   {"vocab", QC_PARAM_I64},
};

/* ---- argmax ---- */

/* ids[r] = index of the largest x[r, :], the lowest on ties; NaN never wins
 * and a row with no number gives -1 (n < 2^31) */
static void argmax_ref(const float *x, int32_t *ids, int64_t m, int64_t n) {
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * n;
        int32_t best = -1;
        for (int64_t i = 0; i < n; i++)
            if (xr[i] == xr[i] && (best < 0 || xr[i] > xr[best])) best = (int32_t)i;
        ids[r] = best;
    }
}

/* m rows of n */
static void argmax_dims(const qc_problem *p, qc_launch_dims *d) {
    dims_set(d, p->m > 0 ? (uint32_t)p->m : 0, 1, 1024);
}

static const qc_kernel_param ARGMAX_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"ids", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},
};

/* ---- bf16 linear on tensor cores ---- */

/* A plain mma.sync kernel, correct for any m, n, k: a 64x64 output tile per
 * block of 4 warps (2x2, 32x32 each), k in steps of 32 through shared memory.
 * x is rounded to bf16 (to nearest even, as the C reference and the bf16
 * format's quantize do) while it is staged; tails are zero-filled.  No tuning
 * yet: no cp.async pipeline, no ldmatrix, no split-k for small m. */
static const char LINEAR_SRC[] =
    "/* qcore bf16 linear: y[m,n] = bf16(x)[m,k] . W[n,k]^T, f32 accumulate (mma.sync m16n8k16) */\n"
    "#define BM 64\n"
    "#define BN 64\n"
    "#define BK 32\n"
    "#define PAD 8 /* keeps the fragment loads of a warp on 32 different banks */\n"
    "__device__ unsigned short qc_f2bf(float f) {\n"
    "    unsigned u = __float_as_uint(f);\n"
    "    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "    u += 0x7fffu + ((u >> 16) & 1u);\n"
    "    return (unsigned short)(u >> 16);\n"
    "}\n"
    "__device__ void qc_mma(float *d, const unsigned *a, const unsigned *b) {\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(128) qc_bf16_linear_mma(const float *x, const unsigned short *w,\n"
    "                                                                       float *y, long long m, long long n,\n"
    "                                                                       long long k) {\n"
    "    __shared__ __align__(16) unsigned short xs[BM][BK + PAD];\n"
    "    __shared__ __align__(16) unsigned short ws[BN][BK + PAD];\n"
    "    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
    "    int wm = warp >> 1, wn = warp & 1, g = lane >> 2, t = lane & 3;\n"
    "    long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;\n"
    "    float acc[2][4][4];\n"
    "    for (int i = 0; i < 2; i++)\n"
    "        for (int j = 0; j < 4; j++)\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "    for (long long k0 = 0; k0 < k; k0 += BK) {\n"
    "        int c = tid & 31;\n"
    "        long long gk = k0 + c;\n"
    "        for (int j = 0; j < BM / 4; j++) {\n"
    "            int r = (tid >> 5) + 4 * j;\n"
    "            long long gr = row0 + r, gn = col0 + r;\n"
    "            xs[r][c] = gr < m && gk < k ? qc_f2bf(x[gr * k + gk]) : (unsigned short)0;\n"
    "            ws[r][c] = gn < n && gk < k ? w[gn * k + gk] : (unsigned short)0;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        for (int kk = 0; kk < BK; kk += 16) {\n"
    "            unsigned a[2][4], b[4][2];\n"
    "            for (int i = 0; i < 2; i++) {\n"
    "                int r = wm * 32 + i * 16 + g;\n"
    "                a[i][0] = *(const unsigned *)&xs[r][kk + 2 * t];\n"
    "                a[i][1] = *(const unsigned *)&xs[r + 8][kk + 2 * t];\n"
    "                a[i][2] = *(const unsigned *)&xs[r][kk + 2 * t + 8];\n"
    "                a[i][3] = *(const unsigned *)&xs[r + 8][kk + 2 * t + 8];\n"
    "            }\n"
    "            for (int j = 0; j < 4; j++) {\n"
    "                int cn = wn * 32 + j * 8 + g;\n"
    "                b[j][0] = *(const unsigned *)&ws[cn][kk + 2 * t];\n"
    "                b[j][1] = *(const unsigned *)&ws[cn][kk + 2 * t + 8];\n"
    "            }\n"
    "            for (int i = 0; i < 2; i++)\n"
    "                for (int j = 0; j < 4; j++) qc_mma(acc[i][j], a[i], b[j]);\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    for (int i = 0; i < 2; i++)\n"
    "        for (int j = 0; j < 4; j++)\n"
    "            for (int e = 0; e < 4; e++) {\n"
    "                long long r = row0 + wm * 32 + i * 16 + g + (e >= 2 ? 8 : 0);\n"
    "                long long cn = col0 + wn * 32 + j * 8 + 2 * t + (e & 1);\n"
    "                if (r < m && cn < n) y[r * n + cn] = acc[i][j][e];\n"
    "            }\n"
    "}\n";

/* m, n, k of the linear problem; grid.y holds the row tiles */
static void linear_dims(const qc_problem *p, qc_launch_dims *d) {
    uint32_t gx = p->n > 0 ? (uint32_t)((p->n + 63) / 64) : 0;
    uint32_t gy = p->m > 0 ? (uint32_t)((p->m + 63) / 64) : 0;
    dims_set(d, gx, gy, 128);
}

/* the same signature as bf16.linear_ref: x, w.weight, y, m, n, k */
static const qc_kernel_param LINEAR_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"w.weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

/* ---- bf16 linear, tiled (prefill) ---- */

/* The same function as bf16.linear_mma for m >= 64 and k % 32 == 0: a
 * 128x128 output tile per block of 8 warps (2x4, 64x32 each), k in steps of
 * 32 through a 4-stage cp.async pipeline (x staged as f32, W as bf16), x
 * rounded to bf16 (cvt.rn: nearest even, as the reference; a NaN stays a NaN)
 * in shared memory once per tile, the next tile's while this one is
 * multiplied (one barrier per k step), fragments by ldmatrix from
 * XOR-swizzled rows.  No workspace: x is converted on load.  Blocks are ordered in groups of 8 row tiles so that a
 * wave of blocks shares its W tiles in L2.  Rows and columns past m and n
 * are zero-filled and not stored; k must be a multiple of 32 ("align_k"). */
static const char LINEAR_TILED_SRC[] =
    "/* qcore bf16 linear, tiled: y[m,n] = bf16(x)[m,k] . W[n,k]^T, f32 accumulate (mma.sync m16n8k16) */\n"
    "#define TBM 128\n"
    "#define TBN 128\n"
    "#define TBK 32\n"
    "#define TST 4 /* cp.async stages */\n"
    "#define AF_BYTES (TBM * TBK * 4)  /* one stage of x, f32 */\n"
    "#define B_BYTES (TBN * TBK * 2)   /* one stage of W, bf16 */\n"
    "#define STAGE_BYTES (AF_BYTES + B_BYTES)\n"
    "#define GROUP_M 8\n"
    "/* byte offset of 16-byte chunk c (0..3) of row r in a [rows][32] bf16 tile:\n"
    "   XOR swizzle so that 8 rows at one chunk hit 8 different bank groups */\n"
    "__device__ __forceinline__ unsigned qc_sw(int r, int c) { return (unsigned)(r * 64 + ((c ^ ((r >> 1) & 3)) << 4)); }\n"
    "__device__ __forceinline__ void qc_cp16(unsigned dst, const void *src, bool valid) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(valid ? 16 : 0));\n"
    "}\n"
    "__device__ __forceinline__ void qc_ldm4(unsigned *r, unsigned addr) {\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "__device__ __forceinline__ void qc_mma(float *d, const unsigned *a, const unsigned *b) {\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "/* 256 threads, 8 warps as 2 (m) x 4 (n), 64x32 outputs each; k % 32 == 0.\n"
    "   Dynamic shared memory: TST stages of [x f32 128x32 | W bf16 128x32 swizzled],\n"
    "   then two bf16 copies of x tiles (swizzled), the current one and the next. */\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_bf16_linear_tiled(const float *x, const unsigned short *w,\n"
    "                                                                        float *y, long long m, long long n,\n"
    "                                                                        long long k) {\n"
    "    extern __shared__ __align__(128) unsigned char smem[];\n"
    "    unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);\n"
    "    unsigned abf = sbase + TST * STAGE_BYTES;\n"
    "    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
    "    int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;\n"
    "    long long tiles_m = (m + TBM - 1) / TBM, tiles_n = (n + TBN - 1) / TBN;\n"
    "    long long bid = blockIdx.x, per_group = (long long)GROUP_M * tiles_n;\n"
    "    long long first_m = bid / per_group * GROUP_M, in_g = bid % per_group;\n"
    "    long long gsz = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;\n"
    "    long long row0 = (first_m + in_g % gsz) * TBM, col0 = in_g / gsz * TBN;\n"
    "    int kt_n = (int)(k / TBK);\n"
    "    /* one stage's loads: x 1024 chunks (4 per thread), W 512 chunks (2 per thread) */\n"
    "    auto load = [&](int stage, int kt) {\n"
    "        unsigned sa = sbase + stage * STAGE_BYTES, sb = sa + AF_BYTES;\n"
    "        long long k0 = (long long)kt * TBK;\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "            int idx = tid + 256 * j, r = idx >> 3, c = idx & 7;\n"
    "            long long gr = row0 + r;\n"
    "            bool ok = gr < m;\n"
    "            qc_cp16(sa + idx * 16, x + (ok ? gr : 0) * k + k0 + c * 4, ok);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++) {\n"
    "            int idx = tid + 256 * j, r = idx >> 2, c = idx & 3;\n"
    "            long long gn = col0 + r;\n"
    "            bool ok = gn < n;\n"
    "            qc_cp16(sb + qc_sw(r, c), w + (ok ? gn : 0) * k + k0 + c * 8, ok);\n"
    "        }\n"
    "    };\n"
    "    float acc[4][4][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "#pragma unroll\n"
    "    for (int s = 0; s < TST - 1; s++) {\n"
    "        if (s < kt_n) load(s, s);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    }\n"
    "    /* x tile kt (f32, stage kt % TST) -> bf16 buffer kt & 1, rounded to nearest even */\n"
    "    auto convert = [&](int kt) {\n"
    "        const float *af = (const float *)(smem + (kt % TST) * STAGE_BYTES);\n"
    "        unsigned dst = abf + (kt & 1) * (TBM * TBK * 2);\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++) {\n"
    "            int idx = tid + 256 * j, r = idx >> 2, c = idx & 3;\n"
    "            float4 v0 = *(const float4 *)(af + r * TBK + c * 8);\n"
    "            float4 v1 = *(const float4 *)(af + r * TBK + c * 8 + 4);\n"
    "            unsigned o0, o1, o2, o3;\n"
    "            asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(o0) : \"f\"(v0.y), \"f\"(v0.x));\n"
    "            asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(o1) : \"f\"(v0.w), \"f\"(v0.z));\n"
    "            asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(o2) : \"f\"(v1.y), \"f\"(v1.x));\n"
    "            asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(o3) : \"f\"(v1.w), \"f\"(v1.z));\n"
    "            asm volatile(\"st.shared.v4.u32 [%0], {%1,%2,%3,%4};\\n\" ::\"r\"(dst + qc_sw(r, c)), \"r\"(o0), \"r\"(o1),\n"
    "                         \"r\"(o2), \"r\"(o3));\n"
    "        }\n"
    "    };\n"
    "    if (kt_n > 0) {\n"
    "        asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(TST - 2));\n"
    "        __syncthreads();\n"
    "        convert(0);\n"
    "    }\n"
    "    /* iteration kt: x tile kt+1 is converted while tile kt is multiplied; one\n"
    "       barrier per tile.  Stage (kt - 1) % TST is free again and takes tile\n"
    "       kt + TST - 1. */\n"
    "    for (int kt = 0; kt < kt_n; kt++) {\n"
    "        int stage = kt % TST;\n"
    "        asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(TST - 3));\n"
    "        __syncthreads();\n"
    "        if (kt + 1 < kt_n) convert(kt + 1);\n"
    "        if (kt + TST - 1 < kt_n) load((kt + TST - 1) % TST, kt + TST - 1);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "        unsigned ab = abf + (kt & 1) * (TBM * TBK * 2);\n"
    "        unsigned sb = sbase + stage * STAGE_BYTES + AF_BYTES;\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < 2; kk++) {\n"
    "            unsigned a[4][4], b[4][2];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) {\n"
    "                int r = wm * 64 + i * 16 + (lane & 15);\n"
    "                qc_ldm4(a[i], ab + qc_sw(r, kk * 2 + (lane >> 4)));\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < 2; j++) {\n"
    "                int r = wn * 32 + j * 16 + (lane & 7) + ((lane >> 4) << 3);\n"
    "                unsigned q[4];\n"
    "                qc_ldm4(q, sb + qc_sw(r, kk * 2 + ((lane >> 3) & 1)));\n"
    "                b[2 * j][0] = q[0];\n"
    "                b[2 * j][1] = q[1];\n"
    "                b[2 * j + 1][0] = q[2];\n"
    "                b[2 * j + 1][1] = q[3];\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < 4; j++) qc_mma(acc[i][j], a[i], b[j]);\n"
    "        }\n"
    "    }\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "    bool pairs = (n & 1) == 0;\n"
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


/* 4 stages of x (f32) and W (bf16) tiles, two bf16 x tiles: 112 KiB, two blocks per SM on sm_90 */
#define TILED_SMEM (4u * (128u * 32u * 4u + 128u * 32u * 2u) + 2u * 128u * 32u * 2u)

/* m, n, k of the linear problem; one block per 128x128 tile (1-D grid) */
static void linear_tiled_dims(const qc_problem *p, qc_launch_dims *d) {
    int64_t tm = p->m > 0 ? (p->m + 127) / 128 : 0, tn = p->n > 0 ? (p->n + 127) / 128 : 0;
    int64_t tiles = tm * tn;
    dims_set(d, tiles > 0 && tiles <= ROWS_MAX ? (uint32_t)tiles : 0, 1, 256);
    d->shared_bytes = TILED_SMEM;
}

static int linear_tiled_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 32 != 0) {
        qc_reason_set(why, "align_k", "bf16.linear_tiled needs k a positive multiple of 32");
        return 0;
    }
    if (p->n <= 0 || ((p->m + 127) / 128) * ((p->n + 127) / 128) > ROWS_MAX) {
        qc_reason_set(why, "align_n", "bf16.linear_tiled needs 1 <= n and at most 2^31 - 1 output tiles");
        return 0;
    }
    return 1;
}

/* ---- registration ---- */

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

qc_kernel_desc qc_core_kernel_desc(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                   void (*reference)(void), const char *source, const char *entry,
                                   void (*dims)(const qc_problem *, qc_launch_dims *)) {
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = id,
        .format = "bf16",
        .phases = QC_PHASE_ANY,
        .m_min = 0,
        .m_max = ROWS_MAX,
        .arch = {80, QC_SM_ANY},
        .n_params = n_params,
        .params = params,
        .reference = reference,
        .cuda_source = source,
        .cuda_entry = entry,
        .launch_dims = dims,
        .eligible = not_for_selection,
    };
    return k;
}

static qc_kernel_desc core_kernel(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                  void (*reference)(void), const char *entry,
                                  void (*dims)(const qc_problem *, qc_launch_dims *)) {
    return qc_core_kernel_desc(id, params, n_params, reference, CORE_SRC, entry, dims);
}

qc_status qc_core_kernels_register(const qc_host_api *api, qc_host *host, void (*bf16_linear_ref)(void)) {
    const qc_kernel_desc core[] = {
        core_kernel("core.rmsnorm", RMSNORM_PARAMS, N_OF(RMSNORM_PARAMS), (void (*)(void))rmsnorm_ref,
                    "qc_rmsnorm_f32", rmsnorm_dims),
        core_kernel("core.rope_pairs", ROPE_PARAMS, N_OF(ROPE_PARAMS), (void (*)(void))rope_pairs_ref,
                    "qc_rope_pairs_f32", rope_dims),
        core_kernel("core.rope_half", ROPE_PARAMS, N_OF(ROPE_PARAMS), (void (*)(void))rope_half_ref,
                    "qc_rope_half_f32", rope_dims),
        core_kernel("core.swiglu", SWIGLU_PARAMS, N_OF(SWIGLU_PARAMS), (void (*)(void))swiglu_ref, "qc_swiglu_f32",
                    swiglu_dims),
        core_kernel("core.embed", EMBED_PARAMS, N_OF(EMBED_PARAMS), (void (*)(void))embed_ref, "qc_embed_f32",
                    embed_dims),
        qc_core_grid_dep(core_kernel("core.argmax", ARGMAX_PARAMS, N_OF(ARGMAX_PARAMS), (void (*)(void))argmax_ref,
                                     "qc_argmax_f32", argmax_dims)),
    };
    /* the linear first: format selection walks kernels in registration order */
    qc_kernel_desc linear = {
        .struct_size = sizeof linear,
        .id = "bf16.linear_mma",
        .format = "bf16",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 65535LL * 64, /* grid.y holds 64-row tiles */
        .arch = {80, QC_SM_ANY},
        .n_params = N_OF(LINEAR_PARAMS),
        .params = LINEAR_PARAMS,
        .reference = bf16_linear_ref,
        .cuda_source = LINEAR_SRC,
        .cuda_entry = "qc_bf16_linear_mma",
        .launch_dims = linear_dims,
    };
    /* the tiled linear before it: prefill shapes it accepts go to it */
    qc_kernel_desc tiled = linear;
    tiled.id = "bf16.linear_tiled";
    tiled.phases = QC_PHASE_ANY;
    tiled.m_min = 64;
    tiled.m_max = ROWS_MAX;
    tiled.cuda_source = LINEAR_TILED_SRC;
    tiled.cuda_entry = "qc_bf16_linear_tiled";
    tiled.launch_dims = linear_tiled_dims;
    tiled.eligible = linear_tiled_eligible;
    qc_status st = api->register_kernel(host, &tiled);
    if (st == QC_OK) st = api->register_kernel(host, &linear);
    for (size_t i = 0; st == QC_OK && i < sizeof core / sizeof core[0]; i++) st = api->register_kernel(host, &core[i]);
    return st;
}
