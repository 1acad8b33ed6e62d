#!/usr/bin/env python3
"""test_gguf_python.py - GGUF files written by gguf-py's GGUFWriter (every metadata type, every supported
tensor type) read by qc_gguf (through gguf_dump) and compared field by field with gguf-py's GGUFReader.
Also the default model, when set-up has placed it.  Usage: test_gguf_python.py <gguf_dump> <work folder>."""
import json
import math
import os
import subprocess
import sys
import zlib

try:
    import numpy as np
    import gguf
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType
MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def write_every_type(path, alignment=None):
    """Every scalar type, arrays of every element type, and one tensor of each supported ggml type."""
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -120)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 3.1)
    w.add_bool("t.bool_true", True)
    w.add_bool("t.bool_false", False)
    w.add_string("t.str", "h\u00e9llo w\u00f6rld \u2603")
    w.add_key_value("t.str_empty", "", VT.STRING)
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float64("t.f64", 1e300)
    w.add_float32("t.f32_inf", float("inf"))
    w.add_float64("t.f64_negzero", -0.0)
    arrays = {
        VT.UINT8: [0, 255, 7], VT.INT8: [-128, 127], VT.UINT16: [1, 65535], VT.INT16: [-32768, 5],
        VT.UINT32: [2**32 - 1, 0], VT.INT32: [-(2**31), 2**31 - 1], VT.FLOAT32: [0.5, -1.25, 1e-30],
        VT.BOOL: [True, False, True], VT.STRING: ["a", "", "\u00e9\u00e9", "x y"], VT.UINT64: [2**64 - 1, 1],
        VT.INT64: [-(2**63), 2**63 - 1], VT.FLOAT64: [math.pi, -2.5e-300],
    }
    for vt, vals in arrays.items():
        w.add_key_value(f"t.arr_{vt.name.lower()}", vals, VT.ARRAY, sub_type=vt)
    w.add_tensor("f32", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((2, 16)).astype(np.float16))
    for qt, rows in ((QT.BF16, 2), (QT.Q4_0, 2), (QT.Q4_1, 1), (QT.Q8_0, 3), (QT.Q4_K, 1), (QT.Q5_K, 2),
                     (QT.Q6_K, 1), (QT.MXFP4, 2)):
        block, size = gguf.GGML_QUANT_SIZES[qt]
        nbytes = size * 32 if block == 1 else size  # one block a row; 32 values for bf16
        raw = rng.integers(0, 256, (rows, nbytes), dtype=np.uint8)
        w.add_tensor(qt.name.lower(), raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def same_number(a, b):
    if isinstance(b, str):  # the dump writes non-finite floats as strings
        b = float(b)
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return int(a) == int(b)


def compare(path, dump, full_data=True):
    out = subprocess.run([dump, path], capture_output=True, text=True)
    check(out.returncode == 0, f"{path}: gguf_dump failed: {out.stderr.strip()}")
    if out.returncode:
        return
    ours = json.loads(out.stdout)
    r = gguf.GGUFReader(path)
    check(ours["alignment"] == r.alignment, f"{path}: alignment {ours['alignment']} vs {r.alignment}")
    check(ours["data_offset"] == r.data_offset, f"{path}: data offset {ours['data_offset']} vs {r.data_offset}")
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    check(ours["version"] == int(r.fields["GGUF.version"].contents()), f"{path}: version")
    check(len(ours["kv"]) == len(fields), f"{path}: {len(ours['kv'])} keys vs {len(fields)}")
    for kv, (name, f) in zip(ours["kv"], fields):
        key = bytes.fromhex(kv["key"]).decode()
        check(key == name, f"{path}: key {key!r} vs {name!r}")
        check(kv["type"] == int(f.types[0]), f"{name}: type {kv['type']} vs {f.types[0]}")
        if f.types[0] == VT.STRING:
            check(bytes.fromhex(kv["value"]) == bytes(f.parts[f.data[0]]), f"{name}: string value")
        elif f.types[0] == VT.ARRAY:
            check(kv["arr_type"] == int(f.types[1]), f"{name}: array type {kv['arr_type']} vs {f.types[1]}")
            if f.types[1] == VT.STRING:
                theirs = [bytes(f.parts[i]) for i in f.data]
                check([bytes.fromhex(s) for s in kv["value"]] == theirs, f"{name}: string array")
            else:
                theirs = f.contents()
                check(len(kv["value"]) == len(theirs) and all(same_number(a, b) for a, b in zip(theirs, kv["value"])),
                      f"{name}: array {kv['value'][:8]} vs {theirs[:8]}")
        else:
            check(same_number(f.contents(), kv["value"]), f"{name}: {kv['value']} vs {f.contents()}")
    check(len(ours["tensors"]) == len(r.tensors), f"{path}: {len(ours['tensors'])} tensors vs {len(r.tensors)}")
    for t, rt in zip(ours["tensors"], r.tensors):
        name = bytes.fromhex(t["name"]).decode()
        check(name == rt.name, f"tensor {name} vs {rt.name}")
        check(t["type"] == int(rt.tensor_type), f"{name}: type {t['type']} vs {int(rt.tensor_type)}")
        check(t["ne"] == [int(x) for x in rt.shape], f"{name}: ne {t['ne']} vs {list(rt.shape)}")
        check(t["bytes"] == int(rt.n_bytes), f"{name}: bytes {t['bytes']} vs {rt.n_bytes}")
        check(ours["data_offset"] + t["offset"] == int(rt.data_offset), f"{name}: offset")
        if full_data:
            check(t["crc32"] == zlib.crc32(np.ascontiguousarray(rt.data).tobytes()), f"{name}: data crc32")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dump, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for name, align in (("every_type.gguf", None), ("aligned64.gguf", 64)):
        path = os.path.join(work, name)
        write_every_type(path, align)
        compare(path, dump)
        print(f"{name}: compared")
    if os.path.exists(MODEL):
        compare(MODEL, dump)
        print(f"{MODEL}: compared")
    else:
        print(f"skip: {MODEL} not present")
    print(f"test_gguf_python: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
