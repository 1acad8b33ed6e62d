#!/bin/bash
# session 22 call 2: call 1 found 128-column tiles 6% faster with 6 ring stages (no bf16 staging) and four stages a
# turn (qkv 1024: 45.3 against 48.1 us).  Now: the tile widths forced on all four shapes at 1024 / 2048 / 4096 (256;
# 128 with 6 stages and turns of 2, 4, 8), channel and block, to re-weigh the plan; test_gpu_fp8 with turns of 8;
# the anchors (gemm_bench.sh) with 6 stages and turns of 4.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w2; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,2), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=8 QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > $W/fp8-s6t8.txt 2>&1; echo "test_gpu_fp8 (ST128=6, TURN=8) rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8-s6t8.txt | head -3
run() { # label, env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048,4096 --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma > $W/ab-$lab.txt 2>&1
  echo "$lab: $(gb $W/ab-$lab.txt) $(el)"
}
run f256 QC_FP8_BN_EFF=110,0,0,0
run t2 QC_FP8_BN_EFF=0,0,0,90 QC_FP8_ST128=6
run t4 QC_FP8_BN_EFF=0,0,0,90 QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=4
run t8 QC_FP8_BN_EFF=0,0,0,90 QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=8
run f256b QC_FP8_BN_EFF=110,0,0,0
run t8b QC_FP8_BN_EFF=0,0,0,90 QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=8
QC_FP8_ST128=6 QC_FP8_WGMMA_OPTS=-DFP8_DBL_TURN=4 OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
tar -C $W -cJf $OUT/out.tar.xz .
