/* fp8.c - E4M3 weights and activations with per-tensor, per-channel/token or 128x128 block scales. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

#include "fp8_internal.h"

#define FP8_ALIGN 16  /* N and K: FP8 MMA tiles and 16-byte rows for TMA */
#define FP8_PANEL 8   /* weight rows the reference kernels decode at once */

static const qc_host_api *g_api;

static const char *const g_scheme_names[FP8_SCHEME_COUNT_] = {
    "channel", "tensor", "channel", "block", "tensor_static", "channel_static",
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void set_reason(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

static int scheme_is_static(uint32_t s) { return s == FP8_SCHEME_TENSOR_STATIC || s == FP8_SCHEME_CHANNEL_STATIC; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static float scale_of(float amax) { return fp8_scale_of(amax); }

/* |v| folded into a running maximum; NaN never wins a comparison, so it is
 * ignored (it still encodes to a NaN code on its own). */
static float amax_step(float amax, float v) {
    float a = fabsf(v);
    return a > amax ? a : amax;
}

/* Number of f32 weight scales a packed weight of this scheme has. */
static int64_t n_weight_scales(uint32_t scheme, int64_t n, int64_t k) {
    switch (scheme) {
    case FP8_SCHEME_TENSOR:
    case FP8_SCHEME_TENSOR_STATIC: return 1;
    case FP8_SCHEME_BLOCK: return ceil_div(n, FP8_BLOCK) * ceil_div(k, FP8_BLOCK);
    default: return n;
    }
}

/* Index into `scales` of the scale that applies to weight element [j, t]. */
static int64_t weight_scale_index(uint32_t scheme, int64_t j, int64_t t, int64_t k) {
    switch (scheme) {
    case FP8_SCHEME_TENSOR:
    case FP8_SCHEME_TENSOR_STATIC: return 0;
    case FP8_SCHEME_BLOCK: return (j / FP8_BLOCK) * ceil_div(k, FP8_BLOCK) + t / FP8_BLOCK;
    default: return j;
    }
}

static float weight_scale_at(uint32_t scheme, const float *scales, int64_t j, int64_t t, int64_t k) {
    return scales[weight_scale_index(scheme, j, t, k)];
}

static const qc_buffer *find_buffer(const qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++)
        if (w->buffers[i].name && strcmp(w->buffers[i].name, name) == 0) return &w->buffers[i];
    return NULL;
}

/* ---- eligibility --------------------------------------------------------- */

static int shape_ok(int64_t n, int64_t k, qc_reason *why) {
    if (n <= 0 || k <= 0) {
        set_reason(why, "shape", "fp8: weight shape %lldx%lld is empty", (long long)n, (long long)k);
        return 0;
    }
    if (n % FP8_ALIGN) {
        set_reason(why, "align_n", "fp8 needs N to be a multiple of %d, layer has N=%lld", FP8_ALIGN, (long long)n);
        return 0;
    }
    if (k % FP8_ALIGN) {
        set_reason(why, "align_k", "fp8 needs K to be a multiple of %d, layer has K=%lld", FP8_ALIGN, (long long)k);
        return 0;
    }
    /* every buffer and the reference's activation copy must be addressable */
    if (n > INT64_MAX / k || (uint64_t)(n * k) > SIZE_MAX / 8) {
        set_reason(why, "shape", "fp8: weight %lldx%lld is too large", (long long)n, (long long)k);
        return 0;
    }
    return 1;
}

static int group_ok(uint32_t scheme, uint32_t group_size, qc_reason *why) {
    if (scheme == FP8_SCHEME_BLOCK) {
        if (group_size != 0 && group_size != FP8_BLOCK) {
            set_reason(why, "group", "fp8 block scheme has %dx%d blocks, not group size %u", FP8_BLOCK, FP8_BLOCK,
                       group_size);
            return 0;
        }
    } else if (group_size != 0) {
        set_reason(why, "group", "fp8 scheme %s has no groups (group size %u asked); use scheme block for %d",
                   g_scheme_names[scheme], group_size, FP8_BLOCK);
        return 0;
    }
    return 1;
}

static int fp8_eligible(const qc_problem *p, qc_reason *why) {
    if (!p) return 0;
    if (p->scheme >= FP8_SCHEME_COUNT_) {
        set_reason(why, "scheme", "fp8 has no scheme id %u (ids 1-%d, see docs/formats/fp8.md)", p->scheme,
                   FP8_SCHEME_COUNT_ - 1);
        return 0;
    }
    if (p->m < 0) {
        set_reason(why, "shape", "fp8: M=%lld is negative", (long long)p->m);
        return 0;
    }
    return shape_ok(p->n, p->k, why) && group_ok(p->scheme, p->group_size, why);
}

/* Kernel-level checks: each reference kernel computes one scheme. */
static int kernel_scheme_ok(const qc_problem *p, uint32_t want, const char *kernel, qc_reason *why) {
    uint32_t s = p->scheme == FP8_SCHEME_DEFAULT ? FP8_SCHEME_CHANNEL : p->scheme;
    if (s == want) return 1;
    set_reason(why, "scheme", "%s computes scheme %s (%u), the weight has scheme %u", kernel, g_scheme_names[want], want,
               p->scheme);
    return 0;
}
static int elig_tensor(const qc_problem *p, qc_reason *why) {
    return kernel_scheme_ok(p, FP8_SCHEME_TENSOR, "fp8.linear_tensor_ref", why);
}
static int elig_channel(const qc_problem *p, qc_reason *why) {
    return kernel_scheme_ok(p, FP8_SCHEME_CHANNEL, "fp8.linear_channel_ref", why);
}
static int elig_block(const qc_problem *p, qc_reason *why) {
    return kernel_scheme_ok(p, FP8_SCHEME_BLOCK, "fp8.linear_block_ref", why);
}
static int elig_tensor_static(const qc_problem *p, qc_reason *why) {
    return kernel_scheme_ok(p, FP8_SCHEME_TENSOR_STATIC, "fp8.linear_tensor_static_ref", why);
}
static int elig_channel_static(const qc_problem *p, qc_reason *why) {
    return kernel_scheme_ok(p, FP8_SCHEME_CHANNEL_STATIC, "fp8.linear_channel_static_ref", why);
}

/* ---- quantize / dequantize ----------------------------------------------- */

/* The scheme a request asks for: its name, turned into the static variant
 * when a static activation scale comes with it.  0 when refused. */
static uint32_t request_scheme(const qc_quant_request *req, qc_reason *why) {
    const char *name = req->scheme ? req->scheme : "channel";
    uint32_t s = 0;
    for (uint32_t i = 1; i < FP8_SCHEME_COUNT_; i++)
        if (strcmp(name, g_scheme_names[i]) == 0) s = i;
    if (strcmp(name, "block128") == 0) s = FP8_SCHEME_BLOCK;
    if (!s) {
        set_reason(why, "scheme",
                   "fp8 has no scheme '%s' (tensor, channel, block, tensor_static, channel_static)", name);
        return 0;
    }
    if (req->act_scale != 0.f) {
        if (s == FP8_SCHEME_BLOCK) {
            set_reason(why, "scheme", "fp8 block scheme quantizes activations per 1x%d group at run time; "
                       "a static activation scale does not apply", FP8_BLOCK);
            return 0;
        }
        if (s == FP8_SCHEME_TENSOR) s = FP8_SCHEME_TENSOR_STATIC;
        if (s == FP8_SCHEME_CHANNEL) s = FP8_SCHEME_CHANNEL_STATIC;
    }
    return s;
}

/* The static activation scale of a request: act_scale, or else the largest
 * calibrated |x| (act_absmax) over 448.  0 when there is none. */
static float request_act_scale(const qc_quant_request *req, qc_reason *why) {
    float s = req->act_scale;
    if (s == 0.f && req->act_absmax) {
        float amax = 0.f;
        for (int64_t t = 0; t < req->k; t++) amax = amax_step(amax, req->act_absmax[t]);
        s = amax / QC_FP8_E4M3_MAX;
    }
    if (!(s > 0.f) || !isfinite(s)) {
        set_reason(why, "scale", "fp8 static scheme needs a finite positive activation scale (act_scale %g%s)",
                   (double)req->act_scale, req->act_absmax ? ", or act_absmax that is not all zero" : " or act_absmax");
        return 0.f;
    }
    return s;
}

static qc_status fp8_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    if (!out) return QC_ERR_INVALID;
    memset(out, 0, sizeof *out);
    if (!req || !req->w) {
        set_reason(why, "shape", "fp8: no source weights");
        return QC_ERR_INVALID;
    }
    uint32_t scheme = request_scheme(req, why);
    if (!scheme) return QC_ERR_UNSUPPORTED;
    if (!shape_ok(req->n, req->k, why)) return QC_ERR_INVALID;
    if (!group_ok(scheme, req->group_size, why)) return QC_ERR_UNSUPPORTED;
    float act_scale = 0.f;
    if (scheme_is_static(scheme) && (act_scale = request_act_scale(req, why)) == 0.f) return QC_ERR_INVALID;

    const int64_t n = req->n, k = req->k;
    const size_t count = (size_t)n * (size_t)k;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(req->w[i])) {
            set_reason(why, "value", "fp8: weight [%lld, %lld] is not finite", (long long)(i / (size_t)k),
                       (long long)(i % (size_t)k));
            return QC_ERR_INVALID;
        }

    /* scales from the absolute maximum of each scale's range; zero padding of
     * ragged blocks (DeepSeek-V3) would not change a maximum, so none is made */
    const int64_t n_scales = n_weight_scales(scheme, n, k);
    uint8_t *q = g_api->alloc(count);
    float *scales = g_api->alloc((size_t)n_scales * sizeof(float));
    float *as = scheme_is_static(scheme) ? g_api->alloc(sizeof(float)) : NULL;
    if (!q || !scales || (scheme_is_static(scheme) && !as)) {
        g_api->free(q);
        g_api->free(scales);
        g_api->free(as);
        set_reason(why, "nomem", "fp8: cannot allocate %zu bytes for a %lldx%lld weight", count, (long long)n,
                   (long long)k);
        return QC_ERR_NOMEM;
    }
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < k; t++) {
            float a = fabsf(req->w[j * k + t]);
            int64_t i = weight_scale_index(scheme, j, t, k);
            if (a > scales[i]) scales[i] = a; /* buffers start zero-filled */
        }
    for (int64_t i = 0; i < n_scales; i++) scales[i] = scale_of(scales[i]);
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < k; t++)
            q[j * k + t] = qc_fp8_e4m3_encode(req->w[j * k + t] / weight_scale_at(scheme, scales, j, t, k));

    out->struct_size = sizeof *out;
    out->format = "fp8";
    out->n = out->n_padded = n;
    out->k = out->k_padded = k;
    out->group_size = scheme == FP8_SCHEME_BLOCK ? FP8_BLOCK : 0;
    out->scheme = scheme;
    out->pack_version = 1;
    out->buffers[0] = (qc_buffer){"qweight", q, count, QC_DT_F8_E4M3, QC_MEM_WEIGHTS};
    out->buffers[1] = (qc_buffer){"scales", scales, (size_t)n_scales * sizeof(float), QC_DT_F32, QC_MEM_SCALES};
    out->n_buffers = 2;
    if (as) {
        *as = act_scale;
        out->buffers[2] = (qc_buffer){"act_scale", as, sizeof(float), QC_DT_F32, QC_MEM_SCALES};
        out->n_buffers = 3;
    }
    out->logical_bits = 8;
    return QC_OK;
}

