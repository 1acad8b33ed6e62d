/* ---- kv_fp8.attn_decode + kv_fp8.attn_decode_reduce ---- */

/* Build-time choices (NVRTC -D): the defaults are what the plugin ships; the
 * GPU test builds the others to time them beside it.
 *   QC_DEC_PIPE 1: each warp loads the next block's K and V codes into
 *     registers before it computes the current block, so one block's bytes
 *     are in flight while the previous one computes (the registers of two
 *     blocks: 2 CTAs per SM, so the partitions should come from 264 CTA
 *     slots, not the host's 396); 0 (default): load, wait, compute (3 CTAs
 *     per SM on sm_90: 12 warps, each with 4 KB in flight while it waits).
 *   QC_DEC_FUSE 1: the last CTA of a (sequence, kv head, q-head group) to
 *     finish combines the partitions (a counter per group in module memory,
 *     set back to zero by that CTA, so every launch and graph replay starts
 *     from zero; one decode launch at a time per loaded module), and the
 *     host gives the reduce an empty grid (not launched); 0: the reduce
 *     kernel combines them (launched with grid (n_heads, n_seqs) by the
 *     caller: the host's launch_dims are the default build's). */
#ifndef QC_DEC_PIPE
#define QC_DEC_PIPE 0
#endif
/*   QC_DEC_V2 1 (default): qc_decode8_v2 below: every load of the prologue in
 *     one round, K/V blocks through a per-warp cp.async ring of
 *     QC_DEC_STAGES blocks in dynamic shared memory (the host's launch_dims
 *     give qc_dec_v2_smem bytes), a combine that loads all partials at once;
 *     0: the first kernel (qc_decode8, static shared memory; QC_DEC_PIPE
 *     applies to it only). */
#ifndef QC_DEC_V2
#define QC_DEC_V2 1
#endif
#ifndef QC_DEC_STAGES
#define QC_DEC_STAGES 4
#endif
#if QC_DEC_STAGES < 1 || QC_DEC_STAGES > 4
#error "QC_DEC_STAGES: 1 to 4 blocks in flight per warp"
#endif
#define QC_DEC_BUFS (QC_DEC_STAGES + 1) /* ring buffers per warp: the one being read, the ones in flight */
#ifndef QC_DEC_FUSE
#define QC_DEC_FUSE 1
#endif
/*   QC_DEC_SWZ 1 (default): v2's warp combine stores its rows padded and
 *     permuted in shared memory (no bank conflicts; H200, B = 1 x 1K 13.4 ->
 *     10.2 us); 0: the plain layout, a 29.6-way conflict on every store (ncu). */
#ifndef QC_DEC_SWZ
#define QC_DEC_SWZ 1
#endif
/*   QC_DEC_PROBE (timing probes of the v2 kernel, wrong results; the GPU test
 *     times them to place the time of one launch): 1 the prologue's first
 *     round alone, 2 no fused combine, 3 the loads without the block math,
 *     4 a return at entry (the launch alone), 5 the first two rounds (the
 *     block-table entries) alone;
 *     0 (default) the kernel. */
#ifndef QC_DEC_PROBE
#define QC_DEC_PROBE 0
#endif
/* CTAs per SM the registers are capped for (the host's DEC_SLOTS assumes 3
 * on 132 SMs; below sm_90 the loop without prefetch spills at 3) */
#if QC_DEC_V2 || QC_DEC_PIPE || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
#define QC_DEC_MIN_CTAS 2
#else
#define QC_DEC_MIN_CTAS 3
#endif
/* CTA slots and waves of the partition formula (the host's kv_fp8_decode_parts
 * with its variant's numbers): v2 holds 2 CTAs per SM (its ring keeps 16
 * blocks in flight per warp set, the registers have room), the first
 * kernel 3; the product stays the core's workspace bound, 1584 */
#if QC_DEC_V2
#define QC_DEC_PSLOTS 264
#define QC_DEC_PWAVES 6
#define QC_DEC_ONE_LAYER 132
#else
#define QC_DEC_PSLOTS QC_DEC_SLOTS
#define QC_DEC_PWAVES QC_DEC_MAX_WAVES
#endif
/* groups the fused combine counts (the host's KV_FP8_DEC_COUNTERS); more run unfused */
#define QC_DEC_COUNTERS 65536
__device__ unsigned qc_dec_count[QC_DEC_COUNTERS];

/* The partition count by the host's formula (kv_fp8_decode_parts), for the
 * reduce kernel, one candidate p per lane (1..64) instead of a serial loop
 * of 64-bit divisions: the least cost wins, ties to the smaller p.  Every
 * lane of the warp must call it. */
