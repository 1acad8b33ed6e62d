/* w4a16_test.h - what the w4a16 GPU tests share: the context, packed weights cycled over copies, one case run
 * against the C reference and a double sum with its timing against the W4 floor, the copy-bandwidth probe, and
 * kernel loading.  Include once, after defining TEST (and REPS to change the timed launches). */
#ifndef W4A16_TEST_H
#define W4A16_TEST_H
#include "w4a16_bf16w.h"
/* words after y, poisoned too, that a kernel must leave alone */
#define GUARD_WORDS 64
/* above this many multiply-adds only sampled outputs are checked (in double), and the C reference is skipped */
#define FULL_REF_MACS 60000000.0
#define SAMPLES 1536
/* timing: weight copies cycled so that the launches read HBM, not the 60 MiB L2 */
#define ROTATE_BYTES (256u << 20)
#define MAXCOPY 16
#ifndef REPS
#define REPS 60 /* timed launches per case (median) */
#endif
/* dense bf16 tensor peak of the H200 (H100 SXM datasheet), TFLOP/s */
#define PEAK_TFLOPS 989.0

static const char *const SCHEMES[] = {"sym", "asym", "fmin"};
/* the median of the last timed run_case, us (-1 when none) */
static double last_us = -1;

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_format_desc *f;
    uint64_t rng;
    double copy_gbs; /* measured device copy bandwidth, GB/s (read + write) */
} ctx;

/* One quantized weight: host packing, its dequantized values, device copies. */
typedef struct wt {
    int scheme; /* 0 sym, 1 asym, 2 fmin */
    uint32_t g;
    int64_t n, k;
    qc_packed_weight pw;
    float *wf;       /* dequantized [n, k] */
    float *center;   /* fmin: m + 8 d per [n, k / g] (the GPU's offset term), else NULL */
    int ncopy;
    qc_gpu_buf dev[MAXCOPY][QC_MAX_WEIGHT_BUFFERS];
    size_t wbytes;   /* all buffers: what a launch must read */
} wt;

/* Median microseconds of `reps` launches (after 3 warm-ups), argument set i % nsets for launch i, each synced
 * (gpu_test.h's gt_time_launches_as; GT_TIME=memset or stream picks another method). */
static double time_median(ctx *c, const qc_kernel_desc *k, qc_gpu_fn fn, const qc_launch_dims *d, void ***argvs,
                          int nsets, int reps) {
    gt_launch ls[MAXCOPY];
    if (nsets > MAXCOPY) nsets = MAXCOPY;
    for (int i = 0; i < nsets; i++) ls[i] = (gt_launch){.fn = fn, .d = *d, .argv = argvs[i], .k = k};
    return gt_time_launches_as(c->g, ls, 1, 1, nsets, reps, "synced");
}

static void wt_free(ctx *c, wt *w) {
    for (int i = 0; i < MAXCOPY; i++)
        for (int b = 0; b < QC_MAX_WEIGHT_BUFFERS; b++) qc_gpu_free(c->g, &w->dev[i][b]);
    if (w->pw.n_buffers) c->f->release(&w->pw);
    free(w->wf);
    free(w->center);
    memset(w, 0, sizeof *w);
}

/* Quantize random rows (normal, with rows of different magnitude and a
 * shifted mean in some, so asym and fmin differ from sym) and upload
 * `ncopy` copies. */
