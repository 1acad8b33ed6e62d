/* qc_ra_gemm_src.h - the register-A Hopper GEMM skeleton for 4-bit weights (CUDA source for NVRTC, sm_90a, and its host-side launch plan), shared by mxfp4.wgmma and w4a16.wgmma_bf16_* (header only). */
#ifndef QC_PLUGIN_RA_GEMM_SRC_H
#define QC_PLUGIN_RA_GEMM_SRC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <qcore/plugin.h>

/*
 * y[m,n] = x[m,k] . W[n,k]^T, x bf16 through a TMA tensor map, W 4-bit codes
 * (32 bytes a row per 64 k, rows k / 2 bytes apart) with per-row metadata
 * (scales, zeros), f32 out.  Computed transposed, y^T = W x^T, so that the
 * weight is wgmma's A operand from registers: each consumer thread decodes
 * its rows' codes straight into bf16 A fragments (mma.sync's A layout: rows
 * g and g + 8 of its warp's 16, k pairs (2t, 2t + 1) and (2t + 8, 2t + 9)
 * of each k16 step), x^T is the B operand, K-major in shared memory as the
 * 128-byte swizzle puts x's rows.  A holds the weights themselves (the
 * format decodes them to bf16, scales applied), so wgmma accumulates all of
 * K in f32 with no promotion step, and a tile can be 256 x rows wide.
 *
 * The format supplies F (device side):
 *   struct Args                     its kernel arguments; Args::q the codes
 *   static constexpr int MW         metadata words (4 bytes) a row a stage, 1 or 2
 *   meta(fa, dst, r, kt, k)         cp.async (qcp_cp4) row r's words of stage kt: word i to dst + 512 i
 *   build(fa, c, a)                 the 4 A fragments (a[j], k16 step j) of stage c.kt for rows c.rl and
 *                                   c.rl + 8 (clamped rows c.rc0, c.rc1), from c.ws (the W rows: row r's 32
 *                                   bytes at 32 r, halves swapped when (r >> 2) & 1) and c.ms (the words)
 *
 * Block: 384 threads, persistent (at most QC_RA_SMS blocks).  Warpgroup 0 is
 * the producer (setmaxnreg 40): thread 0 issues the TMA boxes of x (64 rows
 * x 64 k each, BM / 64 per stage, those wholly past m skipped), all 128
 * threads copy the stage's W rows (cp.async 16 B, halves swapped on every
 * other 4-row group so that the consumers' 16-byte loads hit distinct banks)
 * and metadata; the stage's "full" mbarrier completes on the TMA bytes plus
 * 128 cp.async arrivals.  Warpgroups 1 and 2 consume (setmaxnreg 232), 64 W
 * rows each of a 128-row tile: per 64-k stage a consumer issues 4 wgmmas on
 * fragments built earlier and commits them behind the previous stage's
 * group, waits for that group (wait_group 1), frees its stage and builds the
 * next stage's fragments into its registers while the new group runs (two
 * register sets take turns; the loop is unrolled by two); after a unit's
 * last stage it waits for everything.  BM x rows per tile (wgmma N) is the host's
 * pick (qc_ra_plan_of), told to the device by the ring size it launches
 * with: 16 stages of 13 KiB at BM 64, 10 of 21 at 128, 6 of 37 at 256.
 * Rows past n are clamped to n - 1 (never stored); x rows past m read as
 * zero (TMA).  k must be a multiple of 64 (the includer's eligibility).
 *
 * The last wave split over K (the host's qc_ra_plan_of; "work", the
 * kernel's workspace, qc_ra_workspace_bytes): when the tiles leave a last
 * wave of `tail` tiles (tiles % gridDim.x; all of them when tiles < 132),
 * each of those is cut into `sp` units of consecutive stages (tail x sp <=
 * 132), so that the last wave takes 1 / sp of a tile's time instead of a
 * whole one.  The work units are the whole tiles first (blocks walk them as
 * before, u = blockIdx.x + i gridDim.x), then the split ones.  When a split
 * unit's sums are done it arrives on its tile's counter (work[tail]); all
 * but the last to arrive store their f32 sums into their own slot of the
 * workspace and count it (work[256 + tail]).  The last waits for those
 * stores (they come from blocks already running, which wait for nothing),
 * adds the slots to its own sums (of two: the other's slot to its registers,
 * a + b being b + a; of more: its own stored too and all added in split
 * order), stores y and puts both counters back to zero.  The result does not
 * depend on which unit is last.  sp reaches the device with BM: the ring
 * size plus 16 (sp - 1) bytes; without a workspace (work NULL) the kernel
 * runs every tile whole.
 */
