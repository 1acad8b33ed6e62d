#!/usr/bin/env python3
"""test_decode_emu.py - kv_fp8.attn_decode's CUDA source (common.cuh + decode.cu, the shipped v2 build: 4 stages, fused
combine) with every inline-asm statement swapped for a host emulation (emu_kv.h), compiled as C++ with QC_DEC_SWZ=0
(default) and 1 (the padded, permuted warp combine) and run on the CPU against a double attention: head groups of 1, 4,
7, 12 and 20 (two q-head subgroups), d 64 and 128, E4M3 per tensor / per head and E5M2, contexts 0 to 2500 over a
shuffled block table, the host's partition count and forced ones (the kernel takes it from gridDim.x), cp.async landing
at issue or at its wait, the threads in order or in a random order.
usage: test_decode_emu.py KV_FP8_SOURCE_DIR [--sanitize]"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"kv_fp8_decode_emu: skipped, {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


if len(sys.argv) < 2:
    fail("usage: test_decode_emu.py KV_FP8_SOURCE_DIR [--sanitize]")
SRC_DIR, SANITIZE = sys.argv[1], "--sanitize" in sys.argv[2:]
cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
if not cxx:
    skip("no C++ compiler")
with open(os.path.join(SRC_DIR, "cuda", "common.cuh")) as f:
    common = f.read()
with open(os.path.join(SRC_DIR, "cuda", "decode.cu")) as f:
    decode = f.read()
src = common + "\n" + decode  # the order the plugin embeds them in (embed_cuda.cmake)

# Every inline-asm statement by its PTX text: the emu_kv.h function that stands for it (called with the outputs by
# reference, then the inputs) and how many the source holds.  Any other asm, or another count, fails the test.
ASM = {
    "cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;": ("emu_cvt_e4m3x2_f32", 1),
    "cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;": ("emu_cvt_e5m2x2_f32", 1),
    "cvt.rn.f16x2.e4m3x2 %0, %1;": ("emu_cvt_f16x2_e4m3x2", 1),
    "cvt.rn.f16x2.f32 %0, %1, %2;": ("emu_cvt_f16x2_f32", 1),
    "ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];": ("emu_ld_nc_v4_u32", 1),
    "ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];": ("emu_ld_nc_v2_u32", 1),
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n":
        ("emu_mma_f16", 1),
    "cp.async.cg.shared.global [%0], [%1], 16;": ("emu_cp_async_16", 1),
    "cp.async.commit_group;": ("emu_cp_async_commit", 1),
    "cp.async.wait_group %0;": ("emu_cp_async_wait", 1),
    "ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];": ("emu_ld_shared_v4", 1),
    "ld.shared.v2.u32 {%0,%1}, [%2];": ("emu_ld_shared_v2", 1),
    "ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];": ("emu_ld_nc_v4_f32", 1),
    "ld.global.nc.f32 %0, [%1];": ("emu_ld_nc_f32", 1),
    "ld.global.nc.s32 %0, [%1];": ("emu_ld_nc_s32", 1),
    "prefetch.global.L2 [%0];": ("emu_prefetch_l2", 3),
    "mov.u32 %0, %%dynamic_smem_size;": ("emu_dynamic_smem_size", 1),
}
ASM_RE = re.compile(r'\basm(\s+volatile)?\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)(.*?)\)\s*;', re.S)


def operands(text):
    """outputs and inputs of an asm operand list (': "=r"(x), ... : "l"(p) : "memory"'), in order"""
    outs, ins, i = [], [], 0
    while True:
        m = re.compile(r'"([^"]*)"\s*\(').search(text, i)
        if not m:
            return outs, ins
        depth, j = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        (outs if m.group(1)[:1] in "=+" else ins).append(text[m.end():j - 1].strip())
        i = j


seen = {}


def swap(m):
    ptx = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
    ptx = re.sub(r"\s+", " ", ptx.strip())
    if ptx not in ASM:
        fail(f"inline asm the emulation does not know: '{ptx}': add it to test_decode_emu.py and emu_kv.h")
    seen[ptx] = seen.get(ptx, 0) + 1
    outs, ins = operands(m.group(3))
    return f"{ASM[ptx][0]}({', '.join(outs + ins)});"


src = ASM_RE.sub(swap, src)
for ptx, (name, count) in ASM.items():
    if seen.get(ptx, 0) != count:
        fail(f"'{ptx}' occurs {seen.get(ptx, 0)} times, the emulation expects {count}: update test_decode_emu.py")
src, n = re.subn(r"extern __shared__ (__align__\(\d+\) )?u8 (\w+)\[\];", r"u8 *\2 = emu_dsm();", src)
if n != 1 or re.search(r"\basm\b", src) or "extern __shared__" in src:
    fail("the kernel source changed shape (dynamic shared memory or inline asm left): update test_decode_emu.py")

# nh, nkv, hd, variant (0 E4M3 per tensor, 1 per head, 2 E5M2), extra table blocks, forced parts (0: host rule),
# mode (bit 0: cp.async lands at its wait, not at issue; bit 1: threads in a random order), contexts
CASES = [
    (32, 8, 128, 0, 0, 0, 0, [1000]),         # B = 1 x 1K, Llama-8B's heads: 16 partitions of 64 tokens
    (32, 8, 128, 1, 2, 0, 3, [17, 100, 1]),   # the host's 3 partitions over short contexts, a 1-token one
    (8, 8, 128, 2, 0, 0, 2, [1000, 0, 33]),   # group of 1, E5M2, an empty sequence
    (14, 2, 64, 1, 0, 0, 1, [1000, 17]),      # group of 7 (rows 0..7), d 64
    (24, 2, 128, 1, 0, 0, 2, [100, 1000]),    # group of 12: rows 8..15 in use
    (40, 2, 64, 0, 3, 0, 3, [333]),           # group of 20: two q-head subgroups (16 + 4)
    (8, 1, 64, 2, 0, 1, 0, [2500]),           # one partition: 157 blocks, 40 for warp 0 (table refill at 32)
    (8, 1, 64, 0, 0, 2, 3, [2500, 700]),      # 2 partitions of 1250: the table refill in the second
    (32, 8, 128, 1, 0, 1, 1, [1000, 100]),    # forced partition counts: the kernel reads gridDim.x
    (32, 8, 128, 2, 0, 2, 2, [1000, 100]),
    (24, 2, 128, 0, 0, 3, 0, [1000, 64]),
    (32, 8, 64, 1, 1, 5, 3, [1000, 129, 16]),
    (32, 8, 128, 0, 0, 64, 2, [600]),         # more partitions than used (nused 10 of 64)
]
BUILDS = [("swz0", ["-DQC_DEC_SWZ=0"]), ("swz1", ["-DQC_DEC_SWZ=1"])]

t0 = time.time()
# KV_EMU_DIR: build there and keep the source and binaries (to run one case by hand)
with (tempfile.TemporaryDirectory() if not os.environ.get("KV_EMU_DIR") else open(os.devnull)) as tmp_:
    tmp = os.environ.get("KV_EMU_DIR") or tmp_
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "decode_src.h"), "w") as f:
        f.write(src)
    flags = ["-std=c++20", "-O1", "-D__CUDA_ARCH__=900", "-Wno-unknown-pragmas"]
    if SANITIZE:
        flags += ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    exes = []
    for name, defs in BUILDS:
        exe = os.path.join(tmp, f"decode_emu_{name}")
        r = subprocess.run([cxx] + flags + defs + ["-I", tmp, "-I", HERE, "-o", exe,
                                                   os.path.join(HERE, "decode_emu.cpp")], capture_output=True, text=True)
        if r.returncode != 0:
            if "-std=c++20" in r.stderr or "unrecognized command-line option" in r.stderr:
                skip(f"{cxx} has no C++20")
            fail(f"{cxx} could not build the emulation ({name}):\n{r.stderr[-4000:]}")
        exes.append((name, exe))
    bad = 0
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_stack_use_after_return=0")
    for i, (nh, nkv, hd, var, extra, parts, mode, ctx) in enumerate(CASES):
        for name, exe in exes:
            if SANITIZE and exe != exes[i % len(exes)][1]:
                continue  # sanitized (several times slower): each case in one of the builds, alternating
            args = [exe, str(len(ctx)), str(nh), str(nkv), str(hd), str(var), str(extra), str(parts), str(mode),
                    str(i)] + [str(c) for c in ctx]
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
            except subprocess.TimeoutExpired:
                print(f"{name} case {i}: FAIL: timed out")
                bad += 1
                continue
            sys.stdout.write("".join(f"{name} {line}\n" for line in r.stdout.splitlines()))
            if r.returncode != 0 and not r.stdout.strip():
                sys.stdout.write(f"{name} case {i}: exit {r.returncode}\n")
            sys.stdout.write(r.stderr[-3000:])
            bad += r.returncode != 0
    print(f"kv_fp8_decode_emu: {'FAIL' if bad else 'all cases within tolerance'} ({time.time() - t0:.1f} s)")
    sys.exit(1 if bad else 0)
