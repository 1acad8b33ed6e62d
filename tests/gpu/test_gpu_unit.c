/* test_gpu_unit.c - the GPU backend without a GPU: core kernels compile (sm_80, sm_90a), no-driver failures, references. */
#define _GNU_SOURCE
#include <math.h>

#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_unit"

static const char *const CORE_IDS[] = {"bf16.linear_tiled", "bf16.linear_mma", "core.rmsnorm", "core.rope_pairs",
                                       "core.rope_half",    "core.swiglu",     "core.embed",   "core.argmax",
                                       "bf16.linear_gemv", "bf16.linear_gemv_bx", "core.embed_bf16", "core.add_rmsnorm", "core.qkv_rope_kv",
                                       "core.swiglu_ld", "core.cast_bf16", "core.fill_random_bf16"};
#define N_CORE (sizeof CORE_IDS / sizeof CORE_IDS[0])

/* Every entry point fails with a message, and nothing crashes, without a
 * driver or without a context. */
static void no_driver(void) {
    char err[512] = "";
    setenv("QCORE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    qc_gpu *g = qc_gpu_open(0, err, sizeof err);
    CHECK(g == NULL, "opened a GPU through a missing driver");
    CHECK_CONTAINS(err, "no CUDA driver: /nonexistent/libcuda.so.1 (QCORE_CUDA_LIBRARY) cannot be opened");
    CHECK_CONTAINS(err, "the GPU backend is unavailable");
    printf("%s: without a driver: %s\n", TEST, err);
    unsetenv("QCORE_CUDA_LIBRARY");

    /* the real driver, where there is one: a device that does not exist */
    g = qc_gpu_open(0, err, sizeof err);
    if (g) {
        qc_gpu_close(g);
        qc_gpu *bad = qc_gpu_open(1000, err, sizeof err);
        CHECK(bad == NULL, "opened device 1000");
        CHECK_CONTAINS(err, "no CUDA device 1000");
    } else {
        CHECK(err[0] != 0, "qc_gpu_open failed without a message");
        printf("%s: this machine: %s\n", TEST, err);
    }

    qc_gpu_buf b;
    memset(&b, 0xff, sizeof b);
    err[0] = 0;
    CHECK(qc_gpu_alloc(NULL, 16, 16, QC_MEM_WEIGHTS, "w", &b, err, sizeof err) != QC_OK && b.ptr == 0,
          "alloc without a context");
    CHECK_CONTAINS(err, "no GPU context");
    CHECK(qc_gpu_upload(NULL, 0, "x", 1, err, sizeof err) != QC_OK, "upload");
    CHECK(qc_gpu_download(NULL, err, 0, 1, err, sizeof err) != QC_OK, "download");
    CHECK(qc_gpu_memset32(NULL, 0, 0, 1, err, sizeof err) != QC_OK, "memset");
    CHECK(qc_gpu_sync(NULL, err, sizeof err) != QC_OK, "sync");
    size_t fb = 1, tb = 1;
    CHECK(qc_gpu_mem_info(NULL, &fb, &tb, err, sizeof err) != QC_OK, "mem info");
    qc_gpu_fn fn = (qc_gpu_fn)1;
    qc_cubin cub = {.data = "x", .size = 1};
    CHECK(qc_gpu_module_load(NULL, &cub, "e", &fn, err, sizeof err) != QC_OK && fn == NULL, "module load");
    qc_launch_dims d = {{1, 1, 1}, {32, 1, 1}, 0};
    CHECK(qc_gpu_launch(NULL, (qc_gpu_fn)1, &d, NULL, err, sizeof err) != QC_OK, "launch");
    CHECK_CONTAINS(err, "no GPU context");
    qc_gpu_event ev = (qc_gpu_event)1;
    CHECK(qc_gpu_event_create(NULL, &ev, err, sizeof err) != QC_OK && ev == NULL, "event");
    qc_reason why;
    CHECK(qc_gpu_kernel_load(NULL, NULL, NULL, &fn, &why) != QC_OK && why.code[0], "kernel load");
    qc_gpu_ledger_row r = qc_gpu_ledger_get(NULL, QC_MEM_WEIGHTS);
    CHECK(r.count == 0 && r.resident == 0, "ledger of nothing");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        qc_gpu_ledger_print(NULL, f);
        fclose(f);
        CHECK_CONTAINS(text, "no GPU context");
        free(text);
    }
    b.ptr = 0;
    qc_gpu_free(NULL, &b);
    qc_gpu_event_destroy(NULL, NULL);
    qc_gpu_close(NULL);
}

/* Descriptors: references, sources, geometry, and format selection never
 * picking a non-linear kernel for a linear layer. */
