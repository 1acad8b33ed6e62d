/* qc_wgmma_ra_src.h - CUDA source text (for NVRTC, sm_90a) of the bf16 warpgroup MMA with A from registers, shared by the kernels that use it (header only). */
#ifndef QC_PLUGIN_WGMMA_RA_SRC_H
#define QC_PLUGIN_WGMMA_RA_SRC_H

/* qc_wgmma_ra64<TB> / qc_wgmma_ra128<TB>: D[64 x N] (+)= A[64 x 16] B[16 x N] in f32, bf16 operands.  a: this
 * thread's 4 words of A in mma.sync's m16n8k16 A layout (rows 16 w .. 16 w + 15 for warp w of the warpgroup);
 * db: B's shared-memory descriptor; scale_d 0 overwrites D; TB 0: B K-major, 1: MN-major (imm-trans-b).  d: N / 2
 * accumulators a thread (row 16 w + lane / 4 (+ 8 for i % 4 >= 2), column 8 (i / 4) + 2 (lane % 4) + i % 2).  The
 * caller fences (wgmma.fence) and commits / waits. */
#define QC_WGMMA_RA_SRC \
    "template <int TB>\n" \
    "__device__ __forceinline__ void qc_wgmma_ra64(float *d, const unsigned *a, unsigned long long db, int scale_d) {\n" \
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %37, 0;\\n\"\n" \
    "        \"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {\"\n" \
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n" \
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31\"\n" \
    "        \"}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\\n}\\n\"\n" \
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]),\n" \
    "          \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]),\n" \
    "          \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]),\n" \
    "          \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31])\n" \
    "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d), \"n\"(TB));\n" \
    "}\n" \
    "template <int TB>\n" \
    "__device__ __forceinline__ void qc_wgmma_ra128(float *d, const unsigned *a, unsigned long long db, int scale_d) {\n" \
    "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %69, 0;\\n\"\n" \
    "        \"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {\"\n" \
    "        \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \"\n" \
    "        \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \"\n" \
    "        \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \"\n" \
    "        \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63\"\n" \
    "        \"}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\\n}\\n\"\n" \
    "        : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]), \"+f\"(d[4]), \"+f\"(d[5]), \"+f\"(d[6]), \"+f\"(d[7]),\n" \
    "          \"+f\"(d[8]), \"+f\"(d[9]), \"+f\"(d[10]), \"+f\"(d[11]), \"+f\"(d[12]), \"+f\"(d[13]), \"+f\"(d[14]), \"+f\"(d[15]),\n" \
    "          \"+f\"(d[16]), \"+f\"(d[17]), \"+f\"(d[18]), \"+f\"(d[19]), \"+f\"(d[20]), \"+f\"(d[21]), \"+f\"(d[22]), \"+f\"(d[23]),\n" \
    "          \"+f\"(d[24]), \"+f\"(d[25]), \"+f\"(d[26]), \"+f\"(d[27]), \"+f\"(d[28]), \"+f\"(d[29]), \"+f\"(d[30]), \"+f\"(d[31]),\n" \
    "          \"+f\"(d[32]), \"+f\"(d[33]), \"+f\"(d[34]), \"+f\"(d[35]), \"+f\"(d[36]), \"+f\"(d[37]), \"+f\"(d[38]), \"+f\"(d[39]),\n" \
    "          \"+f\"(d[40]), \"+f\"(d[41]), \"+f\"(d[42]), \"+f\"(d[43]), \"+f\"(d[44]), \"+f\"(d[45]), \"+f\"(d[46]), \"+f\"(d[47]),\n" \
    "          \"+f\"(d[48]), \"+f\"(d[49]), \"+f\"(d[50]), \"+f\"(d[51]), \"+f\"(d[52]), \"+f\"(d[53]), \"+f\"(d[54]), \"+f\"(d[55]),\n" \
    "          \"+f\"(d[56]), \"+f\"(d[57]), \"+f\"(d[58]), \"+f\"(d[59]), \"+f\"(d[60]), \"+f\"(d[61]), \"+f\"(d[62]), \"+f\"(d[63])\n" \
    "        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(scale_d), \"n\"(TB));\n" \
    "}\n" \
    ""

#endif
