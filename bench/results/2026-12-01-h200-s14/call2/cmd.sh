#!/bin/bash
# session 14 call 2: the two-counter split protocol (the last of two keeps its sums), the bf16 w4a16 kernel at every m
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_MXF_KERNELS=mxfp4.wgmma $B/bin/test_gpu_mxfp4 --quick > $OUT/mx.txt 2>&1; echo "mx rc=$?"; grep -E "FAIL|passed" $OUT/mx.txt | head -20
QC_W4_BF16_ONLY=1 QC_W4_NO_TIMING=1 $B/bin/test_gpu_w4a16_wgmma > $OUT/w4.txt 2>&1; echo "w4 rc=$?"; grep -E "FAIL|passed|took" $OUT/w4.txt | head -20
OUT=$OUT/gb M=32,64,128,256,512,1024,2048,4096 bash bench/gemm_bench.sh $B/bin --formats bf16,w4a16,mxfp4 --kernels bf16.linear_wgmma,w4a16.wgmma_bf16_sym,w4a16.wgmma_sym,mxfp4.wgmma > $OUT/gb.log 2>&1; echo "gb rc=$?"
rm -f $OUT/gb/gemm.txt $OUT/gb/anchors.log
$B/bin/test_gpu_engine > $OUT/engine.txt 2>&1; echo "engine rc=$?"; grep -E "FAIL|passed" $OUT/engine.txt | head
for f in w4a16 mxfp4; do $B/bin/qcore bench --model-config configs/llama-3-8b.json --format $f --prompt 2048 --output 2 --concurrency 1,4 > $OUT/pf_$f.txt 2>&1; echo "pf $f rc=$?"; grep -iE "tok/s|prefill" $OUT/pf_$f.txt | tail -3; done
grep "^|" $OUT/gb.log | grep -E "qkv|o \|" | cut -d'|' -f2-9 | head -40
