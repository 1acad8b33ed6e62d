/* test_policies.c - the shipped policies on real model shapes and fake devices (CPU backend). */
#include "qc_test.h"
#include "qcore/qcore.h"

static qc_runtime *rt;

/* The H200 of shared/anchors/README.md: its measured copy bandwidth and peaks. */
static const qc_policy_device H200 = {.name = "fake-h200", .sm = 90, .sm_count = 132, .mem_bandwidth_gbs = 4270,
                                      .bf16_tflops = 679, .fp8_tflops = 1257, .int8_tops = 906};
/* An sm_80 part (A100 SXM datasheet numbers): INT8 tensor cores, no FP8. */
static const qc_policy_device SM80 = {.name = "fake-sm80", .sm = 80, .sm_count = 108, .mem_bandwidth_gbs = 2039,
                                      .bf16_tflops = 312, .int8_tops = 624};
/* The reference backend: no measurements, ridge 0. */
static const qc_policy_device CPU = {.name = "cpu"};

#define W4_BPW (4.125 / 8) /* w4a16 g128: 4 bits + one f16 scale per 128 */
#define ROOFLINE_DEFAULT_CROSSOVER 40 /* stated in policies/roofline.lua */

static const char *const SHIPPED[] = {"latency", "throughput", "quality", "roofline", "measured"};
#define N_SHIPPED (sizeof SHIPPED / sizeof *SHIPPED)

static qc_policy *open_policy(const char *name) {
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/policies/%s.lua", QC_TEST_SOURCE_DIR, name);
    qc_policy *p = qc_policy_open(path, NULL, err, sizeof err);
    CHECK(p != NULL, "%s: %s", path, err);
    return p;
}

static qc_layer_list *load_layers(const char *config) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/configs/%s", QC_TEST_SOURCE_DIR, config);
    qc_model_shape shape;
    qc_status st = qc_model_shape_load(path, &shape, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", path, err);
    return st == QC_OK ? qc_model_linear_layers(&shape) : NULL;
}

/* decode buckets NULL: the runtime's defaults (1..256 and prefill 128..8192). */
static qc_dispatch *build(qc_policy *p, const qc_layer_list *L, const qc_policy_device *dev, const int64_t *dec,
                          size_t n_dec) {
    qc_dispatch_options o = {.struct_size = sizeof o, .gpu = 0, .device = dev, .decode_batches = dec,
                             .n_decode = n_dec};
    char err[512];
    qc_dispatch *d = qc_dispatch_build(rt, p, L, &o, err, sizeof err);
    CHECK(d != NULL, "%s", err);
    return d;
}

/* Seed 000: a weight-only format turns compute-bound at B* = ridge * bpw / 2. */
static double ridge_of(const qc_policy_device *d) { return d->bf16_tflops * 1e12 / (d->mem_bandwidth_gbs * 1e9); }
static double crossover_of(const qc_policy_device *d) { return ridge_of(d) * W4_BPW / 2; }

/* What an entry should run; NULL = any. */
typedef const char *(*expect_fn)(const qc_policy_layer *l, const qc_dispatch_entry *e, const void *ctx);

/* Every entry runs what `want` says, exactly as the policy asked (no fallback). */
static void check_table(const char *what, const qc_dispatch *d, const qc_layer_list *L, expect_fn want,
                        const void *ctx) {
    size_t bad = 0;
    for (size_t i = 0; d && i < qc_dispatch_count(d); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(d, i);
        const char *w = want ? want(&L->layers[e->layer], e, ctx) : NULL;
        int ok = strcmp(e->format, e->wanted) == 0 && !e->fallback.code[0] && (!w || strcmp(e->format, w) == 0);
        if (!ok && bad++ < 3)
            fprintf(stderr, "%s: %s %s b%lld: runs %s, wanted %s, expected %s (%s: %s) note '%s'\n", what,
                    L->layers[e->layer].name, e->phase == QC_PHASE_DECODE ? "decode" : "prefill",
                    (long long)e->batch, e->format, e->wanted, w ? w : "any", e->fallback.code, e->fallback.text,
                    e->note);
    }
    CHECK(d && bad == 0, "%s: %zu entries differ", what, bad);
}

/* ---- roofline.lua ---- */

typedef struct {
    double crossover;
    const char *w8;
} roofline_expect;

