/* gemv_frag_emu.cpp - mxfp4.gemv_frag's (or mxfp4.gemv_frag_ps's: EMU_ENTRY) CUDA source run on the CPU (emu_cuda.h) against a double-precision sum, one case per run. */
#include <cstdio>
#include <cstdlib>

#include "emu_cuda.h"
#define __noinline__
#include "gemv_frag_src.h" /* written by test_gemv_frag_emu.py: the kernel source with emulated helpers */
#ifndef EMU_ENTRY
#define EMU_ENTRY qc_mxfp4_gemv_frag /* the kernel's entry point (-DEMU_ENTRY=qc_mxfp4_gemv_frag_ps) */
#endif

/* xorshift64 */
static uint64_t rs = 88172645463325252ull;
static uint64_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static double e2m1(int c) { static const double E[8] = {0, .5, 1, 1.5, 2, 3, 4, 6}; return (c & 8) ? -E[c & 7] : E[c & 7]; }

/* usage: gemv_frag_emu M N K EMIN EMAX NANS ZEROS GRID BLOCK SEED.  Random x (bf16 in [-1, 1]), random codes, scale
 * bytes in [EMIN, EMAX] with NANS bytes 0xFF and ZEROS bytes 0x00; every output within 1e-5 * sum |x w| of the double
 * sum, NaN exactly where it is NaN, the 64 floats past y untouched.  Exit 1 on a miss. */
int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: gemv_frag_emu M N K EMIN EMAX NANS ZEROS GRID BLOCK SEED\n");
        return 2;
    }
    long long m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
    int emin = atoi(argv[4]), emax = atoi(argv[5]), nans = atoi(argv[6]), zeros = atoi(argv[7]);
    unsigned grid = (unsigned)atoi(argv[8]), block = (unsigned)atoi(argv[9]);
    rs ^= (uint64_t)atoll(argv[10]) * 0x9E3779B97F4A7C15ull;
    long long nb = k / 32;
    std::vector<unsigned short> x(m * k);
    std::vector<unsigned char> q(n * k / 2), sc(n * nb);
    std::vector<float> y(m * n + 64, -12345.f);
    for (auto &v : x) { float f = (float)((double)(rnd() % 20001) / 10000.0 - 1.0); v = (unsigned short)f2bf(f); }
    for (auto &v : q) v = (unsigned char)rnd();
    for (auto &v : sc) v = (unsigned char)(emin + rnd() % (emax - emin + 1));
    for (int i = 0; i < nans; i++) sc[rnd() % sc.size()] = 255;
    for (int i = 0; i < zeros; i++) sc[rnd() % sc.size()] = 0;
    gridDim.x = grid;
    blockDim.x = block;
    for (unsigned bx = 0; bx < grid; bx++) {
        std::barrier<> blk(blockDim.x);
        g_block = &blk;
        for (unsigned w = 0; w < block / 32; w++) g_warps[w].bar = new std::barrier<>(32);
        std::vector<std::thread> th;
        for (unsigned t = 0; t < blockDim.x; t++)
            th.emplace_back([&, t, bx] {
                threadIdx.x = t;
                blockIdx.x = bx;
                EMU_ENTRY(x.data(), q.data(), sc.data(), y.data(), m, n, k);
            });
        for (auto &t : th) t.join();
        for (unsigned w = 0; w < block / 32; w++) delete g_warps[w].bar;
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
    long long past = 0;
    for (int i = 0; i < 64; i++) past += y[m * n + i] != -12345.f;
    bad += past;
    printf("m=%lld n=%lld k=%lld e[%d,%d] nan%d zero%d grid %u block %u: worst %.4f bad %lld nan-ok %lld past-end %lld\n",
           m, n, k, emin, emax, nans, zeros, grid, block, worst, bad, nanok, past);
    return bad != 0;
}
