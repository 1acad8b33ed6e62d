/* qc_engine_policy.c - the GPU engine's dispatch plan: prepare, timings per shape and bucket (disk-cached), the table, fallbacks. */
#define _POSIX_C_SOURCE 200809L
#include "qc_engine_policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qc_internal.h"
#include "qc_report.h"

#define MAX_BUCKETS 16
#define MAX_FORMATS 16
#define MAX_PREPARED 8

typedef struct timing {
    char format[32];
    int64_t n, k, m;
    double us;         /* < 0: nothing ran, see why */
    char kernel[64];
    qc_reason why;
} timing;

typedef struct refusal {
    size_t layer;
    char format[32];
    qc_reason why;
} refusal;

struct qc_eplan {
    qc_eplan_options o;
    qc_model_shape shape;
    qc_layer_list *layers;
    qc_policy_device dev;
    char dev_name[128];
    qc_policy_peak peaks[16]; /* dev.peaks: each timed format's ceiling */
    char peak_names[16][32];
    int64_t dec[MAX_BUCKETS], pre[MAX_BUCKETS];
    size_t nd, np;
    timing *t;
    size_t nt, cap_t;
    size_t n_cached, n_measured;
    refusal *r;
    size_t nr, cap_r;
    qc_dispatch *d;
    int gen;
    int frozen;
    int (*resident)(void *ctx, size_t li, const qc_format_desc *f);
    char hash[65];
    char cache_path[1024];
    char timing_src[1100];
};

/* ---- the layer list ---- */

qc_layer_list *qc_eplan_layer_list(const qc_model_shape *s) {
    qc_layer_list *l = qc_layer_list_alloc((size_t)s->n_layers * 4 + 1);
    if (!l) return NULL;
    int64_t q = (int64_t)s->n_heads * s->head_dim, kv = (int64_t)s->n_kv_heads * s->head_dim;
    static const char *names[] = {"attn.qkv", "attn.o", "mlp.gate_up", "mlp.down"};
    /* a fused weight is asked for with the role of its first part */
    static const char *roles[] = {"attn.q", "attn.o", "mlp.gate", "mlp.down"};
    for (int b = 0; b < s->n_layers; b++)
        for (int r = 0; r < 4; r++) {
            int64_t shape[4][2] = {{q + 2 * kv, s->hidden}, {s->hidden, q}, {2 * (int64_t)s->intermediate, s->hidden},
                                   {s->hidden, s->intermediate}};
            qc_layer_list_add(l, b, names[r], roles[r], s->n_layers, shape[r][0], shape[r][1]);
        }
    qc_layer_list_add(l, -1, "lm_head", "lm_head", s->n_layers, s->vocab, s->hidden);
    return l;
}

/* ---- timings ---- */

void qc_eplan_kernel_hash(const qc_runtime *rt, const char *device, int sm, char hex[65]) {
    qc_sbuf b = {0};
    /* the method is part of the key: times measured another way are not comparable */
    qc_sbuf_printf(&b, "qcore %s\ndevice %s\nsm %d\nmethod %s\n", qc_version(), device ? device : "", sm,
                   QC_EPLAN_TIMING_METHOD);
    for (size_t i = 0;; i++) {
        const qc_kernel_desc *k = qc_kernel_get(rt, i);
        if (!k) break;
        const qc_format_desc *f = qc_format_find(rt, k->format);
        if (!k->cuda_source || !f || f->kind != QC_FORMAT_LINEAR) continue;
        /* which kernel the engine picks per M follows from the ranges */
        qc_sbuf_printf(&b, "kernel %s %s m %lld-%lld sm %u-%u\n", k->id, k->cuda_entry ? k->cuda_entry : "",
                       (long long)k->m_min, (long long)k->m_max, k->arch.min_sm, k->arch.max_sm);
        for (const char *const *opt = k->nvrtc_options; opt && *opt; opt++) qc_sbuf_printf(&b, " %s", *opt);
        qc_sbuf_printf(&b, "\n%s\n", k->cuda_source);
    }
    qc_sha256_buffer(b.data ? b.data : "", b.len, hex);
    qc_sbuf_free(&b);
}

static timing *find_timing(const qc_eplan *p, const char *format, int64_t n, int64_t k, int64_t m) {
    for (size_t i = 0; i < p->nt; i++)
        if (p->t[i].n == n && p->t[i].k == k && p->t[i].m == m && strcmp(p->t[i].format, format) == 0) return &p->t[i];
    return NULL;
}

