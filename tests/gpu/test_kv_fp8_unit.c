/* test_kv_fp8_unit.c - the kv_fp8 GPU kernels without a GPU: descriptors, eligibility, geometry, references on known answers, NVRTC builds per arch. */
#define _GNU_SOURCE
#include <math.h>

#include "nvrtc/nv_test.h"
#include "qc_fp8_codec.h"
#include "qc_gpu.h"
#include "qc_kernels_attn.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_kv_fp8_unit"

static const char *const IDS[] = {"kv_fp8.qkv_rope_kv", "kv_fp8.attn_decode", "kv_fp8.attn_decode_reduce",
                                  "kv_fp8.attn_prefill"};
#define N_IDS (sizeof IDS / sizeof IDS[0])

/* the contract of core/include/qcore/plugin.h: ids, the core kernel's params in order, then the scale params */
static void descriptors(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "kv_fp8");
    CHECK(f && f->kind == QC_FORMAT_KV_CACHE && f->bits_per_weight == 8, "kv_fp8 format: 8 bits per element");
    static const char *const core[] = {"core.qkv_rope_kv", "core.attn_decode", "core.attn_decode_reduce",
                                       "core.attn_prefill"};
    for (size_t i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]), *c = qc_kernel_find(rt, core[i]);
        CHECK(k != NULL && c != NULL, "%s / %s not registered", IDS[i], core[i]);
        if (!k || !c) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible, "%s lacks a part",
              k->id);
        CHECK(strcmp(k->format, "kv_fp8") == 0 && k->arch.min_sm == 80, "%s format/arch", k->id);
        int reduce = strstr(k->id, "reduce") != NULL;
        CHECK(k->n_params == c->n_params + (reduce ? 0u : 3u), "%s: %u params, core %u", k->id, k->n_params,
              c->n_params);
        for (uint32_t p = 0; p < c->n_params && p < k->n_params; p++)
            CHECK(strcmp(k->params[p].name, c->params[p].name) == 0 && k->params[p].type == c->params[p].type,
                  "%s param %u: %s, core %s", k->id, p, k->params[p].name, c->params[p].name);
        if (!reduce) {
            uint32_t n = c->n_params;
            CHECK(strcmp(k->params[n].name, QC_KV_PARAM_K_SCALE) == 0 && k->params[n].type == QC_PARAM_PTR &&
                      strcmp(k->params[n + 1].name, QC_KV_PARAM_V_SCALE) == 0 &&
                      strcmp(k->params[n + 2].name, QC_KV_PARAM_VARIANT) == 0 && k->params[n + 2].type == QC_PARAM_U32,
                  "%s: scale params", k->id);
        }
        /* eligibility: the shapes, the arch */
        qc_problem p;
        qc_reason why;
        qc_attn_problem(&p, 16, 32, 8, 128, 64);
        if (strstr(k->id, "qkv")) p.n = 40;
        p.sm = 90;
        CHECK(qc_select_kernel(k, f, &p, 1, &why), "%s refused 32/8 d128 on sm_90: %s", k->id, why.text);
        p.k = 96;
        CHECK(!qc_select_kernel(k, f, &p, 1, &why) && strcmp(why.code, "shape") == 0, "%s took d96", k->id);
        CHECK_CONTAINS(why.text, "head_dim 96");
        p.k = 64;
        p.sm = 75;
        CHECK(!qc_select_kernel(k, f, &p, 1, &why) && strcmp(why.code, "arch") == 0, "%s took sm_75", k->id);
    }
}

/* the v2 decode's dynamic shared memory at d 128 and 64 (4 warps x 5 ring buffers x 32 d bytes, the default 4 stages) */
#define V2_SMEM_128 81920u
#define V2_SMEM_64 40960u

