/* w8a8_int8.c - INT8 per-channel weights, dynamic per-token INT8 activations, INT32 accumulation. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

#include "../common/qc_bf16.h"
#include "w8a8_int8_cuda.h"

/*
 * Definition (docs/formats/w8a8_int8.md is the long form):
 *   weights     sw[i] = amax_j |W'[i,j]| / 127 (f32), q = clamp(rne(W'[i,j] / sw[i]), -127, 127)
 *   activations sx    = amax_j |x'[j]| / 127 per row, q = clamp(rne(x'[j] / sx), -127, 127)
 *   output      y = (float)acc * sx * sw[i], acc the exact INT32 dot product
 * where W' = W * s and x' = x / s with SmoothQuant factors s[j] (all 1, and
 * no "smooth" buffer, when no calibration statistic was given).
 */

#define I8_FORMAT "w8a8_int8"
#define I8_ALIGN_N 16
#define I8_ALIGN_K 16
#define I8_QMAX 127
/* Largest K for which sum of K products 127*127 still fits INT32. */
#define I8_K_MAX ((int64_t)(INT32_MAX / (I8_QMAX * I8_QMAX)))
/* Scheme ids (qc_packed_weight.scheme, qc_problem.scheme; 0 in a problem = plain). */
#define I8_SCHEME_PLAIN 1u  /* per-channel weights, no smoothing */
#define I8_SCHEME_SMOOTH 2u /* SmoothQuant factors folded in, "smooth" buffer present */
#define I8_DEFAULT_ALPHA 0.5
/* SmoothQuant's own lower clamps, so no factor or column max is zero. */
#define I8_SMOOTH_MIN 1e-5

static const qc_host_api *g_api;

static void why_set(qc_reason *why, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

/* Round half to even without depending on the floating-point environment;
 * callers pass |v| <= 127. */
static float rne(float v) {
    float a = fabsf(v), r = floorf(a);
    float d = a - r; /* exact: r = 0, or a/2 <= r <= a (Sterbenz) */
    if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0.0f)) r += 1.0f;
    return copysignf(r, v);
}

/* Code of v given scale s > 0: one f32 division, clamp to +-127 (the
 * quotient can pass 127 by rounding, or by far when s is subnormal), then
 * round half to even. */
static int8_t quant_code(float v, float s) {
    float t = v / s;
    if (t > 127.0f) t = 127.0f;
    if (t < -127.0f) t = -127.0f;
    return (int8_t)rne(t);
}

/* Shape checks shared by eligible and quantize.  1 = fine. */
static int shape_ok(int64_t n, int64_t k, uint32_t group_size, qc_reason *why) {
    if (n <= 0 || k <= 0) {
        why_set(why, "shape", I8_FORMAT ": empty weight %lldx%lld", (long long)n, (long long)k);
        return 0;
    }
    if (n % I8_ALIGN_N) {
        why_set(why, "align_n", I8_FORMAT " needs N to be a multiple of %d, layer has N=%lld", I8_ALIGN_N,
                (long long)n);
        return 0;
    }
    if (k % I8_ALIGN_K) {
        why_set(why, "align_k", I8_FORMAT " needs K to be a multiple of %d, layer has K=%lld", I8_ALIGN_K,
                (long long)k);
        return 0;
    }
    if (k > I8_K_MAX) {
        why_set(why, "shape", I8_FORMAT ": K=%lld exceeds %lld, where INT32 accumulation could overflow",
                (long long)k, (long long)I8_K_MAX);
        return 0;
    }
    if (group_size != 0) {
        why_set(why, "group", I8_FORMAT " has per-channel scales, not groups (asked for group %u)", group_size);
        return 0;
    }
    return 1;
}

static int i8_eligible(const qc_problem *p, qc_reason *why) { return shape_ok(p->n, p->k, p->group_size, why); }

