/* qc_gguf.h - bounds-checked, memory-mapped reader of GGUF v2/v3 model files (internal). */
#ifndef QC_GGUF_H
#define QC_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "qc_util.h"

typedef struct qc_gguf qc_gguf;

/* Metadata value types; the values are GGUF's. */
typedef enum {
    QC_GGUF_U8 = 0,
    QC_GGUF_I8 = 1,
    QC_GGUF_U16 = 2,
    QC_GGUF_I16 = 3,
    QC_GGUF_U32 = 4,
    QC_GGUF_I32 = 5,
    QC_GGUF_F32 = 6,
    QC_GGUF_BOOL = 7,
    QC_GGUF_STRING = 8,
    QC_GGUF_ARRAY = 9,
    QC_GGUF_U64 = 10,
    QC_GGUF_I64 = 11,
    QC_GGUF_F64 = 12
} qc_gguf_type;

/* One metadata entry.  Everything was checked at open time; pointers stay
 * valid until qc_gguf_close. */
typedef struct qc_gguf_kv {
    const char *key;            /* NUL-terminated copy */
    qc_gguf_type type;          /* for arrays: QC_GGUF_ARRAY and arr_type/arr_len below */
    qc_gguf_type arr_type;
    uint64_t arr_len;
    /* scalar value: num.u for U8..U64, num.i for I8..I64, num.f for F32/F64,
     * num.b (0 or 1) for BOOL */
    union { uint64_t u; int64_t i; double f; int b; } num;
    const char *str; uint64_t str_len;  /* QC_GGUF_STRING (points into the file, not NUL-terminated) */
    /* arrays of numbers: the raw little-endian elements in the file (possibly
     * unaligned: memcpy them out); string arrays: use qc_gguf_arr_str */
    const void *arr_data;
} qc_gguf_kv;

typedef struct qc_gguf_tensor {
    const char *name;           /* NUL-terminated copy */
    uint32_t type;              /* ggml type id: 0 f32, 1 f16, 2 q4_0, 3 q4_1, 8 q8_0, 12-14 q4_k..q6_k, 30 bf16, 39 mxfp4 */
    uint32_t n_dims;            /* 0..4; unused ne[] are 1 */
    int64_t ne[4];              /* ne[0] innermost, as in the file */
    uint64_t offset;            /* relative to the data section */
    const void *data;           /* inside the mapping; bytes long */
    size_t bytes;
} qc_gguf_tensor;

/* Map `path` read-only and check all of it.  NULL with "<path>: <thing>:
 * <reason>" in err on any problem. */
qc_gguf *qc_gguf_open(const char *path, char *err, size_t errlen);
/* The same on a borrowed buffer that must outlive the handle (name "<memory>"). */
qc_gguf *qc_gguf_open_memory(const void *data, size_t size, char *err, size_t errlen);
void qc_gguf_close(qc_gguf *g);

uint32_t qc_gguf_version(const qc_gguf *g);
/* Alignment of the data section (general.alignment or 32). */
uint32_t qc_gguf_alignment(const qc_gguf *g);
/* File offset where the data section starts. */
size_t qc_gguf_data_offset(const qc_gguf *g);

size_t qc_gguf_kv_count(const qc_gguf *g);
const qc_gguf_kv *qc_gguf_kv_at(const qc_gguf *g, size_t i);
const qc_gguf_kv *qc_gguf_find(const qc_gguf *g, const char *key);
/* Typed getters: 0 on success, -1 if absent or of a type that cannot convert
 * exactly (negative to u64, fractional float to u64, integers beyond 2^53 to
 * f64, bool/string/array to a number). */
int qc_gguf_get_u64(const qc_gguf *g, const char *key, uint64_t *out);
int qc_gguf_get_f64(const qc_gguf *g, const char *key, double *out);
/* A string value (not NUL-terminated!), its length in *len; NULL if absent
 * or not a string. */
const char *qc_gguf_get_str(const qc_gguf *g, const char *key, size_t *len);
/* i-th string of a string array (pointer into the file, length in *len),
 * NULL if out of range or kv is not a string array of g. */
const char *qc_gguf_arr_str(const qc_gguf *g, const qc_gguf_kv *kv, uint64_t i, size_t *len);

size_t qc_gguf_tensor_count(const qc_gguf *g);
const qc_gguf_tensor *qc_gguf_tensor_at(const qc_gguf *g, size_t i);
const qc_gguf_tensor *qc_gguf_find_tensor(const qc_gguf *g, const char *name);

/* Bytes of `n` elements of ggml type `type` (block-aware); 0 for types this
 * reader does not support, n < 0, n not a multiple of the block, or
 * overflow. */
size_t qc_gguf_type_bytes(uint32_t type, int64_t n);
/* "f32", "q4_k", ... for every ggml type id known; "unknown" otherwise. */
const char *qc_gguf_type_name(uint32_t type);
/* "u8", "string", "array", ...; "unknown" otherwise. */
const char *qc_gguf_value_type_name(uint32_t type);

#endif
