/* test_quo_unit.c - the activation quantizers' x / s as a reciprocal multiply and an fma correction, emulated in C:
 * the quotient bit for bit where |x / s| >= 2^-10, the same E4M3 and int8 codes everywhere. */
#include <float.h>
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/common/qc_fp8_codec.h"
#include "qc_test.h"

#if FLT_EVAL_METHOD != 0
#error "the emulation needs float arithmetic rounded to float (no x87 excess precision)"
#endif

#define TEST "test_quo_unit"

/*
 * The device code (core/src/qc_kernels_engine.c's ROW_SRC and plugins/fp8/cuda/quant.cu, both checked below to
 * still contain these lines): per row or 128-group with absolute maximum a and scale s = RN(a / 448) (E4M3) or
 * RN(a / 127) (int8), 1 where that is not positive,
 *     rs = a >= 2^-80 ? RN(1 / s) : 0 (an infinite a: s = inf, rs = 0)      qc_rcp_of
 *     q  = rs != 0 ? fma(-fma(q0, s, -x), rs, q0) with q0 = RN(x * rs)      qc_quo
 *              : x / s
 * Each step here is one IEEE operation in float: explicit fmaf, a product stored alone (nothing to contract).
 */
static float quo(float x, float s, float rs) {
    const float q0 = x * rs;
    return fmaf(-fmaf(q0, s, -x), rs, q0);
}
static float rcp_of(float a, float s) { return a >= 0x1p-80f ? 1.0f / s : 0.f; }
static float scale_of(float a, float d) {
    const float s = a / d;
    return s > 0.f ? s : 1.f;
}
static float kernel_q(float x, float s, float rs) { return rs != 0.f ? quo(x, s, rs) : x / s; }
/* the int8 code of a quotient as qc_i8c (fminf / fmaxf, nearest even) */
static int i8_code(float q) { return (int)rintf(fminf(fmaxf(q, -127.f), 127.f)); }

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct {
    const char *name;
    uint64_t pairs, quotients; /* pairs checked; of those, with the quotient compared bit for bit */
    uint64_t bad_q, bad_e4m3, bad_i8;
} tally;

/* element x of a range with amax a, scale s and rs = rcp_of(a, s): the kernels' quotient against x / s for
 * divisor d (448: E4M3, 127: int8); the quotient itself where the reciprocal is taken and |x / s| >= 2^-10 */
static inline void compare(tally *t, float x, float a, float d, float s, float rs) {
    const float q = x / s, k = kernel_q(x, s, rs);
    const int exact = rs != 0.f && fabsf(q) >= 0x1p-10f;
    t->pairs++;
    t->quotients += exact;
    if (bits(q) == bits(k) || (isnan(q) && isnan(k))) return;
    const uint64_t before = t->bad_q + t->bad_e4m3 + t->bad_i8;
    t->bad_q += exact;
    if (d == 448.f) t->bad_e4m3 += qc_fp8_e4m3_encode(q) != qc_fp8_e4m3_encode(k);
    if (d == 127.f) t->bad_i8 += i8_code(q) != i8_code(k);
    if (t->bad_q + t->bad_e4m3 + t->bad_i8 > before && before < 5)
        fprintf(stderr, "%s: %s: x %a amax %a: x / s = %a (E4M3 %02x, int8 %d), the kernels' %a (%02x, %d)\n", TEST,
                t->name, x, a, q, qc_fp8_e4m3_encode(q), i8_code(q), k, qc_fp8_e4m3_encode(k), i8_code(k));
}
static void check_one(tally *t, float x, float a, float d) {
    const float s = scale_of(a, d);
    compare(t, x, a, d, s, rcp_of(a, s));
}

static void report(const tally *t) {
    printf("%s: %-34s %10llu pairs (%10llu quotients compared): %llu quotients, %llu E4M3, %llu int8 codes differ\n",
           TEST, t->name, (unsigned long long)t->pairs, (unsigned long long)t->quotients,
           (unsigned long long)t->bad_q, (unsigned long long)t->bad_e4m3, (unsigned long long)t->bad_i8);
    CHECK(t->bad_q == 0 && t->bad_e4m3 == 0 && t->bad_i8 == 0, "%s: the kernels' quotient differs from x / s",
          t->name);
}

/* Every pair the fused kernels and fp8's quantizers can meet: x and amax bf16 values (the quantizers read bf16),
 * every finite amax > 0, every x with |x| <= amax of either sign (zeros, subnormals, ties and 448 among them). */
