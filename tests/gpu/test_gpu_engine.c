/* test_gpu_engine.c - the GPU engine on a small synthetic model: prefill vs decode vs batched vs graphs vs programmatic launch agree; bad steps fail cleanly. */
#define _GNU_SOURCE
#include <math.h>

#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_engine.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_engine"

static qc_model_shape tiny(void) {
    qc_model_shape s = {0};
    snprintf(s.model_type, sizeof s.model_type, "llama");
    s.hidden = 256, s.intermediate = 640, s.n_layers = 3, s.n_heads = 8, s.n_kv_heads = 2, s.head_dim = 64;
    s.vocab = 1000, s.max_positions = 4096, s.rope_theta = 10000.0, s.rms_eps = 1e-5;
    return s;
}

/* worst |a - b| / max|b| over a row, and whether the argmaxes agree */
/* *same_top: 1 when both rows pick the same token, 2 when they pick different
 * tokens whose logits in a are closer than twice the row's largest difference
 * (a near-tie that rounding alone can flip: the paths sum in different orders),
 * 0 otherwise. */
static double row_err(const float *a, const float *b, int n, int *same_top) {
    double mx = 0, d = 0;
    int ta = 0, tb = 0;
    for (int i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
        if (a[i] > a[ta]) ta = i;
        if (b[i] > b[tb]) tb = i;
    }
    *same_top = ta == tb ? 1 : fabs((double)a[ta] - a[tb]) <= 2 * d ? 2 : 0;
    return mx > 0 ? d / mx : d;
}
#define TOP1_WORD(same) ((same) == 1 ? "same" : (same) == 2 ? "a near-tie" : "DIFFERENT")

/* Prompt of P tokens then D greedy decode steps, one sequence at a time;
 * logits of the last prompt token and of each decode step in out[(D+1) * V]. */
