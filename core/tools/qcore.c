/* qcore.c - the command-line interface: overview, plugins, formats, inspect; option parsing for every command. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qc_engine.h"
#include "qc_engine_policy.h"
#include "qc_gpu.h"
#include "qc_nvrtc.h"
#include "qc_util.h"

#include "qcore_cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: qcore [options] [command]\n"
            "\n"
            "Quantized LLM inference runtime with format plugins and Lua policies.\n"
            "\n"
            "commands:\n"
            "  (none)        device, plugins, the dispatch table, then an answer from the model\n"
            "  run           generate text (--prompt TEXT, or stdin) with a summary\n"
            "  eval          perplexity on --text FILE and greedy agreement with bf16\n"
            "  plugins       each plugin: file, formats, descriptor fields, what is missing\n"
            "  formats       one line per registered format\n"
            "  inspect       device, eligibility per format, the dispatch table with fallbacks\n"
            "                (with --model: of that model, with its resident bytes)\n"
            "  bench         serving workload on the GPU engine: throughput, TTFT, inter-token\n"
            "                latency, weight memory, KV capacity (qcore bench --help)\n"
            "  gemm-bench    time every format's GPU linear kernels over layer shapes and M, checked\n"
            "                against the C reference, with memory and compute floors (needs a GPU)\n"
            "\n"
            "options (flags override qcore.ini):\n"
            "  --config FILE        configuration (default ./qcore.ini, or $QCORE_CONFIG)\n"
            "  --policy FILE        Lua policy script ([policy] file)\n"
            "  --plugin-path DIRS   extra plugin folders, colon-separated ([plugins] path)\n"
            "  --model FILE|DIR     a .gguf file or a folder with config.json + safetensors ([model] path)\n"
            "  --model-config FILE  HF config.json giving layer shapes when no model is loaded ([model] config)\n"
            "  --format F           one format for every linear layer (bf16, w4a16, w4a16:g128, fp8,\n"
            "                       fp8:block, w8a8_int8, mxfp4), overriding the policy\n"
            "  --kv F               KV cache format (bf16)\n"
            "  --prompt TEXT        run: the prompt (default: stdin, or a built-in question)\n"
            "  -n, --max-tokens N   run: tokens to generate (128)\n"
            "  --temperature T      run: 0 = greedy (default), else sample\n"
            "  --top-k K, --top-p P run: sampling filters\n"
            "  --seed S             run: sampling seed\n"
            "  --raw                run: no chat template\n"
            "  --ctx N              positions in the KV cache (default min(model, 4096))\n"
            "  --threads N          CPU threads (default: all)\n"
            "  --text FILE          eval: text for perplexity\n"
            "  --window N, --stride N  eval: perplexity window (512) and stride (512)\n"
            "  --max-eval-tokens N  eval: use only the first N tokens of the text\n"
            "  --prompts FILE       eval: prompts for greedy agreement (data/eval/prompts.txt)\n"
            "  --agree-tokens N     eval: greedy tokens per prompt (128; 0 = skip)\n"
            "  --manifest FILE      run/eval: write the run manifest (seed 003 section 31) to FILE\n"
            "                       (default: none; bench writes one next to its --json)\n"
            "  --shapes S           gemm-bench: llama3-8b (default: qkv 6144x4096, o 4096x4096,\n"
            "                       gate_up 28672x4096, down 4096x14336) or N:K,N:K,...\n"
            "  --m LIST             gemm-bench: M values (default 1,2,4,...,8192)\n"
            "  --formats LIST       gemm-bench: formats to time (default: every linear format); an entry may\n"
            "                       name a scheme or group size as --format does (fp8,fp8:block,w4a16:g32)\n"
            "  --kernels LIST       gemm-bench: only these kernel ids\n"
            "  --iters N            gemm-bench: timed launches per row (20; the median is reported)\n"
            "  --json FILE          gemm-bench: rows, checks and ceilings as JSON\n"
            "  --device N           gemm-bench: CUDA device ordinal (0)\n"
            "  --peak-tflops T[,T8] gemm-bench: compute peak for the floor, 16-bit activations [and 8-bit]\n"
            "                       (default 989,1979: H100/H200 dense bf16 and fp8/int8)\n"
            "  --out f32|bf16       gemm-bench: the output kernels write (f32 default; bf16: kernels that\n"
            "                       take y.bf16 write bf16, as torch's anchors do; the others stay f32)\n"
            "  -v, --verbose        log plugin loading and policy output\n"
            "  -h, --help           this text\n"
            "  --version            version and plugin ABI\n"
            "\n"
            "environment: QCORE_PLUGIN_PATH (plugin folders), QCORE_CONFIG, QCORE_VERBOSE,\n"
            "             QCORE_TRACE=FILE (Chrome trace-event JSON, one event per kernel; open in Perfetto)\n");
}

static int file_must_exist(const char *what, const char *path) {
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "qcore: %s '%s' does not exist or cannot be read\n", what, path);
        return -1;
    }
    return 0;
}

/* ---- device ---- */

