/* test_w4a16_unit.c - the w4a16 GPU kernels without a GPU: descriptors, eligibility reasons, references, NVRTC builds. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_w4a16_unit"

/* id, scheme it takes, M range, arch range */
static const struct {
    const char *id;
    uint32_t scheme;
    int64_t m_min, m_max;
    uint32_t sm_min, sm_max;
} KERNELS[] = {
    {"w4a16.gemv_sym", W4A16_SCHEME_SYM, 1, 16, 80, QC_SM_ANY},
    {"w4a16.gemv_asym", W4A16_SCHEME_ASYM, 1, 16, 80, QC_SM_ANY},
    {"w4a16.gemv_fmin", W4A16_SCHEME_FMIN, 1, 16, 80, QC_SM_ANY},
    {"w4a16.mma_sym", W4A16_SCHEME_SYM, 17, 0, 80, QC_SM_ANY},
    {"w4a16.mma_asym", W4A16_SCHEME_ASYM, 17, 0, 80, QC_SM_ANY},
    {"w4a16.mma_fmin", W4A16_SCHEME_FMIN, 17, 0, 80, QC_SM_ANY},
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
    CHECK(!ok && strcmp(why.code, code) == 0, "%s m=%lld n=%lld k=%lld g%u scheme 0x%x: '%s' (%s), expected %s", k->id,
          (long long)p.m, (long long)p.n, (long long)p.k, p.group_size, p.scheme, ok ? "taken" : why.code, why.text,
          code);
}

/* Registration, ranges, and every refusal with its reason code. */
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
        CHECK(k->m_min == KERNELS[i].m_min && k->m_max == KERNELS[i].m_max && k->arch.min_sm == KERNELS[i].sm_min &&
                  k->arch.max_sm == KERNELS[i].sm_max,
              "%s: M [%lld, %lld] arch [%u, %u]", k->id, (long long)k->m_min, (long long)k->m_max, k->arch.min_sm,
              k->arch.max_sm);
        uint32_t s = KERNELS[i].scheme;
        int64_t m = KERNELS[i].m_min;
        qc_reason why;
        for (uint32_t g = 32; g <= 128; g *= 2) {
            qc_problem p = prob(m, 4096, 4096, g, s);
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s g%u refused: %s: %s", k->id, g, why.code, why.text);
            qc_launch_dims d;
            k->launch_dims(&p, &d);
            CHECK(d.grid[0] && d.grid[1] && d.grid[2] && d.block[0] && d.block[0] % 32 == 0, "%s geometry", k->id);
            p.m = 0;
            k->launch_dims(&p, &d);
            CHECK(d.grid[0] == 0 || d.grid[1] == 0, "%s: m = 0 should give an empty grid", k->id);
        }
        if (s == W4A16_SCHEME_SYM) { /* scheme 0 means sym */
            qc_problem p = prob(m, 4096, 4096, 128, 0);
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s scheme 0 refused: %s", k->id, why.text);
        }
        expect_refused(k, f, prob(m, 4096, 4096, 128, s == W4A16_SCHEME_SYM ? W4A16_SCHEME_FMIN : W4A16_SCHEME_SYM),
                       "scheme");
        expect_refused(k, f, prob(m, 4096, 4096, 128, s | W4A16_SCHEME_PERM), "perm");
        expect_refused(k, f, prob(m, 4096, 4096, 0, s), "group");
        expect_refused(k, f, prob(m, 4096, 4096, 96, s), "group");
        expect_refused(k, f, prob(m, 4096, 4000, 128, s), "group");
        expect_refused(k, f, prob(m, 4096, 4001, 32, s), "align_k");
        expect_refused(k, f, prob(m, 4100, 4096, 128, s), "align_n");
        qc_problem p = prob(m, 4096, 4096, 128, s);
        p.sm = 75;
        expect_refused(k, f, p, "arch");
        if (KERNELS[i].m_max) expect_refused(k, f, prob(KERNELS[i].m_max + 1, 4096, 4096, 128, s), "m_range");
        if (KERNELS[i].m_min > 1) expect_refused(k, f, prob(KERNELS[i].m_min - 1, 4096, 4096, 128, s), "m_range");
    }
    /* the CPU path still selects the C-only reference kernels */
    const qc_kernel_desc *k = NULL;
    qc_reason why;
    qc_problem p = prob(1, 4096, 4096, 128, W4A16_SCHEME_ASYM);
    CHECK(qc_select_format(rt, f, &p, 0, &k, &why) && k && strcmp(k->id, "w4a16.linear_asym") == 0, "CPU: %s",
          k ? k->id : why.text);
    /* and the GPU path these ones */
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "w4a16.gemv_asym") == 0, "GPU m=1: %s",
          k ? k->id : why.text);
    p.m = 512;
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "w4a16.mma_asym") == 0, "GPU m=512: %s",
          k ? k->id : why.text);
    char missing[128];
    qc_format_missing(rt, f, missing, sizeof missing);
    CHECK(strstr(missing, "GPU kernel") == NULL, "w4a16 still lacks: %s", missing);
}

/* Each bf16-x reference equals the plugin's f32-x reference bit for bit
 * (both are w4_linear), and writes every output. */
