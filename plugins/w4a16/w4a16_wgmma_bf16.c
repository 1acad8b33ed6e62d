/* w4a16_wgmma_bf16.c - the Hopper (sm_90a) w4a16 prefill GEMM (sym, asym, fmin) on bf16-rounded weights: int4 codes scaled into wgmma A registers, 256-row x tiles, no promotion step. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/qc_ra_gemm_src.h"
#include "../common/qc_tma_pipe_src.h"
#include "../common/qc_wgmma_ra_src.h"
#include "w4a16_impl.h"

qc_status w4_register_wgmma_bf16_kernels(const qc_host_api *api, qc_host *host);

/*
 * y[m,n] = x[m,k] . Wb[n,k]^T with x bf16 ("x.bf16"), W in pack_version 2
 * (as w4a16.wgmma_sym / _asym), f32 out, where Wb is each weight rounded to
 * bf16 the way the kernel forms it:
 *     Wb = bf16_rn(bf16_rn(s) * (q - z))      (z = 8 for sym)
 * (bf16(s) * (q - z) is exact in f32; one rounding to bf16 follows).  This
 * is what a GEMM on weights dequantized to bf16 computes (vLLM's Marlin for
 * bf16 models does the same): the relative change of a weight is at most
 * 2^-8, against the 4-bit code's own step of 1/15 of the group's range.  The
 * C reference (w4bw_ref_*) rounds exactly so; only the f32 summation order
 * differs.  w4a16.wgmma_sym / _asym keep the format's exact products (q - z
 * in A, the scale applied to f32 partial sums once per group), at the price
 * of a promotion step and of 128-row x tiles (acc + part fill the
 * registers); this kernel runs the shared register-A skeleton
 * (plugins/common/qc_ra_gemm_src.h) with 64 / 128 / 256 x rows a tile.
 * QC_W4_BF16=off refuses it ("disabled"), so that the engine takes the exact
 * kernels.
 *
 * Decoding one A register (lane t, a packed word w of row r): nibbles t and
 * t + 4 are codes 2t, 2t + 1 (pack_version 2); one lop3 puts them under
 * 0x4300 (bf16 128 + q), one bf16x2 fma subtracts 128 + z (exact: q - z),
 * one bf16x2 multiply by bf16(s) (a fma with -0, which keeps a zero's sign)
 * rounds the product once: shift, lop3, two HFMA2 a register.
 *
 * Metadata a row a stage (64 k): the aligned word holding its scale(s) of the
 * stage's group(s) and the aligned word holding its zero(s) (asym) or min(s) (fmin).  Groups
 * of 32 give a stage two groups, the first at an even index (k % 64 == 0),
 * so both halves share the words; groups of 64 and 128 give it one.
 *
 * fmin (w = d q + m, GGUF Q4_1: w4a16.wgmma_bf16_fmin): Wb = bf16_rn(bf16(d)
 * (q - 8) + bf16(m + 8 d)), one rounding (q - 8 exact from the lop3 value,
 * then one bf16x2 fma; m + 8 d in f32, as the exact GPU kernels form it).
 * Not bf16(d) q + bf16(m): m is about -8 d, and its rounding would move a
 * whole group's weights by up to d / 64 in one direction, while the centre
 * m + 8 d is small.  The exact kernels have no Hopper fmin GEMM
 * (w4a16.mma_fmin, mma.sync, runs where this one refuses).
 *
 * Takes sym, asym and fmin, groups 32, 64, 128, k a multiple of 64
 * ("align_k": w4a16.wgmma_* takes k % 32), n a multiple of 8, any m from
 * 17 (the GEMVs take m <= 16); act-order weights are refused ("perm").
 * Since the skeleton splits its last wave over K it is the faster of the two
 * families at every m measured (64 to 4096, the four Llama-3-8B shapes,
 * session 14) but gate_up at m = 64 and 128 (4% and 2% slower), so the
 * earlier "tiles" refusal (m <= 64 or under 96 tiles) is gone.
 */

