/* test_gpu_attn_unit.c - paged attention without a GPU: descriptors, geometry, references on known answers, NVRTC builds. */
#define _GNU_SOURCE
#include <math.h>

#include "../../plugins/common/qc_bf16.h"
#include "gpu_test.h"
#include "nvrtc/nv_test.h"
#include "qc_kernels_attn.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_attn_unit"

static const char *const IDS[] = {"core.kv_write", "core.attn_decode", "core.attn_decode_reduce",
                                  "core.attn_prefill"};
#define N_IDS (sizeof IDS / sizeof IDS[0])

static void descriptors(qc_runtime *rt) {
    for (size_t i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        CHECK(k != NULL, "%s is not registered", IDS[i]);
        if (!k) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible, "%s lacks a part",
              k->id);
        CHECK(strcmp(k->format, "bf16") == 0 && k->arch.min_sm == 80, "%s format/arch", k->id);
        qc_reason why;
        memset(&why, 0, sizeof why);
        qc_problem p;
        qc_attn_problem(&p, 4096, 32, 8, 128, 64);
        p.sm = 90;
        CHECK(k->eligible(&p, &why) == 0 && strcmp(why.code, "missing") == 0, "%s must refuse selection: %s", k->id,
              why.code);
    }
    /* format selection for a linear layer never lands on them */
    const qc_format_desc *f = qc_format_find(rt, "bf16");
    const qc_kernel_desc *k = NULL;
    qc_reason why;
    qc_problem p = {.struct_size = sizeof p, .sm = 90, .m = 1, .n = 4096, .k = 4096, .phase = QC_PHASE_DECODE};
    CHECK(qc_select_format(rt, f, &p, 1, &k, &why) && k && strncmp(k->id, "core.", 5) != 0, "selection chose %s",
          k ? k->id : "-");

    CHECK(qc_attn_shape_supported(32, 8, 128, &why), "32/8 d128 refused: %s", why.text);
    CHECK(qc_attn_shape_supported(14, 2, 64, &why), "14/2 d64 refused: %s", why.text);
    CHECK(!qc_attn_shape_supported(32, 8, 96, &why) && strcmp(why.code, "shape") == 0, "d96 accepted");
    CHECK_CONTAINS(why.text, "head_dim 96");
    CHECK(!qc_attn_shape_supported(30, 8, 128, &why) && strcmp(why.code, "shape") == 0, "30/8 accepted");
    CHECK(!qc_attn_shape_supported(8, 0, 128, &why), "0 kv heads accepted");
}

