/* fp8 W8A8 decode linear (m <= 16): FP8 weights streamed once, E4M3 -> f16 in registers, mma.sync m16n8k16 f32 */
/*
 * A block of 8 warps owns 16 output columns (two groups of 8 weight rows) and splits K between its
 * warps in chunks of 64.  In a chunk, lane (g = lane/4, q = lane%4) loads 16 bytes of weight row g of
 * each group at k = 64c + 16q, and the same 16 bytes of x rows g and g+8.  The four mma k16 steps of
 * the chunk use bytes 4s..4s+3 of those loads, with the same placement for x (A) and W (B), so each
 * mma multiplies matching k: a permutation of the sum, not of the products.  E4M3 values are exact in
 * f16 and their products exact in f32.  Warps' partial sums meet in shared memory, in warp order.
 * FP8_MODE 0 channel, 1 tensor: y = sum * (xs[i] * ws[j or 0]).  2 block: each 64-K chunk lies in one
 * 128-K group, so its partial is folded as tot = fmaf(part, xs[i,g] * ws[j/128,g], tot).
 */
#define GV_WARPS 8
#define GV_NG 2 /* 8-row weight groups per block */
#ifndef GV_U
#define GV_U 4 /* chunks whose loads are issued before their mmas: 8 x 16-byte weight loads per lane in flight */
#endif
/* the same at m <= 8, where x's rows g + 8 are not loaded (A rows 8..15 are zero): the registers they held
   can carry more weight loads (A/B runs: QC_FP8_GEMV_OPTS=-DGV_U1=6) */
#ifndef GV_U1
#define GV_U1 GV_U
#endif

