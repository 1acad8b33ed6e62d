/* fuzz_safetensors.c - libFuzzer harness: qc_safetensors_open_memory on any bytes, then every tensor byte and metadata entry is read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qc_safetensors.h"

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
    qc_safetensors *s = qc_safetensors_open_memory(data, size, err, sizeof err);
    if (!s) {
        if (!memchr(err, 0, sizeof err) || !strstr(err, "<memory>: ")) abort(); /* every refusal says why */
        return 0;
    }
    uint64_t acc = 0, end = 0;
    for (size_t i = 0; i < qc_safetensors_count(s); i++) {
        const qc_st_tensor *t = qc_safetensors_at(s, i);
        if (qc_safetensors_find(s, t->name) != t) abort();
        if (t->ndim < 0 || t->ndim > 8 || (const uint8_t *)t->data < data ||
            (const uint8_t *)t->data + t->bytes > data + size)
            abort();
        /* tensors tile the data buffer in order */
        uint64_t off = (uint64_t)((const uint8_t *)t->data - data);
        if (i && off != end) abort();
        end = off + t->bytes;
        acc += fold(t->name, strlen(t->name)) + fold(t->data, t->bytes) + (uint64_t)t->dtype;
        const char *m = qc_safetensors_metadata(s, t->name);
        if (m) acc += strlen(m);
    }
    if (qc_safetensors_count(s) && end != size) abort();
    const char *m = qc_safetensors_metadata(s, "format");
    if (m) acc += strlen(m);
    sink = acc;
    qc_safetensors_close(s);
    return 0;
}
