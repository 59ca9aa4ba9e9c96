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
# On a CPU without VNNI, ONNX Runtime's u8 x s8 MatMulInteger (MLAS: vpmaddubsw) saturates its
# int16 pair sums: its dynamic-int8 (optimum-q8*) logits are then not an oracle (tests/qdq_ort_parity.sh
# shows the same kernel up to 27 LSB off where ORT_ENABLE_BASIC's dequantised floats agree).
if grep -qw -e avx512_vnni -e avx_vnni /proc/cpuinfo; then vnni=1; else vnni=0; fi
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
      if [ $vnni = 0 ] && [[ $layout == optimum-q8* ]]; then
        echo "$cfg $layout (prefill chunk $chunk): ran; not compared: no VNNI on this CPU, where ONNX Runtime's MatMulInteger saturates"
        continue
      fi
      "$PY" tests/compare_logits.py "$work/ours.bin" "$work/ort.bin" "$vocab" "${mode[@]}" \
        --label "$cfg $layout (prefill chunk $chunk) vs ONNX Runtime"
    done
    rm -f "$m" "$work"/*.bin
  done
done

# A genai file's rotary table (cos_cache: 512 positions) against the context the folder claims
# (genai_config.json's model.context_length): a longer context is refused at load, naming the node
# and its table; a shorter one bounds the prompt; without a config, generation stops at 512.
d="$work/genai-dir"
mkdir -p "$d"
"$PY" tests/llm_layouts.py genai tiny "$d/model.onnx" --seed 1 > /dev/null
echo '{"model": {"context_length": 4096}}' > "$d/genai_config.json"
if out=$("$ONEINFER" run "$d/model.onnx" --prompt-ids 1,2,3 -n 2 2>&1); then
  echo "FAIL: a 4096 context past a 512-position cos_cache was accepted: $out"; exit 1
fi
for want in "GroupQueryAttention" "cos_cache" "512 positions" "context of 4096" "genai_config.json"; do
  case $out in *"$want"*) ;; *) echo "FAIL: the context error does not say '$want': $out"; exit 1 ;; esac
done
echo '{"model": {"context_length": 8}}' > "$d/genai_config.json"
"$ONEINFER" run "$d/model.onnx" --prompt-ids 1,2,3 -n 2 --json > /dev/null
if out=$("$ONEINFER" run "$d/model.onnx" --prompt-ids 1,2,3,4,5,6,7,8,9 -n 2 2>&1); then
  echo "FAIL: a 9-token prompt ran in an 8-position context: $out"; exit 1
fi
case $out in *"context is 8"*) ;; *) echo "FAIL: the prompt error does not name the context: $out"; exit 1 ;; esac
rm "$d/genai_config.json"
long=$("$PY" -c "print(','.join(str(1 + i % 900) for i in range(510)))")
n=$("$ONEINFER" run "$d/model.onnx" --prompt-ids "$long" -n 8 --json | tail -1 |
    "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["generated_ids"]))')
if [ "$n" -lt 1 ] || [ "$n" -ge 8 ]; then echo "FAIL: $n tokens generated past a 512-position cos_cache"; exit 1; fi
echo "genai rotary table against the context: refused at load when shorter, generation stops at its end ($n of 8 tokens)"
echo "llm layouts parity: all checks passed"
