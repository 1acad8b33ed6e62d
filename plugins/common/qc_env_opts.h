/* qc_env_opts.h - extra NVRTC -D options read from an environment variable, for A/B runs of plugin kernels (header only). */
#ifndef QC_PLUGIN_ENV_OPTS_H
#define QC_PLUGIN_ENV_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QC_ENV_OPT_LEN 64

/* Split the value of `var` at spaces and commas into at most `max` options, each starting with -D and under
 * QC_ENV_OPT_LEN characters, copied into buf[0..n); anything else is ignored with a warning on stderr that names
 * `plugin` and `var`.  Returns n (0 when `var` is unset).  Call from registration: buf is the caller's, usually
 * static so that option pointers into it live as long as the plugin. */
static inline int qc_env_defines(const char *plugin, const char *var, char (*buf)[QC_ENV_OPT_LEN], int max) {
    const char *e = getenv(var);
    int n = 0;
    for (const char *p = e ? e : ""; *p && n < max;) {
        while (*p == ' ' || *p == ',') p++;
        size_t len = strcspn(p, " ,");
        if (len == 0) break;
        if (len < QC_ENV_OPT_LEN && strncmp(p, "-D", 2) == 0) {
            memcpy(buf[n], p, len);
            buf[n++][len] = 0;
        } else {
            fprintf(stderr, "%s: %s: ignoring '%.*s' (want -DNAME=VALUE, under %d characters)\n", plugin, var,
                    (int)len, p, QC_ENV_OPT_LEN);
        }
        p += len;
    }
    return n;
}

/* A kernel's NVRTC option list: `first` (when not NULL: the kernel's own option), then the n options of buf (as
 * qc_env_defines filled it), then NULL, written to list[0..n + 2).  list and buf are the caller's and must live as
 * long as the kernel descriptor that points at them (static storage).  Returns list. */
static inline const char *const *qc_env_option_list(const char *first, char (*buf)[QC_ENV_OPT_LEN], int n,
                                                    const char **list) {
    int j = 0;
    if (first) list[j++] = first;
    for (int i = 0; i < n; i++) list[j++] = buf[i];
    list[j] = NULL;
    return list;
}

/* An integer switch for A/B runs: the value of `var` when it is an integer in [lo, hi], else `dflt` (unset: quietly;
 * anything else: with a warning on stderr that names `plugin` and `var`).  Call from registration. */
static inline int qc_env_int(const char *plugin, const char *var, int lo, int hi, int dflt) {
    const char *e = getenv(var);
    if (!e || !*e) return dflt;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s='%s' is not %d..%d: ignored\n", plugin, var, e, lo, hi);
        return dflt;
    }
    return (int)v;
}

/* An integer switch that becomes one NVRTC define for A/B runs: `var` = an integer in [lo, hi] gives {"-D<macro>=<v>",
 * NULL} in the caller's static `buf` and `list`; unset or invalid (warned, as qc_env_int): NULL, the source's
 * default.  Call from registration. */
static inline const char **qc_env_define_int(const char *plugin, const char *var, const char *macro, int lo, int hi,
                                             char *buf, size_t len, const char **list) {
    const int v = qc_env_int(plugin, var, lo, hi, lo - 1);
    if (v < lo) return NULL;
    snprintf(buf, len, "-D%s=%d", macro, v);
    list[0] = buf;
    list[1] = NULL;
    return list;
}

#endif
