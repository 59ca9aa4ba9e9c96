#!/usr/bin/env bash
# Q4NX at model level, side by side in one run: the random real-size Qwen3-0.6B --cached graph
# as float32, as --weights int4 (ONNX DequantizeLinear, same 4-bit GEMM) and as --weights q4nx
# (projections and lm_head q4_1 in model.q4nx), a 32-token prompt, 2 threads. Prints file
# sizes, load, prefill, decode and peak RSS, with load averages.
#   bench/q4nx_qwen3.sh [BUILD_DIR] [WORK_DIR] [CKPT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_q4nx}
CKPT=${3:-$WORK/ckpt}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-2}
mkdir -p "$WORK"
[ -f "$CKPT/model.safetensors" ] || "$BUILD/oneinfer" export-qwen3 --random qwen3-0.6b --seed 1 -o "$CKPT"
[ -f "$WORK/float/model.onnx" ] || "$BUILD/oneinfer" export-qwen3 "$CKPT" -o "$WORK/float/model.onnx" --cached
if [ ! -f "$WORK/q4nx/model.q4nx" ]; then
  start=$(date +%s.%N)
  "$BUILD/oneinfer" export-qwen3 "$CKPT" -o "$WORK/q4nx/model.onnx" --cached --weights q4nx
  echo "q4nx export: $(echo "$(date +%s.%N) - $start" | bc) s"
fi
[ -f "$WORK/int4/model.onnx" ] || "$BUILD/oneinfer" export-qwen3 "$CKPT" -o "$WORK/int4/model.onnx" --cached --weights int4
PROMPT=$(seq -s, 1000 1031)
echo "before: $(uptime)"
for rep in $(seq 1 "$REPS"); do
  for kind in float int4 q4nx; do
    /usr/bin/time -v "$BUILD/oneinfer" run "$WORK/$kind/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
      --threads "$THREADS" --json > "$WORK/$kind.$rep.json" 2> "$WORK/$kind.$rep.time"
  done
done
echo "after: $(uptime)"
/usr/bin/python3 - "$WORK" "$REPS" <<'PY'
import json, os, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def load(kind):
    rows = []
    for r in range(1, reps + 1):
        j = json.loads(open(f"{work}/{kind}.{r}.json").read().strip().splitlines()[-1])
        t = open(f"{work}/{kind}.{r}.time").read()
        j["rss_mib"] = int([l for l in t.splitlines() if "Maximum resident" in l][0].split()[-1]) / 1024
        rows.append(j)
    return rows
size = lambda p: os.path.getsize(f"{work}/{p}")
print(f"files: float model.onnx.data {size('float/model.onnx.data'):,} B; q4nx model.q4nx {size('q4nx/model.q4nx'):,} B "
      f"+ model.onnx.data {size('q4nx/model.onnx.data'):,} B (embedding and norms, float32); "
      f"int4 model.onnx.data {size('int4/model.onnx.data'):,} B")
print("| weights | load ms | prefill ms (32 tokens) | decode ms/token | peak RSS MiB | generated ids |")
print("|---|---|---|---|---|---|")
res = {}
for kind in ("float", "int4", "q4nx"):
    rows = load(kind)
    med = lambda k: statistics.median([r[k] for r in rows])
    res[kind] = {k: med(k) for k in ("load_ms", "prefill_ms", "decode_ms_per_token", "rss_mib")}
    print(f"| {kind} | {res[kind]['load_ms']:.0f} | {res[kind]['prefill_ms']:.0f} | {res[kind]['decode_ms_per_token']:.1f} | "
          f"{res[kind]['rss_mib']:.0f} | {rows[0]['generated_ids'][:6]}... |")
for other in ("float", "int4"):
    print(f"ratios q4nx/{other}: load {res['q4nx']['load_ms']/res[other]['load_ms']:.2f}, prefill "
          f"{res['q4nx']['prefill_ms']/res[other]['prefill_ms']:.2f}, decode "
          f"{res['q4nx']['decode_ms_per_token']/res[other]['decode_ms_per_token']:.2f}")
PY
