/* test_nvrtc.c - NVRTC compiles per arch, the on-disk kernel cache (hits, keys, corruption), and compile failures. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "nv_test.h"
#include "qc_test.h"
#include "qcore/qcore.h"

static const char *SIMPLE =
    "extern \"C\" __global__ void qc_axpy(float a, const float *x, float *y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "#ifdef QC_TILE\n"
    "    a *= QC_TILE;\n"
    "#endif\n"
    "    if (i < n) y[i] += a * x[i];\n"
    "}\n"
    "extern \"C\" __global__ void qc_scale(float *y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] *= 2.0f;\n"
    "}\n"
    "__global__ void qc_cpp(float *y) { y[0] = 1.0f; }\n"; /* C++ linkage: mangled, not an entry */

/* wgmma and setmaxnreg exist only on the arch-specific sm_90a target. */
static const char *HOPPER =
    "extern \"C\" __global__ void __launch_bounds__(128, 1) qc_hopper(float *y) {\n"
    "    asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n"
    "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 240;\\n\" ::: \"memory\");\n"
    "    y[threadIdx.x] = 1.0f;\n"
    "}\n";

static const char *BROKEN = "extern \"C\" __global__ void qc_bad(float *y) {\n    y[0] = ;\n}\n";

/* Needs the toolkit headers (-I<cuda>/include and include/cccl). */
static const char *HEADERS =
    "#include <cuda_fp16.h>\n"
    "#include <cuda/std/cstdint>\n"
    "extern \"C\" __global__ void qc_half(__half *y, cuda::std::int32_t n) {\n"
    "    if ((cuda::std::int32_t)threadIdx.x < n) y[threadIdx.x] = __float2half(1.5f);\n"
    "}\n";

static char g_dir[600];

static void stats(qc_nvrtc *n, unsigned *c, unsigned *h, unsigned *r) { qc_nvrtc_stats(n, c, h, r); }

static void cache_path(const qc_cubin *c, const char *ext, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s.%s", g_dir, c->key, ext);
}

/* ---- NVRTC missing ---- */

