/* qc_gpu.h - the CUDA backend: driver API by dlopen, one stream, a memory ledger, modules and launches (internal). */
#ifndef QC_GPU_H
#define QC_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qc_nvrtc.h"
#include "qcore/plugin.h"

/* A device address (CUdeviceptr).  Kernel arguments of type QC_PARAM_PTR
 * point at one of these when launched on the GPU. */
typedef uint64_t qc_devptr;

typedef struct qc_gpu qc_gpu;
typedef struct qc_gpu_fn_ *qc_gpu_fn;       /* a CUfunction, owned by the context's module cache */
typedef struct qc_gpu_event_ *qc_gpu_event; /* a CUevent */

/* What the context knows about its device. */
typedef struct qc_gpu_info {
    int device;          /* ordinal */
    char name[128];
    int sm;              /* major*10+minor */
    int sm_count;
    int driver_version;  /* cuDriverGetVersion, e.g. 13000 */
    size_t mem_total;
    size_t smem_optin;   /* largest dynamic shared memory a block may opt in to */
} qc_gpu_info;

/* Open device `device`: dlopen the driver (libcuda.so.1, or the file named by
 * $QCORE_CUDA_LIBRARY), cuInit, retain its primary context, create one
 * non-blocking stream.  NULL with a message in err when there is no driver,
 * no such device or any step fails; never crashes without a GPU. */
qc_gpu *qc_gpu_open(int device, char *err, size_t errlen);
/* Frees what is still allocated (naming it in a warning), unloads modules,
 * destroys the stream and releases the primary context.  NULL is a no-op. */
void qc_gpu_close(qc_gpu *g);
const qc_gpu_info *qc_gpu_get_info(const qc_gpu *g);
/* Current free and total device memory (cuMemGetInfo). */
qc_status qc_gpu_mem_info(qc_gpu *g, size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen);

/* ---- memory and the ledger ---- */

/* One device allocation.  `logical` is what the data needs (e.g. packed
 * weights without padding), `resident` what the device holds for it. */
typedef struct qc_gpu_buf {
    qc_devptr ptr;       /* 0 when not allocated */
    size_t logical, resident;
    qc_mem_category category;
} qc_gpu_buf;

/* Allocate `resident` bytes (logical <= resident) and book them under `cat`.
 * Refused before cuMemAlloc is called when resident exceeds the free device
 * memory; a failing cuMemAlloc is reported the same way.  Both messages name
 * `what`, its category, the bytes asked and the bytes free (QC_ERR_NOMEM).
 * `out` is left with ptr 0 on failure. */
qc_status qc_gpu_alloc(qc_gpu *g, size_t logical, size_t resident, qc_mem_category cat, const char *what,
                       qc_gpu_buf *out, char *err, size_t errlen);
/* Free and unbook; zeroes *b.  A buffer with ptr 0 is a no-op; one that this
 * context did not allocate is refused with a warning (no double free). */
void qc_gpu_free(qc_gpu *g, qc_gpu_buf *b);

typedef struct qc_gpu_ledger_row {
    size_t count;        /* live allocations */
    size_t logical, resident;
    size_t peak_resident;
} qc_gpu_ledger_row;
/* One category's numbers; cat == QC_MEM_COUNT_ gives the totals (whose peak
 * is the peak of the sum, not the sum of the peaks). */
qc_gpu_ledger_row qc_gpu_ledger_get(qc_gpu *g, qc_mem_category cat);
/* Per category: live allocations, logical, resident, padding (resident -
 * logical) and peak resident; then totals and the device's free memory. */
void qc_gpu_ledger_print(qc_gpu *g, FILE *f);

/* ---- copies on the context's stream ---- */

qc_status qc_gpu_upload(qc_gpu *g, qc_devptr dst, const void *src, size_t bytes, char *err, size_t errlen);
/* Waits for the stream, so the host data is there on return. */
qc_status qc_gpu_download(qc_gpu *g, void *dst, qc_devptr src, size_t bytes, char *err, size_t errlen);
/* Fill `count` 32-bit words with `value` (e.g. a NaN pattern to poison outputs). */
qc_status qc_gpu_memset32(qc_gpu *g, qc_devptr dst, uint32_t value, size_t count, char *err, size_t errlen);
/* Wait for everything queued on the stream; reports an error a kernel raised. */
qc_status qc_gpu_sync(qc_gpu *g, char *err, size_t errlen);

/* ---- modules and launches ---- */

/* Load a cubin (cuModuleLoadData) and look `entry` up; modules are cached by
 * the cubin's key and functions by (key, entry), so a second call is a lookup. */
qc_status qc_gpu_module_load(qc_gpu *g, const qc_cubin *c, const char *entry, qc_gpu_fn *fn, char *err,
                             size_t errlen);
/* Compile a registered kernel for this device (NVRTC, disk cache; the
 * arch-specific target on sm_90 and later) and load it.  Fails with why->code
 * "arch" when the kernel's range excludes this device, "missing" when it has
 * no CUDA source, else the compiler's reason. */
qc_status qc_gpu_kernel_load(qc_gpu *g, qc_nvrtc *nv, const qc_kernel_desc *k, qc_gpu_fn *fn, qc_reason *why);
/* cuLaunchKernel on the context's stream with the argument array that
 * qc_kernel_bind built (argv[i] points at the value of parameter i; device
 * addresses for pointers).  Raises the function's dynamic shared-memory limit
 * first when dims->shared_bytes is over 48 KiB. */