double qc_eplan_time(const qc_eplan *p, const char *format, int64_t n, int64_t k, int64_t m) {
    const timing *t = find_timing(p, format, n, k, m);
    return t ? t->us : -1;
}

static timing *add_timing(qc_eplan *p) {
    if (qc_grow((void **)&p->t, &p->cap_t, p->nt, sizeof *p->t)) return NULL;
    timing *t = &p->t[p->nt++];
    memset(t, 0, sizeof *t);
    return t;
}

/* Read the cache; a file that is not what we wrote is said once and ignored
 * (measured again and overwritten). */
static void cache_load(qc_eplan *p) {
    if (!p->cache_path[0]) return;
    struct stat st;
    if (stat(p->cache_path, &st) != 0) return;
    json_error_t je;
    json_t *root = json_load_file(p->cache_path, 0, &je);
    json_t *arr = root ? json_object_get(root, "timings") : NULL;
    const char *h = root ? json_string_value(json_object_get(root, "hash")) : NULL;
    if (!root || !json_is_array(arr) || !h || strcmp(h, p->hash) != 0) {
        qc_log(QC_LOG_WARN, "timing cache %s is corrupt or not ours (%s): measuring again and rewriting it",
               p->cache_path, !root ? je.text : !json_is_array(arr) ? "no 'timings' list" : "hash differs");
        json_decref(root);
        return;
    }
    size_t i, bad = 0;
    json_t *v;
    json_array_foreach(arr, i, v) {
        const char *fmt = json_string_value(json_object_get(v, "format"));
        json_t *n = json_object_get(v, "n"), *k = json_object_get(v, "k"), *m = json_object_get(v, "m");
        json_t *us = json_object_get(v, "us");
        if (!fmt || !json_is_integer(n) || !json_is_integer(k) || !json_is_integer(m) || !json_is_number(us) ||
            strlen(fmt) >= 32) {
            bad++;
            continue;
        }
        timing *t = add_timing(p);
        if (!t) break;
        qc_strlcpy(t->format, fmt, sizeof t->format);
        t->n = json_integer_value(n), t->k = json_integer_value(k), t->m = json_integer_value(m);
        t->us = json_number_value(us);
        const char *kid = json_string_value(json_object_get(v, "kernel"));
        qc_strlcpy(t->kernel, kid ? kid : "", sizeof t->kernel);
        const char *code = json_string_value(json_object_get(v, "code"));
        const char *text = json_string_value(json_object_get(v, "reason"));
        if (t->us < 0) qc_reason_set(&t->why, code && *code ? code : "missing", "%s", text ? text : "not measured");
        p->n_cached++;
    }
    if (bad)
        qc_log(QC_LOG_WARN, "timing cache %s: %zu malformed entries ignored (measured again)", p->cache_path, bad);
    json_decref(root);
}

static void cache_save(const qc_eplan *p) {
    if (!p->cache_path[0]) return;
    json_t *arr = json_array();
    for (size_t i = 0; i < p->nt; i++) {
        const timing *t = &p->t[i];
        json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:f,s:s}", "format", t->format, "n", (json_int_t)t->n, "k",
                              (json_int_t)t->k, "m", (json_int_t)t->m, "us", t->us, "kernel", t->kernel);
        if (o && t->us < 0) {
            json_object_set_new(o, "code", json_string(t->why.code));
            json_object_set_new(o, "reason", json_string(t->why.text));
        }
        if (o) json_array_append_new(arr, o);
    }
    json_t *root = json_pack("{s:s,s:s,s:i,s:s,s:o}", "qcore", qc_version(), "device", p->dev_name, "sm", p->o.sm,
                             "hash", p->hash, "timings", arr);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", p->cache_path);
    /* written whole, then renamed: a crash leaves the old file or none */
    if (!root || json_dump_file(root, tmp, JSON_INDENT(1)) != 0 || rename(tmp, p->cache_path) != 0)
        qc_log(QC_LOG_WARN, "timing cache %s: cannot write (%s); timings will be measured again next time",
               p->cache_path, strerror(errno));
    json_decref(root);
}

static int has_format(const qc_format_desc **fs, size_t n, const qc_format_desc *f) {
    for (size_t i = 0; i < n; i++)
        if (fs[i] == f) return 1;
    return 0;
}

