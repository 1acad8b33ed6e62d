/* fp8 W8A8 batch-1 decode linear (m = 1, sm_90): whole weight rows brought into a shared-memory ring by TMA bulk copies */
/*
 * y[j] = (sum_t xq[t] W[j,t]) * (xs[0] * ws[j or 0]), the products exact, summed in f32.
 *
 * Why: the other GEMVs' warp loads cover 64 bytes of 8 different rows (halves of 8 lines); a bulk copy
 * of whole rows streams each line once and in order (w4a16.gemv1_tma_sym, session 15: 11% faster on
 * gate_up).  A stage is FT_R consecutive rows (FT_R k contiguous bytes: one cp.async.bulk), issued by one
 * producer lane into a ring of FT_NS stages; consumer warp w takes stages w, w + FT_W, ... (FT_NS is a
 * multiple of FT_W, so a slot always serves the same warp, which knows that the slot's previous fill
 * has completed: a parity wait only tells two phases apart).
 *
 * The sum of two rows a, b in one warp with mma.m16n8k16 f16 (E4M3 values and their products are exact
 * in f16 / f32): a 512-byte run c of a row is 8 segments of 64 bytes; lane (g, t) holds bytes 16 t ..
 * 16 t + 15 of segment g of row a (P) and of row b (Q), i.e. bytes 16 lane of the run, so each
 * shared-memory read is 512 contiguous bytes a warp.  Mma s (0..3) takes A = {P.w[s] lo, Q.w[s] lo,
 * P.w[s] hi, Q.w[s] hi} converted to f16x2 (A rows g: segment g of row a; rows g + 8: of row b) and B
 * = x's f16 at the same bytes (column g: segment g's), the same k slots in A and B.  So D[g][g] sums
 * row a over segment g and D[g+8][g] row b; the other 112 outputs of the 128 are dropped.  D
 * accumulates over all runs in f32, then each row's 8 diagonal values are added by shuffles: D[g][g]
 * sits in lane 4 g + g/2, register g % 2 (row a) or 2 + g % 2 (row b).
 *
 * x is converted once a block to f16 in shared memory, laid out so that a lane's 32 bytes of a run are
 * two reads of 512 contiguous bytes a warp (bytes 0..7 of its 16, then 8..15): the ring's weights are
 * the only conversions in the loop (16 F2FP, 4 HMMA, 4 LDS.128 per lane and 1 KiB of weights).
 * Blocks of FT_RPB(n) consecutive rows (a multiple of FT_R), FT_BLOCKS of them (two an SM); a block's
 * last stage may hold fewer rows (its second row's output is not stored).
 * FP8_MODE 0 channel: y = sum * (xs[0] * ws[j]); 1 tensor: sum * (xs[0] * ws[0]).
 */
#define FT_W 8      /* consumer warps a block */
#define FT_NS 8     /* ring stages: a multiple of FT_W (keep in step with fp8_kernels.c) */
#define FT_R 2      /* rows a stage */
#define FT_BLOCKS 264
/* FT_TRIGGER (A/B runs through QC_FP8_GEMV_OPTS): when this kernel lets its dependents launch (PDL).  0 never:
   they launch when it has ended (its own blocks still start early and stream weights while the kernel before it
   finishes).  1 when its blocks are done with their stages, 2 at the start.  All its blocks run at once (one
   wave), so a trigger lets the next kernels' blocks start and wait beside it.  Llama-3-8B fp8 batch-1 decode,
   H200 (session 16, call 5): 0 3.041 / 3.061 ms, 1 3.262, 2 3.650 (qkv, o, gate_up on this kernel; 3.252 / 3.243
   without it). */
#ifndef FT_TRIGGER
#define FT_TRIGGER 0
#endif
#if FT_R != 2 || FT_NS % FT_W
#error "the consumers read two rows a stage (FT_R 2); FT_NS a multiple of FT_W"
#endif

/* bytes from global to shared, completing on bar; the weights are read once: evict them first from L2 */
__device__ __forceinline__ void ft_bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar, u64 pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(pol) : "memory");
}

/* E4M3 pair -> f16x2 from the low / high half of a word (a half-register operand, no shift) */
__device__ __forceinline__ u32 ft_lo(u32 w) {
    u32 r;
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, l;\n}\n" : "=r"(r) : "r"(w));
    return r;
}
__device__ __forceinline__ u32 ft_hi(u32 w) {
    u32 r;
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}\n" : "=r"(r) : "r"(w));
    return r;
}

