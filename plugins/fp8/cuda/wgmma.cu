/* fp8 W8A8 linear on Hopper: y[m,n] = (xq[m,k] . W[n,k]^T) with scales, E4M3 x E4M3 -> f32 by wgmma; TMA, persistent */
/*
 * The bf16 kernel's design (core/src/qc_kernels_wgmma.c) with 8-bit operands: a stage holds 128 K
 * (128 bytes per row, the 128-byte swizzle span), x as one 128x128 box and W as BN/R boxes of
 * R x 128 (R = WG_BOX_ROWS, 128 by default; stacked, they are the BN-row operand the descriptors read; boxes wholly
 * past n are not loaded); four wgmma m64nBNk32 per stage per consumer warpgroup.  Warpgroup 0 produces (one thread
 * issues the TMA; setmaxnreg gives its registers away), warpgroups 1 and 2 each own 64 rows of the
 * 128 x BN tile.  Persistent blocks walk the tiles in groups of 8 row tiles (L2 reuse of W and x).
 *
 * Accumulation (every mode): Hopper's FP8 wgmma adds into its accumulator with fewer bits than f32,
 * so each 128-K stage starts a fresh accumulator (scale-d = 0 on its first k32 step) and the stage's
 * sum is promoted into f32 registers `tot` by the CUDA cores -- DeepSeek-V3's recipe, CUTLASS's
 * GmmaFP8Accumulation with a promotion interval of 4 k32 MMAs, cuBLASLt without fast accumulation.
 * Two 64 x BN register sets (acc, tot) per thread bound the tile: BN 192 (96 + 96 registers of the
 * 240 a consumer gets), 160 or 128, whichever fills the last wave of tiles best.  BN 256 runs each stage as
 * two 128-column halves through one 64-register acc (wgmma m64n128k32, wait, promote, the next half): 64 + 128
 * registers, and 1.33x the MMA work per byte a block receives of a 128 x 192 tile (2x of 128 x 128), which is
 * what the copies' limit (each SM's receive rate, session 17-18) leaves to gain.  A consumer waits for its own group
 * before promoting, and the other consumer's group keeps the tensor cores busy meanwhile (DeepGEMM's
 * arrangement); the stage goes back to the producer as soon as the group that read it has retired.
 *
 * FP8_MODE 0 (channel):  tot += acc each stage;  y = tot * (xs[i] * ws[j])
 *          1 (tensor):   tot += acc each stage;  y = tot * (xs[i] * ws[0])
 *          2 (block):    tot = fmaf(acc, xs[i,g] * ws[j/128,g], tot) each stage g;  y = tot
 * (the scale product first, as the C references; they sum all of K (modes 0/1) or each 128-K group in
 * one f32 chain, so the kernel differs from them only in summation order and the tensor cores'
 * accumulation inside a stage).  With BN 192 or 160 a tile's columns may span two 128-column weight
 * blocks, split at a multiple of 32 (tiles start at multiples of 32): two scale pairs per stage.
 */
/* Output: y [m, n] f32, or with yb given (the optional "y.bf16" parameter) bf16 bits there and y left alone: half the
 * bytes for a consumer that reads bf16 (the engine's SwiGLU after gate_up).  Since session 22 the 128-column tiles
 * store bf16 rows from the registers in 8-byte exchanged stores (below), which leaves room for a sixth ring stage;
 * with QC_FP8_ST128 <= 5, and at 192 / 160 columns, bf16 rows (n % 8 == 0) leave through
 * shared memory: each warp writes its 16 rows of the tile into a staging area (rows of BN * 2 + 16 bytes: the pad
 * puts a warp's 8 rows on different banks) and lanes 0-15 copy one row each to y with cp.async.bulk, which runs
 * while the next tile's stages are computed; written straight from the registers, 4 bytes a lane, each row got 16
 * bytes of a 32-byte sector per store and the GEMM ran slower than with f32 rows (H200, session 18). */
/* Build options (A/B runs through QC_FP8_WGMMA_OPTS, fp8_kernels.c):
 *   FP8_SCALE_AHEAD 1 (block mode; default): a stage's four scales are loaded one stage before its promotion;
 *     0: at the stage, just before its wait (H200, s7: 2-8% slower on every shape).
 *   FP8_DESC_OLD 0 (default): a stage's two descriptors built once, + 2 per k32 step; 1: each wgmma's
 *     descriptors built from its address (a mask and shift each, the build before session 8). */
#ifndef FP8_DESC_OLD
#define FP8_DESC_OLD 0
#endif
/*   FP8_PROMOTE P (channel and tensor modes; default 1): the wgmma accumulator runs over P 128-K stages before
 *     it is promoted into f32, so a warpgroup waits for its own wgmma group once per P stages (the block mode
 *     needs each 128-K group's own scales: always 1). */
/*   FP8_ST256, FP8_ST192, FP8_ST160, FP8_ST128: ring stages per tile width (defaults 4, 4, 4, 6: what the host sizes the
 *     shared memory for, with the bf16 staging at 192 / 160, see fp8_wgmma_plan; fewer are allowed, for A/B runs of the
 *     ring's depth; 4 ran as fast as 5 at 128 and 192 columns beside the staging, H200 session 17 call 9, and 6 without
 *     it 3% faster than 5 at 128, session 22 call 1). */
#ifndef FP8_ST256
#define FP8_ST256 4
#endif
#ifndef FP8_ST192
#define FP8_ST192 4
#endif
#ifndef FP8_ST160 /* 4 since 256-column tiles: the channel build's column scales (4 KiB of static shared memory)
                      and 5 stages + staging at 160 came to 232576 bytes, over the 232448 a block may have */
#define FP8_ST160 4
#endif
#ifndef FP8_ST128
#define FP8_ST128 (FP8_STG128 ? 5 : 6)
#endif
/*   FP8_STG128 0 (default since session 22): 128-column tiles store bf16 rows from the registers as 256's do
 *     (8-byte exchanged stores), which leaves room for a sixth ring stage (cuBLASLt's 128 x 128 fp8 kernel keeps 6);
 *     1: they stage their rows in shared memory after a ring of at most 5 (the default before).  The host's
 *     QC_FP8_ST128=N sets FP8_ST128=N and FP8_STG128 (0 for N = 6, else 1) and sizes the shared memory to match. */
#ifndef FP8_STG128
#define FP8_STG128 0
#endif
#if FP8_ST256 > 4 || FP8_ST192 > 4 || FP8_ST160 > 4 || FP8_ST128 > (FP8_STG128 ? 5 : 6) || FP8_ST256 < 2 || \
    FP8_ST192 < 2 || FP8_ST160 < 2 || FP8_ST128 < 2
