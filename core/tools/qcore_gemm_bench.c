/* qcore_gemm_bench.c - `qcore gemm-bench`: GPU linear kernels timed over layer shapes and M, with their floors. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugins/common/qc_bf16.h"
#include "qc_gpu.h"
#include "qcore_cli.h"

#define GB "qcore gemm-bench"
#define GB_MAX_SHAPES 32
#define GB_MAX_M 64
#define GB_MAX_LIST 64
#define GB_MAX_ARGS 24
#define GB_MAX_DIM (1L << 20)
/* outputs are filled with this quiet NaN first, so an unwritten element shows */
#define GB_POISON 0x7fc0deadu
#define GB_POISON16 0xdeadu /* a bf16 output's poison (a finite -6.2e18 no check here produces) */
/* words after the checked output that a kernel must leave alone */
#define GB_GUARD 64
/* |gpu - ref| <= GB_RTOL * |x_i|_2 * |w_j|_2: the scale of the dot product's
 * terms (Cauchy-Schwarz bounds sum |x w| by it), so a different summation
 * order or activation rounding passes and a wrong group or element does not */
#define GB_RTOL 1e-4
/* FP8 activations (W8A8): Hopper's FP8 wgmma adds the products of a 128-K
 * stage with ~13-14 bits before the f32 promotion; measured on the H200 up to
 * ~1.1e-3 of sum |a w| (<= |x_i| |w_j|).  A wrong 128-K group at K = 4096 is
 * off by ~0.18 |x_i| |w_j|. */
#define GB_RTOL_FP8 2e-3
/* before each timed launch a memset this large evicts the 50 MiB L2, as
 * triton's do_bench does for the anchors */
#define GB_FLUSH_WORDS ((size_t)64 << 20)
#define GB_WARMUP 3

typedef struct gb_shape {
    char name[32];
    int64_t n, k;
} gb_shape;

/* Host and device addresses of one call's buffers; xq/xq_s: a W8A8 kernel's
 * quantized activations and their scales ("xq", "xs"). */
typedef struct gb_bufs {
    void *x, *xb, *y, *xq, *xq_s;
    qc_devptr dx, dxb, dy, dxq, dxq_s;
    void *yb;      /* --out bf16: "y.bf16" (host: the reference's, set by the check); NULL / 0 otherwise */
    qc_devptr dyb;
    qc_devptr dwork; /* zero-filled workspace of the kernels that state one (qc_kernel_desc.workspace_bytes) */
    const qc_packed_weight *pw;
    qc_devptr dw[QC_MAX_WEIGHT_BUFFERS];
} gb_bufs;

/* Named arguments with storage for their values (of the kernel's param types). */
typedef struct gb_args {
    qc_named_arg a[GB_MAX_ARGS];
    size_t n;
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        float f32;
        double f64;
        void *hp;
        qc_devptr dp;
    } v[GB_MAX_ARGS];
} gb_args;

typedef struct gb {
    cli *c;
    gb_shape shapes[GB_MAX_SHAPES];
    size_t n_shapes;
    int64_t ms[GB_MAX_M];
    size_t n_ms;
    int64_t max_m, max_k, max_nk;
    const qc_format_desc *formats[GB_MAX_LIST];
    /* a recipe per entry as --format takes it ("fp8:block", "w4a16:g32"): the request's scheme or group
       size ("" / 0: the format's default) and the label its rows carry */
    char fmt_scheme[GB_MAX_LIST][32], fmt_label[GB_MAX_LIST][64];
    uint32_t fmt_group[GB_MAX_LIST];
    size_t n_formats;
    const qc_kernel_desc *only[GB_MAX_LIST]; /* --kernels; none = all */
    size_t n_only;
    int iters, device;
    int out_bf16;         /* --out bf16: kernels that take "y.bf16" write bf16 there */
    double peak16, peak8; /* TFLOP/s for 16-bit and 8-bit (or narrower) activations */
    uint64_t seed;
    FILE *json_file;
    /* the run */
    qc_gpu *g;
    qc_nvrtc *nv;
    int sm;
    double bw; /* bytes/s, device-to-device copy, read + written */
    qc_gpu_buf flush;
    qc_gpu_event ev0, ev1;
    float *xs;     /* [max_m, max_k] activations; a shape uses the first m*k */
    uint16_t *xbs; /* the same as bf16, made when a kernel takes "x.bf16" */
    float *ws;     /* [max n*k] weights; a shape uses the first n*k */
    float *xn, *wn; /* row norms of the current shape's x and W */
    float *ms_buf;
    json_t *rows, *checks;
    size_t n_ok, n_wrong, n_err, n_refused, n_wrong_checks;
} gb;

/* ---- options ---- */

/* Split `list` into tokens, calling fn(b, token) for each; the first bad
 * token ends it (fn prints why). */
static int each_token(gb *b, const char *flag, const char *list, int (*fn)(gb *, const char *, const char *)) {
    const char *s = list;
    if (!*s) {
        fprintf(stderr, GB ": %s is empty\n", flag);
        return -1;
    }
    while (s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char tok[128];
        if (len >= sizeof tok) {
            fprintf(stderr, GB ": %s: token '%.40s...' is too long\n", flag, s);
            return -1;
        }
        memcpy(tok, s, len);
        tok[len] = 0;
        s = comma ? comma + 1 : NULL;
        if (fn(b, flag, tok)) return -1;
    }
    return 0;
}

