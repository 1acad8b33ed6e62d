/* fp8_kernels.c - the fp8 plugin's GPU kernels (act quantization, W8A8 wgmma / mma.sync / decode GEMV, W8A16) and their C references. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_cuda_src.h" /* generated from cuda/ at build time: FP8_SRC_QUANT, _WGMMA, _GEMV, _GEMV_MMA, _GEMV_WG, _MMA */
#include "fp8_internal.h"
#include "qc_bf16.h"
#include "qc_env_opts.h"
#include "qc_split_k.h"

/*
 * The W8A8 GPU contract (docs/formats/fp8.md section 8):
 *   1. an activation-quantization kernel turns x.bf16 [m,k] into "xq" (E4M3 codes [m,k], one byte each,
 *      row stride k) and "xs" (f32 scales: [m] per token, or [m, ceil(k/128)] per 1x128 group);
 *   2. a GEMM kernel takes "xq", "xs", the weight's "w.qweight" and "w.scales" and writes y f32 [m,n]; the
 *      wgmma GEMMs instead write bf16 bits to "y.bf16" [m,n] when the caller gives one (plugin.h).
 * Which quantization kernel goes with which scheme: channel (and 0) -> fp8.quant_act_token, block ->
 * fp8.quant_act_group, tensor_static and channel_static -> fp8.quant_act_static; tensor has none yet.
 * The C references of the two steps compose to the format's reference linears bit for bit (for x that
 * is bf16-representable): the quantization references follow quantize_act in fp8.c, the GEMM
 * references steps 2-4.  GPU GEMMs differ only in summation order and the tensor cores' accumulation.
 */

#define WG_SMS 132
#define WG_BM 128
#define WG_BK 128
#define WG_STG_PAD 16 /* bytes after each staged bf16 output row (keep in step with cuda/wgmma.cu) */
#define QA_THREADS 256
#define GV_ROWS 16
#define MM_T 64
#define GM_SMS 132
#define GM_WARPS_PER_SM 32
#define GM_MAXKS 16 /* keep in step with cuda/gemv_mma.cu */

static const char *const g_scheme_names[FP8_SCHEME_COUNT_] = {
    "channel", "tensor", "channel", "block", "tensor_static", "channel_static",
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void reason(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static float bf16_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- C references: activation quantization ------------------------------ */

/* Row i of x (bf16 bits) quantized with scale s into q. */
static void quant_row(const uint16_t *x, uint8_t *q, int64_t t0, int64_t t1, float s) {
    for (int64_t t = t0; t < t1; t++) q[t] = qc_fp8_e4m3_encode(bf16_f32(x[t]) / s);
}
static float amax_of(const uint16_t *x, int64_t t0, int64_t t1) {
    float a = 0.f;
    for (int64_t t = t0; t < t1; t++) {
        float v = fabsf(bf16_f32(x[t]));
        if (v > a) a = v; /* NaN never wins */
    }
    return a;
}

/* "fp8.quant_act_token": xs[i] = amax(x[i,:]) / 448, xq = E4M3(x / xs[i]) */
static void quant_token_ref(const uint16_t *x, uint8_t *xq, float *xs, int64_t m, int64_t k) {
    for (int64_t i = 0; i < m; i++) {
        xs[i] = fp8_scale_of(amax_of(x + i * k, 0, k));
        quant_row(x + i * k, xq + i * k, 0, k, xs[i]);
    }
}
/* "fp8.quant_act_static": xs[i] = act_scale[0] */
static void quant_static_ref(const uint16_t *x, const float *act_scale, uint8_t *xq, float *xs, int64_t m,
                             int64_t k) {
    for (int64_t i = 0; i < m; i++) {
        xs[i] = act_scale[0];
        quant_row(x + i * k, xq + i * k, 0, k, xs[i]);
    }
}
/* "fp8.quant_act_group": xs[i, g] = amax(x[i, 128g .. 128g+127]) / 448, xs [m, ceil(k/128)] */
static void quant_group_ref(const uint16_t *x, uint8_t *xq, float *xs, int64_t m, int64_t k) {
    const int64_t ng = cdiv(k, FP8_BLOCK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t g = 0; g < ng; g++) {
            int64_t t0 = g * FP8_BLOCK, t1 = t0 + FP8_BLOCK < k ? t0 + FP8_BLOCK : k;
            float s = fp8_scale_of(amax_of(x + i * k, t0, t1));
            xs[i * ng + g] = s;
            quant_row(x + i * k, xq + i * k, t0, t1, s);
        }
}

/* ---- C references: GEMMs on quantized activations ------------------------ */

enum { MODE_CHANNEL = 0, MODE_TENSOR = 1, MODE_BLOCK = 2 };

/* y[i,j] from codes: f32 sums of exact products in increasing t per K group (all of K, or 128), then
 * y = sum * (a_s * w_s) or, per group, acc = fmaf(sum_g, a_s * w_s, acc): fp8.c's steps 2-4.  A
 * W8A16 call (x16 != NULL) multiplies bf16 activations instead, with a_s = 1 and no product of
 * scales: y = sum * w_s, or acc = fmaf(sum_g, w_s, acc). */
static void gemm_ref(int mode, const uint8_t *xq, const float *xs, const uint16_t *x16, const uint8_t *w,
                     const float *ws, float *y, uint16_t *yb, int64_t m, int64_t n, int64_t k) {
    if (m <= 0 || n <= 0) return;
    const int64_t G = mode == MODE_BLOCK ? FP8_BLOCK : (k > 0 ? k : 1), ng = cdiv(k, G), kb = cdiv(k, FP8_BLOCK);
    float lut[256];
    qc_fp8_e4m3_table(lut);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.f;
            for (int64_t g = 0; g < ng; g++) {
                float part = 0.f;
                int64_t t1 = (g + 1) * G < k ? (g + 1) * G : k;
                for (int64_t t = g * G; t < t1; t++) {
                    float a = x16 ? bf16_f32(x16[i * k + t]) : lut[xq[i * k + t]];
                    part += a * lut[w[j * k + t]];
                }
                if (mode == MODE_BLOCK) {
                    float w_s = ws[(j / FP8_BLOCK) * kb + g];
                    acc = fmaf(part, x16 ? w_s : xs[i * kb + g] * w_s, acc);
                } else {
                    float w_s = mode == MODE_TENSOR ? ws[0] : ws[j];
                    acc = x16 ? part * w_s : part * (xs[i] * w_s);
                }
            }
            if (yb) yb[i * n + j] = qc_f32_to_bf16(acc); /* a bf16 output: y left alone */
            else y[i * n + j] = acc;
        }
}

#define GEMM_REFS(name, mode)                                                                                     \
    static void name##_ref(const uint8_t *xq, const float *xs, const uint8_t *w, const float *ws, float *y,       \
                           int64_t m, int64_t n, int64_t k) {                                                      \
        gemm_ref(mode, xq, xs, NULL, w, ws, y, NULL, m, n, k);                                                     \
    }                                                                                                              \
    static void name##_w8a16_ref(const uint16_t *x, const uint8_t *w, const float *ws, float *y, int64_t m,       \
                                 int64_t n, int64_t k) {                                                           \
        gemm_ref(mode, NULL, NULL, x, w, ws, y, NULL, m, n, k);                                                    \
    }                                                                                                              \
    /* the wgmma GEMMs' signature: the same, then their workspace (left alone) and the optional bf16 output */     \
    static void name##_wg_ref(const uint8_t *xq, const float *xs, const uint8_t *w, const float *ws, float *y,    \
                              int64_t m, int64_t n, int64_t k, void *work, uint16_t *yb) {                         \
        (void)work;                                                                                                \
        gemm_ref(mode, xq, xs, NULL, w, ws, y, yb, m, n, k);                                                       \
    }
