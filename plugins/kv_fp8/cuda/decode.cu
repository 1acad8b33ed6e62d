/* ---- kv_fp8.attn_decode + kv_fp8.attn_decode_reduce ---- */

/* Partitions per sequence (the host's kv_fp8_decode_parts is the same
 * formula): the count p minimizing waves(p) * (tokens per CTA + a CTA's
 * fixed cost), waves of QC_DEC_SLOTS CTAs, at most QC_DEC_MAX_WAVES waves and
 * one partition per QC_DEC_MIN_PART tokens of the block table. */
__device__ __forceinline__ int qc_dec_parts(int n_seqs, int n_kv_heads, int max_blocks) {
    long long pairs = (long long)n_seqs * n_kv_heads, est = (long long)max_blocks * QC_KVB;
    if (pairs < 1) pairs = 1;
    if (est < 1) est = 1;
    long long cap = (est + QC_DEC_MIN_PART - 1) / QC_DEC_MIN_PART;
    if (cap > QC_DEC_MAX_PARTS) cap = QC_DEC_MAX_PARTS;
    long long best = 1, best_cost = (pairs + QC_DEC_SLOTS - 1) / QC_DEC_SLOTS * (est + QC_DEC_CTA_COST);
    for (long long p = 2; p <= cap && pairs * p <= (long long)QC_DEC_MAX_WAVES * QC_DEC_SLOTS; p++) {
        long long cost = (pairs * p + QC_DEC_SLOTS - 1) / QC_DEC_SLOTS * ((est + p - 1) / p + QC_DEC_CTA_COST);
        if (cost < best_cost) best = p, best_cost = cost;
    }
    return (int)best;
}
__device__ __forceinline__ int qc_dec_part_len(int ctx, int nparts) {
    int per = (ctx + nparts - 1) / nparts;
    per = (per + QC_KVB - 1) / QC_KVB * QC_KVB;
    return per < QC_DEC_MIN_PART ? QC_DEC_MIN_PART : per;
}

/* One CTA = (partition, kv head, up to 16 of its q heads, sequence); each of
 * the 4 warps takes every 4th 16-token block and keeps its own online
 * softmax.  S = Q K^T and O += P V are m16n8k16 f16 mma (f32 accumulate)
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
 * output, so the products see the raw codes. */
template <int D, bool E5>
__device__ __forceinline__ void qc_decode8(const float *q, const u8 *kc, const u8 *vc, const int *bt,
                                           const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads,
                                           int n_kv_heads, int max_blocks, float scale, float kmul, float vmul,
                                           float *sm) {
    constexpr int KC = D / 64;  /* 16-byte K loads per token and thread */
    constexpr int VW = D / 8;   /* V bytes per token and thread; also the PV n-tiles */
    constexpr int VWD = VW / 4; /* ... in 32-bit words */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int gq = n_heads / n_kv_heads, nsub = (gq + 15) / 16;
    const int part = blockIdx.x, seq = blockIdx.z, kvh = blockIdx.y / nsub, sub = blockIdx.y % nsub;
    const int h0 = kvh * gq + sub * 16, hn = min(16, gq - sub * 16);
    const int nparts = qc_dec_parts(n_seqs, n_kv_heads, max_blocks);
    if (seq >= n_seqs || kvh >= n_kv_heads || part >= nparts) return;
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
            qa[ks][1] = qc_h2(y.x, y.y);
            qa[ks][3] = qc_h2(y.z, y.w);
        }
    }
    const float sl2 = scale * kmul * QC_LOG2E;
    float m0 = QC_NEG_INF, m1 = QC_NEG_INF, l0 = 0.f, l1 = 0.f;
    float o[VW][4];
#pragma unroll
    for (int n = 0; n < VW; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    const long long head_stride = (long long)QC_KVB * D; /* bytes of one block of one head */
    const int *btr = bt + (long long)seq * max_blocks;
    /* block ids of this warp's next 32 blocks, one per lane */
    int bid_next = b0 + warp + 4 * lane < b1 ? btr[b0 + warp + 4 * lane] : 0;
    for (int it = 0, b = b0 + warp; b < b1; it++, b += QC_DEC_WARPS) {
        if ((it & 31) == 0 && it) {
            int bb = b + 4 * lane;
            bid_next = bb < b1 ? btr[bb] : 0;
        }
        const int bid = __shfl_sync(0xffffffffu, bid_next, it & 31);
        const u8 *kb = kc + ((long long)bid * n_kv_heads + kvh) * head_stride;
        const u8 *vb = vc + ((long long)bid * n_kv_heads + kvh) * head_stride;
        uint4 kr[2][KC];
        u32 vw[4][VWD];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            int tok = 4 * (g >> 1) + 2 * j + (g & 1);
#pragma unroll
            for (int c = 0; c < KC; c++) kr[j][c] = qc_ld16(kb + tok * D + 64 * c + 16 * t);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if constexpr (VWD == 4) {
                uint4 x = qc_ld16(vb + (4 * t + i) * D + VW * g);
                vw[i][0] = x.x, vw[i][1] = x.y, vw[i][2] = x.z, vw[i][3] = x.w;
            } else {
                uint2 x = qc_ld8(vb + (4 * t + i) * D + VW * g);
                vw[i][0] = x.x, vw[i][1] = x.y;
            }
        }
        /* scores of tokens 4t + 2j + e for rows g (s[j][e]) and g + 8 (s[j][2 + e]) */
        float s[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) {
                const u32 w = qc_word(kr[j][ks >> 2], ks & 3);
                qc_mma(s[j], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], qc_fp8x2_f16x2<E5>(w),
                       qc_fp8x2_f16x2<E5>(w >> 16));
            }
        }
        const int valid = end - b * QC_KVB; /* tokens of this block inside the partition */
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
#pragma unroll
        for (int i = 0; i < 4; i++) /* V rows past the end may hold anything (NaN codes): p = 0 must stay 0 */
            if (4 * t + i >= valid)
