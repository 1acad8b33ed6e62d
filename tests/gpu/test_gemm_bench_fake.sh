#!/usr/bin/env bash
# test_gemm_bench_fake.sh - `qcore gemm-bench` on the stand-in driver (fake_cuda.c): a right kernel passes its
# check, a wrong or silent one is WRONG with exit 1, refusals are named, an OOM skips the shape, the JSON parses.
set -u
QCORE=$1
FAKE=$2
SRC=$3
cd "$SRC"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export QCORE_CUDA_LIBRARY=$FAKE QCORE_CACHE_DIR=$tmp/cache
pass=0
fail=0

# run <want rc> <name> -- args...: output in $tmp/<name>.out
run() {
  local want=$1 name=$2
  shift 3
  "$QCORE" gemm-bench "$@" >"$tmp/$name.out" 2>&1
  local rc=$?
  if [[ $rc -ne $want ]]; then
    fail=$((fail + 1))
    echo "FAIL: $name: exit $rc, want $want"
    head -60 "$tmp/$name.out"
  fi
}
# has <name> <text>: the output contains the text
has() {
  if grep -qF -- "$2" "$tmp/$1.out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $1: no '$2' in:"
    head -60 "$tmp/$1.out"
  fi
}

if ! "$QCORE" 2>/dev/null | grep -q "kernels can be compiled"; then
  echo "test_gemm_bench_fake: skip: NVRTC is not available"
  exit 0
fi

# bf16 kernels right: checks pass, rows timed, k=4100 refused by the tiled kernel, M ranges merged
ARGS=(--formats bf16 --shapes 96:256,40:4100 --m 1,3,16,64,100 --iters 3)
run 0 good -- "${ARGS[@]}" --json "$tmp/good.json"
has good "device 0: fake sm_90 device"
has good "copy bandwidth: "
has good "compute peaks used (--peak-tflops): 989 TFLOP/s for 16-bit activations, 1979"
has good "check bf16      bf16.linear_mma        96x256   M=3: 288 outputs"
has good "check bf16      bf16.linear_tiled      96x256   M=64: 6144 outputs"
has good "check bf16      bf16.linear_gemv       96x256   M=3"
has good ": ok"
has good "bf16.linear_gemv       96x256      64-100 refused: m_range"
has good "bf16.linear_tiled      96x256        1-16 refused: m_range"
has good "bf16.linear_tiled      40x4100     64-100 refused: align_k"
has good "bf16.linear_gemv       40x4100       1-16 refused: align_k"
has good "memory ledger:"
has good "0 WRONG, 0 errors"
has good "json: $tmp/good.json"
if python3 - "$tmp/good.json" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: good.json"; fi
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
ok = [r for r in rows if r["status"] == "ok"]
# mma: 2 shapes x 5 M; gemv: 96x256 at 1, 3, 16 (k=4100 is refused); tiled: 96x256 at 64 and 100
base = [r for r in ok if r["kernel"] in ("bf16.linear_mma", "bf16.linear_gemv", "bf16.linear_tiled")]
assert len(base) == 10 + 3 + 2, len(base)
# the bf16-activation kernels (gemv_bx for M <= 8, wgmma for M >= 64 on sm_90) run too
assert any(r["kernel"] == "bf16.linear_gemv_bx" for r in ok) and any(r["kernel"] == "bf16.linear_wgmma" for r in ok)
assert all(r["time_us"] > 0 and r["floor_us"] > 0 and r["bound"] in ("hbm", "mma") for r in ok)
r = [r for r in ok if r["kernel"] == "bf16.linear_mma" and r["n"] == 96 and r["m"] == 3][0]
assert r["bytes"] == 96 * 256 * 2 + 3 * 256 * 4 + 3 * 96 * 4, r["bytes"]
assert abs(r["floor_mma_us"] - 2 * 3 * 96 * 256 / 989e12 * 1e6) < 1e-9
assert any(r["status"] == "refused" and r["reason"].startswith("align_k") for r in rows)
assert len(d["checks"]) >= 4 and all(c["status"] == "ok" for c in d["checks"]), d["checks"]
assert d["peak_tflops_16bit"] == 989 and d["copy_bandwidth_Bps"] > 0
PY

# a kernel that computes the wrong thing, or writes nothing: WRONG and exit 1
FAKE_CUDA_LINEAR=wrong run 1 wrong -- --kernels bf16.linear_mma --shapes 64:128 --m 1,8 --iters 2
has wrong "WRONG"
has wrong "outputs out of tolerance"
has wrong "2 WRONG"
FAKE_CUDA_LINEAR=skip run 1 skip -- --kernels bf16.linear_gemv --shapes 64:128 --m 2 --iters 2
has skip "M=2: 128 outputs"
has skip "(128 unwritten)"

# the w4a16 GEMV is found, compiled and launched on both of its paths (k % 128 == 0 streams through shared memory,
# k = 4160 does not); the stand-in computes only the bf16 linears, so its rows are WRONG here by design
run 1 w4 -- --formats w4a16 --kernels w4a16.gemv_sym --shapes 256:1024,64:4160 --m 1,16 --iters 2
has w4 "w4a16     w4a16.gemv_sym         256x1024         1"
has w4 "w4a16     w4a16.gemv_sym         64x4160         16"
has w4 "4 WRONG, 0 errors"

