/* w4a16_gemv_reg.c - the register-only w4a16 GEMV (m <= 8): gemv_bx's shape (loads in flight, CUDA-core f32 math, no smem). */
#include <stdlib.h>
#include <string.h>

#include "w4a16_impl.h"

qc_status w4_register_gemv_reg_kernels(const qc_host_api *api, qc_host *host);

/*
 * y[m,n] = x[m,k] . W4[n,k]^T for 1 <= m <= 8, modeled on the core's
 * bf16.linear_gemv_bx: a warp owns R rows; lane l takes the 16-byte vectors
 * v = l + 32 u of each row (32 codes each, so one vector lies in one group
 * for g = 32, 64, 128), issuing R * U of them (ld.global.nc.L1::no_allocate)
 * and their group data (__ldg, L1) before any math; x comes through __ldg
 * (L1/L2 resident); f32 FMAs; a shuffle reduction; no shared memory, no
 * barriers.  The packed layout is pack_version 1, untouched.
 *
 * Exactness: each code becomes the exact f32 (q - z) (z = 8 for sym and
 * fmin, the group's zero for asym), a vector's 32 products x (q - z) are
 * summed in f32 and scaled once: acc += s * part.  fmin is
 * d (q - 8) + (m + 8 d), as the mma GEMV computes it, with sum(x) of the
 * vector shared by the warp's rows.  The code -> f32 step (W4R_MATH):
 *   0: ((w >> 4e) & 15) | 0x4B000000 is 2^23 + q; one FADD of -(2^23 + z).
 *   1: no shift per code: (w & (15 << 4e)) | 0x4B000000 is 2^23 + q 2^4e
 *      (e < 4, and the same on w >> 16), and one FFMA by 2^-4e with
 *      -(2^(23-4e) + z) gives q - z exactly.
 * Variants are chosen by defines (W4R_R rows per warp, W4R_U vectors per
 * row in flight, W4R_MATH), so a test can time several builds of this one
 * source; the registered kernel is the defaults below, and w4r_dims must
 * agree with W4R_R.
 */
#define W4R_R_DEFAULT 2
#define W4R_WARPS 8

