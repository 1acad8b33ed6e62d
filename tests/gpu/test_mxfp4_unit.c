/* test_mxfp4_unit.c - mxfp4 GPU kernels without a GPU: descriptors, selection and refusals, mxfp4.wgmma's launch plan, the bf16-x reference, NVRTC builds per arch. */
#define _GNU_SOURCE
#include <math.h>
#include <unistd.h>

#include "../../plugins/common/qc_bf16.h"
#include "nvrtc/nv_test.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_mxfp4_unit"

static const char *const IDS[] = {"mxfp4.gemv", "mxfp4.linear_mma", "mxfp4.gemv_sm100"};
#define N_IDS 3

static qc_problem prob(uint32_t sm, int64_t m, int64_t n, int64_t k) {
    qc_problem p = {.struct_size = sizeof p, .sm = sm, .m = m, .n = n, .k = k, .group_size = 32};
    p.phase = m > 1 ? QC_PHASE_PREFILL : QC_PHASE_DECODE;
    return p;
}

static void descriptors(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    CHECK(f != NULL, "format mxfp4 is not registered");
    if (!f) return;
    CHECK(f->supported_arch.min_sm == 80 && f->supported_arch.max_sm == QC_SM_ANY, "supported_arch %u..%u",
          f->supported_arch.min_sm, f->supported_arch.max_sm);
    CHECK(f->native_arch.min_sm == 100 && f->native_arch.max_sm == QC_SM_ANY, "native_arch %u..%u",
          f->native_arch.min_sm, f->native_arch.max_sm);
    static const char *const names[] = {"x.bf16", "w.qweight", "w.scales", "y", "m", "n", "k"};
    static const qc_param_type types[] = {QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_PTR, QC_PARAM_PTR,
                                          QC_PARAM_I64, QC_PARAM_I64, QC_PARAM_I64};
    for (int i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        CHECK(k != NULL, "%s is not registered", IDS[i]);
        if (!k) continue;
        CHECK(strcmp(k->format, "mxfp4") == 0 && k->reference && k->cuda_source && k->cuda_entry && k->launch_dims &&
                  k->eligible,
              "%s: incomplete descriptor", IDS[i]);
        CHECK(k->n_params == 7, "%s: %u params", IDS[i], k->n_params);
        for (uint32_t j = 0; j < k->n_params && j < 7; j++)
            CHECK(strcmp(k->params[j].name, names[j]) == 0 && k->params[j].type == types[j], "%s param %u: %s",
                  IDS[i], j, k->params[j].name);
    }
    const qc_kernel_desc *gv = qc_kernel_find(rt, IDS[0]), *mm = qc_kernel_find(rt, IDS[1]),
                         *b1 = qc_kernel_find(rt, IDS[2]);
    if (!gv || !mm || !b1) return;
    CHECK(gv->m_min == 1 && gv->m_max == 16 && gv->arch.min_sm == 80 && gv->arch.max_sm == QC_SM_ANY, "gemv ranges");
    CHECK(mm->m_min == 17 && mm->m_max >= 65535LL * 128 && mm->arch.min_sm == 80 && mm->arch.max_sm == QC_SM_ANY,
          "linear_mma ranges");
    CHECK(b1->m_min == 1 && b1->m_max == 16 && b1->arch.min_sm == 100 && b1->arch.max_sm == 100, "gemv_sm100 ranges");
    CHECK(gv->reference == mm->reference && gv->reference == b1->reference, "the kernels share one reference");

    /* selection on the H200 (sm_90): the sm_100 build is refused with `arch` */
    qc_reason why;
    qc_problem p = prob(90, 1, 4096, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 1, "gemv refused m=1 on sm_90: %s", why.text);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv_sm100 on sm_90: %s %s",
          why.code, why.text);
    printf("%s: on sm_90 %s is refused: %s: %s\n", TEST, b1->id, why.code, why.text);
    CHECK(qc_select_kernel(mm, f, &p, 1, &why) == 0 && strcmp(why.code, "m_range") == 0, "linear_mma m=1: %s",
          why.code);
    p = prob(90, 17, 4096, 4096);
    CHECK(qc_select_kernel(mm, f, &p, 1, &why) == 1, "linear_mma refused m=17: %s", why.text);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "m_range") == 0, "gemv m=17: %s", why.code);
    p = prob(100, 4, 4096, 4096);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 1, "gemv_sm100 refused on sm_100: %s", why.text);
    p = prob(80, 1, 4096, 4096);
    CHECK(qc_select_kernel(b1, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv_sm100 on sm_80");
    p = prob(75, 1, 4096, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "gemv on sm_75");
    /* the format picks the GEMV at m <= 16 and the GEMM above (registration order) */
    const qc_kernel_desc *pick = NULL;
    /* (mxfp4.gemv_frag, registered first, takes k % 128 == 0: test_mxfp4_frag_unit) */
    p = prob(90, 16, 6144, 4160);
    CHECK(qc_select_format(rt, f, &p, 1, &pick, &why) == 1 && pick == gv, "format pick m=16: %s",
          pick ? pick->id : why.text);
    p = prob(90, 4096, 6144, 4096);
    CHECK(qc_select_format(rt, f, &p, 1, &pick, &why) == 1 && pick == mm, "format pick m=4096: %s",
          pick ? pick->id : why.text);
    /* shapes: K off the block and N off 8 are the format's refusals; the kernels' own say align_k too */
    p = prob(90, 1, 4096, 4112);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=4112: %s", why.code);
    CHECK(gv->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "gemv eligible k=4112: %s", why.code);
    CHECK(mm->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "mma eligible k=4112: %s", why.code);
    p = prob(90, 1, 4100, 4096);
    CHECK(qc_select_kernel(gv, f, &p, 1, &why) == 0 && strcmp(why.code, "align_n") == 0, "n=4100: %s", why.code);
    p = prob(90, 1, 4100, 4096);
    CHECK(gv->eligible(&p, &why) == 1, "gemv itself takes any n: %s", why.text);

    /* launch geometry */
    qc_launch_dims d;
    /* the GEMV: 4 warps per 16 rows, 32 rows (two tiles) only for m > 8 and n >= 16384; static shared memory */
    p = prob(90, 1, 28672, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == 28672 / 16 && d.block[0] == 128 && d.shared_bytes == 0, "gemv m=1 dims %u %u %u", d.grid[0],
          d.block[0], d.shared_bytes);
    p = prob(90, 16, 4097, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == (4097 + 15) / 16, "gemv m=16 n=4097 dims %u", d.grid[0]);
    p = prob(90, 16, 28672, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == 28672 / 32, "gemv m=16 n=28672 dims %u", d.grid[0]);
    p = prob(90, 8, 28672, 4096);
    gv->launch_dims(&p, &d);
    CHECK(d.grid[0] == 28672 / 16, "gemv m=8 n=28672 dims %u", d.grid[0]);
    p = prob(90, 1000, 4100, 4096);
    mm->launch_dims(&p, &d);
    CHECK(d.grid[0] == 33 && d.grid[1] == 8 && d.block[0] == 256 && d.shared_bytes == 98304, "mma dims %u %u",
          d.grid[0], d.grid[1]);
}

/* mxfp4.wgmma (sm_90a): its descriptor, refusals, and the launch plan (tile height from waves x per-tile cost, told
 * to the device by the ring size; plugins/common/qc_ra_gemm_src.h). */
static void wgmma_desc(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *k = qc_kernel_find(rt, "mxfp4.wgmma"), *mm = qc_kernel_find(rt, "mxfp4.linear_mma");
    CHECK(f && k && mm, "mxfp4.wgmma or mxfp4.linear_mma is not registered");
    if (!f || !k || !mm) return;
    /* linear_mma's parameters and "work" (the last wave's split: qc_ra_workspace_bytes, the same for every m) */
    CHECK(k->n_params == mm->n_params + 1 && strcmp(k->params[mm->n_params].name, "work") == 0 &&
              k->params[mm->n_params].type == QC_PARAM_PTR && k->reference && k->m_min == 17 &&
              k->arch.min_sm == 90 && k->arch.max_sm == 90 && k->cuda_source && k->launch_dims && k->eligible,
          "mxfp4.wgmma descriptor: %u params, M %lld.., arch %u..%u", k->n_params, (long long)k->m_min,
          k->arch.min_sm, k->arch.max_sm);
    for (uint32_t j = 0; j < k->n_params && j < mm->n_params; j++)
        CHECK(strcmp(k->params[j].name, mm->params[j].name) == 0, "param %u: %s", j, k->params[j].name);
    qc_problem pw1 = prob(90, 17, 4096, 4096), pw2 = prob(90, 8192, 28672, 14336), pw3 = prob(90, 64, 256, 64);
    CHECK(k->workspace_bytes && k->workspace_bytes(&pw1) == 2048 + 132ull * 128 * 256 * 4 &&
              k->workspace_bytes(&pw2) == k->workspace_bytes(&pw1) && k->workspace_bytes(&pw3) == 0,
          "mxfp4.wgmma workspace: %llu bytes", k->workspace_bytes ? (unsigned long long)k->workspace_bytes(&pw1) : 0ull);
    CHECK(k->n_tensor_maps == 1 && strcmp(k->tensor_maps[0].param, "x.bf16") == 0 &&
              k->tensor_maps[0].box_rows == 64 && k->tensor_maps[0].box_cols == 64 &&
              k->tensor_maps[0].swizzle_bytes == 128,
          "mxfp4.wgmma tensor map");
    qc_reason why;
    qc_problem p = prob(90, 2048, 4096, 4096);
    CHECK(qc_select_kernel(k, f, &p, 1, &why) == 1, "refused on sm_90 m=2048: %s", why.text);
    p = prob(89, 2048, 4096, 4096);
    CHECK(qc_select_kernel(k, f, &p, 1, &why) == 0 && strcmp(why.code, "arch") == 0, "sm_89: %s", why.code);
    p = prob(90, 16, 4096, 4096);
    CHECK(qc_select_kernel(k, f, &p, 1, &why) == 0 && strcmp(why.code, "m_range") == 0, "m=16: %s", why.code);
    p = prob(90, 128, 4096, 4128); /* k % 64 == 32: mxfp4.linear_mma takes it */
    CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "align_k") == 0, "k=4128: %s", why.code);
    CHECK(mm->eligible(&p, &why) == 1, "linear_mma refused k=4128: %s", why.text);
    /* the plan: ring bytes 16 x 13 KiB, 10 x 21 KiB, 6 x 37 KiB (+1 KiB to align) plus 16 bytes a split of the last
     * wave past the first, within the 227 KiB opt-in with the 1 KiB of static barriers; grid min(units, 132), 384
     * threads; k = 4096 (64 stages) */
    static const struct {
        int64_t m, n;
        const char *force, *split;
        uint32_t smem, grid;
    } plans[] = {
        {17, 4096, NULL, NULL, 16 * 13312 + 1024 + 48, 128},   /* m <= 64: 64 rows, 32 tiles split 4 ways */
        {100, 4096, NULL, NULL, 10 * 21504 + 1024 + 48, 128},  /* 128 rows: 32 tiles split 4 ways */
        {512, 4096, NULL, NULL, 6 * 37888 + 1024 + 16, 128},   /* 256: 64 tiles split 2 ways (128: 128 whole) */
        {1024, 4096, NULL, NULL, 6 * 37888 + 1024, 128},       /* 256: 128 tiles, one wave, nothing to split */
        {1024, 6144, NULL, NULL, 6 * 37888 + 1024 + 16, 132},  /* 192 tiles: a full wave, 60 split 2 ways */
        {2048, 28672, NULL, NULL, 6 * 37888 + 1024, 132},      /* 1792 tiles: 13 waves, 76 left (2 ways > 132) */
        {2048, 4096, "64", NULL, 16 * 13312 + 1024, 132},      /* QC_MXW_BM forces it */
        {2048, 4096, "512", NULL, 6 * 37888 + 1024, 132},      /* not a height: ignored */
        {1024, 6144, NULL, "1", 6 * 37888 + 1024, 132},        /* QC_RA_SPLIT=1: no split */
        {17, 4096, NULL, "3", 16 * 13312 + 1024 + 32, 96},     /* forced 3 ways */
        {17, 4096, NULL, "8", 16 * 13312 + 1024, 32},          /* 8 x 32 > 132: refused, whole tiles */
        {17, 4096, NULL, "9", 16 * 13312 + 1024 + 48, 128},    /* outside 1..8: ignored, the plan's 4 ways */
    };
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        if (plans[i].force) setenv("QC_MXW_BM", plans[i].force, 1);
        if (plans[i].split) setenv("QC_RA_SPLIT", plans[i].split, 1);
        qc_launch_dims d;
        p = prob(90, plans[i].m, plans[i].n, 4096);
        k->launch_dims(&p, &d);
        unsetenv("QC_MXW_BM");
        unsetenv("QC_RA_SPLIT");
        CHECK(d.shared_bytes == plans[i].smem && d.grid[0] == plans[i].grid && d.grid[1] == 1 && d.block[0] == 384 &&
                  d.shared_bytes + 1024 <= 232448,
              "plan m=%lld n=%lld%s%s%s%s: smem %u grid %u (want %u, %u)", (long long)plans[i].m, (long long)plans[i].n,
              plans[i].force ? " QC_MXW_BM=" : "", plans[i].force ? plans[i].force : "",
              plans[i].split ? " QC_RA_SPLIT=" : "", plans[i].split ? plans[i].split : "", d.shared_bytes, d.grid[0],
              plans[i].smem, plans[i].grid);
    }
}

