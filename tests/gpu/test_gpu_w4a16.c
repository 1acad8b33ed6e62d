/* test_gpu_w4a16.c - the w4a16 GPU kernels against their C reference and a double sum; timing against the W4 floor. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_w4a16"
#include "w4a16_test.h"

/* Device copy bandwidth, counted as bytes read + bytes written, from a 16-byte grid-stride copy of 1 GiB. */
static const char COPY_SRC[] =
    "extern \"C\" __global__ void qc_copy16(const uint4 *a, uint4 *b, long long n) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) b[i] = a[i];\n"
    "}\n";

/* The test's own 16-byte copy kernel, kept as a cross-check of the probe. */
static void measure_copy16(ctx *c) {
    char err[512];
    const qc_gpu_info *info = qc_gpu_get_info(c->g);
    size_t bytes = (size_t)1 << 30;
    qc_cubin cub;
    qc_reason why;
    qc_gpu_fn fn = NULL;
    qc_gpu_buf a = {0}, b = {0};
    qc_status st = qc_nvrtc_compile(c->nv, "w4a16_test.copy", COPY_SRC, "qc_copy16", NULL, info->sm, info->sm >= 90,
                                    &cub, &why);
    CHECK(st == QC_OK, "copy kernel: %s: %s", why.code, why.text);
    if (st != QC_OK) return;
    st = qc_gpu_module_load(c->g, &cub, "qc_copy16", &fn, err, sizeof err);
    qc_cubin_free(&cub);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, bytes, bytes, QC_MEM_WORKSPACE, "copy src", &a, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, bytes, bytes, QC_MEM_WORKSPACE, "copy dst", &b, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, a.ptr, 0x3f800000u, bytes / 4, err, sizeof err);
    CHECK(st == QC_OK, "copy: %s", err);
    if (st == QC_OK) {
        long long n16 = (long long)(bytes / 16);
        void *argv[3] = {&a.ptr, &b.ptr, &n16};
        qc_launch_dims d;
        memset(&d, 0, sizeof d);
        d.grid[0] = (uint32_t)info->sm_count * 8;
        d.grid[1] = d.grid[2] = 1;
        d.block[0] = 256;
        d.block[1] = d.block[2] = 1;
        float ms[20];
        qc_gpu_event e0 = NULL, e1 = NULL;
        st = qc_gpu_event_create(c->g, &e0, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_event_create(c->g, &e1, err, sizeof err);
        for (int i = 0; st == QC_OK && i < 20; i++) {
            st = qc_gpu_event_record(c->g, e0, err, sizeof err);
            if (st == QC_OK) st = qc_gpu_launch(c->g, fn, &d, argv, err, sizeof err);
            if (st == QC_OK) st = qc_gpu_event_record(c->g, e1, err, sizeof err);
            if (st == QC_OK) st = qc_gpu_event_elapsed(c->g, e0, e1, &ms[i], err, sizeof err);
        }
        qc_gpu_event_destroy(c->g, e0);
        qc_gpu_event_destroy(c->g, e1);
        CHECK(st == QC_OK, "copy timing: %s", err);
        if (st == QC_OK) {
            qsort(ms + 2, 18, sizeof ms[0], gt_cmp_float);
            double us = 1000.0 * ms[2 + 9];
            printf("%s: qc_copy16 bandwidth %.0f GB/s (1 GiB read + 1 GiB written in %.1f us; the floor uses the probe)\n",
                   TEST, us > 0 ? 2.0 * bytes / us * 1e-3 : 0.0, us);
        }
    }
    qc_gpu_free(c->g, &a);
    qc_gpu_free(c->g, &b);
}

/* Correctness on small and awkward shapes: every scheme and group, odd numbers of 8-row tiles and 16-row sets,
 * k a multiple of the group but of no larger tile, K splits with ragged ends, every M bucket. */
