#!/usr/bin/env python3
"""probe_xr.py - w4a16.gemv1_xr_sym (plugins/common/cuda/gemv1_xr.cuh + plugins/w4a16/cuda/gemv1_xr.cu: x held in
registers, 7 instructions a word of codes) in build variants against the plugin's gemv1_sym and gemv1_tma_sym (dumped by dump_w4f.sh) at m = 1 on the
four Llama-3-8B shapes.  Every kernel's y is poisoned with NaN, then checked element by element against a float64
product of the dequantized weights: |y - exact| <= (k + 1) 2^-23 sum |x| |w| (test_gpu_w4a16_frag's bound), on two
weight copies.  Then us per launch back to back in a CUDA graph over weight copies > L2, and after a 256 MiB memset.
Usage: probe_xr.py OUTDIR   (VARS as JSON overrides the variants: [XR_D, XR_EXACT, XR_PF, warps a block])"""
import json, math, os, sys
import torch
from run_probe import *

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
torch.cuda.init(); torch.zeros(1, device="cuda")
SMS = torch.cuda.get_device_properties(0).multi_processor_count
ROOT = os.path.join(HERE, "..", "..")
GRID_DEP = ('__device__ __forceinline__ void qc_grid_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }\n'
            '__device__ __forceinline__ void qc_grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }\n')
XR_SRC = GRID_DEP + open(os.path.join(ROOT, "plugins/common/cuda/gemv1_xr.cuh")).read() + \
    open(os.path.join(ROOT, "plugins/w4a16/cuda/gemv1_xr.cu")).read()
open("/tmp/xr_src.cu", "w").write(XR_SRC)
VARS = json.loads(os.environ.get("VARS", "null")) or [
    [2, 0, 0, 16], [3, 0, 0, 16], [2, 1, 0, 16], [2, 0, 1, 16], [3, 0, 1, 16], [2, 0, 0, 8], [3, 0, 0, 8], [3, 1, 0, 16]]
mods = {}
for D, EX, PF, WB in VARS:
    key = (D, EX, PF)
    if key not in mods:
        mods[key] = Module(compile_cubin("/tmp/xr_src.cu", extra=[f"-DXR_D={D}", f"-DXR_EXACT={EX}", f"-DXR_PF={PF}"]))
g1 = Module(compile_cubin(os.path.join(HERE, "w4g_gemv.cu")))
gt = Module(compile_cubin(os.path.join(HERE, "w4t_gemv.cu")))
sm = Module(compile_cubin(os.path.join(HERE, "w4_stream.cu")))
sink = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
copy_bw = copy_bandwidth()
shapes = {"gate_up": (28672, 4096), "down": (4096, 14336), "qkv": (6144, 4096), "o": (4096, 4096)}
PERM = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7], device="cuda")  # element i of a word sits at nibble PERM[i]


