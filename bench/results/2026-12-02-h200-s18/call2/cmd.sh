#!/bin/bash
# session 18 call 2: bf16 output rows staged in shared memory and copied out with cp.async.bulk (call 1's direct
# 4-byte bf16 stores made gate_up 2% slower than f32 rows).  test_gpu_fp8 (every wgmma output also as bf16, bit for
# bit bf16 of its f32 output; n % 8 == 0 takes the staged path), test_gpu_kernels; the fp8 prefill with QC_GU_BF16
# on / off; the GEMM beside torch._scaled_mm with bf16 rows (--out bf16, the anchors' contract) and f32 rows.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
for a in on off; do
  QC_GU_BF16=$a timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$a.txt 2>&1
  echo "prefill gu_bf16=$a: $(grep -E '^ +[14] ' $W/pf-$a.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels $K --out bf16 > $W/gb.log 2>&1; echo "gb rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -24
timeout 90 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block --kernels $K > $W/gb-f32.txt 2>&1; echo "f32 rc=$?"
echo "bf16 out: $(grep -E 'wgmma' $W/gb/gemm.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
echo "f32 out:  $(grep -E 'wgmma' $W/gb-f32.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
timeout 60 $B/bin/test_gpu_kernels > $W/kern.txt 2>&1; echo "test_gpu_kernels rc=$?"; grep -E "FAIL|passed" $W/kern.txt | head -5
timeout 200 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
echo "bf16 checks: $(grep -c 'y.bf16: .* 0 differ' $W/fp8.txt) exact, $(grep -c 'y.bf16:' $W/fp8.txt) in all"
tar -C $W -cJf $OUT/raw.tar.xz .
