/* test_w4a16_quant.c - w4a16 quantizer, dequantizer, layout, code statistics, eligibility and refusals. */
#include "w4_test_util.h"

static const char *const scheme_names[] = {"sym", "asym", "fmin"};
static const uint32_t scheme_ids[] = {W4A16_SCHEME_SYM, W4A16_SCHEME_ASYM, W4A16_SCHEME_FMIN};
static const uint32_t groups[] = {32, 64, 128};

static unsigned clamp_code(float r) { return r < 0.0f ? 0u : r > 15.0f ? 15u : (unsigned)r; }

/* The documented quantizer, restated independently: parameters in f32,
 * rounded to f16, codes rounded (ties to even) against the rounded values. */
static void expect_group(uint32_t scheme, const float *w, uint32_t g, uint16_t *s16, uint8_t *z, uint16_t *m16,
                         uint8_t *codes) {
    float lo = w[0], hi = w[0], mx = w[0];
    for (uint32_t i = 1; i < g; i++) {
        lo = w[i] < lo ? w[i] : lo;
        hi = w[i] > hi ? w[i] : hi;
        if (fabsf(w[i]) > fabsf(mx)) mx = w[i];
    }
    *z = 8;
    *m16 = 0;
    if (scheme == W4A16_SCHEME_SYM) {
        *s16 = qc_f32_to_f16(mx / -8.0f);
        float s = qc_f16_to_f32(*s16);
        for (uint32_t i = 0; i < g; i++) codes[i] = s == 0.0f ? 8 : (uint8_t)clamp_code(rintf(w[i] / s) + 8.0f);
    } else if (scheme == W4A16_SCHEME_ASYM) {
        lo = lo > 0.0f ? 0.0f : lo;
        hi = hi < 0.0f ? 0.0f : hi;
        *s16 = qc_f32_to_f16((hi - lo) / 15.0f);
        float s = qc_f16_to_f32(*s16);
        if (s == 0.0f) {
            memset(codes, 8, g);
            return;
        }
        *z = (uint8_t)clamp_code(rintf(-lo / s));
        for (uint32_t i = 0; i < g; i++) codes[i] = (uint8_t)clamp_code(rintf(w[i] / s) + (float)*z);
    } else {
        *s16 = qc_f32_to_f16((hi - lo) / 15.0f);
        *m16 = qc_f32_to_f16(lo);
        float d = qc_f16_to_f32(*s16), m = qc_f16_to_f32(*m16);
        for (uint32_t i = 0; i < g; i++) codes[i] = d == 0.0f ? 0 : (uint8_t)clamp_code(rintf((w[i] - m) / d));
    }
}

/* The documented dequantization. */
static float expect_value(uint32_t scheme, unsigned q, uint16_t s16, unsigned z, uint16_t m16) {
    float s = qc_f16_to_f32(s16);
    if (scheme == W4A16_SCHEME_SYM) return s * (float)((int)q - 8);
    if (scheme == W4A16_SCHEME_ASYM) return s * (float)((int)q - (int)z);
    float t = s * (float)q;
    return t + qc_f16_to_f32(m16);
}

