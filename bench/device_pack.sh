#!/bin/bash
# device_pack.sh - gather a Release build into .device/ (git-ignored) for a `device` call's carry.
# Usage: bash bench/device_pack.sh [build-dir]   (then carry ".device" and run bench/device_run.sh there)
set -euo pipefail
B=${1:-build}
D=.device
rm -rf "$D" && mkdir -p "$D/bin" "$D/bin/plugins"
cp "$B/qcore" "$D/bin/" 2>/dev/null || cp "$B/core/qcore" "$D/bin/"
cp "$B"/plugins/*.so "$D/bin/plugins/"
for t in "$B"/tests/gpu/test_gpu_*; do
  [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$D/bin/"
done
# the transformers oracle, when made (bench/hf_oracle.py), travels too
if [ -d .hf-oracle ]; then cp -r .hf-oracle "$D/hf-oracle"; fi
du -sh "$D"
