/* test_fp8_gemv_unit.c - fp8.gemv_mma_* without a GPU: descriptors, refusals, selection, launch plan, sm_89 / sm_90a builds with ptxas's report and SASS counts. */
#define _GNU_SOURCE
#include <math.h>

#include "nvrtc/nv_test.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_fp8_gemv_unit"

static const char *const IDS[3] = {"fp8.gemv_mma_channel", "fp8.gemv_mma_tensor", "fp8.gemv_mma_block"};
static const uint32_t SCHEMES[3] = {2, 4, 3}; /* channel, tensor_static, block */

static qc_problem prob(uint32_t sm, int64_t m, int64_t n, int64_t k, uint32_t scheme) {
    qc_problem p = {.struct_size = sizeof p, .sm = sm, .m = m, .n = n, .k = k, .scheme = scheme,
                    .group_size = scheme == 3 ? 128 : 0, .phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE};
    return p;
}

static void expect_refused(const qc_kernel_desc *k, const qc_format_desc *f, qc_problem p, const char *code) {
    qc_reason why;
    memset(&why, 0, sizeof why);
    int ok = qc_select_kernel(k, f, &p, 1, &why);
    CHECK(!ok && strcmp(why.code, code) == 0, "%s sm_%u m=%lld n=%lld k=%lld scheme %u: '%s' (%s), expected %s", k->id,
          p.sm, (long long)p.m, (long long)p.n, (long long)p.k, p.scheme, ok ? "taken" : why.code, why.text, code);
}

