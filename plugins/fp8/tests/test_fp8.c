/* test_fp8.c - the fp8 plugin: packing, dequantize, code stats, refusals, and each reference kernel against oracles. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/qcore.h>

#include "qc_fp8_codec.h"
#include "qc_test.h"
#include "qc_util.h"

/* scheme ids from docs/formats/fp8.md */
enum { S_TENSOR = 1, S_CHANNEL = 2, S_BLOCK = 3, S_TENSOR_STATIC = 4, S_CHANNEL_STATIC = 5, S_COUNT };
static const char *const kernel_id[S_COUNT] = {NULL, "fp8.linear_tensor_ref", "fp8.linear_channel_ref",
                                               "fp8.linear_block_ref", "fp8.linear_tensor_static_ref",
                                               "fp8.linear_channel_static_ref"};
static const char *const scheme_name[S_COUNT] = {NULL, "tensor", "channel", "block", "tensor_static",
                                                 "channel_static"};

static qc_runtime *rt;
static const qc_format_desc *F;

static int is_static(int s) { return s == S_TENSOR_STATIC || s == S_CHANNEL_STATIC; }
static int is_tensor(int s) { return s == S_TENSOR || s == S_TENSOR_STATIC; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static const qc_buffer *buffer(const qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers; i++)
        if (strcmp(w->buffers[i].name, name) == 0) return &w->buffers[i];
    return NULL;
}

static void release(qc_packed_weight *w) {
    if (F->release)
        F->release(w);
    else
        for (uint32_t i = 0; i < w->n_buffers; i++) qc_aligned_free(w->buffers[i].data);
    memset(w, 0, sizeof *w);
}

/* The recipe's scale for a range with this absolute maximum (amax/448; 1
 * for an all-zero range), written out here independently of the plugin. */
static float scale_for(float amax) {
    float s = amax / 448.0f;
    return s > 0.f ? s : 1.f;
}

/* Expected weight scales: index of the scale of element [j, t]. */
static int64_t wscale_index(int s, int64_t j, int64_t t, int64_t k) {
    if (is_tensor(s)) return 0;
    if (s == S_BLOCK) return (j / 128) * cdiv(k, 128) + t / 128;
    return j;
}

/* Activation quantization of the recipe: a_s per (row, group) and the
 * decoded codes.  G is the K group: all of K, or 128 for the block recipe. */
static void quantize_act(int s, const float *x, int64_t m, int64_t k, float static_as, float *xdec, float *as) {
    const int64_t G = s == S_BLOCK ? 128 : k, ng = cdiv(k, G);
    float all = 0.f;
    for (int64_t i = 0; i < m * k; i++) all = fmaxf(all, fabsf(x[i]));
    for (int64_t i = 0; i < m; i++)
        for (int64_t g = 0; g < ng; g++) {
            float amax = 0.f;
            for (int64_t t = g * G; t < k && t < (g + 1) * G; t++) amax = fmaxf(amax, fabsf(x[i * k + t]));
            as[i * ng + g] = is_static(s) ? static_as : s == S_TENSOR ? scale_for(all) : scale_for(amax);
        }
    for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < k; t++)
            xdec[i * k + t] = qc_fp8_e4m3_decode(qc_fp8_e4m3_encode(x[i * k + t] / as[i * ng + t / G]));
}

/* Calls a kernel through qc_kernel_bind + qc_kernel_call_reference with the
 * weight's buffers named "w.<buffer>".  Returns the bind status. */