static int parse_i64(const char *tok, long lo, long hi, int64_t *out) {
    char *end;
    errno = 0;
    long v = strtol(tok, &end, 10);
    if (!*tok || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static const gb_shape LLAMA3_8B[] = {
    {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};

static int add_shape(gb *b, const char *flag, const char *tok) {
    if (strcmp(tok, "llama3-8b") == 0) {
        for (size_t i = 0; i < 4; i++) {
            if (b->n_shapes == GB_MAX_SHAPES) goto full;
            b->shapes[b->n_shapes++] = LLAMA3_8B[i];
        }
        return 0;
    }
    const char *sep = strpbrk(tok, ":x");
    char ns[64], ks[64];
    int64_t n, k;
    if (!sep || (size_t)(sep - tok) >= sizeof ns || strlen(sep + 1) >= sizeof ks) goto bad;
    memcpy(ns, tok, (size_t)(sep - tok));
    ns[sep - tok] = 0;
    strcpy(ks, sep + 1);
    if (parse_i64(ns, 1, GB_MAX_DIM, &n) || parse_i64(ks, 1, GB_MAX_DIM, &k)) goto bad;
    if (b->n_shapes == GB_MAX_SHAPES) goto full;
    gb_shape *s = &b->shapes[b->n_shapes++];
    snprintf(s->name, sizeof s->name, "%lldx%lld", (long long)n, (long long)k);
    s->n = n;
    s->k = k;
    return 0;
bad:
    fprintf(stderr, GB ": %s: bad shape '%s' (want N:K with integers in [1, %ld], or llama3-8b)\n", flag, tok,
            GB_MAX_DIM);
    return -1;
full:
    fprintf(stderr, GB ": %s: more than %d shapes\n", flag, GB_MAX_SHAPES);
    return -1;
}

static int add_m(gb *b, const char *flag, const char *tok) {
    int64_t m;
    if (parse_i64(tok, 1, GB_MAX_DIM, &m)) {
        fprintf(stderr, GB ": %s: bad M '%s' (want an integer in [1, %ld])\n", flag, tok, GB_MAX_DIM);
        return -1;
    }
    if (b->n_ms == GB_MAX_M) {
        fprintf(stderr, GB ": %s: more than %d values\n", flag, GB_MAX_M);
        return -1;
    }
    b->ms[b->n_ms++] = m;
    return 0;
}

static void list_formats(const qc_runtime *rt, char *buf, size_t len) {
    qc_sbuf s = {0};
    for (size_t i = 0; i < qc_format_count(rt); i++) {
        const qc_format_desc *f = qc_format_get(rt, i);
        if (f->kind == QC_FORMAT_LINEAR) qc_sbuf_printf(&s, "%s%s", s.len ? ", " : "", f->name);
    }
    qc_strlcpy(buf, s.data ? s.data : "none", len);
    qc_sbuf_free(&s);
}

static int add_format(gb *b, const char *flag, const char *tok) {
    /* "name" or "name:scheme" / "name:gN", as qcore run's --format */
    char name[64], scheme[32] = "";
    uint32_t group = 0;
    qc_strlcpy(name, tok, sizeof name);
    char *colon = strchr(name, ':');
    if (colon) {
        *colon = 0;
        const char *opt = colon + 1;
        char *end = NULL;
        if (opt[0] == 'g' && opt[1] >= '0' && opt[1] <= '9') {
            unsigned long g = strtoul(opt + 1, &end, 10);
            if (*end || g == 0 || g > 65536) {
                fprintf(stderr, GB ": %s: '%s': the group size after ':g' must be a number in [1, 65536]\n", flag, tok);
                return -1;
            }
            group = (uint32_t)g;
        } else if (!*opt || strlen(opt) >= sizeof scheme) {
            fprintf(stderr, GB ": %s: '%s': expected name, name:scheme or name:gN\n", flag, tok);
            return -1;
        } else {
            qc_strlcpy(scheme, opt, sizeof scheme);
        }
    }
    const qc_format_desc *f = qc_format_find(b->c->rt, name);
    char names[512];
    list_formats(b->c->rt, names, sizeof names);
    if (!f) {
        fprintf(stderr, GB ": %s: unknown format '%s' (linear formats: %s)\n", flag, name, names);
        return -1;
    }
    if (f->kind != QC_FORMAT_LINEAR) {
        fprintf(stderr, GB ": %s: '%s' is a KV-cache format, not a linear one (linear formats: %s)\n", flag, name,
                names);
        return -1;
    }
    for (size_t i = 0; i < b->n_formats; i++)
        if (b->formats[i] == f && strcmp(b->fmt_scheme[i], scheme) == 0 && b->fmt_group[i] == group) return 0;
    if (b->n_formats == GB_MAX_LIST) {
        fprintf(stderr, GB ": %s: more than %d formats\n", flag, GB_MAX_LIST);
        return -1;
    }
    qc_strlcpy(b->fmt_scheme[b->n_formats], scheme, sizeof b->fmt_scheme[0]);
    qc_strlcpy(b->fmt_label[b->n_formats], colon ? tok : f->name, sizeof b->fmt_label[0]);
    b->fmt_group[b->n_formats] = group;
    b->formats[b->n_formats++] = f;
    return 0;
}

static int has_param(const qc_kernel_desc *k, const char *name) {
    for (uint32_t i = 0; i < k->n_params; i++)
        if (strcmp(k->params[i].name, name) == 0) return 1;
    return 0;
}

/* A linear kernel: y[m,n] = x[m,k] W^T with the conventional names; a W8A8
 * one takes the activations quantized by its format's quantizer ("xq", "xs"). */
static int is_linear(const qc_kernel_desc *k) {
    int w = 0;
    for (uint32_t i = 0; i < k->n_params; i++) w |= strncmp(k->params[i].name, "w.", 2) == 0;
    return w && has_param(k, "y") && has_param(k, "k") &&
           (has_param(k, "x") || has_param(k, "x.bf16") || has_param(k, "xq"));
}

/* The activation quantizer of a W8A8 kernel's format for problem p, as the
 * engine picks it (qc_engine.c find_quantizer): same format, CUDA source,
 * takes "xq", no "y", built for this arch, and not refusing the problem with
 * a code other than "role" (a quantizer is never a linear) or "missing". */
static const qc_kernel_desc *find_quantizer(const qc_runtime *rt, const qc_kernel_desc *kd, const qc_problem *p) {
    for (size_t i = 0; i < qc_kernel_count(rt); i++) {
        const qc_kernel_desc *k = qc_kernel_get(rt, i);
        if (strcmp(k->format, kd->format) != 0 || !k->cuda_source || !has_param(k, "xq") || has_param(k, "y")) continue;
        if (p->sm < k->arch.min_sm || p->sm > k->arch.max_sm) continue;
        qc_reason why;
        if (k->eligible && !k->eligible(p, &why) && strcmp(why.code, "missing") != 0 && strcmp(why.code, "role") != 0)
            continue;
        return k;
    }
    return NULL;
}

static int add_kernel(gb *b, const char *flag, const char *tok) {
    const qc_kernel_desc *k = qc_kernel_find(b->c->rt, tok);
    if (!k) {
        fprintf(stderr, GB ": %s: unknown kernel '%s' (qcore plugins lists them)\n", flag, tok);
        return -1;
    }
    if (!is_linear(k)) {
        fprintf(stderr, GB ": %s: kernel '%s' is not a linear kernel (x, w.<buffer>, y, m, n, k)\n", flag, tok);
        return -1;
    }
    if (!k->cuda_source) {
        fprintf(stderr, GB ": %s: kernel '%s' has no CUDA version (only a C reference)\n", flag, tok);
        return -1;
    }
    if (b->n_only == GB_MAX_LIST) {
        fprintf(stderr, GB ": %s: more than %d kernels\n", flag, GB_MAX_LIST);
        return -1;
    }
    b->only[b->n_only++] = k;
    return 0;
}

static int parse_peak(gb *b, const char *v) {
    char *end;
    double a = strtod(v, &end), c = -1;
    if (end != v && *end == ',') {
        const char *s2 = end + 1;
        c = strtod(s2, &end);
        if (end == s2) c = -1;
    } else {
        c = a;
    }
    if (end == v || *end || !(a > 0 && a < 1e6) || !(c > 0 && c < 1e6)) {
        fprintf(stderr, GB ": --peak-tflops: bad value '%s' (want T for every format, or T16,T8: 16-bit and 8-bit "
                        "activations, TFLOP/s > 0)\n", v);
        return -1;
    }
    b->peak16 = a;
    b->peak8 = c;
    return 0;
}

static int parse_options(gb *b) {
    cli *c = b->c;
    if (each_token(b, "--shapes", c->gb_shapes ? c->gb_shapes : "llama3-8b", add_shape)) return -1;
    if (each_token(b, "--m", c->gb_m ? c->gb_m : "1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192", add_m))
        return -1;
    int64_t v;
    b->iters = 20;
    if (c->gb_iters) {
        if (parse_i64(c->gb_iters, 1, 10000, &v)) {
            fprintf(stderr, GB ": --iters needs an integer in [1, 10000], got '%s'\n", c->gb_iters);
            return -1;
        }
        b->iters = (int)v;
    }
    if (c->gb_device) {
        if (parse_i64(c->gb_device, 0, 1023, &v)) {
            fprintf(stderr, GB ": --device needs a device ordinal in [0, 1023], got '%s'\n", c->gb_device);
            return -1;
        }
        b->device = (int)v;
    }
    b->peak16 = 989;
    b->peak8 = 1979;
    if (c->gb_peak && parse_peak(b, c->gb_peak)) return -1;
    if (c->gb_out) {
        if (strcmp(c->gb_out, "bf16") != 0 && strcmp(c->gb_out, "f32") != 0) {
            fprintf(stderr, GB ": --out needs f32 or bf16, got '%s'\n", c->gb_out);
            return -1;
        }
        b->out_bf16 = strcmp(c->gb_out, "bf16") == 0;
    }
    if (c->gb_kernels && each_token(b, "--kernels", c->gb_kernels, add_kernel)) return -1;
    if (c->gb_formats) {
        if (each_token(b, "--formats", c->gb_formats, add_format)) return -1;
        for (size_t i = 0; i < b->n_only; i++) {
            int in = 0;
            for (size_t j = 0; j < b->n_formats; j++) in |= strcmp(b->formats[j]->name, b->only[i]->format) == 0;
            if (!in) {
                fprintf(stderr, GB ": --kernels: '%s' is a %s kernel, and --formats does not name %s\n",
                        b->only[i]->id, b->only[i]->format, b->only[i]->format);
                return -1;
            }
        }
    } else if (b->n_only) { /* the formats of the kernels asked for */
        for (size_t i = 0; i < b->n_only; i++)
            if (add_format(b, "--kernels", b->only[i]->format)) return -1;
    } else {
        for (size_t i = 0; i < qc_format_count(c->rt) && b->n_formats < GB_MAX_LIST; i++)
            if (qc_format_get(c->rt, i)->kind == QC_FORMAT_LINEAR) {
                qc_strlcpy(b->fmt_label[b->n_formats], qc_format_get(c->rt, i)->name, sizeof b->fmt_label[0]);
                b->formats[b->n_formats++] = qc_format_get(c->rt, i);
            }
    }
    for (size_t i = 0; i < b->n_ms; i++)
        if (b->ms[i] > b->max_m) b->max_m = b->ms[i];
    for (size_t i = 0; i < b->n_shapes; i++) {
        if (b->shapes[i].k > b->max_k) b->max_k = b->shapes[i].k;
        if (b->shapes[i].n * b->shapes[i].k > b->max_nk) b->max_nk = b->shapes[i].n * b->shapes[i].k;
    }
    b->seed = c->seed ? c->seed : 1;
    return 0;
}

/* The kernels of `f` this run times: linear, with CUDA source, through --kernels. */
static size_t format_kernels(gb *b, const qc_format_desc *f, const qc_kernel_desc **out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < qc_kernel_count(b->c->rt) && n < cap; i++) {
        const qc_kernel_desc *k = qc_kernel_get(b->c->rt, i);
        if (strcmp(k->format, f->name) != 0 || !k->cuda_source || !is_linear(k)) continue;
        int keep = b->n_only == 0;
        for (size_t j = 0; j < b->n_only; j++) keep |= b->only[j] == k;
        if (keep) out[n++] = k;
    }
    return n;
}

/* ---- helpers ---- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Two standard normals (Box-Muller); never exactly zero in practice. */
static void rng_normal2(uint64_t *s, float *a, float *b) {
    double u1 = ((rng_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    *a = (float)(r * cos(t));
    *b = (float)(r * sin(t));
}

static int n_threads(int64_t work_items) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    int t = c > 0 ? (int)(c > 64 ? 64 : c) : 1;
    return work_items < t ? (int)(work_items > 0 ? work_items : 1) : t;
}

/* Fill chunks of 1M values, each from its own seed: the same values for a
 * seed whatever the thread count. */
typedef struct fill_job {
    float *p;
    size_t count;
    float scale;
    uint64_t seed;
    int t, nt;
} fill_job;

#define FILL_CHUNK ((size_t)1 << 20)
static void *fill_thread(void *arg) {
    fill_job *j = arg;
    for (size_t c = (size_t)j->t; c * FILL_CHUNK < j->count; c += (size_t)j->nt) {
        uint64_t s = (j->seed ^ (c + 1) * 0xbf58476d1ce4e5b9ull) | 1;
        for (int w = 0; w < 4; w++) rng_next(&s);
        size_t end = (c + 1) * FILL_CHUNK < j->count ? (c + 1) * FILL_CHUNK : j->count;
        for (size_t i = c * FILL_CHUNK; i < end; i += 2) {
            float a, b;
            rng_normal2(&s, &a, &b);
            j->p[i] = a * j->scale;
            if (i + 1 < end) j->p[i + 1] = b * j->scale;
        }
    }
    return NULL;
}

static void fill_normal(float *p, size_t count, float scale, uint64_t seed) {
    int nt = n_threads((int64_t)((count + FILL_CHUNK - 1) / FILL_CHUNK));
    pthread_t th[64];
    fill_job jobs[64];
    int started[64] = {0};
    for (int t = 0; t < nt; t++) jobs[t] = (fill_job){p, count, scale, seed, t, nt};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, fill_thread, &jobs[t]) == 0;
    fill_thread(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            fill_thread(&jobs[t]); /* no thread: do its chunks here */
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

/* 16-bit activations (bf16, f16, f32) run at the 16-bit peak; 8-bit and
 * narrower at the 8-bit one. */
static double format_peak(const gb *b, const qc_format_desc *f) {
    switch (f->act_dtype) {
    case QC_DT_F8_E4M3:
    case QC_DT_F8_E5M2:
    case QC_DT_I8:
    case QC_DT_U8:
    case QC_DT_F4_E2M1:
    case QC_DT_I4:
    case QC_DT_U4: return b->peak8;
    default: return b->peak16;
    }
}

static size_t weight_bytes(const qc_packed_weight *pw) {
    size_t s = 0;
    for (uint32_t i = 0; i < pw->n_buffers; i++) s += pw->buffers[i].bytes;
    return s;
}

static void release_packed(const qc_format_desc *f, qc_packed_weight *pw) {
    if (f->release)
        f->release(pw);
    else
        for (uint32_t i = 0; i < pw->n_buffers; i++) qc_aligned_free(pw->buffers[i].data);
    memset(pw, 0, sizeof *pw);
}

/* Arguments by the kernel's parameter names, host or device addresses. */
static int build_args(const qc_kernel_desc *kd, const gb_bufs *bf, int host, int64_t m, int64_t n, int64_t k,
                      gb_args *out, void **argv, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (kd->n_params > GB_MAX_ARGS) {
        qc_errf(err, errlen, "%u parameters, more than %d", kd->n_params, GB_MAX_ARGS);
        return -1;
    }
    for (uint32_t i = 0; i < kd->n_params; i++) {
        const qc_kernel_param *p = &kd->params[i];
        const char *nm = p->name;
        int ptr = 1;
        void *hp = NULL;
        qc_devptr dp = 0;
        int64_t val = 0;
        if (strcmp(nm, "x") == 0) {
            hp = bf->x, dp = bf->dx;
        } else if (strcmp(nm, "x.bf16") == 0) {
            hp = bf->xb, dp = bf->dxb;
        } else if (strcmp(nm, "y") == 0) {
            hp = bf->y, dp = bf->dy;
        } else if (strcmp(nm, "xq") == 0) {
            hp = bf->xq, dp = bf->dxq;
        } else if (strcmp(nm, "xs") == 0) {
            hp = bf->xq_s, dp = bf->dxq_s;
        } else if (strcmp(nm, "work") == 0) {
            hp = NULL, dp = bf->dwork; /* the C references take no workspace */
        } else if (strcmp(nm, "y.bf16") == 0) {
            hp = bf->yb, dp = bf->dyb; /* NULL / 0 without --out bf16: the kernel writes y */
        } else if (strncmp(nm, "w.", 2) == 0) {
            uint32_t j = 0;
            while (j < bf->pw->n_buffers && strcmp(bf->pw->buffers[j].name, nm + 2) != 0) j++;
            if (j == bf->pw->n_buffers) {
                qc_sbuf s = {0};
                for (uint32_t t = 0; t < bf->pw->n_buffers; t++)
                    qc_sbuf_printf(&s, "%s%s", t ? ", " : "", bf->pw->buffers[t].name);
                qc_errf(err, errlen, "kernel takes %s, the packed weight has %s", nm, s.data ? s.data : "none");
                qc_sbuf_free(&s);
                return -1;
            }
            hp = bf->pw->buffers[j].data, dp = bf->dw[j];
        } else {
            ptr = 0;
            if (strcmp(nm, "m") == 0)
                val = m;
            else if (strcmp(nm, "n") == 0)
                val = n;
            else if (strcmp(nm, "k") == 0)
                val = k;
            else if (strcmp(nm, "group_size") == 0)
                val = bf->pw->group_size;
            else {
                qc_errf(err, errlen, "parameter '%s' is not one gemm-bench binds (x, x.bf16, xq, xs, y, y.bf16, work, "
                        "m, n, k, group_size, w.<buffer>)", nm);
                return -1;
            }
        }
        if (ptr != (p->type == QC_PARAM_PTR)) {
            qc_errf(err, errlen, "parameter '%s' has type %d, gemm-bench gives it a %s", nm, (int)p->type,
                    ptr ? "pointer" : "number");
            return -1;
        }
        switch (p->type) {
        case QC_PARAM_PTR:
            if (host)
                out->v[i].hp = hp;
            else
                out->v[i].dp = dp;
            break;
        case QC_PARAM_I32: out->v[i].i32 = (int32_t)val; break;
        case QC_PARAM_U32: out->v[i].u32 = (uint32_t)val; break;
        case QC_PARAM_I64: out->v[i].i64 = val; break;
        case QC_PARAM_F32: out->v[i].f32 = (float)val; break;
        case QC_PARAM_F64: out->v[i].f64 = (double)val; break;
        }
        out->a[out->n++] = (qc_named_arg){nm, &out->v[i]};
    }
    return qc_kernel_bind(kd, out->a, out->n, argv, GB_MAX_ARGS, err, errlen) == QC_OK ? 0 : -1;
}

/* ---- rows ---- */

static void json_set_num(json_t *o, const char *key, double v) {
    json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

/* The label of the format entry being timed ("fp8:block"), set around its loop in the shape's run; the
 * printing and JSON helpers take only the format, so they ask here. */
static const char *g_label;
static const char *fname(const qc_format_desc *f) { return g_label ? g_label : f->name; }

static json_t *row_base(const qc_format_desc *f, const qc_kernel_desc *kd, const gb_shape *s, int64_t m,
                        const char *status) {
    json_t *r = json_object();
    json_object_set_new(r, "format", json_string(fname(f)));
    json_object_set_new(r, "kernel", json_string(kd ? kd->id : ""));
    json_object_set_new(r, "shape", json_string(s->name));
    json_object_set_new(r, "n", json_integer(s->n));
    json_object_set_new(r, "k", json_integer(s->k));
    if (m) json_object_set_new(r, "m", json_integer(m));
    json_object_set_new(r, "status", json_string(status));
    return r;
}

static void print_header(void) {
    printf("%-9s %-22s %-8s %9s %10s %8s %8s %9s %7s %s\n", "format", "kernel", "shape", "M", "time us", "TFLOP/s",
           "GB/s", "floor us", "%floor", "bound");
}

/* Refusals for consecutive Ms with one code are one line. */
static void print_refusal(const qc_format_desc *f, const qc_kernel_desc *kd, const gb_shape *s, int64_t m0,
                          int64_t m1, const qc_reason *why) {
    char ms[32];
    if (m0 == m1)
        snprintf(ms, sizeof ms, "%lld", (long long)m0);
    else
        snprintf(ms, sizeof ms, "%lld-%lld", (long long)m0, (long long)m1);
    printf("%-9s %-22s %-8s %9s refused: %s: %s\n", fname(f), kd->id, s->name, ms, why->code, why->text);
}

/* ---- the GPU work ---- */

/* The copy bandwidth of this device now (qc_gpu_copy_bandwidth). */
static int measure_bandwidth(gb *b) {
    char err[512] = "";
    size_t bytes = 0;
    float ms = 0;
    if (qc_gpu_copy_bandwidth(b->g, &b->bw, &bytes, &ms, err, sizeof err) != QC_OK) {
        fprintf(stderr, GB ": measuring the copy bandwidth failed: %s\n", err);
        return -1;
    }
    printf("copy bandwidth: %.3f TB/s (device-to-device copy of %.0f MiB, bytes read + written, median of 7: %.3f ms)"
           "\n", b->bw * 1e-12, mib((double)bytes), ms);
    return 0;
}

/* One launch: a kernel, its function, geometry and bound arguments. */
typedef struct gb_launch {
    const qc_kernel_desc *kd;
    qc_gpu_fn fn;
    qc_launch_dims d;
    void *argv[GB_MAX_ARGS];
} gb_launch;

/* `pre` (may be NULL), then `l` */
static int launch_pair(gb *b, const gb_launch *pre, const gb_launch *l, char *err, size_t errlen) {
    if (pre && qc_gpu_launch_kernel(b->g, pre->kd, pre->fn, &pre->d, (void **)pre->argv, err, errlen)) return -1;
    return l ? qc_gpu_launch_kernel(b->g, l->kd, l->fn, &l->d, (void **)l->argv, err, errlen) : 0;
}

/* Median of b->iters launches of `pre` then `l` (either may be NULL), each
 * pair after an L2 flush, after warm-ups. */
static int time_kernel(gb *b, const gb_launch *pre, const gb_launch *l, double *median_us, char *err, size_t errlen) {
    for (int i = 0; i < GB_WARMUP; i++)
        if (launch_pair(b, pre, l, err, errlen)) return -1;
    for (int i = 0; i < b->iters; i++) {
        if (qc_gpu_memset32(b->g, b->flush.ptr, (uint32_t)i, GB_FLUSH_WORDS, err, errlen) ||
            qc_gpu_event_record(b->g, b->ev0, err, errlen) || launch_pair(b, pre, l, err, errlen) ||
            qc_gpu_event_record(b->g, b->ev1, err, errlen) ||
            qc_gpu_event_elapsed(b->g, b->ev0, b->ev1, &b->ms_buf[i], err, errlen))
            return -1;
    }
    if (qc_gpu_sync(b->g, err, errlen)) return -1;
    qsort(b->ms_buf, (size_t)b->iters, sizeof *b->ms_buf, cmp_float);
    *median_us = 1000.0 * b->ms_buf[b->iters / 2];
    return 0;
}

/* The C reference on rows [r0, r0 + rows) of x and y. */
typedef struct ref_job {
    const qc_kernel_desc *kd;
    gb_bufs bf;
    int64_t rows, n, k;
    qc_status st;
    char err[512];
} ref_job;

static void *ref_thread(void *arg) {
    ref_job *j = arg;
    gb_args a;
    void *argv[GB_MAX_ARGS];
    j->st = build_args(j->kd, &j->bf, 1, j->rows, j->n, j->k, &a, argv, j->err, sizeof j->err)
                ? QC_ERR_INVALID
                : qc_kernel_call_reference(j->kd, argv, j->err, sizeof j->err);
    return NULL;
}

static int ref_rows(const qc_kernel_desc *kd, const gb_bufs *bf, int64_t m, int64_t n, int64_t k, int nt, char *err,
                    size_t errlen) {
    ref_job *jobs = calloc((size_t)nt, sizeof *jobs);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    int *started = calloc((size_t)nt, sizeof *started);
    int rc = -1;
    if (!jobs || !th || !started) {
        qc_errf(err, errlen, "out of host memory");
        goto out;
    }
    for (int t = 0; t < nt; t++) {
        int64_t r0 = m * t / nt, r1 = m * (t + 1) / nt;
        ref_job *j = &jobs[t];
        j->kd = kd;
        j->bf = *bf;
        j->bf.x = (float *)bf->x + r0 * k;
        j->bf.xb = bf->xb ? (uint16_t *)bf->xb + r0 * k : NULL;
        j->bf.y = (float *)bf->y + r0 * n;
        j->bf.yb = bf->yb ? (uint16_t *)bf->yb + r0 * n : NULL;
        j->rows = r1 - r0;
        j->n = n;
        j->k = k;
    }
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, ref_thread, &jobs[t]) == 0;
    ref_thread(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            ref_thread(&jobs[t]);
    }
    rc = 0;
    for (int t = 0; t < nt && rc == 0; t++)
        if (jobs[t].st != QC_OK) {
            qc_errf(err, errlen, "C reference: %s", jobs[t].err);
            rc = -1;
        }
out:
    free(jobs);
    free(th);
    free(started);
    return rc;
}

/* Activation element count of the xs workspace: groups down to 32 per row,
 * as the engine sizes it. */
static size_t xs_count(int64_t m, int64_t k) { return (size_t)m * (size_t)(k / 32 + 1); }

/* Whether kd writes its output as bf16 in this run: --out bf16 and a kernel that takes "y.bf16". */
static int writes_bf16(const gb *b, const qc_kernel_desc *kd) { return b->out_bf16 && has_param(kd, "y.bf16"); }

static int is_fp8_act(const qc_format_desc *f) { return f->act_dtype == QC_DT_F8_E4M3 || f->act_dtype == QC_DT_F8_E5M2; }

/* One launch at M=m against the C reference on the host copies; a W8A8
 * kernel (quant != NULL) gets its activations from the quantizer, on the
 * host through the quantizer's C reference, on the GPU through its kernel.
 * Returns 0 when it matches, 1 when it does not (WRONG), -1 when something
 * failed. */
static int check_kernel(gb *b, const qc_format_desc *f, const qc_kernel_desc *kd, qc_gpu_fn fn,
                        const qc_kernel_desc *quant, qc_gpu_fn quant_fn, const gb_shape *s, gb_bufs *bf, int64_t m,
                        char *err, size_t errlen) {
    int64_t n = s->n, k = s->k;
    size_t cnt = (size_t)(m * n), words = cnt + GB_GUARD;
    /* --out bf16 with a kernel that takes y.bf16: its bf16 output (and the reference's) is compared as floats, y
       must keep its poison, and the 2 GB_GUARD halves after the output theirs */
    const int yb16 = writes_bf16(b, kd);
    const size_t hwords = cnt + 2 * GB_GUARD, ywords = (hwords + 1) / 2;
    float *ref = malloc(cnt * 4), *got = malloc(words * 4);
    uint16_t *refb = yb16 ? malloc(cnt * 2) : NULL, *gotb = yb16 ? malloc(ywords * 4) : NULL;
    size_t y_touched = 0;
    void *hxq = quant ? calloc((size_t)(m * k), 1) : NULL, *hxs = quant ? calloc(xs_count(m, k), 4) : NULL;
    gb_args da, qa;
    void *dargv[GB_MAX_ARGS];
    int rc = -1;
    const double rtol = is_fp8_act(f) ? GB_RTOL_FP8 : GB_RTOL;
    double t0 = qc_now_seconds();
    if (!ref || !got || (quant && (!hxq || !hxs)) || (yb16 && (!refb || !gotb))) {
        qc_errf(err, errlen, "out of host memory for the check (%zu outputs)", cnt);
        goto out;
    }
    for (size_t i = 0; i < cnt; i++) memcpy(&ref[i], &(uint32_t){GB_POISON}, 4);
    for (size_t i = 0; yb16 && i < cnt; i++) refb[i] = GB_POISON16;
    bf->y = ref;
    bf->yb = refb;
    bf->xq = hxq;
    bf->xq_s = hxs;
    if (!kd->reference || (quant && !quant->reference)) {
        qc_errf(err, errlen, "%s has no C reference to check against", quant && !quant->reference ? quant->id : kd->id);
        goto out;
    }
    if (quant) { /* the activations as the quantizer's reference makes them */
        void *qargv[GB_MAX_ARGS];
        if (build_args(quant, bf, 1, m, n, k, &qa, qargv, err, errlen)) goto out;
        qc_status qst = qc_kernel_call_reference(quant, qargv, err, errlen);
        if (qst != QC_OK) goto out;
    }
    /* weight-only formats treat rows independently, so the reference runs
     * on row blocks in parallel; activation scales (per tensor) may couple
     * rows elsewhere, and xq/xs are laid out per call: one call */
    int nt = f->act_scale == QC_GRAN_NONE && !quant ? n_threads(m) : 1;
    if (ref_rows(kd, bf, m, n, k, nt, err, errlen)) goto out;
    for (size_t i = 0; yb16 && i < cnt; i++) /* the bf16 reference as floats; unwritten ones keep the f32 poison */
        if (refb[i] != GB_POISON16) ref[i] = qc_bf16_to_f32(refb[i]);
    double t_ref = qc_now_seconds() - t0;
    qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)b->sm, .m = m, .n = n, .k = k,
                    .group_size = bf->pw->group_size, .scheme = bf->pw->scheme};
    qc_launch_dims d;
    kd->launch_dims(&p, &d);
    if (quant) {
        void *qargv[GB_MAX_ARGS];
        qc_launch_dims qd;
        quant->launch_dims(&p, &qd);
        if (build_args(quant, bf, 0, m, n, k, &qa, qargv, err, errlen) ||
            qc_gpu_memset32(b->g, bf->dxq, GB_POISON, (size_t)(m * k + 3) / 4, err, errlen) ||
            qc_gpu_memset32(b->g, bf->dxq_s, GB_POISON, xs_count(m, k), err, errlen) ||
            qc_gpu_launch_kernel(b->g, quant, quant_fn, &qd, qargv, err, errlen))
            goto out;
    }
    if (build_args(kd, bf, 0, m, n, k, &da, dargv, err, errlen) ||
        qc_gpu_memset32(b->g, bf->dy, GB_POISON, words, err, errlen) ||
        (yb16 && qc_gpu_memset32(b->g, bf->dyb, GB_POISON16 * 0x10001u, ywords, err, errlen)) ||
        qc_gpu_launch_kernel(b->g, kd, fn, &d, dargv, err, errlen) || qc_gpu_sync(b->g, err, errlen) ||
        qc_gpu_download(b->g, got, bf->dy, words * 4, err, errlen) ||
        (yb16 && qc_gpu_download(b->g, gotb, bf->dyb, ywords * 4, err, errlen)))
        goto out;
    if (yb16) /* y must be untouched; got becomes the bf16 output as floats (poison where unwritten) */
        for (size_t i = 0; i < words; i++) {
            uint32_t u;
            memcpy(&u, &got[i], 4);
            y_touched += u != GB_POISON;
            const int in = i < cnt;
            const int clean = in ? gotb[i] == GB_POISON16
                                 : gotb[cnt + 2 * (i - cnt)] == GB_POISON16 && gotb[cnt + 2 * (i - cnt) + 1] == GB_POISON16;
            if (clean)
                memcpy(&got[i], &(uint32_t){GB_POISON}, 4);
            else
                got[i] = in ? qc_bf16_to_f32(gotb[i]) : 0.f;
        }
    size_t unwritten_ref = 0, unwritten = 0, past = 0, bad = 0, first = 0, at = 0;
    double worst = 0, max_d = 0, num = 0, den = 0;
    for (size_t i = 0; i < words; i++) {
        uint32_t u;
        memcpy(&u, &got[i], 4);
        if (i >= cnt) {
            past += u != GB_POISON;
            continue;
        }
        uint32_t r;
        memcpy(&r, &ref[i], 4);
        unwritten_ref += r == GB_POISON;
        unwritten += u == GB_POISON;
        int64_t row = (int64_t)i / n, col = (int64_t)i % n;
        double lim = rtol * b->xn[row] * b->wn[col] + 1e-30, dd = fabs((double)got[i] - ref[i]);
        if (yb16) lim += 0x1p-8 * fabs((double)ref[i]); /* both rounded to bf16: one ulp apart at a tie's edge */
        if (!isfinite(got[i]) || !isfinite(ref[i])) dd = INFINITY;
        if (isfinite(dd)) {
            num += dd * dd;
            den += (double)ref[i] * ref[i];
            if (dd > max_d) max_d = dd;
        }
        if (dd / lim > worst) worst = dd / lim, at = i;
        if (!(dd <= lim) && !bad++) first = i;
    }
    if (unwritten_ref) {
        qc_errf(err, errlen, "the C reference left %zu of %zu outputs unwritten", unwritten_ref, cnt);
        goto out;
    }
    rc = bad || past || y_touched ? 1 : 0;
    printf("check %-9s %-22s %-8s M=%lld: %zu outputs%s, max|d| %.2e, worst d/tol %.3g (at %zu), relL2 %.2e, tol %.0e*"
           "|x_i|*|w_j|%s%s; reference %.1f s on %d threads: %s\n",
           fname(f), kd->id, s->name, (long long)m, cnt, yb16 ? " (bf16)" : "", max_d, worst, at,
           den > 0 ? sqrt(num / den) : 0.0, rtol, quant ? "; activations by " : "", quant ? quant->id : "", t_ref, nt,
           rc ? "WRONG" : "ok");
    if (bad)
        printf("  %zu outputs out of tolerance (%zu unwritten); first at %zu (row %lld, col %lld): gpu %.9g, "
               "reference %.9g\n",
               bad, unwritten, first, (long long)(first / (size_t)n), (long long)(first % (size_t)n),
               (double)got[first], (double)ref[first]);
    if (past) printf("  %zu of the %d words after the output were overwritten\n", past, GB_GUARD);
    if (y_touched) printf("  y.bf16 given, yet %zu words of y (f32) were written\n", y_touched);
    json_t *c = row_base(f, kd, s, m, rc ? "WRONG" : "ok");
    json_object_set_new(c, "outputs", json_integer((json_int_t)cnt));
    json_set_num(c, "max_abs_diff", max_d);
    json_set_num(c, "worst_diff_over_tol", worst);
    json_set_num(c, "rel_l2", den > 0 ? sqrt(num / den) : 0.0);
    json_object_set_new(c, "bad", json_integer((json_int_t)bad));
    json_object_set_new(c, "unwritten", json_integer((json_int_t)unwritten));
    json_object_set_new(c, "written_past_end", json_integer((json_int_t)past));
    json_object_set_new(c, "out", json_string(yb16 ? "bf16" : "f32"));
    if (yb16) json_object_set_new(c, "y_written_with_bf16_out", json_integer((json_int_t)y_touched));
    json_set_num(c, "rtol", rtol);
    if (quant) json_object_set_new(c, "quantizer", json_string(quant->id));
    json_array_append_new(b->checks, c);
out:
    bf->y = NULL;
    bf->yb = NULL;
    bf->xq = bf->xq_s = NULL;
    free(ref);
    free(got);
    free(refb);
    free(gotb);
    free(hxq);
    free(hxs);
    return rc;
}

static void add_error_row(gb *b, const qc_format_desc *f, const qc_kernel_desc *kd, const gb_shape *s, int64_t m,
                          const char *what, const char *err) {
    printf("%-9s %-22s %-8s %9lld error: %s: %s\n", fname(f), kd ? kd->id : "-", s->name, (long long)m, what, err);
    json_t *r = row_base(f, kd, s, m, "error");
    char buf[1100];
    snprintf(buf, sizeof buf, "%s: %s", what, err);
    json_object_set_new(r, "reason", json_string(buf));
    json_array_append_new(b->rows, r);
    b->n_err++;
}

/* A W8A8 kernel's quantizers, loaded once per kernel and shape. */
#define GB_MAX_QUANT 4
typedef struct gb_quant {
    const qc_kernel_desc *kd[GB_MAX_QUANT];
    qc_gpu_fn fn[GB_MAX_QUANT];
    size_t n;
} gb_quant;

static int quant_fn(gb *b, gb_quant *q, const qc_kernel_desc *kd, qc_gpu_fn *fn, char *err, size_t errlen) {
    for (size_t i = 0; i < q->n; i++)
        if (q->kd[i] == kd) {
            *fn = q->fn[i];
            return 0;
        }
    qc_reason lw = {{0}, {0}};
    if (q->n == GB_MAX_QUANT || qc_gpu_kernel_load(b->g, b->nv, kd, fn, &lw) != QC_OK) {
        qc_errf(err, errlen, "%s: %s: %s", kd->id, q->n == GB_MAX_QUANT ? "limit" : lw.code,
                q->n == GB_MAX_QUANT ? "too many quantizers" : lw.text);
        return -1;
    }
    q->kd[q->n] = kd;
    q->fn[q->n++] = *fn;
    return 0;
}

/* One kernel on one shape: refusals, the check, then a row per M (a W8A8
 * kernel: its time alone, and with the activation quantizer before it). */
static void bench_kernel(gb *b, const qc_format_desc *f, const qc_kernel_desc *kd, const gb_shape *s, gb_bufs *bf) {
    char err[1024];
    qc_reason why[GB_MAX_M];
    const qc_kernel_desc *quant[GB_MAX_M];
    const int w8a8 = has_param(kd, "xq");
    int ok[GB_MAX_M], any = 0;
    for (size_t i = 0; i < b->n_ms; i++) {
        qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)b->sm, .m = b->ms[i], .n = s->n, .k = s->k,
                        .group_size = bf->pw->group_size, .scheme = bf->pw->scheme};
        memset(&why[i], 0, sizeof why[i]);
        ok[i] = qc_select_kernel(kd, f, &p, 1, &why[i]);
        quant[i] = ok[i] && w8a8 ? find_quantizer(b->c->rt, kd, &p) : NULL;
        if (ok[i] && w8a8 && !quant[i]) {
            ok[i] = 0;
            snprintf(why[i].code, sizeof why[i].code, "quantizer");
            snprintf(why[i].text, sizeof why[i].text, "%s takes quantized activations (xq, xs) and no %s activation "
                     "quantizer takes this problem (scheme %u) on sm_%d", kd->id, f->name, bf->pw->scheme, b->sm);
        }
        any |= ok[i];
    }
    int wrong = 0, failed = 0;
    qc_gpu_fn fn = NULL;
    gb_quant qs = {{0}, {0}, 0};
    if (any) {
        qc_reason lw = {{0}, {0}};
        if (qc_gpu_kernel_load(b->g, b->nv, kd, &fn, &lw) != QC_OK) {
            snprintf(err, sizeof err, "%s: %s", lw.code, lw.text);
            add_error_row(b, f, kd, s, 0, "load", err);
            failed = 1;
        }
    }
    if (any && !failed) {
        /* a small M inside the kernel's range, else the smallest M it takes */
        int64_t mc = kd->m_min > 3 ? kd->m_min : 3;
        if (kd->m_max > 0 && mc > kd->m_max) mc = kd->m_max;
        qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)b->sm, .m = mc, .n = s->n, .k = s->k,
                        .group_size = bf->pw->group_size, .scheme = bf->pw->scheme};
        qc_reason r;
        if (mc > b->max_m || !qc_select_kernel(kd, f, &p, 1, &r) || (w8a8 && !find_quantizer(b->c->rt, kd, &p))) {
            mc = 0;
            for (size_t i = 0; i < b->n_ms; i++)
                if (ok[i] && (!mc || b->ms[i] < mc)) mc = b->ms[i];
        }
        p.m = mc;
        const qc_kernel_desc *qk = w8a8 ? find_quantizer(b->c->rt, kd, &p) : NULL;
        qc_gpu_fn qfn = NULL;
        if (qk && quant_fn(b, &qs, qk, &qfn, err, sizeof err)) {
            add_error_row(b, f, kd, s, mc, "load", err);
            failed = 1;
        }
        int cr = failed ? 0 : check_kernel(b, f, kd, fn, qk, qfn, s, bf, mc, err, sizeof err);
        if (cr < 0) {
            add_error_row(b, f, kd, s, mc, "check", err);
            failed = 1;
        }
        wrong = cr == 1;
    }
    double peak = format_peak(b, f) * 1e12;
    const int act_bytes = w8a8 ? 1 : has_param(kd, "x.bf16") && !has_param(kd, "x") ? 2 : 4;
    const int y_bytes = writes_bf16(b, kd) ? 2 : 4;
    size_t i = 0;
    while (i < b->n_ms) {
        int64_t m = b->ms[i];
        if (!ok[i]) { /* merge this refusal with the next Ms of the same code */
            size_t j = i;
            while (j + 1 < b->n_ms && !ok[j + 1] && strcmp(why[j + 1].code, why[i].code) == 0) j++;
            print_refusal(f, kd, s, m, b->ms[j], &why[i]);
            for (size_t t = i; t <= j; t++) {
                json_t *r = row_base(f, kd, s, b->ms[t], "refused");
                char buf[QC_REASON_CODE_MAX + QC_REASON_TEXT_MAX + 4];
                snprintf(buf, sizeof buf, "%s: %s", why[t].code, why[t].text);
                json_object_set_new(r, "reason", json_string(buf));
                json_array_append_new(b->rows, r);
                b->n_refused++;
            }
            i = j + 1;
            continue;
        }
        const qc_kernel_desc *qk = quant[i];
        i++;
        if (failed) continue;
        qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)b->sm, .m = m, .n = s->n, .k = s->k,
                        .group_size = bf->pw->group_size, .scheme = bf->pw->scheme};
        gb_launch gl = {.kd = kd, .fn = fn}, ql = {.kd = qk};
        gb_args da, qa;
        kd->launch_dims(&p, &gl.d);
        double us = 0, q_us = 0, both_us = 0;
        int bad = build_args(kd, bf, 0, m, s->n, s->k, &da, gl.argv, err, sizeof err);
        if (!bad && qk) { /* the quantizer once first, so that the GEMM alone reads real codes */
            qk->launch_dims(&p, &ql.d);
            bad = quant_fn(b, &qs, qk, &ql.fn, err, sizeof err) ||
                  build_args(qk, bf, 0, m, s->n, s->k, &qa, ql.argv, err, sizeof err) ||
                  launch_pair(b, &ql, NULL, err, sizeof err) || time_kernel(b, &ql, NULL, &q_us, err, sizeof err) ||
                  time_kernel(b, &ql, &gl, &both_us, err, sizeof err);
        }
        if (bad || time_kernel(b, NULL, &gl, &us, err, sizeof err)) {
            add_error_row(b, f, kd, s, m, "launch", err);
            failed = 1; /* a failed launch may have broken the context's stream */
            continue;
        }
        double flops = 2.0 * (double)m * (double)s->n * (double)s->k;
        /* a W8A8 GEMM also reads the activation scales: one per token, or per group of the weight */
        double xs_bytes = w8a8 ? 4.0 * m * (bf->pw->group_size ? (double)((s->k + bf->pw->group_size - 1) /
                                                                           bf->pw->group_size) : 1.0) : 0.0;
        double bytes = (double)weight_bytes(bf->pw) + (double)m * s->k * act_bytes + xs_bytes + (double)m * s->n * y_bytes;
        double hbm_us = bytes / b->bw * 1e6, mma_us = flops / peak * 1e6;
        double floor_us = hbm_us > mma_us ? hbm_us : mma_us;
        const char *bound = hbm_us >= mma_us ? "hbm" : "mma";
        printf("%-9s %-22s %-8s %9lld %10.1f %8.2f %8.0f %9.1f %6.1f%% %s%s%s\n", fname(f), kd->id, s->name,
               (long long)m, us, flops / us * 1e-6, bytes / us * 1e-3, floor_us, 100.0 * floor_us / us, bound,
               y_bytes == 2 ? "  y.bf16" : "", wrong ? "  WRONG" : "");
        /* with the quantizer: it reads x as bf16 (2 B) and writes the codes and scales the GEMM then reads */
        double q_bytes = bytes + (double)m * s->k * 3 + xs_bytes, q_hbm_us = q_bytes / b->bw * 1e6;
        double q_floor_us = q_hbm_us > mma_us ? q_hbm_us : mma_us;
        if (qk)
            printf("%-9s %-22s %-8s %9lld %10.1f %8.2f %8.0f %9.1f %6.1f%% %s  (+ %s %.1f us alone)\n", fname(f),
                   "  + activation quant", s->name, (long long)m, both_us, flops / both_us * 1e-6,
                   q_bytes / both_us * 1e-3, q_floor_us, 100.0 * q_floor_us / both_us,
                   q_hbm_us >= mma_us ? "hbm" : "mma", qk->id, q_us);
        json_t *r = row_base(f, kd, s, m, wrong ? "WRONG" : "ok");
        json_set_num(r, "time_us", us);
        json_set_num(r, "tflops", flops / us * 1e-6);
        json_set_num(r, "gbps", bytes / us * 1e-3);
        json_set_num(r, "bytes", bytes);
        json_object_set_new(r, "act_bytes", json_integer(act_bytes));
        json_object_set_new(r, "out", json_string(y_bytes == 2 ? "bf16" : "f32"));
        json_set_num(r, "floor_hbm_us", hbm_us);
        json_set_num(r, "floor_mma_us", mma_us);
        json_set_num(r, "floor_us", floor_us);
        json_set_num(r, "fraction_of_floor", floor_us / us);
        json_object_set_new(r, "bound", json_string(bound));
        if (qk) {
            json_object_set_new(r, "quantizer", json_string(qk->id));
            json_set_num(r, "quant_us", q_us);
            json_set_num(r, "time_with_quant_us", both_us);
            json_set_num(r, "floor_with_quant_us", q_floor_us);
        }
        json_array_append_new(b->rows, r);
        if (wrong)
            b->n_wrong++;
        else
            b->n_ok++;
    }
    b->n_wrong_checks += wrong;
}

