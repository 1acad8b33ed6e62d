-- exact_gguf.lua: the GGUF file's own numerics as far as qcore's formats hold them: Q4_0/Q4_1
-- linear layers imported exactly into w4a16, the (tied, Q8_0) head in bf16.
return {
  choose = function(q) return q.layer.role == "lm_head" and "bf16" or "w4a16" end,
  prepare = function(layer) return { layer.role == "lm_head" and "bf16" or "w4a16" } end,
}
