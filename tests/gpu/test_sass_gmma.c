/* test_sass_gmma.c - the Hopper GEMMs (fp8, w8a8_int8, bf16, w4a16, mxfp4) and the attention prefill compiled by NVRTC for sm_90a really use the warpgroup tensor-core instructions (QGMMA / IGMMA / HGMMA in nvdisasm's SASS). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc/nv_test.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_sass_gmma"

/* kernel, plugin that registers it (NULL: a core kernel), the SASS opcode it must contain */
static const struct {
    const char *id, *plugin, *op;
} KERNELS[] = {
    {"fp8.gemm_channel_wgmma", "fp8.so", "QGMMA"},
    {"fp8.gemm_tensor_wgmma", "fp8.so", "QGMMA"},
    {"fp8.gemm_block_wgmma", "fp8.so", "QGMMA"},
    {"w8a8_int8.linear_wgmma", "w8a8_int8.so", "IGMMA"},
    {"bf16.linear_wgmma", NULL, "HGMMA"},
    {"core.attn_prefill", NULL, "HGMMA"}, /* S = Q K^T and O += P V on sm_90a (session 12) */
    {"w4a16.wgmma_sym", "w4a16.so", "HGMMA"},
    {"mxfp4.wgmma", "mxfp4.so", "HGMMA"}, /* E2M1 decoded into register-A fragments (session 13) */
};
static const char *const OPS[] = {"QGMMA", "IGMMA", "HGMMA", "HMMA"};
#define N_OPS (sizeof OPS / sizeof OPS[0])

/* nvdisasm on PATH (as CI images lack it, absent means skip) */
static int find_nvdisasm(char *path, size_t len) {
    FILE *p = popen("command -v nvdisasm 2>/dev/null", "r");
    if (!p) return 0;
    int ok = fgets(path, (int)len, p) != NULL;
    pclose(p);
    if (!ok) return 0;
    path[strcspn(path, "\r\n")] = 0;
    return path[0] != 0;
}

/* Disassemble cubin `file`; counts[i] = SASS lines whose opcode starts with OPS[i]; the distinct
 * opcodes of the first kind found go to `shapes`. */
static int disasm_counts(const char *nvdisasm, const char *file, const char *op, int *counts, char *shapes,
                         size_t slen) {
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' '%s' 2>&1", nvdisasm, file);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char line[1024];
    int lines = 0;
    shapes[0] = 0;
    while (fgets(line, sizeof line, p)) {
        lines++;
        /* an instruction line: an address comment, an optional predicate (@P0), OPCODE.MODS operands */
        const char *s = strstr(line, "*/");
        if (!s) continue;
        s += 2;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '@') {
            while (*s && *s != ' ') s++;
            while (*s == ' ') s++;
        }
        for (size_t i = 0; i < N_OPS; i++) {
            size_t n = strlen(OPS[i]);
            if (strncmp(s, OPS[i], n) != 0 || (s[n] != '.' && s[n] != ' ')) continue;
            counts[i]++;
            if (strcmp(OPS[i], op) == 0) {
                char name[96];
                size_t w = strcspn(s, " ;\t\n");
                snprintf(name, sizeof name, "%.*s", (int)(w < 95 ? w : 95), s);
                if (!strstr(shapes, name) && strlen(shapes) + strlen(name) + 2 < slen) {
                    if (shapes[0]) strcat(shapes, " ");
                    strcat(shapes, name);
                }
            }
        }
    }
    int rc = pclose(p);
    CHECK(rc == 0 && lines > 0, "%s failed on %s (status %d)", nvdisasm, file, rc);
    return rc == 0 && lines > 0;
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char nvdisasm[1024];
    if (!find_nvdisasm(nvdisasm, sizeof nvdisasm)) {
        printf("%s: skip: nvdisasm not found\n", TEST);
        return 0;
    }
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return qc_test_finish(TEST);
    }
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    printf("%s: %s\n", TEST, nvdisasm);
    for (size_t i = 0; rt && i < sizeof KERNELS / sizeof KERNELS[0]; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        CHECK(k != NULL, "%s is not registered (plugin %s from %s)", KERNELS[i].id,
              KERNELS[i].plugin ? KERNELS[i].plugin : "core", QC_TEST_PLUGIN_DIR);
        if (!k) continue;
        qc_cubin c;
        qc_reason why;
        /* sm_90a: wgmma exists only in the arch-specific target */
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, k->nvrtc_options, 90, 1, &c, &why);
        CHECK(st == QC_OK, "%s for sm_90a: %s: %s", k->id, why.code, why.text);
        if (st != QC_OK) continue;
        char file[1200];
        snprintf(file, sizeof file, "%s/sass-%zu.cubin", tmp, i);
        FILE *f = fopen(file, "wb");
        int wrote = f && fwrite(c.data, 1, c.size, f) == c.size;
        if (f) wrote &= fclose(f) == 0;
        CHECK(wrote, "%s: cannot write %s", k->id, file);
        const size_t cubin_bytes = c.size;
        /* QC_SASS_DIR=dir keeps a copy of each cubin there (dir/<kernel id>.cubin) for reading the SASS */
        const char *keep = getenv("QC_SASS_DIR");
        if (keep && *keep) {
            char kf[1200];
            snprintf(kf, sizeof kf, "%s/%s.cubin", keep, k->id);
            FILE *g = fopen(kf, "wb");
            int kept = g && fwrite(c.data, 1, c.size, g) == c.size;
            if (g) kept &= fclose(g) == 0;
            CHECK(kept, "%s: cannot write %s (QC_SASS_DIR)", k->id, kf);
        }
        qc_cubin_free(&c);
        if (!wrote) continue;
        int counts[N_OPS] = {0};
        char shapes[512];
        if (!disasm_counts(nvdisasm, file, KERNELS[i].op, counts, shapes, sizeof shapes)) continue;
        int want = 0;
        for (size_t j = 0; j < N_OPS; j++)
            if (strcmp(OPS[j], KERNELS[i].op) == 0) want = counts[j];
        printf("%s: %-24s %s cubin %6zu B: QGMMA %d, IGMMA %d, HGMMA %d, HMMA %d  [%s]\n", TEST, k->id, c.target,
               cubin_bytes, counts[0], counts[1], counts[2], counts[3], shapes);
        CHECK(want > 0, "%s: no %s in the sm_90a SASS", k->id, KERNELS[i].op);
        /* an FP8 / INT8 GEMM that shows HMMA or HGMMA was emulated through 16-bit MMAs */
        if (strcmp(KERNELS[i].op, "HGMMA") != 0)
            CHECK(counts[2] == 0 && counts[3] == 0, "%s: 16-bit MMAs in the SASS (HGMMA %d, HMMA %d)", k->id, counts[2],
                  counts[3]);
    }
    if (rt) qc_runtime_close(rt);
    qc_nvrtc_destroy(nv);
    nv_rm_rf(tmp);
    return qc_test_finish(TEST);
}