static const char *roofline_want(const qc_policy_layer *l, const qc_dispatch_entry *e, const void *ctx) {
    (void)l;
    const roofline_expect *x = ctx;
    return (double)e->batch < x->crossover ? "w4a16" : x->w8;
}

static void test_roofline(const qc_layer_list *llama) {
    qc_policy *p = open_policy("roofline");
    if (!p) return;
    CHECK(fabs(qc_format_find(rt, "w4a16")->effective_bits / 8 - W4_BPW) < 1e-12, "w4a16 bytes per weight");

    /* H200: ridge 159 FLOP/B, B* ~ 41 */
    double b = crossover_of(&H200);
    printf("H200: ridge %.2f FLOP/B, w4a16 %.6f B/weight, crossover B* = %.3f\n", ridge_of(&H200), W4_BPW, b);
    CHECK(b > 40 && b < 42, "H200 crossover %.3f", b);
    roofline_expect x = {b, "fp8"};
    qc_dispatch *d = build(p, llama, &H200, NULL, 0);
    check_table("roofline h200", d, llama, roofline_want, &x);
    const qc_dispatch_entry *e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, 32) : NULL;
    CHECK(e && strcmp(e->format, "w4a16") == 0, "h200 decode 32");
    char crossing[64];
    snprintf(crossing, sizeof crossing, "crossover %.1f (bf16 ridge %.0f FLOP/B)", b, ridge_of(&H200));
    CHECK_CONTAINS(e ? e->note : NULL, crossing);
    CHECK_CONTAINS(e ? e->note : NULL, "memory-bound");
    e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, 64) : NULL;
    CHECK(e && strcmp(e->format, "fp8") == 0, "h200 decode 64");
    CHECK_CONTAINS(e ? e->note : NULL, "compute-bound");
    e = d ? qc_dispatch_lookup(d, llama->n - 1, QC_PHASE_PREFILL, 128) : NULL;
    CHECK(e && strcmp(e->format, "fp8") == 0, "h200 prefill 128");
    qc_dispatch_free(d);

    /* the switch sits exactly at B*: the batches on either side of it */
    int64_t edge[2] = {(int64_t)floor(b), (int64_t)ceil(b)};
    d = build(p, llama, &H200, edge, 2);
    check_table("roofline h200 at B*", d, llama, roofline_want, &x);
    e = d ? qc_dispatch_lookup(d, 3, QC_PHASE_DECODE, edge[0]) : NULL;
    CHECK(e && strcmp(e->format, "w4a16") == 0, "below B*: batch %lld", (long long)edge[0]);
    e = d ? qc_dispatch_lookup(d, 3, QC_PHASE_DECODE, edge[1]) : NULL;
    CHECK(e && strcmp(e->format, "fp8") == 0, "at B*: batch %lld", (long long)edge[1]);
    qc_dispatch_free(d);

    /* the engine's measured ceilings: w4a16's own ridge (440 TFLOP/s / 4270 GB/s = 103 FLOP/B) sets B* ~ 26.6,
     * so decode 32 now runs fp8 and 16 still w4a16 */
    static const qc_policy_peak peaks[] = {{"bf16", 843}, {"w4a16", 440}, {"fp8", 1183}};
    qc_policy_device measured = H200;
    measured.peaks = peaks, measured.n_peaks = 3;
    roofline_expect xm = {440e12 / (H200.mem_bandwidth_gbs * 1e9) * W4_BPW / 2, "fp8"};
    printf("H200 with measured ceilings: w4a16 ridge %.2f FLOP/B, crossover B* = %.3f\n",
           440e12 / (H200.mem_bandwidth_gbs * 1e9), xm.crossover);
    CHECK(xm.crossover > 26 && xm.crossover < 27, "measured crossover %.3f", xm.crossover);
    d = build(p, llama, &measured, NULL, 0);
    check_table("roofline h200 measured ceilings", d, llama, roofline_want, &xm);
    e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, 32) : NULL;
    CHECK(e && strcmp(e->format, "fp8") == 0, "measured ceilings: decode 32");
    CHECK_CONTAINS(e ? e->note : NULL, "w4a16 ridge 103 FLOP/B = 440 TFLOP/s measured / 4270 GB/s");
    e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, 16) : NULL;
    CHECK(e && strcmp(e->format, "w4a16") == 0, "measured ceilings: decode 16");
    qc_dispatch_free(d);

    /* sm_80: no FP8 tensor cores, so INT8 above its own crossover */
    roofline_expect x80 = {crossover_of(&SM80), "w8a8_int8"};
    printf("sm_80: ridge %.2f FLOP/B, crossover B* = %.3f\n", ridge_of(&SM80), x80.crossover);
    d = build(p, llama, &SM80, NULL, 0);
    check_table("roofline sm_80", d, llama, roofline_want, &x80);
    e = d ? qc_dispatch_lookup(d, 5, QC_PHASE_DECODE, 64) : NULL;
    CHECK(e && strcmp(e->format, "w8a8_int8") == 0, "sm_80 decode 64");
    qc_dispatch_free(d);

    /* CPU: no ridge, the stated default, and the note says so */
    roofline_expect xc = {ROOFLINE_DEFAULT_CROSSOVER, "fp8"};
    int64_t around[3] = {ROOFLINE_DEFAULT_CROSSOVER - 1, ROOFLINE_DEFAULT_CROSSOVER, 256};
    d = build(p, llama, &CPU, around, 3);
    check_table("roofline cpu", d, llama, roofline_want, &xc);
    e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, ROOFLINE_DEFAULT_CROSSOVER - 1) : NULL;
    CHECK(e && strcmp(e->format, "w4a16") == 0, "cpu below the default");
    CHECK_CONTAINS(e ? e->note : NULL, "crossover 40.0 (no measured ridge: default)");
    qc_dispatch_free(d);
    qc_policy_close(p);
}

