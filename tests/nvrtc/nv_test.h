/* nv_test.h - helpers shared by the NVRTC tests: temporary folders, files, ptxas reports, and the skip-or-require rule. */
#ifndef NV_TEST_H
#define NV_TEST_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_nvrtc.h"

static inline int nv_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}
static inline void nv_rm_rf(const char *dir) { nftw(dir, nv_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh folder under $TMPDIR (or /tmp); the caller removes it. */
static inline char *nv_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/qc-nvrtc-XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(buf);
}

/* NVRTC found: the handle.  Not found: under CI=true that is a failure
 * (CI machines have it, so a silent skip would hide a broken setup);
 * elsewhere the test says "skip" and passes. */
static inline qc_nvrtc *nv_open_or_skip(const char *test, const char *dir, int *skip) {
    char err[512] = "";
    qc_nvrtc *n = qc_nvrtc_create(dir, err, sizeof err);
    *skip = 0;
    if (n) return n;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "FAIL %s: NVRTC is required under CI=true: %s\n", test, err);
        return NULL;
    }
    printf("%s: skip: %s\n", test, err);
    *skip = 1;
    return NULL;
}

static inline char *nv_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *b = realloc(buf, cap);
            if (!b) { free(buf); fclose(f); return NULL; }
            buf = b;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static inline int nv_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* ptxas's wgmma diagnostics in an NVRTC build log: setmaxnreg ignored (C7508), wgmma serialized (C7510; C7512 for
 * want of registers; C7514 by a read of an accumulator while a wgmma group may be in flight, e.g. one left in flight
 * across a loop's back edge, session 20; C7515; C7518 by a wait ptxas injected in a divergent path, which the fp8
 * wgmma GEMMs carried unseen until session 17) or a wgmma wait it injected (C7517).  The first of them in `log`
 * (print it up to its newline), or NULL: every kernel is held to none. */
static inline const char *nv_wgmma_diag(const char *log) {
    static const char *const codes[] = {"C7508", "C7510", "C7512", "C7514", "C7515", "C7517", "C7518"};
    const char *first = NULL;
    for (size_t i = 0; log && i < sizeof codes / sizeof codes[0]; i++) {
        const char *hit = strstr(log, codes[i]);
        if (hit && (!first || hit < first)) first = hit;
    }
    return first;
}

/* ptxas's -v report of one NVRTC build, from the log NVRTC keeps beside its cache entry (dir/key.log): the last
 * "Used N registers" and the summed "N bytes spill stores" of the function `entry` (NULL: of every function in
 * the log), each -1 / 0 when absent; `print` (may be NULL) prefixes each register, spill or stack line it prints.
 * Returns the log for further checks (the caller frees it), NULL when there is none. */
static inline char *nv_ptxas_report(const char *dir, const qc_cubin *c, const char *entry, const char *print,
                                    int *regs, int *spill) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.log", dir, c->key);
    char *log = nv_slurp(path, NULL);
    *regs = -1, *spill = 0;
    if (!log) return NULL;
    size_t len = strlen(log);
    char *copy = malloc(len + 1), *next = NULL;
    if (copy) memcpy(copy, log, len + 1);
    int in_entry = entry == NULL;
    for (char *line = copy; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        /* the report covers every entry of the source: "Compiling entry function 'e'", then its properties */
        if (entry && (strstr(line, "Compiling entry function") || strstr(line, "Function properties for")))
            in_entry = strstr(line, entry) != NULL;
        if (!in_entry) continue;
        if (print && (strstr(line, "registers") || strstr(line, "spill") || strstr(line, "stack frame")))
            printf("%s: ptxas %s: %s\n", print, c->target, line);
        const char *r = strstr(line, "Used ");
        if (r && strstr(line, "registers")) *regs = atoi(r + 5);
        const char *sp = strstr(line, "bytes spill stores");
        if (sp) {
            const char *b = sp;
            while (b > line && b[-1] == ' ') b--;
            while (b > line && b[-1] >= '0' && b[-1] <= '9') b--;
            *spill += atoi(b);
        }
    }
    free(copy);
    return log;
}

#endif
