#!/bin/bash
# session 19 call 5: why the block GEMM's 256-column tiles ran 10-17% slower in the default build (call 4: three
# widths in one kernel) than in a build with 256 alone (call 3, QC_FP8_BN_EFF=1,0,0,0): the same code path, timed in
# builds with 256 + 192 + 128 (default), 256 + 128 and 256 alone, channel and block, bf16 rows, one process each.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
for f in fp8:channel fp8:block; do
  for e in default three:110,100,0,90 two:110,0,0,90 one:1,0,0,0; do
    if [ "$e" = default ]; then unset QC_FP8_BN_EFF; else export QC_FP8_BN_EFF=${e#*:}; fi
    timeout 60 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats ${f/fp8:channel/fp8} --kernels fp8.gemm_${f#fp8:}_wgmma --out bf16 > $W/${f#fp8:}-${e%%:*}.txt 2>&1
    echo "${f#fp8:} ${e%%:*}: $(grep -E 'wgmma' $W/${f#fp8:}-${e%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}') ($(( $(date +%s) - t0 )) s)"
  done
done
tar -C $W -cJf $OUT/raw.tar.xz .
