#!/usr/bin/env python3
"""make_seeds.py - writes seeds/*.json, small tokenizer.json files (< 8 KB) for fuzz_tokenizer_json, with `tokenizers`."""
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = open(os.path.join(HERE, "corpus.txt"), encoding="utf-8").read().split("\n")[:60]
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")


def make(name, pre, specials, vocab_size=300, alphabet=True, patch=None, post=None, **bpe):
    tok = Tokenizer(models.BPE(**bpe))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if alphabet else []))
    if post:
        tok.post_processor = post(tok)
    j = json.loads(tok.to_str())
    if patch:
        patch(j)
    s = json.dumps(j, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(s) < 8192, (name, len(s))
    with open(os.path.join(HERE, "seeds", name + ".json"), "wb") as f:
        f.write(s)


def main():
    os.makedirs(os.path.join(HERE, "seeds"), exist_ok=True)
    chatml = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    make("smollm", pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                            pre_tokenizers.ByteLevel(add_prefix_space=False)]), chatml)

    def llama(j):
        j["model"]["ignore_merges"] = True
        j["model"]["merges"] = [m.split(" ", 1) if isinstance(m, str) else m for m in j["model"]["merges"]]
    make("llama3", pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), "isolated"),
                                            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
         ["<|begin_of_text|>", "<|eot_id|>"], patch=llama,
         post=lambda t: processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                      special_tokens=[("<|begin_of_text|>", 0)]))

    def added(j):
        n = max(j["model"]["vocab"].values()) + 1
        j["added_tokens"] += [
            {"id": n, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": True, "normalized": False,
             "special": True},
            {"id": n + 1, "content": "user", "single_word": True, "lstrip": False, "rstrip": False, "normalized": True,
             "special": False}]
        j["model"]["fuse_unk"] = True
    make("prefix_unk", pre_tokenizers.ByteLevel(add_prefix_space=True), ["<unk>"], vocab_size=200, alphabet=False,
         patch=added, unk_token="<unk>")

    def fallback(j):
        j["model"]["byte_fallback"] = True
        n = max(j["model"]["vocab"].values()) + 1
        for b in range(0x20, 0x30):
            j["model"]["vocab"][f"<0x{b:02X}>"] = n + b - 0x20
    make("byte_fallback", pre_tokenizers.ByteLevel(add_prefix_space=False), [], vocab_size=150, alphabet=False,
         patch=fallback)
    make("behaviors", pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", "merged_with_next"), pre_tokenizers.Split(Regex(r"[.,]|\u00a0"), "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"\s"), "contiguous", invert=True), pre_tokenizers.Split(Regex(r"x*"), "removed"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]), ["<|im_start|>"])


if __name__ == "__main__":
    main()
