/* test_gpu_attn.c - paged attention (kv_write, split-K decode + reduce, causal prefill) against the C references and a double oracle; timings. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_kernels_attn.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_attn"
/* words after each output, poisoned too, that the kernels must leave alone */
#define GUARD_WORDS 64
/* two bf16 quiet NaNs: cache rows never written (the tails of last blocks) */
#define CACHE_POISON 0x7fc17fc1u
/* the memory floor of decode: KV bytes at the H200's HBM bandwidth */
#define HBM_BPS 4.2e12
/* timing: block tables cycled over copies of the cache so that launches read HBM, not the 60 MiB L2 */
#define ROTATE_BYTES (512ull << 20)
#define MAX_SETS 64
#define REPS 50
/* Tolerance (see qc_kernels_attn.c): q rounded to bf16 in the reference as
 * on the GPU; P rounded to bf16 on the GPU only.  Per output:
 * |gpu - ref| <= 2^-8 * sum_j p_j |v_j| + 1e-6 (p normalized), and over a
 * case the relative L2 error <= 2^-8 (rounding errors of random data are
 * not aligned; one key of 32768 left out already exceeds it). */
#define TOL_REL (1.0 / 256)
#define TOL_ABS 1e-6
#define TOL_L2 (1.0 / 256)

typedef struct ctx {
    qc_gpu *g;
    qc_nvrtc *nv;
    qc_runtime *rt;
    const qc_kernel_desc *kw, *dec, *red, *pf, *redb;
    qc_gpu_fn fkw, fdec, fred, fpf, fredb;
    uint64_t rng;
} ctx;

/* A paged KV cache with block tables: `sets` copies of the tables, each over
 * its own blocks (set 0 for correctness; more to cycle through HBM). */
typedef struct kvset {
    int n_seqs, nh, nkv, hd, max_blocks, sets;
    int64_t num_blocks;
    int32_t *bt, *ctx; /* bt: [sets][n_seqs][max_blocks] */
    uint16_t *hk, *hv; /* host copy: cache element i is hk[i % hlen] */
    size_t hlen;
    qc_gpu_buf dk, dv, dbt, dctx;
} kvset;

static void kv_free(ctx *c, kvset *kv) {
    qc_gpu_free(c->g, &kv->dk);
    qc_gpu_free(c->g, &kv->dv);
    qc_gpu_free(c->g, &kv->dbt);
    qc_gpu_free(c->g, &kv->dctx);
    free(kv->bt), free(kv->ctx), free(kv->hk), free(kv->hv);
    memset(kv, 0, sizeof *kv);
}

static qc_status upload_new(ctx *c, const void *src, size_t bytes, const char *what, qc_gpu_buf *b, char *err,
                            size_t errlen) {
    qc_status st = qc_gpu_alloc(c->g, bytes, bytes, QC_MEM_ACTIVATIONS, what, b, err, errlen);
    return st == QC_OK && src ? qc_gpu_upload(c->g, b->ptr, src, bytes, err, errlen) : st;
}

