/* test_gpu_w4a16_wgmma.c - w4a16.wgmma_* (Hopper) against the C reference and a double sum; timing against cuBLAS bf16 and the bf16 peak. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_w4a16_wgmma"
#define REPS 20 /* median of these (>= 10) */
#include "w4a16_test.h"

/* Small and awkward shapes, sym and asym, every group: n of 8 rows (a W tile mostly past n), n not a multiple of
 * 64 or 128, k with a half 64-k block at the end (k % 64 == 32, g32) or a group count not a multiple of the
 * stage's, odd m, m in each configuration (<= 64: 64x64 tiles; > 64 with few tiles: K split; many tiles: 128x128,
 * with the last x tile's second 64-row box partly or wholly past m).  Up to FULL_REF_MACS the C reference checks
 * every output; above, sampled outputs against a double sum. */
static void correctness(ctx *c, kern *wg) {
    static const struct {
        int64_t n, k;
        int64_t ms[8];
    } cases[] = {
        {8, 128, {17, 64, 100, 0}},
        {24, 96, {17, 33, 65, 0}},
        {40, 384, {19, 64, 129, 256, 0}},
        {264, 288, {17, 63, 100, 300, 0}},
        {1000, 640, {17, 64, 100, 256, 1050, 4096, 0}},
        {4104, 1152, {17, 64, 129, 1024, 1040, 1111, 0}},
        {72, 14336, {17, 64, 100, 0}},
        {16904, 256, {17, 64, 0}}, /* m <= 64 with 128-W-row tiles (133 of them, the last one 8 rows) */
    };
    for (int s = 0; s < 2; s++)
        for (uint32_t g = 32; g <= 128; g *= 2)
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                int64_t n = cases[ci].n, k = cases[ci].k;
                if (k % g) continue;
                wt w;
                if (wt_make(c, &w, s, g, n, k, 1) == 0)
                    for (size_t i = 0; wg[s].fn && i < 8 && cases[ci].ms[i]; i++) run_case(c, wg[s].k, wg[s].fn, &w, cases[ci].ms[i], 0);
                wt_free(c, &w);
            }
}

/* w4a16.wgmma_bf16_* (sym, asym, fmin; k % 64 == 0): the same kinds of shape, each tile height (QC_W4BW_BM) forced in turn and the
 * plan's own; x boxes partly and wholly past m, several tiles a block, odd group counts a row */
/* w4a16.wgmma_bf16_*'s shapes: n, k and the m of each (0 ends the list) */
static const struct {
    int64_t n, k;
    int64_t ms[6];
} BF16_CASES[] = {
    {8, 128, {17, 100, 0}},
    {40, 384, {19, 129, 300, 0}},
    {264, 320, {17, 63, 150, 0}},
    {1000, 640, {65, 256, 1050, 0}},
    {4104, 1152, {17, 1040, 0}},
    {72, 14336, {17, 100, 0}},
};

/* the first n_cases of BF16_CASES for sym, asym and fmin, groups 32 up to 128 times g_mul, under the variable var set
 * to val (NULL: the plan) */
static void bf16_cases(ctx *c, kern *bw, size_t n_cases, uint32_t g_mul, const char *var, const char *val) {
    if (val) setenv(var, val, 1);
    printf("  (w4a16.wgmma_bf16_* with %s=%s)\n", var, val ? val : "(plan)");
    for (int s = 0; s < 3; s++) /* sym, asym, fmin */
        for (uint32_t g = 32; g <= 128; g *= g_mul)
            for (size_t ci = 0; ci < n_cases; ci++) {
                int64_t n = BF16_CASES[ci].n, k = BF16_CASES[ci].k;
                if (k % g) continue;
                wt w;
                if (wt_make(c, &w, s, g, n, k, 1) == 0)
                    for (size_t i = 0; bw[s].fn && i < 6 && BF16_CASES[ci].ms[i]; i++)
                        run_case(c, bw[s].k, bw[s].fn, &w, BF16_CASES[ci].ms[i], 0);
                wt_free(c, &w);
            }
    unsetenv(var);
}

