/* test_mxfp4_unit.c - mxfp4 GPU kernels without a GPU: descriptors, selection and refusals, the bf16-x reference, NVRTC builds per arch. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "nvrtc/nv_test.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_mxfp4_unit"

static const char *const IDS[] = {"mxfp4.gemv", "mxfp4.linear_mma", "mxfp4.gemv_sm100"};
#define N_IDS 3

static qc_problem prob(uint32_t sm, int64_t m, int64_t n, int64_t k) {
    qc_problem p = {.struct_size = sizeof p, .sm = sm, .m = m, .n = n, .k = k, .group_size = 32};
    p.phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE;
    return p;
}

static void descriptors(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    CHECK(f != NULL, "format mxfp4 is not registered");
    if (!f) return;
    CHECK(f->supported_arch.min_sm == 80 && f->supported_arch.max_sm == QC_SM_ANY, "supported_arch %u..%u",
          f->supported_arch.min_sm, f->supported_arch.max_sm);
    CHECK(f->native_arch.min_sm == 100 && f->native_arch.max_sm == QC_SM_ANY, "native_arch %u..%u",
          f->native_arch.min_sm, f->native_arch.max_sm);
    static const char *const names[] = {"x.bf16", "w.qweight", "w.scales", "y", "m", "n", "k"};
    static const qc_param_type types[] = {QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_PTR,
                                          QC_PARAM_I64, QC_PARAM_I64, QC_PARAM_I64};
    for (int i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        CHECK(k != NULL, "%s is not registered", IDS[i]);
        if (!k) continue;
        CHECK(strcmp(k->format, "mxfp4") == 0 && k->reference && k->cuda_source && k->cuda_entry && k->launch_dims &&
                  k->eligible,
              "%s: incomplete descriptor", IDS[i]);
        CHECK(k->n_params == 7, "%s: %u params", IDS[i], k->n_params);
        for (uint32_t j = 0; j < k->n_params && j < 7; j++)
            CHECK(strcmp(k->params[j].name, names[j]) == 0 && k->params[j].type == types[j], "%s param %u: %s",
                  IDS[i], j, k->params[j].name);
    }
    const qc_kernel_desc *gv = qc_kernel_find(rt, IDS[0]), *mm = qc_kernel_find(rt, IDS[1]),
                         *b1 = qc_kernel_find(rt, IDS[2]);
    if (!gv || !mm || !b1) return;
    CHECK(gv->m_min == 1 && gv->m_max == 16 && gv->arch.min_sm == 80 && gv->arch.max_sm == QC_SM_ANY, "gemv ranges");
    CHECK(mm->m_min == 17 && mm->m_max >= 65535LL * 128 && mm->arch.min_sm == 80 && mm->arch.max_sm == QC_SM_ANY,
          "linear_mma ranges");
    CHECK(b1->m_min == 1 && b1->m_max == 16 && b1->arch.min_sm == 100 && b1->arch.max_sm == 100, "gemv_sm100 ranges");
    CHECK(gv->reference == mm->reference && gv->reference == b1->reference, "the kernels share one reference");

    /* selection on the H200 (sm_90): the sm_100 build is refused with `arch` */
    qc_reason why;
    qc_problem p = prob(90, 1, 4096, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 1, "gemv refused m=1 on sm_90: %s", why.text);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv_sm100 on sm_90: %s %s",
          why.code, why.text);
    printf("%s: on sm_90 %s is refused: %s: %s\n", TEST, b1->id, why.code, why.text);
    CHECK(qc_select_kernel(mm, f, &p, 1, &why) == 0 && strcmp(why.code, "m_range") == 0, "linear_mma m=1: %s",
          why.code);
    p = prob(90, 17, 4096, 4096);
    CHECK(qc_select_kernel(mm, f, &p, 1, &why) == 1, "linear_mma refused m=17: %s", why.text);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "m_range") == 0, "gemv m=17: %s", why.code);
    p = prob(100, 4, 4096, 4096);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 1, "gemv_sm100 refused on sm_100: %s", why.text);
    p = prob(80, 1, 4096, 4096);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv_sm100 on sm_80");
    p = prob(75, 1, 4096, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv on sm_75");
    /* the format picks the GEMV at m <= 16 and the GEMM above (registration order) */
    const qc_kernel_desc *pick = NULL;
    p = prob(90, 16, 6144, 4096);
    CHECK(qc_select_format(rt, f, &p, 1, &pick, &why) == 1 && pick == gv, "format pick m=16: %s",
          pick ? pick->id : why.text);
    p = prob(90, 4096, 6144, 4096);
    CHECK(qc_select_format(rt, f, &p, 1, &pick, &why) == 1 && pick == mm, "format pick m=4096: %s",
          pick ? pick->id : why.text);
    /* shapes: K off the block and N off 8 are the format's refusals; the kernels' own say align_k too */
    p = prob(90, 1, 4096, 4112);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=4112: %s", why.code);
    CHECK(gv->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "gemv eligible k=4112: %s", why.code);
    CHECK(mm->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "mma eligible k=4112: %s", why.code);
    p = prob(90, 1, 4100, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "align_n") == 0, "n=4100: %s", why.code);
    p = prob(90, 1, 4100, 4096);
    CHECK(gv->eligible(&p, &why) == 1, "gemv itself takes any n: %s", why.text);

    /* launch geometry */
    qc_launch_dims d;
    p = prob(90, 1, 28672, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == 28672 / 16 && d.block[0] == 256 && d.shared_bytes == 65536, "gemv m=1 dims %u %u %u",
          d.grid[0], d.block[0], d.shared_bytes);
    p = prob(90, 16, 4097, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == (4097 + 31) / 32, "gemv m=16 dims %u", d.grid[0]);
    p = prob(90, 1000, 4100, 4096);
    mm->launch_dims(&p, &d);
    CHECK(d.grid[0] == 33 && d.grid[1] == 8 && d.block[0] == 256 && d.shared_bytes == 98304, "mma dims %u %u",
          d.grid[0], d.grid[1]);
}