# too little device memory for one shape: it says the sizes and the next shape runs
FAKE_CUDA_FREE_MIB=330 run 1 oom -- --formats bf16 --kernels bf16.linear_mma --shapes 64:128,20000:2048 --m 1,2048 \
  --iters 2
has oom "shape 20000x2048: skipped: activations x 16 MiB, y 156 MiB (M up to 2048) do not fit"
has oom "bf16      bf16.linear_mma        64x128        2048"
has oom "1 errors"

# W8A8 (fp8, default scheme channel): activations through the format's quantizer, checked against the C
# references, timed alone and with the quantizer; the other schemes' kernels are refused with their code
FP8=(--formats fp8 --kernels fp8.gemv_channel,fp8.gemm_channel_wgmma,fp8.gemm_block_wgmma --shapes 32:256
  --m 1,3,16,64 --iters 2)
run 0 fp8 -- "${FP8[@]}" --json "$tmp/fp8.json"
has fp8 "check fp8       fp8.gemv_channel       32x256   M=3: 96 outputs"
has fp8 "check fp8       fp8.gemm_channel_wgmma 32x256   M=17: 544 outputs"
has fp8 "tol 2e-03*|x_i|*|w_j|; activations by fp8.quant_act_token"
has fp8 "fp8       fp8.gemv_channel       32x256           1"
has fp8 "fp8         + activation quant   32x256          64"
has fp8 "(+ fp8.quant_act_token"
has fp8 "fp8.gemm_block_wgmma   32x256          64 refused: scheme"
has fp8 "0 WRONG, 0 errors"
# a recipe in --formats (as --format takes it): fp8:block quantizes with scheme block, its rows carry the label
run 0 fp8blk -- --formats fp8:block --kernels fp8.gemm_channel_wgmma --shapes 32:256 --m 32 --iters 2
has fp8blk "fp8:block on 32x256: quantized on the CPU"
has fp8blk "(group 128, scheme 0x3)"
has fp8blk "fp8:block fp8.gemm_channel_wgmma 32x256          32 refused: scheme"
run 2 fp8bad -- --formats fp8: --shapes 32:256 --m 3
has fp8bad "expected name, name:scheme or name:gN"
if python3 - "$tmp/fp8.json" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: fp8.json"; fi
import json, sys
d = json.load(open(sys.argv[1]))
ok = [r for r in d["rows"] if r["status"] == "ok"]
# gemv at M 1, 3, 16; wgmma from M 17 on (the GEMV takes the small M)
assert len(ok) == 3 + 1, [(r["kernel"], r["m"]) for r in ok]
assert all(r["quantizer"] == "fp8.quant_act_token" and r["quant_us"] > 0 and r["time_with_quant_us"] > 0
           and r["act_bytes"] == 1 for r in ok), ok
r = [r for r in ok if r["kernel"] == "fp8.gemv_channel" and r["m"] == 3][0]
assert r["bytes"] == 32 * 256 + 32 * 4 + 3 * 256 + 3 * 4 + 3 * 32 * 4, r["bytes"]
assert len(d["checks"]) == 2 and all(c["status"] == "ok" and c["quantizer"] == "fp8.quant_act_token"
                                     and c["rtol"] == 2e-3 for c in d["checks"]), d["checks"]
PY
FAKE_CUDA_LINEAR=wrong run 1 fp8wrong -- --kernels fp8.gemm_channel_wgmma --shapes 32:256 --m 32 --iters 2
has fp8wrong "outputs out of tolerance"
has fp8wrong "1 WRONG"
# --out bf16: the wgmma GEMM writes y.bf16 (checked as floats; y must keep its poison), the GEMV (no y.bf16) stays f32
run 0 fp8bf -- --formats fp8 --kernels fp8.gemv_channel,fp8.gemm_channel_wgmma --shapes 32:256 --m 3,32 --iters 2 --out bf16
has fp8bf "check fp8       fp8.gemm_channel_wgmma 32x256   M=17: 544 outputs (bf16), max"
has fp8bf "check fp8       fp8.gemv_channel       32x256   M=3: 96 outputs, max"
has fp8bf "% mma  y.bf16"
has fp8bf "0 WRONG, 0 errors"
FAKE_CUDA_LINEAR=both run 1 fp8both -- --formats fp8 --kernels fp8.gemm_channel_wgmma --shapes 32:256 --m 32 --iters 2 --out bf16
has fp8both "y.bf16 given, yet 544 words of y (f32) were written"
FAKE_CUDA_LINEAR=wrong run 1 fp8bfwrong -- --formats fp8 --kernels fp8.gemm_channel_wgmma --shapes 32:256 --m 32 --iters 2 --out bf16
has fp8bfwrong "1 outputs out of tolerance"
run 2 outbad -- --formats fp8 --shapes 32:256 --m 3 --out f16
has outbad "--out needs f32 or bf16, got 'f16'"

# a format without GPU kernels says so (the loader tests' plain plugin: a linear format
# with a C kernel only, whatever the real plugins have grown by now)
run 0 none -- --plugin-path "$(dirname "$QCORE")/tests/fault_plugins/none" --formats test_good --shapes 64:128 --m 1
has none "test_good: nothing to time: no GPU linear kernel; the format lacks:"

echo "test_gemm_bench_fake: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
