#!/bin/bash
# session 17 call 6: where the fp8 wgmma GEMM's fixed cost goes.  Call 5's times against M give qcore a ~10-11 us
# intercept (o, gate_up) where torch._scaled_mm has 4.5-6.6 with the same slope: the same GEMM without its y stores
# (FP8_SKIP_EPI), without its wgmma (FP8_SKIP_MMA), without both, at M 256-2048 (times only: the results are wrong).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
for v in full:-DFP8_X=0 noepi:-DFP8_SKIP_EPI=1 nomma:-DFP8_SKIP_MMA=1 none:-DFP8_SKIP_EPI=1,-DFP8_SKIP_MMA=1; do
  QC_FP8_WGMMA_OPTS=${v#*:} timeout 80 $B/bin/qcore gemm-bench --m 128,256,512,1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/gb-${v%%:*}.txt 2>&1
  echo "${v%%:*}: $(grep -E 'wgmma' $W/gb-${v%%:*}.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
done
tar -C $W -cJf $OUT/raw.tar.xz .
