/* w4a16.c - INT4 weights with bf16 activations: format descriptor, quantizer, dequantizer and checks. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "w4a16_impl.h"

/* The group used when none is asked for: the default (128), or the largest
 * smaller supported group that divides K (SmolLM2's K=576 takes 64), so a
 * layer whose K is a multiple of 32 is never refused for want of a group. */
static uint32_t w4_default_group(int64_t k) {
    static const uint32_t order[] = {W4A16_DEFAULT_GROUP, 64, 32};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i] <= W4A16_DEFAULT_GROUP && k > 0 && k % order[i] == 0) return order[i];
    return W4A16_DEFAULT_GROUP;
}

const qc_host_api *w4_api;

qc_status w4_register_kernels(const qc_host_api *api, qc_host *host); /* w4a16_ref.c */

static const uint32_t w4_groups[] = {32, 64, 128};

void w4_why(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

int w4_group_ok(uint32_t g) { return g == 32 || g == 64 || g == 128; }

int w4_scheme_ok(uint32_t scheme) {
    uint32_t base = W4A16_SCHEME_BASE(scheme);
    return (scheme & ~(W4A16_SCHEME_PERM | 0x0fu)) == 0 && base >= W4A16_SCHEME_SYM && base <= W4A16_SCHEME_FMIN;
}

const char *w4_scheme_name(uint32_t scheme) {
    static const char *const names[] = {"?", "sym", "asym", "fmin", "?", "sym+perm", "asym+perm", "fmin+perm"};
    if (!w4_scheme_ok(scheme)) return "?";
    return names[W4A16_SCHEME_BASE(scheme) + ((scheme & W4A16_SCHEME_PERM) ? 4 : 0)];
}

int w4_shape_ok(int64_t n, int64_t k, uint32_t g, qc_reason *why) {
    if (n <= 0 || k <= 0 || n > W4_MAX_DIM || k > W4_MAX_DIM || n > W4_MAX_ELEMS / k) {
        w4_why(why, "shape", "w4a16: weight shape %lldx%lld is empty or too large", (long long)n, (long long)k);
        return 0;
    }
    if (!w4_group_ok(g)) {
        w4_why(why, "group", "w4a16 has group sizes 32, 64 and 128, not %u", g);
        return 0;
    }
    if (k % W4A16_K_ALIGN) {
        w4_why(why, "align_k", "w4a16 needs K to be a multiple of %u, layer has K=%lld", W4A16_K_ALIGN,
               (long long)k);
        return 0;
    }
    if (k % g) {
        w4_why(why, "group", "w4a16 group %u needs K to be a multiple of it, layer has K=%lld", g, (long long)k);
        return 0;
    }
    if (n % W4A16_N_ALIGN) {
        w4_why(why, "align_n", "w4a16 needs N to be a multiple of %u, layer has N=%lld", W4A16_N_ALIGN,
               (long long)n);
        return 0;
    }
    return 1;
}

/* ---- packed weights ----------------------------------------------------- */

/* The buffers a scheme has, in the order they are stored. */
typedef struct w4_bufspec {
    const char *name;
    qc_dtype dtype;
    qc_mem_category cat;
    size_t bytes;
} w4_bufspec;

static unsigned w4_bufspecs(int64_t n, int64_t k, uint32_t g, uint32_t scheme, w4_bufspec *b) {
    size_t nn = (size_t)n, kk = (size_t)k, ng = kk / g;
    unsigned c = 0;
    b[c++] = (w4_bufspec){"qweight", QC_DT_U4, QC_MEM_WEIGHTS, nn * kk / 2};
    b[c++] = (w4_bufspec){"scales", QC_DT_F16, QC_MEM_SCALES, nn * ng * 2};
    if (W4A16_SCHEME_BASE(scheme) == W4A16_SCHEME_ASYM)
        b[c++] = (w4_bufspec){"zeros", QC_DT_U8, QC_MEM_ZEROS, nn * ng};
    if (W4A16_SCHEME_BASE(scheme) == W4A16_SCHEME_FMIN)
        b[c++] = (w4_bufspec){"mins", QC_DT_F16, QC_MEM_ZEROS, nn * ng * 2};
    /* The permutation is part of the layout, neither scale nor zero: it is
     * counted with the weights. */
    if (scheme & W4A16_SCHEME_PERM) b[c++] = (w4_bufspec){"perm", QC_DT_I32, QC_MEM_WEIGHTS, kk * 4};
    return c;
}

void w4_packed_release(qc_packed_weight *w) {
    if (!w) return;
    for (uint32_t i = 0; i < w->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++)
        if (w->buffers[i].data) w4_api->free(w->buffers[i].data);
    memset(w, 0, sizeof *w);
    w->struct_size = sizeof *w;
}

qc_status w4_packed_alloc(qc_packed_weight *out, int64_t n, int64_t k, uint32_t g, uint32_t scheme,
                          qc_reason *why) {
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (!w4_shape_ok(n, k, g, why)) return QC_ERR_INVALID;
    if (!w4_scheme_ok(scheme)) {
        w4_why(why, "scheme", "w4a16: unknown scheme id 0x%x", scheme);
        return QC_ERR_INVALID;
    }
    w4_bufspec b[QC_MAX_WEIGHT_BUFFERS];
    unsigned nb = w4_bufspecs(n, k, g, scheme, b);
    for (unsigned i = 0; i < nb; i++) {
        void *p = w4_api->alloc(b[i].bytes);
        if (!p) {
            w4_packed_release(out);
            w4_why(why, "nomem", "w4a16: cannot allocate %zu bytes for '%s'", b[i].bytes, b[i].name);
            return QC_ERR_NOMEM;
        }
        out->buffers[i] = (qc_buffer){b[i].name, p, b[i].bytes, b[i].dtype, b[i].cat};
        out->n_buffers = i + 1;
    }
    uint32_t base = W4A16_SCHEME_BASE(scheme);
    out->format = "w4a16";
    out->n = out->n_padded = n;
    out->k = out->k_padded = k;
    out->group_size = g;
    out->scheme = scheme;
    out->pack_version = W4A16_PACK_VERSION;
    /* Advertised bits: the codes plus each group's f16 scale and its u8 zero
     * or f16 minimum (the permutation, 32 bits per input channel, is not
     * included). */
    out->logical_bits = 4.0 + (16.0 + (base == W4A16_SCHEME_ASYM ? 8.0 : base == W4A16_SCHEME_FMIN ? 16.0 : 0.0)) / g;
    return QC_OK;
}

uint8_t *w4_buf(qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers; i++)
        if (strcmp(w->buffers[i].name, name) == 0) return w->buffers[i].data;
    return NULL;
}

