#!/usr/bin/env python3
"""Real convolutional and recurrent models from public npm packages (tests/models/package.json):
the inputs both engines run on, and the comparison of their outputs (issue 15 item 2).

usage: conv_models.py build DIR [CASE...]  writes DIR/<case>/{model.onnx (a link), in/input_<i>.pb,
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
from onnx import TensorProto, numpy_helper

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


def build(root, names):
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
        f.write("\n".join(names) + "\n")


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
            bound = ATOL_OF.get(c, ATOL) + 1e-3 * np.abs(ort.astype(np.float64))
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
