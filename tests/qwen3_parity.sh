#!/usr/bin/env bash
# Qwen3 end to end against ONNX Runtime 1.30 (the oracle), on random checkpoints of the real
# architecture: per-step logits within 1e-4 of max|logit|, greedy tokens identical for 32
# steps, and the cached graph agreeing with the default one (mean KL <= 1e-6).
# usage: tests/qwen3_parity.sh BUILD_DIR [tiny|real2]...
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
shift || true
CONFIGS=${*:-tiny real2}
ONEINFER="$BUILD/oneinfer"
ORT=tests/oracles/ort_generate.js
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PROMPT=9707,11,847,829,374,1207,16948,323,358,1079,264,2797,1614,13,576,3974
STEPS=32
for cfg in $CONFIGS; do
  case $cfg in
    tiny) args=(--random tiny); vocab=151936; past=4,2,16 ;;
    real2) args=(--random qwen3-0.6b --layers 2); vocab=151936; past=4,8,128 ;;
    *) echo "unknown config $cfg"; exit 2 ;;
  esac
  "$ONEINFER" export-qwen3 "${args[@]}" --seed 7 -o "$work/$cfg/ckpt" > /dev/null
  "$ONEINFER" export-qwen3 "$work/$cfg/ckpt" -o "$work/$cfg/default/model.onnx" > /dev/null
  "$ONEINFER" export-qwen3 "$work/$cfg/ckpt" -o "$work/$cfg/cached/model.onnx" --cached > /dev/null
  for g in default cached; do
    m="$work/$cfg/$g/model.onnx"
    "$ONEINFER" run "$m" --prompt-ids $PROMPT -n $STEPS --threads 2 --json --dump-logits "$work/$cfg/$g.ours.bin" > "$work/$cfg/$g.ours.json"
    node "$ORT" "$m" --prompt-ids $PROMPT -n $STEPS --threads 2 --past-dims $past --dump-logits "$work/$cfg/$g.ort.bin" \
      2> /dev/null > "$work/$cfg/$g.ort.json"
    /usr/bin/python3 tests/compare_logits.py "$work/$cfg/$g.ours.bin" "$work/$cfg/$g.ort.bin" $vocab --mode ort --label "$cfg $g vs ONNX Runtime"
  done
  /usr/bin/python3 tests/compare_logits.py "$work/$cfg/cached.ours.bin" "$work/$cfg/default.ours.bin" $vocab --mode kl --label "$cfg cached vs default"
  rm -rf "$work/$cfg"
done
echo "qwen3 parity: all checks passed"