__device__ __forceinline__ int qc_dec_parts_warp(int n_seqs, int n_kv_heads, int max_blocks) {
    long long pairs = (long long)n_seqs * n_kv_heads, est = (long long)max_blocks * QC_KVB;
    if (pairs < 1) pairs = 1;
    if (est < 1) est = 1;
    long long cap = (est + QC_DEC_MIN_PART - 1) / QC_DEC_MIN_PART;
    if (cap > QC_DEC_MAX_PARTS) cap = QC_DEC_MAX_PARTS;
#if QC_DEC_V2
    /* few pairs: one CTA per SM, as many partitions as fill one layer (the host's DEC_ONE_LAYER) */
    if (pairs * 2 <= QC_DEC_ONE_LAYER) return (int)(QC_DEC_ONE_LAYER / pairs < cap ? QC_DEC_ONE_LAYER / pairs : cap);
#endif
    const int lane = threadIdx.x & 31;
    long long best_cost = -1;
    int best = 1;
    for (int i = 0; i < 2; i++) {
        long long p = lane + 1 + 32 * i;
        if (p == 1 || (p <= cap && pairs * p <= (long long)QC_DEC_PWAVES * QC_DEC_PSLOTS)) {
            long long cost = (pairs * p + QC_DEC_PSLOTS - 1) / QC_DEC_PSLOTS * ((est + p - 1) / p + QC_DEC_CTA_COST);
            if (best_cost < 0 || cost < best_cost) best_cost = cost, best = (int)p;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        long long oc = __shfl_xor_sync(0xffffffffu, best_cost, o);
        int op = __shfl_xor_sync(0xffffffffu, best, o);
        if (oc >= 0 && (best_cost < 0 || oc < best_cost || (oc == best_cost && op < best))) best_cost = oc, best = op;
    }
    return best;
}
__device__ __forceinline__ int qc_dec_part_len(int ctx, int nparts) {
    int per = (ctx + nparts - 1) / nparts;
    per = (per + QC_KVB - 1) / QC_KVB * QC_KVB;
    return per < QC_DEC_MIN_PART ? QC_DEC_MIN_PART : per;
}

/* One block's codes in one thread's registers (the fragment layout below). */
template <int D> struct qc_kvregs {
    uint4 k[2][D / 64];
    u32 v[4][D / 32];
};
template <int D>
__device__ __forceinline__ void qc_dec_load(qc_kvregs<D> &r, const u8 *kb, const u8 *vb, int g, int t) {
    constexpr int VW = D / 8;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int tok = 4 * (g >> 1) + 2 * j + (g & 1);
#pragma unroll
        for (int c = 0; c < D / 64; c++) r.k[j][c] = qc_ld16(kb + tok * D + 64 * c + 16 * t);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (D == 128) {
            uint4 x = qc_ld16(vb + (4 * t + i) * D + VW * g);
            r.v[i][0] = x.x, r.v[i][1] = x.y, r.v[i][2] = x.z, r.v[i][3] = x.w;
        } else {
            uint2 x = qc_ld8(vb + (4 * t + i) * D + VW * g);
            r.v[i][0] = x.x, r.v[i][1] = x.y;
        }
    }
}

/* The online softmax over one block (`valid` of its 16 tokens count) from
 * its codes in r (V rows past valid are zeroed in r): m, l per row (g: 0,
 * g + 8: 1), o the PV accumulators.  H8: no q head in rows 8..15 (a group
 * of at most 8, as 32/8 or 64/8): their fragments are zero constants, their
 * softmax is skipped and their accumulators take no registers. */
template <int D, bool E5, bool H8>
__device__ __forceinline__ void qc_dec_block(qc_kvregs<D> &r, int valid, const u32 (&qa)[D / 16][4], float sl2,
                                             float &m0, float &m1, float &l0, float &l1, float (&o)[D / 8][4], int t) {
    constexpr int VW = D / 8;
    /* scores of tokens 4t + 2j + e for rows g (s[j][e]) and g + 8 (s[j][2 + e]) */
    float s[2][4];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const u32 w = qc_word(r.k[j][ks >> 2], ks & 3);
            qc_mma(s[j], qa[ks][0], H8 ? 0u : qa[ks][1], qa[ks][2], H8 ? 0u : qa[ks][3], qc_fp8x2_f16x2<E5>(w),
                   qc_fp8x2_f16x2<E5>(w >> 16));
        }
    }
    float mx0 = QC_NEG_INF, mx1 = QC_NEG_INF;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            bool ok = 4 * t + 2 * j + e < valid;
            s[j][e] = ok ? s[j][e] * sl2 : QC_NEG_INF;
            s[j][2 + e] = ok ? s[j][2 + e] * sl2 : QC_NEG_INF;
            mx0 = fmaxf(mx0, s[j][e]);
            mx1 = fmaxf(mx1, s[j][2 + e]);
        }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    /* the block's first token is always valid, so the new maxima are finite */
    const float n0 = fmaxf(m0, mx0), n1 = H8 ? m1 : fmaxf(m1, mx1);
    const float a0 = exp2f(m0 - n0), a1 = H8 ? 1.f : exp2f(m1 - n1);
    m0 = n0;
    m1 = n1;
    float p[2][4];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        p[j][0] = exp2f(s[j][0] - n0);
        p[j][1] = exp2f(s[j][1] - n0);
        p[j][2] = H8 ? 0.f : exp2f(s[j][2] - n1);
        p[j][3] = H8 ? 0.f : exp2f(s[j][3] - n1);
    }
    l0 = l0 * a0 + (p[0][0] + p[0][1] + p[1][0] + p[1][1]);
    if (!H8) l1 = l1 * a1 + (p[0][2] + p[0][3] + p[1][2] + p[1][3]);
    /* P as the A fragment: k 2t, 2t+1 <-> tokens 4t, 4t+1; k 2t+8, 2t+9 <-> 4t+2, 4t+3 */
    const u32 pa0 = qc_h2(p[0][0], p[0][1]), pa1 = H8 ? 0u : qc_h2(p[0][2], p[0][3]);
    const u32 pa2 = qc_h2(p[1][0], p[1][1]), pa3 = H8 ? 0u : qc_h2(p[1][2], p[1][3]);
    /* V rows past the end may hold anything (NaN codes): p = 0 must stay 0 */
#pragma unroll
    for (int i = 0; i < 4; i++)
        if (4 * t + i >= valid)
#pragma unroll
            for (int w = 0; w < D / 32; w++) r.v[i][w] = 0u;
    const u32(&vw)[4][D / 32] = r.v;
#pragma unroll
    for (int n = 0; n < VW; n++) {
        /* byte n of tokens 4t..4t+3: pairs (4t, 4t+1) and (4t+2, 4t+3), low byte first */
        const int w = n >> 2;
        const u32 sel = (n & 2) ? 0x7362u : 0x5140u;
        u32 p01 = __byte_perm(vw[0][w], vw[1][w], sel), p23 = __byte_perm(vw[2][w], vw[3][w], sel);
        if (n & 1) p01 >>= 16, p23 >>= 16;
        /* H8: rows 8..15 come out zero and are dropped, so o[n][2..3] stay 0 */
        float acc[4] = {o[n][0] * a0, o[n][1] * a0, H8 ? 0.f : o[n][2] * a1, H8 ? 0.f : o[n][3] * a1};
        qc_mma(acc, pa0, pa1, pa2, pa3, qc_fp8x2_f16x2<E5>(p01), qc_fp8x2_f16x2<E5>(p23));
        o[n][0] = acc[0];
        o[n][1] = acc[1];
        if (!H8) o[n][2] = acc[2], o[n][3] = acc[3];
    }
}

