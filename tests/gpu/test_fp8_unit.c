/* test_fp8_unit.c - the fp8 GPU kernels without a GPU: descriptors, selection and refusals, references composed, NVRTC builds per arch. */
#define _GNU_SOURCE
#include <math.h>

#include "nvrtc/nv_test.h"
#include "qc_fp8_codec.h"
#include "qc_gpu.h"
#include "qc_test.h"
#include "qc_util.h"
#include "qcore/qcore.h"

#define TEST "test_fp8_unit"
#define SMEM_OPTIN_H200 232448u

/* every GPU kernel of the plugin, the arches it is built for here, and whether it must not spill */
static const struct {
    const char *id;
    int sms[3]; /* 0-terminated; 90 = sm_90a */
} KERNELS[] = {
    {"fp8.quant_act_token", {89, 90, 0}},   {"fp8.quant_act_static", {89, 90, 0}},
    {"fp8.quant_act_group", {89, 90, 0}},   {"fp8.gemm_channel_wgmma", {90, 0, 0}},
    {"fp8.gemm_tensor_wgmma", {90, 0, 0}},  {"fp8.gemm_block_wgmma", {90, 0, 0}},
    {"fp8.gemv_channel", {89, 90, 0}},      {"fp8.gemv_tensor", {89, 90, 0}},
    {"fp8.gemv_block", {89, 90, 0}},        {"fp8.gemm_channel_mma", {89, 90, 0}},
    {"fp8.gemm_tensor_mma", {89, 90, 0}},   {"fp8.gemm_block_mma", {89, 90, 0}},
    {"fp8.w8a16_channel", {80, 86, 90}},    {"fp8.w8a16_tensor", {80, 0, 0}},
    {"fp8.w8a16_block", {80, 0, 0}},        {"fp8.gemm_channel_wgmma_pair", {90, 0, 0}},
    {"fp8.gemm_tensor_wgmma_pair", {90, 0, 0}}, {"fp8.gemm_block_wgmma_pair", {90, 0, 0}},
};
#define N_KERNELS (sizeof KERNELS / sizeof KERNELS[0])

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf16_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int bits_eq(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static qc_problem prob(uint32_t sm, int64_t m, int64_t n, int64_t k, uint32_t scheme) {
    qc_problem p = {.struct_size = sizeof p, .sm = sm, .m = m, .n = n, .k = k, .scheme = scheme,
                    .group_size = scheme == 3 ? 128 : 0};
    return p;
}

/* The shared memory the fp8 wgmma plan sizes for BN-column tiles: 128 x 256 in 4 stages and 128 x 128 in 6, without
 * staging; 128 x 192 and 128 x 160 in 4, each then 128 staged bf16 rows of BN * 2 + 16 bytes; 1024 for alignment. */
static uint32_t wg_smem(int bn) {
    switch (bn) {
    case 256: return 4u * (16384u + 32768u) + 1024u;
    case 192: return 4u * (16384u + 24576u) + 128u * 400u + 1024u;
    case 160: return 4u * (16384u + 20480u) + 128u * 336u + 1024u;
    default: return 6u * 32768u + 1024u; /* 6 stages, bf16 rows from the registers (session 22; 5 + staging before) */
    }
}

static void descriptors(qc_runtime *rt) {
    for (size_t i = 0; i < N_KERNELS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        CHECK(k != NULL, "%s is not registered", KERNELS[i].id);
        if (!k) continue;
        CHECK(k->reference && k->cuda_source && k->cuda_entry && k->launch_dims && k->eligible && k->nvrtc_options,
              "%s: a part is missing", k->id);
        CHECK(strcmp(k->format, "fp8") == 0, "%s: format %s", k->id, k->format);
        int wg = strstr(k->id, "wgmma") != NULL;
        CHECK(wg ? k->n_tensor_maps == 2 && strcmp(k->tensor_maps[0].param, "xq") == 0 &&
                       strcmp(k->tensor_maps[1].param, "w.qweight") == 0 && k->arch.min_sm == 90 &&
                       k->arch.max_sm == 90
                 : k->n_tensor_maps == 0,
              "%s: tensor maps / arch", k->id);
        /* W in boxes of 128 rows by 128 K (choose_wbox with the default width 128), x in 128 x 128 */
        if (wg && k->n_tensor_maps == 2)
            CHECK(k->tensor_maps[1].box_rows == 128 && k->tensor_maps[1].box_cols == 128 &&
                      k->tensor_maps[0].box_rows == 128 && k->tensor_maps[1].swizzle_bytes == 128,
                  "%s: W box %u x %u, x box rows %u", k->id, k->tensor_maps[1].box_rows, k->tensor_maps[1].box_cols,
                  k->tensor_maps[0].box_rows);
        if (strstr(k->id, "quant_act")) {
            qc_reason why;
            /* never a linear: "role" for the schemes it serves, "scheme" for the others */
            int serves_any = 0;
            for (uint32_t sc = 0; sc < 6; sc++) {
                qc_problem p = prob(90, 16, 4096, 4096, sc);
                int ok = k->eligible(&p, &why);
                CHECK(!ok && (strcmp(why.code, "role") == 0 || strcmp(why.code, "scheme") == 0),
                      "%s eligible as a linear (scheme %u: %s)", k->id, sc, why.code);
                serves_any |= strcmp(why.code, "role") == 0;
            }
            CHECK(serves_any, "%s serves no scheme", k->id);
        }
    }
    /* launch geometry */
    const qc_kernel_desc *k = qc_kernel_find(rt, "fp8.gemm_channel_wgmma");
    const qc_kernel_desc *kb = qc_kernel_find(rt, "fp8.gemm_block_wgmma");
    static const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    static const int64_t ms[] = {1, 17, 200, 1024, 4096, 8192};
    for (size_t s = 0; k && kb && s < 4; s++)
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            qc_problem p = prob(90, ms[i], shapes[s][0], shapes[s][1], 2);
            qc_launch_dims d, db;
            k->launch_dims(&p, &d);
            kb->launch_dims(&p, &db);
            CHECK(d.grid[0] >= 1 && d.grid[0] <= 132 && d.block[0] == 384 && d.shared_bytes <= SMEM_OPTIN_H200 - 256,
                  "channel dims m=%lld n=%lld: grid %u smem %u", (long long)ms[i], (long long)shapes[s][0], d.grid[0],
                  d.shared_bytes);
            /* every mode plans 128 columns (g_fp8_eff, session 22), the block mode as the channel one */
            CHECK(d.shared_bytes == wg_smem(128), "channel dims m=%lld: smem %u", (long long)ms[i], d.shared_bytes);
            CHECK(db.grid[0] >= 1 && db.grid[0] <= 132 && db.block[0] == 384 && db.grid[1] >= 1 && db.grid[1] <= 4 &&
                      db.shared_bytes == wg_smem(128),
                  "block dims m=%lld: grid %u x %u smem %u", (long long)ms[i], db.grid[0], db.grid[1], db.shared_bytes);
            CHECK(db.grid[0] == d.grid[0] && db.grid[1] == d.grid[1] && db.shared_bytes == d.shared_bytes,
                  "block dims m=%lld: grid %u x %u smem %u, channel's %u x %u smem %u", (long long)ms[i], db.grid[0],
                  db.grid[1], db.shared_bytes, d.grid[0], d.grid[1], d.shared_bytes);
            /* split-K (grid.y): only while the tiles leave SMs idle, within one pass of 132 blocks, at most 4
               ways, each split at least 4 stages of 128 K; the workspace holds a slot per block and warpgroup */
            uint64_t tiles = d.grid[0];
            CHECK(d.grid[1] >= 1 && d.grid[1] <= 4 && d.grid[2] == 1 &&
                      (d.grid[1] == 1 || (tiles * d.grid[1] <= 132 && shapes[s][1] / 128 / d.grid[1] >= 4)),
                  "split m=%lld n=%lld k=%lld: grid %u x %u", (long long)ms[i], (long long)shapes[s][0],
                  (long long)shapes[s][1], d.grid[0], d.grid[1]);
            CHECK(k->workspace_bytes && k->workspace_bytes(&p) >= 2048 + (uint64_t)d.grid[0] * d.grid[1] * 2 * 128 * 128 * 4,
                  "workspace m=%lld: %llu bytes", (long long)ms[i],
                  k->workspace_bytes ? (unsigned long long)k->workspace_bytes(&p) : 0ull);
            if (ms[i] == 17) { /* Llama-3-8B at 17 rows: qkv 48 tiles -> 2 ways, o and down 32 -> 4, gate_up 224 -> 1 */
                static const unsigned want[4] = {2, 4, 1, 4};
                CHECK(d.grid[1] == want[s], "m=17 n=%lld k=%lld: %u splits, planned %u", (long long)shapes[s][0],
                      (long long)shapes[s][1], d.grid[1], want[s]);
            }
        }
    if (k) { /* o at 1024 rows: 8 x 32 tiles of 128 x 128, two waves of 132 blocks (256 columns, the plan's pick
                until session 22, is weighted 0 now) */
        qc_problem p = prob(90, 1024, 4096, 4096, 2);
        qc_launch_dims d;
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 132 && d.grid[1] == 1 && d.shared_bytes == wg_smem(128),
              "o m=1024: grid %u x %u smem %u, want 132 x 1, %u", d.grid[0], d.grid[1], d.shared_bytes, wg_smem(128));
        p = prob(90, 2048, 6144, 4096, 2);
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 132 && d.shared_bytes == wg_smem(128), "qkv m=2048: grid %u smem %u, want 132, %u",
              d.grid[0], d.shared_bytes, wg_smem(128));
        /* o at 64 rows: 32 tiles of 128 x 128 leave SMs idle, so K is split 4 ways (32 stages, 8 a split) */
        p = prob(90, 64, 4096, 4096, 2);
        k->launch_dims(&p, &d);
        CHECK(d.grid[0] == 32 && d.grid[1] == 4, "o m=64: grid %u x %u, want 32 x 4", d.grid[0], d.grid[1]);
    }
    /* the pair builds: m > 128 only; whole clusters (an even grid), row tiles counted in pairs (an odd count gets an
       empty partner), otherwise the plan of the unpaired GEMM */
    const qc_kernel_desc *kp = qc_kernel_find(rt, "fp8.gemm_channel_wgmma_pair");
    CHECK(kp && kp->m_min == 129, "fp8.gemm_channel_wgmma_pair: m_min %lld", kp ? (long long)kp->m_min : -1ll);
    for (size_t s = 0; kp && s < 4; s++)
        for (size_t i = 1; i < sizeof ms / sizeof ms[0]; i++) {
            qc_problem p = prob(90, ms[i], shapes[s][0], shapes[s][1], 2);
            qc_launch_dims d;
            kp->launch_dims(&p, &d);
            const int64_t tm = (ms[i] + 127) / 128, pairs = (tm + 1) / 2;
            CHECK(d.grid[0] % 2 == 0 && d.grid[0] <= 132 && d.block[0] == 384, "pair dims m=%lld n=%lld: grid %u",
                  (long long)ms[i], (long long)shapes[s][0], d.grid[0]);
            CHECK(d.grid[1] == 1 || (uint64_t)2 * pairs * 2 <= 132 || d.grid[0] * d.grid[1] <= 132,
                  "pair split m=%lld: grid %u x %u", (long long)ms[i], d.grid[0], d.grid[1]);
        }
    if (kp) { /* m = 200: 2 row tiles, qkv: 48 column tiles of 128 -> 96 tiles in one wave, unsplit */
        qc_problem p = prob(90, 200, 6144, 4096, 2);
        qc_launch_dims d;
        kp->launch_dims(&p, &d);
        CHECK(d.grid[0] == 96 && d.grid[1] == 1, "pair m=200 qkv: grid %u x %u, want 96 x 1", d.grid[0], d.grid[1]);
        p = prob(90, 1000, 4096, 4096, 2); /* 8 row tiles */
        kp->launch_dims(&p, &d);
        CHECK(d.grid[0] == 132 && d.grid[1] == 1, "pair m=1000 o: grid %u x %u", d.grid[0], d.grid[1]);
        p = prob(90, 300, 4096, 4096, 2); /* 3 row tiles -> 2 pairs x 32 column tiles of 128: 128 tiles */
        kp->launch_dims(&p, &d);
        CHECK(d.grid[0] == 128 && d.grid[1] == 1, "pair m=300 o: grid %u x %u, want 128 x 1", d.grid[0], d.grid[1]);
        qc_reason why; /* off unless switched on (slower on the H200, session 17) */
        CHECK(!kp->eligible(&p, &why) && strcmp(why.code, "off") == 0, "QC_FP8_PAIR unset: %s", why.code);
        setenv("QC_FP8_PAIR", "on", 1);
        CHECK(kp->eligible(&p, &why), "QC_FP8_PAIR=on: pair not eligible: %s", why.text);
        /* switched on, the engine's rule (the higher m_min) picks it above 128 rows and the unpaired GEMM below */
        const qc_format_desc *f = qc_format_find(rt, "fp8");
        const qc_kernel_desc *sel = NULL;
        qc_problem q = prob(90, 129, 4096, 4096, 2);
        CHECK(f && qc_select_format(rt, f, &q, 1, &sel, &why) && sel && strcmp(sel->id, kp->id) == 0,
              "QC_FP8_PAIR=on m=129: got %s", sel ? sel->id : "none");
        q = prob(90, 128, 4096, 4096, 2);
        sel = NULL;
        CHECK(f && qc_select_format(rt, f, &q, 1, &sel, &why) && sel && strcmp(sel->id, "fp8.gemm_channel_wgmma") == 0,
              "QC_FP8_PAIR=on m=128: got %s", sel ? sel->id : "none");
        unsetenv("QC_FP8_PAIR");
    }
    const qc_kernel_desc *gv = qc_kernel_find(rt, "fp8.gemv_channel");
    if (gv) {
        CHECK(gv->m_max == 16, "gemv m_max %lld", (long long)gv->m_max);
        qc_problem p = prob(90, 1, 4096, 4096, 2);
        qc_launch_dims d;
        gv->launch_dims(&p, &d);
        CHECK(d.grid[0] == 256 && d.block[0] == 256, "gemv grid %u block %u", d.grid[0], d.block[0]);
    }
}

