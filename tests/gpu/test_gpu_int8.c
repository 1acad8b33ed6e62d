/* test_gpu_int8.c - the w8a8_int8 GPU kernels (activation quantization, wgmma/mma/GEMV INT8 GEMMs) against their C references, bit for bit; timings against cuBLAS int8 and the HBM floor. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_int8"
/* words (and bytes of xq) after each output, poisoned too, that a kernel must leave alone */
#define GUARD_WORDS 64
/* xq is poisoned with -128, a code the format never produces */
#define XQ_POISON 0x80
/* above this many multiply-adds the GEMM reference is replaced by SAMPLES outputs the test sums itself */
#define FULL_REF_MACS 60000000.0
#define SAMPLES 4096
#define WARMUP 5
#define ITERS 30
/* timing of the decode GEMV: W copies cycled so that launches read HBM, not the 50 MiB L2 */
#define ROTATE_BYTES ((size_t)256 << 20)
#define MAXCOPY 32
/* floors: the H200's measured device copy bandwidth and INT8 `_int_mm` rate (../shared/anchors,
 * 2026-11-29) and the datasheet's dense INT8 peak */
#define HBM_GBS 4270.0
#define INT8_PEAK_TOPS 1979.0

enum { K_QUANT, K_QUANT_SMOOTH, K_WGMMA, K_MMA, K_GEMV, K_GEMVW, K_N };
static const char *const IDS[K_N] = {"w8a8_int8.quant_act", "w8a8_int8.quant_act_smooth", "w8a8_int8.linear_wgmma",
                                      "w8a8_int8.linear_mma", "w8a8_int8.gemv", "w8a8_int8.gemv_wide"};

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_format_desc *f;
    const qc_kernel_desc *k[K_N];
    qc_gpu_fn fn[K_N];
    int ok[K_N]; /* loaded for this device */
    int sm;
    uint64_t rng;
    qc_gpu_buf work;    /* linear_wgmma's split-K workspace, zero-filled once (qc_kernel_desc.workspace_bytes) */
    uint64_t work_bytes;
    int no_work;        /* launch without it: the kernel must run unsplit and still be exact */
} ctx;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Bind named args and launch kernel i on the device (tensor maps built by the launcher); a kernel with a workspace
 * gets the context's (one buffer, grown when a kernel asks for more; the kernel puts its counters back to zero, so
 * every launch reuses it, as the engine does), unless c->no_work. */
static qc_status launch(ctx *c, int i, const qc_named_arg *args, size_t na, int64_t m, int64_t n, int64_t k,
                        uint32_t scheme, char *err, size_t errlen) {
    void *argv[16];
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)c->sm, .m = m, .n = n, .k = k, .scheme = scheme};
    qc_launch_dims d;
    c->k[i]->launch_dims(&p, &d);
    qc_named_arg aw[16];
    uint64_t need = c->k[i]->workspace_bytes ? c->k[i]->workspace_bytes(&p) : 0;
    if (need && !c->no_work && na < 16) {
        qc_status ws = gt_workspace(c->g, &c->work, &c->work_bytes, need, err, errlen);
        if (ws != QC_OK) return ws;
        memcpy(aw, args, na * sizeof args[0]);
        aw[na++] = (qc_named_arg){"work", &c->work.ptr};
        args = aw;
    }
    qc_status st = qc_kernel_bind(c->k[i], args, na, argv, 16, err, errlen);
    if (st == QC_OK) st = qc_gpu_launch_kernel(c->g, c->k[i], c->fn[i], &d, argv, err, errlen);
    return st;
}

static qc_status launch_quant(ctx *c, int smooth, qc_devptr x, qc_devptr s, qc_devptr xq, qc_devptr xs, int64_t m,
                              int64_t k, char *err, size_t errlen) {
    if (smooth) {
        qc_named_arg a[] = {{"x.bf16", &x}, {"w.smooth", &s}, {"xq", &xq}, {"xs", &xs}, {"m", &m}, {"k", &k}};
        return launch(c, K_QUANT_SMOOTH, a, 6, m, k, k, 2, err, errlen);
    }
    qc_named_arg a[] = {{"x.bf16", &x}, {"xq", &xq}, {"xs", &xs}, {"m", &m}, {"k", &k}};
    return launch(c, K_QUANT, a, 5, m, k, k, 1, err, errlen);
}

static qc_status launch_gemm(ctx *c, int i, qc_devptr xq, qc_devptr xs, qc_devptr w, qc_devptr sw, qc_devptr y,
                             int64_t m, int64_t n, int64_t k, char *err, size_t errlen) {
    qc_named_arg a[] = {{"xq", &xq}, {"xs", &xs}, {"w.qweight", &w}, {"w.scales", &sw},
                        {"y", &y},   {"m", &m},   {"n", &n},         {"k", &k}};
    return launch(c, i, a, 8, m, n, k, 1, err, errlen);
}

/* The C reference of kernel i through libffi with host pointers. */
static qc_status call_ref(ctx *c, int i, const qc_named_arg *args, size_t na, char *err, size_t errlen) {
    void *argv[16];
    qc_status st = qc_kernel_bind(c->k[i], args, na, argv, 16, err, errlen);
    return st == QC_OK ? qc_kernel_call_reference(c->k[i], argv, err, errlen) : st;
}

