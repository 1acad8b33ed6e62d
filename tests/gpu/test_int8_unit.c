/* test_int8_unit.c - the w8a8_int8 GPU kernels without a GPU: descriptors, selection, references on known answers, NVRTC builds per arch. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "nvrtc/nv_test.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_int8_unit"

static const struct {
    const char *id;
    uint32_t min_sm, max_sm;
    int64_t m_min, m_max;
    uint32_t n_params, n_maps;
} KERNELS[] = {
    {"w8a8_int8.linear_wgmma", 90, 90, 9, (1ll << 31) - 128, 9, 2}, /* the GEMM's 8, then "work" */
    {"w8a8_int8.linear_mma", 80, QC_SM_ANY, 17, 65535ll * 128, 8, 0},
    {"w8a8_int8.gemv", 80, QC_SM_ANY, 1, 8, 8, 0},
    {"w8a8_int8.gemv_wide", 80, QC_SM_ANY, 9, 16, 8, 0},
    {"w8a8_int8.quant_act", 80, QC_SM_ANY, 1, 0, 5, 0},
    {"w8a8_int8.quant_act_smooth", 80, QC_SM_ANY, 1, 0, 6, 0},
};
#define NK (sizeof KERNELS / sizeof KERNELS[0])

static void descriptors(qc_runtime *rt) {
    for (size_t i = 0; i < NK; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        CHECK(k != NULL, "%s is not registered", KERNELS[i].id);
        if (!k) continue;
        CHECK(k->arch.min_sm == KERNELS[i].min_sm && k->arch.max_sm == KERNELS[i].max_sm, "%s: arch %u..%u",
              k->id, k->arch.min_sm, k->arch.max_sm);
        CHECK(k->m_min == KERNELS[i].m_min && k->m_max == KERNELS[i].m_max, "%s: m %lld..%lld", k->id,
              (long long)k->m_min, (long long)k->m_max);
        CHECK(k->n_params == KERNELS[i].n_params && k->n_tensor_maps == KERNELS[i].n_maps, "%s: %u params, %u maps",
              k->id, k->n_params, k->n_tensor_maps);
        CHECK(k->reference && k->cuda_source && k->launch_dims && k->eligible, "%s: a part is missing", k->id);
        if (i < 4) /* the GEMMs: xq, xs, w.qweight, w.scales, y, m, n, k */
            CHECK(strcmp(k->params[0].name, "xq") == 0 && strcmp(k->params[1].name, "xs") == 0 &&
                      strcmp(k->params[2].name, "w.qweight") == 0 && strcmp(k->params[3].name, "w.scales") == 0 &&
                      strcmp(k->params[4].name, "y") == 0,
                  "%s: params", k->id);
    }
    const qc_kernel_desc *w = qc_kernel_find(rt, "w8a8_int8.linear_wgmma");
    if (w && w->tensor_maps)
        CHECK(strcmp(w->tensor_maps[0].param, "xq") == 0 && w->tensor_maps[0].dtype == QC_DT_I8 &&
                  w->tensor_maps[0].box_cols == 128 && w->tensor_maps[0].swizzle_bytes == 128 &&
                  strcmp(w->tensor_maps[1].param, "w.qweight") == 0 && w->tensor_maps[1].box_rows == 64,
              "wgmma tensor maps");
    if (w && w->n_params == 9) /* split-K's workspace: the last parameter, and only the wgmma GEMM has one */
        CHECK(strcmp(w->params[8].name, "work") == 0 && w->params[8].type == QC_PARAM_PTR && w->workspace_bytes,
              "wgmma work param");
    for (size_t i = 1; i < NK; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        CHECK(!k || !k->workspace_bytes, "%s states a workspace", KERNELS[i].id);
    }
}