static const char W4_GEMV_REG_SRC[] =
    "/* qcore w4a16 register GEMV: y[m,n] = x[m,k] . W4[n,k]^T, m <= 8, bf16 x, f32 FMAs */\n"
    "#ifndef W4R_R\n"
    "#define W4R_R 2\n"
    "#endif\n"
    "#ifndef W4R_U\n"
    "#define W4R_U 4\n"
    "#endif\n"
    "#ifndef W4R_UBIG /* vectors in flight per row for m > 2 (more x rows, more registers) */\n"
    "#define W4R_UBIG 1\n"
    "#endif\n"
    "#ifndef W4R_MINB /* blocks per SM the registers must allow */\n"
    "#define W4R_MINB 2\n"
    "#endif\n"
    "#ifndef W4R_MATH\n"
    "#define W4R_MATH 1\n"
    "#endif\n"
    "#define W4R_WARPS 8\n"
    "typedef unsigned int u32;\n"
    "typedef unsigned short u16;\n"
    "typedef unsigned char u8;\n"
    "typedef long long ll;\n"
    "#define W4_SYM 1\n"
    "#define W4_ASYM 2\n"
    "#define W4_FMIN 3\n"
    "__device__ __forceinline__ uint4 w4r_ld(const uint4 *p) {\n"
    "    uint4 v;\n"
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "        : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float w4r_h2f(u16 h) {\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    return f;\n"
    "}\n"
    "/* (w & mask) | hi in one LOP3: hi is a register operand, since LOP3 takes one immediate */\n"
    "template <u32 MASK>\n"
    "__device__ __forceinline__ float w4r_mor(u32 w, u32 hi) {\n"
    "    u32 d;\n"
    "    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(d) : \"r\"(w), \"n\"(MASK), \"r\"(hi));\n"
    "    return __uint_as_float(d);\n"
    "}\n"
    "/* the 8 codes of word w as exact f32 (q - z); hi = 0x4B000000 (2^23) */\n"
    "__device__ __forceinline__ void w4r_codes(u32 w, float z, u32 hi, float *c) {\n"
    "#if W4R_MATH == 0\n"
    "#pragma unroll\n"
    "    for (int e = 0; e < 8; e++) c[e] = w4r_mor<15u>(w >> (4 * e), hi) - (8388608.f + z);\n"
    "#else\n"
    "    const u32 h = w >> 16;\n"
    "    const float z0 = -(8388608.f + z), z1 = -(524288.f + z), z2 = -(32768.f + z), z3 = -(2048.f + z);\n"
    "    c[0] = __fmaf_rn(w4r_mor<0xFu>(w, hi), 1.f, z0);\n"
    "    c[1] = __fmaf_rn(w4r_mor<0xF0u>(w, hi), 0.0625f, z1);\n"
    "    c[2] = __fmaf_rn(w4r_mor<0xF00u>(w, hi), 0.00390625f, z2);\n"
    "    c[3] = __fmaf_rn(w4r_mor<0xF000u>(w, hi), 0.000244140625f, z3);\n"
    "    c[4] = __fmaf_rn(w4r_mor<0xFu>(h, hi), 1.f, z0);\n"
    "    c[5] = __fmaf_rn(w4r_mor<0xF0u>(h, hi), 0.0625f, z1);\n"
    "    c[6] = __fmaf_rn(w4r_mor<0xF00u>(h, hi), 0.00390625f, z2);\n"
    "    c[7] = __fmaf_rn(w4r_mor<0xF000u>(h, hi), 0.000244140625f, z3);\n"
    "#endif\n"
    "}\n"
    "/* x bf16 pairs -> f32 */\n"
    "__device__ __forceinline__ void w4r_x8(uint4 b, float *xe) {\n"
    "    xe[0] = __uint_as_float(b.x << 16); xe[1] = __uint_as_float(b.x & 0xffff0000u);\n"
    "    xe[2] = __uint_as_float(b.y << 16); xe[3] = __uint_as_float(b.y & 0xffff0000u);\n"
    "    xe[4] = __uint_as_float(b.z << 16); xe[5] = __uint_as_float(b.z & 0xffff0000u);\n"
    "    xe[6] = __uint_as_float(b.w << 16); xe[7] = __uint_as_float(b.w & 0xffff0000u);\n"
    "}\n"
    "/* U vectors per row (v, v + 32, ...) of every row, all loaded before the math */\n"
    "template <int S, int MT, int U>\n"
    "__device__ __forceinline__ void w4r_step(const uint4 *const (&wr)[W4R_R], const u16 *const (&sr)[W4R_R],\n"
    "        const u8 *const (&zr)[W4R_R], const u16 *const (&mr)[W4R_R], const uint4 *xq, ll v, int gsh,\n"
    "        ll m, ll k, float (&acc)[W4R_R][MT]) {\n"
    "    uint4 a[W4R_R][U];\n"
    "    float sc[W4R_R][U], zc[W4R_R][U], cm[W4R_R][U];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) a[r][u] = w4r_ld(wr[r] + v + 32 * u);\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) {\n"
    "            const ll gi = (v + 32 * u) >> gsh;\n"
    "            sc[r][u] = w4r_h2f(__ldg(sr[r] + gi));\n"
    "            zc[r][u] = S == W4_ASYM ? (float)__ldg(zr[r] + gi) : 8.f; /* z */\n"
    "            cm[r][u] = S == W4_FMIN ? __fmaf_rn(8.f, sc[r][u], w4r_h2f(__ldg(mr[r] + gi))) : 0.f;\n"
    "        }\n"
    "    /* per vector: each word's codes dequantized once for every row of x; one scale per vector */\n"
    "#pragma unroll\n"
    "    for (int u = 0; u < U; u++) {\n"
    "        float part[W4R_R][MT], sx[MT];\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) {\n"
    "            sx[i] = 0.f;\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < W4R_R; r++) part[r][i] = 0.f;\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "            float c[W4R_R][8];\n"
    "#pragma unroll\n"
    "            for (int r = 0; r < W4R_R; r++) {\n"
    "                const u32 w = j == 0 ? a[r][u].x : j == 1 ? a[r][u].y : j == 2 ? a[r][u].z : a[r][u].w;\n"
    "                w4r_codes(w, zc[r][u], 0x4B000000u, c[r]);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < MT; i++) {\n"
    "                if (i >= m) break;\n"
    "                float xe[8];\n"
    "                w4r_x8(__ldg(xq + (i * k >> 3) + 4 * (v + 32 * u) + j), xe);\n"
    "                if (S == W4_FMIN) {\n"
    "#pragma unroll\n"
    "                    for (int e = 0; e < 8; e++) sx[i] += xe[e];\n"
    "                }\n"
    "#pragma unroll\n"
    "                for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "                    for (int e = 0; e < 8; e++) part[r][i] = __fmaf_rn(c[r][e], xe[e], part[r][i]);\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < MT; i++) {\n"
    "                acc[r][i] = __fmaf_rn(sc[r][u], part[r][i], acc[r][i]);\n"
    "                if (S == W4_FMIN) acc[r][i] = __fmaf_rn(cm[r][u], sx[i], acc[r][i]);\n"
    "            }\n"
    "    }\n"
    "}\n"
    "template <int S, int MT, int UU>\n"
    "__device__ __forceinline__ void w4r_gemv(const u16 *x, const u8 *q, const u16 *s, const u8 *z, const u16 *mn,\n"
    "        float *y, ll m, ll n, ll k, int gsh) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    const ll row0 = ((ll)blockIdx.x * W4R_WARPS + warp) * W4R_R;\n"
    "    if (row0 >= n) return;\n"
    "    const ll nv = k >> 5, ng = nv >> gsh; /* 16-byte vectors and groups per row */\n"
    "    const uint4 *wr[W4R_R];\n"
    "    const u16 *sr[W4R_R], *mr[W4R_R];\n"
    "    const u8 *zr[W4R_R];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < W4R_R; r++) {\n"
    "        const ll row = row0 + r < n ? row0 + r : row0; /* rows past n read row0, never stored */\n"
    "        wr[r] = (const uint4 *)(q + row * (k >> 1));\n"
    "        sr[r] = s + row * ng;\n"
    "        zr[r] = z ? z + row * ng : z;\n"
    "        mr[r] = mn ? mn + row * ng : mn;\n"
    "    }\n"
    "    const uint4 *xq = (const uint4 *)x;\n"
    "    float acc[W4R_R][MT];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) acc[r][i] = 0.f;\n"
    "    ll v = lane;\n"
    "    for (; v + 32 * (UU - 1) < nv; v += 32 * UU) w4r_step<S, MT, UU>(wr, sr, zr, mr, xq, v, gsh, m, k, acc);\n"
    "    for (; v < nv; v += 32) w4r_step<S, MT, 1>(wr, sr, zr, mr, xq, v, gsh, m, k, acc);\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < W4R_R; r++)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < MT; i++) {\n"
    "            float t = acc[r][i];\n"
    "#pragma unroll\n"
    "            for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);\n"
    "            if (lane == 0 && i < m && row0 + r < n) y[i * n + row0 + r] = t;\n"
    "        }\n"
    "}\n"
    "template <int S>\n"
    "__device__ __forceinline__ void w4r_go(const u16 *x, const u8 *q, const u16 *s, const u8 *z, const u16 *mn,\n"
    "        float *y, ll m, ll n, ll k, ll gs) {\n"
    "    if (m <= 0 || m > 8 || n <= 0 || k <= 0 || (k & 31)) return;\n"
    "    const int gsh = gs == 128 ? 2 : gs == 64 ? 1 : gs == 32 ? 0 : -1;\n"
    "    if (gsh < 0 || k % gs) return;\n"
    "    if (m == 1) w4r_gemv<S, 1, W4R_U>(x, q, s, z, mn, y, m, n, k, gsh);\n"
    "    else if (m == 2) w4r_gemv<S, 2, W4R_U>(x, q, s, z, mn, y, m, n, k, gsh);\n"
    "    else if (m <= 4) w4r_gemv<S, 4, W4R_UBIG>(x, q, s, z, mn, y, m, n, k, gsh);\n"
    "    else w4r_gemv<S, 8, W4R_UBIG>(x, q, s, z, mn, y, m, n, k, gsh);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, W4R_MINB) qc_w4r_gemv_sym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4r_go<W4_SYM>(x, q, s, 0, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, W4R_MINB) qc_w4r_gemv_asym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u8 *z, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4r_go<W4_ASYM>(x, q, s, z, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, W4R_MINB) qc_w4r_gemv_fmin(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u16 *mn, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4r_go<W4_FMIN>(x, q, s, 0, mn, y, m, n, k, gs);\n"
    "}\n";

/* One block of 8 warps per 8 R rows (R = the source's default W4R_R). */
static void w4r_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m <= 0 || p->n <= 0) return;
    int64_t per = W4R_WARPS * W4R_R_DEFAULT, blocks = (p->n + per - 1) / per;
    d->grid[0] = blocks <= 0x7fffffffLL ? (uint32_t)blocks : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32 * W4R_WARPS;
    d->block[1] = d->block[2] = 1;
}

