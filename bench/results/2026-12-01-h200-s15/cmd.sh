#!/usr/bin/env bash
# one device call of session 15: the TMA GEMV probe, then the GPU tests touched by 5593ef5
set -u
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc
mkdir -p $OUT/t
[ "${TMA:-1}" = 1 ] && (cd bench/probe && timeout 240 python3 probe_tma.py $OUT/tma > $OUT/tma.txt 2>&1; echo "probe rc $?" >> $OUT/tma.txt)
if [ "${TESTS:-1}" = 1 ]; then
QC_MXF_KERNELS=mxfp4.wgmma timeout 120 .device/bin/test_gpu_mxfp4 --quick > $OUT/t/mxfp4.txt 2>&1; echo "rc $?" >> $OUT/t/mxfp4.txt
QC_W4_BF16_ONLY=1 QC_W4_NO_TIMING=1 timeout 120 .device/bin/test_gpu_w4a16_wgmma > $OUT/t/w4w.txt 2>&1; echo "rc $?" >> $OUT/t/w4w.txt
timeout 90 .device/bin/test_gpu_int8 --quick > $OUT/t/int8.txt 2>&1; echo "rc $?" >> $OUT/t/int8.txt
timeout 100 .device/bin/test_gpu_fp8 > $OUT/t/fp8.txt 2>&1; echo "rc $?" >> $OUT/t/fp8.txt
for f in $OUT/t/*.txt; do echo "$f: $(grep -E 'passed|FAIL' $f | tail -n 2 | tr '\n' ' ') $(tail -n 1 $f)"; done
fi
[ "${TMA:-1}" = 1 ] && cat $OUT/tma.txt
if [ "${MMA:-0}" = 1 ]; then (cd bench/probe && timeout 60 python3 probe_mma_rate.py $OUT/mma > $OUT/mma.txt 2>&1; echo "rc $?" >> $OUT/mma.txt); cat $OUT/mma.txt; fi
