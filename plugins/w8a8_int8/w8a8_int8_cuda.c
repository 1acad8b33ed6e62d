/* w8a8_int8_cuda.c - the w8a8_int8 GPU kernels: activation quantization, the Hopper wgmma s8 GEMM, an mma.sync s8 GEMM and a decode GEMV. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "w8a8_int8_cuda.h"
#include "qc_env_opts.h"
#include "qc_split_k.h"

/*
 * A w8a8_int8 linear runs as two launches (docs/formats/w8a8_int8.md,
 * section 9):
 *
 *   1. "w8a8_int8.quant_act" (or "w8a8_int8.quant_act_smooth" for scheme 2):
 *      x.bf16 [m,k] -> xq int8 [m,k] and xs f32 [m], the format's per-token
 *      recipe on the bf16 values (exactly the plugin's quantize_activations
 *      arithmetic: amax, one f32 division by 127, clamp, round half to even);
 *      a row with NaN or infinity gets codes 0 and xs = NaN.
 *   2. a GEMM taking "xq", "xs", "w.qweight", "w.scales", "y", "m", "n", "k":
 *      acc = the exact INT32 dot product, y = ((float)acc * xs[r]) * sw[c]
 *      with two round-to-nearest f32 multiplies, so every kernel's y equals
 *      the C reference bit for bit (the only rounding is the one the format
 *      defines).
 *
 * GEMMs: "w8a8_int8.linear_wgmma" (sm_90a: TMA, 128-byte swizzle, mbarrier
 * ring, a producer warpgroup and two consumer warpgroups of wgmma
 * m64nBNk32 s8, persistent; the layout of bf16.linear_wgmma with 128 int8
 * per swizzled row, so K steps of 128), "w8a8_int8.linear_mma" (sm_80+,
 * mma.sync m16n8k32 s8, 128x128 tiles, 4-stage cp.async ring) and
 * "w8a8_int8.gemv" / "w8a8_int8.gemv_wide" (m 1..8 / 9..16: each warp streams two rows of W once with
 * 16-byte loads and dp4a).  k tails past a multiple of the K step read as
 * zeros (TMA fill or cp.async zero fill), which adds nothing to the sums.
 */

#define I8_SCHEME_PLAIN 1u
#define I8_SCHEME_SMOOTH 2u
#define I8_K_MAX ((int64_t)(INT32_MAX / (127 * 127)))
#define WG_SMS 132
#define WG_THREADS 384
#define WG_BM 128
#define WG_BK 128
#define MM_TILE 128
#define MM_SMEM (4u * 2u * 128u * 64u) /* 4 stages of a 128x64 x tile and a 128x64 W tile */
#define GV_M_MAX 8     /* w8a8_int8.gemv */
#define GV_WIDE_MAX 16 /* w8a8_int8.gemv_wide from GV_M_MAX + 1 (where linear_wgmma does not run) */
#define GV_OUT_PER_BLOCK 16 /* 8 warps x 2 outputs */

static const char QUANT_SRC[] =
    "/* qcore w8a8_int8 activation quantization: x.bf16 [m,k] -> xq int8 [m,k], xs f32 [m], one block per row */\n"
    "typedef unsigned long long u64;\n"
    "__device__ __forceinline__ float qc_bf(unsigned h) { return __uint_as_float(h << 16); }\n"
    "/* x' = x / s (one f32 division) when smoothing, else x */\n"
    "template <bool SM> __device__ __forceinline__ float qc_xv(float v, const float *s, long long j) {\n"
    "    return SM ? __fdiv_rn(v, s[j]) : v;\n"
    "}\n"
    "/* the format's code: one f32 division, clamp to +-127, round half to even */\n"
    "__device__ __forceinline__ int qc_code(float v, float sx) {\n"
    "    float t = fminf(fmaxf(__fdiv_rn(v, sx), -127.f), 127.f);\n"
    "    return (int)rintf(t);\n"
    "}\n"
    "template <bool SM>\n"
    "__device__ __forceinline__ void qc_quant_rows(const unsigned short *x, const float *s, signed char *xq, float *xs,\n"
    "                                              long long m, long long k) {\n"
    "    __shared__ float red_max[32];\n"
    "    __shared__ float row_scale;\n"
    "    const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, wid = tid >> 5;\n"
    "    /* 16-byte loads when every row starts 16-byte aligned (k is a multiple of 16) */\n"
    "    const bool vec = ((((u64)x) | ((u64)xq) | (SM ? (u64)s : 0ull)) & 15ull) == 0 && (k & 15) == 0;\n"
    "    for (long long r = blockIdx.x; r < m; r += gridDim.x) {\n"
    "        const unsigned short *xr = x + r * k;\n"
    "        signed char *qr = xq + r * k;\n"
    "        float amax = 0.f;\n"
    "        int bad = 0;\n"
    "        if (vec) {\n"
    "            for (long long c = tid; c < (k >> 3); c += nt) {\n"
    "                uint4 u = __ldg((const uint4 *)xr + c);\n"
    "                unsigned w[4] = {u.x, u.y, u.z, u.w};\n"
    "#pragma unroll\n"
    "                for (int i = 0; i < 4; i++) {\n"
    "                    float a = qc_xv<SM>(qc_bf(w[i] & 0xffffu), s, 8 * c + 2 * i);\n"
    "                    float b = qc_xv<SM>(qc_bf(w[i] >> 16), s, 8 * c + 2 * i + 1);\n"
    "                    bad |= !isfinite(a) | !isfinite(b);\n"
    "                    amax = fmaxf(amax, fmaxf(fabsf(a), fabsf(b)));\n"
    "                }\n"
    "            }\n"
    "        } else {\n"
    "            for (long long j = tid; j < k; j += nt) {\n"
    "                float a = qc_xv<SM>(qc_bf(xr[j]), s, j);\n"
    "                bad |= !isfinite(a);\n"
    "                amax = fmaxf(amax, fabsf(a));\n"
    "            }\n"
    "        }\n"
    "        bad = __syncthreads_or(bad);\n"
    "#pragma unroll\n"
    "        for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));\n"
    "        if (lane == 0) red_max[wid] = amax;\n"
    "        __syncthreads();\n"
    "        if (tid == 0) {\n"
    "            float a = red_max[0];\n"
    "            for (int i = 1; i < (nt >> 5); i++) a = fmaxf(a, red_max[i]);\n"
    "            float sx = __fdiv_rn(a, 127.f);\n"
    "            if (!(sx > 0.f)) sx = 1.f; /* zero row (or amax/127 underflows): codes 0 */\n"
    "            /* a row with NaN or infinity: codes 0 and a NaN scale, so its outputs are NaN */\n"
    "            row_scale = bad ? __int_as_float(0x7fc00000) : sx;\n"
    "            xs[r] = row_scale;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        const float sx = row_scale;\n"
    "        if (vec) {\n"
    "            for (long long c = tid; c < (k >> 3); c += nt) {\n"
    "                uint4 u = __ldg((const uint4 *)xr + c);\n"
    "                unsigned w[4] = {u.x, u.y, u.z, u.w}, q[2] = {0u, 0u};\n"
    "#pragma unroll\n"
    "                for (int i = 0; i < 4; i++) {\n"
    "                    int a = bad ? 0 : qc_code(qc_xv<SM>(qc_bf(w[i] & 0xffffu), s, 8 * c + 2 * i), sx);\n"
    "                    int b = bad ? 0 : qc_code(qc_xv<SM>(qc_bf(w[i] >> 16), s, 8 * c + 2 * i + 1), sx);\n"
    "                    q[i >> 1] |= (((unsigned)a & 0xffu) | (((unsigned)b & 0xffu) << 8)) << (16 * (i & 1));\n"
    "                }\n"
    "                *((uint2 *)qr + c) = make_uint2(q[0], q[1]);\n"
    "            }\n"
    "        } else {\n"
    "            for (long long j = tid; j < k; j += nt) qr[j] = (signed char)(bad ? 0 : qc_code(qc_xv<SM>(qc_bf(xr[j]), s, j), sx));\n"
    "        }\n"
    "        __syncthreads(); /* red_max and row_scale are reused by the next row */\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_i8_quant_act(const unsigned short *x, signed char *xq, float *xs,\n"
    "                                                                  long long m, long long k) {\n"
    "    qc_quant_rows<false>(x, (const float *)0, xq, xs, m, k);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_i8_quant_act_smooth(const unsigned short *x, const float *s,\n"
    "                                                                         signed char *xq, float *xs, long long m,\n"
    "                                                                         long long k) {\n"
    "    qc_quant_rows<true>(x, s, xq, xs, m, k);\n"
    "}\n";

