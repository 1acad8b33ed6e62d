/* w4a16.gemv1_xr_sym: y[n] = x[k] . W4[n,k]^T at m = 1 (g128, sym) on plugins/common/cuda/gemv1_xr.cuh's skeleton. */
/*
 * The w4a16 policy.  A word of 8 codes costs 7 instructions (3 shifts, 4 lop3; gemv1 spends 11):
 *
 *   lop3(w >> 4 s, 0x000F000F, 0x43004300) = bf16x2 (128 + q_2s, 128 + q_2s+1),  s = 0..3
 *
 * (pack_version 2: element 2p at nibble p, 2p + 1 at nibble p + 4, so x's B registers are its pairs as loaded.)
 * No bf16 subtract: each product (128 + q) x is exact in f32, and a segment's sum exceeds sum (q - 8) x by
 * corr = 136 sum x, which depends on x only: each lane computes it once for its segments and the diagonal sums
 * lose it before the group's f16 scale (XR_EXACT=1 subtracts 136 per weight instead, as gemv1 does: 4 more
 * bf16x2 fma a word).  (A 16 q nibble at bits 4-7 would save the shifts in f16, not in bf16: its top bit lands on
 * bf16's exponent.)  A segment is one g128 group: one scale a lane and step, applied in f32 after the mma.
 */
#ifndef XR_EXACT /* 1: subtract 128 + 8 per weight (bf16x2 fma) instead of the per-segment correction */
#define XR_EXACT 0
#endif

struct XrW4 {
    typedef u16 sc_t;
    static constexpr int SSTEP = 8; /* g128: 8 scales a 1024-code step */
    static constexpr bool CORR = !XR_EXACT, BIG_PATH = false;
    static __device__ __forceinline__ ll srow(ll k) { return k >> 7; }
    static __device__ __forceinline__ int soff(int g, int t) { return g; }
    static __device__ __forceinline__ u32 lds(const u16 *p) {
        u16 v;
        asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
        return v;
    }
    static __device__ __forceinline__ void xregs(uint4 v, u32 *b) { b[0] = v.x, b[1] = v.y, b[2] = v.z, b[3] = v.w; }
    static __device__ __forceinline__ float corr(float s) { return 136.f * s; }
    template <int S> static __device__ __forceinline__ bool big(const XrPair<S> &) { return false; }
    /* (w & 0x000F000F) | 0x43004300 as one lop3 (written in C, ptxas emits two instructions) */
    static __device__ __forceinline__ u32 pair(u32 w) {
        u32 v;
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w), "n"(0x000F000F), "n"(0x43004300));
#if XR_EXACT
        v = xr_fma2(v, 0x3F803F80u, 0xC308C308u); /* (128 + q) - 136 = q - 8, exact */
#endif
        return v;
    }
    /* pairs s = 2h (slots 2t, 2t + 1) and s = 2h + 1 (slots 2t + 8, 2t + 9) of both rows' word */
    template <bool BIG>
    static __device__ __forceinline__ void a_regs(u32 wa, u32 wb, int h, u32, u32, u32 *a) {
        a[0] = pair(wa >> (8 * h)), a[1] = pair(wb >> (8 * h));
        a[2] = pair(wa >> (8 * h + 4)), a[3] = pair(wb >> (8 * h + 4));
    }
    static __device__ __forceinline__ float finish(float d, float corr, u32 s) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)s));
        return f * (CORR ? d - corr : d);
    }
};

extern "C" __global__ void __launch_bounds__(32 * XR_MAX_WARPS, 1)
    qc_w4x_gemv1_sym(const u16 *x, const u8 *q, const u16 *sc, float *y, ll m, ll n, ll k, ll gs) {
    extern __shared__ float red[];
    if (m != 1 || n <= 0 || k <= 0 || (k & 1023) || gs != 128) return;
    if ((k >> 10) & 1) xr_gemv<XrW4, 1>(x, q, sc, y, n, k, red);
    else xr_gemv<XrW4, 2>(x, q, sc, y, n, k, red);
}
