#!/bin/bash
# session 19 call 2: (a) 256-column fp8 tiles with bf16 rows as 8-byte stores (lane pairs swap halves) and per-mode
# plan weights (row-scaled 110/100/0/90, block 0/100/96/90); (b) the quantizers' exact division without div.rn
# (rs = RN(1/s), fma correction).  Correctness: test_gpu_fp8 (bf16 rows bit for bit bf16 of f32 rows), test_gpu_fuse
# (fused codes = the plugin's quantizer = the C reference, bit for bit), test_gpu_kernels.  Speed: SwiGLU+quant
# 2048 x 14336 (test_gpu_fuse), gemm-bench beside torch._scaled_mm (bf16 rows) and the same kernels with f32 rows,
# the fp8 prefill 2048 twice.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; L=configs/llama-3-8b.json; W=/tmp/w; mkdir -p $W
t0=$(date +%s)
QC_TEST_NO_TIMINGS=1 timeout 120 $B/bin/test_gpu_fp8 > $W/fp8.txt 2>&1; echo "test_gpu_fp8 rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fp8.txt | head -5
echo "bf16 checks: $(grep -c 'y.bf16: .* 0 differ' $W/fp8.txt) exact, $(grep -c 'y.bf16:' $W/fp8.txt) in all"
timeout 120 $B/bin/test_gpu_fuse > $W/fuse.txt 2>&1; echo "test_gpu_fuse rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/fuse.txt | head -5
grep -E "swiglu(.bf16)? .*m=2048" $W/fuse.txt | grep plain | cut -c1-190
timeout 60 $B/bin/test_gpu_kernels > $W/kern.txt 2>&1; echo "test_gpu_kernels rc=$? ($(( $(date +%s) - t0 )) s)"; grep -E "FAIL|passed" $W/kern.txt | head -5
for i in 1 2; do
  timeout 70 $B/bin/qcore bench --model-config $L --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-$i.txt 2>&1
  echo "prefill $i: $(grep -E '^ +[14] ' $W/pf-$i.txt | awk '{printf "c%s %s tok/s  ", $1, $5}') ($(( $(date +%s) - t0 )) s)"
done
K=fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma
OUT=$W/gb M=1024,2048,4096 timeout 200 bash bench/gemm_bench.sh $B/bin --formats fp8,fp8:block --kernels $K --out bf16 > $W/gb.log 2>&1; echo "gb rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "scaled_mm" $W/gb/ratios.md | awk -F'|' '{printf "%s %s %s %s %s\n", $3, $4, $6, $11, $12}' | head -24
timeout 90 $B/bin/qcore gemm-bench --m 1024,2048,4096 --formats fp8,fp8:block --kernels $K > $W/gb-f32.txt 2>&1; echo "f32 rc=$? ($(( $(date +%s) - t0 )) s)"
echo "f32 out:  $(grep -E 'wgmma' $W/gb-f32.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}')"
tar -C $W -cJf $OUT/raw.tar.xz .
