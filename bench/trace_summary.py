#!/usr/bin/env python3
"""trace_summary.py - where a QCORE_TRACE run's GPU time went: kernel time summed per kernel (and per
layer role for linears), with counts and shares, from the Chrome trace JSON that QCORE_TRACE writes.

usage: python3 bench/trace_summary.py TRACE.json [--top 25] [--min-m M]
  --min-m M  count only launches whose M (rows) is at least M: with a prefill-only view (M = prompt
             length) the decode steps of the same run drop out.
Prints one table: kernel, layer role, launches, total ms, share of the summed kernel time, mean us.
"""
import argparse
import collections
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--top", type=int, default=25)
ap.add_argument("--min-m", type=int, default=0)
a = ap.parse_args()
try:
    d = json.load(open(a.trace))
except (OSError, ValueError) as e:
    sys.exit(f"trace_summary: {a.trace}: {e}")
evs = [e for e in d.get("traceEvents", []) if e.get("ph") == "X"]
if not evs:
    sys.exit(f"trace_summary: {a.trace}: no complete events")
by = collections.defaultdict(lambda: [0, 0.0])
total = 0.0
for e in evs:
    args = e.get("args", {})
    if args.get("M", 0) < a.min_m and args.get("N", 0):  # linears carry M; other kernels (N = 0) always count
        continue
    role = re.sub(r"^blk\.\d+\.?", "", args.get("layer", "")) or "-"
    key = (args.get("kernel") or e.get("name", "?"), role)
    by[key][0] += 1
    by[key][1] += e.get("dur", 0.0)
    total += e.get("dur", 0.0)
span = max(e["ts"] + e.get("dur", 0) for e in evs) - min(e["ts"] for e in evs)
print(f"{a.trace}: {len(evs)} events, kernel time {total / 1e3:.2f} ms summed, span {span / 1e3:.2f} ms"
      + (f", launches with M >= {a.min_m} (and all non-linear kernels)" if a.min_m else ""))
print(f"{'kernel':34} {'layer':14} {'launches':>8} {'total ms':>9} {'share':>6} {'mean us':>8}")
for (k, role), (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top]:
    print(f"{k[:34]:34} {role[:14]:14} {n:8d} {us / 1e3:9.2f} {100 * us / total:5.1f}% {us / n:8.1f}")
