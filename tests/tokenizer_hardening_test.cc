// Crafted tokenizer.json files: ids that are negative, huge, fractional or duplicated are clear
// errors at load, and so is a vocabulary missing a byte; malformed byte-fallback tokens decode as
// text; streamed text is valid UTF-8; a pre-tokenizer regex that backtracks without end is an error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oneinfer/tokenizer.h"

namespace oneinfer {
namespace {

using json = nlohmann::json;

// The GPT-2 byte-level character of each byte, as UTF-8.
std::string ByteChar(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int c = b;
  if (!printable) {
    int extra = 0;
    for (int k = 0; k < b; ++k) {
      const bool p = (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF);
      if (!p) ++extra;
    }
    c = 256 + extra;
  }
  std::string s;
  if (c < 0x80) s += static_cast<char>(c);
  else {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// A byte-level tokenizer whose ids 0..255 are the bytes; vocab_extra and added are spliced in as
// raw JSON text so that a test can write numbers nlohmann would not produce (1e30, 1.5).
std::string TokenizerJson(const std::string& vocab_extra = "", const std::string& added = "[]",
                          bool byte_fallback = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = b;
  std::string v = vocab.dump();
  if (!vocab_extra.empty()) v = v.substr(0, v.size() - 1) + "," + vocab_extra + "}";
  return std::string("{\"model\": {\"type\": \"BPE\", \"byte_fallback\": ") + (byte_fallback ? "true" : "false") +
         ", \"vocab\": " + v + ", \"merges\": []}, \"added_tokens\": " + added +
         ", \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}}";
}

std::string LoadError(const std::string& text) {
  auto t = Tokenizer::FromJson(text);
  return t.ok() ? "loaded" : std::string(t.status().message());
}

TEST(TokenizerHardening, TheCraftedBaseLoads) {
  auto t = Tokenizer::FromJson(TokenizerJson());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 256);
  EXPECT_EQ((*t)->Decode((*t)->Encode("h\xC3\xA9 \x01")), "h\xC3\xA9 \x01");
}

TEST(TokenizerHardening, BadVocabularyIdsAreNamed) {
  struct Case {
    const char* id;
    const char* says;
  };
  for (const Case& c : {Case{"-1", "outside [0, 4194303]"}, Case{"-2147483649", "outside"},
                        Case{"1e30", "not an integer"}, Case{"1.2e9", "not an integer"},
                        Case{"1.5", "not an integer"}, Case{"1200000000", "outside [0, 4194303]"},
                        Case{"4194304", "outside"}, Case{"18446744073709551615", "outside"},
                        Case{"\"7\"", "not an integer"}, Case{"null", "not an integer"}}) {
    const std::string err = LoadError(TokenizerJson(std::string("\"zz\": ") + c.id));
    EXPECT_NE(err.find("vocabulary token 'zz' has id"), std::string::npos) << c.id << ": " << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.id << ": " << err;
  }
}

TEST(TokenizerHardening, BadAddedTokenIdsAreNamed) {
  for (const char* id : {"-1", "1e30", "1.2e9", "1.5", "1200000000"}) {
    const std::string err = LoadError(TokenizerJson("", std::string("[{\"id\": ") + id + ", \"content\": \"<s>\"}]"));
    EXPECT_NE(err.find("added token '<s>' has id"), std::string::npos) << id << ": " << err;
  }
}

TEST(TokenizerHardening, AnIdGivenToTwoTokensIsRefused) {
  std::string err = LoadError(TokenizerJson("\"zz\": 7"));
  EXPECT_NE(err.find("vocabulary id 7 is given to two tokens"), std::string::npos) << err;
  err = LoadError(TokenizerJson("", "[{\"id\": 65, \"content\": \"<s>\"}]"));
  EXPECT_NE(err.find("added token '<s>' has id 65, which is already 'A'"), std::string::npos) << err;
  err = LoadError(TokenizerJson("", "[{\"id\": 300, \"content\": \"<s>\"}, {\"id\": 300, \"content\": \"</s>\"}]"));
  EXPECT_NE(err.find("added token '</s>' has id 300, which is already '<s>'"), std::string::npos) << err;
}

TEST(TokenizerHardening, TheSameTokenListedTwiceIsFine) {
  auto t = Tokenizer::FromJson(TokenizerJson(
      "\"<s>\": 300", "[{\"id\": 300, \"content\": \"<s>\", \"special\": true}, {\"id\": 300, \"content\": \"<s>\", \"special\": true}]"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 301);
  EXPECT_EQ((*t)->Encode("a<s>"), (std::vector<int32_t>{'a', 300}));
  EXPECT_TRUE((*t)->IsSpecial(300));
}

TEST(TokenizerHardening, SparseIdsWithinTheLimitLoad) {
  auto t = Tokenizer::FromJson(TokenizerJson("\"zz\": 100000"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 100001);
  EXPECT_EQ((*t)->TokenBytes(100000), "zz");
  EXPECT_EQ((*t)->TokenBytes(5000), "");
}

TEST(TokenizerHardening, MalformedByteFallbackTokensAreOrdinaryText) {
  auto t = Tokenizer::FromJson(
      TokenizerJson("\"<0x41>\": 256, \"<0xZZ>\": 257, \"<0x4G>\": 258, \"<0x+F>\": 259, \"<0xff>\": 260", "[]",
                    /*byte_fallback=*/true));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->TokenBytes(256), "A");
  EXPECT_EQ((*t)->TokenBytes(257), "<0xZZ>");
  EXPECT_EQ((*t)->TokenBytes(258), "<0x4G>");
  EXPECT_EQ((*t)->TokenBytes(259), "<0x+F>");
  EXPECT_EQ((*t)->TokenBytes(260), "\xFF");
  EXPECT_EQ((*t)->Decode({257, 256}), "<0xZZ>A");
}

// The crafted base with a Split pre-tokenizer running this pattern before the byte-level step.
std::string WithSplitPattern(const std::string& pattern) {
  json j = json::parse(TokenizerJson());
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return j.dump();
}

TEST(TokenizerHardening, ABacktrackingPreTokenizerRegexFailsInsteadOfHanging) {
  auto t = Tokenizer::FromJson(WithSplitPattern("(a+)+$"));
  ASSERT_TRUE(t.ok()) << t.status();
  // Where the pattern matches at once it splits as usual.
  auto fine = (*t)->TryEncode("xaaa");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(*fine, (std::vector<int32_t>{'x', 'a', 'a', 'a'}));
  // 36 a's then a non-a: 2^36 ways to split the run before the $ fails (hours unlimited).
  const std::string text = std::string(36, 'a') + "!";
  auto ids = (*t)->TryEncode(text);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(ids.status().message());
  EXPECT_NE(msg.find("the pre-tokenizer regex '(a+)+$' hit ICU's time limit"), std::string::npos) << msg;
  EXPECT_TRUE((*t)->Encode(text).empty());
}

TEST(TokenizerHardening, APreTokenizerRegexThatOutgrowsItsStackFails) {
  // A group loop keeps one backtracking frame per character: a 1M-character run outgrows 8 MB.
  auto t = Tokenizer::FromJson(WithSplitPattern("(a|b)+"));
  ASSERT_TRUE(t.ok()) << t.status();
  auto ids = (*t)->TryEncode(std::string(1 << 20, 'a'));
  ASSERT_FALSE(ids.ok());
  const std::string msg(ids.status().message());
  EXPECT_NE(msg.find("the pre-tokenizer regex '(a|b)+' hit ICU's backtracking stack limit (8 MB)"), std::string::npos) << msg;
  // The same loop over a normal piece is fine.
  auto ok = (*t)->TryEncode("abba cab");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*t)->Decode(*ok), "abba cab");
}

TEST(TokenizerHardening, AVocabularyMissingAByteIsRefused) {
  json j = json::parse(TokenizerJson());
  j["model"]["vocab"].erase(ByteChar(0x41));
  j["model"]["vocab"]["zz"] = 0x41;  // keep the ids dense
  EXPECT_NE(LoadError(j.dump()).find("the vocabulary has no token for byte 0x41 (its byte-level character 'A')"),
            std::string::npos)
      << LoadError(j.dump());
  j = json::parse(TokenizerJson());
  j["model"]["vocab"].erase(ByteChar(0x0A));  // '\n' is spelled U+010A
  EXPECT_NE(LoadError(j.dump()).find("no token for byte 0x0a"), std::string::npos) << LoadError(j.dump());
}

// Streams bytes through the decoder one token per byte (ids 0..255 are the bytes).
std::string Stream(const Tokenizer& t, const std::string& bytes, std::vector<std::string>* pieces = nullptr) {
  Tokenizer::StreamDecoder dec(t);
  std::string out;
  for (unsigned char b : bytes) {
    const std::string piece = dec.Push(b);
    if (pieces) pieces->push_back(piece);
    out += piece;
  }
  const std::string rest = dec.Flush();
  if (pieces) pieces->push_back(rest);
  return out + rest;
}

bool StrictJsonAccepts(const std::string& s) {
  try {
    // dump() throws type_error 316 on ill-formed UTF-8, as `run --json` did.
    return json::parse(json(s).dump()).get<std::string>() == s;
  } catch (const json::exception&) {
    return false;
  }
}

TEST(TokenizerHardening, StreamedTextIsAlwaysValidUtf8) {
  auto t = Tokenizer::FromJson(TokenizerJson());
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string R = "\xEF\xBF\xBD";  // U+FFFD
  struct Case {
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {"a\xC3\xA9z", "a\xC3\xA9z"},                          // a 2-byte character split over two tokens
      {"\xE4\xBD\xA0\xF0\x9F\x98\x80", "\xE4\xBD\xA0\xF0\x9F\x98\x80"},  // 3- and 4-byte characters
      {"\xE4\xBD", R},                                       // cut at the end: one U+FFFD from Flush
      {"\xE4" "A", R + "A"},                                 // a lead byte then ASCII
      {"\xF0\x9F\x98" "A\xC3\xA9", R + "A\xC3\xA9"},         // a truncated 4-byte sequence
      {"\x80\xBF", R + R},                                   // stray continuation bytes
      {"\xC0\xAF", R + R},                                   // an overlong encoding
      {"\xED\xA0\x80", R + R + R},                           // a surrogate
      {"\xF4\x90\x80\x80", R + R + R + R},                   // past U+10FFFF
      {"\xFF\xFE" "ok", R + R + "ok"},                       // bytes that never start a sequence
      {"\xE4\xBD\xE4\xBD\xA0", R + "\xE4\xBD\xA0"},          // a cut sequence then a whole one
  };
  for (const Case& c : cases) {
    std::vector<std::string> pieces;
    EXPECT_EQ(Stream(**t, c.in, &pieces), c.out) << ::testing::PrintToString(c.in);
    for (const std::string& p : pieces) EXPECT_TRUE(StrictJsonAccepts(p)) << ::testing::PrintToString(c.in);
  }
  // Every two-byte string, pushed byte by byte, assembles into strictly valid UTF-8.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string in{static_cast<char>(a), static_cast<char>(b)};
      ASSERT_TRUE(StrictJsonAccepts(Stream(**t, in))) << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace oneinfer
