/* qc_gpu.c - the CUDA backend: driver API opened with dlopen, one stream, a memory ledger, module cache, launches. */
#define _GNU_SOURCE
#include "qc_gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "qc_internal.h"

/* Driver API subset, declared here so that no CUDA header is needed to build. */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

#define CU_ATTR_SM_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define CU_ATTR_SMEM_OPTIN 97
#define CU_STREAM_NON_BLOCKING 1u
#define CU_FUNC_ATTR_MAX_DYNAMIC_SMEM 8
#define CU_FUNC_ATTR_PREFERRED_CARVEOUT 9
/* a block gets this much dynamic shared memory without opting in */
#define SMEM_OPTIN_FROM (16u * 1024u)

/* cuLaunchKernelEx's configuration (cuda.h since CUDA 12.0; the attribute value is a 64-byte union) */
typedef struct cu_launch_attr {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int i;
    } value;
} cu_launch_attr;
typedef struct cu_launch_config {
    unsigned grid[3], block[3], smem;
    CUstream stream;
    cu_launch_attr *attrs;
    unsigned n_attrs;
} cu_launch_config;
typedef CUresult (*cu_launch_ex_fn)(const cu_launch_config *, CUfunction, void **, void **);
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

typedef struct cu_api {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
} cu_api;

/* The exported names behind cuda.h's macros (the _v2 entry points are the
 * ones its current API uses), with an older fallback where one exists. */
static const struct {
    size_t offset;
    const char *name, *fallback;
} SYMBOLS[] = {
#define SYM(field, name, fallback) {offsetof(cu_api, field), name, fallback}
    SYM(cuInit, "cuInit", NULL),
    SYM(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    SYM(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    SYM(cuDeviceGet, "cuDeviceGet", NULL),
    SYM(cuDeviceGetName, "cuDeviceGetName", NULL),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
    SYM(cuGetErrorString, "cuGetErrorString", NULL),
    SYM(cuGetErrorName, "cuGetErrorName", NULL),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent", NULL),
    SYM(cuStreamCreate, "cuStreamCreate", NULL),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2", NULL),
    SYM(cuStreamSynchronize, "cuStreamSynchronize", NULL),
    SYM(cuMemGetInfo, "cuMemGetInfo_v2", NULL),
    SYM(cuMemAlloc, "cuMemAlloc_v2", NULL),
    SYM(cuMemFree, "cuMemFree_v2", NULL),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL),
    SYM(cuMemsetD32Async, "cuMemsetD32Async", NULL),
    SYM(cuModuleLoadData, "cuModuleLoadData", NULL),
    SYM(cuModuleUnload, "cuModuleUnload", NULL),
    SYM(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    SYM(cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    SYM(cuLaunchKernel, "cuLaunchKernel", NULL),
    SYM(cuEventCreate, "cuEventCreate", NULL),
    SYM(cuEventDestroy, "cuEventDestroy_v2", NULL),
    SYM(cuEventRecord, "cuEventRecord", NULL),
    SYM(cuEventSynchronize, "cuEventSynchronize", NULL),
    SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
#undef SYM
};

typedef struct live_alloc {
    qc_devptr ptr;
    size_t logical, resident;
    qc_mem_category cat;
    char what[64];
} live_alloc;

typedef struct module_rec {
    char key[65];
    CUmodule mod;
} module_rec;

typedef struct function_rec {
    char key[65];
    char *entry;
    CUfunction fn;
    const qc_kernel_desc *desc; /* what qc_gpu_kernel_load loaded it for (launch hooks), or NULL */
    unsigned smem_optin; /* dynamic shared memory already opted in for (cuFuncSetAttribute), bytes */
} function_rec;

struct qc_gpu {
    cu_api cu;
    void *dl;           /* the driver library (never closed) */
    qc_gpu_info info;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    pthread_mutex_t mu; /* guards the ledger, the live list and the caches */
    qc_gpu_ledger_row rows[QC_MEM_COUNT_ + 1]; /* the last row holds the totals */
    live_alloc *live;
    size_t n_live, cap_live;
    module_rec *mods;
    size_t n_mods, cap_mods;
    function_rec *fns;
    size_t n_fns, cap_fns;
    qc_gpu_launch_hook hook;
    void *hook_ctx;
    uint64_t launches;
    cu_launch_ex_fn launch_ex; /* set: QC_KERNEL_GRID_DEP kernels launch with programmatic serialization */
    int carveout;              /* QC_SMEM_CARVEOUT (0..100) read at open, or -1: the driver's choice */
};

/* ---- errors ---- */

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
static void cu_describe(const cu_api *cu, CUresult r, char *buf, size_t len) {
    const char *name = NULL, *text = NULL;
    if (cu->cuGetErrorName && cu->cuGetErrorName(r, &name) != 0) name = NULL;
    if (cu->cuGetErrorString && cu->cuGetErrorString(r, &text) != 0) text = NULL;
    if (name && text)
        qc_errf(buf, len, "%s (%s)", name, text);
    else
        qc_errf(buf, len, "CUDA error %d", r);
}

/* 0 when r is success; else err = "<what>: <error>" and -1. */
__attribute__((format(printf, 5, 6))) static int cu_fail(const qc_gpu *g, CUresult r, char *err, size_t errlen,
                                                         const char *fmt, ...) {
    if (r == 0) return 0;
    char what[256], desc[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cu_describe(&g->cu, r, desc, sizeof desc);
    qc_errf(err, errlen, "%s: %s", what, desc);
    return -1;
}

/* Make the context current on this thread: every entry point does this, so
 * any thread may use the context. */
static int bind_ctx(qc_gpu *g, char *err, size_t errlen) {
    if (!g) {
        qc_errf(err, errlen, "no GPU context (qc_gpu_open failed or was not called)");
        return -1;
    }
    return cu_fail(g, g->cu.cuCtxSetCurrent(g->ctx), err, errlen, "cuCtxSetCurrent");
}

static void human_bytes(size_t b, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        qc_errf(buf, len, "%zu B", b);
    else
        qc_errf(buf, len, "%.2f %s", v, units[u]);
}

/* ---- open and close ---- */

static void *open_driver(char *err, size_t errlen) {
    const char *forced = getenv("QCORE_CUDA_LIBRARY");
    const char *name = forced && *forced ? forced : "libcuda.so.1";
    /* never dlclose()d: the driver does not expect to be unloaded */
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        qc_errf(err, errlen, "no CUDA driver: %s%s cannot be opened (%s): the GPU backend is unavailable", name,
                forced && *forced ? " (QCORE_CUDA_LIBRARY)" : "", why ? why : "unknown error");
    }
    return h;
}

qc_gpu *qc_gpu_open(int device, char *err, size_t errlen) {
    void *h = open_driver(err, errlen);
    if (!h) return NULL;
    qc_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < sizeof SYMBOLS / sizeof SYMBOLS[0]; i++) {
        void *p = dlsym(h, SYMBOLS[i].name);
        if (!p && SYMBOLS[i].fallback) p = dlsym(h, SYMBOLS[i].fallback);
        if (!p) {
            qc_errf(err, errlen, "the CUDA driver library lacks %s (a driver older than CUDA 11?): the GPU backend "
                    "is unavailable", SYMBOLS[i].name);
            free(g);
            return NULL;
        }
        memcpy((char *)&g->cu + SYMBOLS[i].offset, &p, sizeof p);
    }
    g->dl = h;
    cu_api *cu = &g->cu;
    int count = 0, major = 0, minor = 0, v = 0;
    if (cu_fail(g, cu->cuInit(0), err, errlen, "cuInit failed (no usable GPU)") ||
        cu_fail(g, cu->cuDeviceGetCount(&count), err, errlen, "cuDeviceGetCount"))
        goto fail;
    if (device < 0 || device >= count) {
        qc_errf(err, errlen, "no CUDA device %d (%d visible)", device, count);
        goto fail;
    }
    g->info.device = device;
    if (cu_fail(g, cu->cuDeviceGet(&g->dev, device), err, errlen, "cuDeviceGet(%d)", device) ||
        cu_fail(g, cu->cuDeviceGetName(g->info.name, sizeof g->info.name, g->dev), err, errlen, "cuDeviceGetName") ||
        cu_fail(g, cu->cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, g->dev), err, errlen, "compute capability") ||
        cu_fail(g, cu->cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, g->dev), err, errlen, "compute capability") ||
        cu_fail(g, cu->cuDeviceGetAttribute(&g->info.sm_count, CU_ATTR_SM_COUNT, g->dev), err, errlen, "SM count") ||
        cu_fail(g, cu->cuDeviceGetAttribute(&v, CU_ATTR_SMEM_OPTIN, g->dev), err, errlen, "shared memory limit") ||
        cu_fail(g, cu->cuDeviceTotalMem(&g->info.mem_total, g->dev), err, errlen, "cuDeviceTotalMem") ||
        cu_fail(g, cu->cuDriverGetVersion(&g->info.driver_version), err, errlen, "cuDriverGetVersion"))
        goto fail;
    g->info.sm = major * 10 + minor;
    g->info.smem_optin = v > 0 ? (size_t)v : 0;
    if (cu_fail(g, cu->cuDevicePrimaryCtxRetain(&g->ctx, g->dev), err, errlen, "cuDevicePrimaryCtxRetain"))
        goto fail;
    if (cu_fail(g, cu->cuCtxSetCurrent(g->ctx), err, errlen, "cuCtxSetCurrent") ||
        cu_fail(g, cu->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING), err, errlen, "cuStreamCreate")) {
        cu->cuDevicePrimaryCtxRelease(g->dev);
        goto fail;
    }
    /* QC_SMEM_CARVEOUT=0..100 (A/B runs): every loaded function's preferred shared-memory share of the
     * L1/shared array, so that kernels of different shared-memory needs run back to back without the SM changing
     * its split between them; unset leaves the driver's choice */
    g->carveout = -1;
    const char *cv = getenv("QC_SMEM_CARVEOUT");
    if (cv && *cv) {
        char *end = NULL;
        long c = strtol(cv, &end, 10);
        if (*end || c < 0 || c > 100)
            qc_log(QC_LOG_WARN, "QC_SMEM_CARVEOUT='%s' is not 0..100: ignored", cv);
        else
            g->carveout = (int)c;
    }
    pthread_mutex_init(&g->mu, NULL);
    return g;