static void test_missing_nvrtc(void) {
    setenv("QCORE_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
    char err[512] = "";
    qc_nvrtc *n = qc_nvrtc_create(g_dir, err, sizeof err);
    CHECK(n == NULL, "created without NVRTC");
    CHECK_CONTAINS(err, "QCORE_NVRTC_LIBRARY=/nonexistent/libnvrtc.so");
    CHECK_CONTAINS(err, "cannot be compiled");
    qc_device_info info;
    qc_device_probe(&info);
    CHECK(info.nvrtc_available == 0, "probe found NVRTC through a bad override");
    CHECK_CONTAINS(info.nvrtc_reason, "QCORE_NVRTC_LIBRARY");
    qc_nvrtc_destroy(n);
    unsetenv("QCORE_NVRTC_LIBRARY");
}

/* ---- compile per arch, hits, keys ---- */

typedef struct arch_case {
    int sm, specific;
    const char *target;
} arch_case;
static const arch_case ARCHS[] = {{80, 0, "sm_80"}, {89, 0, "sm_89"}, {90, 0, "sm_90"}, {90, 1, "sm_90a"}};
#define N_ARCHS (sizeof ARCHS / sizeof ARCHS[0])

static int is_elf(const qc_cubin *c) { return c->size > 64 && memcmp(c->data, "\177ELF", 4) == 0; }

static void test_arches_and_hits(qc_nvrtc *n, qc_cubin first[N_ARCHS]) {
    qc_reason why;
    unsigned c0, h0, r0, c1, h1, r1;
    stats(n, &c0, &h0, &r0);
    for (size_t i = 0; i < N_ARCHS; i++) {
        qc_status st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, ARCHS[i].sm, ARCHS[i].specific,
                                        &first[i], &why);
        CHECK(st == QC_OK, "%s: %s: %s", ARCHS[i].target, why.code, why.text);
        CHECK(strcmp(first[i].target, ARCHS[i].target) == 0, "target %s", first[i].target);
        CHECK(first[i].from_cache == 0 && is_elf(&first[i]), "%s: fresh ELF cubin", ARCHS[i].target);
        CHECK(strlen(first[i].key) == 64, "key %s", first[i].key);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(first[i].key, first[j].key) != 0, "%s and %s share a key", ARCHS[i].target,
                  ARCHS[j].target);
        char p[1024];
        cache_path(&first[i], "cubin", p, sizeof p);
        struct stat sb;
        CHECK(stat(p, &sb) == 0 && (size_t)sb.st_size == first[i].size + 88, "%s: cache file %s", ARCHS[i].target,
              p);
        CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0077) == 0, "cache file readable by others: %o",
              (unsigned)sb.st_mode);
    }
    stats(n, &c1, &h1, &r1);
    CHECK(c1 - c0 == N_ARCHS && h1 == h0 && r1 == r0, "compiles %u hits %u recompiled %u", c1 - c0, h1 - h0,
          r1 - r0);

    /* the same again: all hits, byte-identical, nothing compiled */
    for (size_t i = 0; i < N_ARCHS; i++) {
        qc_cubin again;
        qc_status st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, ARCHS[i].sm, ARCHS[i].specific,
                                        &again, &why);
        CHECK(st == QC_OK && again.from_cache == 1, "%s: second compile not a hit (%s)", ARCHS[i].target, why.text);
        CHECK(again.size == first[i].size && memcmp(again.data, first[i].data, again.size) == 0,
              "%s: cached bytes differ", ARCHS[i].target);
        CHECK(strcmp(again.key, first[i].key) == 0, "key changed");
        qc_cubin_free(&again);
    }
    unsigned c2, h2;
    stats(n, &c2, &h2, NULL);
    CHECK(c2 == c1 && h2 - h1 == N_ARCHS, "second pass compiled %u, hit %u", c2 - c1, h2 - h1);

    /* "a second run": a new handle on the same folder compiles nothing */
    char err[512];
    qc_nvrtc *n2 = qc_nvrtc_create(g_dir, err, sizeof err);
    CHECK(n2 != NULL, "%s", err);
    if (n2) {
        for (size_t i = 0; i < N_ARCHS; i++) {
            qc_cubin again;
            qc_status st = qc_nvrtc_compile(n2, "simple.cu", SIMPLE, "qc_axpy", NULL, ARCHS[i].sm,
                                            ARCHS[i].specific, &again, &why);
            CHECK(st == QC_OK && again.from_cache, "%s: second run recompiled", ARCHS[i].target);
            qc_cubin_free(&again);
        }
        unsigned c, h, r;
        stats(n2, &c, &h, &r);
        CHECK(c == 0 && h == N_ARCHS && r == 0, "second run: compiles %u hits %u recompiled %u", c, h, r);
        qc_nvrtc_destroy(n2);
    }
}

