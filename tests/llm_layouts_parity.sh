#!/usr/bin/env bash
# The LLM files people download, against ONNX Runtime 1.30 (issue 12): tests/llm_layouts.py writes
# decoders in the optimum / transformers.js layout (per-layer past_key_values, attention_mask,
# position_ids; eager and sdpa masks; 4-bit MatMulNBits with and without zero points; dynamic int8
# per tensor and per column; float16) and in onnxruntime-genai's (GroupQueryAttention with rotary
# caches, SkipSimplifiedLayerNormalization; float32, 4-bit at accuracy_level 4, float16) with
# random weights, `oneinfer run` and ONNX Runtime
# (tests/oracles/ort_generate.js, driving the same convention) generate greedily from the same
# prompt, and every step's logits must agree within 1e-4 of max|logit| with identical tokens
# (float16: 1e-2, int8 activations: 1e-3, dynamic int8: 5e-2, up to the first step where ONNX Runtime's top two logits are within 1e-3, where
# a rounding may pick either); the same with the prompt fed in chunks of 3 (not for dynamic int8,
# whose per-tensor activation scales depend on how the prompt is split).
# usage: tests/llm_layouts_parity.sh BUILD_DIR [CONFIG...]   (CONFIG: tiny (default), real2)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
shift || true
CONFIGS=${*:-tiny}
ONEINFER="$BUILD/oneinfer"
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PROMPT=9707,11,847,829,374,120,16,323,358,1,64,77
STEPS=24
for cfg in $CONFIGS; do
  for layout in optimum-eager optimum-sdpa optimum-q4 optimum-q4sym optimum-q8 optimum-q8col optimum-fp16 \
                genai genai-q4 genai-fp16; do
    m="$work/$cfg-$layout.onnx"
    vocab=$("$PY" tests/llm_layouts.py "$layout" "$cfg" "$m" --seed 1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["vocab"])')
    prompt=$("$PY" -c "print(','.join(str(int(t) % $vocab) for t in '$PROMPT'.split(',')))")
    node tests/oracles/ort_generate.js "$m" --prompt-ids "$prompt" -n $STEPS --threads 2 --dump-logits "$work/ort.bin" \
      2> /dev/null > /dev/null
    chunks="256 3"
    mode=(--mode ort)
    case $layout in
      # int8 activations: a 1-step change of one quantised activation moves the logits; ONNX
      # Runtime's own optimisation levels differ by 1e-2 of max|logit| at real2, so tokens decide.
      optimum-q8*) chunks=256; mode=(--mode ort-tie --tol 5e-2 --tie 1e-3 --min-steps 8) ;;
      *fp16) mode=(--mode ort-tie --tol 1e-2 --tie 1e-3 --min-steps 8) ;;
      genai-q4) mode=(--mode ort-tie --tol 1e-3 --tie 1e-3 --min-steps 8) ;;  # int8 activations
    esac
    for chunk in $chunks; do
      "$ONEINFER" run "$m" --prompt-ids "$prompt" -n $STEPS --threads 2 --prefill-chunk $chunk --json \
        --dump-logits "$work/ours.bin" > /dev/null
      "$PY" tests/compare_logits.py "$work/ours.bin" "$work/ort.bin" "$vocab" "${mode[@]}" \
        --label "$cfg $layout (prefill chunk $chunk) vs ONNX Runtime"
    done
    rm -f "$m" "$work"/*.bin
  done
done
echo "llm layouts parity: all checks passed"
