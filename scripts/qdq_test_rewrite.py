# Test helper, not a quantizer (`oneinfer quantize` calibrates; this does not): rewrites every
# MatMul with a constant float [K, N] weight (K >= 16) into Quark's QDQ form with FIXED scales,
# to exercise the fusion on a real graph's structure: QuantizeLinear/DequantizeLinear on the
# activation (per-tensor s_x, zp_x from the command line), the weight per column (amax / 127,
# int8, DequantizeLinear axis 1), and QuantizeLinear/DequantizeLinear on the output (s_x, 0).
# The model's accuracy is not the point: the outputs are only compared fused vs per node.
# usage: /usr/bin/python3 scripts/qdq_test_rewrite.py IN.onnx OUT.onnx S_X ZP_X
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
src, dst, sx, zx = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
m = onnx.load(src)
g = m.graph
inits = {t.name: t for t in g.initializer}
nodes = []
count = 0
def const(name, arr):
    g.initializer.append(numpy_helper.from_array(arr, name))
for n in g.node:
    if n.op_type != "MatMul" or n.input[1] not in inits:
        nodes.append(n); continue
    w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
    if w.ndim != 2 or w.shape[0] < 16:
        nodes.append(n); continue
    i = count; count += 1
    amax = np.abs(w).max(axis=0); amax[amax == 0] = 1
    sw = (amax / 127).astype(np.float32)
    wq = np.clip(np.rint(w / sw), -127, 127).astype(np.int8)
    const(f"qdq{i}_wq", wq); const(f"qdq{i}_sw", sw)
    const(f"qdq{i}_sx", np.array(sx, np.float32)); const(f"qdq{i}_zx", np.array(zx, np.int8))
    const(f"qdq{i}_sy", np.array(sx, np.float32)); const(f"qdq{i}_zy", np.array(0, np.int8))
    x, y = n.input[0], n.output[0]
    nodes += [
        helper.make_node("QuantizeLinear", [x, f"qdq{i}_sx", f"qdq{i}_zx"], [f"qdq{i}_xq"]),
        helper.make_node("DequantizeLinear", [f"qdq{i}_xq", f"qdq{i}_sx", f"qdq{i}_zx"], [f"qdq{i}_xdq"]),
        helper.make_node("DequantizeLinear", [f"qdq{i}_wq", f"qdq{i}_sw"], [f"qdq{i}_wdq"], axis=1),
        helper.make_node("MatMul", [f"qdq{i}_xdq", f"qdq{i}_wdq"], [f"qdq{i}_y"], name=n.name),
        helper.make_node("QuantizeLinear", [f"qdq{i}_y", f"qdq{i}_sy", f"qdq{i}_zy"], [f"qdq{i}_yq"]),
        helper.make_node("DequantizeLinear", [f"qdq{i}_yq", f"qdq{i}_sy", f"qdq{i}_zy"], [y]),
    ]
del g.node[:]
g.node.extend(nodes)
used = {i for n in g.node for i in n.input}
keep = [t for t in g.initializer if t.name in used]
del g.initializer[:]
g.initializer.extend(keep)
onnx.save(m, dst, save_as_external_data=True, location="model.onnx.data")
print("groups", count)