static qc_status call_linear(const qc_kernel_desc *kd, const qc_packed_weight *w, const float *x, float *y,
                             int64_t m, char *err, size_t errlen) {
    char names[QC_MAX_WEIGHT_BUFFERS][32];
    void *ptrs[QC_MAX_WEIGHT_BUFFERS];
    qc_named_arg args[QC_MAX_WEIGHT_BUFFERS + 5];
    size_t na = 0;
    int64_t n = w->n, k = w->k;
    const float *xp = x;
    float *yp = y;
    for (uint32_t i = 0; i < w->n_buffers; i++) {
        snprintf(names[i], sizeof names[i], "w.%s", w->buffers[i].name);
        ptrs[i] = w->buffers[i].data;
        args[na++] = (qc_named_arg){names[i], &ptrs[i]};
    }
    args[na++] = (qc_named_arg){"x", (void *)&xp};
    args[na++] = (qc_named_arg){"y", &yp};
    args[na++] = (qc_named_arg){"m", &m};
    args[na++] = (qc_named_arg){"n", &n};
    args[na++] = (qc_named_arg){"k", &k};
    void *argv[32];
    qc_status st = qc_kernel_bind(kd, args, na, argv, 32, err, errlen);
    if (st != QC_OK) return st;
    return qc_kernel_call_reference(kd, argv, err, errlen);
}

static qc_status quantize(int s, const float *w, int64_t n, int64_t k, float act_scale, qc_packed_weight *out,
                          qc_reason *why) {
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .scheme = scheme_name[s],
                            .act_scale = act_scale};
    memset(why, 0, sizeof *why);
    return F->quantize(&req, out, why);
}

/* One recipe at one shape: packing, dequantize, code stats, the kernel
 * against its f32 definition (bit-exact) and against a float64 oracle. */