static void test_keys(qc_nvrtc *n, const qc_cubin *base80) {
    qc_reason why;
    qc_cubin a, b, c, d, e;
    const char *opt_tile[] = {"-DQC_TILE=2", NULL};
    const char *opt_ab[] = {"-DQC_A=1", "-DQC_B=2", NULL};
    const char *opt_ba[] = {"-DQC_B=2", "-DQC_A=1", NULL};
    unsigned c0, c1;
    stats(n, &c0, NULL, NULL);
    CHECK(qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", opt_tile, 80, 0, &a, &why) == QC_OK, "%s", why.text);
    CHECK(!a.from_cache && strcmp(a.key, base80->key) != 0, "an option did not change the key");
    CHECK(qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", opt_ab, 80, 0, &b, &why) == QC_OK, "%s", why.text);
    CHECK(qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", opt_ba, 80, 0, &c, &why) == QC_OK, "%s", why.text);
    CHECK(strcmp(b.key, c.key) != 0 && !c.from_cache, "option order is part of the key");
    /* another entry of the same source is another key */
    CHECK(qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_scale", NULL, 80, 0, &d, &why) == QC_OK, "%s", why.text);
    CHECK(strcmp(d.key, base80->key) != 0 && !d.from_cache, "the entry is not part of the key");
    /* the program name is only for messages: same key */
    CHECK(qc_nvrtc_compile(n, "other-name.cu", SIMPLE, "qc_axpy", NULL, 80, 0, &e, &why) == QC_OK, "%s", why.text);
    CHECK(strcmp(e.key, base80->key) == 0 && e.from_cache, "the name changed the key");
    stats(n, &c1, NULL, NULL);
    CHECK(c1 - c0 == 4, "expected 4 compiles, got %u", c1 - c0);
    qc_cubin_free(&a);
    qc_cubin_free(&b);
    qc_cubin_free(&c);
    qc_cubin_free(&d);
    qc_cubin_free(&e);
}

/* ---- arch-specific instructions and compile failures ---- */

static void test_hopper_only(qc_nvrtc *n) {
    qc_reason why;
    qc_cubin c;
    qc_status st = qc_nvrtc_compile(n, "hopper.cu", HOPPER, "qc_hopper", NULL, 90, 1, &c, &why);
    CHECK(st == QC_OK && strcmp(c.target, "sm_90a") == 0, "sm_90a: %s: %s", why.code, why.text);
    qc_cubin_free(&c);

    st = qc_nvrtc_compile(n, "hopper.cu", HOPPER, "qc_hopper", NULL, 90, 0, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "compile") == 0, "sm_90 accepted wgmma/setmaxnreg (%s)", why.code);
    CHECK(c.data == NULL && c.size == 0, "failed compile left data");
    CHECK_CONTAINS(why.text, "sm_90");
    CHECK_CONTAINS(why.text, "not supported on .target");
    char lp[1024], cp[1024];
    cache_path(&c, "log", lp, sizeof lp);
    cache_path(&c, "cubin", cp, sizeof cp);
    CHECK_CONTAINS(why.text, lp);
    char *log = nv_slurp(lp, NULL);
    CHECK(log != NULL, "no log at %s", lp);
    CHECK_CONTAINS(log, "not supported on .target 'sm_90'");
    CHECK_CONTAINS(log, "--gpu-architecture=sm_90");
    free(log);
    CHECK(access(cp, F_OK) != 0, "a failed compile left a cache entry");

    /* plain sm_80 cannot take it either */
    st = qc_nvrtc_compile(n, "hopper.cu", HOPPER, "qc_hopper", NULL, 80, 0, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "compile") == 0, "sm_80 accepted wgmma (%s)", why.code);
}

static void test_syntax_error(qc_nvrtc *n) {
    qc_reason why;
    qc_cubin c;
    unsigned c0, c1;
    stats(n, &c0, NULL, NULL);
    qc_status st = qc_nvrtc_compile(n, "broken.cu", BROKEN, "qc_bad", NULL, 89, 0, &c, &why);
    stats(n, &c1, NULL, NULL);
    CHECK(st == QC_ERR_UNSUPPORTED && strcmp(why.code, "compile") == 0, "syntax error gave %d %s", st, why.code);
    CHECK(c1 - c0 == 1, "a failed compile is still a compile");
    CHECK_CONTAINS(why.text, "broken.cu");
    CHECK_CONTAINS(why.text, "expected an expression");
    char lp[1024];
    cache_path(&c, "log", lp, sizeof lp);
    CHECK_CONTAINS(why.text, lp);
    char *log = nv_slurp(lp, NULL);
    CHECK(log != NULL, "no log at %s", lp);
    CHECK_CONTAINS(log, "broken.cu(2): error: expected an expression");
    free(log);
}

static void test_entry_and_arch_errors(qc_nvrtc *n) {
    qc_reason why;
    qc_cubin c;
    qc_status st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_nope", NULL, 80, 0, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "missing") == 0, "absent entry: %s %s", why.code, why.text);
    CHECK_CONTAINS(why.text, "qc_nope");
    st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_cpp", NULL, 80, 0, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "missing") == 0, "C++-linkage entry: %s %s", why.code, why.text);
    char cp[1024];
    cache_path(&c, "cubin", cp, sizeof cp);
    CHECK(access(cp, F_OK) != 0, "a cubin without its entry was cached");

    st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, 80, 1, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "arch") == 0, "sm_80a: %s", why.code);
    st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, 11, 0, &c, &why);
    CHECK(st != QC_OK && strcmp(why.code, "arch") == 0, "sm_11: %s", why.code);
    CHECK(!qc_nvrtc_supports(n, 11) && qc_nvrtc_supports(n, 80) && qc_nvrtc_supports(n, 90),
          "supported arch list");
    st = qc_nvrtc_compile(n, "simple.cu", NULL, "qc_axpy", NULL, 80, 0, &c, &why);
    CHECK(st == QC_ERR_INVALID, "NULL source accepted");
}

