/* qc_manifest.c - run manifests of the GPU engine (bench) and the dispatch-table recipe shared with the CPU's. */
#define _POSIX_C_SOURCE 200809L
#include "qc_manifest.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "qc_engine.h"
#include "qc_engine_policy.h"
#include "qc_internal.h"
#include "qc_report.h"

#ifndef QC_GIT_COMMIT
#define QC_GIT_COMMIT "unknown"
#endif

/* One phase of one layer: [{"batches": "1-16", "format": ..., "wanted": ...}, ...] */
static json_t *phase_json(const qc_dispatch *d, size_t layer, qc_phase ph, char *key, size_t keylen) {
    json_t *arr = json_array();
    const qc_dispatch_entry *run = NULL, *prev = NULL;
    qc_sbuf k = {0};
    for (size_t i = 0; i <= qc_dispatch_count(d); i++) {
        const qc_dispatch_entry *e = i < qc_dispatch_count(d) ? qc_dispatch_get(d, i) : NULL;
        if (e && (e->layer != layer || e->phase != ph)) continue;
        if (run && (!e || strcmp(e->format, run->format) != 0 || strcmp(e->wanted, run->wanted) != 0)) {
            char b[48];
            if (run == prev)
                snprintf(b, sizeof b, "%lld", (long long)run->batch);
            else
                snprintf(b, sizeof b, "%lld-%lld", (long long)run->batch, (long long)prev->batch);
            json_t *o = json_pack("{s:s,s:s,s:s}", "batches", b, "format", run->format, "wanted", run->wanted);
            if (o && run->fallback.code[0]) json_object_set_new(o, "fallback", json_string(run->fallback.code));
            if (o) json_array_append_new(arr, o);
            qc_sbuf_printf(&k, "%s:%s:%s;", b, run->format, run->wanted);
            run = NULL;
        }
        if (!e) break;
        if (!run) run = e;
        prev = e;
    }
    qc_strlcpy(key, k.data ? k.data : "", keylen);
    qc_sbuf_free(&k);
    return arr;
}

