/* fp8 W8A8 decode linear (m <= 16) on sm_90a: W as the register A operand of wgmma m64nNk32 e4m3 (QGMMA: no conversion on Hopper) */
/*
 * cuda/gemv_mma.cu's loads and fragments with wgmma in place of mma.sync, whose e4m3 form Hopper runs as
 * F2FP conversions + HMMA.  PTX ISA "Register Fragments for wgmma .m64nNk32": warp w of a warpgroup
 * holds rows 16w..16w+15 of A with the m16n8k32 layout (a0 row g, k slots 4t..4t+3; a1 row g+8; a2 row
 * g, slots 16+4t..; a3 row g+8), and D rows 16w + g (d0, d1: columns 2t, 2t+1; d4, d5: 8+2t, ...) and
 * 16w + g + 8 (d2, d3; d6, d7).  So a warp's A registers are the same 16-byte loads as in gemv_mma.cu.
 *
 * Warpgroups are 64 rows of A, but a decode GEMV needs 16-row tiles to fill the GPU.  So the four warps
 * of a warpgroup hold the same 16 W rows at four different K ranges (warp w of the block takes chunk
 * slice w, as in gemv_mma.cu), and the warpgroup runs one wgmma per range w': B_w' holds x at range
 * w' (N = 8 x rows, 16 at m > 8).  D_w' rows of warp w' are that warp's sum; the other warps' rows of
 * D_w' mix a W range with another x range and are dropped (4x the tensor work: free at decode).
 *
 * B_w' in shared memory, K-major with the 128-byte swizzle (the layout and descriptor of wgmma.cu, which
 * the H200 runs): per chunk and range an 8-row atom of 1024 bytes, row i = x row i (rows 8..15 in the
 * next atom: SBO 1024), k32 step h of the chunk at bytes 32h..32h+31 of the row.  Slot s of step h must
 * be the k that A's slot s holds: slot 4t+i is k = 16t + 8h + i of the chunk and slot 16+4t+i is k + 4,
 * so lane (g, t) of warp w', which loads x row g (+8) at k = 16t (16 bytes, words X0..X3), stores X0 at
 * row byte 4t, X1 at 16 + 4t, X2 at 32 + 4t, X3 at 48 + 4t; the swizzle puts logical 16-byte unit u of
 * row r at unit u ^ r.  Each warpgroup stages its own x (its warps' ranges), syncs on a named barrier,
 * then (wgmma.fence) issues 2 U steps x 4 ranges of wgmma (U = 2 chunks at m <= 8, 1 at m > 8: 8 KB of
 * staging a warpgroup), commits and waits; each batch starts from
 * zero (scale-d 0) and is added to f32 totals (the promotion of gemv_mma.cu).  FP8_MODE 0 channel, 1
 * tensor (block: gemv_mma.cu).  The block's warps then reduce as in gemv_mma.cu.
 */
#define GW_U1 2 /* chunks a batch at m <= 8; 1 at m > 8 (the staging stays 8 KB a warpgroup) */

#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemv_wg_channel
#else
#define QC_ENTRY qc_fp8_gemv_wg_tensor
#endif

typedef long long ll;

/* wgmma exists on sm_90a only; other targets (the kernel's range says 89+ so that it ties with the other
 * GEMVs; eligibility refuses them) build an empty kernel */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GW_ON 1
#else
#define GW_ON 0
#endif
#if GW_ON

