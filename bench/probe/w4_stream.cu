/* w4_stream.cu - load-only probes: how fast can the w4a16 decode GEMV's access patterns stream W at all. */
typedef unsigned int u32;
typedef unsigned char u8;
typedef long long ll;
__device__ __forceinline__ uint4 ldnc(const u8 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 mix(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

/* the fragment GEMV's pattern: block = KS warps over 16 R rows, lane (g,t) reads 16 B at rows g, g+8 of each tile
   per 128-code chunk (64 B a row), D chunks loaded before any is used; warps split K in contiguous slices */
template <int D, int R>
__device__ void frag(const u8 *q, ll n, ll k, u32 *out) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3, ks = blockDim.x >> 5;
    const ll chunks = k >> 7, cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;
    const ll n0 = (ll)blockIdx.x * 16 * R;
    const u8 *pa[R], *pb[R];
    for (int r = 0; r < R; r++) {
        ll ra = n0 + 16 * r + g, rb = ra + 8;
        ra = ra < n ? ra : n - 1; rb = rb < n ? rb : n - 1;
        pa[r] = q + ra * (k / 2) + 16 * t; pb[r] = q + rb * (k / 2) + 16 * t;
    }
    u32 acc = 0;
    for (ll c = c0; c < c1; c += D) {
        uint4 v[D][R][2];
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                ll cc = c + d < c1 ? c + d : c1 - 1;
                v[d][r][0] = ldnc(pa[r] + cc * 64); v[d][r][1] = ldnc(pb[r] + cc * 64);
            }
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int r = 0; r < R; r++) acc += mix(v[d][r][0]) ^ mix(v[d][r][1]);
    }
    if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
/* contiguous: each warp reads D x 512 contiguous bytes per trip, grid-stride (a plain read stream) */
template <int D>
__device__ void contig(const u8 *q, ll bytes, u32 *out) {
    const int lane = threadIdx.x & 31;
    const ll wid = ((ll)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((ll)gridDim.x * blockDim.x) >> 5;
    u32 acc = 0;
    for (ll base = wid * 512 * D; base < bytes; base += nw * 512 * D) {
        uint4 v[D];
#pragma unroll
        for (int d = 0; d < D; d++) { ll o = base + d * 512 + lane * 16; v[d] = ldnc(q + (o < bytes ? o : 0)); }
#pragma unroll
        for (int d = 0; d < D; d++) acc += mix(v[d]);
    }
    if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
/* row span: as frag, but lane t reads S consecutive 16 B pieces of its rows (a quad covers 64 S contiguous bytes
   of a row per trip, the 4 lanes adjacent) */
template <int S, int R>
__device__ void span(const u8 *q, ll n, ll k, u32 *out) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3, ks = blockDim.x >> 5;
    const ll rowb = k / 2, pieces = rowb / (64 * S), ppw = (pieces + ks - 1) / ks, c0 = warp * ppw,
             c1 = c0 + ppw < pieces ? c0 + ppw : pieces;
    const ll n0 = (ll)blockIdx.x * 16 * R;
    u32 acc = 0;
    for (ll c = c0; c < c1; c++) {
        uint4 v[R][2][S];
#pragma unroll
        for (int r = 0; r < R; r++) {
            ll ra = n0 + 16 * r + g, rb = ra + 8;
            ra = ra < n ? ra : n - 1; rb = rb < n ? rb : n - 1;
#pragma unroll
            for (int s = 0; s < S; s++) {
                v[r][0][s] = ldnc(q + ra * rowb + c * 64 * S + (t * S + s) * 16);
                v[r][1][s] = ldnc(q + rb * rowb + c * 64 * S + (t * S + s) * 16);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int s = 0; s < S; s++) acc += mix(v[r][0][s]) ^ mix(v[r][1][s]);
    }
    if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
#define FRAG(D, R) extern "C" __global__ void __launch_bounds__(512) frag_##D##_##R(const u8 *q, ll n, ll k, u32 *o) { frag<D, R>(q, n, k, o); }
FRAG(1, 1) FRAG(2, 1) FRAG(4, 1) FRAG(8, 1) FRAG(1, 2) FRAG(2, 2) FRAG(4, 2)
#define CONTIG(D) extern "C" __global__ void __launch_bounds__(512) contig_##D(const u8 *q, ll b, u32 *o) { contig<D>(q, b, o); }
CONTIG(1) CONTIG(2) CONTIG(4) CONTIG(8)
#define SPAN(S, R) extern "C" __global__ void __launch_bounds__(512) span_##S##_##R(const u8 *q, ll n, ll k, u32 *o) { span<S, R>(q, n, k, o); }
SPAN(2, 1) SPAN(4, 1) SPAN(8, 1) SPAN(2, 2) SPAN(4, 2)
extern "C" __global__ void empty_k(u32 *o) { if (threadIdx.x == 9999) o[0] = 1; }
