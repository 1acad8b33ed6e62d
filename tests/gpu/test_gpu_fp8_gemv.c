/* test_gpu_fp8_gemv.c - fp8.gemv_mma_* and fp8.gemv1_tma_* on the device: against the C reference for every mode and m = 1..16, then Llama-3-8B decode times beside fp8.gemv_* against the memory floor. */
#define _GNU_SOURCE
#include <math.h>

#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_fp8_codec.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_fp8_gemv"
#define GUARD_WORDS 64
/* Per output |got - ref| <= TOL * S, S = sum over K of |a w| times the scales (per 128-K group for block):
 * the GPU sums in another order (and the FP8 tensor cores may keep a shorter accumulator inside a batch
 * of 64-128 products), the reference in increasing k.  test_gpu_fp8's bound; a wrong fragment, chunk
 * or reduction gives errors of the order of S / sqrt(K), far above it. */
#define TOL 2e-3
#define RELL2_MAX 1e-3
#define ITERS 20
#define COPY_TBS 4.27 /* H200 device-to-device copy bandwidth measured with the anchors (TB/s) */

static const char *const NEW[3] = {"fp8.gemv_mma_channel", "fp8.gemv_mma_tensor", "fp8.gemv_mma_block"};
static const char *const OLD[3] = {"fp8.gemv_channel", "fp8.gemv_tensor", "fp8.gemv_block"};
static const char *const MODE[3] = {"channel", "tensor", "block"};
static const char *const WG[2] = {"fp8.gemv_wg_channel", "fp8.gemv_wg_tensor"}; /* sm_90 only */
static const char *const FT[2] = {"fp8.gemv1_tma_channel", "fp8.gemv1_tma_tensor"}; /* sm_90, m = 1 */

typedef struct kern {
    const qc_kernel_desc *k;
    qc_gpu_fn fn;
} kern;

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    uint64_t rng;
    int sm;
    char *tmp;
    kern knew[3], kold[3], kwg[2], kft[2];
    float lut[256];
} ctx;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int kload(ctx *c, const char *id, kern *out) {
    memset(out, 0, sizeof *out);
    out->k = qc_kernel_find(c->rt, id);
    CHECK(out->k != NULL, "%s is not registered", id);
    if (!out->k) return 0;
    qc_reason why;
    qc_status st = qc_gpu_kernel_load(c->g, c->nv, out->k, &out->fn, &why);
    CHECK(st == QC_OK, "%s: %s: %s", id, why.code, why.text);
    return st == QC_OK;
}

static qc_status launch(ctx *c, const kern *kn, qc_named_arg *a, size_t na, int64_t m, int64_t n, int64_t k, char *err,
                        size_t errlen) {
    void *argv[16];
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)c->sm, .m = m, .n = n, .k = k};
    qc_launch_dims d;
    kn->k->launch_dims(&p, &d);
    qc_status st = qc_kernel_bind(kn->k, a, na, argv, 16, err, errlen);
    if (st == QC_OK) st = qc_gpu_launch_kernel(c->g, kn->k, kn->fn, &d, argv, err, errlen);
    return st;
}

/* random finite E4M3 codes (no 0x7F / 0xFF), both signs, zeros and subnormals included */
static void rand_codes(ctx *c, uint8_t *p, size_t count) {
    for (size_t i = 0; i < count; i++) {
        uint8_t v = (uint8_t)(qc_test_rng(&c->rng) >> 32);
        p[i] = (v & 0x7F) == 0x7F ? (uint8_t)(v - 1) : v;
    }
}
static void rand_scales(ctx *c, float *p, size_t count) {
    for (size_t i = 0; i < count; i++) p[i] = (0.5f + (float)((qc_test_rng(&c->rng) >> 40) / 16777216.0)) * 1e-2f;
}

typedef struct host {
    int64_t m, n, k, kb, nxs, nws;
    uint8_t *xq, *w;
    float *xs, *ws;
} host;

