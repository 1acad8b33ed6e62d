/* qc_kernels_engine.h - fused elementwise kernels of the GPU forward pass, with C references (internal). */
#ifndef QC_KERNELS_ENGINE_H
#define QC_KERNELS_ENGINE_H

#include "qcore/plugin.h"

/* Tokens per KV-cache block, as the kernels' layout uses it (QC_KV_BLOCK in qc_engine.h). */
#define QC_KV_BLOCK_REF 16

/* Register core.embed_bf16, core.add_rmsnorm, core.qkv_rope_kv,
 * core.swiglu_ld, core.cast_bf16 and core.fill_random_bf16 (under the
 * "bf16" format, found by id).  Called from the builtin plugin's init. */
qc_status qc_engine_kernels_register(const qc_host_api *api, qc_host *host);

#endif
