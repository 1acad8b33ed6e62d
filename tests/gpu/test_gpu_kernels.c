/* test_gpu_kernels.c - every core GPU kernel against its C reference on random data, outputs poisoned first. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_kernels"
/* words after each output, poisoned too, that a kernel must leave alone */
#define GUARD_WORDS 64
/* the linear's C reference is a plain triple loop: above this many
 * multiply-adds only sampled outputs are checked, in double */
#define FULL_REF_MACS 300000000.0

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    uint64_t rng;
} ctx;

/* One named buffer argument.  Inputs: `host` holds the data.  Outputs:
 * the reference writes `host`, the GPU's result lands in `got`. */
typedef struct tbuf {
    const char *name;
    void *host;
    size_t bytes;
    int out;         /* 1: every element written; 2: only some (the rest keeps the poison) */
    void *got;
    void *bound;     /* the value the reference's argument points at */
    qc_gpu_buf dev;
} tbuf;

typedef struct kcase {
    const char *id;
    tbuf *bufs;
    size_t n_bufs;
    const qc_named_arg *scalars;
    size_t n_scalars;
    qc_problem prob;
    int run_reference; /* 0: GPU only (the caller checks samples) */
    int reps;          /* > 0: time that many launches after 3 warm-ups */
    double median_us;
} kcase;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void time_launches(ctx *c, kcase *kc, qc_gpu_fn fn, const qc_launch_dims *d, void **argv) {
    char err[512];
    float ms[200];
    int reps = kc->reps > 200 ? 200 : kc->reps;
    qc_gpu_event a = NULL, b = NULL;
    if (qc_gpu_event_create(c->g, &a, err, sizeof err) || qc_gpu_event_create(c->g, &b, err, sizeof err)) {
        CHECK(0, "%s: events: %s", kc->id, err);
        goto out;
    }
    for (int i = 0; i < 3; i++) qc_gpu_launch(c->g, fn, d, argv, err, sizeof err);
    for (int i = 0; i < reps; i++) {
        int bad = qc_gpu_event_record(c->g, a, err, sizeof err) || qc_gpu_launch(c->g, fn, d, argv, err, sizeof err) ||
                  qc_gpu_event_record(c->g, b, err, sizeof err) ||
                  qc_gpu_event_elapsed(c->g, a, b, &ms[i], err, sizeof err);
        if (bad) {
            CHECK(0, "%s: timing: %s", kc->id, err);
            goto out;
        }
    }
    qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
    kc->median_us = 1000.0 * ms[reps / 2];
out:
    qc_gpu_event_destroy(c->g, a);
    qc_gpu_event_destroy(c->g, b);
}

/* The reference and the GPU version from the same named arguments: host
 * addresses for the one, device addresses for the other.  0 when both ran,
 * every output element was written and nothing past an output was. */