#error "FP8_ST*: 2 up to the stages the host sizes shared memory for (4, 4, 4, 5; 128 unstaged: 6)"
#endif
#ifndef FP8_PROMOTE
#define FP8_PROMOTE 1
#endif
#if FP8_MODE == 2
#define FP8_P 1
#else
#define FP8_P FP8_PROMOTE
#endif
/* a consumer holds FP8_P stages before it releases any, so a ring shallower than that never refills */
#if FP8_P > FP8_ST192 || FP8_P > FP8_ST160 || FP8_P > FP8_ST128
#error "FP8_PROMOTE above the ring's stages (FP8_ST*) would hang: the consumers hold P stages before releasing one"
#endif
/* (FP8_EFF256 > 0 with FP8_PROMOTE > 1 is refused below: a 256-column tile promotes each half-stage) */
#ifndef FP8_SCALE_AHEAD
#define FP8_SCALE_AHEAD 1
#endif
/*   FP8_CLUSTER 2 (the fp8.gemm_*_wgmma_pair builds, m > 128, on with QC_FP8_PAIR=on): blocks run in clusters of
 *     two on two row tiles of the same columns (virtual tile t = 2 pair + rank: tm = 2 tm_pair + rank); each block
 *     copies half of the W boxes and multicasts them into both blocks' rings, so the L2 sends each W stage once a
 *     pair.  Why it was tried: at 128-192 column tiles the kernel reads 32-40 KB a stage from L2 for 2-3 MFLOP, and
 *     its copies alone take 3/4 of its time.  Measured (H200, session 17): 5-13% slower than one block a tile, its
 *     copies alone slower too, so the limit is on each SM's side, not the L2's; kept off by default.  A slot's
 *     empty barrier then counts both blocks' consumer warps (each arrives on its own and on its partner's), so
 *     neither block multicasts into a slot its partner still reads; a row tile past m computes on zero rows and
 *     stores nothing (its partner still needs its copies); a cluster barrier after the barriers' init and before
 *     exit keeps remote arrivals and copies inside both blocks' lifetimes.  1 (default): no clusters. */
#ifndef FP8_CLUSTER
#define FP8_CLUSTER 1
#endif
/*   Diagnosis only (wrong results; QC_FP8_WGMMA_OPTS): FP8_SKIP_MMA=1 issues no wgmma (the ring, barriers and
 *     promotion run as they are); FP8_SKIP_EPI=1 stores no y (the stores stay in the code behind a test on k that
 *     fails at run time, so that the promotion they consume is not optimized away); FP8_EPI_REPS=R (results
 *     right, time not) runs each tile's epilogue loop R times (the same values to the same places), for its
 *     marginal cost: session 17's FP8_SKIP_EPI ran 13% faster, yet halving the stored bytes (bf16 rows, session 18)
 *     gained nothing. */
#ifndef FP8_EPI_REPS
#define FP8_EPI_REPS 1
#endif
#ifndef FP8_SKIP_MMA
#define FP8_SKIP_MMA 0
#endif
#ifndef FP8_SKIP_EPI
#define FP8_SKIP_EPI 0
#endif
/*   FP8_SKIP_ALL=1 (diagnosis): every block returns right after its barriers' init, so the time is the launch of a
 *     block of this size and shared memory, and the grid's start and end (the fixed cost of a one-wave GEMM). */
#ifndef FP8_SKIP_ALL
#define FP8_SKIP_ALL 0
#endif
/*   FP8_SKIP_TMA=1 (diagnosis): the producer copies nothing and the consumers do not wait for the full barriers, so the
 *     wgmma and promotion loop runs alone on whatever the ring holds (session 20).  (Leaving the promotion out
 *     instead does not time the MMAs: ptxas then drops the wgmma whose results nothing reads.) */
#ifndef FP8_SKIP_TMA
#define FP8_SKIP_TMA 0
#endif
/*   FP8_DBL128 1 (default): 128-column tiles keep two accumulators (64 + 64 + tot's 64 registers) and take stages in
 *     pairs: stage kt's group, then kt + 1's, wait_group 1 and promote kt while kt + 1 runs, wait_group 0 and promote
 *     kt + 1.  With one accumulator a warpgroup gives the tensor cores nothing from each wait to its next issue; two
 *     ran 9-12% faster at M = 1024 (H200, session 20 call 5).  0: one accumulator, as 192 and 256 (no registers for
 *     a second). */
#ifndef FP8_DBL128
#define FP8_DBL128 1
#endif
/*   FP8_DBL_TURN T (2, 4, 8, 16; default 8, the block build 16): the two accumulators take stages T a turn while T are
 *     left, one group always in flight but at the turn's end, so a warpgroup drains its wgmma queue once per T stages
 *     (the rest of a tile's stages go in pairs).  Both warpgroups wait for the same stages, so they drain together
 *     and the tensor cores idle from their last wgmma to their next issue: turns of 8 ran 3-6% faster than pairs
 *     (H200, session 22 call 2), and 128-column tiles with them and 6 stages faster than 256-column ones on all four
 *     shapes; 16 gained the block mode (more work a stage: its scales) 1-3.5% more and the others nothing (call 3).
 *     The turn's loop is unrolled whole, so no group is in flight across a back edge (ptxas: no C7514). */
#ifndef FP8_DBL_TURN
#define FP8_DBL_TURN (FP8_MODE == 2 ? 16 : 8)
#endif
#if FP8_DBL_TURN != 2 && FP8_DBL_TURN != 4 && FP8_DBL_TURN != 8 && FP8_DBL_TURN != 16
#error "FP8_DBL_TURN: 2, 4, 8 or 16"
#endif
/*   FP8_EPI_HALVES 1 (default): a whole 256-column tile's epilogue loops over its two halves (one unrolled copy of
 *     16 chunks); 0: all 32 chunks unrolled. */
#ifndef FP8_EPI_HALVES
#define FP8_EPI_HALVES 1
#endif
#if FP8_CLUSTER != 1 && FP8_CLUSTER != 2
#error "FP8_CLUSTER: 1 or 2"
#endif
/* Registers after setmaxnreg (producer, each consumer; 128 x 24 + 256 x 240 = 64512 of 65536): the staged bf16 rows'
   addressing did not fit 232 beside acc and tot (a spill); the pair builds' producer needs 40, and they store bf16
   rows straight from the registers (the staging's registers spilled there at 232). */