static void test_shape(int s, int64_t m, int64_t n, int64_t k, uint64_t seed) {
    char ctx[96];
    snprintf(ctx, sizeof ctx, "%s m=%lld n=%lld k=%lld", scheme_name[s], (long long)m, (long long)n, (long long)k);
    const int64_t G = s == S_BLOCK ? 128 : k, ng = cdiv(k, G);
    float *w = malloc((size_t)(n * k) * sizeof(float)), *wd = malloc((size_t)(n * k) * sizeof(float));
    float *x = malloc((size_t)(m * k) * sizeof(float)), *xdec = malloc((size_t)(m * k) * sizeof(float));
    float *as = malloc((size_t)(m * ng) * sizeof(float)), *y = malloc((size_t)(m * n) * sizeof(float));
    qc_test_fill(w, (size_t)(n * k), seed, 0.05f);
    qc_test_fill(x, (size_t)(m * k), seed * 7 + 1, 2.0f);
    /* outliers and a few tiny values, so scales differ across rows/blocks
     * and subnormal codes occur */
    for (int64_t j = 0; j < n; j += 5) w[j * k + (j * 7) % k] *= 20.f;
    for (int64_t j = 0; j < n; j += 3) w[j * k + (j * 11) % k] *= 1e-4f;
    for (int64_t i = 0; i < m; i += 2) x[i * k + (i * 13) % k] *= 30.f;
    float static_as = 0.f;
    if (is_static(s)) { /* half the dynamic tensor scale: the top of x saturates */
        float amax = 0.f;
        for (int64_t i = 0; i < m * k; i++) amax = fmaxf(amax, fabsf(x[i]));
        static_as = amax / 448.f * 0.5f;
    }

    qc_packed_weight pw;
    qc_reason why;
    qc_status st = quantize(s, w, n, k, static_as, &pw, &why);
    CHECK(st == QC_OK, "%s: quantize failed: %s %s", ctx, why.code, why.text);
    if (st != QC_OK) goto done;

    /* packing: buffers, sizes, scheme, no padding */
    const int64_t n_scales = is_tensor(s) ? 1 : s == S_BLOCK ? cdiv(n, 128) * cdiv(k, 128) : n;
    const qc_buffer *bq = buffer(&pw, "qweight"), *bs = buffer(&pw, "scales"), *ba = buffer(&pw, "act_scale");
    CHECK(pw.scheme == (uint32_t)s, "%s: scheme %u", ctx, pw.scheme);
    CHECK(pw.n == n && pw.k == k && pw.n_padded == n && pw.k_padded == k, "%s: shape", ctx);
    CHECK(pw.group_size == (s == S_BLOCK ? 128u : 0u), "%s: group_size %u", ctx, pw.group_size);
    CHECK(pw.n_buffers == (is_static(s) ? 3u : 2u), "%s: %u buffers", ctx, pw.n_buffers);
    CHECK(bq && bq->bytes == (size_t)(n * k) && bq->category == QC_MEM_WEIGHTS && bq->dtype == QC_DT_F8_E4M3,
          "%s: qweight buffer", ctx);
    CHECK(bs && bs->bytes == (size_t)n_scales * 4 && bs->category == QC_MEM_SCALES && bs->dtype == QC_DT_F32,
          "%s: scales buffer", ctx);
    CHECK(is_static(s) ? ba && ba->bytes == 4 && *(const float *)ba->data == static_as : ba == NULL,
          "%s: act_scale buffer", ctx);
    size_t padding = 0;
    for (uint32_t i = 0; i < pw.n_buffers; i++) padding += pw.buffers[i].category == QC_MEM_PADDING;
    CHECK(padding == 0, "%s: fp8 packs without padding", ctx);
    if (!bq || !bs) goto done_packed;
    const uint8_t *q = bq->data;
    const float *ws = bs->data;

    /* scales are amax/448 of each range (ragged blocks: the part inside),
     * codes are E4M3(w / s) */
    {
        float *amax = calloc((size_t)n_scales, sizeof(float));
        for (int64_t j = 0; j < n; j++)
            for (int64_t t = 0; t < k; t++) {
                int64_t i = wscale_index(s, j, t, k);
                amax[i] = fmaxf(amax[i], fabsf(w[j * k + t]));
            }
        int bad = 0;
        for (int64_t i = 0; i < n_scales; i++) bad += ws[i] != scale_for(amax[i]);
        CHECK(bad == 0, "%s: %d scales differ from amax/448", ctx, bad);
        bad = 0;
        for (int64_t j = 0; j < n; j++)
            for (int64_t t = 0; t < k; t++)
                bad += q[j * k + t] != qc_fp8_e4m3_encode(w[j * k + t] / ws[wscale_index(s, j, t, k)]);
        CHECK(bad == 0, "%s: %d codes differ from E4M3(w / s)", ctx, bad);
        free(amax);
    }

    /* dequantize: decode * s, within E4M3's rounding of the source */
    CHECK(F->dequantize(&pw, wd) == QC_OK, "%s: dequantize", ctx);
    {
        int bad = 0;
        for (int64_t j = 0; j < n; j++)
            for (int64_t t = 0; t < k; t++) {
                float sc = ws[wscale_index(s, j, t, k)], v = w[j * k + t], d = wd[j * k + t];
                bad += d != qc_fp8_e4m3_decode(q[j * k + t]) * sc;
                /* half a unit: 2^-4 relative for normals, 2^-10 * s in the subnormal range */
                bad += fabs((double)v - d) > fmax(fabs(v) * 0x1p-4, sc * 0x1p-10) * (1 + 0x1p-20);
            }
        CHECK(bad == 0, "%s: %d dequantized elements off", ctx, bad);
    }

    /* code stats: no saturation against its own source; utilization is the
     * distinct finite codes over 254; a source twice as large saturates */
    {
        double sat = -1, util = -1;
        CHECK(F->code_stats(&pw, w, &sat, &util) == QC_OK, "%s: code_stats", ctx);
        unsigned char seen[256] = {0};
        unsigned used = 0;
        for (int64_t i = 0; i < n * k; i++) seen[q[i]] = 1;
        for (int c = 0; c < 256; c++) used += seen[c] && (c & 0x7f) != 0x7f;
        CHECK(sat == 0.0, "%s: saturation %g against the source", ctx, sat);
        CHECK(util == used / 254.0 && util > 0 && util <= 1, "%s: utilization %g, want %g", ctx, util, used / 254.0);
        float *w2 = malloc((size_t)(n * k) * sizeof(float));
        size_t want = 0;
        for (int64_t j = 0; j < n; j++)
            for (int64_t t = 0; t < k; t++) {
                int flag;
                w2[j * k + t] = w[j * k + t] * 2.f;
                qc_fp8_e4m3_encode_sat(w2[j * k + t] / ws[wscale_index(s, j, t, k)], &flag);
                want += (size_t)flag;
            }
        CHECK(F->code_stats(&pw, w2, &sat, NULL) == QC_OK, "%s: code_stats 2x", ctx);
        CHECK(want > 0 && sat == (double)want / (double)(n * k), "%s: saturation %g, want %zu/%lld", ctx, sat, want,
              (long long)(n * k));
        free(w2);
    }

    /* the kernel, chosen by the core from the weight's scheme */
    qc_problem p = {.struct_size = sizeof p, .m = m, .n = n, .k = k, .phase = QC_PHASE_PREFILL, .scheme = pw.scheme};
    const qc_kernel_desc *kd = NULL;
    int ok = qc_select_format(rt, F, &p, 0, &kd, &why);
    CHECK(ok && kd && strcmp(kd->id, kernel_id[s]) == 0, "%s: selected %s (%s %s)", ctx, kd ? kd->id : "none",
          why.code, why.text);
    if (!kd) goto done_packed;
    char err[256] = "";
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN;
    st = call_linear(kd, &pw, x, y, m, err, sizeof err);
    CHECK(st == QC_OK, "%s: call: %s", ctx, err);

    quantize_act(s, x, m, k, static_as, xdec, as);
    /* the format's quantize_activations gives the same operands, scaled */
    {
        float *xo = malloc((size_t)(m * k) * sizeof(float));
        CHECK(F->quantize_activations(&pw, x, m, xo) == QC_OK, "%s: quantize_activations", ctx);
        int bad = 0;
        for (int64_t i = 0; i < m * k; i++) bad += xo[i] != xdec[i] * as[(i / k) * ng + (i % k) / G];
        CHECK(bad == 0, "%s: %d activations differ from decode(E4M3(x / a_s)) * a_s", ctx, bad);
        free(xo);
    }
    if (is_static(s)) {
        int sats = 0;
        for (int64_t i = 0; i < m * k; i++) sats += fabsf(xdec[i]) == 448.f;
        CHECK(sats > 0, "%s: the static scale was meant to saturate some activations", ctx);
    }

    /* (a) bit-exact against the definition transcribed naively in f32:
     * per K group an f32 sum in increasing t, then y = sum * (a_s * w_s), or
     * for blocks acc = fmaf(sum, a_s * w_s, acc) group after group */
    {
        int bad = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float acc = 0.f;
                for (int64_t g = 0; g < ng; g++) {
                    float part = 0.f;
                    for (int64_t t = g * G; t < k && t < (g + 1) * G; t++)
                        part += xdec[i * k + t] * qc_fp8_e4m3_decode(q[j * k + t]);
                    float sc = as[i * ng + g] * ws[wscale_index(s, j, g * G, k)];
                    acc = s == S_BLOCK ? fmaf(part, sc, acc) : part * sc;
                }
                if (acc != y[i * n + j]) {
                    if (bad++ < 3)
                        fprintf(stderr, "  %s: y[%lld,%lld] = %.9g, definition %.9g\n", ctx, (long long)i,
                                (long long)j, (double)y[i * n + j], (double)acc);
                }
            }
        CHECK(bad == 0, "%s: %d outputs differ from the f32 definition", ctx, bad);
    }

    /* (b) float64 oracle from the dequantized weights and the recipe's
     * activation quantization.  Tolerance: every f32 rounding the kernel
     * makes is within 2^-24 relative, and there are at most k + ng + 3 of
     * them along any term's path (Higham's recursive-summation bound), so
     * |y - oracle| <= (k + ng + 3) * 2^-24 * sum|terms|; we allow twice that.
     * The oracle must also be far from the result with unquantized x. */
    {
        int bad = 0;
        double worst = 0, act_effect = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double o = 0, mag = 0, unq = 0;
                for (int64_t t = 0; t < k; t++) {
                    double term = (double)xdec[i * k + t] * (double)as[i * ng + t / G] * (double)wd[j * k + t];
                    o += term;
                    mag += fabs(term);
                    unq += (double)x[i * k + t] * (double)wd[j * k + t];
                }
                double tol = 2.0 * (double)(k + ng + 3) * 0x1p-24 * mag + 1e-30;
                double e = fabs((double)y[i * n + j] - o);
                if (e > tol) bad++;
                if (e / tol > worst) worst = e / tol;
                if (fabs(unq - o) / tol > act_effect) act_effect = fabs(unq - o) / tol;
            }
        CHECK(bad == 0, "%s: %d outputs outside the float64 tolerance (worst %.3g x tol)", ctx, bad, worst);
        CHECK(act_effect > 10, "%s: activation quantization changed y by at most %.3g x tol", ctx, act_effect);
    }