void *qc_manifest_dispatch_json(const qc_dispatch *d) {
    const qc_layer_list *L = qc_dispatch_layers(d);
    json_t *rows = json_array();
    char *done = calloc(L->n, 1);
    if (!done) return rows;
    char ka[1024], kb[1024], kc[1024], kd[1024];
    for (size_t i = 0; i < L->n; i++) {
        if (done[i]) continue;
        const qc_policy_layer *a = &L->layers[i];
        json_t *dec = phase_json(d, i, QC_PHASE_DECODE, ka, sizeof ka);
        json_t *pre = phase_json(d, i, QC_PHASE_PREFILL, kb, sizeof kb);
        /* the same linear of the following blocks, while it decides the same */
        const char *suffix = strchr(a->name, '.') ? strchr(strchr(a->name, '.') + 1, '.') : NULL;
        int last = a->index;
        done[i] = 1;
        for (size_t j = i + 1; j < L->n && a->index >= 0; j++) {
            const qc_policy_layer *b = &L->layers[j];
            const char *sb = strchr(b->name, '.') ? strchr(strchr(b->name, '.') + 1, '.') : NULL;
            if (done[j] || b->index < 0 || !suffix || !sb || strcmp(suffix, sb) != 0 || b->n != a->n || b->k != a->k)
                continue;
            if (b->index != last + 1) break;
            json_decref(phase_json(d, j, QC_PHASE_DECODE, kc, sizeof kc));
            json_decref(phase_json(d, j, QC_PHASE_PREFILL, kd, sizeof kd));
            if (strcmp(ka, kc) != 0 || strcmp(kb, kd) != 0) break;
            done[j] = 1;
            last = b->index;
        }
        char name[64];
        if (a->index < 0)
            qc_strlcpy(name, a->name, sizeof name);
        else if (last == a->index)
            snprintf(name, sizeof name, "blk.%d%s", a->index, suffix ? suffix : "");
        else
            snprintf(name, sizeof name, "blk.%d-%d%s", a->index, last, suffix ? suffix : "");
        json_array_append_new(rows, json_pack("{s:s,s:s,s:I,s:I,s:o,s:o}", "layers", name, "role", a->role, "n",
                                              (json_int_t)a->n, "k", (json_int_t)a->k, "decode", dec, "prefill", pre));
    }
    free(done);
    return rows;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void hash_into(json_t *files, const char *path) {
    char sha[65], err[256];
    if (qc_sha256_file(path, sha, err, sizeof err) == QC_OK)
        json_array_append_new(files, json_pack("{s:s,s:s}", "path", path, "sha256", sha));
    else
        json_array_append_new(files, json_pack("{s:s,s:s}", "path", path, "error", err));
}

/* A file: itself; a folder: its config, tokenizer and weight files, sorted. */
static json_t *model_files(const char *path) {
    json_t *files = json_array();
    struct stat st;
    if (stat(path, &st) != 0) return files;
    if (!S_ISDIR(st.st_mode)) {
        hash_into(files, path);
        return files;
    }
    struct dirent **list = NULL;
    int n = scandir(path, &list, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *nm = list[i]->d_name;
        if (ends_with(nm, ".safetensors") || strcmp(nm, "config.json") == 0 || strcmp(nm, "tokenizer.json") == 0 ||
            ends_with(nm, ".gguf")) {
            char full[2048];
            snprintf(full, sizeof full, "%s/%s", path, nm);
            hash_into(files, full);
        }
        free(list[i]);
    }
    free(list);
    return files;
}

qc_status qc_manifest_write(const char *path, const qc_manifest_info *mi, char *err, size_t errlen) {
    if (!path || !mi || !mi->rt) {
        qc_errf(err, errlen, "manifest: needs a path and a runtime");
        return QC_ERR_INVALID;
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *root = json_pack("{s:s,s:s,s:s}", "manifest", "qcore run manifest 1", "command",
                             mi->command ? mi->command : "", "created", when);
    if (!root) {
        qc_errf(err, errlen, "out of memory building the manifest");
        return QC_ERR_NOMEM;
    }
    /* model */
    json_t *model = json_object();
    json_object_set_new(model, "synthetic", json_boolean(mi->synthetic));
    if (mi->model_path) {
        json_object_set_new(model, "path", json_string(mi->model_path));
        json_object_set_new(model, "files", model_files(mi->model_path));
    }
    if (mi->model_config) {
        json_t *cf = json_array();
        hash_into(cf, mi->model_config);
        json_object_set_new(model, "config", json_array_get(cf, 0) ? json_incref(json_array_get(cf, 0)) : json_null());
        json_decref(cf);
    }
    if (mi->synthetic)
        json_object_set_new(model, "weights", json_string("synthetic: random, made from the engine's seed"));
    if (mi->shape)
        json_object_set_new(model, "shape",
                            json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b}", "model_type", mi->shape->model_type,
                                      "hidden", mi->shape->hidden, "intermediate", mi->shape->intermediate,
                                      "n_layers", mi->shape->n_layers, "n_heads", mi->shape->n_heads, "n_kv_heads",
                                      mi->shape->n_kv_heads, "head_dim", mi->shape->head_dim, "vocab",
                                      mi->shape->vocab, "tied_embeddings", mi->shape->tied_embeddings));
    json_object_set_new(root, "model", model);
    /* recipe: the table per layer group, phase and bucket, and what is resident */
    const qc_eplan *plan = mi->engine ? (const qc_eplan *)qc_engine_plan(mi->engine) : NULL;
    const qc_dispatch *table = plan ? qc_eplan_table(plan) : mi->table;
    json_t *recipe = json_object();
    if (table)
        json_object_set_new(recipe, "dispatch", qc_manifest_dispatch_json(table));
    else
        json_object_set_new(recipe, "every_layer", json_string(mi->format ? mi->format : "bf16"));
    if (mi->engine) {
        json_object_set_new(recipe, "resident", qc_engine_recipe_json(mi->engine));
        json_object_set_new(recipe, "fused", json_string("q|k|v and gate|up run as one linear each; a policy is "
                                                          "asked for them as attn.q and mlp.gate"));
    }
    json_object_set_new(root, "recipe", recipe);
    json_object_set_new(root, "kv_cache", json_string(mi->kv_format ? mi->kv_format : "bf16"));
    if (mi->engine) { /* the KV format's scales and where they came from (issue 8) */
        qc_engine_kv_info kvi;
        qc_engine_get_kv_info(mi->engine, &kvi);
        json_object_set_new(root, "kv_cache_detail",
                            json_pack("{s:s,s:I,s:I,s:f,s:f,s:s}", "format", kvi.format, "elem_bytes",
                                      (json_int_t)kvi.elem_bytes, "variant", (json_int_t)kvi.variant, "k_scale",
                                      (double)kvi.k_scale, "v_scale", (double)kvi.v_scale, "scale_source",
                                      kvi.scale_source));
    }
    /* kernels and plugins */
    if (mi->engine) json_object_set_new(root, "kernels", qc_engine_kernels_json(mi->engine));
    json_t *plugins = json_array();
    for (size_t i = 0; i < qc_plugin_count(mi->rt); i++) {
        qc_plugin_info pi;
        qc_plugin_get(mi->rt, i, &pi);
        json_array_append_new(plugins, json_pack("{s:s,s:s,s:s,s:i}", "id", pi.id, "version", pi.version, "file",
                                                 pi.path, "abi", (int)pi.abi_version));
    }
    json_object_set_new(root, "plugins", plugins);
    /* device and toolchain */
    json_t *dev;
    if (mi->gpu) {
        const qc_gpu_info *gi = qc_gpu_get_info(mi->gpu);
        char arch[16];
        snprintf(arch, sizeof arch, "sm_%d", gi->sm);
        dev = json_pack("{s:s,s:s,s:i,s:I,s:i}", "name", gi->name, "arch", arch, "sms", gi->sm_count, "memory_bytes",
                        (json_int_t)gi->mem_total, "cuda_driver", gi->driver_version);
    } else {
        qc_device_info di;
        qc_device_probe(&di);
        dev = di.available ? json_pack("{s:s,s:i,s:i,s:s}", "name", di.name, "sm", di.sm, "cuda_driver",
                                       di.driver_version, "backend", "cpu reference")
                           : json_pack("{s:s,s:s}", "name", "cpu", "backend", "cpu reference");
    }
    char nvrtc[32] = "absent";
    if (mi->nvrtc) {
        int ma = 0, mn = 0;
        qc_nvrtc_version(mi->nvrtc, &ma, &mn);
        snprintf(nvrtc, sizeof nvrtc, "%d.%d", ma, mn);
    } else {
        qc_device_info di;
        qc_device_probe(&di);
        if (di.nvrtc_available) snprintf(nvrtc, sizeof nvrtc, "%d.%d", di.nvrtc_major, di.nvrtc_minor);
    }
    json_object_set_new(dev, "nvrtc", json_string(nvrtc));
    json_object_set_new(root, "device", dev);
    json_object_set_new(root, "runtime", json_pack("{s:s,s:s,s:i}", "engine", "qcore " QCORE_VERSION_STRING,
                                                   "engine_commit", QC_GIT_COMMIT, "plugin_abi",
                                                   (int)QC_PLUGIN_ABI_VERSION));
    /* policy */
    json_t *pol = json_object();
    if (mi->policy_path) {
        char sha[65] = "", herr[256];
        json_object_set_new(pol, "file", json_string(mi->policy_path));
        if (qc_sha256_file(mi->policy_path, sha, herr, sizeof herr) == QC_OK)
            json_object_set_new(pol, "sha256", json_string(sha));
    } else {
        json_object_set_new(pol, "file", json_null());
        json_object_set_new(pol, "format", json_string(mi->format ? mi->format : "bf16"));
    }
    if (table) json_object_set_new(pol, "name", json_string(qc_dispatch_policy(table)));
    json_object_set_new(pol, "fallback_rule", json_string("an answer that cannot run falls back to the policy's "
                                                          "prepared formats in order, then bf16; each is listed"));
    json_t *fb = json_array();
    if (plan) {
        qc_eplan_fallbacks_json(plan, fb);
        json_object_set_new(pol, "timings", json_string(qc_eplan_timing_source(plan)));
        const qc_policy_device *pd = qc_eplan_device(plan);
        json_object_set_new(pol, "device", json_pack("{s:f,s:f,s:f,s:f}", "bandwidth_gbs", pd->mem_bandwidth_gbs,
                                                     "bf16_tflops", pd->bf16_tflops, "fp8_tflops", pd->fp8_tflops,
                                                     "int8_tops", pd->int8_tops));
    } else if (table) {
        for (size_t i = 0; i < qc_dispatch_count(table); i++) {
            const qc_dispatch_entry *e = qc_dispatch_get(table, i);
            if (!e->fallback.code[0]) continue;
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++) {
                const qc_dispatch_entry *x = qc_dispatch_get(table, j);
                seen = x->fallback.code[0] && strcmp(x->wanted, e->wanted) == 0 && strcmp(x->format, e->format) == 0 &&
                       strcmp(x->fallback.text, e->fallback.text) == 0;
            }
            if (!seen)
                json_array_append_new(fb, json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "layer",
                                                    qc_dispatch_layers(table)->layers[e->layer].name, "phase",
                                                    qc_phase_name(e->phase), "batch", (json_int_t)e->batch, "wanted",
                                                    e->wanted, "used", e->format, "code", e->fallback.code, "reason",
                                                    e->fallback.text));
        }
    }
    json_object_set_new(pol, "fallbacks", fb);
    json_object_set_new(root, "policy", pol);
    /* links to results */
    json_t *links = json_object();
    json_object_set_new(links, "performance", mi->perf_results ? json_string(mi->perf_results) : json_null());
    json_object_set_new(links, "quality", mi->quality_results ? json_string(mi->quality_results) : json_null());
    json_object_set_new(links, "trace", mi->trace ? json_string(mi->trace) : json_null());
    json_object_set_new(root, "results", links);
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(root);
    if (rc != 0) {
        qc_errf(err, errlen, "%s: cannot write the manifest: %s", path, strerror(errno));
        return QC_ERR_IO;
    }
    return QC_OK;
}
