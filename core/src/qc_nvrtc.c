/* qc_nvrtc.c - NVRTC compiles of kernel source into cubins, cached on disk under a SHA-256 key. */
#define _GNU_SOURCE
#include "qc_nvrtc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "qc_util.h"

/* NVRTC subset, declared here so that no CUDA header is needed to build. */
typedef int nvrtcResult;
typedef struct qc_nvrtc_prog_ *nvrtcProgram;
#define NVRTC_SUCCESS 0

typedef struct nvrtc_fns {
    const char *(*nvrtcGetErrorString)(nvrtcResult);
    nvrtcResult (*nvrtcVersion)(int *, int *);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                      const char *const *);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
    /* optional (CUDA 11.2+): without them every arch is tried */
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int *);
    nvrtcResult (*nvrtcGetSupportedArchs)(int *);
} nvrtc_fns;

#define MAX_ARCHS 64
#define MAX_INCLUDES 2

struct qc_nvrtc {
    nvrtc_fns f;
    int major, minor;
    char *dir; /* NULL: no disk cache */
    char *include_opts[MAX_INCLUDES]; /* "-I<cuda>/include", "-I<cuda>/include/cccl" */
    int n_includes;
    int archs[MAX_ARCHS];
    int n_archs; /* 0: unknown, try any */
    pthread_mutex_t mu; /* guards the counters */
    unsigned compiles, hits, recompiled;
};

/* ---- cache file layout ----
 * All integers little-endian.
 *   0  8  magic "QCKCUBIN"
 *   8  4  QC_KERNEL_CACHE_FORMAT
 *  12  4  header size (88)
 *  16  8  payload size in bytes
 *  24 32  SHA-256 key the file was written for (guards against a renamed file)
 *  56 32  SHA-256 of the payload
 *  88     payload: the cubin */
#define HDR_MAGIC "QCKCUBIN"
#define HDR_SIZE 88u
/* Largest cubin accepted from disk: far above any kernel, small enough that
 * a hostile size field cannot make us allocate much. */
#define MAX_CUBIN_BYTES ((uint64_t)256 << 20)

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void sha256_of(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, data);
    sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

static void hex(const uint8_t *b, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

/* One field of the key: its length (8 bytes) then its bytes, so that no two
 * different field lists serialize to the same stream. */
static void key_field(struct sha256_ctx *c, const void *data, size_t len) {
    unsigned char l[8];
    put_u64(l, len);
    sha256_update(c, sizeof l, l);
    if (len) sha256_update(c, len, data);
}
static void key_str(struct sha256_ctx *c, const char *s) { key_field(c, s, strlen(s)); }

/* ---- files ---- */

static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *data, size_t len) {
    char *p = data;
    while (len) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Write a+b to `path` through a temporary file in the same folder and a
 * rename, so a concurrent reader sees the old file or the whole new one. */
static int write_atomic(const char *path, const void *a, size_t alen, const void *b, size_t blen, char *err,
                        size_t errlen) {
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp) {
        qc_errf(err, errlen, "%s: path too long", path);
        return -1;
    }
    int fd = mkstemp(tmp); /* mode 0600 */
    if (fd < 0) {
        qc_errf(err, errlen, "cannot create a file next to %s: %s", path, strerror(errno));
        return -1;
    }
    int ok = write_all(fd, a, alen) == 0 && (!blen || write_all(fd, b, blen) == 0) && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        qc_errf(err, errlen, "cannot write %s: %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

typedef enum { LOAD_OK, LOAD_MISSING, LOAD_CORRUPT } load_result;

/* Read and check a cache file.  Nothing in it is trusted beyond the checks:
 * the header is bounds-checked against the file size before any allocation. */
static load_result cache_load(const char *path, const uint8_t key[32], void **data, size_t *size, char *why,
                              size_t whylen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return LOAD_MISSING;
        qc_errf(why, whylen, "cannot open: %s", strerror(errno));
        return LOAD_CORRUPT;
    }
    load_result res = LOAD_CORRUPT;
    unsigned char h[HDR_SIZE];
    void *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        qc_errf(why, whylen, "not a regular file");
        goto out;
    }
    if ((uint64_t)st.st_size < HDR_SIZE) {
        qc_errf(why, whylen, "short file (%lld bytes, the header alone is %u)", (long long)st.st_size, HDR_SIZE);
        goto out;
    }
    if (read_all(fd, h, HDR_SIZE) != 0) {
        qc_errf(why, whylen, "cannot read the header");
        goto out;
    }
    if (memcmp(h, HDR_MAGIC, 8) != 0) {
        qc_errf(why, whylen, "bad magic");
        goto out;
    }
    if (get_u32(h + 8) != QC_KERNEL_CACHE_FORMAT || get_u32(h + 12) != HDR_SIZE) {
        qc_errf(why, whylen, "format %u with a %u-byte header (expected %u, %u)", get_u32(h + 8),
                get_u32(h + 12), QC_KERNEL_CACHE_FORMAT, HDR_SIZE);
        goto out;
    }
    uint64_t psize = get_u64(h + 16);
    if (psize == 0 || psize > MAX_CUBIN_BYTES || psize != (uint64_t)st.st_size - HDR_SIZE) {
        qc_errf(why, whylen, "payload size %llu does not match the file (%lld bytes)", (unsigned long long)psize,
                (long long)st.st_size);
        goto out;
    }
    if (memcmp(h + 24, key, 32) != 0) {
        qc_errf(why, whylen, "written for another key");
        goto out;
    }
    buf = malloc((size_t)psize);
    if (!buf) {
        qc_errf(why, whylen, "out of memory for %llu bytes", (unsigned long long)psize);
        goto out;
    }
    if (read_all(fd, buf, (size_t)psize) != 0) {
        qc_errf(why, whylen, "short read");
        goto out;
    }
    uint8_t sum[32];
    sha256_of(buf, (size_t)psize, sum);
    if (memcmp(sum, h + 56, 32) != 0) {
        qc_errf(why, whylen, "checksum mismatch");
        goto out;
    }
    *data = buf;
    *size = (size_t)psize;
    buf = NULL;
    res = LOAD_OK;
out:
    free(buf);
    close(fd);
    return res;
}

