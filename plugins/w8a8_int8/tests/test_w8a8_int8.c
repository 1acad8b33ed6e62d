/* test_w8a8_int8.c - w8a8_int8: quantizer, SmoothQuant folding, reference kernel through libffi, refusals. */
#include <math.h>
#include <stdint.h>

#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

/* The test's own statement of the format (docs/formats/w8a8_int8.md), kept
 * independent of the plugin: rintf in the default rounding mode is ties-to-even. */
static int8_t code_of(float v, float s) {
    float t = v / s;
    if (t > 127.0f) t = 127.0f;
    if (t < -127.0f) t = -127.0f;
    return (int8_t)rintf(t);
}

static void free_packed(qc_packed_weight *w) {
    for (uint32_t i = 0; i < w->n_buffers; i++) qc_aligned_free(w->buffers[i].data);
    w->n_buffers = 0;
}

static const qc_buffer *buf(const qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers; i++)
        if (strcmp(w->buffers[i].name, name) == 0) return &w->buffers[i];
    return NULL;
}

/* Per-token activation quantization of one row: x' = x / s into xs, codes
 * into xq; returns sx. */
static float act_row(const float *x, const float *s, int64_t k, float *xs, int8_t *xq) {
    float amax = 0.0f;
    for (int64_t t = 0; t < k; t++) {
        xs[t] = s ? x[t] / s[t] : x[t];
        if (fabsf(xs[t]) > amax) amax = fabsf(xs[t]);
    }
    float sx = amax / 127.0f;
    if (sx == 0.0f) sx = 1.0f; /* a zero row gets scale 1 and codes 0 */
    for (int64_t t = 0; t < k; t++) xq[t] = code_of(xs[t], sx);
    return sx;
}

/* quantize_activations: exactly xq * sx (* s), and a float GEMM with
 * dequantize's weights lands within f32 rounding of the kernel's output. */
static void check_activations(const float *x, const float *y, const qc_packed_weight *w, int64_t m, int64_t n,
                              int64_t k, const qc_format_desc *f) {
    const qc_buffer *sb = buf(w, "smooth");
    const float *s = sb ? sb->data : NULL, *sw = buf(w, "scales")->data;
    const int8_t *q = buf(w, "qweight")->data;
    float *xo = malloc((size_t)(m * k) * 4), *dq = malloc((size_t)(n * k) * 4), *xs = malloc((size_t)k * 4);
    int8_t *xq = malloc((size_t)k);
    CHECK(f->quantize_activations(w, x, m, xo) == QC_OK, "quantize_activations");
    CHECK(f->dequantize(w, dq) == QC_OK, "dequantize");
    int bad_x = 0, bad_y = 0;
    for (int64_t i = 0; i < m; i++) {
        float sx = act_row(x + i * k, s, k, xs, xq);
        for (int64_t t = 0; t < k; t++) {
            float want = s ? (float)xq[t] * sx * s[t] : (float)xq[t] * sx;
            bad_x += memcmp(&xo[i * k + t], &want, 4) != 0;
        }
        for (int64_t o = 0; o < n; o++) {
            double g = 0, mag = 0;
            for (int64_t t = 0; t < k; t++) {
                g += (double)xo[i * k + t] * dq[o * k + t];
                mag += fabs((double)xq[t] * q[o * k + t]) * sx * sw[o];
            }
            bad_y += fabs(g - y[i * n + o]) > 16.0 * 0x1p-24 * mag; /* a few roundings per product */
        }
    }
    CHECK(bad_x == 0, "%d activations differ from xq * sx%s", bad_x, s ? " * s" : "");
    CHECK(bad_y == 0, "%d float-GEMM outputs differ from the kernel beyond f32 rounding", bad_y);
    free(xo), free(dq), free(xs), free(xq);
}

static qc_runtime *rt;
static const qc_format_desc *fmt;
static const qc_kernel_desc *kern, *kern_s; /* scheme 1 (plain) and scheme 2 (smoothed) */

