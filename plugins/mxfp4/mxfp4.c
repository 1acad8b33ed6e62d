/* mxfp4.c - OCP MX FP4: E2M1 elements with one E8M0 scale per 32. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

#include "../common/qc_bf16.h"
#include "mxfp4_cuda.h"

/*
 * OCP Microscaling v1.0, MXFP4 (docs/formats/mxfp4.md is the long form):
 *   block of 32 along K, scale X = 2^(e - 127) from one E8M0 byte e (0xFF = NaN)
 *   e = clamp(floor(log2(amax)) - 2, -127, 127) + 127; all-zero block: e = 0
 *   element = E2M1 code of V / X, round to nearest even, clamped to +-6
 * Layout: "qweight" u8 [n, k/2], element 2i of a row in the low nibble of
 * byte i and 2i+1 in the high nibble; "scales" E8M0 [n, k/32].
 */

#define MX_FORMAT "mxfp4"
#define MX_BLOCK 32
#define MX_ALIGN_N 8
#define MX_EMAX_ELEM 2 /* E2M1's largest exponent: 6 = 1.5 * 2^2 */
#define MX_E8M0_NAN 0xFFu

static const qc_host_api *g_api;

/* E2M1 magnitudes by code (bit 3 is the sign). */
static const float g_e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static void why_set(qc_reason *why, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

static float e2m1_value(uint8_t code) {
    float v = g_e2m1[code & 7];
    return (code & 8) ? -v : v;
}

/* 2^(e-127); 0xFF is NaN.  e = 0 gives the subnormal 2^-127, exactly. */
static float e8m0_value(uint8_t e) {
    if (e == MX_E8M0_NAN) return NAN;
    return ldexpf(1.0f, (int)e - 127);
}

/* Round |p| (already in scale units) to the nearest E2M1 magnitude code,
 * ties to the even code (even mantissa), saturating at 6. */
static uint8_t e2m1_round(float a) {
    for (uint8_t c = 0; c < 7; c++) {
        float mid = 0.5f * (g_e2m1[c] + g_e2m1[c + 1]); /* exact: all halves of the table are representable */
        if (a < mid) return c;
        if (a == mid) return (c & 1) ? (uint8_t)(c + 1) : c;
    }
    return 7;
}

/* Encode one block of 32 finite values: scale byte and 16 packed bytes. */
static void encode_block(const float *v, uint8_t *scale, uint8_t *packed) {
    float amax = 0.0f;
    for (int i = 0; i < MX_BLOCK; i++)
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
    int shared = -127; /* an all-zero block gets the smallest scale, as the spec's clamp would */
    if (amax > 0.0f) {
        int ex;
        frexpf(amax, &ex); /* amax = f * 2^ex, f in [0.5, 1): floor(log2 amax) = ex - 1, subnormals too */
        shared = ex - 1 - MX_EMAX_ELEM;
        if (shared < -127) shared = -127;
        if (shared > 127) shared = 127;
    }
    *scale = (uint8_t)(shared + 127);
    for (int i = 0; i < MX_BLOCK; i += 2) {
        uint8_t c[2];
        for (int h = 0; h < 2; h++) {
            /* Scaling by a power of two is exact unless it underflows, and
             * an underflowed quotient is far below E2M1's first tie (0.25). */
            float p = ldexpf(v[i + h], -shared);
            c[h] = (uint8_t)(e2m1_round(fabsf(p)) | (signbit(p) ? 8u : 0u));
        }
        packed[i / 2] = (uint8_t)(c[0] | (c[1] << 4));
    }
}

/* Decode one row of k elements (k a multiple of 32). */
static void decode_row(const uint8_t *q, const uint8_t *sc, int64_t k, float *out) {
    for (int64_t b = 0; b < k / MX_BLOCK; b++) {
        const float x = e8m0_value(sc[b]);
        for (int i = 0; i < MX_BLOCK / 2; i++) {
            uint8_t byte = q[b * (MX_BLOCK / 2) + i];
            out[b * MX_BLOCK + 2 * i] = x * e2m1_value(byte & 15);
            out[b * MX_BLOCK + 2 * i + 1] = x * e2m1_value(byte >> 4);
        }
    }
}

static int shape_ok(int64_t n, int64_t k, uint32_t group_size, qc_reason *why) {
    if (n <= 0 || k <= 0) {
        why_set(why, "shape", MX_FORMAT ": empty weight %lldx%lld", (long long)n, (long long)k);
        return 0;
    }
    if (n % MX_ALIGN_N) {
        why_set(why, "align_n", MX_FORMAT " needs N to be a multiple of %d, layer has N=%lld", MX_ALIGN_N,
                (long long)n);
        return 0;
    }
    if (k % MX_BLOCK) {
        why_set(why, "align_k", MX_FORMAT " needs K to be a multiple of its block of %d, layer has K=%lld",
                MX_BLOCK, (long long)k);
        return 0;
    }
    if (group_size != 0 && group_size != MX_BLOCK) {
        why_set(why, "group", MX_FORMAT " has a fixed block of %d, not group %u", MX_BLOCK, group_size);
        return 0;
    }
    if ((uint64_t)n > SIZE_MAX / 4u / (uint64_t)k) {
        why_set(why, "shape", MX_FORMAT ": %lldx%lld elements overflow", (long long)n, (long long)k);
        return 0;
    }
    return 1;
}

static int mx_eligible(const qc_problem *p, qc_reason *why) { return shape_ok(p->n, p->k, p->group_size, why); }

static qc_status mx_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    if (!out) return QC_ERR_INVALID;
    /* Every field written here is in the first qc_packed_weight, which no
     * host's struct_size can be below, so clearing sizeof *out stays in bounds. */
    memset(out, 0, sizeof *out);
    if (!req || req->struct_size < sizeof(qc_quant_request) || !req->w) {
        why_set(why, "shape", MX_FORMAT ": request is NULL, too old, or has no weights");
        return QC_ERR_INVALID;
    }
    if (!shape_ok(req->n, req->k, req->group_size, why)) return QC_ERR_INVALID;
    if (req->scheme && *req->scheme && strcmp(req->scheme, "ocp") != 0) {
        why_set(why, "scheme", MX_FORMAT ": unknown scheme '%s' (only the OCP v1.0 rule, \"ocp\")", req->scheme);
        return QC_ERR_INVALID;
    }
    if (req->act_scale != 0.0f) {
        why_set(why, "scheme", MX_FORMAT " is weight-only; a static activation scale does not apply");
        return QC_ERR_UNSUPPORTED;
    }
    const int64_t n = req->n, k = req->k;
    const size_t count = (size_t)n * (size_t)k;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(req->w[i])) {
            why_set(why, "nonfinite", MX_FORMAT ": weight element %zu is not finite", i);
            return QC_ERR_INVALID;
        }
    uint8_t *q = g_api->alloc(count / 2);
    uint8_t *sc = g_api->alloc(count / MX_BLOCK);
    if (!q || !sc) {
        g_api->free(q);
        g_api->free(sc);
        why_set(why, "nomem", MX_FORMAT ": cannot allocate %zu bytes", count / 2 + count / MX_BLOCK);
        return QC_ERR_NOMEM;
    }
    for (size_t b = 0; b < count / MX_BLOCK; b++) encode_block(req->w + b * MX_BLOCK, sc + b, q + b * (MX_BLOCK / 2));
    out->struct_size = sizeof *out;
    out->format = MX_FORMAT;
    out->n = out->n_padded = n;
    out->k = out->k_padded = k;
    out->group_size = MX_BLOCK;
    out->scheme = 0;
    out->pack_version = 1;
    out->n_buffers = 2;
    out->buffers[0] = (qc_buffer){"qweight", q, count / 2, QC_DT_U8, QC_MEM_WEIGHTS};
    out->buffers[1] = (qc_buffer){"scales", sc, count / MX_BLOCK, QC_DT_E8M0, QC_MEM_SCALES};
    out->logical_bits = 4.0 + 8.0 / MX_BLOCK;
    return QC_OK;
}

