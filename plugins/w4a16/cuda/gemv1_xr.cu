/* w4a16.gemv1_xr_sym: y[n] = x[k] . W4[n,k]^T at m = 1 (g128, sym), each warp holding its K slice of x in registers. */
/*
 * Why another m = 1 GEMV.  gemv1 / gemv1_tma re-read x for every row pair (from L1 or shared memory: as many
 * bytes as the codes) and spend 11 instructions on a word of 8 codes; session 15 measured their arithmetic alone
 * as long as the bytes.  Here x is read once a warp, and a word costs 7 (3 shifts, 4 lop3):
 *
 *   lop3(w >> 4 s, 0x000F000F, 0x43004300) = bf16x2 (128 + q_2s, 128 + q_2s+1),  s = 0..3
 *
 * (pack_version 2: element 2p at nibble p, 2p + 1 at nibble p + 4.)  No bf16 subtract: each product (128 + q) x
 * is exact in f32, and a segment's sum exceeds sum (q - 8) x by corr = 136 sum x, which depends on x only: each
 * lane computes it once for its segments and subtracts it from the tensor cores' f32 sum before the group scale
 * (XR_EXACT=1 subtracts 136 per weight instead, as gemv1 does: 4 more bf16x2 fma a word).  (A 16 q nibble at bits
 * 4-7 would save the shifts in f16, not in bf16: its top bit lands on bf16's exponent.)
 *
 * Fragments (as gemv1, PTX ISA "mma.m16n8k16" A/B/D layouts): one step is 512 bytes (1024 codes, eight g128
 * groups) of each row of a pair (ra, rb = ra + 1).  Lane (g, t) loads bytes 64 g + 16 t of the step of both rows;
 * the mma's A rows g are row ra's segment g, rows g + 8 row rb's, and B's column g is x at the lane's own codes,
 * so D[g][g] / D[g + 8][g] are the two rows' sums over segment g (one group); the other outputs are not used.
 * A warp load is 512 contiguous bytes.
 *
 * Work: a block's warps are RG row groups x KS K slices (KS = steps / S, S = 2 steps a slice when the step count
 * is even, else 1; the host's launch gives blockDim = 32 RG KS).  Warp (rg, ks) keeps x of its S steps in 16 S
 * registers, walks the block's row pairs rg, rg + RG, ... with XR_D pairs of codes and scales in flight (a
 * register ring), and after each pair adds its lanes' diagonal sums across the warp (fixed order).  With KS > 1
 * the slices' sums meet in shared memory and are added in slice order: deterministic.  Block b of G takes row
 * pairs [b P / G, (b + 1) P / G) of the P = n / 2 pairs (n % 8 == 0 by the format's rules).
 *
 * PDL: codes and scales are never written, so the first XR_D pairs are requested before qc_grid_wait; x after.
 */
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long long ll;

#ifndef XR_D /* row pairs of codes in flight a warp */
#define XR_D 2
#endif
#ifndef XR_EXACT /* 1: subtract 128 + 8 per weight (bf16x2 fma) instead of the per-segment correction */
#define XR_EXACT 0
#endif
#ifndef XR_PF /* 1: code loads ask the L2 for 256-byte prefetches */
#define XR_PF 0
#endif
#ifndef XR_TRIGGER /* PDL: 0 dependents launch when it ends, 1 when a block is done with its rows, 2 at the start */
#define XR_TRIGGER 0
#endif
#define XR_MAX_WARPS 16

