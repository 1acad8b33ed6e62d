#!/bin/bash
# session 14 call 1: the register-A skeleton's last-wave split (correctness, then A/B timings)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_MXF_KERNELS=mxfp4.wgmma $B/bin/test_gpu_mxfp4 --quick > $OUT/mx.txt 2>&1; echo "mx rc=$?"; grep -E "FAIL|passed" $OUT/mx.txt | head -20
QC_W4_BF16_ONLY=1 QC_W4_NO_TIMING=1 $B/bin/test_gpu_w4a16_wgmma > $OUT/w4.txt 2>&1; echo "w4 rc=$?"; grep -E "FAIL|passed|took" $OUT/w4.txt | head -20
# same call: anchors + split (plan) for all; bf16 kernel allowed everywhere
QC_W4BW_MIN_TILES=0 OUT=$OUT/gb M=64,128,256,512,1024,2048,4096 bash bench/gemm_bench.sh $B/bin --formats bf16,w4a16,mxfp4 --kernels bf16.linear_wgmma,w4a16.wgmma_bf16_sym,w4a16.wgmma_sym,mxfp4.wgmma > $OUT/gb.log 2>&1; echo "gb rc=$?"
# A/B: no split
QC_RA_SPLIT=1 QC_W4BW_MIN_TILES=0 $B/bin/qcore gemm-bench --m 64,128,256,512,1024,2048,4096 --formats w4a16,mxfp4 --kernels w4a16.wgmma_bf16_sym,mxfp4.wgmma --json $OUT/nosplit.json > $OUT/nosplit.txt 2>&1; echo "ns rc=$?"
# fmin
QC_W4BW_MIN_TILES=0 $B/bin/qcore gemm-bench --m 64,256,1024,2048,4096 --formats w4a16:fmin --kernels w4a16.wgmma_bf16_fmin,w4a16.mma_fmin --json $OUT/fmin.json > $OUT/fmin.txt 2>&1; echo "fmin rc=$?"
tail -40 $OUT/gb/ratios.md