void print_device(const qc_device_info *d) {
    if (d->available) {
        printf("device: %s, sm_%d, %d SMs, %.1f GiB, CUDA driver API %d.%d (%d device%s)\n", d->name, d->sm, d->sm_count,
               d->mem_total / (1024.0 * 1024 * 1024), d->driver_version / 1000, (d->driver_version % 1000) / 10,
               d->device_count, d->device_count == 1 ? "" : "s");
    } else {
        printf("device: %s\n", d->reason);
    }
    if (d->nvrtc_available)
        printf("nvrtc: %d.%d (kernels can be compiled%s)\n", d->nvrtc_major, d->nvrtc_minor,
               d->available ? "" : ", but there is no GPU to run them");
    else
        printf("nvrtc: %s\n", d->nvrtc_reason);
}

/* ---- plugins ---- */

static void print_groups(const qc_format_desc *f, char *buf, size_t len) {
    qc_sbuf b = {0};
    for (uint32_t i = 0; i < f->n_group_sizes; i++) qc_sbuf_printf(&b, "%s%u", i ? "/" : "", f->group_sizes[i]);
    qc_strlcpy(buf, b.data ? b.data : "-", len);
    qc_sbuf_free(&b);
}

static void print_plugins(cli *c, int verbose_fields) {
    qc_runtime *rt = c->rt;
    printf("backends: cpu reference (always); cuda: %s\n",
           c->dev.available ? "available" : "not available on this machine");
    printf("plugin folders searched:");
    for (size_t i = 0; i < qc_plugin_dir_count(rt); i++) printf(" %s", qc_plugin_dir(rt, i));
    printf("%s\n", qc_plugin_dir_count(rt) ? "" : " (none)");
    for (size_t i = 0; i < qc_plugin_count(rt); i++) {
        qc_plugin_info p;
        qc_plugin_get(rt, i, &p);
        printf("plugin %s %s (ABI %u) %s\n  file: %s\n  %s\n", p.id, p.version, p.abi_version,
               p.builtin ? "[built into the core]" : "", p.path, p.description);
        for (size_t j = 0; j < qc_format_count(rt); j++) {
            const qc_format_desc *f = qc_format_get(rt, j);
            const char *owner = qc_format_plugin(rt, f->name);
            if (!owner || strcmp(owner, p.id) != 0) continue;
            char sup[32], nat[32], groups[64], missing[160];
            qc_arch_range_str(f->supported_arch, sup, sizeof sup);
            qc_arch_range_str(f->native_arch, nat, sizeof nat);
            print_groups(f, groups, sizeof groups);
            qc_format_missing(rt, f, missing, sizeof missing);
            printf("  format %-10s %s\n", f->name, f->summary ? f->summary : "");
            if (verbose_fields) {
                printf("    kind %s; weight %s, activations %s, kv %s, accumulate %s, scales %s\n",
                       f->kind == QC_FORMAT_LINEAR ? "linear" : "kv-cache", qc_dtype_name(f->weight_dtype),
                       qc_dtype_name(f->act_dtype), qc_dtype_name(f->kv_dtype), qc_dtype_name(f->accum_dtype),
                       qc_dtype_name(f->scale_dtype));
                printf("    scale granularity: weights %s, activations %s; group sizes %s (default %u)\n",
                       qc_granularity_name(f->weight_scale), qc_granularity_name(f->act_scale), groups,
                       f->default_group_size);
                printf("    arch: supported %s, native %s; alignment N %u, K %u; %.3f bits/weight, %.4f with "
                       "scales\n",
                       sup, nat, f->n_align, f->k_align, f->bits_per_weight, f->effective_bits);
                for (size_t k = 0; k < qc_kernel_count(rt); k++) {
                    const qc_kernel_desc *kd = qc_kernel_get(rt, k);
                    if (strcmp(kd->format, f->name) != 0) continue;
                    char ar[32];
                    qc_arch_range_str(kd->arch, ar, sizeof ar);
                    char mmax[24];
                    snprintf(mmax, sizeof mmax, kd->m_max ? "%lld" : "any", (long long)kd->m_max);
                    printf("    kernel %s: %u params, M %lld..%s, %s%s%s%s%s\n", kd->id, kd->n_params,
                           (long long)kd->m_min, mmax, kd->reference ? "C reference" : "",
                           kd->reference && kd->cuda_source ? " + " : "", kd->cuda_source ? "CUDA " : "",
                           kd->cuda_source ? ar : "", "");
                }
            }
            qc_problem probe = {.struct_size = sizeof probe, .m = 1, .n = 4096, .k = 4096};
            qc_reason why;
            int cpu_ok = qc_select_format(rt, f, &probe, 0, NULL, &why) &&
                         (f->kind != QC_FORMAT_LINEAR || f->quantize);
            printf("    status: %s%s%s\n", cpu_ok ? "runs on the cpu reference" : "NOT USABLE YET",
                   missing[0] ? "; lacks " : "; complete", missing);
        }
    }
    size_t nr = qc_plugin_refusal_count(rt);
    for (size_t i = 0; i < nr; i++) printf("refused: %s\n", qc_plugin_refusal(rt, i));
}

