/* test_fuse_unit.c - fused activation quantization without a GPU: recipe matching, references against the plugins' quantizers, NVRTC builds. */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_kernels_engine.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_fuse_unit"

static const char *const FUSE_IDS[] = {"core.add_rmsnorm", "core.add_rmsnorm_quant", "core.swiglu_ld",
                                       "core.swiglu_quant", "core.cast_quant"};
#define N_FUSE (sizeof FUSE_IDS / sizeof FUSE_IDS[0])

/* Recipe names and the decision on hand-made descriptors (no plugin needed). */
static void decide_synthetic(void) {
    CHECK(qc_fuse_recipe("e4m3.token") == QC_FUSE_E4M3_TOKEN, "e4m3.token");
    CHECK(qc_fuse_recipe("e4m3.group128") == QC_FUSE_E4M3_G128, "e4m3.group128");
    CHECK(qc_fuse_recipe("int8.token") == QC_FUSE_INT8_TOKEN, "int8.token");
    CHECK(qc_fuse_recipe(NULL) == QC_FUSE_NONE && qc_fuse_recipe("") == QC_FUSE_NONE &&
              qc_fuse_recipe("e4m3.Token") == QC_FUSE_NONE && qc_fuse_recipe("int8.token.smooth") == QC_FUSE_NONE,
          "unknown names");
    static const qc_kernel_param plain[] = {
        {"x.bf16", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"k", QC_PARAM_I64}};
    static const qc_kernel_param extra[] = {{"x.bf16", QC_PARAM_PTR}, {"w.act_scale", QC_PARAM_PTR},
                                            {"xq", QC_PARAM_PTR},     {"xs", QC_PARAM_PTR},
                                            {"m", QC_PARAM_I64},      {"k", QC_PARAM_I64}};
    qc_kernel_desc q = {.struct_size = sizeof q, .id = "t.quant", .n_params = 5, .params = plain,
                        .act_recipe = "e4m3.token"};
    qc_reason why;
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_E4M3_TOKEN && why.code[0] == 0, "e4m3 token: %s", why.text);
    CHECK(qc_fuse_decide(&q, 89, 14336, &why) == QC_FUSE_E4M3_TOKEN, "sm_89, k = 14336: %s", why.text);
    CHECK(qc_fuse_decide(&q, 80, 4096, &why) == QC_FUSE_NONE && strcmp(why.code, "arch") == 0, "sm_80: %s", why.code);
    CHECK(qc_fuse_decide(&q, 90, 4104, &why) == QC_FUSE_NONE && strcmp(why.code, "shape") == 0, "k 4104: %s", why.code);
    CHECK(qc_fuse_decide(&q, 90, 4100, &why) == QC_FUSE_NONE && strcmp(why.code, "shape") == 0, "k 4100");
    CHECK(qc_fuse_decide(&q, 90, QC_FUSE_N_MAX, &why) == QC_FUSE_E4M3_TOKEN, "k at the limit: %s", why.text);
    CHECK(qc_fuse_decide(&q, 90, QC_FUSE_N_MAX + 16, &why) == QC_FUSE_NONE && strcmp(why.code, "shape") == 0,
          "k past the limit");
    printf("%s: refused: %s\n", TEST, why.text);
    q.act_recipe = "int8.token";
    CHECK(qc_fuse_decide(&q, 80, 4096, &why) == QC_FUSE_INT8_TOKEN, "int8 on sm_80: %s", why.text);
    q.act_recipe = "e4m3.group128";
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_E4M3_G128, "group128: %s", why.text);
    q.act_recipe = "fp4.token";
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_NONE && strcmp(why.code, "recipe") == 0 &&
              strstr(why.text, "fp4.token"),
          "unknown recipe: %s %s", why.code, why.text);
    q.act_recipe = NULL;
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_NONE && strcmp(why.code, "recipe") == 0, "no recipe");
    /* an older plugin's descriptor ends before act_recipe: never read */
    q.act_recipe = "e4m3.token";
    q.struct_size = (uint32_t)offsetof(qc_kernel_desc, act_recipe);
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_NONE && strcmp(why.code, "recipe") == 0, "old descriptor");
    q.struct_size = sizeof q;
    q.params = extra, q.n_params = 6;
    CHECK(qc_fuse_decide(&q, 90, 4096, &why) == QC_FUSE_NONE && strcmp(why.code, "params") == 0 &&
              strstr(why.text, "w.act_scale"),
          "extra input: %s %s", why.code, why.text);
    printf("%s: refused: %s\n", TEST, why.text);
    CHECK(qc_fuse_decide(NULL, 90, 4096, &why) == QC_FUSE_NONE && why.code[0], "no quantizer");
}