static void check_one(const w4t *t, uint32_t si, uint32_t g, int64_t n, int64_t k, const float *w) {
    uint32_t scheme = scheme_ids[si];
    qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = n, .k = k, .group_size = g,
                           .scheme = scheme_names[si]};
    qc_packed_weight pw;
    qc_reason why = {{0}, {0}};
    qc_status st = t->f->quantize(&rq, &pw, &why);
    CHECK(st == QC_OK, "%s g%u: %s %s", scheme_names[si], g, why.code, why.text);
    if (st != QC_OK) return;

    /* header and buffers as docs/formats/w4a16.md says */
    CHECK(pw.scheme == scheme && pw.group_size == g && pw.pack_version == W4A16_PACK_VERSION && pw.n == n && pw.k == k &&
              pw.n_padded == n && pw.k_padded == k && strcmp(pw.format, "w4a16") == 0,
          "header of %s g%u", scheme_names[si], g);
    double extra = scheme == W4A16_SCHEME_ASYM ? 8 : scheme == W4A16_SCHEME_FMIN ? 16 : 0;
    CHECK(fabs(pw.logical_bits - (4.0 + (16.0 + extra) / g)) < 1e-12, "logical_bits %g", pw.logical_bits);
    const qc_buffer *bq = w4t_buf(&pw, "qweight"), *bs = w4t_buf(&pw, "scales"), *bz = w4t_buf(&pw, "zeros"),
                    *bm = w4t_buf(&pw, "mins"), *bp = w4t_buf(&pw, "perm");
    size_t ng = (size_t)(k / g);
    CHECK(bq && bq->dtype == QC_DT_U4 && bq->bytes == (size_t)(n * k / 2) && bq->category == QC_MEM_WEIGHTS,
          "qweight buffer");
    CHECK(bs && bs->dtype == QC_DT_F16 && bs->bytes == (size_t)n * ng * 2 && bs->category == QC_MEM_SCALES,
          "scales buffer");
    CHECK((bz != NULL) == (scheme == W4A16_SCHEME_ASYM), "zeros buffer presence");
    if (bz) CHECK(bz->dtype == QC_DT_U8 && bz->bytes == (size_t)n * ng && bz->category == QC_MEM_ZEROS, "zeros");
    CHECK((bm != NULL) == (scheme == W4A16_SCHEME_FMIN), "mins buffer presence");
    if (bm) CHECK(bm->dtype == QC_DT_F16 && bm->bytes == (size_t)n * ng * 2 && bm->category == QC_MEM_ZEROS, "mins");
    CHECK(bp == NULL && pw.n_buffers == 2u + (scheme != W4A16_SCHEME_SYM), "buffer count %u", pw.n_buffers);
    if (!bq || !bs) goto out;

    /* every scale, zero, minimum and code equals the restated definition */
    const uint16_t *s16 = bs->data, *m16 = bm ? bm->data : NULL;
    const uint8_t *z8 = bz ? bz->data : NULL;
    int bad_param = 0, bad_code = 0;
    int64_t clipped = 0, over_half = 0;
    unsigned used = 0;
    float *deq = malloc(sizeof(float) * (size_t)(n * k));
    st = t->f->dequantize(&pw, deq);
    CHECK(st == QC_OK, "dequantize");
    int bad_value = 0;
    for (int64_t j = 0; j < n; j++)
        for (size_t gi = 0; gi < ng; gi++) {
            uint16_t es;
            uint8_t ez, codes[128];
            uint16_t em;
            const float *src = w + j * k + gi * g;
            expect_group(scheme, src, g, &es, &ez, &em, codes);
            size_t at = (size_t)j * ng + gi;
            if (s16[at] != es || (z8 && z8[at] != ez) || (m16 && m16[at] != em)) bad_param++;
            float s = qc_f16_to_f32(s16[at]);
            for (uint32_t i = 0; i < g; i++) {
                int64_t col = (int64_t)(gi * g + i);
                unsigned q = w4t_code(&pw, j, col);
                used |= 1u << q;
                if (q != codes[i]) bad_code++;
                float v = expect_value(scheme, q, s16[at], z8 ? z8[at] : 8, m16 ? m16[at] : 0);
                if (w4t_bits(v) != w4t_bits(deq[j * k + col])) bad_value++;
                /* unrounded code; beyond [-0.5, 15.5] means clamped */
                double u = scheme == W4A16_SCHEME_FMIN ? (src[i] - (double)qc_f16_to_f32(m16[at])) / s
                                                       : src[i] / (double)s + (z8 ? z8[at] : 8);
                if (s != 0.0f && (u < -0.5 || u > 15.5)) {
                    clipped++;
                } else if (s != 0.0f) {
                    /* not clipped: within half a step (plus f32 rounding) */
                    double err = fabs((double)src[i] - (double)v), half = fabs(s) * 0.5;
                    if (err > half * (1 + 1e-6) + 1e-6 * fabs(src[i])) over_half++;
                }
            }
        }
    CHECK(bad_param == 0, "%s g%u: %d groups with other scale/zero/min than the definition", scheme_names[si], g,
          bad_param);
    CHECK(bad_code == 0, "%s g%u: %d codes differ from the definition", scheme_names[si], g, bad_code);
    CHECK(bad_value == 0, "%s g%u: %d dequantized values differ from s*(q-z) / d*q+m", scheme_names[si], g,
          bad_value);
    CHECK(over_half == 0, "%s g%u: %lld unclipped values beyond half a step", scheme_names[si], g,
          (long long)over_half);

    double sat = -1, util = -1;
    st = t->f->code_stats(&pw, w, &sat, &util);
    CHECK(st == QC_OK, "code_stats");
    CHECK(fabs(sat - (double)clipped / (double)(n * k)) < 1e-12, "%s g%u: saturation %g, expected %g",
          scheme_names[si], g, sat, (double)clipped / (double)(n * k));
    int n_used = 0;
    for (int c = 0; c < 16; c++) n_used += (used >> c) & 1;
    CHECK(fabs(util - n_used / 16.0) < 1e-12, "utilization %g vs %d codes", util, n_used);
    CHECK(util >= 14 / 16.0, "%s g%u: random normal data uses only %g of the codes", scheme_names[si], g, util);
    free(deq);
