/* probe: the m = 1 whole-line GEMV (w4a16.gemv1_sym's arithmetic, appended to its dumped source) fed by TMA bulk
   copies instead of register loads, so that the bytes in flight no longer come out of the consumers' registers.
   v2: a stage is 4 whole rows (R = 4: 4 x k / 2 contiguous bytes of codes, 4 x k / 128 contiguous scales): two
   cp.async.bulk a stage, issued by one producer lane into a ring of NS stages completing on mbarriers.  Consumer warp
   w takes stages w, w + W, ... and runs gemv1's steps (two row pairs, K split 1) over the shared copy, so its sums
   and their order are gemv1's.  (v1 copied a row slice per bulk copy, 64 copies of 1 KB and 32 B a stage: time
   followed the copy count, 42-83 ns a copy an SM; bench/results/2026-12-01-h200-s15/call1.)  Rows of a block:
   [blockIdx.x * rpb, + rpb).  NS is a multiple of W, so that slot s only ever serves warp s % W: a parity wait is
   only unambiguous when the slot's previous fill has completed, which the warp knows only for its own stages (NS < W
   and NS = 24 with W = 16 both let a warp take a slot's earlier fill for its own and hang: call3, call6). */
/* gemv1's step with the two halves h of each word summed in separate mma chains (4 long instead of 8) */
__device__ __forceinline__ void w4t_compute2(const W4gStage &s, float (*acc)[2], const u16 *xr, bool odd) {
    uint4 xv[4];
#pragma unroll
    for (int j = 0; j < 4; j++) xv[j] = __ldg((const uint4 *)(xr + 8 * j));
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float part[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 A = s.wa[r][j], B = s.wb[r][j];
            const u32 b[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u32 a0 = w4f_pair(A >> (8 * h)), a1 = w4f_pair(B >> (8 * h));
                const u32 a2 = w4f_pair(A >> (8 * h + 4)), a3 = w4f_pair(B >> (8 * h + 4));
                w4f_mma(part[h], a0, a1, a2, a3, b[2 * h], b[2 * h + 1]);
            }
        }
        acc[r][0] = fmaf(w4f_h2f(s.sa[r]), odd ? part[0][1] + part[1][1] : part[0][0] + part[1][0], acc[r][0]);
        acc[r][1] = fmaf(w4f_h2f(s.sb[r]), odd ? part[0][3] + part[1][3] : part[0][2] + part[1][2], acc[r][1]);
    }
}
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
    long long spins = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        if (++spins == (1ll << 22)) { /* a probe's watchdog: say where it hangs instead of hanging */
            printf("w4t hang: block %d thread %d bar %u parity %u\n", blockIdx.x, threadIdx.x, bar, parity);
            __trap();
        }
    } while (!done);
}
__device__ __forceinline__ void w4t_bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar, unsigned long long pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(pol) : "memory");
}
/* timing-only variants of a step's arithmetic (y is not the product): V 1 drops the dequantisation (the mma takes the
   code words as they are), V 2 drops the mma (the pairs are folded with xor), V 3 dequantises to f16 with one shift a
   word (nibbles 0-3 and 4-7 of each half through 0x6400 magic: 1024 + q and 1024 + 16 q, then a sub and an fma on the
   FMA pipe) and runs f16 mmas; V 4 keeps only the loads (codes and scales from shared memory, x through L1, folded
   with xor); V 5 is the full step with x from registers (loaded once, the loads of x per step dropped) */
