#!/bin/bash
# session 20 call 6: the new defaults (128-column tiles with two accumulators, W in 128-row boxes, no 192 path):
# test_gpu_fp8 (correctness, pair builds too), gemm-bench beside torch._scaled_mm (bf16 rows, channel and block),
# the fp8 prefill 2048, test_gpu_engine (the previous plan's A/B left out: device time).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=$OUT; mkdir -p $W  # outputs straight to \$OUT: a call cut short still returns them
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 110 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
timeout 90 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf.txt 2>&1
echo "prefill: $(grep -E '^ +[14] ' $W/pf.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') $(el)"
timeout 80 $B/bin/test_gpu_engine > $W/engine.txt 2>&1; echo "test_gpu_engine rc=$? $(grep -E 'passed' $W/engine.txt | tail -1) $(el)"
