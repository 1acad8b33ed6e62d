#!/usr/bin/env bash
# test_engine_policy_fake.sh - the GPU engine with a policy on the stand-in driver (fake_cuda.c): qcore bench --policy
# prints the table, each fallback once and resident bytes per format; QCORE_TRACE has one event per launch; the
# manifest parses; qcore inspect shows the GPU table; a corrupt timing cache is said and rebuilt.
set -u
QCORE=$1
FAKE=$2
SRC=$3
cd "$SRC"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export QCORE_CUDA_LIBRARY=$FAKE QCORE_CACHE_DIR=$tmp/cache
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
has() { # has <file> <text>
  if grep -qF -- "$2" "$1"; then ok; else bad "no '$2' in $1:"; head -80 "$1"; fi
}
if ! "$QCORE" 2>/dev/null | grep -q "kernels can be compiled"; then
  echo "test_engine_policy_fake: skip: NVRTC is not available"
  exit 0
fi
CFG=tests/gpu/data/tiny-llama.json
BENCH=(bench --model-config "$CFG" --concurrency 1,4 --prompt 16 --output 4 --no-graphs --step-tokens 64)

# roofline.lua with a trace and a manifest next to the JSON results
QCORE_TRACE=$tmp/trace.json "$QCORE" "${BENCH[@]}" --policy policies/roofline.lua --json "$tmp/r.json" \
  >"$tmp/roof.out" 2>&1 || bad "bench --policy roofline.lua exit $?"
has "$tmp/roof.out" "policy: policies/roofline.lua"
has "$tmp/roof.out" "dispatch table: policy policies/roofline.lua, backend cuda (GPU engine)"
has "$tmp/roof.out" "blk.0-2                attn.q    512x256"
has "$tmp/roof.out" "measured linear times (us, CUDA events"
has "$tmp/roof.out" "resident linear weights per format"
has "$tmp/roof.out" "lm_head in bf16 only"
has "$tmp/roof.out" "manifest: $tmp/r.manifest.json"
# the summary lists each fallback once (after the levels)
n=$(sed -n '/^kernel launches/,$p' "$tmp/roof.out" | grep -c "lm_head in bf16 only")
[[ $n -ge 1 ]] && ok || bad "summary lacks the fallback"
launches=$(sed -n 's/^kernel launches: \([0-9]*\).*/\1/p' "$tmp/roof.out")
python3 - "$tmp/trace.json" "$launches" "$tmp/r.manifest.json" <<'PY' && ok || bad "trace or manifest"
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
n = int(sys.argv[2])
assert len(t) == n, (len(t), n)
lin = [e for e in t if e["cat"] == "linear"]
assert lin and all(e["ph"] == "X" and e["dur"] >= 0 for e in t)
assert all({"plugin", "format", "layer", "M", "N", "K", "kernel"} <= set(e["args"]) for e in t)
assert all(e["name"] == e["args"]["kernel"] for e in t)
assert any(e["args"]["layer"] == "blk.0.attn.qkv" and e["args"]["N"] == 512 and e["args"]["K"] == 256 for e in lin)
m = json.load(open(sys.argv[3]))
assert m["command"] == "bench" and m["model"]["synthetic"] is True and len(m["model"]["config"]["sha256"]) == 64
rows = m["recipe"]["dispatch"]
assert rows[0]["layers"] == "blk.0-2.attn.qkv" and rows[0]["decode"][0]["format"] in ("w4a16", "fp8"), rows[0]
assert m["recipe"]["resident"][0]["resident"][0]["bytes"] > 0
assert any(k["id"].startswith("core.") for k in m["kernels"]) and any(not k["id"].startswith("core.") for k in m["kernels"])
assert m["policy"]["file"] == "policies/roofline.lua" and len(m["policy"]["sha256"]) == 64
assert any("lm_head" in f["layer"] for f in m["policy"]["fallbacks"])
assert m["device"]["arch"] == "sm_90" and m["device"]["nvrtc"] != "absent"
assert m["results"]["performance"].endswith("r.json") and m["results"]["trace"].endswith("trace.json")
PY

# a policy that raises: a stated fallback, in the table and once in the summary
cat >"$tmp/raise.lua" <<'LUA'
return { prepare = function() return { "fp8" } end,
         choose = function(q) if q.layer.role == "mlp.down" then error("down refused") end return "fp8" end }
LUA
"$QCORE" "${BENCH[@]}" --policy "$tmp/raise.lua" >"$tmp/raise.out" 2>&1 || bad "bench raise.lua exit $?"
has "$tmp/raise.out" "wanted ? -> used fp8"
has "$tmp/raise.out" "down refused"
n=$(sed -n '/^kernel launches/,$p' "$tmp/raise.out" | grep -c "down refused")
[[ $n -eq 1 ]] && ok || bad "summary lists the raise $n times"

