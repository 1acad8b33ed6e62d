/* test_w4a16_wgmma_unit.c - w4a16.wgmma_* without a GPU: descriptors, reasons, selection, launch plan, references, sm_90a build and its SASS. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "w4a16_bf16w.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_w4a16_wgmma_unit"
#define SMEM_OPTIN_H200 232448u

static const struct {
    const char *id, *other; /* other: the sm_80 prefill kernel of the same scheme */
    uint32_t scheme;
} KERNELS[] = {
    {"w4a16.wgmma_sym", "w4a16.mma_sym", W4A16_SCHEME_SYM},
    {"w4a16.wgmma_asym", "w4a16.mma_asym", W4A16_SCHEME_ASYM},
};
#define N_KERNELS (sizeof KERNELS / sizeof KERNELS[0])

static qc_problem prob(int64_t m, int64_t n, int64_t k, uint32_t g, uint32_t scheme) {
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = m, .n = n, .k = k, .group_size = g,
                    .phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE, .scheme = scheme};
    return p;
}

static void expect_refused(const qc_kernel_desc *k, const qc_format_desc *f, qc_problem p, const char *code) {
    qc_reason why;
    memset(&why, 0, sizeof why);
    int ok = qc_select_kernel(k, f, &p, 1, &why);
    CHECK(!ok && strcmp(why.code, code) == 0, "%s m=%lld n=%lld k=%lld g%u scheme 0x%x sm %u: '%s' (%s), expected %s",
          k->id, (long long)p.m, (long long)p.n, (long long)p.k, p.group_size, p.scheme, p.sm, ok ? "taken" : why.code,
          why.text, code);
    if (!ok) printf("%s: %s refuses (%s): %s\n", TEST, k->id, why.code, why.text);
}

/* The engine's choice (qc_engine.c linear_choose): among the eligible GPU kernels the narrowest arch range, then
 * the highest m_min, then the narrowest M range. */
static const qc_kernel_desc *engine_pick(qc_runtime *rt, const qc_format_desc *f, qc_problem p) {
    const qc_kernel_desc *best = NULL;
    int64_t best_width = 0;
    for (size_t i = 0;; i++) {
        const qc_kernel_desc *k = qc_kernel_get(rt, i);
        if (!k) break;
        qc_reason why;
        if (strcmp(k->format, f->name) != 0 || !k->cuda_source || !qc_select_kernel(k, f, &p, 1, &why)) continue;
        int64_t width = (k->m_max ? k->m_max : INT64_MAX) - k->m_min;
        int64_t aw = k->arch.max_sm == QC_SM_ANY ? INT64_MAX : (int64_t)k->arch.max_sm - k->arch.min_sm;
        int64_t baw = !best ? 0 : best->arch.max_sm == QC_SM_ANY ? INT64_MAX : (int64_t)best->arch.max_sm - best->arch.min_sm;
        if (!best || aw < baw || (aw == baw && (k->m_min > best->m_min || (k->m_min == best->m_min && width < best_width))))
            best = k, best_width = width;
    }
    return best;
}

