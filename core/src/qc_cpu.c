/* qc_cpu.c - the CPU reference forward pass: every linear layer through its format's exact operands. */
#define _GNU_SOURCE
#include <cblas.h>
#include <stdio.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_model.h"
#include "qc_report.h"

void openblas_set_num_threads(int num_threads);

void qc_cpu_free_scratch(qc_model *m) {
    free(m->s_x), free(m->s_h), free(m->s_q), free(m->s_k), free(m->s_v), free(m->s_att);
    free(m->s_gate), free(m->s_up), free(m->s_act), free(m->s_scores);
    m->s_x = m->s_h = m->s_q = m->s_k = m->s_v = m->s_att = m->s_gate = m->s_up = m->s_act = m->s_scores = NULL;
    m->scratch_rows = 0;
}

static int n_threads(const qc_model *m) {
    if (m->threads > 0) return m->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 64 ? 64 : n) : 1;
}

qc_status qc_cpu_reserve(qc_model *m, size_t rows, char *err, size_t errlen) {
    if (rows <= m->scratch_rows) return QC_OK;
    qc_cpu_free_scratch(m);
    const qc_model_shape *s = &m->shape;
    size_t q = (size_t)s->n_heads * s->head_dim, kv = (size_t)s->n_kv_heads * s->head_dim;
    size_t wide = (size_t)s->intermediate > q ? (size_t)s->intermediate : q;
    if ((size_t)s->hidden > wide) wide = (size_t)s->hidden;
    m->s_x = malloc(rows * s->hidden * sizeof(float));
    m->s_h = malloc(rows * wide * sizeof(float));
    m->s_q = malloc(rows * q * sizeof(float));
    m->s_k = malloc(rows * kv * sizeof(float));
    m->s_v = malloc(rows * kv * sizeof(float));
    m->s_att = malloc(rows * q * sizeof(float));
    m->s_gate = malloc(rows * s->intermediate * sizeof(float));
    m->s_up = malloc(rows * s->intermediate * sizeof(float));
    m->s_act = malloc(rows * wide * sizeof(float));
    /* per-thread score rows for decode, or a rows x context block for prefill */
    size_t score_rows = rows > (size_t)n_threads(m) ? rows : (size_t)n_threads(m);
    m->s_scores = malloc(score_rows * (size_t)m->max_context * sizeof(float));
    if (!m->s_x || !m->s_h || !m->s_q || !m->s_k || !m->s_v || !m->s_att || !m->s_gate || !m->s_up || !m->s_act ||
        !m->s_scores) {
        qc_cpu_free_scratch(m);
        qc_errf(err, errlen, "out of memory for activations of %zu tokens", rows);
        return QC_ERR_NOMEM;
    }
    m->scratch_rows = rows;
    return QC_OK;
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t rows, int64_t dim, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        double ss = 0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / (double)dim + eps));
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] = xr[i] * inv * w[i];
    }
}

/* y[M,N] = x[M,K] W^T through the format the dispatch table picked. */
static qc_status linear(qc_model *m, const qc_linear *L, const float *x, int64_t rows, float *y, qc_phase phase,
                        char *err, size_t errlen) {
    size_t li = (size_t)(L->info - m->layers->layers);
    const qc_dispatch_entry *e = qc_dispatch_lookup(m->dispatch, li, phase, rows);
    const qc_prepared *p = NULL;
    for (int i = 0; e && i < L->n_prep; i++)
        if (strcmp(L->prep[i].fmt->name, e->format) == 0) p = &L->prep[i];
    if (!p) {
        qc_errf(err, errlen, "%s: no prepared weights for format '%s'", L->info->name, e ? e->format : "?");
        return QC_ERR_INTERNAL;
    }
    int64_t n = L->src.n, k = L->src.k;
    double t0 = m->trace ? qc_now_seconds() : 0;
    const float *xa = x;
    if (p->fmt->quantize_activations) {
        qc_status st = p->fmt->quantize_activations(&p->pw, x, rows, m->s_act);
        if (st != QC_OK) {
            qc_errf(err, errlen, "%s: %s could not quantize activations", L->info->name, p->fmt->name);
            return st;
        }
        xa = m->s_act;
    }
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, 1.0f, p->deq, (int)k, xa, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k, 1.0f, xa, (int)k, p->deq,
                    (int)k, 0.0f, y, (int)n);
    if (L->bias)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) y[r * n + j] += L->bias[j];
    m->kernel_calls++;
    if (m->trace) {
        /* the kernel that defines the numbers, run here as its float path */
        const char *kid = p->kernel ? p->kernel->id : "";
        qc_trace_event_layer(m->trace, kid[0] ? kid : L->info->name, "linear", L->info->name,
                             qc_format_plugin(m->rt, p->fmt->name), p->fmt->name, kid, rows, n, k, t0,
                             qc_now_seconds());
    }
    return QC_OK;
}

