/* qcore_bench.c - `qcore bench`: a serving workload on the GPU engine (throughput, TTFT, inter-token latency, memory). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_engine.h"
#include "qc_engine_policy.h"
#include "qc_gpu.h"
#include "qc_manifest.h"
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
 * time between a request's consecutive tokens; "decode p50" is the median
 * pure-decode step (JSON: decode_step_ms, and decode_step_mean_ms).  Each
 * concurrency runs a short warm-up first, so kernel loads and graph
 * captures of its batch sizes stay outside the timed run.
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
    const char *policy;   /* --policy: per-layer formats from a Lua policy */
    const char *manifest; /* --manifest FILE, "-" = none; default next to --json */
    unsigned long long seed;
    size_t kv_bytes;
    const char *kv_format; /* NULL = bf16 */
} bench_opts;

typedef struct bench_result {
    int concurrency, requests;
    /* decode_step_ms: median of the pure-decode steps (a step that compiled a kernel or captured a graph
     * is an outlier, not the rate); the mean beside it */
    double seconds, out_tok_s, total_tok_s, ttft_med, ttft_p99, itl_med, itl_p99, decode_step_ms, decode_mean_ms;
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
    double *steps = malloc(max_itl * sizeof(double)); /* a decode step makes >= 1 token: at most max_itl */
    if (!rq || !prompts || !seqs || !ntok || !tokens || !next || !who || !ttft || !itl || !steps) {
        fprintf(stderr, "qcore bench: out of memory\n");
        free(rq), free(prompts), free(seqs), free(ntok), free(tokens), free(next), free(who), free(ttft), free(itl);
        free(steps);
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
        if (pure_decode && (size_t)decode_steps < max_itl) steps[decode_steps++] = te - ts, decode_time += te - ts;
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
    res->decode_mean_ms = decode_steps ? decode_time / (double)decode_steps * 1e3 : NAN;
    res->decode_step_ms = pct(steps, (size_t)decode_steps, 0.5) * 1e3;
    for (int i = 0; i < n_req; i++)
        if (rq[i].seq >= 0 && !rq[i].done) qc_engine_seq_close(e, rq[i].seq);
    free(rq), free(prompts), free(seqs), free(ntok), free(tokens), free(next), free(who), free(ttft), free(itl);
    free(steps);
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
    fprintf(f, "usage: qcore bench [--model-config FILE | --model PATH] [--format bf16 | --policy FILE] [--prompt N]\n"
               "                   [--output N] [--concurrency 1,16,64] [--step-tokens N] [--no-graphs] [--kv-gib G]\n"
               "                   [--kv bf16|kv_fp8] [--seed N] [--json FILE] [--manifest FILE|-] [--config FILE]\n"
               "                   [--plugin-path DIR]\n"
               "Runs seed 002's workload on the GPU engine: synthetic weights made on the GPU from the model\n"
               "config (default: [model] config of qcore.ini), or a model's own weights with --model.\n"
               "--policy: per-layer formats per phase and batch bucket from a Lua policy, decided at load from\n"
               "this device's measured kernel times (printed with the dispatch table and every fallback).\n"
               "--manifest: the run manifest (default: <json file>.manifest.json when --json is given).\n"
               "QCORE_TRACE=FILE: one Chrome trace event per kernel launch (graphs off, each launch timed).\n");
}

/* With a policy and no --kv: the policy's kv_cache() answer among the
 * registered KV-cache formats that carry the engine's kernels (plugin.h
 * contract); anything else is a stated fallback to bf16.  `out` gets the
 * format, `note` what was decided and why. */
static void bench_policy_kv(qc_runtime *rt, qc_policy *pol, const qc_gpu_info *gi, char *out, size_t outlen,
                            char *note, size_t notelen) {
    qc_policy_device dev = {.name = gi->name, .sm = gi->sm, .sm_count = gi->sm_count};
    qc_policy_candidate kc[8];
    size_t nkc = 0;
    for (size_t i = 0; i < qc_format_count(rt) && nkc < 8; i++) {
        const qc_format_desc *f = qc_format_get(rt, i);
        if (f->kind != QC_FORMAT_KV_CACHE) continue;
        memset(&kc[nkc], 0, sizeof kc[nkc]);
        kc[nkc].format = f->name;
        kc[nkc].time_us = -1;
        kc[nkc].bytes_per_weight = f->effective_bits / 8;
        char id[96];
        snprintf(id, sizeof id, "%s%s", f->name, QC_KV_KERNEL_DECODE);
        kc[nkc].eligible = qc_kernel_find(rt, id) != NULL;
        if (!kc[nkc].eligible) qc_reason_set(&kc[nkc].reason, "missing", "%s registers no GPU kernel %s", f->name, id);
        nkc++;
    }
    char kv[64] = "", err[512] = "";
    qc_strlcpy(out, "bf16", outlen);
    if (qc_policy_kv_format(pol, &dev, kc, nkc, kv, sizeof kv, err, sizeof err) != QC_OK) {
        char *nl = strchr(err, '\n');
        if (nl) *nl = 0;
        snprintf(note, notelen, "bf16 (fallback: the policy's kv_cache() failed: %s)", err);
        return;
    }
    if (!kv[0] || strcmp(kv, "bf16") == 0) {
        snprintf(note, notelen, "bf16 (%s)", kv[0] ? "policy" : "the policy has no kv_cache()");
        return;
    }
    for (size_t i = 0; i < nkc; i++)
        if (strcmp(kc[i].format, kv) == 0) {
            if (kc[i].eligible) {
                qc_strlcpy(out, kv, outlen);
                snprintf(note, notelen, "%s (policy)", kv);
            } else {
                snprintf(note, notelen, "bf16 (fallback: the policy wanted %s: %s: %s)", kv, kc[i].reason.code,
                         kc[i].reason.text);
            }
            return;
        }
    snprintf(note, notelen, "bf16 (fallback: the policy wanted '%s', which is not a KV-cache format)", kv);
}

int cmd_bench(int argc, char **argv) {
    cli c = {0};
    c.command = "bench";
    bench_opts o = {.prompt = 256, .output = 128, .step_tokens = 2048, .graphs = 1, .seed = 1};
    o.conc[0] = 1, o.conc[1] = 16, o.conc[2] = 64, o.n_conc = 3;
    enum { O_CONFIG = 1, O_PLUGIN, O_MCONFIG, O_MODEL, O_FORMAT, O_PROMPT, O_OUTPUT, O_CONC, O_STEP, O_NOGRAPH,
           O_KV, O_SEED, O_JSON, O_POLICY, O_MANIFEST, O_KVFMT };
    static const struct option opts[] = {
        {"config", required_argument, NULL, O_CONFIG},       {"plugin-path", required_argument, NULL, O_PLUGIN},
        {"model-config", required_argument, NULL, O_MCONFIG}, {"model", required_argument, NULL, O_MODEL},
        {"format", required_argument, NULL, O_FORMAT},       {"prompt", required_argument, NULL, O_PROMPT},
        {"output", required_argument, NULL, O_OUTPUT},       {"concurrency", required_argument, NULL, O_CONC},
        {"step-tokens", required_argument, NULL, O_STEP},    {"no-graphs", no_argument, NULL, O_NOGRAPH},
        {"kv-gib", required_argument, NULL, O_KV},           {"seed", required_argument, NULL, O_SEED},
        {"json", required_argument, NULL, O_JSON},           {"help", no_argument, NULL, 'h'},
        {"policy", required_argument, NULL, O_POLICY},       {"manifest", required_argument, NULL, O_MANIFEST},
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
        case O_POLICY: o.policy = optarg; break;
        case O_MANIFEST: o.manifest = optarg; break;
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
    if (o.policy && c.format) {
        fprintf(stderr, "qcore bench: give --format (one format for every layer) or --policy, not both\n");
        return EXIT_USAGE;
    }
    if (o.policy) c.policy_path = o.policy; /* checked for existence by cli_load_runtime */
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
    qc_policy *pol = NULL;
    rc = 1;
    /* the device is opened below (qc_gpu_open says why when there is none; it
       also honours QCORE_CUDA_LIBRARY, which the probe does not) */
    if (o.policy) {
        pol = qc_policy_open(o.policy, NULL, err, sizeof err);
        if (!pol) {
            fprintf(stderr, "qcore bench: policy %s refused:\n%s\n", o.policy, err);
            goto out;
        }
    }
    if (model_flag) {
        /* with a policy the model prepares what the policy keeps (the engine uses what it finds) */
        qc_model_options mo = {.struct_size = sizeof mo, .path = model_path, .policy = pol,
                               .format = pol ? NULL : c.format ? c.format : "bf16"};
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
        fprintf(stderr, "qcore bench: no CUDA device: %s\n", err);
        goto out;
    }
    int max_conc = 1;
    for (int i = 0; i < o.n_conc; i++) max_conc = o.conc[i] > max_conc ? o.conc[i] : max_conc;
    int ctx = o.prompt + o.output;
    char kv_policy[64] = "", kv_note[600] = "";
    if (pol && !o.kv_format) {
        bench_policy_kv(c.rt, pol, qc_gpu_get_info(g), kv_policy, sizeof kv_policy, kv_note, sizeof kv_note);
        printf("kv cache: %s\n", kv_note);
        o.kv_format = kv_policy;
    }
    qc_engine_options eo = {.struct_size = sizeof eo, .shape = &shape, .model = model, .seed = o.seed,
                            .format = c.format, .max_seqs = max_conc, .max_context = ctx,
                            .max_step_tokens = o.step_tokens, .kv_bytes = o.kv_bytes, .graphs = o.graphs,
                            .policy = pol, .kv_format = o.kv_format};
    double tc = qc_now_seconds();
    e = qc_engine_create(c.rt, g, nv, &eo, err, sizeof err);
    if (!e && kv_policy[0] && strcmp(kv_policy, "bf16") != 0) { /* the policy's KV format refused here: say so, go on */
        printf("kv cache: bf16 (fallback: the policy's %s failed: %s)\n", kv_policy, err);
        eo.kv_format = o.kv_format = NULL;
        e = qc_engine_create(c.rt, g, nv, &eo, err, sizeof err);
    }
    if (!e) {
        fprintf(stderr, "qcore bench: %s\n", err);
        goto out;
    }
    const qc_gpu_info *gi = qc_gpu_get_info(g);
    double bw = 0;
    const qc_eplan *plan = qc_engine_plan(e);
    if (plan && qc_eplan_device(plan)->mem_bandwidth_gbs > 0)
        bw = qc_eplan_device(plan)->mem_bandwidth_gbs * 1e9; /* measured once, for the policy */
    else if (qc_gpu_copy_bandwidth(g, &bw, NULL, NULL, err, sizeof err) != QC_OK)
        fprintf(stderr, "qcore bench: copy bandwidth not measured (%s): no floor\n", err);
    qc_engine_stats st;
    qc_engine_get_stats(e, &st);
    printf("qcore bench: %s, sm_%d, %d SMs\n", gi->name, gi->sm, gi->sm_count);
    printf("model: %s (%s weights), %d layers, hidden %d, heads %d/%d x %d, vocab %d; format %s\n",
           model_flag ? model_path : c.model_config, model_flag ? "file" : "synthetic", shape.n_layers, shape.hidden,
           shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.vocab,
           pol ? "per layer (policy)" : c.format ? c.format : "bf16");
    if (plan) {
        printf("policy: %s\n", o.policy);
        qc_eplan_print(plan, stdout);
        qc_engine_print_resident(e, stdout);
    }
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
        /* the same budget as a bf16 cache (the padding block of each comes on top of the budget) */
        qc_engine_kv_info ki;
        qc_engine_get_kv_info(e, &ki);
        size_t bf16_tok = st.kv_bytes_per_token / st.kv_elem_bytes * 2, blk = 16 * st.kv_bytes_per_token;
        size_t blocks = blk ? st.kv_budget_bytes / blk : 0, bf16_blocks = st.kv_budget_bytes / (16 * bf16_tok);
        size_t bf16_tokens = bf16_blocks * 16;
        printf("KV format %s (%zu byte%s per element; variant %u, scales K %g V %g: %s): %zu bytes/token vs %zu for "
               "bf16; the budget of %.3f GiB holds %zu blocks vs %zu bf16 blocks (%.4fx), %zu tokens vs %zu "
               "(%.4fx)\n",
               ki.format, ki.elem_bytes, ki.elem_bytes == 1 ? "" : "s", ki.variant, (double)ki.k_scale,
               (double)ki.v_scale, ki.scale_source, st.kv_bytes_per_token, bf16_tok,
               (double)st.kv_budget_bytes / 1073741824.0, blocks, bf16_blocks,
               bf16_blocks ? (double)blocks / (double)bf16_blocks : 0.0, st.kv_budget_tokens, bf16_tokens,
               bf16_tokens ? (double)st.kv_budget_tokens / (double)bf16_tokens : 0.0);
    }
    bench_result res[16];
    printf("\n%5s %5s %9s %11s %11s %10s %10s %9s %9s %11s\n", "conc", "reqs", "time s", "out tok/s", "all tok/s",
           "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "decode p50");
    double floor_ms = bw > 0 ? (double)st.step_weight_bytes / bw * 1e3 : NAN;
    for (int i = 0; i < o.n_conc; i++) {
        /* a short warm-up at this concurrency first: the kernels of its batch sizes load and their graphs
         * are captured outside the timed run (never longer than the run: the engine's context is sized for it) */
        bench_opts w = o;
        w.output = o.output < 4 ? o.output : 4;
        w.prompt = o.prompt < 32 ? o.prompt : 32;
        bench_result wr;
        if (run_level(e, &shape, &w, o.conc[i], &wr)) goto out;
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
    printf("CUDA graphs captured: %d; programmatic dependent launch: %s\n", st.graphs_captured,
           st.grid_dep ? "on (QC_PDL=0 turns it off)" : "off");
    const char *trace = getenv("QCORE_TRACE");
    printf("kernel launches: %llu (graph replays not counted)", (unsigned long long)st.launches);
    if (trace && *trace)
        printf("; trace: %zu events, written to %s at exit (graphs off, each launch timed with CUDA events)",
               st.trace_events, trace);
    printf("\n");
    if (plan) {
        printf("policy %s: ", o.policy);
        qc_eplan_print_fallbacks(plan, stdout);
    }
    printf("\nmemory ledger:\n");
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
                o.policy ? "per layer (policy)" : c.format ? c.format : "bf16", o.prompt, o.output,
                o.graphs ? "true" : "false", st.weight_bytes,
                st.kv_bytes, st.kv_format, st.kv_bytes_per_token, st.kv_capacity_tokens, st.kv_budget_tokens,
                st.kv_budget_bytes, kvi.variant, (double)kvi.k_scale, (double)kvi.v_scale, kvi.scale_source, bw / 1e9,
                st.step_weight_bytes, floor_ms);
        for (int i = 0; i < o.n_conc; i++)
            fprintf(f, "%s{\"concurrency\": %d, \"requests\": %d, \"seconds\": %.4f, \"output_tok_s\": %.2f, "
                       "\"total_tok_s\": %.2f, \"ttft_ms_p50\": %.3f, \"ttft_ms_p99\": %.3f, \"itl_ms_p50\": %.4f, "
                       "\"itl_ms_p99\": %.4f, \"decode_step_ms\": %.4f, \"decode_step_mean_ms\": %.4f}",
                    i ? ", " : "", res[i].concurrency, res[i].requests, res[i].seconds, res[i].out_tok_s,
                    res[i].total_tok_s, res[i].ttft_med, res[i].ttft_p99, res[i].itl_med, res[i].itl_p99,
                    isnan(res[i].decode_step_ms) ? -1.0 : res[i].decode_step_ms,
                    isnan(res[i].decode_mean_ms) ? -1.0 : res[i].decode_mean_ms);
        fprintf(f, "], \"policy\": \"%s\", \"launches\": %llu}\n", o.policy ? o.policy : "",
                (unsigned long long)st.launches);
        fclose(f);
    }
    /* the run manifest: next to the results unless asked elsewhere */
    char mpath[1100] = "";
    if (o.manifest && strcmp(o.manifest, "-") != 0)
        qc_strlcpy(mpath, o.manifest, sizeof mpath);
    else if (!o.manifest && o.json) {
        size_t l = strlen(o.json);
        snprintf(mpath, sizeof mpath, "%.*s.manifest.json", (int)(l > 5 && strcmp(o.json + l - 5, ".json") == 0 ? l - 5 : l),
                 o.json);
    }
    if (mpath[0]) {
        qc_manifest_info mi = {.command = "bench", .model_path = model_flag ? model_path : NULL,
                               .model_config = model_flag ? NULL : c.model_config, .synthetic = !model_flag,
                               .shape = &shape, .rt = c.rt, .engine = e, .gpu = g, .nvrtc = nv,
                               .policy_path = o.policy, .format = c.format ? c.format : (o.policy ? NULL : "bf16"),
                               .kv_format = st.kv_format, .perf_results = o.json, .trace = trace && *trace ? trace : NULL};
        if (qc_manifest_write(mpath, &mi, err, sizeof err) == QC_OK)
            printf("manifest: %s\n", mpath);
        else
            fprintf(stderr, "qcore bench: manifest not written: %s\n", err);
    }
    rc = 0;
out:
    qc_engine_destroy(e);
    qc_policy_close(pol);
    qc_nvrtc_destroy(nv);
    qc_gpu_close(g);
    qc_model_close(model);
    qc_runtime_close(c.rt);
    qc_config_free(c.cfg);
    return rc;
}
