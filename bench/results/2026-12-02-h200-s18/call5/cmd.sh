#!/bin/bash
# session 18 call 5: test_gpu_fuse with the QC_GU_BF16 engine check's bounds set from call 4's measurement (worst row
# 1e-1 of its range, RMS 2e-2, top-1), then the fp8 prefill (committed defaults) twice more.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
timeout 150 $B/bin/test_gpu_fuse > $W/fuse.txt 2>&1; echo "test_gpu_fuse rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fuse.txt | head -5
grep -E "engine " $W/fuse.txt | cut -c1-220
for i in 1 2; do
  timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$i.txt 2>&1
  echo "prefill: $(grep -E '^ +[14] ' $W/pf-$i.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
tar -C $W -cJf $OUT/raw.tar.xz .
