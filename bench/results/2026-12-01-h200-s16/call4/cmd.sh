#!/bin/bash
# session 16 call 4: the TMA-ring GEMVs trigger their dependents at the end of their stages instead of at the start
# (call 3: fp8 decode 3.642 ms with it on gate_up against 3.251 off, 3.203 / 3.318 with PDL off).  fp8 GEMV tests again,
# then batch-1 decode A/B for fp8 (off, gate_up only, every k <= 6144 layer), w4a16 and mxfp4 (each on / off)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json
timeout 240 $B/bin/test_gpu_fp8_gemv > $OUT/gemv.txt 2>&1; echo "gemv rc=$?"; grep -E "FAIL|passed" $OUT/gemv.txt | head -4
grep -E "^  TIME .* channel m=1 " $OUT/gemv.txt | sed 's/  */ /g' | cut -c1-330
dec() { # label format env...
  local lab=$1 f=$2; shift 2
  env "$@" timeout 60 $B/bin/qcore bench --model-config $L --format $f --concurrency 1 --output 64 --json $OUT/dec_$lab.json > /dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-14s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $OUT/dec_$lab.json $lab | tee -a $OUT/decode.txt
}
dec fp8_off fp8 QC_FP8T=off
dec fp8_on fp8 QC_FP8T=on
dec fp8_all fp8 QC_FP8T_MIN_N=1
dec fp8_off2 fp8 QC_FP8T=off
dec fp8_on2 fp8 QC_FP8T=on
dec fp8_all2 fp8 QC_FP8T_MIN_N=1
dec w4_on w4a16 QC_W4T=on
dec w4_off w4a16 QC_W4T=off
dec mx_on mxfp4 QC_MXT=on
dec mx_off mxfp4 QC_MXT=off