/* Checks a packed weight's buffers against its scheme and shape. */
static int packed_ok(const qc_packed_weight *w, const uint8_t **q, const float **scales) {
    if (!w || w->scheme == 0 || w->scheme >= FP8_SCHEME_COUNT_ || w->n <= 0 || w->k <= 0) return 0;
    const qc_buffer *bq = find_buffer(w, "qweight"), *bs = find_buffer(w, "scales");
    if (!bq || !bs || !bq->data || !bs->data) return 0;
    if (bq->bytes < (size_t)w->n * (size_t)w->k) return 0;
    if (bs->bytes < (size_t)n_weight_scales(w->scheme, w->n, w->k) * sizeof(float)) return 0;
    *q = bq->data;
    *scales = bs->data;
    return 1;
}

/* w[j, t] = decode(q[j, t]) * scale, one f32 multiply. */
static qc_status fp8_dequantize(const qc_packed_weight *w, float *out) {
    const uint8_t *q;
    const float *scales;
    if (!out || !packed_ok(w, &q, &scales)) return QC_ERR_INVALID;
    float lut[256];
    qc_fp8_e4m3_table(lut);
    for (int64_t j = 0; j < w->n; j++)
        for (int64_t t = 0; t < w->k; t++)
            out[j * w->k + t] = lut[q[j * w->k + t]] * weight_scale_at(w->scheme, scales, j, t, w->k);
    return QC_OK;
}

