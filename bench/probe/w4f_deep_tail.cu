/* probe entries: the fragment GEMV with DEPTH register stages (DEPTH - 1 chunks loaded ahead, not 1) */
template <int GW, int R, int NB, int DEPTH>
__device__ __forceinline__ void w4d_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, int m, int n, ll k,
                                         int n0, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int ks = blockDim.x >> 5;
    const ll ng = k / (32 * GW), chunks = k >> 7;
    const ll cpw = (chunks + ks - 1) / ks, c0 = warp * cpw, c1 = c0 + cpw < chunks ? c0 + cpw : chunks;
    const u8 *qa[R];
    const u16 *sa[R], *xr[NB];
    int dq[R], ds[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int ra = n0 + 16 * r + g, rb = ra + 8;
        ra = ra < n ? ra : n - 1;
        rb = rb < n ? rb : n - 1;
        qa[r] = q + (ll)ra * (k / 2) + 4 * GW * t;
        dq[r] = (rb - ra) * (int)(k / 2);
        sa[r] = sc + ra * ng;
        ds[r] = (rb - ra) * (int)ng;
    }
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        const int xi = g + 8 * nb < m ? g + 8 * nb : m - 1;
        xr[nb] = x + (ll)xi * k + 8 * GW * t;
    }
    float acc[R][NB][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[r][nb][e] = 0.f;
    constexpr int GPC = 4 / GW;
#pragma unroll
    for (int r = 0; r < R; r++) qa[r] += c0 * 64, sa[r] += c0 * GPC;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) xr[nb] += c0 * 128;
    W4fStage<R, NB> st[DEPTH];
#pragma unroll
    for (int d = 0; d < DEPTH - 1; d++)
        if (c0 + d < c1) w4f_load<GW, R, NB>(st[d], d, qa, dq, sa, ds);
    for (ll c = c0; c < c1; c += DEPTH) {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {
            if (c + d < c1) {
                if (c + d + DEPTH - 1 < c1) w4f_load<GW, R, NB>(st[(d + DEPTH - 1) % DEPTH], d + DEPTH - 1, qa, dq, sa, ds);
                w4f_compute<GW, R, NB>(st[d], acc, d, xr);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) qa[r] += 64 * DEPTH, sa[r] += DEPTH * GPC;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) xr[nb] += 128 * DEPTH;
    }
    constexpr int NA = R * NB * 4;
    if (ks > 1) {
        if (warp > 0) {
#pragma unroll
            for (int i = 0; i < NA; i++) red[((warp - 1) * NA + i) * 32 + lane] = (&acc[0][0][0])[i];
        }
        __syncthreads();
        if (warp == 0)
            for (int w = 1; w < ks; w++)
#pragma unroll
                for (int i = 0; i < NA; i++) (&acc[0][0][0])[i] += red[((w - 1) * NA + i) * 32 + lane];
    }
    if (warp > 0) return;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int xi = 8 * nb + 2 * t + (e & 1), wi = n0 + 16 * r + g + 8 * (e >> 1);
                if (xi < m && wi < n) y[(ll)xi * n + wi] = acc[r][nb][e];
            }
}
#define W4D(NAME, R, NB, D, MAXT, MINB) \
extern "C" __global__ void __launch_bounds__(MAXT, MINB) NAME(const u16 *x, const u8 *q, const u16 *s, float *y, ll m, ll n, ll k, ll gs) { \
    extern __shared__ float red[]; \
    w4d_gemv<4, R, NB, D>(x, q, s, y, (int)m, (int)n, k, blockIdx.x * 16 * R, red); }
W4D(d3_r1_nb1_80, 1, 1, 3, 256, 3) W4D(d4_r1_nb1_96, 1, 1, 4, 256, 2) W4D(d3_r1_nb1_96, 1, 1, 3, 256, 2)
W4D(d2_r1_nb1_72, 1, 1, 2, 256, 3) W4D(d6_r1_nb1_128, 1, 1, 6, 256, 1) W4D(d3_r2_nb1_128, 2, 1, 3, 256, 1)
W4D(d3_r1_nb2_96, 1, 2, 3, 256, 2) W4D(d4_r1_nb2_128, 1, 2, 4, 256, 1) W4D(d3_r2_nb2_128, 2, 2, 3, 256, 1)
