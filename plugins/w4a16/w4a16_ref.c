/* w4a16_ref.c - the C reference linear kernels: y = bf16(x) W^T, f32 sums in stored K order. */
#include <math.h>
#include <string.h>

#include "w4a16_impl.h"

qc_status w4_register_kernels(const qc_host_api *api, qc_host *host);
qc_status w4_register_gpu_kernels(const qc_host_api *api, qc_host *host); /* w4a16_cuda.c */
qc_status w4_register_wgmma_kernels(const qc_host_api *api, qc_host *host);
qc_status w4_register_wgmma_bf16_kernels(const qc_host_api *api, qc_host *host); /* w4a16_wgmma_bf16.c */
qc_status w4_register_frag_kernels(const qc_host_api *api, qc_host *host); /* w4a16_gemv_frag.c */

/* Tiles: W4_MB rows of x by W4_NB rows of W over W4_KC stored columns.
 * The tiling changes only the traversal: each output is still one f32 sum
 * in stored K order (the W4_NB lanes are different outputs). */
#define W4_MB 8
#define W4_NB 8
#define W4_KC 512

/* The definition: for every output (i, j)
 *     acc = +0.0f;  for t = 0 .. k-1:  acc = acc + (xb * w)
 * with xb = bf16(x[i, perm ? perm[t] : t]) and w the value of stored element
 * (j, t), each * and + rounded to f32 (never fused), and y[i, j] = acc. */
void w4_linear(const w4_view *v, const float *x, float *y, int64_t m) {
    float xb[W4_MB][W4_KC], wt[W4_KC][W4_NB];
    const int64_t n = v->n, k = v->k; /* n is a multiple of 8 = W4_NB */
    for (int64_t i0 = 0; i0 < m; i0 += W4_MB) {
        int64_t mb = m - i0 < W4_MB ? m - i0 : W4_MB;
        for (int64_t t0 = 0; t0 < k; t0 += W4_KC) {
            int64_t kc = k - t0 < W4_KC ? k - t0 : W4_KC;
            for (int64_t r = 0; r < mb; r++) {
                const float *xr = x + (i0 + r) * k;
                for (int64_t t = 0; t < kc; t++) xb[r][t] = qc_round_bf16(xr[v->perm ? v->perm[t0 + t] : t0 + t]);
            }
            for (int64_t j0 = 0; j0 < n; j0 += W4_NB) {
                /* W rows j0.., transposed so the lanes are contiguous */
                for (int jj = 0; jj < W4_NB; jj++) w4_dequant_row_strided(v, j0 + jj, t0, kc, &wt[0][jj], W4_NB);
                for (int64_t r = 0; r < mb; r++) {
                    float acc[W4_NB], *yr = y + (i0 + r) * n + j0;
                    /* y holds the running f32 sum between K chunks: storing
                     * an f32 in an f32 changes nothing. */
                    for (int jj = 0; jj < W4_NB; jj++) acc[jj] = t0 ? yr[jj] : 0.0f;
                    for (int64_t t = 0; t < kc; t++) {
                        float xv = xb[r][t];
                        for (int jj = 0; jj < W4_NB; jj++) acc[jj] += xv * wt[t][jj];
                    }
                    for (int jj = 0; jj < W4_NB; jj++) yr[jj] = acc[jj];
                }
            }
        }
    }
}

/* The host checks eligibility before it calls; these checks only keep a
 * bad call from reading out of bounds.  A corrupt permutation gives NaN. */
static void w4_run(w4_view *v, const float *x, float *y, int64_t m) {
    if (!x || !y || !v->q || !v->s || m <= 0 || !w4_shape_ok(v->n, v->k, v->g, NULL)) return;
    if ((W4A16_SCHEME_BASE(v->scheme) == W4A16_SCHEME_ASYM && !v->z) ||
        (W4A16_SCHEME_BASE(v->scheme) == W4A16_SCHEME_FMIN && !v->mn) ||
        ((v->scheme & W4A16_SCHEME_PERM) && !v->perm))
        return;
    if (v->perm && !w4_perm_ok(v->perm, v->k)) {
        for (int64_t i = 0; i < m * v->n; i++) y[i] = NAN;
        return;
    }
    v->ng = v->k / v->g;
    w4_linear(v, x, y, m);
}

#define W4_VIEW(sch, zz, mm, pp)                                                                              \
    w4_view v = {.n = n, .k = k, .g = group_size, .scheme = (sch), .q = qweight, .s = scales, .z = (zz),      \
                 .mn = (mm), .perm = (pp)};                                                                    \
    w4_run(&v, x, y, m)

static void w4_ref_sym(const float *x, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                       int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_SYM, NULL, NULL, NULL);
}
static void w4_ref_asym(const float *x, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                        float *y, int64_t m, int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_ASYM, zeros, NULL, NULL);
}
static void w4_ref_fmin(const float *x, const uint8_t *qweight, const uint16_t *scales, const uint16_t *mins,
                        float *y, int64_t m, int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_FMIN, NULL, mins, NULL);
}
static void w4_ref_sym_perm(const float *x, const uint8_t *qweight, const uint16_t *scales, const int32_t *perm,
                            float *y, int64_t m, int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_SYM | W4A16_SCHEME_PERM, NULL, NULL, perm);
}
static void w4_ref_asym_perm(const float *x, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                             const int32_t *perm, float *y, int64_t m, int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_ASYM | W4A16_SCHEME_PERM, zeros, NULL, perm);
}
static void w4_ref_fmin_perm(const float *x, const uint8_t *qweight, const uint16_t *scales, const uint16_t *mins,
                             const int32_t *perm, float *y, int64_t m, int64_t n, int64_t k, uint32_t group_size) {
    W4_VIEW(W4A16_SCHEME_FMIN | W4A16_SCHEME_PERM, NULL, mins, perm);
}

