#!/bin/bash
# session 20 call 4: 256-column tiles with staged bf16 rows (QC_FP8_STAGE256=1: 3 ring stages + 66 KiB of staging,
# rows leave by cp.async.bulk while the next tile runs) against the default (straight 8-byte stores, 4 stages).
# The epilogue cost ~3.5 us a tile in call 3 (o 1024: 33.9 against 30.6 without stores; gate_up 1024 200.5 / 175.3).
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s/%s %s  ", substr($2,10,5), $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
for v in 0 1 0 1; do
  QC_FP8_STAGE256=$v timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048,4096 --formats fp8,fp8:block --kernels fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma > $W/gb-s$v-$RANDOM.txt 2>&1
  echo "stage256=$v: $(gb $(ls -t $W/gb-s$v-*.txt | head -1))"
done
echo "$(el)"
QC_FP8_STAGE256=1 QC_FP8_WGMMA_OPTS=-DFP8_SKIP_EPI=1 timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > $W/skipepi-s1.txt 2>&1
echo "stage256=1 skipepi: $(gb $W/skipepi-s1.txt)"
QC_FP8_STAGE256=1 QC_FP8_BN_EFF=1,0,0,0 QC_TEST_NO_TIMINGS=1 timeout 110 $B/bin/test_gpu_fp8 > $W/fp8-s1-256.txt 2>&1; echo "test_gpu_fp8 (stage256, all 256) rc=$? $(el)"; grep -E "FAIL|passed" $W/fp8-s1-256.txt | head -5
for v in 1 0; do
  QC_FP8_STAGE256=$v timeout 100 $B/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $W/pf-s$v.txt 2>&1
  echo "prefill stage256=$v: $(grep -E '^ +[14] ' $W/pf-s$v.txt | awk '{printf "c%s %s tok/s  ", $1, $5}')"
done
echo "$(el)"
tar -C $W -cJf $OUT/raw.tar.xz .
