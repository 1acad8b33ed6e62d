/* test_gguf.c - the GGUF reader on a small file built here byte by byte, on every corruption it must refuse, and on the default model if present. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "qc_gguf.h"
#include "qc_test.h"
#include "rd_bytes.h"

/* ---- the valid file -------------------------------------------------------
 * "GGUF", u32 version 3, u64 n_tensors = NT, u64 n_kv = NKV, then NKV
 * key/values (key string, u32 type, value), then NT tensor infos (name
 * string, u32 n_dims, n_dims x u64 ne, u32 ggml type, u64 offset), zero
 * padding to the alignment, and the tensors' data, each at an aligned offset
 * and filled with byte j of tensor i = i*31 + j*7 + 1.  The last tensor ends
 * the file exactly, so every shorter prefix is invalid. */

enum { NKV = 21, NT = 10 };

typedef struct gpos {
    size_t key_len[NKV], key_type[NKV], val[NKV];    /* offsets of the fields of each KV */
    size_t t_name_len[NT], t_ndims[NT], t_ne[NT], t_type[NT], t_off[NT];
    uint64_t off[NT];
    size_t data_start;
} gpos;

typedef struct tdef {
    const char *name; /* all 5 bytes long, so one can be patched into another */
    uint32_t type, n_dims;
    uint64_t ne[4];
    size_t bytes;
} tdef;

static const tdef TDEFS[NT] = {
    {"w.f32", 0, 2, {8, 2, 1, 1}, 64},       {"w.q40", 2, 2, {64, 1, 1, 1}, 36},
    {"w.q4k", 12, 1, {256, 1, 1, 1}, 144},   {"w.q80", 8, 3, {32, 1, 2, 1}, 68},
    {"w.mx4", 39, 4, {32, 1, 1, 2}, 34},     {"w.q41", 3, 1, {32, 1, 1, 1}, 20},
    {"w.q5k", 13, 1, {256, 1, 1, 1}, 176},   {"w.q6k", 14, 1, {256, 1, 1, 1}, 210},
    {"w.f16", 1, 1, {3, 1, 1, 1}, 6},        {"w.b16", 30, 1, {5, 1, 1, 1}, 10},
};

static uint8_t fill_byte(size_t t, size_t j) { return (uint8_t)(t * 31 + j * 7 + 1); }

/* key i, its type written by the caller */
static void key(rd_bytes *b, gpos *ps, int i, const char *k, uint32_t type) {
    ps->key_len[i] = b->n;
    rb_gstr(b, k);
    ps->key_type[i] = b->n;
    rb_u32(b, type);
    ps->val[i] = b->n;
}

