/* qc_report.h - Chrome trace events and run manifests (internal). */
#ifndef QC_REPORT_H
#define QC_REPORT_H

#include "qc_util.h"

/* A trace: events kept in memory, written as Chrome trace-event JSON (open
 * it in Perfetto or chrome://tracing) when closed. */
typedef struct qc_trace qc_trace;

/* Open a trace that will be written to `path`; NULL (with a warning) when
 * memory is short.  Timestamps are microseconds since the trace opened. */
qc_trace *qc_trace_open(const char *path);
/* One complete event.  Strings are copied; t0/t1 from qc_now_seconds(). */
void qc_trace_event(qc_trace *t, const char *name, const char *cat, const char *plugin, const char *format,
                    const char *kernel, int64_t m, int64_t n, int64_t k, double t0, double t1);
/* The same with the layer it ran for ("blk.3.attn.qkv"; "" when none). */
void qc_trace_event_layer(qc_trace *t, const char *name, const char *cat, const char *layer, const char *plugin,
                          const char *format, const char *kernel, int64_t m, int64_t n, int64_t k, double t0,
                          double t1);
size_t qc_trace_count(const qc_trace *t);
/* Write the file and free the trace; returns 0, or -1 with a logged error. */
int qc_trace_close(qc_trace *t);

/* SHA-256 of a file as 64 hex characters into hex[65]. */
qc_status qc_sha256_file(const char *path, char hex[65], char *err, size_t errlen);
qc_status qc_sha256_buffer(const void *data, size_t len, char hex[65]);

#endif
