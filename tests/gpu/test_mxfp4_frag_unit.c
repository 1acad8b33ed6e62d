/* test_mxfp4_frag_unit.c - mxfp4.gemv_frag, mxfp4.gemv_frag_ps, mxfp4.gemv1 and mxfp4.gemv1_tma without a GPU: descriptors, refusals, selection, plans, references, sm_80 / sm_90a builds and SASS per 16 bytes of codes. */
#define _GNU_SOURCE
#include <math.h>
#include <unistd.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_mxfp4_frag_unit"

/* The two fragment GEMVs: the engine takes mxfp4.gemv_frag_ps for M 1..16; mxfp4.gemv_frag (registered behind
 * mxfp4.gemv, M 1..16) only with QC_MXF_PS=off, then up to M = 4. */
typedef struct kinfo {
    const char *id;
    int64_t m_max;     /* the descriptor's */
    int r2_m_max;      /* R = 2 (32-row blocks) planned only up to this m */
    const char *vote;  /* the per-chunk warp vote for the rare scale bytes (compiled out for the common path) */
} kinfo;
static const kinfo KINFO[] = {
    {"mxfp4.gemv_frag", 16, 4, "if (mxf_any_special<R>(s))"},
    {"mxfp4.gemv_frag_ps", 16, 16, "if (__any_sync(0xffffffffu, e > 128u))"},
};
#define NKINFO (sizeof KINFO / sizeof KINFO[0])

/* the n8 tiles of x a warp runs at m, and the W tiles it holds at once with R planned */
static void tiles_of(const kinfo *ki, int64_t m, int r, int *nb, int *rd, int *floats) {
    if (ki == &KINFO[0]) {
        *nb = m <= 4 ? 1 : m <= 8 ? 2 : 4, *rd = m <= 4 ? r : 1, *floats = 2;
    } else {
        *nb = m > 8 ? 2 : 1, *rd = r, *floats = 4; /* (its 3-stage build runs m > 8's tiles in turn: half) */
    }
}

static qc_problem prob(uint32_t sm, int64_t m, int64_t n, int64_t k) {
    qc_problem p = {.struct_size = sizeof p, .sm = sm, .m = m, .n = n, .k = k, .group_size = 32,
                    .phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE};
    return p;
}

static void expect_refused(const qc_kernel_desc *k, const qc_format_desc *f, qc_problem p, const char *code) {
    qc_reason why;
    memset(&why, 0, sizeof why);
    int ok = qc_select_kernel(k, f, &p, 1, &why);
    CHECK(!ok && strcmp(why.code, code) == 0, "%s m=%lld n=%lld k=%lld sm %u: '%s' (%s), expected %s", k->id,
          (long long)p.m, (long long)p.n, (long long)p.k, p.sm, ok ? "taken" : why.code, why.text, code);
    if (!ok) printf("%s: refused m=%lld n=%lld k=%lld sm_%u: %s: %s\n", TEST, (long long)p.m, (long long)p.n,
                    (long long)p.k, p.sm, why.code, why.text);
}

/* Descriptor, every refusal with its code, the engine's pick (mxfp4.gemv_frag_ps for M 1..16, mxfp4.gemv for
 * k % 128 != 0), the launch plan. */