/* Registration, ranges, refusals with their codes, the engine's choice per arch and M. */
static void descriptors(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w4a16");
    CHECK(f != NULL, "w4a16 format not loaded from %s", QC_TEST_PLUGIN_DIR);
    if (!f) return;
    for (size_t i = 0; i < N_KERNELS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        CHECK(k != NULL, "%s is not registered", KERNELS[i].id);
        if (!k) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible, "%s lacks a part",
              k->id);
        CHECK(k->m_min == 17 && k->arch.min_sm == 90 && k->arch.max_sm == 90, "%s: m_min %lld arch [%u, %u]", k->id,
              (long long)k->m_min, k->arch.min_sm, k->arch.max_sm);
        CHECK(k->n_tensor_maps == 1 && k->tensor_maps && strcmp(k->tensor_maps[0].param, "x.bf16") == 0 &&
                  k->tensor_maps[0].swizzle_bytes == 128 && k->tensor_maps[0].box_rows == 64 &&
                  k->tensor_maps[0].box_cols == 64,
              "%s tensor map", k->id);
        /* the mma.sync GEMM's parameters, then the workspace of the split-K configurations */
        const qc_kernel_desc *o = qc_kernel_find(rt, KERNELS[i].other);
        CHECK(o && o->n_params + 1 == k->n_params && strcmp(k->params[o->n_params].name, "work") == 0 &&
                  k->params[o->n_params].type == QC_PARAM_PTR,
              "%s should take %s's parameters and \"work\"", k->id, KERNELS[i].other);
        qc_problem pw1 = prob(17, 4096, 4096, 128, KERNELS[i].scheme), pw2 = prob(8192, 28672, 14336, 32, KERNELS[i].scheme);
        CHECK(k->workspace_bytes && k->workspace_bytes(&pw1) == k->workspace_bytes(&pw2) &&
                  k->workspace_bytes(&pw1) >= 1024 + 4ull * 132 * 128 * 64 * 4,
              "%s: workspace %llu bytes", k->id, k->workspace_bytes ? (unsigned long long)k->workspace_bytes(&pw1) : 0ull);
        for (uint32_t j = 0; o && j < k->n_params && j < o->n_params; j++)
            CHECK(strcmp(k->params[j].name, o->params[j].name) == 0 && k->params[j].type == o->params[j].type,
                  "%s param %u", k->id, j);
        uint32_t s = KERNELS[i].scheme;
        qc_reason why;
        for (uint32_t g = 32; g <= 128; g *= 2) {
            qc_problem p = prob(1024, 4096, 4096, g, s);
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s g%u refused: %s: %s", k->id, g, why.code, why.text);
            /* the engine's pick on sm_90 for every prefill M: w4a16.wgmma_bf16_* (registered first, k % 64 == 0,
             * any m from 17 since it splits its last wave); this kernel with QC_W4_BF16=off or k % 64 == 32 */
            static const int64_t ms[] = {17, 64, 100, 1024, 4096};
            char bf[64];
            snprintf(bf, sizeof bf, "w4a16.wgmma_bf16_%s", s == W4A16_SCHEME_SYM ? "sym" : "asym");
            for (int off = 0; off < 3; off++) {
                if (off == 1) setenv("QC_W4_BF16", "off", 1);
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                    if (off == 2 && g != 32) continue; /* k = 4064 takes groups of 32 only */
                    const qc_kernel_desc *sel = engine_pick(rt, f, prob(ms[mi], 4096, off == 2 ? 4064 : 4096, g, s));
                    const char *want = off ? k->id : bf;
                    CHECK(sel && strcmp(sel->id, want) == 0, "sm_90 m=%lld g%u%s: the engine would choose %s, not %s",
                          (long long)ms[mi], g, off == 1 ? " QC_W4_BF16=off" : off == 2 ? " k=4064" : "",
                          sel ? sel->id : "nothing", want);
                }
                unsetenv("QC_W4_BF16");
            }
        }
        /* elsewhere, and for decode M, the other kernels */
        qc_problem p = prob(512, 4096, 4096, 128, s);
        p.sm = 89;
        const qc_kernel_desc *sel = engine_pick(rt, f, p);
        CHECK(sel && strcmp(sel->id, KERNELS[i].other) == 0, "sm_89 chose %s", sel ? sel->id : "nothing");
        p.sm = 100;
        sel = engine_pick(rt, f, p);
        CHECK(sel && strcmp(sel->id, k->id) != 0, "sm_100 chose %s", sel ? sel->id : "nothing");
        sel = engine_pick(rt, f, prob(16, 4096, 4096, 128, s));
        CHECK(sel && strncmp(sel->id, "w4a16.gemv_", 11) == 0, "sm_90 m=16 chose %s", sel ? sel->id : "nothing");
        if (s == W4A16_SCHEME_SYM) {
            p = prob(64, 4096, 4096, 128, 0); /* scheme 0 means sym */
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s scheme 0 refused: %s", k->id, why.text);
        }
        expect_refused(k, f, prob(64, 4096, 4096, 128, W4A16_SCHEME_FMIN), "scheme");
        expect_refused(k, f, prob(64, 4096, 4096, 128, s == W4A16_SCHEME_SYM ? W4A16_SCHEME_ASYM : W4A16_SCHEME_SYM),
                       "scheme");
        expect_refused(k, f, prob(64, 4096, 4096, 128, s | W4A16_SCHEME_PERM), "perm");
        expect_refused(k, f, prob(64, 4096, 4096, 0, s), "group");
        expect_refused(k, f, prob(64, 4096, 4096, 96, s), "group");
        expect_refused(k, f, prob(64, 4096, 4000, 128, s), "group");
        expect_refused(k, f, prob(64, 4096, 4001, 32, s), "align_k");
        expect_refused(k, f, prob(64, 4100, 4096, 128, s), "align_n");
        p = prob(64, 4096, 4096, 128, s);
        p.sm = 89;
        expect_refused(k, f, p, "arch");
        expect_refused(k, f, prob(16, 4096, 4096, 128, s), "m_range");
    }
    /* fmin on sm_90 prefill: w4a16.wgmma_bf16_fmin at every m from 17 where k % 64 == 0, the mma.sync GEMM where
     * it refuses (k % 64 == 32; QC_W4_BF16=off) */
    const qc_kernel_desc *sel = engine_pick(rt, f, prob(512, 4096, 4096, 32, W4A16_SCHEME_FMIN));
    CHECK(sel && strcmp(sel->id, "w4a16.wgmma_bf16_fmin") == 0, "fmin sm_90 m=512 chose %s", sel ? sel->id : "nothing");
    sel = engine_pick(rt, f, prob(17, 4096, 4096, 32, W4A16_SCHEME_FMIN));
    CHECK(sel && strcmp(sel->id, "w4a16.wgmma_bf16_fmin") == 0, "fmin sm_90 m=17 chose %s", sel ? sel->id : "nothing");
    sel = engine_pick(rt, f, prob(100, 4096, 4064, 32, W4A16_SCHEME_FMIN));
    CHECK(sel && strcmp(sel->id, "w4a16.mma_fmin") == 0, "fmin sm_90 k=4064 chose %s", sel ? sel->id : "nothing");
    setenv("QC_W4_BF16", "off", 1);
    sel = engine_pick(rt, f, prob(512, 4096, 4096, 32, W4A16_SCHEME_FMIN));
    CHECK(sel && strcmp(sel->id, "w4a16.mma_fmin") == 0, "fmin QC_W4_BF16=off chose %s", sel ? sel->id : "nothing");
    unsetenv("QC_W4_BF16");
}

