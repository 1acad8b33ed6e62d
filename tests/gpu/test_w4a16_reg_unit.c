/* test_w4a16_reg_unit.c - w4a16.gemv_reg_* without a GPU: descriptors, reasons, references, every variant's NVRTC build. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "../../plugins/w4a16/w4a16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"
#include "w4a16_reg_variants.h"

#define TEST "test_w4a16_reg_unit"

static const char *const SCHEMES[] = {"sym", "asym", "fmin"};
/* the registered build may spill a few words (ptxas at 128 registers, sm_90a asym: 8 bytes seen); more is a regression */
#define W4R_SPILL_MAX 64

/* m 1..8 (narrower than w4a16.gemv_*), arch {80, any}, the same parameters and reference as w4a16.gemv_<scheme>. */
static void descriptors(qc_runtime *rt) {
    for (int s = 0; s < 3; s++) {
        char id[48], old[48];
        snprintf(id, sizeof id, "w4a16.gemv_reg_%s", SCHEMES[s]);
        snprintf(old, sizeof old, "w4a16.gemv_%s", SCHEMES[s]);
        const qc_kernel_desc *k = qc_kernel_find(rt, id), *o = qc_kernel_find(rt, old);
        CHECK(k != NULL && o != NULL, "%s or %s is not registered", id, old);
        if (!k || !o) continue;
        CHECK(k->m_min == 1 && k->m_max == 8, "%s: m range %lld..%lld, want 1..8", id, (long long)k->m_min,
              (long long)k->m_max);
        CHECK(k->arch.min_sm == o->arch.min_sm && k->arch.max_sm == o->arch.max_sm, "%s: arch differs from %s", id, old);
        CHECK(k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible && k->reference, "%s: incomplete", id);
        CHECK(k->n_params == o->n_params, "%s: %u params, %s has %u", id, k->n_params, old, o->n_params);
        for (uint32_t i = 0; i < k->n_params && i < o->n_params; i++)
            CHECK(strcmp(k->params[i].name, o->params[i].name) == 0 && k->params[i].type == o->params[i].type,
                  "%s param %u is %s, %s has %s", id, i, k->params[i].name, old, o->params[i].name);
        /* eligibility: its scheme at g 32/64/128; another scheme, act-order, a bad group are refused with a reason */
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 1, .n = 4096, .k = 4096, .group_size = 128,
                        .phase = QC_PHASE_DECODE, .scheme = W4A16_SCHEME_SYM + (uint32_t)s};
        qc_reason why = {0};
        CHECK(k->eligible(&p, &why) == 1, "%s refuses its own problem: %s", id, why.text);
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 4096 / 16 && d.block[0] == 256 && d.shared_bytes == 0, "%s: dims %u x %u, smem %u", id,
              d.grid[0], d.block[0], d.shared_bytes);
        p.scheme = W4A16_SCHEME_SYM + (uint32_t)((s + 1) % 3);
        CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "scheme") == 0, "%s takes another scheme", id);
        p.scheme = (W4A16_SCHEME_SYM + (uint32_t)s) | W4A16_SCHEME_PERM;
        CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "perm") == 0, "%s takes act-order", id);
        p.scheme = W4A16_SCHEME_SYM + (uint32_t)s;
        p.group_size = 16;
        CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "group") == 0, "%s takes g16", id);
        printf("%s: %s: m 1..8, %u params as %s, reasons ok (%s)\n", TEST, id, k->n_params, old, why.text);
    }
}