qc_status qc_gpu_launch(qc_gpu *g, qc_gpu_fn fn, const qc_launch_dims *dims, void **argv, char *err,
                        size_t errlen);

/* qc_gpu_launch for a registered kernel: when `k` lists TMA tensor maps
 * (qc_kernel_desc.tensor_maps), each is encoded with cuTensorMapEncodeTiled
 * from the launch's own arguments (the device pointer and the rows/cols
 * params, found by name in k->params) and appended to argv, as the CUDA
 * entry expects.  argv holds k->n_params entries.  Fails naming the map,
 * the param, its shape and the driver's error when a map cannot be built
 * (e.g. a misaligned pointer or row stride).  An empty grid launches nothing
 * and encodes nothing. */
qc_status qc_gpu_launch_kernel(qc_gpu *g, const qc_kernel_desc *k, qc_gpu_fn fn, const qc_launch_dims *dims,
                               void **argv, char *err, size_t errlen);
/* A hook around every launch of this context (QCORE_TRACE): called with
 * after = 0 just before cuLaunchKernel and after = 1 just after it succeeded,
 * with the registered kernel the function was loaded for by
 * qc_gpu_kernel_load (NULL for a bare qc_gpu_module_load) and the launch's
 * argument array.  NULL removes it.  Not called for empty grids. */
typedef void (*qc_gpu_launch_hook)(void *ctx, const qc_kernel_desc *k, void **argv, const qc_launch_dims *d,
                                   int after);
void qc_gpu_set_launch_hook(qc_gpu *g, qc_gpu_launch_hook hook, void *ctx);

/* Programmatic dependent launch: with on, qc_gpu_launch launches kernels
 * whose descriptor has QC_KERNEL_GRID_DEP with programmatic stream
 * serialization (their blocks may start while the kernel before finishes).
 * Only on sm_90+ with a driver that has cuLaunchKernelEx; returns whether it
 * is on.  Off by default; the engine turns it on (QC_PDL=0 keeps it off).
 * Flagged kernels read weights before their wait: whoever writes weights
 * with a kernel (the engine's synthetic weights) synchronizes before the
 * first flagged launch that reads them, as qc_engine_create does. */
int qc_gpu_set_grid_dep(qc_gpu *g, int on);
/* whether a descriptor states QC_KERNEL_GRID_DEP (and is new enough to) */
int qc_kernel_grid_dep(const qc_kernel_desc *k);
/* Launches made by this context so far (empty grids excluded). */
uint64_t qc_gpu_launch_count(const qc_gpu *g);

/* Bytes per element of `t` in a tensor map (8-bit types travel as bytes),
 * 0 when TMA cannot describe it (4-bit types, none). */
size_t qc_tensor_map_elem_bytes(qc_dtype t);

/* ---- timing ---- */

qc_status qc_gpu_event_create(qc_gpu *g, qc_gpu_event *ev, char *err, size_t errlen);
void qc_gpu_event_destroy(qc_gpu *g, qc_gpu_event ev);
qc_status qc_gpu_event_record(qc_gpu *g, qc_gpu_event ev, char *err, size_t errlen);
/* Milliseconds between two recorded events; waits for `end`. */
qc_status qc_gpu_event_elapsed(qc_gpu *g, qc_gpu_event start, qc_gpu_event end, float *ms, char *err,
                               size_t errlen);

/* ---- driver symbols, device copies, graphs ---- */

/* Any driver entry point by its exported name (e.g. "cuTensorMapEncodeTiled"),
 * NULL when this driver lacks it.  For kernels whose launch needs more than
 * cuLaunchKernel (tensor maps); the pointer lives as long as the process. */
void *qc_gpu_driver_symbol(qc_gpu *g, const char *name);
/* The context's stream (a CUstream), for such callers. */
void *qc_gpu_stream(qc_gpu *g);
/* The device's copy bandwidth now, counted as bytes read + written per
 * second (as the PyTorch anchors count it): the median of 7 timed
 * device-to-device copies of 1 GiB, halved while that does not fit (down to
 * 64 MiB).  *bytes_used and *median_ms (may be NULL) say what was timed. */
qc_status qc_gpu_copy_bandwidth(qc_gpu *g, double *bytes_per_s, size_t *bytes_used, float *median_ms, char *err,
                                size_t errlen);
/* Device-to-device copy on the stream. */
qc_status qc_gpu_copy(qc_gpu *g, qc_devptr dst, qc_devptr src, size_t bytes, char *err, size_t errlen);

/* CUDA graphs: launches queued between capture_begin and capture_end are
 * recorded (not run) and instantiated into one graph that graph_launch
 * replays with the same arguments and addresses. */
typedef struct qc_gpu_graph_ *qc_gpu_graph;
qc_status qc_gpu_capture_begin(qc_gpu *g, char *err, size_t errlen);
qc_status qc_gpu_capture_end(qc_gpu *g, qc_gpu_graph *out, char *err, size_t errlen);
qc_status qc_gpu_graph_launch(qc_gpu *g, qc_gpu_graph graph, char *err, size_t errlen);
void qc_gpu_graph_destroy(qc_gpu *g, qc_gpu_graph graph);

#endif