#if FP8_CLUSTER == 1
#define FP8_STAGED_OUT 1
#define FP8_REG_PRODUCER "24"
#define FP8_REG_CONSUMER "240"
#else
#define FP8_STAGED_OUT 0
#define FP8_REG_PRODUCER "40"
#define FP8_REG_CONSUMER "232"
#endif
#define WG_SMS 132
#define WG_BM 128
#define WG_BK 128 /* K elements (= bytes) per stage */
#ifndef WG_GROUP_M /* row tiles per group of the tile walk */
#define WG_GROUP_M 8
#endif
#define WG_A_BYTES (WG_BM * WG_BK)
#ifndef WG_BOX_ROWS /* rows of W per TMA box (the host's map has the same: choose_wbox, fp8_kernels.c) */
#define WG_BOX_ROWS 128
#endif
#define WG_BOX_B_BYTES (WG_BOX_ROWS * WG_BK)
#define WG_SW 256 /* column scales per buffer: the widest tile */
#define WG_STG_PAD 16 /* bytes after each staged bf16 row (keep in step with fp8_wgmma_plan) */

/* tile width: the one whose waves of WG_SMS tiles carry the most useful columns, weighted by how fast
   a tile of that width runs (FP8_EFF256 / 192 / 160 / 128, the host's QC_FP8_BN_EFF when set; a weight of 0 never
   picks that width; the pair builds never take 256); keep in step with fp8_wgmma_plan in fp8_kernels.c */
/* 128 only by default since session 22 (256 before; 192 and 160 out since sessions 19-20): fp8_kernels.c's g_fp8_eff
   says why */
#ifndef FP8_EFF256 /* 0 since session 22: 128-column tiles with 6 stages and turns of 8 ran faster on every shape */
#define FP8_EFF256 0
#endif
#if FP8_EFF256 > 0 && FP8_P > 1
#error "FP8_PROMOTE > 1 needs FP8_EFF256=0 (QC_FP8_BN_EFF=0,...): a 256-column tile promotes each half-stage"
#endif
#ifndef FP8_EFF192
#define FP8_EFF192 0
#endif
#ifndef FP8_EFF160
#define FP8_EFF160 0
#endif
#ifndef FP8_EFF128
#define FP8_EFF128 90
#endif
/* a tile width takes whole W boxes (they stack into its stage); the 128 path is always built (the switch's default,
   and the pair builds' fallback from 256) */
#if (128 % WG_BOX_ROWS) || (FP8_EFF256 > 0 && 256 % WG_BOX_ROWS) || (FP8_EFF192 > 0 && 192 % WG_BOX_ROWS) || \
    (FP8_EFF160 > 0 && 160 % WG_BOX_ROWS) || (FP8_EFF128 > 0 && 128 % WG_BOX_ROWS)
