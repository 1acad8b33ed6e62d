/* test_gpu_mxfp4.c - the mxfp4 GPU kernels against their C reference and a double sum; timings against the copy-bandwidth floor, mxfp4.gemv_frag and mxfp4.gemv_frag_ps beside mxfp4.gemv. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_mxfp4"
/* words after y, poisoned too, that a kernel must leave alone */
#define GUARD_WORDS 64
/* above this many multiply-adds only sampled outputs are checked (in double) */
#define FULL_REF_MACS 60000000.0
#define SAMPLES 2048
/* each output within TOL * sum_t |x_t w_t| of the C reference and of the double sum */
#define TOL 1e-5
/* timing: W copies cycled so that the launches read HBM, not the 60 MiB L2 */
#define ROTATE_BYTES (256u << 20)
#define MAXCOPY 64

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_format_desc *f;
    uint64_t rng;
    double copy_gbs; /* device copy bandwidth, GB/s (qc_gpu_copy_bandwidth: bytes copied per second) */
} ctx;

/* How the weights of a case are made. */
enum wkind {
    W_NORMAL, /* N(0, 0.05^2) */
    W_TINY,   /* N(0, 1) * 2^-100: small scale bytes (about 25), products still normal f32 */
    W_NANBLK, /* normal, with a few scale bytes set to 0xFF (NaN blocks) */
    W_SUBN,   /* N(0, 1) * 2^-130: scale byte 0, decoded values and products subnormal; reported, not checked */
    W_HUGE,   /* every third row N(0, 1) * 2^12 (scale bytes above 128: the GEMV's second multiply), others normal */
};

/* the median of the last timed run_case, us (-1 when none) */
static double last_us = -1;