static int cache_store(const char *path, const uint8_t key[32], const void *cubin, size_t size, char *err,
                       size_t errlen) {
    unsigned char h[HDR_SIZE];
    memset(h, 0, sizeof h);
    memcpy(h, HDR_MAGIC, 8);
    put_u32(h + 8, QC_KERNEL_CACHE_FORMAT);
    put_u32(h + 12, HDR_SIZE);
    put_u64(h + 16, size);
    memcpy(h + 24, key, 32);
    sha256_of(cubin, size, h + 56);
    return write_atomic(path, h, sizeof h, cubin, size, err, errlen);
}

/* ---- the cubin itself ---- */

static int in_bounds(uint64_t off, uint64_t len, uint64_t total) { return off <= total && len <= total - off; }

/* Is `entry` a kernel (an ELF function symbol flagged as a CUDA entry) of
 * this cubin?  1 yes; 0 no; 2 a function of that name that is not a
 * kernel; -1 the ELF is not readable. */
#define STO_CUDA_ENTRY 0x10
static int cubin_has_entry(const unsigned char *e, size_t size, const char *entry) {
    if (size < 64 || memcmp(e, "\177ELF", 4) != 0 || e[4] != 2 /* 64-bit */ || e[5] != 1 /* LE */) return -1;
    uint64_t shoff = get_u64(e + 0x28);
    uint16_t shentsize = get_u16(e + 0x3A), shnum = get_u16(e + 0x3C);
    if (shentsize < 64 || !in_bounds(shoff, (uint64_t)shentsize * shnum, size)) return -1;
    size_t elen = strlen(entry);
    int found = 0;
    for (uint16_t s = 0; s < shnum; s++) {
        const unsigned char *sh = e + shoff + (uint64_t)s * shentsize;
        if (get_u32(sh + 4) != 2 /* SHT_SYMTAB */) continue;
        uint64_t off = get_u64(sh + 24), len = get_u64(sh + 32);
        uint32_t link = get_u32(sh + 40);
        if (!in_bounds(off, len, size) || link >= shnum) return -1;
        const unsigned char *strsh = e + shoff + (uint64_t)link * shentsize;
        uint64_t stroff = get_u64(strsh + 24), strlen_ = get_u64(strsh + 32);
        if (!in_bounds(stroff, strlen_, size)) return -1;
        for (uint64_t i = 0; i + 24 <= len; i += 24) {
            const unsigned char *sym = e + off + i;
            uint32_t name = get_u32(sym);
            if (name >= strlen_ || strlen_ - name < elen + 1) continue;
            const unsigned char *nm = e + stroff + name;
            if (memcmp(nm, entry, elen) != 0 || nm[elen] != 0) continue;
            if ((sym[4] & 0xF) != 2 /* STT_FUNC */) continue;
            if (sym[5] & STO_CUDA_ENTRY) return 1;
            found = 2;
        }
    }
    return found;
}

