#include "oneinfer/tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer {

using json = nlohmann::json;

namespace {

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Decodes one code point at s[i]; advances i. Invalid bytes decode as themselves.
char32_t NextCodePoint(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
  if (i + static_cast<size_t>(len) > s.size()) len = 1;
  char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
  i += static_cast<size_t>(len);
  return c;
}

// Length of the longest prefix of s that ends on a complete UTF-8 sequence.
size_t CompleteUtf8Prefix(std::string_view s) {
  size_t n = s.size();
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

// Rewrites the pre-tokenizer regex for ICU: Rust/Oniguruma's \s is Unicode White_Space,
// which ICU's \s is not quite (it misses VT and NEL).
std::string IcuPattern(const std::string& p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      if (p[i + 1] == 's') out += "\\p{White_Space}";
      else if (p[i + 1] == 'S') out += "\\P{White_Space}";
      else out += p.substr(i, 2);
      ++i;
    } else {
      out += p[i];
    }
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  struct Added {
    std::string content;
    int32_t id;
    bool special;
  };
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens;        // id -> byte-level string (or added content)
  std::vector<uint8_t> is_added;          // id -> 1 when an added token (literal text)
  std::vector<uint8_t> is_special;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, merged id)
  std::string byte_char[256];             // byte -> its byte-level character (UTF-8)
  int32_t byte_symbol[256];               // byte -> vocab id of that character
  std::unordered_map<char32_t, uint8_t> char_byte;
  std::vector<Added> added;               // longest first
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool nfc = false;
  std::unique_ptr<icu::RegexPattern> split;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void Bpe(const std::string& piece, std::vector<int32_t>& out) const;
  void EncodeSegment(const std::string& text, std::vector<int32_t>& out) const;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open tokenizer '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  auto t = FromJson(ss.str());
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("tokenizer '", path, "': ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view text) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  Impl& m = *tok->impl_;
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()));
  }
  try {
    const json& model = j.at("model");
    if (model.value("type", "") != "BPE") {
      return absl::UnimplementedError(absl::StrCat("model type '", model.value("type", ""), "' is not supported (only BPE)"));
    }
    m.byte_fallback = model.value("byte_fallback", false);
    m.ignore_merges = model.value("ignore_merges", false);
    int32_t max_id = -1;
    for (auto& [tokstr, id] : model.at("vocab").items()) {
      m.vocab[tokstr] = id.get<int32_t>();
      max_id = std::max(max_id, id.get<int32_t>());
    }
    for (const json& a : j.value("added_tokens", json::array())) {
      max_id = std::max(max_id, a.at("id").get<int32_t>());
    }
    tok->vocab_size_ = max_id + 1;
    m.tokens.assign(static_cast<size_t>(tok->vocab_size_), "");
    m.is_added.assign(static_cast<size_t>(tok->vocab_size_), 0);
    m.is_special.assign(static_cast<size_t>(tok->vocab_size_), 0);
    for (const auto& [s, id] : m.vocab) m.tokens[static_cast<size_t>(id)] = s;
    for (const json& a : j.value("added_tokens", json::array())) {
      const int32_t id = a.at("id");
      const std::string content = a.at("content");
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false) ||
          a.value("normalized", false)) {
        return absl::UnimplementedError(absl::StrCat("added token '", content,
                                                     "' uses lstrip/rstrip/single_word/normalized, which are not supported"));
      }
      m.tokens[static_cast<size_t>(id)] = content;
      m.is_added[static_cast<size_t>(id)] = 1;
      m.is_special[static_cast<size_t>(id)] = a.value("special", false) ? 1 : 0;
      m.added.push_back({content, id, a.value("special", false)});
    }
    std::sort(m.added.begin(), m.added.end(), [](const Impl::Added& a, const Impl::Added& b) {
      return a.content.size() > b.content.size();
    });

    // The GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to 256+.
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      m.byte_char[b].clear();
      AppendUtf8(m.byte_char[b], c);
      m.char_byte[c] = static_cast<uint8_t>(b);
      auto it = m.vocab.find(m.byte_char[b]);
      m.byte_symbol[b] = it == m.vocab.end() ? -1 : it->second;
    }

    int32_t rank = 0;
    for (const json& mg : model.at("merges")) {
      std::string a, b;
      if (mg.is_string()) {
        const std::string s = mg;
        const size_t sp = s.find(' ');
        if (sp == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("merge '", s, "' has no space"));
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else {
        a = mg.at(0);
        b = mg.at(1);
      }
      auto ia = m.vocab.find(a), ib = m.vocab.find(b), im = m.vocab.find(a + b);
      if (ia == m.vocab.end() || ib == m.vocab.end() || im == m.vocab.end()) {
        return absl::InvalidArgumentError(absl::StrCat("merge '", a, " ", b, "' names a token outside the vocabulary"));
      }
      const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
      m.merges.emplace(key, std::make_pair(rank++, im->second));
    }

    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const std::string type = j["normalizer"].value("type", "");
      if (type == "NFC") m.nfc = true;
      else return absl::UnimplementedError(absl::StrCat("normalizer '", type, "' is not supported (only NFC)"));
    }
    std::string pattern;
    const json& pre = j.at("pre_tokenizer");
    std::vector<json> steps = pre.value("type", "") == "Sequence" ? pre.at("pretokenizers").get<std::vector<json>>()
                                                                   : std::vector<json>{pre};
    bool byte_level = false;
    for (const json& s : steps) {
      const std::string type = s.value("type", "");
      if (type == "Split") {
        if (s.value("behavior", "") != "Isolated" || s.value("invert", false) || !s.at("pattern").contains("Regex")) {
          return absl::UnimplementedError("only Split pre-tokenizers with an Isolated Regex pattern are supported");
        }
        pattern = s.at("pattern").at("Regex");
      } else if (type == "ByteLevel") {
        if (s.value("add_prefix_space", false) || s.value("use_regex", true)) {
          return absl::UnimplementedError("ByteLevel pre-tokenizer with add_prefix_space or its own regex is not supported");
        }
        byte_level = true;
      } else {
        return absl::UnimplementedError(absl::StrCat("pre-tokenizer '", type, "' is not supported"));
      }
    }
    if (!byte_level) return absl::UnimplementedError("only byte-level BPE tokenizers are supported");
    if (!pattern.empty()) {
      UErrorCode err = U_ZERO_ERROR;
      UParseError perr;
      m.split.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(IcuPattern(pattern)), perr, err));
      if (U_FAILURE(err)) return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex does not compile: ", u_errorName(err)));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", e.what()));
  }
  return tok;
}

