/* test_cpu_path.c - the CPU forward's float path (dequantize + quantize_activations) against each format's reference kernel. */
#include "qc_test.h"
#include "qcore/qcore.h"

static qc_runtime *rt;

/* y_ref through the kernel dispatch picks (libffi), y_fast = x' . deq^T in
 * float64: they may differ only by the reference's f32 rounding. */
static void check_format(const char *format, const char *scheme, int64_t m, int64_t n, int64_t k) {
    const qc_format_desc *f = qc_format_find(rt, format);
    CHECK(f && f->quantize && f->dequantize, "%s incomplete", format);
    if (!f || !f->quantize) return;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *deq = malloc(sizeof(float) * (size_t)(n * k));
    float *x = malloc(sizeof(float) * (size_t)(m * k)), *xq = malloc(sizeof(float) * (size_t)(m * k));
    float *y = malloc(sizeof(float) * (size_t)(m * n));
    qc_test_fill(w, (size_t)(n * k), 5 + (uint64_t)n, 0.05f);
    qc_test_fill(x, (size_t)(m * k), 8 + (uint64_t)m, 1.0f);
    x[3] = 9.0f; /* an outlier, so activation scales matter */
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN;
    /* calibration statistics (SmoothQuant needs them): per-channel |x| max */
    float *absmax = calloc((size_t)k, sizeof(float));
    for (int64_t i = 0; i < m * k; i++) absmax[i % k] = fmaxf(absmax[i % k], fabsf(x[i]));
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .scheme = scheme, .act_absmax = absmax};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    int ok = f->quantize(&req, &pw, &why) == QC_OK;
    free(absmax);
    CHECK(ok, "%s quantize: %s", format, why.text);
    if (!ok) {
        free(w), free(deq), free(x), free(xq), free(y);
        return;
    }
    CHECK(f->dequantize(&pw, deq) == QC_OK, "%s dequantize", format);
    if (f->quantize_activations)
        CHECK(f->quantize_activations(&pw, x, m, xq) == QC_OK, "%s quantize_activations", format);
    else
        memcpy(xq, x, sizeof(float) * (size_t)(m * k));
    qc_problem p = {.struct_size = sizeof p, .m = m, .n = n, .k = k, .group_size = pw.group_size,
                    .phase = QC_PHASE_PREFILL, .scheme = pw.scheme};
    const qc_kernel_desc *kd = NULL;
    CHECK(qc_select_format(rt, f, &p, 0, &kd, &why) && kd, "%s: no reference kernel: %s", format, why.text);
    if (kd) {
        uint32_t g = pw.group_size;
        void *bufs[QC_MAX_WEIGHT_BUFFERS];
        char names[QC_MAX_WEIGHT_BUFFERS][40];
        qc_named_arg args[16] = {{"x", &x}, {"y", &y}, {"m", &m}, {"n", &n}, {"k", &k}, {"group_size", &g}};
        size_t na = 6;
        for (uint32_t i = 0; i < pw.n_buffers; i++) {
            bufs[i] = pw.buffers[i].data;
            snprintf(names[i], sizeof names[i], "w.%s", pw.buffers[i].name);
            args[na++] = (qc_named_arg){names[i], &bufs[i]};
        }
        void *argv[32];
        char err[256];
        CHECK(qc_kernel_bind(kd, args, na, argv, 32, err, sizeof err) == QC_OK, "%s", err);
        CHECK(qc_kernel_call_reference(kd, argv, err, sizeof err) == QC_OK, "%s", err);
        double worst = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0, mag = 0;
                for (int64_t t = 0; t < k; t++) {
                    double pr = (double)xq[i * k + t] * deq[j * k + t];
                    acc += pr;
                    mag += fabs(pr);
                }
                double e = fabs(y[i * n + j] - acc) / (mag + 1e-30);
                if (!(e <= worst)) worst = e;
            }
        /* the reference rounds each product and partial sum in f32 */
        double tol = (double)(k + 4) * 1.2e-7;
        CHECK(worst <= tol, "%s%s%s via %s: worst %.3g > %.3g", format, scheme ? ":" : "", scheme ? scheme : "",
              kd->id, worst, tol);
        printf("  %-10s %-8s kernel %-28s worst %.2e (tolerance %.2e)\n", format, scheme ? scheme : "-", kd->id,
               worst, tol);
    }
    if (f->release)
        f->release(&pw);
    else
        for (uint32_t i = 0; i < pw.n_buffers; i++) free(pw.buffers[i].data);
    free(w), free(deq), free(x), free(xq), free(y);
}

int main(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_TEST_PLUGIN_DIR};
    char err[256];
    rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt) return qc_test_finish("test_cpu_path");
    const char *cases[][2] = {{"bf16", NULL},       {"w4a16", "sym"},      {"w4a16", "asym"},
                              {"w4a16", "fmin"},    {"mxfp4", NULL},       {"fp8", "tensor"},
                              {"fp8", "channel"},   {"fp8", "block"},      {"w8a8_int8", NULL},
                              {"w8a8_int8", "smoothquant"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_format(cases[i][0], cases[i][1], 5, 48, 256);
        check_format(cases[i][0], cases[i][1], 1, 32, 384);
    }
    qc_runtime_close(rt);
    return qc_test_finish("test_cpu_path");
}
