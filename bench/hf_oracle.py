#!/usr/bin/env python3
"""hf_oracle.py - a `transformers` oracle for qcore: a random-weight Llama saved as safetensors plus its logits.

Builds LlamaForCausalLM from a config with random weights (std 1/sqrt(fan_in), so that
activations stay well-conditioned through every layer; transformers' own init, std 0.02,
gives near-uniform logits), casts it to bfloat16, saves it with save_pretrained
(config.json + model.safetensors), then runs a seeded random 256-token sequence
teacher-forced through the same model in float32 (model.float() after the bf16 cast, so
every weight is exactly a bf16 value) on the CPU with eager attention.  Writes:

  DIR/config.json, DIR/model.safetensors   the model qcore opens (qc_model_open, format bf16)
  DIR/tokens.bin                            int32 LE [T]
  DIR/logits.bin                            float32 LE [T][vocab]: logits[i] predicts token i+1
  DIR/oracle.json                           config summary, seed, dtype notes, versions, sha256,
                                            top-1 margin statistics, and the same sequence through
                                            HF's own bf16 compute (how far bf16 arithmetic alone moves
                                            the logits: the scale for qcore's tolerance)

No tokenizer.json is written: qc_model_open reads one from a folder only when present, and
the tests feed token ids.

usage: python3 bench/hf_oracle.py --out DIR [--config tiny|smollm2] [--seed N] [--tokens T]
       [--layers N] [--vocab V]
needs: pip install torch transformers safetensors numpy (CPU is enough)
"""
import argparse
import hashlib
import json
import math
import os
import platform
import sys