fail:
    free(g);
    return NULL;
}

void qc_gpu_close(qc_gpu *g) {
    char err[256];
    if (!g) return;
    if (bind_ctx(g, err, sizeof err) != 0) qc_log(QC_LOG_WARN, "qc_gpu_close: %s", err);
    g->cu.cuStreamSynchronize(g->stream);
    if (g->n_live) {
        char total[32];
        human_bytes(g->rows[QC_MEM_COUNT_].resident, total, sizeof total);
        qc_log(QC_LOG_WARN, "GPU context closed with %zu allocations (%s) still live, e.g. '%s': freeing them",
               g->n_live, total, g->live[0].what);
    }
    for (size_t i = 0; i < g->n_live; i++) g->cu.cuMemFree(g->live[i].ptr);
    for (size_t i = 0; i < g->n_mods; i++) g->cu.cuModuleUnload(g->mods[i].mod);
    for (size_t i = 0; i < g->n_fns; i++) free(g->fns[i].entry);
    g->cu.cuStreamDestroy(g->stream);
    g->cu.cuDevicePrimaryCtxRelease(g->dev);
    pthread_mutex_destroy(&g->mu);
    free(g->live);
    free(g->mods);
    free(g->fns);
    free(g);
}

const qc_gpu_info *qc_gpu_get_info(const qc_gpu *g) { return g ? &g->info : NULL; }

qc_status qc_gpu_mem_info(qc_gpu *g, size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen) {
    size_t f = 0, t = 0;
    if (bind_ctx(g, err, errlen) || cu_fail(g, g->cu.cuMemGetInfo(&f, &t), err, errlen, "cuMemGetInfo"))
        return QC_ERR_INTERNAL;
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return QC_OK;
}

