/* qc_gguf.c - GGUF v2/v3 reader: maps the file and checks every count, length, offset and type before use. */
#define _POSIX_C_SOURCE 200809L
#include "qc_ggml.h"
#include "qc_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_NAME 64u          /* the spec: tensor names are at most 64 bytes */
#define GGUF_MAX_KEY 65535u        /* real keys are short; this only bounds a copy */
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_KVS (1u << 20)
/* Smallest possible encodings, to bound counts by the bytes that are left
 * before anything is allocated from them:
 * a KV is key length (8) + a 1-byte key + type (4) + a 1-byte value;
 * a tensor info is name length (8) + a 1-byte name + n_dims (4) + type (4) + offset (8). */
#define GGUF_MIN_KV_BYTES 14u
#define GGUF_MIN_TENSOR_BYTES 25u

struct qc_gguf {
    char *file;                /* name used in messages */
    const uint8_t *base;
    size_t size;
    int mapped;
    uint32_t version, alignment;
    size_t data_start;
    size_t n_kv;
    qc_gguf_kv *kv;
    size_t **str_pos;          /* per kv: file offset of each string of a string array, else NULL */
    const qc_gguf_kv **kv_sorted;
    size_t n_tensors;
    qc_gguf_tensor *tensors;
    const qc_gguf_tensor **t_sorted;
};

/* ---- type tables --------------------------------------------------------- */

/* Names of every ggml type id in use, so a refusal can name what the file
 * holds; block sizes and bytes of the supported ones come from qc_ggml.c,
 * the decoder, so the reader and the decoder cannot disagree. */
static const char *const GGML_TYPE_NAMES[] = {
    [0] = "f32",      [1] = "f16",      [2] = "q4_0",     [3] = "q4_1",    [6] = "q5_0",    [7] = "q5_1",
    [8] = "q8_0",     [9] = "q8_1",     [10] = "q2_k",    [11] = "q3_k",   [12] = "q4_k",   [13] = "q5_k",
    [14] = "q6_k",    [15] = "q8_k",    [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s",
    [20] = "iq4_nl",  [21] = "iq3_s",   [22] = "iq2_s",   [23] = "iq4_xs", [24] = "i8",     [25] = "i16",
    [26] = "i32",     [27] = "i64",     [28] = "f64",     [29] = "iq1_m",  [30] = "bf16",   [34] = "tq1_0",
    [35] = "tq2_0",   [39] = "mxfp4",   [40] = "nvfp4",   [41] = "q1_0",
};
#define N_GGML_TYPES (sizeof GGML_TYPE_NAMES / sizeof GGML_TYPE_NAMES[0])
#define SUPPORTED_TYPES "f32 f16 bf16 q4_0 q4_1 q8_0 q4_k q5_k q6_k mxfp4"

const char *qc_gguf_type_name(uint32_t type) {
    if (type < N_GGML_TYPES && GGML_TYPE_NAMES[type]) return GGML_TYPE_NAMES[type];
    return "unknown";
}

size_t qc_gguf_type_bytes(uint32_t type, int64_t n) {
    uint32_t block = qc_ggml_block_size(type);
    size_t block_bytes = qc_ggml_type_size(type);
    if (!block || !block_bytes || n < 0 || n % block) return 0;
    uint64_t blocks = (uint64_t)n / block;
    if (blocks > SIZE_MAX / block_bytes) return 0;
    return (size_t)blocks * block_bytes;
}

static const char *const VALUE_TYPE_NAMES[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};

const char *qc_gguf_value_type_name(uint32_t type) {
    return type < sizeof VALUE_TYPE_NAMES / sizeof VALUE_TYPE_NAMES[0] ? VALUE_TYPE_NAMES[type] : "unknown";
}

/* Bytes of one element of a numeric or bool value type, 0 otherwise. */
static size_t value_size(uint32_t t) {
    switch (t) {
    case QC_GGUF_U8: case QC_GGUF_I8: case QC_GGUF_BOOL: return 1;
    case QC_GGUF_U16: case QC_GGUF_I16: return 2;
    case QC_GGUF_U32: case QC_GGUF_I32: case QC_GGUF_F32: return 4;
    case QC_GGUF_U64: case QC_GGUF_I64: case QC_GGUF_F64: return 8;
    default: return 0;
    }
}

/* ---- little-endian loads (any host) -------------------------------------- */

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32; }