#define QC_RA_SMS 132
#define QC_RA_THREADS 384
#define QC_RA_ST64 16
#define QC_RA_ST128 10
#define QC_RA_ST256 6
#define QC_RA_SPLIT_MAX 8
#define QC_RA_STR_(x) #x
#define QC_RA_STR(x) QC_RA_STR_(x)

#define QC_RA_GEMM_SRC \
    "#define QC_RA_SMS " QC_RA_STR(QC_RA_SMS) "\n" \
    "#define QC_RA_SPLIT_MAX " QC_RA_STR(QC_RA_SPLIT_MAX) "\n" \
    "/* what a format's build() gets: the stage's W rows and words, its rows, the lane's t, the stage index */\n" \
    "struct QcRaStage {\n" \
    "    const unsigned char *ws, *ms;\n" \
    "    int rl, swz, kt;\n" \
    "    u32 t;\n" \
    "    ll rc0, rc1, k;\n" \
    "};\n" \
    "template <int BM> __device__ __forceinline__ void qc_ra_wgmma(float *d, const u32 *a, u64 db, int scale_d) {\n" \
    "    if constexpr (BM == 256) qc_wgmma_ra256<0>(d, a, db, scale_d);\n" \
    "    else if constexpr (BM == 128) qc_wgmma_ra128<0>(d, a, db, scale_d);\n" \
    "    else qc_wgmma_ra64<0>(d, a, db, scale_d);\n" \
    "}\n" \
    "/* a stage's bytes (x, W rows, 2 words a row of metadata at most) and the ring's dynamic shared memory with\n" \
    "   1 KiB to align it: the size the host launches with (qc_ra_ring_bytes) */\n" \
    "template <int BM> __device__ constexpr int qc_ra_stage() { return (BM * 128 + 128 * 32 + 2 * 512 + 1023) / 1024 * 1024; }\n" \
    "template <int BM, int ST> __device__ constexpr u32 qc_ra_ring() { return (u32)(ST * qc_ra_stage<BM>()) + 1024u; }\n" \
    "/* work unit u: tile *t, stages [*kb, *ke), split *j of the tile (-1: the whole tile); units below d are whole */\n" \
    "__device__ __forceinline__ void qc_ra_unit(ll u, ll d, int sp, int kt_n, ll *t, int *kb, int *ke, int *j) {\n" \
    "    if (u < d) {\n" \
    "        *t = u, *kb = 0, *ke = kt_n, *j = -1;\n" \
    "        return;\n" \
    "    }\n" \
    "    const ll v = u - d;\n" \
    "    *t = d + v / sp, *j = (int)(v % sp);\n" \
    "    *kb = (int)((ll)kt_n * *j / sp), *ke = (int)((ll)kt_n * (*j + 1) / sp);\n" \
    "}\n" \
    "template <int BM, int ST, class F>\n" \
    "__device__ __forceinline__ void qc_ra_gemm(const QcTmap *tmx, const typename F::Args &fa, float *y, ll m, ll n, ll k,\n" \
    "                                           float *work, int sp_in, unsigned char *smem, u64 *bars) {\n" \
    "    constexpr int XB = BM * 128, WB = 128 * 32, STAGE = qc_ra_stage<BM>();\n" \
    "    const int tid = threadIdx.x, wg = tid >> 7;\n" \
    "    if (tid == 0) {\n" \
    "        const u32 full = qcp_smem(bars), empty = full + 8 * ST;\n" \
    "        for (int s = 0; s < ST; s++) {\n" \
    "            qcp_mbar_init(full + 8 * s, 129); /* thread 0's expect_tx + 128 cp.async arrivals */\n" \
    "            qcp_mbar_init(empty + 8 * s, 8);  /* the 8 consumer warps */\n" \
    "        }\n" \
    "        asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n" \
    "    }\n" \
    "    __syncthreads();\n" \
    "/* what both roles need, computed after setmaxnreg so that nothing lives across it */\n" \
    "#define QC_RA_SETUP                                                                                        \\\n" \
    "    const u32 sbase = qcp_smem(smem), base = (sbase + 1023u) & ~1023u; /* the swizzle repeats every 1 KiB */ \\\n" \
    "    const unsigned char *al = smem + (base - sbase);                                                       \\\n" \
    "    const u32 full = qcp_smem(bars), empty = full + 8 * ST;                                                \\\n" \
    "    const ll tiles_m = (m + BM - 1) / BM, tiles_n = (n + 127) / 128, tiles = tiles_m * tiles_n;            \\\n" \
    "    const int kt_n = (int)(k / 64);                                                                        \\\n" \
    "    /* the last wave's tiles split sp ways when the host asked for it and the workspace is there */         \\\n" \
    "    const ll dfull = tiles / gridDim.x * gridDim.x; /* the tiles of full waves */                          \\\n" \
    "    const int sp = sp_in > 1 && work && (tiles - dfull) * sp_in <= QC_RA_SMS && kt_n >= sp_in ? sp_in : 1; \\\n" \
    "    const ll dw = sp > 1 ? dfull : tiles, units = dw + (tiles - dw) * sp;                                  \\\n" \
    "    (void)al;\n" \
    "    if (wg == 0) {\n" \
    "        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\" ::: \"memory\");\n" \
    "        QC_RA_SETUP\n" \
    "        const int pt = tid;\n" \
    "        if (pt == 0) asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((u64)tmx) : \"memory\");\n" \
    "        int s = 0;\n" \
    "        u32 ph = 0;\n" \
    "        for (ll u = blockIdx.x; u < units; u += gridDim.x) {\n" \
    "            ll t, tm, tn;\n" \
    "            int kb, ke, sj;\n" \
    "            qc_ra_unit(u, dw, sp, kt_n, &t, &kb, &ke, &sj);\n" \
    "            qcp_tile(t, tiles_m, tiles_n, &tm, &tn);\n" \
    "            const int m0 = (int)(tm * BM);\n" \
    "            const ll n0 = tn * 128;\n" \
    "            const int left = (int)((m - m0 + 63) / 64), nbox = left < BM / 64 ? left : BM / 64; /* boxes not wholly past m */\n" \
    "            /* this thread's two 16-byte halves of W rows and its metadata row, clamped to row n - 1 */\n" \
    "            const int row0 = pt >> 1, row1 = row0 + 64, h = pt & 1;\n" \
    "            const ll r0 = n0 + row0 < n ? n0 + row0 : n - 1, r1 = n0 + row1 < n ? n0 + row1 : n - 1;\n" \
    "            const ll rs = n0 + pt < n ? n0 + pt : n - 1;\n" \
    "            const u8 *q0 = fa.q + r0 * (k / 2) + 16 * h, *q1 = fa.q + r1 * (k / 2) + 16 * h;\n" \
    "            const u32 d0 = row0 * 32 + 16 * (h ^ ((row0 >> 2) & 1)), d1 = row1 * 32 + 16 * (h ^ ((row1 >> 2) & 1));\n" \
    "            for (int kt = kb; kt < ke; kt++) {\n" \
    "                qcp_wait(empty + 8 * s, ph ^ 1u); /* a fresh barrier passes parity 1 at once */\n" \
    "                const u32 sx = base + s * STAGE, sw = sx + XB, ss = sw + WB, fb = full + 8 * s;\n" \
    "                if (pt == 0) {\n" \
    "                    qcp_expect_tx(fb, nbox * 8192u);\n" \
    "                    for (int b = 0; b < nbox; b++) qcp_tma2d(sx + b * 8192, tmx, kt * 64, m0 + 64 * b, fb);\n" \
    "                }\n" \
    "                qcp_cp16(sw + d0, q0 + kt * 32);\n" \
    "                qcp_cp16(sw + d1, q1 + kt * 32);\n" \
    "                F::meta(fa, ss + pt * 4, rs, kt, k);\n" \
    "                qcp_cp_arrive(fb);\n" \
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "            }\n" \
    "        }\n" \
    "    } else {\n" \
    "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::: \"memory\");\n" \
    "        QC_RA_SETUP\n" \
    "        const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2;\n" \
    "        QcRaStage cs;\n" \
    "        cs.rl = 64 * c + 16 * warp + g; /* tile row of A row g; A row g + 8 is rl + 8 */\n" \
    "        cs.swz = (cs.rl >> 2) & 1;     /* the same for rl + 8 */\n" \
    "        cs.t = (u32)(lane & 3);\n" \
    "        cs.k = k;\n" \
    "        float acc[BM / 2];\n" \
    "        int s = 0;\n" \
    "        u32 ph = 0;\n" \
    "        for (ll u = blockIdx.x; u < units; u += gridDim.x) {\n" \
    "            ll tt, tm, tn;\n" \
    "            int kb, ke, sj;\n" \
    "            qc_ra_unit(u, dw, sp, kt_n, &tt, &kb, &ke, &sj);\n" \
    "            qcp_tile(tt, tiles_m, tiles_n, &tm, &tn);\n" \
    "            const ll m0 = tm * BM, n0 = tn * 128;\n" \
    "            cs.rc0 = n0 + cs.rl < n ? n0 + cs.rl : n - 1;\n" \
    "            cs.rc1 = n0 + cs.rl + 8 < n ? n0 + cs.rl + 8 : n - 1;\n" \
    "            auto build = [&](int st, int kt, u32 (*a)[4]) {\n" \
    "                cs.ws = al + st * STAGE + XB;\n" \
    "                cs.ms = cs.ws + WB;\n" \
    "                cs.kt = kt;\n" \
    "                F::build(fa, cs, a);\n" \
    "            };\n" \
    "            /* stage kt from `cur` (built), issued behind stage kt - 1's wgmmas (still running: the tensor cores\n" \
    "               always have the next group queued); once kt - 1's are done, its stage is freed and the next\n" \
    "               stage is built into `nxt` (kt - 1's registers) while kt's run */\n" \
    "            int sprev = 0;\n" \
    "            auto step = [&](int kt, u32 (*cur)[4], u32 (*nxt)[4]) {\n" \
    "                const int sa = s;\n" \
    "                if (++s == ST) { s = 0; ph ^= 1u; }\n" \
    "                const u64 d = qcp_desc(base + sa * STAGE);\n" \
    "                qcp_fence();\n" \
    "#pragma unroll\n" \
    "                for (int j = 0; j < 4; j++) qc_ra_wgmma<BM>(acc, cur[j], d + 2 * j, kt > kb || j > 0);\n" \
    "                qcp_commit();\n" \
    "                qcp_wg_wait<1>();\n" \
    "                if (kt > kb && lane == 0) qcp_arrive(empty + 8 * sprev);\n" \
    "                sprev = sa;\n" \
    "                if (kt + 1 < ke) {\n" \
    "                    qcp_wait(full + 8 * s, ph);\n" \
    "                    build(s, kt + 1, nxt);\n" \
    "                }\n" \
    "            };\n" \
    "            u32 ra[4][4], rb[4][4];\n" \
    "            qcp_wait(full + 8 * s, ph);\n" \
    "            build(s, kb, ra);\n" \
    "            for (int kt = kb; kt < ke; kt += 2) {\n" \
    "                step(kt, ra, rb);\n" \
    "                if (kt + 1 >= ke) break;\n" \
    "                step(kt + 1, rb, ra);\n" \
    "            }\n" \
    "            qcp_wg_wait<0>();\n" \
    "            if (lane == 0) qcp_arrive(empty + 8 * sprev);\n" \
    "            if (sj >= 0) { /* a split unit: the tile's last to arrive adds the others' sums to its own */\n" \
    "                __shared__ int qc_ra_last;\n" \
    "                constexpr int SLOT = 128 * BM; /* 256 consumer threads x BM / 2 sums */\n" \
    "                const int wi = tid - 128;\n" \
    "                const ll tail = tt - dw;\n" \
    "                int *arrived = (int *)work + tail, *written = arrived + 256;\n" \
    "                float *slots = work + 512 + tail * sp * (ll)SLOT;\n" \
    "                qcp_bar_n(1, 256); /* an earlier unit's reads of qc_ra_last are done */\n" \
    "                if (wi == 0) qc_ra_last = atomicAdd(arrived, 1) == sp - 1;\n" \
    "                qcp_bar_n(1, 256);\n" \
    "                /* the last of two keeps its sums in registers (a + b == b + a: the same result whichever is last);\n" \
    "                   of more, it stores them too and adds all slots in split order */\n" \
    "                const int last = qc_ra_last, keep = last && sp == 2;\n" \
    "                if (!keep) {\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) slots[sj * (ll)SLOT + i * 256 + wi] = acc[i];\n" \
    "                    __threadfence();\n" \
    "                    qcp_bar_n(1, 256);\n" \
    "                    if (wi == 0) atomicAdd(written, 1);\n" \
    "                }\n" \
    "                if (!last) continue;\n" \
    "                /* the others have arrived, so they are running and store without waiting for anything */\n" \
    "                if (wi == 0)\n" \
    "                    for (;;) {\n" \
    "                        int w;\n" \
    "                        asm volatile(\"ld.acquire.gpu.global.b32 %0, [%1];\" : \"=r\"(w) : \"l\"(written) : \"memory\");\n" \
    "                        if (w >= sp - keep) break;\n" \
    "                        __nanosleep(64);\n" \
    "                    }\n" \
    "                qcp_bar_n(1, 256);\n" \
    "                __threadfence();\n" \
    "                if (keep) {\n" \
    "                    const float *other = slots + (1 - sj) * (ll)SLOT;\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) acc[i] += __ldcg(other + i * 256 + wi);\n" \
    "                } else { /* slots 0, 1, .. (a loop over splits around an unrolled one keeps acc in registers) */\n" \
    "#pragma unroll\n" \
    "                    for (int i = 0; i < BM / 2; i++) acc[i] = __ldcg(slots + i * 256 + wi);\n" \
    "                    for (int j = 1; j < sp; j++)\n" \
    "#pragma unroll\n" \
    "                        for (int i = 0; i < BM / 2; i++) acc[i] += __ldcg(slots + j * (ll)SLOT + i * 256 + wi);\n" \
    "                }\n" \
    "                if (wi == 0) *arrived = 0, *written = 0;\n" \
    "            }\n" \
    "            /* accumulator i: W row rl (+8 for i & 2), x row 8 (i / 4) + 2 t + (i & 1) */\n" \
    "#pragma unroll\n" \
    "            for (int i = 0; i < BM / 2; i++) {\n" \
    "                const ll r = m0 + 8 * (i >> 2) + 2 * cs.t + (i & 1), cn = n0 + cs.rl + ((i & 2) ? 8 : 0);\n" \
    "                if (r < m && cn < n) y[r * n + cn] = acc[i];\n" \
    "            }\n" \
    "        }\n" \
    "    }\n" \
    "#undef QC_RA_SETUP\n" \
    "}\n" \
    "/* the kernel body: the tile height the host chose, told by the ring size it launched with */\n" \
    "template <class F>\n" \
    "__device__ __forceinline__ void qc_ra_go(const QcTmap *tmx, const typename F::Args &fa, float *y, ll m, ll n, ll k,\n" \
    "                                         float *work) {\n" \
    "    extern __shared__ __align__(1024) unsigned char smem[];\n" \
    "    __shared__ __align__(8) u64 bars[2 * " QC_RA_STR(QC_RA_ST64) "];\n" \
    "    if (m <= 0 || n <= 0 || k <= 0 || (k & 63)) return; /* eligibility refuses these */\n" \
    "    u32 dsm;\n" \
    "    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(dsm));\n" \
    "    /* the ring of the host's BM, then 16 bytes for each split past the first */\n" \
    "    const u32 r256 = qc_ra_ring<256, " QC_RA_STR(QC_RA_ST256) ">(), r128 = qc_ra_ring<128, " QC_RA_STR(QC_RA_ST128) ">(),\n" \
    "              r64 = qc_ra_ring<64, " QC_RA_STR(QC_RA_ST64) ">(), span = 16u * QC_RA_SPLIT_MAX;\n" \
    "    if (dsm >= r256 && dsm - r256 < span && (dsm - r256) % 16 == 0)\n" \
    "        qc_ra_gemm<256, " QC_RA_STR(QC_RA_ST256) ", F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r256) / 16, smem, bars);\n" \
    "    else if (dsm >= r128 && dsm - r128 < span && (dsm - r128) % 16 == 0)\n" \
    "        qc_ra_gemm<128, " QC_RA_STR(QC_RA_ST128) ", F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r128) / 16, smem, bars);\n" \
    "    else if (dsm >= r64 && dsm - r64 < span && (dsm - r64) % 16 == 0)\n" \
    "        qc_ra_gemm<64, " QC_RA_STR(QC_RA_ST64) ", F>(tmx, fa, y, m, n, k, work, 1 + (int)(dsm - r64) / 16, smem, bars);\n" \
    "}\n"

