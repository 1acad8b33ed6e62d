/* fp8 W8A8 decode linear (m <= 16) with W as the A operand of mma.m16n8k32 e4m3: weight bytes go from the 16-byte loads into the mma as they are */
/*
 * Computed transposed, y^T = W xq^T: A = 16 rows of W by 32 k, B = xq^T (32 k by 8 x rows; a second mma
 * for x rows 8..15 when m > 8), f32 accumulation.  PTX ISA "Matrix Fragments for mma.m16n8k32" (8-bit
 * types): lane (g = lane / 4, t = lane % 4) holds A registers a0 = row g, k slots 4t..4t+3; a1 = row
 * g+8, slots 4t..4t+3; a2 = row g, slots 16+4t..16+4t+3; a3 = row g+8, slots 16+4t..; each register's
 * bytes low to high.  B b0 = k slots 4t..4t+3 of column g, b1 = slots 16+4t..; D c0, c1 = row g,
 * columns 2t, 2t+1; c2, c3 = row g+8.
 *
 * The 32 k slots of an mma only have to be the same k in A and B, not consecutive.  K goes in chunks of
 * 64: lane t loads 16 bytes of W row g (P), of W row g+8 (Q) and of x row g (X) at k = 64c + 16t.
 * Mma h (0, 1) of the chunk takes A = {P.word[2h], Q.word[2h], P.word[2h+1], Q.word[2h+1]} and B =
 * {X.word[2h], X.word[2h+1]}: slot 4t+i is k = 64c + 16t + 8h + i, slot 16+4t+i is k + 4, in A and B
 * alike, and the two mmas of the four lanes t cover the chunk's 64 k once.  So a weight byte goes
 * from its load into the mma as it is (sm_89: QMMA; sm_90 has no e4m3 mma.sync in hardware and ptxas
 * converts the operands to f16 for HMMA there, F2FP: only wgmma takes e4m3 natively on Hopper): per
 * chunk and 16 rows, 2 weight loads, 1 x load (2 at m > 8), 2 mmas (4).  A batch's mmas start from
 * zero and their sum is added into an f32 total (FP8 tensor cores may keep a shorter accumulator; this
 * bounds a chain to 64 U products); block mode scales each chunk's sum.
 *
 * Work: a block owns one 16-row tile of W (n0 = 16 blockIdx.x) and its KS = blockDim / 32 warps
 * split the chunks into contiguous slices of ceil(chunks / KS) (the host's plan: fp8_gemv_mma_ks in
 * fp8_kernels.c, about one resident wave of 32 warps an SM).  A warp issues the loads of U chunks
 * (weights with ld.global.nc.L1::no_allocate, x through L1: every block reads it) before their mmas;
 * whole batches without predicates, then one predicated batch for the rest of its slice (at most U
 * chunks; a ragged last chunk of K reads zeros past k, k % 16 == 0).  The warps' totals meet in
 * shared memory and are added in warp order (deterministic), one output per thread.
 * FP8_MODE 0 channel: y = sum * (xs[i] * ws[j]); 1 tensor: sum * (xs[i] * ws[0]); 2 block: each chunk
 * lies in one 128-K group, tot = fmaf(chunk sum, xs[i, grp] * ws[j / 128, grp], tot), y = tot.  x rows
 * past m read row 0: they only feed D columns (x rows) that are not stored; n % 16 == 0 (eligibility):
 * every W row read is < n.  The batch sizes U (2 at m <= 8, 1 at m > 8) keep a thread within 64
 * registers (two 512-thread blocks an SM) without spills in the loops: 32 warps x 2 KB of weights in
 * flight an SM.
 */
#define GM_MAXKS 16
#ifndef GM_U1
#define GM_U1 2 /* chunks a batch at m <= 8 */
#endif
#ifndef GM_U2
#define GM_U2 1 /* at m > 8 (two x loads a chunk) */
#endif

#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemv_mma_channel
#elif FP8_MODE == 1
#define QC_ENTRY qc_fp8_gemv_mma_tensor
#else
#define QC_ENTRY qc_fp8_gemv_mma_block
#endif

typedef long long ll;

