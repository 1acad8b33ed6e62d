/* fp8 activation quantization: x bf16 [m,k] -> xq E4M3 [m,k] + xs f32 scales (per token, per 1x128 group, static) */
/* One block of 256 threads per row; 16-byte loads of 8 bf16, 8-byte stores of 8 codes (k % 16 == 0). */
#define QA_THREADS 256

/* x / s from rs = RN(1 / s) without div.rn's long sequence (Markstein's correction; the negated inner fma keeps
   -0's sign): bit for bit where |x / s| >= 2^-10, the same E4M3 code everywhere, for the scale of a range whose
   amax is at least 2^-80 (as the core's qc_quo; test_quo_unit, docs/decisions.md) */
__device__ __forceinline__ float qc_quo(float x, float s, float rs) {
    const float q0 = __fmul_rn(x, rs);
    return __fmaf_rn(-__fmaf_rn(q0, s, -x), rs, q0);
}
/* rs for qc_quo from the range's amax a and its scale s, or 0: divide (amax below 2^-80; an infinite amax has
   s = inf, rs = 0) */
__device__ __forceinline__ float qc_rcp_of(float a, float s) {
    return a >= 0x1p-80f ? __frcp_rn(s) : 0.f;
}
__device__ __forceinline__ u32 qc_enc2(u32 w, float s, float rs) {
    if (rs != 0.f)
        return qc_e4m3(qc_quo(qc_bf16_f32(w & 0xFFFFu), s, rs)) | qc_e4m3(qc_quo(qc_bf16_f32(w >> 16), s, rs)) << 8;
    return qc_e4m3(__fdiv_rn(qc_bf16_f32(w & 0xFFFFu), s)) | qc_e4m3(__fdiv_rn(qc_bf16_f32(w >> 16), s)) << 8;
}
/* 8 codes of x / s; rs: qc_rcp_of, or 0 */
__device__ __forceinline__ uint2 qc_enc8(uint4 v, float s, float rs) {
    return make_uint2(qc_enc2(v.x, s, rs) | qc_enc2(v.y, s, rs) << 16, qc_enc2(v.z, s, rs) | qc_enc2(v.w, s, rs) << 16);
}

__device__ __forceinline__ void qc_quant_row(const uint4 *xr, uint2 *qr, long long kc, float s, float rs) {
    for (long long c = threadIdx.x; c < kc; c += QA_THREADS) qr[c] = qc_enc8(xr[c], s, rs);
}

#ifdef FP8_QUANT_TOKEN
/* xs[i] = amax(x[i,:]) / 448 */
extern "C" __global__ void __launch_bounds__(QA_THREADS) qc_fp8_quant_act_token(const u16 *x, u8 *xq, float *xs,
                                                                              long long m, long long k) {
    __shared__ float part[QA_THREADS / 32];
    const long long kc = k / 8;
    for (long long i = blockIdx.x; i < m; i += gridDim.x) {
        const uint4 *xr = (const uint4 *)(x + i * k);
        float a = 0.f;
        for (long long c = threadIdx.x; c < kc; c += QA_THREADS) a = qc_amax8(xr[c], a);
        a = qc_warp_max(a);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
        __syncthreads();
        a = part[0];
#pragma unroll
        for (int w = 1; w < QA_THREADS / 32; w++) a = fmaxf(a, part[w]);
        __syncthreads(); /* part is reused by the next row */
        const float s = qc_scale_of(a);
        if (threadIdx.x == 0) xs[i] = s;
        qc_quant_row(xr, (uint2 *)(xq + i * k), kc, s, qc_rcp_of(a, s));
    }
}
#endif

#ifdef FP8_QUANT_STATIC
/* the calibrated scale for every row: xs[i] = act_scale[0] */
extern "C" __global__ void __launch_bounds__(QA_THREADS) qc_fp8_quant_act_static(const u16 *x, const float *act_scale,
                                                                               u8 *xq, float *xs, long long m,
                                                                               long long k) {
    const long long kc = k / 8;
    const float s = act_scale[0];
    for (long long i = blockIdx.x; i < m; i += gridDim.x) {
        if (threadIdx.x == 0) xs[i] = s;
        /* any calibrated scale (x / s may overflow, s be tiny): the division */
        qc_quant_row((const uint4 *)(x + i * k), (uint2 *)(xq + i * k), kc, s, 0.f);
    }
}
#endif

#ifdef FP8_QUANT_GROUP
/* xs[i, g] = amax(x[i, 128g .. 128g+127]) / 448, xs row-major [m, ceil(k/128)]; 16 lanes per group */
extern "C" __global__ void __launch_bounds__(QA_THREADS) qc_fp8_quant_act_group(const u16 *x, u8 *xq, float *xs,
                                                                              long long m, long long k) {
    const long long kc = k / 8, ng = (k + QC_FP8_BLOCK - 1) / QC_FP8_BLOCK;
    for (long long i = blockIdx.x; i < m; i += gridDim.x) {
        const uint4 *xr = (const uint4 *)(x + i * k);
        uint2 *qr = (uint2 *)(xq + i * k);
        /* every thread runs the same trips, so the 16-lane shuffles see their whole group */
        for (long long base = 0; base < ng * 16; base += QA_THREADS) {
            const long long c = base + threadIdx.x;
            const bool ok = c < kc;
            const uint4 v = ok ? xr[c] : make_uint4(0u, 0u, 0u, 0u);
            float a = qc_amax8(v, 0.f);
#pragma unroll
            for (int o = 8; o; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
            const float s = qc_scale_of(a);
            if (ok) {
                qr[c] = qc_enc8(v, s, qc_rcp_of(a, s));
                if ((c & 15) == 0) xs[i * ng + c / 16] = s;
            }
        }
    }
}
#endif
