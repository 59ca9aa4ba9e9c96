#!/usr/bin/env bash
# The acceptance QDQ graphs of issue 6 (DequantizeLinear -> MatMul [-> QuantizeLinear]: 8x16x6
# and 256x1024x1024 per-tensor, per-axis 8 row / 6 column scales, zp_x=-40 zp_w=-25 zp_y=-7,
# fully per-axis with zero points plus zp_y; int8 and uint8 activations; with and without the
# output QuantizeLinear), each run by oneinfer with QDQ fusion on, by oneinfer with
# ONEINFER_QDQ=0 (the per-node control) and by ONNX Runtime 1.30; every pair must agree within
# 1 LSB (quantised outputs; the count of 1-LSB differences is printed) or one accumulator
# quantum s_x*s_w (float outputs).
#
# ONNX Runtime is run at its default optimisation level (ORT_ENABLE_ALL) first. Where it
# refuses a graph there (1.30 fuses per-axis uint8 activations into QLinearMatMul /
# MatMulIntegerToFloat, whose kernels then reject a per-row zero point at run time), the
# refusal is printed and the graph is rerun at ORT_ENABLE_BASIC, which keeps the Q/DQ nodes.
# usage: tests/qdq_ort_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ONEINFER="$BUILD/oneinfer"
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" tests/qdq_graphs.py build "$work"
fail=0 refused=0 n=0
for c in $(cat "$work/cases.txt"); do
  d="$work/$c"
  "$ONEINFER" exec "$d/model.onnx" --input-dir "$d/in" --output-dir "$d/fused" --threads 2 > /dev/null
  ONEINFER_QDQ=0 "$ONEINFER" exec "$d/model.onnx" --input-dir "$d/in" --output-dir "$d/pernode" --threads 2 > /dev/null
  level=all
  if ! msg=$(node tests/oracles/ort_run.js "$d/model.onnx" "$d/in.json" "$d/ort" --opt-level all 2> /dev/null); then
    echo "$c: ONNX Runtime 1.30 refused it at the default level: $(echo "$msg" | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["error"][:200])')"
    echo "$c: rerun in ONNX Runtime at ORT_ENABLE_BASIC"
    level=basic refused=$((refused + 1))
    node tests/oracles/ort_run.js "$d/model.onnx" "$d/in.json" "$d/ort" --opt-level basic > /dev/null 2>&1
  fi
  "$PY" tests/qdq_graphs.py compare "$work" "$c" "$d/fused" "$d/pernode" fused per-node || fail=1
  "$PY" tests/qdq_graphs.py compare "$work" "$c" "$d/fused" "$d/ort" fused "ORT($level)" || fail=1
  "$PY" tests/qdq_graphs.py compare "$work" "$c" "$d/pernode" "$d/ort" per-node "ORT($level)" || fail=1
  n=$((n + 1))
done
echo "qdq_ort_parity: $n graphs, $refused run in ONNX Runtime at ORT_ENABLE_BASIC after a refusal at the default level"
if [ $fail -ne 0 ]; then echo "qdq_ort_parity: FAILED"; exit 1; fi
echo "qdq_ort_parity: all within 1 LSB"