# Configs.  "tiny" keeps the per-layer shapes of a small real model (hidden 512, GQA 8/2,
# head_dim 64, intermediate 1536) but only 4 layers and a 2048-token vocabulary, so that the
# folder (about 30 MB) can be carried to the GPU machine.  Its rope_theta is not the 10000
# that a loader falls back to when it misses the key (transformers >= 5 writes it inside
# "rope_parameters"), so such a miss fails the comparison.  "smollm2" is SmolLM2-135M's exact
# shape (tied embeddings, 30 layers, vocab 49152): about 270 MB of weights, for local use.
CONFIGS = {
    "tiny": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                 num_key_value_heads=2, head_dim=64, vocab_size=2048, rope_theta=100000.0, rms_norm_eps=1e-5,
                 tie_word_embeddings=False, max_position_embeddings=2048),
    "smollm2": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, head_dim=64, vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5,
                    tie_word_embeddings=True, max_position_embeddings=8192),
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def init_weights(model, cfg, gen, torch):
    """Random weights that keep activations in range: linears N(0, 1/fan_in), the embedding N(0, 1)
    (so the residual stream starts at unit scale), RMSNorm weights 1 + N(0, 0.1) (never all ones,
    so a loader that drops a norm weight is caught), lm_head N(0, 1/hidden) with each row scaled
    by exp(N(0, 0.3)): unembedding rows of unequal norm, as in trained models, widen the
    top1-top2 logit gap (median 0.2 -> about 0.35 logit std) without letting a few tokens win
    every position.  With tied embeddings the embedding gets the row scales instead."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name == "model.embed_tokens.weight":
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:  # every linear (and an untied lm_head): [out, in]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
            else:
                raise SystemExit(f"hf_oracle: unexpected parameter {name} {tuple(p.shape)}")
        head = model.get_output_embeddings().weight  # the embedding itself when tied
        head.mul_(torch.exp(0.3 * torch.randn(head.shape[0], 1, generator=gen)))


def logit_stats(logits, np):
    top2 = np.sort(logits, axis=-1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    return {"median_top1_top2_gap": float(np.median(gap)), "min_top1_top2_gap": float(gap.min()),
            "mean_row_std": float(logits.std(axis=-1).mean()), "max_abs": float(np.abs(logits).max())}


def compare(ref, got, np):
    """The same metrics as tests/hf_compare.h: per row max|d|/max|ref| and ||d||/||ref||, top-1 agreement."""
    d = got.astype(np.float64) - ref.astype(np.float64)
    rmax = np.abs(d).max(axis=-1) / np.abs(ref).max(axis=-1)
    rl2 = np.linalg.norm(d, axis=-1) / np.linalg.norm(ref.astype(np.float64), axis=-1)
    top1 = float((ref.argmax(-1) == got.argmax(-1)).mean())
    return {"max_rel_max": float(rmax.max()), "max_rel_l2": float(rl2.max()), "mean_rel_l2": float(rl2.mean()),
            "top1_agreement": top1}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tokens", type=int, default=256, help="teacher-forced sequence length")
    ap.add_argument("--layers", type=int, help="override num_hidden_layers")
    ap.add_argument("--vocab", type=int, help="override vocab_size")
    ap.add_argument("--rope-theta", type=float, help="override rope_theta")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    a = ap.parse_args()

    try:
        import numpy as np
        import torch
        import transformers
        import safetensors
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        sys.exit(f"hf_oracle: {e}; install with: pip install torch transformers safetensors numpy")

    if a.threads:
        torch.set_num_threads(a.threads)
    c = dict(CONFIGS[a.config])
    if a.layers:
        c["num_hidden_layers"] = a.layers
    if a.vocab:
        c["vocab_size"] = a.vocab
    if a.rope_theta:
        c["rope_theta"] = a.rope_theta
    if a.tokens < 1 or a.tokens > c["max_position_embeddings"]:
        sys.exit(f"hf_oracle: --tokens {a.tokens} must be in [1, {c['max_position_embeddings']}]")
    cfg = LlamaConfig(**c, hidden_act="silu", attention_bias=False, mlp_bias=False, bos_token_id=1,
                      eos_token_id=2, architectures=["LlamaForCausalLM"])
    os.makedirs(a.out, exist_ok=True)

    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    model = LlamaForCausalLM(cfg)
    init_weights(model, cfg, gen, torch)
    model = model.to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    for stray in ("generation_config.json",):  # not needed by qcore; keep the folder minimal
        p = os.path.join(a.out, stray)
        if os.path.exists(p):
            os.remove(p)

    # The sequence: seeded, uniform over the vocabulary (numpy's generator, independent of torch).
    rng = np.random.default_rng(a.seed)
    tokens = rng.integers(0, c["vocab_size"], size=a.tokens, dtype=np.int64).astype(np.int32)
    ids = torch.from_numpy(tokens.astype(np.int64))[None, :]

    def run(m):
        m.eval()
        with torch.no_grad():
            return m(input_ids=ids, use_cache=False).logits[0].float().numpy()

    # f32 compute on the exact bf16 weights: the oracle
    model.config._attn_implementation = "eager"
    m32 = model.float()
    logits = run(m32).astype(np.float32)
    if not np.isfinite(logits).all():
        sys.exit("hf_oracle: the logits are not finite")
    # HF's own bf16 arithmetic on the same weights, for scale
    m16 = m32.to(torch.bfloat16)
    logits16 = run(m16)

    tok_path, log_path = os.path.join(a.out, "tokens.bin"), os.path.join(a.out, "logits.bin")
    tokens.astype("<i4").tofile(tok_path)
    logits.astype("<f4").tofile(log_path)

    stats = logit_stats(logits, np)
    files = {}
    for name in sorted(os.listdir(a.out)):
        if name == "oracle.json":
            continue
        p = os.path.join(a.out, name)
        files[name] = {"bytes": os.path.getsize(p), "sha256": sha256(p)}
    info = {
        "generator": "bench/hf_oracle.py",
        "command": "python3 bench/hf_oracle.py " + " ".join(sys.argv[1:]),
        "config_name": a.config,
        "config": c,
        "seed": a.seed,
        "tokens": a.tokens,
        "init": "linears N(0,1/fan_in); embed N(0,1); norms 1+N(0,0.1); lm_head N(0,1/hidden) rows scaled by "
                "exp(N(0,0.3)) (the embedding's rows when tied)",
        "weights_dtype": "bfloat16 (model.safetensors)",
        "oracle_compute": "float32 on CPU with the bf16 weights widened exactly (model.float()), eager attention, "
                          "use_cache=False, one teacher-forced pass",
        "layout": {"tokens.bin": "int32 LE [tokens]",
                   "logits.bin": "float32 LE [tokens][vocab]; row i is the prediction after tokens[0..i]"},
        "logit_stats": stats,
        "hf_bf16_vs_f32": compare(logits, logits16, np),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "safetensors": safetensors.__version__,
                     "numpy": np.__version__},
        "files": files,
    }
    with open(os.path.join(a.out, "oracle.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    total = sum(v["bytes"] for v in files.values())
    print(f"hf_oracle: {a.out}: {a.config}, seed {a.seed}, {a.tokens} tokens, vocab {c['vocab_size']}, "
          f"{c['num_hidden_layers']} layers; {total / 1e6:.1f} MB")
    print(f"hf_oracle: top1-top2 gap median {stats['median_top1_top2_gap']:.4f} min {stats['min_top1_top2_gap']:.2e}, "
          f"row std {stats['mean_row_std']:.3f}, max |logit| {stats['max_abs']:.2f}")
    h = info["hf_bf16_vs_f32"]
    print(f"hf_oracle: HF bf16 compute vs f32: top-1 {h['top1_agreement']:.4f}, rel max {h['max_rel_max']:.4f}, "
          f"rel L2 max {h['max_rel_l2']:.4f} mean {h['mean_rel_l2']:.4f}")


if __name__ == "__main__":
    main()