static int run_both(ctx *c, kcase *kc) {
    char err[512];
    const qc_kernel_desc *k = qc_kernel_find(c->rt, kc->id);
    CHECK(k != NULL, "kernel %s is not registered", kc->id);
    if (!k) return -1;
    qc_named_arg args[40];
    void *argv[32];
    size_t na = 0;
    for (size_t i = 0; i < kc->n_bufs; i++) {
        tbuf *b = &kc->bufs[i];
        b->bound = b->host;
        if (b->out) gt_poison(b->host, b->bytes);
        args[na++] = (qc_named_arg){b->name, &b->bound};
    }
    for (size_t i = 0; i < kc->n_scalars; i++) args[na++] = kc->scalars[i];
    /* inputs as they were before the reference ran (in-place kernels change them) */
    void *snap[16] = {0};
    for (size_t i = 0; i < kc->n_bufs && i < 16; i++)
        if (!kc->bufs[i].out && (snap[i] = malloc(kc->bufs[i].bytes ? kc->bufs[i].bytes : 1)))
            memcpy(snap[i], kc->bufs[i].host, kc->bufs[i].bytes);
    if (kc->run_reference) {
        qc_status st = qc_kernel_bind(k, args, na, argv, 32, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", kc->id, err);
        if (st != QC_OK) {
            for (size_t i = 0; i < 16; i++) free(snap[i]);
            return -1;
        }
        for (size_t i = 0; i < kc->n_bufs; i++) {
            size_t first = 0;
            if (kc->bufs[i].out == 1)
                CHECK(gt_unwritten(kc->bufs[i].host, kc->bufs[i].bytes, &first) == 0,
                      "%s reference left %s[%zu] unwritten", kc->id, kc->bufs[i].name, first);
        }
    }

    qc_reason why;
    qc_gpu_fn fn = NULL;
    qc_status st = qc_gpu_kernel_load(c->g, c->nv, k, &fn, &why);
    CHECK(st == QC_OK, "%s: %s: %s", kc->id, why.code, why.text);
    int rc = -1;
    if (st != QC_OK) goto out;
    for (size_t i = 0; i < kc->n_bufs; i++) {
        tbuf *b = &kc->bufs[i];
        size_t words = (b->bytes + 3) / 4 + (b->out ? GUARD_WORDS : 0);
        st = qc_gpu_alloc(c->g, b->bytes, words * 4, b->out ? QC_MEM_ACTIVATIONS : QC_MEM_WORKSPACE, b->name, &b->dev,
                          err, sizeof err);
        if (st == QC_OK)
            st = b->out ? qc_gpu_memset32(c->g, b->dev.ptr, GT_POISON, words, err, sizeof err)
                        : qc_gpu_upload(c->g, b->dev.ptr, snap[i] ? snap[i] : b->host, b->bytes, err, sizeof err);
        CHECK(st == QC_OK, "%s: buffer %s: %s", kc->id, b->name, err);
        if (st != QC_OK) goto out;
        args[i].value = &b->dev.ptr;
    }
    qc_launch_dims d;
    k->launch_dims(&kc->prob, &d);
    st = qc_kernel_bind(k, args, na, argv, 32, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, fn, &d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_sync(c->g, err, sizeof err);
    CHECK(st == QC_OK, "%s launch: %s", kc->id, err);
    if (st != QC_OK) goto out;
    rc = 0;
    for (size_t i = 0; i < kc->n_bufs; i++) {
        tbuf *b = &kc->bufs[i];
        if (!b->out) continue;
        size_t bytes = b->dev.resident;
        char *tmp = malloc(bytes);
        st = tmp ? qc_gpu_download(c->g, tmp, b->dev.ptr, bytes, err, sizeof err) : QC_ERR_NOMEM;
        CHECK(st == QC_OK, "%s: download %s: %s", kc->id, b->name, err);
        if (st == QC_OK) {
            size_t first = 0, past = gt_unwritten(tmp + b->bytes, bytes - b->bytes, &first);
            CHECK(past == GUARD_WORDS, "%s wrote %zu words past the end of %s", kc->id, GUARD_WORDS - past, b->name);
            size_t left = b->out == 1 ? gt_unwritten(tmp, b->bytes, &first) : 0;
            CHECK(left == 0, "%s left %zu elements of %s unwritten (first %zu)", kc->id, left, b->name, first);
            memcpy(b->got, tmp, b->bytes);
            if (past != GUARD_WORDS || left) rc = -1;
        } else {
            rc = -1;
        }
        free(tmp);
    }
    if (kc->reps > 0 && rc == 0) time_launches(c, kc, fn, &d, argv);
out:
    for (size_t i = 0; i < kc->n_bufs; i++) qc_gpu_free(c->g, &kc->bufs[i].dev);
    for (size_t i = 0; i < 16; i++) free(snap[i]);
    return rc;
}

/* |got - ref| <= atol + rtol |ref| everywhere; a NaN in ref needs a NaN. */
static void compare_f32(const char *id, const char *shape, const float *got, const float *ref, size_t n, double atol,
                        double rtol) {
    double worst = 0, max_d = 0, num = 0, den = 0;
    size_t at = 0, bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(ref[i]) || isnan(got[i])) {
            if (!(isnan(ref[i]) && isnan(got[i])) && !bad++) first_bad = i;
            continue;
        }
        double d = fabs((double)got[i] - ref[i]), lim = atol + rtol * fabs((double)ref[i]);
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (d > max_d) max_d = d;
        if (d / lim > worst) {
            worst = d / lim;
            at = i;
        }
        if (d > lim && !bad++) first_bad = i;
    }
    printf("  %-16s %-26s max|d| %.2e  worst d/tol %.3f (at %zu)  relL2 %.2e  tol %.0e+%.0e|ref|\n", id, shape, max_d,
           worst, at, den > 0 ? sqrt(num / den) : 0.0, atol, rtol);
    CHECK(bad == 0, "%s %s: %zu elements out of tolerance, first %zu: gpu %.9g ref %.9g", id, shape, bad, first_bad,
          (double)got[first_bad], (double)ref[first_bad]);
}

static void compare_bits(const char *id, const char *shape, const void *got, const void *ref, size_t bytes) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i + 4 <= bytes; i += 4)
        if (memcmp((const char *)got + i, (const char *)ref + i, 4) != 0 && !bad++) first = i / 4;
    printf("  %-16s %-26s %s\n", id, shape, bad ? "MISMATCH" : "bit-exact");
    CHECK(bad == 0, "%s %s: %zu of %zu elements differ, first %zu", id, shape, bad, bytes / 4, first);
}

