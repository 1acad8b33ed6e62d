/* qc_kernels_wgmma.c - bf16.linear_wgmma: the Hopper (sm_90a) prefill linear, TMA + wgmma, warp-specialized. */
#include <string.h>

#include "qc_kernels_wgmma.h"
#include "qc_util.h"

/*
 * y[m,n] = x[m,k] . W[n,k]^T with x already bf16 ("x.bf16", bits) and W bf16,
 * f32 accumulation in the tensor cores, y stored as f32.
 *
 * One persistent block per SM (132, the H200's count; elsewhere it is only a
 * tile-loop stride) walks output tiles of 128 x BN (BN = 256, 192 or 128,
 * picked per shape to fill the last wave, see qc_wgmma_plan) in groups of 8
 * row tiles, so that the blocks running together share their W and x tiles
 * in L2.  Three warpgroups: warpgroup 0 is the producer (one thread issues
 * the TMA loads; setmaxnreg gives its registers away), warpgroups 1 and 2
 * are consumers, each owning 64 rows of the tile with BN/2 f32 accumulators
 * per thread (wgmma m64nBNk16, both operands K-major from shared memory).
 * K steps of 64 go through a ring of ST stages (4 at BN 256, 5 at 192, 6 at
 * 128): the producer waits for a stage's "empty" mbarrier (one arrival per
 * consumer warp), announces the bytes on its "full" mbarrier and starts one
 * TMA box of x (128 x 64) and BN/64 boxes of W (64 x 64), 128-byte
 * swizzled, which is exactly the layout the wgmma descriptors read.
 * Consumers keep one group of 4 wgmmas in flight and release a stage as
 * soon as the group that read it has retired.  The epilogue stores the
 * accumulators straight from registers as float2 (8 bytes, 32-byte sectors
 * filled by each quad), masking rows past m and columns past n.  Rows of x
 * past m and of W past n read as zero (TMA out-of-bounds fill); W boxes
 * wholly past n are not loaded.
 *
 * Needs k a positive multiple of 64 (align_k) and n a multiple of 8 (the
 * float2 stores; align_n).
 */

#define WG_SMS 132
#define WG_THREADS 384
#define WG_BM 128
#define WG_BK 64

