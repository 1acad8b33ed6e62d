#!/usr/bin/env python3
"""make_seeds.py - writes the libFuzzer seed files in seeds/<fuzzer>/: small valid GGUF, safetensors and
config.json files, and one file for each corruption the readers must refuse.  Every file stays under 4 KB.
Run from anywhere: python3 tests/readers/make_seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


class Gguf:
    """A GGUF v2/v3 file; fields can be overridden to make corrupt variants."""

    def __init__(self, version=3, align=32):
        self.version, self.align = version, align
        self.kvs = []      # raw encoded key/values
        self.tensors = []  # [name, dims, type, data]
        self.n_tensors = self.n_kv = None
        self.offsets = None

    def kv(self, key, vtype, payload):
        self.kvs.append(gstr(key) + struct.pack("<I", vtype) + payload)

    def build(self):
        out = b"GGUF" + struct.pack("<I", self.version)
        out += struct.pack("<QQ", len(self.tensors) if self.n_tensors is None else self.n_tensors,
                           len(self.kvs) if self.n_kv is None else self.n_kv)
        out += b"".join(self.kvs)
        off, offs = 0, []
        for _, _, _, data in self.tensors:
            offs.append(off)
            off += (len(data) + self.align - 1) // self.align * self.align
        if self.offsets:
            offs = self.offsets
        for (name, dims, ttype, _), o in zip(self.tensors, offs):
            out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<IQ", ttype, o)
        out += b"\0" * (-len(out) % self.align)
        start = len(out)
        for (_, _, _, data), o in zip(self.tensors, sorted(offs)):
            out += b"\0" * max(0, start + o - len(out)) + data
        return out


def valid_gguf(**kw):
    g = Gguf(**kw)
    g.kv("general.architecture", 8, gstr("llama"))
    g.kv("general.alignment", 4, struct.pack("<I", g.align))
    g.kv("t.u8", 0, b"\x07")
    g.kv("t.i16", 3, struct.pack("<h", -5))
    g.kv("t.f32", 6, struct.pack("<f", 1.5))
    g.kv("t.bool", 7, b"\x01")
    g.kv("t.u64", 10, struct.pack("<Q", 2**40))
    g.kv("t.f64", 12, struct.pack("<d", -0.25))
    g.kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + gstr("a") + gstr("") + gstr("bc"))
    g.kv("t.arr_i32", 9, struct.pack("<IQiii", 5, 3, 1, -2, 3))
    g.tensors.append(["w.f32", [4, 2], 0, bytes(range(32))])
    g.tensors.append(["w.q8_0", [32], 8, bytes(range(34))])
    g.tensors.append(["w.q4_k", [256], 12, bytes(range(144))])
    return g


def gguf_seeds():
    s = {}
    s["valid.gguf"] = valid_gguf().build()
    s["valid_v2.gguf"] = valid_gguf(version=2).build()
    s["align64.gguf"] = valid_gguf(align=64).build()
    g = Gguf()
    s["header_only.gguf"] = g.build()
    g = valid_gguf(); g.n_tensors = 2**64 - 1; s["n_tensors_m1.gguf"] = g.build()
    g = valid_gguf(); g.n_kv = 2**64 - 1; s["n_kv_m1.gguf"] = g.build()
    g = valid_gguf(); g.kvs[0] = struct.pack("<Q", 2**64 - 1) + g.kvs[0][8:]; s["key_len_m1.gguf"] = g.build()
    g = valid_gguf(); g.kv("t.str", 8, struct.pack("<Q", 5000) + b"abc"); s["str_past_end.gguf"] = g.build()
    g = valid_gguf(); g.kv("t.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 0, 1) + b"x")
    s["nested_array.gguf"] = g.build()
    g = valid_gguf(); g.tensors[0][1] = [4, 2, 1, 1, 1]; s["dims5.gguf"] = g.build()
    g = valid_gguf(); g.tensors[0][1] = [2**32, 2**32]; s["dims_overflow.gguf"] = g.build()
    g = valid_gguf(); g.tensors[1][2] = 77; s["type_unknown.gguf"] = g.build()
    g = valid_gguf(); g.tensors[1][2] = 6; s["type_q5_0.gguf"] = g.build()
    g = valid_gguf(); g.offsets = [0, 33, 96]; s["misaligned.gguf"] = g.build()
    g = valid_gguf(); g.offsets = [64, 0, 128]; s["out_of_order.gguf"] = g.build()
    g = valid_gguf(); g.offsets = [0, 0, 64]; s["overlap.gguf"] = g.build()
    s["past_end.gguf"] = valid_gguf().build()[:-16]
    g = valid_gguf(); g.tensors[2][0] = "w.f32"; s["dup_tensor.gguf"] = g.build()
    g = valid_gguf(); g.kv("t.u8", 0, b"\x01"); s["dup_key.gguf"] = g.build()
    g = valid_gguf(); g.kvs[1] = gstr("general.alignment") + struct.pack("<II", 4, 48); s["align48.gguf"] = g.build()
    g = valid_gguf(version=1); s["v1.gguf"] = g.build()
    return s


def st(header, data=b"", raw_len=None):
    h = json.dumps(header, separators=(",", ":")).encode() if not isinstance(header, bytes) else header
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if raw_len is None else raw_len) + h + data


def e(dtype, shape, b, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, end]}


def st_seeds():
    s = {}
    ok = {"__metadata__": {"format": "pt"}, "a": e("F32", [2, 2], 0, 16), "b": e("BF16", [3], 16, 22),
          "c": e("F8_E4M3", [2], 22, 24), "d": e("I32", [], 24, 28), "z": e("U8", [0], 28, 28)}
    s["valid.safetensors"] = st(ok, bytes(range(28)))
    s["empty.safetensors"] = st({})
    s["header_m1.safetensors"] = st({}, raw_len=2**64 - 1)
    s["header_past.safetensors"] = st({}, raw_len=4096)
    s["overlap.safetensors"] = st({"a": e("F32", [2], 0, 8), "b": e("F32", [2], 4, 12)}, bytes(12))
    s["gap.safetensors"] = st({"a": e("F32", [1], 0, 4), "b": e("F32", [1], 8, 12)}, bytes(12))
    s["out_of_file.safetensors"] = st({"a": e("F32", [4], 0, 16)}, bytes(8))
    s["dup.safetensors"] = st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                              b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2))
    s["overflow.safetensors"] = st({"a": e("F32", [2**32, 2**32, 4], 0, 4)}, bytes(4))
    s["bool.safetensors"] = st({"a": e("BOOL", [1], 0, 1)}, bytes(1))
    s["size_mismatch.safetensors"] = st({"a": e("F16", [3], 0, 8)}, bytes(8))
    s["bad_metadata.safetensors"] = st({"__metadata__": {"k": 1}})
    s["not_object.safetensors"] = st([1, 2])
    return s


def config_seeds():
    smol = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
            "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "vocab_size": 49152, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000,
            "tie_word_embeddings": True}
    qwen = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
            "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
            "vocab_size": 151936, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6}
    s = {"smollm2.json": json.dumps(smol, indent=1).encode(), "qwen2.json": json.dumps(qwen).encode()}
    s["bad_heads.json"] = json.dumps(dict(smol, num_key_value_heads=4)).encode()
    s["missing.json"] = json.dumps({"model_type": "llama", "hidden_size": 8}).encode()
    s["wrong_type.json"] = json.dumps(dict(smol, hidden_size="576")).encode()
    s["not_object.json"] = b"[1, 2, 3]"
    s["cut.json"] = json.dumps(smol).encode()[:60]
    s["dup.json"] = b'{"model_type": "llama", "model_type": "qwen2"}'
    return s


def main():
    for folder, seeds in (("fuzz_gguf", gguf_seeds()), ("fuzz_safetensors", st_seeds()),
                          ("fuzz_config_json", config_seeds())):
        d = os.path.join(HERE, "seeds", folder)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            assert len(data) < 4096, (name, len(data))
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{d}: {len(seeds)} files")


if __name__ == "__main__":
    main()