static void correctness_bf16(ctx *c, kern *bw) {
    const size_t all = sizeof BF16_CASES / sizeof BF16_CASES[0];
    /* the plan's tile height, then each forced (the first four shapes) */
    static const char *const bms[] = {NULL, "64", "128", "256"};
    for (size_t b = 0; b < 4; b++) bf16_cases(c, bw, b ? 4 : all, 2, "QC_W4BW_BM", bms[b]);
    /* the last wave split over K (qc_ra_gemm_src.h): QC_RA_SPLIT forces the ways where the wave and k allow it (2
     * to 8, uneven stage counts among a tile's units); test_gpu_mxfp4 has a split the plan makes by itself */
    static const char *const sps[] = {"2", "3", "8"};
    for (size_t b = 0; b < 3; b++) bf16_cases(c, bw, 4, 4, "QC_RA_SPLIT", sps[b]);
    /* refusals with their reasons */
    const qc_kernel_desc *kd = bw[0].k;
    if (kd) {
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 128, .n = 256, .k = 96, .group_size = 32,
                        .scheme = W4A16_SCHEME_SYM};
        qc_reason why = {0};
        CHECK(!kd->eligible(&p, &why) && strcmp(why.code, "align_k") == 0, "k = 96 taken (%s)", why.code);
        printf("  %s k = 96: %s: %s\n", kd->id, why.code, why.text);
        p.k = 128;
        p.scheme = W4A16_SCHEME_FMIN;
        CHECK(!kd->eligible(&p, &why) && strcmp(why.code, "scheme") == 0, "fmin taken (%s)", why.code);
        p.scheme = W4A16_SCHEME_SYM;
        setenv("QC_W4_BF16", "off", 1);
        CHECK(!kd->eligible(&p, &why) && strcmp(why.code, "disabled") == 0, "QC_W4_BF16=off ignored (%s)", why.code);
        printf("  %s QC_W4_BF16=off: %s: %s\n", kd->id, why.code, why.text);
        unsetenv("QC_W4_BF16");
        CHECK(kd->eligible(&p, &why), "m = 128 n = 256 k = 128 refused: %s", why.text);
        p.m = 4096;
        p.n = 4096;
        CHECK(kd->eligible(&p, &why), "sym g32 m = n = 4096 k = 128 refused: %s", why.text);
    }
}

/* cuBLAS bf16 on the H200 (../shared/anchors/README.md, 2026-11-29), us, at M = 64, 1024, 4096 */
static const struct {
    const char *name;
    int64_t n, k;
    double cublas[3];
} LLAMA[] = {
    {"qkv", 6144, 4096, {23.1, 73.4, 293.4}},
    {"o", 4096, 4096, {18.0, 46.8, 177.7}},
    {"gate_up", 28672, 4096, {73.2, 347.0, 1414.4}},
    {"down", 4096, 14336, {45.0, 166.5, 690.2}},
};

/* Llama-3-8B shapes at M = 64, 1024, 4096 (large M checked by sampling): sym g128 and g32, asym g128; the mma.sync
 * GEMM (w4a16.mma_sym, sm_80 path) beside it for comparison.  Targets: M >= 1024 within 1.1x cuBLAS bf16, M = 64
 * at least 2x faster than cuBLAS bf16. */
