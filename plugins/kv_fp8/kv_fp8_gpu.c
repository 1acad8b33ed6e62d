/* kv_fp8_gpu.c - the kv_fp8 GPU kernels (fused K/V write, split-K decode + reduce, causal prefill) with their C references. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

#include "kv_fp8_cuda_src.h"
#include "kv_fp8_internal.h"
#include "qc_bf16.h"
#include "qc_fp8_codec.h"

/*
 * The engine's contract (core/include/qcore/plugin.h, "KV-cache formats on
 * the GPU engine"): four kernels by id, the core kernels' parameters plus
 * k_scale, v_scale (device f32: [0] per tensor, [kv_heads] per head, unread
 * for E5M2) and variant.  Cache layout as the core's, one byte per element:
 * [block][kv_head][16][head_dim], slot = block * 16 + offset.
 *
 * Numerics (what the references compute, in double): q is rounded to f16
 * (nearest even, clamped to +-65504); K and V are decode(code) * scale of
 * their kv head; scores q.k * scale, softmax, out = sum p v.  The GPU kernels
 * multiply on f16 tensor cores (the codes convert to f16 exactly; the scales
 * are applied to the f32 scores and outputs) with P rounded to f16 for the
 * second product, so each output differs from the reference by at most
 * about 2^-11 * sum_j p_j |v_j| plus f32 summation error; the tests allow
 * 2^-8 * sum_j p_j |v_j| + 1e-6 as for bf16.  The write stores code(x / s)
 * (E4M3, IEEE division) or code(x) (E5M2) by the C codec's rules; its
 * inputs (rotary) may differ from the reference's in the last bits, so a
 * code may differ by one step at a rounding boundary.
 */

#define KVB 16
#define DEC_CTA_COST 64
#define DEC_MAX_PARTS 64
#define DEC_MIN_PART 64
#define PF_ROWS 64
#define DEC_COUNTERS 65536 /* decode.cu's QC_DEC_COUNTERS */
#define GRID_CAP (1u << 20)

/* ---- geometry (the device code repeats these formulas) ---- */

/* The decode build the plugin registers (decode.cu's QC_DEC_V2 and
 * QC_DEC_STAGES), chosen once at registration from the environment:
 * QC_KV_DEC_VARIANT = new (default: v2, the cp.async ring, 2 CTAs per SM) or
 * old (the first kernel, 3 CTAs per SM); QC_KV_DEC_STAGES = 1..4 blocks in
 * flight per warp for new (default 4).  Process-wide: the last registration's
 * choice is what every loaded runtime's launch_dims and references use. */
static struct {
    int v2, stages;
    char stage_opt[32];
    const char *opts[3];
} g_dec = {1, 4, "", {NULL}};

/* CTA slots and waves of the partition formula: the product is the core's
 * workspace bound (qc_attn_decode_workspace_bytes: 4 waves of 396) */
#define DEC_SLOTS_OLD 396
#define DEC_SLOTS_V2 264
#define DEC_PART_BOUND 1584
#define DEC_ONE_LAYER 132 /* one v2 CTA per SM (132 SMs) */

/* dynamic shared memory of the v2 decode (decode.cu's qc_dec_v2_smem): a
 * ring of stages + 1 blocks (32 D bytes) per warp, or the warps' combine (rows of D + 4 floats) */
static uint32_t dec_v2_smem(int stages, int64_t hd) {
    int64_t ring = 4 * (stages + 1) * 32 * hd, comb = 4 * 16 * (hd + 4) * 4 + 2 * 4 * 16 * 4;
    return (uint32_t)(ring > comb ? ring : comb);
}

/* Partitions per sequence: the count p minimizing waves(p) * (tokens per CTA
 * + a CTA's fixed cost), waves of `slots` CTAs, at most DEC_PART_BOUND / slots
 * waves and one partition per DEC_MIN_PART tokens of the block table.  The
 * decode takes it from its grid; the reduce kernel evaluates the same
 * formula (qc_dec_parts_warp). */
