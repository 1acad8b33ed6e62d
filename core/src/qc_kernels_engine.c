/* qc_kernels_engine.c - the fused elementwise kernels of the GPU forward pass (embedding, add+rmsnorm, qkv+rope+cache write, swiglu) with C references. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/common/qc_fp8_codec.h"
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


/* helpers of both sources */
#define ENGINE_COMMON \
    "/* qcore engine kernels */\n" \
    QC_CUDA_GRID_DEP_SRC \
    "#define QC_KV_BLOCK 16\n" \
    "__device__ __forceinline__ float qc_bf(unsigned short h) { return __uint_as_float((unsigned)h << 16); }\n" \
    "__device__ __forceinline__ unsigned short qc_tobf(float f) {\n" \
    "    unsigned short r;\n" \
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f));\n" \
    "    return r;\n" \
    "}\n" \
    "__device__ float qc_bsum(float v) {\n" \
    "    __shared__ float part[32];\n" \
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n" \
    "    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n" \
    "    __syncthreads();\n" \
    "    if (lane == 0) part[wid] = v;\n" \
    "    __syncthreads();\n" \
    "    v = lane < nw ? part[lane] : 0.f;\n" \
    "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n" \
    "    return v;\n" \
    "}\n"

static const char ENGINE_SRC[] =
    ENGINE_COMMON
    "\n"
    "/* one block per token: y = bf16 table row; an id outside [0, vocab) gives NaN */\n"
    "extern \"C\" __global__ void qc_embed_bf16(const unsigned short *table, const int *ids, float *y, long long m,\n"
    "                                          long long n, long long vocab) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    long long id = ids[r];\n"
    "    float *yr = y + r * n;\n"
    "    bool bad = id < 0 || id >= vocab;\n"
    "    const unsigned short *src = table + (bad ? 0 : id) * n;\n"
    "    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = bad ? __uint_as_float(0x7fc00000u) : qc_bf(src[i]);\n"
    "}\n"
    "\n"
    "/* block (token r, head j): j < heads is query head j, else kv head\n"
    "   j - heads (which also moves v).  bias, per-head norm, rotary at pos[r];\n"
    "   q to q_out [m][heads][d] f32, k and v to the cache at slots[r] as bf16.\n"
    "   blockDim.x = d / 2: thread i owns the rotated pair of index i. */\n"
    "/* qc_qkv_rope_kv's mapping when d % 8 == 0 and d / 8 is a power of two up to 32 (keep in step with\n"
    "   qkv_dims): t = d / 8 threads a head, each owning 4 rotated pairs (pair indices 4i..4i+3), so a\n"
    "   token's head is read with 16-byte loads and a thread has several loads in flight; blockDim.x / t\n"
    "   heads a block.  The per-head norm sums within the head's t lanes by shuffles (t divides 32, and\n"
    "   every lane takes part, live or not).  al: every pointer and ld allow the 16-byte accesses. */\n"
    "__device__ __forceinline__ float4 qc_ld4(const float *p, bool al) {\n"
    "    return al ? *(const float4 *)p : make_float4(p[0], p[1], p[2], p[3]);\n"
    "}\n"
    "__device__ __forceinline__ void qc_st4(float *p, float4 v, bool al) {\n"
    "    if (al) *(float4 *)p = v;\n"
    "    else p[0] = v.x, p[1] = v.y, p[2] = v.z, p[3] = v.w;\n"
    "}\n"
    "__device__ __forceinline__ unsigned qc_tobf2(float a, float b) { return qc_tobf(a) | (unsigned)qc_tobf(b) << 16; }\n"
    "__device__ __forceinline__ void qc_stbf4(unsigned short *p, float a, float b, float c, float e, bool al) {\n"
    "    if (al) *(uint2 *)p = make_uint2(qc_tobf2(a, b), qc_tobf2(c, e));\n"
    "    else p[0] = qc_tobf(a), p[1] = qc_tobf(b), p[2] = qc_tobf(c), p[3] = qc_tobf(e);\n"
    "}\n"
    "__device__ __forceinline__ void qc_qkv_vec(const float *qkv, long long ld, const float *bias, float *q_out,\n"
    "                                           unsigned short *k_cache, unsigned short *v_cache, const int *slots,\n"
    "                                           const int *pos, const float *inv_freq, const float *q_norm,\n"
    "                                           const float *k_norm, long long r, int heads, int kv_heads, int d,\n"
    "                                           int halves, float eps) {\n"
    "    const int t = d >> 3, li = threadIdx.x % t, j = blockIdx.y * (blockDim.x / t) + threadIdx.x / t;\n"
    "    const int half = d >> 1;\n"
    "    const bool live = j < heads + kv_heads, is_q = j < heads;\n"
    "    const unsigned long long any = (unsigned long long)qkv | (unsigned long long)bias |\n"
    "                                   (unsigned long long)q_out | (unsigned long long)k_cache |\n"
    "                                   (unsigned long long)v_cache | (unsigned long long)inv_freq |\n"
    "                                   (unsigned long long)q_norm | (unsigned long long)k_norm;\n"
    "    const bool al = !(any & 15ull) && !(ld & 3);\n"
    "    const long long col = (long long)j * d; /* kv head j - heads sits right after the query heads */\n"
    "    /* the elements of pairs 4li..4li+3: halves: e0 = 4li + q, e1 = e0 + half; pairs: e0 = 8li + 2q, e1 = e0 + 1 */\n"
    "    const int o0 = halves ? 4 * li : 8 * li, o1 = halves ? 4 * li + half : 8 * li + 4;\n"
    "    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};\n"
    "    if (live) {\n"
    "        const float *src = qkv + r * ld + col;\n"
    "        float4 x = qc_ld4(src + o0, al), y = qc_ld4(src + o1, al);\n"
    "        if (bias) {\n"
    "            const float4 bx = qc_ld4(bias + col + o0, al), by = qc_ld4(bias + col + o1, al);\n"
    "            x.x += bx.x, x.y += bx.y, x.z += bx.z, x.w += bx.w, y.x += by.x, y.y += by.y, y.z += by.z, y.w += by.w;\n"
    "        }\n"
    "        if (halves) {\n"
    "            a0[0] = x.x, a0[1] = x.y, a0[2] = x.z, a0[3] = x.w, a1[0] = y.x, a1[1] = y.y, a1[2] = y.z, a1[3] = y.w;\n"
    "        } else {\n"
    "            a0[0] = x.x, a1[0] = x.y, a0[1] = x.z, a1[1] = x.w, a0[2] = y.x, a1[2] = y.y, a0[3] = y.z, a1[3] = y.w;\n"
    "        }\n"
    "    }\n"
    "    const float *nw = is_q ? q_norm : k_norm;\n"
    "    if (q_norm || k_norm) { /* uniform over the block: every lane reaches the shuffles */\n"
    "        float ss = 0.f;\n"
    "#pragma unroll\n"
    "        for (int q = 0; q < 4; q++) ss += a0[q] * a0[q] + a1[q] * a1[q];\n"
    "        for (int o = t >> 1; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);\n"
    "        if (nw && live) {\n"
    "            const float inv = 1.0f / sqrtf(ss / (float)d + eps);\n"
    "            const float4 w0 = qc_ld4(nw + o0, al), w1 = qc_ld4(nw + o1, al);\n"
    "            const float n0[4] = {w0.x, halves ? w0.y : w0.z, halves ? w0.z : w1.x, halves ? w0.w : w1.z};\n"
    "            const float n1[4] = {halves ? w1.x : w0.y, halves ? w1.y : w0.w, halves ? w1.z : w1.y, w1.w};\n"
    "#pragma unroll\n"
    "            for (int q = 0; q < 4; q++) a0[q] = a0[q] * inv * n0[q], a1[q] = a1[q] * inv * n1[q];\n"
    "        }\n"
    "    }\n"
    "    if (!live) return;\n"
    "    const float4 fr = qc_ld4(inv_freq + 4 * li, al);\n"
    "    const float f[4] = {fr.x, fr.y, fr.z, fr.w};\n"
    "    const double p = (double)pos[r];\n"
    "    float r0[4], r1[4];\n"
    "#pragma unroll\n"
    "    for (int q = 0; q < 4; q++) {\n"
    "        double ang = p * (double)f[q];\n"
    "        ang -= 6.283185307179586 * rint(ang * 0.15915494309189535);\n"
    "        float sn, cs;\n"
    "        sincosf((float)ang, &sn, &cs);\n"
    "        r0[q] = a0[q] * cs - a1[q] * sn, r1[q] = a0[q] * sn + a1[q] * cs;\n"
    "    }\n"
    "    if (is_q) {\n"
    "        float *qo = q_out + (r * heads + j) * d;\n"
    "        if (halves) {\n"
    "            qc_st4(qo + o0, make_float4(r0[0], r0[1], r0[2], r0[3]), al);\n"
    "            qc_st4(qo + o1, make_float4(r1[0], r1[1], r1[2], r1[3]), al);\n"
    "        } else {\n"
    "            qc_st4(qo + o0, make_float4(r0[0], r1[0], r0[1], r1[1]), al);\n"
    "            qc_st4(qo + o1, make_float4(r0[2], r1[2], r0[3], r1[3]), al);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    const int slot = slots[r], kvh = j - heads;\n"
    "    if (slot < 0) return;\n"
    "    const long long base = (((long long)(slot / QC_KV_BLOCK) * kv_heads + kvh) * QC_KV_BLOCK + slot % QC_KV_BLOCK) * d;\n"
    "    if (halves) {\n"
    "        qc_stbf4(k_cache + base + o0, r0[0], r0[1], r0[2], r0[3], al);\n"
    "        qc_stbf4(k_cache + base + o1, r1[0], r1[1], r1[2], r1[3], al);\n"
    "    } else {\n"
    "        qc_stbf4(k_cache + base + o0, r0[0], r1[0], r0[1], r1[1], al);\n"
    "        qc_stbf4(k_cache + base + o1, r0[2], r1[2], r0[3], r1[3], al);\n"
    "    }\n"
    "    /* v: elements 8li..8li+7 of the head, moved with the bias */\n"
    "    const long long vcol = (long long)(heads + kv_heads) * d + (long long)kvh * d + 8 * li;\n"
    "    const float *vs = qkv + r * ld + vcol;\n"
    "    float4 v0 = qc_ld4(vs, al), v1 = qc_ld4(vs + 4, al);\n"
    "    if (bias) {\n"
    "        const float4 b0 = qc_ld4(bias + vcol, al), b1 = qc_ld4(bias + vcol + 4, al);\n"
    "        v0.x += b0.x, v0.y += b0.y, v0.z += b0.z, v0.w += b0.w, v1.x += b1.x, v1.y += b1.y, v1.z += b1.z, v1.w += b1.w;\n"
    "    }\n"
    "    qc_stbf4(v_cache + base + 8 * li, v0.x, v0.y, v0.z, v0.w, al);\n"
    "    qc_stbf4(v_cache + base + 8 * li + 4, v1.x, v1.y, v1.z, v1.w, al);\n"
    "}\n"
    "extern \"C\" __global__ void qc_qkv_rope_kv(const float *qkv, long long ld, const float *bias, float *q_out,\n"
    "                                           unsigned short *k_cache, unsigned short *v_cache, const int *slots,\n"
    "                                           const int *pos, const float *inv_freq, const float *q_norm,\n"
    "                                           const float *k_norm, long long m, int heads, int kv_heads, int d,\n"
    "                                           int halves, float eps) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    if (d > 0 && !(d & 7) && d <= 256 && !((d >> 3) & ((d >> 3) - 1))) {\n"
    "        qc_qkv_vec(qkv, ld, bias, q_out, k_cache, v_cache, slots, pos, inv_freq, q_norm, k_norm, r, heads, kv_heads,\n"
    "                   d, halves, eps);\n"
    "        return;\n"
    "    }\n"
    "    /* other head sizes: a block per (token, head), thread i owning pair i */\n"
    "    int j = blockIdx.y, i = threadIdx.x, half = d / 2;\n"
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
    "/* y = bf16(x): 4 elements a thread (16-byte loads, 8-byte stores) when x and y allow it, then the tail */\n"
    "extern \"C\" __global__ void qc_cast_bf16(const float *x, unsigned short *y, long long count) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    const long long step = (long long)gridDim.x * blockDim.x, first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    long long done = 0;\n"
    "    if (!((unsigned long long)x & 15ull) && !((unsigned long long)y & 7ull)) {\n"
    "        done = count >> 2 << 2;\n"
    "        for (long long t = first; t < count >> 2; t += step) {\n"
    "            const float4 v = ((const float4 *)x)[t];\n"
    "            ((uint2 *)y)[t] = make_uint2(qc_tobf2(v.x, v.y), qc_tobf2(v.z, v.w));\n"
    "        }\n"
    "    }\n"
    "    for (long long t = done + first; t < count; t += step) y[t] = qc_tobf(x[t]);\n"
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

/* The row kernels (add+rmsnorm, swiglu, their quantizing variants, cast_quant): one source, each build
 * compiling one entry (-DQC_ROW_*), so that the templates of the others cost it nothing. */
static const char ROW_SRC[] =
    ENGINE_COMMON
    "/* ---- row kernels: one block per row, 16-byte loads, a row held in registers ----\n"
    "   Chunk j of 4 floats goes to thread j % T, its (j / T)-th register slot, so a warp's\n"
    "   32 chunks of one slot are 128 consecutive elements (one E4M3 group).  Rows that do not\n"
    "   fit (n % 4, unaligned, more than 4 chunks per thread) take the plain loops.  The fused\n"
    "   variants (MODE > 0) quantize the bf16-rounded outputs with a recipe of plugin.h, with\n"
    "   the plugins' own arithmetic, instead of (or besides) writing y and y.bf16. */\n"
    "#define QC_VPT 4\n"
    "#define QC_M_E4M3_TOKEN 1\n"
    "#define QC_M_E4M3_G128 2\n"
    "#define QC_M_INT8_TOKEN 3\n"
    "__device__ float qc_bmax(float v) {\n"
    "    __shared__ float partm[32];\n"
    "    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
    "    __syncthreads();\n"
    "    if (lane == 0) partm[wid] = v;\n"
    "    __syncthreads();\n"
    "    v = lane < nw ? partm[lane] : 0.f;\n"
    "    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "/* E4M3 (fn) code as the fp8 plugin's qc_e4m3: nearest even, saturating, NaN -> 0x7F */\n"
    "__device__ __forceinline__ unsigned qc_e4m3c(float v) {\n"
    "#if __CUDA_ARCH__ >= 890\n"
    "    unsigned short r;\n"
    "    asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;\" : \"=h\"(r) : \"f\"(v));\n"
    "    return v != v ? 0x7Fu : (unsigned)(r & 0xFFu);\n"
    "#else\n"
    "    return 0x7Fu; /* the host fuses E4M3 recipes on sm_89+ only */\n"
    "#endif\n"
    "}\n"
    "/* v / s from rs = RN(1 / s) without div.rn's long sequence (Markstein's correction; the negated inner fma\n"
    "   keeps -0's sign): bit for bit where |v / s| >= 2^-10, the same E4M3 / int8 codes everywhere, for the scale\n"
    "   of a range whose amax is at least 2^-80 (qc_rcp_of; test_quo_unit, docs/decisions.md) */\n"
    "__device__ __forceinline__ float qc_quo(float v, float s, float rs) {\n"
    "    const float q0 = __fmul_rn(v, rs);\n"
    "    return __fmaf_rn(-__fmaf_rn(q0, s, -v), rs, q0);\n"
    "}\n"
    "/* rs for qc_quo from the amax a of the range and its scale s, or 0: divide (amax below 2^-80 or NaN; an\n"
    "   infinite amax has s = inf, rs = 0) */\n"
    "__device__ __forceinline__ float qc_rcp_of(float a, float s) {\n"
    "    return a >= 0x1p-80f ? __frcp_rn(s) : 0.f;\n"
    "}\n"
    "/* int8 code of q = v / sx as w8a8_int8's qc_code: clamp, nearest even */\n"
    "__device__ __forceinline__ unsigned qc_i8c(float q) {\n"
    "    return (unsigned)(int)rintf(fminf(fmaxf(q, -127.f), 127.f)) & 0xFFu;\n"
    "}\n"
    "__device__ __forceinline__ unsigned qc_i8x4(float4 v, float s, float rs) {\n"
    "    if (rs != 0.f) /* uniform over the row */\n"
    "        return qc_i8c(qc_quo(v.x, s, rs)) | qc_i8c(qc_quo(v.y, s, rs)) << 8 | qc_i8c(qc_quo(v.z, s, rs)) << 16 |\n"
    "               qc_i8c(qc_quo(v.w, s, rs)) << 24;\n"
    "    return qc_i8c(__fdiv_rn(v.x, s)) | qc_i8c(__fdiv_rn(v.y, s)) << 8 | qc_i8c(__fdiv_rn(v.z, s)) << 16 |\n"
    "           qc_i8c(__fdiv_rn(v.w, s)) << 24;\n"
    "}\n"
    "__device__ __forceinline__ float qc_amax4(float4 v, float a) {\n"
    "    return fmaxf(fmaxf(fmaxf(a, fabsf(v.x)), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));\n"
    "}\n"
    "/* the E4M3 codes of v / s; rs: qc_rcp_of */\n"
    "__device__ __forceinline__ unsigned qc_e4m3x4(float4 v, float s, float rs) {\n"
    "    if (rs != 0.f) /* uniform over the row or group */\n"
    "        return qc_e4m3c(qc_quo(v.x, s, rs)) | qc_e4m3c(qc_quo(v.y, s, rs)) << 8 |\n"
    "               qc_e4m3c(qc_quo(v.z, s, rs)) << 16 | qc_e4m3c(qc_quo(v.w, s, rs)) << 24;\n"
    "    return qc_e4m3c(__fdiv_rn(v.x, s)) | qc_e4m3c(__fdiv_rn(v.y, s)) << 8 | qc_e4m3c(__fdiv_rn(v.z, s)) << 16 |\n"
    "           qc_e4m3c(__fdiv_rn(v.w, s)) << 24;\n"
    "}\n"
    "/* The quantizing epilogue's pieces, shared by the register (qc_row_out) and staged (qc_swiglu_staged) paths. */\n"
    "__device__ __forceinline__ int qc_nonfinite4(float4 v) {\n"
    "    return !isfinite(v.x) | !isfinite(v.y) | !isfinite(v.z) | !isfinite(v.w);\n"
    "}\n"
    "/* the row's per-token scale from this thread's amax a (every thread of the block calls it: a block max); int8:\n"
    "   bad becomes the block's non-finite flag; thread 0 stores the scale to *xs_r (int8 with bad: NaN); rs: the\n"
    "   scale's qc_rcp_of */\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ float qc_token_scale(float a, int &bad, float *xs_r, float &rs) {\n"
    "    a = qc_bmax(a);\n"
    "    if (MODE == QC_M_INT8_TOKEN) bad = __syncthreads_or(bad);\n"
    "    float s;\n"
    "    if (MODE == QC_M_E4M3_TOKEN) {\n"
    "        s = __fdiv_rn(a, 448.0f);\n"
    "        s = s > 0.f ? s : 1.f;\n"
    "    } else {\n"
    "        s = __fdiv_rn(a, 127.f);\n"
    "        if (!(s > 0.f)) s = 1.f;\n"
    "    }\n"
    "    if (threadIdx.x == 0) *xs_r = MODE == QC_M_INT8_TOKEN && bad ? __int_as_float(0x7fc00000) : s;\n"
    "    rs = qc_rcp_of(a, s);\n"
    "    return s;\n"
    "}\n"
    "/* a chunk's 4 codes at the per-token scale s (int8: zeros when the row had a non-finite value) */\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ unsigned qc_token_code(float4 v, float s, float rs, int bad) {\n"
    "    if (MODE == QC_M_E4M3_TOKEN) return qc_e4m3x4(v, s, rs);\n"
    "    return bad ? 0u : qc_i8x4(v, s, rs);\n"
    "}\n"
    "/* chunk j of an E4M3 group of 128, the group being the warp's 32 consecutive chunks (the last may be short;\n"
    "   live: chunk j exists): the group's scale from the warp's amax, chunk j's codes, and the group's first lane\n"
    "   stores the scale (xs_r: the row's scales) */\n"
    "__device__ __forceinline__ void qc_g128_code(float4 v, bool live, long long j, unsigned *qr, float *xs_r) {\n"
    "    float a = live ? qc_amax4(v, 0.f) : 0.f;\n"
    "    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));\n"
    "    float s = __fdiv_rn(a, 448.0f);\n"
    "    s = s > 0.f ? s : 1.f;\n"
    "    if (live) {\n"
    "        qr[j] = qc_e4m3x4(v, s, qc_rcp_of(a, s));\n"
    "        if ((j & 31) == 0) xs_r[j >> 5] = s;\n"
    "    }\n"
    "}\n"
    "/* 4 bf16 values (a uint2, low half first) as floats */\n"
    "__device__ __forceinline__ float4 qc_bf4(uint2 pk) {\n"
    "    return make_float4(qc_bf(pk.x & 0xFFFFu), qc_bf(pk.x >> 16), qc_bf(pk.y & 0xFFFFu), qc_bf(pk.y >> 16));\n"
    "}\n"
    "/* v[c] = y as f32 (chunk c * T + tid): write y, its bf16 copy, and with MODE the codes and\n"
    "   scales of the bf16 values; v is left holding the bf16 values */\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ void qc_row_out(float4 (&v)[QC_VPT], long long r, long long n, float *y,\n"
    "                                           unsigned short *yb, unsigned char *xq, float *xs) {\n"
    "    const int T = blockDim.x, tid = threadIdx.x;\n"
    "    const long long nc = n >> 2;\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) {\n"
    "            if (y) ((float4 *)(y + r * n))[j] = v[c];\n"
    "            unsigned short b0 = qc_tobf(v[c].x), b1 = qc_tobf(v[c].y), b2 = qc_tobf(v[c].z), b3 = qc_tobf(v[c].w);\n"
    "            if (yb) ((uint2 *)(yb + r * n))[j] = make_uint2(b0 | (unsigned)b1 << 16, b2 | (unsigned)b3 << 16);\n"
    "            v[c] = make_float4(qc_bf(b0), qc_bf(b1), qc_bf(b2), qc_bf(b3));\n"
    "        }\n"
    "    }\n"
    "    if (MODE == 0) return;\n"
    "    unsigned *qr = (unsigned *)(xq + r * n);\n"
    "    if (MODE == QC_M_E4M3_G128) {\n"
    "        /* a warp's 32 chunks of one slot are one group of 128 (the last may be short) */\n"
    "        const long long ng = (n + 127) >> 7;\n"
    "#pragma unroll\n"
    "        for (int c = 0; c < QC_VPT; c++) {\n"
    "            long long j = (long long)c * T + tid;\n"
    "            if ((long long)c * T >= nc) break; /* uniform over the block */\n"
    "            qc_g128_code(v[c], j < nc, j, qr, xs + r * ng);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    float a = 0.f;\n"
    "    int bad = 0;\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) {\n"
    "            a = qc_amax4(v[c], a);\n"
    "            if (MODE == QC_M_INT8_TOKEN) bad |= qc_nonfinite4(v[c]);\n"
    "        }\n"
    "    }\n"
    "    float rs;\n"
    "    const float s = qc_token_scale<MODE>(a, bad, xs + r, rs);\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) {\n"
    "            qr[j] = qc_token_code<MODE>(v[c], s, rs, bad);\n"
    "        }\n"
    "    }\n"
    "}\n"
    "__device__ __forceinline__ bool qc_al16(const void *p) { return ((unsigned long long)p & 15ull) == 0; }\n"
    "\n"
    "/* output row r, source row s = idx ? idx[r] : r: x[s] += h[s] (h may be\n"
    "   null), y[r] = x[s] / sqrt(mean(x[s]^2) + eps) * w, yb[r] = bf16(y[r]);\n"
    "   y, yb may be null; MODE > 0: xq/xs from yb's values (the fused kernels) */\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ void qc_add_rmsnorm_t(float *x, const float *h, const float *w, float *y,\n"
    "                                                 unsigned short *yb, const int *idx, unsigned char *xq,\n"
    "                                                 float *xs, long long m, long long n, float eps) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    const int T = blockDim.x, tid = threadIdx.x;\n"
    "    const long long nc = n >> 2;\n"
    "    const bool vec = !(n & 3) && nc <= (long long)QC_VPT * T && qc_al16(x) && qc_al16(h) && qc_al16(w) &&\n"
    "                     qc_al16(y) && qc_al16(yb);\n"
    "    /* the norm's weights (no kernel writes them) are loaded before the grid wait, under the tail of the\n"
    "       kernel before (QC_KERNEL_GRID_DEP): the second memory round trip of the row is off the chain */\n"
    "    float4 gw[QC_VPT];\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (vec && j < nc) gw[c] = ((const float4 *)w)[j];\n"
    "    }\n"
    "    qc_grid_dep();\n"
    "    long long s = idx ? idx[r] : r;\n"
    "    float *xr = x + s * n;\n"
    "    const float *hr = h ? h + s * n : 0;\n"
    "    if (!vec) {\n"
    "        if (MODE) { /* never launched so (qc_fuse_decide): say so in the scale */\n"
    "            if (tid == 0) xs[r] = __int_as_float(0x7fc00000);\n"
    "            return;\n"
    "        }\n"
    "        float ss = 0.f;\n"
    "        for (long long i = tid; i < n; i += T) {\n"
    "            float v = xr[i];\n"
    "            if (hr) { v += hr[i]; xr[i] = v; }\n"
    "            ss = fmaf(v, v, ss);\n"
    "        }\n"
    "        ss = qc_bsum(ss);\n"
    "        float inv = 1.0f / sqrtf(ss / (float)n + eps);\n"
    "        for (long long i = tid; i < n; i += T) {\n"
    "            float v = xr[i] * inv * w[i];\n"
    "            if (y) y[r * n + i] = v;\n"
    "            if (yb) yb[r * n + i] = qc_tobf(v);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    float4 v[QC_VPT];\n"
    "    float ss = 0.f;\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) {\n"
    "            float4 a = ((const float4 *)xr)[j];\n"
    "            if (hr) {\n"
    "                float4 b = ((const float4 *)hr)[j];\n"
    "                a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;\n"
    "                ((float4 *)xr)[j] = a;\n"
    "            }\n"
    "            ss = fmaf(a.x, a.x, ss), ss = fmaf(a.y, a.y, ss), ss = fmaf(a.z, a.z, ss), ss = fmaf(a.w, a.w, ss);\n"
    "            v[c] = a;\n"
    "        }\n"
    "    }\n"
    "    ss = qc_bsum(ss);\n"
    "    float inv = 1.0f / sqrtf(ss / (float)n + eps);\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) {\n"
    "            const float4 g = gw[c];\n"
    "            v[c] = make_float4(v[c].x * inv * g.x, v[c].y * inv * g.y, v[c].z * inv * g.z, v[c].w * inv * g.w);\n"
    "        }\n"
    "    }\n"
    "    qc_row_out<MODE>(v, r, n, y, yb, xq, xs);\n"
    "}\n"
    "#ifdef QC_ROW_NORM\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_add_rmsnorm(float *x, const float *h, const float *w,\n"
    "                                                               float *y, unsigned short *yb, const int *idx,\n"
    "                                                               long long m, long long n, float eps) {\n"
    "    /* QC_KERNEL_GRID_DEP: the template reads only the weights before its qc_grid_dep() */\n"
    "    qc_add_rmsnorm_t<0>(x, h, w, y, yb, idx, 0, 0, m, n, eps);\n"
    "}\n"
    "#endif\n"
    "/* recipe: QC_M_* (the host's qc_fuse_recipe) */\n"
    "#ifdef QC_ROW_NORM_Q\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_add_rmsnorm_quant(float *x, const float *h, const float *w,\n"
    "                                                                     const int *idx, unsigned char *xq, float *xs,\n"
    "                                                                     float *y, unsigned short *yb, long long m,\n"
    "                                                                     long long n, float eps, int recipe) {\n"
    "    /* QC_KERNEL_GRID_DEP: the template reads only the weights before its qc_grid_dep() */\n"
    "    switch (recipe) {\n"
    "    case QC_M_E4M3_TOKEN: qc_add_rmsnorm_t<QC_M_E4M3_TOKEN>(x, h, w, y, yb, idx, xq, xs, m, n, eps); break;\n"
    "    case QC_M_E4M3_G128: qc_add_rmsnorm_t<QC_M_E4M3_G128>(x, h, w, y, yb, idx, xq, xs, m, n, eps); break;\n"
    "    case QC_M_INT8_TOKEN: qc_add_rmsnorm_t<QC_M_INT8_TOKEN>(x, h, w, y, yb, idx, xq, xs, m, n, eps); break;\n"
    "    default: qc_grid_dep(); break;\n"
    "    }\n"
    "}\n"
    "#endif\n"
    "\n"
    "/* y[r][i] = silu(g[r*ld + i]) * u[r*ld + i]; y, yb (the bf16 copy) may be null;\n"
    "   MODE > 0: xq/xs from yb's values (the fused kernels).  A block per row. */\n"
    "__device__ __forceinline__ float qc_silu_mul(float a, float u) { return a / (1.0f + expf(-a)) * u; }\n"
    "/* gate and up are f32, or bf16 bits with bf (a GEMM that wrote its output as bf16, plugin.h's y.bf16); ld and\n"
    "   the indices count elements either way */\n"
    "__device__ __forceinline__ const void *qc_gu_row(const void *p, long long r, long long ld, int bf) {\n"
    "    return (const char *)p + r * ld * (bf ? 2 : 4);\n"
    "}\n"
    "__device__ __forceinline__ float4 qc_gu4(const void *row, long long j, int bf) {\n"
    "    if (!bf) return ((const float4 *)row)[j];\n"
    "    const uint2 v = ((const uint2 *)row)[j];\n"
    "    return make_float4(qc_bf(v.x & 0xFFFFu), qc_bf(v.x >> 16), qc_bf(v.y & 0xFFFFu), qc_bf(v.y >> 16));\n"
    "}\n"
    "__device__ __forceinline__ float qc_gu1(const void *row, long long i, int bf) {\n"
    "    return bf ? qc_bf(((const unsigned short *)row)[i]) : ((const float *)row)[i];\n"
    "}\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ void qc_swiglu_t(const void *g, const void *u, long long ld, float *y,\n"
    "                                            unsigned short *yb, unsigned char *xq, float *xs, long long m,\n"
    "                                            long long n, int bf) {\n"
    "    const int T = blockDim.x, tid = threadIdx.x;\n"
    "    const long long nc = n >> 2;\n"
    "    const bool vec = !(n & 3) && !(ld & 3) && nc <= (long long)QC_VPT * T && qc_al16(g) && qc_al16(u) &&\n"
    "                     qc_al16(y) && qc_al16(yb);\n"
    "    for (long long r = blockIdx.x; r < m; r += gridDim.x) {\n"
    "        const void *gr = qc_gu_row(g, r, ld, bf), *ur = qc_gu_row(u, r, ld, bf);\n"
    "        if (!vec) {\n"
    "            if (MODE) { /* never launched so (qc_fuse_decide): say so in the scale */\n"
    "                if (tid == 0) xs[r] = __int_as_float(0x7fc00000);\n"
    "                continue;\n"
    "            }\n"
    "            for (long long i = tid; i < n; i += T) {\n"
    "                float v = qc_silu_mul(qc_gu1(gr, i, bf), qc_gu1(ur, i, bf));\n"
    "                if (y) y[r * n + i] = v;\n"
    "                if (yb) yb[r * n + i] = qc_tobf(v);\n"
    "            }\n"
    "            continue;\n"
    "        }\n"
    "        float4 v[QC_VPT];\n"
    "#pragma unroll\n"
    "        for (int c = 0; c < QC_VPT; c++) {\n"
    "            long long j = (long long)c * T + tid;\n"
    "            if (j < nc) {\n"
    "                float4 a = qc_gu4(gr, j, bf), b = qc_gu4(ur, j, bf);\n"
    "                v[c] = make_float4(qc_silu_mul(a.x, b.x), qc_silu_mul(a.y, b.y), qc_silu_mul(a.z, b.z),\n"
    "                                   qc_silu_mul(a.w, b.w));\n"
    "            }\n"
    "        }\n"
    "        qc_row_out<MODE>(v, r, n, y, yb, xq, xs);\n"
    "    }\n"
    "}\n"
    "#ifdef QC_ROW_SWIGLU\n"
    "/* without quantization SwiGLU is elementwise: a grid-stride loop over the m x n/4 chunks, so that at batch 1\n"
    "   the row is spread over many SMs instead of one block's (the same arithmetic as qc_swiglu_t) */\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_swiglu_ld(const void *g, const void *u, long long ld,\n"
    "                                                            float *y, unsigned short *yb, long long m,\n"
    "                                                            long long n, int bf) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    const long long stride = (long long)gridDim.x * blockDim.x, first = (long long)blockIdx.x * blockDim.x +\n"
    "                                                                         threadIdx.x;\n"
    "    if (!(n & 3) && !(ld & 3) && qc_al16(g) && qc_al16(u) && qc_al16(y) && qc_al16(yb)) {\n"
    "        const long long nc = n >> 2;\n"
    "        for (long long i = first; i < m * nc; i += stride) {\n"
    "            const long long r = i / nc, j = i - r * nc;\n"
    "            const float4 a = qc_gu4(qc_gu_row(g, r, ld, bf), j, bf), b = qc_gu4(qc_gu_row(u, r, ld, bf), j, bf);\n"
    "            const float4 v = make_float4(qc_silu_mul(a.x, b.x), qc_silu_mul(a.y, b.y), qc_silu_mul(a.z, b.z),\n"
    "                                         qc_silu_mul(a.w, b.w));\n"
    "            if (y) ((float4 *)(y + r * n))[j] = v;\n"
    "            if (yb)\n"
    "                ((uint2 *)(yb + r * n))[j] = make_uint2(qc_tobf(v.x) | (unsigned)qc_tobf(v.y) << 16,\n"
    "                                                        qc_tobf(v.z) | (unsigned)qc_tobf(v.w) << 16);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    for (long long i = first; i < m * n; i += stride) {\n"
    "        const long long r = i / n, c = i - r * n;\n"
    "        const float v = qc_silu_mul(qc_gu1(qc_gu_row(g, r, ld, bf), c, bf), qc_gu1(qc_gu_row(u, r, ld, bf), c, bf));\n"
    "        if (y) y[r * n + c] = v;\n"
    "        if (yb) yb[r * n + c] = qc_tobf(v);\n"
    "    }\n"
    "}\n"
    "#endif\n"
    "#ifdef QC_ROW_SWIGLU_Q\n"
    "/* SwiGLU + quantization of many rows (prefill): a row's bf16 values are staged in shared memory\n"
    "   (2n bytes, given as the launch's dynamic shared memory) instead of registers, so a block is 256\n"
    "   threads whatever n and four rows share an SM (the entry's 64 registers a thread allow four blocks of\n"
    "   256): one row's reduction and stores overlap another's loads (the register kernel holds a row in up to\n"
    "   1024 threads, two rows an SM).  Pass 1 streams g and u, QC_STAGE_U chunks of 4 a thread in flight (2:\n"
    "   the 64-register cap; four blocks of 256 an SM still have ~64 KB in flight); pass 2 codes the staged\n"
    "   values.  The same arithmetic as qc_swiglu_t and qc_row_out, so the same bits.  BF (bf16 gate / up):\n"
    "   twice the chunks in flight, since each load is 8 bytes, not 16: the same bytes and registers. */\n"
    "#ifndef QC_STAGE_U\n"
    "#define QC_STAGE_U 2\n"
    "#endif\n"
    "template <int MODE, int BF>\n"
    "__device__ __forceinline__ void qc_swiglu_staged(const void *g, const void *u, long long ld, float *y,\n"
    "                                                 unsigned short *yb, unsigned char *xq, float *xs, long long m,\n"
    "                                                 long long n) {\n"
    "    constexpr int U = BF ? 2 * QC_STAGE_U : QC_STAGE_U, bf = BF;\n"
    "    extern __shared__ uint2 qc_row_stage[]; /* chunk j's 4 bf16 values */\n"
    "    const int T = blockDim.x, tid = threadIdx.x;\n"
    "    const long long nc = n >> 2;\n"
    "    for (long long r = blockIdx.x; r < m; r += gridDim.x) {\n"
    "        const void *gr = qc_gu_row(g, r, ld, bf), *ur = qc_gu_row(u, r, ld, bf);\n"
    "        float a = 0.f;\n"
    "        int bad = 0;\n"
    "        for (long long j0 = tid; j0 < nc; j0 += (long long)U * T) {\n"
    "            float4 ga[BF ? 1 : U], ua[BF ? 1 : U]; /* f32 chunks, or the bf16 bits until used: */\n"
    "            uint2 gb[BF ? U : 1], ub[BF ? U : 1];  /* 2 registers a chunk either way */\n"
    "#pragma unroll\n"
    "            for (int q = 0; q < U; q++) {\n"
    "                const long long j = j0 + (long long)q * T;\n"
    "                if (j < nc && BF) gb[q] = ((const uint2 *)gr)[j], ub[q] = ((const uint2 *)ur)[j];\n"
    "                else if (j < nc) ga[q] = ((const float4 *)gr)[j], ua[q] = ((const float4 *)ur)[j];\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int q = 0; q < U; q++) {\n"
    "                const long long j = j0 + (long long)q * T;\n"
    "                if (j >= nc) break;\n"
    "                const float4 gq = BF ? qc_bf4(gb[q]) : ga[q], uq = BF ? qc_bf4(ub[q]) : ua[q];\n"
    "                const float4 v = make_float4(qc_silu_mul(gq.x, uq.x), qc_silu_mul(gq.y, uq.y),\n"
    "                                             qc_silu_mul(gq.z, uq.z), qc_silu_mul(gq.w, uq.w));\n"
    "                if (y) ((float4 *)(y + r * n))[j] = v;\n"
    "                const unsigned short b0 = qc_tobf(v.x), b1 = qc_tobf(v.y), b2 = qc_tobf(v.z), b3 = qc_tobf(v.w);\n"
    "                const uint2 pk = make_uint2(b0 | (unsigned)b1 << 16, b2 | (unsigned)b3 << 16);\n"
    "                if (yb) ((uint2 *)(yb + r * n))[j] = pk;\n"
    "                qc_row_stage[j] = pk;\n"
    "                const float4 vb = make_float4(qc_bf(b0), qc_bf(b1), qc_bf(b2), qc_bf(b3));\n"
    "                a = qc_amax4(vb, a);\n"
    "                if (MODE == QC_M_INT8_TOKEN) bad |= qc_nonfinite4(vb);\n"
    "            }\n"
    "        }\n"
    "        unsigned *qr = (unsigned *)(xq + r * n);\n"
    "        if (MODE == QC_M_E4M3_G128) {\n"
    "            __syncthreads(); /* the stage is complete */\n"
    "            /* a warp's 32 consecutive chunks are one group of 128 (the last may be short); whole warps loop */\n"
    "            const long long ng = (n + 127) >> 7;\n"
    "            for (long long j = tid; j - (tid & 31) < nc; j += T)\n"
    "                qc_g128_code(j < nc ? qc_bf4(qc_row_stage[j]) : make_float4(0.f, 0.f, 0.f, 0.f), j < nc, j, qr,\n"
    "                             xs + r * ng);\n"
    "        } else {\n"
    "            float rs;\n"
    "            const float sc = qc_token_scale<MODE>(a, bad, xs + r, rs); /* its barriers also complete the stage */\n"
    "            for (long long j = tid; j < nc; j += T)\n"
    "                qr[j] = qc_token_code<MODE>(qc_bf4(qc_row_stage[j]), sc, rs, bad);\n"
    "        }\n"
    "        __syncthreads(); /* the next row's pass 1 overwrites the stage */\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_swiglu_quant(const void *g, const void *u, long long ld,\n"
    "                                                                unsigned char *xq, float *xs, float *y,\n"
    "                                                                unsigned short *yb, long long m, long long n,\n"
    "                                                                int recipe, int bf) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    /* the host gives a stage of the whole row (swiglu_q_dims) only when every access is 16-byte aligned */\n"
    "    unsigned stage;\n"
    "    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(stage));\n"
    "    if (n > 0 && (long long)stage >= 2 * n && !(n & 3) && !(ld & 3) && qc_al16(g) && qc_al16(u) && qc_al16(y) &&\n"
    "        qc_al16(yb) && qc_al16(xq)) {\n"
    "        switch (recipe) {\n"
    "        case QC_M_E4M3_TOKEN:\n"
    "            if (bf) qc_swiglu_staged<QC_M_E4M3_TOKEN, 1>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            else qc_swiglu_staged<QC_M_E4M3_TOKEN, 0>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            break;\n"
    "        case QC_M_E4M3_G128:\n"
    "            if (bf) qc_swiglu_staged<QC_M_E4M3_G128, 1>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            else qc_swiglu_staged<QC_M_E4M3_G128, 0>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            break;\n"
    "        case QC_M_INT8_TOKEN:\n"
    "            if (bf) qc_swiglu_staged<QC_M_INT8_TOKEN, 1>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            else qc_swiglu_staged<QC_M_INT8_TOKEN, 0>(g, u, ld, y, yb, xq, xs, m, n);\n"
    "            break;\n"
    "        default: break;\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    switch (recipe) {\n"
    "    case QC_M_E4M3_TOKEN: qc_swiglu_t<QC_M_E4M3_TOKEN>(g, u, ld, y, yb, xq, xs, m, n, bf); break;\n"
    "    case QC_M_E4M3_G128: qc_swiglu_t<QC_M_E4M3_G128>(g, u, ld, y, yb, xq, xs, m, n, bf); break;\n"
    "    case QC_M_INT8_TOKEN: qc_swiglu_t<QC_M_INT8_TOKEN>(g, u, ld, y, yb, xq, xs, m, n, bf); break;\n"
    "    default: break;\n"
    "    }\n"
    "}\n"
    "#endif\n"
    "\n"
    "/* yb = bf16(x) (may be null) and xq/xs from those values (recipe: QC_M_*), a block per row: the\n"
    "   attention output's cast and quantizer in one pass */\n"
    "template <int MODE>\n"
    "__device__ __forceinline__ void qc_cast_quant_t(const float *x, unsigned short *yb, unsigned char *xq, float *xs,\n"
    "                                                long long m, long long n) {\n"
    "    long long r = blockIdx.x;\n"
    "    if (r >= m) return;\n"
    "    const int T = blockDim.x, tid = threadIdx.x;\n"
    "    const long long nc = n >> 2;\n"
    "    if ((n & 3) || nc > (long long)QC_VPT * T || !qc_al16(x) || !qc_al16(yb)) {\n"
    "        if (tid == 0) xs[r] = __int_as_float(0x7fc00000); /* never launched so (qc_fuse_decide) */\n"
    "        return;\n"
    "    }\n"
    "    float4 v[QC_VPT];\n"
    "#pragma unroll\n"
    "    for (int c = 0; c < QC_VPT; c++) {\n"
    "        long long j = (long long)c * T + tid;\n"
    "        if (j < nc) v[c] = ((const float4 *)(x + r * n))[j];\n"
    "    }\n"
    "    qc_row_out<MODE>(v, r, n, 0, yb, xq, xs);\n"
    "}\n"
    "#ifdef QC_ROW_CAST_Q\n"
    "extern \"C\" __global__ void __launch_bounds__(1024) qc_cast_quant(const float *x, unsigned char *xq, float *xs,\n"
    "                                                              unsigned short *yb, long long m, long long n,\n"
    "                                                              int recipe) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    switch (recipe) {\n"
    "    case QC_M_E4M3_TOKEN: qc_cast_quant_t<QC_M_E4M3_TOKEN>(x, yb, xq, xs, m, n); break;\n"
    "    case QC_M_E4M3_G128: qc_cast_quant_t<QC_M_E4M3_G128>(x, yb, xq, xs, m, n); break;\n"
    "    case QC_M_INT8_TOKEN: qc_cast_quant_t<QC_M_INT8_TOKEN>(x, yb, xq, xs, m, n); break;\n"
    "    default: break;\n"
    "    }\n"
    "}\n"
    "#endif\n";

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
            float v = xr[i] * inv * w[i];
            if (y) y[r * n + i] = v;
            if (yb) yb[r * n + i] = qc_f32_to_bf16(v);
        }
    }
}