/* ---- host side: the launch plan (kept in step with qc_ra_stage / qc_ra_ring above) ---- */

/* The ring's dynamic shared memory for BM x rows a tile. */
static inline int64_t qc_ra_ring_bytes(int64_t bm) {
    int64_t st = bm == 256 ? QC_RA_ST256 : bm == 128 ? QC_RA_ST128 : QC_RA_ST64;
    return st * ((bm * 128 + 128 * 32 + 2 * 512 + 1023) / 1024 * 1024) + 1024;
}

/* The launch plan: BM (64, 128 or 256 x rows a tile) and sp, the ways each
 * tile of the last wave is split over K.
 *
 * Time is modelled in x-row stages: a 64-k stage of a tile of BM rows costs
 * BM + QC_RA_FIXED (the decode and pipeline work that does not grow with BM,
 * in x rows: fitted to mxfp4.wgmma on the H200, session 13, where 128-row
 * tiles ran at 51% of the peak and 256-row ones at 68%).  The kernel's time
 * is the full waves' stages plus the last wave's: a tile's kt stages whole,
 * or ceil(kt / sp) + QC_RA_SPLIT_FIX + QC_RA_SPLIT_PER sp split (the partial
 * sums out to the workspace and back through L2, the last unit's reads
 * growing with sp; fitted to a sweep of w4a16.wgmma_bf16_sym over BM and
 * sp on the H200, session 14: the plan's pick within 1% of the best forced
 * one at m = 64..1024 on the four Llama-3-8B shapes, where a constant 6
 * took 4 splits of 256 rows for o at m = 256, 16% slower than 2 of 128).
 * sp goes up to QC_RA_SPLIT_MAX while the
 * split tiles fit one wave (tail x sp <= 132) and each unit keeps at least
 * QC_RA_SPLIT_MIN stages; the fewest splits among equals.  m <= 64 always
 * takes BM 64, larger m 128 or 256, ties going to the wider tile (qkv 6144 x
 * 4096 at m = 1024 unsplit: 103.5 against 106.8 us).  env_bm (64, 128 or
 * 256) forces BM and QC_RA_SPLIT (1..8) forces sp where the wave allows it:
 * A/B runs on the device. */
