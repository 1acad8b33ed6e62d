#!/bin/bash
# session 19 call 4: the committed defaults (every fp8 wgmma mode plans 256 / 192 / 128 = 110 / 100 / 90, 160 in 4
# stages and off): test_gpu_fp8 (correctness only), test_gpu_engine, the fp8 prefill 2048 twice, gemm-bench beside
# torch._scaled_mm with bf16 rows (channel and block).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
QC_TEST_NO_TIMINGS=1 timeout 120 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
echo "bf16 checks: $(grep -c 'y.bf16: .* 0 differ' $W/fp8.txt) exact, $(grep -c 'y.bf16:' $W/fp8.txt) in all; worst wgmma d/tol $(grep 'wgmma' $W/fp8.txt | grep -o 'd/tol [0-9.]*' | sort -k2 -g | tail -1)"
for i in 1 2; do
  timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$i.txt 2>&1
  echo "prefill $i: $(grep -E '^ +[14] ' $W/pf-$i.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels $K --out bf16 > $W/gb.log 2>&1; echo "gb rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -24
timeout 150 $B/bin/test_gpu_engine > $W/eng.txt 2>&1; echo "test_gpu_engine rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/eng.txt | head -5
tar -C $W -cJf $OUT/raw.tar.xz .