static void rope(const qc_model *m, float *x, int64_t rows, int heads, size_t pos0) {
    int hd = m->shape.head_dim, half = hd / 2;
    for (int64_t r = 0; r < rows; r++) {
        double p = (double)(pos0 + (size_t)r);
        for (int h = 0; h < heads; h++) {
            float *v = x + (r * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                double a = p * m->inv_freq[i];
                float c = (float)cos(a), s = (float)sin(a);
                int i0 = m->rope == QC_ROPE_ADJACENT ? 2 * i : i;
                int i1 = m->rope == QC_ROPE_ADJACENT ? 2 * i + 1 : i + half;
                float a0 = v[i0], a1 = v[i1];
                v[i0] = a0 * c - a1 * s;
                v[i1] = a0 * s + a1 * c;
            }
        }
    }
}

/* ---- attention, split over heads ---- */

typedef struct attn_job {
    const qc_model *m;
    int layer;
    int64_t rows;
    size_t pos0;
    int h_begin, h_end;
    float *scores;
} attn_job;

static void *attn_run(void *arg) {
    attn_job *j = arg;
    const qc_model *m = j->m;
    const qc_model_shape *s = &m->shape;
    int hd = s->head_dim, kvh = s->n_kv_heads, group = s->n_heads / kvh;
    size_t stride = (size_t)kvh * hd;
    const float *kc = m->k_cache + (size_t)j->layer * m->max_context * stride;
    const float *vc = m->v_cache + (size_t)j->layer * m->max_context * stride;
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t r = 0; r < j->rows; r++) {
        size_t len = j->pos0 + (size_t)r + 1; /* causal: positions 0..pos */
        for (int h = j->h_begin; h < j->h_end; h++) {
            const float *q = m->s_q + (r * s->n_heads + h) * hd;
            int g = h / group;
            float mx = -INFINITY;
            for (size_t t = 0; t < len; t++) {
                const float *k = kc + t * stride + (size_t)g * hd;
                float d = 0;
                for (int i = 0; i < hd; i++) d += q[i] * k[i];
                d *= scale;
                j->scores[t] = d;
                if (d > mx) mx = d;
            }
            double sum = 0;
            for (size_t t = 0; t < len; t++) {
                j->scores[t] = expf(j->scores[t] - mx);
                sum += j->scores[t];
            }
            float inv = (float)(1.0 / sum);
            float *o = m->s_att + (r * s->n_heads + h) * hd;
            for (int i = 0; i < hd; i++) o[i] = 0;
            for (size_t t = 0; t < len; t++) {
                const float *v = vc + t * stride + (size_t)g * hd;
                float w = j->scores[t] * inv;
                for (int i = 0; i < hd; i++) o[i] += w * v[i];
            }
        }
    }
    return NULL;
}

/* Prefill: per head, S = Q K^T and O = softmax(S) V as two GEMMs (causal
 * mask applied in between); the same arithmetic as attn_run, ordered for BLAS. */
