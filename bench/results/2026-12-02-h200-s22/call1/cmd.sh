#!/bin/bash
# session 22 call 1: fp8 o / qkv at 1024 rows (the two misses of 0.95x torch._scaled_mm). A/B in one call: the
# default; four stages a turn through the two accumulators (FP8_DBL_QUAD=1, one drain per 4 stages); 6 ring stages at
# 128 columns without the bf16 staging (QC_FP8_ST128=6, cuBLASLt's depth); both; 192-column tiles with the new
# epilogue (QC_FP8_BN_EFF=110,100,0,90).  test_gpu_fp8 with the defaults and with QC_FP8_ST128=6 (rows from the
# registers at 128); then gemm_bench.sh beside the anchors for o and qkv at 1024 / 2048.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", substr($2,10,5), $3, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -3
QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_QUAD=1 QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8-s6q.txt 2>&1; echo "test_gpu_fp8 (ST128=6, QUAD) rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8-s6q.txt | head -3
run() { # label, env...
  local lab=$1; shift
  env "$@" timeout 40 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048 --shapes 6144:4096,4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/ab-$lab.txt 2>&1
  echo "$lab: $(gb $W/ab-$lab.txt) $(el)"
}
run d
run q QC_FP8_WGMMA_OPTS=-DFP8_DBL_QUAD=1
run s6 QC_FP8_ST128=6
run s6q QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_QUAD=1
run e192 QC_FP8_BN_EFF=110,100,0,90
run s4 QC_FP8_ST128=4
run d2
run q2 QC_FP8_WGMMA_OPTS=-DFP8_DBL_QUAD=1
run s62 QC_FP8_ST128=6
run s6q2 QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_QUAD=1
OUT=$W/gb M=1024,2048 SHAPES=6144:4096,4096:4096 timeout 120 bash bench/gemm_bench.sh $B/bin --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
tar -C $W -cJf $OUT/out.tar.xz .
