/* decode_emu.cpp - kv_fp8.attn_decode's CUDA source (v2, fused combine) run on the CPU (emu_kv.h) against a double attention, one case per run. */
#include <algorithm>
#include <cinttypes>
#include <string>

#include "emu_kv.h"
#include "decode_src.h" /* written by test_decode_emu.py: common.cuh + decode.cu, inline asm swapped for emu_* calls */

/* xorshift64 */
static uint64_t rs = 88172645463325252ull;
static uint64_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static double urand() { return (double)(rnd() >> 11) / 9007199254740992.0; }
static double normal() { double u = urand() + 1e-300, v = urand(); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }

/* the host's partition rule (kv_fp8_gpu.c's decode_parts_at with the v2 numbers: 264 slots, bound 1584, one
 * layer of 132 SMs, CTA cost 64 tokens, at least 64 tokens and at most 64 partitions) */
static int host_parts(int n_seqs, int n_kv_heads, int max_blocks) {
    const int64_t slots = 264, bound = 1584, one_layer = 132, cost0 = 64, min_part = 64, max_parts = 64;
    int64_t pairs = (int64_t)n_seqs * n_kv_heads, est = (int64_t)max_blocks * 16;
    if (pairs < 1) pairs = 1;
    if (est < 1) est = 1;
    int64_t cap = (est + min_part - 1) / min_part;
    if (cap > max_parts) cap = max_parts;
    if (pairs * 2 <= one_layer) return (int)(one_layer / pairs < cap ? one_layer / pairs : cap);
    int64_t best = 1, best_cost = (pairs + slots - 1) / slots * (est + cost0);
    for (int64_t p = 2; p <= cap && pairs * p <= (bound / slots) * slots; p++) {
        int64_t cost = (pairs * p + slots - 1) / slots * ((est + p - 1) / p + cost0);
        if (cost < best_cost) best = p, best_cost = cost;
    }
    return (int)best;
}
/* the host's dynamic shared memory for the v2 decode at 4 stages (kv_fp8_gpu.c's dec_v2_smem) */
static unsigned host_smem(int hd) {
    int64_t ring = 4 * (4 + 1) * 32 * hd, comb = 4 * 16 * (hd + 4) * 4 + 2 * 4 * 16 * 4;
    return (unsigned)(ring > comb ? ring : comb);
}

struct Args {
    const float *q;
    const u8 *k, *v;
    const int *bt, *ctx;
    float *out, *work;
    int ns, nh, nkv, hd, mb;
    float scale;
    const float *ks, *vs;
    u32 variant;
};
static Args A;
static void body() {
    qc_kv_fp8_attn_decode(A.q, A.k, A.v, A.bt, A.ctx, A.out, A.work, A.ns, A.nh, A.nkv, A.hd, A.mb, A.scale, A.ks,
                          A.vs, A.variant);
}

static const u32 POISON = 0x7fbadbadu; /* a NaN no computation returns */
static const int GUARD = 64;            /* words past out / work / shared memory that must stay untouched */

/* usage: decode_emu NS NH NKV HD VARIANT EXTRA_BLOCKS PARTS MODE SEED CTX...  (PARTS 0: the host's rule; MODE
 * bit 0: cp.async lands at its wait_group, not at issue; bit 1: the threads run in a random order).  Random q
 * (N(0,1)), codes of N(0,1) * 3 under per-head scales, NaN codes in every row past a context (never to be used), a shuffled block table with 0x7ffffff0 past each
 * context.  Every output within 1/256 * sum_j p_j |v_j| + 1e-6 of the double attention (q rounded to f16 as
 * the kernel does) and the relative L2 error within 1/256 (test_gpu_kv_fp8.c's cmp_row / TOL_*); guards
 * past out and the shared memory untouched, the combine's counters back at zero.  Exit 1 on a miss. */
