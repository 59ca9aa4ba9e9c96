#!/usr/bin/python3
"""One-node graphs of the com.microsoft operators that optimum / onnxruntime-genai LLM files use
(MatMulNBits, ...), written with onnx.helper, their inputs, and the comparison of oneinfer's
outputs with ONNX Runtime's.

usage: contrib_graphs.py build DIR     writes DIR/<case>/{model.onnx, in/input_<i>.pb, in.json,
                                      x<i>.bin, bound<j>.npy} and DIR/cases.txt
       contrib_graphs.py compare DIR   compares DIR/<case>/ours/output_<j>.pb (oneinfer exec) with
                                      DIR/<case>/ort/output_<j>.bin (tests/oracles/ort_run_cases.js)
                                      for every case: |ours - ort| <= bound elementwise; prints one
                                      line per case, exits 1 when any case fails

Each case's bound is what the two engines' documented arithmetic may differ by, computed here from
the case's own values (see each writer).
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
NP_OF = {TensorProto.BOOL: np.bool_, TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.INT64: np.int64,
         TensorProto.INT32: np.int32, TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}
JS_OF = {np.dtype(np.bool_): "bool", np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(np.int64): "int64",
         np.dtype(np.int32): "int32", np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}
TP_OF = {np.dtype(v): k for k, v in NP_OF.items()}

CASES = []  # (name, writer function)


def case(fn):
    CASES.append(fn)
    return fn


def write_case(root, name, node, inputs, inits, outputs, bounds, refs=None, opset=21):
    """inputs: [(name, array)] fed at run time; inits: [(name, array)] initializers;
    outputs: [(name, elem_type)]; bounds: one array (or scalar) per output; refs: this script's
    float64 value of each output (printed beside the comparison, for diagnosis only)."""
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    g = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TP_OF[a.dtype], list(a.shape)) for n, a in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                          producer_name="contrib_graphs.py")
    m.ir_version = 10
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    spec = []
    for i, (n, a) in enumerate(inputs):
        with open(os.path.join(d, "in", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
        a.tofile(os.path.join(d, f"x{i}.bin"))
        spec.append({"name": n, "type": JS_OF[a.dtype], "dims": list(a.shape), "file": f"x{i}.bin"})
    with open(os.path.join(d, "in.json"), "w") as f:
        json.dump(spec, f)
    for j, b in enumerate(bounds):
        np.save(os.path.join(d, f"bound{j}.npy"), np.asarray(b, np.float64))
    for j, v in enumerate(refs or []):
        np.save(os.path.join(d, f"ref{j}.npy"), np.asarray(v, np.float64))
    return name


def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)) * 7919)


# --- MatMulNBits ------------------------------------------------------------------------------

def nbits_case(root, name, M, K, N, bits, bs, zp="none", ftype=np.float32, bias=False, level=None,
               shape2d=False, a_shape=None, g_idx=False):
    """zp: none | packed | float. The bound: at accuracy_level 4 oneinfer quantises A to int8 per
    block of 32 (16-blocks and the ragged tail alone), |a - q s| <= amax / 254 per element, so
    |y - y_exact| <= sum_k |w_k| amax_k / 254 (4-bit only), and ORT quantises A per block_size the
    same way; below level 4 both compute in float; float16 adds the inputs' and outputs' rounding;
    float32 accumulation adds 1e-5 of the magnitudes."""
    r = rng_for(name)
    blocks = (K + bs - 1) // bs
    q = r.integers(0, 1 << bits, size=(N, blocks * bs)).astype(np.uint8)
    q[:, K:] = 0
    scales = r.uniform(0.002, 0.02, size=(N, blocks)).astype(ftype)
    zps = r.integers(0, 1 << bits, size=(N, blocks)).astype(np.uint8)
    if zp == "float":
        zpf = (zps + r.uniform(-0.5, 0.5, size=zps.shape)).astype(ftype)
    if bits == 4:
        blob = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(N, blocks, bs // 2)
        zz = np.concatenate([zps, np.zeros((N, blocks % 2), np.uint8)], axis=1)
        zp_packed = zz[:, 0::2] | (zz[:, 1::2] << 4)
    else:
        blob = q.reshape(N, blocks, bs)
        zp_packed = zps
    zero = {"none": np.full((N, blocks), 1 << (bits - 1), np.float64), "packed": zps.astype(np.float64),
            "float": zpf.astype(np.float64) if zp == "float" else None}[zp]
    s64 = scales.astype(np.float64)
    w = (q[:, :K].astype(np.float64) - np.repeat(zero, bs, axis=1)[:, :K]) * np.repeat(s64, bs, axis=1)[:, :K]
    a_shape = a_shape or (M, K)
    a = r.uniform(-1, 1, size=a_shape).astype(ftype)
    a2 = a.reshape(-1, K).astype(np.float64)
    y = a2 @ w.T
    inits = [("B", blob), ("scales", scales if shape2d else scales.reshape(-1))]
    ins = ["A", "B", "scales"]
    if zp == "packed":
        inits.append(("zero_points", zp_packed if shape2d else zp_packed.reshape(-1)))
        ins.append("zero_points")
    elif zp == "float":
        inits.append(("zero_points", zpf if shape2d else zpf.reshape(-1)))
        ins.append("zero_points")
    if g_idx:
        while len(ins) < 4:
            ins.append("")
        inits.append(("g_idx", (np.arange(K) // bs).astype(np.int32)))
        ins.append("g_idx")
    feeds = [("A", a)]
    if bias:
        bvec = r.uniform(-1, 1, size=N).astype(ftype)
        while len(ins) < 5:
            ins.append("")
        ins.append("bias")
        feeds.append(("bias", bvec))
        y = y + bvec.astype(np.float64)

    def q8_err(block):  # per element of a2: amax of its quantisation block / 254
        e = np.zeros_like(a2)
        for k0 in range(0, K, block):
            e[:, k0:k0 + block] = np.abs(a2[:, k0:k0 + block]).max(axis=1, keepdims=True) / 254
        return e

    absw = np.abs(w)
    mag = np.abs(a2) @ ((np.abs(q[:, :K]) + np.repeat(np.abs(zero), bs, axis=1)[:, :K]) *
                        np.repeat(s64, bs, axis=1)[:, :K]).T
    bound = 1e-5 * mag + 1e-6
    if bits == 4 and level == 4:
        bound = bound + q8_err(16 if bs == 16 else 32) @ absw.T + q8_err(bs) @ absw.T
    if ftype == np.float16:
        bound = bound + 2e-3 * (np.abs(a2) @ absw.T) + 2 * np.abs(y) * 2.0 ** -11 + 2e-3
    attrs = dict(K=K, N=N, bits=bits, block_size=bs)
    if level is not None:
        attrs["accuracy_level"] = level
    node = helper.make_node("MatMulNBits", ins, ["Y"], name="mmnb", domain=MS, **attrs)
    out_shape = a_shape[:-1] + (N,)
    return write_case(root, name, node, feeds, inits, [("Y", TP_OF[np.dtype(ftype)])],
                      [bound.reshape(out_shape)], [y.reshape(out_shape)])


@case
def matmul_nbits_cases(root):
    names = []
    for bs in (16, 32, 64, 128, 256):
        names.append(nbits_case(root, f"mmnb4_sym_bs{bs}", 3, 256, 40, 4, bs))
    names += [
        nbits_case(root, "mmnb4_packedzp_bs32_2d_oddblocks", 3, 96, 33, 4, 32, zp="packed", shape2d=True),
        nbits_case(root, "mmnb4_packedzp_bs16_oddblocks", 2, 48, 17, 4, 16, zp="packed"),
        nbits_case(root, "mmnb4_packedzp_bs128", 4, 512, 48, 4, 128, zp="packed"),
        nbits_case(root, "mmnb4_ragged_k72_bs32", 3, 72, 20, 4, 32),
        nbits_case(root, "mmnb4_ragged_k40_bs16_zp", 3, 40, 20, 4, 16, zp="packed"),
        nbits_case(root, "mmnb4_ragged_k200_bs128_zp", 2, 200, 24, 4, 128, zp="packed"),
        nbits_case(root, "mmnb4_floatzp_bs64", 3, 256, 24, 4, 64, zp="float"),
        nbits_case(root, "mmnb4_floatzp_bs32_2d", 3, 128, 24, 4, 32, zp="float", shape2d=True),
        nbits_case(root, "mmnb4_bias_bs32", 3, 128, 40, 4, 32, zp="packed", bias=True),
        nbits_case(root, "mmnb4_level4_bs32", 3, 256, 40, 4, 32, zp="packed", level=4),
        nbits_case(root, "mmnb4_level4_bs128_sym", 1, 1024, 256, 4, 128, level=4),
        nbits_case(root, "mmnb4_level1_bs32", 2, 128, 24, 4, 32, level=1),
        nbits_case(root, "mmnb4_3d_a", None, 128, 24, 4, 64, zp="packed", a_shape=(2, 3, 128)),
        nbits_case(root, "mmnb4_decode_k1024_n256_bs32", 1, 1024, 256, 4, 32, zp="packed"),
        nbits_case(root, "mmnb4_fp16_sym_bs32", 3, 128, 40, 4, 32, ftype=np.float16),
        nbits_case(root, "mmnb4_fp16_packedzp_bs16", 3, 64, 40, 4, 16, zp="packed", ftype=np.float16),
        nbits_case(root, "mmnb4_fp16_floatzp_bs128_bias", 2, 256, 24, 4, 128, zp="float", ftype=np.float16,
                   bias=True),
        nbits_case(root, "mmnb8_sym_bs32", 3, 128, 24, 8, 32),
        nbits_case(root, "mmnb8_packedzp_bs64_2d", 3, 192, 24, 8, 64, zp="packed", shape2d=True),
        # 8-bit with float zero points: ONNX Runtime 1.30 refuses them ("Only 2b and 4b quantization is
        # supported for unpacked compute"), so only the unit test checks them (against the reference).
        nbits_case(root, "mmnb8_fp16_bs128_bias", 2, 256, 24, 8, 128, zp="packed", ftype=np.float16, bias=True),
        nbits_case(root, "mmnb8_ragged_k100_bs32", 2, 100, 24, 8, 32),
    ]
    return names


# --- SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, SkipLayerNormalization ------

def float_bound(y, dtype, rel32=1e-5, ulps16=1.5):
    """float32: rel32 of |y| (different summation orders); float16: ulps16 units in the last place of
    |y| (1.5 where both round a float32 value once, which may sit across a rounding boundary)."""
    y = np.abs(np.asarray(y, np.float64))
    if np.dtype(dtype) == np.float16:
        return ulps16 * np.spacing(y.astype(np.float16)).astype(np.float64) + 1e-7
    return rel32 * (y + 1.0)


def norm_case(root, name, op, x_shape, dtype=np.float32, axis=None, epsilon=None, skip_shape=None, beta=False,
              bias=False, outputs=(0, 1, 2, 3), scale_dtype=None):
    r = rng_for(name)
    x = (r.normal(0, 1, size=x_shape) + 0.5).astype(dtype)
    h = x_shape[-1]
    simplified = op != "SkipLayerNormalization"
    feeds, ins = [("input", x)], ["input"]
    x64 = x.astype(np.float64)
    if op == "SimplifiedLayerNormalization":
        ax = (axis if axis is not None else -1) % len(x_shape)
        norm_shape = x_shape[ax:]
        g = r.uniform(0.5, 1.5, size=norm_shape).astype(scale_dtype or dtype)
        feeds.append(("scale", g))
        ins.append("scale")
        axes = tuple(range(ax, len(x_shape)))
        eps = 1e-5 if epsilon is None else epsilon
        inv = 1.0 / np.sqrt((x64 ** 2).mean(axis=axes, keepdims=True) + eps)
        y = x64 * inv * g.astype(np.float64)
        ydt = scale_dtype or dtype  # ONNX Runtime types Y as the scale (its V), not as X
        outs = [("Y", TP_OF[np.dtype(ydt)], y, ydt), ("inv_std_var", TensorProto.FLOAT, inv, np.float32)]
        outs = [o for i, o in enumerate(outs) if i in outputs]
        attrs = {k: v for k, v in (("axis", axis), ("epsilon", epsilon)) if v is not None}
        node = helper.make_node(op, ins, [o[0] for o in outs], name="norm", **attrs)
    else:
        skip = r.normal(0, 1, size=skip_shape or x_shape).astype(dtype)
        g = r.uniform(0.5, 1.5, size=h).astype(dtype)
        feeds += [("skip", skip), ("gamma", g)]
        ins += ["skip", "gamma"]
        s64 = x64 + skip.astype(np.float64)
        if not simplified:
            ins.append("beta" if beta else "")
            if beta:
                bt = r.uniform(-0.5, 0.5, size=h).astype(dtype)
                feeds.append(("beta", bt))
        if bias:
            bi = r.uniform(-0.5, 0.5, size=h).astype(dtype)
            feeds.append(("bias", bi))
            ins.append("bias")
            s64 = s64 + bi.astype(np.float64)
        s_rounded = s64.astype(np.float32).astype(dtype).astype(np.float64)
        eps = 1e-12 if epsilon is None else epsilon
        mean = s64.mean(axis=-1, keepdims=True) * (0.0 if simplified else 1.0)  # ORT writes 0 in the RMS form
        cen = s64 if simplified else s64 - mean
        inv = 1.0 / np.sqrt((cen ** 2).mean(axis=-1, keepdims=True) + eps)
        y = cen * inv * g.astype(np.float64) + (bt.astype(np.float64) if beta else 0.0)
        outs = [("output", TP_OF[np.dtype(dtype)], y, dtype), ("mean", TensorProto.FLOAT, mean, np.float32),
                ("inv_std_var", TensorProto.FLOAT, inv, np.float32),
                ("input_skip_bias_sum", TP_OF[np.dtype(dtype)], s_rounded, dtype)]
        names = [o[0] if i in outputs else "" for i, o in enumerate(outs)]
        while names and names[-1] == "":
            names.pop()
        outs = [o for i, o in enumerate(outs) if i in outputs]
        attrs = {"epsilon": epsilon} if epsilon is not None else {}
        node = helper.make_node(op, ins, names, name="norm", domain=MS, **attrs)
    # float16 inputs and sums: the float32 statistics of the two engines differ only by summation order.
    bounds = [float_bound(v, dt) for _, _, v, dt in outs]
    return write_case(root, name, node, feeds, [], [(n, t) for n, t, _, _ in outs], bounds,
                      [np.broadcast_to(v, v.shape) for _, _, v, _ in outs])


@case
def norm_cases(root):
    S, SK, SLN = "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "SkipLayerNormalization"
    return [
        norm_case(root, "sln_f32_last_axis", S, (2, 3, 64)),
        norm_case(root, "sln_f32_axis1_eps", S, (2, 3, 8), axis=1, epsilon=1e-6),
        norm_case(root, "sln_f32_y_only", S, (4, 100), outputs=(0,)),
        norm_case(root, "sln_f16", S, (2, 5, 32), dtype=np.float16),
        norm_case(root, "sln_f16_x_f32_scale", S, (2, 5, 32), dtype=np.float16, scale_dtype=np.float32, outputs=(0,)),
        norm_case(root, "ssln_f32_all_outputs", SK, (2, 4, 64), epsilon=1e-6),
        norm_case(root, "ssln_f32_bias_2d_skip", SK, (2, 4, 64), skip_shape=(4, 64), bias=True),
        norm_case(root, "ssln_f32_1sh_skip", SK, (3, 4, 48), skip_shape=(1, 4, 48), epsilon=1e-5),
        norm_case(root, "ssln_f32_2d_input", SK, (5, 64), bias=True, epsilon=1e-5),
        norm_case(root, "ssln_f32_output_and_sum", SK, (2, 3, 32), outputs=(0, 3), epsilon=1e-5),
        norm_case(root, "ssln_f16_bias", SK, (2, 4, 64), dtype=np.float16, bias=True, epsilon=1e-5),
        norm_case(root, "skln_f32_beta_bias", SLN, (2, 4, 64), beta=True, bias=True, epsilon=1e-5),
        norm_case(root, "skln_f32_default_eps", SLN, (2, 4, 64)),
        norm_case(root, "skln_f32_no_beta_2d_skip", SLN, (2, 4, 32), skip_shape=(4, 32), bias=True, epsilon=1e-5),
        norm_case(root, "skln_f16_beta", SLN, (2, 4, 64), dtype=np.float16, beta=True, epsilon=1e-5),
        norm_case(root, "skln_f32_output_only", SLN, (2, 3, 32), beta=True, outputs=(0,), epsilon=1e-5),
    ]


# --- Gelu, BiasGelu, FastGelu, QuickGelu, FusedMatMul -----------------------------------------

def erf64(x):
    import math
    return np.vectorize(math.erf)(x)


def activation_case(root, name, op, shape, dtype=np.float32, bias=False, alpha=None):
    r = rng_for(name)
    x = r.uniform(-4, 4, size=shape).astype(dtype)
    feeds, ins = [("X", x)], ["X"]
    v = x.astype(np.float64)
    if bias:
        b = r.uniform(-1, 1, size=shape[-1]).astype(dtype)
        feeds.append(("bias", b))
        ins.append("bias")
        v = v + b.astype(np.float64)
    if op in ("Gelu", "BiasGelu"):
        y = 0.5 * v * (1 + erf64(v / np.sqrt(2)))
    elif op == "FastGelu":
        y = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    else:
        a = 1.702 if alpha is None else alpha
        y = v / (1 + np.exp(-a * v))
    attrs = {"alpha": alpha} if alpha is not None else {}
    node = helper.make_node(op, ins, ["Y"], name="act", domain=MS, **attrs)
    # float32: both use float erf / tanh / exp approximations (ONNX Runtime's MLAS ones): 1e-5.
    # float16: ONNX Runtime rounds intermediates to float16 (measured 1.55 units in the last place
    # from the exact value), oneinfer rounds once: 4 units.
    return write_case(root, name, node, feeds, [], [("Y", TP_OF[np.dtype(dtype)])],
                      [float_bound(y, dtype, ulps16=4)], [y])


def fused_matmul_case(root, name, a_shape, b_shape, trans_a=0, trans_b=0, alpha=None):
    r = rng_for(name)
    a = r.uniform(-1, 1, size=a_shape).astype(np.float32)
    b = r.uniform(-1, 1, size=b_shape).astype(np.float32)
    a64 = np.swapaxes(a, -1, -2).astype(np.float64) if trans_a else a.astype(np.float64)
    b64 = np.swapaxes(b, -1, -2).astype(np.float64) if trans_b else b.astype(np.float64)
    y = (1.0 if alpha is None else alpha) * np.matmul(a64, b64)
    mag = np.matmul(np.abs(a64), np.abs(b64)) * abs(1.0 if alpha is None else alpha)
    attrs = {"transA": trans_a, "transB": trans_b}
    if alpha is not None:
        attrs["alpha"] = alpha
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], name="fmm", domain=MS, **attrs)
    return write_case(root, name, node, [("A", a), ("B", b)], [], [("Y", TensorProto.FLOAT)],
                      [1e-5 * mag + 1e-6], [y])


@case
def activation_cases(root):
    return [
        activation_case(root, "gelu_f32", "Gelu", (3, 50)),
        activation_case(root, "gelu_f16", "Gelu", (3, 50), dtype=np.float16),
        activation_case(root, "biasgelu_f32", "BiasGelu", (2, 3, 40), bias=True),
        activation_case(root, "biasgelu_f16", "BiasGelu", (2, 3, 40), dtype=np.float16, bias=True),
        activation_case(root, "fastgelu_f32", "FastGelu", (2, 3, 40)),
        activation_case(root, "fastgelu_f32_bias", "FastGelu", (2, 3, 40), bias=True),
        activation_case(root, "fastgelu_f16_bias", "FastGelu", (2, 3, 40), dtype=np.float16, bias=True),
        activation_case(root, "quickgelu_f32", "QuickGelu", (4, 33)),
        activation_case(root, "quickgelu_f32_alpha", "QuickGelu", (4, 33), alpha=1.3),
        activation_case(root, "quickgelu_f16", "QuickGelu", (4, 33), dtype=np.float16),
        fused_matmul_case(root, "fmm_2d", (5, 7), (7, 3)),
        fused_matmul_case(root, "fmm_transa_alpha", (7, 5), (7, 3), trans_a=1, alpha=0.125),
        fused_matmul_case(root, "fmm_transb_batched", (2, 5, 7), (2, 3, 7), trans_b=1, alpha=2.0),
        fused_matmul_case(root, "fmm_both_broadcast", (2, 3, 7, 5), (3, 4, 7), trans_a=1, trans_b=1),
        fused_matmul_case(root, "fmm_batch_bcast_b2d", (4, 6, 16), (16, 9), alpha=-0.5),
    ]


# --- GroupQueryAttention, RotaryEmbedding -----------------------------------------------------

def ulp16(x):
    return np.spacing(np.abs(np.asarray(x, np.float64)).astype(np.float16)).astype(np.float64)


def rotate64(x, cos, sin, interleaved):
    """x [..., D] rotated on its first 2 * half elements with cos/sin [..., half] (float64)."""
    half = cos.shape[-1]
    y = x.copy()
    if interleaved:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        y[..., 0:2 * half:2] = a * cos - b * sin
        y[..., 1:2 * half:2] = b * cos + a * sin
    else:
        a, b = x[..., :half], x[..., half:2 * half]
        y[..., :half] = a * cos - b * sin
        y[..., half:2 * half] = b * cos + a * sin
    return y


def gqa_case(root, name, B, S, H, KVH, D, P=None, seqlens=None, total=None, packed=False, rotary=None,
             rot_half=None, scale=None, softcap=None, window=None, smooth=None, sink=False, attn_bias=False,
             pos_ids=None, dtype=np.float32, cache_rows=None):
    """P: past length (None: no past inputs); rotary: None, 'half' or 'interleaved'. The bound: every
    output is a convex combination of value rows, so a logit error e moves it by at most 2 e max|v|;
    float32 logits differ by the two engines' dot-product orders (at most 2 * D * 2^-24 of sum |q||k| per logit),
    float16 adds one unit in the last place of each rotated q / k element (both round them to
    float16 from float32 values that may straddle a rounding boundary) and 1.5 units of the result."""
    r = rng_for(name)
    total = total if total is not None else (S if P is None else P + S)
    seqlens = np.array(seqlens if seqlens is not None else [total - 1] * B, np.int32)
    first = S == total
    q = r.normal(0, 1, size=(B, S, H * D)).astype(dtype)
    k = r.normal(0, 1, size=(B, S, KVH * D)).astype(dtype)
    v = r.normal(0, 1, size=(B, S, KVH * D)).astype(dtype)
    feeds, ins = [], []
    if packed:
        qkv = np.concatenate([q, k, v], axis=-1)
        feeds.append(("query", qkv))
        ins += ["query", "", ""]
    else:
        feeds += [("query", q), ("key", k), ("value", v)]
        ins += ["query", "key", "value"]
    if P is not None:
        pk = r.normal(0, 1, size=(B, KVH, P, D)).astype(dtype)
        pv = r.normal(0, 1, size=(B, KVH, P, D)).astype(dtype)
        feeds += [("past_key", pk), ("past_value", pv)]
        ins += ["past_key", "past_value"]
    else:
        ins += ["", ""]
    feeds += [("seqlens_k", seqlens), ("total_sequence_length", np.array(total, np.int32))]
    ins += ["seqlens_k", "total_sequence_length"]
    half = rot_half or D // 2
    if rotary:
        rows = cache_rows or total + 2
        inv = 1.0 / (10000 ** (np.arange(half) / half))
        ang = np.arange(rows)[:, None] * inv[None, :]
        cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        feeds += [("cos_cache", cos), ("sin_cache", sin)]
        ins += ["cos_cache", "sin_cache"]
    pos = None
    if pos_ids is not None:
        pos = np.array(pos_ids, np.int64).reshape(B, S)
        while len(ins) < 9:
            ins.append("")
        feeds.append(("position_ids", pos))
        ins.append("position_ids")
    if attn_bias:
        ab = r.normal(0, 1, size=(1, H, S, total)).astype(dtype)
        while len(ins) < 10:
            ins.append("")
        feeds.append(("attention_bias", ab))
        ins.append("attention_bias")
    if sink:
        hs = r.normal(0, 1, size=(H,)).astype(dtype)
        while len(ins) < 11:
            ins.append("")
        feeds.append(("head_sink", hs))
        ins.append("head_sink")
    attrs = dict(num_heads=H, kv_num_heads=KVH)
    if rotary:
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = int(rotary == "interleaved")
    for key_, val in (("scale", scale), ("softcap", softcap), ("local_window_size", window), ("smooth_softmax", smooth)):
        if val is not None:
            attrs[key_] = val
    node = helper.make_node("GroupQueryAttention", ins, ["output", "present_key", "present_value"], name="gqa",
                            domain=MS, **attrs)

    # float64 reference (ONNX Runtime's rules: see ops/contrib_attention.h).
    f = lambda a: a.astype(np.float64)
    L = max(total, P or 0)
    past_rows = [0 if first else int(seqlens[b]) + 1 - S for b in range(B)]
    def positions(b):
        if first:
            return (int(pos[0, 0]) if pos is not None else 0) + np.arange(S)
        return pos[b] if pos is not None else past_rows[b] + np.arange(S)
    qh = f(q).reshape(B, S, H, D)
    kh = f(k).reshape(B, S, KVH, D)
    if rotary:
        for b in range(B):
            p = positions(b)
            c, sn = f(cos)[p][:, None, :], f(sin)[p][:, None, :]
            qh[b] = rotate64(qh[b], c, sn, rotary == "interleaved")
            kh[b] = rotate64(kh[b], c, sn, rotary == "interleaved")
    pres_k = np.zeros((B, KVH, L, D))
    pres_v = np.zeros((B, KVH, L, D))
    for b in range(B):
        keep = past_rows[b]
        if keep:
            pres_k[b, :, :keep] = f(pk)[b, :, :keep]
            pres_v[b, :, :keep] = f(pv)[b, :, :keep]
        pres_k[b, :, keep:keep + S] = kh[b].transpose(1, 0, 2)
        pres_v[b, :, keep:keep + S] = f(v).reshape(B, S, KVH, D)[b].transpose(1, 0, 2)
    alpha = scale if scale else 1.0 / np.sqrt(D)
    out = np.zeros((B, S, H, D))
    bound = np.zeros((B, S, H, D))
    for b in range(B):
        for h in range(H):
            kk, vv = pres_k[b, h // (H // KVH)], pres_v[b, h // (H // KVH)]
            for s in range(S):
                eff = min(past_rows[b] + s + 1, int(seqlens[b]) + 1)
                start = eff - window if window and window > 0 and eff > window else 0
                qq = qh[b, s, h]
                x = alpha * (kk[start:eff] @ qq)
                if softcap:
                    x = softcap * np.tanh(x / softcap)
                if attn_bias:
                    x = x + f(ab)[0, h, s, start:eff]
                sm = bool(smooth == 1) or sink
                sk = float(hs[h]) if sink else 0.0
                mx = max(x.max(), sk) if sm else x.max()
                e = np.exp(x - mx)
                den = e.sum() + (np.exp(sk - mx) if sm else 0.0)
                out[b, s, h] = (e / den) @ vv[start:eff]
                mag = alpha * (np.abs(kk[start:eff]) @ np.abs(qq))
                logit_err = 2 * D * 2.0 ** -24 * mag.max() + 1e-6 * np.abs(x).max()
                if dtype == np.float16 and rotary:
                    logit_err += alpha * (ulp16(kk[start:eff]) @ np.abs(qq) + np.abs(kk[start:eff]) @ ulp16(qq)).max()
                bound[b, s, h] = 2 * logit_err * np.abs(vv[start:eff]).max() + 1e-6
    out = out.reshape(B, S, H * D)
    bound = bound.reshape(B, S, H * D)
    pk_bound = 1e-6 * np.abs(pres_k) + 1e-7
    if dtype == np.float16:
        bound = bound + 1.5 * ulp16(out) + 1e-7
        pk_bound = pk_bound + (ulp16(pres_k) if rotary else 0.0)
    tp = TP_OF[np.dtype(dtype)]
    return write_case(root, name, node, feeds, [], [("output", tp), ("present_key", tp), ("present_value", tp)],
                      [bound, pk_bound, np.zeros(pres_v.shape) + 1e-9], [out, pres_k, pres_v])


def rope_case(root, name, shape, pos_form="full", interleaved=0, rot_dim=None, num_heads=None, dtype=np.float32,
              rows=16):
    """shape: [B, S, hidden] or [B, N, S, D]. The bound: 1e-6 of |y| (float32 products and one sum),
    float16 1.5 units in the last place (both compute in float32 and round once)."""
    r = rng_for(name)
    x = r.normal(0, 1, size=shape).astype(dtype)
    four = len(shape) == 4
    B, S = shape[0], shape[2] if four else shape[1]
    head = shape[3] if four else (shape[2] // num_heads if num_heads else 2 * (rot_dim or 0))
    if not four and not num_heads:
        head = 2 * ((rot_dim or 32) // 2)
    R = rot_dim or head
    half = R // 2
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(rows)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
    if pos_form == "offset":
        pos = np.array([3], np.int64)
        p = np.broadcast_to(3 + np.arange(S), (B, S))
    else:
        pos = r.integers(0, rows, size=(B, S)).astype(np.int64)
        p = pos
    x64 = x.astype(np.float64)
    xs = x64 if four else x64.reshape(B, S, -1, head).transpose(0, 2, 1, 3)  # B N S D
    c = cos.astype(np.float64)[p][:, None]
    sn = sin.astype(np.float64)[p][:, None]
    y = rotate64(xs, c, sn, interleaved == 1)
    if not four:
        y = y.transpose(0, 2, 1, 3).reshape(shape)
    attrs = {"interleaved": interleaved}
    if rot_dim:
        attrs["rotary_embedding_dim"] = rot_dim
    if num_heads:
        attrs["num_heads"] = num_heads
    node = helper.make_node("RotaryEmbedding", ["input", "position_ids", "cos_cache", "sin_cache"], ["output"],
                            name="rope", domain=MS, **attrs)
    bound = 1e-6 * (np.abs(x64).max() + np.abs(y)) if dtype == np.float32 else 1.5 * ulp16(y) + 1e-7
    return write_case(root, name, node, [("input", x), ("position_ids", pos), ("cos_cache", cos), ("sin_cache", sin)],
                      [], [("output", TP_OF[np.dtype(dtype)])], [bound], [y])


@case
def gqa_cases(root):
    return [
        gqa_case(root, "gqa_prompt_h4kv2_d16", 1, 5, 4, 2, 16),
        gqa_case(root, "gqa_prompt_empty_past_h2kv2_d8", 2, 4, 2, 2, 8, P=0),
        gqa_case(root, "gqa_prompt_packed_rotary_b2_padded", 2, 5, 2, 1, 64, packed=True, rotary="half",
                 seqlens=[4, 2]),
        gqa_case(root, "gqa_decode_d128_rotary_b2_ragged", 2, 1, 4, 1, 128, P=6, seqlens=[6, 3], total=7,
                 rotary="half"),
        gqa_case(root, "gqa_decode_packed_interleaved_d32", 2, 1, 4, 2, 32, P=5, packed=True, rotary="interleaved",
                 seqlens=[5, 2], total=6),
        gqa_case(root, "gqa_decode_partial_rotary_d32", 1, 1, 2, 1, 32, P=4, rotary="half", rot_half=8),
        gqa_case(root, "gqa_share_buffer_decode", 2, 1, 4, 2, 16, P=10, seqlens=[5, 3], total=6, rotary="half"),
        gqa_case(root, "gqa_share_buffer_prompt", 1, 4, 2, 1, 16, P=12, seqlens=[3], total=4),
        gqa_case(root, "gqa_subsequent_prompt", 1, 3, 4, 2, 16, P=4, seqlens=[6], total=7, rotary="half"),
        gqa_case(root, "gqa_window3_prompt", 1, 8, 2, 1, 16, window=3),
        gqa_case(root, "gqa_window4_decode", 2, 1, 2, 2, 16, P=9, seqlens=[9, 5], total=10, window=4),
        gqa_case(root, "gqa_softcap_scale", 1, 6, 4, 4, 16, softcap=1.5, scale=0.6),
        gqa_case(root, "gqa_smooth_softmax_decode", 1, 1, 4, 2, 16, P=5, smooth=1),
        gqa_case(root, "gqa_head_sink_prompt", 1, 5, 4, 2, 16, sink=True),
        gqa_case(root, "gqa_attention_bias_prompt", 2, 4, 4, 2, 16, attn_bias=True),
        gqa_case(root, "gqa_position_ids_decode", 2, 1, 2, 1, 32, P=4, rotary="half", pos_ids=[[7], [2]],
                 seqlens=[4, 4], total=5, cache_rows=12),
        gqa_case(root, "gqa_f16_prompt_rotary", 2, 5, 4, 2, 32, rotary="half", seqlens=[4, 3], dtype=np.float16),
        gqa_case(root, "gqa_f16_decode_packed_interleaved", 2, 1, 4, 2, 64, P=7, packed=True, rotary="interleaved",
                 seqlens=[7, 4], total=8, dtype=np.float16),
        gqa_case(root, "gqa_f16_decode_plain", 1, 1, 2, 2, 16, P=3, dtype=np.float16),
    ]


@case
def rope_cases(root):
    return [
        rope_case(root, "rope_3d_full_pos", (2, 5, 64), num_heads=2),
        rope_case(root, "rope_3d_offset_interleaved", (2, 4, 96), pos_form="offset", interleaved=1, num_heads=3),
        rope_case(root, "rope_4d", (2, 3, 5, 32)),
        rope_case(root, "rope_4d_interleaved_offset", (1, 2, 4, 16), interleaved=1, pos_form="offset"),
        rope_case(root, "rope_3d_partial_dim", (2, 3, 128), rot_dim=32, num_heads=2),
        rope_case(root, "rope_3d_no_attrs", (2, 3, 64), rot_dim=None),
        rope_case(root, "rope_f16_3d", (2, 5, 64), num_heads=4, dtype=np.float16),
        rope_case(root, "rope_f16_4d_interleaved", (2, 2, 3, 32), interleaved=1, dtype=np.float16),
    ]


# --- ai.onnx opset 23: RMSNormalization, RotaryEmbedding, Attention ---------------------------

def onnx_rms_case(root, name, x_shape, scale_shape, axis=-1, dtype=np.float32):
    """RMSNormalization-23, the scale broadcast against X. The bound: float_bound (one float32 sum
    per row, rounded once for float16)."""
    r = rng_for(name)
    x = r.normal(0, 1, size=x_shape).astype(dtype)
    g = r.normal(1, 0.5, size=scale_shape).astype(dtype)
    x64 = x.astype(np.float64)
    axes = tuple(range(axis % len(x_shape), len(x_shape)))
    y = x64 / np.sqrt((x64 ** 2).mean(axis=axes, keepdims=True) + 1e-5) * g.astype(np.float64)
    node = helper.make_node("RMSNormalization", ["X", "scale"], ["Y"], name="rms", axis=axis)
    return write_case(root, name, node, [("X", x), ("scale", g)], [], [("Y", TP_OF[np.dtype(dtype)])],
                      [float_bound(y, dtype)], [y], opset=23)


def onnx_rope_case(root, name, shape, with_pos=True, interleaved=0, rot_dim=None, num_heads=None, dtype=np.float32,
                   rows=16):
    """RotaryEmbedding-23: X [B, N, S, D] or [B, S, hidden]; caches [rows, half] read at position_ids,
    or [B, S, half] without them. The bound: rope_case's."""
    r = rng_for(name)
    x = r.normal(0, 1, size=shape).astype(dtype)
    four = len(shape) == 4
    B, S = shape[0], shape[2] if four else shape[1]
    head = shape[3] if four else shape[2] // num_heads
    half = (rot_dim or head) // 2
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    pos = r.integers(0, rows, size=(B, S)).astype(np.int64)
    ang = (np.arange(rows)[:, None] * inv[None, :]) if with_pos else (pos[..., None] * inv)
    cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
    x64 = x.astype(np.float64)
    xs = x64 if four else x64.reshape(B, S, -1, head).transpose(0, 2, 1, 3)  # B N S D
    c = (cos.astype(np.float64)[pos] if with_pos else cos.astype(np.float64))[:, None]
    sn = (sin.astype(np.float64)[pos] if with_pos else sin.astype(np.float64))[:, None]
    y = rotate64(xs, c, sn, interleaved == 1)
    if not four:
        y = y.transpose(0, 2, 1, 3).reshape(shape)
    attrs = {"interleaved": interleaved}
    if rot_dim:
        attrs["rotary_embedding_dim"] = rot_dim
    if num_heads:
        attrs["num_heads"] = num_heads
    ins = [("X", x), ("cos_cache", cos), ("sin_cache", sin)] + ([("position_ids", pos)] if with_pos else [])
    node = helper.make_node("RotaryEmbedding", [n for n, _ in ins], ["Y"], name="rope23", **attrs)
    bound = 1e-6 * (np.abs(x64).max() + np.abs(y)) if dtype == np.float32 else 1.5 * ulp16(y) + 1e-7
    return write_case(root, name, node, ins, [], [("Y", TP_OF[np.dtype(dtype)])], [bound], [y], opset=23)


