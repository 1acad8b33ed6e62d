/* mxfp4_codec.c - test helper: runs the mxfp4 plugin's quantize/dequantize on raw files for the Python oracle test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_util.h"
#include "qcore/qcore.h"

/* usage:
 *   mxfp4_codec quantize   N K in.f32 out.qweight out.scales
 *   mxfp4_codec dequantize N K in.qweight in.scales out.f32
 *   mxfp4_codec source KERNEL-ID          (the kernel's CUDA source on stdout, for the host emulation test)
 *   mxfp4_codec dims KERNEL-ID M N K      (its launch: "grid block shared_bytes", for the host emulation test)
 * Exit 0 on success, 2 when the plugin refuses (reason on stderr), 1 on other errors. */

static void *read_all(const char *path, size_t want) {
    char err[256];
    size_t len = 0;
    char *d = qc_read_file(path, want + 1, &len, err, sizeof err);
    if (!d) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    if (len != want) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, len, want);
        free(d);
        return NULL;
    }
    return d;
}

static int write_all(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, bytes, f);
    return fclose(f) == 0 && w == bytes ? 0 : -1;
}

/* The CUDA source of one of the plugin's kernels. */
static int print_source(const char *id) {
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    const qc_kernel_desc *k = rt ? qc_kernel_find(rt, id) : NULL;
    int rc = k && k->cuda_source && fputs(k->cuda_source, stdout) >= 0 ? 0 : 1;
    if (rc) fprintf(stderr, "%s: %s\n", id, rt ? "no such kernel with CUDA source" : err);
    qc_runtime_close(rt);
    return rc;
}

/* The launch geometry the kernel's launch_dims gives for m, n, k (grid.x, block.x, dynamic shared bytes). */
static int print_dims(const char *id, int64_t m, int64_t n, int64_t k) {
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    const qc_kernel_desc *kd = rt ? qc_kernel_find(rt, id) : NULL;
    int rc = 1;
    if (kd && kd->launch_dims) {
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = m, .n = n, .k = k, .group_size = 32};
        qc_launch_dims d;
        kd->launch_dims(&p, &d);
        rc = printf("%u %u %u\n", d.grid[0], d.block[0], d.shared_bytes) > 0 ? 0 : 1;
    } else {
        fprintf(stderr, "%s: %s\n", id, rt ? "no such kernel with launch_dims" : err);
    }
    qc_runtime_close(rt);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "source") == 0) return print_source(argv[2]);
    if (argc == 6 && strcmp(argv[1], "dims") == 0)
        return print_dims(argv[2], strtoll(argv[3], NULL, 10), strtoll(argv[4], NULL, 10), strtoll(argv[5], NULL, 10));
    if (argc != 7) {
        fprintf(stderr, "usage: mxfp4_codec quantize|dequantize N K file file file\n");
        return 1;
    }
    int64_t n = strtoll(argv[2], NULL, 10), k = strtoll(argv[3], NULL, 10);
    if (n <= 0 || k <= 0 || n > (1 << 20) || k > (1 << 20)) return 1;
    size_t count = (size_t)n * (size_t)k;
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    const qc_format_desc *f = rt ? qc_format_find(rt, "mxfp4") : NULL;
    if (!f) {
        fprintf(stderr, "no mxfp4 format: %s\n", rt ? "not loaded" : err);
        qc_runtime_close(rt);
        return 1;
    }
    int rc = 1;
    if (strcmp(argv[1], "quantize") == 0) {
        float *w = read_all(argv[4], count * sizeof(float));
        qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
        qc_packed_weight pw;
        qc_reason why = {{0}, {0}};
        if (!w) {
            rc = 1;
        } else if (f->quantize(&req, &pw, &why) != QC_OK) {
            fprintf(stderr, "refused %s: %s\n", why.code, why.text);
            rc = 2;
        } else {
            rc = write_all(argv[5], pw.buffers[0].data, pw.buffers[0].bytes) ||
                         write_all(argv[6], pw.buffers[1].data, pw.buffers[1].bytes)
                     ? 1
                     : 0;
            for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
        }
        free(w);
    } else if (strcmp(argv[1], "dequantize") == 0) {
        uint8_t *q = read_all(argv[4], count / 2), *sc = read_all(argv[5], count / 32);
        float *out = malloc(count * sizeof(float));
        qc_packed_weight pw = {.struct_size = sizeof pw, .format = "mxfp4", .n = n, .k = k, .n_padded = n,
                               .k_padded = k, .group_size = 32, .pack_version = 1, .n_buffers = 2};
        pw.buffers[0] = (qc_buffer){"qweight", q, count / 2, QC_DT_U8, QC_MEM_WEIGHTS};
        pw.buffers[1] = (qc_buffer){"scales", sc, count / 32, QC_DT_E8M0, QC_MEM_SCALES};
        if (q && sc && out) {
            if (f->dequantize(&pw, out) != QC_OK) {
                fprintf(stderr, "dequantize refused\n");
                rc = 2;
            } else {
                rc = write_all(argv[6], out, count * sizeof(float)) ? 1 : 0;
            }
        }
        free(q), free(sc), free(out);
    }
    qc_runtime_close(rt);
    return rc;
}