/* C reference: the plugin's reference linear, x as bf16 bits (as the other GEMVs). */
static void w4r_ref(uint32_t scheme, const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales,
                    const uint8_t *zeros, const uint16_t *mins, float *y, int64_t m, int64_t n, int64_t k,
                    int64_t group_size) {
    if (!xb || !qweight || !scales || !y || m <= 0 || group_size <= 0 || group_size > 128 ||
        !w4_shape_ok(n, k, (uint32_t)group_size, NULL) || (size_t)m > SIZE_MAX / sizeof(float) / (size_t)k)
        return;
    if ((scheme == W4A16_SCHEME_ASYM && !zeros) || (scheme == W4A16_SCHEME_FMIN && !mins)) return;
    float *x = malloc((size_t)m * (size_t)k * sizeof(float));
    if (!x) return;
    for (size_t i = 0; i < (size_t)m * (size_t)k; i++) x[i] = qc_bf16_to_f32(xb[i]);
    w4_view v = {.n = n, .k = k, .g = (uint32_t)group_size, .scheme = scheme, .ng = k / group_size,
                 .q = qweight, .s = scales, .z = zeros, .mn = mins};
    w4_linear(&v, x, y, m);
    free(x);
}
static void w4r_ref_sym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                        int64_t n, int64_t k, int64_t group_size) {
    w4r_ref(W4A16_SCHEME_SYM, xb, qweight, scales, NULL, NULL, y, m, n, k, group_size);
}
static void w4r_ref_asym(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                         float *y, int64_t m, int64_t n, int64_t k, int64_t group_size) {
    w4r_ref(W4A16_SCHEME_ASYM, xb, qweight, scales, zeros, NULL, y, m, n, k, group_size);
}
static void w4r_ref_fmin(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint16_t *mins,
                         float *y, int64_t m, int64_t n, int64_t k, int64_t group_size) {
    w4r_ref(W4A16_SCHEME_FMIN, xb, qweight, scales, NULL, mins, y, m, n, k, group_size);
}

