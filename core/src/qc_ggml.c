/* qc_ggml.c - GGUF/GGML block decoders (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4, f16/bf16/f32) to f32. */
#include "qc_ggml.h"

#include <stdint.h>
#include <string.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_util.h"

/*
 * Block layouts follow ggml-common.h (notes/formats.md section 2).  Every
 * decoder evaluates the same f32 expression, in the same order, as ggml's
 * reference dequantizer, so results are bitwise identical (tests/ggml checks
 * against gguf-py).  Where a product feeds an add (Q4_1, Q4_K, Q5_K) it is an
 * f16 times small integers, exact in f32, so a fused multiply-add could not
 * change the result either; contraction is still switched off for clang
 * (GCC's ISO C11 mode has it off) so that stays true if the code changes.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK4 32u
#define QKK 256u

typedef struct ggml_type_info {
    uint32_t type;
    const char *name;
    uint32_t block;  /* elements per block */
    uint32_t bytes;  /* bytes per block */
} ggml_type_info;

static const ggml_type_info g_types[] = {
    {QC_GGML_F32, "f32", 1, 4},        {QC_GGML_F16, "f16", 1, 2},       {QC_GGML_Q4_0, "q4_0", QK4, 18},
    {QC_GGML_Q4_1, "q4_1", QK4, 20},   {QC_GGML_Q8_0, "q8_0", QK4, 34},  {QC_GGML_Q4_K, "q4_k", QKK, 144},
    {QC_GGML_Q5_K, "q5_k", QKK, 176},  {QC_GGML_Q6_K, "q6_k", QKK, 210}, {QC_GGML_BF16, "bf16", 1, 2},
    {QC_GGML_MXFP4, "mxfp4", QK4, 17},
};

static const ggml_type_info *type_info(uint32_t type) {
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0]; i++)
        if (g_types[i].type == type) return &g_types[i];
    return NULL;
}

const char *qc_ggml_type_name(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->name : NULL;
}

uint32_t qc_ggml_block_size(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->block : 0;
}

size_t qc_ggml_type_size(uint32_t type) {
    const ggml_type_info *t = type_info(type);
    return t ? t->bytes : 0;
}

