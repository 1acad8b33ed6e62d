/* test_safetensors.c - the safetensors reader on files built here (single and sharded) and on every corruption it must refuse. */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "qc_safetensors.h"
#include "qc_test.h"
#include "rd_bytes.h"

/* ---- building files -------------------------------------------------------
 * A safetensors file: u64 header length N, N bytes of JSON (padded with
 * spaces to a multiple of 8, as the reference writer does), then the data
 * buffer, here data_len bytes with byte j = j*13 + 5. */

static uint8_t data_byte(size_t j) { return (uint8_t)(j * 13 + 5); }

static void st_build(rd_bytes *b, const char *json, size_t data_len) {
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    b->n = 0;
    rb_u64(b, padded);
    rb_put(b, json, n);
    while (b->n < 8 + padded) rb_u8(b, ' ');
    for (size_t j = 0; j < data_len; j++) rb_u8(b, data_byte(j));
}

static char err[768];

static qc_safetensors *open_copy(const uint8_t *p, size_t n, uint8_t **copy) {
    *copy = rb_dup(p, n);
    err[0] = 0;
    return qc_safetensors_open_memory(*copy, n, err, sizeof err);
}

static void expect_err_bytes(const uint8_t *p, size_t n, const char *needle, const char *label) {
    uint8_t *c;
    qc_safetensors *s = open_copy(p, n, &c);
    CHECK(s == NULL, "%s: accepted", label);
    CHECK_CONTAINS(err, needle);
    CHECK_CONTAINS(err, "<memory>: ");
    qc_safetensors_close(s);
    free(c);
}

static void expect_err(const char *json, size_t data_len, const char *needle, const char *label) {
    rd_bytes b = {0};
    st_build(&b, json, data_len);
    expect_err_bytes(b.p, b.n, needle, label);
    free(b.p);
}

/* ---- a valid file --------------------------------------------------------- */

/* Entries out of order (the reader sorts by offset); a scalar, an empty
 * tensor and every supported dtype; 64 bytes of data. */
static const char *VALID =
    "{\"g.fp8\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[44,48]},"
    "\"__metadata__\":{\"format\":\"pt\",\"note\":\"h\\u00e9\"},"
    "\"a.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b.f16\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"h.empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[48,48]},"
    "\"c.bf16\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[32,36]},"
    "\"d.i8\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[36,39]},"
    "\"e.u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[39,40]},"
    "\"f.i32\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[40,44]},"
    "\"i.i64\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[48,56]},"
    "\"j.f64\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[56,64]}}";
enum { VALID_DATA = 64 };

typedef struct want {
    const char *name;
    qc_dtype dtype;
    int ndim;
    int64_t shape[8];
    size_t begin, bytes;
} want;

static const want WANT[] = {
    {"a.f32", QC_DT_F32, 2, {2, 3}, 0, 24},   {"b.f16", QC_DT_F16, 1, {4}, 24, 8},
    {"c.bf16", QC_DT_BF16, 2, {1, 2}, 32, 4}, {"d.i8", QC_DT_I8, 1, {3}, 36, 3},
    {"e.u8", QC_DT_U8, 1, {1}, 39, 1},        {"f.i32", QC_DT_I32, 0, {0}, 40, 4},
    {"g.fp8", QC_DT_F8_E4M3, 2, {2, 2}, 44, 4}, {"h.empty", QC_DT_F32, 2, {0, 5}, 48, 0},
    {"i.i64", QC_DT_I64, 1, {1}, 48, 8},      {"j.f64", QC_DT_F64, 8, {1, 1, 1, 1, 1, 1, 1, 1}, 56, 8},
};
#define N_WANT (sizeof WANT / sizeof WANT[0])

/* The tensors of WANT[first..first+n) at data offset `base` of their file. */
static void check_tensors(const qc_safetensors *s, size_t first, size_t n, size_t base, const char *file_suffix) {
    for (size_t i = first; i < first + n; i++) {
        const want *w = &WANT[i];
        const qc_st_tensor *t = qc_safetensors_find(s, w->name);
        CHECK(t != NULL, "%s missing", w->name);
        if (!t) continue;
        CHECK(t->dtype == w->dtype && t->ndim == w->ndim, "%s dtype %d ndim %d", w->name, t->dtype, t->ndim);
        for (int k = 0; k < 8; k++)
            CHECK(t->shape[k] == (k < w->ndim ? w->shape[k] : 0), "%s shape[%d] = %lld", w->name, k,
                  (long long)t->shape[k]);
        CHECK(t->bytes == w->bytes, "%s bytes %zu", w->name, t->bytes);
        int same = 1;
        for (size_t j = 0; j < t->bytes; j++)
            same &= ((const uint8_t *)t->data)[j] == data_byte(w->begin - base + j);
        CHECK(same, "%s data", w->name);
        size_t fl = strlen(t->file), sl = strlen(file_suffix);
        CHECK(fl >= sl && strcmp(t->file + fl - sl, file_suffix) == 0, "%s file %s", w->name, t->file);
    }
}