GEMM_REFS(channel, MODE_CHANNEL)
GEMM_REFS(tensor, MODE_TENSOR)
GEMM_REFS(block, MODE_BLOCK)

/* ---- launch geometry ----------------------------------------------------- */

static void dims_1d(qc_launch_dims *d, int64_t blocks, uint32_t threads, uint32_t smem) {
    memset(d, 0, sizeof *d);
    d->grid[0] = (uint32_t)(blocks < 0 ? 0 : blocks > 65535 * 32 ? 65535 * 32 : blocks);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = threads;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = smem;
}

/* one block per row (a grid-stride loop past 2M rows) */
static void quant_dims(const qc_problem *p, qc_launch_dims *d) { dims_1d(d, p->m, QA_THREADS, 0); }

/* a tile width's speed weight in the plan (256, 192, 160, 128 columns; 0: never that width), for the row-scaled
 * GEMMs (channel, tensor: [0]) and the block-scaled one ([1]); QC_FP8_BN_EFF="a,b,c,d" replaces both, for the host
 * plan and, as -DFP8_EFF256/192/160/128, the device's (e.g. "0,0,0,1" forces 128-column tiles).  Measured (H200,
 * session 19 call 1, channel, each width forced): a 256-column tile runs 1.12x as many columns a second as a 192 one
 * on gate_up and ~1.0x on o.  160 is off: beside 256 it is the best width only on a few shapes, and with all four
 * widths in one kernel ptxas spills (56 bytes) on every width.  The block mode's 256 path ran 10-17% slower with the
 * 192 path in the same kernel (session 19 call 5), so the block build left 192 out; since session 20 no build has it:
 * 128-column tiles with two accumulators (FP8_DBL128: 9-12% faster than one at M = 1024, call 5) and 128-row W boxes
 * run qkv 1024 in 49.8 us against 192's 51.9, and 128 | 256 lets W come in 128-row boxes (choose_wbox). */
/* Since session 22 only 128: with 6 ring stages and the two accumulators taking stages 8 a turn (cuda/wgmma.cu's
 * FP8_DBL_TURN) its tiles ran faster than 256-column ones on all four Llama-3-8B shapes at 1024-4096 rows, channel and
 * block (call 2: qkv 1024 43.8 against 56.7 us, gate_up 2048 356.7 against 372.1, down 4096 344.4 against 351.4). */
static int g_fp8_eff[2][4] = {{0, 0, 0, 90}, {0, 0, 0, 90}};
/* Ring stages of the 128-column tiles (cuda/wgmma.cu's FP8_ST128): 6, with bf16 rows stored from the registers
 * (FP8_STG128=0); QC_FP8_ST128=N (2..5) overrides it for A/B runs, staging the rows in shared memory after the ring
 * as before session 22 (5: that default). */
static int g_fp8_st128 = 6;
/* The tile width of the wgmma kernels, as the device code computes it (keep in step with qc_wg_bn in
 * cuda/wgmma.cu): 256, 192, 160 or 128 columns, whichever fills its last wave best.  Every mode promotes
 * each 128-K stage into f32 registers, so a thread holds two register sets, BN/2 each up to 192 columns; 256
 * runs as two 128-column halves per stage (acc 64 + tot 128), with 4 stages and no bf16 staging (no room).
 * paired: fp8.gemm_*_wgmma_pair, cuda/wgmma.cu built with FP8_CLUSTER=2 (clusters of two blocks on row-tile
 * pairs that share W), whose walk rounds the row tiles up to pairs; they never take 256. */
static void fp8_wgmma_plan(int64_t m, int64_t n, int paired, int block, int *bn, int *stages, uint32_t *smem_bytes,
                           int64_t *tiles) {
    static const int bns[4] = {256, 192, 160, 128};
    const int sts[4] = {4, 4, 4, g_fp8_st128}; /* 160: 4, see FP8_ST160 */
    const int *eff = g_fp8_eff[block != 0];
    int64_t tm = m > 0 ? cdiv(m, WG_BM) : 0, best = -1;
    if (paired) tm = (tm + 1) & ~(int64_t)1;
    int pick = 3;
    for (int i = 0; i < 4; i++) {
        if (eff[i] <= 0 || (paired && bns[i] == 256)) continue;
        int64_t tn = n > 0 ? cdiv(n, bns[i]) : 0, waves = cdiv(tm * tn, WG_SMS);
        int64_t score = waves > 0 ? tm * n * eff[i] / (waves * bns[i]) : 0;
        if (score > best) {
            best = score;
            pick = i;
        }
    }
    *bn = bns[pick];
    *stages = sts[pick];
    /* the ring, then the bf16 output's staging (not at 256, nor at 128 with 6 stages): a row of BN * 2 + WG_STG_PAD
       bytes per row of the tile */
    const int staged = bns[pick] != 256 && !(bns[pick] == 128 && g_fp8_st128 == 6);
    *smem_bytes = (uint32_t)sts[pick] * (WG_BM * WG_BK + (uint32_t)bns[pick] * WG_BK) +
                  (staged ? (uint32_t)WG_BM * ((uint32_t)bns[pick] * 2 + WG_STG_PAD) : 0u) + 1024;
    *tiles = n > 0 ? tm * cdiv(n, bns[pick]) : 0;
}
/* Split-K across blocks (grid.y; the device reads gridDim.y, so the rule lives only here): when the tiles do not
 * fill the SMs (m up to a few hundred), each tile's K goes to as many blocks as fit in one pass, at most
 * FP8_SPLIT_MAX (QC_FP8_SPLIT=1..4 overrides it, for A/B runs), each at least 4 stages of 128 K.  The last split
 * of a tile to arrive adds the others' partial sums (its reads grow with the splits: hence the cap). */
