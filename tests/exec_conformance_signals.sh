#!/usr/bin/env bash
# Runs every case folder of the ONNX test data (Debian's libonnx-testdata) through `oneinfer exec`
# and fails if any case ends by a signal (an abort, a segfault) or hangs. Wrong answers and clear
# errors are the conformance runner's business; here only "never takes the process down" counts.
#
# usage: tests/exec_conformance_signals.sh [ONEINFER_CLI] [DATA_DIR]
#   ONEINFER_CLI  the oneinfer binary (default: $ONEINFER_CLI, else build/oneinfer)
#   DATA_DIR      default /usr/share/libonnx-testdata/data
#   JOBS          cases run at once (default 2); CASE_TIMEOUT seconds per case (default 120)
set -euo pipefail

cli=${1:-${ONEINFER_CLI:-build/oneinfer}}
data=${2:-/usr/share/libonnx-testdata/data}
jobs=${JOBS:-2}
case_timeout=${CASE_TIMEOUT:-120}
[ -x "$cli" ] || { echo "exec_conformance_signals: no oneinfer binary at '$cli'" >&2; exit 1; }
[ -d "$data" ] || { echo "exec_conformance_signals: no test data at '$data' (apt install libonnx-testdata)" >&2; exit 1; }
cli=$(realpath "$cli")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

# One line per case: "<exit code> <case folder>". `timeout` exits 124 when the case hangs and
# 128 + N when the command ends by signal N (as the shell reports a signal).
run_case() {
  local cli=$1 case_dir=$2 work=$3 case_timeout=$4
  local out
  out=$(mktemp -d "$work/out.XXXXXX")
  local code=0
  timeout -k 10 "$case_timeout" "$cli" exec "$case_dir/model.onnx" --input-dir "$case_dir/test_data_set_0" \
    --output-dir "$out" > "$out.log" 2>&1 || code=$?
  echo "$code $case_dir"
  if [ "$code" -gt 128 ] || [ "$code" -eq 124 ]; then cp "$out.log" "$work/$(basename "$case_dir").log"; fi
  rm -rf "$out" "$out.log"
}
export -f run_case

find "$data" -mindepth 2 -maxdepth 3 -name model.onnx -printf '%h\n' | sort |
  while read -r d; do [ -d "$d/test_data_set_0" ] && echo "$d"; done > "$work/cases"
total=$(wc -l < "$work/cases")
xargs -a "$work/cases" -P "$jobs" -I{} bash -c 'run_case "$@"' _ "$cli" {} "$work" "$case_timeout" > "$work/results"

ok=$(awk '$1 == 0' "$work/results" | wc -l)
errors=$(awk '$1 == 1' "$work/results" | wc -l)
bad=$(awk '$1 > 128 || $1 == 124' "$work/results" | sort -k2)
other=$(awk '$1 != 0 && $1 != 1 && $1 != 124 && $1 <= 128' "$work/results" | sort -k2)
elapsed=$(( $(date +%s) - start ))
echo "exec_conformance_signals: $total cases in ${elapsed} s: $ok exit 0, $errors exit 1 (a clear error)"
if [ -n "$other" ]; then
  echo "other exit codes:"
  echo "$other"
fi
if [ -n "$bad" ]; then
  echo "FAILED: cases that ended by a signal (exit 128 + N) or hung (124):"
  while read -r code dir; do
    echo "  $code $dir"
    sed 's/^/      /' "$work/$(basename "$dir").log" 2>/dev/null | tail -3
  done <<< "$bad"
  exit 1
fi
[ -z "$other" ] || exit 1
