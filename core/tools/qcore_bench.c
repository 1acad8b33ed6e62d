/* qcore_bench.c - `qcore bench`: a serving workload on the GPU engine (throughput, TTFT, inter-token latency, memory). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_engine.h"
#include "qc_gpu.h"
#include "qc_model.h"
#include "qc_nvrtc.h"
#include "qcore_cli.h"

/*
 * The workload is seed 002's: every request has a random prompt of
 * --prompt tokens and generates --output tokens greedily; at concurrency C,
 * 2C requests (at least 4) arrive at once and at most C run together.  Each
 * step decodes one token for every running sequence and spends the rest of
 * its token budget on prompt chunks of newly admitted ones (continuous
 * batching); pure decode steps replay CUDA graphs.  TTFT is from the start
 * to the step that made a request's first token; inter-token latency is the
 * time between a request's consecutive tokens.
 */

typedef struct request {
    int seq;              /* engine sequence, -1 when not admitted */
    int prefilled;        /* prompt tokens already run */
    int generated;
    int32_t last;         /* the token to feed next */
    double t_first, t_prev;
    int done;
} request;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p * (double)n) - 1;
    return v[i >= n ? n - 1 : i];
}

typedef struct bench_opts {
    int prompt, output, step_tokens, graphs, warmup;
    int conc[16], n_conc;
    const char *json;
    unsigned long long seed;
    size_t kv_bytes;
    const char *kv_format; /* NULL = bf16 */
} bench_opts;

typedef struct bench_result {
    int concurrency, requests;
    double seconds, out_tok_s, total_tok_s, ttft_med, ttft_p99, itl_med, itl_p99, decode_step_ms;
} bench_result;

/* One concurrency level on an engine; 0 or an exit code. */
static int run_level(qc_engine *e, const qc_model_shape *s, const bench_opts *o, int conc, bench_result *res) {
    char err[1024];
    int n_req = 2 * conc < 4 ? 4 : 2 * conc;
    request *rq = calloc((size_t)n_req, sizeof *rq);
    int32_t *prompts = malloc((size_t)n_req * (size_t)o->prompt * 4);
    int *seqs = malloc((size_t)conc * sizeof(int)), *ntok = malloc((size_t)conc * sizeof(int));
    int32_t *tokens = malloc((size_t)o->step_tokens * 4), *next = malloc((size_t)conc * 4);
    int *who = malloc((size_t)conc * sizeof(int));
    size_t max_itl = (size_t)n_req * (size_t)o->output;
    double *ttft = malloc((size_t)n_req * sizeof(double)), *itl = malloc(max_itl * sizeof(double));
    if (!rq || !prompts || !seqs || !ntok || !tokens || !next || !who || !ttft || !itl) {
        fprintf(stderr, "qcore bench: out of memory\n");
        return 1;
    }
    uint64_t z = o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)conc;
    for (size_t i = 0; i < (size_t)n_req * (size_t)o->prompt; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        prompts[i] = (int32_t)((z >> 33) % (uint64_t)s->vocab);
    }
    for (int i = 0; i < n_req; i++) rq[i].seq = -1;
    int admitted = 0, finished = 0, rc = 0;
    size_t n_itl = 0, n_ttft = 0;
    double decode_time = 0;
    long decode_steps = 0;
    double t0 = qc_now_seconds();
    while (finished < n_req) {
        int n = 0, used = 0, pure_decode = 1;
        /* decodes first: one token per running, prefilled request */
        for (int i = 0; i < n_req && n < conc; i++)
            if (rq[i].seq >= 0 && !rq[i].done && rq[i].prefilled == o->prompt) {
                seqs[n] = rq[i].seq, ntok[n] = 1, tokens[used++] = rq[i].last, who[n++] = i;
            }
        /* then prompt chunks: requests mid-prefill, then new ones while there is room */
        for (int i = 0; i < n_req && n < conc && used < o->step_tokens; i++) {
            request *r = &rq[i];
            if (r->done || (r->seq >= 0 && r->prefilled == o->prompt)) continue;
            if (r->seq < 0) {
                int running = 0;
                for (int j = 0; j < n_req; j++) running += rq[j].seq >= 0 && !rq[j].done;
                if (running >= conc) break;
                r->seq = qc_engine_seq_open(e);
                if (r->seq < 0) break;
                admitted++;
            }
            int take = o->prompt - r->prefilled;
            if (take > o->step_tokens - used) take = o->step_tokens - used;
            memcpy(tokens + used, prompts + (size_t)i * o->prompt + r->prefilled, (size_t)take * 4);
            seqs[n] = r->seq, ntok[n] = take, who[n++] = i;
            used += take;
            pure_decode = 0;
        }
        if (n == 0) {
            fprintf(stderr, "qcore bench: no request could run (KV cache too small for one prompt?)\n");
            rc = 1;
            break;
        }
        qc_engine_batch b = {.n_seqs = n, .seqs = seqs, .n_tokens = ntok, .tokens = tokens, .next = next};
        double ts = qc_now_seconds();
        if (qc_engine_step(e, &b, err, sizeof err) != QC_OK) {
            fprintf(stderr, "qcore bench: step of %d sequences, %d tokens: %s\n", n, used, err);
            rc = 1;
            break;
        }
        double te = qc_now_seconds();
        if (pure_decode) decode_time += te - ts, decode_steps++;
        for (int j = 0; j < n; j++) {
            request *r = &rq[who[j]];
            if (r->prefilled < o->prompt) {
                r->prefilled += ntok[j];
                if (r->prefilled < o->prompt) continue; /* mid-prompt: its logits are not a token */
            }
            r->last = next[j];
            r->generated++;
            if (r->generated == 1) {
                r->t_first = te;
                ttft[n_ttft++] = te - t0;
            } else if (n_itl < max_itl) {
                itl[n_itl++] = te - r->t_prev;
            }
            r->t_prev = te;
            if (r->generated >= o->output) {
                r->done = 1;
                finished++;
                qc_engine_seq_close(e, r->seq);
            }
        }
    }
    double total = qc_now_seconds() - t0;
    res->concurrency = conc;
    res->requests = n_req;
    res->seconds = total;
    res->out_tok_s = (double)n_req * o->output / total;
    res->total_tok_s = (double)n_req * (o->output + o->prompt) / total;
    res->ttft_med = pct(ttft, n_ttft, 0.5) * 1e3;
    res->ttft_p99 = pct(ttft, n_ttft, 0.99) * 1e3;
    res->itl_med = pct(itl, n_itl, 0.5) * 1e3;
    res->itl_p99 = pct(itl, n_itl, 0.99) * 1e3;
    res->decode_step_ms = decode_steps ? decode_time / (double)decode_steps * 1e3 : NAN;
    for (int i = 0; i < n_req; i++)
        if (rq[i].seq >= 0 && !rq[i].done) qc_engine_seq_close(e, rq[i].seq);
    free(rq), free(prompts), free(seqs), free(ntok), free(tokens), free(next), free(who), free(ttft), free(itl);
    (void)admitted;
    return rc;
}