static const uint8_t *find_buf(const qc_packed_weight *w, const char *name, size_t bytes) {
    for (uint32_t i = 0; i < w->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++)
        if (w->buffers[i].name && strcmp(w->buffers[i].name, name) == 0)
            return w->buffers[i].bytes == bytes ? w->buffers[i].data : NULL;
    return NULL;
}

static int unpack(const qc_packed_weight *w, const uint8_t **q, const uint8_t **sc) {
    if (!w || !w->format || strcmp(w->format, MX_FORMAT) != 0 || !shape_ok(w->n, w->k, 0, NULL)) return -1;
    size_t count = (size_t)w->n * (size_t)w->k;
    *q = find_buf(w, "qweight", count / 2);
    *sc = find_buf(w, "scales", count / MX_BLOCK);
    return *q && *sc ? 0 : -1;
}

static qc_status mx_dequantize(const qc_packed_weight *w, float *out) {
    const uint8_t *q, *sc;
    if (!out || unpack(w, &q, &sc)) return QC_ERR_INVALID;
    for (int64_t i = 0; i < w->n; i++) decode_row(q + i * (w->k / 2), sc + i * (w->k / MX_BLOCK), w->k, out + i * w->k);
    return QC_OK;
}

/* Saturated (as fp8 counts it): elements whose |src / X|, rounded to nearest
 * even on the E2M1 grid continued past 6 (next 8), would exceed 6, i.e.
 * |src / X| >= 7 (the tie goes to 8's even mantissa): the clamp changed them
 * beyond rounding.  X is a power of two, so the quotient is exact.
 * Utilization: distinct 4-bit codes (of 16, -0 included) that occur. */
