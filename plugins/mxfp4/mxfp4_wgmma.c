/* mxfp4_wgmma.c - the Hopper (sm_90a) mxfp4 prefill GEMM: TMA x tiles, E2M1 codes and E8M0 scales decoded into wgmma A registers. */
#include <string.h>

#include "../common/qc_ra_gemm_src.h"
#include "../common/qc_tma_pipe_src.h"
#include "../common/qc_wgmma_ra_src.h"
#include "mxfp4_cuda.h"

/*
 * y[m,n] = x[m,k] . dec(W)[n,k]^T, x bf16 ("x.bf16"), W in the format's own
 * packing (qweight u8 [n, k/2], element 2i in the low nibble of byte i;
 * scales E8M0 u8 [n, k/32]), f32 out: the same parameters as mxfp4.gemv and
 * mxfp4.linear_mma.  Computed transposed, y^T = W x^T, so that the weight is
 * wgmma's A operand, which may come from registers (as in w4a16.wgmma_*,
 * whose pipeline this follows): x^T is the B operand, K-major in shared
 * memory as TMA's 128-byte swizzle puts x's rows.  No decoded weight is ever
 * stored, not even to shared memory.
 *
 * Exactness.  An E2M1 value times its block's 2^(e-127) is a bf16 number
 * (subnormals included) unless it overflows, and then it is inf as in the
 * C reference; e = 0xFF gives NaN.  So A holds the weights exactly, the
 * products are exact in f32, and wgmma accumulates all of K in f32 with no
 * promotion step (unlike w4a16, whose scales are not powers of two): only
 * the summation order differs from the reference.
 *
 * Decoding one A register.  A thread's A registers are mma.sync's A layout:
 * rows g and g + 8 of its warp's 16, k pairs (2t, 2t + 1) and (2t + 8,
 * 2t + 9) of each k16 step, i.e. byte t of each packed 32-bit word (8
 * elements) of those rows: low nibble = element 2t, high = 2t + 1.  With
 * y = word >> 8t, lo = y & 0xF, hi = y & 0xF0,
 *     (lo * 4160 + hi * 0x01040000) & 0x81C081C0
 * writes lo at bits 6..9 and 12..15 and hi at 22..25 and 28..31 (no carries:
 * the four copies do not overlap), and the mask keeps each magnitude's three
 * bits at 6..8 / 22..24 and its sign at 15 / 31: the bf16x2 bits of the two
 * E2M1 values times 2^-126 (codes 0.5 are bf16 subnormals, which
 * fma.rn.bf16x2 keeps).  One bf16x2 multiply by 2^(e-1) (mxfp4.gemv's mx_s1
 * factor) makes them value * 2^(e-127).  For e > 128, 2^(e-1) is no bf16:
 * the factor is 2^126 and a second multiply by 2^(e-127) follows; a warp
 * vote per stage takes that path only when a lane of the warp has such a
 * block (real weights have e < 128: |w| < 2).
 *
 * The pipeline (TMA x boxes, cp.async code rows and scale words into a ring
 * of stages, a producer warpgroup and two consumers, 64 / 128 / 256 x rows a
 * tile picked by the host) is plugins/common/qc_ra_gemm_src.h's, shared
 * with w4a16.wgmma_bf16_*; this file supplies the metadata copy (the aligned
 * word holding a row's two scale bytes of a stage) and the decode (MxDec).
 *
 * Takes k a multiple of 64 ("align_k" otherwise: mxfp4.linear_mma takes any
 * multiple of 32), n and m below 2^31 (TMA coordinates).
 */