#define QC_RA_FIXED 128
#define QC_RA_SPLIT_FIX 2
#define QC_RA_SPLIT_PER 4
#define QC_RA_SPLIT_MIN 4
typedef struct qc_ra_plan {
    int64_t bm, tiles, splits, units; /* units: whole tiles, then the last wave's split ones */
} qc_ra_plan;

/* The best split of `tail` tiles of kt stages (1: none) and its time in stages; env_sp forces one. */
static inline int64_t qc_ra_tail_split(int64_t tail, int64_t kt, const char *env_sp, int64_t *stages) {
    int64_t best = 1, cost = kt;
    if (tail <= 0) {
        *stages = 0;
        return 1;
    }
    int64_t forced = env_sp ? atoll(env_sp) : 0;
    if (forced < 1 || forced > QC_RA_SPLIT_MAX) forced = 0; /* outside 1..8: ignored, the plan's pick */
    for (int64_t sp = 2; sp <= QC_RA_SPLIT_MAX; sp++) {
        if (tail * sp > QC_RA_SMS || kt < sp || (!forced && kt / sp < QC_RA_SPLIT_MIN)) break;
        int64_t c = (kt + sp - 1) / sp + QC_RA_SPLIT_FIX + QC_RA_SPLIT_PER * sp;
        if (forced ? sp == forced : c < cost) best = sp, cost = c;
    }
    *stages = best == 1 ? kt : cost;
    return best;
}