/* Eligibility: the scheme itself (no act-order), g in {32, 64, 128}, the format's shape rules. */
static int w4r_ok(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    uint32_t s = p->struct_size >= offsetof(qc_problem, scheme) + sizeof p->scheme ? p->scheme : 0;
    if (s == 0) s = W4A16_SCHEME_SYM;
    if (s != want) {
        w4_why(why, (s & W4A16_SCHEME_PERM) ? "perm" : "scheme",
               "%s takes scheme %s without act-order, the weight is %s (0x%x)", id, w4_scheme_name(want),
               w4_scheme_name(s), s);
        return 0;
    }
    if (!w4_group_ok(p->group_size)) {
        w4_why(why, "group", "%s needs the weight's group size (32, 64 or 128), problem has %u", id, p->group_size);
        return 0;
    }
    if (!w4_shape_ok(p->n, p->k, p->group_size, why)) return 0;
    if ((p->n + W4R_WARPS * W4R_R_DEFAULT - 1) / (W4R_WARPS * W4R_R_DEFAULT) > 0x7fffffffLL) {
        w4_why(why, "shape", "%s: n = %lld needs more blocks than a grid holds", id, (long long)p->n);
        return 0;
    }
    return 1;
}
static int w4r_el_sym(const qc_problem *p, qc_reason *why) {
    return w4r_ok(p, W4A16_SCHEME_SYM, "w4a16.gemv_reg_sym", why);
}
static int w4r_el_asym(const qc_problem *p, qc_reason *why) {
    return w4r_ok(p, W4A16_SCHEME_ASYM, "w4a16.gemv_reg_asym", why);
}
static int w4r_el_fmin(const qc_problem *p, qc_reason *why) {
    return w4r_ok(p, W4A16_SCHEME_FMIN, "w4a16.gemv_reg_fmin", why);
}

