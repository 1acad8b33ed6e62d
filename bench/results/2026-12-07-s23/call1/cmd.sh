#!/bin/bash
# session 23 call 1: w4a16.gemv1_xr_sym and mxfp4.gemv1_xr (x in registers) - their correctness through the plugins
# (test_gpu_w4a16_frag with QC_W4_XR_ONLY, test_gpu_mxfp4 --quick with QC_MXF_KERNELS), the probe's build variants
# beside gemv1 / gemv1_tma / a plain read (graph and memset timing), gemm-bench M = 1..16 beside the anchors, the
# batch-1 Llama-3-8B decode step with and without them.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w4; rm -rf $W; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
QC_W4_XR_ONLY=1 QC_W4_NO_TIMING=1 timeout 120 $B/bin/test_gpu_w4a16_frag > $W/frag.txt 2>&1; echo "test_gpu_w4a16_frag (xr only) rc=$? $(el)"; grep -E "FAIL|passed" $W/frag.txt | head -5
QC_MXF_KERNELS=mxfp4.gemv1_xr timeout 120 $B/bin/test_gpu_mxfp4 --quick > $W/mx.txt 2>&1; echo "test_gpu_mxfp4 (gemv1_xr) rc=$? $(el)"; grep -E "FAIL|passed" $W/mx.txt | head -5
(cd bench/probe && PYTHONUNBUFFERED=1 timeout 200 python3 probe_xr.py $W/probe > $W/probe.txt 2>&1); echo "probe rc=$? $(el)"
OUT=$W/gb M=1,2,4,8,16 timeout 150 bash bench/gemm_bench.sh $B/bin --formats w4a16,mxfp4,bf16 > $W/gb.log 2>&1; echo "gemm-bench rc=$? $(el)"
dec() { # label format env...
  local lab=$1 f=$2; shift 2
  env "$@" timeout 60 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format $f --concurrency 1 --output 64 --json $W/dec_$lab.json > $W/dec_$lab.txt 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['levels'][0]; print('%-12s decode p50 %.3f ms, %.1f%% of floor' % (sys.argv[2], l['decode_step_ms'], 100*d['decode_floor_ms']/l['decode_step_ms']))" $W/dec_$lab.json $lab | tee -a $W/decode.txt
}
dec w4 w4a16; dec w4_xoff w4a16 QC_W4X=off; dec w4_2 w4a16; dec w4_xoff2 w4a16 QC_W4X=off
dec mx mxfp4; dec mx_xoff mxfp4 QC_MXX=off
echo "decode $(el)"
unset QC_W4X
tar -C $W -cJf $OUT/out.tar.xz .
sed -n '/^shape/,$p' $W/probe.txt
grep -E "^\| (qkv|o|gate_up|down)" $W/gb/ratios.md | head -40