/* The recipe named by req->scheme: smoothing on/off and alpha.  0 = fine. */
static int parse_scheme(const qc_quant_request *req, int *smooth, double *alpha, qc_reason *why) {
    const char *s = req->scheme;
    *alpha = I8_DEFAULT_ALPHA;
    *smooth = req->act_absmax != NULL;
    if (!s || !*s || strcmp(s, "default") == 0) return 0;
    if (strcmp(s, "no_smooth") == 0) {
        *smooth = 0;
        return 0;
    }
    if (strncmp(s, "smoothquant", 11) == 0 && (s[11] == 0 || s[11] == ':')) {
        if (s[11] == ':') {
            char *end = NULL;
            *alpha = strtod(s + 12, &end);
            if (end == s + 12 || *end || !(*alpha >= 0.0 && *alpha <= 1.0)) {
                why_set(why, "scheme", I8_FORMAT ": scheme '%s': alpha must be a number in [0, 1]", s);
                return -1;
            }
        }
        if (!req->act_absmax) {
            why_set(why, "calib", I8_FORMAT ": scheme '%s' needs act_absmax calibration statistics", s);
            return -1;
        }
        *smooth = 1;
        return 0;
    }
    why_set(why, "scheme", I8_FORMAT ": unknown scheme '%s' (default, no_smooth, smoothquant[:alpha])", s);
    return -1;
}

/* SmoothQuant factors s[j] = a_j^alpha / max_i|W_ij|^(1-alpha).  0 = fine. */
static int smooth_factors(const qc_quant_request *req, double alpha, float *s, qc_reason *why) {
    const int64_t n = req->n, k = req->k;
    for (int64_t j = 0; j < k; j++) {
        float a = req->act_absmax[j];
        if (!isfinite(a) || a < 0.0f) {
            why_set(why, "calib", I8_FORMAT ": act_absmax[%lld] = %g is not a finite magnitude", (long long)j,
                    (double)a);
            return -1;
        }
    }
    /* column maxima of W, in one row-major pass (s starts zero-filled) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) s[j] = fmaxf(s[j], fabsf(req->w[i * k + j]));
    for (int64_t j = 0; j < k; j++) {
        const float a = req->act_absmax[j], wmax = s[j];
        /* A channel with no activation or no weight carries no information:
         * leave it unscaled instead of letting the clamp blow it up. */
        if (a == 0.0f || wmax == 0.0f) {
            s[j] = 1.0f;
            continue;
        }
        double f = pow((double)a, alpha) / pow(fmax((double)wmax, I8_SMOOTH_MIN), 1.0 - alpha);
        if (f < I8_SMOOTH_MIN) f = I8_SMOOTH_MIN;
        s[j] = (float)f;
        if (!isfinite(s[j]) || !isfinite(wmax * s[j])) {
            why_set(why, "calib", I8_FORMAT ": smoothing factor of channel %lld overflows (act_absmax %g)",
                    (long long)j, (double)a);
            return -1;
        }
    }
    return 0;
}

