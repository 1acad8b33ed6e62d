/* qc_plugin.c - plugin loader, ABI checks and the registry of formats and kernels. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_gpu.h"
#include "qc_internal.h"
#include "qc_util.h"

#ifndef QC_BUILD_PLUGIN_DIR
#define QC_BUILD_PLUGIN_DIR ""
#endif
#ifndef QC_INSTALL_PLUGIN_DIR
#define QC_INSTALL_PLUGIN_DIR ""
#endif

/* Smallest struct sizes this core accepts: the end of ABI 1's last field.
 * When fields are appended later, these stay, and readers check struct_size
 * before touching the new ones. */
#define ENTRY_V1_SIZE (offsetof(qc_plugin_entry, get_extension) + sizeof(void *))
#define FORMAT_V1_SIZE (offsetof(qc_format_desc, eligible) + sizeof(void *))
/* code_stats and quantize_activations were appended within ABI 1 (before any
 * release); a shorter descriptor leaves them NULL. */
#define KERNEL_V1_SIZE (offsetof(qc_kernel_desc, eligible) + sizeof(void *))

int qc_grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static void add_refusal(qc_runtime *rt, const char *path, const char *reason) {
    char line[PATH_MAX + 400];
    snprintf(line, sizeof line, "%s: %s", path, reason);
    qc_log(QC_LOG_WARN, "plugin refused: %s", line);
    if (qc_grow((void **)&rt->refusals, &rt->cap_refusals, rt->n_refusals, sizeof(char *)) == 0) {
        char *s = strdup(line);
        if (s) rt->refusals[rt->n_refusals++] = s;
    }
}

/* ---- host functions given to plugins ---- */

static void host_log(qc_host *h, qc_log_level level, const char *fmt, ...) {
    const char *id = "?";
    if (h && h->rt && h->plugin_index < h->rt->n_plugins) id = h->rt->plugins[h->plugin_index]->entry->id;
    va_list ap;
    va_start(ap, fmt);
    qc_vlog(level, id, fmt, ap);
    va_end(ap);
}

static void host_fail(qc_host *h, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!h->failure[0]) qc_strlcpy(h->failure, msg, sizeof h->failure);
    host_log(h, QC_LOG_ERROR, "%s", msg);
}