/* Saturation: elements whose src / scale the encoder had to clip (the
 * rounded magnitude would exceed 448).  Utilization: distinct finite codes in
 * qweight over the 254 finite E4M3 codes (+0 and -0 are two codes). */
static qc_status fp8_code_stats(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                                double *code_utilization) {
    const uint8_t *q;
    const float *scales;
    if (!packed_ok(w, &q, &scales)) return QC_ERR_INVALID;
    const size_t count = (size_t)w->n * (size_t)w->k;
    if (saturated_ratio) {
        if (!src) return QC_ERR_INVALID;
        size_t sat = 0;
        for (int64_t j = 0; j < w->n; j++)
            for (int64_t t = 0; t < w->k; t++) {
                int s;
                qc_fp8_e4m3_encode_sat(src[j * w->k + t] / weight_scale_at(w->scheme, scales, j, t, w->k), &s);
                sat += (size_t)s;
            }
        *saturated_ratio = (double)sat / (double)count;
    }
    if (code_utilization) {
        unsigned char seen[256] = {0};
        unsigned used = 0;
        for (size_t i = 0; i < count; i++) seen[q[i]] = 1;
        for (unsigned c = 0; c < 256; c++) used += seen[c] && !qc_fp8_e4m3_is_nan((uint8_t)c);
        *code_utilization = (double)used / QC_FP8_E4M3_FINITE_CODES;
    }
    return QC_OK;
}