static void build(rd_bytes *b, gpos *ps, uint32_t align) {
    memset(ps, 0, sizeof *ps);
    b->n = 0;
    rb_put(b, "GGUF", 4);
    rb_u32(b, 3);
    rb_u64(b, NT);
    rb_u64(b, NKV);
    key(b, ps, 0, "general.architecture", 8); rb_gstr(b, "llama");
    key(b, ps, 1, "general.alignment", 4); rb_u32(b, align);
    key(b, ps, 2, "test.u8", 0); rb_u8(b, 200);
    key(b, ps, 3, "test.i8", 1); rb_u8(b, (uint8_t)-100);
    key(b, ps, 4, "test.u16", 2); rb_u16(b, 60000);
    key(b, ps, 5, "test.i16", 3); rb_u16(b, (uint16_t)-30000);
    key(b, ps, 6, "test.u32", 4); rb_u32(b, 4000000000u);
    key(b, ps, 7, "test.i32", 5); rb_u32(b, (uint32_t)-2000000000);
    key(b, ps, 8, "test.f32", 6); rb_f32(b, 1.5f);
    key(b, ps, 9, "test.bool", 7); rb_u8(b, 1);
    key(b, ps, 10, "test.str", 8); rb_gstr(b, "h\xc3\xa9llo");
    key(b, ps, 11, "test.u64", 10); rb_u64(b, (1ull << 63) + 5);
    key(b, ps, 12, "test.i64", 11); rb_u64(b, (uint64_t)-(1ll << 62));
    key(b, ps, 13, "test.f64", 12); rb_f64(b, -2.25);
    key(b, ps, 14, "test.arr_i32", 9); rb_u32(b, 5); rb_u64(b, 3);
    rb_u32(b, 1); rb_u32(b, (uint32_t)-2); rb_u32(b, 3);
    key(b, ps, 15, "test.arr_str", 9); rb_u32(b, 8); rb_u64(b, 3);
    rb_gstr(b, "a"); rb_gstr(b, ""); rb_gstr(b, "ccc");
    key(b, ps, 16, "test.arr_f32", 9); rb_u32(b, 6); rb_u64(b, 2); rb_f32(b, 0.5f); rb_f32(b, -1.0f);
    key(b, ps, 17, "test.arr_bool", 9); rb_u32(b, 7); rb_u64(b, 2); rb_u8(b, 1); rb_u8(b, 0);
    key(b, ps, 18, "test.arr_u8", 9); rb_u32(b, 0); rb_u64(b, 0);
    key(b, ps, 19, "test.f64_int", 12); rb_f64(b, 3.0);
    key(b, ps, 20, "test.u64_odd", 10); rb_u64(b, (1ull << 53) + 1);
    uint64_t off = 0;
    for (int i = 0; i < NT; i++) {
        const tdef *t = &TDEFS[i];
        ps->t_name_len[i] = b->n;
        rb_gstr(b, t->name);
        ps->t_ndims[i] = b->n;
        rb_u32(b, t->n_dims);
        ps->t_ne[i] = b->n;
        for (uint32_t d = 0; d < t->n_dims; d++) rb_u64(b, t->ne[d]);
        ps->t_type[i] = b->n;
        rb_u32(b, t->type);
        ps->t_off[i] = b->n;
        ps->off[i] = off;
        rb_u64(b, off);
        off += (t->bytes + align - 1) / align * align;
    }
    rb_zero_to(b, align);
    ps->data_start = b->n;
    for (int i = 0; i < NT; i++) {
        while (b->n < ps->data_start + ps->off[i]) rb_u8(b, 0);
        for (size_t j = 0; j < TDEFS[i].bytes; j++) rb_u8(b, fill_byte((size_t)i, j));
    }
}

static char err[512];

/* Open an exact-size copy; NULL is the expected outcome unless ok. */
static qc_gguf *open_copy(const uint8_t *p, size_t n, uint8_t **copy) {
    *copy = rb_dup(p, n);
    err[0] = 0;
    return qc_gguf_open_memory(*copy, n, err, sizeof err);
}

static void expect_err(const uint8_t *p, size_t n, const char *needle, const char *label) {
    uint8_t *c;
    qc_gguf *g = open_copy(p, n, &c);
    CHECK(g == NULL, "%s: accepted", label);
    CHECK_CONTAINS(err, needle);
    CHECK_CONTAINS(err, "<memory>: ");
    qc_gguf_close(g);
    free(c);
}

/* ---- the valid file, read back ------------------------------------------- */

