/* w8a8_int8_cuda.h - the w8a8_int8 plugin's GPU kernels (CUDA source for NVRTC, geometry, eligibility). */
#ifndef W8A8_INT8_CUDA_H
#define W8A8_INT8_CUDA_H

#include <qcore/plugin.h>

/* The C references the GPU kernels share, defined by the plugin's numerics
 * (w8a8_int8.c): activation quantization of bf16 rows, without and with
 * SmoothQuant factors, and the INT8 product of quantized operands. */
typedef struct i8_gpu_refs {
    void (*quant_act)(void);        /* (x.bf16, xq, xs, m, k) */
    void (*quant_act_smooth)(void); /* (x.bf16, w.smooth, xq, xs, m, k) */
    void (*linear_q)(void);         /* (xq, xs, w.qweight, w.scales, y, m, n, k) */
    void (*linear_q_work)(void);    /* the same, then the wgmma GEMM's workspace (ignored) */
} i8_gpu_refs;

/* Register "w8a8_int8.quant_act", "w8a8_int8.quant_act_smooth",
 * "w8a8_int8.linear_wgmma" (sm_90a, m >= 9), "w8a8_int8.linear_mma" (sm_80+, m >= 17),
 * "w8a8_int8.gemv" (sm_80+, m 1..8) and "w8a8_int8.gemv_wide" (sm_80+, m 9..16). */
qc_status i8_cuda_register(const qc_host_api *api, qc_host *host, const i8_gpu_refs *refs);

#endif
