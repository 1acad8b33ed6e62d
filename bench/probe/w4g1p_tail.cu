/* probe: w4a16.gemv1_sym with persistent warps: a warp runs GPW consecutive 4-row groups with one continuous
   two-stage pipeline (the next group's first step is loaded during the last step of this one), no K split */
__device__ __forceinline__ void w4p_load(W4gStage<2> &s, const u8 *q, const u16 *sc, ll n, ll k, ll grp, ll st,
                                         int g, int t) {
    const ll ng = k >> 7;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        ll ra = grp * 4 + 2 * r, rb = ra + 1;
        ra = ra < n ? ra : n - 1;
        rb = rb < n ? rb : n - 1;
        w4f_ldq<4>(q + ra * (k / 2) + 64 * g + 16 * t + st * 512, s.wa[r]);
        w4f_ldq<4>(q + rb * (k / 2) + 64 * g + 16 * t + st * 512, s.wb[r]);
        s.sa[r] = __ldg(sc + ra * ng + 8 * st + g);
        s.sb[r] = __ldg(sc + rb * ng + 8 * st + g);
    }
}
template <int WPB>
__device__ __forceinline__ void w4p_gemv(const u16 *x, const u8 *q, const u16 *sc, float *y, ll n, ll k, ll gpw) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const ll steps = k >> 10, groups = (n + 3) / 4;
    const ll g0 = ((ll)blockIdx.x * WPB + warp) * gpw;
    const ll g1 = g0 + gpw < groups ? g0 + gpw : groups;
    if (g0 >= g1) return;
    const ll items = (g1 - g0) * steps;
    const u16 *xr = x + 128 * g + 32 * t;
    const bool odd = g & 1, diag = t == (g >> 1);
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    W4gStage<2> s0, s1;
    ll grp = g0, st = 0;       /* the item computed next */
    ll lgrp = g0, lst = 0;     /* the item loaded next */
    w4p_load(s0, q, sc, n, k, lgrp, lst, g, t);
    if (++lst == steps) lst = 0, lgrp++;
    for (ll i = 0; i < items; i += 2) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (i + h >= items) break;
            if (i + h + 1 < items) {
                w4p_load(h ? s0 : s1, q, sc, n, k, lgrp, lst, g, t);
                if (++lst == steps) lst = 0, lgrp++;
            }
            w4g_compute<2>(h ? s1 : s0, acc, 0, xr + st * 1024, odd);
            if (++st == steps) {
#pragma unroll
                for (int r = 0; r < 2; r++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float v = diag ? acc[r][e] : 0.f;
#pragma unroll
                        for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                        if (lane == 0 && grp * 4 + 2 * r + e < n) y[grp * 4 + 2 * r + e] = v;
                        acc[r][e] = 0.f;
                    }
                st = 0, grp++;
            }
        }
    }
}
#define W4P(NAME, WPB, MINB) \
extern "C" __global__ void __launch_bounds__(32 * WPB, MINB) NAME(const u16 *x, const u8 *q, const u16 *s, float *y, ll m, ll n, ll k, ll gpw) { \
    w4p_gemv<WPB>(x, q, s, y, n, k, gpw); }
W4P(p_w4_b4, 4, 4) W4P(p_w8_b2, 8, 2) W4P(p_w1_b16, 1, 16)
