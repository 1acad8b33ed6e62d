/* qcore/plugin.h - the plugin ABI: the only header a qcore plugin includes. */
#ifndef QCORE_PLUGIN_H
#define QCORE_PLUGIN_H

/*
 * A plugin is a shared object that exports one symbol, QC_PLUGIN_ENTRY_SYMBOL,
 * of type `const qc_plugin_entry`.  The host dlopen()s it with
 * RTLD_NOW|RTLD_LOCAL, checks `abi_version` and `struct_size`, then calls
 * `init` with a table of host functions (`qc_host_api`).  Plugins never link
 * against libqcore: everything they need from the host is in that table.
 *
 * Growth rules (as SQLite's sqlite3_api_routines and CLAP's entry):
 *  - every struct starts with `struct_size` (and the entry and host table with
 *    `abi_version` before it);
 *  - new fields are only ever appended; a reader checks `struct_size` before
 *    touching a field past the first version's end;
 *  - QC_PLUGIN_ABI_VERSION changes only when an existing field changes meaning.
 *
 * Ownership and threads are stated per pointer.  "host-owned" means the host
 * allocated it and frees it; "plugin-owned, static" means it must live until
 * the plugin's `deinit` returns (string literals and static tables do).
 * Unless a comment says otherwise every callback may be called from any host
 * thread, but never concurrently on the same packed weight.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QC_PLUGIN_ABI_VERSION 1u
#define QC_PLUGIN_ENTRY_SYMBOL "qcore_plugin_entry"

#if defined(__GNUC__)
#define QC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define QC_PLUGIN_EXPORT
#endif

/* Status codes shared by host and plugins. */
typedef enum qc_status {
    QC_OK = 0,
    QC_ERR_INVALID = 1,     /* bad argument or shape */
    QC_ERR_NOMEM = 2,       /* an allocation failed */
    QC_ERR_UNSUPPORTED = 3, /* the format/kernel cannot do this */
    QC_ERR_IO = 4,
    QC_ERR_INTERNAL = 5
} qc_status;

/* Element types.  Values are part of the ABI: append only. */
typedef enum qc_dtype {
    QC_DT_NONE = 0,
    QC_DT_F32,
    QC_DT_F16,
    QC_DT_BF16,
    QC_DT_I8,
    QC_DT_U8,
    QC_DT_I4,      /* signed 4-bit, two per byte */
    QC_DT_U4,      /* unsigned 4-bit, two per byte */
    QC_DT_I32,
    QC_DT_F8_E4M3, /* OCP E4M3 "fn": max 448, no inf */
    QC_DT_F8_E5M2,
    QC_DT_F4_E2M1,
    QC_DT_E8M0,    /* OCP MX shared scale */
    QC_DT_F64,
    QC_DT_I64,
    QC_DT_COUNT_
} qc_dtype;

/* Where one scale applies. */
typedef enum qc_granularity {
    QC_GRAN_NONE = 0,
    QC_GRAN_TENSOR,  /* one scale for the whole tensor */
    QC_GRAN_CHANNEL, /* one per output channel (row of W) */
    QC_GRAN_GROUP,   /* one per `group_size` consecutive K elements of a row */
    QC_GRAN_BLOCK,   /* one per block_n x block_k tile */
    QC_GRAN_TOKEN,   /* one per activation row (dynamic) */
    QC_GRAN_HEAD,    /* one per attention head (KV caches) */
    QC_GRAN_COUNT_
} qc_granularity;

/* What a format is for. */
typedef enum qc_format_kind {
    QC_FORMAT_LINEAR = 1,  /* weights of a linear layer, y = x W^T */
    QC_FORMAT_KV_CACHE = 2 /* keys and values of the attention cache */
} qc_format_kind;

typedef enum qc_phase {
    QC_PHASE_PREFILL = 1,
    QC_PHASE_DECODE = 2
} qc_phase;
#define QC_PHASE_ANY (QC_PHASE_PREFILL | QC_PHASE_DECODE)

