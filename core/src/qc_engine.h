/* qc_engine.h - the GPU forward pass: device weights, paged KV cache, batched steps, CUDA graphs (internal). */
#ifndef QC_ENGINE_H
#define QC_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qc_gpu.h"
#include "qcore/qcore.h"

/* Tokens per KV-cache block. */
#define QC_KV_BLOCK 16

typedef struct qc_engine qc_engine;

typedef struct qc_engine_options {
    uint32_t struct_size;
    const qc_model_shape *shape;  /* required; copied */
    /* Weights from a loaded model (its bf16 weights and norms are uploaded),
     * or NULL: synthetic weights made on the GPU from `seed` (random, never
     * zeros; scaled so that activations stay in range through every layer). */
    qc_model *model;
    uint64_t seed;
    const char *format;           /* linear format for every layer; NULL = "bf16" */
    int max_seqs;                 /* sequences resident at once; 0 = 64 */
    int max_context;              /* tokens per sequence; 0 = min(shape's, 4096) */
    int max_step_tokens;          /* tokens in one step (prefill chunk + decodes); 0 = 2048 */
    /* Bytes for the paged KV cache; 0 = what is free after weights and
     * activations, minus a reserve.  Capacity in tokens follows from the KV
     * format's bytes per token. */
    size_t kv_bytes;
    int graphs;                   /* 1: decode steps replay CUDA graphs per batch bucket */
    /* Issue 9: per-layer formats.  NULL: `format` for every layer.  Else the
     * policy's prepare() and choose() decide per (layer, phase, power-of-two
     * bucket of M) from this device's measured timings (docs/policy.md);
     * `format` is ignored and the head stays bf16. */
    qc_policy *policy;
    double bandwidth_gbs;         /* copy bandwidth handed to the policy; 0 = measured here */
    /* The KV cache format: NULL or "bf16" = the core's bf16 cache, else a
     * registered QC_FORMAT_KV_CACHE format with the GPU kernels of the
     * contract in qcore/plugin.h ("kv_fp8").  Its scales: kv_variant (the
     * format's variant id, 0 = its default: kv_fp8 E4M3 with one scale per
     * K and per V cache of each layer) and kv_k_scale / kv_v_scale (0 = 1.0:
     * E4M3 then holds |x| <= 448 at a relative step of 2^-4, vLLM's default
     * without checkpoint scales; no calibration pass yet). */
    const char *kv_format;
    uint32_t kv_variant;
    float kv_k_scale, kv_v_scale;
} qc_engine_options;

/* Upload or make the weights, allocate activations and the KV cache (all
 * through the ledger), compile and load every kernel.  NULL with a message
 * naming what failed (an allocation says bytes asked and free). */
qc_engine *qc_engine_create(qc_runtime *rt, qc_gpu *g, qc_nvrtc *nv, const qc_engine_options *o, char *err,
                            size_t errlen);
void qc_engine_destroy(qc_engine *e);

/* A new sequence (no tokens yet): its id, or -1 when max_seqs are open. */
int qc_engine_seq_open(qc_engine *e);
/* Free its KV blocks. */
void qc_engine_seq_close(qc_engine *e, int seq);
size_t qc_engine_seq_len(const qc_engine *e, int seq);

/* One forward step over several sequences: sequence seqs[i] gets
 * n_tokens[i] new tokens (a prompt chunk, or 1 when decoding), taken in
 * order from `tokens`.  Outputs (either may be NULL):
 *   logits: [sum n_tokens, vocab] when all_logits, else [n_seqs, vocab]
 *           (the last token of each sequence), f32 on the host;
 *   next:   [n_seqs] greedy next token of each sequence (argmax, on the GPU).
 * Fails (leaving every sequence as it was) when a sequence would exceed
 * max_context, the KV cache has no free block, or a token is out of range. */
typedef struct qc_engine_batch {
    int n_seqs;
    const int *seqs;
    const int *n_tokens;
    const int32_t *tokens;
    int all_logits;
    float *logits;
    int32_t *next;
} qc_engine_batch;
qc_status qc_engine_step(qc_engine *e, const qc_engine_batch *b, char *err, size_t errlen);

typedef struct qc_engine_stats {
    size_t weight_bytes;          /* resident: weights + scales + zeros + padding */
    size_t step_weight_bytes;     /* what one decode step reads: every linear layer and the head
                                     (not the embedding table, of which it reads one row) */
    size_t kv_bytes;              /* resident KV cache */
    size_t kv_bytes_per_token;    /* all layers, K and V */
    size_t kv_capacity_tokens;    /* blocks * QC_KV_BLOCK (block 0 excluded) */
    size_t kv_budget_tokens;      /* what the KV budget would hold before the cache is capped at
                                     max_seqs x max_context (the capacity a server would get) */
    size_t kv_blocks_free;
    int graphs_captured;
    int grid_dep;                 /* 1: QC_KERNEL_GRID_DEP kernels launch with programmatic serialization */
    uint64_t launches;            /* kernel launches since the engine was made (graph replays not counted) */
    size_t trace_events;          /* events written to QCORE_TRACE so far (one per launch) */
    const char *kv_format;        /* "bf16" or the KV format's name */
    size_t kv_elem_bytes;         /* bytes per cached element (2 bf16, 1 kv_fp8) */
    size_t kv_budget_bytes;       /* the KV byte budget (the option, or free memory less the reserve);
                                     kv_budget_tokens = budget / (16 x bytes/token) x 16: the zeroed
                                     padding block comes on top of the budget */
} qc_engine_stats;
void qc_engine_get_stats(const qc_engine *e, qc_engine_stats *out);

/* The KV cache's format and scales, for run manifests: what was asked
 * (options) and where the scales came from. */
typedef struct qc_engine_kv_info {
    const char *format;           /* "bf16" or the KV format's name */
    size_t elem_bytes;
    uint32_t variant;             /* the format's variant id (0 for bf16) */
    float k_scale, v_scale;       /* every layer's and kv head's scale (1 for bf16) */
    const char *scale_source;     /* "none" (bf16), "default 1.0", "option" */
} qc_engine_kv_info;
void qc_engine_get_kv_info(const qc_engine *e, qc_engine_kv_info *out);

/* Which kernel ran for each linear layer role at a step size (one line per
 * role group) - for `qcore bench` and `inspect`. */
void qc_engine_print_kernels(const qc_engine *e, FILE *f);

/* With a policy: its plan (dispatch table, timings, fallbacks), else NULL. */
struct qc_eplan;
const struct qc_eplan *qc_engine_plan(const qc_engine *e);
/* The plan alone (timings and table, no weights): for `qcore inspect` on a
 * GPU.  Free it with qc_eplan_free. */
struct qc_eplan *qc_engine_plan_only(qc_runtime *rt, qc_gpu *g, qc_nvrtc *nv, const qc_engine_options *o, char *err,
                                     size_t errlen);
/* Resident bytes of the linear weights per format (with a policy, a layer
 * may hold several), then the head. */
void qc_engine_print_resident(const qc_engine *e, FILE *f);
/* The formats per layer group for the manifest: a JSON array (json_t *),
 * one row per run of blocks whose linear of a role holds the same formats. */
void *qc_engine_recipe_json(const qc_engine *e);
/* Kernel ids each linear role has used so far (JSON array, json_t *). */
void *qc_engine_kernels_json(const qc_engine *e);

#endif