out:
    t->f->release(&pw);
    CHECK(pw.n_buffers == 0, "release empties the weight");
}

/* Hand-made groups whose codes are known. */
static void check_crafted(const w4t *t) {
    enum { N = 8, K = 32 };
    float w[N * K];
    uint64_t seed = 7;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < K; i++) w[j * K + i] = 0.1f * qc_test_uniform(&seed);
    /* sym: -1 sets s = 0.125 and lands on code 0; 0.99/0.125 = 7.92 is
     * beyond 7.5, so it is clipped to 15 (one clipped value per row). */
    for (int j = 0; j < N; j++) {
        w[j * K + 3] = -1.0f;
        w[j * K + 20] = 0.99f;
    }
    qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = N, .k = K, .group_size = 32, .scheme = NULL};
    qc_packed_weight pw;
    qc_reason why;
    CHECK(t->f->quantize(&rq, &pw, &why) == QC_OK, "crafted sym: %s", why.text);
    CHECK(pw.scheme == W4A16_SCHEME_SYM, "NULL scheme is sym");
    const uint16_t *s16 = w4t_buf(&pw, "scales")->data;
    CHECK(qc_f16_to_f32(s16[0]) == 0.125f, "scale %g", qc_f16_to_f32(s16[0]));
    CHECK(w4t_code(&pw, 0, 3) == 0 && w4t_code(&pw, 0, 20) == 15, "codes %u %u", w4t_code(&pw, 0, 3),
          w4t_code(&pw, 0, 20));
    double sat, util;
    CHECK(t->f->code_stats(&pw, w, &sat, &util) == QC_OK && fabs(sat - 1.0 / 32) < 1e-12, "sat %g", sat);
    CHECK(t->f->code_stats(&pw, NULL, &sat, &util) == QC_ERR_INVALID, "code_stats needs the source");
    t->f->release(&pw);

    /* asym, all positive: the range is [0, max], so the zero point is 0 and
     * the largest value gets code 15 */
    for (int i = 0; i < N * K; i++) w[i] = 0.5f + 0.25f * (float)(i % 16) / 15.0f * 2.0f; /* 0.5 .. 1.0 */
    rq.scheme = "asym";
    CHECK(t->f->quantize(&rq, &pw, &why) == QC_OK, "crafted asym: %s", why.text);
    CHECK(((const uint8_t *)w4t_buf(&pw, "zeros")->data)[0] == 0, "zero point of a positive group");
    CHECK(w4t_code(&pw, 0, 15) == 15, "max gets 15");
    t->f->release(&pw);

    /* fmin on a constant row: d = 0, every code 0, every value m */
    for (int i = 0; i < N * K; i++) w[i] = 0.3f;
    rq.scheme = "fmin";
    CHECK(t->f->quantize(&rq, &pw, &why) == QC_OK, "crafted fmin: %s", why.text);
    float deq[N * K];
    CHECK(t->f->dequantize(&pw, deq) == QC_OK, "dequantize");
    CHECK(deq[5] == qc_f16_to_f32(qc_f32_to_f16(0.3f)) && w4t_code(&pw, 0, 5) == 0, "constant row %g", deq[5]);
    CHECK(t->f->code_stats(&pw, w, &sat, &util) == QC_OK && sat == 0 && util == 1.0 / 16, "stats %g %g", sat, util);
    t->f->release(&pw);
}