/* The kernel the GPU selection takes, and the refusals on the way. */
static void selection(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "fp8");
    CHECK(f != NULL, "no fp8 format");
    if (!f) return;
    static const struct {
        uint32_t sm;
        int64_t m;
        uint32_t scheme;
        const char *want; /* NULL: refused with `code` */
        const char *code;
    } cases[] = {
        {90, 1, 2, "fp8.gemv1_tma_channel", NULL},    {90, 16, 0, "fp8.gemv_channel", NULL},
        {90, 17, 2, "fp8.gemm_channel_wgmma", NULL},  {90, 4096, 5, "fp8.gemm_channel_wgmma", NULL},
        {90, 4096, 4, "fp8.gemm_tensor_wgmma", NULL}, {90, 8, 4, "fp8.gemv_tensor", NULL},
        {90, 4096, 3, "fp8.gemm_block_wgmma", NULL},  {90, 3, 3, "fp8.gemv_block", NULL},
        {89, 1024, 2, "fp8.gemm_channel_mma", NULL},  {89, 1024, 3, "fp8.gemm_block_mma", NULL},
        {89, 4, 2, "fp8.gemv_channel", NULL},         {100, 1024, 2, "fp8.gemm_channel_mma", NULL},
        {80, 1024, 2, "fp8.w8a16_channel", NULL},     {80, 1, 3, "fp8.w8a16_block", NULL},
        {86, 64, 1, "fp8.w8a16_tensor", NULL},        {88, 64, 4, "fp8.w8a16_tensor", NULL},
        {75, 64, 2, NULL, "arch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qc_problem p = prob(cases[i].sm, cases[i].m, 4096, 4096, cases[i].scheme);
        const qc_kernel_desc *sel = NULL;
        qc_reason why;
        int ok = qc_select_format(rt, f, &p, 1, &sel, &why);
        if (cases[i].want)
            CHECK(ok && sel && strcmp(sel->id, cases[i].want) == 0, "sm_%u m=%lld scheme %u: want %s, got %s (%s: %s)",
                  cases[i].sm, (long long)cases[i].m, cases[i].scheme, cases[i].want, sel ? sel->id : "none", why.code,
                  why.text);
        else
            CHECK(!ok && strcmp(why.code, cases[i].code) == 0, "sm_%u m=%lld scheme %u: want refusal %s, got %s (%s)",
                  cases[i].sm, (long long)cases[i].m, cases[i].scheme, cases[i].code, sel ? sel->id : "none", why.code);
        printf("%s: select sm_%u m=%-5lld scheme %u -> %s%s%s\n", TEST, cases[i].sm, (long long)cases[i].m,
               cases[i].scheme, sel ? sel->id : "refused: ", sel ? "" : why.code, sel ? "" : "");
    }
    /* below sm_89 the W8A8 kernels say arch (the W8A16 path is what runs there) */
    static const char *const w8a8[] = {"fp8.gemm_channel_wgmma", "fp8.gemm_channel_mma", "fp8.gemv_channel",
                                       "fp8.quant_act_token"};
    for (size_t i = 0; i < 4; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, w8a8[i]);
        if (!k) continue;
        qc_problem p = prob(80, 8, 4096, 4096, 2);
        qc_reason why = {{0}, {0}};
        CHECK(!qc_select_kernel(k, f, &p, 1, &why) && strcmp(why.code, "arch") == 0, "%s on sm_80: %s", w8a8[i],
              why.code);
        if (i == 0) printf("%s: sm_80: %s: %s\n", TEST, why.code, why.text);
    }
    /* alignment refusals */
    const qc_kernel_desc *k = qc_kernel_find(rt, "fp8.gemm_channel_wgmma");
    if (k) {
        qc_reason why;
        qc_problem p = prob(90, 128, 4104, 4096, 2);
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "align_n") == 0, "n=4104: %s", why.code);
        p = prob(90, 128, 4096, 4104, 2);
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "align_k") == 0, "k=4104: %s", why.code);
        p = prob(90, 128, 4096, 4096, 3);
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "scheme") == 0, "block weight: %s", why.code);
    }
    /* scheme tensor (dynamic per-tensor activations): no GPU act quantization yet, said as such */
    k = qc_kernel_find(rt, "fp8.gemm_tensor_wgmma");
    if (k) {
        qc_reason why;
        qc_problem p = prob(90, 1024, 4096, 4096, 1);
        CHECK(!k->eligible(&p, &why) && strcmp(why.code, "scheme") == 0 && strstr(why.text, "grid-wide amax"),
              "scheme tensor: %s %s", why.code, why.text);
        const qc_kernel_desc *sel = NULL;
        CHECK(!qc_select_format(rt, f, &p, 1, &sel, &why), "scheme tensor on sm_90 selected %s", sel ? sel->id : "?");
    }
}