def onnx_attn_case(root, name, B, Hq, Hkv, Sq, L, D, Dv=None, P=0, three_d=False, causal=0, scale=None, softcap=None,
                   mask=None, mode=None, dtype=np.float32):
    """Attention-23 with the ONNX errata's semantics (softcap, then the mask, bottom-right causal
    frontier past the cache). mask: None, 'bool' [B, 1, Sq, T] or 'float' [Sq, T]. The bound: as
    gqa_case's, per output row 2 e max|v| with e = 2 D 2^-24 max(|q| |k|) scale + 1e-6 of the largest
    logit (softcap's tanh does not grow an error); the scores (modes 0-2) e, the softmax (mode 3) 2 e;
    present exact; float16 adds 1.5 units in the last place of each output."""
    r = rng_for(name)
    Dv = Dv or D
    T = P + L
    q4 = r.normal(0, 1, size=(B, Hq, Sq, D))
    k4 = r.normal(0, 1, size=(B, Hkv, L, D))
    v4 = r.normal(0, 1, size=(B, Hkv, L, Dv))
    pk = r.normal(0, 1, size=(B, Hkv, P, D)).astype(dtype)
    pv = r.normal(0, 1, size=(B, Hkv, P, Dv)).astype(dtype)
    as3 = lambda t: t.transpose(0, 2, 1, 3).reshape(t.shape[0], t.shape[2], -1)
    q = (as3(q4) if three_d else q4).astype(dtype)
    k = (as3(k4) if three_d else k4).astype(dtype)
    v = (as3(v4) if three_d else v4).astype(dtype)
    Q = q.astype(np.float64).reshape(B, Sq, Hq, D).transpose(0, 2, 1, 3) if three_d else q.astype(np.float64)
    K = k.astype(np.float64).reshape(B, L, Hkv, D).transpose(0, 2, 1, 3) if three_d else k.astype(np.float64)
    V = v.astype(np.float64).reshape(B, L, Hkv, Dv).transpose(0, 2, 1, 3) if three_d else v.astype(np.float64)
    K = np.repeat(np.concatenate([pk.astype(np.float64), K], 2), Hq // Hkv, 1)
    V = np.repeat(np.concatenate([pv.astype(np.float64), V], 2), Hq // Hkv, 1)
    sc = scale if scale is not None else 1 / np.sqrt(D)
    raw = sc * Q @ K.transpose(0, 1, 3, 2)
    cap = softcap * np.tanh(raw / softcap) if softcap else raw
    bias = np.zeros((B, 1, Sq, T))
    m = None
    if mask == "bool":
        m = r.random((B, 1, Sq, T)) < 0.7
        m[..., 0] = True
        bias = np.where(m, 0.0, -np.inf)
    elif mask == "float":
        m = r.uniform(-3, 1, size=(Sq, T)).astype(dtype)
        bias = bias + m.astype(np.float64)
    if causal:
        allowed = np.arange(T)[None, :] <= np.arange(Sq)[:, None] + P
        bias = np.where(allowed, bias, -np.inf)
    x = cap + bias
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y4 = p @ V
    y = y4.transpose(0, 2, 1, 3).reshape(B, Sq, Hq * Dv) if three_d else y4
    mag = (np.abs(Q) @ np.abs(K).transpose(0, 1, 3, 2)).max() * sc
    e = 2 * D * 2.0 ** -24 * mag + 1e-6 * np.abs(raw).max()
    if dtype == np.float16:
        # ONNX Runtime holds the scores and the softmax weights in float16: half a unit of the
        # largest logit each, and half a unit of each weight (below 1: 2^-12) times |v|.
        e += float(ulp16(np.abs(raw).max()))
    ybound = 2 * e * np.abs(V).max() + 1e-6 + np.zeros(y.shape)
    if dtype == np.float16:
        ybound = ybound + T * 2.0 ** -12 * np.abs(V).max()
    attrs = {"is_causal": causal}
    if three_d:
        attrs.update(q_num_heads=Hq, kv_num_heads=Hkv)
    if scale is not None:
        attrs["scale"] = scale
    if softcap:
        attrs["softcap"] = softcap
    ins = [("Q", q), ("K", k), ("V", v)] + ([("attn_mask", m)] if m is not None else [])
    names = ["Q", "K", "V", "attn_mask" if m is not None else ""]
    if P:
        ins += [("past_key", pk), ("past_value", pv)]
        names += ["past_key", "past_value"]
    outs, bounds, refs = [("Y", TP_OF[np.dtype(dtype)])], [ybound], [y]
    pres_k = np.concatenate([pk.astype(np.float64), k.astype(np.float64).reshape(B, L, Hkv, D).transpose(0, 2, 1, 3)
                             if three_d else k.astype(np.float64)], 2)
    pres_v = np.concatenate([pv.astype(np.float64), v.astype(np.float64).reshape(B, L, Hkv, Dv).transpose(0, 2, 1, 3)
                             if three_d else v.astype(np.float64)], 2)
    if P or mode is not None:
        # ONNX Runtime 1.30 refuses a past without present outputs.
        outs += [("present_key", TP_OF[np.dtype(dtype)]), ("present_value", TP_OF[np.dtype(dtype)])]
        bounds += [np.zeros(pres_k.shape) + 1e-9, np.zeros(pres_v.shape) + 1e-9]
        refs += [pres_k, pres_v]
    if mode is not None:
        attrs["qk_matmul_output_mode"] = mode
        qk = [raw, cap, x, p][mode]
        outs.append(("qk_matmul_output", TP_OF[np.dtype(dtype)]))
        bounds.append((2 * e if mode == 3 else e + 1e-6 * np.abs(qk).max()) + np.zeros(qk.shape))
        refs.append(qk)
    if dtype == np.float16:
        bounds = [b + 1.5 * ulp16(v) + 1e-7 if i != 1 and i != 2 else b for i, (b, v) in enumerate(zip(bounds, refs))]
    node = helper.make_node("Attention", names, [n for n, _ in outs], name="attn23", **attrs)
    return write_case(root, name, node, ins, [], outs, bounds, refs, opset=23)


@case
def onnx23_cases(root):
    return [
        onnx_rms_case(root, "rms23_last_axis", (2, 3, 64), (64,)),
        onnx_rms_case(root, "rms23_axis1_broadcast", (2, 3, 16), (16,), axis=1),
        onnx_rms_case(root, "rms23_row_scale", (4, 32), (4, 1)),
        onnx_rms_case(root, "rms23_f16", (3, 64), (64,), dtype=np.float16),
        onnx_rope_case(root, "rope23_4d_pos", (2, 3, 5, 32)),
        onnx_rope_case(root, "rope23_3d_interleaved_partial", (2, 4, 96), interleaved=1, rot_dim=16, num_heads=3),
        onnx_rope_case(root, "rope23_3d_no_pos", (2, 5, 64), with_pos=False, num_heads=2),
        onnx_rope_case(root, "rope23_f16_4d", (1, 2, 3, 32), interleaved=1, dtype=np.float16),
        onnx_attn_case(root, "attn23_4d_mha", 2, 2, 2, 5, 5, 16),
        onnx_attn_case(root, "attn23_3d_gqa_causal", 2, 4, 2, 6, 6, 16, three_d=True, causal=1),
        onnx_attn_case(root, "attn23_mqa_causal_past", 1, 4, 1, 3, 3, 32, P=5, causal=1),
        onnx_attn_case(root, "attn23_3d_decode_past", 2, 6, 2, 1, 1, 16, P=7, three_d=True, causal=1),
        onnx_attn_case(root, "attn23_bool_mask_past", 2, 2, 2, 3, 4, 8, P=2, mask="bool", mode=3),
        onnx_attn_case(root, "attn23_float_mask_softcap_scale", 1, 2, 2, 4, 4, 16, mask="float", softcap=2.0,
                       scale=0.5, mode=2),
        onnx_attn_case(root, "attn23_softcap_mode1", 1, 2, 2, 3, 5, 8, softcap=1.0, mode=1),
        onnx_attn_case(root, "attn23_causal_cross_dv", 1, 2, 1, 3, 5, 16, Dv=8, causal=1, mode=0),
        onnx_attn_case(root, "attn23_causal_float_mask_past", 1, 2, 2, 2, 2, 8, P=3, causal=1, mask="float"),
        onnx_attn_case(root, "attn23_f16_gqa_past", 1, 4, 2, 2, 2, 16, P=3, causal=1, dtype=np.float16),
    ]


# --- driver -----------------------------------------------------------------------------------

def build(root):
    os.makedirs(root, exist_ok=True)
    names = []
    for fn in CASES:
        names += fn(root)
    with open(os.path.join(root, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


def load_ours(d, j):
    with open(os.path.join(d, "ours", f"output_{j}.pb"), "rb") as f:
        t = TensorProto()
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def load_ort(d, j):
    outs = json.load(open(os.path.join(d, "ort", "outputs.json")))
    o = outs[j]
    dt = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32,
          "uint8": np.uint8, "int8": np.int8}[o["type"]]
    return np.fromfile(os.path.join(d, "ort", o["file"]), dtype=dt).reshape(o["dims"])


def compare(root):
    fail = 0
    names = [c for c in open(os.path.join(root, "cases.txt")).read().split() if c]
    for c in names:
        d = os.path.join(root, c)
        if os.path.exists(os.path.join(d, "ort", "error.txt")):
            print(f"{c}: ONNX Runtime refused it: {open(os.path.join(d, 'ort', 'error.txt')).read()[:200]}")
            fail = 1
            continue
        if not os.path.exists(os.path.join(d, "ours", "output_0.pb")):
            print(f"{c}: oneinfer produced no output")
            fail = 1
            continue
        j, parts, ok = 0, [], True
        while os.path.exists(os.path.join(d, f"bound{j}.npy")):
            ours, ort = load_ours(d, j), load_ort(d, j)
            bound = np.load(os.path.join(d, f"bound{j}.npy"))
            if ours.shape != ort.shape or ours.dtype != ort.dtype:
                parts.append(f"out{j} ours {ours.dtype}{list(ours.shape)} vs ORT {ort.dtype}{list(ort.shape)}")
                ok = False
            else:
                diff = np.abs(ours.astype(np.float64) - ort.astype(np.float64))
                bound = np.broadcast_to(bound, diff.shape)
                ratio = float((diff / bound).max()) if diff.size else 0.0
                ok = ok and bool(np.all(diff <= bound))
                part = (f"out{j} {ours.dtype}{list(ours.shape)} max|diff| {diff.max() if diff.size else 0:.3g}"
                        f" = {ratio:.3f} of the bound")
                ref_file = os.path.join(d, f"ref{j}.npy")
                if os.path.exists(ref_file) and diff.size:
                    ref = np.load(ref_file).reshape(ours.shape)
                    part += (f" (vs float64: ours {np.abs(ours - ref).max():.3g}, ORT {np.abs(ort - ref).max():.3g})")
                parts.append(part)
            j += 1
        print(f"{c}: {'ok' if ok else 'FAIL'}: " + "; ".join(parts))
        fail |= not ok
    return fail


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        build(sys.argv[2])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "compare":
        return compare(sys.argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