/* The first line of an NVRTC log that says "error" (else the first
 * non-empty line), without its line end. */
static void first_error_line(const char *log, char *out, size_t outlen) {
    const char *pick = NULL, *first = NULL;
    for (const char *p = log; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && !first) first = p;
        const char *hit = strstr(p, "error");
        if (hit && hit < p + len) {
            pick = p;
            break;
        }
        p = end ? end + 1 : NULL;
    }
    if (!pick) pick = first;
    if (!pick) {
        qc_strlcpy(out, "(empty log)", outlen);
        return;
    }
    size_t len = strcspn(pick, "\r\n");
    while (len && (pick[len - 1] == ' ' || pick[len - 1] == '\t')) len--;
    if (len >= outlen) len = outlen - 1;
    memcpy(out, pick, len);
    out[len] = 0;
}

/* ---- setup ---- */

static char *resolve_cache_dir(const char *given) {
    char buf[PATH_MAX];
    const char *v;
    if (given && *given) return strdup(given);
    if ((v = getenv("QCORE_CACHE_DIR")) && *v) return strdup(v);
    /* the XDG spec says to ignore a relative XDG_CACHE_HOME */
    if ((v = getenv("XDG_CACHE_HOME")) && v[0] == '/') {
        if ((size_t)snprintf(buf, sizeof buf, "%s/qcore/kernels", v) < sizeof buf) return strdup(buf);
        return NULL;
    }
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd pw, *res = NULL;
        char pwbuf[4096];
        if (getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res) home = res->pw_dir;
    }
    if (!home || !*home) return NULL;
    if ((size_t)snprintf(buf, sizeof buf, "%s/.cache/qcore/kernels", home) < sizeof buf) return strdup(buf);
    return NULL;
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}
static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The toolkit's headers (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h...) and, from
 * CUDA 13, libcu++ under include/cccl.  NVRTC looks in neither by itself. */
static void find_includes(qc_nvrtc *n) {
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    char inc[PATH_MAX], probe[PATH_MAX + 32], opt[PATH_MAX + 8];
    for (size_t i = 0; i < 3; i++) {
        if (!homes[i] || !*homes[i]) continue;
        if ((size_t)snprintf(inc, sizeof inc, "%s/include", homes[i]) >= sizeof inc) continue;
        snprintf(probe, sizeof probe, "%s/cuda_fp16.h", inc);
        if (!is_file(probe)) continue;
        snprintf(opt, sizeof opt, "-I%s", inc);
        n->include_opts[n->n_includes++] = strdup(opt);
        snprintf(probe, sizeof probe, "%s/cccl", inc);
        if (is_dir(probe)) {
            snprintf(opt, sizeof opt, "-I%s/cccl", inc);
            n->include_opts[n->n_includes++] = strdup(opt);
        }
        return;
    }
    qc_log(QC_LOG_INFO, "NVRTC: no CUDA include folder found (CUDA_HOME, CUDA_PATH, /usr/local/cuda); kernels "
                        "that include CUDA headers will not compile");
}