static void timing(ctx *c, kern *wg, kern *mma, kern *bw) {
    static const int64_t ms[] = {64, 1024, 4096};
    static const struct {
        int s;
        uint32_t g;
    } variants[] = {{0, 128}, {1, 128}, {0, 32}};
    for (size_t sh = 0; sh < 4; sh++)
        for (size_t v = 0; v < 3; v++) {
            int s = variants[v].s;
            uint32_t g = variants[v].g;
            int64_t n = LLAMA[sh].n, k = LLAMA[sh].k;
            size_t wbytes = (size_t)(n * k / 2) + (size_t)(n * (k / g)) * (s == 0 ? 2 : 3);
            int ncopy = (int)(ROTATE_BYTES / wbytes + 1);
            if (ncopy > MAXCOPY) ncopy = MAXCOPY;
            wt w;
            if (wt_make(c, &w, s, g, n, k, ncopy) == 0)
                for (size_t i = 0; i < 3; i++) {
                    if (!wg[s].fn) continue;
                    last_us = -1;
                    if (!getenv("QC_W4_BF16_ONLY")) run_case(c, wg[s].k, wg[s].fn, &w, ms[i], REPS);
                    double us = last_us, cb = LLAMA[sh].cublas[i];
                    if (us > 0) {
                        int big = ms[i] >= 1024;
                        printf("  VS_CUBLAS %-8s %-5s g%-3u m=%-5lld %8.2f us, cuBLAS bf16 %7.1f us: %.2fx its time "
                               "(target %s %.2fx) %s\n", LLAMA[sh].name, SCHEMES[s], g, (long long)ms[i], us, cb,
                               us / cb, big ? "<=" : "<=", big ? 1.1 : 0.5,
                               us / cb <= (big ? 1.1 : 0.5) ? "MET" : "MISSED");
                    }
                    if (v == 0 && mma && mma->fn && !getenv("QC_W4_BF16_ONLY")) run_case(c, mma->k, mma->fn, &w, ms[i], REPS);
                    if (bw[s].fn) { /* w4a16.wgmma_bf16_* on the same weight */
                        run_case(c, bw[s].k, bw[s].fn, &w, ms[i], REPS);
                        double ub = last_us, cbb = LLAMA[sh].cublas[i];
                        if (ub > 0 && ms[i] >= 1024)
                            printf("  VS_CUBLAS %-8s %-5s g%-3u m=%-5lld %8.2f us (%s), cuBLAS bf16 %7.1f us: %.2fx "
                                   "its time (target <= 1.10x) %s\n", LLAMA[sh].name, SCHEMES[s], g, (long long)ms[i],
                                   ub, bw[s].id, cbb, ub / cbb, ub / cbb <= 1.1 ? "MET" : "MISSED");
                    }
                }
            wt_free(c, &w);
        }
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    if (qc_gpu_get_info(c.g)->sm != 90) {
        printf("%s: skip: w4a16.wgmma_* needs sm_90 (device is sm_%d)\n", TEST, qc_gpu_get_info(c.g)->sm);
        qc_gpu_close(c.g);
        return 0;
    }
    char *tmp = NULL;
    int setup_rc = gt_setup(TEST, c.g, &tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    if (c.rt) {
        char err[512];
        qc_status st = qc_runtime_load_plugin(c.rt, QC_TEST_PLUGIN_DIR "/w4a16.so", err, sizeof err);
        CHECK(st == QC_OK, "w4a16 plugin: %s", err);
        c.f = qc_format_find(c.rt, "w4a16");
        CHECK(c.f != NULL, "no w4a16 format");
        kern wg[2], mma, bw[3];
        memset(wg, 0, sizeof wg);
        memset(bw, 0, sizeof bw);
        memset(&mma, 0, sizeof mma);
        if (c.f) {
            load_kernel(&c, &wg[0], "w4a16.wgmma_sym");
            load_kernel(&c, &wg[1], "w4a16.wgmma_asym");
            load_kernel(&c, &bw[0], "w4a16.wgmma_bf16_sym");
            load_kernel(&c, &bw[1], "w4a16.wgmma_bf16_asym");
            load_kernel(&c, &bw[2], "w4a16.wgmma_bf16_fmin");
            load_kernel(&c, &mma, "w4a16.mma_sym");
            double t0 = qc_now_seconds();
            if (!getenv("QC_W4_BF16_ONLY")) correctness(&c, wg);
            correctness_bf16(&c, bw);
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            measure_copy(&c);
            if (c.copy_gbs > 0 && !getenv("QC_W4_NO_TIMING")) {
                t0 = qc_now_seconds();
                timing(&c, wg, &mma, bw);
                printf("%s: timing cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            }
        }
        qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
        CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
        qc_runtime_close(c.rt);
    }
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
