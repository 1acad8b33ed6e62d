/* gpu_test.h - helpers shared by the GPU backend tests: open-or-skip, poison, seeds, comparisons. */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvrtc/nv_test.h"
#include "qc_gpu.h"
#include "qc_test.h"
#include "qcore/qcore.h"

/* What outputs are filled with before a kernel runs: a quiet NaN whose
 * payload no kernel produces, so an unwritten element is told apart from a
 * NaN a kernel wrote on purpose (e.g. 0x7fc00000 for a bad token id). */
#define GT_POISON 0x7fc0deadu

/* Device 0, or NULL after printing "<test>: skip: <reason>" (no driver, no
 * device): the caller then exits 0. */
static inline qc_gpu *gt_open_or_skip(const char *test) {
    char err[512] = "";
    qc_gpu *g = qc_gpu_open(0, err, sizeof err);
    if (!g) {
        printf("%s: skip: %s\n", test, err);
        return NULL;
    }
    const qc_gpu_info *i = qc_gpu_get_info(g);
    printf("%s: device %d: %s, sm_%d, %d SMs, %.1f GiB, CUDA driver API %d.%d\n", test, i->device, i->name, i->sm,
           i->sm_count, (double)i->mem_total / (1u << 30), i->driver_version / 1000, i->driver_version % 1000 / 10);
    return g;
}

/* The rest of a GPU test's set-up once `g` is open: NVRTC with a private
 * cache folder (*tmp, removed by the caller with nv_rm_rf) and a runtime
 * that reads no plugin folders.  -1 = go on (a runtime that failed to open
 * is a failed CHECK and *rt stays NULL); otherwise the exit code after g
 * was closed: 0 when NVRTC is missing (a skip), 1 on an error. */
static inline int gt_setup(const char *test, qc_gpu *g, char **tmp, qc_nvrtc **nv, qc_runtime **rt) {
    *tmp = nv_tmpdir();
    int skip = 0;
    *nv = *tmp ? nv_open_or_skip(test, *tmp, &skip) : NULL;
    if (!*nv) {
        qc_gpu_close(g);
        if (*tmp) nv_rm_rf(*tmp);
        return skip ? 0 : 1;
    }
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(*rt != NULL, "%s", err);
    return -1;
}

/* A fresh seed per run (printed, and taken from QC_GPU_TEST_SEED to repeat one). */
static inline uint64_t gt_seed(const char *test) {
    const char *s = getenv("QC_GPU_TEST_SEED");
    uint64_t seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    if (!seed) seed = 1;
    printf("%s: seed %llu (QC_GPU_TEST_SEED repeats it)\n", test, (unsigned long long)seed);
    return seed;
}

static inline void gt_poison(void *p, size_t bytes) {
    uint32_t v = GT_POISON;
    for (size_t i = 0; i + 4 <= bytes; i += 4) memcpy((char *)p + i, &v, 4);
}

static inline uint32_t gt_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Elements still holding the poison (never written). */
static inline size_t gt_unwritten(const void *p, size_t bytes, size_t *first) {
    size_t n = 0;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        uint32_t v;
        memcpy(&v, (const char *)p + i, 4);
        if (v == GT_POISON) {
            if (!n && first) *first = i / 4;
            n++;
        }
    }
    return n;
}

#endif
