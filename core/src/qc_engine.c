/* qc_engine.c - the GPU forward pass of Llama-family models: device weights, paged KV cache, batched steps, CUDA graphs. */
#include "qc_engine.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_engine_policy.h"
#include "qc_internal.h"
#include "qc_kernels_attn.h"
#include "qc_kernels_engine.h"
#include "qc_model.h"
#include "qc_trace.h"
#include "qc_util.h"

/*
 * One step runs, per layer: add+rmsnorm, the fused q|k|v linear, q/k
 * post-processing with the KV-cache write, attention over the paged cache,
 * the o linear, add+rmsnorm, the fused gate|up linear, swiglu, the down
 * linear (the residual add is folded into the next rmsnorm).  Linear
 * kernels are picked per step size among the format's registered kernels;
 * the others are core kernels found by id.
 *
 * Block 0 of the KV cache is never handed to a sequence: padding rows of a
 * CUDA-graph bucket write nowhere (slot -1) and read that zeroed block.
 */

#define MAX_ARGS 32
#define KCACHE 8 /* kernel choices remembered per linear (by m): every graph bucket */
#define MAX_BUCKETS 16

typedef struct eng_choice {
    int64_t m;
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
    int wants_bf16; /* takes "x.bf16" rather than "x" */
    /* W8A8 kernels take quantized activations ("xq", "xs"): the format's
       activation quantizer runs first, into the engine's workspace */
    const qc_kernel_desc *quant;
    qc_gpu_fn quant_fn;
    /* the quantizer's recipe when the core may write xq/xs from the kernel
       producing x instead (QC_FUSE_*; qc_fuse_decide), else QC_FUSE_NONE */
    int fuse;
} eng_choice;

typedef struct eng_linear {
    const char *role;       /* "attn.qkv", ... for reports */
    int64_t n, k;
    const qc_format_desc *fmt;
    uint32_t group_size, scheme;
    qc_gpu_buf bufs[QC_MAX_WEIGHT_BUFFERS];
    char buf_names[QC_MAX_WEIGHT_BUFFERS][40]; /* "w.<name>" */
    int n_bufs;
    eng_choice cache[KCACHE];
    int next_slot;
    /* with a policy (issue 9): the other formats resident for this layer,
     * and which one runs per phase (0 decode, 1 prefill) and power-of-two
     * bucket of M (0 = this one, i = alts[i - 1], -1 = none resident) */
    struct eng_linear *alts;
    int n_alts;
    int plan_layer; /* index in the plan's layer list; -1 without a policy */
    signed char pick[2][MAX_BUCKETS];
    int pick_gen;
    char name[32];  /* "blk.3.attn.qkv" (traces) */
} eng_linear;

typedef struct eng_layer {
    qc_gpu_buf attn_norm, ffn_norm, q_norm, k_norm, qkv_bias;
    eng_linear qkv, o, gate_up, down;
    qc_gpu_buf k_cache, v_cache; /* views into the engine's cache buffers (not owned) */
    qc_devptr k_scale, v_scale;  /* the layer's [kv_heads] KV scales in kv_scales (0 for bf16) */
} eng_layer;

typedef struct eng_kernel {
    const char *id;
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
} eng_kernel;

enum { K_EMBED, K_ADD_NORM, K_QKV, K_SWIGLU, K_CAST, K_FILL, K_ARGMAX, K_ATTN_DECODE, K_ATTN_REDUCE, K_ATTN_PREFILL,
       K_ADD_NORM_Q, K_SWIGLU_Q, K_CAST_Q, K_COUNT };

static const char *const KERNEL_IDS[K_COUNT] = {
    "core.embed_bf16", "core.add_rmsnorm", "core.qkv_rope_kv", "core.swiglu_ld",  "core.cast_bf16",
    "core.fill_random_bf16", "core.argmax",  "core.attn_decode", "core.attn_decode_reduce_bf16", "core.attn_prefill",
    "core.add_rmsnorm_quant", "core.swiglu_quant", "core.cast_quant",
};

typedef struct eng_graph {
    int bucket;
    qc_gpu_graph graph;
} eng_graph;

struct qc_engine {
    qc_runtime *rt;
    const qc_format_desc *fmt; /* of every layer's linears (the head stays bf16) */
    uint32_t group_size;       /* asked for with "<format>:g<N>"; 0 = the format's default */
    pthread_mutex_t upload_mu; /* weight uploads from the quantizing threads */
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_model_shape s;
    int sm;
    int rope_halves;
    int max_seqs, max_context, max_step, max_blocks; /* max_blocks per sequence */
    int64_t qkv_n, q_dim, kv_dim;
    eng_kernel kern[K_COUNT];
    eng_layer *layers;
    qc_gpu_buf embed, out_norm, inv_freq;
    eng_linear lm_head;
    int tied;
    /* the KV cache: [layer][block][kv_head][QC_KV_BLOCK][head_dim] bf16, K and V */
    qc_gpu_buf kc, vc;
    size_t n_blocks, kv_token_bytes, kv_budget_tokens, kv_budget_bytes;
    /* its format: NULL = bf16 (the core kernels), else a KV_CACHE format's kernels (plugin.h contract) */
    const qc_format_desc *kv_fmt;
    size_t kv_elem;               /* bytes per element */
    uint32_t kv_variant;
    float kv_k_scale, kv_v_scale;
    int kv_scale_option;          /* the scales came from the options */
    char kv_ids[4][64];           /* its kernel ids: qkv, decode, reduce, prefill */
    qc_gpu_buf kv_scales;         /* f32 [2 (K, V)][layers][kv_heads] */
    int *free_blocks;
    size_t n_free;
    /* sequences */
    unsigned char *seq_open;
    size_t *seq_len;
    int *seq_blocks; /* [max_seqs][max_blocks] */
    int *seq_nblocks;
    /* activations (rows = max_step tokens) */
    qc_gpu_buf x, y, yb, qkv, q, att, attb, h, gu, act, actb, logits, logits_rows;
    /* step inputs */
    qc_gpu_buf d_ids, d_pos, d_slots, d_last, d_qstart, d_ctx, d_tables, d_next, d_work;
    qc_gpu_buf d_xq, d_xs; /* quantized activations and their scales (W8A8 formats) */
    qc_gpu_buf lwork;      /* the linears' workspace ("work", qc_kernel_desc.workspace_bytes), zero-filled */
    uint64_t lwork_bytes;
    int logit_rows;   /* rows the logits buffer holds */
    /* host staging */
    int32_t *h_ids, *h_pos, *h_slots, *h_last, *h_qstart, *h_ctx, *h_tables;
    eng_graph graphs[MAX_BUCKETS];
    int n_graphs;
    int use_graphs;
    char err_ctx[64];
    /* issue 9: per-layer formats from a policy, traces */
    qc_eplan *plan;            /* NULL: one format for every layer */
    int step_decode;           /* the step being run is pure decode (dispatch phase) */
    char choose_code[QC_REASON_CODE_MAX]; /* why linear_choose failed last */
    qc_trace *trace;           /* QCORE_TRACE=FILE */
    qc_gpu_tracer *tracer;
    uint64_t launches0;        /* the context's launch count when the engine was made */
    qc_model *plan_model;      /* the model whose prepared formats the plan may use */
    int loaded;                /* qc_engine_create finished */
    int fuse_quant;            /* QC_FUSE_QUANT (default 1): W8A8 activations quantized by add_rmsnorm / swiglu */
    int grid_dep;              /* QC_PDL (default 1): programmatic dependent launch for QC_KERNEL_GRID_DEP kernels */
    int gu_bf16;               /* QC_GU_BF16 (default 1): gate_up written as bf16 where its kernel can (y.bf16) */
};

/* ---- small helpers ---- */

static qc_status alloc_buf(qc_engine *e, size_t bytes, qc_mem_category cat, const char *what, qc_gpu_buf *b, char *err,
                           size_t errlen) {
    return qc_gpu_alloc(e->g, bytes, bytes ? bytes : 4, cat, what, b, err, errlen);
}

static qc_status upload_new(qc_engine *e, const void *src, size_t bytes, qc_mem_category cat, const char *what,
                            qc_gpu_buf *b, char *err, size_t errlen) {
    qc_status st = alloc_buf(e, bytes, cat, what, b, err, errlen);
    if (st == QC_OK) st = qc_gpu_upload(e->g, b->ptr, src, bytes, err, errlen);
    return st;
}

/* Launch kernel `k` with named arguments; `p` gives the sizes its launch_dims read. */
static qc_status launch(qc_engine *e, const qc_kernel_desc *k, qc_gpu_fn fn, const qc_problem *p,
                        const qc_named_arg *args, size_t n, char *err, size_t errlen) {
    void *argv[MAX_ARGS];
    qc_status st = qc_kernel_bind(k, args, n, argv, MAX_ARGS, err, errlen);
    if (st != QC_OK) return st;
    qc_launch_dims d;
    k->launch_dims(p, &d);
    return qc_gpu_launch_kernel(e->g, k, fn, &d, argv, err, errlen);
}

static qc_problem problem(int64_t m, int64_t n, int64_t k) {
    qc_problem p = {.struct_size = sizeof p, .m = m, .n = n, .k = k, .phase = QC_PHASE_ANY};
    return p;
}

#define ARG(name, v) {name, (void *)&(v)}

/* ---- linear layers ---- */

/* The problem a linear's kernels see at m rows (launch_dims, eligibility, workspace). */
static qc_problem linear_problem(const qc_engine *e, const eng_linear *L, int64_t m) {
    qc_problem p = problem(m, L->n, L->k);
    p.sm = (uint32_t)e->sm;
    p.group_size = L->group_size;
    p.scheme = L->scheme;
    return p;
}

/* The most workspace any kernel of L's format states for L's shape at up to m rows. */
static uint64_t linear_workspace_need(const qc_engine *e, const eng_linear *L, int64_t m) {
    uint64_t need = 0;
    for (size_t j = 0; L->fmt && j < qc_kernel_count(e->rt); j++) {
        const qc_kernel_desc *k = qc_kernel_get(e->rt, j);
        if (!k->workspace_bytes || strcmp(k->format, L->fmt->name) != 0) continue;
        qc_problem p = linear_problem(e, L, m);
        uint64_t w = k->workspace_bytes(&p);
        if (w > need) need = w;
    }
    return need;
}

/* A zero-filled workspace buffer of `bytes` (none for 0), as qc_kernel_desc.workspace_bytes asks. */
static qc_status alloc_zeroed_workspace(qc_engine *e, uint64_t bytes, const char *what, qc_gpu_buf *b, char *err,
                                        size_t errlen) {
    if (!bytes) return QC_OK;
    if (bytes > SIZE_MAX / 2) {
        qc_errf(err, errlen, "engine: %s of %llu bytes", what, (unsigned long long)bytes);
        return QC_ERR_INVALID;
    }
    qc_status st = qc_gpu_alloc(e->g, (size_t)bytes, (size_t)bytes, QC_MEM_WORKSPACE, what, b, err, errlen);
    if (st == QC_OK) st = qc_gpu_memset32(e->g, b->ptr, 0, (size_t)(bytes + 3) / 4, err, errlen);
    return st;
}

static int has_param(const qc_kernel_desc *k, const char *name) {
    for (uint32_t i = 0; i < k->n_params; i++)
        if (strcmp(k->params[i].name, name) == 0) return 1;
    return 0;
}

/* The format's activation quantizer for a kernel that takes "xq": a kernel of
 * the same format with an "xq" output and no "y", built for this device and
 * not refusing the problem (refusals coded "missing" or "role" say "not a
 * linear layer", not a refusal of the problem; "scheme" says another
 * weight's quantizer). */
static const qc_kernel_desc *find_quantizer(qc_engine *e, const eng_linear *L, const qc_problem *p) {
    for (size_t i = 0;; i++) {
        const qc_kernel_desc *k = qc_kernel_get(e->rt, i);
        if (!k) return NULL;
        if (strcmp(k->format, L->fmt->name) != 0 || !k->cuda_source || !has_param(k, "xq") || has_param(k, "y"))
            continue;
        if ((uint32_t)e->sm < k->arch.min_sm || (uint32_t)e->sm > k->arch.max_sm) continue;
        qc_reason why;
        if (k->eligible && !k->eligible(p, &why) && strcmp(why.code, "missing") != 0 && strcmp(why.code, "role") != 0)
            continue;
        return k;
    }
}

static int64_t arch_width(const qc_kernel_desc *k) {
    return k->arch.max_sm == QC_SM_ANY ? INT64_MAX : (int64_t)k->arch.max_sm - k->arch.min_sm;
}

/* The kernel for `m` rows: among the format's GPU kernels eligible here, the
 * most specialised wins: first the narrowest arch range (a kernel built for
 * this device's own instructions, e.g. wgmma on sm_90a, over a portable
 * one), then the highest m_min (a GEMM meant for M >= 64 over a general
 * one), then the narrowest M range (a GEMV for M <= 8 over one for M <= 16),
 * then registration order.  Measured choice per bucket is issue 9's policy. */
static qc_status linear_choose(qc_engine *e, eng_linear *L, int64_t m, eng_choice **out, char *err, size_t errlen) {
    for (int i = 0; i < KCACHE; i++)
        if (L->cache[i].k && L->cache[i].m == m) {
            *out = &L->cache[i];
            return QC_OK;
        }
    qc_problem p = problem(m, L->n, L->k);
    p.sm = (uint32_t)e->sm;
    p.group_size = L->group_size;
    p.scheme = L->scheme;
    p.phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE;
    p.layer = L->role;
    const qc_kernel_desc *best = NULL;
    int64_t best_width = 0;
    char reasons[512] = "";
    for (size_t i = 0;; i++) {
        const qc_kernel_desc *k = qc_kernel_get(e->rt, i);
        if (!k) break;
        if (strcmp(k->format, L->fmt->name) != 0 || !k->cuda_source || !has_param(k, "y")) continue;
        qc_reason why;
        if (!qc_select_kernel(k, L->fmt, &p, 1, &why)) {
            if (strcmp(why.code, "missing") != 0 && strlen(reasons) < 300)
                snprintf(reasons + strlen(reasons), sizeof reasons - strlen(reasons), "; %s: %s", k->id, why.code);
            continue;
        }
        int64_t width = (k->m_max ? k->m_max : INT64_MAX) - k->m_min;
        int64_t aw = arch_width(k), baw = best ? arch_width(best) : 0;
        if (!best || aw < baw || (aw == baw && (k->m_min > best->m_min || (k->m_min == best->m_min && width < best_width))))
            best = k, best_width = width;
    }
    if (!best) {
        qc_errf(err, errlen, "%s [%lld x %lld]: no %s GPU kernel takes m = %lld%s", L->role, (long long)L->n,
                (long long)L->k, L->fmt->name, (long long)m, reasons);
        qc_strlcpy(e->choose_code, "m_range", sizeof e->choose_code);
        return QC_ERR_UNSUPPORTED;
    }
    qc_strlcpy(e->choose_code, "compile", sizeof e->choose_code);
    /* tests: a kernel that fails to load once the engine is made (a run-time fallback without a broken kernel) */
    const char *fail = e->loaded ? getenv("QCORE_TEST_FAIL_KERNEL") : NULL;
    if (fail && strcmp(fail, best->id) == 0) {
        qc_errf(err, errlen, "%s: kernel %s: load: failed on purpose (QCORE_TEST_FAIL_KERNEL)", L->role, best->id);
        return QC_ERR_UNSUPPORTED;
    }
    eng_choice *c = &L->cache[L->next_slot];
    L->next_slot = (L->next_slot + 1) % KCACHE;
    qc_reason why;
    if (qc_gpu_kernel_load(e->g, e->nv, best, &c->fn, &why) != QC_OK) {
        c->k = NULL;
        qc_errf(err, errlen, "%s: kernel %s: %s: %s", L->role, best->id, why.code, why.text);
        return QC_ERR_UNSUPPORTED;
    }
    c->quant = NULL;
    c->quant_fn = NULL;
    if (has_param(best, "xq")) {
        c->quant = find_quantizer(e, L, &p);
        if (!c->quant) {
            c->k = NULL;
            qc_errf(err, errlen, "%s: kernel %s takes quantized activations but %s registers no activation quantizer "
                    "for this device", L->role, best->id, L->fmt->name);
            return QC_ERR_UNSUPPORTED;
        }
        if (qc_gpu_kernel_load(e->g, e->nv, c->quant, &c->quant_fn, &why) != QC_OK) {
            c->k = NULL;
            qc_errf(err, errlen, "%s: kernel %s: %s: %s", L->role, c->quant->id, why.code, why.text);
            return QC_ERR_UNSUPPORTED;
        }
    }
    c->fuse = QC_FUSE_NONE;
    if (c->quant) {
        qc_reason fw;
        c->fuse = e->fuse_quant ? qc_fuse_decide(c->quant, (uint32_t)e->sm, L->k, &fw) : QC_FUSE_NONE;
        if (!e->fuse_quant) qc_reason_set(&fw, "off", "QC_FUSE_QUANT=0");
        /* once per choice (graph buckets and first steps): why the quantizer runs on its own */
        if (c->fuse == QC_FUSE_NONE)
            qc_log(QC_LOG_INFO, "%s (m=%lld): %s runs standalone, not fused: %s: %s", L->name, (long long)m,
                   c->quant->id, fw.code, fw.text);
    }
    c->k = best;
    c->m = m;
    /* bf16 activations are needed when the GEMM or its activation quantizer
     * reads them (a W8A8 GEMM takes "xq"; its quantizer reads "x.bf16") */
    c->wants_bf16 = has_param(best, "x.bf16") || (c->quant && has_param(c->quant, "x.bf16"));
    *out = c;
    return QC_OK;
}