/* Every format some layer's prepare() keeps (all of them where it fails or
 * has no prepare), bf16 always: what the table may choose from. */
static size_t prepared_union(qc_eplan *p, const qc_format_desc **out, size_t cap) {
    const char *all[64];
    const qc_format_desc *allf[64];
    size_t n_all = 0, n = 0;
    for (size_t i = 0; i < qc_format_count(p->o.rt) && n_all < 64; i++) {
        const qc_format_desc *f = qc_format_get(p->o.rt, i);
        if (f->kind != QC_FORMAT_LINEAR) continue;
        allf[n_all] = f;
        all[n_all++] = f->name;
    }
    const qc_format_desc *bf16 = qc_format_find(p->o.rt, "bf16");
    if (bf16 && n < cap) out[n++] = bf16;
    for (size_t li = 0; li + 1 < p->layers->n; li++) {
        char names[MAX_PREPARED][64], perr[512];
        size_t np = 0;
        int all_of_them = qc_policy_prepare(p->o.policy, &p->layers->layers[li], &p->dev, all, n_all, names,
                                            MAX_PREPARED, &np, perr, sizeof perr) != QC_OK || np == 0;
        for (size_t j = 0; j < (all_of_them ? n_all : np); j++) {
            const qc_format_desc *f = all_of_them ? allf[j] : qc_format_find(p->o.rt, names[j]);
            if (f && f->kind == QC_FORMAT_LINEAR && !has_format(out, n, f) && n < cap) out[n++] = f;
        }
        if (all_of_them) break;
    }
    return n;
}

/* Measure what the cache lacks: per prepared format and distinct shape, every bucket. */
static qc_status measure(qc_eplan *p, char *err, size_t errlen) {
    const qc_format_desc *fs[MAX_FORMATS];
    size_t nf = prepared_union(p, fs, MAX_FORMATS);
    int64_t ms[2 * MAX_BUCKETS];
    size_t nm = 0;
    for (size_t i = 0; i < p->nd + p->np; i++) {
        int64_t m = i < p->nd ? p->dec[i] : p->pre[i - p->nd];
        int dup = 0;
        for (size_t j = 0; j < nm; j++) dup |= ms[j] == m;
        if (!dup) ms[nm++] = m;
    }
    for (size_t fi = 0; fi < nf; fi++) {
        const qc_format_desc *f = fs[fi];
        for (size_t li = 0; li < 4 && li + 1 < p->layers->n; li++) { /* block 0's four shapes */
            const qc_policy_layer *L = &p->layers->layers[li];
            int dup = 0;
            for (size_t lj = 0; lj < li; lj++)
                dup |= p->layers->layers[lj].n == L->n && p->layers->layers[lj].k == L->k;
            qc_reason why;
            if (dup || (p->o.can_hold && !p->o.can_hold(p->o.ctx, li, f, &why))) continue;
            int64_t miss[2 * MAX_BUCKETS];
            size_t nmiss = 0;
            for (size_t j = 0; j < nm; j++) {
                /* a bucket no kernel of the format serves is refused by the table anyway */
                qc_problem pr = {.struct_size = sizeof pr, .sm = (uint32_t)p->o.sm, .m = ms[j], .n = L->n, .k = L->k,
                                 .phase = ms[j] > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE, .layer = L->name,
                                 .group_size = f->default_group_size};
                if (!qc_select_format(p->o.rt, f, &pr, 1, NULL, &why)) continue;
                if (!find_timing(p, f->name, L->n, L->k, ms[j])) miss[nmiss++] = ms[j];
            }
            if (!nmiss || !p->o.timer) continue;
            double us[2 * MAX_BUCKETS];
            char kid[2 * MAX_BUCKETS][64];
            qc_reason whys[2 * MAX_BUCKETS];
            memset(kid, 0, sizeof kid);
            memset(whys, 0, sizeof whys);
            char terr[512] = "";
            qc_status st = p->o.timer(p->o.ctx, f, L->n, L->k, miss, nmiss, us, kid, whys, terr, sizeof terr);
            if (st == QC_ERR_NOMEM && !terr[0]) {
                qc_errf(err, errlen, "out of memory timing %s", f->name);
                return st;
            }
            if (st != QC_OK) qc_log(QC_LOG_WARN, "timing %s on [%lld x %lld]: %s", f->name, (long long)L->n,
                                    (long long)L->k, terr);
            for (size_t j = 0; j < nmiss; j++) {
                timing *t = add_timing(p);
                if (!t) {
                    qc_errf(err, errlen, "out of memory");
                    return QC_ERR_NOMEM;
                }
                qc_strlcpy(t->format, f->name, sizeof t->format);
                t->n = L->n, t->k = L->k, t->m = miss[j];
                t->us = st == QC_OK ? us[j] : -1;
                qc_strlcpy(t->kernel, kid[j], sizeof t->kernel);
                if (t->us < 0) {
                    if (st != QC_OK)
                        qc_reason_set(&t->why, "measure", "%s", terr);
                    else
                        t->why = whys[j];
                    if (!t->why.code[0]) qc_reason_set(&t->why, "missing", "%s: nothing ran", f->name);
                }
                p->n_measured++;
            }
        }
    }
    return QC_OK;
}

