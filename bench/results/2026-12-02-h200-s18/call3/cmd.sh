#!/bin/bash
# session 18 call 3: SwiGLU + quantize from bf16 gate / up with twice the chunks in flight (its 8-byte loads carried
# half the bytes of the f32 path's: 83.8 us against 90.9 in call 1 for half the input).  test_gpu_fuse (correctness
# and the 2048 x 14336 timings), the fp8 prefill with QC_GU_BF16 on / off, test_gpu_engine.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
for a in on off on; do
  QC_GU_BF16=$a timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$a.txt 2>&1
  echo "prefill gu_bf16=$a: $(grep -E '^ +[14] ' $W/pf-$a.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
timeout 120 $B/bin/test_gpu_fuse > $W/fuse.txt 2>&1; echo "test_gpu_fuse rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fuse.txt | head -5
grep -E "swiglu(.bf16)? .*m=2048" $W/fuse.txt | grep plain | cut -c1-190
timeout 150 $B/bin/test_gpu_engine > $W/eng.txt 2>&1; echo "test_gpu_engine rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/eng.txt | head -5
tar -C $W -cJf $OUT/raw.tar.xz .
