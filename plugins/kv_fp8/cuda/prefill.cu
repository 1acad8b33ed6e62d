/* ---- kv_fp8.attn_prefill ---- */
__device__ __forceinline__ void qc_cp16(u32 dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void qc_ldm4(u32 *r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void qc_ldm4t(u32 *r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
/* byte offset of 16-byte chunk c of row r in a [rows][D] f16 tile, XOR-swizzled over 8 rows */
template <int D>
__device__ __forceinline__ u32 qc_swz(int r, int c) {
    return (u32)(r * D * 2 + ((c ^ (r & 7)) << 4));
}

/* The core prefill's structure (one CTA = 64 (token, q head) rows of one
 * sequence's new tokens for one kv head; KV tiles of 64 tokens; S = Q K^T
 * and O += P V by m16n8k16 mma with ldmatrix fragments; online softmax in
 * f32) with FP8 tiles: each tile's codes arrive by cp.async in a staging
 * buffer (tile kt + 1 loads while tile kt is multiplied), are converted once
 * to f16 into the swizzled tiles the mma reads, and the K and V scales are
 * folded into the softmax scale and the output.  Shared memory: f16 K and V
 * tiles (2 x 64 x D x 2 bytes) + FP8 staging (2 x 64 x D): 48 KiB at d 128. */
template <int D, bool E5>
__device__ __forceinline__ void qc_prefill8(const float *q, const u8 *kc, const u8 *vc, const int *bt,
                                            const int *ctx_lens, const int *q_start, float *out, int n_seqs,
                                            int n_heads, int n_kv_heads, int max_blocks, float scale, float kmul,
                                            float vmul, unsigned char *smem) {
    constexpr int C8 = D / 16;             /* 16-byte chunks of codes per row */
    constexpr int TILE = QC_PF_KV * D * 2; /* bytes of one f16 K (or V) tile */
    constexpr int S8 = QC_PF_KV * D;       /* bytes of one staged FP8 tile */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int gq = n_heads / n_kv_heads, kvh = blockIdx.y;
    int seq = -1, tile = 0, n_new = 0;
    {
        int left = blockIdx.x;
        for (int s = 0; s < n_seqs; s++) {
            int nn = q_start[s + 1] - q_start[s];
            int nt = nn > 0 ? (nn * gq + QC_PF_ROWS - 1) / QC_PF_ROWS : 0;
            if (left < nt) {
                seq = s;
                tile = nt - 1 - left;
                n_new = nn;
                break;
            }
            left -= nt;
        }
    }
    if (seq < 0) return;
    int ctx = ctx_lens[seq];
    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;
    const int first_pos = ctx - n_new;
    const int qs = q_start[seq], rows = n_new * gq, row0 = tile * QC_PF_ROWS;
    int rr[2], pos[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = row0 + warp * 16 + g + 8 * h;
        rr[h] = r < rows ? r : rows - 1;
        pos[h] = first_pos + rr[h] / gq;
    }
    const int last_row = min(rows, row0 + QC_PF_ROWS) - 1;
    const int max_pos = first_pos + last_row / gq, min_pos = first_pos + row0 / gq;
    const int kv_len = min(max_pos + 1, ctx);
    const int n_tiles = kv_len > 0 ? (kv_len + QC_PF_KV - 1) / QC_PF_KV : 0;

    u32 qa[D / 16][4];
    {
        const float *q0 = q + ((long long)(qs + rr[0] / gq) * n_heads + kvh * gq + rr[0] % gq) * D;
        const float *q1 = q + ((long long)(qs + rr[1] / gq) * n_heads + kvh * gq + rr[1] % gq) * D;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            float2 x0 = *(const float2 *)(q0 + 16 * ks + 2 * t), x1 = *(const float2 *)(q0 + 16 * ks + 8 + 2 * t);
            float2 y0 = *(const float2 *)(q1 + 16 * ks + 2 * t), y1 = *(const float2 *)(q1 + 16 * ks + 8 + 2 * t);
            qa[ks][0] = qc_h2(x0.x, x0.y);
            qa[ks][1] = qc_h2(y0.x, y0.y);
            qa[ks][2] = qc_h2(x1.x, x1.y);
            qa[ks][3] = qc_h2(y1.x, y1.y);
        }
    }
    const u32 sbase = (u32)__cvta_generic_to_shared(smem);
    const u32 sk = sbase, sv = sbase + TILE, s8k = sbase + 2 * TILE, s8v = s8k + S8;
    const int *btr = bt + (long long)seq * max_blocks;
    const long long head_stride = (long long)QC_KVB * D;
    /* tile kt's codes -> staging; tokens past kv_len zero-filled */
    auto load = [&](int kt) {
        const int tok0 = kt * QC_PF_KV;
        for (int idx = threadIdx.x; idx < QC_PF_KV * C8; idx += blockDim.x) {
            int r = idx / C8, c = idx % C8, tok = tok0 + r;
            bool ok = tok < kv_len;
            long long off = 0;
            if (ok) off = ((long long)btr[tok / QC_KVB] * n_kv_heads + kvh) * head_stride + (tok % QC_KVB) * D + c * 16;
            qc_cp16(s8k + r * D + c * 16, kc + off, ok);
            qc_cp16(s8v + r * D + c * 16, vc + off, ok);
        }
    };
    /* staging -> f16 tiles: chunk c of codes is f16 chunks 2c, 2c + 1 */
    auto convert = [&]() {
        for (int idx = threadIdx.x; idx < 2 * QC_PF_KV * C8; idx += blockDim.x) {
            int kv = idx / (QC_PF_KV * C8), rc = idx % (QC_PF_KV * C8), r = rc / C8, c = rc % C8;
            const uint4 x = *(const uint4 *)(smem + 2 * TILE + kv * S8 + r * D + c * 16);
            uint4 lo, hi;
            lo.x = qc_fp8x2_f16x2<E5>(x.x), lo.y = qc_fp8x2_f16x2<E5>(x.x >> 16);
            lo.z = qc_fp8x2_f16x2<E5>(x.y), lo.w = qc_fp8x2_f16x2<E5>(x.y >> 16);
            hi.x = qc_fp8x2_f16x2<E5>(x.z), hi.y = qc_fp8x2_f16x2<E5>(x.z >> 16);
            hi.z = qc_fp8x2_f16x2<E5>(x.w), hi.w = qc_fp8x2_f16x2<E5>(x.w >> 16);
            *(uint4 *)(smem + kv * TILE + qc_swz<D>(r, 2 * c)) = lo;
            *(uint4 *)(smem + kv * TILE + qc_swz<D>(r, 2 * c + 1)) = hi;
        }
    };
    const float sl2 = scale * kmul * QC_LOG2E;
    float m[2] = {QC_NEG_INF, QC_NEG_INF}, l[2] = {0.f, 0.f};
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    if (n_tiles > 0) load(0);
    asm volatile("cp.async.commit_group;\n" ::);
    for (int kt = 0; kt < n_tiles; kt++) {
        asm volatile("cp.async.wait_group 0;\n" ::);
        __syncthreads(); /* tile kt staged for everyone; every warp is done with tile kt - 1 */
        convert();
        __syncthreads(); /* f16 tiles ready; the staging buffer is free */
        if (kt + 1 < n_tiles) load(kt + 1);
        asm volatile("cp.async.commit_group;\n" ::);
        float s[QC_PF_KV / 8][4];
#pragma unroll
        for (int n = 0; n < QC_PF_KV / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
            for (int np = 0; np < QC_PF_KV / 16; np++) {
                u32 b[4];
                int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                qc_ldm4(b, sk + qc_swz<D>(r, ks * 2 + ((lane >> 3) & 1)));
                qc_mma(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b[0], b[1]);
                qc_mma(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b[2], b[3]);
            }
        const int tok0 = kt * QC_PF_KV;
        const bool mask = tok0 + QC_PF_KV - 1 > min_pos;
        float mx[2] = {QC_NEG_INF, QC_NEG_INF};
#pragma unroll
        for (int n = 0; n < QC_PF_KV / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int tok = tok0 + 8 * n + 2 * t + (e & 1), h = e >> 1;
                float v = s[n][e] * sl2;
                if (mask && tok > pos[h]) v = QC_NEG_INF;
                s[n][e] = v;
                mx[h] = fmaxf(mx[h], v);
            }
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            float mn = fmaxf(m[h], mx[h]);
            float ref = mn == QC_NEG_INF ? 0.f : mn; /* a row with no key yet (position < 0) */
            alpha[h] = exp2f(m[h] - ref);
            m[h] = mn;
            mx[h] = ref;
        }
        float ls[2] = {0.f, 0.f};
#pragma unroll
        for (int n = 0; n < QC_PF_KV / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = exp2f(s[n][e] - mx[e >> 1]);
                s[n][e] = p;
                ls[e >> 1] += p;
            }
        l[0] = l[0] * alpha[0] + ls[0];
        l[1] = l[1] * alpha[1] + ls[1];
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
#pragma unroll
        for (int kk = 0; kk < QC_PF_KV / 16; kk++) {
            u32 pa0 = qc_h2(s[2 * kk][0], s[2 * kk][1]), pa1 = qc_h2(s[2 * kk][2], s[2 * kk][3]);
            u32 pa2 = qc_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            u32 pa3 = qc_h2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                u32 b[4];
                int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                qc_ldm4t(b, sv + qc_swz<D>(r, dp * 2 + (lane >> 4)));
                qc_mma(o[2 * dp], pa0, pa1, pa2, pa3, b[0], b[1]);
                qc_mma(o[2 * dp + 1], pa0, pa1, pa2, pa3, b[2], b[3]);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = row0 + warp * 16 + g + 8 * h;
        if (r >= rows) continue;
        float inv = l[h] > 0.f ? vmul / l[h] : 0.f; /* no key (position < 0): zeros */
        float *dst = out + ((long long)(qs + r / gq) * n_heads + kvh * gq + r % gq) * D;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *(float2 *)(dst + 8 * n + 2 * t) = make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    }
}

/* grid (row tiles of every sequence, n_kv_heads), 128 threads, 384 x head_dim
 * bytes of dynamic shared memory; the core's parameters, then k_scale,
 * v_scale and the variant.  An unsupported shape or variant gives NaN. */
extern "C" __global__ void __launch_bounds__(128)
    qc_kv_fp8_attn_prefill(const float *q, const u8 *k_cache, const u8 *v_cache, const int *block_tables,
                           const int *ctx_lens, const int *q_start, float *out, int n_seqs, int n_heads,
                           int n_kv_heads, int head_dim, int max_blocks, float scale, const float *k_scale,
                           const float *v_scale, u32 variant) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (!qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || n_seqs <= 0 || variant > QC_KV_E5M2) {
        if (n_seqs <= 0) return;
        long long total = (long long)q_start[n_seqs] * n_heads * head_dim;
        long long id = (long long)blockIdx.y * gridDim.x + blockIdx.x;
        long long step = (long long)gridDim.x * gridDim.y * blockDim.x;
        for (long long i = id * blockDim.x + threadIdx.x; i < total; i += step) out[i] = qc_nan();
        return;
    }
    const int kvh = blockIdx.y;
    if (kvh >= n_kv_heads) return;
    const bool e5 = variant == QC_KV_E5M2;
    const float kmul = e5 ? 1.f : qc_kv_scale(k_scale, variant, kvh) * QC_E4M3_POST;
    const float vmul = e5 ? 1.f : qc_kv_scale(v_scale, variant, kvh) * QC_E4M3_POST;
    if (head_dim == 128) {
        if (e5)
            qc_prefill8<128, true>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads,
                                   n_kv_heads, max_blocks, scale, kmul, vmul, smem);
        else
            qc_prefill8<128, false>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads,
                                    n_kv_heads, max_blocks, scale, kmul, vmul, smem);
    } else {
        if (e5)
            qc_prefill8<64, true>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads,
                                  n_kv_heads, max_blocks, scale, kmul, vmul, smem);
        else
            qc_prefill8<64, false>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads,
                                   n_kv_heads, max_blocks, scale, kmul, vmul, smem);
    }
}