static const char MXW_SRC[] =
    "/* qcore mxfp4 Hopper GEMM: y[m,n] = x[m,k] . dec(W)[n,k]^T; TMA + wgmma, A decoded in registers */\n"
    "typedef unsigned int u32;\n"
    "typedef unsigned char u8;\n"
    "typedef long long ll;\n"
    "typedef unsigned long long u64;\n"
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"
    QC_TMA_PIPE_SRC QC_WGMMA_RA_SRC QC_RA_GEMM_SRC
    "/* the first bf16x2 factor of a scale byte: 2^(e-1); 2^126 for e > 128 (a second multiply follows); NaN for 255 */\n"
    "__device__ __forceinline__ u32 mxw_f1(u32 e) {\n"
    "    return e <= 128u ? ((e + 126u) << 7) * 0x10001u : e < 255u ? 0x7e807e80u : 0x7fc07fc0u;\n"
    "}\n"
    "/* the second factor for e in 129..254: 2^(e-127); 1 otherwise */\n"
    "__device__ __forceinline__ u32 mxw_f2(u32 e) { return e > 128u && e < 255u ? (e << 7) * 0x10001u : 0x3f803f80u; }\n"
    "__device__ __forceinline__ u32 mxw_mul(u32 a, u32 b) { /* exact here; the -0 addend keeps a zero's sign */\n"
    "    u32 d;\n"
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(0x80008000u));\n"
    "    return d;\n"
    "}\n"
    "/* byte t of w (sh = 8 t: elements 2t, 2t + 1 of the word) -> bf16x2 of their E2M1 values times 2^-126 */\n"
    "__device__ __forceinline__ u32 mxw_pair(u32 w, u32 sh) {\n"
    "    const u32 y = w >> sh;\n"
    "    return ((y & 0xFu) * 4160u + (y & 0xF0u) * 0x01040000u) & 0x81C081C0u;\n"
    "}\n"
    "/* the format for qc_ra_gemm: one word a row a stage, the aligned word holding the stage's two scale bytes\n"
    "   (k % 64 == 0: the pair never straddles a word) */\n"
    "struct MxDec {\n"
    "    struct Args { const u8 *q, *sc; };\n"
    "    __device__ static __forceinline__ void meta(const Args &fa, u32 dst, ll r, int kt, ll k) {\n"
    "        qcp_cp4(dst, fa.sc + ((r * (k / 32) + 2 * kt) & ~3ll));\n"
    "    }\n"
    "    __device__ static __forceinline__ void build(const Args &fa, const QcRaStage &c, u32 (*a)[4]) {\n"
    "        (void)fa;\n"
    "        const ll nb = c.k / 32;\n"
    "        const u32 sh = 8u * c.t;\n"
    "        const u32 wa = *(const u32 *)(c.ms + c.rl * 4), wb = *(const u32 *)(c.ms + (c.rl + 8) * 4);\n"
    "        const u32 s0 = 8u * (u32)((c.rc0 * nb + 2 * c.kt) & 3), s1 = 8u * (u32)((c.rc1 * nb + 2 * c.kt) & 3);\n"
    "        const u32 e00 = (wa >> s0) & 255u, e01 = (wa >> (s0 + 8)) & 255u; /* row rl, blocks 0 and 1 */\n"
    "        const u32 e10 = (wb >> s1) & 255u, e11 = (wb >> (s1 + 8)) & 255u; /* row rl + 8 */\n"
    "        const bool big = __any_sync(0xffffffffu, (e00 > 128u && e00 < 255u) || (e01 > 128u && e01 < 255u) ||\n"
    "                                                  (e10 > 128u && e10 < 255u) || (e11 > 128u && e11 < 255u));\n"
    "#pragma unroll\n"
    "        for (int b = 0; b < 2; b++) { /* 32-element block b: k16 steps 2b, 2b + 1 */\n"
    "            const uint4 r0 = *(const uint4 *)(c.ws + c.rl * 32 + 16 * (b ^ c.swz));\n"
    "            const uint4 r1 = *(const uint4 *)(c.ws + (c.rl + 8) * 32 + 16 * (b ^ c.swz));\n"
    "            const u32 f0 = mxw_f1(b ? e01 : e00), f1 = mxw_f1(b ? e11 : e10);\n"
    "            a[2 * b][0] = mxw_mul(mxw_pair(r0.x, sh), f0);\n"
    "            a[2 * b][1] = mxw_mul(mxw_pair(r1.x, sh), f1);\n"
    "            a[2 * b][2] = mxw_mul(mxw_pair(r0.y, sh), f0);\n"
    "            a[2 * b][3] = mxw_mul(mxw_pair(r1.y, sh), f1);\n"
    "            a[2 * b + 1][0] = mxw_mul(mxw_pair(r0.z, sh), f0);\n"
    "            a[2 * b + 1][1] = mxw_mul(mxw_pair(r1.z, sh), f1);\n"
    "            a[2 * b + 1][2] = mxw_mul(mxw_pair(r0.w, sh), f0);\n"
    "            a[2 * b + 1][3] = mxw_mul(mxw_pair(r1.w, sh), f1);\n"
    "            if (big) { /* scale bytes above 128: the second factor */\n"
    "                const u32 g0 = mxw_f2(b ? e01 : e00), g1 = mxw_f2(b ? e11 : e10);\n"
    "#pragma unroll\n"
    "                for (int j = 2 * b; j < 2 * b + 2; j++) {\n"
    "                    a[j][0] = mxw_mul(a[j][0], g0);\n"
    "                    a[j][1] = mxw_mul(a[j][1], g1);\n"
    "                    a[j][2] = mxw_mul(a[j][2], g0);\n"
    "                    a[j][3] = mxw_mul(a[j][3], g1);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "};\n"
    "/* x is read only through its tensor map (built by the host from the same pointer) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_mxfp4_wgmma(const unsigned short *x, const u8 *q,\n"
    "        const u8 *sc, float *y, ll m, ll n, ll k, float *work, const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    const MxDec::Args fa = {q, sc};\n"
    "    qc_ra_go<MxDec>(&tmx, fa, y, m, n, k, work);\n"
    "}\n";

