/* probe: the m = 1 whole-line GEMV (w4a16.gemv1_sym's arithmetic, appended to its dumped source) fed by TMA bulk
   copies instead of register loads.  One block an SM's worth of rows: a producer warp copies, for each stage, RS = 4W
   rows x BS bytes of codes (one cp.async.bulk a row; a row's codes are contiguous) and those rows' scales into a ring
   of NS stages completing on mbarriers; W consumer warps each take 4 of the stage's rows (two row pairs, as gemv1's
   warp) and run gemv1's steps on the shared copy.  So the bytes in flight (NS x RS x BS) no longer come out of the
   consumers' registers.  Rows of a block: [blockIdx.x * rpb, + rpb), in tiles of RS rows, each tile's slices in K
   order; a warp's sums stay in registers over a tile's slices (no K split). */
__device__ __forceinline__ unsigned w4t_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void w4t_init(unsigned bar, unsigned n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(n) : "memory");
}
__device__ __forceinline__ void w4t_expect(unsigned bar, unsigned bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void w4t_arrive(unsigned bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void w4t_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void w4t_bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar, unsigned long long pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(pol) : "memory");
}
template <int W, int BS, int NS>
__device__ __forceinline__ void w4t_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int n, int k, int rpb) {
    extern __shared__ __align__(128) unsigned char w4t_sm[];
    constexpr int RS = 4 * W, SCB = BS / 32, STAGE = RS * BS + RS * SCB, STEPS = BS / 512;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = blockIdx.x * rpb, r1 = r0 + rpb < n ? r0 + rpb : n;
    if (r0 >= n) return;
    const int rowb = k / 2, slices = rowb / BS, ng = k / 128;
    const int total = (r1 - r0 + RS - 1) / RS * slices;
    const unsigned base = w4t_smem(w4t_sm), full = base + NS * STAGE, empty = full + 8 * NS;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NS; i++) w4t_init(full + 8 * i, 1), w4t_init(empty + 8 * i, W);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == W) { /* producer */
        unsigned long long pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
        for (int i = 0; i < total; i++) {
            const int st = i % NS, tile = i / slices, s = i % slices;
            const int row0 = r0 + tile * RS, nr = r1 - row0 < RS ? r1 - row0 : RS;
            w4t_wait(empty + 8 * st, ((i / NS) & 1) ^ 1);
            if (lane == 0) w4t_expect(full + 8 * st, nr * (BS + SCB));
            __syncwarp();
            const unsigned dst = base + st * STAGE;
            for (int l = lane; l < nr; l += 32) {
                w4t_bulk(dst + l * BS, q + (ll)(row0 + l) * rowb + (ll)s * BS, BS, full + 8 * st, pol);
                w4t_bulk(dst + RS * BS + l * SCB, sc + (ll)(row0 + l) * ng + s * (BS / 64), SCB, full + 8 * st, pol);
            }
        }
        return;
    }
    const int g = lane >> 2, t = lane & 3;
    const bool odd = g & 1;
    const u16 *xr = x + 128 * g + 32 * t;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int i = 0; i < total; i++) {
        const int st = i % NS, tile = i / slices, s = i % slices;
        const int row0 = r0 + tile * RS, nr = r1 - row0 < RS ? r1 - row0 : RS;
        w4t_wait(full + 8 * st, (i / NS) & 1);
        if (4 * warp < nr) {
            const unsigned char *cs = w4t_sm + st * STAGE;
            const u16 *ss = (const u16 *)(cs + RS * BS);
#pragma unroll
            for (int c = 0; c < STEPS; c++) {
                W4gStage sg;
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int ra = 4 * warp + 2 * r;
                    const uint4 va = *(const uint4 *)(cs + ra * BS + c * 512 + 64 * g + 16 * t);
                    const uint4 vb = *(const uint4 *)(cs + (ra + 1) * BS + c * 512 + 64 * g + 16 * t);
                    sg.wa[r][0] = va.x, sg.wa[r][1] = va.y, sg.wa[r][2] = va.z, sg.wa[r][3] = va.w;
                    sg.wb[r][0] = vb.x, sg.wb[r][1] = vb.y, sg.wb[r][2] = vb.z, sg.wb[r][3] = vb.w;
                    sg.sa[r] = ss[ra * (SCB / 2) + c * 8 + g];
                    sg.sb[r] = ss[(ra + 1) * (SCB / 2) + c * 8 + g];
                }
                w4g_compute(sg, acc, c, xr + (ll)s * STEPS * 1024, odd);
            }
        }
        __syncwarp();
        if (lane == 0) w4t_arrive(empty + 8 * st);
        if (s == slices - 1) { /* the tile's last slice: the diagonal sums, as gemv1 (K split 1) */
            const bool diag = t == (g >> 1);
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float v = diag ? acc[r][e] : 0.f;
#pragma unroll
                    for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                    const int row = row0 + 4 * warp + 2 * r + e;
                    if (lane == 0 && row < r1) y[row] = v;
                    acc[r][e] = 0.f;
                }
        }
    }
}
#define W4T_VAR(W, BS, NS)                                                                                             \
    extern "C" __global__ void __launch_bounds__(32 * (W + 1), 1) w4t_##W##_##BS##_##NS(                               \
        const u16 *x, const u8 *q, const u16 *sc, float *y, ll m, ll n, ll k, ll rpb) {                                \
        w4t_gemv<W, BS, NS>(x, q, sc, y, (int)n, (int)k, (int)rpb);                                                    \
    }
W4T_VAR(8, 1024, 4)
W4T_VAR(8, 1024, 6)
W4T_VAR(8, 512, 8)
W4T_VAR(8, 512, 12)
W4T_VAR(4, 2048, 4)
W4T_VAR(4, 1024, 8)
W4T_VAR(16, 512, 6)
W4T_VAR(16, 1024, 3)
