#!/bin/bash
# session 17 call 7: call 6 found the unpaired GEMM's copies alone (no wgmma, no stores) take 28.4 us of o's 37.5 at
# M = 1024 and 291 of gate_up's 398 at 2048 (~10.6 TB/s from L2): is the pair build's multicast pipeline faster?
# The pair build (QC_FP8_PAIR=on) full, without stores, without wgmma, without both.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
for v in full:-DFP8_X=0 noepi:-DFP8_SKIP_EPI=1 nomma:-DFP8_SKIP_MMA=1 none:-DFP8_SKIP_EPI=1,-DFP8_SKIP_MMA=1; do
  QC_FP8_PAIR=on QC_FP8_WGMMA_OPTS=${v#*:} timeout 80 $B/bin/qcore gemm-bench --m 256,1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma_pair > $W/gb-${v%%:*}.txt 2>&1
  echo "pair ${v%%:*}: $(grep -E 'wgmma' $W/gb-${v%%:*}.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
done
tar -C $W -cJf $OUT/raw.tar.xz .