/* S and the double sum for output (i, j) */
static double mag_of(const ctx *c, int mode, const host *h, int64_t i, int64_t j, double *exact) {
    double mag = 0, acc = 0;
    for (int64_t t = 0; t < h->k; t++) {
        double as = mode == 2 ? h->xs[i * h->kb + t / 128] : h->xs[i];
        double w_s = mode == 2 ? h->ws[(j / 128) * h->kb + t / 128] : mode == 1 ? h->ws[0] : h->ws[j];
        double p = (double)c->lut[h->xq[i * h->k + t]] * c->lut[h->w[j * h->k + t]] * as * w_s;
        acc += p;
        mag += fabs(p);
    }
    *exact = acc;
    return mag;
}

/* One (kernel, mode, m, n, k): y poisoned with guard words, every output written once, against the C reference. */
static void case_check_k(ctx *c, const kern *kn, int mode, int64_t m, int64_t n, int64_t k) {
    char err[512], label[160];
    if (!kn->fn) return;
    host h = {.m = m, .n = n, .k = k, .kb = cdiv(k, 128)};
    h.nxs = mode == 2 ? m * h.kb : m;
    h.nws = mode == 2 ? cdiv(n, 128) * h.kb : mode == 1 ? 1 : n;
    h.xq = malloc((size_t)(m * k));
    h.w = malloc((size_t)(n * k));
    h.xs = malloc((size_t)h.nxs * 4);
    h.ws = malloc((size_t)h.nws * 4);
    float *ref = malloc((size_t)(m * n) * 4);
    char *got = malloc((size_t)(m * n) * 4 + GUARD_WORDS * 4);
    rand_codes(c, h.xq, (size_t)(m * k));
    rand_codes(c, h.w, (size_t)(n * k));
    rand_scales(c, h.xs, (size_t)h.nxs);
    rand_scales(c, h.ws, (size_t)h.nws);
    void *pxq = h.xq, *pxs = h.xs, *pw = h.w, *pws = h.ws, *py = ref;
    qc_named_arg ra[] = {{"xq", &pxq}, {"xs", &pxs}, {"w.qweight", &pw}, {"w.scales", &pws}, {"y", &py},
                         {"m", &m},    {"n", &n},    {"k", &k}};
    void *argv[16];
    qc_status st = qc_kernel_bind(kn->k, ra, 8, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(kn->k, argv, err, sizeof err);
    CHECK(st == QC_OK, "%s reference: %s", kn->k->id, err);
    qc_gpu_buf dxq = {0}, dxs = {0}, dw = {0}, dws = {0}, dy = {0};
    const size_t yc = (size_t)(m * n);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, (size_t)(m * k), (size_t)(m * k), QC_MEM_WORKSPACE, "xq", &dxq, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)h.nxs * 4, (size_t)h.nxs * 4, QC_MEM_WORKSPACE, "xs", &dxs, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, (size_t)(n * k), (size_t)(n * k), QC_MEM_WEIGHTS, "w", &dw, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)h.nws * 4, (size_t)h.nws * 4, QC_MEM_SCALES, "ws", &dws, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, yc * 4, yc * 4 + GUARD_WORDS * 4, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dxq.ptr, h.xq, (size_t)(m * k), err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dxs.ptr, h.xs, (size_t)h.nxs * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dw.ptr, h.w, (size_t)(n * k), err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dws.ptr, h.ws, (size_t)h.nws * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dy.ptr, GT_POISON, yc + GUARD_WORDS, err, sizeof err);
    qc_named_arg ga[] = {{"xq", &dxq.ptr}, {"xs", &dxs.ptr}, {"w.qweight", &dw.ptr}, {"w.scales", &dws.ptr},
                         {"y", &dy.ptr},   {"m", &m},        {"n", &n},             {"k", &k}};
    if (st == QC_OK) st = launch(c, kn, ga, 8, m, n, k, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dy.ptr, yc * 4 + GUARD_WORDS * 4, err, sizeof err);
    snprintf(label, sizeof label, "%s m=%lld n=%lld k=%lld", kn->k->id, (long long)m, (long long)n, (long long)k);
    CHECK(st == QC_OK, "%s: %s", label, err);
    if (st == QC_OK) {
        size_t first = 0, past = gt_unwritten(got + yc * 4, GUARD_WORDS * 4, &first);
        size_t left = gt_unwritten(got, yc * 4, &first);
        CHECK(past == GUARD_WORDS && left == 0, "%s: %zu words written past the end, %zu left unwritten (first %zu)",
              label, (size_t)GUARD_WORDS - past, left, first);
        const float *y = (const float *)got;
        double worst = 0, worst_exact = 0, nd = 0, den = 0;
        size_t bad = 0, fi = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double exact, mag = mag_of(c, mode, &h, i, j, &exact), lim = TOL * mag + 1e-30;
                double g = y[i * n + j], e = ref[i * n + j], q = fabs(g - e) / lim, qe = fabs(g - exact) / lim;
                if (!(q <= 1) && bad++ == 0) fi = (size_t)(i * n + j);
                if (q > worst || q != q) worst = q;
                if (qe > worst_exact) worst_exact = qe;
                nd += (g - e) * (g - e);
                den += e * e;
            }
        double rel = den > 0 ? sqrt(nd / den) : sqrt(nd);
        printf("  %-46s worst d/tol %.4f (vs double %.4f), relL2 %.2e\n", label, worst, worst_exact, rel);
        CHECK(bad == 0 && rel <= RELL2_MAX, "%s: %zu outputs out of tolerance (first y[%zu, %zu] = %.9g, ref %.9g), "
              "relL2 %.3g", label, bad, fi / (size_t)n, fi % (size_t)n, y[fi], ref[fi], rel);
    }
    qc_gpu_free(c->g, &dxq), qc_gpu_free(c->g, &dxs), qc_gpu_free(c->g, &dw), qc_gpu_free(c->g, &dws);
    qc_gpu_free(c->g, &dy);
    free(h.xq), free(h.w), free(h.xs), free(h.ws), free(ref), free(got);
}