/* A CUDA compute capability as major*10+minor: 80 = sm_80, 90 = sm_90.  An
 * `a` suffix (sm_90a) is a property of the compile, not of the range. */
typedef struct qc_arch_range {
    uint32_t min_sm; /* inclusive; 0 = CPU-only (no GPU arch) */
    uint32_t max_sm; /* inclusive; QC_SM_ANY = no upper bound */
} qc_arch_range;
#define QC_SM_ANY 0xFFFFu

/* Why something is not eligible: a short machine code and a sentence.
 * Codes used by the core: "arch", "align_n", "align_k", "group", "m_range",
 * "phase", "missing", "compile", "policy", "shape".  Plugins may add their own
 * (lower-case, no spaces). */
#define QC_REASON_CODE_MAX 24
#define QC_REASON_TEXT_MAX 240
typedef struct qc_reason {
    char code[QC_REASON_CODE_MAX]; /* "" when eligible */
    char text[QC_REASON_TEXT_MAX];
} qc_reason;

/* The problem a format or kernel is asked to take. */
typedef struct qc_problem {
    uint32_t struct_size;
    uint32_t sm;          /* device arch (major*10+minor); 0 = CPU reference */
    int64_t m, n, k;      /* y[m,n] = x[m,k] W[n,k]^T */
    uint32_t group_size;  /* weight group size asked for; 0 = format default */
    qc_phase phase;
    const char *layer;    /* layer name or NULL; host-owned, valid during the call */
    uint32_t scheme;      /* the packed weight's scheme id (format-defined); 0 = default */
} qc_problem;

/* ---- buffers of a prepared (quantized and packed) weight ---------------- */

/* Memory-ledger categories: resident bytes are reported per category. */
typedef enum qc_mem_category {
    QC_MEM_WEIGHTS = 0,
    QC_MEM_SCALES,
    QC_MEM_ZEROS,
    QC_MEM_PADDING,
    QC_MEM_KV,
    QC_MEM_ACTIVATIONS,
    QC_MEM_WORKSPACE,
    QC_MEM_GRAPH_POOL,
    QC_MEM_COUNT_
} qc_mem_category;

#define QC_MAX_WEIGHT_BUFFERS 6
typedef struct qc_buffer {
    const char *name;         /* e.g. "qweight", "scales": plugin-owned, static */
    void *data;               /* allocated with host->alloc; owner: the qc_packed_weight */
    size_t bytes;             /* resident bytes, padding included */
    qc_dtype dtype;
    qc_mem_category category;
} qc_buffer;

/* A weight in a format's own layout.  Filled by `quantize` or an importer;
 * released by the host with `release` (or host->free on each buffer when the
 * format has no `release`).  The host zero-fills the struct and sets
 * `struct_size` to the size it knows before the call; a plugin must not
 * write beyond that size (a newer plugin on an older core). */
/* Layout contract the GPU engine relies on: every buffer of a packed weight
 * whose size is proportional to n is stored in row tiles of the format's
 * n_align rows (row-major per output channel when n_align is 1), so weights
 * with n % n_align == 0 concatenate along N (fused q|k|v, gate|up) by
 * concatenating each buffer.  A buffer that is not per row (an input-channel
 * permutation) makes a weight unfusable; the engine says so. */
typedef struct qc_packed_weight {
    uint32_t struct_size;
    const char *format;       /* format name, plugin-owned, static */
    int64_t n, k;             /* logical shape [n, k] */
    int64_t n_padded, k_padded;
    uint32_t group_size;      /* 0 when the format has no groups */
    uint32_t scheme;          /* format-specific variant id (documented by the format) */
    uint32_t pack_version;    /* layout version, recorded in run manifests */
    uint32_t n_buffers;
    qc_buffer buffers[QC_MAX_WEIGHT_BUFFERS];
    double logical_bits;      /* bits per weight the format advertises */
} qc_packed_weight;

