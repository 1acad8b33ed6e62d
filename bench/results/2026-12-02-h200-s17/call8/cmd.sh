#!/bin/bash
# session 17 call 8: the fp8 wgmma GEMMs with an explicit wgmma wait at the end of each tile (ptxas had injected one
# in a divergent path and serialized every wgmma of the tensor and block builds, C7518; the pair builds, C7512):
# test_gpu_fp8, gemm-bench of channel and block scales (M 1024-4096), the pair builds again (QC_FP8_PAIR=on).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
timeout 150 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$?"; grep -E "FAIL|passed" $W/fp8.txt | head -5
grep -E "TIME .*(1024|4096)" $W/fp8.txt | awk '{print $2, $3, $4, $7, $8, $NF, $(NF-1), $(NF-2), $(NF-3), $(NF-4)}' | cut -c1-150
timeout 90 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block > $W/gb.txt 2>&1; echo "gb rc=$?"
grep -E "wgmma" $W/gb.txt | grep -v -E "refused|activation" | awk '{printf "%s/%s/%s %s\n", $2, $3, $4, $5}' | paste -sd' '
QC_FP8_PAIR=on timeout 60 $B/bin/qcore gemm-bench --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma_pair,fp8.gemm_channel_wgmma > $W/gbp.txt 2>&1
grep -E "wgmma" $W/gbp.txt | grep -v -E "refused|activation" | awk '{printf "%s/%s/%s %s\n", $2, $3, $4, $5}' | paste -sd' '
tar -C $W -cJf $OUT/raw.tar.xz .
