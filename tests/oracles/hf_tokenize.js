// Hugging Face tokenizers (the Rust library, via npm) as the oracle: one line of ids per input line.
// usage: node hf_tokenize.js tokenizer.json corpus.txt > ids.txt
const fs = require('fs');
const {Tokenizer} = require('@anush008/tokenizers');
(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const text = fs.readFileSync(process.argv[3], 'utf8');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out = [];
  for (const line of lines) {
    const enc = await tok.encode(line);
    out.push(Array.from(enc.getIds()).join(' '));
  }
  process.stdout.write(out.join('\n') + '\n');
})();
