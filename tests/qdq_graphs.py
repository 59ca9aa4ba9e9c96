#!/usr/bin/python3
"""The acceptance QDQ graphs of issue 6 (DequantizeLinear x, DequantizeLinear w -> MatMul
[-> QuantizeLinear]), their inputs, and the comparison of outputs from several runners.

usage: qdq_graphs.py build DIR           writes DIR/<case>/{model.onnx, in/input_0.pb, in.json, x.bin}
                                        and DIR/cases.txt (one case name per line)
       qdq_graphs.py compare DIR CASE A B [A_LABEL B_LABEL]
                                        compares output 0 of two runs of CASE (each a folder with
                                        output_0.pb from `oneinfer exec` or outputs.json + .bin from
                                        tests/oracles/ort_run.js); prints one line, exits 1 when
                                        they differ by more than 1 LSB (quantised outputs) or by
                                        more than one accumulator quantum s_x*s_w (float outputs)
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def case_list():
    """(name, M, K, N, form) for the five shapes/forms of the acceptance list."""
    return [
        ("pt_8x16x6", 8, 16, 6, "per_tensor"),
        ("pt_256x1024x1024", 256, 1024, 1024, "per_tensor"),
        ("pa_8x16x6", 8, 16, 6, "per_axis"),          # 8 row scales, 6 column scales
        ("asym_8x16x6", 8, 16, 6, "asym"),             # zp_x=-40, zp_w=-25, zp_y=-7
        ("full_pa_8x16x6", 8, 16, 6, "full_per_axis"),  # row and column zero points, plus zp_y
    ]


def build_case(root, base, M, K, N, form, act, outq):
    name = f"{base}_{act}_{'q' if outq else 'f'}"
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    r = np.random.default_rng(sum(map(ord, name)) * 7919)
    a_np = np.int8 if act == "int8" else np.uint8
    a_tp = TensorProto.INT8 if act == "int8" else TensorProto.UINT8
    shift = 0 if act == "int8" else 128  # uint8 values and zero points are the int8 ones + 128
    lo, hi = (-128, 127) if act == "int8" else (0, 255)
    xq = r.integers(lo, hi + 1, size=(M, K)).astype(a_np)
    wq = r.integers(-127, 128, size=(K, N)).astype(np.int8)
    per_axis = form in ("per_axis", "full_per_axis")
    sx = (r.uniform(0.005, 0.02, size=M) if per_axis else np.array(0.0125)).astype(np.float32)
    sw = (r.uniform(0.002, 0.01, size=N) if per_axis else np.array(0.004)).astype(np.float32)
    if form == "asym":
        zx, zw, zy = np.array(-40 + shift), np.array(-25, dtype=np.int64), -7 + shift
    elif form == "full_per_axis":
        zx = r.integers(-60, 61, size=M) + shift
        zw = r.integers(-30, 31, size=N)
        zy = -7 + shift
    else:
        zx = np.zeros(M, np.int64) + shift if per_axis else np.array(shift)
        zw = np.zeros(N, np.int64) if per_axis else np.array(0)
        zy = shift
    zx = np.asarray(zx).astype(a_np)
    zw = np.asarray(zw).astype(np.int8)
    # Exact product in int64, then an output scale that spreads it over about +-100 levels.
    zx64 = zx.astype(np.int64).reshape(-1, 1) if zx.ndim else int(zx)
    zw64 = zw.astype(np.int64).reshape(1, -1) if zw.ndim else int(zw)
    acc = (xq.astype(np.int64) - zx64) @ (wq.astype(np.int64) - zw64)
    real = acc.astype(np.float64) * (sx.reshape(-1, 1) if sx.ndim else float(sx)) * (sw.reshape(1, -1) if sw.ndim else float(sw))
    sy = np.float32(np.abs(real).max() / 100.0)

    inits = [
        numpy_helper.from_array(wq, "w_q"),
        numpy_helper.from_array(sx, "x_scale"),
        numpy_helper.from_array(zx, "x_zero_point"),
        numpy_helper.from_array(sw, "w_scale"),
        numpy_helper.from_array(zw, "w_zero_point"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero_point"], ["x"], name="dq_x",
                         **({"axis": 0} if per_axis else {})),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero_point"], ["w"], name="dq_w",
                         **({"axis": 1} if per_axis else {})),
    ]
    if outq:
        inits += [numpy_helper.from_array(np.array(sy, np.float32), "y_scale"),
                  numpy_helper.from_array(np.array(zy).astype(a_np), "y_zero_point")]
        nodes += [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul"),
                  helper.make_node("QuantizeLinear", ["y", "y_scale", "y_zero_point"], ["y_q"], name="q_y")]
        out = helper.make_tensor_value_info("y_q", a_tp, [M, N])
    else:
        nodes += [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x_q", a_tp, [M, K])], [out], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="qdq_graphs.py")
    m.ir_version = 10
    if onnx.IR_VERSION >= 10:  # Debian 12's onnx 1.13 checker knows IR 8 only
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "in", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(xq, "x_q").SerializeToString())
    xq.tofile(os.path.join(d, "x.bin"))
    with open(os.path.join(d, "in.json"), "w") as f:
        json.dump([{"name": "x_q", "type": act, "dims": [M, K], "file": "x.bin"}], f)
    # The accumulator quantum of each output element, for comparing float outputs.
    quantum = (sx.reshape(-1, 1) if sx.ndim else np.full((M, 1), sx)) * (sw.reshape(1, -1) if sw.ndim else np.full((1, N), sw))
    np.save(os.path.join(d, "quantum.npy"), quantum.astype(np.float64))
    return name


def load_output(folder):
    pb = os.path.join(folder, "output_0.pb")
    if os.path.exists(pb):
        t = TensorProto()
        with open(pb, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)
    with open(os.path.join(folder, "outputs.json")) as f:
        o = json.load(f)[0]
    dt = {"int8": np.int8, "uint8": np.uint8, "float32": np.float32}[o["type"]]
    return np.fromfile(os.path.join(folder, o["file"]), dtype=dt).reshape(o["dims"])


def compare(root, case, a_dir, b_dir, a_label="A", b_label="B"):
    a, b = load_output(a_dir), load_output(b_dir)
    if a.shape != b.shape or a.dtype != b.dtype:
        print(f"{case}: {a_label} {a.dtype}{list(a.shape)} vs {b_label} {b.dtype}{list(b.shape)}: shapes or types differ")
        return 1
    if a.dtype == np.float32:
        q = np.load(os.path.join(root, case, "quantum.npy"))
        d = np.abs(a.astype(np.float64) - b.astype(np.float64)) / q
        worst = d.max()
        ok = worst <= 1.0
        print(f"{case}: {a_label} vs {b_label}: float output, worst |diff| = {worst:.4f} accumulator quanta "
              f"(s_x*s_w; limit 1), {int((d > 0).sum())} of {d.size} values differ at all"
              f"{'' if ok else '  FAIL'}")
        return 0 if ok else 1
    d = np.abs(a.astype(np.int64) - b.astype(np.int64))
    worst = int(d.max())
    ones = int((d == 1).sum())
    ok = worst <= 1
    print(f"{case}: {a_label} vs {b_label}: worst |diff| = {worst} LSB, {ones} of {d.size} values differ by 1 LSB"
          f"{'' if ok else '  FAIL'}")
    return 0 if ok else 1


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        root = sys.argv[2]
        os.makedirs(root, exist_ok=True)
        names = []
        for base, M, K, N, form in case_list():
            for act in ("int8", "uint8"):
                for outq in (True, False):
                    names.append(build_case(root, base, M, K, N, form, act, outq))
        with open(os.path.join(root, "cases.txt"), "w") as f:
            f.write("\n".join(names) + "\n")
        return 0
    if len(sys.argv) >= 6 and sys.argv[1] == "compare":
        labels = sys.argv[6:8] if len(sys.argv) >= 8 else ["A", "B"]
        return compare(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], *labels)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