/* partitions, workspace bound and launch geometry */
static void geometry(void) {
    static const int seqs[] = {1, 2, 3, 16, 64, 300}, kvs[] = {1, 2, 8, 16}, blocks[] = {1, 7, 8, 64, 256, 2048, 4096};
    int bad = 0;
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 7; c++) {
                int parts = qc_attn_decode_parts(seqs[a], kvs[b], blocks[c]);
                size_t need = (size_t)seqs[a] * 32 * parts * (128 + 2) * 4;
                size_t have = qc_attn_decode_workspace_bytes(seqs[a], 32, 128, blocks[c] * 16);
                if (parts < 1 || parts > 64 || need > have || (int64_t)parts * 64 > (int64_t)blocks[c] * 16 + 63) {
                    if (!bad++)
                        CHECK(0, "parts %d for %d seqs, %d kv heads, %d blocks: workspace %zu < %zu", parts, seqs[a],
                              kvs[b], blocks[c], have, need);
                }
            }
    CHECK(bad == 0, "%d geometry combinations wrong", bad);
    /* one wave of 396 CTAs where it fits: 8 x 49, 128 x 3; 512 pairs: 4 waves of 176 tokens */
    CHECK(qc_attn_decode_parts(1, 8, 2048) == 49, "B=1 32K: %d parts", qc_attn_decode_parts(1, 8, 2048));
    CHECK(qc_attn_decode_parts(16, 8, 2048) == 3, "B=16 32K: %d parts", qc_attn_decode_parts(16, 8, 2048));
    CHECK(qc_attn_decode_parts(64, 8, 32) == 3, "B=64 512: %d parts", qc_attn_decode_parts(64, 8, 32));
    CHECK(qc_attn_decode_parts(1, 1, 1) == 1, "one block: %d parts", qc_attn_decode_parts(1, 1, 1));
    qc_launch_dims d, r;
    qc_attn_decode_dims(16, 32, 8, 128, 2048, &d, &r);
    CHECK(d.grid[0] == 3 && d.grid[1] == 8 && d.grid[2] == 16 && d.block[0] == 128, "decode grid %ux%ux%u",
          d.grid[0], d.grid[1], d.grid[2]);
    CHECK(r.grid[0] == 32 && r.grid[1] == 16 && r.grid[2] == 1 && r.block[0] == 128, "reduce grid %ux%u", r.grid[0],
          r.grid[1]);
    qc_attn_decode_dims(2, 40, 2, 128, 8, &d, NULL); /* 20 q heads per kv head: two CTAs of heads */
    CHECK(d.grid[1] == 4, "decode grid.y %u for 40/2", d.grid[1]);
    qc_problem p;
    qc_attn_problem(&p, 2048 + 300, 32, 8, 128, 2);
    qc_attn_prefill_dims(p.m, (int)p.scheme, (int)p.n, (int)p.group_size, (int)p.k, &d);
    /* 2 stages of K and V tiles (64 tokens of 128 bf16) and 1 KiB to align them for the sm_90a swizzle */
    CHECK(d.grid[0] == (2348 * 4 + 63) / 64 + 2 && d.grid[1] == 8 && d.shared_bytes == 65536 + 1024,
          "prefill grid %u/%u smem %u", d.grid[0], d.grid[1], d.shared_bytes);
    qc_attn_prefill_dims(0, 1, 32, 8, 128, &d);
    CHECK(d.grid[0] == 0, "empty prefill grid");
    qc_attn_kv_write_dims(10, 8, 128, &d);
    CHECK(d.grid[0] == 5 && d.block[0] == 256, "kv_write grid %u", d.grid[0]);
}

static void call_ref(qc_runtime *rt, const char *id, qc_named_arg *args, size_t n) {
    char err[256];
    void *argv[16];
    const qc_kernel_desc *k = qc_kernel_find(rt, id);
    qc_status st = k ? qc_kernel_bind(k, args, n, argv, 16, err, sizeof err) : QC_ERR_INVALID;
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", id, k ? err : "not registered");
}

/* The references on inputs whose answers are known.  Cache: 3 blocks of 2
 * kv heads, head_dim 64. */
#define HD 64
#define NKV 2
#define NB 3
static uint16_t kc[NB * NKV * 16 * HD], vc[NB * NKV * 16 * HD];

