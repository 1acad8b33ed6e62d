/* test_ggml.c - qc_ggml: sizes, hand-built blocks of every type, and refusal of truncated or hostile input. */
#include <math.h>
#include <stdint.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_ggml.h"
#include "qc_test.h"

static char err[256];

/* Blocks are copied into an exact-size heap buffer at an odd address, so
 * ASan catches any read past the end and UBSan any misaligned load. */
static qc_status deq(uint32_t type, const uint8_t *src, size_t bytes, int64_t n, float *out) {
    uint8_t *mem = malloc(bytes + 1);
    memcpy(mem + 1, src, bytes);
    uint8_t *exact = malloc(bytes ? bytes : 1);
    memcpy(exact, mem + 1, bytes);
    free(mem);
    err[0] = 0;
    qc_status st = qc_ggml_dequantize(type, exact, bytes, n, out, err, sizeof err);
    free(exact);
    return st;
}

/* Same, but from an odd address inside a larger buffer (alignment only). */
static qc_status deq_unaligned(uint32_t type, const uint8_t *src, size_t bytes, int64_t n, float *out) {
    uint8_t *mem = malloc(bytes + 1);
    memcpy(mem + 1, src, bytes);
    qc_status st = qc_ggml_dequantize(type, mem + 1, bytes, n, out, err, sizeof err);
    free(mem);
    return st;
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = qc_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

static void test_sizes(void) {
    static const struct { uint32_t type; const char *name; uint32_t block; size_t bytes; } t[] = {
        {0, "f32", 1, 4},      {1, "f16", 1, 2},      {2, "q4_0", 32, 18},   {3, "q4_1", 32, 20},
        {8, "q8_0", 32, 34},   {12, "q4_k", 256, 144}, {13, "q5_k", 256, 176}, {14, "q6_k", 256, 210},
        {30, "bf16", 1, 2},    {39, "mxfp4", 32, 17},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CHECK(qc_ggml_type_name(t[i].type) && strcmp(qc_ggml_type_name(t[i].type), t[i].name) == 0, "name %u", t[i].type);
        CHECK(qc_ggml_block_size(t[i].type) == t[i].block, "block %u", t[i].type);
        CHECK(qc_ggml_type_size(t[i].type) == t[i].bytes, "size %u", t[i].type);
        CHECK(qc_ggml_row_bytes(t[i].type, 4096, err, sizeof err) == 4096 / t[i].block * t[i].bytes, "row %u: %s",
              t[i].type, err);
    }
    /* bits per weight of notes section 8 */
    CHECK(qc_ggml_row_bytes(QC_GGML_Q4_K, 256, err, sizeof err) * 8.0 / 256 == 4.5, "q4_k bpw");
    CHECK(qc_ggml_row_bytes(QC_GGML_Q6_K, 256, err, sizeof err) * 8.0 / 256 == 6.5625, "q6_k bpw");
    CHECK(qc_ggml_row_bytes(QC_GGML_MXFP4, 32, err, sizeof err) * 8.0 / 32 == 4.25, "mxfp4 bpw");
    for (uint32_t u = 0; u < 64; u++) {
        int known = u == 0 || u == 1 || u == 2 || u == 3 || u == 8 || u == 12 || u == 13 || u == 14 || u == 30 || u == 39;
        CHECK((qc_ggml_type_name(u) != NULL) == known && (qc_ggml_block_size(u) != 0) == known, "type %u", u);
    }
    CHECK(qc_ggml_type_name(0xFFFFFFFFu) == NULL && qc_ggml_type_size(6) == 0, "unknown types");
    CHECK(qc_ggml_row_bytes(6, 32, err, sizeof err) == 0 && strstr(err, "not supported"), "q5_0 unsupported: %s", err);
    CHECK(qc_ggml_row_bytes(QC_GGML_Q4_0, 33, err, sizeof err) == 0 && strstr(err, "multiple"), "ragged: %s", err);
    CHECK(qc_ggml_row_bytes(QC_GGML_Q4_0, -32, err, sizeof err) == 0 && strstr(err, "negative"), "neg: %s", err);
    CHECK(qc_ggml_row_bytes(QC_GGML_F32, INT64_MAX, err, sizeof err) == 0 && strstr(err, "overflow"), "ovf: %s", err);
    CHECK(qc_ggml_row_bytes(QC_GGML_F32, 0, err, sizeof err) == 0 && err[0] == 0, "n=0: '%s'", err);

    size_t bytes = 0;
    int64_t ne = 0;
    int64_t d2[2] = {4096, 11008};
    CHECK(qc_ggml_tensor_bytes(QC_GGML_Q4_K, d2, 2, &bytes, &ne, err, sizeof err) == QC_OK &&
              bytes == (size_t)4096 / 256 * 144 * 11008 && ne == 4096LL * 11008,
          "tensor bytes %zu: %s", bytes, err);
    int64_t d4[4] = {64, 3, 0, 7};
    CHECK(qc_ggml_tensor_bytes(QC_GGML_Q8_0, d4, 4, &bytes, &ne, err, sizeof err) == QC_OK && bytes == 0 && ne == 0,
          "zero dim: %zu", bytes);
    int64_t big[3] = {1LL << 40, 1LL << 20, 1LL << 10};
    CHECK(qc_ggml_tensor_bytes(QC_GGML_F32, big, 3, &bytes, NULL, err, sizeof err) != QC_OK && strstr(err, "overflow"),
          "overflow: %s", err);
    int64_t big2[2] = {1LL << 32, 1LL << 31}; /* bytes fit in q4_0 but f32 output of 2^63 elements does not */
    CHECK(qc_ggml_tensor_bytes(QC_GGML_Q4_0, big2, 2, &bytes, NULL, err, sizeof err) != QC_OK, "element overflow");
    int64_t neg[2] = {32, -1};
    CHECK(qc_ggml_tensor_bytes(QC_GGML_Q4_0, neg, 2, &bytes, NULL, err, sizeof err) == QC_ERR_INVALID, "negative dim");
    int64_t rag[1] = {100};
    CHECK(qc_ggml_tensor_bytes(QC_GGML_Q4_K, rag, 1, &bytes, NULL, err, sizeof err) == QC_ERR_INVALID, "ragged dim0");
    CHECK(qc_ggml_tensor_bytes(QC_GGML_F32, d2, 5, &bytes, NULL, err, sizeof err) == QC_ERR_INVALID, "5 dims");
    CHECK(qc_ggml_tensor_bytes(QC_GGML_F32, d2, 0, &bytes, NULL, err, sizeof err) == QC_ERR_INVALID, "0 dims");
    CHECK(qc_ggml_tensor_bytes(77, d2, 2, &bytes, NULL, err, sizeof err) == QC_ERR_UNSUPPORTED, "unknown type");
}

/* Q4_0, Q4_1, Q8_0, MXFP4: split nibble order (j low, j+16 high). */
static void test_32_blocks(void) {
    uint8_t b[34];
    float y[32];
    put_f16(b, 0.5f);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK(deq(QC_GGML_Q4_0, b, 18, 32, y) == QC_OK, "q4_0: %s", err);
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += y[j] != (j - 8) * 0.5f || y[j + 16] != (7 - j) * 0.5f;
    CHECK(bad == 0, "q4_0 values / nibble order");

    put_f16(b, 0.25f);
    put_f16(b + 2, -1.0f);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK(deq(QC_GGML_Q4_1, b, 20, 32, y) == QC_OK, "q4_1: %s", err);
    bad = 0;
    for (int j = 0; j < 16; j++) bad += y[j] != j * 0.25f - 1.0f || y[j + 16] != (15 - j) * 0.25f - 1.0f;
    CHECK(bad == 0, "q4_1 values");

    put_f16(b, 2.0f);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
    CHECK(deq(QC_GGML_Q8_0, b, 34, 32, y) == QC_OK, "q8_0: %s", err);
    bad = 0;
    for (int j = 0; j < 32; j++) bad += y[j] != (float)(j * 8 - 128) * 2.0f;
    CHECK(bad == 0, "q8_0 values (signed)");

    /* ggml's table has +0 for code 8 (the OCP -0), so decoded zeros are all +0 */
    static const float e2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, 0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
    uint8_t mx[17];
    for (int j = 0; j < 16; j++) mx[1 + j] = (uint8_t)(j | (15 - j) << 4);
    static const int exps[] = {0, 1, 2, 100, 127, 128, 200, 254};
    for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++) {
        mx[0] = (uint8_t)exps[i];
        CHECK(deq(QC_GGML_MXFP4, mx, 17, 32, y) == QC_OK, "mxfp4: %s", err);
        bad = 0;
        for (int j = 0; j < 16; j++) {
            float a = (float)ldexp(e2m1[j], exps[i] - 127), c = (float)ldexp(e2m1[15 - j], exps[i] - 127);
            bad += memcmp(&y[j], &a, 4) != 0 || memcmp(&y[j + 16], &c, 4) != 0;
        }
        CHECK(bad == 0, "mxfp4 e=%d: E2M1 * 2^(e-127), j low nibble, j+16 high", exps[i]);
    }
    /* ggml has no NaN scale: 0xFF is 2^128 (0.5 * 2^128 finite, larger values overflow) */
    mx[0] = 0xFF;
    CHECK(deq(QC_GGML_MXFP4, mx, 17, 32, y) == QC_OK, "mxfp4 0xff");
    CHECK(y[1] == 0x1p127f && isinf(y[2]) && y[0] == 0.0f, "mxfp4 0xff as ggml: %g %g %g", y[0], y[1], y[2]);
}

