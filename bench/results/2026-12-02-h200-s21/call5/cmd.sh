#!/bin/bash
# session 21 call 5 (trimmed to the device time left): a whole 256-column tile's epilogue as a loop over its two
# halves (FP8_EPI_HALVES=1: 16 chunks unrolled once, tot's upper half moved down between; half the straight-line code
# a cold tile fetches) against all 32 chunks unrolled (=0): test_gpu_fp8, A/B at 1024 / 2048 (twice); then ncu's SASS
# source view of the M = 1 GEMVs (fp8 o, w4a16 gate_up): are their fixed costs instruction fetch too?
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=$OUT; mkdir -p $W/ncu
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_fp8 > /tmp/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" /tmp/fp8.txt | head -3
for v in "h0:-DFP8_EPI_HALVES=0" "h1:" "h0b:-DFP8_EPI_HALVES=0" "h1b:"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 40 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048 --formats fp8 --kernels fp8.gemm_channel_wgmma > /tmp/ab-${v%%:*}.txt 2>&1
  echo "${v%%:*}: $(gb /tmp/ab-${v%%:*}.txt) $(el)"
done
for v in "fp8-o:fp8:fp8.gemv1_tma_channel:4096:4096" "w4-gu:w4a16:w4a16.gemv1_tma_sym:28672:4096"; do
  IFS=: read name fmt kern n k <<< "$v"
  timeout 40 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --page source --print-source sass --csv -k regex:gemv1 --launch-skip 2 --launch-count 1 $B/bin/qcore gemm-bench --m 1 --shapes $n:$k --formats $fmt --kernels $kern --iters 1 > /tmp/src-$name.csv 2>&1
  echo "ncu $name rc=$? $(el)"
done
tar -C /tmp -cJf $OUT/out.tar.xz fp8.txt ab-h0.txt ab-h1.txt ab-h0b.txt ab-h1b.txt src-fp8-o.csv src-w4-gu.csv