/* ---- quality.lua ---- */

static int sensitive_block(const qc_policy_layer *l) {
    int band = l->n_layers / 8 > 1 ? l->n_layers / 8 : 1;
    if (l->index == 0 || l->index == l->n_layers - 1) return 1;
    return (strcmp(l->role, "attn.v") == 0 || strcmp(l->role, "mlp.down") == 0) &&
           (l->index < band || l->index >= l->n_layers - band);
}

static const char *quality_want(const qc_policy_layer *l, const qc_dispatch_entry *e, const void *ctx) {
    (void)e;
    if (l->index < 0) return "bf16";
    return sensitive_block(l) ? (const char *)ctx : "w4a16";
}

/* Layers (not entries) of the table running `format` at decode batch 1. */
static size_t layers_running(const qc_dispatch *d, const qc_layer_list *L, const char *format) {
    size_t n = 0;
    for (size_t i = 0; d && i < L->n; i++) {
        const qc_dispatch_entry *e = qc_dispatch_lookup(d, i, QC_PHASE_DECODE, 1);
        n += e && strcmp(e->format, format) == 0;
    }
    return n;
}

static void expect_prepare(qc_policy *p, const qc_policy_layer *l, const qc_policy_device *dev, const char *want) {
    const char *formats[] = {"bf16", "w4a16", "fp8", "w8a8_int8", "mxfp4"};
    char names[8][64], err[512], got[256] = "";
    size_t n = 0;
    CHECK(qc_policy_prepare(p, l, dev, formats, 5, names, 8, &n, err, sizeof err) == QC_OK, "%s", err);
    for (size_t i = 0; i < n; i++) {
        if (i) strncat(got, " ", sizeof got - strlen(got) - 1);
        strncat(got, names[i], sizeof got - strlen(got) - 1);
    }
    CHECK(strcmp(got, want) == 0, "prepare(%s, %s): '%s', expected '%s'", l->name, dev->name, got, want);
}

static qc_status ask(qc_policy *p, const qc_policy_layer *l, int64_t batch, const qc_policy_device *dev,
                     const qc_policy_candidate *c, size_t n, char *out, char *note) {
    qc_policy_query q = {.struct_size = sizeof q, .layer = l, .phase = QC_PHASE_DECODE, .batch = batch,
                         .device = dev, .candidates = c, .n_candidates = n};
    char err[512];
    qc_status st = qc_policy_choose(p, &q, out, 32, note, 128, err, sizeof err);
    CHECK(st == QC_OK, "choose: %s", err);
    return st;
}

