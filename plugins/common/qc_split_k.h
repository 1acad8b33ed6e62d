/* qc_split_k.h - how many blocks split one tile's K in a persistent GEMM whose tiles leave SMs idle (header only). */
#ifndef QC_PLUGIN_SPLIT_K_H
#define QC_PLUGIN_SPLIT_K_H

#include <stdint.h>

/* Ways to split each tile's K (grid.y): 1 once the tiles fill the SMs (or with nothing to do); else as many as
 * fit in one pass of `sms` blocks, at most `max_ways`, each keeping at least `min_stages` of the `stages` K steps
 * (splitting has a fixed cost: slots written, a counter, the last block's reads).  Host-side rule: the kernel
 * reads gridDim.y, so the plugins' launch_dims are the only place it lives. */
static inline int qc_split_k_ways(int64_t tiles, int64_t stages, int sms, int64_t min_stages, int max_ways) {
    if (tiles <= 0 || tiles >= sms || stages <= 0 || min_stages <= 0) return 1;
    int64_t s = sms / tiles, by_k = stages / min_stages;
    if (s > by_k) s = by_k;
    if (s > max_ways) s = max_ways;
    return s < 1 ? 1 : (int)s;
}

#endif