/* One row of bf16 values quantized with a recipe of plugin.h (QC_FUSE_*), with
 * the arithmetic the fp8 and w8a8_int8 plugins' references use. */
static void quant_row_ref(int recipe, const uint16_t *b, int64_t n, uint8_t *q, float *xs) {
    if (recipe == QC_FUSE_INT8_TOKEN) {
        float a = 0.f;
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = qc_bf16_to_f32(b[i]);
            bad |= !isfinite(v);
            if (fabsf(v) > a) a = fabsf(v);
        }
        float sx = a / 127.0f;
        if (!(sx > 0.0f)) sx = 1.0f;
        for (int64_t i = 0; i < n; i++) {
            float t = bad ? 0.f : qc_bf16_to_f32(b[i]) / sx;
            t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
            q[i] = (uint8_t)(int8_t)rintf(t); /* nearest even in the default rounding mode */
        }
        xs[0] = bad ? NAN : sx;
        return;
    }
    int64_t gs = recipe == QC_FUSE_E4M3_G128 ? 128 : n;
    for (int64_t t0 = 0, g = 0; t0 < n; t0 += gs, g++) {
        int64_t t1 = t0 + gs < n ? t0 + gs : n;
        float a = 0.f;
        for (int64_t i = t0; i < t1; i++) {
            float v = fabsf(qc_bf16_to_f32(b[i]));
            if (v > a) a = v; /* NaN never wins */
        }
        float s = a / 448.0f;
        s = s > 0.f ? s : 1.f;
        xs[g] = s;
        for (int64_t i = t0; i < t1; i++) q[i] = qc_fp8_e4m3_encode(qc_bf16_to_f32(b[i]) / s);
    }
}