static int bucket_index(int64_t m) {
    int i = 0;
    while (((int64_t)1 << i) < m && i < MAX_BUCKETS - 1) i++;
    return i;
}

static void policy_picks(qc_engine *e);
static void drop_graphs(qc_engine *e);

/* The variant of `L` the dispatch table runs for this step's phase and m. */
static eng_linear *policy_variant(qc_engine *e, eng_linear *L, int64_t m, char *err, size_t errlen) {
    if (L->pick_gen != qc_eplan_generation(e->plan)) policy_picks(e);
    int v = L->pick[e->step_decode ? 0 : 1][bucket_index(m)];
    if (v < 0) {
        const qc_dispatch_entry *d = qc_dispatch_lookup(qc_eplan_table(e->plan), (size_t)L->plan_layer,
                                                        e->step_decode ? QC_PHASE_DECODE : QC_PHASE_PREFILL, m);
        qc_errf(err, errlen, "%s: the dispatch table runs %s at m = %lld, which is not resident for this layer",
                L->name, d ? d->format : "nothing", (long long)m);
        return NULL;
    }
    return v == 0 ? L : &L->alts[v - 1];
}

/* The variant of L (a policy's per-layer format, or L) and its kernel
 * choice for m rows.  Before the kernel producing x runs, so that it can
 * quantize the activations itself (choice->fuse). */
static qc_status linear_pick(qc_engine *e, eng_linear *L, int64_t m, eng_linear **out_l, eng_choice **out_c, char *err,
                             size_t errlen) {
    eng_choice *c;
    qc_status st;
    if (e->plan && L->plan_layer >= 0) {
        /* a kernel that fails here (an M between buckets) becomes a fallback:
           the table is rebuilt without that format for this layer */
        for (int tries = 0;; tries++) {
            eng_linear *V = policy_variant(e, L, m, err, errlen);
            if (!V) return QC_ERR_UNSUPPORTED;
            st = linear_choose(e, V, m, &c, err, errlen);
            if (st == QC_OK || tries == 3) {
                L = V;
                break;
            }
            char why[QC_REASON_TEXT_MAX];
            qc_strlcpy(why, err, sizeof why);
            if ((st = qc_eplan_fail(e->plan, (size_t)L->plan_layer, V->fmt->name, e->choose_code, why, err, errlen)))
                return st;
            drop_graphs(e); /* they replay the old choices */
        }
        if (st != QC_OK) return st;
    } else {
        st = linear_choose(e, L, m, &c, err, errlen);
        if (st != QC_OK) return st;
    }
    *out_l = L;
    *out_c = c;
    return QC_OK;
}

/* Trace context for the kernels that follow L's: its block ("blk.3" of
 * "blk.3.mlp.down"), or its whole name (the head). */
static void trace_block(qc_engine *e, const eng_linear *L) {
    if (!e->tracer) return;
    char blk[32];
    qc_strlcpy(blk, L->name, sizeof blk);
    char *dot = strchr(blk, '.');
    if (dot && (dot = strchr(dot + 1, '.'))) *dot = 0;
    qc_gpu_tracer_context(e->tracer, blk, "kernel");
}

/* Whether a choice's kernels read x as f32 ("x"): else the producing kernel skips that copy. */
static int reads_f32(const eng_choice *c) { return has_param(c->k, "x") || (c->quant && has_param(c->quant, "x")); }

/* programmatic dependent launch (QC_KERNEL_GRID_DEP kernels, sm_90+): on unless QC_PDL=0 */
static int grid_dep_env(void) {
    const char *v = getenv("QC_PDL");
    return !(v && strcmp(v, "0") == 0);
}

/* QC_FUSE_QUANT=0: every W8A8 linear runs its format's quantizer on its own (A/B checks) */
static int fuse_quant_env(void) {
    const char *fq = getenv("QC_FUSE_QUANT");
    return !(fq && strcmp(fq, "0") == 0);
}

/* QC_GU_BF16=off: gate_up's output stays f32 even where its kernel could write bf16 (A/B checks) */
static int gu_bf16_env(void) {
    const char *v = getenv("QC_GU_BF16");
    if (!v || strcmp(v, "on") == 0 || strcmp(v, "1") == 0) return 1;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return 0;
    qc_log(QC_LOG_WARN, "QC_GU_BF16=%s: not on/off/1/0, ignored (on)", v);
    return 1;
}

/* Whether the kernel producing x writes this choice's xq/xs (fused). */
static int fused(const qc_engine *e, const eng_choice *c) { return e->fuse_quant && c->quant && c->fuse; }

/* y[m, n] = x[m, k] W^T with L and c from linear_pick; x given as f32 and
 * (when not 0) bf16; prequant: xq/xs are written already (fused).  yb (not
 * 0): the caller reads y as bf16 at this address when the kernel takes
 * "y.bf16" (writes_bf16: then nothing is written to y). */
static int writes_bf16(const eng_choice *c) { return has_param(c->k, "y.bf16"); }
static qc_status linear_exec(qc_engine *e, eng_linear *L, eng_choice *c, qc_devptr x, qc_devptr xb, qc_devptr y,
                             qc_devptr yb, int64_t m, int prequant, char *err, size_t errlen) {
    qc_status st;
    if (e->tracer) qc_gpu_tracer_context(e->tracer, L->name, "linear");
    if (c->wants_bf16 && !xb && !prequant) {
        /* only the attention output arrives without a bf16 copy: cast it, or
           with fusion cast and quantize in one pass */
        int64_t count = m * L->k, kk = L->k;
        if (fused(e, c)) {
            qc_problem pr = problem(m, kk, 0);
            qc_devptr cb = has_param(c->k, "x.bf16") ? e->attb.ptr : 0;
            int32_t recipe = c->fuse;
            qc_named_arg a[] = {ARG("x", x),        ARG("xq", e->d_xq.ptr), ARG("xs", e->d_xs.ptr), ARG("y.bf16", cb),
                                ARG("m", m),        ARG("n", kk),           ARG("recipe", recipe)};
            st = launch(e, e->kern[K_CAST_Q].k, e->kern[K_CAST_Q].fn, &pr, a, 7, err, errlen);
            prequant = 1;
            xb = cb;
        } else {
            qc_problem pc = problem(count, 1, 0);
            qc_named_arg a[] = {ARG("x", x), ARG("y", e->attb.ptr), ARG("count", count)};
            st = launch(e, e->kern[K_CAST].k, e->kern[K_CAST].fn, &pc, a, 3, err, errlen);
            xb = e->attb.ptr;
        }
        if (st != QC_OK) return st;
    }
    qc_problem p = linear_problem(e, L, m);
    int64_t n = L->n, k = L->k, gs = L->group_size;
    uint64_t wneed = c->k->workspace_bytes ? c->k->workspace_bytes(&p) : 0;
    if (wneed > e->lwork_bytes) { /* sized at create for every kernel of the layer's format: a plugin broke its word */
        qc_errf(err, errlen, "engine: %s needs %llu bytes of workspace at m=%lld, the engine sized %llu (%s)",
                c->k->id, (unsigned long long)wneed, (long long)m, (unsigned long long)e->lwork_bytes, L->role);
        return QC_ERR_INTERNAL;
    }
    qc_named_arg args[12 + QC_MAX_WEIGHT_BUFFERS];
    size_t na = 0;
    args[na++] = (qc_named_arg)ARG("x", x);
    args[na++] = (qc_named_arg)ARG("x.bf16", xb);
    args[na++] = (qc_named_arg)ARG("y", y);
    args[na++] = (qc_named_arg)ARG("y.bf16", yb);
    args[na++] = (qc_named_arg)ARG("xq", e->d_xq.ptr);
    args[na++] = (qc_named_arg)ARG("xs", e->d_xs.ptr);
    args[na++] = (qc_named_arg)ARG("m", m);
    args[na++] = (qc_named_arg)ARG("n", n);
    args[na++] = (qc_named_arg)ARG("k", k);
    args[na++] = (qc_named_arg)ARG("group_size", gs);
    args[na++] = (qc_named_arg)ARG("work", e->lwork.ptr);
    for (int i = 0; i < L->n_bufs; i++) args[na++] = (qc_named_arg){L->buf_names[i], (void *)&L->bufs[i].ptr};
    void *argv[MAX_ARGS];
    qc_launch_dims d;
    if (c->quant && !prequant) { /* activations to the format's 8-bit codes and scales first */
        if ((st = qc_kernel_bind(c->quant, args, na, argv, MAX_ARGS, err, errlen))) return st;
        c->quant->launch_dims(&p, &d);
        if ((st = qc_gpu_launch_kernel(e->g, c->quant, c->quant_fn, &d, argv, err, errlen))) return st;
    }
    st = qc_kernel_bind(c->k, args, na, argv, MAX_ARGS, err, errlen);
    if (st != QC_OK) return st;
    c->k->launch_dims(&p, &d);
    st = qc_gpu_launch_kernel(e->g, c->k, c->fn, &d, argv, err, errlen);
    if (st != QC_OK) qc_errf(err + strlen(err), errlen - strlen(err), " (%s, m=%lld)", L->role, (long long)m);
    trace_block(e, L); /* what follows belongs to the block, or the head */
    return st;
}

/* linear_pick then linear_exec, the activations quantized (when they must be) by the format's quantizer */
static qc_status linear_run(qc_engine *e, eng_linear *L, qc_devptr x, qc_devptr xb, qc_devptr y, int64_t m, char *err,
                            size_t errlen) {
    eng_choice *c;
    qc_status st = linear_pick(e, L, m, &L, &c, err, errlen);
    return st != QC_OK ? st : linear_exec(e, L, c, x, xb, y, 0, m, 0, err, errlen);
}

/* ---- weights ---- */

static void linear_init(eng_linear *L, const char *role, const qc_format_desc *fmt, int64_t n, int64_t k) {
    memset(L, 0, sizeof *L);
    L->role = role;
    L->fmt = fmt;
    L->n = n;
    L->k = k;
    L->plan_layer = -1;
    qc_strlcpy(L->name, role, sizeof L->name);
}

/* A bf16 weight [n, k]: uploaded from `host` (n*k bf16) or filled with
 * uniform values of standard deviation 1/sqrt(k) made on the GPU. */
static qc_status linear_bf16(qc_engine *e, eng_linear *L, const uint16_t *host, uint64_t seed, const char *what,
                             char *err, size_t errlen) {
    size_t bytes = (size_t)L->n * (size_t)L->k * 2;
    L->n_bufs = 1;
    snprintf(L->buf_names[0], sizeof L->buf_names[0], "w.weight");
    if (host) return upload_new(e, host, bytes, QC_MEM_WEIGHTS, what, &L->bufs[0], err, errlen);
    qc_status st = alloc_buf(e, bytes, QC_MEM_WEIGHTS, what, &L->bufs[0], err, errlen);
    if (st != QC_OK) return st;
    int64_t count = L->n * L->k;
    float scale = (float)(sqrt(3.0) / sqrt((double)L->k));
    qc_problem p = problem(count, 1, 0);
    qc_named_arg a[] = {ARG("w", L->bufs[0].ptr), ARG("count", count), ARG("seed", seed), ARG("scale", scale)};
    return launch(e, e->kern[K_FILL].k, e->kern[K_FILL].fn, &p, a, 4, err, errlen);
}

static void linear_free(qc_engine *e, eng_linear *L) {
    for (int i = 0; i < L->n_bufs; i++) qc_gpu_free(e->g, &L->bufs[i]);
    for (int i = 0; i < L->n_alts; i++) linear_free(e, &L->alts[i]);
    free(L->alts);
    L->alts = NULL;
    L->n_alts = 0;
}

/* host vector of `n` values around 1 (norm weights of a synthetic model) */
static qc_status synthetic_norm(qc_engine *e, int64_t n, uint64_t seed, const char *what, qc_gpu_buf *b, char *err,
                                size_t errlen) {
    float *v = malloc((size_t)n * sizeof(float));
    if (!v) {
        qc_errf(err, errlen, "out of memory");
        return QC_ERR_NOMEM;
    }
    uint64_t z = seed;
    for (int64_t i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = 1.0f + 0.25f * ((float)(z >> 40) / 16777216.0f - 0.5f);
    }
    qc_status st = upload_new(e, v, (size_t)n * sizeof(float), QC_MEM_WEIGHTS, what, b, err, errlen);
    free(v);
    return st;
}

/* the bf16 weights of a model's linear layer (its "bf16" preparation) */
static const uint16_t *model_bf16(const qc_linear *L, char *err, size_t errlen) {
    for (int i = 0; i < L->n_prep; i++)
        if (strcmp(L->prep[i].fmt->name, "bf16") == 0) return L->prep[i].pw.buffers[0].data;
    qc_errf(err, errlen, "%s has no bf16 weights (prepared: %s%s): the GPU engine runs bf16 linears so far; open the "
            "model with format bf16", L->info ? L->info->name : "layer", L->n_prep ? L->prep[0].fmt->name : "none",
            L->n_prep > 1 ? ", ..." : "");
    return NULL;
}

/* ---- weights in a quantized format ---- */

/* Upload a packed weight's buffers, each under its own ledger category, as
 * the linear's "w.<name>" arguments. */
static qc_status linear_packed(qc_engine *e, eng_linear *L, const qc_packed_weight *pw, const char *what, char *err,
                               size_t errlen) {
    L->group_size = pw->group_size;
    L->scheme = pw->scheme;
    for (uint32_t i = 0; i < pw->n_buffers; i++) {
        const qc_buffer *b = &pw->buffers[i];
        snprintf(L->buf_names[i], sizeof L->buf_names[i], "w.%s", b->name);
        qc_status st = qc_gpu_alloc(e->g, b->bytes, b->bytes ? b->bytes : 4, b->category, what, &L->bufs[i], err, errlen);
        if (st == QC_OK) st = qc_gpu_upload(e->g, L->bufs[i].ptr, b->data, b->bytes, err, errlen);
        L->n_bufs = (int)i + 1;
        if (st != QC_OK) return st;
    }
    return QC_OK;
}