static inline qc_ra_plan qc_ra_plan_of(int64_t m, int64_t n, int64_t k, const char *env_bm) {
    qc_ra_plan pl = {64, 0, 1, 0}, c;
    const char *e = env_bm ? getenv(env_bm) : NULL, *esp = getenv("QC_RA_SPLIT");
    int64_t forced = e && (!strcmp(e, "64") || !strcmp(e, "128") || !strcmp(e, "256")) ? atoi(e) : 0;
    int64_t lo = forced ? forced : m <= 64 ? 64 : 128, hi = forced ? forced : m <= 64 ? 64 : 256, best = -1;
    int64_t tn = (n + 127) / 128, kt = k / 64;
    if (m <= 0 || n <= 0) return pl;
    for (int64_t bm = lo; bm <= hi; bm *= 2) {
        int64_t last;
        c.bm = bm;
        c.tiles = (m + bm - 1) / bm * tn;
        c.splits = qc_ra_tail_split(c.tiles % QC_RA_SMS, kt, esp, &last);
        c.units = c.tiles - c.tiles % QC_RA_SMS + c.tiles % QC_RA_SMS * c.splits;
        int64_t cost = (bm + QC_RA_FIXED) * (c.tiles / QC_RA_SMS * kt + last);
        if (best < 0 || cost <= best) best = cost, pl = c; /* a tie: the wider tile */
    }
    return pl;
}