static void expect_refusal(const w4t *t, const char *what, qc_quant_request rq, const char *code) {
    qc_packed_weight pw;
    memset(&pw, 0x5a, sizeof pw);
    qc_reason why = {{0}, {0}};
    qc_status st = t->f->quantize(&rq, &pw, &why);
    CHECK(st != QC_OK, "%s was accepted", what);
    CHECK(strcmp(why.code, code) == 0, "%s: code '%s' (%s), expected '%s'", what, why.code, why.text, code);
    CHECK(why.text[0] != 0, "%s: no sentence", what);
    CHECK(pw.n_buffers == 0, "%s: output not left empty", what);
    if (st == QC_OK) t->f->release(&pw);
}

static void check_refusals(const w4t *t) {
    enum { N = 16, K = 256 };
    static float w[N * K];
    qc_test_fill(w, N * K, 3, 0.02f);
    qc_quant_request ok = {.struct_size = sizeof ok, .w = w, .n = N, .k = K, .group_size = 64, .scheme = "asym"};
    qc_quant_request r = ok;
    r.scheme = "nf4";
    expect_refusal(t, "unknown scheme", r, "scheme");
    r = ok;
    r.group_size = 48;
    expect_refusal(t, "group 48", r, "group");
    r = ok;
    r.k = 96; /* a multiple of 32, not of 64 */
    expect_refusal(t, "k=96 at g64", r, "group");
    r = ok;
    r.k = 80;
    r.group_size = 32;
    expect_refusal(t, "k=80", r, "align_k");
    r = ok;
    r.n = 12;
    expect_refusal(t, "n=12", r, "align_n");
    r = ok;
    r.n = 0;
    expect_refusal(t, "n=0", r, "shape");
    r = ok;
    r.w = NULL;
    expect_refusal(t, "no source", r, "invalid");
    r = ok;
    r.struct_size = 8;
    expect_refusal(t, "short request", r, "invalid");
    float saved = w[300];
    w[300] = NAN;
    expect_refusal(t, "NaN source", ok, "value");
    w[300] = INFINITY;
    expect_refusal(t, "inf source", ok, "value");
    w[300] = 1e30f;
    expect_refusal(t, "scale beyond f16", ok, "range");
    r = ok;
    r.scheme = "sym";
    expect_refusal(t, "sym scale beyond f16", r, "range");
    r.scheme = "fmin";
    w[300] = -1e6f; /* the minimum itself overflows f16 */
    expect_refusal(t, "fmin minimum beyond f16", r, "range");
    w[300] = saved;
}

static void expect_select(const w4t *t, int64_t n, int64_t k, uint32_t g, uint32_t scheme, const char *kernel,
                          const char *code) {
    qc_problem p = {.struct_size = sizeof p, .sm = 0, .m = 1, .n = n, .k = k, .group_size = g,
                    .phase = QC_PHASE_DECODE, .scheme = scheme};
    const qc_kernel_desc *kd = NULL;
    qc_reason why;
    int ok = qc_select_format(t->rt, t->f, &p, 0, &kd, &why);
    if (kernel) {
        CHECK(ok && kd && strcmp(kd->id, kernel) == 0, "n=%lld k=%lld g%u scheme 0x%x: %s (%s: %s)",
              (long long)n, (long long)k, g, scheme, kd ? kd->id : "no kernel", why.code, why.text);
    } else {
        CHECK(!ok && strcmp(why.code, code) == 0, "n=%lld k=%lld g%u scheme 0x%x: code '%s' (%s), expected %s",
              (long long)n, (long long)k, g, scheme, why.code, why.text, code);
    }
}

