#!/usr/bin/python3
"""Writes a small two-layer MLP classifier (opset 21, weights in external data) and one input.

usage: make_demo_model.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
rng = np.random.default_rng(0)
w1 = rng.standard_normal((64, 256), dtype=np.float32) * 0.1
b1 = rng.standard_normal((256,), dtype=np.float32) * 0.1
w2 = rng.standard_normal((256, 10), dtype=np.float32) * 0.1
nodes = [
    helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
    helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
    helper.make_node("MatMul", ["h2", "w2"], ["logits"], name="fc2"),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "demo_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
    [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="oneinfer-demo")
model.ir_version = 10
onnx.save_model(model, os.path.join(out, "mlp.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="mlp.weights", size_threshold=0)
x = rng.standard_normal((4, 64), dtype=np.float32)
onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(out, "inputs", "input_0.pb"))
# numpy's answer, to check the engine's output against.
h = np.maximum(x @ w1 + b1, 0) @ w2
p = np.exp(h - h.max(-1, keepdims=True))
np.save(os.path.join(out, "expected.npy"), p / p.sum(-1, keepdims=True))