static void shuffle_i32(uint64_t *rng, int32_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(qc_test_rng(rng) % (uint64_t)(i + 1));
        int32_t x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* Tables: each sequence's blocks are a random, non-contiguous pick of the
 * set's shuffled block ids; one spare column of ids far out of range that
 * the kernels must never read.  write = 1: the cache starts as NaN, every
 * token of every context is written through core.kv_write (GPU) and its C
 * reference (host), shuffled and with skipped tokens, and the two caches
 * are compared bit for bit.  write = 0: the cache is a random pattern. */
static int kv_build(ctx *c, kvset *kv, int n_seqs, const int32_t *ctx_lens, int nh, int nkv, int hd, int sets,
                    int write) {
    char err[512];
    memset(kv, 0, sizeof *kv);
    kv->n_seqs = n_seqs, kv->nh = nh, kv->nkv = nkv, kv->hd = hd, kv->sets = sets;
    int64_t per_set = 3, tokens = 0;
    int maxb = 1;
    for (int s = 0; s < n_seqs; s++) {
        int b = (ctx_lens[s] + 15) / 16;
        per_set += b;
        tokens += ctx_lens[s];
        if (b > maxb) maxb = b;
    }
    kv->max_blocks = maxb + 1;
    kv->num_blocks = per_set * sets;
    size_t row = (size_t)nkv * 16 * hd, elems = (size_t)kv->num_blocks * row;
    kv->bt = malloc((size_t)sets * n_seqs * kv->max_blocks * 4);
    kv->ctx = malloc((size_t)n_seqs * 4);
    int32_t *ids = malloc((size_t)per_set * 4);
    if (!kv->bt || !kv->ctx || !ids) {
        free(ids);
        CHECK(0, "out of host memory");
        return 0;
    }
    memcpy(kv->ctx, ctx_lens, (size_t)n_seqs * 4);
    for (int st = 0; st < sets; st++) {
        for (int64_t i = 0; i < per_set; i++) ids[i] = (int32_t)(st * per_set + i);
        shuffle_i32(&c->rng, ids, per_set);
        int64_t next = 0;
        for (int s = 0; s < n_seqs; s++) {
            int32_t *r = kv->bt + ((size_t)st * n_seqs + s) * kv->max_blocks;
            for (int j = 0; j < kv->max_blocks; j++) r[j] = j < (ctx_lens[s] + 15) / 16 ? ids[next++] : 0x7ffffff0;
        }
    }
    free(ids);
    qc_status st = upload_new(c, kv->bt, (size_t)sets * n_seqs * kv->max_blocks * 4, "block tables", &kv->dbt, err,
                              sizeof err);
    if (st == QC_OK) st = upload_new(c, kv->ctx, (size_t)n_seqs * 4, "ctx_lens", &kv->dctx, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, elems * 2, elems * 2, QC_MEM_KV, "k cache", &kv->dk, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, elems * 2, elems * 2, QC_MEM_KV, "v cache", &kv->dv, err, sizeof err);
    CHECK(st == QC_OK, "kv buffers: %s", err);
    if (st != QC_OK) return 0;

    if (!write) { /* a random pattern of 4 Mi + 7 values, tiled */
        kv->hlen = elems < (4u << 20) + 7 ? elems : (4u << 20) + 7;
        kv->hk = malloc(kv->hlen * 2);
        kv->hv = malloc(kv->hlen * 2);
        if (!kv->hk || !kv->hv) {
            CHECK(0, "out of host memory");
            return 0;
        }
        for (size_t i = 0; i < kv->hlen; i++) {
            kv->hk[i] = qc_f32_to_bf16(qc_test_normal(&c->rng));
            kv->hv[i] = qc_f32_to_bf16(qc_test_normal(&c->rng));
        }
        for (size_t off = 0; st == QC_OK && off < elems; off += kv->hlen) {
            size_t n = elems - off < kv->hlen ? elems - off : kv->hlen;
            st = qc_gpu_upload(c->g, kv->dk.ptr + off * 2, kv->hk, n * 2, err, sizeof err);
            if (st == QC_OK) st = qc_gpu_upload(c->g, kv->dv.ptr + off * 2, kv->hv, n * 2, err, sizeof err);
        }
        CHECK(st == QC_OK, "kv pattern: %s", err);
        return st == QC_OK;
    }

    /* write: tokens in a shuffled order, plus 5 with slot -1 */
    int64_t t = tokens + 5;
    size_t vals = (size_t)t * nkv * hd;
    float *k = malloc(vals * 4), *v = malloc(vals * 4);
    int32_t *slots = malloc((size_t)t * 4), *order = malloc((size_t)t * 4);
    uint16_t *gk = malloc(elems * 2), *gv = malloc(elems * 2);
    kv->hlen = elems;
    kv->hk = malloc(elems * 2);
    kv->hv = malloc(elems * 2);
    qc_gpu_buf dkk = {0}, dvv = {0}, dsl = {0};
    int ok = 0;
    if (!k || !v || !slots || !order || !gk || !gv || !kv->hk || !kv->hv) {
        CHECK(0, "out of host memory");
        goto out;
    }
    for (size_t i = 0; i < vals; i++) {
        k[i] = qc_test_normal(&c->rng);
        v[i] = qc_test_normal(&c->rng);
    }
    if (vals > 9) k[7] = 0x1.fffp-3f, v[9] = 0x1.0101p0f; /* ties and near-ties of the rounding */
    for (int64_t i = 0; i < t; i++) order[i] = (int32_t)i;
    shuffle_i32(&c->rng, order, t);
    {
        int64_t i = 0;
        for (int s = 0; s < n_seqs; s++)
            for (int j = 0; j < ctx_lens[s]; j++)
                slots[order[i++]] = kv->bt[(size_t)s * kv->max_blocks + j / 16] * 16 + j % 16;
        for (; i < t; i++) slots[order[i]] = -1 - (int32_t)(i & 3);
    }
    for (size_t i = 0; i < elems; i++) kv->hk[i] = kv->hv[i] = 0x7fc1; /* CACHE_POISON */
    st = upload_new(c, k, vals * 4, "k", &dkk, err, sizeof err);
    if (st == QC_OK) st = upload_new(c, v, vals * 4, "v", &dvv, err, sizeof err);
    if (st == QC_OK) st = upload_new(c, slots, (size_t)t * 4, "slots", &dsl, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, kv->dk.ptr, CACHE_POISON, elems / 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, kv->dv.ptr, CACHE_POISON, elems / 2, err, sizeof err);
    CHECK(st == QC_OK, "kv_write buffers: %s", err);
    if (st != QC_OK) goto out;
    int32_t nkv32 = nkv, hd32 = hd;
    void *hk = k, *hv = v, *hkc = kv->hk, *hvc = kv->hv, *hs = slots;
    qc_named_arg args[] = {{"k", &hk},   {"v", &hv},           {"k_cache", &hkc},   {"v_cache", &hvc},
                           {"slots", &hs}, {"t", &t},          {"n_kv_heads", &nkv32}, {"head_dim", &hd32}};
    void *argv[8];
    st = qc_kernel_bind(c->kw, args, 8, argv, 8, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(c->kw, argv, err, sizeof err);
    CHECK(st == QC_OK, "kv_write reference: %s", err);
    if (st != QC_OK) goto out;
    args[0].value = &dkk.ptr, args[1].value = &dvv.ptr, args[2].value = &kv->dk.ptr, args[3].value = &kv->dv.ptr;
    args[4].value = &dsl.ptr;
    qc_problem p;
    qc_attn_problem(&p, t, nh, nkv, hd, 0);
    qc_launch_dims d;
    c->kw->launch_dims(&p, &d);
    st = qc_kernel_bind(c->kw, args, 8, argv, 8, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fkw, &d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, gk, kv->dk.ptr, elems * 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, gv, kv->dv.ptr, elems * 2, err, sizeof err);
    CHECK(st == QC_OK, "kv_write: %s", err);
    if (st != QC_OK) goto out;
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < elems; i++)
        if (gk[i] != kv->hk[i] || gv[i] != kv->hv[i]) {
            if (!diff) first = i;
            diff++;
        }
    CHECK(diff == 0, "kv_write: %zu of %zu cache values differ from the reference (first %zu: k %04x/%04x v %04x/%04x)",
          diff, elems, first, gk[first], kv->hk[first], gv[first], kv->hv[first]);
    printf("  kv_write  %lld tokens (5 skipped) x %d heads x d %d -> %lld blocks: %s\n", (long long)t, nkv, hd,
           (long long)kv->num_blocks, diff ? "DIFFERS" : "bit-exact with the reference");
    ok = diff == 0;
out:
    qc_gpu_free(c->g, &dkk);
    qc_gpu_free(c->g, &dvv);
    qc_gpu_free(c->g, &dsl);
    free(k), free(v), free(slots), free(order), free(gk), free(gv);
    return ok;
}

/* Double-precision attention of one q row (rounded to bf16) over keys
 * 0 .. n_keys - 1 of sequence s (table set 0): val[d] and mag[d] = sum_j
 * p_j |v_j[d]| with p normalized.  sc: n_keys doubles of scratch. */
static void oracle_row(const kvset *kv, int s, int kvh, const float *q, int64_t n_keys, float scale, double *val,
                       double *mag, double *sc) {
    int hd = kv->hd;
    if (n_keys <= 0) {
        for (int d = 0; d < hd; d++) val[d] = mag[d] = 0;
        return;
    }
    const int32_t *btr = kv->bt + (size_t)s * kv->max_blocks;
    double qd[128], mx = -INFINITY, l = 0;
    for (int d = 0; d < hd; d++) qd[d] = qc_round_bf16(q[d]);
    for (int64_t j = 0; j < n_keys; j++) {
        size_t row = (((size_t)btr[j / 16] * kv->nkv + kvh) * 16 + j % 16) * hd, e = 0;
        double acc = 0;
        for (int d = 0; d < hd; d++) {
            e = (row + d) % kv->hlen;
            acc += qd[d] * qc_bf16_to_f32(kv->hk[e]);
        }
        sc[j] = acc * scale;
        if (sc[j] > mx) mx = sc[j];
    }
    for (int d = 0; d < hd; d++) val[d] = mag[d] = 0;
    for (int64_t j = 0; j < n_keys; j++) {
        size_t row = (((size_t)btr[j / 16] * kv->nkv + kvh) * 16 + j % 16) * hd;
        double p = exp(sc[j] - mx);
        l += p;
        for (int d = 0; d < hd; d++) {
            double x = qc_bf16_to_f32(kv->hv[(row + d) % kv->hlen]);
            val[d] += p * x;
            mag[d] += p * fabs(x);
        }
    }
    for (int d = 0; d < hd; d++) val[d] /= l, mag[d] /= l;
}

/* Running comparison of one case. */
typedef struct cmp {
    size_t n, bad, first;
    double worst, worst_ref, max_abs, err2, ref2;
} cmp;

/* gpu (and ref, when not NULL) against the oracle for hd outputs */
static void cmp_row(cmp *m, size_t base, const float *gpu, const float *ref, const double *val, const double *mag,
                    int hd) {
    for (int d = 0; d < hd; d++) {
        double lim = TOL_REL * mag[d] + TOL_ABS, e = fabs((double)gpu[d] - val[d]);
        double er = ref ? fabs((double)gpu[d] - ref[d]) : 0;
        double rr = ref ? fabs((double)ref[d] - val[d]) : 0; /* the reference is double too */
        int bad = !(e <= lim) || !(er <= lim) || !(rr <= 1e-5 * mag[d] + TOL_ABS);
        if (bad && !m->bad++) m->first = base + d;
        if (e / lim > m->worst || e != e) m->worst = e == e ? e / lim : INFINITY;
        if (er / lim > m->worst_ref) m->worst_ref = er / lim;
        if (e > m->max_abs) m->max_abs = e;
        m->err2 += e * e;
        m->ref2 += val[d] * val[d];
        m->n++;
    }
}

static int cmp_report(const cmp *m, const char *name) {
    double rl2 = m->ref2 > 0 ? sqrt(m->err2 / m->ref2) : sqrt(m->err2);
    printf("  %-58s %8zu outputs: max|d| %.2e worst d/tol %.3f (C ref %.3f) relL2 %.2e\n", name, m->n, m->max_abs,
           m->worst, m->worst_ref, rl2);
    CHECK(m->bad == 0, "%s: %zu outputs out of tolerance (first %zu)", name, m->bad, m->first);
    CHECK(rl2 <= TOL_L2, "%s: relative L2 error %.3e over %.3e", name, rl2, TOL_L2);
    return m->bad == 0 && rl2 <= TOL_L2;
}

static int check_written(const char *name, const float *got, size_t n) {
    size_t first = 0, left = gt_unwritten(got, n * 4, &first);
    CHECK(left == 0, "%s: %zu outputs unwritten (first %zu)", name, left, first);
    size_t past = gt_unwritten(got + n, GUARD_WORDS * 4, &first);
    CHECK(past == GUARD_WORDS, "%s: wrote %zu words past the end of out", name, GUARD_WORDS - past);
    return left == 0 && past == GUARD_WORDS;
}

static void ctx_list(char *buf, size_t len, int n, const int32_t *v) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 16 < len; i++) o += (size_t)snprintf(buf + o, len - o, i ? ",%d" : "%d", v[i]);
    if (o + 16 >= len) snprintf(buf + o, len - o, "...");
}

