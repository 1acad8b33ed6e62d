/* external_plugin_check.c - loads the example x_int8_g32 plugin from a folder and checks it against float64. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_test.h"
#include "qcore/qcore.h"

#define PLUGIN_ID "com.example.int8_g32"
#define FORMAT "x_int8_g32"
#define KERNEL "x_int8_g32.linear_ref"

/* ---- oracle number formats, written with double arithmetic rather than
 * the plugin's bit tricks, so a shared mistake is unlikely ---- */

/* Nearest value with `bits` significant bits (ties to even, the default
 * rounding mode) and the smallest step `min_step` (subnormals). */
static double round_sig(double v, int bits, double min_step) {
    if (v == 0.0) return v;
    int e;
    frexp(fabs(v), &e); /* |v| = f * 2^e, f in [0.5, 1) */
    double step = ldexp(1.0, e - bits);
    if (step < min_step) step = min_step;
    return nearbyint(v / step) * step;
}
static double oracle_bf16(float x) { return round_sig(x, 8, ldexp(1.0, -133)); }
static double oracle_f16(float x) { return round_sig(x, 11, ldexp(1.0, -24)); }

/* Decode IEEE binary16 bits by the definition. */
static double decode_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static int find_plugin(const qc_runtime *rt, qc_plugin_info *out) {
    for (size_t i = 0; i < qc_plugin_count(rt); i++)
        if (qc_plugin_get(rt, i, out) == 0 && strcmp(out->id, PLUGIN_ID) == 0) return 1;
    return 0;
}

static qc_runtime *open_runtime(const char *dir) {
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = dir, .skip_default_dirs = 1, .skip_env = 1};
    char err[512];
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    if (!rt) fprintf(stderr, "qc_runtime_open: %s\n", err);
    return rt;
}

/* The descriptor, eligibility and quantizer refusals. */
static void check_descriptor(const qc_runtime *rt, const qc_format_desc *f) {
    CHECK(f->kind == QC_FORMAT_LINEAR && f->weight_dtype == QC_DT_I8 && f->act_dtype == QC_DT_BF16 &&
              f->accum_dtype == QC_DT_F32 && f->scale_dtype == QC_DT_F16 && f->weight_scale == QC_GRAN_GROUP,
          "descriptor dtypes/granularity");
    CHECK(f->default_group_size == 32 && f->n_group_sizes == 1 && f->group_sizes[0] == 32 && f->k_align == 32,
          "group 32, K alignment 32 (got default %u, k_align %u)", f->default_group_size, f->k_align);
    CHECK(fabs(f->effective_bits - 8.5) < 1e-12, "effective bits %g", f->effective_bits);
    const char *owner = qc_format_plugin(rt, FORMAT);
    CHECK(owner && strcmp(owner, PLUGIN_ID) == 0, "format owner %s", owner ? owner : "(none)");
    char missing[160];
    qc_format_missing(rt, f, missing, sizeof missing);
    CHECK(strcmp(missing, "GPU kernel") == 0, "lacks only the GPU kernel, got \"%s\"", missing);

    const qc_kernel_desc *kd = qc_kernel_find(rt, KERNEL);
    CHECK(kd && kd->reference && kd->n_params == 7, "reference kernel " KERNEL " with 7 params");

    qc_problem p = {.struct_size = sizeof p, .m = 1, .n = 64, .k = 4096, .phase = QC_PHASE_DECODE};
    qc_reason why;
    const qc_kernel_desc *chosen = NULL;
    CHECK(qc_select_format(rt, f, &p, 0, &chosen, &why) == 1 && chosen == kd, "K=4096 eligible on the cpu: %s %s",
          why.code, why.text);
    p.k = 48;
    CHECK(qc_select_format(rt, f, &p, 0, NULL, &why) == 0 && strcmp(why.code, "align_k") == 0,
          "K=48 refused with align_k, got \"%s\"", why.code);
    /* The plugin's own callback, not only the core's k_align test. */
    memset(&why, 0, sizeof why);
    CHECK(f->eligible && f->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0,
          "plugin eligible() refuses K=48 with align_k, got \"%s\"", why.code);
    CHECK_CONTAINS(why.text, "K=48");
    p.k = 4096;
    p.group_size = 64;
    CHECK(qc_select_format(rt, f, &p, 0, NULL, &why) == 0 && strcmp(why.code, "group") == 0,
          "group 64 refused with group, got \"%s\"", why.code);

    float w[2 * 48];
    qc_test_fill(w, 2 * 48, 7, 1.0f);
    qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = 2, .k = 48};
    qc_packed_weight pw;
    memset(&why, 0, sizeof why);
    CHECK(f->quantize(&rq, &pw, &why) != QC_OK && strcmp(why.code, "align_k") == 0,
          "quantize K=48 refused with align_k, got \"%s\"", why.code);
    rq.k = 32;
    w[5] = NAN;
    memset(&why, 0, sizeof why);
    CHECK(f->quantize(&rq, &pw, &why) != QC_OK && strcmp(why.code, "nonfinite") == 0,
          "quantize NaN refused with nonfinite, got \"%s\"", why.code);
}

