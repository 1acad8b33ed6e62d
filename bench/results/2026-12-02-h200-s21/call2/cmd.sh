#!/bin/bash
# session 21 call 2: call 1's ncu showed a third of the warp samples of ours at o 1024 (256 columns) stalled on
# "no instructions" (cuBLASLt: 2%).  The epilogue now runs one chunk loop per kind of output (FP8_EPI_SPLIT=1) instead
# of testing the kind in each chunk: (a) test_gpu_fp8 with it; (b) A/B split 0 / 1, four shapes, M 1024-4096;
# (c) the epilogue's marginal cost (FP8_EPI_REPS=2); (d) ncu's SASS source view (where the no-instruction stalls are)
# at o 1024, split 0 and 1.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W/ncu
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 110 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
for v in "s0:-DFP8_EPI_SPLIT=0" "s1:" "s0b:-DFP8_EPI_SPLIT=0" "s1b:"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 90 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/ch-${v%%:*}.txt 2>&1
  echo "ch ${v%%:*}: $(gb $W/ch-${v%%:*}.txt) $(el)"
done
for v in "s0:-DFP8_EPI_SPLIT=0" "s1:"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 90 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma > $W/bl-${v%%:*}.txt 2>&1
  echo "bl ${v%%:*}: $(gb $W/bl-${v%%:*}.txt) $(el)"
done
for v in "r1:" "r2:-DFP8_EPI_REPS=2" "r1-s0:-DFP8_EPI_SPLIT=0" "r2-s0:-DFP8_EPI_SPLIT=0 -DFP8_EPI_REPS=2"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 60 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024 --shapes 4096:4096,6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/reps-${v%%:*}.txt 2>&1
  echo "reps ${v%%:*}: $(gb $W/reps-${v%%:*}.txt)"
done
echo "$(el)"
for v in "s0:-DFP8_EPI_SPLIT=0" "s1:"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 100 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --page source --print-source sass --csv -k regex:qc_fp8_gemm --launch-skip 1 --launch-count 1 $B/bin/qcore gemm-bench --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1 > $W/ncu/src-${v%%:*}.csv 2>&1
  echo "ncu src ${v%%:*} rc=$? $(el)"
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 100 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --page raw -k regex:qc_fp8_gemm --launch-skip 1 --launch-count 1 $B/bin/qcore gemm-bench --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1 > $W/ncu/raw-${v%%:*}.txt 2>&1
  echo "ncu raw ${v%%:*}: $(grep -E 'gpu__time_duration.sum|smsp__pcsamp_warps_issue_stalled_no_instructions |smsp__pcsamp_sample_count' $W/ncu/raw-${v%%:*}.txt | awk '{printf "%s=%s ", $1, $NF}')"
done
tar -C $W -cJf $OUT/raw.tar.xz .