static int decode_parts_at(int n_seqs, int n_kv_heads, int max_blocks, int64_t slots) {
    int64_t pairs = (int64_t)n_seqs * n_kv_heads, est = (int64_t)max_blocks * KVB;
    if (pairs < 1) pairs = 1;
    if (est < 1) est = 1;
    int64_t cap = (est + DEC_MIN_PART - 1) / DEC_MIN_PART;
    if (cap > DEC_MAX_PARTS) cap = DEC_MAX_PARTS;
    /* v2 with few (sequence, kv head) pairs: one CTA per SM, as many partitions as fill one layer of
     * DEC_ONE_LAYER SMs (H200, B = 1: 16 partitions, 13.4 us at 1K and 35.1 us at 32K, where the cost
     * formula's 17 and 33 put a second CTA on some SMs: 17.0 and 41.8 us; docs/decisions.md) */
    if (slots == DEC_SLOTS_V2 && pairs * 2 <= DEC_ONE_LAYER)
        return (int)(DEC_ONE_LAYER / pairs < cap ? DEC_ONE_LAYER / pairs : cap);
    int64_t best = 1, best_cost = (pairs + slots - 1) / slots * (est + DEC_CTA_COST);
    for (int64_t p = 2; p <= cap && pairs * p <= (DEC_PART_BOUND / slots) * slots; p++) {
        int64_t cost = (pairs * p + slots - 1) / slots * ((est + p - 1) / p + DEC_CTA_COST);
        if (cost < best_cost) best = p, best_cost = cost;
    }
    return (int)best;
}
int kv_fp8_decode_parts(int n_seqs, int n_kv_heads, int max_blocks) {
    return decode_parts_at(n_seqs, n_kv_heads, max_blocks, g_dec.v2 ? DEC_SLOTS_V2 : DEC_SLOTS_OLD);
}

static int64_t part_len(int64_t ctx, int nparts) {
    int64_t per = (ctx + nparts - 1) / nparts;
    per = (per + KVB - 1) / KVB * KVB;
    return per < DEC_MIN_PART ? DEC_MIN_PART : per;
}

static int clamp_int(int64_t v) { return v < 0 ? 0 : v > 2147483647LL ? 2147483647 : (int)v; }

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

/* Problem fields, as the core's attention kernels read them (qc_attn_problem):
 * m = tokens (qkv_rope_kv, prefill) or sequences (decode, reduce); n = q
 * heads (qkv_rope_kv: q heads + kv heads); k = head_dim; group_size = kv
 * heads; scheme = max_blocks (decode, reduce) or sequences (prefill). */
static void qkv_dims(const qc_problem *p, qc_launch_dims *d) {
    uint32_t half = p->k >= 2 ? (uint32_t)(p->k / 2) : 0;
    dims3(d, p->m, p->n, 1, (half + 31) / 32 * 32, 0);
}
static void decode_dims(const qc_problem *p, qc_launch_dims *d) {
    int ns = clamp_int(p->m), nh = clamp_int(p->n), nkv = clamp_int(p->group_size), mb = clamp_int(p->scheme);
    int gq = nkv > 0 ? nh / nkv : 0;
    dims3(d, kv_fp8_decode_parts(ns, nkv, mb), gq > 0 ? (int64_t)nkv * ((gq + 15) / 16) : 0, ns, 128,
          g_dec.v2 ? dec_v2_smem(g_dec.stages, p->k == 64 ? 64 : 128) : 0);
}
/* The decode combines the partitions itself (decode.cu, QC_DEC_FUSE) when its
 * groups fit the device's counters: the reduce then gets an empty grid and is
 * not launched (one launch per decode step instead of two). */
static void reduce_dims(const qc_problem *p, qc_launch_dims *d) {
    int ns = clamp_int(p->m), nh = clamp_int(p->n), nkv = clamp_int(p->group_size);
    int gq = nkv > 0 ? nh / nkv : 0;
    int64_t groups = (int64_t)ns * nkv * ((gq + 15) / 16);
    dims3(d, groups > 0 && groups <= DEC_COUNTERS ? 0 : p->n, p->m, 1, 128, 0);
}
static void prefill_dims(const qc_problem *p, qc_launch_dims *d) {
    int nh = clamp_int(p->n), nkv = clamp_int(p->group_size), ns = clamp_int(p->scheme);
    int gq = nkv > 0 ? nh / nkv : 0;
    int64_t x = p->m > 0 && gq > 0 ? (p->m * gq + PF_ROWS - 1) / PF_ROWS + ns : 0;
    uint32_t hd = p->k == 64 ? 64 : 128;
    dims3(d, x, nkv, 1, 128, 384u * hd); /* f16 K and V tiles + FP8 staging */
}