static qc_status ref_quant(ctx *c, int smooth, const uint16_t *x, const float *s, int8_t *xq, float *xs, int64_t m,
                           int64_t k, char *err, size_t errlen) {
    void *hx = (void *)x, *hs = (void *)s, *hq = xq, *hxs = xs;
    if (smooth) {
        qc_named_arg a[] = {{"x.bf16", &hx}, {"w.smooth", &hs}, {"xq", &hq}, {"xs", &hxs}, {"m", &m}, {"k", &k}};
        return call_ref(c, K_QUANT_SMOOTH, a, 6, err, errlen);
    }
    qc_named_arg a[] = {{"x.bf16", &hx}, {"xq", &hq}, {"xs", &hxs}, {"m", &m}, {"k", &k}};
    return call_ref(c, K_QUANT, a, 5, err, errlen);
}

/* The test's own output (r, o): the exact sum in int64, then the format's two f32 multiplies. */
static float own_y(const int8_t *xq, const float *xs, const int8_t *w, const float *sw, int64_t k, int64_t r,
                   int64_t o) {
    int64_t acc = 0;
    for (int64_t t = 0; t < k; t++) acc += (int64_t)xq[r * k + t] * w[o * k + t];
    volatile float a = (float)acc * xs[r]; /* two separate roundings, as the format defines */
    return a * sw[o];
}

static int same_bits(float a, float b) { return gt_bits(a) == gt_bits(b) || (isnan(a) && isnan(b)); }

/* How x is made. */
enum xkind {
    X_NORMAL,  /* N(0,1) per element, each row scaled by 2^[-4, 4] */
    X_OUTLIER, /* normal with a few channels 50x larger (the SmoothQuant case) */
    X_SPECIAL, /* normal, plus a zero row, a NaN row, an infinite row and a row of exact ties */
};

static void make_x(ctx *c, uint16_t *x, int64_t m, int64_t k, enum xkind kind) {
    for (int64_t r = 0; r < m; r++) {
        float rs = ldexpf(1.0f, (int)(qc_test_rng(&c->rng) % 9) - 4);
        for (int64_t j = 0; j < k; j++) {
            float v = qc_test_normal(&c->rng) * rs;
            if (kind == X_OUTLIER && j % 97 == 5) v *= 50.0f;
            x[r * k + j] = qc_f32_to_bf16(v);
        }
    }
    if (kind == X_SPECIAL && m >= 5) {
        for (int64_t j = 0; j < k; j++) x[0 * k + j] = 0; /* zero row: scale 1, codes 0 */
        x[1 * k + k / 2] = 0x7fc0;                        /* NaN */
        x[2 * k + 3] = 0xff80;                            /* -inf */
        /* ties: row max 127 gives scale 1, so x = j + 0.5 rounds half to even */
        for (int64_t j = 0; j < k; j++) x[3 * k + j] = qc_f32_to_bf16(j == 0 ? 127.0f : (float)(j % 64) - 31.5f);
    }
}

/* One case: x random bf16 [m,k], W quantized by the format (scheme 1, or 2
 * with SmoothQuant factors from x's channel maxima); quant_act then GEMM
 * `gi` on the GPU with poisoned outputs and guards; xq/xs must equal the
 * quant reference bit for bit, y the GEMM reference (or the test's own
 * int64 sums at sampled outputs) bit for bit, and, for small cases, the
 * plugin's f32 linear reference run on x's bf16 values. */