#define FP8_SPLIT_MAX 4
static int g_fp8_split_max = FP8_SPLIT_MAX;
static int fp8_wgmma_splits(int64_t tiles, int64_t k) {
    return qc_split_k_ways(tiles, k > 0 ? cdiv(k, WG_BK) : 0, WG_SMS, 4, g_fp8_split_max);
}
/* 512 counter words (a tile's two warpgroups), then a slot per (tile, split, warpgroup): 128 threads x 128 sums
 * (the widest tile); tiles x splits <= WG_SMS */
#define FP8_WORK_BYTES (2048ull + (uint64_t)WG_SMS * 2 * 128 * 128 * 4)
static uint64_t wgmma_workspace(const qc_problem *p) {
    (void)p;
    return FP8_WORK_BYTES;
}
/* the most blocks of the pair builds (QC_FP8_PAIR_GRID, even, for A/B runs): a persistent grid must fit the GPU at
 * once, and clusters of two may not fill every SM */
static int g_fp8_pair_grid = WG_SMS;
static void wgmma_dims_of(const qc_problem *p, int paired, int block, qc_launch_dims *d) {
    int bn, st;
    uint32_t smem;
    int64_t tiles;
    fp8_wgmma_plan(p->m, p->n, paired, block, &bn, &st, &smem, &tiles);
    const int64_t cap = paired ? g_fp8_pair_grid : WG_SMS;
    dims_1d(d, tiles < cap ? tiles : cap, 384, smem); /* paired: tiles and the cap are even, whole clusters */
    d->grid[1] = (uint32_t)fp8_wgmma_splits(tiles, p->k);
}
static void wgmma_dims(const qc_problem *p, qc_launch_dims *d) { wgmma_dims_of(p, 0, 0, d); }
static void wgmma_pair_dims(const qc_problem *p, qc_launch_dims *d) { wgmma_dims_of(p, 1, 0, d); }
static void wgmma_block_dims(const qc_problem *p, qc_launch_dims *d) { wgmma_dims_of(p, 0, 1, d); }
static void wgmma_pair_block_dims(const qc_problem *p, qc_launch_dims *d) { wgmma_dims_of(p, 1, 1, d); }

/* 16 output columns per block of 8 warps */
static void gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    dims_1d(d, p->m > 0 && p->n > 0 ? cdiv(p->n, GV_ROWS) : 0, 256, 0);
}

/* fp8.gemv_mma_*: one 16-row W tile a block, KS warps splitting K (cuda/gemv_mma.cu).  KS doubles while
 * the GPU holds the warps at once (132 SMs x 32 warps: 64 registers a thread) and each warp keeps at
 * least two 64-K chunks; QC_FP8_GEMV_KS = 1..16 overrides it (tuning on the device: the kernel reads
 * KS from blockDim).  The warps' totals meet in KS x 4 NB x 32 floats of shared memory (NB = 2 x
 * tiles of 8 rows at m > 8). */
static int fp8_gemv_mma_ks(int64_t n, int64_t k) {
    if (n <= 0 || k <= 0) return 0;
    const int64_t tiles = cdiv(n, 16), chunks = cdiv(k, 64);
    int ks = 1;
    while (ks < GM_MAXKS && tiles * ks * 2 <= GM_SMS * GM_WARPS_PER_SM && chunks >= 4 * ks) ks *= 2;
    const char *e = getenv("QC_FP8_GEMV_KS");
    if (e && atoi(e) >= 1 && atoi(e) <= GM_MAXKS) ks = atoi(e);
    return ks;
}
static void gemv_mma_dims(const qc_problem *p, qc_launch_dims *d) {
    const int ks = p->m > 0 && p->m <= GV_ROWS ? fp8_gemv_mma_ks(p->n, p->k) : 0;
    dims_1d(d, ks ? cdiv(p->n, 16) : 0, 32u * (uint32_t)ks, (uint32_t)ks * (p->m > 8 ? 2u : 1u) * 4u * 32u * 4u);
}

/* fp8.gemv_wg_*: the same tiles and K split in warpgroups (KS a multiple of 4, up to 16); shared memory:
 * 1024 (alignment of the 128-byte swizzle) + the larger of the x staging (8 KB a warpgroup) and the
 * reduction */
static void gemv_wg_dims(const qc_problem *p, qc_launch_dims *d) {
    int ks = p->m > 0 && p->m <= GV_ROWS ? fp8_gemv_mma_ks(p->n, p->k) : 0;
    if (ks > 0) ks = ks < 4 ? 4 : (ks + 3) / 4 * 4;
    const uint32_t stage = (uint32_t)(ks / 4) * 8192u, red = (uint32_t)ks * (p->m > 8 ? 2u : 1u) * 512u;
    dims_1d(d, ks ? cdiv(p->n, 16) : 0, 32u * (uint32_t)ks, 1024u + (stage > red ? stage : red));
}

/* fp8.gemv1_tma_* (cuda/gemv1_tma.cu; keep FT_* in step): FT_BLOCKS blocks of FT_RPB(n) consecutive rows (fewer
 * blocks when n is small), FT_W consumer warps and a producer warp; shared memory: x in f16 (2 k bytes), FT_NS stages of
 * FT_R rows, 2 FT_NS barriers.  Two blocks an SM of an H200 when FT_SMEM(k) <= FT_SMEM_MAX. */
#define FT_W 8
#define FT_NS 8
#define FT_R 2
#define FT_BLOCKS 264
#define FT_MIN_N 1 /* faster than the older GEMVs on qkv, o and gate_up (H200, session 16); QC_FP8T_MIN_N raises it */
#define FT_SMEM_MAX 116224
#define FT_RPB(n) ((((n) + FT_BLOCKS - 1) / FT_BLOCKS + FT_R - 1) / FT_R * FT_R)
#define FT_SMEM(k) (2 * (k) + FT_NS * FT_R * (k) + 16 * FT_NS)
static void gemv1t_dims(const qc_problem *p, qc_launch_dims *d) {
    const int ok = p->m == 1 && p->n > 0 && p->k > 0 && p->k % 512 == 0 && FT_SMEM(p->k) <= FT_SMEM_MAX;
    dims_1d(d, ok ? cdiv(p->n, FT_RPB(p->n)) : 0, 32u * (FT_W + 1), ok ? (uint32_t)FT_SMEM(p->k) : 0);
}

/* 64 x 64 tiles, 4 warps */
static void mma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    d->grid[0] = p->n > 0 ? (uint32_t)cdiv(p->n, MM_T) : 0;
    d->grid[1] = p->m > 0 ? (uint32_t)cdiv(p->m, MM_T) : 0;
    d->grid[2] = 1;
    d->block[0] = 128;
    d->block[1] = d->block[2] = 1;
}

/* ---- eligibility --------------------------------------------------------- */

static uint32_t scheme_of(const qc_problem *p) { return p->scheme == FP8_SCHEME_DEFAULT ? FP8_SCHEME_CHANNEL : p->scheme; }

/* Which schemes a W8A8 GEMM of each mode computes.  Dynamic per-tensor activation scales (scheme
 * tensor) need a grid-wide amax first; there is no GPU kernel for that yet. */