/* The bf16-x reference equals the f32-x one (mxfp4.linear_ref) on x that is bf16 already, bit for bit. */
static void reference(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "mxfp4");
    const qc_kernel_desc *kb = qc_kernel_find(rt, "mxfp4.gemv"), *kf = qc_kernel_find(rt, "mxfp4.linear_ref");
    CHECK(f && kb && kf, "mxfp4 kernels missing");
    if (!f || !kb || !kf) return;
    int64_t m = 3, n = 16, k = 96;
    uint64_t rng = 7;
    float w[16 * 96], x[3 * 96], yb[3 * 16], yf[3 * 16];
    uint16_t xh[3 * 96];
    for (int i = 0; i < 16 * 96; i++) w[i] = qc_test_normal(&rng);
    for (int i = 0; i < 3 * 96; i++) {
        xh[i] = qc_f32_to_bf16(qc_test_normal(&rng));
        x[i] = qc_bf16_to_f32(xh[i]);
    }
    qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k};
    qc_packed_weight pw;
    memset(&pw, 0, sizeof pw);
    pw.struct_size = sizeof pw;
    qc_reason why;
    CHECK(f->quantize(&req, &pw, &why) == QC_OK, "quantize: %s", why.text);
    void *qw = pw.buffers[0].data, *sc = pw.buffers[1].data, *pxh = xh, *px = x, *pyb = yb, *pyf = yf;
    qc_named_arg args[] = {{"x.bf16", &pxh}, {"x", &px},       {"w.qweight", &qw}, {"w.scales", &sc},
                           {"m", &m},        {"n", &n},        {"k", &k},          {"group_size", &k}};
    void *argv[16];
    char err[256];
    qc_named_arg ab[10], af[10];
    memcpy(ab, args, sizeof args);
    memcpy(af, args, sizeof args);
    ab[8] = (qc_named_arg){"y", &pyb};
    af[8] = (qc_named_arg){"y", &pyf};
    int ok = qc_kernel_bind(kb, ab, 9, argv, 16, err, sizeof err) == QC_OK &&
             qc_kernel_call_reference(kb, argv, err, sizeof err) == QC_OK &&
             qc_kernel_bind(kf, af, 9, argv, 16, err, sizeof err) == QC_OK &&
             qc_kernel_call_reference(kf, argv, err, sizeof err) == QC_OK;
    CHECK(ok, "references: %s", err);
    CHECK(memcmp(yb, yf, sizeof yb) == 0, "bf16-x reference differs from mxfp4.linear_ref");
    /* k off the block: NaN everywhere, as the GPU kernels write */
    int64_t k2 = 48;
    void *argv2[16];
    ab[6] = (qc_named_arg){"k", &k2};
    ok = qc_kernel_bind(kb, ab, 9, argv2, 16, err, sizeof err) == QC_OK &&
         qc_kernel_call_reference(kb, argv2, err, sizeof err) == QC_OK;
    CHECK(ok && isnan(yb[0]) && isnan(yb[m * n - 1]), "k=48: reference should write NaN");
    for (uint32_t i = 0; i < pw.n_buffers; i++) qc_aligned_free(pw.buffers[i].data);
}

