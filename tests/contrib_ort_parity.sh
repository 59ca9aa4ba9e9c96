#!/usr/bin/env bash
# ONNX Runtime 1.30 parity of the com.microsoft operators of optimum / onnxruntime-genai LLM files
# (issue 12 item 2): tests/contrib_graphs.py writes one-node graphs over their attribute and edge
# forms with onnx.helper, `oneinfer exec` and ONNX Runtime (tests/oracles/ort_run_cases.js, one
# process for all cases) run each, and every output must agree within the bound the case states.
# usage: tests/contrib_ort_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ONEINFER="$BUILD/oneinfer"
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" tests/contrib_graphs.py build "$work"
cases=$(cat "$work/cases.txt")
for c in $cases; do
  d="$work/$c"
  if ! "$ONEINFER" exec "$d/model.onnx" --input-dir "$d/in" --output-dir "$d/ours" --threads 2 > "$d/ours.log" 2>&1; then
    echo "$c: oneinfer failed: $(tail -c 300 "$d/ours.log")"
  fi
done
node tests/oracles/ort_run_cases.js "$work" $cases 2> /dev/null
if "$PY" tests/contrib_graphs.py compare "$work"; then
  echo "contrib_ort_parity: $(echo $cases | wc -w) graphs, all within their bounds"
else
  echo "contrib_ort_parity: FAILED"
  exit 1
fi
