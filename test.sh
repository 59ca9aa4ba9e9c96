#!/usr/bin/env bash
# Runs every test: unit tests and the ONNX conformance suite (builds first if needed).
# ONEINFER_SANITIZERS=1 adds the sanitizer stages (docs/reliability.md): an ASan + UBSan tree that
# runs the unit tests, the conformance suite and each fuzz target for 60 s, and a TSan tree for
# the concurrency tests.
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh --no-demo
BUILD_DIR=${ONEINFER_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure
if [ "${ONEINFER_SANITIZERS:-0}" = 1 ]; then
  bash scripts/sanitize.sh address 60
  bash scripts/sanitize.sh thread
fi
