#!/usr/bin/env python3
"""test_gemv_frag_emu.py - the mxfp4.gemv_frag, mxfp4.gemv_frag_ps and mxfp4.gemv1 CUDA sources, their inline asm swapped for
emulations, compiled as C++ (gemv_frag for sm_90's two register stages and sm_80's one at m > 8) and run on the CPU over
every m, odd tile counts, n % 16 != 0, forced R = 2 and K splits with ragged ends, NaN, zero and large scale bytes."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CODEC, HERE = sys.argv[1], os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"gemv_frag_emu: skipped, {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
if not cxx:
    skip("no C++ compiler")


def source(kid, emulated, shared_decl):
    """The kernel's CUDA source with its inline-asm helpers replaced by the emulations."""
    r = subprocess.run([CODEC, "source", kid], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"mxfp4_codec source {kid}: {r.stderr}")
    src = r.stdout
    for name, body in emulated.items():
        m = re.search(r"(template <[^>]*> )?__device__ __forceinline__ " + name + r"\(", src)
        if not m:
            fail(f"{name} not found in {kid}'s source: update test_gemv_frag_emu.py")
        end = src.index("\n}\n", m.start()) + 3
        src = src[: m.start()] + body + "\n" + src[end:]
    # (gemv_frag_ps's body also carries mxfp4.gemv1's entry, compiled out there, with its own declaration)
    src, n = re.subn(re.escape(shared_decl), "static float red[16 * 16 * 32];", src)
    if n < 1 or re.search(r"\basm\b", src):
        fail(f"{kid}'s source changed shape (shared reduction or inline asm left): update test_gemv_frag_emu.py")
    return src


def dims(kid, m, n, k, env, knobs):
    e = dict(os.environ)
    for v in knobs:
        e.pop(v, None)
    e.update(env)
    r = subprocess.run([CODEC, "dims", kid, str(m), str(n), str(k)], capture_output=True, text=True, env=e)
    if r.returncode != 0:
        fail(f"mxfp4_codec dims: {r.stderr}")
    g, b, _ = (int(v) for v in r.stdout.split())
    return g, b


# mxfp4.gemv_frag: the helpers that are inline asm on the GPU: mma.sync, fma.rn.bf16x2 (exact here: a product by
# 2^126), ld.global.nc
FRAG_EMULATED = {
    "void mxf_mma": "static inline void mxf_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {"
                    " const unsigned a[4] = {a0, a1, a2, a3}; emu_mma(d, a, b0, b1); }",
    "u32 mxf_pair": "template <u32 MASK, u32 MUL> static inline u32 mxf_pair(u32 q) {"
                    " return emu_mul2(((q & MASK) * MUL) & 0x81C081C0u, MXF_P126); }",
    "void mxf_ld8": "static inline void mxf_ld8(const u8 *p, u32 &a, u32 &b) {"
                    " a = ((const u32 *)p)[0]; b = ((const u32 *)p)[1]; }",
}
# mxfp4.gemv_frag_ps: mma.sync, the bf16x2 multiply (exact: powers of two, inf / NaN as on the GPU), the 16-byte load
PS_EMULATED = {
    "void mxp_mma": "static inline void mxp_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {"
                    " const unsigned a[4] = {a0, a1, a2, a3}; emu_mma(d, a, b0, b1); }",
    "u32 mxp_mul2": "static inline u32 mxp_mul2(u32 a, u32 b) { return emu_mul2(a, b); }",
    "void mxp_ld16": "static inline void mxp_ld16(const u8 *p, u32 *w) { memcpy(w, p, 16); }",
}

# mxfp4.gemv1: gemv_frag_ps's helpers, and programmatic launch's griddepcontrol (nothing to wait for here)
G1_EMULATED = dict(PS_EMULATED)
G1_EMULATED["void qc_grid_trigger"] = "static inline void qc_grid_trigger() {}"
G1_EMULATED["void qc_grid_wait"] = "static inline void qc_grid_wait() {}"

# m, n, k, emin, emax, nans, zeros, forced plan
FRAG_CASES = []
for m in range(1, 17):  # every m on odd tile counts (n = 40: 3 tiles, the last half past n) and n % 16 != 0
    FRAG_CASES.append((m, 40 if m % 2 else 24, 384 if m % 3 else 640, 110, 125, 0, 0, {}))