static void attention_gemm(qc_model *m, int layer, int64_t rows, size_t pos0) {
    const qc_model_shape *s = &m->shape;
    int hd = s->head_dim, kvh = s->n_kv_heads, group = s->n_heads / kvh;
    int ld_q = s->n_heads * hd, ld_kv = kvh * hd;
    size_t len = pos0 + (size_t)rows;
    const float *kc = m->k_cache + (size_t)layer * m->max_context * ld_kv;
    const float *vc = m->v_cache + (size_t)layer * m->max_context * ld_kv;
    float *S = m->s_scores; /* rows x len, reserved by qc_cpu_reserve */
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < s->n_heads; h++) {
        int g = h / group;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)len, hd, scale, m->s_q + h * hd, ld_q,
                    kc + g * hd, ld_kv, 0.0f, S, (int)len);
        for (int64_t r = 0; r < rows; r++) {
            float *row = S + r * len;
            size_t valid = pos0 + (size_t)r + 1;
            float mx = -INFINITY;
            for (size_t t = 0; t < valid; t++) mx = row[t] > mx ? row[t] : mx;
            double sum = 0;
            for (size_t t = 0; t < valid; t++) {
                row[t] = expf(row[t] - mx);
                sum += row[t];
            }
            float inv = (float)(1.0 / sum);
            for (size_t t = 0; t < valid; t++) row[t] *= inv;
            for (size_t t = valid; t < len; t++) row[t] = 0.0f; /* causal */
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, hd, (int)len, 1.0f, S, (int)len,
                    vc + g * hd, ld_kv, 0.0f, m->s_att + h * hd, ld_q);
    }
}

static void attention(qc_model *m, int layer, int64_t rows, size_t pos0) {
    if (rows >= 8) {
        attention_gemm(m, layer, rows, pos0);
        return;
    }
    int nt = n_threads(m), heads = m->shape.n_heads;
    /* threads pay off only when there is enough work per head */
    if ((double)rows * (double)(pos0 + (size_t)rows) < 4096) nt = 1;
    if (nt > heads) nt = heads;
    attn_job jobs[64];
    pthread_t tid[64];
    int started[64] = {0};
    for (int t = 0; t < nt; t++) {
        jobs[t] = (attn_job){.m = m, .layer = layer, .rows = rows, .pos0 = pos0, .h_begin = heads * t / nt,
                             .h_end = heads * (t + 1) / nt, .scores = m->s_scores + (size_t)t * m->max_context};
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, attn_run, &jobs[t]) == 0;
        if (t > 0 && !started[t]) attn_run(&jobs[t]); /* no thread: do it here */
    }
    attn_run(&jobs[0]);
    for (int t = 1; t < nt; t++)
        if (started[t]) pthread_join(tid[t], NULL);
}

/* rows x kv_dim values through a KV format's C reference: codes (its
 * write_ref, scale 1.0 per tensor, variant 0) decoded back (read_ref) into
 * the f32 cache rows at dst. */
static qc_status kv_store_ref(qc_model *m, const float *src, float *dst, int64_t rows, char *err, size_t errlen) {
    int64_t kvh = m->shape.n_kv_heads, hd = m->shape.head_dim;
    uint8_t *codes = malloc((size_t)(rows * kvh * hd) * 2); /* room for a 16-bit format too */
    if (!codes) {
        qc_errf(err, errlen, "out of memory");
        return QC_ERR_NOMEM;
    }
    float one = 1.f;
    uint32_t variant = 0;
    const void *psrc = src, *pcodes = codes, *pdst = dst, *pscale = &one;
    qc_named_arg a[] = {{"src", &psrc},      {"cache", &pcodes},   {"dst", &pdst},     {"scales", &pscale},
                        {"variant", &variant}, {"tokens", &rows},  {"kv_heads", &kvh}, {"head_dim", &hd}};
    void *argv[16];
    qc_status st = qc_kernel_bind(m->kv_write_ref, a, 8, argv, 16, err, errlen);
    if (st == QC_OK) st = qc_kernel_call_reference(m->kv_write_ref, argv, err, errlen);
    if (st == QC_OK) st = qc_kernel_bind(m->kv_read_ref, a, 8, argv, 16, err, errlen);
    if (st == QC_OK) st = qc_kernel_call_reference(m->kv_read_ref, argv, err, errlen);
    free(codes);
    return st;
}

