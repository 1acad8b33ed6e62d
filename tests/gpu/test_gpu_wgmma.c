/* test_gpu_wgmma.c - bf16.linear_wgmma against its C reference and a double sum; Llama-3-8B timings against peak and cuBLAS. */
#define _GNU_SOURCE
#include <math.h>

#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_kernels_wgmma.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_wgmma"
#define ID "bf16.linear_wgmma"
/* words after y, poisoned too, that the kernel must leave alone */
#define GUARD_WORDS 64
/* above this many multiply-adds only sampled outputs are checked (in double) */
#define FULL_REF_MACS 60000000.0
#define SAMPLES 2048
/* Tolerance per output: TOL_REL * sum_t |x_t w_t| (f32 accumulation over up
 * to 14336 products leaves ~1e-6 of that; a wrong tile, swizzle or fragment
 * mapping gives errors of order 1). */
#define TOL_REL 1e-4
/* dense bf16 tensor-core peak of an H200 SXM (the brief's yardstick) */
#define PEAK_TFLOPS 990.0
#define WARMUP 5
#define ITERS 30

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
    uint64_t rng;
} ctx;

static double bf(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t to_bf16(float f) { /* nearest even; inputs are finite */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void fill_bf16(uint16_t *p, size_t count, uint64_t *rng, float scale) {
    for (size_t i = 0; i < count; i++) p[i] = to_bf16(qc_test_uniform(rng) * scale);
}

/* Launch on device buffers through the descriptor (tensor maps built by the launcher). */
static qc_status launch(ctx *c, qc_devptr x, qc_devptr w, qc_devptr y, int64_t m, int64_t n, int64_t k, char *err,
                        size_t errlen) {
    qc_named_arg args[] = {{"x.bf16", &x}, {"w.weight", &w}, {"y", &y}, {"m", &m}, {"n", &n}, {"k", &k}};
    void *argv[8];
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = m, .n = n, .k = k};
    qc_launch_dims d;
    c->k->launch_dims(&p, &d);
    qc_status st = qc_kernel_bind(c->k, args, 6, argv, 8, err, errlen);
    if (st == QC_OK) st = qc_gpu_launch_kernel(c->g, c->k, c->fn, &d, argv, err, errlen);
    return st;
}

/* Compare `got` [m,n] with double sums of x and w at `samples` outputs (all
 * when samples == 0) and, when given, the C reference; prints one line. */
static int compare(const char *shape, const float *got, const float *ref, const uint16_t *x, const uint16_t *w,
                   int64_t m, int64_t n, int64_t k, size_t samples, uint64_t *rng) {
    size_t total = (size_t)(m * n), count = samples ? samples : total, bad = 0, fbad = 0;
    double worst_d = 0, worst_c = 0, nd = 0, den = 0;
    for (size_t s = 0; s < count; s++) {
        size_t e = samples ? (size_t)(qc_test_rng(rng) % total) : s;
        int64_t i = (int64_t)e / n, j = (int64_t)e % n;
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < k; t++) {
            double pr = bf(x[i * k + t]) * bf(w[j * k + t]);
            acc += pr;
            mag += fabs(pr);
        }
        double lim = TOL_REL * mag + 1e-30, dd = fabs(got[e] - acc), dc = ref ? fabs(got[e] - (double)ref[e]) : 0;
        nd += dd * dd;
        den += acc * acc;
        if (dd / lim > worst_d) worst_d = dd / lim;
        if (dc / lim > worst_c) worst_c = dc / lim;
        if ((!(dd <= lim) || !(dc <= lim)) && !bad++) fbad = e;
    }
    printf("  %-28s %8zu outputs: worst d/tol vs double %.4f", shape, count, worst_d);
    if (ref) printf(", vs C ref %.4f", worst_c);
    printf("; relL2 %.2e (tol %.0e x sum|x w|)\n", den > 0 ? sqrt(nd / den) : 0.0, TOL_REL);
    CHECK(bad == 0, "%s: %zu outputs out of tolerance, first y[%zu] (row %zu col %zu) = %.9g", shape, bad, fbad,
          fbad / (size_t)n, fbad % (size_t)n, (double)got[fbad]);
    return bad == 0;
}

/* Random bf16 x and W, y poisoned with guard words; the whole of y must be
 * written and match. */