/* The device code computes the same choice from (m, n): keep both in step. */
static const char WGMMA_SRC[] =
    "/* qcore bf16 linear, Hopper: y[m,n] = x[m,k] . W[n,k]^T, bf16 in, f32 out; TMA + wgmma, warp-specialized */\n"
    "typedef unsigned long long u64;\n"
    "struct __align__(64) QcTmap { u64 opaque[16]; };\n"
    "#define WG_SMS 132\n"
    "#define WG_BM 128\n"
    "#define WG_BK 64\n"
    "#define WG_GROUP_M 8\n"
    "#define WG_A_BYTES (WG_BM * WG_BK * 2)\n"
    "#define WG_BOX_B_BYTES (64 * WG_BK * 2) /* one 64-row box of W */\n"
    "/* tile width: the one whose waves of WG_SMS tiles carry the most useful\n"
    "   columns, weighted by how fast a tile of that width runs */\n"
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
    "__device__ __forceinline__ void qc_wgmma256(float *d, unsigned long long da, unsigned long long db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, \"\n"
    "        \"%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, \"\n"
    "        \"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, \"\n"
    "        \"%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, \"\n"
    "        \"%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127\"\n"
    "        \"}, %128, %129, p, 1, 1, 0, 0;\\n}\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]),\n"
    "          \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]),\n"
    "          \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]),\n"
    "          \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31]),\n"
    "          \"+f\"(d[32]), \"+f\"(d[33]), \"+f\"(d[34]), \"+f\"(d[35]), \"+f\"(d[36]), \"+f\"(d[37]), \"+f\"(d[38]), \"+f\"(d[39]),\n"
    "          \"+f\"(d[40]), \"+f\"(d[41]), \"+f\"(d[42]), \"+f\"(d[43]), \"+f\"(d[44]), \"+f\"(d[45]), \"+f\"(d[46]), \"+f\"(d[47]),\n"
    "          \"+f\"(d[48]), \"+f\"(d[49]), \"+f\"(d[50]), \"+f\"(d[51]), \"+f\"(d[52]), \"+f\"(d[53]), \"+f\"(d[54]), \"+f\"(d[55]),\n"
    "          \"+f\"(d[56]), \"+f\"(d[57]), \"+f\"(d[58]), \"+f\"(d[59]), \"+f\"(d[60]), \"+f\"(d[61]), \"+f\"(d[62]), \"+f\"(d[63]),\n"
    "          \"+f\"(d[64]), \"+f\"(d[65]), \"+f\"(d[66]), \"+f\"(d[67]), \"+f\"(d[68]), \"+f\"(d[69]), \"+f\"(d[70]), \"+f\"(d[71]),\n"
    "          \"+f\"(d[72]), \"+f\"(d[73]), \"+f\"(d[74]), \"+f\"(d[75]), \"+f\"(d[76]), \"+f\"(d[77]), \"+f\"(d[78]), \"+f\"(d[79]),\n"
    "          \"+f\"(d[80]), \"+f\"(d[81]), \"+f\"(d[82]), \"+f\"(d[83]), \"+f\"(d[84]), \"+f\"(d[85]), \"+f\"(d[86]), \"+f\"(d[87]),\n"
    "          \"+f\"(d[88]), \"+f\"(d[89]), \"+f\"(d[90]), \"+f\"(d[91]), \"+f\"(d[92]), \"+f\"(d[93]), \"+f\"(d[94]), \"+f\"(d[95]),\n"
    "          \"+f\"(d[96]), \"+f\"(d[97]), \"+f\"(d[98]), \"+f\"(d[99]), \"+f\"(d[100]), \"+f\"(d[101]), \"+f\"(d[102]), \"+f\"(d[103]),\n"
    "          \"+f\"(d[104]), \"+f\"(d[105]), \"+f\"(d[106]), \"+f\"(d[107]), \"+f\"(d[108]), \"+f\"(d[109]), \"+f\"(d[110]), \"+f\"(d[111]),\n"
    "          \"+f\"(d[112]), \"+f\"(d[113]), \"+f\"(d[114]), \"+f\"(d[115]), \"+f\"(d[116]), \"+f\"(d[117]), \"+f\"(d[118]), \"+f\"(d[119]),\n"
    "          \"+f\"(d[120]), \"+f\"(d[121]), \"+f\"(d[122]), \"+f\"(d[123]), \"+f\"(d[124]), \"+f\"(d[125]), \"+f\"(d[126]), \"+f\"(d[127])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "__device__ __forceinline__ void qc_wgmma192(float *d, unsigned long long da, unsigned long long db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %98, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, \"\n"
    "        \"%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, \"\n"
    "        \"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95\"\n"
    "        \"}, %96, %97, p, 1, 1, 0, 0;\\n}\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]),\n"
    "          \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]),\n"
    "          \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]),\n"
    "          \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31]),\n"
    "          \"+f\"(d[32]), \"+f\"(d[33]), \"+f\"(d[34]), \"+f\"(d[35]), \"+f\"(d[36]), \"+f\"(d[37]), \"+f\"(d[38]), \"+f\"(d[39]),\n"
    "          \"+f\"(d[40]), \"+f\"(d[41]), \"+f\"(d[42]), \"+f\"(d[43]), \"+f\"(d[44]), \"+f\"(d[45]), \"+f\"(d[46]), \"+f\"(d[47]),\n"
    "          \"+f\"(d[48]), \"+f\"(d[49]), \"+f\"(d[50]), \"+f\"(d[51]), \"+f\"(d[52]), \"+f\"(d[53]), \"+f\"(d[54]), \"+f\"(d[55]),\n"
    "          \"+f\"(d[56]), \"+f\"(d[57]), \"+f\"(d[58]), \"+f\"(d[59]), \"+f\"(d[60]), \"+f\"(d[61]), \"+f\"(d[62]), \"+f\"(d[63]),\n"
    "          \"+f\"(d[64]), \"+f\"(d[65]), \"+f\"(d[66]), \"+f\"(d[67]), \"+f\"(d[68]), \"+f\"(d[69]), \"+f\"(d[70]), \"+f\"(d[71]),\n"
    "          \"+f\"(d[72]), \"+f\"(d[73]), \"+f\"(d[74]), \"+f\"(d[75]), \"+f\"(d[76]), \"+f\"(d[77]), \"+f\"(d[78]), \"+f\"(d[79]),\n"
    "          \"+f\"(d[80]), \"+f\"(d[81]), \"+f\"(d[82]), \"+f\"(d[83]), \"+f\"(d[84]), \"+f\"(d[85]), \"+f\"(d[86]), \"+f\"(d[87]),\n"
    "          \"+f\"(d[88]), \"+f\"(d[89]), \"+f\"(d[90]), \"+f\"(d[91]), \"+f\"(d[92]), \"+f\"(d[93]), \"+f\"(d[94]), \"+f\"(d[95])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "__device__ __forceinline__ void qc_wgmma128(float *d, unsigned long long da, unsigned long long db, int scale_d) {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %66, 0;\\n\"\n"
    "        \"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {\"\n"
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n"
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n"
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n"
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63\"\n"
    "        \"}, %64, %65, p, 1, 1, 0, 0;\\n}\\n\"\n"
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]),\n"
    "          \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]),\n"
    "          \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]),\n"
    "          \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31]),\n"
    "          \"+f\"(d[32]), \"+f\"(d[33]), \"+f\"(d[34]), \"+f\"(d[35]), \"+f\"(d[36]), \"+f\"(d[37]), \"+f\"(d[38]), \"+f\"(d[39]),\n"
    "          \"+f\"(d[40]), \"+f\"(d[41]), \"+f\"(d[42]), \"+f\"(d[43]), \"+f\"(d[44]), \"+f\"(d[45]), \"+f\"(d[46]), \"+f\"(d[47]),\n"
    "          \"+f\"(d[48]), \"+f\"(d[49]), \"+f\"(d[50]), \"+f\"(d[51]), \"+f\"(d[52]), \"+f\"(d[53]), \"+f\"(d[54]), \"+f\"(d[55]),\n"
    "          \"+f\"(d[56]), \"+f\"(d[57]), \"+f\"(d[58]), \"+f\"(d[59]), \"+f\"(d[60]), \"+f\"(d[61]), \"+f\"(d[62]), \"+f\"(d[63])\n"
    "        : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n"
    "}\n"
    "template <int BN> __device__ __forceinline__ void qc_wgmma(float *d, u64 da, u64 db, int scale_d) {\n"
    "    if constexpr (BN == 256) qc_wgmma256(d, da, db, scale_d);\n"
    "    else if constexpr (BN == 192) qc_wgmma192(d, da, db, scale_d);\n"
    "    else qc_wgmma128(d, da, db, scale_d);\n"
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
    "__device__ __forceinline__ void qc_wg_gemm(const QcTmap *tmx, const QcTmap *tmw, float *y, long long m, long long n,\n"
    "                                           long long k, unsigned char *smem, unsigned long long *bars) {\n"
    "    const unsigned STAGE = WG_A_BYTES + BN * WG_BK * 2;\n"
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
    "    const int kt_n = (int)(k / WG_BK);\n"
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
    "                for (int kt = 0; kt < kt_n; kt++) {\n"
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
    "        float acc[BN / 2];\n"
    "        int s = 0, prev = 0;\n"
    "        unsigned ph = 0;\n"
    "        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {\n"
    "            long long tm, tn;\n"
    "            qc_wg_tile(t, tiles_m, tiles_n, &tm, &tn);\n"
    "            for (int kt = 0; kt < kt_n; kt++) {\n"
    "                qc_mbar_wait(full + 8 * s, ph);\n"
    "                const unsigned sa = base + s * STAGE + c * (64 * 128), sb = base + s * STAGE + WG_A_BYTES;\n"
    "                qc_wg_fence();\n"
    "#pragma unroll\n"
    "                for (int kk = 0; kk < WG_BK / 16; kk++) /* 16 k = 32 B further along the swizzled rows */\n"
    "                    qc_wgmma<BN>(acc, qc_desc(sa + 32 * kk), qc_desc(sb + 32 * kk), kt > 0 || kk > 0);\n"
    "                qc_wg_commit();\n"
    "                if (kt > 0) { /* the previous step's group has read its stage: hand it back */\n"
    "                    qc_wg_wait<1>();\n"
    "                    if (lane == 0) qc_mbar_arrive(empty + 8 * prev);\n"
    "                }\n"
    "                prev = s;\n"
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n"
    "            }\n"
    "            qc_wg_wait<0>();\n"
    "            if (kt_n > 0 && lane == 0) qc_mbar_arrive(empty + 8 * prev);\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < BN / 2; i++) asm volatile(\"\" : \"+f\"(acc[i])::\"memory\");\n"
    "            /* accumulator i of a thread: row 16 warp + lane/4 (+8 for i%4 >= 2), column 8 (i/4) + 2 (lane%4) + i%2 */\n"
    "            const long long r0 = tm * WG_BM + c * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    "            const long long cb = tn * BN + 2 * (lane & 3);\n"
    "            float *y0 = y + r0 * n, *y1 = y + r1 * n;\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < BN / 8; j++) {\n"
    "                const long long cn = cb + 8 * j;\n"
    "                if (cn < n) {\n"
    "                    if (r0 < m) *(float2 *)(y0 + cn) = make_float2(acc[4 * j], acc[4 * j + 1]);\n"
    "                    if (r1 < m) *(float2 *)(y1 + cn) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "/* x and w are read only through their tensor maps (built by the host from the same pointers) */\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) qc_bf16_linear_wgmma(const unsigned short *x,\n"
    "        const unsigned short *w, float *y, long long m, long long n, long long k,\n"
    "        const __grid_constant__ QcTmap tmx, const __grid_constant__ QcTmap tmw) {\n"
    "    extern __shared__ __align__(1024) unsigned char smem[];\n"
    "    __shared__ __align__(8) unsigned long long bars[2 * 6];\n"
    "    (void)x;\n"
    "    (void)w;\n"
    "    if (m <= 0 || n <= 0) return;\n"
    "    if (k <= 0) { /* an empty sum */\n"
    "        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m * n;\n"
    "             i += (long long)gridDim.x * blockDim.x) y[i] = 0.f;\n"
    "        return;\n"
    "    }\n"
    "    switch (qc_wg_bn(m, n)) {\n"
    "    case 256: qc_wg_gemm<256, 4>(&tmx, &tmw, y, m, n, k, smem, bars); break;\n"
    "    case 192: qc_wg_gemm<192, 5>(&tmx, &tmw, y, m, n, k, smem, bars); break;\n"
    "    default: qc_wg_gemm<128, 6>(&tmx, &tmw, y, m, n, k, smem, bars); break;\n"
    "    }\n"
    "}\n";

void qc_wgmma_plan(int64_t m, int64_t n, int *bn, int *stages, uint32_t *smem_bytes, int64_t *tiles) {
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
    /* the stages, plus slack to align the ring to 1024 B */
    *smem_bytes = (uint32_t)sts[pick] * (WG_BM * WG_BK * 2 + (uint32_t)bns[pick] * WG_BK * 2) + 1024;
    *tiles = n > 0 ? tm * ((n + bns[pick] - 1) / bns[pick]) : 0;
}

/* m, n of the linear problem; one persistent block per SM at most */
static void wgmma_dims(const qc_problem *p, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    int bn, st;
    uint32_t smem;
    int64_t tiles;
    qc_wgmma_plan(p->m, p->n, &bn, &st, &smem, &tiles);
    d->grid[0] = (uint32_t)(tiles < WG_SMS ? tiles : WG_SMS);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = WG_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = smem;
}

static int wgmma_eligible(const qc_problem *p, qc_reason *why) {
    if (p->k <= 0 || p->k % WG_BK != 0) {
        qc_reason_set(why, "align_k", "bf16.linear_wgmma needs k a positive multiple of %d, layer has k = %lld", WG_BK,
                      (long long)p->k);
        return 0;
    }
    if (p->n <= 0 || p->n % 8 != 0 || p->n > (1ll << 31) - 256) {
        qc_reason_set(why, "align_n", "bf16.linear_wgmma needs n a positive multiple of 8 below 2^31, layer has n = %lld",
                      (long long)p->n);
        return 0;
    }
    if (p->m < 1 || p->m > (1ll << 31) - WG_BM) { /* row coordinates of the TMA boxes are 32-bit */
        qc_reason_set(why, "m_range", "bf16.linear_wgmma takes 1 <= m < 2^31 - 128, batch has m = %lld",
                      (long long)p->m);
        return 0;
    }
    return 1;
}

static double bf16_bits_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The reference: bf16 inputs as they are, products summed in double, stored as f32. */
static void wgmma_ref(const uint16_t *x, const uint16_t *w, float *y, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const uint16_t *xr = x + i * k, *wr = w + j * k;
            double acc = 0;
            for (int64_t t = 0; t < k; t++) acc += bf16_bits_value(xr[t]) * bf16_bits_value(wr[t]);
            y[i * n + j] = (float)acc;
        }
}