/* ---- the cursor ---------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t size, pos;
    const char *file;
    char ctx[128];             /* what is being read, for messages: "header", "key 'x'", "tensor 'y'" */
    char *err;
    size_t errlen;
} rd;

static void fail(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(rd *r, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    qc_errf(r->err, r->errlen, "%s: %s: %s", r->file, r->ctx, msg);
}

/* Untrusted bytes for a message: control bytes become '?', long names are cut. */
static void shown(char *dst, size_t cap, const uint8_t *s, size_t n) {
    size_t j = 0, lim = cap - 4;
    for (size_t i = 0; i < n && j < lim; i++) dst[j++] = (s[i] < 0x20 || s[i] == 0x7f) ? '?' : (char)s[i];
    if (j < n && j == lim) { memcpy(dst + j, "...", 3); j += 3; }
    dst[j] = 0;
}

static void set_ctx(rd *r, const char *what, const uint8_t *name, size_t n) {
    char buf[80];
    shown(buf, sizeof buf, name, n);
    snprintf(r->ctx, sizeof r->ctx, "%s '%s'", what, buf);
}

static size_t left(const rd *r) { return r->size - r->pos; }

static int need(rd *r, size_t n, const char *what) {
    if (left(r) >= n) return 0;
    fail(r, "truncated: %s needs %zu bytes at offset %zu, the file has %zu", what, n, r->pos, r->size);
    return -1;
}
static int get32(rd *r, uint32_t *v, const char *what) {
    if (need(r, 4, what)) return -1;
    *v = ld32(r->p + r->pos);
    r->pos += 4;
    return 0;
}
static int get64(rd *r, uint64_t *v, const char *what) {
    if (need(r, 8, what)) return -1;
    *v = ld64(r->p + r->pos);
    r->pos += 8;
    return 0;
}

/* A GGUF string: u64 length then the bytes, which must lie inside the file. */
static int get_str(rd *r, const uint8_t **s, uint64_t *len, uint64_t max, const char *what) {
    char lenwhat[64];
    snprintf(lenwhat, sizeof lenwhat, "the length of %s", what);
    if (get64(r, len, lenwhat)) return -1;
    if (*len > left(r)) {
        fail(r, "%s: length %llu runs past the end of the file (%zu bytes left at offset %zu)", what,
             (unsigned long long)*len, left(r), r->pos);
        return -1;
    }
    if (*len > max) {
        fail(r, "%s: length %llu is more than the limit of %llu bytes", what, (unsigned long long)*len,
             (unsigned long long)max);
        return -1;
    }
    *s = r->p + r->pos;
    r->pos += (size_t)*len;
    return 0;
}

/* ---- metadata ------------------------------------------------------------ */

static void decode_scalar(qc_gguf_kv *kv, uint32_t t, const uint8_t *p) {
    switch (t) {
    case QC_GGUF_U8: kv->num.u = p[0]; break;
    case QC_GGUF_I8: kv->num.i = (int8_t)p[0]; break;
    case QC_GGUF_U16: kv->num.u = ld16(p); break;
    case QC_GGUF_I16: kv->num.i = (int16_t)ld16(p); break;
    case QC_GGUF_U32: kv->num.u = ld32(p); break;
    case QC_GGUF_I32: kv->num.i = (int32_t)ld32(p); break;
    case QC_GGUF_U64: kv->num.u = ld64(p); break;
    case QC_GGUF_I64: kv->num.i = (int64_t)ld64(p); break;
    case QC_GGUF_F32: {
        uint32_t b = ld32(p);
        float f;
        memcpy(&f, &b, 4);
        kv->num.f = f;
        break;
    }
    case QC_GGUF_F64: {
        uint64_t b = ld64(p);
        memcpy(&kv->num.f, &b, 8);
        break;
    }
    case QC_GGUF_BOOL: kv->num.b = p[0]; break;
    default: break;
    }
}

static int parse_value(qc_gguf *g, rd *r, size_t idx) {
    qc_gguf_kv *kv = &g->kv[idx];
    uint32_t t;
    if (get32(r, &t, "the value type")) return -1;
    if (t > QC_GGUF_F64) {
        fail(r, "value type %u is not a GGUF type (0..12)", t);
        return -1;
    }
    kv->type = (qc_gguf_type)t;
    if (t == QC_GGUF_STRING) {
        const uint8_t *s;
        if (get_str(r, &s, &kv->str_len, UINT64_MAX, "the string value")) return -1;
        kv->str = (const char *)s;
        return 0;
    }
    if (t != QC_GGUF_ARRAY) {
        size_t es = value_size(t);
        if (need(r, es, "the value")) return -1;
        const uint8_t *p = r->p + r->pos;
        if (t == QC_GGUF_BOOL && p[0] > 1) {
            fail(r, "bool value %u is neither 0 nor 1", p[0]);
            return -1;
        }
        decode_scalar(kv, t, p);
        r->pos += es;
        return 0;
    }
    uint32_t at;
    uint64_t n;
    if (get32(r, &at, "the array element type") || get64(r, &n, "the array length")) return -1;
    if (at == QC_GGUF_ARRAY) {
        fail(r, "arrays of arrays are not supported");
        return -1;
    }
    if (at > QC_GGUF_F64) {
        fail(r, "array element type %u is not a GGUF type (0..12)", at);
        return -1;
    }
    kv->arr_type = (qc_gguf_type)at;
    kv->arr_len = n;
    kv->arr_data = r->p + r->pos;
    if (at != QC_GGUF_STRING) {
        size_t es = value_size(at);
        if (n > left(r) / es) {
            fail(r, "array of %llu %s values runs past the end of the file (%zu bytes left at offset %zu)",
                 (unsigned long long)n, qc_gguf_value_type_name(at), left(r), r->pos);
            return -1;
        }
        if (at == QC_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++) {
                uint8_t b = r->p[r->pos + i];
                if (b > 1) {
                    fail(r, "element %llu: bool value %u is neither 0 nor 1", (unsigned long long)i, b);
                    return -1;
                }
            }
        }
        r->pos += (size_t)n * es;
        return 0;
    }
    /* Each string takes at least its 8-byte length, which bounds the index
     * allocated below by the file size. */
    if (n > left(r) / 8) {
        fail(r, "array of %llu strings runs past the end of the file (%zu bytes left at offset %zu)",
             (unsigned long long)n, left(r), r->pos);
        return -1;
    }
    size_t *pos = malloc((n ? (size_t)n : 1) * sizeof *pos);
    if (!pos) {
        fail(r, "out of memory indexing %llu strings", (unsigned long long)n);
        return -1;
    }
    g->str_pos[idx] = pos;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s;
        uint64_t len;
        pos[i] = r->pos;
        char what[48];
        snprintf(what, sizeof what, "string %llu of the array", (unsigned long long)i);
        if (get_str(r, &s, &len, UINT64_MAX, what)) return -1;
    }
    return 0;
}

