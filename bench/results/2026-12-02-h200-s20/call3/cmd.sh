#!/bin/bash
# session 20 call 3: what holds the 256-column stage at ~0.70 us when its copies alone take ~0.49 us (128-row boxes,
# call 2) and its MMA at peak ~0.52-0.56: the consumer loop without the copies (FP8_SKIP_TMA), without the promotion,
# without the per-half wait; and the ring depth (FP8_ST256 2 / 3 / 4) of the full kernel.  256 columns only.
for d in .device; do tar -C $d -xJf $d/pack.tar.xz; mkdir -p "$(dirname "$(cat $d/bin/plugin_dir.txt)")" && ln -sfn "$PWD/$d/bin/plugins" "$(cat $d/bin/plugin_dir.txt)"; done
export QCORE_CACHE_DIR=/tmp/kc; B=.device; W=/tmp/w; mkdir -p $W
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gb() { grep -E 'wgmma' "$1" | grep -v -E 'refused|activation|check' | awk '{printf "%s/%s %s  ", $3, $4, $5}'; grep -o "[0-9]* WRONG" "$1" | head -1; }
export QC_FP8_BN_EFF=1,0,0,0
for o in "full:" "st3:-DFP8_ST256=3" "st2:-DFP8_ST256=2" "skipepi:-DFP8_SKIP_EPI=1" \
         "mma+wait+promote:-DFP8_SKIP_TMA=1" "mma+wait:-DFP8_SKIP_TMA=1 -DFP8_SKIP_PROMOTE=1" \
         "mma:-DFP8_SKIP_TMA=1 -DFP8_SKIP_PROMOTE=1 -DFP8_NO_WAIT=1" "mma+wait+promote,noepi:-DFP8_SKIP_TMA=1 -DFP8_SKIP_EPI=1" \
         "copies,wbox128:-DFP8_SKIP_MMA=1 -DFP8_SKIP_EPI=1"; do
  name=${o%%:*}; opts=${o#*:}; wb=32; case $name in *wbox128*) wb=128;; esac
  QC_FP8_WBOX=$wb QC_FP8_WGMMA_OPTS="$opts" timeout 60 $B/bin/qcore gemm-bench --out bf16 --m 1024,2048 --shapes 4096:4096,28672:4096 --formats fp8 --kernels fp8.gemm_channel_wgmma > "$W/$name.txt" 2>&1
  echo "$name: $(gb "$W/$name.txt")"
done
echo "$(el)"
tar -C $W -cJf $OUT/raw.tar.xz .