/* ---- reference kernels --------------------------------------------------- */

/*
 * y[i, j] for x f32 [m, k] and the packed weight, as defined in
 * docs/formats/fp8.md:
 *   1. activations: a_s per scope (whole x, row, or row x 128-K group) is
 *      amax/448 (scale_of) or the static scale; xq = E4M3(x / a_s);
 *   2. products of decoded codes are exact in f32 (4 significant bits each);
 *   3. each K group (all of K, or 128 for the block recipe) is summed in f32
 *      in increasing t;
 *   4. tensor/channel: y = sum * (a_s * w_s).  block: acc = 0, then for each
 *      group g in order acc = fmaf(sum_g, a_s[i,g] * w_s[j/128,g], acc).
 * Products being exact makes step 3 immune to FMA contraction, and step 4
 * spells out its only fused operation, so any C compiler gives these bits.
 */
typedef struct fp8_linear {
    const float *x;
    const uint8_t *qw;
    const float *ws;
    float *y;
    int64_t m, n, k;
    uint32_t scheme;
    float static_as; /* static schemes: the activation scale */
} fp8_linear;

/* The reference has no way to report an error; on allocation failure every
 * output is NaN so the failure cannot pass for a result. */
static void fill_nan(float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] = NAN;
}

/* Step 1 for x [m, k]: the activation scale of each (row, K group) into
 * as[m * ng] and the decoded E4M3 codes into xa[m, k].  G is the group
 * length (k, or 128 for the block recipe). */
static void quantize_act(uint32_t scheme, float static_as, const float *x, int64_t m, int64_t k, int64_t G,
                         const float *lut, float *xa, float *as) {
    const int64_t ng = ceil_div(k, G);
    if (scheme_is_static(scheme)) {
        for (int64_t i = 0; i < m * ng; i++) as[i] = static_as;
    } else if (scheme == FP8_SCHEME_TENSOR) {
        float amax = 0.f;
        for (int64_t i = 0; i < m * k; i++) amax = amax_step(amax, x[i]);
        for (int64_t i = 0; i < m; i++) as[i] = scale_of(amax);
    } else {
        for (int64_t i = 0; i < m; i++)
            for (int64_t g = 0; g < ng; g++) {
                float amax = 0.f;
                int64_t t1 = (g + 1) * G < k ? (g + 1) * G : k;
                for (int64_t t = g * G; t < t1; t++) amax = amax_step(amax, x[i * k + t]);
                as[i * ng + g] = scale_of(amax);
            }
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < k; t++) xa[i * k + t] = lut[qc_fp8_e4m3_encode(x[i * k + t] / as[i * ng + t / G])];
}

