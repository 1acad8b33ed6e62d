#!/bin/bash
# session 16 call 6: fp8 decode with the new defaults (fp8.gemv1_tma_* on every k <= 6144 layer, no trigger); w4a16 and
# mxfp4 batch-1 decode by their TMA GEMV's trigger (QC_W4T_TRIGGER / QC_MXT_TRIGGER: 1 late = current default, 0 never,
# 2 start) and layers (gate_up only, or every layer it fits: QC_W4T_MIN_N / QC_MXT_MIN_N = 1)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
dec() { # label format env...
  local lab=$1 f=$2; shift 2
  env "$@" timeout 60 $B/bin/qcore bench --model-config $L --format $f --concurrency 1 --output 64 --json $W/dec_$lab.json > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-12s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $W/dec_$lab.json $lab | tee -a $OUT/decode.txt
}
dec fp8_def fp8
dec fp8_off fp8 QC_FP8T=off
dec w4_off w4a16 QC_W4T=off
dec w4_t1 w4a16
dec w4_t0 w4a16 QC_W4T_TRIGGER=0
dec w4_t0all w4a16 QC_W4T_TRIGGER=0 QC_W4T_MIN_N=1
dec w4_t1all w4a16 QC_W4T_MIN_N=1
dec mx_off mxfp4 QC_MXT=off
dec mx_t1 mxfp4
dec mx_t0 mxfp4 QC_MXT_TRIGGER=0
dec mx_t0all mxfp4 QC_MXT_TRIGGER=0 QC_MXT_MIN_N=1
dec w4_t0b w4a16 QC_W4T_TRIGGER=0
dec w4_t1b w4a16
dec mx_t0b mxfp4 QC_MXT_TRIGGER=0
dec fp8_def2 fp8
tar -C $W -cJf $OUT/raw.tar.xz .
