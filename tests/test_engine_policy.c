/* test_engine_policy.c - the GPU engine's dispatch plan without a GPU: measured times reach the policy, the disk cache (hit, corrupt), fallbacks, run-time rebuilds. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_engine_policy.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

static qc_runtime *rt;
static qc_model_shape shape;
static int timer_calls;
static qc_policy *cur_pol; /* the plan asks it again on rebuilds: closed with the plan */
static char cache_dir[256];

/* Stand-in timings: w4a16 cheapest for small M, fp8 from M = 8 on, the
 * others slower; w8a8_int8 has no kernel from M = 64 on. */
static qc_status fake_timer(void *ctx, const qc_format_desc *f, int64_t n, int64_t k, const int64_t *ms, size_t n_ms,
                            double *us, char (*kernel)[64], qc_reason *why, char *err, size_t errlen) {
    (void)ctx, (void)n, (void)k, (void)err, (void)errlen;
    timer_calls++;
    for (size_t i = 0; i < n_ms; i++) {
        double m = (double)ms[i];
        snprintf(kernel[i], 64, "fake.%s", f->name);
        memset(&why[i], 0, sizeof why[i]);
        if (!strcmp(f->name, "w4a16"))
            us[i] = 10 + m;
        else if (!strcmp(f->name, "fp8"))
            us[i] = 14 + 0.2 * m;
        else if (!strcmp(f->name, "bf16"))
            us[i] = 30 + 0.5 * m;
        else if (!strcmp(f->name, "w8a8_int8") && ms[i] >= 64) {
            us[i] = -1;
            qc_reason_set(&why[i], "m_range", "w8a8_int8: no kernel for M = %lld (test)", (long long)ms[i]);
        } else
            us[i] = 1000 + m;
    }
    return QC_OK;
}

/* The engine's rule: the head runs in bf16 only. */
static int fake_can_hold(void *ctx, size_t li, const qc_format_desc *f, qc_reason *why) {
    (void)ctx;
    if (li == (size_t)shape.n_layers * 4 && strcmp(f->name, "bf16") != 0) {
        qc_reason_set(why, "missing", "the GPU engine runs lm_head in bf16 only (test)");
        return 0;
    }
    return 1;
}

static qc_eplan *plan_for(const char *name, const char *src, int use_cache) {
    char err[1024];
    qc_policy_limits lim = {.struct_size = sizeof lim, .instructions = 1000000, .wall_ms = 1000};
    qc_policy *pol = src ? qc_policy_open_string(src, strlen(src), name, &lim, err, sizeof err)
                         : qc_policy_open(name, NULL, err, sizeof err);
    CHECK(pol != NULL, "%s: %s", name, err);
    if (!pol) return NULL;
    qc_eplan_options o = {.rt = rt, .shape = &shape, .policy = pol, .sm = 90, .sm_count = 132,
                          .device_name = "test device", .bandwidth_gbs = 4000, .max_seqs = 256, .max_step = 2048,
                          .timer = fake_timer, .can_hold = fake_can_hold, .cache_dir = use_cache ? cache_dir : NULL};
    qc_eplan *p = qc_eplan_build(&o, err, sizeof err);
    CHECK(p != NULL, "%s: %s", name, err);
    if (!p) qc_policy_close(pol);
    cur_pol = p ? pol : NULL;
    return p;
}

static void done(qc_eplan *p) {
    qc_eplan_free(p);
    qc_policy_close(cur_pol);
    cur_pol = NULL;
}

static char *print_plan(const qc_eplan *p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    qc_eplan_print(p, f);
    fclose(f);
    return buf;
}

