#!/usr/bin/env python3
"""probe_stream.py - load-only probes (w4_stream.cu) and the fragment GEMV itself (w4f_gemv.cu, dumped from the
plugin by device_pack) on the four Llama-3-8B shapes: us per launch back to back and after a memset flush, as a
fraction of the copy bandwidth of the same run.  Usage: probe_stream.py OUTDIR"""
import json, math, os, sys
import torch
from run_probe import *

out = sys.argv[1] if len(sys.argv) > 1 else "."
torch.cuda.init()
torch.zeros(1, device="cuda")
mod = Module(compile_cubin(os.path.join(HERE, "w4_stream.cu")))
gm = Module(compile_cubin(os.path.join(HERE, "w4f_gemv.cu")))
sink = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

copy_bw = copy_bandwidth()

shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
only = os.environ.get("SHAPES")
rows = []
e = mod.fn("empty_k")
t_empty = time_stream(lambda c: launch(e, 132, 128, [(P, sink.data_ptr())]), 50)
print(f"empty kernel back to back: {t_empty:.2f} us")
rows.append({"shape": "-", "kernel": "empty_k", "stream_us": t_empty})


def plan(n, k, r_want, ks_want=None, want=2112):
    tiles = (n + 15) // 16
    r = r_want if tiles >= 2 else 1
    blocks = (tiles + r - 1) // r
    ks = 1
    while ks < 16 and blocks * ks * 2 <= want and (k // 128) >= 4 * ks: ks *= 2
    if ks_want: ks = ks_want
    return blocks, ks


for name, (n, k) in shapes.items():
    if only and name not in only.split(","): continue
    wbytes = n * k // 2
    sbytes = n * (k // 128) * 2
    copies = max(2, math.ceil(240e6 / (wbytes + sbytes)))
    ws = [torch.randint(0, 255, (wbytes,), dtype=torch.uint8, device="cuda") for _ in range(copies)]
    ss = [(torch.rand(n * (k // 128), device="cuda") * 0.01 + 0.001).half() for _ in range(copies)]
    x = torch.randn(k, device="cuda").bfloat16()
    y = torch.empty(16 * n, dtype=torch.float32, device="cuda")
    floor_w = wbytes / copy_bw * 1e6
    floor_ws = (wbytes + sbytes) / copy_bw * 1e6
    cands = []
    for D, R in [(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (2, 2), (4, 2)]:
        for kw in (None, 2, 4, 8):
            bl, ks = plan(n, k, R, kw)
            if ks * 32 > 512: continue
            cands.append((f"frag_{D}_{R}", f"frag D={D} R={R} KS={ks}", bl, 32 * ks, "nk", wbytes))
    for S, R in [(2, 1), (4, 1), (8, 1), (2, 2), (4, 2)]:
        for kw in (None, 2, 4):
            bl, ks = plan(n, k, R, kw)
            cands.append((f"span_{S}_{R}", f"span S={S} R={R} KS={ks}", bl, 32 * ks, "nk", wbytes))
    for D in (1, 2, 4, 8):
        for bpsm in (2, 4, 8):
            cands.append((f"contig_{D}", f"contig D={D} {bpsm}x256/SM", 132 * bpsm, 256, "b", wbytes))
    for fn, label, grid, block, kind, nbytes in cands:
        f = mod.fn(fn)
        if kind == "nk":
            run = lambda c, f=f, grid=grid, block=block: launch(f, grid, block, [(P, ws[c].data_ptr()), (I, n), (I, k), (P, sink.data_ptr())])
        else:
            run = lambda c, f=f, grid=grid, block=block: launch(f, grid, block, [(P, ws[c].data_ptr()), (I, wbytes), (P, sink.data_ptr())])
        run(0); torch.cuda.synchronize()
        ts = time_stream(run, copies)
        tm = time_memset(run, flush)
        rows.append({"shape": name, "kernel": label, "grid": grid, "block": block, "stream_us": ts, "memset_us": tm,
                     "floor_us": floor_w, "frac_stream": floor_w / ts, "frac_memset": floor_w / tm})
    # the fragment GEMV itself (codes + scales), M = 1 and 16
    g = gm.fn("qc_w4f_gemv_sym")
    for m in (1, 16):
        xm = torch.randn(m, k, device="cuda").bfloat16()
        for r_want in (1, 2):
            for kw in (None, 1, 2, 4, 8):
                bl, ks = plan(n, k, r_want, kw)
                nb = 2 if m > 8 else 1
                smem = (ks - 1) * r_want * nb * 4 * 32 * 4 if ks > 1 else 0
                run = lambda c, bl=bl, ks=ks, smem=smem, xm=xm, m=m: launch(g, bl, 32 * ks, [(P, xm.data_ptr()), (P, ws[c].data_ptr()), (P, ss[c].data_ptr()), (P, y.data_ptr()), (I, m), (I, n), (I, k), (I, 128)], smem)
                try:
                    run(0); torch.cuda.synchronize()
                except RuntimeError as ex:
                    print("skip", ex); continue
                ts = time_stream(run, copies); tm = time_memset(run, flush)
                rows.append({"shape": name, "kernel": f"w4f_gemv M={m} R={r_want} KS={ks}", "grid": bl, "block": 32 * ks,
                             "stream_us": ts, "memset_us": tm, "floor_us": floor_ws, "frac_stream": floor_ws / ts,
                             "frac_memset": floor_ws / tm})
    del ws, ss

os.makedirs(out, exist_ok=True)
json.dump({"copy_bw": copy_bw, "rows": rows}, open(os.path.join(out, "probe_stream.json"), "w"), indent=1)
for r in rows:
    if r["shape"] == "-": continue
    print(f"{r['shape']:8s} {r['kernel']:32s} stream {r['stream_us']:7.2f} us {100 * r['frac_stream']:5.1f}%  memset {r['memset_us']:7.2f} us {100 * r['frac_memset']:5.1f}%")