static int valid_name(const char *s, size_t max) {
    if (!s || !*s || strlen(s) > max) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

static const qc_format_rec *find_format(const qc_runtime *rt, const char *name) {
    for (size_t i = 0; i < rt->n_formats; i++)
        if (strcmp(rt->formats[i].desc.name, name) == 0) return &rt->formats[i];
    return NULL;
}

static qc_status host_register_format(qc_host *h, const qc_format_desc *d) {
    qc_runtime *rt = h->rt;
    if (!h->in_init) { host_fail(h, "register_format called outside init"); return QC_ERR_INVALID; }
    if (!d) { host_fail(h, "register_format: NULL descriptor"); return QC_ERR_INVALID; }
    if (d->struct_size < FORMAT_V1_SIZE) {
        host_fail(h, "format descriptor struct_size %u is smaller than the %zu bytes of ABI %u", d->struct_size,
                  (size_t)FORMAT_V1_SIZE, QC_PLUGIN_ABI_VERSION);
        return QC_ERR_INVALID;
    }
    qc_format_desc f;
    memset(&f, 0, sizeof f);
    memcpy(&f, d, d->struct_size < sizeof f ? d->struct_size : sizeof f);
    f.struct_size = sizeof f;
    if (!valid_name(f.name, 32)) {
        host_fail(h, "format name '%s' is invalid (1-32 chars of a-z 0-9 _ . -)", f.name ? f.name : "(null)");
        return QC_ERR_INVALID;
    }
    const qc_format_rec *prev = find_format(rt, f.name);
    if (prev) {
        const qc_plugin_rec *owner = rt->plugins[prev->plugin_index];
        host_fail(h, "format '%s' is already registered by plugin %s (%s)", f.name, owner->entry->id, owner->path);
        return QC_ERR_INVALID;
    }
    if (f.kind != QC_FORMAT_LINEAR && f.kind != QC_FORMAT_KV_CACHE) {
        host_fail(h, "format '%s': unknown kind %d", f.name, (int)f.kind);
        return QC_ERR_INVALID;
    }
    if ((unsigned)f.weight_dtype >= QC_DT_COUNT_ || (unsigned)f.act_dtype >= QC_DT_COUNT_ ||
        (unsigned)f.kv_dtype >= QC_DT_COUNT_ || (unsigned)f.accum_dtype >= QC_DT_COUNT_ ||
        (unsigned)f.scale_dtype >= QC_DT_COUNT_ || (unsigned)f.weight_scale >= QC_GRAN_COUNT_ ||
        (unsigned)f.act_scale >= QC_GRAN_COUNT_) {
        host_fail(h, "format '%s': a dtype or granularity is out of range", f.name);
        return QC_ERR_INVALID;
    }
    if ((f.n_group_sizes && !f.group_sizes) || f.n_group_sizes > 16) {
        host_fail(h, "format '%s': group_sizes is NULL or has more than 16 entries", f.name);
        return QC_ERR_INVALID;
    }
    if (f.supported_arch.min_sm > f.supported_arch.max_sm || f.native_arch.min_sm > f.native_arch.max_sm) {
        host_fail(h, "format '%s': an arch range has min > max", f.name);
        return QC_ERR_INVALID;
    }
    if (f.n_align == 0) f.n_align = 1;
    if (f.k_align == 0) f.k_align = 1;
    if (qc_grow((void **)&rt->formats, &rt->cap_formats, rt->n_formats, sizeof *rt->formats)) {
        host_fail(h, "out of memory registering format '%s'", f.name);
        return QC_ERR_NOMEM;
    }
    rt->formats[rt->n_formats].desc = f;
    rt->formats[rt->n_formats].plugin_index = h->plugin_index;
    rt->n_formats++;
    rt->plugins[h->plugin_index]->n_formats++;
    return QC_OK;
}

/* Index of the parameter called `name` of type `type`, or -1. */
static int find_param(const qc_kernel_desc *k, const char *name, qc_param_type type) {
    for (uint32_t i = 0; name && i < k->n_params; i++)
        if (strcmp(k->params[i].name, name) == 0) return k->params[i].type == type ? (int)i : -1;
    return -1;
}

/* Tensor map specs (fields appended to the descriptor; zero for older
 * plugins after the zero-extending copy): each must name a pointer param and
 * two I64 params, and describe a box cuTensorMapEncodeTiled can take. */
static qc_status check_tensor_maps(qc_host *h, const qc_kernel_desc *k) {
    if (!k->n_tensor_maps) return QC_OK;
    if (k->n_tensor_maps > 8 || !k->tensor_maps) {
        host_fail(h, "kernel '%s': tensor_maps is NULL or has more than 8 entries (%u)", k->id, k->n_tensor_maps);
        return QC_ERR_INVALID;
    }
    if (!k->cuda_source) {
        host_fail(h, "kernel '%s' lists tensor maps but has no CUDA source", k->id);
        return QC_ERR_INVALID;
    }
    for (uint32_t i = 0; i < k->n_tensor_maps; i++) {
        const qc_tensor_map_spec *t = &k->tensor_maps[i];
        const char *pn = t->param ? t->param : "(null)";
        if (find_param(k, t->param, QC_PARAM_PTR) < 0) {
            host_fail(h, "kernel '%s': tensor map %u names param '%s', which is not a pointer parameter of the kernel",
                      k->id, i, pn);
            return QC_ERR_INVALID;
        }
        if (find_param(k, t->rows, QC_PARAM_I64) < 0 || find_param(k, t->cols, QC_PARAM_I64) < 0) {
            host_fail(h, "kernel '%s': tensor map %u of '%s' takes its shape from '%s' x '%s', which are not both I64 "
                      "parameters of the kernel", k->id, i, pn, t->rows ? t->rows : "(null)",
                      t->cols ? t->cols : "(null)");
            return QC_ERR_INVALID;
        }
        size_t es = qc_tensor_map_elem_bytes(t->dtype);
        if (!es) {
            host_fail(h, "kernel '%s': tensor map %u of '%s' has dtype %s, which TMA cannot describe", k->id, i, pn,
                      qc_dtype_name(t->dtype));
            return QC_ERR_INVALID;
        }
        uint32_t sw = t->swizzle_bytes, inner = t->box_cols * (uint32_t)es;
        if (t->box_rows < 1 || t->box_rows > 256 || t->box_cols < 1 || t->box_cols > 256 || inner % 16 ||
            (sw != 0 && sw != 32 && sw != 64 && sw != 128) || (sw && inner > sw)) {
            host_fail(h, "kernel '%s': tensor map %u of '%s': box %ux%u of %s (%u B rows) with swizzle %u is not a TMA "
                      "box (sides 1..256, rows a multiple of 16 B and at most the swizzle span; swizzle 0/32/64/128)",
                      k->id, i, pn, t->box_rows, t->box_cols, qc_dtype_name(t->dtype), inner, sw);
            return QC_ERR_INVALID;
        }
    }
    return QC_OK;
}

static qc_status host_register_kernel(qc_host *h, const qc_kernel_desc *d) {
    qc_runtime *rt = h->rt;
    if (!h->in_init) { host_fail(h, "register_kernel called outside init"); return QC_ERR_INVALID; }
    if (!d || d->struct_size < KERNEL_V1_SIZE) {
        host_fail(h, "kernel descriptor is NULL or its struct_size %u is smaller than the %zu bytes of ABI %u",
                  d ? d->struct_size : 0, (size_t)KERNEL_V1_SIZE, QC_PLUGIN_ABI_VERSION);
        return QC_ERR_INVALID;
    }
    qc_kernel_desc k;
    memset(&k, 0, sizeof k);
    memcpy(&k, d, d->struct_size < sizeof k ? d->struct_size : sizeof k);
    k.struct_size = sizeof k;
    if (!valid_name(k.id, 64)) {
        host_fail(h, "kernel id '%s' is invalid", k.id ? k.id : "(null)");
        return QC_ERR_INVALID;
    }
    for (size_t i = 0; i < rt->n_kernels; i++)
        if (strcmp(rt->kernels[i].desc.id, k.id) == 0) {
            host_fail(h, "kernel '%s' is already registered by plugin %s", k.id,
                      rt->plugins[rt->kernels[i].plugin_index]->entry->id);
            return QC_ERR_INVALID;
        }
    const qc_format_rec *f = k.format ? find_format(rt, k.format) : NULL;
    if (!f || f->plugin_index != h->plugin_index) {
        host_fail(h, "kernel '%s' names format '%s', which this plugin did not register", k.id,
                  k.format ? k.format : "(null)");
        return QC_ERR_INVALID;
    }
    if (k.n_params > 32 || (k.n_params && !k.params)) {
        host_fail(h, "kernel '%s': params is NULL or longer than 32", k.id);
        return QC_ERR_INVALID;
    }
    for (uint32_t i = 0; i < k.n_params; i++)
        if (!k.params[i].name || k.params[i].type < QC_PARAM_PTR || k.params[i].type > QC_PARAM_F64) {
            host_fail(h, "kernel '%s': parameter %u has no name or an unknown type", k.id, i);
            return QC_ERR_INVALID;
        }
    if (check_tensor_maps(h, &k) != QC_OK) return QC_ERR_INVALID;
    if (k.workspace_bytes) {
        int has_work = 0;
        for (uint32_t i = 0; i < k.n_params; i++)
            has_work |= strcmp(k.params[i].name, "work") == 0 && k.params[i].type == QC_PARAM_PTR;
        if (!has_work) {
            host_fail(h, "kernel '%s' states a workspace but has no pointer parameter named \"work\"", k.id);
            return QC_ERR_INVALID;
        }
    }
    if (k.cuda_source && (!k.cuda_entry || !k.launch_dims)) {
        host_fail(h, "kernel '%s' has CUDA source but no entry name or launch_dims", k.id);
        return QC_ERR_INVALID;
    }
    if (!k.reference && !k.cuda_source) {
        host_fail(h, "kernel '%s' has neither a C reference nor CUDA source", k.id);
        return QC_ERR_INVALID;
    }
    if (k.phases == 0) k.phases = QC_PHASE_ANY;
    if (qc_grow((void **)&rt->kernels, &rt->cap_kernels, rt->n_kernels, sizeof *rt->kernels)) {
        host_fail(h, "out of memory registering kernel '%s'", k.id);
        return QC_ERR_NOMEM;
    }
    rt->kernels[rt->n_kernels].desc = k;
    rt->kernels[rt->n_kernels].plugin_index = h->plugin_index;
    rt->n_kernels++;
    rt->plugins[h->plugin_index]->n_kernels++;
    return QC_OK;
}

static const char *host_config(qc_host *h, const char *key) {
    if (!h || !h->rt->config || !key) return NULL;
    char section[96];
    snprintf(section, sizeof section, "plugin.%s", h->rt->plugins[h->plugin_index]->entry->name);
    return qc_config_get(h->rt->config, section, key);
}

static const qc_host_api host_api = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_host_api),
    .log = host_log,
    .register_format = host_register_format,
    .register_kernel = host_register_kernel,
    .alloc = qc_aligned_alloc,
    .free = qc_aligned_free,
    .config = host_config,
};

