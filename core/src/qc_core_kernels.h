/* qc_core_kernels.h - the core's own GPU kernels with their C references (internal). */
#ifndef QC_CORE_KERNELS_H
#define QC_CORE_KERNELS_H

#include "qcore/plugin.h"

/* Register rmsnorm, rope (adjacent pairs and half split), swiglu, embedding
 * gather, argmax and the bf16 tensor-core linear through the host table, as a
 * plugin would.  Called from the builtin plugin's init after it registered
 * the "bf16" format (every kernel must name a format of its plugin); the
 * linear's C reference is the bf16 format's own. */
qc_status qc_core_kernels_register(const qc_host_api *api, qc_host *host, void (*bf16_linear_ref)(void));

/* A core kernel's descriptor: format "bf16", any phase and M, sm_80 and
 * later, found by id and refused for linear-layer selection (its
 * eligibility answers "missing"), as every non-linear kernel is. */
qc_kernel_desc qc_core_kernel_desc(const char *id, const qc_kernel_param *params, uint32_t n_params,
                                   void (*reference)(void), const char *source, const char *entry,
                                   void (*dims)(const qc_problem *, qc_launch_dims *));
/* k with QC_KERNEL_GRID_DEP: for entries that call qc_grid_dep() first (wrap the descriptor where it is made,
 * so that the flag stays with its kernel whatever the order of a table) */
static inline qc_kernel_desc qc_core_grid_dep(qc_kernel_desc k) {
    k.flags = QC_KERNEL_GRID_DEP;
    return k;
}

#endif
