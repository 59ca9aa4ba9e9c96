#!/usr/bin/env bash
# Peak RSS of one long prompt on a 2-layer Qwen3 at the real widths (hidden 1024, 16 heads,
# vocab 151,936): `oneinfer run --prompt-ids (N ids) -n 1` under /usr/bin/time -v, for each
# weight format and prefill chunk asked. Prints a markdown table.
#   bench/long_prompt_rss.sh [BUILD_DIR] [WORK_DIR]
#   TOKENS="8000" WEIGHTS="float int8" CHUNKS="256 0" CACHED="1" THREADS=2 bench/long_prompt_rss.sh
# CACHED=0 runs the default (uncached) graph instead, where the chunk does not apply.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
WORK=${2:-/tmp/oneinfer_long_prompt}
TOKENS=${TOKENS:-8000}
WEIGHTS=${WEIGHTS:-float int8}
CHUNKS=${CHUNKS:-256}
CACHED=${CACHED:-1}
THREADS=${THREADS:-2}
mkdir -p "$WORK"
[ -f "$WORK/ckpt/config.json" ] || "$BUILD/oneinfer" export-qwen3 --random qwen3-0.6b --layers 2 --seed 1 -o "$WORK/ckpt" > /dev/null
graph=$([ "$CACHED" = 1 ] && echo cached || echo default)
echo "| weights | graph | prompt tokens | prefill chunk | peak RSS (MB) | prefill (s) |"
echo "|---|---|---|---|---|---|"
for w in $WEIGHTS; do
  m="$WORK/$graph-$w/model.onnx"
  if [ ! -f "$m" ]; then
    flags=(--weights "$w")
    [ "$CACHED" = 1 ] && flags+=(--cached)
    "$BUILD/oneinfer" export-qwen3 "$WORK/ckpt" -o "$m" "${flags[@]}" > /dev/null
  fi
  for n in $TOKENS; do
    # Ids spread over the vocabulary (every embedding row a different page).
    ids=$(seq 0 $((n - 1)) | awk '{printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 151936}')
    for c in $CHUNKS; do
      /usr/bin/time -v "$BUILD/oneinfer" run "$m" --prompt-ids "$ids" -n 1 --threads "$THREADS" --prefill-chunk "$c" \
        --json > "$WORK/out.json" 2> "$WORK/time.txt" || { cat "$WORK/time.txt" >&2; exit 1; }
      kib=$(grep "Maximum resident" "$WORK/time.txt" | awk '{print $NF}')
      prefill=$(/usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['prefill_ms'] / 1000, 1))" "$WORK/out.json")
      echo "| $w | $graph | $n | $c | $((kib / 1024)) | $prefill |"
    done
  done
done
