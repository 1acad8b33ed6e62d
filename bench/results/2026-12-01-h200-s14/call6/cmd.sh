#!/bin/bash
# session 14 call 6: the final build (3883628): GPU tests of the skeleton, gemm-bench with the anchors, prefill
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_MXF_KERNELS=mxfp4.wgmma $B/bin/test_gpu_mxfp4 --quick > $OUT/mx.txt 2>&1; echo "mx rc=$?"; grep -E "FAIL|passed" $OUT/mx.txt | head -20
QC_W4_BF16_ONLY=1 QC_W4_NO_TIMING=1 $B/bin/test_gpu_w4a16_wgmma > $OUT/w4.txt 2>&1; echo "w4 rc=$?"; grep -E "FAIL|passed|took" $OUT/w4.txt | head -20
OUT=$OUT/gb M=64,256,1024,2048,4096 bash bench/gemm_bench.sh $B/bin --formats w4a16,mxfp4 --kernels w4a16.wgmma_bf16_sym,mxfp4.wgmma > $OUT/gb.log 2>&1; echo "gb rc=$?"
rm -f $OUT/gb/gemm.txt $OUT/gb/anchors.log $OUT/gb/ratios.md
grep "^|" $OUT/gb.log | grep -E "w4a16|mxfp4" | cut -d'|' -f2-9,17