/* Call the reference kernel through qc_kernel_bind + libffi. */
static int call_kernel(const float *x, float *y, int64_t m, int64_t n, int64_t k, const qc_packed_weight *w) {
    /* as a dispatcher would: the weight's scheme picks the kernel, its buffers bind by name */
    qc_problem p = {.struct_size = sizeof p, .m = m, .n = n, .k = k, .scheme = w->scheme};
    qc_reason why = {{0}, {0}};
    const qc_kernel_desc *kd = NULL;
    if (!qc_select_format(rt, fmt, &p, 0, &kd, &why)) {
        fprintf(stderr, "select: %s %s\n", why.code, why.text);
        return -1;
    }
    qc_named_arg args[4 + QC_MAX_WEIGHT_BUFFERS];
    char names[QC_MAX_WEIGHT_BUFFERS][32];
    void *ptrs[QC_MAX_WEIGHT_BUFFERS];
    size_t na = 0;
    args[na++] = (qc_named_arg){"x", &x};
    args[na++] = (qc_named_arg){"y", &y};
    args[na++] = (qc_named_arg){"m", &m};
    args[na++] = (qc_named_arg){"n", &n};
    args[na++] = (qc_named_arg){"k", &k};
    for (uint32_t i = 0; i < w->n_buffers && na < sizeof args / sizeof args[0]; i++) {
        snprintf(names[i], sizeof names[i], "w.%s", w->buffers[i].name);
        ptrs[i] = w->buffers[i].data;
        args[na++] = (qc_named_arg){names[i], &ptrs[i]};
    }
    void *argv[16];
    char err[256];
    if (qc_kernel_bind(kd, args, na, argv, 16, err, sizeof err) != QC_OK) {
        fprintf(stderr, "bind: %s\n", err);
        return -1;
    }
    if (qc_kernel_call_reference(kd, argv, err, sizeof err) != QC_OK) {
        fprintf(stderr, "call: %s\n", err);
        return -1;
    }
    return 0;
}

/* Expected kernel output, exactly: quantize x per token as documented,
 * accumulate the integer dot product exactly (int64), check it fits INT32,
 * then (float)acc * sx * sw in f32.  Also returns the float64 oracle
 * x.W^T (original weights) and a rigorous bound on |y - oracle|. */
static void expect(const float *x, const float *wsrc, const qc_packed_weight *w, int64_t m, int64_t n, int64_t k,
                   float *y_exact, double *y64, double *bound, int *acc_overflow) {
    const int8_t *q = buf(w, "qweight")->data;
    const float *sw = buf(w, "scales")->data;
    const qc_buffer *sb = buf(w, "smooth");
    const float *s = sb ? sb->data : NULL;
    int8_t *xq = malloc((size_t)k);
    float *xs = malloc((size_t)k * sizeof(float));
    const double c = 0.5 + 1e-5; /* half a step plus the f32 division error of a code */
    *acc_overflow = 0;
    for (int64_t i = 0; i < m; i++) {
        float sx = act_row(x + i * k, s, k, xs, xq);
        for (int64_t o = 0; o < n; o++) {
            int64_t acc = 0;
            double ref = 0.0, b = 0.0, mag = 0.0;
            for (int64_t t = 0; t < k; t++) {
                acc += (int64_t)xq[t] * q[o * k + t];
                ref += (double)x[i * k + t] * (double)wsrc[o * k + t];
                double wf = (double)wsrc[o * k + t] * (s ? (double)s[t] : 1.0); /* folded weight */
                b += fabs((double)xs[t]) * sw[o] * c + fabs(wf) * sx * c + (double)sx * sw[o] * c * c;
                mag += fabs((double)xs[t] * wf);
            }
            if (acc > INT32_MAX || acc < INT32_MIN) *acc_overflow = 1;
            y_exact[i * n + o] = (float)acc * sx * sw[o];
            y64[i * n + o] = ref;
            /* f32 epilogue (3 roundings) and smoothing divisions/multiplies (2) */
            bound[i * n + o] = b * (1.0 + 1e-6) + 8.0 * 0x1p-24 * (mag + b);
        }
    }
    free(xq);
    free(xs);
}

static qc_status quantize(const float *wsrc, int64_t n, int64_t k, const float *absmax, const char *scheme,
                          qc_packed_weight *out, qc_reason *why) {
    qc_quant_request req = {.struct_size = sizeof req, .w = wsrc, .n = n, .k = k, .act_absmax = absmax,
                            .scheme = scheme};
    memset(why, 0, sizeof *why);
    return fmt->quantize(&req, out, why);
}