/* Shapes the kernels take (the engine asks before it launches; `inspect` prints it). */
static int attn_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k != 64 && p->k != 128) {
        snprintf(why->code, sizeof why->code, "shape");
        snprintf(why->text, sizeof why->text, "kv_fp8 attention: head_dim %lld is not supported (64 or 128)",
                 (long long)p->k);
        return 0;
    }
    if (p->group_size == 0 || p->n < (int64_t)p->group_size || p->n % p->group_size) {
        snprintf(why->code, sizeof why->code, "shape");
        snprintf(why->text, sizeof why->text, "kv_fp8 attention: %lld q heads are not a positive multiple of %u kv heads",
                 (long long)p->n, p->group_size);
        return 0;
    }
    return 1;
}
/* qkv_rope_kv: n = q heads + kv heads; the attention shape is checked on the (n - kv, kv) split */
static int qkv_eligible(const qc_problem *p, qc_reason *why) {
    qc_problem a = *p;
    a.n = p->n - (int64_t)p->group_size;
    return attn_eligible(&a, why);
}

/* ---- C references ---- */

static float head_scale(const float *scales, uint32_t variant, int64_t h) {
    return variant == KV_FP8_E4M3_TENSOR ? scales[0] : variant == KV_FP8_E4M3_HEAD ? scales[h] : 1.f;
}
static uint8_t code_of(float x, float s, uint32_t variant) {
    if (variant == KV_FP8_E5M2) return qc_fp8_e5m2_encode(x);
    if (variant >= KV_FP8_VARIANT_COUNT_) return (uint8_t)QC_FP8_NAN_CODE;
    return qc_fp8_e4m3_encode(x / s);
}
static double round_q(float x) {
    float c = x > 65504.f ? 65504.f : x < -65504.f ? -65504.f : x;
    return qc_f16_to_f32(qc_f32_to_f16(c));
}

static void qkv_rope_kv_ref(const float *qkv, int64_t ld, const float *bias, float *q_out, uint8_t *k_cache,
                            uint8_t *v_cache, const int32_t *slots, const int32_t *pos, const float *inv_freq,
                            const float *q_norm, const float *k_norm, int64_t m, int32_t heads, int32_t kv_heads,
                            int32_t d, int32_t halves, float eps, const float *k_scale, const float *v_scale,
                            uint32_t variant) {
    int half = d / 2;
    if (d <= 0 || d > 1024) return;
    float tmp[1024], out[1024];
    for (int64_t r = 0; r < m; r++)
        for (int j = 0; j < heads + kv_heads; j++) {
            int is_q = j < heads, kvh = j - heads;
            int64_t col = is_q ? (int64_t)j * d : (int64_t)heads * d + (int64_t)kvh * d;
            const float *nw = is_q ? q_norm : k_norm;
            double ss = 0;
            for (int i = 0; i < d; i++) {
                tmp[i] = qkv[r * ld + col + i] + (bias ? bias[col + i] : 0.f);
                ss += (double)tmp[i] * tmp[i];
            }
            if (nw) {
                float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
                for (int i = 0; i < d; i++) tmp[i] = tmp[i] * inv * nw[i];
            }
            for (int i = 0; i < half; i++) {
                double a = (double)pos[r] * (double)inv_freq[i];
                float c = (float)cos(a), s = (float)sin(a);
                int i0 = halves ? i : 2 * i, i1 = halves ? i + half : 2 * i + 1;
                out[i0] = tmp[i0] * c - tmp[i1] * s;
                out[i1] = tmp[i0] * s + tmp[i1] * c;
            }
            if (is_q) {
                memcpy(q_out + (r * heads + j) * d, out, (size_t)d * sizeof(float));
                continue;
            }
            if (slots[r] < 0) continue;
            int64_t slot = slots[r];
            int64_t base = ((slot / KVB * kv_heads + kvh) * KVB + slot % KVB) * d;
            int64_t vcol = (int64_t)(heads + kv_heads) * d + (int64_t)kvh * d;
            float ks = variant <= KV_FP8_E4M3_HEAD ? head_scale(k_scale, variant, kvh) : 1.f;
            float vs = variant <= KV_FP8_E4M3_HEAD ? head_scale(v_scale, variant, kvh) : 1.f;
            for (int i = 0; i < d; i++) {
                k_cache[base + i] = code_of(out[i], ks, variant);
                v_cache[base + i] = code_of(qkv[r * ld + vcol + i] + (bias ? bias[vcol + i] : 0.f), vs, variant);
            }
        }
}

