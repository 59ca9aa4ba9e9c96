// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (the Qwen2/Qwen3 family).
//
// Encode: added tokens are matched first (leftmost, longest) on the raw text; the text between
// them is normalised (NFC), split by the pre-tokenizer's regex, mapped byte by byte onto the
// byte-level alphabet, and merged by rank. Decode reverses it; StreamDecoder yields text as
// tokens arrive without ever emitting part of a UTF-8 sequence. Loading refuses ids that are not
// integers in [0, 2^22), an id given to two different tokens and a vocabulary missing one of the
// 256 byte-level characters.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/export.h"

namespace oneinfer {

class ONEINFER_API Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json);
  ~Tokenizer();

  // Fails (ResourceExhausted, naming the pattern) only when the pre-tokenizer regex hits ICU's
  // time or stack limit: a pattern from tokenizer.json that backtracks catastrophically.
  absl::StatusOr<std::vector<int32_t>> TryEncode(std::string_view text) const;
  // TryEncode for a tokenizer known to be well-behaved: an empty vector where TryEncode fails.
  std::vector<int32_t> Encode(std::string_view text) const;
  // The tokenizer's normalizer applied to text (NFC for Qwen); Decode(Encode(x)) == Normalize(x).
  std::string Normalize(std::string_view text) const;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // Largest id + 1 over the vocabulary and added tokens.
  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> TokenId(const std::string& token) const;
  bool IsSpecial(int32_t id) const;
  // Raw bytes a token stands for ("" for an unknown id).
  std::string TokenBytes(int32_t id) const;

  class ONEINFER_API StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& t, bool skip_special = false) : t_(t), skip_special_(skip_special) {}
    // Text completed by this token, always valid UTF-8: possibly empty while a sequence is
    // incomplete, with each ill-formed byte run (one that can never complete) as U+FFFD.
    std::string Push(int32_t id);
    // Whatever is left (an incomplete sequence is returned as U+FFFD).
    std::string Flush();

   private:
    const Tokenizer& t_;
    bool skip_special_;
    std::string pending_;
  };

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int32_t vocab_size_ = 0;
};

}  // namespace oneinfer