/* One shape: quantize, compare the packed bytes with the definition,
 * dequantize exactly, run the reference through libffi and compare with
 * float64.  Returns the worst error as a fraction of its tolerance. */
static double check_case(const qc_runtime *rt, int64_t m, int64_t n, int64_t k, uint64_t seed) {
    const qc_format_desc *f = qc_format_find(rt, FORMAT);
    const qc_kernel_desc *kd = qc_kernel_find(rt, KERNEL);
    if (!f || !kd) return INFINITY;
    const int64_t groups = k / 32;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * k));
    float *deq = malloc(sizeof(float) * (size_t)(n * k)), *y = malloc(sizeof(float) * (size_t)(m * n));
    if (!w || !x || !deq || !y) abort();
    qc_test_fill(w, (size_t)(n * k), seed, 0.05f);
    qc_test_fill(x, (size_t)(m * k), seed * 3 + 1, 1.0f);
    /* Rows with awkward ranges: tiny (f16 subnormal scales), outliers, zeros. */
    if (n > 1)
        for (int64_t t = 0; t < k; t++) w[1 * k + t] *= 2e-5f;
    if (n > 2)
        for (int64_t t = 0; t < k; t += 7) w[2 * k + t] *= 40.f;
    if (n > 3) memset(w + 3 * k, 0, sizeof(float) * (size_t)k);
    /* Exact ties, which random data almost never hits: an f16 scale halfway
     * between two codes, and bf16 activations halfway (both go to even). */
    if (n > 4)
        for (int j = 0; j < 64; j++) {
            float d = (float)ldexp(2048 + 2 * j + 1, -17); /* halfway between two f16 values near 1/64 */
            float amax = d * 127.f;
            if (amax / 127.f != d) continue;
            w[4 * k] = -amax;
            break;
        }
    if (n > 4 && k >= 64)
        for (int j = 0; j < 64; j++) {
            /* halfway between two f16 subnormals, the lower one even */
            float d = (float)ldexp(4 * j + 5, -25);
            float amax = d * 127.f;
            if (amax / 127.f != d) continue;
            memset(w + 4 * k + 32, 0, 32 * sizeof(float));
            w[4 * k + 40] = amax;
            break;
        }
    if (n > 4 && k >= 96) { /* a scale in [2^-25, 2^-24): the smallest f16 subnormal */
        memset(w + 4 * k + 64, 0, 32 * sizeof(float));
        w[4 * k + 70] = (float)ldexp(1.5 * 127, -25);
    }
    for (int64_t i = 0; i < m; i++) {
        x[i * k] = 1.00390625f;       /* 1 + 2^-8: bf16 rounds down to 1 */
        x[i * k + 1] = -1.01171875f;  /* -(1 + 3*2^-8): bf16 rounds up to -(1 + 2^-6) */
    }

    qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = n, .k = k};
    qc_packed_weight pw;
    qc_reason why = {{0}, {0}};
    double worst = 0;
    if (f->quantize(&rq, &pw, &why) != QC_OK) {
        CHECK(0, "quantize %lldx%lld: %s: %s", (long long)n, (long long)k, why.code, why.text);
        goto out;
    }
    CHECK(pw.n_buffers == 2 && strcmp(pw.buffers[0].name, "qweight") == 0 && strcmp(pw.buffers[1].name, "scales") == 0,
          "buffers qweight, scales");
    CHECK(pw.buffers[0].bytes == (size_t)(n * k) && pw.buffers[1].bytes == (size_t)(n * groups) * 2 &&
              pw.buffers[0].dtype == QC_DT_I8 && pw.buffers[1].dtype == QC_DT_F16,
          "buffer sizes/dtypes %zu %zu", pw.buffers[0].bytes, pw.buffers[1].bytes);
    const int8_t *qw = pw.buffers[0].data;
    const uint16_t *sc = pw.buffers[1].data;

    /* Packed bytes against the definition: d = f16(amax/127), q = round(w/d). */
    size_t bad_scale = 0, bad_code = 0, bad_bound = 0, clipped = 0;
    unsigned char seen[256] = {0};
    for (int64_t j = 0; j < n; j++)
        for (int64_t g = 0; g < groups; g++) {
            const float *src = w + j * k + g * 32;
            float amax = 0;
            for (int t = 0; t < 32; t++) amax = fabsf(src[t]) > amax ? fabsf(src[t]) : amax;
            float d = amax / 127.f;
            double d16 = decode_f16(sc[j * groups + g]);
            bad_scale += d16 != oracle_f16(d);
            float inv = d > 0 ? 1.f / d : 0.f;
            for (int t = 0; t < 32; t++) {
                int8_t q = qw[j * k + g * 32 + t];
                seen[q + 128] = 1;
                clipped += d16 > 0 && fabs((double)src[t]) / d16 > 127.5;
                bad_code += q != (int8_t)roundf(src[t] * inv);
                /* half a step of the f32 scale (plus the f32 error of w * (1/d)),
                 * then up to 127 times the scale's own f16 rounding */
                double bound = (double)d * (0.5 + 1e-5) + 127 * fabs(d16 - (double)d);
                bad_bound += fabs((double)src[t] - d16 * q) > bound;
            }
        }
    CHECK(bad_scale == 0, "%zu scales differ from f16(amax/127)", bad_scale);
    CHECK(bad_code == 0, "%zu codes differ from round(w/d)", bad_code);
    CHECK(bad_bound == 0, "%zu weights outside the rounding bound", bad_bound);
    if (n > 3) {
        int nonzero = 0;
        for (int64_t t = 0; t < k; t++) nonzero |= qw[3 * k + t];
        for (int64_t g = 0; g < groups; g++) nonzero |= sc[3 * groups + g];
        CHECK(!nonzero, "an all-zero row gives zero codes and zero scales");
    }

    /* Dequantization is exact: f16 times a 7-bit integer fits in f32. */
    CHECK(f->dequantize(&pw, deq) == QC_OK, "dequantize");
    size_t bad_deq = 0;
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < k; t++)
            bad_deq += (double)deq[j * k + t] != decode_f16(sc[j * groups + t / 32]) * qw[j * k + t];
    CHECK(bad_deq == 0, "%zu dequantized values are not exactly scale*q", bad_deq);

    /* The reference, called by name through the cuLaunchKernel-style array. */
    void *xp = x, *yp = y, *qp = pw.buffers[0].data, *sp = pw.buffers[1].data;
    qc_named_arg args[] = {{"x", &xp}, {"y", &yp}, {"m", &m}, {"n", &n}, {"k", &k},
                           {"w.qweight", &qp}, {"w.scales", &sp}};
    void *argv[16];
    char err[256];
    for (int64_t i = 0; i < m * n; i++) y[i] = NAN;
    if (qc_kernel_bind(kd, args, sizeof args / sizeof args[0], argv, 16, err, sizeof err) != QC_OK ||
        qc_kernel_call_reference(kd, argv, err, sizeof err) != QC_OK) {
        CHECK(0, "kernel call: %s", err);
        goto release;
    }
    /* Oracle: float64 sum of bf16(x) * dequantized w.  f32 rounding in the
     * kernel (32-term group sums, a product, `groups` group additions) is
     * bounded by (groups + 34) * 2^-24 * sum|terms|: the stated tolerance. */
    const double u = ldexp(1.0, -24);
    size_t bad_y = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int64_t t = 0; t < k; t++) {
                double term = oracle_bf16(x[i * k + t]) * (double)deq[j * k + t];
                s += term;
                mag += fabs(term);
            }
            double tol = (double)(groups + 34) * u * mag + 1e-30;
            double e = fabs((double)y[i * n + j] - s) / tol;
            if (!(e <= 1.0)) {
                if (bad_y++ < 3)
                    fprintf(stderr, "  y[%lld,%lld] = %.9g, oracle %.9g, tolerance %.3g\n", (long long)i, (long long)j,
                            (double)y[i * n + j], s, tol);
            }
            if (e > worst || e != e) worst = e;
        }
    CHECK(bad_y == 0, "%zu outputs outside tolerance (m=%lld n=%lld k=%lld)", bad_y, (long long)m, (long long)n,
          (long long)k);

    if (f->struct_size >= offsetof(qc_format_desc, code_stats) + sizeof f->code_stats && f->code_stats) {
        /* Clipping happens only where a tiny group's f16 scale rounded far
         * below amax/127 (subnormal scales). */
        double sat = -1, util = -1, used = 0;
        for (int c = 0; c < 256; c++) used += seen[c];
        CHECK(f->code_stats(&pw, w, &sat, &util) == QC_OK && sat == (double)clipped / (double)(n * k) &&
                  util == used / 255.0,
              "code_stats saturated %g utilization %g, expected %g %g", sat, util, (double)clipped / (double)(n * k),
              used / 255.0);
    }