static int shape_ok(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
    return (head_dim == 64 || head_dim == 128) && n_kv_heads > 0 && n_heads >= n_kv_heads && n_heads % n_kv_heads == 0;
}
static void fill_nan(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
}
static int64_t clamp_ctx(int32_t ctx, int32_t max_blocks) {
    int64_t cap = (int64_t)max_blocks * KVB;
    return ctx < 0 ? 0 : ctx > cap ? cap : ctx;
}

/* One q row over keys 0 .. n_keys - 1 of table row btr, kv head kvh. */
typedef struct attn_ctx {
    const uint8_t *kc, *vc;
    int32_t n_kv_heads, head_dim;
    float klut[256], vlut[256]; /* decode(code) * scale of the current head */
    double *sc;
} attn_ctx;

static void luts(attn_ctx *a, const float *k_scale, const float *v_scale, uint32_t variant, int32_t kvh) {
    float lut[256];
    if (variant == KV_FP8_E5M2)
        qc_fp8_e5m2_table(lut);
    else
        qc_fp8_e4m3_table(lut);
    float ks = variant == KV_FP8_E5M2 ? 1.f : head_scale(k_scale, variant, kvh);
    float vs = variant == KV_FP8_E5M2 ? 1.f : head_scale(v_scale, variant, kvh);
    for (int c = 0; c < 256; c++) a->klut[c] = lut[c] * ks, a->vlut[c] = lut[c] * vs;
}

static void attend_row(const attn_ctx *a, const float *q, const int32_t *btr, int64_t n_keys, int32_t kvh, float scale,
                       float *out) {
    int32_t hd = a->head_dim;
    if (n_keys <= 0) {
        for (int32_t d = 0; d < hd; d++) out[d] = 0.f;
        return;
    }
    double qd[128], acc[128], mx = -INFINITY, l = 0;
    for (int32_t d = 0; d < hd; d++) qd[d] = round_q(q[d]);
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = (((int64_t)btr[j / KVB] * a->n_kv_heads + kvh) * KVB + j % KVB) * hd;
        double s = 0;
        for (int32_t d = 0; d < hd; d++) s += qd[d] * a->klut[a->kc[row + d]];
        a->sc[j] = s * scale;
        if (a->sc[j] > mx) mx = a->sc[j];
    }
    for (int32_t d = 0; d < hd; d++) acc[d] = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        int64_t row = (((int64_t)btr[j / KVB] * a->n_kv_heads + kvh) * KVB + j % KVB) * hd;
        double p = exp(a->sc[j] - mx);
        l += p;
        for (int32_t d = 0; d < hd; d++) acc[d] += p * a->vlut[a->vc[row + d]];
    }
    for (int32_t d = 0; d < hd; d++) out[d] = (float)(acc[d] / l);
}