/* Peak rates as this engine's own kernels reach them: the fastest TFLOP/s
 * among a format's timings at the largest bucket of every shape. */
static double peak_tflops(const qc_eplan *p, const char *format) {
    double best = 0;
    int64_t mmax = 0;
    for (size_t i = 0; i < p->nt; i++)
        if (strcmp(p->t[i].format, format) == 0 && p->t[i].us > 0 && p->t[i].m > mmax) mmax = p->t[i].m;
    for (size_t i = 0; i < p->nt; i++) {
        const timing *t = &p->t[i];
        if (strcmp(t->format, format) != 0 || t->us <= 0 || t->m != mmax) continue;
        double tf = 2.0 * (double)t->m * (double)t->n * (double)t->k / (t->us * 1e-6) / 1e12;
        if (tf > best) best = tf;
    }
    return best;
}

/* dev.peaks: every timed format's ceiling, in the order first timed */
static void set_peaks(qc_eplan *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->nt && n < sizeof p->peaks / sizeof p->peaks[0]; i++) {
        size_t j = 0;
        while (j < n && strcmp(p->peak_names[j], p->t[i].format) != 0) j++;
        if (j < n) continue;
        qc_strlcpy(p->peak_names[n], p->t[i].format, sizeof p->peak_names[n]);
        p->peaks[n].format = p->peak_names[n];
        p->peaks[n].tflops = peak_tflops(p, p->peak_names[n]);
        n++;
    }
    p->dev.peaks = p->peaks;
    p->dev.n_peaks = n;
}

/* ---- the table ---- */

static int candidate_hook(void *ctx, size_t li, const qc_format_desc *f, const qc_problem *pr, double *time_us,
                          qc_reason *why) {
    qc_eplan *p = ctx;
    if (p->o.can_hold && !p->o.can_hold(p->o.ctx, li, f, why)) return 0;
    for (size_t i = 0; i < p->nr; i++)
        if (p->r[i].layer == li && strcmp(p->r[i].format, f->name) == 0) {
            *why = p->r[i].why;
            return 0;
        }
    if (p->frozen && p->resident && !p->resident(p->o.ctx, li, f)) {
        qc_reason_set(why, "not_prepared", "%s is not resident for %s (weights are loaded for the table built at load)",
                      f->name, p->layers->layers[li].name);
        return 0;
    }
    const timing *t = find_timing(p, f->name, pr->n, pr->k, pr->m);
    if (t && t->us < 0) {
        *why = t->why;
        return 0;
    }
    if (t) *time_us = t->us;
    return 1;
}

static qc_status build_table(qc_eplan *p, char *err, size_t errlen) {
    qc_dispatch_options d = {.struct_size = sizeof d, .gpu = 1, .device = &p->dev, .decode_batches = p->dec,
                             .n_decode = p->nd, .prefill_batches = p->pre, .n_prefill = p->np,
                             .candidate = candidate_hook, .candidate_ctx = p, .backend = "cuda (GPU engine)"};
    qc_dispatch *nd = qc_dispatch_build(p->o.rt, p->o.policy, p->layers, &d, err, errlen);
    if (!nd) return QC_ERR_NOMEM;
    qc_dispatch_free(p->d);
    p->d = nd;
    p->gen++;
    return QC_OK;
}

static size_t pow2_buckets(int64_t hi, int64_t *out) {
    size_t n = 0;
    for (int64_t b = 1; n < MAX_BUCKETS; b <<= 1) {
        out[n++] = b;
        if (b >= hi) break;
    }
    return n;
}