static int cmp_kv(const void *a, const void *b) {
    return strcmp((*(const qc_gguf_kv *const *)a)->key, (*(const qc_gguf_kv *const *)b)->key);
}
static int cmp_tensor(const void *a, const void *b) {
    return strcmp((*(const qc_gguf_tensor *const *)a)->name, (*(const qc_gguf_tensor *const *)b)->name);
}

static int parse_kvs(qc_gguf *g, rd *r) {
    for (size_t i = 0; i < g->n_kv; i++) {
        snprintf(r->ctx, sizeof r->ctx, "key %zu", i);
        const uint8_t *s;
        uint64_t len;
        if (get_str(r, &s, &len, GGUF_MAX_KEY, "the key")) return -1;
        if (len == 0) {
            fail(r, "empty key");
            return -1;
        }
        if (memchr(s, 0, (size_t)len)) {
            fail(r, "the key contains a NUL byte");
            return -1;
        }
        char *key = malloc((size_t)len + 1);
        if (!key) {
            fail(r, "out of memory");
            return -1;
        }
        memcpy(key, s, (size_t)len);
        key[len] = 0;
        g->kv[i].key = key;
        set_ctx(r, "key", s, (size_t)len);
        if (parse_value(g, r, i)) return -1;
    }
    for (size_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = &g->kv[i];
    if (g->n_kv) qsort(g->kv_sorted, g->n_kv, sizeof *g->kv_sorted, cmp_kv);
    for (size_t i = 1; i < g->n_kv; i++) {
        if (strcmp(g->kv_sorted[i - 1]->key, g->kv_sorted[i]->key) == 0) {
            set_ctx(r, "key", (const uint8_t *)g->kv_sorted[i]->key, strlen(g->kv_sorted[i]->key));
            fail(r, "duplicate key");
            return -1;
        }
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const qc_gguf_kv *al = qc_gguf_find(g, "general.alignment");
    if (al) {
        snprintf(r->ctx, sizeof r->ctx, "key 'general.alignment'");
        if (al->type != QC_GGUF_U32) {
            fail(r, "type %s, must be u32", qc_gguf_value_type_name(al->type));
            return -1;
        }
        if (al->num.u == 0 || (al->num.u & (al->num.u - 1))) {
            fail(r, "alignment %llu is not a power of two", (unsigned long long)al->num.u);
            return -1;
        }
        g->alignment = (uint32_t)al->num.u;
    }
    return 0;
}

/* ---- tensors ------------------------------------------------------------- */

static int parse_tensor_info(qc_gguf *g, rd *r, size_t i) {
    qc_gguf_tensor *t = &g->tensors[i];
    snprintf(r->ctx, sizeof r->ctx, "tensor %zu", i);
    const uint8_t *s;
    uint64_t len;
    if (get_str(r, &s, &len, GGUF_MAX_NAME, "the tensor name")) return -1;
    if (len == 0) {
        fail(r, "empty tensor name");
        return -1;
    }
    if (memchr(s, 0, (size_t)len)) {
        fail(r, "the tensor name contains a NUL byte");
        return -1;
    }
    char *name = malloc((size_t)len + 1);
    if (!name) {
        fail(r, "out of memory");
        return -1;
    }
    memcpy(name, s, (size_t)len);
    name[len] = 0;
    t->name = name;
    set_ctx(r, "tensor", s, (size_t)len);

    if (get32(r, &t->n_dims, "the number of dimensions")) return -1;
    if (t->n_dims > GGUF_MAX_DIMS) {
        fail(r, "%u dimensions, at most %u are supported", t->n_dims, GGUF_MAX_DIMS);
        return -1;
    }
    uint64_t numel = 1;
    int overflow = 0;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        if (d < t->n_dims && get64(r, &v, "a dimension")) return -1;
        if (v > (uint64_t)INT64_MAX) {
            fail(r, "dimension %u is %llu, more than 2^63-1", d, (unsigned long long)v);
            return -1;
        }
        t->ne[d] = (int64_t)v;
        if (v && numel > (uint64_t)INT64_MAX / v) overflow = 1;
        else numel *= v;
    }
    if (overflow) {
        fail(r, "shape [%lld, %lld, %lld, %lld] has more than 2^63-1 elements", (long long)t->ne[0],
             (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
        return -1;
    }
    if (get32(r, &t->type, "the tensor type")) return -1;
    if (t->type >= N_GGML_TYPES || !GGML_TYPE_NAMES[t->type]) {
        fail(r, "unknown tensor type id %u", t->type);
        return -1;
    }
    const struct {
        const char *name;
        uint32_t block;
        size_t block_bytes;
    } tinfo = {GGML_TYPE_NAMES[t->type], qc_ggml_block_size(t->type), qc_ggml_type_size(t->type)}, *ti = &tinfo;
    if (!ti->block || !ti->block_bytes) {
        fail(r, "tensor type %u (%s) is not supported (supported: " SUPPORTED_TYPES ")", t->type, ti->name);
        return -1;
    }
    if (t->ne[0] % ti->block) {
        fail(r, "ne[0] = %lld is not a multiple of the %s block size %u", (long long)t->ne[0], ti->name,
             ti->block);
        return -1;
    }
    /* bytes = ne0/block * block_bytes * ne1 * ne2 * ne3, each step checked */
    uint64_t bytes = (uint64_t)t->ne[0] / ti->block;
    uint64_t factors[4] = {ti->block_bytes, (uint64_t)t->ne[1], (uint64_t)t->ne[2], (uint64_t)t->ne[3]};
    for (int k = 0; k < 4; k++) {
        if (factors[k] && bytes > SIZE_MAX / factors[k]) {
            fail(r, "shape [%lld, %lld, %lld, %lld] of type %s is more bytes than fit in memory",
                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], ti->name);
            return -1;
        }
        bytes *= factors[k];
    }
    t->bytes = (size_t)bytes;
    return get64(r, &t->offset, "the data offset");
}

static int place_tensors(qc_gguf *g, rd *r) {
    for (size_t i = 0; i < g->n_tensors; i++) g->t_sorted[i] = &g->tensors[i];
    if (g->n_tensors) qsort(g->t_sorted, g->n_tensors, sizeof *g->t_sorted, cmp_tensor);
    for (size_t i = 1; i < g->n_tensors; i++) {
        if (strcmp(g->t_sorted[i - 1]->name, g->t_sorted[i]->name) == 0) {
            set_ctx(r, "tensor", (const uint8_t *)g->t_sorted[i]->name, strlen(g->t_sorted[i]->name));
            fail(r, "duplicate tensor name");
            return -1;
        }
    }
    /* The data section starts at the next multiple of the alignment. */
    size_t rem = r->pos % g->alignment;
    size_t pad = rem ? g->alignment - rem : 0;
    if (pad > left(r)) {
        if (g->n_tensors) {
            snprintf(r->ctx, sizeof r->ctx, "data section");
            fail(r, "would start at offset %llu, past the end of the file (%zu bytes)",
                 (unsigned long long)r->pos + pad, r->size);
            return -1;
        }
        pad = left(r); /* no tensors: nothing is read from it */
    }
    g->data_start = r->pos + pad;
    size_t avail = r->size - g->data_start;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        qc_gguf_tensor *t = &g->tensors[i];
        set_ctx(r, "tensor", (const uint8_t *)t->name, strlen(t->name));
        if (t->offset % g->alignment) {
            fail(r, "offset %llu is not a multiple of the alignment %u", (unsigned long long)t->offset,
                 g->alignment);
            return -1;
        }
        if (i && t->offset < g->tensors[i - 1].offset) {
            fail(r, "offset %llu is before the offset %llu of the previous tensor '%s' (tensors must be stored in "
                 "order)", (unsigned long long)t->offset, (unsigned long long)g->tensors[i - 1].offset,
                 g->tensors[i - 1].name);
            return -1;
        }
        if (t->offset < prev_end) {
            fail(r, "data at offset %llu overlaps the previous tensor '%s', which ends at %llu",
                 (unsigned long long)t->offset, g->tensors[i - 1].name, (unsigned long long)prev_end);
            return -1;
        }
        if (t->offset > avail || t->bytes > avail - t->offset) {
            fail(r, "data at offset %llu (%zu bytes) runs past the end of the data section (%zu bytes from file "
                 "offset %zu)", (unsigned long long)t->offset, t->bytes, avail, g->data_start);
            return -1;
        }
        t->data = r->p + g->data_start + t->offset;
        prev_end = t->offset + t->bytes;
    }
    return 0;
}

/* ---- open / close -------------------------------------------------------- */

static int parse(qc_gguf *g, char *err, size_t errlen) {
    rd r = {.p = g->base, .size = g->size, .file = g->file, .err = err, .errlen = errlen};
    snprintf(r.ctx, sizeof r.ctx, "header");
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0) {
        char m[16];
        shown(m, sizeof m, g->base, g->size < 4 ? g->size : 4);
        fail(&r, "not a GGUF file (magic '%s', expected 'GGUF')", m);
        return -1;
    }
    r.pos = 4;
    if (get32(&r, &g->version, "the version")) return -1;
    if (g->version && (g->version & 0xFFFFu) == 0) {
        fail(&r, "version reads as 0x%08x: a big-endian file? only little-endian GGUF is supported", g->version);
        return -1;
    }
    if (g->version == 1) {
        fail(&r, "GGUF version 1 is not supported (its counts are 32-bit; convert the model again)");
        return -1;
    }
    if (g->version != 2 && g->version != 3) {
        fail(&r, "GGUF version %u is not supported (2 and 3 are)", g->version);
        return -1;
    }
    uint64_t nt, nk;
    if (get64(&r, &nt, "the tensor count") || get64(&r, &nk, "the key-value count")) return -1;
    if (nt > GGUF_MAX_TENSORS) {
        fail(&r, "tensor count %llu is more than the limit of %u", (unsigned long long)nt, GGUF_MAX_TENSORS);
        return -1;
    }
    if (nk > GGUF_MAX_KVS) {
        fail(&r, "key-value count %llu is more than the limit of %u", (unsigned long long)nk, GGUF_MAX_KVS);
        return -1;
    }
    if (nk * GGUF_MIN_KV_BYTES + nt * GGUF_MIN_TENSOR_BYTES > left(&r)) {
        fail(&r, "%llu keys and %llu tensors cannot fit in the %zu bytes after the header", (unsigned long long)nk,
             (unsigned long long)nt, left(&r));
        return -1;
    }
    g->n_kv = (size_t)nk;
    g->n_tensors = (size_t)nt;
    /* calloc(n ? n : 1): a zero count still gives a pointer to free */
    g->kv = calloc(nk ? nk : 1, sizeof *g->kv);
    g->str_pos = calloc(nk ? nk : 1, sizeof *g->str_pos);
    g->kv_sorted = calloc(nk ? nk : 1, sizeof *g->kv_sorted);
    g->tensors = calloc(nt ? nt : 1, sizeof *g->tensors);
    g->t_sorted = calloc(nt ? nt : 1, sizeof *g->t_sorted);
    if (!g->kv || !g->str_pos || !g->kv_sorted || !g->tensors || !g->t_sorted) {
        fail(&r, "out of memory");
        return -1;
    }
    if (parse_kvs(g, &r)) return -1;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(g, &r, i)) return -1;
    return place_tensors(g, &r);
}

