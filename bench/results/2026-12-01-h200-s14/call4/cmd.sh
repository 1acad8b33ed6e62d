#!/bin/bash
# session 14 call 4: the plan's split sweep: w4a16.wgmma_bf16_sym with the tile height and the ways forced
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device
mkdir -p $OUT/sw; $B/bin/qcore gemm-bench --m 64,128,256,512,768,1024 --formats w4a16 --kernels w4a16.wgmma_bf16_sym --json $OUT/sw/plan.json > $OUT/sw/plan.txt 2>&1
for bm in 64 128 256; do for sp in 1 2 3 4 6 8; do
  QC_W4BW_BM=$bm QC_RA_SPLIT=$sp $B/bin/qcore gemm-bench --m 64,128,256,512,768,1024 --formats w4a16 --kernels w4a16.wgmma_bf16_sym --json $OUT/sw/bm${bm}_sp${sp}.json > $OUT/sw/bm${bm}_sp${sp}.txt 2>&1 || echo "fail $bm $sp"
done; done
tar -C $OUT -czf $OUT/sweep.tgz sw && rm -rf $OUT/sw; echo done
