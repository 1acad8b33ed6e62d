#!/bin/bash
# session 20 call 7 (warm, right after call 6): gate_up 4096 was 875 us in call 6's gemm-bench (anchor 834): run to
# run, or the two-accumulator 128 path's code beside the 256 path?  Default (FP8_DBL128=1) / 0 / 1, one call.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done; export QCORE_CACHE_DIR=/tmp/kc; for o in "-DFP8_DBL128=1" "-DFP8_DBL128=0" "-DFP8_DBL128=1"; do QC_FP8_WGMMA_OPTS="$o" timeout 40 .device/bin/qcore gemm-bench --out bf16 --m 1024,4096 --shapes 28672:4096,6144:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $OUT/g$RANDOM.txt 2>&1; echo "$o: $(grep -E 'wgmma' $(ls -t $OUT/g*.txt | head -1) | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"; done
# output:
# -DFP8_DBL128=1: 28672x4096/1024 197.2  28672x4096/4096 788.1  6144x4096/1024 50.3  6144x4096/4096 170.1
# -DFP8_DBL128=0: 28672x4096/1024 200.2  28672x4096/4096 886.8  6144x4096/1024 54.9  6144x4096/4096 172.8
# -DFP8_DBL128=1: 28672x4096/1024 197.1  28672x4096/4096 779.1  6144x4096/1024 50.9  6144x4096/4096 170.4