static const char *format_at(const qc_eplan *p, size_t li, qc_phase ph, int64_t m) {
    const qc_dispatch_entry *e = qc_dispatch_lookup(qc_eplan_table(p), li, ph, m);
    return e ? e->format : "(none)";
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options ro = {.struct_size = sizeof ro, .skip_default_dirs = 1, .skip_env = 1,
                             .plugin_path = QC_TEST_PLUGIN_DIR};
    rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt || qc_model_shape_load("configs/llama-3-8b.json", &shape, err, sizeof err) != QC_OK) {
        CHECK(0, "set-up (run from the source root): %s", err);
        if (rt) qc_runtime_close(rt);
        return qc_test_finish("test_engine_policy");
    }
    snprintf(cache_dir, sizeof cache_dir, "/tmp/qc_test_engine_policy.%d", (int)getpid());

    /* the engine's layer list: 4 per block (fused shapes) and the head */
    qc_layer_list *ll = qc_eplan_layer_list(&shape);
    CHECK(ll && ll->n == 32 * 4 + 1, "layers");
    if (ll) {
        CHECK(strcmp(ll->layers[0].name, "blk.0.attn.qkv") == 0 && strcmp(ll->layers[0].role, "attn.q") == 0 &&
                  ll->layers[0].n == 6144 && ll->layers[0].k == 4096, "fused qkv asked as attn.q with N = 6144");
        CHECK(strcmp(ll->layers[2].role, "mlp.gate") == 0 && ll->layers[2].n == 28672, "fused gate|up");
        CHECK(strcmp(ll->layers[128].role, "lm_head") == 0 && ll->layers[128].n == 128256, "head");
    }
    qc_layer_list_free(ll);

    /* measured.lua picks by time_us: the stand-in says w4a16 up to M = 4, fp8 from 8 */
    timer_calls = 0;
    qc_eplan *p = plan_for("policies/measured.lua", NULL, 1);
    int first_calls = timer_calls;
    CHECK(first_calls > 0, "nothing was timed");
    if (p) {
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 1), "w4a16") == 0, "b1: %s", format_at(p, 0, QC_PHASE_DECODE, 1));
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 4), "w4a16") == 0, "b4");
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 8), "fp8") == 0, "b8: %s", format_at(p, 0, QC_PHASE_DECODE, 8));
        CHECK(strcmp(format_at(p, 3, QC_PHASE_PREFILL, 2048), "fp8") == 0, "prefill 2048");
        CHECK(strcmp(format_at(p, 128, QC_PHASE_DECODE, 1), "bf16") == 0, "head bf16");
        CHECK(qc_eplan_time(p, "w4a16", 6144, 4096, 16) == 26, "time kept: %g", qc_eplan_time(p, "w4a16", 6144, 4096, 16));
        /* every decode bucket 1..256 and prefill 1..2048 is in the table */
        CHECK(qc_dispatch_count(qc_eplan_table(p)) == (size_t)129 * (9 + 12), "entries %zu",
              qc_dispatch_count(qc_eplan_table(p)));
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "b1-4 w4a16, b8-256 fp8");
        CHECK_CONTAINS(text, "blk.0-31");
        /* nothing times the head: measured.lua asks for its roofline choice there, which the engine refuses;
         * the stand-in's w4a16 ceiling (234 TFLOP/s at 4000 GB/s) puts that crossover at 15.1: buckets 1-8 */
        CHECK_CONTAINS(text, "measured ceilings (TFLOP/s or TOP/s at the largest bucket): bf16 456 w4a16 234");
        CHECK_CONTAINS(text, "wanted w4a16 -> used bf16, 8 entries from lm_head decode b1: missing: the GPU engine "
                             "runs lm_head in bf16 only (test)");
        CHECK_CONTAINS(text, "measured now");
        CHECK_CONTAINS(text, "bf16 ");
        free(text);
        /* the head is bf16 by the engine's rule, not a fallback: measured.lua asks for the fastest eligible */
        size_t nf = 0;
        const qc_format_desc *fs[8];
        nf = qc_eplan_layer_formats(p, 0, fs, 8);
        CHECK(nf == 2 && !strcmp(fs[0]->name, "w4a16") && !strcmp(fs[1]->name, "fp8"), "qkv keeps w4a16 + fp8 (%zu)", nf);
        done(p);
    }

    /* the same again: every time from the disk cache */
    timer_calls = 0;
    p = plan_for("policies/measured.lua", NULL, 1);
    CHECK(timer_calls == 0, "cache missed: %d timer calls", timer_calls);
    if (p) {
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 8), "fp8") == 0, "cached b8");
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "from the disk cache");
        free(text);
        done(p);
    }

    /* a corrupt cache: said, measured again, rewritten as valid JSON */
    char hash[65], path[512];
    qc_eplan_kernel_hash(rt, "test device", 90, hash);
    snprintf(path, sizeof path, "%s/timings-%.16s.json", cache_dir, hash);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (f) {
        fputs("{\"timings\": [ {\"format\": \"w4a16\", \"n\": 1", f);
        fclose(f);
    }
    timer_calls = 0;
    p = plan_for("policies/measured.lua", NULL, 1);
    CHECK(timer_calls == first_calls, "corrupt cache: %d timer calls, want %d", timer_calls, first_calls);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(root && json_array_size(json_object_get(root, "timings")) > 0, "rewritten cache: %s", root ? "" : je.text);
    json_decref(root);
    done(p);

    /* a policy that raises: every entry a stated fallback to its prepared format */
    p = plan_for("raises.lua",
                 "return { prepare = function() return {'fp8'} end, choose = function(q) error('no answer') end }", 0);
    if (p) {
        CHECK(strcmp(format_at(p, 5, QC_PHASE_DECODE, 1), "fp8") == 0, "raise falls back to the prepared fp8");
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "wanted ? -> used fp8");
        CHECK_CONTAINS(text, "policy: raises.lua:1: no answer");
        free(text);
        done(p);
    }
    /* a policy that loops: stopped once, not asked again, stated */
    p = plan_for("loops.lua", "return { choose = function(q) while true do end end }", 0);
    if (p) {
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 1), "bf16") == 0, "loop falls back to bf16");
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "instruction");
        CHECK_CONTAINS(text, "policy not asked");
        free(text);
        done(p);
    }
    /* an unknown format */
    p = plan_for("unknown.lua", "return { choose = function(q) return 'int3' end }", 0);
    if (p) {
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "wanted int3 -> used bf16");
        CHECK_CONTAINS(text, "'int3', which is not a registered format");
        free(text);
        done(p);
    }
    /* ineligible on this device: no w8a8_int8 kernel from M = 64 (the timer's refusal), no 8-bit head */
    p = plan_for("int8.lua", "return { choose = function(q) return 'w8a8_int8' end }", 0);
    if (p) {
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 32), "w8a8_int8") == 0, "int8 at 32");
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 64), "bf16") == 0, "int8 refused at 64: %s",
              format_at(p, 0, QC_PHASE_DECODE, 64));
        char *text = print_plan(p);
        CHECK_CONTAINS(text, "wanted w8a8_int8 -> used bf16");
        CHECK_CONTAINS(text, "m_range: w8a8_int8: no kernel for M = 64 (test)");
        CHECK_CONTAINS(text, "missing: the GPU engine runs lm_head in bf16 only (test)");
        free(text);
        /* a run-time failure: the format refused for that layer, the table rebuilt, the fallback stated */
        int gen = qc_eplan_generation(p);
        CHECK(qc_eplan_fail(p, 1, "w8a8_int8", "compile", "kernel x failed to load", err, sizeof err) == QC_OK, "%s", err);
        CHECK(qc_eplan_generation(p) == gen + 1, "rebuilt");
        CHECK(strcmp(format_at(p, 1, QC_PHASE_DECODE, 1), "bf16") == 0, "layer 1 now bf16");
        CHECK(strcmp(format_at(p, 5, QC_PHASE_DECODE, 1), "bf16") == 0, "block 1's o (same shape) now bf16");
        CHECK(strcmp(format_at(p, 0, QC_PHASE_DECODE, 1), "w8a8_int8") == 0, "qkv (another shape) unchanged");
        CHECK(qc_eplan_fail(p, 1, "w8a8_int8", "compile", "again", err, sizeof err) == QC_OK &&
                  qc_eplan_generation(p) == gen + 1, "a known failure does not rebuild");
        text = print_plan(p);
        CHECK_CONTAINS(text, "compile: kernel x failed to load (at run time)");
        CHECK_CONTAINS(text, "run-time failures");
        free(text);
        /* fallbacks as JSON (the manifest's list): each distinct one once */
        json_t *arr = json_array();
        qc_eplan_fallbacks_json(p, arr);
        /* per distinct reason: M = 64 .. 2048 (six texts), the head, the run-time failure */
        CHECK(json_array_size(arr) == 8, "fallbacks: %zu", json_array_size(arr));
        for (size_t i = 0; i < json_array_size(arr); i++)
            for (size_t j = 0; j < i; j++) {
                json_t *a = json_array_get(arr, i), *b = json_array_get(arr, j);
                CHECK(!json_equal(json_object_get(a, "reason"), json_object_get(b, "reason")) ||
                          !json_equal(json_object_get(a, "wanted"), json_object_get(b, "wanted")),
                      "fallback %zu repeats %zu", i, j);
            }
        json_decref(arr);
        done(p);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    CHECK(system(cmd) == 0, "cleanup");
    qc_runtime_close(rt);
    return qc_test_finish("test_engine_policy");
}
