#!/usr/bin/env python3
"""test_ggml_gguf.py - qc_ggml_dequantize against gguf-py, bit for bit, on blocks gguf-py made and on random valid blocks."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf import quants
    from gguf.constants import GGML_QUANT_SIZES
except ImportError as e:  # the oracle is optional: report a skip (ctest SKIP_RETURN_CODE 77)
    print(f"ggml_gguf: skipped, {e}")
    sys.exit(77)

HELPER = sys.argv[1]
passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def qc_dequantize(qtype, blocks, n_elements, tmp):
    src, dst = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.f32")
    np.ascontiguousarray(blocks).tofile(src)
    r = subprocess.run([HELPER, str(int(qtype)), str(n_elements), src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r
    return np.fromfile(dst, np.float32), r


def compare(name, qtype, blocks, tmp):
    """blocks: uint8 [rows, row_bytes]; gguf-py's dequantize is the oracle."""
    want = quants.dequantize(blocks, qtype).astype(np.float32, copy=False).reshape(-1)
    got, r = qc_dequantize(qtype, blocks, want.size, tmp)
    check(got is not None, f"{name}: helper failed: {r.stderr}")
    if got is None:
        return
    check(got.size == want.size, f"{name}: {got.size} values, want {want.size}")
    if got.size != want.size:
        return
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    # NaN payloads may be quieted by numpy's f16 conversion; positions must match
    same = (got.view(np.uint32) == want.view(np.uint32)) | (nan_g & nan_w)
    bad = int(np.sum(~same))
    check(bad == 0, f"{name}: {bad} of {got.size} values differ bitwise; first at "
          f"{int(np.argmax(~same)) if bad else -1}: {got[~same][:4]} vs {want[~same][:4]}")


def random_f16(rng, shape, lo=-14, hi=4):
    """Finite f16 scales (as ggml files hold), sign random, exponent in [lo, hi]."""
    v = rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi + 1, shape))
    return v.astype(np.float16).view(np.uint8).reshape(shape + (2,))


def random_blocks(rng, qtype, n_blocks):
    """Random valid blocks: any bytes, with the f16 fields replaced by finite values."""
    size = GGML_QUANT_SIZES[qtype][1]
    b = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    if qtype in (T.Q4_0, T.Q8_0):
        b[:, 0:2] = random_f16(rng, (n_blocks,))
    elif qtype in (T.Q4_1, T.Q4_K, T.Q5_K):
        b[:, 0:2] = random_f16(rng, (n_blocks,))
        b[:, 2:4] = random_f16(rng, (n_blocks,))
    elif qtype == T.Q6_K:
        b[:, 208:210] = random_f16(rng, (n_blocks,))
    return b


def main():
    rng = np.random.default_rng(20261129)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. blocks produced by gguf-py's own quantizers
        for qtype in (T.Q4_0, T.Q4_1, T.Q8_0, T.MXFP4):
            for rows, cols, scale in ((4, 256, 1.0), (3, 4096, 0.02), (7, 96, 300.0)):
                x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
                x[0, :32] *= 50.0  # a block with an outlier range
                blocks = quants.quantize(x, qtype)
                check(blocks.dtype == np.uint8 and blocks.shape[1] == cols // GGML_QUANT_SIZES[qtype][0]
                      * GGML_QUANT_SIZES[qtype][1], f"{qtype.name}: unexpected gguf-py block shape {blocks.shape}")
                compare(f"{qtype.name} quantized {rows}x{cols}", qtype, blocks, tmp)

        # 2. random valid blocks of every type (K-quants have no gguf-py quantizer)
        for qtype in (T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4):
            bs, size = GGML_QUANT_SIZES[qtype]
            for n_blocks in (1, 8, 333):
                b = random_blocks(rng, qtype, n_blocks)
                compare(f"{qtype.name} random x{n_blocks}", qtype, b.reshape(1, -1), tmp)
        # every MXFP4 scale byte, ggml's 0xFF included
        b = random_blocks(rng, T.MXFP4, 256)
        b[:, 0] = np.arange(256, dtype=np.uint8)
        compare("MXFP4 all scale bytes", T.MXFP4, b.reshape(1, -1), tmp)
        # K-quants with extreme 6-bit scales and mins and every qh bit pattern
        for qtype in (T.Q4_K, T.Q5_K):
            b = random_blocks(rng, qtype, 64)
            b[:32, 4:16] = 0xFF
            b[32:, 4:16] = 0x00
            compare(f"{qtype.name} extreme scales", qtype, b.reshape(1, -1), tmp)
        b = random_blocks(rng, T.Q6_K, 64)
        b[:, 192:208] = np.array([-128, 127] * 8, np.int8).view(np.uint8)
        compare("Q6_K extreme scales", T.Q6_K, b.reshape(1, -1), tmp)

        # 3. float rows: every f16 pattern, random and special bf16, f32
        f16 = np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(1, -1)
        compare("F16 all patterns", T.F16, f16, tmp)
        bf = rng.integers(0, 65536, 8192, dtype=np.uint16)
        bf[:8] = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x807F, 0x3F80]
        compare("BF16", T.BF16, bf.view(np.uint8).reshape(1, -1), tmp)
        f32 = rng.standard_normal(1000).astype(np.float32)
        compare("F32", T.F32, f32.view(np.uint8).reshape(1, -1), tmp)

        # 4. the helper refuses a truncated file
        blocks = quants.quantize(rng.standard_normal((1, 64)).astype(np.float32), T.Q4_0)
        got, r = qc_dequantize(T.Q4_0, blocks.reshape(-1)[:-1], 64, tmp)
        check(got is None and r.returncode == 2 and "truncated" in r.stderr, f"truncated file: {r.stderr}")

    print(f"ggml_gguf: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