static const char WGMMA_SRC[] =
    "/* qcore w8a8_int8 linear, Hopper: y[m,n] = (xq[m,k] . W[n,k]^T) * xs[m] * sw[n]; INT8 in, exact INT32 sums, f32 out; TMA + wgmma s8, warp-specialized */\n"
    "typedef unsigned long long u64;\n"
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"
    "#define WG_SMS 132\n"
    "#define WG_BM 128\n"
    "#define WG_BK 128 /* k per stage: one 128-byte swizzled row of int8 */\n"
    "#define WG_GROUP_M 8\n"
    "#define WG_A_BYTES (WG_BM * WG_BK)\n"
    "#define WG_BOX_B_BYTES (64 * WG_BK) /* one 64-row box of W */\n"
    "/* diagnosis only (QC_I8_WGMMA_OPTS=-DI8_SKIP_MMA=1 or -DI8_SKIP_EPI=1: y is then wrong): leave out the wgmma\n"
    "   instructions or the stores of y, to time the rest of the kernel */\n"
    "#ifndef I8_SKIP_MMA\n"
    "#define I8_SKIP_MMA 0\n"
    "#endif\n"
    "#ifndef I8_SKIP_EPI\n"
    "#define I8_SKIP_EPI 0\n"
    "#endif\n"
    "/* tile width: the one whose waves of WG_SMS tiles carry the most useful\n"
    "   columns, weighted by how fast a tile of that width runs (host plan: same) */\n"
    "__device__ __forceinline__ int qc_wg_bn(long long m, long long n) {\n"
    "    const int bns[3] = {256, 192, 128}, eff[3] = {100, 96, 88};\n"
    "    long long tm = (m + WG_BM - 1) / WG_BM, best = -1;\n"
    "    int pick = 256;\n"
    "    for (int i = 0; i < 3; i++) {\n"
    "        long long tn = (n + bns[i] - 1) / bns[i], waves = (tm * tn + WG_SMS - 1) / WG_SMS;\n"
    "        long long score = tm * n * eff[i] / (waves * bns[i]);\n"
    "        if (score > best) { best = score; pick = bns[i]; }\n"
    "    }\n"
    "    return pick;\n"
    "}\n"
    "__device__ __forceinline__ unsigned qc_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
    "__device__ __forceinline__ void qc_mbar_init(unsigned bar, unsigned count) {\n"
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" ::\"r\"(bar), \"r\"(count) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void qc_mbar_expect_tx(unsigned bar, unsigned bytes) {\n"
    "    asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\\n}\\n\"\n"
    "                 ::\"r\"(bar), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void qc_mbar_arrive(unsigned bar) {\n"
    "    asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.shared::cta.b64 st, [%0];\\n}\\n\" ::\"r\"(bar) : \"memory\");\n"
    "}\n"
    "/* spin until the phase of parity `parity` has completed */\n"
    "__device__ __forceinline__ void qc_mbar_wait(unsigned bar, unsigned parity) {\n"
    "    unsigned done;\n"
    "    do {\n"
    "        asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\"\n"
    "                     \"selp.u32 %0, 1, 0, p;\\n}\\n\" : \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");\n"
    "    } while (!done);\n"
    "}\n"
    "/* box at element coordinates (c0 along the contiguous dim, c1 rows) into smem, completing on bar */\n"
    "__device__ __forceinline__ void qc_tma2d(unsigned dst, const QcTmap *map, int c0, int c1, unsigned bar) {\n"
    "    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes\"\n"
    "                 \" [%0], [%1, {%2, %3}], [%4];\\n\"\n"
    "                 ::\"r\"(dst), \"l\"((u64)map), \"r\"(c0), \"r\"(c1), \"r\"(bar) : \"memory\");\n"
    "}\n"
    "/* K-major operand, 128-byte swizzle: rows of 128 B, 8-row groups 1024 B apart (SBO); LBO unused */\n"
    "__device__ __forceinline__ u64 qc_desc(unsigned addr) {\n"
    "    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);\n"
    "}\n"
    "__device__ __forceinline__ void qc_wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void qc_wg_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\"); }\n"
    "template <int N> __device__ __forceinline__ void qc_wg_wait() {\n"
    "    asm volatile(\"wgmma.wait_group.sync.aligned %0;\\n\" ::\"n\"(N) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void qc_wgmma_s8_256(int *d, u64 da, u64 db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, \"\n"
    "        \"%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, \"\n"
    "        \"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, \"\n"
    "        \"%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, \"\n"
    "        \"%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127\"\n"
    "        \"}, %128, %129, p;\\n}\\n\"\n"
    "        : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3]), \"+r\"(d[4]), \"+r\"(d[5]), \"+r\"(d[6]), \"+r\"(d[7]),\n"
    "          \"+r\"(d[8]), \"+r\"(d[9]), \"+r\"(d[10]), \"+r\"(d[11]), \"+r\"(d[12]), \"+r\"(d[13]), \"+r\"(d[14]), \"+r\"(d[15]),\n"
    "          \"+r\"(d[16]), \"+r\"(d[17]), \"+r\"(d[18]), \"+r\"(d[19]), \"+r\"(d[20]), \"+r\"(d[21]), \"+r\"(d[22]), \"+r\"(d[23]),\n"
    "          \"+r\"(d[24]), \"+r\"(d[25]), \"+r\"(d[26]), \"+r\"(d[27]), \"+r\"(d[28]), \"+r\"(d[29]), \"+r\"(d[30]), \"+r\"(d[31]),\n"
    "          \"+r\"(d[32]), \"+r\"(d[33]), \"+r\"(d[34]), \"+r\"(d[35]), \"+r\"(d[36]), \"+r\"(d[37]), \"+r\"(d[38]), \"+r\"(d[39]),\n"
    "          \"+r\"(d[40]), \"+r\"(d[41]), \"+r\"(d[42]), \"+r\"(d[43]), \"+r\"(d[44]), \"+r\"(d[45]), \"+r\"(d[46]), \"+r\"(d[47]),\n"
    "          \"+r\"(d[48]), \"+r\"(d[49]), \"+r\"(d[50]), \"+r\"(d[51]), \"+r\"(d[52]), \"+r\"(d[53]), \"+r\"(d[54]), \"+r\"(d[55]),\n"
    "          \"+r\"(d[56]), \"+r\"(d[57]), \"+r\"(d[58]), \"+r\"(d[59]), \"+r\"(d[60]), \"+r\"(d[61]), \"+r\"(d[62]), \"+r\"(d[63]),\n"
    "          \"+r\"(d[64]), \"+r\"(d[65]), \"+r\"(d[66]), \"+r\"(d[67]), \"+r\"(d[68]), \"+r\"(d[69]), \"+r\"(d[70]), \"+r\"(d[71]),\n"
    "          \"+r\"(d[72]), \"+r\"(d[73]), \"+r\"(d[74]), \"+r\"(d[75]), \"+r\"(d[76]), \"+r\"(d[77]), \"+r\"(d[78]), \"+r\"(d[79]),\n"
    "          \"+r\"(d[80]), \"+r\"(d[81]), \"+r\"(d[82]), \"+r\"(d[83]), \"+r\"(d[84]), \"+r\"(d[85]), \"+r\"(d[86]), \"+r\"(d[87]),\n"
    "          \"+r\"(d[88]), \"+r\"(d[89]), \"+r\"(d[90]), \"+r\"(d[91]), \"+r\"(d[92]), \"+r\"(d[93]), \"+r\"(d[94]), \"+r\"(d[95]),\n"
    "          \"+r\"(d[96]), \"+r\"(d[97]), \"+r\"(d[98]), \"+r\"(d[99]), \"+r\"(d[100]), \"+r\"(d[101]), \"+r\"(d[102]), \"+r\"(d[103]),\n"
    "          \"+r\"(d[104]), \"+r\"(d[105]), \"+r\"(d[106]), \"+r\"(d[107]), \"+r\"(d[108]), \"+r\"(d[109]), \"+r\"(d[110]), \"+r\"(d[111]),\n"
    "          \"+r\"(d[112]), \"+r\"(d[113]), \"+r\"(d[114]), \"+r\"(d[115]), \"+r\"(d[116]), \"+r\"(d[117]), \"+r\"(d[118]), \"+r\"(d[119]),\n"
    "          \"+r\"(d[120]), \"+r\"(d[121]), \"+r\"(d[122]), \"+r\"(d[123]), \"+r\"(d[124]), \"+r\"(d[125]), \"+r\"(d[126]), \"+r\"(d[127])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "__device__ __forceinline__ void qc_wgmma_s8_192(int *d, u64 da, u64 db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %98, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n192k32.s32.s8.s8 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, \"\n"
    "        \"%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, \"\n"
    "        \"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95\"\n"
    "        \"}, %96, %97, p;\\n}\\n\"\n"
    "        : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3]), \"+r\"(d[4]), \"+r\"(d[5]), \"+r\"(d[6]), \"+r\"(d[7]),\n"
    "          \"+r\"(d[8]), \"+r\"(d[9]), \"+r\"(d[10]), \"+r\"(d[11]), \"+r\"(d[12]), \"+r\"(d[13]), \"+r\"(d[14]), \"+r\"(d[15]),\n"
    "          \"+r\"(d[16]), \"+r\"(d[17]), \"+r\"(d[18]), \"+r\"(d[19]), \"+r\"(d[20]), \"+r\"(d[21]), \"+r\"(d[22]), \"+r\"(d[23]),\n"
    "          \"+r\"(d[24]), \"+r\"(d[25]), \"+r\"(d[26]), \"+r\"(d[27]), \"+r\"(d[28]), \"+r\"(d[29]), \"+r\"(d[30]), \"+r\"(d[31]),\n"
    "          \"+r\"(d[32]), \"+r\"(d[33]), \"+r\"(d[34]), \"+r\"(d[35]), \"+r\"(d[36]), \"+r\"(d[37]), \"+r\"(d[38]), \"+r\"(d[39]),\n"
    "          \"+r\"(d[40]), \"+r\"(d[41]), \"+r\"(d[42]), \"+r\"(d[43]), \"+r\"(d[44]), \"+r\"(d[45]), \"+r\"(d[46]), \"+r\"(d[47]),\n"
    "          \"+r\"(d[48]), \"+r\"(d[49]), \"+r\"(d[50]), \"+r\"(d[51]), \"+r\"(d[52]), \"+r\"(d[53]), \"+r\"(d[54]), \"+r\"(d[55]),\n"
    "          \"+r\"(d[56]), \"+r\"(d[57]), \"+r\"(d[58]), \"+r\"(d[59]), \"+r\"(d[60]), \"+r\"(d[61]), \"+r\"(d[62]), \"+r\"(d[63]),\n"
    "          \"+r\"(d[64]), \"+r\"(d[65]), \"+r\"(d[66]), \"+r\"(d[67]), \"+r\"(d[68]), \"+r\"(d[69]), \"+r\"(d[70]), \"+r\"(d[71]),\n"
    "          \"+r\"(d[72]), \"+r\"(d[73]), \"+r\"(d[74]), \"+r\"(d[75]), \"+r\"(d[76]), \"+r\"(d[77]), \"+r\"(d[78]), \"+r\"(d[79]),\n"
    "          \"+r\"(d[80]), \"+r\"(d[81]), \"+r\"(d[82]), \"+r\"(d[83]), \"+r\"(d[84]), \"+r\"(d[85]), \"+r\"(d[86]), \"+r\"(d[87]),\n"
    "          \"+r\"(d[88]), \"+r\"(d[89]), \"+r\"(d[90]), \"+r\"(d[91]), \"+r\"(d[92]), \"+r\"(d[93]), \"+r\"(d[94]), \"+r\"(d[95])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "__device__ __forceinline__ void qc_wgmma_s8_128(int *d, u64 da, u64 db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %66, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63\"\n"
    "        \"}, %64, %65, p;\\n}\\n\"\n"
    "        : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3]), \"+r\"(d[4]), \"+r\"(d[5]), \"+r\"(d[6]), \"+r\"(d[7]),\n"
    "          \"+r\"(d[8]), \"+r\"(d[9]), \"+r\"(d[10]), \"+r\"(d[11]), \"+r\"(d[12]), \"+r\"(d[13]), \"+r\"(d[14]), \"+r\"(d[15]),\n"
    "          \"+r\"(d[16]), \"+r\"(d[17]), \"+r\"(d[18]), \"+r\"(d[19]), \"+r\"(d[20]), \"+r\"(d[21]), \"+r\"(d[22]), \"+r\"(d[23]),\n"
    "          \"+r\"(d[24]), \"+r\"(d[25]), \"+r\"(d[26]), \"+r\"(d[27]), \"+r\"(d[28]), \"+r\"(d[29]), \"+r\"(d[30]), \"+r\"(d[31]),\n"
    "          \"+r\"(d[32]), \"+r\"(d[33]), \"+r\"(d[34]), \"+r\"(d[35]), \"+r\"(d[36]), \"+r\"(d[37]), \"+r\"(d[38]), \"+r\"(d[39]),\n"
    "          \"+r\"(d[40]), \"+r\"(d[41]), \"+r\"(d[42]), \"+r\"(d[43]), \"+r\"(d[44]), \"+r\"(d[45]), \"+r\"(d[46]), \"+r\"(d[47]),\n"
    "          \"+r\"(d[48]), \"+r\"(d[49]), \"+r\"(d[50]), \"+r\"(d[51]), \"+r\"(d[52]), \"+r\"(d[53]), \"+r\"(d[54]), \"+r\"(d[55]),\n"
    "          \"+r\"(d[56]), \"+r\"(d[57]), \"+r\"(d[58]), \"+r\"(d[59]), \"+r\"(d[60]), \"+r\"(d[61]), \"+r\"(d[62]), \"+r\"(d[63])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "template <int BN> __device__ __forceinline__ void qc_wgmma(int *d, u64 da, u64 db, int scale_d) {\n"
    "    if constexpr (BN == 256) qc_wgmma_s8_256(d, da, db, scale_d);\n"
    "    else if constexpr (BN == 192) qc_wgmma_s8_192(d, da, db, scale_d);\n"
    "    else qc_wgmma_s8_128(d, da, db, scale_d);\n"
    "}\n"
    "/* tile t -> (row tile, column tile): groups of WG_GROUP_M row tiles, row fastest */\n"
    "__device__ __forceinline__ void qc_wg_tile(long long t, long long tiles_m, long long tiles_n, long long *tm,\n"
    "                                           long long *tn) {\n"
    "    long long per_group = (long long)WG_GROUP_M * tiles_n;\n"
    "    long long first_m = t / per_group * WG_GROUP_M, in_g = t % per_group;\n"
    "    long long gsz = tiles_m - first_m < WG_GROUP_M ? tiles_m - first_m : WG_GROUP_M;\n"
    "    *tm = first_m + in_g % gsz;\n"
    "    *tn = in_g / gsz;\n"
    "}\n"
    "template <int BN, int ST>\n"
    "__device__ __forceinline__ void qc_wg_gemm(const QcTmap *tmx, const QcTmap *tmw, const float *xs, const float *sw,\n"
    "                                           float *y, long long m, long long n, long long k, unsigned char *smem,\n"
    "                                           unsigned long long *bars, int *work, float *sws) {\n"
    "    const unsigned STAGE = WG_A_BYTES + BN * WG_BK;\n"
    "    const unsigned base = (qc_smem(smem) + 1023u) & ~1023u; /* the 128-byte swizzle repeats every 1024 B */\n"
    "    const unsigned full = qc_smem(bars), empty = full + 8 * ST;\n"
    "    const int tid = threadIdx.x, wg = tid >> 7;\n"
    "    if (tid == 0) {\n"
    "        for (int s = 0; s < ST; s++) {\n"
    "            qc_mbar_init(full + 8 * s, 1);  /* the producer's arrive.expect_tx, then the TMA bytes */\n"
    "            qc_mbar_init(empty + 8 * s, 8); /* one arrival per consumer warp */\n"
    "        }\n"
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n"
    "    }\n"
    "    __syncthreads();\n"
    "    const long long tiles_m = (m + WG_BM - 1) / WG_BM, tiles_n = (n + BN - 1) / BN, tiles = tiles_m * tiles_n;\n"
    "    const int kt_n = (int)((k + WG_BK - 1) / WG_BK); /* a k tail reads as zeros (TMA fill), which adds nothing */\n"
    "    /* split-K (gridDim.y > 1 and a workspace): this block's stages [kt_b, kt_e) of every tile it takes */\n"
    "    const int nsp = work ? (int)gridDim.y : 1, spl = work ? (int)blockIdx.y : 0;\n"
    "    const int kt_b = (int)((long long)kt_n * spl / nsp), kt_e = (int)((long long)kt_n * (spl + 1) / nsp);\n"
    "    if (wg == 0) {\n"
    "        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\" ::: \"memory\");\n"
    "        if (tid == 0) {\n"
    "            asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((u64)tmx) : \"memory\");\n"
    "            asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((u64)tmw) : \"memory\");\n"
    "            int s = 0;\n"
    "            unsigned ph = 0;\n"
    "            for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
    "                long long tm, tn;\n"
    "                qc_wg_tile(t, tiles_m, tiles_n, &tm, &tn);\n"
    "                const int row0 = (int)(tm * WG_BM), col0 = (int)(tn * BN);\n"
    "                const long long left = n - col0;\n"
    "                const int nb = left >= BN ? BN / 64 : (int)((left + 63) / 64);\n"
    "                const unsigned bytes = WG_A_BYTES + (unsigned)nb * WG_BOX_B_BYTES;\n"
    "                for (int kt = kt_b; kt < kt_e; kt++) {\n"
    "                    qc_mbar_wait(empty + 8 * s, ph ^ 1u); /* a fresh barrier passes parity 1 at once */\n"
    "                    const unsigned fb = full + 8 * s, sa = base + s * STAGE, sb = sa + WG_A_BYTES;\n"
    "                    qc_mbar_expect_tx(fb, bytes);\n"
    "                    qc_tma2d(sa, tmx, kt * WG_BK, row0, fb);\n"
    "                    for (int b = 0; b < nb; b++) qc_tma2d(sb + b * WG_BOX_B_BYTES, tmw, kt * WG_BK, col0 + 64 * b, fb);\n"
    "                    if (++s == ST) { s = 0; ph ^= 1u; }\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    } else {\n"
    "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::: \"memory\");\n"
    "        const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;\n"
    "        int acc[BN / 2];\n"
    "        int s = 0, prev = 0;\n"
    "        unsigned ph = 0;\n"
    "        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
    "            long long tm, tn;\n"
    "            qc_wg_tile(t, tiles_m, tiles_n, &tm, &tn);\n"
    "            /* The tile's column scales go to shared memory (cp.async) and its row scales to registers now, so\n"
    "               that their latency passes under the K loop: loaded in the epilogue, each behind the stores of y\n"
    "               before it (which may alias them), they cost about 5 us a tile (H200, M = 16).  The barrier: the\n"
    "               warpgroup's previous epilogue has read sws. */\n"
    "            float *wsc = sws + c * 256;\n"
    "            asm volatile(\"bar.sync %0, 128;\\n\" ::\"r\"(1 + c) : \"memory\");\n"
    "            for (int q = tid & 127; q < BN; q += 128)\n"
    "                if (tn * BN + q < n)\n"
    "                    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4;\\n\" ::\"r\"(qc_smem(wsc + q)),\n"
    "                                 \"l\"(sw + tn * BN + q) : \"memory\");\n"
    "            asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
    "            const long long r0 = tm * WG_BM + c * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    "            const float s0 = r0 < m ? xs[r0] : 0.f, s1 = r1 < m ? xs[r1] : 0.f;\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < BN / 2; i++) acc[i] = 0; /* an empty K range (a split past k) sums to zero */\n"
    "            for (int kt = kt_b; kt < kt_e; kt++) {\n"
    "                qc_mbar_wait(full + 8 * s, ph);\n"
    "                const unsigned sa = base + s * STAGE + c * (64 * 128), sb = base + s * STAGE + WG_A_BYTES;\n"
    "                qc_wg_fence();\n"
    "#pragma unroll\n"
    "                for (int kk = 0; kk < WG_BK / 32; kk++) /* 32 k = 32 B further along the swizzled rows */\n"
    "                    if (!I8_SKIP_MMA) qc_wgmma<BN>(acc, qc_desc(sa + 32 * kk), qc_desc(sb + 32 * kk), kt > kt_b || kk > 0);\n"
    "                qc_wg_commit();\n"
    "                if (kt > kt_b) { /* the previous step's group has read its stage: hand it back */\n"
    "                    qc_wg_wait<1>();\n"
    "                    if (lane == 0) qc_mbar_arrive(empty + 8 * prev);\n"
    "                }\n"
    "                prev = s;\n"
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n"
    "            }\n"
    "            qc_wg_wait<0>();\n"
    "            if (kt_e > kt_b && lane == 0) qc_mbar_arrive(empty + 8 * prev);\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < BN / 2; i++) asm volatile(\"\" : \"+r\"(acc[i])::\"memory\");\n"
    "            /* split-K: the warpgroup's INT32 partial sums to its slot; the last split of the tile to arrive (a\n"
    "               counter per tile and warpgroup) adds the other slots (exact: any order gives the same sum),\n"
    "               stores, and puts the counter back to zero, so the next launch finds the workspace as it was */\n"
    "            bool store = !I8_SKIP_EPI;\n"
    "            if (nsp > 1) {\n"
    "                __shared__ int qc_last[2];\n"
    "                constexpr long long SLOT = 128 * (BN / 2);\n"
    "                const int ti = tid & 127;\n"
    "                int *slots = work + 512 + ((long long)t * nsp * 2 + c) * SLOT; /* split j: + 2 j SLOT */\n"
    "#pragma unroll\n"
    "                for (int i = 0; i < BN / 2; i++) slots[2 * spl * SLOT + i * 128 + ti] = acc[i];\n"
    "                __threadfence();\n"
    "                asm volatile(\"bar.sync %0, 128;\\n\" ::\"r\"(1 + c) : \"memory\");\n"
    "                if (ti == 0) qc_last[c] = atomicAdd(work + 2 * t + c, 1) == nsp - 1;\n"
    "                asm volatile(\"bar.sync %0, 128;\\n\" ::\"r\"(1 + c) : \"memory\");\n"
    "                store = qc_last[c] != 0;\n"
    "                if (store) {\n"
    "                    __threadfence();\n"
    "                    for (int j = 0; j < nsp; j++)\n"
    "                        if (j != spl)\n"
    "#pragma unroll\n"
    "                            for (int i = 0; i < BN / 2; i++) acc[i] += __ldcg(slots + 2 * j * SLOT + i * 128 + ti);\n"
    "                    if (ti == 0) work[2 * t + c] = 0;\n"
    "                }\n"
    "                /* every warp reads qc_last before the next tile's barriers (its start, then the split's first) let it be written again */\n"
    "            }\n"
    "            /* accumulator i of a thread: row 16 warp + lane/4 (+8 for i%4 >= 2), column 8 (i/4) + 2 (lane%4) + i%2;\n"
    "               y = ((float)acc * xs[row]) * sw[col], the reference's two f32 multiplies in its order */\n"
    "            asm volatile(\"cp.async.wait_group 0;\\n\" ::: \"memory\"); /* this thread's copies, */\n"
    "            asm volatile(\"bar.sync %0, 128;\\n\" ::\"r\"(1 + c) : \"memory\");  /* then the others' */\n"
    "            const long long cb = tn * BN + 2 * (lane & 3);\n"
    "            float *y0 = y + r0 * n, *y1 = y + r1 * n;\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < BN / 8; j++) {\n"
    "                const long long cn = cb + 8 * j;\n"
    "                if (store && cn < n) {\n"
    "                    const float2 w = *(const float2 *)(wsc + 8 * j + 2 * (lane & 3));\n"
    "                    if (r0 < m)\n"
    "                        *(float2 *)(y0 + cn) = make_float2(__fmul_rn(__fmul_rn(__int2float_rn(acc[4 * j]), s0), w.x),\n"
    "                                                           __fmul_rn(__fmul_rn(__int2float_rn(acc[4 * j + 1]), s0), w.y));\n"
    "                    if (r1 < m)\n"
    "                        *(float2 *)(y1 + cn) = make_float2(__fmul_rn(__fmul_rn(__int2float_rn(acc[4 * j + 2]), s1), w.x),\n"
    "                                                           __fmul_rn(__fmul_rn(__int2float_rn(acc[4 * j + 3]), s1), w.y));\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "/* xq and w are read only through their tensor maps (built by the host from the same pointers) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_i8_linear_wgmma(const signed char *xq, const float *xs,\n"
    "        const signed char *w, const float *sw, float *y, long long m, long long n, long long k, int *work,\n"
    "        const __grid_constant__ QcTmap tmx, const __grid_constant__ QcTmap tmw) {\n"
    "    extern __shared__ __align__(1024) unsigned char smem[];\n"
    "    __shared__ __align__(8) unsigned long long bars[2 * 6];\n"
    "    __shared__ __align__(16) float sws[2 * 256]; /* a tile's column scales, one copy per consumer warpgroup */\n"
    "    (void)xq;\n"
    "    (void)w;\n"
    "    if (m <= 0 || n <= 0 || k <= 0) return;\n"
    "    if (blockIdx.y > 0 && !work) return; /* no workspace: unsplit, blockIdx.y 0 takes all of K */\n"
    "    switch (qc_wg_bn(m, n)) {\n"
    "    case 256: qc_wg_gemm<256, 4>(&tmx, &tmw, xs, sw, y, m, n, k, smem, bars, work, sws); break;\n"
    "    case 192: qc_wg_gemm<192, 5>(&tmx, &tmw, xs, sw, y, m, n, k, smem, bars, work, sws); break;\n"
    "    default: qc_wg_gemm<128, 6>(&tmx, &tmw, xs, sw, y, m, n, k, smem, bars, work, sws); break;\n"
    "    }\n"
    "}\n";

static const char MMA_SRC[] =
    "/* qcore w8a8_int8 linear, sm_80+: y[m,n] = (xq[m,k] . W[n,k]^T) * xs[m] * sw[n]; mma.sync m16n8k32 s8, exact INT32 sums */\n"
    "typedef unsigned long long u64;\n"
    "#define MM_BM 128\n"
    "#define MM_BN 128\n"
    "#define MM_BK 64 /* k bytes per stage: 4 chunks of 16 B per row */\n"
    "#define MM_ST 4\n"
    "#define MM_TILE_BYTES (MM_BM * MM_BK)\n"
    "/* byte offset of 16-byte chunk c of row r: chunks XOR-swizzled so that 8\n"
    "   rows read by one ldmatrix phase hit 8 different bank groups */\n"
    "__device__ __forceinline__ unsigned mm_off(int r, int c) { return (unsigned)(r * MM_BK + 16 * (c ^ ((r >> 1) & 3))); }\n"
    "__device__ __forceinline__ void mm_cp16(unsigned dst, const void *src, int bytes) {\n"
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void mm_ldsm4(unsigned addr, unsigned &a, unsigned &b, unsigned &c, unsigned &d) {\n"
    "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "                 : \"=r\"(a), \"=r\"(b), \"=r\"(c), \"=r\"(d) : \"r\"(addr));\n"
    "}\n"
    "__device__ __forceinline__ void mm_mma(int *d, const unsigned *a, unsigned b0, unsigned b1) {\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, \"\n"
    "                 \"{%0, %1, %2, %3};\\n\"\n"
    "                 : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3])\n"
    "                 : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "/* one stage: 128 rows of x and 128 rows of W, 64 k each; rows past m/n and chunks past k are zero-filled */\n"
    "__device__ __forceinline__ void mm_load(unsigned sa, unsigned sb, const signed char *xq, const signed char *w,\n"
    "                                        long long m, long long n, long long k, long long row0, long long col0,\n"
    "                                        long long k0) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 2; i++) {\n"
    "        const int id = threadIdx.x + 256 * i, r = id >> 2, c = id & 3;\n"
    "        const long long kk = k0 + 16 * c;\n"
    "        const long long ra = row0 + r, rb = col0 + r;\n"
    "        const bool ka = kk < k;\n"
    "        mm_cp16(sa + mm_off(r, c), ka && ra < m ? (const void *)(xq + ra * k + kk) : (const void *)xq,\n"
    "                ka && ra < m ? 16 : 0);\n"
    "        mm_cp16(sb + mm_off(r, c), ka && rb < n ? (const void *)(w + rb * k + kk) : (const void *)w,\n"
    "                ka && rb < n ? 16 : 0);\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_i8_linear_mma(const signed char *xq, const float *xs,\n"
    "                                                                   const signed char *w, const float *sw, float *y,\n"
    "                                                                   long long m, long long n, long long k) {\n"
    "    extern __shared__ __align__(128) unsigned char smem[];\n"
    "    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;\n"
    "    const long long row0 = (long long)blockIdx.y * MM_BM, col0 = (long long)blockIdx.x * MM_BN;\n"
    "    if (row0 >= m || col0 >= n) return;\n"
    "    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);\n"
    "    const int kt_n = (int)((k + MM_BK - 1) / MM_BK);\n"
    "    int acc[4][4][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++)\n"
    "#pragma unroll\n"
    "            for (int e = 0; e < 4; e++) acc[i][j][e] = 0;\n"
    "#pragma unroll\n"
    "    for (int s = 0; s < MM_ST - 1; s++) {\n"
    "        if (s < kt_n)\n"
    "            mm_load(base + 2 * s * MM_TILE_BYTES, base + (2 * s + 1) * MM_TILE_BYTES, xq, w, m, n, k, row0, col0,\n"
    "                    (long long)s * MM_BK);\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
    "    }\n"
    "    for (int kt = 0; kt < kt_n; kt++) {\n"
    "        asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(MM_ST - 2) : \"memory\");\n"
    "        __syncthreads(); /* stage kt landed for every thread; stage kt-1 is no longer read */\n"
    "        const int nx = kt + MM_ST - 1;\n"
    "        if (nx < kt_n) {\n"
    "            const int sl = nx % MM_ST;\n"
    "            mm_load(base + 2 * sl * MM_TILE_BYTES, base + (2 * sl + 1) * MM_TILE_BYTES, xq, w, m, n, k, row0, col0,\n"
    "                    (long long)nx * MM_BK);\n"
    "        }\n"
    "        asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
    "        const int sl = kt % MM_ST;\n"
    "        const unsigned sa = base + 2 * sl * MM_TILE_BYTES, sb = sa + MM_TILE_BYTES;\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < 2; kk++) { /* two k32 steps per stage */\n"
    "            unsigned a[4][4], b[4][2];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++) {\n"
    "                const int r = wm * 64 + 16 * i + (lane & 7) + 8 * ((lane >> 3) & 1), c = 2 * kk + (lane >> 4);\n"
    "                mm_ldsm4(sa + mm_off(r, c), a[i][0], a[i][1], a[i][2], a[i][3]);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int jj = 0; jj < 2; jj++) {\n"
    "                const int r = wn * 32 + 16 * jj + (lane & 7) + 8 * (lane >> 4), c = 2 * kk + ((lane >> 3) & 1);\n"
    "                mm_ldsm4(sb + mm_off(r, c), b[2 * jj][0], b[2 * jj][1], b[2 * jj + 1][0], b[2 * jj + 1][1]);\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < 4; j++) mm_mma(acc[i][j], a[i], b[j][0], b[j][1]);\n"
    "        }\n"
    "    }\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::: \"memory\");\n"
    "    /* c0, c1: row lane/4, columns 2 (lane%4) + 0, 1; c2, c3: 8 rows further */\n"
    "    const int g = lane >> 2, t = lane & 3;\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "        const long long r0 = row0 + wm * 64 + 16 * i + g, r1 = r0 + 8;\n"
    "        const float s0 = r0 < m ? xs[r0] : 0.f, s1 = r1 < m ? xs[r1] : 0.f;\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) {\n"
    "            const long long cn = col0 + wn * 32 + 8 * j + 2 * t;\n"
    "            if (cn >= n) continue;\n"
    "            const float2 sw2 = *(const float2 *)(sw + cn);\n"
    "            if (r0 < m)\n"
    "                *(float2 *)(y + r0 * n + cn) = make_float2(__fmul_rn(__fmul_rn(__int2float_rn(acc[i][j][0]), s0), sw2.x),\n"
    "                                                           __fmul_rn(__fmul_rn(__int2float_rn(acc[i][j][1]), s0), sw2.y));\n"
    "            if (r1 < m)\n"
    "                *(float2 *)(y + r1 * n + cn) = make_float2(__fmul_rn(__fmul_rn(__int2float_rn(acc[i][j][2]), s1), sw2.x),\n"
    "                                                           __fmul_rn(__fmul_rn(__int2float_rn(acc[i][j][3]), s1), sw2.y));\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char GEMV_SRC[] =
    QC_CUDA_GRID_DEP_SRC
    "/* qcore w8a8_int8 decode linear (m <= 16): int8 W streamed once, dp4a into exact INT32 sums, y = acc * xs * sw */\n"
    "#define GV_WARPS 8\n"
    "#define GV_OUT 2 /* outputs (rows of W) per warp: each x chunk serves both */\n"
    "template <int M>\n"
    "__device__ __forceinline__ void qc_gemv(const signed char *xq, const float *xs, const signed char *w, const float *sw,\n"
    "                                        float *y, long long n, long long k) {\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    const long long o0 = ((long long)blockIdx.x * GV_WARPS + warp) * GV_OUT;\n"
    "    if (o0 >= n) return;\n"
    "    const long long kc = k >> 4; /* 16-byte chunks per row; k is a multiple of 16 */\n"
    "    const int4 *w0 = (const int4 *)(w + o0 * k), *w1 = (const int4 *)(w + (o0 + 1) * k);\n"
    "    int a0[M], a1[M];\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < M; r++) a0[r] = a1[r] = 0;\n"
    "#pragma unroll 2\n"
    "    for (long long c = lane; c < kc; c += 32) {\n"
    "        const int4 p = __ldcs(w0 + c), q = __ldcs(w1 + c); /* streamed: read once */\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < M; r++) {\n"
    "            const int4 xv = __ldg((const int4 *)(xq + r * k) + c);\n"
    "            a0[r] = __dp4a(p.x, xv.x, a0[r]);\n"
    "            a0[r] = __dp4a(p.y, xv.y, a0[r]);\n"
    "            a0[r] = __dp4a(p.z, xv.z, a0[r]);\n"
    "            a0[r] = __dp4a(p.w, xv.w, a0[r]);\n"
    "            a1[r] = __dp4a(q.x, xv.x, a1[r]);\n"
    "            a1[r] = __dp4a(q.y, xv.y, a1[r]);\n"
    "            a1[r] = __dp4a(q.z, xv.z, a1[r]);\n"
    "            a1[r] = __dp4a(q.w, xv.w, a1[r]);\n"
    "        }\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < M; r++)\n"
    "#pragma unroll\n"
    "        for (int o = 16; o; o >>= 1) {\n"
    "            a0[r] += __shfl_xor_sync(0xffffffffu, a0[r], o);\n"
    "            a1[r] += __shfl_xor_sync(0xffffffffu, a1[r], o);\n"
    "        }\n"
    "    if (lane < M) { /* lane r writes row r (n is a multiple of 16, so o0 + 1 < n) */\n"
    "        int v0 = a0[0], v1 = a1[0];\n"
    "#pragma unroll\n"
    "        for (int r = 1; r < M; r++)\n"
    "            if (lane == r) v0 = a0[r], v1 = a1[r];\n"
    "        const float sx = xs[lane];\n"
    "        const float2 s = *(const float2 *)(sw + o0);\n"
    "        *(float2 *)(y + (long long)lane * n + o0) =\n"
    "            make_float2(__fmul_rn(__fmul_rn(__int2float_rn(v0), sx), s.x), __fmul_rn(__fmul_rn(__int2float_rn(v1), sx), s.y));\n"
    "    }\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_i8_gemv(const signed char *xq, const float *xs, const signed char *w,\n"
    "                                                             const float *sw, float *y, long long m, long long n,\n"
    "                                                             long long k) {\n"
    "    qc_grid_dep(); /* lets the next kernel start early; a no-op wait unless launched with PDL */\n"
    "    switch (m) {\n"
    "    case 1: qc_gemv<1>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 2: qc_gemv<2>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 3: qc_gemv<3>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 4: qc_gemv<4>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 5: qc_gemv<5>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 6: qc_gemv<6>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 7: qc_gemv<7>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 8: qc_gemv<8>(xq, xs, w, sw, y, n, k); break;\n"
    "    default: break; /* eligibility keeps m in 1..8 */\n"
    "    }\n"
    "}\n"
    "/* m 9..16: its own entry, so that the sums of 16 rows do not set the register budget (and the occupancy) of\n"
    "   the one-row case */\n"
    "extern \"C\" __global__ void __launch_bounds__(256) qc_i8_gemv_wide(const signed char *xq, const float *xs,\n"
    "        const signed char *w, const float *sw, float *y, long long m, long long n, long long k) {\n"
    "    qc_grid_dep();\n"
    "    switch (m) {\n"
    "    case 9: qc_gemv<9>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 10: qc_gemv<10>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 11: qc_gemv<11>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 12: qc_gemv<12>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 13: qc_gemv<13>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 14: qc_gemv<14>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 15: qc_gemv<15>(xq, xs, w, sw, y, n, k); break;\n"
    "    case 16: qc_gemv<16>(xq, xs, w, sw, y, n, k); break;\n"
    "    default: break; /* eligibility keeps m in 9..16 */\n"
    "    }\n"
    "}\n";


static void why_set(qc_reason *why, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(qc_reason *why, const char *code, const char *fmt, ...) {
    if (!why) return;
    snprintf(why->code, sizeof why->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, sizeof why->text, fmt, ap);
    va_end(ap);
}

/* Checks every kernel here makes (the core checks the format's alignment
 * first; a direct caller gets the same reasons). */
static int shape_ok(const char *id, const qc_problem *p, qc_reason *why) {
    if (p->n <= 0 || p->k <= 0 || p->m < 1) {
        why_set(why, "shape", "%s: m=%lld n=%lld k=%lld is not a linear problem", id, (long long)p->m,
                (long long)p->n, (long long)p->k);
        return 0;
    }
    if (p->k % 16) {
        why_set(why, "align_k", "%s needs k a multiple of 16 (16-byte rows of int8), layer has k = %lld", id,
                (long long)p->k);
        return 0;
    }
    if (p->n % 16) {
        why_set(why, "align_n", "%s needs n a multiple of 16, layer has n = %lld", id, (long long)p->n);
        return 0;
    }
    if (p->k > I8_K_MAX) {
        why_set(why, "shape", "%s: k = %lld exceeds %lld, where INT32 accumulation could overflow", id,
                (long long)p->k, (long long)I8_K_MAX);
        return 0;
    }
    return 1;
}

/* The GEMMs take xq/xs whatever the scheme: smoothing lives in quant_act. */
static int gemm_shape(const char *id, const qc_problem *p, qc_reason *why) {
    if (!shape_ok(id, p, why)) return 0;
    if (p->scheme > I8_SCHEME_SMOOTH) {
        why_set(why, "scheme", "%s takes w8a8_int8 schemes 1 and 2, the weight has scheme %u", id, p->scheme);
        return 0;
    }
    return 1;
}

static int el_wgmma(const qc_problem *p, qc_reason *why) {
    if (!gemm_shape("w8a8_int8.linear_wgmma", p, why)) return 0;
    if (p->m > (1ll << 31) - WG_BM || p->n > (1ll << 31) - 256) { /* TMA box coordinates are 32-bit */
        why_set(why, "m_range", "w8a8_int8.linear_wgmma takes m < 2^31 - 128 and n < 2^31 - 256, problem is %lldx%lld",
                (long long)p->m, (long long)p->n);
        return 0;
    }
    return 1;
}

static int el_mma(const qc_problem *p, qc_reason *why) {
    if (!gemm_shape("w8a8_int8.linear_mma", p, why)) return 0;
    if ((p->m + MM_TILE - 1) / MM_TILE > 65535) { /* grid.y */
        why_set(why, "m_range", "w8a8_int8.linear_mma takes m up to %d, batch has m = %lld", 65535 * MM_TILE,
                (long long)p->m);
        return 0;
    }
    return 1;
}

static int el_gemv(const qc_problem *p, qc_reason *why) {
    if (!gemm_shape("w8a8_int8.gemv", p, why)) return 0;
    if (p->m > GV_M_MAX) {
        why_set(why, "m_range", "w8a8_int8.gemv takes m in 1..%d, batch has m = %lld", GV_M_MAX, (long long)p->m);
        return 0;
    }
    return 1;
}

static int el_quant(const qc_problem *p, qc_reason *why) {
    if (!shape_ok("w8a8_int8.quant_act", p, why)) return 0;
    if (p->scheme != 0 && p->scheme != I8_SCHEME_PLAIN) {
        why_set(why, "scheme", "w8a8_int8.quant_act is for plain weights (scheme 1); scheme %u has its own "
                "(quant_act_smooth for 2)", p->scheme);
        return 0;
    }
    return 1;
}

static int el_quant_smooth(const qc_problem *p, qc_reason *why) {
    if (!shape_ok("w8a8_int8.quant_act_smooth", p, why)) return 0;
    if (p->scheme != I8_SCHEME_SMOOTH) {
        why_set(why, "scheme", "w8a8_int8.quant_act_smooth is for SmoothQuant weights (scheme 2), the weight has "
                "scheme %u", p->scheme);
        return 0;
    }
    return 1;
}

/* One block per row (a grid-stride loop past 2^20 rows), 8 bf16 per
 * thread per step: as many threads as the row has 8-element chunks, 32 to 256. */
static void quant_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t chunks = p->k > 0 ? (p->k + 7) / 8 : 0, t = (chunks + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > 256) t = 256;
    d->grid[0] = (uint32_t)(p->m <= 0 ? 0 : p->m < (1 << 20) ? p->m : (1 << 20));
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = (uint32_t)t;
    d->block[1] = d->block[2] = 1;
}

/* The wgmma tile plan (the device code picks the same BN from m and n):
 * 128 x BN tiles, BN 256/192/128 with 4/5/6 stages of 128 k. */
static void wgmma_plan(int64_t m, int64_t n, int *bn, int *stages, uint32_t *smem, int64_t *tiles) {
    static const int bns[3] = {256, 192, 128}, eff[3] = {100, 96, 88}, sts[3] = {4, 5, 6};
    int64_t tm = m > 0 ? (m + WG_BM - 1) / WG_BM : 0, best = -1;
    int pick = 0;
    for (int i = 0; i < 3; i++) {
        int64_t tn = n > 0 ? (n + bns[i] - 1) / bns[i] : 0, waves = (tm * tn + WG_SMS - 1) / WG_SMS;
        int64_t score = waves > 0 ? tm * n * eff[i] / (waves * bns[i]) : 0;
        if (score > best) {
            best = score;
            pick = i;
        }
    }
    *bn = bns[pick];
    *stages = sts[pick];
    *smem = (uint32_t)sts[pick] * (WG_BM * WG_BK + (uint32_t)bns[pick] * WG_BK) + 1024;
    *tiles = n > 0 ? tm * ((n + bns[pick] - 1) / bns[pick]) : 0;
}

/* Split-K across blocks (grid.y; the device reads gridDim.y, so the rule lives only here), as fp8's wgmma GEMMs:
 * when the tiles leave SMs idle (m up to a few hundred), each tile's K goes to as many blocks as fit in one pass of
 * WG_SMS, at most I8_SPLIT_MAX (QC_I8_SPLIT=1..4 overrides it, for A/B runs), each at least I8_SPLIT_STAGES stages
 * of 128 K: a split costs a few us (H200, M = 16, 32 tiles: 4 ways lost 3 us at k = 1024-2048, broke even at 4096
 * and won from 8192 on; 2 ways at k = 4096 lost 3% on qkv; bench/results/2026-12-01-h200-s11/).  The last split of a tile to arrive adds
 * the others' INT32 sums, exactly, so y stays bit-exact. */
#define I8_SPLIT_MAX 4
#define I8_SPLIT_STAGES 24
static int g_i8_split_max = I8_SPLIT_MAX;
static int i8_wgmma_splits(int64_t tiles, int64_t k) {
    return qc_split_k_ways(tiles, k > 0 ? (k + WG_BK - 1) / WG_BK : 0, WG_SMS, I8_SPLIT_STAGES, g_i8_split_max);
}
/* 512 counter words (a tile's two warpgroups), then an INT32 slot per (tile, split, warpgroup): 128 threads x 128
 * sums (the widest tile, 256 columns); tiles x splits <= WG_SMS */
#define I8_WORK_BYTES (2048ull + (uint64_t)WG_SMS * 2 * 128 * 128 * 4)
static uint64_t wgmma_workspace(const qc_problem *p) {
    (void)p;
    return I8_WORK_BYTES;
}

static void wgmma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int bn, st;
    uint32_t smem;
    int64_t tiles;
    wgmma_plan(p->m, p->n, &bn, &st, &smem, &tiles);
    d->grid[0] = (uint32_t)(tiles < WG_SMS ? tiles : WG_SMS);
    d->grid[1] = (uint32_t)i8_wgmma_splits(tiles, p->k);
    d->grid[2] = 1;
    d->block[0] = WG_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = smem;
}

static void mma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int64_t gx = p->n > 0 ? (p->n + MM_TILE - 1) / MM_TILE : 0, gy = p->m > 0 ? (p->m + MM_TILE - 1) / MM_TILE : 0;
    d->grid[0] = (uint32_t)gx;
    d->grid[1] = (uint32_t)(gy < 65535 ? gy : 65535);
    d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = MM_SMEM;
}

static int el_gemv_wide(const qc_problem *p, qc_reason *why) {
    if (!gemm_shape("w8a8_int8.gemv_wide", p, why)) return 0;
    if (p->m <= GV_M_MAX || p->m > GV_WIDE_MAX) {
        why_set(why, "m_range", "w8a8_int8.gemv_wide takes m in %d..%d, batch has m = %lld", GV_M_MAX + 1, GV_WIDE_MAX,
                (long long)p->m);
        return 0;
    }
    return 1;
}

static void gemv_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    d->grid[0] = (uint32_t)(p->n > 0 && p->m > 0 ? (p->n + GV_OUT_PER_BLOCK - 1) / GV_OUT_PER_BLOCK : 0);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = 256;
    d->block[1] = d->block[2] = 1;
}

