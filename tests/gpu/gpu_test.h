/* gpu_test.h - helpers shared by the GPU backend tests: open-or-skip, poison, seeds, comparisons, L2-flushed timing. */
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

/* ---- timing ---- */

/* One kernel launch of a timed run. */
typedef struct gt_launch {
    qc_gpu_fn fn;
    qc_launch_dims d;
    void **argv;
    const qc_kernel_desc *k; /* when set, launched through qc_gpu_launch_kernel (its tensor maps); may be NULL */
} gt_launch;

/* A kernel workspace (qc_kernel_desc.workspace_bytes) of at least `need` bytes in *buf, zero-filled when made:
 * one buffer a test reuses for every launch, grown (freed and made again) when a kernel asks for more, as the
 * engine keeps one; the kernels put their counters back to zero, so no launch needs a memset. */
static inline qc_status gt_workspace(qc_gpu *g, qc_gpu_buf *buf, uint64_t *bytes, uint64_t need, char *err,
                                     size_t errlen) {
    if (need <= *bytes) return QC_OK;
    qc_gpu_free(g, buf);
    *bytes = 0;
    qc_status st = qc_gpu_alloc(g, (size_t)need, (size_t)need, QC_MEM_WORKSPACE, "work", buf, err, errlen);
    if (st == QC_OK) st = qc_gpu_memset32(g, buf->ptr, 0, (size_t)(need + 3) / 4, err, errlen);
    if (st == QC_OK) *bytes = need;
    return st;
}

/* How many of the first `words` 32-bit words of buf are non-zero (*nonzero), read back from the device: the split
 * kernels put their workspace counters back to zero after every launch, and the tests check it. */
static inline qc_status gt_nonzero_words(qc_gpu *g, const qc_gpu_buf *buf, size_t words, size_t *nonzero, char *err,
                                         size_t errlen) {
    *nonzero = 0;
    uint32_t *w = malloc(words * 4);
    if (!w) {
        snprintf(err, errlen, "out of memory reading %zu workspace words", words);
        return QC_ERR_NOMEM;
    }
    qc_status st = qc_gpu_download(g, w, buf->ptr, words * 4, err, errlen);
    for (size_t i = 0; st == QC_OK && i < words; i++) *nonzero += w[i] != 0;
    free(w);
    return st;
}

#define GT_FLUSH_BYTES ((size_t)256 << 20)
/* what the timing lines say about the method */
#define GT_TIMING_NOTE "L2 flushed (256 MiB memset) before each run"

static inline int gt_cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* the nl launches of one run; nonzero (err set) on an error */
static inline int gt_launch_run(qc_gpu *g, const gt_launch *l, int nl, char *err, size_t errlen) {
    int bad = 0;
    for (int k = 0; k < nl && !bad; k++)
        bad = l[k].k ? qc_gpu_launch_kernel(g, l[k].k, l[k].fn, &l[k].d, l[k].argv, err, errlen) != QC_OK
                     : qc_gpu_launch(g, l[k].fn, &l[k].d, l[k].argv, err, errlen) != QC_OK;
    return bad;
}

/* Microseconds of `reps` runs (after 3 warm-ups) of `nl` launches, run i
 * taking ls[(i % sets) * stride + 0 .. nl - 1], by one of three methods,
 * GT_TIME's when it is set (stream, synced; any other value: memset), else
 * `method`:
 *   memset  as qcore gemm-bench and triton's do_bench: a 256 MiB memset first
 *           (it flushes the L2 and keeps the GPU busy while the launches are
 *           queued, so the host's launch latency is not counted), then the
 *           start event, the launches, the end event; the median;
 *   stream  the runs back to back between one pair of events, the mean (no
 *           memset: each run finds the L2 holding the previous run's clean
 *           lines, as a model step's kernels do; the sets must span more than
 *           the L2 for the weights to stream from HBM);
 *   synced  each run between its own events, read before the next run is
 *           queued (the host's launch latency counts); the median.
 * -1 (and a failed CHECK) on an error. */
static inline double gt_time_launches_as(qc_gpu *g, const gt_launch *ls, int stride, int nl, int sets, int reps,
                                         const char *method) {
    char err[512];
    double med = -1;
    const char *env = getenv("GT_TIME");
    if (env) method = strcmp(env, "stream") == 0 || strcmp(env, "synced") == 0 ? env : "memset";
    const int stream = strcmp(method, "stream") == 0, flushed = strcmp(method, "memset") == 0;
    float *ms = reps > 0 ? malloc((size_t)reps * sizeof *ms) : NULL;
    qc_gpu_event a = NULL, b = NULL;
    qc_gpu_buf flush = {0};
    if (!ms || sets < 1) {
        CHECK(0, "timing: %d runs of %d sets", reps, sets);
        free(ms);
        return -1;
    }
    if ((flushed &&
         qc_gpu_alloc(g, GT_FLUSH_BYTES, GT_FLUSH_BYTES, QC_MEM_WORKSPACE, "L2 flush", &flush, err, sizeof err)) ||
        qc_gpu_event_create(g, &a, err, sizeof err) || qc_gpu_event_create(g, &b, err, sizeof err)) {
        CHECK(0, "timing set-up: %s", err);
        goto out;
    }
    int bad = 0;
    for (int i = -3; i < reps && !bad; i++) {
        const gt_launch *l = ls + (size_t)((i + 3) % sets) * (size_t)stride;
        if (stream) {
            if (i == 0) bad = qc_gpu_event_record(g, a, err, sizeof err);
            if (!bad) bad = gt_launch_run(g, l, nl, err, sizeof err);
            continue;
        }
        if (flushed) bad = qc_gpu_memset32(g, flush.ptr, (uint32_t)i, GT_FLUSH_BYTES / 4, err, sizeof err);
        if (!bad) bad = qc_gpu_event_record(g, a, err, sizeof err) || gt_launch_run(g, l, nl, err, sizeof err) ||
                        qc_gpu_event_record(g, b, err, sizeof err);
        float t = 0;
        if (!bad) bad = qc_gpu_event_elapsed(g, a, b, &t, err, sizeof err);
        if (!bad && i >= 0) ms[i] = t;
    }
    if (stream) {
        float t = 0;
        if (!bad) bad = qc_gpu_event_record(g, b, err, sizeof err) || qc_gpu_event_elapsed(g, a, b, &t, err, sizeof err);
        if (!bad) med = 1000.0 * t / reps;
    } else if (!bad) {
        qsort(ms, (size_t)reps, sizeof ms[0], gt_cmp_float);
        med = 1000.0 * ms[reps / 2];
    }
    CHECK(!bad, "timing: %s", err);
out:
    qc_gpu_event_destroy(g, a);
    qc_gpu_event_destroy(g, b);
    qc_gpu_free(g, &flush);
    free(ms);
    return med;
}

/* gt_time_launches_as with the memset method unless GT_TIME says otherwise */
static inline double gt_time_launches(qc_gpu *g, const gt_launch *ls, int stride, int nl, int sets, int reps) {
    return gt_time_launches_as(g, ls, stride, nl, sets, reps, "memset");
}

#endif