static void test_valid(void) {
    rd_bytes b = {0};
    st_build(&b, VALID, VALID_DATA);
    uint8_t *c;
    qc_safetensors *s = open_copy(b.p, b.n, &c);
    CHECK(s != NULL, "valid file refused: %s", err);
    if (s) {
        CHECK(qc_safetensors_count(s) == N_WANT, "%zu tensors", qc_safetensors_count(s));
        CHECK(qc_safetensors_file_count(s) == 1, "one file");
        /* in data order */
        for (size_t i = 0; i < N_WANT && i < qc_safetensors_count(s); i++)
            CHECK(strcmp(qc_safetensors_at(s, i)->name, WANT[i].name) == 0, "order %zu: %s", i,
                  qc_safetensors_at(s, i)->name);
        CHECK(qc_safetensors_at(s, N_WANT) == NULL, "past the end");
        check_tensors(s, 0, N_WANT, 0, "<memory>");
        CHECK(qc_safetensors_find(s, "__metadata__") == NULL, "metadata is not a tensor");
        CHECK(qc_safetensors_find(s, "zz") == NULL, "absent");
        const char *m = qc_safetensors_metadata(s, "format");
        CHECK(m && strcmp(m, "pt") == 0, "metadata format");
        m = qc_safetensors_metadata(s, "note");
        CHECK(m && strcmp(m, "h\xc3\xa9") == 0, "metadata utf-8");
        CHECK(qc_safetensors_metadata(s, "absent") == NULL, "absent metadata");
    }
    qc_safetensors_close(s);
    free(c);

    /* no tensors at all, and no data */
    st_build(&b, "{}", 0);
    s = open_copy(b.p, b.n, &c);
    CHECK(s && qc_safetensors_count(s) == 0 && qc_safetensors_find(s, "a") == NULL, "empty: %s", err);
    CHECK(qc_safetensors_metadata(s, "format") == NULL, "no metadata");
    qc_safetensors_close(s);
    free(c);
    free(b.p);
}

static void test_prefixes(void) {
    rd_bytes b = {0};
    st_build(&b, VALID, VALID_DATA);
    int refused = 0;
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *c;
        qc_safetensors *s = open_copy(b.p, n, &c);
        if (!s && strstr(err, "<memory>: ")) refused++;
        else fprintf(stderr, "prefix %zu: %s\n", n, s ? "accepted" : err);
        qc_safetensors_close(s);
        free(c);
    }
    CHECK(refused == (int)b.n, "%d of %zu prefixes refused", refused, b.n);
    free(b.p);
}

/* ---- corruptions ---------------------------------------------------------- */

