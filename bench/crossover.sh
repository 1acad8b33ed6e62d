#!/usr/bin/env bash
# crossover.sh - the data of docs/crossover.md on the GPU machine: where fp8 overtakes w4a16 per Llama-3-8B linear,
# beside seed 000's B* = ridge * bytes_per_weight / 2, and decode throughput of the policies against fixed formats.
#
# usage (repository root, on the GPU machine, from a prebuilt build folder):
#   OUT=/some/dir bash bench/crossover.sh [BUILD_DIR]
# Environment: OUT (default bench/results/<date>-crossover), CONFIG (default configs/llama-3-8b.json),
# CONC (default 1,2,4,...,256), PROMPT (32), OUTPUT (32), PARTS (default "a b c": which parts to run),
# BENCH_ARGS (more `qcore bench` options, e.g. --kv-gib 20), GEMM_M and GEMM_ARGS (part a's M list and more
# gemm-bench options; for trying the script, not for the measurement).
# Parts:
#   a  qcore gemm-bench for w4a16, fp8 and bf16 over M = 1..256 on the four Llama-3-8B shapes (+ bf16 at
#      M = 4096, 8192 for the measured bf16 peak): per shape the smallest M at which fp8 is faster than w4a16,
#      beside B* from the measured ridge (bf16 peak reached / copy bandwidth) and from the spec peak.
#   b  qcore bench --concurrency 1..256 --output 32 with --policy policies/roofline.lua, policies/measured.lua,
#      --format w4a16, --format fp8: one table of decode tok/s per batch, each policy against the better fixed
#      format (flagged when more than 3% below it).
#   c  qcore inspect --policy policies/measured.lua: the engine's own load-time timings (activation quantization
#      included, CUDA events) and the crossover they give, for comparison with part a.
# Writes $OUT/gemm.json, gemm.txt, crossover.md (part a), bench-*.json/txt, throughput.md (part b), inspect.txt,
# engine-crossover.md (part c).  Exit status 1 when a command failed.
set -u
BUILD=${1:-build}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-crossover}
CONFIG=${CONFIG:-configs/llama-3-8b.json}
CONC=${CONC:-1,2,4,8,16,32,64,128,256}
PROMPT=${PROMPT:-32}
OUTPUT=${OUTPUT:-32}
PARTS=${PARTS:-a b c}
QCORE=$BUILD/qcore
mkdir -p "$OUT"
rc=0
# bytes per weight of w4a16 as the runtime registers it (effective bits / 8, scales included)
W4_BPW=$("$QCORE" formats 2>/dev/null | awk '$1 == "w4a16" {print $4 / 8}')
W4_BPW=${W4_BPW:-0.515625}

if [[ " $PARTS " == *" a "* ]]; then
  echo "== part a: qcore gemm-bench (w4a16, fp8, bf16; M 1..256; bf16 also at 4096, 8192)"
  "$QCORE" gemm-bench --formats w4a16,fp8,bf16 --m "${GEMM_M:-1,2,4,8,16,32,64,128,256,4096,8192}" ${GEMM_ARGS:-} \
    --json "$OUT/gemm.json" \
    >"$OUT/gemm.txt" 2>&1 || { rc=1; echo "gemm-bench failed (exit $?), see $OUT/gemm.txt"; tail -5 "$OUT/gemm.txt"; }
  python3 - "$OUT/gemm.json" "$W4_BPW" <<'PY' | tee "$OUT/crossover.md"
import json, sys
d = json.load(open(sys.argv[1]))
bpw = float(sys.argv[2])
rows = [r for r in d["rows"] if r.get("status") not in ("WRONG", "error", "refused") and r.get("time_us")]
names = {(6144, 4096): "qkv", (4096, 4096): "o", (28672, 4096): "gate_up", (4096, 14336): "down"}
# fastest kernel per (format, shape, M): what a per-bucket choice would run
best = {}
for r in rows:
    key = (r["format"], r["n"], r["k"], r["m"])
    if key not in best or r["time_us"] < best[key]["time_us"]:
        best[key] = r
bw = d["copy_bandwidth_Bps"]
peak_meas = max([r["tflops"] for r in rows if r["format"] == "bf16"] or [0])
peak_spec = d.get("peak_tflops_16bit", 989)
ridge_meas = peak_meas * 1e12 / bw if bw else 0
ridge_spec = peak_spec * 1e12 / bw if bw else 0
print(f"device: {d['device']} (sm_{d['sm']}), copy bandwidth {bw / 1e9:.0f} GB/s")
print(f"bf16 peak reached by qcore's bf16 kernels: {peak_meas:.0f} TFLOP/s -> ridge {ridge_meas:.1f} FLOP/B; "
      f"spec {peak_spec:.0f} TFLOP/s -> ridge {ridge_spec:.1f} FLOP/B")
print(f"w4a16 bytes per weight (scales included): {bpw:.4f}")
bs_meas, bs_spec = ridge_meas * bpw / 2, ridge_spec * bpw / 2
print(f"seed 000: B* = ridge * bytes_per_weight / 2 = {bs_meas:.1f} (measured ridge), {bs_spec:.1f} (spec ridge)")
print()
print("| layer | N x K | fp8 faster than w4a16 from M = | B* (measured ridge) | B* (spec ridge) | "
      "w4a16 / fp8 us at M = 1, 16, 64, 256 |")