/* ---- loading ---- */

static void plugin_rec_free(qc_plugin_rec *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    free(p->path);
    free(p->host);
    free(p);
}

/* Remove what the plugin at the end of the list registered and drop it. */
static void rollback_last(qc_runtime *rt, size_t nf, size_t nk) {
    rt->n_formats = nf;
    rt->n_kernels = nk;
    plugin_rec_free(rt->plugins[--rt->n_plugins]);
}

/* Run an entry's init and keep it, or refuse it.  0 on success. */
static int plugin_attach(qc_runtime *rt, const qc_plugin_entry *e, const char *path, void *handle, int builtin,
                         char *err, size_t errlen) {
    if (e->abi_version != QC_PLUGIN_ABI_VERSION) {
        qc_errf(err, errlen, "plugin ABI version mismatch: the plugin was built for ABI %u, this qcore speaks ABI %u",
                e->abi_version, QC_PLUGIN_ABI_VERSION);
        return -1;
    }
    if (e->struct_size < ENTRY_V1_SIZE) {
        qc_errf(err, errlen, "entry struct_size %u is smaller than the %zu bytes of ABI %u", e->struct_size,
                (size_t)ENTRY_V1_SIZE, QC_PLUGIN_ABI_VERSION);
        return -1;
    }
    if (!e->id || !*e->id || !e->name || !valid_name(e->name, 32) || !e->init) {
        qc_errf(err, errlen, "entry lacks an id, a valid name (a-z 0-9 _ . -) or an init function");
        return -1;
    }
    for (size_t i = 0; i < rt->n_plugins; i++)
        if (strcmp(rt->plugins[i]->entry->id, e->id) == 0) {
            qc_errf(err, errlen, "plugin id '%s' is already loaded from %s", e->id, rt->plugins[i]->path);
            return -1;
        }
    if (qc_grow((void **)&rt->plugins, &rt->cap_plugins, rt->n_plugins, sizeof *rt->plugins)) {
        qc_errf(err, errlen, "out of memory");
        return -1;
    }
    qc_plugin_rec *p = calloc(1, sizeof *p);
    if (p) p->host = calloc(1, sizeof *p->host);
    if (p) p->path = strdup(path);
    if (!p || !p->host || !p->path) {
        plugin_rec_free(p);
        qc_errf(err, errlen, "out of memory");
        return -1;
    }
    p->entry = e;
    p->handle = handle;
    p->fd = -1;
    p->builtin = builtin;
    p->host->rt = rt;
    p->host->plugin_index = rt->n_plugins;
    rt->plugins[rt->n_plugins++] = p;
    size_t nf = rt->n_formats, nk = rt->n_kernels;
    char perr[256] = "";
    p->host->in_init = 1;
    qc_status st = e->init(&host_api, p->host, perr, sizeof perr);
    p->host->in_init = 0;
    /* A refused registration explains more than the init status it caused. */
    if (p->host->failure[0]) {
        qc_errf(err, errlen, "%s", p->host->failure);
        if (st == QC_OK && e->deinit) e->deinit();
        rollback_last(rt, nf, nk);
        return -1;
    }
    if (st != QC_OK) {
        qc_errf(err, errlen, "init failed (status %d): %s", (int)st, perr[0] ? perr : "no message");
        rollback_last(rt, nf, nk);
        return -1;
    }
    return 0;
}

