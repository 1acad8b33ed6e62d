/* fp8_codec_dump.c - prints the FP8 codec's decode of every code and encode of probe floats, for fp8_codec_oracle.py. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qc_fp8_codec.h"

typedef struct fmt {
    const char *name;
    uint8_t (*encode)(float f, int *saturated);
    float (*decode)(uint8_t c);
    int (*is_nan)(uint8_t c);
} fmt;

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void probe(const fmt *F, float f) {
    int sat;
    uint8_t c = F->encode(f, &sat);
    printf("E %s %08x %02x %d\n", F->name, (unsigned)bits_of(f), (unsigned)c, sat);
}

/* f, its neighbours one f32 ulp away, and the negatives of all three */
static void probe_around(const fmt *F, float f) {
    float v[3] = {f, nextafterf(f, INFINITY), nextafterf(f, -INFINITY)};
    for (int i = 0; i < 3; i++) {
        probe(F, v[i]);
        probe(F, -v[i]);
    }
}

static void dump(const fmt *F) {
    for (unsigned c = 0; c < 256; c++) printf("D %s %02x %08x\n", F->name, c, (unsigned)bits_of(F->decode((uint8_t)c)));
    /* every value, the midpoints between neighbours (ties) and both
     * neighbours of each, over the whole positive range and past the top */
    float prev = 0.f;
    for (unsigned c = 0; c < 0x80; c++) {
        if (F->is_nan((uint8_t)c)) continue;
        float v = F->decode((uint8_t)c);
        probe_around(F, v);
        if (c) probe_around(F, (float)(((double)prev + (double)v) / 2)); /* exact: one more bit */
        prev = isinf(v) ? prev : v;
    }
    /* above the largest finite value: the tie with the next binade step,
     * and far beyond */
    float max = strcmp(F->name, "e4m3") == 0 ? QC_FP8_E4M3_MAX : QC_FP8_E5M2_MAX;
    float ulp = strcmp(F->name, "e4m3") == 0 ? 32.f : 8192.f;
    probe_around(F, max + ulp / 2);
    probe_around(F, max + ulp);
    probe_around(F, max * 2);
    probe_around(F, 1e6f);
    probe_around(F, FLT_MAX);
    probe(F, INFINITY);
    probe(F, -INFINITY);
    /* below: half the smallest subnormal, f32 subnormals and FLT_MIN */
    float sub = strcmp(F->name, "e4m3") == 0 ? ldexpf(1.f, -9) : ldexpf(1.f, -16);
    probe_around(F, sub / 2);
    probe_around(F, sub / 4);
    probe_around(F, sub * 1.5f);
    probe_around(F, FLT_MIN);
    probe_around(F, FLT_TRUE_MIN);
    probe(F, 0.f);
    probe(F, -0.f);
    /* NaNs of both signs, quiet and signalling */
    const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) probe(F, float_of(nans[i]));
    /* pseudo-random bit patterns (all exponents) and random values in range */
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < 20000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        probe(F, float_of((uint32_t)(s >> 32)));
        float r = (float)((double)(s & 0xffffffu) / 16777216.0 * 2.0 - 1.0);
        probe(F, r * max * 1.1f);
        probe(F, r * sub * 40.f);
    }
}

static uint8_t e4m3_enc(float f, int *sat) { return qc_fp8_e4m3_encode_sat(f, sat); }
static uint8_t e5m2_enc(float f, int *sat) { return qc_fp8_e5m2_encode_sat(f, sat); }
static int e4m3_nan(uint8_t c) { return qc_fp8_e4m3_is_nan(c); }
static int e5m2_nan(uint8_t c) { return qc_fp8_e5m2_is_nan(c); }

int main(void) {
    const fmt e4m3 = {"e4m3", e4m3_enc, qc_fp8_e4m3_decode, e4m3_nan};
    const fmt e5m2 = {"e5m2", e5m2_enc, qc_fp8_e5m2_decode, e5m2_nan};
    dump(&e4m3);
    dump(&e5m2);
    /* the non-saturating-flag entry points must agree with the flagged ones */
    int bad = 0;
    for (uint32_t u = 0; u < 0xffffffffu; u += 0x10001u) {
        float f = float_of(u);
        int sat;
        bad += qc_fp8_e4m3_encode(f) != qc_fp8_e4m3_encode_sat(f, &sat);
        bad += qc_fp8_e5m2_encode(f) != qc_fp8_e5m2_encode_sat(f, &sat);
    }
    printf("X plain_vs_flagged %d\n", bad);
    return 0;
}
