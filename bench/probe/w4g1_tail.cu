/* probe: the M = 1 GEMV with whole-line loads.  mma rows g = 0..7 of a tile are eight 64-byte segments of ONE W row
   (a 512-byte run: four full lines a load), rows g + 8 the same segments of a second W row; B column g is x at
   segment g's codes, so D[g][g] and D[g + 8][g] are the two rows' partial sums over segment g (one g128 group);
   lanes t == g / 2 hold them, the rest of D is discarded.  A warp owns 2 R rows and a K slice; KS warps split K. */
template <int R> struct W4gStage { u32 wa[R][4], wb[R][4]; u16 sa[R], sb[R]; };
template <int R>
__device__ __forceinline__ void w4g_load(W4gStage<R> &s, int c, const u8 *const *qa, const int *dq, const u16 *const *sp, const int *ds) {
#pragma unroll
    for (int r = 0; r < R; r++) {
        w4f_ldq<4>(qa[r] + c * 512, s.wa[r]);
        w4f_ldq<4>(qa[r] + dq[r] + c * 512, s.wb[r]);
        s.sa[r] = __ldg(sp[r] + c * 8);
        s.sb[r] = __ldg(sp[r] + ds[r] + c * 8);
    }
}
template <int R>
__device__ __forceinline__ void w4g_compute(const W4gStage<R> &s, float (*acc)[2], int c, const u16 *xr, bool odd) {
    uint4 xv[4];
#pragma unroll
    for (int j = 0; j < 4; j++) xv[j] = __ldg((const uint4 *)(xr + c * 1024 + 8 * j));
#pragma unroll
    for (int r = 0; r < R; r++) {
        float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 A = s.wa[r][j], B = s.wb[r][j];
            const u32 b[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const u32 a0 = w4f_pair(A >> (8 * h)), a1 = w4f_pair(B >> (8 * h));
                const u32 a2 = w4f_pair(A >> (8 * h + 4)), a3 = w4f_pair(B >> (8 * h + 4));
                w4f_mma(part, a0, a1, a2, a3, b[2 * h], b[2 * h + 1]);
            }
        }
        acc[r][0] = fmaf(w4f_h2f(s.sa[r]), odd ? part[1] : part[0], acc[r][0]);
        acc[r][1] = fmaf(w4f_h2f(s.sb[r]), odd ? part[3] : part[2], acc[r][1]);
    }
}
template <int R>
__device__ __forceinline__ void w4g_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int n, ll k, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int ks = blockDim.x >> 5;
    const ll ng = k >> 7, chunks = k >> 10; /* 512-byte runs a row */
    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;
    const int n0 = blockIdx.x * 2 * R;
    const u8 *qa[R];
    const u16 *sp[R];
    int dq[R], ds[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int ra = n0 + 2 * r, rb = ra + 1;
        ra = ra < n ? ra : n - 1;
        rb = rb < n ? rb : n - 1;
        qa[r] = q + (ll)ra * (k / 2) + 64 * g + 16 * t + c0 * 512;
        dq[r] = (rb - ra) * (int)(k / 2);
        sp[r] = sc + (ll)ra * ng + g + c0 * 8;
        ds[r] = (rb - ra) * (int)ng;
    }
    const u16 *xr = x + 128 * g + 32 * t + c0 * 1024;
    const bool odd = g & 1;
    float acc[R][2];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = 0.f;
    W4gStage<R> s0, s1;
    if (c0 < c1) w4g_load<R>(s0, 0, qa, dq, sp, ds);
    for (ll c = c0; c < c1; c += 2) {
        if (c + 1 < c1) w4g_load<R>(s1, 1, qa, dq, sp, ds);
        w4g_compute<R>(s0, acc, 0, xr, odd);
        if (c + 1 >= c1) break;
        if (c + 2 < c1) w4g_load<R>(s0, 2, qa, dq, sp, ds);
        w4g_compute<R>(s1, acc, 1, xr, odd);
#pragma unroll
        for (int r = 0; r < R; r++) qa[r] += 1024, sp[r] += 16;
        xr += 2048;
    }
    /* the diagonal: lane (g, g / 2) holds segment g's sums; add the eight segments (fixed order) */
    const bool diag = t == (g >> 1);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float v = diag ? acc[r][e] : 0.f;
