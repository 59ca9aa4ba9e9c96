#!/usr/bin/env bash
# Real convolutional and recurrent models, side by side in one run (issue 15 item 2): for each model
# of tests/models (PP-OCRv4 det 1x3x320x320, rec 1x3x48x320, cls 1x3x320x320; Silero VAD legacy,
# v5, v6 on one 512-sample 16 kHz chunk), `oneinfer bench --json` and ONNX Runtime 1.30
# (bench/ort_bench.js, CPU provider, all graph optimisations) on the same inputs
# (tests/conv_models.py), at 1 and 2 threads: the warm per-run median of each, their ratio, and the
# geometric mean of the ratios. Prints a markdown table.
#   bench/conv_models_bench.sh [BUILD_DIR] [RUNS]
# Needs: setup.sh (build, tests/oracles, tests/models).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
RUNS=${2:-30}
PY=/usr/bin/python3
CASES="ppocr_v4_det ppocr_v4_rec ppocr_mobile_v2_cls silero_vad_legacy silero_vad_v5 silero_vad_v6"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" tests/conv_models.py build "$work" $CASES
median() { "$PY" -c "import json,sys; print(json.load(sys.stdin)['median_ms'])"; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs after 3 warm-up"
echo
echo "| model | threads | oneinfer ms | ONNX Runtime ms | ratio |"
echo "|---|---|---|---|---|"
ratios=()
for c in $CASES; do
  d="$work/$c"
  for t in 1 2; do
    ours=$("$BUILD/oneinfer" bench "$d/model.onnx" --input-dir "$d/in" --threads "$t" --runs "$RUNS" --warmup 3 --json 2>/dev/null | median)
    ort=$(node bench/ort_bench.js "$d/model.onnx" "$d/in.json" --threads "$t" --runs "$RUNS" --warmup 3 | median)
    ratio=$("$PY" -c "print(f'{$ours / $ort:.2f}')")
    ratios+=("$ratio")
    printf '| %s | %s | %.3f | %.3f | %s |\n' "$c" "$t" "$ours" "$ort" "$ratio"
  done
done
echo
"$PY" -c "import math,sys; r=[float(v) for v in sys.argv[1:]]; print(f'geometric mean of the ratios: {math.exp(sum(map(math.log, r)) / len(r)):.2f}; worst: {max(r):.2f}')" "${ratios[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
