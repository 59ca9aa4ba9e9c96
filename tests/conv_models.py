#!/usr/bin/env python3
"""Real convolutional and recurrent models from public npm packages (tests/models/package.json):
the inputs both engines run on, and the comparison of their outputs (issue 15 item 2).

usage: conv_models.py build DIR [CASE...]  writes the real models' cases and, with no CASE named,
                                          the graphs synthetic_cases() builds (Conv shapes x the
                                          chains conv_fusion folds); each case DIR/<case>/{model.onnx (a link), in/input_<i>.pb,
                                          in.json, x<i>.bin} and DIR/cases.txt
       conv_models.py compare DIR         compares DIR/<case>/ours/output_<j>.pb (oneinfer exec) with
                                          DIR/<case>/ort/output_<j>.bin (tests/oracles/ort_run_cases.js)
                                          as the conformance runner does: |ours - ort| <= 1e-7 + 1e-3 |ort|
                                          (ATOL_OF: the one case with a stated wider floor)
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models", "node_modules")
OCR = os.path.join(MODELS, "@gutenye", "ocr-models", "assets")
VAD = os.path.join(MODELS, "@ricky0123", "vad-web", "dist")


def image(shape, seed):
    # A normalised image's range (PaddleOCR feeds (pixel / 255 - 0.5) / 0.5).
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def audio(n, seed):
    return (0.1 * np.random.default_rng(seed).standard_normal((1, n))).astype(np.float32)


# The conformance runner's bound, |ours - ort| <= ATOL + 1e-3 |ort|, except where a case says why not.
ATOL = 1e-7
# PP-OCRv4 det ends in a Sigmoid whose outputs on a random image are mostly ~1e-8: ONNX Runtime's
# logistic approximation is off by ~1.2e-7 absolute there (1.49e-7 where float32 gives 2.5e-8),
# so its outputs are compared with an absolute floor of 5e-7 (relative 1e-3 above it).
ATOL_OF = {"ppocr_v4_det": 5e-7}

# case -> (model file, [(input name, array)])
CASES = {
    "ppocr_v4_det": (os.path.join(OCR, "ch_PP-OCRv4_det_infer.onnx"), [("x", image((1, 3, 320, 320), 1))]),
    "ppocr_v4_rec": (os.path.join(OCR, "ch_PP-OCRv4_rec_infer.onnx"), [("x", image((1, 3, 48, 320), 2))]),
    "ppocr_mobile_v2_cls": (os.path.join(OCR, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
                            [("x", image((1, 3, 320, 320), 3))]),
    "silero_vad_v5": (os.path.join(VAD, "silero_vad_v5.onnx"),
                      [("input", audio(512, 4)), ("state", np.zeros((2, 1, 128), np.float32)),
                       ("sr", np.array(16000, np.int64))]),
    "silero_vad_v6": (os.path.join(VAD, "silero_vad_v6.onnx"),
                      [("input", audio(512, 5)), ("state", np.zeros((2, 1, 128), np.float32)),
                       ("sr", np.array(16000, np.int64))]),
    "silero_vad_legacy": (os.path.join(VAD, "silero_vad_legacy.onnx"),
                          [("input", audio(512, 6)), ("sr", np.array(16000, np.int64)),
                           ("h", np.zeros((2, 1, 64), np.float32)), ("c", np.zeros((2, 1, 64), np.float32))]),
}

JS_OF = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64"}

# ---------------------------------------------------------------- graphs built here

# (name, x shape, W shape, Conv attributes): groups, dilations, strides, pads, auto_pad, 1x1,
# depthwise, 1-D, odd sizes and output counts that leave partial tiles and vector tails.
CONV_SHAPES = [
    ("3x3_pad1", (1, 5, 11, 13), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("3x3_stride2_asym_pads", (2, 4, 17, 9), (6, 4, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ("5x3_dilated", (1, 3, 19, 23), (4, 3, 5, 3), {"dilations": [2, 3], "pads": [2, 1, 2, 1]}),
    ("groups3", (1, 6, 10, 10), (9, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ("pointwise", (1, 24, 15, 21), (40, 24, 1, 1), {}),
    ("pointwise_stride2", (1, 8, 15, 15), (16, 8, 1, 1), {"strides": [2, 2]}),
    ("depthwise3x3", (1, 16, 23, 37), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}),
    ("depthwise3x3_stride2", (2, 12, 40, 41), (12, 1, 3, 3), {"group": 12, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("depthwise5x5", (1, 8, 20, 20), (8, 1, 5, 5), {"group": 8, "pads": [2, 2, 2, 2]}),
    ("depthwise_stride3_dilated", (1, 4, 25, 26), (4, 1, 3, 3), {"group": 4, "strides": [3, 3], "dilations": [2, 2]}),
    ("same_upper", (1, 3, 14, 9), (5, 3, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}),
    ("same_lower", (1, 3, 14, 9), (5, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [1, 2]}),
    ("valid", (1, 3, 14, 9), (5, 3, 3, 2), {"auto_pad": "VALID"}),
    ("conv1d_stft_like", (1, 1, 640), (18, 1, 64), {"strides": [32]}),
    ("conv1d_pad", (2, 6, 33), (5, 6, 3), {"pads": [1, 1]}),
    ("wide_tiles", (1, 32, 40, 45), (24, 32, 3, 3), {"pads": [1, 1, 1, 1]}),
]

# What follows the Conv (conv_fusion's chains; "plain" is Conv alone, with its bias).
CHAINS = ["plain", "bn_relu", "affine_clip6", "leaky", "hardsigmoid", "sigmoid", "hardswish",
          "hardswish_spelled", "bn_hardswish_spelled_affine", "output_read_twice"]


def synthetic_case(root, name, xs, ws, attrs, chain, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = (rng.uniform(-1, 1, ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    M = ws[0]
    b = rng.uniform(-0.5, 0.5, (M,)).astype(np.float32)
    rank = len(xs)
    chan = (M,) + (1,) * (rank - 2)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], **attrs)]
    outs = []

    def const(n, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), n))
        return n

    def add(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    cur = "c"
    if chain.startswith("bn"):
        cur = add("BatchNormalization", [cur, const("s", rng.uniform(0.5, 1.5, M)), const("t", rng.uniform(-1, 1, M)),
                                         const("mu", rng.uniform(-0.3, 0.3, M)), const("var", rng.uniform(0.2, 2, M))],
                  "bn", epsilon=1e-3)
    if chain == "bn_relu":
        cur = add("Relu", [cur], "r")
    elif chain == "affine_clip6":
        cur = add("Mul", [const("m1", rng.uniform(0.5, 2, chan)), cur], "m")
        cur = add("Add", [cur, const("a1", [0.25])], "a")
        cur = add("Clip", [cur, const("lo", 0.0), const("hi", 6.0)], "clip")
    elif chain == "leaky":
        cur = add("LeakyRelu", [cur], "l", alpha=0.1)
    elif chain == "hardsigmoid":
        cur = add("HardSigmoid", [cur], "h", alpha=0.3, beta=0.4)
    elif chain == "sigmoid":
        cur = add("Sigmoid", [cur], "sg")
    elif chain == "hardswish":
        cur = add("HardSwish", [cur], "hs")
    elif chain in ("hardswish_spelled", "bn_hardswish_spelled_affine"):
        a3 = add("Add", [cur, const("three", 3.0)], "p3")
        cl = add("Clip", [a3, const("z", 0.0), const("six", 6.0)], "cl")
        mu = add("Mul", [cur, cl], "mu6")
        cur = add("Div", [mu, const("six2", 6.0)], "hs")
        if chain.endswith("affine"):
            cur = add("Mul", [const("ps", [0.75]), cur], "post_m")
            cur = add("Add", [cur, const("pt", [-0.125])], "post_a")
    elif chain == "output_read_twice":
        # The Conv's output is a graph output too: it must stay, the Relu beside it.
        cur = add("Relu", [cur], "r")
        outs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    outs.insert(0, helper.make_tensor_value_info(cur, TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="conv_models.py")
    m.ir_version = 8
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    with open(os.path.join(d, "in", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    x.tofile(os.path.join(d, "x0.bin"))
    with open(os.path.join(d, "in.json"), "w") as f:
        json.dump([{"name": "x", "type": "float32", "dims": list(xs), "file": "x0.bin"}], f)
    # Each output sums K products in another order than ONNX Runtime does; with x in [-1, 1) and
    # |w| <= 1/sqrt(K) the partial sums stay near 1, so the reorderings differ by ~sqrt(K) float32
    # roundings: the absolute floor is 2^-23 sqrt(K) (0.7e-7 for K = 1 ... 2e-6 for K = 288).
    K = int(np.prod(ws[1:]))
    with open(os.path.join(d, "atol.txt"), "w") as f:
        f.write(repr(max(ATOL, 2.0 ** -23 * np.sqrt(K))))
    return name


def synthetic_cases(root):
    names = []
    for i, (shape_name, xs, ws, attrs) in enumerate(CONV_SHAPES):
        # Every shape plain; the chains over a rotating subset of shapes (CI time).
        chains = ["plain"] + [c for j, c in enumerate(CHAINS[1:]) if (i + j) % 4 == 0 or len(xs) == 4 and i < 2]
        for chain in chains:
            names.append(synthetic_case(root, f"syn_{shape_name}_{chain}", xs, ws, attrs, chain, 100 + i))
    return names


def build(root, names):
    synthetic = [] if names else synthetic_cases(root)
    names = names or list(CASES)
    for name in names:
        model, inputs = CASES[name]
        if not os.path.exists(model):
            sys.exit(f"{model} is missing: run `npm ci --ignore-scripts` in tests/models (setup.sh does)")
        d = os.path.join(root, name)
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        link = os.path.join(d, "model.onnx")
        if not os.path.lexists(link):
            os.symlink(model, link)
        spec = []
        for i, (n, a) in enumerate(inputs):
            with open(os.path.join(d, "in", f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
            a.tofile(os.path.join(d, f"x{i}.bin"))
            spec.append({"name": n, "type": JS_OF[a.dtype], "dims": list(a.shape), "file": f"x{i}.bin"})
        with open(os.path.join(d, "in.json"), "w") as f:
            json.dump(spec, f)
    with open(os.path.join(root, "cases.txt"), "w") as f:
        f.write("\n".join(names + synthetic) + "\n")


def load_ours(d, j):
    with open(os.path.join(d, "ours", f"output_{j}.pb"), "rb") as f:
        t = TensorProto()
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def compare(root):
    fail = 0
    for c in [c for c in open(os.path.join(root, "cases.txt")).read().split() if c]:
        d = os.path.join(root, c)
        if os.path.exists(os.path.join(d, "ort", "error.txt")):
            print(f"{c}: ONNX Runtime refused it: {open(os.path.join(d, 'ort', 'error.txt')).read()[:200]}")
            fail = 1
            continue
        outs = json.load(open(os.path.join(d, "ort", "outputs.json")))
        parts, ok = [], True
        for j, o in enumerate(outs):
            if not os.path.exists(os.path.join(d, "ours", f"output_{j}.pb")):
                parts.append(f"{o['name']}: oneinfer wrote no output_{j}.pb")
                ok = False
                continue
            ours = load_ours(d, j)
            ort = np.fromfile(os.path.join(d, "ort", o["file"]), dtype=np.float32).reshape(o["dims"])
            if ours.shape != ort.shape or ours.dtype != ort.dtype:
                parts.append(f"{o['name']}: ours {ours.dtype}{list(ours.shape)} vs ORT {ort.dtype}{list(ort.shape)}")
                ok = False
                continue
            diff = np.abs(ours.astype(np.float64) - ort.astype(np.float64))
            atol_file = os.path.join(d, "atol.txt")
            atol = float(open(atol_file).read()) if os.path.exists(atol_file) else ATOL_OF.get(c, ATOL)
            bound = atol + 1e-3 * np.abs(ort.astype(np.float64))
            ratio = float((diff / bound).max()) if diff.size else 0.0
            ok = ok and bool(np.all(diff <= bound))
            parts.append(f"{o['name']} {list(ours.shape)} max|diff| {diff.max() if diff.size else 0:.3g}"
                         f" = {ratio:.3f} of the bound")
        print(f"{c}: {'ok' if ok else 'FAIL'}: " + "; ".join(parts))
        fail |= not ok
    return fail


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "compare":
        return compare(sys.argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