# a kernel that fails at run time: that format refused for the layer, the table rebuilt, the run goes on
cat >"$tmp/mix.lua" <<'LUA'
return { prepare = function() return { "w4a16", "fp8" } end,
         choose = function(q) if q.phase == "decode" and q.batch < 4 then return "w4a16" end return "fp8" end }
LUA
QCORE_TEST_FAIL_KERNEL=w4a16.gemv_frag_sym "$QCORE" "${BENCH[@]}" --policy "$tmp/mix.lua" >"$tmp/fail.out" 2>&1 ||
  bad "bench with a failing kernel exit $?"
has "$tmp/fail.out" "b1-2 w4a16, b4 fp8"
has "$tmp/fail.out" "failed on purpose (QCORE_TEST_FAIL_KERNEL) (at run time)"
has "$tmp/fail.out" "wanted w4a16 -> used fp8"
has "$tmp/fail.out" "rebuilding the dispatch table"

# inspect on the device: the engine's table from the (now cached) timings
"$QCORE" inspect --policy policies/measured.lua --model-config "$CFG" >"$tmp/inspect.out" 2>&1 || bad "inspect exit $?"
has "$tmp/inspect.out" "GPU engine dispatch (policy policies/measured.lua"
has "$tmp/inspect.out" "dispatch table: policy policies/measured.lua, backend cuda (GPU engine)"
has "$tmp/inspect.out" "resident linear weights per format (estimated"

# a corrupt timing cache: said, measured again, rewritten
for f in "$QCORE_CACHE_DIR"/timings-*.json; do echo "{ broken" >"$f"; done
"$QCORE" "${BENCH[@]}" --policy policies/roofline.lua >"$tmp/corrupt.out" 2>&1 || bad "bench after corruption exit $?"
has "$tmp/corrupt.out" "is corrupt or not ours"
for f in "$QCORE_CACHE_DIR"/timings-*.json; do python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$f" && ok || bad "$f"; done

# --format and --policy together are refused
"$QCORE" "${BENCH[@]}" --policy policies/roofline.lua --format fp8 >"$tmp/both.out" 2>&1
[[ $? -eq 2 ]] && ok || bad "--format with --policy not refused"
has "$tmp/both.out" "not both"

# a run shorter than the warm-up's 4 tokens (the warm-up once overran the engine's context: "context full")
"$QCORE" bench --model-config "$CFG" --format fp8 --concurrency 1 --prompt 16 --output 2 --no-graphs \
  >"$tmp/short.out" 2>&1 && ok || { bad "bench --prompt 16 --output 2 exit $?"; tail -3 "$tmp/short.out"; }

# gate_up written as bf16 (plugin.h's y.bf16) and read so by SwiGLU; FAKE_CUDA_LOG lists the fp8 wgmma GEMM's and
# SwiGLU's launches.  Prefill (m = 32): gate_up (n = 2 x 512) gets y.bf16, SwiGLU in_bf16 = 1 and up 512 bf16 after
# gate; the others and the decode steps (the GEMV, f32) do not; QC_GU_BF16=off: none.
for gu in on off; do
  rm -f "$tmp/wire-$gu.log"
  QC_GU_BF16=$gu FAKE_CUDA_LOG=$tmp/wire-$gu.log "$QCORE" bench --model-config "$CFG" --format fp8 --concurrency 1 \
    --prompt 32 --output 3 --no-graphs >"$tmp/wire-$gu.out" 2>&1 || bad "bench QC_GU_BF16=$gu exit $?"
done
w=$tmp/wire-on.log
has "$w" "fp8_wgmma m=32 n=1024 ybf16=1"
has "$w" "qc_swiglu_quant m=32 n=512 ld=1024 up_off=1024 in_bf16=1"
has "$w" "qc_swiglu_quant m=1 n=512 ld=1024 up_off=2048 in_bf16=0"
[[ $(grep -c "ybf16=1" "$w") -eq $(grep -c "in_bf16=1" "$w") && $(grep -c "ybf16=1" "$w") -gt 0 ]] && ok ||
  bad "gate_up launches with y.bf16 and SwiGLU launches reading bf16 differ in $w"
grep -v "n=1024" "$w" | grep -q "ybf16=1" && bad "a linear other than gate_up got y.bf16 in $w" || ok
grep -q "m=1 .*in_bf16=1\|up_off=2048 in_bf16=1\|up_off=1024 in_bf16=0" "$w" && bad "SwiGLU's input type and offset disagree in $w" || ok
w=$tmp/wire-off.log
has "$w" "fp8_wgmma m=32 n=1024 ybf16=0"
has "$w" "qc_swiglu_quant m=32 n=512 ld=1024 up_off=2048 in_bf16=0"
grep -q "ybf16=1\|in_bf16=1" "$w" && bad "QC_GU_BF16=off still writes or reads bf16 in $w" || ok

echo "test_engine_policy_fake: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