/* SASS of the GEMV's inner loops (nvdisasm on the sm_90a cubin, when the tool is there): each
 * backward branch whose range holds HMMAs, no EXIT and no smaller such range is one variant's quad loop;
 * its opcode mix per byte of W streamed (each LDG.E.NA.128 is 16 bytes of codes per lane).  A
 * report for the lead, not a check: only a missing loop fails. */
#define SASS_MAX 40000
typedef struct sass_ins {
    unsigned addr;
    char op[32];
    char target[24]; /* label of a BRA, else "" */
} sass_ins;

static int sass_is(const char *op, const char *prefix) { return strncmp(op, prefix, strlen(prefix)) == 0; }

static void sass_mix(const qc_cubin *c, const char *tmp) {
    const char *tool = access("/usr/local/bin/nvdisasm", X_OK) == 0 ? "/usr/local/bin/nvdisasm" : NULL;
    if (!tool) {
        printf("%s: SASS mix: no /usr/local/bin/nvdisasm here, not reported\n", TEST);
        return;
    }
    char path[1200], cmd[2600];
    const char *keep = getenv("QC_MXFP4_CUBIN"); /* where to leave the cubin for a closer look, if set */
    snprintf(path, sizeof path, "%s", keep && *keep ? keep : "");
    if (!path[0]) snprintf(path, sizeof path, "%s/gemv_sm90a.cubin", tmp);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(c->data, 1, c->size, f) == c->size;
    if (f) ok &= fclose(f) == 0;
    CHECK(ok, "cannot write %s", path);
    if (!ok) return;
    snprintf(cmd, sizeof cmd, "%s -c '%s' 2>&1", tool, path);
    FILE *pp = popen(cmd, "r");
    sass_ins *ins = calloc(SASS_MAX, sizeof *ins);
    char (*lab)[24] = calloc(SASS_MAX, sizeof *lab);
    unsigned *lab_addr = calloc(SASS_MAX, sizeof *lab_addr);
    int n = 0, nl = 0, pending = 0;
    char line[512];
    while (pp && ins && lab && lab_addr && fgets(line, sizeof line, pp)) {
        unsigned a;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, ".L_x_", 5) == 0 && nl < SASS_MAX) {
            size_t len = strcspn(p, ":\n");
            snprintf(lab[nl], sizeof lab[nl], "%.*s", (int)len, p);
            pending++;
            nl++;
            continue;
        }
        if (sscanf(p, "/*%x*/", &a) != 1 || n >= SASS_MAX) continue;
        p = strstr(p, "*/") + 2;
        while (*p == ' ' || *p == '\t') p++;
        sass_ins *I = &ins[n++];
        if (*p == '@') p += strcspn(p, " ") + 1;
        I->addr = a;
        snprintf(I->op, sizeof I->op, "%.*s", (int)strcspn(p, " ;"), p);
        char *t = strstr(p, "`(");
        if (t && sass_is(I->op, "BRA")) snprintf(I->target, sizeof I->target, "%.*s", (int)strcspn(t + 2, ")"), t + 2);
        for (; pending > 0; pending--) lab_addr[nl - pending] = a;
    }
    if (pp) pclose(pp);
    /* loops: [target, branch] of each backward branch; keep those with HMMAs and no smaller one inside */
    int lo[64], hi[64], nloop = 0;
    for (int i = 0; i < n && nloop < 64; i++) {
        if (!ins[i].target[0]) continue;
        unsigned ta = 0;
        int found = 0;
        for (int j = 0; j < nl; j++)
            if (strcmp(lab[j], ins[i].target) == 0) ta = lab_addr[j], found = 1;
        if (!found || ta >= ins[i].addr) continue;
        int s0 = 0, hm = 0, ex = 0;
        while (s0 < n && ins[s0].addr < ta) s0++;
        for (int j = s0; j <= i; j++) hm += sass_is(ins[j].op, "HMMA"), ex += sass_is(ins[j].op, "EXIT");
        if (hm && !ex) lo[nloop] = s0, hi[nloop] = i, nloop++; /* an EXIT inside: a jump back from out-of-line code */
    }
    int shown = 0;
    for (int L = 0; L < nloop; L++) {
        int inner = 1;
        for (int M = 0; M < nloop; M++)
            if (M != L && lo[M] >= lo[L] && hi[M] <= hi[L] && (lo[M] != lo[L] || hi[M] != hi[L])) inner = 0;
        if (!inner) continue;
        int tot = 0, hmma = 0, wld = 0, xld = 0, sld = 0, lds = 0, hmul = 0, imad = 0, lop = 0, prmt = 0, shf = 0,
            other_int = 0, ctl = 0;
        for (int j = lo[L]; j <= hi[L]; j++) {
            const char *o = ins[j].op;
            tot++;
            if (sass_is(o, "HMMA")) hmma++;
            else if (sass_is(o, "LDG.E.NA.128")) wld++;
            else if (sass_is(o, "LDG.E.128")) xld++;
            else if (sass_is(o, "LDG")) sld++;
            else if (sass_is(o, "LDS")) lds++;
            else if (sass_is(o, "HMUL2") || sass_is(o, "HFMA2")) hmul++;
            else if (sass_is(o, "IMAD") || sass_is(o, "LEA")) imad++;
            else if (sass_is(o, "LOP3")) lop++;
            else if (sass_is(o, "PRMT")) prmt++;
            else if (sass_is(o, "SHF")) shf++;
            else if (sass_is(o, "BRA") || sass_is(o, "BSSY") || sass_is(o, "BSYNC") || sass_is(o, "WARPSYNC") ||
                     sass_is(o, "VOTE") || sass_is(o, "NOP"))
                ctl++;
            else other_int++;
        }
        double wb = 16.0 * wld; /* bytes of codes per lane per loop trip */
        printf("%s:   loop %#x..%#x: %d instructions, %d HMMA, W %d x LDG.128.NA (%.0f B/lane), x %d x LDG.128, "
               "scales %d x LDG.U8, %d LDS\n",
               TEST, ins[lo[L]].addr, ins[hi[L]].addr, tot, hmma, wld, wb, xld, sld, lds);
        if (wb > 0)
            printf("%s:     per W byte (2 weights): %.2f instr = LOP3 %.2f + SHF %.2f + PRMT %.2f + other "
                   "ALU %.2f | IMAD/LEA %.2f + HMUL2 %.2f + HMMA %.3f | LDG %.3f + LDS %.3f | control %.2f\n",
                   TEST, tot / wb, lop / wb, shf / wb, prmt / wb, other_int / wb, imad / wb, hmul / wb, hmma / wb,
                   (wld + xld + sld) / wb, lds / wb, ctl / wb);
        shown++;
    }
    CHECK(shown > 0, "no GEMV loop with HMMA found in the SASS (%d instructions)", n);
    free(ins);
    free(lab);
    free(lab_addr);
}