static void test_registration(void) {
    CHECK(fmt != NULL, "format w8a8_int8 not registered");
    CHECK(kern != NULL && kern_s != NULL, "kernels w8a8_int8.linear_ref / linear_smooth_ref not registered");
    if (!fmt || !kern || !kern_s) return;
    CHECK(fmt->quantize && fmt->dequantize && fmt->eligible && fmt->code_stats && fmt->quantize_activations,
          "format functions missing");
    CHECK(kern->reference != NULL && kern_s->reference != NULL, "no reference");
    static const char *names[] = {"x", "w.qweight", "w.scales", "y", "m", "n", "k"};
    static const char *names_s[] = {"x", "w.qweight", "w.scales", "w.smooth", "y", "m", "n", "k"};
    CHECK(kern->n_params == 7 && kern_s->n_params == 8, "n_params %u %u", kern->n_params, kern_s->n_params);
    for (uint32_t i = 0; i < kern->n_params && i < 7; i++)
        CHECK(strcmp(kern->params[i].name, names[i]) == 0, "param %u is %s", i, kern->params[i].name);
    for (uint32_t i = 0; i < kern_s->n_params && i < 8; i++)
        CHECK(strcmp(kern_s->params[i].name, names_s[i]) == 0, "smooth param %u is %s", i, kern_s->params[i].name);
    char missing[256];
    qc_format_missing(rt, fmt, missing, sizeof missing);
    CHECK(strstr(missing, "quantize") == NULL && strstr(missing, "reference") == NULL, "missing: %s", missing);
}

/* Quantizer layout and numerics, kernel exactness and the float64 oracle. */
static void test_shapes(void) {
    static const int64_t shapes[][3] = {{1, 16, 16}, {3, 32, 64}, {17, 48, 272}, {5, 64, 1024}, {2, 16, 4096}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        float *w = malloc((size_t)(n * k) * sizeof(float)), *x = malloc((size_t)(m * k) * sizeof(float));
        float *y = malloc((size_t)(m * n) * sizeof(float)), *ye = malloc((size_t)(m * n) * sizeof(float));
        float *dq = malloc((size_t)(n * k) * sizeof(float));
        double *y64 = malloc((size_t)(m * n) * sizeof(double)), *bd = malloc((size_t)(m * n) * sizeof(double));
        qc_test_fill(w, (size_t)(n * k), 11 + si, 0.05f);
        qc_test_fill(x, (size_t)(m * k), 101 + si, 2.0f);
        qc_packed_weight pw;
        qc_reason why;
        qc_status st = quantize(w, n, k, NULL, NULL, &pw, &why);
        CHECK(st == QC_OK, "quantize %lldx%lld: %s %s", (long long)n, (long long)k, why.code, why.text);
        if (st != QC_OK) goto next;
        const qc_buffer *bq = buf(&pw, "qweight"), *bs = buf(&pw, "scales");
        CHECK(pw.n_buffers == 2 && bq && bs && !buf(&pw, "smooth"), "buffers: %u", pw.n_buffers);
        CHECK(bq->bytes == (size_t)(n * k) && bq->dtype == QC_DT_I8 && bq->category == QC_MEM_WEIGHTS, "qweight");
        CHECK(bs->bytes == (size_t)n * 4 && bs->dtype == QC_DT_F32 && bs->category == QC_MEM_SCALES, "scales");
        CHECK(pw.n == n && pw.k == k && pw.n_padded == n && pw.k_padded == k && pw.scheme == 1, "header");
        CHECK(fabs(pw.logical_bits - (8.0 + 32.0 / (double)k)) < 1e-12, "logical_bits %g", pw.logical_bits);
        const int8_t *q = bq->data;
        const float *sw = bs->data;
        int bad_scale = 0, bad_code = 0, row_max_ok = 1;
        for (int64_t i = 0; i < n; i++) {
            float amax = 0.0f;
            for (int64_t t = 0; t < k; t++) amax = fmaxf(amax, fabsf(w[i * k + t]));
            if (sw[i] != (amax / 127.0f > 0.0f ? amax / 127.0f : 1.0f)) bad_scale++;
            int rm = 0;
            for (int64_t t = 0; t < k; t++) {
                if (q[i * k + t] != code_of(w[i * k + t], sw[i])) bad_code++;
                if (abs(q[i * k + t]) > rm) rm = abs(q[i * k + t]);
            }
            if (rm != 127) row_max_ok = 0;
        }
        CHECK(bad_scale == 0, "%d scales differ from amax/127", bad_scale);
        CHECK(bad_code == 0, "%d codes differ from rne(w/s)", bad_code);
        CHECK(row_max_ok, "a row's largest code is not 127");
        CHECK(fmt->dequantize(&pw, dq) == QC_OK, "dequantize");
        int bad_dq = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t t = 0; t < k; t++)
                if (dq[i * k + t] != (float)q[i * k + t] * sw[i] || fabs(dq[i * k + t] - w[i * k + t]) > sw[i] * 0.50001)
                    bad_dq++;
        CHECK(bad_dq == 0, "%d dequantized values off", bad_dq);

        CHECK(call_kernel(x, y, m, n, k, &pw) == 0, "kernel call");
        int ovf;
        expect(x, w, &pw, m, n, k, ye, y64, bd, &ovf);
        CHECK(!ovf, "test data overflowed INT32");
        int not_exact = 0, out_of_bound = 0;
        double num = 0, den = 0;
        for (int64_t i = 0; i < m * n; i++) {
            if (memcmp(&y[i], &ye[i], 4) != 0) not_exact++;
            if (fabs((double)y[i] - y64[i]) > bd[i]) out_of_bound++;
            num += ((double)y[i] - y64[i]) * ((double)y[i] - y64[i]);
            den += y64[i] * y64[i];
        }
        CHECK(not_exact == 0, "shape %lld/%lld/%lld: %d outputs differ from exact INT32 accumulation", (long long)m,
              (long long)n, (long long)k, not_exact);
        CHECK(out_of_bound == 0, "shape %lld/%lld/%lld: %d outputs beyond the quantization bound", (long long)m,
              (long long)n, (long long)k, out_of_bound);
        /* 8-bit per-token/per-channel on Gaussian data: ~1% relative error */
        CHECK(sqrt(num / den) < 0.03, "relative error %g", sqrt(num / den));
        check_activations(x, y, &pw, m, n, k, fmt);
        free_packed(&pw);
    next:
        free(w), free(x), free(y), free(ye), free(dq), free(y64), free(bd);
    }
}