/* d = A B (C = 0), then d += A B */
__device__ __forceinline__ void qc_mma_e4m3_z(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.f));
}
__device__ __forceinline__ void qc_mma_e4m3(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint4 gm_ld_stream(const u8 *p) { /* weights are read once: keep them out of L1 */
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* one chunk's loads: W rows g, g+8 and x rows g (+8) of this lane, and (block mode) its scales */
template <int NB> struct GmChunk {
    uint4 p, q, x[NB];
#if FP8_MODE == 2
    float sx[NB][2], sw; /* xs of D columns 2t, 2t+1 (+8), ws of the tile, this chunk's 128-K group */
#endif
};

/* cv: chunk c is in the warp's slice (its scales exist); ok: and this lane's 16 bytes lie below k */
template <int NB>
__device__ __forceinline__ void gm_load(GmChunk<NB> &s, int c, bool cv, bool ok, const u8 *wp, const u8 *wq,
                                        const u8 *const *xr, const float *const (*xsr)[2], const float *wsr) {
    const unsigned kp = (unsigned)c * 64u;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    s.p = ok ? gm_ld_stream(wp + kp) : zero;
    s.q = ok ? gm_ld_stream(wq + kp) : zero;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) s.x[nb] = ok ? __ldg((const uint4 *)(xr[nb] + kp)) : zero;
#if FP8_MODE == 2
    const int grp = c >> 1; /* 64-K chunk c lies in 128-K group c / 2 */
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        s.sx[nb][0] = cv ? __ldg(xsr[nb][0] + grp) : 0.f;
        s.sx[nb][1] = cv ? __ldg(xsr[nb][1] + grp) : 0.f;
    }
    s.sw = cv ? __ldg(wsr + grp) : 0.f;
#else
    (void)cv, (void)xsr, (void)wsr;
#endif
}

/* the two mmas of a chunk into part (first: part = A B when fresh, else part += A B) */
template <int NB>
__device__ __forceinline__ void gm_mma(const GmChunk<NB> &s, float (*part)[4], bool fresh) {
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        if (fresh)
            qc_mma_e4m3_z(part[nb], s.p.x, s.q.x, s.p.y, s.q.y, s.x[nb].x, s.x[nb].y);
        else
            qc_mma_e4m3(part[nb], s.p.x, s.q.x, s.p.y, s.q.y, s.x[nb].x, s.x[nb].y);
        qc_mma_e4m3(part[nb], s.p.z, s.q.z, s.p.w, s.q.w, s.x[nb].z, s.x[nb].w);
    }
}
/* a batch of U loaded chunks (nvalid of them in the slice) into the f32 totals: channel / tensor sum the
 * batch in the tensor cores (at most 64 U products a chain) and add it; block scales each chunk */
template <int NB, int U>
__device__ __forceinline__ void gm_compute(const GmChunk<NB> *s, int nvalid, float (*acc)[4]) {
#if FP8_MODE == 2
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (u >= nvalid) break;
        float part[NB][4];
        gm_mma<NB>(s[u], part, true);
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const float s0 = s[u].sx[nb][0] * s[u].sw, s1 = s[u].sx[nb][1] * s[u].sw;
            acc[nb][0] = fmaf(part[nb][0], s0, acc[nb][0]);
            acc[nb][1] = fmaf(part[nb][1], s1, acc[nb][1]);
            acc[nb][2] = fmaf(part[nb][2], s0, acc[nb][2]);
            acc[nb][3] = fmaf(part[nb][3], s1, acc[nb][3]);
        }
    }
#else
    float part[NB][4];
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (u >= nvalid) break;
        gm_mma<NB>(s[u], part, u == 0);
    }
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[nb][e] += part[nb][e];
#endif
}