static uint64_t exhaustive_bf16(float d, const char *name) {
    tally t = {.name = name};
    for (uint32_t ah = 0x0001; ah < 0x7f80; ah++) {
        const float a = qc_bf16_to_f32((uint16_t)ah), s = scale_of(a, d), rs = rcp_of(a, s);
        for (uint32_t xh = 0; xh <= ah; xh++) {
            compare(&t, qc_bf16_to_f32((uint16_t)xh), a, d, s, rs);
            compare(&t, qc_bf16_to_f32((uint16_t)(xh | 0x8000u)), a, d, s, rs);
        }
    }
    report(&t);
    return t.pairs;
}

/* random f32 amax over the whole exponent range and x below it, quotients from 448 down past 2^-10 */
static uint64_t random_f32(float d, uint64_t *rng, int n) {
    tally t = {.name = d == 448.f ? "random f32, E4M3" : "random f32, int8"};
    for (int i = 0; i < n; i++) {
        const uint64_t r = qc_test_rng(rng);
        const int e = (int)(r % 277) - 149; /* 2^-149 .. 2^127 */
        const float a = ldexpf(1.0f + (float)((r >> 9) & 0x7fffff) * 0x1p-23f, e) ;
        if (!(a <= FLT_MAX) || a == 0.f) continue;
        const float u = qc_test_uniform(rng); /* in [-1, 1) */
        const int k = (int)((r >> 40) % 24);  /* x / s from about d down to d * 2^-23 */
        check_one(&t, ldexpf(u, -k) * a, a, d);
        if ((i & 15) == 0) check_one(&t, (r >> 63) ? -a : a, a, d); /* the row's maximum itself */
    }
    report(&t);
    return t.pairs;
}

/* x next to RN(m * s) for quotients m at a boundary, over random scales: the 2^-10 limit, E4M3's rounding midpoints
 * (subnormal and normal, 448), int8's x.5 ties */
static uint64_t near(const float *ms, int n_m, float d, const char *name, uint64_t *rng, int scales) {
    tally t = {.name = name};
    for (int i = 0; i < scales; i++) {
        const uint64_t r = qc_test_rng(rng);
        const float a = ldexpf(1.0f + (float)((r >> 9) & 0x7fffff) * 0x1p-23f, (int)(r % 208) - 80); /* >= 2^-80 */
        const float s = scale_of(a, d);
        for (int j = 0; j < n_m; j++) {
            const float x0 = ms[j] * s;
            for (int o = -3; o <= 3; o++) {
                const float x = of_bits(bits(x0) + (uint32_t)o);
                if (fabsf(x) > a) continue; /* the range's maximum bounds its elements */
                check_one(&t, x, a, d);
                check_one(&t, -x, a, d);
            }
        }
    }
    report(&t);
    return t.pairs;
}