/* All five linear formats, eligible, unmeasured; bytes per weight as registered. */
enum { C_BF16, C_W4, C_FP8, C_I8, C_MX, N_CANDS };
static void fresh_candidates(qc_policy_candidate *c) {
    const char *names[N_CANDS] = {"bf16", "w4a16", "fp8", "w8a8_int8", "mxfp4"};
    for (int i = 0; i < N_CANDS; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].format = names[i];
        c[i].eligible = 1;
        c[i].time_us = -1;
        c[i].bytes_per_weight = qc_format_find(rt, names[i])->effective_bits / 8;
    }
}

static void test_quality(const qc_layer_list *llama, const qc_layer_list *smol) {
    qc_policy *p = open_policy("quality");
    if (!p) return;
    /* Llama-3-8B, 32 blocks: blocks 0 and 31 whole, attn.v and mlp.down also
     * in blocks 1-3 and 28-30, lm_head bf16, the rest w4a16 */
    qc_dispatch *d = build(p, llama, &H200, NULL, 0);
    check_table("quality h200", d, llama, quality_want, "fp8");
    size_t eight = 2 * 7 + 2 * 6;
    CHECK(layers_running(d, llama, "fp8") == eight, "fp8 layers: %zu", layers_running(d, llama, "fp8"));
    CHECK(layers_running(d, llama, "bf16") == 1, "bf16 layers");
    CHECK(layers_running(d, llama, "w4a16") == llama->n - eight - 1, "w4a16 layers");
    const qc_dispatch_entry *e = d ? qc_dispatch_lookup(d, llama->n - 1, QC_PHASE_PREFILL, 8192) : NULL;
    CHECK(e && strcmp(e->format, "bf16") == 0 && strstr(e->note, "lm_head"), "lm_head");
    e = d ? qc_dispatch_lookup(d, 31 * 7 + 2, QC_PHASE_DECODE, 1) : NULL; /* blk.31.attn.v */
    CHECK(e && strcmp(e->format, "fp8") == 0 && strstr(e->note, "first/last"), "blk.31.attn.v");
    e = d ? qc_dispatch_lookup(d, 1 * 7 + 0, QC_PHASE_DECODE, 256) : NULL; /* blk.1.attn.q */
    CHECK(e && strcmp(e->format, "w4a16") == 0, "blk.1.attn.q");
    qc_dispatch_free(d);

    d = build(p, llama, &SM80, NULL, 0);
    check_table("quality sm_80", d, llama, quality_want, "w8a8_int8");
    qc_dispatch_free(d);

    /* SmolLM2, 30 blocks: the band is 3 blocks at each end; CPU runs FP8 */
    d = build(p, smol, &CPU, NULL, 0);
    check_table("quality smollm2 cpu", d, smol, quality_want, "fp8");
    CHECK(layers_running(d, smol, "fp8") == 2 * 7 + 2 * 4, "smollm2 fp8 layers");
    qc_dispatch_free(d);

    /* prepare() lists exactly what choose() may use */
    const qc_policy_layer *head = &llama->layers[llama->n - 1], *q0 = &llama->layers[0],
                          *q5 = &llama->layers[5 * 7], *v2 = &llama->layers[2 * 7 + 2];
    expect_prepare(p, head, &H200, "bf16 w8a8_int8");
    expect_prepare(p, q0, &H200, "fp8 w8a8_int8");
    expect_prepare(p, q0, &SM80, "w8a8_int8");
    expect_prepare(p, v2, &H200, "fp8 w8a8_int8");
    expect_prepare(p, q5, &H200, "w4a16");

    /* lm_head where bf16 cannot run: INT8 per channel */
    qc_policy_candidate c[N_CANDS];
    fresh_candidates(c);
    c[C_BF16].eligible = 0;
    strcpy(c[C_BF16].reason.code, "arch");
    strcpy(c[C_BF16].reason.text, "bf16 needs none, device is sm_90");
    char out[32], note[128];
    if (ask(p, head, 1, &H200, c, N_CANDS, out, note) == QC_OK)
        CHECK(strcmp(out, "w8a8_int8") == 0, "lm_head without bf16: %s", out);
    /* first block where FP8 cannot run: INT8 */
    fresh_candidates(c);
    c[C_FP8].eligible = 0;
    strcpy(c[C_FP8].reason.code, "align_k");
    if (ask(p, q0, 1, &H200, c, N_CANDS, out, note) == QC_OK)
        CHECK(strcmp(out, "w8a8_int8") == 0, "blk.0 without fp8: %s", out);
    qc_policy_close(p);
}