__device__ __forceinline__ void xr_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* (w & 0x000F000F) | 0x43004300 as one lop3 (written in C, ptxas emits two instructions): bf16x2 (128 + q, 128 + q') */
__device__ __forceinline__ u32 xr_pair(u32 w) {
    u32 v;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w), "n"(0x000F000F), "n"(0x43004300));
    return v;
}
__device__ __forceinline__ u32 xr_fma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ float xr_h2f(u32 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((u16)h));
    return f;
}
__device__ __forceinline__ float xr_bf(u32 h) { return __uint_as_float(h << 16); }
/* 16 bytes of codes, streamed once: not kept in L1 */
__device__ __forceinline__ uint4 xr_ldq(const u8 *p) {
    uint4 v;
#if XR_PF
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#endif
    return v;
}
__device__ __forceinline__ u32 xr_lds(const u16 *p) {
    u16 v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

/* one row pair's codes (S steps of rows ra, rb) and the lane's group scales of them */
template <int S> struct XrPair {
    uint4 a[S], b[S];
    u32 sa[S], sb[S];
};

template <int S>
__device__ __forceinline__ void xr_load(XrPair<S> &p, const u8 *qa, int rowb, const u16 *sa, int ng) {
#pragma unroll
    for (int c = 0; c < S; c++) {
        p.a[c] = xr_ldq(qa + c * 512);
        p.b[c] = xr_ldq(qa + rowb + c * 512);
        p.sa[c] = xr_lds(sa + c * 8);
        p.sb[c] = xr_lds(sa + ng + c * 8);
    }
}

/* the pair's two row sums over the warp's K slice, as the diagonal lanes hold them (0 elsewhere) */
template <int S>
__device__ __forceinline__ void xr_pair_sums(const XrPair<S> &p, const u32 (*xv)[4][4], const float *corr, bool odd,
                                             bool diag, float &va, float &vb) {
    float ta = 0.f, tb = 0.f;
#pragma unroll
    for (int c = 0; c < S; c++) {
        float part[4] = {0.f, 0.f, 0.f, 0.f};
        const u32 A[4] = {p.a[c].x, p.a[c].y, p.a[c].z, p.a[c].w}, B[4] = {p.b[c].x, p.b[c].y, p.b[c].z, p.b[c].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* pairs s = 2h (slots 2t, 2t + 1) and s = 2h + 1 (slots 2t + 8, 2t + 9) of both rows' word j */
                u32 a0 = xr_pair(A[j] >> (8 * h)), a1 = xr_pair(B[j] >> (8 * h));
                u32 a2 = xr_pair(A[j] >> (8 * h + 4)), a3 = xr_pair(B[j] >> (8 * h + 4));
#if XR_EXACT
                /* (128 + q) - 136 = q - 8, exact */
                a0 = xr_fma2(a0, 0x3F803F80u, 0xC308C308u), a1 = xr_fma2(a1, 0x3F803F80u, 0xC308C308u);
                a2 = xr_fma2(a2, 0x3F803F80u, 0xC308C308u), a3 = xr_fma2(a3, 0x3F803F80u, 0xC308C308u);
#endif
                xr_mma(part, a0, a1, a2, a3, xv[c][j][2 * h], xv[c][j][2 * h + 1]);
            }
        }
        float da = odd ? part[1] : part[0], db = odd ? part[3] : part[2];
#if !XR_EXACT
        da -= corr[c], db -= corr[c];
#endif
        ta = fmaf(xr_h2f(p.sa[c]), da, ta);
        tb = fmaf(xr_h2f(p.sb[c]), db, tb);
    }
    va = diag ? ta : 0.f;
    vb = diag ? tb : 0.f;
}

