#!/usr/bin/env bash
# Runs every test: unit tests and the ONNX conformance suite (builds first if needed).
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh --no-demo
BUILD_DIR=${ONEINFER_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure
