#!/bin/bash
# session 20 call 8 (warm): the new plan (256 / 128, 128-row boxes) against session 19's (192 in: 64-row boxes now) in
# one call, and the fp8 prefill 2048 again.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz 2>/dev/null; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done; export QCORE_CACHE_DIR=/tmp/kc; for e in new:110,0,0,90 old:110,100,0,90 new2:110,0,0,90; do QC_FP8_BN_EFF=${e#*:} timeout 30 .device/bin/qcore gemm-bench --out bf16 --m 1024,2048 --shapes 6144:4096,4096:4096,4096:14336 --formats fp8 --kernels fp8.gemm_channel_wgmma > $OUT/p-${e%%:*}.txt 2>&1; echo "${e%%:*}: $(grep -E 'wgmma' $OUT/p-${e%%:*}.txt | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}')"; done; timeout 40 .device/bin/qcore bench --model-config configs/llama-3-8b.json --format fp8 --prompt 2048 --output 2 --concurrency 1,4 > $OUT/pf2.txt 2>&1; echo "prefill: $(grep -E '^ +[14] ' $OUT/pf2.txt | awk '{printf "c%s %s tok/s  ", $1, $5}')"
# output:
# new: 6144x4096/1024 51.1  6144x4096/2048 87.1  4096x4096/1024 33.2  4096x4096/2048 60.6  4096x14336/1024 91.2  4096x14336/2048 175.9
# old: 6144x4096/1024 50.0  6144x4096/2048 88.0  4096x4096/1024 34.0  4096x4096/2048 61.5  4096x14336/1024 91.5  4096x14336/2048 176.0
# new2: 6144x4096/1024 51.2  6144x4096/2048 87.0  4096x4096/1024 33.0  4096x4096/2048 60.4  4096x14336/1024 91.2  4096x14336/2048 176.2
# prefill: c1 53176.9 tok/s  c4 53739.4 tok/s