/* What a quantizer gets. */
typedef struct qc_quant_request {
    uint32_t struct_size;
    const float *w;           /* [n, k] row-major source weights; host-owned */
    int64_t n, k;
    uint32_t group_size;      /* 0 = format default */
    const char *scheme;       /* format-specific recipe name, NULL = default */
    const float *act_absmax;  /* [k] calibration statistic or NULL */
    float act_scale;          /* static activation scale, 0 = dynamic */
} qc_quant_request;

/* ---- kernels ------------------------------------------------------------ */

/* Parameter types: they map to libffi types for the C reference and to the
 * byte layout cuLaunchKernel expects for the GPU version. */
typedef enum qc_param_type {
    QC_PARAM_PTR = 1, /* a pointer (host for the reference, device for CUDA) */
    QC_PARAM_I32,
    QC_PARAM_U32,
    QC_PARAM_I64,
    QC_PARAM_F32,
    QC_PARAM_F64
} qc_param_type;

/* One parameter of a kernel.  `name` binds it to the caller's arguments:
 * conventional names for linear kernels are "x", "y", "m", "n", "k",
 * "group_size" and "w.<buffer name>" for the packed weight's buffers.
 * A linear kernel may also take "y.bf16" (QC_PARAM_PTR, an optional
 * output): when the caller gives a non-NULL pointer the kernel writes y
 * there as bf16 bits (round to nearest even) and leaves "y" alone; NULL or
 * not given (qc_kernel_bind passes NULL): it writes y as f32.  The GPU
 * engine gives it where the next kernel reads bf16 (SwiGLU after gate_up). */
typedef struct qc_kernel_param {
    const char *name;   /* plugin-owned, static */
    qc_param_type type;
} qc_kernel_param;

/* Launch geometry for the CUDA version, computed per problem. */
typedef struct qc_launch_dims {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes;
} qc_launch_dims;

/* A TMA tensor map the host builds for a kernel at each launch: a 2-D
 * row-major view of one pointer parameter (cols contiguous, row stride cols
 * elements), read in boxes of box_rows x box_cols elements into shared
 * memory with the given swizzle; out-of-bounds elements read as zero.  Host
 * rules (cuTensorMapEncodeTiled): the address and the row stride in bytes
 * are multiples of 16, box_cols x element size is a multiple of 16 bytes
 * and, with a swizzle, at most swizzle_bytes; each box side is 1..256. */
typedef struct qc_tensor_map_spec {
    const char *param;      /* name of the QC_PARAM_PTR param it maps; plugin-owned, static */
    qc_dtype dtype;         /* element type: F32, F16, BF16, F64, I32, I64 or any 8-bit type */
    const char *rows, *cols; /* names of the I64 params giving the row-major 2-D shape, cols contiguous */
    uint32_t box_rows, box_cols;
    uint32_t swizzle_bytes; /* 0, 32, 64, 128 */
} qc_tensor_map_spec;

/* A kernel: one parameter signature, a C reference with that signature and
 * optionally CUDA source whose entry takes the same parameters in the same
 * order.  The reference is called through libffi from the same argument
 * array that cuLaunchKernel takes (an array of pointers to each value). */