static void descriptors(qc_runtime *rt, const kinfo *ki) {
    const char *KID = ki->id;
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *k = qc_kernel_find(rt, KID), *gv = qc_kernel_find(rt, "mxfp4.gemv"),
                         *kf = qc_kernel_find(rt, KINFO[0].id), *kp = qc_kernel_find(rt, KINFO[1].id);
    CHECK(f && k && gv && kf && kp, "mxfp4 format, %s or mxfp4.gemv not loaded from %s", KID, QC_TEST_PLUGIN_DIR);
    if (!f || !k || !gv || !kf || !kp) return;
    CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible, "%s lacks a part", KID);
    CHECK(k->m_min == 1 && k->m_max == ki->m_max && k->arch.min_sm == 80 && k->arch.max_sm == QC_SM_ANY,
          "%s: M [%lld, %lld] arch [%u, %u]", KID, (long long)k->m_min, (long long)k->m_max, k->arch.min_sm,
          k->arch.max_sm);
    CHECK(k->reference == gv->reference, "%s should share mxfp4.gemv's C reference", KID);
    CHECK(k->n_params == gv->n_params, "%s: %u params, mxfp4.gemv %u", KID, k->n_params, gv->n_params);
    for (uint32_t i = 0; i < k->n_params && i < gv->n_params; i++)
        CHECK(strcmp(k->params[i].name, gv->params[i].name) == 0 && k->params[i].type == gv->params[i].type,
              "%s param %u: %s, mxfp4.gemv has %s", KID, i, k->params[i].name, gv->params[i].name);
    qc_reason why;
    static const int64_t shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}, {8, 128}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int64_t m = 1; m <= 16; m++)
            for (uint32_t sm = 80; sm <= 90; sm += 10) {
                qc_problem p = prob(sm, m, shapes[i][0], shapes[i][1]);
                const qc_kernel_desc *sel = NULL;
                /* mxfp4.gemv1 at m = 1 with k % 1024 == 0 (narrowest M range; mxfp4.gemv1_tma instead on sm_90
                 * for k <= 5120; mxfp4.gemv1_xr ahead of both with QC_MXX=on), else mxfp4.gemv_frag_ps (registered first: faster than both others
                 * on the H200), then mxfp4.gemv, mxfp4.gemv_frag */
                const int tma = sm >= 90 && p.k <= 5120 && !getenv("QC_MXT") && !getenv("QC_MXT_MIN_N");
                const char *mxx = getenv("QC_MXX"); /* mxfp4.gemv1_xr: opt-in, registered first */
                const int xr = mxx && strcmp(mxx, "on") == 0;
                const qc_kernel_desc *want =
                    m == 1 && p.k % 1024 == 0
                        ? qc_kernel_find(rt, xr ? "mxfp4.gemv1_xr" : tma ? "mxfp4.gemv1_tma" : "mxfp4.gemv1")
                        : kp;
                CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel == want,
                      "sm_%u m=%lld %lldx%lld chose %s", sm, (long long)m, (long long)p.n, (long long)p.k,
                      sel ? sel->id : why.text);
            }
    expect_refused(k, f, prob(90, 1, 4096, 4160), "align_k"); /* k % 32 == 0, not % 128 */
    expect_refused(k, f, prob(90, 1, 4096, 96), "align_k");
    expect_refused(k, f, prob(90, 1, 4096, 4112), "align_k"); /* the format's own */
    expect_refused(k, f, prob(90, 1, 4100, 4096), "align_n");
    if (ki->m_max < 16) expect_refused(k, f, prob(90, ki->m_max + 1, 4096, 4096), "m_range");
    expect_refused(k, f, prob(90, 17, 4096, 4096), "m_range");
    expect_refused(k, f, prob(90, 0, 4096, 4096), "m_range");
    expect_refused(k, f, prob(75, 1, 4096, 4096), "arch");
    qc_problem pe = prob(90, 1, 4096, 4160);
    CHECK(k->eligible(&pe, &why) == 0 && strcmp(why.code, "align_k") == 0 && strstr(why.text, "4160"),
          "eligible k=4160: %s %s", why.code, why.text);
    pe = prob(90, 1, 3000000000LL, 128);
    CHECK(k->eligible(&pe, &why) == 0 && strcmp(why.code, "shape") == 0, "eligible n=3e9: %s", why.code);
    pe = prob(90, 1, 4100, 4096);
    CHECK(k->eligible(&pe, &why) == 1, "%s itself takes any n: %s", KID, why.text);
    /* what it refuses, mxfp4.gemv takes */
    qc_problem pf = prob(90, 3, 4096, 4160);
    const qc_kernel_desc *sel = NULL;
    CHECK(qc_select_format(rt, f, &pf, 1, &sel, &why) && sel == gv, "k=4160 chose %s", sel ? sel->id : why.text);

    /* the plan: grid covers every 16-row tile, the device's R rule (R = 1 iff 16 grid >= n), R = 2 only at m <= 4
     * (or forced), KS <= 16, the reduction fits in 48 KiB and holds what the device writes */
    static const int64_t plans[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}, {8, 128},
                                       {24, 384},   {1000, 640},  {4104, 1152},  {72, 14336},  {16, 256}};
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++)
        for (int64_t m = 1; m <= 16; m++) {
            qc_problem p = prob(90, m, plans[i][0], plans[i][1]);
            qc_launch_dims d;
            k->launch_dims(&p, &d);
            int64_t n = p.n, tiles = (n + 15) / 16;
            int ks = (int)(d.block[0] / 32), r = (int64_t)d.grid[0] * 16 >= n ? 1 : 2;
            int nb, rd, fl;
            tiles_of(ki, m, r, &nb, &rd, &fl);
            int okd = d.grid[0] > 0 && d.grid[1] == 1 && d.grid[2] == 1 && d.block[0] % 32 == 0 && ks >= 1 &&
                      ks <= 16 && d.block[1] == 1 && (int64_t)d.grid[0] == (tiles + r - 1) / r &&
                      (r == 1 || m <= ki->r2_m_max) && d.shared_bytes <= 48u * 1024u &&
                      d.shared_bytes >= (uint32_t)(ks - 1) * (uint32_t)(rd * nb * fl) * 128u;
            CHECK(okd, "%s plan m=%lld n=%lld k=%lld: grid %u block %u smem %u", KID, (long long)m, (long long)n,
                  (long long)p.k, d.grid[0], d.block[0], d.shared_bytes);
            if ((m == 1 || m == 16) && i < 4)
                printf("%s: %s plan m=%lld n=%lld k=%lld: %u blocks of %d warps (K split %d, %d tile%s of 16 rows a "
                       "block), %lld chunks a warp, %u B shared\n",
                       TEST, KID, (long long)m, (long long)n, (long long)p.k, d.grid[0], ks, ks, r, r > 1 ? "s" : "",
                       (long long)((p.k / 128 + ks - 1) / ks), d.shared_bytes);
        }
    qc_problem p0 = prob(90, 0, 4096, 4096);
    qc_launch_dims d;
    k->launch_dims(&p0, &d);
    CHECK(d.grid[0] == 0, "m = 0 should give an empty grid");
}

