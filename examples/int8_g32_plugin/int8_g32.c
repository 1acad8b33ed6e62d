/* int8_g32.c - example third-party plugin: INT8 weights, f16 scale per 32 inputs (GGUF Q8_0), bf16 activations. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qcore/plugin.h>

/*
 * Format "x_int8_g32" (the "x_" prefix keeps third-party names apart from
 * the formats qcore ships).  Definition, which the C reference below is:
 *
 *   weights  W[n,k], k a multiple of 32, cut into groups of 32 along k.
 *            Per group: d = amax/127 (f32), stored as f16; q = round(w/d)
 *            with halves away from zero, using the f32 d (as GGUF Q8_0
 *            does), in [-127, 127].  Dequantized weight: f16(d) * q.
 *   acts     x is rounded to bf16 (nearest, ties to even) before use.
 *   linear   y[i,j] = sum over groups g of f16(d[j,g]) * P(i,j,g), where
 *            P is the f32 sum, t ascending, of bf16(x[i,t]) * q[j,t].
 *            All arithmetic in f32.
 *
 * Packed buffers: "qweight" int8 [n, k] row-major, "scales" f16 bits
 * [n, k/32] row-major.
 */

#define FMT_NAME "x_int8_g32"
#define GROUP 32
#define QMAX 127

/* The host table, valid from init until deinit.  When two runtimes in one
 * process load this file, dlopen hands both the same copy of it, so init
 * runs twice and stores the same host table again: harmless.  That is also
 * why there is no deinit clearing it while another runtime may still call. */
static const qc_host_api *g_api;

/* ---- number formats (own helpers: plugins may include only plugin.h) ---- */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f32 -> bf16 keeping the upper half, rounded to nearest with ties to even. */
static uint16_t bf16_from_f32(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays quiet NaN */
    uint32_t lsb = (u >> 16) & 1u;
    return (uint16_t)((u + 0x7fffu + lsb) >> 16);
}

static float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

/* f32 -> IEEE binary16, nearest with ties to even, with subnormals;
 * values from 65520 up become infinity. */
static uint16_t f16_from_f32(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) {
        /* Normal result: round away the 13 low mantissa bits, then move the
         * exponent bias from 127 to 15 (a carry into the exponent is right). */
        uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    /* Subnormal result: the value in units of 2^-24, rounded. */
    uint32_t e = a >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact: at most 10 significant bits */
        return sign ? -v : v;
    }
    if (e == 31) return f32_from_bits(sign | 0x7f800000u | (m << 13));
    return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- helpers ---- */