#define W4BW_SRC_HEAD                                                                                               \
    "typedef unsigned int u32;\n"                                                                                   \
    "typedef unsigned short u16;\n"                                                                                 \
    "typedef unsigned char u8;\n"                                                                                   \
    "typedef long long ll;\n"                                                                                       \
    "typedef unsigned long long u64;\n"                                                                             \
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"                                                            \
    QC_TMA_PIPE_SRC QC_WGMMA_RA_SRC QC_RA_GEMM_SRC                                                                  \
    "/* bf16x2 of an f16 scale, rounded to nearest */\n"                                                           \
    "__device__ __forceinline__ u32 w4bw_s2(u32 h) {\n"                                                             \
    "    float f;\n"                                                                                                \
    "    u32 d;\n"                                                                                                  \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"((u16)h));\n"                                               \
    "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %1;\" : \"=r\"(d) : \"f\"(f));\n"                                          \
    "    return d;\n"                                                                                               \
    "}\n"                                                                                                           \
    "/* nibbles t and t + 4 of w (sh = 4t) -> bf16x2 of bf16(s) (q - z): negz is -(128 + z), s2 the scale */\n"    \
    "__device__ __forceinline__ u32 w4bw_deq(u32 w, u32 sh, u32 negz, u32 s2) {\n"                                 \
    "    u32 v, d, r;\n"                                                                                            \
    "    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(v) : \"r\"(w >> sh), \"r\"(0x000F000Fu), \"r\"(0x43004300u));\n" \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(v), \"r\"(0x3F803F80u), \"r\"(negz));\n"         \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(d), \"r\"(s2), \"r\"(0x80008000u));\n"           \
    "    return r;\n"                                                                                               \
    "}\n"                                                                                                           \
    "/* bf16x2 of the f16 pair's centre m + 8 d (in f32, then rounded to nearest) */\n"                             \
    "__device__ __forceinline__ u32 w4bw_c2(u32 mh, u32 dh) {\n"                                                    \
    "    float fm, fd;\n"                                                                                           \
    "    u32 d;\n"                                                                                                  \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(fm) : \"h\"((u16)mh));\n"                                            \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(fd) : \"h\"((u16)dh));\n"                                            \
    "    const float c = __fadd_rn(fm, 8.f * fd); /* 8 d is exact */\n"                                            \
    "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %1;\" : \"=r\"(d) : \"f\"(c));\n"                                         \
    "    return d;\n"                                                                                               \
    "}\n"                                                                                                           \
    "/* bf16x2 of d (q - 8) + (m + 8 d), rounded once: v = 128 + q (lop3), q - 8 exact, one fma with d2 = bf16(d) and\n" \
    "   c2 = bf16(m + 8 d); the centre is small where m ~ -8 d, so its rounding moves the weights little */\n"     \
    "__device__ __forceinline__ u32 w4bw_fmin(u32 w, u32 sh, u32 d2, u32 c2) {\n"                                  \
    "    u32 v, qb, r;\n"                                                                                           \
    "    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(v) : \"r\"(w >> sh), \"r\"(0x000F000Fu), \"r\"(0x43004300u));\n" \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(qb) : \"r\"(v), \"r\"(0x3F803F80u), \"r\"(0xC308C308u));\n"         \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(qb), \"r\"(d2), \"r\"(c2));\n"                         \
    "    return r;\n"                                                                                               \
    "}\n"                                                                                                           \
    "/* the format for qc_ra_gemm; MODE 0 sym, 1 asym (zeros), 2 fmin (mins: w = d q + m) */\n"                     \
    "template <int MODE> struct W4Bf16 {\n"                                                                         \
    "    struct Args { const u8 *q; const u16 *sc; const void *zm; int gsh; }; /* zm: zeros (u8) or mins (f16) */\n" \
    "    __device__ static __forceinline__ void meta(const Args &fa, u32 dst, ll r, int kt, ll k) {\n"              \
    "        const ll e = r * (k >> fa.gsh) + ((kt * 64) >> fa.gsh);\n"                                             \
    "        qcp_cp4(dst, fa.sc + (e & ~1ll));\n"                                                                   \
    "        if (MODE == 1) qcp_cp4(dst + 512, (const u8 *)fa.zm + (e & ~3ll));\n"                                  \
    "        if (MODE == 2) qcp_cp4(dst + 512, (const u16 *)fa.zm + (e & ~1ll));\n"                                 \
    "    }\n"                                                                                                       \
    "    __device__ static __forceinline__ void build(const Args &fa, const QcRaStage &c, u32 (*a)[4]) {\n"         \
    "        const ll ng = c.k >> fa.gsh;\n"                                                                        \
    "        const u32 sh = 4u * c.t;\n"                                                                            \
    "        const u32 wa = *(const u32 *)(c.ms + c.rl * 4), wb = *(const u32 *)(c.ms + (c.rl + 8) * 4);\n"         \
    "        u32 za = 0, zb = 0;\n"                                                                                 \
    "        if (MODE) za = *(const u32 *)(c.ms + 512 + c.rl * 4), zb = *(const u32 *)(c.ms + 512 + (c.rl + 8) * 4);\n" \
    "#pragma unroll\n"                                                                                              \
    "        for (int b = 0; b < 2; b++) { /* the stage's k 32 b .. 32 b + 31: k16 steps 2b, 2b + 1 */\n"            \
    "            const ll gi = (c.kt * 64 + 32 * b) >> fa.gsh, e0 = c.rc0 * ng + gi, e1 = c.rc1 * ng + gi;\n"       \
    "            const u32 s0 = w4bw_s2((e0 & 1) ? wa >> 16 : wa), s1 = w4bw_s2((e1 & 1) ? wb >> 16 : wb);\n"       \
    "            u32 n0 = 0xC308C308u, n1 = 0xC308C308u; /* -(128 + 8); fmin: bf16x2 of m + 8 d */\n"              \
    "            if (MODE == 2) {\n"                                                                                \
    "                n0 = w4bw_c2((e0 & 1) ? za >> 16 : za, (e0 & 1) ? wa >> 16 : wa);\n"                               \
    "                n1 = w4bw_c2((e1 & 1) ? zb >> 16 : zb, (e1 & 1) ? wb >> 16 : wb);\n"                               \
    "            }\n"                                                                                               \
    "            if (MODE == 1) {\n"                                                                                \
    "                n0 = (0xC300u | ((za >> (8 * (int)(e0 & 3))) & 15u)) * 0x10001u;\n"                            \
    "                n1 = (0xC300u | ((zb >> (8 * (int)(e1 & 3))) & 15u)) * 0x10001u;\n"                            \
    "            }\n"                                                                                               \
    "            const uint4 r0 = *(const uint4 *)(c.ws + c.rl * 32 + 16 * (b ^ c.swz));\n"                         \
    "            const uint4 r1 = *(const uint4 *)(c.ws + (c.rl + 8) * 32 + 16 * (b ^ c.swz));\n"                   \
    "            const u32 w8[8] = {r0.x, r1.x, r0.y, r1.y, r0.z, r1.z, r0.w, r1.w};\n"                             \
    "#pragma unroll\n"                                                                                              \
    "            for (int i = 0; i < 8; i++) /* a[2b + i / 4][i % 4]: rows rl (i even) and rl + 8 */\n"            \
    "                a[2 * b + (i >> 2)][i & 3] = MODE == 2 ? w4bw_fmin(w8[i], sh, (i & 1) ? s1 : s0, (i & 1) ? n1 : n0)\n" \
    "                                                       : w4bw_deq(w8[i], sh, (i & 1) ? n1 : n0, (i & 1) ? s1 : s0);\n" \
    "        }\n"                                                                                                   \
    "    }\n"                                                                                                       \
    "};\n"