/* the decode never needs more workspace than the core's bound */
static void geometry(qc_runtime *rt) {
    const qc_kernel_desc *d = qc_kernel_find(rt, "kv_fp8.attn_decode"), *pf = qc_kernel_find(rt, "kv_fp8.attn_prefill");
    if (!d || !pf) return;
    static const int seqs[] = {1, 2, 3, 16, 64, 300}, kvs[] = {1, 2, 8, 16}, blocks[] = {1, 7, 8, 64, 256, 2048, 4096};
    int bad = 0;
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 7; c++) {
                qc_problem p;
                qc_attn_problem(&p, seqs[a], 32, kvs[b], 128, blocks[c]);
                qc_launch_dims ld;
                d->launch_dims(&p, &ld);
                int parts = (int)ld.grid[0];
                size_t need = (size_t)seqs[a] * 32 * parts * (128 + 2) * 4;
                size_t have = qc_attn_decode_workspace_bytes(seqs[a], 32, 128, blocks[c] * 16);
                int gq = 32 / kvs[b];
                if (parts < 1 || parts > 64 || need > have || ld.grid[1] != (uint32_t)(kvs[b] * ((gq + 15) / 16)) ||
                    ld.grid[2] != (uint32_t)seqs[a] || ld.block[0] != 128 || ld.shared_bytes != V2_SMEM_128)
                    if (!bad++)
                        CHECK(0, "decode dims B=%d kv=%d blocks=%d: parts %d, workspace %zu > %zu", seqs[a], kvs[b],
                              blocks[c], parts, need, have);
            }
    qc_problem p;
    qc_launch_dims ld;
    qc_attn_problem(&p, 1, 32, 8, 64, 65);
    d->launch_dims(&p, &ld);
    CHECK(ld.shared_bytes == V2_SMEM_64, "decode d 64: %u bytes of shared memory", ld.shared_bytes);
    /* B = 1 x 1024 tokens (65 table columns) and x 32K: 16 partitions (8 kv heads x 16 = 132 SMs' one CTA
     * each, 64 tokens each at 1K); 32 tokens: 1; B = 16 x 32K: 2 (two CTAs per SM by the cost formula) */
    static const struct {
        int seqs, blocks, parts;
    } want[] = {{1, 65, 16}, {1, 2049, 16}, {1, 2, 1}, {16, 2049, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        qc_attn_problem(&p, want[i].seqs, 32, 8, 128, want[i].blocks);
        d->launch_dims(&p, &ld);
        CHECK(ld.grid[0] == (uint32_t)want[i].parts, "decode B=%d x %d blocks: %u partitions, want %d", want[i].seqs,
              want[i].blocks, ld.grid[0], want[i].parts);
    }
    qc_attn_problem(&p, 2048, 32, 8, 128, 1);
    pf->launch_dims(&p, &ld);
    CHECK(ld.grid[0] == 2048 * 4 / 64 + 1 && ld.grid[1] == 8 && ld.shared_bytes == 49152, "prefill dims %u %u %u",
          ld.grid[0], ld.grid[1], ld.shared_bytes);
    printf("%s: geometry: decode partitions within the core's workspace bound; prefill %u B shared\n", TEST,
           ld.shared_bytes);
}

static uint16_t f16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* Known answers: the write's codes; decode over keys that are all equal gives
 * the mean of V; prefill of the last token equals decode; the reduce of one
 * partition set by hand; bad shapes and variants give NaN. */