static qc_status mx_code_stats(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                               double *code_utilization) {
    const uint8_t *q, *sc;
    if (!src || unpack(w, &q, &sc)) return QC_ERR_INVALID;
    size_t count = (size_t)w->n * (size_t)w->k, sat = 0;
    int seen[16] = {0};
    for (size_t i = 0; i < count; i++) {
        uint8_t byte = q[i / 2];
        seen[(i & 1) ? byte >> 4 : byte & 15] = 1;
        uint8_t e = sc[i / MX_BLOCK];
        if (e != MX_E8M0_NAN && fabs(ldexp((double)src[i], 127 - (int)e)) >= 7.0) sat++;
    }
    int used = 0;
    for (int c = 0; c < 16; c++) used += seen[c];
    if (saturated_ratio) *saturated_ratio = (double)sat / (double)count;
    if (code_utilization) *code_utilization = used / 16.0;
    return QC_OK;
}

/* Reference kernel (weight-only A16): y[m,n] = bf16(x)[m,k] . dec(W)[n,k]^T,
 * f32 products (exact: 8 x 2 significant bits) summed in order of k from
 * 0.0f.  Arguments it cannot honour (k not a multiple of 32, NULLs, no
 * memory) give NaN outputs, since a kernel has no error channel. */
static void mx_linear_ref(const float *x, const uint8_t *qw, const uint8_t *sc, float *y, int64_t m, int64_t n,
                          int64_t k) {
    if (!y || m <= 0 || n <= 0) return;
    int ok = x && qw && sc && k > 0 && k % MX_BLOCK == 0 && (uint64_t)m <= SIZE_MAX / 4u / (uint64_t)k;
    float *xb = ok ? malloc((size_t)m * (size_t)k * sizeof(float)) : NULL;
    float *wr = ok ? malloc((size_t)k * sizeof(float)) : NULL;
    if (!xb || !wr) {
        for (int64_t i = 0; i < m * n; i++) y[i] = NAN;
        free(xb);
        free(wr);
        return;
    }
    for (int64_t i = 0; i < m * k; i++) xb[i] = qc_round_bf16(x[i]);
    for (int64_t o = 0; o < n; o++) {
        decode_row(qw + o * (k / 2), sc + o * (k / MX_BLOCK), k, wr);
        for (int64_t i = 0; i < m; i++) {
            const float *xr = xb + i * k;
            float acc = 0.0f;
            for (int64_t t = 0; t < k; t++) acc += xr[t] * wr[t];
            y[i * n + o] = acc;
        }
    }
    free(xb);
    free(wr);
}