#error "WG_BOX_ROWS (QC_FP8_WBOX) must divide 128 (always built) and every tile width built in (QC_FP8_BN_EFF)"
#endif
__device__ __forceinline__ int qc_wg_bn(long long m, long long n) {
    const int bns[4] = {256, 192, 160, 128}, eff[4] = {FP8_CLUSTER == 2 ? 0 : FP8_EFF256, FP8_EFF192, FP8_EFF160,
                                                       FP8_EFF128};
    long long tm = (m + WG_BM - 1) / WG_BM, best = -1;
    if (FP8_CLUSTER == 2) tm = (tm + 1) & ~1ll; /* row tiles go in pairs */
    int pick = 128;
    for (int i = 0; i < 4; i++) {
        if (eff[i] <= 0) continue;
        long long tn = (n + bns[i] - 1) / bns[i], waves = (tm * tn + WG_SMS - 1) / WG_SMS;
        long long score = tm * n * eff[i] / (waves * bns[i]);
        if (score > best) { best = score; pick = bns[i]; }
    }
    return pick;
}
__device__ __forceinline__ void qc_tma2d(unsigned dst, const QcTmap *map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
/* K-major operand, 128-byte swizzle: rows of 128 B, 8-row groups 1024 B apart (SBO) */
__device__ __forceinline__ u64 qc_desc(unsigned addr) {
    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
/* the same from its low word: address field | LBO, so that per-step offsets stay 32-bit adds */
__device__ __forceinline__ unsigned qc_desc_lo(unsigned addr) { return ((addr & 0x3FFFFu) >> 4) | (1u << 16); }
__device__ __forceinline__ u64 qc_desc_of(unsigned lo) { return (u64)lo | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62); }
/* the bf16 output path's pieces: a 4-byte shared store, and one row (bytes % 16 == 0) from shared to global memory */
__device__ __forceinline__ void qc_sts32(unsigned addr, u32 v) {
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void qc_bulk_store(void *dst, unsigned src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void qc_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void qc_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void qc_wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int BN> __device__ __forceinline__ void qc_wgmma(float *d, u64 da, u64 db, int scale_d) {
    if constexpr (BN == 192) qc_wgmma_e4m3_192(d, da, db, scale_d);
    else if constexpr (BN == 160) qc_wgmma_e4m3_160(d, da, db, scale_d);
    else qc_wgmma_e4m3_128(d, da, db, scale_d);
}
__device__ __forceinline__ void qc_wg_tile(long long t, long long tiles_m, long long tiles_n, long long *tm,
                                           long long *tn) {
    long long per_group = (long long)WG_GROUP_M * tiles_n;
    long long first_m = t / per_group * WG_GROUP_M, in_g = t % per_group;
    long long gsz = tiles_m - first_m < WG_GROUP_M ? tiles_m - first_m : WG_GROUP_M;
    *tm = first_m + in_g % gsz;
    *tn = in_g / gsz;
}
/* the tiles a grid walks: with clusters, pairs of row tiles (an odd last one gets an empty partner: the host
   registers this build for m > 128 only) */
__device__ __forceinline__ long long qc_wg_tiles(long long tiles_m, long long tiles_n) {
    return FP8_CLUSTER == 2 ? 2 * ((tiles_m + 1) >> 1) * tiles_n : tiles_m * tiles_n;
}
/* tile t of the walk; with clusters t = 2 pair + rank (blockIdx.x % 2 is the rank in a 2 x 1 x 1 cluster, and the
   grid strides by an even gridDim.x, so both blocks of a cluster walk the same pairs in step) */
__device__ __forceinline__ void qc_wg_tile_of(long long t, long long tiles_m, long long tiles_n, long long *tm,
                                              long long *tn) {
#if FP8_CLUSTER == 2
    long long pm;
    qc_wg_tile(t >> 1, (tiles_m + 1) >> 1, tiles_n, &pm, tn);
    *tm = 2 * pm + (t & 1);
#else
    qc_wg_tile(t, tiles_m, tiles_n, tm, tn);
#endif
}
#if FP8_CLUSTER == 2
/* W box copied once, landing at the same shared-memory offset in both blocks of the cluster, each block's barrier
   at `bar` counting its bytes */
__device__ __forceinline__ void qc_tma2d_mc(unsigned dst, const QcTmap *map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar),
                 "h"((unsigned short)3) : "memory");
}
__device__ __forceinline__ unsigned qc_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* arrive on the barrier at the same offset in the partner block (its rank read here, not kept in a register
   across the consumers' loop, which has none to spare).  The default semantics (release at CTA scope), as
   CUTLASS's ClusterBarrier: what the arrival publishes is that the tensor cores' reads of the stage are done, which
   the wgmma wait already guarantees; .release.cluster adds a fence on the consumers' path every stage. */
__device__ __forceinline__ void qc_mbar_arrive_peer(unsigned bar) {
    asm volatile("{\n.reg .b32 ra, rk;\nmov.u32 rk, %%cluster_ctarank;\nxor.b32 rk, rk, 1;\n"
                 "mapa.shared::cluster.u32 ra, %0, rk;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void qc_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
#endif

template <int K> struct QcTag { static constexpr int v = K; }; /* a constant as a type: the epilogue's kind, whole tile */

#if FP8_MODE == 2
/* tot += acc * scale for the 8-column chunks [J0, J1) of this thread's accumulators (4 values each:
   rows r0 (i%4 < 2) and r1) */
template <int J0, int J1>
__device__ __forceinline__ void qc_promote_scaled(float *tot, const float *acc, float s0, float s1) {
#pragma unroll
    for (int i = 4 * J0; i < 4 * J1; i++) tot[i] = fmaf(acc[i], (i & 2) ? s1 : s0, tot[i]);
}
/* chunks [0, J) in the first weight block (scales s0a, s1a), [J, BN/8) in the next */
template <int BN, int J>
__device__ __forceinline__ void qc_promote_split(float *tot, const float *acc, float s0a, float s1a, float s0b,
                                                 float s1b) {
    constexpr int JA = J < BN / 8 ? J : BN / 8;
    qc_promote_scaled<0, JA>(tot, acc, s0a, s1a);
    if constexpr (JA < BN / 8) qc_promote_scaled<JA, BN / 8>(tot, acc, s0b, s1b);
}
#endif

template <int BN, int ST>
__device__ __forceinline__ void qc_fp8_gemm(const QcTmap *tmx, const QcTmap *tmw, const float *xs, const float *ws,
                                            float *y, long long m, long long n, long long k, unsigned char *smem,
                                            unsigned long long *bars, float *sws, float *work, u16 *yb) {
    const unsigned STAGE = WG_A_BYTES + BN * WG_BK, RS = BN * 2 + WG_STG_PAD; /* RS: a staged bf16 row */
    const unsigned base = (qc_smem(smem) + 1023u) & ~1023u; /* the 128-byte swizzle repeats every 1024 B */
    const unsigned full = qc_smem(bars), empty = full + 8 * ST;
    const int tid = threadIdx.x, wg = tid >> 7;
    const long long tiles_m = (m + WG_BM - 1) / WG_BM, tiles_n = (n + BN - 1) / BN;
    const long long tiles = qc_wg_tiles(tiles_m, tiles_n);
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            qc_mbar_init(full + 8 * s, 1);  /* the producer's arrive.expect_tx, then the TMA bytes */
            qc_mbar_init(empty + 8 * s, 8 * FP8_CLUSTER); /* one arrival per consumer warp (of both blocks) */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if FP8_CLUSTER == 2
    qc_cluster_sync(); /* the partner's barriers are initialized before anything arrives on them */
#else
    __syncthreads();
#endif
    if (FP8_SKIP_ALL) return;
    const int kt_n = (int)((k + WG_BK - 1) / WG_BK); /* a ragged last stage reads zeros past k */
    /* split-K (gridDim.y > 1 and a workspace): this block's stages [kt_b, kt_e) of every tile it takes */
    const int nsp = work ? (int)gridDim.y : 1, spl = work ? (int)blockIdx.y : 0;
    const int kt_b = (int)((long long)kt_n * spl / nsp), kt_e = (int)((long long)kt_n * (spl + 1) / nsp);
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 " FP8_REG_PRODUCER ";\n" ::: "memory");
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)tmx) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)tmw) : "memory");
            int s = 0;
            unsigned ph = 0;
            for (long long t = blockIdx.x; t < tiles && !FP8_SKIP_TMA; t += gridDim.x) {
                long long tm, tn;
                qc_wg_tile_of(t, tiles_m, tiles_n, &tm, &tn);
                const int row0 = (int)(tm * WG_BM), col0 = (int)(tn * BN);
                const long long left = n - col0;
                const int nb = left >= BN ? BN / WG_BOX_ROWS : (int)((left + WG_BOX_ROWS - 1) / WG_BOX_ROWS);
                const unsigned bytes = WG_A_BYTES + (unsigned)nb * WG_BOX_B_BYTES;
                for (int kt = kt_b; kt < kt_e; kt++) {
                    qc_mbar_wait(empty + 8 * s, ph ^ 1u); /* a fresh barrier passes parity 1 at once */
                    const unsigned fb = full + 8 * s, sa = base + s * STAGE, sb = sa + WG_A_BYTES;
                    qc_mbar_expect_tx(fb, bytes);
                    qc_tma2d(sa, tmx, kt * WG_BK, row0, fb);
#if FP8_CLUSTER == 2
                    for (int b = (int)qc_cluster_rank(); b < nb; b += 2) /* the partner copies the other half */
                        qc_tma2d_mc(sb + b * WG_BOX_B_BYTES, tmw, kt * WG_BK, col0 + WG_BOX_ROWS * b, fb);
#else
                    for (int b = 0; b < nb; b++)
                        qc_tma2d(sb + b * WG_BOX_B_BYTES, tmw, kt * WG_BK, col0 + WG_BOX_ROWS * b, fb);
#endif
                    if (++s == ST) { s = 0; ph ^= 1u; }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 " FP8_REG_CONSUMER ";\n" ::: "memory");
        const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
        /* NH halves of BNW columns a stage: BN 256 runs as two wgmma-128 halves through one acc */
        constexpr int NH = BN == 256 ? 2 : 1, BNW = BN / NH;
        constexpr bool DBL = FP8_DBL128 && BN == 128 && FP8_P == 1 && FP8_CLUSTER == 1;
        /* bf16 rows staged in shared memory (STG: not at 256, nor at 128 with FP8_STG128=0, no room beside the ring);
           the others leave from the registers, in 8-byte exchanged stores where n % 16 == 0 (XCHG) */
        constexpr bool STG = FP8_STAGED_OUT && BN != 256 && (BN != 128 || FP8_STG128);
        constexpr bool XCHG = FP8_CLUSTER == 1 && (BN == 128 ? !FP8_STG128 : BN == 256 && FP8_MODE != 1);
        float acc[BNW / 2], tot[BN / 2], acc1[DBL ? BNW / 2 : 1];
#if FP8_MODE == 2
        const long long kb = kt_n, nblk = (n + QC_FP8_BLOCK - 1) / QC_FP8_BLOCK; /* 128-K groups, weight block rows */
#endif
        int s = 0;
        unsigned ph = 0;
        int parity = 0; /* which of the warpgroup's two column-scale buffers this tile uses */
#if FP8_MODE != 0
        (void)sws, (void)parity;
#endif
#if FP8_MODE == 1
        const float wt = __ldg(ws); /* the one weight scale */
#endif
        /* one stage (half h of it): wait for its bytes (at h = 0), four wgmma k32 into acc (a fresh sum: scale-d 0
           on the first); half h reads W rows [h BNW, (h + 1) BNW) of the stage, 1 KiB-aligned (BNW x 128 bytes) */
#if !FP8_DESC_OLD
        /* stage 0's descriptors; stage st's are st * STAGE / 16 further (the ring stays under 256 KiB: no carry
           out of the 14-bit address field) */
        const unsigned la0 = qc_desc_lo(base + c * (64 * WG_BK)), lb0 = qc_desc_lo(base + WG_A_BYTES);
#endif
        auto issue_to = [&](float *a, int st_, bool first, int h) { /* first: the stage starts a fresh sum */
            if (h == 0 && !FP8_SKIP_TMA) qc_mbar_wait(full + 8 * st_, ph);
#if FP8_DESC_OLD
            const unsigned sa = base + st_ * STAGE + c * (64 * WG_BK),
                           sb = base + st_ * STAGE + WG_A_BYTES + h * (BNW * WG_BK);
            qc_wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 32 && !FP8_SKIP_MMA; kk++) /* 32 k = 32 B further along the swizzled rows */
                qc_wgmma<BNW>(a, qc_desc(sa + 32 * kk), qc_desc(sb + 32 * kk), kk > 0 || !first);
#else
            /* 32 k = 32 B further along the swizzled rows = + 2 in the descriptors' address field (sa, sb are
               1 KiB-aligned, so no carry): the stage's two descriptors once, not a mask and shift per wgmma on
               the path from the full-barrier wait to the first wgmma */
            const unsigned la = la0 + st_ * (STAGE >> 4), lb = lb0 + st_ * (STAGE >> 4) + h * (BNW * WG_BK >> 4);
            qc_wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 32 && !FP8_SKIP_MMA; kk++)
                qc_wgmma<BNW>(a, qc_desc_of(la + 2 * kk), qc_desc_of(lb + 2 * kk), kk > 0 || !first);
#endif
            qc_wg_commit();
        };
        auto issue = [&](int st_, bool first, int h) { issue_to(acc, st_, first, h); };
        /* Tiles are software-pipelined by one stage: the first stage of a warpgroup's next tile is issued
           before the epilogue of the current one (acc is free once promoted; the epilogue reads only tot),
           so the tensor cores work through both warpgroups' next stage while the tile is stored, instead
           of idling from the last wgmma of one tile to the first of the next. */
        bool issued = false; /* stage 0 of tile t is already in flight */
