/* qc_kernels_engine.c - the fused elementwise kernels of the GPU forward pass (embedding, add+rmsnorm, qkv+rope+cache write, swiglu) with C references. */
#include <math.h>
#include <string.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_core_kernels.h"
#include "qc_kernels_engine.h"
#include "qc_util.h"

/*
 * These kernels exist to keep a decode step at a few launches per layer: the
 * residual add is fused into the next RMSNorm, Q/K/V post-processing (bias,
 * per-head norm, rotary, KV-cache write) is one kernel, and SwiGLU reads the
 * fused gate|up GEMM output.  Each has a C reference with the same
 * parameters (called through libffi in tests) that defines its numbers; the
 * GPU versions differ only in f32 summation order and sin/cos last bits.
 *
 * They are core kernels: registered under "bf16", found by id, refused for
 * linear-layer selection.  Optional pointers may be 0 (NULL).
 *
 * KV cache layout (one layer): bf16 [block][kv_head][QC_KV_BLOCK][head_dim];
 * a token's slot is block * QC_KV_BLOCK + offset, and a negative slot skips
 * the write (padding rows of a graph bucket).
 */

#define ROWS_MAX 2147483647LL

static void dims(qc_launch_dims *d, uint32_t gx, uint32_t gy, uint32_t block) {
    memset(d, 0, sizeof *d);
    d->grid[0] = gx;
    d->grid[1] = gy;
    d->grid[2] = 1;
    d->block[0] = block;
    d->block[1] = d->block[2] = 1;
}


