/* fake_cuda.c - a stand-in CUDA driver on host memory: GPU host code (gemm-bench) runs in tests without a GPU. */
/*
 * Loaded through QCORE_CUDA_LIBRARY.  One sm_90 device; device memory is
 * host memory; a launch of a function whose entry starts with
 * "qc_bf16_linear" computes y = bf16(x) W^T in float (the bf16 linear
 * kernels' signature: x, w, y, m, n, k); fp8's per-token activation
 * quantizer "qc_fp8_quant_act_token" (x.bf16, xq, xs, m, k) and its channel
 * W8A8 GEMMs "qc_fp8_gemm_channel_wgmma" / "qc_fp8_gemv_channel" (xq, xs, w,
 * ws, y, m, n, k; the wgmma one then work and y.bf16, written instead of y
 * when given) compute what their C references do; any other launch
 * does nothing.
 * Environment: FAKE_CUDA_LINEAR=wrong adds 1 to y[0] of every linear (and W8A8 GEMM)
 * launch, =skip writes nothing, =both writes y as well as a given y.bf16; FAKE_CUDA_LOG=FILE appends a line per
 * launch of the fp8 wgmma GEMM (n, whether y.bf16 was given) and of SwiGLU (n, ld, up - gate in bytes, in_bf16),
 * so that a test can see how the engine wires them; FAKE_CUDA_FREE_MIB sets the free memory
 * cuMemGetInfo reports (default 16384).  Data operations on allocations of
 * 64 MiB or more are skipped (a benchmark's bandwidth and flush buffers) so
 * that they cost address space only.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qc_fp8_codec.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
#define OK 0
#define ERR_INVALID 1
#define ERR_OOM 2
#define BIG ((size_t)64 << 20)
#define EXPORT __attribute__((visibility("default")))

typedef struct fake_fn {
    char entry[128];
} fake_fn;

static size_t g_used;
static struct {
    void *p;
    size_t n;
} g_allocs[4096];

static size_t total_bytes(void) { return (size_t)16 << 30; }

static size_t free_bytes(void) {
    const char *e = getenv("FAKE_CUDA_FREE_MIB");
    size_t f = e && *e ? (size_t)strtoull(e, NULL, 10) << 20 : (size_t)16 << 30;
    return f > g_used ? f - g_used : 0;
}

static size_t alloc_size(const void *p) {
    for (size_t i = 0; i < sizeof g_allocs / sizeof g_allocs[0]; i++)
        if (g_allocs[i].p && (const char *)p >= (char *)g_allocs[i].p &&
            (const char *)p < (char *)g_allocs[i].p + g_allocs[i].n)
            return g_allocs[i].n;
    return 0;
}

EXPORT CUresult cuInit(unsigned f) { return f ? ERR_INVALID : OK; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
EXPORT CUresult cuDeviceGetCount(int *c) { *c = 1; return OK; }
EXPORT CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? OK : ERR_INVALID; }
EXPORT CUresult cuDeviceGetName(char *s, int len, int d) {
    (void)d;
    strncpy(s, "fake sm_90 device (tests/gpu/fake_cuda.c)", (size_t)len - 1);
    s[len - 1] = 0;
    return OK;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : attr == 97 ? 232448 : 0;
    return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = total_bytes(); return OK; }
EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == ERR_OOM ? "out of memory" : "invalid value";
    return OK;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
    *s = r == ERR_OOM ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_INVALID_VALUE";
    return OK;
}
static int g_ctx;
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &g_ctx; return OK; }
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
EXPORT CUresult cuCtxSetCurrent(void *c) { return c == &g_ctx ? OK : ERR_INVALID; }
static int g_stream;
EXPORT CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = &g_stream; return OK; }
EXPORT CUresult cuStreamDestroy_v2(void *s) { (void)s; return OK; }
EXPORT CUresult cuStreamSynchronize(void *s) { (void)s; return OK; }
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = free_bytes(); *t = total_bytes(); return OK; }
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (n > free_bytes()) return ERR_OOM;
    for (size_t i = 0; i < sizeof g_allocs / sizeof g_allocs[0]; i++)
        if (!g_allocs[i].p) {
            /* big ones are never touched: address space only; small ones start zeroed,
               so outputs of kernels the fake does not run (argmax) read as 0 */
            void *m = n >= BIG ? malloc(n) : calloc(1, n ? n : 1);
            if (!m) return ERR_OOM;
            g_allocs[i].p = m;
            g_allocs[i].n = n;
            g_used += n;
            *p = (CUdeviceptr)(uintptr_t)m;
            return OK;
        }
    return ERR_OOM;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    for (size_t i = 0; i < sizeof g_allocs / sizeof g_allocs[0]; i++)
        if (g_allocs[i].p == (void *)(uintptr_t)p) {
            free(g_allocs[i].p);
            g_used -= g_allocs[i].n;
            g_allocs[i].p = NULL;
            return OK;
        }
    return ERR_INVALID;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) {
    (void)st;
    if (alloc_size((void *)(uintptr_t)d) < BIG) memcpy((void *)(uintptr_t)d, s, n);
    return OK;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) {
    (void)st;
    if (alloc_size((void *)(uintptr_t)s) < BIG) memcpy(d, (void *)(uintptr_t)s, n);
    return OK;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) {
    (void)st;
    if (alloc_size((void *)(uintptr_t)d) < BIG) memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
    return OK;
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *st) {
    (void)st;
    if (alloc_size((void *)(uintptr_t)d) >= BIG) return OK;
    uint32_t *p = (uint32_t *)(uintptr_t)d;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return OK;
}
static int g_module;
EXPORT CUresult cuModuleLoadData(void **m, const void *img) { (void)img; *m = &g_module; return OK; }
EXPORT CUresult cuModuleUnload(void *m) { (void)m; return OK; }
static fake_fn g_fns[256]; /* static: functions live as long as the process, as a module's do */
static size_t g_n_fns;
EXPORT CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)m;
    if (g_n_fns == sizeof g_fns / sizeof g_fns[0]) return ERR_OOM;
    fake_fn *fn = &g_fns[g_n_fns++];
    strncpy(fn->entry, name, sizeof fn->entry - 1);
    *f = fn;
    return OK;
}
EXPORT CUresult cuFuncSetAttribute(void *f, int a, int v) { (void)f, (void)a, (void)v; return OK; }

