#!/usr/bin/env python3
"""fp8_codec_oracle.py - checks qc_fp8_codec.h code by code against ml_dtypes (E4M3fn and E5M2).

Usage: fp8_codec_oracle.py <path to fp8_codec_dump>

ml_dtypes rounds to nearest even but does not saturate (E4M3fn overflows to
NaN, E5M2 to inf), so the expected code of a probe x is ml_dtypes' cast of
np.clip(x, -max, max): the saturation documented in docs/formats/fp8.md.
"Saturated" is expected exactly where the unclipped cast overflows.
NaN inputs must give the canonical code 0x7F.
"""
import subprocess
import sys

try:
    import ml_dtypes
    import numpy as np
except ImportError as e:  # ctest reports exit 77 as a skip
    print(f"fp8_codec_oracle: skipped, {e}")
    sys.exit(77)

FORMATS = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 448.0),
    "e5m2": (ml_dtypes.float8_e5m2, 57344.0),
}

passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        if failed <= 40:
            print("FAIL", msg, file=sys.stderr)


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    dec = {name: {} for name in FORMATS}
    enc = {name: [] for name in FORMATS}
    plain_vs_flagged = None
    for line in out.splitlines():
        p = line.split()
        if p[0] == "D":
            dec[p[1]][int(p[2], 16)] = int(p[3], 16)
        elif p[0] == "E":
            enc[p[1]].append((int(p[2], 16), int(p[3], 16), int(p[4])))
        elif p[0] == "X":
            plain_vs_flagged = int(p[2])
    check(plain_vs_flagged == 0, f"encode() and encode_sat() disagree {plain_vs_flagged} times")

    for name, (dt, fmax) in FORMATS.items():
        # decode: all 256 codes, bit for bit (NaN: both NaN)
        check(len(dec[name]) == 256, f"{name}: {len(dec[name])} codes decoded, want 256")
        codes = np.arange(256, dtype=np.uint8)
        want = codes.view(dt).astype(np.float32)
        got = f32([dec[name][c] for c in range(256)])
        for c in range(256):
            w, g = want[c], got[c]
            if np.isnan(w):
                check(np.isnan(g), f"{name} decode {c:#04x}: got {g}, want NaN")
            else:
                check(w.view(np.uint32) == g.view(np.uint32), f"{name} decode {c:#04x}: got {g!r}, want {w!r}")

        # round trip: every non-NaN code encodes back to itself (the
        # infinities of E5M2 saturate, so they come back as the max code)
        back = {}
        for xb, code, _ in enc[name]:
            back.setdefault(xb, code)
        for c in range(256):
            g = got[c]
            if np.isnan(g):
                continue
            want_c = c
            if np.isinf(g):
                want_c = (c & 0x80) | (0x7B if name == "e5m2" else 0x7E)
            xb = int(g.view(np.uint32))
            check(back.get(xb) == want_c, f"{name} round trip {c:#04x} -> {g!r} -> {back.get(xb)}")

        # encode: probes (ties, subnormals, overflow, NaN, random)
        xb = np.array([e[0] for e in enc[name]], dtype=np.uint32)
        code = np.array([e[1] for e in enc[name]], dtype=np.uint8)
        sat = np.array([e[2] for e in enc[name]], dtype=np.int64)
        x = xb.view(np.float32)
        with np.errstate(all="ignore"):
            clipped = np.clip(x, np.float32(-fmax), np.float32(fmax)).astype(dt)
            raw = x.astype(dt).astype(np.float32)
        want_code = clipped.view(np.uint8)
        want_sat = ~np.isnan(x) & (np.isnan(raw) | np.isinf(raw) | (np.abs(raw) > fmax))
        for i in range(len(x)):
            if np.isnan(x[i]):
                check(code[i] == 0x7F and sat[i] == 0, f"{name} encode NaN {xb[i]:#010x}: got {code[i]:#04x}")
                continue
            check(code[i] == want_code[i],
                  f"{name} encode {x[i]!r} ({xb[i]:#010x}): got {code[i]:#04x}, want {want_code[i]:#04x}")
            check(sat[i] == int(want_sat[i]),
                  f"{name} saturated flag of {x[i]!r}: got {sat[i]}, want {int(want_sat[i])}")
        print(f"{name}: {len(x)} probes, {int(want_sat.sum())} saturating")

    print(f"fp8_codec_oracle: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
