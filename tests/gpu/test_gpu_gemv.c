/* test_gpu_gemv.c - bf16.linear_gemv against the bf16 C reference and a double sum; timing against the HBM floor. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_kernels_gemv.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_gemv"
#define ID "bf16.linear_gemv"
/* words after each output, poisoned too, that the kernel must leave alone */
#define GUARD_WORDS 64
/* above this many multiply-adds only sampled outputs are checked, in double */
#define FULL_REF_MACS 100000000.0
/* timing: W copies cycled so that the launches read HBM, not the 60 MiB L2 */
#define ROTATE_BYTES (256u << 20)
#define REPS 100

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
    int bx;          /* the kernel takes "x.bf16" (bf16 bits) rather than f32 "x" */
    uint64_t rng;
    double copy_gbs; /* measured device copy bandwidth, GB/s (read + write) */
} ctx;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of `reps` launches (after 3 warm-ups), argument set
 * i % nsets for launch i. */
static double time_median(ctx *c, qc_gpu_fn fn, const qc_launch_dims *d, void ***argvs, int nsets, int reps) {
    char err[512];
    float ms[256];
    double med = -1;
    if (reps > 256) reps = 256;
    qc_gpu_event a = NULL, b = NULL;
    if (qc_gpu_event_create(c->g, &a, err, sizeof err) || qc_gpu_event_create(c->g, &b, err, sizeof err)) {
        CHECK(0, "events: %s", err);
        goto out;
    }
    for (int i = 0; i < 3; i++) qc_gpu_launch(c->g, fn, d, argvs[i % nsets], err, sizeof err);
    for (int i = 0; i < reps; i++) {
        int bad = qc_gpu_event_record(c->g, a, err, sizeof err) ||
                  qc_gpu_launch(c->g, fn, d, argvs[(i + 3) % nsets], err, sizeof err) ||
                  qc_gpu_event_record(c->g, b, err, sizeof err) ||
                  qc_gpu_event_elapsed(c->g, a, b, &ms[i], err, sizeof err);
        if (bad) {
            CHECK(0, "timing: %s", err);
            goto out;
        }
    }
    qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
    med = 1000.0 * ms[reps / 2];
out:
    qc_gpu_event_destroy(c->g, a);
    qc_gpu_event_destroy(c->g, b);
    return med;
}

static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Random x and W; the reference (when cheap) and the GPU from the same named
 * arguments; y poisoned with guard words past its end.  Tolerance as for
 * bf16.linear_mma: each output within 1e-5 * sum_t |bf16(x)_t w_t| of the C
 * reference and of a double-precision sum.  reps > 0: also time it, W
 * cycled through enough copies to miss L2, and print the floor. */
