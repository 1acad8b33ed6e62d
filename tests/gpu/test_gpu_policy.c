/* test_gpu_policy.c - the GPU engine with per-layer formats from a policy: each bucket matches the fixed-format engine, graphs per bucket, fallbacks, trace. */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_engine.h"
#include "qc_engine_policy.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_policy"
/* Two engines that run the same kernels on the same weights and inputs
 * agree to this relative tolerance (per row, against the row's largest
 * logit); w4a16 and fp8 differ by far more, which the test also checks so
 * that an engine running the wrong format cannot pass. */
#define TOL 1e-3

static qc_runtime *rt;
static qc_gpu *g;
static qc_nvrtc *nv;

static qc_model_shape tiny(void) {
    qc_model_shape s = {0};
    snprintf(s.model_type, sizeof s.model_type, "llama");
    s.hidden = 256, s.intermediate = 640, s.n_layers = 3, s.n_heads = 8, s.n_kv_heads = 2, s.head_dim = 64;
    s.vocab = 1000, s.max_positions = 4096, s.rope_theta = 10000.0, s.rms_eps = 1e-5;
    return s;
}

/* prefill in `prefill`; decode below batch 8 in w4a16, from 8 on in fp8 */
static const char *mixed_src(const char *prefill, char *buf, size_t len) {
    snprintf(buf, len,
             "return { prepare = function() return { 'w4a16', 'fp8' } end,\n"
             "  choose = function(q)\n"
             "    if q.phase == 'prefill' then return '%s' end\n"
             "    if q.batch < 8 then return 'w4a16', 'small batch' end\n"
             "    return 'fp8', 'large batch' end }\n",
             prefill);
    return buf;
}

static qc_policy *policy(const char *name, const char *src) {
    char err[1024];
    qc_policy *p = qc_policy_open_string(src, strlen(src), name, NULL, err, sizeof err);
    CHECK(p != NULL, "%s: %s", name, err);
    return p;
}

static qc_engine *engine(qc_policy *pol, const char *format, int graphs) {
    qc_model_shape s = tiny();
    char err[1024];
    qc_engine_options o = {.struct_size = sizeof o, .shape = &s, .seed = 4242, .format = format, .max_seqs = 8,
                           .max_context = 128, .max_step_tokens = 64, .graphs = graphs, .policy = pol};
    qc_engine *e = qc_engine_create(rt, g, nv, &o, err, sizeof err);
    CHECK(e != NULL, "engine (%s): %s", format ? format : "policy", err);
    return e;
}

/* 8 sequences: each a prompt of 5 (one prefill step of 40 rows), then a
 * decode of batch `nb`; logits[nb, V] of that decode step. */
static int run(qc_engine *e, int nb, float *logits) {
    char err[1024];
    int seqs[8], ntok[8], one[8];
    int32_t toks[40], next[8], dec[8];
    for (int i = 0; i < 8; i++) {
        seqs[i] = qc_engine_seq_open(e);
        ntok[i] = 5, one[i] = 1, dec[i] = (int32_t)(11 * i + 3);
    }
    for (int i = 0; i < 40; i++) toks[i] = (int32_t)((i * 37 + 5) % 1000);
    qc_engine_batch b = {.n_seqs = 8, .seqs = seqs, .n_tokens = ntok, .tokens = toks, .next = next};
    qc_status st = qc_engine_step(e, &b, err, sizeof err);
    CHECK(st == QC_OK, "prefill: %s", err);
    /* twice: the first decode of a bucket captures its graph, the second replays it */
    for (int r = 0; st == QC_OK && r < 2; r++) {
        qc_engine_batch d = {.n_seqs = nb, .seqs = seqs, .n_tokens = one, .tokens = dec, .logits = logits, .next = next};
        st = qc_engine_step(e, &d, err, sizeof err);
        CHECK(st == QC_OK, "decode %d: %s", nb, err);
    }
    for (int i = 0; i < 8; i++) qc_engine_seq_close(e, seqs[i]);
    return st == QC_OK ? 0 : -1;
}

