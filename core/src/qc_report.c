/* qc_report.c - Chrome trace-event JSON and SHA-256 of files, for traces and run manifests. */
#define _POSIX_C_SOURCE 200809L
#include "qc_report.h"

#include <errno.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct trace_ev {
    char *name, *cat, *plugin, *format, *kernel, *layer;
    int64_t m, n, k;
    double ts, dur; /* microseconds */
} trace_ev;

struct qc_trace {
    char *path;
    double t_open;
    trace_ev *ev;
    size_t n, cap;
    int failed; /* an event could not be stored: said once, in the file too */
};

qc_trace *qc_trace_open(const char *path) {
    qc_trace *t = calloc(1, sizeof *t);
    if (t) t->path = strdup(path);
    if (!t || !t->path) {
        free(t);
        qc_log(QC_LOG_WARN, "trace %s: out of memory, no trace will be written", path);
        return NULL;
    }
    t->t_open = qc_now_seconds();
    return t;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

void qc_trace_event(qc_trace *t, const char *name, const char *cat, const char *plugin, const char *format,
                    const char *kernel, int64_t m, int64_t n, int64_t k, double t0, double t1) {
    qc_trace_event_layer(t, name, cat, NULL, plugin, format, kernel, m, n, k, t0, t1);
}

void qc_trace_event_layer(qc_trace *t, const char *name, const char *cat, const char *layer, const char *plugin,
                          const char *format, const char *kernel, int64_t m, int64_t n, int64_t k, double t0,
                          double t1) {
    if (!t) return;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4096;
        trace_ev *ev = realloc(t->ev, cap * sizeof *ev);
        if (!ev) {
            t->failed = 1;
            return;
        }
        t->ev = ev;
        t->cap = cap;
    }
    trace_ev *e = &t->ev[t->n];
    *e = (trace_ev){dup_or_empty(name), dup_or_empty(cat), dup_or_empty(plugin), dup_or_empty(format),
                    dup_or_empty(kernel), dup_or_empty(layer), m, n, k, (t0 - t->t_open) * 1e6, (t1 - t0) * 1e6};
    if (!e->name || !e->cat || !e->plugin || !e->format || !e->kernel || !e->layer) {
        free(e->name), free(e->cat), free(e->plugin), free(e->format), free(e->kernel), free(e->layer);
        t->failed = 1;
        return;
    }
    t->n++;
}

size_t qc_trace_count(const qc_trace *t) { return t ? t->n : 0; }

int qc_trace_close(qc_trace *t) {
    if (!t) return 0;
    int rc = 0;
    FILE *f = fopen(t->path, "w");
    if (!f) {
        qc_log(QC_LOG_ERROR, "trace %s: cannot write: %s", t->path, strerror(errno));
        rc = -1;
    } else {
        /* streamed event by event: a long run has many, and json_dumps of one
         * big array would need them all twice in memory */
        fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"qcore %s\",\"complete\":%s},\n"
                   "\"traceEvents\":[",
                qc_version(), t->failed ? "false" : "true");
        for (size_t i = 0; i < t->n; i++) {
            const trace_ev *e = &t->ev[i];
            json_t *o = json_pack("{s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:f}}", "name",
                                  e->name, "cat", e->cat, "ph", "X", "ts", e->ts, "dur", e->dur, "pid", 1, "tid", 1,
                                  "args", "plugin", e->plugin, "format", e->format, "kernel", e->kernel, "layer",
                                  e->layer, "M", (json_int_t)e->m, "N", (json_int_t)e->n, "K", (json_int_t)e->k,
                                  "dur_us", e->dur);
            char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
            if (s) fprintf(f, "%s\n%s", i ? "," : "", s);
            free(s);
            json_decref(o);
        }
        fprintf(f, "]}\n");
        if (fclose(f) != 0) rc = -1;
        if (rc == 0)
            qc_log(QC_LOG_INFO, "trace: %zu events written to %s", t->n, t->path);
    }
    for (size_t i = 0; i < t->n; i++) {
        trace_ev *e = &t->ev[i];
        free(e->name), free(e->cat), free(e->plugin), free(e->format), free(e->kernel), free(e->layer);
    }
    free(t->ev);
    free(t->path);
    free(t);
    return rc;
}

static void to_hex(const uint8_t *d, char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = 0;
}

qc_status qc_sha256_buffer(const void *data, size_t len, char hex[65]) {
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, sizeof digest, digest);
    to_hex(digest, hex);
    return QC_OK;
}

qc_status qc_sha256_file(const char *path, char hex[65], char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        qc_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return QC_ERR_IO;
    }
    enum { CHUNK = 1 << 16 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        qc_errf(err, errlen, "%s: out of memory", path);
        return QC_ERR_NOMEM;
    }
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    size_t r;
    while ((r = fread(buf, 1, CHUNK, f)) > 0) sha256_update(&ctx, r, buf);
    int bad = ferror(f);
    fclose(f);
    free(buf);
    if (bad) {
        qc_errf(err, errlen, "%s: read error", path);
        return QC_ERR_IO;
    }
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof digest, digest);
    to_hex(digest, hex);
    return QC_OK;
}