static const char ENGINE_SRC[] =
    "/* qcore engine kernels */\n"
    "#define QC_KV_BLOCK 16\n"
    "__device__ __forceinline__ float qc_bf(unsigned short h) { return __uint_as_float((unsigned)h << 16); }\n"
    "__device__ __forceinline__ unsigned short qc_tobf(float f) {\n"
    "    unsigned short r;\n"
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f));\n"
    "    return r;\n"
    "}\n"
    "__device__ float qc_bsum(float v) {\n"
    "    __shared__ float part[32];\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
    "    __syncthreads();\n"
    "    if (lane == 0) part[wid] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < nw ? part[lane] : 0.f;\n"
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "\n"
    "/* one block per token: y = bf16 table row; an id outside [0, vocab) gives NaN */\n"
    "extern \"C\" __global__ void qc_embed_bf16(const unsigned short *table, const int *ids, float *y, long long m,\n"
    "                                          long long n, long long vocab) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    long long id = ids[r];\n"
    "    float *yr = y + r * n;\n"
    "    bool bad = id < 0 || id >= vocab;\n"
    "    const unsigned short *src = table + (bad ? 0 : id) * n;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = bad ? __uint_as_float(0x7fc00000u) : qc_bf(src[i]);\n"
    "}\n"
    "\n"
    "/* output row r, source row s = idx ? idx[r] : r: x[s] += h[s] (h may be\n"
    "   null), y[r] = x[s] / sqrt(mean(x[s]^2) + eps) * w, yb[r] = bf16(y[r]) */\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_add_rmsnorm(float *x, const float *h, const float *w,\n"
    "                                                               float *y, unsigned short *yb, const int *idx,\n"
    "                                                               long long m, long long n, float eps) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    long long s = idx ? idx[r] : r;\n"
    "    float *xr = x + s * n;\n"
    "    const float *hr = h ? h + s * n : 0;\n"
    "    float ss = 0.f;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) {\n"
    "        float v = xr[i];\n"
    "        if (hr) { v += hr[i]; xr[i] = v; }\n"
    "        ss = fmaf(v, v, ss);\n"
    "    }\n"
    "    ss = qc_bsum(ss);\n"
    "    float inv = 1.0f / sqrtf(ss / (float)n + eps);\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) {\n"
    "        float v = xr[i] * inv * w[i];\n"
    "        y[r * n + i] = v;\n"
    "        if (yb) yb[r * n + i] = qc_tobf(v);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* block (token r, head j): j < heads is query head j, else kv head\n"
    "   j - heads (which also moves v).  bias, per-head norm, rotary at pos[r];\n"
    "   q to q_out [m][heads][d] f32, k and v to the cache at slots[r] as bf16.\n"
    "   blockDim.x = d / 2: thread i owns the rotated pair of index i. */\n"
    "extern \"C\" __global__ void qc_qkv_rope_kv(const float *qkv, long long ld, const float *bias, float *q_out,\n"
    "                                           unsigned short *k_cache, unsigned short *v_cache, const int *slots,\n"
    "                                           const int *pos, const float *inv_freq, const float *q_norm,\n"
    "                                           const float *k_norm, long long m, int heads, int kv_heads, int d,\n"
    "                                           int halves, float eps) {\n"
    "    long long r = blockIdx.x;\n"
    "    int j = blockIdx.y, i = threadIdx.x, half = d / 2;\n"
    "    if (r >= m) return;\n"
    "    bool is_q = j < heads;\n"
    "    int kvh = j - heads;\n"
    "    long long col = is_q ? (long long)j * d : (long long)heads * d + (long long)kvh * d;\n"
    "    const float *src = qkv + r * ld + col;\n"
    "    bool act = i < half; /* the block is rounded up to whole warps */\n"
    "    int i0 = halves ? i : 2 * i, i1 = halves ? i + half : 2 * i + 1;\n"
    "    float a0 = act ? src[i0] : 0.f, a1 = act ? src[i1] : 0.f;\n"
    "    if (bias && act) { a0 += bias[col + i0]; a1 += bias[col + i1]; }\n"
    "    const float *nw = is_q ? q_norm : k_norm;\n"
    "    if (nw) {\n"
    "        float ss = qc_bsum(a0 * a0 + a1 * a1);\n"
    "        float inv = 1.0f / sqrtf(ss / (float)d + eps);\n"
    "        if (act) { a0 = a0 * inv * nw[i0]; a1 = a1 * inv * nw[i1]; }\n"
    "    }\n"
    "    if (!act) i = 0; /* idle threads still help move v below */\n"
    "    double ang = (double)pos[r] * (double)inv_freq[i];\n"
    "    ang -= 6.283185307179586 * rint(ang * 0.15915494309189535);\n"
    "    float sn, cs;\n"
    "    sincosf((float)ang, &sn, &cs);\n"
    "    float o0 = a0 * cs - a1 * sn, o1 = a0 * sn + a1 * cs;\n"
    "    if (is_q) {\n"
    "        float *q = q_out + (r * heads + j) * d;\n"
    "        if (act) { q[i0] = o0; q[i1] = o1; }\n"
    "        return;\n"
    "    }\n"
    "    int slot = slots[r];\n"
    "    if (slot < 0) return;\n"
    "    long long base = (((long long)(slot / QC_KV_BLOCK) * kv_heads + kvh) * QC_KV_BLOCK + slot % QC_KV_BLOCK) * d;\n"
    "    if (act) { k_cache[base + i0] = qc_tobf(o0); k_cache[base + i1] = qc_tobf(o1); }\n"
    "    i = threadIdx.x;\n"
    "    long long vcol = (long long)(heads + kv_heads) * d + (long long)kvh * d;\n"
    "    const float *vs = qkv + r * ld + vcol;\n"
    "    for (int t = i; t < d; t += blockDim.x) {\n"
    "        float v = vs[t] + (bias ? bias[vcol + t] : 0.f);\n"
    "        v_cache[base + t] = qc_tobf(v);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* y[r][i] = silu(g[r*ld + i]) * u[r*ld + i]; yb the bf16 copy (may be null) */\n"
    "extern \"C\" __global__ void qc_swiglu_ld(const float *g, const float *u, long long ld, float *y,\n"
    "                                         unsigned short *yb, long long m, long long n) {\n"
    "    long long total = m * n, step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {\n"
    "        long long r = t / n, i = t % n;\n"
    "        float a = g[r * ld + i];\n"
    "        float v = a / (1.0f + expf(-a)) * u[r * ld + i];\n"
    "        y[t] = v;\n"
    "        if (yb) yb[t] = qc_tobf(v);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* y = bf16(x) */\n"
    "extern \"C\" __global__ void qc_cast_bf16(const float *x, unsigned short *y, long long count) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < count; t += step) y[t] = qc_tobf(x[t]);\n"
    "}\n"
    "\n"
    "/* synthetic weights: bf16 values uniform in [-scale, scale) from a hash of\n"
    "   (seed, index); never all zero */\n"
    "extern \"C\" __global__ void qc_fill_random_bf16(unsigned short *w, long long count, unsigned long long seed,\n"
    "                                                float scale) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < count; t += step) {\n"
    "        unsigned long long z = seed + (unsigned long long)t * 0x9e3779b97f4a7c15ull;\n"
    "        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
    "        z ^= z >> 31;\n"
    "        float u = (float)(z >> 40) * (1.0f / 16777216.0f);\n"
    "        w[t] = qc_tobf((2.0f * u - 1.0f) * scale);\n"
    "    }\n"
    "}\n";

/* ---- C references ---- */

static void embed_bf16_ref(const uint16_t *table, const int32_t *ids, float *y, int64_t m, int64_t n, int64_t vocab) {
    uint32_t nan_bits = 0x7fc00000u;
    float nan;
    memcpy(&nan, &nan_bits, 4);
    for (int64_t r = 0; r < m; r++) {
        int64_t id = ids[r];
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] = id < 0 || id >= vocab ? nan : qc_bf16_to_f32(table[id * n + i]);
    }
}