static void run_case(ctx *c, int gi, int64_t m, int64_t n, int64_t k, enum xkind kind, int smooth) {
    if (!c->ok[gi] || !c->ok[smooth ? K_QUANT_SMOOTH : K_QUANT]) return;
    char err[512], shape[128];
    snprintf(shape, sizeof shape, "%-22s m=%-5lld n=%-5lld k=%-5lld%s%s%s", IDS[gi] + 10, (long long)m, (long long)n,
             (long long)k, smooth ? " smooth" : "", kind == X_SPECIAL ? " special-rows" : kind == X_OUTLIER ? " outliers" : "",
             c->no_work && c->k[gi]->workspace_bytes ? " no-workspace" : "");
    size_t xc = (size_t)(m * k), wc = (size_t)(n * k), yc = (size_t)(m * n);
    uint16_t *x = malloc(xc * 2);
    float *wf = malloc(wc * 4), *absmax = calloc((size_t)k, 4), *xs_ref = malloc((size_t)m * 4), *y_ref = NULL;
    int8_t *xq_ref = malloc(xc);
    unsigned char *xq_got = malloc(xc + GUARD_WORDS * 4);
    float *xs_got = malloc((size_t)m * 4 + GUARD_WORDS * 4), *y_got = malloc(yc * 4 + GUARD_WORDS * 4);
    qc_gpu_buf dx = {0}, dq = {0}, ds = {0}, dw = {0}, dsw = {0}, dsm = {0}, dy = {0};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    make_x(c, x, m, k, kind);
    for (size_t i = 0; i < wc; i++) wf[i] = qc_test_normal(&c->rng) * 0.05f;
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < k; j++) {
            float v = fabsf(qc_bf16_to_f32(x[r * k + j]));
            if (isfinite(v) && v > absmax[j]) absmax[j] = v;
        }
    qc_quant_request req = {.struct_size = sizeof req, .w = wf, .n = n, .k = k,
                            .scheme = smooth ? "smoothquant" : "no_smooth", .act_absmax = smooth ? absmax : NULL};
    qc_reason why;
    qc_status st = c->f->quantize(&req, &pw, &why);
    CHECK(st == QC_OK, "%s: quantize: %s", shape, why.text);
    if (st != QC_OK) goto out;
    const int8_t *qw = NULL;
    const float *sw = NULL, *sm = NULL;
    for (uint32_t i = 0; i < pw.n_buffers; i++) {
        if (strcmp(pw.buffers[i].name, "qweight") == 0) qw = pw.buffers[i].data;
        if (strcmp(pw.buffers[i].name, "scales") == 0) sw = pw.buffers[i].data;
        if (strcmp(pw.buffers[i].name, "smooth") == 0) sm = pw.buffers[i].data;
    }
    CHECK(qw && sw && (!smooth || sm), "%s: packed weight lacks a buffer", shape);
    if (!qw || !sw || (smooth && !sm)) goto out;

    /* references */
    st = ref_quant(c, smooth, x, sm, xq_ref, xs_ref, m, k, err, sizeof err);
    CHECK(st == QC_OK, "%s: quant reference: %s", shape, err);
    int full = (double)m * n * k <= FULL_REF_MACS;
    if (full && st == QC_OK) {
        y_ref = malloc(yc * 4);
        gt_poison(y_ref, yc * 4);
        void *hq = xq_ref, *hs = xs_ref, *hw = (void *)qw, *hsw = (void *)sw, *hy = y_ref;
        qc_named_arg a[] = {{"xq", &hq}, {"xs", &hs}, {"w.qweight", &hw}, {"w.scales", &hsw},
                            {"y", &hy},  {"m", &m},   {"n", &n},          {"k", &k}};
        st = call_ref(c, gi, a, 8, err, sizeof err);
        CHECK(st == QC_OK, "%s: GEMM reference: %s", shape, err);
    }
    if (st != QC_OK) goto out;

    /* device */
    st = qc_gpu_alloc(c->g, xc * 2, xc * 2, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, xc, xc + GUARD_WORDS * 4, QC_MEM_WORKSPACE, "xq", &dq, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)m * 4, (size_t)m * 4 + GUARD_WORDS * 4, QC_MEM_WORKSPACE, "xs", &ds, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, wc, wc, QC_MEM_WEIGHTS, "qweight", &dw, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)n * 4, (size_t)n * 4, QC_MEM_SCALES, "scales", &dsw, err, sizeof err);
    if (!st && smooth) st = qc_gpu_alloc(c->g, (size_t)k * 4, (size_t)k * 4, QC_MEM_SCALES, "smooth", &dsm, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, dx.ptr, x, xc * 2, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, dw.ptr, qw, wc, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, dsw.ptr, sw, (size_t)n * 4, err, sizeof err);
    if (!st && smooth) st = qc_gpu_upload(c->g, dsm.ptr, sm, (size_t)k * 4, err, sizeof err);
    if (!st) st = qc_gpu_memset32(c->g, dq.ptr, 0x80808080u, (xc + GUARD_WORDS * 4) / 4, err, sizeof err);
    if (!st) st = qc_gpu_memset32(c->g, ds.ptr, GT_POISON, (size_t)m + GUARD_WORDS, err, sizeof err);
    if (!st) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    if (!st) st = launch_quant(c, smooth, dx.ptr, dsm.ptr, dq.ptr, ds.ptr, m, k, err, sizeof err);
    if (!st) st = launch_gemm(c, gi, dq.ptr, ds.ptr, dw.ptr, dsw.ptr, dy.ptr, m, n, k, err, sizeof err);
    if (!st) st = qc_gpu_sync(c->g, err, sizeof err);
    if (!st) st = qc_gpu_download(c->g, xq_got, dq.ptr, xc + GUARD_WORDS * 4, err, sizeof err);
    if (!st) st = qc_gpu_download(c->g, xs_got, ds.ptr, (size_t)m * 4 + GUARD_WORDS * 4, err, sizeof err);
    if (!st) st = qc_gpu_download(c->g, y_got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", shape, err);
    if (st != QC_OK) goto out;

    /* activation quantization: exact codes and scales, nothing past the ends */
    size_t q_bad = 0, q_unwritten = 0, q_first = 0, s_bad = 0, guard_q = 0;
    for (size_t i = 0; i < xc; i++) {
        q_unwritten += xq_got[i] == XQ_POISON;
        if ((int8_t)xq_got[i] != xq_ref[i] && !q_bad++) q_first = i;
    }
    for (size_t i = xc; i < xc + GUARD_WORDS * 4; i++) guard_q += xq_got[i] != XQ_POISON;
    for (int64_t r = 0; r < m; r++) s_bad += !same_bits(xs_got[r], xs_ref[r]) || gt_bits(xs_got[r]) == GT_POISON;
    size_t first = 0;
    CHECK(q_unwritten == 0 && q_bad == 0 && s_bad == 0 && guard_q == 0 &&
              gt_unwritten(xs_got + m, GUARD_WORDS * 4, &first) == GUARD_WORDS,
          "%s: quant_act: %zu codes differ (first xq[%zu] = %d, ref %d), %zu unwritten, %zu scales differ, %zu guard "
          "bytes written", shape, q_bad, q_first, q_bad ? (int8_t)xq_got[q_first] : 0, q_bad ? xq_ref[q_first] : 0,
          q_unwritten, s_bad, guard_q);

    /* GEMM: bit for bit against the reference (all outputs) or the test's own sums (samples);
       the GEMM is checked on the reference's xq/xs, which the lines above showed equal */
    size_t y_unwritten = gt_unwritten(y_got, yc * 4, &first), y_past = gt_unwritten(y_got + yc, GUARD_WORDS * 4, NULL);
    CHECK(y_unwritten == 0, "%s: %zu outputs unwritten (first y[%zu], row %zu col %zu)", shape, y_unwritten, first,
          first / (size_t)n, first % (size_t)n);
    CHECK(y_past == GUARD_WORDS, "%s: wrote %zu words past the end of y", shape, (size_t)GUARD_WORDS - y_past);
    size_t count = full ? yc : SAMPLES, bad = 0, fbad = 0, nan_rows = 0;
    double maxd = 0;
    for (size_t s = 0; s < count; s++) {
        size_t e = full ? s : (size_t)(qc_test_rng(&c->rng) % yc);
        int64_t r = (int64_t)e / n, o = (int64_t)e % n;
        float want = full ? y_ref[e] : own_y(xq_ref, xs_ref, qw, sw, k, r, o);
        if (full && s % 97 == 0) { /* the reference against the test's own sum too */
            float own = own_y(xq_ref, xs_ref, qw, sw, k, r, o);
            CHECK(same_bits(own, want), "%s: reference y[%zu] = %.9g, own sum %.9g", shape, e, (double)want, (double)own);
        }
        nan_rows += isnan(want);
        if (!same_bits(y_got[e], want)) {
            if (!bad++) fbad = e;
            double d = fabs((double)y_got[e] - want);
            if (!(d <= maxd)) maxd = d;
        }
    }
    printf("  %-60s %8zu outputs%s: %zu differ (max |d| %.3g, tol 0: bit-exact)%s\n", shape, count,
           full ? "" : " sampled", bad, maxd, nan_rows ? ", NaN rows as the reference" : "");
    CHECK(bad == 0, "%s: %zu outputs differ, first y[%zu] (row %zu col %zu) = %.9g", shape, bad, fbad,
          fbad / (size_t)n, fbad % (size_t)n, (double)y_got[fbad]);

    /* the whole GPU path against the format's own f32 reference kernel on x's bf16 values */
    if (full) {
        const qc_kernel_desc *lk = qc_kernel_find(c->rt, smooth ? "w8a8_int8.linear_smooth_ref" : "w8a8_int8.linear_ref");
        float *xf = malloc(xc * 4), *yl = malloc(yc * 4);
        for (size_t i = 0; i < xc; i++) xf[i] = qc_bf16_to_f32(x[i]);
        void *hx = xf, *hw = (void *)qw, *hsw = (void *)sw, *hsm = (void *)sm, *hy = yl;
        qc_named_arg a[] = {{"x", &hx}, {"w.qweight", &hw}, {"w.scales", &hsw}, {"w.smooth", &hsm},
                            {"y", &hy}, {"m", &m},          {"n", &n},          {"k", &k}};
        void *argv[16];
        st = lk ? qc_kernel_bind(lk, a, 8, argv, 16, err, sizeof err) : QC_ERR_INVALID;
        if (st == QC_OK) st = qc_kernel_call_reference(lk, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s: format reference: %s", shape, err);
        size_t lbad = 0;
        for (size_t i = 0; st == QC_OK && i < yc; i++) lbad += !same_bits(y_got[i], yl[i]);
        CHECK(lbad == 0, "%s: %zu outputs differ from %s on the bf16 x", shape, lbad, lk ? lk->id : "?");
        free(xf), free(yl);
    }
out:
    qc_gpu_free(c->g, &dx), qc_gpu_free(c->g, &dq), qc_gpu_free(c->g, &ds), qc_gpu_free(c->g, &dw);
    qc_gpu_free(c->g, &dsw), qc_gpu_free(c->g, &dsm), qc_gpu_free(c->g, &dy);
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
    free(x), free(wf), free(absmax), free(xs_ref), free(y_ref), free(xq_ref), free(xq_got), free(xs_got), free(y_got);
}

/* ---- timings ---- */

typedef struct tbufs {
    qc_gpu_buf x, xq, xs, w[MAXCOPY], sw, y;
    int ncopy;
} tbufs;

/* Median of ITERS launches of fn(i) timed one by one with events. */
typedef qc_status (*launch_fn)(ctx *c, tbufs *b, int i, int64_t m, int64_t n, int64_t k, char *err, size_t errlen);

static double time_median_us(ctx *c, tbufs *b, launch_fn fn, int64_t m, int64_t n, int64_t k) {
    char err[512];
    qc_gpu_event ev[2] = {0};
    float ms[ITERS];
    qc_status st = qc_gpu_event_create(c->g, &ev[0], err, sizeof err);
    if (!st) st = qc_gpu_event_create(c->g, &ev[1], err, sizeof err);
    for (int i = 0; !st && i < WARMUP; i++) st = fn(c, b, i, m, n, k, err, sizeof err);
    for (int i = 0; !st && i < ITERS; i++) {
        st = qc_gpu_event_record(c->g, ev[0], err, sizeof err);
        if (!st) st = fn(c, b, WARMUP + i, m, n, k, err, sizeof err);
        if (!st) st = qc_gpu_event_record(c->g, ev[1], err, sizeof err);
        if (!st) st = qc_gpu_event_elapsed(c->g, ev[0], ev[1], &ms[i], err, sizeof err);
    }
    qc_gpu_event_destroy(c->g, ev[0]);
    qc_gpu_event_destroy(c->g, ev[1]);
    CHECK(st == QC_OK, "timing m=%lld n=%lld k=%lld: %s", (long long)m, (long long)n, (long long)k, err);
    if (st) return -1;
    qsort(ms, ITERS, sizeof ms[0], cmp_float);
    return 1000.0 * ms[ITERS / 2];
}

static qc_status t_quant(ctx *c, tbufs *b, int i, int64_t m, int64_t n, int64_t k, char *err, size_t errlen) {
    (void)i, (void)n;
    return launch_quant(c, 0, b->x.ptr, 0, b->xq.ptr, b->xs.ptr, m, k, err, errlen);
}
static int t_gemm_id = K_WGMMA;
static qc_status t_gemm(ctx *c, tbufs *b, int i, int64_t m, int64_t n, int64_t k, char *err, size_t errlen) {
    return launch_gemm(c, t_gemm_id, b->xq.ptr, b->xs.ptr, b->w[i % b->ncopy].ptr, b->sw.ptr, b->y.ptr, m, n, k, err,
                       errlen);
}

/* cuBLAS int8 `_int_mm` on the H200 (us; the brief's numbers, ../shared/anchors 2026-11-29) */
static double anchor_us(int64_t m, int64_t n, int64_t k) {
    static const struct {
        int64_t n, k;
        double us1024, us4096;
    } a[] = {{6144, 4096, 77, 249}, {4096, 4096, 53, 165}, {28672, 4096, 290, 1157}, {4096, 14336, 140, 561}};
    for (size_t i = 0; i < 4; i++)
        if (a[i].n == n && a[i].k == k) return m == 1024 ? a[i].us1024 : m == 4096 ? a[i].us4096 : 0;
    return 0;
}

/* Sampled exact check of the timed GEMM's y (its xq/xs downloaded, W random codes on the host). */
static void check_timed(ctx *c, tbufs *b, const int8_t *w, const float *sw, int64_t m, int64_t n, int64_t k,
                        const char *shape) {
    char err[512];
    enum { NS = 64 };
    size_t bad = 0;
    int8_t *xq = malloc((size_t)k);
    qc_status st = QC_OK;
    for (int s = 0; s < NS && st == QC_OK; s++) {
        int64_t r = (int64_t)(qc_test_rng(&c->rng) % (uint64_t)m), o = (int64_t)(qc_test_rng(&c->rng) % (uint64_t)n);
        float xs, y;
        st = qc_gpu_download(c->g, xq, b->xq.ptr + (size_t)(r * k), (size_t)k, err, sizeof err);
        if (!st) st = qc_gpu_download(c->g, &xs, b->xs.ptr + (size_t)r * 4, 4, err, sizeof err);
        if (!st) st = qc_gpu_download(c->g, &y, b->y.ptr + (size_t)(r * n + o) * 4, 4, err, sizeof err);
        if (st) break;
        int64_t acc = 0;
        for (int64_t t = 0; t < k; t++) acc += (int64_t)xq[t] * w[o * k + t];
        volatile float a = (float)acc * xs;
        bad += !same_bits(y, a * sw[o]);
    }
    free(xq);
    CHECK(st == QC_OK && bad == 0, "%s: %zu of %d sampled outputs differ from the exact sum %s", shape, bad, NS,
          st ? err : "");
}

/* Llama-3-8B linears: quant_act, the GEMM, and both, at M = 1024..8192 (and
 * the decode GEMV at M = 1..16 and the GEMMs at M = 16, 64 against the
 * weight-bytes floor). */
static void timings(ctx *c) {
    static const struct {
        const char *name;
        int64_t n, k;
    } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    static const int64_t big_m[] = {1024, 2048, 4096, 8192}, small_m[] = {1, 2, 4, 8, 12, 16, 32, 64};
    const int64_t m_max = 8192, k_max = 14336, w_max = 28672 * 4096, y_max = 8192 * 28672;
    char err[512];
    tbufs b;
    memset(&b, 0, sizeof b);
    uint16_t *x = malloc((size_t)(m_max * k_max) * 2);
    int8_t *w = malloc((size_t)w_max);
    float *sw = malloc(28672 * 4);
    double t0 = qc_now_seconds();
    for (size_t i = 0; i < (size_t)(m_max * k_max); i++) x[i] = qc_f32_to_bf16(qc_test_uniform(&c->rng) * 4.0f);
    for (size_t i = 0; i < (size_t)w_max; i++) w[i] = (int8_t)((int)(qc_test_rng(&c->rng) % 255) - 127);
    for (int i = 0; i < 28672; i++) sw[i] = (1.0f + qc_test_uniform(&c->rng) * 0.5f) / 2048.0f;
    printf("%s: timing data generated in %.1f s\n", TEST, qc_now_seconds() - t0);
    qc_status st = qc_gpu_alloc(c->g, (size_t)(m_max * k_max) * 2, (size_t)(m_max * k_max) * 2, QC_MEM_ACTIVATIONS,
                                "x", &b.x, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)(m_max * k_max), (size_t)(m_max * k_max), QC_MEM_WORKSPACE, "xq", &b.xq, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)m_max * 4, (size_t)m_max * 4, QC_MEM_WORKSPACE, "xs", &b.xs, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, 28672 * 4, 28672 * 4, QC_MEM_SCALES, "scales", &b.sw, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)y_max * 4, (size_t)y_max * 4, QC_MEM_ACTIVATIONS, "y", &b.y, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, (size_t)w_max, (size_t)w_max, QC_MEM_WEIGHTS, "w", &b.w[0], err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, b.x.ptr, x, (size_t)(m_max * k_max) * 2, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, b.w[0].ptr, w, (size_t)w_max, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, b.sw.ptr, sw, 28672 * 4, err, sizeof err);
    b.ncopy = 1;
    CHECK(st == QC_OK, "timing buffers: %s", err);
    for (size_t s = 0; st == QC_OK && s < 4; s++) {
        const int64_t n = shapes[s].n, k = shapes[s].k;
        /* weight copies for the small-M rows, so that each launch reads W from HBM */
        int want = (int)(ROTATE_BYTES / (size_t)(n * k)) + 1;
        if (want > MAXCOPY) want = MAXCOPY;
        for (int i = 1; st == QC_OK && i < want; i++) {
            st = qc_gpu_alloc(c->g, (size_t)(n * k), (size_t)(n * k), QC_MEM_WEIGHTS, "w copy", &b.w[i], err, sizeof err);
            if (!st) st = qc_gpu_copy(c->g, b.w[i].ptr, b.w[0].ptr, (size_t)(n * k), err, sizeof err);
        }
        CHECK(st == QC_OK, "weight copies: %s", err);
        /* the portable mma.sync GEMM is timed too (at 1024 and 4096 when wgmma runs here), for information */
        for (size_t mi = 0; st == QC_OK && mi < 2 * sizeof big_m / sizeof big_m[0]; mi++) {
            const int64_t m = big_m[mi % 4];
            const int gi = mi < 4 ? (c->ok[K_WGMMA] ? K_WGMMA : K_MMA) : K_MMA;
            if (mi >= 4 && (!c->ok[K_WGMMA] || (m != 1024 && m != 4096))) continue;
            if (!c->ok[gi] || !c->ok[K_QUANT]) break;
            char shape[128];
            snprintf(shape, sizeof shape, "%s m=%lld n=%lld k=%lld", shapes[s].name, (long long)m, (long long)n,
                     (long long)k);
            b.ncopy = 1;
            t_gemm_id = gi;
            st = t_quant(c, &b, 0, m, n, k, err, sizeof err);
            if (!st) st = t_gemm(c, &b, 0, m, n, k, err, sizeof err);
            if (!st) st = qc_gpu_sync(c->g, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", shape, err);
            if (st) break;
            check_timed(c, &b, w, sw, m, n, k, shape);
            double tq = time_median_us(c, &b, t_quant, m, n, k), tg = time_median_us(c, &b, t_gemm, m, n, k);
            if (tq < 0 || tg < 0) break;
            double ops = 2.0 * m * n * k, an = anchor_us(m, n, k);
            double qbytes = (double)m * k * 3 + m * 4; /* bf16 in, int8 + scale out */
            printf("  TIME %-36s %-22s GEMM %8.1f us %6.1f TOP/s (%4.1f%% of %.0f peak)  quant_act %6.1f us "
                   "(%5.0f GB/s, %4.1f%% of %.0f)  both %8.1f us", shape, IDS[gi] + 10, tg, ops / tg / 1e6,
                   100.0 * ops / tg / 1e6 / INT8_PEAK_TOPS, INT8_PEAK_TOPS, tq, qbytes / tq / 1e3,
                   100.0 * qbytes / tq / 1e3 / HBM_GBS, HBM_GBS, tq + tg);
            if (an > 0)
                printf("  cuBLAS int8 %.0f us -> GEMM %.2fx, with quant_act %.2fx", an, an / tg, an / (tq + tg));
            printf("\n");
        }
        /* small M: the GEMV (m <= 16) and the GEMM, W streamed from HBM */
        b.ncopy = want;
        for (size_t mi = 0; st == QC_OK && mi < sizeof small_m / sizeof small_m[0]; mi++) {
            const int64_t m = small_m[mi];
            const int cands[4] = {K_GEMV, K_GEMVW, K_WGMMA, K_MMA};
            for (int ci = 0; ci < 4 && st == QC_OK; ci++) {
                const int gi = cands[ci];
                if (!c->ok[gi] || (gi == K_GEMV && m > 8) || (gi == K_GEMVW && (m < 9 || m > 16)) || !c->ok[K_QUANT])
                    continue;
                char shape[128];
                snprintf(shape, sizeof shape, "%s m=%lld n=%lld k=%lld", shapes[s].name, (long long)m, (long long)n,
                         (long long)k);
                t_gemm_id = gi;
                st = t_quant(c, &b, 0, m, n, k, err, sizeof err);
                if (!st) st = launch_gemm(c, gi, b.xq.ptr, b.xs.ptr, b.w[0].ptr, b.sw.ptr, b.y.ptr, m, n, k, err, sizeof err);
                if (!st) st = qc_gpu_sync(c->g, err, sizeof err);
                CHECK(st == QC_OK, "%s: %s", shape, err);
                if (st) break;
                check_timed(c, &b, w, sw, m, n, k, shape);
                double tq = time_median_us(c, &b, t_quant, m, n, k), tg = time_median_us(c, &b, t_gemm, m, n, k);
                if (tq < 0 || tg < 0) break;
                double bytes = (double)n * k + n * 4.0 + m * (k + 4.0) + m * n * 4.0, floor_us = bytes / HBM_GBS / 1e3;
                printf("  TIME %-36s %-22s GEMM %8.2f us  %5.0f GB/s (floor %.2f us at %.0f GB/s: %4.1f%%)  "
                       "quant_act %5.2f us  both %8.2f us\n", shape, IDS[gi] + 10, tg, bytes / tg / 1e3, floor_us,
                       HBM_GBS, 100.0 * floor_us / tg, tq, tq + tg);
            }
        }
        for (int i = 1; i < MAXCOPY; i++) qc_gpu_free(c->g, &b.w[i]);
    }
    qc_gpu_free(c->g, &b.x), qc_gpu_free(c->g, &b.xq), qc_gpu_free(c->g, &b.xs), qc_gpu_free(c->g, &b.sw);
    qc_gpu_free(c->g, &b.y), qc_gpu_free(c->g, &b.w[0]);
    free(x), free(w), free(sw);
}