static qc_status i8_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    if (!out) return QC_ERR_INVALID;
    /* Every field written here is in the first qc_packed_weight, which no
     * host's struct_size can be below, so clearing sizeof *out stays in bounds. */
    memset(out, 0, sizeof *out);
    if (!req || req->struct_size < sizeof(qc_quant_request) || !req->w) {
        why_set(why, "shape", I8_FORMAT ": request is NULL, too old, or has no weights");
        return QC_ERR_INVALID;
    }
    if (!shape_ok(req->n, req->k, req->group_size, why)) return QC_ERR_INVALID;
    if (req->act_scale != 0.0f) {
        why_set(why, "scheme", I8_FORMAT " quantizes activations dynamically per token; a static scale is not supported");
        return QC_ERR_UNSUPPORTED;
    }
    int smooth;
    double alpha;
    if (parse_scheme(req, &smooth, &alpha, why)) return QC_ERR_INVALID;
    const int64_t n = req->n, k = req->k;
    if ((uint64_t)n > SIZE_MAX / (uint64_t)k) {
        why_set(why, "shape", I8_FORMAT ": %lldx%lld elements overflow", (long long)n, (long long)k);
        return QC_ERR_INVALID;
    }
    const size_t count = (size_t)n * (size_t)k;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(req->w[i])) {
            why_set(why, "nonfinite", I8_FORMAT ": weight element %zu is not finite", i);
            return QC_ERR_INVALID;
        }
    qc_status st = QC_ERR_NOMEM;
    int8_t *q = g_api->alloc(count);
    float *sw = g_api->alloc((size_t)n * sizeof(float));
    float *s = smooth ? g_api->alloc((size_t)k * sizeof(float)) : NULL;
    if (!q || !sw || (smooth && !s)) {
        why_set(why, "nomem", I8_FORMAT ": cannot allocate %zu bytes", count + (size_t)(n + k) * sizeof(float));
        goto fail;
    }
    st = QC_ERR_INVALID;
    if (smooth && smooth_factors(req, alpha, s, why)) goto fail;
    for (int64_t i = 0; i < n; i++) {
        const float *wr = req->w + i * k;
        float amax = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            float v = fabsf(s ? wr[j] * s[j] : wr[j]);
            if (v > amax) amax = v;
        }
        sw[i] = amax / (float)I8_QMAX;
        /* An all-zero row (or one so small that amax/127 underflows) gets
         * scale 1, as fp8 does: its codes are 0 and no scale is ever 0. */
        if (!(sw[i] > 0.0f)) sw[i] = 1.0f;
        for (int64_t j = 0; j < k; j++) q[i * k + j] = quant_code(s ? wr[j] * s[j] : wr[j], sw[i]);
    }
    out->struct_size = sizeof *out;
    out->format = I8_FORMAT;
    out->n = out->n_padded = n;
    out->k = out->k_padded = k;
    out->group_size = 0;
    out->scheme = smooth ? I8_SCHEME_SMOOTH : I8_SCHEME_PLAIN;
    out->pack_version = 1;
    out->buffers[0] = (qc_buffer){"qweight", q, count, QC_DT_I8, QC_MEM_WEIGHTS};
    out->buffers[1] = (qc_buffer){"scales", sw, (size_t)n * sizeof(float), QC_DT_F32, QC_MEM_SCALES};
    out->n_buffers = 2;
    if (smooth) out->buffers[out->n_buffers++] = (qc_buffer){"smooth", s, (size_t)k * sizeof(float), QC_DT_F32, QC_MEM_SCALES};
    out->logical_bits = (8.0 * (double)count + 32.0 * (double)n + (smooth ? 32.0 * (double)k : 0.0)) / (double)count;
    return QC_OK;
fail:
    g_api->free(q);
    g_api->free(sw);
    g_api->free(s);
    return st;
}

/* The buffer called `name` if it has exactly `bytes` bytes, else NULL. */
static const void *find_buf(const qc_packed_weight *w, const char *name, size_t bytes) {
    for (uint32_t i = 0; i < w->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++)
        if (w->buffers[i].name && strcmp(w->buffers[i].name, name) == 0)
            return w->buffers[i].bytes == bytes ? w->buffers[i].data : NULL;
    return NULL;
}

/* Check a packed weight and find its buffers (smooth may come back NULL). */
static int unpack(const qc_packed_weight *w, const int8_t **q, const float **sw, const float **s) {
    if (!w || !w->format || strcmp(w->format, I8_FORMAT) != 0 || w->n <= 0 || w->k <= 0 ||
        (uint64_t)w->n > SIZE_MAX / (uint64_t)w->k / 4u)
        return -1;
    *q = find_buf(w, "qweight", (size_t)w->n * (size_t)w->k);
    *sw = find_buf(w, "scales", (size_t)w->n * sizeof(float));
    *s = w->scheme == I8_SCHEME_SMOOTH ? find_buf(w, "smooth", (size_t)w->k * sizeof(float)) : NULL;
    if (!*q || !*sw || (w->scheme == I8_SCHEME_SMOOTH && !*s) ||
        (w->scheme != I8_SCHEME_PLAIN && w->scheme != I8_SCHEME_SMOOTH))
        return -1;
    return 0;
}