done_packed:
    release(&pw);
done:
    free(w);
    free(wd);
    free(x);
    free(xdec);
    free(as);
    free(y);
}

static void expect_refusal(const char *what, qc_status st, const qc_reason *why, const qc_packed_weight *out,
                           const char *code) {
    CHECK(st != QC_OK, "%s: accepted", what);
    CHECK(strcmp(why->code, code) == 0, "%s: reason '%s' (%s), want '%s'", what, why->code, why->text, code);
    CHECK(why->text[0] != 0, "%s: a reason sentence", what);
    CHECK(out->n_buffers == 0, "%s: out left with %u buffers", what, out->n_buffers);
}

static void test_refusals(void) {
    float *w = malloc(128 * 128 * sizeof(float));
    qc_test_fill(w, 128 * 128, 99, 1.f);
    qc_packed_weight pw;
    qc_reason why;

    /* quantize refuses what no kernel takes, with the core's reason codes */
    expect_refusal("N=100", quantize(S_CHANNEL, w, 100, 64, 0, &pw, &why), &why, &pw, "align_n");
    expect_refusal("K=40", quantize(S_BLOCK, w, 64, 40, 0, &pw, &why), &why, &pw, "align_k");
    expect_refusal("K=0", quantize(S_TENSOR, w, 64, 0, 0, &pw, &why), &why, &pw, "shape");
    expect_refusal("block + static", quantize(S_BLOCK, w, 64, 64, 0.5f, &pw, &why), &why, &pw, "scheme");
    expect_refusal("static without a scale", quantize(S_TENSOR_STATIC, w, 64, 64, 0, &pw, &why), &why, &pw, "scale");
    expect_refusal("negative act_scale", quantize(S_CHANNEL, w, 64, 64, -1.f, &pw, &why), &why, &pw, "scale");
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = 64, .k = 64, .scheme = "int8"};
    memset(&why, 0, sizeof why);
    expect_refusal("scheme int8", F->quantize(&req, &pw, &why), &why, &pw, "scheme");
    req.scheme = "block";
    req.group_size = 64;
    memset(&why, 0, sizeof why);
    expect_refusal("block group 64", F->quantize(&req, &pw, &why), &why, &pw, "group");
    req.scheme = NULL;
    req.group_size = 128;
    memset(&why, 0, sizeof why);
    expect_refusal("channel group 128", F->quantize(&req, &pw, &why), &why, &pw, "group");
    req.group_size = 0;
    w[77] = NAN;
    memset(&why, 0, sizeof why);
    expect_refusal("NaN weight", F->quantize(&req, &pw, &why), &why, &pw, "value");
    w[77] = INFINITY;
    memset(&why, 0, sizeof why);
    expect_refusal("inf weight", F->quantize(&req, &pw, &why), &why, &pw, "value");
    w[77] = 0.5f;

    /* default scheme, and a static scale from calibration statistics */
    memset(&why, 0, sizeof why);
    CHECK(F->quantize(&req, &pw, &why) == QC_OK && pw.scheme == S_CHANNEL, "default scheme is channel (%u)",
          pw.scheme);
    release(&pw);
    float absmax[64];
    for (int i = 0; i < 64; i++) absmax[i] = 0.1f * (float)(i + 1);
    req.scheme = "tensor_static";
    req.act_absmax = absmax;
    memset(&why, 0, sizeof why);
    CHECK(F->quantize(&req, &pw, &why) == QC_OK && pw.scheme == S_TENSOR_STATIC, "tensor_static from act_absmax: %s",
          why.text);
    const qc_buffer *ba = buffer(&pw, "act_scale");
    CHECK(ba && *(const float *)ba->data == absmax[63] / 448.f, "static scale = max(act_absmax)/448");
    release(&pw);
    /* an all-zero weight quantizes (scale 1, codes 0) and dequantizes to zero */
    float zeros[16 * 16] = {0}, back[16 * 16];
    req = (qc_quant_request){.struct_size = sizeof req, .w = zeros, .n = 16, .k = 16, .scheme = "block"};
    memset(&why, 0, sizeof why);
    CHECK(F->quantize(&req, &pw, &why) == QC_OK, "all-zero weight: %s", why.text);
    CHECK(F->dequantize(&pw, back) == QC_OK && back[0] == 0 && back[255] == 0, "all-zero weight dequantizes to 0");
    CHECK(*(const float *)buffer(&pw, "scales")->data == 1.f, "all-zero block has scale 1");
    release(&pw);
    free(w);

    /* eligibility: the format's own callback and the core's selection */
    struct {
        int64_t n, k;
        uint32_t group, scheme;
        const char *code;
    } bad[] = {
        {100, 64, 0, S_CHANNEL, "align_n"}, {64, 100, 0, S_CHANNEL, "align_k"}, {64, 72, 0, S_BLOCK, "align_k"},
        {64, 64, 64, S_BLOCK, "group"},     {64, 64, 0, 9, "scheme"},           {64, 64, 128, S_TENSOR, "group"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qc_problem p = {.struct_size = sizeof p, .m = 8, .n = bad[i].n, .k = bad[i].k,
                        .group_size = bad[i].group, .scheme = bad[i].scheme};
        qc_reason r1 = {{0}, {0}}, r2 = {{0}, {0}};
        CHECK(!F->eligible(&p, &r1) && strcmp(r1.code, bad[i].code) == 0, "eligible n=%lld k=%lld: '%s' want '%s'",
              (long long)bad[i].n, (long long)bad[i].k, r1.code, bad[i].code);
        const qc_kernel_desc *kd = NULL;
        CHECK(!qc_select_format(rt, F, &p, 0, &kd, &r2) && !kd, "select n=%lld k=%lld accepted", (long long)bad[i].n,
              (long long)bad[i].k);
        /* the core checks group sizes itself; the rest must come through */
        CHECK(strcmp(r2.code, bad[i].code) == 0, "select n=%lld k=%lld: '%s' (%s), want '%s'", (long long)bad[i].n,
              (long long)bad[i].k, r2.code, r2.text, bad[i].code);
    }
    /* each scheme id selects its own kernel; a kernel refuses other schemes */
    for (uint32_t s = 0; s < S_COUNT; s++) {
        qc_problem p = {.struct_size = sizeof p, .m = 8, .n = 256, .k = 384, .scheme = s};
        if (s == S_BLOCK) p.group_size = 128;
        const qc_kernel_desc *kd = NULL;
        qc_reason r = {{0}, {0}};
        int ok = qc_select_format(rt, F, &p, 0, &kd, &r);
        const char *want = kernel_id[s ? s : S_CHANNEL];
        CHECK(ok && kd && strcmp(kd->id, want) == 0, "scheme %u selects %s, want %s (%s)", s, kd ? kd->id : "none",
              want, r.text);
    }
    qc_problem p = {.struct_size = sizeof p, .m = 8, .n = 256, .k = 384, .scheme = S_CHANNEL};
    qc_reason r = {{0}, {0}};
    const qc_kernel_desc *blk = qc_kernel_find(rt, "fp8.linear_block_ref");
    CHECK(blk && !qc_select_kernel(blk, F, &p, 0, &r) && strcmp(r.code, "scheme") == 0,
          "block kernel refuses a channel weight: '%s'", r.code);
}

