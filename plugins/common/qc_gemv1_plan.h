/* qc_gemv1_plan.h - the launch of the m = 1 whole-line GEMVs (w4a16.gemv1_sym, mxfp4.gemv1): 4 rows a block and a K split (header only). */
#ifndef QC_PLUGIN_GEMV1_PLAN_H
#define QC_PLUGIN_GEMV1_PLAN_H

#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

#define QC_GEMV1_MAX_KS 8        /* the kernels' __launch_bounds__(256, 2): 8 warps a block, 128 registers */
#define QC_GEMV1_WANT_WARPS 2112 /* 16 warps an SM of an H200 (132 SMs): one wave */

/* Blocks of 4 rows (two row pairs a warp) and KS warps splitting K in 512-byte steps (1024 codes) a row: KS
 * doubles while all warps stay within one wave and each keeps >= 4 steps (Llama-3-8B: qkv, gate_up KS 1; o, down
 * 2, the fastest of 1-8 measured on the H200).  The variable env_ks (1..8) overrides it for tuning; (KS - 1) x 4
 * floats of shared memory for the reduction.  Nothing (all zero) unless m = 1, n > 0 and k >= 1024. */
static inline void qc_gemv1_dims(const qc_problem *p, const char *env_ks, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m != 1 || p->n <= 0 || p->k < 1024) return;
    const int64_t blocks = (p->n + 3) / 4, steps = p->k / 1024;
    int ks = 1;
    while (ks < QC_GEMV1_MAX_KS && blocks * ks * 2 <= QC_GEMV1_WANT_WARPS && steps >= 4 * ks) ks *= 2;
    const char *ek = getenv(env_ks);
    if (ek) {
        int v = atoi(ek);
        if (v >= 1 && v <= QC_GEMV1_MAX_KS) ks = v;
    }
    if (blocks > 0x7fffffffLL) return;
    d->grid[0] = (uint32_t)blocks;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (uint32_t)ks;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)(ks - 1) * 4u * (uint32_t)sizeof(float);
}

#endif