/* Refuse files and folders that someone else could have replaced. */
static int check_stat(const struct stat *sp, const char *what, char *err, size_t errlen) {
    const struct stat st = *sp;
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0) {
        qc_errf(err, errlen, "%s is owned by uid %u, not by you (uid %u) or root", what, (unsigned)st.st_uid,
                (unsigned)me);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        qc_errf(err, errlen, "%s is writable by %s (mode %04o)", what,
                (st.st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

static int check_permissions(const char *path, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) {
        qc_errf(err, errlen, "cannot stat %s: %s", what, strerror(errno));
        return -1;
    }
    return check_stat(&st, what, err, errlen);
}

qc_status qc_runtime_load_plugin(qc_runtime *rt, const char *path, char *err, size_t errlen) {
    char reason[512] = "";
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        qc_errf(reason, sizeof reason, "cannot resolve path: %s", strerror(errno));
        goto refuse;
    }
    for (size_t i = 0; i < rt->n_plugins; i++)
        if (strcmp(rt->plugins[i]->path, real) == 0) return QC_OK; /* same file via another path */
    /* The file is opened once and judged and loaded through that one open
     * file (/proc/self/fd/N), so it cannot be swapped between the check and
     * dlopen.  The descriptor stays open while the plugin is loaded, so its
     * number (and with it the name dlopen keys on) is not reused. */
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        qc_errf(reason, sizeof reason, fd < 0 ? "cannot open: %s" : "not a regular file", strerror(errno));
        if (fd >= 0) close(fd);
        goto refuse;
    }
    char dir[PATH_MAX];
    qc_strlcpy(dir, real, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = 0;
    if (check_stat(&st, "the file", reason, sizeof reason) ||
        check_permissions(dir, "its folder", reason, sizeof reason)) {
        close(fd);
        goto refuse;
    }
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    dlerror();
    void *h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *d = dlerror();
        qc_errf(reason, sizeof reason, "dlopen failed: %s", d ? d : "unknown error");
        close(fd);
        goto refuse;
    }
    const qc_plugin_entry *e = dlsym(h, QC_PLUGIN_ENTRY_SYMBOL);
    if (!e) {
        qc_errf(reason, sizeof reason, "no entry symbol '%s' (not a qcore plugin?)", QC_PLUGIN_ENTRY_SYMBOL);
        dlclose(h);
        close(fd);
        goto refuse;
    }
    if (plugin_attach(rt, e, real, h, 0, reason, sizeof reason) != 0) {
        dlclose(h);
        close(fd);
        goto refuse;
    }
    rt->plugins[rt->n_plugins - 1]->fd = fd;
    qc_log(QC_LOG_INFO, "loaded plugin %s %s from %s", e->id, e->version ? e->version : "", real);
    return QC_OK;
refuse:
    add_refusal(rt, path, reason);
    qc_errf(err, errlen, "%s: %s", path, reason);
    return QC_ERR_INVALID;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Load every *.so of a folder, in name order (deterministic registration). */
static void load_dir(qc_runtime *rt, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno != ENOENT) qc_log(QC_LOG_WARN, "plugin folder %s: %s", dir, strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 3, ".so") != 0) continue;
        if (qc_grow((void **)&names, &cap, n, sizeof *names)) break;
        if (!(names[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char err[600];
        qc_runtime_load_plugin(rt, path, err, sizeof err);
        free(names[i]);
    }
    free(names);
}

static void add_dirs(qc_runtime *rt, const char *list) {
    if (!list) return;
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ':');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l > 0 && l < PATH_MAX) {
            char *dir = strndup(s, l);
            int dup = 0;
            for (size_t i = 0; dir && i < rt->n_dirs; i++) dup |= strcmp(rt->dirs[i], dir) == 0;
            if (dir && !dup && qc_grow((void **)&rt->dirs, &rt->cap_dirs, rt->n_dirs, sizeof(char *)) == 0)
                rt->dirs[rt->n_dirs++] = dir;
            else
                free(dir);
        }
        if (!e) break;
        s = e + 1;
    }
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The one default folder: next to the executable (build tree: <exe>/plugins;
 * install: <exe>/../lib/qcore/plugins), so a build copied to another machine
 * finds its plugins; then the paths compiled in.  Only the first that exists
 * is used, so an installed copy never shadows the build tree's. */