/* The plugins' registered quantizers: which ones state a recipe the core fuses. */
static void decide_plugins(qc_runtime *rt) {
    static const struct {
        const char *id;
        int recipe;
        const char *code;
    } want[] = {
        {"fp8.quant_act_token", QC_FUSE_E4M3_TOKEN, ""},  {"fp8.quant_act_group", QC_FUSE_E4M3_G128, ""},
        {"fp8.quant_act_static", QC_FUSE_NONE, "recipe"}, {"w8a8_int8.quant_act", QC_FUSE_INT8_TOKEN, ""},
        {"w8a8_int8.quant_act_smooth", QC_FUSE_NONE, "recipe"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, want[i].id);
        CHECK(k != NULL, "%s is not registered (plugins from %s)", want[i].id, QC_TEST_PLUGIN_DIR);
        if (!k) continue;
        qc_reason why;
        int r = qc_fuse_decide(k, 90, 4096, &why);
        printf("%s: %-28s recipe %-14s -> %s%s%s\n", TEST, k->id, k->act_recipe ? k->act_recipe : "(none)",
               r ? "fused" : "standalone", r ? "" : ": ", r ? "" : why.text);
        CHECK(r == want[i].recipe && strcmp(why.code, want[i].code) == 0, "%s: recipe %d (%s), want %d", k->id, r,
              why.code, want[i].recipe);
    }
}

static void call_ref(qc_runtime *rt, const char *id, qc_named_arg *args, size_t n) {
    char err[256];
    void *argv[32];
    const qc_kernel_desc *k = qc_kernel_find(rt, id);
    qc_status st = k ? qc_kernel_bind(k, args, n, argv, 32, err, sizeof err) : QC_ERR_INVALID;
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", id, k ? err : "not registered");
}

static const char *quant_of(int recipe) {
    return recipe == QC_FUSE_E4M3_TOKEN ? "fp8.quant_act_token"
           : recipe == QC_FUSE_E4M3_G128 ? "fp8.quant_act_group"
                                         : "w8a8_int8.quant_act";
}

/* SwiGLU's references with gate / up as bf16 bits (in_bf16 = 1) give, bit for bit, what they give from the same
 * values as f32 (in_bf16 = 0): codes, scales, y and y.bf16.  Returns the number of differing elements. */
static size_t swiglu_bf16_in_same(qc_runtime *rt, const float *gu, int64_t ld, int64_t m, int64_t n, int32_t rc) {
    size_t cnt = (size_t)(m * n), ns = (size_t)(m * ((n + 127) / 128)), bad = 0;
    float *gr = malloc((size_t)(m * ld) * 4), *y[2] = {malloc(cnt * 4), malloc(cnt * 4)};
    float *xs[2] = {malloc(ns * 4), malloc(ns * 4)};
    uint16_t *gb = malloc((size_t)(m * ld) * 2), *yb[2] = {malloc(cnt * 2), malloc(cnt * 2)};
    uint8_t *xq[2] = {malloc(cnt), malloc(cnt)};
    for (int64_t i = 0; i < m * ld; i++) gb[i] = qc_f32_to_bf16(gu[i]), gr[i] = qc_bf16_to_f32(gb[i]);
    for (int32_t bf = 0; bf < 2; bf++) {
        void *pg = bf ? (void *)gb : (void *)gr, *pu = bf ? (void *)(gb + n) : (void *)(gr + n), *py = y[bf],
             *pyb = yb[bf], *pxq = xq[bf], *pxs = xs[bf];
        memset(xs[bf], 0, ns * 4);
        qc_named_arg a[] = {{"gate", &pg}, {"up", &pu},      {"ld", &ld}, {"xq", &pxq}, {"xs", &pxs},   {"y", &py},
                            {"y.bf16", &pyb}, {"m", &m},     {"n", &n},   {"recipe", &rc}, {"in_bf16", &bf}};
        call_ref(rt, "core.swiglu_quant", a, 11);
    }
    for (size_t i = 0; i < cnt; i++)
        bad += (gt_bits(y[0][i]) != gt_bits(y[1][i]) && !(isnan(y[0][i]) && isnan(y[1][i]))) || yb[0][i] != yb[1][i] ||
               xq[0][i] != xq[1][i];
    for (size_t i = 0; i < ns; i++) bad += gt_bits(xs[0][i]) != gt_bits(xs[1][i]) && !(isnan(xs[0][i]) && isnan(xs[1][i]));
    free(gr), free(gb);
    for (int i = 0; i < 2; i++) free(y[i]), free(xs[i]), free(yb[i]), free(xq[i]);
    return bad;
}

