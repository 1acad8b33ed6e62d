/* qc_kernels_attn.c - paged attention on the GPU (KV write, split-K decode + reduce, causal prefill) and C references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/common/qc_env_opts.h"
#include "../../plugins/common/qc_wgmma_ra_src.h"
#include "qc_core_kernels.h"
#include "qc_kernels_attn.h"
#include "qc_util.h"

/*
 * Layouts (QC_KV_BLOCK = 16 tokens per block, bf16 bits):
 *   k_cache, v_cache  [num_blocks][n_kv_heads][16][head_dim]; one block of one
 *                     head is contiguous (4 KiB at head_dim 128);
 *   slot              block_id * 16 + offset;
 *   block_tables      int32 [n_seqs][max_blocks];
 *   ctx_lens          int32 [n_seqs], tokens in the cache after this step's
 *                     tokens were written (clamped to [0, max_blocks * 16]).
 * q heads h attend through kv head h / (n_heads / n_kv_heads).
 *
 * Numerics (what the references compute, in double): q is rounded to bf16
 * (to nearest even, as bf16 activations are), K and V are the bf16 values
 * stored, scores are q.k * scale, softmax, out = sum p v.  The GPU kernels
 * compute q.k and p.v on tensor cores (mma.sync m16n8k16, f32 accumulate)
 * with P rounded to bf16 for the second product, so each output differs
 * from the reference by at most about 2^-9 * sum_j p_j |v_j| (relative
 * rounding of each p_j) plus f32 summation error; the tests allow
 * 2^-8 * sum_j p_j |v_j| + 1e-6.  A sequence with no key gives zeros.
 * Unsupported shapes (head_dim other than 64 or 128, n_heads not a positive
 * multiple of n_kv_heads) give NaN outputs; qc_attn_shape_supported says why
 * before a launch.
 *
 * Kernels (all registered under "bf16"; found by id, never selected for a
 * linear layer):
 *   core.kv_write          k, v f32 [t][n_kv_heads][head_dim] -> the caches at
 *                          slots[t]; negative slots skip the token.
 *   core.attn_decode       one query per sequence, split-K: each CTA takes a
 *                          partition of one sequence's context for one kv
 *                          head and all (up to 16) q heads of its group.
 *                          Sequences whose context fits one partition are
 *                          written to `out`; the others leave per-partition
 *                          partials in `work` ...
 *   core.attn_decode_reduce ... which this second launch combines into `out`
 *                          (core.attn_decode_reduce_bf16: and writes out's
 *                          bf16 copy `out.bf16`, every sequence's).
 *                          The engine launches both, in order, every step
 *                          (qc_attn_decode_dims gives both geometries).  The
 *                          decode reference writes the final `out` itself and
 *                          ignores `work`; the reduce reference combines a
 *                          `work` the GPU decode wrote (and leaves sequences
 *                          with one partition alone), so the pair is checked
 *                          end to end and each half on its own.
 *   core.attn_prefill      new tokens of several sequences, concatenated;
 *                          causal over the cache (earlier chunks included).
 *
 * qc_problem fields the launch_dims read: m = tokens (kv_write, prefill) or
 * sequences (decode, reduce); n = n_heads; k = head_dim; group_size =
 * n_kv_heads; scheme = max_blocks (decode, reduce) or n_seqs (prefill).
 * qc_attn_problem fills them.
 */

#define DEC_WARPS 4
/* Decode partitions: sized for the H200 (132 SMs, 3 decode CTAs each); on
 * other parts only the wave estimate is off. */
#define DEC_SLOTS 396
#define DEC_MAX_WAVES 4
#define DEC_CTA_COST 32    /* a CTA's fixed cost (q load, combine, partial write), in tokens */
#define DEC_MAX_PARTS 64
#define DEC_MIN_PART 64    /* tokens */
#define PF_ROWS 64
#define PF_KV 64
#define GRID_CAP (1u << 20)
#define STR_(x) #x
#define STR(x) STR_(x)


/* ---- CUDA sources: shared definitions, then one translation unit per kernel (decode and its reduce share one) ---- */

#define ATTN_COMMON \
    "/* qcore paged attention: shared definitions (bf16 KV cache, mma.sync m16n8k16) */\n" \
    QC_CUDA_GRID_DEP_SRC \
    "#define QC_KVB 16           /* tokens per KV block */\n" \
    "#define QC_DEC_WARPS " STR(DEC_WARPS) "\n" \
    "#define QC_DEC_SLOTS " STR(DEC_SLOTS) "\n" \
    "#define QC_DEC_MAX_WAVES " STR(DEC_MAX_WAVES) "\n" \
    "#define QC_DEC_CTA_COST " STR(DEC_CTA_COST) "\n" \
    "#define QC_DEC_MAX_PARTS " STR(DEC_MAX_PARTS) "\n" \
    "#define QC_DEC_MIN_PART " STR(DEC_MIN_PART) "\n" \
    "#define QC_PF_ROWS " STR(PF_ROWS) "\n" \
    "#define QC_PF_KV " STR(PF_KV) "\n" \
    "#define QC_LOG2E 1.4426950408889634f\n" \
    "#ifndef QC_ATTN_SWZ /* 1: the decode's warp combine without shared-memory bank conflicts (default) */\n" \
    "#define QC_ATTN_SWZ 1\n" \
    "#endif\n" \
    "#define QC_NEG_INF __int_as_float(0xff800000)\n" \
    "\n" \
    "__device__ __forceinline__ unsigned short qc_f2bf(float f) {\n" \
    "    unsigned u = __float_as_uint(f);\n" \
    "    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n" \
    "    u += 0x7fffu + ((u >> 16) & 1u);\n" \
    "    return (unsigned short)(u >> 16);\n" \
    "}\n" \
    "/* two floats -> bf16x2 (lo in the low half), nearest even */\n" \
    "__device__ __forceinline__ unsigned qc_pack2(float lo, float hi) {\n" \
    "    unsigned r;\n" \
    "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n" \
    "    return r;\n" \
    "}\n" \
    "__device__ __forceinline__ uint4 qc_ld16(const unsigned short *p) {\n" \
    "    uint4 v;\n" \
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n" \
    "                 : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n" \
    "    return v;\n" \
    "}\n" \
    "__device__ __forceinline__ void qc_mma(float *d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,\n" \
    "                                       unsigned b1) {\n" \
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n" \
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n" \
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n" \
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n" \
    "}\n" \
    "__device__ __forceinline__ unsigned qc_word(const uint4 &v, int i) {\n" \
    "    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;\n" \
    "}\n" \
    "__device__ __forceinline__ float qc_nan() { return __int_as_float(0x7fc00000); }\n" \
    "__device__ __forceinline__ bool qc_attn_shape_ok(int n_heads, int n_kv_heads, int head_dim) {\n" \
    "    return (head_dim == 64 || head_dim == 128) && n_kv_heads > 0 && n_heads >= n_kv_heads &&\n" \
    "           n_heads % n_kv_heads == 0;\n" \
    "}\n"