FRAG_CASES += [
    (1, 8, 128, 110, 125, 0, 0, {}),                                # one tile, one chunk
    (3, 72, 1152, 100, 140, 2, 0, {"QC_MXF_R": "2"}),               # R = 2 with a ragged last tile, NaN blocks
    (2, 40, 1152, 118, 122, 0, 0, {"QC_MXF_R": "2", "QC_MXF_KS": "3"}),  # 9 chunks over 3 warps
    (4, 24, 896, 120, 130, 0, 3, {"QC_MXF_KS": "4"}),               # 7 chunks over 4 warps (2, 2, 2, 1), e = 0
    (6, 40, 640, 100, 150, 1, 1, {"QC_MXF_KS": "4"}),               # 5 chunks: a warp with none
    (9, 24, 1152, 115, 131, 0, 0, {"QC_MXF_R": "2", "QC_MXF_KS": "5"}),  # m > 8, tile at a time, warps without chunks
    (16, 56, 384, 0, 3, 0, 0, {"QC_MXF_KS": "2"}),                  # tiny scales (subnormal weights)
    (13, 40, 512, 120, 135, 2, 2, {"QC_MXF_R": "2"}),
    (5, 16, 256, 200, 240, 0, 0, {}),                               # large scales (sums within f32)
    (16, 8, 4096, 118, 124, 0, 0, {}),                              # the plan's own K split
    (1, 264, 1024, 118, 124, 0, 0, {}),
]

# mxfp4.gemv_frag_ps: the m it is picked for (5..16) and the rest it takes, with its own knobs
PS_CASES = []
for m in range(1, 17):  # every m on odd tile counts and n % 16 != 0
    PS_CASES.append((m, 40 if m % 2 else 24, 384 if m % 3 else 640, 110, 127, 0, 0, {}))
PS_CASES += [
    (5, 8, 128, 110, 125, 0, 0, {}),                                # one tile (half past n), one chunk, k = 128
    (16, 8, 128, 110, 125, 0, 0, {}),
    (8, 72, 1152, 100, 128, 0, 0, {"QC_MXP_R": "2"}),               # R = 2 at m = 8, ragged last block, e up to 128
    (5, 40, 1152, 118, 122, 0, 0, {"QC_MXP_R": "2", "QC_MXP_KS": "3"}),  # 9 chunks over 3 warps (3, 3, 3)
    (8, 24, 896, 120, 126, 0, 3, {"QC_MXP_KS": "4"}),               # 7 chunks over 4 warps (2, 2, 2, 1), e = 0
    (9, 40, 640, 100, 150, 1, 1, {"QC_MXP_KS": "4"}),               # 5 chunks: a warp with none; NaN, 0, > 128
    (12, 24, 1152, 115, 131, 0, 0, {"QC_MXP_R": "2", "QC_MXP_KS": "5"}),  # m > 8 with R = 2: tiles in turn
    (16, 56, 384, 0, 3, 0, 0, {"QC_MXP_KS": "2"}),                  # tiny scales (subnormal weights)
    (16, 40, 512, 120, 135, 2, 2, {"QC_MXP_R": "2"}),               # NaN and zero bytes, the rare path
    (12, 40, 512, 1, 2, 0, 4, {}),                                  # e 0..2 only
    (5, 16, 256, 200, 240, 0, 0, {}),                               # large scales (sums within f32)
    (9, 16, 256, 129, 129, 0, 0, {}),                               # every byte just above the fast range
    (16, 8, 4096, 118, 124, 0, 0, {}),                              # the plan's own K split
    (8, 264, 1024, 118, 124, 0, 0, {}),
    (9, 72, 640, 110, 127, 0, 0, {"QC_MXP_R": "2"}),               # R = 2 at m > 8, rows past n in the last block
    (16, 264, 1024, 110, 127, 1, 1, {"QC_MXP_R": "2", "QC_MXP_KS": "4"}),
    (16, 1000, 640, 118, 124, 0, 0, {}),                            # 63 tiles, n % 16 = 8
]