#define E(dtype, shape, b, e) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_corrupt(void) {
    /* header length */
    rd_bytes b = {0};
    rb_u64(&b, UINT64_MAX);
    rb_put(&b, "{}", 2);
    expect_err_bytes(b.p, b.n, "header: length 18446744073709551615 is more than the limit of 100000000 bytes",
                     "length -1");
    b.n = 0;
    rb_u64(&b, 100000001);
    rb_put(&b, "{}", 2);
    expect_err_bytes(b.p, b.n, "length 100000001 is more than the limit", "length over the cap");
    b.n = 0;
    rb_u64(&b, 1000);
    rb_put(&b, "{}      ", 8);
    expect_err_bytes(b.p, b.n, "header: length 1000 runs past the end of the file (16 bytes)", "length past the end");
    b.n = 0;
    rb_u64(&b, 9);
    rb_put(&b, "{}      ", 8);
    expect_err_bytes(b.p, b.n, "runs past the end", "length one past the end");
    b.n = 0;
    rb_u64(&b, 0);
    expect_err_bytes(b.p, b.n, "header: invalid JSON", "length 0");
    expect_err_bytes(b.p, 7, "too small", "7 bytes");
    free(b.p);

    /* the header's JSON */
    expect_err("[1,2]", 0, "header: not a JSON object", "array");
    expect_err("{\"a\":", 0, "header: invalid JSON", "cut JSON");
    expect_err("{\"a\xff\":" E("F32", "[1]", 0, 4) "}", 4, "header: invalid JSON", "invalid UTF-8");
    expect_err("{\"a\\u0000b\":" E("F32", "[1]", 0, 4) "}", 4, "header: invalid JSON", "NUL in a name");
    expect_err("{\"a\":" E("F32", "[1]", 0, 4) ",\"a\":" E("F32", "[1]", 4, 8) "}", 8, "duplicate", "duplicate");
    expect_err("{\"a\":5}", 0, "tensor 'a': entry is not a JSON object", "entry type");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': needs \"dtype\"", "no offsets");
    expect_err("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "needs \"dtype\"", "dtype number");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
               "tensor 'a': data_offsets must be two non-negative integers", "three offsets");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "two non-negative", "negative");
    expect_err("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__: value of 'k' is not a string", "metadata value");
    expect_err("{\"__metadata__\":[]}", 0, "__metadata__: not a JSON object", "metadata type");

    /* dtypes and shapes */
    expect_err("{\"a\":" E("BOOL", "[4]", 0, 4) "}", 4, "tensor 'a': dtype BOOL is not supported", "BOOL");
    expect_err("{\"a\":" E("I16", "[2]", 0, 4) "}", 4, "tensor 'a': dtype I16 is not supported", "I16");
    expect_err("{\"a\":" E("Q4", "[2]", 0, 4) "}", 4, "tensor 'a': unknown dtype 'Q4'", "unknown dtype");
    expect_err("{\"a\":" E("F32", "[-1]", 0, 4) "}", 4, "tensor 'a': shape[0] is not a non-negative integer", "dim -1");
    expect_err("{\"a\":" E("F32", "[1.5]", 0, 4) "}", 4, "shape[0] is not a non-negative integer", "dim 1.5");
    expect_err("{\"a\":" E("F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4, "tensor 'a': 9 dimensions, at most 8",
               "9 dims");
    expect_err("{\"a\":" E("F32", "[4294967296,4294967296,4]", 0, 4) "}", 4, "tensor 'a': the shape's size in bytes "
               "overflows", "numel overflow");
    expect_err("{\"a\":" E("F32", "[9223372036854775807,2]", 0, 4) "}", 4, "overflows", "numel 2^64");
    expect_err("{\"a\":" E("F32", "[4611686018427387904]", 0, 4) "}", 4, "overflows", "bytes overflow");
    expect_err("{\"a\":" E("F32", "[99999999999999999999]", 0, 4) "}", 4, "header: invalid JSON", "dim past int64");
    expect_err("{\"a\":" E("F32", "[3]", 0, 8) "}", 8,
               "tensor 'a': data_offsets [0, 8) hold 8 bytes, but the shape of F32 needs 12", "size mismatch");

    /* offsets */
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) ",\"b\":" E("F32", "[2]", 4, 12) "}", 12,
               "tensor 'b': data_offsets [4, 12) overlap tensor 'a' [0, 8)", "overlap");
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) ",\"b\":" E("F32", "[2]", 0, 8) "}", 8, "overlap tensor", "same");
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) ",\"b\":" E("F32", "[2]", 12, 20) "}", 20,
               "tensor 'b': data_offsets [12, 20) leave a gap after tensor 'a', which ends at 8", "gap");
    expect_err("{\"a\":" E("F32", "[2]", 4, 12) "}", 12, "tensor 'a': data_offsets begin at 4, not 0", "first not 0");
    expect_err("{\"a\":" E("F32", "[0]", 8, 0) "}", 8, "tensor 'a': data_offsets [8, 0): end is before begin",
               "end < begin");
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) "}", 4,
               "tensor 'a': data_offsets [0, 8) run past the end of the data (4 bytes)", "out of file");
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) "}", 12,
               "data: the tensors cover 8 bytes, but the file holds 12 after the header", "trailing bytes");
    expect_err("{}", 4, "cover 0 bytes, but the file holds 4", "data without tensors");
    expect_err("{\"a\":" E("F32", "[2]", 18446744073709551608, 18446744073709551615) "}", 8,
               "header: invalid JSON", "offsets past int64");
    expect_err("{\"a\":" E("F32", "[2]", 9223372036854775800, 9223372036854775807) "}", 8,
               "run past the end of the data", "offsets near int64");
}

/* ---- files, folders and sharded checkpoints ------------------------------ */

static char root[512];

