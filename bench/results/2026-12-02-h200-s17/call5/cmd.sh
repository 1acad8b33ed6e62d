#!/bin/bash
# session 17 call 5: the fp8 wgmma GEMM's tile width.  The plan weighs 192 / 160 / 128-column tiles 100 / 96 / 90 by
# speed, but o (128 columns) ran at 45% of the peak where gate_up (192) ran at 59%.  gemm-bench with the anchors at the
# default plan, then with each width forced (QC_FP8_BN_EFF), channel and block; the fp8 prefill at the default.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=256,1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8 --kernels $K > $W/gb.log 2>&1; echo "gb rc=$?"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -16
for e in 100,0,0 0,100,0 0,0,100; do
  QC_FP8_BN_EFF=$e timeout 80 $B/bin/qcore gemm-bench --m 256,1024,2048,4096 --formats fp8 --kernels $K > $W/gb-$e.txt 2>&1
  echo "eff $e: $(grep -E 'wgmma' $W/gb-$e.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s/%s %s  ", substr($2,10,2), $3, $4, $5}')"
done
timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf.txt 2>&1
echo "prefill default: $(grep -E '^ +[14] ' $W/pf.txt | awk '{printf "c%s %s tok/s  ", $1, $5}')"
tar -C $W -cJf $OUT/raw.tar.xz .