qc_status w4_view_of(const qc_packed_weight *w, w4_view *v, qc_reason *why) {
    memset(v, 0, sizeof *v);
    if (!w || w->struct_size < offsetof(qc_packed_weight, logical_bits) || !w->format ||
        strcmp(w->format, "w4a16") != 0) {
        w4_why(why, "format", "not a w4a16 packed weight");
        return QC_ERR_INVALID;
    }
    if (w->pack_version != W4A16_PACK_VERSION) {
        w4_why(why, "version", "w4a16 pack_version %u, this plugin reads %u", w->pack_version, W4A16_PACK_VERSION);
        return QC_ERR_UNSUPPORTED;
    }
    if (!w4_shape_ok(w->n, w->k, w->group_size, why)) return QC_ERR_INVALID;
    if (w->n_padded != w->n || w->k_padded != w->k) {
        w4_why(why, "shape", "w4a16 weights are never padded");
        return QC_ERR_INVALID;
    }
    if (!w4_scheme_ok(w->scheme)) {
        w4_why(why, "scheme", "w4a16: unknown scheme id 0x%x", w->scheme);
        return QC_ERR_INVALID;
    }
    w4_bufspec b[QC_MAX_WEIGHT_BUFFERS];
    unsigned nb = w4_bufspecs(w->n, w->k, w->group_size, w->scheme, b);
    if (w->n_buffers != nb) {
        w4_why(why, "buffers", "w4a16 %s weight has %u buffers, expected %u", w4_scheme_name(w->scheme),
               w->n_buffers, nb);
        return QC_ERR_INVALID;
    }
    const void *found[QC_MAX_WEIGHT_BUFFERS] = {0};
    for (unsigned i = 0; i < nb; i++) {
        for (unsigned j = 0; j < nb; j++) {
            const qc_buffer *x = &w->buffers[j];
            if (!x->name || strcmp(x->name, b[i].name) != 0) continue;
            if (found[i] || !x->data || x->dtype != b[i].dtype || x->bytes != b[i].bytes) {
                w4_why(why, "buffers", "w4a16 buffer '%s' is repeated, empty or has the wrong dtype or size",
                       b[i].name);
                return QC_ERR_INVALID;
            }
            found[i] = x->data;
        }
        if (!found[i]) {
            w4_why(why, "buffers", "w4a16 %s weight lacks buffer '%s'", w4_scheme_name(w->scheme), b[i].name);
            return QC_ERR_INVALID;
        }
    }
    v->n = w->n;
    v->k = w->k;
    v->g = w->group_size;
    v->scheme = w->scheme;
    v->ng = w->k / w->group_size;
    unsigned i = 0;
    v->q = found[i++];
    v->s = found[i++];
    if (W4A16_SCHEME_BASE(w->scheme) == W4A16_SCHEME_ASYM) v->z = found[i++];
    if (W4A16_SCHEME_BASE(w->scheme) == W4A16_SCHEME_FMIN) v->mn = found[i++];
    if (w->scheme & W4A16_SCHEME_PERM) {
        v->perm = found[i++];
        if (!w4_perm_ok(v->perm, v->k)) {
            w4_why(why, "buffers", "w4a16 buffer 'perm' is not a permutation of 0..%lld", (long long)(v->k - 1));
            return QC_ERR_INVALID;
        }
    }
    return QC_OK;
}