qc_nvrtc *qc_nvrtc_create(const char *cache_dir, char *err, size_t errlen) {
    char oerr[512];
    void *h = qc_nvrtc_open(oerr, sizeof oerr);
    if (!h) {
        qc_errf(err, errlen, "%s", oerr);
        return NULL;
    }
    qc_nvrtc *n = calloc(1, sizeof *n);
    if (!n) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
#define LOAD(name) *(void **)&n->f.name = dlsym(h, #name)
    LOAD(nvrtcGetErrorString);
    LOAD(nvrtcVersion);
    LOAD(nvrtcCreateProgram);
    LOAD(nvrtcDestroyProgram);
    LOAD(nvrtcCompileProgram);
    LOAD(nvrtcGetProgramLogSize);
    LOAD(nvrtcGetProgramLog);
    LOAD(nvrtcGetCUBINSize);
    LOAD(nvrtcGetCUBIN);
    LOAD(nvrtcGetNumSupportedArchs);
    LOAD(nvrtcGetSupportedArchs);
#undef LOAD
    if (!n->f.nvrtcGetErrorString || !n->f.nvrtcVersion || !n->f.nvrtcCreateProgram || !n->f.nvrtcDestroyProgram ||
        !n->f.nvrtcCompileProgram || !n->f.nvrtcGetProgramLogSize || !n->f.nvrtcGetProgramLog ||
        !n->f.nvrtcGetCUBINSize || !n->f.nvrtcGetCUBIN) {
        qc_errf(err, errlen, "the NVRTC library lacks functions qcore needs (cubin output needs CUDA 11.1+)");
        free(n);
        return NULL;
    }
    if (n->f.nvrtcVersion(&n->major, &n->minor) != NVRTC_SUCCESS) {
        qc_errf(err, errlen, "nvrtcVersion failed");
        free(n);
        return NULL;
    }
    int na = 0;
    if (n->f.nvrtcGetNumSupportedArchs && n->f.nvrtcGetSupportedArchs &&
        n->f.nvrtcGetNumSupportedArchs(&na) == NVRTC_SUCCESS && na > 0 && na <= MAX_ARCHS &&
        n->f.nvrtcGetSupportedArchs(n->archs) == NVRTC_SUCCESS)
        n->n_archs = na;
    pthread_mutex_init(&n->mu, NULL);
    find_includes(n);

    n->dir = resolve_cache_dir(cache_dir);
    if (!n->dir) {
        qc_log(QC_LOG_WARN, "kernel cache: no folder (set QCORE_CACHE_DIR or HOME); kernels are compiled on "
                            "every run");
    } else if (mkdir_p(n->dir) != 0) {
        qc_log(QC_LOG_WARN, "kernel cache: cannot create %s (%s); kernels are compiled on every run", n->dir,
               strerror(errno));
        free(n->dir);
        n->dir = NULL;
    }
    return n;
}

