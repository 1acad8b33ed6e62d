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
/* The fragment GEMVs' launch plan: R 16-row tiles a warp (1 or 2), KS warps a block splitting K, one block per
 * R tiles.  R = 2 where r2_ok and the layer has at least two blocks per SM's worth of tiles; KS doubles (up to
 * 16) while all warps stay within one wave of 16 per SM of an H200 and each keeps at least two 128-K chunks.
 * The variables env_r (1 or 2) and env_ks (1..16) override (tuning on the device; the device follows the
 * launch: KS from blockDim, R from gridDim).  A zero plan (blocks 0) for an empty or too-short problem. */
typedef struct mxfp4_frag_plan {
    int r, ks;
    int64_t blocks;
} mxfp4_frag_plan;
void mxfp4_frag_plan_of(int64_t m, int64_t n, int64_t k, int r2_ok, const char *env_r, const char *env_ks,
                        mxfp4_frag_plan *p);
/* the launch of a plan: blocks x 32 KS threads, red_bytes of dynamic shared memory (all zero for no plan) */
void mxfp4_frag_dims(const mxfp4_frag_plan *pl, uint32_t red_bytes, qc_launch_dims *d);

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

/* Register "mxfp4.gemv1" (m = 1, k % 1024 == 0, sm_80+; mxfp4_gemv_frag_ps.c), called by mxfp4_cuda_register
 * first: its M range is the narrowest, so the engine picks it for batch-1 decode (QC_MXG=off refuses it). */
qc_status mxfp4_gemv1_register(const qc_host_api *api, qc_host *host, void (*bx_ref)(void));

/* Register "mxfp4.wgmma" (sm_90a only, m >= 17, k % 64 == 0; mxfp4_wgmma.c), called by mxfp4_cuda_register
 * after mxfp4.linear_mma: its arch range is the narrower, so the engine picks it on sm_90. */
typedef void (*mxfp4_bx_ref_fn)(const uint16_t *x, const uint8_t *qw, const uint8_t *sc, float *y, int64_t m, int64_t n,
                                int64_t k); /* the bf16-x C reference (MX_BX_PARAMS) */
qc_status mxfp4_wgmma_register(const qc_host_api *api, qc_host *host, mxfp4_bx_ref_fn bx_ref);

#endif