/* Signatures: names and types, and what binding reports when a buffer is
 * missing (a dynamic weight handed to a static kernel). */
static void test_signatures(void) {
    static const char *const dyn[] = {"x", "w.qweight", "w.scales", "y", "m", "n", "k"};
    static const char *const sta[] = {"x", "w.qweight", "w.scales", "w.act_scale", "y", "m", "n", "k"};
    for (int s = 1; s < S_COUNT; s++) {
        const qc_kernel_desc *kd = qc_kernel_find(rt, kernel_id[s]);
        CHECK(kd != NULL, "kernel %s registered", kernel_id[s]);
        if (!kd) continue;
        const char *const *names = is_static(s) ? sta : dyn;
        uint32_t np = is_static(s) ? 8 : 7;
        CHECK(kd->n_params == np && kd->reference && !kd->cuda_source && kd->eligible, "%s: descriptor", kd->id);
        for (uint32_t i = 0; i < np && i < kd->n_params; i++) {
            qc_param_type want = names[i][0] == 'm' || names[i][0] == 'n' || names[i][0] == 'k' ? QC_PARAM_I64
                                                                                                  : QC_PARAM_PTR;
            CHECK(strcmp(kd->params[i].name, names[i]) == 0 && kd->params[i].type == want, "%s param %u: %s", kd->id,
                  i, kd->params[i].name);
        }
    }
    float w[16 * 16], x[16], y[16];
    qc_test_fill(w, 256, 5, 1.f);
    qc_test_fill(x, 16, 6, 1.f);
    qc_packed_weight pw;
    qc_reason why;
    if (quantize(S_TENSOR, w, 16, 16, 0, &pw, &why) != QC_OK) {
        CHECK(0, "quantize 16x16: %s", why.text);
        return;
    }
    char err[256] = "";
    qc_status st = call_linear(qc_kernel_find(rt, "fp8.linear_tensor_static_ref"), &pw, x, y, 1, err, sizeof err);
    CHECK(st != QC_OK, "a static kernel bound without w.act_scale");
    CHECK_CONTAINS(err, "w.act_scale");
    release(&pw);
}

