#!/usr/bin/env python3
"""test_gemv_emu.py - the mxfp4.gemv CUDA source, its inline asm swapped for emulations, compiled as C++ and run on the CPU."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CODEC, HERE = sys.argv[1], os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"gemv_emu: skipped, {why}")
    sys.exit(77)


cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
if not cxx:
    skip("no C++ compiler")
r = subprocess.run([CODEC, "source", "mxfp4.gemv"], capture_output=True, text=True)
if r.returncode != 0:
    print(f"FAIL: mxfp4_codec source: {r.stderr}")
    sys.exit(1)
src = r.stdout

# the helpers that are inline asm on the GPU: ld.global.nc, fma.rn.bf16x2, mma.sync
EMULATED = {
    "mx_mul2": "static inline unsigned mx_mul2(unsigned a, unsigned b) { return emu_mul2(a, b); }",
    "mx_mma": "static inline void mx_mma(float *d, const unsigned *a, const unsigned *b) { emu_mma(d, a, b[0], b[1]); }",
    "mx_ld16": "static inline uint4 mx_ld16(const unsigned char *p) { return *(const uint4 *)p; }",
    "mx_mma_nv": "static inline void mx_mma_nv(float *d, const unsigned *a, unsigned b0, unsigned b1) { emu_mma(d, a, b0, b1); }",
}
for name, body in EMULATED.items():
    m = re.search(r"__device__ __forceinline__ \w+ " + name + r"\(", src)
    if not m:
        print(f"FAIL: {name} not found in the kernel source: update test_gemv_emu.py")
        sys.exit(1)
    end = src.index("\n}\n", m.start()) + 3
    src = src[: m.start()] + body + "\n" + src[end:]
src, n = re.subn(r"#define MXG_T2_ROWS \d+", "#define MXG_T2_ROWS EMU_T2_ROWS", src)
if n != 1 or re.search(r"\basm\b", src):
    print("FAIL: the kernel source changed shape (MXG_T2_ROWS or inline asm left): update test_gemv_emu.py")
    sys.exit(1)

with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "gemv_src.h"), "w") as f:
        f.write(src)
    exe = os.path.join(tmp, "gemv_emu")
    r = subprocess.run([cxx, "-std=c++20", "-O1", "-pthread", "-I", tmp, "-I", HERE, "-o", exe,
                        os.path.join(HERE, "gemv_emu.cpp")], capture_output=True, text=True)
    if r.returncode != 0:
        if "barrier" in r.stderr and ("No such file" in r.stderr or "not found" in r.stderr):
            skip(f"{cxx} has no C++20 <barrier>")
        print(f"FAIL: {cxx} could not build the emulation:\n{r.stderr[-4000:]}")
        sys.exit(1)
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    sys.exit(0 if r.returncode == 0 else 1)
