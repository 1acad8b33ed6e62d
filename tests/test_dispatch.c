/* test_dispatch.c - dispatch tables: policy answers, fallbacks with reasons, folding and lookup. */
#define _GNU_SOURCE
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

static const qc_policy_limits LIMITS = {
    .struct_size = sizeof(qc_policy_limits), .instructions = 1000000, .memory_bytes = 16u << 20, .wall_ms = 1000};

static qc_runtime *rt;
static qc_layer_list *layers;

static qc_dispatch *build(const char *name, const char *src) {
    char err[1024];
    qc_policy *p = NULL;
    if (src) {
        p = qc_policy_open_string(src, strlen(src), name, &LIMITS, err, sizeof err);
        CHECK(p != NULL, "%s: %s", name, err);
        if (!p) return NULL;
    }
    qc_dispatch_options o = {.struct_size = sizeof o};
    qc_dispatch *d = qc_dispatch_build(rt, p, layers, &o, err, sizeof err);
    CHECK(d != NULL, "%s: %s", name, err);
    qc_policy_close(p);
    return d;
}

static char *print_to_string(const qc_dispatch *d) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    qc_dispatch_print(d, f);
    fclose(f);
    return buf;
}

/* Every entry must run something and carry `code` as its fallback code. */
static void all_entries(const qc_dispatch *d, const char *format, const char *code, const char *needle) {
    size_t bad = 0;
    for (size_t i = 0; i < qc_dispatch_count(d); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(d, i);
        int ok = strcmp(e->format, format) == 0 && strcmp(e->fallback.code, code) == 0 &&
                 (!needle || strstr(e->fallback.text, needle));
        if (!ok && bad++ == 0)
            fprintf(stderr, "entry %zu: format %s wanted %s code '%s' text '%s'\n", i, e->format, e->wanted,
                    e->fallback.code, e->fallback.text);
    }
    CHECK(bad == 0, "%zu entries differ (expected %s, code '%s')", bad, format, code);
}

int main(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1,
                            .plugin_path = QC_TEST_PLUGIN_DIR};
    char err[512];
    rt = qc_runtime_open(&o, err, sizeof err);
    qc_model_shape shape;
    CHECK(qc_model_shape_load("configs/smollm2-135m.json", &shape, err, sizeof err) == QC_OK, "%s", err);
    layers = qc_model_linear_layers(&shape);
    CHECK(layers && layers->n == 30 * 7 + 1, "layer count");
    CHECK(strcmp(layers->layers[6].role, "mlp.down") == 0 && layers->layers[6].n == 576 &&
              layers->layers[6].k == 1536, "down shape");
    CHECK(strcmp(layers->layers[1].role, "attn.k") == 0 && layers->layers[1].n == 192, "k shape (GQA)");

    /* no policy: bf16 everywhere, no fallbacks */
    qc_dispatch *d = build("none", NULL);
    if (d) all_entries(d, "bf16", "", NULL);
    CHECK(d && qc_dispatch_count(d) == layers->n * 13, "entries: %zu", d ? qc_dispatch_count(d) : 0);
    qc_dispatch_free(d);

    /* a format that does not exist */
    d = build("unknown.lua", "return { choose = function(q) return 'int3' end }");
    if (d) all_entries(d, "bf16", "policy", "'int3', which is not a registered format");
    char *text = d ? print_to_string(d) : NULL;
    CHECK_CONTAINS(text, "wanted int3 -> used bf16, 2743 entries from blk.0.attn.q decode b1: policy: policy chose "
                         "'int3', which is not a registered format");
    free(text);
    qc_dispatch_free(d);

    /* a KV-cache format for a linear layer */
    d = build("kv.lua", "return { choose = function(q) return 'kv_fp8' end }");
    if (d) all_entries(d, "bf16", "policy", "a KV-cache format");
    qc_dispatch_free(d);

    /* a policy that raises: file and line in the reason */
    d = build("raises.lua", "return { choose = function(q)\n  error('cannot decide') end }");
    if (d) all_entries(d, "bf16", "policy", "raises.lua:2: cannot decide");
    qc_dispatch_free(d);

    /* a policy that loops: stopped once, then not asked again (the build stays fast) */
    double t0 = qc_now_seconds();
    d = build("loops.lua", "return { choose = function(q) while true do end end }");
    double dt = qc_now_seconds() - t0;
    /* stopped by the budget, or by the wall clock on a loaded machine */
    if (d) all_entries(d, "bf16", "policy", "exceeded");
    CHECK(dt < 10, "looping policy took %.1f s", dt);
    qc_dispatch_free(d);

    /* an ineligible choice: the candidate's own reason is the fallback reason */
    d = build("w4.lua", "return { choose = function(q) return 'w4a16' end }");
    const qc_dispatch_entry *e = d ? qc_dispatch_lookup(d, 0, QC_PHASE_DECODE, 1) : NULL;
    CHECK(e && strcmp(e->wanted, "w4a16") == 0, "wanted");
    if (e && strcmp(e->format, "w4a16") != 0) /* until w4a16 has a C reference */
        CHECK(strcmp(e->fallback.code, "missing") == 0 || strcmp(e->fallback.code, "align_k") == 0,
              "reason code %s", e->fallback.code);
    qc_dispatch_free(d);

    /* the policy's choice depends on phase and batch; lookup picks the bucket */
    d = build("phase.lua",
              "return { choose = function(q)\n"
              "  if q.phase == 'decode' and q.batch <= 8 then return 'bf16', 'small' end\n"
              "  return 'none_such'\n"
              "end }");
    e = d ? qc_dispatch_lookup(d, 3, QC_PHASE_DECODE, 5) : NULL; /* -> bucket 8 */
    CHECK(e && e->batch == 8 && !e->fallback.code[0] && strcmp(e->note, "small") == 0, "bucket 8");
    e = d ? qc_dispatch_lookup(d, 3, QC_PHASE_DECODE, 9) : NULL; /* -> bucket 16 */
    CHECK(e && e->batch == 16 && strcmp(e->fallback.code, "policy") == 0, "bucket 16");
    e = d ? qc_dispatch_lookup(d, 3, QC_PHASE_DECODE, 100000) : NULL; /* beyond: largest */
    CHECK(e && e->batch == 256, "largest bucket");
    text = d ? print_to_string(d) : NULL;
    CHECK_CONTAINS(text, "blk.0-29");
    CHECK_CONTAINS(text, "b1-8 bf16, b16-256 bf16*");
    free(text);
    qc_dispatch_free(d);

    qc_layer_list_free(layers);
    qc_runtime_close(rt);
    return qc_test_finish("test_dispatch");
}
