/* qcore_cli.h - state shared by the command-line tool's files. */
#ifndef QCORE_CLI_H
#define QCORE_CLI_H

#include "qc_util.h"

#define EXIT_USAGE 2

typedef struct cli {
    const char *config_path;
    int config_required;
    const char *policy_path;
    const char *plugin_path;
    const char *model_config;
    const char *model_path;
    int model_from_flag;       /* --model given: inspect loads it */
    const char *format;        /* --format: one format for every linear layer */
    const char *kv_format;
    const char *prompt;
    const char *text_path;     /* eval --text */
    int max_tokens;
    double temperature;
    int top_k;
    double top_p;
    unsigned long long seed;
    int raw;                   /* no chat template */
    int threads;
    int ctx;
    int window, stride;        /* eval */
    long max_eval_tokens;
    const char *prompts_path;  /* eval greedy agreement */
    int agree_tokens;
    const char *manifest;      /* --manifest FILE ("-" = none); default runs/<time>-<command>.json */
    /* gemm-bench options, parsed by cmd_gemm_bench (NULL = default) */
    const char *gb_shapes, *gb_m, *gb_formats, *gb_kernels, *gb_iters, *gb_json, *gb_device, *gb_peak, *gb_out;
    const char *command;
    int gpu_table;             /* inspect: the GPU engine's table when a device opens */
    qc_config *cfg;
    qc_runtime *rt;
    qc_device_info dev;
} cli;

int cmd_run(cli *c, int overview);
/* `qcore bench ...` with its own options (argv[0] is "bench"). */
int cmd_bench(int argc, char **argv);
/* Config, runtime and device probe from the parsed options; 0 or an exit code. */
int cli_load_runtime(cli *c);
/* An integer option in [lo, hi]; prints the flag and value and returns -1 otherwise. */
int cli_parse_int(const char *flag, const char *v, long lo, long hi, long *out);
int cmd_eval(cli *c);
int cmd_inspect_model(cli *c);
/* Time each format's GPU linear kernels over layer shapes and M (needs a CUDA device). */
int cmd_gemm_bench(cli *c);
/* The dispatch table and KV decision for the configured model config. */
int print_dispatch(cli *c);
void print_device(const qc_device_info *d);

#endif
