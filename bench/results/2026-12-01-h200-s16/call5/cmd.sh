#!/bin/bash
# session 16 call 5: fp8 batch-1 decode with fp8.gemv1_tma_channel by where it triggers its dependents (FT_TRIGGER:
# 1 late = default, 0 never, 2 at the start) and on which layers (gate_up only, or every k <= 6144 layer); one trace
# (graphs off) of the default, kept whole for the gaps between launches
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
dec() { # label env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --concurrency 1 --output 64 --json $W/dec_$lab.json > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-12s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $W/dec_$lab.json $lab | tee -a $OUT/decode.txt
}
dec off QC_FP8T=off
dec late QC_FP8T=on
dec none QC_FP8_GEMV_OPTS=-DFT_TRIGGER=0
dec start QC_FP8_GEMV_OPTS=-DFT_TRIGGER=2
dec all_late QC_FP8T_MIN_N=1
dec all_none QC_FP8T_MIN_N=1 QC_FP8_GEMV_OPTS=-DFT_TRIGGER=0
dec off2 QC_FP8T=off
dec none2 QC_FP8_GEMV_OPTS=-DFT_TRIGGER=0
dec all_none2 QC_FP8T_MIN_N=1 QC_FP8_GEMV_OPTS=-DFT_TRIGGER=0
for t in on off; do
  QC_FP8T=$t QCORE_TRACE=$W/tr_$t.json timeout 90 $B/bin/qcore bench --model-config $L --format fp8 --prompt 16 --output 16 --concurrency 1 --no-graphs > /dev/null 2>&1
done
tar -C $W -cJf $OUT/raw.tar.xz .
