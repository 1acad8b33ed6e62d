/* w4a16_bf16w.h - the tests' own statement of a w4a16 weight as w4a16.wgmma_bf16_* forms it, from the packed buffers (header only). */
#ifndef QC_TEST_W4A16_BF16W_H
#define QC_TEST_W4A16_BF16W_H

#include <math.h>
#include <stdint.h>

#include "../../plugins/common/qc_bf16.h"

/* The code of stored element (j, t) of a row of k (pack_version 2: element 8w + i of row j at nibble
 * (i >> 1) + 4 (i & 1) of the row's little-endian word w). */
static inline int w4t_code(const uint8_t *q8, int64_t k, int64_t j, int64_t t) {
    const unsigned i8 = (unsigned)(t & 7), nib = (i8 >> 1) + 4u * (i8 & 1u);
    const uint8_t byte = q8[j * (k / 2) + (t >> 3) * 4 + (nib >> 1)];
    return (nib & 1u) ? byte >> 4 : byte & 15;
}

/* Code q of a group with f16 scale sh, zero z (asym; sym uses 8) or f16 min mh (fmin), scheme 0 sym, 1 asym,
 * 2 fmin: bf16_rn(bf16_rn(s) (q - z)), or bf16_rn(bf16_rn(d) (q - 8) + bf16_rn(m + 8 d)) rounded once (the exact
 * double rounded to its 8 significant bits; the tests' values stay normal). */
static inline double w4t_bf16_weight(int scheme, int q, uint16_t sh, int z, uint16_t mh) {
    const float sf = qc_f16_to_f32(sh);
    const double sb = qc_round_bf16(sf);
    if (scheme != 2) return qc_round_bf16((float)(sb * (q - (scheme == 1 ? z : 8))));
    const double ex = sb * (q - 8) + qc_round_bf16(qc_f16_to_f32(mh) + 8.0f * sf);
    int ee = 0;
    frexp(ex, &ee);
    return ex == 0 ? 0.0 : ldexp(nearbyint(ldexp(ex, 8 - ee)), ee - 8);
}

#endif