void qc_gguf_close(qc_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (size_t i = 0; i < g->n_kv; i++) free((char *)g->kv[i].key);
    if (g->str_pos)
        for (size_t i = 0; i < g->n_kv; i++) free(g->str_pos[i]);
    if (g->tensors)
        for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->str_pos);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->t_sorted);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->file);
    free(g);
}

static qc_gguf *new_handle(const char *file, char *err, size_t errlen) {
    qc_gguf *g = calloc(1, sizeof *g);
    size_t n = strlen(file);
    if (g) g->file = malloc(n + 1);
    if (!g || !g->file) {
        free(g);
        qc_errf(err, errlen, "%s: out of memory", file);
        return NULL;
    }
    memcpy(g->file, file, n + 1);
    return g;
}

qc_gguf *qc_gguf_open_memory(const void *data, size_t size, char *err, size_t errlen) {
    qc_gguf *g = new_handle("<memory>", err, errlen);
    if (!g) return NULL;
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = data ? size : 0;
    if (parse(g, err, errlen)) {
        qc_gguf_close(g);
        return NULL;
    }
    return g;
}

qc_gguf *qc_gguf_open(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        qc_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        qc_errf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size < 24) {
        qc_errf(err, errlen, "%s: header: %lld bytes is too small for a GGUF file", path, (long long)st.st_size);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        qc_errf(err, errlen, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
        return NULL;
    }
    qc_gguf *g = new_handle(path, err, errlen);
    if (!g) {
        munmap(m, size);
        return NULL;
    }
    g->base = m;
    g->size = size;
    g->mapped = 1;
    if (parse(g, err, errlen)) {
        qc_gguf_close(g);
        return NULL;
    }
    return g;
}