qc_eplan *qc_eplan_build(const qc_eplan_options *o, char *err, size_t errlen) {
    if (!o || !o->rt || !o->shape || !o->policy) {
        qc_errf(err, errlen, "engine plan: needs a runtime, a shape and a policy");
        return NULL;
    }
    qc_eplan *p = calloc(1, sizeof *p);
    if (!p) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    p->o = *o;
    p->shape = *o->shape;
    p->o.shape = &p->shape;
    qc_strlcpy(p->dev_name, o->device_name ? o->device_name : "gpu", sizeof p->dev_name);
    p->layers = qc_eplan_layer_list(&p->shape);
    if (!p->layers) {
        qc_errf(err, errlen, "out of memory listing layers");
        free(p);
        return NULL;
    }
    p->nd = pow2_buckets(o->max_seqs > 0 ? o->max_seqs : 1, p->dec);
    p->np = pow2_buckets(o->max_step > 0 ? o->max_step : 1, p->pre);
    p->dev = (qc_policy_device){.name = p->dev_name, .sm = o->sm, .sm_count = o->sm_count,
                                .mem_bandwidth_gbs = o->bandwidth_gbs};
    qc_eplan_kernel_hash(o->rt, p->dev_name, o->sm, p->hash);
    if (o->cache_dir && *o->cache_dir) {
        mkdir(o->cache_dir, 0755);
        snprintf(p->cache_path, sizeof p->cache_path, "%s/timings-%.16s.json", o->cache_dir, p->hash);
    }
    cache_load(p);
    size_t before = p->nt;
    qc_status st = measure(p, err, errlen);
    if (st != QC_OK) {
        qc_eplan_free(p);
        return NULL;
    }
    if (p->nt > before) cache_save(p);
    if (p->n_measured && p->n_cached)
        snprintf(p->timing_src, sizeof p->timing_src, "%zu measured now, %zu from %s", p->n_measured, p->n_cached,
                 p->cache_path);
    else if (p->n_cached)
        snprintf(p->timing_src, sizeof p->timing_src, "from the disk cache %s", p->cache_path);
    else
        snprintf(p->timing_src, sizeof p->timing_src, "%zu measured now%s%s", p->n_measured,
                 p->cache_path[0] ? ", cached in " : " (no disk cache)", p->cache_path);
    p->dev.bf16_tflops = peak_tflops(p, "bf16");
    p->dev.fp8_tflops = peak_tflops(p, "fp8");
    p->dev.int8_tops = peak_tflops(p, "w8a8_int8");
    set_peaks(p);
    if (build_table(p, err, errlen) != QC_OK) {
        qc_eplan_free(p);
        return NULL;
    }
    return p;
}

void qc_eplan_free(qc_eplan *p) {
    if (!p) return;
    qc_dispatch_free(p->d);
    qc_layer_list_free(p->layers);
    free(p->t);
    free(p->r);
    free(p);
}

const qc_dispatch *qc_eplan_table(const qc_eplan *p) { return p->d; }
const qc_layer_list *qc_eplan_layers(const qc_eplan *p) { return p->layers; }
const qc_policy_device *qc_eplan_device(const qc_eplan *p) { return &p->dev; }
int qc_eplan_generation(const qc_eplan *p) { return p->gen; }
const char *qc_eplan_timing_source(const qc_eplan *p) { return p->timing_src; }

size_t qc_eplan_layer_formats(const qc_eplan *p, size_t li, const qc_format_desc **out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < qc_dispatch_count(p->d); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(p->d, i);
        if (e->layer != li) continue;
        const qc_format_desc *f = qc_format_find(p->o.rt, e->format);
        if (f && !has_format(out, n, f) && n < cap) out[n++] = f;
    }
    return n;
}

void qc_eplan_freeze(qc_eplan *p, int (*resident)(void *ctx, size_t li, const qc_format_desc *f)) {
    p->frozen = 1;
    p->resident = resident;
}