static void fp8_linear_run(const fp8_linear *L) {
    const int64_t m = L->m, n = L->n, k = L->k;
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        memset(L->y, 0, (size_t)m * (size_t)n * sizeof(float));
        return;
    }
    const int block = L->scheme == FP8_SCHEME_BLOCK;
    const int64_t G = block ? FP8_BLOCK : k, ng = ceil_div(k, G), kb = ceil_div(k, FP8_BLOCK);
    float *xa = malloc((size_t)m * (size_t)k * sizeof(float));  /* decoded activation codes */
    float *as = malloc((size_t)m * (size_t)ng * sizeof(float)); /* activation scale per row x group */
    float *wp = malloc((size_t)k * FP8_PANEL * sizeof(float));  /* decoded weight panel, [t][q] */
    if (!xa || !as || !wp) {
        free(xa);
        free(as);
        free(wp);
        fill_nan(L->y, m * n);
        return;
    }
    float lut[256];
    qc_fp8_e4m3_table(lut);
    quantize_act(L->scheme, L->static_as, L->x, m, k, G, lut, xa, as);

    /* 2-4. FP8_PANEL weight rows at a time, transposed so the independent
     * accumulators of one row of x sit side by side */
    for (int64_t j0 = 0; j0 < n; j0 += FP8_PANEL) {
        const int64_t nj = n - j0 < FP8_PANEL ? n - j0 : FP8_PANEL;
        for (int64_t t = 0; t < k; t++)
            for (int64_t q = 0; q < FP8_PANEL; q++) wp[t * FP8_PANEL + q] = q < nj ? lut[L->qw[(j0 + q) * k + t]] : 0.f;
        for (int64_t i = 0; i < m; i++) {
            const float *xr = xa + i * k;
            float acc[FP8_PANEL] = {0};
            for (int64_t g = 0; g < ng; g++) {
                float part[FP8_PANEL] = {0};
                const int64_t t1 = (g + 1) * G < k ? (g + 1) * G : k;
                for (int64_t t = g * G; t < t1; t++) {
                    const float xv = xr[t];
                    const float *wr = wp + t * FP8_PANEL;
                    for (int q = 0; q < FP8_PANEL; q++) part[q] += xv * wr[q];
                }
                const float a_s = as[i * ng + g];
                for (int64_t q = 0; q < nj; q++) {
                    if (block) {
                        const float w_s = L->ws[((j0 + q) / FP8_BLOCK) * kb + g];
                        acc[q] = fmaf(part[q], a_s * w_s, acc[q]);
                    } else {
                        const float w_s = L->scheme == FP8_SCHEME_TENSOR || L->scheme == FP8_SCHEME_TENSOR_STATIC
                                              ? L->ws[0]
                                              : L->ws[j0 + q];
                        acc[q] = part[q] * (a_s * w_s);
                    }
                }
            }
            for (int64_t q = 0; q < nj; q++) L->y[i * n + j0 + q] = acc[q];
        }
    }
    free(xa);
    free(as);
    free(wp);
}

static void fp8_linear_tensor_ref(const float *x, const uint8_t *qweight, const float *scales, float *y, int64_t m,
                                  int64_t n, int64_t k) {
    fp8_linear L = {x, qweight, scales, y, m, n, k, FP8_SCHEME_TENSOR, 0.f};
    fp8_linear_run(&L);
}
static void fp8_linear_channel_ref(const float *x, const uint8_t *qweight, const float *scales, float *y, int64_t m,
                                   int64_t n, int64_t k) {
    fp8_linear L = {x, qweight, scales, y, m, n, k, FP8_SCHEME_CHANNEL, 0.f};
    fp8_linear_run(&L);
}
static void fp8_linear_block_ref(const float *x, const uint8_t *qweight, const float *scales, float *y, int64_t m,
                                 int64_t n, int64_t k) {
    fp8_linear L = {x, qweight, scales, y, m, n, k, FP8_SCHEME_BLOCK, 0.f};
    fp8_linear_run(&L);
}
static void fp8_linear_tensor_static_ref(const float *x, const uint8_t *qweight, const float *scales,
                                         const float *act_scale, float *y, int64_t m, int64_t n, int64_t k) {
    fp8_linear L = {x, qweight, scales, y, m, n, k, FP8_SCHEME_TENSOR_STATIC, act_scale[0]};
    fp8_linear_run(&L);
}
static void fp8_linear_channel_static_ref(const float *x, const uint8_t *qweight, const float *scales,
                                          const float *act_scale, float *y, int64_t m, int64_t n, int64_t k) {
    fp8_linear L = {x, qweight, scales, y, m, n, k, FP8_SCHEME_CHANNEL_STATIC, act_scale[0]};
    fp8_linear_run(&L);
}

/* x_out = decode(E4M3(x / a_s)) * a_s, one f32 multiply, with the scales
 * the weight's scheme uses: what the reference kernels multiply, so a float
 * GEMM with `dequantize`'s weights differs from them only in rounding order. */
