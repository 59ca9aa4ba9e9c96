#!/usr/bin/env bash
# `oneinfer export-hf` on the decoder families it reads (issue 12 item 6): random checkpoints of
# a Qwen3, a Llama 3 (untied head, llama3 rope scaling) and a Qwen2 (q/k/v biases), exported with
# the cached layout, generate greedily with `oneinfer run`; tests/hf_reference.py computes the
# same checkpoints in numpy float64 straight from the safetensors (transformers' formulas, not our
# graph), and ONNX Runtime 1.30 runs the exported file: per-step logits within 1e-4 of max|logit|
# and identical tokens against both.
# usage: tests/hf_export_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ONEINFER="$BUILD/oneinfer"
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PROMPT=1,5,9,200,33,47,2,8,3000,17,4,90
STEPS=12
for arch in tiny llama-tiny qwen2-tiny; do
  d="$work/$arch"
  "$ONEINFER" export-hf --random "$arch" --seed 3 -o "$d/ckpt" > /dev/null
  "$ONEINFER" export-hf "$d/ckpt" -o "$d/m/model.onnx" --cached > /dev/null
  vocab=$("$PY" -c "import json; print(json.load(open('$d/ckpt/config.json'))['vocab_size'])")
  "$ONEINFER" run "$d/m/model.onnx" --prompt-ids $PROMPT -n $STEPS --threads 2 --json --dump-logits "$d/ours.bin" > /dev/null
  "$PY" tests/hf_reference.py "$d/ckpt" --prompt-ids $PROMPT -n $STEPS --dump-logits "$d/ref.bin" > /dev/null
  node tests/oracles/ort_generate.js "$d/m/model.onnx" --prompt-ids $PROMPT -n $STEPS --threads 2 --dump-logits "$d/ort.bin" \
    2> /dev/null > /dev/null
  "$PY" tests/compare_logits.py "$d/ours.bin" "$d/ref.bin" "$vocab" --mode ort --label "$arch export vs numpy float64"
  "$PY" tests/compare_logits.py "$d/ours.bin" "$d/ort.bin" "$vocab" --mode ort --label "$arch export vs ONNX Runtime"
  rm -rf "$d"
done
echo "hf export parity: all checks passed"
