/* test_kv_fp8.c - the kv_fp8 plugin: write/read reference kernels for each variant against their definition and a float64 bound. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/qcore.h>

#include "qc_fp8_codec.h"
#include "qc_test.h"

/* variant ids from docs/formats/kv_fp8.md */
enum { V_E4M3_TENSOR = 0, V_E4M3_HEAD = 1, V_E5M2 = 2 };
static const char *const variant_name[] = {"e4m3/tensor", "e4m3/head", "e5m2"};

static const qc_kernel_desc *kw, *kr;

/* Binds by name and calls a KV kernel's reference. */
static qc_status call_kv(const qc_kernel_desc *kd, const float *src, uint8_t *cache, float *dst, const float *scales,
                         uint32_t variant, int64_t tokens, int64_t heads, int64_t dim, char *err, size_t errlen) {
    const float *srcp = src, *scp = scales;
    uint8_t *cp = cache;
    float *dp = dst;
    qc_named_arg args[] = {
        {"src", (void *)&srcp},   {"cache", &cp},      {"dst", &dp},        {"scales", (void *)&scp},
        {"variant", &variant},    {"tokens", &tokens}, {"kv_heads", &heads}, {"head_dim", &dim},
    };
    void *argv[16];
    qc_status st = qc_kernel_bind(kd, args, sizeof args / sizeof args[0], argv, 16, err, errlen);
    return st != QC_OK ? st : qc_kernel_call_reference(kd, argv, err, errlen);
}

/* Returns the squared error of the round trip on head 0 (the narrowest
 * range), for comparing variants. */
static double test_variant(uint32_t v, int64_t T, int64_t H, int64_t D, uint64_t seed) {
    char ctx[96];
    snprintf(ctx, sizeof ctx, "%s tokens=%lld heads=%lld dim=%lld", variant_name[v], (long long)T, (long long)H,
             (long long)D);
    const size_t count = (size_t)(T * H * D);
    float *src = malloc(count * sizeof(float)), *dst = malloc(count * sizeof(float));
    uint8_t *cache = malloc(count);
    float *scales = malloc((size_t)H * sizeof(float));
    qc_test_fill(src, count, seed, 1.f);
    /* heads of very different ranges (keys often are), plus outliers */
    for (size_t i = 0; i < count; i++) src[i] *= ldexpf(1.f, (int)((i / (size_t)D) % (size_t)H) * 2 - 4);
    for (size_t i = 0; i < count; i += 97) src[i] *= 8.f;

    /* scales as a calibration would make them: amax/448, whole tensor or per head */
    float all = 0.f;
    for (size_t i = 0; i < count; i++) all = fmaxf(all, fabsf(src[i]));
    for (int64_t h = 0; h < H; h++) {
        float amax = 0.f;
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) amax = fmaxf(amax, fabsf(src[(t * H + h) * D + d]));
        scales[h] = (v == V_E4M3_TENSOR ? all : amax) / 448.f;
    }
    const float *sc = v == V_E5M2 ? NULL : scales; /* E5M2 takes no scale at all */

    char err[256] = "";
    memset(cache, 0xAA, count);
    CHECK(call_kv(kw, src, cache, NULL, sc, v, T, H, D, err, sizeof err) == QC_OK, "%s: write: %s", ctx, err);
    for (size_t i = 0; i < count; i++) dst[i] = NAN;
    CHECK(call_kv(kr, NULL, cache, dst, sc, v, T, H, D, err, sizeof err) == QC_OK, "%s: read: %s", ctx, err);

    int bad_code = 0, bad_read = 0, bad_bound = 0;
    double sq = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++) {
                size_t i = (size_t)((t * H + h) * D + d);
                float s = v == V_E4M3_TENSOR ? scales[0] : v == V_E4M3_HEAD ? scales[h] : 1.f;
                /* definition, bit for bit */
                uint8_t want = v == V_E5M2 ? qc_fp8_e5m2_encode(src[i]) : qc_fp8_e4m3_encode(src[i] / s);
                float back = v == V_E5M2 ? qc_fp8_e5m2_decode(cache[i]) : qc_fp8_e4m3_decode(cache[i]) * s;
                bad_code += cache[i] != want;
                bad_read += !(dst[i] == back);
                /* float64 bound: half a unit of the format (3 or 2 mantissa
                 * bits; subnormal unit 2^-9 s or 2^-16), plus one f32 rounding */
                double e = fabs((double)dst[i] - (double)src[i]);
                double lim = v == V_E5M2 ? fmax(fabs(src[i]) * 0x1p-3, 0x1p-17)
                                         : fmax(fabs(src[i]) * 0x1p-4, (double)s * 0x1p-10);
                bad_bound += e > lim * (1 + 0x1p-20);
                if (h == 0) sq += e * e;
            }
    CHECK(bad_code == 0, "%s: %d codes differ from the definition", ctx, bad_code);
    CHECK(bad_read == 0, "%s: %d reads differ from decode * scale", ctx, bad_read);
    CHECK(bad_bound == 0, "%s: %d reads outside the float64 bound", ctx, bad_bound);
    free(src);
    free(dst);
    free(cache);
    free(scales);
    return sq;
}