static int w8a8_scheme_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    uint32_t s = scheme_of(p);
    int ok = mode == MODE_CHANNEL ? s == FP8_SCHEME_CHANNEL || s == FP8_SCHEME_CHANNEL_STATIC
             : mode == MODE_TENSOR ? s == FP8_SCHEME_TENSOR_STATIC
                                   : s == FP8_SCHEME_BLOCK;
    if (ok) return 1;
    if (s == FP8_SCHEME_TENSOR)
        reason(why, "scheme", "%s: scheme tensor (dynamic per-tensor activation scale) has no GPU activation "
               "quantization yet (it needs a grid-wide amax); use tensor_static or channel", id);
    else
        reason(why, "scheme", "%s computes scheme %s, the weight has scheme %s (%u)", id,
               mode == MODE_CHANNEL ? "channel/channel_static" : mode == MODE_TENSOR ? "tensor_static" : "block",
               s < FP8_SCHEME_COUNT_ ? g_scheme_names[s] : "?", p->scheme);
    return 0;
}
static int w8a16_scheme_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    uint32_t s = scheme_of(p);
    int ok = mode == MODE_CHANNEL ? s == FP8_SCHEME_CHANNEL || s == FP8_SCHEME_CHANNEL_STATIC
             : mode == MODE_TENSOR ? s == FP8_SCHEME_TENSOR || s == FP8_SCHEME_TENSOR_STATIC
                                   : s == FP8_SCHEME_BLOCK;
    if (!ok)
        reason(why, "scheme", "%s computes the %s weight scales, the weight has scheme %s (%u)", id,
               mode == MODE_CHANNEL ? "per-channel" : mode == MODE_TENSOR ? "per-tensor" : "128x128 block",
               s < FP8_SCHEME_COUNT_ ? g_scheme_names[s] : "?", p->scheme);
    return ok;
}
static int n_ok(const qc_problem *p, const char *id, qc_reason *why) {
    if (p->n <= 0 || p->n % 16 || p->n > (1ll << 31) - 256) {
        reason(why, "align_n", "%s needs n a positive multiple of 16 below 2^31, layer has n = %lld", id,
               (long long)p->n);
        return 0;
    }
    if (p->k <= 0 || p->k % 16) {
        reason(why, "align_k", "%s needs k a positive multiple of 16, layer has k = %lld", id, (long long)p->k);
        return 0;
    }
    return 1;
}

#define ELIG(fn, check, mode, id)                                                                                  \
    static int fn(const qc_problem *p, qc_reason *why) { return n_ok(p, id, why) && check(mode, p, id, why); }
ELIG(elig_wg_channel, w8a8_scheme_ok, MODE_CHANNEL, "fp8.gemm_channel_wgmma")
ELIG(elig_wg_tensor, w8a8_scheme_ok, MODE_TENSOR, "fp8.gemm_tensor_wgmma")
ELIG(elig_wg_block, w8a8_scheme_ok, MODE_BLOCK, "fp8.gemm_block_wgmma")
/* fp8.gemm_*_wgmma_pair: the same, when QC_FP8_PAIR=on.  Off by default: on the H200 it ran 5-13% slower than
 * the unpaired GEMM (session 17, docs/perf.md), so it is kept for A/B runs, not picked. */
static int pair_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    const char *on = getenv("QC_FP8_PAIR");
    if (!on || strcmp(on, "on") != 0) {
        reason(why, "off", "%s is off unless QC_FP8_PAIR=on (slower than the unpaired GEMM on the H200)", id);
        return 0;
    }
    return w8a8_scheme_ok(mode, p, id, why);
}
ELIG(elig_wgp_channel, pair_ok, MODE_CHANNEL, "fp8.gemm_channel_wgmma_pair")
ELIG(elig_wgp_tensor, pair_ok, MODE_TENSOR, "fp8.gemm_tensor_wgmma_pair")
ELIG(elig_wgp_block, pair_ok, MODE_BLOCK, "fp8.gemm_block_wgmma_pair")
ELIG(elig_gv_channel, w8a8_scheme_ok, MODE_CHANNEL, "fp8.gemv_channel")
ELIG(elig_gv_tensor, w8a8_scheme_ok, MODE_TENSOR, "fp8.gemv_tensor")
ELIG(elig_gv_block, w8a8_scheme_ok, MODE_BLOCK, "fp8.gemv_block")
/* fp8.gemv_mma_*: the device counts K's 64-byte chunks in an int */
static int gm_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    if (!n_ok(p, id, why)) return 0;
    if (p->k >= (1ll << 31)) {
        reason(why, "shape", "%s needs k below 2^31, layer has k = %lld", id, (long long)p->k);
        return 0;
    }
    return w8a8_scheme_ok(mode, p, id, why);
}
static int elig_gm_channel(const qc_problem *p, qc_reason *why) { return gm_ok(MODE_CHANNEL, p, "fp8.gemv_mma_channel", why); }
static int elig_gm_tensor(const qc_problem *p, qc_reason *why) { return gm_ok(MODE_TENSOR, p, "fp8.gemv_mma_tensor", why); }
static int elig_gm_block(const qc_problem *p, qc_reason *why) { return gm_ok(MODE_BLOCK, p, "fp8.gemv_mma_block", why); }
/* fp8.gemv_wg_*: wgmma is sm_90a's own (its range says 89+ so that it ties with the GEMVs above instead of
 * outranking them before it is measured) */
