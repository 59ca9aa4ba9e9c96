#!/usr/bin/env bash
# Two builds of oneinfer side by side on the same files, alternating runs: the check that a
# change (a refactor, a new pass) did not slow decoding or prefill down. The random real-size
# Qwen3-0.6B, --cached graph, a 32-token prompt, 2 threads: float32, dynamic int8
# (--matmul int8), the int4 weight-only export, and an A8W8 QDQ graph from `oneinfer quantize`
# (per-channel weights, uint8 activations; run fused). Prints medians and new/old ratios.
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(cd "$1" && pwd)
NEW_BUILD=$(cd "$2" && pwd)
WORK=${3:-/tmp/oneinfer_compare}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-3}
mkdir -p "$WORK"
if [ ! -f "$WORK/f32/model.onnx" ]; then
  "$OLD/oneinfer" export-qwen3 --random qwen3-0.6b --seed 1 -o "$WORK/ckpt"
  "$OLD/oneinfer" export-qwen3 "$WORK/ckpt" -o "$WORK/f32/model.onnx" --cached
  "$OLD/oneinfer" export-qwen3 "$WORK/ckpt" -o "$WORK/int4/model.onnx" --cached --weights int4
fi
if [ ! -f "$WORK/qdq/model.onnx" ]; then
  "$OLD/oneinfer" quantize "$WORK/f32/model.onnx" -o "$WORK/qdq/model.onnx" --a8w8 \
    --calib-ids <(seq -s, 1000 1063) --calib-seq 32 --calib-tokens 64 --threads "$THREADS" > /dev/null
fi
PROMPT=$(seq -s, 1000 1031)
run() {  # build variant rep
  local model=$WORK/f32/model.onnx extra=()
  case $2 in int8) extra=(--matmul int8) ;; int4) model=$WORK/int4/model.onnx ;; qdq) model=$WORK/qdq/model.onnx ;; esac
  "$1/oneinfer" run "$model" --prompt-ids "$PROMPT" -n "$NEW" --threads "$THREADS" --json "${extra[@]}" |
    tail -1 > "$WORK/$3.json"
}
for variant in f32 int8 int4 qdq; do
  for rep in $(seq 1 "$REPS"); do
    run "$OLD" $variant "old.$variant.$rep"
    run "$NEW_BUILD" $variant "new.$variant.$rep"
  done
done
/usr/bin/python3 - "$WORK" "$REPS" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
print("| variant | decode old ms/token | decode new | new/old | prefill old ms | prefill new | new/old |")
print("|---|---|---|---|---|---|---|")
for v in ("f32", "int8", "int4", "qdq"):
    m = {}
    for b in ("old", "new"):
        js = [json.load(open(f"{work}/{b}.{v}.{r}.json")) for r in range(1, reps + 1)]
        m[b] = (statistics.median(j["decode_ms_per_token"] for j in js), statistics.median(j["prefill_ms"] for j in js))
    print(f"| {v} | {m['old'][0]:.1f} | {m['new'][0]:.1f} | {m['new'][0]/m['old'][0]:.2f} "
          f"| {m['old'][1]:.0f} | {m['new'][1]:.0f} | {m['new'][1]/m['old'][1]:.2f} |")
PY
