/* test_mxfp4.c - mxfp4: OCP scale rule, E2M1 rounding, layout, reference kernel through libffi, refusals. */
#include <math.h>
#include <stdint.h>

#include "../../common/qc_bf16.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

/* The test's own statement of MXFP4 (docs/formats/mxfp4.md), in double. */
static const double E2M1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};

static int scale_code(const float *v) { /* E8M0 byte of a 32-block of finite values */
    double amax = 0;
    for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(v[i]));
    if (amax == 0) return 0;
    int se = (int)floor(log2(amax)) - 2;
    return (se < -127 ? -127 : se > 127 ? 127 : se) + 127;
}

static int e2m1_code(double p) { /* nearest by distance, ties to the even code, saturating */
    int best = 0;
    double a = fabs(p), bd = INFINITY;
    if (a > 6) a = 6;
    for (int c = 0; c < 8; c++) {
        double d = fabs(a - E2M1[c]);
        if (d < bd || (d == bd && (c & 1) == 0)) bd = d, best = c;
    }
    return best | (signbit(p) ? 8 : 0);
}

static double scale_value(int e) { return e == 255 ? NAN : ldexp(1.0, e - 127); }

static void free_packed(qc_packed_weight *w) {
    for (uint32_t i = 0; i < w->n_buffers; i++) qc_aligned_free(w->buffers[i].data);
    w->n_buffers = 0;
}

static const qc_buffer *buf(const qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers; i++)
        if (strcmp(w->buffers[i].name, name) == 0) return &w->buffers[i];
    return NULL;
}

static int code_at(const uint8_t *q, int64_t k, int64_t i, int64_t t) { /* element t of row i */
    uint8_t b = q[i * (k / 2) + t / 2];
    return (t & 1) ? b >> 4 : b & 15;
}

static qc_runtime *rt;
static const qc_format_desc *fmt;
static const qc_kernel_desc *kern;

static qc_status quantize(const float *w, int64_t n, int64_t k, qc_packed_weight *out, qc_reason *why) {
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
    memset(why, 0, sizeof *why);
    return fmt->quantize(&req, out, why);
}

static int call_kernel(const float *x, float *y, int64_t m, int64_t n, int64_t k, const qc_packed_weight *w) {
    const void *qw = buf(w, "qweight")->data, *sc = buf(w, "scales")->data;
    qc_named_arg args[] = {{"x", &x}, {"y", &y},          {"m", &m},         {"n", &n},
                           {"k", &k}, {"w.qweight", &qw}, {"w.scales", &sc}};
    void *argv[16];
    char err[256];
    if (qc_kernel_bind(kern, args, 7, argv, 16, err, sizeof err) != QC_OK ||
        qc_kernel_call_reference(kern, argv, err, sizeof err) != QC_OK) {
        fprintf(stderr, "kernel: %s\n", err);
        return -1;
    }
    return 0;
}

static void test_registration(void) {
    CHECK(fmt && kern, "format or kernel missing");
    if (!fmt || !kern) return;
    CHECK(fmt->quantize && fmt->dequantize && fmt->eligible && fmt->code_stats && fmt->quantize_activations,
          "format functions missing");
    static const char *names[] = {"x", "w.qweight", "w.scales", "y", "m", "n", "k"};
    CHECK(kern->n_params == 7, "n_params %u", kern->n_params);
    for (uint32_t i = 0; i < kern->n_params && i < 7; i++)
        CHECK(strcmp(kern->params[i].name, names[i]) == 0, "param %u is %s", i, kern->params[i].name);
}