/* Scales per row a recipe writes. */
static int64_t scales_per_row(int recipe, int64_t n) { return recipe == QC_FUSE_E4M3_G128 ? (n + 127) / 128 : 1; }

static void add_rmsnorm_quant_ref(float *x, const float *h, const float *w, const int32_t *idx, uint8_t *xq,
                                  float *xs, float *y, uint16_t *yb, int64_t m, int64_t n, float eps,
                                  int32_t recipe) {
    uint16_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    float *yr = malloc((size_t)(n > 0 ? n : 1) * sizeof *yr);
    if (!b || !yr || recipe < QC_FUSE_E4M3_TOKEN || recipe > QC_FUSE_INT8_TOKEN) { /* no error channel: NaN scales */
        for (int64_t r = 0; r < m && xs; r++)
            for (int64_t g = 0; g < scales_per_row(recipe, n); g++) xs[r * scales_per_row(recipe, n) + g] = NAN;
        free(b), free(yr);
        return;
    }
    for (int64_t r = 0; r < m; r++) {
        int32_t s = idx ? idx[r] : (int32_t)r;
        add_rmsnorm_ref(x, h, w, yr, b, &s, 1, n, eps); /* x[s] updated in place, as the kernel does */
        if (y) memcpy(y + r * n, yr, (size_t)n * sizeof *yr);
        if (yb) memcpy(yb + r * n, b, (size_t)n * sizeof *b);
        quant_row_ref(recipe, b, n, xq + r * n, xs + r * scales_per_row(recipe, n));
    }
    free(b), free(yr);
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

/* gate / up element r * ld + i: f32, or bf16 bits when bf (the kernels' in_bf16) */
static float gu_at(const void *p, int64_t idx, int32_t bf) {
    return bf ? qc_bf16_to_f32(((const uint16_t *)p)[idx]) : ((const float *)p)[idx];
}

static void swiglu_ld_ref(const void *g, const void *u, int64_t ld, float *y, uint16_t *yb, int64_t m, int64_t n,
                          int32_t bf) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < n; i++) {
            float a = gu_at(g, r * ld + i, bf);
            float v = a / (1.0f + expf(-a)) * gu_at(u, r * ld + i, bf);
            if (y) y[r * n + i] = v;
            if (yb) yb[r * n + i] = qc_f32_to_bf16(v);
        }
}