typedef struct qc_kernel_desc {
    uint32_t struct_size;
    const char *id;               /* namespaced, e.g. "w4a16.gemm_decode"; plugin-owned, static */
    const char *format;           /* the format it computes */
    uint32_t phases;              /* QC_PHASE_* mask it is meant for */
    int64_t m_min, m_max;         /* M range it is meant for (inclusive); m_max 0 = unbounded */
    qc_arch_range arch;           /* where the CUDA version may run */
    uint32_t n_params;
    const qc_kernel_param *params;  /* [n_params], plugin-owned, static */
    void (*reference)(void);      /* C reference, cast to the real signature by libffi; may be NULL */
    const char *cuda_source;      /* CUDA C++ for NVRTC, or NULL; plugin-owned, static */
    const char *cuda_entry;       /* extern "C" __global__ name in cuda_source */
    const char *const *nvrtc_options; /* NULL-terminated extra options or NULL */
    /* Launch geometry for a problem; required when cuda_source is set.
     * Called from the thread that launches. */
    void (*launch_dims)(const qc_problem *p, qc_launch_dims *out);
    /* Extra eligibility beyond arch/M/phase, or NULL.  Returns 1 when
     * eligible, else 0 and fills `why`. */
    int (*eligible)(const qc_problem *p, qc_reason *why);
    /* ---- appended after ABI 1's first version (read only when struct_size covers them) ---- */
    /* TMA tensor maps: the CUDA entry takes the listed params, then one
     * `const __grid_constant__ CUtensorMap` (a 64-byte aligned 128-byte
     * struct) per spec, in this order; the host encodes them from the
     * launch's arguments.  The C reference takes only the listed params.
     * 0 / NULL: none. */
    uint32_t n_tensor_maps;
    const qc_tensor_map_spec *tensor_maps; /* [n_tensor_maps], plugin-owned, static */
    /* ---- appended for fused activation quantization (read only when struct_size covers it) ---- */
    /* An activation quantizer (a kernel with "x.bf16" in and "xq", "xs" out,
     * no "y") may state the recipe it implements, by one of the names below;
     * the GPU engine then may write "xq" and "xs" from the kernel that
     * produces x (add+RMSNorm, SwiGLU) instead of launching the quantizer.
     * It fuses only recipes it implements, for quantizers whose params are
     * exactly x.bf16, xq, xs, m, k, and the codes and scales are then bit
     * for bit the quantizer's own on the same bf16 values.  NULL or another
     * name: never fused (the quantizer runs).  Plugin-owned, static.
     *   QC_ACT_RECIPE_E4M3_TOKEN  xs[m] f32: s = amax|x row| / 448 (IEEE
     *       f32 division, NaN ignored by the max; 1 when not > 0); xq[m][k]
     *       = E4M3 (OCP fn) of x / s (IEEE division), nearest even,
     *       saturating to +-448, NaN -> 0x7F;
     *   QC_ACT_RECIPE_E4M3_G128   the same per group of 128 consecutive k
     *       (the last may be shorter): xs[m][ceil(k / 128)];
     *   QC_ACT_RECIPE_INT8_TOKEN  xs[m] f32: sx = amax|x row| / 127 (IEEE;
     *       1 when not > 0); xq = rint(clamp(x / sx, -127, 127)) (nearest
     *       even); a row with NaN or infinity: codes 0 and xs = NaN. */
    const char *act_recipe;
    /* ---- appended for programmatic dependent launch (read only when struct_size covers it) ---- */
    /* QC_KERNEL_GRID_DEP: every block of the CUDA entry executes
     * griddepcontrol.wait (sm_90+; QC_CUDA_GRID_DEP_SRC's qc_grid_wait)
     * before it reads anything an earlier kernel may write and before it
     * writes anything; before that it reads only what no kernel writes
     * (weights, scales).  The GPU engine may then launch it on sm_90+ with
     * programmatic stream serialization, so that its blocks start while the
     * kernel before it finishes (that kernel's qc_grid_trigger lets them).
     * 0: launched in plain stream order. */
    uint32_t flags;
    /* ---- appended for split reductions (read only when struct_size covers it) ---- */
    /* Device scratch: the bytes the kernel needs, in its QC_PARAM_PTR
     * parameter named "work", for problems of p's n and k and any m up to
     * p->m (never fewer for a larger m: a caller sizes one buffer at its
     * largest m); 0: none for these.  The caller zero-fills the buffer once,
     * before its first launch, and leaves it alone between launches; the
     * kernel returns every byte it relies on being zero (its counters) to
     * zero before it ends, so that one buffer serves every launch of a
     * stream in order (and CUDA graphs) without a memset.  Launches that
     * may overlap must not share a buffer.  A caller may also give no
     * "work" at all (qc_kernel_bind then passes NULL): the kernel must
     * still compute the same result, without the workspace (e.g. unsplit).
     * NULL: no workspace (the "work" parameter, if any, is something else).
     * Called from any thread. */
    uint64_t (*workspace_bytes)(const qc_problem *p);
} qc_kernel_desc;
#define QC_KERNEL_GRID_DEP 1u
/* CUDA source for kernels (paste into cuda_source): qc_grid_trigger() lets
 * the next kernel's blocks start (launch_dependents), qc_grid_wait() waits
 * until the kernels before this one have finished and their writes are
 * visible; both do nothing below sm_90.  qc_grid_dep() is both, for a
 * kernel whose first statement may depend on the one before. */