static void correctness(ctx *c, kern *gemv, kern *mma) {
    /* k % 128 == 0 takes the GEMV's streaming path (16-byte code loads, quad transposes); 96, 4160 and 2080 its
     * fallback; 1000 x 640 and 4104 x 1152 have ragged K splits and batches, 72 x 14336 one row set */
    static const int64_t shapes[][2] = {{8, 128},    {24, 384},    {40, 96},   {1000, 640},
                                        {4104, 1152}, {72, 14336}, {264, 4160}, {136, 2080}};
    static const int64_t gemv_ms[] = {1, 2, 3, 5, 8, 9, 13, 16};
    static const int64_t mma_ms[] = {17, 33, 64, 100, 128, 129, 300};
    for (int s = 0; s < 3; s++)
        for (uint32_t g = 32; g <= 128; g *= 2)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                int64_t n = shapes[sh][0], k = shapes[sh][1];
                if (k % g) continue;
                wt w;
                if (wt_make(c, &w, s, g, n, k, 1) == 0) {
                    for (size_t i = 0; gemv[s].k && gemv[s].fn && i < sizeof gemv_ms / sizeof gemv_ms[0]; i++)
                        if (sh != 5 || i % 3 == 0) run_case(c, gemv[s].k, gemv[s].fn, &w, gemv_ms[i], 0);
                    /* every M of the GEMV's range once per scheme and group, on a streaming shape */
                    for (int64_t mm = 1; sh == 3 && gemv[s].k && gemv[s].fn && mm <= 16; mm++)
                        if (mm != 1 && mm != 2 && mm != 3 && mm != 5 && mm != 8 && mm != 9 && mm != 13 && mm != 16)
                            run_case(c, gemv[s].k, gemv[s].fn, &w, mm, 0);
                    for (size_t i = 0; mma && mma[s].k && mma[s].fn && i < sizeof mma_ms / sizeof mma_ms[0]; i++)
                        if (sh != 5 || i % 3 == 0) run_case(c, mma[s].k, mma[s].fn, &w, mma_ms[i], 0);
                }
                wt_free(c, &w);
            }
}

/* Llama-3-8B shapes: decode M through the GEMV, prefill M through the mma kernel; large M checked by sampling. */
static void timing(ctx *c, kern *gemv, kern *mma) {
    static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
    static const int64_t gemv_ms[] = {1, 4, 16};
    static const int64_t mma_ms[] = {64, 256, 1024, 4096};
    for (size_t sh = 0; sh < 4; sh++)
        for (int s = 0; s < 3; s++)
            for (uint32_t g = 32; g <= 128; g *= 2) {
                /* the GEMV: every scheme and group at M = 1, 4, 16; the GEMM: sym, and g128 otherwise */
                int64_t n = shapes[sh][0], k = shapes[sh][1];
                size_t wbytes = (size_t)(n * k / 2) + (size_t)(n * (k / g)) * (s == 0 ? 2 : s == 1 ? 3 : 4);
                int ncopy = (int)(ROTATE_BYTES / wbytes + 1);
                if (ncopy > MAXCOPY) ncopy = MAXCOPY;
                wt w;
                if (wt_make(c, &w, s, g, n, k, ncopy) == 0) {
                    for (size_t i = 0; gemv[s].fn && i < 3; i++) run_case(c, gemv[s].k, gemv[s].fn, &w, gemv_ms[i], REPS);
                    for (size_t i = 0; mma && mma[s].fn && i < 4 && (g == 128 || (g == 32 && s != 1)); i++)
                        if (s == 0 || mma_ms[i] == 1024) run_case(c, mma[s].k, mma[s].fn, &w, mma_ms[i], REPS / 2);
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
        kern gemv[3], mma[3];
        memset(gemv, 0, sizeof gemv);
        memset(mma, 0, sizeof mma);
        if (c.f) {
            for (int s = 0; s < 3; s++) {
                char id[40];
                snprintf(id, sizeof id, "w4a16.gemv_%s", SCHEMES[s]);
                load_kernel(&c, &gemv[s], id);
                snprintf(id, sizeof id, "w4a16.mma_%s", SCHEMES[s]);
                load_kernel(&c, &mma[s], id);
            }
            double t0 = qc_now_seconds();
            correctness(&c, gemv, mma);
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            measure_copy16(&c);
            measure_copy(&c);
            if (c.copy_gbs > 0 && !getenv("QC_W4_NO_TIMING")) {
                t0 = qc_now_seconds();
                timing(&c, gemv, mma);
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