/* The GEMV's common path: each quad is compiled twice (with and without the second multiply for
 * scale bytes above 128, chosen per quad by a warp vote), so the count is made on a build whose
 * vote is replaced by false: the loop then holds only what runs on ordinary weights. */
static void sass_common(qc_nvrtc *nv, const qc_kernel_desc *k, const char *tmp) {
    static const char vote[] = "if (__any_sync(0xffffffffu, b)) mx_quad<MT, T, true>";
    static const char never[] = "if (false) mx_quad<MT, T, true>";
    const char *at = strstr(k->cuda_source, vote);
    CHECK(at != NULL, "mxfp4.gemv source has no per-quad vote '%s' any more: update sass_common", vote);
    if (!at) return;
    size_t len = strlen(k->cuda_source), pre = (size_t)(at - k->cuda_source);
    char *src = malloc(len + 1);
    if (!src) return;
    memcpy(src, k->cuda_source, pre);
    snprintf(src + pre, len + 1 - pre, "%s%s", never, at + strlen(vote));
    qc_cubin c;
    qc_reason why;
    qc_status st = qc_nvrtc_compile(nv, "mxfp4.gemv.common", src, k->cuda_entry, NULL, 90, 1, &c, &why);
    CHECK(st == QC_OK, "mxfp4.gemv common-path build: %s: %s", why.code, why.text);
    if (st == QC_OK) {
        printf("%s: SASS of mxfp4.gemv for sm_90a, common path (the e > 128 quads compiled out):\n", TEST);
        sass_mix(&c, tmp);
        qc_cubin_free(&c);
    }
    free(src);
}