/* edge cases with exact expectations: the guard, zeros' signs, non-finite values */
static void edges(void) {
    CHECK(rcp_of(0x1p-80f, scale_of(0x1p-80f, 448.f)) != 0.f, "amax 2^-80 takes the reciprocal");
    CHECK(rcp_of(nextafterf(0x1p-80f, 0.f), 1.f) == 0.f, "amax below 2^-80 divides");
    CHECK(rcp_of(FLT_MAX, scale_of(FLT_MAX, 448.f)) != 0.f && rcp_of(FLT_MAX, scale_of(FLT_MAX, 127.f)) != 0.f,
          "amax FLT_MAX takes the reciprocal");
    CHECK(rcp_of(INFINITY, INFINITY) == 0.f && rcp_of(NAN, 1.f) == 0.f && rcp_of(0.f, 1.f) == 0.f &&
              rcp_of(0x1p-149f, 1.f) == 0.f,
          "inf, NaN, zero and subnormal amax divide");
    /* a zero keeps its sign: E4M3 0x80 for -0 (the correction fma(-fma(q0, s, -x), rs, q0) gives -0 + -0) */
    for (float a = 0x1p-80f; a <= 0x1p100f; a *= 0x1p15f) {
        const float s = scale_of(a, 448.f), rs = rcp_of(a, s);
        CHECK(bits(quo(-0.f, s, rs)) == 0x80000000u && bits(quo(0.f, s, rs)) == 0u, "amax %a: signed zeros", a);
        CHECK(qc_fp8_e4m3_encode(quo(-0.f, s, rs)) == 0x80 && qc_fp8_e4m3_encode(quo(-0x1p-149f, s, rs)) == 0x80,
              "amax %a: -0 and -2^-149 code 0x80", a);
        /* NaN elements (amax skips them): NaN, code 0x7F, as the division */
        CHECK(isnan(quo(NAN, s, rs)) && qc_fp8_e4m3_encode(quo(NAN, s, rs)) == 0x7F, "amax %a: NaN", a);
        CHECK(bits(quo(a, s, rs)) == bits(a / s) && qc_fp8_e4m3_encode(quo(-a, s, rs)) == 0xFE, "amax %a: -amax", a);
    }
    /* an infinity makes amax infinite: the kernels divide (finite x -> 0, inf -> NaN -> 0x7F, as before) */
    const float si = scale_of(INFINITY, 448.f), ri = rcp_of(INFINITY, si);
    CHECK(ri == 0.f && bits(kernel_q(1.0f, si, ri)) == 0u && bits(kernel_q(-1.0f, si, ri)) == 0x80000000u &&
              isnan(kernel_q(INFINITY, si, ri)),
          "an infinite row divides");
    /* why the guard and the sign-keeping form: what the plain sequence would give */
    const float s0 = scale_of(0x1p-120f, 448.f);
    CHECK(qc_fp8_e4m3_encode(quo(0x1p-120f, s0, 1.0f / s0)) != qc_fp8_e4m3_encode(0x1p-120f / s0),
          "without the guard, amax 2^-120 gives another code");
    CHECK(!(quo(1.0f, INFINITY, 0.f) == 0.f), "without the guard, an infinite amax gives NaN, not 0");
    {
        const float q0 = -0.f * (1.0f / 2.0f), naive = fmaf(fmaf(-q0, 2.0f, -0.f), 1.0f / 2.0f, q0);
        CHECK(bits(naive) == 0u, "fma(fma(-q0, s, x), rs, q0) turns -0 into +0 (E4M3 0x00, not 0x80)");
    }
}

/* the emulation above is the device code: the sources still hold these lines */
static void sources_match(void) {
    static const struct {
        const char *path, *quo, *rcp;
    } src[] = {
        {"core/src/qc_kernels_engine.c", "__fmaf_rn(-__fmaf_rn(q0, s, -v), rs, q0)",
         "a >= 0x1p-80f ? __frcp_rn(s) : 0.f"},
        {"plugins/fp8/cuda/quant.cu", "__fmaf_rn(-__fmaf_rn(q0, s, -x), rs, q0)", "a >= 0x1p-80f ? __frcp_rn(s) : 0.f"},
    };
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", QC_TEST_SOURCE_DIR, src[i].path);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL, "cannot open %s", path);
        if (!f) continue;
        static char text[1 << 20];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        CHECK(strstr(text, src[i].quo) && strstr(text, src[i].rcp), "%s no longer holds the emulated sequence",
              src[i].path);
        CHECK(strstr(text, "q0 = __fmul_rn("), "%s: q0 is no longer RN(x * rs)", src[i].path);
    }
}

int main(void) {
    uint64_t rng = 0x5eed1234abcdull, total = 0;
    edges();
    sources_match();
    total += exhaustive_bf16(448.f, "every bf16 pair, E4M3 (s = a/448)");
    total += exhaustive_bf16(127.f, "every bf16 pair, int8 (s = a/127)");
    total += random_f32(448.f, &rng, 20000000);
    total += random_f32(127.f, &rng, 20000000);
    float ms[512];
    int n = 0;
    ms[n++] = 0x1p-10f, ms[n++] = 0x1p-11f, ms[n++] = 0x1.8p-10f;
    for (uint8_t c = 0; c < 0x7E; c++) /* midpoints between consecutive E4M3 magnitudes, and 448 */
        ms[n++] = 0.5f * (qc_fp8_e4m3_decode(c) + qc_fp8_e4m3_decode((uint8_t)(c + 1)));
    ms[n++] = 448.f;
    total += near(ms, n, 448.f, "near 2^-10 and E4M3 midpoints", &rng, 20000);
    n = 0;
    ms[n++] = 0x1p-10f;
    for (int c = 0; c < 127; c++) ms[n++] = (float)c + 0.5f;
    ms[n++] = 127.f;
    total += near(ms, n, 127.f, "near int8 x.5 ties", &rng, 20000);
    printf("%s: %llu pairs in all\n", TEST, (unsigned long long)total);
    return qc_test_finish(TEST);
}