/* The core's fused references give, bit for bit, what the plugin's own
 * quantizer reference gives from the same bf16 values (y.bf16 of the fused
 * call), and the same y / y.bf16 as the plain kernels. */
static void refs_match_plugins(qc_runtime *rt, uint64_t *rng) {
    static const int64_t shapes[][2] = {{3, 256}, {2, 4096}, {2, 336}, {1, 14336}};
    for (int recipe = QC_FUSE_E4M3_TOKEN; recipe <= QC_FUSE_INT8_TOKEN; recipe++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int op = 0; op < 3; op++) {
                int64_t m = shapes[si][0], n = shapes[si][1], ld = 2 * n, ng = (n + 127) / 128;
                size_t cnt = (size_t)(m * n);
                float *x = malloc(cnt * 4), *x2 = malloc(cnt * 4), *h = malloc(cnt * 4), *w = malloc((size_t)n * 4);
                float *gu = malloc((size_t)(m * ld) * 4), *y = malloc(cnt * 4), *y0 = malloc(cnt * 4);
                uint16_t *yb = malloc(cnt * 2), *yb0 = malloc(cnt * 2);
                uint8_t *xq = malloc(cnt), *pq = malloc(cnt);
                float *xs = malloc((size_t)(m * ng) * 4), *ps = malloc((size_t)(m * ng) * 4);
                for (size_t i = 0; i < cnt; i++) x[i] = 3.0f * qc_test_normal(rng), h[i] = qc_test_normal(rng);
                for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.2f * qc_test_normal(rng);
                for (int64_t i = 0; i < m * ld; i++) gu[i] = 2.0f * qc_test_normal(rng);
                /* outliers, a zero group and (int8) a non-finite row */
                x[5] = 300.0f;
                if (n >= 256)
                    for (int64_t i = 128; i < 256; i++) x[i] = 0.f, h[i] = 0.f, gu[i] = 0.f;
                if (m > 1 && recipe == QC_FUSE_INT8_TOKEN) gu[ld + 7] = INFINITY, h[n + 7] = INFINITY, x[n + 7] = INFINITY;
                memcpy(x2, x, cnt * 4);
                float eps = 1e-5f;
                int32_t rc = recipe;
                void *px = x, *px2 = x2, *ph = h, *pw = w, *py = y, *pyb = yb, *py0 = y0, *pyb0 = yb0, *pxq = xq,
                     *pxs = xs, *nul = NULL, *pg = gu, *pu = gu + n;
                const char *what = op == 2 ? "cast_quant" : op ? "swiglu_quant" : "add_rmsnorm_quant";
                size_t bad_bf = 0; /* SwiGLU: bf16 gate / up against the same values as f32 */
                if (op == 0) {
                    qc_named_arg a[] = {{"x", &px},   {"h", &ph},       {"weight", &pw}, {"idx", &nul},
                                        {"xq", &pxq}, {"xs", &pxs},     {"y", &py},      {"y.bf16", &pyb},
                                        {"m", &m},    {"n", &n},        {"eps", &eps},   {"recipe", &rc}};
                    call_ref(rt, "core.add_rmsnorm_quant", a, 12);
                    qc_named_arg b[] = {{"x", &px2},  {"h", &ph}, {"weight", &pw}, {"y", &py0}, {"y.bf16", &pyb0},
                                        {"idx", &nul}, {"m", &m}, {"n", &n},       {"eps", &eps}};
                    call_ref(rt, "core.add_rmsnorm", b, 9);
                } else if (op == 2) { /* the attention output: cast and quantize; plain: core.cast_bf16 */
                    qc_named_arg a[] = {{"x", &px}, {"xq", &pxq}, {"xs", &pxs}, {"y.bf16", &pyb},
                                        {"m", &m},  {"n", &n},    {"recipe", &rc}};
                    call_ref(rt, "core.cast_quant", a, 7);
                    int64_t count = m * n;
                    qc_named_arg b[] = {{"x", &px2}, {"y", &pyb0}, {"count", &count}};
                    call_ref(rt, "core.cast_bf16", b, 3);
                    memcpy(y, x, cnt * 4), memcpy(y0, x, cnt * 4); /* no f32 output */
                } else {
                    int32_t f32_in = 0;
                    qc_named_arg a[] = {{"gate", &pg}, {"up", &pu}, {"ld", &ld}, {"xq", &pxq}, {"xs", &pxs},
                                        {"y", &py},    {"y.bf16", &pyb}, {"m", &m}, {"n", &n}, {"recipe", &rc},
                                        {"in_bf16", &f32_in}};
                    call_ref(rt, "core.swiglu_quant", a, 11);
                    qc_named_arg b[] = {{"gate", &pg}, {"up", &pu}, {"ld", &ld}, {"y", &py0}, {"y.bf16", &pyb0},
                                        {"m", &m},     {"n", &n}, {"in_bf16", &f32_in}};
                    call_ref(rt, "core.swiglu_ld", b, 8);
                    bad_bf = swiglu_bf16_in_same(rt, gu, ld, m, n, rc);
                }
                void *pbf = yb, *ppq = pq, *pps = ps;
                int64_t k = n;
                qc_named_arg q[] = {{"x.bf16", &pbf}, {"xq", &ppq}, {"xs", &pps}, {"m", &m}, {"k", &k}};
                call_ref(rt, quant_of(recipe), q, 5);
                int64_t ns = recipe == QC_FUSE_E4M3_G128 ? ng : 1;
                size_t bad_q = 0, bad_s = 0, bad_y = 0;
                for (size_t i = 0; i < cnt; i++) bad_q += xq[i] != pq[i];
                for (int64_t i = 0; i < m * ns; i++) bad_s += gt_bits(xs[i]) != gt_bits(ps[i]) && !(isnan(xs[i]) && isnan(ps[i]));
                for (size_t i = 0; i < cnt; i++)
                    bad_y += (gt_bits(y[i]) != gt_bits(y0[i]) && !(isnan(y[i]) && isnan(y0[i]))) || yb[i] != yb0[i];
                if (op == 0)
                    for (size_t i = 0; i < cnt; i++) bad_y += gt_bits(x[i]) != gt_bits(x2[i]) && !(isnan(x[i]) && isnan(x2[i]));
                printf("%s: %-18s %-14s m=%lld n=%-5lld vs %s: codes %zu differ, scales %zu, y %zu\n", TEST, what,
                       recipe == 1 ? "e4m3.token" : recipe == 2 ? "e4m3.group128" : "int8.token", (long long)m,
                       (long long)n, quant_of(recipe), bad_q, bad_s, bad_y);
                CHECK(bad_q == 0 && bad_s == 0 && bad_y == 0, "%s recipe %d m=%lld n=%lld: the fused reference differs",
                      what, recipe, (long long)m, (long long)n);
                CHECK(bad_bf == 0, "%s recipe %d m=%lld n=%lld: from bf16 gate / up %zu outputs differ from f32 input",
                      what, recipe, (long long)m, (long long)n, bad_bf);
                if (recipe == QC_FUSE_INT8_TOKEN && m > 1)
                    CHECK(isnan(xs[1]) && xq[n] == 0, "int8: the non-finite row has scale %g, code %d", xs[1], xq[n]);
                free(x), free(x2), free(h), free(w), free(gu), free(y), free(y0), free(yb), free(yb0), free(xq), free(pq);
                free(xs), free(ps);
            }
}