static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static void *dptr(void *param) { return (void *)(uintptr_t) * (CUdeviceptr *)param; }

/* fp8.quant_act_token: xs[i] = amax(row)/448 (1 for a zero row), xq = E4M3(x / xs[i]) */
static CUresult fp8_quant_token(void **params) {
    const uint16_t *x = dptr(params[0]);
    uint8_t *xq = dptr(params[1]);
    float *xs = dptr(params[2]);
    int64_t m = *(int64_t *)params[3], k = *(int64_t *)params[4];
    for (int64_t i = 0; i < m; i++) {
        float a = 0.f;
        for (int64_t t = 0; t < k; t++) {
            uint32_t u = (uint32_t)x[i * k + t] << 16;
            float v;
            memcpy(&v, &u, 4);
            v = v < 0 ? -v : v;
            if (v > a) a = v;
        }
        float s = a / QC_FP8_E4M3_MAX;
        s = s > 0.f ? s : 1.f;
        xs[i] = s;
        for (int64_t t = 0; t < k; t++) {
            uint32_t u = (uint32_t)x[i * k + t] << 16;
            float v;
            memcpy(&v, &u, 4);
            xq[i * k + t] = qc_fp8_e4m3_encode(v / s);
        }
    }
    return OK;
}

/* round to nearest even (finite values) */
static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* fp8 channel W8A8 GEMM: y = (sum of decoded products) * (xs[i] * ws[j]); yb (may be NULL): bf16 there instead,
   and with both also y */
static CUresult fp8_gemm_channel(void **params, uint16_t *yb, int wrong, int both) {
    const uint8_t *xq = dptr(params[0]), *w = dptr(params[2]);
    const float *xs = dptr(params[1]), *ws = dptr(params[3]);
    float *y = dptr(params[4]);
    int64_t m = *(int64_t *)params[5], n = *(int64_t *)params[6], k = *(int64_t *)params[7];
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.f;
            for (int64_t t = 0; t < k; t++) acc += qc_fp8_e4m3_decode(xq[i * k + t]) * qc_fp8_e4m3_decode(w[j * k + t]);
            float v = acc * (xs[i] * ws[j]) + (wrong && i == 0 && j == 0 ? 1.0f : 0.f);
            if (yb) yb[i * n + j] = bf16_bits(v);
            if (!yb || both) y[i * n + j] = v;
        }
    return OK;
}

