/* qcore_run.c - `qcore run` (generation) and `qcore eval` (perplexity, greedy agreement) on the CPU reference. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qc_tokenizer.h"
#include "qcore_cli.h"

#define DEFAULT_PROMPT "What is the capital of France? Answer in one sentence."
#define SETUP_HINT "bash scripts/setup.sh"

/* ---- run manifest ---- */

/* Write the manifest for this command; a failure is reported, not fatal. */
static void write_manifest(cli *c, qc_model *m, const char *command, const char *results) {
    /* only when asked: --manifest FILE (run and eval write no result file of their own to sit beside) */
    if (!c->manifest || strcmp(c->manifest, "-") == 0) return;
    char path[512], err[512];
    qc_strlcpy(path, c->manifest, sizeof path);
    if (qc_model_write_manifest(m, path, command, c->format ? NULL : c->policy_path, results, err, sizeof err) ==
        QC_OK)
        printf("manifest: %s\n", path);
    else
        fprintf(stderr, "qcore: manifest not written: %s\n", err);
}

/* ---- sampling ---- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct cand {
    float logit;
    int32_t id;
} cand;

static int cmp_cand(const void *a, const void *b) {
    float x = ((const cand *)a)->logit, y = ((const cand *)b)->logit;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int32_t argmax(const float *logits, int vocab) {
    int32_t best = 0;
    for (int i = 1; i < vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Greedy when temperature <= 0; else top-k, then top-p, then a draw. */
static int32_t sample(const float *logits, int vocab, const cli *c, uint64_t *rng, cand *work) {
    if (c->temperature <= 0) return argmax(logits, vocab);
    for (int i = 0; i < vocab; i++) work[i] = (cand){logits[i] / (float)c->temperature, i};
    qsort(work, (size_t)vocab, sizeof *work, cmp_cand);
    int n = c->top_k > 0 && c->top_k < vocab ? c->top_k : vocab;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)(work[i].logit - work[0].logit));
    double keep = 0;
    int m = 0;
    for (; m < n; m++) { /* smallest prefix whose mass reaches top_p */
        keep += exp((double)(work[m].logit - work[0].logit)) / sum;
        if (c->top_p > 0 && c->top_p < 1 && keep >= c->top_p) { m++; break; }
    }
    if (m > n) m = n;
    double total = 0;
    for (int i = 0; i < m; i++) total += exp((double)(work[i].logit - work[0].logit));
    double r = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * total;
    for (int i = 0; i < m; i++) {
        r -= exp((double)(work[i].logit - work[0].logit));
        if (r <= 0) return work[i].id;
    }
    return work[m - 1].id;
}

/* ---- model loading ---- */

static qc_model *open_model(cli *c, const char *format, qc_policy **pol_out) {
    char err[2048];
    if (!c->model_path) {
        fprintf(stderr, "qcore: no model: give --model FILE or set [model] path in qcore.ini\n");
        return NULL;
    }
    if (access(c->model_path, R_OK) != 0) {
        fprintf(stderr, "qcore: model '%s' is missing; the default model is fetched by `%s`\n", c->model_path,
                SETUP_HINT);
        return NULL;
    }
    qc_policy *pol = NULL;
    if (!format && c->policy_path) {
        pol = qc_policy_open(c->policy_path, NULL, err, sizeof err);
        if (!pol) {
            fprintf(stderr, "qcore: policy %s refused:\n%s\n", c->policy_path, err);
            return NULL;
        }
    }
    qc_model_options o = {.struct_size = sizeof o, .path = c->model_path, .policy = pol, .format = format,
                          .kv_format = c->kv_format, .max_context = c->ctx, .threads = c->threads};
    double t0 = qc_now_seconds();
    qc_model *m = qc_model_open(c->rt, &o, err, sizeof err);
    if (!m) {
        fprintf(stderr, "qcore: %s\n", err);
        qc_policy_close(pol);
        return NULL;
    }
    if (!qc_model_tokenizer(m)) {
        fprintf(stderr, "qcore: %s has no tokenizer (tokenizer.json or GGUF vocabulary)\n", c->model_path);
        qc_model_close(m);
        qc_policy_close(pol);
        return NULL;
    }
    const qc_model_shape *s = qc_model_shape_of(m);
    fflush(stdout);
    fprintf(stderr, "model: %s (%s, %d blocks, hidden %d, vocab %d), %s, loaded in %.2f s\n", c->model_path,
            s->model_type, s->n_layers, s->hidden, s->vocab,
            format ? format : (c->policy_path ? c->policy_path : "bf16"), qc_now_seconds() - t0);
    *pol_out = pol;
    return m;
}

