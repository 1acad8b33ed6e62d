/* qc_ggml.h - GGUF/GGML tensor types: sizes and bit-exact dequantization to f32. */
#ifndef QC_GGML_H
#define QC_GGML_H

#include <stddef.h>
#include <stdint.h>

#include "qcore/plugin.h"

/* GGUF tensor type ids (ggml_type) the decoder knows.  Values are GGUF's. */
enum {
    QC_GGML_F32 = 0,
    QC_GGML_F16 = 1,
    QC_GGML_Q4_0 = 2,
    QC_GGML_Q4_1 = 3,
    QC_GGML_Q8_0 = 8,
    QC_GGML_Q4_K = 12,
    QC_GGML_Q5_K = 13,
    QC_GGML_Q6_K = 14,
    QC_GGML_BF16 = 30,
    QC_GGML_MXFP4 = 39
};

/* Lower-case name ("q4_0", "mxfp4"), or NULL for a type this decoder does not know. */
const char *qc_ggml_type_name(uint32_t type);
/* Elements per block (1 for f32/f16/bf16), 0 for an unknown type. */
uint32_t qc_ggml_block_size(uint32_t type);
/* Bytes per block, 0 for an unknown type. */
size_t qc_ggml_type_size(uint32_t type);

/* Bytes of one row of n elements.  Returns 0 with a message in err when the
 * type is unknown, n < 0, n is not a multiple of the block size, or the size
 * overflows size_t; also 0 (err "") for n == 0. */
size_t qc_ggml_row_bytes(uint32_t type, int64_t n, char *err, size_t errlen);

/* Bytes and element count of a tensor with GGUF dims (innermost first,
 * 1..4 of them, each >= 0; dims[0] a multiple of the block size).  Every
 * product is checked for overflow: bytes must fit size_t and the element
 * count, also as f32 output bytes, must fit int64_t and size_t.
 * n_elements_out may be NULL. */
qc_status qc_ggml_tensor_bytes(uint32_t type, const int64_t *dims, int n_dims, size_t *bytes_out,
                               int64_t *n_elements_out, char *err, size_t errlen);

/* Dequantize n_elements of `type` from blocks[bytes] into out[n_elements].
 * `bytes` must be exactly what n_elements needs: short (truncated) and long
 * (oversized) inputs are refused before anything is read, as are unknown
 * types, negative counts and counts that are not a multiple of the block
 * size.  `blocks` need not be aligned.  Results are bitwise what ggml's
 * reference dequantizers (and gguf-py) compute, including ggml's MXFP4 scale
 * byte 0xFF, which ggml treats as 2^128 and not as the OCP NaN. */
qc_status qc_ggml_dequantize(uint32_t type, const void *blocks, size_t bytes, int64_t n_elements, float *out,
                             char *err, size_t errlen);

#endif