/* Which kernel each path takes. */
static void selection(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "w8a8_int8");
    CHECK(f != NULL, "no w8a8_int8 format");
    if (!f) return;
    static const struct {
        uint32_t sm;
        int64_t m;
        uint32_t scheme;
        int gpu;
        const char *want;
    } cases[] = {
        {90, 1024, 1, 1, "w8a8_int8.linear_wgmma"}, {90, 17, 2, 1, "w8a8_int8.linear_wgmma"},
        {90, 16, 1, 1, "w8a8_int8.linear_wgmma"},   {90, 9, 2, 1, "w8a8_int8.linear_wgmma"},
        {90, 8, 1, 1, "w8a8_int8.gemv"},            {90, 1, 2, 1, "w8a8_int8.gemv"},
        {80, 4096, 1, 1, "w8a8_int8.linear_mma"},   {89, 17, 2, 1, "w8a8_int8.linear_mma"},
        {89, 16, 1, 1, "w8a8_int8.gemv_wide"},
        {89, 3, 1, 1, "w8a8_int8.gemv"},            {100, 512, 1, 1, "w8a8_int8.linear_mma"},
        {0, 512, 1, 0, "w8a8_int8.linear_ref"},     {0, 512, 2, 0, "w8a8_int8.linear_smooth_ref"},
        {75, 512, 1, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qc_problem p = {.struct_size = sizeof p, .sm = cases[i].sm, .m = cases[i].m, .n = 4096, .k = 4096,
                        .phase = QC_PHASE_PREFILL, .scheme = cases[i].scheme};
        const qc_kernel_desc *k = NULL;
        qc_reason why;
        int ok = qc_select_format(rt, f, &p, cases[i].gpu, &k, &why);
        if (cases[i].want)
            CHECK(ok && k && strcmp(k->id, cases[i].want) == 0, "sm_%u m=%lld scheme %u: %s (%s)", cases[i].sm,
                  (long long)cases[i].m, cases[i].scheme, k ? k->id : "none", why.text);
        else
            CHECK(!ok && strcmp(why.code, "arch") == 0, "sm_%u: expected an arch refusal, got %s", cases[i].sm,
                  why.code);
    }
    /* eligibility reasons of each kernel */
    for (size_t i = 0; i < NK; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        if (!k) continue;
        qc_reason why;
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 4, .n = 4096, .k = 4100, .scheme = i == 4 ? 2 : 1};
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "align_k") == 0, "%s k=4100: %s", k->id, why.code);
        p.k = 4096, p.n = 4100;
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "align_n") == 0, "%s n=4100: %s", k->id, why.code);
        p.n = 4096, p.k = 133152;
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "shape") == 0, "%s k=133152: %s", k->id, why.code);
        p.k = 4096, p.scheme = 3;
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "scheme") == 0, "%s scheme 3: %s", k->id, why.code);
    }
    /* launch geometry: the wgmma plan within the H200's opt-in shared memory, one block per SM at most */
    const qc_kernel_desc *w = qc_kernel_find(rt, "w8a8_int8.linear_wgmma");
    static const int64_t ms[] = {1, 9, 200, 1024, 4096, 8192}, ns[] = {4096, 6144, 28672};
    for (size_t i = 0; w && i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < 3; j++) {
            qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = ms[i], .n = ns[j], .k = 4096};
            qc_launch_dims d;
            w->launch_dims(&p, &d);
            CHECK(d.grid[0] >= 1 && d.grid[0] <= 132 && d.block[0] == 384 && d.shared_bytes <= 232448 - 1024,
                  "wgmma dims m=%lld n=%lld: grid %u, %u B", (long long)ms[i], (long long)ns[j], d.grid[0],
                  d.shared_bytes);
            /* split-K (grid.y): only while the tiles leave SMs idle, within one pass of 132 blocks, at most 4 ways,
               each split at least 24 stages of 128 K; the workspace holds an INT32 slot per block and warpgroup */
            CHECK(d.grid[1] >= 1 && d.grid[1] <= 4 && d.grid[2] == 1 &&
                      (d.grid[1] == 1 || ((uint64_t)d.grid[0] * d.grid[1] <= 132 && p.k / 128 / d.grid[1] >= 24)),
                  "split m=%lld n=%lld: grid %u x %u", (long long)ms[i], (long long)ns[j], d.grid[0], d.grid[1]);
            CHECK(w->workspace_bytes && w->workspace_bytes(&p) >= 2048 + (uint64_t)d.grid[0] * d.grid[1] * 2 * 128 * 128 * 4,
                  "workspace m=%lld n=%lld", (long long)ms[i], (long long)ns[j]);
        }
    /* Llama-3-8B at 16 rows: qkv, o (32 stages of K) and gate_up (112 tiles of 256) whole, down (112 stages) 4 ways;
       from 1024 rows the tiles fill the SMs: never split */
    static const int64_t sh[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    static const unsigned want16[4] = {1, 1, 1, 4};
    for (int s = 0; w && s < 4; s++) {
        qc_launch_dims d;
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 16, .n = sh[s][0], .k = sh[s][1]};
        w->launch_dims(&p, &d);
        CHECK(d.grid[1] == want16[s], "m=16 n=%lld k=%lld: %u splits, planned %u", (long long)sh[s][0],
              (long long)sh[s][1], d.grid[1], want16[s]);
        p.m = 1024;
        w->launch_dims(&p, &d);
        CHECK(d.grid[1] == 1, "m=1024 n=%lld: %u splits", (long long)sh[s][0], d.grid[1]);
    }
}