static const char W4BW_SRC_SYM[] =
    "/* qcore w4a16 Hopper GEMM on bf16-rounded weights (sym): TMA + wgmma, A decoded and scaled in registers */\n"
    W4BW_SRC_HEAD
    "/* x is read only through its tensor map (built by the host from the same pointer) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_w4_wgmma_bf16_sym(const u16 *x, const u8 *q,\n"
    "        const u16 *s, float *y, ll m, ll n, ll k, ll gs, float *work,\n"
    "        const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    const W4Bf16<0>::Args fa = {q, s, 0, gs == 32 ? 5 : gs == 64 ? 6 : 7}; /* shifts, not 64-bit divides */\n"
    "    qc_ra_go<W4Bf16<0>>(&tmx, fa, y, m, n, k, work);\n"
    "}\n";

static const char W4BW_SRC_ASYM[] =
    "/* qcore w4a16 Hopper GEMM on bf16-rounded weights (asym): TMA + wgmma, A decoded and scaled in registers */\n"
    W4BW_SRC_HEAD
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_w4_wgmma_bf16_asym(const u16 *x, const u8 *q,\n"
    "        const u16 *s, const u8 *z, float *y, ll m, ll n, ll k, ll gs, float *work,\n"
    "        const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    const W4Bf16<1>::Args fa = {q, s, z, gs == 32 ? 5 : gs == 64 ? 6 : 7};\n"
    "    qc_ra_go<W4Bf16<1>>(&tmx, fa, y, m, n, k, work);\n"
    "}\n";

static const char W4BW_SRC_FMIN[] =
    "/* qcore w4a16 Hopper GEMM on bf16-rounded weights (fmin, w = d q + m): TMA + wgmma, A decoded in registers */\n"
    W4BW_SRC_HEAD
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_w4_wgmma_bf16_fmin(const u16 *x, const u8 *q,\n"
    "        const u16 *s, const u16 *mn, float *y, ll m, ll n, ll k, ll gs, float *work,\n"
    "        const __grid_constant__ QcTmap tmx) {\n"
    "    (void)x;\n"
    "    const W4Bf16<2>::Args fa = {q, s, mn, gs == 32 ? 5 : gs == 64 ? 6 : 7};\n"
    "    qc_ra_go<W4Bf16<2>>(&tmx, fa, y, m, n, k, work);\n"
    "}\n";

/* the launch (plugins/common/qc_ra_gemm_src.h); QC_W4BW_BM=64|128|256 forces the tile height */
static void w4bw_dims(const qc_problem *p, qc_launch_dims *d) { qc_ra_gemm_dims(p, "QC_W4BW_BM", d); }

/* ---- C references: exactly each kernel's parameters, x as bf16 bits, weights rounded as the kernel does ---- */

static void w4bw_ref_sym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                         int64_t n, int64_t k, int64_t group_size, void *work) {
    (void)work; /* the kernels' "work" is theirs alone */
    w4_ref_bx(W4A16_SCHEME_SYM, 1, xb, qweight, scales, NULL, NULL, y, m, n, k, group_size);
}
static void w4bw_ref_asym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                          float *y, int64_t m, int64_t n, int64_t k, int64_t group_size, void *work) {
    (void)work;
    w4_ref_bx(W4A16_SCHEME_ASYM, 1, xb, qweight, scales, zeros, NULL, y, m, n, k, group_size);
}
static void w4bw_ref_fmin(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint16_t *mins,
                          float *y, int64_t m, int64_t n, int64_t k, int64_t group_size, void *work) {
    (void)work;
    w4_ref_bx(W4A16_SCHEME_FMIN, 1, xb, qweight, scales, NULL, mins, y, m, n, k, group_size);
}