/* QC_MXF_KERNELS=id,id,...: run only the cases of these kernels (a quick device run); unset: all */
static int kernel_wanted(const char *id) {
    const char *e = getenv("QC_MXF_KERNELS");
    if (!e || !*e) return 1;
    size_t l = strlen(id);
    for (const char *p = e; *p;) {
        size_t n = strcspn(p, ",");
        if (n == l && strncmp(p, id, l) == 0) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Median microseconds of `reps` launches (after 3 warm-ups), argument set i % nsets for launch i, each synced
 * (gpu_test.h's gt_time_launches_as; GT_TIME=memset or stream picks another method). */
static double time_median(ctx *c, const qc_kernel_desc *kd, qc_gpu_fn fn, const qc_launch_dims *d, void ***argvs,
                          int nsets, int reps) {
    gt_launch ls[MAXCOPY];
    if (nsets > MAXCOPY) nsets = MAXCOPY;
    for (int i = 0; i < nsets; i++) ls[i] = (gt_launch){.fn = fn, .d = *d, .argv = argvs[i], .k = kd};
    return gt_time_launches_as(c->g, ls, 1, 1, nsets, reps, "synced");
}

/* the test's own decoding (docs/formats/mxfp4.md section 1), in double */
static double w_at(const uint8_t *q, const uint8_t *sc, int64_t k, int64_t o, int64_t t) {
    static const double E2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    uint8_t b = q[o * (k / 2) + t / 2], code = (t & 1) ? b >> 4 : b & 15, e = sc[o * (k / 32) + t / 32];
    if (e == 0xFF) return NAN;
    double v = ldexp(E2M1[code & 7], (int)e - 127);
    return (code & 8) ? -v : v;
}

/*
 * One case: random x (bf16 bits) and W (quantized by the plugin), the C
 * reference (when cheap) and the kernel from the same named arguments, y
 * poisoned with guard words.  Every (or every sampled) output within TOL *
 * sum |x w| of the double sum and of the C reference; NaN exactly where the
 * reference has NaN.  reps > 0: time it with W cycled through copies.
 */
static void run_case(ctx *c, const char *id, int64_t m, int64_t n, int64_t k, enum wkind wk, int reps) {
    char err[512], shape[96];
    last_us = -1;
    if (!kernel_wanted(id)) return;
    snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld%s", (long long)m, (long long)n, (long long)k,
             wk == W_TINY     ? " tiny"
             : wk == W_NANBLK ? " nan-blocks"
             : wk == W_SUBN   ? " subnormal"
             : wk == W_HUGE   ? " huge-rows"
                              : "");
    const qc_kernel_desc *kd = qc_kernel_find(c->rt, id);
    CHECK(kd != NULL, "%s is not registered", id);
    if (!kd) return;
    qc_reason why;
    qc_gpu_fn fn = NULL;
    qc_status st = qc_gpu_kernel_load(c->g, c->nv, kd, &fn, &why);
    CHECK(st == QC_OK, "%s: %s: %s", id, why.code, why.text);
    if (st != QC_OK) return;
    size_t xc = (size_t)(m * k), yc = (size_t)(m * n);
    int kq = k % 32 == 0; /* the plugin quantizes only whole blocks */
    int64_t kw = kq ? k : (k + 31) / 32 * 32; /* weights quantized at the next block for the refusal case */
    size_t wcq = (size_t)(n * kw);
    uint16_t *xh = malloc(xc * 2 + 2);
    float *wf = malloc(wcq * 4), *ref = malloc(yc * 4);
    char *got = malloc(yc * 4 + GUARD_WORDS * 4);
    qc_gpu_buf dx = {0}, dy = {0}, dw = {0}, dq[MAXCOPY], ds[MAXCOPY];
    memset(dq, 0, sizeof dq);
    memset(ds, 0, sizeof ds);
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    int ncopy = 1;
    if (!xh || !wf || !ref || !got) {
        CHECK(0, "%s: out of host memory", shape);
        goto out;
    }
    for (size_t i = 0; i < xc; i++) xh[i] = qc_f32_to_bf16(qc_test_normal(&c->rng));
    for (size_t i = 0; i < wcq; i++) {
        float v = qc_test_normal(&c->rng);
        int huge = wk == W_HUGE && (i / (size_t)kw) % 3 == 0;
        wf[i] = wk == W_TINY ? ldexpf(v, -100) : wk == W_SUBN ? ldexpf(v, -130) : huge ? ldexpf(v, 12) : v * 0.05f;
    }
    qc_quant_request req = {.struct_size = sizeof req, .w = wf, .n = n, .k = kw};
    /* odd n: the format refuses it, so quantize at the next multiple of 8 and use the first n rows */
    int64_t nq = (n + 7) / 8 * 8;
    float *wpad = NULL;
    if (nq != n) {
        wpad = calloc((size_t)(nq * kw), 4);
        if (wpad) memcpy(wpad, wf, wcq * 4);
        req.w = wpad;
        req.n = nq;
    }
    st = req.w ? c->f->quantize(&req, &pw, &why) : QC_ERR_NOMEM;
    free(wpad);
    CHECK(st == QC_OK, "%s: quantize: %s", shape, why.text);
    if (st != QC_OK) goto out;
    uint8_t *q = pw.buffers[0].data, *sc = pw.buffers[1].data;
    if (wk == W_NANBLK)
        for (int i = 0; i < 5; i++) sc[qc_test_rng(&c->rng) % (size_t)(n * (kw / 32))] = 0xFF;
    size_t qbytes = (size_t)(n * kw / 2), sbytes = (size_t)(n * kw / 32);
    int full = (double)m * n * k <= FULL_REF_MACS;

    void *hx = xh, *hq = q, *hs = sc, *hy = ref, *hw = NULL;
    qc_named_arg args[] = {{"x.bf16", &hx}, {"w.qweight", &hq}, {"w.scales", &hs}, {"y", &hy},
                           {"m", &m},       {"n", &n},          {"k", &k},          {"work", &hw}};
    void *argv[8];
    if (full) {
        gt_poison(ref, yc * 4);
        st = qc_kernel_bind(kd, args, 8, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kd, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", shape, err);
        size_t first = 0;
        CHECK(gt_unwritten(ref, yc * 4, &first) == 0, "%s: reference left y[%zu] unwritten", shape, first);
        if (st != QC_OK) goto out;
    }
    if (reps > 0) {
        ncopy = (int)(ROTATE_BYTES / (qbytes + sbytes) + 1);
        if (ncopy > MAXCOPY) ncopy = MAXCOPY;
    }
    st = qc_gpu_alloc(c->g, xc * 2, xc * 2 + 16, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, xh, xc * 2, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    for (int i = 0; st == QC_OK && i < ncopy; i++) {
        st = qc_gpu_alloc(c->g, qbytes, qbytes, QC_MEM_WEIGHTS, "qweight", &dq[i], err, sizeof err);
        if (st == QC_OK) st = qc_gpu_upload(c->g, dq[i].ptr, q, qbytes, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_alloc(c->g, sbytes, sbytes, QC_MEM_SCALES, "scales", &ds[i], err, sizeof err);
        if (st == QC_OK) st = qc_gpu_upload(c->g, ds[i].ptr, sc, sbytes, err, sizeof err);
    }
    CHECK(st == QC_OK, "%s: buffers: %s", shape, err);
    if (st != QC_OK) goto out;
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)qc_gpu_get_info(c->g)->sm, .m = m, .n = n, .k = k};
    qc_launch_dims d;
    kd->launch_dims(&p, &d);
    /* the kernel's workspace (mxfp4.wgmma's last-wave split: partial sums and counters), zero-filled as the
     * contract says */
    uint64_t wneed = kd->workspace_bytes ? kd->workspace_bytes(&p) : 0, wmade = 0;
    if (wneed) {
        st = gt_workspace(c->g, &dw, &wmade, wneed, err, sizeof err);
        CHECK(st == QC_OK, "%s %s: workspace of %llu bytes: %s", id, shape, (unsigned long long)wneed, err);
        if (st != QC_OK) goto out;
    }
    args[0].value = &dx.ptr;
    args[1].value = &dq[0].ptr;
    args[2].value = &ds[0].ptr;
    args[3].value = &dy.ptr;
    args[7].value = &dw.ptr;
    st = qc_kernel_bind(kd, args, 8, argv, 8, err, sizeof err);
    /* through the descriptor: it adds the tensor maps a kernel takes (mxfp4.wgmma's x) */
    if (st == QC_OK) st = qc_gpu_launch_kernel(c->g, kd, fn, &d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s %s: launch: %s", id, shape, err);
    if (st != QC_OK) goto out;
    if (wneed) { /* the counters (the first 2 KiB: arrivals and stored slots) are back at zero, so that the next
                    launch may reuse it */
        size_t nz = 0;
        st = gt_nonzero_words(c->g, &dw, 512, &nz, err, sizeof err);
        CHECK(st == QC_OK && nz == 0, "%s %s: %zu workspace counters left non-zero (grid %u, smem %u)%s%s", id, shape,
              nz, d.grid[0], d.shared_bytes, st == QC_OK ? "" : ": ", st == QC_OK ? "" : err);
    }
    size_t first = 0, past = gt_unwritten(got + yc * 4, GUARD_WORDS * 4, &first);
    CHECK(past == GUARD_WORDS, "%s %s: wrote %zu words past the end of y", id, shape, GUARD_WORDS - past);
    size_t left = gt_unwritten(got, yc * 4, &first);
    CHECK(left == 0, "%s %s: left %zu outputs unwritten (first %zu)", id, shape, left, first);
    const float *yg = (const float *)got;
    size_t samples = full ? yc : SAMPLES, bad = 0, fbad = 0, nans = 0;
    double worst_d = 0, worst_c = 0;
    if (!kq) { /* k off the block: the kernel, like its reference, writes NaN everywhere */
        for (size_t e = 0; e < yc; e++) bad += !isnan(yg[e]) || (full && !isnan(ref[e]));
        printf("  %-18s %-34s k off the block: %zu of %zu outputs not NaN\n", id, shape, bad, yc);
        CHECK(bad == 0, "%s %s: expected NaN outputs", id, shape);
        goto out;
    }
    for (size_t s = 0; s < samples; s++) {
        size_t e = full ? s : (size_t)(qc_test_rng(&c->rng) % yc);
        int64_t i = (int64_t)e / n, o = (int64_t)e % n;
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < k; t++) {
            double pr = (double)qc_bf16_to_f32(xh[i * k + t]) * w_at(q, sc, k, o, t);
            acc += pr;
            mag += fabs(pr);
        }
        if (isnan(acc)) { /* a NaN block: NaN exactly there */
            nans++;
            if ((!isnan(yg[e]) || (full && !isnan(ref[e]))) && !bad++) fbad = e;
            continue;
        }
        double lim = TOL * mag + 1e-300, dd = fabs(yg[e] - acc), dc = full ? fabs(yg[e] - (double)ref[e]) : 0;
        if (dd / lim > worst_d) worst_d = dd / lim;
        if (dc / lim > worst_c) worst_c = dc / lim;
        if ((!(dd <= lim) || !(dc <= lim)) && !bad++) fbad = e;
    }
    printf("  %-18s %-34s %6zu outputs: worst diff/tol vs double %.4f", id, shape, samples, worst_d);
    if (full) printf(", vs C ref %.4f", worst_c);
    if (nans) printf(", %zu NaN as expected", nans);
    printf("\n");
    if (wk == W_SUBN) { /* whether the tensor cores keep f32/bf16 subnormals: a fact to report */
        printf("  INFO %s %s: %zu of %zu outputs differ from the reference beyond tolerance (weights below 2^-126)\n",
               id, shape, bad, samples);
        goto out;
    }
    CHECK(bad == 0, "%s %s: %zu outputs out of tolerance, first %zu: gpu %.9g%s", id, shape, bad, fbad,
          (double)yg[fbad], full ? "" : " (sampled)");

    if (reps > 0 && bad == 0) {
        void *argvs_store[MAXCOPY][8], **argvs[MAXCOPY];
        for (int i = 0; i < ncopy; i++) {
            args[1].value = &dq[i].ptr;
            args[2].value = &ds[i].ptr;
            qc_kernel_bind(kd, args, 8, argvs_store[i], 8, err, sizeof err);
            argvs[i] = argvs_store[i];
        }
        double us = time_median(c, kd, fn, &d, argvs, ncopy, reps);
        double wbytes = (double)(qbytes + sbytes), xbytes = xc * 2.0, io = xbytes + yc * 4.0;
        if (m <= 16) { /* floor: packed codes + scales + activations at the copy bandwidth (y not counted) */
            double fbytes = wbytes + xbytes, floor_us = c->copy_gbs > 0 ? fbytes / (c->copy_gbs * 1e3) : 0;
            printf("  TIME %-18s %-24s median %8.2f us (%d launches, W cycled over %d copies)  codes+scales+x %.2f MB  "
                   "%.0f GB/s  floor %.2f us at %.0f GB/s copy: %.1f%% of floor\n",
                   id, shape, us, reps, ncopy, fbytes / 1e6, fbytes / us * 1e-3, floor_us, c->copy_gbs,
                   floor_us > 0 ? 100.0 * floor_us / us : 0);
            last_us = us;
        } else {
            double tf = 2.0 * m * n * k / us * 1e-6;
            printf("  TIME %-18s %-24s median %8.2f us (%d launches)  %.1f TFLOP/s  (%.0f GB/s of all bytes)\n", id,
                   shape, us, reps, tf, (wbytes + io) / us * 1e-3);
            last_us = us;
        }
    }
out:
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dy);
    qc_gpu_free(c->g, &dw);
    for (int i = 0; i < MAXCOPY; i++) {
        qc_gpu_free(c->g, &dq[i]);
        qc_gpu_free(c->g, &ds[i]);
    }
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
    free(xh), free(wf), free(ref), free(got);
}

/* The floor's bandwidth: qcore's copy probe (bytes copied per second, as the PyTorch anchors count it). */
static void measure_copy(ctx *c) {
    char err[512];
    double bps = 0;
    size_t used = 0;
    float ms = 0;
    qc_status st = qc_gpu_copy_bandwidth(c->g, &bps, &used, &ms, err, sizeof err);
    CHECK(st == QC_OK, "copy bandwidth: %s", err);
    if (st != QC_OK) return;
    c->copy_gbs = bps * 1e-9;
    printf("%s: copy bandwidth %.0f GB/s (median copy of %zu MiB in %.3f ms)\n", TEST, c->copy_gbs, used >> 20,
           (double)ms);
}

/* one fragment GEMV's cases with its launch plan forced through its R and KS variables (each restored after) */
typedef struct forced_plan {
    const char *r, *ks;
    int64_t m, n, k;
} forced_plan;
static void run_forced(ctx *c, const char *id, const char *var_r, const char *var_ks, const forced_plan *f,
                       size_t nf) {
    for (size_t i = 0; i < nf && kernel_wanted(id); i++) {
        setenv(var_r, f[i].r, 1);
        setenv(var_ks, f[i].ks, 1);
        printf("  (%s with %s=%s %s=%s)\n", id, var_r, f[i].r, var_ks, f[i].ks);
        run_case(c, id, f[i].m, f[i].n, f[i].k, W_NORMAL, 0);
        unsetenv(var_r);
        unsetenv(var_ks);
    }
}

int main(int argc, char **argv) {
    qc_set_log_level(QC_LOG_WARN);
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0; /* correctness only, no timings */
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    char *tmp = NULL;
    int setup_rc = gt_setup(TEST, c.g, &tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    char err[512];
    if (c.rt && qc_runtime_load_plugin(c.rt, QC_TEST_PLUGIN_DIR "/mxfp4.so", err, sizeof err) != QC_OK) {
        CHECK(0, "mxfp4 plugin: %s", err);
    } else if (c.rt) {
        c.f = qc_format_find(c.rt, "mxfp4");
        CHECK(c.f != NULL, "format mxfp4 missing");
        int sm = qc_gpu_get_info(c.g)->sm;
        const qc_kernel_desc *b100 = qc_kernel_find(c.rt, "mxfp4.gemv_sm100");
        if (b100 && sm != 100) { /* what `qcore inspect` reports on this device */
            qc_reason why;
            qc_gpu_fn fn;
            CHECK(qc_gpu_kernel_load(c.g, c.nv, b100, &fn, &why) != QC_OK && strcmp(why.code, "arch") == 0,
                  "mxfp4.gemv_sm100 loaded on sm_%d: %s", sm, why.code);
            printf("%s: mxfp4.gemv_sm100 on sm_%d: %s: %s\n", TEST, sm, why.code, why.text);
        }
        const char *gemv = sm == 100 ? "mxfp4.gemv_sm100" : "mxfp4.gemv";
        double t0 = qc_now_seconds();
        if (c.f) {
            if (!getenv("QC_MXF_TIMING_ONLY")) { /* timing runs on the device: the timed shapes are checked anyway */
                /* decode GEMV: every m bucket, odd n (rows past n), k tails of the chunk loop (nb not a
                 * multiple of 16 or 8), the smallest k, tiny and NaN scales, k off the block */
                static const int64_t gk[] = {32, 96, 544, 4096, 1056, 14336};
                for (int64_t m = 1; m <= 16; m++) run_case(&c, gemv, m, m % 3 ? 264 : 77, gk[m % 6], W_NORMAL, 0);
                run_case(&c, gemv, 1, 1, 32, W_NORMAL, 0);
                run_case(&c, gemv, 3, 4097, 2080, W_NORMAL, 0);
                run_case(&c, gemv, 16, 999, 4128, W_NORMAL, 0);
                run_case(&c, gemv, 1, 128, 512, W_TINY, 0);
                run_case(&c, gemv, 9, 96, 1024, W_TINY, 0);
                run_case(&c, gemv, 2, 64, 1024, W_NANBLK, 0);
                run_case(&c, gemv, 12, 64, 1024, W_NANBLK, 0);
                run_case(&c, gemv, 2, 64, 100, W_NORMAL, 0);
                run_case(&c, gemv, 1, 64, 512, W_SUBN, 0);
                /* scale bytes above 128 (the second multiply), mixed with normal rows in one warp */
                run_case(&c, gemv, 1, 96, 1056, W_HUGE, 0);
                run_case(&c, gemv, 6, 48, 4096, W_HUGE, 0);
                run_case(&c, gemv, 16, 40, 544, W_HUGE, 0);
                /* the T = 2 plan (m > 8, n >= 16384) with an n and a k tail */
                run_case(&c, gemv, 11, 16392, 96, W_NORMAL, 0);
                /* every m on a decode shape (sampled) */
                for (int64_t m = 1; m <= 16; m++) run_case(&c, gemv, m, 4096, 4096, W_NORMAL, 0);
                /* mxfp4.gemv_frag (k % 128 == 0): every m on odd tile counts and n % 16 != 0 (the C reference in full),
                 * K splits with ragged ends (plan-chosen and forced, warps without chunks), forced 32-row blocks, tiny,
                 * NaN, zero and huge scale bytes, every m on a decode shape (sampled) */
                static const char frag[] = "mxfp4.gemv_frag";
                static const int64_t fk[] = {128, 384, 1152, 4096, 640, 14336};
                for (int64_t m = 1; m <= 16; m++) run_case(&c, frag, m, m % 3 ? 264 : 77, fk[m % 6], W_NORMAL, 0);
                run_case(&c, frag, 1, 1, 128, W_NORMAL, 0);
                run_case(&c, frag, 5, 40, 1152, W_NORMAL, 0);
                run_case(&c, frag, 3, 4097, 2176, W_NORMAL, 0);
                run_case(&c, frag, 16, 999, 4224, W_NORMAL, 0);
                run_case(&c, frag, 1, 128, 512, W_TINY, 0);
                run_case(&c, frag, 9, 96, 1024, W_TINY, 0);
                run_case(&c, frag, 2, 64, 1024, W_NANBLK, 0);
                run_case(&c, frag, 12, 64, 1024, W_NANBLK, 0);
                run_case(&c, frag, 1, 64, 512, W_SUBN, 0);
                run_case(&c, frag, 1, 96, 1152, W_HUGE, 0);
                run_case(&c, frag, 6, 48, 4096, W_HUGE, 0);
                run_case(&c, frag, 16, 40, 640, W_HUGE, 0);
                static const forced_plan forced[] = {{"2", "3", 1, 264, 1152}, {"2", "5", 4, 77, 896},
                                                     {"2", "4", 7, 40, 640},   {"1", "7", 9, 24, 2176},
                                                     {"2", "16", 16, 264, 1152}, {"1", "16", 2, 72, 14336}};
                run_forced(&c, frag, "QC_MXF_R", "QC_MXF_KS", forced, sizeof forced / sizeof forced[0]);
                for (int64_t m = 1; m <= 16; m++) run_case(&c, frag, m, 4096, 4096, W_NORMAL, 0);
                /* mxfp4.gemv_frag_ps (k % 128 == 0; the engine's pick for M 5..16): every m on odd tile counts and
                 * n % 16 != 0, one tile of 8 rows, k = 128, K splits with ragged ends (plan-chosen and forced, warps
                 * without chunks), forced 32-row blocks (R = 2 at m <= 8, tiles in turn above), tiny, NaN, zero and
                 * huge scale bytes, every m on a decode shape (sampled) */
                static const char ps[] = "mxfp4.gemv_frag_ps";
                for (int64_t m = 1; m <= 16; m++) run_case(&c, ps, m, m % 3 ? 264 : 77, fk[m % 6], W_NORMAL, 0);
                run_case(&c, ps, 1, 1, 128, W_NORMAL, 0);
                run_case(&c, ps, 16, 8, 128, W_NORMAL, 0);
                run_case(&c, ps, 5, 40, 1152, W_NORMAL, 0);
                run_case(&c, ps, 9, 4097, 2176, W_NORMAL, 0);
                run_case(&c, ps, 16, 999, 4224, W_NORMAL, 0);
                run_case(&c, ps, 8, 128, 512, W_TINY, 0);
                run_case(&c, ps, 12, 96, 1024, W_TINY, 0);
                run_case(&c, ps, 5, 64, 1024, W_NANBLK, 0);
                run_case(&c, ps, 16, 64, 1024, W_NANBLK, 0);
                run_case(&c, ps, 8, 64, 512, W_SUBN, 0);
                run_case(&c, ps, 5, 96, 1152, W_HUGE, 0);
                run_case(&c, ps, 8, 48, 4096, W_HUGE, 0);
                run_case(&c, ps, 16, 40, 640, W_HUGE, 0);
                static const forced_plan pforced[] = {{"2", "3", 5, 264, 1152}, {"2", "5", 8, 77, 896},
                                                      {"2", "4", 12, 40, 640},  {"1", "7", 9, 24, 2176},
                                                      {"2", "16", 16, 264, 1152}, {"1", "16", 6, 72, 14336}};
                run_forced(&c, ps, "QC_MXP_R", "QC_MXP_KS", pforced, sizeof pforced / sizeof pforced[0]);
                for (int64_t m = 1; m <= 16; m++) run_case(&c, ps, m, 4096, 4096, W_NORMAL, 0);
                /* mxfp4.gemv1 (m = 1, k % 1024: the engine's pick at batch 1): n = 1 and odd n (clamped rows of the
                 * last block), 1 to 14 steps of 512 bytes, tiny, NaN, subnormal and huge scale bytes, and K splits
                 * 1..8 forced through QC_MXG_KS (3, 5, 7 ragged, warps without a step) */
                static const char g1[] = "mxfp4.gemv1";
                run_case(&c, g1, 1, 1, 1024, W_NORMAL, 0);
                run_case(&c, g1, 1, 77, 3072, W_NORMAL, 0);
                run_case(&c, g1, 1, 4097, 2048, W_NORMAL, 0);
                run_case(&c, g1, 1, 264, 14336, W_NORMAL, 0);
                run_case(&c, g1, 1, 28672, 4096, W_NORMAL, 0);
                run_case(&c, g1, 1, 96, 1024, W_TINY, 0);
                run_case(&c, g1, 1, 64, 2048, W_NANBLK, 0);
                run_case(&c, g1, 1, 64, 1024, W_SUBN, 0);
                run_case(&c, g1, 1, 40, 4096, W_HUGE, 0);
                /* mxfp4.gemv1_xr (m = 1, k % 1024, at most 16 K slices): n = 1 and odd n (an odd last pair reads
                 * its row twice), one or two steps a slice (3, 5, 7 / 2, 4, 14 steps), 16 slices (k 32768), tiny,
                 * NaN, subnormal and huge scale bytes (the rare path's warp vote) */
                static const char gx[] = "mxfp4.gemv1_xr";
                run_case(&c, gx, 1, 1, 1024, W_NORMAL, 0);
                run_case(&c, gx, 1, 77, 3072, W_NORMAL, 0);
                run_case(&c, gx, 1, 4097, 2048, W_NORMAL, 0);
                run_case(&c, gx, 1, 264, 14336, W_NORMAL, 0);
                run_case(&c, gx, 1, 28672, 4096, W_NORMAL, 0);
                run_case(&c, gx, 1, 999, 7168, W_NORMAL, 0);
                run_case(&c, gx, 1, 1000, 5120, W_NORMAL, 0);
                run_case(&c, gx, 1, 9, 32768, W_NORMAL, 0);
                run_case(&c, gx, 1, 96, 1024, W_TINY, 0);
                run_case(&c, gx, 1, 64, 2048, W_NANBLK, 0);
                run_case(&c, gx, 1, 64, 1024, W_SUBN, 0);
                run_case(&c, gx, 1, 40, 4096, W_HUGE, 0);
                run_case(&c, gx, 1, 40, 5120, W_HUGE, 0);
                /* mxfp4.gemv1_tma (sm_90; run here whatever its n_range refusal says: the descriptor's plan is
                 * launched directly): n = 1 and odd n (a short last stage and block), rings that wrap (28672: 28
                 * stages a block over 8 slots; 65536: 63), 1 to 5 steps a row, tiny, NaN, subnormal and huge scale
                 * bytes */
                if (qc_gpu_get_info(c.g)->sm >= 90) {
                    static const char gt[] = "mxfp4.gemv1_tma";
                    run_case(&c, gt, 1, 1, 1024, W_NORMAL, 0);
                    run_case(&c, gt, 1, 77, 3072, W_NORMAL, 0);
                    run_case(&c, gt, 1, 4097, 2048, W_NORMAL, 0);
                    run_case(&c, gt, 1, 28672, 4096, W_NORMAL, 0);
                    run_case(&c, gt, 1, 65536, 1024, W_NORMAL, 0);
                    run_case(&c, gt, 1, 1000, 5120, W_NORMAL, 0);
                    run_case(&c, gt, 1, 96, 1024, W_TINY, 0);
                    run_case(&c, gt, 1, 64, 2048, W_NANBLK, 0);
                    run_case(&c, gt, 1, 64, 1024, W_SUBN, 0);
                    run_case(&c, gt, 1, 40, 4096, W_HUGE, 0);
                }
                static const char *const g1ks[] = {"1", "2", "3", "5", "7", "8"};
                for (size_t i = 0; i < sizeof g1ks / sizeof g1ks[0]; i++) {
                    setenv("QC_MXG_KS", g1ks[i], 1);
                    printf("  (%s with QC_MXG_KS=%s)\n", g1, g1ks[i]);
                    run_case(&c, g1, 1, 999, 7168, W_NORMAL, 0);
                    run_case(&c, g1, 1, 40, 5120, W_HUGE, 0);
                    unsetenv("QC_MXG_KS");
                }
                /* prefill GEMM: m tails, n tails (odd n), k % 64 == 32, tiny and NaN scales */
                run_case(&c, "mxfp4.linear_mma", 17, 136, 64, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 100, 77, 96, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 129, 264, 1056, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 300, 1001, 2048, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 33, 128, 32, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 64, 256, 512, W_TINY, 0);
                run_case(&c, "mxfp4.linear_mma", 64, 256, 512, W_NANBLK, 0);
                run_case(&c, "mxfp4.linear_mma", 64, 256, 512, W_HUGE, 0);
                run_case(&c, "mxfp4.linear_mma", 40, 64, 100, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 32, 64, 512, W_SUBN, 0);
                run_case(&c, "mxfp4.linear_mma", 1000, 4096, 4096, W_NORMAL, 0);
                run_case(&c, "mxfp4.linear_mma", 4096, 512, 1024, W_NORMAL, 0);
                if (sm == 90) { /* mxfp4.wgmma (sm_90a, k % 64 == 0) */
                    /* 64-row tiles (m <= 64) and 128-row ones; x boxes partly past m (100), the second box not
                     * loaded (150: rows 128..149), odd n (clamped W rows), k = 64 (one stage), k = 1088 (odd
                     * stage count: the unrolled loop's early exit), several tiles a block (1000 x 4096: 256 tiles),
                     * tiny, NaN, subnormal and huge scale bytes (the second multiply, mixed rows in a warp) */
                    static const char wg[] = "mxfp4.wgmma";
                    run_case(&c, wg, 17, 136, 64, W_NORMAL, 0);
                    run_case(&c, wg, 64, 264, 1088, W_NORMAL, 0);
                    run_case(&c, wg, 65, 77, 192, W_NORMAL, 0);
                    run_case(&c, wg, 100, 1001, 2048, W_NORMAL, 0);
                    run_case(&c, wg, 150, 256, 1024, W_NORMAL, 0);
                    run_case(&c, wg, 333, 40, 4096, W_NORMAL, 0);
                    run_case(&c, wg, 1000, 4096, 4096, W_NORMAL, 0);
                    run_case(&c, wg, 4096, 512, 1024, W_NORMAL, 0);
                    run_case(&c, wg, 2048, 28672, 128, W_NORMAL, 0);
                    run_case(&c, wg, 64, 256, 512, W_TINY, 0);
                    run_case(&c, wg, 200, 256, 512, W_TINY, 0);
                    run_case(&c, wg, 64, 256, 512, W_NANBLK, 0);
                    run_case(&c, wg, 130, 256, 1024, W_NANBLK, 0);
                    run_case(&c, wg, 64, 256, 512, W_HUGE, 0);
                    run_case(&c, wg, 257, 136, 1024, W_HUGE, 0);
                    /* the last wave split over K: by the plan (1024 x 6144 x 2048: one full wave, then 60 tiles
                     * split 2 ways, 16 stages each), and forced 3 and 8 ways (uneven stage counts), with NaN blocks
                     * through the partial sums */
                    run_case(&c, wg, 1024, 6144, 2048, W_NORMAL, 0);
                    static const char *const sps[] = {"3", "8"};
                    for (int b = 0; b < 2; b++) {
                        setenv("QC_RA_SPLIT", sps[b], 1);
                        printf("  (mxfp4.wgmma with QC_RA_SPLIT=%s)\n", sps[b]);
                        run_case(&c, wg, 100, 1001, 2048, W_NORMAL, 0);
                        run_case(&c, wg, 333, 40, 4096, W_NORMAL, 0);
                        run_case(&c, wg, 64, 256, 512, W_NANBLK, 0);
                        run_case(&c, wg, 130, 256, 1024, W_HUGE, 0);
                        unsetenv("QC_RA_SPLIT");
                    }
                    run_case(&c, wg, 32, 64, 512, W_SUBN, 0);
                    run_case(&c, wg, 1024, 4096, 1024, W_NORMAL, 0); /* the plan's 256-row tiles */
                    /* each tile height forced (QC_MXW_BM) on m tails: boxes partly and wholly past m */
                    static const char *const bms[] = {"64", "128", "256"};
                    for (int i = 0; i < 3; i++) {
                        setenv("QC_MXW_BM", bms[i], 1);
                        printf("  (%s with QC_MXW_BM=%s)\n", wg, bms[i]);
                        run_case(&c, wg, 17, 136, 128, W_NORMAL, 0);
                        run_case(&c, wg, 150, 264, 1088, W_NORMAL, 0);
                        run_case(&c, wg, 333, 77, 512, W_HUGE, 0);
                        run_case(&c, wg, 700, 1000, 2048, W_NANBLK, 0);
                        unsetenv("QC_MXW_BM");
                    }
                    /* k % 64 == 32: refused with a reason (mxfp4.linear_mma takes it) */
                    const qc_kernel_desc *wd = qc_kernel_find(c.rt, wg);
                    CHECK(wd != NULL, "%s is not registered", wg);
                    if (wd) {
                        qc_problem pk = {.struct_size = sizeof pk, .sm = 90, .m = 128, .n = 256, .k = 96};
                        qc_reason why = {0};
                        CHECK(!wd->eligible(&pk, &why) && strcmp(why.code, "align_k") == 0,
                              "%s took k = 96 (%s)", wg, why.code);
                        printf("  %s k = 96: %s: %s\n", wg, why.code, why.text);
                    }
                }
            }
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            if (!quick) {
                measure_copy(&c);
                /* Llama-3-8B o, qkv, gate_up, down at M = 1, 4, 8, 16: mxfp4.gemv_frag and mxfp4.gemv_frag_ps beside
                 * mxfp4.gemv (the issue: within 1.15x of w4a16.gemv_frag_sym, whose times test_gpu_w4a16_frag and
                 * gemm-bench print) */
                static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
                static const char *const names[] = {"o", "qkv", "gate_up", "down"};
                static const char *const fk_ids[] = {"mxfp4.gemv_frag", "mxfp4.gemv_frag_ps"};
                static const int64_t ms[] = {1, 4, 8, 16};
                double tus[4][4][3]; /* [shape][m][gemv, frag, frag_ps] */
                for (size_t sh = 0; sh < 4; sh++)
                    for (size_t i = 0; i < 4; i++) {
                        run_case(&c, gemv, ms[i], shapes[sh][0], shapes[sh][1], W_NORMAL, 50);
                        tus[sh][i][0] = last_us;
                        for (size_t j = 0; j < 2; j++) {
                            run_case(&c, fk_ids[j], ms[i], shapes[sh][0], shapes[sh][1], W_NORMAL, 50);
                            tus[sh][i][1 + j] = last_us;
                        }
                    }
                for (size_t j = 0; j < 2; j++)
                    for (size_t sh = 0; sh < 4; sh++) {
                        double r[4];
                        for (size_t i = 0; i < 4; i++)
                            r[i] = tus[sh][i][0] > 0 && tus[sh][i][1 + j] > 0 ? tus[sh][i][1 + j] / tus[sh][i][0] : -1;
                        printf("%s: RATIO %s / %s on %s %lldx%lld: M=1 %.3f  M=4 %.3f  M=8 %.3f  M=16 %.3f\n", TEST,
                               fk_ids[j], gemv, names[sh], (long long)shapes[sh][0], (long long)shapes[sh][1], r[0],
                               r[1], r[2], r[3]);
                    }
                /* mxfp4.gemv1_xr and mxfp4.gemv1 at M = 1 beside the GEMVs they replace there, and mxfp4.gemv1_tma
                 * on gate_up */
                for (size_t sh = 0; sh < 4; sh++) {
                    run_case(&c, "mxfp4.gemv1_xr", 1, shapes[sh][0], shapes[sh][1], W_NORMAL, 50);
                    printf("%s: US mxfp4.gemv1_xr %s M=1 %.2f\n", TEST, names[sh], last_us);
                    run_case(&c, "mxfp4.gemv1", 1, shapes[sh][0], shapes[sh][1], W_NORMAL, 50);
                    printf("%s: US mxfp4.gemv1 %s M=1 %.2f (mxfp4.gemv_frag_ps %.2f, mxfp4.gemv %.2f)\n", TEST,
                           names[sh], last_us, tus[sh][0][2], tus[sh][0][0]);
                    if (qc_gpu_get_info(c.g)->sm >= 90 && shapes[sh][0] >= 16384 && shapes[sh][1] <= 5120) {
                        run_case(&c, "mxfp4.gemv1_tma", 1, shapes[sh][0], shapes[sh][1], W_NORMAL, 50);
                        printf("%s: US mxfp4.gemv1_tma %s M=1 %.2f\n", TEST, names[sh], last_us);
                    }
                }
                for (size_t sh = 0; sh < 4; sh++)
                    printf("%s: US %s %lldx%lld (gemv / frag / frag_ps): M=1 %.2f/%.2f/%.2f  M=4 %.2f/%.2f/%.2f  "
                           "M=8 %.2f/%.2f/%.2f  M=16 %.2f/%.2f/%.2f\n",
                           TEST, names[sh], (long long)shapes[sh][0], (long long)shapes[sh][1], tus[sh][0][0],
                           tus[sh][0][1], tus[sh][0][2], tus[sh][1][0], tus[sh][1][1], tus[sh][1][2], tus[sh][2][0],
                           tus[sh][2][1], tus[sh][2][2], tus[sh][3][0], tus[sh][3][1], tus[sh][3][2]);
                /* prefill: mxfp4.linear_mma, and mxfp4.wgmma beside it on sm_90 */
                static const int64_t mw[] = {32, 64, 128, 256, 1024, 2048, 4096};
                for (size_t sh = 0; sh < 4; sh++) {
                    double tl[7], tw[7];
                    for (size_t i = 0; i < 7; i++) {
                        tl[i] = tw[i] = -1;
                        if (mw[i] >= 1024 || sm == 90) {
                            run_case(&c, "mxfp4.linear_mma", mw[i], shapes[sh][0], shapes[sh][1], W_NORMAL, 20);
                            tl[i] = last_us;
                        }
                        if (sm == 90) {
                            run_case(&c, "mxfp4.wgmma", mw[i], shapes[sh][0], shapes[sh][1], W_NORMAL, 20);
                            tw[i] = last_us;
                        }
                    }
                    if (sm == 90)
                        printf("%s: US %s %lldx%lld (linear_mma / wgmma): M=32 %.1f/%.1f  M=64 %.1f/%.1f  "
                               "M=128 %.1f/%.1f  M=256 %.1f/%.1f  M=1024 %.1f/%.1f  M=2048 %.1f/%.1f  "
                               "M=4096 %.1f/%.1f\n",
                               TEST, names[sh], (long long)shapes[sh][0], (long long)shapes[sh][1], tl[0], tw[0],
                               tl[1], tw[1], tl[2], tw[2], tl[3], tw[3], tl[4], tw[4], tl[5], tw[5], tl[6], tw[6]);
                }
            }
        }
        printf("%s: all cases took %.1f s\n", TEST, qc_now_seconds() - t0);
        qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
        CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
    }
    if (c.rt) qc_runtime_close(c.rt);
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