static void references(qc_runtime *rt) {
    /* kv_write: 20 tokens to slots of blocks 2 then 0 (two skipped) */
    int64_t t = 20;
    int32_t nkv = NKV, hd = HD, slots[20];
    static float k[20 * NKV * HD], v[20 * NKV * HD];
    for (int i = 0; i < 20; i++) slots[i] = i < 16 ? 2 * 16 + i : i == 17 || i == 19 ? -1 : (i - 16);
    for (int i = 0; i < 20 * NKV * HD; i++) {
        k[i] = (float)((i * 37) % 101 - 50) / 40.f;
        v[i] = (float)((i * 53) % 97 - 48) / 30.f;
    }
    k[0] = 1.00390625f;  /* halfway between bf16 1 and 1.0078125: even -> 1 */
    k[1] = 1.01171875f;  /* halfway, odd below: up to 1.015625 */
    v[0] = NAN;
    for (size_t i = 0; i < sizeof kc / 2; i++) kc[i] = vc[i] = 0x7fc1;
    void *pk = k, *pv = v, *pkc = kc, *pvc = vc, *ps = slots;
    qc_named_arg a[] = {{"k", &pk}, {"v", &pv}, {"k_cache", &pkc}, {"v_cache", &pvc}, {"slots", &ps}, {"t", &t},
                        {"n_kv_heads", &nkv}, {"head_dim", &hd}};
    call_ref(rt, "core.kv_write", a, 8);
    /* token i of head h sits at ((block * NKV + h) * 16 + off) * HD */
    CHECK(kc[(2 * NKV * 16) * HD] == 0x3f80 && kc[(2 * NKV * 16) * HD + 1] == 0x3f82, "rounding %04x %04x",
          kc[(2 * NKV * 16) * HD], kc[(2 * NKV * 16) * HD + 1]);
    CHECK((vc[(2 * NKV * 16) * HD] & 0x7fc0) == 0x7fc0, "NaN kept: %04x", vc[(2 * NKV * 16) * HD]);
    CHECK(kc[((2 * NKV + 1) * 16 + 3) * HD + 5] == qc_f32_to_bf16(k[(3 * NKV + 1) * HD + 5]), "token 3, head 1");
    CHECK(kc[(0 * 16 + 2) * HD] == qc_f32_to_bf16(k[(18 * NKV) * HD]), "token 18 -> slot 2");
    CHECK(kc[(0 * 16 + 1) * HD] == 0x7fc1 && kc[(0 * 16 + 3) * HD] == 0x7fc1, "skipped tokens were written");
    CHECK(kc[(1 * NKV * 16) * HD] == 0x7fc1, "block 1 was written");

    /* decode: sequence 0 = 1 key (slot 32) -> out = v of that key; sequence 1
       = 16 keys of block 2 with q = 0 -> the mean of their v; sequence 2 = no key */
    float q[3 * 4 * HD], out[3 * 4 * 128]; /* room for the head_dim 96 call */
    for (int i = 0; i < 3 * 4 * HD; i++) q[i] = (float)((i * 29) % 31 - 15) / 8.f;
    for (int i = 4 * HD; i < 8 * HD; i++) q[i] = 0.f;
    int32_t bt[3 * 2] = {2, 0, 2, 0, 1, 1}, ctx[3] = {1, 16, 0};
    int32_t ns = 3, nh = 4, mb = 2;
    float scale = 0.125f;
    void *pq = q, *pbt = bt, *pctx = ctx, *po = out, *pw = NULL;
    qc_named_arg d[] = {{"q", &pq},        {"k_cache", &pkc}, {"v_cache", &pvc},   {"block_tables", &pbt},
                        {"ctx_lens", &pctx}, {"out", &po},    {"work", &pw},       {"n_seqs", &ns},
                        {"n_heads", &nh},  {"n_kv_heads", &nkv}, {"head_dim", &hd}, {"max_blocks", &mb},
                        {"scale", &scale}};
    call_ref(rt, "core.attn_decode", d, 13);
    int ok1 = 1, ok2 = 1, ok3 = 1;
    for (int h = 0; h < 4; h++)
        for (int e = 1; e < HD; e++) { /* head h reads kv head h / 2; dim 0 of head 0 is NaN */
            float want = qc_bf16_to_f32(vc[((2 * NKV + h / 2) * 16) * HD + e]);
            if (out[h * HD + e] != want) ok1 = 0;
            double mean = 0;
            for (int j = 0; j < 16; j++) mean += qc_bf16_to_f32(vc[((2 * NKV + h / 2) * 16 + j) * HD + e]);
            if (fabs(out[(4 + h) * HD + e] - mean / 16) > 1e-6) ok2 = 0;
            if (out[(8 + h) * HD + e] != 0.f) ok3 = 0;
        }
    CHECK(ok1 && isnan(out[0]), "decode, one key");
    CHECK(ok2, "decode, q = 0: the mean of v");
    CHECK(ok3, "decode, no key: zeros");
    hd = 96;
    call_ref(rt, "core.attn_decode", d, 13);
    CHECK(isnan(out[0]) && isnan(out[3 * 4 * 96 - 1]), "decode, head_dim 96: NaN");
    hd = HD;

    /* prefill: sequence 0 has 2 new tokens after 14 cached (positions 14, 15);
       sequence 1: 1 new token at position 0 -> its own v */
    int32_t bt2[2 * 2] = {2, 0, 0, 1}, ctx2[2] = {16, 1}, qs[3] = {0, 2, 3};
    int32_t ns2 = 2;
    float pout[3 * 4 * HD];
    void *pbt2 = bt2, *pctx2 = ctx2, *pqs = qs, *ppo = pout;
    qc_named_arg pf[] = {{"q", &pq},        {"k_cache", &pkc}, {"v_cache", &pvc},   {"block_tables", &pbt2},
                         {"ctx_lens", &pctx2}, {"q_start", &pqs}, {"out", &ppo},    {"n_seqs", &ns2},
                         {"n_heads", &nh},  {"n_kv_heads", &nkv}, {"head_dim", &hd}, {"max_blocks", &mb},
                         {"scale", &scale}};
    call_ref(rt, "core.attn_prefill", pf, 13);
    /* token 1 of sequence 0 (position 15) sees the same 16 keys as decode would */
    int32_t bt3[2] = {2, 0}, ctx3[1] = {16}, one = 1;
    float dout[4 * HD];
    void *pq3 = q + 4 * HD, *pbt3 = bt3, *pctx3 = ctx3, *pdo = dout;
    qc_named_arg d3[] = {{"q", &pq3},        {"k_cache", &pkc}, {"v_cache", &pvc},   {"block_tables", &pbt3},
                         {"ctx_lens", &pctx3}, {"out", &pdo},    {"work", &pw},       {"n_seqs", &one},
                         {"n_heads", &nh},   {"n_kv_heads", &nkv}, {"head_dim", &hd}, {"max_blocks", &mb},
                         {"scale", &scale}};
    call_ref(rt, "core.attn_decode", d3, 13);
    CHECK(memcmp(dout + 1, pout + 4 * HD + 1, (4 * HD - 1) * 4) == 0, "prefill's last row = decode");
    int ok4 = 1;
    for (int h = 0; h < 4; h++)
        for (int e = 0; e < HD; e++)
            if (pout[(8 + h) * HD + e] != qc_bf16_to_f32(vc[((0 * NKV + h / 2) * 16) * HD + e])) ok4 = 0;
    CHECK(ok4, "prefill at position 0: its own v");

    /* reduce: known partials (1 seq, 1 kv head, 64 blocks: 16 partitions of 64 tokens, all used) */
    int32_t rctx[1] = {1000}, rn = 1, rh = 1, rkv = 1, rmb = 64;
    int parts = qc_attn_decode_parts(1, 1, 64);
    size_t wn = qc_attn_decode_workspace_bytes(1, 1, HD, 64 * 16) / 4;
    float *work = calloc(wn, 4), rout[HD];
    if (work) {
        float *ml = work + (size_t)parts * HD;
        for (int p = 0; p < parts; p++) {
            ml[2 * p] = (float)p;     /* log2-domain maxima */
            ml[2 * p + 1] = 1.f;
            for (int e = 0; e < HD; e++) work[p * HD + e] = (float)(p + e);
        }
        void *prc = rctx, *pro = rout, *pwk = work;
        qc_named_arg r[] = {{"ctx_lens", &prc}, {"out", &pro}, {"work", &pwk}, {"n_seqs", &rn}, {"n_heads", &rh},
                            {"n_kv_heads", &rkv}, {"head_dim", &hd}, {"max_blocks", &rmb}};
        call_ref(rt, "core.attn_decode_reduce", r, 8);
        int used = (1000 + 63) / 64;
        double num = 0, den = 0;
        for (int p = 0; p < used; p++) num += exp2(p) * p, den += exp2(p);
        CHECK(parts == 16 && fabs(rout[3] - (num / den + 3)) < 1e-5, "reduce: %g, want %g (%d parts)", rout[3],
              num / den + 3, parts);
        free(work);
    }
}

/* All four entries through NVRTC for sm_80 and sm_90a, into a fresh cache. */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    size_t built = 0;
    for (size_t i = 0; i < N_IDS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, IDS[i]);
        if (!k) continue;
        /* the decode also in its old warp-combine layout (QC_ATTN_DEC_SWZ=0 selects it at run time) */
        static const char *const noswz[] = {"-DQC_ATTN_SWZ=0", NULL};
        int builds = strcmp(k->id, "core.attn_decode") == 0 ? 4 : 2;
        for (int a = 0; a < builds; a++) {
            qc_cubin c;
            qc_reason why;
            qc_status st = qc_nvrtc_compile(nv, k->id, k->cuda_source, k->cuda_entry,
                                            a < 2 ? k->nvrtc_options : noswz, a % 2 ? 90 : 80, a % 2, &c, &why);
            CHECK(st == QC_OK, "%s%s for %s: %s: %s", k->id, a < 2 ? "" : " (QC_ATTN_SWZ=0)", c.target, why.code,
                  why.text);
            if (st == QC_OK) built++;
            qc_cubin_free(&c);
        }
    }
    printf("%s: compiled %zu attention kernel builds (sm_80, sm_90a)\n", TEST, built);
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
        descriptors(rt);
        geometry();
        references(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
