/* wgmma_c7514.cu - when ptxas serializes wgmma (C7514) around a second accumulator; compile, nothing runs:
 *   nvcc -arch=sm_90a -cubin -Xptxas -v -I plugins/fp8/cuda -DLOOPED=1 bench/probe/wgmma_c7514.cu   -> C7514
 *   nvcc -arch=sm_90a -cubin -Xptxas -v -I plugins/fp8/cuda -DLOOPED=0 bench/probe/wgmma_c7514.cu   -> none
 * LOOPED=1 keeps one group in flight across the loop's back edge (issue k+1 into one accumulator, wait_group 1,
 * read the other); even though each read follows the wait that retires its group, ptxas (CUDA 13.0) serializes every
 * wgmma.  LOOPED=0 issues two stages a trip and waits for both inside it (wait_group 1, read the first, wait_group 0,
 * read the second): no group crosses the back edge and nothing is serialized.  cuda/wgmma.cu's FP8_DBL128 path is
 * the second form (session 20). */
typedef unsigned long long u64;
#include "wgmma_e4m3.inc"
#ifndef LOOPED
#define LOOPED 1
#endif
__device__ __forceinline__ void fence_wg() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit_wg() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_wg() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
extern "C" __global__ void __launch_bounds__(128, 1) probe(float *out, u64 da, u64 db, int stages) {
    float a0[64], a1[64], tot[64];
    for (int i = 0; i < 64; i++) tot[i] = 0.f;
    auto issue = [&](float *a, int k) { fence_wg(); qc_wgmma_e4m3_128(a, da + 2 * k, db + 2 * k, 0); commit_wg(); };
    auto promote = [&](float *a) {
        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(a[i])::"memory");
        for (int i = 0; i < 64; i++) tot[i] += a[i];
    };
#if LOOPED
    issue(a0, 0);
    for (int k = 1; k < stages; k += 2) {
        issue(a1, k), wait_wg<1>(), promote(a0);
        issue(a0, k + 1), wait_wg<1>(), promote(a1);
    }
    wait_wg<0>(), promote(a0);
#else
    for (int k = 0; k < stages; k += 2) {
        issue(a0, k), issue(a1, k + 1);
        wait_wg<1>(), promote(a0);
        wait_wg<0>(), promote(a1);
    }
#endif
    for (int i = 0; i < 64; i++) out[threadIdx.x * 64 + i] = tot[i];
}
