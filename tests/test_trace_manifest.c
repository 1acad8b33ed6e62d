/* test_trace_manifest.c - QCORE_TRACE on the CPU backend (one event per kernel call, JSON that parses) and run manifests, on a tiny model written here. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_manifest.h"
#include "qc_report.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

enum { H = 64, F = 128, L = 2, NH = 4, NKV = 2, HD = 16, V = 96 };

typedef struct tensor {
    char name[96];
    int64_t rows, cols; /* cols 0: a vector */
} tensor;

/* A Llama folder: config.json and model.safetensors with f32 tensors. */
static int write_model(const char *dir) {
    tensor t[64];
    int n = 0;
#define T(r, c, ...) (snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__), t[n].rows = (r), t[n].cols = (c), n++)
    T(V, H, "model.embed_tokens.weight");
    for (int b = 0; b < L; b++) {
        T(NH * HD, H, "model.layers.%d.self_attn.q_proj.weight", b);
        T(NKV * HD, H, "model.layers.%d.self_attn.k_proj.weight", b);
        T(NKV * HD, H, "model.layers.%d.self_attn.v_proj.weight", b);
        T(H, NH * HD, "model.layers.%d.self_attn.o_proj.weight", b);
        T(F, H, "model.layers.%d.mlp.gate_proj.weight", b);
        T(F, H, "model.layers.%d.mlp.up_proj.weight", b);
        T(H, F, "model.layers.%d.mlp.down_proj.weight", b);
        T(H, 0, "model.layers.%d.input_layernorm.weight", b);
        T(H, 0, "model.layers.%d.post_attention_layernorm.weight", b);
    }
    T(H, 0, "model.norm.weight");
    T(V, H, "lm_head.weight");
#undef T
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %d, "
               "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
               "\"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 256, "
               "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000, \"tie_word_embeddings\": false}\n",
            H, F, L, NH, NKV, HD, V);
    fclose(f);
    qc_sbuf hdr = {0};
    size_t off = 0;
    qc_sbuf_printf(&hdr, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1) * 4;
        if (t[i].cols)
            qc_sbuf_printf(&hdr, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                           i ? "," : "", t[i].name, (long long)t[i].rows, (long long)t[i].cols, off, off + bytes);
        else
            qc_sbuf_printf(&hdr, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                           i ? "," : "", t[i].name, (long long)t[i].rows, off, off + bytes);
        off += bytes;
    }
    qc_sbuf_printf(&hdr, "}");
    while (hdr.len % 8) qc_sbuf_printf(&hdr, " ");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t hl = hdr.len;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr.data, 1, hdr.len, f);
    uint64_t rng = 12345;
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1);
        for (size_t j = 0; j < cnt; j++) {
            /* norms near 1, weights ~ 1/sqrt(k) */
            float v = t[i].cols ? qc_test_uniform(&rng) * 1.7f / sqrtf((float)t[i].cols)
                                : 1.0f + 0.1f * qc_test_uniform(&rng);
            fwrite(&v, 4, 1, f);
        }
    }
    fclose(f);
    qc_sbuf_free(&hdr);
    return 0;
}

