/* qc_tma_pipe_src.h - CUDA source text (for NVRTC, sm_90a) of the mbarrier / TMA / cp.async / wgmma-fence helpers that the plugins' Hopper GEMMs share (header only). */
#ifndef QC_PLUGIN_TMA_PIPE_SRC_H
#define QC_PLUGIN_TMA_PIPE_SRC_H

/*
 * Plugins do not link the core, so core/src/qc_kernels_wgmma.c keeps its own
 * copy; the plugins' kernels (w4a16.wgmma_*, mxfp4.wgmma) prepend this text.
 * It names only built-in types.  qcp_tma2d's map is a CUtensorMap passed as a
 * __grid_constant__ kernel parameter (128 bytes, 64-byte aligned).
 *
 * qcp_smem(p)               shared-window address of a generic pointer
 * qcp_mbar_init(bar, n)     mbarrier expecting n arrivals a phase
 * qcp_expect_tx(bar, b)     arrive, and expect b more bytes of async copies this phase
 * qcp_arrive(bar)           one arrival
 * qcp_wait(bar, parity)     spin until the phase of that parity has completed
 * qcp_tma2d(dst, map, c0, c1, bar)  box at element coordinates (c0 inner, c1 rows), completing on bar
 * qcp_bulk(dst, src, bytes, bar, pol)  contiguous bytes (a multiple of 16, 16-byte aligned) from global to shared,
 *                           completing on bar, with an L2 cache policy (createpolicy)
 * qcp_cp16 / qcp_cp4        cp.async of 16 (L2 only) / 4 bytes
 * qcp_cp_arrive(bar)        one arrival once this thread's cp.asyncs so far have landed (counted in the init count)
 * qcp_bar_sync(id)          named barrier of 256 threads; qcp_bar_n(id, n) of n
 * qcp_desc(addr)            wgmma descriptor of a K-major operand in 128-byte-swizzled rows of 128 B, 8-row
 *                           groups 1024 B apart (SBO); LBO unused.  + 2 per 32 bytes along K (no carry when
 *                           addr is 1 KiB-aligned)
 * qcp_fence / qcp_commit / qcp_wg_wait<N>   wgmma.fence, commit_group, wait_group N
 * qcp_tile(t, tiles_m, tiles_n, &tm, &tn)   persistent tile t -> (x row tile, W row tile): groups of 8 x tiles, x
 *                           fastest, so that the blocks running together share their W tiles in L2
 */
#define QC_TMA_PIPE_SRC \
    "__device__ __forceinline__ unsigned qcp_smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n" \
    "__device__ __forceinline__ void qcp_mbar_init(unsigned bar, unsigned count) {\n" \
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" ::\"r\"(bar), \"r\"(count) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_expect_tx(unsigned bar, unsigned bytes) {\n" \
    "    asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\\n}\\n\"\n" \
    "                 ::\"r\"(bar), \"r\"(bytes) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_arrive(unsigned bar) {\n" \
    "    asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.shared::cta.b64 st, [%0];\\n}\\n\" ::\"r\"(bar) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_wait(unsigned bar, unsigned parity) {\n" \
    "    unsigned done;\n" \
    "    do {\n" \
    "        asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\"\n" \
    "                     \"selp.u32 %0, 1, 0, p;\\n}\\n\" : \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");\n" \
    "    } while (!done);\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_tma2d(unsigned dst, const void *map, int c0, int c1, unsigned bar) {\n" \
    "    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes\"\n" \
    "                 \" [%0], [%1, {%2, %3}], [%4];\\n\"\n" \
    "                 ::\"r\"(dst), \"l\"((unsigned long long)map), \"r\"(c0), \"r\"(c1), \"r\"(bar) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar,\n" \
    "                                         unsigned long long pol) {\n" \
    "    asm volatile(\"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint\"\n" \
    "                 \" [%0], [%1], %2, [%3], %4;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(bytes), \"r\"(bar), \"l\"(pol)\n" \
    "                 : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_cp16(unsigned dst, const void *src) {\n" \
    "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" ::\"r\"(dst), \"l\"(src) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_cp4(unsigned dst, const void *src) {\n" \
    "    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4;\\n\" ::\"r\"(dst), \"l\"(src) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_cp_arrive(unsigned bar) {\n" \
    "    asm volatile(\"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\\n\" ::\"r\"(bar) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_bar_sync(int id) {\n" \
    "    asm volatile(\"bar.sync %0, 256;\\n\" ::\"r\"(id) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_bar_n(int id, int n) {\n" \
    "    asm volatile(\"bar.sync %0, %1;\\n\" ::\"r\"(id), \"r\"(n) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ unsigned long long qcp_desc(unsigned addr) {\n" \
    "    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |\n" \
    "           (1ull << 62);\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n" \
    "__device__ __forceinline__ void qcp_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\"); }\n" \
    "template <int N> __device__ __forceinline__ void qcp_wg_wait() {\n" \
    "    asm volatile(\"wgmma.wait_group.sync.aligned %0;\\n\" ::\"n\"(N) : \"memory\");\n" \
    "}\n" \
    "__device__ __forceinline__ void qcp_tile(long long t, long long tiles_m, long long tiles_n, long long *tm,\n" \
    "                                         long long *tn) {\n" \
    "    const long long per_group = 8ll * tiles_n;\n" \
    "    const long long first_m = t / per_group * 8, in_g = t % per_group;\n" \
    "    const long long gsz = tiles_m - first_m < 8 ? tiles_m - first_m : 8;\n" \
    "    *tm = first_m + in_g % gsz;\n" \
    "    *tn = in_g / gsz;\n" \
    "}\n"

#endif