/* Every format on one shape. */
static void bench_shape(gb *b, const gb_shape *s) {
    char err[1024];
    int64_t n = s->n, k = s->k;
    printf("\nshape %s: N=%lld K=%lld\n", s->name, (long long)n, (long long)k);
    for (int64_t j = 0; j < n; j++) {
        double a = 0;
        for (int64_t t = 0; t < k; t++) a += (double)b->ws[j * k + t] * b->ws[j * k + t];
        b->wn[j] = (float)sqrt(a);
    }
    /* a check at the kernel's smallest M (up to its m_min) reads the first
     * rows; the norms of every row that a check can use */
    int64_t check_rows = b->max_m;
    for (int64_t i = 0; i < check_rows; i++) {
        double a = 0;
        for (int64_t t = 0; t < k; t++) a += (double)b->xs[i * k + t] * b->xs[i * k + t];
        b->xn[i] = (float)sqrt(a);
    }
    size_t xbytes = (size_t)(b->max_m * k) * 4, ybytes = ((size_t)(b->max_m * n) + GB_GUARD) * 4;
    qc_gpu_buf dx = {0}, dxb = {0}, dy = {0}, dyb = {0}, dxq = {0}, dxq_s = {0};
    /* --out bf16: bf16 outputs with 2 GB_GUARD halves after them, in whole words for the poison memset */
    size_t ybbytes = ((size_t)(b->max_m * n) + 2 * GB_GUARD + 1) / 2 * 4;
    int need_bf16 = 0, need_xq = 0;
    for (size_t fi = 0; fi < b->n_formats; fi++) {
        const qc_kernel_desc *ks[GB_MAX_LIST];
        size_t nk = format_kernels(b, b->formats[fi], ks, GB_MAX_LIST);
        for (size_t i = 0; i < nk; i++) {
            need_bf16 |= has_param(ks[i], "x.bf16");
            need_xq |= has_param(ks[i], "xq");
        }
        /* the activation quantizers of W8A8 kernels read x as bf16 */
        for (size_t i = 0; nk && i < qc_kernel_count(b->c->rt); i++) {
            const qc_kernel_desc *q = qc_kernel_get(b->c->rt, i);
            if (strcmp(q->format, b->formats[fi]->name) == 0 && has_param(q, "xq") && !has_param(q, "y"))
                need_bf16 |= has_param(q, "x.bf16");
        }
    }
    /* 8-bit codes (padded to whole words for the poison memset) and f32 scales down to groups of 32 */
    size_t xq_bytes = ((size_t)(b->max_m * k) + 3) / 4 * 4, xs_bytes = xs_count(b->max_m, k) * 4;
    if (need_bf16 && !b->xbs) {
        size_t cnt = (size_t)(b->max_m * b->max_k);
        b->xbs = malloc(cnt * 2);
        if (!b->xbs) {
            fprintf(stderr, GB ": out of host memory for bf16 activations (%.0f MiB)\n", mib(cnt * 2.0));
            b->n_err++;
            return;
        }
        for (size_t i = 0; i < cnt; i++) b->xbs[i] = qc_f32_to_bf16(b->xs[i]);
    }
    if (qc_gpu_alloc(b->g, xbytes, xbytes, QC_MEM_ACTIVATIONS, "x", &dx, err, sizeof err) ||
        (need_bf16 &&
         qc_gpu_alloc(b->g, xbytes / 2, xbytes / 2, QC_MEM_ACTIVATIONS, "x.bf16", &dxb, err, sizeof err)) ||
        qc_gpu_alloc(b->g, ybytes, ybytes, QC_MEM_ACTIVATIONS, "y", &dy, err, sizeof err) ||
        (b->out_bf16 && qc_gpu_alloc(b->g, ybbytes, ybbytes, QC_MEM_ACTIVATIONS, "y.bf16", &dyb, err, sizeof err)) ||
        (need_xq && (qc_gpu_alloc(b->g, xq_bytes, xq_bytes, QC_MEM_WORKSPACE, "xq", &dxq, err, sizeof err) ||
                     qc_gpu_alloc(b->g, xs_bytes, xs_bytes, QC_MEM_WORKSPACE, "xs", &dxq_s, err, sizeof err)))) {
        printf("shape %s: skipped: activations x %.0f MiB%s, y %.0f MiB%s (M up to %lld) do not fit: %s\n", s->name,
               mib((double)xbytes), need_bf16 ? " (+ half as much as bf16)" : "", mib((double)ybytes),
               need_xq ? ", quantized x" : "", (long long)b->max_m, err);
        b->n_err++;
        goto out;
    }
    if (qc_gpu_upload(b->g, dx.ptr, b->xs, xbytes, err, sizeof err) ||
        (need_bf16 && qc_gpu_upload(b->g, dxb.ptr, b->xbs, xbytes / 2, err, sizeof err))) {
        fprintf(stderr, GB ": uploading activations: %s\n", err);
        b->n_err++;
        goto out;
    }
    for (size_t fi = 0; fi < b->n_formats; fi++) {
        const qc_format_desc *f = b->formats[fi];
        const qc_kernel_desc *ks[GB_MAX_LIST];
        size_t nk = format_kernels(b, f, ks, GB_MAX_LIST);
        if (!nk) continue; /* said once at the start */
        qc_quant_request req = {.struct_size = sizeof req, .w = b->ws, .n = n, .k = k,
                                .group_size = b->fmt_group[fi], .scheme = b->fmt_scheme[fi][0] ? b->fmt_scheme[fi] : NULL};
        g_label = b->fmt_label[fi];
        qc_packed_weight pw;
        memset(&pw, 0, sizeof pw);
        pw.struct_size = sizeof pw;
        qc_reason why = {{0}, {0}};
        double t0 = qc_now_seconds();
        if (!f->quantize || f->quantize(&req, &pw, &why) != QC_OK) {
            snprintf(err, sizeof err, "%s: %s", f->quantize ? why.code : "missing",
                     f->quantize ? why.text : "the format has no quantize");
            add_error_row(b, f, NULL, s, 0, "quantize", err);
            continue;
        }
        printf("%s on %s: quantized on the CPU in %.1f s (group %u, scheme 0x%x), %.1f MiB resident in %u buffers\n",
               fname(f), s->name, qc_now_seconds() - t0, pw.group_size, pw.scheme, mib((double)weight_bytes(&pw)),
               pw.n_buffers);
        qc_gpu_buf dw[QC_MAX_WEIGHT_BUFFERS];
        memset(dw, 0, sizeof dw);
        gb_bufs bf = {.x = b->xs, .xb = b->xbs, .dx = dx.ptr, .dxb = dxb.ptr, .dy = dy.ptr, .dyb = dyb.ptr,
                      .dxq = dxq.ptr, .dxq_s = dxq_s.ptr, .pw = &pw};
        int up_ok = 1;
        for (uint32_t i = 0; i < pw.n_buffers && up_ok; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s w.%s", fname(f), pw.buffers[i].name);
            if (qc_gpu_alloc(b->g, pw.buffers[i].bytes, pw.buffers[i].bytes, pw.buffers[i].category, what, &dw[i],
                             err, sizeof err) ||
                qc_gpu_upload(b->g, dw[i].ptr, pw.buffers[i].data, pw.buffers[i].bytes, err, sizeof err)) {
                printf("%s on %s: skipped: weight buffer %s (%.1f MiB of %.1f MiB) did not fit: %s\n", fname(f), s->name,
                       pw.buffers[i].name, mib((double)pw.buffers[i].bytes), mib((double)weight_bytes(&pw)), err);
                b->n_err++;
                up_ok = 0;
            }
            bf.dw[i] = dw[i].ptr;
        }
        /* one workspace for the format's kernels, sized at the largest M (qc_kernel_desc.workspace_bytes) */
        uint64_t wneed = 0;
        for (size_t i = 0; up_ok && i < nk; i++) {
            qc_problem p = {.struct_size = sizeof p, .sm = (uint32_t)b->sm, .m = b->max_m, .n = n, .k = k,
                            .group_size = pw.group_size, .scheme = pw.scheme};
            uint64_t w = ks[i]->workspace_bytes ? ks[i]->workspace_bytes(&p) : 0;
            if (w > wneed) wneed = w;
        }
        qc_gpu_buf dwork = {0};
        if (up_ok && wneed &&
            (wneed > SIZE_MAX / 2 ||
             qc_gpu_alloc(b->g, (size_t)wneed, (size_t)wneed, QC_MEM_WORKSPACE, "workspace", &dwork, err, sizeof err) ||
             qc_gpu_memset32(b->g, dwork.ptr, 0, (size_t)(wneed + 3) / 4, err, sizeof err))) {
            printf("%s on %s: skipped: the kernels' workspace (%.1f MiB) did not fit: %s\n", fname(f), s->name,
                   mib((double)wneed), wneed > SIZE_MAX / 2 ? "too large" : err);
            b->n_err++;
            up_ok = 0;
        }
        bf.dwork = dwork.ptr;
        if (up_ok)
            for (size_t i = 0; i < nk; i++) bench_kernel(b, f, ks[i], s, &bf);
        qc_gpu_free(b->g, &dwork);
        for (uint32_t i = 0; i < pw.n_buffers; i++) qc_gpu_free(b->g, &dw[i]);
        release_packed(f, &pw);
    }
out:
    g_label = NULL;
    qc_gpu_free(b->g, &dx);
    qc_gpu_free(b->g, &dxb);
    qc_gpu_free(b->g, &dy);
    qc_gpu_free(b->g, &dyb);
    qc_gpu_free(b->g, &dxq);
    qc_gpu_free(b->g, &dxq_s);
}

