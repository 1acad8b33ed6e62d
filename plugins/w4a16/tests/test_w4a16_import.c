/* test_w4a16_import.c - GPTQ (v1, v2, act-order), AWQ and GGUF Q4 imports from hand-packed tensors, and refusals. */
#include "w4_test_util.h"

/* The packings below are written from the formats' public descriptions
 * (see docs/formats/w4a16.md, "Imports"), independently of the plugin:
 *
 * GPTQ  qweight i32 [K/8, N]: row r, nibble i (bits 4i..4i+3) of column c
 *       holds the code of input 8r+i, output c.
 *       qzeros i32 [K/g, N/8]: nibble i of column c holds the zero of output
 *       8c+i; "gptq" (v1) stores zero-1, "gptq_v2" the zero itself.
 *       scales f16 [K/g, N]; g_idx i32 [K] the group of each input.
 * AWQ   qweight i32 [K, N/8]: nibble slot i of column c holds output
 *       8c + {0,2,4,6,1,3,5,7}[i]; qzeros i32 [K/g, N/8] the same way, raw
 *       zeros; scales f16 [K/g, N].  w = (q - z) * s.
 * GGUF  Q4_0 block: f16 d, u8 qs[16]; value l is the low nibble of qs[l],
 *       value l+16 its high nibble; w = d*(q-8).  Q4_1: f16 d, f16 m, qs;
 *       w = d*q + m. */

typedef struct src_weight {
    int64_t n, k;
    uint32_t g;
    int64_t ng;
    uint8_t *q;    /* [n][k] codes, logical input order */
    uint8_t *z;    /* [ng][n] true zero points */
    uint16_t *s;   /* [ng][n] f16 scales */
    int32_t *gidx; /* [k] group of each input */
} src_weight;

static void src_make(src_weight *w, int64_t n, int64_t k, uint32_t g, uint64_t seed, int zlo, int zhi) {
    w->n = n;
    w->k = k;
    w->g = g;
    w->ng = k / g;
    w->q = malloc((size_t)(n * k));
    w->z = malloc((size_t)(w->ng * n));
    w->s = malloc(sizeof(uint16_t) * (size_t)(w->ng * n));
    w->gidx = malloc(sizeof(int32_t) * (size_t)k);
    for (int64_t i = 0; i < n * k; i++) w->q[i] = (uint8_t)(qc_test_rng(&seed) % 16);
    for (int64_t i = 0; i < w->ng * n; i++) {
        w->z[i] = (uint8_t)(zlo + (int)(qc_test_rng(&seed) % (uint64_t)(zhi - zlo + 1)));
        w->s[i] = qc_f32_to_f16(0.001f + 0.02f * (float)(qc_test_rng(&seed) % 1000) / 1000.0f);
    }
    for (int64_t c = 0; c < k; c++) w->gidx[c] = (int32_t)(c / g);
}

static void src_free(src_weight *w) {
    free(w->q);
    free(w->z);
    free(w->s);
    free(w->gidx);
}

/* Act-order: channels quantized in a random order P, group i/g for the i-th
 * one, so g_idx[P[i]] = i / g is not monotonic. */
