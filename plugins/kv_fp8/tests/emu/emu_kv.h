/* emu_kv.h - host emulation of the CUDA the kv_fp8 v2 decode uses: one fiber per CUDA thread, warp collectives by barriers. */
/*
 * After plugins/mxfp4/tests/emu/emu_cuda.h, with user-level fibers (ucontext)
 * instead of std::threads: this host has 2 cores and a std::barrier phase of
 * 128 OS threads costs about 2 ms, a fiber switch well under a microsecond.
 * The semantics are the same: every CUDA thread of a block is its own stack
 * and control flow, __syncthreads waits for the whole block, __syncwarp,
 * __shfl_*_sync and mma.sync wait for the 32 lanes of the warp (a collective
 * reached by fewer lanes, or a barrier by part of the block, is reported as a
 * deadlock naming the barrier).  Blocks run one after another (a valid
 * schedule for the fused combine's last-CTA counter).  test_decode_emu.py
 * swaps every inline-asm statement of the kernel for a call emu_<name>(outputs,
 * inputs) defined here.  Shared memory: the dynamic buffer is its own
 * allocation of exactly the launch's bytes (0xFF-filled per block, a guard
 * after it checked per block), u32 shared addresses are offsets into it and
 * every shared access through one is bounds-checked.  cp.async lands either at
 * issue (early) or at the wait_group that covers it (late), the two extremes
 * of the hardware's timing.  The fibers run in thread order, or with a seed in
 * a fresh random order each round with random warps held back (other
 * interleavings: warps drift apart by blocks).
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

#include "../../../../tests/emu/cuda_shim.h"

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

[[noreturn]] static void emu_die(const char *what) {
    printf("FAIL: emulation: %s\n", what);
    fflush(stdout);
    exit(1);
}

/* ---- fibers ---- */
struct EmuBar { int n = 0, count = 0; unsigned phase = 0; const char *name = ""; };
struct EmuFiber {
    ucontext_t ctx;
    std::vector<char> stack;
    dim3 tid;
    bool done = false, waiting = false;
    const char *wait_on = "";
    unsigned ncoll = 0;                                 /* warp collectives passed: the exchange slot's parity */
    std::vector<std::pair<unsigned, const void *>> open; /* cp.async copies of the open group */
    std::deque<std::vector<std::pair<unsigned, const void *>>> groups;
#if EMU_ASAN
    void *fake = nullptr;
#endif
};
struct EmuWarp {
    EmuBar bar;
    unsigned long long x[2][32]; /* shuffle values, by collective parity */
    unsigned a[2][32][4], b[2][32][2];
};
static EmuFiber *emu_cur;
static std::vector<EmuFiber> emu_fibers;
static EmuWarp emu_warps[32];
static EmuBar emu_block;
static ucontext_t emu_main;
static unsigned long long emu_progress;
static dim3 blockIdx, gridDim, blockDim;
#define threadIdx (emu_cur->tid)
#if EMU_ASAN
static const void *emu_main_bottom;
static size_t emu_main_size;
#endif
static void (*emu_body)();
static bool emu_late_copies; /* cp.async lands at its wait_group, not at issue */
static unsigned long long emu_shuffle_seed; /* nonzero: random schedules (emu_run_block) */
static unsigned long long emu_rand() {
    emu_shuffle_seed ^= emu_shuffle_seed << 13, emu_shuffle_seed ^= emu_shuffle_seed >> 7;
    return emu_shuffle_seed ^= emu_shuffle_seed << 17;
}

static void emu_to_main(bool exiting) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &emu_cur->fake, emu_main_bottom, emu_main_size);
#else
    (void)exiting;
#endif
    swapcontext(&emu_cur->ctx, &emu_main);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(emu_cur->fake, &emu_main_bottom, &emu_main_size);
#endif
}
static void emu_fiber_entry() {
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &emu_main_bottom, &emu_main_size);
#endif
    emu_body();
    if (!emu_cur->open.empty() || !emu_cur->groups.empty()) emu_die("a thread exited with cp.async copies in flight");
    emu_cur->done = true;
    emu_progress++;
    emu_to_main(true);
}
static void emu_wait(EmuBar &b) {
    const unsigned ph = b.phase;
    if (++b.count == b.n) {
        b.count = 0;
        b.phase++;
        emu_progress++;
        return;
    }
    while (b.phase == ph) {
        emu_cur->waiting = true;
        emu_cur->wait_on = b.name;
        emu_to_main(false);
    }
    emu_cur->waiting = false;
}
/* Runs one block of `threads` fibers (multiple of 32) to completion; a round in which
 * every live fiber is waiting and no barrier completed is a deadlock. */