#pragma unroll
        for (int i = 0; i < BN / 2; i++) tot[i] = 0.f;
        for (long long t = blockIdx.x; t < tiles; t += gridDim.x, parity ^= 1) {
            long long tm, tn;
            qc_wg_tile_of(t, tiles_m, tiles_n, &tm, &tn);
#if FP8_MODE == 0
            /* The tile's BN column scales go to shared memory by cp.async now and are waited for only in
               the epilogue: loaded there, they put one or two L2 round trips (under the mainloop's load)
               between the last wgmma of a tile and the first of the next, on every tile. */
            float *sw = sws + (c * 2 + parity) * WG_SW;
            {
                const int ci = tid & 127;
                const long long cn = tn * BN + 2 * ci;
                if (ci < BN / 2 && cn < n)
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(qc_smem(sw + 2 * ci)), "l"(ws + cn)
                                 : "memory");
                asm volatile("cp.async.commit_group;\n" ::: "memory");
            }
#endif
            /* accumulator i of a thread: row 16 warp + lane/4 (+8 for i%4 >= 2), column 8 (i/4) + 2 (lane%4) + i%2 */
            const long long r0 = tm * WG_BM + c * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;
#if FP8_MODE != 2
            const float f0 = r0 < m ? __ldg(xs + r0) : 0.f, f1 = r1 < m ? __ldg(xs + r1) : 0.f; /* used after the K loop */
#endif
#if FP8_MODE == 2
            const float *xs0 = xs + (r0 < m ? r0 : 0) * kb, *xs1 = xs + (r1 < m ? r1 : 0) * kb;
            const long long b0 = tn * BN / QC_FP8_BLOCK, b1 = b0 + 1 < nblk ? b0 + 1 : b0;
            const float *wsa = ws + b0 * kb, *wsb = ws + b1 * kb;
            /* 8-column chunks of the tile in block b0: 16, or 12 / 8 / 4 for tiles starting 32 / 64 / 96
               columns into it */
            const int split = (int)((QC_FP8_BLOCK - (tn * BN) % QC_FP8_BLOCK) / 8);
            /* stage kt's scales (x rows r0, r1; weight blocks b0, b1), loaded one stage ahead of use */
            float sc[4] = {xs0[kt_b], xs1[kt_b], wsa[kt_b], wsb[kt_b]};
            auto load_sc = [&](int kt) {
                if (kt < kt_e) sc[0] = xs0[kt], sc[1] = xs1[kt], sc[2] = wsa[kt], sc[3] = wsb[kt];
            };
