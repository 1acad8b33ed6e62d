/* qc_engine_policy.h - the GPU engine's dispatch plan: policy, measured timings (cached on disk), fallbacks (internal). */
#ifndef QC_ENGINE_POLICY_H
#define QC_ENGINE_POLICY_H

#include <stdio.h>

#include "qc_gpu.h"
#include "qcore/qcore.h"

/*
 * The engine runs four linears per block (q|k|v and gate|up fused) and the
 * head.  Its layer list has one entry per engine linear, in that order:
 * block b's qkv, o, gate_up, down are layers 4b .. 4b+3, the head is layer
 * 4 * n_layers.  The policy is asked with the role of the first part of a
 * fused weight (attn.q for q|k|v, mlp.gate for gate|up) and the fused shape.
 */
#define QC_EPLAN_QKV 0
#define QC_EPLAN_O 1
#define QC_EPLAN_GATE_UP 2
#define QC_EPLAN_DOWN 3

typedef struct qc_eplan qc_eplan;

/* How the engine's timer measures (part of the disk cache's key): weights stream from HBM as in a
 * model's step, so L2 is flushed before each launch; the median of the launches counts. */
#define QC_EPLAN_TIMING_METHOD "L2 flushed before each of 5 launches, median; fused quantizers not counted"

/* Times `f`'s kernel (the one the engine picks for each m) on an [n, k]
 * weight: us[i] for ms[i], or us[i] < 0 with why[i] saying why nothing ran
 * (no kernel for that m, a compile failure); kernel[i] names what ran.
 * Returns an error only when the measurement could not be made at all. */
typedef qc_status (*qc_eplan_timer)(void *ctx, const qc_format_desc *f, int64_t n, int64_t k, const int64_t *ms,
                                    size_t n_ms, double *us, char (*kernel)[64], qc_reason *why, char *err,
                                    size_t errlen);
/* Can the engine hold layer `layer` in `f` (a quantizer, the model's own
 * weights in that format, the head in bf16 only)?  0 with why when not. */
typedef int (*qc_eplan_can_hold)(void *ctx, size_t layer, const qc_format_desc *f, qc_reason *why);

typedef struct qc_eplan_options {
    qc_runtime *rt;
    const qc_model_shape *shape;
    qc_policy *policy;              /* required */
    int sm, sm_count;
    const char *device_name;
    double bandwidth_gbs;           /* measured copy bandwidth, 0 = unknown */
    int max_seqs, max_step;         /* decode buckets 1..max_seqs, prefill 1..max_step (powers of two) */
    qc_eplan_timer timer;
    qc_eplan_can_hold can_hold;
    void *ctx;
    const char *cache_dir;          /* timings-<hash>.json goes here; NULL = no disk cache */
} qc_eplan_options;

/* Ask prepare() for every layer, time each prepared format's kernels per
 * distinct shape and bucket (from the disk cache when it matches this device
 * and these kernel sources), then build the table.  NULL with err only when
 * nothing can be built (memory, no layer list); policy failures become
 * fallbacks. */
qc_eplan *qc_eplan_build(const qc_eplan_options *o, char *err, size_t errlen);
void qc_eplan_free(qc_eplan *p);

const qc_dispatch *qc_eplan_table(const qc_eplan *p);
const qc_layer_list *qc_eplan_layers(const qc_eplan *p);
const qc_policy_device *qc_eplan_device(const qc_eplan *p);
/* Bumped by every rebuild: callers recompute what they derived from the table. */
int qc_eplan_generation(const qc_eplan *p);
/* Distinct formats the table runs for layer `li`, in first-use order. */
size_t qc_eplan_layer_formats(const qc_eplan *p, size_t li, const qc_format_desc **out, size_t cap);
/* After the weights are loaded: from now on a format that is not resident
 * for a layer is refused there (code not_prepared), so a rebuild never asks
 * for weights the device does not hold.  resident(ctx, li, f) says. */
void qc_eplan_freeze(qc_eplan *p, int (*resident)(void *ctx, size_t li, const qc_format_desc *f));
/* A run-time failure of `format` on layer `li` (e.g. its kernel failed to
 * load for an M between buckets): recorded once, the format refused from now
 * on for that layer and every other layer of the same shape (the same kernel
 * would fail there), the table rebuilt once (the policy asked again).
 * Returns the build's status. */
qc_status qc_eplan_fail(qc_eplan *p, size_t li, const char *format, const char *code, const char *text, char *err,
                        size_t errlen);
/* Forget the engine callbacks (the plan outlives what ctx points at): no
 * rebuild afterwards can check holdings again. */
void qc_eplan_detach(qc_eplan *p);
/* Bytes the table's formats would occupy per format, at each format's
 * effective bits (for a plan without weights). */
void qc_eplan_print_resident_estimate(const qc_eplan *p, FILE *f);
/* How the timings were got: "measured", "disk cache <file>", "mixed". */
const char *qc_eplan_timing_source(const qc_eplan *p);

/* The measured time of `format` at (n, k, m), < 0 when not measured. */
double qc_eplan_time(const qc_eplan *p, const char *format, int64_t n, int64_t k, int64_t m);

/* Device line, the folded table, every fallback once (the table's and the
 * run-time ones). */
void qc_eplan_print(const qc_eplan *p, FILE *f);
void qc_eplan_print_fallbacks(const qc_eplan *p, FILE *f);
/* Each distinct fallback as JSON objects appended to `arr` (a json_t *). */
void qc_eplan_fallbacks_json(const qc_eplan *p, void *arr);

/* The engine's layer list for a shape (4 per block + the head). */
qc_layer_list *qc_eplan_layer_list(const qc_model_shape *s);

/* Hash of what decides kernel timings: device name and sm, the CUDA source
 * of every registered linear kernel, qcore's version (hex[65]). */
void qc_eplan_kernel_hash(const qc_runtime *rt, const char *device, int sm, char hex[65]);

#endif