static void emu_run_block(unsigned threads, void (*body)()) {
    if (threads % 32 || threads > 1024 || !threads) emu_die("block size must be a multiple of 32, at most 1024");
    emu_body = body;
    emu_fibers.resize(threads);
    emu_block = EmuBar{(int)threads, 0, 0, "__syncthreads"};
    for (unsigned w = 0; w < threads / 32; w++) emu_warps[w].bar = EmuBar{32, 0, 0, "a warp collective"};
    for (unsigned i = 0; i < threads; i++) {
        EmuFiber &f = emu_fibers[i];
        f.stack.resize(EMU_ASAN ? (1u << 20) : (256u << 10));
        f.tid = dim3{i, 0, 0};
        f.done = f.waiting = false;
        f.ncoll = 0;
        f.open.clear();
        f.groups.clear();
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, emu_fiber_entry, 0);
    }
    std::vector<unsigned> order(threads);
    for (unsigned i = 0; i < threads; i++) order[i] = i;
    for (;;) {
        unsigned long long before = emu_progress;
        bool live = false;
        /* random mode: a fresh order every round, and each warp left out of a round with probability 1/2, so
         * that warps drift apart (every round that runs all of them checks for a deadlock) */
        unsigned skip = 0;
        if (emu_shuffle_seed) {
            for (unsigned i = threads - 1; i > 0; i--) std::swap(order[i], order[emu_rand() % (i + 1)]);
            const unsigned all = threads == 1024 ? ~0u : (1u << (threads / 32)) - 1u;
            skip = (unsigned)emu_rand() & all;
            if (skip == all || emu_rand() % 4 == 0) skip = 0;
        }
        for (unsigned i : order) {
            EmuFiber &f = emu_fibers[i];
            if (f.done) continue;
            live = true;
            if (skip >> (i / 32) & 1) continue;
            emu_cur = &f;
#if EMU_ASAN
            void *fake = nullptr;
            __sanitizer_start_switch_fiber(&fake, f.stack.data(), f.stack.size());
#endif
            swapcontext(&emu_main, &f.ctx);
#if EMU_ASAN
            __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
        }
        if (!live) break;
        if (emu_progress == before && !skip) {
            for (auto &f : emu_fibers)
                if (!f.done) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "deadlock: thread %u waits at %s while others exited or wait elsewhere",
                             f.tid.x, f.wait_on);
                    emu_die(msg);
                }
        }
    }
    emu_cur = nullptr;
}

static inline void __syncthreads() { emu_wait(emu_block); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(emu_warps[threadIdx.x >> 5].bar); }
static inline void __threadfence() {}
template <class T> static inline T emu_shfl(T v, int src_of_lane(int, int), int arg) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    EmuWarp &w = emu_warps[threadIdx.x >> 5];
    const int l = threadIdx.x & 31, par = emu_cur->ncoll++ & 1;
    unsigned long long raw = 0;
    memcpy(&raw, &v, sizeof(T));
    w.x[par][l] = raw;
    emu_wait(w.bar); /* slots alternate by parity: nobody writes this one again before everyone read it */
    T r;
    raw = w.x[par][src_of_lane(l, arg) & 31];
    memcpy(&r, &raw, sizeof(T));
    return r;
}
static int emu_xor(int l, int m) { return l ^ m; }
static int emu_idx(int, int s) { return s; }
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int m) {
    if (mask != 0xffffffffu) emu_die("__shfl_xor_sync with a partial mask");
    return emu_shfl(v, emu_xor, m);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int s) {
    if (mask != 0xffffffffu) emu_die("__shfl_sync with a partial mask");
    return emu_shfl(v, emu_idx, s);
}

