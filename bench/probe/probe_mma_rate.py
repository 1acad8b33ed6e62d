#!/usr/bin/env python3
"""probe_mma_rate.py - runs mma_rate.cu: 132 blocks of 16 warps (one an SM), each timing its loop with clock64;
prints tensor instructions an SM retires a cycle and the 4-bit weights a cycle that means at m = 1 (mma.sync
m16n8k16: 256 weights, wgmma m64n8k16: 1024).  Usage: probe_mma_rate.py OUTDIR"""
import json, os, sys
import torch
from run_probe import *

out = sys.argv[1] if len(sys.argv) > 1 else "."
torch.cuda.init(); torch.zeros(1, device="cuda")
m = Module(compile_cubin(os.path.join(HERE, "mma_rate.cu")))
SMS = torch.cuda.get_device_properties(0).multi_processor_count
cyc = torch.zeros(SMS, dtype=torch.int64, device="cuda")
sink = torch.zeros(512, dtype=torch.float32, device="cuda")
rows = []
its = 4096
kernels = [("mma_c%d" % c, 16 * c, 256) for c in (1, 2, 4, 8)] + \
          [("wg_%d_%d_%d" % v, 4 * v[0], 1024) for v in ((8, 1, 0), (8, 2, 0), (8, 4, 0), (16, 2, 0), (8, 2, 1), (16, 4, 0))]
for name, per_it, weights in kernels:
    f = m.fn(name)
    for rep in range(2):  # the first run warms up
        launch(f, SMS, 512, [(ctypes.c_int, its), (P, cyc.data_ptr()), (P, sink.data_ptr())])
        torch.cuda.synchronize()
    c = cyc.float().median().item()
    ipc = per_it * its / c  # tensor instructions an SM a cycle
    rows.append({"kernel": name, "cycles": c, "instr_per_sm_cycle": ipc, "weights_per_sm_cycle": ipc * weights})
    print(f"{name:12s} {c:10.0f} cycles  {ipc:6.3f} instr/SM/cycle ({1 / ipc:5.2f} cycles each)  {ipc * weights:7.1f} weights/SM/cycle", flush=True)
os.makedirs(out, exist_ok=True)
json.dump(rows, open(os.path.join(out, "mma_rate.json"), "w"), indent=1)
