/* w4_test_util.h - shared by the w4a16 tests: open the plugin, reach its importer, run a reference kernel. */
#ifndef W4_TEST_UTIL_H
#define W4_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "qc_internal.h" /* the plugin entry: qcore.h has no call for extensions yet */
#include "qc_test.h"
#include "qcore/qcore.h"

#include "../../common/qc_bf16.h"
#include "../w4a16.h"

typedef struct w4t {
    qc_runtime *rt;
    const qc_format_desc *f;
    const qc_importer_ext *imp;
} w4t;

static inline int w4t_open(w4t *t) {
    char err[512] = "";
    qc_runtime_options o = {.struct_size = sizeof o,
                            .plugin_path = QC_TEST_PLUGIN_DIR,
                            .skip_default_dirs = 1,
                            .skip_env = 1};
    memset(t, 0, sizeof *t);
    t->rt = qc_runtime_open(&o, err, sizeof err);
    if (!t->rt) {
        fprintf(stderr, "qc_runtime_open: %s\n", err);
        return -1;
    }
    t->f = qc_format_find(t->rt, "w4a16");
    for (size_t i = 0; i < t->rt->n_plugins; i++) {
        const qc_plugin_entry *e = t->rt->plugins[i]->entry;
        if (strcmp(e->id, "org.qcore.w4a16") == 0 && e->get_extension)
            t->imp = e->get_extension(QC_EXT_IMPORTER);
    }
    if (!t->f || !t->imp) {
        fprintf(stderr, "w4a16 plugin not loaded from %s (format %p, importer %p)\n", QC_TEST_PLUGIN_DIR,
                (const void *)t->f, (const void *)t->imp);
        for (size_t i = 0; i < qc_plugin_refusal_count(t->rt); i++)
            fprintf(stderr, "  refused: %s\n", qc_plugin_refusal(t->rt, i));
        return -1;
    }
    return 0;
}

static inline const qc_buffer *w4t_buf(const qc_packed_weight *w, const char *name) {
    for (uint32_t i = 0; i < w->n_buffers; i++)
        if (strcmp(w->buffers[i].name, name) == 0) return &w->buffers[i];
    return NULL;
}

/* Code of stored element (j, t) in the documented layout (pack_version 2): elements 8w..8w+7 of row j share the
 * little-endian 32-bit word w of the row, element 8w + 2p at bits 4p, element 8w + 2p + 1 at bits 16 + 4p. */
static inline unsigned w4t_code(const qc_packed_weight *w, int64_t j, int64_t t) {
    const uint8_t *q = (const uint8_t *)w4t_buf(w, "qweight")->data + j * (w->k / 2) + (t / 8) * 4;
    const uint32_t word = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    const int p = (int)(t % 8) / 2;
    return (word >> ((t & 1) ? 16 + 4 * p : 4 * p)) & 15u;
}

/* Select the reference kernel for `w` the way the runtime does, bind the
 * packed weight's buffers as "w.<name>" and call it through libffi. */
static inline int w4t_linear(const w4t *t, const qc_packed_weight *w, const float *x, float *y, int64_t m,
                      const char **kernel_id) {
    qc_problem p = {.struct_size = sizeof p, .sm = 0, .m = m, .n = w->n, .k = w->k,
                    .group_size = w->group_size, .phase = QC_PHASE_DECODE, .scheme = w->scheme};
    const qc_kernel_desc *kd = NULL;
    qc_reason why;
    if (!qc_select_format(t->rt, t->f, &p, 0, &kd, &why) || !kd) {
        fprintf(stderr, "no reference kernel: %s: %s\n", why.code, why.text);
        return -1;
    }
    if (kernel_id) *kernel_id = kd->id;
    char names[QC_MAX_WEIGHT_BUFFERS][40];
    void *ptrs[QC_MAX_WEIGHT_BUFFERS];
    qc_named_arg args[16];
    size_t na = 0;
    for (uint32_t i = 0; i < w->n_buffers; i++) {
        snprintf(names[i], sizeof names[i], "w.%s", w->buffers[i].name);
        ptrs[i] = w->buffers[i].data;
        args[na++] = (qc_named_arg){names[i], &ptrs[i]};
    }
    const float *xp = x;
    float *yp = y;
    int64_t mm = m, nn = w->n, kk = w->k;
    uint32_t g = w->group_size;
    args[na++] = (qc_named_arg){"x", &xp};
    args[na++] = (qc_named_arg){"y", &yp};
    args[na++] = (qc_named_arg){"m", &mm};
    args[na++] = (qc_named_arg){"n", &nn};
    args[na++] = (qc_named_arg){"k", &kk};
    args[na++] = (qc_named_arg){"group_size", &g};
    void *argv[32];
    char err[256];
    if (qc_kernel_bind(kd, args, na, argv, 32, err, sizeof err) != QC_OK ||
        qc_kernel_call_reference(kd, argv, err, sizeof err) != QC_OK) {
        fprintf(stderr, "kernel call: %s\n", err);
        return -1;
    }
    return 0;
}

static inline uint32_t w4t_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

#endif