/* ---- eligibility ---- */

static int w4bw_ok(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    const char *off = getenv("QC_W4_BF16");
    if (off && strcmp(off, "off") == 0) {
        w4_why(why, "disabled", "%s is turned off (QC_W4_BF16=off): w4a16.wgmma_* keeps the exact products", id);
        return 0;
    }
    if (!w4_gpu_takes(p, want, id, why)) return 0; /* scheme, act order, group, shape */
    if (p->k % 64) {
        w4_why(why, "align_k", "%s takes k in stages of 64 (k = %lld; w4a16.wgmma_* takes k %% 32)", id,
               (long long)p->k);
        return 0;
    }
    if (p->m < 1 || p->m > (1ll << 31) - 128) {
        w4_why(why, "m_range", "%s takes 1 <= m < 2^31 - 128 (32-bit TMA row coordinates), batch has m = %lld", id,
               (long long)p->m);
        return 0;
    }
    return 1;
}
static int w4bw_el_sym(const qc_problem *p, qc_reason *why) {
    return w4bw_ok(p, W4A16_SCHEME_SYM, "w4a16.wgmma_bf16_sym", why);
}
static int w4bw_el_asym(const qc_problem *p, qc_reason *why) {
    return w4bw_ok(p, W4A16_SCHEME_ASYM, "w4a16.wgmma_bf16_asym", why);
}
static int w4bw_el_fmin(const qc_problem *p, qc_reason *why) {
    return w4bw_ok(p, W4A16_SCHEME_FMIN, "w4a16.wgmma_bf16_fmin", why);
}

/* ---- registration ---- */

#define W4BW_HEAD W4_GP_HEAD
#define W4BW_TAIL W4_GP_TAIL, {"work", QC_PARAM_PTR}
static const qc_kernel_param w4bw_p_sym[] = {W4BW_HEAD, W4BW_TAIL};
static const qc_kernel_param w4bw_p_asym[] = {W4BW_HEAD, {"w.zeros", QC_PARAM_PTR}, W4BW_TAIL};
static const qc_kernel_param w4bw_p_fmin[] = {W4BW_HEAD, {"w.mins", QC_PARAM_PTR}, W4BW_TAIL};

/* Registered before w4a16.wgmma_sym / _asym (same arch and M range): the engine's tie-break is registration
 * order, so these run on sm_90 unless refused. */
qc_status w4_register_wgmma_bf16_kernels(const qc_host_api *api, qc_host *host) {
    static const w4_sm90_row rows[] = {
        {"w4a16.wgmma_bf16_sym", "qc_w4_wgmma_bf16_sym", W4BW_SRC_SYM, w4bw_p_sym,
         sizeof w4bw_p_sym / sizeof w4bw_p_sym[0], (void (*)(void))w4bw_ref_sym, w4bw_el_sym},
        {"w4a16.wgmma_bf16_asym", "qc_w4_wgmma_bf16_asym", W4BW_SRC_ASYM, w4bw_p_asym,
         sizeof w4bw_p_asym / sizeof w4bw_p_asym[0], (void (*)(void))w4bw_ref_asym, w4bw_el_asym},
        {"w4a16.wgmma_bf16_fmin", "qc_w4_wgmma_bf16_fmin", W4BW_SRC_FMIN, w4bw_p_fmin,
         sizeof w4bw_p_fmin / sizeof w4bw_p_fmin[0], (void (*)(void))w4bw_ref_fmin, w4bw_el_fmin},
    };
    return w4_register_sm90(api, host, rows, sizeof rows / sizeof rows[0], w4bw_dims, NULL, qc_ra_workspace_bytes);
}