void qc_nvrtc_destroy(qc_nvrtc *n) {
    if (!n) return;
    for (int i = 0; i < n->n_includes; i++) free(n->include_opts[i]);
    free(n->dir);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

void qc_nvrtc_version(const qc_nvrtc *n, int *major, int *minor) {
    if (major) *major = n ? n->major : 0;
    if (minor) *minor = n ? n->minor : 0;
}

const char *qc_nvrtc_cache_dir(const qc_nvrtc *n) { return n ? n->dir : NULL; }

int qc_nvrtc_supports(const qc_nvrtc *n, int sm) {
    if (!n || sm <= 0) return 0;
    if (n->n_archs == 0) return 1;
    for (int i = 0; i < n->n_archs; i++)
        if (n->archs[i] == sm) return 1;
    return 0;
}

void qc_nvrtc_stats(const qc_nvrtc *n, unsigned *compiles, unsigned *hits, unsigned *recompiled) {
    qc_nvrtc *m = (qc_nvrtc *)n; /* the lock is not part of the logical state */
    pthread_mutex_lock(&m->mu);
    if (compiles) *compiles = n->compiles;
    if (hits) *hits = n->hits;
    if (recompiled) *recompiled = n->recompiled;
    pthread_mutex_unlock(&m->mu);
}

static void count(qc_nvrtc *n, unsigned *c) {
    pthread_mutex_lock(&n->mu);
    (*c)++;
    pthread_mutex_unlock(&n->mu);
}

void qc_cubin_free(qc_cubin *c) {
    if (!c) return;
    free(c->data);
    c->data = NULL;
    c->size = 0;
}

/* ---- compile ---- */

/* Save the log next to the cache entry, headed by what was compiled and how. */
static int save_log(const qc_nvrtc *n, const char *path, const char *name, const char *target,
                    const char *const *argv, int argc, const char *log) {
    qc_sbuf b = {0};
    qc_sbuf_printf(&b, "# qcore: NVRTC %d.%d log for %s, target %s\n# options:", n->major, n->minor, name,
                   target);
    for (int i = 0; i < argc; i++) qc_sbuf_printf(&b, " %s", argv[i]);
    qc_sbuf_printf(&b, "\n%s", log);
    char err[PATH_MAX + 64];
    int rc = b.failed ? -1 : write_atomic(path, b.data, b.len, NULL, 0, err, sizeof err);
    if (rc != 0 && !b.failed) qc_log(QC_LOG_WARN, "kernel cache: %s", err);
    qc_sbuf_free(&b);
    return rc;
}

static char *program_log(const qc_nvrtc *n, nvrtcProgram prog) {
    size_t len = 0;
    if (n->f.nvrtcGetProgramLogSize(prog, &len) != NVRTC_SUCCESS) len = 0;
    char *log = malloc(len + 1);
    if (!log) return NULL;
    if (len == 0 || n->f.nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) len = 0;
    log[len] = 0;
    return log;
}

qc_status qc_nvrtc_compile(qc_nvrtc *n, const char *name, const char *source, const char *entry,
                           const char *const *options, int sm, int arch_specific, qc_cubin *out,
                           qc_reason *why) {
    qc_reason scratch;
    if (!why) why = &scratch;
    memset(why, 0, sizeof *why);
    if (out) memset(out, 0, sizeof *out);
    if (!n || !source || !entry || !*entry || !out || sm <= 0 || sm > 9999) {
        qc_reason_set(why, "invalid", "qc_nvrtc_compile: missing source, entry or output, or a bad sm (%d)", sm);
        return QC_ERR_INVALID;
    }
    if (!name || !*name) name = "kernel.cu";
    snprintf(out->target, sizeof out->target, "sm_%d%s", sm, arch_specific ? "a" : "");
    if (arch_specific && sm < 90) {
        qc_reason_set(why, "arch", "%s: sm_%d has no arch-specific ('a') target", name, sm);
        return QC_ERR_UNSUPPORTED;
    }
    if (!qc_nvrtc_supports(n, sm)) {
        qc_reason_set(why, "arch", "%s: NVRTC %d.%d cannot compile for sm_%d", name, n->major, n->minor, sm);
        return QC_ERR_UNSUPPORTED;
    }

    /* the full option list NVRTC gets; all of it goes into the key */
    size_t n_user = 0;
    while (options && options[n_user]) n_user++;
    if (n_user > 1000) {
        qc_reason_set(why, "invalid", "%s: too many NVRTC options", name);
        return QC_ERR_INVALID;
    }
    int argc = 0;
    const char **argv = malloc((n_user + 3 + MAX_INCLUDES) * sizeof *argv);
    if (!argv) {
        qc_reason_set(why, "nomem", "out of memory");
        return QC_ERR_NOMEM;
    }
    char arch_opt[40];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", out->target);
    argv[argc++] = arch_opt;
    for (int i = 0; i < n->n_includes; i++) argv[argc++] = n->include_opts[i];
    argv[argc++] = "-std=c++17";
    argv[argc++] = "-default-device";
    for (size_t i = 0; i < n_user; i++) argv[argc++] = options[i];

    uint8_t key[32];
    {
        struct sha256_ctx c;
        char ver[32], fmt[16];
        sha256_init(&c);
        snprintf(fmt, sizeof fmt, "%u", QC_KERNEL_CACHE_FORMAT);
        snprintf(ver, sizeof ver, "%d.%d", n->major, n->minor);
        key_str(&c, "qcore.kernel-cache");
        key_str(&c, fmt);
        key_str(&c, ver);
        key_str(&c, out->target);
        key_str(&c, entry);
        key_str(&c, source);
        char argc_s[16];
        snprintf(argc_s, sizeof argc_s, "%d", argc);
        key_str(&c, argc_s);
        for (int i = 0; i < argc; i++) key_str(&c, argv[i]);
        sha256_digest(&c, sizeof key, key);
    }
    hex(key, sizeof key, out->key);

    char cpath[PATH_MAX], lpath[PATH_MAX];
    int have_dir = n->dir && (size_t)snprintf(cpath, sizeof cpath, "%s/%s.cubin", n->dir, out->key) < sizeof cpath &&
                   (size_t)snprintf(lpath, sizeof lpath, "%s/%s.log", n->dir, out->key) < sizeof lpath;

    qc_status st = QC_OK;
    if (have_dir) {
        char lwhy[200] = "";
        void *data = NULL;
        size_t size = 0;
        load_result lr = cache_load(cpath, key, &data, &size, lwhy, sizeof lwhy);
        if (lr == LOAD_OK && cubin_has_entry(data, size, entry) != 1) {
            qc_errf(lwhy, sizeof lwhy, "the cached cubin has no kernel %s", entry);
            free(data);
            lr = LOAD_CORRUPT;
        }
        if (lr == LOAD_OK) {
            out->data = data;
            out->size = size;
            out->from_cache = 1;
            count(n, &n->hits);
            free(argv);
            return QC_OK;
        }
        if (lr == LOAD_CORRUPT) {
            qc_log(QC_LOG_WARN, "kernel cache: %s: %s; deleting it and recompiling", cpath, lwhy);
            if (unlink(cpath) != 0 && errno != ENOENT)
                qc_log(QC_LOG_WARN, "kernel cache: cannot delete %s: %s", cpath, strerror(errno));
            count(n, &n->recompiled);
        }
    }

    nvrtcProgram prog = NULL;
    char *log = NULL;
    nvrtcResult r = n->f.nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        qc_reason_set(why, "compile", "%s: nvrtcCreateProgram failed: %s", name, n->f.nvrtcGetErrorString(r));
        st = QC_ERR_INTERNAL;
        goto done;
    }
    r = n->f.nvrtcCompileProgram(prog, argc, argv);
    count(n, &n->compiles);
    log = program_log(n, prog);
    int saved = have_dir && log && *log && save_log(n, lpath, name, out->target, argv, argc, log) == 0;
    if (r != NVRTC_SUCCESS) {
        char line[QC_REASON_TEXT_MAX];
        first_error_line(log ? log : "", line, sizeof line);
        /* the path first, so that a long error line is what gets cut */
        if (saved)
            qc_reason_set(why, "compile", "%s for %s: log %s: %s", name, out->target, lpath, line);
        else
            qc_reason_set(why, "compile", "%s for %s (%s; log not saved): %s", name, out->target,
                          n->f.nvrtcGetErrorString(r), line);
        qc_log(QC_LOG_INFO, "NVRTC: %s", why->text);
        st = QC_ERR_UNSUPPORTED;
        goto done;
    }
    if (log && *log) qc_log(QC_LOG_INFO, "NVRTC: %s for %s compiled with messages (log %s)", name, out->target,
                            saved ? lpath : "not saved");
    size_t size = 0;
    if (n->f.nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0 || size > MAX_CUBIN_BYTES) {
        qc_reason_set(why, "compile", "%s for %s: NVRTC gave no cubin (%zu bytes; an option asked for PTX only?)",
                      name, out->target, size);
        st = QC_ERR_UNSUPPORTED;
        goto done;
    }
    out->data = malloc(size);
    if (!out->data) {
        qc_reason_set(why, "nomem", "out of memory for a %zu-byte cubin", size);
        st = QC_ERR_NOMEM;
        goto done;
    }
    if (n->f.nvrtcGetCUBIN(prog, out->data) != NVRTC_SUCCESS) {
        qc_reason_set(why, "compile", "%s for %s: nvrtcGetCUBIN failed", name, out->target);
        st = QC_ERR_INTERNAL;
        goto done;
    }
    out->size = size;
    int has = cubin_has_entry(out->data, size, entry);
    if (has != 1) {
        qc_reason_set(why, "missing", "%s for %s: %s", name, out->target,
                      has == 2   ? "the entry is a function but not a __global__ kernel"
                      : has == 0 ? "no extern \"C\" __global__ function of the entry's name"
                                 : "the cubin is not a readable ELF file");
        /* name the entry without letting a long one push out the rest */
        size_t used = strlen(why->text);
        if (used + 4 < sizeof why->text)
            snprintf(why->text + used, sizeof why->text - used, " (%s)", entry);
        st = QC_ERR_UNSUPPORTED;
        goto done;
    }
    if (have_dir) {
        char werr[PATH_MAX + 64];
        if (cache_store(cpath, key, out->data, size, werr, sizeof werr) != 0)
            qc_log(QC_LOG_WARN, "kernel cache: %s", werr);
    }

done:
    if (st != QC_OK) qc_cubin_free(out);
    if (prog) n->f.nvrtcDestroyProgram(&prog);
    free(log);
    free(argv);
    return st;
}