static void check_valid(const qc_gguf *g, const gpos *ps, uint32_t align) {
    CHECK(qc_gguf_version(g) == 3, "version %u", qc_gguf_version(g));
    CHECK(qc_gguf_alignment(g) == align, "alignment %u", qc_gguf_alignment(g));
    CHECK(qc_gguf_data_offset(g) == ps->data_start, "data at %zu", qc_gguf_data_offset(g));
    CHECK(qc_gguf_kv_count(g) == NKV, "%zu kvs", qc_gguf_kv_count(g));
    CHECK(qc_gguf_tensor_count(g) == NT, "%zu tensors", qc_gguf_tensor_count(g));
    CHECK(qc_gguf_kv_at(g, NKV) == NULL, "kv past the end");
    CHECK(qc_gguf_tensor_at(g, NT) == NULL, "tensor past the end");

    const qc_gguf_kv *kv = qc_gguf_kv_at(g, 0);
    CHECK(kv && strcmp(kv->key, "general.architecture") == 0, "first key %s", kv ? kv->key : "-");
    size_t len = 0;
    const char *s = qc_gguf_get_str(g, "general.architecture", &len);
    CHECK(s && len == 5 && memcmp(s, "llama", 5) == 0, "architecture");
    s = qc_gguf_get_str(g, "test.str", &len);
    CHECK(s && len == 6 && memcmp(s, "h\xc3\xa9llo", 6) == 0, "utf-8 string");
    CHECK(qc_gguf_get_str(g, "test.u8", &len) == NULL, "a number is not a string");
    CHECK(qc_gguf_get_str(g, "nope", &len) == NULL, "absent string");

    kv = qc_gguf_find(g, "test.u8");
    CHECK(kv && kv->type == QC_GGUF_U8 && kv->num.u == 200, "u8");
    kv = qc_gguf_find(g, "test.i8");
    CHECK(kv && kv->type == QC_GGUF_I8 && kv->num.i == -100, "i8");
    kv = qc_gguf_find(g, "test.u16");
    CHECK(kv && kv->type == QC_GGUF_U16 && kv->num.u == 60000, "u16");
    kv = qc_gguf_find(g, "test.i16");
    CHECK(kv && kv->type == QC_GGUF_I16 && kv->num.i == -30000, "i16");
    kv = qc_gguf_find(g, "test.u32");
    CHECK(kv && kv->type == QC_GGUF_U32 && kv->num.u == 4000000000u, "u32");
    kv = qc_gguf_find(g, "test.i32");
    CHECK(kv && kv->type == QC_GGUF_I32 && kv->num.i == -2000000000, "i32");
    kv = qc_gguf_find(g, "test.f32");
    CHECK(kv && kv->type == QC_GGUF_F32 && kv->num.f == 1.5, "f32");
    kv = qc_gguf_find(g, "test.bool");
    CHECK(kv && kv->type == QC_GGUF_BOOL && kv->num.b == 1, "bool");
    kv = qc_gguf_find(g, "test.u64");
    CHECK(kv && kv->type == QC_GGUF_U64 && kv->num.u == (1ull << 63) + 5, "u64");
    kv = qc_gguf_find(g, "test.i64");
    CHECK(kv && kv->type == QC_GGUF_I64 && kv->num.i == -(1ll << 62), "i64");
    kv = qc_gguf_find(g, "test.f64");
    CHECK(kv && kv->type == QC_GGUF_F64 && kv->num.f == -2.25, "f64");
    CHECK(qc_gguf_find(g, "test") == NULL && qc_gguf_find(g, "") == NULL, "absent keys");

    /* typed getters convert only exactly */
    uint64_t u = 0;
    double f = 0;
    CHECK(qc_gguf_get_u64(g, "test.u8", &u) == 0 && u == 200, "get_u64 u8");
    CHECK(qc_gguf_get_u64(g, "general.alignment", &u) == 0 && u == align, "get_u64 u32");
    CHECK(qc_gguf_get_u64(g, "test.i8", &u) == -1, "negative to u64");
    CHECK(qc_gguf_get_u64(g, "test.i64", &u) == -1, "negative i64 to u64");
    CHECK(qc_gguf_get_u64(g, "test.f32", &u) == -1, "1.5 to u64");
    CHECK(qc_gguf_get_u64(g, "test.f64_int", &u) == 0 && u == 3, "3.0 to u64");
    CHECK(qc_gguf_get_u64(g, "test.bool", &u) == -1, "bool to u64");
    CHECK(qc_gguf_get_u64(g, "test.str", &u) == -1, "string to u64");
    CHECK(qc_gguf_get_u64(g, "test.arr_i32", &u) == -1, "array to u64");
    CHECK(qc_gguf_get_u64(g, "absent", &u) == -1, "absent u64");
    CHECK(qc_gguf_get_f64(g, "test.f32", &f) == 0 && f == 1.5, "get_f64 f32");
    CHECK(qc_gguf_get_f64(g, "test.i32", &f) == 0 && f == -2000000000.0, "get_f64 i32");
    CHECK(qc_gguf_get_f64(g, "test.i64", &f) == 0 && f == -4611686018427387904.0, "get_f64 -2^62");
    CHECK(qc_gguf_get_f64(g, "test.u64", &f) == -1, "2^63+5 is not exact in a double");
    CHECK(qc_gguf_get_f64(g, "test.u64_odd", &f) == -1, "2^53+1 is not exact in a double");
    CHECK(qc_gguf_get_f64(g, "test.str", &f) == -1, "string to f64");

    /* arrays */
    kv = qc_gguf_find(g, "test.arr_i32");
    CHECK(kv && kv->type == QC_GGUF_ARRAY && kv->arr_type == QC_GGUF_I32 && kv->arr_len == 3, "arr_i32");
    if (kv && kv->arr_len == 3) {
        int32_t v[3];
        memcpy(v, kv->arr_data, sizeof v); /* little-endian host */
        CHECK(v[0] == 1 && v[1] == -2 && v[2] == 3, "arr_i32 values %d %d %d", v[0], v[1], v[2]);
    }
    kv = qc_gguf_find(g, "test.arr_f32");
    CHECK(kv && kv->arr_type == QC_GGUF_F32 && kv->arr_len == 2, "arr_f32");
    if (kv && kv->arr_len == 2) {
        float v[2];
        memcpy(v, kv->arr_data, sizeof v);
        CHECK(v[0] == 0.5f && v[1] == -1.0f, "arr_f32 values");
    }
    kv = qc_gguf_find(g, "test.arr_bool");
    CHECK(kv && kv->arr_type == QC_GGUF_BOOL && kv->arr_len == 2 &&
              ((const uint8_t *)kv->arr_data)[0] == 1 && ((const uint8_t *)kv->arr_data)[1] == 0, "arr_bool");
    kv = qc_gguf_find(g, "test.arr_u8");
    CHECK(kv && kv->arr_type == QC_GGUF_U8 && kv->arr_len == 0, "empty array");
    CHECK(qc_gguf_arr_str(g, kv, 0, &len) == NULL, "arr_str on a u8 array");
    kv = qc_gguf_find(g, "test.arr_str");
    CHECK(kv && kv->arr_type == QC_GGUF_STRING && kv->arr_len == 3, "arr_str");
    s = qc_gguf_arr_str(g, kv, 0, &len);
    CHECK(s && len == 1 && s[0] == 'a', "arr_str[0]");
    s = qc_gguf_arr_str(g, kv, 1, &len);
    CHECK(s && len == 0, "arr_str[1] empty");
    s = qc_gguf_arr_str(g, kv, 2, &len);
    CHECK(s && len == 3 && memcmp(s, "ccc", 3) == 0, "arr_str[2]");
    CHECK(qc_gguf_arr_str(g, kv, 3, &len) == NULL, "arr_str out of range");
    qc_gguf_kv foreign = *kv;
    CHECK(qc_gguf_arr_str(g, &foreign, 0, &len) == NULL, "arr_str with a kv of another handle");

    /* tensors */
    for (int i = 0; i < NT; i++) {
        const qc_gguf_tensor *t = qc_gguf_tensor_at(g, (size_t)i);
        const tdef *d = &TDEFS[i];
        CHECK(t && strcmp(t->name, d->name) == 0, "tensor %d name", i);
        if (!t) continue;
        CHECK(qc_gguf_find_tensor(g, d->name) == t, "find %s", d->name);
        CHECK(t->type == d->type && t->n_dims == d->n_dims, "%s type/dims", d->name);
        for (int k = 0; k < 4; k++) CHECK(t->ne[k] == (int64_t)d->ne[k], "%s ne[%d] = %lld", d->name, k, (long long)t->ne[k]);
        CHECK(t->bytes == d->bytes, "%s bytes %zu", d->name, t->bytes);
        CHECK(t->offset == ps->off[i], "%s offset", d->name);
        size_t row = qc_gguf_type_bytes(t->type, t->ne[0]);
        CHECK(row * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]) == t->bytes, "%s type_bytes", d->name);
        int same = 1;
        for (size_t j = 0; j < t->bytes; j++) same &= ((const uint8_t *)t->data)[j] == fill_byte((size_t)i, j);
        CHECK(same, "%s data", d->name);
    }
    CHECK(qc_gguf_find_tensor(g, "w.f3") == NULL && qc_gguf_find_tensor(g, "zzz") == NULL, "absent tensors");
}