/* ---- memory and the ledger ---- */

static void book(qc_gpu *g, qc_mem_category cat, size_t logical, size_t resident, int sign) {
    qc_gpu_ledger_row *rows[2] = {&g->rows[cat], &g->rows[QC_MEM_COUNT_]};
    for (int i = 0; i < 2; i++) {
        qc_gpu_ledger_row *r = rows[i];
        if (sign > 0) {
            r->count++;
            r->logical += logical;
            r->resident += resident;
            if (r->resident > r->peak_resident) r->peak_resident = r->resident;
        } else {
            r->count--;
            r->logical -= logical;
            r->resident -= resident;
        }
    }
}

/* The refusal message: what, its category, the sizes asked and free. */
static void no_room(qc_gpu *g, const char *verb, const char *what, qc_mem_category cat, size_t logical,
                    size_t resident, size_t free_b, size_t total_b, const char *cause, char *err, size_t errlen) {
    char ask[32], fr[32], tot[32], lg[32];
    human_bytes(resident, ask, sizeof ask);
    human_bytes(logical, lg, sizeof lg);
    human_bytes(free_b, fr, sizeof fr);
    human_bytes(total_b, tot, sizeof tot);
    qc_errf(err, errlen,
            "GPU allocation %s: %s (%s) asks %zu bytes (%s) resident for %zu logical (%s), device %d (%s) has "
            "%zu bytes (%s) free of %s%s%s",
            verb, what, qc_mem_category_name(cat), resident, ask, logical, lg, g->info.device, g->info.name, free_b,
            fr, tot, cause ? ": " : "", cause ? cause : "");
}

