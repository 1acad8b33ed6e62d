/* fp8_internal.h - what fp8.c (format, references) and fp8_kernels.c (GPU kernels) share inside the plugin. */
#ifndef QC_FP8_INTERNAL_H
#define QC_FP8_INTERNAL_H

#include <stdint.h>

#include <qcore/plugin.h>

#include "qc_fp8_codec.h"

/* Scheme ids stored in qc_packed_weight.scheme and matched against
 * qc_problem.scheme (docs/formats/fp8.md).  Append only: they are recorded
 * in run manifests. */
enum {
    FP8_SCHEME_DEFAULT = 0,        /* in a problem: the default, CHANNEL */
    FP8_SCHEME_TENSOR = 1,         /* W per-tensor, A per-tensor dynamic */
    FP8_SCHEME_CHANNEL = 2,        /* W per-channel, A per-token dynamic */
    FP8_SCHEME_BLOCK = 3,          /* W 128x128 blocks, A 1x128 groups dynamic */
    FP8_SCHEME_TENSOR_STATIC = 4,  /* W per-tensor, A per-tensor static */
    FP8_SCHEME_CHANNEL_STATIC = 5, /* W per-channel, A per-tensor static */
    FP8_SCHEME_COUNT_
};

#define FP8_BLOCK 128 /* block edge of the block recipe, on N and K */

/* Scale for a range with absolute maximum `amax`: amax/448 in f32.  A zero
 * range (or one so small that the quotient underflows) gets 1, so codes are
 * 0 and nothing ever divides by zero. */
static inline float fp8_scale_of(float amax) {
    float s = amax / QC_FP8_E4M3_MAX;
    return s > 0.f ? s : 1.f;
}

/* Registers the GPU kernels (W8A8 wgmma / mma.sync / decode GEMV, the
 * W8A16 path, activation quantization) with their C references; called
 * from fp8_init after the reference linears. */
qc_status fp8_kernels_register(const qc_host_api *api, qc_host *host);

#endif
