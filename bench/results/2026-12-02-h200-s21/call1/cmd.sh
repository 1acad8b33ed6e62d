#!/bin/bash
# session 21 call 1: (a) the two-accumulator path's new options at 128 columns forced: FP8_PRE2 (the next tile's first
# two stages issued before the epilogue) and FP8_PHASE (consumer 1 half a pair behind); (b) the tile walk's group
# (WG_GROUP_M 4 / 8 / 16) with the default plan; (c) ncu --set full, raw page: ours (o 1024 at 256 and at 128
# columns, qkv 1024) and cuBLASLt's nvjet kernel (o, qkv 1024), same clocks policy (none).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=$OUT; mkdir -p $W/ncu
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
run() { # name, env..., then gemm-bench args after --
  local name=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 60 $B/bin/qcore gemm-bench --out bf16 --iters 20 --formats fp8 --kernels fp8.gemm_channel_wgmma "$@" > $W/$name.txt 2>&1
  echo "$name: $(gb $W/$name.txt)"
}
for v in "base:" "pre2:-DFP8_PRE2=1" "phase:-DFP8_PHASE=1" "pre2phase:-DFP8_PRE2=1 -DFP8_PHASE=1"; do
  run "c128-${v%%:*}" QC_FP8_BN_EFF=0,0,0,1 "QC_FP8_WGMMA_OPTS=${v#*:}" -- --m 1024,2048 --shapes 4096:4096,6144:4096
done
echo "$(el)"
for v in "base:" "pre2:-DFP8_PRE2=1" "g4:-DWG_GROUP_M=4" "g16:-DWG_GROUP_M=16" "base2:"; do
  run "def-${v%%:*}" "QC_FP8_WGMMA_OPTS=${v#*:}" -- --m 1024,2048
done
echo "$(el)"
nc() { local name=$1; shift; timeout 100 ncu --clock-control none --set full --page raw -k regex:qc_fp8_gemm --launch-skip 1 --launch-count 1 "$@" > $W/ncu/$name.txt 2>&1; echo "ncu $name rc=$? $(el)"; }
nc ours-o-256 $B/bin/qcore gemm-bench --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1
QC_FP8_BN_EFF=0,0,0,1 nc ours-o-128 $B/bin/qcore gemm-bench --m 1024 --shapes 4096:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1
nc ours-qkv $B/bin/qcore gemm-bench --m 1024 --shapes 6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma --out bf16 --iters 1
timeout 100 ncu --clock-control none --set full --page raw -k regex:nvjet python3 bench/probe/scaled_mm_once.py 1024x4096x4096 1024x6144x4096 > $W/ncu/cublas.txt 2>&1; echo "ncu cublas rc=$? $(el)"
for f in $W/ncu/*.txt; do echo "$(basename $f): $(grep -E ' sm__cycles_elapsed.avg |smsp__cycles_active.avg |gpc__cycles_elapsed.avg.per_second ' $f | awk '{printf "%s=%s ", $1, $NF}')"; done
xz -9 $W/ncu/*.txt