#pragma unroll
            for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            acc[r][e] = v;
        }
    constexpr int NA = 2 * R;
    if (ks > 1) {
        if (warp > 0 && lane == 0) {
#pragma unroll
            for (int i = 0; i < NA; i++) red[(warp - 1) * NA + i] = (&acc[0][0])[i];
        }
        __syncthreads();
        if (warp == 0)
            for (int w = 1; w < ks; w++)
#pragma unroll
                for (int i = 0; i < NA; i++) (&acc[0][0])[i] += red[(w - 1) * NA + i];
    }
    if (warp > 0 || lane > 0) return;
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (n0 + 2 * r < n) y[n0 + 2 * r] = acc[r][0];
        if (n0 + 2 * r + 1 < n) y[n0 + 2 * r + 1] = acc[r][1];
    }
}
template <int R, int DEPTH>
__device__ __forceinline__ void w4h_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int n, ll k, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int ks = blockDim.x >> 5;
    const ll ng = k >> 7, chunks = k >> 10; /* 512-byte runs a row */
    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;
    const int n0 = blockIdx.x * 2 * R;
    const u8 *qa[R];
    const u16 *sp[R];
    int dq[R], ds[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int ra = n0 + 2 * r, rb = ra + 1;
        ra = ra < n ? ra : n - 1;
        rb = rb < n ? rb : n - 1;
        qa[r] = q + (ll)ra * (k / 2) + 64 * g + 16 * t + c0 * 512;
        dq[r] = (rb - ra) * (int)(k / 2);
        sp[r] = sc + (ll)ra * ng + g + c0 * 8;
        ds[r] = (rb - ra) * (int)ng;
    }
    const u16 *xr = x + 128 * g + 32 * t + c0 * 1024;
    const bool odd = g & 1;
    float acc[R][2];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = 0.f;
    W4gStage<R> st[DEPTH];
#pragma unroll
    for (int d = 0; d < DEPTH - 1; d++)
        if (c0 + d < c1) w4g_load<R>(st[d], d, qa, dq, sp, ds);
    for (ll c = c0; c < c1; c += DEPTH) {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {
            if (c + d < c1) {
                if (c + d + DEPTH - 1 < c1) w4g_load<R>(st[(d + DEPTH - 1) % DEPTH], d + DEPTH - 1, qa, dq, sp, ds);
                w4g_compute<R>(st[d], acc, d, xr, odd);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) qa[r] += 512 * DEPTH, sp[r] += 8 * DEPTH;
        xr += 1024 * DEPTH;
    }
    /* the diagonal: lane (g, g / 2) holds segment g's sums; add the eight segments (fixed order) */
    const bool diag = t == (g >> 1);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float v = diag ? acc[r][e] : 0.f;
#pragma unroll
            for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            acc[r][e] = v;
        }
    constexpr int NA = 2 * R;
    if (ks > 1) {
        if (warp > 0 && lane == 0) {
#pragma unroll
            for (int i = 0; i < NA; i++) red[(warp - 1) * NA + i] = (&acc[0][0])[i];
        }
        __syncthreads();
        if (warp == 0)
            for (int w = 1; w < ks; w++)
#pragma unroll
                for (int i = 0; i < NA; i++) (&acc[0][0])[i] += red[(w - 1) * NA + i];
    }
    if (warp > 0 || lane > 0) return;
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (n0 + 2 * r < n) y[n0 + 2 * r] = acc[r][0];
        if (n0 + 2 * r + 1 < n) y[n0 + 2 * r + 1] = acc[r][1];
    }
}
#define W4G(NAME, R, MAXT, MINB) \
extern "C" __global__ void __launch_bounds__(MAXT, MINB) NAME(const u16 *x, const u8 *q, const u16 *s, float *y, ll m, ll n, ll k, ll gs) { \
    extern __shared__ float red[]; \
    w4g_gemv<R>(x, q, s, y, (int)n, k, red); }
#define W4H(NAME, R, D, MAXT, MINB) \
extern "C" __global__ void __launch_bounds__(MAXT, MINB) NAME(const u16 *x, const u8 *q, const u16 *s, float *y, ll m, ll n, ll k, ll gs) { \
    extern __shared__ float red[]; \
    w4h_gemv<R, D>(x, q, s, y, (int)n, k, red); }
W4G(g1_r1_b8, 1, 128, 8) W4G(g1_r1_b4, 1, 256, 4) W4G(g1_r2_b4, 2, 256, 4) W4G(g1_r2_b3, 2, 256, 3) W4G(g1_r4_b2, 4, 256, 2)
W4G(g1_r1_b2, 1, 256, 2) W4G(g1_r2_b2, 2, 256, 2)
W4H(h_r1_d3_b3, 1, 3, 256, 3) W4H(h_r1_d4_b2, 1, 4, 256, 2) W4H(h_r1_d6_b2, 1, 6, 256, 2) W4H(h_r2_d3_b2, 2, 3, 256, 2) W4H(h_r2_d4_b2, 2, 4, 256, 2) W4H(h_r2_d4_b1, 2, 4, 256, 1) W4H(h_r1_d8_b1, 1, 8, 256, 1)
