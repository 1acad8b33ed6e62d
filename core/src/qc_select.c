/* qc_select.c - eligibility of formats and kernels, with structured fallback reasons. */
#include <string.h>

#include "qc_internal.h"

static int in_arch(qc_arch_range r, uint32_t sm) { return sm >= r.min_sm && sm <= r.max_sm; }

/* Checks that hold for every kernel of a format: alignment, group size and
 * the format's own callback. */
static int format_shape_ok(const qc_format_desc *f, const qc_problem *p, qc_reason *why) {
    if (p->n <= 0 || p->k <= 0 || p->m < 0) {
        qc_reason_set(why, "shape", "%s: shape m=%lld n=%lld k=%lld is not a valid linear problem", f->name,
                      (long long)p->m, (long long)p->n, (long long)p->k);
        return 0;
    }
    if (p->n % f->n_align) {
        qc_reason_set(why, "align_n", "%s needs N to be a multiple of %u, layer has N=%lld", f->name, f->n_align,
                      (long long)p->n);
        return 0;
    }
    if (p->k % f->k_align) {
        qc_reason_set(why, "align_k", "%s needs K to be a multiple of %u, layer has K=%lld", f->name, f->k_align,
                      (long long)p->k);
        return 0;
    }
    if (p->group_size && f->n_group_sizes) {
        int ok = 0;
        for (uint32_t i = 0; i < f->n_group_sizes; i++) ok |= f->group_sizes[i] == p->group_size;
        if (!ok) {
            qc_reason_set(why, "group", "%s has no group size %u", f->name, p->group_size);
            return 0;
        }
    }
    if (f->eligible && !f->eligible(p, why)) {
        if (!why->code[0]) qc_reason_set(why, "shape", "%s refused the problem without a reason", f->name);
        return 0;
    }
    return 1;
}

int qc_select_kernel(const qc_kernel_desc *k, const qc_format_desc *f, const qc_problem *p, int gpu,
                     qc_reason *why) {
    if (gpu) {
        if (!k->cuda_source) {
            qc_reason_set(why, "missing", "%s has no CUDA version", k->id);
            return 0;
        }
        if (!in_arch(k->arch, p->sm)) {
            char r[32];
            qc_arch_range_str(k->arch, r, sizeof r);
            qc_reason_set(why, "arch", "%s needs %s, device is sm_%u", k->id, r, p->sm);
            return 0;
        }
        if (p->m < k->m_min || (k->m_max > 0 && p->m > k->m_max)) {
            qc_reason_set(why, "m_range", "%s is meant for M in [%lld, %lld], batch has M=%lld", k->id,
                          (long long)k->m_min, (long long)k->m_max, (long long)p->m);
            return 0;
        }
        if (p->phase && !(k->phases & p->phase)) {
            qc_reason_set(why, "phase", "%s does not run in %s", k->id, qc_phase_name(p->phase));
            return 0;
        }
    } else if (!k->reference) {
        qc_reason_set(why, "missing", "%s has no C reference", k->id);
        return 0;
    }
    if (!format_shape_ok(f, p, why)) return 0;
    if (k->eligible && !k->eligible(p, why)) {
        if (!why->code[0]) qc_reason_set(why, "shape", "%s refused the problem without a reason", k->id);
        return 0;
    }
    return 1;
}

int qc_select_format(const qc_runtime *rt, const qc_format_desc *f, const qc_problem *p, int gpu,
                     const qc_kernel_desc **kernel_out, qc_reason *why) {
    memset(why, 0, sizeof *why);
    if (kernel_out) *kernel_out = NULL;
    if (gpu && !in_arch(f->supported_arch, p->sm)) {
        char r[32];
        qc_arch_range_str(f->supported_arch, r, sizeof r);
        qc_reason_set(why, "arch", "%s needs %s, device is sm_%u", f->name, r, p->sm);
        return 0;
    }
    if (!format_shape_ok(f, p, why)) return 0;
    /* The first refusal of the best-ranked kind is kept: "missing" is the
     * least informative, so any other reason replaces it. */
    qc_reason first = {{0}, {0}};
    int any = 0;
    for (size_t i = 0; i < rt->n_kernels; i++) {
        const qc_kernel_desc *k = &rt->kernels[i].desc;
        if (strcmp(k->format, f->name) != 0) continue;
        any = 1;
        qc_reason r = {{0}, {0}};
        if (qc_select_kernel(k, f, p, gpu, &r)) {
            if (kernel_out) *kernel_out = k;
            return 1;
        }
        if (!first.code[0] || (strcmp(first.code, "missing") == 0 && strcmp(r.code, "missing") != 0)) first = r;
    }
    if (!any || strcmp(first.code, "missing") == 0)
        qc_reason_set(why, "missing", "%s has no %s kernel yet", f->name, gpu ? "GPU" : "C reference");
    else
        *why = first;
    return 0;
}