int w4_perm_ok(const int32_t *perm, int64_t k) {
    uint8_t *seen = calloc((size_t)k / 8 + 1, 1);
    if (!seen) return 0;
    int ok = 1;
    for (int64_t t = 0; t < k && ok; t++) {
        int64_t c = perm[t];
        if (c < 0 || c >= k || (seen[c / 8] >> (c % 8)) & 1u)
            ok = 0;
        else
            seen[c / 8] |= (uint8_t)(1u << (c % 8));
    }
    free(seen);
    return ok;
}

/* v rounded once to bf16 (to nearest, ties to even; subnormals and overflow to inf as the bf16x2 fma does).  The
 * callers' v is exact in double (a bf16 times a small integer plus a bf16, their exponents close). */
float w4_round_bf16_exact(double v) {
    if (v == 0 || !isfinite(v)) return (float)v;
    int e;
    frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    int lsb = e - 8 < -133 ? -133 : e - 8; /* the unit of the last of bf16's 8 significant bits; subnormals: 2^-133 */
    double r = ldexp(nearbyint(ldexp(v, -lsb)), lsb);
    return fabs(r) >= 0x1p128 ? (float)copysign(INFINITY, v) : (float)r;
}

void w4_dequant_row_strided(const w4_view *v, int64_t j, int64_t t0, int64_t len, float *dst, int64_t stride) {
    uint32_t base = W4A16_SCHEME_BASE(v->scheme);
    int64_t t = t0, end = t0 + len;
    while (t < end) { /* one group at a time: its 16 possible values first */
        int64_t gi = t / v->g, gend = (gi + 1) * (int64_t)v->g, at = j * v->ng + gi;
        if (gend > end) gend = end;
        float s = qc_f16_to_f32(v->s[at]), m = v->mn ? qc_f16_to_f32(v->mn[at]) : 0.0f, lut[16];
        unsigned z = v->z ? v->z[at] : 8u;
        for (unsigned q = 0; q < 16; q++)
            lut[q] = !v->bf16_weights               ? w4_dequant_one(base, q, s, z, m)
                     : base == W4A16_SCHEME_FMIN ? w4_round_bf16_exact((double)qc_round_bf16(s) * ((int)q - 8) +
                                                                       qc_round_bf16(m + 8.0f * s))
                                                 : qc_round_bf16(qc_round_bf16(s) * (float)((int)q - (int)z));
        for (; (t & 7) && t < gend; t++) dst[(t - t0) * stride] = lut[w4_code(v->q, v->k, j, t)];
        for (; t + 8 <= gend; t += 8) { /* whole words: element 8w + 2p at nibble p, 8w + 2p + 1 at p + 4 */
            const uint8_t *b = v->q + j * (v->k / 2) + t / 2;
            const uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            for (int p = 0; p < 4; p++) {
                dst[(t + 2 * p - t0) * stride] = lut[(w >> (4 * p)) & 15u];
                dst[(t + 2 * p + 1 - t0) * stride] = lut[(w >> (16 + 4 * p)) & 15u];
            }
        }
        for (; t < gend; t++) dst[(t - t0) * stride] = lut[w4_code(v->q, v->k, j, t)];
    }
}

