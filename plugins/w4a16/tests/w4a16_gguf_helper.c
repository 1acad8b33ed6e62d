/* w4a16_gguf_helper.c - import raw GGUF Q4_0/Q4_1 blocks through the w4a16 plugin and write the dequantized f32. */
#include "w4_test_util.h"

/* usage: w4a16_gguf_helper <gguf.q4_0|gguf.q4_1> <n> <k> <blocks.bin> <out.f32>
 * Exit 0 with n*k little-endian f32 written; 2 with "refused: <code>: <why>"
 * when the importer refuses the blocks; 1 on any other failure. */
static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s <gguf.q4_0|gguf.q4_1> <n> <k> <blocks.bin> <out.f32>\n", argv[0]);
        return 1;
    }
    int64_t n = strtoll(argv[2], NULL, 10), k = strtoll(argv[3], NULL, 10);
    size_t len = 0;
    unsigned char *blocks = read_all(argv[4], &len);
    if (!blocks) {
        fprintf(stderr, "cannot read %s\n", argv[4]);
        return 1;
    }
    w4t t;
    if (w4t_open(&t) != 0) {
        free(blocks);
        return 1;
    }
    qc_named_tensor ts = {"weight", blocks, len, QC_DT_U8, 1, {(int64_t)len, 0, 0, 0}};
    qc_packed_weight pw;
    qc_reason why = {{0}, {0}};
    qc_status st = t.imp->import(argv[1], &ts, 1, n, k, 0, &pw, &why);
    int rc = 0;
    if (st != QC_OK) {
        printf("refused: %s: %s\n", why.code, why.text);
        rc = 2;
    } else {
        float *out = malloc(sizeof(float) * (size_t)(n * k));
        FILE *f = fopen(argv[5], "wb");
        if (!out || !f || t.f->dequantize(&pw, out) != QC_OK || fwrite(out, sizeof(float), (size_t)(n * k), f) != (size_t)(n * k)) {
            fprintf(stderr, "dequantize or write failed\n");
            rc = 1;
        }
        if (f && fclose(f) != 0) rc = 1;
        free(out);
        t.f->release(&pw);
    }
    free(blocks);
    qc_runtime_close(t.rt);
    return rc;
}