static void case_check(ctx *c, int64_t m, int64_t n, int64_t k) {
    char err[512], shape[64];
    int bn, st_n;
    uint32_t smem;
    int64_t tiles;
    qc_wgmma_plan(m, n, &bn, &st_n, &smem, &tiles);
    snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld", (long long)m, (long long)n, (long long)k);
    size_t xc = (size_t)(m * k), wc = (size_t)(n * k), yc = (size_t)(m * n);
    uint16_t *x = malloc(xc * 2), *w = malloc(wc * 2);
    float *ref = NULL;
    char *got = malloc(yc * 4 + GUARD_WORDS * 4);
    qc_gpu_buf dx = {0}, dw = {0}, dy = {0};
    fill_bf16(x, xc, &c->rng, 1.0f);
    fill_bf16(w, wc, &c->rng, 0.1f);
    int full = (double)m * n * k <= FULL_REF_MACS;
    if (full) {
        ref = malloc(yc * 4);
        gt_poison(ref, yc * 4);
        void *hx = x, *hw = w, *hy = ref;
        qc_named_arg args[] = {{"x.bf16", &hx}, {"w.weight", &hw}, {"y", &hy}, {"m", &m}, {"n", &n}, {"k", &k}};
        void *argv[8];
        qc_status st = qc_kernel_bind(c->k, args, 6, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(c->k, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", shape, err);
    }
    qc_status st = qc_gpu_alloc(c->g, xc * 2, xc * 2, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, wc * 2, wc * 2, QC_MEM_WEIGHTS, "w", &dw, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, x, xc * 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dw.ptr, w, wc * 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    if (st == QC_OK) st = launch(c, dx.ptr, dw.ptr, dy.ptr, m, n, k, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s (128x%d tiles): %s", shape, bn, err);
    if (st == QC_OK) {
        size_t first = 0, past = gt_unwritten(got + yc * 4, GUARD_WORDS * 4, &first);
        CHECK(past == GUARD_WORDS, "%s: wrote %zu words past the end of y", shape, GUARD_WORDS - past);
        size_t left = gt_unwritten(got, yc * 4, &first);
        CHECK(left == 0, "%s (128x%d tiles): left %zu outputs unwritten (first y[%zu], row %zu col %zu)", shape, bn,
              left, first, first / (size_t)n, first % (size_t)n);
        char label[96];
        snprintf(label, sizeof label, "%s 128x%d", shape, bn);
        compare(label, (const float *)got, ref, x, w, m, n, k, full ? 0 : SAMPLES, &c->rng);
    }
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dw);
    qc_gpu_free(c->g, &dy);
    free(x), free(w), free(ref), free(got);
}

/* A launch the tensor maps cannot describe fails with a message naming the map. */
static void bad_launch(ctx *c) {
    char err[512] = "";
    qc_gpu_buf dx = {0}, dw = {0}, dy = {0};
    int64_t m = 128, n = 256, k = 128;
    qc_status st = qc_gpu_alloc(c->g, 65536, 65536, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, 65536, 65536, QC_MEM_WEIGHTS, "w", &dw, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, 131072, 131072, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    CHECK(st == QC_OK, "buffers: %s", err);
    if (st == QC_OK) {
        st = launch(c, dx.ptr + 2, dw.ptr, dy.ptr, m, n, k, err, sizeof err); /* x 2 bytes off 16-byte alignment */
        CHECK(st != QC_OK && strstr(err, "x.bf16") && strstr(err, "cuTensorMapEncodeTiled"),
              "misaligned x: status %d, '%s'", (int)st, err);
        printf("%s: misaligned x refused: %s\n", TEST, err);
        qc_reason why;
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 128, .n = 256, .k = 100};
        CHECK(!c->k->eligible(&p, &why) && strcmp(why.code, "align_k") == 0, "k=100: %s", why.code);
        p.k = 128;
        p.n = 260;
        CHECK(!c->k->eligible(&p, &why) && strcmp(why.code, "align_n") == 0, "n=260: %s", why.code);
        st = qc_gpu_sync(c->g, err, sizeof err);
        CHECK(st == QC_OK, "stream after the refused launch: %s", err);
    }
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dw);
    qc_gpu_free(c->g, &dy);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* cuBLAS bf16 (us) from ../shared/anchors/README.md (H200, 2026-11-29), M = 1024 and 4096 */
static double anchor_us(int64_t m, int64_t n, int64_t k) {
    static const struct {
        int64_t n, k;
        double us1024, us4096;
    } a[] = {{6144, 4096, 73.4, 293.4}, {4096, 4096, 46.8, 177.7}, {28672, 4096, 347.0, 1414.4},
             {4096, 14336, 166.5, 690.2}};
    for (size_t i = 0; i < 4; i++)
        if (a[i].n == n && a[i].k == k) return m == 1024 ? a[i].us1024 : m == 4096 ? a[i].us4096 : 0;
    return 0;
}

/* The four Llama-3-8B linears at M = 1024..8192 on shared buffers sized for
 * the largest; each shape checked at sampled outputs first. */
static void timings(ctx *c) {
    static const struct {
        const char *name;
        int64_t n, k;
    } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    static const int64_t ms[] = {1024, 2048, 4096, 8192};
    const int64_t m_max = 8192, xk_max = 14336, w_max = 28672 * 4096, y_max = 8192 * 28672;
    char err[512];
    qc_gpu_buf dx = {0}, dw = {0}, dy = {0};
    uint16_t *x = malloc((size_t)(m_max * xk_max) * 2), *w = malloc((size_t)w_max * 2);
    float *got = malloc(SAMPLES * 4);
    qc_gpu_event ev[ITERS + 1];
    memset(ev, 0, sizeof ev);
    double t0 = qc_now_seconds();
    fill_bf16(x, (size_t)(m_max * xk_max), &c->rng, 1.0f);
    fill_bf16(w, (size_t)w_max, &c->rng, 0.1f);
    printf("%s: timing data generated in %.1f s\n", TEST, qc_now_seconds() - t0);
    qc_status st = qc_gpu_alloc(c->g, (size_t)(m_max * xk_max) * 2, (size_t)(m_max * xk_max) * 2, QC_MEM_ACTIVATIONS,
                                "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, (size_t)w_max * 2, (size_t)w_max * 2, QC_MEM_WEIGHTS, "w", &dw, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, (size_t)y_max * 4, (size_t)y_max * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, x, (size_t)(m_max * xk_max) * 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dw.ptr, w, (size_t)w_max * 2, err, sizeof err);
    for (int i = 0; st == QC_OK && i <= ITERS; i++) st = qc_gpu_event_create(c->g, &ev[i], err, sizeof err);
    CHECK(st == QC_OK, "timing buffers: %s", err);
    for (size_t s = 0; st == QC_OK && s < 4; s++)
        for (size_t mi = 0; st == QC_OK && mi < 4; mi++) {
            int64_t m = ms[mi], n = shapes[s].n, k = shapes[s].k;
            int bn, stages;
            uint32_t smem;
            int64_t tiles;
            qc_wgmma_plan(m, n, &bn, &stages, &smem, &tiles);
            char shape[96];
            snprintf(shape, sizeof shape, "%s m=%lld n=%lld k=%lld 128x%d", shapes[s].name, (long long)m, (long long)n,
                     (long long)k, bn);
            /* correctness at this shape: sampled outputs after one poisoned run */
            st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, (size_t)(m * n), err, sizeof err);
            if (st == QC_OK) st = launch(c, dx.ptr, dw.ptr, dy.ptr, m, n, k, err, sizeof err);
            if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", shape, err);
            if (st != QC_OK) break;
            int ok = 1;
            {
                uint64_t pick = c->rng;
                size_t bad = 0;
                double worst = 0;
                for (int i = 0; i < 256 && st == QC_OK; i++) {
                    size_t e = (size_t)(qc_test_rng(&pick) % (uint64_t)(m * n));
                    float v;
                    st = qc_gpu_download(c->g, &v, dy.ptr + e * 4, 4, err, sizeof err);
                    int64_t r = (int64_t)e / n, col = (int64_t)e % n;
                    double acc = 0, mag = 0;
                    for (int64_t t = 0; t < k; t++) {
                        double pr = bf(x[r * k + t]) * bf(w[col * k + t]);
                        acc += pr;
                        mag += fabs(pr);
                    }
                    double q = fabs(v - acc) / (TOL_REL * mag + 1e-30);
                    if (!(q <= 1)) bad++;
                    if (q > worst || q != q) worst = q;
                }
                c->rng = pick;
                CHECK(st == QC_OK && bad == 0, "%s: %zu of 256 sampled outputs out of tolerance (worst d/tol %.3g) %s",
                      shape, bad, worst, st == QC_OK ? "" : err);
                ok = st == QC_OK && bad == 0;
                printf("  %-40s 256 sampled outputs: worst d/tol %.4f\n", shape, worst);
            }
            if (!ok) continue;
            for (int i = 0; i < WARMUP && st == QC_OK; i++) st = launch(c, dx.ptr, dw.ptr, dy.ptr, m, n, k, err, sizeof err);
            st = st == QC_OK ? qc_gpu_event_record(c->g, ev[0], err, sizeof err) : st;
            for (int i = 0; i < ITERS && st == QC_OK; i++) {
                st = launch(c, dx.ptr, dw.ptr, dy.ptr, m, n, k, err, sizeof err);
                if (st == QC_OK) st = qc_gpu_event_record(c->g, ev[i + 1], err, sizeof err);
            }
            float ms_each[ITERS], total = 0;
            for (int i = 0; i < ITERS && st == QC_OK; i++) {
                st = qc_gpu_event_elapsed(c->g, ev[i], ev[i + 1], &ms_each[i], err, sizeof err);
                total += ms_each[i];
            }
            CHECK(st == QC_OK, "%s timing: %s", shape, err);
            if (st != QC_OK) break;
            qsort(ms_each, ITERS, sizeof ms_each[0], cmp_float);
            double med = ms_each[ITERS / 2], flops = 2.0 * m * n * k, tf = flops / (med * 1e-3) / 1e12;
            double an = anchor_us(m, n, k);
            printf("  TIME %-40s median %.4f ms (mean %.4f, min %.4f over %d)  %6.1f TFLOP/s  %5.1f%% of %.0f peak",
                   shape, med, total / ITERS, ms_each[0], ITERS, tf, 100.0 * tf / PEAK_TFLOPS, PEAK_TFLOPS);
            if (an > 0) printf("  cuBLAS %.1f us -> %.2fx cuBLAS", an, an / (med * 1e3));
            printf("\n");
        }
    for (int i = 0; i <= ITERS; i++) qc_gpu_event_destroy(c->g, ev[i]);
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dw);
    qc_gpu_free(c->g, &dy);
    free(x), free(w), free(got);
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    if (qc_gpu_get_info(c.g)->sm != 90) {
        printf("%s: skip: %s is sm_%d; bf16.linear_wgmma runs on sm_90 only\n", TEST, qc_gpu_get_info(c.g)->name,
               qc_gpu_get_info(c.g)->sm);
        qc_gpu_close(c.g);
        return 0;
    }
    char *tmp = NULL;
    int setup_rc = gt_setup(TEST, c.g, &tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    if (c.rt) {
        c.k = qc_kernel_find(c.rt, ID);
        CHECK(c.k != NULL, "%s is not registered", ID);
        qc_reason why;
        double t0 = qc_now_seconds();
        qc_status st = c.k ? qc_gpu_kernel_load(c.g, c.nv, c.k, &c.fn, &why) : QC_ERR_INVALID;
        CHECK(st == QC_OK, "%s: %s: %s", ID, why.code, why.text);
        printf("%s: %s loaded in %.1f s\n", TEST, ID, qc_now_seconds() - t0);
        if (st == QC_OK) {
            t0 = qc_now_seconds();
            /* odd m (TMA zero fill of rows, masked stores), n tails inside a tile
             * and whole W boxes past n, each tile width, one and many k steps,
             * several tiles per block (persistent loop) */
            case_check(&c, 1, 256, 64);
            case_check(&c, 37, 264, 192);
            case_check(&c, 200, 1000, 320);
            case_check(&c, 129, 392, 640);
            case_check(&c, 256, 6144, 128);   /* 128x128 tiles */
            case_check(&c, 1024, 6144, 256);  /* 128x192 tiles */
            case_check(&c, 1024, 4096, 512);  /* 128x256 tiles, one wave */
            case_check(&c, 2900, 2056, 1024); /* 128x192: 3 groups of row tiles, the last of 7; 2 tiles per block */
            case_check(&c, 1024, 1024, 4096);
            case_check(&c, 300, 128, 14336);  /* long k: 224 steps through the ring */
            bad_launch(&c);
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            if (!qc_test_failed) timings(&c);
            else printf("%s: timings skipped after a correctness failure\n", TEST);
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