static void add_rmsnorm_ref(float *x, const float *h, const float *w, float *y, uint16_t *yb, const int32_t *idx,
                            int64_t m, int64_t n, float eps) {
    for (int64_t r = 0; r < m; r++) {
        int64_t s = idx ? idx[r] : r;
        float *xr = x + s * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) {
            if (h) xr[i] += h[s * n + i];
            ss += (double)xr[i] * xr[i];
        }
        float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        for (int64_t i = 0; i < n; i++) {
            y[r * n + i] = xr[i] * inv * w[i];
            if (yb) yb[r * n + i] = qc_f32_to_bf16(y[r * n + i]);
        }
    }
}

static void qkv_rope_kv_ref(const float *qkv, int64_t ld, const float *bias, float *q_out, uint16_t *k_cache,
                            uint16_t *v_cache, const int32_t *slots, const int32_t *pos, const float *inv_freq,
                            const float *q_norm, const float *k_norm, int64_t m, int32_t heads, int32_t kv_heads,
                            int32_t d, int32_t halves, float eps) {
    int half = d / 2;
    float tmp[1024];
    for (int64_t r = 0; r < m; r++) {
        for (int j = 0; j < heads + kv_heads; j++) {
            int is_q = j < heads, kvh = j - heads;
            int64_t col = is_q ? (int64_t)j * d : (int64_t)heads * d + (int64_t)kvh * d;
            const float *nw = is_q ? q_norm : k_norm;
            double ss = 0;
            for (int i = 0; i < d; i++) {
                tmp[i] = qkv[r * ld + col + i] + (bias ? bias[col + i] : 0.f);
                ss += (double)tmp[i] * tmp[i];
            }
            if (nw) {
                float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
                for (int i = 0; i < d; i++) tmp[i] = tmp[i] * inv * nw[i];
            }
            float out[1024];
            for (int i = 0; i < half; i++) {
                double a = (double)pos[r] * (double)inv_freq[i];
                float c = (float)cos(a), s = (float)sin(a);
                int i0 = halves ? i : 2 * i, i1 = halves ? i + half : 2 * i + 1;
                out[i0] = tmp[i0] * c - tmp[i1] * s;
                out[i1] = tmp[i0] * s + tmp[i1] * c;
            }
            if (is_q) {
                memcpy(q_out + (r * heads + j) * d, out, (size_t)d * sizeof(float));
                continue;
            }
            if (slots[r] < 0) continue;
            int64_t slot = slots[r];
            int64_t base = ((slot / QC_KV_BLOCK_REF * kv_heads + kvh) * QC_KV_BLOCK_REF + slot % QC_KV_BLOCK_REF) * d;
            int64_t vcol = (int64_t)(heads + kv_heads) * d + (int64_t)kvh * d;
            for (int i = 0; i < d; i++) {
                k_cache[base + i] = qc_f32_to_bf16(out[i]);
                v_cache[base + i] = qc_f32_to_bf16(qkv[r * ld + vcol + i] + (bias ? bias[vcol + i] : 0.f));
            }
        }
    }
}

static void swiglu_ld_ref(const float *g, const float *u, int64_t ld, float *y, uint16_t *yb, int64_t m, int64_t n) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < n; i++) {
            float a = g[r * ld + i];
            float v = a / (1.0f + expf(-a)) * u[r * ld + i];
            y[r * n + i] = v;
            if (yb) yb[r * n + i] = qc_f32_to_bf16(v);
        }
}

static void cast_bf16_ref(const float *x, uint16_t *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] = qc_f32_to_bf16(x[i]);
}

static void fill_random_bf16_ref(uint16_t *w, int64_t count, uint64_t seed, float scale) {
    for (int64_t t = 0; t < count; t++) {
        uint64_t z = seed + (uint64_t)t * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f);
        w[t] = qc_f32_to_bf16((2.0f * u - 1.0f) * scale);
    }
}

/* ---- launch geometry (qc_problem fields given per kernel) ---- */

#define GRID_CAP (1u << 20)
static uint32_t blocks_for(int64_t work, uint32_t per) {
    if (work <= 0) return 0;
    int64_t b = (work + per - 1) / per;
    return b > GRID_CAP ? GRID_CAP : (uint32_t)b;
}

/* m rows of n (embed, add_rmsnorm): a block per row */
static void rows_dims(const qc_problem *p, qc_launch_dims *d) {
    uint32_t t = p->n >= 1024 ? 1024 : p->n >= 256 ? 256 : 128;
    dims(d, p->m > 0 && p->m <= ROWS_MAX ? (uint32_t)p->m : 0, 1, t);
}