static void case_gemv(ctx *c, int64_t m, int64_t n, int64_t k, int reps) {
    char err[512], shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld", (long long)m, (long long)n, (long long)k);
    const qc_format_desc *f = qc_format_find(c->rt, "bf16");
    size_t xc = (size_t)(m * k), wc = (size_t)(n * k), yc = (size_t)(m * n);
    float *x = malloc(xc * 4), *xb = malloc(xc * 4), *wf = malloc(wc * 4), *ref = malloc(yc * 4);
    char *got = malloc(yc * 4 + GUARD_WORDS * 4);
    uint16_t *xh = NULL;
    enum { MAXCOPY = 64 };
    qc_gpu_buf dx = {0}, dy = {0}, dw[MAXCOPY];
    memset(dw, 0, sizeof dw);
    int ncopy = 1;
    for (size_t i = 0; i < xc; i++) x[i] = qc_test_normal(&c->rng);
    for (size_t i = 0; i < wc; i++) wf[i] = qc_test_normal(&c->rng) * 0.05f;
    if (xc > 3) x[3] = 0x1.fffp-3f; /* exercises round-to-nearest-even in the staging */
    qc_quant_request req = {.struct_size = sizeof req, .w = wf, .n = n, .k = k};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    qc_status st = f->quantize(&req, &pw, &why);
    CHECK(st == QC_OK, "bf16 quantize: %s", why.text);
    if (st != QC_OK) goto out;
    f->quantize_activations(&pw, x, m, xb);
    const uint16_t *w = pw.buffers[0].data;
    /* the bf16-x kernel gets x as bf16 bits: the same values xb holds */
    xh = malloc(xc * 2 + 2);
    for (size_t i = 0; xh && i < xc; i++) xh[i] = qc_f32_to_bf16(x[i]);
    const void *xsrc = c->bx ? (const void *)xh : (const void *)x;
    size_t xbytes = c->bx ? xc * 2 : xc * 4;
    int full = (double)m * n * k <= FULL_REF_MACS;

    /* the C reference through the descriptor, as the runtime would call it */
    void *hx = (void *)xsrc, *hw = (void *)w, *hy = ref;
    qc_named_arg args[] = {{c->bx ? "x.bf16" : "x", &hx}, {"w.weight", &hw}, {"y", &hy}, {"m", &m}, {"n", &n}, {"k", &k}};
    void *argv[8];
    if (full) {
        gt_poison(ref, yc * 4);
        st = qc_kernel_bind(c->k, args, 6, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(c->k, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", shape, err);
        size_t first = 0;
        CHECK(gt_unwritten(ref, yc * 4, &first) == 0, "%s: reference left y[%zu] unwritten", shape, first);
        if (st != QC_OK) goto out;
    }

    if (reps > 0) {
        ncopy = (int)(ROTATE_BYTES / (wc * 2) + 1);
        if (ncopy > MAXCOPY) ncopy = MAXCOPY;
    }
    st = qc_gpu_alloc(c->g, xbytes, xbytes, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, xsrc, xbytes, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    for (int i = 0; st == QC_OK && i < ncopy; i++) {
        st = qc_gpu_alloc(c->g, wc * 2, wc * 2, QC_MEM_WEIGHTS, "w", &dw[i], err, sizeof err);
        if (st == QC_OK) st = qc_gpu_upload(c->g, dw[i].ptr, w, wc * 2, err, sizeof err);
    }
    CHECK(st == QC_OK, "%s: buffers: %s", shape, err);
    if (st != QC_OK) goto out;
    qc_problem p = {.struct_size = sizeof p, .m = m, .n = n, .k = k};
    qc_launch_dims d;
    c->k->launch_dims(&p, &d);
    args[0].value = &dx.ptr;
    args[1].value = &dw[0].ptr;
    args[2].value = &dy.ptr;
    st = qc_kernel_bind(c->k, args, 6, argv, 8, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fn, &d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s: launch: %s", shape, err);
    if (st != QC_OK) goto out;
    size_t first = 0, past = gt_unwritten(got + yc * 4, GUARD_WORDS * 4, &first);
    CHECK(past == GUARD_WORDS, "%s: wrote %zu words past the end of y", shape, GUARD_WORDS - past);
    size_t left = gt_unwritten(got, yc * 4, &first);
    CHECK(left == 0, "%s: left %zu outputs unwritten (first %zu)", shape, left, first);
    const float *yg = (const float *)got;
    size_t samples = full ? yc : 1024, bad = 0, fbad = 0;
    double worst_d = 0, worst_c = 0, nd = 0, den = 0;
    for (size_t s = 0; s < samples; s++) {
        size_t e = full ? s : (size_t)(qc_test_rng(&c->rng) % yc);
        int64_t i = (int64_t)e / n, j = (int64_t)e % n;
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < k; t++) {
            double pr = (double)xb[i * k + t] * bf16_value(w[j * k + t]);
            acc += pr;
            mag += fabs(pr);
        }
        double lim = 1e-5 * mag + 1e-30, dd = fabs(yg[e] - acc), dc = full ? fabs(yg[e] - (double)ref[e]) : 0;
        nd += dd * dd;
        den += acc * acc;
        if (dd / lim > worst_d) worst_d = dd / lim;
        if (dc / lim > worst_c) worst_c = dc / lim;
        if ((!(dd <= lim) || !(dc <= lim)) && !bad++) fbad = e;
    }
    printf("  %-19s %-26s %6zu outputs: worst d/tol vs double %.4f", c->k->id, shape, samples, worst_d);
    if (full) printf(", vs C ref %.4f", worst_c);
    printf("; relL2 vs double %.2e\n", den > 0 ? sqrt(nd / den) : 0.0);
    CHECK(bad == 0, "%s: %zu outputs out of tolerance, first %zu: gpu %.9g", shape, bad, fbad, (double)yg[fbad]);

    if (reps > 0 && bad == 0) {
        void *argvs_store[MAXCOPY][8], **argvs[MAXCOPY];
        for (int i = 0; i < ncopy; i++) {
            args[1].value = &dw[i].ptr;
            qc_kernel_bind(c->k, args, 6, argvs_store[i], 8, err, sizeof err);
            argvs[i] = argvs_store[i];
        }
        double us = time_median(c, c->fn, &d, argvs, ncopy, reps);
        double wbytes = wc * 2.0, floor_us = wbytes / (c->copy_gbs * 1e3);
        double all_bytes = wbytes + xc * 4.0 + yc * 4.0;
        printf("  TIME %-19s %-21s median %8.2f us over %d launches (W cycled over %d copies)  W %.1f MB  floor %.2f us at "
               "%.0f GB/s  fraction of floor %.1f%%  (%.0f GB/s of all bytes)\n",
               c->k->id, shape, us, reps, ncopy, wbytes / 1e6, floor_us, c->copy_gbs, 100.0 * floor_us / us,
               all_bytes / us * 1e-3);
    }
out:
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dy);
    for (int i = 0; i < MAXCOPY; i++) qc_gpu_free(c->g, &dw[i]);
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
    free(x), free(xb), free(xh), free(wf), free(ref), free(got);
}

/* Device copy bandwidth, counted as bytes read + bytes written, from a
 * 16-byte grid-stride copy of 1 GiB in this process. */
static const char COPY_SRC[] =
    "extern \"C\" __global__ void qc_copy16(const uint4 *a, uint4 *b, long long n) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) b[i] = a[i];\n"
    "}\n";

static void measure_copy(ctx *c) {
    char err[512];
    const qc_gpu_info *info = qc_gpu_get_info(c->g);
    size_t bytes = (size_t)1 << 30;
    qc_cubin cub;
    qc_reason why;
    qc_gpu_fn fn = NULL;
    qc_gpu_buf a = {0}, b = {0};
    qc_status st = qc_nvrtc_compile(c->nv, "gemv_test.copy", COPY_SRC, "qc_copy16", NULL, info->sm, info->sm >= 90,
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
        void *argv[3] = {&a.ptr, &b.ptr, &n16}, **argvs[1] = {argv};
        qc_launch_dims d;
        memset(&d, 0, sizeof d);
        d.grid[0] = (uint32_t)info->sm_count * 8;
        d.grid[1] = d.grid[2] = 1;
        d.block[0] = 256;
        d.block[1] = d.block[2] = 1;
        double us = time_median(c, fn, &d, argvs, 1, 20);
        c->copy_gbs = us > 0 ? 2.0 * bytes / us * 1e-3 : 0;
        printf("%s: copy bandwidth %.0f GB/s (1 GiB read + 1 GiB written in %.1f us)\n", TEST, c->copy_gbs, us);
    }
    qc_gpu_free(c->g, &a);
    qc_gpu_free(c->g, &b);
}

/* eligible() and the plan without a launch */
static void descriptor(ctx *c) {
    qc_reason why;
    memset(&why, 0, sizeof why);
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 1, .n = 4096, .k = 4096, .phase = QC_PHASE_DECODE};
    CHECK(c->k->m_min == 1 && c->k->m_max == 16 && c->k->arch.min_sm == 80, "gemv range");
    CHECK(c->k->eligible(&p, &why) == 1, "4096x4096 refused: %s", why.text);
    p.k = 4100;
    CHECK(c->k->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=4100: %s", why.code);
    p.k = 14336;
    p.m = 16;
    CHECK(c->k->eligible(&p, &why) == 0 && strcmp(why.code, "shape") == 0, "m=16 k=14336: %s", why.code);
    p.m = 4;
    CHECK(c->k->eligible(&p, &why) == 1, "m=4 k=14336 refused: %s", why.text);
    int mt, rows;
    int64_t kc;
    qc_gemv_plan(16, 4096, &mt, &rows, &kc);
    CHECK(mt == 16 && kc == 4096, "plan m=16 k=4096: mt %d kc %lld", mt, (long long)kc);
    qc_gemv_plan(1, 14336, &mt, &rows, &kc);
    CHECK(mt == 1 && kc == 14336, "plan m=1 k=14336: kc %lld", (long long)kc);
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
        static const char *const IDS[] = {ID, "bf16.linear_gemv_bx"};
        for (int kid = 0; kid < 2; kid++) {
            c.k = qc_kernel_find(c.rt, IDS[kid]);
            c.bx = kid == 1;
            CHECK(c.k != NULL, "%s is not registered", IDS[kid]);
            qc_reason why;
            qc_status st = c.k ? qc_gpu_kernel_load(c.g, c.nv, c.k, &c.fn, &why) : QC_ERR_INVALID;
            CHECK(st == QC_OK, "%s: %s: %s", IDS[kid], why.code, why.text);
            if (st != QC_OK) continue;
            double t0 = qc_now_seconds();
            if (!c.bx) {
                descriptor(&c);
                /* odd n, k not a multiple of 8 (2-byte path), every x bucket, tails of rows and of K */
                case_gemv(&c, 1, 77, 33, 0);
                case_gemv(&c, 5, 1001, 1000, 0);
                case_gemv(&c, 3, 257, 1003, 0);
                case_gemv(&c, 6, 99, 1004, 0);   /* float4 staging of x, 2-byte loads of W */
                case_gemv(&c, 2, 129, 264, 0);
                case_gemv(&c, 16, 131, 2056, 0);
                case_gemv(&c, 9, 4097, 520, 0);
                case_gemv(&c, 7, 33, 24, 0);
                case_gemv(&c, 16, 1, 8, 0);
                case_gemv(&c, 4, 3, 7, 0);
                case_gemv(&c, 16, 300, 4352, 0);  /* two K chunks (kc 4096 at m = 16) */
                case_gemv(&c, 3, 100, 20000, 0);  /* two K chunks at m = 4 */
                case_gemv(&c, 13, 65, 5001, 0);   /* chunks on the 2-byte path */
                case_gemv(&c, 1, 576, 576, 0);
                case_gemv(&c, 8, 1536, 576, 0);
                measure_copy(&c);
            } else {
                /* every m bucket, odd n (rows past n in the last warp), k tails of the 4-vector loop */
                case_gemv(&c, 1, 77, 32, 0);
                case_gemv(&c, 2, 1001, 1000, 0);
                case_gemv(&c, 3, 17, 1032, 0);
                case_gemv(&c, 5, 4097, 520, 0);
                case_gemv(&c, 8, 33, 8, 0);
                case_gemv(&c, 7, 131, 2056, 0);
                case_gemv(&c, 4, 300, 14336, 0);
                case_gemv(&c, 1, 576, 576, 0);
                case_gemv(&c, 8, 1536, 576, 0);
                case_gemv(&c, 16, 999, 4104, 0);
                case_gemv(&c, 11, 64, 264, 0);
            }
            if (c.copy_gbs > 0) {
                static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
                static const int64_t ms[] = {1, 4, 16}, ms_bx[] = {1, 8, 16};
                for (size_t sh = 0; sh < 4; sh++)
                    for (size_t i = 0; i < 3; i++)
                        case_gemv(&c, c.bx ? ms_bx[i] : ms[i], shapes[sh][0], shapes[sh][1], REPS);
                if (c.bx) case_gemv(&c, 1, 128256, 4096, 20); /* Llama-3-8B lm_head */
            }
            printf("%s: %s cases took %.1f s\n", TEST, IDS[kid], qc_now_seconds() - t0);
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