/* Its reference through its own descriptor equals mxfp4.gemv's bit for bit and writes every output. */
static void references(qc_runtime *rt, const char *KID) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *kf = qc_kernel_find(rt, KID), *kg = qc_kernel_find(rt, "mxfp4.gemv");
    if (!f || !kf || !kg) return;
    int64_t m = 5, n = 40, k = 384;
    uint64_t rng = 11;
    float *w = malloc(sizeof(float) * (size_t)(n * k)), *y1 = malloc(sizeof(float) * (size_t)(m * n)),
          *y2 = malloc(sizeof(float) * (size_t)(m * n));
    uint16_t *xb = malloc(2 * (size_t)(m * k));
    for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.1f;
    for (int64_t i = 0; i < m * k; i++) xb[i] = qc_f32_to_bf16(qc_test_normal(&rng));
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    qc_status st = f->quantize(&req, &pw, &why);
    CHECK(st == QC_OK, "quantize: %s", why.text);
    if (st == QC_OK) {
        void *pq = pw.buffers[0].data, *ps = pw.buffers[1].data, *px = xb, *py1 = y1, *py2 = y2;
        qc_named_arg a[] = {{"x.bf16", &px}, {"w.qweight", &pq}, {"w.scales", &ps}, {"y", &py1},
                            {"m", &m},       {"n", &n},          {"k", &k}};
        void *argv[8];
        char err[256];
        gt_poison(y1, (size_t)(m * n) * 4);
        gt_poison(y2, (size_t)(m * n) * 4);
        st = qc_kernel_bind(kg, a, 7, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kg, argv, err, sizeof err);
        CHECK(st == QC_OK, "mxfp4.gemv reference: %s", err);
        a[3].value = &py2;
        st = qc_kernel_bind(kf, a, 7, argv, 8, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kf, argv, err, sizeof err);
        CHECK(st == QC_OK, "%s reference: %s", KID, err);
        CHECK(gt_unwritten(y2, (size_t)(m * n) * 4, NULL) == 0, "%s left outputs unwritten", KID);
        CHECK(memcmp(y1, y2, (size_t)(m * n) * 4) == 0, "%s reference differs from mxfp4.gemv's", KID);
        for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
    }
    free(w), free(y1), free(y2), free(xb);
}

/* SASS of the cubin (nvdisasm on PATH, else skipped): opcode totals, and each innermost loop with HMMAs (the
 * chunk loop, unrolled by two) per 16 bytes of codes a lane streams (LDG.E.NA.64: 8 bytes each, LDG.E.NA.128:
 * 16). */
#define SASS_MAX 60000
typedef struct sass_ins {
    unsigned addr;
    char op[32];
    char target[24];
} sass_ins;

static int op_is(const char *op, const char *prefix) { return strncmp(op, prefix, strlen(prefix)) == 0; }