/* ---- f16 ---- */
static inline float emu_h2f(unsigned h) {
    h &= 0xffffu;
    const unsigned s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024.0 + m, (int)e - 25);
    return (float)(s ? -v : v);
}
/* float -> f16 bits, nearest even (cvt.rn.f16.f32): overflow to inf, NaN to 0x7FFF */
static inline unsigned emu_f2h(float f) {
    unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7fffu;
    double x = fabs((double)f), q;
    if (x >= 65520.0) return s | 0x7c00u; /* rounds past 65504 */
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    int ulp = e - 11 < -24 ? -24 : e - 11;
    q = nearbyint(ldexp(x, -ulp)); /* the default rounding mode: ties to even */
    double v = ldexp(q, ulp);
    /* re-encode v (exact in f16) */
    if (v == 0) return s;
    int ev;
    frexp(v, &ev);
    if (ev - 1 < -14) return s | (unsigned)ldexp(v, 24);
    unsigned mant = (unsigned)(ldexp(v, 11 - ev)) - 1024u;
    return s | ((unsigned)(ev - 1 + 15) << 10) | mant;
}
static inline double emu_e4m3(unsigned c) {
    c &= 255;
    const unsigned e = (c >> 3) & 15, m = c & 7;
    if ((c & 127) == 127) return NAN;
    double v = e ? ldexp(8.0 + m, (int)e - 10) : ldexp((double)m, -9);
    return c & 128 ? -v : v;
}
static inline double emu_e5m2(unsigned c) {
    c &= 255;
    const unsigned e = (c >> 2) & 31, m = c & 3;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(4.0 + m, (int)e - 17) : ldexp((double)m, -16);
    return c & 128 ? -v : v;
}

/* ---- the inline-asm statements (test_decode_emu.py's table): outputs by reference, then inputs ---- */
static inline void emu_cvt_e4m3x2_f32(unsigned short &, float) { emu_die("cvt e4m3x2.f32 is not in the decode"); }
static inline void emu_cvt_e5m2x2_f32(unsigned short &, float) { emu_die("cvt e5m2x2.f32 is not in the decode"); }
/* cvt.rn.f16x2.e4m3x2 d, a: byte 0 -> the low half (exact; NaN codes to the canonical f16 NaN) */
static inline void emu_cvt_f16x2_e4m3x2(unsigned &r, unsigned short two) {
    r = emu_f2h((float)emu_e4m3(two & 255)) | (emu_f2h((float)emu_e4m3(two >> 8)) << 16);
}
/* cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower */
static inline void emu_cvt_f16x2_f32(unsigned &r, float hi, float lo) { r = emu_f2h(lo) | (emu_f2h(hi) << 16); }

