#!/usr/bin/env bash
# quality_cpu.sh - seed 002's quality table on the CPU reference: perplexity and greedy agreement per format.
#   bash bench/quality_cpu.sh [MAX_EVAL_TOKENS]      (writes bench/results/quality-cpu-<date>.txt)
# Every linear layer runs the format; lm_head stays bf16 (as vLLM and llama.cpp leave it)
# except in the "+head" rows, which quantize it too.  Greedy agreement is against --format bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-8192}
QCORE=./build/qcore
out=bench/results/quality-cpu-$(date +%Y-%m-%d).txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "# qcore eval on $(hostname) ($(nproc) cores), $(date -u +%Y-%m-%dT%H:%MZ), model models/SmolLM2-135M-Instruct.Q4_1.gguf"
  echo "# text data/eval/licenses-en.txt, first $N tokens, window 512, stride 512; 12 prompts x 128 greedy tokens"
} > "$out"
run() { # name, qcore flags...
  local name=$1
  shift
  echo "== $name" | tee -a "$out"
  "$QCORE" eval --text data/eval/licenses-en.txt --max-eval-tokens "$N" --agree-tokens 128 "$@" 2>/dev/null |
    grep -E '^perplexity|^greedy agreement:' | tee -a "$out"
}
policy() { # format -> a policy file: every block layer in it, lm_head bf16
  printf 'return { choose = function(q) return q.layer.role == "lm_head" and "bf16" or "%s" end,\n prepare = function(l) return { l.role == "lm_head" and "bf16" or "%s" } end }\n' "$1" "$1" > "$tmp/$1.lua"
  echo "$tmp/$1.lua"
}
run "bf16" --format bf16
run "w4a16 (Q4_1 imported exactly, g32 + float min)" --policy "$(policy w4a16)"
run "w8a8_int8 (per-channel / per-token)" --policy "$(policy w8a8_int8)"
run "fp8 (E4M3, per-channel / per-token)" --policy "$(policy fp8)"
run "mxfp4 (E2M1, E8M0 per 32)" --policy "$(policy mxfp4)"
run "w4a16:g128 (re-quantized, sym; g64 where K=576), +head" --format w4a16:g128
run "fp8:block (128x128 / 1x128), +head" --format fp8:block
run "policies/latency.lua (w4a16 + INT8 head)" --policy policies/latency.lua
run "bf16 weights, FP8 KV cache (kv_fp8: E4M3, scale 1.0 per tensor)" --format bf16 --kv kv_fp8
echo "written: $out"