/* Layout, scale rule and element rounding against the test's statement. */
static void test_quantize_shapes(void) {
    static const int64_t shapes[][2] = {{8, 32}, {16, 64}, {24, 4096}, {8, 2880}, {64, 512}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], k = shapes[si][1];
        float *w = malloc((size_t)(n * k) * 4), *dq = malloc((size_t)(n * k) * 4);
        qc_test_fill(w, (size_t)(n * k), 31 + si, si == 2 ? 1e-3f : 1.0f);
        for (int64_t i = 0; i < n * k; i += 97) w[i] *= 20.0f; /* some spread between blocks */
        qc_packed_weight pw;
        qc_reason why;
        qc_status st = quantize(w, n, k, &pw, &why);
        CHECK(st == QC_OK, "quantize %lldx%lld: %s", (long long)n, (long long)k, why.text);
        if (st != QC_OK) {
            free(w), free(dq);
            continue;
        }
        const qc_buffer *bq = buf(&pw, "qweight"), *bs = buf(&pw, "scales");
        CHECK(pw.n_buffers == 2 && bq && bs, "buffers");
        CHECK(bq->bytes == (size_t)(n * k / 2) && bq->dtype == QC_DT_U8 && bq->category == QC_MEM_WEIGHTS, "qweight");
        CHECK(bs->bytes == (size_t)(n * k / 32) && bs->dtype == QC_DT_E8M0 && bs->category == QC_MEM_SCALES, "scales");
        CHECK(pw.group_size == 32 && pw.logical_bits == 4.25 && pw.n_padded == n && pw.k_padded == k, "header");
        const uint8_t *q = bq->data, *sc = bs->data;
        int bad_s = 0, bad_c = 0, bad_d = 0;
        CHECK(fmt->dequantize(&pw, dq) == QC_OK, "dequantize");
        for (int64_t i = 0; i < n; i++)
            for (int64_t b = 0; b < k / 32; b++) {
                const float *v = w + i * k + b * 32;
                int e = scale_code(v);
                bad_s += sc[i * (k / 32) + b] != e;
                for (int t = 0; t < 32; t++) {
                    int c = code_at(q, k, i, b * 32 + t);
                    bad_c += c != e2m1_code((double)v[t] / scale_value(e));
                    float want = (float)(E2M1[c] * scale_value(sc[i * (k / 32) + b]));
                    bad_d += memcmp(&dq[i * k + b * 32 + t], &want, 4) != 0;
                    bad_d += fabs(dq[i * k + b * 32 + t] - v[t]) > 2.0 * scale_value(e); /* |V/X| < 8 */
                }
            }
        CHECK(bad_s == 0, "%lldx%lld: %d scales differ from floor(log2 amax) - 2", (long long)n, (long long)k, bad_s);
        CHECK(bad_c == 0, "%lldx%lld: %d element codes differ", (long long)n, (long long)k, bad_c);
        CHECK(bad_d == 0, "%lldx%lld: %d decoded values differ", (long long)n, (long long)k, bad_d);
        free_packed(&pw);
        free(w), free(dq);
    }
}

/* Nibble order, ties, saturation and the scale clamps, by hand. */
static void test_edges(void) {
    const int64_t n = 8, k = 64;
    float w[8 * 64];
    qc_test_fill(w, 512, 2, 1.0f);
    /* row 0, block 0: X = 1 (amax 7.9 -> floor log2 = 2 -> shared 0) with the ties of E2M1 */
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, 7.9f, -0.25f, -0.75f, -5.0f, -6.5f, -0.0f, 1.0f, -6.0f};
    static const int want[] = {0, 2, 2, 4, 4, 6, 6, 7, 7, 8, 10, 14, 15, 8, 2, 15};
    for (int t = 0; t < 32; t++) w[t] = t < 16 ? ties[t] : 0.5f;
    /* row 0, block 1: all zero; row 1 block 0: subnormal amax; row 1 block 1: near FLT_MAX */
    for (int t = 0; t < 32; t++) w[32 + t] = 0.0f, w[64 + t] = t == 3 ? 1e-38f : t == 4 ? -4e-39f : 0.0f, w[96 + t] = (t & 1) ? -3e38f : 1.0f;
    /* row 2 block 0: amax 7 -> X = 1, stored 6 (spec saturation); block 1: amax exactly 4 */
    for (int t = 0; t < 32; t++) w[128 + t] = t == 0 ? 7.0f : 0.1f, w[160 + t] = t == 9 ? -4.0f : 0.5f;
    qc_packed_weight pw;
    qc_reason why;
    if (quantize(w, n, k, &pw, &why) != QC_OK) {
        CHECK(0, "quantize: %s", why.text);
        return;
    }
    const uint8_t *q = buf(&pw, "qweight")->data, *sc = buf(&pw, "scales")->data;
    CHECK(sc[0] == 127, "tie block scale %d", sc[0]);
    for (int t = 0; t < 16; t++) CHECK(code_at(q, k, 0, t) == want[t], "value %g -> code %d, want %d", ties[t], code_at(q, k, 0, t), want[t]);
    CHECK(q[0] == (uint8_t)(want[0] | want[1] << 4) && q[7] == (uint8_t)(want[14] | want[15] << 4),
          "element 2i low nibble, 2i+1 high: bytes %02x %02x", q[0], q[7]);
    CHECK(sc[1] == 0 && q[16] == 0 && q[31] == 0, "all-zero block: scale %d", sc[1]);
    CHECK(sc[2] == 0, "subnormal block scale %d (clamped to 2^-127)", sc[2]);
    /* 1e-38 / 2^-127 = 1.70 -> 1.5; -4e-39 / 2^-127 = -0.68 -> -0.5 */
    CHECK(code_at(q, k, 1, 3) == 3 && code_at(q, k, 1, 4) == 9, "subnormal element codes %d %d", code_at(q, k, 1, 3),
          code_at(q, k, 1, 4));
    CHECK(sc[3] == 252, "FLT_MAX-range block scale %d", sc[3]);
    CHECK(code_at(q, k, 1, 33) == 15 && code_at(q, k, 1, 32) == 0, "huge block codes %d %d", code_at(q, k, 1, 33), code_at(q, k, 1, 32));
    CHECK(sc[4] == 127 && code_at(q, k, 2, 0) == 7, "amax 7: scale %d code %d", sc[4], code_at(q, k, 2, 0));
    CHECK(sc[5] == 127 && code_at(q, k, 2, 32 + 9) == 14, "amax 4: scale %d code %d", sc[5], code_at(q, k, 2, 41));
    float dq[8 * 64];
    CHECK(fmt->dequantize(&pw, dq) == QC_OK, "dequantize");
    CHECK(dq[128] == 6.0f && dq[7] == 6.0f && dq[96 + 1] == -6.0f * 0x1p125f, "saturated values %g %g %g",
          dq[128], dq[7], dq[97]);
    CHECK(signbit(dq[13]) && dq[13] == 0.0f, "-0 kept");
    /* E8M0 0xFF is NaN for its block only */
    ((uint8_t *)buf(&pw, "scales")->data)[1] = 0xFF;
    CHECK(fmt->dequantize(&pw, dq) == QC_OK, "dequantize");
    int nan_ok = 1;
    for (int t = 0; t < 64; t++) nan_ok &= (t >= 32) == (isnan(dq[t]) != 0);
    CHECK(nan_ok, "scale 0xFF must decode its 32 elements (and only those) as NaN");
    free_packed(&pw);
}