static void test_valid(void) {
    rd_bytes b = {0};
    gpos ps;
    build(&b, &ps, 32);
    uint8_t *c;
    qc_gguf *g = open_copy(b.p, b.n, &c);
    CHECK(g != NULL, "valid file refused: %s", err);
    if (g) check_valid(g, &ps, 32);
    qc_gguf_close(g);
    free(c);

    /* another alignment */
    build(&b, &ps, 64);
    CHECK(ps.data_start % 64 == 0, "builder alignment");
    g = open_copy(b.p, b.n, &c);
    CHECK(g != NULL, "alignment 64 refused: %s", err);
    if (g) check_valid(g, &ps, 64);
    qc_gguf_close(g);
    free(c);

    /* GGUF v2 has the same layout (64-bit counts) */
    build(&b, &ps, 32);
    rb_set32(b.p, 4, 2);
    g = open_copy(b.p, b.n, &c);
    CHECK(g && qc_gguf_version(g) == 2, "v2 refused: %s", err);
    qc_gguf_close(g);
    free(c);

    /* no tensors, no keys: the header alone */
    rd_bytes h = {0};
    rb_put(&h, "GGUF", 4);
    rb_u32(&h, 3);
    rb_u64(&h, 0);
    rb_u64(&h, 0);
    g = open_copy(h.p, h.n, &c);
    CHECK(g && qc_gguf_kv_count(g) == 0 && qc_gguf_tensor_count(g) == 0, "empty file refused: %s", err);
    CHECK(qc_gguf_find(g, "x") == NULL && qc_gguf_find_tensor(g, "x") == NULL, "empty lookups");
    qc_gguf_close(g);
    free(c);
    free(h.p);

    CHECK(qc_gguf_open_memory(NULL, 0, err, sizeof err) == NULL, "NULL buffer");
    CHECK_CONTAINS(err, "not a GGUF file");
    free(b.p);
}