/* a*b into *out, 0 on success, -1 on overflow. */
static int mul_size(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

/* Bytes of n elements (n >= 0) of type t; 0 ok, -1 with err filled. */
static int elements_bytes(const ggml_type_info *t, int64_t n, size_t *out, char *err, size_t errlen) {
    if (n < 0) {
        qc_errf(err, errlen, "ggml %s: negative element count %lld", t->name, (long long)n);
        return -1;
    }
    if ((uint64_t)n % t->block) {
        qc_errf(err, errlen, "ggml %s: %lld elements is not a multiple of the block size %u", t->name,
                (long long)n, t->block);
        return -1;
    }
    uint64_t blocks = (uint64_t)n / t->block;
    if (blocks > SIZE_MAX || mul_size((size_t)blocks, t->bytes, out)) {
        qc_errf(err, errlen, "ggml %s: size of %lld elements overflows", t->name, (long long)n);
        return -1;
    }
    return 0;
}

size_t qc_ggml_row_bytes(uint32_t type, int64_t n, char *err, size_t errlen) {
    qc_errf(err, errlen, "%s", "");
    const ggml_type_info *t = type_info(type);
    if (!t) {
        qc_errf(err, errlen, "ggml type %u is not supported", type);
        return 0;
    }
    size_t bytes;
    if (elements_bytes(t, n, &bytes, err, errlen)) return 0;
    return bytes;
}

qc_status qc_ggml_tensor_bytes(uint32_t type, const int64_t *dims, int n_dims, size_t *bytes_out,
                               int64_t *n_elements_out, char *err, size_t errlen) {
    const ggml_type_info *t = type_info(type);
    if (!t) {
        qc_errf(err, errlen, "ggml type %u is not supported", type);
        return QC_ERR_UNSUPPORTED;
    }
    if (!dims || !bytes_out || n_dims < 1 || n_dims > 4) {
        qc_errf(err, errlen, "ggml %s: %d dimensions (1 to 4 expected)", t->name, n_dims);
        return QC_ERR_INVALID;
    }
    for (int i = 0; i < n_dims; i++)
        if (dims[i] < 0) {
            qc_errf(err, errlen, "ggml %s: dimension %d is negative (%lld)", t->name, i, (long long)dims[i]);
            return QC_ERR_INVALID;
        }
    size_t bytes;
    if (elements_bytes(t, dims[0], &bytes, err, errlen)) return QC_ERR_INVALID;
    /* The element count is kept below what f32 output (4 bytes each) can address. */
    uint64_t limit = (uint64_t)INT64_MAX / sizeof(float);
    if ((uint64_t)SIZE_MAX / sizeof(float) < limit) limit = (uint64_t)SIZE_MAX / sizeof(float);
    uint64_t elems = (uint64_t)dims[0];
    if (elems > limit) goto overflow;
    for (int i = 1; i < n_dims; i++) {
        uint64_t d = (uint64_t)dims[i];
        if (d && elems > limit / d) goto overflow;
        elems *= d;
        if (mul_size(bytes, (size_t)d, &bytes)) goto overflow;
    }
    *bytes_out = bytes;
    if (n_elements_out) *n_elements_out = (int64_t)elems;
    return QC_OK;
overflow:
    qc_errf(err, errlen, "ggml %s: tensor size overflows", t->name);
    return QC_ERR_INVALID;
}

/* ---- block decoders: b points at one block, y at its elements ---------- */

static float rd_f16(const uint8_t *p) { return qc_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

static void dec_q4_0(const uint8_t *b, float *y) {
    const float d = rd_f16(b);
    const uint8_t *qs = b + 2;
    /* value j is the low nibble of qs[j], value j+16 the high nibble */
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((int)(qs[j] & 15) - 8) * d;
        y[j + 16] = (float)((int)(qs[j] >> 4) - 8) * d;
    }
}

static void dec_q4_1(const uint8_t *b, float *y) {
    const float d = rd_f16(b), m = rd_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 15) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void dec_q8_0(const uint8_t *b, float *y) {
    const float d = rd_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K from sc[12]. */
static void k_scale_min(const uint8_t *sc, int j, uint8_t *s, uint8_t *m) {
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (uint8_t)((sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4));
        *m = (uint8_t)((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
    }
}

static void dec_q4_k(const uint8_t *b, float *y) {
    const float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) { /* 64-value chunk c: sub-blocks 2c (low nibbles) and 2c+1 (high) */
        uint8_t s0, m0, s1, m1;
        k_scale_min(sc, 2 * c, &s0, &m0);
        k_scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * (float)s0, mm0 = dmin * (float)m0;
        const float d1 = d * (float)s1, mm1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - mm0;
            y[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - mm1;
        }
    }
}

static void dec_q5_k(const uint8_t *b, float *y) {
    const float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int c = 0; c < 4; c++) {
        uint8_t s0, m0, s1, m1;
        k_scale_min(sc, 2 * c, &s0, &m0);
        k_scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * (float)s0, mm0 = dmin * (float)m0;
        const float d1 = d * (float)s1, mm1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            /* fifth bit: bit 2c of qh[l] for the low half, bit 2c+1 for the high half */
            int q0 = (qs[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4);
            int q1 = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
            y[64 * c + l] = d0 * (float)q0 - mm0;
            y[64 * c + 32 + l] = d1 * (float)q1 - mm1;
        }
    }
}

static void dec_q6_k(const uint8_t *b, float *y) {
    const float d = rd_f16(b + 208); /* d comes last in Q6_K */
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        float *yh = y + 128 * h;
        for (int l = 0; l < 32; l++) {
            int t = l / 16;
            int q0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            /* (d * sc) * q, left to right, as ggml */
            yh[l] = d * (float)sc[t] * (float)q0;
            yh[l + 32] = d * (float)sc[t + 2] * (float)q1;
            yh[l + 64] = d * (float)sc[t + 4] * (float)q2;
            yh[l + 96] = d * (float)sc[t + 6] * (float)q3;
        }
    }
}

