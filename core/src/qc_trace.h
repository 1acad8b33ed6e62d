/* qc_trace.h - QCORE_TRACE on the GPU: every launch timed with CUDA events, one trace event each (internal). */
#ifndef QC_TRACE_H
#define QC_TRACE_H

#include "qc_gpu.h"
#include "qc_report.h"

/*
 * Attached to a context through its launch hook: each launch records a CUDA
 * event before and after it on the stream; flush() waits for the stream and
 * turns the pairs into trace events (name = kernel id; args: plugin, format,
 * layer, M, N, K, dur).  Costs two event records per launch and a stream
 * synchronisation per flush; CUDA graphs must be off (a captured launch
 * records nothing), which the engine does in trace mode.
 */
typedef struct qc_gpu_tracer qc_gpu_tracer;

qc_gpu_tracer *qc_gpu_tracer_open(qc_gpu *g, const qc_runtime *rt, qc_trace *t);
/* What the next launches run for: a layer name and an event category ("linear", "kernel"). */
void qc_gpu_tracer_context(qc_gpu_tracer *tr, const char *layer, const char *cat);
/* Wait for the stream and write the pending launches as events. */
qc_status qc_gpu_tracer_flush(qc_gpu_tracer *tr, char *err, size_t errlen);
/* Launches written as events so far. */
size_t qc_gpu_tracer_events(const qc_gpu_tracer *tr);
/* Flush, detach from the context, free (the trace itself stays open). */
void qc_gpu_tracer_close(qc_gpu_tracer *tr);

#endif