/* The launch: grid <= 132 and <= tiles, 384 threads, shared memory within the H200's opt-in limit; split-K
 * (grid.y > 1) only in the K-split configurations, at most 4 ways, grid.x * grid.y <= 132, each split at least
 * 4 groups of 128 k; the Llama-3-8B shapes at M = 64 split as planned (o and down 2 ways, qkv and gate_up not). */
static void plan(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[0].id);
    if (!k) return;
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {8, 128}};
    static const int64_t ms[] = {17, 64, 65, 100, 256, 1024, 4096, 8191};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            qc_problem p = prob(ms[i], shapes[s][0], shapes[s][1], 128, W4A16_SCHEME_SYM);
            qc_launch_dims d;
            k->launch_dims(&p, &d);
            /* the tile count of the configuration the device picks (w4w_cfg) */
            int64_t m = ms[i], n = shapes[s][0], bm = m <= 64 ? 64 : 128;
            int ks = ((m + bm - 1) / bm) * ((n + 127) / 128) < 132 ? 2 : 1;
            int64_t tiles = ((m + bm - 1) / bm) * ((n + 128 / ks - 1) / (128 / ks));
            int64_t kk = shapes[s][1];
            CHECK(d.grid[0] >= 1 && d.grid[0] * d.grid[1] <= 132 && (int64_t)d.grid[0] <= tiles && d.grid[1] >= 1 &&
                      d.grid[1] <= 4 && (d.grid[1] == 1 || (ks == 2 && (kk + 127) / 128 / d.grid[1] >= 4)) &&
                      d.grid[2] == 1 && d.block[0] == 384 && d.shared_bytes <= SMEM_OPTIN_H200 &&
                      d.shared_bytes >= 64 * 1024,
                  "m=%lld n=%lld: grid %u x %u block %u smem %u", (long long)m, (long long)n, d.grid[0], d.grid[1],
                  d.block[0], d.shared_bytes);
            if (m == 64 && s < 4) {
                /* qkv (96 tiles: 3 passes of 4 splits measured slower than 1), o, gate_up (448 tiles), down */
                static const unsigned want[4] = {1, 2, 1, 2};
                CHECK(d.grid[1] == want[s], "m=64 n=%lld k=%lld: %u splits, planned %u", (long long)n,
                      (long long)kk, d.grid[1], want[s]);
            }
            if (s < 4 && (m == 64 || m == 1024 || m == 4096))
                printf("%s: plan m=%-5lld n=%-5lld k=%-5lld: tile %lld W rows x %lld x rows, K split %d, %lld tiles, "
                       "grid %u x %u, %u B shared\n", TEST, (long long)m, (long long)n, (long long)shapes[s][1],
                       (long long)(128 / ks), (long long)bm, ks, (long long)tiles, d.grid[0], d.grid[1], d.shared_bytes);
        }
    qc_problem p = prob(0, 4096, 4096, 128, W4A16_SCHEME_SYM);
    qc_launch_dims d;
    k->launch_dims(&p, &d);
    CHECK(d.grid[0] == 0, "m = 0 should give an empty grid");
}

