#!/bin/bash
# session 16 call 1: session 15's mxfp4.gemv1_tma with x in shared memory (patch never run on a GPU): its correctness
# cases, gemm-bench M = 1 of both formats' m = 1 kernels, the mxfp4 decode A/B; then an fp8 baseline with the anchors
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_MXF_KERNELS=mxfp4.gemv1_tma,mxfp4.gemv1 timeout 100 $B/bin/test_gpu_mxfp4 --quick > $OUT/mx.txt 2>&1; echo "mx rc=$?"; grep -E "FAIL|passed|took" $OUT/mx.txt | head -8; grep -c "gemv1_tma" $OUT/mx.txt
timeout 100 $B/bin/qcore gemm-bench --m 1 --formats w4a16,mxfp4 --kernels w4a16.gemv1_tma_sym,w4a16.gemv1_sym,mxfp4.gemv1_tma,mxfp4.gemv1 > $OUT/gb.txt 2>&1; echo "gb rc=$?"
grep -E "^(w4a16|mxfp4) " $OUT/gb.txt | grep -v refused
for e in QC_MXT=on QC_MXT=off; do env $e timeout 50 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format mxfp4 --concurrency 1 --output 64 --json $OUT/dec_${e#QC_MXT=}.json > /dev/null 2>&1; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print(sys.argv[2], 'decode p50 %.3f ms, floor %.3f ms = %.1f%%' % (l['decode_step_ms'], d['decode_floor_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $OUT/dec_${e#QC_MXT=}.json $e | tee -a $OUT/decode.txt; done
OUT=$OUT/fp8 M=1,16,1024,4096 timeout 300 bash bench/gemm_bench.sh $B/bin --formats fp8 > $OUT/fp8.log 2>&1; echo "fp8 gb rc=$?"
tail -30 $OUT/fp8/ratios.md