static void descriptors(qc_runtime *rt) {
    for (size_t i = 0; i < N_CORE; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, CORE_IDS[i]);
        CHECK(k != NULL, "%s is not registered", CORE_IDS[i]);
        if (!k) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims, "%s lacks a part", k->id);
        CHECK(k->arch.min_sm == 80 && k->arch.max_sm == QC_SM_ANY, "%s arch", k->id);
        qc_problem p = {.struct_size = sizeof p, .m = 3, .n = 100, .k = 64};
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] && d.grid[1] && d.grid[2] && d.block[0] && d.block[0] % 32 == 0 && d.block[1] == 1,
              "%s geometry %ux%ux%u / %u", k->id, d.grid[0], d.grid[1], d.grid[2], d.block[0]);
        p.m = 0;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 0 || d.grid[1] == 0, "%s: no rows should give an empty grid", k->id);
    }
    /* qkv_rope_kv's two mappings (the kernel picks by the same rule on d): d % 8 == 0 and d / 8 a power of
       two up to 32 -> 128 threads holding 128 / (d / 8) heads of a token; else a block per (token, head) of
       d / 2 threads rounded up to whole warps */
    const qc_kernel_desc *qk = qc_kernel_find(rt, "core.qkv_rope_kv");
    static const struct {
        int64_t d, gy, block;
    } qcases[] = {{128, 5, 128}, {64, 3, 128}, {256, 10, 128}, {16, 1, 128}, {96, 40, 64}, {68, 40, 64}, {8, 1, 128}};
    for (size_t i = 0; qk && i < sizeof qcases / sizeof qcases[0]; i++) {
        qc_problem q = {.struct_size = sizeof q, .m = 2048, .n = 40, .k = qcases[i].d}; /* 32 + 8 heads */
        qc_launch_dims d;
        qk->launch_dims(&q, &d);
        CHECK(d.grid[0] == 2048 && d.grid[1] == qcases[i].gy && d.block[0] == qcases[i].block,
              "qkv_rope_kv d=%lld: grid %ux%u, %u threads (want %lld x %lld, %lld)", (long long)qcases[i].d, d.grid[0],
              d.grid[1], d.block[0], 2048LL, (long long)qcases[i].gy, (long long)qcases[i].block);
    }
    const qc_format_desc *f = qc_format_find(rt, "bf16");
    const qc_kernel_desc *k = NULL;
    qc_reason why;
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 1, .n = 4096, .k = 4096, .phase = QC_PHASE_DECODE};
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_mma") == 0,
          "GPU bf16 on sm_90: %s %s", k ? k->id : "-", why.text);
    CHECK(qc_select_format(rt, f, &p, 0, &k, &why) && k && strcmp(k->id, "bf16.linear_ref") == 0,
          "CPU bf16: %s %s", k ? k->id : "-", why.text);
    p.sm = 75;
    CHECK(!qc_select_format(rt, f, &p, 1, &k, &why), "bf16 on sm_75 chose %s", k ? k->id : "-");
    CHECK(strcmp(why.code, "arch") == 0, "sm_75 reason %s: %s", why.code, why.text);
    p.sm = 90;
    p.m = 512; /* prefill on sm_90: the wgmma kernel */
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_wgmma") == 0,
          "GPU bf16 prefill on sm_90: %s %s", k ? k->id : "-", why.text);
    p.sm = 89; /* elsewhere: the tiled kernel; k not a multiple of 32: the plain one */
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_tiled") == 0,
          "GPU bf16 prefill: %s %s", k ? k->id : "-", why.text);
    p.k = 4100;
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_mma") == 0,
          "GPU bf16 prefill, ragged k: %s %s", k ? k->id : "-", why.text);
    const qc_kernel_desc *tk = qc_kernel_find(rt, "bf16.linear_tiled");
    CHECK(tk && tk->eligible && !tk->eligible(&p, &why) && strcmp(why.code, "align_k") == 0,
          "tiled linear, k = 4100: %s", why.code);
    p.sm = 90; /* reasons: on sm_89 the first refusal is the wgmma kernel's "arch" */
    p.m = 65535LL * 64 + 1; /* beyond the plain linear's grid: the tiled one (k % 32 == 0) or none */
    CHECK(!qc_select_format(rt, f, &p, 1, &k, &why), "huge M, ragged k chose %s", k ? k->id : "-");
    CHECK(strcmp(why.code, "m_range") == 0 || strcmp(why.code, "align_k") == 0, "huge M reason %s: %s", why.code,
          why.text);
    p.k = 4096;
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_wgmma") == 0,
          "huge M on sm_90: %s %s", k ? k->id : "-", why.text);
    p.sm = 89;
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, "bf16.linear_tiled") == 0,
          "huge M: %s %s", k ? k->id : "-", why.text);
    p.sm = 90;
    p.m = 2147483647LL + 1; /* beyond every linear's range: no core.* kernel steps in */
    CHECK(!qc_select_format(rt, f, &p, 1, &k, &why), "huger M chose %s", k ? k->id : "-");
    CHECK(strcmp(why.code, "m_range") == 0, "huger M reason %s: %s", why.code, why.text);
}

