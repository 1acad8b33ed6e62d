#!/bin/bash
# session 20 call 1: (a) session 19's call 6 (the final build's correctness, block / channel, the channel 192 path with
# and without 256 beside it); (b) where o's one-wave fixed cost goes: K swept at M = 1024, N = 4096 for ours and
# torch._scaled_mm in one run, and ours at K = 128 / 4096 with diagnosis builds (no stores; no MMA and no stores;
# an empty kernel of the same launch); (c) ncu: cuBLASLt's kernel for o / qkv 1024 and ours.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
QC_TEST_NO_TIMINGS=1 timeout 95 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; }
timeout 40 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.txt 2>&1
echo "block/channel: $(gb $W/gb.txt) $(el)"
for e in default:- d192-128:0,100,0,90 d192:0,1,0,0; do
  if [ "${e#*:}" = - ]; then unset QC_FP8_BN_EFF; else export QC_FP8_BN_EFF=${e#*:}; fi
  timeout 30 $B/bin/qcore gemm-bench --m 1024,2048 --shapes 6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 > $W/qkv-${e%%:*}.txt 2>&1
  echo "qkv ${e%%:*}: $(gb $W/qkv-${e%%:*}.txt)"
done
unset QC_FP8_BN_EFF
echo "== K sweep, M 1024, N 4096, ours and the anchors $(el)"
OUT=$W/ksweep M=1024 SHAPES=4096:128,4096:512,4096:1024,4096:2048,4096:4096 timeout 120 bash bench/gemm_bench.sh $B/bin --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 > $W/ksweep.log 2>&1
tail -8 $W/ksweep/ratios.md
for o in "skipepi:-DFP8_SKIP_EPI=1" "skipboth:-DFP8_SKIP_EPI=1 -DFP8_SKIP_MMA=1" "empty:-DFP8_SKIP_ALL=1"; do
  QC_FP8_WGMMA_OPTS="${o#*:}" timeout 40 $B/bin/qcore gemm-bench --m 1024 --shapes 4096:128,4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 > $W/diag-${o%%:*}.txt 2>&1
  echo "${o%%:*}: $(grep -E 'wgmma' $W/diag-${o%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
done
echo "== ncu $(el)"
timeout 90 ncu --clock-control none --section LaunchStats --section SpeedOfLight python3 bench/probe/scaled_mm_once.py 1024x4096x4096 1024x6144x4096 > $W/ncu-torch.txt 2>&1; echo "ncu torch rc=$?"
grep -E "^  [a-zA-Z_].*\(|Duration|Grid Size|Block Size|Cluster Size|Dynamic Shared|Registers Per" $W/ncu-torch.txt | grep -v -E "elementwise|distribution|vectorized|fill" | head -40
timeout 60 ncu --clock-control none -k regex:qc_fp8_gemm --launch-count 1 --section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis $B/bin/qcore gemm-bench --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1 > $W/ncu-ours.txt 2>&1; echo "ncu ours rc=$? $(el)"
grep -E "Duration|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Compute \(SM\)|Grid Size|Registers Per|L1/TEX Hit|L2 Hit" $W/ncu-ours.txt | head -20
tar -C $W -cJf $OUT/raw.tar.xz .
