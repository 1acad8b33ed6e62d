/* qc_kernels_wgmma.h - the Hopper bf16 prefill linear (TMA + wgmma, sm_90a) with its C reference (internal). */
#ifndef QC_KERNELS_WGMMA_H
#define QC_KERNELS_WGMMA_H

#include "qcore/plugin.h"

/* Register "bf16.linear_wgmma": y[m,n] (f32) = x[m,k] . W[n,k]^T with x
 * given as bf16 bits ("x.bf16") and W the bf16 format's weight, sm_90 only
 * (compiled for sm_90a), two TMA tensor maps.  Its C reference sums the
 * bf16 products in double.  Called from the builtin plugin's init after the
 * "bf16" format is registered, before the other bf16 linears so that
 * selection prefers it on sm_90. */
qc_status qc_wgmma_kernels_register(const qc_host_api *api, qc_host *host);

/* The launch plan, exposed for tests: tile width (256, 192 or 128 columns;
 * 128 rows), pipeline stages, dynamic shared memory and output tiles. */
void qc_wgmma_plan(int64_t m, int64_t n, int *bn, int *stages, uint32_t *smem_bytes, int64_t *tiles);

#endif