print("|---|---|---|---|---|---|")
ms = sorted({r["m"] for r in rows if r["m"] <= 256})
for (n, k), name in names.items():
    cross = None
    for m in ms:
        w, f = best.get(("w4a16", n, k, m)), best.get(("fp8", n, k, m))
        if w and f and f["time_us"] < w["time_us"]:
            cross = m
            break
    pairs = []
    for m in (1, 16, 64, 256):
        w, f = best.get(("w4a16", n, k, m)), best.get(("fp8", n, k, m))
        pairs.append(f"{w['time_us']:.1f}/{f['time_us']:.1f}" if w and f else "-")
    cross_s = str(cross) if cross else "not within 1..256"
    print(f"| {name} | {n} x {k} | {cross_s} | {bs_meas:.1f} | {bs_spec:.1f} | {', '.join(pairs)} |")
print()
print("(fastest checked kernel per format and M, as gemm-bench times them: the GEMM alone, fp8's activation "
      "quantization not included; part c has the engine's own times, quantization included)")
PY
fi

if [[ " $PARTS " == *" b "* ]]; then
  echo "== part b: qcore bench --concurrency $CONC --prompt $PROMPT --output $OUTPUT"
  names=()
  for v in "policy:policies/roofline.lua" "policy:policies/measured.lua" "format:w4a16" "format:fp8"; do
    kind=${v%%:*}
    arg=${v#*:}
    name=$(basename "$arg" .lua)
    names+=("$name")
    echo "-- $name"
    "$QCORE" bench --model-config "$CONFIG" --"$kind" "$arg" --concurrency "$CONC" --prompt "$PROMPT" \
      --output "$OUTPUT" --json "$OUT/bench-$name.json" ${BENCH_ARGS:-} >"$OUT/bench-$name.txt" 2>&1 ||
      { rc=1; echo "bench $name failed, see $OUT/bench-$name.txt"; tail -5 "$OUT/bench-$name.txt"; }
  done
  python3 - "$OUT" "${names[@]}" <<'PY' | tee "$OUT/throughput.md"
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
runs = {}
for n in names:
    try:
        runs[n] = {l["concurrency"]: l for l in json.load(open(os.path.join(out, f"bench-{n}.json")))["levels"]}
    except Exception as e:
        print(f"({n}: {e})")
def dec(n, c):  # decode tok/s: one token per running sequence per pure decode step
    l = runs.get(n, {}).get(c)
    if not l or l["decode_step_ms"] <= 0:
        return None
    return c / (l["decode_step_ms"] / 1e3)
concs = sorted({c for r in runs.values() for c in r})
fixed = [n for n in names if n in ("w4a16", "fp8")]
pols = [n for n in names if n not in fixed]
print("| batch | " + " | ".join(names) + " | " + " | ".join(f"{p} / best fixed" for p in pols) + " |")
print("|---" * (1 + len(names) + len(pols)) + "|")
bad = 0
for c in concs:
    vals = {n: dec(n, c) for n in names}
    cells = [f"{vals[n]:.0f}" if vals[n] else "-" for n in names]
    bf = max([vals[n] for n in fixed if vals[n]] or [0])
    ratios = []
    for p in pols:
        if vals[p] and bf:
            r = vals[p] / bf
            bad += r < 0.97
            ratios.append(f"{100 * r:.1f}%{' (below 97%)' if r < 0.97 else ''}")
        else:
            ratios.append("-")
    print(f"| {c} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
print()
print("decode tok/s = batch / median pure-decode step time (CUDA graphs unless BENCH_ARGS turned them off); "
      f"{bad} policy cell(s) more than 3% below the better fixed format")
PY
fi

if [[ " $PARTS " == *" c "* ]]; then
  echo "== part c: qcore inspect --policy policies/measured.lua --model-config $CONFIG (engine timings)"
  "$QCORE" inspect --policy policies/measured.lua --model-config "$CONFIG" >"$OUT/inspect.txt" 2>&1 ||
    { rc=1; echo "inspect failed, see $OUT/inspect.txt"; tail -5 "$OUT/inspect.txt"; }
  python3 - "$OUT/inspect.txt" <<'PY' | tee "$OUT/engine-crossover.md"
import re, sys
text = open(sys.argv[1]).read().splitlines()
print("engine load-time timings (us, activation quantization included): first M where fp8 < w4a16")
shape, ms, t = None, [], {}
res = []
for line in text + [""]:
    m = re.match(r"\s+(\S+) \[(\d+) x (\d+)\]$", line)
    if m or (shape and not line.startswith("    ")):
        if shape and "w4a16" in t and "fp8" in t:
            cross = next((ms[i] for i in range(len(ms)) if t["fp8"][i] is not None and t["w4a16"][i] is not None
                          and t["fp8"][i] < t["w4a16"][i]), None)
            res.append((shape, cross))
        shape, t = (m.group(1), m.group(2), m.group(3)) if m else None, {}
        continue
    if shape and line.strip().startswith("M "):
        ms = [int(x) for x in line.split()[1:]]
    elif shape and line.startswith("    "):
        parts = line.split()
        t[parts[0]] = [None if x == "-" else float(x) for x in parts[1:]]
for (name, n, k), cross in res:
    print(f"  {name} [{n} x {k}]: {cross if cross else 'fp8 never faster in 1..max bucket'}")
dev = [l for l in text if l.startswith("policy device:")]
if dev:
    print(dev[0])
PY
fi
exit $rc
