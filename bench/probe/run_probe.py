#!/usr/bin/env python3
"""run_probe.py - times bench/probe/*.cu kernels on the GPU (NVRTC + driver API through ctypes, torch for memory
and events).  Load-only probes of the decode GEMV's access patterns against the copy bandwidth of the same run."""
import ctypes, json, os, statistics, sys
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
nvrtc = ctypes.CDLL("libnvrtc.so.13")
cu = ctypes.CDLL("libcuda.so.1")


def chk(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: {r}")


def compile_cubin(path, arch="sm_90a", extra=()):
    src = open(path, "rb").read()
    prog = ctypes.c_void_p()
    chk(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, path.encode(), 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-default-device",
            b"-I/usr/local/cuda/include"] + [o.encode() for o in extra]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if r != 0:
        raise RuntimeError(f"nvrtc {path}: {log.value.decode()}")
    chk(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n)), "cubin size")
    buf = ctypes.create_string_buffer(n.value)
    chk(nvrtc.nvrtcGetCUBIN(prog, buf), "cubin")
    return buf


class Module:
    def __init__(self, cubin):
        self.m = ctypes.c_void_p()
        chk(cu.cuModuleLoadData(ctypes.byref(self.m), cubin), "cuModuleLoadData")
        self.fns = {}

    def fn(self, name, smem=0):
        if name not in self.fns:
            f = ctypes.c_void_p()
            chk(cu.cuModuleGetFunction(ctypes.byref(f), self.m, name.encode()), f"get {name}")
            self.fns[name] = f
        f = self.fns[name]
        if smem > 48 * 1024:
            chk(cu.cuFuncSetAttribute(f, 8, smem), "max dyn smem")
        return f


def launch(f, grid, block, args, smem=0):
    """args: list of (ctypes type, value)"""
    vals = [t(v) for t, v in args]
    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    stream = torch.cuda.current_stream().cuda_stream
    chk(cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, ctypes.c_void_p(stream), ptrs, None), "launch")


P, I = ctypes.c_void_p, ctypes.c_longlong


def copy_bandwidth(gib=1, reps=10):
    """device-to-device copy rate, bytes read + written per second (printed)"""
    src = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        dst.copy_(src)
    b.record()
    b.synchronize()
    bw = 2 * (gib << 30) * reps / (a.elapsed_time(b) / 1000)
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s")
    return bw


def time_stream(run, copies, reps=20):
    """launch over the weight copies in turn, back to back; us per launch (median of reps rounds)"""
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for c in range(copies):
            run(c)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / copies)
    return statistics.median(ts)


def time_memset(run, flush, reps=30):
    ts = []
    for i in range(reps):
        flush.fill_(i)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run(0)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000)
    return statistics.median(ts)


def time_graph(run, copies, reps=10, per_graph=None):
    """launches over the weight copies in turn, captured in one CUDA graph (no host launch cost): us per launch"""
    per_graph = per_graph or max(copies, 40 // copies * copies)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run(0)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for i in range(per_graph):
            run(i % copies)
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / per_graph)
    return statistics.median(ts)
