/* test_wgmma_unit.c - bf16.linear_wgmma without a GPU: descriptor, plan, selection, reference, tensor-map ABI, NVRTC build. */
#define _GNU_SOURCE
#include <math.h>

#include "nvrtc/nv_test.h"
#include "qc_gpu.h"
#include "qc_kernels_wgmma.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_wgmma_unit"
#define ID "bf16.linear_wgmma"
#define SMEM_OPTIN_H200 232448u

static void descriptor(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, ID);
    CHECK(k != NULL, "%s is not registered", ID);
    if (!k) return;
    CHECK(k->arch.min_sm == 90 && k->arch.max_sm == 90, "arch %u..%u", k->arch.min_sm, k->arch.max_sm);
    CHECK(k->reference && k->cuda_source && k->launch_dims && k->eligible, "a part is missing");
    CHECK(k->n_params == 6 && strcmp(k->params[0].name, "x.bf16") == 0 && strcmp(k->params[1].name, "w.weight") == 0,
          "params");
    CHECK(k->n_tensor_maps == 2 && k->tensor_maps && strcmp(k->tensor_maps[0].param, "x.bf16") == 0 &&
              strcmp(k->tensor_maps[1].param, "w.weight") == 0 && k->tensor_maps[0].swizzle_bytes == 128,
          "tensor maps");
    /* eligibility and its reasons */
    qc_reason why;
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 1024, .n = 4096, .k = 4096, .phase = QC_PHASE_PREFILL};
    CHECK(k->eligible(&p, &why) == 1, "4096x4096 refused: %s", why.text);
    p.k = 4100;
    CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=4100: %s", why.code);
    p.k = 0;
    CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=0: %s", why.code);
    p.k = 4096;
    p.n = 100;
    CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "align_n") == 0, "n=100: %s", why.code);
    p.n = 4096;
    p.m = 0;
    CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "m_range") == 0, "m=0: %s", why.code);
    /* selection: preferred on sm_90 for prefill, never elsewhere */
    const qc_format_desc *f = qc_format_find(rt, "bf16");
    const qc_kernel_desc *sel = NULL;
    p.m = 512;
    CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel && strcmp(sel->id, ID) == 0, "sm_90 prefill: %s %s",
          sel ? sel->id : "-", why.text);
    p.sm = 89;
    CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel && strcmp(sel->id, "bf16.linear_tiled") == 0,
          "sm_89 prefill: %s", sel ? sel->id : "-");
    p.sm = 100;
    CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel && strcmp(sel->id, ID) != 0, "sm_100 prefill: %s",
          sel ? sel->id : "-");
    p.sm = 90;
    p.m = 8;
    CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel && strcmp(sel->id, ID) != 0, "sm_90 decode chose %s",
          sel ? sel->id : "-");
    p.m = 512;
    p.k = 4032 + 32; /* a multiple of 32, not of 64: the tiled kernel */
    CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel && strcmp(sel->id, "bf16.linear_tiled") == 0,
          "k=4064: %s", sel ? sel->id : "-");
    CHECK(qc_select_format(rt, f, &p, 0, &sel, &why) && sel && strcmp(sel->id, "bf16.linear_ref") == 0,
          "CPU: %s", sel ? sel->id : "-");
}

/* The plan: tile width per Llama-3-8B shape, shared memory within the opt-in limit, grid <= 132. */
static void plan(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, ID);
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    static const int64_t ms[] = {1, 37, 200, 1024, 2048, 4096, 8192};
    for (size_t s = 0; s < 4; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            int bn, st;
            uint32_t smem;
            int64_t tiles;
            qc_wgmma_plan(ms[i], shapes[s][0], &bn, &st, &smem, &tiles);
            CHECK((bn == 256 || bn == 192 || bn == 128) && smem <= SMEM_OPTIN_H200 - 256 && st >= 4,
                  "plan m=%lld n=%lld: bn %d, %d stages, %u B", (long long)ms[i], (long long)shapes[s][0], bn, st,
                  smem);
            if (ms[i] == 1024)
                printf("%s: plan m=1024 n=%-5lld k=%-5lld: 128x%d tiles, %d stages, %u B shared, %lld tiles (%.2f "
                       "waves of 132)\n", TEST, (long long)shapes[s][0], (long long)shapes[s][1], bn, st, smem,
                       (long long)tiles, tiles / 132.0);
            if (k) {
                qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = ms[i], .n = shapes[s][0], .k = shapes[s][1]};
                qc_launch_dims d;
                k->launch_dims(&p, &d);
                CHECK(d.grid[0] >= 1 && d.grid[0] <= 132 && (int64_t)d.grid[0] <= tiles && d.block[0] == 384 &&
                          d.shared_bytes == smem, "dims m=%lld: grid %u block %u", (long long)ms[i], d.grid[0],
                      d.block[0]);
            }
        }
    int bn, st;
    uint32_t smem;
    int64_t tiles;
    qc_wgmma_plan(1024, 6144, &bn, &st, &smem, &tiles);
    CHECK(bn == 192, "qkv at m=1024 should take 128x192 tiles (256 tiles, 1.94 waves), got %d", bn);
    qc_wgmma_plan(1024, 4096, &bn, &st, &smem, &tiles);
    CHECK(bn == 256 && tiles == 128, "o at m=1024: bn %d, %lld tiles", bn, (long long)tiles);
    if (k) {
        qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 0, .n = 4096, .k = 4096};
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 0, "m=0 should give an empty grid");
    }
}