typedef gt_launch launch;

/* core.attn_decode_reduce_bf16 (the engine's reduce) on the partials and the out that the decode and
 * core.attn_decode_reduce left (args as they were bound, got: that out): out unchanged bit for bit (the
 * combine again, the same arithmetic), every element's bf16 copy written, equal to the C conversion's. */
static void reduce_bf16_check(ctx *c, const char *name, const qc_launch_dims *d, const qc_named_arg *args,
                              const float *got, size_t qn) {
    char err[512];
    qc_gpu_buf dob = {0};
    uint16_t *ob = malloc((qn + 2 * GUARD_WORDS) * 2);
    float *again = malloc(qn * 4);
    qc_status st = ob && again ? QC_OK : QC_ERR_NOMEM;
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, qn * 2, (qn + 2 * GUARD_WORDS) * 2, QC_MEM_ACTIVATIONS, "out.bf16", &dob, err,
                          sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dob.ptr, GT_POISON, (qn + 2 * GUARD_WORDS) / 2, err, sizeof err);
    qc_named_arg a[14];
    memcpy(a, args, 13 * sizeof a[0]);
    a[13] = (qc_named_arg){"out.bf16", &dob.ptr};
    void *argv[16];
    if (st == QC_OK) st = qc_kernel_bind(c->redb, a, 14, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fredb, d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, ob, dob.ptr, (qn + 2 * GUARD_WORDS) * 2, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, again, *(const qc_devptr *)args[5].value, qn * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s: bf16 reduce: %s", name, st == QC_ERR_NOMEM ? "out of host memory" : err);
    if (st == QC_OK) {
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < qn; i++)
            if (ob[i] != qc_f32_to_bf16(got[i]) || memcmp(&again[i], &got[i], 4) != 0) {
                if (!bad++) first = i;
            }
        int guard_ok = qn % 2 == 0; /* the poison is 32-bit words */
        for (size_t i = qn; guard_ok && i < qn + 2 * GUARD_WORDS; i += 2)
            guard_ok &= ((uint32_t)ob[i] | (uint32_t)ob[i + 1] << 16) == GT_POISON;
        CHECK(bad == 0, "%s: bf16 reduce: %zu of %zu elements differ from out / its bf16 (first %zu: %04x vs %04x)",
              name, bad, qn, first, bad ? ob[first] : 0, bad ? qc_f32_to_bf16(got[first]) : 0);
        CHECK(guard_ok, "%s: bf16 reduce wrote past out.bf16", name);
    }
    qc_gpu_free(c->g, &dob);
    free(ob), free(again);
}

