/* test_metrics.c - error metrics and effective bits per weight for every weight format. */
#include "qc_test.h"
#include "qcore/qcore.h"

static qc_runtime *rt;

/* Quantize random weights [n, k] with a recipe and check effective bits and
 * that the metrics agree with an independent computation. */
static void check(const char *format, const char *scheme, uint32_t group, int64_t n, int64_t k, double want_bits,
                  double min_sqnr) {
    const qc_format_desc *f = qc_format_find(rt, format);
    CHECK(f != NULL, "format %s missing", format);
    if (!f || !f->quantize) return;
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    float *dq = malloc(sizeof(float) * (size_t)(n * k));
    qc_test_fill(w, (size_t)(n * k), 99 + (uint64_t)k, 0.02f);
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .group_size = group, .scheme = scheme};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    CHECK(f->quantize(&req, &pw, &why) == QC_OK, "%s quantize: %s", format, why.text);
    qc_quant_metrics mt;
    char err[256];
    CHECK(qc_quant_measure(f, &pw, w, &mt, err, sizeof err) == QC_OK, "%s", err);
    CHECK(fabs(mt.effective_bits - want_bits) < 1e-9, "%s%s%s g%u: effective bits %.6f, want %.6f", format,
          scheme ? ":" : "", scheme ? scheme : "", group, mt.effective_bits, want_bits);
    f->dequantize(&pw, dq);
    double se = 0, ss = 0;
    for (int64_t i = 0; i < n * k; i++) {
        se += ((double)w[i] - dq[i]) * ((double)w[i] - dq[i]);
        ss += (double)w[i] * w[i];
    }
    CHECK(fabs(mt.mse - se / (double)(n * k)) <= 1e-12 * (1 + mt.mse), "%s mse", format);
    CHECK(se == 0 || fabs(mt.sqnr_db - 10 * log10(ss / se)) < 1e-9, "%s sqnr", format);
    CHECK(mt.sqnr_db >= min_sqnr, "%s: SQNR %.1f dB < %.1f", format, mt.sqnr_db, min_sqnr);
    CHECK(mt.cosine > 0.9 && mt.cosine <= 1.0000001, "%s cosine %.6f", format, mt.cosine);
    if (f->code_stats) {
        CHECK(mt.saturated_ratio >= 0 && mt.saturated_ratio <= 1, "%s saturation %g", format, mt.saturated_ratio);
        CHECK(mt.code_utilization > 0 && mt.code_utilization <= 1, "%s utilization %g", format, mt.code_utilization);
    }
    printf("  %-10s %-8s g%-4u bits %.4f  mse %.3g  cos %.6f  sqnr %.1f dB  sat %.4f  codes %.3f\n", format,
           scheme ? scheme : "-", group, mt.effective_bits, mt.mse, mt.cosine, mt.sqnr_db, mt.saturated_ratio,
           mt.code_utilization);
    if (f->release)
        f->release(&pw);
    else
        for (uint32_t i = 0; i < pw.n_buffers; i++) free(pw.buffers[i].data);
    free(w), free(dq);
}

int main(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_TEST_PLUGIN_DIR};
    char err[256];
    rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt) return qc_test_finish("test_metrics");
    /* seed 003 section 5: INT4 g128 with an f16 scale is 4.125 bits */
    check("w4a16", "sym", 128, 64, 512, 4.125, 15);
    check("w4a16", "sym", 32, 64, 512, 4.5, 15);    /* = Q4_0 */
    check("w4a16", "fmin", 32, 64, 512, 5.0, 15);   /* = Q4_1 */
    check("w4a16", "asym", 128, 64, 512, 4.0 + 16.0 / 128 + 8.0 / 128, 15);
    check("mxfp4", NULL, 0, 64, 512, 4.25, 12);
    check("fp8", "channel", 0, 64, 4096, 8.0 + 32.0 / 4096, 25);
    check("fp8", "tensor", 0, 64, 4096, 8.0 + 32.0 / (64.0 * 4096), 25);
    check("fp8", "block", 0, 128, 1024, 8.0 + 32.0 / (128.0 * 128), 25);
    check("w8a8_int8", NULL, 0, 64, 4096, 8.0 + 32.0 / 4096, 30);
    check("bf16", NULL, 0, 64, 512, 16.0, 45);
    qc_runtime_close(rt);
    return qc_test_finish("test_metrics");
}