/* Every prefix of the valid file is refused cleanly. */
static void test_prefixes(void) {
    rd_bytes b = {0};
    gpos ps;
    build(&b, &ps, 32);
    int refused = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *c;
        qc_gguf *g = open_copy(b.p, n, &c);
        if (!g && strstr(err, "<memory>: ")) refused++;
        else fprintf(stderr, "prefix %zu: %s\n", n, g ? "accepted" : err);
        qc_gguf_close(g);
        free(c);
    }
    CHECK(refused == (int)b.n, "%d of %zu prefixes refused", refused, b.n);
    free(b.p);
}

/* ---- corruptions ---------------------------------------------------------- */

static void test_corrupt(void) {
    rd_bytes b = {0};
    gpos ps;
    build(&b, &ps, 32);
    uint8_t *p = malloc(b.n);
    size_t n = b.n;
    char want[256];
#define RESET() memcpy(p, b.p, n)

    RESET(); memcpy(p, "GGUX", 4);
    expect_err(p, n, "header: not a GGUF file (magic 'GGUX'", "magic");
    RESET(); rb_set32(p, 4, 1);
    expect_err(p, n, "header: GGUF version 1 is not supported", "v1");
    RESET(); rb_set32(p, 4, 0);
    expect_err(p, n, "GGUF version 0 is not supported", "v0");
    RESET(); rb_set32(p, 4, 4);
    expect_err(p, n, "GGUF version 4 is not supported", "v4");
    RESET(); rb_set32(p, 4, 0x03000000u);
    expect_err(p, n, "big-endian", "big-endian");

    RESET(); rb_set64(p, 8, UINT64_MAX);
    expect_err(p, n, "header: tensor count 18446744073709551615 is more than the limit", "n_tensors -1");
    RESET(); rb_set64(p, 16, UINT64_MAX);
    expect_err(p, n, "header: key-value count 18446744073709551615 is more than the limit", "n_kv -1");
    RESET(); rb_set64(p, 8, 1000000);
    expect_err(p, n, "cannot fit in the", "n_tensors too many for the file");
    RESET(); rb_set64(p, 16, 20000);
    expect_err(p, n, "cannot fit in the", "n_kv too many for the file");
    RESET(); rb_set64(p, 16, NKV + 1);
    expect_err(p, n, "<memory>: ", "one key more than present");

    /* strings */
    RESET(); rb_set64(p, ps.key_len[0], UINT64_MAX);
    expect_err(p, n, "key 0: the key: length 18446744073709551615 runs past the end of the file", "key length -1");
    RESET(); rb_set64(p, ps.key_len[0], n - ps.key_len[0] - 7);
    expect_err(p, n, "key 0: the key: length", "key length one past the end");
    RESET(); rb_set64(p, ps.key_len[0], 0);
    expect_err(p, n, "key 0: empty key", "empty key");
    RESET(); p[ps.key_len[0] + 8 + 3] = 0;
    expect_err(p, n, "key 0: the key contains a NUL byte", "NUL in key");
    RESET(); rb_set64(p, ps.val[10], UINT64_MAX);
    expect_err(p, n, "key 'test.str': the string value: length 18446744073709551615 runs past the end", "str -1");
    RESET(); rb_set64(p, ps.val[10], n - ps.val[10] - 8 + 1);
    expect_err(p, n, "key 'test.str': the string value: length", "str one past the end");
    size_t third = ps.val[15] + 12 + 9 + 8; /* after "a" and "" */
    CHECK(rb_get64(b.p, third) == 3, "builder: third string at %zu", third);
    RESET(); rb_set64(p, third, UINT64_MAX - 1);
    expect_err(p, n, "key 'test.arr_str': string 2 of the array: length 18446744073709551614 runs past", "arr str");
    RESET(); rb_set64(p, ps.t_name_len[0], UINT64_MAX);
    expect_err(p, n, "tensor 0: the tensor name: length 18446744073709551615 runs past the end", "name -1");
    RESET(); rb_set64(p, ps.t_name_len[0], 65);
    expect_err(p, n, "tensor 0: the tensor name: length 65 is more than the limit of 64 bytes", "long name");
    RESET(); rb_set64(p, ps.t_name_len[0], 0);
    expect_err(p, n, "tensor 0: empty tensor name", "empty name");
    RESET(); p[ps.t_name_len[1] + 8 + 1] = 0;
    expect_err(p, n, "tensor 1: the tensor name contains a NUL byte", "NUL in name");

    /* values */
    RESET(); rb_set32(p, ps.key_type[2], 13);
    expect_err(p, n, "key 'test.u8': value type 13 is not a GGUF type", "value type 13");
    RESET(); rb_set32(p, ps.val[14], 9);
    expect_err(p, n, "key 'test.arr_i32': arrays of arrays are not supported", "nested array");
    RESET(); rb_set32(p, ps.val[14], 200);
    expect_err(p, n, "key 'test.arr_i32': array element type 200 is not a GGUF type", "array type 200");
    RESET(); rb_set64(p, ps.val[14] + 4, UINT64_MAX);
    expect_err(p, n, "array of 18446744073709551615 i32 values runs past the end of the file", "array len -1");
    RESET(); rb_set64(p, ps.val[15] + 4, 1ull << 61);
    expect_err(p, n, "array of 2305843009213693952 strings runs past the end of the file", "string array len");
    RESET(); p[ps.val[9]] = 2;
    expect_err(p, n, "key 'test.bool': bool value 2 is neither 0 nor 1", "bool 2");
    RESET(); p[ps.val[17] + 12 + 1] = 7;
    expect_err(p, n, "key 'test.arr_bool': element 1: bool value 7", "bool array");
    RESET(); memcpy(p + ps.key_len[3] + 8, "test.u8", 7);
    expect_err(p, n, "key 'test.u8': duplicate key", "duplicate key");

    /* alignment */
    RESET(); rb_set32(p, ps.val[1], 48);
    expect_err(p, n, "key 'general.alignment': alignment 48 is not a power of two", "alignment 48");
    RESET(); rb_set32(p, ps.val[1], 0);
    expect_err(p, n, "alignment 0 is not a power of two", "alignment 0");
    RESET(); rb_set32(p, ps.key_type[1], 5);
    expect_err(p, n, "key 'general.alignment': type i32, must be u32", "alignment type");

    /* tensor infos */
    RESET(); rb_set32(p, ps.t_ndims[0], 5);
    expect_err(p, n, "tensor 'w.f32': 5 dimensions, at most 4 are supported", "5 dims");
    RESET(); rb_set32(p, ps.t_type[1], 77);
    expect_err(p, n, "tensor 'w.q40': unknown tensor type id 77", "type 77");
    RESET(); rb_set32(p, ps.t_type[1], 6);
    expect_err(p, n, "tensor 'w.q40': tensor type 6 (q5_0) is not supported", "type q5_0");
    RESET(); rb_set64(p, ps.t_ne[0], 1ull << 32); rb_set64(p, ps.t_ne[0] + 8, 1ull << 32);
    expect_err(p, n, "tensor 'w.f32': shape [4294967296, 4294967296, 1, 1] has more than 2^63-1 elements", "numel");
    RESET(); rb_set64(p, ps.t_ne[3], 1ull << 62); rb_set64(p, ps.t_ne[3] + 16, 4);
    expect_err(p, n, "tensor 'w.q80': shape [4611686018427387904, 1, 4, 1] has more than 2^63-1", "numel 2^64");
    RESET(); rb_set64(p, ps.t_ne[0], UINT64_MAX);
    expect_err(p, n, "tensor 'w.f32': dimension 0 is 18446744073709551615, more than 2^63-1", "dim -1");
    RESET(); rb_set64(p, ps.t_ne[0], 1ull << 62); rb_set64(p, ps.t_ne[0] + 8, 1);
    expect_err(p, n, "tensor 'w.f32': shape [4611686018427387904, 1, 1, 1] of type f32 is more bytes than fit",
               "bytes overflow");
    RESET(); rb_set64(p, ps.t_ne[1], 48);
    expect_err(p, n, "tensor 'w.q40': ne[0] = 48 is not a multiple of the q4_0 block size 32", "block");
    RESET(); memcpy(p + ps.t_name_len[4] + 8, "w.f32", 5);
    expect_err(p, n, "tensor 'w.f32': duplicate tensor name", "duplicate tensor");

    /* offsets */
    RESET(); rb_set64(p, ps.t_off[3], ps.off[3] + 1);
    snprintf(want, sizeof want, "tensor 'w.q80': offset %llu is not a multiple of the alignment 32",
             (unsigned long long)ps.off[3] + 1);
    expect_err(p, n, want, "misaligned");
    RESET(); rb_set64(p, ps.t_off[2], ps.off[3]); rb_set64(p, ps.t_off[3], ps.off[2]);
    snprintf(want, sizeof want, "tensor 'w.q80': offset %llu is before the offset %llu of the previous tensor 'w.q4k'",
             (unsigned long long)ps.off[2], (unsigned long long)ps.off[3]);
    expect_err(p, n, want, "out of order");
    RESET(); rb_set64(p, ps.t_off[3], ps.off[2] + 32);
    expect_err(p, n, "tensor 'w.q80': data at", "overlap");
    expect_err(p, n, "overlaps the previous tensor 'w.q4k', which ends at", "overlap");
    RESET(); rb_set64(p, ps.t_off[NT - 1], ps.off[NT - 1] + 32);
    expect_err(p, n, "tensor 'w.b16': data at", "past the end");
    expect_err(p, n, "runs past the end of the data section", "past the end");
    RESET(); rb_set64(p, ps.t_off[NT - 1], UINT64_MAX - 31);
    expect_err(p, n, "runs past the end of the data section", "offset near 2^64");
    free(p);
    free(b.p);
#undef RESET
}

