#!/usr/bin/env bash
# h200_full.sh - the measurements behind docs/perf.md and docs/crossover.md in two device calls (each under 10 min).
#
# usage (on the GPU machine, repository root, after `bash bench/device_pack.sh build` here and carrying .device):
#   bash bench/h200_full.sh kernels   # GPU tests with their timings, gemm-bench beside the anchors, SDPA anchors
#   bash bench/h200_full.sh model     # crossover (gemm part + policies vs fixed formats), seed 002's table, prefill
#   bash bench/h200_full.sh prefill   # a traced 2048-token prefill per format and where its time goes
#   DECODE="mxfp4 mxfp4@QC_MXF_PS=off" bash bench/h200_full.sh decode   # batch-1 decode A/B, one traced
#   bash bench/h200_full.sh pending                    # what earlier sessions left unmeasured (the crossover)
#   bash bench/h200_full.sh attn                       # issue 8: SDPA x3, kv_fp8 and bf16 decode timings
#   NCU_SPECS="name|regex|skip|qcore args" bash bench/h200_full.sh profile   # ncu reports
#   AB_FORMATS=fp8 AB_KERNELS=k1,k2 AB_VARIANTS="name|VAR=v" bash bench/h200_full.sh ab   # A/B builds + anchors
#   TESTS="t1 t2@VAR=v" bash bench/h200_full.sh tests   # named GPU tests (+ crossover parts in CROSS_PARTS)
# Writes everything under $OUT and packs each part's files into one tar ($OUT/<part>.tar.xz: a device call brings
# back at most 8 files), then prints a short summary.  Environment: TESTS (kernels part), BIN (.device/bin).
set -u
part=${1:-kernels}
OUT=${OUT:-/tmp/qcore-out}
HERE=$(cd "$(dirname "$0")" && pwd)
DEV=${QCORE_DEVICE_DIR:-.device}
[ -f "$DEV/pack.tar.xz" ] && [ ! -d "$DEV/bin" ] && tar -C "$DEV" -xJf "$DEV/pack.tar.xz"
BIN=${BIN:-$DEV/bin}
if [ -f "$BIN/plugin_dir.txt" ] && [ ! -e "$(cat "$BIN/plugin_dir.txt")" ]; then
  mkdir -p "$(dirname "$(cat "$BIN/plugin_dir.txt")")" && ln -sfn "$PWD/$BIN/plugins" "$(cat "$BIN/plugin_dir.txt")"
fi
export QCORE_CACHE_DIR=${QCORE_CACHE_DIR:-/tmp/qcore-kcache}
W=$OUT/$part
mkdir -p "$W"
sum=()
step() { # name timeout command...: run, log, remember the status
  local name=$1 t=$2 s
  shift 2
  s=$(date +%s)
  timeout "$t" "$@" >"$W/$name.txt" 2>&1
  sum+=("$(printf '%-28s rc=%-3d %4ds' "$name" $? $(($(date +%s) - s)))")
}
case $part in
kernels)
  for t in ${TESTS:-test_gpu_fp8 test_gpu_w4a16_reg test_gpu_w4a16_wgmma test_gpu_kv_fp8}; do
    [ -x "$BIN/$t" ] && step "$t" 130 "$BIN/$t"
  done
  step gemm 200 env OUT="$W/gemm" M=1,4,16,64,1024,4096 bash "$HERE/gemm_bench.sh" "$BIN" --iters 10 \
    --formats bf16,fp8,fp8:block,w8a8_int8,w4a16,mxfp4 --kernels \
    bf16.linear_wgmma,bf16.linear_gemv_bx,fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma,fp8.gemv_channel,w8a8_int8.linear_wgmma,w8a8_int8.gemv,w4a16.wgmma_sym,w4a16.gemv_sym,w4a16.gemv_reg_sym,w4a16.gemv_reg_fmin,w4a16.gemv_fmin,mxfp4.gemv,mxfp4.linear_mma
  step anchors_attn 60 python3 "$HERE/anchors_attn.py"
  for t in ${TESTS2:-test_gpu_policy}; do
    [ -x "$BIN/$t" ] && step "$t" 90 "$BIN/$t"
  done
  ;;
