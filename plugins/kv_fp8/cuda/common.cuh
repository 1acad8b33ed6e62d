/* kv_fp8 kernels: device helpers shared by every kv_fp8 kernel source (pasted in front of each at build time). */
/*
 * Copied from (not shared with) the core's bf16 attention (core/src/qc_kernels_attn.c):
 * the FP8 kernels differ in every inner loop (fragment permutations built for
 * 16-byte loads of 8-bit codes, f16 tensor-core products, scales folded into
 * the softmax and the output), so only the shape of the loops is common; the
 * constants and partition formula below must stay equal to the core's where
 * the comments say so (the engine sizes the decode workspace with
 * qc_attn_decode_workspace_bytes).
 */
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define QC_KVB 16 /* tokens per KV block (the core's QC_KV_BLOCK) */
/* decode partitions: QC_DEC_SLOTS, MAX_WAVES, MAX_PARTS and MIN_PART equal the
 * core's (the workspace bound); the CTA's fixed cost is twice the core's in
 * tokens because a token costs half the bytes */
#define QC_DEC_WARPS 4
#define QC_DEC_SLOTS 396
#define QC_DEC_MAX_WAVES 4
#define QC_DEC_CTA_COST 64
#define QC_DEC_MAX_PARTS 64
#define QC_DEC_MIN_PART 64
#define QC_PF_ROWS 64
#define QC_PF_KV 64
#define QC_LOG2E 1.4426950408889634f
#define QC_NEG_INF __int_as_float(0xff800000)
#define QC_F16_MAX 65504.f

/* variants (the plugin's `variant` argument) */
#define QC_KV_E4M3_TENSOR 0u
#define QC_KV_E4M3_HEAD 1u
#define QC_KV_E5M2 2u

__device__ __forceinline__ float qc_nan() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ bool qc_attn_shape_ok(int n_heads, int n_kv_heads, int head_dim) {
    return (head_dim == 64 || head_dim == 128) && n_kv_heads > 0 && n_heads >= n_kv_heads && n_heads % n_kv_heads == 0;
}
/* the scale of kv head h: scales[0] (per tensor), scales[h] (per head), 1 (E5M2) */
__device__ __forceinline__ float qc_kv_scale(const float *scales, u32 variant, int h) {
    return variant == QC_KV_E4M3_TENSOR ? scales[0] : variant == QC_KV_E4M3_HEAD ? scales[h] : 1.f;
}

/* ---- encode (the C codec's rules: nearest even, saturating, NaN -> 0x7F) ---- */
__device__ __forceinline__ u32 qc_enc_generic(float f, u32 mbits, u32 bias, u32 maxcode) {
    u32 u = __float_as_uint(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu, e = a >> 23, code;
    if (a > 0x7f800000u) return 0x7Fu;
    if (e >= 128u - bias) {
        u32 shift = 23u - mbits;
        u32 r = a + (1u << (shift - 1u)) - 1u + ((a >> shift) & 1u);
        code = (r >> shift) - ((127u - bias) << mbits);
        if (code > maxcode) code = maxcode;
    } else {
        u32 full = e ? ((a & 0x7fffffu) | 0x800000u) : a, ee = e ? e : 1u;
        u32 shift = 151u - bias - mbits - ee;
        if (shift > 24u) {
            code = 0;
        } else {
            u32 q = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1u);
            if (rem > half || (rem == half && (q & 1u))) q++;
            code = q;
        }
    }
    return sign | code;
}
__device__ __forceinline__ u32 qc_e4m3(float v) {
#if __CUDA_ARCH__ >= 890
    u16 r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(r) : "f"(v));
    return v != v ? 0x7Fu : (u32)(r & 0xFFu);
#else
    return qc_enc_generic(v, 3u, 7u, 0x7Eu);
#endif
}
__device__ __forceinline__ u32 qc_e5m2(float v) {
#if __CUDA_ARCH__ >= 890
    u16 r;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(r) : "f"(v));
    return v != v ? 0x7Fu : (u32)(r & 0xFFu);
#else
    return qc_enc_generic(v, 2u, 15u, 0x7Bu);
#endif
}

/* ---- decode to f16 (two codes, low byte first, in the low 16 bits of `two`) ----
 * E5M2 is the top byte of an f16: exact, no scale.  E4M3 on sm_89+ by the
 * hardware conversion (exact); below, the code's bits placed in an f16 give
 * the value times 2^-8 exactly (normals and subnormals alike), and the 2^8 is
 * folded into the scale: QC_E4M3_POST is the factor the caller multiplies in. */
#if __CUDA_ARCH__ >= 890
#define QC_E4M3_POST 1.f
#else
#define QC_E4M3_POST 256.f
#endif
template <bool E5>
__device__ __forceinline__ u32 qc_fp8x2_f16x2(u32 two) {
    u32 y = __byte_perm(two, 0u, 0x1404u); /* [b1, 0, b0, 0] */
    if (E5) return y;
#if __CUDA_ARCH__ >= 890
    u32 r;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((u16)two));
    return r;
#else
    return (y & 0x80008000u) | ((y >> 1) & 0x3f803f80u);
#endif
}
/* two floats -> f16x2 (lo in the low half), nearest even, clamped to the f16 range */
__device__ __forceinline__ u32 qc_h2(float lo, float hi) {
    lo = fminf(fmaxf(lo, -QC_F16_MAX), QC_F16_MAX);
    hi = fminf(fmaxf(hi, -QC_F16_MAX), QC_F16_MAX);
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ uint4 qc_ld16(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 qc_ld8(const void *p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}
/* D (f32) += A (f16 16x16) B (f16 16x8) */
__device__ __forceinline__ void qc_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 qc_word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