/* ---- through a file ------------------------------------------------------- */

static void test_file(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/tests/readers/tmp_gguf", QC_TEST_BINARY_DIR);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    rd_bytes b = {0};
    gpos ps;
    build(&b, &ps, 32);
    CHECK(rb_write_file(path, b.p, b.n) == 0, "write %s", path);
    qc_gguf *g = qc_gguf_open(path, err, sizeof err);
    CHECK(g != NULL, "open file: %s", err);
    if (g) check_valid(g, &ps, 32);
    qc_gguf_close(g);

    /* the example message of the brief, through a file */
    rb_set64(b.p, ps.t_off[3], 123);
    CHECK(rb_write_file(path, b.p, b.n) == 0, "write");
    g = qc_gguf_open(path, err, sizeof err);
    CHECK(g == NULL, "misaligned file accepted");
    char want[700];
    snprintf(want, sizeof want, "%s: tensor 'w.q80': offset 123 is not a multiple of the alignment 32", path);
    CHECK(strcmp(err, want) == 0, "message \"%s\", expected \"%s\"", err, want);
    qc_gguf_close(g);

    CHECK(rb_write_file(path, b.p, 10) == 0, "write");
    CHECK(qc_gguf_open(path, err, sizeof err) == NULL, "10-byte file");
    CHECK_CONTAINS(err, "model.gguf: header: 10 bytes is too small");
    CHECK(qc_gguf_open(dir, err, sizeof err) == NULL, "a folder");
    CHECK_CONTAINS(err, "not a regular file");
    snprintf(path, sizeof path, "%s/absent.gguf", dir);
    CHECK(qc_gguf_open(path, err, sizeof err) == NULL, "absent file");
    CHECK_CONTAINS(err, "absent.gguf: cannot open");
    free(b.p);
}