/* m tokens, n = heads + kv_heads, k = head_dim */
static void qkv_dims(const qc_problem *p, qc_launch_dims *d) {
    uint32_t half = p->k >= 2 ? (uint32_t)(p->k / 2) : 0;
    dims(d, p->m > 0 && p->m <= ROWS_MAX ? (uint32_t)p->m : 0, p->n > 0 ? (uint32_t)p->n : 0, (half + 31) / 32 * 32);
}

/* m * n elements */
static void elem_dims(const qc_problem *p, qc_launch_dims *d) {
    dims(d, blocks_for(p->m * (p->n > 0 ? p->n : 1), 256), 1, 256);
}

static const qc_kernel_param EMBED_BF16_PARAMS[] = {
    {"table", QC_PARAM_PTR}, {"ids", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},     {"n", QC_PARAM_I64},   {"vocab", QC_PARAM_I64},
};
static const qc_kernel_param ADD_RMSNORM_PARAMS[] = {
    {"x", QC_PARAM_PTR},   {"h", QC_PARAM_PTR}, {"weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR}, {"y.bf16", QC_PARAM_PTR},
    {"idx", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},      {"eps", QC_PARAM_F32},
};
static const qc_kernel_param QKV_PARAMS[] = {
    {"qkv", QC_PARAM_PTR},      {"ld", QC_PARAM_I64},       {"bias", QC_PARAM_PTR},    {"q", QC_PARAM_PTR},
    {"k_cache", QC_PARAM_PTR},  {"v_cache", QC_PARAM_PTR},  {"slots", QC_PARAM_PTR},   {"pos", QC_PARAM_PTR},
    {"inv_freq", QC_PARAM_PTR}, {"q_norm", QC_PARAM_PTR},   {"k_norm", QC_PARAM_PTR},  {"m", QC_PARAM_I64},
    {"heads", QC_PARAM_I32},    {"kv_heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32}, {"halves", QC_PARAM_I32},
    {"eps", QC_PARAM_F32},
};
static const qc_kernel_param SWIGLU_LD_PARAMS[] = {
    {"gate", QC_PARAM_PTR},   {"up", QC_PARAM_PTR}, {"ld", QC_PARAM_I64}, {"y", QC_PARAM_PTR},
    {"y.bf16", QC_PARAM_PTR}, {"m", QC_PARAM_I64},  {"n", QC_PARAM_I64},
};
static const qc_kernel_param CAST_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"y", QC_PARAM_PTR}, {"count", QC_PARAM_I64},
};
static const qc_kernel_param FILL_PARAMS[] = {
    {"w", QC_PARAM_PTR}, {"count", QC_PARAM_I64}, {"seed", QC_PARAM_I64}, {"scale", QC_PARAM_F32},
};

static qc_kernel_desc engine_kernel(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                    void (*reference)(void), const char *entry,
                                    void (*launch)(const qc_problem *, qc_launch_dims *)) {
    return qc_core_kernel_desc(id, params, n_params, reference, ENGINE_SRC, entry, launch);
}

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

qc_status qc_engine_kernels_register(const qc_host_api *api, qc_host *host) {
    const qc_kernel_desc ks[] = {
        engine_kernel("core.embed_bf16", EMBED_BF16_PARAMS, N_OF(EMBED_BF16_PARAMS), (void (*)(void))embed_bf16_ref,
                      "qc_embed_bf16", rows_dims),
        engine_kernel("core.add_rmsnorm", ADD_RMSNORM_PARAMS, N_OF(ADD_RMSNORM_PARAMS),
                      (void (*)(void))add_rmsnorm_ref, "qc_add_rmsnorm", rows_dims),
        engine_kernel("core.qkv_rope_kv", QKV_PARAMS, N_OF(QKV_PARAMS), (void (*)(void))qkv_rope_kv_ref,
                      "qc_qkv_rope_kv", qkv_dims),
        engine_kernel("core.swiglu_ld", SWIGLU_LD_PARAMS, N_OF(SWIGLU_LD_PARAMS), (void (*)(void))swiglu_ld_ref,
                      "qc_swiglu_ld", elem_dims),
        engine_kernel("core.cast_bf16", CAST_PARAMS, N_OF(CAST_PARAMS), (void (*)(void))cast_bf16_ref, "qc_cast_bf16",
                      elem_dims),
        engine_kernel("core.fill_random_bf16", FILL_PARAMS, N_OF(FILL_PARAMS), (void (*)(void))fill_random_bf16_ref,
                      "qc_fill_random_bf16", elem_dims),
    };
    qc_status st = QC_OK;
    for (size_t i = 0; st == QC_OK && i < sizeof ks / sizeof ks[0]; i++) st = api->register_kernel(host, &ks[i]);
    return st;
}