#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemv1_tma_channel
#else
#define QC_ENTRY qc_fp8_gemv1_tma_tensor
#endif
extern "C" __global__ void __launch_bounds__(32 * (FT_W + 1), 2) QC_ENTRY(const u8 *xq, const float *xs, const u8 *w,
                                                                         const float *ws, float *y, long long m,
                                                                         long long n, long long k) {
    extern __shared__ __align__(128) unsigned char ft_sm[];
#if FT_TRIGGER == 2
    qc_grid_trigger();
#endif
    if (m != 1 || n <= 0 || k <= 0 || (k & 511)) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long rpb = ((n + FT_BLOCKS - 1) / FT_BLOCKS + FT_R - 1) / FT_R * FT_R; /* the host's FT_RPB */
    const long long r0 = (long long)blockIdx.x * rpb, r1 = r0 + rpb < n ? r0 + rpb : n;
    if (r0 >= n) return;
    const int kk = (int)k, runs = kk / 512, stage = FT_R * kk, stages = (int)((r1 - r0 + FT_R - 1) / FT_R);
    uint4 *xh = (uint4 *)ft_sm; /* x in f16: 2 k bytes */
    unsigned char *ring = ft_sm + 2 * kk;
    const unsigned rb = qc_smem(ring), full = rb + FT_NS * stage, empty = full + 8 * FT_NS;
    if (threadIdx.x == 0) {
        for (int i = 0; i < FT_NS; i++) qc_mbar_init(full + 8 * i, 1), qc_mbar_init(empty + 8 * i, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == FT_W) { /* producer: one lane; weights are never written, so no qc_grid_wait */
        if (lane) return;
        u64 pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
        for (int j = 0; j < stages; j++) {
            const int st = j % FT_NS;
            const long long row0 = r0 + (long long)FT_R * j;
            const int nr = r1 - row0 < FT_R ? (int)(r1 - row0) : FT_R;
            qc_mbar_wait(empty + 8 * st, ((j / FT_NS) & 1) ^ 1); /* a fresh barrier passes parity 1 at once */
            qc_mbar_expect_tx(full + 8 * st, (unsigned)(nr * kk));
            ft_bulk(rb + st * stage, w + row0 * k, (unsigned)(nr * kk), full + 8 * st, pol);
        }
        return;
    }
    qc_grid_wait(); /* x, xs and y from here on */
    /* x's 16 bytes i (run i / 32, lane i % 32) in f16: bytes 0..7 to uint4 64 c + L, bytes 8..15 to 64 c + 32 + L */
    for (int i = threadIdx.x; i < kk / 16; i += 32 * FT_W) {
        const uint4 v = __ldg((const uint4 *)xq + i);
        const int c = i >> 5, L = i & 31;
        xh[64 * c + L] = make_uint4(ft_lo(v.x), ft_hi(v.x), ft_lo(v.y), ft_hi(v.y));
        xh[64 * c + 32 + L] = make_uint4(ft_lo(v.z), ft_hi(v.z), ft_lo(v.w), ft_hi(v.w));
    }
    asm volatile("bar.sync 1, %0;\n" ::"r"(32 * FT_W) : "memory"); /* the consumers only */
    const float xsc = __ldg(xs);
    const int g = lane >> 2, t = lane & 3;
    const bool diag = t == (g >> 1), odd = g & 1;
    for (int j = warp; j < stages; j += FT_W) {
        const int st = j % FT_NS;
        const long long row0 = r0 + (long long)FT_R * j;
        qc_mbar_wait(full + 8 * st, (j / FT_NS) & 1);
        const uint4 *pa = (const uint4 *)(ring + st * stage), *pb = (const uint4 *)(ring + st * stage + kk);
        float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
        for (int c = 0; c < runs; c++) {
            const uint4 p = pa[32 * c + lane], q = pb[32 * c + lane], x0 = xh[64 * c + lane], x1 = xh[64 * c + 32 + lane];
            const u32 pw[4] = {p.x, p.y, p.z, p.w}, qw[4] = {q.x, q.y, q.z, q.w};
            const u32 xw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int e = 0; e < 4; e++)
                qc_mma_f16(d, ft_lo(pw[e]), ft_lo(qw[e]), ft_hi(pw[e]), ft_hi(qw[e]), xw[2 * e], xw[2 * e + 1]);
        }
        __syncwarp();
        if (lane == 0) qc_mbar_arrive(empty + 8 * st); /* the stage's reads are done: the producer may refill it */
        float va = diag ? (odd ? d[1] : d[0]) : 0.f, vb = diag ? (odd ? d[3] : d[2]) : 0.f;
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) {
            va += __shfl_xor_sync(0xffffffffu, va, o);
            vb += __shfl_xor_sync(0xffffffffu, vb, o);
        }
        if (lane == 0) {
#if FP8_MODE == 0
            y[row0] = va * (xsc * __ldg(ws + row0));
            if (row0 + 1 < r1) y[row0 + 1] = vb * (xsc * __ldg(ws + row0 + 1));
#else
            const float s = xsc * __ldg(ws);
            y[row0] = va * s;
            if (row0 + 1 < r1) y[row0 + 1] = vb * s;
#endif
        }
    }
#if FT_TRIGGER == 1 /* the first warp of a block to get here counts for it */
    qc_grid_trigger();
#endif
}
