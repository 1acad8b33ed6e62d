/* fp8 linears with warp-level mma.sync: W8A8 E4M3 m16n8k32 (sm_89+) and the W8A16 path (sm_80+: bf16 x, weights to bf16) */
/*
 * 64 x 64 output tiles, 4 warps of 32 x 32 (2 m16 x 4 n8 fragments), K in tiles of 64 staged in
 * shared memory (rows padded so fragment loads hit 32 distinct banks); the next tile's global loads
 * are issued before the current tile's mmas.  Rows past m / n and K past k read as zero.
 *   FP8_MMA89: A = xq (E4M3 codes), B = qweight codes, mma m16n8k32 e4m3 -> f32.
 *   FP8_W8A16: A = x.bf16, B = qweight decoded to bf16 when staged (exact), mma m16n8k16 bf16 -> f32.
 * FP8_MODE 0 channel / 1 tensor: y = D * (a_s * w_s) (W8A16: y = D * w_s).  2 block: D restarts every
 * 128 K (two tiles) and is folded as tot = fmaf(D, a_s[i,g] * w_s[j/128,g], tot) (W8A16: w_s only).
 */
#define MM_T 64
#define MM_THREADS 128

#ifdef FP8_W8A16
#define A_STRIDE 72 /* u16 per row: 144 B = 36 words */
#define B_STRIDE 72
typedef u16 a_elem;
typedef u16 b_elem;
#else
#define A_STRIDE 80 /* bytes per row: 20 words */
#define B_STRIDE 80
typedef u8 a_elem;
typedef u8 b_elem;
#endif

__device__ __forceinline__ u32 qc_lds32(const void *p) { return *(const u32 *)p; }