static qc_status call(const qc_kernel_desc *k, qc_named_arg *a, size_t na) {
    void *argv[16];
    char err[256];
    qc_status st = qc_kernel_bind(k, a, na, argv, 16, err, sizeof err);
    if (st == QC_OK) st = qc_kernel_call_reference(k, argv, err, sizeof err);
    CHECK(st == QC_OK, "%s: %s", k->id, err);
    return st;
}

/* quant_act_* then gemm_*: the same bits as the format's reference linear (fp8.linear_*_ref) on the
 * same (bf16-representable) x; the W8A16 references against a double sum of the same products. */
static void references(qc_runtime *rt) {
    const qc_format_desc *f = qc_format_find(rt, "fp8");
    if (!f) return;
    static const struct {
        const char *scheme, *linear, *quant, *gemm, *w16;
        int s;
    } S[] = {
        {"channel", "fp8.linear_channel_ref", "fp8.quant_act_token", "fp8.gemm_channel_wgmma", "fp8.w8a16_channel", 2},
        {"block", "fp8.linear_block_ref", "fp8.quant_act_group", "fp8.gemm_block_wgmma", "fp8.w8a16_block", 3},
        {"channel_static", "fp8.linear_channel_static_ref", "fp8.quant_act_static", "fp8.gemm_channel_mma",
         "fp8.w8a16_channel", 5},
        {"tensor_static", "fp8.linear_tensor_static_ref", "fp8.quant_act_static", "fp8.gemv_tensor",
         "fp8.w8a16_tensor", 4},
    };
    static const int64_t shapes[][3] = {{3, 48, 400}, {5, 272, 272}, {1, 16, 16}};
    uint64_t rng = 12345;
    for (size_t si = 0; si < 4; si++)
        for (size_t sh = 0; sh < 3; sh++) {
            int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], ng = (k + 127) / 128;
            float *w = malloc((size_t)(n * k) * 4), *x = malloc((size_t)(m * k) * 4);
            uint16_t *xb = malloc((size_t)(m * k) * 2);
            uint8_t *xq = malloc((size_t)(m * k));
            float *xs = malloc((size_t)(m * ng) * 4), *y0 = malloc((size_t)(m * n) * 4), *y1 = malloc((size_t)(m * n) * 4);
            for (int64_t i = 0; i < n * k; i++) w[i] = qc_test_normal(&rng) * 0.05f;
            for (int64_t i = 0; i < m * k; i++) {
                xb[i] = to_bf16(qc_test_normal(&rng) * (i % 97 == 0 ? 40.f : 1.f));
                x[i] = bf16_f(xb[i]);
            }
            float act = 0.f;
            if (S[si].s >= 4) { /* half the dynamic scale: the top saturates */
                for (int64_t i = 0; i < m * k; i++) act = fmaxf(act, fabsf(x[i]));
                act = act / 448.f * 0.5f;
            }
            qc_quant_request req = {.struct_size = sizeof req, .w = w, .n = n, .k = k, .scheme = S[si].scheme,
                                    .act_scale = act};
            qc_packed_weight pw;
            qc_reason why;
            memset(&pw, 0, sizeof pw);
            pw.struct_size = sizeof pw;
            qc_status st = f->quantize(&req, &pw, &why);
            CHECK(st == QC_OK && (int)pw.scheme == S[si].s, "%s quantize: %s", S[si].scheme, why.text);
            if (st != QC_OK) goto next;
            void *pq = pw.buffers[0].data, *ps = pw.buffers[1].data, *pa = pw.n_buffers > 2 ? pw.buffers[2].data : NULL;
            void *px = x, *pxb = xb, *pxq = xq, *pxs = xs, *py0 = y0, *py1 = y1;
            const qc_kernel_desc *kl = qc_kernel_find(rt, S[si].linear), *kq = qc_kernel_find(rt, S[si].quant),
                                 *kg = qc_kernel_find(rt, S[si].gemm), *kw = qc_kernel_find(rt, S[si].w16);
            if (!kl || !kq || !kg || !kw) goto next;
            qc_named_arg a[] = {{"x", &px},       {"x.bf16", &pxb},    {"xq", &pxq},     {"xs", &pxs},
                                {"w.qweight", &pq}, {"w.scales", &ps}, {"w.act_scale", &pa}, {"y", &py0},
                                {"m", &m},        {"n", &n},           {"k", &k}};
            call(kl, a, 11);
            call(kq, a, 11);
            a[7].value = &py1;
            call(kg, a, 11);
            size_t diff = 0;
            for (int64_t i = 0; i < m * n; i++) diff += bits_eq(y0[i], y1[i]) ? 0 : 1;
            CHECK(diff == 0, "%s m=%lld n=%lld k=%lld: %s + %s differs from %s at %zu outputs", S[si].scheme,
                  (long long)m, (long long)n, (long long)k, S[si].quant, S[si].gemm, S[si].linear, diff);
            /* W8A16: bf16 x times decoded weights, scaled as the scheme says, against double */
            call(kw, a, 11);
            float lut[256];
            qc_fp8_e4m3_table(lut);
            double worst = 0;
            const float *sc = ps;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double acc = 0, mag = 0;
                    for (int64_t t = 0; t < k; t++) {
                        double ws = S[si].s == 3 ? sc[(j / 128) * ng + t / 128] : S[si].s == 4 ? sc[0] : sc[j];
                        double pr = (double)x[i * k + t] * lut[((uint8_t *)pq)[j * k + t]] * ws;
                        acc += pr;
                        mag += fabs(pr);
                    }
                    /* f32 rounding of k sums and the scaling: a bound, not an estimate */
                    double q = fabs(y1[i * n + j] - acc) / (2.0 * (double)(k + 3) * 0x1p-24 * mag + 1e-30);
                    if (q > worst) worst = q;
                }
            CHECK(worst <= 1, "%s W8A16 reference off by %.3g x tolerance", S[si].w16, worst);
        next:
            if (st == QC_OK)
                for (uint32_t b = 0; b < pw.n_buffers; b++) qc_aligned_free(pw.buffers[b].data);
            free(w), free(x), free(xb), free(xq), free(xs), free(y0), free(y1);
        }
}