qc_status qc_gpu_alloc(qc_gpu *g, size_t logical, size_t resident, qc_mem_category cat, const char *what,
                       qc_gpu_buf *out, char *err, size_t errlen) {
    if (!out) {
        qc_errf(err, errlen, "qc_gpu_alloc: no output buffer");
        return QC_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    if (!what || !*what) what = "(unnamed)";
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if ((unsigned)cat >= QC_MEM_COUNT_) {
        qc_errf(err, errlen, "GPU allocation of %s: unknown memory category %d", what, (int)cat);
        return QC_ERR_INVALID;
    }
    if (resident == 0 || logical > resident) {
        qc_errf(err, errlen, "GPU allocation of %s: %zu logical bytes in %zu resident (resident must be non-zero "
                "and at least the logical size)", what, logical, resident);
        return QC_ERR_INVALID;
    }
    size_t free_b = 0, total_b = 0;
    if (cu_fail(g, g->cu.cuMemGetInfo(&free_b, &total_b), err, errlen, "GPU allocation of %s: cuMemGetInfo", what))
        return QC_ERR_INTERNAL;
    /* refuse up front: the driver's own failure would come after a partial
     * reservation, and this message says what did not fit */
    if (resident > free_b) {
        no_room(g, "refused", what, cat, logical, resident, free_b, total_b, NULL, err, errlen);
        return QC_ERR_NOMEM;
    }
    CUdeviceptr p = 0;
    CUresult r = g->cu.cuMemAlloc(&p, resident);
    if (r != 0) {
        char cause[200], desc[160];
        cu_describe(&g->cu, r, desc, sizeof desc);
        qc_errf(cause, sizeof cause, "cuMemAlloc: %s", desc);
        g->cu.cuMemGetInfo(&free_b, &total_b);
        no_room(g, "failed", what, cat, logical, resident, free_b, total_b, cause, err, errlen);
        return QC_ERR_NOMEM;
    }
    pthread_mutex_lock(&g->mu);
    if (qc_grow((void **)&g->live, &g->cap_live, g->n_live, sizeof *g->live)) {
        pthread_mutex_unlock(&g->mu);
        g->cu.cuMemFree(p);
        qc_errf(err, errlen, "GPU allocation of %s: out of host memory for the ledger", what);
        return QC_ERR_NOMEM;
    }
    live_alloc *a = &g->live[g->n_live++];
    a->ptr = p;
    a->logical = logical;
    a->resident = resident;
    a->cat = cat;
    qc_strlcpy(a->what, what, sizeof a->what);
    book(g, cat, logical, resident, +1);
    pthread_mutex_unlock(&g->mu);
    out->ptr = p;
    out->logical = logical;
    out->resident = resident;
    out->category = cat;
    return QC_OK;
}

void qc_gpu_free(qc_gpu *g, qc_gpu_buf *b) {
    char err[256];
    if (!b || !b->ptr) return;
    if (bind_ctx(g, err, sizeof err)) {
        qc_log(QC_LOG_WARN, "qc_gpu_free: %s", err);
        return;
    }
    pthread_mutex_lock(&g->mu);
    size_t i = 0;
    while (i < g->n_live && g->live[i].ptr != b->ptr) i++;
    if (i == g->n_live) {
        pthread_mutex_unlock(&g->mu);
        qc_log(QC_LOG_WARN, "qc_gpu_free: device address 0x%llx was not allocated by this context (freed twice?); "
               "left alone", (unsigned long long)b->ptr);
        return;
    }
    live_alloc a = g->live[i];
    g->live[i] = g->live[--g->n_live];
    book(g, a.cat, a.logical, a.resident, -1);
    pthread_mutex_unlock(&g->mu);
    if (cu_fail(g, g->cu.cuMemFree(a.ptr), err, sizeof err, "cuMemFree of %s", a.what))
        qc_log(QC_LOG_WARN, "%s", err);
    memset(b, 0, sizeof *b);
}

qc_gpu_ledger_row qc_gpu_ledger_get(qc_gpu *g, qc_mem_category cat) {
    qc_gpu_ledger_row r = {0, 0, 0, 0};
    if (!g || (unsigned)cat > QC_MEM_COUNT_) return r;
    pthread_mutex_lock(&g->mu);
    r = g->rows[cat];
    pthread_mutex_unlock(&g->mu);
    return r;
}

void qc_gpu_ledger_print(qc_gpu *g, FILE *f) {
    if (!f) return;
    if (!g) {
        fprintf(f, "GPU memory ledger: no GPU context\n");
        return;
    }
    qc_gpu_ledger_row rows[QC_MEM_COUNT_ + 1];
    pthread_mutex_lock(&g->mu);
    memcpy(rows, g->rows, sizeof rows);
    pthread_mutex_unlock(&g->mu);
    char tot[32], fr[32], err[256];
    size_t free_b = 0, total_b = 0;
    human_bytes(g->info.mem_total, tot, sizeof tot);
    if (qc_gpu_mem_info(g, &free_b, &total_b, err, sizeof err) == QC_OK)
        human_bytes(free_b, fr, sizeof fr);
    else
        qc_strlcpy(fr, "unknown", sizeof fr);
    fprintf(f, "GPU memory ledger: device %d (%s), %s total, %s free\n", g->info.device, g->info.name, tot, fr);
    fprintf(f, "  %-12s %7s %14s %14s %14s %14s\n", "category", "allocs", "logical", "resident", "padding",
            "peak resident");
    for (int c = 0; c <= QC_MEM_COUNT_; c++) {
        char lg[32], rs[32], pad[32], peak[32];
        human_bytes(rows[c].logical, lg, sizeof lg);
        human_bytes(rows[c].resident, rs, sizeof rs);
        human_bytes(rows[c].resident - rows[c].logical, pad, sizeof pad);
        human_bytes(rows[c].peak_resident, peak, sizeof peak);
        fprintf(f, "  %-12s %7zu %14s %14s %14s %14s\n",
                c == QC_MEM_COUNT_ ? "total" : qc_mem_category_name((qc_mem_category)c), rows[c].count, lg, rs, pad,
                peak);
    }
}

/* ---- copies ---- */

qc_status qc_gpu_upload(qc_gpu *g, qc_devptr dst, const void *src, size_t bytes, char *err, size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!bytes) return QC_OK;
    /* from pageable memory the call returns once src has been staged, so the
     * caller may reuse it at once */
    if (cu_fail(g, g->cu.cuMemcpyHtoDAsync(dst, src, bytes, g->stream), err, errlen, "upload of %zu bytes", bytes))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_download(qc_gpu *g, void *dst, qc_devptr src, size_t bytes, char *err, size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!bytes) return QC_OK;
    if (cu_fail(g, g->cu.cuMemcpyDtoHAsync(dst, src, bytes, g->stream), err, errlen, "download of %zu bytes",
                bytes) ||
        cu_fail(g, g->cu.cuStreamSynchronize(g->stream), err, errlen, "download of %zu bytes: stream", bytes))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_memset32(qc_gpu *g, qc_devptr dst, uint32_t value, size_t count, char *err, size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!count) return QC_OK;
    if (cu_fail(g, g->cu.cuMemsetD32Async(dst, value, count, g->stream), err, errlen, "memset of %zu words", count))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_sync(qc_gpu *g, char *err, size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (cu_fail(g, g->cu.cuStreamSynchronize(g->stream), err, errlen, "stream synchronize")) return QC_ERR_INTERNAL;
    return QC_OK;
}

/* ---- modules and launches ---- */

qc_status qc_gpu_module_load(qc_gpu *g, const qc_cubin *c, const char *entry, qc_gpu_fn *fn, char *err,
                             size_t errlen) {
    if (fn) *fn = NULL;
    if (!c || !c->data || !c->size || !entry || !*entry || !fn) {
        qc_errf(err, errlen, "qc_gpu_module_load: no cubin, entry or output");
        return QC_ERR_INVALID;
    }
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    qc_status st = QC_OK;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n_fns; i++)
        if (strcmp(g->fns[i].key, c->key) == 0 && strcmp(g->fns[i].entry, entry) == 0) {
            *fn = (qc_gpu_fn)(void *)g->fns[i].fn;
            goto out;
        }
    CUmodule mod = NULL;
    for (size_t i = 0; i < g->n_mods && !mod; i++)
        if (strcmp(g->mods[i].key, c->key) == 0) mod = g->mods[i].mod;
    if (!mod) {
        if (qc_grow((void **)&g->mods, &g->cap_mods, g->n_mods, sizeof *g->mods)) {
            qc_errf(err, errlen, "out of memory");
            st = QC_ERR_NOMEM;
            goto out;
        }
        if (cu_fail(g, g->cu.cuModuleLoadData(&mod, c->data), err, errlen, "cuModuleLoadData (%s cubin %.12s)",
                    c->target, c->key)) {
            st = QC_ERR_UNSUPPORTED;
            goto out;
        }
        qc_strlcpy(g->mods[g->n_mods].key, c->key, sizeof g->mods[0].key);
        g->mods[g->n_mods++].mod = mod;
    }
    CUfunction f = NULL;
    if (cu_fail(g, g->cu.cuModuleGetFunction(&f, mod, entry), err, errlen, "cuModuleGetFunction(%s)", entry)) {
        st = QC_ERR_UNSUPPORTED;
        goto out;
    }
    char *e = strdup(entry);
    if (!e || qc_grow((void **)&g->fns, &g->cap_fns, g->n_fns, sizeof *g->fns)) {
        free(e);
        qc_errf(err, errlen, "out of memory");
        st = QC_ERR_NOMEM;
        goto out;
    }
    function_rec *r = &g->fns[g->n_fns++];
    qc_strlcpy(r->key, c->key, sizeof r->key);
    r->entry = e;
    r->fn = f;
    r->desc = NULL;
    r->smem_optin = 0;
    /* the carveout of QC_SMEM_CARVEOUT (read at open); a hint: a failure is only logged */
    if (g->carveout >= 0 && g->cu.cuFuncSetAttribute(f, CU_FUNC_ATTR_PREFERRED_CARVEOUT, g->carveout) != 0)
        qc_log(QC_LOG_WARN, "%s: the shared-memory carveout hint %d%% was refused", entry, g->carveout);
    *fn = (qc_gpu_fn)(void *)f;
out:
    pthread_mutex_unlock(&g->mu);
    return st;
}