static void packed_release(const qc_format_desc *f, qc_packed_weight *pw) {
    if (f->release)
        f->release(pw);
    else
        for (uint32_t i = 0; i < pw->n_buffers; i++) qc_aligned_free(pw->buffers[i].data);
    memset(pw, 0, sizeof *pw);
}

/* Concatenate packed weights along N (q|k|v, gate|up).  Valid when every
 * buffer holds the same bytes per output row in every part and each part's
 * n is a multiple of the format's n_align: the layout contract in plugin.h
 * (buffers are row tiles of n_align rows).  A buffer that is not per row
 * (an act-order permutation) cannot be fused. */
static qc_status packed_concat(const qc_format_desc *f, const qc_packed_weight *const *parts, int np,
                               qc_packed_weight *out, char *err, size_t errlen) {
    const qc_packed_weight *p0 = parts[0];
    memset(out, 0, sizeof *out);
    *out = *p0;
    out->n = out->n_padded = 0;
    for (int j = 0; j < np; j++) {
        const qc_packed_weight *p = parts[j];
        if (p->n_buffers != p0->n_buffers || p->k != p0->k || p->group_size != p0->group_size ||
            p->scheme != p0->scheme || p->n_padded != p->n || (f->n_align > 1 && p->n % f->n_align)) {
            qc_errf(err, errlen, "%s: the parts of a fused weight differ (buffers, k, group, scheme or n %% %u)",
                    f->name, f->n_align);
            return QC_ERR_UNSUPPORTED;
        }
        out->n += p->n;
    }
    out->n_padded = out->n;
    for (uint32_t i = 0; i < p0->n_buffers; i++) {
        size_t total = 0;
        for (int j = 0; j < np; j++) {
            const qc_buffer *b = &parts[j]->buffers[i];
            if (strcmp(b->name, p0->buffers[i].name) != 0 || b->bytes % (size_t)parts[j]->n ||
                b->bytes / (size_t)parts[j]->n != p0->buffers[i].bytes / (size_t)p0->n) {
                qc_errf(err, errlen, "%s: buffer '%s' is not laid out per output row: q|k|v and gate|up cannot be "
                        "fused (the GPU engine needs them fused)", f->name, p0->buffers[i].name);
                for (uint32_t t = 0; t < i; t++) qc_aligned_free(out->buffers[t].data);
                return QC_ERR_UNSUPPORTED;
            }
            total += b->bytes;
        }
        unsigned char *d = qc_aligned_alloc(total ? total : 1);
        if (!d) {
            qc_errf(err, errlen, "out of memory fusing %s weights (%zu bytes)", f->name, total);
            for (uint32_t t = 0; t < i; t++) qc_aligned_free(out->buffers[t].data);
            return QC_ERR_NOMEM;
        }
        size_t off = 0;
        for (int j = 0; j < np; j++) {
            memcpy(d + off, parts[j]->buffers[i].data, parts[j]->buffers[i].bytes);
            off += parts[j]->buffers[i].bytes;
        }
        out->buffers[i].data = d;
        out->buffers[i].bytes = total;
    }
    return QC_OK;
}

typedef struct quant_job {
    qc_engine *e;
    eng_linear *L;
    uint64_t seed;
    char what[48];
} quant_job;

typedef struct quant_pool {
    quant_job *jobs;
    size_t n, next;
    pthread_mutex_t mu;
    qc_status st;
    char err[512];
} quant_pool;

/* One synthetic linear: random weights (uniform, std 1/sqrt(k), never all
 * zero) made here, quantized by the format, uploaded, freed. */
