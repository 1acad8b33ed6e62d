/* test_gpu_w4a16_frag.c - w4a16.gemv_frag_sym, w4a16.gemv1_sym, w4a16.gemv1_tma_sym and w4a16.gemv1_xr_sym against the C reference and a double sum; times against the W4 floor, beside w4a16.gemv_sym. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_w4a16_frag"
#include "w4a16_test.h"

/* Correctness: every group, odd numbers of 16-row tiles (n % 32 == 16, n % 16 == 8), K splits with ragged ends and
 * warps without chunks, every M of 1..16 on one shape and the buckets on the others. */
static void correctness(ctx *c, kern *kf) {
    static const int64_t shapes[][2] = {{8, 128},     {24, 384},   {40, 256},    {1000, 640}, {4104, 1152},
                                        {72, 14336}, {264, 4224}, {136, 2176},  {16, 1024},  {4096, 4096}};
    static const int64_t ms[] = {1, 2, 3, 5, 8, 9, 13, 16};
    for (uint32_t g = 32; g <= 128; g *= 2)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
            int64_t n = shapes[sh][0], k = shapes[sh][1];
            wt w;
            if (wt_make(c, &w, 0, g, n, k, 1) == 0) {
                for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) run_case(c, kf->k, kf->fn, &w, ms[i], 0);
                for (int64_t mm = 1; sh == 3 && mm <= 16; mm++)
                    if (mm != 1 && mm != 2 && mm != 3 && mm != 5 && mm != 8 && mm != 9 && mm != 13 && mm != 16)
                        run_case(c, kf->k, kf->fn, &w, mm, 0);
            }
            wt_free(c, &w);
        }
}

/* The 32-row blocks (R = 2) at every M: n = 8456 (529 tiles: the plan's own R = 2 at g64 / g128 for m <= 8 and
 * g128 above, a last block with one tile; k 384 keeps every output checked against the C reference), and QC_W4F_R=2 forced on small shapes (n % 32 == 8 and 24, a clamped
 * or missing second tile, K splits with idle warps) so that g32 / g64 run their tiles in turn at m > 8.  The
 * caller's QC_W4F_R is put back afterwards. */
static void correctness_r2(ctx *c, kern *kf) {
    static const int64_t ms[] = {1, 4, 8, 9, 11, 13, 16};
    static const int64_t small[][2] = {{72, 384}, {40, 1152}, {1000, 640}};
    const char *old = getenv("QC_W4F_R");
    char *saved = old ? strdup(old) : NULL;
    for (uint32_t g = 32; g <= 128; g *= 2) {
        wt w;
        if (saved) unsetenv("QC_W4F_R");
        if (wt_make(c, &w, 0, g, 8456, 384, 1) == 0)
            for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) run_case(c, kf->k, kf->fn, &w, ms[i], 0);
        wt_free(c, &w);
        setenv("QC_W4F_R", "2", 1);
        for (size_t sh = 0; sh < sizeof small / sizeof small[0]; sh++) {
            if (wt_make(c, &w, 0, g, small[sh][0], small[sh][1], 1) == 0)
                for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) run_case(c, kf->k, kf->fn, &w, ms[i], 0);
            wt_free(c, &w);
        }
        if (saved) setenv("QC_W4F_R", saved, 1);
        else unsetenv("QC_W4F_R");
    }
    free(saved);
}

/* w4a16.gemv1_sym (m = 1, g128, K % 1024): 1 to 14 steps of 512 bytes a row, N from 8 to 28672, every K split
 * the plan can choose and ragged ones (3, 5, 7: warps with one step fewer, or none), forced through QC_W4G_KS;
 * the caller's QC_W4G_KS is put back afterwards. */
static void correctness1(ctx *c, kern *k1) {
    static const int64_t shapes[][2] = {{8, 1024},    {40, 3072},   {1000, 7168}, {4104, 1024},
                                        {72, 14336},  {264, 5120},  {4096, 4096}, {28672, 4096}};
    static const char *const splits[] = {NULL, "1", "2", "3", "5", "7", "8"};
    const char *old = getenv("QC_W4G_KS");
    char *saved = old ? strdup(old) : NULL;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        wt w;
        if (wt_make(c, &w, 0, 128, shapes[sh][0], shapes[sh][1], 1) == 0)
            for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
                if (splits[i]) setenv("QC_W4G_KS", splits[i], 1);
                else unsetenv("QC_W4G_KS");
                run_case(c, k1->k, k1->fn, &w, 1, 0);
            }
        wt_free(c, &w);
    }
    if (saved) setenv("QC_W4G_KS", saved, 1);
    else unsetenv("QC_W4G_KS");
    free(saved);
}

/* w4a16.gemv1_tma_sym (m = 1, g128, K % 1024, k <= 6144): blocks of one stage (n 8, 40: 4 rows a block), blocks
 * whose ring wraps (28672: 28 stages a block over 8 slots; 65536: 63), a short last stage or block (1000, 4104,
 * 16392), 1 to 6 steps a row (k 6144: the most its shared memory holds).  Eligibility is not asked here (run_case
 * launches through the descriptor's plan), so the short layers it refuses by default run too. */