/* ---- queries ------------------------------------------------------------- */

uint32_t qc_gguf_version(const qc_gguf *g) { return g ? g->version : 0; }
uint32_t qc_gguf_alignment(const qc_gguf *g) { return g ? g->alignment : 0; }
size_t qc_gguf_data_offset(const qc_gguf *g) { return g ? g->data_start : 0; }
size_t qc_gguf_kv_count(const qc_gguf *g) { return g ? g->n_kv : 0; }
const qc_gguf_kv *qc_gguf_kv_at(const qc_gguf *g, size_t i) { return g && i < g->n_kv ? &g->kv[i] : NULL; }
size_t qc_gguf_tensor_count(const qc_gguf *g) { return g ? g->n_tensors : 0; }
const qc_gguf_tensor *qc_gguf_tensor_at(const qc_gguf *g, size_t i) {
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

static int cmp_key_kv(const void *key, const void *elem) {
    return strcmp(key, (*(const qc_gguf_kv *const *)elem)->key);
}
static int cmp_key_tensor(const void *key, const void *elem) {
    return strcmp(key, (*(const qc_gguf_tensor *const *)elem)->name);
}

const qc_gguf_kv *qc_gguf_find(const qc_gguf *g, const char *key) {
    if (!g || !key || !g->n_kv) return NULL;
    const qc_gguf_kv *const *hit = bsearch(key, g->kv_sorted, g->n_kv, sizeof *g->kv_sorted, cmp_key_kv);
    return hit ? *hit : NULL;
}

const qc_gguf_tensor *qc_gguf_find_tensor(const qc_gguf *g, const char *name) {
    if (!g || !name || !g->n_tensors) return NULL;
    const qc_gguf_tensor *const *hit =
        bsearch(name, g->t_sorted, g->n_tensors, sizeof *g->t_sorted, cmp_key_tensor);
    return hit ? *hit : NULL;
}

/* Does |v| have at most 53 significant bits (exact in a double)? */
static int fits_double(uint64_t m) {
    if (m <= (1ull << 53)) return 1;
    while (!(m & 1)) m >>= 1;
    return m <= (1ull << 53);
}

int qc_gguf_get_u64(const qc_gguf *g, const char *key, uint64_t *out) {
    const qc_gguf_kv *kv = qc_gguf_find(g, key);
    if (!kv) return -1;
    switch (kv->type) {
    case QC_GGUF_U8: case QC_GGUF_U16: case QC_GGUF_U32: case QC_GGUF_U64:
        *out = kv->num.u;
        return 0;
    case QC_GGUF_I8: case QC_GGUF_I16: case QC_GGUF_I32: case QC_GGUF_I64:
        if (kv->num.i < 0) return -1;
        *out = (uint64_t)kv->num.i;
        return 0;
    case QC_GGUF_F32: case QC_GGUF_F64:
        /* 2^64 as a double; NaN fails the first test */
        if (!(kv->num.f >= 0 && kv->num.f < 18446744073709551616.0) || kv->num.f != floor(kv->num.f)) return -1;
        *out = (uint64_t)kv->num.f;
        return 0;
    default:
        return -1;
    }
}

int qc_gguf_get_f64(const qc_gguf *g, const char *key, double *out) {
    const qc_gguf_kv *kv = qc_gguf_find(g, key);
    if (!kv) return -1;
    switch (kv->type) {
    case QC_GGUF_U8: case QC_GGUF_U16: case QC_GGUF_U32: case QC_GGUF_U64:
        if (!fits_double(kv->num.u)) return -1;
        *out = (double)kv->num.u;
        return 0;
    case QC_GGUF_I8: case QC_GGUF_I16: case QC_GGUF_I32: case QC_GGUF_I64: {
        uint64_t m = kv->num.i < 0 ? (uint64_t)0 - (uint64_t)kv->num.i : (uint64_t)kv->num.i;
        if (!fits_double(m)) return -1;
        *out = (double)kv->num.i;
        return 0;
    }
    case QC_GGUF_F32: case QC_GGUF_F64:
        *out = kv->num.f;
        return 0;
    default:
        return -1;
    }
}

const char *qc_gguf_get_str(const qc_gguf *g, const char *key, size_t *len) {
    const qc_gguf_kv *kv = qc_gguf_find(g, key);
    if (!kv || kv->type != QC_GGUF_STRING) return NULL;
    if (len) *len = (size_t)kv->str_len;
    return kv->str;
}

const char *qc_gguf_arr_str(const qc_gguf *g, const qc_gguf_kv *kv, uint64_t i, size_t *len) {
    if (!g || !kv || !g->n_kv) return NULL;
    /* only entries of this handle: compare addresses as integers */
    uintptr_t a = (uintptr_t)kv, lo = (uintptr_t)g->kv, hi = (uintptr_t)(g->kv + g->n_kv);
    if (a < lo || a >= hi || (a - lo) % sizeof *kv) return NULL;
    size_t idx = (size_t)(kv - g->kv);
    if (kv->type != QC_GGUF_ARRAY || kv->arr_type != QC_GGUF_STRING || i >= kv->arr_len || !g->str_pos[idx])
        return NULL;
    size_t pos = g->str_pos[idx][i];
    if (len) *len = (size_t)ld64(g->base + pos);
    return (const char *)g->base + pos + 8;
}
