/* qcore/qcore.h - the embedding API used by the CLI, tests and bindings. */
#ifndef QCORE_QCORE_H
#define QCORE_QCORE_H

#include <stddef.h>
#include <stdint.h>

#include "qcore/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QCORE_VERSION_MAJOR 0
#define QCORE_VERSION_MINOR 1
#define QCORE_VERSION_PATCH 0
#define QCORE_VERSION_STRING "0.1.0"

const char *qc_version(void);

/* ---- logging ----------------------------------------------------------- */

/* Where log lines go.  Default: stderr, level WARN and more severe (INFO with
 * QCORE_VERBOSE=1).  The sink may be called from any thread. */
typedef void (*qc_log_sink)(qc_log_level level, const char *line, void *user);
void qc_set_log_sink(qc_log_sink sink, void *user);
void qc_set_log_level(qc_log_level max_level);

/* ---- configuration (qcore.ini) ----------------------------------------- */

typedef struct qc_config qc_config;
/* Parse an ini file.  A missing file is an error only when `required`. */
qc_config *qc_config_load(const char *path, int required, char *err, size_t errlen);
qc_config *qc_config_empty(void);
void qc_config_free(qc_config *c);
/* Value of `key` in `[section]`, or NULL.  Owned by the config. */
const char *qc_config_get(const qc_config *c, const char *section, const char *key);
/* Set (or override, e.g. from a command-line flag) a value. */
int qc_config_set(qc_config *c, const char *section, const char *key, const char *value);

/* ---- runtime and plugins ----------------------------------------------- */

typedef struct qc_runtime qc_runtime;

typedef struct qc_runtime_options {
    uint32_t struct_size;
    const qc_config *config;   /* borrowed; may be NULL */
    /* Extra plugin search path (colon-separated), searched first.  The full
     * order is: this, [plugins] path in qcore.ini, $QCORE_PLUGIN_PATH, the
     * build's plugin folder, the install's plugin folder. */
    const char *plugin_path;
    int skip_default_dirs;     /* 1: only plugin_path (tests) */
    int skip_env;              /* 1: ignore QCORE_PLUGIN_PATH */
} qc_runtime_options;

qc_runtime *qc_runtime_open(const qc_runtime_options *opt, char *err, size_t errlen);
void qc_runtime_close(qc_runtime *rt);

/* Load one plugin file explicitly.  On refusal returns non-zero, fills err
 * with "<file>: <reason>" and the runtime goes on. */
qc_status qc_runtime_load_plugin(qc_runtime *rt, const char *path, char *err, size_t errlen);

typedef struct qc_plugin_info {
    const char *path;          /* file it was loaded from */
    const char *id, *name, *version, *description;
    uint32_t abi_version;
    size_t n_formats, n_kernels;
    int builtin;               /* 1 for the core's own reference formats */
} qc_plugin_info;
size_t qc_plugin_count(const qc_runtime *rt);
int qc_plugin_get(const qc_runtime *rt, size_t i, qc_plugin_info *out);

/* Files the loader refused, with the reason ("<file>: <reason>"). */
size_t qc_plugin_refusal_count(const qc_runtime *rt);
const char *qc_plugin_refusal(const qc_runtime *rt, size_t i);
/* Folders searched, in order. */
size_t qc_plugin_dir_count(const qc_runtime *rt);
const char *qc_plugin_dir(const qc_runtime *rt, size_t i);

size_t qc_format_count(const qc_runtime *rt);
const qc_format_desc *qc_format_get(const qc_runtime *rt, size_t i);
const qc_format_desc *qc_format_find(const qc_runtime *rt, const char *name);
/* Id of the plugin that registered a format. */
const char *qc_format_plugin(const qc_runtime *rt, const char *name);

size_t qc_kernel_count(const qc_runtime *rt);
const qc_kernel_desc *qc_kernel_get(const qc_runtime *rt, size_t i);
const qc_kernel_desc *qc_kernel_find(const qc_runtime *rt, const char *id);

/* What a format still lacks, as a comma-separated list in buf ("" if
 * nothing): quantize, dequantize, reference kernel, GPU kernel. */
void qc_format_missing(const qc_runtime *rt, const qc_format_desc *f, char *buf, size_t len);

/* ---- eligibility (select) ---------------------------------------------- */

/* Is format `f` usable for problem `p` on the given backend?  `gpu` = 1 asks
 * for a CUDA kernel, 0 for the CPU reference.  Returns 1, or 0 with reason. */
int qc_select_format(const qc_runtime *rt, const qc_format_desc *f, const qc_problem *p, int gpu,
                     const qc_kernel_desc **kernel_out, qc_reason *why);