/* Refusals that need no launch: eligibility reasons and a misaligned TMA map. */
static void refusals(ctx *c) {
    qc_reason why;
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)c->sm, .m = 64, .n = 4096, .k = 4104, .scheme = 1};
    for (int i = 0; i < K_N; i++) {
        if (!c->k[i]) continue;
        p.k = 4104;
        p.n = 4096;
        CHECK(!c->k[i]->eligible(&p, &why) && strcmp(why.code, "align_k") == 0, "%s k=4104: %s", IDS[i], why.code);
        p.k = 4096;
        p.n = 4104;
        CHECK(!c->k[i]->eligible(&p, &why) && strcmp(why.code, "align_n") == 0, "%s n=4104: %s", IDS[i], why.code);
    }
    p.n = 4096;
    p.k = 4096;
    p.scheme = 2;
    CHECK(c->k[K_QUANT] && !c->k[K_QUANT]->eligible(&p, &why) && strcmp(why.code, "scheme") == 0,
          "quant_act took scheme 2");
    CHECK(c->k[K_WGMMA] && c->k[K_WGMMA]->eligible(&p, &why), "linear_wgmma refused scheme 2: %s", why.text);
    if (!c->ok[K_WGMMA]) return;
    char err[512] = "";
    qc_gpu_buf d = {0};
    qc_status st = qc_gpu_alloc(c->g, 1 << 20, 1 << 20, QC_MEM_WORKSPACE, "scratch", &d, err, sizeof err);
    CHECK(st == QC_OK, "scratch: %s", err);
    if (st == QC_OK) {
        st = launch_gemm(c, K_WGMMA, d.ptr + 8, d.ptr, d.ptr, d.ptr, d.ptr, 128, 256, 256, err, sizeof err);
        CHECK(st != QC_OK && strstr(err, "xq") && strstr(err, "cuTensorMapEncodeTiled"), "misaligned xq: %d '%s'",
              (int)st, err);
        printf("%s: misaligned xq refused: %s\n", TEST, err);
        st = qc_gpu_sync(c->g, err, sizeof err);
        CHECK(st == QC_OK, "stream after the refused launch: %s", err);
    }
    qc_gpu_free(c->g, &d);
}

