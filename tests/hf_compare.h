/* hf_compare.h - reading a bench/hf_oracle.py folder and comparing logits with it (relative error, top-1). */
#ifndef HF_COMPARE_H
#define HF_COMPARE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Tolerances, stated once for the CPU and GPU tests.  The oracle computes in f32 on the bf16
 * weights; qcore rounds every linear's input to bf16 and keeps a bf16 KV cache, so its logits
 * differ by bf16 rounding of activations carried through the layers.  Measured on the tiny
 * oracle (4 layers, seed 1234): qcore's CPU path rel L2 mean 0.0072, worst row 0.013, rel max
 * worst 0.020; HF's own bf16 compute against its f32 (oracle.json "hf_bf16_vs_f32"): 0.009,
 * 0.011, 0.016.  A wrong rope_theta gives 0.23 / 0.40 / 0.43.
 *   rel_max: per row max|d| / max|ref|      rel_l2: per row ||d|| / ||ref||
 * rel_max and rel_l2 are checked on the worst row, rel_l2 also on the mean over rows, and
 * top-1 (argmax agreement) on the fraction of rows. */
#define HF_TOL_REL_MAX 0.05
#define HF_TOL_REL_L2 0.03
#define HF_TOL_MEAN_REL_L2 0.015
#define HF_MIN_TOP1 0.97

typedef struct hf_oracle {
    char dir[1024];
    int32_t *tokens;
    float *logits;   /* [n_tokens][vocab] */
    size_t n_tokens;
    int vocab;
} hf_oracle;

typedef struct hf_result {
    double worst_rel_max, worst_rel_l2, mean_rel_l2, top1;
    size_t worst_row, rows, top1_agree, nonfinite;
    double median_gap;      /* of the reference's top1 - top2 */
} hf_result;

static inline void *hf_read_all(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%.400s: cannot open", path); return NULL; }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size <= 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "%.400s: empty or unreadable", path);
        fclose(f);
        return NULL;
    }
    void *p = malloc((size_t)size);
    if (!p || fread(p, 1, (size_t)size, f) != (size_t)size) {
        snprintf(err, errlen, "%.400s: short read", path);
        free(p);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return p;
}

static inline void hf_oracle_free(hf_oracle *o) {
    free(o->tokens);
    free(o->logits);
    memset(o, 0, sizeof *o);
}

/* The folder named by $QC_HF_ORACLE_DIR.  Returns 1 loaded, 0 not configured (the reason in
 * err: the caller skips), -1 broken (the reason in err: the caller fails).  vocab is the
 * model's (from qcore's view of config.json), which fixes the row length of logits.bin. */
static inline int hf_oracle_dir(char *dir, size_t len, char *err, size_t errlen) {
    const char *d = getenv("QC_HF_ORACLE_DIR");
    if (!d || !*d) {
        snprintf(err, errlen, "QC_HF_ORACLE_DIR is not set (make one: python3 bench/hf_oracle.py --out DIR)");
        return 0;
    }
    struct stat st;
    if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "QC_HF_ORACLE_DIR=%.400s is not a folder", d);
        return 0;
    }
    snprintf(dir, len, "%s", d);
    return 1;
}

static inline int hf_oracle_load(hf_oracle *o, const char *dir, int vocab, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    snprintf(o->dir, sizeof o->dir, "%s", dir);
    char path[1100];
    size_t tlen, llen;
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    o->tokens = hf_read_all(path, &tlen, err, errlen);
    if (!o->tokens) return -1;
    snprintf(path, sizeof path, "%s/logits.bin", dir);
    o->logits = hf_read_all(path, &llen, err, errlen);
    if (!o->logits) { hf_oracle_free(o); return -1; }
    o->n_tokens = tlen / 4;
    o->vocab = vocab;
    if (tlen % 4 || vocab < 1 || llen != o->n_tokens * (size_t)vocab * 4) {
        snprintf(err, errlen, "%.400s: logits.bin has %zu bytes, %zu tokens x vocab %d x 4 needs %zu", dir, llen,
                 o->n_tokens, vocab, o->n_tokens * (size_t)vocab * 4);
        hf_oracle_free(o);
        return -1;
    }
    for (size_t i = 0; i < o->n_tokens; i++)
        if (o->tokens[i] < 0 || o->tokens[i] >= vocab) {
            snprintf(err, errlen, "%.400s: tokens.bin[%zu] = %d is outside the vocabulary (%d)", dir, i, o->tokens[i],
                     vocab);
            hf_oracle_free(o);
            return -1;
        }
    return 1;
}

