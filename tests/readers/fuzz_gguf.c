/* fuzz_gguf.c - libFuzzer harness: qc_gguf_open_memory on any bytes, then every key, array element, string and tensor byte is read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qc_gguf.h"

static const size_t ELEM[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Fold bytes into a sum so the reads cannot be optimized away. */
static volatile uint64_t sink;
static uint64_t fold(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s = s * 31 + b[i];
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    qc_gguf *g = qc_gguf_open_memory(data, size, err, sizeof err);
    if (!g) {
        if (!memchr(err, 0, sizeof err) || !strstr(err, "<memory>: ")) abort(); /* every refusal says why */
        return 0;
    }
    uint64_t s = qc_gguf_version(g) + qc_gguf_alignment(g) + qc_gguf_data_offset(g);
    for (size_t i = 0; i < qc_gguf_kv_count(g); i++) {
        const qc_gguf_kv *kv = qc_gguf_kv_at(g, i);
        if (qc_gguf_find(g, kv->key) != kv) abort();
        s += fold(kv->key, strlen(kv->key));
        uint64_t u;
        double f;
        size_t len;
        if (qc_gguf_get_u64(g, kv->key, &u) == 0) s += u;
        if (qc_gguf_get_f64(g, kv->key, &f) == 0) s += (uint64_t)(f != f);
        const char *str = qc_gguf_get_str(g, kv->key, &len);
        if (str) s += fold(str, len);
        if (kv->type == QC_GGUF_ARRAY && kv->arr_type == QC_GGUF_STRING) {
            for (uint64_t k = 0; k < kv->arr_len; k++) {
                str = qc_gguf_arr_str(g, kv, k, &len);
                if (!str) abort();
                s += fold(str, len);
            }
            if (qc_gguf_arr_str(g, kv, kv->arr_len, &len)) abort();
        } else if (kv->type == QC_GGUF_ARRAY) {
            s += fold(kv->arr_data, (size_t)kv->arr_len * ELEM[kv->arr_type]);
        }
    }
    for (size_t i = 0; i < qc_gguf_tensor_count(g); i++) {
        const qc_gguf_tensor *t = qc_gguf_tensor_at(g, i);
        if (qc_gguf_find_tensor(g, t->name) != t) abort();
        s += fold(t->name, strlen(t->name)) + fold(t->data, t->bytes);
        /* the size agrees with the type table */
        size_t row = qc_gguf_type_bytes(t->type, t->ne[0]);
        if (t->ne[0] && t->ne[1] * t->ne[2] * t->ne[3] && row * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]) != t->bytes)
            abort();
        s += strlen(qc_gguf_type_name(t->type));
    }
    sink = s;
    qc_gguf_close(g);
    return 0;
}