/* global memory: loads are plain reads; the caches' ranges are registered so that a copy from outside is caught */
struct EmuRange { const void *p; size_t n; const char *name; };
static std::vector<EmuRange> emu_globals;
static inline void emu_check_global(const void *p, size_t n, const char *what) {
    for (auto &r : emu_globals)
        if ((const char *)p >= (const char *)r.p && (const char *)p + n <= (const char *)r.p + r.n) return;
    char msg[160];
    snprintf(msg, sizeof msg, "%s of %zu bytes at %p outside every buffer the test allocated", what, n, p);
    emu_die(msg);
}
static inline void emu_ld_nc_v4_u32(unsigned &x, unsigned &y, unsigned &z, unsigned &w, const void *p) {
    emu_check_global(p, 16, "ld.global.nc.v4");
    uint4 v;
    memcpy(&v, p, 16);
    x = v.x, y = v.y, z = v.z, w = v.w;
}
static inline void emu_ld_nc_v2_u32(unsigned &x, unsigned &y, const void *p) {
    emu_check_global(p, 8, "ld.global.nc.v2");
    uint2 v;
    memcpy(&v, p, 8);
    x = v.x, y = v.y;
}
static inline void emu_ld_nc_v4_f32(float &x, float &y, float &z, float &w, const float *p) {
    emu_check_global(p, 16, "ld.global.nc.v4.f32");
    if ((uintptr_t)p % 16) emu_die("ld.global.nc.v4.f32 from an address not 16-byte aligned");
    x = p[0], y = p[1], z = p[2], w = p[3];
}
static inline void emu_ld_nc_f32(float &v, const float *p) { emu_check_global(p, 4, "ld.global.nc.f32"); v = *p; }
static inline void emu_ld_nc_s32(int &v, const int *p) { emu_check_global(p, 4, "ld.global.nc.s32"); v = *p; }
static inline void emu_prefetch_l2(const void *) {} /* a hint: any address, no effect */
template <class T> static inline T __ldcg(const T *p) { emu_check_global(p, sizeof(T), "__ldcg"); return *p; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline unsigned atomicExch(unsigned *p, unsigned v) { unsigned o = *p; *p = v; return o; }

/* shared memory: the dynamic buffer of the current block */
static unsigned char *emu_smem;
static unsigned emu_smem_bytes;
static inline void emu_dynamic_smem_size(unsigned &r) { r = emu_smem_bytes; }
static inline unsigned char *emu_dsm() { return emu_smem; }
static inline size_t __cvta_generic_to_shared(const void *p) {
    if ((const unsigned char *)p < emu_smem || (const unsigned char *)p > emu_smem + emu_smem_bytes)
        emu_die("__cvta_generic_to_shared of a pointer outside the dynamic shared memory");
    return (size_t)((const unsigned char *)p - emu_smem);
}
static inline unsigned char *emu_shared(unsigned a, unsigned n, const char *what) {
    if ((size_t)a + n > emu_smem_bytes || a % n) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s at shared address %u (%u bytes): past the %u dynamic bytes or misaligned", what,
                 a, n, emu_smem_bytes);
        emu_die(msg);
    }
    return emu_smem + a;
}
static inline void emu_ld_shared_v4(unsigned &x, unsigned &y, unsigned &z, unsigned &w, unsigned a) {
    uint4 v;
    memcpy(&v, emu_shared(a, 16, "ld.shared.v4"), 16);
    x = v.x, y = v.y, z = v.z, w = v.w;
}
static inline void emu_ld_shared_v2(unsigned &x, unsigned &y, unsigned a) {
    uint2 v;
    memcpy(&v, emu_shared(a, 8, "ld.shared.v2"), 8);
    x = v.x, y = v.y;
}
static inline void emu_land(unsigned dst, const void *src) { memcpy(emu_shared(dst, 16, "cp.async"), src, 16); }
static inline void emu_cp_async_16(unsigned dst, const void *src) {
    emu_check_global(src, 16, "cp.async source");
    if ((uintptr_t)src % 16) emu_die("cp.async source not 16-byte aligned");
    emu_shared(dst, 16, "cp.async");
    if (emu_late_copies) emu_cur->open.push_back({dst, src});
    else emu_land(dst, src);
}
static inline void emu_cp_async_commit() {
    emu_cur->groups.push_back(std::move(emu_cur->open));
    emu_cur->open.clear();
}
static inline void emu_cp_async_wait(int n) {
    while ((int)emu_cur->groups.size() > n) {
        for (auto &c : emu_cur->groups.front()) emu_land(c.first, c.second);
        emu_cur->groups.pop_front();
    }
}

/* mma.sync.m16n8k16.row.col.f32.f16.f16.f32, the PTX fragment layout: lane (g, t): a0 (row g, k 2t..2t+1),
 * a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); b0 (k 2t.., col g), b1 (k 2t + 8.., col g);
 * d0, d1 (g, cols 2t, 2t + 1), d2, d3 (g + 8, ...); low half = lower k */
static inline void emu_mma_f16(float &d0, float &d1, float &d2, float &d3, unsigned a0, unsigned a1, unsigned a2,
                               unsigned a3, unsigned b0, unsigned b1) {
    EmuWarp &w = emu_warps[threadIdx.x >> 5];
    const int l = threadIdx.x & 31, par = emu_cur->ncoll++ & 1, g = l >> 2, t = l & 3;
    w.a[par][l][0] = a0, w.a[par][l][1] = a1, w.a[par][l][2] = a2, w.a[par][l][3] = a3;
    w.b[par][l][0] = b0, w.b[par][l][1] = b1;
    emu_wait(w.bar);
    float *d[4] = {&d0, &d1, &d2, &d3};
    for (int e = 0; e < 4; e++) {
        const int r = g + (e >= 2 ? 8 : 0), c = 2 * t + (e & 1);
        float s = *d[e];
        for (int kk = 0; kk < 16; kk++) {
            const int al = (r & 7) * 4 + ((kk & 7) >> 1), ar = (r >= 8 ? 1 : 0) + (kk >= 8 ? 2 : 0);
            const int bl = c * 4 + ((kk & 7) >> 1), br = kk >= 8;
            s += emu_h2f(w.a[par][al][ar] >> (16 * (kk & 1))) * emu_h2f(w.b[par][bl][br] >> (16 * (kk & 1)));
        }
        *d[e] = s;
    }
}