/* quant_act on an x that starts 2 bytes off 16-byte alignment (the scalar path) and on rows of
 * k = 16 (fewer chunks than threads): codes and scales as the reference. */
static void quant_odd(ctx *c) {
    if (!c->ok[K_QUANT]) return;
    char err[512] = "";
    const int64_t m = 5, k = 48;
    uint16_t x[5 * 48];
    int8_t q_ref[5 * 48], q_got[5 * 48];
    float s_ref[5], s_got[5];
    make_x(c, x, m, k, X_SPECIAL);
    qc_status st = ref_quant(c, 0, x, NULL, q_ref, s_ref, m, k, err, sizeof err);
    CHECK(st == QC_OK, "quant reference: %s", err);
    qc_gpu_buf dx = {0}, dq = {0}, ds = {0};
    if (!st) st = qc_gpu_alloc(c->g, sizeof x + 16, sizeof x + 16, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, sizeof q_got, sizeof q_got, QC_MEM_WORKSPACE, "xq", &dq, err, sizeof err);
    if (!st) st = qc_gpu_alloc(c->g, sizeof s_got, sizeof s_got, QC_MEM_WORKSPACE, "xs", &ds, err, sizeof err);
    if (!st) st = qc_gpu_upload(c->g, dx.ptr + 2, x, sizeof x, err, sizeof err);
    if (!st) st = launch_quant(c, 0, dx.ptr + 2, 0, dq.ptr, ds.ptr, m, k, err, sizeof err);
    if (!st) st = qc_gpu_download(c->g, q_got, dq.ptr, sizeof q_got, err, sizeof err);
    if (!st) st = qc_gpu_download(c->g, s_got, ds.ptr, sizeof s_got, err, sizeof err);
    CHECK(st == QC_OK, "misaligned quant_act: %s", err);
    if (!st) {
        int bad = memcmp(q_got, q_ref, sizeof q_ref) != 0;
        for (int i = 0; i < m; i++) bad |= !same_bits(s_got[i], s_ref[i]);
        CHECK(!bad, "quant_act on a misaligned x differs from the reference");
        printf("  quant_act m=5 k=48, x 2 bytes off alignment (scalar path), special rows: %s\n", bad ? "DIFFERS" : "exact");
    }
    qc_gpu_free(c->g, &dx), qc_gpu_free(c->g, &dq), qc_gpu_free(c->g, &ds);
}