/* The reference through the descriptor equals w4a16.gemv_<scheme>'s on random data (both the plugin's linear). */
static void references(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w4a16");
    CHECK(f != NULL, "no w4a16 format");
    if (!f) return;
    uint64_t rng = 0x5eed;
    int64_t n = 24, k = 256, m = 3;
    float *w = malloc((size_t)(n * k) * 4), *y1 = malloc((size_t)(m * n) * 4), *y2 = malloc((size_t)(m * n) * 4);
    uint16_t *xb = malloc((size_t)(m * k) * 2);
    for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.1f + 0.01f;
    for (int64_t i = 0; i < m * k; i++) xb[i] = qc_f32_to_bf16(qc_test_normal(&rng));
    for (int s = 0; s < 3; s++) {
        qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .group_size = 64,
                                .scheme = SCHEMES[s]};
        qc_packed_weight pw = {.struct_size = sizeof pw};
        qc_reason why;
        qc_status st = f->quantize(&req, &pw, &why);
        CHECK(st == QC_OK, "quantize %s: %s", SCHEMES[s], why.text);
        if (st != QC_OK) continue;
        char names[QC_MAX_WEIGHT_BUFFERS][40];
        void *ptrs[QC_MAX_WEIGHT_BUFFERS];
        qc_named_arg a[16];
        size_t na = 0;
        for (uint32_t b = 0; b < pw.n_buffers; b++) {
            snprintf(names[b], sizeof names[b], "w.%s", pw.buffers[b].name);
            ptrs[b] = pw.buffers[b].data;
            a[na++] = (qc_named_arg){names[b], &ptrs[b]};
        }
        void *px = xb, *py = y1;
        int64_t g = 64;
        a[na++] = (qc_named_arg){"x.bf16", &px};
        a[na++] = (qc_named_arg){"y", &py};
        a[na++] = (qc_named_arg){"m", &m};
        a[na++] = (qc_named_arg){"n", &n};
        a[na++] = (qc_named_arg){"k", &k};
        a[na++] = (qc_named_arg){"group_size", &g};
        char id[48], old[48], err[256];
        snprintf(id, sizeof id, "w4a16.gemv_reg_%s", SCHEMES[s]);
        snprintf(old, sizeof old, "w4a16.gemv_%s", SCHEMES[s]);
        const qc_kernel_desc *kr = qc_kernel_find(rt, id), *ko = qc_kernel_find(rt, old);
        void *argv[16];
        gt_poison(y1, (size_t)(m * n) * 4);
        gt_poison(y2, (size_t)(m * n) * 4);
        st = kr ? qc_kernel_bind(kr, a, na, argv, 16, err, sizeof err) : QC_ERR_INVALID;
        if (st == QC_OK) st = qc_kernel_call_reference(kr, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", id, st == QC_ERR_INVALID && !kr ? "not registered" : err);
        py = y2;
        st = ko ? qc_kernel_bind(ko, a, na, argv, 16, err, sizeof err) : QC_ERR_INVALID;
        if (st == QC_OK) st = qc_kernel_call_reference(ko, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", old, err);
        CHECK(gt_unwritten(y1, (size_t)(m * n) * 4, NULL) == 0, "%s left outputs unwritten", id);
        CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0, "%s reference differs from %s's", id, old);
        printf("%s: %s reference matches %s's bit for bit (%lldx%lld, m %lld, g64)\n", TEST, id, old, (long long)n,
               (long long)k, (long long)m);
        f->release(&pw);
    }
    free(w), free(y1), free(y2), free(xb);
}

/* Every variant of every scheme for sm_80 and sm_90a, ptxas's registers and spills; variant 0 (the registered
 * defaults) must spill at most W4R_SPILL_MAX bytes. */
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
    /* QC_W4R_QUICK=1: the registered defaults only (sanitizer builds, slow hosts) */
    size_t nvar = getenv("QC_W4R_QUICK") ? 1 : W4R_N_VARIANTS;
    for (size_t v = 0; v < nvar; v++)
        for (int s = 0; s < 3; s++) {
            char id[48];
            snprintf(id, sizeof id, "w4a16.gemv_reg_%s", SCHEMES[s]);
            const qc_kernel_desc *k = qc_kernel_find(rt, id);
            if (!k) continue;
            size_t len = strlen(W4R_VARIANTS[v].defines) + strlen(k->cuda_source) + 1;
            char *src = malloc(len);
            if (!src) continue;
            snprintf(src, len, "%s%s", W4R_VARIANTS[v].defines, k->cuda_source);
            for (int t = 0; t < 2; t++) {
                int sm = t ? 90 : 80;
                qc_cubin c;
                qc_reason why;
                qc_status st = qc_nvrtc_compile(nv, id, src, k->cuda_entry, opts, sm, t, &c, &why);
                CHECK(st == QC_OK, "%s %s for sm_%d%s: %s: %s", id, W4R_VARIANTS[v].name, sm, t ? "a" : "", why.code,
                      why.text);
                if (st != QC_OK) continue;
                built++;
                char lpath[1200];
                snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
                char *log = nv_slurp(lpath, NULL);
                int in_entry = 0;
                char regs[160] = "", spill[160] = "";
                for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
                    if (strstr(line, "Compiling entry function")) in_entry = strstr(line, k->cuda_entry) != NULL;
                    if (!in_entry) continue;
                    while (*line == ' ') line++;
                    if (strstr(line, "registers")) snprintf(regs, sizeof regs, "%s", line);
                    const char *sp = strstr(line, "bytes spill stores");
                    if (sp) {
                        snprintf(spill, sizeof spill, "%s", line);
                        const char *b = sp;
                        while (b > line && b[-1] == ' ') b--;
                        while (b > line && b[-1] >= '0' && b[-1] <= '9') b--;
                        CHECK(v != 0 || atoi(b) <= W4R_SPILL_MAX, "%s (registered defaults) %s spills over %d bytes: %s", id,
                              c.target, W4R_SPILL_MAX, line);
                    }
                }
                printf("%s: %-20s %-7s %-7s %s | %s\n", TEST, id, W4R_VARIANTS[v].name, c.target, regs, spill);
                free(log);
                qc_cubin_free(&c);
            }
            free(src);
        }
    printf("%s: compiled %zu builds (%zu variants x 3 schemes x sm_80, sm_90a)\n", TEST, built, nvar);
    CHECK(built == nvar * 6, "built %zu of %zu", built, nvar * 6);
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