/* The bf16-x reference equals the f32-x one (mxfp4.linear_ref) on x that is bf16 already, bit for bit. */
static void reference(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *kb = qc_kernel_find(rt, "mxfp4.gemv"), *kf = qc_kernel_find(rt, "mxfp4.linear_ref");
    CHECK(f && kb && kf, "mxfp4 kernels missing");
    if (!f || !kb || !kf) return;
    int64_t m = 3, n = 16, k = 96;
    uint64_t rng = 7;
    float w[16 * 96], x[3 * 96], yb[3 * 16], yf[3 * 16];
    uint16_t xh[3 * 96];
    for (int i = 0; i < 16 * 96; i++) w[i] = qc_test_normal(&rng);
    for (int i = 0; i < 3 * 96; i++) {
        xh[i] = qc_f32_to_bf16(qc_test_normal(&rng));
        x[i] = qc_bf16_to_f32(xh[i]);
    }
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    CHECK(f->quantize(&req, &pw, &why) == QC_OK, "quantize: %s", why.text);
    void *qw = pw.buffers[0].data, *sc = pw.buffers[1].data, *pxh = xh, *px = x, *pyb = yb, *pyf = yf;
    qc_named_arg args[] = {{"x.bf16", &pxh}, {"x", &px},       {"w.qweight", &qw}, {"w.scales", &sc},
                           {"m", &m},        {"n", &n},        {"k", &k},          {"group_size", &k}};
    void *argv[16];
    char err[256];
    qc_named_arg ab[10], af[10];
    memcpy(ab, args, sizeof args);
    memcpy(af, args, sizeof args);
    ab[8] = (qc_named_arg){"y", &pyb};
    af[8] = (qc_named_arg){"y", &pyf};
    int ok = qc_kernel_bind(kb, ab, 9, argv, 16, err, sizeof err) == QC_OK &&
             qc_kernel_call_reference(kb, argv, err, sizeof err) == QC_OK &&
             qc_kernel_bind(kf, af, 9, argv, 16, err, sizeof err) == QC_OK &&
             qc_kernel_call_reference(kf, argv, err, sizeof err) == QC_OK;
    CHECK(ok, "references: %s", err);
    CHECK(memcmp(yb, yf, sizeof yb) == 0, "bf16-x reference differs from mxfp4.linear_ref");
    /* k off the block: NaN everywhere, as the GPU kernels write */
    int64_t k2 = 48;
    void *argv2[16];
    ab[6] = (qc_named_arg){"k", &k2};
    ok = qc_kernel_bind(kb, ab, 9, argv2, 16, err, sizeof err) == QC_OK &&
         qc_kernel_call_reference(kb, argv2, err, sizeof err) == QC_OK;
    CHECK(ok && isnan(yb[0]) && isnan(yb[m * n - 1]), "k=48: reference should write NaN");
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
}

/* Every kernel through NVRTC for its arches (sm_80 and sm_90a for the portable
 * ones, sm_100a for the Blackwell build), with ptxas's resource report. */
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
    static const struct {
        const char *id;
        int sm, specific;
    } builds[] = {{"mxfp4.gemv", 80, 0},        {"mxfp4.gemv", 90, 1},        {"mxfp4.linear_mma", 80, 0},
                  {"mxfp4.linear_mma", 90, 1},  {"mxfp4.gemv_sm100", 100, 1}};
    for (size_t i = 0; i < sizeof builds / sizeof builds[0]; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, builds[i].id);
        if (!k) continue;
        if (builds[i].sm >= 100 && !qc_nvrtc_supports(nv, builds[i].sm)) {
            int ma, mi;
            qc_nvrtc_version(nv, &ma, &mi);
            printf("%s: NVRTC %d.%d has no sm_%d: %s not built here\n", TEST, ma, mi, builds[i].sm, k->id);
            continue;
        }
        qc_cubin c;
        qc_reason why;
        double t0 = qc_now_seconds();
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, builds[i].sm,
                                        builds[i].specific, &c, &why);
        CHECK(st == QC_OK, "%s for %s: %s: %s", k->id, c.target, why.code, why.text);
        if (st == QC_OK) {
            printf("%s: %s compiled for %s in %.1f s, cubin %zu bytes\n", TEST, k->id, c.target,
                   qc_now_seconds() - t0, c.size);
            char lpath[1200];
            snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
            char *log = nv_slurp(lpath, NULL);
            for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
                if (strstr(line, "registers") || strstr(line, "spill") || strstr(line, "stack frame"))
                    printf("%s:   ptxas: %s\n", TEST, line);
            free(log);
        }
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
        reference(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