static void test_kernel(void) {
    static const int64_t shapes[][3] = {{1, 8, 32}, {4, 16, 256}, {9, 24, 2880}, {2, 64, 4096}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        float *w = malloc((size_t)(n * k) * 4), *x = malloc((size_t)(m * k) * 4), *dq = malloc((size_t)(n * k) * 4);
        float *y = malloc((size_t)(m * n) * 4);
        qc_test_fill(w, (size_t)(n * k), 40 + si, 0.05f);
        qc_test_fill(x, (size_t)(m * k), 50 + si, 3.0f);
        qc_packed_weight pw;
        qc_reason why;
        if (quantize(w, n, k, &pw, &why) != QC_OK || fmt->dequantize(&pw, dq) != QC_OK) {
            CHECK(0, "quantize: %s", why.text);
            free(w), free(x), free(dq), free(y);
            continue;
        }
        CHECK(call_kernel(x, y, m, n, k, &pw) == 0, "kernel call");
        float *xo = malloc((size_t)(m * k) * 4);
        CHECK(fmt->quantize_activations(&pw, x, m, xo) == QC_OK, "quantize_activations");
        int bad_x = 0;
        for (int64_t i = 0; i < m * k; i++) {
            float want = qc_round_bf16(x[i]);
            bad_x += memcmp(&xo[i], &want, 4) != 0;
        }
        CHECK(bad_x == 0, "%d activations are not x rounded to bf16", bad_x);
        free(xo);
        int not_exact = 0, oob = 0, oob_orig = 0;
        double num = 0, den = 0;
        const double u = 0x1p-24, gamma = (double)k * u / (1.0 - (double)k * u);
        for (int64_t i = 0; i < m; i++)
            for (int64_t o = 0; o < n; o++) {
                float acc = 0.0f;
                double ref = 0, mag = 0, orig = 0, qerr = 0;
                for (int64_t t = 0; t < k; t++) {
                    float xb = qc_round_bf16(x[i * k + t]);
                    acc += xb * dq[o * k + t];
                    ref += (double)xb * dq[o * k + t];
                    mag += fabs((double)xb * dq[o * k + t]);
                    orig += (double)x[i * k + t] * w[o * k + t];
                    qerr += fabs((double)xb) * fabs((double)w[o * k + t] - dq[o * k + t]) +
                            fabs((double)x[i * k + t] - xb) * fabs((double)w[o * k + t]);
                }
                float got = y[i * n + o];
                not_exact += memcmp(&got, &acc, 4) != 0;
                oob += fabs((double)got - ref) > gamma * mag; /* recursive f32 summation bound */
                /* against the unquantized product: weight and bf16 rounding errors, then summation */
                oob_orig += fabs((double)got - orig) > qerr * (1.0 + 1e-9) + gamma * mag;
                num += (got - orig) * (got - orig);
                den += orig * orig;
            }
        CHECK(not_exact == 0, "%lld/%lld/%lld: %d outputs differ from in-order f32 accumulation", (long long)m,
              (long long)n, (long long)k, not_exact);
        CHECK(oob == 0, "%lld/%lld/%lld: %d outputs beyond gamma_k of the float64 oracle", (long long)m, (long long)n,
              (long long)k, oob);
        CHECK(oob_orig == 0, "%d outputs beyond the quantization-error bound vs the original weights", oob_orig);
        /* FP4 with power-of-two scales is coarse: ~12% RMS on Gaussian data (k >= 256, not one noisy block) */
        if (k >= 256) CHECK(sqrt(num / den) < 0.2, "relative error vs original weights %g", sqrt(num / den));
        if (si == 3) printf("mxfp4: relative error vs unquantized %.4g (m=%lld n=%lld k=%lld)\n", sqrt(num / den),
                            (long long)m, (long long)n, (long long)k);
        free_packed(&pw);
        free(w), free(x), free(dq), free(y);
    }
}