qc_status qc_eplan_fail(qc_eplan *p, size_t li, const char *format, const char *code, const char *text, char *err,
                        size_t errlen) {
    for (size_t i = 0; i < p->nr; i++)
        if (p->r[i].layer == li && strcmp(p->r[i].format, format) == 0) return QC_OK; /* known: no rebuild */
    /* the same kernel would fail on every layer of this shape: refuse them all, rebuild once */
    const qc_policy_layer *L = &p->layers->layers[li];
    size_t added = 0;
    for (size_t j = 0; j < p->layers->n; j++) {
        const qc_policy_layer *o = &p->layers->layers[j];
        if (o->n != L->n || o->k != L->k) continue;
        int known = 0;
        for (size_t i = 0; i < p->nr && !known; i++) known = p->r[i].layer == j && !strcmp(p->r[i].format, format);
        if (known) continue;
        if (qc_grow((void **)&p->r, &p->cap_r, p->nr, sizeof *p->r)) {
            qc_errf(err, errlen, "out of memory");
            return QC_ERR_NOMEM;
        }
        refusal *r = &p->r[p->nr++];
        r->layer = j;
        qc_strlcpy(r->format, format, sizeof r->format);
        qc_reason_set(&r->why, code && *code ? code : "compile", "%s (at run time)", text ? text : "");
        added++;
    }
    qc_log(QC_LOG_WARN, "%s: %s failed at run time (%s: %s): refused for the %zu layers of shape %lldx%lld, "
           "rebuilding the dispatch table", L->name, format, code && *code ? code : "compile", text ? text : "",
           added, (long long)L->n, (long long)L->k);
    return build_table(p, err, errlen);
}

/* ---- reports ---- */

static void print_timings(const qc_eplan *p, FILE *f) {
    /* one block per shape: a row per format, a column per M */
    int64_t ms[2 * MAX_BUCKETS];
    size_t nm = 0;
    for (size_t i = 0; i < p->nd + p->np; i++) {
        int64_t m = i < p->nd ? p->dec[i] : p->pre[i - p->nd];
        int dup = 0;
        for (size_t j = 0; j < nm; j++) dup |= ms[j] == m;
        if (!dup) ms[nm++] = m;
    }
    for (size_t a = 1; a < nm; a++) /* sorted */
        for (size_t b = a; b > 0 && ms[b - 1] > ms[b]; b--) {
            int64_t x = ms[b];
            ms[b] = ms[b - 1], ms[b - 1] = x;
        }
    fprintf(f, "measured linear times (us, CUDA events; - = no kernel or not measured):\n");
    for (size_t li = 0; li < 4 && li + 1 < p->layers->n; li++) {
        const qc_policy_layer *L = &p->layers->layers[li];
        fprintf(f, "  %s [%lld x %lld]\n    %-10s", L->name + strlen("blk.0."), (long long)L->n, (long long)L->k, "M");
        for (size_t j = 0; j < nm; j++) fprintf(f, " %8lld", (long long)ms[j]);
        fprintf(f, "\n");
        const char *seen[MAX_FORMATS];
        size_t ns = 0;
        for (size_t i = 0; i < p->nt; i++) {
            const timing *t = &p->t[i];
            if (t->n != L->n || t->k != L->k) continue;
            int dup = 0;
            for (size_t s = 0; s < ns; s++) dup |= strcmp(seen[s], t->format) == 0;
            if (dup || ns == MAX_FORMATS) continue;
            seen[ns++] = t->format;
            fprintf(f, "    %-10s", t->format);
            for (size_t j = 0; j < nm; j++) {
                const timing *u = find_timing(p, t->format, L->n, L->k, ms[j]);
                if (u && u->us >= 0)
                    fprintf(f, " %8.1f", u->us);
                else
                    fprintf(f, " %8s", "-");
            }
            fprintf(f, "\n");
        }
    }
}

