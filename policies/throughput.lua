-- throughput.lua: the most tokens per second across many concurrent requests.
--
-- Large batches make linear layers compute-bound, so W8A8 (FP8 where the
-- tensor cores take it natively, else INT8) is preferred at every batch where
-- its roofline time is not worse than the weight-only format's.  The KV cache
-- is stored in FP8: it doubles the tokens that fit, which is what limits
-- concurrency (seeds 002 and 004).

local P = {}

local function eligible(q, name)
  for _, c in ipairs(q.candidates) do
    if c.format == name then return c.eligible and c or nil end
  end
end

-- Batch at which a weight-only format with `bpw` bytes per weight turns
-- compute-bound on this device: seed 000's AI = 2B / bytes_per_weight set
-- equal to the ridge point (FLOP per byte).
local function crossover(device, bpw)
  if device.ridge and device.ridge > 0 then return device.ridge * bpw / 2 end
  return 32 -- no device numbers (CPU reference): a conventional default
end

function P.prepare(layer, device, formats)
  local list = {}
  if device.sm >= 89 or device.sm == 0 then list[#list + 1] = "fp8" end
  list[#list + 1] = "w8a8_int8"
  list[#list + 1] = "w4a16"
  return list
end

function P.choose(q)
  -- Measured times, when the runtime has them, settle it.
  local best, best_t
  for _, c in ipairs(q.candidates) do
    if c.eligible and c.time_us and (not best_t or c.time_us < best_t) then
      best, best_t = c.format, c.time_us
    end
  end
  if best then return best, string.format("fastest measured (%.1f us)", best_t) end

  -- The head stays 8-bit whatever the batch (4-bit there costs +12%
  -- perplexity on SmolLM2, docs/quality.md); INT8 and FP8 read the same bytes.
  if q.layer.role == "lm_head" then
    local h = eligible(q, "w8a8_int8") or eligible(q, "fp8")
    if h then return h.format, "lm_head: 8-bit" end
  end
  local w4 = eligible(q, "w4a16")
  local w8 = eligible(q, "fp8") or eligible(q, "w8a8_int8")
  if w4 and w8 then
    local b = crossover(q.device, w4.bytes_per_weight)
    if q.batch < b then
      return "w4a16", string.format("batch %d below the W4 crossover %.0f", q.batch, b)
    end
    return w8.format, string.format("batch %d at or above the W4 crossover %.0f", q.batch, b)
  end
  if w8 then return w8.format, "only W8A8 is eligible" end
  if w4 then return "w4a16", "only W4A16 is eligible" end
  -- Ask for W8A8; the runtime falls back to what can run and says why.
  return q.device.sm >= 89 and "fp8" or "w8a8_int8", "no quantized format is eligible"
end

function P.kv_cache(device, candidates)
  for _, c in ipairs(candidates) do
    if c.format == "kv_fp8" and c.eligible then return "kv_fp8" end
  end
  return "kv_fp8" -- the runtime keeps bf16 and reports why if it cannot
end

return P
