#include "oneinfer/tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <queue>
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

// Moves the complete part of pending into out as valid UTF-8: well-formed sequences as they are,
// each maximal ill-formed subpart as one U+FFFD (the Unicode and WHATWG rule, also Rust's
// from_utf8_lossy). A trailing sequence that may still complete stays in pending.
void TakeValidUtf8(std::string& pending, std::string& out) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  const size_t n = pending.size();
  size_t i = 0;
  while (i < n) {
    const auto b = static_cast<unsigned char>(pending[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    // Length and the allowed range of the second byte (which excludes overlongs, surrogates and
    // code points past U+10FFFF).
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    if (len == 0) {  // a stray continuation byte or a byte that never starts a sequence
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const auto c = static_cast<unsigned char>(pending[i + k]);
      if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) break;
    }
    if (k == len) {
      out.append(pending, i, len);
    } else if (i + k == n) {
      break;  // valid so far: wait for the next token
    } else {
      out += kReplacement;
    }
    i += k;
  }
  pending.erase(0, i);
}

// Token ids index a table sized from the largest one. Real vocabularies stay under a million
// entries (Qwen 151,669; Gemma 262,144; XLM-V 901,629), so 4M (2^22) leaves room while keeping a
// crafted sparse id from allocating more than ~150 MB of empty slots.
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

// ICU's regex limits for the pre-tokenizer, per find(). A step is ICU's unit of matching
// work: (a+)+$ stops after 0.14 s of CPU at 1,000 steps (ICU 72, measured); a
// group loop such as (a|b)+ needs more than one step per 33,000 characters and gets one per 100.
// Loops over a character set, all of Qwen's pattern, cost no steps. The stack limit is ICU's
// default, stated so that it cannot drift.
constexpr int32_t kRegexBaseSteps = 1000;
constexpr int32_t kRegexCharsPerStep = 100;
constexpr int32_t kRegexStackBytes = 8 << 20;

absl::StatusOr<int32_t> ValidTokenId(const json& v, const std::string& what) {
  // Floats are refused even when whole (2.0): ids are integers in every tokenizer.json writer.
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has id ", v.dump(), ", which is not an integer"));
  }
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId)
                             : (v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has id ", v.dump(), ", outside [0, ", kMaxTokenId,
                                                   "] (the largest token table this tokenizer accepts)"));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
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
  std::string split_source;               // the pattern as tokenizer.json spells it, for errors
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void Bpe(const std::string& piece, std::vector<int32_t>& out) const;
  void MergeByRank(std::vector<int32_t>& syms) const;
  absl::Status EncodeSegment(const std::string& text, std::vector<int32_t>& out) const;
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
    // Ids are checked before anything is sized from them: a crafted file must not index outside
    // the table or make it huge.
    std::vector<std::pair<std::string, int32_t>> vocab_ids;
    int32_t max_id = -1;
    for (auto& [tokstr, idj] : model.at("vocab").items()) {
      auto id = ValidTokenId(idj, absl::StrCat("vocabulary token '", tokstr, "'"));
      if (!id.ok()) return id.status();
      vocab_ids.emplace_back(tokstr, *id);
      max_id = std::max(max_id, *id);
    }
    std::vector<json> added_json = j.value("added_tokens", json::array()).get<std::vector<json>>();
    std::vector<int32_t> added_ids;
    for (const json& a : added_json) {
      auto id = ValidTokenId(a.at("id"), absl::StrCat("added token '", a.value("content", std::string()), "'"));
      if (!id.ok()) return id.status();
      added_ids.push_back(*id);
      max_id = std::max(max_id, *id);
    }
    tok->vocab_size_ = max_id + 1;
    m.tokens.assign(static_cast<size_t>(tok->vocab_size_), "");
    m.is_added.assign(static_cast<size_t>(tok->vocab_size_), 0);
    m.is_special.assign(static_cast<size_t>(tok->vocab_size_), 0);
    std::vector<uint8_t> taken(static_cast<size_t>(tok->vocab_size_), 0);
    for (auto& [s, id] : vocab_ids) {
      const size_t at = static_cast<size_t>(id);
      if (taken[at]) {
        return absl::InvalidArgumentError(absl::StrCat("vocabulary id ", id, " is given to two tokens ('",
                                                       m.tokens[at], "' and '", s, "')"));
      }
      taken[at] = 1;
      m.tokens[at] = s;
      m.vocab[s] = id;
    }
    std::vector<uint8_t> added_taken(static_cast<size_t>(tok->vocab_size_), 0);
    for (size_t k = 0; k < added_json.size(); ++k) {
      const json& a = added_json[k];
      const int32_t id = added_ids[k];
      const size_t at = static_cast<size_t>(id);
      const std::string content = a.at("content");
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false) ||
          a.value("normalized", false)) {
        return absl::UnimplementedError(absl::StrCat("added token '", content,
                                                     "' uses lstrip/rstrip/single_word/normalized, which are not supported"));
      }
      // An added token may repeat a vocabulary entry or itself, but not claim another token's id.
      if (taken[at] && m.tokens[at] != content) {
        return absl::InvalidArgumentError(absl::StrCat("added token '", content, "' has id ", id, ", which is already '",
                                                       m.tokens[at], "'"));
      }
      if (added_taken[at]) continue;  // the same token listed twice
      taken[at] = added_taken[at] = 1;
      m.tokens[at] = content;
      m.is_added[at] = 1;
      m.is_special[at] = a.value("special", false) ? 1 : 0;
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
      // Every byte needs a token, or text holding it could not be encoded (it would become id -1).
      if (it == m.vocab.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the vocabulary has no token for byte 0x", absl::Hex(b, absl::kZeroPad2), " (its byte-level character '",
            m.byte_char[b], "'); a byte-level BPE vocabulary must hold all 256"));
      }
      m.byte_symbol[b] = it->second;
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
      m.split_source = pattern;
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", e.what()));
  }
  return tok;
}