void qc_eplan_print(const qc_eplan *p, FILE *f) {
    const qc_policy_device *d = &p->dev;
    double ridge = d->mem_bandwidth_gbs > 0 ? d->bf16_tflops * 1000.0 / d->mem_bandwidth_gbs : 0;
    fprintf(f, "policy device: %s, sm_%d, %d SMs, copy %.0f GB/s, bf16 %.0f TFLOP/s, fp8 %.0f TFLOP/s, int8 %.0f "
               "TOP/s (the engine's own kernels at the largest bucket), ridge %.1f FLOP/B\n",
            d->name, d->sm, d->sm_count, d->mem_bandwidth_gbs, d->bf16_tflops, d->fp8_tflops, d->int8_tops, ridge);
    if (d->n_peaks) {
        fprintf(f, "measured ceilings (TFLOP/s or TOP/s at the largest bucket):");
        for (size_t i = 0; i < d->n_peaks; i++) fprintf(f, " %s %.0f", d->peaks[i].format, d->peaks[i].tflops);
        fprintf(f, "\n");
    }
    fprintf(f, "timings: %s (key %.16s: device + kernel sources)\n", p->timing_src, p->hash);
    print_timings(p, f);
    fprintf(f, "fused weights: q|k|v is asked for as attn.q and gate|up as mlp.gate, with the fused shape\n");
    qc_dispatch_print(p->d, f);
    if (p->nr) {
        fprintf(f, "run-time failures (each refused its format for that layer and rebuilt the table; %d builds):\n",
                p->gen);
        for (size_t i = 0; i < p->nr; i++) {
            /* one line per failure: the first layer of each shape it was refused for */
            int first = 1;
            for (size_t j = 0; j < i && first; j++)
                first = strcmp(p->r[j].format, p->r[i].format) || strcmp(p->r[j].why.text, p->r[i].why.text);
            if (first)
                fprintf(f, "  %s (and the other layers of its shape) %s: %s: %s\n",
                        p->layers->layers[p->r[i].layer].name, p->r[i].format, p->r[i].why.code, p->r[i].why.text);
        }
    }
}

void qc_eplan_print_fallbacks(const qc_eplan *p, FILE *f) { qc_dispatch_print_fallbacks(p->d, f); }

void qc_eplan_fallbacks_json(const qc_eplan *p, void *arr_) {
    json_t *arr = arr_;
    const qc_dispatch *d = p->d;
    for (size_t i = 0; i < qc_dispatch_count(d); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(d, i);
        if (!e->fallback.code[0]) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            const qc_dispatch_entry *x = qc_dispatch_get(d, j);
            seen = x->fallback.code[0] && strcmp(x->wanted, e->wanted) == 0 && strcmp(x->format, e->format) == 0 &&
                   strcmp(x->fallback.text, e->fallback.text) == 0;
        }
        if (seen) continue;
        size_t count = 0;
        for (size_t j = i; j < qc_dispatch_count(d); j++) {
            const qc_dispatch_entry *x = qc_dispatch_get(d, j);
            count += x->fallback.code[0] && strcmp(x->wanted, e->wanted) == 0 && strcmp(x->format, e->format) == 0 &&
                     strcmp(x->fallback.text, e->fallback.text) == 0;
        }
        json_array_append_new(arr, json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s,s:I}", "layer",
                                             p->layers->layers[e->layer].name, "phase", qc_phase_name(e->phase),
                                             "batch", (json_int_t)e->batch, "wanted", e->wanted, "used", e->format,
                                             "code", e->fallback.code, "reason", e->fallback.text, "entries",
                                             (json_int_t)count));
    }
}

void qc_eplan_detach(qc_eplan *p) {
    p->o.timer = NULL;
    p->o.can_hold = NULL;
    p->o.ctx = NULL;
    p->resident = NULL;
}

void qc_eplan_print_resident_estimate(const qc_eplan *p, FILE *f) {
    const qc_format_desc *fs[MAX_FORMATS];
    double bytes[MAX_FORMATS] = {0};
    size_t count[MAX_FORMATS] = {0}, nf = 0;
    for (size_t li = 0; li < p->layers->n; li++) {
        const qc_format_desc *lf[MAX_FORMATS];
        size_t n = qc_eplan_layer_formats(p, li, lf, MAX_FORMATS);
        for (size_t j = 0; j < n; j++) {
            size_t k = 0;
            while (k < nf && fs[k] != lf[j]) k++;
            if (k == nf && nf < MAX_FORMATS) fs[nf++] = lf[j];
            if (k < MAX_FORMATS) {
                bytes[k] += (double)p->layers->layers[li].n * (double)p->layers->layers[li].k * lf[j]->effective_bits / 8;
                count[k]++;
            }
        }
    }
    double total = 0;
    fprintf(f, "resident linear weights per format (estimated at each format's effective bits; a layer may hold "
               "several):\n");
    for (size_t k = 0; k < nf; k++) {
        fprintf(f, "  %-10s %4zu linears %10.3f GiB\n", fs[k]->name, count[k], bytes[k] / 1073741824.0);
        total += bytes[k];
    }
    fprintf(f, "  %-10s %16.3f GiB\n", "total", total / 1073741824.0);
}
