-- latency.lua: the shortest step for one or a few requests.
--
-- Decode at small batch streams every weight once per token, so it is
-- memory-bound and the fewest bytes per weight win (seed 000: W4A16).  Prefill
-- and large batches are compute-bound, so the format with the fastest tensor
-- cores wins (FP8, else INT8).  Where the runtime measured a kernel, the
-- measurement decides; where it knows the device's bandwidth and peak rates,
-- the roofline model decides; on the CPU reference neither exists and the
-- byte count alone decides.

local P = {}

-- Formats in the order this policy likes them when nothing is measured.
-- bf16 is not listed: when no quantized format can run, asking for the first
-- choice makes the runtime fall back to bf16 and report why.
local FEW_BYTES = { "w4a16", "mxfp4", "fp8", "w8a8_int8" }
local FAST_MMA = { "fp8", "w8a8_int8", "w4a16", "mxfp4" }

local function index(cands)
  local t = {}
  for _, c in ipairs(cands) do t[c.format] = c end
  return t
end

-- Peak rate (TFLOP/s) the format's GEMM runs at on this device.
local function peak_for(format, d)
  if format == "fp8" and d.fp8_tflops > 0 and d.sm >= 89 then return d.fp8_tflops end
  if format == "w8a8_int8" and d.int8_tops > 0 then return d.int8_tops end
  return d.bf16_tflops
end

-- Roofline time (us) of one layer: max(bytes moved / bandwidth, flops / peak).
local function model_us(c, q)
  local d = q.device
  if d.bandwidth_gbs <= 0 or d.bf16_tflops <= 0 then return nil end
  local m, n, k = q.batch, q.layer.n, q.layer.k
  local bytes = n * k * c.bytes_per_weight + 2 * m * (n + k)
  local flops = 2 * m * n * k
  return math.max(bytes / (d.bandwidth_gbs * 1e3), flops / (peak_for(c.format, d) * 1e6))
end

function P.prepare(layer, device, formats)
  -- Weights kept resident: 4-bit for decode, plus FP8 for prefill where the
  -- tensor cores take FP8 natively; the output projection never 4-bit.  bf16
  -- is always the last resort.
  if layer.role == "lm_head" then return { "w8a8_int8", "fp8" } end
  if device.sm >= 89 then return { "w4a16", "fp8" } end
  return { "w4a16" }
end

function P.choose(q)
  -- The head is decided by quality first: INT8 and FP8 move the same bytes, so
  -- at decode batch sizes they take the same time and the better one wins.
  if q.layer.role == "lm_head" then
    local by = index(q.candidates)
    for _, name in ipairs({ "w8a8_int8", "fp8" }) do
      if by[name] and by[name].eligible then return name, "lm_head: 8-bit, INT8 before FP8 (docs/quality.md)" end
    end
    return "w8a8_int8", "lm_head: no 8-bit format is eligible"
  end
  local best, best_t, why
  for _, c in ipairs(q.candidates) do
    if c.eligible then
      local t = c.time_us or model_us(c, q)
      if t and (not best_t or t < best_t) then
        best, best_t = c.format, t
        why = c.time_us and "fastest measured" or "fastest by roofline"
      end
    end
  end
  if best then return best, string.format("%s (%.1f us)", why, best_t) end

  -- Nothing measured or modelled: decide by phase and batch.
  local by = index(q.candidates)
  local order = (q.phase == "decode" and q.batch <= 16) and FEW_BYTES or FAST_MMA
  for _, name in ipairs(order) do
    local c = by[name]
    if c and c.eligible then
      return name, q.phase .. " batch " .. q.batch .. ": preference order"
    end
  end
  -- Ask for the first choice anyway: the runtime falls back and reports why.
  return order[1], "no preferred format is eligible"
end

function P.kv_cache(device, candidates)
  -- Short contexts at batch 1 read little KV; keep it exact.
  return "bf16"
end

return P