#define QC_CUDA_GRID_DEP_SRC                                                                                      \
    "__device__ __forceinline__ void qc_grid_trigger() {\n"                                                      \
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"                                                       \
    "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"                                  \
    "#endif\n"                                                                                                   \
    "}\n"                                                                                                        \
    "__device__ __forceinline__ void qc_grid_wait() {\n"                                                         \
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"                                                       \
    "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"                                              \
    "#endif\n"                                                                                                   \
    "}\n"                                                                                                        \
    "__device__ __forceinline__ void qc_grid_dep() { qc_grid_trigger(); qc_grid_wait(); }\n"
#define QC_ACT_RECIPE_E4M3_TOKEN "e4m3.token"
#define QC_ACT_RECIPE_E4M3_G128 "e4m3.group128"
#define QC_ACT_RECIPE_INT8_TOKEN "int8.token"

/* ---- formats ------------------------------------------------------------ */

/* A format's capability descriptor and functions.  Function pointers that a
 * format does not have yet are NULL: the host reports them as missing and
 * never claims the format works. */
typedef struct qc_format_desc {
    uint32_t struct_size;
    const char *name;             /* unique, e.g. "w4a16"; plugin-owned, static */
    const char *summary;          /* one line for tables */
    qc_format_kind kind;
    qc_dtype weight_dtype;        /* element type of stored weights (or KV) */
    qc_dtype act_dtype;           /* activations the GEMM consumes */
    qc_dtype kv_dtype;            /* KV cache element type, NONE for linear formats */
    qc_dtype accum_dtype;         /* accumulator */
    qc_dtype scale_dtype;
    qc_granularity weight_scale;  /* granularity of weight (or KV) scales */
    qc_granularity act_scale;     /* granularity of activation scales, NONE if weight-only */
    const uint32_t *group_sizes;  /* supported group sizes, plugin-owned, static; may be NULL */
    uint32_t n_group_sizes;
    uint32_t default_group_size;  /* 0 when groups do not apply */
    qc_arch_range supported_arch; /* where some kernel of it runs */
    qc_arch_range native_arch;    /* where it runs on native hardware paths */
    uint32_t n_align, k_align;    /* tile alignment the kernels need on N and K */
    double bits_per_weight;       /* storage bits per element */
    double effective_bits;        /* including scales/zeros at the default group */

    /* Quantize and pack `req->w` into `out` (buffers from host->alloc).  On
     * failure returns non-zero and fills `why`; `out` is then left empty. */
    qc_status (*quantize)(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why);
    /* Dequantize to float [n, k] (for checks and the CPU reference). */
    qc_status (*dequantize)(const qc_packed_weight *w, float *out);
    /* Free what quantize allocated; NULL = host->free every buffer. */
    void (*release)(qc_packed_weight *w);
    /* Format-level eligibility (shape, group size).  1 = eligible. */
    int (*eligible)(const qc_problem *p, qc_reason *why);
    /* Code statistics of a packed weight against its source [n, k]: the
     * fraction of elements clipped to the largest code, and the fraction of
     * the format's codes that occur.  May be NULL. */
    qc_status (*code_stats)(const qc_packed_weight *w, const float *src, double *saturated_ratio,
                            double *code_utilization);
    /* The activations this format's GEMM multiplies, as floats: x_out[m, k]
     * = dequant(quant(x)) with the format's own activation recipe (bf16
     * rounding for A16 formats, per-token INT8 or FP8 quantize-dequantize
     * for W8A8).  With `dequantize`'s weights this lets the CPU backend run
     * a float GEMM (BLAS) that differs from the reference kernel only by
     * f32 summation order.  NULL = activations are used as they are. */
    qc_status (*quantize_activations)(const qc_packed_weight *w, const float *x, int64_t m, float *x_out);
} qc_format_desc;