/* Every kernel through NVRTC for each arch it runs on, with ptxas's resource report (no spills). */
static void compiles(qc_runtime *rt) {
    char *tmp = nv_tmpdir();
    int skip = 0;
    qc_nvrtc *nv = tmp ? nv_open_or_skip(TEST, tmp, &skip) : NULL;
    if (!nv) {
        CHECK(skip, "NVRTC is required here");
        if (tmp) nv_rm_rf(tmp);
        return;
    }
    for (size_t i = 0; i < N_KERNELS; i++) {
        const qc_kernel_desc *k = qc_kernel_find(rt, KERNELS[i].id);
        if (!k) continue;
        for (int a = 0; a < 3 && KERNELS[i].sms[a]; a++) {
            int sm = KERNELS[i].sms[a];
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
            const char *diag = nv_wgmma_diag(log); /* setmaxnreg ignored, wgmma serialized or a wait injected */
            CHECK(!diag, "%s for %s: ptxas %.*s", k->id, c.target, diag ? (int)strcspn(diag, "\n") : 0,
                  diag ? diag : "");
            printf("%s: %-24s %-7s %5.1f s, cubin %7zu B, %d registers, %d B spilled\n", TEST, k->id, c.target,
                   qc_now_seconds() - t0, c.size, regs, spill);
            CHECK(regs > 0 && spill == 0, "%s for %s: %d registers, %d bytes spilled", k->id, c.target, regs, spill);
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

int main(void) {
    qc_set_log_level(QC_LOG_ERROR);
    char err[512];
    qc_runtime_options o = {.struct_size = sizeof o, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_default_dirs = 1,
                            .skip_env = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    if (rt) {
        CHECK(qc_format_find(rt, "fp8") != NULL, "the fp8 plugin did not load from %s", QC_TEST_PLUGIN_DIR);
        descriptors(rt);
        selection(rt);
        references(rt);
        compiles(rt);
        qc_runtime_close(rt);
    }
    return qc_test_finish(TEST);
}
