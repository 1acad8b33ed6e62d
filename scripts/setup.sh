#!/usr/bin/env bash
# setup.sh - install what qcore needs from Debian and PyPI, then build it in ./build.
#   bash scripts/setup.sh            packages + build
#   bash scripts/setup.sh --deps     packages only (used by scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(cmake gcc make pkg-config liblua5.4-dev libinih-dev libjansson-dev libffi-dev libpcre2-dev)
missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Test oracles (ml_dtypes, gguf, numpy) come from PyPI.
if ! python3 -c "import numpy, ml_dtypes, gguf" 2>/dev/null; then
  echo "setup: installing Python test oracles"
  python3 -m pip install -q -r tests/requirements.txt
fi

[[ ${1:-} == --deps ]] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built ./build/qcore and its plugins in ./build/plugins"
