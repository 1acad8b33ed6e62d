#!/usr/bin/env python3
"""test_tokenizer_oracle.py - qcore's tokenizer against HF `tokenizers` (ids, decoding) and `jinja2` (chat templates).

usage: test_tokenizer_oracle.py QC_TOK_TOOL CORPUS WORKDIR

1. Self-made vocabularies (always): BPE tokenizers trained with `tokenizers` on the corpus in
   the pre-tokenizer configurations qcore supports (SmolLM's Digits+ByteLevel, Llama 3's and
   Qwen2's Split regexes, GPT-2's ByteLevel with and without a prefix space, every Split
   behavior, unknown-token and byte-fallback vocabularies).  Each tokenizer.json is loaded by
   the C tokenizer (file and memory paths, and the GGUF-style spec path where a GGUF name
   exists); ids must equal `tokenizers`' on the whole corpus and on each line, with and without
   special-token parsing, and decode(encode(x)) == x.
2. SmolLM2-135M-Instruct (when models/SmolLM2-135M-Instruct.Q4_1.gguf or $QCORE_SMOLLM2_GGUF
   exists; otherwise reported as skipped): a tokenizer.json built from the GGUF's vocabulary,
   merges and pre-tokenizer config is the oracle for the C tokenizer loaded from the GGUF itself,
   from that tokenizer.json and from the spec.  Its chat template is rendered with jinja2.
3. Chat templates (jinja2): SmolLM2's real template text plus the other families' templates,
   rendered by jinja2 as transformers does, against qc_tokenizer_chat.
Exit 77 (ctest skip) when `tokenizers` is not installed.
"""
import json
import os
import shutil
import subprocess
import sys
import time

try:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
except ImportError as e:
    print(f"tokenizer_oracle: skipped, {e} (pip install tokenizers)")
    sys.exit(77)

TOOL, CORPUS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
passed = failed = skipped = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)
    return ok


def skip(msg):
    global skipped
    skipped += 1
    print("skip:", msg)


def tool(*args, stdin=None):
    r = subprocess.run([TOOL, *args], capture_output=True, timeout=600)
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_ids(name, got, want):
    if got == want:
        return check(True, name)
    i = first_diff(got, want)
    return check(False, f"{name}: {len(got)} ids vs {len(want)} from tokenizers; first difference at {i}: "
                 f"{got[max(0, i - 3):i + 5]} vs {want[max(0, i - 3):i + 5]}")


TEXT = open(CORPUS, encoding="utf-8", newline="").read()
LINES = TEXT.split("\n")


def hf_encode(tok, text, special=True, bos=False):
    tok.encode_special_tokens = not special
    try:
        return tok.encode(text, add_special_tokens=bos).ids
    finally:
        tok.encode_special_tokens = False


def parse_ids(out):
    return [[int(x) for x in line.split()] for line in out.decode().split("\n")[:-1]]


def compare_loader(name, tok, how, path, roundtrip=True, specials=True, lines=True, corpus=None):
    """All id and decoding checks for one way of loading the C tokenizer."""
    corpus = corpus or CORPUS
    text = open(corpus, encoding="utf-8", newline="").read()
    text_lines = text.split("\n")
    rc, out, err = tool(how, path, "encode", corpus, "special")
    if not check(rc == 0, f"{name}: encode failed: {err.strip()}"):
        return
    t0 = time.time()
    want = hf_encode(tok, text)
    compare_ids(f"{name}: corpus ids (special tokens parsed)", parse_ids(out)[0], want)
    if specials:
        rc, out, err = tool(how, path, "encode", corpus)
        check(rc == 0, f"{name}: encode without special failed: {err.strip()}")
        if rc == 0:
            compare_ids(f"{name}: corpus ids (special tokens as text)", parse_ids(out)[0], hf_encode(tok, text, False))
    if lines:
        rc, out, err = tool(how, path, "lines", corpus, "special")
        if check(rc == 0, f"{name}: lines failed: {err.strip()}"):
            got = parse_ids(out)
            check(len(got) == len(text_lines), f"{name}: {len(got)} lines of ids for {len(text_lines)} lines")
            bad = [i for i, (g, line) in enumerate(zip(got, text_lines)) if g != hf_encode(tok, line)]
            check(not bad, f"{name}: {len(bad)} of {len(text_lines)} lines differ, first line {bad[:1]}: "
                  f"{text_lines[bad[0]]!r}" if bad else "")
    if roundtrip:
        rc, out, err = tool(how, path, "roundtrip", corpus)
        check(rc == 0 and b"round trip ok" in out, f"{name}: decode(encode(x)) != x: {out.decode()[:300]} {err}")
        ids_file = os.path.join(WORK, "ids.txt")
        with open(ids_file, "w") as f:
            f.write(" ".join(map(str, want)))
        for skip_special in (False, True):
            rc, out, err = tool(how, path, "decode", ids_file, *(["skip"] if skip_special else []))
            hf = tok.decode(want, skip_special_tokens=skip_special)
            check(rc == 0 and out.decode("utf-8") == hf,
                  f"{name}: decode (skip_special={skip_special}) differs from tokenizers at char "
                  f"{first_diff(out.decode('utf-8', 'replace'), hf)}")
    return time.time() - t0