/* ---- measured.lua ---- */

static void test_measured(const qc_layer_list *llama) {
    qc_policy *p = open_policy("measured");
    if (!p) return;
    const qc_policy_layer *l = &llama->layers[6]; /* blk.0.mlp.down */
    qc_policy_candidate c[N_CANDS];
    char out[32] = "", note[128] = "";

    /* the fastest measured kernel, whatever the roofline says about batch 1 */
    fresh_candidates(c);
    c[C_BF16].time_us = 20, c[C_W4].time_us = 30, c[C_FP8].time_us = 12, c[C_I8].time_us = 15;
    if (ask(p, l, 1, &H200, c, N_CANDS, out, note) == QC_OK) {
        CHECK(strcmp(out, "fp8") == 0, "fastest: %s", out);
        CHECK_CONTAINS(note, "fastest measured (12.0 us)");
    }
    /* within the tie margin: fewer bytes per weight wins */
    fresh_candidates(c);
    c[C_FP8].time_us = 10.0, c[C_W4].time_us = 10.05, c[C_BF16].time_us = 10.02;
    if (ask(p, l, 64, &H200, c, N_CANDS, out, note) == QC_OK) {
        CHECK(strcmp(out, "w4a16") == 0, "tie: %s", out);
        CHECK_CONTAINS(note, "fewer bytes");
    }
    /* an exact tie between formats of different sizes */
    fresh_candidates(c);
    c[C_BF16].time_us = 9.0, c[C_I8].time_us = 9.0;
    if (ask(p, l, 64, &H200, c, N_CANDS, out, note) == QC_OK) CHECK(strcmp(out, "w8a8_int8") == 0, "exact: %s", out);
    /* within 5% (isolated timings vs the model's step) still a tie; 8% is not */
    fresh_candidates(c);
    c[C_FP8].time_us = 10.0, c[C_W4].time_us = 10.4;
    if (ask(p, l, 1, &H200, c, N_CANDS, out, note) == QC_OK) CHECK(strcmp(out, "w4a16") == 0, "4%%: %s", out);
    fresh_candidates(c);
    c[C_FP8].time_us = 10.0, c[C_W4].time_us = 10.8;
    if (ask(p, l, 1, &H200, c, N_CANDS, out, note) == QC_OK) CHECK(strcmp(out, "fp8") == 0, "8%%: %s", out);
    /* an ineligible kernel's time does not count */
    fresh_candidates(c);
    c[C_FP8].time_us = 5, c[C_FP8].eligible = 0, c[C_W4].time_us = 8, c[C_BF16].time_us = 9;
    strcpy(c[C_FP8].reason.code, "not_prepared");
    if (ask(p, l, 256, &H200, c, N_CANDS, out, note) == QC_OK) CHECK(strcmp(out, "w4a16") == 0, "eligible: %s", out);

    /* nothing measured: the roofline rule, same table as roofline.lua */
    fresh_candidates(c);
    if (ask(p, l, 16, &H200, c, N_CANDS, out, note) == QC_OK) {
        CHECK(strcmp(out, "w4a16") == 0, "unmeasured 16: %s", out);
        CHECK_CONTAINS(note, "unmeasured");
        CHECK_CONTAINS(note, "crossover 41.0");
    }
    if (ask(p, l, 64, &H200, c, N_CANDS, out, note) == QC_OK) CHECK(strcmp(out, "fp8") == 0, "unmeasured 64: %s", out);
    if (ask(p, l, 64, &SM80, c, N_CANDS, out, note) == QC_OK)
        CHECK(strcmp(out, "w8a8_int8") == 0, "unmeasured sm_80 64: %s", out);

    qc_policy *r = open_policy("roofline");
    const qc_policy_device *devs[] = {&H200, &SM80, &CPU};
    for (size_t i = 0; r && i < 3; i++) {
        qc_dispatch *dm = build(p, llama, devs[i], NULL, 0), *dr = build(r, llama, devs[i], NULL, 0);
        size_t differ = 0;
        for (size_t j = 0; dm && dr && j < qc_dispatch_count(dm); j++)
            differ += strcmp(qc_dispatch_get(dm, j)->format, qc_dispatch_get(dr, j)->format) != 0;
        CHECK(dm && dr && differ == 0, "measured vs roofline on %s: %zu entries differ", devs[i]->name, differ);
        qc_dispatch_free(dm);
        qc_dispatch_free(dr);
    }
    qc_policy_close(r);
    qc_policy_close(p);
}

