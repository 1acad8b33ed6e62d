/* mxfp4.gemv1_xr: y[n] = x[k] . dec(W)[n,k]^T at m = 1 on plugins/common/cuda/gemv1_xr.cuh's skeleton. */
/*
 * The mxfp4 policy: mxfp4.gemv1's decode (mxfp4_gemv_frag_ps.c says why each step is exact).  A lane's 16 bytes
 * of a row and step are one 32-element block (block 32 c + 4 g + t), so its one E8M0 byte scales all of them,
 * folded into the A registers before the mma: pair p of a word (code p, code p + 4) is
 *   ((q' & 0x000F000F) * 4160) & 0x81C081C0  (p even),  ((q' & 0x00F000F0) * 260) & 0x81C081C0  (p odd),
 * q' = w (p < 2) or w >> 8, the E2M1 value times 2^-126 in bf16 bits, times 2^(e-1) by one bf16x2 fma (exact
 * for e <= 128).  Scale bytes above 128 and 0xFF take the skeleton's rare path (a warp vote a row pair): 2^126 (NaN
 * for 0xFF) and a second multiply by 2^(e-127).  x's B registers are its pairs (e0,e4), (e1,e5), (e2,e6), (e3,e7),
 * permuted once when x is loaded (gemv1 permutes them for every row pair).  No correction: the diagonal sums are
 * the rows' sums.  Per word 17 instructions (w4a16's 7).
 */
struct XrMx {
    typedef u8 sc_t;
    static constexpr int SSTEP = 32; /* 32 blocks a 1024-code step */
    static constexpr bool CORR = false, BIG_PATH = true;
    static __device__ __forceinline__ ll srow(ll k) { return k >> 5; }
    static __device__ __forceinline__ int soff(int g, int t) { return 4 * g + t; }
    static __device__ __forceinline__ u32 lds(const u8 *p) {
        u16 v;
        asm volatile("ld.global.nc.u8 %0, [%1];" : "=h"(v) : "l"(p));
        return v;
    }
    static __device__ __forceinline__ void xregs(uint4 v, u32 *b) {
        b[0] = __byte_perm(v.x, v.z, 0x5410), b[1] = __byte_perm(v.x, v.z, 0x7632);
        b[2] = __byte_perm(v.y, v.w, 0x5410), b[3] = __byte_perm(v.y, v.w, 0x7632);
    }
    static __device__ __forceinline__ float corr(float) { return 0.f; }
    template <int S> static __device__ __forceinline__ bool big(const XrPair<S> &p) {
        u32 e = 0;
#pragma unroll
        for (int c = 0; c < S; c++) e = max(e, max(p.sa[c], p.sb[c]));
        return e > 128u;
    }
    template <u32 MASK, u32 MUL> static __device__ __forceinline__ u32 raw(u32 q) { return ((q & MASK) * MUL) & 0x81C081C0u; }
    /* 2^(e-1) in both halves (e <= 128); the rare path's two factors: 2^(e-1) and 1, or 2^126 and 2^(e-127) */
    static __device__ __forceinline__ u32 s1(u32 e) { return ((e + 126u) << 7) * 0x10001u; }
    static __device__ __forceinline__ u32 s1big(u32 e) { return e <= 128u ? s1(e) : e < 255u ? 0x7E807E80u : 0x7FC07FC0u; }
    static __device__ __forceinline__ u32 s2big(u32 e) { return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3F803F80u; }
    template <bool BIG>
    static __device__ __forceinline__ void a_regs(u32 wa, u32 wb, int h, u32 ea, u32 eb, u32 *a) {
        const u32 A = h ? wa >> 8 : wa, B = h ? wb >> 8 : wb;
        const u32 fa = BIG ? s1big(ea) : s1(ea), fb = BIG ? s1big(eb) : s1(eb);
        a[0] = xr_fma2(raw<0x000F000Fu, 4160u>(A), fa, 0x80008000u);
        a[1] = xr_fma2(raw<0x000F000Fu, 4160u>(B), fb, 0x80008000u);
        a[2] = xr_fma2(raw<0x00F000F0u, 260u>(A), fa, 0x80008000u);
        a[3] = xr_fma2(raw<0x00F000F0u, 260u>(B), fb, 0x80008000u);
        if (BIG) {
            const u32 ga = s2big(ea), gb = s2big(eb);
            a[0] = xr_fma2(a[0], ga, 0x80008000u), a[1] = xr_fma2(a[1], gb, 0x80008000u);
            a[2] = xr_fma2(a[2], ga, 0x80008000u), a[3] = xr_fma2(a[3], gb, 0x80008000u);
        }
    }
    static __device__ __forceinline__ float finish(float d, float, u32) { return d; }
};

extern "C" __global__ void __launch_bounds__(32 * XR_MAX_WARPS, 1)
    qc_mxfp4_gemv1_xr(const u16 *x, const u8 *q, const u8 *sc, float *y, ll m, ll n, ll k) {
    extern __shared__ float red[];
    if (m <= 0 || n <= 0) return;
    if (m != 1 || k <= 0 || (k & 1023) || ((unsigned long long)q & 15) || ((unsigned long long)x & 15)) {
        qc_grid_wait(); /* NaN everywhere: the answer to arguments the kernel cannot honour */
        const ll step = (ll)gridDim.x * blockDim.x;
        for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < m * n; i += step) y[i] = __uint_as_float(0x7fc00000u);
        return;
    }
    if ((k >> 10) & 1) xr_gemv<XrMx, 1>(x, q, sc, y, n, k, red);
    else xr_gemv<XrMx, 2>(x, q, sc, y, n, k, red);
}
