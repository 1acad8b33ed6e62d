#!/bin/bash
# session 19 call 1: the fp8 wgmma GEMM's 128 x 256 tiles (two 128-column halves a stage through one acc).
# Correctness: test_gpu_fp8 with the default plan (256 where it scores best) and with every GEMM forced to 256
# (QC_FP8_BN_EFF=1,0,0,0: split-K, tiny m, ragged tails at 256).  Speed: gemm-bench beside torch._scaled_mm (bf16
# rows, the anchors' contract) with the default plan; each width forced (f32 rows, channel) to set the plan's
# weights; the fp8 prefill 2048 with the new default and with the old plan (QC_FP8_BN_EFF=0,100,96,90).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
timeout 150 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
QC_FP8_BN_EFF=1,0,0,0 QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8-256.txt 2>&1; echo "test_gpu_fp8 (all 256) rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8-256.txt | head -5
for e in new:100,100,0,90 old:0,100,96,90; do
  QC_FP8_BN_EFF=${e#*:} timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-${e%%:*}.txt 2>&1
  echo "prefill ${e%%:*}: $(grep -E '^ +[14] ' $W/pf-${e%%:*}.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels $K --out bf16 > $W/gb.log 2>&1; echo "gb rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -24
for e in 256:1,0,0,0 192:0,1,0,0 160:0,0,1,0 128:0,0,0,1; do
  QC_FP8_BN_EFF=${e#*:} timeout 60 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/w-${e%%:*}.txt 2>&1
  echo "bn ${e%%:*}: $(grep -E 'wgmma' $W/w-${e%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", $2, $3, $4, $5}') ($(( $(date +%s) - t0 )) s)"
done
tar -C $W -cJf $OUT/raw.tar.xz .