__device__ __forceinline__ uint4 gw_ld_stream(const u8 *p) { /* weights are read once: keep them out of L1 */
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
/* K-major operand, 128-byte swizzle: rows of 128 B, 8-row groups 1024 B apart (wgmma.cu's qc_desc) */
__device__ __forceinline__ u64 gw_desc(unsigned addr) {
    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
__device__ __forceinline__ void gw_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void gw_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void gw_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/* d (N/2 f32) = (scale_d ? d : 0) + A B, A from registers, B (N x 32, K-major) from descriptor db */
template <int NB> __device__ __forceinline__ void gw_wgmma(float *d, const u32 *a, u64 db, int scale_d);
template <> __device__ __forceinline__ void gw_wgmma<1>(float *d, const u32 *a, u64 db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
template <> __device__ __forceinline__ void gw_wgmma<2>(float *d, const u32 *a, u64 db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* byte offset of logical byte `off` (< 128) of row r (0..7) in a 1024-byte atom with the 128-byte swizzle */
__device__ __forceinline__ unsigned gw_swz(int r, int off) { return r * 128 + ((((off >> 4) ^ r) & 7) << 4) + (off & 15); }

template <int NB>
__device__ __forceinline__ void gw_run(const u8 *xq, const float *xs, const u8 *w, const float *ws, float *y, int m, ll n,
                                       ll k, unsigned stage, float *red) {
    constexpr int U = NB == 1 ? GW_U1 : 1;
    const int ks = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int wg = warp >> 2, wq = warp & 3;
    const ll n0 = (ll)blockIdx.x * 16;
    const int nch = (int)((k + 63) >> 6), cpw = (nch + ks - 1) / ks;
    const int c0 = min(warp * cpw, nch), c1 = min(c0 + cpw, nch);
    const u8 *wp = w + (n0 + g) * k + 16 * t, *wq8 = wp + 8 * k;
    const u8 *xr[NB]; /* x rows past m read row 0: only D columns that are not stored see them */
#pragma unroll
    for (int nb = 0; nb < NB; nb++) xr[nb] = xq + (g + 8 * nb < m ? (ll)(g + 8 * nb) * k : 0) + 16 * t;
    /* this warpgroup's staging: U chunks x 4 ranges x NB atoms of 1024 bytes (1024-aligned) */
    const unsigned base = stage + (unsigned)wg * (unsigned)(U * 4 * NB * 1024);
    float tot[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) tot[nb][0] = tot[nb][1] = tot[nb][2] = tot[nb][3] = 0.f;
    /* every warp of the block runs cpw chunks (the warpgroup's wgmmas are collective); chunks past a warp's
       slice, and lanes past k, load zeros */
    for (int j = 0; j < cpw; j += U) {
        u32 a[U][2][4];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + j + u;
            const bool ok = c < c1 && (ll)c * 64 + 16 * t < k;
            const unsigned kp = (unsigned)c * 64u;
            const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
            const uint4 p = ok ? gw_ld_stream(wp + kp) : zero, q = ok ? gw_ld_stream(wq8 + kp) : zero;
            a[u][0][0] = p.x, a[u][0][1] = q.x, a[u][0][2] = p.y, a[u][0][3] = q.y;
            a[u][1][0] = p.z, a[u][1][1] = q.z, a[u][1][2] = p.w, a[u][1][3] = q.w;
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
                const uint4 xv = ok ? __ldg((const uint4 *)(xr[nb] + kp)) : zero;
                /* atom (u, range wq, nb); row g; words at 4t, 16 + 4t, 32 + 4t, 48 + 4t */
                const unsigned at = base + (unsigned)(((u * 4 + wq) * NB + nb) * 1024);
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + gw_swz(g, 4 * t)), "r"(xv.x) : "memory");
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + gw_swz(g, 16 + 4 * t)), "r"(xv.y) : "memory");
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + gw_swz(g, 32 + 4 * t)), "r"(xv.z) : "memory");
                asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + gw_swz(g, 48 + 4 * t)), "r"(xv.w) : "memory");
            }
        }
        /* the stores visible to the async proxy, then the warpgroup's four warps meet */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
        float d[4][NB * 4];
        gw_fence();
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    gw_wgmma<NB>(d[r], a[u][h], gw_desc(base + (unsigned)(((u * 4 + r) * NB) * 1024) + 32u * h),
                                 u + h > 0);
        gw_commit();
        gw_wait();
        /* this warp's rows of D_wq; the warpgroup meets again before its staging is overwritten */
#pragma unroll
        for (int r = 0; r < 4; r++)
            if (r == wq) {
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++) tot[nb][e] += d[r][4 * nb + e];
            }
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
    }
    __syncthreads(); /* the staging area becomes the reduction's */
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[(warp * 4 * NB + 4 * nb + e) * 32 + lane] = tot[nb][e];
    __syncthreads();
    for (int v = threadIdx.x; v < 128 * NB; v += blockDim.x) {
        const int i = v >> 5, ln = v & 31, nb = i >> 2, e = i & 3;
        float sum = 0.f;
        for (int wi = 0; wi < ks; wi++) sum += red[(wi * 4 * NB + i) * 32 + ln];
        const ll row = 8 * nb + 2 * (ln & 3) + (e & 1), col = n0 + (ln >> 2) + 8 * (e >> 1);
        if (row < m) {
#if FP8_MODE == 1
            y[row * n + col] = sum * (xs[row] * ws[0]);
#else
            y[row * n + col] = sum * (xs[row] * ws[col]);
#endif
        }
    }
}

#endif /* GW_ON */

/* 4..16 warps (1..4 warpgroups) a block; dynamic shared memory: 1024 (alignment) + max(staging, reduction).
 * The four ranges' accumulators need more than 64 registers: at 64 ptxas serializes the wgmmas (C7512). */
extern "C" __global__ void __launch_bounds__(512, 1) QC_ENTRY(const u8 *xq, const float *xs, const u8 *w, const float *ws,
                                                              float *y, ll m, ll n, ll k) {
#if GW_ON
    extern __shared__ __align__(16) unsigned char gw_smem[];
    if (m <= 0 || m > 16 || n <= 0 || k <= 0 || k >= (1ll << 31) || (n & 15) || (k & 15) || (blockDim.x & 127) ||
        (ll)blockIdx.x * 16 >= n)
        return;
    const unsigned raw = (unsigned)__cvta_generic_to_shared(gw_smem);
    const unsigned stage = (raw + 1023u) & ~1023u;
    float *red = (float *)(gw_smem + (stage - raw));
    if (m > 8)
        gw_run<2>(xq, xs, w, ws, y, (int)m, n, k, stage, red);
    else
        gw_run<1>(xq, xs, w, ws, y, (int)m, n, k, stage, red);
#else
    (void)xq, (void)xs, (void)w, (void)ws, (void)y, (void)m, (void)n, (void)k;
#endif
}
