#!/usr/bin/env python3
"""probe_pdl.py - does programmatic dependent launch shorten a chain of decode kernels?  L layers of Llama-3-8B
shapes, each qkv -> act -> o -> act -> gate_up -> act -> down -> act (act: an element-wise stand-in for the row
kernels), the GEMVs w4a16.gemv1_sym's body; captured in a CUDA graph plain, and with the PDL kernels launched by
cuLaunchKernelEx with programmatic stream serialization.  Outputs compared bit for bit.  Usage: probe_pdl.py OUTDIR"""
import ctypes, json, os, statistics, sys
import torch
from run_probe import *

out = sys.argv[1] if len(sys.argv) > 1 else "."
torch.cuda.init(); torch.zeros(1, device="cuda")
src = "".join(open(os.path.join(HERE, f)).read() for f in ("w4f_gemv.cu", "w4g1_tail.cu", "pdl_tail.cu"))
open("/tmp/pdl.cu", "w").write(src)
mod = Module(compile_cubin("/tmp/pdl.cu"))


class Attr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]


class Cfg(ctypes.Structure):
    _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint), ("bx", ctypes.c_uint),
                ("by", ctypes.c_uint), ("bz", ctypes.c_uint), ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(Attr)), ("nattrs", ctypes.c_uint)]


def launch_ex(f, grid, block, args, smem=0, pdl=True):
    vals = [t(v) for t, v in args]
    ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    a = Attr()
    a.id = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    ctypes.memset(ctypes.addressof(a) + 8, 0, 64)
    ctypes.c_int.from_address(ctypes.addressof(a) + 8).value = 1 if pdl else 0
    c = Cfg(grid, 1, 1, block, 1, 1, smem, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
            ctypes.pointer(a), 1)
    chk(cu.cuLaunchKernelEx(ctypes.byref(c), f, ptrs, None), "cuLaunchKernelEx")


shapes = [("qkv", 6144, 4096, 1), ("o", 4096, 4096, 2), ("gate_up", 28672, 4096, 1), ("down", 4096, 14336, 2)]
L = int(os.environ.get("LAYERS", "8"))
W = []
for l in range(L):
    lw = {}
    for name, n, k, ks in shapes:
        lw[name] = (torch.randint(0, 255, (n * k // 2,), dtype=torch.uint8, device="cuda"),
                    (torch.rand(n * (k // 128), device="cuda") * 0.01 + 0.001).half())
    W.append(lw)
x0 = torch.randn(4096, device="cuda").bfloat16()
xb = torch.empty(14336, dtype=torch.bfloat16, device="cuda")
ybuf = {name: torch.empty(n, dtype=torch.float32, device="cuda") for name, n, k, ks in shapes}


def step(mode):
    """one pass over the L layers; mode: plain, pdl (attribute + PDL kernels), hooks (PDL kernels, no attribute)"""
    q = mod.fn("q_plain" if mode == "plain" else "q_pdl")
    a = mod.fn("act_plain" if mode == "plain" else "act_pdl")
    go = (lambda f, g, b, args, smem=0: launch_ex(f, g, b, args, smem, True)) if mode == "pdl" else \
         (lambda f, g, b, args, smem=0: launch(f, g, b, args, smem))
    x = x0
    for l in range(L):
        for name, n, k, ks in shapes:
            w, s = W[l][name]
            y = ybuf[name]
            go(q, (n + 3) // 4, 32 * ks, [(P, x.data_ptr()), (P, w.data_ptr()), (P, s.data_ptr()), (P, y.data_ptr()),
                                           (I, 1), (I, n), (I, k), (I, 128)], (ks - 1) * 16)
            nxt = {"qkv": 4096, "o": 4096, "gate_up": 14336, "down": 4096}[name]
            go(a, (nxt + 255) // 256, 256, [(P, y.data_ptr()), (P, xb.data_ptr()), (I, nxt), (ctypes.c_float, 0.01)])
            x = xb


res = {}
outs = {}
for mode in ("plain", "hooks", "pdl"):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step(mode)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        step(mode)
    xb.fill_(0); g.replay(); torch.cuda.synchronize()
    outs[mode] = (xb.clone(), ybuf["down"].clone())
    ts = []
    for _ in range(30):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record(); e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000 / L)
    res[mode] = statistics.median(ts)
same = {m: bool(torch.equal(outs[m][1], outs["plain"][1])) for m in outs}
wbytes = sum(n * k // 2 + n * (k // 128) * 2 for _, n, k, _ in shapes)
print(json.dumps({"us_per_layer": res, "identical_to_plain": same, "layer_weight_bytes": wbytes}, indent=1))
for m in res:
    print(f"{m:6s} {res[m]:8.2f} us a layer ({wbytes / res[m] / 1e6:.2f} TB/s of weights), output identical to plain: {same[m]}")
os.makedirs(out, exist_ok=True)
json.dump({"us_per_layer": res, "identical_to_plain": same, "layers": L, "layer_weight_bytes": wbytes},
          open(os.path.join(out, "probe_pdl.json"), "w"), indent=1)
