#!/usr/bin/env python3
"""w4a16_gguf: GGUF Q4_0/Q4_1 blocks made by the `gguf` package dequantize bit for bit through the w4a16 importer."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGMLQuantizationType as QT
    from gguf import quants
except ImportError as e:  # the oracle is optional: ctest reports a skip
    print(f"w4a16_gguf: skipped, {e} (pip install -r tests/requirements.txt)")
    sys.exit(77)

HELPER = sys.argv[1]
passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", msg, file=sys.stderr)


def weights(n, k, seed):
    """Rows of very different magnitude (f16-subnormal scales included), a
    constant row (Q4_1 d = 0) and a row with a single large outlier."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)).astype(np.float32)
    mags = np.array([1.0, 1e-2, 1e-5, 3e2, 0.05, 1e-3, 7.0, 2e-4], dtype=np.float32)
    w *= mags[np.arange(n) % len(mags)][:, None]
    w[1, :] = np.float32(0.37)
    w[2, 5] = np.float32(40.0)
    w += np.float32(0.01) * (np.arange(n, dtype=np.float32)[:, None] % 3)
    return w


def run(layout, n, k, blob, tmp):
    src, dst = os.path.join(tmp, "blocks.bin"), os.path.join(tmp, "out.f32")
    with open(src, "wb") as f:
        f.write(blob)
    if os.path.exists(dst):
        os.remove(dst)
    r = subprocess.run([HELPER, layout, str(n), str(k), src, dst], capture_output=True, text=True)
    out = np.fromfile(dst, dtype=np.float32) if r.returncode == 0 else None
    return r, out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for qt, layout, bs in ((QT.Q4_0, "gguf.q4_0", 18), (QT.Q4_1, "gguf.q4_1", 20)):
            for n, k in ((8, 32), (16, 256), (24, 96), (64, 1024)):
                w = weights(n, k, seed=n * 1000 + k + bs)
                blocks = quants.quantize(w, qt)
                check(blocks.dtype == np.uint8 and blocks.shape == (n, k // 32 * bs), f"{layout} block shape {blocks.shape}")
                want = quants.dequantize(blocks, qt).astype(np.float32).reshape(n, k)
                r, got = run(layout, n, k, blocks.tobytes(), tmp)
                check(r.returncode == 0, f"{layout} {n}x{k}: helper rc {r.returncode}: {r.stdout}{r.stderr}")
                if got is None:
                    continue
                got = got.reshape(n, k)
                diff = np.count_nonzero(got.view(np.uint32) != want.view(np.uint32))
                check(diff == 0, f"{layout} {n}x{k}: {diff} of {n * k} values differ bitwise")
                check(np.any(got != 0), f"{layout} {n}x{k}: all zeros")
            # hostile input: a truncated tensor and one of the other layout are refused, never read past
            n, k = 16, 256
            blocks = quants.quantize(weights(n, k, 5), qt).tobytes()
            r, _ = run(layout, n, k, blocks[:-1], tmp)
            check(r.returncode == 2 and "refused: shape" in r.stdout, f"{layout} truncated: rc {r.returncode} {r.stdout}{r.stderr}")
            other = "gguf.q4_1" if layout == "gguf.q4_0" else "gguf.q4_0"
            r, _ = run(other, n, k, blocks, tmp)
            check(r.returncode == 2 and "refused:" in r.stdout, f"{layout} bytes as {other}: rc {r.returncode} {r.stdout}")
    print(f"w4a16_gguf: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