/* NB x tiles of 8 rows (m <= 8: 1), U chunks a batch */
template <int NB, int U>
__device__ __forceinline__ void gm_run(const u8 *xq, const float *xs, const u8 *w, const float *ws, float *y, int m,
                                       ll n, ll k, float *red) {
    const int ks = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const ll n0 = (ll)blockIdx.x * 16;
    /* chunk indices fit an int: k < 2^31 (eligibility) */
    const int nch = (int)((k + 63) >> 6), kfull = (int)(k >> 6), cpw = (nch + ks - 1) / ks;
    const int c0 = min(warp * cpw, nch), c1 = min(c0 + cpw, nch), cmain = min(c1, kfull);
    const u8 *wp = w + (n0 + g) * k + 16 * t, *wq = wp + 8 * k;
    const u8 *xr[NB]; /* x rows past m read row 0: only D columns that are not stored see them */
#pragma unroll
    for (int nb = 0; nb < NB; nb++) xr[nb] = xq + (g + 8 * nb < m ? (ll)(g + 8 * nb) * k : 0) + 16 * t;
    const float *xsr[NB][2];
    const float *wsr = ws;
#if FP8_MODE == 2
    const ll kb = (k + QC_FP8_BLOCK - 1) / QC_FP8_BLOCK;
    wsr = ws + (n0 / QC_FP8_BLOCK) * kb; /* the tile's 16 rows lie in one 128-row block (16 | 128) */
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int r = 8 * nb + 2 * t + j; /* D column: x row; rows past m read row 0, not stored */
            xsr[nb][j] = xs + (r < m ? (ll)r * kb : 0);
        }
#else
#pragma unroll
    for (int nb = 0; nb < NB; nb++) xsr[nb][0] = xsr[nb][1] = xs;
#endif
    float acc[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++) acc[nb][0] = acc[nb][1] = acc[nb][2] = acc[nb][3] = 0.f;
    int c = c0;
#pragma unroll 1
    for (; c + U <= cmain; c += U) { /* whole chunks: every load of the batch in flight before the first mma */
        GmChunk<NB> s[U];
#pragma unroll
        for (int u = 0; u < U; u++) gm_load<NB>(s[u], c + u, true, true, wp, wq, xr, xsr, wsr);
        gm_compute<NB, U>(s, U, acc);
    }
    if (c < c1) { /* the rest of the slice (< U whole chunks and maybe K's ragged last one): one batch */
        GmChunk<NB> s[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool cv = c + u < c1;
            gm_load<NB>(s[u], c + u, cv, cv && (ll)(c + u) * 64 + 16 * t < k, wp, wq, xr, xsr, wsr);
        }
        gm_compute<NB, U>(s, c1 - c, acc);
    }
    /* the K split: totals in shared memory, red[(warp * 4 NB + i) * 32 + lane] */
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[(warp * 4 * NB + 4 * nb + e) * 32 + lane] = acc[nb][e];
    __syncthreads();
    for (int v = threadIdx.x; v < 128 * NB; v += blockDim.x) {
        const int i = v >> 5, ln = v & 31, nb = i >> 2, e = i & 3;
        float sum = 0.f;
        for (int wi = 0; wi < ks; wi++) sum += red[(wi * 4 * NB + i) * 32 + ln];
        /* D element e of lane ln: W row g + 8 (e / 2), x row 8 nb + 2 t + e % 2 */
        const ll row = 8 * nb + 2 * (ln & 3) + (e & 1), col = n0 + (ln >> 2) + 8 * (e >> 1);
        if (row < m) {
#if FP8_MODE == 2
            y[row * n + col] = sum;
#elif FP8_MODE == 1
            y[row * n + col] = sum * (xs[row] * ws[0]);
#else
            y[row * n + col] = sum * (xs[row] * ws[col]);
#endif
        }
    }
}

/* 512 threads (KS 16) two blocks an SM: 64 registers */
extern "C" __global__ void __launch_bounds__(GM_MAXKS * 32, 2) QC_ENTRY(const u8 *xq, const float *xs, const u8 *w,
                                                                       const float *ws, float *y, ll m, ll n, ll k) {
    extern __shared__ float red[];
    /* the host refuses these (eligibility); a bad call does nothing */
    if (m <= 0 || m > 16 || n <= 0 || k <= 0 || k >= (1ll << 31) || (n & 15) || (k & 15) || (ll)blockIdx.x * 16 >= n)
        return;
    if (m > 8)
        gm_run<2, GM_U2>(xq, xs, w, ws, y, (int)m, n, k, red);
    else
        gm_run<1, GM_U1>(xq, xs, w, ws, y, (int)m, n, k, red);
}
