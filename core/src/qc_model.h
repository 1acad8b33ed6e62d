/* qc_model.h - a loaded Llama-family model: weights per prepared format, KV cache (internal). */
#ifndef QC_MODEL_H
#define QC_MODEL_H

#include "qc_internal.h"

struct qc_gguf;
struct qc_safetensors;
struct qc_tokenizer;
struct qc_trace;

/* How rotary embeddings pair dimensions: GGUF llama files store Q/K rows
 * permuted for adjacent pairs (2i, 2i+1); HF checkpoints and GGUF qwen2/3
 * pair i with i + d/2. */
typedef enum qc_rope_kind { QC_ROPE_ADJACENT = 0, QC_ROPE_HALVES = 1 } qc_rope_kind;

/* Where a tensor's source bytes are (mapped, not copied). */
typedef struct qc_tensor_src {
    const char *name;
    const void *data;
    size_t bytes;
    int from_gguf;          /* 1: ggml_type below; 0: safetensors dtype */
    uint32_t ggml_type;
    qc_dtype dtype;
    int64_t n, k;           /* [n, k]; vectors have n == 1 */
} qc_tensor_src;

/* One format prepared for one linear layer. */
typedef struct qc_prepared {
    const qc_format_desc *fmt;
    qc_packed_weight pw;
    float *deq;             /* [n, k] exact dequantization, for the float GEMM */
    int imported;           /* 1 when imported exactly from the file's own blocks */
    const qc_kernel_desc *kernel; /* the reference kernel that defines this weight's product */
} qc_prepared;

#define QC_MAX_PREPARED 4
typedef struct qc_linear {
    const qc_policy_layer *info;
    qc_tensor_src src;
    float *bias;            /* [n] or NULL (qwen2 q/k/v) */
    qc_prepared prep[QC_MAX_PREPARED];
    int n_prep;
} qc_linear;

typedef struct qc_block {
    float *attn_norm, *ffn_norm; /* [hidden] */
    float *q_norm, *k_norm;      /* [head_dim] (qwen3) or NULL */
    qc_linear lin[7];            /* q k v o gate up down */
} qc_block;

struct qc_model {
    qc_runtime *rt;
    qc_model_shape shape;
    qc_rope_kind rope;
    float *inv_freq;             /* [head_dim/2] rotary inverse frequencies, scaling applied */
    struct qc_gguf *gguf;
    struct qc_safetensors *st;
    struct qc_tokenizer *tok;
    float *tok_embd;             /* [vocab, hidden] f32 */
    float *output_norm;
    qc_block *blocks;
    qc_linear lm_head;
    qc_layer_list *layers;
    qc_dispatch *dispatch;
    char path[1024];
    struct qc_trace *trace;      /* QCORE_TRACE=FILE: one event per kernel */
    size_t kernel_calls;         /* linear and attention calls so far (one trace event each) */
    char kv_format[32];
    /* a KV-cache format other than bf16: its C reference write and read
     * ("<format>.write_ref" / ".read_ref", scale 1.0 per tensor, variant 0),
     * applied to every K and V row as it enters the cache */
    const qc_kernel_desc *kv_write_ref, *kv_read_ref;
    int max_context;
    int threads;
    int64_t group_notes[8];      /* K values already warned about a smaller group */
    int n_group_notes;
    /* KV cache: [layer][pos][kv_heads*head_dim], holding the values the
     * cache format stores, decoded to f32 */
    float *k_cache, *v_cache;
    size_t pos;
    size_t kv_bytes_resident;    /* what the cache format needs per the ledger */
    /* scratch for one forward of up to `scratch_rows` tokens */
    size_t scratch_rows;
    float *s_x, *s_h, *s_q, *s_k, *s_v, *s_att, *s_gate, *s_up, *s_act, *s_scores;
};

/* qc_cpu.c: the forward pass */
qc_status qc_cpu_forward(qc_model *m, const int32_t *tokens, size_t n, float *logits, int all_logits, char *err,
                         size_t errlen);
qc_status qc_cpu_reserve(qc_model *m, size_t rows, char *err, size_t errlen);
void qc_cpu_free_scratch(qc_model *m);

#endif
