#!/usr/bin/env python3
"""anchors_linear.py - PyTorch linear-layer anchors, timed in the same run as qcore's kernels.

For each (N, K) and M: torch.matmul in bf16 (cuBLAS), torch._scaled_mm in FP8 E4M3 with
row-wise scales (cuBLASLt), torch._int_mm (INT8) where M > 16, and the memory and compute
floors from this run's measured copy bandwidth and bf16 peak. Medians from
triton.testing.do_bench (L2 flushed between runs), like ../shared/anchors.

usage: anchors_linear.py [--shapes 4096x4096,...] [--m 1,16,512,4096] > anchors.json
"""
import argparse
import json
import sys

import torch
from triton.testing import do_bench

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="6144x4096,4096x4096,28672x4096,4096x14336")
ap.add_argument("--m", default="1,16,64,256,1024,4096")
a = ap.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)

# ceilings measured now: device-to-device copy and an 8192^3 bf16 matmul
src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
copy_ms = do_bench(lambda: dst.copy_(src))
bw = 2 * src.numel() / (copy_ms * 1e-3)  # bytes read + written per second
big = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
mm_ms = do_bench(lambda: big @ big)
peak = 2 * 8192**3 / (mm_ms * 1e-3)
del src, dst, big

rows = []
for shape in a.shapes.split(","):
    n, k = map(int, shape.split("x"))
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
    w8 = w.to(torch.float8_e4m3fn)
    wi = torch.randint(-127, 128, (n, k), device=dev, dtype=torch.int8)
    for m in map(int, a.m.split(",")):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        r = {"n": n, "k": k, "m": m}
        r["torch_bf16_us"] = do_bench(lambda: x @ w.t()) * 1e3
        x8 = x.to(torch.float8_e4m3fn)
        sx = torch.ones(m, 1, device=dev, dtype=torch.float32)
        sw = torch.ones(1, n, device=dev, dtype=torch.float32)
        try:
            r["torch_fp8_rowwise_us"] = do_bench(
                lambda: torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)) * 1e3
        except Exception as e:  # shapes cuBLASLt refuses are recorded as such
            r["torch_fp8_rowwise_us"] = None
            r["fp8_error"] = str(e)[:120]
        if m > 16:
            xi = torch.randint(-127, 128, (m, k), device=dev, dtype=torch.int8)
            r["torch_int8_us"] = do_bench(lambda: torch._int_mm(xi, wi.t())) * 1e3
        bytes_bf16 = 2 * (n * k + m * k + m * n)
        r["floor_bf16_hbm_us"] = bytes_bf16 / bw * 1e6
        r["floor_bf16_mma_us"] = 2 * m * n * k / peak * 1e6
        rows.append(r)
        print(json.dumps(r), file=sys.stderr)
print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                  "copy_bandwidth_Bps": bw, "bf16_peak_flops": peak, "rows": rows}, indent=1))