static void attn_decode_ref(const float *q, const uint8_t *k_cache, const uint8_t *v_cache,
                            const int32_t *block_tables, const int32_t *ctx_lens, float *out, float *work,
                            int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks,
                            float scale, const float *k_scale, const float *v_scale, uint32_t variant) {
    (void)work;
    if (n_seqs <= 0 || n_heads <= 0) return;
    attn_ctx *a = malloc(sizeof *a);
    double *sc = max_blocks > 0 ? malloc((size_t)max_blocks * KVB * sizeof(double)) : NULL;
    if (!shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || variant >= KV_FP8_VARIANT_COUNT_ || !a ||
        !sc) {
        fill_nan(out, (int64_t)n_seqs * n_heads * (head_dim > 0 ? head_dim : 0));
        free(a), free(sc);
        return;
    }
    *a = (attn_ctx){.kc = k_cache, .vc = v_cache, .n_kv_heads = n_kv_heads, .head_dim = head_dim, .sc = sc};
    int32_t gq = n_heads / n_kv_heads;
    for (int32_t kvh = 0; kvh < n_kv_heads; kvh++) {
        luts(a, k_scale, v_scale, variant, kvh);
        for (int32_t s = 0; s < n_seqs; s++)
            for (int32_t h = kvh * gq; h < (kvh + 1) * gq; h++) {
                int64_t r = ((int64_t)s * n_heads + h) * head_dim;
                attend_row(a, q + r, block_tables + (int64_t)s * max_blocks, clamp_ctx(ctx_lens[s], max_blocks), kvh,
                           scale, out + r);
            }
    }
    free(a), free(sc);
}

/* The combine the reduce kernel does, in double, from partials the GPU decode left in work. */
static void attn_decode_reduce_ref(const int32_t *ctx_lens, float *out, const float *work, int32_t n_seqs,
                                   int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks) {
    if (n_seqs <= 0 || n_heads <= 0 || !shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0) return;
    int nparts = kv_fp8_decode_parts(n_seqs, n_kv_heads, max_blocks);
    const float *ml = work + (int64_t)n_seqs * n_heads * nparts * head_dim;
    for (int32_t s = 0; s < n_seqs; s++) {
        int64_t ctx = clamp_ctx(ctx_lens[s], max_blocks), plen = part_len(ctx, nparts);
        int64_t nused = (ctx + plen - 1) / plen;
        if (nused <= 1) continue;
        for (int32_t h = 0; h < n_heads; h++) {
            int64_t base = ((int64_t)s * n_heads + h) * nparts;
            double mm = -INFINITY, l = 0;
            for (int64_t p = 0; p < nused; p++)
                if (ml[2 * (base + p)] > mm) mm = ml[2 * (base + p)];
            for (int64_t p = 0; p < nused; p++) l += exp2(ml[2 * (base + p)] - mm) * ml[2 * (base + p) + 1];
            for (int32_t d = 0; d < head_dim; d++) {
                double acc = 0;
                for (int64_t p = 0; p < nused; p++) acc += exp2(ml[2 * (base + p)] - mm) * work[(base + p) * head_dim + d];
                out[((int64_t)s * n_heads + h) * head_dim + d] = (float)(acc / l);
            }
        }
    }
}

static void attn_prefill_ref(const float *q, const uint8_t *k_cache, const uint8_t *v_cache,
                             const int32_t *block_tables, const int32_t *ctx_lens, const int32_t *q_start, float *out,
                             int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t max_blocks,
                             float scale, const float *k_scale, const float *v_scale, uint32_t variant) {
    if (n_seqs <= 0 || n_heads <= 0) return;
    int64_t t = q_start[n_seqs];
    attn_ctx *a = malloc(sizeof *a);
    double *sc = max_blocks > 0 ? malloc((size_t)max_blocks * KVB * sizeof(double)) : NULL;
    if (!shape_ok(n_heads, n_kv_heads, head_dim) || max_blocks <= 0 || variant >= KV_FP8_VARIANT_COUNT_ || !a ||
        !sc) {
        fill_nan(out, t * n_heads * (head_dim > 0 ? head_dim : 0));
        free(a), free(sc);
        return;
    }
    *a = (attn_ctx){.kc = k_cache, .vc = v_cache, .n_kv_heads = n_kv_heads, .head_dim = head_dim, .sc = sc};
    int32_t gq = n_heads / n_kv_heads;
    for (int32_t kvh = 0; kvh < n_kv_heads; kvh++) {
        luts(a, k_scale, v_scale, variant, kvh);
        for (int32_t s = 0; s < n_seqs; s++) {
            int64_t ctx = clamp_ctx(ctx_lens[s], max_blocks), n_new = q_start[s + 1] - q_start[s];
            for (int64_t i = 0; i < n_new; i++) {
                int64_t p = ctx - n_new + i, keys = p + 1 < ctx ? p + 1 : ctx; /* no key when p < 0 */
                for (int32_t h = kvh * gq; h < (kvh + 1) * gq; h++) {
                    int64_t r = ((q_start[s] + i) * n_heads + h) * head_dim;
                    attend_row(a, q + r, block_tables + (int64_t)s * max_blocks, keys, kvh, scale, out + r);
                }
            }
        }
    }
    free(a), free(sc);
}

