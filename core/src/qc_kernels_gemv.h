/* qc_kernels_gemv.h - the bf16 decode GEMV (small M, memory-bound) with the bf16 format's C reference (internal). */
#ifndef QC_KERNELS_GEMV_H
#define QC_KERNELS_GEMV_H

#include "qcore/plugin.h"

/* Register "bf16.linear_gemv" and "bf16.linear_gemv_bx" (x given as bf16, m <= 16, the
 * reference `bf16_linear_bx_ref`); "bf16.linear_gemv": y[m,n] = bf16(x)[m,k] . W[n,k]^T for
 * 1 <= m <= 16, sm_80 and later, W streamed once with 16-byte loads.  Its C
 * reference is the bf16 format's own (`bf16_linear_ref`), so the numerics are
 * those of bf16.linear_ref up to the f32 summation order.  Called from the
 * builtin plugin's init after the "bf16" format is registered. */
qc_status qc_gemv_kernels_register(const qc_host_api *api, qc_host *host, void (*bf16_linear_ref)(void),
                                   void (*bf16_linear_bx_ref)(void));

/* The launch geometry's parts, exposed for tests: rows of x handled per
 * launch (m rounded up to 1, 2, 4, 8 or 16), W rows per block-iteration and
 * the K chunk staged in shared memory (elements). */
void qc_gemv_plan(int64_t m, int64_t k, int *mt, int *rows, int64_t *kc);

#endif