model)
  L=configs/llama-3-8b.json Q=configs/qwen3-0.6b.json
  for t in ${TESTS:-test_gpu_engine test_gpu_policy}; do
    [ -x "$BIN/$t" ] && step "$t" 60 "$BIN/$t"
  done
  for f in bf16 w4a16 fp8 w8a8_int8 mxfp4; do
    step "llama-$f" 60 "$BIN/qcore" bench --model-config $L --format $f --concurrency 1,16,64 --output 32 \
      --json "$W/llama-$f.json"
  done
  step llama-bf16-kv_fp8 60 "$BIN/qcore" bench --model-config $L --format bf16 --kv kv_fp8 --concurrency 1,16,64 \
    --output 32 --json "$W/llama-bf16-kv_fp8.json"
  for f in $([ "${PREFILL:-1}" = 1 ] && echo bf16 fp8); do
    step "prefill-$f" 60 "$BIN/qcore" bench --model-config $L --format $f --prompt 2048 --output 2 --concurrency 1,4 \
      --json "$W/prefill-$f.json"
  done
  for f in bf16 w4a16 fp8 w8a8_int8 mxfp4; do
    step "qwen-$f" 40 "$BIN/qcore" bench --model-config $Q --format $f --concurrency 1,16,64 --output 32 \
      --json "$W/qwen-$f.json"
  done
  [ "${CROSS_PARTS:-b}" != none ] && step crossover ${CROSS_T:-200} env OUT="$W/crossover" PARTS="${CROSS_PARTS:-b}" \
    CONC=${CONC:-1,16,64,256} bash "$HERE/crossover.sh" "$BIN"
  step seed002 20 python3 "$HERE/seed002_table.py" "$W"/llama-*.json "$W"/qwen-*.json
  ;;
