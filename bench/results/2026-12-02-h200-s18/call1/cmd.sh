#!/bin/bash
# session 18 call 1: gate_up written as bf16 (plugin.h's optional "y.bf16" output of the fp8 wgmma GEMMs) and read so
# by SwiGLU (in_bf16).  Correctness (test_gpu_fp8: every wgmma output also as bf16, bit for bit bf16(its f32 output);
# test_gpu_fuse / test_gpu_kernels: SwiGLU from bf16 against the C reference; test_gpu_engine), then the fp8 prefill
# of 2048 tokens with QC_GU_BF16 on (default) and off, and the traced kernel times of one prefill each.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
for a in on off; do
  QC_GU_BF16=$a timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$a.txt 2>&1
  echo "prefill gu_bf16=$a: $(grep -E '^ +[14] ' $W/pf-$a.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
for a in on off; do
  QC_GU_BF16=$a QCORE_TRACE=$W/trace-$a.json timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1 > $W/pft-$a.txt 2>&1
done
for a in on off; do python3 bench/trace_summary.py $W/trace-$a.json --min-m 2048 --top 12 > $W/trace-$a-summary.txt 2>&1; echo "trace gu_bf16=$a:"; head -16 $W/trace-$a-summary.txt | cut -c1-120; done
timeout 200 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
grep -c "y.bf16: .* 0 differ" $W/fp8.txt
timeout 90 $B/bin/test_gpu_fuse > $W/fuse.txt 2>&1; echo "test_gpu_fuse rc=$?"; grep -E "FAIL|passed" $W/fuse.txt | head -5
grep -E "swiglu.bf16 .*m=2048|swiglu e4m3.token m=2048" $W/fuse.txt | grep plain | cut -c1-200
timeout 60 $B/bin/test_gpu_kernels > $W/kern.txt 2>&1; echo "test_gpu_kernels rc=$?"; grep -E "FAIL|passed" $W/kern.txt | head -5
timeout 120 $B/bin/test_gpu_engine > $W/eng.txt 2>&1; echo "test_gpu_engine rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/eng.txt | head -5
tar -C $W -cJf $OUT/raw.tar.xz .
