#!/bin/bash
# session 20 call 2: W's TMA box rows (QC_FP8_WBOX: 32 = the default, 64, 128, 256): fewer, larger copies a stage.
# cuBLASLt's kernel at o / qkv 1024 (call 1, ncu) is nvjet 128x128x128, 6 stages, no cluster, at 28 us against our
# 35 us, whose copies alone take 0.57 us a 48 KiB stage (9 TMA copies: one x box, eight 32-row W boxes).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; echo " $(grep -c WRONG "$1") wrong"; }
run() { # name, env..., then -- gemm-bench args
  local name=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 60 $B/bin/qcore gemm-bench --out bf16 "$@" > $W/$name.txt 2>&1; echo "$name: $(gb $W/$name.txt)"
}
# copies alone, o 1024 (and the 128 width forced)
for b in 32 64 128 256; do run copies-b$b QC_FP8_WBOX=$b QC_FP8_BN_EFF=1,0,0,0 "QC_FP8_WGMMA_OPTS=-DFP8_SKIP_EPI=1 -DFP8_SKIP_MMA=1" -- --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma; done
for b in 32 128; do run copies128-b$b QC_FP8_WBOX=$b QC_FP8_BN_EFF=0,0,0,1 "QC_FP8_WGMMA_OPTS=-DFP8_SKIP_EPI=1 -DFP8_SKIP_MMA=1" -- --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma; done
echo "$(el)"
# full GEMMs, channel: default widths with 32 / 64 boxes; 256 + 128 with 128 boxes; 128 forced with 32 / 128
run ch-b32 QC_FP8_WBOX=32 -- --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
run ch-b64 QC_FP8_WBOX=64 -- --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
run ch-b128-256_128 QC_FP8_WBOX=128 QC_FP8_BN_EFF=110,0,0,90 -- --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
run ch-b32-256_128 QC_FP8_WBOX=32 QC_FP8_BN_EFF=110,0,0,90 -- --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
run ch128-b32 QC_FP8_WBOX=32 QC_FP8_BN_EFF=0,0,0,1 -- --m 1024,2048 --shapes 4096:4096,6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
run ch128-b128 QC_FP8_WBOX=128 QC_FP8_BN_EFF=0,0,0,1 -- --m 1024,2048 --shapes 4096:4096,6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma
echo "$(el)"
# block: 32 / 64 / 128 boxes (its build: 256 + 128)
run bl-b32 QC_FP8_WBOX=32 -- --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma
run bl-b64 QC_FP8_WBOX=64 -- --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma
run bl-b128 QC_FP8_WBOX=128 -- --m 1024,2048,4096 --formats fp8:block --kernels fp8.gemm_block_wgmma
echo "$(el)"
tar -C $W -cJf $OUT/raw.tar.xz .
