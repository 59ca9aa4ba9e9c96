#!/usr/bin/python3
"""ONNX Runtime runs a --weights q4nx export as the plain graph it is: this script reads
model.q4nx with its own numpy decoder of the q4_1 chunk layout (independent of quant/q4nx.cc),
feeds every weight input with the dequantised values ([in, out]) and compares ORT's next-token
logits with oneinfer's (which binds the same file at load and runs the 4-bit GEMM).

usage: q4nx_ort_check.py ONEINFER MODEL.onnx --prompt-ids 1,2,3 [--threads 2] [--kl-max 1e-3]
Passes when the argmax agrees and KL(ORT || oneinfer) <= --kl-max; the gap is oneinfer's int8
activation blocks, so it is not zero.
MODEL.onnx: a --cached or plain export; needs tests/oracles/node_modules (onnxruntime-node).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx

p = argparse.ArgumentParser()
p.add_argument("oneinfer")
p.add_argument("model")
p.add_argument("--prompt-ids", required=True)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--kl-max", type=float, default=1e-3)
a = p.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="q4nx_ort_")

m = onnx.load(a.model, load_external_data=False)
meta = {kv.key: kv.value for kv in m.metadata_props}
q4nx = os.path.join(os.path.dirname(os.path.abspath(a.model)), meta["oneinfer.q4nx_weights"])
raw = np.memmap(q4nx, dtype=np.uint8, mode="r")
hlen = struct.unpack("<Q", bytes(raw[:8]))[0]
header = json.loads(bytes(raw[8:8 + hlen]))
data = raw[8 + hlen:]

# Element (r, c) of a 32 x 256 tile: code byte ((r/16)*8 + c/32)*256 + 8*(c%32) + (r%16)/2 after
# 1024 bytes of bf16 scales and zeros (index (c/32)*32 + r); even rows in the low nibble.
r = np.arange(32)[:, None]
c = np.arange(256)[None, :]
code_byte = 1024 + ((r // 16) * 8 + c // 32) * 256 + 8 * (c % 32) + (r % 16) // 2
shift = (r % 2) * 4
sz_index = (c // 32) * 32 + r


def bf16(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def dequantise(name):
    e = header[name]
    tr, tc, chunk = e["shape"]
    assert e["dtype"] == "U8" and chunk == 5120, (name, e)
    lo, hi = e["data_offsets"]
    chunks = np.asarray(data[lo:hi]).reshape(tr, tc, 5120)
    scale = bf16(chunks[:, :, 0:512].copy().view(np.uint16))   # (tr, tc, 256)
    zero = bf16(chunks[:, :, 512:1024].copy().view(np.uint16))
    codes = (chunks[:, :, code_byte] >> shift) & 15                 # (tr, tc, 32, 256)
    w = codes * scale[:, :, sz_index] + zero[:, :, sz_index]        # [out, in] per tile
    return w.transpose(0, 2, 1, 3).reshape(tr * 32, tc * 256).astype(np.float32)


ids = [int(x) for x in a.prompt_ids.split(",")]
feeds = []
def feed(name, dtype, dims, array):
    path = os.path.join(tmp, f"{len(feeds)}.bin")
    array.astype(dtype).tofile(path)
    feeds.append({"name": name, "dtype": "float32" if dtype == np.float32 else "int64", "dims": dims, "file": path})

feed("input_ids", np.int64, [1, len(ids)], np.array(ids))
for vi in m.graph.input:
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    if vi.name == "past_kv":
        dims[3] = 0
        feed(vi.name, np.float32, dims, np.zeros(0))
    elif vi.name != "input_ids":
        w = dequantise(vi.name)  # [out, in]
        assert list(w.T.shape) == dims, (vi.name, w.shape, dims)
        feed(vi.name, np.float32, dims, np.ascontiguousarray(w.T))
with open(os.path.join(tmp, "feeds.json"), "w") as f:
    json.dump(feeds, f)

ort_out = os.path.join(tmp, "ort.bin")
res = subprocess.run(["node", os.path.join(here, "oracles", "ort_feed_run.js"), a.model, os.path.join(tmp, "feeds.json"),
                      ort_out, "--threads", str(a.threads)], capture_output=True, text=True)
if res.returncode != 0:
    sys.exit(f"ONNX Runtime failed: {res.stderr}")
ours_out = os.path.join(tmp, "ours.bin")
res = subprocess.run([a.oneinfer, "run", a.model, "--prompt-ids", a.prompt_ids, "-n", "1", "--threads", str(a.threads),
                      "--json", "--dump-logits", ours_out], capture_output=True, text=True)
if res.returncode != 0:
    sys.exit(f"oneinfer failed: {res.stdout}{res.stderr}")
x = np.fromfile(ours_out, dtype=np.float32).astype(np.float64)
y = np.fromfile(ort_out, dtype=np.float32).astype(np.float64)
rel = np.abs(x - y).max() / np.abs(y).max()
same = int(x.argmax()) == int(y.argmax())
lx, ly = x - x.max(), y - y.max()
lx, ly = lx - np.log(np.exp(lx).sum()), ly - np.log(np.exp(ly).sum())
kl = float((np.exp(ly) * (ly - lx)).sum())
print(f"weights fed: {len(feeds) - 1 - (1 if any(f['name'] == 'past_kv' for f in feeds) else 0)}; "
      f"next-token logits oneinfer vs ONNX Runtime (dequantised q4_1 fed as inputs): max |diff| / max |logit| = "
      f"{rel:.2e}, KL {kl:.2e}, argmax {'equal' if same else 'DIFFERS'} ({int(x.argmax())} vs {int(y.argmax())})")
sys.exit(0 if same and kl <= a.kl_max else 1)
