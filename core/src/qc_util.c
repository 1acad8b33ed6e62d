/* qc_util.c - formatting, logging, allocation and file helpers for the core. */
#define _POSIX_C_SOURCE 200809L
#include "qc_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void qc_errf(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

void qc_strlcpy(char *dst, const char *src, size_t len) {
    if (!dst || !len) return;
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

void qc_reason_set(qc_reason *r, const char *code, const char *fmt, ...) {
    if (!r) return;
    qc_strlcpy(r->code, code, sizeof r->code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
}

/* ---- logging ---- */

static qc_log_sink g_sink;
static void *g_sink_user;
static int g_level = -1; /* -1: not decided yet (env read lazily) */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

void qc_set_log_sink(qc_log_sink sink, void *user) {
    pthread_mutex_lock(&g_log_mu);
    g_sink = sink;
    g_sink_user = user;
    pthread_mutex_unlock(&g_log_mu);
}

void qc_set_log_level(qc_log_level max_level) { g_level = (int)max_level; }

static int log_level(void) {
    if (g_level < 0) {
        const char *v = getenv("QCORE_VERBOSE");
        g_level = (v && *v && strcmp(v, "0") != 0) ? QC_LOG_DEBUG : QC_LOG_WARN;
    }
    return g_level;
}

void qc_vlog(qc_log_level level, const char *prefix, const char *fmt, va_list ap) {
    if ((int)level > log_level()) return;
    static const char *names[] = {"error", "warning", "info", "debug"};
    char line[1024];
    int off = snprintf(line, sizeof line, "qcore: %s%s%s%s: ", names[level], prefix ? " [" : "",
                       prefix ? prefix : "", prefix ? "]" : "");
    if (off < 0) off = 0;
    if ((size_t)off < sizeof line) vsnprintf(line + off, sizeof line - (size_t)off, fmt, ap);
    pthread_mutex_lock(&g_log_mu);
    if (g_sink)
        g_sink(level, line, g_sink_user);
    else
        fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&g_log_mu);
}

void qc_log(qc_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qc_vlog(level, NULL, fmt, ap);
    va_end(ap);
}

/* ---- memory ---- */

void *qc_aligned_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

void qc_aligned_free(void *p) { free(p); }

void qc_sbuf_printf(qc_sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        size_t avail = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = b->data ? vsnprintf(b->data + b->len, avail, fmt, ap) : -2;
        va_end(ap);
        if (n == -1) { b->failed = 1; return; }
        if (n >= 0 && (size_t)n < avail) { b->len += (size_t)n; return; }
        size_t need = b->len + (n > 0 ? (size_t)n : 0) + 1;
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < need) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) { b->failed = 1; return; }
        b->data = d;
        b->cap = cap;
        if (b->len == 0) b->data[0] = 0;
    }
}

void qc_sbuf_free(qc_sbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *qc_read_file(const char *path, size_t max_bytes, size_t *len_out, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { qc_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        qc_errf(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        qc_errf(err, errlen, "%s: %lld bytes, more than the limit of %zu", path, (long long)st.st_size,
                max_bytes);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) { qc_errf(err, errlen, "%s: out of memory reading %zu bytes", path, n); fclose(f); return NULL; }
    if (n && fread(buf, 1, n, f) != n) {
        qc_errf(err, errlen, "%s: short read", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (len_out) *len_out = n;
    return buf;
}

double qc_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- names ---- */

const char *qc_dtype_name(qc_dtype t) {
    static const char *n[] = {"none", "f32", "f16", "bf16", "i8", "u8", "i4", "u4", "i32",
                              "f8e4m3", "f8e5m2", "f4e2m1", "e8m0", "f64", "i64"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}

const char *qc_granularity_name(qc_granularity g) {
    static const char *n[] = {"none", "tensor", "channel", "group", "block", "token", "head"};
    return (unsigned)g < sizeof n / sizeof n[0] ? n[g] : "?";
}

const char *qc_phase_name(qc_phase p) {
    return p == QC_PHASE_PREFILL ? "prefill" : p == QC_PHASE_DECODE ? "decode" : "any";
}

const char *qc_mem_category_name(qc_mem_category c) {
    static const char *n[] = {"weights", "scales", "zeros", "padding", "kv", "activations", "workspace",
                              "graph_pools"};
    return (unsigned)c < sizeof n / sizeof n[0] ? n[c] : "?";
}

void qc_arch_range_str(qc_arch_range r, char *buf, size_t len) {
    if (r.min_sm == 0 && r.max_sm == 0)
        qc_strlcpy(buf, "none", len);
    else if (r.max_sm >= QC_SM_ANY)
        qc_errf(buf, len, "sm_%u+", r.min_sm);
    else if (r.min_sm == r.max_sm)
        qc_errf(buf, len, "sm_%u", r.min_sm);
    else
        qc_errf(buf, len, "sm_%u-sm_%u", r.min_sm, r.max_sm);
}

const char *qc_version(void) { return QCORE_VERSION_STRING; }