static int wt_make(ctx *c, wt *w, int scheme, uint32_t g, int64_t n, int64_t k, int ncopy) {
    char err[512];
    memset(w, 0, sizeof *w);
    w->scheme = scheme, w->g = g, w->n = n, w->k = k, w->ncopy = ncopy;
    size_t wc = (size_t)(n * k);
    float *src = malloc(wc * 4);
    w->wf = malloc(wc * 4);
    if (!src || !w->wf) {
        CHECK(0, "out of memory");
        free(src);
        return -1;
    }
    for (int64_t j = 0; j < n; j++) {
        float rs = (j % 7 == 3) ? 8.0f : (j % 5 == 1) ? 0.125f : 1.0f, mean = (j % 3 == 2) ? 0.02f : 0.0f;
        for (int64_t t = 0; t < k; t++) src[j * k + t] = (qc_test_normal(&c->rng) * 0.05f + mean) * rs;
    }
    qc_quant_request req = {.struct_size = sizeof req, .w = src, .n = n, .k = k, .group_size = g,
                            .scheme = SCHEMES[scheme]};
    w->pw.struct_size = sizeof w->pw;
    qc_reason why;
    qc_status st = c->f->quantize(&req, &w->pw, &why);
    free(src);
    CHECK(st == QC_OK, "quantize %s g%u %lldx%lld: %s", SCHEMES[scheme], g, (long long)n, (long long)k, why.text);
    if (st != QC_OK) return -1;
    st = c->f->dequantize(&w->pw, w->wf);
    CHECK(st == QC_OK, "dequantize");
    if (scheme == 2) { /* fmin: the tolerance also counts |m + 8 d| (docs/formats/w4a16.md, GPU kernels) */
        int64_t ng = k / g;
        w->center = malloc((size_t)(n * ng) * 4);
        const uint16_t *s = NULL, *mn = NULL;
        for (uint32_t b = 0; b < w->pw.n_buffers; b++) {
            if (strcmp(w->pw.buffers[b].name, "scales") == 0) s = w->pw.buffers[b].data;
            if (strcmp(w->pw.buffers[b].name, "mins") == 0) mn = w->pw.buffers[b].data;
        }
        for (int64_t i = 0; w->center && s && mn && i < n * ng; i++)
            w->center[i] = qc_f16_to_f32(mn[i]) + 8.0f * qc_f16_to_f32(s[i]);
    }
    for (uint32_t b = 0; b < w->pw.n_buffers; b++) w->wbytes += w->pw.buffers[b].bytes;
    for (int i = 0; st == QC_OK && i < ncopy; i++)
        for (uint32_t b = 0; st == QC_OK && b < w->pw.n_buffers; b++) {
            const qc_buffer *hb = &w->pw.buffers[b];
            st = qc_gpu_alloc(c->g, hb->bytes, hb->bytes, hb->category, hb->name, &w->dev[i][b], err, sizeof err);
            if (st == QC_OK) st = qc_gpu_upload(c->g, w->dev[i][b].ptr, hb->data, hb->bytes, err, sizeof err);
        }
    CHECK(st == QC_OK, "weight buffers: %s", err);
    return st == QC_OK ? 0 : -1;
}

/* Named arguments of a launch: x.bf16, every "w.<buffer>" of copy `copy`, y, m, n, k, group_size, work (the
 * kernel's workspace on the device, NULL for the references). */
typedef struct largs {
    char names[QC_MAX_WEIGHT_BUFFERS][40];
    void *ptrs[QC_MAX_WEIGHT_BUFFERS + 3];
    int64_t m, n, k, gs;
    qc_named_arg a[16];
    size_t na;
} largs;

static void largs_fill(largs *l, const wt *w, int copy, int dev, void *x, void *y, int64_t m, void *work) {
    l->na = 0;
    for (uint32_t b = 0; b < w->pw.n_buffers; b++) {
        snprintf(l->names[b], sizeof l->names[b], "w.%s", w->pw.buffers[b].name);
        l->ptrs[b] = dev ? (void *)(uintptr_t)w->dev[copy][b].ptr : w->pw.buffers[b].data;
        l->a[l->na++] = (qc_named_arg){l->names[b], &l->ptrs[b]};
    }
    l->ptrs[QC_MAX_WEIGHT_BUFFERS] = x;
    l->ptrs[QC_MAX_WEIGHT_BUFFERS + 1] = y;
    l->m = m, l->n = w->n, l->k = w->k, l->gs = w->g;
    l->a[l->na++] = (qc_named_arg){"x.bf16", &l->ptrs[QC_MAX_WEIGHT_BUFFERS]};
    l->a[l->na++] = (qc_named_arg){"y", &l->ptrs[QC_MAX_WEIGHT_BUFFERS + 1]};
    l->a[l->na++] = (qc_named_arg){"m", &l->m};
    l->a[l->na++] = (qc_named_arg){"n", &l->n};
    l->a[l->na++] = (qc_named_arg){"k", &l->k};
    l->a[l->na++] = (qc_named_arg){"group_size", &l->gs};
    l->ptrs[QC_MAX_WEIGHT_BUFFERS + 2] = dev ? work : NULL;
    l->a[l->na++] = (qc_named_arg){"work", &l->ptrs[QC_MAX_WEIGHT_BUFFERS + 2]};
}

