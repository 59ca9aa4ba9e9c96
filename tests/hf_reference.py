#!/usr/bin/python3
"""A Hugging Face decoder checkpoint (Qwen3, Qwen2, Llama, Mistral) run directly in numpy, float64,
as transformers' modeling code defines it: the independent oracle for `oneinfer export-hf`'s
graphs. Reads config.json and model.safetensors (BF16, F16 or F32), generates greedily without a
cache (every step recomputes the whole sequence) and writes the last-position logits of every
step as float32 rows.

usage: hf_reference.py CHECKPOINT_DIR --prompt-ids 1,2,3 -n N --dump-logits FILE
"""
import argparse
import json
import math
import os
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = data[lo:hi]
        if t["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, np.float16)
        elif t["dtype"] == "F32":
            a = np.frombuffer(raw, np.float32)
        else:
            raise SystemExit(f"{name}: dtype {t['dtype']} not handled")
        out[name] = a.astype(np.float64).reshape(t["shape"])
    return out


def inv_freq_of(cfg, d):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.get("rope_scaling")
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind != "llama3":
            raise SystemExit(f"rope_scaling {kind} not handled")
        # transformers' _compute_llama3_parameters
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        inv = np.where(medium, smoothed, scaled)
    return inv


def forward(cfg, w, ids):
    hd, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    kvh = cfg.get("num_key_value_heads", nh)
    d = cfg.get("head_dim") or hd // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    qwen3 = cfg["model_type"] == "qwen3"

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    s = len(ids)
    pos = np.arange(s, dtype=np.float64)
    freqs = np.outer(pos, inv_freq_of(cfg, d))
    cos, sin = np.cos(np.concatenate([freqs, freqs], -1)), np.sin(np.concatenate([freqs, freqs], -1))

    def rope(x):  # [heads, s, d]
        rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
        return x * cos + rot * sin

    mask = np.triu(np.full((s, s), -np.inf), 1)
    x = w["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = lin(h, p + "self_attn.q_proj").reshape(s, nh, d)
        k = lin(h, p + "self_attn.k_proj").reshape(s, kvh, d)
        v = lin(h, p + "self_attn.v_proj").reshape(s, kvh, d)
        if qwen3:
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k, v = rope(q.transpose(1, 0, 2)), rope(k.transpose(1, 0, 2)), v.transpose(1, 0, 2)
        k, v = np.repeat(k, nh // kvh, 0), np.repeat(v, nh // kvh, 0)
        sc = q @ k.transpose(0, 2, 1) / math.sqrt(d) + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        o = (sc / sc.sum(-1, keepdims=True)) @ v
        x = x + lin(o.transpose(1, 0, 2).reshape(s, nh * d), p + "self_attn.o_proj")
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = lin(h, p + "mlp.gate_proj")
        x = x + lin(g / (1 + np.exp(-g)) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, w["model.norm.weight"])
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return x[-1] @ head.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--dump-logits", required=True)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.ckpt, "config.json")))
    w = read_safetensors(os.path.join(a.ckpt, "model.safetensors"))
    ids = [int(t) for t in a.prompt_ids.split(",")]
    rows = []
    for _ in range(a.n):
        logits = forward(cfg, w, ids)
        rows.append(logits.astype(np.float32))
        ids.append(int(logits.argmax()))
    np.stack(rows).tofile(a.dump_logits)
    print(json.dumps({"generated_ids": ids[-a.n:]}))


if __name__ == "__main__":
    main()
