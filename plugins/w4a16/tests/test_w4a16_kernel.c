/* test_w4a16_kernel.c - the w4a16 reference kernels through qc_kernel_bind + libffi against a float64 oracle. */
#include "w4_test_util.h"

/* Tolerance against the float64 oracle: for y = sum over k of products,
 * each product and each partial sum rounded to f32, the error is at most
 * (k + 1) * 2^-24 * sum |xb * w| (recursive summation bound), so that is the
 * bound checked.  The same test also checks the kernel bit for bit against
 * the documented order: acc = 0; for t in stored order: acc += xb * w. */

static int n_bad_tol, n_bad_bits;
static double worst_ratio;

static void check_kernel(const w4t *t, const qc_packed_weight *pw, const char *want_kernel, int64_t m,
                         uint64_t seed) {
    int64_t n = pw->n, k = pw->k;
    float *x = malloc(sizeof(float) * (size_t)(m * k)), *y = malloc(sizeof(float) * (size_t)(m * n)),
          *w = malloc(sizeof(float) * (size_t)(n * k));
    qc_test_fill(x, (size_t)(m * k), seed, 1.5f);
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN; /* every output must be written */
    CHECK(t->f->dequantize(pw, w) == QC_OK, "dequantize");
    const char *kid = NULL;
    int rc = w4t_linear(t, pw, x, y, m, &kid);
    CHECK(rc == 0, "kernel call");
    CHECK(kid && strcmp(kid, want_kernel) == 0, "selected %s, expected %s", kid ? kid : "none", want_kernel);
    const qc_buffer *bp = w4t_buf(pw, "perm");
    const int32_t *perm = bp ? bp->data : NULL;
    int bad_tol = 0, bad_bits = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double exact = 0, mag = 0;
            float acc = 0.0f;
            for (int64_t c = 0; c < k; c++) {
                double p = (double)qc_round_bf16(x[i * k + c]) * (double)w[j * k + c];
                exact += p;
                mag += fabs(p);
            }
            for (int64_t s = 0; s < k; s++) {
                int64_t c = perm ? perm[s] : s;
                acc += qc_round_bf16(x[i * k + c]) * w[j * k + c];
            }
            double got = y[i * n + j], tol = (double)(k + 1) * 0x1p-24 * mag;
            if (!(fabs(got - exact) <= tol)) {
                if (bad_tol++ < 3)
                    fprintf(stderr, "  %s m=%lld n=%lld k=%lld y[%lld,%lld] = %.9g, oracle %.9g, tol %.3g\n",
                            want_kernel, (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, got,
                            exact, tol);
            } else if (tol > 0 && fabs(got - exact) / tol > worst_ratio) {
                worst_ratio = fabs(got - exact) / tol;
            }
            if (w4t_bits(acc) != w4t_bits(y[i * n + j])) bad_bits++;
        }
    n_bad_tol += bad_tol;
    n_bad_bits += bad_bits;
    CHECK(bad_tol == 0, "%s m=%lld n=%lld k=%lld g%u: %d outputs beyond tolerance", want_kernel, (long long)m,
          (long long)n, (long long)k, pw->group_size, bad_tol);
    CHECK(bad_bits == 0, "%s m=%lld n=%lld k=%lld g%u: %d outputs differ from the documented order", want_kernel,
          (long long)m, (long long)n, (long long)k, pw->group_size, bad_bits);
    free(x);
    free(y);
    free(w);
}

/* Give a quantized weight a "perm" buffer (test-owned) so the _perm kernels
 * run on it; detach it before release. */
