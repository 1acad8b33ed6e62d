/* qc_dispatch.c - the dispatch table: the policy asked once per (layer, phase, batch bucket). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_internal.h"

#define MAX_BUCKETS 16
#define MAX_PREPARED 8

struct qc_dispatch {
    const qc_layer_list *layers; /* borrowed: must outlive the table */
    qc_dispatch_entry *e;
    size_t n;
    char policy[256];
    char policy_disabled[QC_REASON_TEXT_MAX]; /* why the policy stopped being asked */
    int gpu;
    const char *backend;
};

static const int64_t default_decode[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const int64_t default_prefill[] = {128, 512, 2048, 8192};

/* First line of a (possibly multi-line, traceback-carrying) message. */
static void first_line(char *dst, size_t len, const char *src) {
    qc_strlcpy(dst, src, len);
    char *nl = strchr(dst, '\n');
    if (nl) *nl = 0;
}

/* Eligibility of every linear format for one problem. */
static size_t build_candidates(const qc_runtime *rt, const qc_problem *p, int gpu, char (*prepared)[64],
                               size_t n_prepared, qc_policy_candidate *c, const qc_kernel_desc **kernels,
                               size_t cap, const qc_dispatch_options *o, size_t layer) {
    size_t n = 0;
    for (size_t i = 0; i < qc_format_count(rt) && n < cap; i++) {
        const qc_format_desc *f = qc_format_get(rt, i);
        if (f->kind != QC_FORMAT_LINEAR) continue;
        memset(&c[n], 0, sizeof c[n]);
        c[n].format = f->name;
        c[n].time_us = -1;
        c[n].bytes_per_weight = f->effective_bits / 8.0;
        /* GPU kernels check the weight's group size: the one quantization
           will use unless the problem names one (the format's default) */
        qc_problem pf = *p;
        if (gpu && !pf.group_size) pf.group_size = f->default_group_size;
        c[n].eligible = qc_select_format(rt, f, &pf, gpu, &kernels[n], &c[n].reason);
        /* bf16 is the universal fallback (any format dequantizes to it), so
         * it counts as prepared whatever the policy listed. */
        if (c[n].eligible && n_prepared && strcmp(f->name, "bf16") != 0) {
            int found = 0;
            for (size_t j = 0; j < n_prepared; j++) found |= strcmp(prepared[j], f->name) == 0;
            if (!found) {
                c[n].eligible = 0;
                kernels[n] = NULL;
                qc_reason_set(&c[n].reason, "not_prepared", "%s was not prepared for this layer by the policy",
                              f->name);
            }
        }
        /* the backend's own checks and measured time */
        if (c[n].eligible && o->candidate && !o->candidate(o->candidate_ctx, layer, f, &pf, &c[n].time_us, &c[n].reason)) {
            c[n].eligible = 0;
            kernels[n] = NULL;
            if (!c[n].reason.code[0]) qc_reason_set(&c[n].reason, "missing", "%s refused by the backend", f->name);
        }
        n++;
    }
    return n;
}

static int find_candidate(const qc_policy_candidate *c, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].format, name) == 0) return (int)i;
    return -1;
}

/* The format used when the policy's answer cannot be: the prepared formats
 * in the policy's order, then bf16, then anything eligible. */
static int fallback_index(const qc_policy_candidate *c, size_t n, char (*prepared)[64], size_t n_prepared) {
    for (size_t j = 0; j < n_prepared; j++) {
        int i = find_candidate(c, n, prepared[j]);
        if (i >= 0 && c[i].eligible) return i;
    }
    int i = find_candidate(c, n, "bf16");
    if (i >= 0 && c[i].eligible) return i;
    for (size_t k = 0; k < n; k++)
        if (c[k].eligible) return (int)k;
    return -1;
}

