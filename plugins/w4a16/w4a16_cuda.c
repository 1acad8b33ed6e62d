/* w4a16_cuda.c - the w4a16 GPU kernels (tensor-core GEMV for decode, mma.sync GEMM for prefill) and their C references. */
#include <stdlib.h>
#include <string.h>

#include "w4a16_impl.h"

qc_status w4_register_gpu_kernels(const qc_host_api *api, qc_host *host);

/*
 * Both kernels compute y[m,n] = x[m,k] . W[n,k]^T with x bf16 ("x.bf16"),
 * W in pack_version 2 (row-major words of 8 codes, per-row group scales) and f32
 * accumulation on the tensor cores (mma.sync m16n8k16 bf16), never writing
 * a dequantized W anywhere.
 *
 * Exactness: the tensor cores multiply x (bf16) by the integer q - z, which
 * bf16 holds exactly (-15..15), so every product is exact; the partial sums
 * of one group are then scaled in f32: acc += s * sum_group(x (q - z)).
 * sym uses z = 8, asym the group's zero.  fmin (w = d q + m) is computed as
 * d (q - 8) + (m + 8 d): acc += d * sum(x (q - 8)) + (m + 8 d) * sum(x),
 * with sum(x) from one more mma against a B of ones.  Only the order and
 * grouping of the f32 sums differ from the C reference (and, for fmin, the
 * rounding of m + 8 d), see docs/formats/w4a16.md "GPU kernels".
 *
 * Fragments without a repack: a quad of lanes (t = lane & 3) shares one row
 * of W (the mma's B column g = lane >> 2).  For a group of g = 32 GW codes,
 * lane t loads GW consecutive 32-bit words of its row at codes
 * 8 GW t + 8 j (j < GW), so one load instruction of the quad covers exactly
 * one group.  A word holds code 2p at bits 4p and code 2p + 1 at bits
 * 16 + 4p (pack_version 2's interleave); lop3 builds the bf16 pairs
 * (128 + q_2p, 128 + q_2p+1) for p = 0..3 (no shifts of the pair), one
 * bf16x2 fma subtracts 128 + z exactly.  The 16 k slots of an mma need not
 * be in K order, only the same for A and B: slot pairs (2t, 2t+1) and
 * (2t+8, 2t+9) take codes (0,1), (2,3) in the first mma of a word and
 * (4,5), (6,7) in the second, which are x's 8 matching bf16 (one 16-byte
 * load) as they lie: no byte permutes (pack_version 1 needed four).
 */

/* ---- device code shared by both kernels ---- */