#pragma unroll
                for (int w = 0; w < VWD; w++) vw[i][w] = 0u;
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        /* the block's first token is always valid, so the new maxima are finite */
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        const float a0 = exp2f(m0 - n0), a1 = exp2f(m1 - n1);
        m0 = n0;
        m1 = n1;
        float p[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            p[j][0] = exp2f(s[j][0] - n0);
            p[j][1] = exp2f(s[j][1] - n0);
            p[j][2] = exp2f(s[j][2] - n1);
            p[j][3] = exp2f(s[j][3] - n1);
        }
        l0 = l0 * a0 + (p[0][0] + p[0][1] + p[1][0] + p[1][1]);
        l1 = l1 * a1 + (p[0][2] + p[0][3] + p[1][2] + p[1][3]);
        /* P as the A fragment: k 2t, 2t+1 <-> tokens 4t, 4t+1; k 2t+8, 2t+9 <-> 4t+2, 4t+3 */
        const u32 pa0 = qc_h2(p[0][0], p[0][1]), pa1 = qc_h2(p[0][2], p[0][3]);
        const u32 pa2 = qc_h2(p[1][0], p[1][1]), pa3 = qc_h2(p[1][2], p[1][3]);
#pragma unroll
        for (int n = 0; n < VW; n++) {
            float *acc = o[n];
            acc[0] *= a0;
            acc[1] *= a0;
            acc[2] *= a1;
            acc[3] *= a1;
            /* byte n of tokens 4t..4t+3: pairs (4t, 4t+1) and (4t+2, 4t+3), low byte first */
            const int w = n >> 2;
            const u32 sel = (n & 2) ? 0x7362u : 0x5140u;
            u32 p01 = __byte_perm(vw[0][w], vw[1][w], sel), p23 = __byte_perm(vw[2][w], vw[3][w], sel);
            if (n & 1) p01 >>= 16, p23 >>= 16;
            qc_mma(acc, pa0, pa1, pa2, pa3, qc_fp8x2_f16x2<E5>(p01), qc_fp8x2_f16x2<E5>(p23));
        }
    }
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
                float *ml = work + (long long)n_seqs * n_heads * nparts * D;
                ml[2 * idx] = mm;
                ml[2 * idx + 1] = l;
            }
        }
    }
}

/* grid (partitions, n_kv_heads * ceil(group / 16), n_seqs), 128 threads; the
 * core's parameters, then k_scale, v_scale (device f32, see qc_kv_scale) and
 * the variant.  An unsupported shape or variant gives NaN outputs. */
extern "C" __global__ void __launch_bounds__(128, 3)
    qc_kv_fp8_attn_decode(const float *q, const u8 *k_cache, const u8 *v_cache, const int *block_tables,
                          const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads, int n_kv_heads,
                          int head_dim, int max_blocks, float scale, const float *k_scale, const float *v_scale,
                          u32 variant) {
    __shared__ __align__(16) float sm[QC_DEC_WARPS * 16 * 128 + 2 * QC_DEC_WARPS * 16];
    if (!qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || variant > QC_KV_E5M2) {
        long long total = (long long)n_seqs * n_heads * head_dim;
        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        long long step = (long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x;
        for (long long i = id * blockDim.x + threadIdx.x; i < total; i += step) out[i] = qc_nan();
        return;
    }
    const int gq = n_heads / n_kv_heads, kvh = blockIdx.y / ((gq + 15) / 16);
    if (kvh >= n_kv_heads) return;
    const bool e5 = variant == QC_KV_E5M2;
    const float kmul = e5 ? 1.f : qc_kv_scale(k_scale, variant, kvh) * QC_E4M3_POST;
    const float vmul = e5 ? 1.f : qc_kv_scale(v_scale, variant, kvh) * QC_E4M3_POST;
    if (head_dim == 128) {
        if (e5)
            qc_decode8<128, true>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads,
                                  n_kv_heads, max_blocks, scale, kmul, vmul, sm);
        else
            qc_decode8<128, false>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads,
                                   n_kv_heads, max_blocks, scale, kmul, vmul, sm);
    } else {
        if (e5)
            qc_decode8<64, true>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads, n_kv_heads,
                                 max_blocks, scale, kmul, vmul, sm);
        else
            qc_decode8<64, false>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads,
                                  n_kv_heads, max_blocks, scale, kmul, vmul, sm);
    }
}

/* Combine the partitions of sequences that had more than one: out = sum_p
 * 2^(m_p - M) acc_p / sum_p 2^(m_p - M) l_p (the V scale is already in
 * acc_p).  grid (n_heads, n_seqs), 128 threads; the core reduce's parameters. */
extern "C" __global__ void __launch_bounds__(128)
    qc_kv_fp8_attn_decode_reduce(const int *ctx_lens, float *out, const float *work, int n_seqs, int n_heads,
                                 int n_kv_heads, int head_dim, int max_blocks) {
    __shared__ float wts[QC_DEC_MAX_PARTS];
    __shared__ float inv_l;
    const int h = blockIdx.x, seq = blockIdx.y;
    if (seq >= n_seqs || h >= n_heads || !qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) return;
    const int nparts = qc_dec_parts(n_seqs, n_kv_heads, max_blocks);
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