static const char *default_plugin_dir(void) {
    static char buf[PATH_MAX + 32];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, sizeof buf, "%s/plugins", exe);
        if (is_dir(buf)) return buf;
        snprintf(buf, sizeof buf, "%s/../lib/qcore/plugins", exe);
        if (is_dir(buf)) return buf;
    }
    if (is_dir(QC_BUILD_PLUGIN_DIR)) return QC_BUILD_PLUGIN_DIR;
    if (is_dir(QC_INSTALL_PLUGIN_DIR)) return QC_INSTALL_PLUGIN_DIR;
    return NULL;
}

qc_runtime *qc_runtime_open(const qc_runtime_options *opt, char *err, size_t errlen) {
    qc_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) { qc_errf(err, errlen, "out of memory"); return NULL; }
    qc_runtime_options o = {0};
    if (opt) memcpy(&o, opt, opt->struct_size && opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    rt->config = o.config;
    char berr[256];
    if (plugin_attach(rt, &qc_builtin_entry, "(builtin)", NULL, 1, berr, sizeof berr) != 0) {
        qc_errf(err, errlen, "the core's built-in formats failed to register: %s", berr);
        qc_runtime_close(rt);
        return NULL;
    }
    add_dirs(rt, o.plugin_path);
    if (!o.skip_default_dirs) add_dirs(rt, qc_config_get(o.config, "plugins", "path"));
    if (!o.skip_env) add_dirs(rt, getenv("QCORE_PLUGIN_PATH"));
    if (!o.skip_default_dirs) add_dirs(rt, default_plugin_dir());
    for (size_t i = 0; i < rt->n_dirs; i++) {
        struct stat st;
        if (stat(rt->dirs[i], &st) == 0 && S_ISREG(st.st_mode)) {
            char e2[600];
            qc_runtime_load_plugin(rt, rt->dirs[i], e2, sizeof e2); /* a file named directly */
        } else {
            load_dir(rt, rt->dirs[i]);
        }
    }
    return rt;
}

