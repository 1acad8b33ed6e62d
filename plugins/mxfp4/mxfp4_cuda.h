/* mxfp4_cuda.h - the mxfp4 plugin's GPU kernels (CUDA source for NVRTC, geometry, eligibility). */
#ifndef MXFP4_CUDA_H
#define MXFP4_CUDA_H

#include <qcore/plugin.h>

/* Register "mxfp4.gemv" (m 1..16, sm_80+), "mxfp4.linear_mma" (m >= 17,
 * sm_80+) and "mxfp4.gemv_sm100" (the GEMV built for sm_100a, arch 100
 * only).  All take x.bf16, w.qweight, w.scales, y, m, n, k and share the C
 * reference `bx_ref` (x as bf16 bits). */
qc_status mxfp4_cuda_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void));

/* Register "mxfp4.gemv_frag" (the kernel takes m 1..16; its descriptor says 1..m_max; k % 128 == 0,
 * sm_80+; mxfp4_gemv_frag.c), called by mxfp4_cuda_register before mxfp4.gemv with m_max =
 * MXF_FRAG_M_MAX, so that the engine picks it up to that M (QC_MXF_FRAG=off: after it, m_max 16). */
#define MXF_FRAG_M_MAX 4
qc_status mxfp4_frag_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void), int64_t m_max);

/* Register "mxfp4.gemv_frag_ps" (m 1..16, k % 128 == 0, sm_80+; mxfp4_gemv_frag_ps.c), called by
 * mxfp4_cuda_register after mxfp4.gemv_frag and before mxfp4.gemv, so that the engine picks it for M 5..16
 * (QC_MXF_PS=off: after mxfp4.gemv, never picked). */
qc_status mxfp4_frag_ps_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void));

#endif