static void print_formats(cli *c) {
    qc_runtime *rt = c->rt;
    printf("%-10s %-9s %-7s %-7s %-8s %-8s %-14s %-10s %-9s %-9s %s\n", "format", "kind", "bits", "eff.bits",
           "weights", "acts", "scales", "groups", "supported", "native", "plugin");
    for (size_t i = 0; i < qc_format_count(rt); i++) {
        const qc_format_desc *f = qc_format_get(rt, i);
        char sup[32], nat[32], groups[64], scales[32];
        qc_arch_range_str(f->supported_arch, sup, sizeof sup);
        qc_arch_range_str(f->native_arch, nat, sizeof nat);
        print_groups(f, groups, sizeof groups);
        snprintf(scales, sizeof scales, "%s/%s", qc_granularity_name(f->weight_scale),
                 qc_granularity_name(f->act_scale));
        printf("%-10s %-9s %-7.3f %-8.4f %-8s %-8s %-14s %-10s %-9s %-9s %s\n", f->name,
               f->kind == QC_FORMAT_LINEAR ? "linear" : "kv-cache", f->bits_per_weight, f->effective_bits,
               qc_dtype_name(f->kind == QC_FORMAT_LINEAR ? f->weight_dtype : f->kv_dtype), qc_dtype_name(f->act_dtype),
               scales, groups, sup, nat, qc_format_plugin(rt, f->name));
    }
}

/* ---- policy and dispatch ---- */

/* On a CUDA device: the GPU engine's table for the configured shapes, from
 * this device's measured kernel times (no weights are loaded).  1 when there
 * is no device (the caller prints the CPU table), else 0 or an exit code. */
static int print_dispatch_gpu(cli *c, const qc_model_shape *shape) {
    char err[1024];
    qc_gpu *g = qc_gpu_open(0, err, sizeof err);
    if (!g) return 1;
    int rc = 0;
    qc_nvrtc *nv = qc_nvrtc_create(NULL, err, sizeof err);
    qc_policy *pol = nv ? qc_policy_open(c->policy_path, NULL, err, sizeof err) : NULL;
    if (!nv || !pol) {
        fprintf(stderr, "qcore: %s\n", err);
        qc_nvrtc_destroy(nv);
        qc_gpu_close(g);
        return 1 + 1;
    }
    /* the buckets qcore bench would use at concurrency 256 with its default step budget */
    qc_engine_options eo = {.struct_size = sizeof eo, .shape = shape, .max_seqs = 256, .max_step_tokens = 2048,
                            .policy = pol};
    struct qc_eplan *p = qc_engine_plan_only(c->rt, g, nv, &eo, err, sizeof err);
    if (!p) {
        fprintf(stderr, "qcore: %s\n", err);
        rc = 1 + 1;
    } else {
        printf("GPU engine dispatch (policy %s; decode buckets 1..256, prefill 1..2048):\n", c->policy_path);
        qc_eplan_print(p, stdout);
        qc_eplan_print_resident_estimate(p, stdout);
        qc_eplan_free(p);
    }
    qc_policy_close(pol);
    qc_nvrtc_destroy(nv);
    qc_gpu_close(g);
    return rc;
}