/* W in the original input space: q * sw, divided by the smoothing factor. */
static qc_status i8_dequantize(const qc_packed_weight *w, float *out) {
    const int8_t *q;
    const float *sw, *s;
    if (!out || unpack(w, &q, &sw, &s)) return QC_ERR_INVALID;
    const int64_t n = w->n, k = w->k;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
            float v = (float)q[i * k + j] * sw[i];
            out[i * k + j] = s ? v / s[j] : v;
        }
    return QC_OK;
}

/* Saturated (as fp8 counts it): elements whose |src * s / sw|, rounded to
 * nearest even, would exceed 127, i.e. |v| >= 127.5: the clamp changed them.
 * Utilization: distinct codes of the 255 in -127..127. */
static qc_status i8_code_stats(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                               double *code_utilization) {
    const int8_t *q;
    const float *sw, *s;
    if (!src || unpack(w, &q, &sw, &s)) return QC_ERR_INVALID;
    const int64_t n = w->n, k = w->k;
    uint8_t seen[256] = {0};
    size_t sat = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
            seen[(uint8_t)q[i * k + j]] = 1;
            if (sw[i] > 0.0f) {
                double v = (double)src[i * k + j] * (s ? (double)s[j] : 1.0) / (double)sw[i];
                if (fabs(v) >= I8_QMAX + 0.5) sat++;
            }
        }
    int used = 0;
    for (int c = 0; c < 256; c++) used += seen[c];
    if (saturated_ratio) *saturated_ratio = (double)sat / ((double)n * (double)k);
    if (code_utilization) *code_utilization = (double)used / (2.0 * I8_QMAX + 1.0);
    return QC_OK;
}

/* Quantize one activation row per token: x' = x / smooth (when given),
 * sx = amax|x'| / 127, xq = clamp(rne(x' / sx)).  Returns 0 when the row
 * has a non-finite value (nothing is written then). */
static int quant_row(const float *xr, const float *smooth, int64_t k, int8_t *xq, float *sx_out) {
    float amax = 0.0f;
    for (int64_t j = 0; j < k; j++) {
        float v = smooth ? xr[j] / smooth[j] : xr[j];
        if (!isfinite(v)) return 0;
        if (fabsf(v) > amax) amax = fabsf(v);
    }
    float sx = amax / (float)I8_QMAX;
    if (!(sx > 0.0f)) sx = 1.0f; /* zero row: codes 0, as for weights */
    for (int64_t j = 0; j < k; j++) xq[j] = quant_code(smooth ? xr[j] / smooth[j] : xr[j], sx);
    *sx_out = sx;
    return 1;
}

/* Reference kernel: y[m,n] = x[m,k] . W[n,k]^T with per-token INT8 x,
 * exact INT32 accumulation and y = acc * sx * sw.  `smooth` may be NULL.
 * A row of x with a non-finite value gives a row of NaN (as does any
 * argument this kernel cannot honour, since it has no error channel). */
static void i8_linear(const float *x, const int8_t *qw, const float *sw, const float *smooth, float *y, int64_t m,
                      int64_t n, int64_t k) {
    if (!y || m <= 0 || n <= 0) return;
    int8_t *xq = (x && qw && sw && k > 0 && k <= I8_K_MAX) ? malloc((size_t)k) : NULL;
    for (int64_t i = 0; i < m; i++) {
        float *yr = y + i * n;
        float sx;
        if (!xq || !quant_row(x + i * k, smooth, k, xq, &sx)) {
            for (int64_t o = 0; o < n; o++) yr[o] = NAN;
            continue;
        }
        for (int64_t o = 0; o < n; o++) {
            const int8_t *wr = qw + o * k;
            int32_t acc = 0; /* |acc| <= K_MAX * 127 * 127 fits */
            for (int64_t j = 0; j < k; j++) acc += (int32_t)xq[j] * (int32_t)wr[j];
            yr[o] = (float)acc * sx * sw[o];
        }
    }
    free(xq);
}

/* The two registered signatures: scheme 1 (plain) and scheme 2 (smoothed). */
static void i8_linear_ref(const float *x, const int8_t *qw, const float *sw, float *y, int64_t m, int64_t n,
                          int64_t k) {
    i8_linear(x, qw, sw, NULL, y, m, n, k);
}

