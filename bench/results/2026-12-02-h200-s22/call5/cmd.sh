#!/bin/bash
# session 22 call 5: gate_up at 4096 rows swings 711-895 us from run to run (calls 2-4); block against channel there,
# alternating, five runs each, 50 iterations a run, the committed defaults (0742d7a)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w5; rm -rf $W; mkdir -p $W
for i in 1 2 3 4 5; do
  for f in fp8:fp8.gemm_channel_wgmma fp8:block:fp8.gemm_block_wgmma; do
    timeout 30 $B/bin/qcore gemm-bench --out bf16 --iters 50 --m 4096 --shapes 28672:4096 --formats ${f%:*} --kernels ${f##*:} > $W/r$i-${f##*.}.txt 2>&1
    echo "run $i ${f##*.}: $(grep -E 'wgmma' $W/r$i-${f##*.}.txt | grep -v -E 'refused|activation|check' | awk '{print $5}') $(grep -o '[0-9]* WRONG' $W/r$i-${f##*.}.txt | head -1)"
  done
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
tar -C $W -cJf $OUT/out.tar.xz .
