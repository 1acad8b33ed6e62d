/* fp8 kernels: device helpers shared by every fp8 kernel source (pasted in front of each at build time). */
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
/* CUtensorMap as the driver fills it (NVRTC cannot include cuda.h) */
struct __align__(64) QcTmap { u64 opaque[16]; };

#define QC_E4M3_MAX 448.0f
#define QC_FP8_BLOCK 128

__device__ __forceinline__ float qc_bf16_f32(u32 h) { return __uint_as_float(h << 16); }

/* Scale of a range with absolute maximum amax: amax/448 (IEEE division), 1 for a zero range (docs/formats/fp8.md) */
__device__ __forceinline__ float qc_scale_of(float amax) {
    float s = __fdiv_rn(amax, QC_E4M3_MAX);
    return s > 0.f ? s : 1.f;
}

#if __CUDA_ARCH__ >= 890
/* E4M3 code of v as the C codec gives it: nearest even, saturating, NaN -> 0x7F.  Both halves of the
 * cvt get v, so the result does not depend on which half PTX fills from which operand. */
__device__ __forceinline__ u32 qc_e4m3(float v) {
    u16 r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(r) : "f"(v));
    return v != v ? 0x7Fu : (u32)(r & 0xFFu);
}
/* two E4M3 codes (low byte first) -> f16x2, each exact */
__device__ __forceinline__ u32 qc_e4m3x2_f16x2(u32 two) {
    u32 r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((u16)two));
    return r;
}
#endif

/* E4M3 code -> f32 without the sm_89 conversion: the code's exponent and mantissa placed in an f32,
 * scaled by 2^120 (exact for normals and subnormals: the multiply keeps f32 subnormals) */
__device__ __forceinline__ float qc_e4m3_f32_soft(u32 c) {
    float f = __uint_as_float(((c & 0x80u) << 24) | ((c & 0x7Fu) << 20));
    return f * 1.329227995784915872903807060280344576e36f; /* 2^120 */
}

__device__ __forceinline__ float qc_warp_max(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float qc_amax8(uint4 v, float a) {
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) { /* fmaxf drops NaN, as the C amax does */
        a = fmaxf(a, fabsf(qc_bf16_f32(w[i] & 0xFFFFu)));
        a = fmaxf(a, fabsf(qc_bf16_f32(w[i] >> 16)));
    }
    return a;
}
