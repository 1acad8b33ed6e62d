/* test_nvrtc_kernels.c - compile every registered kernel's CUDA source for every arch its descriptor claims. */
#define _GNU_SOURCE
#include "nv_test.h"
#include "qc_test.h"
#include "qcore/qcore.h"

/* The archs CI checks, each with the target a kernel there would use:
 * arch-specific on Hopper and Blackwell so that wgmma/tcgen05 code compiles. */
static const struct {
    uint32_t sm;
    int specific;
} ARCHS[] = {{80, 0}, {89, 0}, {90, 1}, {100, 1}};

/* argv[1] "i/N": only kernels whose registration index is i modulo N (CI runs the N shards side by side);
 * QC_NVRTC_ONLY=text: only kernels whose id contains it (a quick check while editing one kernel) */
int main(int argc, char **argv) {
    qc_set_log_level(QC_LOG_WARN);
    unsigned shard = 0, n_shards = 1;
    if (argc > 1 && (sscanf(argv[1], "%u/%u", &shard, &n_shards) != 2 || n_shards == 0 || shard >= n_shards)) {
        fprintf(stderr, "test_nvrtc_kernels: argument '%s' is not a shard i/N with i < N\n", argv[1]);
        return 2;
    }
    char *tmp = nv_tmpdir();
    if (!tmp) {
        fprintf(stderr, "cannot make a temporary folder\n");
        return 1;
    }
    int skip = 0;
    /* a fresh cache: every kernel really goes through NVRTC */
    qc_nvrtc *n = nv_open_or_skip("test_nvrtc_kernels", tmp, &skip);
    if (!n) {
        nv_rm_rf(tmp);
        return skip ? 0 : 1;
    }
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    char err[512];
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (!rt) {
        qc_nvrtc_destroy(n);
        nv_rm_rf(tmp);
        return qc_test_finish("test_nvrtc_kernels");
    }
    CHECK(qc_plugin_refusal_count(rt) == 0, "a plugin was refused: %s", qc_plugin_refusal(rt, 0));
    size_t total = qc_kernel_count(rt), with_source = 0, builds = 0;
    for (size_t i = 0; i < total; i++) {
        const qc_kernel_desc *k = qc_kernel_get(rt, i);
        if (!k || !k->cuda_source) continue;
        with_source++;
        if (i % n_shards != shard) continue;
        if (getenv("QC_NVRTC_ONLY") && !strstr(k->id, getenv("QC_NVRTC_ONLY"))) continue;
        size_t archs = 0;
        for (size_t a = 0; a < sizeof ARCHS / sizeof ARCHS[0]; a++) {
            uint32_t sm = ARCHS[a].sm;
            if (k->arch.min_sm == 0 || sm < k->arch.min_sm || sm > k->arch.max_sm) continue;
            archs++;
            qc_cubin c;
            qc_reason why;
            qc_status st = qc_nvrtc_compile(n, k->id, k->cuda_source, k->cuda_entry, k->nvrtc_options, (int)sm,
                                            ARCHS[a].specific, &c, &why);
            CHECK(st == QC_OK, "%s for sm_%u%s: %s: %s", k->id, sm, ARCHS[a].specific ? "a" : "", why.code,
                  why.text);
            if (st == QC_OK) builds++;
            /* ptxas's wgmma diagnostics in the build log (nv_wgmma_diag): every kernel is held to none */
            char lpath[1200];
            snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
            char *log = st == QC_OK ? nv_slurp(lpath, NULL) : NULL;
            const char *diag = nv_wgmma_diag(log);
            CHECK(!diag, "%s for sm_%u%s: ptxas %.*s", k->id, sm, ARCHS[a].specific ? "a" : "",
                  diag ? (int)strcspn(diag, "\n") : 0, diag ? diag : "");
            free(log);
            qc_cubin_free(&c);
        }
        CHECK(archs > 0, "%s has CUDA source but claims none of sm_80/89/90/100 (arch %u..%u)", k->id,
              k->arch.min_sm, k->arch.max_sm);
    }
    printf("test_nvrtc_kernels: shard %u/%u compiled %zu kernel builds; %zu of %zu registered kernels have CUDA "
           "source\n", shard, n_shards, builds, with_source, total);
    qc_runtime_close(rt);
    qc_nvrtc_destroy(n);
    if (qc_test_failed || getenv("QC_NVRTC_KEEP")) /* the failures name the logs; QC_NVRTC_KEEP: cubins for nvdisasm */
        printf("test_nvrtc_kernels: NVRTC logs and cubins kept in %s\n", tmp);
    else
        nv_rm_rf(tmp);
    return qc_test_finish("test_nvrtc_kernels");
}
