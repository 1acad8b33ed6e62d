/* qc_trace.c - QCORE_TRACE on the GPU: a CUDA event pair around every launch, written as Chrome trace events. */
#include "qc_trace.h"

#include <stdlib.h>
#include <string.h>

#include "qc_internal.h"

typedef struct pending {
    const qc_kernel_desc *k;
    int64_t m, n, kk;
    char layer[48], cat[16];
    qc_gpu_event ev[2];
    double host; /* when the launch was queued */
    int done;    /* the launch succeeded (its end event is recorded) */
} pending;

struct qc_gpu_tracer {
    qc_gpu *g;
    const qc_runtime *rt;
    qc_trace *t;
    pending *p;
    size_t n, cap, n_events; /* p[0..cap) keep their events for reuse */
    char layer[48], cat[16];
    int failed;
};

/* An integer parameter of the launch by name (m, n, k), 0 when absent. */
static int64_t int_arg(const qc_kernel_desc *k, void **argv, const char *name) {
    for (uint32_t i = 0; k && argv && i < k->n_params; i++) {
        if (!k->params[i].name || strcmp(k->params[i].name, name) != 0 || !argv[i]) continue;
        if (k->params[i].type == QC_PARAM_I64) {
            int64_t v;
            memcpy(&v, argv[i], sizeof v);
            return v;
        }
        if (k->params[i].type == QC_PARAM_I32) {
            int32_t v;
            memcpy(&v, argv[i], sizeof v);
            return v;
        }
    }
    return 0;
}

static void hook(void *ctx, const qc_kernel_desc *k, void **argv, const qc_launch_dims *d, int after) {
    (void)d;
    qc_gpu_tracer *tr = ctx;
    char err[256];
    if (after) {
        if (tr->n && !tr->p[tr->n - 1].done) {
            pending *q = &tr->p[tr->n - 1];
            if (qc_gpu_event_record(tr->g, q->ev[1], err, sizeof err) == QC_OK) q->done = 1;
        }
        return;
    }
    if (tr->n && !tr->p[tr->n - 1].done) tr->n--; /* the previous launch failed: reuse its slot */
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 256;
        pending *np = realloc(tr->p, cap * sizeof *np);
        if (!np) {
            tr->failed = 1;
            return;
        }
        memset(np + tr->cap, 0, (cap - tr->cap) * sizeof *np);
        tr->p = np;
        tr->cap = cap;
    }
    pending *q = &tr->p[tr->n];
    for (int i = 0; i < 2; i++)
        if (!q->ev[i] && qc_gpu_event_create(tr->g, &q->ev[i], err, sizeof err) != QC_OK) {
            tr->failed = 1;
            return;
        }
    q->k = k;
    q->m = int_arg(k, argv, "m");
    q->n = int_arg(k, argv, "n");
    q->kk = int_arg(k, argv, "k");
    memcpy(q->layer, tr->layer, sizeof q->layer);
    memcpy(q->cat, tr->cat, sizeof q->cat);
    q->done = 0;
    q->host = qc_now_seconds();
    if (qc_gpu_event_record(tr->g, q->ev[0], err, sizeof err) != QC_OK) {
        tr->failed = 1;
        return;
    }
    tr->n++;
}

qc_gpu_tracer *qc_gpu_tracer_open(qc_gpu *g, const qc_runtime *rt, qc_trace *t) {
    if (!g || !t) return NULL;
    qc_gpu_tracer *tr = calloc(1, sizeof *tr);
    if (!tr) return NULL;
    tr->g = g;
    tr->rt = rt;
    tr->t = t;
    qc_strlcpy(tr->cat, "kernel", sizeof tr->cat);
    qc_gpu_set_launch_hook(g, hook, tr);
    return tr;
}

void qc_gpu_tracer_context(qc_gpu_tracer *tr, const char *layer, const char *cat) {
    if (!tr) return;
    qc_strlcpy(tr->layer, layer ? layer : "", sizeof tr->layer);
    qc_strlcpy(tr->cat, cat ? cat : "kernel", sizeof tr->cat);
}

qc_status qc_gpu_tracer_flush(qc_gpu_tracer *tr, char *err, size_t errlen) {
    if (!tr || !tr->n) return QC_OK;
    qc_status st = qc_gpu_sync(tr->g, err, errlen);
    if (st != QC_OK) return st;
    /* the first launch's queue time anchors the GPU timeline of this flush */
    pending *first = &tr->p[0];
    double base = first->host;
    for (size_t i = 0; i < tr->n; i++) {
        pending *q = &tr->p[i];
        if (!q->done) continue;
        float off = 0, dur = 0;
        if ((st = qc_gpu_event_elapsed(tr->g, first->ev[0], q->ev[0], &off, err, errlen)) ||
            (st = qc_gpu_event_elapsed(tr->g, q->ev[0], q->ev[1], &dur, err, errlen)))
            return st;
        double t0 = base + off * 1e-3;
        const char *id = q->k ? q->k->id : "(unregistered kernel)";
        const char *fmt = q->k ? q->k->format : "";
        const char *plugin = q->k ? qc_format_plugin(tr->rt, fmt) : "";
        qc_trace_event_layer(tr->t, id, q->cat, q->layer, plugin ? plugin : "", fmt, id, q->m, q->n, q->kk, t0,
                             t0 + dur * 1e-3);
        tr->n_events++;
    }
    tr->n = 0;
    return QC_OK;
}

size_t qc_gpu_tracer_events(const qc_gpu_tracer *tr) { return tr ? tr->n_events : 0; }

void qc_gpu_tracer_close(qc_gpu_tracer *tr) {
    if (!tr) return;
    char err[256];
    if (qc_gpu_tracer_flush(tr, err, sizeof err) != QC_OK) qc_log(QC_LOG_WARN, "trace: last launches lost: %s", err);
    if (tr->failed) qc_log(QC_LOG_WARN, "trace: some launches could not be timed (events or memory)");
    qc_gpu_set_launch_hook(tr->g, NULL, NULL);
    for (size_t i = 0; i < tr->cap; i++)
        for (int j = 0; j < 2; j++)
            if (tr->p[i].ev[j]) qc_gpu_event_destroy(tr->g, tr->p[i].ev[j]);
    free(tr->p);
    free(tr);
}