__device__ __forceinline__ uint4 qc_ld_stream(const u8 *p) { /* weights are read once: don't keep them in L1 */
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 qc_word(uint4 v, int s) { return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w; }

#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemv_channel
#elif FP8_MODE == 1
#define QC_ENTRY qc_fp8_gemv_tensor
#else
#define QC_ENTRY qc_fp8_gemv_block
#endif
/* NX: x rows loaded per lane (1: row g only, m <= 8; 2: rows g and g + 8); U: chunks in flight per warp */
template <int NX, int U>
__device__ __forceinline__ void qc_gv_body(const u8 *xq, const float *xs, const u8 *w, const float *ws, float *y,
                                           long long m, long long n, long long k, float (*red)[GV_NG][32][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const long long j0 = (long long)blockIdx.x * (8 * GV_NG);
    if (m <= 0 || j0 >= n) return;
    const long long nch = (k + 63) / 64;
    const bool xok0 = g < m, xok1 = g + 8 < m; /* rows of x past m: row 0 stands in */
    const u8 *x0 = xq + (xok0 ? g : 0) * k, *x1 = xq + (xok1 ? g + 8 : 0) * k;
    const u8 *wr[GV_NG];
    bool wok[GV_NG];
#pragma unroll
    for (int t = 0; t < GV_NG; t++) {
        wok[t] = j0 + 8 * t + g < n;
        wr[t] = w + (wok[t] ? j0 + 8 * t + g : 0) * k;
    }
    float d[GV_NG][4];
#pragma unroll
    for (int t = 0; t < GV_NG; t++) d[t][0] = d[t][1] = d[t][2] = d[t][3] = 0.f;
#if FP8_MODE == 2
    const long long kb = (k + QC_FP8_BLOCK - 1) / QC_FP8_BLOCK;
    const float *xs0 = xs + (xok0 ? g : 0) * kb, *xs1 = xs + (xok1 ? g + 8 : 0) * kb;
    float tot[GV_NG][4];
#pragma unroll
    for (int t = 0; t < GV_NG; t++) tot[t][0] = tot[t][1] = tot[t][2] = tot[t][3] = 0.f;
#endif
    /* the mmas of one 64-K chunk c whose x and W bytes are in xa[2], wb[GV_NG] */
    auto chunk = [&](const uint4 *xa, const uint4 *wb, long long c) {
#if FP8_MODE == 2
        float part[GV_NG][4];
#pragma unroll
        for (int t = 0; t < GV_NG; t++) part[t][0] = part[t][1] = part[t][2] = part[t][3] = 0.f;
#define QC_ACC part
#else
        (void)c;
#define QC_ACC d
#endif
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const u32 w0 = qc_word(xa[0], s), w1 = NX == 2 ? qc_word(xa[NX - 1], s) : 0u;
            const u32 a0 = qc_e4m3x2_f16x2(w0 & 0xFFFFu), a1 = NX == 2 ? qc_e4m3x2_f16x2(w1 & 0xFFFFu) : 0u;
            const u32 a2 = qc_e4m3x2_f16x2(w0 >> 16), a3 = NX == 2 ? qc_e4m3x2_f16x2(w1 >> 16) : 0u;
#pragma unroll
            for (int t = 0; t < GV_NG; t++) {
                const u32 bw = qc_word(wb[t], s);
                qc_mma_f16(QC_ACC[t], a0, a1, a2, a3, qc_e4m3x2_f16x2(bw & 0xFFFFu), qc_e4m3x2_f16x2(bw >> 16));
            }
        }
#undef QC_ACC
#if FP8_MODE == 2
        const long long grp = c / 2; /* 64-K chunk c lies in 128-K group c/2 */
        const float a_s0 = xs0[grp], a_s1 = xs1[grp];
#pragma unroll
        for (int t = 0; t < GV_NG; t++) {
            /* columns j0 + 8t + 2q + {0,1}: one 128-column block (16 | 128) */
            const float w_s = ws[((j0 + 8 * t) / QC_FP8_BLOCK) * kb + grp];
            const float s0 = a_s0 * w_s, s1 = a_s1 * w_s;
            tot[t][0] = fmaf(part[t][0], s0, tot[t][0]);
            tot[t][1] = fmaf(part[t][1], s0, tot[t][1]);
            tot[t][2] = fmaf(part[t][2], s1, tot[t][2]);
            tot[t][3] = fmaf(part[t][3], s1, tot[t][3]);
        }
#endif
    };
    /* Whole chunks, GV_U per warp at a time with no predicates: all 2 GV_U x and GV_NG GV_U weight
       loads are issued before the first mma (rows of x past m read row 0: they only feed output rows
       that are not stored; rows of W are < n since 16 | n). */
    const long long kfull = k / 64;
    long long c0 = warp;
    for (; c0 + (long long)GV_WARPS * (U - 1) < kfull; c0 += (long long)GV_WARPS * U) {
        uint4 xa[U][NX], wb[U][GV_NG];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long long kp = (c0 + (long long)u * GV_WARPS) * 64 + 16 * q;
            xa[u][0] = __ldg((const uint4 *)(x0 + kp));
            if (NX == 2) xa[u][NX - 1] = __ldg((const uint4 *)(x1 + kp));
#pragma unroll
            for (int t = 0; t < GV_NG; t++) wb[u][t] = qc_ld_stream(wr[t] + kp);
        }
#pragma unroll
        for (int u = 0; u < U; u++) chunk(xa[u], wb[u], c0 + (long long)u * GV_WARPS);
    }
    /* the rest, one chunk at a time; a ragged last chunk (k % 64) reads zeros past k */
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (; c0 < nch; c0 += GV_WARPS) {
        uint4 xa[NX], wb[GV_NG];
        const long long kp = c0 * 64 + 16 * q;
        const bool kok = kp < k;
        xa[0] = kok ? __ldg((const uint4 *)(x0 + kp)) : zero;
        if (NX == 2) xa[NX - 1] = kok ? __ldg((const uint4 *)(x1 + kp)) : zero;
#pragma unroll
        for (int t = 0; t < GV_NG; t++) wb[t] = kok ? qc_ld_stream(wr[t] + kp) : zero;
        chunk(xa, wb, c0);
    }
#pragma unroll
    for (int t = 0; t < GV_NG; t++)
#pragma unroll
        for (int e = 0; e < 4; e++)
#if FP8_MODE == 2
            red[warp][t][lane][e] = tot[t][e];
#else
            red[warp][t][lane][e] = d[t][e];
#endif
    __syncthreads();
    /* one output per thread: 2 groups x 32 lanes x 4 values = 256 */
    const int t = threadIdx.x >> 7, ln = (threadIdx.x >> 2) & 31, e = threadIdx.x & 3;
    float v = 0.f;
#pragma unroll
    for (int wp = 0; wp < GV_WARPS; wp++) v += red[wp][t][ln][e];
    /* D fragment: value e of lane ln is row ln/4 (+8 for e >= 2), column 2 (ln%4) + e%2 */
    const long long row = (ln >> 2) + (e >= 2 ? 8 : 0), col = j0 + 8 * t + 2 * (ln & 3) + (e & 1);
    if (row < m && col < n) {
#if FP8_MODE == 2
        y[row * n + col] = v;
#elif FP8_MODE == 1
        y[row * n + col] = v * (xs[row] * ws[0]);
#else
        y[row * n + col] = v * (xs[row] * ws[col]);
#endif
    }
}
extern "C" __global__ void __launch_bounds__(GV_WARPS * 32, 2) QC_ENTRY(const u8 *xq, const float *xs, const u8 *w,
                                                                      const float *ws, float *y, long long m,
                                                                      long long n, long long k) {
    __shared__ float red[GV_WARPS][GV_NG][32][4];
    qc_grid_dep(); /* QC_KERNEL_GRID_DEP (fp8.gemv_channel / _tensor / _block): nothing read or written before it */
#if FP8_MODE != 2 /* block mode keeps one body: with both, ptxas spills it at 128 registers */
    if (m <= 8) qc_gv_body<1, GV_U1>(xq, xs, w, ws, y, m, n, k, red);
    else
#endif
        qc_gv_body<2, GV_U>(xq, xs, w, ws, y, m, n, k, red);
}
