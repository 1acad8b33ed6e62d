/* ggml_dequant.c - test helper: qc_ggml_dequantize on a file of GGUF blocks, writing raw f32 (for the gguf-py oracle). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "qc_ggml.h"
#include "qc_util.h"

/* usage: ggml_dequant TYPE N_ELEMENTS in.bin out.f32
 * Exit 0 on success, 2 when qc_ggml_dequantize refuses (message on stderr), 1 otherwise. */
int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: ggml_dequant TYPE N_ELEMENTS in.bin out.f32\n");
        return 1;
    }
    uint32_t type = (uint32_t)strtoul(argv[1], NULL, 10);
    int64_t n = strtoll(argv[2], NULL, 10);
    char err[256];
    size_t len = 0;
    char *data = qc_read_file(argv[3], (size_t)1 << 30, &len, err, sizeof err);
    if (!data) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (n < 0 || n > ((int64_t)1 << 28)) {
        fprintf(stderr, "element count %lld out of the helper's range\n", (long long)n);
        free(data);
        return 1;
    }
    float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
    int rc = 1;
    if (out) {
        if (qc_ggml_dequantize(type, data, len, n, out, err, sizeof err) != QC_OK) {
            fprintf(stderr, "refused: %s\n", err);
            rc = 2;
        } else {
            FILE *f = fopen(argv[4], "wb");
            if (f) {
                size_t w = fwrite(out, sizeof(float), (size_t)n, f);
                rc = (fclose(f) == 0 && w == (size_t)n) ? 0 : 1;
            }
        }
    }
    free(out);
    free(data);
    return rc;
}