/* The launch of p: persistent blocks of 384 threads (one per unit up to 132), the ring of the picked BM plus
 * 16 bytes a split past the first (how the device learns sp). */
static inline void qc_ra_gemm_dims(const qc_problem *p, const char *env, qc_launch_dims *d) {
    memset(d, 0, sizeof *d);
    if (p->m <= 0 || p->n <= 0) return;
    qc_ra_plan pl = qc_ra_plan_of(p->m, p->n, p->k, env);
    d->grid[0] = (uint32_t)(pl.units < QC_RA_SMS ? pl.units : QC_RA_SMS);
    d->grid[1] = d->grid[2] = 1;
    d->block[0] = QC_RA_THREADS;
    d->block[1] = d->block[2] = 1;
    d->shared_bytes = (uint32_t)(qc_ra_ring_bytes(pl.bm) + 16 * (pl.splits - 1));
}

/* The workspace ("work") of any m: 2 x 256 counter words (arrivals and stored slots, one each a tail tile), then a
 * slot of 128 x 256 f32 sums for each of at most 132 split units; none where k is a single stage (nothing to split). */
static inline uint64_t qc_ra_workspace_bytes(const qc_problem *p) {
    return p->k >= 128 ? 2048u + (uint64_t)QC_RA_SMS * 128 * 256 * 4 : 0;
}

#endif
