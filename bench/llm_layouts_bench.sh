#!/usr/bin/env bash
# Decode of the LLM files people download (issue 12), side by side in one run: tests/llm_layouts.py
# writes a random real-size Qwen3-0.6B (28 layers) in the optimum float32 and float16 layouts and
# onnxruntime-genai's 4-bit (accuracy_level 4) layout; oneinfer (`oneinfer run`) and ONNX Runtime
# 1.30 (tests/oracles/ort_generate.js, driving the same convention) generate from the same
# 32-token prompt with 2 threads. Prints a markdown table: decode ms/token (median over REPS
# runs, each the median or mean of its steps), the ratio, and the weight-streaming bound
# (bytes read per token / bench_membw's bandwidth).
#   bench/llm_layouts_bench.sh [BUILD_DIR] [WORK_DIR]      (LAYOUTS, THREADS, NEW, REPS: env)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_layouts_bench}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-2}
LAYOUTS=${LAYOUTS:-optimum-eager optimum-fp16 genai-q4}
mkdir -p "$WORK"
PROMPT=$(seq -s, 1000 1031)
for layout in $LAYOUTS; do
  [ -f "$WORK/$layout.onnx" ] || /usr/bin/python3 tests/llm_layouts.py "$layout" qwen3-0.6b "$WORK/$layout.onnx" --seed 1 > /dev/null
done
for rep in $(seq 1 "$REPS"); do
  for layout in $LAYOUTS; do
    "$BUILD/oneinfer" run "$WORK/$layout.onnx" --prompt-ids "$PROMPT" -n "$NEW" --threads "$THREADS" --json \
      > "$WORK/$layout.ours.$rep.json"
    node tests/oracles/ort_generate.js "$WORK/$layout.onnx" --prompt-ids "$PROMPT" -n "$NEW" --threads "$THREADS" \
      2> /dev/null > "$WORK/$layout.ort.$rep.json"
  done
done
BW=$("$BUILD/bench_membw" --benchmark_filter="threads:$THREADS" --benchmark_format=json 2>/dev/null |
     /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['benchmarks'][0]['GB/s'])")
/usr/bin/python3 - "$WORK" "$REPS" "$BW" $LAYOUTS <<'PY'
import json, statistics, sys
work, reps, bw, layouts = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
# Weights read per decoded token: 28 layers x 15.73 M + lm_head 155.6 M = 596 M weights (the
# embedding table is gathered one row at a time); 4-bit: codes plus one float32 scale per 32.
weights = 28 * (1024 * 4096 + 2048 * 1024 + 3 * 1024 * 3072) + 1024 * 151936
bytes_per = {"optimum-eager": 4, "optimum-sdpa": 4, "genai": 4, "optimum-fp16": 2, "genai-fp16": 2,
             "genai-q4": 0.5 + 4 / 32, "optimum-q4": 0.5 + 5 / 32, "optimum-q4sym": 0.5 + 4 / 128}
def last(path):
    return json.loads(open(path).read().strip().splitlines()[-1])
print(f"bandwidth (bench_membw, {sys.argv[3][:5]} GB/s)")
print("| file | oneinfer decode ms/token | ONNX Runtime 1.30 | oneinfer / ORT | bound (weights / bandwidth) | oneinfer / bound | tokens equal |")
print("|---|---|---|---|---|---|---|")
for l in layouts:
    ours = [last(f"{work}/{l}.ours.{r}.json") for r in range(1, reps + 1)]
    ort = [last(f"{work}/{l}.ort.{r}.json") for r in range(1, reps + 1)]
    o = statistics.median(j["decode_ms_median"] for j in ours)  # median steps on both sides
    t = statistics.median(j["decode_ms_median"] for j in ort)
    bound = weights * bytes_per.get(l, 4) / (bw * 1e9) * 1e3
    same = all(j["generated_ids"] == ort[0]["generated_ids"] for j in ours)
    print(f"| {l} | {o:.1f} | {t:.1f} | {o / t:.2f}x | {bound:.1f} | {o / bound:.2f}x | {'yes' if same else 'no'} |")
PY