release:
    f->release(&pw);
    CHECK(pw.n_buffers == 0 && pw.buffers[0].data == NULL, "release empties the weight");
out:
    free(w);
    free(x);
    free(deq);
    free(y);
    return worst;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN_FOLDER (a folder holding the built x_int8_g32.so)\n", argv[0]);
        return 2;
    }
    qc_runtime *rt = open_runtime(argv[1]);
    CHECK(rt != NULL, "runtime opens");
    if (!rt) return qc_test_finish("external_plugin_check");
    for (size_t i = 0; i < qc_plugin_refusal_count(rt); i++) fprintf(stderr, "refused: %s\n", qc_plugin_refusal(rt, i));
    CHECK(qc_plugin_refusal_count(rt) == 0, "no plugin refused");
    qc_plugin_info info;
    CHECK(find_plugin(rt, &info), "plugin " PLUGIN_ID " loaded from %s", argv[1]);
    const qc_format_desc *f = qc_format_find(rt, FORMAT);
    CHECK(f != NULL, "format " FORMAT " registered");
    if (!f || !f->quantize || !f->dequantize || !f->release) {
        qc_runtime_close(rt);
        return qc_test_finish("external_plugin_check");
    }
    check_descriptor(rt, f);

    static const int64_t shapes[][3] = {{1, 1, 32}, {1, 64, 4096}, {3, 17, 96}, {5, 64, 256}, {16, 40, 1024}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        double e = check_case(rt, shapes[s][0], shapes[s][1], shapes[s][2], 1000 + s);
        if (e > worst || e != e) worst = e;
    }
    printf("reference vs float64 oracle: worst error %.3f of the tolerance (groups+34)*2^-24*sum|terms|\n", worst);

    /* A second runtime shares the same dlopen()ed copy; closing the first
     * must leave the second working. */
    qc_runtime *rt2 = open_runtime(argv[1]);
    CHECK(rt2 && qc_format_find(rt2, FORMAT), "a second runtime loads the plugin too");
    qc_runtime_close(rt);
    if (rt2) {
        double e = check_case(rt2, 2, 8, 64, 77);
        CHECK(e <= 1.0, "second runtime after the first closed: %g", e);
        qc_runtime_close(rt2);
    }
    return qc_test_finish("external_plugin_check");
}