/* Saturation, NaN and a bad variant id. */
static void test_specials(void) {
    char err[256] = "";
    float src[8] = {1e6f, -1e6f, INFINITY, -INFINITY, NAN, 0.f, -0.f, 1e-30f};
    float scale = 1.f, dst[8];
    uint8_t c[8];
    CHECK(call_kv(kw, src, c, NULL, &scale, V_E4M3_TENSOR, 1, 1, 8, err, sizeof err) == QC_OK, "write: %s", err);
    CHECK(c[0] == 0x7E && c[1] == 0xFE && c[2] == 0x7E && c[3] == 0xFE, "e4m3 saturates: %02x %02x %02x %02x", c[0],
          c[1], c[2], c[3]);
    CHECK(c[4] == 0x7F && c[5] == 0x00 && c[6] == 0x80 && c[7] == 0x00, "e4m3 NaN/zeros: %02x %02x %02x %02x", c[4],
          c[5], c[6], c[7]);
    CHECK(call_kv(kw, src, c, NULL, NULL, V_E5M2, 1, 1, 8, err, sizeof err) == QC_OK, "write e5m2: %s", err);
    CHECK(c[0] == 0x7B && c[1] == 0xFB && c[2] == 0x7B && c[3] == 0xFB && c[4] == 0x7F,
          "e5m2 saturates, never inf: %02x %02x %02x %02x %02x", c[0], c[1], c[2], c[3], c[4]);
    CHECK(call_kv(kr, NULL, c, dst, NULL, V_E5M2, 1, 1, 8, err, sizeof err) == QC_OK, "read e5m2: %s", err);
    CHECK(dst[0] == 57344.f && dst[1] == -57344.f && isnan(dst[4]), "e5m2 reads %g %g %g", (double)dst[0],
          (double)dst[1], (double)dst[4]);
    /* a static scale too small for the data: the top codes clip, none is NaN */
    float x[64];
    qc_test_fill(x, 64, 3, 1.f);
    float small = 0.5f / 448.f;
    uint8_t cc[64];
    CHECK(call_kv(kw, x, cc, NULL, &small, V_E4M3_TENSOR, 2, 1, 32, err, sizeof err) == QC_OK, "write small scale");
    int clipped = 0, nans = 0;
    for (int i = 0; i < 64; i++) {
        clipped += (cc[i] & 0x7f) == 0x7e;
        nans += qc_fp8_e4m3_is_nan(cc[i]);
    }
    CHECK(clipped > 0 && nans == 0, "small scale: %d clipped, %d NaN", clipped, nans);
    /* unknown variants cannot pass unseen */
    CHECK(call_kv(kw, src, c, NULL, &scale, 7, 1, 1, 8, err, sizeof err) == QC_OK, "write variant 7");
    int all_nan = 1;
    for (int i = 0; i < 8; i++) all_nan &= c[i] == 0x7F;
    CHECK(all_nan, "variant 7 writes NaN codes");
    CHECK(call_kv(kr, NULL, c, dst, &scale, 7, 1, 1, 8, err, sizeof err) == QC_OK, "read variant 7");
    all_nan = 1;
    for (int i = 0; i < 8; i++) all_nan &= isnan(dst[i]) != 0;
    CHECK(all_nan, "variant 7 reads NaN");
}