int main(int argc, char **argv) {
    if (argc < 11) {
        fprintf(stderr, "usage: decode_emu NS NH NKV HD VARIANT EXTRA_BLOCKS PARTS MODE SEED CTX...\n");
        return 2;
    }
    const int ns = atoi(argv[1]), nh = atoi(argv[2]), nkv = atoi(argv[3]), hd = atoi(argv[4]);
    const u32 variant = (u32)atoi(argv[5]);
    const int extra = atoi(argv[6]), force_parts = atoi(argv[7]);
    emu_late_copies = atoi(argv[8]) & 1;
    const bool shuffled = atoi(argv[8]) & 2;
    rs ^= (uint64_t)atoll(argv[9]) * 0x9E3779B97F4A7C15ull;
    if (shuffled) emu_shuffle_seed = rnd() | 1;
    if (argc != 10 + ns) {
        fprintf(stderr, "decode_emu: %d contexts for %d sequences\n", argc - 10, ns);
        return 2;
    }
    std::vector<int> ctx(ns);
    int maxc = 0;
    for (int s = 0; s < ns; s++) ctx[s] = atoi(argv[10 + s]), maxc = std::max(maxc, ctx[s]);
    const int mb = (maxc + 15) / 16 + extra, gq = nh / nkv;
    const bool e5 = variant == QC_KV_E5M2;

    /* block table: the used blocks' ids a shuffled permutation of 0 .. nid - 1 (plus `extra` ids nobody uses) */
    int used = 0;
    for (int s = 0; s < ns; s++) used += (ctx[s] + 15) / 16;
    const int nid = used + extra + 1;
    std::vector<int> ids(nid), bt((size_t)ns * mb);
    for (int i = 0; i < nid; i++) ids[i] = i;
    for (int i = nid - 1; i > 0; i--) std::swap(ids[i], ids[rnd() % (i + 1)]);
    for (int s = 0, next = 0; s < ns; s++)
        for (int j = 0; j < mb; j++) bt[(size_t)s * mb + j] = j < (ctx[s] + 15) / 16 ? ids[next++] : 0x7ffffff0;

    std::vector<float> ks(nkv), vs(nkv);
    for (int h = 0; h < nkv; h++) {
        ks[h] = e5 ? 1.f : (float)((9.0 + 6.0 * urand()) / 448.0);
        vs[h] = e5 ? 1.f : (float)((9.0 + 6.0 * urand()) / 448.0);
        if (variant == QC_KV_E4M3_TENSOR && h) ks[h] = ks[0], vs[h] = vs[0];
    }
    const size_t cache = (size_t)nid * nkv * 16 * hd;
    std::vector<u8> kc(cache), vc(cache);
    for (size_t i = 0; i < cache; i++) {
        const int h = (int)(i / (16 * (size_t)hd) % (size_t)nkv);
        const float kx = (float)(normal() * 3) / ks[h], vx = (float)(normal() * 3) / vs[h];
        kc[i] = (u8)(e5 ? qc_enc_generic(kx, 2u, 15u, 0x7Bu) : qc_enc_generic(kx, 3u, 7u, 0x7Eu));
        vc[i] = (u8)(e5 ? qc_enc_generic(vx, 2u, 15u, 0x7Bu) : qc_enc_generic(vx, 3u, 7u, 0x7Eu));
    }
    for (int s = 0; s < ns; s++) /* rows past each context in its last block: NaN codes */
        for (int j = ctx[s]; j < (ctx[s] + 15) / 16 * 16; j++)
            for (int h = 0; h < nkv; h++) {
                const size_t o = (((size_t)bt[(size_t)s * mb + j / 16] * nkv + h) * 16 + j % 16) * hd;
                memset(&kc[o], 0x7F, hd);
                memset(&vc[o], 0x7F, hd);
            }
    const size_t qn = (size_t)ns * nh * hd;
    std::vector<float> q(qn);
    for (auto &x : q) x = (float)normal();
    const int parts = force_parts > 0 ? force_parts : host_parts(ns, nkv, mb);
    const size_t wn = (size_t)ns * nh * parts * hd + 2 * (size_t)ns * nh * parts;
    std::vector<float> out(qn + GUARD), work(wn);
    for (auto &x : out) memcpy(&x, &POISON, 4);
    for (auto &x : work) memcpy(&x, &POISON, 4);
    const float scale = (float)(1.0 / sqrt((double)hd));

    emu_globals = {{q.data(), q.size() * 4, "q"},
                   {kc.data(), kc.size(), "k cache"},
                   {vc.data(), vc.size(), "v cache"},
                   {bt.data(), bt.size() * 4, "block tables"},
                   {ctx.data(), ctx.size() * 4, "ctx_lens"},
                   {ks.data(), ks.size() * 4, "k scales"},
                   {vs.data(), vs.size() * 4, "v scales"},
                   {work.data(), work.size() * 4, "work"}};
    A = Args{q.data(), kc.data(), vc.data(), bt.data(), ctx.data(), out.data(), work.data(), ns, nh, nkv, hd, mb,
             scale, ks.data(), vs.data(), variant};

    /* the launch: grid (parts, nkv * ceil(gq / 16), ns), 128 threads, the host's dynamic shared memory */
    const unsigned smem = host_smem(hd);
    if ((int)smem != qc_dec_v2_smem(hd)) {
        printf("FAIL: the host's dynamic shared memory %u != the kernel's qc_dec_v2_smem %d\n", smem, qc_dec_v2_smem(hd));
        return 1;
    }
    std::vector<unsigned char> shm(smem + 4 * GUARD);
    emu_smem = shm.data();
    emu_smem_bytes = smem;
    gridDim = dim3{(unsigned)parts, (unsigned)(nkv * ((gq + 15) / 16)), (unsigned)ns};
    blockDim = dim3{128, 1, 1};
    long long bad = 0;
    for (unsigned z = 0; z < gridDim.z; z++)
        for (unsigned y = 0; y < gridDim.y; y++)
            for (unsigned x = 0; x < gridDim.x; x++) {
                memset(shm.data(), 0xFF, shm.size()); /* stale shared memory: NaN floats, NaN codes */
                blockIdx = dim3{x, y, z};
                emu_run_block(128, body);
                for (int i = 0; i < 4 * GUARD; i++)
                    if (shm[smem + i] != 0xFF) {
                        printf("   block (%u,%u,%u) wrote shared memory past its %u dynamic bytes (byte %u)\n", x, y, z,
                               smem, smem + i);
                        bad++;
                        break;
                    }
            }
    for (int i = 0; i < QC_DEC_COUNTERS; i++)
        if (qc_dec_count[i]) {
            printf("   combine counter %d left at %u\n", i, qc_dec_count[i]);
            bad++;
            break;
        }
    for (int i = 0; i < GUARD; i++)
        if (memcmp(&out[qn + i], &POISON, 4)) {
            printf("   out written past its end (word %d)\n", i);
            bad++;
            break;
        }

    /* the oracle, per output: q rounded to f16 (clamped), K and V the codes times their scales */
    double worst = 0, max_abs = 0, err2 = 0, ref2 = 0;
    long long nbad = 0;
    std::vector<double> sc, val(hd), mag(hd);
    for (int s = 0; s < ns; s++)
        for (int h = 0; h < nh; h++) {
            const int kvh = h / gq, n = std::min(ctx[s], mb * 16);
            const float *qr = &q[((size_t)s * nh + h) * hd];
            std::vector<double> qd(hd);
            for (int d = 0; d < hd; d++) qd[d] = emu_h2f(emu_f2h(std::min(65504.f, std::max(-65504.f, qr[d]))));
            sc.assign(n, 0);
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < n; j++) {
                const size_t row = (((size_t)bt[(size_t)s * mb + j / 16] * nkv + kvh) * 16 + j % 16) * hd;
                double acc = 0;
                for (int d = 0; d < hd; d++) acc += qd[d] * (e5 ? emu_e5m2(kc[row + d]) : emu_e4m3(kc[row + d]) * ks[kvh]);
                sc[j] = acc * scale;
                mx = std::max(mx, sc[j]);
            }
            std::fill(val.begin(), val.end(), 0.0);
            std::fill(mag.begin(), mag.end(), 0.0);
            for (int j = 0; j < n; j++) {
                const size_t row = (((size_t)bt[(size_t)s * mb + j / 16] * nkv + kvh) * 16 + j % 16) * hd;
                const double p = exp(sc[j] - mx);
                l += p;
                for (int d = 0; d < hd; d++) {
                    const double x = e5 ? emu_e5m2(vc[row + d]) : emu_e4m3(vc[row + d]) * vs[kvh];
                    val[d] += p * x, mag[d] += p * fabs(x);
                }
            }
            for (int d = 0; d < hd; d++) {
                if (n) val[d] /= l, mag[d] /= l;
                const float got = out[((size_t)s * nh + h) * hd + d];
                const double lim = mag[d] / 256 + 1e-6, e = fabs((double)got - val[d]);
                if (!(e <= lim)) {
                    if (nbad < 4) {
                        u32 bits;
                        memcpy(&bits, &got, 4);
                        printf("   bad seq %d head %d dim %d: %g (0x%08x%s) vs %g (tol %.2e)\n", s, h, d, got, bits,
                               bits == POISON ? ", never written" : "", val[d], lim);
                    }
                    nbad++;
                }
                worst = e == e ? std::max(worst, e / lim) : INFINITY;
                if (e == e) max_abs = std::max(max_abs, e);
                err2 += e * e, ref2 += val[d] * val[d];
            }
        }
    const double rl2 = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    if (!(rl2 <= 1.0 / 256)) {
        printf("   relative L2 error %.3e over %.3e\n", rl2, 1.0 / 256);
        bad++;
    }
    bad += nbad;
    std::string cs;
    for (int s = 0; s < ns; s++) cs += (s ? "," : "") + std::to_string(ctx[s]);
    printf("%2d/%-2d d%-3d %-7s ctx %-14s mb %3d parts %2d%s%s%s: max|d| %.2e worst d/tol %.3f relL2 %.2e bad %lld\n",
           nh, nkv, hd, variant == 0 ? "tensor" : variant == 1 ? "head" : "e5m2", cs.c_str(), mb, parts,
           force_parts ? " (forced)" : "", emu_late_copies ? " late" : "", shuffled ? " shuffled" : "", max_abs,
           worst, rl2, bad);
    return bad != 0;
}