#define RP_HEAD {"x.bf16", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR}
#define RP_TAIL                                                                                           \
    {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64}, {"k", QC_PARAM_I64},                   \
    {"group_size", QC_PARAM_I64}
static const qc_kernel_param w4r_p_sym[] = {RP_HEAD, RP_TAIL};
static const qc_kernel_param w4r_p_asym[] = {RP_HEAD, {"w.zeros", QC_PARAM_PTR}, RP_TAIL};
static const qc_kernel_param w4r_p_fmin[] = {RP_HEAD, {"w.mins", QC_PARAM_PTR}, RP_TAIL};

/* m 1..8: narrower than w4a16.gemv_* (1..16) at the same arch and m_min, so the engine prefers these for m <= 8. */
qc_status w4_register_gemv_reg_kernels(const qc_host_api *api, qc_host *host) {
    static const struct {
        const char *id, *entry;
        const qc_kernel_param *params;
        uint32_t n_params;
        void (*reference)(void);
        int (*eligible)(const qc_problem *, qc_reason *);
    } rows[] = {
        {"w4a16.gemv_reg_sym", "qc_w4r_gemv_sym", w4r_p_sym, sizeof w4r_p_sym / sizeof w4r_p_sym[0], (void (*)(void))w4r_ref_sym, w4r_el_sym},
        {"w4a16.gemv_reg_asym", "qc_w4r_gemv_asym", w4r_p_asym, sizeof w4r_p_asym / sizeof w4r_p_asym[0], (void (*)(void))w4r_ref_asym, w4r_el_asym},
        {"w4a16.gemv_reg_fmin", "qc_w4r_gemv_fmin", w4r_p_fmin, sizeof w4r_p_fmin / sizeof w4r_p_fmin[0], (void (*)(void))w4r_ref_fmin, w4r_el_fmin},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        qc_kernel_desc d = {
            .struct_size = sizeof d,
            .id = rows[i].id,
            .format = "w4a16",
            .phases = QC_PHASE_ANY,
            .m_min = 1,
            .m_max = 8,
            .arch = {80, QC_SM_ANY},
            .n_params = rows[i].n_params,
            .params = rows[i].params,
            .reference = rows[i].reference,
            .cuda_source = W4_GEMV_REG_SRC,
            .cuda_entry = rows[i].entry,
            .launch_dims = w4r_dims,
            .eligible = rows[i].eligible,
        };
        qc_status st = api->register_kernel(host, &d);
        if (st != QC_OK) return st;
    }
    return QC_OK;
}