static void set_reason(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

/* Shared by quantize and eligibility, so both refuse with the same words. */
static int shape_ok(int64_t k, uint32_t group_size, qc_reason *why) {
    if (group_size != 0 && group_size != GROUP) {
        set_reason(why, "group", FMT_NAME " has only group size %d, asked for %u", GROUP, group_size);
        return 0;
    }
    if (k % GROUP) {
        set_reason(why, "align_k", FMT_NAME " needs K to be a multiple of %d (one f16 scale per %d inputs), got K=%lld",
                   GROUP, GROUP, (long long)k);
        return 0;
    }
    return 1;
}

/* ---- format functions ---- */

static void int8_release(qc_packed_weight *w) {
    for (uint32_t i = 0; i < w->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++) {
        g_api->free(w->buffers[i].data);
        w->buffers[i].data = NULL;
    }
    w->n_buffers = 0;
}

static qc_status int8_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    /* Every field read here is in the first version of the struct; a later,
     * longer request is fine, a shorter one is not. */
    if (!req || req->struct_size < offsetof(qc_quant_request, scheme) + sizeof req->scheme || !req->w) {
        set_reason(why, "invalid", FMT_NAME ": malformed quantize request");
        return QC_ERR_INVALID;
    }
    if (req->n <= 0 || req->k <= 0) {
        set_reason(why, "shape", FMT_NAME ": empty weight %lldx%lld", (long long)req->n, (long long)req->k);
        return QC_ERR_INVALID;
    }
    if (!shape_ok(req->k, req->group_size, why)) return QC_ERR_UNSUPPORTED;
    if (req->scheme && strcmp(req->scheme, "rtn") != 0) {
        set_reason(why, "scheme", FMT_NAME " knows only the scheme \"rtn\", asked for \"%s\"", req->scheme);
        return QC_ERR_UNSUPPORTED;
    }
    const int64_t n = req->n, k = req->k, groups = k / GROUP;
    const size_t qbytes = (size_t)n * (size_t)k, sbytes = (size_t)n * (size_t)groups * sizeof(uint16_t);
    int8_t *qw = g_api->alloc(qbytes);
    uint16_t *sc = g_api->alloc(sbytes);
    if (!qw || !sc) {
        g_api->free(qw);
        g_api->free(sc);
        set_reason(why, "nomem", FMT_NAME ": cannot allocate %zu bytes", qbytes + sbytes);
        return QC_ERR_NOMEM;
    }
    for (int64_t j = 0; j < n; j++) {
        for (int64_t g = 0; g < groups; g++) {
            const float *src = req->w + j * k + g * GROUP;
            float amax = 0.f;
            for (int t = 0; t < GROUP; t++) {
                float a = fabsf(src[t]);
                if (!(a <= 3.4e38f)) { /* NaN or infinity */
                    set_reason(why, "nonfinite", FMT_NAME ": weight [%lld, %lld] is not finite", (long long)j,
                               (long long)(g * GROUP + t));
                    goto fail;
                }
                if (a > amax) amax = a;
            }
            float d = amax / QMAX;
            uint16_t d16 = f16_from_f32(d);
            if ((d16 & 0x7c00u) == 0x7c00u) {
                set_reason(why, "range", FMT_NAME ": row %lld group %lld has |w| up to %g, too large for an f16 scale",
                           (long long)j, (long long)g, (double)amax);
                goto fail;
            }
            sc[j * groups + g] = d16;
            float inv = d > 0.f ? 1.f / d : 0.f;
            int8_t *dst = qw + j * k + g * GROUP;
            for (int t = 0; t < GROUP; t++) {
                float r = roundf(src[t] * inv);
                dst[t] = (int8_t)(r > QMAX ? QMAX : r < -QMAX ? -QMAX : r);
            }
        }
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->format = FMT_NAME;
    out->n = out->n_padded = n;
    out->k = out->k_padded = k;
    out->group_size = GROUP;
    out->pack_version = 1;
    out->n_buffers = 2;
    out->buffers[0] = (qc_buffer){"qweight", qw, qbytes, QC_DT_I8, QC_MEM_WEIGHTS};
    out->buffers[1] = (qc_buffer){"scales", sc, sbytes, QC_DT_F16, QC_MEM_SCALES};
    out->logical_bits = 8.0 + 16.0 / GROUP;
    return QC_OK;
fail:
    g_api->free(qw);
    g_api->free(sc);
    return QC_ERR_INVALID;
}

/* A packed weight this plugin made: right name, two buffers of the right size. */
static int packed_ok(const qc_packed_weight *w) {
    if (!w || !w->format || strcmp(w->format, FMT_NAME) != 0 || w->n_buffers != 2 || w->k % GROUP) return 0;
    size_t count = (size_t)w->n * (size_t)w->k;
    return w->buffers[0].bytes >= count && w->buffers[1].bytes >= count / GROUP * sizeof(uint16_t);
}

static qc_status int8_dequantize(const qc_packed_weight *w, float *out) {
    if (!packed_ok(w) || !out) return QC_ERR_INVALID;
    const int8_t *qw = w->buffers[0].data;
    const uint16_t *sc = w->buffers[1].data;
    const int64_t groups = w->k / GROUP;
    for (int64_t j = 0; j < w->n; j++)
        for (int64_t t = 0; t < w->k; t++)
            out[j * w->k + t] = f16_to_f32(sc[j * groups + t / GROUP]) * (float)qw[j * w->k + t];
    return QC_OK;
}

/* An element is clipped when |w| / scale is beyond 127.5, so that its code
 * would need more than 127.  With the scale taken from the group's own
 * maximum that happens only where the f16 scale rounded well below amax/127
 * (tiny groups with subnormal scales).  Utilization: distinct codes / 255. */
static qc_status int8_code_stats(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                                 double *code_utilization) {
    if (!packed_ok(w) || !src) return QC_ERR_INVALID;
    const int8_t *qw = w->buffers[0].data;
    const uint16_t *sc = w->buffers[1].data;
    const int64_t groups = w->k / GROUP;
    unsigned char seen[256] = {0}; /* by code + 128 */
    size_t clipped = 0, count = (size_t)w->n * (size_t)w->k;
    for (int64_t j = 0; j < w->n; j++)
        for (int64_t t = 0; t < w->k; t++) {
            int8_t q = qw[j * w->k + t];
            seen[q + 128] = 1;
            float d = f16_to_f32(sc[j * groups + t / GROUP]);
            if (d > 0.f && fabsf(src[j * w->k + t]) / d > QMAX + 0.5f) clipped++;
        }
    size_t used = 0;
    for (size_t i = 0; i < sizeof seen; i++) used += seen[i];
    if (saturated_ratio) *saturated_ratio = count ? (double)clipped / (double)count : 0.0;
    if (code_utilization) *code_utilization = (double)used / (2.0 * QMAX + 1.0); /* the format uses 255 codes */
    return QC_OK;
}

static int int8_eligible(const qc_problem *p, qc_reason *why) { return shape_ok(p->k, p->group_size, why); }

/* ---- the C reference kernel ---- */

/* y[m,n] = bf16(x)[m,k] . dequant(W)[n,k]^T, with the group order of the
 * definition above.  Each 32-wide slice of x is rounded once and reused for
 * every output column, so the reference stays cheap enough for quality runs. */
static void int8_linear_ref(const float *x, const int8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                            int64_t n, int64_t k) {
    const int64_t groups = k / GROUP;
    for (int64_t i = 0; i < m; i++) {
        float *yr = y + i * n;
        for (int64_t j = 0; j < n; j++) yr[j] = 0.f;
        for (int64_t g = 0; g < groups; g++) {
            float xb[GROUP];
            for (int t = 0; t < GROUP; t++) xb[t] = bf16_to_f32(bf16_from_f32(x[i * k + g * GROUP + t]));
            for (int64_t j = 0; j < n; j++) {
                const int8_t *q = qweight + j * k + g * GROUP;
                float part = 0.f;
                for (int t = 0; t < GROUP; t++) part += xb[t] * (float)q[t];
                yr[j] += f16_to_f32(scales[j * groups + g]) * part;
            }
        }
    }
}

/* Order and types must match int8_linear_ref exactly: libffi builds the
 * call from this list. */
static const qc_kernel_param linear_params[] = {
    {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},
};

static const uint32_t group_sizes[] = {GROUP};

/* ---- entry ---- */

static qc_status int8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    /* Refuse a host table older than the fields this plugin calls. */
    if (api->abi_version != QC_PLUGIN_ABI_VERSION ||
        api->struct_size < offsetof(qc_host_api, free) + sizeof api->free) {
        snprintf(err, errlen, "host table ABI %u, %u bytes: too old for this plugin", api->abi_version,
                 api->struct_size);
        return QC_ERR_UNSUPPORTED;
    }
    g_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = FMT_NAME,
        .summary = "example plugin: INT8 weights, f16 scale per 32 along K (GGUF Q8_0), bf16 activations",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_I8,
        .act_dtype = QC_DT_BF16,
        .kv_dtype = QC_DT_NONE,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F16,
        .weight_scale = QC_GRAN_GROUP,
        .act_scale = QC_GRAN_NONE,
        .group_sizes = group_sizes,
        .n_group_sizes = 1,
        .default_group_size = GROUP,
        .supported_arch = {0, 0}, /* no GPU kernel: the CPU reference only */
        .native_arch = {0, 0},
        .n_align = 1,
        .k_align = GROUP,
        .bits_per_weight = 8,
        .effective_bits = 8.0 + 16.0 / GROUP,
        .quantize = int8_quantize,
        .dequantize = int8_dequantize,
        .release = int8_release,
        .eligible = int8_eligible,
        .code_stats = int8_code_stats,
    };
    qc_status st = api->register_format(host, &f);
    if (st != QC_OK) {
        snprintf(err, errlen, "could not register format " FMT_NAME " (status %d)", (int)st);
        return st;
    }
    qc_kernel_desc kd = {
        .struct_size = sizeof kd,
        .id = FMT_NAME ".linear_ref",
        .format = FMT_NAME,
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .arch = {0, 0},
        .n_params = sizeof linear_params / sizeof linear_params[0],
        .params = linear_params,
        .reference = (void (*)(void))int8_linear_ref,
        .eligible = int8_eligible,
    };
    st = api->register_kernel(host, &kd);
    if (st != QC_OK) {
        snprintf(err, errlen, "could not register kernel " FMT_NAME ".linear_ref (status %d)", (int)st);
        return st;
    }
    api->log(host, QC_LOG_DEBUG, "registered format %s with a C reference kernel", FMT_NAME);
    return QC_OK;
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "com.example.int8_g32",
    .name = "int8_g32",
    .version = "1.0.0",
    .description = "example third-party format: INT8 weights with an f16 scale per 32 inputs (GGUF Q8_0 layout)",
    .init = int8_init,
};