qc_dispatch *qc_dispatch_build(const qc_runtime *rt, qc_policy *policy, const qc_layer_list *layers,
                               const qc_dispatch_options *opt, char *err, size_t errlen) {
    qc_dispatch_options o = {0};
    if (opt) memcpy(&o, opt, opt->struct_size && opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    const int64_t *dec = o.decode_batches ? o.decode_batches : default_decode;
    size_t nd = o.decode_batches ? o.n_decode : sizeof default_decode / sizeof *default_decode;
    const int64_t *pre = o.prefill_batches ? o.prefill_batches : default_prefill;
    size_t np = o.prefill_batches ? o.n_prefill : sizeof default_prefill / sizeof *default_prefill;
    if (nd > MAX_BUCKETS || np > MAX_BUCKETS) {
        qc_errf(err, errlen, "at most %d batch buckets per phase", MAX_BUCKETS);
        return NULL;
    }
    qc_dispatch *d = calloc(1, sizeof *d);
    if (d) d->e = calloc(layers->n * (nd + np), sizeof *d->e);
    if (!d || !d->e) {
        free(d);
        qc_errf(err, errlen, "out of memory for a dispatch table of %zu layers", layers->n);
        return NULL;
    }
    d->layers = layers;
    d->gpu = o.gpu;
    d->backend = o.backend ? o.backend : o.gpu ? "cuda" : "cpu reference";
    qc_strlcpy(d->policy, policy ? qc_policy_name(policy) : "(none: bf16 everywhere)", sizeof d->policy);
    qc_policy_device cpu_dev = {.name = "cpu"};
    const qc_policy_device *dev = o.device ? o.device : &cpu_dev;

    const char *all[64];
    size_t n_all = 0;
    for (size_t i = 0; i < qc_format_count(rt) && n_all < 64; i++)
        if (qc_format_get(rt, i)->kind == QC_FORMAT_LINEAR) all[n_all++] = qc_format_get(rt, i)->name;

    for (size_t li = 0; li < layers->n; li++) {
        const qc_policy_layer *L = &layers->layers[li];
        char prepared[MAX_PREPARED][64];
        size_t n_prepared = 0;
        char perr[1024];
        if (policy && !d->policy_disabled[0]) {
            if (qc_policy_prepare(policy, L, dev, all, n_all, prepared, MAX_PREPARED, &n_prepared, perr,
                                  sizeof perr) != QC_OK) {
                char line[QC_REASON_TEXT_MAX];
                first_line(line, sizeof line, perr);
                qc_log(QC_LOG_WARN, "policy prepare() failed for %s: %s", L->name, line);
                n_prepared = 0;
                if (qc_policy_limit_hit(policy)) qc_strlcpy(d->policy_disabled, line, sizeof d->policy_disabled);
            }
        }
        for (size_t bi = 0; bi < nd + np; bi++) {
            qc_dispatch_entry *e = &d->e[d->n++];
            e->layer = li;
            e->phase = bi < nd ? QC_PHASE_DECODE : QC_PHASE_PREFILL;
            e->batch = bi < nd ? dec[bi] : pre[bi - nd];
            qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)dev->sm, .m = e->batch, .n = L->n, .k = L->k,
                            .phase = e->phase, .layer = L->name};
            qc_policy_candidate c[64];
            const qc_kernel_desc *kern[64];
            size_t nc = build_candidates(rt, &p, o.gpu, prepared, n_prepared, c, kern, 64, &o, li);
            int fb = fallback_index(c, nc, prepared, n_prepared);
            int chosen = -1;
            if (!policy) {
                qc_strlcpy(e->wanted, "bf16", sizeof e->wanted);
            } else if (d->policy_disabled[0]) {
                qc_strlcpy(e->wanted, "?", sizeof e->wanted);
                qc_reason_set(&e->fallback, "policy", "policy not asked: %s", d->policy_disabled);
            } else {
                qc_policy_query q = {.struct_size = sizeof q, .layer = L, .phase = e->phase, .batch = e->batch,
                                     .device = dev, .candidates = c, .n_candidates = nc};
                if (qc_policy_choose(policy, &q, e->wanted, sizeof e->wanted, e->note, sizeof e->note, perr,
                                     sizeof perr) != QC_OK) {
                    char line[QC_REASON_TEXT_MAX - 16];
                    first_line(line, sizeof line, perr);
                    qc_strlcpy(e->wanted, "?", sizeof e->wanted);
                    qc_reason_set(&e->fallback, "policy", "%s", line);
                    if (qc_policy_limit_hit(policy))
                        qc_strlcpy(d->policy_disabled, line, sizeof d->policy_disabled);
                }
            }
            if (!e->fallback.code[0]) {
                int w = find_candidate(c, nc, e->wanted);
                if (w < 0) {
                    const qc_format_desc *f = qc_format_find(rt, e->wanted);
                    if (f)
                        qc_reason_set(&e->fallback, "policy", "policy chose '%s', a %s format, for a linear layer",
                                      e->wanted, f->kind == QC_FORMAT_KV_CACHE ? "KV-cache" : "non-linear");
                    else
                        qc_reason_set(&e->fallback, "policy", "policy chose '%s', which is not a registered format",
                                      e->wanted);
                } else if (!c[w].eligible) {
                    e->fallback = c[w].reason;
                } else {
                    chosen = w;
                }
            }
            if (chosen < 0) chosen = fb;
            if (chosen >= 0) {
                qc_strlcpy(e->format, c[chosen].format, sizeof e->format);
                e->kernel = kern[chosen];
            } else {
                qc_strlcpy(e->format, "none", sizeof e->format);
                if (!e->fallback.code[0])
                    qc_reason_set(&e->fallback, "none", "no format can run %s on the %s backend", L->name,
                                  d->backend);
            }
            if (strcmp(e->format, e->wanted) == 0) memset(&e->fallback, 0, sizeof e->fallback);
        }
    }
    return d;
}

