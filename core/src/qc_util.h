/* qc_util.h - internal helpers shared by the core's subsystems (not public). */
#ifndef QC_UTIL_H
#define QC_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "qcore/qcore.h"

/* printf into a fixed buffer, always NUL-terminated, never overflowing. */
void qc_errf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void qc_strlcpy(char *dst, const char *src, size_t len);
/* Fill a reason with a code and a formatted sentence. */
void qc_reason_set(qc_reason *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Log through the runtime's sink (stderr by default). */
void qc_log(qc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void qc_vlog(qc_log_level level, const char *prefix, const char *fmt, va_list ap);

/* 64-byte aligned, zeroed allocation used for packed weights. */
void *qc_aligned_alloc(size_t bytes);
void qc_aligned_free(void *p);

/* Growable byte buffer for building text. */
typedef struct qc_sbuf {
    char *data;
    size_t len, cap;
    int failed; /* set when an allocation failed; text is then truncated */
} qc_sbuf;
void qc_sbuf_printf(qc_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void qc_sbuf_free(qc_sbuf *b);

/* Read a whole file (at most max_bytes).  Returns NULL and fills err. */
char *qc_read_file(const char *path, size_t max_bytes, size_t *len_out, char *err, size_t errlen);

double qc_now_seconds(void); /* monotonic clock */

const char *qc_dtype_name(qc_dtype t);
const char *qc_granularity_name(qc_granularity g);
const char *qc_phase_name(qc_phase p);
const char *qc_mem_category_name(qc_mem_category c);
/* "sm_80+" / "sm_89-sm_99" / "none" into buf. */
void qc_arch_range_str(qc_arch_range r, char *buf, size_t len);

#endif
