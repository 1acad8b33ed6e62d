#!/bin/bash
# session 23 call 2: call 1's comparison on an H200 if one comes (call 1 ran on an H100): the probe (gemv1_xr
# variants beside gemv1 / gemv1_tma / a plain read), the batch-1 decode with the opt-in kernels on and off.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
(cd bench/probe && VARS='[[2,0,0,16],[3,0,0,16],[2,1,0,16],[2,0,0,8]]' PYTHONUNBUFFERED=1 timeout 150 python3 probe_xr.py $W/probe > $W/probe.txt 2>&1); echo "probe rc=$? $(el)"
dec() { # label format env...
  local lab=$1 f=$2; shift 2
  env "$@" timeout 60 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format $f --concurrency 1 --output 64 --json $W/dec_$lab.json > $W/dec_$lab.txt 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-12s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $W/dec_$lab.json $lab | tee -a $W/decode.txt
}
dec w4 w4a16; dec w4_xon w4a16 QC_W4X=on; dec w4_2 w4a16; dec w4_xon2 w4a16 QC_W4X=on
echo "decode $(el)"
tar -C $W -cJf $OUT/out.tar.xz .
sed -n '/^shape/,$p' $W/probe.txt
