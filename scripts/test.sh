#!/usr/bin/env bash
# test.sh - build and run the whole test suite twice: a normal build and an ASan+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --deps
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

# the same suite under ASan+UBSan (optimised, so the model tests stay quick)
cmake -S . -B build-asan -DQCORE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-asan -j"$jobs"
# test_nvrtc_kernels* only hand every kernel's CUDA source to NVRTC (no host logic worth sanitizing) and
# are the slowest tests: the normal build ran them above
ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^test_nvrtc_kernels(_[0-9]+)?$'

# libFuzzer harnesses of the untrusted-input parsers (clang, ASan+UBSan), each
# for QCORE_FUZZ_SECONDS (60 in CI)
CC=clang cmake -S . -B build-fuzz -DQCORE_FUZZ=ON -DQCORE_FUZZ_SECONDS="${QCORE_FUZZ_SECONDS:-60}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$jobs"
ctest --test-dir build-fuzz --output-on-failure -L fuzz -j"$jobs"
