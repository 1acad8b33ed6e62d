#!/bin/bash
# session 22 call 6: fp8 at M = 1-16 beside the anchors (issue 7's "M <= 16 at 75% of the floor"), the committed
# defaults (0742d7a), every fp8 kernel the plan allows (the table takes the fastest)
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w6; rm -rf $W; mkdir -p $W
OUT=$W/gb M=1,2,4,8,16 timeout 250 bash bench/gemm_bench.sh $B/bin --formats fp8 --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$?"; grep -E '^\| fp8' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s %s\n", $3, $4, $5, $6, $16, $17, $18}'
tar -C $W -cJf $OUT/out.tar.xz .