/* Kernel-level check (arch, M range, phase, alignment via its format). */
int qc_select_kernel(const qc_kernel_desc *k, const qc_format_desc *f, const qc_problem *p, int gpu,
                     qc_reason *why);

/* ---- calling kernels ---------------------------------------------------- */

/* A named argument for a kernel call; `value` points at the value (for a
 * pointer parameter, at the pointer), exactly as cuLaunchKernel wants. */
typedef struct qc_named_arg {
    const char *name;
    void *value;
} qc_named_arg;

/* Build the argument array for `k` from named arguments: argv[i] points at
 * the value of k->params[i].  Fails naming the first missing parameter. */
qc_status qc_kernel_bind(const qc_kernel_desc *k, const qc_named_arg *args, size_t n_args,
                         void **argv, size_t argv_cap, char *err, size_t errlen);
/* Call the C reference through libffi with the array cuLaunchKernel takes. */
qc_status qc_kernel_call_reference(const qc_kernel_desc *k, void **argv, char *err, size_t errlen);

/* ---- device ------------------------------------------------------------- */

typedef struct qc_device_info {
    int available;             /* 1 when a CUDA device was opened */
    char reason[256];          /* why not, when available == 0 */
    char name[128];
    int sm;                    /* major*10+minor */
    int sm_count;
    size_t mem_total, mem_free;
    int driver_version;        /* e.g. 13000 */
    int nvrtc_available;
    int nvrtc_major, nvrtc_minor;
    char nvrtc_reason[256];
    int device_count;
} qc_device_info;
/* Probe through dlopen of libcuda.so.1 and NVRTC.  Never fails hard: fills
 * `reason` instead.  Safe without a GPU or driver. */
void qc_device_probe(qc_device_info *out);

/* ---- policies ----------------------------------------------------------- */

typedef struct qc_policy qc_policy;

typedef struct qc_policy_limits {
    uint32_t struct_size;
    uint64_t instructions;     /* per call; 0 = default (10 million) */
    size_t memory_bytes;       /* Lua heap cap; 0 = default (64 MiB) */
    uint32_t wall_ms;          /* per call, C functions included; 0 = default (2000) */
} qc_policy_limits;

/* Load a policy script (text only) into its own sandbox.  NULL on error,
 * with file, line and reason in err. */
qc_policy *qc_policy_open(const char *path, const qc_policy_limits *lim, char *err, size_t errlen);
/* Same from a string; `chunkname` names it in messages. */
qc_policy *qc_policy_open_string(const char *source, size_t len, const char *chunkname,
                                 const qc_policy_limits *lim, char *err, size_t errlen);
void qc_policy_close(qc_policy *p);
const char *qc_policy_name(const qc_policy *p);
/* 1 when the last call was stopped by the instruction budget or the
 * wall-clock limit (or the worker died), as opposed to raising an error. */
int qc_policy_limit_hit(const qc_policy *p);

/* One candidate format as the policy sees it. */
typedef struct qc_policy_candidate {
    const char *format;
    int eligible;
    qc_reason reason;          /* why not, when eligible == 0 */
    double time_us;            /* measured time, < 0 when not measured */
    double bytes_per_weight;   /* resident, scales included */
} qc_policy_candidate;

/* One format's measured ceiling: the fastest rate its kernels reached at the
 * largest measured batch (TFLOP/s, or TOP/s for integer formats). */
typedef struct qc_policy_peak {
    const char *format;
    double tflops;
} qc_policy_peak;

typedef struct qc_policy_device {
    const char *name;          /* "cpu" for the reference backend */
    int sm;                    /* 0 on the CPU */
    int sm_count;
    double mem_bandwidth_gbs;  /* measured copy bandwidth, 0 when unknown */
    double bf16_tflops, fp8_tflops, int8_tops;
    /* every measured format's ceiling, weight-only formats included (their
     * dequantization makes it lower than bf16's); NULL / 0 when nothing was
     * measured.  Owned by whoever filled the struct, valid for the call. */
    const qc_policy_peak *peaks;
    size_t n_peaks;
} qc_policy_device;

typedef struct qc_policy_layer {
    const char *name;          /* e.g. "blk.3.ffn_down" */
    const char *role;          /* attn.q attn.k attn.v attn.o mlp.gate mlp.up mlp.down lm_head */
    int index;                 /* block index, -1 for lm_head */
    int n_layers;              /* blocks in the model */
    int64_t n, k;
} qc_policy_layer;

typedef struct qc_policy_query {
    uint32_t struct_size;
    const qc_policy_layer *layer;
    qc_phase phase;
    int64_t batch;             /* measured rows (tokens) in this step */
    const qc_policy_device *device;
    const qc_policy_candidate *candidates;
    size_t n_candidates;
} qc_policy_query;