#endif
            if constexpr (DBL) {
                /* stages in pairs: kt's group into acc, kt + 1's into acc1, then wait_group 1 and promote acc while
                   acc1's group runs, wait_group 0 and promote acc1.  No group stays in flight across the loop's back
                   edge: with one in flight there, ptxas serialized every wgmma (C7514), even with its wait before
                   the read of the other accumulator. */
                auto retire = [&](float *a, int slot, float ps0, float ps1) { /* a's stage (at slot) is read */
                    if (lane == 0) qc_mbar_arrive(empty + 8 * slot);
#pragma unroll
                    for (int i = 0; i < BNW / 2; i++) asm volatile("" : "+f"(a[i])::"memory");
#if FP8_MODE == 2
                    qc_promote_scaled<0, 16>(tot, a, ps0, ps1); /* 128 | col0: one weight block */
#else
                    (void)ps0, (void)ps1;
#pragma unroll
                    for (int i = 0; i < BNW / 2; i++) tot[i] += a[i];
#endif
                };
                auto next_slot = [&]() {
                    if (++s == ST) { s = 0; ph ^= 1u; }
                };
                for (int kt = kt_b; kt < kt_e; kt += 2) {
#if FP8_DBL_TURN > 2
                    /* FP8_DBL_TURN stages a turn while as many are left: acc and acc1 alternate with one group always
                       in flight but at the turn's end, so the warpgroup drains once per turn, not once per pair */
                    if (kt + FP8_DBL_TURN <= kt_e) {
                        int sl[2];
                        float pq[2][2];
#pragma unroll
                        for (int q = 0; q < FP8_DBL_TURN; q++) {
                            float *a = (q & 1) ? acc1 : acc, *prev = (q & 1) ? acc : acc1;
#if FP8_MODE == 2
                            const float qx0 = xs0[kt + q], qx1 = xs1[kt + q], qw = wsa[kt + q];
#endif
                            if (q > 0 || kt > kt_b || !issued) issue_to(a, s, true, 0);
                            sl[q & 1] = s;
                            next_slot();
                            if (q > 0) {
                                qc_wg_wait<1>();
                                retire(prev, sl[(q - 1) & 1], pq[(q - 1) & 1][0], pq[(q - 1) & 1][1]);
                            }
#if FP8_MODE == 2
                            pq[q & 1][0] = qx0 * qw, pq[q & 1][1] = qx1 * qw;
#else
                            pq[q & 1][0] = pq[q & 1][1] = 0.f;
#endif
                        }
                        qc_wg_wait<0>();
                        retire(acc1, sl[1], pq[1][0], pq[1][1]);
                        kt += FP8_DBL_TURN - 2; /* and 2 more at the loop's end */
                        continue;
                    }
#endif
                    const bool two = kt + 1 < kt_e;
#if FP8_MODE == 2
                    /* loaded before the issue, used after the waits */
                    const float xa0 = xs0[kt], xa1 = xs1[kt], wa = wsa[kt];
                    const float xb0 = two ? xs0[kt + 1] : 0.f, xb1 = two ? xs1[kt + 1] : 0.f, wb = two ? wsa[kt + 1] : 0.f;
#endif
                    if (kt > kt_b || !issued) issue_to(acc, s, true, 0);
                    const int sa_ = s;
                    next_slot();
                    if (two) {
                        issue_to(acc1, s, true, 0);
                        qc_wg_wait<1>();
                    } else {
                        qc_wg_wait<0>();
                    }
#if FP8_MODE == 2 /* a_s * w_s of the pair's rows r0, r1 */
                    const float pa0 = xa0 * wa, pa1 = xa1 * wa, pb0 = xb0 * wb, pb1 = xb1 * wb;
#else
                    const float pa0 = 0.f, pa1 = 0.f, pb0 = 0.f, pb1 = 0.f;
#endif
                    retire(acc, sa_, pa0, pa1);
                    if (two) {
                        const int sb_ = s;
                        next_slot();
                        qc_wg_wait<0>();
                        retire(acc1, sb_, pb0, pb1);
                    }
                }
            } else
            for (int kt = kt_b; kt < kt_e; kt++) {
#if FP8_MODE == 2 && FP8_SCALE_AHEAD
                const float xa0 = sc[0], xa1 = sc[1], wa = sc[2], wb = sc[3];
                load_sc(kt + 1); /* the next stage's, under this one's wait */
#elif FP8_MODE == 2
                load_sc(kt);
                const float xa0 = sc[0], xa1 = sc[1], wa = sc[2], wb = sc[3];
#endif
                /* the group goes on in acc (FP8_P > 1, so NH = 1) */
                const bool defer = FP8_P > 1 && (kt - kt_b) % FP8_P != FP8_P - 1 && kt != kt_e - 1;
#pragma unroll
                for (int h = 0; h < NH; h++) {
                    if (kt > kt_b || h > 0 || !issued) issue(s, (kt - kt_b) % FP8_P == 0, h);
                    if (defer) break;
                    qc_wg_wait<0>();
                    if (h == NH - 1 && lane == 0) /* the group's stages are read: the producer may refill them */
                        for (int j = 0, sj = s; j <= (kt - kt_b) % FP8_P; j++, sj = sj > 0 ? sj - 1 : ST - 1) {
                            qc_mbar_arrive(empty + 8 * sj);
#if FP8_CLUSTER == 2
                            qc_mbar_arrive_peer(empty + 8 * sj);
#endif
                        }
#pragma unroll
                    for (int i = 0; i < BNW / 2; i++) asm volatile("" : "+f"(acc[i])::"memory");
#if FP8_MODE == 2
                    /* a_s * w_s first, as the reference */
                    const float s0a = xa0 * wa, s1a = xa1 * wa, s0b = xa0 * wb, s1b = xa1 * wb;
                    if constexpr (BN == 256) /* 256 | col0: half h is weight block b0 + h */
                        qc_promote_scaled<0, 16>(tot + 64 * h, acc, h ? s0b : s0a, h ? s1b : s1a);
                    else if (BN == 128 || split == 16) /* 128 | col0 */
                        qc_promote_split<BN, 16>(tot, acc, s0a, s1a, s0b, s1b);
                    else if (split == 8)
                        qc_promote_split<BN, 8>(tot, acc, s0a, s1a, s0b, s1b);
                    else if (BN == 160 && split == 12)
                        qc_promote_split<BN, 12>(tot, acc, s0a, s1a, s0b, s1b);
                    else if (BN == 160)
                        qc_promote_split<BN, 4>(tot, acc, s0a, s1a, s0b, s1b);
#else
#pragma unroll
                    for (int i = 0; i < BNW / 2; i++) tot[h * (BNW / 2) + i] += acc[i];
#endif
                }
                if (++s == ST) { s = 0; ph ^= 1u; }
            }
            /* the next tile's first stage (the same ring slot order as the producer's); none when this block's K
               range is empty, since the producer then fills nothing (test_fp8_wgmma_emu found the hang) */
            issued = kt_b < kt_e && t + gridDim.x < tiles;
            if (issued) issue(s, true, 0);
            const long long cb = tn * BN + 2 * (lane & 3);
            float *y0 = y + r0 * n, *y1 = y + r1 * n;
            /* bf16 rows through shared memory: this warp's 16 rows of staging, after the ring (addresses computed
               where used: the epilogue runs with acc and tot live, and a few more registers here spilled) */
            const bool staged = STG && yb && !(n & 7);
            if (staged) {
                /* the previous tile's copies out of these rows have read them */
                if (lane < 16) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                __syncwarp();
            }
            /* split-K: the warpgroup's partial sums to its slot; the last split of the tile to arrive (a counter
               per tile and warpgroup) adds the slots in split order (the same sum whichever block is last),
               stores, and puts the counter back to zero.  tot only: acc belongs to the next tile's stage. */
            bool store = true;
            if (nsp > 1) {
                __shared__ int qc_last[2];
                constexpr long long SLOT = 128 * (BN / 2);
                const int ti = tid & 127;
                float *slots = work + 512 + ((long long)t * nsp * 2 + c) * SLOT; /* split j: + 2 j SLOT */
#pragma unroll
                for (int i = 0; i < BN / 2; i++) slots[2 * spl * SLOT + i * 128 + ti] = tot[i];
                __threadfence();
                asm volatile("bar.sync %0, 128;\n" ::"r"(3 + c) : "memory");
                if (ti == 0) qc_last[c] = atomicAdd((int *)work + 2 * t + c, 1) == nsp - 1;
                asm volatile("bar.sync %0, 128;\n" ::"r"(3 + c) : "memory");
                store = qc_last[c] != 0;
                if (store) {
                    __threadfence();
#pragma unroll
                    for (int i = 0; i < BN / 2; i++) tot[i] = __ldcg(slots + i * 128 + ti);
                    for (int j = 1; j < nsp; j++)
#pragma unroll
                        for (int i = 0; i < BN / 2; i++) tot[i] += __ldcg(slots + 2 * j * SLOT + i * 128 + ti);
                    if (ti == 0) ((int *)work)[2 * t + c] = 0;
                }
            }
