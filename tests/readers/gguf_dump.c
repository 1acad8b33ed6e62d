/* gguf_dump.c - prints what qc_gguf reads from a file as JSON, for comparison with gguf-py's GGUFReader. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_gguf.h"

/* Strings go out as hex so any bytes survive the trip into Python. */
static void hex(const void *p, size_t n) {
    const uint8_t *b = p;
    putchar('"');
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    putchar('"');
}

static void real(double f) {
    if (isnan(f)) printf("\"nan\"");
    else if (isinf(f)) printf(f > 0 ? "\"inf\"" : "\"-inf\"");
    else {
        /* keep it a JSON float ("-0.0", "3.0"), so the sign of zero survives */
        char b[40];
        snprintf(b, sizeof b, "%.17g", f);
        printf("%s%s", b, strpbrk(b, ".e") ? "" : ".0");
    }
}

static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* One element of a numeric array (little-endian host). */
static void element(uint32_t t, const uint8_t *p) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } v;
    switch (t) {
    case QC_GGUF_U8: case QC_GGUF_BOOL: memcpy(&v.u8, p, 1); printf("%u", v.u8); break;
    case QC_GGUF_I8: memcpy(&v.i8, p, 1); printf("%d", v.i8); break;
    case QC_GGUF_U16: memcpy(&v.u16, p, 2); printf("%u", v.u16); break;
    case QC_GGUF_I16: memcpy(&v.i16, p, 2); printf("%d", v.i16); break;
    case QC_GGUF_U32: memcpy(&v.u32, p, 4); printf("%" PRIu32, v.u32); break;
    case QC_GGUF_I32: memcpy(&v.i32, p, 4); printf("%" PRId32, v.i32); break;
    case QC_GGUF_F32: memcpy(&v.f32, p, 4); real(v.f32); break;
    case QC_GGUF_U64: memcpy(&v.u64, p, 8); printf("%" PRIu64, v.u64); break;
    case QC_GGUF_I64: memcpy(&v.i64, p, 8); printf("%" PRId64, v.i64); break;
    case QC_GGUF_F64: memcpy(&v.f64, p, 8); real(v.f64); break;
    default: printf("null"); break;
    }
}

static size_t elem_bytes(uint32_t t) {
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s model.gguf\n", argv[0]);
        return 2;
    }
    char err[512];
    qc_gguf *g = qc_gguf_open(argv[1], err, sizeof err);
    if (!g) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("{\"version\": %u, \"alignment\": %u, \"data_offset\": %zu,\n\"kv\": [\n", qc_gguf_version(g),
           qc_gguf_alignment(g), qc_gguf_data_offset(g));
    for (size_t i = 0; i < qc_gguf_kv_count(g); i++) {
        const qc_gguf_kv *kv = qc_gguf_kv_at(g, i);
        printf("%s{\"key\": ", i ? ",\n" : "");
        hex(kv->key, strlen(kv->key));
        printf(", \"type\": %u, \"value\": ", kv->type);
        switch (kv->type) {
        case QC_GGUF_STRING: hex(kv->str, (size_t)kv->str_len); break;
        case QC_GGUF_U8: case QC_GGUF_U16: case QC_GGUF_U32: case QC_GGUF_U64: printf("%" PRIu64, kv->num.u); break;
        case QC_GGUF_I8: case QC_GGUF_I16: case QC_GGUF_I32: case QC_GGUF_I64: printf("%" PRId64, kv->num.i); break;
        case QC_GGUF_F32: case QC_GGUF_F64: real(kv->num.f); break;
        case QC_GGUF_BOOL: printf("%d", kv->num.b); break;
        case QC_GGUF_ARRAY:
            printf("[");
            for (uint64_t k = 0; k < kv->arr_len; k++) {
                if (k) printf(", ");
                if (kv->arr_type == QC_GGUF_STRING) {
                    size_t len;
                    const char *s = qc_gguf_arr_str(g, kv, k, &len);
                    hex(s, len);
                } else {
                    element(kv->arr_type, (const uint8_t *)kv->arr_data + k * elem_bytes(kv->arr_type));
                }
            }
            printf("], \"arr_type\": %u", kv->arr_type);
            break;
        }
        printf("}");
    }
    printf("\n],\n\"tensors\": [\n");
    for (size_t i = 0; i < qc_gguf_tensor_count(g); i++) {
        const qc_gguf_tensor *t = qc_gguf_tensor_at(g, i);
        printf("%s{\"name\": ", i ? ",\n" : "");
        hex(t->name, strlen(t->name));
        printf(", \"type\": %u, \"ne\": [", t->type);
        for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
        printf("], \"offset\": %" PRIu64 ", \"bytes\": %zu, \"crc32\": %" PRIu32 "}", t->offset, t->bytes,
               crc32_bytes(t->data, t->bytes));
    }
    printf("\n]}\n");
    qc_gguf_close(g);
    return 0;
}