static void case_check(ctx *c, int mode, int64_t m, int64_t n, int64_t k) {
    case_check_k(c, &c->knew[mode], mode, m, n, k);
    if (mode < 2) case_check_k(c, &c->kwg[mode], mode, m, n, k);
}

/* ---- timings ---- */

typedef struct tbufs {
    qc_gpu_buf xq, xs, w, ws, y, flush;
} tbufs;

/* median time (ms) of ITERS launches, each after an L2 flush (a 256 MiB memset) */
static double time_launch(ctx *c, const kern *kn, qc_named_arg *a, int64_t m, int64_t n, int64_t k, tbufs *b, char *err,
                          size_t errlen) {
    qc_gpu_event e0 = NULL, e1 = NULL;
    float t[ITERS];
    qc_status st = qc_gpu_event_create(c->g, &e0, err, errlen);
    if (st == QC_OK) st = qc_gpu_event_create(c->g, &e1, err, errlen);
    for (int i = 0; st == QC_OK && i < ITERS + 2; i++) {
        st = qc_gpu_memset32(c->g, b->flush.ptr, (uint32_t)i, b->flush.logical / 4, err, errlen);
        if (st == QC_OK) st = qc_gpu_event_record(c->g, e0, err, errlen);
        if (st == QC_OK) st = launch(c, kn, a, 8, m, n, k, err, errlen);
        if (st == QC_OK) st = qc_gpu_event_record(c->g, e1, err, errlen);
        float ms = 0;
        if (st == QC_OK) st = qc_gpu_event_elapsed(c->g, e0, e1, &ms, err, errlen);
        if (i >= 2) t[i - 2] = ms; /* two warm-ups */
    }
    qc_gpu_event_destroy(c->g, e0);
    qc_gpu_event_destroy(c->g, e1);
    if (st != QC_OK) return -1;
    qsort(t, ITERS, sizeof t[0], gt_cmp_float);
    return t[ITERS / 2];
}