/* One kernel per scheme: each takes exactly the packed weight's buffers, so
 * a caller binds "w.<name>" for every buffer and nothing else. */
static int w4_kernel_takes(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    uint32_t s = p->struct_size >= offsetof(qc_problem, scheme) + sizeof p->scheme ? p->scheme : 0;
    if (s == 0) s = W4A16_SCHEME_SYM;
    if (s == want) return 1;
    w4_why(why, "scheme", "%s takes scheme %s, the weight is %s (0x%x)", id, w4_scheme_name(want),
           w4_scheme_name(s), s);
    return 0;
}

#define W4_ELIGIBLE(fn, sch, id) \
    static int fn(const qc_problem *p, qc_reason *why) { return w4_kernel_takes(p, (sch), (id), why); }
W4_ELIGIBLE(w4_el_sym, W4A16_SCHEME_SYM, "w4a16.linear_sym")
W4_ELIGIBLE(w4_el_asym, W4A16_SCHEME_ASYM, "w4a16.linear_asym")
W4_ELIGIBLE(w4_el_fmin, W4A16_SCHEME_FMIN, "w4a16.linear_fmin")
W4_ELIGIBLE(w4_el_sym_perm, W4A16_SCHEME_SYM | W4A16_SCHEME_PERM, "w4a16.linear_sym_perm")
W4_ELIGIBLE(w4_el_asym_perm, W4A16_SCHEME_ASYM | W4A16_SCHEME_PERM, "w4a16.linear_asym_perm")
W4_ELIGIBLE(w4_el_fmin_perm, W4A16_SCHEME_FMIN | W4A16_SCHEME_PERM, "w4a16.linear_fmin_perm")

#define P_HEAD {"x", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}
#define P_TAIL                                                                                            \
    {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64}, {"k", QC_PARAM_I64},                   \
    {"group_size", QC_PARAM_U32}
static const qc_kernel_param w4_p_sym[] = {P_HEAD, P_TAIL};
static const qc_kernel_param w4_p_asym[] = {P_HEAD, {"w.zeros", QC_PARAM_PTR}, P_TAIL};
static const qc_kernel_param w4_p_fmin[] = {P_HEAD, {"w.mins", QC_PARAM_PTR}, P_TAIL};
static const qc_kernel_param w4_p_sym_perm[] = {P_HEAD, {"w.perm", QC_PARAM_PTR}, P_TAIL};
static const qc_kernel_param w4_p_asym_perm[] = {P_HEAD, {"w.zeros", QC_PARAM_PTR}, {"w.perm", QC_PARAM_PTR},
                                                 P_TAIL};
static const qc_kernel_param w4_p_fmin_perm[] = {P_HEAD, {"w.mins", QC_PARAM_PTR}, {"w.perm", QC_PARAM_PTR},
                                                 P_TAIL};

typedef struct w4_kernel_row {
    const char *id;
    const qc_kernel_param *params;
    uint32_t n_params;
    void (*reference)(void);
    int (*eligible)(const qc_problem *, qc_reason *);
} w4_kernel_row;

#define W4_ROW(id, p, f, e) {id, p, sizeof p / sizeof p[0], (void (*)(void))f, e}
static const w4_kernel_row w4_kernels[] = {
    W4_ROW("w4a16.linear_sym", w4_p_sym, w4_ref_sym, w4_el_sym),
    W4_ROW("w4a16.linear_asym", w4_p_asym, w4_ref_asym, w4_el_asym),
    W4_ROW("w4a16.linear_fmin", w4_p_fmin, w4_ref_fmin, w4_el_fmin),
    W4_ROW("w4a16.linear_sym_perm", w4_p_sym_perm, w4_ref_sym_perm, w4_el_sym_perm),
    W4_ROW("w4a16.linear_asym_perm", w4_p_asym_perm, w4_ref_asym_perm, w4_el_asym_perm),
    W4_ROW("w4a16.linear_fmin_perm", w4_p_fmin_perm, w4_ref_fmin_perm, w4_el_fmin_perm),
};

qc_status w4_register_kernels(const qc_host_api *api, qc_host *host) {
    for (size_t i = 0; i < sizeof w4_kernels / sizeof w4_kernels[0]; i++) {
        const w4_kernel_row *r = &w4_kernels[i];
        qc_kernel_desc d = {
            .struct_size = sizeof d,
            .id = r->id,
            .format = "w4a16",
            .phases = QC_PHASE_ANY,
            .m_min = 1,
            .m_max = 0,
            .arch = {80, QC_SM_ANY}, /* C only: the GPU kernels are w4a16_cuda.c's */
            .n_params = r->n_params,
            .params = r->params,
            .reference = r->reference,
            .eligible = r->eligible,
        };
        qc_status st = api->register_kernel(host, &d);
        if (st != QC_OK) return st;
    }
    /* the fragment GEMV first: it ties with w4a16.gemv_sym in the engine's ranking (same arch and M
     * range), so registration order decides, and on the H200 it took 0.75-0.95x gemv_sym's time on
     * the four Llama-3-8B shapes at M = 1, 4, 16 (docs/perf.md) */
    qc_status gst = w4_register_frag_kernels(api, host);
    if (gst == QC_OK) gst = w4_register_gpu_kernels(api, host);
    /* w4a16.wgmma_bf16_* before w4a16.wgmma_*: the engine breaks their tie by registration order */
    if (gst == QC_OK) gst = w4_register_wgmma_bf16_kernels(api, host);
    return gst != QC_OK ? gst : w4_register_wgmma_kernels(api, host); /* w4a16_wgmma.c */
}