def save(tok, d, patch=None, config=None):
    os.makedirs(d, exist_ok=True)
    j = json.loads(tok.to_str())
    if patch:
        patch(j)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False)
    return path, Tokenizer.from_file(path)


def write_spec(path, tok_json, pre, types=None, **ids):
    """The GGUF view of a tokenizer.json: tokens by id, types, merges, a pre-tokenizer name."""
    j = json.load(open(tok_json, encoding="utf-8"))
    vocab = dict(j["model"]["vocab"])
    n = max(vocab.values()) + 1
    tokens = [""] * n
    for t, i in vocab.items():
        tokens[i] = t
    tt = [1] * n
    for a in j["added_tokens"]:
        if a["id"] >= n:
            tokens += [""] * (a["id"] + 1 - n)
            tt += [1] * (a["id"] + 1 - n)
            n = a["id"] + 1
        tokens[a["id"]] = a["content"]
        tt[a["id"]] = 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    spec = {"model": "gpt2", "pre": pre, "tokens": tokens, "token_types": types or tt, "merges": merges}
    spec.update(ids)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    return path


def train(pre, specials, vocab_size=3000, alphabet=True, model_kwargs=None, added=None):
    tok = Tokenizer(models.BPE(**(model_kwargs or {})))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if alphabet else [],
                                  show_progress=False)
    tok.train_from_iterator(LINES, trainer)
    if added:
        tok.add_tokens(added)
    return tok


RE_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
RE_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
            r"\s*[\r\n]+|\s+(?!\S)|\s+")