static void sass_counts(const char *tmp, const qc_cubin *c, int per16) {
    if (system("command -v nvdisasm >/dev/null 2>&1") != 0) {
        printf("%s: nvdisasm is not on PATH, SASS not counted\n", TEST);
        return;
    }
    char path[1200], cmd[1400], line[512];
    snprintf(path, sizeof path, "%s/%s.sass-input", tmp, c->key);
    CHECK(nv_write(path, c->data, c->size) == 0, "cannot write %s", path);
    snprintf(cmd, sizeof cmd, "nvdisasm -c '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "cannot run nvdisasm");
    if (!p) return;
    sass_ins *ins = calloc(SASS_MAX, sizeof *ins);
    char(*lab)[24] = calloc(SASS_MAX, sizeof *lab);
    unsigned *lab_addr = calloc(SASS_MAX, sizeof *lab_addr);
    int n = 0, nl = 0, pending = 0;
    while (ins && lab && lab_addr && fgets(line, sizeof line, p)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (strncmp(s, ".L_x_", 5) == 0 && nl < SASS_MAX) {
            snprintf(lab[nl], sizeof lab[nl], "%.*s", (int)strcspn(s, ":\n"), s);
            pending++, nl++;
            continue;
        }
        unsigned a;
        if (sscanf(s, "/*%x*/", &a) != 1 || n >= SASS_MAX || !strchr(s, ';')) continue;
        s = strstr(s, "*/") + 2;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '@') s += strcspn(s, " ") + 1;
        sass_ins *I = &ins[n++];
        I->addr = a;
        snprintf(I->op, sizeof I->op, "%.*s", (int)strcspn(s, " ;"), s);
        char *t = strstr(s, "`(");
        if (t && op_is(I->op, "BRA")) snprintf(I->target, sizeof I->target, "%.*s", (int)strcspn(t + 2, ")"), t + 2);
        for (; pending > 0; pending--) lab_addr[nl - pending] = a;
    }
    int rc = pclose(p);
    CHECK(rc == 0 && n > 100, "nvdisasm failed (%d) or gave %d instructions", rc, n);
    static const char *const ops[] = {"HMMA", "LDG", "LDS", "STS", "LOP3", "SHF", "IMAD", "HFMA2", "PRMT", "FFMA",
                                      "VOTE", "BRA", "LDL", "STL", "BAR"};
    enum { NOPS = sizeof ops / sizeof ops[0] };
    size_t counts[NOPS] = {0};
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < NOPS; j++) {
            size_t l = strlen(ops[j]);
            if (strncmp(ins[i].op, ops[j], l) == 0 && (ins[i].op[l] == '.' || ins[i].op[l] == 0)) counts[j]++;
        }
    printf("%s: %s SASS: %d instructions;", TEST, c->target, n);
    for (size_t j = 0; j < NOPS; j++) printf(" %s %zu", ops[j], counts[j]);
    printf("\n");
    CHECK(counts[0] > 0, "%s: no HMMA in the SASS", c->target);
    /* the common-path build (per16) is only counted, never run: there ptxas's allocation may differ (a value of
     * mxfp4.gemv_frag_ps's entry kept on the stack across its calls); the loops below are checked in both */
    CHECK(per16 || counts[12] + counts[13] == 0, "%s: local-memory accesses (LDL %zu, STL %zu): spills or indexed "
          "arrays", c->target, counts[12], counts[13]);
    if (per16 && counts[12] + counts[13])
        printf("%s: %s common-path build: %zu local-memory accesses outside the chunk loops\n", TEST, c->target,
               counts[12] + counts[13]);
    /* loops: [target, branch] of each backward branch holding HMMAs, innermost only */
    int lo[128], hi[128], nloop = 0, shown = 0;
    for (int i = 0; i < n && nloop < 128; i++) {
        if (!ins[i].target[0]) continue;
        unsigned ta = 0;
        int found = 0;
        for (int j = 0; j < nl; j++)
            if (strcmp(lab[j], ins[i].target) == 0) ta = lab_addr[j], found = 1;
        if (!found || ta >= ins[i].addr) continue;
        int s0 = 0, hm = 0, ex = 0;
        while (s0 < n && ins[s0].addr < ta) s0++;
        for (int j = s0; j <= i; j++) hm += op_is(ins[j].op, "HMMA"), ex += op_is(ins[j].op, "EXIT");
        if (hm && !ex) lo[nloop] = s0, hi[nloop] = i, nloop++;
    }
    for (int L = 0; L < nloop; L++) {
        int inner = 1;
        for (int M = 0; M < nloop; M++)
            if (M != L && lo[M] >= lo[L] && hi[M] <= hi[L] && (lo[M] != lo[L] || hi[M] != hi[L])) inner = 0;
        if (!inner) continue;
        int tot = 0, hmma = 0, wld = 0, wb = 0, xld = 0, sld = 0, lop = 0, shf = 0, imad = 0, hfma = 0, prmt = 0, ffma = 0,
            ctl = 0, local = 0;
        for (int j = lo[L]; j <= hi[L]; j++) {
            const char *o = ins[j].op;
            tot++;
            local += op_is(o, "LDL") || op_is(o, "STL");
            if (op_is(o, "HMMA")) hmma++;
            else if (op_is(o, "LDG.E.NA.64")) wld++, wb += 8;
            else if (op_is(o, "LDG.E.NA.128")) wld++, wb += 16;
            else if (op_is(o, "LDG.E.128")) xld++;
            else if (op_is(o, "LDG")) sld++;
            else if (op_is(o, "LOP3")) lop++;
            else if (op_is(o, "SHF")) shf++;
            else if (op_is(o, "IMAD") || op_is(o, "LEA")) imad++;
            else if (op_is(o, "HFMA2") || op_is(o, "HMUL2")) hfma++;
            else if (op_is(o, "PRMT")) prmt++;
            else if (op_is(o, "FFMA") || op_is(o, "FMUL")) ffma++;
            else if (op_is(o, "BRA") || op_is(o, "BSSY") || op_is(o, "BSYNC") || op_is(o, "VOTE") ||
                     op_is(o, "WARPSYNC") || op_is(o, "NOP"))
                ctl++;
        }
        CHECK(local == 0, "%s: %d local-memory accesses inside the loop at %#x: spills in the hot path", c->target,
              local, ins[lo[L]].addr);
        if (!per16) continue; /* the full build: its loops hold both chunk copies (see sass_common) */
        double u = wb / 16.0; /* 16-byte units of codes per lane per trip */
        printf("%s:   %s loop %#x..%#x: %d instructions, %d HMMA, W %d x LDG.E.NA (%d B/lane), x %d x "
               "LDG.E.128, scales %d other LDG\n",
               TEST, c->target, ins[lo[L]].addr, ins[hi[L]].addr, tot, hmma, wld, wb, xld, sld);
        if (u > 0)
            printf("%s:     per 16 B of codes (32 weights) a lane: %.1f instr = LOP3 %.1f + SHF %.1f + IMAD/LEA %.1f "
                   "+ HFMA2 %.1f + PRMT %.1f + FFMA %.1f + HMMA %.1f + LDG %.2f + control %.1f + other %.1f\n",
                   TEST, tot / u, lop / u, shf / u, imad / u, hfma / u, prmt / u, ffma / u, hmma / u,
                   (wld + xld + sld) / u, ctl / u,
                   (tot - lop - shf - imad - hfma - prmt - ffma - hmma - wld - xld - sld - ctl) / u);
        shown++;
    }
    CHECK(!per16 || shown > 0, "%s: no loop with HMMA found in the SASS", c->target);
    free(ins);
    free(lab);
    free(lab_addr);
}