static qc_status quant_one(quant_job *j, char *err, size_t errlen) {
    eng_linear *L = j->L;
    size_t count = (size_t)L->n * (size_t)L->k;
    float *w = malloc(count * sizeof(float));
    if (!w) {
        qc_errf(err, errlen, "%s: out of host memory for %zu weights", j->what, count);
        return QC_ERR_NOMEM;
    }
    float scale = (float)(sqrt(3.0) / sqrt((double)L->k));
    uint64_t z = j->seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < count; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        w[i] = ((float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
    }
    qc_quant_request rq = {.struct_size = sizeof rq, .w = w, .n = L->n, .k = L->k, .group_size = j->e->group_size};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    memset(&why, 0, sizeof why);
    qc_status st = L->fmt->quantize(&rq, &pw, &why);
    free(w);
    if (st != QC_OK) {
        qc_errf(err, errlen, "%s: %s quantize [%lld x %lld]: %s: %s", j->what, L->fmt->name, (long long)L->n,
                (long long)L->k, why.code, why.text);
        return st;
    }
    pthread_mutex_lock(&j->e->upload_mu);
    st = linear_packed(j->e, L, &pw, j->what, err, errlen);
    pthread_mutex_unlock(&j->e->upload_mu);
    packed_release(L->fmt, &pw);
    return st;
}

static void *quant_worker(void *arg) {
    quant_pool *pool = arg;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        size_t i = pool->st == QC_OK && pool->next < pool->n ? pool->next++ : pool->n;
        pthread_mutex_unlock(&pool->mu);
        if (i >= pool->n) return NULL;
        char err[512];
        qc_status st = quant_one(&pool->jobs[i], err, sizeof err);
        if (st != QC_OK) {
            pthread_mutex_lock(&pool->mu);
            if (pool->st == QC_OK) {
                pool->st = st;
                snprintf(pool->err, sizeof pool->err, "%s", err);
            }
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

/* Every job of the pool on up to 16 host threads (this one included). */
static void quant_pool_run(quant_pool *pool) {
    pthread_mutex_init(&pool->mu, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu > 1 ? (int)(ncpu > 16 ? 16 : ncpu) : 1;
    pthread_t tid[16];
    int started[16] = {0};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&tid[t], NULL, quant_worker, pool) == 0;
    quant_worker(pool);
    for (int t = 1; t < nt; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&pool->mu);
}

/* Every layer's four linears in the engine's format: from the model's own
 * preparation of that format (q|k|v and gate|up concatenated), or synthetic
 * (quantized here on all cores). */
static qc_status load_quantized(qc_engine *e, qc_model *m, uint64_t seed, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    if (m) {
        for (int b = 0; b < s->n_layers; b++) {
            qc_block *B = &m->blocks[b];
            const qc_packed_weight *pw[7];
            for (int i = 0; i < 7; i++) {
                pw[i] = NULL;
                for (int t = 0; t < B->lin[i].n_prep; t++)
                    if (B->lin[i].prep[t].fmt == e->fmt) pw[i] = &B->lin[i].prep[t].pw;
                if (!pw[i]) {
                    qc_errf(err, errlen, "%s has no %s weights: open the model with format %s",
                            B->lin[i].info ? B->lin[i].info->name : "a layer", e->fmt->name, e->fmt->name);
                    return QC_ERR_UNSUPPORTED;
                }
            }
            eng_layer *Ly = &e->layers[b];
            char what[48];
            snprintf(what, sizeof what, "blk.%d %s weights", b, e->fmt->name);
            qc_packed_weight qkv, gu;
            const qc_packed_weight *p3[3] = {pw[0], pw[1], pw[2]}, *p2[2] = {pw[4], pw[5]};
            qc_status st = packed_concat(e->fmt, p3, 3, &qkv, err, errlen);
            if (st != QC_OK) return st;
            st = linear_packed(e, &Ly->qkv, &qkv, what, err, errlen);
            for (uint32_t i = 0; i < qkv.n_buffers; i++) qc_aligned_free(qkv.buffers[i].data);
            if (st == QC_OK) st = packed_concat(e->fmt, p2, 2, &gu, err, errlen);
            if (st != QC_OK) return st;
            st = linear_packed(e, &Ly->gate_up, &gu, what, err, errlen);
            for (uint32_t i = 0; i < gu.n_buffers; i++) qc_aligned_free(gu.buffers[i].data);
            if (st == QC_OK) st = linear_packed(e, &Ly->o, pw[3], what, err, errlen);
            if (st == QC_OK) st = linear_packed(e, &Ly->down, pw[6], what, err, errlen);
            if (st != QC_OK) return st;
        }
        return QC_OK;
    }
    quant_pool pool = {.n = (size_t)s->n_layers * 4, .st = QC_OK};
    pool.jobs = calloc(pool.n, sizeof *pool.jobs);
    if (!pool.jobs) {
        qc_errf(err, errlen, "out of memory");
        return QC_ERR_NOMEM;
    }
    for (int b = 0; b < s->n_layers; b++) {
        eng_linear *ls[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4; i++) {
            quant_job *j = &pool.jobs[(size_t)b * 4 + (size_t)i];
            j->e = e, j->L = ls[i], j->seed = seed + (uint64_t)b * 1000 + (uint64_t)i + 1;
            snprintf(j->what, sizeof j->what, "blk.%d %s", b, ls[i]->role);
        }
    }
    quant_pool_run(&pool);
    free(pool.jobs);
    if (pool.st != QC_OK) qc_errf(err, errlen, "%s", pool.err);
    return pool.st;
}

/* ---- per-layer formats from a policy (issue 9) ---- */

/* The model's packed weights of engine linear `which` (QC_EPLAN_QKV ...) of
 * block b in format f, parts fused as the engine runs them. */
static int model_parts(qc_model *m, int b, int which, const qc_format_desc *f, const qc_packed_weight **pw) {
    static const int first[4] = {0, 3, 4, 6}, count[4] = {3, 1, 2, 1};
    qc_block *B = &m->blocks[b];
    for (int i = 0; i < count[which]; i++) {
        const qc_linear *L = &B->lin[first[which] + i];
        pw[i] = NULL;
        for (int t = 0; t < L->n_prep; t++)
            if (L->prep[t].fmt == f) pw[i] = &L->prep[t].pw;
        if (!pw[i]) return 0;
    }
    return count[which];
}

static qc_status model_linear(qc_engine *e, qc_model *m, int b, int which, eng_linear *L, char *err, size_t errlen) {
    const qc_packed_weight *pw[3] = {NULL, NULL, NULL};
    int np = model_parts(m, b, which, L->fmt, pw);
    if (!np) {
        qc_errf(err, errlen, "%s: the model holds no %s weights", L->name, L->fmt->name);
        return QC_ERR_UNSUPPORTED;
    }
    char what[48];
    snprintf(what, sizeof what, "blk.%d %s weights", b, L->fmt->name);
    if (np == 1) return linear_packed(e, L, pw[0], what, err, errlen);
    qc_packed_weight fused;
    qc_status st = packed_concat(L->fmt, pw, np, &fused, err, errlen);
    if (st != QC_OK) return st;
    st = linear_packed(e, L, &fused, what, err, errlen);
    for (uint32_t i = 0; i < fused.n_buffers; i++) qc_aligned_free(fused.buffers[i].data);
    return st;
}

/* Every block linear in each format its table entries run (the first in the
 * linear itself, the others as its alternates): from the model's own
 * preparations, or synthetic - one set of float weights per linear,
 * quantized into each format on all cores. */
static qc_status load_planned(qc_engine *e, qc_model *m, uint64_t seed, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    size_t n_jobs = 0, cap = (size_t)s->n_layers * 4 * 8;
    quant_job *jobs = m ? NULL : calloc(cap, sizeof *jobs);
    if (!m && !jobs) {
        qc_errf(err, errlen, "out of memory");
        return QC_ERR_NOMEM;
    }
    qc_status st = QC_OK;
    for (int b = 0; b < s->n_layers && st == QC_OK; b++) {
        eng_linear *four[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4 && st == QC_OK; i++) {
            eng_linear *L = four[i];
            const qc_format_desc *fs[8];
            size_t nf = qc_eplan_layer_formats(e->plan, (size_t)L->plan_layer, fs, 8);
            if (nf == 0) {
                qc_errf(err, errlen, "%s: the dispatch table runs no format here (see its fallbacks)", L->name);
                st = QC_ERR_UNSUPPORTED;
                break;
            }
            if (nf > 1 && !(L->alts = calloc(nf - 1, sizeof *L->alts))) {
                qc_errf(err, errlen, "out of memory");
                st = QC_ERR_NOMEM;
                break;
            }
            L->n_alts = (int)nf - 1;
            for (size_t v = 0; v < nf; v++) {
                eng_linear *V = v == 0 ? L : &L->alts[v - 1];
                if (v > 0) {
                    linear_init(V, L->role, fs[v], L->n, L->k);
                    qc_strlcpy(V->name, L->name, sizeof V->name);
                }
                V->fmt = fs[v];
                if (m) {
                    st = model_linear(e, m, b, i, V, err, errlen);
                    if (st != QC_OK) break;
                } else {
                    quant_job *j = &jobs[n_jobs++];
                    j->e = e, j->L = V, j->seed = seed + (uint64_t)b * 1000 + (uint64_t)i + 1;
                    snprintf(j->what, sizeof j->what, "blk.%d %s %s", b, V->role, V->fmt->name);
                }
            }
        }
    }
    if (st != QC_OK || m) {
        free(jobs);
        return st;
    }
    quant_pool pool = {.jobs = jobs, .n = n_jobs, .st = QC_OK};
    quant_pool_run(&pool);
    free(jobs);
    if (pool.st != QC_OK) qc_errf(err, errlen, "%s", pool.err);
    return pool.st;
}

/* Which variant runs per (phase, bucket), from the current table. */
static void policy_picks(qc_engine *e) {
    const qc_dispatch *d = qc_eplan_table(e->plan);
    for (int b = 0; b < e->s.n_layers; b++) {
        eng_linear *four[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4; i++) {
            eng_linear *L = four[i];
            for (int ph = 0; ph < 2; ph++)
                for (int bi = 0; bi < MAX_BUCKETS; bi++) {
                    const qc_dispatch_entry *en = qc_dispatch_lookup(d, (size_t)L->plan_layer,
                                                                     ph ? QC_PHASE_PREFILL : QC_PHASE_DECODE,
                                                                     (int64_t)1 << bi);
                    int v = -1;
                    for (int a = 0; en && a <= L->n_alts && v < 0; a++)
                        if (strcmp((a ? L->alts[a - 1].fmt : L->fmt)->name, en->format) == 0) v = a;
                    L->pick[ph][bi] = (signed char)v;
                }
            L->pick_gen = qc_eplan_generation(e->plan);
        }
    }
}

static void drop_graphs(qc_engine *e) {
    if (!e->n_graphs) return;
    char err[256];
    qc_gpu_sync(e->g, err, sizeof err);
    for (int i = 0; i < e->n_graphs; i++) qc_gpu_graph_destroy(e->g, e->graphs[i].graph);
    e->n_graphs = 0;
}

static eng_linear *plan_linear(qc_engine *e, size_t li) {
    if (li >= (size_t)e->s.n_layers * 4) return NULL;
    eng_layer *Ly = &e->layers[li / 4];
    eng_linear *four[4] = {&Ly->qkv, &Ly->o, &Ly->gate_up, &Ly->down};
    return four[li % 4];
}

/* The plan's callbacks: what the engine can hold, what it holds, timings. */
static int plan_can_hold(void *ctx, size_t li, const qc_format_desc *f, qc_reason *why) {
    qc_engine *e = ctx;
    qc_model *m = e->plan_model;
    if (li >= (size_t)e->s.n_layers * 4) {
        if (strcmp(f->name, "bf16") == 0) return 1;
        qc_reason_set(why, "missing", "the GPU engine runs lm_head in bf16 only (%s head: not yet)", f->name);
        return 0;
    }
    if (!m && !f->quantize) {
        qc_reason_set(why, "missing", "%s has no quantizer: the engine cannot make synthetic weights", f->name);
        return 0;
    }
    if (m) {
        const qc_packed_weight *pw[3] = {NULL, NULL, NULL};
        if (!model_parts(m, (int)(li / 4), (int)(li % 4), f, pw)) {
            qc_reason_set(why, "not_prepared", "the model was opened without %s weights for this layer", f->name);
            return 0;
        }
    }
    return 1;
}

static int plan_resident(void *ctx, size_t li, const qc_format_desc *f) {
    qc_engine *e = ctx;
    eng_linear *L = plan_linear(e, li);
    if (!L) return strcmp(f->name, "bf16") == 0;
    for (int a = 0; a <= L->n_alts; a++)
        if ((a ? L->alts[a - 1].fmt : L->fmt) == f) return 1;
    return 0;
}

/* Time `f` on a synthetic [n, k] weight at each m: the kernel linear_run
 * would pick (and the activation quantizer before it, when it takes one and
 * the engine does not fuse it into the kernel producing x),
 * one warm-up launch, then REPS launches, each between two CUDA events
 * after a memset that evicts the weights from L2 (a model's step reads
 * them from HBM; back-to-back launches found an 8 MB weight in L2 and
 * favoured the smallest formats); the median counts
 * (QC_EPLAN_TIMING_METHOD). */
#define TIMING_REPS 5
#define TIMING_FLUSH_BYTES ((size_t)128 << 20) /* 2.5x the H200's 50 MB L2 */
static qc_status plan_timer(void *ctx, const qc_format_desc *f, int64_t n, int64_t k, const int64_t *ms, size_t n_ms,
                            double *us, char (*kid)[64], qc_reason *why, char *err, size_t errlen) {
    qc_engine *e = ctx;
    int64_t mmax = 1;
    for (size_t i = 0; i < n_ms; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    eng_linear T;
    linear_init(&T, "timing", f, n, k);
    snprintf(T.name, sizeof T.name, "timing %s", f->name);
    quant_job j = {.e = e, .L = &T, .seed = 0x7117};
    snprintf(j.what, sizeof j.what, "timing weights (%s)", f->name);
    qc_gpu_buf x = {0}, xb = {0}, y = {0}, xq = {0}, xs = {0}, flush = {0}, work = {0};
    qc_gpu_event ev0 = NULL, ev1 = NULL;
    qc_devptr save_q = e->d_xq.ptr, save_s = e->d_xs.ptr, save_w = e->lwork.ptr;
    uint64_t save_wb = e->lwork_bytes, wneed = linear_workspace_need(e, &T, mmax);
    size_t xs_bytes = (size_t)mmax * (size_t)(k / 32 + 1) * 4;
    qc_status st = quant_one(&j, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, (size_t)(mmax * k) * 4, QC_MEM_WORKSPACE, "timing x", &x, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, (size_t)(mmax * k) * 2, QC_MEM_WORKSPACE, "timing x.bf16", &xb, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, (size_t)(mmax * n) * 4, QC_MEM_WORKSPACE, "timing y", &y, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, (size_t)(mmax * k), QC_MEM_WORKSPACE, "timing xq", &xq, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, xs_bytes, QC_MEM_WORKSPACE, "timing xs", &xs, err, errlen);
    if (st == QC_OK)
        st = alloc_buf(e, TIMING_FLUSH_BYTES, QC_MEM_WORKSPACE, "timing L2 flush", &flush, err, errlen);
    /* the plan is timed before the engine's own workspace exists */
    if (st == QC_OK) st = alloc_zeroed_workspace(e, wneed, "timing workspace", &work, err, errlen);
    /* activations of 1.0 (f32 and bf16) and scales of 1: finite inputs for every kernel */
    if (st == QC_OK) st = qc_gpu_memset32(e->g, x.ptr, 0x3f800000u, (size_t)(mmax * k), err, errlen);
    if (st == QC_OK) st = qc_gpu_memset32(e->g, xb.ptr, 0x3f803f80u, (size_t)(mmax * k) / 2, err, errlen);
    if (st == QC_OK) st = qc_gpu_memset32(e->g, xs.ptr, 0x3f800000u, xs_bytes / 4, err, errlen);
    /* codes 0x38: 1.0 in E4M3, 56 in INT8 (a fused quantizer's GEMM reads them as written) */
    if (st == QC_OK) st = qc_gpu_memset32(e->g, xq.ptr, 0x38383838u, (size_t)(mmax * k) / 4, err, errlen);
    if (st == QC_OK) st = qc_gpu_event_create(e->g, &ev0, err, errlen);
    if (st == QC_OK) st = qc_gpu_event_create(e->g, &ev1, err, errlen);
    e->d_xq.ptr = xq.ptr, e->d_xs.ptr = xs.ptr;
    e->lwork.ptr = work.ptr, e->lwork_bytes = wneed;
    for (size_t i = 0; i < n_ms && st == QC_OK; i++) {
        us[i] = -1;
        kid[i][0] = 0;
        memset(&why[i], 0, sizeof why[i]);
        eng_choice *c;
        char cerr[512];
        if (linear_choose(e, &T, ms[i], &c, cerr, sizeof cerr) != QC_OK) {
            qc_reason_set(&why[i], e->choose_code, "%s", cerr);
            continue;
        }
        /* a fused quantizer runs inside the kernel that produces x, which a step runs for every format: the
         * format then adds its GEMM alone (xq/xs hold valid codes and scales of 1) */
        const int pre = fused(e, c);
        snprintf(kid[i], sizeof kid[0], "%s%s%s", c->quant ? c->quant->id : "", !c->quant ? "" : pre ? "(fused)+" : "+",
                 c->k->id);
        st = linear_exec(e, &T, c, x.ptr, xb.ptr, y.ptr, 0, ms[i], pre, err, errlen);
        float rep_ms[TIMING_REPS];
        for (int r = 0; r < TIMING_REPS && st == QC_OK; r++) {
            st = qc_gpu_memset32(e->g, flush.ptr, (uint32_t)r, TIMING_FLUSH_BYTES / 4, err, errlen);
            if (st == QC_OK) st = qc_gpu_event_record(e->g, ev0, err, errlen);
            if (st == QC_OK) st = linear_exec(e, &T, c, x.ptr, xb.ptr, y.ptr, 0, ms[i], pre, err, errlen);
            if (st == QC_OK) st = qc_gpu_event_record(e->g, ev1, err, errlen);
            if (st == QC_OK) st = qc_gpu_event_elapsed(e->g, ev0, ev1, &rep_ms[r], err, errlen);
        }
        if (st == QC_OK) {
            for (int a = 1; a < TIMING_REPS; a++) /* insertion sort of five */
                for (int b = a; b > 0 && rep_ms[b] < rep_ms[b - 1]; b--) {
                    float t = rep_ms[b];
                    rep_ms[b] = rep_ms[b - 1], rep_ms[b - 1] = t;
                }
            us[i] = rep_ms[TIMING_REPS / 2] * 1e3;
        }
    }
    if (st == QC_OK) st = qc_gpu_sync(e->g, err, errlen);
    e->d_xq.ptr = save_q, e->d_xs.ptr = save_s;
    e->lwork.ptr = save_w, e->lwork_bytes = save_wb;
    if (ev0) qc_gpu_event_destroy(e->g, ev0);
    if (ev1) qc_gpu_event_destroy(e->g, ev1);
    qc_gpu_free(e->g, &x), qc_gpu_free(e->g, &xb), qc_gpu_free(e->g, &y), qc_gpu_free(e->g, &xq);
    qc_gpu_free(e->g, &xs), qc_gpu_free(e->g, &flush), qc_gpu_free(e->g, &work);
    linear_free(e, &T);
    return st;
}

/* Formats that take 8-bit activations need the engine's xq/xs workspace. */
static int needs_xq(const qc_engine *e) {
    if (e->fmt->act_dtype != QC_DT_BF16 && e->fmt->act_dtype != QC_DT_F32) return 1;
    for (int b = 0; e->plan && b < e->s.n_layers; b++) {
        const eng_linear *four[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4; i++)
            for (int a = 0; a <= four[i]->n_alts; a++) {
                const qc_format_desc *f = a ? four[i]->alts[a - 1].fmt : four[i]->fmt;
                if (f->act_dtype != QC_DT_BF16 && f->act_dtype != QC_DT_F32) return 1;
            }
    }
    return 0;
}

static qc_status load_weights(qc_engine *e, qc_model *m, uint64_t seed, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    const qc_format_desc *bf16 = qc_format_find(e->rt, "bf16");
    int64_t H = s->hidden, F = s->intermediate, D = s->head_dim;
    qc_status st = QC_OK;
    uint16_t *tmp = NULL;
    size_t tmp_cap = 0;
#define NEED_TMP(count)                                                                                                \
    do {                                                                                                               \
        if ((size_t)(count) > tmp_cap) {                                                                               \
            free(tmp);                                                                                                 \
            tmp_cap = (size_t)(count);                                                                                 \
            tmp = malloc(tmp_cap * 2);                                                                                 \
            if (!tmp) {                                                                                                \
                qc_errf(err, errlen, "out of memory staging %zu weights", tmp_cap);                                    \
                return QC_ERR_NOMEM;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
    for (int b = 0; b < s->n_layers && st == QC_OK; b++) {
        eng_layer *Ly = &e->layers[b];
        linear_init(&Ly->qkv, "attn.qkv", bf16, e->qkv_n, H);
        linear_init(&Ly->o, "attn.o", bf16, H, e->q_dim);
        linear_init(&Ly->gate_up, "mlp.gate_up", bf16, 2 * F, H);
        linear_init(&Ly->down, "mlp.down", bf16, H, F);
        eng_linear *four[4] = {&Ly->qkv, &Ly->o, &Ly->gate_up, &Ly->down};
        for (int i = 0; i < 4; i++) {
            snprintf(four[i]->name, sizeof four[i]->name, "blk.%d.%s", b, four[i]->role);
            if (e->plan) four[i]->plan_layer = 4 * b + i;
        }
        char what[64];
        uint64_t ls = seed + (uint64_t)b * 1000;
        int quantized = e->fmt != bf16 || e->plan; /* with a policy: load_planned() below */
        if (quantized) {
            Ly->qkv.fmt = Ly->o.fmt = Ly->gate_up.fmt = Ly->down.fmt = e->fmt;
        }
        if (!m) {
            snprintf(what, sizeof what, "blk.%d weights", b);
            if (quantized) {
                if ((st = synthetic_norm(e, H, ls + 5, what, &Ly->attn_norm, err, errlen)) ||
                    (st = synthetic_norm(e, H, ls + 6, what, &Ly->ffn_norm, err, errlen)))
                    break;
                continue;
            }
            if ((st = linear_bf16(e, &Ly->qkv, NULL, ls + 1, what, err, errlen)) ||
                (st = linear_bf16(e, &Ly->o, NULL, ls + 2, what, err, errlen)) ||
                (st = linear_bf16(e, &Ly->gate_up, NULL, ls + 3, what, err, errlen)) ||
                (st = linear_bf16(e, &Ly->down, NULL, ls + 4, what, err, errlen)) ||
                (st = synthetic_norm(e, H, ls + 5, what, &Ly->attn_norm, err, errlen)) ||
                (st = synthetic_norm(e, H, ls + 6, what, &Ly->ffn_norm, err, errlen)))
                break;
            continue;
        }
        qc_block *B = &m->blocks[b];
        const uint16_t *w[7];
        for (int i = 0; i < 7 && !quantized; i++)
            if (!(w[i] = model_bf16(&B->lin[i], err, errlen))) {
                st = QC_ERR_UNSUPPORTED;
                break;
            }
        if (st != QC_OK) break;
        snprintf(what, sizeof what, "blk.%d weights", b);
        if (quantized) {
            if ((st = upload_new(e, B->attn_norm, (size_t)H * 4, QC_MEM_WEIGHTS, what, &Ly->attn_norm, err, errlen)) ||
                (st = upload_new(e, B->ffn_norm, (size_t)H * 4, QC_MEM_WEIGHTS, what, &Ly->ffn_norm, err, errlen)))
                break;
            goto norms_and_bias;
        }
        /* q | k | v and gate | up as one weight each: one launch, one pass over x */
        NEED_TMP(e->qkv_n * H > 2 * F * H ? e->qkv_n * H : 2 * F * H);
        memcpy(tmp, w[0], (size_t)e->q_dim * H * 2);
        memcpy(tmp + e->q_dim * H, w[1], (size_t)e->kv_dim * H * 2);
        memcpy(tmp + (e->q_dim + e->kv_dim) * H, w[2], (size_t)e->kv_dim * H * 2);
        if ((st = linear_bf16(e, &Ly->qkv, tmp, 0, what, err, errlen))) break;
        memcpy(tmp, w[4], (size_t)F * H * 2);
        memcpy(tmp + F * H, w[5], (size_t)F * H * 2);
        if ((st = linear_bf16(e, &Ly->gate_up, tmp, 0, what, err, errlen)) ||
            (st = linear_bf16(e, &Ly->o, w[3], 0, what, err, errlen)) ||
            (st = linear_bf16(e, &Ly->down, w[6], 0, what, err, errlen)) ||
            (st = upload_new(e, B->attn_norm, (size_t)H * 4, QC_MEM_WEIGHTS, what, &Ly->attn_norm, err, errlen)) ||
            (st = upload_new(e, B->ffn_norm, (size_t)H * 4, QC_MEM_WEIGHTS, what, &Ly->ffn_norm, err, errlen)))
            break;
    norms_and_bias:
        if (B->q_norm &&
            ((st = upload_new(e, B->q_norm, (size_t)D * 4, QC_MEM_WEIGHTS, what, &Ly->q_norm, err, errlen)) ||
             (st = upload_new(e, B->k_norm, (size_t)D * 4, QC_MEM_WEIGHTS, what, &Ly->k_norm, err, errlen))))
            break;
        if (B->lin[0].bias || B->lin[1].bias || B->lin[2].bias) {
            float *bias = calloc((size_t)e->qkv_n, sizeof(float));
            if (!bias) {
                st = QC_ERR_NOMEM;
                qc_errf(err, errlen, "out of memory");
                break;
            }
            if (B->lin[0].bias) memcpy(bias, B->lin[0].bias, (size_t)e->q_dim * 4);
            if (B->lin[1].bias) memcpy(bias + e->q_dim, B->lin[1].bias, (size_t)e->kv_dim * 4);
            if (B->lin[2].bias) memcpy(bias + e->q_dim + e->kv_dim, B->lin[2].bias, (size_t)e->kv_dim * 4);
            st = upload_new(e, bias, (size_t)e->qkv_n * 4, QC_MEM_WEIGHTS, what, &Ly->qkv_bias, err, errlen);
            free(bias);
            if (st != QC_OK) break;
        }
    }
    if (st == QC_OK && e->plan)
        st = load_planned(e, m, seed, err, errlen);
    else if (st == QC_OK && e->fmt != bf16)
        st = load_quantized(e, m, seed, err, errlen);
    /* embedding, final norm, head (kept in bf16) */
    int64_t V = s->vocab;
    linear_init(&e->lm_head, "lm_head", bf16, V, H);
    e->tied = s->tied_embeddings;
    if (st == QC_OK && !m) {
        linear_init(&e->lm_head, "lm_head", bf16, V, H);
        st = linear_bf16(e, &e->lm_head, NULL, seed + 7777777, "lm_head", err, errlen);
        if (st == QC_OK) {
            /* the table: uniform with std 1 (rmsnorm follows) */
            st = alloc_buf(e, (size_t)V * H * 2, QC_MEM_WEIGHTS, "token embedding", &e->embed, err, errlen);
            if (st == QC_OK) {
                int64_t count = V * H;
                float scale = (float)sqrt(3.0);
                uint64_t sd = seed + 9999999;
                qc_problem p = problem(count, 1, 0);
                qc_named_arg a[] = {ARG("w", e->embed.ptr), ARG("count", count), ARG("seed", sd), ARG("scale", scale)};
                st = launch(e, e->kern[K_FILL].k, e->kern[K_FILL].fn, &p, a, 4, err, errlen);
            }
        }
        if (st == QC_OK) st = synthetic_norm(e, H, seed + 55, "output norm", &e->out_norm, err, errlen);
        e->tied = 0;
    } else if (st == QC_OK) {
        NEED_TMP(V * H);
        for (size_t i = 0; i < (size_t)V * H; i++) tmp[i] = qc_f32_to_bf16(m->tok_embd[i]);
        st = upload_new(e, tmp, (size_t)V * H * 2, QC_MEM_WEIGHTS, "token embedding", &e->embed, err, errlen);
        if (st == QC_OK)
            st = upload_new(e, m->output_norm, (size_t)H * 4, QC_MEM_WEIGHTS, "output norm", &e->out_norm, err, errlen);
        const qc_packed_weight *head_q = NULL; /* the head in the engine's format when it has no bf16 copy */
        for (int t = 0; t < m->lm_head.n_prep && e->fmt != bf16; t++)
            if (m->lm_head.prep[t].fmt == e->fmt) head_q = &m->lm_head.prep[t].pw;
        for (int t = 0; t < m->lm_head.n_prep; t++)
            if (m->lm_head.prep[t].fmt == bf16) head_q = NULL;
        if (st == QC_OK && head_q) {
            e->tied = 0;
            e->lm_head.fmt = e->fmt;
            st = linear_packed(e, &e->lm_head, head_q, "lm_head", err, errlen);
        } else if (st == QC_OK) {
            const uint16_t *hw = model_bf16(&m->lm_head, err, errlen);
            if (!hw) st = QC_ERR_UNSUPPORTED;
            /* a tied head whose bf16 weights equal the table's shares its buffer */
            else if (e->tied && memcmp(hw, tmp, (size_t)V * H * 2) == 0) {
                e->lm_head.n_bufs = 1;
                snprintf(e->lm_head.buf_names[0], sizeof e->lm_head.buf_names[0], "w.weight");
                e->lm_head.bufs[0] = e->embed; /* shared: freed once, as the embedding */
            } else {
                e->tied = 0;
                st = linear_bf16(e, &e->lm_head, hw, 0, "lm_head", err, errlen);
            }
        }
    }
    free(tmp);
#undef NEED_TMP
    return st;
}

/* ---- create / destroy ---- */

/* One zero-filled workspace for every linear kernel that states one, sized at the step's most rows over the
 * layers' four shapes (any kernel a plan or a fallback may pick: a stated need is what its plugin asked for). */
static qc_status alloc_linear_workspace(qc_engine *e, char *err, size_t errlen) {
    uint64_t need = 0;
    for (int b = 0; b < e->s.n_layers; b++) {
        const eng_linear *ls[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4; i++)
            for (int a = -1; a < ls[i]->n_alts; a++) { /* the layer's format, then a policy's other ones */
                uint64_t w = linear_workspace_need(e, a < 0 ? ls[i] : &ls[i]->alts[a], e->max_step);
                if (w > need) need = w;
            }
    }
    e->lwork_bytes = need;
    return alloc_zeroed_workspace(e, need, "linear workspace", &e->lwork, err, errlen);
}

static qc_status alloc_activations(qc_engine *e, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    size_t T = (size_t)e->max_step, H = (size_t)s->hidden, F = (size_t)s->intermediate;
    size_t wide = F > (size_t)e->q_dim ? F : (size_t)e->q_dim;
    if (H > wide) wide = H;
    e->logit_rows = e->max_seqs > 64 ? e->max_seqs : 64;
    struct {
        qc_gpu_buf *b;
        size_t bytes;
        const char *what;
    } plan[] = {
        {&e->x, T * H * 4, "residual stream"},
        {&e->y, T * H * 4, "normed activations"},
        {&e->yb, T * wide * 2, "bf16 activations"},
        {&e->qkv, T * (size_t)e->qkv_n * 4, "qkv output"},
        {&e->q, T * (size_t)e->q_dim * 4, "rotated queries"},
        {&e->att, T * (size_t)e->q_dim * 4, "attention output"},
        {&e->attb, T * wide * 2, "bf16 attention output"},
        {&e->h, T * H * 4, "block outputs"},
        {&e->gu, T * 2 * F * 4, "gate|up output"},
        {&e->act, T * F * 4, "swiglu output"},
        {&e->actb, T * F * 2, "bf16 swiglu output"},
        {&e->logits, (size_t)e->logit_rows * (size_t)s->vocab * 4, "logits"},
        {&e->logits_rows, (size_t)e->logit_rows * H * 4, "head inputs"},
        {&e->d_ids, T * 4, "token ids"},
        {&e->d_pos, T * 4, "positions"},
        {&e->d_slots, T * 4, "cache slots"},
        {&e->d_last, (size_t)e->logit_rows * 4, "head rows"},
        {&e->d_qstart, ((size_t)e->max_seqs + 1) * 4, "query offsets"},
        {&e->d_ctx, (size_t)e->max_seqs * 4, "context lengths"},
        {&e->d_tables, (size_t)e->max_seqs * (size_t)e->max_blocks * 4, "block tables"},
        {&e->d_next, (size_t)e->logit_rows * 4, "next tokens"},
    };
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        qc_status st = alloc_buf(e, plan[i].bytes, QC_MEM_ACTIVATIONS, plan[i].what, plan[i].b, err, errlen);
        if (st != QC_OK) return st;
    }
    /* 8-bit activations of the widest linear input, scales down to groups of 32 */
    size_t xq = needs_xq(e) ? T * wide : 0;
    if (xq && (qc_gpu_alloc(e->g, xq, xq, QC_MEM_WORKSPACE, "quantized activations", &e->d_xq, err, errlen) ||
               qc_gpu_alloc(e->g, (T * (wide / 32 + 1)) * 4, (T * (wide / 32 + 1)) * 4, QC_MEM_WORKSPACE,
                            "activation scales", &e->d_xs, err, errlen)))
        return QC_ERR_NOMEM;
    size_t work = qc_attn_decode_workspace_bytes(e->max_seqs, s->n_heads, s->head_dim, e->max_context);
    qc_status st = alloc_buf(e, work, QC_MEM_WORKSPACE, "attention workspace", &e->d_work, err, errlen);
    return st == QC_OK ? alloc_linear_workspace(e, err, errlen) : st;
}

static qc_status alloc_kv(qc_engine *e, size_t budget, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    /* one of K or V, one layer; the element size is the KV format's */
    size_t block_bytes = (size_t)QC_KV_BLOCK * (size_t)e->kv_dim * e->kv_elem;
    e->kv_token_bytes = (size_t)s->n_layers * 2 * (size_t)e->kv_dim * e->kv_elem;
    if (!budget) {
        size_t free_b = 0, total = 0;
        qc_status st = qc_gpu_mem_info(e->g, &free_b, &total, err, errlen);
        if (st != QC_OK) return st;
        /* keep 10% of the device (and at least 1 GiB) for the driver, graphs and the rest */
        size_t reserve = total / 10 > ((size_t)1 << 30) ? total / 10 : ((size_t)1 << 30);
        budget = free_b > reserve ? free_b - reserve : 0;
    }
    e->kv_budget_bytes = budget;
    size_t per_block = block_bytes * 2 * (size_t)s->n_layers;
    size_t want = (size_t)e->max_seqs * (size_t)e->max_blocks + 1;
    /* the budget buys token blocks; the zeroed padding block comes on top of
     * it, so that capacity is exactly proportional to 1 / bytes per token
     * (a 1-byte KV format holds exactly twice the tokens of bf16) */
    size_t usable = budget / per_block;
    e->n_blocks = usable + 1;
    e->kv_budget_tokens = usable * QC_KV_BLOCK;
    if (e->n_blocks > want) e->n_blocks = want; /* more would never be used */
    if (usable < 1) {
        qc_errf(err, errlen, "KV cache: %zu bytes hold no block of %d tokens (%zu bytes per block, all layers, K and V)",
                budget, QC_KV_BLOCK, per_block);
        return QC_ERR_NOMEM;
    }
    size_t bytes = e->n_blocks * block_bytes * (size_t)s->n_layers;
    qc_status st = alloc_buf(e, bytes, QC_MEM_KV, "KV cache (K)", &e->kc, err, errlen);
    if (st == QC_OK) st = alloc_buf(e, bytes, QC_MEM_KV, "KV cache (V)", &e->vc, err, errlen);
    if (st != QC_OK) return st;
    for (int b = 0; b < s->n_layers; b++) {
        e->layers[b].k_cache.ptr = e->kc.ptr + (qc_devptr)b * e->n_blocks * block_bytes;
        e->layers[b].v_cache.ptr = e->vc.ptr + (qc_devptr)b * e->n_blocks * block_bytes;
    }
    /* block 0 stays zero: padding rows read it */
    for (int b = 0; b < s->n_layers && st == QC_OK; b++) {
        st = qc_gpu_memset32(e->g, e->layers[b].k_cache.ptr, 0, block_bytes / 4, err, errlen);
        if (st == QC_OK) st = qc_gpu_memset32(e->g, e->layers[b].v_cache.ptr, 0, block_bytes / 4, err, errlen);
    }
    if (st == QC_OK && e->kv_fmt) { /* the scales, one per layer and kv head, K then V */
        size_t n = (size_t)s->n_layers * (size_t)s->n_kv_heads;
        float *sc = malloc(2 * n * sizeof(float));
        if (!sc) {
            qc_errf(err, errlen, "out of memory");
            return QC_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) sc[i] = e->kv_k_scale, sc[n + i] = e->kv_v_scale;
        st = upload_new(e, sc, 2 * n * sizeof(float), QC_MEM_KV, "KV cache scales", &e->kv_scales, err, errlen);
        free(sc);
        for (int b = 0; b < s->n_layers && st == QC_OK; b++) {
            e->layers[b].k_scale = e->kv_scales.ptr + (qc_devptr)b * (qc_devptr)s->n_kv_heads * 4;
            e->layers[b].v_scale = e->layers[b].k_scale + (qc_devptr)n * 4;
        }
    }
    if (st != QC_OK) return st;
    e->free_blocks = malloc(e->n_blocks * sizeof(int));
    if (!e->free_blocks) {
        qc_errf(err, errlen, "out of memory");
        return QC_ERR_NOMEM;
    }
    e->n_free = 0;
    for (size_t i = e->n_blocks; i-- > 1;) e->free_blocks[e->n_free++] = (int)i; /* pops 1, 2, ... */
    return QC_OK;
}

static qc_status make_plan(qc_engine *e, const qc_engine_options *o, char *err, size_t errlen);
/* A KV-cache format other than bf16: its descriptor, element size, scales
 * and the four kernels of the contract in qcore/plugin.h, each eligible for
 * this shape on this device (else the error names the kernel and reason). */
static qc_status kv_format_resolve(qc_engine *e, const qc_engine_options *o, char *err, size_t errlen) {
    const char *name = o->kv_format;
    const qc_format_desc *f = qc_format_find(e->rt, name);
    if (!f || f->kind != QC_FORMAT_KV_CACHE) {
        qc_errf(err, errlen, "engine: KV format '%s' is not a registered KV-cache format", name);
        return QC_ERR_UNSUPPORTED;
    }
    if (f->bits_per_weight != 8 && f->bits_per_weight != 16) {
        qc_errf(err, errlen, "engine: KV format '%s': %g bits per element (the paged cache takes 8 or 16)", name,
                f->bits_per_weight);
        return QC_ERR_UNSUPPORTED;
    }
    float ks = o->kv_k_scale, vs = o->kv_v_scale;
    if (!(ks >= 0 && ks < INFINITY) || !(vs >= 0 && vs < INFINITY)) {
        qc_errf(err, errlen, "engine: KV format '%s': scales %g / %g must be finite and positive (0 = 1.0)", name,
                (double)ks, (double)vs);
        return QC_ERR_INVALID;
    }
    e->kv_fmt = f;
    e->kv_elem = (size_t)(f->bits_per_weight / 8);
    e->kv_variant = o->kv_variant;
    e->kv_scale_option = ks > 0 || vs > 0;
    e->kv_k_scale = ks > 0 ? ks : 1.f;
    e->kv_v_scale = vs > 0 ? vs : 1.f;
    static const char *const suffix[4] = {QC_KV_KERNEL_QKV, QC_KV_KERNEL_DECODE, QC_KV_KERNEL_REDUCE,
                                          QC_KV_KERNEL_PREFILL};
    for (int i = 0; i < 4; i++) {
        snprintf(e->kv_ids[i], sizeof e->kv_ids[i], "%s%s", name, suffix[i]);
        const qc_kernel_desc *k = qc_kernel_find(e->rt, e->kv_ids[i]);
        if (!k) {
            qc_errf(err, errlen, "engine: KV format '%s' has no GPU kernel %s (see the KV-format contract in "
                    "qcore/plugin.h)", name, e->kv_ids[i]);
            return QC_ERR_UNSUPPORTED;
        }
        qc_problem p;
        qc_attn_problem(&p, 1, e->s.n_heads, e->s.n_kv_heads, e->s.head_dim, e->max_blocks);
        if (i == 0) p.n += e->s.n_kv_heads; /* qkv_rope_kv: q + kv heads */
        p.sm = (uint32_t)e->sm;
        qc_reason why;
        if (!qc_select_kernel(k, f, &p, 1, &why)) {
            qc_errf(err, errlen, "engine: KV format '%s': %s: %s: %s", name, e->kv_ids[i], why.code, why.text);
            return QC_ERR_UNSUPPORTED;
        }
    }
    return QC_OK;
}

qc_engine *qc_engine_create(qc_runtime *rt, qc_gpu *g, qc_nvrtc *nv, const qc_engine_options *o, char *err,
                            size_t errlen) {
    if (!rt || !g || !nv || !o || !o->shape) {
        qc_errf(err, errlen, "engine: needs a runtime, a GPU, NVRTC and a model shape");
        return NULL;
    }
    const qc_model_shape *s = o->shape;
    if (s->n_heads <= 0 || s->n_kv_heads <= 0 || s->n_heads % s->n_kv_heads || s->head_dim < 2 || s->head_dim % 2 ||
        s->head_dim > 256 || s->hidden <= 0 || s->intermediate <= 0 || s->n_layers <= 0 || s->vocab <= 0) {
        qc_errf(err, errlen, "engine: unsupported shape (heads %d, kv heads %d, head_dim %d; head_dim must be even "
                "and at most 256, heads a multiple of kv heads)", s->n_heads, s->n_kv_heads, s->head_dim);
        return NULL;
    }
    qc_reason aw;
    if (!qc_attn_shape_supported(s->n_heads, s->n_kv_heads, s->head_dim, &aw)) {
        qc_errf(err, errlen, "engine: attention: %s", aw.text);
        return NULL;
    }
    char fname[32] = "bf16";
    uint32_t group = 0;
    if (o->format) {
        const char *colon = strchr(o->format, ':');
        size_t len = colon ? (size_t)(colon - o->format) : strlen(o->format);
        char *end = NULL;
        if (len == 0 || len >= sizeof fname ||
            (colon && (colon[1] != 'g' || (group = (uint32_t)strtoul(colon + 2, &end, 10)) == 0 || *end))) {
            qc_errf(err, errlen, "engine: format '%s': expected NAME or NAME:g<group size>", o->format);
            return NULL;
        }
        memcpy(fname, o->format, len);
        fname[len] = 0;
    }
    const qc_format_desc *fmt = qc_format_find(rt, fname);
    if (!fmt || fmt->kind != QC_FORMAT_LINEAR || !fmt->quantize) {
        qc_errf(err, errlen, "engine: '%s' is not a registered linear format with a quantizer", fname);
        return NULL;
    }
    qc_engine *e = calloc(1, sizeof *e);
    if (!e) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    e->rt = rt;
    e->fmt = o->policy ? qc_format_find(rt, "bf16") : fmt; /* with a policy `format` is ignored (the head stays bf16) */
    e->group_size = o->policy ? 0 : group;
    pthread_mutex_init(&e->upload_mu, NULL);
    e->g = g;
    e->nv = nv;
    e->s = *s;
    e->sm = qc_gpu_get_info(g)->sm;
    e->max_seqs = o->max_seqs > 0 ? o->max_seqs : 64;
    e->max_context = o->max_context > 0 ? o->max_context : (s->max_positions > 0 && s->max_positions < 4096 ? s->max_positions : 4096);
    e->max_step = o->max_step_tokens > 0 ? o->max_step_tokens : 2048;
    if (e->max_step < e->max_seqs) e->max_step = e->max_seqs;
    e->max_blocks = (e->max_context + QC_KV_BLOCK - 1) / QC_KV_BLOCK;
    e->q_dim = (int64_t)s->n_heads * s->head_dim;
    e->kv_dim = (int64_t)s->n_kv_heads * s->head_dim;
    e->qkv_n = e->q_dim + 2 * e->kv_dim;
    e->use_graphs = o->graphs;
    e->fuse_quant = fuse_quant_env();
    e->gu_bf16 = gu_bf16_env();
    e->grid_dep = qc_gpu_set_grid_dep(g, grid_dep_env());
    e->rope_halves = o->model ? o->model->rope == QC_ROPE_HALVES : 1;
    e->kv_elem = 2;
    const char *ids[K_COUNT];
    memcpy(ids, KERNEL_IDS, sizeof ids);
    qc_status st = QC_OK;
    if (o->kv_format && strcmp(o->kv_format, "bf16") != 0 && (st = kv_format_resolve(e, o, err, errlen)) == QC_OK) {
        ids[K_QKV] = e->kv_ids[0], ids[K_ATTN_DECODE] = e->kv_ids[1];
        ids[K_ATTN_REDUCE] = e->kv_ids[2], ids[K_ATTN_PREFILL] = e->kv_ids[3];
    }
    for (int i = 0; i < K_COUNT && st == QC_OK; i++) {
        e->kern[i].id = ids[i];
        e->kern[i].k = qc_kernel_find(rt, ids[i]);
        qc_reason why;
        if (!e->kern[i].k) {
            qc_errf(err, errlen, "engine: kernel %s is not registered", ids[i]);
            st = QC_ERR_UNSUPPORTED;
        } else if (qc_gpu_kernel_load(g, nv, e->kern[i].k, &e->kern[i].fn, &why) != QC_OK) {
            qc_errf(err, errlen, "engine: kernel %s: %s: %s", ids[i], why.code, why.text);
            st = QC_ERR_UNSUPPORTED;
        }
    }
    size_t ms = (size_t)e->max_seqs;
    if (st == QC_OK) {
        e->layers = calloc((size_t)s->n_layers, sizeof *e->layers);
        e->seq_open = calloc(ms, 1);
        e->seq_len = calloc(ms, sizeof *e->seq_len);
        e->seq_blocks = calloc(ms * (size_t)e->max_blocks, sizeof(int));
        e->seq_nblocks = calloc(ms, sizeof(int));
        e->h_ids = calloc((size_t)e->max_step, 4);
        e->h_pos = calloc((size_t)e->max_step, 4);
        e->h_slots = calloc((size_t)e->max_step, 4);
        e->h_last = calloc(ms > 64 ? ms : 64, 4);
        e->h_qstart = calloc(ms + 1, 4);
        e->h_ctx = calloc(ms, 4);
        e->h_tables = calloc(ms * (size_t)e->max_blocks, 4);
        if (!e->layers || !e->seq_open || !e->seq_len || !e->seq_blocks || !e->seq_nblocks || !e->h_ids ||
            !e->h_pos || !e->h_slots || !e->h_last || !e->h_qstart || !e->h_ctx || !e->h_tables) {
            qc_errf(err, errlen, "out of memory");
            st = QC_ERR_NOMEM;
        }
    }
    if (st == QC_OK && o->policy) st = make_plan(e, o, err, errlen);
    if (st == QC_OK) st = load_weights(e, o->model, o->seed ? o->seed : 0x5eed, err, errlen);
    if (st == QC_OK && e->plan) {
        /* a rebuild may only choose what is on the device now */
        qc_eplan_freeze(e->plan, plan_resident);
        policy_picks(e);
    }
    if (st == QC_OK) {
        int half = s->head_dim / 2;
        float *f = malloc((size_t)half * sizeof(float));
        if (!f) {
            st = QC_ERR_NOMEM;
            qc_errf(err, errlen, "out of memory");
        } else {
            for (int i = 0; i < half; i++)
                f[i] = o->model ? o->model->inv_freq[i] : (float)pow(s->rope_theta > 0 ? s->rope_theta : 10000.0,
                                                                    -2.0 * i / (double)s->head_dim);
            st = upload_new(e, f, (size_t)half * 4, QC_MEM_WEIGHTS, "rotary frequencies", &e->inv_freq, err, errlen);
            free(f);
        }
    }
    if (st == QC_OK) st = alloc_activations(e, err, errlen);
    if (st == QC_OK) st = alloc_kv(e, o->kv_bytes, err, errlen);
    if (st == QC_OK) st = qc_gpu_sync(g, err, errlen);
    if (st != QC_OK) {
        qc_engine_destroy(e);
        return NULL;
    }
    const char *trace = getenv("QCORE_TRACE");
    if (trace && *trace) {
        /* every launch timed with CUDA events: graphs would hide them */
        e->trace = qc_trace_open(trace);
        e->tracer = qc_gpu_tracer_open(g, rt, e->trace);
        e->use_graphs = 0;
    }
    e->launches0 = qc_gpu_launch_count(g);
    e->loaded = 1;
    return e;
}

struct qc_eplan *qc_engine_plan_only(qc_runtime *rt, qc_gpu *g, qc_nvrtc *nv, const qc_engine_options *o, char *err,
                                     size_t errlen) {
    if (!rt || !g || !nv || !o || !o->shape || !o->policy) {
        qc_errf(err, errlen, "engine plan: needs a runtime, a GPU, NVRTC, a model shape and a policy");
        return NULL;
    }
    /* an engine without weights, activations or cache: what timing needs */
    qc_engine *e = calloc(1, sizeof *e);
    if (!e) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    e->rt = rt, e->g = g, e->nv = nv, e->s = *o->shape;
    e->fmt = qc_format_find(rt, "bf16");
    e->sm = qc_gpu_get_info(g)->sm;
    e->fuse_quant = fuse_quant_env(); /* the timings count what a step runs */
    e->grid_dep = qc_gpu_set_grid_dep(g, grid_dep_env());
    e->max_seqs = o->max_seqs > 0 ? o->max_seqs : 64;
    e->max_step = o->max_step_tokens > 0 ? o->max_step_tokens : 2048;
    if (e->max_step < e->max_seqs) e->max_step = e->max_seqs;
    pthread_mutex_init(&e->upload_mu, NULL);
    qc_status st = QC_OK;
    e->kern[K_CAST].id = KERNEL_IDS[K_CAST];
    e->kern[K_CAST].k = qc_kernel_find(rt, KERNEL_IDS[K_CAST]);
    qc_reason why;
    if (!e->kern[K_CAST].k || qc_gpu_kernel_load(g, nv, e->kern[K_CAST].k, &e->kern[K_CAST].fn, &why) != QC_OK) {
        qc_errf(err, errlen, "engine plan: kernel %s: %s", KERNEL_IDS[K_CAST], e->kern[K_CAST].k ? why.text : "not registered");
        st = QC_ERR_UNSUPPORTED;
    }
    if (st == QC_OK) st = make_plan(e, o, err, errlen);
    struct qc_eplan *p = e->plan;
    if (p) qc_eplan_detach(p); /* the callbacks point into this engine */
    pthread_mutex_destroy(&e->upload_mu);
    free(e);
    return st == QC_OK ? p : NULL;
}

static qc_status make_plan(qc_engine *e, const qc_engine_options *o, char *err, size_t errlen) {
    double bw = o->bandwidth_gbs * 1e9;
    if (bw <= 0 && qc_gpu_copy_bandwidth(e->g, &bw, NULL, NULL, err, errlen) != QC_OK) {
        qc_log(QC_LOG_WARN, "policy: copy bandwidth not measured (%s): the device's ridge is unknown", err);
        bw = 0;
    }
    const qc_gpu_info *gi = qc_gpu_get_info(e->g);
    qc_eplan_options po = {.rt = e->rt, .shape = &e->s, .policy = o->policy, .sm = e->sm, .sm_count = gi->sm_count,
                           .device_name = gi->name, .bandwidth_gbs = bw / 1e9, .max_seqs = e->max_seqs,
                           .max_step = e->max_step, .timer = plan_timer, .can_hold = plan_can_hold, .ctx = e,
                           .cache_dir = qc_nvrtc_cache_dir(e->nv)};
    e->plan_model = o->model;
    e->plan = qc_eplan_build(&po, err, errlen);
    return e->plan ? QC_OK : QC_ERR_NOMEM;
}

void qc_engine_destroy(qc_engine *e) {
    if (!e) return;
    qc_gpu_tracer_close(e->tracer);
    if (e->trace) qc_trace_close(e->trace);
    qc_eplan_free(e->plan);
    for (int i = 0; i < e->n_graphs; i++) qc_gpu_graph_destroy(e->g, e->graphs[i].graph);
    if (e->layers)
        for (int b = 0; b < e->s.n_layers; b++) {
            eng_layer *L = &e->layers[b];
            linear_free(e, &L->qkv), linear_free(e, &L->o), linear_free(e, &L->gate_up), linear_free(e, &L->down);
            qc_gpu_free(e->g, &L->attn_norm), qc_gpu_free(e->g, &L->ffn_norm);
            qc_gpu_free(e->g, &L->q_norm), qc_gpu_free(e->g, &L->k_norm), qc_gpu_free(e->g, &L->qkv_bias);
        }
    if (!e->tied) linear_free(e, &e->lm_head);
    qc_gpu_buf *bufs[] = {&e->embed,  &e->out_norm, &e->inv_freq, &e->kc,     &e->vc,          &e->x,
                          &e->y,      &e->yb,       &e->qkv,      &e->q,      &e->att,         &e->attb,
                          &e->h,      &e->gu,       &e->act,      &e->actb,   &e->logits,      &e->logits_rows,
                          &e->d_ids,  &e->d_pos,    &e->d_slots,  &e->d_last, &e->d_qstart,    &e->d_ctx,
                          &e->d_tables, &e->d_next, &e->d_work, &e->d_xq, &e->d_xs, &e->kv_scales, &e->lwork};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) qc_gpu_free(e->g, bufs[i]);
    free(e->layers), free(e->free_blocks), free(e->seq_open), free(e->seq_len), free(e->seq_blocks);
    free(e->seq_nblocks), free(e->h_ids), free(e->h_pos), free(e->h_slots), free(e->h_last), free(e->h_qstart);
    free(e->h_ctx), free(e->h_tables);
    pthread_mutex_destroy(&e->upload_mu);
    free(e);
}

/* ---- sequences ---- */

int qc_engine_seq_open(qc_engine *e) {
    for (int i = 0; i < e->max_seqs; i++)
        if (!e->seq_open[i]) {
            e->seq_open[i] = 1;
            e->seq_len[i] = 0;
            e->seq_nblocks[i] = 0;
            return i;
        }
    return -1;
}

void qc_engine_seq_close(qc_engine *e, int seq) {
    if (seq < 0 || seq >= e->max_seqs || !e->seq_open[seq]) return;
    for (int i = 0; i < e->seq_nblocks[seq]; i++) e->free_blocks[e->n_free++] = e->seq_blocks[(size_t)seq * e->max_blocks + i];
    e->seq_open[seq] = 0;
    e->seq_nblocks[seq] = 0;
    e->seq_len[seq] = 0;
}

size_t qc_engine_seq_len(const qc_engine *e, int seq) {
    return seq >= 0 && seq < e->max_seqs && e->seq_open[seq] ? e->seq_len[seq] : 0;
}

/* ---- the forward pass ---- */

/* Paged attention of one layer: the split-K decode pair when every row is a
 * sequence's only new token, else the causal prefill over the cache.  *bf16:
 * whether attb now holds the output's bf16 copy (a reduce that writes it). */
static qc_status attention(qc_engine *e, eng_layer *L, int64_t rows, int n_seqs, int decode, int *bf16, char *err,
                           size_t errlen) {
    const qc_model_shape *s = &e->s;
    int heads = s->n_heads, kvh = s->n_kv_heads, hd = s->head_dim, mb = e->max_blocks, ns = n_seqs;
    float scale = (float)(1.0 / sqrt((double)hd));
    qc_named_arg a[] = {ARG("q", e->q.ptr),           ARG("k_cache", L->k_cache.ptr), ARG("v_cache", L->v_cache.ptr),
                        ARG("block_tables", e->d_tables.ptr), ARG("ctx_lens", e->d_ctx.ptr), ARG("q_start", e->d_qstart.ptr),
                        ARG("out", e->att.ptr),        ARG("work", e->d_work.ptr),     ARG("n_seqs", ns),
                        ARG("n_heads", heads),         ARG("n_kv_heads", kvh),         ARG("head_dim", hd),
                        ARG("max_blocks", mb),         ARG("scale", scale),
                        ARG(QC_KV_PARAM_K_SCALE, L->k_scale), ARG(QC_KV_PARAM_V_SCALE, L->v_scale),
                        ARG(QC_KV_PARAM_VARIANT, e->kv_variant), ARG("out.bf16", e->attb.ptr)};
    size_t na = sizeof a / sizeof a[0];
    *bf16 = 0;
    void *argv[MAX_ARGS];
    qc_launch_dims d1, d2;
    qc_status st;
    qc_problem pa; /* a KV format's kernels give their own geometry */
    qc_attn_problem(&pa, decode ? ns : rows, heads, kvh, hd, decode ? mb : ns);
    pa.sm = (uint32_t)e->sm;
    if (decode) {
        qc_attn_decode_dims(ns, heads, kvh, hd, mb, &d1, &d2);
        if (e->kv_fmt) e->kern[K_ATTN_DECODE].k->launch_dims(&pa, &d1), e->kern[K_ATTN_REDUCE].k->launch_dims(&pa, &d2);
        if ((st = qc_kernel_bind(e->kern[K_ATTN_DECODE].k, a, na, argv, MAX_ARGS, err, errlen)) ||
            (st = qc_gpu_launch_kernel(e->g, e->kern[K_ATTN_DECODE].k, e->kern[K_ATTN_DECODE].fn, &d1, argv, err, errlen)) ||
            (st = qc_kernel_bind(e->kern[K_ATTN_REDUCE].k, a, na, argv, MAX_ARGS, err, errlen)))
            return st;
        st = qc_gpu_launch_kernel(e->g, e->kern[K_ATTN_REDUCE].k, e->kern[K_ATTN_REDUCE].fn, &d2, argv, err, errlen);
        *bf16 = st == QC_OK && has_param(e->kern[K_ATTN_REDUCE].k, "out.bf16");
        return st;
    }
    qc_attn_prefill_dims(rows, ns, heads, kvh, hd, &d1);
    if (e->kv_fmt) e->kern[K_ATTN_PREFILL].k->launch_dims(&pa, &d1);
    if ((st = qc_kernel_bind(e->kern[K_ATTN_PREFILL].k, a, na, argv, MAX_ARGS, err, errlen))) return st;
    return qc_gpu_launch_kernel(e->g, e->kern[K_ATTN_PREFILL].k, e->kern[K_ATTN_PREFILL].fn, &d1, argv, err, errlen);
}

/* The head for `heads` rows picked by d_last: the last residual add with the
 * final norm, the lm_head linear, and the greedy token of each row. */
static qc_status head(qc_engine *e, int64_t heads, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    int64_t H = s->hidden, V = s->vocab;
    float eps = (float)s->rms_eps;
    qc_status st;
    qc_problem ph = problem(heads, H, 0);
    qc_named_arg af[] = {ARG("x", e->x.ptr),           ARG("h", e->h.ptr),      ARG("weight", e->out_norm.ptr),
                         ARG("y", e->logits_rows.ptr), ARG("y.bf16", e->yb.ptr), ARG("idx", e->d_last.ptr),
                         ARG("m", heads),              ARG("n", H),             ARG("eps", eps)};
    if ((st = launch(e, e->kern[K_ADD_NORM].k, e->kern[K_ADD_NORM].fn, &ph, af, 9, err, errlen))) return st;
    if ((st = linear_run(e, &e->lm_head, e->logits_rows.ptr, e->yb.ptr, e->logits.ptr, heads, err, errlen))) return st;
    qc_problem pa = problem(heads, V, 0);
    qc_named_arg aa[] = {ARG("x", e->logits.ptr), ARG("ids", e->d_next.ptr), ARG("m", heads), ARG("n", V)};
    return launch(e, e->kern[K_ARGMAX].k, e->kern[K_ARGMAX].fn, &pa, aa, 4, err, errlen);
}

/* add+rmsnorm of `rows` rows into the activations of linear L (picked
 * here): y and y.bf16, or with fusion the choice's xq/xs directly (and y /
 * y.bf16 only when its GEMM reads them).  *Lo, *co: what linear_exec runs. */
static qc_status norm_into(qc_engine *e, eng_linear *L, qc_devptr h, qc_devptr weight, int64_t rows, eng_linear **Lo,
                           eng_choice **co, int *pre, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    int64_t H = s->hidden;
    float eps = (float)s->rms_eps;
    qc_devptr none = 0;
    qc_status st = linear_pick(e, L, rows, Lo, co, err, errlen);
    if (st != QC_OK) return st;
    trace_block(e, L); /* linear_pick may have loaded kernels: the norm belongs to the block */
    qc_problem pn = problem(rows, H, 0);
    *pre = fused(e, *co);
    if (!*pre) { /* y and y.bf16, each only when read */
        qc_devptr y = reads_f32(*co) ? e->y.ptr : 0, yb = (*co)->wants_bf16 ? e->yb.ptr : 0;
        qc_named_arg an[] = {ARG("x", e->x.ptr),   ARG("h", h),   ARG("weight", weight), ARG("y", y),
                             ARG("y.bf16", yb), ARG("idx", none), ARG("m", rows), ARG("n", H),
                             ARG("eps", eps)};
        return launch(e, e->kern[K_ADD_NORM].k, e->kern[K_ADD_NORM].fn, &pn, an, 9, err, errlen);
    }
    const qc_kernel_desc *gk = (*co)->k;
    qc_devptr y = has_param(gk, "x") ? e->y.ptr : 0, yb = has_param(gk, "x.bf16") ? e->yb.ptr : 0;
    int32_t recipe = (*co)->fuse;
    qc_named_arg aq[] = {ARG("x", e->x.ptr),     ARG("h", h),         ARG("weight", weight), ARG("idx", none),
                         ARG("xq", e->d_xq.ptr), ARG("xs", e->d_xs.ptr), ARG("y", y),        ARG("y.bf16", yb),
                         ARG("m", rows),         ARG("n", H),         ARG("eps", eps),       ARG("recipe", recipe)};
    return launch(e, e->kern[K_ADD_NORM_Q].k, e->kern[K_ADD_NORM_Q].fn, &pn, aq, 12, err, errlen);
}

/* Everything a step launches for `rows` tokens of `n_seqs` sequences (after
 * the inputs are on the device); `heads` = rows whose logits are wanted. */
static qc_status forward(qc_engine *e, int64_t rows, int n_seqs, int decode, int64_t heads, char *err, size_t errlen) {
    const qc_model_shape *s = &e->s;
    int64_t H = s->hidden, F = s->intermediate, V = s->vocab, vocab = V;
    float eps = (float)s->rms_eps;
    qc_status st;
    e->step_decode = decode;
    if (e->tracer) qc_gpu_tracer_context(e->tracer, "embed", "kernel");
    {
        qc_problem p = problem(rows, H, 0);
        qc_named_arg a[] = {ARG("table", e->embed.ptr), ARG("ids", e->d_ids.ptr), ARG("y", e->x.ptr),
                            ARG("m", rows), ARG("n", H), ARG("vocab", vocab)};
        if ((st = launch(e, e->kern[K_EMBED].k, e->kern[K_EMBED].fn, &p, a, 6, err, errlen))) return st;
    }
    int heads_q = s->n_heads, heads_kv = s->n_kv_heads, hd = s->head_dim;
    int halves = e->rope_halves;
    for (int b = 0; b < s->n_layers; b++) {
        eng_layer *L = &e->layers[b];
        if (e->tracer) {
            char blk[16];
            snprintf(blk, sizeof blk, "blk.%d", b);
            qc_gpu_tracer_context(e->tracer, blk, "kernel");
        }
        qc_devptr hin = b > 0 ? e->h.ptr : 0;
        eng_linear *LV;
        eng_choice *ch;
        int pre;
        if ((st = norm_into(e, &L->qkv, hin, L->attn_norm.ptr, rows, &LV, &ch, &pre, err, errlen)) ||
            (st = linear_exec(e, LV, ch, e->y.ptr, e->yb.ptr, e->qkv.ptr, 0, rows, pre, err, errlen)))
            return st;
        qc_problem pq = problem(rows, heads_q + heads_kv, hd);
        int64_t ld = e->qkv_n;
        qc_named_arg aq[] = {ARG("qkv", e->qkv.ptr),       ARG("ld", ld),
                             ARG("bias", L->qkv_bias.ptr), ARG("q", e->q.ptr),
                             ARG("k_cache", L->k_cache.ptr), ARG("v_cache", L->v_cache.ptr),
                             ARG("slots", e->d_slots.ptr), ARG("pos", e->d_pos.ptr),
                             ARG("inv_freq", e->inv_freq.ptr), ARG("q_norm", L->q_norm.ptr),
                             ARG("k_norm", L->k_norm.ptr), ARG("m", rows),
                             ARG("heads", heads_q),        ARG("kv_heads", heads_kv),
                             ARG("head_dim", hd),          ARG("halves", halves),
                             ARG("eps", eps),              ARG(QC_KV_PARAM_K_SCALE, L->k_scale),
                             ARG(QC_KV_PARAM_V_SCALE, L->v_scale), ARG(QC_KV_PARAM_VARIANT, e->kv_variant)};
        if ((st = launch(e, e->kern[K_QKV].k, e->kern[K_QKV].fn, &pq, aq, 20, err, errlen))) return st;
        int attb_ok;
        if ((st = attention(e, L, rows, n_seqs, decode, &attb_ok, err, errlen)) ||
            (st = linear_pick(e, &L->o, rows, &LV, &ch, err, errlen)))
            return st;
        /* the reduce wrote the bf16 copy: no cast launch, unless the cast also quantizes (fused) */
        qc_devptr ob = attb_ok && !fused(e, ch) ? e->attb.ptr : 0;
        if ((st = linear_exec(e, LV, ch, e->att.ptr, ob, e->h.ptr, 0, rows, 0, err, errlen))) return st;
        if ((st = norm_into(e, &L->gate_up, e->h.ptr, L->ffn_norm.ptr, rows, &LV, &ch, &pre, err, errlen)) ||
            (st = linear_exec(e, LV, ch, e->y.ptr, e->yb.ptr, e->gu.ptr, e->gu_bf16 ? e->gu.ptr : 0, rows, pre, err,
                              errlen)))
            return st;
        /* gate | up as bf16 when its kernel wrote them so (half the bytes written and read again by SwiGLU) */
        int32_t gu_b = e->gu_bf16 && writes_bf16(ch);
        qc_problem ps = problem(rows, F, 0);
        qc_devptr up = e->gu.ptr + (qc_devptr)F * (gu_b ? 2 : 4);
        int64_t ld2 = 2 * F;
        if ((st = linear_pick(e, &L->down, rows, &LV, &ch, err, errlen))) return st;
        trace_block(e, &L->down); /* linear_pick may have loaded kernels: swiglu belongs to the block */
        pre = fused(e, ch);
        if (!pre) {
            qc_devptr ya = reads_f32(ch) ? e->act.ptr : 0, yab = ch->wants_bf16 ? e->actb.ptr : 0;
            qc_named_arg as[] = {ARG("gate", e->gu.ptr), ARG("up", up),   ARG("ld", ld2), ARG("y", ya),
                                 ARG("y.bf16", yab),     ARG("m", rows), ARG("n", F),   ARG("in_bf16", gu_b)};
            if ((st = launch(e, e->kern[K_SWIGLU].k, e->kern[K_SWIGLU].fn, &ps, as, 8, err, errlen))) return st;
        } else {
            qc_devptr ya = has_param(ch->k, "x") ? e->act.ptr : 0, yab = has_param(ch->k, "x.bf16") ? e->actb.ptr : 0;
            int32_t recipe = ch->fuse;
            qc_named_arg as[] = {ARG("gate", e->gu.ptr), ARG("up", up),   ARG("ld", ld2),     ARG("xq", e->d_xq.ptr),
                                 ARG("xs", e->d_xs.ptr), ARG("y", ya),    ARG("y.bf16", yab), ARG("m", rows),
                                 ARG("n", F),            ARG("recipe", recipe), ARG("in_bf16", gu_b)};
            if ((st = launch(e, e->kern[K_SWIGLU_Q].k, e->kern[K_SWIGLU_Q].fn, &ps, as, 11, err, errlen))) return st;
        }
        if ((st = linear_exec(e, LV, ch, e->act.ptr, e->actb.ptr, e->h.ptr, 0, rows, pre, err, errlen))) return st;
    }
    if (e->tracer) qc_gpu_tracer_context(e->tracer, "head", "kernel");
    return head(e, heads, err, errlen);
}

static int bucket_of(int n) {
    int b = 1;
    while (b < n) b <<= 1;
    return b;
}

static qc_status upload_inputs(qc_engine *e, int64_t rows, int n_rows_seq, int64_t heads, char *err, size_t errlen) {
    qc_status st;
    if ((st = qc_gpu_upload(e->g, e->d_ids.ptr, e->h_ids, (size_t)rows * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_pos.ptr, e->h_pos, (size_t)rows * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_slots.ptr, e->h_slots, (size_t)rows * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_last.ptr, e->h_last, (size_t)heads * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_qstart.ptr, e->h_qstart, ((size_t)n_rows_seq + 1) * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_ctx.ptr, e->h_ctx, (size_t)n_rows_seq * 4, err, errlen)) ||
        (st = qc_gpu_upload(e->g, e->d_tables.ptr, e->h_tables, (size_t)n_rows_seq * (size_t)e->max_blocks * 4, err,
                            errlen)))
        return st;
    return QC_OK;
}

qc_status qc_engine_step(qc_engine *e, const qc_engine_batch *b, char *err, size_t errlen) {
    if (!e || !b || b->n_seqs <= 0 || b->n_seqs > e->max_seqs || !b->seqs || !b->n_tokens || !b->tokens) {
        qc_errf(err, errlen, "engine step: needs 1 to %d sequences with token counts and tokens", e ? e->max_seqs : 0);
        return QC_ERR_INVALID;
    }
    const qc_model_shape *s = &e->s;
    int64_t rows = 0;
    int decode = 1;
    for (int i = 0; i < b->n_seqs; i++) {
        int q = b->seqs[i];
        if (q < 0 || q >= e->max_seqs || !e->seq_open[q]) {
            qc_errf(err, errlen, "engine step: sequence %d is not open", q);
            return QC_ERR_INVALID;
        }
        for (int j = 0; j < i; j++)
            if (b->seqs[j] == q) {
                qc_errf(err, errlen, "engine step: sequence %d appears twice in one step", q);
                return QC_ERR_INVALID;
            }
        if (b->n_tokens[i] <= 0) {
            qc_errf(err, errlen, "engine step: sequence %d gets %d tokens", q, b->n_tokens[i]);
            return QC_ERR_INVALID;
        }
        if (e->seq_len[q] + (size_t)b->n_tokens[i] > (size_t)e->max_context) {
            qc_errf(err, errlen, "context full: sequence %d has %zu tokens, %d more exceed the %d positions", q,
                    e->seq_len[q], b->n_tokens[i], e->max_context);
            return QC_ERR_INVALID;
        }
        if (b->n_tokens[i] != 1) decode = 0;
        rows += b->n_tokens[i];
    }
    if (rows > e->max_step) {
        qc_errf(err, errlen, "engine step: %lld tokens exceed the step limit of %d (split the prompt)", (long long)rows,
                e->max_step);
        return QC_ERR_INVALID;
    }
    for (int64_t t = 0; t < rows; t++)
        if (b->tokens[t] < 0 || b->tokens[t] >= s->vocab) {
            qc_errf(err, errlen, "token id %d is outside the vocabulary (%d)", b->tokens[t], s->vocab);
            return QC_ERR_INVALID;
        }
    /* blocks for the new tokens, all or none */
    size_t need = 0;
    for (int i = 0; i < b->n_seqs; i++) {
        int q = b->seqs[i];
        size_t len = e->seq_len[q] + (size_t)b->n_tokens[i];
        size_t blocks = (len + QC_KV_BLOCK - 1) / QC_KV_BLOCK;
        need += blocks - (size_t)e->seq_nblocks[q];
    }
    if (need > e->n_free) {
        qc_errf(err, errlen, "KV cache full: the step needs %zu more blocks of %d tokens, %zu are free (capacity %zu "
                "tokens)", need, QC_KV_BLOCK, e->n_free, (e->n_blocks - 1) * QC_KV_BLOCK);
        return QC_ERR_NOMEM;
    }
    for (int i = 0; i < b->n_seqs; i++) {
        int q = b->seqs[i];
        size_t len = e->seq_len[q] + (size_t)b->n_tokens[i];
        while ((size_t)e->seq_nblocks[q] * QC_KV_BLOCK < len)
            e->seq_blocks[(size_t)q * e->max_blocks + e->seq_nblocks[q]++] = e->free_blocks[--e->n_free];
    }
    /* inputs: per token id, position, slot; per sequence offsets, lengths, tables */
    int bucket = decode && e->use_graphs ? bucket_of(b->n_seqs) : b->n_seqs;
    if (bucket > e->max_seqs) bucket = e->max_seqs;
    int64_t t = 0;
    for (int i = 0; i < bucket; i++) {
        e->h_qstart[i] = (int32_t)t;
        int32_t *tab = e->h_tables + (size_t)i * e->max_blocks;
        if (i >= b->n_seqs) { /* padding row: one token reading the zero block */
            e->h_ids[t] = 0, e->h_pos[t] = 0, e->h_slots[t] = -1;
            e->h_ctx[i] = 1;
            memset(tab, 0, (size_t)e->max_blocks * 4);
            e->h_last[i] = (int32_t)t;
            t++;
            continue;
        }
        int q = b->seqs[i];
        size_t pos0 = e->seq_len[q];
        for (int j = 0; j < b->n_tokens[i]; j++, t++) {
            size_t p = pos0 + (size_t)j;
            e->h_ids[t] = b->tokens[t];
            e->h_pos[t] = (int32_t)p;
            e->h_slots[t] = e->seq_blocks[(size_t)q * e->max_blocks + p / QC_KV_BLOCK] * QC_KV_BLOCK +
                            (int32_t)(p % QC_KV_BLOCK);
        }
        e->h_ctx[i] = (int32_t)(pos0 + (size_t)b->n_tokens[i]);
        memcpy(tab, e->seq_blocks + (size_t)q * e->max_blocks, (size_t)e->seq_nblocks[q] * 4);
        memset(tab + e->seq_nblocks[q], 0, (size_t)(e->max_blocks - e->seq_nblocks[q]) * 4);
        e->h_last[i] = (int32_t)(t - 1);
    }
    e->h_qstart[bucket] = (int32_t)t;
    int64_t total_rows = t;
    qc_status st = QC_OK;
    if (b->all_logits) {
        /* every row's logits: the body once, then the head in chunks */
        int64_t chunk = e->logit_rows;
        for (int64_t r0 = 0; r0 < total_rows && st == QC_OK; r0 += chunk) {
            int64_t nr = total_rows - r0 < chunk ? total_rows - r0 : chunk;
            for (int64_t r = 0; r < nr; r++) e->h_last[r] = (int32_t)(r0 + r);
            if (r0 == 0) {
                st = upload_inputs(e, total_rows, bucket, nr, err, errlen);
                if (st == QC_OK) st = forward(e, total_rows, bucket, decode, nr, err, errlen);
            } else {
                /* the head only: rerun its three launches on the next rows */
                st = qc_gpu_upload(e->g, e->d_last.ptr, e->h_last, (size_t)nr * 4, err, errlen);
                if (st == QC_OK) st = head(e, nr, err, errlen);
            }
            if (st == QC_OK && b->logits)
                st = qc_gpu_download(e->g, b->logits + (size_t)r0 * s->vocab, e->logits.ptr,
                                     (size_t)nr * (size_t)s->vocab * 4, err, errlen);
            if (st == QC_OK && b->next && r0 == 0) {
                /* next token of each sequence: from its last row's logits, done below */
            }
        }
        if (st == QC_OK && b->next) {
            for (int i = 0; i < b->n_seqs; i++) {
                /* argmax of the last row of sequence i, on the host logits when given */
                int64_t last = (int64_t)e->h_qstart[i + 1] - 1;
                if (b->logits) {
                    const float *row = b->logits + (size_t)last * s->vocab;
                    int best = -1;
                    for (int v = 0; v < s->vocab; v++)
                        if (row[v] == row[v] && (best < 0 || row[v] > row[best])) best = v;
                    b->next[i] = best;
                } else {
                    b->next[i] = -1;
                }
            }
        }
    } else {
        st = upload_inputs(e, total_rows, bucket, bucket, err, errlen);
        if (st == QC_OK) {
            qc_gpu_graph graph = NULL;
            if (decode && e->use_graphs) {
                for (int i = 0; i < e->n_graphs; i++)
                    if (e->graphs[i].bucket == bucket) graph = e->graphs[i].graph;
                if (!graph && e->n_graphs < MAX_BUCKETS) {
                    /* kernels are loaded before capture: a capture may not load modules */
                    st = forward(e, total_rows, bucket, decode, bucket, err, errlen);
                    if (st == QC_OK) st = qc_gpu_sync(e->g, err, errlen);
                    if (st == QC_OK) st = qc_gpu_capture_begin(e->g, err, errlen);
                    if (st == QC_OK) {
                        qc_status fs = forward(e, total_rows, bucket, decode, bucket, err, errlen);
                        qc_gpu_graph gr = NULL;
                        st = qc_gpu_capture_end(e->g, &gr, err, errlen);
                        if (fs != QC_OK) st = fs;
                        if (st == QC_OK) {
                            e->graphs[e->n_graphs].bucket = bucket;
                            e->graphs[e->n_graphs++].graph = gr;
                            graph = gr;
                        }
                    }
                    /* the warm-up run already computed this step; replaying it is harmless
                       (same inputs, the cache slots get the same values) */
                }
            }
            if (st == QC_OK) st = graph ? qc_gpu_graph_launch(e->g, graph, err, errlen)
                                        : forward(e, total_rows, bucket, decode, bucket, err, errlen);
        }
        if (st == QC_OK && b->logits)
            st = qc_gpu_download(e->g, b->logits, e->logits.ptr, (size_t)b->n_seqs * (size_t)s->vocab * 4, err, errlen);
        if (st == QC_OK && b->next) st = qc_gpu_download(e->g, b->next, e->d_next.ptr, (size_t)b->n_seqs * 4, err, errlen);
        if (st == QC_OK && !b->logits && !b->next) st = qc_gpu_sync(e->g, err, errlen);
    }
    if (st == QC_OK && e->tracer) st = qc_gpu_tracer_flush(e->tracer, err, errlen);
    if (st != QC_OK) {
        /* give back the blocks this step took */
        for (int i = 0; i < b->n_seqs; i++) {
            int q = b->seqs[i];
            size_t keep = (e->seq_len[q] + QC_KV_BLOCK - 1) / QC_KV_BLOCK;
            while ((size_t)e->seq_nblocks[q] > keep)
                e->free_blocks[e->n_free++] = e->seq_blocks[(size_t)q * e->max_blocks + --e->seq_nblocks[q]];
        }
        return st;
    }
    for (int i = 0; i < b->n_seqs; i++) e->seq_len[b->seqs[i]] += (size_t)b->n_tokens[i];
    return QC_OK;
}

void qc_engine_get_stats(const qc_engine *e, qc_engine_stats *out) {
    memset(out, 0, sizeof *out);
    qc_gpu_ledger_row w = qc_gpu_ledger_get(e->g, QC_MEM_WEIGHTS), sc = qc_gpu_ledger_get(e->g, QC_MEM_SCALES);
    qc_gpu_ledger_row z = qc_gpu_ledger_get(e->g, QC_MEM_ZEROS), pd = qc_gpu_ledger_get(e->g, QC_MEM_PADDING);
    out->weight_bytes = w.resident + sc.resident + z.resident + pd.resident;
    out->kv_bytes = e->kc.resident + e->vc.resident;
    out->kv_bytes_per_token = e->kv_token_bytes;
    out->kv_capacity_tokens = (e->n_blocks - 1) * QC_KV_BLOCK;
    out->kv_blocks_free = e->n_free;
    out->kv_budget_tokens = e->kv_budget_tokens;
    out->kv_format = e->kv_fmt ? e->kv_fmt->name : "bf16";
    out->kv_elem_bytes = e->kv_elem;
    out->kv_budget_bytes = e->kv_budget_bytes;
    out->graphs_captured = e->n_graphs;
    out->grid_dep = e->grid_dep;
    const eng_linear *all[4];
    for (int b = 0; b < e->s.n_layers; b++) {
        all[0] = &e->layers[b].qkv, all[1] = &e->layers[b].o, all[2] = &e->layers[b].gate_up, all[3] = &e->layers[b].down;
        for (int i = 0; i < 4; i++) {
            /* with a policy: the format a batch-1 decode step runs */
            int v = e->plan && all[i]->pick_gen == qc_eplan_generation(e->plan) ? all[i]->pick[0][0] : 0;
            const eng_linear *V = v > 0 ? &all[i]->alts[v - 1] : all[i];
            for (int j = 0; j < V->n_bufs; j++) out->step_weight_bytes += V->bufs[j].resident;
        }
    }
    out->launches = qc_gpu_launch_count(e->g) - e->launches0;
    out->trace_events = qc_gpu_tracer_events(e->tracer);
    for (int j = 0; j < e->lm_head.n_bufs; j++) out->step_weight_bytes += e->lm_head.bufs[j].resident;
}

void qc_engine_print_kernels(const qc_engine *e, FILE *f) {
    const eng_linear *ls[] = {&e->layers[0].qkv, &e->layers[0].o, &e->layers[0].gate_up, &e->layers[0].down,
                              &e->lm_head};
    for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++)
        for (int a = 0; a <= ls[i]->n_alts; a++) {
            const eng_linear *V = a ? &ls[i]->alts[a - 1] : ls[i];
            fprintf(f, "  %-12s [%6lld x %6lld] %s:", V->role, (long long)V->n, (long long)V->k, V->fmt->name);
            int any = 0;
            for (int c = 0; c < KCACHE; c++)
                if (V->cache[c].k) {
                    fprintf(f, " m=%lld -> %s", (long long)V->cache[c].m, V->cache[c].k->id);
                    any = 1;
                }
            fprintf(f, "%s\n", any ? "" : " (not run yet)");
        }
}

const struct qc_eplan *qc_engine_plan(const qc_engine *e) { return e->plan; }

static size_t linear_bytes(const eng_linear *L) {
    size_t b = 0;
    for (int j = 0; j < L->n_bufs; j++) b += L->bufs[j].resident;
    return b;
}

void qc_engine_print_resident(const qc_engine *e, FILE *f) {
    const qc_format_desc *fs[16];
    size_t bytes[16] = {0}, count[16] = {0}, nf = 0;
    for (int b = 0; b < e->s.n_layers; b++) {
        const eng_linear *four[4] = {&e->layers[b].qkv, &e->layers[b].o, &e->layers[b].gate_up, &e->layers[b].down};
        for (int i = 0; i < 4; i++)
            for (int a = 0; a <= four[i]->n_alts; a++) {
                const eng_linear *V = a ? &four[i]->alts[a - 1] : four[i];
                size_t k = 0;
                while (k < nf && fs[k] != V->fmt) k++;
                if (k == nf && nf < 16) fs[nf++] = V->fmt;
                if (k < 16) bytes[k] += linear_bytes(V), count[k]++;
            }
    }
    fprintf(f, "resident linear weights per format (block linears; q|k|v and gate|up fused):\n");
    size_t total = 0;
    for (size_t k = 0; k < nf; k++) {
        fprintf(f, "  %-10s %4zu linears %10.3f GiB\n", fs[k]->name, count[k], bytes[k] / 1073741824.0);
        total += bytes[k];
    }
    fprintf(f, "  %-10s %4d linear %11.3f GiB%s\n", "lm_head", 1, e->tied ? 0.0 : linear_bytes(&e->lm_head) / 1073741824.0,
            e->tied ? " (shares the embedding table)" : "");
    fprintf(f, "  %-10s %16.3f GiB\n", "total", (total + (e->tied ? 0 : linear_bytes(&e->lm_head))) / 1073741824.0);
}

/* "fmt[/group/scheme];..." of every variant: rows of the recipe fold on it */
static void variants_key(const eng_linear *L, char *buf, size_t len) {
    qc_sbuf b = {0};
    for (int a = 0; a <= L->n_alts; a++) {
        const eng_linear *V = a ? &L->alts[a - 1] : L;
        qc_sbuf_printf(&b, "%s/%u/%u;", V->fmt->name, V->group_size, V->scheme);
    }
    qc_strlcpy(buf, b.data ? b.data : "", len);
    qc_sbuf_free(&b);
}

static json_t *variants_json(const eng_linear *L) {
    json_t *arr = json_array();
    for (int a = 0; a <= L->n_alts; a++) {
        const eng_linear *V = a ? &L->alts[a - 1] : L;
        json_array_append_new(arr, json_pack("{s:s,s:i,s:i,s:I}", "format", V->fmt->name, "group_size",
                                             (int)V->group_size, "scheme", (int)V->scheme, "bytes",
                                             (json_int_t)linear_bytes(V)));
    }
    return arr;
}

void *qc_engine_recipe_json(const qc_engine *e) {
    json_t *rows = json_array();
    static const char *names[4] = {"attn.qkv", "attn.o", "mlp.gate_up", "mlp.down"};
    for (int r = 0; r < 4; r++)
        for (int b = 0; b < e->s.n_layers;) {
            const eng_layer *Ly = &e->layers[b];
            const eng_linear *four[4] = {&Ly->qkv, &Ly->o, &Ly->gate_up, &Ly->down};
            char key[256], next[256];
            variants_key(four[r], key, sizeof key);
            int end = b + 1;
            for (; end < e->s.n_layers; end++) {
                const eng_layer *Ln = &e->layers[end];
                const eng_linear *fn[4] = {&Ln->qkv, &Ln->o, &Ln->gate_up, &Ln->down};
                variants_key(fn[r], next, sizeof next);
                if (strcmp(key, next) != 0) break;
            }
            char layers[48];
            snprintf(layers, sizeof layers, end - 1 > b ? "blk.%d-%d" : "blk.%d", b, end - 1);
            json_array_append_new(rows, json_pack("{s:s,s:s,s:I,s:I,s:o}", "layers", layers, "linear", names[r], "n",
                                                  (json_int_t)four[r]->n, "k", (json_int_t)four[r]->k,
                                                  "resident", variants_json(four[r])));
            b = end;
        }
    json_array_append_new(rows, json_pack("{s:s,s:s,s:I,s:I,s:o}", "layers", "lm_head", "linear", "lm_head", "n",
                                          (json_int_t)e->lm_head.n, "k", (json_int_t)e->lm_head.k, "resident",
                                          variants_json(&e->lm_head)));
    return rows;
}

void *qc_engine_kernels_json(const qc_engine *e) {
    json_t *arr = json_array();
    /* every kernel any layer's variant has chosen, with its format and plugin */
    for (int b = 0; b <= e->s.n_layers; b++) {
        const eng_linear *four[4] = {NULL, NULL, NULL, NULL};
        if (b < e->s.n_layers)
            four[0] = &e->layers[b].qkv, four[1] = &e->layers[b].o, four[2] = &e->layers[b].gate_up,
            four[3] = &e->layers[b].down;
        else
            four[0] = &e->lm_head;
        for (int i = 0; i < 4 && four[i]; i++)
            for (int a = 0; a <= four[i]->n_alts; a++) {
                const eng_linear *V = a ? &four[i]->alts[a - 1] : four[i];
                for (int c = 0; c < KCACHE; c++) {
                    const qc_kernel_desc *ks[2] = {V->cache[c].k, V->cache[c].quant};
                    for (int q = 0; q < 2; q++) {
                        if (!ks[q]) continue;
                        int seen = 0;
                        size_t idx;
                        json_t *v;
                        json_array_foreach(arr, idx, v) seen |=
                            strcmp(json_string_value(json_object_get(v, "id")), ks[q]->id) == 0;
                        if (!seen)
                            json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "id", ks[q]->id, "format",
                                                                 ks[q]->format, "plugin",
                                                                 qc_format_plugin(e->rt, ks[q]->format)));
                    }
                }
            }
    }
    for (int i = 0; i < K_COUNT; i++)
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "id", e->kern[i].id, "format", "bf16", "plugin",
                                             qc_format_plugin(e->rt, "bf16")));
    return arr;
}

void qc_engine_get_kv_info(const qc_engine *e, qc_engine_kv_info *out) {
    memset(out, 0, sizeof *out);
    out->format = e->kv_fmt ? e->kv_fmt->name : "bf16";
    out->elem_bytes = e->kv_elem;
    out->variant = e->kv_variant;
    out->k_scale = e->kv_fmt ? e->kv_k_scale : 1.f;
    out->v_scale = e->kv_fmt ? e->kv_v_scale : 1.f;
    out->scale_source = !e->kv_fmt ? "none" : e->kv_scale_option ? "option" : "default 1.0";
}