static void test_types(void) {
    CHECK(qc_gguf_type_bytes(0, 3) == 12, "f32");
    CHECK(qc_gguf_type_bytes(2, 64) == 36, "q4_0");
    CHECK(qc_gguf_type_bytes(2, 33) == 0, "q4_0 partial block");
    CHECK(qc_gguf_type_bytes(2, -32) == 0, "negative");
    CHECK(qc_gguf_type_bytes(14, 512) == 420, "q6_k");
    CHECK(qc_gguf_type_bytes(39, 32) == 17, "mxfp4");
    CHECK(qc_gguf_type_bytes(6, 32) == 0, "q5_0 unsupported");
    CHECK(qc_gguf_type_bytes(99, 32) == 0, "unknown");
    CHECK(qc_gguf_type_bytes(0, INT64_MAX - 7) == 0 || sizeof(size_t) > 8, "overflow");
    CHECK(strcmp(qc_gguf_type_name(12), "q4_k") == 0, "q4_k name");
    CHECK(strcmp(qc_gguf_type_name(6), "q5_0") == 0, "q5_0 name");
    CHECK(strcmp(qc_gguf_type_name(4), "unknown") == 0, "removed id");
    CHECK(strcmp(qc_gguf_type_name(100000), "unknown") == 0, "unknown name");
    CHECK(strcmp(qc_gguf_value_type_name(8), "string") == 0, "value type name");
}