void w4_dequant_row(const w4_view *v, int64_t j, int64_t t0, int64_t len, float *dst) {
    w4_dequant_row_strided(v, j, t0, len, dst, 1);
}

/* ---- quantizer ---------------------------------------------------------- */

/* Round to nearest, ties to even (the default floating-point environment),
 * then clamp to the code range. */
static unsigned w4_clamp_code(float r) {
    if (!(r > 0.0f)) return 0;
    if (r > 15.0f) return 15;
    return (unsigned)r;
}

/* Quantize one group of `g` source values (stride 1) into codes (stored
 * order = source order for quantize) and its parameters.  Returns 0 when
 * the f16 scale or minimum would overflow. */
static int w4_quantize_group(uint32_t base, const float *w, uint32_t g, uint8_t *codes, uint16_t *s16_out,
                             uint8_t *z_out, uint16_t *m16_out) {
    float lo = w[0], hi = w[0], mx = w[0];
    for (uint32_t i = 1; i < g; i++) {
        if (w[i] < lo) lo = w[i];
        if (w[i] > hi) hi = w[i];
        if (fabsf(w[i]) > fabsf(mx)) mx = w[i]; /* first element of largest magnitude */
    }
    if (base == W4A16_SCHEME_SYM) {
        /* The value of largest magnitude lands on code 0 (-8 after the
         * zero), as in Q4_0, so all 16 codes are in use. */
        uint16_t s16 = qc_f32_to_f16(mx / -8.0f);
        float s = qc_f16_to_f32(s16);
        if (isinf(s)) return 0;
        *s16_out = s16;
        for (uint32_t i = 0; i < g; i++) codes[i] = (uint8_t)(s == 0.0f ? 8u : w4_clamp_code(rintf(w[i] / s) + 8.0f));
    } else if (base == W4A16_SCHEME_ASYM) {
        /* The range always holds 0 so the zero point is an integer in 0..15. */
        if (lo > 0.0f) lo = 0.0f;
        if (hi < 0.0f) hi = 0.0f;
        uint16_t s16 = qc_f32_to_f16((hi - lo) / 15.0f);
        float s = qc_f16_to_f32(s16);
        if (isinf(s)) return 0;
        *s16_out = s16;
        if (s == 0.0f) {
            *z_out = 8;
            memset(codes, 8, g);
            return 1;
        }
        unsigned z = w4_clamp_code(rintf(-lo / s));
        *z_out = (uint8_t)z;
        for (uint32_t i = 0; i < g; i++) codes[i] = (uint8_t)w4_clamp_code(rintf(w[i] / s) + (float)z);
    } else {
        uint16_t d16 = qc_f32_to_f16((hi - lo) / 15.0f), m16 = qc_f32_to_f16(lo);
        float d = qc_f16_to_f32(d16), m = qc_f16_to_f32(m16);
        if (isinf(d) || isinf(m)) return 0;
        *s16_out = d16;
        *m16_out = m16;
        for (uint32_t i = 0; i < g; i++) codes[i] = (uint8_t)(d == 0.0f ? 0u : w4_clamp_code(rintf((w[i] - m) / d)));
    }
    return 1;
}

