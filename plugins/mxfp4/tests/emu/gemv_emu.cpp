/* gemv_emu.cpp - the mxfp4 GEMV's CUDA source run on the CPU (emu_cuda.h) against a double-precision sum. */
#include <cstdio>
#include <cstdlib>

#include "emu_cuda.h"
/* the plan's T = 2 threshold, lowered so that small n take that path too */
#define EMU_T2_ROWS 64
#include "gemv_src.h" /* written by test_gemv_emu.py: the kernel source with emulated helpers */

/* One case: random x (bf16 in [-1, 1]), random codes, scale bytes in [emin, emax] and `nans` NaN
 * blocks; every output within 1e-5 * sum |x w| of the double sum, NaN exactly where it is NaN, and
 * the 64 floats past y untouched. */
static uint64_t rs = 88172645463325252ull; /* xorshift64 */
static uint64_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static double e2m1(int c) { static const double E[8] = {0, .5, 1, 1.5, 2, 3, 4, 6}; return (c & 8) ? -E[c & 7] : E[c & 7]; }
static int run(long long m, long long n, long long k, int emin, int emax, int nans) {
    long long nb = k / 32;
    std::vector<unsigned short> x(m * k);
    std::vector<unsigned char> q(n * k / 2), sc(n * nb);
    std::vector<float> y(m * n + 64, -12345.f);
    for (auto &v : x) { float f = (float)((double)(rnd() % 20001) / 10000.0 - 1.0); v = (unsigned short)f2bf(f); }
    for (auto &v : q) v = (unsigned char)rnd();
    for (auto &v : sc) v = (unsigned char)(emin + rnd() % (emax - emin + 1));
    for (int i = 0; i < nans; i++) sc[rnd() % sc.size()] = 255;
    long long rows = m > 8 && n >= EMU_T2_ROWS ? 32 : 16, blocks = (n + rows - 1) / rows;
    gridDim.x = (unsigned)blocks;
    blockDim.x = MXG_WARPS * 32;
    for (long long bx = 0; bx < blocks; bx++) {
        std::barrier<> blk(blockDim.x);
        g_block = &blk;
        for (int w = 0; w < MXG_WARPS; w++) g_warps[w].bar = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < blockDim.x; t++)
            th.emplace_back([&, t, bx] {
                threadIdx.x = t;
                blockIdx.x = (unsigned)bx;
                qc_mxfp4_gemv(x.data(), q.data(), sc.data(), y.data(), m, n, k);
            });
        for (auto &t : th) t.join();
        for (int w = 0; w < MXG_WARPS; w++) delete g_warps[w].bar;
    }
    double worst = 0;
    long long bad = 0, nanok = 0;
    for (long long i = 0; i < m; i++)
        for (long long o = 0; o < n; o++) {
            double acc = 0, mag = 0;
            for (long long t = 0; t < k; t++) {
                int b = q[o * (k / 2) + t / 2], c = (t & 1) ? b >> 4 : b & 15, e = sc[o * nb + t / 32];
                double w = e == 255 ? NAN : ldexp(e2m1(c), e - 127);
                double p = (double)bf(x[i * k + t]) * w;
                acc += p, mag += fabs(p);
            }
            float g = y[i * n + o];
            if (std::isnan(acc)) { nanok += std::isnan(g); bad += !std::isnan(g); continue; }
            double d = fabs(g - acc) / (1e-5 * mag + 1e-300);
            if (d > worst) worst = d;
            if (!(d <= 1)) { if (bad < 3) printf("   bad tok %lld row %lld: %g vs %g\n", i, o, g, acc); bad++; }
        }
    for (int i = 0; i < 64; i++) bad += y[m * n + i] != -12345.f;
    printf("m=%lld n=%lld k=%lld e[%d,%d] nan%d: worst %.4f bad %lld nan-ok %lld\n", m, n, k, emin, emax, nans, worst, bad, nanok);
    return bad != 0;
}
/* every m bucket and plan (T = 1, 2), n and k tails, small, large and NaN scales */
int main() {
    int f = 0;
    f |= run(1, 16, 32, 110, 125, 0);
    f |= run(3, 40, 544, 110, 125, 0);
    f |= run(8, 24, 1056, 100, 140, 0);
    f |= run(5, 16, 4096, 118, 122, 2);
    f |= run(9, 40, 96, 110, 125, 0);
    f |= run(16, 80, 544, 120, 135, 0);
    f |= run(12, 70, 2080, 0, 3, 0);
    f |= run(16, 16, 4128, 115, 131, 1);
    f |= run(2, 8, 128, 200, 240, 0);
    f |= run(13, 77, 1056, 110, 135, 3);
    f |= run(1, 1, 32, 110, 125, 0);
    f |= run(16, 8, 14336, 118, 124, 0);
    f |= run(7, 33, 352, 126, 131, 0);
    printf(f ? "gemv_emu: FAIL\n" : "gemv_emu: all cases within tolerance\n");
    return f;
}
