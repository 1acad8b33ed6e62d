/* cuda_shim.h - the CUDA vocabulary a kernel source needs to compile as host C++: vector types, qualifiers, bit casts, __byte_perm. */
/*
 * Shared by the CPU emulations of GPU kernels (plugins/mxfp4/tests/emu,
 * plugins/kv_fp8/tests/emu); each adds its own threads, warps and the
 * collectives its kernel uses.  Qualifiers expand to nothing (__shared__ to
 * static: one block runs at a time).
 */
#ifndef QC_CUDA_SHIM_H
#define QC_CUDA_SHIM_H
#include <cstring>

struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return {a, b}; }
struct dim3 { unsigned x = 1, y = 1, z = 1; };
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __global__
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(a)

static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
/* byte s_i (i = 0..3) of the result is byte (s >> 4i) & 7 of the 8 bytes b:a */
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
    unsigned char by[8];
    for (int i = 0; i < 4; i++) by[i] = (a >> (8 * i)) & 255, by[4 + i] = (b >> (8 * i)) & 255;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)by[(s >> (4 * i)) & 7] << (8 * i);
    return r;
}
#endif
