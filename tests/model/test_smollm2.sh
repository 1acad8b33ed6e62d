#!/usr/bin/env bash
# test_smollm2.sh - the default model end to end on the CPU reference: an answer, perplexity, agreement.
set -u
QCORE=$1
cd "$2"
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -f $MODEL ]]; then
  if [[ ${CI:-} == true ]]; then echo "FAIL: $MODEL missing (scripts/setup.sh fetches it)"; exit 1; fi
  echo "skip: $MODEL missing (run bash scripts/setup.sh)"
  echo "test_smollm2: 0 passed, 0 failed"
  exit 0
fi
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# a coherent answer through the policy (w4a16 imported exactly from Q4_1)
out=$("$QCORE" run --prompt "What is the capital of France? Answer in one sentence." -n 24 2>&1)
[[ $out == *Paris* ]] && ok || bad "run: no 'Paris' in: $out"
[[ $out == *"time to first token"* && $out == *"tokens/s"* ]] && ok || bad "run: no summary"
[[ $out == *"attn.q w4a16 x30"* && $out == *"lm_head w8a8_int8 x1"* ]] && ok || bad "run: formats line: $out"
[[ $out == *"kv cache: bf16"* ]] && ok || bad "run: kv line: $out"

# the same from stdin, sampled with a seed: twice the same text
# (the generated text sits between the two '---' lines; timings differ)
gen() { echo "Name a color." | "$QCORE" run --temperature 0.8 --top-k 40 --top-p 0.9 --seed "$1" -n 12 2>/dev/null |
  sed -n '/^---$/,/^---$/p'; }
a=$(gen 7)
b=$(gen 7)
[[ -n $a && $a == "$b" ]] && ok || bad "seeded sampling is not repeatable"

# perplexity of the shipped text's first 1024 tokens: bf16 and the exact Q4_1 import agree closely
p_bf16=$("$QCORE" eval --format bf16 --text data/eval/licenses-en.txt --max-eval-tokens 1024 --agree-tokens 0 2>/dev/null |
  sed -n 's/^perplexity \([0-9.]*\) .*/\1/p')
p_w4=$("$QCORE" eval --format w4a16 --text data/eval/licenses-en.txt --max-eval-tokens 1024 --agree-tokens 0 2>/dev/null |
  sed -n 's/^perplexity \([0-9.]*\) .*/\1/p')
python3 - "$p_bf16" "$p_w4" <<'PY' && ok || bad "perplexity bf16=$p_bf16 w4a16=$p_w4"
import sys
a, b = map(float, sys.argv[1:])
# plausible for a 135M model on licence text, and 4-bit (with a 4-bit head) within 25% of bf16
assert 5 < a < 60, a
assert a <= b < 1.25 * a, (a, b)
PY

# greedy agreement: bf16 against itself is identical on every prompt
out=$("$QCORE" eval --format bf16 --text data/eval/licenses-en.txt --max-eval-tokens 64 --agree-tokens 16 2>/dev/null)
[[ $out == *"greedy agreement: 12/12 prompts identical"* ]] && ok || bad "bf16 self-agreement: $out"

# QCORE_TRACE: one event per kernel launch; the run manifest names the file by its hash
tmp=$(mktemp -d)
QCORE_TRACE=$tmp/trace.json "$QCORE" run --prompt "Hi" -n 3 --manifest "$tmp/m.json" >/dev/null 2>&1
python3 - "$tmp/trace.json" "$tmp/m.json" "$(sha256sum "$MODEL" | cut -d' ' -f1)" <<'PY' && ok || bad "trace or manifest"
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
lin = [e for e in t if e["cat"] == "linear"]
# 3 generated tokens = a prefill and 2 decode steps, 30 blocks x 7 linears + the head each
assert len(lin) == 3 * 211, len(lin)
assert all(e["ph"] == "X" and e["dur"] >= 0 and {"plugin", "format", "kernel", "M", "N", "K"} <= set(e["args"]) for e in lin)
assert lin[0]["args"]["kernel"] == "w4a16.linear_fmin" and lin[-1]["args"]["format"] == "w8a8_int8", lin[-1]
assert len([e for e in t if e["cat"] == "attention"]) == 3 * 30
m = json.load(open(sys.argv[2]))
assert m["model"]["files"][0]["sha256"] == sys.argv[3]
assert m["recipe"][0]["formats"][0]["imported_exactly"] is True
assert m["policy"]["file"] == "policies/latency.lua" and len(m["policy"]["sha256"]) == 64
assert m["results"]["generated_tokens"] == 3 and m["runtime"]["plugin_abi"] == 1
PY
rm -rf "$tmp"

# inspect with the model: its dispatch table, fallbacks and resident bytes
out=$("$QCORE" inspect --model "$MODEL" 2>/dev/null)
[[ $out == *"lm_head                lm_head   49152x576"*"w8a8_int8"* && $out == *"fallbacks: none"* &&
   $out == *"memory (resident bytes"* && $out == *"scales"* ]] && ok || bad "inspect --model: $out"

# a missing model names the set-up command
out=$("$QCORE" run --model /nonexistent.gguf 2>&1)
[[ $out == *"scripts/setup.sh"* ]] && ok || bad "missing model message: $out"
# a file that is not GGUF is refused with a reason
echo "not a model" > /tmp/qc_not_a_model.gguf
out=$("$QCORE" run --model /tmp/qc_not_a_model.gguf 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *qc_not_a_model.gguf* ]] && ok || bad "bad model file: rc=$rc $out"
rm -f /tmp/qc_not_a_model.gguf

echo "test_smollm2: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