int main(int argc, char **argv) {
    qc_set_log_level(QC_LOG_WARN);
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0; /* correctness only */
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    c.sm = qc_gpu_get_info(c.g)->sm;
    if (c.sm < 80) {
        printf("%s: skip: sm_%d; the w8a8_int8 kernels need sm_80 or later\n", TEST, c.sm);
        qc_gpu_close(c.g);
        return 0;
    }
    char *tmp = NULL;
    int setup_rc = gt_setup(TEST, c.g, &tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    char err[512];
    if (c.rt && qc_runtime_load_plugin(c.rt, QC_TEST_PLUGIN_DIR "/w8a8_int8.so", err, sizeof err) != QC_OK) {
        CHECK(0, "w8a8_int8 plugin: %s", err);
    } else if (c.rt) {
        c.f = qc_format_find(c.rt, "w8a8_int8");
        CHECK(c.f != NULL, "format w8a8_int8 missing");
        for (int i = 0; i < K_N; i++) {
            c.k[i] = qc_kernel_find(c.rt, IDS[i]);
            CHECK(c.k[i] != NULL, "%s is not registered", IDS[i]);
            if (!c.k[i]) continue;
            qc_reason why;
            double t0 = qc_now_seconds();
            qc_status st = qc_gpu_kernel_load(c.g, c.nv, c.k[i], &c.fn[i], &why);
            if (st != QC_OK && strcmp(why.code, "arch") == 0) {
                printf("%s: %s: not for this device: %s\n", TEST, IDS[i], why.text);
                continue;
            }
            CHECK(st == QC_OK, "%s: %s: %s", IDS[i], why.code, why.text);
            c.ok[i] = st == QC_OK;
            if (c.ok[i]) printf("%s: %s loaded in %.1f s\n", TEST, IDS[i], qc_now_seconds() - t0);
        }
        CHECK(c.sm != 90 || c.ok[K_WGMMA], "linear_wgmma must load on sm_90");
        if (c.f) {
            double t0 = qc_now_seconds();
            refusals(&c);
            quant_odd(&c);
            /* decode GEMV: every m, k tails of the 512-byte warp step, n = 16, special rows, smoothing */
            static const int64_t gk[] = {16, 48, 528, 4096, 1040, 14336, 4112, 96};
            for (int64_t m = 1; m <= 8; m++) run_case(&c, K_GEMV, m, m % 3 ? 272 : 48, gk[m - 1], X_NORMAL, 0);
            run_case(&c, K_GEMV, 1, 16, 16, X_NORMAL, 0);
            static const int64_t gk2[] = {4096, 528, 1040, 14336, 48, 4112, 96, 4096};
            for (int64_t m = 9; m <= 16; m++) run_case(&c, K_GEMVW, m, m % 3 ? 4096 : 48, gk2[m - 9], X_NORMAL, 0);
            run_case(&c, K_GEMVW, 16, 1024, 4096, X_SPECIAL, 1);
            run_case(&c, K_GEMV, 8, 4096, 4096, X_SPECIAL, 0);
            run_case(&c, K_GEMV, 5, 1024, 2048, X_OUTLIER, 1);
            /* GEMMs: m from 1 to 8192 (tails of the 128-row tiles and TMA boxes), n tails (n % 64, n % 128),
               k tails (k % 128 = 16, 48, 112: TMA/cp.async zero fill), one and many k steps, tile widths
               256/192/128 and several tiles per persistent block, special rows and SmoothQuant */
            static const struct {
                int64_t m, n, k;
            } gc[] = {{1, 256, 128},     {7, 48, 16},       {9, 208, 48},      {37, 272, 1040},   {64, 512, 4096},
                      {128, 128, 128},   {129, 400, 656},   {200, 1008, 2064}, {256, 6144, 128},  {511, 784, 1520},
                      {1000, 4096, 512}, {1024, 6144, 256}, {1024, 4096, 4096}, {2900, 2064, 1024}, {300, 144, 14336},
                      {4096, 1024, 1024}, {8192, 256, 512}, {8192, 4096, 4096}};
            static const int gemms[2] = {K_WGMMA, K_MMA};
            for (int gi = 0; gi < 2; gi++) {
                for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++)
                    run_case(&c, gemms[gi], gc[i].m, gc[i].n, gc[i].k, X_NORMAL, 0);
                run_case(&c, gemms[gi], 37, 256, 512, X_SPECIAL, 0);
                run_case(&c, gemms[gi], 200, 512, 1024, X_OUTLIER, 1);
                run_case(&c, gemms[gi], 1500, 1024, 4096, X_SPECIAL, 1);
            }
            /* split-K of linear_wgmma (grid.y, test_int8_unit states the plan): Llama down at 16 rows (4 ways), qkv's
               shape at k = 8192 (2 ways), uneven splits of 49 and 97 stages with k tails (2 and 4 ways), special rows
               split, and the same problems without a workspace, which must run unsplit and give the same bits */
            static const struct {
                int64_t m, n, k;
            } sc[] = {{16, 4096, 14336}, {9, 6144, 8192}, {17, 4096, 6160}, {100, 1024, 12400}, {33, 256, 12288}};
            for (int nw = 0; nw < 2; nw++) {
                c.no_work = nw;
                for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
                    run_case(&c, K_WGMMA, sc[i].m, sc[i].n, sc[i].k, X_NORMAL, 0);
                run_case(&c, K_WGMMA, 64, 512, 6144, X_SPECIAL, 1);
            }
            c.no_work = 0;
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            if (quick)
                printf("%s: --quick: timings skipped\n", TEST);
            else if (!qc_test_failed)
                timings(&c);
            else
                printf("%s: timings skipped after a correctness failure\n", TEST);
        }
    }
    if (c.work_bytes) { /* the split counters are back at zero after every launch */
        char werr[256];
        size_t nz = 0;
        qc_status wst = gt_nonzero_words(c.g, &c.work, 512, &nz, werr, sizeof werr);
        CHECK(wst == QC_OK && nz == 0, "%zu split-K counters left non-zero in the workspace%s%s", nz,
              wst == QC_OK ? "" : ": ", wst == QC_OK ? "" : werr);
    }
    qc_gpu_free(c.g, &c.work);
    qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
    CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
    qc_runtime_close(c.rt);
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
