/* qc_nvrtc.h - compiling kernel CUDA source with NVRTC into cubins, cached on disk (internal). */
#ifndef QC_NVRTC_H
#define QC_NVRTC_H

#include <stddef.h>

#include "qcore/plugin.h"

/* Version of the cache file layout and of the key's serialization: bump it
 * when either changes so that old entries are simply never looked up. */
#define QC_KERNEL_CACHE_FORMAT 1u

/* Defined in qc_cuda.c: dlopen NVRTC once per process ($QCORE_NVRTC_LIBRARY
 * overrides the search).  NULL with a message when it is not there. */
void *qc_nvrtc_open(char *err, size_t errlen);

typedef struct qc_nvrtc qc_nvrtc;

/* cache_dir NULL: $QCORE_CACHE_DIR, else $XDG_CACHE_HOME/qcore/kernels, else
 * ~/.cache/qcore/kernels (created 0700).  Fails with a message when NVRTC is
 * absent.  When the folder cannot be created it warns and compiles without a
 * disk cache (and without saved logs). */
qc_nvrtc *qc_nvrtc_create(const char *cache_dir, char *err, size_t errlen);
void qc_nvrtc_destroy(qc_nvrtc *n);
void qc_nvrtc_version(const qc_nvrtc *n, int *major, int *minor);
/* The cache folder in use, or NULL when there is no disk cache. */
const char *qc_nvrtc_cache_dir(const qc_nvrtc *n);
/* 1 when this NVRTC can compile for sm (75, 80, 89, 90, 100...). */
int qc_nvrtc_supports(const qc_nvrtc *n, int sm);

typedef struct qc_cubin {
    void *data;      /* malloc'd; qc_cubin_free releases it */
    size_t size;
    int from_cache;  /* 1 when loaded from disk, 0 when compiled now */
    char key[65];    /* SHA-256 of the canonical key, hex */
    char target[16]; /* "sm_90a", "sm_89" */
} qc_cubin;

/* Compile `source` (a translation unit named `name` in messages) for sm (80,
 * 89, 90, 100...); arch_specific = 1 targets "sm_90a"/"sm_100a" (needed for
 * wgmma, setmaxnreg, tcgen05), 0 the plain "sm_XX".  `entry` must be an
 * extern "C" __global__ function of the source.  The toolkit's include
 * folders (CUDA_HOME, CUDA_PATH, /usr/local/cuda; plus include/cccl) are
 * passed as -I, then "-std=c++17", "-default-device" and `options`
 * (NULL-terminated, may be NULL).  A cached cubin is returned without
 * compiling.  QC_OK, or QC_ERR_UNSUPPORTED with why->code "compile" (why->text
 * names the saved log <cache>/<key>.log and its first error line), "arch"
 * (no such target in this NVRTC) or "missing" (no such kernel in the cubin);
 * QC_ERR_INVALID for bad arguments, QC_ERR_NOMEM.  out->key and out->target
 * are set on failure too.  Thread-safe. */
qc_status qc_nvrtc_compile(qc_nvrtc *n, const char *name, const char *source, const char *entry,
                           const char *const *options, int sm, int arch_specific, qc_cubin *out,
                           qc_reason *why);
void qc_cubin_free(qc_cubin *c);

/* Compiles done (NVRTC calls, failed ones too), cache hits, and corrupt
 * cache entries that were deleted and recompiled. */
void qc_nvrtc_stats(const qc_nvrtc *n, unsigned *compiles, unsigned *hits, unsigned *recompiled);

#endif
