#!/bin/bash
# session 17 call 4: the pair builds with the partner's empty-barrier arrival at default (CTA) release semantics
# instead of .release.cluster (call 3: the 2x was not residency; suspected: a cluster-scope fence on the consumers'
# path every stage): gemm-bench pair / unpaired, then correctness and the prefill A/B if it pays.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
gb() { # label env...
  local lab=$1; shift
  env "$@" timeout 60 $B/bin/qcore gemm-bench --m 1024,4096 --shapes 4096:4096,28672:4096 --formats fp8 --kernels $K > $W/gb-$lab.txt 2>&1
  echo "$lab: $(grep -E 'wgmma' $W/gb-$lab.txt | grep -v -E 'refused|activation' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"
}
K=fp8.gemm_channel_wgmma gb unpaired
K=fp8.gemm_channel_wgmma_pair gb pair
timeout 200 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$?"; grep -E "FAIL|passed" $W/fp8.txt | head -5
for f in fp8_pair:QC_FP8_PAIR=on fp8_nopair:QC_FP8_PAIR=off; do
  env ${f#*:} timeout 60 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-${f%%:*}.txt 2>&1
  echo "${f%%:*}: $(grep -E '^ +[14] ' $W/pf-${f%%:*}.txt | awk '{printf "c%s %s tok/s  ", $1, $5}')"
done
tar -C $W -cJf $OUT/raw.tar.xz .