static qc_status fp8_quantize_activations(const qc_packed_weight *w, const float *x, int64_t m, float *x_out) {
    const uint8_t *q;
    const float *scales;
    if (!x || !x_out || m < 0 || !packed_ok(w, &q, &scales)) return QC_ERR_INVALID;
    float static_as = 0.f;
    if (scheme_is_static(w->scheme)) {
        const qc_buffer *b = find_buffer(w, "act_scale");
        if (!b || !b->data || b->bytes < sizeof(float)) return QC_ERR_INVALID;
        static_as = *(const float *)b->data;
    }
    if (m == 0) return QC_OK;
    const int64_t k = w->k, G = w->scheme == FP8_SCHEME_BLOCK ? FP8_BLOCK : k, ng = ceil_div(k, G);
    float *as = malloc((size_t)m * (size_t)ng * sizeof(float));
    if (!as) return QC_ERR_NOMEM;
    float lut[256];
    qc_fp8_e4m3_table(lut);
    quantize_act(w->scheme, static_as, x, m, k, G, lut, x_out, as);
    for (int64_t i = 0; i < m; i++)
        for (int64_t t = 0; t < k; t++) x_out[i * k + t] *= as[i * ng + t / G];
    free(as);
    return QC_OK;
}

/* Parameter order: x, the weight's buffers, y, then the sizes. */
static const qc_kernel_param g_params_dynamic[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};
static const qc_kernel_param g_params_static[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"w.act_scale", QC_PARAM_PTR},
    {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64},         {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

static qc_status register_ref(const qc_host_api *api, qc_host *host, const char *id, void (*fn)(void),
                              int static_act, int (*elig)(const qc_problem *, qc_reason *)) {
    qc_kernel_desc kd = {
        .struct_size = sizeof kd,
        .id = id,
        .format = "fp8",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .n_params = static_act ? sizeof g_params_static / sizeof g_params_static[0]
                               : sizeof g_params_dynamic / sizeof g_params_dynamic[0],
        .params = static_act ? g_params_static : g_params_dynamic,
        .reference = fn,
        .eligible = elig,
    };
    return api->register_kernel(host, &kd);
}

static const uint32_t g_group_sizes[] = {FP8_BLOCK};

static qc_status fp8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    g_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "fp8",
        .summary = "FP8 E4M3 W8A8: per-tensor, per-channel x per-token, or 128x128 block scales",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F8_E4M3,
        .act_dtype = QC_DT_F8_E4M3,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_CHANNEL, /* the default scheme */
        .act_scale = QC_GRAN_TOKEN,
        .group_sizes = g_group_sizes, /* only the block scheme has one */
        .n_group_sizes = 1,
        .default_group_size = 0,
        .supported_arch = {80, QC_SM_ANY}, /* below sm_89 as a W8A16 path */
        .native_arch = {89, QC_SM_ANY},
        .n_align = FP8_ALIGN,
        .k_align = FP8_ALIGN,
        .bits_per_weight = 8,
        .effective_bits = 8.0078125, /* one f32 scale per row at K=4096 */
        .quantize = fp8_quantize,
        .dequantize = fp8_dequantize,
        .release = NULL, /* host->free on each buffer */
        .eligible = fp8_eligible,
        .code_stats = fp8_code_stats,
        .quantize_activations = fp8_quantize_activations,
    };
    qc_status st = api->register_format(host, &f);
    /* default first: qc_select_format takes the first eligible kernel */
    if (st == QC_OK)
        st = register_ref(api, host, "fp8.linear_channel_ref", (void (*)(void))fp8_linear_channel_ref, 0, elig_channel);
    if (st == QC_OK)
        st = register_ref(api, host, "fp8.linear_tensor_ref", (void (*)(void))fp8_linear_tensor_ref, 0, elig_tensor);
    if (st == QC_OK)
        st = register_ref(api, host, "fp8.linear_block_ref", (void (*)(void))fp8_linear_block_ref, 0, elig_block);
    if (st == QC_OK)
        st = register_ref(api, host, "fp8.linear_tensor_static_ref", (void (*)(void))fp8_linear_tensor_static_ref, 1,
                          elig_tensor_static);
    if (st == QC_OK)
        st = register_ref(api, host, "fp8.linear_channel_static_ref", (void (*)(void))fp8_linear_channel_static_ref,
                          1, elig_channel_static);
    if (st == QC_OK) st = fp8_kernels_register(api, host);
    if (st != QC_OK) snprintf(err, errlen, "fp8: registering the format or a kernel failed");
    return st;
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.fp8",
    .name = "fp8",
    .version = "0.2.0",
    .description = "FP8 E4M3 weights and activations (W8A8)",
    .init = fp8_init,
};
