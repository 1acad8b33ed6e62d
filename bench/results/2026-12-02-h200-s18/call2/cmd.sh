#!/bin/bash
# session 18 call 2: the fp8 wgmma GEMM beside torch._scaled_mm (bf16 out) at M 1024-4096 with its output as bf16
# (gemm-bench --out bf16, the anchors' contract) and as f32 (the default), same call.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=1024,2048,4096 timeout 240 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels $K --out bf16 > $W/gb.log 2>&1; echo "gb rc=$?"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -24
timeout 90 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block --kernels $K > $W/gb-f32.txt 2>&1; echo "f32 rc=$?"
echo "bf16 out: $(grep -E 'wgmma' $W/gb/gemm.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
echo "f32 out:  $(grep -E 'wgmma' $W/gb-f32.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
tar -C $W -cJf $OUT/raw.tar.xz .