/* Descriptors, every refusal with its code, and that the engine still picks the older GEMVs. */
static void descriptors(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "fp8");
    CHECK(f != NULL, "no fp8 format in %s", QC_TEST_PLUGIN_DIR);
    if (!f) return;
    const qc_kernel_desc *old = qc_kernel_find(rt, "fp8.gemv_channel");
    for (int i = 0; i < 3; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        CHECK(k != NULL, "%s is not registered", IDS[i]);
        if (!k) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible && k->nvrtc_options &&
                  k->n_tensor_maps == 0,
              "%s lacks a part", k->id);
        CHECK(k->m_min == 1 && k->m_max == 16 && k->arch.min_sm == 89 && k->arch.max_sm == QC_SM_ANY,
              "%s: M [%lld, %lld] arch [%u, %u]", k->id, (long long)k->m_min, (long long)k->m_max, k->arch.min_sm,
              k->arch.max_sm);
        /* the same parameters as the GEMV it may replace (the engine binds them by name) */
        CHECK(old && k->n_params == old->n_params, "%s: %u params", k->id, k->n_params);
        for (uint32_t j = 0; old && j < k->n_params && j < old->n_params; j++)
            CHECK(strcmp(k->params[j].name, old->params[j].name) == 0 && k->params[j].type == old->params[j].type,
                  "%s param %u: %s", k->id, j, k->params[j].name);
        qc_reason why;
        for (int64_t m = 1; m <= 16; m++) {
            qc_problem p = prob(m % 2 ? 90 : 89, m, 4096, m % 3 ? 4096 : 4000, SCHEMES[i]); /* 4000: a ragged 64-K chunk */
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s m=%lld refused: %s: %s", k->id, (long long)m, why.code,
                  why.text);
        }
        expect_refused(k, f, prob(90, 1, 4104, 4096, SCHEMES[i]), "align_n");
        expect_refused(k, f, prob(90, 1, 4096, 4104, SCHEMES[i]), "align_k");
        expect_refused(k, f, prob(90, 1, 4096, 4001, SCHEMES[i]), "align_k");
        expect_refused(k, f, prob(90, 17, 4096, 4096, SCHEMES[i]), "m_range");
        expect_refused(k, f, prob(90, 0, 4096, 4096, SCHEMES[i]), "m_range");
        expect_refused(k, f, prob(86, 1, 4096, 4096, SCHEMES[i]), "arch");
        expect_refused(k, f, prob(90, 1, 4096, 4096, SCHEMES[(i + 1) % 3]), "scheme");
        expect_refused(k, f, prob(90, 1, 4096, 4096, 1), "scheme"); /* dynamic per-tensor: no GPU quantizer */
        if (i == 0) {
            qc_problem p = prob(90, 1, 4096, 4104, 2);
            qc_select_kernel(k, f, &p, 1, &why);
            printf("%s: k=4104: %s: %s\n", TEST, why.code, why.text);
        }
    }
    /* fp8.gemv_wg_*: sm_90 only ("arch" elsewhere, though its range says 89+ to tie), channel and tensor */
    static const char *const WGS[2] = {"fp8.gemv_wg_channel", "fp8.gemv_wg_tensor"};
    for (int i = 0; i < 2; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, WGS[i]);
        CHECK(k != NULL, "%s is not registered", WGS[i]);
        if (!k) continue;
        CHECK(k->m_min == 1 && k->m_max == 16 && k->arch.min_sm == 89 && k->arch.max_sm == QC_SM_ANY && k->reference &&
                  k->n_params == 8,
              "%s: descriptor", k->id);
        qc_reason why;
        for (int64_t m = 1; m <= 16; m += 5) {
            qc_problem p = prob(90, m, 4096, 4000, SCHEMES[i]);
            CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s m=%lld refused: %s: %s", k->id, (long long)m, why.code,
                  why.text);
        }
        expect_refused(k, f, prob(89, 1, 4096, 4096, SCHEMES[i]), "arch");
        expect_refused(k, f, prob(100, 1, 4096, 4096, SCHEMES[i]), "arch");
        expect_refused(k, f, prob(90, 1, 4096, 4096, 3), "scheme");
        expect_refused(k, f, prob(90, 1, 4104, 4096, SCHEMES[i]), "align_n");
        expect_refused(k, f, prob(90, 1, 4096, 4104, SCHEMES[i]), "align_k");
        expect_refused(k, f, prob(90, 17, 4096, 4096, SCHEMES[i]), "m_range");
        /* plan: the GEMV's tiles, KS a multiple of 4 (whole warpgroups), staging or reduction in shared memory */
        for (int64_t m = 1; m <= 16; m += 15) {
            qc_problem p = prob(90, m, 28672, 4096, SCHEMES[i]), p2 = prob(90, m, 4096, 14336, SCHEMES[i]);
            qc_launch_dims d, d2;
            k->launch_dims(&p, &d);
            k->launch_dims(&p2, &d2);
            CHECK(d.grid[0] == 28672 / 16 && d.block[0] == 128 && d2.grid[0] == 256 && d2.block[0] == 512 &&
                      d.shared_bytes == 1024 + 8192 && d2.shared_bytes == 1024 + 32768,
                  "%s plan m=%lld: grid %u block %u smem %u; grid %u block %u smem %u", k->id, (long long)m, d.grid[0],
                  d.block[0], d.shared_bytes, d2.grid[0], d2.block[0], d2.shared_bytes);
        }
    }
    /* the engine's default stays the older GEMV (the new one ties and registers later; FP8_GEMV_FIRST in
       fp8_kernels.c flips it, and these lines with it) */
    static const struct {
        uint32_t scheme;
        int64_t m;
        const char *want;
    } sel[] = {{2, 2, "fp8.gemv_channel"}, {5, 16, "fp8.gemv_channel"}, {4, 8, "fp8.gemv_tensor"}, {3, 3, "fp8.gemv_block"}};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        qc_problem p = prob(90, sel[i].m, 4096, 4096, sel[i].scheme);
        const qc_kernel_desc *k = NULL;
        qc_reason why;
        CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, sel[i].want) == 0,
              "scheme %u m=%lld: chose %s, want %s", sel[i].scheme, (long long)sel[i].m, k ? k->id : why.text,
              sel[i].want);
    }
}

/* The plan: one block per 16-row tile, KS = block / 32 warps a power of two <= 16, the reduction's shared
 * memory KS x 4 NB x 32 floats, the Llama-3-8B shapes as designed, an empty grid for m = 0. */
