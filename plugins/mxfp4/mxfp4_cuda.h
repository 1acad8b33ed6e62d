/* mxfp4_cuda.h - the mxfp4 plugin's GPU kernels (CUDA source for NVRTC, geometry, eligibility). */
#ifndef MXFP4_CUDA_H
#define MXFP4_CUDA_H

#include <qcore/plugin.h>

/* Plugin-internal helpers of mxfp4_cuda.c shared by the kernel files (never exported from the .so). */
/* a refusal: code and printf-style text into why (why may be NULL) */
void mxfp4_why(qc_reason *why, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* the parameters every mxfp4 GPU linear takes: x.bf16, w.qweight, w.scales, y, m, n, k */
#define MX_BX_NPARAMS 7
extern const qc_kernel_param MX_BX_PARAMS[MX_BX_NPARAMS];
/* eligibility of the fragment GEMVs (id names the kernel in the reason): k % 128 == 0, n fits 32 bits */
int mxfp4_frag_eligible(const char *id, const qc_problem *p, qc_reason *why);

/* Register "mxfp4.gemv" (m 1..16, sm_80+), "mxfp4.linear_mma" (m >= 17,
 * sm_80+) and "mxfp4.gemv_sm100" (the GEMV built for sm_100a, arch 100
 * only).  All take x.bf16, w.qweight, w.scales, y, m, n, k and share the C
 * reference `bx_ref` (x as bf16 bits). */
qc_status mxfp4_cuda_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void));

/* Register "mxfp4.gemv_frag" (the kernel takes m 1..16; its descriptor says 1..m_max; k % 128 == 0,
 * sm_80+; mxfp4_gemv_frag.c), called by mxfp4_cuda_register after mxfp4.gemv with m_max 16 (never picked;
 * QC_MXF_PS=off: first, with m_max = MXF_FRAG_M_MAX, so that the engine picks it up to that M). */
#define MXF_FRAG_M_MAX 4
qc_status mxfp4_frag_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void), int64_t m_max);

/* Register "mxfp4.gemv_frag_ps" (m 1..16, k % 128 == 0, sm_80+; mxfp4_gemv_frag_ps.c), called by
 * mxfp4_cuda_register first, so that the engine picks it for M 1..16 (QC_MXF_PS=off: after mxfp4.gemv,
 * never picked). */
qc_status mxfp4_frag_ps_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void));

#endif
