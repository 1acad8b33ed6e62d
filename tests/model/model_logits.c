/* model_logits.c - test helper: run token ids through a model on the CPU reference and write all logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qcore/qcore.h"

/* usage: model_logits <plugin dir> <model path> <format> <ids, comma-separated> <out.f32> */
int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PLUGIN_DIR MODEL FORMAT IDS OUT\n", argv[0]);
        return 2;
    }
    char err[1024];
    qc_runtime_options ro = {.struct_size = sizeof ro, .plugin_path = argv[1], .skip_default_dirs = 1, .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&ro, err, sizeof err);
    if (!rt) { fprintf(stderr, "%s\n", err); return 1; }
    /* FORMAT is a format recipe, or policy:<file.lua> */
    qc_policy *pol = NULL;
    if (strncmp(argv[3], "policy:", 7) == 0) {
        pol = qc_policy_open(argv[3] + 7, NULL, err, sizeof err);
        if (!pol) { fprintf(stderr, "%s\n", err); qc_runtime_close(rt); return 1; }
    }
    qc_model_options mo = {.struct_size = sizeof mo, .path = argv[2], .format = pol ? NULL : argv[3],
                           .policy = pol, .max_context = 1024};
    qc_model *m = qc_model_open(rt, &mo, err, sizeof err);
    if (!m) { fprintf(stderr, "%s\n", err); qc_policy_close(pol); qc_runtime_close(rt); return 1; }
    static int32_t ids[1024];
    size_t n = 0;
    for (char *s = strtok(argv[4], ","); s && n < 1024; s = strtok(NULL, ",")) ids[n++] = (int32_t)atoi(s);
    int vocab = qc_model_shape_of(m)->vocab;
    float *logits = malloc(sizeof(float) * n * (size_t)vocab);
    int rc = 1;
    /* the first half as a prefill, then one token at a time: both paths run */
    size_t half = n / 2 ? n / 2 : 1;
    if (logits && qc_model_forward(m, ids, half, logits, 1, err, sizeof err) == QC_OK) {
        rc = 0;
        for (size_t i = half; i < n && rc == 0; i++)
            if (qc_model_forward(m, &ids[i], 1, logits + i * (size_t)vocab, 0, err, sizeof err) != QC_OK) rc = 1;
    }
    if (rc) fprintf(stderr, "%s\n", err);
    FILE *f = rc ? NULL : fopen(argv[5], "wb");
    if (f) {
        fwrite(logits, sizeof(float), n * (size_t)vocab, f);
        fclose(f);
    } else if (!rc) {
        rc = 1;
    }
    free(logits);
    qc_model_close(m);
    qc_policy_close(pol);
    qc_runtime_close(rt);
    return rc;
}
