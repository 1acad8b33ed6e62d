/* qc_test.h - a minimal test harness: CHECK macros and a closing "N passed, N failed" line. */
#ifndef QC_TEST_H
#define QC_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int qc_test_passed, qc_test_failed;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            qc_test_passed++;                                                         \
        } else {                                                                      \
            qc_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* substring check with the haystack printed on failure */
static inline int qc_test_contains(const char *hay, const char *needle) { return hay && strstr(hay, needle); }
#define CHECK_CONTAINS(hay, needle)                                                   \
    CHECK(qc_test_contains((hay), (needle)), "expected \"%s\" in \"%s\"", (needle), \
          qc_test_contains((hay), "") ? (hay) : "(null)")

static inline int qc_test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, qc_test_passed, qc_test_failed);
    return qc_test_failed ? 1 : 0;
}

/* Deterministic random floats (xorshift), never all zero. */
static inline uint64_t qc_test_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static inline float qc_test_uniform(uint64_t *s) { /* in [-1, 1) */
    return (float)((qc_test_rng(s) >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static inline float qc_test_normal(uint64_t *s) {
    double u1 = ((qc_test_rng(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (qc_test_rng(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline void qc_test_fill(float *x, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) x[i] = qc_test_normal(&s) * scale;
}

#endif