qc_status qc_cpu_forward(qc_model *m, const int32_t *tokens, size_t n, float *logits, int all_logits, char *err,
                         size_t errlen) {
    const qc_model_shape *s = &m->shape;
    if (n == 0) return QC_OK;
    if (m->pos + n > (size_t)m->max_context) {
        qc_errf(err, errlen, "context full: %zu + %zu tokens exceed the %d positions of the KV cache", m->pos, n,
                m->max_context);
        return QC_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->vocab) {
            qc_errf(err, errlen, "token id %d is outside the vocabulary (%d)", tokens[i], s->vocab);
            return QC_ERR_INVALID;
        }
    qc_status st = qc_cpu_reserve(m, n, err, errlen);
    if (st != QC_OK) return st;
    openblas_set_num_threads(n_threads(m));
    int64_t rows = (int64_t)n, H = s->hidden, hd = s->head_dim;
    int64_t kvdim = (int64_t)s->n_kv_heads * hd, ff = s->intermediate;
    qc_phase phase = n > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE;
    for (int64_t r = 0; r < rows; r++) memcpy(m->s_x + r * H, m->tok_embd + (size_t)tokens[r] * H, H * sizeof(float));

    for (int b = 0; b < s->n_layers; b++) {
        qc_block *B = &m->blocks[b];
        rmsnorm(m->s_h, m->s_x, B->attn_norm, rows, H, s->rms_eps);
        if ((st = linear(m, &B->lin[0], m->s_h, rows, m->s_q, phase, err, errlen)) ||
            (st = linear(m, &B->lin[1], m->s_h, rows, m->s_k, phase, err, errlen)) ||
            (st = linear(m, &B->lin[2], m->s_h, rows, m->s_v, phase, err, errlen)))
            return st;
        if (B->q_norm) {
            rmsnorm(m->s_q, m->s_q, B->q_norm, rows * s->n_heads, hd, s->rms_eps);
            rmsnorm(m->s_k, m->s_k, B->k_norm, rows * s->n_kv_heads, hd, s->rms_eps);
        }
        rope(m, m->s_q, rows, s->n_heads, m->pos);
        rope(m, m->s_k, rows, s->n_kv_heads, m->pos);
        /* the cache holds what the cache format stores: bf16, or the KV
           format's codes decoded by its own C reference */
        size_t base = ((size_t)b * m->max_context + m->pos) * (size_t)kvdim;
        if (m->kv_write_ref) {
            if ((st = kv_store_ref(m, m->s_k, m->k_cache + base, rows, err, errlen)) ||
                (st = kv_store_ref(m, m->s_v, m->v_cache + base, rows, err, errlen)))
                return st;
        } else {
            for (int64_t i = 0; i < rows * kvdim; i++) {
                m->k_cache[base + i] = qc_round_bf16(m->s_k[i]);
                m->v_cache[base + i] = qc_round_bf16(m->s_v[i]);
            }
        }
        double ta = m->trace ? qc_now_seconds() : 0;
        attention(m, b, rows, m->pos);
        m->kernel_calls++;
        if (m->trace) {
            char name[48];
            snprintf(name, sizeof name, "blk.%d.attention", b);
            const char *kid = rows >= 8 ? "cpu.attention_gemm" : "cpu.attention";
            qc_trace_event_layer(m->trace, kid, "attention", name, "org.qcore.builtin", m->kv_format, kid, rows,
                                 (int64_t)(m->pos + (size_t)rows), s->head_dim, ta, qc_now_seconds());
        }
        if ((st = linear(m, &B->lin[3], m->s_att, rows, m->s_h, phase, err, errlen))) return st;
        for (int64_t i = 0; i < rows * H; i++) m->s_x[i] += m->s_h[i];

        rmsnorm(m->s_h, m->s_x, B->ffn_norm, rows, H, s->rms_eps);
        if ((st = linear(m, &B->lin[4], m->s_h, rows, m->s_gate, phase, err, errlen)) ||
            (st = linear(m, &B->lin[5], m->s_h, rows, m->s_up, phase, err, errlen)))
            return st;
        for (int64_t i = 0; i < rows * ff; i++) {
            float g = m->s_gate[i];
            m->s_gate[i] = g / (1.0f + expf(-g)) * m->s_up[i];
        }
        if ((st = linear(m, &B->lin[6], m->s_gate, rows, m->s_h, phase, err, errlen))) return st;
        for (int64_t i = 0; i < rows * H; i++) m->s_x[i] += m->s_h[i];
    }
    m->pos += n;
    /* the head: all rows for perplexity, the last one for generation */
    const float *last = all_logits ? m->s_x : m->s_x + (rows - 1) * H;
    int64_t out_rows = all_logits ? rows : 1;
    rmsnorm(m->s_h, last, m->output_norm, out_rows, H, s->rms_eps);
    return linear(m, &m->lm_head, m->s_h, out_rows, logits, out_rows > 1 ? QC_PHASE_PREFILL : phase, err, errlen);
}
