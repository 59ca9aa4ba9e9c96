#!/usr/bin/python3
"""Decoder-only LLM graphs in the layouts of the files people download, written here with
onnx.helper in the forms those exporters write (not with oneinfer's export-qwen3), with random
weights: a Qwen3-style decoder (RMSNorm, q/k norm, rotary, grouped-query attention, SiLU MLP).

usage: llm_layouts.py LAYOUT CONFIG OUT.onnx [--seed N]
  LAYOUT  optimum-eager   optimum / transformers.js as torch's TorchScript exporter writes it
                          (opset 17): per-layer past_key_values.{i}.key/.value, attention_mask,
                          position_ids; the causal mask built from attention_mask in the graph and
                          added to the scores (finfo.min where masked), scale after QK^T
          optimum-sdpa    the same through scaled_dot_product_attention's export: the mask as
                          Where(mask, 0, -inf), sqrt(scale) applied to q and to k^T separately,
                          rotary frequencies by MatMul
          optimum-q4      optimum-eager with every MatMul (lm_head too) as com.microsoft
                          MatMulNBits, 4-bit, block 32, packed uint8 zero points (asymmetric),
                          as ONNX Runtime's MatMul4BitsQuantizer writes them
          optimum-q4sym   the same at block 128, symmetric (no zero points: 8 implied)
          optimum-q8      transformers.js's model_quantized.onnx form (ONNX Runtime's
                          quantize_dynamic): DynamicQuantizeLinear -> MatMulInteger with int8
                          weights, one scale per tensor, zero point 0 -> Cast -> Mul by the
                          product of the scales; the embedding table int8 behind a
                          DequantizeLinear
          optimum-q8col   the same per column: uint8 weights with a scale and zero point per
                          output column
          optimum-fp16    optimum-eager exported in float16 (torch_dtype=float16): float16
                          weights, activations, KV cache and logits; RMSNorm, rotary cos/sin and
                          softmax computed in float32 between Casts, as the modeling code asks,
                          the mask filled with float16's lowest value
          genai           onnxruntime-genai's builder form: input_ids, attention_mask,
                          past_key_values.{i}.key/.value; SimplifiedLayerNormalization and
                          com.microsoft SkipSimplifiedLayerNormalization, the q/k/v projections
                          as one packed MatMul, com.microsoft GroupQueryAttention with do_rotary
                          and cos/sin caches, seqlens_k and total_sequence_length computed from
                          attention_mask in the graph
          genai-q4        the same with every MatMul (lm_head too) 4-bit MatMulNBits, block 32,
                          symmetric, accuracy_level 4 (the builder's CPU int4)
          genai-fp16      the same in float16 (weights, activations, KV cache, logits)
  CONFIG  tiny            2 layers, hidden 64, 4 heads, 2 kv heads, head_dim 16, vocab 1000
          real2           2 layers of Qwen3-0.6B's width: hidden 1024, 16 heads, 8 kv heads,
                          head_dim 128, intermediate 3072, vocab 151936
          qwen3-0.6b      all 28 layers of it (weights in OUT.onnx.data beside the graph, as
                          exporters write files past protobuf's 2 GB)
Prints one JSON line: layers, kv_heads, head_dim, vocab, kv_dtype.
"""
import argparse
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

CONFIGS = {
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, inter=128, vocab=1000, theta=1e6),
    "real2": dict(layers=2, hidden=1024, heads=16, kv_heads=8, head_dim=128, inter=3072, vocab=151936, theta=1e6),
    "qwen3-0.6b": dict(layers=28, hidden=1024, heads=16, kv_heads=8, head_dim=128, inter=3072, vocab=151936, theta=1e6),
}
EPS = 1e-6
FINFO_MIN = float(np.finfo(np.float32).min)


