/* qc_safetensors.c - safetensors reader (single file or index-sharded): maps each file once, checks every header field. */
#define _POSIX_C_SOURCE 200809L
#include "qc_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the reference parser's cap */
#define ST_MAX_INDEX_BYTES (64u << 20)
#define ST_MAX_DIMS 8
#define ST_MEMORY_NAME "<memory>"

typedef struct st_file {
    char *path;
    const uint8_t *base;
    size_t size;
    int mapped, own_path;
    json_t *root;              /* keeps tensor names and metadata alive */
    json_t *meta;              /* "__metadata__" inside root, or NULL */
} st_file;

struct qc_safetensors {
    st_file *files;
    size_t n_files, cap_files;
    qc_st_tensor *t;
    size_t n, cap;
    const qc_st_tensor **sorted;
};

/* ---- messages ------------------------------------------------------------ */

/* Untrusted text for a message: control bytes become '?', long names are cut. */
static const char *shown(char *dst, size_t cap, const char *s) {
    size_t j = 0, n = strlen(s), lim = cap - 4;
    for (size_t i = 0; i < n && j < lim; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[j++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (j < n) { memcpy(dst + j, "...", 3); j += 3; }
    dst[j] = 0;
    return dst;
}

static void tfail(char *err, size_t errlen, const char *file, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void tfail(char *err, size_t errlen, const char *file, const char *name, const char *fmt, ...) {
    char msg[384], nb[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    qc_errf(err, errlen, "%s: tensor '%s': %s", file, shown(nb, sizeof nb, name), msg);
}

/* ---- dtypes -------------------------------------------------------------- */

typedef struct st_dtype {
    const char *name;
    qc_dtype dtype;            /* QC_DT_NONE: known to safetensors, not supported here */
    unsigned bytes;
} st_dtype;

static const st_dtype DTYPES[] = {
    {"F32", QC_DT_F32, 4},  {"F16", QC_DT_F16, 2},         {"BF16", QC_DT_BF16, 2},
    {"F8_E4M3", QC_DT_F8_E4M3, 1}, {"F8_E5M2", QC_DT_F8_E5M2, 1}, {"F8_E8M0", QC_DT_E8M0, 1},
    {"I8", QC_DT_I8, 1},    {"U8", QC_DT_U8, 1},           {"I32", QC_DT_I32, 4},
    {"I64", QC_DT_I64, 8},  {"F64", QC_DT_F64, 8},
    {"BOOL", QC_DT_NONE, 0}, {"I16", QC_DT_NONE, 0},       {"U16", QC_DT_NONE, 0},
    {"U32", QC_DT_NONE, 0}, {"U64", QC_DT_NONE, 0},        {"F4", QC_DT_NONE, 0},
    {"F6_E2M3", QC_DT_NONE, 0}, {"F6_E3M2", QC_DT_NONE, 0}, {"C64", QC_DT_NONE, 0},
};

static const st_dtype *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(DTYPES[i].name, name) == 0) return &DTYPES[i];
    return NULL;
}

/* ---- one file ------------------------------------------------------------ */

static uint64_t ld64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

typedef struct entry {
    qc_st_tensor t;
    uint64_t begin, end;
} entry;

static int cmp_entry(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->t.name, y->t.name);
}

/* A non-negative JSON integer. */
static int json_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Check one tensor entry of a header into e (data offsets not yet placed). */
static int parse_entry(const char *file, const char *name, json_t *v, uint64_t data_size, entry *e, char *err,
                       size_t errlen) {
    memset(e, 0, sizeof *e);
    e->t.name = name;
    e->t.file = file;
    if (!json_is_object(v)) {
        tfail(err, errlen, file, name, "entry is not a JSON object");
        return -1;
    }
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo)) {
        tfail(err, errlen, file, name, "needs \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)");
        return -1;
    }
    char db[48];
    const st_dtype *dt = find_dtype(json_string_value(jd));
    if (!dt) {
        tfail(err, errlen, file, name, "unknown dtype '%s'", shown(db, sizeof db, json_string_value(jd)));
        return -1;
    }
    if (dt->dtype == QC_DT_NONE) {
        tfail(err, errlen, file, name,
              "dtype %s is not supported (supported: F32 F16 BF16 F8_E4M3 F8_E5M2 F8_E8M0 I8 U8 I32 I64 F64)",
              dt->name);
        return -1;
    }
    e->t.dtype = dt->dtype;
    size_t nd = json_array_size(js);
    if (nd > ST_MAX_DIMS) {
        tfail(err, errlen, file, name, "%zu dimensions, at most %d are supported", nd, ST_MAX_DIMS);
        return -1;
    }
    e->t.ndim = (int)nd;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (json_uint(json_array_get(js, i), &d)) {
            tfail(err, errlen, file, name, "shape[%zu] is not a non-negative integer", i);
            return -1;
        }
        e->t.shape[i] = (int64_t)d;
        if (d && numel > (uint64_t)INT64_MAX / d) overflow = 1;
        else numel *= d;
    }
    /* the element count, then the byte count, must fit int64 and size_t */
    if (overflow || numel > SIZE_MAX / dt->bytes || numel * dt->bytes > (uint64_t)INT64_MAX) {
        tfail(err, errlen, file, name, "the shape's size in bytes overflows (%zu dimensions of %s)", nd, dt->name);
        return -1;
    }
    uint64_t bytes = numel * dt->bytes;
    if (json_array_size(jo) != 2 || json_uint(json_array_get(jo, 0), &e->begin) ||
        json_uint(json_array_get(jo, 1), &e->end)) {
        tfail(err, errlen, file, name, "data_offsets must be two non-negative integers [begin, end]");
        return -1;
    }
    if (e->end < e->begin) {
        tfail(err, errlen, file, name, "data_offsets [%llu, %llu): end is before begin",
              (unsigned long long)e->begin, (unsigned long long)e->end);
        return -1;
    }
    if (e->end > data_size) {
        tfail(err, errlen, file, name, "data_offsets [%llu, %llu) run past the end of the data (%llu bytes)",
              (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_size);
        return -1;
    }
    if (e->end - e->begin != bytes) {
        tfail(err, errlen, file, name, "data_offsets [%llu, %llu) hold %llu bytes, but the shape of %s needs %llu",
              (unsigned long long)e->begin, (unsigned long long)e->end,
              (unsigned long long)(e->end - e->begin), dt->name, (unsigned long long)bytes);
        return -1;
    }
    e->t.bytes = (size_t)bytes;
    return 0;
}

