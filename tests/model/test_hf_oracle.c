/* test_hf_oracle.c - qcore's CPU forward pass against transformers' logits (bench/hf_oracle.py folder). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_compare.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_hf_oracle"

int main(void) {
    char err[1024] = "", dir[1024];
    int have = hf_oracle_dir(dir, sizeof dir, err, sizeof err);
    if (have <= 0) {
        printf("%s: skip: %s\n", TEST, err);
        return 0;
    }
    qc_runtime_options ro = {.struct_size = sizeof ro, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                             .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt) return qc_test_finish(TEST);
    qc_model_options mo = {.struct_size = sizeof mo, .path = dir, .format = "bf16", .kv_format = "bf16"};
    double t0 = qc_now_seconds();
    qc_model *m = qc_model_open(rt, &mo, err, sizeof err);
    CHECK(m != NULL, "qc_model_open(%s): %s", dir, err);
    hf_oracle o = {0};
    if (m) {
        const qc_model_shape *s = qc_model_shape_of(m);
        printf("%s: %s: %s, hidden %d, intermediate %d, %d layers, heads %d/%d, head_dim %d, vocab %d, %s head; "
               "opened in %.2f s\n",
               TEST, dir, s->model_type, s->hidden, s->intermediate, s->n_layers, s->n_heads, s->n_kv_heads,
               s->head_dim, s->vocab, s->tied_embeddings ? "tied" : "untied", qc_now_seconds() - t0);
        int r = hf_oracle_load(&o, dir, s->vocab, err, sizeof err);
        CHECK(r == 1, "%s", err);
        CHECK(r != 1 || o.n_tokens <= qc_model_position(m) + 4096, "too many tokens");
    }
    if (m && o.logits) {
        size_t n = o.n_tokens, v = (size_t)o.vocab;
        float *got = malloc(sizeof(float) * n * v);
        CHECK(got != NULL, "out of memory");
        if (got) {
            /* the metric discriminates: the oracle against itself one row off must fail */
            if (n > 1) {
                hf_result shifted = hf_compare(o.logits, o.logits + v, n - 1, o.vocab);
                CHECK(shifted.top1 < HF_MIN_TOP1 && shifted.worst_rel_l2 > HF_TOL_REL_L2,
                      "rows one apart pass the comparison (top-1 %.3f, rel L2 %.3e): the check cannot fail",
                      shifted.top1, shifted.worst_rel_l2);
            }
            /* one teacher-forced prefill with every row's logits */
            for (size_t i = 0; i < n * v; i++) got[i] = NAN;
            qc_model_reset(m);
            t0 = qc_now_seconds();
            qc_status st = qc_model_forward(m, o.tokens, n, got, 1, err, sizeof err);
            double ms = (qc_now_seconds() - t0) * 1e3;
            CHECK(st == QC_OK, "forward of %zu tokens: %s", n, err);
            if (st == QC_OK) {
                printf("%s: prefill of %zu tokens: %.1f ms\n", TEST, n, ms);
                hf_result r = hf_compare(o.logits, got, n, o.vocab);
                CHECK(hf_report(TEST, "cpu prefill", &r), "CPU prefill logits differ from transformers'");
            }
            /* prefill of half, then one token at a time (the decode path) */
            for (size_t i = 0; i < n * v; i++) got[i] = NAN;
            qc_model_reset(m);
            size_t half = n / 2 ? n / 2 : 1;
            t0 = qc_now_seconds();
            st = qc_model_forward(m, o.tokens, half, got, 1, err, sizeof err);
            for (size_t i = half; st == QC_OK && i < n; i++)
                st = qc_model_forward(m, &o.tokens[i], 1, got + i * v, 0, err, sizeof err);
            ms = (qc_now_seconds() - t0) * 1e3;
            CHECK(st == QC_OK, "prefill %zu + decode: %s", half, err);
            if (st == QC_OK) {
                printf("%s: prefill of %zu + %zu decode steps: %.1f ms\n", TEST, half, n - half, ms);
                char what[64];
                snprintf(what, sizeof what, "cpu prefill %zu + decode %zu", half, n - half);
                hf_result r = hf_compare(o.logits, got, n, o.vocab);
                CHECK(hf_report(TEST, what, &r), "CPU decode logits differ from transformers'");
            }
            free(got);
        }
    }
    hf_oracle_free(&o);
    qc_model_close(m);
    qc_runtime_close(rt);
    return qc_test_finish(TEST);
}