static void references(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w4a16");
    if (!f) return;
    static const char *const schemes[] = {"sym", "asym", "fmin"};
    static const char *const ids_bx[] = {"w4a16.gemv_sym", "w4a16.gemv_asym", "w4a16.gemv_fmin"};
    static const char *const ids_f[] = {"w4a16.linear_sym", "w4a16.linear_asym", "w4a16.linear_fmin"};
    int64_t m = 3, n = 24, k = 256;
    uint64_t rng = 7;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *x = malloc(sizeof(float) * (size_t)(m * k));
    float *y1 = malloc(sizeof(float) * (size_t)(m * n)), *y2 = malloc(sizeof(float) * (size_t)(m * n));
    uint16_t *xb = malloc(2 * (size_t)(m * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.1f;
    for (int64_t i = 0; i < m * k; i++) {
        xb[i] = qc_f32_to_bf16(qc_test_normal(&rng));
        x[i] = qc_bf16_to_f32(xb[i]);
    }
    for (int s = 0; s < 3; s++)
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
            void *ptrs[QC_MAX_WEIGHT_BUFFERS], *px = x, *pxb = xb, *py1 = y1, *py2 = y2;
            int64_t g64 = g;
            uint32_t g32 = g;
            qc_named_arg a[16];
            size_t na = 0;
            for (uint32_t i = 0; i < pw.n_buffers; i++) {
                snprintf(names[i], sizeof names[i], "w.%s", pw.buffers[i].name);
                ptrs[i] = pw.buffers[i].data;
                a[na++] = (qc_named_arg){names[i], &ptrs[i]};
            }
            a[na++] = (qc_named_arg){"m", &m};
            a[na++] = (qc_named_arg){"n", &n};
            a[na++] = (qc_named_arg){"k", &k};
            size_t base = na;
            char err[256];
            void *argv[16];
            gt_poison(y1, (size_t)(m * n) * 4);
            gt_poison(y2, (size_t)(m * n) * 4);
            a[base] = (qc_named_arg){"x", &px};
            a[base + 1] = (qc_named_arg){"y", &py1};
            a[base + 2] = (qc_named_arg){"group_size", &g32};
            const qc_kernel_desc *kf = qc_kernel_find(rt, ids_f[s]), *kb = qc_kernel_find(rt, ids_bx[s]);
            qc_status st = kf ? qc_kernel_bind(kf, a, base + 3, argv, 16, err, sizeof err) : QC_ERR_INVALID;
            if (st == QC_OK) st = qc_kernel_call_reference(kf, argv, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", ids_f[s], err);
            a[base] = (qc_named_arg){"x.bf16", &pxb};
            a[base + 1] = (qc_named_arg){"y", &py2};
            a[base + 2] = (qc_named_arg){"group_size", &g64};
            st = kb ? qc_kernel_bind(kb, a, base + 3, argv, 16, err, sizeof err) : QC_ERR_INVALID;
            if (st == QC_OK) st = qc_kernel_call_reference(kb, argv, err, sizeof err);
            CHECK(st == QC_OK, "%s: %s", ids_bx[s], err);
            CHECK(gt_unwritten(y2, (size_t)(m * n) * 4, NULL) == 0, "%s left outputs unwritten", ids_bx[s]);
            CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0, "%s g%u differs from %s", ids_bx[s], g, ids_f[s]);
            /* the prefill kernel of the scheme shares the reference */
            char mid[32];
            snprintf(mid, sizeof mid, "w4a16.mma_%s", schemes[s]);
            const qc_kernel_desc *km = qc_kernel_find(rt, mid);
            CHECK(km && km->reference == kb->reference && km->n_params == kb->n_params, "%s reference", mid);
            f->release(&pw);
        }
    free(w), free(x), free(y1), free(y2), free(xb);
}

/* Every kernel through NVRTC for sm_80 and sm_90a, with ptxas's register report. */
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
    size_t built = 0;
    for (size_t i = 0; i < N_KERNELS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        if (!k) continue;
        for (int t = 0; t < 2; t++) {
            int sm = t ? 90 : 80;
            qc_cubin c;
            qc_reason why;
            double t0 = qc_now_seconds();
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, sm, t, &c, &why);
            CHECK(st == QC_OK, "%s for sm_%d%s: %s: %s", k->id, sm, t ? "a" : "", why.code, why.text);
            if (st != QC_OK) continue;
            built++;
            char lpath[1200];
            snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
            char *log = nv_slurp(lpath, NULL);
            int in_entry = 0;
            for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
                if (strstr(line, "Compiling entry function")) in_entry = strstr(line, k->cuda_entry) != NULL;
                if (!in_entry) continue;
                if (strstr(line, "registers") || strstr(line, "spill"))
                    printf("%s: %s %s: %s\n", TEST, k->id, c.target, line);
                const char *sp = strstr(line, "bytes spill stores");
                if (sp) {
                    const char *b = sp;
                    while (b > line && b[-1] == ' ') b--;
                    while (b > line && b[-1] >= '0' && b[-1] <= '9') b--;
                    CHECK(atoi(b) == 0, "%s %s register spills: %s", k->id, c.target, line);
                }
            }
            printf("%s: %s for %s in %.1f s\n", TEST, k->id, c.target, qc_now_seconds() - t0);
            free(log);
            qc_cubin_free(&c);
        }
    }
    printf("%s: compiled %zu w4a16 kernel builds (sm_80, sm_90a)\n", TEST, built);
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
        references(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