/* The format descriptor as registered. */
static void test_descriptor(void) {
    CHECK(F->kind == QC_FORMAT_LINEAR && F->weight_dtype == QC_DT_F8_E4M3 && F->act_dtype == QC_DT_F8_E4M3,
          "fp8 dtypes");
    CHECK(F->quantize && F->dequantize && F->eligible && F->code_stats && F->quantize_activations, "fp8 functions");
    CHECK(F->n_align == 16 && F->k_align == 16, "fp8 alignment %u %u", F->n_align, F->k_align);
    char missing[128];
    qc_format_missing(rt, F, missing, sizeof missing);
    CHECK(strcmp(missing, "") == 0, "fp8 has GPU kernels now (tests/gpu/test_fp8_unit.c), yet lacks '%s'", missing);
}

int main(void) {
    char err[512] = "";
    qc_runtime_options opt = {.struct_size = sizeof opt, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                              .skip_env = 1};
    rt = qc_runtime_open(&opt, err, sizeof err);
    CHECK(rt != NULL, "runtime: %s", err);
    F = rt ? qc_format_find(rt, "fp8") : NULL;
    CHECK(F != NULL, "fp8 format loaded from %s", QC_TEST_PLUGIN_DIR);
    if (!F) {
        if (rt) qc_runtime_close(rt);
        return qc_test_finish("fp8_plugin_test");
    }
    test_descriptor();
    test_signatures();
    test_refusals();

    /* shapes: single partial block, exact blocks, ragged on N and on K (and
     * both), several K groups, M of 1 (decode) and more */
    static const int64_t shapes[][3] = {
        {1, 16, 16},   {2, 128, 128}, {3, 144, 272}, {4, 272, 400}, {1, 400, 1040},
        {5, 48, 512},  {7, 256, 384}, {2, 32, 1024}, {1, 128, 144},
    };
    uint64_t seed = 11;
    for (int s = 1; s < S_COUNT; s++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            test_shape(s, shapes[i][0], shapes[i][1], shapes[i][2], seed++);

    qc_runtime_close(rt);
    return qc_test_finish("fp8_plugin_test");
}
