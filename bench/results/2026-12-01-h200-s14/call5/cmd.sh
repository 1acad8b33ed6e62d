#!/bin/bash
# session 14 call 5: the two-a-SM variants for m <= 64 (mxfp4.wgmma_m64, w4a16.wgmma_bf16_m64_*): correctness, timing
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_MXF_KERNELS=mxfp4.wgmma,mxfp4.wgmma_m64 $B/bin/test_gpu_mxfp4 --quick > $OUT/mx.txt 2>&1; echo "mx rc=$?"; grep -E "FAIL|passed" $OUT/mx.txt | head -20
QC_W4_BF16_ONLY=1 QC_W4_NO_TIMING=1 $B/bin/test_gpu_w4a16_wgmma > $OUT/w4.txt 2>&1; echo "w4 rc=$?"; grep -E "FAIL|passed|took" $OUT/w4.txt | head -20
OUT=$OUT/gb M=17,32,48,64 bash bench/gemm_bench.sh $B/bin --formats w4a16,mxfp4 --kernels w4a16.wgmma_bf16_m64_sym,w4a16.wgmma_bf16_sym,w4a16.wgmma_sym,mxfp4.wgmma_m64,mxfp4.wgmma > $OUT/gb.log 2>&1; echo "gb rc=$?"
rm -f $OUT/gb/gemm.txt $OUT/gb/anchors.log $OUT/gb/ratios.md
grep -E "^(w4a16|mxfp4) " $OUT/gb.log | awk '{print $1, $2, $3, $4, $5}' | sort -k3,3 -k4,4n -k2,2 | head -80