static const qc_kernel_param QUANT_PARAMS[] = {
    {"x.bf16", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"k", QC_PARAM_I64},
};
static const qc_kernel_param QUANT_SMOOTH_PARAMS[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.smooth", QC_PARAM_PTR}, {"xq", QC_PARAM_PTR},
    {"xs", QC_PARAM_PTR},     {"m", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};
#define I8_GEMM_PARAMS                                                                                    \
    {"xq", QC_PARAM_PTR}, {"xs", QC_PARAM_PTR}, {"w.qweight", QC_PARAM_PTR}, {"w.scales", QC_PARAM_PTR},   \
        {"y", QC_PARAM_PTR}, {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64}, {"k", QC_PARAM_I64}
static const qc_kernel_param GEMM_PARAMS[] = {I8_GEMM_PARAMS};
/* the wgmma GEMM: the same, then its split-K workspace (optional: without it the kernel runs unsplit) */
static const qc_kernel_param GEMM_WG_PARAMS[] = {I8_GEMM_PARAMS, {"work", QC_PARAM_PTR}};
/* xq in boxes of 128 rows, W in boxes of 64 rows (BN/64 per stage), both
 * 128 int8 wide: 128 bytes, the 128-byte swizzle span */
static const qc_tensor_map_spec WGMMA_MAPS[] = {
    {"xq", QC_DT_I8, "m", "k", WG_BM, WG_BK, 128},
    {"w.qweight", QC_DT_I8, "n", "k", 64, WG_BK, 128},
};

qc_status i8_cuda_register(const qc_host_api *api, qc_host *host, const i8_gpu_refs *refs) {
    /* The GEMMs first: a selection that takes the first eligible GPU kernel
     * of the format (qc_select_format) must find a GEMM, never quant_act,
     * which is a helper with no "y" (callers that rank kernels skip those). */
    g_i8_split_max = qc_env_int("w8a8_int8", "QC_I8_SPLIT", 1, I8_SPLIT_MAX, I8_SPLIT_MAX);
    /* QC_I8_WGMMA_OPTS: extra -D options of linear_wgmma (A/B runs and diagnosis on the device, no rebuild); the
       strings live in static storage for the plugin's life */
    static char xbuf[8][QC_ENV_OPT_LEN];
    static const char *xopts[9];
    const int nx = qc_env_defines("w8a8_int8", "QC_I8_WGMMA_OPTS", xbuf, 8);
    qc_env_option_list(NULL, xbuf, nx, xopts);
    qc_kernel_desc g = {
        .struct_size = sizeof g,
        .id = "w8a8_int8.linear_wgmma",
        .format = "w8a8_int8",
        .phases = QC_PHASE_ANY,
        .m_min = GV_M_MAX + 1, /* up to 8 rows the GEMV; from 9 this beats gemv_wide on the H200 (c16 decode 5.40
                                  against 6.00 ms; M = 16 down 35 against 61 us: bench/results/2026-12-01-h200-s11) */
        .m_max = (1ll << 31) - WG_BM,
        .arch = {90, 90}, /* sm_90a only: wgmma and setmaxnreg */
        .n_params = sizeof GEMM_WG_PARAMS / sizeof GEMM_WG_PARAMS[0],
        .params = GEMM_WG_PARAMS,
        .reference = refs->linear_q_work,
        .cuda_source = WGMMA_SRC,
        .cuda_entry = "qc_i8_linear_wgmma",
        .launch_dims = wgmma_dims,
        .eligible = el_wgmma,
        .n_tensor_maps = sizeof WGMMA_MAPS / sizeof WGMMA_MAPS[0],
        .tensor_maps = WGMMA_MAPS,
        .workspace_bytes = wgmma_workspace,
        .nvrtc_options = nx ? xopts : NULL,
    };
    qc_status st = api->register_kernel(host, &g);
    if (st != QC_OK) return st;
    g.id = "w8a8_int8.linear_mma";
    g.m_min = GV_WIDE_MAX + 1; /* below it gemv_wide (H200: o M = 16 22 against 42 us, test_gpu_int8) */
    g.m_max = 65535ll * MM_TILE;
    g.arch = (qc_arch_range){80, QC_SM_ANY};
    g.cuda_source = MMA_SRC;
    g.cuda_entry = "qc_i8_linear_mma";
    g.n_params = sizeof GEMM_PARAMS / sizeof GEMM_PARAMS[0];
    g.params = GEMM_PARAMS;
    g.reference = refs->linear_q;
    g.workspace_bytes = NULL;
    g.nvrtc_options = NULL;
    g.launch_dims = mma_dims;
    g.eligible = el_mma;
    g.n_tensor_maps = 0;
    g.tensor_maps = NULL;
    if ((st = api->register_kernel(host, &g)) != QC_OK) return st;
    g.id = "w8a8_int8.gemv";
    g.m_min = 1;
    g.m_max = GV_M_MAX;
    g.cuda_source = GEMV_SRC;
    g.cuda_entry = "qc_i8_gemv";
    g.launch_dims = gemv_dims;
    g.eligible = el_gemv;
    /* not QC_KERNEL_GRID_DEP: flagged, its batch-1 Llama-3-8B step was 1% slower than with QC_PDL=0 in the same
       call (3.009 / 2.980 ms, session 9); it still calls qc_grid_dep(), whose trigger lets the row kernel after
       it start early, and whose wait returns at once in a plain launch */
    if ((st = api->register_kernel(host, &g)) != QC_OK) return st;
    /* m 9..16, for GPUs without linear_wgmma (whose narrower arch range wins there on sm_90) */
    g.id = "w8a8_int8.gemv_wide";
    g.m_min = GV_M_MAX + 1;
    g.m_max = GV_WIDE_MAX;
    g.cuda_entry = "qc_i8_gemv_wide";
    g.eligible = el_gemv_wide;
    if ((st = api->register_kernel(host, &g)) != QC_OK) return st;
    qc_kernel_desc q = {
        .struct_size = sizeof q,
        .id = "w8a8_int8.quant_act",
        .format = "w8a8_int8",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .arch = {80, QC_SM_ANY},
        .n_params = sizeof QUANT_PARAMS / sizeof QUANT_PARAMS[0],
        .params = QUANT_PARAMS,
        .reference = refs->quant_act,
        .cuda_source = QUANT_SRC,
        .cuda_entry = "qc_i8_quant_act",
        .launch_dims = quant_dims,
        .eligible = el_quant,
        .act_recipe = QC_ACT_RECIPE_INT8_TOKEN, /* the engine may fuse it (plugin.h) */
    };
    if ((st = api->register_kernel(host, &q)) != QC_OK) return st;
    q.id = "w8a8_int8.quant_act_smooth";
    q.n_params = sizeof QUANT_SMOOTH_PARAMS / sizeof QUANT_SMOOTH_PARAMS[0];
    q.params = QUANT_SMOOTH_PARAMS;
    q.reference = refs->quant_act_smooth;
    q.cuda_entry = "qc_i8_quant_act_smooth";
    q.eligible = el_quant_smooth;
    q.act_recipe = NULL; /* divides by w.smooth first: not a recipe the core implements */
    return api->register_kernel(host, &q);
}
