/* qc_core_kernels.c - the core GPU kernels (rmsnorm, rope, swiglu, embedding, argmax, bf16 linear) and C references. */
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

/* ---- registration ---- */

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

static qc_kernel_desc core_kernel(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                  void (*reference)(void), const char *entry,
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
        .cuda_source = CORE_SRC,
        .cuda_entry = entry,
        .launch_dims = dims,
        .eligible = not_for_selection,
    };
    return k;
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
        core_kernel("core.argmax", ARGMAX_PARAMS, N_OF(ARGMAX_PARAMS), (void (*)(void))argmax_ref, "qc_argmax_f32",
                    argmax_dims),
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
    qc_status st = api->register_kernel(host, &linear);
    for (size_t i = 0; st == QC_OK && i < sizeof core / sizeof core[0]; i++) st = api->register_kernel(host, &core[i]);
    return st;
}