void qc_dispatch_free(qc_dispatch *d) {
    if (!d) return;
    free(d->e);
    free(d);
}

size_t qc_dispatch_count(const qc_dispatch *d) { return d->n; }
const char *qc_dispatch_policy(const qc_dispatch *d) { return d->policy; }
const qc_layer_list *qc_dispatch_layers(const qc_dispatch *d) { return d->layers; }
const qc_dispatch_entry *qc_dispatch_get(const qc_dispatch *d, size_t i) { return i < d->n ? &d->e[i] : NULL; }

const qc_dispatch_entry *qc_dispatch_lookup(const qc_dispatch *d, size_t layer, qc_phase phase, int64_t batch) {
    const qc_dispatch_entry *best = NULL, *largest = NULL;
    for (size_t i = 0; i < d->n; i++) {
        const qc_dispatch_entry *e = &d->e[i];
        if (e->layer != layer || e->phase != phase) continue;
        if (!largest || e->batch > largest->batch) largest = e;
        if (e->batch >= batch && (!best || e->batch < best->batch)) best = e;
    }
    return best ? best : largest;
}

/* ---- printing ---- */

/* One phase of one layer as text: "b1-16 w4a16, b32-256 fp8". */
static void phase_summary(const qc_dispatch *d, size_t layer, qc_phase ph, char *buf, size_t len) {
    qc_sbuf b = {0};
    const qc_dispatch_entry *run = NULL, *prev = NULL;
    for (size_t i = 0; i <= d->n; i++) {
        const qc_dispatch_entry *e = i < d->n ? &d->e[i] : NULL;
        if (e && (e->layer != layer || e->phase != ph)) continue;
        if (run && (!e || strcmp(e->format, run->format) != 0 || strcmp(e->wanted, run->wanted) != 0)) {
            const char *mark = run->fallback.code[0] ? "*" : "";
            if (run == prev)
                qc_sbuf_printf(&b, "%sb%lld %s%s", b.len ? ", " : "", (long long)run->batch, run->format, mark);
            else
                qc_sbuf_printf(&b, "%sb%lld-%lld %s%s", b.len ? ", " : "", (long long)run->batch,
                               (long long)prev->batch, run->format, mark);
            run = NULL;
        }
        if (!e) break;
        if (!run) run = e;
        prev = e;
    }
    qc_strlcpy(buf, b.data ? b.data : "", len);
    qc_sbuf_free(&b);
}

