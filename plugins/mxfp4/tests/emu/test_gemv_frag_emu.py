#!/usr/bin/env python3
"""test_gemv_frag_emu.py - the mxfp4.gemv_frag CUDA source, its inline asm swapped for emulations, compiled as C++ (for
sm_90's two register stages and sm_80's one at m > 8) and run on the CPU over every m, odd tile counts, n % 16 != 0,
forced R = 2 and K splits with ragged ends, NaN and zero scale bytes."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CODEC, HERE = sys.argv[1], os.path.dirname(os.path.abspath(__file__))
KID = "mxfp4.gemv_frag"


def skip(why):
    print(f"gemv_frag_emu: skipped, {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
if not cxx:
    skip("no C++ compiler")
r = subprocess.run([CODEC, "source", KID], capture_output=True, text=True)
if r.returncode != 0:
    fail(f"mxfp4_codec source: {r.stderr}")
src = r.stdout

# the helpers that are inline asm on the GPU: mma.sync, fma.rn.bf16x2 (exact here: a product by 2^126), ld.global.nc
EMULATED = {
    "void mxf_mma": "static inline void mxf_mma(float *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {"
                    " const unsigned a[4] = {a0, a1, a2, a3}; emu_mma(d, a, b0, b1); }",
    "u32 mxf_pair": "template <u32 MASK, u32 MUL> static inline u32 mxf_pair(u32 q) {"
                    " return emu_mul2(((q & MASK) * MUL) & 0x81C081C0u, MXF_P126); }",
    "void mxf_ld8": "static inline void mxf_ld8(const u8 *p, u32 &a, u32 &b) {"
                    " a = ((const u32 *)p)[0]; b = ((const u32 *)p)[1]; }",
}
for name, body in EMULATED.items():
    m = re.search(r"(template <[^>]*> )?__device__ __forceinline__ " + name + r"\(", src)
    if not m:
        fail(f"{name} not found in the kernel source: update test_gemv_frag_emu.py")
    end = src.index("\n}\n", m.start()) + 3
    src = src[: m.start()] + body + "\n" + src[end:]
src, n = re.subn(r"extern __shared__ float red\[\];", "static float red[16 * 16 * 32];", src)
if n != 1 or re.search(r"\basm\b", src):
    fail("the kernel source changed shape (shared reduction or inline asm left): update test_gemv_frag_emu.py")


def dims(m, n, k, env):
    e = dict(os.environ)
    e.pop("QC_MXF_R", None)
    e.pop("QC_MXF_KS", None)
    e.update(env)
    r = subprocess.run([CODEC, "dims", KID, str(m), str(n), str(k)], capture_output=True, text=True, env=e)
    if r.returncode != 0:
        fail(f"mxfp4_codec dims: {r.stderr}")
    g, b, _ = (int(v) for v in r.stdout.split())
    return g, b


# m, n, k, emin, emax, nans, zeros, forced plan
CASES = []
for m in range(1, 17):  # every m on odd tile counts (n = 40: 3 tiles, the last half past n) and n % 16 != 0
    CASES.append((m, 40 if m % 2 else 24, 384 if m % 3 else 640, 110, 125, 0, 0, {}))
CASES += [
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

with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "gemv_frag_src.h"), "w") as f:
        f.write(src)
    exes = []
    for arch in (900, 800):
        exe = os.path.join(tmp, f"gemv_frag_emu_{arch}")
        r = subprocess.run([cxx, "-std=c++20", "-O1", "-pthread", f"-D__CUDA_ARCH__={arch}", "-I", tmp, "-I", HERE,
                            "-o", exe, os.path.join(HERE, "gemv_frag_emu.cpp")], capture_output=True, text=True)
        if r.returncode != 0:
            if "barrier" in r.stderr and ("No such file" in r.stderr or "not found" in r.stderr):
                skip(f"{cxx} has no C++20 <barrier>")
            fail(f"{cxx} could not build the emulation:\n{r.stderr[-4000:]}")
        exes.append((arch, exe))
    bad = 0
    for i, (m, n, k, emin, emax, nans, zeros, env) in enumerate(CASES):
        g, b = dims(m, n, k, env)
        for arch, exe in exes:
            if arch == 800 and m <= 8:
                continue  # the same code on both arches below m = 9
            r = subprocess.run([exe, str(m), str(n), str(k), str(emin), str(emax), str(nans), str(zeros), str(g), str(b),
                                str(i)], capture_output=True, text=True, timeout=600)
            plan = " ".join(f"{k_}={v}" for k_, v in env.items())
            sys.stdout.write(f"sm_{arch // 10} {plan:28s} {r.stdout}")
            sys.stderr.write(r.stderr)
            bad += r.returncode != 0
    print("gemv_frag_emu: FAIL" if bad else "gemv_frag_emu: all cases within tolerance")
    sys.exit(1 if bad else 0)