/* ---- every shipped policy, every layer, no fallbacks ---- */

static void test_all_shipped(const qc_layer_list *const *models, const char *const *model_names, size_t n_models) {
    const qc_policy_device *devs[] = {&CPU, &H200};
    qc_policy_candidate kv = {.format = "kv_fp8", .eligible = 1, .time_us = -1, .bytes_per_weight = 1};
    for (size_t pi = 0; pi < N_SHIPPED; pi++) {
        qc_policy *p = open_policy(SHIPPED[pi]);
        if (!p) continue;
        for (size_t mi = 0; mi < n_models; mi++) {
            const qc_layer_list *L = models[mi];
            for (size_t di = 0; L && di < 2; di++) {
                char what[128];
                snprintf(what, sizeof what, "%s.lua on %s, %s", SHIPPED[pi], model_names[mi], devs[di]->name);
                qc_dispatch *d = build(p, L, devs[di], NULL, 0);
                check_table(what, d, L, NULL, NULL);
                CHECK(d && qc_dispatch_count(d) == L->n * 13, "%s: %zu entries", what, d ? qc_dispatch_count(d) : 0);
                size_t silent = 0; /* every answer comes with its reason */
                for (size_t j = 0; d && j < qc_dispatch_count(d); j++) silent += !qc_dispatch_get(d, j)->note[0];
                CHECK(silent == 0, "%s: %zu answers without a note", what, silent);
                /* latency.lua keeps the output projection out of 4-bit */
                if (strcmp(SHIPPED[pi], "latency") == 0) {
                    size_t not8 = 0;
                    for (size_t j = 0; d && j < qc_dispatch_count(d); j++) {
                        const qc_dispatch_entry *e = qc_dispatch_get(d, j);
                        if (e->layer != L->n - 1) continue;
                        /* no device numbers: the INT8 head of docs/quality.md; with
                         * them the roofline may pick FP8's faster tensor cores */
                        not8 += di == 0 ? strcmp(e->format, "w8a8_int8") != 0
                                        : strcmp(e->format, "w8a8_int8") != 0 && strcmp(e->format, "fp8") != 0;
                    }
                    CHECK(d && not8 == 0, "%s: lm_head entries not 8-bit: %zu", what, not8);
                }
                qc_dispatch_free(d);
            }
        }
        char out[64], err[512];
        CHECK(qc_policy_kv_format(p, &H200, &kv, 1, out, sizeof out, err, sizeof err) == QC_OK, "%s kv: %s",
              SHIPPED[pi], err);
        CHECK(strcmp(out, "bf16") == 0 || strcmp(out, "kv_fp8") == 0, "%s kv_cache: '%s'", SHIPPED[pi], out);
        qc_policy_close(p);
    }
}

int main(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_TEST_PLUGIN_DIR};
    char err[512];
    rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt) return qc_test_finish("test_policies");
    const char *need[] = {"bf16", "w4a16", "fp8", "w8a8_int8", "mxfp4"};
    for (size_t i = 0; i < 5; i++) CHECK(qc_format_find(rt, need[i]) != NULL, "format %s not registered", need[i]);
    qc_layer_list *llama = load_layers("llama-3-8b.json"), *smol = load_layers("smollm2-135m.json");
    CHECK(llama && llama->n == 32 * 7 + 1 && smol && smol->n == 30 * 7 + 1, "layer lists");
    if (llama && smol && qc_test_failed == 0) {
        test_roofline(llama);
        test_quality(llama, smol);
        test_measured(llama);
        const qc_layer_list *models[] = {smol, llama};
        const char *names[] = {"smollm2-135m", "llama-3-8b"};
        test_all_shipped(models, names, 2);
    }
    qc_layer_list_free(llama);
    qc_layer_list_free(smol);
    qc_runtime_close(rt);
    return qc_test_finish("test_policies");
}
