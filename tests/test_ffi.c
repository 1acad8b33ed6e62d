/* test_ffi.c - calling C reference kernels through libffi from the cuLaunchKernel-style argument array. */
#include "qc_test.h"
#include "qcore/qcore.h"

static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* bf16.linear_ref on random data against a float64 oracle. */
static void test_bf16_linear(qc_runtime *rt, int64_t m, int64_t n, int64_t k) {
    const qc_format_desc *f = qc_format_find(rt, "bf16");
    const qc_kernel_desc *kd = qc_kernel_find(rt, "bf16.linear_ref");
    CHECK(f && kd, "bf16 format or kernel missing");
    if (!f || !kd) return;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * k));
    float *y = malloc(sizeof(float) * (size_t)(m * n));
    qc_test_fill(w, (size_t)(n * k), 11 + (uint64_t)n, 0.05f);
    qc_test_fill(x, (size_t)(m * k), 7 + (uint64_t)m, 1.0f);
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN; /* poisoned: every element must be written */
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
    qc_packed_weight pw;
    qc_reason why;
    CHECK(f->quantize(&req, &pw, &why) == QC_OK, "quantize: %s", why.text);

    void *wbuf = pw.buffers[0].data;
    qc_named_arg args[] = {{"x", &x}, {"w.weight", &wbuf}, {"y", &y}, {"m", &m}, {"n", &n}, {"k", &k}};
    void *argv[16];
    char err[256];
    CHECK(qc_kernel_bind(kd, args, 6, argv, 16, err, sizeof err) == QC_OK, "bind: %s", err);
    CHECK(qc_kernel_call_reference(kd, argv, err, sizeof err) == QC_OK, "call: %s", err);

    double worst = 0;
    const uint16_t *wb = wbuf;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0, mag = 0;
            for (int64_t t = 0; t < k; t++) {
                uint32_t u = (uint32_t)wb[j * k + t] << 16;
                float wf;
                memcpy(&wf, &u, 4);
                double p = (double)bf16_round(x[i * k + t]) * wf;
                acc += p;
                mag += fabs(p);
            }
            /* f32 accumulation of k products: error bounded by k * eps * sum|p| */
            double err_ij = fabs(y[i * n + j] - acc) / (mag + 1e-30);
            if (!(err_ij <= worst)) worst = err_ij;
        }
    double tol = (double)k * 6e-8;
    CHECK(worst <= tol, "m=%lld n=%lld k=%lld: worst relative error %.3g > %.3g", (long long)m, (long long)n,
          (long long)k, worst, tol);
    free(pw.buffers[0].data);
    free(w), free(x), free(y);
}

/* A kernel with every parameter type: the values must arrive intact. */
static void test_all_param_types(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_FAULT_DIR "/none"};
    char err[256];
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    const qc_kernel_desc *kd = rt ? qc_kernel_find(rt, "test.test_good.axpb") : NULL;
    CHECK(kd != NULL, "axpb kernel not registered");
    if (!kd) { qc_runtime_close(rt); return; }
    float x[37], y[37];
    qc_test_fill(x, 37, 5, 1.0f);
    for (int i = 0; i < 37; i++) y[i] = NAN;
    float *yp = y, *xp = x, a = -1.75f;
    int32_t n = 37;
    double b = 0.125;
    uint32_t flags = 1;
    int64_t offset = 3000000000ll; /* needs 64 bits */
    /* named in a different order than the signature: binding reorders */
    qc_named_arg args[] = {{"offset", &offset}, {"flags", &flags}, {"b", &b}, {"a", &a},
                           {"n", &n},           {"x", &xp},        {"y", &yp}};
    void *argv[8];
    CHECK(qc_kernel_bind(kd, args, 7, argv, 8, err, sizeof err) == QC_OK, "%s", err);
    CHECK(qc_kernel_call_reference(kd, argv, err, sizeof err) == QC_OK, "%s", err);
    int bad = 0;
    for (int i = 0; i < 37; i++) bad += y[i] != a * x[i] + (float)(b * (double)(i + offset));
    CHECK(bad == 0, "%d of 37 outputs wrong", bad);
    /* a missing argument is named */
    CHECK(qc_kernel_bind(kd, args + 1, 6, argv, 8, err, sizeof err) != QC_OK, "bind without offset");
    CHECK_CONTAINS(err, "no value for parameter 6 'offset'");
    CHECK(qc_kernel_bind(kd, args, 7, argv, 3, err, sizeof err) != QC_OK, "argv too small");
    qc_runtime_close(rt);
}

/* A pointer parameter named "work" the caller leaves out binds to NULL (plugin.h: the kernel then runs without a
 * workspace); any other missing parameter, or a "work" that is not a pointer, is still an error. */
static void test_optional_work(void) {
    static const qc_kernel_param ps[] = {{"y", QC_PARAM_PTR}, {"work", QC_PARAM_PTR}, {"m", QC_PARAM_I64}};
    static const qc_kernel_param pi[] = {{"y", QC_PARAM_PTR}, {"work", QC_PARAM_I64}};
    qc_kernel_desc kd = {.struct_size = sizeof kd, .id = "t.work", .format = "t", .n_params = 3, .params = ps};
    float yv = 0;
    void *yp = &yv, *wp = &yv;
    int64_t m = 1;
    void *argv[4];
    char err[256];
    qc_named_arg a[] = {{"y", &yp}, {"m", &m}, {"work", &wp}};
    CHECK(qc_kernel_bind(&kd, a, 2, argv, 4, err, sizeof err) == QC_OK, "bind without work: %s", err);
    CHECK(argv[1] && *(void **)argv[1] == NULL, "an omitted work binds to NULL");
    CHECK(qc_kernel_bind(&kd, a, 3, argv, 4, err, sizeof err) == QC_OK && *(void **)argv[1] == &yv,
          "a given work is passed");
    CHECK(qc_kernel_bind(&kd, a + 1, 2, argv, 4, err, sizeof err) != QC_OK && strstr(err, "'y'"),
          "a missing y is an error: %s", err);
    kd.params = pi, kd.n_params = 2;
    CHECK(qc_kernel_bind(&kd, a, 1, argv, 4, err, sizeof err) != QC_OK && strstr(err, "'work'"),
          "a missing non-pointer work is an error: %s", err);
}

int main(void) {
    test_optional_work();
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    char err[256];
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    int64_t shapes[][3] = {{1, 64, 96}, {3, 17, 129}, {8, 256, 512}, {5, 33, 1000}};
    for (size_t i = 0; rt && i < sizeof shapes / sizeof shapes[0]; i++)
        test_bf16_linear(rt, shapes[i][0], shapes[i][1], shapes[i][2]);
    qc_runtime_close(rt);
    test_all_param_types();
    return qc_test_finish("test_ffi");
}