/* ---- extensions (looked up with entry->get_extension) -------------------- */

/* A tensor handed to an importer; host-owned, valid during the call. */
typedef struct qc_named_tensor {
    const char *name;         /* e.g. "qweight", "qzeros", "scales", "g_idx" */
    const void *data;
    size_t bytes;
    qc_dtype dtype;
    int ndim;
    int64_t shape[4];         /* outermost first, as in PyTorch */
} qc_named_tensor;

/* "org.qcore.importer/1": convert another tool's packing into this format's
 * own layout (exactly, never through a float round trip).  Layout names in
 * use: "gptq" (v1 zeros, stored minus one), "gptq_v2", "awq", "gguf.q4_0",
 * "gguf.q4_1", "gguf.q8_0". */
#define QC_EXT_IMPORTER "org.qcore.importer/1"
typedef struct qc_importer_ext {
    uint32_t struct_size;
    const char *const *layouts; /* NULL-terminated list of layouts it takes; static */
    /* Import a weight of logical shape [n, k] (n outputs, k inputs). */
    qc_status (*import)(const char *layout, const qc_named_tensor *tensors, size_t n_tensors, int64_t n,
                        int64_t k, uint32_t group_size, qc_packed_weight *out, qc_reason *why);
} qc_importer_ext;

/* ---- the host table ----------------------------------------------------- */

typedef struct qc_host qc_host; /* opaque; one per loaded plugin */

typedef enum qc_log_level {
    QC_LOG_ERROR = 0,
    QC_LOG_WARN = 1,
    QC_LOG_INFO = 2,
    QC_LOG_DEBUG = 3
} qc_log_level;

/* Functions the host gives a plugin.  The table and `host` are host-owned and
 * valid from init until deinit returns.  Append only. */