static const char KV_WRITE_SRC[] = ATTN_COMMON
    "/* ---- KV write ---- */\n"
    "\n"
    "/* (token, head) row r of k/v -> slot's row of the cache; a negative slot skips */\n"
    "extern \"C\" __global__ void qc_attn_kv_write(const float *k, const float *v, unsigned short *k_cache,\n"
    "                                            unsigned short *v_cache, const int *slots, long long t, int n_kv_heads,\n"
    "                                            int head_dim) {\n"
    "    if (t <= 0 || n_kv_heads <= 0 || head_dim <= 0) return;\n"
    "    long long step = (long long)gridDim.x * blockDim.x, rows = t * n_kv_heads;\n"
    "    bool vec = (head_dim & 7) == 0 && (((unsigned long long)k | (unsigned long long)v | (unsigned long long)k_cache |\n"
    "                                        (unsigned long long)v_cache) & 15) == 0;\n"
    "    int per = vec ? head_dim / 8 : head_dim;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < rows * per; i += step) {\n"
    "        long long r = i / per, tok = r / n_kv_heads;\n"
    "        int c = (int)(i - r * per), h = (int)(r - tok * n_kv_heads);\n"
    "        int slot = slots[tok];\n"
    "        if (slot < 0) continue;\n"
    "        long long dst = (((long long)(slot / QC_KVB) * n_kv_heads + h) * QC_KVB + slot % QC_KVB) * head_dim;\n"
    "        if (vec) {\n"
    "            const float4 *ks = (const float4 *)(k + r * head_dim + c * 8);\n"
    "            const float4 *vs = (const float4 *)(v + r * head_dim + c * 8);\n"
    "            float4 a = ks[0], b = ks[1], e = vs[0], f = vs[1];\n"
    "            uint4 ko, vo;\n"
    "            ko.x = qc_f2bf(a.x) | ((unsigned)qc_f2bf(a.y) << 16);\n"
    "            ko.y = qc_f2bf(a.z) | ((unsigned)qc_f2bf(a.w) << 16);\n"
    "            ko.z = qc_f2bf(b.x) | ((unsigned)qc_f2bf(b.y) << 16);\n"
    "            ko.w = qc_f2bf(b.z) | ((unsigned)qc_f2bf(b.w) << 16);\n"
    "            vo.x = qc_f2bf(e.x) | ((unsigned)qc_f2bf(e.y) << 16);\n"
    "            vo.y = qc_f2bf(e.z) | ((unsigned)qc_f2bf(e.w) << 16);\n"
    "            vo.z = qc_f2bf(f.x) | ((unsigned)qc_f2bf(f.y) << 16);\n"
    "            vo.w = qc_f2bf(f.z) | ((unsigned)qc_f2bf(f.w) << 16);\n"
    "            *(uint4 *)(k_cache + dst + c * 8) = ko;\n"
    "            *(uint4 *)(v_cache + dst + c * 8) = vo;\n"
    "        } else {\n"
    "            k_cache[dst + c] = qc_f2bf(k[r * head_dim + c]);\n"
    "            v_cache[dst + c] = qc_f2bf(v[r * head_dim + c]);\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char DECODE_SRC[] = ATTN_COMMON
    "/* ---- decode ---- */\n"
    "\n"
    "/* Partitions per sequence of a decode launch (the same integer formula as the\n"
    " * host's qc_attn_decode_parts): the count p that minimizes the estimated\n"
    " * time waves(p) * (tokens per CTA + a CTA's fixed cost), with waves of\n"
    " * QC_DEC_SLOTS CTAs, at most QC_DEC_MAX_WAVES waves and one partition per\n"
    " * QC_DEC_MIN_PART tokens of the block table (its length is the estimate).\n"
    " * Computed by a whole warp: each lane tries every 32nd p, then the lowest\n"
    " * cost wins (ties: the smaller p, as the host's loop).  One thread running\n"
    " * the host's loop paid its 64-bit divisions for microseconds at batch 1,\n"
    " * where it runs to QC_DEC_MAX_PARTS.  All 32 lanes must call it. */\n"
    "__device__ __forceinline__ int qc_dec_parts_warp(int n_seqs, int n_kv_heads, int max_blocks) {\n"
    "    long long pairs = (long long)n_seqs * n_kv_heads, est = (long long)max_blocks * QC_KVB;\n"
    "    if (pairs < 1) pairs = 1;\n"
    "    if (est < 1) est = 1;\n"
    "    long long cap = (est + QC_DEC_MIN_PART - 1) / QC_DEC_MIN_PART;\n"
    "    if (cap > QC_DEC_MAX_PARTS) cap = QC_DEC_MAX_PARTS;\n"
    "    long long best = 1, best_cost = (pairs + QC_DEC_SLOTS - 1) / QC_DEC_SLOTS * (est + QC_DEC_CTA_COST);\n"
    "    for (long long p = 2 + (threadIdx.x & 31); p <= cap && pairs * p <= (long long)QC_DEC_MAX_WAVES * QC_DEC_SLOTS;\n"
    "         p += 32) {\n"
    "        long long cost = (pairs * p + QC_DEC_SLOTS - 1) / QC_DEC_SLOTS * ((est + p - 1) / p + QC_DEC_CTA_COST);\n"
    "        if (cost < best_cost) best = p, best_cost = cost;\n"
    "    }\n"
    "    for (int o = 16; o > 0; o >>= 1) {\n"
    "        long long oc = __shfl_xor_sync(0xffffffffu, best_cost, o), ob = __shfl_xor_sync(0xffffffffu, best, o);\n"
    "        if (oc < best_cost || (oc == best_cost && ob < best)) best = ob, best_cost = oc;\n"
    "    }\n"
    "    return (int)best;\n"
    "}\n"
    "/* tokens per partition of a sequence of ctx tokens: a multiple of 16 */\n"
    "__device__ __forceinline__ int qc_dec_part_len(int ctx, int nparts) {\n"
    "    int per = (ctx + nparts - 1) / nparts;\n"
    "    per = (per + QC_KVB - 1) / QC_KVB * QC_KVB;\n"
    "    return per < QC_DEC_MIN_PART ? QC_DEC_MIN_PART : per;\n"
    "}\n"
    "\n"
    "/* One CTA = (partition, kv head, up to 16 of its q heads, sequence).  Each\n"
    " * warp takes every 4th 16-token block of the partition and keeps its own\n"
    " * online softmax; S = Q K^T and O += P V are m16n8k16 mma with the q heads\n"
    " * as rows.  K and V go straight from global memory (16-byte loads) into\n"
    " * fragments: the k index of both products is a permutation of (d, token)\n"
    " * chosen so that each 16-byte load is a fragment register pair:\n"
    " *   S: thread (g, t) loads K[token 4(g>>1) + 2j + (g&1)][32jj + 8t .. +7] for n-tile j,\n"
    " *      so its scores are the tokens 4t..4t+3, exactly the P fragment it needs;\n"
    " *   PV: thread (g, t) loads V[token 4t + i][64dd + 8g .. +7]; n-tile (dd, j)\n"
    " *      column g is dim 64dd + 8g + j, so it ends with 16 consecutive dims. */\n"
    "template <int D>\n"
    "__device__ __forceinline__ void qc_decode(const float *q, const unsigned short *kc, const unsigned short *vc,\n"
    "                                          const int *bt, const int *ctx_lens, float *out, float *work, int n_seqs,\n"
    "                                          int n_heads, int n_kv_heads, int max_blocks, float scale, float *sm) {\n"
    "    constexpr int KC = D / 32; /* 16-byte K loads per n-tile */\n"
    "    constexpr int VG = D / 64; /* V dim groups */\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"
    "    const int gq = n_heads / n_kv_heads, nsub = (gq + 15) / 16;\n"
    "    const int part = blockIdx.x, seq = blockIdx.z, kvh = blockIdx.y / nsub, sub = blockIdx.y % nsub;\n"
    "    const int h0 = kvh * gq + sub * 16, hn = min(16, gq - sub * 16);\n"
    "    const int nparts = gridDim.x; /* the host's qc_attn_decode_parts */\n"
    "    if (seq >= n_seqs || kvh >= n_kv_heads || part >= nparts) return;\n"
    "    int ctx = ctx_lens[seq];\n"
    "    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;\n"
    "    const int plen = qc_dec_part_len(ctx, nparts), nused = (ctx + plen - 1) / plen;\n"
    "    if (part >= (nused > 1 ? nused : 1)) return;\n"
    "    if (ctx == 0) { /* nothing to attend to: zeros */\n"
    "        for (int i = threadIdx.x; i < hn * D; i += blockDim.x)\n"
    "            out[((long long)seq * n_heads + h0 + i / D) * D + i % D] = 0.f;\n"
    "        return;\n"
    "    }\n"
    "    const int start = part * plen, end = min(ctx, start + plen);\n"
    "    const int b0 = start / QC_KVB, b1 = (end + QC_KVB - 1) / QC_KVB;\n"
    "\n"
    "    /* q rows g and g + 8 as bf16 A fragments; rows past hn are zero */\n"
    "    unsigned qa[D / 16][4];\n"
    "    {\n"
    "        const float *q0 = q + ((long long)seq * n_heads + h0 + g) * D;\n"
    "        const float *q1 = q0 + 8 * D;\n"
    "#pragma unroll\n"
    "        for (int ks = 0; ks < D / 16; ks++) {\n"
    "            int d = 32 * (ks >> 1) + 8 * t + 4 * (ks & 1);\n"
    "            float4 x = g < hn ? *(const float4 *)(q0 + d) : make_float4(0.f, 0.f, 0.f, 0.f);\n"
    "            float4 y = g + 8 < hn ? *(const float4 *)(q1 + d) : make_float4(0.f, 0.f, 0.f, 0.f);\n"
    "            qa[ks][0] = qc_pack2(x.x, x.y);\n"
    "            qa[ks][2] = qc_pack2(x.z, x.w);\n"
    "            qa[ks][1] = qc_pack2(y.x, y.y);\n"
    "            qa[ks][3] = qc_pack2(y.z, y.w);\n"
    "        }\n"
    "    }\n"
    "    const float sl2 = scale * QC_LOG2E;\n"
    "    float m0 = QC_NEG_INF, m1 = QC_NEG_INF, l0 = 0.f, l1 = 0.f;\n"
    "    float o[VG * 8][4];\n"
    "#pragma unroll\n"
    "    for (int n = 0; n < VG * 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;\n"
    "    const long long head_stride = (long long)QC_KVB * D;\n"
    "    const int *btr = bt + (long long)seq * max_blocks;\n"
    "    /* block ids of this warp's first 32 blocks, one per lane; refilled every 32 */\n"
    "    int bid_next = b0 + warp + 4 * lane < b1 ? btr[b0 + warp + 4 * lane] : 0;\n"
    "    for (int it = 0, b = b0 + warp; b < b1; it++, b += QC_DEC_WARPS) {\n"
    "        if ((it & 31) == 0 && it) {\n"
    "            int bb = b + 4 * lane;\n"
    "            bid_next = bb < b1 ? btr[bb] : 0;\n"
    "        }\n"
    "        const int bid = __shfl_sync(0xffffffffu, bid_next, it & 31);\n"
    "        const unsigned short *kb = kc + ((long long)bid * n_kv_heads + kvh) * head_stride;\n"
    "        const unsigned short *vb = vc + ((long long)bid * n_kv_heads + kvh) * head_stride;\n"
    "        uint4 kr[2][KC], vr[VG][4];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++) {\n"
    "            int tok = 4 * (g >> 1) + 2 * j + (g & 1);\n"
    "#pragma unroll\n"
    "            for (int c = 0; c < KC; c++) kr[j][c] = qc_ld16(kb + tok * D + 32 * c + 8 * t);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int dd = 0; dd < VG; dd++)\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) vr[dd][i] = qc_ld16(vb + (4 * t + i) * D + 64 * dd + 8 * g);\n"
    "        /* scores of tokens 4t + 2j + e for rows g (s[j][e]) and g + 8 (s[j][2 + e]) */\n"
    "        float s[2][4];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++) {\n"
    "            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;\n"
    "#pragma unroll\n"
    "            for (int ks = 0; ks < D / 16; ks++)\n"
    "                qc_mma(s[j], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], qc_word(kr[j][ks >> 1], 2 * (ks & 1)),\n"
    "                       qc_word(kr[j][ks >> 1], 2 * (ks & 1) + 1));\n"
    "        }\n"
    "        const int valid = end - b * QC_KVB; /* tokens of this block inside the partition */\n"
    "        float mx0 = QC_NEG_INF, mx1 = QC_NEG_INF;\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 2; e++) {\n"
    "                bool ok = 4 * t + 2 * j + e < valid;\n"
    "                s[j][e] = ok ? s[j][e] * sl2 : QC_NEG_INF;\n"
    "                s[j][2 + e] = ok ? s[j][2 + e] * sl2 : QC_NEG_INF;\n"
    "                mx0 = fmaxf(mx0, s[j][e]);\n"
    "                mx1 = fmaxf(mx1, s[j][2 + e]);\n"
    "            }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 4; i++) /* V rows past the end may hold anything (NaN): p = 0 must stay 0 */\n"
    "            if (4 * t + i >= valid)\n"
    "#pragma unroll\n"
    "                for (int dd = 0; dd < VG; dd++) vr[dd][i] = make_uint4(0u, 0u, 0u, 0u);\n"
    "        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));\n"
    "        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));\n"
    "        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));\n"
    "        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));\n"
    "        /* the block's first token is always valid, so the new maxima are finite */\n"
    "        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);\n"
    "        const float a0 = exp2f(m0 - n0), a1 = exp2f(m1 - n1);\n"
    "        m0 = n0;\n"
    "        m1 = n1;\n"
    "        float p[2][4];\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 2; j++) {\n"
    "            p[j][0] = exp2f(s[j][0] - n0);\n"
    "            p[j][1] = exp2f(s[j][1] - n0);\n"
    "            p[j][2] = exp2f(s[j][2] - n1);\n"
    "            p[j][3] = exp2f(s[j][3] - n1);\n"
    "        }\n"
    "        l0 = l0 * a0 + (p[0][0] + p[0][1] + p[1][0] + p[1][1]);\n"
    "        l1 = l1 * a1 + (p[0][2] + p[0][3] + p[1][2] + p[1][3]);\n"
    "        /* P as the A fragment: k 2t, 2t+1 <-> tokens 4t, 4t+1; k 2t+8, 2t+9 <-> 4t+2, 4t+3 */\n"
    "        const unsigned pa0 = qc_pack2(p[0][0], p[0][1]), pa1 = qc_pack2(p[0][2], p[0][3]);\n"
    "        const unsigned pa2 = qc_pack2(p[1][0], p[1][1]), pa3 = qc_pack2(p[1][2], p[1][3]);\n"
    "#pragma unroll\n"
    "        for (int dd = 0; dd < VG; dd++)\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < 8; j++) {\n"
    "                float *acc = o[dd * 8 + j];\n"
    "                acc[0] *= a0;\n"
    "                acc[1] *= a0;\n"
    "                acc[2] *= a1;\n"
    "                acc[3] *= a1;\n"
    "                const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;\n"
    "                unsigned vb0 = __byte_perm(qc_word(vr[dd][0], j >> 1), qc_word(vr[dd][1], j >> 1), sel);\n"
    "                unsigned vb1 = __byte_perm(qc_word(vr[dd][2], j >> 1), qc_word(vr[dd][3], j >> 1), sel);\n"
    "                qc_mma(acc, pa0, pa1, pa2, pa3, vb0, vb1);\n"
    "            }\n"
    "    }\n"
    "    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);\n"
    "    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);\n"
    "    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);\n"
    "    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);\n"
    "\n"
    "    /* combine the warps: sm = [warps][16 rows][D] of o, then [warps][16] m and l */\n"
    "    /* QC_ATTN_SWZ: rows SD = D + 4 floats apart and n-tile n = 8dd + j, column 2t + e at 8n + t + 4e, so\n"
    "       that the 32 lanes of a store hit 32 banks (4g + t); 0: dim order, a 16-way conflict per store */\n"
    "    constexpr int SD = D + 4 * QC_ATTN_SWZ;\n"
    "    float *so = sm, *sm_m = sm + QC_DEC_WARPS * 16 * SD, *sm_l = sm_m + QC_DEC_WARPS * 16;\n"
    "    /* thread (g, t) holds rows g, g+8, dims 64dd + 16t + 2(j&1)... : n-tile (dd, j), column 2t+e is\n"
    "       dim 64dd + 8(2t+e) + j */\n"
    "#pragma unroll\n"
    "    for (int dd = 0; dd < VG; dd++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 8; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 2; e++) {\n"
    "#if QC_ATTN_SWZ\n"
    "                const int c = 8 * (dd * 8 + j) + t + 4 * e;\n"
    "#else\n"
    "                const int c = 64 * dd + 8 * (2 * t + e) + j;\n"
    "#endif\n"
    "                so[(warp * 16 + g) * SD + c] = o[dd * 8 + j][e];\n"
    "                so[(warp * 16 + g + 8) * SD + c] = o[dd * 8 + j][2 + e];\n"
    "            }\n"
    "    if (t == 0) {\n"
    "        sm_m[warp * 16 + g] = m0;\n"
    "        sm_m[warp * 16 + g + 8] = m1;\n"
    "        sm_l[warp * 16 + g] = l0;\n"
    "        sm_l[warp * 16 + g + 8] = l1;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    const long long pair0 = (long long)seq * n_heads + h0;\n"
    "    for (int i = threadIdx.x; i < hn * D; i += blockDim.x) {\n"
    "        const int r = i / D, c = i - r * D; /* c: the position in the shared row, d: its dim */\n"
    "#if QC_ATTN_SWZ\n"
    "        const int d = 64 * (c >> 6) + 8 * (2 * (c & 3) + ((c >> 2) & 1)) + ((c >> 3) & 7);\n"
    "#else\n"
    "        const int d = c;\n"
    "#endif\n"
    "        float mm = QC_NEG_INF;\n"
    "#pragma unroll\n"
    "        for (int w = 0; w < QC_DEC_WARPS; w++) mm = fmaxf(mm, sm_m[w * 16 + r]);\n"
    "        float acc = 0.f, l = 0.f;\n"
    "#pragma unroll\n"
    "        for (int w = 0; w < QC_DEC_WARPS; w++) {\n"
    "            float f = sm_m[w * 16 + r] == QC_NEG_INF ? 0.f : exp2f(sm_m[w * 16 + r] - mm);\n"
    "            acc += f * so[(w * 16 + r) * SD + c];\n"
    "            l += f * sm_l[w * 16 + r];\n"
    "        }\n"
    "        if (nused <= 1) {\n"
    "            out[(pair0 + r) * D + d] = acc / l;\n"
    "        } else {\n"
    "            long long idx = (pair0 + r) * nparts + part;\n"
    "            work[idx * D + d] = acc;\n"
    "            if (d == 0) {\n"
    "                float *ml = work + (long long)n_seqs * n_heads * nparts * D;\n"
    "                ml[2 * idx] = mm;\n"
    "                ml[2 * idx + 1] = l;\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "/* grid (partitions, n_kv_heads * ceil(group / 16), n_seqs), 128 threads */\n"
    "extern \"C\" __global__ void __launch_bounds__(128, 3)\n"
    "    qc_attn_decode(const float *q, const unsigned short *k_cache, const unsigned short *v_cache,\n"
    "                   const int *block_tables, const int *ctx_lens, float *out, float *work, int n_seqs, int n_heads,\n"
    "                   int n_kv_heads, int head_dim, int max_blocks, float scale) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    __shared__ __align__(16) float sm[QC_DEC_WARPS * 16 * (128 + 4 * QC_ATTN_SWZ) + 2 * QC_DEC_WARPS * 16];\n"
    "    if (!qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) {\n"
    "        /* an unsupported shape: every output is NaN (the engine checks first) */\n"
    "        long long total = (long long)n_seqs * n_heads * head_dim;\n"
    "        long long id = ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;\n"
    "        long long step = (long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x;\n"
    "        for (long long i = id * blockDim.x + threadIdx.x; i < total; i += step) out[i] = qc_nan();\n"
    "        return;\n"
    "    }\n"
    "    if (head_dim == 128)\n"
    "        qc_decode<128>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads, n_kv_heads,\n"
    "                       max_blocks, scale, sm);\n"
    "    else\n"
    "        qc_decode<64>(q, k_cache, v_cache, block_tables, ctx_lens, out, work, n_seqs, n_heads, n_kv_heads,\n"
    "                      max_blocks, scale, sm);\n"
    "}\n"
    "\n"
    "/* Combine the partitions of sequences that had more than one: out = sum_p\n"
    " * 2^(m_p - M) acc_p / sum_p 2^(m_p - M) l_p.  grid (n_heads, n_seqs), 128 threads.\n"
    " * ob (may be null): out's bf16 copy (nearest even, as core.cast_bf16), of every\n"
    " * sequence, so that a linear taking bf16 needs no cast launch after it. */\n"
    "__device__ __forceinline__ unsigned short qc_red_tobf(float f) {\n"
    "    unsigned short r;\n"
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f));\n"
    "    return r;\n"
    "}\n"
    "__device__ __forceinline__ void qc_reduce(const int *ctx_lens, float *out, const float *work, int n_seqs,\n"
    "                                          int n_heads, int n_kv_heads, int head_dim, int max_blocks,\n"
    "                                          unsigned short *ob) {\n"
    "    qc_grid_dep(); /* QC_KERNEL_GRID_DEP: nothing is read or written before it */\n"
    "    __shared__ float wts[QC_DEC_MAX_PARTS];\n"
    "    __shared__ float inv_l;\n"
    "    const int h = blockIdx.x, seq = blockIdx.y;\n"
    "    if (seq >= n_seqs || h >= n_heads || !qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0)\n"
    "        return;\n"
    "    const int nparts = qc_dec_parts_warp(n_seqs, n_kv_heads, max_blocks);\n"
    "    int ctx = ctx_lens[seq];\n"
    "    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;\n"
    "    const int plen = qc_dec_part_len(ctx, nparts), nused = (ctx + plen - 1) / plen;\n"
    "    if (nused <= 1) { /* the decode kernel wrote it */\n"
    "        if (ob)\n"
    "            for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {\n"
    "                const long long o = ((long long)seq * n_heads + h) * head_dim + d;\n"
    "                ob[o] = qc_red_tobf(out[o]);\n"
    "            }\n"
    "        return;\n"
    "    }\n"
    "    const long long base = ((long long)seq * n_heads + h) * nparts;\n"
    "    const float *ml = work + (long long)n_seqs * n_heads * nparts * head_dim;\n"
    "    if (threadIdx.x < 32) {\n"
    "        float mm = QC_NEG_INF;\n"
    "        for (int p = threadIdx.x; p < nused; p += 32) mm = fmaxf(mm, ml[2 * (base + p)]);\n"
    "        for (int o = 16; o > 0; o >>= 1) mm = fmaxf(mm, __shfl_xor_sync(0xffffffffu, mm, o));\n"
    "        float l = 0.f;\n"
    "        for (int p = threadIdx.x; p < nused; p += 32) {\n"
    "            float w = exp2f(ml[2 * (base + p)] - mm);\n"
    "            wts[p] = w;\n"
    "            l += w * ml[2 * (base + p) + 1];\n"
    "        }\n"
    "        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);\n"
    "        if (threadIdx.x == 0) inv_l = 1.f / l;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {\n"
    "        float acc = 0.f;\n"
    "        for (int p = 0; p < nused; p++) acc += wts[p] * work[(base + p) * head_dim + d];\n"
    "        const long long o = ((long long)seq * n_heads + h) * head_dim + d;\n"
    "        out[o] = acc * inv_l;\n"
    "        if (ob) ob[o] = qc_red_tobf(acc * inv_l);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(128)\n"
    "    qc_attn_decode_reduce(const int *ctx_lens, float *out, const float *work, int n_seqs, int n_heads,\n"
    "                          int n_kv_heads, int head_dim, int max_blocks) {\n"
    "    qc_reduce(ctx_lens, out, work, n_seqs, n_heads, n_kv_heads, head_dim, max_blocks, 0);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(128)\n"
    "    qc_attn_decode_reduce_bf16(const int *ctx_lens, float *out, const float *work, int n_seqs, int n_heads,\n"
    "                               int n_kv_heads, int head_dim, int max_blocks, unsigned short *out_bf16) {\n"
    "    qc_reduce(ctx_lens, out, work, n_seqs, n_heads, n_kv_heads, head_dim, max_blocks, out_bf16);\n"
    "}\n";

