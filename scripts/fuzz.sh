#!/usr/bin/env bash
# Runs each libFuzzer target of fuzz/ for a given time (docs/reliability.md).
#   scripts/fuzz.sh [--build DIR] SECONDS [TARGET...]
# DIR is a tree configured with ONEINFER_FUZZ=ON (scripts/sanitize.sh address makes build-asan,
# the default). Seeds are written at run time (scripts/fuzz_seeds.py) into DIR/fuzz-work/seeds; what
# the fuzzer finds grows DIR/fuzz-work/corpus/TARGET, and a crash is saved as DIR/fuzz-work/artifacts/TARGET/*.
# Each target prints one line: target, seconds, executions, new corpus files, result. Exit status
# 1 when any target crashed, leaked, timed out or ran out of memory. FUZZ_SEED (default 0: a new
# random seed each run) fixes libFuzzer's mutation seed: CI's smoke runs use 1, so that a run
# explores the same inputs first every time and a failure there is one anybody can replay.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-asan
if [ "${1:-}" = "--build" ]; then BUILD_DIR=$2; shift 2; fi
SECONDS_EACH=${1:?usage: scripts/fuzz.sh [--build DIR] SECONDS [TARGET...]}
shift
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(model tokenizer_json tokenizer_text safetensors q4nx tensor_proto chat_template)

WORK=$BUILD_DIR/fuzz-work
if [ ! -f "$WORK/seeds/.done" ]; then
  rm -rf "$WORK/seeds"
  python3 scripts/fuzz_seeds.py "$WORK/seeds"
  touch "$WORK/seeds/.done"
fi

failed=0
for t in "${TARGETS[@]}"; do
  bin=$BUILD_DIR/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: $bin not built (ninja -C $BUILD_DIR fuzz_$t)"; exit 2; }
  mkdir -p "$WORK/corpus/$t" "$WORK/artifacts/$t" "$WORK/seeds/$t"
  log=$WORK/$t.log
  before=$(find "$WORK/corpus/$t" -type f | wc -l)
  # One process, no forking: the machine is shared. 2 GB RSS and 20 s per input are the limits a
  # model, a tokenizer or a weight file of the fuzzer's size must stay within.
  rc=0
  "$bin" -max_total_time="$SECONDS_EACH" -seed="${FUZZ_SEED:-0}" -rss_limit_mb=2048 -timeout=20 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$t/" \
    "$WORK/corpus/$t" "$WORK/seeds/$t" > "$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$(find "$WORK/corpus/$t" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    result=clean
  else
    result="FAILED (exit $rc; $log; $(ls "$WORK/artifacts/$t" | head -3 | tr '\n' ' '))"
    grep -m3 -E "ERROR: |runtime error|==ERROR|Test unit written" "$log" || true
    failed=1
  fi
  echo "fuzz: $t ${SECONDS_EACH}s execs=${execs:-?} corpus=$before->$after $result"
done
exit $failed
