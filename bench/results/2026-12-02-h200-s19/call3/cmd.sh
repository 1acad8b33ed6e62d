#!/bin/bash
# session 19 call 3: the block-scaled GEMM's tile width (each forced; call 2: block / channel fell to 0.76-0.90 once
# channel took 256-column tiles) beside the channel default in the same call, bf16 and f32 rows; the fp8 prefill 2048
# three times (call 2's second c1 run was 11% below its first).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
for i in 1 2 3; do
  timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$i.txt 2>&1
  echo "prefill $i: $(grep -E '^ +[14] ' $W/pf-$i.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
for out in bf16 f32; do
  timeout 60 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out $out > $W/ch-$out.txt 2>&1
  echo "channel $out: $(grep -E 'wgmma' $W/ch-$out.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
  for e in 256:1,0,0,0 192:0,1,0,0 160:0,0,1,0 128:0,0,0,1; do
    QC_FP8_BN_EFF=${e#*:} timeout 60 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma --out $out > $W/b-$out-${e%%:*}.txt 2>&1
    echo "block $out bn ${e%%:*}: $(grep -E 'wgmma' $W/b-$out-${e%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}') ($(( $(date +%s) - t0 )) s)"
  done
done
tar -C $W -cJf $OUT/raw.tar.xz .
