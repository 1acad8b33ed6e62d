/* qc_cuda.c - finding the CUDA driver and NVRTC at run time with dlopen (never linked). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_util.h"

static void *nvrtc_open_uncached(char *err, size_t errlen);
void *qc_nvrtc_open(char *err, size_t errlen);

/* Driver API subset, declared here so that no CUDA header is needed to build. */
typedef int CUresult;
typedef int CUdevice;
#define CU_ATTR_SM_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76

typedef struct cuda_fns {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
    CUresult (*cuGetErrorString)(CUresult, const char **);
} cuda_fns;

static const char *cu_err(const cuda_fns *f, CUresult r) {
    const char *s = NULL;
    if (f->cuGetErrorString && f->cuGetErrorString(r, &s) == 0 && s) return s;
    return "unknown CUDA error";
}

/* Open NVRTC: $QCORE_NVRTC_LIBRARY alone when set (a path or soname: pick one
 * toolkit among several, or name a missing file to test the no-NVRTC path),
 * else the versioned sonames, then CUDA_HOME / CUDA_PATH.  The handle is kept
 * for the life of the process and never dlclose()d: NVRTC is C++ and its
 * static state does not survive being unloaded and reloaded.  A failure is
 * not remembered, so a later call tries again. */
void *qc_nvrtc_open(char *err, size_t errlen) {
    static void *cached;
    if (cached) return cached;
    void *h = nvrtc_open_uncached(err, errlen);
    cached = h;
    return h;
}

static void *nvrtc_open_uncached(char *err, size_t errlen) {
    const char *forced = getenv("QCORE_NVRTC_LIBRARY");
    if (forced && *forced) {
        void *h = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            qc_errf(err, errlen, "no NVRTC library: QCORE_NVRTC_LIBRARY=%s cannot be opened (%s): GPU kernels "
                    "cannot be compiled", forced, why ? why : "unknown error");
        }
        return h;
    }
    static const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
    for (const char **n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (size_t i = 0; i < 3; i++) {
        if (!homes[i] || !*homes[i]) continue;
        for (const char *sub = "lib64"; sub; sub = strcmp(sub, "lib64") == 0 ? "lib" : NULL) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s/libnvrtc.so", homes[i], sub);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    }
    qc_errf(err, errlen, "no NVRTC library found (looked for libnvrtc.so.13/.12 and under CUDA_HOME, CUDA_PATH, "
                         "/usr/local/cuda): GPU kernels cannot be compiled");
    return NULL;
}

void qc_device_probe(qc_device_info *out) {
    memset(out, 0, sizeof *out);
    /* NVRTC works without a GPU: probe it on its own. */
    char nerr[256];
    void *nv = qc_nvrtc_open(nerr, sizeof nerr);
    if (nv) {
        int (*nvrtcVersion)(int *, int *) = (int (*)(int *, int *))dlsym(nv, "nvrtcVersion");
        if (nvrtcVersion && nvrtcVersion(&out->nvrtc_major, &out->nvrtc_minor) == 0)
            out->nvrtc_available = 1;
        else
            qc_strlcpy(out->nvrtc_reason, "NVRTC library has no working nvrtcVersion", sizeof out->nvrtc_reason);
    } else {
        qc_strlcpy(out->nvrtc_reason, nerr, sizeof out->nvrtc_reason);
    }

    /* kept open for the process, like NVRTC: the driver does not expect to
     * be unloaded */
    static void *h;
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        qc_strlcpy(out->reason, "no CUDA driver (libcuda.so.1 not found): CPU reference backend only",
                   sizeof out->reason);
        return;
    }
    cuda_fns f;
    memset(&f, 0, sizeof f);
#define LOAD(name) *(void **)&f.name = dlsym(h, #name)
    LOAD(cuInit);
    LOAD(cuDriverGetVersion);
    LOAD(cuDeviceGetCount);
    LOAD(cuDeviceGet);
    LOAD(cuDeviceGetName);
    LOAD(cuDeviceGetAttribute);
    LOAD(cuDeviceTotalMem_v2);
    LOAD(cuGetErrorString);
#undef LOAD
    if (!f.cuInit || !f.cuDriverGetVersion || !f.cuDeviceGetCount || !f.cuDeviceGet || !f.cuDeviceGetName ||
        !f.cuDeviceGetAttribute || !f.cuDeviceTotalMem_v2) {
        qc_strlcpy(out->reason, "CUDA driver library lacks required functions: CPU reference backend only",
                   sizeof out->reason);
        return;
    }
    CUresult r = f.cuInit(0);
    if (r != 0) {
        qc_errf(out->reason, sizeof out->reason, "CUDA driver present but cuInit failed (%d: %s): CPU reference "
                "backend only", r, cu_err(&f, r));
        return;
    }
    f.cuDriverGetVersion(&out->driver_version);
    int count = 0;
    r = f.cuDeviceGetCount(&count);
    if (r != 0 || count == 0) {
        qc_errf(out->reason, sizeof out->reason, "no CUDA device visible: CPU reference backend only");
        return;
    }
    out->device_count = count;
    CUdevice dev;
    int major = 0, minor = 0;
    if (f.cuDeviceGet(&dev, 0) != 0 || f.cuDeviceGetName(out->name, sizeof out->name, dev) != 0 ||
        f.cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, dev) != 0 ||
        f.cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, dev) != 0 ||
        f.cuDeviceGetAttribute(&out->sm_count, CU_ATTR_SM_COUNT, dev) != 0 ||
        f.cuDeviceTotalMem_v2(&out->mem_total, dev) != 0) {
        qc_strlcpy(out->reason, "CUDA device 0 could not be queried: CPU reference backend only", sizeof out->reason);
        return;
    }
    out->sm = major * 10 + minor;
    out->available = 1;
}
