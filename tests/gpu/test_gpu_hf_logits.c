/* test_gpu_hf_logits.c - the GPU engine's logits against transformers' (bench/hf_oracle.py folder): prefill and decode. */
#define _GNU_SOURCE
#include <math.h>

#include "gpu_test.h"
#include "hf_compare.h"
#include "nvrtc/nv_test.h"
#include "qc_engine.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_hf_logits"

typedef struct ctx {
    qc_gpu *g;
    qc_engine *e;
    const hf_oracle *o;
    const float *cpu;   /* qcore's CPU logits for the same tokens (information only), or NULL */
} ctx;

/* The oracle's tokens through one sequence: a step of `prefill` tokens, then one step per
 * remaining token, every step with all_logits.  prefill == n is the single-step case. */
static void run_case(ctx *c, const char *what, size_t prefill) {
    const hf_oracle *o = c->o;
    size_t n = o->n_tokens, v = (size_t)o->vocab;
    char err[1024] = "";
    float *got = malloc(sizeof(float) * n * v);
    CHECK(got != NULL, "out of memory");
    if (!got) return;
    gt_poison(got, sizeof(float) * n * v);
    int seq = qc_engine_seq_open(c->e);
    CHECK(seq >= 0, "%s: qc_engine_seq_open gave %d", what, seq);
    if (seq < 0) { free(got); return; }
    int np = (int)prefill;
    int32_t next = -1;
    qc_engine_batch b = {.n_seqs = 1, .seqs = &seq, .n_tokens = &np, .tokens = o->tokens, .all_logits = 1,
                         .logits = got, .next = &next};
    double t0 = qc_now_seconds();
    qc_status st = qc_engine_step(c->e, &b, err, sizeof err);
    double t_prefill = qc_now_seconds() - t0;
    CHECK(st == QC_OK, "%s: step of %zu tokens: %s", what, prefill, err);
    size_t bad_next = 0, first_bad = 0;
    if (st == QC_OK && next != (int32_t)hf_argmax(got + (prefill - 1) * v, o->vocab)) bad_next++, first_bad = prefill - 1;
    double t1 = qc_now_seconds();
    int one = 1;
    for (size_t i = prefill; st == QC_OK && i < n; i++) {
        next = -1;
        b = (qc_engine_batch){.n_seqs = 1, .seqs = &seq, .n_tokens = &one, .tokens = &o->tokens[i],
                              .all_logits = 1, .logits = got + i * v, .next = &next};
        st = qc_engine_step(c->e, &b, err, sizeof err);
        CHECK(st == QC_OK, "%s: decode step at position %zu: %s", what, i, err);
        /* the GPU's greedy token is the argmax of the logits it returned */
        if (st == QC_OK && next != (int32_t)hf_argmax(got + i * v, o->vocab)) {
            if (!bad_next) first_bad = i;
            bad_next++;
        }
    }
    double t_decode = qc_now_seconds() - t1;
    if (st == QC_OK) {
        CHECK(qc_engine_seq_len(c->e, seq) == n, "%s: sequence length %zu after %zu tokens", what,
              qc_engine_seq_len(c->e, seq), n);
        CHECK(bad_next == 0, "%s: `next` differs from the argmax of the returned logits at %zu steps (first at "
              "position %zu)", what, bad_next, first_bad);
        size_t first = 0, unwritten = gt_unwritten(got, sizeof(float) * n * v, &first);
        CHECK(unwritten == 0, "%s: %zu logits never written (first at row %zu, column %zu)", what, unwritten,
              first / v, first % v);
        printf("%s: %s: step of %zu tokens %.2f ms", TEST, what, prefill, t_prefill * 1e3);
        if (n > prefill)
            printf(", %zu decode steps %.2f ms (%.3f ms each)", n - prefill, t_decode * 1e3,
                   t_decode * 1e3 / (double)(n - prefill));
        printf("\n");
        hf_result r = hf_compare(o->logits, got, n, o->vocab);
        CHECK(hf_report(TEST, what, &r), "%s: GPU logits differ from transformers'", what);
        if (c->cpu) {
            hf_result rc = hf_compare(c->cpu, got, n, o->vocab);
            printf("%s: %s vs qcore's CPU path (information): top-1 %.4f, rel max worst %.3e, rel L2 worst %.3e "
                   "mean %.3e\n", TEST, what, rc.top1, rc.worst_rel_max, rc.worst_rel_l2, rc.mean_rel_l2);
        }
    }
    free(got);
    qc_engine_seq_close(c->e, seq);
}

/* The header's contract: a step past max_context or with an out-of-range token fails and
 * leaves the sequence as it was. */