static void swiglu_quant_ref(const void *g, const void *u, int64_t ld, uint8_t *xq, float *xs, float *y,
                             uint16_t *yb, int64_t m, int64_t n, int32_t recipe, int32_t bf) {
    uint16_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    float *yr = malloc((size_t)(n > 0 ? n : 1) * sizeof *yr);
    if (!b || !yr || recipe < QC_FUSE_E4M3_TOKEN || recipe > QC_FUSE_INT8_TOKEN) {
        for (int64_t r = 0; r < m && xs; r++)
            for (int64_t k = 0; k < scales_per_row(recipe, n); k++) xs[r * scales_per_row(recipe, n) + k] = NAN;
        free(b), free(yr);
        return;
    }
    for (int64_t r = 0; r < m; r++) {
        const size_t row = (size_t)(r * ld) * (bf ? 2 : 4);
        swiglu_ld_ref((const char *)g + row, (const char *)u + row, ld, yr, b, 1, n, bf);
        if (y) memcpy(y + r * n, yr, (size_t)n * sizeof *yr);
        if (yb) memcpy(yb + r * n, b, (size_t)n * sizeof *b);
        quant_row_ref(recipe, b, n, xq + r * n, xs + r * scales_per_row(recipe, n));
    }
    free(b), free(yr);
}