#if FP8_MODE == 0
            /* this thread's copies are done; the warpgroup's named barrier (1 + c) makes the others' visible,
               and orders this tile's reads before the copies of the tile after next into the same buffer */
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
#endif
            /* The epilogue reads tot and the scales only (acc is being written by the tensor cores); the
               column scales come from shared memory one 8-column chunk at a time, so that no register set
               beside acc and tot is needed.  Columns past n were not copied and are not stored. */
            /* bf16 rows straight from the registers (BN 128 unstaged, BN 256, the pair builds): with n % 16 == 0 a warp's chunk
               pairs (2i, 2i + 1) are all stored or none (tiles start at multiples of 32), so lanes 2q and 2q + 1
               swap halves (one shuffle a row and pair) and each stores 8 bytes: a quad's store fills a 32-byte
               sector, as f32 rows do, not half of one (H200, session 19: 4-byte bf16 stores made o 6% slower) */
            /* (192 and 160 stage such rows; the pair builds, and the tensor mode at 256, have no registers to spare for
               the exchange: a 4-byte spill; at 128 the tensor mode exchanges too, no spill) */
            const bool xchg = XCHG && !(n & 15);
            /* One unrolled chunk loop per kind of output (staged bf16 rows, exchanged 8-byte bf16 stores, 4-byte bf16
               stores, f32), the kind chosen once: with the kind tested in each of the BN / 8 chunks, the kinds' code
               lay interleaved and a tile's epilogue fetched all of it (session 21: a third of the warps' stall
               samples at o 1024 were "no instructions", mostly there).  Kinds a build cannot take are not compiled. */
            auto epi = [&](auto kind_tag, auto full_tag) { /* FULL: every column of the tile is below n */
                constexpr int KIND = decltype(kind_tag)::v;
                constexpr bool FULL = decltype(full_tag)::v;
                /* a whole 256-column tile: one loop over the halves around the unrolled 16 chunks, tot's upper half
                   moved down between them (64 moves), for half the straight-line code a cold tile fetches */
                constexpr int HALVES = FP8_EPI_HALVES && BN == 256 && FULL && FP8_EPI_REPS == 1 ? 2 : 1, JH = BN / 8 / HALVES;
                u32 ev0 = 0, ev1 = 0; /* the even chunk's bf16 pairs (rows r0, r1), kept for its odd partner */
#pragma unroll 1
                for (int rep = 0; rep < FP8_EPI_REPS; rep++) {
                    if (rep) asm volatile("" ::: "memory"); /* FP8_EPI_REPS > 1 (diagnosis): kept apart, not merged */
#pragma unroll 1
                  for (int hh = 0; hh < HALVES; hh++) {
#pragma unroll
                    for (int j = 0; j < JH; j++) { /* tot[4 j ..]: chunk jc of the tile */
                        const int jc = j + hh * JH;
                        const long long cn = cb + 8 * jc;
                        if (!FULL && cn >= n) continue;
#if FP8_MODE == 2
                        const float v00 = tot[4 * j], v01 = tot[4 * j + 1], v10 = tot[4 * j + 2], v11 = tot[4 * j + 3];
#else
#if FP8_MODE == 1
                        const float w0 = wt, w1 = wt;
#else
                        const float2 wv = *(const float2 *)(sw + 8 * jc + 2 * (lane & 3));
                        const float w0 = wv.x, w1 = wv.y;
#endif
                        /* y = sum * (a_s * w_s): the scale product first, as the reference */
                        const float v00 = tot[4 * j] * (f0 * w0), v01 = tot[4 * j + 1] * (f0 * w1);
                        const float v10 = tot[4 * j + 2] * (f1 * w0), v11 = tot[4 * j + 3] * (f1 * w1);
#endif
                        if constexpr (KIND == 0) { /* bf16 (half the bytes), rounded as the reference: nearest even */
                            const unsigned st0 = base + ST * STAGE + (unsigned)(c * 64 + warp * 16 + (lane >> 2)) * RS +
                                                 4u * (lane & 3) + 16u * jc;
                            qc_sts32(st0, qc_bf16x2(v00, v01));
                            qc_sts32(st0 + 8 * RS, qc_bf16x2(v10, v11));
                        } else if constexpr (KIND == 1) {
                            const u32 p0 = qc_bf16x2(v00, v01), p1 = qc_bf16x2(v10, v11);
                            if (j & 1) { /* even lane: its even-chunk pair + its partner's; odd lane: partner's + its own */
                                const bool odd = lane & 1;
                                const u32 x0 = __shfl_xor_sync(0xffffffffu, odd ? ev0 : p0, 1);
                                const u32 x1 = __shfl_xor_sync(0xffffffffu, odd ? ev1 : p1, 1);
                                const long long cs = odd ? cn - 2 : cn - 8; /* 8-byte aligned: n % 16 == 0 */
                                if (r0 < m) *(u64 *)(yb + r0 * n + cs) = odd ? (u64)x0 | (u64)p0 << 32 : (u64)ev0 | (u64)x0 << 32;
                                if (r1 < m) *(u64 *)(yb + r1 * n + cs) = odd ? (u64)x1 | (u64)p1 << 32 : (u64)ev1 | (u64)x1 << 32;
                            } else {
                                ev0 = p0, ev1 = p1;
                            }
                        } else if constexpr (KIND == 2) {
                            if (r0 < m) *(u32 *)(yb + r0 * n + cn) = qc_bf16x2(v00, v01);
                            if (r1 < m) *(u32 *)(yb + r1 * n + cn) = qc_bf16x2(v10, v11);
                        } else {
                            if (r0 < m) *(float2 *)(y0 + cn) = make_float2(v00, v01);
                            if (r1 < m) *(float2 *)(y1 + cn) = make_float2(v10, v11);
                        }
                    }
                    if (HALVES > 1 && hh == 0)
#pragma unroll
                        for (int i = 0; i < BN / 4; i++) tot[i] = tot[i + BN / 4];
                  }
                }
            };
            /* and one copy for tiles wholly below n (every tile of the model's shapes), without a test per chunk:
               those tests, and the divergence handling they put around the exchange's shuffles, were a third of
               the loop's instructions */
            auto epi_of = [&](auto kind_tag) {
                if (cb - 2 * (lane & 3) + BN <= n) epi(kind_tag, QcTag<1>{});
                else epi(kind_tag, QcTag<0>{});
            };
            /* this block stores the tile (FP8_SKIP_EPI: a test on k that fails at run time keeps the stores' code) */
            const bool emit = store && (!FP8_SKIP_EPI || k < 0);
            if (emit) {
                if (staged) {
                    if constexpr (STG) epi_of(QcTag<0>{});
                } else if (yb && xchg) {
                    if constexpr (XCHG) epi_of(QcTag<1>{});
                } else if (yb) {
                    epi_of(QcTag<2>{});
                } else {
                    epi_of(QcTag<3>{});
                }
            }
            if (staged && emit) {
                /* the staged rows to the async proxy, then lane i copies row i of the warp's 16 (the part below n) */
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                __syncwarp();
                /* from r0 and cb (live here already; tm, tn and more 64-bit values spilled): lane i < 16 -> row i */
                const long long row = r0 - (lane >> 2) + lane, col0 = cb - 2 * (lane & 3);
                if (lane < 16) {
                    if (row < m)
                        qc_bulk_store(yb + row * n + col0, base + ST * STAGE + (unsigned)(c * 64 + warp * 16 + lane) * RS,
                                      (unsigned)(n - col0 < BN ? n - col0 : BN) * 2u);
                    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                }
            }
            /* The next tile's first stage, issued before the epilogue, is waited for here, where the epilogue has
               given it time to finish: with it still in flight across the loop's back edge (the next tile's index
               arithmetic), ptxas injected that wait itself, in a divergent path in the tensor and block builds,
               and then serialized every wgmma of the kernel (C7518; the pair builds: C7512, registers). */
            qc_wg_wait<0>();
