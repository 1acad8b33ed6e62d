#!/usr/bin/env python3
"""probe_var.py - the fragment GEMV (w4f_gemv.cu, dumped from the plugin) against register-budget variants of its
g128 paths (w4f_var_tail.cu): outputs compared with the plugin kernel's, then us per launch in a CUDA graph (back to
back over weight copies > L2) and after a 256 MiB memset.  Usage: probe_var.py OUTDIR"""
import json, math, os, sys
import torch
from run_probe import *

out = sys.argv[1] if len(sys.argv) > 1 else "."
torch.cuda.init(); torch.zeros(1, device="cuda")
src = open(os.path.join(HERE, "w4f_gemv.cu")).read() + "".join(open(os.path.join(HERE, t)).read() for t in os.environ.get("VAR_TAIL", "w4f_var_tail.cu").split(","))
open("/tmp/w4f_var.cu", "w").write(src)
gm = Module(compile_cubin("/tmp/w4f_var.cu"))
sm = Module(compile_cubin(os.path.join(HERE, "w4_stream.cu")))
sink = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
copy_bw = copy_bandwidth()
shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
VARS = json.loads(os.environ.get("VARS", "null")) or [
    # name, R, NB, KS list
    ["v_r1_nb1_b4", 1, 1, [2, 4, 8]], ["v_r1_nb1_b3", 1, 1, [2, 4, 8]], ["v_r1_nb1_b2", 1, 1, [2, 4, 8]],
    ["v_r2_nb1_b4", 2, 1, [2, 4, 8]], ["v_r2_nb1_b3", 2, 1, [2, 4, 8]],
    ["v_r1_nb2_b4", 1, 2, [2, 4, 8]], ["v_r1_nb2_b3", 1, 2, [2, 4, 8]], ["v_r2_nb2_b3", 2, 2, [2, 4, 8]]]
rows = []


def plan(n, k, r, want=2112):
    tiles = (n + 15) // 16
    blocks = (tiles + r - 1) // r
    ks = 1
    while ks < 16 and blocks * ks * 2 <= want and (k // 128) >= 4 * ks: ks *= 2
    return blocks, ks


for name, (n, k) in shapes.items():
    wbytes, sbytes = n * k // 2, n * (k // 128) * 2
    copies = max(2, math.ceil(240e6 / (wbytes + sbytes)))
    ws = [torch.randint(0, 255, (wbytes,), dtype=torch.uint8, device="cuda") for _ in range(copies)]
    ss = [(torch.rand(n * (k // 128), device="cuda") * 0.01 + 0.001).half() for _ in range(copies)]
    y = torch.empty(16 * n, dtype=torch.float32, device="cuda")
    yref = torch.empty(16 * n, dtype=torch.float32, device="cuda")
    floor = (wbytes + sbytes) / copy_bw * 1e6
    for m in (1, 16):
        nb = 2 if m > 8 else 1
        xm = torch.randn(m, k, device="cuda").bfloat16()
        # the plugin kernel with its own plan
        r0 = 2 if (n + 15) // 16 >= 528 else 1
        bl, ks = plan(n, k, r0)
        g = gm.fn("qc_w4f_gemv_sym")
        smem = (ks - 1) * r0 * nb * 4 * 32 * 4 if ks > 1 else 0
        base = lambda c, yy=yref, bl=bl, ks=ks, smem=smem, xm=xm, m=m: launch(g, bl, 32 * ks, [(P, xm.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, yy.data_ptr()), (I, m), (I, n), (I, k), (I, 128)], smem)
        yref.fill_(float("nan")); base(0); torch.cuda.synchronize()
        tg, tm = time_graph(base, copies), time_memset(base, flush)
        rows.append({"shape": name, "m": m, "kernel": f"plugin R={r0} KS={ks}", "graph_us": tg, "memset_us": tm, "floor_us": floor, "max_diff": 0.0})
        for var in VARS:
            vn, R, NB, kss = var[:4]
            rpb = var[4] if len(var) > 4 else 16 * R  # rows a block
            kmin = var[5] if len(var) > 5 else 256  # codes a warp's K slice holds at least
            if NB != nb: continue
            f = gm.fn(vn)
            if rpb == "persist":  # persistent warps: kss lists groups (4 rows) a warp, var[5] warps a block
                wpb, groups = var[5], (n + 3) // 4
                for gpw in kss:
                    blocks = (groups + gpw * wpb - 1) // (gpw * wpb)
                    run = lambda c, yy=y, f=f, blocks=blocks, wpb=wpb, gpw=gpw, xm=xm, m=m: launch(f, blocks, 32 * wpb, [(P, xm.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, yy.data_ptr()), (I, m), (I, n), (I, k), (I, gpw)])
                    y.fill_(float("nan")); run(0); torch.cuda.synchronize()
                    d = (y[: m * n] - yref[: m * n]).abs().max().item()
                    scale = yref[: m * n].abs().max().item()
                    tg, tm = time_graph(run, copies), time_memset(run, flush)
                    rows.append({"shape": name, "m": m, "kernel": f"{vn} GPW={gpw}", "graph_us": tg, "memset_us": tm, "floor_us": floor, "max_diff": d / max(scale, 1e-30)})
                continue
            blocks = (n + rpb - 1) // rpb
            for ks in kss:
                if k < kmin * ks: continue
                smem = (ks - 1) * R * nb * 4 * 32 * 4 if ks > 1 else 0
                run = lambda c, yy=y, f=f, blocks=blocks, ks=ks, smem=smem, xm=xm, m=m: launch(f, blocks, 32 * ks, [(P, xm.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, yy.data_ptr()), (I, m), (I, n), (I, k), (I, 128)], smem)
                y.fill_(float("nan")); run(0); torch.cuda.synchronize()
                # same arithmetic per row only when KS matches the plugin's split; otherwise a tolerance
                d = (y[: m * n] - yref[: m * n]).abs().max().item()
                scale = yref[: m * n].abs().max().item()
                tg, tm = time_graph(run, copies), time_memset(run, flush)
                rows.append({"shape": name, "m": m, "kernel": f"{vn} KS={ks}", "graph_us": tg, "memset_us": tm, "floor_us": floor, "max_diff": d / max(scale, 1e-30)})
    # a plain read of the codes, 512 contiguous bytes a warp load (the pattern's ceiling)
    cf = sm.fn("contig_4")
    run = lambda c, cf=cf: launch(cf, 132 * 4, 256, [(P, ws[c].data_ptr()), (I, wbytes), (P, sink.data_ptr())])
    rows.append({"shape": name, "m": 0, "kernel": "read-only contig", "graph_us": time_graph(run, copies),
                 "memset_us": time_memset(run, flush), "floor_us": floor, "max_diff": 0.0})
    del ws, ss
os.makedirs(out, exist_ok=True)
json.dump({"copy_bw": copy_bw, "rows": rows}, open(os.path.join(out, "probe_var.json"), "w"), indent=1)
for r in rows:
    print(f"{r['shape']:8s} M={r['m']:2d} {r['kernel']:24s} graph {r['graph_us']:6.2f} us {100 * r['floor_us'] / r['graph_us']:5.1f}%  memset {r['memset_us']:6.2f} us {100 * r['floor_us'] / r['memset_us']:5.1f}%  rel.diff {r['max_diff']:.1e}")
