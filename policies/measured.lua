-- measured.lua: the kernel that measured fastest for this layer and batch.
--
-- A measurement beats any model: kernels differ from their roofline floors by
-- factors (shared/anchors/README.md: tinygemm W4A16 reaches 38% of the copy
-- bandwidth at M=1 and loses to bf16 from M=16 on).  Times within TIE of the
-- fastest count as equal and the format with fewer bytes per weight wins: it
-- leaves more memory for the KV cache.  Where the runtime measured nothing,
-- this is roofline.lua (its lines are repeated here: policies cannot load
-- other files).

local P = {}

-- Repeated timings of one kernel differ by about 1%, but a kernel timed
-- alone (L2 flushed, nothing around it) and the same kernel inside a model's
-- step differ by more: on the H200, mxfp4's qkv GEMV timed 3% faster than
-- w4a16's alone and made the batch-1 step 4.5% slower.  Closer than this is
-- a tie, and a tie goes to fewer bytes.
local TIE = 0.05

-- ---- roofline.lua's rule (keep the two in step) ----
local DEFAULT_CROSSOVER = 40
local W4_BPW = 4.125 / 8

local function w8_format(device)
  if device.sm >= 89 or device.sm == 0 then return "fp8" end
  return "w8a8_int8"
end

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

local function roofline(q, by)
  local w8 = w8_format(q.device)
  local bpw = by.w4a16 and by.w4a16.bytes_per_weight or W4_BPW
  local b, basis = crossover(q.device, bpw)
  local want, other, note
  if q.batch < b then
    want, other = "w4a16", w8
    note = string.format("unmeasured; %s batch %d < crossover %.1f (%s)", q.phase, q.batch, b, basis)
  else
    want, other = w8, "w4a16"
    note = string.format("unmeasured; %s batch %d >= crossover %.1f (%s)", q.phase, q.batch, b, basis)
  end
  if by[want] and by[want].eligible then return want, note end
  if by[other] and by[other].eligible then return other, note .. "; " .. want .. " not eligible" end
  return want, note
end
-- ----

function P.prepare(layer, device, formats)
  -- Any format may measure fastest, so all stay available; the runtime only
  -- converts the weights of the formats the table ends up using.  The
  -- roofline pair comes first: the runtime keeps at most 8 names.
  local w8 = w8_format(device)
  local list = { "w4a16", w8 }
  for _, f in ipairs(formats) do
    if f ~= "w4a16" and f ~= w8 then list[#list + 1] = f end
  end
  return list
end

function P.choose(q)
  local by, fastest = {}, nil
  for _, c in ipairs(q.candidates) do
    by[c.format] = c
    if c.eligible and c.time_us and (not fastest or c.time_us < fastest.time_us) then fastest = c end
  end
  if not fastest then return roofline(q, by) end

  local best = fastest
  for _, c in ipairs(q.candidates) do
    if c.eligible and c.time_us and c.time_us <= fastest.time_us * (1 + TIE)
        and c.bytes_per_weight < best.bytes_per_weight then
      best = c
    end
  end
  if best ~= fastest then
    return best.format, string.format("measured %.1f us, within %.0f%% of %s's %.1f us, fewer bytes",
      best.time_us, TIE * 100, fastest.format, fastest.time_us)
  end
  return best.format, string.format("fastest measured (%.1f us)", best.time_us)
end

function P.kv_cache(device, candidates)
  return "bf16"
end

return P