static int wg_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    if (p->sm != 90) {
        reason(why, "arch", "%s uses wgmma (sm_90a only), the device is sm_%u", id, p->sm);
        return 0;
    }
    return gm_ok(mode, p, id, why);
}
static int elig_gw_channel(const qc_problem *p, qc_reason *why) { return wg_ok(MODE_CHANNEL, p, "fp8.gemv_wg_channel", why); }
static int elig_gw_tensor(const qc_problem *p, qc_reason *why) { return wg_ok(MODE_TENSOR, p, "fp8.gemv_wg_tensor", why); }
/* fp8.gemv1_tma_*: m = 1 on sm_90 (bulk copies), whole 512-byte runs, x and the ring in shared memory */
static int ft_ok(int mode, const qc_problem *p, const char *id, qc_reason *why) {
    const char *off = getenv("QC_FP8T");
    if (off && strcmp(off, "off") == 0) {
        reason(why, "off", "%s is switched off (QC_FP8T=off)", id);
        return 0;
    }
    if (!n_ok(p, id, why)) return 0;
    if (p->k % 512) {
        reason(why, "align_k", "%s reads K in 512-byte runs, layer has k = %lld (fp8.gemv_channel takes k %% 16 == 0)",
               id, (long long)p->k);
        return 0;
    }
    if (FT_SMEM(p->k) > FT_SMEM_MAX) {
        reason(why, "shared_memory", "%s keeps x and %d stages of %d rows in shared memory, %lld bytes at k = %lld; "
               "two blocks an SM allow %d", id, FT_NS, FT_R, (long long)FT_SMEM(p->k), (long long)p->k, FT_SMEM_MAX);
        return 0;
    }
    const int min_n = qc_env_int("fp8", "QC_FP8T_MIN_N", 1, INT_MAX, FT_MIN_N);
    if (p->n < min_n) {
        reason(why, "n_range", "%s: n = %lld is below QC_FP8T_MIN_N = %d", id,
               (long long)p->n, min_n);
        return 0;
    }
    return w8a8_scheme_ok(mode, p, id, why);
}
static int elig_ft_channel(const qc_problem *p, qc_reason *why) { return ft_ok(MODE_CHANNEL, p, "fp8.gemv1_tma_channel", why); }
static int elig_ft_tensor(const qc_problem *p, qc_reason *why) { return ft_ok(MODE_TENSOR, p, "fp8.gemv1_tma_tensor", why); }
ELIG(elig_mm_channel, w8a8_scheme_ok, MODE_CHANNEL, "fp8.gemm_channel_mma")
ELIG(elig_mm_tensor, w8a8_scheme_ok, MODE_TENSOR, "fp8.gemm_tensor_mma")
ELIG(elig_mm_block, w8a8_scheme_ok, MODE_BLOCK, "fp8.gemm_block_mma")
ELIG(elig_w16_channel, w8a16_scheme_ok, MODE_CHANNEL, "fp8.w8a16_channel")
ELIG(elig_w16_tensor, w8a16_scheme_ok, MODE_TENSOR, "fp8.w8a16_tensor")
ELIG(elig_w16_block, w8a16_scheme_ok, MODE_BLOCK, "fp8.w8a16_block")

/* Activation quantization is a step before a W8A8 GEMM, not a linear: never
 * selected as one ("role").  A weight of another scheme is refused first with
 * "scheme", so the engine finds the quantizer a weight needs by asking each. */
static int quant_refuse(const qc_problem *p, qc_reason *why, int ok, const char *id, const char *for_schemes) {
    if (!ok) {
        reason(why, "scheme", "%s quantizes activations for %s weights, the weight has scheme %u", id, for_schemes,
               p->scheme);
        return 0;
    }
    reason(why, "role", "%s quantizes activations for the W8A8 GEMMs (run before them); it is not a linear kernel",
           id);
    return 0;
}
static int elig_quant_token(const qc_problem *p, qc_reason *why) {
    uint32_t s = scheme_of(p);
    return quant_refuse(p, why, s == FP8_SCHEME_CHANNEL, "fp8.quant_act_token", "channel");
}
static int elig_quant_static(const qc_problem *p, qc_reason *why) {
    uint32_t s = scheme_of(p);
    return quant_refuse(p, why, s == FP8_SCHEME_CHANNEL_STATIC || s == FP8_SCHEME_TENSOR_STATIC,
                        "fp8.quant_act_static", "channel_static / tensor_static");
}
static int elig_quant_group(const qc_problem *p, qc_reason *why) {
    return quant_refuse(p, why, scheme_of(p) == FP8_SCHEME_BLOCK, "fp8.quant_act_group", "block");
}

/* ---- descriptors --------------------------------------------------------- */

static const qc_kernel_param P_QUANT[] = {
    {"x.bf16", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"k", QC_PARAM_I64},
};
static const qc_kernel_param P_QUANT_STATIC[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.act_scale", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR},
    {"xs", QC_PARAM_PTR},     {"m", QC_PARAM_I64},           {"k", QC_PARAM_I64},
};
#define W8A8_PARAMS                                                                                       \
    {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR},   \
        {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64}, {"k", QC_PARAM_I64}
static const qc_kernel_param P_W8A8[] = {W8A8_PARAMS};
/* the wgmma GEMMs: P_W8A8, then their split-K workspace and the optional bf16 output */
static const qc_kernel_param P_W8A8_WG[] = {W8A8_PARAMS, {"work", QC_PARAM_PTR}, {"y.bf16", QC_PARAM_PTR}};
static const qc_kernel_param P_W8A16[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};
/* xq in boxes of 128 rows, W in boxes of 128 rows (choose_wbox: fewer with 192 or 160 columns in the plan), both
 * 128 K = 128 bytes wide: the 128-byte swizzle span */
static qc_tensor_map_spec MAPS_W8A8[] = { /* not const: choose_wbox sets the W box's rows at registration */
    {"xq", QC_DT_F8_E4M3, "m", "k", WG_BM, WG_BK, 128},
    {"w.qweight", QC_DT_F8_E4M3, "n", "k", 128, WG_BK, 128},
};

static const char *const OPT_TOKEN[] = {"-DFP8_QUANT_TOKEN", NULL};
static const char *const OPT_STATIC[] = {"-DFP8_QUANT_STATIC", NULL};
static const char *const OPT_GROUP[] = {"-DFP8_QUANT_GROUP", NULL};
static const char *const OPT_MODE[3][1 + 1] = {{"-DFP8_MODE=0", NULL}, {"-DFP8_MODE=1", NULL}, {"-DFP8_MODE=2", NULL}};
static const char *const OPT_PAIR[3][2 + 1] = {{"-DFP8_MODE=0", "-DFP8_CLUSTER=2", NULL},
                                               {"-DFP8_MODE=1", "-DFP8_CLUSTER=2", NULL},
                                               {"-DFP8_MODE=2", "-DFP8_CLUSTER=2", NULL}};
static const char *const OPT_W16[3][2 + 1] = {{"-DFP8_W8A16", "-DFP8_MODE=0", NULL},
                                               {"-DFP8_W8A16", "-DFP8_MODE=1", NULL},
                                               {"-DFP8_W8A16", "-DFP8_MODE=2", NULL}};

typedef struct kspec {
    const char *id, *entry, *src;
    const char *const *opts;
    qc_arch_range arch;
    uint32_t phases;
    int64_t m_min, m_max;
    const qc_kernel_param *params;
    uint32_t n_params;
    void (*ref)(void);
    void (*dims)(const qc_problem *, qc_launch_dims *);
    int (*elig)(const qc_problem *, qc_reason *);
    int maps;
    const char *recipe; /* an activation quantizer's recipe (plugin.h), for the engine's fusion */
} kspec;

#define NP(a) (uint32_t)(sizeof a / sizeof a[0])
#define FN(f) (void (*)(void))(f)
/* Registration order is selection order (the first eligible kernel wins): the decode GEMV below
 * m = 17 (the wgmma GEMMs start at m = 17: the engine prefers a kernel of a narrower arch range, and
 * on the H200 the GEMV took half the wgmma time at m <= 16: 11.7 vs 19.5 us on 4096 x 4096), the Hopper wgmma GEMMs, the sm_89 mma.sync GEMMs (also any later arch without wgmma), the
 * W8A16 path below sm_89, then the activation quantizers (never selected as linears). */