tests)
  # GPU tests by name, each optionally with environment settings after '@' (comma-separated), e.g.
  # TESTS="test_gpu_kv_fp8 test_gpu_w4a16_frag@QC_W4F_KS=4,QC_W4F_R=2" (values cannot hold commas); then the
  # crossover's part b
  for spec in ${TESTS:-test_gpu_kv_fp8}; do
    t=${spec%%@*} envs=""
    [ "$t" != "$spec" ] && envs=${spec#*@}
    name=$t${envs:+-$(echo "$envs" | tr ',=' '__')}
    [ -x "$BIN/$t" ] && step "$name" ${TEST_T:-150} env ${envs//,/ } "$BIN/$t"
  done
  [ -n "${CROSS_PARTS:-}" ] && step crossover ${CROSS_T:-200} env OUT="$W/crossover" PARTS="$CROSS_PARTS" \
    CONC=${CONC:-1,16,64,256} bash "$HERE/crossover.sh" "$BIN"
  ;;
pending)
  # what earlier sessions left unmeasured: the policies' crossover after the fused activation quantizers changed
  # the W8A8 side (docs/crossover.md)
  step crossover ${CROSS_T:-200} env OUT="$W/crossover" PARTS="${CROSS_PARTS:-b}" CONC=${CONC:-1,16,64,256} \
    bash "$HERE/crossover.sh" "$BIN"
  tail -30 "$W/crossover.txt"
  ;;
attn)
  # issue 8's two speed targets with the registered kernels: torch SDPA three times, kv_fp8's timed decode cases
  # (each checked on sampled rows) and the core's bf16 decode, all in one call
  for i in 1 2 3; do step anchors_attn-$i 60 python3 "$HERE/anchors_attn.py"; done
  step kv_fp8 150 env QC_KV_TIMING_ONLY=1 "$BIN/test_gpu_kv_fp8"
  step attn 150 "$BIN/test_gpu_attn"
  grep -hE "SUMMARY|passed|torch_sdpa|TIME.*decode" "$W"/*.txt | head -60
  ;;
ab)
  # A/B builds of linear kernels in one call: gemm-bench with the PyTorch anchors for the registered kernels, then
  # gemm-bench again per variant (AB_VARIANTS: "name|VAR=value VAR2=value" lines, e.g. QC_FP8_WGMMA_OPTS=...),
  # and one table of every run's times (bench/ab_table.py).  AB_FORMATS, AB_KERNELS, AB_M select the rows.
  step base 300 env OUT="$W/base" M="${AB_M:-1024,4096}" bash "$HERE/gemm_bench.sh" "$BIN" --iters 10 \
    --formats "${AB_FORMATS:?}" --kernels "${AB_KERNELS:?}"
  runs=("base=$W/base/gemm.json")
  while IFS='|' read -r name envs; do
    [ -z "$name" ] && continue
    # shellcheck disable=SC2086
    step "ab-$name" 200 env $envs "$BIN/qcore" gemm-bench --m "${AB_M:-1024,4096}" --iters 10 \
      --formats "$AB_FORMATS" --kernels "$AB_KERNELS" --json "$W/ab-$name.json"
    runs+=("$name=$W/ab-$name.json")
  done <<<"${AB_VARIANTS:-}"
  python3 "$HERE/ab_table.py" "${runs[@]}" --anchors "$W/base/anchors.json" | tee "$W/ab.md"
  grep -h "WRONG\|rows timed" "$W"/*.txt | head -20 # base.txt holds gemm_bench.sh's output, gemm.txt's too
  ;;
profile)
  # Nsight Compute on chosen launches: NCU_SPECS holds ncu_kernels.sh's specs, one per line
  mapfile -t specs <<<"${NCU_SPECS:?NCU_SPECS: name|kernel-regex|skip|qcore args, one per line}"
  # (their one-line results in ncu-summary.txt: summary.txt is written last, with the steps' statuses)
  OUT="$W" bash "$HERE/ncu_kernels.sh" "$BIN" "${specs[@]}" | tee "$W/ncu-summary.txt"
  ;;
decode)
  # batch-1 decode of Llama-3-8B per format, each optionally with environment settings after '@' (A/B runs of a
  # kernel switch), e.g. DECODE="mxfp4 mxfp4@QC_MXF_PS=off"; then a traced run of the first one, per kernel
  L=configs/llama-3-8b.json
  for spec in ${DECODE:-w4a16}; do
    f=${spec%%@*} envs=""
    [ "$f" != "$spec" ] && envs=${spec#*@}
    name=$f${envs:+-$(echo "$envs" | tr ',=' '__')}
    step "decode-$name" 60 env ${envs//,/ } "$BIN/qcore" bench --model-config $L --format $f --concurrency 1 \
      --output 64 --json "$W/decode-$name.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print(sys.argv[2], 'decode p50 %.3f ms, floor %.3f ms = %.1f%%' % (l['decode_step_ms'], d['decode_floor_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" "$W/decode-$name.json" "$name" | tee -a "$W/decode.txt"
  done
  first=${DECODE:-w4a16}; first=${first%% *}; f=${first%%@*} envs=""
  [ "$f" != "$first" ] && envs=${first#*@}
  step "trace-decode-$f" 90 env ${envs//,/ } QCORE_TRACE="$W/trace-decode.json" "$BIN/qcore" bench --model-config $L \
    --format $f --prompt 16 --output 64 --concurrency 1 --no-graphs
  step trace-decode-summary 30 python3 "$HERE/trace_summary.py" "$W/trace-decode.json" --top 25
  rm -f "$W/trace-decode.json"
  cat "$W/decode.txt" "$W/trace-decode-summary.txt"
  ;;
prefill)
  # where a 2048-token prefill's time goes, per format: one traced run each (graphs off, every launch timed
  # by events), summarized per kernel over the launches of the prompt (M = 2048) and the kernels around them
  L=configs/llama-3-8b.json
  for f in ${PREFILL_FORMATS:-bf16 fp8}; do
    step "trace-$f" 90 env QCORE_TRACE="$W/trace-$f.json" "$BIN/qcore" bench --model-config $L --format $f \
      --prompt 2048 --output 2 --concurrency 1 --json "$W/trace-$f-bench.json"
    step "trace-$f-summary" 30 python3 "$HERE/trace_summary.py" "$W/trace-$f.json" --min-m 2048 --top 30
    xz -T0 "$W/trace-$f.json"
  done
  ;;
*)
  echo "h200_full.sh: unknown part '$part' (kernels, model, tests, decode, prefill or pending)" >&2
  exit 2
  ;;
esac
echo "== $part"
grep -hE "FAIL|WRONG|MISSED|not met" "$W"/*.txt 2>/dev/null | head -20
printf '%s\n' "${sum[@]}" | tee "$W/summary.txt"
tar -C "$OUT" -cJf "$OUT/$part.tar.xz" "$part" && rm -rf "$W"