static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the values used */
}

/* The C reference through libffi on an answer known by hand. */
static void reference(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, ID);
    if (!k) return;
    int64_t m = 2, n = 3, kk = 2;
    uint16_t x[4] = {bf16_bits(1), bf16_bits(2), bf16_bits(-3), bf16_bits(0.5f)};
    uint16_t w[6] = {bf16_bits(1), bf16_bits(1), bf16_bits(2), bf16_bits(-1), bf16_bits(0.25f), bf16_bits(4)};
    float y[6];
    void *px = x, *pw = w, *py = y;
    qc_named_arg args[] = {{"x.bf16", &px}, {"w.weight", &pw}, {"y", &py}, {"m", &m}, {"n", &n}, {"k", &kk}};
    void *argv[8];
    char err[256];
    qc_status st = qc_kernel_bind(k, args, 6, argv, 8, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    CHECK(st == QC_OK, "reference: %s", err);
    CHECK(y[0] == 3 && y[1] == 0 && y[2] == 8.25f && y[3] == -2.5f && y[4] == -6.5f && y[5] == 1.25f,
          "reference %g %g %g %g %g %g", y[0], y[1], y[2], y[3], y[4], y[5]);
}

/* Tensor-map specs through the loader: a plugin with valid specs and one
 * whose descriptor predates the fields load; one naming an unknown param,
 * and one with a box TMA cannot take, are refused with the reason. */
static void loader(void) {
    char err[512];
    static const struct {
        const char *file, *want; /* want NULL: loads */
    } cases[] = {
        {"tmap_good", NULL},
        {"tmap_unknown_param", "names param 'nope'"},
        {"tmap_bad_box", "is not a TMA box"},
        {"tmap_bad_shape", "are not both I64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
        qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
        CHECK(rt != NULL, "%s", err);
        if (!rt) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/%s.so", QC_TMAP_PLUGIN_DIR, cases[i].file, cases[i].file);
        err[0] = 0;
        qc_status st = qc_runtime_load_plugin(rt, path, err, sizeof err);
        if (!cases[i].want) {
            CHECK(st == QC_OK, "%s refused: %s", cases[i].file, err);
            const qc_kernel_desc *k = qc_kernel_find(rt, "test.tmap.with_maps");
            CHECK(k && k->n_tensor_maps == 1 && k->tensor_maps && strcmp(k->tensor_maps[0].param, "a") == 0,
                  "with_maps lost its tensor map");
            k = qc_kernel_find(rt, "test.tmap.legacy");
            CHECK(k && k->n_tensor_maps == 0 && k->tensor_maps == NULL, "a descriptor without the fields got maps");
        } else {
            CHECK(st != QC_OK && strstr(err, cases[i].want), "%s: expected refusal '%s', got %d '%s'", cases[i].file,
                  cases[i].want, (int)st, err);
            printf("%s: %s refused: %s\n", TEST, cases[i].file, err);
        }
        qc_runtime_close(rt);
    }
}

/* The CUDA source through NVRTC for sm_90a, with ptxas's resource report. */
static void compiles(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, ID);
    if (!k) return;
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const char *const opts[] = {"--ptxas-options=-v", NULL};
    qc_cubin c;
    qc_reason why;
    double t0 = qc_now_seconds();
    qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, 90, 1, &c, &why);
    CHECK(st == QC_OK, "%s for sm_90a: %s: %s", k->id, why.code, why.text);
    if (st == QC_OK) {
        printf("%s: %s compiled for %s in %.1f s, cubin %zu bytes\n", TEST, k->id, c.target, qc_now_seconds() - t0,
               c.size);
        char lpath[1200];
        snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
        char *log = nv_slurp(lpath, NULL);
        CHECK(log != NULL, "no NVRTC log at %s", lpath);
        const char *diag = nv_wgmma_diag(log); /* setmaxnreg ignored, wgmma serialized or a wait injected */
        CHECK(!diag, "ptxas %.*s", diag ? (int)strcspn(diag, "\n") : 0, diag ? diag : "");
        int regs = -1;
        for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
            if (strstr(line, "registers") || strstr(line, "spill") || strstr(line, "warning") ||
                strstr(line, "C7508") || strstr(line, "stack frame")) {
                printf("%s: ptxas: %s\n", TEST, line);
                const char *r = strstr(line, "Used ");
                if (r && strstr(line, "registers")) regs = atoi(r + 5);
                const char *sp = strstr(line, "bytes spill stores");
                if (sp) {
                    const char *b = sp;
                    while (b > line && b[-1] == ' ') b--;
                    while (b > line && b[-1] >= '0' && b[-1] <= '9') b--;
                    CHECK(atoi(b) == 0, "register spills: %s", line);
                }
            }
        CHECK(regs > 0, "no register count in the ptxas report");
        free(log);
    }
    qc_cubin_free(&c);
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        descriptor(rt);
        plan(rt);
        reference(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    loader();
    return qc_test_finish(TEST);
}