/* ---- decode ---- */

/* One decode step over n_seqs sequences with the given contexts: the pair
 * decode + reduce against the C reference and the oracle (every output, or
 * `sample` (seq, head) rows when > 0), the reduce's C reference against the
 * GPU reduce from the same partials.  reps: time it (tables cycled). */
static void case_decode(ctx *c, int n_seqs, const int32_t *ctx_lens, int nh, int nkv, int hd, float qmul, int timing,
                        int sample) {
    char err[512], name[160], cl[64];
    ctx_list(cl, sizeof cl, n_seqs, ctx_lens);
    snprintf(name, sizeof name, "decode B=%d heads %d/%d d=%d ctx %s", n_seqs, nh, nkv, hd, cl);
    int64_t kvb = 0;
    for (int s = 0; s < n_seqs; s++) kvb += (int64_t)ctx_lens[s] * nkv * hd * 4;
    int sets = timing ? (int)(ROTATE_BYTES / (uint64_t)(kvb > 0 ? kvb : 1) + 1) : 1;
    if (sets > MAX_SETS) sets = MAX_SETS;
    kvset kv;
    if (!kv_build(c, &kv, n_seqs, ctx_lens, nh, nkv, hd, sets, !timing)) {
        kv_free(c, &kv);
        return;
    }
    size_t qn = (size_t)n_seqs * nh * hd, wbytes = qc_attn_decode_workspace_bytes(n_seqs, nh, hd, kv.max_blocks * 16);
    float *q = malloc(qn * 4), *got = malloc((qn + GUARD_WORDS) * 4), *ref = malloc(qn * 4), *red = malloc(qn * 4);
    float *work = malloc(wbytes);
    double *val = malloc((size_t)hd * 8), *mag = malloc((size_t)hd * 8);
    double *sc = malloc((size_t)kv.max_blocks * 16 * 8);
    qc_gpu_buf dq = {0}, dout = {0}, dwork = {0};
    if (!q || !got || !ref || !red || !work || !val || !mag || !sc) {
        CHECK(0, "out of host memory");
        goto out;
    }
    for (size_t i = 0; i < qn; i++) q[i] = qc_test_normal(&c->rng) * qmul;
    qc_status st = upload_new(c, q, qn * 4, "q", &dq, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, qn * 4, (qn + GUARD_WORDS) * 4, QC_MEM_ACTIVATIONS, "out", &dout, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_alloc(c->g, wbytes, wbytes, QC_MEM_WORKSPACE, "work", &dwork, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dout.ptr, GT_POISON, qn + GUARD_WORDS, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dwork.ptr, GT_POISON, wbytes / 4, err, sizeof err);
    CHECK(st == QC_OK, "%s: buffers: %s", name, err);
    if (st != QC_OK) goto out;
    float scale = (float)(1.0 / sqrt((double)hd));
    int32_t ns = n_seqs, nh32 = nh, nkv32 = nkv, hd32 = hd, mb = kv.max_blocks;
    qc_devptr dbt[MAX_SETS];
    for (int i = 0; i < sets; i++) dbt[i] = kv.dbt.ptr + (qc_devptr)i * n_seqs * kv.max_blocks * 4;
    qc_named_arg args[] = {{"q", &dq.ptr},           {"k_cache", &kv.dk.ptr},  {"v_cache", &kv.dv.ptr},
                           {"block_tables", &dbt[0]}, {"ctx_lens", &kv.dctx.ptr}, {"out", &dout.ptr},
                           {"work", &dwork.ptr},      {"n_seqs", &ns},          {"n_heads", &nh32},
                           {"n_kv_heads", &nkv32},    {"head_dim", &hd32},      {"max_blocks", &mb},
                           {"scale", &scale}};
    void *argv_store[MAX_SETS][2][16];
    launch ls[MAX_SETS][2];
    qc_problem p;
    qc_attn_problem(&p, n_seqs, nh, nkv, hd, kv.max_blocks);
    for (int i = 0; i < sets && st == QC_OK; i++) {
        args[3].value = &dbt[i];
        st = qc_kernel_bind(c->dec, args, 13, argv_store[i][0], 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_bind(c->red, args, 13, argv_store[i][1], 16, err, sizeof err);
        ls[i][0] = (launch){.fn = c->fdec, .argv = argv_store[i][0]};
        ls[i][1] = (launch){.fn = c->fred, .argv = argv_store[i][1]};
        c->dec->launch_dims(&p, &ls[i][0].d);
        c->red->launch_dims(&p, &ls[i][1].d);
    }
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fdec, &ls[0][0].d, ls[0][0].argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fred, &ls[0][1].d, ls[0][1].argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dout.ptr, (qn + GUARD_WORDS) * 4, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, work, dwork.ptr, wbytes, err, sizeof err);
    CHECK(st == QC_OK, "%s: launch: %s", name, err);
    if (st != QC_OK || !check_written(name, got, qn)) goto out;

    int parts = qc_attn_decode_parts(n_seqs, nkv, kv.max_blocks);
    if (!sample) { /* the C reference through the descriptor, as the runtime would call it */
        void *hq = q, *hk = kv.hk, *hv = kv.hv, *hbt = kv.bt, *hctx = kv.ctx, *hout = ref, *hw = NULL;
        qc_named_arg h[] = {{"q", &hq},       {"k_cache", &hk},   {"v_cache", &hv},       {"block_tables", &hbt},
                            {"ctx_lens", &hctx}, {"out", &hout},   {"work", &hw},          {"n_seqs", &ns},
                            {"n_heads", &nh32}, {"n_kv_heads", &nkv32}, {"head_dim", &hd32}, {"max_blocks", &mb},
                            {"scale", &scale}};
        void *argv[16];
        gt_poison(ref, qn * 4);
        st = qc_kernel_bind(c->dec, h, 13, argv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(c->dec, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s: reference: %s", name, err);
        if (st != QC_OK) goto out;
        size_t first = 0;
        CHECK(gt_unwritten(ref, qn * 4, &first) == 0, "%s: the reference left out[%zu] unwritten", name, first);
        /* the reduce's reference on the GPU's partials, into a copy of the GPU's out */
        memcpy(red, got, qn * 4);
        void *hred = red, *hwork = work;
        qc_named_arg r[] = {{"ctx_lens", &hctx}, {"out", &hred},       {"work", &hwork},    {"n_seqs", &ns},
                            {"n_heads", &nh32},  {"n_kv_heads", &nkv32}, {"head_dim", &hd32}, {"max_blocks", &mb}};
        st = qc_kernel_bind(c->red, r, 8, argv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(c->red, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s: reduce reference: %s", name, err);
        if (st != QC_OK) goto out;
    }
    cmp m = {0}, mr = {0};
    int rows = n_seqs * nh, nrows = sample ? sample : rows;
    for (int i = 0; i < nrows; i++) {
        int row = sample ? (int)(qc_test_rng(&c->rng) % (uint64_t)rows) : i, s = row / nh, h = row % nh;
        size_t base = (size_t)row * hd;
        oracle_row(&kv, s, h / (nh / nkv), q + base, ctx_lens[s], scale, val, mag, sc);
        cmp_row(&m, base, got + base, sample ? NULL : ref + base, val, mag, hd);
        if (!sample) /* f32 combine on the GPU vs double on the host, same partials */
            for (int d = 0; d < hd; d++) {
                double e = fabs((double)red[base + d] - got[base + d]), lim = 1e-5 * mag[d] + TOL_ABS;
                if (!(e <= lim) && !mr.bad++) mr.first = base + d;
                if (e / lim > mr.worst) mr.worst = e / lim;
            }
    }
    char full[240];
    snprintf(full, sizeof full, "%s (%d parts)%s", name, parts, sample ? " sampled" : "");
    cmp_report(&m, full);
    if (!sample) {
        printf("  %-58s reduce C reference vs GPU reduce: worst d/tol %.3f (tol 1e-5 * sum p|v|)\n", "", mr.worst);
        CHECK(mr.bad == 0, "%s: the reduce reference differs from the GPU reduce at %zu", name, mr.first);
    }
    if (!m.bad) reduce_bf16_check(c, name, &ls[0][1].d, args, got, qn);
    if (timing && !m.bad) {
        double us = gt_time_launches(c->g, &ls[0][0], 2, 2, sets, REPS);
        double floor_us = (double)kvb / HBM_BPS * 1e6;
        printf("  TIME %-53s median %9.2f us (decode + reduce, %d table sets, " GT_TIMING_NOTE ") KV %.1f MB floor %.2f us at 4.2 TB/s: "
               "%.1f%% of floor, %.2f TB/s\n",
               name, us, sets, kvb / 1e6, floor_us, 100.0 * floor_us / us, kvb / us * 1e-6);
    }
out:
    qc_gpu_free(c->g, &dq);
    qc_gpu_free(c->g, &dout);
    qc_gpu_free(c->g, &dwork);
    free(q), free(got), free(ref), free(red), free(work), free(val), free(mag), free(sc);
    kv_free(c, &kv);
}

/* ---- prefill ---- */

/* n_seqs sequences, sequence s has ctx_lens[s] tokens in the cache, the last
 * n_new[s] of which are this step's queries (the rest: earlier chunks).
 * sample > 0: check that many random (token, head) rows with the oracle only;
 * timing: print TFLOP/s. */
static void case_prefill(ctx *c, int n_seqs, const int32_t *n_new, const int32_t *ctx_lens, int nh, int nkv, int hd,
                         int sample, int timing) {
    char err[512], name[160], cl[64], nl[64];
    ctx_list(cl, sizeof cl, n_seqs, ctx_lens);
    ctx_list(nl, sizeof nl, n_seqs, n_new);
    snprintf(name, sizeof name, "prefill heads %d/%d d=%d new %s ctx %s", nh, nkv, hd, nl, cl);
    kvset kv;
    if (!kv_build(c, &kv, n_seqs, ctx_lens, nh, nkv, hd, 1, !timing)) {
        kv_free(c, &kv);
        return;
    }
    int32_t *qs = malloc((size_t)(n_seqs + 1) * 4);
    qs[0] = 0;
    double flops = 0;
    for (int s = 0; s < n_seqs; s++) {
        qs[s + 1] = qs[s] + n_new[s];
        flops += 4.0 * n_new[s] * ctx_lens[s] * hd * nh / 2;
    }
    int64_t t = qs[n_seqs];
    size_t qn = (size_t)t * nh * hd;
    float *q = malloc(qn * 4), *got = malloc((qn + GUARD_WORDS) * 4), *ref = malloc(qn * 4);
    double *val = malloc((size_t)hd * 8), *mag = malloc((size_t)hd * 8);
    double *sc = malloc((size_t)kv.max_blocks * 16 * 8);
    qc_gpu_buf dq = {0}, dout = {0}, dqs = {0};
    if (!q || !got || !ref || !val || !mag || !sc) {
        CHECK(0, "out of host memory");
        goto out;
    }
    for (size_t i = 0; i < qn; i++) q[i] = qc_test_normal(&c->rng) * 1.5f;
    qc_status st = upload_new(c, q, qn * 4, "q", &dq, err, sizeof err);
    if (st == QC_OK) st = upload_new(c, qs, (size_t)(n_seqs + 1) * 4, "q_start", &dqs, err, sizeof err);
    if (st == QC_OK)
        st = qc_gpu_alloc(c->g, qn * 4, (qn + GUARD_WORDS) * 4, QC_MEM_ACTIVATIONS, "out", &dout, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_memset32(c->g, dout.ptr, GT_POISON, qn + GUARD_WORDS, err, sizeof err);
    CHECK(st == QC_OK, "%s: buffers: %s", name, err);
    if (st != QC_OK) goto out;
    float scale = (float)(1.0 / sqrt((double)hd));
    int32_t ns = n_seqs, nh32 = nh, nkv32 = nkv, hd32 = hd, mb = kv.max_blocks;
    qc_named_arg args[] = {{"q", &dq.ptr},          {"k_cache", &kv.dk.ptr},  {"v_cache", &kv.dv.ptr},
                           {"block_tables", &kv.dbt.ptr}, {"ctx_lens", &kv.dctx.ptr}, {"q_start", &dqs.ptr},
                           {"out", &dout.ptr},      {"n_seqs", &ns},          {"n_heads", &nh32},
                           {"n_kv_heads", &nkv32},  {"head_dim", &hd32},      {"max_blocks", &mb},
                           {"scale", &scale}};
    void *argv[16];
    launch ls[1][2];
    qc_problem p;
    qc_attn_problem(&p, t, nh, nkv, hd, n_seqs);
    ls[0][0] = (launch){.fn = c->fpf, .argv = argv};
    c->pf->launch_dims(&p, &ls[0][0].d);
    st = qc_kernel_bind(c->pf, args, 13, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_launch(c->g, c->fpf, &ls[0][0].d, argv, err, sizeof err);
    if (st == QC_OK) st = qc_gpu_download(c->g, got, dout.ptr, (qn + GUARD_WORDS) * 4, err, sizeof err);
    CHECK(st == QC_OK, "%s: launch: %s", name, err);
    if (st != QC_OK || !check_written(name, got, qn)) goto out;
    if (!sample) {
        void *hq = q, *hk = kv.hk, *hv = kv.hv, *hbt = kv.bt, *hctx = kv.ctx, *hqs = qs, *hout = ref;
        qc_named_arg h[] = {{"q", &hq},        {"k_cache", &hk},       {"v_cache", &hv},    {"block_tables", &hbt},
                            {"ctx_lens", &hctx}, {"q_start", &hqs},    {"out", &hout},      {"n_seqs", &ns},
                            {"n_heads", &nh32}, {"n_kv_heads", &nkv32}, {"head_dim", &hd32}, {"max_blocks", &mb},
                            {"scale", &scale}};
        void *hargv[16];
        gt_poison(ref, qn * 4);
        st = qc_kernel_bind(c->pf, h, 13, hargv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(c->pf, hargv, err, sizeof err);
        CHECK(st == QC_OK, "%s: reference: %s", name, err);
        if (st != QC_OK) goto out;
        size_t first = 0;
        CHECK(gt_unwritten(ref, qn * 4, &first) == 0, "%s: the reference left out[%zu] unwritten", name, first);
    }
    cmp m = {0};
    int64_t rows = t * nh, nrows = sample ? sample : rows;
    for (int64_t i = 0; i < nrows; i++) {
        int64_t row = sample ? (int64_t)(qc_test_rng(&c->rng) % (uint64_t)rows) : i, tok = row / nh;
        int h = (int)(row % nh), s = 0;
        while (qs[s + 1] <= tok) s++;
        int64_t pos = ctx_lens[s] - n_new[s] + (tok - qs[s]), keys = pos + 1 < ctx_lens[s] ? pos + 1 : ctx_lens[s];
        size_t base = (size_t)row * hd;
        oracle_row(&kv, s, h / (nh / nkv), q + base, keys, scale, val, mag, sc);
        cmp_row(&m, base, got + base, sample ? NULL : ref + base, val, mag, hd);
    }
    char full[200];
    snprintf(full, sizeof full, "%s%s", name, sample ? " sampled" : "");
    int ok = cmp_report(&m, full);
    if (timing && ok) {
        double us = gt_time_launches(c->g, &ls[0][0], 2, 1, 1, REPS);
        printf("  TIME %-53s median %9.2f us (" GT_TIMING_NOTE ")  %.1f GFLOP (4 t ctx d heads / 2)  %.1f TFLOP/s\n", name, us,
               flops / 1e9, flops / us * 1e-6);
    }
out:
    qc_gpu_free(c->g, &dq);
    qc_gpu_free(c->g, &dout);
    qc_gpu_free(c->g, &dqs);
    free(qs), free(q), free(got), free(ref), free(val), free(mag), free(sc);
    kv_free(c, &kv);
}

/* ---- cases ---- */

static void decode_cases(ctx *c) {
    static const int32_t lens[] = {1, 15, 16, 17, 1000, 4097};
    static const int heads[][3] = {{32, 8, 128}, {16, 16, 64}, {14, 2, 64}, {32, 8, 64}, {40, 2, 128}};
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++) {
        int nh = heads[hi][0], nkv = heads[hi][1], hd = heads[hi][2];
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) case_decode(c, 1, &lens[i], nh, nkv, hd, 1.5f, 0, 0);
        int32_t mix[16];
        for (int b = 0; b < 16; b++) mix[b] = (int32_t)(1 + qc_test_rng(&c->rng) % 3000);
        mix[3] = 1, mix[5] = 16, mix[7] = 4097;
        case_decode(c, 16, mix, nh, nkv, hd, 1.5f, 0, 0);
        case_decode(c, 3, mix + 4, nh, nkv, hd, 4.0f, 0, 0); /* peaked softmax */
    }
    int32_t longs[2] = {32768, 20000};
    case_decode(c, 1, longs, 32, 8, 128, 1.5f, 0, 0);
    case_decode(c, 2, longs, 32, 8, 128, 3.0f, 0, 0);
    case_decode(c, 1, longs, 14, 2, 64, 1.5f, 0, 0);
    int32_t zero[3] = {0, 40, 0}; /* empty contexts give zeros */
    case_decode(c, 3, zero, 32, 8, 128, 1.5f, 0, 0);
}

static void prefill_cases(ctx *c) {
    static const int heads[][3] = {{32, 8, 128}, {16, 16, 64}, {14, 2, 64}, {32, 8, 64}};
    for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++) {
        int nh = heads[hi][0], nkv = heads[hi][1], hd = heads[hi][2];
        int32_t n1[] = {1}, c1[] = {1};
        case_prefill(c, 1, n1, c1, nh, nkv, hd, 0, 0);
        int32_t n2[] = {17}, c2[] = {17};
        case_prefill(c, 1, n2, c2, nh, nkv, hd, 0, 0);
        int32_t n3[] = {300}, c3[] = {300};
        case_prefill(c, 1, n3, c3, nh, nkv, hd, 0, 0);
        /* several sequences: whole prompts, chunks after cached tokens, single tokens */
        int32_t n4[] = {100, 64, 1, 77, 16, 5}, c4[] = {100, 200, 1000, 77, 33, 4097};
        case_prefill(c, 6, n4, c4, nh, nkv, hd, 0, 0);
    }
    int32_t n5[] = {1000}, c5[] = {1000};
    case_prefill(c, 1, n5, c5, 32, 8, 128, 0, 0);
    int32_t n6[] = {513, 700}, c6[] = {4097, 700};
    case_prefill(c, 2, n6, c6, 32, 8, 128, 4000, 0);
}

static void timing_cases(ctx *c) {
    int32_t l16[16], l1[1] = {1024}, l64[64];
    for (int i = 0; i < 16; i++) l16[i] = 32768;
    for (int i = 0; i < 64; i++) l64[i] = 512;
    case_decode(c, 16, l16, 32, 8, 128, 1.5f, 1, 48);
    case_decode(c, 1, l1, 32, 8, 128, 1.5f, 1, 64);
    case_decode(c, 64, l64, 32, 8, 128, 1.5f, 1, 256);
    l1[0] = 32768;
    case_decode(c, 1, l1, 32, 8, 128, 1.5f, 1, 64);
    int32_t n1[1] = {2048}, n16[16];
    for (int i = 0; i < 16; i++) n16[i] = 256;
    case_prefill(c, 1, n1, n1, 32, 8, 128, 2000, 1);
    case_prefill(c, 16, n16, n16, 32, 8, 128, 2000, 1);
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    ctx c;
    memset(&c, 0, sizeof c);
    c.g = gt_open_or_skip(TEST);
    if (!c.g) return 0;
    char *tmp = NULL;
    int setup_rc = gt_setup(TEST, c.g, &tmp, &c.nv, &c.rt);
    if (setup_rc >= 0) return setup_rc;
    c.rng = gt_seed(TEST);
    if (c.rt) {
        static const char *const ids[] = {"core.kv_write", "core.attn_decode", "core.attn_decode_reduce",
                                          "core.attn_prefill", "core.attn_decode_reduce_bf16"};
        const qc_kernel_desc **ks[] = {&c.kw, &c.dec, &c.red, &c.pf, &c.redb};
        qc_gpu_fn *fs[] = {&c.fkw, &c.fdec, &c.fred, &c.fpf, &c.fredb};
        int ok = 1;
        for (int i = 0; i < 5; i++) {
            *ks[i] = qc_kernel_find(c.rt, ids[i]);
            CHECK(*ks[i] != NULL, "%s is not registered", ids[i]);
            qc_reason why;
            double t0 = qc_now_seconds();
            qc_status st = *ks[i] ? qc_gpu_kernel_load(c.g, c.nv, *ks[i], fs[i], &why) : QC_ERR_INVALID;
            CHECK(st == QC_OK, "%s: %s: %s", ids[i], why.code, why.text);
            if (st != QC_OK) ok = 0;
            else printf("%s: %s loaded in %.2f s\n", TEST, ids[i], qc_now_seconds() - t0);
        }
        if (ok) {
            double t0 = qc_now_seconds();
            decode_cases(&c);
            prefill_cases(&c);
            printf("%s: correctness cases took %.1f s\n", TEST, qc_now_seconds() - t0);
            if (!qc_test_failed) timing_cases(&c);
        }
        qc_gpu_ledger_row tot = qc_gpu_ledger_get(c.g, QC_MEM_COUNT_);
        CHECK(tot.count == 0 && tot.resident == 0, "buffers left allocated: %zu (%zu bytes)", tot.count, tot.resident);
        qc_runtime_close(c.rt);
    }
    qc_gpu_close(c.g);
    qc_nvrtc_destroy(c.nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