static void path_in(char *out, size_t cap, const char *dir, const char *name) {
    if (name) snprintf(out, cap, "%s/%s/%s", root, dir, name);
    else snprintf(out, cap, "%s/%s", root, dir);
}

static void write_st(const char *dir, const char *name, const char *json, size_t data_len) {
    char p[700];
    path_in(p, sizeof p, dir, NULL);
    mkdir(p, 0755);
    path_in(p, sizeof p, dir, name);
    rd_bytes b = {0};
    st_build(&b, json, data_len);
    CHECK(rb_write_file(p, b.p, b.n) == 0, "write %s", p);
    free(b.p);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[700];
    path_in(p, sizeof p, dir, NULL);
    mkdir(p, 0755);
    path_in(p, sizeof p, dir, name);
    CHECK(rb_write_file(p, text, strlen(text)) == 0, "write %s", p);
}

static qc_safetensors *open_in(const char *dir, const char *name) {
    char p[700];
    path_in(p, sizeof p, dir, name);
    err[0] = 0;
    return qc_safetensors_open(p, err, sizeof err);
}

static void expect_open_err(const char *dir, const char *name, const char *needle, const char *label) {
    qc_safetensors *s = open_in(dir, name);
    CHECK(s == NULL, "%s: accepted", label);
    CHECK_CONTAINS(err, needle);
    qc_safetensors_close(s);
}

/* Shard 1 holds WANT[0..2) (a.f32, b.f16: data offsets 0..32), shard 2
 * WANT[2..4) (c.bf16, d.i8: data bytes 32..39 of the pattern, offsets 0..7
 * in its own file, so its bytes are data_byte(j) from j = 0 again). */
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
static const char *S1 = "{\"__metadata__\":{\"format\":\"pt\"},\"a.f32\":" E("F32", "[2,3]", 0, 24)
                        ",\"b.f16\":" E("F16", "[4]", 24, 32) "}";
static const char *S2 = "{\"c.bf16\":" E("BF16", "[1,2]", 0, 4) ",\"d.i8\":" E("I8", "[3]", 4, 7) "}";
static const char *INDEX = "{\"metadata\":{\"total_size\":39},\"weight_map\":{\"a.f32\":\"" SHARD1
                           "\",\"b.f16\":\"" SHARD1 "\",\"c.bf16\":\"" SHARD2 "\",\"d.i8\":\"" SHARD2 "\"}}";

static void sharded_dir(const char *dir, const char *index) {
    write_st(dir, SHARD1, S1, 32);
    write_st(dir, SHARD2, S2, 7);
    write_text(dir, "model.safetensors.index.json", index);
}