/* Launch geometry: whole warps, at most QC_FUSE_VPT chunks of 4 per thread up to the limit; core.swiglu_ld
 * (elementwise, a grid-stride loop) a thread per chunk of 4. */
static void geometry(qc_runtime *rt) {
    static const int64_t ns[] = {4, 100, 576, 4096, 14336, 16384, 16400, 28672};
    for (size_t i = 0; i < N_FUSE; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, FUSE_IDS[i]);
        CHECK(k && k->reference && k->cuda_source && k->launch_dims, "%s: incomplete", FUSE_IDS[i]);
        if (!k) continue;
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            qc_problem p = {.struct_size = sizeof p, .m = 2048, .n = ns[j]};
            qc_launch_dims d;
            k->launch_dims(&p, &d);
            int64_t t = d.block[0];
            if (strcmp(k->id, "core.swiglu_ld") == 0) {
                int64_t chunks = 2048 * ((ns[j] + 3) / 4);
                CHECK(t == 256 && d.grid[0] == (chunks + 255) / 256 && d.grid[1] == 1, "%s n=%lld: %u x %lld",
                      k->id, (long long)ns[j], d.grid[0], (long long)t);
                continue;
            }
            CHECK(d.grid[0] == 2048 && t % 32 == 0 && t >= 32 && t <= 1024, "%s n=%lld: %u x %lld", k->id,
                  (long long)ns[j], d.grid[0], (long long)t);
            /* swiglu_quant over many rows stages a row in shared memory (2n bytes) instead of registers */
            if (d.shared_bytes)
                CHECK(strcmp(k->id, "core.swiglu_quant") == 0 && t == 256 && ns[j] % 4 == 0 &&
                          d.shared_bytes >= 2 * ns[j] && d.shared_bytes <= 48 * 1024,
                      "%s n=%lld: %lld threads, a stage of %u bytes", k->id, (long long)ns[j], (long long)t,
                      d.shared_bytes);
            else if (ns[j] <= QC_FUSE_N_MAX)
                CHECK((ns[j] + 3) / 4 <= QC_FUSE_VPT * t, "%s n=%lld: %lld threads cannot hold the row", k->id,
                      (long long)ns[j], (long long)t);
            /* a few rows (decode) keep the register kernel: a row over up to 1024 threads at once */
            qc_problem few = p;
            few.m = 16;
            k->launch_dims(&few, &d);
            CHECK(d.shared_bytes == 0 && (ns[j] > QC_FUSE_N_MAX || (ns[j] + 3) / 4 <= QC_FUSE_VPT * (int64_t)d.block[0]),
                  "%s n=%lld m=16: %u threads, stage %u", k->id, (long long)ns[j], d.block[0], d.shared_bytes);
        }
    }
}