qc_status qc_gpu_kernel_load(qc_gpu *g, qc_nvrtc *nv, const qc_kernel_desc *k, qc_gpu_fn *fn, qc_reason *why) {
    qc_reason scratch;
    if (!why) why = &scratch;
    memset(why, 0, sizeof *why);
    if (fn) *fn = NULL;
    if (!g || !nv || !k || !fn) {
        qc_reason_set(why, "invalid", "qc_gpu_kernel_load: %s", !g ? "no GPU context" : !nv ? "no NVRTC" : "no kernel");
        return QC_ERR_INVALID;
    }
    if (!k->cuda_source || !k->cuda_entry) {
        qc_reason_set(why, "missing", "%s has no CUDA version", k->id);
        return QC_ERR_UNSUPPORTED;
    }
    uint32_t sm = (uint32_t)g->info.sm;
    if (sm < k->arch.min_sm || sm > k->arch.max_sm) {
        char r[32];
        qc_arch_range_str(k->arch, r, sizeof r);
        qc_reason_set(why, "arch", "%s needs %s, device is sm_%u", k->id, r, sm);
        return QC_ERR_UNSUPPORTED;
    }
    qc_cubin c;
    /* the arch-specific target (sm_90a) runs only on its own arch, which is
     * exactly this device, and lets kernels use wgmma and the like */
    qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, k->nvrtc_options, (int)sm, sm >= 90,
                                    &c, why);
    if (st != QC_OK) return st;
    char err[QC_REASON_TEXT_MAX];
    st = qc_gpu_module_load(g, &c, k->cuda_entry, fn, err, sizeof err);
    if (st != QC_OK) qc_reason_set(why, "load", "%s: %s", k->id, err);
    if (st == QC_OK) { /* remember which kernel this function is, for launch hooks */
        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < g->n_fns; i++)
            if ((void *)g->fns[i].fn == (void *)*fn && !g->fns[i].desc) g->fns[i].desc = k;
        pthread_mutex_unlock(&g->mu);
    }
    qc_cubin_free(&c);
    return st;
}

/* The dynamic shared-memory opt-in of f for `bytes`, asked of the driver once
 * per function and size (the largest so far is remembered; a function the
 * cache does not hold is asked every time; on the H200 asking before every
 * launch cost no GPU time, this saves the host a driver call per launch).
 * Nonzero (err set) on failure. */
static int smem_optin(qc_gpu *g, CUfunction f, unsigned bytes, char *err, size_t errlen) {
    size_t i = 0; /* the record's index (records are only appended, so it stays valid unlocked) */
    pthread_mutex_lock(&g->mu);
    while (i < g->n_fns && g->fns[i].fn != f) i++;
    const int known = i < g->n_fns, done = known && g->fns[i].smem_optin >= bytes;
    pthread_mutex_unlock(&g->mu);
    if (done) return 0;
    if (cu_fail(g, g->cu.cuFuncSetAttribute(f, CU_FUNC_ATTR_MAX_DYNAMIC_SMEM, (int)bytes), err, errlen,
                "%u bytes of dynamic shared memory (device allows %zu)", bytes, g->info.smem_optin))
        return 1;
    pthread_mutex_lock(&g->mu);
    if (known && g->fns[i].smem_optin < bytes) g->fns[i].smem_optin = bytes;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* qc_gpu_launch with the kernel's descriptor when the caller has it (k may be NULL: looked up for the hook and
 * for programmatic launch, which then need it) */
static qc_status launch_fn(qc_gpu *g, const qc_kernel_desc *k, qc_gpu_fn fn, const qc_launch_dims *d, void **argv,
                           char *err, size_t errlen) {
    if (!fn || !d) {
        qc_errf(err, errlen, "qc_gpu_launch: no function or launch dimensions");
        return QC_ERR_INVALID;
    }
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!d->block[0] || !d->block[1] || !d->block[2]) {
        qc_errf(err, errlen, "qc_gpu_launch: empty block %ux%ux%u", d->block[0], d->block[1], d->block[2]);
        return QC_ERR_INVALID;
    }
    /* an empty grid is a problem with no rows: nothing to do */
    if (!d->grid[0] || !d->grid[1] || !d->grid[2]) return QC_OK;
    CUfunction f = (CUfunction)(void *)fn;
    const qc_kernel_desc *hk = NULL; /* what the function was loaded for (the hook's argument) */
    if (g->hook || (g->launch_ex && !k)) {
        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < g->n_fns && !hk; i++)
            if (g->fns[i].fn == f) hk = g->fns[i].desc;
        pthread_mutex_unlock(&g->mu);
        if (g->hook) g->hook(g->hook_ctx, hk, argv, d, 0);
    }
    /* the 48 KiB default bounds static + dynamic shared memory together, so a kernel with static shared memory
     * needs the opt-in below 48 KiB of dynamic: asked for from 16 KiB on (one cheap driver call) */
    if (d->shared_bytes > SMEM_OPTIN_FROM && smem_optin(g, f, d->shared_bytes, err, errlen))
        return QC_ERR_UNSUPPORTED;
    CUresult r;
    const int early = g->launch_ex && qc_kernel_grid_dep(k ? k : hk);
    if (early) {
        /* the kernel waits for its predecessors itself (griddepcontrol.wait): its blocks may start early */
        cu_launch_attr a;
        memset(&a, 0, sizeof a);
        a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        a.value.i = 1;
        cu_launch_config c = {{d->grid[0], d->grid[1], d->grid[2]}, {d->block[0], d->block[1], d->block[2]},
                              d->shared_bytes, g->stream, &a, 1};
        r = g->launch_ex(&c, f, argv, NULL);
    } else {
        r = g->cu.cuLaunchKernel(f, d->grid[0], d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2],
                                 d->shared_bytes, g->stream, argv, NULL);
    }
    if (cu_fail(g, r, err, errlen, "%s (grid %ux%ux%u, block %ux%ux%u, %u B shared)",
                early ? "cuLaunchKernelEx" : "cuLaunchKernel", d->grid[0],
                d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2], d->shared_bytes))
        return QC_ERR_INTERNAL;
    g->launches++;
    if (g->hook) g->hook(g->hook_ctx, hk, argv, d, 1);
    return QC_OK;
}

