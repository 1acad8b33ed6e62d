/* rd_bytes.h - a growable little-endian byte writer the reader tests build their files with. */
#ifndef RD_BYTES_H
#define RD_BYTES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd_bytes {
    uint8_t *p;
    size_t n, cap;
} rd_bytes;

static inline void rb_put(rd_bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n) nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) { fprintf(stderr, "out of memory\n"); exit(2); }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void rb_u8(rd_bytes *b, uint8_t v) { rb_put(b, &v, 1); }
static inline void rb_u16(rd_bytes *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    rb_put(b, x, 2);
}
static inline void rb_u32(rd_bytes *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    rb_put(b, x, 4);
}
static inline void rb_u64(rd_bytes *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    rb_put(b, x, 8);
}
static inline void rb_f32(rd_bytes *b, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    rb_u32(b, v);
}
static inline void rb_f64(rd_bytes *b, double f) {
    uint64_t v;
    memcpy(&v, &f, 8);
    rb_u64(b, v);
}
/* A GGUF string: u64 length, then the bytes. */
static inline void rb_gstr(rd_bytes *b, const char *s) {
    rb_u64(b, strlen(s));
    rb_put(b, s, strlen(s));
}
static inline void rb_zero_to(rd_bytes *b, size_t align) {
    while (b->n % align) rb_u8(b, 0);
}
/* Overwrite a little-endian field already written at `pos`. */
static inline void rb_set32(uint8_t *p, size_t pos, uint32_t v) {
    for (int i = 0; i < 4; i++) p[pos + i] = (uint8_t)(v >> (8 * i));
}
static inline void rb_set64(uint8_t *p, size_t pos, uint64_t v) {
    for (int i = 0; i < 8; i++) p[pos + i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t rb_get64(const uint8_t *p, size_t pos) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[pos + i];
    return v;
}
/* An exact-size heap copy, so the sanitizer sees any read past the end. */
static inline uint8_t *rb_dup(const uint8_t *p, size_t n) {
    uint8_t *c = malloc(n ? n : 1);
    if (!c) { fprintf(stderr, "out of memory\n"); exit(2); }
    if (n) memcpy(c, p, n);
    return c;
}
static inline int rb_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

#endif