/* Prompt tokens: through the model's chat template unless --raw. */
static int encode_prompt(cli *c, qc_model *m, const char *prompt, int32_t **ids, size_t *n) {
    struct qc_tokenizer *tok = qc_model_tokenizer(m);
    char err[512];
    char *text = NULL;
    int special = 0;
    if (!c->raw && qc_tokenizer_template_name(tok)) {
        qc_chat_message msg = {"user", prompt};
        text = qc_tokenizer_chat(tok, &msg, 1, 1, err, sizeof err);
        if (!text) {
            fprintf(stderr, "qcore: chat template: %s\n", err);
            return -1;
        }
        special = 1;
    }
    const char *t = text ? text : prompt;
    int rc = qc_tokenizer_encode(tok, t, strlen(t), text ? 0 : -1, special, ids, n, err, sizeof err);
    free(text);
    if (rc != 0) fprintf(stderr, "qcore: tokenizer: %s\n", err);
    return rc;
}

/* Generate up to max_tokens; streams to `out` when non-NULL.  Returns the
 * number generated (ids in gen[]), or -1. */
static int generate(cli *c, qc_model *m, const int32_t *prompt, size_t n_prompt, int max_tokens, FILE *out,
                    int32_t *gen, double *ttft, double *decode_s) {
    const qc_model_shape *s = qc_model_shape_of(m);
    struct qc_tokenizer *tok = qc_model_tokenizer(m);
    char err[512];
    float *logits = malloc(sizeof(float) * (size_t)s->vocab);
    cand *work = malloc(sizeof(cand) * (size_t)s->vocab);
    if (!logits || !work) {
        free(logits), free(work);
        fprintf(stderr, "qcore: out of memory\n");
        return -1;
    }
    uint64_t rng = c->seed ? c->seed : 0x2545F4914F6CDD1Dull;
    qc_model_reset(m);
    double t0 = qc_now_seconds();
    if (qc_model_forward(m, prompt, n_prompt, logits, 0, err, sizeof err) != QC_OK) {
        fprintf(stderr, "qcore: %s\n", err);
        free(logits), free(work);
        return -1;
    }
    *ttft = qc_now_seconds() - t0;
    int n = 0;
    double t1 = qc_now_seconds();
    while (n < max_tokens) {
        int32_t id = sample(logits, s->vocab, c, &rng, work);
        gen[n++] = id;
        if (qc_tokenizer_is_eog(tok, id)) break;
        if (out) {
            char piece[256];
            size_t len = 0;
            if (qc_tokenizer_piece(tok, id, piece, sizeof piece, &len) == 0) {
                fwrite(piece, 1, len, out);
                fflush(out);
            }
        }
        if (n == max_tokens) break;
        if (qc_model_position(m) + 1 > (size_t)c->ctx && c->ctx > 0) break;
        if (qc_model_forward(m, &id, 1, logits, 0, err, sizeof err) != QC_OK) {
            fprintf(stderr, "\nqcore: %s\n", err);
            break;
        }
    }
    *decode_s = qc_now_seconds() - t1;
    free(logits), free(work);
    return n;
}

/* inspect with a model: its dispatch table, fallbacks and resident bytes. */
int cmd_inspect_model(cli *c) {
    qc_policy *pol = NULL;
    qc_model *m = open_model(c, c->format, &pol);
    if (!m) return 1;
    qc_dispatch_print(qc_model_dispatch(m), stdout);
    printf("kv cache: %s\n", qc_model_kv_format(m));
    qc_model_print_memory(m, stdout);
    qc_model_close(m);
    qc_policy_close(pol);
    return 0;
}

