#!/usr/bin/env python3
"""compare_llamacpp.py - qcore's CPU forward against llama.cpp (llama-cpp-python) on the same GGUF and text.

Both run the same token ids (llama.cpp's tokenization of the text, which must also equal
qcore's); the script compares every position's logits, the top-1 token and the perplexity.
llama.cpp multiplies Q4_1 weights with activations it quantizes to 8 bits (Q8_1) while
qcore's w4a16 keeps bf16 activations, so the two are not bit-identical; the stated
tolerances are: perplexities within 1.5% of each other, top-1 agreement >= 95% of positions.

Opt-in (label `llamacpp`): needs `pip install llama-cpp-python`, which builds llama.cpp.
usage: compare_llamacpp.py MODEL_LOGITS_EXE PLUGIN_DIR MODEL TEXT [N_TOKENS]
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

exe, plugins, model, text_path = sys.argv[1:5]
if not os.path.exists(model):
    print(f"skip: {model} missing (bash scripts/setup.sh fetches it)")
    sys.exit(77)
n_tok = int(sys.argv[5]) if len(sys.argv) > 5 else 512
here = os.path.dirname(os.path.abspath(__file__))
llm = llama_cpp.Llama(model_path=model, n_ctx=n_tok + 8, logits_all=True, n_threads=os.cpu_count(), verbose=False)
text = open(text_path, encoding="utf-8").read()[: n_tok * 8]
ids = llm.tokenize(text.encode(), add_bos=False, special=False)[:n_tok]
llm.reset()
llm.eval(ids)
ref = np.array(llm.scores[: len(ids)], dtype=np.float64)

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "logits.f32")
    r = subprocess.run([exe, plugins, model, "policy:" + os.path.join(here, "exact_gguf.lua"), ",".join(map(str, ids)), out],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL: model_logits:", r.stderr)
        sys.exit(1)
    got = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)


def ppl(lg):
    lg = lg[:-1]
    m = lg.max(axis=1, keepdims=True)
    lse = np.log(np.exp(lg - m).sum(axis=1)) + m[:, 0]
    return float(np.exp(np.mean(lse - lg[np.arange(len(lg)), ids[1:]])))


p_ref, p_got = ppl(ref), ppl(got)
agree = float(np.mean(ref.argmax(1) == got.argmax(1)))
rel = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
print(f"tokens {len(ids)}: perplexity llama.cpp {p_ref:.4f}, qcore {p_got:.4f} ({100 * (p_got / p_ref - 1):+.2f}%); "
      f"top-1 agreement {100 * agree:.1f}%; max |dlogit| / max |logit| median {np.median(rel):.4f}, worst {rel.max():.4f}")
ok = abs(p_got / p_ref - 1) < 0.015 and agree >= 0.95
print(f"compare_llamacpp: {int(ok)} passed, {int(not ok)} failed")
sys.exit(0 if ok else 1)
