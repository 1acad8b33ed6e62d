#!/bin/bash
# session 16 call 3: why the fp8 decode step got slower with fp8.gemv1_tma_channel on gate_up (call 2: 3.655 against
# 3.229 ms): per-kernel trace with and without it, and the step with PDL off and with graphs off
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json
dec() { # label, env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --concurrency 1 --output 64 --json $OUT/dec_$lab.json > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-10s decode p50 %.3f ms' % (sys.argv[2], l['decode_step_ms']))" $OUT/dec_$lab.json $lab | tee -a $OUT/decode.txt
}
for t in on off; do
  QC_FP8T=$t QCORE_TRACE=$OUT/tr_$t.json timeout 90 $B/bin/qcore bench --model-config $L --format fp8 --prompt 16 --output 64 --concurrency 1 --no-graphs > /dev/null 2>&1
  python3 bench/trace_summary.py $OUT/tr_$t.json --top 14 > $OUT/tr_$t.txt 2>&1; echo "== trace QC_FP8T=$t"; cat $OUT/tr_$t.txt; rm -f $OUT/tr_$t.json
done
dec on QC_FP8T=on
dec off QC_FP8T=off
dec on_nopdl QC_FP8T=on QC_PDL=0
dec off_nopdl QC_FP8T=off QC_PDL=0
