/* gemv1_xr.cuh - the m = 1 GEMV skeleton with x held in registers that w4a16.gemv1_xr_sym and mxfp4.gemv1_xr share (pasted before each format's cuda/gemv1_xr.cu at build time). */
/*
 * Why.  gemv1 / gemv1_tma re-read x for every row pair (from L1 or shared memory: as many bytes as the codes)
 * and session 15 measured their arithmetic alone as long as the bytes.  Here each warp reads x of its K slice
 * once and keeps it in registers for all of its rows; the format's policy F decodes codes into mma A registers.
 *
 * Fragments (as gemv1, PTX ISA "mma.m16n8k16" A/B/D layouts): one step is 512 bytes (1024 4-bit codes) of each
 * row of a pair (ra, rb = ra + 1).  Lane (g, t) loads bytes 64 g + 16 t of the step of both rows; the mma's A
 * rows g are row ra's segment g, rows g + 8 row rb's, and B's column g is x at the lane's own codes, so D[g][g]
 * and D[g + 8][g] are the two rows' sums over segment g (128 codes); the other outputs are not used.  A warp load
 * is 512 contiguous bytes.
 *
 * Work: a block's warps are RG row groups x KS K slices (KS = steps / S, S = 2 steps a slice when the step count
 * is even, else 1; the host's launch gives blockDim = 32 RG KS).  Warp (rg, ks) keeps x of its S steps in 16 S
 * registers, walks the block's row pairs rg, rg + RG, ... with XR_D pairs of codes and scales in flight (a
 * register ring), and after each pair adds its lanes' diagonal sums across the warp (fixed order).  With KS > 1
 * the slices' sums meet in shared memory and are added in slice order: deterministic.  Block b of G takes row
 * pairs [b P / G, (b + 1) P / G) of the P = ceil(n / 2) pairs; an odd n's last pair reads its last row twice and
 * stores it once.
 *
 * PDL: codes and scales are never written, so the first XR_D pairs are requested before qc_grid_wait; x after.
 *
 * The policy F: sc_t (scale element), SSTEP (scale elements a step), srow(k) (scale elements a row), soff(g, t)
 * (the lane's first scale of a step), lds(p) (a scale load), xregs(v, b) (word j's four B registers from x's 8
 * bf16), corr(s) (a correction from the segment's sum of x, subtracted from each diagonal sum), big(sa, sb) (1:
 * the rare decode path), a_regs<BIG>(wa, wb, h, sa, sb, a) (mma h's A registers from rows ra / rb's word),
 * finish(d, corr, s) (a diagonal sum's contribution).
 */
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long long ll;

#ifndef XR_D /* row pairs of codes in flight a warp */
#define XR_D 2
#endif
#ifndef XR_PF /* 1: code loads ask the L2 for 256-byte prefetches */
#define XR_PF 0
#endif
#ifndef XR_TRIGGER /* PDL: 0 dependents launch when it ends, 1 when a block is done with its rows, 2 at the start */
#define XR_TRIGGER 0
#endif
#define XR_MAX_WARPS 16

