/* kv_fp8_internal.h - what kv_fp8.c and kv_fp8_gpu.c share (variant ids, GPU kernel registration). */
#ifndef KV_FP8_INTERNAL_H
#define KV_FP8_INTERNAL_H

#include <qcore/plugin.h>

/* Variant ids, the `variant` argument of the kernels (docs/formats/kv_fp8.md).
 * Append only. */
enum {
    KV_FP8_E4M3_TENSOR = 0, /* E4M3, one scale for the whole K (or V) cache: scales[0] */
    KV_FP8_E4M3_HEAD = 1,   /* E4M3, one scale per KV head: scales[kv_heads] */
    KV_FP8_E5M2 = 2,        /* E5M2, no scale: scales is not read and may be NULL */
    KV_FP8_VARIANT_COUNT_
};

/* Register kv_fp8.qkv_rope_kv, .attn_decode, .attn_decode_reduce and .attn_prefill (the decode
 * build as QC_KV_DEC_VARIANT / QC_KV_DEC_STAGES say; a bad value: an error in err naming it). */
qc_status kv_fp8_gpu_register(const qc_host_api *api, qc_host *host, char *err, size_t errlen);
/* Decode partitions per sequence (the decode kernel's formula; the reduce and tests use it). */
int kv_fp8_decode_parts(int n_seqs, int n_kv_heads, int max_blocks);

#endif
