#!/bin/bash
# session 20 call 5: 128-column tiles with two accumulators (FP8_DBL128=1: stages in pairs, the first promoted while
# the second's wgmma group runs) against one (the default), 128 columns forced; W boxes of 32 / 128 rows.
# cuBLASLt runs o / qkv 1024 on nvjet 128x128x128 (call 1) in 30.1 / 43.3 us; ours at 128 columns 38.8 / 54.0 (call 2).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
export QC_FP8_BN_EFF=0,0,0,1
for c in "d0-b32:0:32" "d1-b32:1:32" "d0-b128:0:128" "d1-b128:1:128"; do
  IFS=: read name dbl wb <<< "$c"
  QC_FP8_WBOX=$wb QC_FP8_WGMMA_OPTS="-DFP8_DBL128=$dbl" timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/ch-$name.txt 2>&1
  echo "channel $name: $(gb $W/ch-$name.txt)"
done
echo "$(el)"
for c in "d0-b128:0:128" "d1-b128:1:128"; do
  IFS=: read name dbl wb <<< "$c"
  QC_FP8_WBOX=$wb QC_FP8_WGMMA_OPTS="-DFP8_DBL128=$dbl" timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma > $W/bl-$name.txt 2>&1
  echo "block $name: $(gb $W/bl-$name.txt)"
done
for dbl in 0 1; do
  QC_FP8_WGMMA_OPTS="-DFP8_DBL128=$dbl -DFP8_SKIP_TMA=1 -DFP8_SKIP_EPI=1" timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/mma-d$dbl.txt 2>&1
  echo "mma loop alone d$dbl: $(gb $W/mma-d$dbl.txt)"
done
echo "$(el)"
unset QC_FP8_BN_EFF
QC_FP8_WGMMA_OPTS="-DFP8_DBL128=1" QC_TEST_NO_TIMINGS=1 QC_FP8_BN_EFF=0,0,0,1 timeout 110 $B/bin/test_gpu_fp8 > $W/fp8-dbl.txt 2>&1; echo "test_gpu_fp8 (dbl128, all 128) rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8-dbl.txt | head -5
tar -C $W -cJf $OUT/raw.tar.xz .