/* Each buffer of a packed weight as the kernel argument "w.<name>" into a[] (names and ptrs hold what a[] points
 * at); the count. */
static size_t bind_weight(const qc_packed_weight *pw, char (*names)[40], void **ptrs, qc_named_arg *a) {
    for (uint32_t i = 0; i < pw->n_buffers; i++) {
        snprintf(names[i], 40, "w.%s", pw->buffers[i].name);
        ptrs[i] = pw->buffers[i].data;
        a[i] = (qc_named_arg){names[i], &ptrs[i]};
    }
    return pw->n_buffers;
}

/* Each kernel's reference is the plugin's bf16-x reference of its scheme, bit for bit, writing every output. */
static void references(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w4a16");
    if (!f) return;
    static const char *const schemes[] = {"sym", "asym"};
    int64_t m = 19, n = 24, k = 256;
    uint64_t rng = 11;
    float *w = malloc(sizeof(float) * (size_t)(n * k));
    float *y1 = malloc(sizeof(float) * (size_t)(m * n)), *y2 = malloc(sizeof(float) * (size_t)(m * n));
    uint16_t *xb = malloc(2 * (size_t)(m * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.1f;
    for (int64_t i = 0; i < m * k; i++) xb[i] = qc_f32_to_bf16(qc_test_normal(&rng));
    for (size_t s = 0; s < N_KERNELS; s++)
        for (uint32_t g = 32; g <= 128; g *= 2) {
            qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .group_size = g,
                                    .scheme = schemes[s]};
            qc_packed_weight pw;
            memset(&pw, 0, sizeof pw);
            pw.struct_size = sizeof pw;
            qc_reason why;
            if (f->quantize(&req, &pw, &why) != QC_OK) {
                CHECK(0, "quantize %s g%u: %s", schemes[s], g, why.text);
                continue;
            }
            char names[QC_MAX_WEIGHT_BUFFERS][40];
            void *ptrs[QC_MAX_WEIGHT_BUFFERS], *pxb = xb, *py1 = y1, *py2 = y2;
            int64_t g64 = g;
            qc_named_arg a[16];
            size_t na = bind_weight(&pw, names, ptrs, a);
            a[na++] = (qc_named_arg){"x.bf16", &pxb};
            a[na++] = (qc_named_arg){"m", &m};
            a[na++] = (qc_named_arg){"n", &n};
            a[na++] = (qc_named_arg){"k", &k};
            a[na++] = (qc_named_arg){"group_size", &g64};
            void *no_work = NULL; /* the references leave it alone */
            a[na++] = (qc_named_arg){"work", &no_work};
            char err[256];
            void *argv[16];
            gt_poison(y1, (size_t)(m * n) * 4);
            gt_poison(y2, (size_t)(m * n) * 4);
            const qc_kernel_desc *kw = qc_kernel_find(rt, KERNELS[s].id), *km = qc_kernel_find(rt, KERNELS[s].other);
            a[na] = (qc_named_arg){"y", &py1};
            qc_status st = kw ? qc_kernel_bind(kw, a, na + 1, argv, 16, err, sizeof err) : QC_ERR_INVALID;
            if (st == QC_OK) st = qc_kernel_call_reference(kw, argv, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", KERNELS[s].id, err);
            a[na] = (qc_named_arg){"y", &py2};
            st = km ? qc_kernel_bind(km, a, na + 1, argv, 16, err, sizeof err) : QC_ERR_INVALID;
            if (st == QC_OK) st = qc_kernel_call_reference(km, argv, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", KERNELS[s].other, err);
            CHECK(gt_unwritten(y1, (size_t)(m * n) * 4, NULL) == 0, "%s left outputs unwritten", KERNELS[s].id);
            CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0, "%s g%u differs from %s", KERNELS[s].id, g,
                  KERNELS[s].other);
            f->release(&pw);
        }
    free(w), free(y1), free(y2), free(xb);
}

/* w4a16.wgmma_bf16_*'s references against this test's own sum in double over weights rounded as the kernel does:
 * bf16(bf16(s) (q - z)) (sym z = 8, asym) and bf16(bf16(d) (q - 8) + bf16(m + 8 d)) rounded once (fmin), the codes read from
 * pack_version 2; within the f32 summation bound.  They also differ from the exact references (the rounding is
 * there), by at most 2^-8 of sum |x w| (a weight moves by at most half a bf16 step twice). */
static void references_bf16(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w4a16");
    if (!f) return;
    static const char *const schemes[] = {"sym", "asym", "fmin"};
    static const char *const ids[] = {"w4a16.wgmma_bf16_sym", "w4a16.wgmma_bf16_asym", "w4a16.wgmma_bf16_fmin"};
    int64_t m = 5, n = 16, k = 256;
    uint64_t rng = 29;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *y = malloc(sizeof(float) * (size_t)(m * n));
    uint16_t *xb = malloc(2 * (size_t)(m * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.1f + (i % 7 == 0 ? 0.3f : 0.0f);
    for (int64_t i = 0; i < m * k; i++) xb[i] = qc_f32_to_bf16(qc_test_normal(&rng));
    for (int s = 0; s < 3; s++)
        for (uint32_t g = 32; g <= 128; g *= 2) {
            const qc_kernel_desc *kd = qc_kernel_find(rt, ids[s]);
            CHECK(kd != NULL, "%s is not registered", ids[s]);
            qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .group_size = g,
                                    .scheme = schemes[s]};
            qc_packed_weight pw;
            memset(&pw, 0, sizeof pw);
            pw.struct_size = sizeof pw;
            qc_reason why;
            if (!kd || f->quantize(&req, &pw, &why) != QC_OK) {
                CHECK(kd == NULL, "quantize %s g%u: %s", schemes[s], g, why.text);
                continue;
            }
            char names[QC_MAX_WEIGHT_BUFFERS][40];
            void *ptrs[QC_MAX_WEIGHT_BUFFERS], *pxb = xb, *py = y;
            const uint8_t *q8 = NULL, *z8 = NULL;
            const uint16_t *s16 = NULL, *m16 = NULL;
            int64_t g64 = g;
            qc_named_arg a[16];
            size_t na = bind_weight(&pw, names, ptrs, a);
            for (uint32_t i = 0; i < pw.n_buffers; i++) {
                if (!strcmp(pw.buffers[i].name, "qweight")) q8 = pw.buffers[i].data;
                if (!strcmp(pw.buffers[i].name, "zeros")) z8 = pw.buffers[i].data;
                if (!strcmp(pw.buffers[i].name, "scales")) s16 = pw.buffers[i].data;
                if (!strcmp(pw.buffers[i].name, "mins")) m16 = pw.buffers[i].data;
            }
            a[na++] = (qc_named_arg){"x.bf16", &pxb};
            a[na++] = (qc_named_arg){"y", &py};
            a[na++] = (qc_named_arg){"m", &m};
            a[na++] = (qc_named_arg){"n", &n};
            a[na++] = (qc_named_arg){"k", &k};
            a[na++] = (qc_named_arg){"group_size", &g64};
            char err[256];
            void *argv[16];
            gt_poison(y, (size_t)(m * n) * 4);
            qc_status st = qc_kernel_bind(kd, a, na, argv, 16, err, sizeof err);
            if (st == QC_OK) st = qc_kernel_call_reference(kd, argv, err, sizeof err);
            CHECK(st == QC_OK && q8 && s16 && (s != 1 || z8) && (s != 2 || m16), "%s g%u: %s", ids[s], g, err);
            if (st != QC_OK || !q8 || !s16 || (s == 1 && !z8) || (s == 2 && !m16)) {
                f->release(&pw);
                continue;
            }
            int64_t ng = k / g, bad = 0, moved = 0;
            double worst = 0, worst_exact = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double acc = 0, mag = 0, exact = 0;
                    for (int64_t t = 0; t < k; t++) {
                        const int qv = w4t_code(q8, k, j, t);
                        const int64_t gi = j * ng + t / g;
                        const int zq = s == 1 ? (int)z8[gi] : 8;
                        const double sf = qc_f16_to_f32(s16[gi]);
                        const double wv = w4t_bf16_weight(s, qv, s16[gi], zq, s == 2 ? m16[gi] : 0);
                        /* the format's own value: exact for sym / asym, two f32 roundings for fmin */
                        const double we = s == 2 ? (double)((float)(sf * qv) + qc_f16_to_f32(m16[gi])) : sf * (qv - zq);
                        const double xv = qc_bf16_to_f32(xb[i * k + t]);
                        acc += xv * wv;
                        exact += xv * we;
                        mag += fabs(xv * we);
                    }
                    const double got = y[i * n + j], tol = (k + 1) * 0x1p-23 * mag + 1e-30;
                    worst = fmax(worst, fabs(got - acc) / tol);
                    worst_exact = fmax(worst_exact, fabs(got - exact) / (mag + 1e-30));
                    bad += !(fabs(got - acc) <= tol);
                    moved += fabs(got - exact) > tol;
                }
            printf("%s: %s g%u reference: worst |d|/tol %.3f against bf16-rounded weights; against the exact weights "
                   "%.2e of sum |x w|, %lld of %lld outputs beyond the summation bound\n", TEST, ids[s], g, worst,
                   worst_exact, (long long)moved, (long long)(m * n));
            CHECK(bad == 0, "%s g%u: %lld outputs off the bf16-rounded sum", ids[s], g, (long long)bad);
            CHECK(moved > 0 && worst_exact <= 0x1p-8, "%s g%u: rounding not visible (%lld) or too large (%.3g)", ids[s],
                  g, (long long)moved, worst_exact);
            f->release(&pw);
        }
    free(w), free(y), free(xb);
}

/* SASS of a cubin through nvdisasm (when on PATH): counts of HGMMA and of local-memory accesses. */
static int sass_check(const char *tmp, const qc_cubin *c, const char *id) {
    if (system("command -v nvdisasm >/dev/null 2>&1") != 0) {
        printf("%s: %s: nvdisasm is not on PATH, SASS not checked\n", TEST, id);
        return 0;
    }
    char path[1200], cmd[1400], line[512];
    snprintf(path, sizeof path, "%s/%s.sass-input", tmp, c->key); /* not the cache entry <key>.cubin */
    CHECK(nv_write(path, c->data, c->size) == 0, "cannot write %s", path);
    snprintf(cmd, sizeof cmd, "nvdisasm -c '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "cannot run nvdisasm");
    if (!p) return -1;
    size_t hgmma = 0, rs = 0, local = 0, lines = 0;
    char first[200] = "";
    while (fgets(line, sizeof line, p)) {
        lines++;
        const char *h = strstr(line, "HGMMA.");
        if (h) {
            hgmma++;
            if (!first[0]) {
                snprintf(first, sizeof first, "%s", h);
                first[strcspn(first, "\n;")] = 0;
            }
            /* register-A form: the A operand is a register (R..), not a descriptor (gdesc) */
            if (strstr(h, ", R") && strstr(h, "gdesc[UR") != NULL) rs++;
            else if (strstr(h, " R")) rs++;
        }
        if (strstr(line, "LDL") || strstr(line, "STL")) local++;
    }
    int rc = pclose(p);
    CHECK(rc == 0 && lines > 100, "nvdisasm failed (%d) or printed only %zu lines", rc, lines);
    printf("%s: %s SASS: %zu HGMMA (e.g. %s), %zu local-memory accesses, %zu lines\n", TEST, id, hgmma, first, local,
           lines);
    CHECK(hgmma > 0, "%s: no HGMMA in the SASS: the tensor cores are not on the wgmma path", id);
    CHECK(strstr(first, "BF16") != NULL, "%s: HGMMA is not bf16: %s", id, first);
    CHECK(local == 0, "%s: %zu local-memory accesses (spilled registers or a run-time indexed array)", id, local);
    (void)rs;
    return 0;
}

/* Both kernels through NVRTC for sm_90a with ptxas's report (registers, spills, shared memory), then their SASS. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const char *const opts[] = {"--ptxas-options=-v", NULL};
    for (size_t i = 0; i < N_KERNELS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        if (!k) continue;
        qc_cubin c;
        qc_reason why;
        double t0 = qc_now_seconds();
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, 90, 1, &c, &why);
        CHECK(st == QC_OK, "%s for sm_90a: %s: %s", k->id, why.code, why.text);
        if (st != QC_OK) continue;
        printf("%s: %s compiled for %s in %.1f s, cubin %zu bytes\n", TEST, k->id, c.target, qc_now_seconds() - t0,
               c.size);
        char lpath[1200];
        snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
        char *log = nv_slurp(lpath, NULL);
        CHECK(log != NULL, "no NVRTC log at %s", lpath);
        const char *diag = nv_wgmma_diag(log); /* setmaxnreg ignored, wgmma serialized or a wait injected */
        CHECK(!diag, "%s: ptxas %.*s", k->id, diag ? (int)strcspn(diag, "\n") : 0, diag ? diag : "");
        int regs = -1;
        for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
            if (strstr(line, "registers") || strstr(line, "spill") || strstr(line, "warning") || strstr(line, "smem") ||
                strstr(line, "(C75") ||
                strstr(line, "stack frame")) {
                printf("%s: ptxas: %s\n", TEST, line);
                const char *r = strstr(line, "Used ");
                if (r && strstr(line, "registers")) regs = atoi(r + 5);
                const char *sp = strstr(line, "bytes spill stores");
                if (sp) {
                    const char *b = sp;
                    while (b > line && b[-1] == ' ') b--;
                    while (b > line && b[-1] >= '0' && b[-1] <= '9') b--;
                    CHECK(atoi(b) == 0, "register spills: %s", line);
                }
            }
        CHECK(regs > 0, "no register count in the ptxas report");
        free(log);
        sass_check(tmp, &c, k->id);
        qc_cubin_free(&c);
    }
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        descriptors(rt);
        plan(rt);
        references(rt);
        references_bf16(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
