-- roofline.lua: W4A16 while a layer is memory-bound, W8A8 once it is compute-bound.
--
-- Seed 000: at batch B a linear layer does 2B FLOP per weight it reads, so a
-- weight-only format's arithmetic intensity is AI = 2B / bytes_per_weight.
-- It stays memory-bound while AI is below the device's ridge point (peak
-- FLOP/s / bandwidth); the crossover is B* = ridge * bytes_per_weight / 2.
-- Below B* the fewest bytes win (W4A16); from B* on the faster tensor cores
-- win (FP8 where native, else INT8).  With cuBLAS's bf16 rate the H200's
-- ridge is 679e12 / 4270e9 = 159 FLOP/B and w4a16 stores 4.125 bits per
-- weight, so B* = 41 (shared/anchors/README.md); the ridge used here is the
-- w4a16 kernels' own (below).  Prefill rows are tokens: same rule.

local P = {}

-- Crossover used when the device has no measured ridge (the CPU reference):
-- the H200's, where this project measures, so CPU tables match its GPU runs.
local DEFAULT_CROSSOVER = 40
local W4_BPW = 4.125 / 8 -- g128 with one f16 scale, if the runtime does not say

-- FP8 tensor cores exist from sm_89 on.  The CPU reference (sm 0) runs every
-- format, and E4M3 measured closer to bf16 than INT8 there (docs/quality.md).
local function w8_format(device)
  if device.sm >= 89 or device.sm == 0 then return "fp8" end
  return "w8a8_int8"
end

-- The ridge that bounds W4A16 is that of its own compute path: the engine
-- measures each format's ceiling (q.device.peaks), and dequantizing INT4
-- into the bf16 tensor cores reaches about half of bf16's rate on the H200
-- (440 vs 843 TFLOP/s), so W4A16 turns compute-bound at about half the
-- batch the bf16 ridge predicts.  Without that number, the bf16 ridge.
local function crossover(device, bpw)
  local w4 = device.peaks and device.peaks.w4a16
  if w4 and w4 > 0 and device.bandwidth_gbs and device.bandwidth_gbs > 0 then
    local ridge = w4 * 1000 / device.bandwidth_gbs
    return ridge * bpw / 2, string.format("w4a16 ridge %.0f FLOP/B = %.0f TFLOP/s measured / %.0f GB/s",
      ridge, w4, device.bandwidth_gbs)
  end
  if device.ridge and device.ridge > 0 then
    return device.ridge * bpw / 2, string.format("bf16 ridge %.0f FLOP/B", device.ridge)
  end
  return DEFAULT_CROSSOVER, "no measured ridge: default"
end

function P.prepare(layer, device, formats)
  return { "w4a16", w8_format(device) }
end

function P.choose(q)
  local by = {}
  for _, c in ipairs(q.candidates) do by[c.format] = c end
  local w8 = w8_format(q.device)
  local bpw = by.w4a16 and by.w4a16.bytes_per_weight or W4_BPW
  local b, basis = crossover(q.device, bpw)
  local want, other, note
  if q.batch < b then
    want, other = "w4a16", w8
    note = string.format("%s batch %d < crossover %.1f (%s): memory-bound", q.phase, q.batch, b, basis)
  else
    want, other = w8, "w4a16"
    note = string.format("%s batch %d >= crossover %.1f (%s): compute-bound", q.phase, q.batch, b, basis)
  end
  if by[want] and by[want].eligible then return want, note end
  -- By the same model the other prepared format still beats bf16: W8 reads
  -- fewer bytes below B*, W4 reads fewer bytes and computes as fast above it.
  if by[other] and by[other].eligible then
    return other, string.format("%s; %s: %s", note, want, by[want] and by[want].reason_code or "absent")
  end
  return want, note -- the runtime falls back to bf16 and records why
end

function P.kv_cache(device, candidates)
  return "bf16" -- the crossover concerns weights; the KV cache stays exact
end

return P