static void references(qc_runtime *rt) {
    char err[512];
    const qc_kernel_desc *kq = qc_kernel_find(rt, "kv_fp8.qkv_rope_kv"), *kd = qc_kernel_find(rt, "kv_fp8.attn_decode"),
                         *kp = qc_kernel_find(rt, "kv_fp8.attn_prefill");
    if (!kq || !kd || !kp) return;
    /* write: 1 token, 1 q head, 1 kv head, d 4, pos 0 (no rotation), scale 0.5 per tensor */
    {
        float qkv[12] = {1, 2, 3, 4, 0.3f, -1.f, 500.f, 0.001f, 1.f, -2.f, 300.f, 1e-9f}, q[4], ks = 0.5f, vs = 2.f;
        uint8_t kc[16 * 4 * 2], vc[16 * 4 * 2];
        memset(kc, 0xAB, sizeof kc), memset(vc, 0xAB, sizeof vc);
        int32_t slot = 17, pos = 0;
        float inv_freq[2] = {1.f, 0.01f};
        int64_t ld = 12, m = 1;
        int32_t heads = 1, kvh = 1, hd = 4, halves = 1;
        float eps = 1e-6f;
        uint32_t variant = 0;
        void *pq = qkv, *pb = NULL, *po = q, *pk = kc, *pv = vc, *ps = &slot, *pp = &pos, *pf = inv_freq, *pn = NULL,
             *pks = &ks, *pvs = &vs;
        qc_named_arg a[] = {{"qkv", &pq},       {"ld", &ld},          {"bias", &pb},     {"q", &po},
                            {"k_cache", &pk},   {"v_cache", &pv},     {"slots", &ps},    {"pos", &pp},
                            {"inv_freq", &pf},  {"q_norm", &pn},      {"k_norm", &pn},   {"m", &m},
                            {"heads", &heads},  {"kv_heads", &kvh},   {"head_dim", &hd}, {"halves", &halves},
                            {"eps", &eps},      {"k_scale", &pks},    {"v_scale", &pvs}, {"variant", &variant}};
        void *argv[24];
        qc_status st = qc_kernel_bind(kq, a, 20, argv, 24, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kq, argv, err, sizeof err);
        CHECK(st == QC_OK, "qkv reference: %s", err);
        const int base = (16 + 1) * 4; /* slot 17: block 1, offset 1, one head of d 4 */
        for (int i = 0; i < 4; i++) {
            CHECK(kc[base + i] == qc_fp8_e4m3_encode(qkv[4 + i] / 0.5f), "k code %d: %02x", i, kc[base + i]);
            CHECK(vc[base + i] == qc_fp8_e4m3_encode(qkv[8 + i] / 2.f), "v code %d: %02x", i, vc[base + i]);
            CHECK(q[i] == qkv[i], "q %d", i);
        }
        CHECK(kc[base + 2] == QC_FP8_E4M3_MAXCODE && kc[0] == 0xAB && kc[base + 4] == 0xAB, "saturation / untouched");
        variant = 2;
        st = qc_kernel_call_reference(kq, argv, err, sizeof err);
        CHECK(st == QC_OK && vc[base + 2] == qc_fp8_e5m2_encode(300.f) && kc[base + 1] == qc_fp8_e5m2_encode(-1.f),
              "E5M2 codes");
        variant = 7;
        st = qc_kernel_call_reference(kq, argv, err, sizeof err);
        CHECK(st == QC_OK && kc[base] == QC_FP8_NAN_CODE && vc[base + 3] == QC_FP8_NAN_CODE, "bad variant: NaN codes");
    }
    /* decode / prefill: 2 q heads over 1 kv head, d 64, 40 keys with equal K: out = mean of V (times its scale) */
    {
        enum { D = 64, NK = 40, NB = 4 };
        uint8_t kc[NB * 16 * D], vc[NB * 16 * D];
        int32_t bt[3] = {2, 0, 3}, ctx = NK, qs[2] = {0, 1};
        float q[2 * 128], out[2 * 128], out2[2 * 128], scales[2] = {0.25f, 3.f}; /* room for the d 96 case */
        double mean[D] = {0};
        for (int i = 0; i < NB * 16 * D; i++) kc[i] = 0x38, vc[i] = (uint8_t)(i * 37 % 200); /* 0x38 = 1.0 */
        for (int j = 0; j < NK; j++)
            for (int d = 0; d < D; d++)
                mean[d] += qc_fp8_e4m3_decode(vc[((bt[j / 16]) * 16 + j % 16) * D + d]) * 3.0 / NK;
        for (int i = 0; i < 2 * 128; i++) q[i] = (float)sin(i) * 3.f;
        int32_t ns = 1, nh = 2, nkv = 1, hd = D, mb = 3;
        float sc = 0.125f;
        uint32_t variant = 1; /* per head: k 0.25, v 3 (v_scale = scales + 1) */
        void *pq = q, *pk = kc, *pv = vc, *pbt = bt, *pc = &ctx, *po = out, *pw = NULL, *pks = scales,
             *pvs = scales + 1, *pqs = qs;
        qc_named_arg a[] = {{"q", &pq},        {"k_cache", &pk},    {"v_cache", &pv},     {"block_tables", &pbt},
                            {"ctx_lens", &pc}, {"out", &po},        {"work", &pw},        {"n_seqs", &ns},
                            {"n_heads", &nh},  {"n_kv_heads", &nkv}, {"head_dim", &hd},   {"max_blocks", &mb},
                            {"scale", &sc},    {"k_scale", &pks},   {"v_scale", &pvs},    {"variant", &variant},
                            {"q_start", &pqs}};
        void *argv[24];
        qc_status st = qc_kernel_bind(kd, a, 17, argv, 24, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kd, argv, err, sizeof err);
        CHECK(st == QC_OK, "decode reference: %s", err);
        double worst = 0;
        for (int h = 0; h < 2; h++)
            for (int d = 0; d < D; d++) worst = fmax(worst, fabs(out[h * D + d] - mean[d]));
        CHECK(worst < 1e-5, "decode over equal keys: %.3g from the mean of V", worst);
        po = out2;
        st = qc_kernel_bind(kp, a, 17, argv, 24, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kp, argv, err, sizeof err);
        CHECK(st == QC_OK && memcmp(out, out2, 2 * D * sizeof(float)) == 0, "prefill of the last token differs from decode");
        /* q rounds to f16 before the product: a q that is not an f16 gives the f16's scores */
        (void)f16_bits;
        variant = 9;
        po = out;
        st = qc_kernel_bind(kd, a, 17, argv, 24, err, sizeof err);
        if (st == QC_OK) st = qc_kernel_call_reference(kd, argv, err, sizeof err);
        CHECK(st == QC_OK && isnan(out[0]) && isnan(out[2 * D - 1]), "bad variant: NaN outputs");
        variant = 1, hd = 96;
        st = qc_kernel_call_reference(kd, argv, err, sizeof err);
        CHECK(st == QC_OK && isnan(out[0]), "head_dim 96: NaN outputs");
    }
    printf("%s: references: write codes (E4M3 / E5M2 / saturation / bad variant), decode = mean of V over equal "
           "keys, prefill's last token = decode\n", TEST);
}