CHATML = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def self_made():
    print("-- self-made vocabularies")
    # SmolLM2's pre-tokenizer: Digits(individual) then ByteLevel with its GPT-2 regex
    tok = train(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]), CHATML)
    d = os.path.join(WORK, "smollm")
    path, tok = save(tok, d)
    compare_loader("smollm json", tok, "--json", path)
    compare_loader("smollm json-memory", tok, "--json-memory", path, roundtrip=False, lines=False)
    spec = write_spec(os.path.join(d, "spec.json"), path, "smollm", bos=1, eos=2)
    compare_loader("smollm spec", tok, "--spec", spec, lines=False)

    # Llama 3: Split(regex, Isolated) + ByteLevel without its regex, ignore_merges, BOS by TemplateProcessing
    l3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(RE_LLAMA3), "isolated"),
                                         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), l3)
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", 0)])

    def ignore_merges(j):
        """ignore_merges only matters for words the merges cannot build: add some as tokens."""
        j["model"]["ignore_merges"] = True
        v = j["model"]["vocab"]
        n = max(max(v.values()), max(a["id"] for a in j["added_tokens"])) + 1
        # corpus words that BPE builds from three or more tokens become single tokens
        tmp = Tokenizer.from_str(json.dumps(j))
        added = 0
        for line in LINES[:300]:
            for w, _ in tmp.pre_tokenizer.pre_tokenize_str(line):
                if added < 40 and w not in v and len(tmp.model.tokenize(w)) >= 3:
                    v[w] = n
                    n += 1
                    added += 1
    d = os.path.join(WORK, "llama3")
    path, tok = save(tok, d, ignore_merges)
    compare_loader("llama3 json", tok, "--json", path)
    rc, out, err = tool("--json", path, "encode", CORPUS, "special", "bos")
    check(rc == 0 and parse_ids(out)[0] == hf_encode(tok, TEXT, True, True), "llama3 json: ids with BOS differ")
    spec = write_spec(os.path.join(d, "spec.json"), path, "llama-bpe", bos=0, eos=1, add_bos=True)
    compare_loader("llama3 spec (llama-bpe)", tok, "--spec", spec, lines=False)

    # Qwen2: its own Split regex (single digits)
    tok = train(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(RE_QWEN2), "isolated"),
                                         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), CHATML)
    d = os.path.join(WORK, "qwen2")
    path, tok = save(tok, d)
    compare_loader("qwen2 json", tok, "--json", path)
    spec = write_spec(os.path.join(d, "spec.json"), path, "qwen2")
    compare_loader("qwen2 spec", tok, "--spec", spec, lines=False)

    # GPT-2: ByteLevel alone
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"])
    d = os.path.join(WORK, "gpt2")
    path, tok = save(tok, d)
    compare_loader("gpt2 json", tok, "--json", path)
    spec = write_spec(os.path.join(d, "spec.json"), path, "gpt2")
    compare_loader("gpt2 spec", tok, "--spec", spec, lines=False)

    # add_prefix_space and added tokens with lstrip / rstrip / single_word / normalized
    added = [AddedToken("<mask>", lstrip=True, special=True), AddedToken("[SEP]", rstrip=True, special=True),
             AddedToken("tokenizer", single_word=True), AddedToken("wall", normalized=False),
             AddedToken("<|im", special=True), AddedToken("im_end|>", special=False)]
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=True), ["<|endoftext|>"], added=added)
    path, tok = save(tok, os.path.join(WORK, "prefix"))
    extra = "Say <mask>  now, [SEP]   here;  tokenizers tokenizer,tokenizer_x atokenizer wall walls <|im_end|>\n"
    corpus = os.path.join(WORK, "prefix", "corpus.txt")
    with open(corpus, "w", encoding="utf-8", newline="") as f:
        f.write(extra * 3 + TEXT)
    compare_loader("prefix-space+added json", tok, "--json", path, roundtrip=False, corpus=corpus)

    # each Split behavior alone (ByteLevel without its regex, so nothing re-splits), on the GPT-2
    # vocabulary: any pre-tokenization gives valid ids, and tokenizers is the judge of which
    gpt2_json = json.load(open(path, encoding="utf-8"))
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    variants = []
    for behavior in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        for invert in (False, True):
            for pat in ({"String": " "}, {"Regex": r"[.,;:!?]+|\s"}):
                variants.append((f"Split {list(pat)[0]} {behavior} invert={invert}",
                                 [{"type": "Split", "pattern": pat, "behavior": behavior, "invert": invert}, bl],
                                 behavior != "Removed"))
    variants += [
        ("Split empty matches", [{"type": "Split", "pattern": {"Regex": r"(?=e)|x*"}, "behavior": "Isolated",
                                  "invert": False}, bl], True),
        ("Split \\u escape", [{"type": "Split", "pattern": {"Regex": r"\u00a0|\u3000"}, "behavior": "Removed",
                                "invert": False}, bl], False),
        ("Digits runs", [{"type": "Digits", "individual_digits": False}, bl], True),
        ("Digits then prefix space", [{"type": "Digits", "individual_digits": True},
                                      dict(bl, add_prefix_space=True, use_regex=True)], False),
        ("Sequence in Sequence", [{"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "\n"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Digits", "individual_digits": True}]}, dict(bl, use_regex=True)], True),
    ]
    for i, (vname, steps, rt) in enumerate(variants):
        j = dict(gpt2_json, pre_tokenizer={"type": "Sequence", "pretokenizers": steps})
        vp = os.path.join(WORK, "variants", f"{i}", "tokenizer.json")
        os.makedirs(os.path.dirname(vp), exist_ok=True)
        with open(vp, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
        compare_loader(vname, Tokenizer.from_file(vp), "--json", vp, roundtrip=rt, specials=False, lines=False)

    # vocabularies missing some bytes: dropped characters, unk (fused or not), byte fallback
    for name, kw in (("no-unk", {}), ("unk", {"unk_token": "<unk>"}), ("unk-fused", {"unk_token": "<unk>", "fuse_unk": True})):
        tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<unk>"], vocab_size=400, alphabet=False,
                    model_kwargs=kw)
        path, tok = save(tok, os.path.join(WORK, name))
        compare_loader(f"{name} json", tok, "--json", path, roundtrip=False, lines=False)

    def byte_fallback(j):
        v = j["model"]["vocab"]
        n = max(v.values()) + 1
        for b in range(256):
            v[f"<0x{b:02X}>"] = n + b
        j["model"]["byte_fallback"] = True
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), [], vocab_size=400, alphabet=False)
    path, tok = save(tok, os.path.join(WORK, "byte-fallback"), byte_fallback)
    compare_loader("byte-fallback json", tok, "--json", path, roundtrip=False, lines=False)