void qc_dispatch_print(const qc_dispatch *d, void *file) {
    FILE *f = file;
    const qc_layer_list *L = d->layers;
    fprintf(f, "dispatch table: policy %s, backend %s (* = fallback, see below)\n", d->policy, d->backend);
    fprintf(f, "  %-22s %-9s %-12s %-44s %s\n", "layers", "role", "N x K", "decode", "prefill");
    /* Fold runs of blocks whose role, shape and decisions are identical. */
    size_t n = L->n;
    char (*dec)[512] = calloc(n, sizeof *dec);
    char (*pre)[512] = calloc(n, sizeof *pre);
    char *done = calloc(n, 1);
    if (!dec || !pre || !done) {
        fprintf(f, "  (out of memory printing the table)\n");
        free(dec), free(pre), free(done);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        phase_summary(d, i, QC_PHASE_DECODE, dec[i], sizeof dec[i]);
        phase_summary(d, i, QC_PHASE_PREFILL, pre[i], sizeof pre[i]);
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        const qc_policy_layer *a = &L->layers[i];
        int first = a->index, last = a->index, count = 0;
        for (size_t j = i; j < n; j++) {
            const qc_policy_layer *b = &L->layers[j];
            if (done[j] || strcmp(a->role, b->role) || a->n != b->n || a->k != b->k || strcmp(dec[i], dec[j]) ||
                strcmp(pre[i], pre[j]))
                continue;
            if (b->index != last + 1 && j != i) continue; /* keep groups contiguous */
            last = b->index;
            done[j] = 1;
            count++;
        }
        char name[48], shape[32];
        if (a->index < 0)
            qc_strlcpy(name, a->name, sizeof name);
        else if (first == last)
            snprintf(name, sizeof name, "blk.%d", first);
        else
            snprintf(name, sizeof name, "blk.%d-%d", first, last);
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)a->n, (long long)a->k);
        fprintf(f, "  %-22s %-9s %-12s %-44s %s\n", name, a->role, shape, dec[i], pre[i]);
    }
    free(dec), free(pre), free(done);
    qc_dispatch_print_fallbacks(d, f);
}

void qc_dispatch_print_fallbacks(const qc_dispatch *d, void *file) {
    FILE *f = file;
    const qc_layer_list *L = d->layers;
    /* Each distinct fallback once, with how many table entries it covers. */
    int any = 0;
    for (size_t i = 0; i < d->n; i++) {
        const qc_dispatch_entry *e = &d->e[i];
        if (!e->fallback.code[0]) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = d->e[j].fallback.code[0] && strcmp(d->e[j].wanted, e->wanted) == 0 &&
                   strcmp(d->e[j].format, e->format) == 0 && strcmp(d->e[j].fallback.code, e->fallback.code) == 0 &&
                   strcmp(d->e[j].fallback.text, e->fallback.text) == 0;
        if (seen) continue;
        size_t count = 0;
        for (size_t j = i; j < d->n; j++)
            count += d->e[j].fallback.code[0] && strcmp(d->e[j].wanted, e->wanted) == 0 &&
                     strcmp(d->e[j].format, e->format) == 0 && strcmp(d->e[j].fallback.text, e->fallback.text) == 0;
        if (!any) fprintf(f, "fallbacks (wanted -> used, where: reason):\n");
        any = 1;
        if (count > 1)
            fprintf(f, "  wanted %s -> used %s, %zu entries from %s %s b%lld: %s: %s\n", e->wanted, e->format, count,
                    L->layers[e->layer].name, qc_phase_name(e->phase), (long long)e->batch, e->fallback.code,
                    e->fallback.text);
        else
            fprintf(f, "  wanted %s -> used %s, %s %s b%lld: %s: %s\n", e->wanted, e->format,
                    L->layers[e->layer].name, qc_phase_name(e->phase), (long long)e->batch, e->fallback.code,
                    e->fallback.text);
    }
    if (!any) fprintf(f, "fallbacks: none\n");
}
