/* qc_bf16.h - bf16 <-> f32 conversions shared by the plugins (header only). */
#ifndef QC_PLUGIN_BF16_H
#define QC_PLUGIN_BF16_H

#include <stdint.h>
#include <string.h>

/* Round to nearest even; NaN stays a quiet NaN. */
static inline uint16_t qc_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float qc_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value an activation has once it is bf16 (what A16 kernels consume). */
static inline float qc_round_bf16(float f) { return qc_bf16_to_f32(qc_f32_to_bf16(f)); }

/* IEEE half <-> f32 (scales of GPTQ/AWQ/GGUF are f16). */
static inline float qc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even, overflow to inf, NaN kept. */
static inline uint16_t qc_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                                  /* subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign;        /* below half the smallest subnormal */
        uint32_t man = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14..24 */
        /* value = man * 2^(e-150) and the f16 subnormal unit is 2^-24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* RNE on the 13 dropped bits */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

#endif