void qc_runtime_close(qc_runtime *rt) {
    if (!rt) return;
    for (size_t i = rt->n_plugins; i-- > 0;) {
        qc_plugin_rec *p = rt->plugins[i];
        if (p->entry->deinit) p->entry->deinit();
        if (p->handle) dlclose(p->handle);
        plugin_rec_free(p);
    }
    free(rt->plugins);
    free(rt->formats);
    free(rt->kernels);
    for (size_t i = 0; i < rt->n_refusals; i++) free(rt->refusals[i]);
    free(rt->refusals);
    for (size_t i = 0; i < rt->n_dirs; i++) free(rt->dirs[i]);
    free(rt->dirs);
    free(rt);
}

/* ---- queries ---- */

size_t qc_plugin_count(const qc_runtime *rt) { return rt->n_plugins; }

int qc_plugin_get(const qc_runtime *rt, size_t i, qc_plugin_info *out) {
    if (i >= rt->n_plugins) return -1;
    const qc_plugin_rec *p = rt->plugins[i];
    out->path = p->path;
    out->id = p->entry->id;
    out->name = p->entry->name;
    out->version = p->entry->version ? p->entry->version : "";
    out->description = p->entry->description ? p->entry->description : "";
    out->abi_version = p->entry->abi_version;
    out->n_formats = p->n_formats;
    out->n_kernels = p->n_kernels;
    out->builtin = p->builtin;
    return 0;
}