static const qc_kernel_param WGMMA_PARAMS[] = {
    {"x.bf16", QC_PARAM_PTR}, {"w.weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64},      {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

/* x in boxes of 128 rows, W in boxes of 64 rows (BN/64 per stage), both 64
 * k wide: 128 bytes, the 128-byte swizzle span */
static const qc_tensor_map_spec WGMMA_MAPS[] = {
    {"x.bf16", QC_DT_BF16, "m", "k", WG_BM, WG_BK, 128},
    {"w.weight", QC_DT_BF16, "n", "k", 64, WG_BK, 128},
};

qc_status qc_wgmma_kernels_register(const qc_host_api *api, qc_host *host) {
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = "bf16.linear_wgmma",
        .format = "bf16",
        .phases = QC_PHASE_ANY,
        .m_min = 9, /* at m = 16 (Llama-3-8B shapes) it took 0.3-0.6x the GEMV time; it takes any m >= 1 */
        .m_max = (1ll << 31) - WG_BM,
        .arch = {90, 90}, /* sm_90a only: wgmma and setmaxnreg */
        .n_params = sizeof WGMMA_PARAMS / sizeof WGMMA_PARAMS[0],
        .params = WGMMA_PARAMS,
        .reference = (void (*)(void))wgmma_ref,
        .cuda_source = WGMMA_SRC,
        .cuda_entry = "qc_bf16_linear_wgmma",
        .launch_dims = wgmma_dims,
        .eligible = wgmma_eligible,
        .n_tensor_maps = sizeof WGMMA_MAPS / sizeof WGMMA_MAPS[0],
        .tensor_maps = WGMMA_MAPS,
    };
    return api->register_kernel(host, &k);
}
