/* qc_gemv1_xr_plan.h - the launch of the x-in-registers m = 1 GEMVs (w4a16.gemv1_xr_sym, mxfp4.gemv1_xr; plugins/common/cuda/gemv1_xr.cuh) (header only). */
#ifndef QC_PLUGIN_GEMV1_XR_PLAN_H
#define QC_PLUGIN_GEMV1_XR_PLAN_H

#include <stdint.h>
#include <string.h>

#include <qcore/plugin.h>

#define QC_XR_SMS 132        /* an H100 / H200: one wave of blocks */
#define QC_XR_WARPS 16       /* warps wanted a block (the plugins' QC_*_WARPS switch; 8 gives two blocks an SM) */
#define QC_XR_MAX_WARPS 16   /* the kernel's __launch_bounds__(512, 1): 128 registers */
#define QC_XR_RED_MAX 40960  /* shared bytes of a block's slice sums at most: more blocks past that */

typedef struct qc_xr_plan {
    int s, ks, warps;
    int64_t grid;
    uint32_t smem;
} qc_xr_plan;

/* 1 and the launch when the skeleton takes (n, k) with `warps_want` warps a block wanted: k % 1024 == 0 and at most
 * 16 K slices (S = 2 steps of 1024 codes a slice for an even step count, else 1; KS = steps / S), blocks of RG x KS
 * warps (RG = warps_want / KS, at least 1), as many an SM as 16 warps allow over QC_XR_SMS SMs, at most one a row
 * pair, more where a block's slice sums would pass QC_XR_RED_MAX bytes.  The device derives S, KS and RG from k
 * and blockDim the same way. */
static inline int qc_xr_plan_of(int64_t n, int64_t k, int warps_want, qc_xr_plan *p) {
    memset(p, 0, sizeof *p);
    if (n < 1 || k < 1024 || k % 1024) return 0;
    const int64_t steps = k / 1024;
    p->s = steps % 2 ? 1 : 2;
    if (steps / p->s > QC_XR_MAX_WARPS) return 0;
    p->ks = (int)(steps / p->s);
    const int rg = warps_want / p->ks > 1 ? warps_want / p->ks : 1;
    p->warps = rg * p->ks;
    const int64_t pairs = (n + 1) / 2;
    int64_t grid = (int64_t)QC_XR_SMS * (QC_XR_MAX_WARPS / p->warps);
    if (p->ks > 1) {
        const int64_t most = QC_XR_RED_MAX / (8 * p->ks); /* row pairs a block */
        if ((pairs + grid - 1) / grid > most) grid = (pairs + most - 1) / most;
    }
    if (grid > pairs) grid = pairs;
    p->grid = grid;
    p->smem = p->ks > 1 ? (uint32_t)((pairs + grid - 1) / grid * p->ks * 8) : 0u;
    return 1;
}

/* the launch dims of that plan at m = 1 (all zero otherwise) */
static inline void qc_xr_dims(const qc_problem *p, int warps_want, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    qc_xr_plan pl;
    if (p->m != 1 || !qc_xr_plan_of(p->n, p->k, warps_want, &pl) || pl.grid > 0x7fffffffLL) return;
    d->grid[0] = (uint32_t)pl.grid;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32u * (uint32_t)pl.warps;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = pl.smem;
}

#endif