# mxfp4.gemv1 (m = 1, k % 1024): n % 4 != 0 (clamped rows in the last block), 1-3 steps, K splits with a ragged or
# empty last warp, the rare scale bytes
G1_CASES = [
    (1, 8, 1024, 110, 127, 0, 0, {}),
    (1, 5, 2048, 110, 127, 0, 0, {}),
    (1, 40, 3072, 118, 124, 0, 0, {"QC_MXG_KS": "2"}),              # 3 steps over 2 warps (2, 1)
    (1, 12, 3072, 100, 150, 1, 1, {"QC_MXG_KS": "4"}),              # a warp with none; NaN, 0, > 128
    (1, 16, 2048, 0, 3, 0, 0, {}),                                  # tiny scales (subnormal weights)
    (1, 24, 1024, 120, 135, 2, 2, {"QC_MXG_KS": "1"}),
]

KERNELS = [
    # id, entry, emulated helpers, builds (label, defines, the smallest m run: the same code below it), knobs, cases
    ("mxfp4.gemv_frag", "qc_mxfp4_gemv_frag", FRAG_EMULATED,
     (("sm_90", ["-D__CUDA_ARCH__=900"], 1), ("sm_80", ["-D__CUDA_ARCH__=800"], 9)), ("QC_MXF_R", "QC_MXF_KS"),
     FRAG_CASES),
    # no arch-dependent code; its two stage counts (QC_MXP_STAGES=3 builds three)
    ("mxfp4.gemv_frag_ps", "qc_mxfp4_gemv_frag_ps", PS_EMULATED,
     (("sm_90", ["-D__CUDA_ARCH__=900"], 1), ("S=3", ["-D__CUDA_ARCH__=900", "-DMXP_STAGES=3"], 1)),
     ("QC_MXP_R", "QC_MXP_KS"), PS_CASES),
    ("mxfp4.gemv1", "qc_mxfp4_gemv1", G1_EMULATED, (("sm_90", ["-D__CUDA_ARCH__=900"], 1),), ("QC_MXG_KS", "QC_MXG"),
     G1_CASES),
]

with tempfile.TemporaryDirectory() as tmp:
    bad = 0
    for kid, entry, emulated, builds, knobs, cases in KERNELS:
        kdir = os.path.join(tmp, kid)
        os.makedirs(kdir)
        with open(os.path.join(kdir, "gemv_frag_src.h"), "w") as f:
            f.write(source(kid, emulated, "extern __shared__ float red[];"))
        exes = []
        for bi, (label, defs, mmin) in enumerate(builds):
            exe = os.path.join(kdir, f"gemv_frag_emu_{bi}")
            r = subprocess.run([cxx, "-std=c++20", "-O1", "-pthread", *defs, f"-DEMU_ENTRY={entry}",
                                "-I", kdir, "-I", HERE, "-o", exe, os.path.join(HERE, "gemv_frag_emu.cpp")],
                               capture_output=True, text=True)
            if r.returncode != 0:
                if "barrier" in r.stderr and ("No such file" in r.stderr or "not found" in r.stderr):
                    skip(f"{cxx} has no C++20 <barrier>")
                fail(f"{cxx} could not build the emulation of {kid}:\n{r.stderr[-4000:]}")
            exes.append((label, mmin, exe))
        print(f"== {kid}")
        for i, (m, n, k, emin, emax, nans, zeros, env) in enumerate(cases):
            g, b = dims(kid, m, n, k, env, knobs)
            for label, mmin, exe in exes:
                if m < mmin:
                    continue
                r = subprocess.run([exe, str(m), str(n), str(k), str(emin), str(emax), str(nans), str(zeros), str(g),
                                    str(b), str(i)], capture_output=True, text=True, timeout=600)
                plan = " ".join(f"{k_}={v}" for k_, v in env.items())
                sys.stdout.write(f"{label:5s} {plan:28s} {r.stdout}")
                sys.stderr.write(r.stderr)
                bad += r.returncode != 0
    print("gemv_frag_emu: FAIL" if bad else "gemv_frag_emu: all cases within tolerance")
    sys.exit(1 if bad else 0)