/* va over the warp into lanes 0..15, vb into lanes 16..31 (one exchange of the two, then four halvings) */
__device__ __forceinline__ float xr_warp_sum2(float va, float vb, int lane) {
    const bool up = lane & 16;
    float v = (up ? vb : va) + __shfl_xor_sync(0xffffffffu, up ? va : vb, 16);
#pragma unroll
    for (int o = 8; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int S>
__device__ __forceinline__ void xr_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, ll n, ll k, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int steps = (int)(k >> 10), ks_n = steps / S, rg_n = (int)(blockDim.x >> 5) / ks_n;
    const int ks = warp % ks_n, rg = warp / ks_n, rowb = (int)(k >> 1), ng = (int)(k >> 7);
    const ll P = n >> 1, pb0 = (ll)blockIdx.x * P / gridDim.x, pb1 = ((ll)blockIdx.x + 1) * P / gridDim.x;
    const ll mine = rg < rg_n && pb0 + rg < pb1 ? (pb1 - pb0 - rg + rg_n - 1) / rg_n : 0;
    const int c0 = ks * S;
    /* pair i of this warp: rows 2 (pb0 + rg + i rg_n) and the next */
    const u8 *qa = q + 2 * (pb0 + rg) * (ll)rowb + c0 * 512 + 64 * g + 16 * t;
    const u16 *sa = sc + 2 * (pb0 + rg) * (ll)ng + c0 * 8 + g;
    const ll qstep = 2 * (ll)rg_n * rowb, sstep = 2 * (ll)rg_n * ng;
    XrPair<S> ring[XR_D];
#pragma unroll
    for (int d = 0; d < XR_D; d++)
        if (d < mine) xr_load<S>(ring[d], qa + d * qstep, rowb, sa + d * sstep, ng);
    qc_grid_wait(); /* x and y from here on */
#if XR_TRIGGER == 2
    qc_grid_trigger();
#endif
    /* x at the lane's codes of its S steps, word j's 8 bf16 as loaded (the pairs (e0,e1) .. (e6,e7)); corr: 136 x
       the segment's sum of x, added over the quad (unused with XR_EXACT) */
    u32 xv[S][4][4];
    float corr[S];
#pragma unroll
    for (int c = 0; c < S; c++) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint4 v = __ldg((const uint4 *)(x + (c0 + c) * 1024 + 128 * g + 32 * t + 8 * j));
            const u32 e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                xv[c][j][i] = e[i];
                s += xr_bf(e[i] & 0xFFFFu) + xr_bf(e[i] >> 16);
            }
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        corr[c] = 136.f * s;
    }
    const bool odd = g & 1, diag = t == (g >> 1);
    for (ll i = 0; i < mine; i += XR_D) {
#pragma unroll
        for (int d = 0; d < XR_D; d++) {
            if (i + d < mine) {
                float va, vb;
                xr_pair_sums<S>(ring[d], xv, corr, odd, diag, va, vb);
                if (i + d + XR_D < mine)
                    xr_load<S>(ring[d], qa + (i + d + XR_D) * qstep, rowb, sa + (i + d + XR_D) * sstep, ng);
                const float v = xr_warp_sum2(va, vb, lane);
                const ll pair = pb0 + rg + (i + d) * rg_n;
                if ((lane & 15) == 0) {
                    if (ks_n == 1) y[2 * pair + (lane >> 4)] = v;
                    else red[((pair - pb0) * ks_n + ks) * 2 + (lane >> 4)] = v;
                }
            }
        }
    }
#if XR_TRIGGER == 1
    qc_grid_trigger();
#endif
    if (ks_n == 1) return;
    __syncthreads();
    /* the slices' sums in slice order */
    for (ll r = threadIdx.x; r < 2 * (pb1 - pb0); r += blockDim.x) {
        const ll pl = r >> 1;
        float v = 0.f;
        for (int s = 0; s < ks_n; s++) v += red[(pl * ks_n + s) * 2 + (r & 1)];
        y[2 * pb0 + r] = v;
    }
}

extern "C" __global__ void __launch_bounds__(32 * XR_MAX_WARPS, 1)
    qc_w4x_gemv1_sym(const u16 *x, const u8 *q, const u16 *sc, float *y, ll m, ll n, ll k, ll gs) {
    extern __shared__ float red[];
    if (m != 1 || n <= 0 || (n & 7) || k <= 0 || (k & 1023) || gs != 128) return;
    if ((k >> 10) & 1) xr_gemv<1>(x, q, sc, y, n, k, red);
    else xr_gemv<2>(x, q, sc, y, n, k, red);
}