static void check_eligibility(const w4t *t) {
    const qc_format_desc *f = t->f;
    CHECK(f->n_group_sizes == 3 && f->default_group_size == 128 && f->n_align == 8 && f->k_align == 32,
          "descriptor");
    CHECK(f->quantize && f->dequantize && f->release && f->eligible && f->code_stats, "functions");
    expect_select(t, 4096, 4096, 0, 0, "w4a16.linear_sym", NULL);
    expect_select(t, 4096, 4096, 128, W4A16_SCHEME_SYM, "w4a16.linear_sym", NULL);
    expect_select(t, 4096, 4096, 32, W4A16_SCHEME_ASYM, "w4a16.linear_asym", NULL);
    expect_select(t, 576, 1536, 32, W4A16_SCHEME_FMIN, "w4a16.linear_fmin", NULL);
    expect_select(t, 4096, 4096, 128, W4A16_SCHEME_SYM | W4A16_SCHEME_PERM, "w4a16.linear_sym_perm", NULL);
    expect_select(t, 4096, 4096, 64, W4A16_SCHEME_ASYM | W4A16_SCHEME_PERM, "w4a16.linear_asym_perm", NULL);
    expect_select(t, 4096, 4096, 64, W4A16_SCHEME_FMIN | W4A16_SCHEME_PERM, "w4a16.linear_fmin_perm", NULL);
    expect_select(t, 4096, 4000, 128, 0, NULL, "group");  /* 4000 = 125 * 32, not a multiple of 128 */
    /* no group asked: 128, else the largest supported group dividing K (4000 -> 32) */
    expect_select(t, 4096, 4000, 0, 0, "w4a16.linear_sym", NULL);
    expect_select(t, 4096, 4000, 0, W4A16_SCHEME_ASYM, "w4a16.linear_asym", NULL);
    expect_select(t, 4096, 4001, 0, 0, NULL, "align_k"); /* not even a multiple of 32 */
    expect_select(t, 4096, 4001, 32, 0, NULL, "align_k");
    expect_select(t, 4100, 4096, 128, 0, NULL, "align_n");
    expect_select(t, 4096, 4096, 96, 0, NULL, "group");
    expect_select(t, 4096, 4096, 128, 7, NULL, "scheme");
    expect_select(t, 4096, 4096, 128, 0x21, NULL, "scheme");

    /* one kernel refuses another scheme's weight with a reason */
    const qc_kernel_desc *ks = qc_kernel_find(t->rt, "w4a16.linear_sym");
    CHECK(ks != NULL, "kernel w4a16.linear_sym");
    if (ks) {
        qc_problem p = {.struct_size = sizeof p, .m = 4, .n = 64, .k = 256, .group_size = 128,
                        .phase = QC_PHASE_PREFILL, .scheme = W4A16_SCHEME_FMIN};
        qc_reason why = {{0}, {0}};
        CHECK(!qc_select_kernel(ks, f, &p, 0, &why) && strcmp(why.code, "scheme") == 0, "code %s", why.code);
        CHECK_CONTAINS(why.text, "fmin");
        /* no CUDA version yet: the GPU path says so */
        p.scheme = W4A16_SCHEME_SYM;
        p.sm = 90;
        CHECK(!qc_select_kernel(ks, f, &p, 1, &why) && strcmp(why.code, "missing") == 0, "gpu: %s", why.code);
    }
    static const char *const ids[] = {"w4a16.linear_sym",      "w4a16.linear_asym",      "w4a16.linear_fmin",
                                      "w4a16.linear_sym_perm", "w4a16.linear_asym_perm", "w4a16.linear_fmin_perm"};
    for (int i = 0; i < 6; i++) {
        const qc_kernel_desc *kd = qc_kernel_find(t->rt, ids[i]);
        CHECK(kd && kd->reference && !kd->cuda_source && kd->eligible, "%s registered", ids[i]);
    }
    char missing[128];
    qc_format_missing(t->rt, f, missing, sizeof missing);
    CHECK(strstr(missing, "quantize") == NULL && strstr(missing, "reference") == NULL, "missing: %s", missing);
}

int main(void) {
    w4t t;
    if (w4t_open(&t) != 0) {
        CHECK(0, "open the w4a16 plugin");
        return qc_test_finish("w4a16_quant");
    }
    enum { N = 16, K = 512 };
    float *w = malloc(sizeof(float) * N * K);
    qc_test_fill(w, N * K, 11, 0.03f);
    /* rows of very different size, down to f16-subnormal scales */
    for (int j = 0; j < N; j++) {
        static const float row_scale[] = {1.0f, 1e-3f, 1e-6f, 40.0f};
        for (int i = 0; i < K; i++) w[j * K + i] *= row_scale[j % 4];
    }
    for (uint32_t si = 0; si < 3; si++)
        for (int gi = 0; gi < 3; gi++) check_one(&t, si, groups[gi], N, K, w);
    /* a source with a shifted mean (asym and fmin differ from sym there) */
    for (int i = 0; i < N * K; i++) w[i] = w[i] * 0.5f + 0.02f;
    for (uint32_t si = 0; si < 3; si++) check_one(&t, si, 32, N, K, w);
    free(w);
    check_crafted(&t);
    check_refusals(&t);
    check_eligibility(&t);
    qc_runtime_close(t.rt);
    return qc_test_finish("w4a16_quant");
}
