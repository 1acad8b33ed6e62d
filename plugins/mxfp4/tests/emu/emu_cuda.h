/* emu_cuda.h - host emulation of the CUDA the mxfp4 GEMV uses: one OS thread per CUDA thread, warp collectives by barriers. */
/*
 * Enough of CUDA to run the plugin's GEMV source on the CPU (test_gemv_emu.py
 * replaces its inline-asm helpers by emu_mul2 / emu_mma / a plain load):
 * threads of a block run as std::threads, __syncthreads is a block barrier,
 * __any_sync, __shfl_xor_sync and mma.sync m16n8k16 (bf16 in, f32 accumulate, the PTX
 * fragment layout) are warp collectives over per-warp barriers.  Blocks run
 * one after another; __shared__ arrays are function statics.  It checks the
 * kernel's index arithmetic and data layout, not its speed or the GPU's
 * rounding of subnormals.
 */
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include "../../../../tests/emu/cuda_shim.h"
thread_local dim3 threadIdx, blockIdx;
dim3 gridDim, blockDim;
template <class T> static inline T __ldg(const T *p) { return *p; }
struct Warp { std::barrier<> *bar; unsigned a[32][4], b[32][2]; float c[32][4], f[32]; bool v[32]; };
static Warp g_warps[32];
static std::barrier<> *g_block;
static inline void __syncthreads() { g_block->arrive_and_wait(); }
/* only mx_table uses it, in the GEMM that is not emulated */
static inline unsigned __shfl_sync(unsigned, unsigned v, int) { return v; }
static inline bool __any_sync(unsigned, bool p) {
    Warp &w = g_warps[threadIdx.x >> 5];
    int l = threadIdx.x & 31;
    w.v[l] = p;
    w.bar->arrive_and_wait();
    bool r = false;
    for (int i = 0; i < 32; i++) r |= w.v[i];
    w.bar->arrive_and_wait();
    return r;
}
/* a butterfly exchange (mxfp4.gemv1's sum of the eight segments) */
static inline float __shfl_xor_sync(unsigned, float v, int mask) {
    Warp &w = g_warps[threadIdx.x >> 5];
    int l = threadIdx.x & 31;
    w.f[l] = v;
    w.bar->arrive_and_wait();
    float r = w.f[l ^ mask];
    w.bar->arrive_and_wait();
    return r;
}
static inline float bf(unsigned h) { return __uint_as_float((h & 0xffffu) << 16); }
static inline unsigned f2bf(float f) { /* RNE; exact in these uses */
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}
static inline unsigned emu_mul2(unsigned a, unsigned b) {
    float lo = bf(a) * bf(b), hi = bf(a >> 16) * bf(b >> 16);
    return f2bf(lo) | (f2bf(hi) << 16);
}
/* m16n8k16 bf16: lane (g,t): a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..); b0 (2t.., col g), b1 (2t+8.., col g);
   d0,d1 (g, 2t, 2t+1), d2,d3 (g+8, ...) */
static inline float A_(Warp &w, int r, int kk) {
    int lane = (r & 7) * 4 + ((kk & 7) >> 1), reg = (r >= 8 ? 1 : 0) + (kk >= 8 ? 2 : 0);
    return bf(w.a[lane][reg] >> (16 * (kk & 1)));
}
static inline float B_(Warp &w, int kk, int c) {
    int lane = c * 4 + ((kk & 7) >> 1), reg = kk >= 8;
    return bf(w.b[lane][reg] >> (16 * (kk & 1)));
}
static inline void emu_mma(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    Warp &w = g_warps[threadIdx.x >> 5];
    int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) w.a[l][i] = a[i];
    w.b[l][0] = b0, w.b[l][1] = b1;
    w.bar->arrive_and_wait();
    for (int e = 0; e < 4; e++) {
        int r = g + (e >= 2 ? 8 : 0), c = 2 * t + (e & 1);
        float s = d[e];
        for (int kk = 0; kk < 16; kk++) s += A_(w, r, kk) * B_(w, kk, c);
        d[e] = s;
    }
    w.bar->arrive_and_wait();
}