static void test_headers(qc_nvrtc *n) {
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    int have = 0;
    for (int i = 0; i < 3 && !have; i++) {
        char p[1024];
        if (!homes[i] || !*homes[i]) continue;
        snprintf(p, sizeof p, "%s/include/cccl/cuda/std/cstdint", homes[i]);
        have = access(p, F_OK) == 0;
    }
    if (!have) {
        printf("test_nvrtc: no CUDA 13 headers found: include-path check skipped\n");
        return;
    }
    qc_reason why;
    qc_cubin c;
    qc_status st = qc_nvrtc_compile(n, "headers.cu", HEADERS, "qc_half", NULL, 80, 0, &c, &why);
    CHECK(st == QC_OK, "toolkit headers: %s", why.text);
    qc_cubin_free(&c);
}

/* ---- corruption ---- */

typedef enum {
    C_HALF, C_HEADER_ONLY_SHORT, C_EMPTY, C_PAYLOAD_BIT, C_SUM_BIT, C_GARBAGE, C_MAGIC, C_HUGE_SIZE,
    C_TRAILING, C_OTHER_KEY, C_VERSION, C_COUNT_
} corruption;
static const char *CNAMES[] = {"truncated half", "shorter than header", "empty", "payload bit", "checksum bit",
                               "garbage", "magic", "huge size field", "trailing bytes", "another key's file",
                               "format version"};

static void test_corruption(qc_nvrtc *n, const qc_cubin *base80, const qc_cubin *base89) {
    char cp[1024], other[1024];
    cache_path(base80, "cubin", cp, sizeof cp);
    cache_path(base89, "cubin", other, sizeof other);
    size_t len = 0, olen = 0;
    unsigned char *orig = (unsigned char *)nv_slurp(cp, &len);
    unsigned char *oth = (unsigned char *)nv_slurp(other, &olen);
    CHECK(orig && len == base80->size + 88 && oth, "cannot read %s", cp);
    if (!orig || !oth || len <= 88) {
        free(orig);
        free(oth);
        return;
    }
    unsigned char *buf = malloc(len + 4096);
    uint64_t rng = 0x1234567u;
    for (int k = 0; k < C_COUNT_; k++) {
        size_t blen = len;
        memcpy(buf, orig, len);
        switch ((corruption)k) {
        case C_HALF: blen = len / 2; break;
        case C_HEADER_ONLY_SHORT: blen = 87; break;
        case C_EMPTY: blen = 0; break;
        case C_PAYLOAD_BIT: buf[88 + (len - 88) / 2] ^= 0x10; break;
        case C_SUM_BIT: buf[60] ^= 0x01; break;
        case C_GARBAGE:
            blen = 4096;
            for (size_t i = 0; i < blen; i++) buf[i] = (unsigned char)(qc_test_rng(&rng) >> 24);
            break;
        case C_MAGIC: buf[0] = 'X'; break;
        case C_HUGE_SIZE: memset(buf + 16, 0xFF, 8); break;
        case C_TRAILING:
            memset(buf + len, 0xAB, 16);
            blen = len + 16;
            break;
        case C_OTHER_KEY:
            blen = olen < len + 4096 ? olen : len + 4096;
            memcpy(buf, oth, blen);
            break;
        case C_VERSION: buf[8] ^= 0x80; break;
        case C_COUNT_: break;
        }
        CHECK(nv_write(cp, buf, blen) == 0, "cannot write %s", cp);
        unsigned c0, h0, r0, c1, h1, r1;
        stats(n, &c0, &h0, &r0);
        qc_reason why;
        qc_cubin c;
        qc_status st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, 80, 0, &c, &why);
        stats(n, &c1, &h1, &r1);
        CHECK(st == QC_OK && !c.from_cache, "%s: %s", CNAMES[k], why.text);
        CHECK(r1 - r0 == 1 && c1 - c0 == 1 && h1 == h0, "%s: recompiled %u compiles %u hits %u", CNAMES[k],
              r1 - r0, c1 - c0, h1 - h0);
        CHECK(st == QC_OK && c.size == base80->size && memcmp(c.data, base80->data, c.size) == 0,
              "%s: recompiled cubin differs", CNAMES[k]);
        qc_cubin_free(&c);
        /* the entry was rewritten whole: the next compile is a hit */
        st = qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_axpy", NULL, 80, 0, &c, &why);
        CHECK(st == QC_OK && c.from_cache, "%s: not repaired", CNAMES[k]);
        qc_cubin_free(&c);
    }
    free(buf);
    free(orig);
    free(oth);
}

