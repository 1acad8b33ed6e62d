/* qc_fp8_codec.h - FP8 E4M3 ("fn") and E5M2 encode/decode shared by the plugins (header only). */
#ifndef QC_PLUGIN_FP8_CODEC_H
#define QC_PLUGIN_FP8_CODEC_H

/*
 * The encoders are the exact definition every qcore FP8 path is checked
 * against (docs/formats/fp8.md):
 *  - round to nearest, ties to even, in one step from the f32 value;
 *  - saturate: a finite input too large for the format, and an infinity,
 *    become the largest finite code with the input's sign (PTX
 *    cvt.rn.satfinite).  E5M2 therefore never produces an infinity;
 *  - NaN becomes 0x7F in both formats, whatever its sign or payload (the
 *    CUDA software conversion's canonical NaN);
 *  - values that round to zero keep their sign (-1e-9 gives 0x80).
 * They work on the bit pattern only: no float-to-int conversion, so no
 * undefined behaviour for any input.
 */

#include <stdint.h>
#include <string.h>

#define QC_FP8_E4M3_MAX 448.0f
#define QC_FP8_E5M2_MAX 57344.0f
#define QC_FP8_E4M3_MAXCODE 0x7Eu /* 448 */
#define QC_FP8_E5M2_MAXCODE 0x7Bu /* 57344 */
#define QC_FP8_NAN_CODE 0x7Fu     /* what the encoders write for NaN (both formats) */
#define QC_FP8_E4M3_FINITE_CODES 254u /* 256 minus the NaNs 0x7F and 0xFF */
#define QC_FP8_E5M2_FINITE_CODES 248u /* 256 minus 2 infinities and 6 NaNs */

/* Shared encoder for 1 sign bit, (7 - mbits) exponent bits with `bias`, and
 * `mbits` mantissa bits; `maxcode` is the largest finite magnitude code.
 * *saturated (if given) is set to 1 when saturation changed the result: the
 * rounded magnitude would have exceeded the largest finite value. */
static inline uint8_t qc_fp8_encode_generic(float f, unsigned mbits, unsigned bias, uint32_t maxcode,
                                            int *saturated) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu, e = a >> 23, code;
    if (saturated) *saturated = 0;
    if (a > 0x7f800000u) return (uint8_t)QC_FP8_NAN_CODE;
    if (e >= 128u - bias) {
        /* normal in the target: round the f32 mantissa to mbits bits; a carry
         * moves into the exponent by itself */
        unsigned shift = 23u - mbits;
        uint32_t r = a + (1u << (shift - 1u)) - 1u + ((a >> shift) & 1u);
        code = (r >> shift) - ((127u - bias) << mbits);
        if (code > maxcode) {
            code = maxcode;
            if (saturated) *saturated = 1;
        }
    } else {
        /* subnormal (or zero) in the target: count units of 2^(1-bias-mbits).
         * The value is full * 2^(ee-150); rounding to the unit means shifting
         * right by 150 + (1-bias-mbits) - ee bits (at least 24 - mbits). */
        uint32_t full = e ? ((a & 0x7fffffu) | 0x800000u) : a;
        uint32_t ee = e ? e : 1u;
        uint32_t shift = 151u - bias - mbits - ee;
        if (shift > 24u) {
            code = 0; /* below half the smallest subnormal: full < 2^24 <= half */
        } else {
            uint32_t q = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1u);
            if (rem > half || (rem == half && (q & 1u))) q++;
            code = q; /* q == 2^mbits is exactly the smallest normal's code */
        }
    }
    return (uint8_t)(sign | code);
}

/* Shared decoder; exact (every FP8 value is an f32).  NaN codes give a quiet
 * NaN with the code's sign. */
static inline float qc_fp8_decode_generic(uint8_t c, unsigned mbits, unsigned bias, int ieee_specials) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24, mag = c & 0x7fu;
    uint32_t exp = mag >> mbits, man = mag & ((1u << mbits) - 1u), emax = 0x7fu >> mbits, u;
    float f;
    if (ieee_specials ? exp == emax : mag == 0x7fu) {
        u = sign | (ieee_specials && man == 0 ? 0x7f800000u : 0x7fc00000u);
    } else if (exp == 0) {
        /* subnormal: man * 2^(1-bias-mbits), exact as an f32 product */
        uint32_t unit_bits = (127u + 1u - bias - mbits) << 23;
        float unit;
        memcpy(&unit, &unit_bits, 4);
        f = (float)man * unit;
        return sign ? -f : f;
    } else {
        u = sign | ((exp - bias + 127u) << 23) | (man << (23u - mbits));
    }
    memcpy(&f, &u, 4);
    return f;
}

/* E4M3 "fn" (OCP / ml_dtypes float8_e4m3fn): bias 7, no infinities, NaN at
 * 0x7F/0xFF, max 448, smallest subnormal 2^-9. */
static inline uint8_t qc_fp8_e4m3_encode(float f) { return qc_fp8_encode_generic(f, 3, 7, QC_FP8_E4M3_MAXCODE, 0); }
static inline uint8_t qc_fp8_e4m3_encode_sat(float f, int *saturated) {
    return qc_fp8_encode_generic(f, 3, 7, QC_FP8_E4M3_MAXCODE, saturated);
}
static inline float qc_fp8_e4m3_decode(uint8_t c) { return qc_fp8_decode_generic(c, 3, 7, 0); }
static inline int qc_fp8_e4m3_is_nan(uint8_t c) { return (c & 0x7fu) == 0x7fu; }

/* E5M2 (IEEE-like): bias 15, infinities 0x7C/0xFC, NaN 0x7D-0x7F and
 * 0xFD-0xFF, max 57344, smallest subnormal 2^-16. */
static inline uint8_t qc_fp8_e5m2_encode(float f) { return qc_fp8_encode_generic(f, 2, 15, QC_FP8_E5M2_MAXCODE, 0); }
static inline uint8_t qc_fp8_e5m2_encode_sat(float f, int *saturated) {
    return qc_fp8_encode_generic(f, 2, 15, QC_FP8_E5M2_MAXCODE, saturated);
}
static inline float qc_fp8_e5m2_decode(uint8_t c) { return qc_fp8_decode_generic(c, 2, 15, 1); }
static inline int qc_fp8_e5m2_is_nan(uint8_t c) { return (c & 0x7fu) > 0x7cu; }

/* Decode tables, for loops that decode the same codes many times. */
static inline void qc_fp8_e4m3_table(float lut[256]) {
    for (unsigned c = 0; c < 256; c++) lut[c] = qc_fp8_e4m3_decode((uint8_t)c);
}
static inline void qc_fp8_e5m2_table(float lut[256]) {
    for (unsigned c = 0; c < 256; c++) lut[c] = qc_fp8_e5m2_decode((uint8_t)c);
}

#endif
