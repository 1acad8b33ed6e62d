#!/bin/bash
# session 22 call 4: the committed defaults (0742d7a: 128 columns, 6 stages, turns of 8 / block 16): test_gpu_fp8;
# gemm_bench.sh beside torch._scaled_mm, channel and block, 1024 / 2048 / 4096; the fp8 prefill; test_gpu_engine.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -3
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
timeout 90 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf.txt 2>&1
echo "prefill: $(grep -E '^ +[14] ' $W/pf.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') $(el)"
timeout 80 $B/bin/test_gpu_engine > $W/engine.txt 2>&1; echo "test_gpu_engine rc=$? $(grep -E 'passed' $W/engine.txt | tail -1) $(el)"
tar -C $W -cJf $OUT/out.tar.xz .
