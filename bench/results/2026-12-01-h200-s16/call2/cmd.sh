#!/bin/bash
# session 16 call 2: fp8.gemv1_tma_* (new): correctness against the C reference and timings (test_gpu_fp8_gemv),
# gemm-bench M = 1 with the anchors' method (qcore only), fp8 batch-1 decode with and without it (QC_FP8T)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
timeout 240 $B/bin/test_gpu_fp8_gemv > $OUT/gemv.txt 2>&1; echo "gemv rc=$?"; grep -E "FAIL|passed|took" $OUT/gemv.txt | head -8; grep -c "gemv1_tma" $OUT/gemv.txt
grep -E "^  TIME .* channel m=1 " $OUT/gemv.txt | sed 's/  */ /g' | cut -c1-400
timeout 100 $B/bin/qcore gemm-bench --m 1,16 --formats fp8 > $OUT/gb.txt 2>&1; echo "gb rc=$?"
grep -E "^fp8 " $OUT/gb.txt | grep -v refused
for e in QC_FP8T=on QC_FP8T=off; do env $e timeout 50 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --concurrency 1 --output 64 --json $OUT/dec_${e#QC_FP8T=}.json > /dev/null 2>&1; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print(sys.argv[2], 'decode p50 %.3f ms, floor %.3f ms = %.1f%%' % (l['decode_step_ms'], d['decode_floor_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $OUT/dec_${e#QC_FP8T=}.json $e | tee -a $OUT/decode.txt; done