/* Pack 6-bit scales and mins into K-quant sc[12] (the inverse of the documented unpacking). */
static void pack_scales(const int *s, const int *m, uint8_t *sc) {
    for (int j = 0; j < 4; j++) {
        sc[j] = (uint8_t)((s[j] & 63) | ((s[j + 4] >> 4) << 6));
        sc[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        sc[j + 8] = (uint8_t)((s[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

static void test_k_quants(void) {
    uint64_t rng = 1234;
    float y[256];
    int s[8], m[8];
    for (int j = 0; j < 8; j++) s[j] = (int)(qc_test_rng(&rng) % 64), m[j] = (int)(qc_test_rng(&rng) % 64);
    s[5] = 63, m[6] = 63; /* the bits beyond 4 travel through sc[0..7] bits 6-7 */
    const float d = 0.0625f, dmin = 0.125f;

    uint8_t b4[144];
    put_f16(b4, d), put_f16(b4 + 2, dmin);
    pack_scales(s, m, b4 + 4);
    for (int i = 0; i < 128; i++) b4[16 + i] = (uint8_t)qc_test_rng(&rng);
    CHECK(deq(QC_GGML_Q4_K, b4, 144, 256, y) == QC_OK, "q4_k: %s", err);
    int bad = 0;
    for (int v = 0; v < 256; v++) { /* value v: chunk v/64, low nibble for the first 32 of it */
        int c = v / 64, l = v % 64, sub = v / 32;
        int q = l < 32 ? b4[16 + 32 * c + l] & 15 : b4[16 + 32 * c + l - 32] >> 4;
        float want = d * (float)s[sub] * (float)q - dmin * (float)m[sub];
        bad += memcmp(&y[v], &want, 4) != 0;
    }
    CHECK(bad == 0, "q4_k: %d values differ", bad);

    uint8_t b5[176];
    put_f16(b5, d), put_f16(b5 + 2, dmin);
    pack_scales(s, m, b5 + 4);
    for (int i = 0; i < 160; i++) b5[16 + i] = (uint8_t)qc_test_rng(&rng);
    CHECK(deq(QC_GGML_Q5_K, b5, 176, 256, y) == QC_OK, "q5_k: %s", err);
    bad = 0;
    for (int v = 0; v < 256; v++) {
        int c = v / 64, l = v % 64, sub = v / 32;
        int q = l < 32 ? b5[48 + 32 * c + l] & 15 : b5[48 + 32 * c + l - 32] >> 4;
        int hb = (b5[16 + l % 32] >> sub) & 1; /* bit 2c (low half) or 2c+1 (high half) of qh[l] */
        float want = d * (float)s[sub] * (float)(q + 16 * hb) - dmin * (float)m[sub];
        bad += memcmp(&y[v], &want, 4) != 0;
    }
    CHECK(bad == 0, "q5_k: %d values differ", bad);

    uint8_t b6[210];
    for (int i = 0; i < 208; i++) b6[i] = (uint8_t)qc_test_rng(&rng);
    put_f16(b6 + 208, 0.03125f);
    CHECK(deq(QC_GGML_Q6_K, b6, 210, 256, y) == QC_OK, "q6_k: %s", err);
    bad = 0;
    for (int v = 0; v < 256; v++) {
        int h = v / 128, r = v % 128, quarter = r / 32, l = r % 32;
        const uint8_t *ql = b6 + 64 * h, *qh = b6 + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b6 + 192 + 8 * h);
        int lo = quarter == 0 ? ql[l] & 15 : quarter == 1 ? ql[l + 32] & 15 : quarter == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
        int q = (lo | ((qh[l] >> (2 * quarter)) & 3) << 4) - 32;
        float want = 0.03125f * (float)sc[2 * quarter + l / 16] * (float)q;
        bad += memcmp(&y[v], &want, 4) != 0;
    }
    CHECK(bad == 0, "q6_k: %d values differ", bad);
}

static void test_float_rows(void) {
    uint8_t b[8];
    float y[4];
    b[0] = 0x00, b[1] = 0x3C, b[2] = 0x01, b[3] = 0x00, b[4] = 0xFF, b[5] = 0x7B, b[6] = 0x00, b[7] = 0xFC;
    CHECK(deq(QC_GGML_F16, b, 8, 4, y) == QC_OK, "f16: %s", err);
    CHECK(y[0] == 1.0f && y[1] == 0x1p-24f && y[2] == 65504.0f && isinf(y[3]) && y[3] < 0, "f16 values");
    b[0] = 0x80, b[1] = 0x3F, b[2] = 0x49, b[3] = 0x40;
    CHECK(deq_unaligned(QC_GGML_BF16, b, 4, 2, y) == QC_OK && y[0] == 1.0f && y[1] == 3.140625f, "bf16 %g", y[1]);
    float f[2] = {1.5f, -2.25f};
    CHECK(deq_unaligned(QC_GGML_F32, (const uint8_t *)f, 8, 2, y) == QC_OK && y[0] == 1.5f && y[1] == -2.25f, "f32");
}

/* Truncated, oversized, ragged, unknown and NULL inputs are refused before any read. */
static void test_refusals(void) {
    static const uint32_t types[] = {0, 1, 2, 3, 8, 12, 13, 14, 30, 39};
    uint8_t *blk = calloc(4 * 210, 1);
    float *y = malloc(4 * 256 * sizeof(float));
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        uint32_t t = types[i];
        int64_t n = 2 * (int64_t)qc_ggml_block_size(t);
        size_t need = qc_ggml_row_bytes(t, n, err, sizeof err);
        CHECK(deq(t, blk, need, n, y) == QC_OK, "%s exact: %s", qc_ggml_type_name(t), err);
        CHECK(deq(t, blk, need - 1, n, y) == QC_ERR_INVALID && strstr(err, "truncated"), "%s short: %s",
              qc_ggml_type_name(t), err);
        CHECK(deq(t, blk, need + 1, n, y) == QC_ERR_INVALID && strstr(err, "oversized"), "%s long: %s",
              qc_ggml_type_name(t), err);
        CHECK(deq(t, blk, need / 2, n, y) == QC_ERR_INVALID, "%s half", qc_ggml_type_name(t));
        CHECK(deq(t, blk, 0, n, y) == QC_ERR_INVALID, "%s empty input", qc_ggml_type_name(t));
        if (qc_ggml_block_size(t) > 1) {
            CHECK(deq(t, blk, need, n - 1, y) == QC_ERR_INVALID && strstr(err, "multiple"), "%s ragged: %s",
                  qc_ggml_type_name(t), err);
            CHECK(deq(t, blk, need, n + 1, y) == QC_ERR_INVALID, "%s ragged+", qc_ggml_type_name(t));
        }
        CHECK(deq(t, blk, need, -n, y) == QC_ERR_INVALID && strstr(err, "negative"), "%s negative", qc_ggml_type_name(t));
        CHECK(qc_ggml_dequantize(t, NULL, need, n, y, err, sizeof err) == QC_ERR_INVALID, "%s NULL in", qc_ggml_type_name(t));
        CHECK(qc_ggml_dequantize(t, blk, need, n, NULL, err, sizeof err) == QC_ERR_INVALID, "%s NULL out", qc_ggml_type_name(t));
        CHECK(qc_ggml_dequantize(t, NULL, 0, 0, NULL, err, sizeof err) == QC_OK, "%s zero elements", qc_ggml_type_name(t));
        /* hostile counts: the byte size would overflow or wrap to something small */
        CHECK(qc_ggml_dequantize(t, blk, need, INT64_MAX - INT64_MAX % (int64_t)qc_ggml_block_size(t), y, err,
                                 sizeof err) == QC_ERR_INVALID,
              "%s huge count", qc_ggml_type_name(t));
        CHECK(qc_ggml_dequantize(t, blk, SIZE_MAX, n, y, err, sizeof err) == QC_ERR_INVALID, "%s SIZE_MAX bytes",
              qc_ggml_type_name(t));
    }
    CHECK(qc_ggml_dequantize(6, blk, 22, 32, y, err, sizeof err) == QC_ERR_UNSUPPORTED && strstr(err, "6"),
          "q5_0: %s", err);
    CHECK(qc_ggml_dequantize(QC_GGML_Q4_0, blk, 18, 32, y, NULL, 0) == QC_OK, "NULL err buffer is fine");
    CHECK(qc_ggml_dequantize(QC_GGML_Q4_0, blk, 17, 32, y, NULL, 0) == QC_ERR_INVALID, "NULL err buffer on error");

    /* random (type, count, size) triples: anything accepted must be exactly sized */
    uint64_t rng = 99;
    int accepted = 0, wrong = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t t = (uint32_t)(qc_test_rng(&rng) % 41);
        int64_t n = (int64_t)(qc_test_rng(&rng) % 1025) - 8;
        size_t bytes = (size_t)(qc_test_rng(&rng) % (4 * 210 + 1));
        qc_status st = qc_ggml_dequantize(t, blk, bytes, n, y, err, sizeof err);
        if (st == QC_OK) {
            accepted++;
            wrong += bytes != qc_ggml_row_bytes(t, n, err, sizeof err) || n < 0;
        } else if (!err[0]) {
            wrong++;
        }
    }
    CHECK(wrong == 0, "%d accepted triples were not exactly sized, or refusals without a message", wrong);
    CHECK(accepted > 0, "no triple accepted");
    free(blk);
    free(y);
}

int main(void) {
    test_sizes();
    test_32_blocks();
    test_k_quants();
    test_float_rows();
    test_refusals();
    return qc_test_finish("ggml");
}
