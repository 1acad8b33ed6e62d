#!/bin/bash
# session 17 call 2: fp8.gemm_*_wgmma_pair (clusters of two blocks on row-tile pairs, W multicast; m > 128): its GPU
# correctness (test_gpu_fp8, every case with m > 128 also through the pair builds), gemm-bench of the pair and the
# unpaired GEMM beside torch._scaled_mm at M 256-4096, and the fp8 prefill of 2048 tokens with and without it.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
timeout 240 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$?"; grep -E "FAIL|passed" $W/fp8.txt | head -8
grep -E "x of channel|wgmma" $W/fp8.txt | grep -v -E "^test_gpu_fp8: (fp8|select)" | tail -24
OUT=$W/gb M=256,1024,2048,4096 timeout 240 bash bench/gemm_bench.sh $B/bin --formats fp8 --kernels fp8.gemm_channel_wgmma_pair,fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma_pair,fp8.gemm_block_wgmma > $W/gb.log 2>&1; echo "gb rc=$?"
grep -E "wgmma" $W/gb/gemm.txt | grep -v -E "refused|activation" | awk '{print $2, $3, $4, $5}'
grep -E "scaled_mm" $W/gb/ratios.md | head -20
for f in fp8_pair:QC_FP8_PAIR=on fp8_nopair:QC_FP8_PAIR=off; do
  env ${f#*:} timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-${f%%:*}.txt 2>&1
  echo "${f%%:*}: $(grep -E '^ +[14] ' $W/pf-${f%%:*}.txt | awk '{printf "c%s %s tok/s  ", $1, $5}')"
done
tar -C $W -cJf $OUT/raw.tar.xz .
