#!/usr/bin/env python3
"""ab_table.py - one table of gemm-bench times from several runs of the same rows (A/B builds), each run's time over the first's.

usage: python3 bench/ab_table.py NAME=gemm.json NAME=gemm.json ...  [--anchors anchors.json]
With --anchors (bench/anchors_linear.py's output of the same call), each row also gets the anchor time the format
is compared with (torch_fp8_rowwise_us: torch._scaled_mm for fp8, torch_int8_us: torch._int_mm for w8a8_int8, torch.matmul bf16 otherwise) and the ratio
anchor / best run (above 1: qcore faster)."""
import json
import sys


def rows_of(path):
    with open(path) as f:
        d = json.load(f)
    return {(r["kernel"], r["shape"], r["m"]): r for r in d["rows"] if r.get("status") == "ok"}


def anchor_times(path):
    """(anchor name, n, k, m) -> us from anchors_linear.py's JSON, whatever its nesting"""
    with open(path) as f:
        d = json.load(f)
    out = {}
    for r in d.get("rows", []):
        for key, val in r.items():
            if key.endswith("_us") and isinstance(val, (int, float)):
                out[(key[:-3], r.get("n"), r.get("k"), r.get("m"))] = val
    return out


def main(argv):
    anchors = None
    runs = []
    i = 0
    while i < len(argv):
        if argv[i] == "--anchors":
            anchors = anchor_times(argv[i + 1])
            i += 2
            continue
        name, _, path = argv[i].partition("=")
        runs.append((name, rows_of(path)))
        i += 1
    if not runs:
        sys.exit(__doc__)
    keys = sorted(set().union(*[set(r) for _, r in runs]), key=lambda k: (k[0], k[1], k[2]))
    head = "| kernel | shape | M | " + " | ".join(n for n, _ in runs) + (" | anchor | anchor / best |" if anchors else " |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for key in keys:
        base = runs[0][1].get(key)
        cells, best = [], None
        for _, r in runs:
            row = r.get(key)
            if not row:
                cells.append("-")
                continue
            t = row["time_us"]
            best = t if best is None or t < best else best
            rel = f" ({t / base['time_us']:.3f})" if base and row is not base else ""
            cells.append(f"{t:.1f}{rel}")
        line = f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells)
        if anchors:
            row = base or next(r[key] for _, r in runs if key in r)
            fmt = row["format"]
            name = "torch_fp8_rowwise" if fmt.startswith("fp8") else "torch_int8" if fmt == "w8a8_int8" else "torch_bf16"
            a = anchors.get((name, row["n"], row["k"], row["m"]))
            line += f" | {a:.1f} | {a / best:.3f}" if a else " | - | -"
        print(line + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
