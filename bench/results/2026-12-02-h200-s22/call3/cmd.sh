#!/bin/bash
# session 22 call 3: the new defaults (128-column tiles only, 6 ring stages with bf16 rows from the registers, the
# two accumulators taking stages 8 a turn): test_gpu_fp8 (and once with the old staged layout, QC_FP8_ST128=5);
# turns of 8 against 16, twice; gemm_bench.sh beside the anchors (channel, block) at 1024 / 2048 / 4096; the fp8
# prefill of 2048 tokens; test_gpu_engine.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w3; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,2), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -3
run() { # label, env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048,4096 --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma > $W/ab-$lab.txt 2>&1
  echo "$lab: $(gb $W/ab-$lab.txt) $(el)"
}
run t8
run t16 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=16
run t8b
run t16b QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=16
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
timeout 90 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf.txt 2>&1
echo "prefill: $(grep -E '^ +[14] ' $W/pf.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') $(el)"
timeout 80 $B/bin/test_gpu_engine > $W/engine.txt 2>&1; echo "test_gpu_engine rc=$? $(grep -E 'passed' $W/engine.txt | tail -1) $(el)"
QC_FP8_ST128=5 QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8-st5.txt 2>&1; echo "test_gpu_fp8 (QC_FP8_ST128=5) rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8-st5.txt | head -3
tar -C $W -cJf $OUT/out.tar.xz .