/* ---- concurrency: several threads on one new key ---- */

typedef struct race_arg {
    qc_nvrtc *n;
    qc_cubin c;
    qc_status st;
} race_arg;

static void *race(void *p) {
    race_arg *a = p;
    static const char *opts[] = {"-DQC_TILE=7", NULL};
    qc_reason why;
    a->st = qc_nvrtc_compile(a->n, "simple.cu", SIMPLE, "qc_axpy", opts, 89, 0, &a->c, &why);
    return NULL;
}

static void test_threads(qc_nvrtc *n) {
    enum { T = 3 };
    pthread_t th[T];
    race_arg args[T];
    for (int i = 0; i < T; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].n = n;
        pthread_create(&th[i], NULL, race, &args[i]);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) {
        CHECK(args[i].st == QC_OK, "thread %d failed", i);
        CHECK(args[i].c.size == args[0].c.size && memcmp(args[i].c.data, args[0].c.data, args[0].c.size) == 0,
              "thread %d got other bytes", i);
    }
    for (int i = 0; i < T; i++) qc_cubin_free(&args[i].c);
}

/* Only finished entries and logs in the folder: no temporary files left. */
static void test_no_leftovers(void) {
    DIR *d = opendir(g_dir);
    CHECK(d != NULL, "cannot list %s", g_dir);
    if (!d) return;
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t l = strlen(e->d_name);
        int ok = (l == 64 + 6 && strcmp(e->d_name + 64, ".cubin") == 0) ||
                 (l == 64 + 4 && strcmp(e->d_name + 64, ".log") == 0);
        CHECK(ok, "unexpected file %s in the cache folder", e->d_name);
        files++;
    }
    closedir(d);
    CHECK(files > 0, "empty cache folder");
}

/* ---- the default folder ---- */