/* The four Llama-3-8B linears at m = 1, 4, 16, channel and block: the old GEMV, the new one with the host's
 * plan, and (channel) the new one at every KS, so the plan can be checked against the device. */
static void timings(ctx *c) {
    static const struct {
        const char *name;
        int64_t n, k;
    } shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    static const int64_t ms[] = {1, 4, 16};
    const int64_t w_max = 28672 * 4096, x_max = 16 * 14336, kb_max = 112;
    char err[512];
    tbufs b;
    memset(&b, 0, sizeof b);
    uint8_t *hw = malloc((size_t)w_max), *hx = malloc((size_t)x_max);
    float *hs = malloc((size_t)(224 * kb_max) * 4), *hxs = malloc((size_t)(16 * kb_max) * 4);
    rand_codes(c, hw, (size_t)w_max);
    rand_codes(c, hx, (size_t)x_max);
    rand_scales(c, hs, (size_t)(224 * kb_max)); /* >= 28672 channel scales, or 224 x 112 block scales */
    rand_scales(c, hxs, (size_t)(16 * kb_max));
    qc_status st = qc_gpu_alloc(c->g, (size_t)w_max, (size_t)w_max, QC_MEM_WEIGHTS, "w", &b.w, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, (size_t)x_max, (size_t)x_max, QC_MEM_WORKSPACE, "xq", &b.xq, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)(224 * kb_max) * 4, (size_t)(224 * kb_max) * 4, QC_MEM_SCALES, "ws", &b.ws, err,
                          sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)(16 * kb_max) * 4, (size_t)(16 * kb_max) * 4, QC_MEM_WORKSPACE, "xs", &b.xs, err,
                          sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)(16 * 28672) * 4, (size_t)(16 * 28672) * 4, QC_MEM_ACTIVATIONS, "y", &b.y, err,
                          sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, 256u << 20, 256u << 20, QC_MEM_WORKSPACE, "L2 flush", &b.flush, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, b.w.ptr, hw, (size_t)w_max, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, b.xq.ptr, hx, (size_t)x_max, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, b.ws.ptr, hs, (size_t)(224 * kb_max) * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, b.xs.ptr, hxs, (size_t)(16 * kb_max) * 4, err, sizeof err);
    CHECK(st == QC_OK, "timing buffers: %s", err);
    double bw = 0;
    if (st == QC_OK && qc_gpu_copy_bandwidth(c->g, &bw, NULL, NULL, err, sizeof err) != QC_OK) bw = 0;
    if (!(bw > 0)) bw = COPY_TBS * 1e12;
    printf("%s: medians of %d launches, each after a 256 MiB memset (L2 flushed); copy bandwidth %.2f TB/s; floor = "
           "(weights + weight scales + xq + xs + y f32) / bandwidth; target >= 75%% of the floor\n",
           TEST, ITERS, bw / 1e12);
    qc_named_arg a[] = {{"xq", &b.xq.ptr}, {"xs", &b.xs.ptr}, {"w.qweight", &b.w.ptr}, {"w.scales", &b.ws.ptr},
                        {"y", &b.y.ptr},   {"m", NULL},       {"n", NULL},           {"k", NULL}};
    const char *env0 = getenv("QC_FP8_GEMV_KS");
    char *saved = env0 ? strdup(env0) : NULL;
    for (size_t si = 0; st == QC_OK && si < 4; si++)
        for (size_t mi = 0; st == QC_OK && mi < 3; mi++)
            for (int mode = 0; st == QC_OK && mode < 3; mode += 2) {
                int64_t m = ms[mi], n = shapes[si].n, k = shapes[si].k;
                a[5].value = &m, a[6].value = &n, a[7].value = &k;
                const double kb = (double)cdiv(k, 128);
                const double bytes = (double)n * k + (mode == 2 ? 4.0 * cdiv(n, 128) * kb : 4.0 * n) + (double)m * k +
                                     (mode == 2 ? 4.0 * m * kb : 4.0 * m) + 4.0 * m * n;
                const double floor_us = bytes / bw * 1e6;
                double to = c->kold[mode].fn ? time_launch(c, &c->kold[mode], a, m, n, k, &b, err, sizeof err) * 1e3 : 0;
                double tn = c->knew[mode].fn ? time_launch(c, &c->knew[mode], a, m, n, k, &b, err, sizeof err) * 1e3 : 0;
                CHECK(to >= 0 && tn >= 0, "timing %s m=%lld: %s", shapes[si].name, (long long)m, err);
                if (to < 0 || tn < 0) break;
                qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)c->sm, .m = m, .n = n, .k = k};
                qc_launch_dims d;
                c->knew[mode].k->launch_dims(&p, &d);
                printf("  TIME %-7s %-7s m=%-2lld n=%-5lld k=%-5lld floor %6.2f us | %-16s %7.2f us %3.0f%% | %-20s "
                       "%7.2f us %3.0f%% (KS %u) | new/old %.3fx",
                       shapes[si].name, MODE[mode], (long long)m, (long long)n, (long long)k, floor_us, OLD[mode], to,
                       to > 0 ? 100.0 * floor_us / to : 0.0, NEW[mode], tn, tn > 0 ? 100.0 * floor_us / tn : 0.0,
                       d.block[0] / 32, tn > 0 ? to / tn : 0.0);
                qc_launch_dims dt;
                memset(&dt, 0, sizeof dt);
                if (mode == 0 && c->kft[0].fn) c->kft[0].k->launch_dims(&p, &dt);
                if (dt.grid[0] > 0) {
                    double tt = time_launch(c, &c->kft[0], a, m, n, k, &b, err, sizeof err) * 1e3;
                    printf(" | %s %7.2f us %3.0f%% tma/old %.3fx", FT[0], tt, tt > 0 ? 100.0 * floor_us / tt : 0.0,
                           tt > 0 ? to / tt : 0.0);
                }
                if (mode == 0 && c->kwg[0].fn) {
                    double tw = time_launch(c, &c->kwg[0], a, m, n, k, &b, err, sizeof err) * 1e3;
                    c->kwg[0].k->launch_dims(&p, &d);
                    printf(" | %s %7.2f us %3.0f%% (KS %u) wg/old %.3fx", WG[0], tw, tw > 0 ? 100.0 * floor_us / tw : 0.0,
                           d.block[0] / 32, tw > 0 ? to / tw : 0.0);
                }
                printf("\n");
                if (mode != 0 || !c->knew[0].fn) continue;
                printf("  KS     %-7s %-7s m=%-2lld:", shapes[si].name, MODE[mode], (long long)m);
                for (int ks = 1; ks <= 16; ks *= 2) {
                    char v[8];
                    snprintf(v, sizeof v, "%d", ks);
                    setenv("QC_FP8_GEMV_KS", v, 1);
                    double t = time_launch(c, &c->knew[0], a, m, n, k, &b, err, sizeof err) * 1e3;
                    printf(" KS %2d %6.2f us %3.0f%%", ks, t, t > 0 ? 100.0 * floor_us / t : 0.0);
                }
                printf("\n");
                if (saved)
                    setenv("QC_FP8_GEMV_KS", saved, 1);
                else
                    unsetenv("QC_FP8_GEMV_KS");
            }
    free(saved);
    qc_gpu_free(c->g, &b.w), qc_gpu_free(c->g, &b.xq), qc_gpu_free(c->g, &b.ws), qc_gpu_free(c->g, &b.xs);
    qc_gpu_free(c->g, &b.y), qc_gpu_free(c->g, &b.flush);
    free(hw), free(hx), free(hs), free(hxs);
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    ctx c;
    memset(&c, 0, sizeof c);
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    c.sm = qc_gpu_get_info(c.g)->sm;
    if (c.sm < 89) {
        printf("%s: skip: %s is sm_%d; the e4m3 mma needs sm_89+\n", TEST, qc_gpu_get_info(c.g)->name, c.sm);
        qc_gpu_close(c.g);
        return 0;
    }
    int setup_rc = gt_setup(TEST, c.g, &c.tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    qc_fp8_e4m3_table(c.lut);
    if (c.rt) {
        char err[512];
        qc_status st = qc_runtime_load_plugin(c.rt, QC_TEST_PLUGIN_DIR "/fp8.so", err, sizeof err);
        CHECK(st == QC_OK, "fp8 plugin: %s", err);
        for (int i = 0; st == QC_OK && i < 3; i++) {
            kload(&c, NEW[i], &c.knew[i]);
            kload(&c, OLD[i], &c.kold[i]);
            if (i < 2 && c.sm == 90) kload(&c, WG[i], &c.kwg[i]);
            if (i < 2 && c.sm == 90) kload(&c, FT[i], &c.kft[i]);
        }
        if (st == QC_OK) {
            double t0 = qc_now_seconds();
            /* every m on shapes with ragged 64-K chunks (k % 64 = 16, 32, 48) and ragged 128-K groups, n with
               one and many 16-row tiles and several tiles per 128-row scale block; a Llama shape at m = 1, 8,
               9, 16; long K with every KS */
            static const int64_t shapes[][2] = {{16, 16}, {48, 208}, {272, 400}, {1008, 1040}, {144, 4000}};
            for (int mode = 0; mode < 3; mode++) {
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    for (int64_t m = 1; m <= 16; m++)
                        if (s < 3 || m % 5 == 1 || m == 8 || m == 9 || m == 16) case_check(&c, mode, m, shapes[s][0], shapes[s][1]);
                static const int64_t ml[] = {1, 8, 9, 16};
                for (size_t i = 0; i < 4; i++) case_check(&c, mode, ml[i], 4096, 4096);
                case_check(&c, mode, 3, 128, 14336);
            }
            /* fp8.gemv1_tma_* (m = 1, k % 512 == 0, k <= 6144): one stage a block (n = 16), rings that wrap up
               to 55 stages a block (28672), a short last block, k from one run to the largest that fits */
            static const int64_t ft_shapes[][2] = {{16, 512},    {48, 1024},   {272, 512},   {1008, 1536}, {2064, 3072},
                                                   {16, 6144},   {6144, 4096}, {4096, 4096}, {16384, 6144},
                                                   {28672, 4096}};
            for (int mode = 0; mode < 2; mode++)
                for (size_t s = 0; s < sizeof ft_shapes / sizeof ft_shapes[0]; s++)
                    case_check_k(&c, &c.kft[mode], mode, 1, ft_shapes[s][0], ft_shapes[s][1]);
            /* every KS the override allows (the device reads it from blockDim) */
            const char *env0 = getenv("QC_FP8_GEMV_KS");
            char *saved = env0 ? strdup(env0) : NULL;
            for (int ks = 1; ks <= 16; ks++) {
                char v[8];
                snprintf(v, sizeof v, "%d", ks);
                setenv("QC_FP8_GEMV_KS", v, 1);
                case_check(&c, ks % 3, ks, 272, 1040);
            }
            if (saved)
                setenv("QC_FP8_GEMV_KS", saved, 1);
            else
                unsetenv("QC_FP8_GEMV_KS");
            free(saved);
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            if (!qc_test_failed)
                timings(&c);
            else
                printf("%s: timings skipped after a correctness failure\n", TEST);
        }
        qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
        CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
        qc_runtime_close(c.rt);
    }
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(c.tmp);
    return qc_test_finish(TEST);
}