/* ---- registration ---- */

static const qc_kernel_param QKV_PARAMS[] = {
    {"qkv", QC_PARAM_PTR},      {"ld", QC_PARAM_I64},       {"bias", QC_PARAM_PTR},     {"q", QC_PARAM_PTR},
    {"k_cache", QC_PARAM_PTR},  {"v_cache", QC_PARAM_PTR},  {"slots", QC_PARAM_PTR},    {"pos", QC_PARAM_PTR},
    {"inv_freq", QC_PARAM_PTR}, {"q_norm", QC_PARAM_PTR},   {"k_norm", QC_PARAM_PTR},   {"m", QC_PARAM_I64},
    {"heads", QC_PARAM_I32},    {"kv_heads", QC_PARAM_I32}, {"head_dim", QC_PARAM_I32}, {"halves", QC_PARAM_I32},
    {"eps", QC_PARAM_F32},      {"k_scale", QC_PARAM_PTR},  {"v_scale", QC_PARAM_PTR},  {"variant", QC_PARAM_U32},
};
static const qc_kernel_param DECODE_PARAMS[] = {
    {"q", QC_PARAM_PTR},            {"k_cache", QC_PARAM_PTR},  {"v_cache", QC_PARAM_PTR},
    {"block_tables", QC_PARAM_PTR}, {"ctx_lens", QC_PARAM_PTR}, {"out", QC_PARAM_PTR},
    {"work", QC_PARAM_PTR},         {"n_seqs", QC_PARAM_I32},   {"n_heads", QC_PARAM_I32},
    {"n_kv_heads", QC_PARAM_I32},   {"head_dim", QC_PARAM_I32}, {"max_blocks", QC_PARAM_I32},
    {"scale", QC_PARAM_F32},        {"k_scale", QC_PARAM_PTR},  {"v_scale", QC_PARAM_PTR},
    {"variant", QC_PARAM_U32},
};
static const qc_kernel_param REDUCE_PARAMS[] = {
    {"ctx_lens", QC_PARAM_PTR}, {"out", QC_PARAM_PTR},     {"work", QC_PARAM_PTR},
    {"n_seqs", QC_PARAM_I32},   {"n_heads", QC_PARAM_I32}, {"n_kv_heads", QC_PARAM_I32},
    {"head_dim", QC_PARAM_I32}, {"max_blocks", QC_PARAM_I32},
};
static const qc_kernel_param PREFILL_PARAMS[] = {
    {"q", QC_PARAM_PTR},            {"k_cache", QC_PARAM_PTR},  {"v_cache", QC_PARAM_PTR},
    {"block_tables", QC_PARAM_PTR}, {"ctx_lens", QC_PARAM_PTR}, {"q_start", QC_PARAM_PTR},
    {"out", QC_PARAM_PTR},          {"n_seqs", QC_PARAM_I32},   {"n_heads", QC_PARAM_I32},
    {"n_kv_heads", QC_PARAM_I32},   {"head_dim", QC_PARAM_I32}, {"max_blocks", QC_PARAM_I32},
    {"scale", QC_PARAM_F32},        {"k_scale", QC_PARAM_PTR},  {"v_scale", QC_PARAM_PTR},
    {"variant", QC_PARAM_U32},
};

#define N_OF(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