static void write_json(gb *b, const char *error) {
    if (!b->json_file) return;
    json_t *o = json_object();
    if (error) json_object_set_new(o, "error", json_string(error));
    if (b->g) {
        const qc_gpu_info *gi = qc_gpu_get_info(b->g);
        json_object_set_new(o, "device", json_string(gi->name));
        json_object_set_new(o, "sm", json_integer(gi->sm));
        json_object_set_new(o, "sm_count", json_integer(gi->sm_count));
    }
    json_set_num(o, "copy_bandwidth_Bps", b->bw);
    json_set_num(o, "peak_tflops_16bit", b->peak16);
    json_set_num(o, "peak_tflops_8bit", b->peak8);
    json_object_set_new(o, "iters", json_integer(b->iters));
    json_object_set_new(o, "warmup", json_integer(GB_WARMUP));
    json_object_set_new(o, "l2_flush_bytes", json_integer((json_int_t)(GB_FLUSH_WORDS * 4)));
    json_object_set_new(o, "seed", json_integer((json_int_t)b->seed));
    json_set_num(o, "check_rtol", GB_RTOL);
    json_set_num(o, "check_rtol_fp8", GB_RTOL_FP8);
    json_object_set_new(o, "rows", b->rows ? json_incref(b->rows) : json_array());
    json_object_set_new(o, "checks", b->checks ? json_incref(b->checks) : json_array());
    json_dumpf(o, b->json_file, JSON_INDENT(1));
    fputc('\n', b->json_file);
    json_decref(o);
}

