#!/usr/bin/env bash
# The sanitizer stages of CI (test.sh; docs/reliability.md), each in its own clang tree.
#   scripts/sanitize.sh address [FUZZ_SECONDS]
#     build-asan: ASan + UBSan + libFuzzer coverage (ONEINFER_SANITIZE=address, ONEINFER_FUZZ=ON),
#     one build for three uses: the unit tests, the ONNX conformance suite, then the fuzz
#     regression files (tests/data/fuzz/TARGET/*) replayed and each fuzz target run for
#     FUZZ_SECONDS (default 60; 0 skips the timed runs).
#   scripts/sanitize.sh thread
#     build-tsan: TSan, the library and the concurrency tests (tests/concurrency_test.cc) alone.
# Any sanitizer report fails the stage. Set ONEINFER_SANITIZE_JOBS to bound the build's jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
KIND=${1:?usage: scripts/sanitize.sh address|thread [FUZZ_SECONDS]}
JOBS=${ONEINFER_SANITIZE_JOBS:-$(nproc)}
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1  # clones share the cache (setup.sh)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

stage_start=0
stage() { stage_start=$(date +%s); echo "sanitize: $1"; }
stage_done() { echo "sanitize: $1 took $(( $(date +%s) - stage_start )) s"; }

configure() {  # DIR SANITIZER FUZZ
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ "${LAUNCHER[@]}" \
    -DONEINFER_SANITIZE="$2" -DONEINFER_FUZZ="$3" -DONEINFER_BUILD_BENCH=OFF > /dev/null
}

case "$KIND" in
  address)
    FUZZ_SECONDS=${2:-60}
    B=build-asan
    stage "build $B (clang, ASan + UBSan + fuzzer coverage)"
    configure $B address ON
    cmake --build $B -j "$JOBS" --target oneinfer oneinfer_tests oneinfer_conformance oneinfer_fuzzers
    stage_done "build $B"

    stage "unit tests under ASan + UBSan"
    # Left to the Release suite: SampledJsonIsAlwaysValid runs the command line 200 times (76 s in
    # Release, many minutes here; its decode path is fuzz_tokenizer_text's, which runs here).
    ONEINFER_CLI=$B/oneinfer $B/oneinfer_tests --gtest_brief=1 \
      --gtest_filter=-Qwen3Cli.SampledJsonIsAlwaysValid
    stage_done "unit tests"

    stage "conformance under ASan + UBSan"
    $B/oneinfer_conformance --manifest tests/conformance/expected_failures.txt --gtest_brief=1
    stage_done "conformance"

    stage "fuzz regression files"
    for dir in tests/data/fuzz/*/; do
      [ -d "$dir" ] || continue
      t=$(basename "$dir")
      "$B/fuzz/fuzz_$t" -runs=1 "$dir"* > "$B/fuzz_regress_$t.log" 2>&1 ||
        { tail -30 "$B/fuzz_regress_$t.log"; echo "sanitize: a regression file of $t fails"; exit 1; }
      echo "sanitize: $t: $(ls "$dir" | wc -l) regression files clean"
    done
    stage_done "fuzz regression files"

    if [ "$FUZZ_SECONDS" != 0 ]; then
      stage "fuzz smoke runs, ${FUZZ_SECONDS} s each"
      FUZZ_SEED=${FUZZ_SEED:-1} bash scripts/fuzz.sh --build $B "$FUZZ_SECONDS"
      stage_done "fuzz smoke runs"
    fi
    ;;
  thread)
    B=build-tsan
    stage "build $B (clang, TSan)"
    configure $B thread OFF
    cmake --build $B -j "$JOBS" --target oneinfer_concurrency_tests
    stage_done "build $B"
    stage "concurrency tests under TSan"
    $B/oneinfer_concurrency_tests
    stage_done "concurrency tests"
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [FUZZ_SECONDS]" >&2
    exit 2
    ;;
esac