int cmd_run(cli *c, int overview) {
    if (overview) {
        /* the main job: what runs where, then an answer */
        print_device(&c->dev);
        printf("plugins:");
        for (size_t i = 0; i < qc_plugin_count(c->rt); i++) {
            qc_plugin_info p;
            qc_plugin_get(c->rt, i, &p);
            printf(" %s", p.name);
        }
        printf(" (qcore plugins for details)\n");
    }
    qc_policy *pol = NULL;
    qc_model *m = open_model(c, c->format, &pol);
    if (!m) return 1;
    if (overview) qc_dispatch_print(qc_model_dispatch(m), stdout);
    const char *prompt = c->prompt;
    char *stdin_text = NULL;
    if (!prompt && !overview && !isatty(0)) {
        size_t cap = 0, len = 0;
        ssize_t r;
        char buf[4096];
        while ((r = read(0, buf, sizeof buf)) > 0 && len < (1u << 20)) {
            char *nb = realloc(stdin_text, len + (size_t)r + 1);
            if (!nb) break;
            stdin_text = nb;
            memcpy(stdin_text + len, buf, (size_t)r);
            len += (size_t)r;
            cap = len;
        }
        (void)cap;
        if (stdin_text) stdin_text[len] = 0;
        prompt = stdin_text;
    }
    if (!prompt) prompt = DEFAULT_PROMPT;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = 1;
    if (encode_prompt(c, m, prompt, &ids, &n_ids) == 0) {
        int max_tokens = c->max_tokens > 0 ? c->max_tokens : 128;
        int32_t *gen = malloc(sizeof(int32_t) * (size_t)max_tokens);
        double ttft = 0, dec = 0;
        printf("prompt: %s\n---\n", prompt);
        fflush(stdout);
        int n = gen ? generate(c, m, ids, n_ids, max_tokens, stdout, gen, &ttft, &dec) : -1;
        if (n >= 0) {
            printf("\n---\nprompt tokens %zu, generated %d, time to first token %.3f s, %.2f tokens/s "
                   "(inter-token %.1f ms)\n",
                   n_ids, n, ttft, n > 1 ? (n - 1) / dec : 0.0, n > 1 ? dec * 1000 / (n - 1) : 0.0);
            printf("formats (decode, batch 1): ");
            qc_model_print_formats(m, QC_PHASE_DECODE, 1, stdout);
            printf("kv cache: %s\n", qc_model_kv_format(m));
            qc_dispatch_print_fallbacks(qc_model_dispatch(m), stdout);
            const char *trace = getenv("QCORE_TRACE");
            printf("kernel calls: %zu (linear and attention)%s%s%s\n", qc_model_kernel_calls(m),
                   trace && *trace ? "; trace: one event each, written to " : "", trace && *trace ? trace : "",
                   trace && *trace ? " at exit" : "");
            char results[512];
            snprintf(results, sizeof results,
                     "{\"prompt_tokens\":%zu,\"generated_tokens\":%d,\"ttft_s\":%.6f,\"decode_tokens_per_s\":%.3f,"
                     "\"format\":\"%s\"}",
                     n_ids, n, ttft, n > 1 ? (n - 1) / dec : 0.0, c->format ? c->format : "policy");
            write_manifest(c, m, "run", results);
            rc = 0;
        }
        free(gen);
    }
    free(ids);
    free(stdin_text);
    qc_model_close(m);
    qc_policy_close(pol);
    return rc;
}

/* ---- eval ---- */

/* Perplexity over `tok` with a sliding window: each window of `window`
 * tokens starts `stride` after the previous one and scores only the tokens
 * the previous window did not (all of them for the first). */
static int perplexity(cli *c, qc_model *m, const int32_t *tok, size_t n, double *ppl, size_t *scored) {
    const qc_model_shape *s = qc_model_shape_of(m);
    size_t W = (size_t)c->window, S = (size_t)c->stride;
    float *logits = malloc(sizeof(float) * W * (size_t)s->vocab);
    if (!logits) return -1;
    double nll = 0;
    size_t count = 0, prev_end = 0;
    char err[512];
    for (size_t begin = 0; begin + 1 < n; begin += S) {
        size_t end = begin + W < n ? begin + W : n;
        qc_model_reset(m);
        if (qc_model_forward(m, tok + begin, end - begin, logits, 1, err, sizeof err) != QC_OK) {
            fprintf(stderr, "qcore: %s\n", err);
            free(logits);
            return -1;
        }
        /* logits row i predicts token begin+i+1 */
        size_t first = prev_end > begin + 1 ? prev_end : begin + 1;
        for (size_t t = first; t < end; t++) {
            const float *row = logits + (t - 1 - begin) * (size_t)s->vocab;
            float mx = row[0];
            for (int v = 1; v < s->vocab; v++) mx = row[v] > mx ? row[v] : mx;
            double z = 0;
            for (int v = 0; v < s->vocab; v++) z += exp((double)(row[v] - mx));
            nll += log(z) + mx - row[tok[t]];
            count++;
        }
        prev_end = end;
        fprintf(stderr, "\r  perplexity: %zu/%zu tokens", end, n);
        if (end == n) break;
    }
    fprintf(stderr, "\n");
    free(logits);
    *ppl = exp(nll / (double)(count ? count : 1));
    *scored = count;
    return 0;
}