/* ggml's MXFP4: E2M1 values stored doubled, times half the E8M0 scale, so
 * e = 0 and 1 give subnormal halves and every byte 0..255 is a finite scale. */
static const int8_t g_e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float e8m0_half(uint8_t e) {
    uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void dec_mxfp4(const uint8_t *b, float *y) {
    const float d = e8m0_half(b[0]);
    const uint8_t *qs = b + 1;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)g_e2m1_doubled[qs[j] & 15];
        y[j + 16] = d * (float)g_e2m1_doubled[qs[j] >> 4];
    }
}

qc_status qc_ggml_dequantize(uint32_t type, const void *blocks, size_t bytes, int64_t n_elements, float *out,
                             char *err, size_t errlen) {
    const ggml_type_info *t = type_info(type);
    if (!t) {
        qc_errf(err, errlen, "ggml type %u is not supported", type);
        return QC_ERR_UNSUPPORTED;
    }
    size_t need;
    if (elements_bytes(t, n_elements, &need, err, errlen)) return QC_ERR_INVALID;
    if (bytes < need) {
        qc_errf(err, errlen, "ggml %s: truncated input: %lld elements need %zu bytes, got %zu", t->name,
                (long long)n_elements, need, bytes);
        return QC_ERR_INVALID;
    }
    if (bytes > need) {
        qc_errf(err, errlen, "ggml %s: oversized input: %lld elements need %zu bytes, got %zu", t->name,
                (long long)n_elements, need, bytes);
        return QC_ERR_INVALID;
    }
    if (n_elements == 0) return QC_OK;
    if (!blocks || !out) {
        qc_errf(err, errlen, "ggml %s: NULL %s", t->name, blocks ? "output" : "input");
        return QC_ERR_INVALID;
    }
    size_t out_bytes;
    if ((uint64_t)n_elements > SIZE_MAX || mul_size((size_t)n_elements, sizeof(float), &out_bytes)) {
        qc_errf(err, errlen, "ggml %s: %lld f32 outputs overflow", t->name, (long long)n_elements);
        return QC_ERR_INVALID;
    }
    const uint8_t *b = blocks;
    const size_t nb = (size_t)n_elements / t->block;
    switch (type) {
    case QC_GGML_F32:
        memcpy(out, b, out_bytes);
        break;
    case QC_GGML_F16:
        for (size_t i = 0; i < nb; i++) out[i] = rd_f16(b + 2 * i);
        break;
    case QC_GGML_BF16:
        for (size_t i = 0; i < nb; i++) out[i] = qc_bf16_to_f32((uint16_t)(b[2 * i] | (b[2 * i + 1] << 8)));
        break;
    case QC_GGML_Q4_0:
        for (size_t i = 0; i < nb; i++) dec_q4_0(b + i * 18, out + i * QK4);
        break;
    case QC_GGML_Q4_1:
        for (size_t i = 0; i < nb; i++) dec_q4_1(b + i * 20, out + i * QK4);
        break;
    case QC_GGML_Q8_0:
        for (size_t i = 0; i < nb; i++) dec_q8_0(b + i * 34, out + i * QK4);
        break;
    case QC_GGML_Q4_K:
        for (size_t i = 0; i < nb; i++) dec_q4_k(b + i * 144, out + i * QKK);
        break;
    case QC_GGML_Q5_K:
        for (size_t i = 0; i < nb; i++) dec_q5_k(b + i * 176, out + i * QKK);
        break;
    case QC_GGML_Q6_K:
        for (size_t i = 0; i < nb; i++) dec_q6_k(b + i * 210, out + i * QKK);
        break;
    case QC_GGML_MXFP4:
        for (size_t i = 0; i < nb; i++) dec_mxfp4(b + i * 17, out + i * QK4);
        break;
    default:
        qc_errf(err, errlen, "ggml %s: no decoder", t->name);
        return QC_ERR_INTERNAL;
    }
    return QC_OK;
}