/* The default model, if set-up placed it (never downloaded here). */
static void test_model(void) {
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("skip: %s not present\n", path);
        return;
    }
    qc_gguf *g = qc_gguf_open(path, err, sizeof err);
    CHECK(g != NULL, "default model: %s", err);
    if (!g) return;
    size_t len;
    const char *arch = qc_gguf_get_str(g, "general.architecture", &len);
    CHECK(arch && len == 5 && memcmp(arch, "llama", 5) == 0, "architecture");
    const qc_gguf_kv *tok = qc_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(tok && tok->arr_type == QC_GGUF_STRING && tok->arr_len > 1000, "tokens");
    if (tok) {
        size_t total = 0;
        for (uint64_t i = 0; i < tok->arr_len; i++) {
            const char *s = qc_gguf_arr_str(g, tok, i, &len);
            total += s ? len : 0;
            if (!s) CHECK(0, "token %llu", (unsigned long long)i);
        }
        CHECK(total > 0, "token bytes");
    }
    uint64_t n_layer = 0;
    CHECK(qc_gguf_get_u64(g, "llama.block_count", &n_layer) == 0 && n_layer == 30, "block_count %llu",
          (unsigned long long)n_layer);
    const qc_gguf_tensor *q = qc_gguf_find_tensor(g, "blk.0.attn_q.weight");
    CHECK(q && q->ne[0] == 576 && q->ne[1] == 576, "blk.0.attn_q.weight");
    size_t q41 = 0;
    for (size_t i = 0; i < qc_gguf_tensor_count(g); i++) q41 += qc_gguf_tensor_at(g, i)->type == 3;
    CHECK(q41 > 100, "%zu q4_1 tensors", q41);
    printf("default model: %zu keys, %zu tensors (%zu q4_1)\n", qc_gguf_kv_count(g), qc_gguf_tensor_count(g), q41);
    qc_gguf_close(g);
}

int main(void) {
    test_types();
    test_valid();
    test_prefixes();
    test_corrupt();
    test_file();
    test_model();
    return qc_test_finish("test_gguf");
}