size_t qc_plugin_refusal_count(const qc_runtime *rt) { return rt->n_refusals; }
const char *qc_plugin_refusal(const qc_runtime *rt, size_t i) { return i < rt->n_refusals ? rt->refusals[i] : NULL; }
size_t qc_plugin_dir_count(const qc_runtime *rt) { return rt->n_dirs; }
const char *qc_plugin_dir(const qc_runtime *rt, size_t i) { return i < rt->n_dirs ? rt->dirs[i] : NULL; }

size_t qc_format_count(const qc_runtime *rt) { return rt->n_formats; }
const qc_format_desc *qc_format_get(const qc_runtime *rt, size_t i) {
    return i < rt->n_formats ? &rt->formats[i].desc : NULL;
}
const qc_format_desc *qc_format_find(const qc_runtime *rt, const char *name) {
    const qc_format_rec *f = name ? find_format(rt, name) : NULL;
    return f ? &f->desc : NULL;
}
const char *qc_format_plugin(const qc_runtime *rt, const char *name) {
    const qc_format_rec *f = name ? find_format(rt, name) : NULL;
    return f ? rt->plugins[f->plugin_index]->entry->id : NULL;
}

size_t qc_kernel_count(const qc_runtime *rt) { return rt->n_kernels; }
const qc_kernel_desc *qc_kernel_get(const qc_runtime *rt, size_t i) {
    return i < rt->n_kernels ? &rt->kernels[i].desc : NULL;
}
const qc_kernel_desc *qc_kernel_find(const qc_runtime *rt, const char *id) {
    for (size_t i = 0; id && i < rt->n_kernels; i++)
        if (strcmp(rt->kernels[i].desc.id, id) == 0) return &rt->kernels[i].desc;
    return NULL;
}

void qc_format_missing(const qc_runtime *rt, const qc_format_desc *f, char *buf, size_t len) {
    int has_ref = 0, has_gpu = 0;
    for (size_t i = 0; i < rt->n_kernels; i++) {
        const qc_kernel_desc *k = &rt->kernels[i].desc;
        if (strcmp(k->format, f->name) != 0) continue;
        has_ref |= k->reference != NULL;
        has_gpu |= k->cuda_source != NULL;
    }
    qc_sbuf b = {0};
    const char *sep = "";
    if (f->kind == QC_FORMAT_LINEAR && !f->quantize) { qc_sbuf_printf(&b, "%squantize", sep); sep = ", "; }
    if (f->kind == QC_FORMAT_LINEAR && !f->dequantize) { qc_sbuf_printf(&b, "%sdequantize", sep); sep = ", "; }
    if (!has_ref) { qc_sbuf_printf(&b, "%sreference kernel", sep); sep = ", "; }
    if (!has_gpu) { qc_sbuf_printf(&b, "%sGPU kernel", sep); }
    qc_strlcpy(buf, b.data ? b.data : "", len);
    qc_sbuf_free(&b);
}

const void *qc_format_extension(const qc_runtime *rt, const char *format, const char *ext_id) {
    const qc_format_rec *f = format ? find_format(rt, format) : NULL;
    if (!f) return NULL;
    const qc_plugin_entry *e = rt->plugins[f->plugin_index]->entry;
    return e->get_extension ? e->get_extension(ext_id) : NULL;
}