static const char PREFILL_SRC[] = ATTN_COMMON
    "/* ---- prefill ---- */\n"
    "\n"
    "__device__ __forceinline__ void qc_cp16(unsigned dst, const void *src, bool valid) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(valid ? 16 : 0));\n"
    "}\n"
    "__device__ __forceinline__ void qc_ldm4(unsigned *r, unsigned addr) {\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "__device__ __forceinline__ void qc_ldm4t(unsigned *r, unsigned addr) {\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "}\n"
    "/* 2^x in one MUFU op (denormal results flush to 0: a softmax weight that small adds nothing) */\n"
    "__device__ __forceinline__ float qc_ex2(float x) {\n"
    "    float y;\n"
    "    asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
    "    return y;\n"
    "}\n"
    "/* QC_PF_NO_WG 1 (A/B runs through QC_ATTN_PF_OPTS): the mma.sync path on sm_90a too.  QC_PF_MINB: CTAs an\n"
    "   SM the sm_90a path is compiled for (3: 161 registers, no spill; the mma.sync path takes 203 at sm_90a) */\n"
    "#ifndef QC_PF_NO_WG\n"
    "#define QC_PF_NO_WG 0\n"
    "#endif\n"
    "#ifndef QC_PF_MINB\n"
    "#define QC_PF_MINB 3\n"
    "#endif\n"
    "#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !QC_PF_NO_WG\n"
    "/* sm_90a: S = Q K^T and O += P V as warpgroup MMAs (the CTA's 128 threads are one warpgroup, 64 rows).  K and V\n"
    "   tiles share one shared-memory layout: a token per 128-byte row of 64 head elements, XOR-swizzled in 16-byte\n"
    "   chunks by (row % 8) (the 128-byte swizzle), one 8 KiB block per 64 of the head's D elements.  For S that is\n"
    "   K-major B (K = head elements; SBO 1024 B between 8-token groups); for P V it is MN-major B (N = head\n"
    "   elements, transposed: 64-element blocks LBO 8 KiB apart, 8-token groups SBO 1024 B apart).  Q and P are the\n"
    "   A operands from registers, in mma.sync's m16n8k16 A layout, which wgmma's register A shares per warp. */\n"
    "#define QC_PF_WG 1\n"
    "/* V's MN-major strides (overridable for A/B runs through QC_ATTN_PF_OPTS) */\n"
    "#ifndef QC_PF_VLBO\n"
    "#define QC_PF_VLBO (QC_PF_KV * 128)\n"
    "#endif\n"
    "#ifndef QC_PF_VSBO\n"
    "#define QC_PF_VSBO 1024\n"
    "#endif\n"
    "__device__ __forceinline__ unsigned long long qc_pf_desc(unsigned addr, unsigned lbo, unsigned sbo) {\n"
    "    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |\n"
    "           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);\n"
    "}\n"
    "__device__ __forceinline__ void qc_wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void qc_wg_commit_wait() {\n"
    "    asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
    "    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
    "}\n"
    QC_WGMMA_RA_SRC
    "#endif\n"
    "/* byte offset of 16-byte chunk c of row r in a [rows][D] bf16 tile, XOR-swizzled over 8 rows */\n"
    "template <int D>\n"
    "__device__ __forceinline__ unsigned qc_swz(int r, int c) {\n"
    "    return (unsigned)(r * D * 2 + ((c ^ (r & 7)) << 4));\n"
    "}\n"
    "\n"
    "/* One CTA = 64 (token, q head) rows of one sequence's new tokens for one kv\n"
    " * head: row r is token r / group, head kvh * group + r % group, so each K/V\n"
    " * tile serves every q head of the group.  KV tiles of 64 tokens (4 blocks)\n"
    " * in a 2-stage cp.async pipeline; S = Q K^T and O += P V by m16n8k16 mma,\n"
    " * fragments by ldmatrix (V transposed); online softmax in f32, P rounded to\n"
    " * bf16 for the second product. */\n"
    "template <int D>\n"
    "__device__ __forceinline__ void qc_prefill(const float *q, const unsigned short *kc, const unsigned short *vc,\n"
    "                                           const int *bt, const int *ctx_lens, const int *q_start, float *out,\n"
    "                                           int n_seqs, int n_heads, int n_kv_heads, int max_blocks, float scale,\n"
    "                                           unsigned char *smem) {\n"
    "    constexpr int CH = D / 8;                       /* 16-byte chunks per row */\n"
    "    constexpr int TILE = QC_PF_KV * D * 2;          /* bytes of one K (or V) tile */\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;\n"
    "    const int gq = n_heads / n_kv_heads, kvh = blockIdx.y;\n"
    "    /* find this CTA's sequence and row tile: sequences in order, tiles of a\n"
    "       sequence last-first (the longest causal rows start first) */\n"
    "    int seq = -1, tile = 0, n_new = 0;\n"
    "    {\n"
    "        int left = blockIdx.x;\n"
    "        for (int s = 0; s < n_seqs; s++) {\n"
    "            int nn = q_start[s + 1] - q_start[s];\n"
    "            int nt = nn > 0 ? (nn * gq + QC_PF_ROWS - 1) / QC_PF_ROWS : 0;\n"
    "            if (left < nt) {\n"
    "                seq = s;\n"
    "                tile = nt - 1 - left;\n"
    "                n_new = nn;\n"
    "                break;\n"
    "            }\n"
    "            left -= nt;\n"
    "        }\n"
    "    }\n"
    "    if (seq < 0) return;\n"
    "    int ctx = ctx_lens[seq];\n"
    "    ctx = ctx < 0 ? 0 : ctx > max_blocks * QC_KVB ? max_blocks * QC_KVB : ctx;\n"
    "    const int first_pos = ctx - n_new; /* position of new token 0 */\n"
    "    const int qs = q_start[seq], rows = n_new * gq, row0 = tile * QC_PF_ROWS;\n"
    "    /* this thread's rows: g and g + 8 of the warp's 16 */\n"
    "    int rr[2], pos[2];\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "        int r = row0 + warp * 16 + g + 8 * h;\n"
    "        rr[h] = r < rows ? r : rows - 1; /* rows past the end repeat the last (not stored) */\n"
    "        pos[h] = first_pos + rr[h] / gq;\n"
    "    }\n"
    "    const int last_row = min(rows, row0 + QC_PF_ROWS) - 1;\n"
    "    const int max_pos = first_pos + last_row / gq, min_pos = first_pos + row0 / gq;\n"
    "    const int kv_len = min(max_pos + 1, ctx); /* keys 0 .. kv_len - 1 */\n"
    "    const int n_tiles = kv_len > 0 ? (kv_len + QC_PF_KV - 1) / QC_PF_KV : 0;\n"
    "\n"
    "    unsigned qa[D / 16][4];\n"
    "    {\n"
    "        const float *q0 = q + ((long long)(qs + rr[0] / gq) * n_heads + kvh * gq + rr[0] % gq) * D;\n"
    "        const float *q1 = q + ((long long)(qs + rr[1] / gq) * n_heads + kvh * gq + rr[1] % gq) * D;\n"
    "#pragma unroll\n"
    "        for (int ks = 0; ks < D / 16; ks++) {\n"
    "            float2 x0 = *(const float2 *)(q0 + 16 * ks + 2 * t), x1 = *(const float2 *)(q0 + 16 * ks + 8 + 2 * t);\n"
    "            float2 y0 = *(const float2 *)(q1 + 16 * ks + 2 * t), y1 = *(const float2 *)(q1 + 16 * ks + 8 + 2 * t);\n"
    "            qa[ks][0] = qc_pack2(x0.x, x0.y);\n"
    "            qa[ks][1] = qc_pack2(y0.x, y0.y);\n"
    "            qa[ks][2] = qc_pack2(x1.x, x1.y);\n"
    "            qa[ks][3] = qc_pack2(y1.x, y1.y);\n"
    "        }\n"
    "    }\n"
    "    /* the stages start on a 1024-byte boundary (the host adds 1 KiB): the sm_90a path's 128-byte swizzle\n"
    "       repeats every 1024 B */\n"
    "    const unsigned sbase = ((unsigned)__cvta_generic_to_shared(smem) + 1023u) & ~1023u;\n"

    "    const int *btr = bt + (long long)seq * max_blocks;\n"
    "    const long long head_stride = (long long)QC_KVB * D;\n"
    "    /* tile kt -> stage: K at stage * 2 * TILE, V after it; tokens past kv_len zero-filled.  Thread i copies\n"
    "       chunk c = i % CH of rows r0 + j * R (R = 128 / CH rows a pass, a multiple of 8): c and the swizzle\n"
    "       (c ^ (r & 7), r & 7 = r0 & 7) are fixed per thread, so a pass costs one block-table read and two\n"
    "       copies. */\n"
    "    constexpr int R = 128 / CH, PASS = QC_PF_KV / R;\n"
    "    const int c_ld = threadIdx.x % CH, r0 = threadIdx.x / CH;\n"
    "#ifdef QC_PF_WG\n"
    "    /* chunk c of token r: block c / 8 (64 elements, 8 KiB), row r of 128 B, chunk (c % 8) ^ (r % 8) */\n"
    "    const unsigned sw_ld = (unsigned)((c_ld >> 3) * (QC_PF_KV * 128) + r0 * 128 + (((c_ld & 7) ^ (r0 & 7)) << 4));\n"
    "    constexpr int ROW_B = 128;\n"
    "#else\n"
    "    const unsigned sw_ld = (unsigned)(r0 * D * 2 + ((c_ld ^ (r0 & 7)) << 4));\n"
    "    constexpr int ROW_B = D * 2;\n"
    "#endif\n"

    "    auto load = [&](int stage, int kt) {\n"
    "        const unsigned sk = sbase + stage * 2 * TILE + sw_ld, sv = sk + TILE;\n"
    "        const int tok0 = kt * QC_PF_KV;\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < PASS; j++) {\n"
    "            const int r = r0 + j * R, tok = tok0 + r;\n"
    "            const bool ok = tok < kv_len;\n"
    "            long long off = 0;\n"
    "            if (ok) off = ((long long)btr[tok / QC_KVB] * n_kv_heads + kvh) * head_stride + (tok % QC_KVB) * D + c_ld * 8;\n"
    "            qc_cp16(sk + j * R * ROW_B, kc + off, ok);\n"
    "            qc_cp16(sv + j * R * ROW_B, vc + off, ok);\n"
    "        }\n"
    "    };\n"
    "    const float sl2 = scale * QC_LOG2E;\n"
    "    float m[2] = {QC_NEG_INF, QC_NEG_INF}, l[2] = {0.f, 0.f};\n"
    "    float o[D / 8][4];\n"
    "#pragma unroll\n"
    "    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;\n"
    "    if (n_tiles > 0) load(0, 0);\n"
    "    asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    for (int kt = 0; kt < n_tiles; kt++) {\n"
    "        if (kt + 1 < n_tiles) load((kt + 1) & 1, kt + 1);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "        asm volatile(\"cp.async.wait_group 1;\\n\" ::);\n"
    "#ifdef QC_PF_WG\n"
    "        /* the copies this thread waited for are generic-proxy writes: visible to the tensor cores' reads after\n"
    "           this fence and the barrier */\n"
    "        asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n"
    "#endif\n"
    "        __syncthreads();\n"
    "        const unsigned sk = sbase + (kt & 1) * 2 * TILE, sv = sk + TILE;\n"
    "        float s[QC_PF_KV / 8][4];\n"
    "#ifdef QC_PF_WG\n"
    "        /* S = Q K^T, D / 16 steps of k16 */\n"
    "        qc_wg_fence();\n"
    "#pragma unroll\n"
    "        for (int ks = 0; ks < D / 16; ks++)\n"
    "            qc_wgmma_ra64<0>(&s[0][0], qa[ks], qc_pf_desc(sk + (ks >> 2) * (QC_PF_KV * 128) + (ks & 3) * 32, 16, 1024), ks > 0);\n"
    "        qc_wg_commit_wait();\n"
    "#else\n"
    "#pragma unroll\n"
    "        for (int n = 0; n < QC_PF_KV / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;\n"
    "#pragma unroll\n"
    "        for (int ks = 0; ks < D / 16; ks++)\n"
    "#pragma unroll\n"
    "            for (int np = 0; np < QC_PF_KV / 16; np++) {\n"
    "                unsigned b[4];\n"
    "                int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);\n"
    "                qc_ldm4(b, sk + qc_swz<D>(r, ks * 2 + ((lane >> 3) & 1)));\n"
    "                qc_mma(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b[0], b[1]);\n"
    "                qc_mma(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], b[2], b[3]);\n"
    "            }\n"
    "#endif\n"
    "        /* scale, causal mask (only tiles that reach past the first row's position), row max.  A tile\n"
    "           without masking (most of them) takes the max of the raw scores: with sl2 > 0, rounding keeps\n"
    "           the order, so max(s) * sl2 is the max of the scaled scores, and the scale rides in the\n"
    "           exponent's FMA below (mul) instead of a multiply of its own. */\n"
    "        const int tok0 = kt * QC_PF_KV;\n"
    "        const bool mask = tok0 + QC_PF_KV - 1 > min_pos, raw = !mask && sl2 > 0.f;\n"
    "        const float mul = raw ? sl2 : 1.f;\n"
    "        float mx[2] = {QC_NEG_INF, QC_NEG_INF};\n"
    "        if (raw) {\n"
    "#pragma unroll\n"
    "            for (int n = 0; n < QC_PF_KV / 8; n++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);\n"
    "        } else {\n"
    "#pragma unroll\n"
    "            for (int n = 0; n < QC_PF_KV / 8; n++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) {\n"
    "                    int tok = tok0 + 8 * n + 2 * t + (e & 1), h = e >> 1;\n"
    "                    float v = s[n][e] * sl2;\n"
    "                    if (mask && tok > pos[h]) v = QC_NEG_INF;\n"
    "                    s[n][e] = v;\n"
    "                    mx[h] = fmaxf(mx[h], v);\n"
    "                }\n"
    "        }\n"
    "        float alpha[2];\n"
    "#pragma unroll\n"
    "        for (int h = 0; h < 2; h++) {\n"
    "            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));\n"
    "            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));\n"
    "            mx[h] *= mul;\n"
    "            float mn = fmaxf(m[h], mx[h]);\n"
    "            float ref = mn == QC_NEG_INF ? 0.f : mn; /* a row with no key yet (position < 0) */\n"
    "            alpha[h] = qc_ex2(m[h] - ref);\n"
    "            m[h] = mn;\n"
    "            mx[h] = ref;\n"
    "        }\n"
    "        float ls[2] = {0.f, 0.f};\n"
    "#pragma unroll\n"
    "        for (int n = 0; n < QC_PF_KV / 8; n++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) {\n"
    "                float p = qc_ex2(fmaf(s[n][e], mul, -mx[e >> 1]));\n"
    "                s[n][e] = p;\n"
    "                ls[e >> 1] += p;\n"
    "            }\n"
    "        l[0] = l[0] * alpha[0] + ls[0];\n"
    "        l[1] = l[1] * alpha[1] + ls[1];\n"
    "        /* once the row maxima settle (most later tiles) alpha is 1 in every lane: skip the rescale */\n"
    "        if (!__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) {\n"
    "#pragma unroll\n"
    "            for (int n = 0; n < D / 8; n++) {\n"
    "                o[n][0] *= alpha[0];\n"
    "                o[n][1] *= alpha[0];\n"
    "                o[n][2] *= alpha[1];\n"
    "                o[n][3] *= alpha[1];\n"
    "            }\n"
    "        }\n"
    "#ifdef QC_PF_WG\n"
    "        {\n"
    "            /* O += P V: P (bf16, from this tile's softmax) as register A, V MN-major; QC_PF_KV / 16 steps of k16 */\n"
    "            qc_wg_fence();\n"
    "#pragma unroll\n"
    "            for (int kk = 0; kk < QC_PF_KV / 16; kk++) {\n"
    "                const unsigned pa[4] = {qc_pack2(s[2 * kk][0], s[2 * kk][1]), qc_pack2(s[2 * kk][2], s[2 * kk][3]),\n"
    "                                        qc_pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]),\n"
    "                                        qc_pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};\n"
    "                const unsigned long long dv = qc_pf_desc(sv + kk * 16 * 128, QC_PF_VLBO, QC_PF_VSBO);\n"
    "                if constexpr (D == 128) qc_wgmma_ra128<1>(&o[0][0], pa, dv, 1);\n"
    "                else qc_wgmma_ra64<1>(&o[0][0], pa, dv, 1);\n"
    "            }\n"
    "            qc_wg_commit_wait();\n"
    "        }\n"
    "#else\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < QC_PF_KV / 16; kk++) {\n"
    "            unsigned pa0 = qc_pack2(s[2 * kk][0], s[2 * kk][1]), pa1 = qc_pack2(s[2 * kk][2], s[2 * kk][3]);\n"
    "            unsigned pa2 = qc_pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);\n"
    "            unsigned pa3 = qc_pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);\n"
    "#pragma unroll\n"
    "            for (int dp = 0; dp < D / 16; dp++) {\n"
    "                unsigned b[4];\n"
    "                int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);\n"
    "                qc_ldm4t(b, sv + qc_swz<D>(r, dp * 2 + (lane >> 4)));\n"
    "                qc_mma(o[2 * dp], pa0, pa1, pa2, pa3, b[0], b[1]);\n"
    "                qc_mma(o[2 * dp + 1], pa0, pa1, pa2, pa3, b[2], b[3]);\n"
    "            }\n"
    "        }\n"
    "#endif\n"
    "        __syncthreads(); /* the stage is refilled next iteration */\n"
    "    }\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);\n"
    "        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "        int r = row0 + warp * 16 + g + 8 * h;\n"
    "        if (r >= rows) continue;\n"
    "        float inv = l[h] > 0.f ? 1.f / l[h] : 0.f; /* no key (position < 0): zeros */\n"
    "        float *dst = out + ((long long)(qs + r / gq) * n_heads + kvh * gq + r % gq) * D;\n"
    "#pragma unroll\n"
    "        for (int n = 0; n < D / 8; n++)\n"
    "            *(float2 *)(dst + 8 * n + 2 * t) = make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* grid (row tiles of every sequence, n_kv_heads), 128 threads, 2 stages of K and V tiles in dynamic smem */\n"
    "#ifdef QC_PF_WG\n"
    "#define QC_PF_BOUNDS __launch_bounds__(128, QC_PF_MINB)\n"
    "#else\n"
    "#define QC_PF_BOUNDS __launch_bounds__(128)\n"
    "#endif\n"
    "extern \"C\" __global__ void QC_PF_BOUNDS\n"
    "    qc_attn_prefill(const float *q, const unsigned short *k_cache, const unsigned short *v_cache,\n"
    "                    const int *block_tables, const int *ctx_lens, const int *q_start, float *out, int n_seqs,\n"
    "                    int n_heads, int n_kv_heads, int head_dim, int max_blocks, float scale) {\n"
    "    extern __shared__ __align__(128) unsigned char smem[];\n"
    "    if (!qc_attn_shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || n_seqs <= 0) {\n"
    "        if (n_seqs <= 0) return;\n"
    "        long long total = (long long)q_start[n_seqs] * n_heads * head_dim;\n"
    "        long long id = (long long)blockIdx.y * gridDim.x + blockIdx.x;\n"
    "        long long step = (long long)gridDim.x * gridDim.y * blockDim.x;\n"
    "        for (long long i = id * blockDim.x + threadIdx.x; i < total; i += step) out[i] = qc_nan();\n"
    "        return;\n"
    "    }\n"
    "    if (head_dim == 128)\n"
    "        qc_prefill<128>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads, n_kv_heads,\n"
    "                        max_blocks, scale, smem);\n"
    "    else\n"
    "        qc_prefill<64>(q, k_cache, v_cache, block_tables, ctx_lens, q_start, out, n_seqs, n_heads, n_kv_heads,\n"
    "                       max_blocks, scale, smem);\n"
    "}\n";

/* ---- host-side geometry (the device code repeats these formulas) ---- */

int qc_attn_decode_parts(int n_seqs, int n_kv_heads, int max_blocks) {
    int64_t pairs = (int64_t)n_seqs * n_kv_heads, est = (int64_t)max_blocks * QC_ATTN_BLOCK;
    if (pairs < 1) pairs = 1;
    if (est < 1) est = 1;
    int64_t cap = (est + DEC_MIN_PART - 1) / DEC_MIN_PART;
    if (cap > DEC_MAX_PARTS) cap = DEC_MAX_PARTS;
    int64_t best = 1, best_cost = (pairs + DEC_SLOTS - 1) / DEC_SLOTS * (est + DEC_CTA_COST);
    for (int64_t p = 2; p <= cap && pairs * p <= (int64_t)DEC_MAX_WAVES * DEC_SLOTS; p++) {
        int64_t cost = (pairs * p + DEC_SLOTS - 1) / DEC_SLOTS * ((est + p - 1) / p + DEC_CTA_COST);
        if (cost < best_cost) best = p, best_cost = cost;
    }
    return (int)best;
}

/* tokens per partition of a context of ctx tokens split nparts ways */
static int64_t part_len(int64_t ctx, int nparts) {
    int64_t per = (ctx + nparts - 1) / nparts;
    per = (per + QC_ATTN_BLOCK - 1) / QC_ATTN_BLOCK * QC_ATTN_BLOCK;
    return per < DEC_MIN_PART ? DEC_MIN_PART : per;
}

size_t qc_attn_decode_workspace_bytes(int n_seqs, int n_heads, int head_dim, int max_ctx) {
    if (n_seqs <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    /* qc_attn_decode_parts never exceeds this for any n_kv_heads >= 1 */
    int64_t parts = ((int64_t)(max_ctx > 0 ? max_ctx : 1) + DEC_MIN_PART - 1) / DEC_MIN_PART;
    int64_t by_waves = (int64_t)DEC_MAX_WAVES * DEC_SLOTS / n_seqs;
    if (parts > DEC_MAX_PARTS) parts = DEC_MAX_PARTS;
    if (parts > by_waves) parts = by_waves;
    if (parts < 1) parts = 1;
    return (size_t)n_seqs * (size_t)n_heads * (size_t)parts * ((size_t)head_dim + 2) * sizeof(float);
}

int qc_attn_shape_supported(int n_heads, int n_kv_heads, int head_dim, qc_reason *why) {
    if (head_dim != 64 && head_dim != 128) {
        qc_reason_set(why, "shape", "paged attention: head_dim %d is not supported (64 or 128)", head_dim);
        return 0;
    }
    if (n_kv_heads <= 0 || n_heads < n_kv_heads || n_heads % n_kv_heads != 0) {
        qc_reason_set(why, "shape", "paged attention: %d q heads are not a positive multiple of %d kv heads", n_heads,
                      n_kv_heads);
        return 0;
    }
    return 1;
}

static void dims3(qc_launch_dims *d, int64_t x, int64_t y, int64_t z, uint32_t block, uint32_t smem) {
    memset(d, 0, sizeof *d);
    int ok = x > 0 && y > 0 && z > 0 && x <= 2147483647LL && y <= 65535 && z <= 65535;
    d->grid[0] = ok ? (uint32_t)x : 0;
    d->grid[1] = ok ? (uint32_t)y : 0;
    d->grid[2] = ok ? (uint32_t)z : 0;
    d->block[0] = block;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = smem;
}

void qc_attn_kv_write_dims(int64_t t, int n_kv_heads, int head_dim, qc_launch_dims *d) {
    int64_t work = t > 0 && n_kv_heads > 0 && head_dim > 0 ? t * n_kv_heads * (head_dim % 8 ? head_dim : head_dim / 8)
                                                           : 0;
    int64_t blocks = (work + 255) / 256;
    dims3(d, blocks > GRID_CAP ? GRID_CAP : blocks, 1, 1, 256, 0);
}

void qc_attn_decode_dims(int n_seqs, int n_heads, int n_kv_heads, int head_dim, int max_blocks,
                         qc_launch_dims *decode, qc_launch_dims *reduce) {
    int gq = n_kv_heads > 0 ? n_heads / n_kv_heads : 0;
    int64_t y = gq > 0 ? (int64_t)n_kv_heads * ((gq + 15) / 16) : 0;
    (void)head_dim;
    if (decode) dims3(decode, qc_attn_decode_parts(n_seqs, n_kv_heads, max_blocks), y, n_seqs, 32 * DEC_WARPS, 0);
    if (reduce) dims3(reduce, n_heads, n_seqs, 1, 128, 0);
}

void qc_attn_prefill_dims(int64_t t, int n_seqs, int n_heads, int n_kv_heads, int head_dim, qc_launch_dims *d) {
    int gq = n_kv_heads > 0 ? n_heads / n_kv_heads : 0;
    /* sum over sequences of ceil(rows / 64) <= ceil(all rows / 64) + n_seqs; the rest return at once */
    int64_t x = t > 0 && gq > 0 ? (t * gq + PF_ROWS - 1) / PF_ROWS + n_seqs : 0;
    int hd = head_dim == 64 ? 64 : 128;
    /* 2 stages of K and V tiles, and 1 KiB to start them on a 1024-byte boundary (the sm_90a path's swizzle) */
    dims3(d, x, n_kv_heads, 1, 128, (uint32_t)(4 * PF_KV * hd * 2 + 1024));
}

void qc_attn_problem(qc_problem *p, int64_t m, int n_heads, int n_kv_heads, int head_dim, int scheme) {
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->m = m;
    p->n = n_heads;
    p->k = head_dim;
    p->group_size = n_kv_heads > 0 ? (uint32_t)n_kv_heads : 0;
    p->scheme = scheme > 0 ? (uint32_t)scheme : 0;
}

static int clamp_int(int64_t v) { return v < 0 ? 0 : v > 2147483647LL ? 2147483647 : (int)v; }

static void kv_write_pdims(const qc_problem *p, qc_launch_dims *d) {
    qc_attn_kv_write_dims(p->m, clamp_int(p->group_size), clamp_int(p->k), d);
}
static void decode_pdims(const qc_problem *p, qc_launch_dims *d) {
    qc_attn_decode_dims(clamp_int(p->m), clamp_int(p->n), clamp_int(p->group_size), clamp_int(p->k),
                        clamp_int(p->scheme), d, NULL);
}
static void reduce_pdims(const qc_problem *p, qc_launch_dims *d) {
    qc_attn_decode_dims(clamp_int(p->m), clamp_int(p->n), clamp_int(p->group_size), clamp_int(p->k),
                        clamp_int(p->scheme), NULL, d);
}
static void prefill_pdims(const qc_problem *p, qc_launch_dims *d) {
    qc_attn_prefill_dims(p->m, clamp_int(p->scheme), clamp_int(p->n), clamp_int(p->group_size), clamp_int(p->k), d);
}

/* ---- C references ---- */

static int shape_ok(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
    return (head_dim == 64 || head_dim == 128) && n_kv_heads > 0 && n_heads >= n_kv_heads &&
           n_heads % n_kv_heads == 0;
}

static void fill_nan(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
}

static void kv_write_ref(const float *k, const float *v, uint16_t *k_cache, uint16_t *v_cache, const int32_t *slots,
                         int64_t t, int32_t n_kv_heads, int32_t head_dim) {
    if (t <= 0 || n_kv_heads <= 0 || head_dim <= 0) return;
    for (int64_t i = 0; i < t; i++) {
        if (slots[i] < 0) continue;
        int64_t blk = slots[i] / QC_ATTN_BLOCK, off = slots[i] % QC_ATTN_BLOCK;
        for (int32_t h = 0; h < n_kv_heads; h++) {
            int64_t src = (i * n_kv_heads + h) * head_dim, dst = ((blk * n_kv_heads + h) * QC_ATTN_BLOCK + off) * head_dim;
            for (int32_t d = 0; d < head_dim; d++) {
                k_cache[dst + d] = qc_f32_to_bf16(k[src + d]);
                v_cache[dst + d] = qc_f32_to_bf16(v[src + d]);
            }
        }
    }
}

/* Attention of one q row (f32, rounded to bf16 here) over keys 0 .. n_keys - 1
 * of sequence row `btr`, kv head kvh; out[head_dim] in double, written as f32.
 * sc: scratch of n_keys doubles. */
static void attend_row(const float *q, const uint16_t *k_cache, const uint16_t *v_cache, const int32_t *btr,
                       int64_t n_keys, int32_t kvh, int32_t n_kv_heads, int32_t head_dim, float scale, double *sc,
                       double *acc, float *out) {
    if (n_keys <= 0) {
        for (int32_t d = 0; d < head_dim; d++) out[d] = 0.f;
        return;
    }
    double qd[128], mx = -INFINITY;
    for (int32_t d = 0; d < head_dim; d++) qd[d] = qc_round_bf16(q[d]);
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = (((int64_t)btr[j / QC_ATTN_BLOCK] * n_kv_heads + kvh) * QC_ATTN_BLOCK + j % QC_ATTN_BLOCK) *
                      head_dim;
        double s = 0;
        for (int32_t d = 0; d < head_dim; d++) s += qd[d] * qc_bf16_to_f32(k_cache[row + d]);
        sc[j] = s * scale;
        if (sc[j] > mx) mx = sc[j];
    }
    double l = 0;
    for (int32_t d = 0; d < head_dim; d++) acc[d] = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = (((int64_t)btr[j / QC_ATTN_BLOCK] * n_kv_heads + kvh) * QC_ATTN_BLOCK + j % QC_ATTN_BLOCK) *
                      head_dim;
        double p = exp(sc[j] - mx);
        l += p;
        for (int32_t d = 0; d < head_dim; d++) acc[d] += p * qc_bf16_to_f32(v_cache[row + d]);
    }
    for (int32_t d = 0; d < head_dim; d++) out[d] = (float)(acc[d] / l);
}

static int64_t clamp_ctx(int32_t ctx, int32_t max_blocks) {
    int64_t cap = (int64_t)max_blocks * QC_ATTN_BLOCK;
    return ctx < 0 ? 0 : ctx > cap ? cap : ctx;
}

static void attn_decode_ref(const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                            const int32_t *block_tables, const int32_t *ctx_lens, float *out, float *work,
                            int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                            int32_t max_blocks, float scale) {
    (void)work;
    if (n_seqs <= 0 || n_heads <= 0) return;
    if (!shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) {
        fill_nan(out, (int64_t)n_seqs * n_heads * (head_dim > 0 ? head_dim : 0));
        return;
    }
    int64_t cap = (int64_t)max_blocks * QC_ATTN_BLOCK;
    double *sc = malloc((size_t)cap * sizeof *sc), acc[128];
    if (!sc) {
        fill_nan(out, (int64_t)n_seqs * n_heads * head_dim);
        return;
    }
    int32_t gq = n_heads / n_kv_heads;
    for (int32_t s = 0; s < n_seqs; s++) {
        int64_t ctx = clamp_ctx(ctx_lens[s], max_blocks);
        for (int32_t h = 0; h < n_heads; h++) {
            int64_t r = ((int64_t)s * n_heads + h) * head_dim;
            attend_row(q + r, k_cache, v_cache, block_tables + (int64_t)s * max_blocks, ctx, h / gq, n_kv_heads,
                       head_dim, scale, sc, acc, out + r);
        }
    }
    free(sc);
}

/* The combine the reduce kernel does, in double, from the partials the GPU
 * decode left in work (log2-domain maxima m_p, sums l_p, unnormalized acc_p);
 * out_bf16 (may be NULL): out's bf16 copy, every sequence. */
static void reduce_ref(const int32_t *ctx_lens, float *out, const float *work, int32_t n_seqs, int32_t n_heads,
                       int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks, uint16_t *out_bf16) {
    if (n_seqs <= 0 || n_heads <= 0 || !shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) return;
    int nparts = qc_attn_decode_parts(n_seqs, n_kv_heads, max_blocks);
    const float *ml = work + (int64_t)n_seqs * n_heads * nparts * head_dim;
    for (int32_t s = 0; s < n_seqs; s++) {
        int64_t ctx = clamp_ctx(ctx_lens[s], max_blocks), plen = part_len(ctx, nparts);
        int64_t nused = (ctx + plen - 1) / plen;
        if (nused <= 1) {
            if (out_bf16)
                for (int64_t i = (int64_t)s * n_heads * head_dim; i < (int64_t)(s + 1) * n_heads * head_dim; i++)
                    out_bf16[i] = qc_f32_to_bf16(out[i]);
            continue;
        }
        for (int32_t h = 0; h < n_heads; h++) {
            int64_t base = ((int64_t)s * n_heads + h) * nparts;
            double mm = -INFINITY, l = 0;
            for (int64_t p = 0; p < nused; p++)
                if (ml[2 * (base + p)] > mm) mm = ml[2 * (base + p)];
            for (int64_t p = 0; p < nused; p++) l += exp2(ml[2 * (base + p)] - mm) * ml[2 * (base + p) + 1];
            for (int32_t d = 0; d < head_dim; d++) {
                double acc = 0;
                for (int64_t p = 0; p < nused; p++)
                    acc += exp2(ml[2 * (base + p)] - mm) * work[(base + p) * head_dim + d];
                int64_t o = ((int64_t)s * n_heads + h) * head_dim + d;
                out[o] = (float)(acc / l);
                if (out_bf16) out_bf16[o] = qc_f32_to_bf16(out[o]);
            }
        }
    }
}
static void attn_decode_reduce_ref(const int32_t *ctx_lens, float *out, const float *work, int32_t n_seqs,
                                   int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks) {
    reduce_ref(ctx_lens, out, work, n_seqs, n_heads, n_kv_heads, head_dim, max_blocks, NULL);
}
static void attn_decode_reduce_bf16_ref(const int32_t *ctx_lens, float *out, const float *work, int32_t n_seqs,
                                        int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks,
                                        uint16_t *out_bf16) {
    reduce_ref(ctx_lens, out, work, n_seqs, n_heads, n_kv_heads, head_dim, max_blocks, out_bf16);
}

static void attn_prefill_ref(const float *q, const uint16_t *k_cache, const uint16_t *v_cache,
                             const int32_t *block_tables, const int32_t *ctx_lens, const int32_t *q_start,
                             float *out, int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                             int32_t max_blocks, float scale) {
    if (n_seqs <= 0 || n_heads <= 0) return;
    int64_t t = q_start[n_seqs];
    if (!shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) {
        fill_nan(out, t * n_heads * (head_dim > 0 ? head_dim : 0));
        return;
    }
    int64_t cap = (int64_t)max_blocks * QC_ATTN_BLOCK;
    double *sc = malloc((size_t)cap * sizeof *sc), acc[128];
    if (!sc) {
        fill_nan(out, t * n_heads * head_dim);
        return;
    }
    int32_t gq = n_heads / n_kv_heads;
    for (int32_t s = 0; s < n_seqs; s++) {
        int64_t ctx = clamp_ctx(ctx_lens[s], max_blocks), n_new = q_start[s + 1] - q_start[s];
        for (int64_t i = 0; i < n_new; i++) {
            int64_t pos = ctx - n_new + i, keys = pos + 1 < ctx ? pos + 1 : ctx; /* no key when pos < 0 */
            for (int32_t h = 0; h < n_heads; h++) {
                int64_t r = ((q_start[s] + i) * n_heads + h) * head_dim;
                attend_row(q + r, k_cache, v_cache, block_tables + (int64_t)s * max_blocks, keys, h / gq,
                           n_kv_heads, head_dim, scale, sc, acc, out + r);
            }
        }
    }
    free(sc);
}

/* ---- registration ---- */

static const qc_kernel_param KV_WRITE_PARAMS[] = {
    {"k", QC_PARAM_PTR},     {"v", QC_PARAM_PTR},          {"k_cache", QC_PARAM_PTR},  {"v_cache", QC_PARAM_PTR},
    {"slots", QC_PARAM_PTR}, {"t", QC_PARAM_I64},          {"n_kv_heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32},
};

static const qc_kernel_param DECODE_PARAMS[] = {
    {"q", QC_PARAM_PTR},          {"k_cache", QC_PARAM_PTR},    {"v_cache", QC_PARAM_PTR},
    {"block_tables", QC_PARAM_PTR}, {"ctx_lens", QC_PARAM_PTR}, {"out", QC_PARAM_PTR},
    {"work", QC_PARAM_PTR},       {"n_seqs", QC_PARAM_I32},     {"n_heads", QC_PARAM_I32},
    {"n_kv_heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32},   {"max_blocks", QC_PARAM_I32},
    {"scale", QC_PARAM_F32},
};

static const qc_kernel_param REDUCE_PARAMS[] = {
    {"ctx_lens", QC_PARAM_PTR},   {"out", QC_PARAM_PTR},      {"work", QC_PARAM_PTR},
    {"n_seqs", QC_PARAM_I32},     {"n_heads", QC_PARAM_I32},  {"n_kv_heads", QC_PARAM_I32},
    {"head_dim", QC_PARAM_I32},   {"max_blocks", QC_PARAM_I32},
};
static const qc_kernel_param REDUCE_BF16_PARAMS[] = {
    {"ctx_lens", QC_PARAM_PTR},   {"out", QC_PARAM_PTR},      {"work", QC_PARAM_PTR},
    {"n_seqs", QC_PARAM_I32},     {"n_heads", QC_PARAM_I32},  {"n_kv_heads", QC_PARAM_I32},
    {"head_dim", QC_PARAM_I32},   {"max_blocks", QC_PARAM_I32}, {"out.bf16", QC_PARAM_PTR},
};

static const qc_kernel_param PREFILL_PARAMS[] = {
    {"q", QC_PARAM_PTR},          {"k_cache", QC_PARAM_PTR},    {"v_cache", QC_PARAM_PTR},
    {"block_tables", QC_PARAM_PTR}, {"ctx_lens", QC_PARAM_PTR}, {"q_start", QC_PARAM_PTR},
    {"out", QC_PARAM_PTR},        {"n_seqs", QC_PARAM_I32},     {"n_heads", QC_PARAM_I32},
    {"n_kv_heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32},   {"max_blocks", QC_PARAM_I32},
    {"scale", QC_PARAM_F32},
};

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

qc_status qc_attn_kernels_register(const qc_host_api *api, qc_host *host) {
    qc_kernel_desc ks[] = {
        qc_core_kernel_desc("core.kv_write", KV_WRITE_PARAMS, N_OF(KV_WRITE_PARAMS), (void (*)(void))kv_write_ref,
                    KV_WRITE_SRC, "qc_attn_kv_write", kv_write_pdims),
        qc_core_grid_dep(qc_core_kernel_desc("core.attn_decode", DECODE_PARAMS, N_OF(DECODE_PARAMS),
                                             (void (*)(void))attn_decode_ref, DECODE_SRC, "qc_attn_decode",
                                             decode_pdims)),
        qc_core_grid_dep(qc_core_kernel_desc("core.attn_decode_reduce", REDUCE_PARAMS, N_OF(REDUCE_PARAMS),
                                             (void (*)(void))attn_decode_reduce_ref, DECODE_SRC,
                                             "qc_attn_decode_reduce", reduce_pdims)),
        qc_core_kernel_desc("core.attn_prefill", PREFILL_PARAMS, N_OF(PREFILL_PARAMS), (void (*)(void))attn_prefill_ref,
                    PREFILL_SRC, "qc_attn_prefill", prefill_pdims),
        /* the reduce that also writes out's bf16 copy: the engine's, with the core's bf16 cache (no cast launch
           before a linear that takes bf16) */
        qc_core_grid_dep(qc_core_kernel_desc("core.attn_decode_reduce_bf16", REDUCE_BF16_PARAMS,
                                             N_OF(REDUCE_BF16_PARAMS), (void (*)(void))attn_decode_reduce_bf16_ref,
                                             DECODE_SRC, "qc_attn_decode_reduce_bf16", reduce_pdims)),
    };
    /* QC_ATTN_DEC_SWZ=0: the decode (and its reduce, one build) with the old warp-combine layout, 16-way bank
     * conflicts on its shared stores; the conflict-free default measured 17.2 -> 13.8 us at B 1 x 1K (H200, s7) */
    static const char *const swz_opts[] = {"-DQC_ATTN_SWZ=0", NULL};
    const char *swz = getenv("QC_ATTN_DEC_SWZ");
    for (size_t i = 0; swz && strcmp(swz, "0") == 0 && i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i].cuda_source == DECODE_SRC) ks[i].nvrtc_options = swz_opts;
    /* QC_ATTN_PF_OPTS: extra -D options of the prefill (A/B runs on the device: -DQC_PF_NO_WG=1 for the mma.sync
     * path on sm_90a, -DQC_PF_MINB=2); the strings live in static storage for the process */
    static char pf_buf[4][QC_ENV_OPT_LEN];
    static const char *pf_opts[5];
    const int npf = qc_env_defines("core", "QC_ATTN_PF_OPTS", pf_buf, 4);
    for (size_t i = 0; npf > 0 && i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i].cuda_source == PREFILL_SRC) ks[i].nvrtc_options = qc_env_option_list(NULL, pf_buf, npf, pf_opts);
    qc_status st = QC_OK;
    for (size_t i = 0; st == QC_OK && i < sizeof ks / sizeof ks[0]; i++) st = api->register_kernel(host, &ks[i]);
    return st;
}