#if QC_DEC_FUSE
/* After a CTA wrote its partials (rows pair0 .. pair0 + hn - 1 of work): the
 * last partition of its group to finish combines them all, as the reduce
 * kernel does (the threadfence-reduction pattern: partials, fence, count; the
 * last CTA reads the others' partials through L2).  One copy for every
 * instance of qc_decode8; every thread of the CTA calls it. */
__device__ __noinline__ void qc_dec_combine(float *out, const float *work, float *sm, int n_seqs, int n_heads, int D,
                                            int nparts, int nused, long long pair0, int hn) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long grp = (long long)blockIdx.z * gridDim.y + blockIdx.y;
    const float *ml = work + (long long)n_seqs * n_heads * nparts * D;
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old = atomicAdd(&qc_dec_count[grp], 1u);
        is_last = old == (unsigned)nused - 1u;
        if (is_last) atomicExch(&qc_dec_count[grp], 0u); /* every other CTA of the group has counted */
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    /* weights 2^(m_p - M) / sum_p 2^(m_p - M) l_p per row, one warp per row */
    float *wts = sm; /* [16][QC_DEC_MAX_PARTS] */
    for (int r = warp; r < hn; r += QC_DEC_WARPS) {
        const long long base = (pair0 + r) * nparts;
        const bool u0 = lane < nused, u1 = lane + 32 < nused;
        const float ma = u0 ? __ldcg(ml + 2 * (base + lane)) : QC_NEG_INF;
        const float mb = u1 ? __ldcg(ml + 2 * (base + lane + 32)) : QC_NEG_INF;
        const float la = u0 ? __ldcg(ml + 2 * (base + lane) + 1) : 0.f;
        const float lb = u1 ? __ldcg(ml + 2 * (base + lane + 32) + 1) : 0.f;
        float mm = fmaxf(ma, mb);
        for (int k = 16; k > 0; k >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, k));
        const float wa = u0 ? exp2f(ma - mm) : 0.f, wb = u1 ? exp2f(mb - mm) : 0.f;
        float l = wa * la + wb * lb;
        for (int k = 16; k > 0; k >>= 1) l += __shfl_xor_sync(0xffffffffu, l, k);
        const float inv = 1.f / l;
        if (u0) wts[r * QC_DEC_MAX_PARTS + lane] = wa * inv;
        if (u1) wts[r * QC_DEC_MAX_PARTS + lane + 32] = wb * inv;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hn * D; i += blockDim.x) {
        const int r = i / D, d = i - r * D;
        const float *wp = work + (pair0 + r) * nparts * D + d, *wr = wts + r * QC_DEC_MAX_PARTS;
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        int p = 0;
        for (; p + 4 <= nused; p += 4) { /* four independent loads in flight */
            a0 += wr[p] * __ldcg(wp + (long long)p * D);
            a1 += wr[p + 1] * __ldcg(wp + (long long)(p + 1) * D);
            a2 += wr[p + 2] * __ldcg(wp + (long long)(p + 2) * D);
            a3 += wr[p + 3] * __ldcg(wp + (long long)(p + 3) * D);
        }
        for (; p < nused; p++) a0 += wr[p] * __ldcg(wp + (long long)p * D);
        out[(pair0 + r) * D + d] = (a0 + a1) + (a2 + a3);
    }
}
#endif

/* One CTA = (partition, kv head, up to 16 of its q heads, sequence); each of
 * the 4 warps takes every 4th 16-token block and keeps its own online
 * softmax; all q heads of the kv head (up to 16) share every K and V load.
 * S = Q K^T and O += P V are m16n8k16 f16 mma (f32 accumulate)
 * with the q heads as rows.  The FP8 codes go from global memory (16-byte
 * loads; 8-byte V loads at d 64) straight into fragments, converted to f16
 * in registers; the k index of both products is a permutation chosen so
 * that each load feeds whole fragment registers:
 *   S: k step ks of thread (g, t) covers dims 64(ks>>2) + 16t + 4(ks&3) + 0..3,
 *      so one 16-byte load of K[token][64c + 16t ..] serves 4 k steps; the
 *      n-tile j column g is token 4(g>>1) + 2j + (g&1), so a thread's scores
 *      are tokens 4t..4t+3, exactly the P fragment it needs;
 *   PV: thread (g, t) loads V[token 4t + i][VW g .. VW g + VW - 1] (VW = D/8
 *      bytes); n-tile n column g is dim VW g + n.
 * The K scale is folded into the softmax's scale and the V scale into the
 * output, so the products see the raw codes.  The partition count is the
 * grid's x (the host's kv_fp8_decode_parts). */