static void cast_quant_ref(const float *x, uint8_t *xq, float *xs, uint16_t *yb, int64_t m, int64_t n,
                           int32_t recipe) {
    uint16_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    if (!b || recipe < QC_FUSE_E4M3_TOKEN || recipe > QC_FUSE_INT8_TOKEN) {
        for (int64_t r = 0; r < m && xs; r++)
            for (int64_t k = 0; k < scales_per_row(recipe, n); k++) xs[r * scales_per_row(recipe, n) + k] = NAN;
        free(b);
        return;
    }
    for (int64_t r = 0; r < m; r++) {
        for (int64_t i = 0; i < n; i++) b[i] = qc_f32_to_bf16(x[r * n + i]);
        if (yb) memcpy(yb + r * n, b, (size_t)n * sizeof *b);
        quant_row_ref(recipe, b, n, xq + r * n, xs + r * scales_per_row(recipe, n));
    }
    free(b);
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

/* m rows of n held in registers (add_rmsnorm, swiglu): a block per row, about
 * QC_VPT (4) chunks of 4 floats per thread, whole warps, 32 to 1024 threads
 * (keep in step with QC_VPT in the source) */
static void vec_rows_dims(const qc_problem *p, qc_launch_dims *d) {
    int64_t chunks = p->n > 0 ? (p->n + 3) / 4 : 1, t = (chunks + QC_FUSE_VPT - 1) / QC_FUSE_VPT;
    t = (t + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > 1024) t = 1024;
    dims(d, p->m > 0 && p->m <= ROWS_MAX ? (uint32_t)p->m : 0, 1, (uint32_t)t);
}

/* swiglu_quant: with many rows (m >= QC_ROW_STAGE_M) and n % 4 == 0, 256 threads a row and the row's bf16
 * values staged in 2n bytes of shared memory (qc_swiglu_staged; the kernel takes that path only when the
 * stage is there and its pointers are aligned); else a row in registers (vec_rows_dims) */
#define QC_ROW_STAGE_M 256
static void swiglu_q_dims(const qc_problem *p, qc_launch_dims *d) {
    if (p->m >= QC_ROW_STAGE_M && p->m <= ROWS_MAX && p->n > 0 && p->n % 4 == 0 && p->n * 2 <= 48 * 1024) {
        dims(d, (uint32_t)p->m, 1, 256);
        d->shared_bytes = (uint32_t)(p->n * 2);
        return;
    }
    vec_rows_dims(p, d);
}

/* m rows of n elementwise, a chunk of 4 per thread (swiglu_ld's grid-stride loop takes any grid) */
static void chunk_dims(const qc_problem *p, qc_launch_dims *d) {
    dims(d, blocks_for(p->m > 0 && p->n > 0 ? p->m * ((p->n + 3) / 4) : 0, 256), 1, 256);
}

/* m tokens, n = heads + kv_heads, k = head_dim: with d % 8 == 0 and d / 8 a power of two up to 32 (the
 * kernel's qc_qkv_vec), 128 threads hold 128 / (d / 8) heads of one token; else a block per (token, head) */
static void qkv_dims(const qc_problem *p, qc_launch_dims *d) {
    uint32_t gx = p->m > 0 && p->m <= ROWS_MAX ? (uint32_t)p->m : 0;
    int64_t t = p->k / 8;
    if (p->k > 0 && p->k % 8 == 0 && p->k <= 256 && (t & (t - 1)) == 0) {
        int64_t per = 128 / t;
        dims(d, gx, p->n > 0 ? (uint32_t)((p->n + per - 1) / per) : 0, 128);
        return;
    }
    uint32_t half = p->k >= 2 ? (uint32_t)(p->k / 2) : 0;
    dims(d, gx, p->n > 0 ? (uint32_t)p->n : 0, (half + 31) / 32 * 32);
}

/* m * n elements */
static void elem_dims(const qc_problem *p, qc_launch_dims *d) {
    dims(d, blocks_for(p->m * (p->n > 0 ? p->n : 1), 256), 1, 256);
}
/* m * n elements, 4 a thread (qc_cast_bf16) */
static void elem4_dims(const qc_problem *p, qc_launch_dims *d) {
    dims(d, blocks_for((p->m * (p->n > 0 ? p->n : 1) + 3) / 4, 256), 1, 256);
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
static const qc_kernel_param ADD_RMSNORM_Q_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"h", QC_PARAM_PTR},      {"weight", QC_PARAM_PTR}, {"idx", QC_PARAM_PTR},
    {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR},    {"y", QC_PARAM_PTR},      {"y.bf16", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},      {"eps", QC_PARAM_F32},    {"recipe", QC_PARAM_I32},
};
static const qc_kernel_param SWIGLU_Q_PARAMS[] = {
    {"gate", QC_PARAM_PTR}, {"up", QC_PARAM_PTR},     {"ld", QC_PARAM_I64}, {"xq", QC_PARAM_PTR},
    {"xs", QC_PARAM_PTR},   {"y", QC_PARAM_PTR},      {"y.bf16", QC_PARAM_PTR}, {"m", QC_PARAM_I64},
    {"n", QC_PARAM_I64},    {"recipe", QC_PARAM_I32}, {"in_bf16", QC_PARAM_I32},
};
static const qc_kernel_param CAST_Q_PARAMS[] = {
    {"x", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR},    {"y.bf16", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},  {"recipe", QC_PARAM_I32},
};
static const qc_kernel_param SWIGLU_LD_PARAMS[] = {
    {"gate", QC_PARAM_PTR},   {"up", QC_PARAM_PTR}, {"ld", QC_PARAM_I64}, {"y", QC_PARAM_PTR},
    {"y.bf16", QC_PARAM_PTR}, {"m", QC_PARAM_I64},  {"n", QC_PARAM_I64}, {"in_bf16", QC_PARAM_I32},
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

/* a row kernel: ROW_SRC built with its entry's macro only */
static qc_kernel_desc row_kernel(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                 void (*reference)(void), const char *entry, const char *const *options) {
    qc_kernel_desc k = qc_core_kernel_desc(id, params, n_params, reference, ROW_SRC, entry, vec_rows_dims);
    k.nvrtc_options = options;
    return qc_core_grid_dep(k); /* every row entry calls qc_grid_dep() before it reads more than weights */
}
/* the same with its own geometry */
static qc_kernel_desc row_kernel_dims(qc_kernel_desc k, void (*launch)(const qc_problem *, qc_launch_dims *)) {
    k.launch_dims = launch;
    return k;
}
static const char *const OPT_NORM[] = {"-DQC_ROW_NORM", NULL}, *const OPT_NORM_Q[] = {"-DQC_ROW_NORM_Q", NULL};
static const char *const OPT_SWIGLU[] = {"-DQC_ROW_SWIGLU", NULL}, *const OPT_SWIGLU_Q[] = {"-DQC_ROW_SWIGLU_Q", NULL};
static const char *const OPT_CAST_Q[] = {"-DQC_ROW_CAST_Q", NULL};

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

qc_status qc_engine_kernels_register(const qc_host_api *api, qc_host *host) {
    const qc_kernel_desc ks[] = {
        qc_core_grid_dep(engine_kernel("core.embed_bf16", EMBED_BF16_PARAMS, N_OF(EMBED_BF16_PARAMS),
                                       (void (*)(void))embed_bf16_ref, "qc_embed_bf16", rows_dims)),
        row_kernel("core.add_rmsnorm", ADD_RMSNORM_PARAMS, N_OF(ADD_RMSNORM_PARAMS), (void (*)(void))add_rmsnorm_ref,
                   "qc_add_rmsnorm", OPT_NORM),
        row_kernel("core.add_rmsnorm_quant", ADD_RMSNORM_Q_PARAMS, N_OF(ADD_RMSNORM_Q_PARAMS),
                   (void (*)(void))add_rmsnorm_quant_ref, "qc_add_rmsnorm_quant", OPT_NORM_Q),
        qc_core_grid_dep(engine_kernel("core.qkv_rope_kv", QKV_PARAMS, N_OF(QKV_PARAMS),
                                       (void (*)(void))qkv_rope_kv_ref, "qc_qkv_rope_kv", qkv_dims)),
        row_kernel_dims(row_kernel("core.swiglu_ld", SWIGLU_LD_PARAMS, N_OF(SWIGLU_LD_PARAMS),
                                   (void (*)(void))swiglu_ld_ref, "qc_swiglu_ld", OPT_SWIGLU),
                        chunk_dims),
        row_kernel_dims(row_kernel("core.swiglu_quant", SWIGLU_Q_PARAMS, N_OF(SWIGLU_Q_PARAMS),
                                   (void (*)(void))swiglu_quant_ref, "qc_swiglu_quant", OPT_SWIGLU_Q),
                        swiglu_q_dims),
        row_kernel("core.cast_quant", CAST_Q_PARAMS, N_OF(CAST_Q_PARAMS), (void (*)(void))cast_quant_ref,
                   "qc_cast_quant", OPT_CAST_Q),
        qc_core_grid_dep(engine_kernel("core.cast_bf16", CAST_PARAMS, N_OF(CAST_PARAMS), (void (*)(void))cast_bf16_ref,
                                       "qc_cast_bf16", elem4_dims)),
        engine_kernel("core.fill_random_bf16", FILL_PARAMS, N_OF(FILL_PARAMS), (void (*)(void))fill_random_bf16_ref,
                      "qc_fill_random_bf16", elem_dims),
    };
    qc_status st = QC_OK;
    for (size_t i = 0; st == QC_OK && i < sizeof ks / sizeof ks[0]; i++) st = api->register_kernel(host, &ks[i]);
    return st;
}

/* ---- fused activation quantization: which quantizers the core stands in for ---- */

int qc_fuse_recipe(const char *name) {
    if (!name) return QC_FUSE_NONE;
    if (strcmp(name, QC_ACT_RECIPE_E4M3_TOKEN) == 0) return QC_FUSE_E4M3_TOKEN;
    if (strcmp(name, QC_ACT_RECIPE_E4M3_G128) == 0) return QC_FUSE_E4M3_G128;
    if (strcmp(name, QC_ACT_RECIPE_INT8_TOKEN) == 0) return QC_FUSE_INT8_TOKEN;
    return QC_FUSE_NONE;
}

static int fuse_refuse(qc_reason *why, const char *code, const char *text, const char *id, const char *detail) {
    if (why) {
        qc_strlcpy(why->code, code, sizeof why->code);
        snprintf(why->text, sizeof why->text, "%s: %s%s", id ? id : "(no quantizer)", text, detail ? detail : "");
    }
    return QC_FUSE_NONE;
}

int qc_fuse_decide(const qc_kernel_desc *quant, uint32_t sm, int64_t k, qc_reason *why) {
    if (why) why->code[0] = why->text[0] = 0;
    if (!quant) return fuse_refuse(why, "missing", "no activation quantizer", NULL, NULL);
    /* a descriptor from before the field (the host copies descriptors to full size, zero-filled) */
    const char *name = quant->struct_size >= offsetof(qc_kernel_desc, act_recipe) + sizeof(const char *)
                           ? quant->act_recipe
                           : NULL;
    int recipe = qc_fuse_recipe(name);
    if (!name) return fuse_refuse(why, "recipe", "states no activation recipe (act_recipe)", quant->id, NULL);
    if (recipe == QC_FUSE_NONE)
        return fuse_refuse(why, "recipe", "states a recipe the core does not implement: ", quant->id, name);
    static const char *const plain[] = {"x.bf16", "xq", "xs", "m", "k"};
    for (uint32_t i = 0; i < quant->n_params; i++) {
        int known = 0;
        for (size_t j = 0; j < sizeof plain / sizeof plain[0]; j++) known |= strcmp(quant->params[i].name, plain[j]) == 0;
        if (!known)
            return fuse_refuse(why, "params", "takes an input the fused kernels do not have: ", quant->id,
                               quant->params[i].name);
    }
    if (recipe != QC_FUSE_INT8_TOKEN && sm < 89)
        return fuse_refuse(why, "arch", "E4M3 conversion needs sm_89 or later", quant->id, NULL);
    if (k <= 0 || k % 16 || k > QC_FUSE_N_MAX) {
        char d[64];
        snprintf(d, sizeof d, "%lld", (long long)k);
        return fuse_refuse(why, "shape", "the fused kernels take rows of a multiple of 16 up to 16384, k = ", quant->id,
                           d);
    }
    return recipe;
}