static qc_status w4_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    if (!out) {
        w4_why(why, "invalid", "w4a16: no output weight");
        return QC_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (!req || req->struct_size < offsetof(qc_quant_request, act_absmax) || !req->w) {
        w4_why(why, "invalid", "w4a16: the quantization request is incomplete");
        return QC_ERR_INVALID;
    }
    uint32_t scheme;
    const char *name = req->scheme ? req->scheme : "sym";
    if (strcmp(name, "sym") == 0)
        scheme = W4A16_SCHEME_SYM;
    else if (strcmp(name, "asym") == 0)
        scheme = W4A16_SCHEME_ASYM;
    else if (strcmp(name, "fmin") == 0)
        scheme = W4A16_SCHEME_FMIN;
    else {
        w4_why(why, "scheme", "w4a16 has schemes sym, asym and fmin, not '%.64s'", name);
        return QC_ERR_INVALID;
    }
    uint32_t g = req->group_size ? req->group_size : w4_default_group(req->k);
    if (!w4_shape_ok(req->n, req->k, g, why)) return QC_ERR_INVALID;
    size_t count = (size_t)req->n * (size_t)req->k;
    for (size_t i = 0; i < count; i++)
        if (!isfinite(req->w[i])) {
            w4_why(why, "value", "w4a16: source weight %zu (row %zu) is not finite", i, i / (size_t)req->k);
            return QC_ERR_INVALID;
        }
    qc_status st = w4_packed_alloc(out, req->n, req->k, g, scheme, why);
    if (st != QC_OK) return st;
    uint8_t *q = w4_buf(out, "qweight"), *z = w4_buf(out, "zeros");
    uint16_t *s = (uint16_t *)(void *)w4_buf(out, "scales"), *mn = (uint16_t *)(void *)w4_buf(out, "mins");
    int64_t k = req->k, ng = k / g;
    uint8_t codes[128], zdummy = 0;
    uint16_t mdummy = 0;
    for (int64_t j = 0; j < req->n; j++)
        for (int64_t gi = 0; gi < ng; gi++) {
            int64_t at = j * ng + gi;
            if (!w4_quantize_group(scheme, req->w + j * k + gi * g, g, codes, &s[at], z ? &z[at] : &zdummy,
                                   mn ? &mn[at] : &mdummy)) {
                w4_packed_release(out);
                w4_why(why, "range", "w4a16: row %lld group %lld needs a scale beyond the f16 range", (long long)j,
                       (long long)gi);
                return QC_ERR_INVALID;
            }
            for (uint32_t i = 0; i < g; i++) w4_set_code(q, k, j, gi * g + i, codes[i]);
        }
    return QC_OK;
}

/* ---- dequantizer, eligibility, statistics -------------------------------- */

static qc_status w4_dequantize(const qc_packed_weight *w, float *out) {
    w4_view v;
    qc_status st = w4_view_of(w, &v, NULL); /* also checks that perm is a permutation */
    if (st != QC_OK) return st;
    if (!out) return QC_ERR_INVALID;
    float tmp[512];
    for (int64_t j = 0; j < v.n; j++)
        for (int64_t t0 = 0; t0 < v.k; t0 += 512) {
            int64_t len = v.k - t0 < 512 ? v.k - t0 : 512;
            w4_dequant_row(&v, j, t0, len, v.perm ? tmp : out + j * v.k + t0);
            if (v.perm)
                for (int64_t t = 0; t < len; t++) out[j * v.k + v.perm[t0 + t]] = tmp[t];
        }
    return QC_OK;
}

static int w4_format_eligible(const qc_problem *p, qc_reason *why) {
    uint32_t g = p->group_size ? p->group_size : w4_default_group(p->k);
    if (p->scheme && !w4_scheme_ok(p->scheme)) {
        w4_why(why, "scheme", "w4a16: unknown scheme id 0x%x", p->scheme);
        return 0;
    }
    return w4_shape_ok(p->n, p->k, g, why);
}