/* the launch (plugins/common/qc_ra_gemm_src.h); QC_MXW_BM=64|128|256 forces the tile height */
static void mxw_dims(const qc_problem *p, qc_launch_dims *d) { qc_ra_gemm_dims(p, "QC_MXW_BM", d); }

static int mxw_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % 64) {
        mxfp4_why(why, "align_k",
                  "mxfp4.wgmma: k = %lld is not a positive multiple of 64 (two scale blocks a stage; "
                  "mxfp4.linear_mma takes any multiple of 32)",
                  (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || p->n > (1ll << 31) - 128 || p->k > (1ll << 31) - 64) {
        mxfp4_why(why, "shape", "mxfp4.wgmma: n = %lld, k = %lld: the row clamps and TMA coordinates are 32-bit",
                  (long long)p->n, (long long)p->k);
        return 0;
    }
    if (p->m < 1 || p->m > (1ll << 31) - 128) {
        mxfp4_why(why, "m_range", "mxfp4.wgmma takes 1 <= m < 2^31 - 128 (32-bit TMA row coordinates), m = %lld",
                  (long long)p->m);
        return 0;
    }
    return 1;
}

/* x in boxes of 64 rows x 64 k (128 bytes: the 128-byte swizzle span); a 128-row tile takes two */
static const qc_tensor_map_spec mxw_maps[] = {
    {"x.bf16", QC_DT_BF16, "m", "k", 64, 64, 128},
};

/* the kernel's parameters: the bf16-x GEMMs' and the split's workspace */
static const qc_kernel_param mxw_params[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},         {"k", QC_PARAM_I64},        {"work", QC_PARAM_PTR},
};
/* its reference: the bf16-x one (set once at registration, before any call); "work" is the kernel's alone */
static mxfp4_bx_ref_fn mxw_bx;
static void mxw_ref(const uint16_t *x, const uint8_t *qw, const uint8_t *sc, float *y, int64_t m, int64_t n, int64_t k,
                    void *work) {
    (void)work;
    mxw_bx(x, qw, sc, y, m, n, k);
}

qc_status mxfp4_wgmma_register(const qc_host_api *api, qc_host *host, mxfp4_bx_ref_fn bx_ref) {
    mxw_bx = bx_ref;
    qc_kernel_desc d = {
        .struct_size = sizeof d,
        .id = "mxfp4.wgmma",
        .format = "mxfp4",
        .phases = QC_PHASE_ANY,
        .m_min = 17, /* the GEMVs take m <= 16 */
        .m_max = (1ll << 31) - 128,
        .arch = {90, 90}, /* sm_90a only: wgmma and setmaxnreg */
        .n_params = sizeof mxw_params / sizeof mxw_params[0],
        .params = mxw_params,
        .reference = (void (*)(void))mxw_ref,
        .cuda_source = MXW_SRC,
        .cuda_entry = "qc_mxfp4_wgmma",
        .launch_dims = mxw_dims,
        .eligible = mxw_eligible,
        .n_tensor_maps = sizeof mxw_maps / sizeof mxw_maps[0],
        .tensor_maps = mxw_maps,
        .workspace_bytes = qc_ra_workspace_bytes,
    };
    return api->register_kernel(host, &d);
}