static int push_tensor(qc_safetensors *s, const qc_st_tensor *t) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        qc_st_tensor *nt = realloc(s->t, nc * sizeof *nt);
        if (!nt) return -1;
        s->t = nt;
        s->cap = nc;
    }
    s->t[s->n++] = *t;
    return 0;
}

/* Parse the header of f (already mapped or borrowed) and append its tensors. */
static int parse_file(qc_safetensors *s, st_file *f, char *err, size_t errlen) {
    const char *file = f->path;
    if (f->size < 8) {
        qc_errf(err, errlen, "%s: header: %zu bytes is too small for a safetensors file (the header length alone "
                "is 8)", file, f->size);
        return -1;
    }
    uint64_t n = ld64(f->base);
    if (n > ST_MAX_HEADER) {
        qc_errf(err, errlen, "%s: header: length %llu is more than the limit of %llu bytes", file,
                (unsigned long long)n, ST_MAX_HEADER);
        return -1;
    }
    if (n > f->size - 8) {
        qc_errf(err, errlen, "%s: header: length %llu runs past the end of the file (%zu bytes)", file,
                (unsigned long long)n, f->size);
        return -1;
    }
    json_error_t je;
    f->root = json_loadb((const char *)f->base + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!f->root) {
        qc_errf(err, errlen, "%s: header: invalid JSON: %s (line %d, column %d)", file, je.text, je.line,
                je.column);
        return -1;
    }
    if (!json_is_object(f->root)) {
        qc_errf(err, errlen, "%s: header: not a JSON object", file);
        return -1;
    }
    uint64_t data_size = f->size - 8 - n;
    const uint8_t *data = f->base + 8 + n;
    size_t cap = json_object_size(f->root);
    entry *es = calloc(cap ? cap : 1, sizeof *es);
    if (!es) {
        qc_errf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    size_t ne = 0;
    int rc = -1;
    const char *key;
    json_t *v;
    json_object_foreach(f->root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                qc_errf(err, errlen, "%s: __metadata__: not a JSON object", file);
                goto out;
            }
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    char kb[80];
                    qc_errf(err, errlen, "%s: __metadata__: value of '%s' is not a string", file,
                            shown(kb, sizeof kb, mk));
                    goto out;
                }
            }
            f->meta = v;
            continue;
        }
        if (parse_entry(file, key, v, data_size, &es[ne], err, errlen)) goto out;
        ne++;
    }
    /* The data buffer must be covered exactly: sorted by offset, the first
     * tensor starts at 0, each starts where the previous ended, the last ends
     * at the end of the file. */
    if (ne) qsort(es, ne, sizeof *es, cmp_entry);
    uint64_t at = 0;
    for (size_t i = 0; i < ne; i++) {
        if (es[i].begin > at) {
            if (i == 0)
                tfail(err, errlen, file, es[i].t.name, "data_offsets begin at %llu, not 0 (a gap before the first "
                      "tensor)", (unsigned long long)es[i].begin);
            else
                tfail(err, errlen, file, es[i].t.name, "data_offsets [%llu, %llu) leave a gap after tensor '%s', "
                      "which ends at %llu", (unsigned long long)es[i].begin, (unsigned long long)es[i].end,
                      es[i - 1].t.name, (unsigned long long)at);
            goto out;
        }
        if (es[i].begin < at) {
            tfail(err, errlen, file, es[i].t.name, "data_offsets [%llu, %llu) overlap tensor '%s' [%llu, %llu)",
                  (unsigned long long)es[i].begin, (unsigned long long)es[i].end, es[i - 1].t.name,
                  (unsigned long long)es[i - 1].begin, (unsigned long long)es[i - 1].end);
            goto out;
        }
        at = es[i].end;
    }
    if (at != data_size) {
        qc_errf(err, errlen, "%s: data: the tensors cover %llu bytes, but the file holds %llu after the header "
                "(the sizes must match)", file, (unsigned long long)at, (unsigned long long)data_size);
        goto out;
    }
    for (size_t i = 0; i < ne; i++) {
        es[i].t.data = data + es[i].begin;
        if (push_tensor(s, &es[i].t)) {
            qc_errf(err, errlen, "%s: out of memory", file);
            goto out;
        }
    }
    rc = 0;
