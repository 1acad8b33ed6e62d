#!/usr/bin/env python3
"""scaled_mm_once.py - one torch._scaled_mm (E4M3, row-wise scales, bf16 out) per M,N,K given, for ncu to name the
cuBLASLt kernel it picks and its launch geometry.  usage: scaled_mm_once.py 1024x4096x4096 [...]"""
import sys

import torch

for spec in sys.argv[1:]:
    m, n, k = map(int, spec.split("x"))
    x = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda") * 0.02).to(torch.float8_e4m3fn)
    sx = torch.ones(m, 1, device="cuda")
    sw = torch.ones(1, n, device="cuda")
    torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
