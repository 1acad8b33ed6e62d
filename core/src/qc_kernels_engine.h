/* qc_kernels_engine.h - fused elementwise kernels of the GPU forward pass, with C references (internal). */
#ifndef QC_KERNELS_ENGINE_H
#define QC_KERNELS_ENGINE_H

#include "qcore/plugin.h"

/* Tokens per KV-cache block, as the kernels' layout uses it (QC_KV_BLOCK in qc_engine.h). */
#define QC_KV_BLOCK_REF 16

/* Register core.embed_bf16, core.add_rmsnorm, core.add_rmsnorm_quant,
 * core.qkv_rope_kv, core.swiglu_ld, core.swiglu_quant, core.cast_quant,
 * core.cast_bf16 and core.fill_random_bf16 (under the "bf16" format, found by id).  Called from
 * the builtin plugin's init. */
qc_status qc_engine_kernels_register(const qc_host_api *api, qc_host *host);

/* Fused activation quantization (plugin.h, act_recipe): the recipes the
 * core's add_rmsnorm_quant / swiglu_quant / cast_quant implement, as their
 * "recipe" param. */
enum {
    QC_FUSE_NONE = 0,
    QC_FUSE_E4M3_TOKEN = 1, /* QC_ACT_RECIPE_E4M3_TOKEN */
    QC_FUSE_E4M3_G128 = 2,  /* QC_ACT_RECIPE_E4M3_G128 */
    QC_FUSE_INT8_TOKEN = 3  /* QC_ACT_RECIPE_INT8_TOKEN */
};
/* Chunks of 4 floats per thread the row kernels hold in registers: rows of
 * up to 1024 * 4 * QC_FUSE_VPT elements fuse. */
#define QC_FUSE_VPT 4
#define QC_FUSE_N_MAX (1024 * 4 * QC_FUSE_VPT)

/* The recipe a name states (QC_FUSE_*), QC_FUSE_NONE for NULL or a name the
 * core does not implement. */
int qc_fuse_recipe(const char *name);

/* Whether the core may write the activations of a linear of input width k
 * from the producing kernel instead of launching `quant` (the format's
 * activation quantizer) on a device of arch sm: the recipe, or QC_FUSE_NONE
 * with why filled ("recipe": none stated or not one the core implements;
 * "params": the quantizer takes inputs beyond x.bf16, xq, xs, m, k, such as
 * a static scale or smoothing factors; "arch": an E4M3 recipe below sm_89;
 * "shape": k not a multiple of 16 or above QC_FUSE_N_MAX). */
int qc_fuse_decide(const qc_kernel_desc *quant, uint32_t sm, int64_t k, qc_reason *why);

#endif
