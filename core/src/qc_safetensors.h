/* qc_safetensors.h - bounds-checked, memory-mapped reader of safetensors files and sharded checkpoints (internal). */
#ifndef QC_SAFETENSORS_H
#define QC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "qc_util.h"

typedef struct qc_safetensors qc_safetensors;

typedef struct qc_st_tensor {
    const char *name;          /* NUL-terminated, owned by the handle */
    qc_dtype dtype;            /* F32 F16 BF16 F8_E4M3 F8_E5M2 F8_E8M0 I8 U8 I32 I64 F64 */
    int ndim;                  /* 0 (a scalar) .. 8 */
    int64_t shape[8];          /* outermost first, as in the file; unused entries 0 */
    const void *data;          /* C order, inside the mapping (may be unaligned) */
    size_t bytes;
    const char *file;          /* the file it lives in ("<memory>" for a buffer) */
} qc_st_tensor;

/* `path` is a .safetensors file, a *.safetensors.index.json (sharded; shards
 * are named relative to its folder), or a folder holding
 * model.safetensors.index.json or model.safetensors (or exactly one of either
 * kind).  Everything is checked at open; NULL with "<file>: <thing>: <reason>"
 * in err on any problem. */
qc_safetensors *qc_safetensors_open(const char *path, char *err, size_t errlen);
/* One safetensors file in a borrowed buffer that must outlive the handle. */
qc_safetensors *qc_safetensors_open_memory(const void *data, size_t size, char *err, size_t errlen);
void qc_safetensors_close(qc_safetensors *s);

/* Tensors in file order (shards in name order, then by data offset). */
size_t qc_safetensors_count(const qc_safetensors *s);
const qc_st_tensor *qc_safetensors_at(const qc_safetensors *s, size_t i);
const qc_st_tensor *qc_safetensors_find(const qc_safetensors *s, const char *name);
/* A "__metadata__" string (the first shard that has the key), or NULL. */
const char *qc_safetensors_metadata(const qc_safetensors *s, const char *key);
/* Number of files opened (1 unless sharded). */
size_t qc_safetensors_file_count(const qc_safetensors *s);

#endif
