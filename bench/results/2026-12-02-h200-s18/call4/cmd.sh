#!/bin/bash
# session 18 call 4: test_gpu_fuse with the engine check of QC_GU_BF16 (fp8 prefill logits with gate_up as bf16 against
# f32: moved, within 2e-2, top-1 kept), then more prefill samples of the committed defaults (bf16 gate_up) and off.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
timeout 150 $B/bin/test_gpu_fuse > $W/fuse.txt 2>&1; echo "test_gpu_fuse rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fuse.txt | head -5
grep -E "engine " $W/fuse.txt | cut -c1-200
for a in on off on on; do
  QC_GU_BF16=$a timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$a-$(date +%s).txt 2>&1
  echo "prefill gu_bf16=$a: $(grep -E '^ +[14] ' $(ls -t $W/pf-$a-*.txt | head -1) | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
tar -C $W -cJf $OUT/raw.tar.xz .
