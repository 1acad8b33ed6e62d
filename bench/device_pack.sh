#!/bin/bash
# device_pack.sh - gather a Release build into .device/ (git-ignored) for a `device` call's carry.
# Usage: bash bench/device_pack.sh [build-dir]   (then carry ".device" and run bench/device_run.sh there)
set -euo pipefail
B=${1:-build}
D=.device
rm -rf "$D" && mkdir -p "$D/bin" "$D/bin/plugins"
cp "$B/qcore" "$D/bin/" 2>/dev/null || cp "$B/core/qcore" "$D/bin/"
cp "$B"/plugins/*.so "$D/bin/plugins/"
# the GPU tests load plugins from the build tree's path compiled into them
echo "$(cd "$B" && pwd)/plugins" >"$D/bin/plugin_dir.txt"
for t in "$B"/tests/gpu/test_gpu_*; do
  case "$t" in *_unit) continue ;; esac   # compile-only tests run in CI, not there
  [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$D/bin/"
done
# debug info stays here: the carry is limited to 64 MiB
strip --strip-debug "$D"/bin/qcore "$D"/bin/test_gpu_* "$D"/bin/plugins/*.so
# the transformers oracle, when made (bench/hf_oracle.py), travels too
if [ -d .hf-oracle ]; then cp -r .hf-oracle "$D/hf-oracle"; fi
# one compressed archive: the static binaries shrink ~10x, and the carry is limited to 64 MiB
tar -C "$D" -cf - bin $( [ -d "$D/hf-oracle" ] && echo hf-oracle ) | xz -T0 -6 >/tmp/qcore-pack.tar.xz
rm -rf "$D" && mkdir -p "$D" && mv /tmp/qcore-pack.tar.xz "$D/pack.tar.xz"
du -sh "$D"