/* Ask the policy's choose(): the chosen format name goes to `out` and the
 * policy's own note (optional second return value) to `note`.  Returns
 * QC_OK, or an error (script raised, exceeded a limit, or returned something
 * that is not a string) with the reason in err: the caller then falls back
 * and shows it. */
qc_status qc_policy_choose(qc_policy *p, const qc_policy_query *q, char *out, size_t out_len,
                           char *note, size_t note_len, char *err, size_t errlen);

/* Ask prepare(layer, device, formats): which formats to prepare at load.
 * Writes up to `cap` names (each up to 64 bytes) into names[]. */
qc_status qc_policy_prepare(qc_policy *p, const qc_policy_layer *layer, const qc_policy_device *dev,
                            const char *const *formats, size_t n_formats, char (*names)[64],
                            size_t cap, size_t *n_out, char *err, size_t errlen);

/* Ask kv_cache(device, candidates): which KV cache format to use. */
qc_status qc_policy_kv_format(qc_policy *p, const qc_policy_device *dev,
                              const qc_policy_candidate *cands, size_t n, char *out, size_t out_len,
                              char *err, size_t errlen);


/* ---- model shapes (HF config.json) ------------------------------------- */

typedef struct qc_model_shape {
    char model_type[32];       /* "llama", "mistral", "qwen2", "qwen3" */
    char architecture[64];     /* architectures[0] */
    int hidden, intermediate, n_layers, n_heads, n_kv_heads, head_dim, vocab;
    int tied_embeddings;
    int max_positions;
    double rope_theta, rms_eps;
} qc_model_shape;

/* Read the shape fields of a Hugging Face config.json, checked for range. */
qc_status qc_model_shape_load(const char *path, qc_model_shape *out, char *err, size_t errlen);

/* The linear layers of a Llama-family model, in execution order, with roles
 * (attn.q attn.k attn.v attn.o mlp.gate mlp.up mlp.down lm_head). */
typedef struct qc_layer_list {
    qc_policy_layer *layers;
    char (*names)[48];         /* storage for layers[i].name */
    size_t n;
} qc_layer_list;
qc_layer_list *qc_model_linear_layers(const qc_model_shape *m);
void qc_layer_list_free(qc_layer_list *l);

/* ---- dispatch table ---------------------------------------------------- */

typedef struct qc_dispatch qc_dispatch;

typedef struct qc_dispatch_options {
    uint32_t struct_size;
    int gpu;                   /* 1: choose among CUDA kernels; 0: C reference */
    const qc_policy_device *device;
    const int64_t *decode_batches;  /* buckets; NULL = 1 2 4 8 16 32 64 128 256 */
    size_t n_decode;
    const int64_t *prefill_batches; /* NULL = 128 512 2048 8192 */
    size_t n_prefill;
    /* Optional, for a backend that knows more than the kernels' own checks
     * (the GPU engine): called for every candidate that passed them and the
     * policy's prepare list.  Returns 0 to refuse it with `why`, else 1, and
     * may set *time_us (measured time, left < 0 when not measured). */
    int (*candidate)(void *ctx, size_t layer, const qc_format_desc *f, const qc_problem *p, double *time_us,
                     qc_reason *why);
    void *candidate_ctx;
    const char *backend;            /* name in printed tables; NULL = "cuda" or "cpu reference" */
} qc_dispatch_options;

/* Ask the policy (or, with policy NULL, the built-in preference order) for
 * every (layer, phase, batch bucket).  Policy failures and ineligible
 * answers become fallbacks with reasons; they never fail the build. */
qc_dispatch *qc_dispatch_build(const qc_runtime *rt, qc_policy *policy, const qc_layer_list *layers,
                               const qc_dispatch_options *opt, char *err, size_t errlen);
void qc_dispatch_free(qc_dispatch *d);

typedef struct qc_dispatch_entry {
    size_t layer;              /* index into the layer list */
    qc_phase phase;
    int64_t batch;
    char format[32];           /* what runs */
    char wanted[32];           /* what the policy asked for */
    const qc_kernel_desc *kernel;
    qc_reason fallback;        /* code "" when wanted == format */
    char note[128];            /* the policy's own explanation */
} qc_dispatch_entry;

size_t qc_dispatch_count(const qc_dispatch *d);
const qc_dispatch_entry *qc_dispatch_get(const qc_dispatch *d, size_t i);
/* The entry for a layer at a measured batch: the smallest bucket >= batch
 * (the largest bucket beyond it). */