static void call_ref(qc_runtime *rt, const char *id, qc_named_arg *args, size_t n) {
    char err[256];
    void *argv[16];
    const qc_kernel_desc *k = qc_kernel_find(rt, id);
    qc_status st = k ? qc_kernel_bind(k, args, n, argv, 16, err, sizeof err) : QC_ERR_INVALID;
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", id, k ? err : "not registered");
}

/* The references through libffi, on inputs whose answers are known. */
static void references(qc_runtime *rt) {
    int64_t m = 2, n = 4;
    float x[8] = {2, 2, 2, 2, 1, -1, 1, -1}, w[4] = {1, 2, 3, 4}, y[8];
    float eps = 0;
    void *px = x, *pw = w, *py = y;
    qc_named_arg a1[] = {{"x", &px}, {"weight", &pw}, {"y", &py}, {"m", &m}, {"n", &n}, {"eps", &eps}};
    call_ref(rt, "core.rmsnorm", a1, 6);
    CHECK(y[0] == 1 && y[3] == 4 && y[5] == -2 && y[6] == 3, "rmsnorm %g %g %g %g", y[0], y[3], y[5], y[6]);

    /* position 0 is the identity; a quarter turn maps (a, b) to (-b, a) */
    int64_t rows = 2;
    int32_t heads = 1, hd = 4, pos[2] = {0, 1};
    float q[8] = {1, 2, 3, 4, 1, 2, 3, 4}, inv[2] = {(float)(M_PI / 2), 0}, o[8];
    void *pq = q, *po = o, *pp = pos, *pi = inv;
    qc_named_arg a2[] = {{"x", &pq}, {"y", &po}, {"pos", &pp}, {"inv_freq", &pi}, {"m", &rows}, {"heads", &heads},
                         {"head_dim", &hd}};
    call_ref(rt, "core.rope_pairs", a2, 7);
    CHECK(memcmp(o, q, 16) == 0, "rope at position 0");
    CHECK(fabsf(o[4] + 2) < 1e-6f && fabsf(o[5] - 1) < 1e-6f && o[6] == 3 && o[7] == 4, "rope pairs %g %g %g %g",
          o[4], o[5], o[6], o[7]);
    call_ref(rt, "core.rope_half", a2, 7);
    CHECK(fabsf(o[4] + 3) < 1e-6f && fabsf(o[6] - 1) < 1e-6f && o[5] == 2 && o[7] == 4, "rope half %g %g %g %g",
          o[4], o[5], o[6], o[7]);

    float gate[2] = {0, 20}, up[2] = {5, 2}, s[2];
    void *pg = gate, *pu = up, *ps = s;
    int64_t one = 1, two = 2;
    qc_named_arg a3[] = {{"gate", &pg}, {"up", &pu}, {"y", &ps}, {"m", &one}, {"n", &two}};
    call_ref(rt, "core.swiglu", a3, 5);
    CHECK(s[0] == 0 && fabsf(s[1] - 40) < 1e-5f, "swiglu %g %g", s[0], s[1]);

    float table[6] = {1, 2, 3, 4, 5, 6}, e[6];
    int32_t ids[3] = {2, -1, 0};
    int64_t toks = 3, dim = 2, vocab = 3;
    void *pt = table, *pid = ids, *pe = e;
    qc_named_arg a4[] = {{"table", &pt}, {"ids", &pid}, {"y", &pe}, {"m", &toks}, {"n", &dim}, {"vocab", &vocab}};
    call_ref(rt, "core.embed", a4, 6);
    CHECK(e[0] == 5 && e[1] == 6 && isnan(e[2]) && isnan(e[3]) && e[4] == 1 && e[5] == 2, "embed");

    float lg[12] = {1, 7, 7, 2, NAN, NAN, NAN, NAN, NAN, -INFINITY, 3, NAN};
    int32_t best[3];
    int64_t r3 = 3, v4 = 4;
    void *pl = lg, *pb = best;
    qc_named_arg a5[] = {{"x", &pl}, {"ids", &pb}, {"m", &r3}, {"n", &v4}};
    call_ref(rt, "core.argmax", a5, 4);
    CHECK(best[0] == 1 && best[1] == -1 && best[2] == 2, "argmax %d %d %d", best[0], best[1], best[2]);
}

/* Every core kernel through NVRTC for sm_80 and sm_90a, into a fresh cache. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const struct {
        int sm, specific;
    } targets[] = {{80, 0}, {90, 1}};
    size_t built = 0;
    for (size_t i = 0; i < N_CORE; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, CORE_IDS[i]);
        if (!k) continue;
        for (size_t t = 0; t < 2; t++) {
            qc_cubin c;
            qc_reason why;
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, k->nvrtc_options,
                                            targets[t].sm, targets[t].specific, &c, &why);
            CHECK(st == QC_OK, "%s for %s: %s: %s", k->id, c.target, why.code, why.text);
            if (st == QC_OK) built++;
            qc_cubin_free(&c);
        }
    }
    printf("%s: compiled %zu core kernel builds (sm_80, sm_90a)\n", TEST, built);
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    no_driver();
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        descriptors(rt);
        references(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