/* The references on answers known by hand. */
static void references(qc_runtime *rt) {
    char err[256];
    const qc_kernel_desc *q = qc_kernel_find(rt, "w8a8_int8.quant_act");
    const qc_kernel_desc *g = qc_kernel_find(rt, "w8a8_int8.linear_mma");
    if (!q || !g) return;
    /* row 0: max 127 (scale 1), ties 2.5 -> 2 and -3.5 -> -4; row 1: zero (scale 1); row 2: NaN -> codes 0, xs NaN;
       row 3: 254 -> scale 2, 3 / 2 = 1.5 -> 2, 1 / 2 = 0.5 -> 0 */
    const float xv[4][16] = {{127, 2.5f, -3.5f, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -127},
                             {0},
                             {1, NAN, 2},
                             {254, 3, 1, -254}};
    uint16_t x[64];
    for (int i = 0; i < 64; i++) x[i] = qc_f32_to_bf16(xv[i / 16][i % 16]);
    int8_t xq[64];
    float xs[4];
    int64_t m = 4, k = 16, n = 16;
    void *px = x, *pq = xq, *ps = xs;
    qc_named_arg qa[] = {{"x.bf16", &px}, {"xq", &pq}, {"xs", &ps}, {"m", &m}, {"k", &k}};
    void *argv[16];
    qc_status st = qc_kernel_bind(q, qa, 5, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(q, argv, err, sizeof err);
    CHECK(st == QC_OK, "quant reference: %s", err);
    CHECK(xs[0] == 1.0f && xq[0] == 127 && xq[1] == 2 && xq[2] == -4 && xq[3] == 1 && xq[15] == -127,
          "row 0: xs %g codes %d %d %d %d", xs[0], xq[0], xq[1], xq[2], xq[3]);
    CHECK(xs[1] == 1.0f && xq[16] == 0 && xq[31] == 0, "zero row: xs %g", xs[1]);
    CHECK(isnan(xs[2]) && xq[32] == 0 && xq[34] == 0, "NaN row: xs %g code %d", xs[2], xq[34]);
    CHECK(xs[3] == 2.0f && xq[48] == 127 && xq[49] == 2 && xq[50] == 0 && xq[51] == -127, "row 3: xs %g %d %d %d",
          xs[3], xq[48], xq[49], xq[50]);
    /* GEMM: W row o all o - 8 (scale 0.5), so y[r,o] = sum(xq[r]) * (o - 8) * xs[r] * 0.5 */
    int8_t w[16 * 16];
    float sw[16], y[64];
    for (int o = 0; o < 16; o++) {
        sw[o] = 0.5f;
        for (int j = 0; j < 16; j++) w[o * 16 + j] = (int8_t)(o - 8);
    }
    void *pw = w, *psw = sw, *py = y;
    qc_named_arg ga[] = {{"xq", &pq}, {"xs", &ps}, {"w.qweight", &pw}, {"w.scales", &psw},
                         {"y", &py},  {"m", &m},   {"n", &n},          {"k", &k}};
    st = qc_kernel_bind(g, ga, 8, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(g, argv, err, sizeof err);
    CHECK(st == QC_OK, "GEMM reference: %s", err);
    int bad = 0;
    for (int r = 0; r < 4; r++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += xq[r * 16 + j];
        for (int o = 0; o < 16; o++) {
            float want = (float)(s * (o - 8)) * xs[r] * 0.5f;
            bad += !(y[r * 16 + o] == want || (isnan(want) && isnan(y[r * 16 + o])));
        }
    }
    CHECK(bad == 0, "GEMM reference: %d outputs wrong", bad);
}

/* Every kernel through NVRTC for each arch it claims (sm_80, sm_89, sm_90a, sm_100a where claimed and
 * supported by this NVRTC), with ptxas's register and spill report. */
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
    static const int sms[] = {80, 89, 90, 100};
    for (size_t i = 0; i < NK; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        if (!k) continue;
        for (size_t s = 0; s < sizeof sms / sizeof sms[0]; s++) {
            int sm = sms[s];
            if ((uint32_t)sm < k->arch.min_sm || (uint32_t)sm > k->arch.max_sm) continue;
            if (!qc_nvrtc_supports(nv, sm)) {
                printf("%s: %s: this NVRTC has no sm_%d\n", TEST, k->id, sm);
                continue;
            }
            qc_cubin c;
            qc_reason why;
            double t0 = qc_now_seconds();
            /* sm_90 and later as the arch-specific target, as qc_gpu_kernel_load builds them */
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, sm, sm >= 90, &c, &why);
            CHECK(st == QC_OK, "%s for sm_%d: %s: %s", k->id, sm, why.code, why.text);
            if (st != QC_OK) continue;
            int regs, spills;
            char *log = nv_ptxas_report(tmp, &c, NULL, NULL, &regs, &spills);
            const char *diag = nv_wgmma_diag(log); /* setmaxnreg ignored, wgmma serialized or a wait injected */
            CHECK(!diag, "%s sm_%d: ptxas %.*s", k->id, sm, diag ? (int)strcspn(diag, "\n") : 0, diag ? diag : "");
            printf("%s: %-28s %-8s %6zu B cubin, %3d registers, %d B spilled, %.1f s\n", TEST, k->id, c.target,
                   c.size, regs, spills, qc_now_seconds() - t0);
            CHECK(regs > 0, "%s sm_%d: no register count in the ptxas report", k->id, sm);
            CHECK(spills == 0, "%s sm_%d: %d bytes of register spills", k->id, sm, spills);
            free(log);
            qc_cubin_free(&c);
        }
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
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        qc_status st = qc_runtime_load_plugin(rt, QC_TEST_PLUGIN_DIR "/w8a8_int8.so", err, sizeof err);
        CHECK(st == QC_OK, "w8a8_int8 plugin: %s", err);
        if (st == QC_OK) {
            descriptors(rt);
            selection(rt);
            references(rt);
            compiles(rt);
        }
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