#ifdef FP8_W8A16
/* E4M3 codes -> bf16 bits, two per word (exact: 4 significant bits) */
__device__ __forceinline__ u32 qc_e4m3x2_bf16x2(u32 two) {
    const u32 lo = __float_as_uint(qc_e4m3_f32_soft(two & 0xFFu)) >> 16;
    const u32 hi = __float_as_uint(qc_e4m3_f32_soft((two >> 8) & 0xFFu)) >> 16;
    return lo | hi << 16;
}
__device__ __forceinline__ void qc_mma_tile(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#define KSTEP 16 /* K per mma */
#define KBYTES 2 /* bytes per A element */
#else
__device__ __forceinline__ void qc_mma_tile(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#define KSTEP 32
#define KBYTES 1
#endif

#ifdef FP8_W8A16
#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_w8a16_channel
#elif FP8_MODE == 1
#define QC_ENTRY qc_fp8_w8a16_tensor
#else
#define QC_ENTRY qc_fp8_w8a16_block
#endif
extern "C" __global__ void __launch_bounds__(MM_THREADS) QC_ENTRY(const u16 *x, const u8 *w, const float *ws,
                                                                  float *y, long long m, long long n, long long k)
#else
#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemm_channel_mma
#elif FP8_MODE == 1
#define QC_ENTRY qc_fp8_gemm_tensor_mma
#else
#define QC_ENTRY qc_fp8_gemm_block_mma
#endif
extern "C" __global__ void __launch_bounds__(MM_THREADS) QC_ENTRY(const u8 *x, const float *xs, const u8 *w,
                                                                  const float *ws, float *y, long long m, long long n,
                                                                  long long k)
#endif
{
    __shared__ __align__(16) a_elem As[MM_T * A_STRIDE];
    __shared__ __align__(16) b_elem Bs[MM_T * B_STRIDE];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    const long long i0 = (long long)blockIdx.y * MM_T, j0 = (long long)blockIdx.x * MM_T;
    if (i0 >= m || j0 >= n) return;
    const long long kt_n = (k + MM_T - 1) / MM_T;
    /* staging: A rows of 64 K (W8A16: 128 B, 8 chunks of 16 B; MMA89: 64 B, 4 chunks), B rows of 64 B (4 chunks) */
    const int a_cpr = MM_T * KBYTES / 16, a_per = MM_T * a_cpr / MM_THREADS, b_per = MM_T * 4 / MM_THREADS;
    uint4 ra[4], rb[2];
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    auto load = [&](long long kt) {
#pragma unroll
        for (int i = 0; i < a_per; i++) {
            const int ch = tid + i * MM_THREADS, r = ch / a_cpr, cc = ch % a_cpr;
            const long long row = i0 + r, kk = kt * MM_T + cc * (16 / KBYTES);
            ra[i] = row < m && kk < k ? __ldg((const uint4 *)((const u8 *)x + (row * k + kk) * KBYTES)) : zero;
        }
#pragma unroll
        for (int i = 0; i < b_per; i++) {
            const int ch = tid + i * MM_THREADS, r = ch / 4, cc = ch % 4;
            const long long row = j0 + r, kk = kt * MM_T + cc * 16;
            rb[i] = row < n && kk < k ? __ldg((const uint4 *)(w + row * k + kk)) : zero;
        }
    };
    auto stage = [&]() {
#pragma unroll
        for (int i = 0; i < a_per; i++) {
            const int ch = tid + i * MM_THREADS, r = ch / a_cpr, cc = ch % a_cpr;
            *(uint4 *)((u8 *)As + r * A_STRIDE * KBYTES + cc * 16) = ra[i];
        }
#pragma unroll
        for (int i = 0; i < b_per; i++) {
            const int ch = tid + i * MM_THREADS, r = ch / 4, cc = ch % 4;
#ifdef FP8_W8A16
            u32 o[8];
            const u32 v[4] = {rb[i].x, rb[i].y, rb[i].z, rb[i].w};
#pragma unroll
            for (int h = 0; h < 4; h++) {
                o[2 * h] = qc_e4m3x2_bf16x2(v[h] & 0xFFFFu);
                o[2 * h + 1] = qc_e4m3x2_bf16x2(v[h] >> 16);
            }
            uint4 *dst = (uint4 *)(Bs + r * B_STRIDE + cc * 16);
            dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
            dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
#else
            *(uint4 *)(Bs + r * B_STRIDE + cc * 16) = rb[i];
#endif
        }
    };
    float d[2][4][4], tot[2][4][4];
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int b = 0; b < 4; b++)
#pragma unroll
            for (int e = 0; e < 4; e++) d[a][b][e] = tot[a][b][e] = 0.f;
    const long long kb = (k + QC_FP8_BLOCK - 1) / QC_FP8_BLOCK;
    (void)kb;
    load(0);
    for (long long kt = 0; kt < kt_n; kt++) {
        __syncthreads(); /* the previous tile's fragments have been read */
        stage();
        __syncthreads();
        if (kt + 1 < kt_n) load(kt + 1);
#pragma unroll
        for (int ks = 0; ks < MM_T / KSTEP; ks++) {
            /* fragment words: A rows g, g+8 at K bytes 4q and 4q+16 (8-bit) or elements 2q, 2q+8 (16-bit): both
               are 4 bytes at byte 4q and 4q+16 of the step */
            const int kbyte = ks * KSTEP * KBYTES + 4 * q;
            u32 af[2][4], bf[4][2];
#pragma unroll
            for (int a = 0; a < 2; a++) {
                const u8 *p0 = (const u8 *)As + (wm + 16 * a + g) * A_STRIDE * KBYTES + kbyte;
                const u8 *p1 = p0 + 8 * A_STRIDE * KBYTES;
                af[a][0] = qc_lds32(p0);
                af[a][1] = qc_lds32(p1);
                af[a][2] = qc_lds32(p0 + 16);
                af[a][3] = qc_lds32(p1 + 16);
            }
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const u8 *p = (const u8 *)Bs + (wn + 8 * b + g) * B_STRIDE * KBYTES + kbyte;
                bf[b][0] = qc_lds32(p);
                bf[b][1] = qc_lds32(p + 16);
            }
#pragma unroll
            for (int a = 0; a < 2; a++)
#pragma unroll
                for (int b = 0; b < 4; b++) qc_mma_tile(d[a][b], af[a][0], af[a][1], af[a][2], af[a][3], bf[b][0], bf[b][1]);
        }
#if FP8_MODE == 2
        if ((kt & 1) || kt + 1 == kt_n) { /* end of a 128-K group: fold and restart */
            const long long grp = kt / 2;
#pragma unroll
            for (int a = 0; a < 2; a++) {
                const long long r0 = i0 + wm + 16 * a + g, r1 = r0 + 8;
#ifdef FP8_W8A16
                const float a0s = 1.f, a1s = 1.f;
                (void)r1;
#else
                const float a0s = r0 < m ? xs[r0 * kb + grp] : 0.f, a1s = r1 < m ? xs[r1 * kb + grp] : 0.f;
#endif
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    const long long col = j0 + wn + 8 * b + 2 * q;
                    const float w_s = col < n ? ws[(col / QC_FP8_BLOCK) * kb + grp] : 0.f;
#ifdef FP8_W8A16
                    const float s0 = w_s, s1 = w_s;
                    (void)a0s, (void)a1s;
#else
                    const float s0 = a0s * w_s, s1 = a1s * w_s;
#endif
                    tot[a][b][0] = fmaf(d[a][b][0], s0, tot[a][b][0]);
                    tot[a][b][1] = fmaf(d[a][b][1], s0, tot[a][b][1]);
                    tot[a][b][2] = fmaf(d[a][b][2], s1, tot[a][b][2]);
                    tot[a][b][3] = fmaf(d[a][b][3], s1, tot[a][b][3]);
#pragma unroll
                    for (int e = 0; e < 4; e++) d[a][b][e] = 0.f;
                }
            }
        }
#endif
    }
    /* D fragment: value e is row g (+8 for e >= 2), column 2q + e%2 */
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long long row = i0 + wm + 16 * a + g + 8 * h;
            if (row >= m) continue;
#if FP8_MODE != 2 && !defined(FP8_W8A16)
            const float a_s = xs[row];
#else
            const float a_s = 1.f;
#endif
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const long long col = j0 + wn + 8 * b + 2 * q;
                if (col >= n) continue;
                float v0, v1;
#if FP8_MODE == 2
                (void)a_s;
                v0 = tot[a][b][2 * h];
                v1 = tot[a][b][2 * h + 1];
#else
#if FP8_MODE == 1
                const float w0 = ws[0], w1 = w0;
#else
                const float w0 = ws[col], w1 = ws[col + 1];
#endif
#ifdef FP8_W8A16
                (void)a_s;
                v0 = d[a][b][2 * h] * w0;
                v1 = d[a][b][2 * h + 1] * w1;
#else
                v0 = d[a][b][2 * h] * (a_s * w0);
                v1 = d[a][b][2 * h + 1] * (a_s * w1);
#endif
#endif
                *(float2 *)(y + row * n + col) = make_float2(v0, v1);
            }
        }
}