/* The GPU kernels' reference: the same product with x given as bf16 bits
 * ("x.bf16", as the engine's norms write it); the same in-order f32 sum and
 * the same NaN outputs for arguments it cannot honour. */
static void mx_linear_bx_ref(const uint16_t *x, const uint8_t *qw, const uint8_t *sc, float *y, int64_t m, int64_t n,
                             int64_t k) {
    if (!y || m <= 0 || n <= 0) return;
    int ok = x && qw && sc && k > 0 && k % MX_BLOCK == 0 && (uint64_t)m <= SIZE_MAX / 4u / (uint64_t)k;
    float *xf = ok ? malloc((size_t)m * (size_t)k * sizeof(float)) : NULL;
    if (xf)
        for (int64_t i = 0; i < m * k; i++) xf[i] = qc_bf16_to_f32(x[i]);
    /* bf16 values round to themselves, so the f32 reference computes the same sums */
    mx_linear_ref(xf ? xf : NULL, qw, sc, y, m, n, k);
    free(xf);
}

/* The activations the kernel multiplies: x rounded to bf16. */
static qc_status mx_quantize_activations(const qc_packed_weight *w, const float *x, int64_t m, float *x_out) {
    const uint8_t *q, *sc;
    if (!x || !x_out || m < 0 || unpack(w, &q, &sc) || (m && (uint64_t)m > SIZE_MAX / 4u / (uint64_t)w->k))
        return QC_ERR_INVALID;
    for (int64_t i = 0; i < m * w->k; i++) x_out[i] = qc_round_bf16(x[i]);
    return QC_OK;
}

/* Parameter order as the sibling formats: x, the weight's buffers, y, then the sizes. */
static const qc_kernel_param mx_params[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};

static const uint32_t mx_groups[] = {MX_BLOCK};

static qc_status mxfp4_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    g_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = MX_FORMAT,
        .summary = "OCP MXFP4: E2M1 weights, E8M0 scale per 32; weight-only (bf16 activations)",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F4_E2M1,
        .act_dtype = QC_DT_BF16,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_E8M0,
        .weight_scale = QC_GRAN_GROUP,
        .act_scale = QC_GRAN_NONE,
        .group_sizes = mx_groups,
        .n_group_sizes = 1,
        .default_group_size = MX_BLOCK,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {100, QC_SM_ANY},
        .n_align = MX_ALIGN_N,
        .k_align = MX_BLOCK,
        .bits_per_weight = 4,
        .effective_bits = 4.25,
        .quantize = mx_quantize,
        .dequantize = mx_dequantize,
        .eligible = mx_eligible,
        .code_stats = mx_code_stats,
        .quantize_activations = mx_quantize_activations,
    };
    qc_status st = api->register_format(host, &f);
    if (st != QC_OK) return st;
    qc_kernel_desc kd = {
        .struct_size = sizeof kd,
        .id = "mxfp4.linear_ref",
        .format = MX_FORMAT,
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .n_params = sizeof mx_params / sizeof mx_params[0],
        .params = mx_params,
        .reference = (void (*)(void))mx_linear_ref,
    };
    st = api->register_kernel(host, &kd);
    return st == QC_OK ? mxfp4_cuda_register(api, host, (void (*)(void))mx_linear_bx_ref) : st;
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.mxfp4",
    .name = "mxfp4",
    .version = "0.1.0",
    .description = "OCP microscaling FP4 (MXFP4)",
    .init = mxfp4_init,
};