/* whether two -DNAME=value options define the same NAME */
static int same_macro(const char *a, const char *b) {
    if (!a || !b || strncmp(a, "-D", 2) || strncmp(b, "-D", 2)) return 0;
    size_t n = strcspn(a, "="), m = strcspn(b, "=");
    return n == m && strncmp(a, b, n) == 0;
}

/* Every kernel (and the decode's other builds) through NVRTC for sm_80 (software E4M3), sm_89 and sm_90a, with ptxas's resource report. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    static const int sms[] = {80, 89, 90};
    /* the decode's other builds (decode.cu's QC_DEC_*; test_gpu_kv_fp8 times them beside the default),
     * the ring depths on sm_90 only; later options override the registered ones */
    static const struct {
        const char *a, *b;
        int all_archs;
    } dec_variants[] = {{NULL, NULL, 1},
                        {"-DQC_DEC_V2=0", NULL, 1},
                        {"-DQC_DEC_V2=0", "-DQC_DEC_PIPE=1", 0},
                        {"-DQC_DEC_FUSE=0", NULL, 0},
                        {"-DQC_DEC_STAGES=1", NULL, 0},
                        {"-DQC_DEC_STAGES=2", NULL, 0},
                        {"-DQC_DEC_STAGES=3", NULL, 0},
                        {"-DQC_DEC_SWZ=0", NULL, 1},
                        {"-DQC_DEC_PROBE=1", NULL, 0},
                        {"-DQC_DEC_PROBE=2", NULL, 0},
                        {"-DQC_DEC_PROBE=3", NULL, 0},
                        {"-DQC_DEC_PROBE=4", NULL, 0},
                        {"-DQC_DEC_PROBE=5", NULL, 0}};
    for (size_t i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        if (!k) continue;
        size_t nvar = strcmp(k->id, "kv_fp8.attn_decode") == 0 ? sizeof dec_variants / sizeof dec_variants[0] : 1;
        for (size_t a = 0; a < 3 * nvar; a++) {
            int sm = sms[a % 3];
            if (!dec_variants[a / 3].all_archs && sm != 90) continue;
            const char *opts[10], *var = dec_variants[a / 3].a, *var2 = dec_variants[a / 3].b;
            char vname[64];
            snprintf(vname, sizeof vname, "%s%s%s", var ? var : "", var2 ? " " : "", var2 ? var2 : "");
            size_t no = 0;
            for (size_t r = 0; k->nvrtc_options && k->nvrtc_options[r] && no < 5; r++)
                if (!same_macro(k->nvrtc_options[r], var) && !same_macro(k->nvrtc_options[r], var2))
                    opts[no++] = k->nvrtc_options[r];
            if (var) opts[no++] = var;
            if (var2) opts[no++] = var2;
            opts[no++] = "--ptxas-options=-v";
            opts[no] = NULL;
            qc_cubin c;
            qc_reason why;
            double t0 = qc_now_seconds();
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry, opts, sm, sm >= 90, &c, &why);
            CHECK(st == QC_OK, "%s %s for sm_%d: %s: %s", k->id, vname, sm, why.code, why.text);
            if (st != QC_OK) continue;
            int regs, spill;
            char *log = nv_ptxas_report(tmp, &c, NULL, NULL, &regs, &spill);
            printf("%s: %-26s %-32s %-7s %5.1f s, cubin %7zu B, %d registers, %d B spilled\n", TEST, k->id,
                   vname, c.target, qc_now_seconds() - t0, c.size, regs, spill);
            CHECK(regs > 0 && spill == 0, "%s %s for %s: %d registers, %d bytes spilled", k->id, vname, c.target,
                  regs, spill);
            free(log);
            qc_cubin_free(&c);
        }
    }
    qc_nvrtc_destroy(nv);
    if (qc_test_failed)
        printf("%s: NVRTC logs kept in %s\n", TEST, tmp);
    else
        nv_rm_rf(tmp);
}

