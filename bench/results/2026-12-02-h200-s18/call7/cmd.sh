#!/bin/bash
# session 18 call 7 (NOT RUN: no device time left; for the next session): what does the fp8 wgmma GEMM's epilogue
# cost?  Session 17's FP8_SKIP_EPI build ran 13% faster, but halving the stored bytes (bf16 rows, session 18 call 2)
# gained nothing.  The epilogue run 1, 2 and 3 times a tile (FP8_EPI_REPS: same results, more time) gives its
# marginal cost; f32 and bf16 rows; FP8_SKIP_EPI beside them.  o (128-column tiles) and gate_up (192) at M 1024, 2048.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=$OUT
for out in f32 bf16; do
  for v in reps1:-DFP8_EPI_REPS=1 reps2:-DFP8_EPI_REPS=2 reps3:-DFP8_EPI_REPS=3 skip:-DFP8_SKIP_EPI=1; do
    QC_FP8_WGMMA_OPTS=${v#*:} timeout 60 $B/bin/qcore gemm-bench --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out $out > $W/gb-$out-${v%%:*}.txt 2>&1
    echo "$out ${v%%:*}: $(grep -E 'wgmma' $W/gb-$out-${v%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
  done
done