/* The common path: each chunk is compiled twice (the exact scale conversion for scale bytes 0 and 0xFF, chosen
 * per chunk by a warp vote), so the per-16-byte count is made on a build whose vote is replaced by false: its
 * loops hold only what runs on real weights. */
static void sass_common(qc_nvrtc *nv, const qc_kernel_desc *k, const char *tmp, const kinfo *ki) {
    const char *KID = ki->id, *vote = ki->vote;
    const char *at = strstr(k->cuda_source, vote);
    CHECK(at != NULL, "%s source has no per-chunk vote '%s' any more: update sass_common", KID, vote);
    if (!at) return;
    size_t len = strlen(k->cuda_source), pre = (size_t)(at - k->cuda_source);
    char *src = malloc(len + 1);
    if (!src) return;
    memcpy(src, k->cuda_source, pre);
    snprintf(src + pre, len + 1 - pre, "if (false)%s", at + strlen(vote));
    qc_cubin c;
    qc_reason why;
    char key[96];
    snprintf(key, sizeof key, "%s.common", KID);
    qc_status st = qc_nvrtc_compile(nv, key, src, k->cuda_entry, NULL, 90, 1, &c, &why);
    CHECK(st == QC_OK, "%s common-path build: %s: %s", KID, why.code, why.text);
    if (st == QC_OK) {
        if (ki == &KINFO[0])
            printf("%s: SASS of %s for sm_90a, common path (the exact-scale chunks compiled out); one loop per "
                   "variant (R = 2 at m <= 4: 128 B a lane a trip; R = 1 at m <= 4, 8, 16: 4, 8, 16 HMMA per 16 B):\n",
                   TEST, KID);
        else
            printf("%s: SASS of %s for sm_90a, common path (the chunks with scale bytes above 128 compiled out); "
                   "one loop per variant (R = 1 at m <= 8, 16: 4, 8 HMMA per 16 B; R = 2 at m <= 8, 16: 128 B a lane a "
                   "trip):\n", TEST, KID);
        sass_counts(tmp, &c, 1);
        qc_cubin_free(&c);
    }
    free(src);
}