#pragma unroll
            for (int i = 0; i < BN / 2; i++) tot[i] = 0.f;
        }
        /* the last bf16 rows are written before the block (and its shared memory) goes */
        if (STG && yb && !(n & 7) && (tid & 31) < 16)
            asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
#if FP8_CLUSTER == 2
    qc_cluster_sync(); /* the partner's last arrivals on this block's barriers have landed */
#endif
}

#if FP8_MODE == 0
#define QC_ENTRY qc_fp8_gemm_channel_wgmma
#elif FP8_MODE == 1
#define QC_ENTRY qc_fp8_gemm_tensor_wgmma
#else
#define QC_ENTRY qc_fp8_gemm_block_wgmma
#endif
/* xq and w are read only through their tensor maps (built by the host from the same pointers) */
#if FP8_CLUSTER == 2
#define QC_FP8_CLUSTER_ATTR __cluster_dims__(2, 1, 1)
#else
#define QC_FP8_CLUSTER_ATTR
#endif
extern "C" __global__ void __launch_bounds__(384, 1) QC_FP8_CLUSTER_ATTR QC_ENTRY(const u8 *xq, const float *xs, const u8 *w,
                                                              const float *ws, float *y, long long m, long long n,
                                                              long long k, float *work, u16 *yb,
                                                              const __grid_constant__ QcTmap tmx,
                                                              const __grid_constant__ QcTmap tmw) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) unsigned long long bars[2 * 6];
    __shared__ __align__(16) float sws[2 * 2 * WG_SW]; /* column scales: 2 consumer warpgroups x 2 tiles */
    (void)xq;
    (void)w;
    if (m <= 0 || n <= 0) return;
    if (blockIdx.y > 0 && (!work || k <= 0)) return; /* no workspace: unsplit, blockIdx.y 0 takes all of K */
    if (k <= 0) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m * n;
             i += (long long)gridDim.x * blockDim.x) {
            if (yb) yb[i] = 0;
            else y[i] = 0.f;
        }
        return;
    }
    switch (qc_wg_bn(m, n)) { /* widths the plan never takes (weight 0) are not compiled */
#if FP8_CLUSTER == 1 && FP8_EFF256 > 0
    case 256: qc_fp8_gemm<256, FP8_ST256>(&tmx, &tmw, xs, ws, y, m, n, k, smem, bars, sws, work, yb); break;
#endif
#if FP8_EFF192 > 0
    case 192: qc_fp8_gemm<192, FP8_ST192>(&tmx, &tmw, xs, ws, y, m, n, k, smem, bars, sws, work, yb); break;
#endif
#if FP8_EFF160 > 0
    case 160: qc_fp8_gemm<160, FP8_ST160>(&tmx, &tmw, xs, ws, y, m, n, k, smem, bars, sws, work, yb); break;
#endif
    default: qc_fp8_gemm<128, FP8_ST128>(&tmx, &tmw, xs, ws, y, m, n, k, smem, bars, sws, work, yb); break;
    }
}