/* Every kernel through NVRTC for its arches (sm_80 and sm_90a for the portable
 * ones, sm_100a for the Blackwell build), with ptxas's resource report. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const char *const opts[] = {"--ptxas-options=-v", NULL};
    static const struct {
        const char *id;
        int sm, specific;
    } builds[] = {{"mxfp4.gemv", 80, 0},        {"mxfp4.gemv", 90, 1},        {"mxfp4.linear_mma", 80, 0},
                  {"mxfp4.linear_mma", 90, 1},  {"mxfp4.gemv_sm100", 100, 1}, {"mxfp4.wgmma", 90, 1}};
    for (size_t i = 0; i < sizeof builds / sizeof builds[0]; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, builds[i].id);
        if (!k) continue;
        if (builds[i].sm >= 100 && !qc_nvrtc_supports(nv, builds[i].sm)) {
            int ma, mi;
            qc_nvrtc_version(nv, &ma, &mi);
            printf("%s: NVRTC %d.%d has no sm_%d: %s not built here\n", TEST, ma, mi, builds[i].sm, k->id);
            continue;
        }
        qc_cubin c;
        qc_reason why;
        double t0 = qc_now_seconds();
        qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, builds[i].sm,
                                        builds[i].specific, &c, &why);
        CHECK(st == QC_OK, "%s for %s: %s: %s", k->id, c.target, why.code, why.text);
        if (st == QC_OK) {
            printf("%s: %s compiled for %s in %.1f s, cubin %zu bytes\n", TEST, k->id, c.target,
                   qc_now_seconds() - t0, c.size);
            char lpath[1200];
            snprintf(lpath, sizeof lpath, "%s/%s.log", tmp, c.key);
            char *log = nv_slurp(lpath, NULL);
            for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n"))
                if (strstr(line, "registers") || strstr(line, "spill") || strstr(line, "stack frame"))
                    printf("%s:   ptxas: %s\n", TEST, line);
            free(log);
            if (strcmp(k->id, "mxfp4.gemv") == 0 && builds[i].sm == 90) sass_common(nv, k, tmp);
        }
        qc_cubin_free(&c);
    }
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
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
        wgmma_desc(rt);
        reference(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