static void attach_perm(qc_packed_weight *pw, int32_t *perm, uint64_t seed) {
    int64_t k = pw->k;
    for (int64_t i = 0; i < k; i++) perm[i] = (int32_t)i;
    for (int64_t i = k - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(qc_test_rng(&seed) % (uint64_t)(i + 1));
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    pw->buffers[pw->n_buffers++] = (qc_buffer){"perm", perm, (size_t)k * 4, QC_DT_I32, QC_MEM_WEIGHTS};
    pw->scheme |= W4A16_SCHEME_PERM;
}
static void detach_perm(qc_packed_weight *pw) {
    pw->n_buffers--;
    pw->scheme &= ~W4A16_SCHEME_PERM;
}

int main(void) {
    w4t t;
    if (w4t_open(&t) != 0) {
        CHECK(0, "open the w4a16 plugin");
        return qc_test_finish("w4a16_kernel");
    }
    static const struct { int64_t m, n, k; } shapes[] = {
        {1, 8, 128}, {3, 16, 256}, {8, 24, 384}, {9, 8, 640}, {17, 40, 1152}, {1, 64, 4096},
    };
    static const char *const schemes[] = {"sym", "asym", "fmin"};
    static const char *const kernels[] = {"w4a16.linear_sym", "w4a16.linear_asym", "w4a16.linear_fmin"};
    static const char *const kernels_perm[] = {"w4a16.linear_sym_perm", "w4a16.linear_asym_perm",
                                               "w4a16.linear_fmin_perm"};
    static const uint32_t groups[] = {32, 64, 128};
    uint64_t seed = 100;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int sc = 0; sc < 3; sc++)
            for (int gi = 0; gi < 3; gi++) {
                int64_t n = shapes[si].n, k = shapes[si].k, m = shapes[si].m;
                float *w = malloc(sizeof(float) * (size_t)(n * k));
                qc_test_fill(w, (size_t)(n * k), ++seed, 0.05f);
                for (int64_t i = 0; i < n * k; i++) w[i] += 0.01f; /* a mean, so asym and fmin differ */
                qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = n, .k = k,
                                       .group_size = groups[gi], .scheme = schemes[sc]};
                qc_packed_weight pw;
                qc_reason why;
                if (t.f->quantize(&rq, &pw, &why) != QC_OK) {
                    CHECK(0, "quantize %s g%u: %s", schemes[sc], groups[gi], why.text);
                    free(w);
                    continue;
                }
                check_kernel(&t, &pw, kernels[sc], m, ++seed);
                int32_t *perm = malloc(sizeof(int32_t) * (size_t)k);
                attach_perm(&pw, perm, ++seed);
                check_kernel(&t, &pw, kernels_perm[sc], m, ++seed);
                if (si == 1 && gi == 0) {
                    /* a corrupt permutation: dequantize refuses, the kernel
                     * writes NaN instead of reading out of bounds */
                    perm[5] = perm[6];
                    float *deq = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * k)),
                          *y = malloc(sizeof(float) * (size_t)(m * n));
                    qc_test_fill(x, (size_t)(m * k), 5, 1.0f);
                    CHECK(t.f->dequantize(&pw, deq) == QC_ERR_INVALID, "corrupt perm dequantized");
                    CHECK(w4t_linear(&t, &pw, x, y, m, NULL) == 0 && isnan(y[0]) && isnan(y[m * n - 1]),
                          "corrupt perm: y = %g", y[0]);
                    perm[5] = (int32_t)(k + 3);
                    CHECK(w4t_linear(&t, &pw, x, y, m, NULL) == 0 && isnan(y[0]), "perm out of range");
                    free(deq);
                    free(x);
                    free(y);
                }
                detach_perm(&pw);
                free(perm);
                t.f->release(&pw);
                free(w);
            }
    /* fmin weights whose values need all 24 bits (a minimum near 100, steps
     * near 0.004): there x * w rounds, so a fused multiply-add in the sum
     * would show in the bitwise check. */
    for (int gi = 0; gi < 3; gi++) {
        int64_t n = 16, k = 768, m = 5;
        float *w = malloc(sizeof(float) * (size_t)(n * k));
        qc_test_fill(w, (size_t)(n * k), 900 + (uint64_t)gi, 0.01f);
        for (int64_t i = 0; i < n * k; i++) w[i] += 100.0f;
        qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = n, .k = k, .group_size = groups[gi],
                               .scheme = "fmin"};
        qc_packed_weight pw;
        qc_reason why;
        CHECK(t.f->quantize(&rq, &pw, &why) == QC_OK, "fmin near 100: %s", why.text);
        check_kernel(&t, &pw, "w4a16.linear_fmin", m, 1000 + (uint64_t)gi);
        t.f->release(&pw);
        free(w);
    }
    printf("w4a16_kernel: worst |y - oracle| / tolerance = %.3g\n", worst_ratio);
    CHECK(n_bad_tol == 0 && n_bad_bits == 0, "totals %d %d", n_bad_tol, n_bad_bits);
    qc_runtime_close(t.rt);
    return qc_test_finish("w4a16_kernel");
}