template <int D, bool E5, bool H8>
__device__ __forceinline__ void qc_decode8(const float *q, const u8 *kc, const u8 *vc, const int *bt,
                                           const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads,
                                           int n_kv_heads, int max_blocks, float scale, float kmul, float vmul,
                                           float *sm) {
    constexpr int VW = D / 8; /* V bytes per token and thread; also the PV n-tiles */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int gq = n_heads / n_kv_heads, nsub = (gq + 15) / 16;
    const int part = blockIdx.x, seq = blockIdx.z, kvh = blockIdx.y / nsub, sub = blockIdx.y % nsub;
    const int h0 = kvh * gq + sub * 16, hn = min(16, gq - sub * 16);
    const int nparts = gridDim.x;
    if (seq >= n_seqs || kvh >= n_kv_heads) return;
    int ctx = ctx_lens[seq];
    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;
    const int plen = qc_dec_part_len(ctx, nparts), nused = (ctx + plen - 1) / plen;
    if (part >= (nused > 1 ? nused : 1)) return;
    if (ctx == 0) { /* nothing to attend to: zeros */
        for (int i = threadIdx.x; i < hn * D; i += blockDim.x)
            out[((long long)seq * n_heads + h0 + i / D) * D + i % D] = 0.f;
        return;
    }
    const int start = part * plen, end = min(ctx, start + plen);
    const int b0 = start / QC_KVB, b1 = (end + QC_KVB - 1) / QC_KVB;
    constexpr long long head_stride = (long long)QC_KVB * D; /* bytes of one block of one head */
    const int *btr = bt + (long long)seq * max_blocks;
    /* block ids of this warp's loads li .. li + 31 (tab), one per lane; with
     * QC_DEC_PIPE the 32 after them too (tab2), fetched 32 loads ahead */
    int tab = b0 + warp + 4 * lane < b1 ? btr[b0 + warp + 4 * lane] : 0;
#if QC_DEC_PIPE
    int tab2 = b0 + warp + 4 * (lane + 32) < b1 ? btr[b0 + warp + 4 * (lane + 32)] : 0;
#endif

    /* q rows g and g + 8 as f16 A fragments (the S permutation); rows past hn are zero */
    u32 qa[D / 16][4];
    {
        const float *q0 = q + ((long long)seq * n_heads + h0 + g) * D;
        const float *q1 = q0 + 8 * D;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            int d = 64 * (ks >> 2) + 16 * t + 4 * (ks & 3);
            float4 x = g < hn ? *(const float4 *)(q0 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
            float4 y = g + 8 < hn ? *(const float4 *)(q1 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
            qa[ks][0] = qc_h2(x.x, x.y);
            qa[ks][2] = qc_h2(x.z, x.w);
            qa[ks][1] = H8 ? 0u : qc_h2(y.x, y.y);
            qa[ks][3] = H8 ? 0u : qc_h2(y.z, y.w);
        }
    }
    const float sl2 = scale * kmul * QC_LOG2E;
    float m0 = QC_NEG_INF, m1 = QC_NEG_INF, l0 = 0.f, l1 = 0.f;
    float o[VW][4];
#pragma unroll
    for (int n = 0; n < VW; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    /* the id of block bb, this warp's load li = (bb - b0 - warp) / 4: loads go in order */
    auto bid_of = [&](int bb) {
        const int li = (bb - b0 - warp) >> 2;
        if ((li & 31) == 0 && li) {
#if QC_DEC_PIPE
            tab = tab2;
            int nb = bb + 4 * (32 + lane);
            tab2 = nb < b1 ? btr[nb] : 0;
#else
            int nb = bb + 4 * lane;
            tab = nb < b1 ? btr[nb] : 0;
#endif
        }
        return __shfl_sync(0xffffffffu, tab, li & 31);
    };
#if QC_DEC_PIPE
    /* two register sets: the loads of block b + 4 go out before block b computes */
    qc_kvregs<D> ra, rb;
    int b = b0 + warp;
    if (b < b1) {
        const long long off = ((long long)bid_of(b) * n_kv_heads + kvh) * head_stride;
        qc_dec_load<D>(ra, kc + off, vc + off, g, t);
    }
    while (b < b1) {
        if (b + QC_DEC_WARPS < b1) {
            const long long off = ((long long)bid_of(b + QC_DEC_WARPS) * n_kv_heads + kvh) * head_stride;
            qc_dec_load<D>(rb, kc + off, vc + off, g, t);
        }
        qc_dec_block<D, E5, H8>(ra, end - b * QC_KVB, qa, sl2, m0, m1, l0, l1, o, t);
        b += QC_DEC_WARPS;
        if (b >= b1) break;
        if (b + QC_DEC_WARPS < b1) {
            const long long off = ((long long)bid_of(b + QC_DEC_WARPS) * n_kv_heads + kvh) * head_stride;
            qc_dec_load<D>(ra, kc + off, vc + off, g, t);
        }
        qc_dec_block<D, E5, H8>(rb, end - b * QC_KVB, qa, sl2, m0, m1, l0, l1, o, t);
        b += QC_DEC_WARPS;
    }
#else
    for (int b = b0 + warp; b < b1; b += QC_DEC_WARPS) {
        qc_kvregs<D> r;
        const long long off = ((long long)bid_of(b) * n_kv_heads + kvh) * head_stride;
        qc_dec_load<D>(r, kc + off, vc + off, g, t);
        qc_dec_block<D, E5, H8>(r, end - b * QC_KVB, qa, sl2, m0, m1, l0, l1, o, t);
    }
#endif
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

    /* combine the warps: sm = [warps][16 rows][D] of o, then [warps][16] m and l */
    float *so = sm, *sm_m = sm + QC_DEC_WARPS * 16 * D, *sm_l = sm_m + QC_DEC_WARPS * 16;
    /* n-tile n, column 2t + e is dim VW (2t + e) + n */
#pragma unroll
    for (int n = 0; n < VW; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int d = VW * (2 * t + e) + n;
            so[(warp * 16 + g) * D + d] = o[n][e];
            so[(warp * 16 + g + 8) * D + d] = o[n][2 + e];
        }
    if (t == 0) {
        sm_m[warp * 16 + g] = m0;
        sm_m[warp * 16 + g + 8] = m1;
        sm_l[warp * 16 + g] = l0;
        sm_l[warp * 16 + g + 8] = l1;
    }
    __syncthreads();
    const long long pair0 = (long long)seq * n_heads + h0;
    float *ml = work + (long long)n_seqs * n_heads * nparts * D;
    for (int i = threadIdx.x; i < hn * D; i += blockDim.x) {
        int r = i / D, d = i - r * D;
        float mm = QC_NEG_INF;
#pragma unroll
        for (int w = 0; w < QC_DEC_WARPS; w++) mm = fmaxf(mm, sm_m[w * 16 + r]);
        float acc = 0.f, l = 0.f;
#pragma unroll
        for (int w = 0; w < QC_DEC_WARPS; w++) {
            float f = sm_m[w * 16 + r] == QC_NEG_INF ? 0.f : exp2f(sm_m[w * 16 + r] - mm);
            acc += f * so[(w * 16 + r) * D + d];
            l += f * sm_l[w * 16 + r];
        }
        acc *= vmul;
        if (nused <= 1) {
            out[(pair0 + r) * D + d] = acc / l;
        } else {
            long long idx = (pair0 + r) * nparts + part;
            work[idx * D + d] = acc;
            if (d == 0) {
                ml[2 * idx] = mm;
                ml[2 * idx + 1] = l;
            }
        }
    }
#if QC_DEC_FUSE
    if (nused > 1 && (long long)n_seqs * gridDim.y <= QC_DEC_COUNTERS)
        qc_dec_combine(out, work, sm, n_seqs, n_heads, D, nparts, nused, pair0, hn);
#endif
}

/* ---- QC_DEC_V2: the latency-cut decode ----
 *
 * Dependent global round trips on one CTA's critical path (B = 1 x 1024
 * tokens, 32/8 heads, d 128: 16 partitions (v2: one CTA per SM), 64 tokens
 * = one block per warp; B = 16 x 32768: 2 partitions, 256 blocks per warp):
 *   first kernel: (1) ctx_lens and the scales, (2) the block-table entries and
 *   q (after the ctx-dependent return), (3) the K/V codes of a block, then one
 *   round per block per warp (load, wait, compute: 1 at 1K, 171 at 32K, with
 *   4 KB in flight per warp), V's scale possibly sunk to the end, the fence and
 *   the counter (2 L2 trips), then in the last CTA the m/l loads and the
 *   partial sums with 4 loads in flight: 4 items x 4 rounds of 4 = 16 L2
 *   trips at 16 partitions, 64 at 64.
 *   v2: (1) ctx_lens, q, the scales and an L2 prefetch of the table row, all
 *   issued together (volatile loads the compiler cannot sink past the ctx
 *   test), (2) the table entries (L2 hits), (3) the first QC_DEC_STAGES
 *   blocks of every warp at once by cp.async, each next block's copy issued
 *   as soon as a block's codes are in registers (QC_DEC_STAGES blocks in
 *   flight per warp the whole loop: 12 KB at 3, 36 KB per CTA), the table's
 *   next 32 entries fetched 32 blocks ahead; the fence and counter; the last
 *   CTA loads m, l and the partial rows of 16 partitions per round (1 round
 *   at 16 partitions, 4 at 64).
 * Ring layout: warp w, buffer s at dsm + (w * QC_DEC_BUFS + s) * 32 D bytes:
 * the block's K rows (16 x D bytes) then its V rows, 16-byte chunks swizzled
 * (qc_v2_kofs / qc_v2_vofs) so that the fragment reads below are free of
 * bank conflicts; copies and reads use the same functions. */
template <int D> __device__ __forceinline__ int qc_v2_kofs(int row, int ch) {
    if constexpr (D == 128) return row * 128 + ((ch ^ ((row & 1) << 2)) << 4);
    else return row * 64 + (ch << 4); /* rows r, r + 1 of a read are 64 bytes apart: no conflict */
}
template <int D> __device__ __forceinline__ int qc_v2_vofs(int row, int ch) {
    if constexpr (D == 128) return row * 128 + ((ch ^ (((row >> 2) & 3) << 1)) << 4);
    /* d 64: rows 4t + i of one read share their bank half; swapping row pairs
     * of odd t and the chunk halves of t >= 2 spreads them over all 32 banks */
    else return (row ^ ((row >> 2) & 1)) * 64 + ((ch ^ (((row >> 3) & 1) << 1)) << 4);
}
/* dynamic shared memory the v2 decode needs: the ring, or the warps' combine if larger */
__host__ __device__ constexpr int qc_dec_v2_smem(int D) {
    return QC_DEC_WARPS * QC_DEC_BUFS * 32 * D > QC_DEC_WARPS * 16 * (D + 4) * 4 + 2 * QC_DEC_WARPS * 16 * 4
               ? QC_DEC_WARPS * QC_DEC_BUFS * 32 * D
               : QC_DEC_WARPS * 16 * (D + 4) * 4 + 2 * QC_DEC_WARPS * 16 * 4;
}
__device__ __forceinline__ void qc_cp16(u32 dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void qc_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void qc_cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ uint4 qc_lds16(u32 a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}
__device__ __forceinline__ uint2 qc_lds8(u32 a) {
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
    return v;
}
/* volatile: issued where written, before the ctx-dependent return */
__device__ __forceinline__ float4 qc_ldq4(const float *p) {
    float4 v;
    asm volatile("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float qc_ldf(const float *p) {
    float v;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ int qc_ldi(const int *p) {
    int v;
    asm volatile("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
/* one block (K then V, 32 D bytes) into ring buffer `st` (shared address),
 * D / 16 copies per lane: lane copies chunk (lane & 7) of rows 4 (lane >> 3)
 * + k at d 128 (the V swizzle is then the same for all its k), chunk
 * (lane & 3) of rows (lane >> 2) + 8 k at d 64 (8 lanes of a phase write two
 * adjacent 64-byte rows); every 8-lane phase writes 32 distinct banks */
template <int D> __device__ __forceinline__ void qc_v2_issue(u32 st, const u8 *kb, const u8 *vb, int lane) {
    constexpr int CH = D / 16, RPL = 16 / (32 / CH); /* chunks per row; rows per lane */
#pragma unroll
    for (int k = 0; k < RPL; k++) {
        const int row = D == 128 ? 4 * (lane >> 3) + k : (lane >> 2) + 8 * k, ch = lane % CH, i = row * CH + ch;
        qc_cp16(st + qc_v2_kofs<D>(row, ch), kb + 16 * i);
        qc_cp16(st + 16 * D + qc_v2_vofs<D>(row, ch), vb + 16 * i);
    }
}
/* the fragments of qc_dec_load, from ring stage st */
template <int D> __device__ __forceinline__ void qc_v2_read(qc_kvregs<D> &r, u32 st, int g, int t) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int tok = 4 * (g >> 1) + 2 * j + (g & 1);
#pragma unroll
        for (int c = 0; c < D / 64; c++) r.k[j][c] = qc_lds16(st + qc_v2_kofs<D>(tok, 4 * c + t));
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (D == 128) {
            const uint4 x = qc_lds16(st + 16 * D + qc_v2_vofs<D>(4 * t + i, g));
            r.v[i][0] = x.x, r.v[i][1] = x.y, r.v[i][2] = x.z, r.v[i][3] = x.w;
        } else {
            const uint2 x = qc_lds8(st + 16 * D + qc_v2_vofs<D>(4 * t + i, g >> 1) + 8 * (g & 1));
            r.v[i][0] = x.x, r.v[i][1] = x.y;
        }
    }
}

#if QC_DEC_FUSE
/* The combine of qc_dec_combine (same counter protocol) with its loads
 * batched: thread item (row r, dims 4 e .. 4 e + 3) merges the partitions
 * 16 at a time (m, l and the 4 partial sums of each loaded before any is
 * used), an online softmax over the batches. */
__device__ __noinline__ void qc_dec_combine_v2(float *out, const float *work, int n_seqs, int n_heads, int D,
                                               int nparts, int nused, long long pair0, int hn) {
    const long long grp = (long long)blockIdx.z * gridDim.y + blockIdx.y;
    const float *ml = work + (long long)n_seqs * n_heads * nparts * D;
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old = atomicAdd(&qc_dec_count[grp], 1u);
        is_last = old == (unsigned)nused - 1u;
        if (is_last) atomicExch(&qc_dec_count[grp], 0u); /* every other CTA of the group has counted */
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const int q4 = D / 4;
    for (int it = threadIdx.x; it < hn * q4; it += blockDim.x) {
        const int r = it / q4, e = it - r * q4;
        const long long base = (pair0 + r) * nparts;
        float mm = QC_NEG_INF, l = 0.f;
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int p0 = 0; p0 < nused; p0 += 16) {
            float2 pm[16];
            float4 pa[16];
#pragma unroll
            for (int k = 0; k < 16; k++) {
                const bool u = p0 + k < nused;
                pm[k] = u ? __ldcg((const float2 *)(ml + 2 * (base + p0 + k))) : make_float2(QC_NEG_INF, 0.f);
                pa[k] = u ? __ldcg((const float4 *)(work + (base + p0 + k) * D) + e) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
            float nm = mm;
#pragma unroll
            for (int k = 0; k < 16; k++) nm = fmaxf(nm, pm[k].x);
            /* nm is finite: partition p0 is used and holds a valid token */
            const float f = exp2f(mm - nm);
            l *= f, a.x *= f, a.y *= f, a.z *= f, a.w *= f;
#pragma unroll
            for (int k = 0; k < 16; k++) {
                const float w = p0 + k < nused ? exp2f(pm[k].x - nm) : 0.f;
                l += w * pm[k].y;
                a.x += w * pa[k].x, a.y += w * pa[k].y, a.z += w * pa[k].z, a.w += w * pa[k].w;
            }
            mm = nm;
        }
        const float inv = 1.f / l;
        *((float4 *)(out + (pair0 + r) * D) + e) = make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv);
    }
}
#endif

/* qc_decode8's work (same grid, partitions, fragments, block math and
 * partial layout) with the v2 loads; sm: the dynamic shared memory. */
template <int D, bool E5, bool H8>
__device__ __forceinline__ void qc_decode8_v2(const float *q, const u8 *kc, const u8 *vc, const int *bt,
                                              const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads,
                                              int n_kv_heads, int max_blocks, float scale, const float *k_scale,
                                              const float *v_scale, u32 variant, u8 *dsm) {
    constexpr int VW = D / 8;
    constexpr int STAGE = 32 * D; /* bytes of one block's K and V */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int gq = n_heads / n_kv_heads, nsub = (gq + 15) / 16;
    const int part = blockIdx.x, seq = blockIdx.z, kvh = blockIdx.y / nsub, sub = blockIdx.y % nsub;
    const int h0 = kvh * gq + sub * 16, hn = min(16, gq - sub * 16);
    const int nparts = gridDim.x;
    if (seq >= n_seqs || kvh >= n_kv_heads) return;
    const int *btr = bt + (long long)seq * max_blocks;

    /* round 1: ctx, the scales, q and a prefetch of the table row (up to 4 KB) */
    const int ctx_raw = qc_ldi(ctx_lens + seq);
    float kmul = 1.f, vmul = 1.f;
    if (!E5) {
        const int si = variant == QC_KV_E4M3_HEAD ? kvh : 0;
        kmul = qc_ldf(k_scale + si) * QC_E4M3_POST;
        vmul = qc_ldf(v_scale + si) * QC_E4M3_POST;
    }
    float4 qx[D / 16], qy[D / 16];
    {
        const float *q0 = q + ((long long)seq * n_heads + h0 + g) * D;
        const float *q1 = q0 + 8 * D;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            const int d = 64 * (ks >> 2) + 16 * t + 4 * (ks & 3);
            qx[ks] = g < hn ? qc_ldq4(q0 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
            if (!H8) qy[ks] = g + 8 < hn ? qc_ldq4(q1 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    if (max_blocks <= 1024 && (int)threadIdx.x * 32 < max_blocks)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(btr + 32 * threadIdx.x));

    int ctx = ctx_raw < 0 ? 0 : ctx_raw > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx_raw;
    const int plen = qc_dec_part_len(ctx, nparts), nused = (ctx + plen - 1) / plen;
    if (part >= (nused > 1 ? nused : 1)) return;
    if (ctx == 0) { /* nothing to attend to: zeros */
        for (int i = threadIdx.x; i < hn * D; i += blockDim.x)
            out[((long long)seq * n_heads + h0 + i / D) * D + i % D] = 0.f;
        return;
    }
#if QC_DEC_PROBE == 1
    if (ctx_raw == -7 && qx[0].x == 1.f && kmul == vmul) out[0] = kmul; /* the loads are used */
    return;
#endif
    const int start = part * plen, end = min(ctx, start + plen);
    const int b0 = start / QC_KVB, b1 = (end + QC_KVB - 1) / QC_KVB;
    constexpr long long head_stride = (long long)QC_KVB * D;
    /* round 2: block ids of this warp's blocks 0 .. 31 (tab), one per lane; the next 32 prefetched to L2 */
    int tab = b0 + warp + 4 * lane < b1 ? btr[b0 + warp + 4 * lane] : 0;
    if (b0 + warp + 4 * (lane + 32) < b1) asm volatile("prefetch.global.L2 [%0];" ::"l"(btr + b0 + warp + 4 * (lane + 32)));
#if QC_DEC_PROBE == 5
    if (__shfl_sync(0xffffffffu, tab, 0) == -7 && qx[0].x == 1.f) out[0] = kmul; /* the loads are used */
    return;
#endif

    u32 qa[D / 16][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        qa[ks][0] = qc_h2(qx[ks].x, qx[ks].y);
        qa[ks][2] = qc_h2(qx[ks].z, qx[ks].w);
        qa[ks][1] = H8 ? 0u : qc_h2(qy[ks].x, qy[ks].y);
        qa[ks][3] = H8 ? 0u : qc_h2(qy[ks].z, qy[ks].w);
    }
    const float sl2 = scale * kmul * QC_LOG2E;
    float m0 = QC_NEG_INF, m1 = QC_NEG_INF, l0 = 0.f, l1 = 0.f;
    float o[VW][4];
#pragma unroll
    for (int n = 0; n < VW; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    /* this warp's blocks: b0 + warp + 4 li, li < nw; copies are issued in li order */
    const int nw = b1 - b0 - warp > 0 ? (b1 - b0 - warp + QC_DEC_WARPS - 1) / QC_DEC_WARPS : 0;
    const u32 ring = (u32)__cvta_generic_to_shared(dsm) + (u32)(warp * QC_DEC_BUFS * STAGE);
    auto issue = [&](int li) {
        if ((li & 31) == 0 && li) { /* entries li .. li + 31 (L2 hits), and a prefetch of the 32 after them */
            const int nb = b0 + warp + QC_DEC_WARPS * (li + lane);
            tab = nb < b1 ? btr[nb] : 0;
            if (nb + 32 * QC_DEC_WARPS < b1) asm volatile("prefetch.global.L2 [%0];" ::"l"(btr + nb + 32 * QC_DEC_WARPS));
        }
        const int bid = __shfl_sync(0xffffffffu, tab, li & 31);
        const long long off = ((long long)bid * n_kv_heads + kvh) * head_stride;
        qc_v2_issue<D>(ring + (u32)((li % QC_DEC_BUFS) * STAGE), kc + off, vc + off, lane);
    };
    /* round 3: the first QC_DEC_STAGES blocks (one commit group each, empty past nw) */
#pragma unroll
    for (int s = 0; s < QC_DEC_STAGES; s++) {
        if (s < nw) issue(s);
        qc_cp_commit();
    }
    for (int li = 0; li < nw; li++) {
        /* block li + STAGES into the buffer block li - 1 left (read by every lane before the last
         * __syncwarp), before waiting: STAGES blocks stay in flight while block li computes, and
         * the copy's address math is done before block li's codes take their registers */
        if (li + QC_DEC_STAGES < nw) issue(li + QC_DEC_STAGES);
        qc_cp_commit();
        qc_cp_wait<QC_DEC_STAGES>(); /* this lane's copies of block li have landed */
        __syncwarp();                 /* ... and every lane's */
        qc_kvregs<D> r;
        qc_v2_read<D>(r, ring + (u32)((li % QC_DEC_BUFS) * STAGE), g, t);
        __syncwarp(); /* every lane has read buffer li before block li + STAGES + 1 refills it */
        const int b = b0 + warp + QC_DEC_WARPS * li;
#if QC_DEC_PROBE == 3
        o[0][0] += __uint_as_float(r.k[0][0].x ^ r.v[0][0] ^ (u32)b) * 0.f, m0 = m1 = 0.f, l0 = l1 = 1.f;
#else
        qc_dec_block<D, E5, H8>(r, end - b * QC_KVB, qa, sl2, m0, m1, l0, l1, o, t);
#endif
    }
    qc_cp_wait<0>();
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

    /* combine the warps as qc_decode8 does, in the ring's memory once every warp is done with it.
     * QC_DEC_SWZ: rows SD = D + 4 floats apart, dim d = VW (2t + e) + n of a row at 8n + t + 4e, so that
     * the 32 lanes of a store (g, t) hit 32 banks (4g + t); the plain layout put them all in one bank
     * (ncu: a 29.6-way conflict on every shared store, up to 3 us of a B = 1 x 1K launch). */
#if QC_DEC_SWZ
    constexpr int SD = D + 4;
#else
    constexpr int SD = D;
#endif
    float *sm = (float *)dsm;
    float *so = sm, *sm_m = sm + QC_DEC_WARPS * 16 * SD, *sm_l = sm_m + QC_DEC_WARPS * 16;
    __syncthreads();
#pragma unroll
    for (int n = 0; n < VW; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
#if QC_DEC_SWZ
            const int c = 8 * n + t + 4 * e;
#else
            const int c = VW * (2 * t + e) + n;
#endif
            so[(warp * 16 + g) * SD + c] = o[n][e];
            so[(warp * 16 + g + 8) * SD + c] = o[n][2 + e];
        }
    if (t == 0) {
        sm_m[warp * 16 + g] = m0;
        sm_m[warp * 16 + g + 8] = m1;
        sm_l[warp * 16 + g] = l0;
        sm_l[warp * 16 + g + 8] = l1;
    }
    __syncthreads();
    const long long pair0 = (long long)seq * n_heads + h0;
    float *ml = work + (long long)n_seqs * n_heads * nparts * D;
    for (int i = threadIdx.x; i < hn * D; i += blockDim.x) {
        /* c: the position in the shared row (consecutive lanes, no conflict); d: the dim it holds */
        const int r = i / D, c = i - r * D;
#if QC_DEC_SWZ
        const int d = VW * (2 * (c & 3) + ((c >> 2) & 1)) + (c >> 3);
#else
        const int d = c;
#endif
        float mm = QC_NEG_INF;
#pragma unroll
        for (int w = 0; w < QC_DEC_WARPS; w++) mm = fmaxf(mm, sm_m[w * 16 + r]);
        float acc = 0.f, l = 0.f;
#pragma unroll
        for (int w = 0; w < QC_DEC_WARPS; w++) {
            float f = sm_m[w * 16 + r] == QC_NEG_INF ? 0.f : exp2f(sm_m[w * 16 + r] - mm);
            acc += f * so[(w * 16 + r) * SD + c];
            l += f * sm_l[w * 16 + r];
        }
        acc *= vmul;
        if (nused <= 1) {
            out[(pair0 + r) * D + d] = acc / l;
        } else {
            long long idx = (pair0 + r) * nparts + part;
            work[idx * D + d] = acc;
            if (d == 0) {
                ml[2 * idx] = mm;
                ml[2 * idx + 1] = l;
            }
        }
    }
#if QC_DEC_FUSE && QC_DEC_PROBE != 2
    if (nused > 1 && (long long)n_seqs * gridDim.y <= QC_DEC_COUNTERS)
        qc_dec_combine_v2(out, work, n_seqs, n_heads, D, nparts, nused, pair0, hn);
#endif
}

/* grid (partitions, n_kv_heads * ceil(group / 16), n_seqs), 128 threads; the
 * core's parameters, then k_scale, v_scale (device f32, see qc_kv_scale) and
 * the variant.  An unsupported shape or variant, or more than
 * QC_DEC_MAX_PARTS partitions, gives NaN outputs. */
extern "C" __global__ void __launch_bounds__(128, QC_DEC_MIN_CTAS)
    qc_kv_fp8_attn_decode(const float *q, const u8 *k_cache, const u8 *v_cache, const int *block_tables,
                          const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads, int n_kv_heads,
                          int head_dim, int max_blocks, float scale, const float *k_scale, const float *v_scale,
                          u32 variant) {
#if QC_DEC_PROBE == 4
    if (n_seqs == -7) out[0] = scale;
    return;
#endif
#if QC_DEC_V2
    extern __shared__ __align__(128) u8 dsm[];
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    const bool smem_ok = (head_dim == 64 || head_dim == 128) && dyn >= (u32)qc_dec_v2_smem(head_dim);
#else
    __shared__ __align__(16) float sm[QC_DEC_WARPS * 16 * 128 + 2 * QC_DEC_WARPS * 16];
    const bool smem_ok = true;
#endif
    if (!qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || variant > QC_KV_E5M2 ||
        gridDim.x > QC_DEC_MAX_PARTS || !smem_ok) {
        long long total = (long long)n_seqs * n_heads * head_dim;
        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        long long step = (long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x;
        for (long long i = id * blockDim.x + threadIdx.x; i < total; i += step) out[i] = qc_nan();
        return;
    }
    const int gq = n_heads / n_kv_heads, kvh = blockIdx.y / ((gq + 15) / 16);
    if (kvh >= n_kv_heads) return;
    const bool e5 = variant == QC_KV_E5M2;
#if QC_DEC_V2
    /* the scales are loaded in the kernel's first round, beside ctx and q */
#define QC_DEC_CALL(D, E5, H8)                                                                                  \
    qc_decode8_v2<D, E5, H8>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads,          \
                             n_kv_heads, max_blocks, scale, k_scale, v_scale, variant, dsm)
#else
    const float kmul = e5 ? 1.f : qc_kv_scale(k_scale, variant, kvh) * QC_E4M3_POST;
    const float vmul = e5 ? 1.f : qc_kv_scale(v_scale, variant, kvh) * QC_E4M3_POST;
    /* one instance per head dim, code and whether a q-head group fits rows 0..7 */
#define QC_DEC_CALL(D, E5, H8)                                                                                  \
    qc_decode8<D, E5, H8>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads, n_kv_heads, \
                          max_blocks, scale, kmul, vmul, sm)
#endif
    const bool h8 = gq <= 8;
    if (head_dim == 128) {
        if (e5) {
            if (h8) QC_DEC_CALL(128, true, true);
            else QC_DEC_CALL(128, true, false);
        } else {
            if (h8) QC_DEC_CALL(128, false, true);
            else QC_DEC_CALL(128, false, false);
        }
    } else {
        if (e5) {
            if (h8) QC_DEC_CALL(64, true, true);
            else QC_DEC_CALL(64, true, false);
        } else {
            if (h8) QC_DEC_CALL(64, false, true);
            else QC_DEC_CALL(64, false, false);
        }
    }
#undef QC_DEC_CALL
}

/* Combine the partitions of sequences that had more than one: out = sum_p
 * 2^(m_p - M) acc_p / sum_p 2^(m_p - M) l_p (the V scale is already in
 * acc_p).  grid (n_heads, n_seqs), 128 threads; the core reduce's parameters.
 * With QC_DEC_FUSE the decode combines and the host gives this an empty
 * grid; launched anyway, it writes the same outputs again. */
extern "C" __global__ void __launch_bounds__(128)
    qc_kv_fp8_attn_decode_reduce(const int *ctx_lens, float *out, const float *work, int n_seqs, int n_heads,
                                 int n_kv_heads, int head_dim, int max_blocks) {
    __shared__ float wts[QC_DEC_MAX_PARTS];
    __shared__ float inv_l;
    const int h = blockIdx.x, seq = blockIdx.y;
    if (seq >= n_seqs || h >= n_heads || !qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) return;
    const int nparts = qc_dec_parts_warp(n_seqs, n_kv_heads, max_blocks);
    int ctx = ctx_lens[seq];
    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;
    const int plen = qc_dec_part_len(ctx, nparts), nused = (ctx + plen - 1) / plen;
    if (nused <= 1) return; /* the decode kernel wrote it */
    const long long base = ((long long)seq * n_heads + h) * nparts;
    const float *ml = work + (long long)n_seqs * n_heads * nparts * head_dim;
    if (threadIdx.x < 32) {
        float mm = QC_NEG_INF;
        for (int p = threadIdx.x; p < nused; p += 32) mm = fmaxf(mm, ml[2 * (base + p)]);
        for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));
        float l = 0.f;
        for (int p = threadIdx.x; p < nused; p += 32) {
            float w = exp2f(ml[2 * (base + p)] - mm);
            wts[p] = w;
            l += w * ml[2 * (base + p) + 1];
        }
        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
        if (threadIdx.x == 0) inv_l = 1.f / l;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float acc = 0.f;
        for (int p = 0; p < nused; p++) acc += wts[p] * work[(base + p) * head_dim + d];
        out[((long long)seq * n_heads + h) * head_dim + d] = acc * inv_l;
    }
}