static void plan(qc_runtime *rt) {
    const qc_kernel_desc *k = qc_kernel_find(rt, IDS[0]);
    if (!k) return;
    const char *env = getenv("QC_FP8_GEMV_KS");
    static const struct {
        const char *name;
        int64_t n, k;
        int ks; /* expected KS (0: any) */
    } shapes[] = {{"qkv", 6144, 4096, 8}, {"o", 4096, 4096, 16}, {"gate_up", 28672, 4096, 2}, {"down", 4096, 14336, 16},
                  {"", 16, 16, 1},        {"", 48, 208, 0},      {"", 272, 400, 0},         {"", 1008, 1040, 0},
                  {"", 128, 14336, 16},   {"", 2064, 4000, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int64_t m = 1; m <= 16; m++) {
            for (int t = 0; t < 3; t++) {
                const qc_kernel_desc *kt = qc_kernel_find(rt, IDS[t]);
                qc_problem p = prob(90, m, shapes[i].n, shapes[i].k, SCHEMES[t]);
                qc_launch_dims d;
                if (!kt) continue;
                kt->launch_dims(&p, &d);
                const uint32_t ks = d.block[0] / 32, nb = m > 8 ? 2 : 1;
                const int64_t chunks = (shapes[i].k + 63) / 64;
                int ok = d.grid[0] == (uint32_t)(shapes[i].n / 16) && d.grid[1] == 1 && d.grid[2] == 1 &&
                         d.block[1] == 1 && d.block[2] == 1 && d.block[0] % 32 == 0 && ks >= 1 && ks <= 16 &&
                         (ks & (ks - 1)) == 0 && d.shared_bytes == ks * nb * 4 * 32 * 4 &&
                         (ks == 1 || chunks >= 2 * (int64_t)ks) &&
                         (env || !shapes[i].ks || (int)ks == shapes[i].ks);
                CHECK(ok, "%s plan m=%lld n=%lld k=%lld: grid %u x %u x %u, block %u x %u x %u, smem %u", kt->id,
                      (long long)m, (long long)shapes[i].n, (long long)shapes[i].k, d.grid[0], d.grid[1], d.grid[2],
                      d.block[0], d.block[1], d.block[2], d.shared_bytes);
                if (t == 0 && (m == 1 || m == 16) && shapes[i].name[0]) {
                    const int64_t cpw = (chunks + ks - 1) / ks;
                    printf("%s: plan %-7s n=%-5lld k=%-5lld m=%-2lld: %u blocks x %u warps = %.2f warps per SM slot "
                           "(132 x 32), %lld chunks of 64 K a warp, %u B shared\n",
                           TEST, shapes[i].name, (long long)shapes[i].n, (long long)shapes[i].k, (long long)m, d.grid[0],
                           ks, (double)d.grid[0] * ks / (132.0 * 32.0), (long long)cpw, d.shared_bytes);
                }
            }
        }
    qc_problem pe = prob(90, 0, 4096, 4096, 2);
    qc_launch_dims d;
    k->launch_dims(&pe, &d);
    CHECK(d.grid[0] == 0, "m = 0 should give an empty grid, got %u", d.grid[0]);
}

/* The references are the older GEMVs' (the same functions: same bits by construction); one call each
 * checks they are bound and write every output. */
static void references(qc_runtime *rt) {
    static const char *const olds[3] = {"fp8.gemv_channel", "fp8.gemv_tensor", "fp8.gemv_block"};
    int64_t m = 3, n = 32, k = 272, kb = 3;
    uint64_t rng = 7;
    uint8_t *xq = malloc((size_t)(m * k)), *w = malloc((size_t)(n * k));
    float *xs = malloc((size_t)(m * kb) * 4), *ws = malloc((size_t)(n * kb) * 4);
    float *y0 = malloc((size_t)(m * n) * 4), *y1 = malloc((size_t)(m * n) * 4);
    for (int64_t i = 0; i < m * k; i++) xq[i] = (uint8_t)(qc_test_rng(&rng) >> 40) & 0x7E; /* finite, no NaN */
    for (int64_t i = 0; i < n * k; i++) w[i] = (uint8_t)((qc_test_rng(&rng) >> 40) & 0xFE); /* no 0x7F / 0xFF (NaN) */
    for (int64_t i = 0; i < m * kb; i++) xs[i] = 0.01f + 0.001f * (float)i;
    for (int64_t i = 0; i < n * kb; i++) ws[i] = 0.02f + 0.0007f * (float)i;
    for (int t = 0; t < 3; t++) {
        const qc_kernel_desc *a = qc_kernel_find(rt, IDS[t]), *b = qc_kernel_find(rt, olds[t]);
        if (!a || !b) continue;
        void *px = xq, *pxs = xs, *pw = w, *pws = ws, *py = y0;
        qc_named_arg args[] = {{"xq", &px}, {"xs", &pxs}, {"w.qweight", &pw}, {"w.scales", &pws}, {"y", &py},
                               {"m", &m},   {"n", &n},    {"k", &k}};
        void *argv[16];
        char err[256];
        memset(y0, 0xFF, (size_t)(m * n) * 4);
        memset(y1, 0xFF, (size_t)(m * n) * 4);
        qc_status st = qc_kernel_bind(a, args, 8, argv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(a, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", a->id, err);
        py = y1;
        st = qc_kernel_bind(b, args, 8, argv, 16, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(b, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", b->id, err);
        size_t nan = 0;
        for (int64_t i = 0; i < m * n; i++) nan += y0[i] != y0[i];
        CHECK(nan == 0 && memcmp(y0, y1, (size_t)(m * n) * 4) == 0, "%s reference: %zu outputs unwritten or differs "
              "from %s", a->id, nan, b->id);
    }
    free(xq), free(w), free(xs), free(ws), free(y0), free(y1);
}

/* SASS of one cubin with nvdisasm (on PATH, else skipped): opcode counts, and the main loop's
 * instructions per 16 bytes of weights (the loop is the block that ends in a backward branch and holds
 * the most QMMAs; its weight loads are its LDG.E.128s without L1 allocation: .CONSTANT / .NA). */
static void sass(const char *tmp, const char *id, const qc_cubin *c, int strict) {
    if (system("command -v nvdisasm >/dev/null 2>&1") != 0) {
        printf("%s: nvdisasm is not on PATH, SASS not counted\n", TEST);
        return;
    }
    static const char *const ops[] = {"QMMA", "HMMA", "LDG", "LDS", "STS", "F2FP", "F2F", "I2F", "FADD", "FFMA",
                                      "LDL",  "STL",  "BAR", "BRA",  "QGMMA"};
    enum { NOPS = sizeof ops / sizeof ops[0], I_QMMA = 0, I_HMMA = 1, I_F2FP = 5, I_F2F = 6, I_LDL = 10,
           I_STL = 11, I_QGMMA = 14 };
    size_t counts[NOPS] = {0}, instr = 0;
    char path[1200], cmd[2600], line[512];
    snprintf(path, sizeof path, "%s/%s.cubin", tmp, c->key);
    CHECK(nv_write(path, c->data, c->size) == 0, "cannot write %s", path);
    snprintf(cmd, sizeof cmd, "nvdisasm -c '%s' > '%s.sass' 2>&1", path, path);
    int rc = system(cmd);
    CHECK(rc == 0, "nvdisasm failed on %s (%d)", path, rc);
    snprintf(cmd, sizeof cmd, "%s.sass", path);
    FILE *p = fopen(cmd, "r");
    if (!p) return;
    /* each instruction: address, opcode, whether it is a weight load; labels (.L_x_N:) name the next
     * instruction's address, branches name a label */
    enum { MAXI = 20000, MAXL = 1000 };
    static long addr[MAXI], lab_addr[MAXL];
    static char opc[MAXI][48], lab_name[MAXL][24];
    static int is_wload[MAXI];
    size_t ni = 0, nl = 0;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, ".L_x_", 5) == 0 && nl < MAXL) {
            snprintf(lab_name[nl], sizeof lab_name[nl], "%.*s", (int)strcspn(line, ":\n"), line);
            lab_addr[nl++] = -1; /* the next instruction's */
            continue;
        }
        const char *a = strstr(line, "/*"), *s = strstr(line, "*/");
        if (!a || !s || !strchr(s, ';')) continue;
        long ad = strtol(a + 2, NULL, 16);
        for (size_t i = 0; i < nl; i++)
            if (lab_addr[i] < 0) lab_addr[i] = ad;
        s += 2;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '@') {
            while (*s && *s != ' ') s++;
            while (*s == ' ') s++;
        }
        instr++;
        for (size_t i = 0; i < NOPS; i++) {
            size_t n = strlen(ops[i]);
            if (strncmp(s, ops[i], n) == 0 && (s[n] == '.' || s[n] == ' ')) counts[i]++;
        }
        if (ni < MAXI) {
            addr[ni] = ad;
            size_t w = strcspn(s, " ;\t\n");
            snprintf(opc[ni], sizeof opc[ni], "%.*s", (int)(w < 47 ? w : 47), s);
            is_wload[ni] = strncmp(s, "LDG", 3) == 0 && strstr(opc[ni], ".128") && strstr(opc[ni], ".NA");
            const char *l = strncmp(s, "BRA", 3) == 0 ? strstr(s, ".L_x_") : NULL;
            if (l) snprintf(opc[ni], sizeof opc[ni], "BRA %.*s", (int)strcspn(l, ")` ;"), l);
            ni++;
        }
    }
    fclose(p);
    printf("%s: %s %s SASS: %zu instructions;", TEST, id, c->target, instr);
    for (size_t i = 0; i < NOPS; i++) printf(" %s %zu", ops[i], counts[i]);
    printf("\n");
    /* sm_89 runs the e4m3 mma as QMMA; sm_90 has no QMMA for mma.sync: ptxas converts the operands to f16
       (F2FP) and runs HMMA (only wgmma takes e4m3 natively there) */
    if (!strict) {
        /* the older GEMV, for comparison: its loops only */
    } else if (strict == 2) /* wgmma with e4m3 straight from the loads */
        CHECK(counts[I_QGMMA] > 0 && counts[I_HMMA] == 0 && counts[I_F2FP] == 0 && counts[I_F2F] == 0,
              "%s %s: QGMMA %zu, HMMA %zu, F2FP %zu, F2F %zu: the weights must go in as e4m3", id, c->target,
              counts[I_QGMMA], counts[I_HMMA], counts[I_F2FP], counts[I_F2F]);
    else if (strstr(c->target, "sm_89"))
        CHECK(counts[I_QMMA] > 0 && counts[I_HMMA] == 0 && counts[I_F2FP] == 0 && counts[I_F2F] == 0,
              "%s %s: QMMA %zu, HMMA %zu, F2FP %zu, F2F %zu: the weights must go in as e4m3", id, c->target,
              counts[I_QMMA], counts[I_HMMA], counts[I_F2FP], counts[I_F2F]);
    else
        CHECK(counts[I_QMMA] + counts[I_HMMA] > 0, "%s %s: no MMA in the SASS", id, c->target);
    CHECK(!strict || counts[I_LDL] + counts[I_STL] <= 8, "%s %s: local memory (LDL %zu, STL %zu)", id, c->target, counts[I_LDL],
          counts[I_STL]);
    /* every loop (a backward branch and the instructions from its target) holding MMAs and weight loads */
    int loops = 0;
    for (size_t i = 0; i < ni; i++) {
        long tgt = -1;
        if (strncmp(opc[i], "BRA ", 4) != 0) continue;
        for (size_t l = 0; l < nl; l++)
            if (strcmp(lab_name[l], opc[i] + 4) == 0) tgt = lab_addr[l];
        if (tgt < 0 || tgt >= addr[i]) continue;
        size_t q = 0, wl = 0, n = 0, cv = 0, lm = 0;
        for (size_t j = 0; j <= i; j++)
            if (addr[j] >= tgt) {
                n++;
                lm += strncmp(opc[j], "LDL", 3) == 0 || strncmp(opc[j], "STL", 3) == 0;
                q += strncmp(opc[j], "QMMA", 4) == 0 || strncmp(opc[j], "HMMA", 4) == 0 || strncmp(opc[j], "QGMMA", 5) == 0;
                cv += strncmp(opc[j], "F2FP", 4) == 0;
                wl += (size_t)is_wload[j];
            }
        if (!q || !wl) continue;
        loops++;
        printf("%s: %s %s loop at 0x%lx: %zu instructions, %zu MMA, %zu F2FP, %zu weight loads of 16 B: %.2f "
               "instructions (%.2f F2FP) per 16 B of weights\n",
               TEST, id, c->target, tgt, n, q, cv, wl, (double)n / (double)wl, (double)cv / (double)wl);
        CHECK(!strict || lm == 0, "%s %s: %zu local-memory accesses in the loop at 0x%lx", id, c->target, lm, tgt);
    }
    CHECK(loops > 0, "%s %s: no loop with MMAs and weight loads in the SASS", id, c->target);
}

/* Each mode through NVRTC for sm_89 and sm_90a: ptxas's report (<= 64 registers: two 512-thread blocks an
 * SM; at most 16 bytes spilled), then the SASS. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const char *const OLDS[3] = {"fp8.gemv_channel", "fp8.gemv_tensor", "fp8.gemv_block"};
    for (int i = 0; i < 4; i++) { /* the three modes, then the older channel GEMV for comparison */
        const int strict = i < 3;
        const qc_kernel_desc *k = qc_kernel_find(rt, strict ? IDS[i] : OLDS[0]);
        if (!k) continue;
        for (int a = 0; a < 2; a++) {
            const int sm = a ? 90 : 89;
            const char *opts[8];
            size_t no = 0;
            for (; k->nvrtc_options && k->nvrtc_options[no] && no < 6; no++) opts[no] = k->nvrtc_options[no];
            opts[no++] = "--ptxas-options=-v";
            opts[no] = NULL;
            qc_cubin c;
            qc_reason why;
            double t0 = qc_now_seconds();
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, sm, sm >= 90, &c, &why);
            CHECK(st == QC_OK, "%s for sm_%d: %s: %s", k->id, sm, why.code, why.text);
            if (st != QC_OK) continue;
            int regs, spill;
            char *log = nv_ptxas_report(tmp, &c, NULL, NULL, &regs, &spill);
            printf("%s: %-22s %-7s %5.1f s, cubin %7zu B, %d registers, %d B spilled\n", TEST, k->id, c.target,
                   qc_now_seconds() - t0, c.size, regs, spill);
            /* at the 64-register cap ptxas may park a value or two outside the loops (none inside: sass()) */
            CHECK(!strict || (regs > 0 && regs <= 64 && spill <= 16), "%s for %s: %d registers (<= 64 wanted), %d bytes spilled",
                  k->id, c.target, regs, spill);
            free(log);
            sass(tmp, k->id, &c, strict);
            qc_cubin_free(&c);
        }
    }
    /* sm_90a only, no spills: fp8.gemv_wg_* (no serialized wgmma, C7512; QGMMA and no conversions in the SASS) and
       fp8.gemv1_tma_* (two 288-thread blocks an SM: <= 112 registers; its weights come by TMA, so sass()'s loop
       check does not apply) */
    static const struct {
        const char *id;
        int max_regs, sass_mode; /* sass_mode: sass()'s strict, or -1 for none */
    } SM90[] = {{"fp8.gemv_wg_channel", 128, 2},
                {"fp8.gemv_wg_tensor", 128, 2},
                {"fp8.gemv1_tma_channel", 112, -1},
                {"fp8.gemv1_tma_tensor", 112, -1}};
    for (size_t i = 0; i < sizeof SM90 / sizeof SM90[0]; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, SM90[i].id);
        CHECK(k != NULL, "%s is not registered", SM90[i].id);
        if (!k) continue;
        const char *opts[8];
        size_t no = 0;
        for (; k->nvrtc_options && k->nvrtc_options[no] && no < 6; no++) opts[no] = k->nvrtc_options[no];
        opts[no++] = "--ptxas-options=-v";
        opts[no] = NULL;
        qc_cubin c;
        qc_reason why;
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, 90, 1, &c, &why);
        CHECK(st == QC_OK, "%s for sm_90a: %s: %s", k->id, why.code, why.text);
        if (st != QC_OK) continue;
        int regs, spill;
        char *log = nv_ptxas_report(tmp, &c, NULL, NULL, &regs, &spill);
        const int serial = log && (strstr(log, "C7512") || strstr(log, "C7510"));
        printf("%s: %-22s %-7s cubin %7zu B, %d registers, %d B spilled%s\n", TEST, k->id, c.target, c.size, regs, spill,
               serial ? ", wgmma serialized" : "");
        CHECK(regs > 0 && regs <= SM90[i].max_regs && spill == 0 && !serial,
              "%s: %d registers (<= %d wanted), %d bytes spilled, serialized %d", k->id, regs, SM90[i].max_regs, spill,
              serial);
        free(log);
        if (SM90[i].sass_mode >= 0) sass(tmp, k->id, &c, SM90[i].sass_mode);
        qc_cubin_free(&c);
    }
    qc_nvrtc_destroy(nv);
    const char *keep = getenv("QC_KEEP_SASS");
    if (qc_test_failed || (keep && *keep))
        printf("%s: NVRTC logs and SASS kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

/* fp8.gemv1_tma_*: descriptor, every refusal with its code, the engine's pick, the plan (its sm_90a build: compiles()) */
static void gemv1_tma(qc_runtime *rt) {
    static const char *const FT[2] = {"fp8.gemv1_tma_channel", "fp8.gemv1_tma_tensor"};
    const qc_format_desc *f = qc_format_find(rt, "fp8");
    if (!f) return;
    const char *old_off = getenv("QC_FP8T"), *old_min = getenv("QC_FP8T_MIN_N");
    char *save_off = old_off ? strdup(old_off) : NULL, *save_min = old_min ? strdup(old_min) : NULL;
    unsetenv("QC_FP8T");
    unsetenv("QC_FP8T_MIN_N");
    for (int i = 0; i < 2; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, FT[i]);
        CHECK(k != NULL, "%s is not registered", FT[i]);
        if (!k) continue;
        CHECK(k->m_min == 1 && k->m_max == 1 && k->arch.min_sm == 90 && k->arch.max_sm == 90 && k->reference &&
                  k->n_params == 8 && k->n_tensor_maps == 0 && (k->flags & QC_KERNEL_GRID_DEP),
              "%s: descriptor", k->id);
        qc_reason why;
        qc_problem ok = prob(90, 1, 28672, 4096, SCHEMES[i]);
        CHECK(qc_select_kernel(k, f, &ok, 1, &why), "%s gate_up refused: %s: %s", k->id, why.code, why.text);
        qc_problem ok2 = prob(90, 1, 16384, 6144, SCHEMES[i]); /* the largest k two blocks an SM hold */
        CHECK(qc_select_kernel(k, f, &ok2, 1, &why), "%s k=6144 refused: %s: %s", k->id, why.code, why.text);
        expect_refused(k, f, prob(90, 2, 28672, 4096, SCHEMES[i]), "m_range");
        expect_refused(k, f, prob(89, 1, 28672, 4096, SCHEMES[i]), "arch");
        expect_refused(k, f, prob(100, 1, 28672, 4096, SCHEMES[i]), "arch");
        expect_refused(k, f, prob(90, 1, 28672, 4000, SCHEMES[i]), "align_k");
        expect_refused(k, f, prob(90, 1, 28680, 4096, SCHEMES[i]), "align_n");
        expect_refused(k, f, prob(90, 1, 28672, 6656, SCHEMES[i]), "shared_memory");
        expect_refused(k, f, prob(90, 1, 4096, 14336, SCHEMES[i]), "shared_memory");
        setenv("QC_FP8T_MIN_N", "8192", 1);
        expect_refused(k, f, prob(90, 1, 4096, 4096, SCHEMES[i]), "n_range");
        expect_refused(k, f, prob(90, 1, 28672, 4096, 3), "scheme");
        unsetenv("QC_FP8T_MIN_N");
        qc_problem small = prob(90, 1, 16, 512, SCHEMES[i]);
        CHECK(qc_select_kernel(k, f, &small, 1, &why), "%s n=16: %s: %s", k->id, why.code, why.text);
        setenv("QC_FP8T", "off", 1);
        expect_refused(k, f, prob(90, 1, 28672, 4096, SCHEMES[i]), "off");
        unsetenv("QC_FP8T");
        /* the plan: 264 blocks of ceil(n / 264) rows rounded up to whole stages; x + 8 stages of 2 rows + barriers */
        static const int64_t plans[][4] = {{28672, 4096, 261, 73856}, {16384, 6144, 256, 110720}, {16, 512, 8, 9344},
                                           {6144, 4096, 256, 73856}};
        for (size_t j = 0; j < sizeof plans / sizeof plans[0]; j++) {
            qc_problem p = prob(90, 1, plans[j][0], plans[j][1], SCHEMES[i]);
            qc_launch_dims d;
            k->launch_dims(&p, &d);
            CHECK(d.grid[0] == (uint32_t)plans[j][2] && d.block[0] == 288 && d.shared_bytes == (uint32_t)plans[j][3] &&
                      d.grid[1] == 1 && d.block[1] == 1,
                  "%s plan n=%lld k=%lld: grid %u block %u smem %u", k->id, (long long)plans[j][0],
                  (long long)plans[j][1], d.grid[0], d.block[0], d.shared_bytes);
        }
        qc_problem p0 = prob(90, 2, 28672, 4096, SCHEMES[i]);
        qc_launch_dims d0;
        k->launch_dims(&p0, &d0);
        CHECK(d0.grid[0] == 0, "%s: m = 2 should give an empty grid, got %u", k->id, d0.grid[0]);
    }
    /* the engine: qkv, o, gate_up at m = 1 on sm_90 take it; m 2, sm_89, down (k 14336), block scales and QC_FP8T=off
       do not */
    static const struct {
        uint32_t sm, scheme;
        int64_t m, n, k;
        const char *off, *want;
    } sel[] = {{90, 2, 1, 28672, 4096, NULL, "fp8.gemv1_tma_channel"}, {90, 4, 1, 28672, 4096, NULL, "fp8.gemv1_tma_tensor"},
               {90, 2, 1, 4096, 4096, NULL, "fp8.gemv1_tma_channel"},  {90, 2, 1, 6144, 4096, NULL, "fp8.gemv1_tma_channel"},
               {90, 5, 1, 28672, 4096, NULL, "fp8.gemv1_tma_channel"}, {90, 2, 2, 28672, 4096, NULL, "fp8.gemv_channel"},
               {89, 2, 1, 28672, 4096, NULL, "fp8.gemv_channel"},     {90, 2, 1, 4096, 14336, NULL, "fp8.gemv_channel"},
               {90, 3, 1, 28672, 4096, NULL, "fp8.gemv_block"},       {90, 2, 1, 28672, 4096, "off", "fp8.gemv_channel"}};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        if (sel[i].off) setenv("QC_FP8T", sel[i].off, 1);
        qc_problem p = prob(sel[i].sm, sel[i].m, sel[i].n, sel[i].k, sel[i].scheme);
        const qc_kernel_desc *k = NULL;
        qc_reason why;
        CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strcmp(k->id, sel[i].want) == 0,
              "sm_%u scheme %u m=%lld n=%lld: chose %s, want %s", sel[i].sm, sel[i].scheme, (long long)sel[i].m,
              (long long)sel[i].n, k ? k->id : why.text, sel[i].want);
        unsetenv("QC_FP8T");
    }
    if (save_off) setenv("QC_FP8T", save_off, 1);
    if (save_min) setenv("QC_FP8T_MIN_N", save_min, 1);
    free(save_off), free(save_min);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        descriptors(rt);
        plan(rt);
        references(rt);
        compiles(rt);
        gemv1_tma(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