int print_dispatch(cli *c) {
    qc_model_shape shape;
    char err[1024];
    if (qc_model_shape_load(c->model_config, &shape, err, sizeof err) != QC_OK) {
        fprintf(stderr, "qcore: %s\n", err);
        return 1;
    }
    printf("model shapes: %s (%s, %d blocks, hidden %d, intermediate %d, heads %d/%d kv, vocab %d)\n",
           c->model_config, shape.model_type, shape.n_layers, shape.hidden, shape.intermediate, shape.n_heads,
           shape.n_kv_heads, shape.vocab);
    if (c->policy_path && c->gpu_table) {
        int g = print_dispatch_gpu(c, &shape);
        if (g != 1) return g ? 1 : 0;
        printf("(no CUDA device: the CPU reference's table follows)\n");
    }
    qc_policy *pol = NULL;
    if (c->policy_path) {
        pol = qc_policy_open(c->policy_path, NULL, err, sizeof err);
        if (!pol) {
            fprintf(stderr, "qcore: policy %s refused:\n%s\n", c->policy_path, err);
            return 1;
        }
    }
    qc_layer_list *layers = qc_model_linear_layers(&shape);
    if (!layers) {
        fprintf(stderr, "qcore: out of memory listing layers\n");
        qc_policy_close(pol);
        return 1;
    }
    /* GPU dispatch is built once the CUDA backend exists; until then every
     * device runs the CPU reference. */
    qc_policy_device dev = {.name = "cpu"};
    qc_dispatch_options o = {.struct_size = sizeof o, .gpu = 0, .device = &dev};
    qc_dispatch *d = qc_dispatch_build(c->rt, pol, layers, &o, err, sizeof err);
    int rc = 0;
    if (!d) {
        fprintf(stderr, "qcore: %s\n", err);
        rc = 1;
    } else {
        qc_dispatch_print(d, stdout);
        if (pol) {
            char kv[64] = "";
            qc_policy_candidate kc[8];
            size_t nkc = 0;
            for (size_t i = 0; i < qc_format_count(c->rt) && nkc < 8; i++) {
                const qc_format_desc *f = qc_format_get(c->rt, i);
                if (f->kind != QC_FORMAT_KV_CACHE) continue;
                memset(&kc[nkc], 0, sizeof kc[nkc]);
                kc[nkc].format = f->name;
                kc[nkc].time_us = -1;
                kc[nkc].bytes_per_weight = f->effective_bits / 8;
                qc_problem p = {.struct_size = sizeof p, .m = 1, .n = 1, .k = 1};
                kc[nkc].eligible = qc_select_format(c->rt, f, &p, 0, NULL, &kc[nkc].reason);
                nkc++;
            }
            if (qc_policy_kv_format(pol, &dev, kc, nkc, kv, sizeof kv, err, sizeof err) != QC_OK) {
                char *nl = strchr(err, '\n');
                if (nl) *nl = 0;
                printf("kv cache: bf16 (policy kv_cache() failed: %s)\n", err);
            } else if (!kv[0] || strcmp(kv, "bf16") == 0) {
                printf("kv cache: bf16%s\n", kv[0] ? " (policy)" : " (policy has no kv_cache())");
            } else {
                int ok = 0;
                for (size_t i = 0; i < nkc; i++)
                    if (strcmp(kc[i].format, kv) == 0) {
                        ok = 1;
                        if (kc[i].eligible)
                            printf("kv cache: %s (policy)\n", kv);
                        else
                            printf("kv cache: bf16 (policy wanted %s: %s: %s)\n", kv, kc[i].reason.code,
                                   kc[i].reason.text);
                    }
                if (!ok) printf("kv cache: bf16 (policy wanted '%s', which is not a KV-cache format)\n", kv);
            }
        }
    }
    qc_dispatch_free(d);
    qc_layer_list_free(layers);
    qc_policy_close(pol);
    return rc;
}