/* Partial sums far beyond 2^24, and K at the INT32 limit in both signs. */
static void test_int32_accumulation(void) {
    const int64_t n = 16, k = 133136; /* the largest multiple of 16 <= 133144 */
    float *w = malloc((size_t)(n * k) * sizeof(float)), *x = malloc(2 * (size_t)k * sizeof(float));
    for (int64_t i = 0; i < n * k; i++) w[i] = 1.0f;
    for (int64_t t = 0; t < k; t++) x[t] = 1.0f, x[k + t] = -1.0f;
    /* row 1 varies so the sum is odd and not a round number */
    for (int64_t t = 0; t < k; t++) w[k + t] = (t % 3 == 0) ? -0.5f : 1.0f;
    qc_packed_weight pw;
    qc_reason why;
    qc_status st = quantize(w, n, k, NULL, NULL, &pw, &why);
    CHECK(st == QC_OK, "quantize at K=%lld: %s", (long long)k, why.text);
    if (st == QC_OK) {
        float y[32], ye[32];
        double y64[32], bd[32];
        int ovf;
        CHECK(call_kernel(x, y, 2, n, k, &pw) == 0, "kernel");
        expect(x, w, &pw, 2, n, k, ye, y64, bd, &ovf);
        CHECK(!ovf, "exact sum must fit INT32 at K_MAX");
        CHECK(memcmp(y, ye, sizeof y) == 0, "K=%lld: kernel %.9g vs exact %.9g (row 0), %.9g vs %.9g (row 1)",
              (long long)k, y[0], ye[0], y[16 + 1], ye[16 + 1]);
        /* acc = K * 127 * 127 = 2147350544: its f32 value times (1/127)^2 */
        CHECK(y[0] == (float)2147350544 * (1.0f / 127.0f) * (1.0f / 127.0f), "y[0] = %.9g", y[0]);
        CHECK(y[16] == -y[0], "negative extreme %.9g", y[16]);
        free_packed(&pw);
    }
    qc_problem p = {.struct_size = sizeof p, .m = 1, .n = 16, .k = k};
    qc_reason r = {{0}, {0}};
    CHECK(fmt->eligible(&p, &r) == 1, "K=%lld eligible: %s", (long long)k, r.text);
    p.k = k + 16;
    CHECK(fmt->eligible(&p, &r) == 0, "K beyond INT32 range accepted");
    CHECK(strcmp(r.code, "shape") == 0, "code %s", r.code);
    free(w);
    free(x);

    /* A shape where partial sums pass 2^24 with varied codes. */
    const int64_t m2 = 4, n2 = 32, k2 = 8192;
    float *w2 = malloc((size_t)(n2 * k2) * 4), *x2 = malloc((size_t)(m2 * k2) * 4);
    uint64_t s = 77;
    for (int64_t i = 0; i < n2 * k2; i++) w2[i] = 0.9f + 0.1f * qc_test_uniform(&s); /* codes ~114..127 */
    for (int64_t i = 0; i < m2 * k2; i++) x2[i] = 0.9f + 0.1f * qc_test_uniform(&s);
    st = quantize(w2, n2, k2, NULL, NULL, &pw, &why);
    CHECK(st == QC_OK, "quantize: %s", why.text);
    if (st == QC_OK) {
        float y[128], ye[128];
        double y64[128], bd[128];
        int ovf;
        CHECK(call_kernel(x2, y, m2, n2, k2, &pw) == 0, "kernel");
        expect(x2, w2, &pw, m2, n2, k2, ye, y64, bd, &ovf);
        CHECK(memcmp(y, ye, sizeof y) == 0, "large partial sums not exact");
        int oob = 0;
        for (int i = 0; i < 128; i++) oob += fabs((double)y[i] - y64[i]) > bd[i];
        CHECK(oob == 0, "%d beyond bound", oob);
        free_packed(&pw);
    }
    free(w2);
    free(x2);
}