static void test_signatures(void) {
    static const char *const wn[] = {"src", "cache", "scales", "variant", "tokens", "kv_heads", "head_dim"};
    static const char *const rn[] = {"cache", "dst", "scales", "variant", "tokens", "kv_heads", "head_dim"};
    static const qc_param_type ty[] = {QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_U32,
                                       QC_PARAM_I64, QC_PARAM_I64, QC_PARAM_I64};
    CHECK(kw->n_params == 7 && kr->n_params == 7, "7 parameters each");
    for (uint32_t i = 0; i < 7 && i < kw->n_params && i < kr->n_params; i++) {
        CHECK(strcmp(kw->params[i].name, wn[i]) == 0 && kw->params[i].type == ty[i], "write param %u %s", i,
              kw->params[i].name);
        CHECK(strcmp(kr->params[i].name, rn[i]) == 0 && kr->params[i].type == ty[i], "read param %u %s", i,
              kr->params[i].name);
    }
    /* binding names the missing parameter */
    qc_named_arg args[] = {{"src", (void *)"x"}};
    void *argv[16];
    char err[256] = "";
    CHECK(qc_kernel_bind(kw, args, 1, argv, 16, err, sizeof err) != QC_OK, "bind without cache");
    CHECK_CONTAINS(err, "cache");
}

int main(void) {
    char err[512] = "";
    qc_runtime_options opt = {.struct_size = sizeof opt, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                              .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&opt, err, sizeof err);
    CHECK(rt != NULL, "runtime: %s", err);
    const qc_format_desc *f = rt ? qc_format_find(rt, "kv_fp8") : NULL;
    CHECK(f != NULL, "kv_fp8 loaded from %s", QC_TEST_PLUGIN_DIR);
    kw = rt ? qc_kernel_find(rt, "kv_fp8.write_ref") : NULL;
    kr = rt ? qc_kernel_find(rt, "kv_fp8.read_ref") : NULL;
    CHECK(kw && kr, "kv_fp8 kernels registered");
    if (!f || !kw || !kr) {
        if (rt) qc_runtime_close(rt);
        return qc_test_finish("kv_fp8_plugin_test");
    }
    CHECK(f->kind == QC_FORMAT_KV_CACHE && f->kv_dtype == QC_DT_F8_E4M3 && f->scale_dtype == QC_DT_F32 &&
              f->weight_scale == QC_GRAN_HEAD,
          "kv_fp8 descriptor");
    CHECK(kw->reference && kr->reference && !kw->cuda_source && !kr->cuda_source, "reference kernels only");
    test_signatures();

    static const int64_t shapes[][3] = {{1, 1, 64}, {7, 2, 128}, {33, 8, 64}, {5, 4, 96}, {16, 3, 80}};
    uint64_t seed = 21;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double e_tensor = 0, e_head = 0;
        for (uint32_t v = 0; v < 3; v++) {
            double e = test_variant(v, shapes[i][0], shapes[i][1], shapes[i][2], seed);
            if (v == V_E4M3_TENSOR) e_tensor = e;
            if (v == V_E4M3_HEAD) e_head = e;
        }
        seed++;
        /* heads of different ranges: per-head scales lose less on the narrow head */
        if (shapes[i][1] > 1)
            CHECK(e_head < e_tensor, "per-head error %g not below per-tensor %g", e_head, e_tensor);
    }
    test_specials();
    qc_runtime_close(rt);
    return qc_test_finish("kv_fp8_plugin_test");
}