static void refusals(ctx *c, int max_context) {
    const hf_oracle *o = c->o;
    char err[1024] = "";
    int seq = qc_engine_seq_open(c->e);
    CHECK(seq >= 0, "qc_engine_seq_open gave %d", seq);
    if (seq < 0) return;
    int n = max_context < (int)o->n_tokens ? max_context : (int)o->n_tokens;
    qc_engine_batch b = {.n_seqs = 1, .seqs = &seq, .n_tokens = &n, .tokens = o->tokens};
    qc_status st = qc_engine_step(c->e, &b, err, sizeof err);
    CHECK(st == QC_OK, "step of %d tokens: %s", n, err);
    if (st == QC_OK && n == max_context) {
        int one = 1;
        b.n_tokens = &one;
        err[0] = 0;
        st = qc_engine_step(c->e, &b, err, sizeof err);
        CHECK(st != QC_OK && err[0], "a step past max_context %d was accepted", max_context);
        CHECK(qc_engine_seq_len(c->e, seq) == (size_t)n, "refused step changed the length to %zu",
              qc_engine_seq_len(c->e, seq));
        printf("%s: past max_context: %s\n", TEST, err);
    }
    qc_engine_seq_close(c->e, seq);
    seq = qc_engine_seq_open(c->e);
    CHECK(seq >= 0, "qc_engine_seq_open after close gave %d", seq);
    if (seq < 0) return;
    int32_t bad[2] = {o->tokens[0], o->vocab};
    int two = 2;
    b = (qc_engine_batch){.n_seqs = 1, .seqs = &seq, .n_tokens = &two, .tokens = bad};
    err[0] = 0;
    st = qc_engine_step(c->e, &b, err, sizeof err);
    CHECK(st != QC_OK && err[0], "token id %d (= vocab) was accepted", o->vocab);
    CHECK(qc_engine_seq_len(c->e, seq) == 0, "refused step changed the length to %zu", qc_engine_seq_len(c->e, seq));
    if (st != QC_OK) printf("%s: out-of-range token: %s\n", TEST, err);
    qc_engine_seq_close(c->e, seq);
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    char err[1024] = "", dir[1024];
    if (hf_oracle_dir(dir, sizeof dir, err, sizeof err) <= 0) {
        printf("%s: skip: %s\n", TEST, err);
        return 0;
    }
    ctx c = {0};
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        qc_gpu_close(c.g);
        if (tmp) nv_rm_rf(tmp);
        return skip ? 0 : 1;
    }
    qc_runtime_options ro = {.struct_size = sizeof ro, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                             .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    qc_model_options mo = {.struct_size = sizeof mo, .path = dir, .format = "bf16", .kv_format = "bf16"};
    qc_model *m = rt ? qc_model_open(rt, &mo, err, sizeof err) : NULL;
    CHECK(!rt || m != NULL, "qc_model_open(%s): %s", dir, err);
    hf_oracle o = {0};
    float *cpu = NULL;
    if (m) {
        const qc_model_shape *s = qc_model_shape_of(m);
        printf("%s: %s: %s, hidden %d, intermediate %d, %d layers, heads %d/%d, head_dim %d, vocab %d, %s head\n",
               TEST, dir, s->model_type, s->hidden, s->intermediate, s->n_layers, s->n_heads, s->n_kv_heads,
               s->head_dim, s->vocab, s->tied_embeddings ? "tied" : "untied");
        int r = hf_oracle_load(&o, dir, s->vocab, err, sizeof err);
        CHECK(r == 1, "%s", err);
        if (r == 1) {
            /* qcore's CPU path on the same tokens: tells a GPU fault from a loader fault */
            cpu = malloc(sizeof(float) * o.n_tokens * (size_t)o.vocab);
            if (cpu && qc_model_forward(m, o.tokens, o.n_tokens, cpu, 1, err, sizeof err) != QC_OK) {
                printf("%s: qcore's CPU forward failed (%s); no CPU comparison\n", TEST, err);
                free(cpu);
                cpu = NULL;
            }
            if (cpu) {
                hf_result r0 = hf_compare(o.logits, cpu, o.n_tokens, o.vocab);
                hf_report(TEST, "cpu reference (information)", &r0);
            }
        }
    }
    c.o = &o;
    c.cpu = cpu;
    for (int graphs = 0; o.logits && graphs <= 1; graphs++) {
        size_t n = o.n_tokens;
        qc_engine_options eo = {.struct_size = sizeof eo, .shape = qc_model_shape_of(m), .model = m,
                                .format = "bf16", .max_seqs = 1, .max_context = (int)n,
                                .max_step_tokens = (int)n, .kv_bytes = 64u << 20, .graphs = graphs};
        double t0 = qc_now_seconds();
        c.e = qc_engine_create(rt, c.g, nv, &eo, err, sizeof err);
        CHECK(c.e != NULL, "qc_engine_create (graphs %d): %s", graphs, err);
        if (!c.e) break;
        qc_engine_stats es;
        qc_engine_get_stats(c.e, &es);
        printf("%s: engine (graphs %d) created in %.2f s: weights %.1f MiB, KV %.1f MiB (%zu B/token, %zu tokens)\n",
               TEST, graphs, qc_now_seconds() - t0, es.weight_bytes / 1048576.0, es.kv_bytes / 1048576.0,
               es.kv_bytes_per_token, es.kv_capacity_tokens);
        size_t half = n / 2 ? n / 2 : 1;
        char what[96];
        if (!graphs) {
            qc_engine_print_kernels(c.e, stdout);
            snprintf(what, sizeof what, "gpu prefill %zu", n);
            run_case(&c, what, n);
        }
        snprintf(what, sizeof what, "gpu prefill %zu + decode %zu%s", half, n - half, graphs ? " (graphs)" : "");
        run_case(&c, what, half);
        if (graphs) {
            qc_engine_get_stats(c.e, &es);
            printf("%s: graphs captured: %d\n", TEST, es.graphs_captured);
        } else {
            refusals(&c, (int)n);
        }
        qc_engine_destroy(c.e);
        c.e = NULL;
    }
    /* Quantized formats: the engine against qcore's CPU path on the same
       packed weights (the GPU kernels are checked against the C reference that
       defines the CPU path); a format without GPU kernels is reported, not failed. */
    static const char *const QFORMATS[] = {"w4a16", "w4a16:g32", "mxfp4"};
    for (size_t f = 0; o.logits && f < sizeof QFORMATS / sizeof QFORMATS[0]; f++) {
        qc_model_options qo = mo;
        qo.format = QFORMATS[f];
        qc_model *qm = qc_model_open(rt, &qo, err, sizeof err);
        CHECK(qm != NULL, "qc_model_open(%s, %s): %s", dir, QFORMATS[f], err);
        if (!qm) continue;
        size_t n = o.n_tokens, V = (size_t)o.vocab;
        float *qcpu = malloc(sizeof(float) * n * V), *qgpu = malloc(sizeof(float) * n * V);
        qc_status st = qcpu && qgpu ? qc_model_forward(qm, o.tokens, n, qcpu, 1, err, sizeof err) : QC_ERR_NOMEM;
        CHECK(st == QC_OK, "%s CPU forward: %s", QFORMATS[f], err);
        qc_engine_options eo = {.struct_size = sizeof eo, .shape = qc_model_shape_of(qm), .model = qm,
                                .format = QFORMATS[f], .max_seqs = 1, .max_context = (int)n,
                                .max_step_tokens = (int)n, .kv_bytes = 64u << 20};
        qc_engine *qe = st == QC_OK ? qc_engine_create(rt, c.g, nv, &eo, err, sizeof err) : NULL;
        CHECK(st != QC_OK || qe != NULL, "engine %s: %s", QFORMATS[f], err);
        if (qe) {
            int sq = qc_engine_seq_open(qe), nn = (int)n;
            qc_engine_batch b = {.n_seqs = 1, .seqs = &sq, .n_tokens = &nn, .tokens = o.tokens, .all_logits = 1,
                                 .logits = qgpu};
            st = qc_engine_step(qe, &b, err, sizeof err);
            if (st != QC_OK && strstr(err, "GPU kernel takes")) {
                printf("%s: %s: no GPU kernel yet (%s): not compared\n", TEST, QFORMATS[f], err);
            } else {
                CHECK(st == QC_OK, "%s step: %s", QFORMATS[f], err);
                if (st == QC_OK) {
                    char what[96];
                    snprintf(what, sizeof what, "%s gpu vs %s cpu (same packed weights)", QFORMATS[f], QFORMATS[f]);
                    hf_result r = hf_compare(qcpu, qgpu, n, o.vocab);
                    printf("%s: %s: top-1 %.4f, rel max worst %.3e, rel L2 worst %.3e mean %.3e (tol: top-1 >= 0.97, "
                           "rel L2 worst <= 2e-2)\n", TEST, what, r.top1, r.worst_rel_max, r.worst_rel_l2, r.mean_rel_l2);
                    CHECK(r.top1 >= 0.97 && r.worst_rel_l2 <= 2e-2 && r.nonfinite == 0, "%s differs", what);
                    hf_result h = hf_compare(o.logits, qgpu, n, o.vocab);
                    snprintf(what, sizeof what, "%s gpu vs transformers bf16 (information)", QFORMATS[f]);
                    printf("%s: %s: top-1 %.4f, rel L2 mean %.3e\n", TEST, what, h.top1, h.mean_rel_l2);
                }
            }
            qc_engine_print_kernels(qe, stdout);
            qc_engine_destroy(qe);
        }
        free(qcpu), free(qgpu);
        qc_model_close(qm);
    }
    qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
    CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
    free(cpu);
    hf_oracle_free(&o);
    qc_model_close(m);
    qc_runtime_close(rt);
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