#define W4_DEV_COMMON                                                                                              \
    "typedef unsigned int u32;\n"                                                                                  \
    "typedef unsigned short u16;\n"                                                                                \
    "typedef unsigned char u8;\n"                                                                                  \
    "typedef long long ll;\n"                                                                                      \
    "#define W4_SYM 1\n"                                                                                           \
    "#define W4_ASYM 2\n"                                                                                          \
    "#define W4_FMIN 3\n"                                                                                          \
    "#define W4_ONES 0x3F803F80u /* bf16x2 (1, 1) */\n"                                                            \
    "#define W4_NEG136 0xC308C308u /* bf16x2 (-136, -136): 128 + z for z = 8 */\n"                                 \
    "__device__ __forceinline__ void w4_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {\n"         \
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"                                  \
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"                               \
    "                 : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"                                   \
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"                       \
    "}\n"                                                                                                          \
    "__device__ __forceinline__ float w4_h2f(u16 h) {\n"                                                           \
    "    float f;\n"                                                                                               \
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"                                                   \
    "    return f;\n"                                                                                              \
    "}\n"                                                                                                          \
    "/* bf16x2 -(128 + z) in both halves */\n"                                                                     \
    "__device__ __forceinline__ u32 w4_negz(u32 z) { return (0xC300u | z) * 0x10001u; }\n"                          \
    "/* (128 + q) pairs minus (128 + z): exact */\n"                                                               \
    "__device__ __forceinline__ u32 w4_sub(u32 v, u32 negz) {\n"                                                   \
    "    u32 d;\n"                                                                                                 \
    "    asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(v), \"r\"(W4_ONES), \"r\"(negz));\n"             \
    "    return d;\n"                                                                                              \
    "}\n"                                                                                                          \
    "/* one word of 8 codes -> B pairs (q-z) for elements (0,1), (2,3), (4,5), (6,7): pack_version 2 keeps element\n" \
    "   2p at nibble p and 2p + 1 at nibble p + 4 */\n"                                                               \
    "__device__ __forceinline__ void w4_deq(u32 w, u32 negz, u32 *b) {\n"                                          \
    "    b[0] = w4_sub((w & 0x000F000Fu) | 0x43004300u, negz);\n"                                                  \
    "    b[1] = w4_sub(((w >> 4) & 0x000F000Fu) | 0x43004300u, negz);\n"                                           \
    "    b[2] = w4_sub(((w >> 8) & 0x000F000Fu) | 0x43004300u, negz);\n"                                           \
    "    b[3] = w4_sub(((w >> 12) & 0x000F000Fu) | 0x43004300u, negz);\n"                                          \
    "}\n"                                                                                                          \
    "/* 8 bf16 of x (e0..e7) -> A pairs in the same order: (e0,e1), (e2,e3), (e4,e5), (e6,e7), as loaded */\n"    \
    "__device__ __forceinline__ void w4_xperm(uint4 v, u32 *a) {\n"                                                \
    "    a[0] = v.x;\n"                                                                                            \
    "    a[1] = v.y;\n"                                                                                            \
    "    a[2] = v.z;\n"                                                                                            \
    "    a[3] = v.w;\n"                                                                                            \
    "}\n"                                                                                                          \
    "template <int GW> __device__ __forceinline__ void w4_ldq(const u8 *p, u32 *w) {\n"                            \
    "    if constexpr (GW == 4) {\n"                                                                               \
    "        uint4 v = __ldg((const uint4 *)p);\n"                                                                 \
    "        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;\n"                                                    \
    "    } else if constexpr (GW == 2) {\n"                                                                        \
    "        uint2 v = __ldg((const uint2 *)p);\n"                                                                 \
    "        w[0] = v.x; w[1] = v.y;\n"                                                                            \
    "    } else {\n"                                                                                               \
    "        w[0] = __ldg((const unsigned int *)p);\n"                                                             \
    "    }\n"                                                                                                      \
    "}\n"

/*
 * GEMV (1 <= m <= 16), two paths in one entry, chosen by k (w4_gemv_dims
 * follows the same rule):
 *
 * k % 128 == 0, the streaming path (w4v_gemv): a warp owns 16 rows and K in
 * chunks of 128 codes; lane t of the quad of row g copies the chunk's bytes
 * 16t..16t+15 of its row (cp.async 16 B, L1 bypassed) into a per-warp ring of
 * two batches in shared memory, with each chunk's group data as aligned
 * 4-byte words, so two batches are in flight per warp without holding
 * registers.  Quad shuffles transpose the 4 x 4 words where a lane's 16 bytes
 * span groups (g = 32: xor 2 then xor 1; g = 64: xor 2), so that every k32
 * mma step lies in one group; x is read at the same codes.  The packed layout
 * is untouched (docs/formats/w4a16.md, "GEMV").
 *
 * Other k, the first GEMV: a warp owns 16 rows of W (two n8 tiles; lane g
 * reads rows n0 + g and n0 + 8 + g) and every ks-th group of K; its 8 - 8/ks
 * sibling warps in the block (ks = 1, 2, 4 or 8, chosen from n and k so
 * that about 2048 warps stream) take the other groups, and the partial sums
 * meet in shared memory.  Per iteration a lane issues 8/GW groups' loads of
 * both rows (64 bytes of codes) plus their scales before any math.  x rows
 * (16-byte loads through the read-only path, L1/L2 resident) feed the A
 * fragment's rows g (and g + 8 when m > 8); rows past m are zeros.
 */
#define W4G_WARPS 8
#define W4G_WANT 2048
#define W4V_WANT 2048
#define W4V_UMAX 2
/* per warp: two stages of U chunks x 2 tiles x 32 lanes x (16 B of codes + 8 B of group data) */
#define W4V_WARP_BYTES (2 * W4V_UMAX * 2 * (512 + 256))

static const char W4_GEMV_SRC[] =
    "/* qcore w4a16 GEMV: y[m,n] = x[m,k] . W4[n,k]^T, m <= 16, bf16 x, mma.sync on exact (q - z) */\n" W4_DEV_COMMON
    "#define W4G_WARPS 8\n"
    "#define W4G_WANT 2048\n"
    "__device__ __forceinline__ int w4_gemv_ks(ll n, ll k, ll g) {\n"
    "    ll rowsets = (n + 15) / 16, ng = k / g;\n"
    "    int ks = 1;\n"
    "    while (ks < 8 && rowsets * ks < W4G_WANT && 2 * ks <= ng) ks *= 2;\n"
    "    return ks;\n"
    "}\n"
    "template <int S, int GW, bool H8>\n"
    "__device__ __forceinline__ void w4_gemv(const u16 *x, const u8 *q, const u16 *sc, const u8 *zp,\n"
    "                                        const u16 *mn, float *y, ll m, ll n, ll k, float (*red)[8][32]) {\n"
    "    /* U groups in flight per lane: 64 bytes of codes at m <= 8, less where registers run short */\n"
    "    constexpr int UB = (H8 && S != W4_ASYM) ? 8 : 4, G = 32 * GW, U = UB / GW > 0 ? UB / GW : 1;\n"
    "    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "    const ll ng = k / G;\n"
    "    const int ks = w4_gemv_ks(n, k, G), per = W4G_WARPS / ks;\n"
    "    const int rs = warp % per, kp = warp / per;\n"
    "    const ll n0 = ((ll)blockIdx.x * per + rs) * 16;\n"
    "    const bool live = n0 < n, tile1 = n0 + 8 < n;\n"
    "    /* B rows (codes and their group data) and accumulator columns of this lane, per tile */\n"
    "    const ll rb[2] = {live ? n0 + g : 0, tile1 ? n0 + 8 + g : 0};\n"
    "    const ll rc[2] = {live ? n0 + 2 * t : 0, tile1 ? n0 + 8 + 2 * t : 0};\n"
    "    const u8 *qb[2] = {q + rb[0] * (k / 2) + 4 * GW * t, q + rb[1] * (k / 2) + 4 * GW * t};\n"
    "    const u16 *sb[2] = {sc + rb[0] * ng, sc + rb[1] * ng};\n"
    "    const u8 *zb[2] = {zp + rb[0] * ng, zp + rb[1] * ng};\n"
    "    const u16 *mb[2] = {mn + rb[0] * ng, mn + rb[1] * ng};\n"
    "    const bool xg = g < m, xg8 = !H8 && g + 8 < m;\n"
    "    const u16 *x0 = x + (xg ? (ll)g * k : 0) + 8 * GW * t;\n"
    "    const u16 *x8 = x + (xg8 ? (ll)(g + 8) * k : 0) + 8 * GW * t;\n"
    "    float acc[2][4];\n"
    "#pragma unroll\n"
    "    for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++) acc[T][e] = 0.f;\n"
    "    if (live) {\n"
    "        for (int s0 = kp; s0 < (int)ng; s0 += ks * U) {\n"
    "            /* meta: the f16 scale of this lane's B row, its zero (asym) or f16 min (fmin) above */\n"
    "            u32 wq[U][2][GW], meta[U][2];\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < U; u++) {\n"
    "                const int gi0 = s0 + ks * u, gi = gi0 < (int)ng ? gi0 : s0;\n"
    "#pragma unroll\n"
    "                for (int T = 0; T < 2; T++) {\n"
    "                    w4_ldq<GW>(qb[T] + gi * (G / 2), wq[u][T]);\n"
    "                    meta[u][T] = __ldg(sb[T] + gi);\n"
    "                    if (S == W4_ASYM) meta[u][T] |= (u32)__ldg(zb[T] + gi) << 16;\n"
    "                    if (S == W4_FMIN) meta[u][T] |= (u32)__ldg(mb[T] + gi) << 16;\n"
    "                }\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < U; u++) {\n"
    "                const int gi = s0 + ks * u;\n"
    "                if (gi >= (int)ng) break; /* uniform across the warp */\n"
    "                float part[2][4], xs[4] = {0.f, 0.f, 0.f, 0.f};\n"
    "#pragma unroll\n"
    "                for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "                    for (int e = 0; e < 4; e++) part[T][e] = 0.f;\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < GW; j++) {\n"
    "                    const int off = gi * G + 8 * j;\n"
    "                    uint4 v0 = xg ? __ldg((const uint4 *)(x0 + off)) : make_uint4(0, 0, 0, 0);\n"
    "                    uint4 v8 = xg8 ? __ldg((const uint4 *)(x8 + off)) : make_uint4(0, 0, 0, 0);\n"
    "                    u32 a[4], a8[4] = {0, 0, 0, 0};\n"
    "                    w4_xperm(v0, a);\n"
    "                    if (!H8) w4_xperm(v8, a8);\n"
    "#pragma unroll\n"
    "                    for (int T = 0; T < 2; T++) {\n"
    "                        u32 b[4];\n"
    "                        w4_deq(wq[u][T][j], S == W4_ASYM ? w4_negz(meta[u][T] >> 16) : W4_NEG136, b);\n"
    "                        w4_mma(part[T], a[0], a8[0], a[1], a8[1], b[0], b[1]);\n"
    "                        w4_mma(part[T], a[2], a8[2], a[3], a8[3], b[2], b[3]);\n"
    "                    }\n"
    "                    if (S == W4_FMIN) {\n"
    "                        w4_mma(xs, a[0], a8[0], a[1], a8[1], W4_ONES, W4_ONES);\n"
    "                        w4_mma(xs, a[2], a8[2], a[3], a8[3], W4_ONES, W4_ONES);\n"
    "                    }\n"
    "                }\n"
    "                /* accumulator columns 2t, 2t+1 are the B rows of lanes 8t and 8t + 4 */\n"
    "#pragma unroll\n"
    "                for (int T = 0; T < 2; T++) {\n"
    "                    const u32 c0 = __shfl_sync(0xffffffffu, meta[u][T], 8 * t);\n"
    "                    const u32 c1 = __shfl_sync(0xffffffffu, meta[u][T], 8 * t + 4);\n"
    "#pragma unroll\n"
    "                    for (int e = 0; e < 4; e++) {\n"
    "                        if (H8 && e >= 2) continue;\n"
    "                        const u32 c = (e & 1) ? c1 : c0;\n"
    "                        const float s = w4_h2f((u16)(c & 0xffffu));\n"
    "                        if (S == W4_FMIN) {\n"
    "                            const float mc = fmaf(8.f, s, w4_h2f((u16)(c >> 16)));\n"
    "                            acc[T][e] = fmaf(s, part[T][e], fmaf(mc, xs[e], acc[T][e]));\n"
    "                        } else {\n"
    "                            acc[T][e] = fmaf(s, part[T][e], acc[T][e]);\n"
    "                        }\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    if (ks > 1) { /* the K splits of a row set meet in shared memory */\n"
    "#pragma unroll\n"
    "        for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) red[warp][T * 4 + e][lane] = acc[T][e];\n"
    "        __syncthreads();\n"
    "        if (kp != 0) return;\n"
    "        for (int p = 1; p < ks; p++)\n"
    "#pragma unroll\n"
    "            for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) acc[T][e] += red[p * per + rs][T * 4 + e][lane];\n"
    "    }\n"
    "    if (!live) return;\n"
    "#pragma unroll\n"
    "    for (int T = 0; T < 2; T++) {\n"
    "        if (T == 1 && !tile1) break;\n"
    "        if (xg) *(float2 *)(y + (ll)g * n + rc[T]) = make_float2(acc[T][0], acc[T][1]);\n"
    "        if (xg8) *(float2 *)(y + (ll)(g + 8) * n + rc[T]) = make_float2(acc[T][2], acc[T][3]);\n"
    "    }\n"
    "}\n"
    /* ---- the streaming GEMV for k % 128 == 0 (see W4V below) ---- */
    "#define W4V_WANT 2048\n"
    "#define W4V_UMAX 2\n"
    "#define W4V_WARP_BYTES (2 * W4V_UMAX * 2 * (512 + 256))\n"
    "__device__ __forceinline__ int w4v_ks(ll n, ll k, int u) {\n"
    "    ll rowsets = (n + 15) / 16, nch = k / 128;\n"
    "    int ks = 1;\n"
    "    while (ks < 8 && rowsets * ks < W4V_WANT && 2 * ks * u <= nch) ks *= 2;\n"
    "    return ks;\n"
    "}\n"
    "/* 16 bytes of codes, streamed past L1; volatile so that the compiler keeps every load of a batch\n"
    " * ahead of the math instead of sinking each to its use */\n"
    "__device__ __forceinline__ uint4 w4v_ld(const u8 *p) {\n"
    "    uint4 v;\n"
    "    asm volatile(\"ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\"\n"
    "        : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "/* Swap, across lanes t and t ^ B of a quad, the words i whose bit B differs from t's: applied for B = 2\n"
    " * then B = 1 it transposes the quad's 4 x 4 words. */\n"
    "template <int B> __device__ __forceinline__ void w4v_swap(uint4 &w, int t) {\n"
    "    const bool hi = (t & B) != 0;\n"
    "    u32 s0, s1;\n"
    "    if (B == 2) { s0 = hi ? w.x : w.z; s1 = hi ? w.y : w.w; }\n"
    "    else { s0 = hi ? w.x : w.y; s1 = hi ? w.z : w.w; }\n"
    "    s0 = __shfl_xor_sync(0xffffffffu, s0, B);\n"
    "    s1 = __shfl_xor_sync(0xffffffffu, s1, B);\n"
    "    if (B == 2) { if (hi) { w.x = s0; w.y = s1; } else { w.z = s0; w.w = s1; } }\n"
    "    else { if (hi) { w.x = s0; w.z = s1; } else { w.y = s0; w.w = s1; } }\n"
    "}\n"
    "/* 8 bf16 of x through L1 (zeros for rows past m), at its use: volatile, so that ptxas does not hoist\n"
    " * a whole batch's x into registers */\n"
    "__device__ __forceinline__ uint4 w4v_ldx(const u16 *p, bool ok) {\n"
    "    uint4 v = make_uint4(0, 0, 0, 0);\n"
    "    if (ok) asm volatile(\"ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\" : \"=r\"(v.x), \"=r\"(v.y), \"=r\"(v.z), \"=r\"(v.w) : \"l\"(p));\n"
    "    return v;\n"
    "}\n"
    "/* 4 bytes global -> shared, zeros when !ok */\n"
    "__device__ __forceinline__ void w4v_cp4(unsigned dst, const void *src, bool ok) {\n"
    "    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(ok ? 4 : 0));\n"
    "}\n"
    "/* w4_deq with the 0x43004300 in a register: one lop3 per pair instead of two (ptxas takes one immediate) */\n"
    "__device__ __forceinline__ u32 w4v_pair(u32 w, u32 magic) {\n"
    "    u32 d;\n"
    "    asm(\"lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;\" : \"=r\"(d) : \"r\"(w), \"r\"(magic)); /* (w & mask) | magic */\n"
    "    return d;\n"
    "}\n"
    "__device__ __forceinline__ void w4v_deq(u32 w, u32 negz, u32 magic, u32 *b) {\n"
    "    b[0] = w4_sub(w4v_pair(w, magic), negz);\n"
    "    b[1] = w4_sub(w4v_pair(w >> 4, magic), negz);\n"
    "    b[2] = w4_sub(w4v_pair(w >> 8, magic), negz);\n"
    "    b[3] = w4_sub(w4v_pair(w >> 12, magic), negz);\n"
    "}\n"
    "__device__ __forceinline__ u32 w4v_word(const uint4 &w, int j) {\n"
    "    return j == 0 ? w.x : j == 1 ? w.y : j == 2 ? w.z : w.w;\n"
    "}\n"
    "template <int S, int P, int MT>\n"
    "__device__ __forceinline__ void w4v_gemv(const u16 *x, const u8 *q, const u16 *sc, const u8 *zp,\n"
    "                                         const u16 *mn, float *y, ll m, ll n, ll k, float (*red)[8][32],\n"
    "                                         unsigned char *wsm) {\n"
    "    /* U chunks per batch, two batches in flight: fewer at m > 8, whose x fragments need the registers, and\n"
    "     * before sm_90, where ptxas spills at two */\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "    constexpr int U = MT == 16 ? 1 : 2;\n"
    "#else\n"
    "    constexpr int U = 1;\n"
    "#endif\n"
    "    constexpr int JG = 4 / P; /* JG: word steps (k32) per group */\n"
    "    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "    /* a broadcast warp index: the compiler then knows the loop bounds are warp-uniform, so the\n"
    "     * shuffles below need no divergence handling */\n"
    "    const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);\n"
    "    const ll ng = k / (128 / P), nch = k / 128;\n"
    "    /* the split does not depend on U, so the host's grid fits whatever U this build has */\n"
    "    const int ks = w4v_ks(n, k, W4V_UMAX), per = W4G_WARPS / ks;\n"
    "    const int rs = warp % per, kp = warp / per;\n"
    "    const ll n0 = ((ll)blockIdx.x * per + rs) * 16;\n"
    "    const bool live = n0 < n, tile1 = n0 + 8 < n;\n"
    "    /* per tile: the code row of this lane (B column g), the row whose scales (and mins) it loads\n"
    "     * (P = 4: lanes 2r, 2r + 1 take row r's 4 groups; else lane r < 8) and whose zeros (lane r < 8) */\n"
    "    const u8 *qr[2];\n"
    "    ll sx[2], zx[2]; /* element index of this lane's group-data row at chunk 0 */\n"
    "    const int srow = P == 4 ? (lane >> 1) & 7 : lane & 7;\n"
    "    const bool sl = P == 4 ? lane < 16 : lane < 8, zl = lane < 8;\n"
    "#pragma unroll\n"
    "    for (int T = 0; T < 2; T++) {\n"
    "        const bool v = T ? tile1 : live;\n"
    "        const ll b = v ? n0 + 8 * T : 0;\n"
    "        qr[T] = q + (b + g) * (k / 2) + 16 * t;\n"
    "        sx[T] = (b + srow) * ng + (P == 4 ? 2 * (lane & 1) : 0);\n"
    "        zx[T] = (b + (lane & 7)) * ng;\n"
    "    }\n"
    "    u32 magic = 0x43004300u; /* bf16 pairs 128 + q; opaque, so it stays in one register */\n"
    "    asm volatile(\"\" : \"+r\"(magic));\n"
    "    const bool xg = g < m, xg8 = MT == 16 && g + 8 < m;\n"
    "    const u16 *x0 = x + (xg ? (ll)g * k : 0), *x8 = x + (xg8 ? (ll)(g + 8) * k : 0);\n"
    "    float acc[2][4];\n"
    "#pragma unroll\n"
    "    for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++) acc[T][e] = 0.f;\n"
    "    /* this warp's ring: [stage][u][T][lane] 16 B of codes, then [stage][u][T][lane] 8 B of group data (the\n"
    "     * aligned word holding the scales, then the one holding the zeros or mins); each lane reads back only\n"
    "     * the slots it filled itself, so cp.async.wait_group is the only synchronisation */\n"
    "    const unsigned rbase = (unsigned)__cvta_generic_to_shared(wsm) + warp * W4V_WARP_BYTES;\n"
    "    const unsigned ring = rbase + 16 * lane, rmeta = rbase + 2 * W4V_UMAX * 2 * 512 + 8 * lane;\n"
    "    /* one batch: U chunks (128 codes of 16 rows) by cp.async, 16 B per lane and tile, and each chunk's group\n"
    "     * data, one 4-byte word per lane and kind.  A chunk past k repeats chunk cb with zeroed group data (scale\n"
    "     * 0: it adds nothing), so the math needs no branch. */\n"
    "    auto issue = [&](ll cb, int st) {\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) {\n"
    "            const bool in = cb + u < nch;\n"
    "            const ll c = in ? cb + u : cb;\n"
    "#pragma unroll\n"
    "            for (int T = 0; T < 2; T++) {\n"
    "                const int slot = (st * U + u) * 2 + T;\n"
    "                asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" ::\"r\"(ring + slot * 512),\n"
    "                             \"l\"(qr[T] + c * 64));\n"
    "                const ll is = sx[T] + (P == 1 ? c : P * c);\n"
    "                w4v_cp4(rmeta + slot * 256, sc + (P == 1 ? is & ~1LL : is), sl && in);\n"
    "                if (S == W4_FMIN) w4v_cp4(rmeta + slot * 256 + 4, mn + (P == 1 ? is & ~1LL : is), sl && in);\n"
    "                if (S == W4_ASYM) w4v_cp4(rmeta + slot * 256 + 4, zp + ((zx[T] + P * c) & ~3LL), zl && in);\n"
    "            }\n"
    "        }\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    };\n"
    "    if (live) {\n"
    "        const ll step = (ll)ks * U;\n"
    "        issue((ll)kp * U, 0);\n"
    "        int st = 0;\n"
    "        for (ll cb = (ll)kp * U; cb < nch; cb += step, st ^= 1) {\n"
    "            /* the next batch streams in while this one is used */\n"
    "            const bool more = cb + step < nch;\n"
    "            if (more) {\n"
    "                if (st) issue(cb + step, 0);\n"
    "                else issue(cb + step, 1);\n"
    "                asm volatile(\"cp.async.wait_group 1;\\n\" ::);\n"
    "            } else {\n"
    "                asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int u = 0; u < U; u++) {\n"
    "                const ll c = cb + u < nch ? cb + u : cb;\n"
    "                uint4 wq[2];\n"
    "                u32 msu[2], mzu[2];\n"
    "#pragma unroll\n"
    "                for (int T = 0; T < 2; T++) {\n"
    "                    asm volatile(\"ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "                                 : \"=r\"(wq[T].x), \"=r\"(wq[T].y), \"=r\"(wq[T].z), \"=r\"(wq[T].w)\n"
    "                                 : \"r\"(ring + ((st * U + u) * 2 + T) * 512));\n"
    "                    const unsigned ms = rmeta + ((st * U + u) * 2 + T) * 256;\n"
    "                    asm volatile(\"ld.shared.v2.u32 {%0,%1}, [%2];\\n\" : \"=r\"(msu[T]), \"=r\"(mzu[T]) : \"r\"(ms));\n"
    "                    /* the loaded words are aligned: bring this lane's own entries to the low end */\n"
    "                    if (P == 1) msu[T] >>= 16 * (int)((sx[T] + c) & 1);\n"
    "                    if (P == 1 && S == W4_FMIN) mzu[T] >>= 16 * (int)((sx[T] + c) & 1);\n"
    "                    if (S == W4_ASYM) mzu[T] >>= 8 * (int)((zx[T] + P * c) & 3);\n"
    "                }\n"
    "                /* lane t's word j must cover the same 32 codes' group for all 4 lanes: transpose\n"
    "                 * the quad's words where a lane's 16 bytes hold more than one group */\n"
    "                u32 sw[2][2], mw[2][2], zw[2];\n"
    "#pragma unroll\n"
    "                for (int T = 0; T < 2; T++) {\n"
    "                    if (P >= 2) w4v_swap<2>(wq[T], t);\n"
    "                    if (P == 4) w4v_swap<1>(wq[T], t);\n"
    "                    if (S == W4_ASYM) zw[T] = __shfl_sync(0xffffffffu, mzu[T], g); /* zeros of B row g */\n"
    "                }\n"
    "                float part[2][4], xs[4];\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < 4; j++) {\n"
    "                    const int gq = j / JG; /* group of word step j within the chunk */\n"
    "                    if (P == 4 ? j % 2 == 0 : j == 0) {\n"
    "                        /* the scale words of accumulator columns 2t, 2t + 1 (tile rows 2t, 2t + 1): lanes\n"
    "                         * 2r + qp hold row r's groups 2 qp, 2 qp + 1 at P = 4, lane r row r's otherwise */\n"
    "#pragma unroll\n"
    "                        for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "                            for (int h = 0; h < 2; h++) {\n"
    "                                const int src = P == 4 ? 2 * (2 * t + h) + (j >> 1) : 2 * t + h;\n"
    "                                sw[T][h] = __shfl_sync(0xffffffffu, msu[T], src);\n"
    "                                if (S == W4_FMIN) mw[T][h] = __shfl_sync(0xffffffffu, mzu[T], src);\n"
    "                            }\n"
    "                    }\n"
    "                    if (j % JG == 0) {\n"
    "#pragma unroll\n"
    "                        for (int e = 0; e < 4; e++) part[0][e] = part[1][e] = xs[e] = 0.f;\n"
    "                    }\n"
    "                    /* word j of lane t after the swaps holds the chunk's codes 8 wi .. 8 wi + 7 */\n"
    "                    const int d = (j ^ t) & 2;\n"
    "                    const int wi = P == 1 ? 4 * t + j : P == 2 ? 4 * (t ^ d) + (j ^ d) : 4 * j + t;\n"
    "                    const ll off = c * 128 + 8 * wi;\n"
    "                    u32 a[4], a8[4] = {0, 0, 0, 0};\n"
    "                    w4_xperm(w4v_ldx(x0 + off, xg), a);\n"
    "                    if (MT == 16) w4_xperm(w4v_ldx(x8 + off, xg8), a8);\n"
    "#pragma unroll\n"
    "                    for (int T = 0; T < 2; T++) {\n"
    "                        u32 b[4];\n"
    "                        w4v_deq(w4v_word(wq[T], j), S == W4_ASYM ? w4_negz((zw[T] >> (8 * gq)) & 0xffu) : W4_NEG136,\n"
    "                                magic, b);\n"
    "                        w4_mma(part[T], a[0], a8[0], a[1], a8[1], b[0], b[1]);\n"
    "                        w4_mma(part[T], a[2], a8[2], a[3], a8[3], b[2], b[3]);\n"
    "                    }\n"
    "                    if (S == W4_FMIN) {\n"
    "                        w4_mma(xs, a[0], a8[0], a[1], a8[1], W4_ONES, W4_ONES);\n"
    "                        w4_mma(xs, a[2], a8[2], a[3], a8[3], W4_ONES, W4_ONES);\n"
    "                    }\n"
    "                    if (j % JG == JG - 1) { /* the group is complete: scale it into the sums */\n"
    "                        const int sh = P == 4 ? 16 * (gq & 1) : P == 2 ? 16 * gq : 0;\n"
    "#pragma unroll\n"
    "                        for (int T = 0; T < 2; T++) {\n"
    "                            const float s0 = w4_h2f((u16)(sw[T][0] >> sh)), s1 = w4_h2f((u16)(sw[T][1] >> sh));\n"
    "                            if (S == W4_FMIN) {\n"
    "                                const float c0 = fmaf(8.f, s0, w4_h2f((u16)(mw[T][0] >> sh)));\n"
    "                                const float c1 = fmaf(8.f, s1, w4_h2f((u16)(mw[T][1] >> sh)));\n"
    "                                acc[T][0] = fmaf(s0, part[T][0], fmaf(c0, xs[0], acc[T][0]));\n"
    "                                acc[T][1] = fmaf(s1, part[T][1], fmaf(c1, xs[1], acc[T][1]));\n"
    "                                if (MT == 16) {\n"
    "                                    acc[T][2] = fmaf(s0, part[T][2], fmaf(c0, xs[2], acc[T][2]));\n"
    "                                    acc[T][3] = fmaf(s1, part[T][3], fmaf(c1, xs[3], acc[T][3]));\n"
    "                                }\n"
    "                            } else {\n"
    "                                acc[T][0] = fmaf(s0, part[T][0], acc[T][0]);\n"
    "                                acc[T][1] = fmaf(s1, part[T][1], acc[T][1]);\n"
    "                                if (MT == 16) {\n"
    "                                    acc[T][2] = fmaf(s0, part[T][2], acc[T][2]);\n"
    "                                    acc[T][3] = fmaf(s1, part[T][3], acc[T][3]);\n"
    "                                }\n"
    "                            }\n"
    "                        }\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        asm volatile(\"cp.async.wait_all;\\n\" ::); /* nothing may land in the rings after this */\n"
    "    }\n"
    "    if (ks > 1) { /* the K splits of a row set meet in shared memory, where the rings were */\n"
    "        __syncthreads(); /* every warp is done with its ring */\n"
    "#pragma unroll\n"
    "        for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) red[warp][T * 4 + e][lane] = acc[T][e];\n"
    "        __syncthreads();\n"
    "        if (kp != 0) return;\n"
    "        for (int p = 1; p < ks; p++)\n"
    "#pragma unroll\n"
    "            for (int T = 0; T < 2; T++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) acc[T][e] += red[p * per + rs][T * 4 + e][lane];\n"
    "    }\n"
    "    if (!live) return;\n"
    "#pragma unroll\n"
    "    for (int T = 0; T < 2; T++) {\n"
    "        if (T == 1 && !tile1) break;\n"
    "        const ll col = n0 + 8 * T + 2 * t;\n"
    "        if (xg) *(float2 *)(y + (ll)g * n + col) = make_float2(acc[T][0], acc[T][1]);\n"
    "        if (xg8) *(float2 *)(y + (ll)(g + 8) * n + col) = make_float2(acc[T][2], acc[T][3]);\n"
    "    }\n"
    "}\n"
    "template <int S>\n"
    "__device__ __forceinline__ void w4_gemv_go(const u16 *x, const u8 *q, const u16 *sc, const u8 *zp,\n"
    "                                           const u16 *mn, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    /* dynamic: the streaming path's rings, or the K splits' partial sums (red) */\n"
    "    extern __shared__ __align__(16) unsigned char wsm[];\n"
    "    float (*red)[8][32] = (float (*)[8][32])wsm;\n"
    "    if (m <= 0 || m > 16 || n <= 0 || k <= 0) return;\n"
    "    const bool h8 = m <= 8;\n"
    "    if (k % 128 == 0) {\n"
    "        if (gs == 128) {\n"
    "            if (h8) w4v_gemv<S, 1, 8>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "            else w4v_gemv<S, 1, 16>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "        } else if (gs == 64) {\n"
    "            if (h8) w4v_gemv<S, 2, 8>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "            else w4v_gemv<S, 2, 16>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "        } else if (gs == 32) {\n"
    "            if (h8) w4v_gemv<S, 4, 8>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "            else w4v_gemv<S, 4, 16>(x, q, sc, zp, mn, y, m, n, k, red, wsm);\n"
    "        }\n"
    "    } else if (gs == 128) {\n"
    "        if (h8) w4_gemv<S, 4, true>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "        else w4_gemv<S, 4, false>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "    } else if (gs == 64) {\n"
    "        if (h8) w4_gemv<S, 2, true>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "        else w4_gemv<S, 2, false>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "    } else if (gs == 32) {\n"
    "        if (h8) w4_gemv<S, 1, true>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "        else w4_gemv<S, 1, false>(x, q, sc, zp, mn, y, m, n, k, red);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_w4_gemv_sym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_gemv_go<W4_SYM>(x, q, s, 0, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_w4_gemv_asym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u8 *z, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_gemv_go<W4_ASYM>(x, q, s, z, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 2) qc_w4_gemv_fmin(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u16 *mn, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_gemv_go<W4_FMIN>(x, q, s, 0, mn, y, m, n, k, gs);\n"
    "}\n";

/*
 * Prefill GEMM (m >= 17): a 128 x 128 output tile per block of 8 warps (2 x 4,
 * 64 x 32 each: 4 m16 x 4 n8 mma tiles), K in tiles of 128 through a
 * 3-stage cp.async ring holding x (bf16, [128][128], rows padded to 272 B)
 * and the packed codes ([128][64 B], rows padded to 80 B) as they are in
 * memory.  Warps build the fragments from shared memory as the GEMV does from
 * global memory (one group of codes per quad load, x permuted to match) and
 * scale each group's partial sums into the accumulators; a group's scale,
 * zero or minimum is loaded one K tile ahead into registers.  Tiles are
 * ordered in groups of 8 row tiles so that neighbouring blocks share W in L2.
 * Rows past m, columns past n and K past k are zero-filled and not stored.
 */
#define W4M_ST 3
#define W4M_XS 272 /* bytes per x row in shared memory (256 + 16 against bank conflicts) */
#define W4M_WS 80  /* bytes per code row (64 + 16) */
#define W4M_STAGE (128 * W4M_XS + 128 * W4M_WS)
#define W4M_SMEM (W4M_ST * W4M_STAGE)

static const char W4_MMA_SRC[] =
    "/* qcore w4a16 GEMM: y[m,n] = x[m,k] . W4[n,k]^T, bf16 x, mma.sync on exact (q - z), 128x128 tiles */\n" W4_DEV_COMMON
    "#define W4M_ST 3\n"
    "#define W4M_XS 272\n"
    "#define W4M_WS 80\n"
    "#define W4M_STAGE (128 * W4M_XS + 128 * W4M_WS)\n"
    "#define W4M_GROUP 8\n"
    "__device__ __forceinline__ void w4_cp16(unsigned dst, const void *src, bool valid) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(valid ? 16 : 0));\n"
    "}\n"
    "template <int S, int GW>\n"
    "__device__ __forceinline__ void w4_mma_gemm(const u16 *x, const u8 *q, const u16 *sc, const u8 *zp,\n"
    "                                            const u16 *mn, float *y, ll m, ll n, ll k, unsigned char *smem) {\n"
    "    constexpr int G = 32 * GW, GT = 128 / G; /* groups per K tile */\n"
    "    /* group data one K tile ahead, except for fmin, which has no registers to spare */\n"
    "    constexpr bool PF = S != W4_FMIN;\n"
    "    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;\n"
    "    const int wm = warp >> 2, wn = warp & 3;\n"
    "    const ll tiles_m = (m + 127) / 128, tiles_n = (n + 127) / 128;\n"
    "    const ll bid = blockIdx.x, per_group = (ll)W4M_GROUP * tiles_n;\n"
    "    const ll first_m = bid / per_group * W4M_GROUP, in_g = bid % per_group;\n"
    "    const ll gsz = tiles_m - first_m < W4M_GROUP ? tiles_m - first_m : W4M_GROUP;\n"
    "    const ll row0 = (first_m + in_g % gsz) * 128, col0 = in_g / gsz * 128;\n"
    "    const int kt_n = (int)((k + 127) / 128), ng = (int)(k / G);\n"
    "    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);\n"
    "    /* one stage: x 2048 chunks of 16 B (8 per thread), codes 512 (2 per thread) */\n"
    "    auto load = [&](int stage, int kt) {\n"
    "        const unsigned sx = sbase + stage * W4M_STAGE, sw = sx + 128 * W4M_XS;\n"
    "        const ll k0 = (ll)kt * 128;\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 8; i++) {\n"
    "            const int idx = tid + 256 * i, r = idx >> 4, c = idx & 15;\n"
    "            const bool ok = row0 + r < m && k0 + 8 * c < k;\n"
    "            w4_cp16(sx + r * W4M_XS + 16 * c, ok ? (const void *)(x + (row0 + r) * k + k0 + 8 * c) : (const void *)x, ok);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 2; i++) {\n"
    "            const int idx = tid + 256 * i, r = idx >> 2, c = idx & 3;\n"
    "            const bool ok = col0 + r < n && k0 + 32 * c < k;\n"
    "            w4_cp16(sw + r * W4M_WS + 16 * c, ok ? (const void *)(q + (col0 + r) * (k / 2) + k0 / 2 + 16 * c) : (const void *)q, ok);\n"
    "        }\n"
    "    };\n"
    "    /* group data of this lane's B rows (wn*32 + nj*8 + g), one K tile ahead */\n"
    "    const u16 *sb[4];\n"
    "    const u8 *zb[4];\n"
    "    const u16 *mb[4];\n"
    "#pragma unroll\n"
    "    for (int nj = 0; nj < 4; nj++) {\n"
    "        ll r = col0 + wn * 32 + nj * 8 + g;\n"
    "        r = r < n ? r : n - 1;\n"
    "        sb[nj] = sc + r * ng;\n"
    "        zb[nj] = zp + r * ng;\n"
    "        mb[nj] = mn + r * ng;\n"
    "    }\n"
    "    u32 meta[GT][4], metan[GT][4];\n"
    "    auto load_meta = [&](int kt, u32 (*mt)[4]) {\n"
    "#pragma unroll\n"
    "        for (int gq = 0; gq < GT; gq++) {\n"
    "            int gi = kt * GT + gq;\n"
    "            gi = gi < ng ? gi : ng - 1;\n"
    "#pragma unroll\n"
    "            for (int nj = 0; nj < 4; nj++) {\n"
    "                u32 v = __ldg(sb[nj] + gi);\n"
    "                if (S == W4_ASYM) v |= (u32)__ldg(zb[nj] + gi) << 16;\n"
    "                if (S == W4_FMIN) v |= (u32)__ldg(mb[nj] + gi) << 16;\n"
    "                mt[gq][nj] = v;\n"
    "            }\n"
    "        }\n"
    "    };\n"
    "    float acc[4][4][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;\n"
    "#pragma unroll\n"
    "    for (int st = 0; st < W4M_ST - 1; st++) {\n"
    "        if (st < kt_n) load(st, st);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    }\n"
    "    if (PF) load_meta(0, meta);\n"
    "    for (int kt = 0; kt < kt_n; kt++) {\n"
    "        asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(W4M_ST - 2));\n"
    "        __syncthreads(); /* tile kt is in; every warp is done with tile kt - 1's stage */\n"
    "        if (kt + W4M_ST - 1 < kt_n) load((kt + W4M_ST - 1) % W4M_ST, kt + W4M_ST - 1);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "        if (PF && kt + 1 < kt_n) load_meta(kt + 1, metan);\n"
    "        if (!PF) load_meta(kt, meta);\n"
    "        const unsigned char *xs = smem + (kt % W4M_ST) * W4M_STAGE;\n"
    "        const unsigned char *ws = xs + 128 * W4M_XS;\n"
    "#pragma unroll\n"
    "        for (int gq = 0; gq < GT; gq++) {\n"
    "            if ((ll)kt * 128 + gq * G >= k) break; /* uniform: the K tail */\n"
    "            float part[4][4][4], xsum[4][2]; /* xsum: rows g and g + 8 (all columns alike) */\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "                for (int e = 0; e < 4; e++) {\n"
    "                    if (e < 2) xsum[i][e] = 0.f;\n"
    "#pragma unroll\n"
    "                    for (int j = 0; j < 4; j++) part[i][j][e] = 0.f;\n"
    "                }\n"
    "#pragma unroll (S == W4_FMIN ? 1 : GW) /* fmin: one word at a time, its registers are short */\n"
    "            for (int j = 0; j < GW; j++) {\n"
    "                u32 b[4][4];\n"
    "#pragma unroll\n"
    "                for (int nj = 0; nj < 4; nj++)\n"
    "                    w4_deq(*(const u32 *)(ws + (wn * 32 + nj * 8 + g) * W4M_WS + gq * (G / 2) + 4 * GW * t + 4 * j),\n"
    "                           S == W4_ASYM ? w4_negz(meta[gq][nj] >> 16) : W4_NEG136, b[nj]);\n"
    "#pragma unroll\n"
    "                for (int mi = 0; mi < 4; mi++) {\n"
    "                    const unsigned char *p = xs + (wm * 64 + mi * 16 + g) * W4M_XS + 2 * (gq * G + 8 * GW * t + 8 * j);\n"
    "                    u32 a[4], a8[4];\n"
    "                    w4_xperm(*(const uint4 *)p, a);\n"
    "                    w4_xperm(*(const uint4 *)(p + 8 * W4M_XS), a8);\n"
    "#pragma unroll\n"
    "                    for (int nj = 0; nj < 4; nj++) {\n"
    "                        w4_mma(part[mi][nj], a[0], a8[0], a[1], a8[1], b[nj][0], b[nj][1]);\n"
    "                        w4_mma(part[mi][nj], a[2], a8[2], a[3], a8[3], b[nj][2], b[nj][3]);\n"
    "                    }\n"
    "                    if (S == W4_FMIN) {\n"
    "                        float xt[4] = {0.f, 0.f, 0.f, 0.f};\n"
    "                        w4_mma(xt, a[0], a8[0], a[1], a8[1], W4_ONES, W4_ONES);\n"
    "                        w4_mma(xt, a[2], a8[2], a[3], a8[3], W4_ONES, W4_ONES);\n"
    "                        xsum[mi][0] += xt[0];\n"
    "                        xsum[mi][1] += xt[2];\n"
    "                    }\n"
    "                }\n"
    "            }\n"
    "            /* accumulator columns 2t, 2t+1 of an n8 tile are the B rows of lanes 8t and 8t + 4 */\n"
    "#pragma unroll\n"
    "            for (int nj = 0; nj < 4; nj++) {\n"
    "                const u32 c0 = __shfl_sync(0xffffffffu, meta[gq][nj], 8 * t);\n"
    "                const u32 c1 = __shfl_sync(0xffffffffu, meta[gq][nj], 8 * t + 4);\n"
    "                const float s0 = w4_h2f((u16)(c0 & 0xffffu)), s1 = w4_h2f((u16)(c1 & 0xffffu));\n"
    "                float m0 = 0.f, m1 = 0.f;\n"
    "                if (S == W4_FMIN) {\n"
    "                    m0 = fmaf(8.f, s0, w4_h2f((u16)(c0 >> 16)));\n"
    "                    m1 = fmaf(8.f, s1, w4_h2f((u16)(c1 >> 16)));\n"
    "                }\n"
    "#pragma unroll\n"
    "                for (int mi = 0; mi < 4; mi++)\n"
    "#pragma unroll\n"
    "                    for (int e = 0; e < 4; e++) {\n"
    "                        const float s = (e & 1) ? s1 : s0;\n"
    "                        if (S == W4_FMIN)\n"
    "                            acc[mi][nj][e] = fmaf(s, part[mi][nj][e], fmaf((e & 1) ? m1 : m0, xsum[mi][e >> 1], acc[mi][nj][e]));\n"
    "                        else\n"
    "                            acc[mi][nj][e] = fmaf(s, part[mi][nj][e], acc[mi][nj][e]);\n"
    "                    }\n"
    "            }\n"
    "        }\n"
    "        if (PF && kt + 1 < kt_n) {\n"
    "#pragma unroll\n"
    "            for (int gq = 0; gq < GT; gq++)\n"
    "#pragma unroll\n"
    "                for (int nj = 0; nj < 4; nj++) meta[gq][nj] = metan[gq][nj];\n"
    "        }\n"
    "    }\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "#pragma unroll\n"
    "    for (int mi = 0; mi < 4; mi++)\n"
    "#pragma unroll\n"
    "        for (int nj = 0; nj < 4; nj++)\n"
    "#pragma unroll\n"
    "            for (int h = 0; h < 2; h++) {\n"
    "                const ll r = row0 + wm * 64 + mi * 16 + g + 8 * h, cn = col0 + wn * 32 + nj * 8 + 2 * t;\n"
    "                if (r < m && cn < n) *(float2 *)(y + r * n + cn) = make_float2(acc[mi][nj][2 * h], acc[mi][nj][2 * h + 1]);\n"
    "            }\n"
    "}\n"
    "template <int S>\n"
    "__device__ __forceinline__ void w4_mma_go(const u16 *x, const u8 *q, const u16 *sc, const u8 *zp,\n"
    "                                          const u16 *mn, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    extern __shared__ __align__(128) unsigned char smem[];\n"
    "    if (m <= 0 || n <= 0 || k <= 0) return;\n"
    "    if (gs == 128) w4_mma_gemm<S, 4>(x, q, sc, zp, mn, y, m, n, k, smem);\n"
    "    else if (gs == 64) w4_mma_gemm<S, 2>(x, q, sc, zp, mn, y, m, n, k, smem);\n"
    "    else if (gs == 32) w4_mma_gemm<S, 1>(x, q, sc, zp, mn, y, m, n, k, smem);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 1) qc_w4_mma_sym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_mma_go<W4_SYM>(x, q, s, 0, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 1) qc_w4_mma_asym(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u8 *z, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_mma_go<W4_ASYM>(x, q, s, z, 0, y, m, n, k, gs);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 1) qc_w4_mma_fmin(const u16 *x, const u8 *q, const u16 *s,\n"
    "        const u16 *mn, float *y, ll m, ll n, ll k, ll gs) {\n"
    "    w4_mma_go<W4_FMIN>(x, q, s, 0, mn, y, m, n, k, gs);\n"
    "}\n";

static void w4_mma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t tm = p->m > 0 ? (p->m + 127) / 128 : 0, tn = p->n > 0 ? (p->n + 127) / 128 : 0;
    int64_t tiles = tm * tn;
    d->grid[0] = tiles > 0 && tiles <= 0x7fffffffLL ? (uint32_t)tiles : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = W4M_SMEM;
}

/* The device's choice of K splits, kept in step with w4_gemv_ks above. */
static int w4_gemv_ks(int64_t n, int64_t k, int64_t g) {
    int64_t rowsets = (n + 15) / 16, ng = k / g;
    int ks = 1;
    while (ks < 8 && rowsets * ks < W4G_WANT && 2 * ks <= ng) ks *= 2;
    return ks;
}

/* The same for the streaming path (k % 128 == 0), kept in step with w4v_ks. */
static int w4v_ks(int64_t n, int64_t k, int u) {
    int64_t rowsets = (n + 15) / 16, nch = k / 128;
    int ks = 1;
    while (ks < 8 && rowsets * ks < W4V_WANT && 2 * ks * u <= nch) ks *= 2;
    return ks;
}

static void w4_gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t g = p->group_size ? p->group_size : W4A16_DEFAULT_GROUP;
    if (p->m <= 0 || p->n <= 0 || p->k < g) return;
    int per = W4G_WARPS / (p->k % 128 == 0 ? w4v_ks(p->n, p->k, W4V_UMAX) : w4_gemv_ks(p->n, p->k, g));
    int64_t blocks = ((p->n + 15) / 16 + per - 1) / per;
    d->grid[0] = blocks <= 0x7fffffffLL ? (uint32_t)blocks : 0;
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 32 * W4G_WARPS;
    d->block[1] = d->block[2] = 1;
    /* the rings of the k % 128 == 0 path, else only the K splits' partial sums */
    d->shared_bytes = p->k % 128 == 0 ? W4G_WARPS * W4V_WARP_BYTES : W4G_WARPS * 8 * 32 * 4;
}

/* ---- C references: exactly each kernel's parameters, x as bf16 bits ---- */

void w4_ref_bx(uint32_t scheme, int bf16_weights, const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales,
               const uint8_t *zeros, const uint16_t *mins, float *y, int64_t m, int64_t n, int64_t k,
               int64_t group_size) {
    /* the host checks eligibility first; this only keeps a bad call in bounds */
    if (!xb || !qweight || !scales || !y || m <= 0 || group_size <= 0 || group_size > 128 ||
        !w4_shape_ok(n, k, (uint32_t)group_size, NULL) || (size_t)m > SIZE_MAX / sizeof(float) / (size_t)k)
        return;
    if ((scheme == W4A16_SCHEME_ASYM && !zeros) || (scheme == W4A16_SCHEME_FMIN && !mins)) return;
    float *x = malloc((size_t)m * (size_t)k * sizeof(float));
    if (!x) return;
    for (size_t i = 0; i < (size_t)m * (size_t)k; i++) x[i] = qc_bf16_to_f32(xb[i]);
    w4_view v = {.n = n, .k = k, .g = (uint32_t)group_size, .scheme = scheme, .ng = k / group_size,
                 .q = qweight, .s = scales, .z = zeros, .mn = mins, .bf16_weights = bf16_weights};
    w4_linear(&v, x, y, m);
    free(x);
}

static void w4_ref_sym_bx(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, float *y, int64_t m,
                          int64_t n, int64_t k, int64_t group_size) {
    w4_ref_bx(W4A16_SCHEME_SYM, 0, xb, qweight, scales, NULL, NULL, y, m, n, k, group_size);
}
static void w4_ref_asym_bx(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint8_t *zeros,
                           float *y, int64_t m, int64_t n, int64_t k, int64_t group_size) {
    w4_ref_bx(W4A16_SCHEME_ASYM, 0, xb, qweight, scales, zeros, NULL, y, m, n, k, group_size);
}
static void w4_ref_fmin_bx(const uint16_t *xb, const uint8_t *qweight, const uint16_t *scales, const uint16_t *mins,
                           float *y, int64_t m, int64_t n, int64_t k, int64_t group_size) {
    w4_ref_bx(W4A16_SCHEME_FMIN, 0, xb, qweight, scales, NULL, mins, y, m, n, k, group_size);
}

/* ---- eligibility ---- */

/* What every w4a16 GPU kernel needs beyond the format's shape rules: its own
 * scheme (no act-order permutation yet) and the weight's real group size. */
int w4_gpu_takes(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    uint32_t s = p->struct_size >= offsetof(qc_problem, scheme) + sizeof p->scheme ? p->scheme : 0;
    if (s == 0) s = W4A16_SCHEME_SYM;
    if (w4_scheme_ok(s) && (s & W4A16_SCHEME_PERM) && W4A16_SCHEME_BASE(s) == want) {
        w4_why(why, "perm", "%s does not take act-order weights (scheme %s): the stored K order needs x permuted",
               id, w4_scheme_name(s));
        return 0;
    }
    if (s != want) {
        w4_why(why, "scheme", "%s takes scheme %s, the weight is %s (0x%x)", id, w4_scheme_name(want),
               w4_scheme_name(s), s);
        return 0;
    }
    if (!w4_group_ok(p->group_size)) {
        w4_why(why, "group", "%s needs the weight's group size (32, 64 or 128), problem has %u", id, p->group_size);
        return 0;
    }
    if (!w4_shape_ok(p->n, p->k, p->group_size, why)) return 0;
    return 1;
}

static int w4_gemv_ok(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    if (!w4_gpu_takes(p, want, id, why)) return 0;
    if ((p->n + 15) / 16 > 0x7fffffffLL) {
        w4_why(why, "shape", "%s: n = %lld needs more blocks than a grid holds", id, (long long)p->n);
        return 0;
    }
    return 1;
}

#define W4_GPU_ELIGIBLE(fn, check, sch, id) \
    static int fn(const qc_problem *p, qc_reason *why) { return check(p, (sch), (id), why); }
W4_GPU_ELIGIBLE(w4_el_gemv_sym, w4_gemv_ok, W4A16_SCHEME_SYM, "w4a16.gemv_sym")
W4_GPU_ELIGIBLE(w4_el_gemv_asym, w4_gemv_ok, W4A16_SCHEME_ASYM, "w4a16.gemv_asym")
W4_GPU_ELIGIBLE(w4_el_gemv_fmin, w4_gemv_ok, W4A16_SCHEME_FMIN, "w4a16.gemv_fmin")

static int w4_mma_ok(const qc_problem *p, uint32_t want, const char *id, qc_reason *why) {
    if (!w4_gpu_takes(p, want, id, why)) return 0;
    if (p->m < 1 || ((p->m + 127) / 128) > 0x7fffffffLL / ((p->n + 127) / 128)) {
        w4_why(why, "m_range", "%s: m = %lld gives more 128x128 tiles than a grid holds", id, (long long)p->m);
        return 0;
    }
    return 1;
}
W4_GPU_ELIGIBLE(w4_el_mma_sym, w4_mma_ok, W4A16_SCHEME_SYM, "w4a16.mma_sym")
W4_GPU_ELIGIBLE(w4_el_mma_asym, w4_mma_ok, W4A16_SCHEME_ASYM, "w4a16.mma_asym")
W4_GPU_ELIGIBLE(w4_el_mma_fmin, w4_mma_ok, W4A16_SCHEME_FMIN, "w4a16.mma_fmin")

/* ---- parameters and registration ---- */

#define GP_HEAD W4_GP_HEAD
#define GP_TAIL W4_GP_TAIL
static const qc_kernel_param w4_gp_sym[] = {GP_HEAD, GP_TAIL};
static const qc_kernel_param w4_gp_asym[] = {GP_HEAD, {"w.zeros", QC_PARAM_PTR}, GP_TAIL};
static const qc_kernel_param w4_gp_fmin[] = {GP_HEAD, {"w.mins", QC_PARAM_PTR}, GP_TAIL};

typedef struct w4_gpu_row {
    const char *id, *entry, *source;
    const qc_kernel_param *params;
    uint32_t n_params;
    void (*reference)(void);
    int (*eligible)(const qc_problem *, qc_reason *);
    void (*dims)(const qc_problem *, qc_launch_dims *);
    int64_t m_min, m_max;
    qc_arch_range arch;
} w4_gpu_row;

#define W4_GROW(id, entry, src, p, ref, el, dims, mmin, mmax, a0, a1) \
    {id, entry, src, p, sizeof p / sizeof p[0], (void (*)(void))ref, el, dims, mmin, mmax, {a0, a1}}
static const w4_gpu_row w4_gpu_kernels[] = {
    W4_GROW("w4a16.gemv_sym", "qc_w4_gemv_sym", W4_GEMV_SRC, w4_gp_sym, w4_ref_sym_bx, w4_el_gemv_sym, w4_gemv_dims,
            1, 16, 80, QC_SM_ANY),
    W4_GROW("w4a16.gemv_asym", "qc_w4_gemv_asym", W4_GEMV_SRC, w4_gp_asym, w4_ref_asym_bx, w4_el_gemv_asym,
            w4_gemv_dims, 1, 16, 80, QC_SM_ANY),
    W4_GROW("w4a16.gemv_fmin", "qc_w4_gemv_fmin", W4_GEMV_SRC, w4_gp_fmin, w4_ref_fmin_bx, w4_el_gemv_fmin,
            w4_gemv_dims, 1, 16, 80, QC_SM_ANY),
    /* m_min 17: above the GEMV's range; it runs any m >= 1 */
    W4_GROW("w4a16.mma_sym", "qc_w4_mma_sym", W4_MMA_SRC, w4_gp_sym, w4_ref_sym_bx, w4_el_mma_sym, w4_mma_dims, 17, 0,
            80, QC_SM_ANY),
    W4_GROW("w4a16.mma_asym", "qc_w4_mma_asym", W4_MMA_SRC, w4_gp_asym, w4_ref_asym_bx, w4_el_mma_asym, w4_mma_dims,
            17, 0, 80, QC_SM_ANY),
    W4_GROW("w4a16.mma_fmin", "qc_w4_mma_fmin", W4_MMA_SRC, w4_gp_fmin, w4_ref_fmin_bx, w4_el_mma_fmin, w4_mma_dims,
            17, 0, 80, QC_SM_ANY),
};

/* Registered after the C-only reference kernels, so CPU selection (which
 * walks kernels in registration order) keeps choosing those. */
qc_status w4_register_gpu_kernels(const qc_host_api *api, qc_host *host) {
    for (size_t i = 0; i < sizeof w4_gpu_kernels / sizeof w4_gpu_kernels[0]; i++) {
        const w4_gpu_row *r = &w4_gpu_kernels[i];
        qc_kernel_desc d = {
            .struct_size = sizeof d,
            .id = r->id,
            .format = "w4a16",
            .phases = QC_PHASE_ANY,
            .m_min = r->m_min,
            .m_max = r->m_max,
            .arch = r->arch,
            .n_params = r->n_params,
            .params = r->params,
            .reference = r->reference,
            .cuda_source = r->source,
            .cuda_entry = r->entry,
            .launch_dims = r->dims,
            .eligible = r->eligible,
        };
        qc_status st = api->register_kernel(host, &d);
        if (st != QC_OK) return st;
    }
    return QC_OK;
}