/* SmoothQuant: factors, folding, kernel division, quality on outlier channels. */
static void test_smoothquant(void) {
    const int64_t m = 32, n = 64, k = 256, mc = 128;
    float *w = malloc((size_t)(n * k) * 4), *xc = malloc((size_t)(mc * k) * 4), *x = malloc((size_t)(m * k) * 4);
    float *am = malloc((size_t)k * 4), *y = malloc((size_t)(m * n) * 4), *ye = malloc((size_t)(m * n) * 4);
    float *yp = malloc((size_t)(m * n) * 4), *dq = malloc((size_t)(n * k) * 4);
    double *y64 = malloc((size_t)(m * n) * 8), *bd = malloc((size_t)(m * n) * 8);
    qc_test_fill(w, (size_t)(n * k), 5, 0.02f);
    qc_test_fill(xc, (size_t)(mc * k), 6, 1.0f);
    qc_test_fill(x, (size_t)(m * k), 7, 1.0f);
    /* a few outlier input channels, as LLM activations have */
    for (int64_t t = 0; t < k; t += 37) {
        for (int64_t i = 0; i < mc; i++) xc[i * k + t] *= 60.0f;
        for (int64_t i = 0; i < m; i++) x[i * k + t] *= 60.0f;
    }
    for (int64_t t = 0; t < k; t++) {
        am[t] = 0.0f;
        for (int64_t i = 0; i < mc; i++) am[t] = fmaxf(am[t], fabsf(xc[i * k + t]));
    }
    am[3] = 0.0f; /* a dead channel keeps factor 1 */
    qc_packed_weight pw, pp;
    qc_reason why;
    qc_status st = quantize(w, n, k, am, NULL, &pw, &why);
    CHECK(st == QC_OK, "quantize with act_absmax: %s", why.text);
    qc_status st2 = quantize(w, n, k, am, "no_smooth", &pp, &why);
    CHECK(st2 == QC_OK && pp.n_buffers == 2 && pp.scheme == 1, "no_smooth: %s", why.text);
    if (st != QC_OK || st2 != QC_OK) goto out;
    const qc_buffer *sb = buf(&pw, "smooth");
    CHECK(pw.scheme == 2 && pw.n_buffers == 3 && sb && sb->bytes == (size_t)k * 4 && sb->dtype == QC_DT_F32,
          "smooth buffer");
    CHECK(fabs(pw.logical_bits - (8.0 + 32.0 / k + 32.0 / n)) < 1e-12, "logical bits %g", pw.logical_bits);
    const float *s = sb->data;
    int bad_s = 0;
    for (int64_t t = 0; t < k; t++) {
        float wmax = 0.0f;
        for (int64_t i = 0; i < n; i++) wmax = fmaxf(wmax, fabsf(w[i * k + t]));
        double want = am[t] == 0.0f ? 1.0 : sqrt((double)am[t]) / sqrt(fmax(wmax, 1e-5));
        if (want < 1e-5) want = 1e-5;
        if (fabs(s[t] - want) > 1e-6 * want) bad_s++;
    }
    CHECK(bad_s == 0, "%d smoothing factors differ from sqrt(a/wmax)", bad_s);
    CHECK(s[3] == 1.0f, "dead channel factor %g", s[3]);
    CHECK(s[0] > 3.0f * s[1], "outlier channel not smoothed: %g vs %g", s[0], s[1]);
    /* folded weights: codes of W*s per row */
    const int8_t *q = buf(&pw, "qweight")->data;
    const float *sw = buf(&pw, "scales")->data;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float amax = 0.0f;
        for (int64_t t = 0; t < k; t++) amax = fmaxf(amax, fabsf(w[i * k + t] * s[t]));
        if (sw[i] != amax / 127.0f) bad++;
        for (int64_t t = 0; t < k; t++) bad += q[i * k + t] != code_of(w[i * k + t] * s[t], sw[i]);
    }
    CHECK(bad == 0, "%d folded codes/scales differ", bad);
    CHECK(fmt->dequantize(&pw, dq) == QC_OK, "dequantize");
    int bad_dq = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t t = 0; t < k; t++) bad_dq += fabs(dq[i * k + t] - w[i * k + t]) > sw[i] / s[t] * 0.5001;
    CHECK(bad_dq == 0, "%d dequantized (unsmoothed) weights off", bad_dq);

    CHECK(call_kernel(x, y, m, n, k, &pw) == 0, "kernel smooth");
    int ovf;
    expect(x, w, &pw, m, n, k, ye, y64, bd, &ovf);
    int nx = 0, oob = 0;
    double e_s = 0, e_p = 0, den = 0;
    for (int64_t i = 0; i < m * n; i++) {
        nx += memcmp(&y[i], &ye[i], 4) != 0;
        oob += fabs((double)y[i] - y64[i]) > bd[i];
        e_s += ((double)y[i] - y64[i]) * ((double)y[i] - y64[i]);
        den += y64[i] * y64[i];
    }
    CHECK(nx == 0, "%d smoothed outputs not exact", nx);
    check_activations(x, y, &pw, m, n, k, fmt);
    CHECK(oob == 0, "%d smoothed outputs beyond bound", oob);
    CHECK(call_kernel(x, yp, m, n, k, &pp) == 0, "kernel plain");
    for (int64_t i = 0; i < m * n; i++) e_p += ((double)yp[i] - y64[i]) * ((double)yp[i] - y64[i]);
    printf("smoothquant: relative error %.4g smoothed vs %.4g plain\n", sqrt(e_s / den), sqrt(e_p / den));
    CHECK(e_s < 0.5 * e_p, "smoothing did not reduce the error: %g vs %g", sqrt(e_s / den), sqrt(e_p / den));