static int run_alone(qc_engine *e, const int32_t *prompt, int P, int D, float *out, int32_t *gen, int V) {
    char err[512];
    int s = qc_engine_seq_open(e);
    CHECK(s >= 0, "seq_open");
    if (s < 0) return -1;
    int32_t next;
    qc_engine_batch b = {.n_seqs = 1, .seqs = &s, .n_tokens = &P, .tokens = prompt, .logits = out, .next = &next};
    qc_status st = qc_engine_step(e, &b, err, sizeof err);
    CHECK(st == QC_OK, "prefill: %s", err);
    for (int i = 0; st == QC_OK && i < D; i++) {
        int one = 1;
        gen[i] = next;
        qc_engine_batch d = {.n_seqs = 1, .seqs = &s, .n_tokens = &one, .tokens = &gen[i], .logits = out + (size_t)(i + 1) * V,
                             .next = &next};
        st = qc_engine_step(e, &d, err, sizeof err);
        CHECK(st == QC_OK, "decode %d: %s", i, err);
    }
    qc_engine_seq_close(e, s);
    return st == QC_OK ? 0 : -1;
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    qc_gpu *g = gt_open_or_skip(TEST);
    if (!g) return 0;
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        qc_gpu_close(g);
        return skip ? 0 : 1;
    }
    char err[1024];
    qc_runtime_options ro = {.struct_size = sizeof ro, .skip_default_dirs = 1, .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    qc_model_shape s = tiny();
    int V = s.vocab, P = 37, D = 12;
    uint64_t rng = gt_seed(TEST);
    int32_t prompts[4][64];
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < 64; i++) prompts[q][i] = (int32_t)(qc_test_rng(&rng) % (uint64_t)V);
    float *alone = malloc((size_t)(D + 1) * V * 4), *graphed = malloc((size_t)(D + 1) * V * 4);
    float *serial = malloc((size_t)(D + 1) * V * 4);
    const char *pdl_env = getenv("QC_PDL");
    char *pdl_saved = pdl_env ? strdup(pdl_env) : NULL;
    float *full = malloc((size_t)(P + D) * V * 4), *batched = malloc((size_t)4 * V * 4);
    int32_t gen[64], gen2[64];
    /* pass 0: plain launches, 1: CUDA graphs, 2: CUDA graphs with programmatic dependent launch off (QC_PDL=0;
     * passes 0 and 1 have it on where the GPU has it, sm_90+) */
    for (int pass = 0; pass < 3 && rt; pass++) {
        int graphs = pass > 0;
        if (pass == 2) setenv("QC_PDL", "0", 1);
        else unsetenv("QC_PDL");
        qc_engine_options eo = {.struct_size = sizeof eo, .shape = &s, .seed = 42, .max_seqs = 8, .max_context = 256,
                                .max_step_tokens = 256, .graphs = graphs};
        qc_engine *e = qc_engine_create(rt, g, nv, &eo, err, sizeof err);
        CHECK(e != NULL, "engine (graphs %d): %s", graphs, err);
        if (!e) break;
        qc_engine_stats st0;
        qc_engine_get_stats(e, &st0);
        CHECK(st0.grid_dep == (pass < 2 && qc_gpu_get_info(g)->sm >= 90),
              "pass %d: programmatic dependent launch %s on sm_%d", pass, st0.grid_dep ? "on" : "off",
              qc_gpu_get_info(g)->sm);
        if (pass == 2) {
            /* the same kernels in the same order: PDL changes when blocks start, never a result */
            if (run_alone(e, prompts[0], P, D, serial, gen2, V) == 0) {
                int differ = memcmp(serial, graphed, (size_t)(D + 1) * V * 4) != 0;
                printf("  programmatic dependent launch on vs off (graphs): logits %s\n",
                       differ ? "DIFFER" : "identical bit for bit");
                CHECK(!differ, "QC_PDL=0 changed the logits");
            }
        } else if (graphs == 0) {
            if (run_alone(e, prompts[0], P, D, alone, gen, V)) break;
            /* the same tokens as one prefill with every row's logits */
            int32_t seqtok[64];
            memcpy(seqtok, prompts[0], (size_t)P * 4);
            memcpy(seqtok + P, gen, (size_t)D * 4);
            int sq = qc_engine_seq_open(e), n = P + D;
            qc_engine_batch b = {.n_seqs = 1, .seqs = &sq, .n_tokens = &n, .tokens = seqtok, .all_logits = 1,
                                 .logits = full};
            CHECK(qc_engine_step(e, &b, err, sizeof err) == QC_OK, "full prefill: %s", err);
            qc_engine_seq_close(e, sq);
            double worst = 0;
            int agree = 0, ties = 0;
            for (int i = 0; i <= D; i++) {
                int same;
                worst = fmax(worst, row_err(alone + (size_t)i * V, full + (size_t)(P - 1 + i) * V, V, &same));
                agree += same == 1;
                ties += same == 2;
            }
            printf("  decode steps vs one prefill: worst rel err %.2e, top-1 agree %d/%d, %d near-ties (tol 2e-2)\n",
                   worst, agree, D + 1, ties);
            CHECK(worst < 2e-2 && agree + ties == D + 1, "decode and prefill paths disagree");
            /* four sequences decoded together (continuous batching): sequence 0
               gives the logits it gave alone */
            int sq4[4], np[4] = {P, 20, 45, 9};
            int32_t cat[200];
            int t = 0;
            for (int q = 0; q < 4; q++) {
                sq4[q] = qc_engine_seq_open(e);
                memcpy(cat + t, prompts[q], (size_t)np[q] * 4);
                t += np[q];
            }
            int32_t nx[4];
            qc_engine_batch b4 = {.n_seqs = 4, .seqs = sq4, .n_tokens = np, .tokens = cat, .logits = batched, .next = nx};
            CHECK(qc_engine_step(e, &b4, err, sizeof err) == QC_OK, "batched prefill: %s", err);
            int same;
            double e0 = row_err(batched, alone, V, &same);
            printf("  batched prefill of 4 vs alone: rel err %.2e, top-1 %s\n", e0, TOP1_WORD(same));
            CHECK(e0 < 2e-2 && same, "batched prefill differs from the sequence alone");
            /* a mixed step: sequence 0 decodes while a new sequence prefills */
            int sq5 = qc_engine_seq_open(e);
            int mixed_seqs[2] = {sq4[0], sq5}, mixed_n[2] = {1, 30};
            int32_t mt[31];
            mt[0] = gen[0];
            memcpy(mt + 1, prompts[3], 30 * 4);
            qc_engine_batch bm = {.n_seqs = 2, .seqs = mixed_seqs, .n_tokens = mixed_n, .tokens = mt, .logits = batched,
                                  .next = nx};
            CHECK(qc_engine_step(e, &bm, err, sizeof err) == QC_OK, "mixed step: %s", err);
            e0 = row_err(batched, alone + V, V, &same);
            printf("  mixed decode+prefill step vs alone: rel err %.2e, top-1 %s\n", e0, TOP1_WORD(same));
            CHECK(e0 < 2e-2 && same, "a decode inside a mixed step differs");
            /* errors leave the state as it was */
            size_t len0 = qc_engine_seq_len(e, sq4[0]);
            int bad_tok = V, one = 1;
            qc_engine_batch bb = {.n_seqs = 1, .seqs = &sq4[0], .n_tokens = &one, .tokens = &bad_tok};
            CHECK(qc_engine_step(e, &bb, err, sizeof err) != QC_OK && strstr(err, "vocabulary"), "bad token: %s", err);
            int closed = 7;
            bb.seqs = &closed;
            bb.tokens = &gen[0];
            CHECK(qc_engine_step(e, &bb, err, sizeof err) != QC_OK && strstr(err, "not open"), "closed seq: %s", err);
            int many = 300;
            int32_t *big = calloc(300, 4);
            bb.seqs = &sq4[0];
            bb.n_tokens = &many;
            bb.tokens = big;
            CHECK(qc_engine_step(e, &bb, err, sizeof err) != QC_OK, "over-long step accepted");
            printf("  refused: %s\n", err);
            free(big);
            CHECK(qc_engine_seq_len(e, sq4[0]) == len0, "a failed step changed the sequence length");
            for (int q = 0; q < 4; q++) qc_engine_seq_close(e, sq4[q]);
            qc_engine_seq_close(e, sq5);
        } else {
            if (run_alone(e, prompts[0], P, D, graphed, gen2, V) == 0) {
                double worst = 0;
                int agree = 0;
                for (int i = 0; i <= D; i++) {
                    int same;
                    worst = fmax(worst, row_err(graphed + (size_t)i * V, alone + (size_t)i * V, V, &same));
                    agree += same == 1;
                }
                qc_engine_stats st;
                qc_engine_get_stats(e, &st);
                printf("  CUDA graphs vs plain launches: worst rel err %.2e, top-1 %d/%d, graphs %d\n", worst, agree,
                       D + 1, st.graphs_captured);
                CHECK(worst < 1e-5 && agree == D + 1 && st.graphs_captured >= 1, "graph replay differs");
            }
        }
        qc_engine_destroy(e);
    }
    if (pdl_saved) setenv("QC_PDL", pdl_saved, 1);
    else unsetenv("QC_PDL");
    free(pdl_saved);
    /* a KV budget of a few blocks: capacity is counted and a step beyond it fails */
    if (rt) {
        qc_engine_options eo = {.struct_size = sizeof eo, .shape = &s, .seed = 1, .max_seqs = 4, .max_context = 256,
                                .max_step_tokens = 256, .kv_bytes = (size_t)3 * 16 * 3 * 2 * 128 * 2};
        qc_engine *e = qc_engine_create(rt, g, nv, &eo, err, sizeof err);
        CHECK(e != NULL, "small engine: %s", err);
        if (e) {
            qc_engine_stats st;
            qc_engine_get_stats(e, &st);
            printf("  small cache: %zu bytes/token, capacity %zu tokens\n", st.kv_bytes_per_token, st.kv_capacity_tokens);
            /* three blocks of budget hold 48 tokens (the padding block comes on top) */
            CHECK(st.kv_bytes_per_token == (size_t)3 * 2 * 128 * 2 && st.kv_capacity_tokens == 48, "capacity");
            int sq = qc_engine_seq_open(e), n = 56;
            qc_engine_batch b = {.n_seqs = 1, .seqs = &sq, .n_tokens = &n, .tokens = prompts[1]};
            CHECK(qc_engine_step(e, &b, err, sizeof err) == QC_ERR_NOMEM && strstr(err, "KV cache full"), "%s", err);
            printf("  refused: %s\n", err);
            n = 32;
            CHECK(qc_engine_step(e, &b, err, sizeof err) == QC_OK, "32 tokens fit: %s", err);
            qc_engine_destroy(e);
        }
    }
    free(alone), free(graphed), free(serial), free(full), free(batched);
    qc_gpu_ledger_row tot = qc_gpu_ledger_get(g, QC_MEM_COUNT_);
    CHECK(tot.count == 0, "engines left %zu buffers (%zu bytes) allocated", tot.count, tot.resident);
    qc_runtime_close(rt);
    qc_nvrtc_destroy(nv);
    qc_gpu_close(g);
    if (tmp) nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