static void test_files(void) {
    snprintf(root, sizeof root, "%s/tests/readers/tmp_st", QC_TEST_BINARY_DIR);
    mkdir(root, 0755);

    /* a single file, by path and by folder */
    write_st("single", "model.safetensors", VALID, VALID_DATA);
    qc_safetensors *s = open_in("single", "model.safetensors");
    CHECK(s && qc_safetensors_count(s) == N_WANT, "single file: %s", err);
    if (s) check_tensors(s, 0, N_WANT, 0, "single/model.safetensors");
    qc_safetensors_close(s);
    s = open_in("single", NULL);
    CHECK(s && qc_safetensors_count(s) == N_WANT, "single folder: %s", err);
    qc_safetensors_close(s);
    write_st("other_name", "weights.safetensors", VALID, VALID_DATA);
    s = open_in("other_name", NULL);
    CHECK(s && qc_safetensors_count(s) == N_WANT, "the only .safetensors of a folder: %s", err);
    qc_safetensors_close(s);
    char p[700];
    path_in(p, sizeof p, "empty", NULL);
    mkdir(p, 0755);
    expect_open_err("empty", NULL, "no model.safetensors.index.json or model.safetensors", "empty folder");
    expect_open_err("single", "absent.safetensors", "absent.safetensors: cannot open", "absent");
    write_st("corrupt", "model.safetensors", "{\"a\":" E("F32", "[2]", 0, 8) "}", 4);
    expect_open_err("corrupt", "model.safetensors", "corrupt/model.safetensors: tensor 'a': data_offsets [0, 8) run "
                    "past the end", "corrupt file names its path");
    write_text("tiny", "model.safetensors", "abc");
    expect_open_err("tiny", "model.safetensors", "model.safetensors: header: 3 bytes is too small", "tiny file");

    /* sharded, by index and by folder */
    sharded_dir("sharded", INDEX);
    for (int by_folder = 0; by_folder < 2; by_folder++) {
        s = open_in("sharded", by_folder ? NULL : "model.safetensors.index.json");
        CHECK(s != NULL, "sharded (%s): %s", by_folder ? "folder" : "index", err);
        if (!s) continue;
        CHECK(qc_safetensors_count(s) == 4 && qc_safetensors_file_count(s) == 2, "%zu tensors in %zu files",
              qc_safetensors_count(s), qc_safetensors_file_count(s));
        check_tensors(s, 0, 2, 0, "sharded/" SHARD1);
        check_tensors(s, 2, 2, 32, "sharded/" SHARD2);
        const char *m = qc_safetensors_metadata(s, "format");
        CHECK(m && strcmp(m, "pt") == 0, "shard metadata");
        CHECK(strcmp(qc_safetensors_at(s, 0)->name, "a.f32") == 0 && strcmp(qc_safetensors_at(s, 3)->name, "d.i8") == 0,
              "order across shards");
        qc_safetensors_close(s);
    }

    /* bad indexes */
    sharded_dir("traversal", "{\"weight_map\":{\"a.f32\":\"../sharded/" SHARD1 "\"}}");
    expect_open_err("traversal", "model.safetensors.index.json", "'a.f32' -> '../sharded/" SHARD1 "': a shard must be "
                    "a file name in the index's folder (no '/' or '..')", "traversal");
    sharded_dir("slash", "{\"weight_map\":{\"a.f32\":\"sub/x.safetensors\"}}");
    expect_open_err("slash", NULL, "no '/' or '..'", "slash");
    sharded_dir("dotdot", "{\"weight_map\":{\"a.f32\":\"..\"}}");
    expect_open_err("dotdot", NULL, "no '/' or '..'", "dotdot");
    sharded_dir("missing", "{\"weight_map\":{\"a.f32\":\"" SHARD1 "\",\"x\":\"model-3.safetensors\"}}");
    expect_open_err("missing", NULL, "missing/model-3.safetensors: cannot open", "missing shard");
    sharded_dir("wrong", "{\"weight_map\":{\"a.f32\":\"" SHARD2 "\",\"b.f16\":\"" SHARD1 "\"}}");
    expect_open_err("wrong", NULL, "weight_map: tensor 'a.f32' is listed in '" SHARD2 "' but found in", "wrong shard");
    sharded_dir("absent_t", "{\"weight_map\":{\"zz\":\"" SHARD1 "\"}}");
    expect_open_err("absent_t", NULL, "weight_map: tensor 'zz' is not in its shard '" SHARD1 "'", "absent tensor");
    write_st("dup", SHARD1, S1, 32);
    write_st("dup", SHARD2, "{\"a.f32\":" E("F32", "[1]", 0, 4) "}", 4);
    write_text("dup", "model.safetensors.index.json",
               "{\"weight_map\":{\"a.f32\":\"" SHARD1 "\",\"b.f16\":\"" SHARD2 "\"}}");
    expect_open_err("dup", NULL, "tensor 'a.f32': duplicate tensor name (also in", "tensor in two shards");
    sharded_dir("no_map", "{\"metadata\":{}}");
    expect_open_err("no_map", NULL, "weight_map: missing or not a JSON object", "no weight_map");
    sharded_dir("empty_map", "{\"weight_map\":{}}");
    expect_open_err("empty_map", NULL, "weight_map: empty", "empty weight_map");
    sharded_dir("map_value", "{\"weight_map\":{\"a.f32\":3}}");
    expect_open_err("map_value", NULL, "weight_map: the value of 'a.f32' is not a string", "map value");
    sharded_dir("not_json", "{\"weight_map\":");
    expect_open_err("not_json", NULL, "model.safetensors.index.json: not valid JSON", "index not JSON");
    sharded_dir("dup_key", "{\"weight_map\":{\"a.f32\":\"" SHARD1 "\",\"a.f32\":\"" SHARD1 "\"}}");
    expect_open_err("dup_key", NULL, "duplicate", "duplicate key in the index");
    write_st("bad_shard", SHARD1, S1, 32);
    write_st("bad_shard", SHARD2, "{\"c.bf16\":" E("BF16", "[1,2]", 0, 4) "}", 5);
    write_text("bad_shard", "model.safetensors.index.json", INDEX);
    expect_open_err("bad_shard", NULL, SHARD2 ": data: the tensors cover 4 bytes, but the file holds 5", "bad shard");
}

int main(void) {
    test_valid();
    test_prefixes();
    test_corrupt();
    test_files();
    return qc_test_finish("test_safetensors");
}