static void i8_linear_smooth_ref(const float *x, const int8_t *qw, const float *sw, const float *smooth, float *y,
                                 int64_t m, int64_t n, int64_t k) {
    if (!smooth) { /* this signature always divides: a NULL factor table is a caller error */
        i8_linear(NULL, qw, sw, NULL, y, m, n, k);
        return;
    }
    i8_linear(x, qw, sw, smooth, y, m, n, k);
}

/* The GPU kernels' references (w8a8_int8_cuda.c has the convention). */

/* Activation quantization of bf16 rows: xq [m,k] and xs [m] by quant_row,
 * the recipe the format defines (x' = x / smooth when given).  A row with a
 * non-finite value, or one this reference cannot process (NULL x, no memory
 * for its row buffer), gets codes 0 and xs = NaN, so its outputs are NaN. */
static void i8_quant_act_rows(const uint16_t *x, const float *smooth, int8_t *xq, float *xs, int64_t m, int64_t k) {
    if (!xq || !xs || m <= 0 || k <= 0 || (uint64_t)k > SIZE_MAX / sizeof(float)) return;
    float *xr = x ? malloc((size_t)k * sizeof(float)) : NULL;
    for (int64_t i = 0; i < m; i++) {
        float sx = 0.0f;
        int ok = xr != NULL;
        if (ok) {
            for (int64_t j = 0; j < k; j++) xr[j] = qc_bf16_to_f32(x[i * k + j]);
            ok = quant_row(xr, smooth, k, xq + i * k, &sx);
        }
        if (!ok) memset(xq + i * k, 0, (size_t)k);
        xs[i] = ok ? sx : NAN;
    }
    free(xr);
}

static void i8_quant_act_ref(const uint16_t *x, int8_t *xq, float *xs, int64_t m, int64_t k) {
    i8_quant_act_rows(x, NULL, xq, xs, m, k);
}

static void i8_quant_act_smooth_ref(const uint16_t *x, const float *smooth, int8_t *xq, float *xs, int64_t m,
                                    int64_t k) {
    i8_quant_act_rows(smooth ? x : NULL, smooth, xq, xs, m, k); /* a NULL factor table: NaN rows */
}

/* The product of quantized operands: acc exact (summed in int64, so codes
 * outside -127..127 cannot overflow here; for codes the format produces it
 * equals the INT32 sum), y = (float)acc * xs * sw in that order.  Arguments
 * it cannot honour give NaN outputs. */
static void i8_linear_q_ref(const int8_t *xq, const float *xs, const int8_t *qw, const float *sw, float *y, int64_t m,
                            int64_t n, int64_t k) {
    if (!y || m <= 0 || n <= 0) return;
    const int ok = xq && xs && qw && sw && k > 0 && k <= I8_K_MAX;
    for (int64_t i = 0; i < m; i++)
        for (int64_t o = 0; o < n; o++) {
            if (!ok) {
                y[i * n + o] = NAN;
                continue;
            }
            const int8_t *xr = xq + i * k, *wr = qw + o * k;
            int64_t acc = 0;
            for (int64_t j = 0; j < k; j++) acc += (int32_t)xr[j] * (int32_t)wr[j];
            y[i * n + o] = (float)acc * xs[i] * sw[o];
        }
}

/* The wgmma GEMM's reference: the same product; its split-K workspace changes nothing in y. */
static void i8_linear_q_work_ref(const int8_t *xq, const float *xs, const int8_t *qw, const float *sw, float *y,
                                 int64_t m, int64_t n, int64_t k, void *work) {
    (void)work;
    i8_linear_q_ref(xq, xs, qw, sw, y, m, n, k);
}

/* A kernel takes the weights of its own scheme only (qc_problem.scheme). */
static int i8_el_plain(const qc_problem *p, qc_reason *why) {
    if (p->scheme == 0 || p->scheme == I8_SCHEME_PLAIN) return 1;
    why_set(why, "scheme", "w8a8_int8.linear_ref takes plain per-channel weights (scheme 1), the weight has scheme %u",
            p->scheme);
    return 0;
}