# ---- chat templates -----------------------------------------------------------

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

# The other families, written after the published templates (their shape, without tool use).
QWEN2_TEMPLATE = (
    r"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    r"{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    r"{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN25_TEMPLATE = r"""{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
    {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
CHATML_TEMPLATE = (
    r"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    r"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3_TEMPLATE = (
    r"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    r"message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    r"{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    r"{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA31_TEMPLATE = r"""{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""
LLAMA2_TEMPLATE = (
    r"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    r"messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    r"{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    r"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    r"{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + "
    r"'\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    r"{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    r"{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
MISTRAL_TEMPLATE = (
    r"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    r"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    r"{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    r"{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    r"{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
QWEN3_TEMPLATE = r"""{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
"""

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"},
     {"role": "user", "content": "  How are you?\n\u3000"}],
    [{"role": "system", "content": " Sys \n"}, {"role": "user", "content": "\u00e9t\u00e9 \U0001F600"},
     {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nFine."}, {"role": "user", "content": "ok"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\nr1\n</think>\n\na1"},
     {"role": "tool", "content": "t1"}, {"role": "tool", "content": "t2"},
     {"role": "assistant", "content": "\n<think>x</think>a2"}],
    [],
]


def jinja_render(template, msgs, gen, bos, eos):
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(m):
        raise jinja2.exceptions.TemplateError(m)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=msgs, add_generation_prompt=gen, bos_token=bos, eos_token=eos)


def compare_chat(name, how, path, template, bos, eos):
    msgs_file = os.path.join(WORK, "msgs.json")
    for ci, conv in enumerate(CONVERSATIONS):
        for gen in (False, True):
            try:
                want = jinja_render(template, conv, gen, bos, eos)
            except Exception as e:  # the template itself refuses (roles, empty list)
                want = None
                why = e
            with open(msgs_file, "w", encoding="utf-8") as f:
                json.dump(conv, f, ensure_ascii=False)
            rc, out, err = tool(how, path, "chat", msgs_file, *(["gen"] if gen else []))
            if want is None:
                # an empty conversation is the template's own error, not a refusal we must copy
                check(rc != 0 or not conv, f"{name}: conversation {ci}: jinja2 refused ({why}) but qcore rendered")
                continue
            got = out.decode("utf-8")
            check(rc == 0 and got == want, f"{name}: conversation {ci} gen={gen}: rc={rc} {err.strip()}\n"
                  f"  qcore:  {got!r}\n  jinja2: {want!r}")


def chat_templates():
    print("-- chat templates")
    try:
        import jinja2  # noqa: F401
    except ImportError:
        skip("chat templates: jinja2 is not installed")
        return
    src = os.path.join(WORK, "llama3", "tokenizer.json")
    j = json.load(open(src, encoding="utf-8"))
    names = {a["content"] for a in j["added_tokens"]}
    for tname, template, want_name in (
            ("smollm2", SMOLLM2_TEMPLATE, "chatml-smollm"), ("qwen2", QWEN2_TEMPLATE, "chatml"), ("qwen2.5", QWEN25_TEMPLATE, "chatml-qwen2"),
            ("chatml", CHATML_TEMPLATE, "chatml"), ("qwen3", QWEN3_TEMPLATE, "chatml-qwen3"),
            ("llama3", LLAMA3_TEMPLATE, "llama3"), ("llama3.1", LLAMA31_TEMPLATE, "llama3.1"),
            ("llama2", LLAMA2_TEMPLATE, "llama2"), ("mistral", MISTRAL_TEMPLATE, "mistral")):
        d = os.path.join(WORK, "chat-" + tname)
        os.makedirs(d, exist_ok=True)
        shutil.copy(src, os.path.join(d, "tokenizer.json"))
        bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
        assert bos in names and eos in names
        config = {"chat_template": template, "bos_token": bos, "eos_token": {"content": eos}}
        if tname == "qwen3":  # newer repositories keep the template in chat_template.jinja
            del config["chat_template"]
            with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(template)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        path = os.path.join(d, "tokenizer.json")
        rc, out, err = tool("--json", path, "info")
        info = dict(line.split(" ", 1) for line in out.decode().splitlines())
        check(info.get("template") == want_name, f"{tname}: template recognised as {info.get('template')}, "
              f"want {want_name}")
        compare_chat(f"chat {tname}", "--json", path, template, bos, eos)


# ---- SmolLM2 from its GGUF ------------------------------------------------------

def smollm2():
    print("-- SmolLM2-135M-Instruct")
    gguf_path = os.environ.get("QCORE_SMOLLM2_GGUF") or os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(gguf_path):
        skip(f"SmolLM2: {gguf_path} is absent (scripts/setup.sh downloads it)")
        return
    try:
        from gguf import GGUFReader
    except ImportError:
        skip("SmolLM2: the gguf package is not installed")
        return
    r = GGUFReader(gguf_path)

    def strs(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = r.fields.get(key)
        return None if f is None else f.parts[f.data[0]].tolist()[0]

    def string(key):
        f = r.fields.get(key)
        return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8")
    tokens, merges = strs("tokenizer.ggml.tokens"), strs("tokenizer.ggml.merges")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    pre, template = string("tokenizer.ggml.pre"), string("tokenizer.chat_template")
    bos, eos, unk = scalar("tokenizer.ggml.bos_token_id"), scalar("tokenizer.ggml.eos_token_id"), \
        scalar("tokenizer.ggml.unknown_token_id")
    check(pre == "smollm", f"SmolLM2: tokenizer.ggml.pre is {pre!r}")
    check(template == SMOLLM2_TEMPLATE, "SmolLM2: the GGUF's chat template differs from the copy in this test")
    # tokenizer.json with the same vocabulary and SmolLM's pre-tokenizer config
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk], "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    d = os.path.join(WORK, "smollm2")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(tj, fh, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump({"chat_template": template, "bos_token": tokens[bos], "eos_token": tokens[eos],
                   "add_bos_token": False}, fh, ensure_ascii=False)
    tok = Tokenizer.from_file(path)
    spec = os.path.join(d, "spec.json")
    with open(spec, "w", encoding="utf-8") as fh:
        json.dump({"model": "gpt2", "pre": pre, "tokens": tokens, "token_types": types, "merges": merges, "bos": bos,
                   "eos": eos, "unk": unk, "chat_template": template}, fh, ensure_ascii=False)
    loaders = [("json", "--json", path), ("spec", "--spec", spec)]
    rc, out, err = tool("--gguf", gguf_path, "info")
    if rc == 77:
        skip("SmolLM2: qc_tok_tool was built without the GGUF reader (qc_tokenizer_gguf.c not in libqcore)")
    else:
        loaders.insert(0, ("gguf", "--gguf", gguf_path))
    for lname, how, p in loaders:
        rc, out, err = tool(how, p, "info")
        info = dict(line.split(" ", 1) for line in out.decode().splitlines()) if rc == 0 else {}
        check(info.get("vocab") == str(len(tokens)) and info.get("bos") == str(bos) and info.get("eos") == str(eos)
              and info.get("eot") == "2" and info.get("template") == "chatml-smollm",
              f"SmolLM2 {lname}: info {info} {err.strip()}")
        dt = compare_loader(f"SmolLM2 {lname}", tok, how, p)
        if dt is not None:
            print(f"SmolLM2 {lname}: tokenizers took {dt:.2f} s for the checks' oracle calls")
        try:
            import jinja2  # noqa: F401
            compare_chat(f"SmolLM2 {lname} chat", how, p, template, tokens[bos], tokens[eos])
        except ImportError:
            skip("SmolLM2 chat: jinja2 is not installed")
    # speed: a 50 KB+ text must encode quickly (the tool's whole run, load included)
    t0 = time.time()
    rc, out, err = tool(loaders[0][1], loaders[0][2], "encode", CORPUS, "special")
    dt = time.time() - t0
    print(f"SmolLM2 {loaders[0][0]}: load + encode of {len(TEXT.encode())} bytes in {dt:.2f} s")
    check(rc == 0 and dt < 30, f"SmolLM2: encoding the corpus took {dt:.1f} s")


def main():
    os.makedirs(WORK, exist_ok=True)
    check(len(TEXT.encode("utf-8")) >= 50 * 1024, "corpus is smaller than 50 KB")
    self_made()
    chat_templates()
    smollm2()
    print(f"tokenizer_oracle: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