static int parse_list(const char *v, int *out, int cap, int *n) {
    *n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 4096 || *n >= cap || (*end && *end != ',')) {
            fprintf(stderr, "qcore bench: --concurrency needs a list like 1,16,64 (1..4096), got '%s'\n", v);
            return -1;
        }
        out[(*n)++] = (int)x;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

static void usage_bench(FILE *f) {
    fprintf(f, "usage: qcore bench [--model-config FILE | --model PATH] [--format bf16] [--prompt N] [--output N]\n"
               "                   [--concurrency 1,16,64] [--step-tokens N] [--no-graphs] [--kv-gib G] [--kv bf16|kv_fp8]\n"
               "                   [--seed N] [--json FILE] [--config FILE] [--plugin-path DIR]\n"
               "Runs seed 002's workload on the GPU engine: synthetic weights made on the GPU from the model\n"
               "config (default: [model] config of qcore.ini), or a model's own weights with --model.\n");
}

int cmd_bench(int argc, char **argv) {
    cli c = {0};
    c.command = "bench";
    bench_opts o = {.prompt = 256, .output = 128, .step_tokens = 2048, .graphs = 1, .seed = 1};
    o.conc[0] = 1, o.conc[1] = 16, o.conc[2] = 64, o.n_conc = 3;
    enum { O_CONFIG = 1, O_PLUGIN, O_MCONFIG, O_MODEL, O_FORMAT, O_PROMPT, O_OUTPUT, O_CONC, O_STEP, O_NOGRAPH,
           O_KV, O_SEED, O_JSON, O_KVFMT };
    static const struct option opts[] = {
        {"config", required_argument, NULL, O_CONFIG},       {"plugin-path", required_argument, NULL, O_PLUGIN},
        {"model-config", required_argument, NULL, O_MCONFIG}, {"model", required_argument, NULL, O_MODEL},
        {"format", required_argument, NULL, O_FORMAT},       {"prompt", required_argument, NULL, O_PROMPT},
        {"output", required_argument, NULL, O_OUTPUT},       {"concurrency", required_argument, NULL, O_CONC},
        {"step-tokens", required_argument, NULL, O_STEP},    {"no-graphs", no_argument, NULL, O_NOGRAPH},
        {"kv-gib", required_argument, NULL, O_KV},           {"seed", required_argument, NULL, O_SEED},
        {"json", required_argument, NULL, O_JSON},           {"help", no_argument, NULL, 'h'},
        {"kv", required_argument, NULL, O_KVFMT},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int ch;
    long iv;
    double dv;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case O_CONFIG: c.config_path = optarg; c.config_required = 1; break;
        case O_PLUGIN: c.plugin_path = optarg; break;
        case O_MCONFIG: c.model_config = optarg; break;
        case O_MODEL: c.model_path = optarg; c.model_from_flag = 1; break;
        case O_FORMAT: c.format = optarg; break;
        case O_PROMPT:
            if (cli_parse_int("--prompt", optarg, 1, 1 << 20, &iv)) return EXIT_USAGE;
            o.prompt = (int)iv;
            break;
        case O_OUTPUT:
            if (cli_parse_int("--output", optarg, 1, 1 << 20, &iv)) return EXIT_USAGE;
            o.output = (int)iv;
            break;
        case O_STEP:
            if (cli_parse_int("--step-tokens", optarg, 16, 1 << 16, &iv)) return EXIT_USAGE;
            o.step_tokens = (int)iv;
            break;
        case O_SEED:
            if (cli_parse_int("--seed", optarg, 0, 0x7fffffffL, &iv)) return EXIT_USAGE;
            o.seed = (unsigned long long)iv;
            break;
        case O_CONC:
            if (parse_list(optarg, o.conc, 16, &o.n_conc)) return EXIT_USAGE;
            break;
        case O_NOGRAPH: o.graphs = 0; break;
        case O_KV: {
            char *end;
            dv = strtod(optarg, &end);
            if (!*optarg || *end || !(dv > 0 && dv < 1e6)) {
                fprintf(stderr, "qcore bench: --kv-gib needs a positive number, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            o.kv_bytes = (size_t)(dv * 1073741824.0);
            break;
        }
        case O_JSON: o.json = optarg; break;
        case O_KVFMT: o.kv_format = optarg; break;
        case 'h': usage_bench(stdout); return 0;
        case ':': fprintf(stderr, "qcore bench: option '%s' needs a value\n", argv[optind - 1]); return EXIT_USAGE;
        default: fprintf(stderr, "qcore bench: unknown option '%s' (see qcore bench --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "qcore bench: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    int model_flag = c.model_from_flag;
    const char *model_path = c.model_path;
    int rc = cli_load_runtime(&c);
    if (rc) return rc;
    char err[1024];
    qc_model_shape shape;
    qc_model *model = NULL;
    qc_gpu *g = NULL;
    qc_nvrtc *nv = NULL;
    qc_engine *e = NULL;
    rc = 1;
    if (!c.dev.available) {
        fprintf(stderr, "qcore bench: no CUDA device: %s\n", c.dev.reason);
        goto out;
    }
    if (model_flag) {
        qc_model_options mo = {.struct_size = sizeof mo, .path = model_path, .format = c.format ? c.format : "bf16"};
        model = qc_model_open(c.rt, &mo, err, sizeof err);
        if (!model) {
            fprintf(stderr, "qcore bench: %s\n", err);
            goto out;
        }
        shape = *qc_model_shape_of(model);
    } else {
        if (!c.model_config) {
            fprintf(stderr, "qcore bench: no model: give --model-config FILE (e.g. configs/llama-3-8b.json) or --model\n");
            rc = EXIT_USAGE;
            goto out;
        }
        if (qc_model_shape_load(c.model_config, &shape, err, sizeof err) != QC_OK) {
            fprintf(stderr, "qcore bench: %s\n", err);
            rc = EXIT_USAGE;
            goto out;
        }
    }
    g = qc_gpu_open(0, err, sizeof err);
    if (g) nv = qc_nvrtc_create(NULL, err, sizeof err);
    if (!g || !nv) {
        fprintf(stderr, "qcore bench: %s\n", err);
        goto out;
    }
    int max_conc = 1;
    for (int i = 0; i < o.n_conc; i++) max_conc = o.conc[i] > max_conc ? o.conc[i] : max_conc;
    int ctx = o.prompt + o.output;
    qc_engine_options eo = {.struct_size = sizeof eo, .shape = &shape, .model = model, .seed = o.seed,
                            .format = c.format, .max_seqs = max_conc, .max_context = ctx,
                            .max_step_tokens = o.step_tokens, .kv_bytes = o.kv_bytes, .graphs = o.graphs,
                            .kv_format = o.kv_format};
    double tc = qc_now_seconds();
    e = qc_engine_create(c.rt, g, nv, &eo, err, sizeof err);
    if (!e) {
        fprintf(stderr, "qcore bench: %s\n", err);
        goto out;
    }
    const qc_gpu_info *gi = qc_gpu_get_info(g);
    double bw = 0;
    if (qc_gpu_copy_bandwidth(g, &bw, NULL, NULL, err, sizeof err) != QC_OK)
        fprintf(stderr, "qcore bench: copy bandwidth not measured (%s): no floor\n", err);
    qc_engine_stats st;
    qc_engine_get_stats(e, &st);
    printf("qcore bench: %s, sm_%d, %d SMs\n", gi->name, gi->sm, gi->sm_count);
    printf("model: %s (%s weights), %d layers, hidden %d, heads %d/%d x %d, vocab %d; format %s\n",
           model_flag ? model_path : c.model_config, model_flag ? "file" : "synthetic", shape.n_layers, shape.hidden,
           shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.vocab, c.format ? c.format : "bf16");
    printf("workload: prompt %d, output %d, concurrency", o.prompt, o.output);
    for (int i = 0; i < o.n_conc; i++) printf(" %d", o.conc[i]);
    printf(" (2C requests each, at least 4), step budget %d tokens, CUDA graphs %s; engine ready in %.1f s\n",
           o.step_tokens, o.graphs ? "on" : "off", qc_now_seconds() - tc);
    printf("weights resident: %.3f GiB; KV cache: %.3f GiB, %zu bytes/token, capacity %zu tokens (sized for "
           "this workload); the KV budget (%s) holds %zu tokens\n",
           (double)st.weight_bytes / 1073741824.0, (double)st.kv_bytes / 1073741824.0, st.kv_bytes_per_token,
           st.kv_capacity_tokens, o.kv_bytes ? "--kv-gib" : "free memory less 10% of the device",
           st.kv_budget_tokens);
    {
        /* the same budget as a bf16 cache (block 0 of each is reserved for padding rows) */
        qc_engine_kv_info ki;
        qc_engine_get_kv_info(e, &ki);
        size_t bf16_tok = st.kv_bytes_per_token / st.kv_elem_bytes * 2, blk = 16 * st.kv_bytes_per_token;
        size_t blocks = blk ? st.kv_budget_bytes / blk : 0, bf16_blocks = st.kv_budget_bytes / (16 * bf16_tok);
        size_t bf16_tokens = bf16_blocks > 1 ? (bf16_blocks - 1) * 16 : 0;
        printf("KV format %s (%zu byte%s per element; variant %u, scales K %g V %g: %s): %zu bytes/token vs %zu for "
               "bf16; the budget of %.3f GiB holds %zu blocks vs %zu bf16 blocks (%.4fx), %zu tokens vs %zu "
               "(%.4fx)\n",
               ki.format, ki.elem_bytes, ki.elem_bytes == 1 ? "" : "s", ki.variant, (double)ki.k_scale,
               (double)ki.v_scale, ki.scale_source, st.kv_bytes_per_token, bf16_tok,
               (double)st.kv_budget_bytes / 1073741824.0, blocks, bf16_blocks,
               bf16_blocks ? (double)blocks / (double)bf16_blocks : 0.0, st.kv_budget_tokens, bf16_tokens,
               bf16_tokens ? (double)st.kv_budget_tokens / (double)bf16_tokens : 0.0);
    }
    /* a short warm-up compiles nothing new later and captures the graph of batch 1 */
    {
        bench_opts w = o;
        w.output = 4;
        w.prompt = o.prompt < 32 ? o.prompt : 32;
        bench_result r;
        if (run_level(e, &shape, &w, 1, &r)) goto out;
    }
    bench_result res[16];
    printf("\n%5s %5s %9s %11s %11s %10s %10s %9s %9s %11s\n", "conc", "reqs", "time s", "out tok/s", "all tok/s",
           "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "decode step");
    double floor_ms = bw > 0 ? (double)st.step_weight_bytes / bw * 1e3 : NAN;
    for (int i = 0; i < o.n_conc; i++) {
        if (run_level(e, &shape, &o, o.conc[i], &res[i])) goto out;
        bench_result *r = &res[i];
        printf("%5d %5d %9.2f %11.1f %11.1f %8.1fms %8.1fms %7.2fms %7.2fms %9.2fms\n", r->concurrency, r->requests,
               r->seconds, r->out_tok_s, r->total_tok_s, r->ttft_med, r->ttft_p99, r->itl_med, r->itl_p99,
               r->decode_step_ms);
    }
    printf("\ndecode step floor: %.3f GB of linear weights / %.0f GB/s (device copy, this run) = %.3f ms",
           (double)st.step_weight_bytes / 1e9, bw / 1e9, floor_ms);
    for (int i = 0; i < o.n_conc; i++)
        printf("%s conc %d: %.1f%%", i ? "," : ";", res[i].concurrency, 100.0 * floor_ms / res[i].decode_step_ms);
    printf(" of the floor\n");
    qc_engine_get_stats(e, &st);
    printf("\nkernels per linear layer (m = rows of the step):\n");
    qc_engine_print_kernels(e, stdout);
    printf("CUDA graphs captured: %d\n\nmemory ledger:\n", st.graphs_captured);
    qc_gpu_ledger_print(g, stdout);
    if (o.json) {
        qc_engine_kv_info kvi;
        qc_engine_get_kv_info(e, &kvi);
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "qcore bench: cannot write %s\n", o.json);
            goto out;
        }
        fprintf(f, "{\"device\": \"%s\", \"model\": \"%s\", \"synthetic\": %s, \"format\": \"%s\", \"prompt\": %d, "
                   "\"output\": %d, \"graphs\": %s, \"weight_bytes\": %zu, \"kv_bytes\": %zu, "
                   "\"kv_format\": \"%s\", \"kv_bytes_per_token\": %zu, \"kv_capacity_tokens\": %zu, \"kv_budget_tokens\": %zu, "
                   "\"kv_budget_bytes\": %zu, \"kv_variant\": %u, \"kv_k_scale\": %g, \"kv_v_scale\": %g, "
                   "\"kv_scale_source\": \"%s\", \"copy_gbs\": %.1f, "
                   "\"step_weight_bytes\": %zu, \"decode_floor_ms\": %.4f, \"levels\": [",
                gi->name, model_flag ? model_path : c.model_config, model_flag ? "false" : "true",
                c.format ? c.format : "bf16", o.prompt, o.output, o.graphs ? "true" : "false", st.weight_bytes,
                st.kv_bytes, st.kv_format, st.kv_bytes_per_token, st.kv_capacity_tokens, st.kv_budget_tokens,
                st.kv_budget_bytes, kvi.variant, (double)kvi.k_scale, (double)kvi.v_scale, kvi.scale_source, bw / 1e9,
                st.step_weight_bytes, floor_ms);
        for (int i = 0; i < o.n_conc; i++)
            fprintf(f, "%s{\"concurrency\": %d, \"requests\": %d, \"seconds\": %.4f, \"output_tok_s\": %.2f, "
                       "\"total_tok_s\": %.2f, \"ttft_ms_p50\": %.3f, \"ttft_ms_p99\": %.3f, \"itl_ms_p50\": %.4f, "
                       "\"itl_ms_p99\": %.4f, \"decode_step_ms\": %.4f}",
                    i ? ", " : "", res[i].concurrency, res[i].requests, res[i].seconds, res[i].out_tok_s,
                    res[i].total_tok_s, res[i].ttft_med, res[i].ttft_p99, res[i].itl_med, res[i].itl_p99,
                    isnan(res[i].decode_step_ms) ? -1.0 : res[i].decode_step_ms);
        fprintf(f, "]}\n");
        fclose(f);
    }
    rc = 0;
out:
    qc_engine_destroy(e);
    qc_nvrtc_destroy(nv);
    qc_gpu_close(g);
    qc_model_close(model);
    qc_runtime_close(c.rt);
    qc_config_free(c.cfg);
    return rc;
}
