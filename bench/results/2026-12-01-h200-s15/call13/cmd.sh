#!/bin/bash
# session 15 call 13: w4a16.gemv1_tma_sym in the plugin: its GPU correctness cases, the batch-1 decode step with and
# without it (QC_W4T=off), gemm-bench at M = 1 with the anchors, the engine test
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
QC_W4_NO_TIMING=1 timeout 150 $B/bin/test_gpu_w4a16_frag > $OUT/frag.txt 2>&1; echo "frag rc=$?"; grep -E "FAIL|passed|took" $OUT/frag.txt | head -8; grep -c "gemv1_tma_sym" $OUT/frag.txt
for e in QC_W4T=on QC_W4T=off QC_W4T=on QC_W4T=off; do env $e timeout 60 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format w4a16 --concurrency 1 --output 64 --json $OUT/dec_${e#QC_W4T=}.json > /dev/null 2>&1; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print(sys.argv[2], 'decode p50 %.3f ms, floor %.3f ms = %.1f%%' % (l['decode_step_ms'], d['decode_floor_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $OUT/dec_${e#QC_W4T=}.json $e | tee -a $OUT/decode.txt; done
OUT=$OUT/gb M=1 timeout 120 bash bench/gemm_bench.sh $B/bin --formats w4a16 --kernels w4a16.gemv1_tma_sym,w4a16.gemv1_sym > $OUT/gb.log 2>&1; echo "gb rc=$?"
rm -f $OUT/gb/anchors.log
grep "^|" $OUT/gb.log | head -30
timeout 110 $B/bin/test_gpu_engine > $OUT/engine.txt 2>&1; echo "engine rc=$?"; grep -E "FAIL|passed" $OUT/engine.txt | head -5