const qc_dispatch_entry *qc_dispatch_lookup(const qc_dispatch *d, size_t layer, qc_phase phase, int64_t batch);
/* Print the table with layer groups folded, then each distinct fallback. */
void qc_dispatch_print(const qc_dispatch *d, void *file /* FILE* */);
/* Only the fallbacks, each distinct one once ("fallbacks: none" if none). */
void qc_dispatch_print_fallbacks(const qc_dispatch *d, void *file);
/* The policy's name as the table records it. */
const char *qc_dispatch_policy(const qc_dispatch *d);
const qc_layer_list *qc_dispatch_layers(const qc_dispatch *d);

/* ---- models and the CPU reference forward pass ------------------------- */

typedef struct qc_model qc_model;

typedef struct qc_model_options {
    uint32_t struct_size;
    const char *path;          /* a .gguf file, or a folder with config.json + safetensors */
    qc_policy *policy;         /* borrowed; NULL = bf16 everywhere unless `format` */
    /* One format for every linear layer, overriding the policy: "bf16",
     * "w4a16" (GGUF Q4_0/Q4_1 weights imported exactly), "w4a16:g128"
     * (re-quantized with group 128), "fp8", "fp8:block", "w8a8_int8",
     * "mxfp4", ...  The part after ':' is "g<N>" (group size) or a scheme. */
    const char *format;
    const char *kv_format;     /* "bf16" or a KV-cache format; NULL = the policy's */
    int max_context;           /* 0 = min(model's, 4096) */
    int threads;               /* 0 = all cores */
} qc_model_options;

qc_model *qc_model_open(qc_runtime *rt, const qc_model_options *o, char *err, size_t errlen);
void qc_model_close(qc_model *m);
const qc_model_shape *qc_model_shape_of(const qc_model *m);
const qc_dispatch *qc_model_dispatch(const qc_model *m);
const qc_layer_list *qc_model_layers(const qc_model *m);
/* The model's tokenizer (an internal type, see core/src/qc_tokenizer.h). */
struct qc_tokenizer *qc_model_tokenizer(const qc_model *m);

/* The KV cache format in use ("bf16", "kv_fp8"). */
const char *qc_model_kv_format(const qc_model *m);
/* Forget the KV cache (a new sequence starts at position 0). */
void qc_model_reset(qc_model *m);
size_t qc_model_position(const qc_model *m);
/* Kernel calls (linear layers and attention) the forward passes made so
 * far: with QCORE_TRACE=FILE, the trace holds one event for each. */
size_t qc_model_kernel_calls(const qc_model *m);
/* Run n tokens at the current position and append them to the KV cache.
 * logits receives [n, vocab] when all_logits, else the last row only. */
qc_status qc_model_forward(qc_model *m, const int32_t *tokens, size_t n, float *logits, int all_logits,
                           char *err, size_t errlen);
/* Write the run manifest (seed 003 section 31) as JSON to `path`: model
 * file(s) with SHA-256, tokenizer source, per-layer-group recipe (format,
 * scheme, group, dtypes, imported or re-quantized, pack version), KV format,
 * runtime (qcore version and commit, plugin versions, device arch, NVRTC and
 * driver versions), policy file with SHA-256, every distinct fallback, and
 * `results_json` (a JSON object text, e.g. measured perplexity or speed;
 * may be NULL) under "results". */
qc_status qc_model_write_manifest(const qc_model *m, const char *path, const char *command, const char *policy_path,
                                  const char *results_json, char *err, size_t errlen);
/* Resident bytes by category and per format, and the distinct fallbacks. */
void qc_model_print_memory(const qc_model *m, void *file /* FILE* */);
/* "w4a16 x210, bf16 x1" style summary of the formats the decode step uses
 * at batch 1 (per layer role group). */
void qc_model_print_formats(const qc_model *m, qc_phase phase, int64_t batch, void *file);

/* ---- quantization error metrics ---------------------------------------- */

typedef struct qc_quant_metrics {
    double saturated_ratio;    /* elements clipped to the largest code (from the format), -1 if unknown */
    double code_utilization;   /* fraction of the format's codes that occur, -1 if unknown */
    double mse;                /* mean squared error of dequantize(quantize(w)) against w */
    double cosine;             /* cosine similarity of the two */
    double sqnr_db;            /* 10 log10(sum w^2 / sum (w - w')^2); inf when exact */
    double effective_bits;     /* (weights + scales + zeros) bytes * 8 / (n k), padding excluded */
    size_t resident_bytes;     /* every buffer, padding included */
    size_t padding_bytes;
} qc_quant_metrics;

/* Measure a packed weight against its source w[n, k]. */
qc_status qc_quant_measure(const qc_format_desc *f, const qc_packed_weight *pw, const float *w, qc_quant_metrics *out,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* QCORE_QCORE_H */