qc_status qc_gpu_launch(qc_gpu *g, qc_gpu_fn fn, const qc_launch_dims *d, void **argv, char *err, size_t errlen) {
    return launch_fn(g, NULL, fn, d, argv, err, errlen);
}

int qc_kernel_grid_dep(const qc_kernel_desc *k) {
    return k && k->struct_size >= offsetof(qc_kernel_desc, flags) + sizeof k->flags && (k->flags & QC_KERNEL_GRID_DEP);
}

int qc_gpu_set_grid_dep(qc_gpu *g, int on) {
    if (!g) return 0;
    g->launch_ex = NULL;
    /* griddepcontrol is sm_90's; the driver entry point is CUDA 12.0's */
    if (on && g->info.sm >= 90) g->launch_ex = (cu_launch_ex_fn)qc_gpu_driver_symbol(g, "cuLaunchKernelEx");
    return g->launch_ex != NULL;
}

void qc_gpu_set_launch_hook(qc_gpu *g, qc_gpu_launch_hook hook, void *ctx) {
    if (!g) return;
    g->hook = hook;
    g->hook_ctx = ctx;
}

uint64_t qc_gpu_launch_count(const qc_gpu *g) { return g ? g->launches : 0; }

/* ---- launches with TMA tensor maps ---- */

/* cuda.h's CUtensorMap: an opaque 128-byte object the driver wants 64-byte
 * aligned, and the enum values cuTensorMapEncodeTiled takes. */
typedef struct cu_tensor_map {
    _Alignas(64) uint64_t opaque[16];
} cu_tensor_map;
_Static_assert(sizeof(cu_tensor_map) == 128, "CUtensorMap is 128 bytes");
enum {
    CU_TMAP_UINT8 = 0, CU_TMAP_INT32 = 3, CU_TMAP_INT64 = 5, CU_TMAP_FLOAT16 = 6, CU_TMAP_FLOAT32 = 7,
    CU_TMAP_FLOAT64 = 8, CU_TMAP_BFLOAT16 = 9
};
#define CU_TMAP_INTERLEAVE_NONE 0
#define CU_TMAP_L2_PROMOTION_256B 3
#define CU_TMAP_OOB_FILL_NONE 0 /* out-of-bounds elements read as zero */
typedef CUresult (*cu_tmap_encode_tiled_fn)(cu_tensor_map *, int, uint32_t, void *, const uint64_t *,
                                            const uint64_t *, const uint32_t *, const uint32_t *, int, int, int, int);
#define QC_MAX_TENSOR_MAPS 8
static void *need_symbol(qc_gpu *g, const char *name, char *err, size_t errlen);

static int tmap_dtype(qc_dtype t) {
    switch (t) {
    case QC_DT_F32: return CU_TMAP_FLOAT32;
    case QC_DT_F16: return CU_TMAP_FLOAT16;
    case QC_DT_BF16: return CU_TMAP_BFLOAT16;
    case QC_DT_F64: return CU_TMAP_FLOAT64;
    case QC_DT_I32: return CU_TMAP_INT32;
    case QC_DT_I64: return CU_TMAP_INT64;
    case QC_DT_I8: case QC_DT_U8: case QC_DT_F8_E4M3: case QC_DT_F8_E5M2: case QC_DT_E8M0: return CU_TMAP_UINT8;
    default: return -1;
    }
}

size_t qc_tensor_map_elem_bytes(qc_dtype t) {
    switch (tmap_dtype(t)) {
    case CU_TMAP_UINT8: return 1;
    case CU_TMAP_FLOAT16: case CU_TMAP_BFLOAT16: return 2;
    case CU_TMAP_FLOAT32: case CU_TMAP_INT32: return 4;
    case CU_TMAP_FLOAT64: case CU_TMAP_INT64: return 8;
    default: return 0;
    }
}

static int param_index(const qc_kernel_desc *k, const char *name) {
    for (uint32_t i = 0; name && i < k->n_params; i++)
        if (k->params[i].name && strcmp(k->params[i].name, name) == 0) return (int)i;
    return -1;
}

/* Build map `i` of `k` from the launch's arguments. */
static qc_status encode_map(qc_gpu *g, cu_tmap_encode_tiled_fn enc, const qc_kernel_desc *k, uint32_t i,
                            void **argv, cu_tensor_map *out, char *err, size_t errlen) {
    const qc_tensor_map_spec *t = &k->tensor_maps[i];
    int pi = param_index(k, t->param), ri = param_index(k, t->rows), ci = param_index(k, t->cols);
    if (pi < 0 || ri < 0 || ci < 0 || k->params[pi].type != QC_PARAM_PTR || k->params[ri].type != QC_PARAM_I64 ||
        k->params[ci].type != QC_PARAM_I64) {
        qc_errf(err, errlen, "%s: tensor map %u names '%s' [%s x %s], not a pointer and two I64 parameters", k->id, i,
                t->param ? t->param : "(null)", t->rows ? t->rows : "(null)", t->cols ? t->cols : "(null)");
        return QC_ERR_INVALID;
    }
    if (!argv[pi] || !argv[ri] || !argv[ci]) {
        qc_errf(err, errlen, "%s: tensor map of '%s': argument '%s', '%s' or '%s' is missing", k->id, t->param,
                t->param, t->rows, t->cols);
        return QC_ERR_INVALID;
    }
    qc_devptr ptr;
    int64_t rows, cols;
    memcpy(&ptr, argv[pi], sizeof ptr);
    memcpy(&rows, argv[ri], sizeof rows);
    memcpy(&cols, argv[ci], sizeof cols);
    int dt = tmap_dtype(t->dtype);
    size_t es = qc_tensor_map_elem_bytes(t->dtype);
    if (dt < 0 || rows < 1 || cols < 1 || rows > (1ll << 32) || cols > (1ll << 32) ||
        (uint64_t)cols * es >= (1ull << 40)) {
        qc_errf(err, errlen, "%s: tensor map of '%s' [%s=%lld x %s=%lld] of %s: not a shape a tensor map can hold "
                "(each side 1..2^32, a TMA element type)", k->id, t->param, t->rows, (long long)rows, t->cols,
                (long long)cols, qc_dtype_name(t->dtype));
        return QC_ERR_INVALID;
    }
    uint64_t dims[2] = {(uint64_t)cols, (uint64_t)rows}, strides[1] = {(uint64_t)cols * es};
    uint32_t box[2] = {t->box_cols, t->box_rows}, estr[2] = {1, 1};
    int sw = t->swizzle_bytes == 128 ? 3 : t->swizzle_bytes == 64 ? 2 : t->swizzle_bytes == 32 ? 1 : 0;
    memset(out, 0, sizeof *out);
    CUresult r = enc(out, dt, 2, (void *)(uintptr_t)ptr, dims, strides, box, estr, CU_TMAP_INTERLEAVE_NONE, sw,
                     CU_TMAP_L2_PROMOTION_256B, CU_TMAP_OOB_FILL_NONE);
    if (r != 0) {
        char desc[160];
        cu_describe(&g->cu, r, desc, sizeof desc);
        qc_errf(err, errlen, "%s: cuTensorMapEncodeTiled for '%s' (0x%llx, [%s=%lld x %s=%lld] %s, row stride %llu B, "
                "box %ux%u, swizzle %u B) failed: %s (the address and the row stride must be multiples of 16 B)",
                k->id, t->param, (unsigned long long)ptr, t->rows, (long long)rows, t->cols, (long long)cols,
                qc_dtype_name(t->dtype), (unsigned long long)strides[0], t->box_rows, t->box_cols, t->swizzle_bytes,
                desc);
        return QC_ERR_INVALID;
    }
    return QC_OK;
}