/* Saturated: the unrounded code x/s + z (or (x - m)/d) lies beyond
 * [-0.5, 15.5], so clamping, not rounding, decided the code.  Groups whose
 * scale is zero clip nothing. */
/* A16: the GEMM multiplies x rounded to bf16 (perm changes only the stored
 * K order, not which activation meets which weight). */
static qc_status w4_quantize_activations(const qc_packed_weight *w, const float *x, int64_t m, float *out) {
    size_t count = (size_t)m * (size_t)w->k;
    for (size_t i = 0; i < count; i++) out[i] = qc_round_bf16(x[i]);
    return QC_OK;
}

static qc_status w4_code_stats(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                               double *code_utilization) {
    w4_view v;
    qc_status st = w4_view_of(w, &v, NULL);
    if (st != QC_OK) return st;
    if (!src) return QC_ERR_INVALID;
    uint32_t base = W4A16_SCHEME_BASE(v.scheme);
    uint64_t sat = 0;
    unsigned used = 0;
    for (int64_t j = 0; j < v.n; j++)
        for (int64_t t = 0; t < v.k; t++) {
            int64_t gi = j * v.ng + t / v.g, col = v.perm ? v.perm[t] : t;
            if (col < 0 || col >= v.k) return QC_ERR_INVALID;
            used |= 1u << w4_code(v.q, v.k, j, t);
            double s = qc_f16_to_f32(v.s[gi]), x = src[j * v.k + col], u;
            if (s == 0.0) continue;
            if (base == W4A16_SCHEME_FMIN)
                u = (x - qc_f16_to_f32(v.mn[gi])) / s;
            else
                u = x / s + (v.z ? v.z[gi] : 8u);
            sat += (u < -0.5 || u > 15.5);
        }
    unsigned n_used = 0;
    for (unsigned c = 0; c < 16; c++) n_used += (used >> c) & 1u;
    if (saturated_ratio) *saturated_ratio = (double)sat / ((double)v.n * (double)v.k);
    if (code_utilization) *code_utilization = n_used / 16.0;
    return QC_OK;
}

static void w4_release(qc_packed_weight *w) { w4_packed_release(w); }

/* ---- entry -------------------------------------------------------------- */

static qc_status w4_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    if (!api || api->struct_size < offsetof(qc_host_api, config)) {
        snprintf(err, errlen, "host table too small");
        return QC_ERR_UNSUPPORTED;
    }
    w4_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "w4a16",
        .summary = "INT4 weights per group (sym, zero-point or float min), bf16 activations",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_U4,
        .act_dtype = QC_DT_BF16,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F16,
        .weight_scale = QC_GRAN_GROUP,
        .act_scale = QC_GRAN_NONE,
        .group_sizes = w4_groups,
        .n_group_sizes = 3,
        .default_group_size = W4A16_DEFAULT_GROUP,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {80, QC_SM_ANY},
        .n_align = W4A16_N_ALIGN,
        .k_align = W4A16_K_ALIGN,
        .bits_per_weight = 4,
        .effective_bits = 4.125, /* g128 sym: one f16 scale per group */
        .quantize = w4_quantize,
        .dequantize = w4_dequantize,
        .release = w4_release,
        .eligible = w4_format_eligible,
        .code_stats = w4_code_stats,
        .quantize_activations = w4_quantize_activations,
    };
    qc_status st = api->register_format(host, &f);
    if (st != QC_OK) return st;
    return w4_register_kernels(api, host);
}

static const void *w4_get_extension(const char *id) {
    if (id && strcmp(id, QC_EXT_IMPORTER) == 0) return &w4_importer;
    return NULL;
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.w4a16",
    .name = "w4a16",
    .version = "0.2.0",
    .description = "INT4 weight-only quantization (W4A16)",
    .init = w4_init,
    .get_extension = w4_get_extension,
};