out:
    free(es);
    return rc;
}

/* ---- the handle ---------------------------------------------------------- */

void qc_safetensors_close(qc_safetensors *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) {
        st_file *f = &s->files[i];
        json_decref(f->root);
        if (f->mapped) munmap((void *)f->base, f->size);
        if (f->own_path) free(f->path);
    }
    free(s->files);
    free(s->t);
    free(s->sorted);
    free(s);
}

static st_file *add_file(qc_safetensors *s) {
    if (s->n_files == s->cap_files) {
        size_t nc = s->cap_files ? s->cap_files * 2 : 4;
        st_file *nf = realloc(s->files, nc * sizeof *nf);
        if (!nf) return NULL;
        s->files = nf;
        s->cap_files = nc;
    }
    st_file *f = &s->files[s->n_files++];
    memset(f, 0, sizeof *f);
    return f;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp((*(const qc_st_tensor *const *)a)->name, (*(const qc_st_tensor *const *)b)->name);
}

/* Sort for lookups; a name in two files is an error. */
static int finish(qc_safetensors *s, char *err, size_t errlen) {
    s->sorted = malloc((s->n ? s->n : 1) * sizeof *s->sorted);
    if (!s->sorted) {
        qc_errf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < s->n; i++) s->sorted[i] = &s->t[i];
    if (s->n) qsort(s->sorted, s->n, sizeof *s->sorted, cmp_tensor);
    for (size_t i = 1; i < s->n; i++) {
        const qc_st_tensor *a = s->sorted[i - 1], *b = s->sorted[i];
        if (strcmp(a->name, b->name) == 0) {
            tfail(err, errlen, b->file, b->name, "duplicate tensor name (also in %s)", a->file);
            return -1;
        }
    }
    return 0;
}