static inline int hf_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline size_t hf_argmax(const float *x, int n) {
    size_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = (size_t)i;
    return best;
}

/* Compare rows [0, rows) of got with ref (both [rows][vocab]).  A NaN or Inf in got counts as
 * a non-finite row, with infinite error. */
static inline hf_result hf_compare(const float *ref, const float *got, size_t rows, int vocab) {
    hf_result r = {0};
    r.rows = rows;
    double *gaps = malloc(sizeof(double) * (rows ? rows : 1));
    for (size_t i = 0; i < rows; i++) {
        const float *a = ref + i * (size_t)vocab, *b = got + i * (size_t)vocab;
        double amax = 0, dmax = 0, a2 = 0, d2 = 0, t1 = -INFINITY, t2 = -INFINITY;
        int finite = 1;
        for (int j = 0; j < vocab; j++) {
            double d = (double)b[j] - a[j];
            if (!isfinite(b[j])) finite = 0;
            if (fabs(a[j]) > amax) amax = fabs(a[j]);
            if (fabs(d) > dmax) dmax = fabs(d);
            a2 += (double)a[j] * a[j];
            d2 += d * d;
            if (a[j] > t1) { t2 = t1; t1 = a[j]; } else if (a[j] > t2) t2 = a[j];
        }
        if (gaps) gaps[i] = t1 - t2;
        double rm = finite ? dmax / (amax > 0 ? amax : 1) : INFINITY;
        double rl = finite ? sqrt(d2) / (a2 > 0 ? sqrt(a2) : 1) : INFINITY;
        if (!finite) r.nonfinite++;
        if (rm > r.worst_rel_max) { r.worst_rel_max = rm; r.worst_row = i; }
        if (rl > r.worst_rel_l2) r.worst_rel_l2 = rl;
        r.mean_rel_l2 += rl / (double)rows;
        r.top1_agree += finite && hf_argmax(a, vocab) == hf_argmax(b, vocab);
    }
    r.top1 = rows ? (double)r.top1_agree / (double)rows : 0;
    if (gaps && rows) {
        qsort(gaps, rows, sizeof *gaps, hf_cmp_double);
        r.median_gap = rows % 2 ? gaps[rows / 2] : 0.5 * (gaps[rows / 2 - 1] + gaps[rows / 2]);
    }
    free(gaps);
    return r;
}

/* One line per case; returns 1 when within the tolerances. */
static inline int hf_report(const char *test, const char *what, const hf_result *r) {
    int ok = r->nonfinite == 0 && r->rows > 0 && r->top1 >= HF_MIN_TOP1 && r->worst_rel_max <= HF_TOL_REL_MAX &&
             r->worst_rel_l2 <= HF_TOL_REL_L2 && r->mean_rel_l2 <= HF_TOL_MEAN_REL_L2;
    printf("%s: %s: %zu rows: top-1 %zu/%zu = %.4f (min %.2f); rel max|d|/max|ref| worst %.3e (row %zu, tol %.0e, "
           "%.2fx); rel L2 worst %.3e (tol %.0e, %.2fx) mean %.3e (tol %.1e, %.2fx); non-finite rows %zu; ref "
           "top1-top2 gap median %.4f: %s\n",
           test, what, r->rows, r->top1_agree, r->rows, r->top1, HF_MIN_TOP1, r->worst_rel_max, r->worst_row,
           HF_TOL_REL_MAX, r->worst_rel_max / HF_TOL_REL_MAX, r->worst_rel_l2, HF_TOL_REL_L2,
           r->worst_rel_l2 / HF_TOL_REL_L2, r->mean_rel_l2, HF_TOL_MEAN_REL_L2, r->mean_rel_l2 / HF_TOL_MEAN_REL_L2,
           r->nonfinite, r->median_gap, ok ? "ok" : "FAIL");
    return ok;
}

#endif