// Repeatedly merges the adjacent pair of lowest rank (leftmost on ties), in O(n log n): the
// symbols form a linked list and the candidate pairs a min-heap on (rank, position), as in Hugging
// Face tokenizers' Word::merge_all; a popped pair that no longer exists is skipped.
void Tokenizer::Impl::MergeByRank(std::vector<int32_t>& syms) const {
  const size_t n = syms.size();
  if (n < 2) return;
  struct Cand {
    int32_t rank;
    size_t pos;
    int32_t left, right;  // the pair as it was when queued
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> prev(n), next(n);
  std::vector<uint8_t> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : i - 1;
    next[i] = i + 1 == n ? kNone : i + 1;
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](size_t i) {
    if (i == kNone || next[i] == kNone) return;
    const int32_t a = syms[i], b = syms[next[i]];
    auto it = merges.find((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b));
    if (it != merges.end()) heap.push({it->second.first, i, a, b});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const size_t j = next[c.pos];
    if (!alive[c.pos] || j == kNone || syms[c.pos] != c.left || syms[j] != c.right) continue;
    syms[c.pos] = merges.at((static_cast<uint64_t>(static_cast<uint32_t>(c.left)) << 32) | static_cast<uint32_t>(c.right)).second;
    alive[j] = 0;
    next[c.pos] = next[j];
    if (next[j] != kNone) prev[next[j]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) if (alive[i]) syms[k++] = syms[i];
  syms.resize(k);
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
    MergeByRank(syms);
  }
  out.insert(out.end(), syms.begin(), syms.end());
  std::lock_guard<std::mutex> lock(cache_mu);
  // Long pieces are rare and would make the cache hold whole documents.
  if (cache.size() < 200000 && piece.size() <= 256) cache.emplace(piece, std::move(syms));
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

absl::Status Tokenizer::Impl::EncodeSegment(const std::string& raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return absl::OkStatus();
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
    return absl::OkStatus();
  }
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> matcher(split->matcher(u, err));
  // A pattern that backtracks catastrophically ((a+)+$) would run for hours or grow its stack
  // without end; ICU stops it. The limit grows with the text for legitimate group loops.
  const int32_t time_limit = kRegexBaseSteps + u.length() / kRegexCharsPerStep;
  if (U_SUCCESS(err)) matcher->setTimeLimit(time_limit, err);
  if (U_SUCCESS(err)) matcher->setStackLimit(kRegexStackBytes, err);
  int32_t last = 0;
  while (U_SUCCESS(err) && matcher->find(err)) {
    const int32_t s = matcher->start(err), e = matcher->end(err);
    if (e == s) continue;  // an empty match splits nothing
    emit(last, s);         // Isolated: the gap is a piece of its own
    emit(s, e);
    last = e;
  }
  if (err == U_REGEX_TIME_OUT || err == U_REGEX_STACK_OVERFLOW) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the pre-tokenizer regex '", split_source, "' hit ICU's ",
        err == U_REGEX_TIME_OUT ? absl::StrCat("time limit (", time_limit, " steps)")
                                : absl::StrCat("backtracking stack limit (", kRegexStackBytes >> 20, " MB)"),
        " on a text of ", u.length(), " UTF-16 units: the pattern backtracks too much for this tokenizer to use"));
  }
  if (U_FAILURE(err)) {
    return absl::InternalError(absl::StrCat("the pre-tokenizer regex '", split_source, "' failed: ", u_errorName(err)));
  }
  emit(last, u.length());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::TryEncode(std::string_view text) const {
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
    if (auto s = m.EncodeSegment(std::string(text.substr(seg_start, i - seg_start)), out); !s.ok()) return s;
    out.push_back(hit->id);
    i += hit->content.size();
    seg_start = i;
  }
  if (auto s = m.EncodeSegment(std::string(text.substr(seg_start)), out); !s.ok()) return s;
  return out;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  auto ids = TryEncode(text);
  return ids.ok() ? *std::move(ids) : std::vector<int32_t>();
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= vocab_size_) return "";
  const std::string& t = m.tokens[static_cast<size_t>(id)];
  if (m.is_added[static_cast<size_t>(id)]) return t;
  // <0xAB> tokens stand for one raw byte when the model uses byte fallback.
  // One that is not two hex digits (<0xZZ>) is an ordinary token, as in Hugging Face's decoder.
  if (m.byte_fallback && t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') {
    const int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
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
  std::string ready;
  TakeValidUtf8(pending_, ready);
  return ready;
}

std::string Tokenizer::StreamDecoder::Flush() {
  std::string rest;
  if (!pending_.empty()) rest = "\xEF\xBF\xBD";
  pending_.clear();
  return rest;
}

}  // namespace oneinfer
