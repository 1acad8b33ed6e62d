#!/usr/bin/env bash
# test_cli.sh - the qcore command line: help, version, errors with exit code 2, and the main job's output.
set -u
QCORE=$1
SRC=$2
FAULT_DIR=$3
cd "$SRC"
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect <exit code> <text that must appear in stdout+stderr> -- <args...>
expect() {
  local want_rc=$1 needle=$2
  shift 3
  local out rc
  out=$("$QCORE" "$@" 2>&1)
  rc=$?
  if [[ $rc -eq $want_rc && $out == *"$needle"* ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: qcore $* -> exit $rc (want $want_rc), wanted text: $needle"
    echo "$out" | head -20
  fi
}

expect 0 "usage: qcore" -- --help
expect 0 "qcore 0.1.0 (plugin ABI 1)" -- --version
expect 2 "unknown option '--frobnicate'" -- --frobnicate
expect 2 "option '--policy' needs a value" -- --policy
expect 2 "policy file 'nope.lua' does not exist" -- --policy nope.lua
expect 2 "unknown command 'dance'" -- dance
expect 2 "unexpected argument 'extra'" -- plugins extra
expect 2 "cannot open configuration" -- --config /nonexistent/qcore.ini
expect 2 "model config '/nonexistent.json' does not exist" -- --model-config /nonexistent.json
QCORE_CONFIG=/nonexistent/x.ini expect 2 "cannot open configuration" -- plugins
# a plugin's A/B switch with a bad value: warned about by name, then ignored (the command still runs)
QC_FP8_BN_EFF=1,2 expect 0 "fp8: QC_FP8_BN_EFF: ignoring '1,2'" -- plugins
QC_FP8_BN_EFF=0,0,0 expect 0 "fp8: QC_FP8_BN_EFF: ignoring '0,0,0'" -- plugins
QC_FP8_BN_EFF=0,0,0,0 expect 0 "fp8: QC_FP8_BN_EFF: ignoring '0,0,0,0'" -- plugins
QC_FP8_BN_EFF=1,2,3x expect 0 "fp8: QC_FP8_BN_EFF: ignoring '1,2,3x'" -- plugins
QC_FP8_BN_EFF=1,2,3,4,5 expect 0 "fp8: QC_FP8_BN_EFF: ignoring '1,2,3,4,5'" -- plugins
QC_FP8_PAIR_GRID=7x expect 0 "fp8: QC_FP8_PAIR_GRID='7x' is not 2..132: ignored" -- plugins
# W box rows: 256 never (the 128-column path is always built), nor rows that leave an enabled width short of whole boxes
QC_FP8_WBOX=256 expect 0 "fp8: QC_FP8_WBOX: ignoring '256'" -- plugins
QC_FP8_WBOX=48 expect 0 "fp8: QC_FP8_WBOX: ignoring '48'" -- plugins
QC_FP8_BN_EFF=110,100,0,90 QC_FP8_WBOX=128 expect 0 "ignoring '128' (want 32, 64 or 128 rows dividing every tile width the plan may take; keeping 64)" -- plugins
QC_FP8_BN_EFF=110,0,90,90 QC_FP8_WBOX=64 expect 0 "keeping 32)" -- plugins

# the main job: device, plugins with what they lack, a policy decision
expect 0 "device: " -- --policy policies/latency.lua
expect 0 "dispatch table: policy policies/latency.lua" -- --policy policies/latency.lua
expect 0 "Paris" -- --policy policies/latency.lua -n 16
expect 2 "needs an integer" -- run -n many
expect 2 "--stride 600 is larger than --window 512" -- eval --stride 600
expect 2 "text file 'nope.txt' does not exist" -- eval --text nope.txt
expect 2 "--text FILE is required" -- eval
expect 0 "format w4a16" -- plugins
expect 0 "kv cache: " -- inspect --policy policies/throughput.lua
expect 0 "plugin org.qcore.fp8" -- plugins
expect 0 "format kv_fp8" -- plugins
expect 0 "kernel bf16.linear_ref" -- plugins
expect 0 "native" -- formats
expect 0 "eligibility on the cpu reference backend" -- inspect --policy policies/latency.lua
if [[ ! -e /dev/nvidia0 ]]; then
  expect 0 "no CUDA driver" -- inspect
fi
# gemm-bench: bad options exit 2 naming the token (before any device is looked for); no GPU is a clear exit 1
expect 2 "--m: bad M 'x'" -- gemm-bench --m 1,x
expect 2 "--m: bad M ''" -- gemm-bench --m 1,,4
expect 2 "--m: bad M '0'" -- gemm-bench --m 0
expect 2 "--shapes: bad shape '12'" -- gemm-bench --shapes 4096:4096,12
expect 2 "--shapes: bad shape '4096:0'" -- gemm-bench --shapes 4096:0
expect 2 "--shapes: bad shape 'llama3-70b'" -- gemm-bench --shapes llama3-70b
expect 2 "--formats: unknown format 'int3'" -- gemm-bench --formats bf16,int3
expect 2 "'kv_fp8' is a KV-cache format" -- gemm-bench --formats kv_fp8
expect 2 "kernel 'core.rmsnorm' is not a linear kernel" -- gemm-bench --kernels core.rmsnorm
expect 2 "kernel 'bf16.linear_ref' has no CUDA version" -- gemm-bench --kernels bf16.linear_ref
expect 2 "unknown kernel 'bf16.nope'" -- gemm-bench --kernels bf16.nope
expect 2 "'bf16.linear_mma' is a bf16 kernel, and --formats does not name bf16" -- gemm-bench --formats fp8 --kernels bf16.linear_mma
expect 2 "--iters needs an integer" -- gemm-bench --iters 0
expect 2 "--device needs a device ordinal" -- gemm-bench --device -1
expect 2 "--peak-tflops: bad value '989,x'" -- gemm-bench --peak-tflops 989,x
expect 2 "cannot write --json file '/nonexistent/g.json'" -- gemm-bench --json /nonexistent/g.json
QCORE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 expect 1 "qcore gemm-bench: no CUDA device: no CUDA driver" -- gemm-bench
QCORE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 expect 1 "no CUDA device" -- gemm-bench --json "$tmp/g.json"
if grep -q '"error": "no CUDA device' "$tmp/g.json"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: g.json"; fi
expect 0 "gemm-bench    time every format" -- --help

# flags override qcore.ini
printf '[policy]\nfile = policies/throughput.lua\n[model]\nconfig = configs/smollm2-135m.json\n' > "$tmp/q.ini"
expect 0 "policy policies/throughput.lua" -- inspect --config "$tmp/q.ini"
expect 0 "policy policies/latency.lua" -- inspect --config "$tmp/q.ini" --policy policies/latency.lua
# a broken policy is a clear error naming the file and line
printf 'return {\n choose = function(q) return 1 +  end }\n' > "$tmp/broken.lua"
expect 1 "broken.lua:2:" -- inspect --policy "$tmp/broken.lua"
# a policy answering nonsense falls back, with the reason shown
printf 'return { choose = function(q) return "int3" end }\n' > "$tmp/int3.lua"
expect 0 "which is not a registered format" -- inspect --policy "$tmp/int3.lua"
# a refused plugin is reported and the runtime goes on
expect 0 "refused: $FAULT_DIR/abi/abi.so: plugin ABI version mismatch" -- plugins --plugin-path "$FAULT_DIR/abi"
QCORE_PLUGIN_PATH="$FAULT_DIR/none" expect 0 "format test_good" -- plugins
# a model config with a bad field is named
printf '{"model_type":"llama","hidden_size":2,"intermediate_size":4,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":10}' > "$tmp/hd.json"
expect 1 "hidden_size 2 is not a multiple of num_attention_heads 4" -- inspect --model-config "$tmp/hd.json"
printf '{"model_type":"llama","hidden_size":-4}' > "$tmp/bad.json"
expect 1 "\"hidden_size\" must be an integer" -- inspect --model-config "$tmp/bad.json"

echo "test_cli: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
