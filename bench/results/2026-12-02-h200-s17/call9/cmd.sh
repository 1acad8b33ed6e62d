#!/bin/bash
# session 17 call 9 (NOT RUN: no device time left; the first call of the next session): is the fp8 wgmma GEMM's copy
# stream latency-bound (bytes in flight / round trip) or bound by what each SM can receive?  The copies alone
# (FP8_SKIP_MMA=1, FP8_SKIP_EPI=1) and the full kernel with 2-6 ring stages, o (128-column tiles) and gate_up (192)
# at M 1024 and 2048: latency-bound copies slow down in proportion to fewer stages; receive-bound ones do not.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
for st in 2 3 4 5; do
  for v in full:-DFP8_X=0 none:-DFP8_SKIP_EPI=1,-DFP8_SKIP_MMA=1; do
    QC_FP8_WGMMA_OPTS=${v#*:},-DFP8_ST192=$st,-DFP8_ST128=$st timeout 60 $B/bin/qcore gemm-bench --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/gb-$st-${v%%:*}.txt 2>&1
    echo "ST $st ${v%%:*}: $(grep -E 'wgmma' $W/gb-$st-${v%%:*}.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
  done
done
tar -C $W -cJf $OUT/raw.tar.xz .