__device__ __forceinline__ void xr_mma(float *d, const u32 *a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ u32 xr_fma2(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
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

/* one row pair's codes (S steps of rows ra, rb) and the lane's scales of them */
template <int S> struct XrPair {
    uint4 a[S], b[S];
    u32 sa[S], sb[S];
};

/* drow / dscale: row rb's offset from ra in code bytes / scale elements (0 for an odd n's last row) */
template <class F, int S>
__device__ __forceinline__ void xr_load(XrPair<S> &p, const u8 *qa, int drow, const typename F::sc_t *sa, int dscale) {
#pragma unroll
    for (int c = 0; c < S; c++) {
        p.a[c] = xr_ldq(qa + c * 512);
        p.b[c] = xr_ldq(qa + drow + c * 512);
        p.sa[c] = F::lds(sa + c * F::SSTEP);
        p.sb[c] = F::lds(sa + dscale + c * F::SSTEP);
    }
}

/* the pair's two row sums over the warp's K slice, as the diagonal lanes hold them (0 elsewhere) */
template <class F, bool BIG, int S>
__device__ __forceinline__ void xr_pair_sums(const XrPair<S> &p, const u32 (*xv)[4][4], const float *corr, bool odd,
                                             bool diag, float &va, float &vb) {
    float ta = 0.f, tb = 0.f;
#pragma unroll
    for (int c = 0; c < S; c++) {
        float part[4] = {0.f, 0.f, 0.f, 0.f};
        const u32 A[4] = {p.a[c].x, p.a[c].y, p.a[c].z, p.a[c].w}, B[4] = {p.b[c].x, p.b[c].y, p.b[c].z, p.b[c].w};
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                u32 a[4];
                F::template a_regs<BIG>(A[j], B[j], h, p.sa[c], p.sb[c], a);
                xr_mma(part, a, xv[c][j][2 * h], xv[c][j][2 * h + 1]);
            }
        ta += F::finish(odd ? part[1] : part[0], corr[c], p.sa[c]);
        tb += F::finish(odd ? part[3] : part[2], corr[c], p.sb[c]);
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

template <class F, int S>
__device__ __forceinline__ void xr_gemv(const u16 *x, const u8 *q, const typename F::sc_t *sc, float *y, ll n, ll k,
                                        float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int steps = (int)(k >> 10), ks_n = steps / S, rg_n = (int)(blockDim.x >> 5) / ks_n;
    const int ks = warp % ks_n, rg = warp / ks_n, rowb = (int)(k >> 1), srow = (int)F::srow(k);
    const ll P = (n + 1) >> 1, pb0 = (ll)blockIdx.x * P / gridDim.x, pb1 = ((ll)blockIdx.x + 1) * P / gridDim.x;
    const ll mine = rg < rg_n && pb0 + rg < pb1 ? (pb1 - pb0 - rg + rg_n - 1) / rg_n : 0;
    const int c0 = ks * S;
    /* pair i of this warp: rows 2 (pb0 + rg + i rg_n) and the next.  Pairs are loaded in order: the next one's
       codes, scales and row rb advance by a row group's stride */
    const u8 *lq = q + 2 * (pb0 + rg) * (ll)rowb + c0 * 512 + 64 * g + 16 * t;
    const typename F::sc_t *ls = sc + 2 * (pb0 + rg) * (ll)srow + c0 * F::SSTEP + F::soff(g, t);
    const ll qstep = 2 * (ll)rg_n * rowb, sstep = 2 * (ll)rg_n * srow;
    ll lrb = 2 * (pb0 + rg) + 1;
    auto load = [&](XrPair<S> &r) {
        const bool two = lrb < n; /* an odd n's last pair reads its last row twice */
        xr_load<F, S>(r, lq, two ? rowb : 0, ls, two ? srow : 0);
        lq += qstep, ls += sstep, lrb += 2 * rg_n;
    };
    XrPair<S> ring[XR_D];
#pragma unroll
    for (int d = 0; d < XR_D; d++)
        if (d < mine) load(ring[d]);
    qc_grid_wait(); /* x and y from here on */
#if XR_TRIGGER == 2
    qc_grid_trigger();
#endif
    /* x at the lane's codes of its S steps as the format's B registers; corr from the segment's sum of x (the
       quad's, added by shuffles) */
    u32 xv[S][4][4];
    float corr[S];
#pragma unroll
    for (int c = 0; c < S; c++) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint4 v = __ldg((const uint4 *)(x + (c0 + c) * 1024 + 128 * g + 32 * t + 8 * j));
            F::xregs(v, xv[c][j]);
            if (F::CORR) {
                const u32 e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int i = 0; i < 4; i++) s += xr_bf(e[i] & 0xFFFFu) + xr_bf(e[i] >> 16);
            }
        }
        if (F::CORR) {
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
        }
        corr[c] = F::corr(s);
    }
    const bool odd = g & 1, diag = t == (g >> 1);
    for (ll i = 0; i < mine; i += XR_D) {
#pragma unroll
        for (int d = 0; d < XR_D; d++) {
            if (i + d < mine) {
                float va, vb;
                if (F::BIG_PATH && __any_sync(0xffffffffu, F::big(ring[d])))
                    xr_pair_sums<F, true, S>(ring[d], xv, corr, odd, diag, va, vb);
                else
                    xr_pair_sums<F, false, S>(ring[d], xv, corr, odd, diag, va, vb);
                if (i + d + XR_D < mine) load(ring[d]);
                const float v = xr_warp_sum2(va, vb, lane);
                const ll pair = pb0 + rg + (i + d) * rg_n, row = 2 * pair + (lane >> 4);
                if ((lane & 15) == 0) {
                    if (ks_n == 1) {
                        if (row < n) y[row] = v;
                    } else {
                        red[((pair - pb0) * ks_n + ks) * 2 + (lane >> 4)] = v;
                    }
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
    const ll r1 = 2 * pb1 < n ? 2 * pb1 : n;
    for (ll r = 2 * pb0 + threadIdx.x; r < r1; r += blockDim.x) {
        const ll pl = (r >> 1) - pb0;
        float v = 0.f;
        for (int s = 0; s < ks_n; s++) v += red[(pl * ks_n + s) * 2 + (r & 1)];
        y[r] = v;
    }
}
