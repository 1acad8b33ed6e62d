#!/bin/bash
# session 19 call 6 (NOT RUN: no device time left): the final defaults (block builds without 192: 256 / 128): test_gpu_fp8 (correctness only) and the
# block GEMM's times beside channel's, bf16 rows.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
QC_TEST_NO_TIMINGS=1 timeout 95 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
timeout 25 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.txt 2>&1
echo "$(grep -E 'wgmma' $W/gb.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
# (next session) does the channel build's 192 path slow down beside 256 as the block's 256 path did beside 192?
# qkv 1024 takes 192: 52.5 us in session 19 against ~49.3 in session 18's build without 256.
for e in default:- d192-128:0,100,0,90 d192:0,1,0,0; do
  if [ "${e#*:}" = - ]; then unset QC_FP8_BN_EFF; else export QC_FP8_BN_EFF=${e#*:}; fi
  timeout 25 $B/bin/qcore gemm-bench --m 1024,2048 --shapes 6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 > $W/qkv-${e%%:*}.txt 2>&1
  echo "qkv ${e%%:*}: $(grep -E 'wgmma' $W/qkv-${e%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
done
unset QC_FP8_BN_EFF
tar -C $W -cJf $OUT/raw.tar.xz .