def xr_plan(n, k, wb):
    """the host plan of gemv1_xr (plugins/common/qc_gemv1_xr_plan.h, without its shared-memory cap, which these
    shapes do not reach): gridDim, blockDim, shared bytes"""
    steps = k // 1024
    s = 1 if steps % 2 else 2
    ks = steps // s
    rg = max(1, wb // ks)
    warps = rg * ks
    per_sm = max(1, 16 // warps)
    pairs = (n + 1) // 2
    grid = min(pairs, SMS * per_sm)
    smem = math.ceil(pairs / grid) * ks * 2 * 4 if ks > 1 else 0
    return grid, 32 * warps, smem


def gemv1_ks(n, k):
    blocks, steps, ks = (n + 3) // 4, k // 1024, 1
    while ks < 8 and blocks * ks * 2 <= 2112 and steps >= 4 * ks: ks *= 2
    return ks


def exact(wq, sc, x, n, k):
    """float64 y and the bound's sum |x| |w| from the packed codes (pack_version 2) and f16 scales"""
    words = wq.view(torch.int32).view(n, k // 8).to(torch.int64) & 0xFFFFFFFF
    nib = torch.stack([(words >> (4 * p)) & 15 for p in range(8)], dim=-1)  # [n, k/8, nibble p]
    q = nib[:, :, PERM].reshape(n, k).to(torch.float64)
    w = (q - 8) * sc.view(n, k // 128).to(torch.float64).repeat_interleave(128, dim=1)
    xd = x.view(k).to(torch.float64)
    return w @ xd, w.abs() @ xd.abs()


rows, bad = [], 0


def show(r):
    print(f"{r['shape']:8s} {r['kernel']:34s} graph {r['graph_us']:6.2f} us {100 * r['floor_us'] / r['graph_us']:5.1f}%  "
          f"memset {r['memset_us']:6.2f} us {100 * r['floor_us'] / r['memset_us']:5.1f}%  err/tol {r['err']:.3f}"
          f"{'' if r['ok'] else '  WRONG'}", flush=True)


for name, (n, k) in shapes.items():
    wbytes, sbytes = n * k // 2, n * (k // 128) * 2
    copies = max(2, math.ceil(240e6 / (wbytes + sbytes)))
    ws = [torch.randint(0, 256, (wbytes,), dtype=torch.uint8, device="cuda") for _ in range(copies)]
    ss = [(torch.rand(n * (k // 128), device="cuda") * 0.01 + 0.001).half() for _ in range(copies)]
    x = torch.randn(1, k, device="cuda").bfloat16()
    y = torch.empty(n + 64, dtype=torch.float32, device="cuda")
    floor = (wbytes + sbytes) / copy_bw * 1e6
    refs = {}
    for c in (0, copies - 1):
        e, mag = exact(ws[c], ss[c], x, n, k)
        refs[c] = (e, (k + 1) * 2.0 ** -23 * mag + 1e-30)

    def check(run):
        worst = 0.0
        for c in (0, copies - 1):
            y.fill_(float("nan")); run(c); torch.cuda.synchronize()
            e, tol = refs[c]
            d = ((y[:n].double() - e).abs() / tol)
            if torch.isnan(y[:n]).any() or not torch.isnan(y[n:]).all():
                return float("inf")
            worst = max(worst, d.max().item())
        return worst

    def record(label, run):
        global bad
        err = check(run)
        ok = err <= 1.0
        bad += not ok
        r = {"shape": name, "kernel": label, "graph_us": time_graph(run, copies), "memset_us": time_memset(run, flush),
             "floor_us": floor, "err": err, "ok": ok}
        rows.append(r)
        show(r)

    ks = gemv1_ks(n, k)
    f1 = g1.fn("qc_w4g_gemv1_sym")
    record(f"gemv1_sym KS={ks}", lambda c, ks=ks: launch(f1, (n + 3) // 4, 32 * ks, [(P, x.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, y.data_ptr()), (I, 1), (I, n), (I, k), (I, 128)], (ks - 1) * 16))
    if k <= 6144:  # gemv1_tma_sym's launch (w4t_dims): 264 blocks of W4T_RPB rows, 9 warps, x + 8 stages + barriers
        ft = gt.fn("qc_w4t_gemv1_sym")
        rpb = ((n + 263) // 264 + 3) // 4 * 4
        smem = 2 * k + 8 * (2 * k + k // 16) + 16 * 8
        cu.cuFuncSetAttribute(ft, 8, smem)
        record("gemv1_tma_sym", lambda c: launch(ft, (n + rpb - 1) // rpb, 288, [(P, x.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, y.data_ptr()), (I, 1), (I, n), (I, k), (I, 128)], smem))
    for D, EX, PF, WB in VARS:
        f = mods[(D, EX, PF)].fn("qc_w4x_gemv1_sym")
        grid, block, smem = xr_plan(n, k, WB)
        record(f"xr D={D} ex={EX} pf={PF} {block // 32}w x{grid}", lambda c, f=f, grid=grid, block=block, smem=smem: launch(f, grid, block, [(P, x.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, y.data_ptr()), (I, 1), (I, n), (I, k), (I, 128)], smem))
    cf = sm.fn("contig_4")
    run = lambda c, cf=cf: launch(cf, SMS * 4, 256, [(P, ws[c].data_ptr()), (I, wbytes), (P, sink.data_ptr())])
    r = {"shape": name, "kernel": "read-only contig", "graph_us": time_graph(run, copies),
         "memset_us": time_memset(run, flush), "floor_us": floor, "err": 0.0, "ok": True}
    rows.append(r)
    show(r)
    del ws, ss
json.dump({"copy_bw": copy_bw, "device": torch.cuda.get_device_name(), "rows": rows, "bad": bad},
          open(os.path.join(out, "probe_xr.json"), "w"), indent=1)
print(f"wrong: {bad}")
print(f"\n{'shape':8s} {'kernel':34s} {'graph us':>9s} {'%floor':>7s} {'memset us':>10s} {'%floor':>7s}")
for r in rows:
    print(f"{r['shape']:8s} {r['kernel']:34s} {r['graph_us']:9.2f} {100 * r['floor_us'] / r['graph_us']:6.1f}% "
          f"{r['memset_us']:10.2f} {100 * r['floor_us'] / r['memset_us']:6.1f}%{'' if r['ok'] else ' WRONG'}")