/* The kernel through NVRTC for sm_80 and sm_90a, with ptxas's register report (no spills in the loops). */
static void compiles(qc_runtime *rt, const kinfo *ki) {
    const qc_kernel_desc *k = qc_kernel_find(rt, ki->id);
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
    /* mxfp4.gemv_frag_ps also as QC_MXP_STAGES=3 builds it (its source with MXP_STAGES defined first) */
    char *src3 = NULL;
    if (ki == &KINFO[1] && asprintf(&src3, "#define MXP_STAGES 3\n%s", k->cuda_source) < 0) src3 = NULL;
    CHECK(ki != &KINFO[1] || src3, "out of memory");
    for (int t = 0; t < (src3 ? 4 : 2); t++) {
        int sm = t & 1 ? 90 : 80;
        const char *src = t < 2 ? k->cuda_source : src3, *var = t < 2 ? "" : " (3 stages)";
        char key[96];
        snprintf(key, sizeof key, "%s%s", k->id, t < 2 ? "" : ".s3");
        qc_cubin c;
        qc_reason why;
        double t0 = qc_now_seconds();
        qc_status st = qc_nvrtc_compile(nv, key, src, k->cuda_entry, opts, sm, t & 1, &c, &why);
        CHECK(st == QC_OK, "%s%s for sm_%d%s: %s: %s", k->id, var, sm, t & 1 ? "a" : "", why.code, why.text);
        if (st != QC_OK) continue;
        printf("%s: %s%s for %s in %.1f s, cubin %zu bytes\n", TEST, k->id, var, c.target, qc_now_seconds() - t0,
               c.size);
        int regs, spill;
        char *log = nv_ptxas_report(tmp, &c, NULL, TEST, &regs, &spill);
        CHECK(log != NULL, "no NVRTC log for %s", c.target);
        CHECK(spill == 0, "%s register spills: %d bytes", c.target, spill);
        /* 512 threads a block (K split 16) must fit the register file */
        CHECK(regs > 0 && regs <= 128, "%s: %d registers (512-thread blocks need <= 128)", c.target, regs);
        free(log);
        sass_counts(tmp, &c, 0);
        qc_cubin_free(&c);
    }
    free(src3);
    sass_common(nv, k, tmp, ki);
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

/* mxfp4.gemv1 (m = 1, k % 1024): descriptor, refusals, the plan, the reference, sm_80 / sm_90a builds */
/* kernel k through NVRTC for sm_80 (unless from_sm is 90) and sm_90a, ptxas's report for `entry` (NULL: the only
 * one): no spills, at most max_regs registers */
static void builds_clean(const qc_kernel_desc *k, const char *entry, int from_sm, int max_regs) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const char *const opts[] = {"--ptxas-options=-v", NULL};
    for (int t = from_sm >= 90 ? 1 : 0; t < 2; t++) {
        qc_cubin c;
        qc_reason why;
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, t ? 90 : 80, t, &c, &why);
        CHECK(st == QC_OK, "%s for sm_%d: %s: %s", k->id, t ? 90 : 80, why.code, why.text);
        if (st != QC_OK) continue;
        int regs, spill;
        char *log = nv_ptxas_report(tmp, &c, entry, TEST, &regs, &spill);
        CHECK(log && spill == 0 && regs > 0 && regs <= max_regs, "%s %s: %d registers, %d bytes spilled", k->id,
              c.target, regs, spill);
        printf("%s: %s for %s: %d registers, no spills\n", TEST, k->id, c.target, regs);
        free(log);
        qc_cubin_free(&c);
    }
    qc_nvrtc_destroy(nv);
    nv_rm_rf(tmp);
}

static void gemv1_checks(qc_runtime *rt) {
    const char *ID = "mxfp4.gemv1";
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *k = qc_kernel_find(rt, ID), *gv = qc_kernel_find(rt, "mxfp4.gemv");
    CHECK(f && k && gv, "mxfp4 format, %s or mxfp4.gemv not loaded", ID);
    if (!f || !k || !gv) return;
    CHECK(k->m_min == 1 && k->m_max == 1 && k->arch.min_sm == 80 && k->reference == gv->reference &&
              k->n_params == gv->n_params && (k->flags & QC_KERNEL_GRID_DEP),
          "%s: M [%lld, %lld] arch %u, reference / params / flags", ID, (long long)k->m_min, (long long)k->m_max,
          k->arch.min_sm);
    qc_reason why;
    static const int64_t ok[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}, {80, 1024}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        qc_problem p = prob(90, 1, ok[i][0], ok[i][1]);
        CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s %lldx%lld refused: %s", ID, (long long)p.n, (long long)p.k,
              why.text);
    }
    expect_refused(k, f, prob(90, 1, 4096, 1152), "align_k"); /* k % 128 == 0, not % 1024 */
    expect_refused(k, f, prob(90, 1, 4096, 4160), "align_k");
    expect_refused(k, f, prob(90, 2, 4096, 4096), "m_range");
    expect_refused(k, f, prob(75, 1, 4096, 4096), "arch");
    const char *old = getenv("QC_MXG");
    char *saved = old ? strdup(old) : NULL;
    setenv("QC_MXG", "off", 1);
    expect_refused(k, f, prob(90, 1, 4096, 4096), "off");
    const qc_kernel_desc *sel = NULL;
    qc_problem po = prob(90, 1, 4096, 14336); /* down: mxfp4.gemv1_tma does not fit; mxfp4.gemv1_xr is opt-in */
    unsetenv("QC_MXX");
    CHECK(qc_select_format(rt, f, &po, 1, &sel, &why) && sel == qc_kernel_find(rt, "mxfp4.gemv_frag_ps"),
          "QC_MXG=off: m=1 chose %s", sel ? sel->id : why.text);
    unsetenv("QC_MXX");
    if (saved) setenv("QC_MXG", saved, 1);
    else unsetenv("QC_MXG");
    free(saved);
    /* the plan: 4 rows a block, K split 1..8 with (KS - 1) x 4 floats; the Llama-3-8B splits w4a16.gemv1_sym has */
    static const int64_t plans[][3] = {{4096, 4096, 2}, {6144, 4096, 1}, {28672, 4096, 1}, {4096, 14336, 2},
                                       {77, 1024, 1},   {1000, 7168, 2}};
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        qc_problem p = prob(90, 1, plans[i][0], plans[i][1]);
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        int ks = (int)(d.block[0] / 32);
        CHECK((int64_t)d.grid[0] == (p.n + 3) / 4 && d.block[0] % 32 == 0 && ks >= 1 && ks <= 8 &&
                  d.shared_bytes >= (uint32_t)(ks - 1) * 16u && (getenv("QC_MXG_KS") || ks == plans[i][2]),
              "%s plan %lldx%lld: grid %u block %u smem %u", ID, (long long)p.n, (long long)p.k, d.grid[0],
              d.block[0], d.shared_bytes);
    }
    qc_problem p2 = prob(90, 2, 4096, 4096);
    qc_launch_dims d;
    k->launch_dims(&p2, &d);
    CHECK(d.grid[0] == 0, "%s: m = 2 should give an empty grid", ID);
    references(rt, ID);
    builds_clean(k, NULL, 80, 128);
}

