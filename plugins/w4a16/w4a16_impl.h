/* w4a16_impl.h - what the w4a16 plugin's own files share: the packed-weight view and the dequant definition. */
#ifndef QC_W4A16_IMPL_H
#define QC_W4A16_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <qcore/plugin.h>

#include "../common/qc_bf16.h"
#include "w4a16.h"

/* Set in init; the host table is valid until deinit. */
extern const qc_host_api *w4_api;

/* Limits that keep every size computation far from overflow: k fits the i32
 * of "perm", and n*k codes fit comfortably in size_t. */
#define W4_MAX_DIM 0x7fffffffLL
#define W4_MAX_ELEMS (1LL << 40)

/* A checked, typed view of a packed weight's buffers.  zeros, mins and perm
 * are NULL when the scheme has none. */
typedef struct w4_view {
    int64_t n, k;
    uint32_t g, scheme;
    int64_t ng; /* groups per row, k / g */
    const uint8_t *q;
    const uint16_t *s;
    const uint8_t *z;
    const uint16_t *mn;
    const int32_t *perm;
    int bf16_weights; /* 1: each weight as w4a16.wgmma_bf16_* forms it: bf16_rn(bf16_rn(s) * (q - z)) (sym, asym),
                         bf16_rn(bf16_rn(d) * (q - 8) + bf16_rn(m + 8 d)) with one rounding (fmin) */
} w4_view;

/* Fill `why` (may be NULL) with a code and a sentence. */
void w4_why(qc_reason *why, const char *code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

int w4_group_ok(uint32_t g);
int w4_scheme_ok(uint32_t scheme);
const char *w4_scheme_name(uint32_t scheme);
/* Shape rules shared by quantize, the importers and eligibility: n, k
 * positive and bounded, g in {32, 64, 128}, k % g == 0, n % 8 == 0. */
int w4_shape_ok(int64_t n, int64_t k, uint32_t g, qc_reason *why);

/* Allocate every buffer a scheme needs (zero-filled) and fill the header.
 * On failure `out` is left empty and `why` says why. */
qc_status w4_packed_alloc(qc_packed_weight *out, int64_t n, int64_t k, uint32_t g, uint32_t scheme,
                          qc_reason *why);
void w4_packed_release(qc_packed_weight *w);
/* Check a packed weight (format, shape, scheme, every buffer's dtype and
 * bytes) and view it.  Writable pointers are for the code that filled it. */
qc_status w4_view_of(const qc_packed_weight *w, w4_view *v, qc_reason *why);
uint8_t *w4_buf(qc_packed_weight *w, const char *name);
/* 1 when perm[0..k) holds every value of 0..k-1 once. */
int w4_perm_ok(const int32_t *perm, int64_t k);

/* Where stored element (j, t) lives (pack_version 2): row j's elements 8w..8w+7 share the little-endian 32-bit
 * word w of the row (bytes j*(k/2) + 4w ..), element 8w + i at nibble (i >> 1) + 4 (i & 1) of it: even elements
 * in the low 16 bits, odd ones in the high 16, so nibbles p and p + 4 are the pair (2p, 2p + 1).  Nibble p of a
 * word is the low nibble of its byte p / 2 when p is even. */
static inline int64_t w4_code_byte(int64_t k, int64_t j, int64_t t, unsigned *hi) {
    const unsigned i = (unsigned)(t & 7), p = (i >> 1) + 4u * (i & 1u);
    *hi = p & 1u;
    return j * (k / 2) + (t >> 3) * 4 + (p >> 1);
}
static inline unsigned w4_code(const uint8_t *q, int64_t k, int64_t j, int64_t t) {
    unsigned hi;
    uint8_t b = q[w4_code_byte(k, j, t, &hi)];
    return hi ? (unsigned)(b >> 4) : (unsigned)(b & 15u);
}
static inline void w4_set_code(uint8_t *q, int64_t k, int64_t j, int64_t t, unsigned c) {
    unsigned hi;
    uint8_t *b = &q[w4_code_byte(k, j, t, &hi)];
    *b = hi ? (uint8_t)((*b & 0x0fu) | (c << 4)) : (uint8_t)((*b & 0xf0u) | (c & 15u));
}

/* The definition of a weight's value.  Every product of an f16 and an
 * integer in -15..15 is exact in f32 (at most 15 significant bits), so SYM
 * and ASYM values are exact and FMIN's only rounding is its add: computing
 * it as fmaf(d, q, m) gives the same bits. */
static inline float w4_dequant_one(uint32_t base, unsigned q, float s, unsigned z, float m) {
    switch (base) {
    case W4A16_SCHEME_SYM: return s * (float)((int)q - 8);
    case W4A16_SCHEME_ASYM: return s * (float)((int)q - (int)z);
    default: {
        float t = s * (float)q; /* exact */
        return t + m;
    }
    }
}

/* Dequantize stored columns [t0, t0+len) of row j into dst (stored order). */
void w4_dequant_row(const w4_view *v, int64_t j, int64_t t0, int64_t len, float *dst);
/* The same, element i going to dst[i * stride]. */
void w4_dequant_row_strided(const w4_view *v, int64_t j, int64_t t0, int64_t len, float *dst, int64_t stride);

/* What every w4a16 GPU kernel needs beyond the format's shape rules: its own scheme `want` (no act-order
 * permutation), the weight's real group size, the shape rules; 0 with `why` filled (w4a16_cuda.c). */
int w4_gpu_takes(const qc_problem *p, uint32_t want, const char *id, qc_reason *why);
/* The parameters the GPU kernels share: x, codes and scales first, then (after zeros or mins) y and the sizes. */
#define W4_GP_HEAD {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}
#define W4_GP_TAIL                                                                                        \
    {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64}, {"k", QC_PARAM_I64},                   \
    {"group_size", QC_PARAM_I64}

/* The GPU kernels' C reference: y = x W^T with x as bf16 bits and the scheme's buffers (zeros, mins NULL when
 * the scheme has none); bf16_weights 1: weights rounded as w4a16.wgmma_bf16_* forms them (w4a16_cuda.c). */
void w4_ref_bx(uint32_t scheme, int bf16_weights, const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales,
               const uint8_t *zeros, const uint16_t *mins, float *y, int64_t m, int64_t n, int64_t k,
               int64_t group_size);

/* One sm_90a prefill GEMM of w4a16 (w4a16_wgmma.c registers the rows it is given: M 17.., arch 90 only, x through
 * a 64 x 64 tensor map with the 128-byte swizzle, as both Hopper GEMMs take it). */
typedef struct w4_sm90_row {
    const char *id, *entry, *source;
    const qc_kernel_param *params;
    uint32_t n_params;
    void (*reference)(void);
    int (*eligible)(const qc_problem *, qc_reason *);
} w4_sm90_row;
qc_status w4_register_sm90(const qc_host_api *api, qc_host *host, const w4_sm90_row *rows, size_t n_rows,
                           void (*launch_dims)(const qc_problem *, qc_launch_dims *), const char *const *xopts,
                           uint64_t (*workspace_bytes)(const qc_problem *));

/* v rounded once to bf16 (RNE, subnormals kept, overflow to inf); v exact in double (w4a16.c). */
float w4_round_bf16_exact(double v);

/* y[m,n] = bf16(x)[m,k] W^T, the reference linear (w4a16_ref.c). */
void w4_linear(const w4_view *v, const float *x, float *y, int64_t m);

/* The importer extension (w4a16_import.c). */
extern const qc_importer_ext w4_importer;

#endif