static qc_kernel_desc gpu_kernel(const char *id, const qc_kernel_param *params, uint32_t n, void (*ref)(void),
                                 const char *src, const char *entry, void (*dims)(const qc_problem *, qc_launch_dims *),
                                 int (*eligible)(const qc_problem *, qc_reason *)) {
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = id,
        .format = "kv_fp8",
        .phases = QC_PHASE_ANY,
        .m_min = 0,
        .arch = {80, QC_SM_ANY}, /* E4M3 converts in software below sm_89 */
        .n_params = n,
        .params = params,
        .reference = ref,
        .cuda_source = src,
        .cuda_entry = entry,
        .launch_dims = dims,
        .eligible = eligible,
    };
    return k;
}

/* g_dec from QC_KV_DEC_VARIANT and QC_KV_DEC_STAGES; a value it does not know is an error naming it */
static qc_status dec_choose(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    const char *v = getenv("QC_KV_DEC_VARIANT"), *st = getenv("QC_KV_DEC_STAGES");
    if (v && *v && strcmp(v, "new") != 0 && strcmp(v, "old") != 0) {
        snprintf(err, errlen, "kv_fp8: QC_KV_DEC_VARIANT='%s' is not a decode variant (new or old)", v);
        api->log(host, QC_LOG_ERROR, "%s", err);
        return QC_ERR_INVALID;
    }
    int stages = 4;
    if (st && *st) {
        char *end = NULL;
        long n = strtol(st, &end, 10);
        if (*end || n < 1 || n > 4) {
            snprintf(err, errlen, "kv_fp8: QC_KV_DEC_STAGES='%s' is not a ring depth (1 to 4 blocks per warp)", st);
            api->log(host, QC_LOG_ERROR, "%s", err);
            return QC_ERR_INVALID;
        }
        stages = (int)n;
    }
    g_dec.v2 = !(v && strcmp(v, "old") == 0);
    g_dec.stages = stages;
    snprintf(g_dec.stage_opt, sizeof g_dec.stage_opt, "-DQC_DEC_STAGES=%d", stages);
    g_dec.opts[0] = g_dec.v2 ? "-DQC_DEC_V2=1" : "-DQC_DEC_V2=0";
    g_dec.opts[1] = g_dec.v2 ? g_dec.stage_opt : NULL;
    g_dec.opts[2] = NULL;
    return QC_OK;
}

qc_status kv_fp8_gpu_register(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    qc_status cst = dec_choose(api, host, err, errlen);
    if (cst != QC_OK) return cst;
    qc_kernel_desc ks[] = {
        gpu_kernel("kv_fp8.qkv_rope_kv", QKV_PARAMS, N_OF(QKV_PARAMS), (void (*)(void))qkv_rope_kv_ref, KV_FP8_SRC_WRITE,
                   "qc_kv_fp8_qkv_rope_kv", qkv_dims, qkv_eligible),
        gpu_kernel("kv_fp8.attn_decode", DECODE_PARAMS, N_OF(DECODE_PARAMS), (void (*)(void))attn_decode_ref,
                   KV_FP8_SRC_DECODE, "qc_kv_fp8_attn_decode", decode_dims, attn_eligible),
        gpu_kernel("kv_fp8.attn_decode_reduce", REDUCE_PARAMS, N_OF(REDUCE_PARAMS),
                   (void (*)(void))attn_decode_reduce_ref, KV_FP8_SRC_DECODE, "qc_kv_fp8_attn_decode_reduce",
                   reduce_dims, attn_eligible),
        gpu_kernel("kv_fp8.attn_prefill", PREFILL_PARAMS, N_OF(PREFILL_PARAMS), (void (*)(void))attn_prefill_ref,
                   KV_FP8_SRC_PREFILL, "qc_kv_fp8_attn_prefill", prefill_dims, attn_eligible),
    };
    ks[1].nvrtc_options = ks[2].nvrtc_options = g_dec.opts; /* the decode and its reduce: one build */
    qc_status st = QC_OK;
    for (size_t i = 0; st == QC_OK && i < sizeof ks / sizeof ks[0]; i++) st = api->register_kernel(host, &ks[i]);
    return st;
}
