/* ---- kv_fp8.qkv_rope_kv: core.qkv_rope_kv with K and V stored as FP8 ---- */
__device__ float qc_bsum(float v) {
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) part[wid] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* code of x / s (E4M3) or of x (E5M2); an unknown variant writes the NaN code */
__device__ __forceinline__ u8 qc_kv_code(float x, float s, u32 variant) {
    if (variant == QC_KV_E5M2) return (u8)qc_e5m2(x);
    if (variant > QC_KV_E5M2) return (u8)0x7Fu;
    return (u8)qc_e4m3(x / s); /* IEEE division, as the C reference */
}

/* The core kernel's arithmetic (bias, per-head norm, rotary at pos[r]) with
 * the cache write in FP8: block (token r, head j), j < heads a query head
 * (q_out f32), else kv head j - heads (K rotated, and V) to slot slots[r] of
 * the caches [block][kv_head][16][d] (one byte per element).  k_scale,
 * v_scale: per variant (see qc_kv_scale); E5M2 reads neither. */
extern "C" __global__ void qc_kv_fp8_qkv_rope_kv(const float *qkv, long long ld, const float *bias, float *q_out,
                                                u8 *k_cache, u8 *v_cache, const int *slots, const int *pos,
                                                const float *inv_freq, const float *q_norm, const float *k_norm,
                                                long long m, int heads, int kv_heads, int d, int halves, float eps,
                                                const float *k_scale, const float *v_scale, u32 variant) {
    long long r = blockIdx.x;
    int j = blockIdx.y, i = threadIdx.x, half = d / 2;
    if (r >= m) return;
    bool is_q = j < heads;
    int kvh = j - heads;
    long long col = is_q ? (long long)j * d : (long long)heads * d + (long long)kvh * d;
    const float *src = qkv + r * ld + col;
    bool act = i < half; /* the block is rounded up to whole warps */
    int i0 = halves ? i : 2 * i, i1 = halves ? i + half : 2 * i + 1;
    float a0 = act ? src[i0] : 0.f, a1 = act ? src[i1] : 0.f;
    if (bias && act) { a0 += bias[col + i0]; a1 += bias[col + i1]; }
    const float *nw = is_q ? q_norm : k_norm;
    if (nw) {
        float ss = qc_bsum(a0 * a0 + a1 * a1);
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        if (act) { a0 = a0 * inv * nw[i0]; a1 = a1 * inv * nw[i1]; }
    }
    if (!act) i = 0; /* idle threads still help move v below */
    double ang = (double)pos[r] * (double)inv_freq[i];
    ang -= 6.283185307179586 * rint(ang * 0.15915494309189535);
    float sn, cs;
    sincosf((float)ang, &sn, &cs);
    float o0 = a0 * cs - a1 * sn, o1 = a0 * sn + a1 * cs;
    if (is_q) {
        float *q = q_out + (r * heads + j) * d;
        if (act) { q[i0] = o0; q[i1] = o1; }
        return;
    }
    int slot = slots[r];
    if (slot < 0) return;
    const float ks = variant <= QC_KV_E4M3_HEAD ? qc_kv_scale(k_scale, variant, kvh) : 1.f;
    const float vs_ = variant <= QC_KV_E4M3_HEAD ? qc_kv_scale(v_scale, variant, kvh) : 1.f;
    long long base = (((long long)(slot / QC_KVB) * kv_heads + kvh) * QC_KVB + slot % QC_KVB) * d;
    if (act) { k_cache[base + i0] = qc_kv_code(o0, ks, variant); k_cache[base + i1] = qc_kv_code(o1, ks, variant); }
    i = threadIdx.x;
    long long vcol = (long long)(heads + kv_heads) * d + (long long)kvh * d;
    const float *vsrc = qkv + r * ld + vcol;
    for (int t = i; t < d; t += blockDim.x) {
        float v = vsrc[t] + (bias ? bias[vcol + t] : 0.f);
        v_cache[base + t] = qc_kv_code(v, vs_, variant);
    }
}
