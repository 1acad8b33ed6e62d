/* qc_internal.h - the runtime's private structures, shared by core subsystems only. */
#ifndef QC_INTERNAL_H
#define QC_INTERNAL_H

#include "qc_util.h"

/* One loaded plugin (or the core's built-in reference formats). */
typedef struct qc_plugin_rec {
    char *path;                  /* resolved file path, "(builtin)" for the core */
    void *handle;                /* dlopen handle, NULL for builtin */
    int fd;                      /* the file, held open while loaded (-1 for builtin) */
    const qc_plugin_entry *entry;
    struct qc_host *host;        /* the handle given to the plugin */
    size_t n_formats, n_kernels;
    int builtin;
} qc_plugin_rec;

/* What a plugin holds as `qc_host *`. */
struct qc_host {
    struct qc_runtime *rt;
    size_t plugin_index;
    int in_init;                 /* registration is allowed only during init */
    char failure[320];           /* first registration failure, refuses the plugin */
};

typedef struct qc_format_rec {
    qc_format_desc desc;         /* copied from the plugin, zero-extended */
    size_t plugin_index;
} qc_format_rec;

typedef struct qc_kernel_rec {
    qc_kernel_desc desc;
    size_t plugin_index;
} qc_kernel_rec;

struct qc_runtime {
    const qc_config *config;     /* borrowed */
    qc_plugin_rec **plugins;
    size_t n_plugins, cap_plugins;
    qc_format_rec *formats;
    size_t n_formats, cap_formats;
    qc_kernel_rec *kernels;
    size_t n_kernels, cap_kernels;
    char **refusals;             /* "<file>: <reason>" */
    size_t n_refusals, cap_refusals;
    char **dirs;                 /* plugin folders searched, in order */
    size_t n_dirs, cap_dirs;
};

/* The core's own reference formats (qc_builtin.c), registered through the
 * same host table plugins get. */
extern const qc_plugin_entry qc_builtin_entry;

/* The extension `ext_id` of the plugin that registered `format`, or NULL. */
const void *qc_format_extension(const qc_runtime *rt, const char *format, const char *ext_id);

/* Grow an array of `elem` bytes to hold at least n+1 items. 0 or -1. */
int qc_grow(void **arr, size_t *cap, size_t n, size_t elem);

/* Layer lists (qc_model_config.c): an empty list with room for n, and one linear appended. */
qc_layer_list *qc_layer_list_alloc(size_t n);
void qc_layer_list_add(qc_layer_list *l, int index, const char *part, const char *role, int n_layers, int64_t n,
                       int64_t k);

#endif