/* Run kernel `kd` on weight `w` with m random rows of x; check against a
 * double sum (sampled when large) and the C reference (when cheap):
 * |y - exact| <= (k + 1) 2^-23 sum_t |x_t w_t| (twice the f32 recursive-sum
 * bound: the tensor cores' adds may truncate), with |w_t| + |m + 8 d| in place
 * of |w_t| for fmin.  reps > 0: also time it over the weight's copies. */
static void run_case(ctx *c, const qc_kernel_desc *kd, qc_gpu_fn fn, wt *w, int64_t m, int reps) {
    last_us = -1;
    char err[512], shape[96];
    int64_t n = w->n, k = w->k;
    snprintf(shape, sizeof shape, "%s g%u m=%lld n=%lld k=%lld", SCHEMES[w->scheme], w->g, (long long)m, (long long)n,
             (long long)k);
    size_t xc = (size_t)(m * k), yc = (size_t)(m * n);
    uint16_t *xh = malloc(xc * 2 + 16);
    float *ref = NULL;
    char *got = malloc(yc * 4 + GUARD_WORDS * 4);
    qc_gpu_buf dx = {0}, dy = {0}, dw = {0};
    if (!xh || !got) {
        CHECK(0, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < xc; i++) xh[i] = qc_f32_to_bf16(qc_test_normal(&c->rng));
    int full = (double)m * n * k <= FULL_REF_MACS;
    largs l;
    void *argv[16];
    qc_status st;
    if (full) { /* the C reference through the descriptor, as the runtime calls it */
        ref = malloc(yc * 4);
        gt_poison(ref, yc * 4);
        largs_fill(&l, w, 0, 0, xh, ref, m, NULL);
        st = qc_kernel_bind(kd, l.a, l.na, argv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kd, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s %s reference: %s", kd->id, shape, err);
        size_t first = 0;
        CHECK(gt_unwritten(ref, yc * 4, &first) == 0, "%s: reference left y[%zu] unwritten", shape, first);
        if (st != QC_OK) goto out;
    }
    st = qc_gpu_alloc(c->g, xc * 2, xc * 2, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, xh, xc * 2, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    CHECK(st == QC_OK, "%s: buffers: %s", shape, err);
    if (st != QC_OK) goto out;
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)qc_gpu_get_info(c->g)->sm, .m = m, .n = n, .k = k,
                    .group_size = w->g, .phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE,
                    .scheme = W4A16_SCHEME_SYM + (uint32_t)w->scheme};
    qc_launch_dims d;
    kd->launch_dims(&p, &d);
    /* the kernel's workspace (split-K partial sums and counters), zero-filled as the contract says */
    uint64_t wneed = kd->workspace_bytes ? kd->workspace_bytes(&p) : 0, wbytes = 0;
    if (wneed) {
        st = gt_workspace(c->g, &dw, &wbytes, wneed, err, sizeof err);
        CHECK(st == QC_OK, "%s %s: workspace of %llu bytes: %s", kd->id, shape, (unsigned long long)wneed, err);
        if (st != QC_OK) goto out;
    }
    void *dwp = (void *)(uintptr_t)dw.ptr;
    largs_fill(&l, w, 0, 1, (void *)(uintptr_t)dx.ptr, (void *)(uintptr_t)dy.ptr, m, dwp);
    st = qc_kernel_bind(kd, l.a, l.na, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch_kernel(c->g, kd, fn, &d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s %s: launch: %s", kd->id, shape, err);
    if (st != QC_OK) goto out;
    if (wneed) { /* the counters are back at zero, so that the next launch may reuse it: w4a16.wgmma_*'s 256 words,
                    the register-A skeleton's 512 (w4a16.wgmma_bf16_*: arrivals and stored slots) */
        size_t nz = 0, nc = strncmp(kd->id, "w4a16.wgmma_bf16_", 17) == 0 ? 512 : 256;
        st = gt_nonzero_words(c->g, &dw, nc, &nz, err, sizeof err);
        CHECK(st == QC_OK && nz == 0, "%s %s: %zu workspace counters left non-zero (grid %u x %u)%s%s", kd->id, shape,
              nz, d.grid[0], d.grid[1], st == QC_OK ? "" : ": ", st == QC_OK ? "" : err);
    }
    size_t first = 0, past = gt_unwritten(got + yc * 4, GUARD_WORDS * 4, &first);
    CHECK(past == GUARD_WORDS, "%s %s: wrote %zu words past the end of y", kd->id, shape, GUARD_WORDS - past);
    size_t left = gt_unwritten(got, yc * 4, &first);
    CHECK(left == 0, "%s %s: left %zu outputs unwritten (first %zu)", kd->id, shape, left, first);
    const float *yg = (const float *)got;
    size_t samples = full ? yc : SAMPLES, bad = 0, fbad = 0;
    double worst_d = 0, worst_c = 0, nd = 0, den = 0, fexact = 0, ftol = 0;
    int64_t ng = k / w->g;
    /* w4a16.wgmma_bf16_*: each weight as the kernel forms it (w4a16_bf16w.h), from the packed buffers */
    const uint16_t *sc16 = NULL, *mn16 = NULL;
    const uint8_t *q8 = NULL, *z8 = NULL;
    if (strstr(kd->id, "wgmma_bf16"))
        for (uint32_t b = 0; b < w->pw.n_buffers; b++) {
            const char *bn = w->pw.buffers[b].name;
            if (strcmp(bn, "scales") == 0) sc16 = w->pw.buffers[b].data;
            if (strcmp(bn, "mins") == 0) mn16 = w->pw.buffers[b].data;
            if (strcmp(bn, "qweight") == 0) q8 = w->pw.buffers[b].data;
            if (strcmp(bn, "zeros") == 0) z8 = w->pw.buffers[b].data;
        }
    CHECK(!strstr(kd->id, "wgmma_bf16") || (sc16 && q8 && (w->scheme != 1 || z8) && (w->scheme != 2 || mn16)),
          "%s: the weight lacks a buffer", kd->id);
    for (size_t s = 0; s < samples; s++) {
        size_t e = full ? s : (size_t)(qc_test_rng(&c->rng) % yc);
        int64_t i = (int64_t)e / n, j = (int64_t)e % n;
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < k; t++) {
            double xv = qc_bf16_to_f32(xh[i * k + t]), wv = w->wf[j * k + t];
            if (sc16 && q8) {
                const int64_t gi = j * ng + t / w->g;
                wv = w4t_bf16_weight(w->scheme, w4t_code(q8, k, j, t), sc16[gi], z8 ? z8[gi] : 8, mn16 ? mn16[gi] : 0);
            }
            acc += xv * wv;
            mag += fabs(xv) * (fabs(wv) + (w->center ? fabs((double)w->center[j * ng + t / w->g]) : 0.0));
        }
        double tol = (double)(k + 1) * 0x1p-23 * mag + 1e-30;
        double dd = fabs(yg[e] - acc), dc = full ? fabs(yg[e] - (double)ref[e]) : 0;
        nd += dd * dd;
        den += acc * acc;
        if (dd / tol > worst_d) worst_d = dd / tol;
        if (dc / (1.5 * tol) > worst_c) worst_c = dc / (1.5 * tol);
        if ((!(dd <= tol) || !(dc <= 1.5 * tol)) && !bad++) fbad = e, fexact = acc, ftol = tol;
    }
    printf("  %-19s %-40s %6zu outputs: max |d|/tol vs double %.4f", kd->id, shape, samples, worst_d);
    if (full) printf(", vs C ref %.4f", worst_c);
    printf("; relL2 %.2e\n", den > 0 ? sqrt(nd / den) : 0.0);
    CHECK(bad == 0, "%s %s: %zu outputs out of tolerance, first y[%zu] = %.9g, exact %.9g, tol %.3g", kd->id, shape,
          bad, fbad, (double)yg[fbad], fexact, ftol);

    if (reps > 0 && bad == 0) {
        largs ls[MAXCOPY];
        void *argv_store[MAXCOPY][16], **argvs[MAXCOPY];
        for (int i = 0; i < w->ncopy; i++) {
            largs_fill(&ls[i], w, i, 1, (void *)(uintptr_t)dx.ptr, (void *)(uintptr_t)dy.ptr, m, dwp);
            qc_kernel_bind(kd, ls[i].a, ls[i].na, argv_store[i], 16, err, sizeof err);
            argvs[i] = argv_store[i];
        }
        double us = time_median(c, kd, fn, &d, argvs, w->ncopy, reps);
        /* the W4 floor: codes + group data + activations (x bf16), once each, at the measured copy rate */
        double bytes = (double)w->wbytes + 2.0 * (double)m * (double)k;
        double floor_us = bytes / (c->copy_gbs * 1e3);
        double tflops = 2.0 * m * n * k / us * 1e-6;
        /* the floor: codes + scales only, at the H200's 4.2 TB/s */
        double floor42 = (double)w->wbytes / 4.2e6;
        printf("  TIME %-19s %-36s median %8.2f us (%d launches, W cycled over %d copies)  W4+x %.2f MB  %.0f GB/s  "
               "floor %.2f us at %.0f GB/s  fraction of floor %.1f%%  (W4 floor at 4.2 TB/s %.2f us: %.1f%%)  "
               "%.1f TFLOP/s = %.1f%% of %.0f\n",
               kd->id, shape, us, reps, w->ncopy, bytes / 1e6, bytes / us * 1e-3, floor_us, c->copy_gbs,
               100.0 * floor_us / us, floor42, 100.0 * floor42 / us, tflops, 100.0 * tflops / PEAK_TFLOPS, PEAK_TFLOPS);
        last_us = us;
    }
out:
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dy);
    qc_gpu_free(c->g, &dw);
    free(xh), free(ref), free(got);
}

/* The runtime's probe (the same number qcore bench and gemm-bench use). */
static void measure_copy(ctx *c) {
    char err[512];
    double bps = 0;
    size_t used = 0;
    float ms = 0;
    qc_status st = qc_gpu_copy_bandwidth(c->g, &bps, &used, &ms, err, sizeof err);
    CHECK(st == QC_OK, "qc_gpu_copy_bandwidth: %s", err);
    if (st == QC_OK) {
        c->copy_gbs = bps * 1e-9;
        printf("%s: copy bandwidth %.0f GB/s (qc_gpu_copy_bandwidth: %zu MiB copied in %.3f ms, read + write)\n", TEST,
               c->copy_gbs, used >> 20, ms);
    }
}

typedef struct kern {
    const char *id;
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
} kern;

static int load_kernel(ctx *c, kern *kk, const char *id) {
    kk->id = id;
    kk->k = qc_kernel_find(c->rt, id);
    CHECK(kk->k != NULL, "%s is not registered", id);
    if (!kk->k) return -1;
    qc_reason why;
    double t0 = qc_now_seconds();
    qc_status st = qc_gpu_kernel_load(c->g, c->nv, kk->k, &kk->fn, &why);
    CHECK(st == QC_OK, "%s: %s: %s", id, why.code, why.text);
    if (st == QC_OK) printf("%s: %s loaded in %.1f s\n", TEST, id, qc_now_seconds() - t0);
    return st == QC_OK ? 0 : -1;
}

#endif
