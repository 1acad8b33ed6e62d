#!/usr/bin/env python3
"""test_arch_numpy.py - qcore's CPU forward pass against an independent numpy forward, per architecture.

For small random Llama, Mistral, Qwen2 (q/k/v biases) and Qwen3 (q/k RMSNorm, head_dim set
explicitly) models with grouped-query attention, tied and untied heads and llama3 rope
scaling, the script writes an HF folder (config.json + model.safetensors, written by hand),
runs `model_logits` (qcore, format bf16), and compares every position's logits with a float64
numpy forward on the same bf16-rounded operands (bf16 weights, bf16 activations into each
linear, bf16 KV cache): what differs is only f32 summation order.

usage: test_arch_numpy.py MODEL_LOGITS_EXE PLUGIN_DIR
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:  # the set-up installs them; say so rather than pass silently
    print(f"skip: {e}")
    sys.exit(77)

EXE, PLUGINS = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def bf16(a):
    return np.asarray(a, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def inv_freq(cfg, d):
    f = cfg["rope_theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type") == "llama3":
        lo, hi, fac, orig = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"], rs["original_max_position_embeddings"]
        wl = 2 * np.pi / f
        out = np.where(wl < orig / hi, f, f / fac)
        mid = (wl >= orig / hi) & (wl <= orig / lo)
        smooth = (orig / wl - lo) / (hi - lo)
        out = np.where(mid, (1 - smooth) * f / fac + smooth * f, out)
        f = out
    return f.astype(np.float32).astype(np.float64)  # qcore keeps f32 frequencies


def rope(x, pos, inv):
    d = x.shape[-1]
    ang = pos[:, None] * inv[None, :]  # [T, d/2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


def forward(cfg, W, ids):
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, T = cfg["rms_norm_eps"], len(ids)
    lin = lambda x, name: bf16(x) @ bf16(W[name]).T + (W[name.replace("weight", "bias")] if name.replace("weight", "bias") in W else 0)
    x = W["model.embed_tokens.weight"][ids].astype(np.float64)
    pos = np.arange(T, dtype=np.float64)
    inv = inv_freq(cfg, D)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj.weight").reshape(T, H, D)
        k = lin(h, p + "self_attn.k_proj.weight").reshape(T, KV, D)
        v = lin(h, p + "self_attn.v_proj.weight").reshape(T, KV, D)
        if cfg["model_type"] == "qwen3":
            q = rms(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, inv), bf16(rope(k, pos, inv))
        v = bf16(v)
        out = np.zeros((T, H, D))
        for hh in range(H):
            g = hh // (H // KV)
            sc = q[:, hh, :] @ k[:, g, :].T / np.sqrt(D)
            sc = np.where(np.tril(np.ones((T, T))) > 0, sc, -np.inf)
            pr = np.exp(sc - sc.max(axis=1, keepdims=True))
            pr /= pr.sum(axis=1, keepdims=True)
            out[:, hh, :] = pr @ v[:, g, :]
        x = x + lin(out.reshape(T, H * D), p + "self_attn.o_proj.weight")
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj.weight")
        u = lin(h, p + "mlp.up_proj.weight")
        x = x + lin(g / (1 + np.exp(-g)) * u, p + "mlp.down_proj.weight")
    x = rms(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return bf16(x) @ bf16(head).T


def make_model(cfg, seed):
    rng = np.random.default_rng(seed)
    H, KV, D, hid, ff, V = (cfg[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim",
                                             "hidden_size", "intermediate_size", "vocab_size"))
    W = {"model.embed_tokens.weight": rng.normal(0, 1, (V, hid)), "model.norm.weight": 1 + 0.1 * rng.normal(size=hid)}
    if not cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = rng.normal(0, 0.1, (V, hid))
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes = {"self_attn.q_proj": (H * D, hid), "self_attn.k_proj": (KV * D, hid), "self_attn.v_proj": (KV * D, hid),
                  "self_attn.o_proj": (hid, H * D), "mlp.gate_proj": (ff, hid), "mlp.up_proj": (ff, hid),
                  "mlp.down_proj": (hid, ff)}
        for n, s in shapes.items():
            W[p + n + ".weight"] = rng.normal(0, 1 / np.sqrt(s[1]), s)
        W[p + "input_layernorm.weight"] = 1 + 0.1 * rng.normal(size=hid)
        W[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.normal(size=hid)
        if cfg["model_type"] == "qwen2":
            for n in ("q_proj", "k_proj", "v_proj"):
                W[p + f"self_attn.{n}.bias"] = 0.1 * rng.normal(size=shapes["self_attn." + n][0])
        if cfg["model_type"] == "qwen3":
            W[p + "self_attn.q_norm.weight"] = 1 + 0.1 * rng.normal(size=D)
            W[p + "self_attn.k_norm.weight"] = 1 + 0.1 * rng.normal(size=D)
    return {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in W.items()}


BASE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=160, rms_norm_eps=1e-5, rope_theta=10000.0,
            max_position_embeddings=256, tie_word_embeddings=False)
CASES = [
    ("llama", dict(model_type="llama", architectures=["LlamaForCausalLM"], rope_theta=500000.0,
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=64))),
    ("mistral", dict(model_type="mistral", architectures=["MistralForCausalLM"], num_key_value_heads=1)),
    ("qwen2", dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True)),
    ("qwen3", dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=32, tie_word_embeddings=True)),
]

ids = [3, 17, 99, 5, 150, 42, 42, 7, 0, 120, 64, 31]
with tempfile.TemporaryDirectory() as tmp:
    for i, (name, extra) in enumerate(CASES):
        cfg = dict(BASE, **extra)
        W = make_model(cfg, 1234 + i)
        folder = os.path.join(tmp, name)
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f)
        write_safetensors(os.path.join(folder, "model.safetensors"), W)
        out = os.path.join(tmp, name + ".f32")
        r = subprocess.run([EXE, PLUGINS, folder, "bf16", ",".join(map(str, ids)), out], capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: model_logits failed: {r.stderr.strip()}")
        if r.returncode:
            continue
        got = np.fromfile(out, dtype=np.float32).reshape(len(ids), cfg["vocab_size"]).astype(np.float64)
        want = forward(cfg, W, ids)
        rel = np.abs(got - want).max() / np.abs(want).max()
        agree = np.mean(got.argmax(1) == want.argmax(1))
        # stated tolerance: f32 summation order only -> 2e-4 of the largest logit
        check(rel < 2e-4, f"{name}: max |diff| / max |logit| = {rel:.2e} >= 2e-4")
        check(agree == 1.0, f"{name}: top-1 agrees at {agree:.0%} of positions")
        print(f"  {name:8s} max rel diff {rel:.2e}, top-1 agreement {agree:.0%}")
print(f"test_arch_numpy: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