void Tokenizer::Impl::Bpe(const std::string& piece, std::vector<int32_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::string chars;
  std::vector<int32_t> syms;
  for (unsigned char b : piece) {
    chars += byte_char[b];
    syms.push_back(byte_symbol[b]);
  }
  auto whole = ignore_merges ? vocab.find(chars) : vocab.end();
  if (whole != vocab.end()) {
    syms.assign(1, whole->second);
  } else {
    // Repeatedly merge the adjacent pair of lowest rank (leftmost on ties).
    for (;;) {
      int32_t best_rank = std::numeric_limits<int32_t>::max(), best_id = -1;
      size_t best_at = 0;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(syms[i])) << 32) | static_cast<uint32_t>(syms[i + 1]);
        auto it = merges.find(key);
        if (it != merges.end() && it->second.first < best_rank) {
          best_rank = it->second.first;
          best_id = it->second.second;
          best_at = i;
        }
      }
      if (best_id < 0) break;
      syms[best_at] = best_id;
      syms.erase(syms.begin() + static_cast<long>(best_at) + 1);
    }
  }
  out.insert(out.end(), syms.begin(), syms.end());
  std::lock_guard<std::mutex> lock(cache_mu);
  if (cache.size() < 200000) cache.emplace(piece, std::move(syms));
}

namespace {
icu::UnicodeString NormalizeNfc(const icu::UnicodeString& u) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return u;
  icu::UnicodeString normalized = n->normalize(u, err);
  return U_SUCCESS(err) ? normalized : u;
}
}  // namespace

std::string Tokenizer::Normalize(std::string_view text) const {
  if (!impl_->nfc) return std::string(text);
  // Added tokens are matched before normalisation, so they pass through as they are.
  std::string out;
  NormalizeNfc(icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())))).toUTF8String(out);
  return out;
}

void Tokenizer::Impl::EncodeSegment(const std::string& raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(raw);
  if (nfc) u = NormalizeNfc(u);
  auto emit = [&](int32_t start, int32_t end) {
    if (end <= start) return;
    std::string piece;
    u.tempSubStringBetween(start, end).toUTF8String(piece);
    Bpe(piece, out);
  };
  if (!split) {
    emit(0, u.length());
    return;
  }
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(split->matcher(u, err));
  int32_t last = 0;
  while (U_SUCCESS(err) && matcher->find(err)) {
    const int32_t s = matcher->start(err), e = matcher->end(err);
    if (e == s) continue;  // an empty match splits nothing
    emit(last, s);         // Isolated: the gap is a piece of its own
    emit(s, e);
    last = e;
  }
  emit(last, u.length());
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  const Impl& m = *impl_;
  size_t seg_start = 0, i = 0;
  while (i < text.size()) {
    const Impl::Added* hit = nullptr;
    for (const Impl::Added& a : m.added) {  // longest first, so the first hit is the longest
      if (!a.content.empty() && text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    m.EncodeSegment(std::string(text.substr(seg_start, i - seg_start)), out);
    out.push_back(hit->id);
    i += hit->content.size();
    seg_start = i;
  }
  m.EncodeSegment(std::string(text.substr(seg_start)), out);
  return out;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= vocab_size_) return "";
  const std::string& t = m.tokens[static_cast<size_t>(id)];
  if (m.is_added[static_cast<size_t>(id)]) return t;
  // <0xAB> tokens stand for one raw byte when the model uses byte fallback.
  if (m.byte_fallback && t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') {
    return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
  }
  std::string bytes;
  for (size_t i = 0; i < t.size();) {
    const char32_t c = NextCodePoint(t, i);
    auto it = m.char_byte.find(c);
    if (it != m.char_byte.end()) bytes += static_cast<char>(it->second);
    else AppendUtf8(bytes, c);
  }
  return bytes;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size_ && impl_->is_special[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::TokenId(const std::string& token) const {
  for (const auto& a : impl_->added) if (a.content == token) return a.id;
  auto it = impl_->vocab.find(token);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && IsSpecial(id)) continue;
    out += TokenBytes(id);
  }
  return out;
}

std::string Tokenizer::StreamDecoder::Push(int32_t id) {
  if (skip_special_ && t_.IsSpecial(id)) return "";
  pending_ += t_.TokenBytes(id);
  const size_t n = CompleteUtf8Prefix(pending_);
  std::string ready = pending_.substr(0, n);
  pending_.erase(0, n);
  return ready;
}

std::string Tokenizer::StreamDecoder::Flush() {
  std::string rest;
  if (!pending_.empty()) rest = "\xEF\xBF\xBD";
  pending_.clear();
  return rest;
}

}  // namespace oneinfer