out:
    if (st == QC_OK) free_packed(&pw);
    if (st2 == QC_OK) free_packed(&pp);

    /* scheme handling */
    st = quantize(w, n, k, am, "smoothquant:0.75", &pw, &why);
    CHECK(st == QC_OK && pw.scheme == 2, "alpha 0.75: %s", why.text);
    if (st == QC_OK) {
        const float *s75 = buf(&pw, "smooth")->data;
        float wmax = 0.0f;
        for (int64_t i = 0; i < n; i++) wmax = fmaxf(wmax, fabsf(w[i * k]));
        double want = pow(am[0], 0.75) / pow(wmax, 0.25);
        CHECK(fabs(s75[0] - want) < 1e-6 * want, "alpha 0.75 factor %g want %g", s75[0], want);
        free_packed(&pw);
    }
    st = quantize(w, n, k, am, "smoothquant:1.5", &pw, &why);
    CHECK(st != QC_OK && strcmp(why.code, "scheme") == 0 && pw.n_buffers == 0, "alpha 1.5: %s", why.code);
    st = quantize(w, n, k, NULL, "smoothquant", &pw, &why);
    CHECK(st != QC_OK && strcmp(why.code, "calib") == 0, "smoothquant without stats: %s", why.code);
    st = quantize(w, n, k, NULL, "bogus", &pw, &why);
    CHECK(st != QC_OK && strcmp(why.code, "scheme") == 0, "unknown scheme: %s", why.code);
    am[5] = NAN;
    st = quantize(w, n, k, am, NULL, &pw, &why);
    CHECK(st != QC_OK && strcmp(why.code, "calib") == 0, "NaN absmax: %s", why.code);
    am[5] = -1.0f;
    st = quantize(w, n, k, am, NULL, &pw, &why);
    CHECK(st != QC_OK && strcmp(why.code, "calib") == 0, "negative absmax: %s", why.code);
    free(w), free(xc), free(x), free(am), free(y), free(ye), free(yp), free(dq), free(y64), free(bd);
}

