/* qc_manifest.h - run manifests of the GPU engine (bench) and the dispatch-table recipe shared with the CPU's (internal). */
#ifndef QC_MANIFEST_H
#define QC_MANIFEST_H

#include "qc_gpu.h"
#include "qc_nvrtc.h"
#include "qcore/qcore.h"

struct qc_engine;

/* What a manifest records (seed 003 section 31).  Every pointer may be NULL
 * except rt; without an engine, `table` (a CPU model's) gives the recipe. */
typedef struct qc_manifest_info {
    const char *command;          /* "bench", "run", "eval" */
    const char *model_path;       /* a model file or folder: hashed (SHA-256) file by file */
    const char *model_config;     /* synthetic weights from this config.json (hashed) */
    int synthetic;
    const qc_model_shape *shape;
    qc_runtime *rt;
    const struct qc_engine *engine;
    qc_gpu *gpu;
    qc_nvrtc *nvrtc;
    const qc_dispatch *table;
    const char *policy_path;      /* hashed */
    const char *format;           /* one format for every layer, when no policy */
    const char *kv_format;
    const char *perf_results;     /* links: result files written by this command */
    const char *quality_results;
    const char *trace;            /* QCORE_TRACE file */
} qc_manifest_info;

qc_status qc_manifest_write(const char *path, const qc_manifest_info *mi, char *err, size_t errlen);

/* The dispatch table as the recipe's per-layer part (a json_t * array): one
 * row per run of consecutive blocks whose linear of a role decides the
 * same, each with its decode and prefill buckets as ranges -> format. */
void *qc_manifest_dispatch_json(const qc_dispatch *d);

#endif
