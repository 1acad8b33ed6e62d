#!/usr/bin/env bash
# ncu_kernels.sh - Nsight Compute on chosen launches of qcore's kernels (GPU machine): one text report per spec.
#
# usage: OUT=dir bash bench/ncu_kernels.sh BIN "name|kernel-regex|launches-to-skip|qcore args" ...
# Each spec runs `ncu --set full` (clocks not locked, caches flushed between passes) on one launch of the kernel whose
# name matches the regex, after skipping that many matching launches, of `BIN/qcore <args>`; the report (the
# sections, no per-instruction source) goes to $OUT/ncu-<name>.txt.  Timing under ncu is slower than in the
# benches; read it for where the time goes (stall reasons, bank conflicts, issue slots), not for speed.
set -u
BIN=$1
shift
OUT=${OUT:-/tmp/qcore-out}
NCU=${NCU:-/usr/local/cuda/bin/ncu}
mkdir -p "$OUT"
for spec in "$@"; do
  IFS='|' read -r name re skip args <<<"$spec"
  # shellcheck disable=SC2086
  timeout "${NCU_T:-120}" "$NCU" --clock-control none --cache-control all -k "regex:$re" --launch-skip "$skip" \
    --launch-count 1 --set full "$BIN/qcore" $args >"$OUT/ncu-$name.txt" 2>&1
  echo "ncu $name: rc=$? $(grep -m1 -E 'Duration' "$OUT/ncu-$name.txt" | tr -s ' ')"
done
