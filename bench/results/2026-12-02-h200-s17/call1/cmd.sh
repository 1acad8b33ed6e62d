#!/bin/bash
# session 17 call 1 (= session 16 call 7, not run then): the final defaults (the three TMA-ring GEMVs with no PDL trigger, on every layer they fit):
# test_gpu_engine (logits bit for bit across graphs and PDL), the TMA GEMVs' GPU tests, batch-1 decode of w4a16, mxfp4,
# fp8 with and without them.  Not run in session 16 (no device time left): the first call of the next session.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
dec() { # label format env...
  local lab=$1 f=$2; shift 2
  env "$@" timeout 60 $B/bin/qcore bench --model-config $L --format $f --concurrency 1 --output 64 --json $W/dec_$lab.json > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-12s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $W/dec_$lab.json $lab | tee -a $OUT/decode.txt
}
dec w4 w4a16
dec w4_off w4a16 QC_W4T=off
dec mx mxfp4
dec mx_off mxfp4 QC_MXT=off
dec fp8 fp8
dec fp8_off fp8 QC_FP8T=off
timeout 150 $B/bin/test_gpu_engine > $W/engine.txt 2>&1; echo "engine rc=$?"; grep -E "FAIL|passed" $W/engine.txt | head -5
QC_W4_NO_TIMING=1 timeout 200 $B/bin/test_gpu_w4a16_frag > $W/w4frag.txt 2>&1; echo "w4a16_frag rc=$?"; grep -E "FAIL|passed" $W/w4frag.txt | head -3
QC_MXF_KERNELS=mxfp4.gemv1_tma,mxfp4.gemv1 timeout 100 $B/bin/test_gpu_mxfp4 --quick > $W/mx.txt 2>&1; echo "mxfp4 rc=$?"; grep -E "FAIL|passed" $W/mx.txt | head -3
tar -C $W -cJf $OUT/raw.tar.xz .