static void print_eligibility(cli *c) {
    /* One representative problem per phase on this machine's backend. */
    printf("eligibility on the cpu reference backend (M=1 decode and M=512 prefill, N=K=4096):\n");
    for (size_t i = 0; i < qc_format_count(c->rt); i++) {
        const qc_format_desc *f = qc_format_get(c->rt, i);
        for (int ph = 0; ph < 2; ph++) {
            qc_problem p = {.struct_size = sizeof p, .m = ph ? 512 : 1, .n = 4096, .k = 4096,
                            .phase = ph ? QC_PHASE_PREFILL : QC_PHASE_DECODE};
            qc_reason why;
            const qc_kernel_desc *k = NULL;
            int ok = qc_select_format(c->rt, f, &p, 0, &k, &why);
            printf("  %-10s %-7s %s%s%s%s\n", f->name, qc_phase_name(p.phase), ok ? "eligible: " : "refused: ",
                   ok ? (k ? k->id : "") : why.code, ok ? "" : ": ", ok ? "" : why.text);
        }
    }
}

/* Every GPU linear kernel against a few problems on this device's arch (sm_90
 * when there is no device here): eligible, or the refusal's code, with each
 * distinct refusal sentence once. */
static void print_kernel_eligibility(cli *c) {
    uint32_t sm = c->dev.available ? (uint32_t)c->dev.sm : 90;
    static const int64_t MS[] = {1, 16, 512};
    printf("GPU linear kernels on sm_%u%s (N = K = 4096; '+' eligible, else the refusal code):\n", sm,
           c->dev.available ? "" : " (no device here: as an H100/H200 would see them)");
    printf("  %-26s %-10s %-14s %-14s %-14s\n", "kernel", "format", "M=1", "M=16", "M=512");
    char seen[16][QC_REASON_TEXT_MAX];
    int n_seen = 0;
    for (size_t i = 0;; i++) {
        const qc_kernel_desc *k = qc_kernel_get(c->rt, i);
        if (!k) break;
        const qc_format_desc *f = qc_format_find(c->rt, k->format);
        if (!k->cuda_source || !f || f->kind != QC_FORMAT_LINEAR) continue;
        qc_problem probe = {.struct_size = sizeof probe, .sm = sm, .m = 1, .n = 4096, .k = 4096};
        qc_reason why;
        if (!qc_select_kernel(k, f, &probe, 1, &why) && strcmp(why.code, "missing") == 0) continue; /* not a linear */
        printf("  %-26s %-10s", k->id, k->format);
        for (size_t j = 0; j < sizeof MS / sizeof MS[0]; j++) {
            qc_problem p = probe;
            p.m = MS[j];
            p.phase = p.m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE;
            int ok = qc_select_kernel(k, f, &p, 1, &why);
            printf(" %-14s", ok ? "+" : why.code);
            if (!ok) {
                int dup = 0;
                for (int t = 0; t < n_seen; t++) dup |= strcmp(seen[t], why.text) == 0;
                if (!dup && n_seen < 16) snprintf(seen[n_seen++], sizeof seen[0], "%s", why.text);
            }
        }
        printf("\n");
    }
    for (int t = 0; t < n_seen; t++) printf("    - %s\n", seen[t]);
}

/* The KV-cache formats' GPU kernels (the engine contract of qcore/plugin.h)
 * on a few attention shapes and on sm_75: eligible, or the refusal's code,
 * each distinct refusal sentence once.  A refused format leaves the engine
 * on the bf16 cache (the core's kernels). */