/* Every kernel here through NVRTC for sm_80, sm_89 and sm_90a with ptxas's report: no spills. */
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
    static const int sms[] = {80, 89, 90};
    for (size_t i = 0; i < N_FUSE; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, FUSE_IDS[i]);
        if (!k) continue;
        for (size_t s = 0; s < sizeof sms / sizeof sms[0]; s++) {
            int sm = sms[s];
            if (!qc_nvrtc_supports(nv, sm)) continue;
            qc_cubin c;
            qc_reason why;
            double t0 = qc_now_seconds();
            /* the kernel's own options (one entry per build), then ptxas's report */
            const char *o[8];
            size_t no = 0;
            for (const char *const *p = k->nvrtc_options; p && *p && no < 6; p++) o[no++] = *p;
            o[no++] = opts[0];
            o[no] = NULL;
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, o, sm, sm >= 90, &c, &why);
            CHECK(st == QC_OK, "%s for sm_%d: %s: %s", k->id, sm, why.code, why.text);
            if (st != QC_OK) continue;
            int regs, spills;
            char *log = nv_ptxas_report(tmp, &c, k->cuda_entry, NULL, &regs, &spills);
            printf("%s: %-24s %-8s %3d registers, %d B spilled, %.1f s\n", TEST, k->id, c.target, regs, spills,
                   qc_now_seconds() - t0);
            CHECK(regs > 0 && regs <= 64, "%s sm_%d: %d registers (launch bound 1024 allows 64)", k->id, sm, regs);
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
    decide_synthetic();
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_TEST_PLUGIN_DIR};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        uint64_t rng = 12345;
        decide_plugins(rt);
        refs_match_plugins(rt, &rng);
        geometry(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
