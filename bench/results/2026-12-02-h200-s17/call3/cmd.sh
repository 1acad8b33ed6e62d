#!/bin/bash
# session 17 call 3: why the pair builds ran 2x slower in call 2: is a grid of 66 clusters of two not resident at once
# (a persistent grid whose last clusters start after the first ones end)?  gemm-bench of the pair GEMM with its grid
# capped (QC_FP8_PAIR_GRID) against the unpaired one, o and gate_up at M 1024 and 4096.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
gb() { # label env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore gemm-bench --m 1024,4096 --shapes 4096:4096,28672:4096 --formats fp8 --kernels $K > $W/gb-$lab.txt 2>&1
  echo "$lab: $(grep -E 'wgmma' $W/gb-$lab.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s/%s %s  ", $2, $3, $4, $5}')"
}
K=fp8.gemm_channel_wgmma gb unpaired
K=fp8.gemm_channel_wgmma_pair
for g in 132 128 124 120 112 96 66; do gb pair$g QC_FP8_PAIR_GRID=$g; done
tar -C $W -cJf $OUT/raw.tar.xz .
