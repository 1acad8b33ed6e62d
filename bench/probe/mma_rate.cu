/* mma_rate.cu - tensor-instruction rates an SM sustains at the decode GEMV's shapes: mma.sync m16n8k16 bf16 (what
   the w4a16 / mxfp4 GEMVs issue, 256 weights each) against wgmma m64n8k16 with A from registers (1024 weights a
   warpgroup).  Each block times its own loop with clock64; out[block] = cycles, sink keeps the sums live. */
typedef unsigned int u32;
typedef unsigned long long u64;
__device__ __forceinline__ void mma16816(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* C independent accumulator chains a warp, ITER rounds of C mmas */
template <int C>
__device__ void mma_loop(int iters, u64 *out, float *sink) {
    float d[C][4] = {};
    u32 a = 0x3F803F80u ^ threadIdx.x, b = 0x3F803F80u;
    __syncthreads();
    const u64 t0 = clock64();
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int c = 0; c < C; c++) mma16816(d[c], a ^ c, a, a + c, a, b, b ^ i);
    }
    __syncthreads();
    const u64 t1 = clock64();
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < C; c++) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1234.5f) sink[threadIdx.x] = s;
    if (threadIdx.x == 0) out[blockIdx.x] = t1 - t0;
}
__device__ __forceinline__ void wgmma_n8(float *d, const u32 *a, u64 db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
/* each warpgroup: ITER rounds of G wgmmas over C accumulators (round robin), committed a round; WAIT groups kept in
   flight (wait_group WAIT after each commit) */
template <int G, int C, int WAIT>
__device__ void wgmma_loop(int iters, u64 *out, float *sink) {
    __shared__ __align__(1024) unsigned char bs[4096];
    for (int i = threadIdx.x; i < 4096 / 4; i += blockDim.x) ((u32 *)bs)[i] = 0x3F803F80u;
    __syncthreads();
    const u32 addr = (u32)__cvta_generic_to_shared(bs);
    /* K-major B, no swizzle: 8 x 16-byte core matrices; LBO = 128 B (next core matrix along K), SBO = 256 B */
    const u64 db = (u64)((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(256 >> 4) << 32);
    float d[C][4] = {};
    u32 a[G][4];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int r = 0; r < 4; r++) a[g][r] = 0x3F803F80u ^ (threadIdx.x + g + r);
    const u64 t0 = clock64();
    for (int i = 0; i < iters; i++) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int g = 0; g < G; g++) wgmma_n8(d[g % C], a[g], db);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(WAIT) : "memory");
#pragma unroll
        for (int g = 0; g < G; g++) a[g][0] ^= (u32)i; /* new A a round (the registers are free once waited) */
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
    const u64 t1 = clock64();
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < C; c++) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1234.5f) sink[threadIdx.x] = s;
    if (threadIdx.x == 0) out[blockIdx.x] = t1 - t0;
}
#define MMA(C) extern "C" __global__ void __launch_bounds__(512, 1) mma_c##C(int it, u64 *o, float *s) { mma_loop<C>(it, o, s); }
MMA(1) MMA(2) MMA(4) MMA(8)
#define WG(G, C, W) extern "C" __global__ void __launch_bounds__(512, 1) wg_##G##_##C##_##W(int it, u64 *o, float *s) { wgmma_loop<G, C, W>(it, o, s); }
WG(8, 1, 0) WG(8, 2, 0) WG(8, 4, 0) WG(16, 2, 0) WG(8, 2, 1) WG(16, 4, 0)