static void correctness_tma(ctx *c, kern *kt) {
    static const int64_t shapes[][2] = {{8, 1024},    {40, 3072},    {1000, 6144},  {4104, 1024},
                                        {28672, 4096}, {16392, 2048}, {65536, 1024}, {4096, 5120}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        wt w;
        if (wt_make(c, &w, 0, 128, shapes[sh][0], shapes[sh][1], 1) == 0) run_case(c, kt->k, kt->fn, &w, 1, 0);
        wt_free(c, &w);
    }
}

/* w4a16.gemv1_xr_sym (m = 1, g128, K % 1024, at most 16 K slices): one and two steps a slice (odd and even step
 * counts), 1 to 16 slices (k 1024 to 32768), row groups of 1 to 16 warps, fewer row pairs than blocks (n 8, 16,
 * 24: idle blocks and warps), pairs that do not divide among the row groups, the Llama-3-8B shapes. */
static void correctness_xr(ctx *c, kern *kx) {
    static const int64_t shapes[][2] = {{8, 1024},     {40, 3072},    {1000, 7168},  {4104, 1024},  {72, 14336},
                                        {264, 5120},   {4096, 4096},  {28672, 4096}, {4096, 14336}, {16, 16384},
                                        {24, 15360},   {8, 32768},    {6144, 4096},  {65544, 2048}, {1032, 10240}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        wt w;
        if (wt_make(c, &w, 0, 128, shapes[sh][0], shapes[sh][1], 1) == 0) run_case(c, kx->k, kx->fn, &w, 1, 0);
        wt_free(c, &w);
    }
}

/* Llama-3-8B shapes at M = 1, g128: w4a16.gemv1_xr_sym and w4a16.gemv1_sym beside the fragment GEMV, on the same
 * weights, and w4a16.gemv1_tma_sym where its shared memory holds the layer (all but down). */
static void timing1(ctx *c, kern *k1, kern *kf, kern *kt, kern *kx) {
    static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
    for (size_t sh = 0; sh < 4; sh++) {
        int64_t n = shapes[sh][0], k = shapes[sh][1];
        size_t wbytes = (size_t)(n * k / 2) + (size_t)(n * (k / 128)) * 2;
        int ncopy = (int)(ROTATE_BYTES / wbytes + 1);
        if (ncopy > MAXCOPY) ncopy = MAXCOPY;
        wt w;
        if (wt_make(c, &w, 0, 128, n, k, ncopy) == 0) {
            if (kx->fn) run_case(c, kx->k, kx->fn, &w, 1, REPS);
            run_case(c, k1->k, k1->fn, &w, 1, REPS);
            run_case(c, kf->k, kf->fn, &w, 1, REPS);
            if (kt->fn && k <= 6144) run_case(c, kt->k, kt->fn, &w, 1, REPS);
        }
        wt_free(c, &w);
    }
}

/* Llama-3-8B shapes (o, qkv, gate_up, down) at M = 1, 4, 16, every group; the older GEMV beside it. */
static void timing(ctx *c, kern *kf, kern *old) {
    static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
    static const int64_t ms[] = {1, 4, 16};
    for (size_t sh = 0; sh < 4; sh++)
        for (uint32_t g = 128; g >= 32; g /= 2) {
            int64_t n = shapes[sh][0], k = shapes[sh][1];
            size_t wbytes = (size_t)(n * k / 2) + (size_t)(n * (k / g)) * 2;
            int ncopy = (int)(ROTATE_BYTES / wbytes + 1);
            if (ncopy > MAXCOPY) ncopy = MAXCOPY;
            wt w;
            if (wt_make(c, &w, 0, g, n, k, ncopy) == 0)
                for (size_t i = 0; i < 3; i++) {
                    run_case(c, kf->k, kf->fn, &w, ms[i], REPS);
                    if (old->fn) run_case(c, old->k, old->fn, &w, ms[i], REPS);
                }
            wt_free(c, &w);
        }
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
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
        kern kf, old, k1, kt, kx;
        memset(&kx, 0, sizeof kx);
        memset(&kf, 0, sizeof kf);
        memset(&old, 0, sizeof old);
        memset(&k1, 0, sizeof k1);
        memset(&kt, 0, sizeof kt);
        if (c.f && load_kernel(&c, &kf, "w4a16.gemv_frag_sym") == 0) {
            load_kernel(&c, &old, "w4a16.gemv_sym");
            load_kernel(&c, &k1, "w4a16.gemv1_sym");
            load_kernel(&c, &kx, "w4a16.gemv1_xr_sym");
            if (qc_gpu_get_info(c.g)->sm >= 90) load_kernel(&c, &kt, "w4a16.gemv1_tma_sym");
            double t0 = qc_now_seconds();
            if (!getenv("QC_W4_TIMING_ONLY")) {
                if (kx.fn) correctness_xr(&c, &kx);
                if (getenv("QC_W4_XR_ONLY")) goto timed; /* the new kernel's cases alone (device A/B runs) */
                if (kt.fn) correctness_tma(&c, &kt);
                if (k1.fn) correctness1(&c, &k1);
                correctness(&c, &kf);
                correctness_r2(&c, &kf);
            }
        timed:
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            measure_copy(&c);
            if (c.copy_gbs > 0 && !getenv("QC_W4_NO_TIMING")) {
                t0 = qc_now_seconds();
                if (k1.fn) timing1(&c, &k1, &kf, &kt, &kx);
                timing(&c, &kf, &old);
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
