#!/bin/bash
# session 21 call 4: the register-A GEMM skeleton (w4a16.wgmma_bf16_*, mxfp4.wgmma) stores a tile wholly inside y
# without a test per value (2 instructions a store instead of 6-7; the fp8 GEMM's interleaved epilogue cost it a
# third of its samples in instruction fetch, calls 1-3).  Correctness (test_gpu_w4a16_wgmma, test_gpu_mxfp4), A/B
# against the previous plugins (.device/oldplug: the same build with the old skeleton), then gemm-bench beside the
# anchors (cuBLAS bf16) at M 64-4096.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W; P=$(cat $B/bin/plugin_dir.txt)
use() { ln -sfn "$PWD/$1" "$P"; }
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,1,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_w4a16_wgmma > $W/w4w.txt 2>&1; echo "test_gpu_w4a16_wgmma rc=$? $(grep -E 'passed' $W/w4w.txt | tail -1) $(el)"
QC_TEST_NO_TIMINGS=1 timeout 100 $B/bin/test_gpu_mxfp4 > $W/mx.txt 2>&1; echo "test_gpu_mxfp4 rc=$? $(grep -E 'passed' $W/mx.txt | tail -1) $(el)"
for rep in a b; do for v in old:$B/oldplug new:$B/bin/plugins; do
  use ${v#*:}
  timeout 120 $B/bin/qcore gemm-bench --iters 20 --m 64,256,1024,2048,4096 --formats w4a16,mxfp4 --kernels w4a16.wgmma_bf16_sym,mxfp4.wgmma > $W/ab-${v%%:*}-$rep.txt 2>&1
  echo "${v%%:*} $rep: $(gb $W/ab-${v%%:*}-$rep.txt) $(el)"
done; done
use $B/bin/plugins
tar -C $W -cJf $OUT/ab.tar.xz .
OUT=$W/gb M=64,256,1024,2048,4096 timeout 250 bash bench/gemm_bench.sh $B/bin --formats w4a16,mxfp4 --kernels w4a16.wgmma_bf16_sym,mxfp4.wgmma > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E '^\| (w4a16|mxfp4) ' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $8, $9}'
tar -C $W -cJf $OUT/gb.tar.xz gb gb.log