static double max_rel(const float *a, const float *b, int rows, int V) {
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double mx = 0, d = 0;
        for (int i = 0; i < V; i++) {
            mx = fmax(mx, fabs(b[(size_t)r * V + i]));
            d = fmax(d, fabs((double)a[(size_t)r * V + i] - b[(size_t)r * V + i]));
            if (!isfinite(a[(size_t)r * V + i])) d = INFINITY;
        }
        worst = fmax(worst, mx > 0 ? d / mx : d);
    }
    return worst;
}

static char *plan_text(const qc_engine *e) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (qc_engine_plan(e)) qc_eplan_print(qc_engine_plan(e), f);
    qc_engine_print_resident(e, f);
    fclose(f);
    return buf;
}

/* Same decode step on a policy engine and on the fixed-format engine it should equal at that bucket. */
static void compare(const char *what, qc_engine *mixed, qc_engine *fixed, qc_engine *other, int nb) {
    int V = tiny().vocab;
    float *a = malloc((size_t)nb * V * 4), *b = malloc((size_t)nb * V * 4), *c = malloc((size_t)nb * V * 4);
    gt_poison(a, (size_t)nb * V * 4), gt_poison(b, (size_t)nb * V * 4), gt_poison(c, (size_t)nb * V * 4);
    if (mixed && fixed && other && run(mixed, nb, a) == 0 && run(fixed, nb, b) == 0 && run(other, nb, c) == 0) {
        double d = max_rel(a, b, nb, V), o = max_rel(c, b, nb, V);
        printf("%s: %s decode batch %d: max |mixed - fixed| / max|fixed| = %.3g (tol %.0e, worst/tol %.2f); the "
               "other format differs by %.3g\n", TEST, what, nb, d, TOL, d / TOL, o);
        CHECK(d <= TOL, "%s batch %d: %.3g > %g", what, nb, d, TOL);
        CHECK(o > 10 * TOL, "%s batch %d: the formats differ by only %.3g: the comparison proves nothing", what, nb, o);
    }
    free(a), free(b), free(c);
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    g = gt_open_or_skip(TEST);
    if (!g) return 0;
    if (qc_gpu_get_info(g)->sm < 89) {
        printf("%s: skip: fp8 tensor cores need sm_89 or later (device is sm_%d)\n", TEST, qc_gpu_get_info(g)->sm);
        qc_gpu_close(g);
        return 0;
    }
    char *tmp = nv_tmpdir();
    int skip = 0;
    nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        qc_gpu_close(g);
        return skip ? 0 : 1;
    }
    char err[1024];
    qc_runtime_options ro = {.struct_size = sizeof ro, .skip_default_dirs = 1, .skip_env = 1,
                             .plugin_path = QC_TEST_PLUGIN_DIR};
    rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    char src[1024];

    /* fixed engines: the references */
    qc_engine *w4 = engine(NULL, "w4a16", 1), *f8 = engine(NULL, "fp8", 1);

    /* prefill w4a16: decode batch 1 runs w4a16 and equals the w4a16 engine */
    qc_policy *p1 = policy("mixed_w4_prefill", mixed_src("w4a16", src, sizeof src));
    qc_engine *m1 = p1 ? engine(p1, NULL, 1) : NULL;
    if (m1) {
        char *t = plan_text(m1);
        CHECK_CONTAINS(t, "b1-4 w4a16, b8 fp8");
        CHECK_CONTAINS(t, "w4a16 ");
        CHECK_CONTAINS(t, "fp8 ");
        CHECK_CONTAINS(t, "resident linear weights per format");
        /* both formats resident for every block linear: 12 linears each */
        CHECK_CONTAINS(t, "w4a16        12 linears");
        CHECK_CONTAINS(t, "fp8          12 linears");
        printf("%s", t);
        free(t);
    }
    compare("prefill w4a16, decode w4a16 (b1)", m1, w4, f8, 1);
    /* prefill fp8: decode batch 8 runs fp8 and equals the fp8 engine */
    qc_policy *p2 = policy("mixed_fp8_prefill", mixed_src("fp8", src, sizeof src));
    qc_engine *m2 = p2 ? engine(p2, NULL, 1) : NULL;
    compare("prefill fp8, decode fp8 (b8)", m2, f8, w4, 8);
    if (m1) {
        qc_engine_stats st;
        qc_engine_get_stats(m2 ? m2 : m1, &st);
        CHECK(st.graphs_captured >= 1, "graphs captured: %d", st.graphs_captured);
        printf("%s: graphs captured on the mixed engine: %d\n", TEST, st.graphs_captured);
    }
    /* graphs per bucket replay the per-bucket formats: the same engine without graphs agrees */
    qc_engine *m2ng = p2 ? engine(p2, NULL, 0) : NULL;
    compare("graphs vs no graphs (mixed, b8)", m2, m2ng, w4, 8);
    qc_engine_destroy(m1), qc_engine_destroy(m2), qc_engine_destroy(m2ng);
    qc_engine_destroy(w4), qc_engine_destroy(f8);

    /* policies that cannot be followed: each a stated fallback, and the engine still runs */
    static const struct {
        const char *name, *src, *want;
    } bad[] = {
        {"raises", "return { prepare = function() return {'fp8'} end, choose = function(q) error('nope') end }",
         "wanted ? -> used fp8"},
        {"loops", "return { choose = function(q) while true do end end }", "policy not asked"},
        {"unknown", "return { choose = function(q) return 'int3' end }", "'int3', which is not a registered format"},
        {"head", "return { choose = function(q) return 'w4a16' end }", "lm_head in bf16 only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qc_policy *p = policy(bad[i].name, bad[i].src);
        qc_engine *e = p ? engine(p, NULL, 1) : NULL;
        if (e) {
            char *t = plan_text(e);
            CHECK(t && strstr(t, bad[i].want), "%s: no '%s' in:\n%s", bad[i].name, bad[i].want, t ? t : "");
            free(t);
            float *l = malloc((size_t)tiny().vocab * 4);
            CHECK(run(e, 1, l) == 0, "%s: a step after the fallback", bad[i].name);
            free(l);
            qc_engine_destroy(e);
        }
        qc_policy_close(p);
    }

    /* QCORE_TRACE: one event per launch, as JSON that parses */
    char trace[600];
    snprintf(trace, sizeof trace, "%s/trace.json", tmp);
    setenv("QCORE_TRACE", trace, 1);
    qc_engine *te = p1 ? engine(p1, NULL, 1) : NULL;
    unsetenv("QCORE_TRACE");
    if (te) {
        float *l = malloc((size_t)8 * tiny().vocab * 4);
        CHECK(run(te, 8, l) == 0, "traced run");
        free(l);
        qc_engine_stats st;
        qc_engine_get_stats(te, &st);
        CHECK(st.graphs_captured == 0, "trace mode captured %d graphs", st.graphs_captured);
        qc_engine_destroy(te); /* writes the trace */
        json_error_t je;
        json_t *root = json_load_file(trace, 0, &je);
        CHECK(root != NULL, "trace does not parse: %s", je.text);
        size_t n = json_array_size(json_object_get(root, "traceEvents"));
        printf("%s: trace: %zu events, %llu launches\n", TEST, n, (unsigned long long)st.launches);
        CHECK(n == st.launches && n > 0, "trace events %zu, launches %llu", n, (unsigned long long)st.launches);
        json_decref(root);
    }
    qc_policy_close(p1), qc_policy_close(p2);
    qc_runtime_close(rt);
    qc_nvrtc_destroy(nv);
    qc_gpu_close(g);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