__device__ __forceinline__ void w4t_mma_f16(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void w4t_f16x4(u32 w, u32 *o) { /* four f16 pairs of one word: q - 8, exact */
    u32 lo, hi, lo2, hi2;
    const u32 w8 = w >> 8;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(lo) : "r"(w), "n"(0x000F000F), "n"(0x64006400));
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(hi) : "r"(w), "n"(0x00F000F0), "n"(0x64006400));
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(lo2) : "r"(w8), "n"(0x000F000F), "n"(0x64006400));
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(hi2) : "r"(w8), "n"(0x00F000F0), "n"(0x64006400));
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(o[0]) : "r"(lo), "r"(0x64086408u));             /* 1032: 1024 + 8 */
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(o[1]) : "r"(hi), "r"(0x2C002C00u), "r"(0xD480D480u)); /* /16 - 72 */
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(o[2]) : "r"(lo2), "r"(0x64086408u));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(o[3]) : "r"(hi2), "r"(0x2C002C00u), "r"(0xD480D480u));
}
template <int V>
__device__ __forceinline__ void w4t_compute_v(const W4gStage &s, float (*acc)[2], const u16 *xr, bool odd) {
    uint4 xv[4];
#pragma unroll
    for (int j = 0; j < 4; j++) xv[j] = V == 5 ? make_uint4(0x3F803F80u ^ (u32)(size_t)xr, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u) : __ldg((const uint4 *)(xr + 8 * j));
    if (V == 4) {
        u32 f = s.sa[0] ^ s.sb[0] ^ s.sa[1] ^ s.sb[1];
#pragma unroll
        for (int j = 0; j < 4; j++) f ^= xv[j].x ^ xv[j].y ^ xv[j].z ^ xv[j].w ^ s.wa[0][j] ^ s.wb[0][j] ^ s.wa[1][j] ^ s.wb[1][j];
        acc[0][0] += __uint_as_float(f & 0x3FFFFFFFu);
        return;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float part[4] = {0.f, 0.f, 0.f, 0.f};
        u32 fold = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 A = s.wa[r][j], B = s.wb[r][j];
            const u32 b[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
            if (V == 3) {
                u32 fa[4], fb[4];
                w4t_f16x4(A, fa), w4t_f16x4(B, fb);
                w4t_mma_f16(part, fa[0], fb[0], fa[1], fb[1], b[0], b[1]);
                w4t_mma_f16(part, fa[2], fb[2], fa[3], fb[3], b[2], b[3]);
                continue;
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (V == 1) {
                    w4f_mma(part, A >> h, B >> h, A, B, b[2 * h], b[2 * h + 1]);
                } else {
                    const u32 a0 = w4f_pair(A >> (8 * h)), a1 = w4f_pair(B >> (8 * h));
                    const u32 a2 = w4f_pair(A >> (8 * h + 4)), a3 = w4f_pair(B >> (8 * h + 4));
                    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(fold) : "r"(fold), "r"(a0), "r"(a1));
                    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(fold) : "r"(fold), "r"(a2), "r"(a3));
                }
            }
        }
        if (V == 2) part[0] = __uint_as_float(fold & 0x3FFFFFFFu);
        acc[r][0] = fmaf(w4f_h2f(s.sa[r]), odd ? part[1] : part[0], acc[r][0]);
        acc[r][1] = fmaf(w4f_h2f(s.sb[r]), odd ? part[3] : part[2], acc[r][1]);
    }
}
template <int W>
__device__ __forceinline__ void w4t_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int n, int k, int rpb, int ns,
                                         int mode) {
    extern __shared__ __align__(128) unsigned char w4t_sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* mode 0: rows [blockIdx.x * rpb, + rpb); 1: groups of 4 rows dealt to the blocks in turn (the SMs stream one
       window of W at a time); 2: as 0 without the arithmetic (the pipeline's own rate; y is not the product); 3: the
       arithmetic alone on whatever the ring holds (no copies, no waits; y not the product); 4: as 0 with
       w4t_compute2; 5: as 3 with w4t_compute2; 6-10: as 3 with w4t_compute_v<1..5>; 11, 12, 13: as 0, 3, 1 with x
       from shared memory, laid out so that load j of a step reads 512 contiguous bytes (the plugin's w4g_step).
       x's 2 k bytes follow the barriers. */
    const int il = mode == 1 || mode == 13, xsm = mode >= 11, two = mode == 4 || mode == 5;
    const int nocopy = mode == 3 || (mode >= 5 && mode <= 10) || mode == 12;
    const int r0 = il ? 0 : blockIdx.x * rpb, r1 = il ? n : (r0 + rpb < n ? r0 + rpb : n);
    if (r0 >= n) return;
    const int rowb = k / 2, ng = k / 128, steps = k / 1024;
    const int cb = 4 * rowb, stage = cb + 4 * ng * 2; /* codes, then scales */
    const int groups = il ? ((n + 3) / 4 - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : (r1 - r0 + 3) / 4;
    const int gstride = il ? (int)gridDim.x : 1, gfirst = il ? (int)blockIdx.x : 0;
    const unsigned base = w4t_smem(w4t_sm), full = base + ns * stage, empty = full + 8 * ns;
    if (threadIdx.x == 0) {
        for (int i = 0; i < ns; i++) w4t_init(full + 8 * i, 1), w4t_init(empty + 8 * i, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == W) { /* producer: one lane */
        if (lane || nocopy) return;
        unsigned long long pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
        for (int j = 0; j < groups; j++) {
            const int st = j % ns, row0 = r0 + 4 * (gfirst + j * gstride), nr = r1 - row0 < 4 ? r1 - row0 : 4;
            w4t_wait(empty + 8 * st, ((j / ns) & 1) ^ 1);
            w4t_expect(full + 8 * st, nr * (rowb + ng * 2));
            const unsigned dst = base + st * stage;
            w4t_bulk(dst, q + (ll)row0 * rowb, nr * rowb, full + 8 * st, pol);
            w4t_bulk(dst + cb, sc + (ll)row0 * ng, nr * ng * 2, full + 8 * st, pol);
        }
        return;
    }
    const int g = lane >> 2, t = lane & 3;
    const bool odd = g & 1;
    const u16 *xr = x + 128 * g + 32 * t;
    uint4 *xs = (uint4 *)(w4t_sm + ns * stage + 16 * ns);
    if (xsm) { /* 16-byte chunk nn of step c (lane 4 g + t's load j, nn = 16 g + 4 t + j) goes to c * 128 + 32 j + 4 g + t */
        for (int i = threadIdx.x; i < k / 8; i += 32 * W) {
            const int c = i >> 7, nn = i & 127;
            xs[c * 128 + (nn & 3) * 32 + (nn >> 4) * 4 + ((nn >> 2) & 3)] = __ldg((const uint4 *)x + i);
        }
        asm volatile("bar.sync 1, %0;\n" ::"r"(32 * W) : "memory");
    }
    for (int j = warp; j < groups; j += W) {
        const int st = j % ns, row0 = r0 + 4 * (gfirst + j * gstride);
        if (!nocopy) w4t_wait(full + 8 * st, (j / ns) & 1);
        const unsigned char *cs = w4t_sm + st * stage;
        const u16 *ss = (const u16 *)(cs + cb);
        float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll 2
        for (int c = 0; c < (mode == 2 ? 0 : steps); c++) {
            W4gStage sg;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int ra = 2 * r;
                const uint4 va = *(const uint4 *)(cs + ra * rowb + c * 512 + 64 * g + 16 * t);
                const uint4 vb = *(const uint4 *)(cs + (ra + 1) * rowb + c * 512 + 64 * g + 16 * t);
                sg.wa[r][0] = va.x, sg.wa[r][1] = va.y, sg.wa[r][2] = va.z, sg.wa[r][3] = va.w;
                sg.wb[r][0] = vb.x, sg.wb[r][1] = vb.y, sg.wb[r][2] = vb.z, sg.wb[r][3] = vb.w;
                sg.sa[r] = ss[ra * ng + c * 8 + g];
                sg.sb[r] = ss[(ra + 1) * ng + c * 8 + g];
            }
            if (xsm) {
                uint4 xv[4];
#pragma unroll
                for (int jj = 0; jj < 4; jj++) xv[jj] = xs[c * 128 + jj * 32 + lane];
                w4g_step(sg, acc, xv, odd);
            } else if (mode == 6) w4t_compute_v<1>(sg, acc, xr + (ll)c * 1024, odd);
            else if (mode == 7) w4t_compute_v<2>(sg, acc, xr + (ll)c * 1024, odd);
            else if (mode == 8) w4t_compute_v<3>(sg, acc, xr + (ll)c * 1024, odd);
            else if (mode == 9) w4t_compute_v<4>(sg, acc, xr + (ll)c * 1024, odd);
            else if (mode == 10) w4t_compute_v<5>(sg, acc, xr + (ll)c * 1024, odd);
            else if (two) w4t_compute2(sg, acc, xr + (ll)c * 1024, odd);
            else w4g_compute(sg, acc, 0, xr + (ll)c * 1024, odd);
        }
        __syncwarp();
        if (lane == 0 && !nocopy) w4t_arrive(empty + 8 * st);
        const bool diag = t == (g >> 1);
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float v = diag ? acc[r][e] : 0.f;
#pragma unroll
                for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                const int row = row0 + 2 * r + e;
                if (lane == 0 && row < r1) y[row] = v;
            }
    }
}
#define W4T_VAR(W)                                                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * (W + 1), 1) w4t_##W(const u16 *x, const u8 *q, const u16 *sc,    \
                                                                          float *y, ll m, ll n, ll k, ll rpb, ll ns, ll mode) { \
        w4t_gemv<W>(x, q, sc, y, (int)n, (int)k, (int)rpb, (int)ns, (int)mode);                                                 \
    }
W4T_VAR(4)
W4T_VAR(6)
W4T_VAR(8)
W4T_VAR(12)
W4T_VAR(16)