/* QC_KV_DEC_VARIANT / QC_KV_DEC_STAGES: old registers the first kernel (its -D, no dynamic shared memory,
 * partitions for 396 CTA slots), a value the plugin does not know refuses the load naming it; then the
 * defaults again (the choice is process-wide) */
static void env_choice(void) {
    char err[512];
    struct {
        const char *var, *stages, *want; /* want: NULL = loads */
    } cases[] = {{"bogus", NULL, "QC_KV_DEC_VARIANT='bogus'"},
                 {NULL, "9", "QC_KV_DEC_STAGES='9'"},
                 {"new", "2x", "QC_KV_DEC_STAGES='2x'"},
                 {"old", NULL, NULL},
                 {"new", "2", NULL},
                 {NULL, NULL, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].var) setenv("QC_KV_DEC_VARIANT", cases[i].var, 1);
        else unsetenv("QC_KV_DEC_VARIANT");
        if (cases[i].stages) setenv("QC_KV_DEC_STAGES", cases[i].stages, 1);
        else unsetenv("QC_KV_DEC_STAGES");
        qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
        qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
        CHECK(rt != NULL, "%s", err);
        if (!rt) continue;
        err[0] = 0;
        qc_status st = qc_runtime_load_plugin(rt, QC_TEST_PLUGIN_DIR "/kv_fp8.so", err, sizeof err);
        if (cases[i].want) {
            CHECK(st != QC_OK && strstr(err, cases[i].want), "env case %zu: loaded, or the error '%s' lacks %s", i, err,
                  cases[i].want);
            printf("%s: refused: %s\n", TEST, err);
        } else {
            CHECK(st == QC_OK, "env case %zu: %s", i, err);
            const qc_kernel_desc *d = qc_kernel_find(rt, "kv_fp8.attn_decode");
            const qc_kernel_desc *r = qc_kernel_find(rt, "kv_fp8.attn_decode_reduce");
            if (d && r) {
                qc_problem p;
                qc_launch_dims ld;
                qc_attn_problem(&p, 16, 32, 8, 128, 2049);
                d->launch_dims(&p, &ld);
                int old = cases[i].var && strcmp(cases[i].var, "old") == 0;
                uint32_t smem = old ? 0 : cases[i].stages ? 4u * 3u * 32u * 128u : V2_SMEM_128;
                CHECK(ld.shared_bytes == smem && ld.grid[0] == (old ? 3u : 2u), "env case %zu: %u bytes, %u parts",
                      i, ld.shared_bytes, ld.grid[0]);
                const char *want = old ? "-DQC_DEC_V2=0" : "-DQC_DEC_V2=1";
                CHECK(d->nvrtc_options && r->nvrtc_options == d->nvrtc_options &&
                          strcmp(d->nvrtc_options[0], want) == 0,
                      "env case %zu: decode options", i);
                if (!old && cases[i].stages)
                    CHECK(d->nvrtc_options[1] && strcmp(d->nvrtc_options[1], "-DQC_DEC_STAGES=2") == 0,
                          "env case %zu: ring depth option", i);
            }
        }
        qc_runtime_close(rt);
    }
    printf("%s: QC_KV_DEC_VARIANT / QC_KV_DEC_STAGES: old, new:2 and the defaults register their builds; bad "
           "values are refused by name\n", TEST);
}

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        CHECK(qc_format_find(rt, "kv_fp8") != NULL, "the kv_fp8 plugin did not load from %s", QC_TEST_PLUGIN_DIR);
        descriptors(rt);
        geometry(rt);
        references(rt);
        compiles(rt);
        qc_runtime_close(rt);
        env_choice();
    }
    return qc_test_finish(TEST);
}