qc_status qc_gpu_launch_kernel(qc_gpu *g, const qc_kernel_desc *k, qc_gpu_fn fn, const qc_launch_dims *d,
                               void **argv, char *err, size_t errlen) {
    if (!k || !d) {
        qc_errf(err, errlen, "qc_gpu_launch_kernel: no kernel or launch dimensions");
        return QC_ERR_INVALID;
    }
    int has_maps = k->struct_size >= offsetof(qc_kernel_desc, tensor_maps) + sizeof k->tensor_maps &&
                   k->n_tensor_maps > 0;
    if (!has_maps || !d->grid[0] || !d->grid[1] || !d->grid[2]) return launch_fn(g, k, fn, d, argv, err, errlen);
    if (k->n_tensor_maps > QC_MAX_TENSOR_MAPS || !k->tensor_maps || k->n_params > 32) {
        qc_errf(err, errlen, "%s: %u tensor maps (at most %d) or %u params (at most 32)", k->id, k->n_tensor_maps,
                QC_MAX_TENSOR_MAPS, k->n_params);
        return QC_ERR_INVALID;
    }
    if (!argv) {
        qc_errf(err, errlen, "%s: no arguments", k->id);
        return QC_ERR_INVALID;
    }
    cu_tmap_encode_tiled_fn enc = (cu_tmap_encode_tiled_fn)need_symbol(g, "cuTensorMapEncodeTiled", err, errlen);
    if (!enc) return QC_ERR_UNSUPPORTED;
    /* cuLaunchKernel copies the parameters, so the maps may live on the stack */
    cu_tensor_map maps[QC_MAX_TENSOR_MAPS];
    void *all[32 + QC_MAX_TENSOR_MAPS];
    for (uint32_t i = 0; i < k->n_params; i++) all[i] = argv[i];
    for (uint32_t i = 0; i < k->n_tensor_maps; i++) {
        qc_status st = encode_map(g, enc, k, i, argv, &maps[i], err, errlen);
        if (st != QC_OK) return st;
        all[k->n_params + i] = &maps[i];
    }
    return launch_fn(g, k, fn, d, all, err, errlen);
}

/* ---- timing ---- */

qc_status qc_gpu_event_create(qc_gpu *g, qc_gpu_event *ev, char *err, size_t errlen) {
    CUevent e = NULL;
    if (ev) *ev = NULL;
    if (!ev) {
        qc_errf(err, errlen, "qc_gpu_event_create: no output");
        return QC_ERR_INVALID;
    }
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (cu_fail(g, g->cu.cuEventCreate(&e, 0), err, errlen, "cuEventCreate")) return QC_ERR_INTERNAL;
    *ev = (qc_gpu_event)(void *)e;
    return QC_OK;
}

void qc_gpu_event_destroy(qc_gpu *g, qc_gpu_event ev) {
    char err[256];
    if (!ev || bind_ctx(g, err, sizeof err)) return;
    g->cu.cuEventDestroy((CUevent)(void *)ev);
}

