#!/usr/bin/env python3
"""seed002_table.py - seed 002's table from `qcore bench --json` files: per model and format, resident
weights, KV capacity (tokens that fit in the budget), median decode step at C=1 and its share of the
weight-bytes floor, and output tok/s at each concurrency.

usage: python3 bench/seed002_table.py BENCH.json... > table.md
Each file is one `qcore bench --json` run (one model, one format, one KV format).
"""
import json
import sys

rows = []
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        sys.exit(f"seed002_table: {path}: {e}")
    if "levels" not in d:  # a manifest or another tool's JSON next to the bench files
        print(f"seed002_table: {path}: not a qcore bench result, skipped", file=sys.stderr)
        continue
    lv = {l["concurrency"]: l for l in d["levels"]}
    c1 = lv.get(1, {})
    step = c1.get("decode_step_ms", -1)
    fmt = d.get("format") or "?"
    if d.get("policy"):
        fmt = "policy " + d["policy"].rsplit("/", 1)[-1]
    if d.get("kv_format", "bf16") != "bf16":
        fmt += " + " + d["kv_format"]
    rows.append((d.get("model", "?").rsplit("/", 1)[-1].replace(".json", ""), fmt, d.get("weight_bytes", 0) / 2**30,
                 d.get("kv_bytes_per_token", 0), d.get("kv_budget_tokens", 0), step,
                 100 * d["decode_floor_ms"] / step if step and step > 0 and d.get("decode_floor_ms") else 0,
                 " / ".join(f"{lv[c]['output_tok_s']:.0f}" for c in sorted(lv)), "/".join(str(c) for c in sorted(lv))))
print("| model | format | weights GiB | KV bytes/token | KV capacity (tokens) | decode p50 C=1 | % of floor "
      "| output tok/s (C) |")
print("|---|---|---|---|---|---|---|---|")
for m, f, w, kvb, cap, step, pct, toks, cs in rows:
    print(f"| {m} | {f} | {w:.2f} | {kvb} | {cap:,} | {step:.2f} ms | {pct:.1f}% | {toks} ({cs}) |")