static const kspec g_kernels[] = {
    /* m = 1 on sm_90, k <= 6144: a narrower arch and M range than the GEMVs below, so the engine takes it where it is
       eligible */
    {"fp8.gemv1_tma_channel", "qc_fp8_gemv1_tma_channel", FP8_SRC_GEMV1T, OPT_MODE[0], {90, 90}, QC_PHASE_ANY, 1, 1,
     P_W8A8, NP(P_W8A8), FN(channel_ref), gemv1t_dims, elig_ft_channel, 0, NULL},
    {"fp8.gemv1_tma_tensor", "qc_fp8_gemv1_tma_tensor", FP8_SRC_GEMV1T, OPT_MODE[1], {90, 90}, QC_PHASE_ANY, 1, 1,
     P_W8A8, NP(P_W8A8), FN(tensor_ref), gemv1t_dims, elig_ft_tensor, 0, NULL},
    {"fp8.gemv_channel", "qc_fp8_gemv_channel", FP8_SRC_GEMV, OPT_MODE[0], {89, QC_SM_ANY}, QC_PHASE_ANY, 1, GV_ROWS,
     P_W8A8, NP(P_W8A8), FN(channel_ref), gemv_dims, elig_gv_channel, 0, NULL},
    {"fp8.gemv_tensor", "qc_fp8_gemv_tensor", FP8_SRC_GEMV, OPT_MODE[1], {89, QC_SM_ANY}, QC_PHASE_ANY, 1, GV_ROWS,
     P_W8A8, NP(P_W8A8), FN(tensor_ref), gemv_dims, elig_gv_tensor, 0, NULL},
    {"fp8.gemv_block", "qc_fp8_gemv_block", FP8_SRC_GEMV, OPT_MODE[2], {89, QC_SM_ANY}, QC_PHASE_ANY, 1, GV_ROWS,
     P_W8A8, NP(P_W8A8), FN(block_ref), gemv_dims, elig_gv_block, 0, NULL},
    /* W as the e4m3 mma's A operand, no conversion: the same ranges as the GEMVs above and registered after
       them (unless FP8_GEMV_FIRST), so the engine keeps those until this one's H200 times are in */
    {"fp8.gemv_mma_channel", "qc_fp8_gemv_mma_channel", FP8_SRC_GEMV_MMA, OPT_MODE[0], {89, QC_SM_ANY}, QC_PHASE_ANY,
     1, GV_ROWS, P_W8A8, NP(P_W8A8), FN(channel_ref), gemv_mma_dims, elig_gm_channel, 0, NULL},
    {"fp8.gemv_mma_tensor", "qc_fp8_gemv_mma_tensor", FP8_SRC_GEMV_MMA, OPT_MODE[1], {89, QC_SM_ANY}, QC_PHASE_ANY,
     1, GV_ROWS, P_W8A8, NP(P_W8A8), FN(tensor_ref), gemv_mma_dims, elig_gm_tensor, 0, NULL},
    {"fp8.gemv_mma_block", "qc_fp8_gemv_mma_block", FP8_SRC_GEMV_MMA, OPT_MODE[2], {89, QC_SM_ANY}, QC_PHASE_ANY,
     1, GV_ROWS, P_W8A8, NP(P_W8A8), FN(block_ref), gemv_mma_dims, elig_gm_block, 0, NULL},
    /* the same on sm_90a with wgmma (no F2FP conversions: Hopper's mma.sync e4m3 is F2FP + HMMA); channel and
       tensor only */
    {"fp8.gemv_wg_channel", "qc_fp8_gemv_wg_channel", FP8_SRC_GEMV_WG, OPT_MODE[0], {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     GV_ROWS, P_W8A8, NP(P_W8A8), FN(channel_ref), gemv_wg_dims, elig_gw_channel, 0, NULL},
    {"fp8.gemv_wg_tensor", "qc_fp8_gemv_wg_tensor", FP8_SRC_GEMV_WG, OPT_MODE[1], {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     GV_ROWS, P_W8A8, NP(P_W8A8), FN(tensor_ref), gemv_wg_dims, elig_gw_tensor, 0, NULL},
    /* two row tiles and up (m > 128, a higher m_min than the GEMMs below, so the engine takes them there when they
       are switched on): pairs of row tiles in clusters of two blocks that copy W once a pair (TMA multicast) */
    {"fp8.gemm_channel_wgmma_pair", "qc_fp8_gemm_channel_wgmma", FP8_SRC_WGMMA, OPT_PAIR[0], {90, 90}, QC_PHASE_ANY,
     WG_BM + 1, (1ll << 31) - 2 * WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(channel_wg_ref), wgmma_pair_dims,
     elig_wgp_channel, 1, NULL},
    {"fp8.gemm_tensor_wgmma_pair", "qc_fp8_gemm_tensor_wgmma", FP8_SRC_WGMMA, OPT_PAIR[1], {90, 90}, QC_PHASE_ANY,
     WG_BM + 1, (1ll << 31) - 2 * WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(tensor_wg_ref), wgmma_pair_dims,
     elig_wgp_tensor, 1, NULL},
    {"fp8.gemm_block_wgmma_pair", "qc_fp8_gemm_block_wgmma", FP8_SRC_WGMMA, OPT_PAIR[2], {90, 90}, QC_PHASE_ANY,
     WG_BM + 1, (1ll << 31) - 2 * WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(block_wg_ref), wgmma_pair_block_dims,
     elig_wgp_block, 1, NULL},
    {"fp8.gemm_channel_wgmma", "qc_fp8_gemm_channel_wgmma", FP8_SRC_WGMMA, OPT_MODE[0], {90, 90}, QC_PHASE_ANY,
     GV_ROWS + 1, (1ll << 31) - WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(channel_wg_ref), wgmma_dims, elig_wg_channel, 1, NULL},
    {"fp8.gemm_tensor_wgmma", "qc_fp8_gemm_tensor_wgmma", FP8_SRC_WGMMA, OPT_MODE[1], {90, 90}, QC_PHASE_ANY,
     GV_ROWS + 1, (1ll << 31) - WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(tensor_wg_ref), wgmma_dims, elig_wg_tensor, 1, NULL},
    {"fp8.gemm_block_wgmma", "qc_fp8_gemm_block_wgmma", FP8_SRC_WGMMA, OPT_MODE[2], {90, 90}, QC_PHASE_ANY,
     GV_ROWS + 1, (1ll << 31) - WG_BM, P_W8A8_WG, NP(P_W8A8_WG), FN(block_wg_ref), wgmma_block_dims, elig_wg_block, 1, NULL},
    {"fp8.gemm_channel_mma", "qc_fp8_gemm_channel_mma", FP8_SRC_MMA, OPT_MODE[0], {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     65535ll * MM_T, P_W8A8, NP(P_W8A8), FN(channel_ref), mma_dims, elig_mm_channel, 0, NULL},
    {"fp8.gemm_tensor_mma", "qc_fp8_gemm_tensor_mma", FP8_SRC_MMA, OPT_MODE[1], {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     65535ll * MM_T, P_W8A8, NP(P_W8A8), FN(tensor_ref), mma_dims, elig_mm_tensor, 0, NULL},
    {"fp8.gemm_block_mma", "qc_fp8_gemm_block_mma", FP8_SRC_MMA, OPT_MODE[2], {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     65535ll * MM_T, P_W8A8, NP(P_W8A8), FN(block_ref), mma_dims, elig_mm_block, 0, NULL},
    {"fp8.w8a16_channel", "qc_fp8_w8a16_channel", FP8_SRC_MMA, OPT_W16[0], {80, 88}, QC_PHASE_ANY, 1, 65535ll * MM_T,
     P_W8A16, NP(P_W8A16), FN(channel_w8a16_ref), mma_dims, elig_w16_channel, 0, NULL},
    {"fp8.w8a16_tensor", "qc_fp8_w8a16_tensor", FP8_SRC_MMA, OPT_W16[1], {80, 88}, QC_PHASE_ANY, 1, 65535ll * MM_T,
     P_W8A16, NP(P_W8A16), FN(tensor_w8a16_ref), mma_dims, elig_w16_tensor, 0, NULL},
    {"fp8.w8a16_block", "qc_fp8_w8a16_block", FP8_SRC_MMA, OPT_W16[2], {80, 88}, QC_PHASE_ANY, 1, 65535ll * MM_T,
     P_W8A16, NP(P_W8A16), FN(block_w8a16_ref), mma_dims, elig_w16_block, 0, NULL},
    {"fp8.quant_act_token", "qc_fp8_quant_act_token", FP8_SRC_QUANT, OPT_TOKEN, {89, QC_SM_ANY}, QC_PHASE_ANY, 1, 0,
     P_QUANT, NP(P_QUANT), FN(quant_token_ref), quant_dims, elig_quant_token, 0, QC_ACT_RECIPE_E4M3_TOKEN},
    {"fp8.quant_act_static", "qc_fp8_quant_act_static", FP8_SRC_QUANT, OPT_STATIC, {89, QC_SM_ANY}, QC_PHASE_ANY, 1,
     0, P_QUANT_STATIC, NP(P_QUANT_STATIC), FN(quant_static_ref), quant_dims, elig_quant_static, 0, NULL},
    {"fp8.quant_act_group", "qc_fp8_quant_act_group", FP8_SRC_QUANT, OPT_GROUP, {89, QC_SM_ANY}, QC_PHASE_ANY, 1, 0,
     P_QUANT, NP(P_QUANT), FN(quant_group_ref), quant_dims, elig_quant_group, 0, QC_ACT_RECIPE_E4M3_G128},
};

/* Which decode GEMV the engine picks at m <= 16 (a tie on arch and M range goes to the first registered):
 * 0 fp8.gemv_* (the table's order), 1 fp8.gemv_mma_* registered first, 2 fp8.gemv_wg_* (sm_90, channel
 * and tensor) then fp8.gemv_mma_* first.  tests/gpu/test_fp8_unit.c and test_fp8_gemv_unit.c state the
 * choice. */
#define FP8_GEMV_FIRST 0

static int gemv_rank(const kspec *s) { /* pass in which s registers */
    if (FP8_GEMV_FIRST == 2 && strncmp(s->id, "fp8.gemv_wg_", 12) == 0) return 0;
    if (FP8_GEMV_FIRST >= 1 && strncmp(s->id, "fp8.gemv_mma_", 13) == 0) return 1;
    return 2;
}

/* QC_FP8_WGMMA_OPTS="-DA=1,-DB=2" (commas or spaces): extra NVRTC options for the three wgmma GEMMs (cuda/wgmma.cu's
 * build options), QC_FP8_GEMV_OPTS the same for the three fp8.gemv_* (cuda/gemv.cu) and fp8.gemv1_tma_* (cuda/gemv1_tma.cu), for A/B runs on the device
 * without a rebuild; at most 8 options of up to 63 characters, each starting with -D (anything else is ignored
 * with a warning).  Each variable is read once per registration; the arrays live as long as the plugin. */
#define X_OPTS 8
#define X_HOST_OPTS 7 /* after the user's: QC_FP8_BN_EFF's four FP8_EFF*, choose_wbox's WG_BOX_ROWS, QC_FP8_ST128's two */
enum { X_WGMMA, X_GEMV, X_FAMILIES };
static char g_xbuf[X_FAMILIES][X_OPTS + X_HOST_OPTS][QC_ENV_OPT_LEN];
static int g_xn[X_FAMILIES];
static const char *g_xopts[X_FAMILIES][3][2 + X_OPTS + X_HOST_OPTS];
static void read_extra_opts(int family) {
    static const char *const env[X_FAMILIES] = {"QC_FP8_WGMMA_OPTS", "QC_FP8_GEMV_OPTS"};
    g_xn[family] = qc_env_defines("fp8", env[family], g_xbuf[family], X_OPTS);
    /* FP8_STG128 changes the shared memory the kernel needs, which the host sizes from QC_FP8_ST128: passed here
       alone, the staged rows would run past the allocation, so it is dropped (fewer FP8_ST* stages are safe) */
    for (int i = 0; i < g_xn[family]; i++)
        if (!strncmp(g_xbuf[family][i], "-DFP8_STG128", 12)) {
            fprintf(stderr, "fp8: %s: ignoring '%s' (set QC_FP8_ST128 instead: it sizes the shared memory too)\n",
                    env[family], g_xbuf[family][i]);
            memmove(g_xbuf[family][i], g_xbuf[family][i + 1], (size_t)(g_xn[family] - i - 1) * QC_ENV_OPT_LEN);
            g_xn[family]--, i--;
        }
}
/* QC_FP8_BN_EFF="a,b,c,d" (integers 0..1000 for 256, 192, 160, 128 columns, not all 0; three values, as before
 * session 19, leave 256 out): the plan's tile-width weights, here and in the device's copy of the plan (four more
 * wgmma build options, in place of the last extra ones when those are full) */
static void read_bn_eff(void) {
    const char *e = getenv("QC_FP8_BN_EFF");
    int v[4] = {0, 0, 0, 0}, got;
    char tail;
    if (!e) return;
    got = sscanf(e, "%d,%d,%d,%d%c", &v[0], &v[1], &v[2], &v[3], &tail);
    if (got == 3 && sscanf(e, "%d,%d,%d%c", &v[0], &v[1], &v[2], &tail) == 3) { /* the three-width form: 192, 160, 128 */
        v[3] = v[2], v[2] = v[1], v[1] = v[0], v[0] = 0;
        got = 4;
    }
    int bad = got != 4, sum = 0;
    for (int i = 0; i < 4; i++) {
        bad |= v[i] < 0 || v[i] > 1000;
        sum += v[i];
    }
    if (bad || sum == 0) {
        fprintf(stderr,
                "fp8: QC_FP8_BN_EFF: ignoring '%s' (want four integers 0..1000 for 256,192,160,128 columns, not all 0, "
                "e.g. 110,0,0,90)\n", e);
        return;
    }
    static const char *const names[4] = {"FP8_EFF256", "FP8_EFF192", "FP8_EFF160", "FP8_EFF128"};
    for (int i = 0; i < 4; i++) {
        g_fp8_eff[0][i] = g_fp8_eff[1][i] = v[i];
        snprintf(g_xbuf[X_WGMMA][g_xn[X_WGMMA]++], QC_ENV_OPT_LEN, "-D%s=%d", names[i], v[i]);
    }
}
static void read_st128(void) {
    const int v = qc_env_int("fp8", "QC_FP8_ST128", 2, 6, 0); /* 0: unset, or ignored with a warning */
    if (!v) return;
    g_fp8_st128 = v;
    snprintf(g_xbuf[X_WGMMA][g_xn[X_WGMMA]++], QC_ENV_OPT_LEN, "-DFP8_ST128=%d", g_fp8_st128);
    snprintf(g_xbuf[X_WGMMA][g_xn[X_WGMMA]++], QC_ENV_OPT_LEN, "-DFP8_STG128=%d", v == 6 ? 0 : 1);
}
/* Rows of W per TMA box of the wgmma GEMMs (one map for every build): the largest of 128, 64, 32 that divides every
 * tile width any build may take (their boxes stack into a stage), so 128 by default (128 columns; 256 too) and 32
 * with 160 in.  QC_FP8_WBOX=R (32, 64, 128) overrides it when R divides those widths.  Fewer, larger copies a
 * stage: the copies alone of o 1024 took 25.4 us with 32-row boxes, 21.4 with 64, 20.6 with 128 (H200, session 20
 * call 2).  The device gets it as WG_BOX_ROWS (default 128). */
static int g_fp8_wbox = 128;
/* r rows make whole boxes of 128 columns (the kernel always holds that path: its default case, and the pair builds'
   fallback from 256) and of every width either build may take */
static int wbox_fits(int r) {
    static const int bns[4] = {256, 192, 160, 128};
    if (r <= 0 || 128 % r) return 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            if (g_fp8_eff[b][i] > 0 && bns[i] % r) return 0;
    return 1;
}
static void choose_wbox(void) {
    g_fp8_wbox = wbox_fits(128) ? 128 : wbox_fits(64) ? 64 : 32;
    const char *e = getenv("QC_FP8_WBOX");
    if (e) {
        const int r = atoi(e);
        if ((r != 32 && r != 64 && r != 128) || !wbox_fits(r))
            fprintf(stderr, "fp8: QC_FP8_WBOX: ignoring '%s' (want 32, 64 or 128 rows dividing every tile width "
                            "the plan may take; keeping %d)\n", e, g_fp8_wbox);
        else
            g_fp8_wbox = r;
    }
    MAPS_W8A8[1].box_rows = (uint32_t)g_fp8_wbox;
    if (g_fp8_wbox != 128) snprintf(g_xbuf[X_WGMMA][g_xn[X_WGMMA]++], QC_ENV_OPT_LEN, "-DWG_BOX_ROWS=%d", g_fp8_wbox);
}
/* a kernel's NVRTC options: its FP8_MODE option (opts is one of OPT_MODE or OPT_PAIR), the pair builds' cluster
 * option, then its family's extra ones */
static const char *g_xopts_pair[3][3 + X_OPTS + X_HOST_OPTS];
static const char *const *with_extra_opts(int family, const char *const *opts) {
    for (int mode = 0; mode < 3; mode++) {
        if (g_xn[family] > 0 && opts == OPT_MODE[mode])
            return qc_env_option_list(opts[0], g_xbuf[family], g_xn[family], g_xopts[family][mode]);
        if (g_xn[family] > 0 && opts == OPT_PAIR[mode]) {
            g_xopts_pair[mode][0] = opts[0];
            qc_env_option_list(opts[1], g_xbuf[family], g_xn[family], g_xopts_pair[mode] + 1);
            return g_xopts_pair[mode];
        }
    }
    return opts;
}

qc_status fp8_kernels_register(const qc_host_api *api, qc_host *host) {
    const size_t n = sizeof g_kernels / sizeof g_kernels[0];
    g_fp8_split_max = qc_env_int("fp8", "QC_FP8_SPLIT", 1, FP8_SPLIT_MAX, FP8_SPLIT_MAX);
    g_fp8_pair_grid = qc_env_int("fp8", "QC_FP8_PAIR_GRID", 2, WG_SMS, WG_SMS) & ~1;
    read_extra_opts(X_WGMMA);
    read_bn_eff();
    choose_wbox();
    read_st128();
    read_extra_opts(X_GEMV);
    for (size_t j = 0; j < 3 * n; j++) { /* three passes, each in table order */
        const kspec *s = &g_kernels[j % n];
        if (gemv_rank(s) != (int)(j / n)) continue;
        qc_kernel_desc kd = {
            .struct_size = sizeof kd,
            .id = s->id,
            .format = "fp8",
            .phases = s->phases,
            .m_min = s->m_min,
            .m_max = s->m_max,
            .arch = s->arch,
            .n_params = s->n_params,
            .params = s->params,
            .reference = s->ref,
            .cuda_source = s->src,
            .cuda_entry = s->entry,
            .nvrtc_options = s->src == FP8_SRC_WGMMA  ? with_extra_opts(X_WGMMA, s->opts)
                             : s->src == FP8_SRC_GEMV || s->src == FP8_SRC_GEMV1T ? with_extra_opts(X_GEMV, s->opts)
                                                      : s->opts,
            .launch_dims = s->dims,
            .eligible = s->elig,
            .n_tensor_maps = s->maps ? NP(MAPS_W8A8) : 0,
            .tensor_maps = s->maps ? MAPS_W8A8 : NULL,
            .act_recipe = s->recipe, /* the static quantizer reads w.act_scale: no recipe the core fuses */
            /* cuda/gemv.cu calls qc_grid_dep() first; gemv1_tma.cu's producer copies weights before qc_grid_wait */
            .flags = s->src == FP8_SRC_GEMV || s->src == FP8_SRC_GEMV1T ? QC_KERNEL_GRID_DEP : 0u,
            .workspace_bytes = s->src == FP8_SRC_WGMMA ? wgmma_workspace : NULL,
        };
        qc_status st = api->register_kernel(host, &kd);
        if (st != QC_OK) return st;
    }
    return QC_OK;
}
