#!/bin/bash
# device_run.sh - on the H200: every gpu test, qcore bench and gemm-bench with the PyTorch anchors, in one go.
# Usage (device call, after bench/device_pack.sh here): bash bench/device_run.sh [what...]
#   what: tests bench gemm anchors (default: all); TESTS="test_gpu_x ..." limits the tests;
#   BENCH_CONFIGS (llama-3-8b qwen3-0.6b), BENCH_FORMATS (bf16) and BENCH_ARGS pick the bench runs;
#   TEST_TIMEOUT / BENCH_TIMEOUT bound each (300 / 400 s).  Writes under $OUT (at most 8 files come back):
#   tests.txt, bench.txt, bench-*.json, gemm.json, anchors.json; prints a short summary last.
set -uo pipefail
[ -f "${QCORE_DEVICE_DIR:-.device}/pack.tar.xz" ] && [ ! -d "${QCORE_DEVICE_DIR:-.device}/bin" ] &&
  tar -C "${QCORE_DEVICE_DIR:-.device}" -xJf "${QCORE_DEVICE_DIR:-.device}/pack.tar.xz"
D=${QCORE_DEVICE_DIR:-.device}/bin
# the tests look for plugins where the build tree had them: point that path here
if [ -f "$D/plugin_dir.txt" ] && [ ! -e "$(cat "$D/plugin_dir.txt")" ]; then
  mkdir -p "$(dirname "$(cat "$D/plugin_dir.txt")")" && ln -sfn "$PWD/$D/plugins" "$(cat "$D/plugin_dir.txt")"
fi
OUT=${OUT:-/tmp/qcore-out}
mkdir -p "$OUT"
export QCORE_CACHE_DIR=/tmp/qcore-kcache
what=${*:-tests bench gemm anchors}
has() { case " $what " in *" $1 "*) return 0 ;; esac; return 1; }
summary=()
if has tests; then
  : >"$OUT/tests.txt"
  for t in "$D"/test_gpu_*; do
    n=$(basename "$t")
    [ "$n" = test_gpu_unit ] && continue   # compile-only, runs in CI
    if [ -n "${TESTS:-}" ]; then case " $TESTS " in *" $n "*) ;; *) continue ;; esac; fi
    s=$(date +%s)
    env QC_HF_ORACLE_DIR="${QCORE_DEVICE_DIR:-.device}/hf-oracle/tiny" timeout "${TEST_TIMEOUT:-300}" "$t" >>"$OUT/tests.txt" 2>&1
    rc=$?
    summary+=("$(printf '%-26s rc=%d %4ds' "$n" $rc $(( $(date +%s) - s )))")
  done
fi
if has bench; then
  : >"$OUT/bench.txt"
  for cfg in ${BENCH_CONFIGS:-llama-3-8b qwen3-0.6b}; do
    for fmt in ${BENCH_FORMATS:-bf16}; do
      timeout "${BENCH_TIMEOUT:-400}" "$D/qcore" bench --model-config configs/$cfg.json --format "$fmt" ${BENCH_ARGS:-} \
        --json "$OUT/bench-$cfg-${fmt//:/_}.json" >>"$OUT/bench.txt" 2>&1
      summary+=("bench $cfg $fmt rc=$?")
    done
  done
fi
if has gemm; then
  timeout 400 "$D/qcore" gemm-bench --json "$OUT/gemm.json" >"$OUT/gemm.txt" 2>&1
  summary+=("gemm-bench rc=$?")
fi
if has anchors; then
  timeout 300 python3 bench/anchors_linear.py >"$OUT/anchors.json" 2>"$OUT/anchors.txt"
  summary+=("anchors rc=$?")
fi
echo "== failures and timings"
grep -hE "FAIL|WRONG|error|TIME|fraction|tok/s|conc |^ +[0-9]+ +[0-9]+ " "$OUT"/*.txt 2>/dev/null | head -150
echo "== summary"
printf '%s\n' "${summary[@]}"