qc_safetensors *qc_safetensors_open_memory(const void *data, size_t size, char *err, size_t errlen) {
    qc_safetensors *s = calloc(1, sizeof *s);
    st_file *f = s ? add_file(s) : NULL;
    if (!f) {
        free(s);
        qc_errf(err, errlen, "%s: out of memory", ST_MEMORY_NAME);
        return NULL;
    }
    static const uint8_t empty[1];
    f->path = (char *)ST_MEMORY_NAME;
    f->base = data ? data : empty;
    f->size = data ? size : 0;
    if (parse_file(s, f, err, errlen) || finish(s, err, errlen)) {
        qc_safetensors_close(s);
        return NULL;
    }
    return s;
}

/* Map one file read-only into a new st_file of s and parse it. */
static int open_file(qc_safetensors *s, const char *path, char *err, size_t errlen) {
    st_file *f = add_file(s);
    size_t n = strlen(path);
    if (!f || !(f->path = malloc(n + 1))) {
        qc_errf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    f->own_path = 1;
    memcpy(f->path, path, n + 1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        qc_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        qc_errf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size < 8) {
        close(fd);
        qc_errf(err, errlen, "%s: header: %lld bytes is too small for a safetensors file (the header length "
                "alone is 8)", path, (long long)st.st_size);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        qc_errf(err, errlen, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size, strerror(e));
        return -1;
    }
    f->base = m;
    f->size = (size_t)st.st_size;
    f->mapped = 1;
    return parse_file(s, f, err, errlen);
}

/* A shard name from an index: a plain file name in the index's folder. */
static int bad_shard_name(const char *n) {
    return !*n || strchr(n, '/') || strchr(n, '\\') || strstr(n, "..");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int open_index(qc_safetensors *s, const char *path, char *err, size_t errlen) {
    size_t len;
    char *text = qc_read_file(path, ST_MAX_INDEX_BYTES, &len, err, errlen);
    if (!text) return -1;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        qc_errf(err, errlen, "%s: not valid JSON: %s (line %d, column %d)", path, je.text, je.line, je.column);
        return -1;
    }
    int rc = -1;
    const char **shards = NULL;
    char *full = NULL;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm)) {
        qc_errf(err, errlen, "%s: weight_map: missing or not a JSON object", path);
        goto out;
    }
    size_t nw = json_object_size(wm), ns = 0;
    if (!nw) {
        qc_errf(err, errlen, "%s: weight_map: empty", path);
        goto out;
    }
    shards = malloc((nw ? nw : 1) * sizeof *shards);
    if (!shards) {
        qc_errf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    const char *key;
    json_t *v;
    char nb[96], sb[96];
    json_object_foreach(wm, key, v) {
        const char *sh = json_string_value(v);
        if (!sh) {
            qc_errf(err, errlen, "%s: weight_map: the value of '%s' is not a string", path, shown(nb, sizeof nb, key));
            goto out;
        }
        if (bad_shard_name(sh)) {
            qc_errf(err, errlen, "%s: weight_map: '%s' -> '%s': a shard must be a file name in the index's folder "
                    "(no '/' or '..')", path, shown(nb, sizeof nb, key), shown(sb, sizeof sb, sh));
            goto out;
        }
        shards[ns++] = sh;
    }
    /* each distinct shard once, in name order */
    if (ns) qsort(shards, ns, sizeof *shards, cmp_str);
    size_t nu = 0;
    for (size_t i = 0; i < ns; i++)
        if (!nu || strcmp(shards[nu - 1], shards[i])) shards[nu++] = shards[i];
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    for (size_t i = 0; i < nu; i++) {
        size_t sl = strlen(shards[i]);
        free(full);
        full = malloc(dlen + sl + 1);
        if (!full) {
            qc_errf(err, errlen, "%s: out of memory", path);
            goto out;
        }
        memcpy(full, path, dlen);
        memcpy(full + dlen, shards[i], sl + 1);
        if (open_file(s, full, err, errlen)) goto out;
    }
    if (finish(s, err, errlen)) goto out;
    /* every entry of the map is where the index says */
    json_object_foreach(wm, key, v) {
        const qc_st_tensor *t = qc_safetensors_find(s, key);
        const char *sh = json_string_value(v);
        const char *base = t ? strrchr(t->file, '/') : NULL;
        base = base ? base + 1 : (t ? t->file : NULL);
        if (!t) {
            qc_errf(err, errlen, "%s: weight_map: tensor '%s' is not in its shard '%s'", path,
                    shown(nb, sizeof nb, key), shown(sb, sizeof sb, sh));
            goto out;
        }
        if (strcmp(base, sh) != 0) {
            qc_errf(err, errlen, "%s: weight_map: tensor '%s' is listed in '%s' but found in '%s'", path,
                    shown(nb, sizeof nb, key), shown(sb, sizeof sb, sh), t->file);
            goto out;
        }
    }
    rc = 0;
out:
    free(full);
    free(shards);
    json_decref(root);
    return rc;
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* In a folder: the standard names first, else the only index or only file. */
static char *pick_in_folder(const char *dir, char *err, size_t errlen) {
    static const char *const standard[] = {"model.safetensors.index.json", "model.safetensors"};
    size_t dl = strlen(dir);
    char *p = NULL;
    for (int i = 0; i < 2; i++) {
        free(p);
        p = malloc(dl + strlen(standard[i]) + 2);
        if (!p) break;
        sprintf(p, "%s/%s", dir, standard[i]);
        if (is_file(p)) return p;
    }
    free(p);
    DIR *d = opendir(dir);
    if (!d) {
        qc_errf(err, errlen, "%s: cannot open folder: %s", dir, strerror(errno));
        return NULL;
    }
    char *found[2] = {NULL, NULL}; /* [0] index, [1] plain file */
    int count[2] = {0, 0};
    struct dirent *de;
    while ((de = readdir(d))) {
        int kind = ends_with(de->d_name, ".safetensors.index.json") ? 0 : ends_with(de->d_name, ".safetensors") ? 1 : -1;
        if (kind < 0) continue;
        if (count[kind]++ == 0) {
            found[kind] = malloc(dl + strlen(de->d_name) + 2);
            if (found[kind]) sprintf(found[kind], "%s/%s", dir, de->d_name);
        }
    }
    closedir(d);
    char *pick = NULL;
    if (count[0] == 1) pick = found[0];
    else if (count[0] == 0 && count[1] == 1) pick = found[1];
    if (pick != found[0]) free(found[0]);
    if (pick != found[1]) free(found[1]);
    if (!pick)
        qc_errf(err, errlen, "%s: no model.safetensors.index.json or model.safetensors, and not exactly one "
                "*.safetensors.index.json or *.safetensors (found %d and %d)", dir, count[0], count[1]);
    return pick;
}

qc_safetensors *qc_safetensors_open(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) {
        qc_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *picked = NULL;
    if (S_ISDIR(st.st_mode)) {
        picked = pick_in_folder(path, err, errlen);
        if (!picked) return NULL;
        path = picked;
    }
    qc_safetensors *s = calloc(1, sizeof *s);
    int rc = -1;
    if (!s) qc_errf(err, errlen, "%s: out of memory", path);
    else if (ends_with(path, ".json")) rc = open_index(s, path, err, errlen);
    else rc = open_file(s, path, err, errlen) || finish(s, err, errlen) ? -1 : 0;
    free(picked);
    if (rc) {
        qc_safetensors_close(s);
        return NULL;
    }
    return s;
}

/* ---- queries ------------------------------------------------------------- */

size_t qc_safetensors_count(const qc_safetensors *s) { return s ? s->n : 0; }
size_t qc_safetensors_file_count(const qc_safetensors *s) { return s ? s->n_files : 0; }

const qc_st_tensor *qc_safetensors_at(const qc_safetensors *s, size_t i) {
    return s && i < s->n ? &s->t[i] : NULL;
}

static int cmp_key_tensor(const void *key, const void *elem) {
    return strcmp(key, (*(const qc_st_tensor *const *)elem)->name);
}

const qc_st_tensor *qc_safetensors_find(const qc_safetensors *s, const char *name) {
    if (!s || !name || !s->n || !s->sorted) return NULL;
    const qc_st_tensor *const *hit = bsearch(name, s->sorted, s->n, sizeof *s->sorted, cmp_key_tensor);
    return hit ? *hit : NULL;
}

const char *qc_safetensors_metadata(const qc_safetensors *s, const char *key) {
    if (!s || !key) return NULL;
    for (size_t i = 0; i < s->n_files; i++) {
        const char *v = json_string_value(json_object_get(s->files[i].meta, key));
        if (v) return v;
    }
    return NULL;
}