static void src_act_order(src_weight *w, uint64_t seed) {
    int32_t *p = malloc(sizeof(int32_t) * (size_t)w->k);
    for (int64_t i = 0; i < w->k; i++) p[i] = (int32_t)i;
    for (int64_t i = w->k - 1; i > 0; i--) {
        int64_t j = (int64_t)(qc_test_rng(&seed) % (uint64_t)(i + 1));
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    for (int64_t i = 0; i < w->k; i++) w->gidx[p[i]] = (int32_t)(i / w->g);
    free(p);
}

static uint32_t *gptq_qweight(const src_weight *w) {
    uint32_t *o = calloc((size_t)(w->k / 8 * w->n), 4);
    for (int64_t r = 0; r < w->k / 8; r++)
        for (int64_t c = 0; c < w->n; c++)
            for (int i = 0; i < 8; i++) o[r * w->n + c] |= (uint32_t)w->q[c * w->k + 8 * r + i] << (4 * i);
    return o;
}

static uint32_t *gptq_qzeros(const src_weight *w, int v1) {
    uint32_t *o = calloc((size_t)(w->ng * w->n / 8), 4);
    for (int64_t gi = 0; gi < w->ng; gi++)
        for (int64_t c = 0; c < w->n / 8; c++)
            for (int i = 0; i < 8; i++) {
                uint32_t z = w->z[gi * w->n + 8 * c + i] - (v1 ? 1u : 0u);
                o[gi * (w->n / 8) + c] |= (z & 15u) << (4 * i);
            }
    return o;
}

static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static uint32_t *awq_qweight(const src_weight *w) {
    uint32_t *o = calloc((size_t)(w->k * w->n / 8), 4);
    for (int64_t r = 0; r < w->k; r++)
        for (int64_t c = 0; c < w->n / 8; c++)
            for (int i = 0; i < 8; i++)
                o[r * (w->n / 8) + c] |= (uint32_t)w->q[(8 * c + awq_order[i]) * w->k + r] << (4 * i);
    return o;
}

static uint32_t *awq_qzeros(const src_weight *w) {
    uint32_t *o = calloc((size_t)(w->ng * w->n / 8), 4);
    for (int64_t gi = 0; gi < w->ng; gi++)
        for (int64_t c = 0; c < w->n / 8; c++)
            for (int i = 0; i < 8; i++)
                o[gi * (w->n / 8) + c] |= (uint32_t)w->z[gi * w->n + 8 * c + awq_order[i]] << (4 * i);
    return o;
}

static qc_named_tensor tensor2(const char *name, const void *data, qc_dtype dt, int64_t d0, int64_t d1) {
    size_t es = dt == QC_DT_I32 ? 4 : dt == QC_DT_F16 ? 2 : 1;
    qc_named_tensor t = {name, data, (size_t)(d0 * d1) * es, dt, 2, {d0, d1, 0, 0}};
    return t;
}
static qc_named_tensor tensor1(const char *name, const void *data, qc_dtype dt, int64_t d0) {
    size_t es = dt == QC_DT_I32 ? 4 : dt == QC_DT_F16 ? 2 : 1;
    qc_named_tensor t = {name, data, (size_t)d0 * es, dt, 1, {d0, 0, 0, 0}};
    return t;
}

/* Every value of the imported weight against w = s*(q-z), in logical order,
 * bit for bit; codes against the w4a16 layout. */
static void check_values(const w4t *t, const qc_packed_weight *pw, const src_weight *w, const char *what) {
    float *deq = malloc(sizeof(float) * (size_t)(w->n * w->k));
    CHECK(t->f->dequantize(pw, deq) == QC_OK, "%s: dequantize", what);
    int bad = 0;
    for (int64_t j = 0; j < w->n; j++)
        for (int64_t c = 0; c < w->k; c++) {
            int64_t gi = w->gidx[c];
            float want = qc_f16_to_f32(w->s[gi * w->n + j]) * (float)((int)w->q[j * w->k + c] - (int)w->z[gi * w->n + j]);
            if (w4t_bits(want) != w4t_bits(deq[j * w->k + c]) && bad++ < 3)
                fprintf(stderr, "  %s: w[%lld,%lld] = %g, expected %g\n", what, (long long)j, (long long)c,
                        deq[j * w->k + c], want);
        }
    CHECK(bad == 0, "%s: %d values differ", what, bad);
    /* the stored layout: column t is input perm[t] (or t), element 2i low */
    const qc_buffer *bp = w4t_buf(pw, "perm");
    const int32_t *perm = bp ? bp->data : NULL;
    const uint16_t *s = w4t_buf(pw, "scales")->data;
    bad = 0;
    for (int64_t j = 0; j < w->n; j++)
        for (int64_t st = 0; st < w->k; st++) {
            int64_t c = perm ? perm[st] : st;
            if (w4t_code(pw, j, st) != w->q[j * w->k + c]) bad++;
            if (w->gidx[c] != st / w->g) bad++; /* stored groups are contiguous */
            if (s[j * w->ng + st / w->g] != w->s[(st / w->g) * w->n + j]) bad++;
        }
    CHECK(bad == 0, "%s: %d stored codes, groups or scales are not where the layout says", what, bad);
    free(deq);
}

static qc_status run_import(const w4t *t, const char *layout, const qc_named_tensor *ts, size_t nt, int64_t n,
                            int64_t k, uint32_t g, qc_packed_weight *pw, qc_reason *why) {
    memset(why, 0, sizeof *why);
    return t->imp->import(layout, ts, nt, n, k, g, pw, why);
}

static void check_gptq(const w4t *t, int v1, int act_order, int sym, uint32_t g, const char *what) {
    src_weight w;
    src_make(&w, 24, 512, g, 77 + g + (uint64_t)v1 * 3 + (uint64_t)act_order * 5, v1 ? 1 : 0, 15);
    if (sym) memset(w.z, 8, (size_t)(w.ng * w.n));
    if (act_order) src_act_order(&w, 99 + g);
    uint32_t *qw = gptq_qweight(&w), *qz = gptq_qzeros(&w, v1);
    qc_named_tensor ts[4] = {
        tensor2("scales", w.s, QC_DT_F16, w.ng, w.n),
        tensor2("qweight", qw, QC_DT_I32, w.k / 8, w.n),
        tensor2("qzeros", qz, QC_DT_I32, w.ng, w.n / 8),
        tensor1("g_idx", w.gidx, QC_DT_I32, w.k),
    };
    qc_packed_weight pw;
    qc_reason why;
    /* without act-order the g_idx is optional: give it every other time */
    size_t nt = act_order || g == 64 ? 4 : 3;
    qc_status st = run_import(t, v1 ? "gptq" : "gptq_v2", ts, nt, w.n, w.k, 0, &pw, &why);
    CHECK(st == QC_OK, "%s: %s %s", what, why.code, why.text);
    if (st == QC_OK) {
        uint32_t want = (sym ? W4A16_SCHEME_SYM : W4A16_SCHEME_ASYM) | (act_order ? W4A16_SCHEME_PERM : 0);
        CHECK(pw.scheme == want, "%s: scheme 0x%x, expected 0x%x", what, pw.scheme, want);
        CHECK(pw.group_size == g && pw.n == w.n && pw.k == w.k, "%s: header", what);
        CHECK((w4t_buf(&pw, "zeros") != NULL) == !sym, "%s: zeros buffer", what);
        CHECK((w4t_buf(&pw, "perm") != NULL) == act_order, "%s: perm buffer", what);
        if (!sym && w4t_buf(&pw, "zeros")) {
            const uint8_t *z = w4t_buf(&pw, "zeros")->data;
            int bad = 0;
            for (int64_t j = 0; j < w.n; j++)
                for (int64_t gi = 0; gi < w.ng; gi++) bad += z[j * w.ng + gi] != w.z[gi * w.n + j];
            CHECK(bad == 0, "%s: %d zero points", what, bad);
        }
        if (act_order && w4t_buf(&pw, "perm")) {
            /* channels of a group keep their input order */
            const int32_t *perm = w4t_buf(&pw, "perm")->data;
            int bad = 0;
            for (int64_t s = 1; s < w.k; s++) bad += s % g != 0 && perm[s] <= perm[s - 1];
            CHECK(bad == 0, "%s: perm not ascending within groups", what);
        }
        check_values(t, &pw, &w, what);
        /* the reference kernel on the import: y against a float64 oracle */
        enum { M = 3 };
        float x[M * 512], y[M * 24];
        float *deq = malloc(sizeof(float) * (size_t)(w.n * w.k));
        qc_test_fill(x, M * 512, 31, 1.0f);
        const char *kid = NULL;
        CHECK(t->f->dequantize(&pw, deq) == QC_OK && w4t_linear(t, &pw, x, y, M, &kid) == 0, "%s: kernel", what);
        int bad = 0;
        for (int i = 0; i < M; i++)
            for (int64_t j = 0; j < w.n; j++) {
                double e = 0, mag = 0;
                for (int64_t c = 0; c < w.k; c++) {
                    double p = (double)qc_round_bf16(x[i * 512 + c]) * deq[j * w.k + c];
                    e += p;
                    mag += fabs(p);
                }
                bad += !(fabs(y[i * w.n + j] - e) <= (w.k + 1) * 0x1p-24 * mag);
            }
        CHECK(bad == 0, "%s: %d kernel outputs beyond tolerance (kernel %s)", what, bad, kid ? kid : "-");
        free(deq);
        t->f->release(&pw);
    }
    free(qw);
    free(qz);
    src_free(&w);
}

static void check_awq(const w4t *t, uint32_t g) {
    src_weight w;
    src_make(&w, 32, 256, g, 500 + g, 0, 15);
    uint32_t *qw = awq_qweight(&w), *qz = awq_qzeros(&w);
    qc_named_tensor ts[3] = {
        tensor2("qweight", qw, QC_DT_I32, w.k, w.n / 8),
        tensor2("qzeros", qz, QC_DT_I32, w.ng, w.n / 8),
        tensor2("scales", w.s, QC_DT_F16, w.ng, w.n),
    };
    qc_packed_weight pw;
    qc_reason why;
    qc_status st = run_import(t, "awq", ts, 3, w.n, w.k, g, &pw, &why);
    CHECK(st == QC_OK, "awq g%u: %s", g, why.text);
    if (st == QC_OK) {
        CHECK(pw.scheme == W4A16_SCHEME_ASYM && pw.group_size == g, "awq scheme 0x%x", pw.scheme);
        check_values(t, &pw, &w, "awq");
        t->f->release(&pw);
    }
    /* AWQ qweight read as if it were GPTQ-ordered along N must not match:
     * the interleave matters (a sanity check of the test itself). */
    int differs = 0;
    for (int64_t c = 0; c < w.n && !differs; c++) differs = w.q[c * w.k] != w.q[(c ^ 1) * w.k];
    CHECK(differs, "test data too uniform to catch an interleave bug");
    free(qw);
    free(qz);
    src_free(&w);
}

/* GGUF blocks built from known codes. */
static void check_gguf(const w4t *t, int q4_1) {
    enum { N = 8, K = 64, NB = K / 32 };
    size_t bs = q4_1 ? 20 : 18;
    uint8_t blocks[N * NB * 20];
    uint8_t codes[N][K];
    uint16_t d[N][NB], mn[N][NB];
    uint64_t seed = 42 + (uint64_t)q4_1;
    for (int j = 0; j < N; j++)
        for (int b = 0; b < NB; b++) {
            uint8_t *blk = blocks + ((size_t)j * NB + b) * bs;
            d[j][b] = qc_f32_to_f16((qc_test_uniform(&seed)) * 0.05f); /* sign included, as Q4_0 makes */
            mn[j][b] = qc_f32_to_f16(-0.3f + 0.01f * (float)(qc_test_rng(&seed) % 10));
            blk[0] = (uint8_t)(d[j][b] & 0xff);
            blk[1] = (uint8_t)(d[j][b] >> 8);
            if (q4_1) {
                blk[2] = (uint8_t)(mn[j][b] & 0xff);
                blk[3] = (uint8_t)(mn[j][b] >> 8);
            }
            uint8_t *qs = blk + (q4_1 ? 4 : 2);
            for (int l = 0; l < 32; l++) codes[j][b * 32 + l] = (uint8_t)(qc_test_rng(&seed) % 16);
            for (int l = 0; l < 16; l++) qs[l] = (uint8_t)(codes[j][b * 32 + l] | codes[j][b * 32 + l + 16] << 4);
        }
    const char *layout = q4_1 ? "gguf.q4_1" : "gguf.q4_0";
    qc_named_tensor ts = tensor2("blk.0.ffn_up.weight", blocks, QC_DT_U8, N, (int64_t)(NB * bs));
    qc_packed_weight pw;
    qc_reason why;
    qc_status st = run_import(t, layout, &ts, 1, N, K, 0, &pw, &why);
    CHECK(st == QC_OK, "%s: %s", layout, why.text);
    if (st != QC_OK) return;
    CHECK(pw.scheme == (q4_1 ? W4A16_SCHEME_FMIN : W4A16_SCHEME_SYM) && pw.group_size == 32, "%s header", layout);
    CHECK(fabs(pw.logical_bits - (q4_1 ? 5.0 : 4.5)) < 1e-12, "%s: %g bits per weight", layout, pw.logical_bits);
    float deq[N * K];
    CHECK(t->f->dequantize(&pw, deq) == QC_OK, "dequantize");
    int bad = 0;
    for (int j = 0; j < N; j++)
        for (int c = 0; c < K; c++) {
            float dd = qc_f16_to_f32(d[j][c / 32]), want;
            if (q4_1) {
                float p = dd * (float)codes[j][c];
                want = p + qc_f16_to_f32(mn[j][c / 32]);
            } else {
                want = dd * (float)((int)codes[j][c] - 8);
            }
            bad += w4t_bits(want) != w4t_bits(deq[j * K + c]);
            bad += w4t_code(&pw, j, c) != codes[j][c];
        }
    CHECK(bad == 0, "%s: %d values or codes differ", layout, bad);
    /* the 1-D form of the same bytes is taken too */
    t->f->release(&pw);
    ts = tensor1("w", blocks, QC_DT_U8, (int64_t)(N * NB * bs));
    CHECK(run_import(t, layout, &ts, 1, N, K, 32, &pw, &why) == QC_OK, "%s 1-D: %s", layout, why.text);
    t->f->release(&pw);
}

static void expect_refused(const w4t *t, const char *what, const char *layout, const qc_named_tensor *ts, size_t nt,
                           int64_t n, int64_t k, uint32_t g, const char *code) {
    qc_packed_weight pw;
    memset(&pw, 0x5a, sizeof pw);
    qc_reason why;
    qc_status st = run_import(t, layout, ts, nt, n, k, g, &pw, &why);
    CHECK(st != QC_OK, "%s: accepted", what);
    CHECK(strcmp(why.code, code) == 0, "%s: code '%s' (%s), expected '%s'", what, why.code, why.text, code);
    CHECK(why.text[0] != 0 && pw.n_buffers == 0, "%s: no sentence or output not empty", what);
    if (st == QC_OK) t->f->release(&pw);
}

static void check_refusals(const w4t *t) {
    src_weight w;
    src_make(&w, 16, 256, 64, 9, 1, 15);
    uint32_t *qw = gptq_qweight(&w), *qz = gptq_qzeros(&w, 1);
    const qc_named_tensor good[4] = {
        tensor2("qweight", qw, QC_DT_I32, 32, 16),
        tensor2("qzeros", qz, QC_DT_I32, 4, 2),
        tensor2("scales", w.s, QC_DT_F16, 4, 16),
        tensor1("g_idx", w.gidx, QC_DT_I32, 256),
    };
    qc_named_tensor ts[5];
    qc_packed_weight pw;
    qc_reason why;
    CHECK(run_import(t, "gptq", good, 4, 16, 256, 64, &pw, &why) == QC_OK, "the good tensors: %s", why.text);
    t->f->release(&pw);

#define RESET() memcpy(ts, good, sizeof good)
    RESET();
    ts[0].dtype = QC_DT_F16;
    expect_refused(t, "qweight as f16", "gptq", ts, 4, 16, 256, 0, "dtype");
    RESET();
    ts[0].shape[1] = 24;
    expect_refused(t, "qweight [32, 24]", "gptq", ts, 4, 16, 256, 0, "shape");
    RESET();
    ts[0].ndim = 3;
    expect_refused(t, "qweight of rank 3", "gptq", ts, 4, 16, 256, 0, "shape");
    RESET();
    ts[0].ndim = -7;
    expect_refused(t, "qweight of rank -7", "gptq", ts, 4, 16, 256, 0, "shape");
    RESET();
    ts[0].bytes -= 1;
    expect_refused(t, "qweight one byte short", "gptq", ts, 4, 16, 256, 0, "bytes");
    RESET();
    ts[1].bytes += 4;
    expect_refused(t, "qzeros one word long", "gptq", ts, 4, 16, 256, 0, "bytes");
    RESET();
    ts[0].data = NULL;
    expect_refused(t, "qweight without data", "gptq", ts, 4, 16, 256, 0, "tensor");
    RESET();
    expect_refused(t, "scales missing", "gptq", ts, 2, 16, 256, 0, "tensor");
    RESET();
    ts[4] = tensor1("bias", w.s, QC_DT_F16, 16);
    expect_refused(t, "an unexpected bias", "gptq", ts, 5, 16, 256, 0, "tensor");
    RESET();
    ts[3] = ts[0];
    expect_refused(t, "qweight twice", "gptq", ts, 4, 16, 256, 0, "tensor");
    RESET();
    ts[1].name = NULL;
    expect_refused(t, "an unnamed tensor", "gptq", ts, 4, 16, 256, 0, "tensor");
    RESET();
    ts[2].shape[0] = 3;
    expect_refused(t, "scales rows do not divide k", "gptq", ts, 4, 16, 256, 0, "shape");
    RESET();
    ts[2].shape[0] = 16;
    ts[2].bytes = 16 * 16 * 2;
    expect_refused(t, "group 16", "gptq", ts, 4, 16, 256, 0, "group");
    RESET();
    ts[2].dtype = QC_DT_BF16;
    expect_refused(t, "bf16 scales", "gptq", ts, 4, 16, 256, 0, "dtype");
    RESET();
    expect_refused(t, "group 128 asked, tensors have 64", "gptq", ts, 4, 16, 256, 128, "group");
    expect_refused(t, "k given wrong", "gptq", ts, 4, 16, 512, 0, "shape"); /* g = 128, then qweight */
    expect_refused(t, "n given wrong", "gptq", ts, 4, 24, 256, 0, "shape");
    expect_refused(t, "k = 0", "gptq", ts, 4, 16, 0, 0, "shape");
    expect_refused(t, "n = -8", "gptq", ts, 4, -8, 256, 0, "shape");
    expect_refused(t, "an unknown layout", "exl2", ts, 4, 16, 256, 0, "layout");
    expect_refused(t, "no layout", NULL, ts, 4, 16, 256, 0, "layout");
    expect_refused(t, "awq does not take g_idx", "awq", ts, 4, 16, 256, 0, "tensor");
    expect_refused(t, "tensors announced, none given", "gptq", NULL, 4, 16, 256, 0, "tensor");

    /* values */
    uint16_t *s2 = malloc(sizeof(uint16_t) * 64);
    memcpy(s2, w.s, sizeof(uint16_t) * 64);
    s2[37] = 0x7e00; /* NaN */
    RESET();
    ts[2].data = s2;
    expect_refused(t, "a NaN scale", "gptq", ts, 4, 16, 256, 0, "value");
    s2[37] = 0xfc00; /* -inf */
    expect_refused(t, "an infinite scale", "gptq", ts, 4, 16, 256, 0, "value");
    uint32_t *qz2 = malloc(4 * 8);
    memcpy(qz2, qz, 4 * 8);
    qz2[5] |= 0xfu << 12; /* stored 15: v1 zero 16 */
    RESET();
    ts[1].data = qz2;
    expect_refused(t, "a v1 zero of 16", "gptq", ts, 4, 16, 256, 0, "zero");
    RESET();
    ts[1].data = qz2; /* the same field is zero 15 in v2 */
    CHECK(run_import(t, "gptq_v2", ts, 4, 16, 256, 0, &pw, &why) == QC_OK, "v2 zero 15: %s", why.text);
    t->f->release(&pw);
    int32_t *g2 = malloc(sizeof(int32_t) * 256);
    memcpy(g2, w.gidx, sizeof(int32_t) * 256);
    g2[10] = 4;
    RESET();
    ts[3].data = g2;
    expect_refused(t, "g_idx beyond the groups", "gptq", ts, 4, 16, 256, 0, "g_idx");
    g2[10] = -1;
    expect_refused(t, "a negative g_idx", "gptq", ts, 4, 16, 256, 0, "g_idx");
    g2[10] = 1; /* group 0 gets 63 channels, group 1 65 */
    expect_refused(t, "unequal groups", "gptq", ts, 4, 16, 256, 0, "g_idx");
    RESET();
    ts[3].dtype = QC_DT_F32;
    expect_refused(t, "g_idx as f32", "gptq", ts, 4, 16, 256, 0, "dtype");

    /* shapes w4a16 refuses as a format */
    src_weight w12;
    src_make(&w12, 12, 96, 32, 3, 1, 15);
    uint32_t *qw12 = gptq_qweight(&w12), *qz12 = gptq_qzeros(&w12, 1);
    qc_named_tensor t12[3] = {
        tensor2("qweight", qw12, QC_DT_I32, 12, 12), /* [96/8, n=12] */
        tensor2("qzeros", qz12, QC_DT_I32, 3, 1),
        tensor2("scales", w12.s, QC_DT_F16, 3, 12),
    };
    expect_refused(t, "n = 12", "gptq", t12, 3, 12, 96, 0, "align_n");

    /* GGUF */
    uint8_t blocks[8 * 2 * 20];
    for (size_t i = 0; i < sizeof blocks; i++) blocks[i] = (uint8_t)(i * 37 + 11);
    for (int b = 0; b < 16; b++) { /* finite scales and minimums */
        blocks[b * 20 + 1] = 0x20;
        blocks[b * 20 + 3] = 0x20;
    }
    qc_named_tensor gb = tensor2("w", blocks, QC_DT_U8, 8, 40);
    CHECK(run_import(t, "gguf.q4_1", &gb, 1, 8, 64, 0, &pw, &why) == QC_OK, "q4_1 blocks: %s", why.text);
    t->f->release(&pw);
    qc_named_tensor gx = gb;
    gx.bytes -= 1;
    expect_refused(t, "gguf one byte short", "gguf.q4_1", &gx, 1, 8, 64, 0, "bytes");
    /* Q4_0 rows of 64 are 36 bytes: these 40-byte rows are another layout */
    expect_refused(t, "gguf q4_0 shape of q4_1 bytes", "gguf.q4_0", &gb, 1, 8, 64, 0, "shape");
    gx = tensor1("w", blocks, QC_DT_U8, 8 * 40 - 1);
    expect_refused(t, "gguf 1-D one short", "gguf.q4_1", &gx, 1, 8, 64, 0, "shape");
    gx = gb;
    gx.dtype = QC_DT_I8;
    expect_refused(t, "gguf as i8", "gguf.q4_1", &gx, 1, 8, 64, 0, "dtype");
    qc_named_tensor two[2] = {gb, gb};
    expect_refused(t, "gguf two tensors", "gguf.q4_1", two, 2, 8, 64, 0, "tensor");
    expect_refused(t, "gguf group 64", "gguf.q4_1", &gb, 1, 8, 64, 64, "group");
    expect_refused(t, "gguf k=48", "gguf.q4_1", &gb, 1, 8, 48, 0, "align_k");
    blocks[20 * 3 + 3] = 0x7c; /* block 3: minimum = inf */
    expect_refused(t, "gguf infinite minimum", "gguf.q4_1", &gb, 1, 8, 64, 0, "value");

    free(qw12);
    free(qz12);
    src_free(&w12);
    free(g2);
    free(qz2);
    free(s2);
    free(qw);
    free(qz);
    src_free(&w);
}

int main(void) {
    w4t t;
    if (w4t_open(&t) != 0) {
        CHECK(0, "open the w4a16 plugin");
        return qc_test_finish("w4a16_import");
    }
    int found = 0;
    for (const char *const *l = t.imp->layouts; *l; l++)
        found += !strcmp(*l, "gptq") + !strcmp(*l, "gptq_v2") + !strcmp(*l, "awq") + !strcmp(*l, "gguf.q4_0") +
                 !strcmp(*l, "gguf.q4_1");
    CHECK(found == 5 && t.imp->struct_size >= sizeof(qc_importer_ext), "layouts listed: %d", found);
    static const uint32_t groups[] = {32, 64, 128};
    for (int i = 0; i < 3; i++) {
        uint32_t g = groups[i];
        check_gptq(&t, 1, 0, 0, g, "gptq v1");
        check_gptq(&t, 0, 0, 0, g, "gptq v2");
        check_gptq(&t, 1, 0, 1, g, "gptq v1 sym");
        check_gptq(&t, 1, 1, 0, g, "gptq v1 act-order");
        check_gptq(&t, 0, 1, 0, g, "gptq v2 act-order");
        check_gptq(&t, 1, 1, 1, g, "gptq v1 sym act-order");
        check_awq(&t, g);
    }
    check_gguf(&t, 0);
    check_gguf(&t, 1);
    check_refusals(&t);
    qc_runtime_close(t.rt);
    return qc_test_finish("w4a16_import");
}