/* mxfp4.gemv1_tma (sm_90, m = 1, k % 1024, k <= 5120, n >= QC_MXT_MIN_N when set): descriptor, refusals, the plan, the engine's pick,
 * the reference (mxfp4.gemv's), the sm_90a build */
static void gemv1_tma_checks(qc_runtime *rt) {
    const char *ID = "mxfp4.gemv1_tma";
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *k = qc_kernel_find(rt, ID), *gv = qc_kernel_find(rt, "mxfp4.gemv");
    CHECK(f && k && gv, "mxfp4 format, %s or mxfp4.gemv not loaded", ID);
    if (!f || !k || !gv) return;
    CHECK(k->m_min == 1 && k->m_max == 1 && k->arch.min_sm == 90 && k->reference == gv->reference &&
              k->n_params == gv->n_params && (k->flags & QC_KERNEL_GRID_DEP),
          "%s: M [%lld, %lld] arch %u, reference / params / flags", ID, (long long)k->m_min, (long long)k->m_max,
          k->arch.min_sm);
    const char *old_off = getenv("QC_MXT"), *old_min = getenv("QC_MXT_MIN_N");
    char *saved_off = old_off ? strdup(old_off) : NULL, *saved_min = old_min ? strdup(old_min) : NULL;
    unsetenv("QC_MXT");
    unsetenv("QC_MXT_MIN_N");
    qc_reason why;
    static const int64_t ok[][2] = {{28672, 4096}, {16384, 1024}, {16384, 5120}, {28680, 2048}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        qc_problem p = prob(90, 1, ok[i][0], ok[i][1]);
        CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s %lldx%lld refused: %s", ID, (long long)p.n, (long long)p.k,
              why.text);
    }
    expect_refused(k, f, prob(80, 1, 28672, 4096), "arch");
    setenv("QC_MXT_MIN_N", "16384", 1);
    expect_refused(k, f, prob(90, 1, 4096, 4096), "n_range");
    expect_refused(k, f, prob(90, 1, 6144, 4096), "n_range");
    unsetenv("QC_MXT_MIN_N");
    expect_refused(k, f, prob(90, 1, 28672, 6144), "shared_memory");
    expect_refused(k, f, prob(90, 1, 28672, 7168), "shared_memory");
    expect_refused(k, f, prob(90, 1, 28672, 14336), "shared_memory");
    expect_refused(k, f, prob(90, 1, 28672, 1152), "align_k");
    expect_refused(k, f, prob(90, 2, 28672, 4096), "m_range");
    setenv("QC_MXT", "off", 1);
    expect_refused(k, f, prob(90, 1, 28672, 4096), "off");
    const qc_kernel_desc *sel = NULL;
    qc_problem po = prob(90, 1, 28672, 4096);
    unsetenv("QC_MXX"); /* mxfp4.gemv1_xr (opt-in, registered first) takes it when on */
    CHECK(qc_select_format(rt, f, &po, 1, &sel, &why) && sel == qc_kernel_find(rt, "mxfp4.gemv1"),
          "QC_MXT=off: gate_up m=1 chose %s", sel ? sel->id : why.text);
    unsetenv("QC_MXX");
    unsetenv("QC_MXT");
    setenv("QC_MXT_MIN_N", "1", 1); /* the tests' switch: short layers too */
    qc_problem p1 = prob(90, 1, 8, 1024);
    CHECK(qc_select_kernel(k, f, &p1, 1, &why), "%s n=8 with QC_MXT_MIN_N=1 refused: %s", ID, why.text);
    unsetenv("QC_MXT_MIN_N");
    /* the plan: blocks of a multiple of 4 rows, 9 warps, x + the ring + barriers */
    static const int64_t plans[][4] = {{28672, 4096, 256, 77952}, {16384, 5120, 256, 97408}, {1, 1024, 1, 19584},
                                       {4097, 2048, 257, 39040}};
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        qc_problem p = prob(90, 1, plans[i][0], plans[i][1]);
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == (uint32_t)plans[i][2] && d.grid[1] == 1 && d.block[0] == 288 && d.block[1] == 1 &&
                  d.shared_bytes == (uint32_t)plans[i][3],
              "%s plan %lldx%lld: grid %u block %u smem %u, expected %lld blocks and %lld bytes", ID, (long long)p.n,
              (long long)p.k, d.grid[0], d.block[0], d.shared_bytes, (long long)plans[i][2], (long long)plans[i][3]);
    }
    qc_launch_dims d;
    qc_problem p2 = prob(90, 2, 28672, 4096), pk = prob(90, 1, 28672, 7168);
    k->launch_dims(&p2, &d);
    CHECK(d.grid[0] == 0, "%s: m = 2 should give an empty grid", ID);
    k->launch_dims(&pk, &d);
    CHECK(d.grid[0] == 0, "%s: k = 7168 (over its shared memory) should give an empty grid", ID);
    if (saved_off) setenv("QC_MXT", saved_off, 1);
    if (saved_min) setenv("QC_MXT_MIN_N", saved_min, 1);
    free(saved_off), free(saved_min);
    references(rt, ID);
    builds_clean(k, "qc_mxfp4_gemv1_tma", 90, 112);
}

