// Fuzz target: tokenizer.json bytes through Tokenizer::FromJson; a tokenizer that loads then
// encodes and decodes a fixed text and decodes every id, whole and streamed.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oneinfer/tokenizer.h"

namespace {

// A sample with letters, digits, spaces, punctuation, CJK and an emoji.
constexpr std::string_view kText = "Hello, world! 123  x\n\t<|im_start|>你好 🙂 ée";
// Decoding every id of a huge vocabulary would dwarf the loading the target is about.
constexpr int32_t kMaxDecodedIds = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using oneinfer::Tokenizer;
  auto tok = Tokenizer::FromJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!tok.ok()) return 0;
  const std::vector<int32_t> ids = (*tok)->Encode(kText);
  (void)(*tok)->Decode(ids);
  (void)(*tok)->Normalize(kText);
  std::vector<int32_t> all;
  for (int32_t id = -2; id < (*tok)->vocab_size() + 2 && id < kMaxDecodedIds; ++id) all.push_back(id);
  (void)(*tok)->Decode(all, /*skip_special=*/true);
  Tokenizer::StreamDecoder stream(**tok);
  for (int32_t id : all) (void)stream.Push(id);
  (void)stream.Flush();
  for (int32_t id : all) {
    (void)(*tok)->TokenBytes(id);
    (void)(*tok)->IsSpecial(id);
  }
  return 0;
}