/* attn.o asks for a format that does not exist, mlp.down raises: two stated fallbacks */
static const char *POLICY =
    "return {\n"
    "  prepare = function(layer) return { 'w4a16' } end,\n"
    "  choose = function(q)\n"
    "    if q.layer.role == 'attn.o' then return 'int3' end\n"
    "    if q.layer.role == 'mlp.down' then error('down is not mine') end\n"
    "    return 'w4a16', 'test'\n"
    "  end }\n";

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char dir[] = "/tmp/qc_test_trace_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    CHECK(write_model(dir) == 0, "write the model");
    char trace[600], man[600], man2[600], pol_path[600], st_path[600];
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    snprintf(man, sizeof man, "%s/run.manifest.json", dir);
    snprintf(man2, sizeof man2, "%s/m2.json", dir);
    snprintf(pol_path, sizeof pol_path, "%s/policy.lua", dir);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    FILE *pf = fopen(pol_path, "w");
    CHECK(pf != NULL, "policy file");
    if (pf) fputs(POLICY, pf), fclose(pf);

    char err[1024];
    qc_runtime_options ro = {.struct_size = sizeof ro, .skip_default_dirs = 1, .skip_env = 1,
                             .plugin_path = QC_TEST_PLUGIN_DIR};
    qc_runtime *rt = qc_runtime_open(&ro, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    qc_policy *pol = qc_policy_open(pol_path, NULL, err, sizeof err);
    CHECK(pol != NULL, "%s", err);
    setenv("QCORE_TRACE", trace, 1);
    qc_model_options mo = {.struct_size = sizeof mo, .path = dir, .policy = pol, .max_context = 64, .threads = 2};
    qc_model *m = rt && pol ? qc_model_open(rt, &mo, err, sizeof err) : NULL;
    unsetenv("QCORE_TRACE");
    CHECK(m != NULL, "open: %s", err);
    if (!m) return qc_test_finish("test_trace_manifest");

    /* a prompt of 5 and two decode steps */
    int32_t toks[5] = {3, 14, 15, 92, 65};
    float *logits = malloc(sizeof(float) * V);
    CHECK(qc_model_forward(m, toks, 5, logits, 0, err, sizeof err) == QC_OK, "prefill: %s", err);
    for (int i = 0; i < 2; i++) {
        int32_t t = (int32_t)(7 + i);
        CHECK(qc_model_forward(m, &t, 1, logits, 0, err, sizeof err) == QC_OK, "decode: %s", err);
    }
    size_t calls = qc_model_kernel_calls(m);
    /* per forward: 7 linears and attention per block, the head */
    CHECK(calls == 3 * (L * 8 + 1), "kernel calls %zu", calls);

    /* manifests: the CPU's own and the shared writer given the CPU table */
    CHECK(qc_model_write_manifest(m, man, "run", pol_path, "{\"generated_tokens\": 2}", err, sizeof err) == QC_OK,
          "%s", err);
    qc_model_shape shape = *qc_model_shape_of(m);
    qc_manifest_info mi = {.command = "eval", .model_path = dir, .shape = &shape, .rt = rt,
                           .table = qc_model_dispatch(m), .policy_path = pol_path, .kv_format = "bf16",
                           .quality_results = "quality.json", .perf_results = "perf.json", .trace = trace};
    CHECK(qc_manifest_write(man2, &mi, err, sizeof err) == QC_OK, "%s", err);
    qc_model_close(m); /* writes the trace */
    qc_policy_close(pol);

    /* the trace: JSON, one complete event per kernel call, with the arguments */
    json_error_t je;
    json_t *root = json_load_file(trace, 0, &je);
    CHECK(root != NULL, "trace does not parse: %s (line %d)", je.text, je.line);
    json_t *ev = json_object_get(root, "traceEvents");
    CHECK(json_array_size(ev) == calls, "trace events %zu, kernel calls %zu", json_array_size(ev), calls);
    size_t lin = 0, att = 0, bad = 0, w4 = 0;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        json_t *a = json_object_get(e, "args");
        const char *cat = json_string_value(json_object_get(e, "cat"));
        const char *name = json_string_value(json_object_get(e, "name"));
        int ok = cat && name && json_is_string(json_object_get(e, "ph")) &&
                 !strcmp(json_string_value(json_object_get(e, "ph")), "X") &&
                 json_number_value(json_object_get(e, "dur")) >= 0 && json_is_string(json_object_get(a, "plugin")) &&
                 json_is_string(json_object_get(a, "format")) && json_is_string(json_object_get(a, "layer")) &&
                 json_is_integer(json_object_get(a, "M")) && json_is_integer(json_object_get(a, "N")) &&
                 json_is_integer(json_object_get(a, "K"));
        if (!ok && bad++ == 0) fprintf(stderr, "bad event %zu\n", i);
        if (cat && !strcmp(cat, "linear")) {
            lin++;
            /* name = kernel id, layer in args, M = rows of the step */
            const char *fmt = json_string_value(json_object_get(a, "format"));
            if (fmt && !strcmp(fmt, "w4a16")) w4++;
            if (i == 0)
                CHECK(!strcmp(name, json_string_value(json_object_get(a, "kernel"))) &&
                          !strcmp(json_string_value(json_object_get(a, "layer")), "blk.0.attn.q") &&
                          json_integer_value(json_object_get(a, "M")) == 5 &&
                          json_integer_value(json_object_get(a, "N")) == NH * HD,
                      "first event: %s", name);
        }
        if (cat && !strcmp(cat, "attention")) att++;
    }
    CHECK(bad == 0, "%zu malformed events", bad);
    CHECK(lin == 3 * (L * 7 + 1) && att == 3 * L, "linear %zu attention %zu", lin, att);
    /* the two refused answers fall back to the policy's prepared w4a16, so every linear runs it */
    CHECK(w4 == 3 * (L * 7 + 1), "w4a16 events %zu", w4);
    json_decref(root);

    /* the CPU manifest: file hashes, per-layer recipe per bucket, fallbacks */
    char sha[65];
    CHECK(qc_sha256_file(st_path, sha, err, sizeof err) == QC_OK, "%s", err);
    root = json_load_file(man, 0, &je);
    CHECK(root != NULL, "manifest does not parse: %s", je.text);
    json_t *files = json_object_get(json_object_get(root, "model"), "files");
    CHECK(json_array_size(files) == 1 &&
              !strcmp(json_string_value(json_object_get(json_array_get(files, 0), "sha256")), sha),
          "model file hash");
    json_t *disp = json_object_get(root, "dispatch");
    CHECK(json_array_size(disp) == 8, "dispatch rows %zu (7 roles folded over 2 blocks, the head)",
          json_array_size(disp));
    json_t *row = json_array_get(disp, 0);
    CHECK(row && !strcmp(json_string_value(json_object_get(row, "layers")), "blk.0-1.attn.q") &&
              !strcmp(json_string_value(json_object_get(json_array_get(json_object_get(row, "decode"), 0), "format")),
                      "w4a16"),
          "first row");
    char *dump = json_dumps(json_object_get(root, "fallbacks"), 0);
    CHECK_CONTAINS(dump, "'int3', which is not a registered format");
    CHECK_CONTAINS(dump, "down is not mine");
    free(dump);
    json_decref(root);

    /* the shared writer (what bench uses) with the CPU table */
    root = json_load_file(man2, 0, &je);
    CHECK(root != NULL, "manifest 2 does not parse: %s", je.text);
    files = json_object_get(json_object_get(root, "model"), "files");
    int found = 0;
    json_array_foreach(files, i, e) found |= strstr(json_string_value(json_object_get(e, "path")), "model.safetensors") &&
                                             !strcmp(json_string_value(json_object_get(e, "sha256")), sha);
    CHECK(found && json_array_size(files) == 2, "model files (config + weights) with hashes");
    CHECK(json_array_size(json_object_get(json_object_get(root, "recipe"), "dispatch")) == 8, "recipe rows");
    json_t *fb = json_object_get(json_object_get(root, "policy"), "fallbacks");
    CHECK(json_array_size(fb) == 2, "fallbacks %zu (int3 and the raise, each once)", json_array_size(fb));
    CHECK(json_string_value(json_object_get(json_object_get(root, "policy"), "sha256")) &&
              strlen(json_string_value(json_object_get(json_object_get(root, "policy"), "sha256"))) == 64,
          "policy hash");
    CHECK(json_is_string(json_object_get(json_object_get(root, "device"), "nvrtc")), "nvrtc version");
    CHECK(json_array_size(json_object_get(root, "plugins")) >= 2, "plugin versions");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(root, "results"), "performance")), "perf.json") &&
              !strcmp(json_string_value(json_object_get(json_object_get(root, "results"), "quality")), "quality.json"),
          "result links");
    CHECK(!strcmp(json_string_value(json_object_get(root, "kv_cache")), "bf16"), "kv format");
    json_decref(root);

    free(logits);
    qc_runtime_close(rt);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    return qc_test_finish("test_trace_manifest");
}