class Graph:
    """Nodes and initializers, each output named from a counter."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, hint):
        self.count += 1
        return f"/{hint}_{self.count}"

    def const(self, arr, hint="c"):
        n = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, op_type, inputs, hint=None, outputs=None, domain="", n_out=1, **attrs):
        outs = outputs or [self.name(hint or op_type) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type + "_node"), domain=domain,
                                           **attrs))
        return outs[0] if len(outs) == 1 else outs

    def i64(self, values):
        return self.const(np.array(values, dtype=np.int64), "shape")

    def f32(self, value):
        return self.const(np.array(value, dtype=np.float32), "scalar")


def quantize_4bit(w, block, symmetric):
    """w [K, N] float -> MatMulNBits B [N, blocks, block/2], scales [N*blocks], zero points
    [N * ceil(blocks/2)] uint8 (None when symmetric). Low nibble first, as ONNX Runtime packs."""
    k, n = w.shape
    blocks = (k + block - 1) // block
    wt = np.zeros((n, blocks * block), dtype=np.float32)
    wt[:, :k] = w.T
    wb = wt.reshape(n, blocks, block)
    if symmetric:
        scale = np.abs(wb).max(axis=2) / 7.0
        scale[scale == 0] = 1.0
        zp = np.full((n, blocks), 8, dtype=np.int32)
    else:
        lo, hi = np.minimum(wb.min(axis=2), 0), np.maximum(wb.max(axis=2), 0)
        scale = (hi - lo) / 15.0
        scale[scale == 0] = 1.0
        zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.int32)
    q = np.clip(np.round(wb / scale[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    zp_packed = None
    if not symmetric:
        zpad = np.zeros((n, blocks + blocks % 2), dtype=np.uint8)
        zpad[:, :blocks] = zp
        zp_packed = (zpad[:, 0::2] | (zpad[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return packed, scale.astype(np.float32).reshape(-1), zp_packed


def build(layout, cfg, rng):
    L, Hd, H, KVH, D, I, V = (cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "inter", "vocab"))
    sdpa = layout == "optimum-sdpa"
    q4 = layout.startswith("optimum-q4")
    q8 = layout.startswith("optimum-q8")
    fp16 = layout == "optimum-fp16"
    DT = np.float16 if fp16 else np.float32  # the model's dtype
    ET = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    g = Graph()

    def weight(k, n):
        return (rng.standard_normal((k, n)) / np.sqrt(k)).astype(DT)

    def to_model_dtype(x):  # .to(input_dtype) after a float32 computation
        return g.op("Cast", [x], to=TensorProto.FLOAT16) if fp16 else x

    def to_float32(x):
        return g.op("Cast", [x], to=TensorProto.FLOAT) if fp16 else x

    def scalar(v):  # a constant of the model's dtype
        return g.const(np.array(v, dtype=DT), "scalar")

    def linear(x, k, n, hint):
        w = weight(k, n)
        if q8:
            xq, xs, xz = g.op("DynamicQuantizeLinear", [x], hint + "/x_q", n_out=3)
            if layout == "optimum-q8col":
                lo, hi = np.minimum(w.min(axis=0), 0), np.maximum(w.max(axis=0), 0)
                ws = ((hi - lo) / 255.0).astype(np.float32)
                ws[ws == 0] = 1.0
                wz = np.clip(np.round(-lo / ws), 0, 255).astype(np.uint8)
                wq = np.clip(np.round(w / ws) + wz, 0, 255).astype(np.uint8)
            else:
                ws = np.array(np.abs(w).max() / 127.0, dtype=np.float32)
                wz = np.array(0, dtype=np.int8)
                wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
            mm = g.op("MatMulInteger", [xq, g.const(wq, hint + ".weight_quantized"), xz,
                                        g.const(wz, hint + ".weight_zero_point")], hint + "/MatMulInteger")
            scale = g.op("Mul", [xs, g.const(ws, hint + ".weight_scale")])
            return g.op("Mul", [g.op("Cast", [mm], to=TensorProto.FLOAT), scale], hint)
        if not q4:
            return g.op("MatMul", [x, g.const(w, hint + ".weight")], hint)
        block, sym = (128, True) if layout == "optimum-q4sym" else (32, False)
        b, s, z = quantize_4bit(w, block, sym)
        ins = [x, g.const(b, hint + ".qweight"), g.const(s, hint + ".scales")]
        if z is not None:
            ins.append(g.const(z, hint + ".qzeros"))
        return g.op("MatMulNBits", ins, hint, domain="com.microsoft", K=k, N=n, bits=4, block_size=block)

    def rms_norm(x, width, hint):
        # torch's export of Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps) * weight
        w = (1.0 + 0.1 * rng.standard_normal(width)).astype(DT)
        x = to_float32(x)
        var = g.op("ReduceMean", [g.op("Pow", [x, g.f32(2.0)])], hint + "/var", axes=[-1], keepdims=1)
        inv = g.op("Div", [g.f32(1.0), g.op("Sqrt", [g.op("Add", [var, g.f32(EPS)])])])
        return g.op("Mul", [g.const(w, hint + ".weight"), to_model_dtype(g.op("Mul", [x, inv]))], hint)

    def rotate(x, cos, sin):
        x1 = g.op("Slice", [x, g.i64([0]), g.i64([D // 2]), g.i64([3])])
        x2 = g.op("Slice", [x, g.i64([D // 2]), g.i64([np.iinfo(np.int64).max]), g.i64([3])])
        rot = g.op("Concat", [g.op("Neg", [x2]), x1], axis=3)
        return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [rot, sin])])

    # Shapes from the inputs: S new tokens, T = past + S positions.
    S = g.op("Gather", [g.op("Shape", ["input_ids"]), g.i64(1)], axis=0)
    T = g.op("Gather", [g.op("Shape", ["attention_mask"]), g.i64(1)], axis=0)
    past_len = g.op("Sub", [T, S])
    # The 4-D mask [B, 1, S, T]: key position <= query position, and the key not padding.
    rows = g.op("Range", [past_len, T, g.i64(1)])
    cols = g.op("Range", [g.i64(0), T, g.i64(1)])
    causal = g.op("LessOrEqual", [g.op("Unsqueeze", [cols, g.i64([0])]), g.op("Unsqueeze", [rows, g.i64([1])])])
    pad = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=TensorProto.BOOL), g.i64([1, 2])])
    keep = g.op("And", [causal, pad])
    lowest = float(np.finfo(np.float16).min) if fp16 else FINFO_MIN
    mask = g.op("Where", [keep, scalar(0.0), scalar(-np.inf if sdpa else lowest)], "causal_mask")

    # Rotary cos/sin [B, 1, S, D] from position_ids.
    inv_freq = (1.0 / cfg["theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D)).astype(np.float32)
    pos = g.op("Cast", ["position_ids"], to=TensorProto.FLOAT)
    if sdpa:  # inv_freq[None, :, None] @ position_ids[:, None, :], transposed, as modeling code writes it
        freqs = g.op("Transpose", [g.op("MatMul", [g.const(inv_freq.reshape(1, D // 2, 1), "inv_freq"),
                                                   g.op("Unsqueeze", [pos, g.i64([1])])])], perm=[0, 2, 1])
    else:
        freqs = g.op("Mul", [g.op("Unsqueeze", [pos, g.i64([2])]), g.const(inv_freq, "inv_freq")])
    emb = g.op("Concat", [freqs, freqs], axis=-1)
    cos = g.op("Unsqueeze", [to_model_dtype(g.op("Cos", [emb])), g.i64([1])], "cos")
    sin = g.op("Unsqueeze", [to_model_dtype(g.op("Sin", [emb])), g.i64([1])], "sin")

    embed = (rng.standard_normal((V, Hd))).astype(DT)
    if q8:  # int8 table, one scale: DequantizeLinear in front of the Gather
        es = np.float32(np.abs(embed).max() / 127.0)
        eq = np.clip(np.round(embed / es), -127, 127).astype(np.int8)
        table = g.op("DequantizeLinear", [g.const(eq, "embed_tokens.weight_quantized"), g.f32(es),
                                          g.const(np.array(0, np.int8), "embed_zp")], "embed_tokens.weight")
    else:
        table = g.const(embed, "embed_tokens.weight")
    x = g.op("Gather", [table, "input_ids"], "embed")
    scale = 1.0 / np.sqrt(D)
    for l in range(L):
        p = f"layers.{l}"
        h = rms_norm(x, Hd, p + ".input_layernorm")

        def heads(t, n, norm):
            t = g.op("Reshape", [t, g.i64([0, 0, n, D])])
            if norm:
                t = rms_norm(t, D, norm)
            return g.op("Transpose", [t], perm=[0, 2, 1, 3])

        q = rotate(heads(linear(h, Hd, H * D, p + ".q_proj"), H, p + ".q_norm"), cos, sin)
        k = rotate(heads(linear(h, Hd, KVH * D, p + ".k_proj"), KVH, p + ".k_norm"), cos, sin)
        v = heads(linear(h, Hd, KVH * D, p + ".v_proj"), KVH, None)
        k_all = g.op("Concat", [f"past_key_values.{l}.key", k], outputs=[f"present.{l}.key"], axis=2)
        v_all = g.op("Concat", [f"past_key_values.{l}.value", v], outputs=[f"present.{l}.value"], axis=2)

        def repeat_kv(t):
            if H == KVH:
                return t
            t = g.op("Expand", [g.op("Unsqueeze", [t, g.i64([2])]), g.i64([1, 1, H // KVH, 1, 1])])
            return g.op("Reshape", [t, g.i64([0, H, -1, D])])

        kt = g.op("Transpose", [repeat_kv(k_all)], perm=[0, 1, 3, 2])
        if sdpa:
            root = scalar(np.sqrt(scale))
            scores = g.op("MatMul", [g.op("Mul", [q, root]), g.op("Mul", [kt, root])])
        else:
            scores = g.op("Mul", [g.op("MatMul", [q, kt]), scalar(scale)])
        # softmax(..., dtype=torch.float32).to(query.dtype)
        probs = to_model_dtype(g.op("Softmax", [to_float32(g.op("Add", [scores, mask]))], axis=-1))
        ctx = g.op("MatMul", [probs, repeat_kv(v_all)])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), g.i64([0, 0, H * D])])
        x = g.op("Add", [x, linear(ctx, H * D, Hd, p + ".o_proj")])
        h = rms_norm(x, Hd, p + ".post_attention_layernorm")
        gate = linear(h, Hd, I, p + ".mlp.gate_proj")
        act = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        x = g.op("Add", [x, linear(g.op("Mul", [act, linear(h, Hd, I, p + ".mlp.up_proj")]), I, Hd, p + ".mlp.down_proj")])
    x = rms_norm(x, Hd, "norm")
    logits = linear(x, Hd, V, "lm_head")
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))

    f = ET
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", f, ["batch_size", "sequence_length", V])]
    for l in range(L):
        for part in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{l}.{part}", f,
                                                        ["batch_size", KVH, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{l}.{part}", f,
                                                         ["batch_size", KVH, "total_sequence_length", D]))
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    opsets = [helper.make_opsetid("", 17)]
    if q4:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="pytorch", producer_version="2.5.1")
    model.ir_version = 8
    return model


def build_genai(layout, cfg, rng):
    L, Hd, H, KVH, D, I, V = (cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "inter", "vocab"))
    fp16 = layout == "genai-fp16"
    q4 = layout == "genai-q4"
    DT = np.float16 if fp16 else np.float32
    ET = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    MS = "com.microsoft"
    g = Graph()

    def linear(x, k, n, hint):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        if q4:
            b, sc, _ = quantize_4bit(w, 32, True)
            return g.op("MatMulNBits", [x, g.const(b, hint + ".MatMul.weight_Q4"), g.const(sc, hint + ".MatMul.weight_scales")],
                        hint, domain=MS, K=k, N=n, bits=4, block_size=32, accuracy_level=4)
        return g.op("MatMul", [x, g.const(w.astype(DT), hint + ".MatMul.weight")], hint)

    def norm_weight(width, hint):
        return g.const((1.0 + 0.1 * rng.standard_normal(width)).astype(DT), hint + ".weight")

    def simple_norm(x, width, hint):
        return g.op("SimplifiedLayerNormalization", [x, norm_weight(width, hint)], hint, axis=-1, epsilon=EPS,
                    stash_type=1)

    def skip_norm(x, skip, width, hint):
        # outputs: normalised, mean, inv_std_var, input + skip (the next residual)
        outs = [g.name(hint), "", "", g.name(hint + "/sum")]
        g.nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [x, skip, norm_weight(width, hint)], outs,
                                        name=g.name("SkipSimplifiedLayerNormalization"), domain=MS, epsilon=EPS))
        return outs[0], outs[3]

    # seqlens_k = sum(attention_mask) - 1 and total_sequence_length, as int32 (the builder's
    # attention mask reformatting subgraph).
    mask_sum = g.op("ReduceSum", ["attention_mask", g.i64([1])], keepdims=0)
    seqlens_k = g.op("Cast", [g.op("Sub", [mask_sum, g.i64([1])])], "seqlens_k", to=TensorProto.INT32)
    total = g.op("Cast", [g.op("Gather", [g.op("Shape", ["attention_mask"]), g.i64(1)], axis=0)],
                 "total_seq_len", to=TensorProto.INT32)
    max_len = 512
    inv_freq = 1.0 / cfg["theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D)
    freqs = np.outer(np.arange(max_len, dtype=np.float64), inv_freq)
    cos_cache = g.const(np.cos(freqs).astype(DT), "cos_cache")
    sin_cache = g.const(np.sin(freqs).astype(DT), "sin_cache")

    x = g.op("Gather", [g.const(rng.standard_normal((V, Hd)).astype(DT), "embed_tokens.weight"), "input_ids"], "embed")
    residual = x
    h = simple_norm(x, Hd, "layers.0.input_layernorm")
    for l in range(L):
        p = f"layers.{l}"
        qkv = linear(h, Hd, (H + 2 * KVH) * D, p + ".attn.qkv_proj")
        q, k, v = g.op("Split", [qkv, g.i64([H * D, KVH * D, KVH * D])], p + "/split", n_out=3, axis=-1)

        def qk_norm(t, n, hint):  # Qwen3's per-head RMSNorm, on [B, S, n, D]
            t = g.op("Reshape", [t, g.i64([0, 0, n, D])])
            return g.op("Reshape", [simple_norm(t, D, hint), g.i64([0, 0, n * D])])

        q, k = qk_norm(q, H, p + ".attn.q_norm"), qk_norm(k, KVH, p + ".attn.k_norm")
        attn = g.op("GroupQueryAttention",
                    [q, k, v, f"past_key_values.{l}.key", f"past_key_values.{l}.value", seqlens_k, total, cos_cache,
                     sin_cache], outputs=[g.name(p + "/attn"), f"present.{l}.key", f"present.{l}.value"], domain=MS,
                    num_heads=H, kv_num_heads=KVH, do_rotary=1, rotary_interleaved=0, scale=float(1.0 / np.sqrt(D)))[0]
        o = linear(attn, H * D, Hd, p + ".attn.o_proj")
        h, residual = skip_norm(o, residual, Hd, p + ".post_attention_layernorm")
        gate = linear(h, Hd, I, p + ".mlp.gate_proj")
        act = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        down = linear(g.op("Mul", [act, linear(h, Hd, I, p + ".mlp.up_proj")]), I, Hd, p + ".mlp.down_proj")
        nxt = f"layers.{l + 1}.input_layernorm" if l + 1 < L else "norm"
        h, residual = skip_norm(down, residual, Hd, nxt)
    logits = linear(h, Hd, V, "lm_head")
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", ET, ["batch_size", "sequence_length", V])]
    for l in range(L):
        for part in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{l}.{part}", ET,
                                                        ["batch_size", KVH, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{l}.{part}", ET,
                                                         ["batch_size", KVH, "total_sequence_length", D]))
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                              producer_name="onnxruntime-genai", producer_version="0.8.0")
    model.ir_version = 10
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layout", choices=["optimum-eager", "optimum-sdpa", "optimum-q4", "optimum-q4sym", "optimum-q8",
                                       "optimum-q8col", "optimum-fp16", "genai", "genai-q4", "genai-fp16"])
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    cfg = CONFIGS[a.config]
    rng = np.random.default_rng(a.seed)
    model = build_genai(a.layout, cfg, rng) if a.layout.startswith("genai") else build(a.layout, cfg, rng)
    if sum(len(t.raw_data) for t in model.graph.initializer) > (1 << 30):
        from onnx import external_data_helper
        import onnx
        external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                                            location=os.path.basename(a.out) + ".data",
                                                            size_threshold=1024)
        onnx.save_model(model, a.out)
    else:
        with open(a.out, "wb") as f:
            f.write(model.SerializeToString())
    print(json.dumps({"layers": cfg["layers"], "kv_heads": cfg["kv_heads"], "head_dim": cfg["head_dim"],
                      "vocab": cfg["vocab"], "kv_dtype": "float16" if a.layout.endswith("fp16") else "float32"}))


if __name__ == "__main__":
    sys.exit(main())