/* FAKE_CUDA_LOG: the fp8 wgmma GEMM's and SwiGLU's wiring (params in their kernels' order) */
static void log_launch(const fake_fn *fn, void **params) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path) return;
    const int gemm = strcmp(fn->entry, "qc_fp8_gemm_channel_wgmma") == 0, quant = strcmp(fn->entry, "qc_swiglu_quant") == 0;
    if (!gemm && !quant && strcmp(fn->entry, "qc_swiglu_ld") != 0) return;
    FILE *fp = fopen(path, "a");
    if (!fp) return;
    if (gemm) {
        fprintf(fp, "fp8_wgmma m=%lld n=%lld ybf16=%d\n", (long long)*(int64_t *)params[5], (long long)*(int64_t *)params[6],
                dptr(params[9]) != NULL);
    } else { /* swiglu_quant: g u ld xq xs y yb m n recipe in_bf16; swiglu_ld: g u ld y yb m n in_bf16 */
        const long long gate = (long long)*(CUdeviceptr *)params[0], up = (long long)*(CUdeviceptr *)params[1];
        const int im = quant ? 7 : 5, in = quant ? 8 : 6, ib = quant ? 10 : 7;
        fprintf(fp, "%s m=%lld n=%lld ld=%lld up_off=%lld in_bf16=%d\n", fn->entry, (long long)*(int64_t *)params[im],
                (long long)*(int64_t *)params[in], (long long)*(int64_t *)params[2], up - gate, *(int32_t *)params[ib]);
    }
    fclose(fp);
}

EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, void *st, void **params, void **extra) {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)st, (void)extra;
    fake_fn *fn = f;
    log_launch(fn, params);
    const char *mode = getenv("FAKE_CUDA_LINEAR");
    if (strcmp(fn->entry, "qc_fp8_quant_act_token") == 0) return fp8_quant_token(params);
    if (strcmp(fn->entry, "qc_fp8_gemm_channel_wgmma") == 0 || strcmp(fn->entry, "qc_fp8_gemv_channel") == 0) {
        if (mode && strcmp(mode, "skip") == 0) return OK;
        uint16_t *yb = strcmp(fn->entry, "qc_fp8_gemm_channel_wgmma") == 0 ? dptr(params[9]) : NULL;
        return fp8_gemm_channel(params, yb, mode && strcmp(mode, "wrong") == 0, mode && strcmp(mode, "both") == 0);
    }
    if (strncmp(fn->entry, "qc_bf16_linear", 14) != 0) return OK;
    if (mode && strcmp(mode, "skip") == 0) return OK;
    const float *x = (const float *)(uintptr_t) * (CUdeviceptr *)params[0];
    /* kernels fed bf16 activations ("x.bf16"): the gemv_bx and the wgmma GEMM */
    int xbf = strstr(fn->entry, "_bx") != NULL || strstr(fn->entry, "wgmma") != NULL;
    const uint16_t *xb = (const uint16_t *)x;
    const uint16_t *w = (const uint16_t *)(uintptr_t) * (CUdeviceptr *)params[1];
    float *y = (float *)(uintptr_t) * (CUdeviceptr *)params[2];
    int64_t m = *(int64_t *)params[3], n = *(int64_t *)params[4], k = *(int64_t *)params[5];
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0;
            for (int64_t t = 0; t < k; t++) {
                uint32_t u = (uint32_t)w[j * k + t] << 16;
                float wv;
                memcpy(&wv, &u, 4);
                float xv;
                if (xbf) {
                    uint32_t ux = (uint32_t)xb[i * k + t] << 16;
                    memcpy(&xv, &ux, 4);
                } else {
                    xv = bf16_round(x[i * k + t]);
                }
                acc += xv * wv;
            }
            y[i * n + j] = acc;
        }
    if (mode && strcmp(mode, "wrong") == 0 && m * n > 0) y[0] += 1.0f;
    return OK;
}

/* tensor maps (TMA): accepted, never read by the fake launches */
EXPORT CUresult cuTensorMapEncodeTiled(void *map, int dt, unsigned rank, void *addr, const uint64_t *dims,
                                       const uint64_t *strides, const uint32_t *box, const uint32_t *estr, int il,
                                       int sw, int l2, int oob) {
    (void)dt, (void)rank, (void)addr, (void)dims, (void)strides, (void)box, (void)estr, (void)il, (void)sw, (void)l2,
        (void)oob;
    memset(map, 0, 128);
    return OK;
}

typedef struct fake_event {
    double t;
} fake_event;
EXPORT CUresult cuEventCreate(void **e, unsigned f) {
    (void)f;
    *e = calloc(1, sizeof(fake_event));
    return *e ? OK : ERR_OOM;
}
EXPORT CUresult cuEventDestroy_v2(void *e) { free(e); return OK; }
EXPORT CUresult cuEventRecord(void *e, void *s) {
    (void)s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ((fake_event *)e)->t = ts.tv_sec + ts.tv_nsec * 1e-9;
    return OK;
}
EXPORT CUresult cuEventSynchronize(void *e) { (void)e; return OK; }
EXPORT CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) {
    *ms = (float)((((fake_event *)b)->t - ((fake_event *)a)->t) * 1e3);
    return OK;
}