int cmd_eval(cli *c) {
    char err[512];
    if (!c->text_path) {
        fprintf(stderr, "qcore eval: --text FILE is required (data/eval/licenses-en.txt is shipped)\n");
        return EXIT_USAGE;
    }
    size_t len;
    char *text = qc_read_file(c->text_path, 64u << 20, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "qcore: %s\n", err);
        return EXIT_USAGE;
    }
    qc_policy *pol = NULL;
    qc_model *m = open_model(c, c->format, &pol);
    if (!m) {
        free(text);
        return 1;
    }
    int rc = 1;
    int32_t *tok = NULL;
    size_t n = 0;
    if (qc_tokenizer_encode(qc_model_tokenizer(m), text, len, -1, 0, &tok, &n, err, sizeof err) != 0) {
        fprintf(stderr, "qcore: tokenizer: %s\n", err);
        goto out;
    }
    if (c->max_eval_tokens > 0 && n > (size_t)c->max_eval_tokens) n = (size_t)c->max_eval_tokens;
    double ppl;
    size_t scored;
    double t0 = qc_now_seconds();
    if (perplexity(c, m, tok, n, &ppl, &scored) != 0) goto out;
    printf("perplexity %.4f over %zu tokens of %s (window %d, stride %d, %.1f s)\n", ppl, scored, c->text_path,
           c->window, c->stride, qc_now_seconds() - t0);
    char results[768];
    int rlen = snprintf(results, sizeof results,
                        "{\"text\":\"%s\",\"perplexity\":%.6f,\"scored_tokens\":%zu,\"window\":%d,\"stride\":%d",
                        c->text_path, ppl, scored, c->window, c->stride);

    /* greedy agreement with the unquantized (bf16) model, as seed 002 */
    if (c->agree_tokens > 0 && c->prompts_path) {
        size_t plen;
        char *prompts = qc_read_file(c->prompts_path, 1u << 20, &plen, err, sizeof err);
        if (!prompts) {
            fprintf(stderr, "qcore: %s\n", err);
            goto out;
        }
        qc_policy *pol2 = NULL;
        const char *kv = c->kv_format;
        c->kv_format = NULL; /* the reference has bf16 weights and a bf16 KV cache */
        qc_model *ref = open_model(c, "bf16", &pol2);
        c->kv_format = kv;
        if (!ref) {
            free(prompts);
            goto out;
        }
        int32_t *ga = malloc(sizeof(int32_t) * (size_t)c->agree_tokens);
        int32_t *gb = malloc(sizeof(int32_t) * (size_t)c->agree_tokens);
        double t_a, t_b;
        int total = 0, same = 0, identical = 0, n_prompts = 0;
        printf("greedy agreement with bf16 (%d tokens each):\n", c->agree_tokens);
        cli greedy = *c;
        greedy.temperature = 0;
        for (char *line = strtok(prompts, "\n"); line && ga && gb; line = strtok(NULL, "\n")) {
            if (!*line || *line == '#') continue;
            int32_t *ids = NULL;
            size_t n_ids = 0;
            if (encode_prompt(c, m, line, &ids, &n_ids) != 0) break;
            int na = generate(&greedy, m, ids, n_ids, c->agree_tokens, NULL, ga, &t_a, &t_b);
            int nb = generate(&greedy, ref, ids, n_ids, c->agree_tokens, NULL, gb, &t_a, &t_b);
            free(ids);
            if (na < 0 || nb < 0) break;
            int k = 0, common = na < nb ? na : nb;
            while (k < common && ga[k] == gb[k]) k++;
            int diverge = (k == common && na == nb) ? -1 : k;
            int eq = 0;
            for (int i = 0; i < common; i++) eq += ga[i] == gb[i];
            n_prompts++;
            total += nb;
            same += eq;
            identical += diverge < 0;
            if (diverge < 0)
                printf("  prompt %2d: identical (%d tokens)\n", n_prompts, na);
            else
                printf("  prompt %2d: %d/%d positions equal, diverges at token %d\n", n_prompts, eq, nb, diverge);
        }
        printf("greedy agreement: %d/%d prompts identical, %d/%d positions equal\n", identical, n_prompts, same,
               total);
        if (rlen > 0 && (size_t)rlen < sizeof results)
            rlen += snprintf(results + rlen, sizeof results - (size_t)rlen,
                             ",\"greedy_prompts_identical\":%d,\"greedy_prompts\":%d,\"greedy_positions_equal\":%d,"
                             "\"greedy_positions\":%d,\"greedy_tokens_per_prompt\":%d",
                             identical, n_prompts, same, total, c->agree_tokens);
        free(ga), free(gb), free(prompts);
        qc_model_close(ref);
        qc_policy_close(pol2);
    }
    if (rlen > 0 && (size_t)rlen + 2 < sizeof results) {
        results[rlen] = '}';
        results[rlen + 1] = 0;
        write_manifest(c, m, "eval", results);
    }
    rc = 0;
out:
    free(tok);
    free(text);
    qc_model_close(m);
    qc_policy_close(pol);
    return rc;
}
