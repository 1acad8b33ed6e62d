#!/bin/bash
# session 21 call 3: the epilogue split by kind of output (call 2: 5-10% faster at M 2048 / 4096) and now also a copy
# for tiles wholly below n with no test per chunk: test_gpu_fp8; A/B against the old epilogue (FP8_EPI_SPLIT=0);
# gemm-bench beside torch._scaled_mm (bf16 rows, channel and block); prefill 2048; test_gpu_engine.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
QC_TEST_NO_TIMINGS=1 timeout 110 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
for v in "s0:-DFP8_EPI_SPLIT=0" "s1:" "s0b:-DFP8_EPI_SPLIT=0" "s1b:"; do
  QC_FP8_WGMMA_OPTS="${v#*:}" timeout 90 $B/bin/qcore gemm-bench --out bf16 --iters 20 --m 1024,2048,4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/ch-${v%%:*}.txt 2>&1
  echo "ch ${v%%:*}: $(gb $W/ch-${v%%:*}.txt) $(el)"
done
tar -C $W -cJf $OUT/ab.tar.xz .
OUT=$W/gb M=1024,2048,4096 timeout 220 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --out bf16 > $W/gb.log 2>&1
echo "gemm-bench rc=$? $(el)"; grep -E 'scaled_mm' $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s %s\n", $2, $3, $4, $6, $11, $12}'
tar -C $W -cJf $OUT/gb.tar.xz gb gb.log
timeout 90 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf.txt 2>&1
echo "prefill: $(grep -E '^ +[14] ' $W/pf.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') $(el)"
timeout 80 $B/bin/test_gpu_engine > $W/engine.txt 2>&1; echo "test_gpu_engine rc=$? $(grep -E 'passed' $W/engine.txt | tail -1) $(el)"
tar -C $W -cJf $OUT/rest.tar.xz pf.txt engine.txt fp8.txt