static void test_refusals(void) {
    qc_reason r;
    qc_problem p = {.struct_size = sizeof p, .m = 1, .n = 4096, .k = 4096, .phase = QC_PHASE_DECODE};
    const qc_kernel_desc *chosen = NULL;
    CHECK(qc_select_format(rt, fmt, &p, 0, &chosen, &r) == 1 && chosen == kern, "eligible: %s", r.text);
    p.group_size = 32;
    CHECK(fmt->eligible(&p, &r) == 1, "group 32: %s", r.text);
    static const struct { int64_t n, k; uint32_t g; const char *code; } bad[] = {
        {12, 64, 0, "align_n"}, {64, 48, 0, "align_k"}, {64, 2880 + 16, 0, "align_k"}, {64, 64, 64, "group"}, {64, 0, 0, "shape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&r, 0, sizeof r);
        p.n = bad[i].n, p.k = bad[i].k, p.group_size = bad[i].g;
        CHECK(fmt->eligible(&p, &r) == 0 && strcmp(r.code, bad[i].code) == 0 && r.text[0], "n=%lld k=%lld: '%s'",
              (long long)bad[i].n, (long long)bad[i].k, r.code);
        memset(&r, 0, sizeof r);
        CHECK(qc_select_format(rt, fmt, &p, 0, NULL, &r) == 0 && strcmp(r.code, bad[i].code) == 0, "select: '%s'", r.code);
    }
    float w[16 * 48];
    qc_test_fill(w, 16 * 48, 5, 1.0f);
    qc_packed_weight pw;
    CHECK(quantize(w, 16, 48, &pw, &r) != QC_OK && strcmp(r.code, "align_k") == 0 && pw.n_buffers == 0, "k=48: %s", r.code);
    CHECK(quantize(w, 12, 64, &pw, &r) != QC_OK && strcmp(r.code, "align_n") == 0, "n=12: %s", r.code);
    w[100] = NAN;
    CHECK(quantize(w, 8, 32, &pw, &r) != QC_OK && strcmp(r.code, "nonfinite") == 0, "NaN: %s", r.code);
    w[100] = 0.0f;
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = 8, .k = 32, .scheme = "ceil_pow2"};
    CHECK(fmt->quantize(&req, &pw, &r) != QC_OK && strcmp(r.code, "scheme") == 0, "scheme: %s", r.code);
    req.scheme = NULL, req.group_size = 16;
    CHECK(fmt->quantize(&req, &pw, &r) != QC_OK && strcmp(r.code, "group") == 0, "group 16: %s", r.code);
}

static void test_code_stats(void) {
    const int64_t n = 32, k = 1024;
    float *w = malloc((size_t)(n * k) * 4);
    qc_test_fill(w, (size_t)(n * k), 60, 1.0f);
    qc_packed_weight pw;
    qc_reason r;
    if (quantize(w, n, k, &pw, &r) != QC_OK) {
        CHECK(0, "quantize: %s", r.text);
        free(w);
        return;
    }
    double sat = -1, util = -1;
    CHECK(fmt->code_stats(&pw, w, &sat, &util) == QC_OK, "code_stats");
    const uint8_t *sc = buf(&pw, "scales")->data;
    size_t want = 0;
    for (int64_t i = 0; i < n * k; i++) want += fabs(w[i] / scale_value(sc[i / 32])) >= 7.0;
    CHECK(fabs(sat - (double)want / (double)(n * k)) < 1e-12, "saturated %g want %g", sat, (double)want / (n * k));
    CHECK(sat > 0.0 && sat < 0.05, "Gaussian blocks: some, not many, lose more than rounding at 6 (%g)", sat);
    CHECK(util == 1.0, "all 16 codes (with -0) occur in 32k Gaussian values: %g", util);
    printf("mxfp4: saturated %.4g, utilization %.4g\n", sat, util);
    free_packed(&pw);
    free(w);
}

int main(void) {
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "runtime: %s", err);
    if (!rt) return qc_test_finish("mxfp4");
    fmt = qc_format_find(rt, "mxfp4");
    kern = qc_kernel_find(rt, "mxfp4.linear_ref");
    test_registration();
    if (fmt && kern) {
        test_quantize_shapes();
        test_edges();
        test_kernel();
        test_refusals();
        test_code_stats();
    }
    qc_runtime_close(rt);
    return qc_test_finish("mxfp4");
}
