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
/* two f32 -> bf16x2 (lo in the low half), nearest even as qc_f32_to_bf16 (plugins/common/qc_bf16.h) for finite
   values; cvt's second operand fills the low half */
__device__ __forceinline__ u32 qc_bf16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

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

/* mma.m16n8k16 f16 x f16 -> f32, accumulating into d (gemv.cu, gemv1_tma.cu) */
__device__ __forceinline__ void qc_mma_f16(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#if __CUDA_ARCH__ >= 900
/* shared-memory address and mbarrier helpers of the Hopper kernels (wgmma.cu, gemv1_tma.cu) */
__device__ __forceinline__ unsigned qc_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void qc_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void qc_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void qc_mbar_arrive(unsigned bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void qc_mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
#endif