typedef struct qc_host_api {
    uint32_t abi_version;
    uint32_t struct_size;
    /* Log a line prefixed with the plugin's name.  Any thread. */
    void (*log)(qc_host *host, qc_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /* Register a format.  Only during init.  The descriptor is copied by
     * value; the pointers inside it must stay valid until deinit.  Returns
     * non-zero (and logs why) when the name is taken or fields are invalid. */
    qc_status (*register_format)(qc_host *host, const qc_format_desc *desc);
    /* Register a kernel of a format this plugin registered.  Only during init. */
    qc_status (*register_kernel)(qc_host *host, const qc_kernel_desc *desc);
    /* Host allocator for packed buffers: 64-byte aligned, zero-filled.  Any thread. */
    void *(*alloc)(size_t bytes);
    void (*free)(void *ptr);
    /* A string from the plugin's section of qcore.ini ([plugin.<name>], the
     * entry's short name), or NULL.  Host-owned; valid until deinit. */
    const char *(*config)(qc_host *host, const char *key);
} qc_host_api;

/* ---- the entry ---------------------------------------------------------- */

typedef struct qc_plugin_entry {
    uint32_t abi_version;         /* QC_PLUGIN_ABI_VERSION the plugin was built against */
    uint32_t struct_size;         /* sizeof(qc_plugin_entry) as the plugin saw it */
    const char *id;               /* reverse-DNS id, e.g. "org.qcore.w4a16"; static */
    const char *name;             /* short display name; static */
    const char *version;          /* plugin version string; static */
    const char *description;      /* one line; static */
    /* Called on the loading thread right after dlopen, once per runtime
     * that loads the plugin (several runtimes in one process share one copy
     * of the library, so keep no state that a second init would break).
     * Registers formats and kernels through `api`.  Returns QC_OK, or a
     * status with a message in err[errlen]. */
    qc_status (*init)(const qc_host_api *api, qc_host *host, char *err, size_t errlen);
    /* Called when a runtime that loaded the plugin closes, on the thread
     * that closes it, before dlclose. May be NULL. */
    void (*deinit)(void);
    /* Optional capabilities by namespaced string id (e.g.
     * "org.qcore.importer.gptq/1"); returns a static struct or NULL.  May be
     * NULL.  Any thread. */
    const void *(*get_extension)(const char *id);
} qc_plugin_entry;

/* Plugins define: QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {...}; */

/* ---- KV-cache formats on the GPU engine (the engine's contract) ----------
 *
 * A format of kind QC_FORMAT_KV_CACHE runs in the GPU engine when its plugin
 * registers these four kernels, found by id ("<format>" is the format's
 * name); the engine refuses the format, naming the missing id, otherwise:
 *
 *   "<format>" QC_KV_KERNEL_QKV      core.qkv_rope_kv's params (same names,
 *                                    types, order), then the scale params;
 *   "<format>" QC_KV_KERNEL_DECODE   core.attn_decode's, then the scale params;
 *   "<format>" QC_KV_KERNEL_REDUCE   core.attn_decode_reduce's (no scales:
 *                                    the decode applies them);
 *   "<format>" QC_KV_KERNEL_PREFILL  core.attn_prefill's, then the scale params.
 *
 * Scale params, after the core's: QC_KV_PARAM_K_SCALE and QC_KV_PARAM_V_SCALE
 * (QC_PARAM_PTR: device f32 [n_kv_heads] of the layer being run; the format
 * reads scales[0] for a per-tensor scale or scales[kv_head]), then
 * QC_KV_PARAM_VARIANT (QC_PARAM_U32, format-defined; 0 = the format's
 * default, which must be usable with every scale 1.0).
 *
 * Cache layout (K and V separately, one layer): [block][kv_head][16][head_dim]
 * elements of bits_per_weight / 8 bytes (a whole number, 1 or 2), slot =
 * block * 16 + offset; a negative slot skips the write.  Block 0 is zero
 * bytes (padding rows read it), so the zero code must decode to 0.  The
 * decode's partials in `work` must fit qc_attn_decode_workspace_bytes (at
 * most min(64, 1584 / n_seqs, ceil(max_blocks * 16 / 64)) partitions per
 * sequence, head_dim + 2 floats per partition and q head).  The qc_problem
 * the engine gives launch_dims and eligible is the core's: m = tokens (qkv,
 * prefill) or sequences (decode, reduce); n = q heads (qkv: q + kv heads); k
 * = head_dim; group_size = kv heads; scheme = max_blocks (decode, reduce) or
 * sequences (prefill); sm = the device.  Capacity at a byte budget follows
 * from the element size: an 8-bit format holds exactly twice the bf16 tokens.
 */
#define QC_KV_KERNEL_QKV ".qkv_rope_kv"
#define QC_KV_KERNEL_DECODE ".attn_decode"
#define QC_KV_KERNEL_REDUCE ".attn_decode_reduce"
#define QC_KV_KERNEL_PREFILL ".attn_prefill"
#define QC_KV_PARAM_K_SCALE "k_scale"
#define QC_KV_PARAM_V_SCALE "v_scale"
#define QC_KV_PARAM_VARIANT "variant"

#ifdef __cplusplus
}
#endif
#endif /* QCORE_PLUGIN_H */