static float *alloc_f32(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

static void fill_normal(ctx *c, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = qc_test_normal(&c->rng) * scale;
}

/* ---- cases ---- */

static void case_rmsnorm(ctx *c, int64_t m, int64_t n) {
    size_t cnt = (size_t)(m * n);
    float *x = alloc_f32(cnt), *w = alloc_f32((size_t)n), *ref = alloc_f32(cnt), *got = alloc_f32(cnt);
    fill_normal(c, x, cnt, 1.0f);
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < n; i++) x[r * n + i] *= 0.05f + (float)(r % 7); /* rows of different scale */
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.2f * qc_test_normal(&c->rng);
    float eps = 1e-5f;
    tbuf b[] = {{"x", x, cnt * 4, 0, NULL, NULL, {0}}, {"weight", w, (size_t)n * 4, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}, {"eps", &eps}};
    kcase kc = {"core.rmsnorm", b, 3, s, 3, {.struct_size = sizeof(qc_problem), .m = m, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld", (long long)m, (long long)n);
    if (run_both(c, &kc) == 0) compare_f32(kc.id, shape, got, ref, cnt, 1e-6, 1e-5);
    free(x), free(w), free(ref), free(got);
}

static void case_rope(ctx *c, const char *id, int64_t m, int32_t heads, int32_t hd, double theta, int32_t max_pos) {
    size_t cnt = (size_t)m * (size_t)heads * (size_t)hd;
    int32_t half = hd / 2;
    float *x = alloc_f32(cnt), *ref = alloc_f32(cnt), *got = alloc_f32(cnt), *inv = alloc_f32((size_t)half);
    int32_t *pos = malloc((size_t)m * sizeof *pos);
    fill_normal(c, x, cnt, 1.0f);
    for (int64_t r = 0; r < m; r++) pos[r] = (int32_t)(qc_test_rng(&c->rng) % (uint64_t)max_pos);
    pos[m - 1] = max_pos - 1; /* the largest angle is always there */
    for (int32_t i = 0; i < half; i++) inv[i] = (float)pow(theta, -2.0 * i / hd);
    tbuf b[] = {{"x", x, cnt * 4, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}},
                {"pos", pos, (size_t)m * 4, 0, NULL, NULL, {0}},
                {"inv_freq", inv, (size_t)half * 4, 0, NULL, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"heads", &heads}, {"head_dim", &hd}};
    kcase kc = {id, b, 4, s, 3, {.struct_size = sizeof(qc_problem), .m = m, .n = heads, .k = hd}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld h=%d hd=%d pos<%d", (long long)m, heads, hd, max_pos);
    if (run_both(c, &kc) == 0) compare_f32(id, shape, got, ref, cnt, 2e-6, 4e-6);
    free(x), free(ref), free(got), free(inv), free(pos);
}

/* y may be x: run the kernel in place on the device and compare with the
 * out-of-place reference. */
static void case_rope_in_place(ctx *c, const char *id, int64_t m, int32_t heads, int32_t hd) {
    char err[512];
    size_t cnt = (size_t)m * (size_t)heads * (size_t)hd;
    int32_t half = hd / 2;
    float *x = alloc_f32(cnt), *ref = alloc_f32(cnt), *got = alloc_f32(cnt), *inv = alloc_f32((size_t)half);
    int32_t *pos = malloc((size_t)m * sizeof *pos);
    fill_normal(c, x, cnt, 1.0f);
    for (int64_t r = 0; r < m; r++) pos[r] = (int32_t)r * 97;
    for (int32_t i = 0; i < half; i++) inv[i] = (float)pow(10000.0, -2.0 * i / hd);
    const qc_kernel_desc *k = qc_kernel_find(c->rt, id);
    qc_gpu_fn fn = NULL;
    qc_reason why;
    qc_gpu_buf dx = {0}, dp = {0}, di = {0};
    void *hx = x, *hy = ref, *hp = pos, *hi = inv;
    qc_named_arg args[] = {{"x", &hx}, {"y", &hy}, {"pos", &hp}, {"inv_freq", &hi}, {"m", &m}, {"heads", &heads},
                           {"head_dim", &hd}};
    void *argv[8];
    qc_status st = qc_kernel_bind(k, args, 7, argv, 8, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    if (st == QC_OK && (st = qc_gpu_kernel_load(c->g, c->nv, k, &fn, &why)) != QC_OK)
        snprintf(err, sizeof err, "%s: %s", why.code, why.text);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, cnt * 4, cnt * 4, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)m * 4, (size_t)m * 4, QC_MEM_WORKSPACE, "pos", &dp, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, (size_t)half * 4, (size_t)half * 4, QC_MEM_WORKSPACE, "inv_freq", &di, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dx.ptr, x, cnt * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, dp.ptr, pos, (size_t)m * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_upload(c->g, di.ptr, inv, (size_t)half * 4, err, sizeof err);
    if (st == QC_OK) {
        args[0].value = args[1].value = &dx.ptr;
        args[2].value = &dp.ptr;
        args[3].value = &di.ptr;
        qc_problem p = {.struct_size = sizeof p, .m = m, .n = heads, .k = hd};
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        st = qc_kernel_bind(k, args, 7, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_launch(c->g, fn, &d, argv, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_download(c->g, got, dx.ptr, cnt * 4, err, sizeof err);
    }
    CHECK(st == QC_OK, "%s in place: %s", id, err);
    char shape[64];
    snprintf(shape, sizeof shape, "in place m=%lld h=%d hd=%d", (long long)m, heads, hd);
    if (st == QC_OK) compare_f32(id, shape, got, ref, cnt, 2e-6, 4e-6);
    qc_gpu_free(c->g, &dx);
    qc_gpu_free(c->g, &dp);
    qc_gpu_free(c->g, &di);
    free(x), free(ref), free(got), free(inv), free(pos);
}

static void case_swiglu(ctx *c, int64_t m, int64_t n) {
    size_t cnt = (size_t)(m * n);
    float *gt = alloc_f32(cnt), *up = alloc_f32(cnt), *ref = alloc_f32(cnt), *got = alloc_f32(cnt);
    fill_normal(c, gt, cnt, 3.0f);
    fill_normal(c, up, cnt, 1.0f);
    tbuf b[] = {{"gate", gt, cnt * 4, 0, NULL, NULL, {0}}, {"up", up, cnt * 4, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}};
    kcase kc = {"core.swiglu", b, 3, s, 2, {.struct_size = sizeof(qc_problem), .m = m, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld", (long long)m, (long long)n);
    if (run_both(c, &kc) == 0) compare_f32(kc.id, shape, got, ref, cnt, 1e-7, 1e-6);
    free(gt), free(up), free(ref), free(got);
}

static void case_embed(ctx *c, int64_t m, int64_t n, int64_t vocab) {
    size_t cnt = (size_t)(m * n), tcnt = (size_t)(vocab * n);
    float *table = alloc_f32(tcnt), *ref = alloc_f32(cnt), *got = alloc_f32(cnt);
    int32_t *ids = malloc((size_t)m * sizeof *ids);
    fill_normal(c, table, tcnt, 1.0f);
    for (int64_t r = 0; r < m; r++) ids[r] = (int32_t)(qc_test_rng(&c->rng) % (uint64_t)vocab);
    if (m >= 4) { /* ids outside the table: a NaN row, never a stray read */
        ids[0] = -1;
        ids[1] = (int32_t)vocab;
        ids[2] = INT32_MAX;
        ids[3] = (int32_t)vocab - 1;
    }
    tbuf b[] = {{"table", table, tcnt * 4, 0, NULL, NULL, {0}}, {"ids", ids, (size_t)m * 4, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}, {"vocab", &vocab}};
    kcase kc = {"core.embed", b, 3, s, 3, {.struct_size = sizeof(qc_problem), .m = m, .n = n, .k = vocab}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld vocab=%lld", (long long)m, (long long)n, (long long)vocab);
    if (run_both(c, &kc) == 0) {
        compare_bits(kc.id, shape, got, ref, cnt * 4);
        if (m >= 4) CHECK(gt_bits(got[0]) == 0x7fc00000u && gt_bits(got[n]) == 0x7fc00000u, "bad ids give NaN rows");
    }
    free(table), free(ref), free(got), free(ids);
}

static void case_argmax(ctx *c, int64_t m, int64_t n) {
    size_t cnt = (size_t)(m * n);
    float *x = alloc_f32(cnt);
    int32_t *ref = malloc((size_t)m * 4), *got = malloc((size_t)m * 4);
    fill_normal(c, x, cnt, 4.0f);
    if (m >= 5 && n >= 8) {
        float *r0 = x, *r1 = x + n, *r2 = x + 2 * n, *r3 = x + 3 * n, *r4 = x + 4 * n;
        r0[n - 3] = r0[5] = 1e30f; /* a tie: the lower index */
        for (int64_t i = 0; i < n; i++) r1[i] = NAN, r3[i] = -INFINITY;
        for (int64_t i = 0; i < n; i += 3) r2[i] = NAN; /* NaN never wins */
        r2[n - 1] = 1e30f;
        r4[n - 1] = INFINITY;
    }
    tbuf b[] = {{"x", x, cnt * 4, 0, NULL, NULL, {0}}, {"ids", ref, (size_t)m * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}};
    kcase kc = {"core.argmax", b, 2, s, 2, {.struct_size = sizeof(qc_problem), .m = m, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld", (long long)m, (long long)n);
    if (run_both(c, &kc) == 0) {
        compare_bits(kc.id, shape, got, ref, (size_t)m * 4);
        if (m >= 5 && n >= 8)
            CHECK(got[0] == 5 && got[1] == -1 && got[2] == n - 1 && got[3] == 0 && got[4] == n - 1,
                  "argmax special rows: %d %d %d %d %d", got[0], got[1], got[2], got[3], got[4]);
    }
    free(x), free(ref), free(got);
}

static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* y = bf16(x) W^T.  Tolerance: each output within 1e-5 * sum_t |bf16(x)_t w_t|
 * of the C reference and of a double-precision sum (f32 accumulation in
 * another order; a bound relative to the output itself would fail wherever
 * the sum cancels).  Every output when the C reference (a plain triple loop)
 * is cheap, else 512 sampled outputs against double only. */
static void case_linear(ctx *c, const char *id, int64_t m, int64_t n, int64_t k, int reps) {
    const qc_format_desc *f = qc_format_find(c->rt, "bf16");
    size_t xc = (size_t)(m * k), wc = (size_t)(n * k), yc = (size_t)(m * n);
    float *x = alloc_f32(xc), *xb = alloc_f32(xc), *wf = alloc_f32(wc), *ref = alloc_f32(yc), *got = alloc_f32(yc);
    fill_normal(c, x, xc, 1.0f);
    fill_normal(c, wf, wc, 0.05f);
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
    int full = (double)m * n * k <= FULL_REF_MACS;
    tbuf b[] = {{"x", x, xc * 4, 0, NULL, NULL, {0}}, {"w.weight", (void *)w, wc * 2, 0, NULL, NULL, {0}},
                {"y", ref, yc * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}, {"k", &k}};
    kcase kc = {id, b, 3, s, 3, {.struct_size = sizeof(qc_problem), .m = m, .n = n, .k = k}, full,
                reps, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld k=%lld", (long long)m, (long long)n, (long long)k);
    if (run_both(c, &kc) != 0) goto out;
    size_t samples = full ? yc : 512, bad = 0, first = 0;
    double worst_d = 0, worst_c = 0, nd = 0, nc = 0, den = 0;
    for (size_t s_i = 0; s_i < samples; s_i++) {
        size_t e = full ? s_i : (size_t)(qc_test_rng(&c->rng) % yc);
        int64_t i = (int64_t)e / n, j = (int64_t)e % n;
        double acc = 0, mag = 0;
        for (int64_t t = 0; t < k; t++) {
            double p = (double)xb[i * k + t] * bf16_value(w[j * k + t]);
            acc += p;
            mag += fabs(p);
        }
        double lim = 1e-5 * mag + 1e-30, dd = fabs(got[e] - acc), dc = full ? fabs(got[e] - (double)ref[e]) : 0;
        nd += dd * dd;
        nc += dc * dc;
        den += acc * acc;
        if (dd / lim > worst_d) worst_d = dd / lim;
        if (dc / lim > worst_c) worst_c = dc / lim;
        if ((dd > lim || dc > lim) && !bad++) first = e;
    }
    printf("  %-16s %-26s %zu outputs: worst d/tol vs double %.4f", kc.id, shape, samples, worst_d);
    if (full) printf(", vs C ref %.4f", worst_c);
    printf("; relL2 vs double %.2e", den > 0 ? sqrt(nd / den) : 0.0);
    if (full) printf(", vs C ref %.2e", den > 0 ? sqrt(nc / den) : 0.0);
    if (kc.median_us > 0) {
        double flops = 2.0 * m * n * k, bytes = wc * 2.0 + xc * 4.0 + yc * 4.0;
        printf("; median %.1f us (%.2f TFLOP/s, %.0f GB/s)", kc.median_us, flops / kc.median_us * 1e-6,
               bytes / kc.median_us * 1e-3);
    }
    printf("\n");
    CHECK(bad == 0, "%s %s: %zu outputs out of tolerance, first %zu: gpu %.9g", kc.id, shape, bad, first,
          (double)got[first]);
out:
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
    free(x), free(xb), free(wf), free(ref), free(got);
}


/* ---- the engine's fused kernels (qc_kernels_engine.c) ---- */

static uint16_t *alloc_u16(size_t n) { return malloc((n ? n : 1) * 2); }

/* bf16 outputs within max_ulp of the reference, or within abs_tol of it in value (results of a
 * cancellation, e.g. a rotation's difference of two products near 0, carry the inputs' absolute error) */
static void compare_bf16_abs(const char *id, const char *shape, const uint16_t *got, const uint16_t *ref, size_t n,
                             int max_ulp, double abs_tol) {
    size_t bad = 0, first = 0;
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        /* any NaN matches any NaN: cvt.rn.bf16 gives the canonical 0x7fff */
        if ((got[i] & 0x7fff) > 0x7f80 && (ref[i] & 0x7fff) > 0x7f80) continue;
        int d = abs((int)(int16_t)got[i] - (int)(int16_t)ref[i]);
        if (d > max_ulp && abs_tol > 0 && fabs((double)qc_bf16_to_f32(got[i]) - qc_bf16_to_f32(ref[i])) <= abs_tol)
            continue;
        if (d > worst) worst = d;
        if (d > max_ulp && !bad++) first = i;
    }
    printf("  %-16s %-26s bf16 worst %d ulp (tolerance %d", id, shape, worst, max_ulp);
    if (abs_tol > 0) printf(", or %.0e absolute", abs_tol);
    printf(")\n");
    CHECK(bad == 0, "%s %s: %zu bf16 values off by more than %d ulp, first %zu: gpu %04x ref %04x", id, shape, bad,
          max_ulp, first, got[first], ref[first]);
}
static void compare_bf16(const char *id, const char *shape, const uint16_t *got, const uint16_t *ref, size_t n,
                         int max_ulp) {
    compare_bf16_abs(id, shape, got, ref, n, max_ulp, 0);
}

static void case_embed_bf16(ctx *c, int64_t m, int64_t n, int64_t vocab) {
    size_t cnt = (size_t)(m * n);
    uint16_t *table = alloc_u16((size_t)(vocab * n));
    for (size_t i = 0; i < (size_t)(vocab * n); i++) table[i] = (uint16_t)(0x3c00 + qc_test_rng(&c->rng) % 0x800);
    int32_t *ids = malloc((size_t)m * 4);
    for (int64_t r = 0; r < m; r++) ids[r] = (int32_t)(qc_test_rng(&c->rng) % (uint64_t)vocab);
    if (m > 2) ids[1] = (int32_t)vocab, ids[2] = -1; /* out of range: a row of NaN */
    float *ref = alloc_f32(cnt), *got = alloc_f32(cnt);
    tbuf b[] = {{"table", table, (size_t)(vocab * n) * 2, 0, NULL, NULL, {0}},
                {"ids", ids, (size_t)m * 4, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"m", &m}, {"n", &n}, {"vocab", &vocab}};
    kcase kc = {"core.embed_bf16", b, 3, s, 3, {.struct_size = sizeof(qc_problem), .m = m, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld", (long long)m, (long long)n);
    if (run_both(c, &kc) == 0) compare_bits(kc.id, shape, got, ref, cnt * 4);
    free(table), free(ids), free(ref), free(got);
}

/* with_h: the residual add too; with_idx: a permutation of a subset of rows */
static void case_add_rmsnorm(ctx *c, int64_t rows, int64_t n, int with_h, int64_t m_out) {
    size_t cnt = (size_t)(rows * n), ocnt = (size_t)(m_out * n);
    float *x = alloc_f32(cnt), *h = alloc_f32(cnt), *w = alloc_f32((size_t)n);
    float *ref = alloc_f32(ocnt), *got = alloc_f32(ocnt);
    uint16_t *refb = alloc_u16(ocnt), *gotb = alloc_u16(ocnt);
    fill_normal(c, x, cnt, 3.0f);
    fill_normal(c, h, cnt, 1.0f);
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.2f * qc_test_normal(&c->rng);
    int32_t *idx = malloc((size_t)m_out * 4);
    for (int64_t r = 0; r < m_out; r++) idx[r] = (int32_t)((rows - 1 - r * 3) % rows); /* distinct for m_out*3 <= rows */
    int use_idx = m_out != rows;
    float eps = 1e-6f;
    void *nul = NULL;
    tbuf b[] = {{"x", x, cnt * 4, 0, NULL, NULL, {0}},
                {"weight", w, (size_t)n * 4, 0, NULL, NULL, {0}},
                {"y", ref, ocnt * 4, 1, got, NULL, {0}},
                {"y.bf16", refb, ocnt * 2, 1, gotb, NULL, {0}},
                {"h", h, cnt * 4, 0, NULL, NULL, {0}},
                {"idx", idx, (size_t)m_out * 4, 0, NULL, NULL, {0}}};
    size_t nb = 4;
    qc_named_arg s[] = {{"m", &m_out}, {"n", &n}, {"eps", &eps}, {"h", &nul}, {"idx", &nul}};
    size_t ns = 3;
    if (with_h) b[nb++] = b[4];
    else s[ns++] = s[3];
    if (use_idx) b[nb++] = b[5];
    else s[ns++] = s[4];
    kcase kc = {"core.add_rmsnorm", b, nb, s, ns, {.struct_size = sizeof(qc_problem), .m = m_out, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "rows=%lld n=%lld%s%s", (long long)rows, (long long)n, with_h ? " +h" : "",
             use_idx ? " idx" : "");
    if (run_both(c, &kc) == 0) {
        compare_f32(kc.id, shape, got, ref, ocnt, 1e-6, 1e-5);
        compare_bf16(kc.id, shape, gotb, refb, ocnt, 1);
    }
    free(x), free(h), free(w), free(ref), free(got), free(refb), free(gotb), free(idx);
}

static void case_qkv_rope_kv(ctx *c, int64_t m, int32_t heads, int32_t kvh, int32_t d, int32_t halves, int norms,
                             int bias, int reps) {
    /* a row stride wider than the data; with m and heads odd not a multiple of 4 floats, so that the
       16-byte path is refused for the scalar one (m = 45, 17) */
    int64_t ld = (int64_t)(heads + 2 * kvh) * d + (m % 2 && heads % 2 ? 3 : 8);
    int32_t n_blocks = (int32_t)((m + 15) / 16) + 3;
    size_t cache = (size_t)n_blocks * 16 * (size_t)kvh * (size_t)d;
    float *qkv = alloc_f32((size_t)(m * ld)), *bi = alloc_f32((size_t)ld), *qn = alloc_f32((size_t)d),
          *kn = alloc_f32((size_t)d), *inv = alloc_f32((size_t)d / 2);
    fill_normal(c, qkv, (size_t)(m * ld), 1.0f);
    fill_normal(c, bi, (size_t)ld, 0.3f);
    for (int i = 0; i < d; i++) qn[i] = 1.0f + 0.2f * qc_test_normal(&c->rng), kn[i] = 1.0f + 0.2f * qc_test_normal(&c->rng);
    for (int i = 0; i < d / 2; i++) inv[i] = (float)pow(1e6, -2.0 * i / d);
    int32_t *slots = malloc((size_t)m * 4), *pos = malloc((size_t)m * 4);
    for (int64_t r = 0; r < m; r++) {
        /* shuffled blocks: token r goes to block (r/16 * 7 + 1) % n_blocks, some skipped */
        slots[r] = (int32_t)(((r / 16 * 7 + 1) % n_blocks) * 16 + r % 16);
        if (r % 11 == 5) slots[r] = -1;
        pos[r] = (int32_t)(qc_test_rng(&c->rng) % 40000);
    }
    float *qref = alloc_f32((size_t)m * heads * d), *qgot = alloc_f32((size_t)m * heads * d);
    uint16_t *kref = alloc_u16(cache), *kgot = alloc_u16(cache), *vref = alloc_u16(cache), *vgot = alloc_u16(cache);
    /* the cache is in/out: slots not written must keep their contents, so it
       is an input with known contents compared after the launch */
    float eps = 1e-6f;
    void *nul = NULL;
    tbuf b[] = {{"qkv", qkv, (size_t)(m * ld) * 4, 0, NULL, NULL, {0}},
                {"q", qref, (size_t)m * heads * d * 4, 1, qgot, NULL, {0}},
                {"k_cache", kref, cache * 2, 2, kgot, NULL, {0}}, /* 2: written only at the slots */
                {"v_cache", vref, cache * 2, 2, vgot, NULL, {0}},
                {"slots", slots, (size_t)m * 4, 0, NULL, NULL, {0}},
                {"pos", pos, (size_t)m * 4, 0, NULL, NULL, {0}},
                {"inv_freq", inv, (size_t)d / 2 * 4, 0, NULL, NULL, {0}},
                {"bias", bi, (size_t)ld * 4, 0, NULL, NULL, {0}},
                {"q_norm", qn, (size_t)d * 4, 0, NULL, NULL, {0}},
                {"k_norm", kn, (size_t)d * 4, 0, NULL, NULL, {0}}};
    size_t nb = 7;
    qc_named_arg s[] = {{"ld", &ld}, {"m", &m}, {"heads", &heads}, {"kv_heads", &kvh}, {"head_dim", &d},
                        {"halves", &halves}, {"eps", &eps}, {"bias", &nul}, {"q_norm", &nul}, {"k_norm", &nul}};
    size_t ns = 7;
    if (bias) b[nb++] = b[7];
    else s[ns++] = s[7];
    if (norms) b[nb++] = b[8], b[nb++] = b[9];
    else s[ns++] = s[8], s[ns++] = s[9];
    kcase kc = {"core.qkv_rope_kv", b, nb, s, ns,
                {.struct_size = sizeof(qc_problem), .m = m, .n = heads + kvh, .k = d}, 1, reps, 0};
    char shape[80];
    snprintf(shape, sizeof shape, "m=%lld %d/%d d=%d%s%s%s", (long long)m, heads, kvh, d, halves ? " half" : " pairs",
             norms ? " norm" : "", bias ? " bias" : "");
    if (run_both(c, &kc) == 0) {
        /* skipped slots keep the poison in both: unwritten cache entries are allowed */
        compare_f32(kc.id, shape, qgot, qref, (size_t)m * heads * d, 2e-6, 1e-5);
        compare_bf16_abs(kc.id, shape, kgot, kref, cache, 1, 1e-5); /* the q tolerance's absolute part */
        compare_bf16(kc.id, shape, vgot, vref, cache, 0);
    }
    if (kc.median_us > 0) {
        /* read q, k, v (f32), write q (f32) and k, v (bf16): the floor at the copy bandwidth */
        double bytes = (double)m * d * ((heads + 2.0 * kvh) * 4 + heads * 4.0 + 2.0 * kvh * 2);
        printf("%s: %s %s: median %.1f us (%.0f GB/s)\n", TEST, kc.id, shape, kc.median_us, bytes / kc.median_us * 1e-3);
    }
    free(qkv), free(bi), free(qn), free(kn), free(inv), free(slots), free(pos), free(qref), free(qgot);
    free(kref), free(kgot), free(vref), free(vgot);
}

/* bf: gate / up as bf16 bits (in_bf16 = 1, what a GEMM writing y.bf16 leaves) */
static void case_swiglu_ld(ctx *c, int64_t m, int64_t n, int32_t bf) {
    int64_t ld = 2 * n;
    size_t cnt = (size_t)(m * n);
    float *gu = alloc_f32((size_t)(m * ld)), *ref = alloc_f32(cnt), *got = alloc_f32(cnt);
    uint16_t *refb = alloc_u16(cnt), *gotb = alloc_u16(cnt), *gub = alloc_u16((size_t)(m * ld));
    fill_normal(c, gu, (size_t)(m * ld), 2.0f);
    for (int64_t i = 0; i < m * ld; i++) gub[i] = qc_f32_to_bf16(gu[i]);
    size_t es = bf ? 2 : 4;
    tbuf b[] = {{"gate", bf ? (void *)gub : (void *)gu, (size_t)(m * ld) * es, 0, NULL, NULL, {0}},
                {"up", bf ? (void *)(gub + n) : (void *)(gu + n), (size_t)(m * ld - n) * es, 0, NULL, NULL, {0}},
                {"y", ref, cnt * 4, 1, got, NULL, {0}},
                {"y.bf16", refb, cnt * 2, 1, gotb, NULL, {0}}};
    qc_named_arg s[] = {{"ld", &ld}, {"m", &m}, {"n", &n}, {"in_bf16", &bf}};
    kcase kc = {"core.swiglu_ld", b, 4, s, 4, {.struct_size = sizeof(qc_problem), .m = m, .n = n}, 1, 0, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "m=%lld n=%lld%s", (long long)m, (long long)n, bf ? " bf16 in" : "");
    if (run_both(c, &kc) == 0) {
        compare_f32(kc.id, shape, got, ref, cnt, 1e-7, 1e-6);
        compare_bf16(kc.id, shape, gotb, refb, cnt, 1);
    }
    free(gu), free(ref), free(got), free(refb), free(gotb), free(gub);
}

static void case_cast_fill(ctx *c, int64_t count, int reps) {
    float *x = alloc_f32((size_t)count);
    fill_normal(c, x, (size_t)count, 100.0f);
    x[0] = NAN;
    uint16_t *ref = alloc_u16((size_t)count), *got = alloc_u16((size_t)count);
    tbuf b[] = {{"x", x, (size_t)count * 4, 0, NULL, NULL, {0}}, {"y", ref, (size_t)count * 2, 1, got, NULL, {0}}};
    qc_named_arg s[] = {{"count", &count}};
    kcase kc = {"core.cast_bf16", b, 2, s, 1, {.struct_size = sizeof(qc_problem), .m = count, .n = 1}, 1, reps, 0};
    char shape[64];
    snprintf(shape, sizeof shape, "count=%lld", (long long)count);
    if (run_both(c, &kc) == 0) compare_bf16(kc.id, shape, got, ref, (size_t)count, 0);
    if (kc.median_us > 0) /* 4 bytes read, 2 written an element */
        printf("%s: %s %s: median %.1f us (%.0f GB/s)\n", TEST, kc.id, shape, kc.median_us,
               6.0 * (double)count / kc.median_us * 1e-3);
    uint64_t seed = qc_test_rng(&c->rng);
    float scale = 0.05f;
    tbuf b2[] = {{"w", ref, (size_t)count * 2, 1, got, NULL, {0}}};
    qc_named_arg s2[] = {{"count", &count}, {"seed", &seed}, {"scale", &scale}};
    kcase k2 = {"core.fill_random_bf16", b2, 1, s2, 3, {.struct_size = sizeof(qc_problem), .m = count, .n = 1}, 1, 0, 0};
    if (run_both(c, &k2) == 0) {
        compare_bf16(k2.id, shape, got, ref, (size_t)count, 0);
        size_t zeros = 0;
        double mean = 0;
        for (int64_t i = 0; i < count; i++) zeros += (ref[i] & 0x7fff) == 0, mean += qc_bf16_to_f32(ref[i]);
        printf("  %-16s %-26s zeros %zu, mean %.2e (scale %.2f)\n", k2.id, shape, zeros, mean / (double)count, scale);
        CHECK(zeros < (size_t)count / 1000 + 1, "fill_random_bf16 made %zu zeros of %lld", zeros, (long long)count);
    }
    free(x), free(ref), free(got);
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
        double t0 = qc_now_seconds();
        case_rmsnorm(&c, 1, 4096);
        case_rmsnorm(&c, 37, 576);
        case_rmsnorm(&c, 129, 8192);
        case_rmsnorm(&c, 3, 100);
        for (int v = 0; v < 2; v++) {
            const char *id = v ? "core.rope_half" : "core.rope_pairs";
            case_rope(&c, id, 5, 9, 64, 10000.0, 4096);
            case_rope(&c, id, 64, 32, 128, 500000.0, 131072);
            case_rope(&c, id, 3, 2, 7, 10000.0, 100);
            case_rope_in_place(&c, id, 17, 4, 64);
        }
        case_embed_bf16(&c, 37, 576, 3000);
        case_embed_bf16(&c, 1, 4096, 128256);
        case_add_rmsnorm(&c, 1, 4096, 0, 1);
        case_add_rmsnorm(&c, 37, 576, 1, 37);
        case_add_rmsnorm(&c, 300, 4096, 1, 64);
        case_add_rmsnorm(&c, 5, 100, 1, 5);
        case_qkv_rope_kv(&c, 1, 32, 8, 128, 1, 0, 0, 0);
        case_qkv_rope_kv(&c, 45, 9, 3, 64, 0, 0, 1, 0);
        case_qkv_rope_kv(&c, 70, 16, 8, 128, 1, 1, 0, 0);
        case_qkv_rope_kv(&c, 33, 14, 2, 64, 1, 1, 1, 0);
        /* head sizes of the other mappings: d / 8 = 32 threads a head, d / 8 not a power of two, d % 8 != 0 */
        case_qkv_rope_kv(&c, 19, 6, 2, 256, 0, 1, 1, 0);
        case_qkv_rope_kv(&c, 21, 5, 1, 96, 1, 1, 1, 0);
        case_qkv_rope_kv(&c, 9, 4, 2, 68, 0, 0, 1, 0);
        case_qkv_rope_kv(&c, 17, 7, 7, 16, 0, 1, 0, 0);
        /* a Llama-3-8B prefill (2048 tokens, 32 / 8 heads of 128) and a batch-1 step, timed */
        case_qkv_rope_kv(&c, 2048, 32, 8, 128, 1, 0, 0, 20);
        case_qkv_rope_kv(&c, 1, 32, 8, 128, 1, 0, 0, 20);
        case_swiglu_ld(&c, 1, 14336, 0);
        case_swiglu_ld(&c, 37, 1536, 0);
        case_swiglu_ld(&c, 1, 14336, 1);
        case_swiglu_ld(&c, 37, 1536, 1);
        case_swiglu_ld(&c, 5, 1002, 1); /* n % 4: the scalar loop (an even count: the guard check reads whole words) */
        case_swiglu_ld(&c, 5, 1002, 0);
        case_cast_fill(&c, 100002, 0); /* even: the guard words after a u16 output stay aligned */
        case_cast_fill(&c, 1030, 0);   /* a tail of 2 after the 4-element chunks */
        case_cast_fill(&c, 2048 * 4096, 20); /* the attention output of a 2048-token prefill, timed */
        case_swiglu(&c, 1, 1536);
        case_swiglu(&c, 37, 14336);
        case_swiglu(&c, 3, 1001);
        case_embed(&c, 64, 576, 49152);
        case_embed(&c, 1, 4096, 1000);
        case_argmax(&c, 1, 49152);
        case_argmax(&c, 16, 128256);
        case_argmax(&c, 7, 1000);
        case_argmax(&c, 3, 5);
        const char *mma = "bf16.linear_mma", *tiled = "bf16.linear_tiled";
        case_linear(&c, mma, 1, 576, 576, 0);
        case_linear(&c, mma, 5, 77, 33, 0);
        case_linear(&c, mma, 7, 1000, 1000, 0);
        case_linear(&c, mma, 64, 576, 1536, 0);
        case_linear(&c, mma, 130, 1536, 576, 0);
        case_linear(&c, mma, 1, 4096, 4096, 50);
        case_linear(&c, mma, 16, 4096, 4096, 50);
        case_linear(&c, mma, 512, 4096, 4096, 20);
        case_linear(&c, mma, 4096, 4096, 4096, 10);
        /* the tiled one: ragged m and n (k % 32 == 0, else refused "align_k") */
        case_linear(&c, tiled, 64, 576, 1536, 0);
        case_linear(&c, tiled, 130, 1536, 576, 0);
        case_linear(&c, tiled, 77, 1000, 96, 0);
        case_linear(&c, tiled, 200, 333, 160, 0);
        case_linear(&c, tiled, 129, 129, 32, 0);
        case_linear(&c, tiled, 300, 77, 4096, 0);
        case_linear(&c, tiled, 1000, 1001, 1024, 0);
        {
            const qc_kernel_desc *tk = qc_kernel_find(c.rt, tiled);
            qc_problem p = {.struct_size = sizeof p, .m = 512, .n = 4096, .k = 4100};
            qc_reason why;
            CHECK(tk && tk->eligible && !tk->eligible(&p, &why) && strcmp(why.code, "align_k") == 0,
                  "tiled: k = 4100 not refused with align_k");
        }
        /* Llama-3-8B shapes (n x k) at prefill m, timed */
        static const int64_t llama[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
        static const int64_t ms[] = {512, 1024, 4096};
        for (size_t si = 0; si < 4; si++)
            for (size_t mi = 0; mi < 3; mi++) case_linear(&c, tiled, ms[mi], llama[si][0], llama[si][1], 20);
        printf("%s: cases took %.1f s\n", TEST, qc_now_seconds() - t0);
        unsigned compiles = 0, hits = 0;
        qc_nvrtc_stats(c.nv, &compiles, &hits, NULL);
        printf("%s: NVRTC compiles %u, cache hits %u\n", TEST, compiles, hits);
        qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
        CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
        qc_runtime_close(c.rt);
    }
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