static void test_refusals(void) {
    qc_reason r;
    qc_problem p = {.struct_size = sizeof p, .m = 4, .n = 4096, .k = 4096, .phase = QC_PHASE_DECODE};
    const qc_kernel_desc *chosen = NULL;
    CHECK(qc_select_format(rt, fmt, &p, 0, &chosen, &r) == 1 && chosen == kern, "4096x4096 on CPU: %s", r.text);
    p.scheme = 1;
    CHECK(qc_select_format(rt, fmt, &p, 0, &chosen, &r) == 1 && chosen == kern, "scheme 1: %s", r.text);
    p.scheme = 2;
    CHECK(qc_select_format(rt, fmt, &p, 0, &chosen, &r) == 1 && chosen == kern_s, "scheme 2: %s", r.text);
    p.scheme = 7;
    CHECK(qc_select_format(rt, fmt, &p, 0, &chosen, &r) == 0 && strcmp(r.code, "scheme") == 0, "scheme 7: %s", r.code);
    p.scheme = 0;
    static const struct { int64_t n, k; uint32_t g; const char *code; } bad[] = {
        {17, 64, 0, "align_n"}, {4104, 4096, 0, "align_n"}, {64, 24, 0, "align_k"},
        {64, 4100, 0, "align_k"}, {64, 64, 128, "group"}, {0, 64, 0, "shape"}, {64, 200000, 0, "shape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&r, 0, sizeof r);
        p.n = bad[i].n, p.k = bad[i].k, p.group_size = bad[i].g;
        CHECK(fmt->eligible(&p, &r) == 0 && strcmp(r.code, bad[i].code) == 0, "n=%lld k=%lld g=%u: got '%s'",
              (long long)bad[i].n, (long long)bad[i].k, bad[i].g, r.code);
        CHECK(r.text[0] != 0, "no sentence");
        memset(&r, 0, sizeof r);
        CHECK(qc_select_format(rt, fmt, &p, 0, NULL, &r) == 0 && strcmp(r.code, bad[i].code) == 0,
              "select n=%lld k=%lld: '%s'", (long long)bad[i].n, (long long)bad[i].k, r.code);
    }
    float w[64 * 24];
    qc_test_fill(w, 64 * 24, 3, 1.0f);
    qc_packed_weight pw;
    qc_status st = quantize(w, 64, 24, NULL, NULL, &pw, &r);
    CHECK(st != QC_OK && strcmp(r.code, "align_k") == 0 && pw.n_buffers == 0, "quantize k=24: %s", r.code);
    st = quantize(w, 24, 64, NULL, NULL, &pw, &r);
    CHECK(st != QC_OK && strcmp(r.code, "align_n") == 0, "quantize n=24: %s", r.code);
    float w2[16 * 16];
    qc_test_fill(w2, 256, 4, 1.0f);
    w2[77] = INFINITY;
    st = quantize(w2, 16, 16, NULL, NULL, &pw, &r);
    CHECK(st != QC_OK && strcmp(r.code, "nonfinite") == 0, "inf weight: %s", r.code);
    w2[77] = 0.5f;
    qc_quant_request req = {.struct_size = sizeof req, .w = w2, .n = 16, .k = 16, .act_scale = 0.25f};
    st = fmt->quantize(&req, &pw, &r);
    CHECK(st != QC_OK && strcmp(r.code, "scheme") == 0, "static act scale: %s", r.code);
    req.act_scale = 0, req.group_size = 64;
    st = fmt->quantize(&req, &pw, &r);
    CHECK(st != QC_OK && strcmp(r.code, "group") == 0, "group: %s", r.code);
    /* dequantize refuses a weight that is not its own */
    qc_packed_weight alien = {.struct_size = sizeof alien, .format = "mxfp4", .n = 16, .k = 16};
    float out[256];
    CHECK(fmt->dequantize(&alien, out) != QC_OK, "dequantized another format's weight");
}

/* Rows: a non-finite row gives NaN, a zero row gives zeros; others unaffected. */
static void test_special_rows(void) {
    const int64_t m = 3, n = 16, k = 32;
    float w[16 * 32], x[3 * 32], y[3 * 16], ye[3 * 16];
    double y64[48], bd[48];
    qc_test_fill(w, 512, 8, 1.0f);
    qc_test_fill(x, 96, 9, 1.0f);
    for (int t = 0; t < 32; t++) x[32 + t] = 0.0f, w[5 * 32 + t] = 0.0f;
    qc_packed_weight pw;
    qc_reason r;
    if (quantize(w, n, k, NULL, NULL, &pw, &r) != QC_OK) {
        CHECK(0, "quantize: %s", r.text);
        return;
    }
    int ovf;
    expect(x, w, &pw, m, n, k, ye, y64, bd, &ovf);
    x[2 * 32 + 5] = NAN;
    CHECK(call_kernel(x, y, m, n, k, &pw) == 0, "kernel");
    int ok0 = 1, ok1 = 1, ok2 = 1;
    for (int o = 0; o < 16; o++) {
        ok0 &= y[o] == ye[o];
        ok1 &= y[16 + o] == 0.0f;
        ok2 &= isnan(y[32 + o]);
    }
    CHECK(ok0 && ok1 && ok2, "rows: finite %d zero %d nan %d", ok0, ok1, ok2);
    const float *sw = buf(&pw, "scales")->data;
    const int8_t *q = buf(&pw, "qweight")->data;
    int zero_codes = 1;
    for (int t = 0; t < 32; t++) zero_codes &= q[5 * 32 + t] == 0;
    CHECK(sw[5] == 1.0f && zero_codes && y[5] == 0.0f, "zero weight row: scale %g, output %g", sw[5], y[5]);
    /* the smoothed signature with no factor table answers NaN, not a crash */
    {
        const void *xp = x, *qp = q, *sp = sw, *np = NULL;
        float *yp = y;
        int64_t mm = 1, nn = n, kk = k;
        void *argv[8] = {&xp, &qp, &sp, &np, &yp, &mm, &nn, &kk};
        char e[128];
        CHECK(qc_kernel_call_reference(kern_s, argv, e, sizeof e) == QC_OK && isnan(y[0]) && isnan(y[15]),
              "smooth kernel with NULL factors: %g", y[0]);
    }
    float xo[3 * 32];
    CHECK(fmt->quantize_activations(&pw, x, m, xo) == QC_OK, "quantize_activations");
    CHECK(xo[32] == 0.0f && isnan(xo[64]) && isnan(xo[95]) && !isnan(xo[0]), "activation rows: zero, NaN");
    free_packed(&pw);
}

/* Exact ties (scale 1: row max 127) round half to even, in weights and activations. */
static void test_ties(void) {
    const int64_t n = 16, k = 16;
    static const float v[16] = {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 126.5f, -126.5f, 4.5f, 0, 1, -1, 5.5f, -5.5f};
    static const int want[16] = {127, 0, 2, 2, 0, -2, -2, 4, 126, -126, 4, 0, 1, -1, 6, -6};
    float w[16 * 16], x[16], y[16];
    for (int i = 0; i < 16; i++)
        for (int t = 0; t < 16; t++) w[i * 16 + t] = v[t];
    memcpy(x, v, sizeof x);
    qc_packed_weight pw;
    qc_reason r;
    if (quantize(w, n, k, NULL, NULL, &pw, &r) != QC_OK) {
        CHECK(0, "quantize: %s", r.text);
        return;
    }
    const int8_t *q = buf(&pw, "qweight")->data;
    CHECK(((const float *)buf(&pw, "scales")->data)[0] == 1.0f, "scale 1");
    for (int t = 0; t < 16; t++) CHECK(q[t] == want[t], "weight %g -> %d, want %d", v[t], q[t], want[t]);
    /* activation codes equal the weight codes, so y = sum want^2 exactly */
    int64_t acc = 0;
    for (int t = 0; t < 16; t++) acc += want[t] * want[t];
    CHECK(call_kernel(x, y, 1, n, k, &pw) == 0, "kernel");
    CHECK(y[0] == (float)acc && y[15] == (float)acc, "activation ties: y %g want %lld", y[0], (long long)acc);
    free_packed(&pw);
}

static void test_code_stats(void) {
    const int64_t n = 64, k = 4096;
    float *w = malloc((size_t)(n * k) * 4);
    qc_test_fill(w, (size_t)(n * k), 21, 1.0f);
    qc_packed_weight pw;
    qc_reason r;
    if (quantize(w, n, k, NULL, NULL, &pw, &r) != QC_OK) {
        CHECK(0, "quantize: %s", r.text);
        free(w);
        return;
    }
    double sat = -1, util = -1;
    CHECK(fmt->code_stats(&pw, w, &sat, &util) == QC_OK, "code_stats");
    CHECK(sat == 0.0, "absmax scaling saturates nothing, got %g", sat);
    CHECK(util > 0.9 && util <= 1.0, "utilization %g", util);
    /* Halve the scales: everything beyond half the row max is clipped now. */
    float *sw = (float *)buf(&pw, "scales")->data;
    size_t want = 0;
    for (int64_t i = 0; i < n; i++) {
        sw[i] *= 0.5f;
        for (int64_t t = 0; t < k; t++) want += fabs((double)w[i * k + t] / sw[i]) >= 127.5;
    }
    CHECK(fmt->code_stats(&pw, w, &sat, &util) == QC_OK, "code_stats");
    CHECK(fabs(sat - (double)want / (double)(n * k)) < 1e-12 && sat > 0.001, "saturated %g want %g", sat,
          (double)want / (double)(n * k));
    free_packed(&pw);
    free(w);
}

int main(void) {
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "runtime: %s", err);
    if (!rt) return qc_test_finish("w8a8_int8");
    fmt = qc_format_find(rt, "w8a8_int8");
    kern = qc_kernel_find(rt, "w8a8_int8.linear_ref");
    kern_s = qc_kernel_find(rt, "w8a8_int8.linear_smooth_ref");
    test_registration();
    if (fmt && kern && kern_s) {
        test_shapes();
        test_int32_accumulation();
        test_smoothquant();
        test_refusals();
        test_special_rows();
        test_ties();
        test_code_stats();
    }
    qc_runtime_close(rt);
    return qc_test_finish("w8a8_int8");
}