/* mxfp4.gemv1_xr: opt-in (QC_MXX=on), sm_80+, m = 1, k % 1024 with at most 16 K slices; with it on the engine's
 * pick at m = 1 on the Llama-3-8B shapes; its reference, and sm_80 / sm_90a builds without spills. */
static void gemv1_xr_checks(qc_runtime *rt) {
    static const char ID[] = "mxfp4.gemv1_xr";
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *k = qc_kernel_find(rt, ID);
    CHECK(f && k, "%s not loaded", ID);
    if (!f || !k) return;
    CHECK(k->m_min == 1 && k->m_max == 1 && k->arch.min_sm == 80 && (k->flags & QC_KERNEL_GRID_DEP),
          "%s: M [%lld, %lld] arch %u flags 0x%x", ID, (long long)k->m_min, (long long)k->m_max, k->arch.min_sm,
          k->flags);
    const char *old = getenv("QC_MXX");
    char *saved = old ? strdup(old) : NULL;
    qc_reason why;
    unsetenv("QC_MXX");
    expect_refused(k, f, prob(90, 1, 4096, 4096), "off"); /* the default */
    setenv("QC_MXX", "on", 1);
    static const int64_t ok[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}, {1000, 5120}, {8, 32768}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        for (uint32_t sm = 80; sm <= 90; sm += 10) {
            qc_problem p = prob(sm, 1, ok[i][0], ok[i][1]);
            const qc_kernel_desc *sel = NULL;
            CHECK(qc_select_format(rt, f, &p, 1, &sel, &why) && sel == k, "QC_MXX=on sm_%u m=1 %lldx%lld chose %s",
                  sm, (long long)p.n, (long long)p.k, sel ? sel->id : why.text);
        }
    expect_refused(k, f, prob(90, 1, 4096, 1152), "align_k");
    expect_refused(k, f, prob(90, 1, 8, 34816), "k_range"); /* 34 steps: 17 slices */
    expect_refused(k, f, prob(90, 1, 8, 17408), "k_range"); /* 17 steps: 17 slices of one */
    expect_refused(k, f, prob(90, 2, 4096, 4096), "m_range");
    expect_refused(k, f, prob(75, 1, 4096, 4096), "arch");
    qc_launch_dims d;
    qc_problem pg = prob(90, 1, 28672, 4096);
    k->launch_dims(&pg, &d);
    CHECK(d.grid[0] == 132 && d.block[0] == 512 && d.shared_bytes == 1744, "%s plan gate_up: grid %u block %u smem %u",
          ID, d.grid[0], d.block[0], d.shared_bytes);
    /* 39 pairs (the last one row: the kernel takes odd n, run directly by test_gpu_mxfp4), 3 slices of one step x 5
       row groups */
    qc_problem po = prob(90, 1, 77, 3072);
    k->launch_dims(&po, &d);
    CHECK(d.grid[0] == 39 && d.block[0] == 480 && d.shared_bytes == 24, "%s plan n=77 k=3072: grid %u block %u smem %u",
          ID, d.grid[0], d.block[0], d.shared_bytes);
    if (saved) setenv("QC_MXX", saved, 1);
    else unsetenv("QC_MXX");
    free(saved);
    references(rt, ID);
    builds_clean(k, "qc_mxfp4_gemv1_xr", 80, 128);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        for (size_t i = 0; i < NKINFO; i++) {
            descriptors(rt, &KINFO[i]);
            references(rt, KINFO[i].id);
            compiles(rt, &KINFO[i]);
        }
        gemv1_checks(rt);
        gemv1_tma_checks(rt);
        gemv1_xr_checks(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
