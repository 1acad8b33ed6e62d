/* fuzz_config_json.c - libFuzzer harness: qc_model_shape_load (which takes a path) on any bytes, through a per-process temp file. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qcore/qcore.h"

static char path[64];

static void cleanup(void) {
    if (path[0]) unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/qc_fuzz_config_%ld.json", (long)getpid());
        atexit(cleanup);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    qc_model_shape m;
    char err[512];
    if (qc_model_shape_load(path, &m, err, sizeof err) != QC_OK) {
        if (!memchr(err, 0, sizeof err) || !strstr(err, path)) abort(); /* every refusal names the file */
        return 0;
    }
    /* an accepted shape must be usable */
    if (m.hidden < 1 || m.n_layers < 1 || m.n_heads < 1 || m.n_kv_heads < 1 || m.n_heads % m.n_kv_heads) abort();
    qc_layer_list *l = qc_model_linear_layers(&m);
    if (l) {
        if (l->n != (size_t)m.n_layers * 7 + 1) abort();
        qc_layer_list_free(l);
    }
    return 0;
}