static void test_default_dir(void) {
    char *saved[3];
    const char *names[3] = {"QCORE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
    for (int i = 0; i < 3; i++) saved[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
    char want[1024], env[1024];
    struct {
        const char *qcore, *xdg, *home, *suffix;
    } cases[] = {
        {"/q/deep/er", "/xdg", "/home", "/q/deep/er"},
        {NULL, "/xdg", "/home", "/xdg/qcore/kernels"},
        {NULL, "relative/ignored", "/home", "/home/.cache/qcore/kernels"},
        {NULL, NULL, "/home", "/home/.cache/qcore/kernels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsetenv("QCORE_CACHE_DIR");
        unsetenv("XDG_CACHE_HOME");
        if (cases[i].qcore) {
            snprintf(env, sizeof env, "%s%s", g_dir, cases[i].qcore);
            setenv("QCORE_CACHE_DIR", env, 1);
        }
        if (cases[i].xdg) {
            if (cases[i].xdg[0] == '/')
                snprintf(env, sizeof env, "%s%s", g_dir, cases[i].xdg);
            else
                snprintf(env, sizeof env, "%s", cases[i].xdg);
            setenv("XDG_CACHE_HOME", env, 1);
        }
        snprintf(env, sizeof env, "%s%s", g_dir, cases[i].home);
        setenv("HOME", env, 1);
        snprintf(want, sizeof want, "%s%s", g_dir, cases[i].suffix);
        char err[512];
        qc_nvrtc *n = qc_nvrtc_create(NULL, err, sizeof err);
        CHECK(n != NULL, "%s", err);
        const char *dir = qc_nvrtc_cache_dir(n);
        CHECK(dir && strcmp(dir, want) == 0, "case %zu: folder %s, want %s", i, dir ? dir : "(none)", want);
        struct stat st;
        CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
              "case %zu: %s not created 0700", i, want);
        qc_nvrtc_destroy(n);
    }
    /* a folder that cannot be made: compiles still work, uncached */
    snprintf(env, sizeof env, "%s/afile", g_dir);
    nv_write(env, "x", 1);
    snprintf(want, sizeof want, "%s/afile/sub", g_dir);
    char err[512];
    qc_nvrtc *n = qc_nvrtc_create(want, err, sizeof err);
    CHECK(n != NULL && qc_nvrtc_cache_dir(n) == NULL, "an uncreatable folder should mean no disk cache");
    if (n) {
        qc_reason why;
        qc_cubin c;
        CHECK(qc_nvrtc_compile(n, "simple.cu", SIMPLE, "qc_scale", NULL, 80, 0, &c, &why) == QC_OK, "%s",
              why.text);
        qc_cubin_free(&c);
        qc_status st = qc_nvrtc_compile(n, "broken.cu", BROKEN, "qc_bad", NULL, 80, 0, &c, &why);
        CHECK(st != QC_OK && strcmp(why.code, "compile") == 0, "uncached syntax error: %s", why.code);
        CHECK_CONTAINS(why.text, "log not saved");
        CHECK_CONTAINS(why.text, "expected an expression");
        qc_nvrtc_destroy(n);
    }
    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
    }
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR); /* the corruption cases warn on purpose */
    char *tmp = nv_tmpdir();
    if (!tmp) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s/cache", tmp);

    /* before anything opens the real library: the process keeps it open */
    if (!getenv("QCORE_NVRTC_LIBRARY")) test_missing_nvrtc();

    int skip = 0;
    qc_nvrtc *n = nv_open_or_skip("test_nvrtc", g_dir, &skip);
    if (!n) {
        nv_rm_rf(tmp);
        return skip ? 0 : 1;
    }
    int major, minor;
    qc_nvrtc_version(n, &major, &minor);
    printf("test_nvrtc: NVRTC %d.%d, cache %s\n", major, minor, qc_nvrtc_cache_dir(n));
    CHECK(major >= 11, "NVRTC %d.%d", major, minor);
    CHECK(qc_nvrtc_cache_dir(n) && strcmp(qc_nvrtc_cache_dir(n), g_dir) == 0, "cache folder");

    qc_cubin first[N_ARCHS];
    memset(first, 0, sizeof first);
    test_arches_and_hits(n, first);
    test_keys(n, &first[0]);
    test_hopper_only(n);
    test_syntax_error(n);
    test_entry_and_arch_errors(n);
    test_headers(n);
    test_corruption(n, &first[0], &first[1]);
    test_threads(n);
    test_no_leftovers();
    unsigned c, h, r;
    qc_nvrtc_stats(n, &c, &h, &r);
    printf("test_nvrtc: %u compiles, %u cache hits, %u corrupt entries recompiled\n", c, h, r);
    CHECK(r == C_COUNT_, "recompiled %u, expected %d", r, C_COUNT_);
    for (size_t i = 0; i < N_ARCHS; i++) qc_cubin_free(&first[i]);
    qc_nvrtc_destroy(n);

    test_default_dir();
    nv_rm_rf(tmp);
    return qc_test_finish("test_nvrtc");
}