static int i8_el_smooth(const qc_problem *p, qc_reason *why) {
    if (p->scheme == I8_SCHEME_SMOOTH) return 1;
    why_set(why, "scheme", "w8a8_int8.linear_smooth_ref takes SmoothQuant weights (scheme 2), the weight has scheme %u",
            p->scheme);
    return 0;
}

/* The activations the kernel multiplies, as floats in the original input
 * space: xq * sx, times the smoothing factor (dequantize divides the weight
 * by it), so x_out . dequantize(W)^T matches the kernel up to f32 rounding.
 * A non-finite row becomes NaN, as in the kernel. */
static qc_status i8_quantize_activations(const qc_packed_weight *w, const float *x, int64_t m, float *x_out) {
    const int8_t *q;
    const float *sw, *s;
    if (!x || !x_out || m < 0 || unpack(w, &q, &sw, &s)) return QC_ERR_INVALID;
    const int64_t k = w->k;
    if (m == 0) return QC_OK;
    int8_t *xq = malloc((size_t)k);
    if (!xq) return QC_ERR_NOMEM;
    for (int64_t i = 0; i < m; i++) {
        float sx, *xo = x_out + i * k;
        if (!quant_row(x + i * k, s, k, xq, &sx)) {
            for (int64_t j = 0; j < k; j++) xo[j] = NAN;
            continue;
        }
        for (int64_t j = 0; j < k; j++) xo[j] = s ? (float)xq[j] * sx * s[j] : (float)xq[j] * sx;
    }
    free(xq);
    return QC_OK;
}

/* Parameter order as the sibling formats: x, the weight's buffers, y, then the sizes. */
static const qc_kernel_param i8_params[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};
static const qc_kernel_param i8_params_smooth[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"w.smooth", QC_PARAM_PTR},
    {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64},         {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

static qc_status int8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    g_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = I8_FORMAT,
        .summary = "INT8 per-channel weights x dynamic per-token INT8 activations, INT32 accumulate",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_I8,
        .act_dtype = QC_DT_I8,
        .accum_dtype = QC_DT_I32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_CHANNEL,
        .act_scale = QC_GRAN_TOKEN,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {80, QC_SM_ANY},
        .n_align = I8_ALIGN_N,
        .k_align = I8_ALIGN_K,
        .bits_per_weight = 8,
        .effective_bits = 8.0078125, /* one f32 scale per row at K=4096 */
        .quantize = i8_quantize,
        .dequantize = i8_dequantize,
        .eligible = i8_eligible,
        .code_stats = i8_code_stats,
        .quantize_activations = i8_quantize_activations,
    };
    qc_status st = api->register_format(host, &f);
    if (st != QC_OK) return st;
    qc_kernel_desc kd = {
        .struct_size = sizeof kd,
        .id = "w8a8_int8.linear_ref",
        .format = I8_FORMAT,
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .n_params = sizeof i8_params / sizeof i8_params[0],
        .params = i8_params,
        .reference = (void (*)(void))i8_linear_ref,
        .eligible = i8_el_plain,
    };
    st = api->register_kernel(host, &kd);
    if (st != QC_OK) return st;
    kd.id = "w8a8_int8.linear_smooth_ref";
    kd.n_params = sizeof i8_params_smooth / sizeof i8_params_smooth[0];
    kd.params = i8_params_smooth;
    kd.reference = (void (*)(void))i8_linear_smooth_ref;
    kd.eligible = i8_el_smooth;
    st = api->register_kernel(host, &kd);
    if (st != QC_OK) return st;
    /* after the two references, so that CPU selection keeps picking them */
    const i8_gpu_refs refs = {(void (*)(void))i8_quant_act_ref, (void (*)(void))i8_quant_act_smooth_ref,
                              (void (*)(void))i8_linear_q_ref, (void (*)(void))i8_linear_q_work_ref};
    return i8_cuda_register(api, host, &refs);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.w8a8_int8",
    .name = "w8a8_int8",
    .version = "0.1.0",
    .description = "INT8 weights and activations (W8A8, SmoothQuant-ready)",
    .init = int8_init,
};