qc_status qc_gpu_event_record(qc_gpu *g, qc_gpu_event ev, char *err, size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!ev) {
        qc_errf(err, errlen, "qc_gpu_event_record: no event");
        return QC_ERR_INVALID;
    }
    if (cu_fail(g, g->cu.cuEventRecord((CUevent)(void *)ev, g->stream), err, errlen, "cuEventRecord"))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_event_elapsed(qc_gpu *g, qc_gpu_event start, qc_gpu_event end, float *ms, char *err,
                               size_t errlen) {
    if (bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (!start || !end || !ms) {
        qc_errf(err, errlen, "qc_gpu_event_elapsed: missing event or output");
        return QC_ERR_INVALID;
    }
    if (cu_fail(g, g->cu.cuEventSynchronize((CUevent)(void *)end), err, errlen, "cuEventSynchronize") ||
        cu_fail(g, g->cu.cuEventElapsedTime(ms, (CUevent)(void *)start, (CUevent)(void *)end), err, errlen,
                "cuEventElapsedTime"))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

/* ---- driver symbols, device copies, graphs ---- */

void *qc_gpu_driver_symbol(qc_gpu *g, const char *name) {
    return g && g->dl && name ? dlsym(g->dl, name) : NULL;
}

void *qc_gpu_stream(qc_gpu *g) {
    return g ? (void *)g->stream : NULL;
}

/* optional entry points, looked up when first used */
typedef CUresult (*cu_memcpy_dtod_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef CUresult (*cu_begin_capture_fn)(CUstream, int);
typedef CUresult (*cu_end_capture_fn)(CUstream, CUgraph *);
typedef CUresult (*cu_graph_instantiate_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*cu_graph_launch_fn)(CUgraphExec, CUstream);
typedef CUresult (*cu_graph_exec_destroy_fn)(CUgraphExec);
typedef CUresult (*cu_graph_destroy_fn)(CUgraph);
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1

static void *need_symbol(qc_gpu *g, const char *name, char *err, size_t errlen) {
    void *p = qc_gpu_driver_symbol(g, name);
    if (!p) qc_errf(err, errlen, "the CUDA driver library lacks %s", name);
    return p;
}

qc_status qc_gpu_copy(qc_gpu *g, qc_devptr dst, qc_devptr src, size_t bytes, char *err, size_t errlen) {
    if (!bytes) return QC_OK;
    cu_memcpy_dtod_fn f = (cu_memcpy_dtod_fn)need_symbol(g, "cuMemcpyDtoDAsync_v2", err, errlen);
    if (!f || bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (cu_fail(g, f(dst, src, bytes, g->stream), err, errlen, "device copy of %zu bytes", bytes)) return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_capture_begin(qc_gpu *g, char *err, size_t errlen) {
    cu_begin_capture_fn f = (cu_begin_capture_fn)need_symbol(g, "cuStreamBeginCapture_v2", err, errlen);
    if (!f || bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (cu_fail(g, f(g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), err, errlen, "cuStreamBeginCapture"))
        return QC_ERR_INTERNAL;
    return QC_OK;
}

qc_status qc_gpu_capture_end(qc_gpu *g, qc_gpu_graph *out, char *err, size_t errlen) {
    *out = NULL;
    cu_end_capture_fn end = (cu_end_capture_fn)need_symbol(g, "cuStreamEndCapture", err, errlen);
    cu_graph_instantiate_fn inst =
        (cu_graph_instantiate_fn)need_symbol(g, "cuGraphInstantiateWithFlags", err, errlen);
    cu_graph_destroy_fn gdestroy = (cu_graph_destroy_fn)need_symbol(g, "cuGraphDestroy", err, errlen);
    if (!end || !inst || !gdestroy) return QC_ERR_UNSUPPORTED;
    CUgraph graph = NULL;
    if (cu_fail(g, end(g->stream, &graph), err, errlen, "cuStreamEndCapture (a launch in the capture failed?)"))
        return QC_ERR_INTERNAL;
    CUgraphExec exec = NULL;
    CUresult r = inst(&exec, graph, 0);
    gdestroy(graph);
    if (cu_fail(g, r, err, errlen, "cuGraphInstantiate")) return QC_ERR_INTERNAL;
    *out = (qc_gpu_graph)(void *)exec;
    return QC_OK;
}

qc_status qc_gpu_graph_launch(qc_gpu *g, qc_gpu_graph graph, char *err, size_t errlen) {
    cu_graph_launch_fn f = (cu_graph_launch_fn)need_symbol(g, "cuGraphLaunch", err, errlen);
    if (!f || !graph || bind_ctx(g, err, errlen)) return QC_ERR_UNSUPPORTED;
    if (cu_fail(g, f((CUgraphExec)(void *)graph, g->stream), err, errlen, "cuGraphLaunch")) return QC_ERR_INTERNAL;
    return QC_OK;
}

void qc_gpu_graph_destroy(qc_gpu *g, qc_gpu_graph graph) {
    cu_graph_exec_destroy_fn f = (cu_graph_exec_destroy_fn)qc_gpu_driver_symbol(g, "cuGraphExecDestroy");
    if (f && graph) f((CUgraphExec)(void *)graph);
}

static int cmp_ms(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

qc_status qc_gpu_copy_bandwidth(qc_gpu *g, double *bytes_per_s, size_t *bytes_used, float *median_ms, char *err,
                                size_t errlen) {
    *bytes_per_s = 0;
    qc_gpu_buf src = {0}, dst = {0};
    qc_gpu_event e0 = NULL, e1 = NULL;
    size_t bytes = (size_t)1 << 30;
    qc_status st;
    for (;;) {
        st = qc_gpu_alloc(g, bytes, bytes, QC_MEM_WORKSPACE, "copy source", &src, err, errlen);
        if (st == QC_OK) st = qc_gpu_alloc(g, bytes, bytes, QC_MEM_WORKSPACE, "copy destination", &dst, err, errlen);
        if (st == QC_OK) break;
        qc_gpu_free(g, &src);
        if (bytes <= ((size_t)64 << 20)) return st;
        bytes /= 2;
    }
    float ms[7];
    if ((st = qc_gpu_event_create(g, &e0, err, errlen)) || (st = qc_gpu_event_create(g, &e1, err, errlen)) ||
        (st = qc_gpu_memset32(g, src.ptr, 0x3f800000u, bytes / 4, err, errlen)) ||
        (st = qc_gpu_copy(g, dst.ptr, src.ptr, bytes, err, errlen))) /* the first copy warms up */
        goto out;
    for (int i = 0; i < 7; i++)
        if ((st = qc_gpu_event_record(g, e0, err, errlen)) || (st = qc_gpu_copy(g, dst.ptr, src.ptr, bytes, err, errlen)) ||
            (st = qc_gpu_event_record(g, e1, err, errlen)) || (st = qc_gpu_event_elapsed(g, e0, e1, &ms[i], err, errlen)))
            goto out;
    qsort(ms, 7, sizeof ms[0], cmp_ms);
    *bytes_per_s = 2.0 * (double)bytes / ((ms[3] > 0 ? ms[3] : 1e-6f) * 1e-3);
    if (bytes_used) *bytes_used = bytes;
    if (median_ms) *median_ms = ms[3];
out:
    qc_gpu_event_destroy(g, e0);
    qc_gpu_event_destroy(g, e1);
    qc_gpu_free(g, &src);
    qc_gpu_free(g, &dst);
    return st;
}