int cmd_gemm_bench(cli *c) {
    gb *b = calloc(1, sizeof *b);
    if (!b) return 1;
    b->c = c;
    int rc = 1;
    char err[1024];
    if (parse_options(b)) {
        free(b);
        return EXIT_USAGE;
    }
    if (c->gb_json) {
        b->json_file = fopen(c->gb_json, "w");
        if (!b->json_file) {
            fprintf(stderr, GB ": cannot write --json file '%s': %s\n", c->gb_json, strerror(errno));
            free(b);
            return EXIT_USAGE;
        }
    }
    b->g = qc_gpu_open(b->device, err, sizeof err);
    if (!b->g) {
        fprintf(stderr, GB ": no CUDA device: %s\n", err);
        char msg[1100];
        snprintf(msg, sizeof msg, "no CUDA device: %s", err);
        write_json(b, msg);
        goto done;
    }
    b->nv = qc_nvrtc_create(NULL, err, sizeof err);
    if (!b->nv) {
        fprintf(stderr, GB ": NVRTC: %s\n", err);
        write_json(b, err);
        goto done;
    }
    const qc_gpu_info *gi = qc_gpu_get_info(b->g);
    b->sm = gi->sm;
    printf("device %d: %s, sm_%d, %d SMs, %.1f GiB\n", gi->device, gi->name, gi->sm, gi->sm_count,
           (double)gi->mem_total / (1u << 30));
    b->rows = json_array();
    b->checks = json_array();
    b->ms_buf = malloc(sizeof(float) * (size_t)b->iters);
    size_t xcnt = (size_t)(b->max_m * b->max_k);
    b->xs = malloc(xcnt * 4);
    b->ws = malloc((size_t)b->max_nk * 4);
    b->xn = malloc((size_t)b->max_m * 4);
    int64_t max_n = 0;
    for (size_t i = 0; i < b->n_shapes; i++)
        if (b->shapes[i].n > max_n) max_n = b->shapes[i].n;
    b->wn = malloc((size_t)max_n * 4);
    if (!b->rows || !b->checks || !b->ms_buf || !b->xs || !b->ws || !b->xn || !b->wn) {
        fprintf(stderr, GB ": out of host memory for x (%.0f MiB) and W (%.0f MiB)\n", mib(xcnt * 4.0),
                mib(b->max_nk * 4.0));
        goto done;
    }
    if (qc_gpu_event_create(b->g, &b->ev0, err, sizeof err) || qc_gpu_event_create(b->g, &b->ev1, err, sizeof err)) {
        fprintf(stderr, GB ": %s\n", err);
        goto done;
    }
    if (measure_bandwidth(b)) goto done;
    if (qc_gpu_alloc(b->g, GB_FLUSH_WORDS * 4, GB_FLUSH_WORDS * 4, QC_MEM_WORKSPACE, "L2 flush", &b->flush, err,
                     sizeof err)) {
        fprintf(stderr, GB ": %s\n", err);
        goto done;
    }
    printf("compute peaks used (--peak-tflops): %.0f TFLOP/s for 16-bit activations, %.0f for 8-bit and narrower\n",
           b->peak16, b->peak8);
    printf("timing: median of %d launches after %d warm-ups, each after a %zu MiB memset that flushes L2; seed %llu\n",
           b->iters, GB_WARMUP, GB_FLUSH_WORDS * 4 >> 20, (unsigned long long)b->seed);
    printf("floors: hbm = (packed weight bytes + M*K*activation bytes + M*N*4) / copy bandwidth; mma = 2MNK / peak; "
           "W8A8 kernels: 1-byte activations + their scales, and a second row '+ activation quant' timing the "
           "format's quantizer then the GEMM (its floor adds the quantizer's bf16 read and 8-bit write)\n");
    /* say once which formats have nothing to time */
    for (size_t fi = 0; fi < b->n_formats; fi++) {
        const qc_kernel_desc *ks[GB_MAX_LIST];
        if (format_kernels(b, b->formats[fi], ks, GB_MAX_LIST)) continue;
        char missing[160] = "";
        qc_format_missing(c->rt, b->formats[fi], missing, sizeof missing);
        printf("%s: nothing to time: no GPU linear kernel%s%s%s\n", b->formats[fi]->name,
               b->n_only ? " among --kernels" : "", missing[0] ? "; the format lacks: " : "", missing);
    }
    double t0 = qc_now_seconds();
    fill_normal(b->xs, xcnt, 1.0f, b->seed * 0x9e3779b97f4a7c15ull);
    fill_normal(b->ws, (size_t)b->max_nk, 0.02f, b->seed * 0xc2b2ae3d27d4eb4full + 1);
    printf("random x [%lld, %lld] and W (%lld values) made in %.1f s\n", (long long)b->max_m, (long long)b->max_k,
           (long long)b->max_nk, qc_now_seconds() - t0);
    print_header();
    for (size_t si = 0; si < b->n_shapes; si++) bench_shape(b, &b->shapes[si]);
    printf("\n" GB ": %zu rows timed, %zu WRONG, %zu errors, %zu refused (kernel, shape, M)\n", b->n_ok + b->n_wrong,
           b->n_wrong, b->n_err, b->n_refused);
    rc = b->n_wrong || b->n_wrong_checks || b->n_err ? 1 : 0;
    write_json(b, NULL);
done:
    if (b->g) {
        qc_gpu_free(b->g, &b->flush);
        qc_gpu_event_destroy(b->g, b->ev0);
        qc_gpu_event_destroy(b->g, b->ev1);
        printf("\nmemory ledger:\n");
        qc_gpu_ledger_print(b->g, stdout);
        qc_gpu_close(b->g);
    }
    qc_nvrtc_destroy(b->nv);
    if (b->json_file && fclose(b->json_file) != 0) {
        fprintf(stderr, GB ": writing --json file '%s': %s\n", c->gb_json, strerror(errno));
        rc = 1;
    }
    if (b->json_file) printf("json: %s\n", c->gb_json);
    json_decref(b->rows);
    json_decref(b->checks);
    free(b->ms_buf);
    free(b->xs);
    free(b->xbs);
    free(b->ws);
    free(b->xn);
    free(b->wn);
    free(b);
    return rc;
}