static void print_kv_eligibility(cli *c) {
    uint32_t sm = c->dev.available ? (uint32_t)c->dev.sm : 90;
    static const struct {
        const char *label;
        int heads, kv, hd;
        uint32_t sm; /* 0 = this device's */
    } SH[] = {{"32/8 d128", 32, 8, 128, 0}, {"9/3 d64", 9, 3, 64, 0}, {"32/8 d96", 32, 8, 96, 0}, {"sm_75", 32, 8, 128, 75}};
    static const char *const SUFFIX[] = {QC_KV_KERNEL_QKV, QC_KV_KERNEL_DECODE, QC_KV_KERNEL_REDUCE,
                                         QC_KV_KERNEL_PREFILL};
    printf("KV-cache formats' GPU kernels on sm_%u (q/kv heads, head_dim; '+' eligible, else the refusal code; "
           "bf16 is the core's and the fallback):\n", sm);
    printf("  %-28s %-10s %-10s %-10s %-10s\n", "kernel", SH[0].label, SH[1].label, SH[2].label, SH[3].label);
    char seen[16][QC_REASON_TEXT_MAX];
    int n_seen = 0, any = 0;
    for (size_t i = 0; i < qc_format_count(c->rt); i++) {
        const qc_format_desc *f = qc_format_get(c->rt, i);
        if (f->kind != QC_FORMAT_KV_CACHE) continue;
        any = 1;
        for (size_t j = 0; j < sizeof SUFFIX / sizeof SUFFIX[0]; j++) {
            char id[96];
            snprintf(id, sizeof id, "%s%s", f->name, SUFFIX[j]);
            const qc_kernel_desc *k = qc_kernel_find(c->rt, id);
            printf("  %-28s", id);
            if (!k) {
                printf(" missing: the engine refuses %s (bf16 cache instead)\n", f->name);
                continue;
            }
            for (size_t s = 0; s < sizeof SH / sizeof SH[0]; s++) {
                qc_problem p = {.struct_size = sizeof p, .sm = SH[s].sm ? SH[s].sm : sm, .m = 1,
                                .n = SH[s].heads + (j == 0 ? SH[s].kv : 0), .k = SH[s].hd,
                                .group_size = (uint32_t)SH[s].kv, .scheme = 64};
                qc_reason why;
                int ok = qc_select_kernel(k, f, &p, 1, &why);
                printf(" %-10s", ok ? "+" : why.code);
                if (!ok) {
                    int dup = 0;
                    for (int t = 0; t < n_seen; t++) dup |= strcmp(seen[t], why.text) == 0;
                    if (!dup && n_seen < 16) snprintf(seen[n_seen++], sizeof seen[0], "%s", why.text);
                }
            }
            printf("\n");
        }
    }
    if (!any) printf("  (no KV-cache format is loaded)\n");
    for (int t = 0; t < n_seen; t++) printf("    - %s\n", seen[t]);
}

/* ---- main ---- */

int cli_load_runtime(cli *c) {
    char err[1024];
    const char *cfg_path = c->config_path;
    if (!cfg_path) {
        cfg_path = getenv("QCORE_CONFIG");
        if (cfg_path) c->config_required = 1;
    }
    if (!cfg_path) cfg_path = "qcore.ini";
    c->cfg = qc_config_load(cfg_path, c->config_required, err, sizeof err);
    if (!c->cfg) {
        fprintf(stderr, "qcore: %s\n", err);
        return EXIT_USAGE;
    }
    if (c->policy_path) qc_config_set(c->cfg, "policy", "file", c->policy_path);
    if (c->model_config) qc_config_set(c->cfg, "model", "config", c->model_config);
    if (c->model_path) qc_config_set(c->cfg, "model", "path", c->model_path);
    c->policy_path = qc_config_get(c->cfg, "policy", "file");
    c->model_config = qc_config_get(c->cfg, "model", "config");
    c->model_path = qc_config_get(c->cfg, "model", "path");
    if (c->policy_path && file_must_exist("policy file", c->policy_path)) return EXIT_USAGE;
    if (c->model_config && file_must_exist("model config", c->model_config)) return EXIT_USAGE;
    qc_runtime_options o = {.struct_size = sizeof o, .config = c->cfg, .plugin_path = c->plugin_path};
    c->rt = qc_runtime_open(&o, err, sizeof err);
    if (!c->rt) {
        fprintf(stderr, "qcore: %s\n", err);
        return 1;
    }
    qc_device_probe(&c->dev);
    return 0;
}

int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == 0 || *end || x < lo || x > hi) {
        fprintf(stderr, "qcore: %s needs an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_real(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (*v == 0 || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "qcore: %s needs a number in [%g, %g], got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv) {
    /* bench has options of its own */
    if (argc > 1 && strcmp(argv[1], "bench") == 0) return cmd_bench(argc - 1, argv + 1);
    cli c = {0};
    c.window = 512;
    c.stride = 512;
    c.agree_tokens = 128;
    c.top_p = 1.0;
    enum { OPT_CONFIG = 256, OPT_POLICY, OPT_PLUGIN_PATH, OPT_MODEL_CONFIG, OPT_VERSION, OPT_MODEL, OPT_FORMAT,
           OPT_KV, OPT_PROMPT, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_SEED, OPT_RAW, OPT_CTX, OPT_THREADS, OPT_TEXT,
           OPT_WINDOW, OPT_STRIDE, OPT_MAXEVAL, OPT_PROMPTS, OPT_AGREE, OPT_MANIFEST, OPT_SHAPES, OPT_M,
           OPT_FORMATS, OPT_KERNELS, OPT_ITERS, OPT_JSON, OPT_DEVICE, OPT_PEAK, OPT_OUT };
    static const struct option opts[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"plugin-path", required_argument, NULL, OPT_PLUGIN_PATH},
        {"model-config", required_argument, NULL, OPT_MODEL_CONFIG},
        {"model", required_argument, NULL, OPT_MODEL},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"kv", required_argument, NULL, OPT_KV},
        {"prompt", required_argument, NULL, OPT_PROMPT},
        {"max-tokens", required_argument, NULL, 'n'},
        {"temperature", required_argument, NULL, OPT_TEMP},
        {"top-k", required_argument, NULL, OPT_TOPK},
        {"top-p", required_argument, NULL, OPT_TOPP},
        {"seed", required_argument, NULL, OPT_SEED},
        {"raw", no_argument, NULL, OPT_RAW},
        {"ctx", required_argument, NULL, OPT_CTX},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"text", required_argument, NULL, OPT_TEXT},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"stride", required_argument, NULL, OPT_STRIDE},
        {"max-eval-tokens", required_argument, NULL, OPT_MAXEVAL},
        {"prompts", required_argument, NULL, OPT_PROMPTS},
        {"agree-tokens", required_argument, NULL, OPT_AGREE},
        {"manifest", required_argument, NULL, OPT_MANIFEST},
        {"shapes", required_argument, NULL, OPT_SHAPES},
        {"m", required_argument, NULL, OPT_M},
        {"formats", required_argument, NULL, OPT_FORMATS},
        {"kernels", required_argument, NULL, OPT_KERNELS},
        {"iters", required_argument, NULL, OPT_ITERS},
        {"json", required_argument, NULL, OPT_JSON},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"peak-tflops", required_argument, NULL, OPT_PEAK},
        {"out", required_argument, NULL, OPT_OUT},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int ch;
    long iv;
    while ((ch = getopt_long(argc, argv, ":vhn:", opts, NULL)) != -1) {
        switch (ch) {
        case OPT_CONFIG: c.config_path = optarg; c.config_required = 1; break;
        case OPT_POLICY: c.policy_path = optarg; break;
        case OPT_PLUGIN_PATH: c.plugin_path = optarg; break;
        case OPT_MODEL_CONFIG: c.model_config = optarg; break;
        case OPT_MODEL: c.model_path = optarg; c.model_from_flag = 1; break;
        case OPT_FORMAT: c.format = optarg; break;
        case OPT_KV: c.kv_format = optarg; break;
        case OPT_PROMPT: c.prompt = optarg; break;
        case OPT_RAW: c.raw = 1; break;
        case OPT_TEXT: c.text_path = optarg; break;
        case OPT_PROMPTS: c.prompts_path = optarg; break;
        case OPT_MANIFEST: c.manifest = optarg; break;
        case OPT_SHAPES: c.gb_shapes = optarg; break;
        case OPT_M: c.gb_m = optarg; break;
        case OPT_FORMATS: c.gb_formats = optarg; break;
        case OPT_KERNELS: c.gb_kernels = optarg; break;
        case OPT_ITERS: c.gb_iters = optarg; break;
        case OPT_JSON: c.gb_json = optarg; break;
        case OPT_DEVICE: c.gb_device = optarg; break;
        case OPT_PEAK: c.gb_peak = optarg; break;
        case OPT_OUT: c.gb_out = optarg; break;
        case 'n':
            if (cli_parse_int("--max-tokens", optarg, 1, 1 << 20, &iv)) return EXIT_USAGE;
            c.max_tokens = (int)iv;
            break;
        case OPT_TOPK:
            if (cli_parse_int("--top-k", optarg, 0, 1 << 22, &iv)) return EXIT_USAGE;
            c.top_k = (int)iv;
            break;
        case OPT_SEED:
            if (cli_parse_int("--seed", optarg, 0, 0x7fffffffL, &iv)) return EXIT_USAGE;
            c.seed = (unsigned long long)iv;
            break;
        case OPT_CTX:
            if (cli_parse_int("--ctx", optarg, 16, 1 << 20, &iv)) return EXIT_USAGE;
            c.ctx = (int)iv;
            break;
        case OPT_THREADS:
            if (cli_parse_int("--threads", optarg, 1, 256, &iv)) return EXIT_USAGE;
            c.threads = (int)iv;
            break;
        case OPT_WINDOW:
            if (cli_parse_int("--window", optarg, 2, 1 << 16, &iv)) return EXIT_USAGE;
            c.window = (int)iv;
            break;
        case OPT_STRIDE:
            if (cli_parse_int("--stride", optarg, 1, 1 << 16, &iv)) return EXIT_USAGE;
            c.stride = (int)iv;
            break;
        case OPT_MAXEVAL:
            if (cli_parse_int("--max-eval-tokens", optarg, 2, 1L << 30, &iv)) return EXIT_USAGE;
            c.max_eval_tokens = iv;
            break;
        case OPT_AGREE:
            if (cli_parse_int("--agree-tokens", optarg, 0, 4096, &iv)) return EXIT_USAGE;
            c.agree_tokens = (int)iv;
            break;
        case OPT_TEMP:
            if (parse_real("--temperature", optarg, 0, 100, &c.temperature)) return EXIT_USAGE;
            break;
        case OPT_TOPP:
            if (parse_real("--top-p", optarg, 0, 1, &c.top_p)) return EXIT_USAGE;
            break;
        case 'v': qc_set_log_level(QC_LOG_DEBUG); break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION:
            printf("qcore %s (plugin ABI %u)\n", qc_version(), QC_PLUGIN_ABI_VERSION);
            return 0;
        case ':':
            fprintf(stderr, "qcore: option '%s' needs a value (see qcore --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "qcore: unknown option '%s' (see qcore --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (c.stride > c.window) {
        fprintf(stderr, "qcore: --stride %d is larger than --window %d: tokens would be skipped\n", c.stride,
                c.window);
        return EXIT_USAGE;
    }
    if (optind < argc) c.command = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "qcore: unexpected argument '%s' (see qcore --help)\n", argv[optind]);
        return EXIT_USAGE;
    }
    static const char *commands[] = {"run", "eval", "plugins", "formats", "inspect", "gemm-bench", NULL};
    if (c.command) {
        int known = 0;
        for (const char **k = commands; *k; k++) known |= strcmp(*k, c.command) == 0;
        if (!known) {
            fprintf(stderr,
                    "qcore: unknown command '%s' (commands: run, eval, plugins, formats, inspect, bench, gemm-bench)\n",
                    c.command);
            return EXIT_USAGE;
        }
    }
    if (c.text_path && access(c.text_path, R_OK) != 0) {
        fprintf(stderr, "qcore: text file '%s' does not exist or cannot be read\n", c.text_path);
        return EXIT_USAGE;
    }
    if (c.prompts_path && access(c.prompts_path, R_OK) != 0) {
        fprintf(stderr, "qcore: prompts file '%s' does not exist or cannot be read\n", c.prompts_path);
        return EXIT_USAGE;
    }
    int rc = cli_load_runtime(&c);
    if (rc) {
        qc_config_free(c.cfg);
        return rc;
    }
    if (!c.command) {
        printf("qcore %s (plugin ABI %u)\n", qc_version(), QC_PLUGIN_ABI_VERSION);
        if (c.model_path && access(c.model_path, R_OK) == 0) {
            rc = cmd_run(&c, 1);
        } else {
            /* no model yet: what the policy would do for the configured shapes */
            print_device(&c.dev);
            print_plugins(&c, 0);
            if (c.model_config) rc = print_dispatch(&c);
            if (c.model_path) {
                fprintf(stderr, "qcore: model '%s' is missing; the default model is fetched by "
                                "`bash scripts/setup.sh`\n", c.model_path);
                rc = 1;
            }
        }
    } else if (strcmp(c.command, "run") == 0) {
        rc = cmd_run(&c, 0);
    } else if (strcmp(c.command, "eval") == 0) {
        if (!c.prompts_path) c.prompts_path = qc_config_get(c.cfg, "eval", "prompts");
        rc = cmd_eval(&c);
    } else if (strcmp(c.command, "plugins") == 0) {
        print_plugins(&c, 1);
    } else if (strcmp(c.command, "formats") == 0) {
        print_formats(&c);
    } else if (strcmp(c.command, "gemm-bench") == 0) {
        rc = cmd_gemm_bench(&c);
    } else if (strcmp(c.command, "inspect") == 0) {
        print_device(&c.dev);
        print_eligibility(&c);
        print_kernel_eligibility(&c);
        print_kv_eligibility(&c);
        if (c.model_from_flag)
            rc = cmd_inspect_model(&c); /* the model's own layers, prepared weights and bytes */
        else if (c.model_config) {
            c.gpu_table = 1; /* the GPU engine's table when there is a device */
            rc = print_dispatch(&c);
        }
    }
    qc_runtime_close(c.rt);
    qc_config_free(c.cfg);
    return rc;
}
