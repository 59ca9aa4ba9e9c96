#include "llm/jinja.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "absl/strings/str_cat.h"

namespace oneinfer::jinja {
namespace {

// Errors unwind the recursive parser and evaluator as an exception and become a Status at the
// two public entry points; nothing else in the library sees them.
struct Error {
  int line;
  std::string message;
};
[[noreturn]] void Throw(int line, std::string message) { throw Error{line, std::move(message)}; }

// ---------------------------------------------------------------------------------------------
// Values: Python's None/bool/int/float/str/list/dict, jinja2's Undefined, and callables.

struct Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
class Evaluator;
using Function = std::function<Value(Evaluator&, CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // the string, or for Undefined a description of what was missing
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> fn;

  static Value Undefined(std::string what) { Value v; v.s = std::move(what); return v; }
  static Value None() { Value v; v.kind = Kind::kNone; return v; }
  static Value Bool(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value Int(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value Float(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
  static Value Str(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }
  static Value MakeList(List x = {}) { Value v; v.kind = Kind::kList; v.list = std::make_shared<List>(std::move(x)); return v; }
  static Value MakeDict(bool is_namespace = false);
  static Value Fn(Function f) { Value v; v.kind = Kind::kFunction; v.fn = std::make_shared<Function>(std::move(f)); return v; }

  bool undefined() const { return kind == Kind::kUndefined; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  double number() const { return kind == Kind::kFloat ? f : kind == Kind::kInt ? static_cast<double>(i) : b ? 1 : 0; }
};

// Insertion-ordered, like a Python dict; chat-template dicts are small.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* Find(const std::string& key) const {
    for (const auto& [k, v] : items) if (k == key) return &v;
    return nullptr;
  }
  void Set(const std::string& key, Value v) {
    for (auto& [k, old] : items) if (k == key) { old = std::move(v); return; }
    items.emplace_back(key, std::move(v));
  }
};
Value Value::MakeDict(bool is_namespace) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>();
  v.dict->is_namespace = is_namespace;
  return v;
}

struct CallArgs {
  List positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The i-th argument given by position or by this name, else `fallback`.
  Value Get(size_t i, const char* name, Value fallback = Value::Undefined("")) const {
    for (const auto& [k, v] : keyword) if (k == name) return v;
    return i < positional.size() ? positional[i] : fallback;
  }
};

// How deeply v nests lists and dicts, counting no further than cap + 1.
int DepthUpTo(const Value& v, int cap) {
  if (cap < 0) return 1;
  int d = 0;
  if (v.kind == Value::Kind::kList) {
    for (const Value& e : *v.list) d = std::max(d, 1 + DepthUpTo(e, cap - 1));
    return std::max(d, 1);
  }
  if (v.kind == Value::Kind::kDict) {
    for (const auto& kv : v.dict->items) d = std::max(d, 1 + DepthUpTo(kv.second, cap - 1));
    return std::max(d, 1);
  }
  return 0;
}

// Values nest at most this deep (template-built or given), so that printing, comparing and
// freeing them cannot exhaust the stack.
constexpr int kMaxValueDepth = 256;

Value FromJson(const nlohmann::ordered_json& j, int depth = 0) {
  if (depth > kMaxValueDepth) throw Error{0, absl::StrCat("a variable nests deeper than ", kMaxValueDepth, " levels")};
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value::Float(static_cast<double>(u)) : Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value v = Value::MakeList();
      for (const auto& e : j) v.list->push_back(FromJson(e, depth + 1));
      return v;
    }
    case nlohmann::ordered_json::value_t::object: {
      Value v = Value::MakeDict();
      for (const auto& [k, e] : j.items()) v.dict->Set(k, FromJson(e, depth + 1));
      return v;
    }
    default: return Value::None();
  }
}

// --- UTF-8 helpers: Python counts, slices and strips code points.
std::vector<uint32_t> Decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}
void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}
std::string Encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end; ++k) AppendUtf8(out, cps[k]);
  return out;
}
// Python's str.isspace() set.
bool IsSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
// str.strip/lstrip/rstrip: whitespace, or the code points of `chars`.
std::string Strip(const std::string& s, bool left, bool right, const std::string* chars = nullptr) {
  const std::vector<uint32_t> cps = Decode(s);
  std::vector<uint32_t> set;
  if (chars) set = Decode(*chars);
  auto strip = [&](uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsSpace(c); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip(cps[b])) ++b;
  if (right) while (e > b && strip(cps[e - 1])) --e;
  return Encode(cps, b, e);
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // shortest round-trip digits: "-1.2345e+02"
  const size_t epos = sci.find('e');
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string mant = sci.substr(0, epos);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) if (c != '.') digits += c;
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {  // Python's repr: fixed notation for 1e-4 <= |d| < 1e16
    if (exp >= 0) {
      if (digits.size() <= static_cast<size_t>(exp) + 1) digits.append(exp + 1 - digits.size(), '0');
      out = digits.substr(0, exp + 1) + "." + (digits.size() > static_cast<size_t>(exp) + 1 ? digits.substr(exp + 1) : "0");
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") + (exp < 0 ? "e-" : "e+") +
          (std::abs(exp) < 10 ? "0" : "") + std::to_string(std::abs(exp));
  }
  return neg ? "-" + out : out;
}

std::string Repr(const Value& v);
// Python's str(): what {{ }} prints.
std::string Str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.i);
    case Value::Kind::kFloat: return FloatRepr(v.f);
    case Value::Kind::kString: return v.s;
    default: return Repr(v);
  }
}
std::string Repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: {
      const bool dq = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos;
      const char q = dq ? '"' : '\'';
      std::string out(1, q);
      for (unsigned char c : v.s) {
        if (c == '\\') out += "\\\\";
        else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7F) { char b[8]; snprintf(b, sizeof b, "\\x%02x", c); out += b; }
        else out += static_cast<char>(c);
      }
      return out + q;
    }
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + Repr((*v.list)[k]);
      return out + "]";
    }
    case Value::Kind::kDict: {
      if (v.dict->is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.dict->items) {
        out += (first ? "" : ", ") + Repr(Value::Str(k)) + ": " + Repr(e);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::kFunction: return "<function>";
    default: return Str(v);
  }
}

std::string TypeName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.dict->is_namespace ? "Namespace" : "dict";
    case Value::Kind::kFunction: return "function";
  }
  return "?";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.b;
    case Value::Kind::kInt: return v.i != 0;
    case Value::Kind::kFloat: return v.f != 0;
    case Value::Kind::kString: return !v.s.empty();
    case Value::Kind::kList: return !v.list->empty();
    case Value::Kind::kDict: return v.dict->is_namespace || !v.dict->items.empty();
    case Value::Kind::kFunction: return true;
  }
  return false;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) return a.number() == b.number() && (a.kind == Value::Kind::kInt ? a.i : a.b) == (b.kind == Value::Kind::kInt ? b.i : b.b);
    return a.number() == b.number();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) if (!Equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::kDict:
      if (a.dict == b.dict) return true;
      if (a.dict->is_namespace || b.dict->is_namespace || a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->Find(k);
        if (!o || !Equal(v, *o)) return false;
      }
      return true;
    case Value::Kind::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) as transformers' tojson calls it.
struct JsonStyle {
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string indent;  // used when has_indent
  bool has_indent = false;
  std::string item_sep = ", ", key_sep = ": ";
};
void JsonString(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (uint32_t c : Decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char b[16];
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const uint32_t v = c - 0x10000;
            snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            snprintf(b, sizeof b, "\\u%04x", c);
          }
          out += b;
        } else {
          AppendUtf8(out, c);
        }
      }
    }
  }
  out += '"';
}
void Json(const Value& v, const JsonStyle& st, int depth, std::string& out) {
  auto newline = [&](int d) {
    if (!st.has_indent) return;
    out += '\n';
    for (int k = 0; k < d; ++k) out += st.indent;
  };
  switch (v.kind) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity") : FloatRepr(v.f);
      return;
    case Value::Kind::kString: JsonString(v.s, st.ensure_ascii, out); return;
    case Value::Kind::kList: {
      if (v.list->empty()) { out += "[]"; return; }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += st.item_sep;
        newline(depth + 1);
        Json((*v.list)[k], st, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (!v.dict->is_namespace) {
        if (v.dict->items.empty()) { out += "{}"; return; }
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.dict->items) items.push_back(&kv);
        if (st.sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += st.item_sep;
          newline(depth + 1);
          JsonString(items[k]->first, st.ensure_ascii, out);
          out += st.key_sep;
          Json(items[k]->second, st, depth + 1, out);
        }
        newline(depth);
        out += '}';
        return;
      }
      break;
    }
    default: break;
  }
  throw Error{0, absl::StrCat("Object of type ", TypeName(v), " is not JSON serializable")};
}

// ---------------------------------------------------------------------------------------------
// Lexer: the source becomes text pieces and tags; a tag's inside becomes tokens.

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd };
  Type type = Type::kEnd;
  std::string text;
  int64_t i = 0;
  double f = 0;
  int line = 1;
};

struct Piece {
  enum class Kind { kText, kOutput, kStatement };
  Kind kind;
  std::string text;  // kText
  std::vector<Token> tokens;  // tags, ending with kEnd
  int line;
};

bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python's rstrip() / the \s* that follows a '-' tag end (Unicode whitespace).
std::string RStripSpace(const std::string& s) { return Strip(s, false, true); }
size_t SkipSpace(const std::string& s, size_t p) {
  while (p < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[p]);
    if (c < 0x80) {
      if (!IsSpace(c)) break;
      ++p;
      continue;
    }
    const std::vector<uint32_t> cp = Decode(s.substr(p, 4));
    if (cp.empty() || !IsSpace(cp[0])) break;
    std::string enc;
    AppendUtf8(enc, cp[0]);
    p += enc.size();
  }
  return p;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) {
    // jinja2 normalises \r\n and \r to \n and drops one trailing newline.
    for (size_t k = 0; k < src.size(); ++k) {
      if (src[k] == '\r') {
        src_ += '\n';
        if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
      } else {
        src_ += src[k];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Piece> Run() {
    std::vector<Piece> pieces;
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t open = src_.find('{', pos);
      while (open != std::string::npos && open + 1 < src_.size() && src_[open + 1] != '{' && src_[open + 1] != '%' &&
             src_[open + 1] != '#') {
        open = src_.find('{', open + 1);
      }
      if (open == std::string::npos || open + 1 >= src_.size()) {
        AddText(pieces, src_.substr(pos));
        break;
      }
      const char kind = src_[open + 1];
      std::string text = src_.substr(pos, open - pos);
      const char sign = open + 2 < src_.size() ? src_[open + 2] : 0;
      if (sign == '-') {
        text = RStripSpace(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 || line_starting) {
          if (text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
        }
      }
      const int text_line = line_;
      AddText(pieces, text);
      line_ = text_line + static_cast<int>(std::count(src_.begin() + pos, src_.begin() + open, '\n'));
      size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      size_t end = 0;
      if (kind == '#') {
        const size_t close = src_.find("#}", p);
        if (close == std::string::npos) Throw(line_, "unterminated comment");
        end = close + 2;
        if (close > p && src_[close - 1] == '-') end = SkipSpace(src_, end);
        else if (!(close > p && src_[close - 1] == '+') && end < src_.size() && src_[end] == '\n') ++end;
      } else if (kind == '%' && IsRaw(p)) {
        end = LexRaw(pieces, open, p);
      } else {
        Piece piece{kind == '{' ? Piece::Kind::kOutput : Piece::Kind::kStatement, "", {}, line_};
        end = LexTag(p, kind == '{' ? "}}" : "%}", piece.tokens);
        pieces.push_back(std::move(piece));
      }
      line_starting = end > 0 && src_[end - 1] == '\n';
      line_ += static_cast<int>(std::count(src_.begin() + std::min(end, p), src_.begin() + end, '\n'));
      pos = end;
    }
    return pieces;
  }

 private:
  void AddText(std::vector<Piece>& pieces, const std::string& text) {
    if (!text.empty()) pieces.push_back({Piece::Kind::kText, text, {}, line_});
  }

  // Whether the source holds `lit` at q; false past its end (std::string::compare would throw).
  bool At(size_t q, std::string_view lit) const {
    return q <= src_.size() && std::string_view(src_).substr(q, lit.size()) == lit;
  }

  bool IsRaw(size_t p) const {
    size_t q = SkipSpace(src_, p);
    if (!At(q, "raw")) return false;
    q = SkipSpace(src_, q + 3);
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
    return At(q, "%}");
  }
  // {% raw %}...{% endraw %}: the text between, verbatim (with the tags' whitespace control).
  size_t LexRaw(std::vector<Piece>& pieces, size_t open, size_t p) {
    size_t q = src_.find("%}", p);
    const bool strip_after_open = src_[q - 1] == '-';
    size_t body = q + 2;
    if (strip_after_open) body = SkipSpace(src_, body);
    else if (src_[q - 1] != '+' && body < src_.size() && src_[body] == '\n') ++body;
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t r = s + 2;
      const char sign = r < src_.size() ? src_[r] : 0;
      if (sign == '-' || sign == '+') ++r;
      r = SkipSpace(src_, r);
      if (!At(r, "endraw")) continue;
      r = SkipSpace(src_, r + 6);
      const char end_sign = r < src_.size() ? src_[r] : 0;
      if (end_sign == '-' || end_sign == '+') ++r;
      if (!At(r, "%}")) continue;
      std::string text = src_.substr(body, s - body);
      if (sign == '-') text = RStripSpace(text);
      pieces.push_back({Piece::Kind::kText, text, {}, line_});
      size_t end = r + 2;
      if (end_sign == '-') end = SkipSpace(src_, end);
      else if (end_sign != '+' && end < src_.size() && src_[end] == '\n') ++end;
      (void)open;
      return end;
    }
    Throw(line_, "unterminated raw block (no {% endraw %})");
  }

  // Tokens up to the closing "}}" / "%}" (outside brackets); returns the position after it and
  // after the whitespace its '-' strips or the newline trim_blocks removes.
  size_t LexTag(size_t p, const char* closer, std::vector<Token>& tokens) {
    int depth = 0;
    int line = line_;
    const bool block = closer[0] == '%';
    while (true) {
      while (p < src_.size() && IsAsciiSpace(src_[p])) {
        if (src_[p] == '\n') ++line;
        ++p;
      }
      if (p >= src_.size()) Throw(line_, absl::StrCat("unterminated tag: expected '", closer, "'"));
      if (depth == 0) {
        if ((src_[p] == '-' || (block && src_[p] == '+')) && At(p + 1, closer)) {
          tokens.push_back({Token::Type::kEnd, "", 0, 0, line});
          size_t end = p + 3;
          if (src_[p] == '-') end = SkipSpace(src_, end);
          return end;
        }
        if (At(p, closer)) {
          tokens.push_back({Token::Type::kEnd, "", 0, 0, line});
          size_t end = p + 2;
          if (block && end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
          return end;
        }
      }
      Token t;
      t.line = line;
      const char c = src_[p];
      if (IsNameStart(c)) {
        size_t q = p;
        while (q < src_.size() && IsNameChar(src_[q])) ++q;
        t.type = Token::Type::kName;
        t.text = src_.substr(p, q - p);
        p = q;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t q = p;
        while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        bool is_float = false;
        if (q + 1 < src_.size() && src_[q] == '.' && std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
          is_float = true;
          ++q;
          while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        }
        if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
          size_t r = q + 1;
          if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
          if (r < src_.size() && std::isdigit(static_cast<unsigned char>(src_[r]))) {
            is_float = true;
            q = r;
            while (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) ++q;
          }
        }
        std::string num;
        for (size_t k = p; k < q; ++k) if (src_[k] != '_') num += src_[k];
        t.text = num;
        if (is_float) {
          t.type = Token::Type::kFloat;
          t.f = std::strtod(num.c_str(), nullptr);
        } else {
          t.type = Token::Type::kInt;
          errno = 0;
          t.i = std::strtoll(num.c_str(), nullptr, 10);
          if (errno == ERANGE) Throw(line, absl::StrCat("integer literal ", num, " is too large"));
        }
        p = q;
      } else if (c == '\'' || c == '"') {
        t.type = Token::Type::kString;
        p = LexString(p, line, t.text);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "=", ".", ",", ":", "|", "(", ")", "[", "]", "{", "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (At(p, o)) { op = o; break; }
        }
        if (!op) Throw(line, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        t.type = Token::Type::kOp;
        t.text = op;
        p += t.text.size();
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if (t.text == ")" || t.text == "]" || t.text == "}") {
          if (depth == 0) Throw(line, absl::StrCat("unexpected '", t.text, "'"));
          --depth;
        }
      }
      tokens.push_back(std::move(t));
      if (tokens.size() > 5000) Throw(line, "a tag holds more than 5000 tokens");
    }
  }

  // A quoted literal with Python's escapes; returns the position after the closing quote.
  size_t LexString(size_t p, int& line, std::string& out) {
    const char q = src_[p++];
    while (p < src_.size() && src_[p] != q) {
      char c = src_[p];
      if (c == '\n') ++line;
      if (c != '\\' || p + 1 >= src_.size()) {
        out += c;
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': ++line; break;
        case 'x': case 'u': case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (p + n > src_.size()) Throw(line, "truncated \\x/\\u escape in a string literal");
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const char h = src_[p + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) Throw(line, "bad \\x/\\u escape in a string literal");
            cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF) Throw(line, "\\U escape beyond U+10FFFF");
          AppendUtf8(out, cp);
          p += n;
          break;
        }
        default: out += '\\'; out += e;
      }
    }
    if (p >= src_.size()) Throw(line, "unterminated string literal");
    return p + 1;
  }

  std::string src_;
  int line_ = 1;
};

// ---------------------------------------------------------------------------------------------
// AST.

struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum class Kind { kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kAnd, kOr,
                    kNot, kCompare, kCond, kList, kDict };
  Kind kind;
  int line;
  Value literal;
  std::string name;               // name, attribute, filter, test, unary/binary operator
  std::vector<ExprP> args;        // operands, call arguments, elements (dict: key, value, ...)
  std::vector<std::pair<std::string, ExprP>> kwargs;
  std::vector<std::string> ops;   // kCompare: one operator between each pair of args
  bool negated = false;           // kTest: "is not"
};

struct Stmt;
using Body = std::vector<std::shared_ptr<Stmt>>;
struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBlock };
  Kind kind;
  int line;
  std::string text;                 // kText; kSet/kSetBlock/kMacro: the name
  std::string attr;                 // kSet: namespace attribute (set ns.attr = ...)
  ExprP expr;                       // kOutput, kSet, kFor (iterable)
  std::vector<std::pair<ExprP, Body>> branches;  // kIf (if/elif)
  Body body, else_body;
  std::vector<std::string> targets; // kFor
  ExprP filter;                     // kFor: "for x in xs if cond"
  std::vector<std::pair<std::string, ExprP>> params;  // kMacro (default may be null)
};

std::shared_ptr<Stmt> NewStmt(Stmt::Kind kind, int line) {
  auto s = std::make_shared<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

}  // namespace

struct Template::Node {
  Body body;
};

namespace {

// ---------------------------------------------------------------------------------------------
// Parser: pieces to statements; each tag's tokens by recursive descent in jinja2's precedence.

class Parser {
 public:
  explicit Parser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  static constexpr int kMaxNesting = 200;

  // Statements until a tag whose keyword is in `ends` (left as the current tag, keyword in *end).
  Body ParseBody(const std::vector<std::string>& ends, std::string* end) {
    if (++nesting_ > kMaxNesting) Throw(CurrentLine(), "blocks nested too deeply");
    Body body;
    while (piece_ < pieces_.size()) {
      Piece& p = pieces_[piece_];
      if (p.kind == Piece::Kind::kText) {
        auto s = NewStmt(Stmt::Kind::kText, p.line);
        s->text = p.text;
        body.push_back(s);
        ++piece_;
        continue;
      }
      tokens_ = &p.tokens;
      tok_ = 0;
      if (p.kind == Piece::Kind::kOutput) {
        auto s = NewStmt(Stmt::Kind::kOutput, p.line);
        s->expr = ParseExpression();
        ExpectEnd();
        body.push_back(s);
        ++piece_;
        continue;
      }
      const Token& kw = Peek();
      if (kw.type != Token::Type::kName) Throw(kw.line, "expected a statement keyword after '{%'");
      if (std::find(ends.begin(), ends.end(), kw.text) != ends.end()) {
        *end = kw.text;
        --nesting_;
        return body;
      }
      body.push_back(ParseStatement());
    }
    if (!ends.empty()) {
      Throw(pieces_.empty() ? 1 : pieces_.back().line, absl::StrCat("unexpected end of template: expected '{% ", ends.back(), " %}'"));
    }
    --nesting_;
    return body;
  }

  int CurrentLine() const { return piece_ < pieces_.size() ? pieces_[piece_].line : 1; }

  // Moves to the tag after the current one and makes its tokens current (they start with `kw`).
  void NextTag() { ++piece_; }
  void EnterTag(const std::string& keyword) {
    tokens_ = &pieces_[piece_].tokens;
    tok_ = 0;
    ExpectName(keyword);
  }

  std::shared_ptr<Stmt> ParseStatement() {
    const Token kw = Next();
    const int line = kw.line;
    std::string end;
    if (kw.text == "if") {
      auto s = NewStmt(Stmt::Kind::kIf, line);
      ExprP cond = ParseExpression();
      ExpectEnd();
      NextTag();
      while (true) {
        Body b = ParseBody({"elif", "else", "endif"}, &end);
        s->branches.emplace_back(cond, std::move(b));
        EnterTag(end);
        if (end == "elif") {
          cond = ParseExpression();
          ExpectEnd();
          NextTag();
          continue;
        }
        if (end == "else") {
          ExpectEnd();
          NextTag();
          s->else_body = ParseBody({"endif"}, &end);
          EnterTag(end);
        }
        break;
      }
      ExpectEnd();
      NextTag();
      return s;
    }
    if (kw.text == "for") {
      auto s = NewStmt(Stmt::Kind::kFor, line);
      do {
        s->targets.push_back(ExpectNameToken().text);
      } while (AcceptOp(","));
      ExpectName("in");
      s->expr = ParseOr();
      if (AcceptName("if")) s->filter = ParseExpression();
      if (Peek().type == Token::Type::kName && Peek().text == "recursive") Throw(line, "recursive loops are not supported");
      ExpectEnd();
      NextTag();
      ++loop_depth_;
      s->body = ParseBody({"else", "endfor"}, &end);
      --loop_depth_;
      EnterTag(end);
      if (end == "else") {
        ExpectEnd();
        NextTag();
        s->else_body = ParseBody({"endfor"}, &end);
        EnterTag(end);
      }
      ExpectEnd();
      NextTag();
      return s;
    }
    if (kw.text == "set") {
      const std::string name = ExpectNameToken().text;
      std::string attr;
      if (AcceptOp(".")) attr = ExpectNameToken().text;
      if (AcceptOp("=")) {
        auto s = NewStmt(Stmt::Kind::kSet, line);
        s->text = name;
        s->attr = attr;
        s->expr = ParseExpression();
        if (Peek().type == Token::Type::kOp && Peek().text == ",") Throw(line, "tuple assignment in set is not supported");
        ExpectEnd();
        NextTag();
        return s;
      }
      if (!attr.empty()) Throw(line, "a set block cannot assign a namespace attribute");
      auto s = NewStmt(Stmt::Kind::kSetBlock, line);
      s->text = name;
      if (Peek().type == Token::Type::kOp && Peek().text == "|") Throw(line, "filters on set blocks are not supported");
      ExpectEnd();
      NextTag();
      s->body = ParseBody({"endset"}, &end);
      EnterTag(end);
      ExpectEnd();
      NextTag();
      return s;
    }
    if (kw.text == "macro") {
      auto s = NewStmt(Stmt::Kind::kMacro, line);
      s->text = ExpectNameToken().text;
      ExpectOp("(");
      if (!AcceptOp(")")) {
        do {
          std::string p = ExpectNameToken().text;
          ExprP def;
          if (AcceptOp("=")) def = ParseExpression();
          s->params.emplace_back(p, def);
        } while (AcceptOp(","));
        ExpectOp(")");
      }
      ExpectEnd();
      NextTag();
      s->body = ParseBody({"endmacro"}, &end);
      EnterTag(end);
      if (Peek().type == Token::Type::kName) Next();
      ExpectEnd();
      NextTag();
      return s;
    }
    if (kw.text == "break" || kw.text == "continue") {
      if (loop_depth_ == 0) Throw(line, absl::StrCat("'", kw.text, "' outside a loop"));
      auto s = NewStmt(kw.text == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
      ExpectEnd();
      NextTag();
      return s;
    }
    if (kw.text == "generation") {
      auto s = NewStmt(Stmt::Kind::kBlock, line);
      ExpectEnd();
      NextTag();
      s->body = ParseBody({"endgeneration"}, &end);
      EnterTag(end);
      ExpectEnd();
      NextTag();
      return s;
    }
    Throw(line, absl::StrCat("unknown or unsupported statement '", kw.text, "'"));
  }

  // --- tokens
  const Token& Peek(size_t ahead = 0) const {
    const size_t k = std::min(tok_ + ahead, tokens_->size() - 1);
    return (*tokens_)[k];
  }
  Token Next() {
    Token t = Peek();
    if (tok_ < tokens_->size() - 1) ++tok_;
    return t;
  }
  bool IsOp(const char* op) const { return Peek().type == Token::Type::kOp && Peek().text == op; }
  bool AcceptOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(const char* name) {
    if (Peek().type != Token::Type::kName || Peek().text != name) return false;
    Next();
    return true;
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Token::Type::kEnd: return "end of tag";
      case Token::Type::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  void ExpectOp(const char* op) {
    if (!AcceptOp(op)) Throw(Peek().line, absl::StrCat("expected '", op, "', got ", Describe(Peek())));
  }
  void ExpectName(const std::string& name) {
    if (Peek().type != Token::Type::kName || Peek().text != name) {
      Throw(Peek().line, absl::StrCat("expected '", name, "', got ", Describe(Peek())));
    }
    Next();
  }
  Token ExpectNameToken() {
    if (Peek().type != Token::Type::kName) Throw(Peek().line, absl::StrCat("expected a name, got ", Describe(Peek())));
    return Next();
  }
  void ExpectEnd() {
    if (Peek().type != Token::Type::kEnd) Throw(Peek().line, absl::StrCat("expected end of tag, got ", Describe(Peek())));
  }

  ExprP Make(Expr::Kind kind, int line) {
    if (++expr_count_ > 1'000'000) Throw(line, "template too large");
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.expr_depth_ > kMaxNesting) Throw(p.Peek().line, "expression nested too deeply");
    }
    ~DepthGuard() { --p.expr_depth_; }
  };

  // --- expressions (jinja2.parser: condexpr > or > and > not > compare > + - > ~ > * / // % > ** > unary)
  ExprP ParseExpression() {
    DepthGuard guard(*this);
    ExprP e = ParseOr();
    while (Peek().type == Token::Type::kName && Peek().text == "if") {
      const int line = Next().line;
      ExprP c = Make(Expr::Kind::kCond, line);
      ExprP cond = ParseOr();
      ExprP other;
      if (AcceptName("else")) other = ParseExpression();
      c->args = {cond, e, other};
      e = c;
    }
    return e;
  }
  ExprP ParseOr() {
    ExprP e = ParseAnd();
    while (Peek().type == Token::Type::kName && Peek().text == "or") {
      ExprP o = Make(Expr::Kind::kOr, Next().line);
      o->args = {e, ParseAnd()};
      e = o;
    }
    return e;
  }
  ExprP ParseAnd() {
    ExprP e = ParseNot();
    while (Peek().type == Token::Type::kName && Peek().text == "and") {
      ExprP o = Make(Expr::Kind::kAnd, Next().line);
      o->args = {e, ParseNot()};
      e = o;
    }
    return e;
  }
  ExprP ParseNot() {
    DepthGuard guard(*this);
    if (Peek().type == Token::Type::kName && Peek().text == "not") {
      ExprP n = Make(Expr::Kind::kNot, Next().line);
      n->args = {ParseNot()};
      return n;
    }
    return ParseCompare();
  }
  ExprP ParseCompare() {
    ExprP first = ParseMath1();
    ExprP cmp;
    while (true) {
      std::string op;
      const Token& t = Peek();
      if (t.type == Token::Type::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                          t.text == "<=" || t.text == ">=")) {
        op = t.text;
        Next();
      } else if (t.type == Token::Type::kName && t.text == "in") {
        op = "in";
        Next();
      } else if (t.type == Token::Type::kName && t.text == "not" && Peek(1).type == Token::Type::kName && Peek(1).text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::Kind::kCompare, t.line);
        cmp->args.push_back(first);
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? cmp : first;
  }
  ExprP Binary(const std::string& op, int line, ExprP a, ExprP b) {
    ExprP e = Make(Expr::Kind::kBinary, line);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprP ParseMath1() {
    ExprP e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token t = Next();
      e = Binary(t.text, t.line, e, ParseConcat());
    }
    return e;
  }
  ExprP ParseConcat() {
    ExprP e = ParseMath2();
    while (IsOp("~")) {
      const Token t = Next();
      e = Binary("~", t.line, e, ParseMath2());
    }
    return e;
  }
  ExprP ParseMath2() {
    ExprP e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token t = Next();
      e = Binary(t.text, t.line, e, ParsePow());
    }
    return e;
  }
  ExprP ParsePow() {
    ExprP e = ParseUnary(true);
    while (IsOp("**")) {
      const Token t = Next();
      e = Binary("**", t.line, e, ParseUnary(true));
    }
    return e;
  }
  ExprP ParseUnary(bool with_filter) {
    DepthGuard guard(*this);
    ExprP e;
    if (IsOp("-") || IsOp("+")) {
      const Token t = Next();
      e = Make(Expr::Kind::kUnary, t.line);
      e->name = t.text;
      e->args = {ParseUnary(false)};
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(e);
    if (with_filter) e = ParseFilterExpr(e);
    return e;
  }
  ExprP ParsePrimary() {
    const Token t = Next();
    switch (t.type) {
      case Token::Type::kName: {
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          ExprP e = Make(Expr::Kind::kLiteral, t.line);
          e->literal = Value::Bool(t.text[0] == 't' || t.text[0] == 'T');
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          ExprP e = Make(Expr::Kind::kLiteral, t.line);
          e->literal = Value::None();
          return e;
        }
        ExprP e = Make(Expr::Kind::kName, t.line);
        e->name = t.text;
        return e;
      }
      case Token::Type::kString: {
        std::string s = t.text;
        while (Peek().type == Token::Type::kString) s += Next().text;  // adjacent literals join
        ExprP e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = Value::Str(s);
        return e;
      }
      case Token::Type::kInt: {
        ExprP e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = Value::Int(t.i);
        return e;
      }
      case Token::Type::kFloat: {
        ExprP e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = Value::Float(t.f);
        return e;
      }
      case Token::Type::kOp:
        if (t.text == "(") {
          if (AcceptOp(")")) return Make(Expr::Kind::kList, t.line);  // () is an empty tuple
          ExprP e = ParseExpression();
          if (IsOp(",")) {
            ExprP tuple = Make(Expr::Kind::kList, t.line);
            tuple->args.push_back(e);
            while (AcceptOp(",")) {
              if (IsOp(")")) break;
              tuple->args.push_back(ParseExpression());
            }
            e = tuple;
          }
          ExpectOp(")");
          return e;
        }
        if (t.text == "[") {
          ExprP e = Make(Expr::Kind::kList, t.line);
          while (!IsOp("]")) {
            e->args.push_back(ParseExpression());
            if (!AcceptOp(",")) break;
          }
          ExpectOp("]");
          return e;
        }
        if (t.text == "{") {
          ExprP e = Make(Expr::Kind::kDict, t.line);
          while (!IsOp("}")) {
            e->args.push_back(ParseExpression());
            ExpectOp(":");
            e->args.push_back(ParseExpression());
            if (!AcceptOp(",")) break;
          }
          ExpectOp("}");
          return e;
        }
        break;
      default: break;
    }
    Throw(t.line, absl::StrCat("unexpected ", Describe(t)));
  }
  void ParseCallArgs(ExprP& e) {
    // after "(": positional and name=value arguments
    while (!IsOp(")")) {
      if (Peek().type == Token::Type::kName && Peek(1).type == Token::Type::kOp && Peek(1).text == "=") {
        const std::string name = Next().text;
        Next();
        e->kwargs.emplace_back(name, ParseExpression());
      } else {
        if (!e->kwargs.empty()) Throw(Peek().line, "a positional argument follows a keyword argument");
        if (IsOp("*")) Throw(Peek().line, "*args in calls is not supported");
        e->args.push_back(ParseExpression());
      }
      if (!AcceptOp(",")) break;
    }
    ExpectOp(")");
  }
  ExprP ParsePostfix(ExprP e) {
    while (true) {
      if (IsOp(".")) {
        const int line = Next().line;
        const Token name = Next();
        if (name.type == Token::Type::kName) {
          ExprP a = Make(Expr::Kind::kAttr, line);
          a->name = name.text;
          a->args = {e};
          e = a;
        } else if (name.type == Token::Type::kInt) {
          ExprP a = Make(Expr::Kind::kItem, line);
          ExprP idx = Make(Expr::Kind::kLiteral, line);
          idx->literal = Value::Int(name.i);
          a->args = {e, idx};
          e = a;
        } else {
          Throw(line, "expected an attribute name after '.'");
        }
      } else if (IsOp("[")) {
        const int line = Next().line;
        ExprP start, stop, step;
        bool slice = false;
        if (!IsOp(":")) start = ParseExpression();
        if (AcceptOp(":")) {
          slice = true;
          if (!IsOp("]") && !IsOp(":")) stop = ParseExpression();
          if (AcceptOp(":") && !IsOp("]")) step = ParseExpression();
        }
        ExpectOp("]");
        ExprP a = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem, line);
        a->args = slice ? std::vector<ExprP>{e, start, stop, step} : std::vector<ExprP>{e, start};
        e = a;
      } else if (IsOp("(")) {
        const int line = Next().line;
        ExprP c = Make(Expr::Kind::kCall, line);
        c->args.push_back(e);
        ParseCallArgs(c);
        e = c;
      } else {
        return e;
      }
    }
  }
  ExprP ParseFilterExpr(ExprP e) {
    while (true) {
      if (IsOp("|")) {
        const int line = Next().line;
        ExprP f = Make(Expr::Kind::kFilter, line);
        f->name = ExpectNameToken().text;
        while (AcceptOp(".")) f->name += "." + ExpectNameToken().text;
        f->args.push_back(e);
        if (AcceptOp("(")) ParseCallArgs(f);
        e = f;
      } else if (Peek().type == Token::Type::kName && Peek().text == "is") {
        const int line = Next().line;
        ExprP t = Make(Expr::Kind::kTest, line);
        t->negated = AcceptName("not");
        t->name = ExpectNameToken().text;
        while (AcceptOp(".")) t->name += "." + ExpectNameToken().text;
        t->args.push_back(e);
        if (AcceptOp("(")) {
          ParseCallArgs(t);
        } else {
          const Token& n = Peek();
          const bool arg = n.type == Token::Type::kString || n.type == Token::Type::kInt || n.type == Token::Type::kFloat ||
                           (n.type == Token::Type::kOp && (n.text == "[" || n.text == "{")) ||
                           (n.type == Token::Type::kName && n.text != "else" && n.text != "or" && n.text != "and" &&
                            n.text != "if" && n.text != "is" && n.text != "in" && n.text != "not");
          if (arg) t->args.push_back(ParsePostfix(ParsePrimary()));
        }
        e = t;
      } else if (IsOp("(")) {
        const int line = Next().line;
        ExprP c = Make(Expr::Kind::kCall, line);
        c->args.push_back(e);
        ParseCallArgs(c);
        e = c;
      } else {
        return e;
      }
    }
  }

  std::vector<Piece> pieces_;
  size_t piece_ = 0;
  const std::vector<Token>* tokens_ = nullptr;
  size_t tok_ = 0;
  int nesting_ = 0;
  int expr_depth_ = 0;
  int64_t expr_count_ = 0;
  int loop_depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluator.

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

// Python's full Unicode case mappings (str.lower/upper: "ß".upper() == "SS").
std::string CaseMap(const std::string& s, bool upper) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  if (upper) u.toUpper(icu::Locale::getRoot());
  else u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}
std::string Lower(const std::string& s) { return CaseMap(s, false); }
std::string Upper(const std::string& s) { return CaseMap(s, true); }
// Python's \w: letters, digits and the underscore.
bool IsWordChar(uint32_t c) { return c == '_' || u_isalnum(static_cast<UChar32>(c)); }

class Evaluator {
 public:
  Evaluator(const Limits& limits, std::string& out) : limits_(limits), out_(out) {}

  int line = 1;
  Scope* root_scope = nullptr;

  [[noreturn]] void Fail(std::string message) const { Throw(line, std::move(message)); }

  void Count(int64_t n = 1) {
    iterations_ += n;
    if (iterations_ > limits_.max_iterations) Fail(absl::StrCat("the template ran more than ", limits_.max_iterations, " loop iterations"));
  }
  // Refuses a value that nests too deeply (built by a template, e.g. in a loop).
  const Value& Shallow(const Value& v) {
    if (v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict) {
      if (DepthUpTo(v, kMaxValueDepth) > kMaxValueDepth) Fail(absl::StrCat("a value nests deeper than ", kMaxValueDepth, " levels"));
    }
    return v;
  }
  void Emit(const std::string& s) {
    if (static_cast<int64_t>(out_.size() + s.size()) > limits_.max_output_bytes) {
      Fail(absl::StrCat("the output exceeds ", limits_.max_output_bytes, " bytes"));
    }
    out_ += s;
  }

  Flow Exec(const Body& body, Scope& scope) {
    for (const auto& s : body) {
      const Flow f = Exec(*s, scope);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow Exec(const Stmt& s, Scope& scope) {
    line = s.line;
    switch (s.kind) {
      case Stmt::Kind::kText: Emit(s.text); return Flow::kNormal;
      case Stmt::Kind::kOutput: Emit(Str(Eval(*s.expr, scope))); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (Truthy(Eval(*cond, scope))) return Exec(body, scope);
        }
        return Exec(s.else_body, scope);
      case Stmt::Kind::kFor: return ExecFor(s, scope);
      case Stmt::Kind::kSet: {
        Value v = Eval(*s.expr, scope);
        Shallow(v);
        if (s.attr.empty()) {
          scope.vars[s.text] = std::move(v);
          return Flow::kNormal;
        }
        const Value* ns = scope.Find(s.text);
        line = s.line;
        if (!ns || ns->kind != Value::Kind::kDict || !ns->dict->is_namespace) {
          Fail(absl::StrCat("cannot assign attribute on non-namespace object '", s.text, "'"));
        }
        ns->dict->Set(s.attr, std::move(v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Capture(s.body, scope, &captured);
        scope.vars[s.text] = Value::Str(std::move(captured));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: {
        const Stmt* macro = &s;
        // Macros see the template's top level (which outlives every call), not the loop they sit in.
        Scope* defining = root_scope ? root_scope : &scope;
        scope.vars[s.text] = Value::Fn([macro, defining](Evaluator& ev, CallArgs& args) { return ev.CallMacro(*macro, *defining, args); });
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kBlock: return Exec(s.body, scope);
    }
    return Flow::kNormal;
  }

  // Renders a body into *captured instead of the output.
  void Capture(const Body& body, Scope& scope, std::string* captured) {
    const size_t mark = out_.size();
    Exec(body, scope);
    *captured = out_.substr(mark);
    out_.resize(mark);
  }

  Value CallMacro(const Stmt& m, Scope& defining, CallArgs& args) {
    if (++call_depth_ > limits_.max_call_depth) Fail(absl::StrCat("macro calls nested deeper than ", limits_.max_call_depth));
    Scope local;
    local.parent = &defining;
    if (args.positional.size() > m.params.size()) Fail(absl::StrCat("macro '", m.text, "' takes ", m.params.size(), " arguments, got ", args.positional.size()));
    for (size_t k = 0; k < m.params.size(); ++k) {
      const auto& [name, def] = m.params[k];
      if (k < args.positional.size()) {
        local.vars[name] = args.positional[k];
        continue;
      }
      bool found = false;
      for (const auto& [kn, kv] : args.keyword) {
        if (kn == name) { local.vars[name] = kv; found = true; }
      }
      if (!found) local.vars[name] = def ? Eval(*def, local) : Value::Undefined(absl::StrCat("'", name, "' is undefined"));
    }
    for (const auto& [kn, kv] : args.keyword) {
      bool known = false;
      for (const auto& p : m.params) known |= p.first == kn;
      if (!known) Fail(absl::StrCat("macro '", m.text, "' takes no keyword argument '", kn, "'"));
    }
    std::string captured;
    Capture(m.body, local, &captured);
    --call_depth_;
    return Value::Str(std::move(captured));
  }

  // The items a for loop or a filter walks: list elements, dict keys, string characters.
  List Iterate(const Value& v) {
    switch (v.kind) {
      case Value::Kind::kUndefined: return {};
      case Value::Kind::kList: return *v.list;
      case Value::Kind::kDict: {
        if (v.dict->is_namespace) break;
        List keys;
        for (const auto& kv : v.dict->items) keys.push_back(Value::Str(kv.first));
        return keys;
      }
      case Value::Kind::kString: {
        List chars;
        for (uint32_t c : Decode(v.s)) {
          std::string ch;
          AppendUtf8(ch, c);
          chars.push_back(Value::Str(ch));
        }
        return chars;
      }
      default: break;
    }
    Fail(absl::StrCat("'", TypeName(v), "' object is not iterable"));
  }

  Flow ExecFor(const Stmt& s, Scope& scope) {
    List items = Iterate(Eval(*s.expr, scope));
    if (s.filter) {
      List kept;
      for (Value& item : items) {
        Count();
        Scope probe;
        probe.parent = &scope;
        Bind(s, item, probe);
        if (Truthy(Eval(*s.filter, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Scope local;
      local.parent = &scope;
      Exec(s.else_body, local);
      return Flow::kNormal;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      Count();
      Scope local;
      local.parent = &scope;
      Bind(s, items[k], local);
      Value loop = Value::MakeDict();
      loop.dict->Set("index", Value::Int(k + 1));
      loop.dict->Set("index0", Value::Int(k));
      loop.dict->Set("revindex", Value::Int(n - k));
      loop.dict->Set("revindex0", Value::Int(n - k - 1));
      loop.dict->Set("first", Value::Bool(k == 0));
      loop.dict->Set("last", Value::Bool(k == n - 1));
      loop.dict->Set("length", Value::Int(n));
      loop.dict->Set("depth", Value::Int(1));
      loop.dict->Set("depth0", Value::Int(0));
      loop.dict->Set("previtem", k > 0 ? items[k - 1] : Value::Undefined("there is no previous item"));
      loop.dict->Set("nextitem", k + 1 < n ? items[k + 1] : Value::Undefined("there is no next item"));
      loop.dict->Set("cycle", Value::Fn([k](Evaluator& ev, CallArgs& a) {
        if (a.positional.empty()) ev.Fail("no items for cycling given");
        return a.positional[k % a.positional.size()];
      }));
      local.vars["loop"] = loop;
      const Flow f = Exec(s.body, local);
      line = s.line;
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }
  void Bind(const Stmt& s, const Value& item, Scope& scope) {
    if (s.targets.size() == 1) {
      scope.vars[s.targets[0]] = item;
      return;
    }
    List parts = Iterate(item);
    if (parts.size() != s.targets.size()) {
      Fail(absl::StrCat("cannot unpack ", parts.size(), " values into ", s.targets.size(), " loop variables"));
    }
    for (size_t k = 0; k < parts.size(); ++k) scope.vars[s.targets[k]] = parts[k];
  }

  // --- expressions
  struct EvalDepth {
    Evaluator& ev;
    explicit EvalDepth(Evaluator& e) : ev(e) {
      if (++ev.eval_depth_ > 1000) ev.Fail("expression nested too deeply");
    }
    ~EvalDepth() { --ev.eval_depth_; }
  };

  Value Eval(const Expr& e, Scope& scope) {
    EvalDepth guard(*this);
    line = e.line;
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: {
        const Value* v = scope.Find(e.name);
        return v ? *v : Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
      }
      case Expr::Kind::kAttr: {
        Value obj = Eval(*e.args[0], scope);
        line = e.line;
        return GetAttr(obj, e.name);
      }
      case Expr::Kind::kItem: {
        Value obj = Eval(*e.args[0], scope);
        Value key = Eval(*e.args[1], scope);
        line = e.line;
        return GetItem(obj, key);
      }
      case Expr::Kind::kSlice: {
        Value obj = Eval(*e.args[0], scope);
        Value start = e.args[1] ? Eval(*e.args[1], scope) : Value::None();
        Value stop = e.args[2] ? Eval(*e.args[2], scope) : Value::None();
        Value step = e.args[3] ? Eval(*e.args[3], scope) : Value::None();
        line = e.line;
        return Slice(obj, start, stop, step);
      }
      case Expr::Kind::kCall: {
        Value fn = Eval(*e.args[0], scope);
        CallArgs args = EvalArgs(e, 1, scope);
        line = e.line;
        if (fn.kind != Value::Kind::kFunction) {
          if (fn.undefined()) Fail(fn.s.empty() ? "call of an undefined value" : fn.s);
          Fail(absl::StrCat("'", TypeName(fn), "' object is not callable"));
        }
        return (*fn.fn)(*this, args);
      }
      case Expr::Kind::kFilter: {
        Value v = Eval(*e.args[0], scope);
        CallArgs args = EvalArgs(e, 1, scope);
        line = e.line;
        return ApplyFilter(e.name, v, args);
      }
      case Expr::Kind::kTest: {
        Value v = Eval(*e.args[0], scope);
        CallArgs args = EvalArgs(e, 1, scope);
        line = e.line;
        return Value::Bool(ApplyTest(e.name, v, args) != e.negated);
      }
      case Expr::Kind::kUnary: {
        Value v = Eval(*e.args[0], scope);
        line = e.line;
        if (v.kind == Value::Kind::kInt || v.kind == Value::Kind::kBool) return Value::Int(e.name == "-" ? -v.number() : v.number());
        if (v.kind == Value::Kind::kFloat) return Value::Float(e.name == "-" ? -v.f : v.f);
        Fail(v.undefined() ? v.s : absl::StrCat("bad operand type for unary ", e.name, ": '", TypeName(v), "'"));
      }
      case Expr::Kind::kBinary: {
        Value a = Eval(*e.args[0], scope);
        Value b = Eval(*e.args[1], scope);
        line = e.line;
        return BinaryOp(e.name, a, b);
      }
      case Expr::Kind::kAnd: {
        Value a = Eval(*e.args[0], scope);
        return Truthy(a) ? Eval(*e.args[1], scope) : a;
      }
      case Expr::Kind::kOr: {
        Value a = Eval(*e.args[0], scope);
        return Truthy(a) ? a : Eval(*e.args[1], scope);
      }
      case Expr::Kind::kNot: return Value::Bool(!Truthy(Eval(*e.args[0], scope)));
      case Expr::Kind::kCompare: {
        Value a = Eval(*e.args[0], scope);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value b = Eval(*e.args[k + 1], scope);
          line = e.line;
          if (!Compare(e.ops[k], a, b)) return Value::Bool(false);
          a = std::move(b);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kCond: {
        if (Truthy(Eval(*e.args[0], scope))) return Eval(*e.args[1], scope);
        return e.args[2] ? Eval(*e.args[2], scope) : Value::Undefined("the conditional expression has no else");
      }
      case Expr::Kind::kList: {
        Value v = Value::MakeList();
        for (const auto& a : e.args) v.list->push_back(Eval(*a, scope));
        return Shallow(v);
      }
      case Expr::Kind::kDict: {
        Value v = Value::MakeDict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = Eval(*e.args[k], scope);
          if (key.kind != Value::Kind::kString) Fail("dict literal keys must be strings");
          v.dict->Set(key.s, Eval(*e.args[k + 1], scope));
        }
        return Shallow(v);
      }
    }
    return Value();
  }

  CallArgs EvalArgs(const Expr& e, size_t first, Scope& scope) {
    CallArgs a;
    for (size_t k = first; k < e.args.size(); ++k) a.positional.push_back(Eval(*e.args[k], scope));
    for (const auto& [name, x] : e.kwargs) a.keyword.emplace_back(name, Eval(*x, scope));
    return a;
  }

  static int64_t Index(int64_t k, int64_t n) { return k < 0 ? k + n : k; }

  Value GetItem(const Value& obj, const Value& key) {
    switch (obj.kind) {
      case Value::Kind::kUndefined: Fail(obj.s.empty() ? "subscript of an undefined value" : obj.s);
      case Value::Kind::kList:
      case Value::Kind::kString:
        if (key.kind == Value::Kind::kInt || key.kind == Value::Kind::kBool) {
          if (obj.kind == Value::Kind::kList) {
            const int64_t n = static_cast<int64_t>(obj.list->size());
            const int64_t k = Index(key.kind == Value::Kind::kInt ? key.i : key.b, n);
            if (k < 0 || k >= n) return Value::Undefined(absl::StrCat("list index ", key.i, " out of range"));
            return (*obj.list)[k];
          }
          const std::vector<uint32_t> cps = Decode(obj.s);
          const int64_t n = static_cast<int64_t>(cps.size());
          const int64_t k = Index(key.kind == Value::Kind::kInt ? key.i : key.b, n);
          if (k < 0 || k >= n) return Value::Undefined(absl::StrCat("string index ", key.i, " out of range"));
          return Value::Str(Encode(cps, k, k + 1));
        }
        break;
      case Value::Kind::kDict:
        if (key.kind == Value::Kind::kString) {
          if (const Value* v = obj.dict->Find(key.s)) return *v;
        }
        break;
      default: break;
    }
    if (key.kind == Value::Kind::kString) return GetAttr(obj, key.s);
    return Value::Undefined(absl::StrCat("'", TypeName(obj), " object' has no element ", Repr(key)));
  }

  Value Slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
    auto as_int = [&](const Value& v, const char* what) -> std::optional<int64_t> {
      if (v.kind == Value::Kind::kNone || v.undefined()) return std::nullopt;
      if (v.kind != Value::Kind::kInt) Fail(absl::StrCat("slice ", what, " must be an integer or None"));
      return v.i;
    };
    const std::optional<int64_t> start = as_int(start_v, "start"), stop = as_int(stop_v, "stop"), step_o = as_int(step_v, "step");
    const int64_t step = step_o.value_or(1);
    if (step == 0) Fail("slice step cannot be zero");
    std::vector<uint32_t> cps;
    int64_t n = 0;
    if (obj.kind == Value::Kind::kList) n = static_cast<int64_t>(obj.list->size());
    else if (obj.kind == Value::Kind::kString) n = static_cast<int64_t>((cps = Decode(obj.s)).size());
    else Fail(obj.undefined() && !obj.s.empty() ? obj.s : absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
    // Python's slice.indices
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t b = clamp(start, step > 0 ? 0 : n - 1), e = clamp(stop, step > 0 ? n : -1);
    std::vector<int64_t> picks;
    for (int64_t k = b; step > 0 ? k < e : k > e; k += step) picks.push_back(k);
    Count(static_cast<int64_t>(picks.size()));
    if (obj.kind == Value::Kind::kList) {
      Value out = Value::MakeList();
      for (int64_t k : picks) out.list->push_back((*obj.list)[k]);
      return out;
    }
    std::string out;
    for (int64_t k : picks) AppendUtf8(out, cps[k]);
    return Value::Str(out);
  }

  std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    if (from.empty()) {  // Python inserts `to` around every character
      const std::vector<uint32_t> cps = Decode(s);
      for (size_t k = 0; k < cps.size(); ++k) {
        if (count < 0 || static_cast<int64_t>(k) < count) out += to;
        AppendUtf8(out, cps[k]);
        Count();
      }
      if (count < 0 || static_cast<int64_t>(cps.size()) < count) out += to;
      return out;
    }
    size_t b = 0;
    for (int64_t done = 0; count < 0 || done < count; ++done) {
      const size_t at = s.find(from, b);
      if (at == std::string::npos) break;
      out.append(s, b, at - b);
      out += to;
      b = at + from.size();
      Count();
      if (static_cast<int64_t>(out.size()) > limits_.max_output_bytes) Fail("replace() result is too large");
    }
    out.append(s, b, std::string::npos);
    return out;
  }

  Value GetAttr(const Value& obj, const std::string& name);
  Value BinaryOp(const std::string& op, const Value& a, const Value& b);
  bool Compare(const std::string& op, const Value& a, const Value& b);
  bool Contains(const Value& container, const Value& item);
  Value ApplyFilter(const std::string& name, const Value& v, CallArgs& args);
  bool ApplyTest(const std::string& name, const Value& v, CallArgs& args);

 private:
  const Limits& limits_;
  std::string& out_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

// Bound methods of str and dict (what jinja2's sandbox lets templates call; nothing mutates).
Value Evaluator::GetAttr(const Value& obj, const std::string& name) {
  auto method = [&](std::function<Value(Evaluator&, CallArgs&)> f) { return Value::Fn(std::move(f)); };
  if (obj.undefined()) Fail(obj.s.empty() ? absl::StrCat("'", name, "' of an undefined value") : obj.s);
  if (obj.kind == Value::Kind::kString) {
    const std::string s = obj.s;
    auto str_arg = [](Evaluator& ev, const Value& v, const char* what) {
      if (v.kind != Value::Kind::kString) ev.Fail(absl::StrCat(what, " must be str, not ", TypeName(v)));
      return v.s;
    };
    if (name == "startswith" || name == "endswith") {
      const bool starts = name == "startswith";
      return method([s, starts, str_arg](Evaluator& ev, CallArgs& a) {
        if (a.positional.size() != 1) ev.Fail("startswith/endswith take one argument");
        List options = a.positional[0].kind == Value::Kind::kList ? *a.positional[0].list : List{a.positional[0]};
        for (const Value& o : options) {
          const std::string p = str_arg(ev, o, "the prefix");
          if (p.size() <= s.size() && (starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0)) return Value::Bool(true);
        }
        return Value::Bool(false);
      });
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return method([s, l, r](Evaluator& ev, CallArgs& a) {
        const Value chars = a.Get(0, "chars", Value::None());
        if (chars.kind == Value::Kind::kNone) return Value::Str(Strip(s, l, r));
        if (chars.kind != Value::Kind::kString) ev.Fail("strip arg must be None or str");
        return Value::Str(Strip(s, l, r, &chars.s));
      });
    }
    if (name == "split" || name == "rsplit") {
      const bool right = name == "rsplit";
      return method([s, right](Evaluator& ev, CallArgs& a) {
        const Value sep = a.Get(0, "sep", Value::None());
        const Value maxv = a.Get(1, "maxsplit", Value::Int(-1));
        if (maxv.kind != Value::Kind::kInt) ev.Fail("maxsplit must be an integer");
        int64_t max = maxv.i;
        std::vector<std::string> parts;
        if (sep.kind == Value::Kind::kNone) {  // runs of whitespace, no empty strings
          const std::vector<uint32_t> cps = Decode(s);
          if (right) {
            int64_t e = static_cast<int64_t>(cps.size());
            while (true) {
              while (e > 0 && IsSpace(cps[e - 1])) --e;
              if (e == 0) break;
              int64_t b = e;
              if (max == 0) {
                parts.push_back(Encode(cps, 0, e));
                break;
              }
              while (b > 0 && !IsSpace(cps[b - 1])) --b;
              parts.push_back(Encode(cps, b, e));
              if (max > 0) --max;
              e = b;
            }
            std::reverse(parts.begin(), parts.end());
          } else {
            size_t b = 0;
            while (true) {
              while (b < cps.size() && IsSpace(cps[b])) ++b;
              if (b == cps.size()) break;
              if (max == 0) {
                size_t e = cps.size();
                while (e > b && IsSpace(cps[e - 1])) --e;
                parts.push_back(Encode(cps, b, e));
                break;
              }
              size_t e = b;
              while (e < cps.size() && !IsSpace(cps[e])) ++e;
              parts.push_back(Encode(cps, b, e));
              if (max > 0) --max;
              b = e;
            }
          }
        } else {
          if (sep.kind != Value::Kind::kString) ev.Fail("must be str or None");
          if (sep.s.empty()) ev.Fail("empty separator");
          if (right) {
            std::string rest = s;
            while (max != 0) {
              const size_t at = rest.rfind(sep.s);
              if (at == std::string::npos) break;
              parts.push_back(rest.substr(at + sep.s.size()));
              rest.resize(at);
              if (max > 0) --max;
            }
            parts.push_back(rest);
            std::reverse(parts.begin(), parts.end());
          } else {
            size_t b = 0;
            while (max != 0) {
              const size_t at = s.find(sep.s, b);
              if (at == std::string::npos) break;
              parts.push_back(s.substr(b, at - b));
              b = at + sep.s.size();
              if (max > 0) --max;
            }
            parts.push_back(s.substr(b));
          }
        }
        ev.Count(static_cast<int64_t>(parts.size()));
        Value out = Value::MakeList();
        for (auto& p : parts) out.list->push_back(Value::Str(std::move(p)));
        return out;
      });
    }
    if (name == "replace") {
      return method([s](Evaluator& ev, CallArgs& a) {
        const Value from = a.Get(0, "old"), to = a.Get(1, "new"), count = a.Get(2, "count", Value::Int(-1));
        if (from.kind != Value::Kind::kString || to.kind != Value::Kind::kString || count.kind != Value::Kind::kInt) {
          ev.Fail("replace takes (str, str[, int])");
        }
        return Value::Str(ev.Replace(s, from.s, to.s, count.i));
      });
    }
    if (name == "upper" || name == "lower") {
      const bool up = name == "upper";
      return method([s, up](Evaluator&, CallArgs&) { return Value::Str(up ? Upper(s) : Lower(s)); });
    }
    if (name == "title" || name == "capitalize") {
      const bool title = name == "title";
      return method([s, title](Evaluator& ev, CallArgs& a) { return ev.ApplyFilter(title ? "title" : "capitalize", Value::Str(s), a); });
    }
    if (name == "find" || name == "count" || name == "index" || name == "rfind") {
      const std::string op = name;
      return method([s, op](Evaluator& ev, CallArgs& a) {
        const Value sub = a.Get(0, "sub");
        if (sub.kind != Value::Kind::kString) ev.Fail(absl::StrCat(op, " takes a str"));
        if (op == "count") {
          int64_t c = 0;
          if (sub.s.empty()) return Value::Int(static_cast<int64_t>(Decode(s).size()) + 1);
          for (size_t at = s.find(sub.s); at != std::string::npos; at = s.find(sub.s, at + sub.s.size())) ++c;
          return Value::Int(c);
        }
        const size_t at = op == "rfind" ? s.rfind(sub.s) : s.find(sub.s);
        if (at == std::string::npos) {
          if (op == "index") ev.Fail("substring not found");
          return Value::Int(-1);
        }
        return Value::Int(static_cast<int64_t>(Decode(s.substr(0, at)).size()));
      });
    }
    if (name == "join") {
      return method([s](Evaluator& ev, CallArgs& a) {
        std::string out;
        bool first = true;
        for (const Value& v : ev.Iterate(a.Get(0, "iterable"))) {
          if (v.kind != Value::Kind::kString) ev.Fail(absl::StrCat("sequence item: expected str instance, ", TypeName(v), " found"));
          out += (first ? "" : s) + v.s;
          first = false;
        }
        return Value::Str(out);
      });
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isupper" || name == "islower") {
      const std::string op = name;
      return method([s, op](Evaluator&, CallArgs&) {
        if (s.empty()) return Value::Bool(false);
        bool cased = false;
        for (uint32_t c : Decode(s)) {
          if (op == "isdigit" && !(c >= '0' && c <= '9')) return Value::Bool(false);
          if (op == "isspace" && !IsSpace(c)) return Value::Bool(false);
          if (op == "isalpha" && !std::isalpha(c < 0x80 ? static_cast<int>(c) : 0)) return Value::Bool(false);
          if (op == "isupper" && c < 0x80 && std::islower(static_cast<int>(c))) return Value::Bool(false);
          if (op == "islower" && c < 0x80 && std::isupper(static_cast<int>(c))) return Value::Bool(false);
          cased |= c < 0x80 && std::isalpha(static_cast<int>(c));
        }
        return Value::Bool(op == "isupper" || op == "islower" ? cased : true);
      });
    }
    return Value::Undefined(absl::StrCat("'str object' has no attribute '", name, "'"));
  }
  if (obj.kind == Value::Kind::kDict) {
    if (!obj.dict->is_namespace) {
      const std::shared_ptr<Dict> d = obj.dict;
      if (name == "items" || name == "keys" || name == "values") {
        const std::string op = name;
        return method([d, op](Evaluator& ev, CallArgs&) {
          Value out = Value::MakeList();
          ev.Count(static_cast<int64_t>(d->items.size()));
          for (const auto& [k, v] : d->items) {
            if (op == "items") out.list->push_back(Value::MakeList({Value::Str(k), v}));
            else out.list->push_back(op == "keys" ? Value::Str(k) : v);
          }
          return ev.Shallow(out);
        });
      }
      if (name == "get") {
        return method([d](Evaluator& ev, CallArgs& a) {
          const Value key = a.Get(0, "key");
          if (key.kind == Value::Kind::kString) {
            if (const Value* v = d->Find(key.s)) return *v;
          } else if (key.undefined()) {
            ev.Fail("get() needs a key");
          }
          return a.Get(1, "default", Value::None());
        });
      }
    }
    if (const Value* v = obj.dict->Find(name)) return *v;
    return Value::Undefined(absl::StrCat("'", TypeName(obj), " object' has no attribute '", name, "'"));
  }
  if (obj.kind == Value::Kind::kList && (name == "append" || name == "extend" || name == "pop" || name == "insert" ||
                                         name == "remove" || name == "clear" || name == "sort" || name == "reverse")) {
    return method([name](Evaluator& ev, CallArgs&) -> Value { ev.Fail(absl::StrCat("access to list.", name, " is unsafe (the template may not modify a list)")); });
  }
  return Value::Undefined(absl::StrCat("'", TypeName(obj), " object' has no attribute '", name, "'"));
}


Value Evaluator::BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::Str(Str(a) + Str(b));
  if (a.undefined()) Fail(a.s.empty() ? "an undefined value in arithmetic" : a.s);
  if (b.undefined()) Fail(b.s.empty() ? "an undefined value in arithmetic" : b.s);
  const bool ints = (a.kind == Value::Kind::kInt || a.kind == Value::Kind::kBool) &&
                    (b.kind == Value::Kind::kInt || b.kind == Value::Kind::kBool);
  const int64_t ai = a.kind == Value::Kind::kBool ? a.b : a.i, bi = b.kind == Value::Kind::kBool ? b.b : b.i;
  auto unsupported = [&]() -> Value {
    Fail(absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '", TypeName(b), "'"));
  };
  auto checked = [&](bool overflow, int64_t r) -> Value {
    if (overflow) Fail(absl::StrCat("integer overflow in ", op));
    return Value::Int(r);
  };
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_add_overflow(ai, bi, &r);
      return checked(overflow, r);
    }
    if (a.is_number() && b.is_number()) return Value::Float(a.number() + b.number());
    if (a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) {
      if (static_cast<int64_t>(a.s.size() + b.s.size()) > limits_.max_output_bytes) Fail("string too large");
      return Value::Str(a.s + b.s);
    }
    if (a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
      List r = *a.list;
      r.insert(r.end(), b.list->begin(), b.list->end());
      Count(static_cast<int64_t>(r.size()));
      return Value::MakeList(std::move(r));
    }
    if (a.kind == Value::Kind::kString) Fail(absl::StrCat("can only concatenate str (not \"", TypeName(b), "\") to str"));
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_mul_overflow(ai, bi, &r);
      return checked(overflow, r);
    }
    if (a.is_number() && b.is_number()) return Value::Float(a.number() * b.number());
    const Value* seq = a.kind == Value::Kind::kString || a.kind == Value::Kind::kList ? &a : &b;
    const Value* times = seq == &a ? &b : &a;
    if ((seq->kind == Value::Kind::kString || seq->kind == Value::Kind::kList) &&
        (times->kind == Value::Kind::kInt || times->kind == Value::Kind::kBool)) {
      const int64_t n = std::max<int64_t>(0, times->kind == Value::Kind::kInt ? times->i : times->b);
      const int64_t unit = seq->kind == Value::Kind::kString ? static_cast<int64_t>(seq->s.size()) : static_cast<int64_t>(seq->list->size());
      if (unit > 0 && n > limits_.max_output_bytes / unit) Fail("repetition result is too large");
      Count(n);
      if (seq->kind == Value::Kind::kString) {
        std::string r;
        for (int64_t k = 0; k < n; ++k) r += seq->s;
        return Value::Str(r);
      }
      List r;
      for (int64_t k = 0; k < n; ++k) r.insert(r.end(), seq->list->begin(), seq->list->end());
      return Value::MakeList(std::move(r));
    }
    return unsupported();
  }
  if (!a.is_number() || !b.is_number()) return unsupported();
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_sub_overflow(ai, bi, &r);
      return checked(overflow, r);
    }
    return Value::Float(a.number() - b.number());
  }
  if (op == "/") {
    if (b.number() == 0) Fail("division by zero");
    return Value::Float(a.number() / b.number());
  }
  if (op == "//" || op == "%") {
    if (b.number() == 0) Fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      if (ai == INT64_MIN && bi == -1) Fail("integer overflow");
      int64_t q = ai / bi, r = ai % bi;
      if (r != 0 && ((r < 0) != (bi < 0))) { --q; r += bi; }
      return Value::Int(op == "//" ? q : r);
    }
    const double x = a.number(), y = b.number();
    if (op == "//") return Value::Float(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::Float(r);
  }
  if (op == "**") {
    if (ints && bi >= 0) {
      int64_t r = 1;
      for (int64_t k = 0; k < bi; ++k) {
        if (__builtin_mul_overflow(r, ai, &r)) Fail("integer overflow in **");
        if (r == 0 || r == 1) break;
        Count();
      }
      return Value::Int(r);
    }
    return Value::Float(std::pow(a.number(), b.number()));
  }
  return unsupported();
}

bool Evaluator::Contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (item.kind != Value::Kind::kString) Fail(absl::StrCat("'in <string>' requires string as left operand, not ", TypeName(item)));
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::kList:
      Count(static_cast<int64_t>(container.list->size()));
      for (const Value& v : *container.list) if (Equal(v, item)) return true;
      return false;
    case Value::Kind::kDict:
      if (container.dict->is_namespace) break;
      return item.kind == Value::Kind::kString && container.dict->Find(item.s) != nullptr;
    default: break;
  }
  Fail(absl::StrCat("argument of type '", TypeName(container), "' is not iterable"));
}

// Python's ordering for the comparable pairs templates use (numbers, strings, lists).
int Order(Evaluator& ev, const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
  if (a.kind == Value::Kind::kString && b.kind == Value::Kind::kString) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
    for (size_t k = 0; k < std::min(a.list->size(), b.list->size()); ++k) {
      if (Equal((*a.list)[k], (*b.list)[k])) continue;
      return Order(ev, (*a.list)[k], (*b.list)[k], op);
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  if (a.undefined()) ev.Fail(a.s.empty() ? "comparison with an undefined value" : a.s);
  if (b.undefined()) ev.Fail(b.s.empty() ? "comparison with an undefined value" : b.s);
  ev.Fail(absl::StrCat("'", op, "' not supported between instances of '", TypeName(a), "' and '", TypeName(b), "'"));
}

bool Evaluator::Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") return !Contains(b, a);
  const int o = Order(*this, a, b, op.c_str());
  if (op == "<") return o < 0;
  if (op == ">") return o > 0;
  if (op == "<=") return o <= 0;
  return o >= 0;
}

bool Evaluator::ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  if (name == "defined") return !v.undefined();
  if (name == "undefined") return v.undefined();
  if (name == "none") return v.kind == K::kNone;
  if (name == "string") return v.kind == K::kString;
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "mapping") return v.kind == K::kDict && !v.dict->is_namespace;
  if (name == "iterable") return v.kind == K::kString || v.kind == K::kList || v.kind == K::kUndefined || (v.kind == K::kDict && !v.dict->is_namespace);
  if (name == "sequence") return v.kind == K::kString || v.kind == K::kList || v.kind == K::kUndefined || (v.kind == K::kDict && !v.dict->is_namespace);
  if (name == "callable") return v.kind == K::kFunction;
  if (name == "lower" || name == "upper") {
    const std::string s = Str(v);
    return name == "lower" ? Lower(s) == s : Upper(s) == s;
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (v.kind != K::kInt && v.kind != K::kBool) Fail(absl::StrCat("the '", name, "' test needs an integer, got ", TypeName(v)));
    const int64_t x = v.kind == K::kInt ? v.i : v.b;
    if (name == "even") return x % 2 == 0;
    if (name == "odd") return x % 2 != 0;
    const Value d = args.Get(0, "num");
    if (d.kind != K::kInt || d.i == 0) Fail("divisibleby needs a non-zero integer");
    return x % d.i == 0;
  }
  const Value other = args.Get(0, "b");
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, other);
  if (name == "ne" || name == "!=") return !Equal(v, other);
  if (name == "sameas") {
    if (v.kind != other.kind) return false;
    if (v.kind == K::kList) return v.list == other.list;
    if (v.kind == K::kDict) return v.dict == other.dict;
    return v.kind == K::kNone || v.kind == K::kUndefined || (v.kind == K::kBool && v.b == other.b);
  }
  if (name == "lt" || name == "lessthan" || name == "<") return Compare("<", v, other);
  if (name == "le" || name == "<=") return Compare("<=", v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(">", v, other);
  if (name == "ge" || name == ">=") return Compare(">=", v, other);
  if (name == "in") return Contains(other, v);
  Fail(absl::StrCat("no test named '", name, "'"));
}

Value Evaluator::ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  auto need_string_like = [&]() { return Str(v); };
  auto as_list = [&](const Value& x) { List l = Iterate(x); Count(static_cast<int64_t>(l.size())); return l; };
  // map/select/sort read an item's attribute by a dotted path ("function.name") or an index.
  auto attribute = [&](const Value& item, const Value& path) -> Value {
    if (path.kind == K::kInt) return GetItem(item, path);
    Value cur = item;
    const std::string p = Str(path);
    size_t b = 0;
    while (true) {
      const size_t dot = p.find('.', b);
      const std::string part = p.substr(b, dot == std::string::npos ? std::string::npos : dot - b);
      const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      if (cur.undefined()) return cur;
      cur = GetItem(cur, numeric ? Value::Int(std::stoll(part)) : Value::Str(part));
      if (dot == std::string::npos) return cur;
      b = dot + 1;
    }
  };
  auto sort_key = [&](const Value& x, bool case_sensitive) {
    return (!case_sensitive && x.kind == K::kString) ? Value::Str(Lower(x.s)) : x;
  };

  if (name == "trim") {
    const Value chars = args.Get(0, "chars", Value::None());
    const std::string s = need_string_like();
    if (chars.kind == K::kString) return Value::Str(Strip(s, true, true, &chars.s));
    return Value::Str(Strip(s, true, true));
  }
  if (name == "upper") return Value::Str(Upper(need_string_like()));
  if (name == "lower") return Value::Str(Lower(need_string_like()));
  if (name == "capitalize") {
    const std::vector<uint32_t> cps = Decode(need_string_like());
    if (cps.empty()) return Value::Str("");
    return Value::Str(Upper(Encode(cps, 0, 1)) + Lower(Encode(cps, 1, cps.size())));
  }
  if (name == "title") {  // jinja2: each run after a space, '-', '(', '{', '[' or '<' starts a word
    std::string out;
    bool start = true;
    for (uint32_t c : Decode(need_string_like())) {
      std::string ch;
      AppendUtf8(ch, c);
      const bool boundary = IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      out += boundary ? ch : CaseMap(ch, start);
      start = boundary;
    }
    return Value::Str(out);
  }
  if (name == "length" || name == "count") {
    switch (v.kind) {
      case K::kUndefined: return Value::Int(0);
      case K::kString: return Value::Int(static_cast<int64_t>(Decode(v.s).size()));
      case K::kList: return Value::Int(static_cast<int64_t>(v.list->size()));
      case K::kDict: if (!v.dict->is_namespace) return Value::Int(static_cast<int64_t>(v.dict->items.size())); break;
      default: break;
    }
    Fail(absl::StrCat("object of type '", TypeName(v), "' has no len()"));
  }
  if (name == "tojson") {
    JsonStyle st;
    const Value ensure_ascii = args.Get(0, "ensure_ascii", Value::Bool(false));
    const Value indent = args.Get(1, "indent", Value::None());
    const Value separators = args.Get(2, "separators", Value::None());
    const Value sort_keys = args.Get(3, "sort_keys", Value::Bool(false));
    st.ensure_ascii = Truthy(ensure_ascii);
    st.sort_keys = Truthy(sort_keys);
    if (indent.kind == K::kInt) {
      st.has_indent = true;
      st.indent = std::string(std::max<int64_t>(0, std::min<int64_t>(indent.i, 1024)), ' ');
    } else if (indent.kind == K::kString) {
      st.has_indent = true;
      st.indent = indent.s;
    } else if (indent.kind != K::kNone) {
      Fail("tojson: indent must be an integer, a string or None");
    }
    if (st.has_indent) st.item_sep = ",";
    if (separators.kind == K::kList) {
      if (separators.list->size() != 2 || (*separators.list)[0].kind != K::kString || (*separators.list)[1].kind != K::kString) {
        Fail("tojson: separators must be two strings");
      }
      st.item_sep = (*separators.list)[0].s;
      st.key_sep = (*separators.list)[1].s;
    }
    std::string out;
    try {
      Json(v, st, 0, out);
    } catch (Error& e) {
      Fail(e.message);
    }
    if (static_cast<int64_t>(out.size()) > limits_.max_output_bytes) Fail("tojson result is too large");
    return Value::Str(out);
  }
  if (name == "string") return v.kind == K::kString ? v : Value::Str(Str(v));
  if (name == "safe") return v;
  if (name == "default" || name == "d") {
    const Value fallback = args.Get(0, "default_value", Value::Str(""));
    const bool boolean = Truthy(args.Get(1, "boolean", Value::Bool(false)));
    if (v.undefined() || (boolean && !Truthy(v))) return fallback;
    return v;
  }
  if (name == "first" || name == "last") {
    const List l = as_list(v);
    if (l.empty()) return Value::Undefined(absl::StrCat("no ", name, " item, sequence was empty"));
    return name == "first" ? l.front() : l.back();
  }
  if (name == "list") return Value::MakeList(as_list(v));
  if (name == "reverse") {
    if (v.kind == K::kString) {
      std::vector<uint32_t> cps = Decode(v.s);
      std::reverse(cps.begin(), cps.end());
      return Value::Str(Encode(cps, 0, cps.size()));
    }
    List l = as_list(v);
    std::reverse(l.begin(), l.end());
    return Value::MakeList(std::move(l));
  }
  if (name == "join") {
    const Value sep = args.Get(0, "d", Value::Str(""));
    const Value attr = args.Get(1, "attribute", Value::None());
    std::string out;
    bool first = true;
    for (const Value& x : as_list(v)) {
      out += (first ? "" : Str(sep)) + Str(attr.kind == K::kNone ? x : attribute(x, attr));
      first = false;
      if (static_cast<int64_t>(out.size()) > limits_.max_output_bytes) Fail("join result is too large");
    }
    return Value::Str(out);
  }
  if (name == "items") {
    if (v.undefined()) return Value::MakeList();
    if (v.kind != K::kDict || v.dict->is_namespace) Fail(absl::StrCat("can only get item pairs from a mapping, not ", TypeName(v)));
    Value out = Value::MakeList();
    for (const auto& [k, x] : v.dict->items) out.list->push_back(Value::MakeList({Value::Str(k), x}));
    Count(static_cast<int64_t>(out.list->size()));
    return Shallow(out);
  }
  if (name == "dictsort") {
    if (v.kind != K::kDict || v.dict->is_namespace) Fail("dictsort needs a mapping");
    const bool cs = Truthy(args.Get(0, "case_sensitive", Value::Bool(false)));
    const Value by = args.Get(1, "by", Value::Str("key"));
    const bool rev = Truthy(args.Get(2, "reverse", Value::Bool(false)));
    const bool by_value = by.kind == K::kString && by.s == "value";
    List pairs;
    for (const auto& [k, x] : v.dict->items) pairs.push_back(Value::MakeList({Value::Str(k), x}));
    Count(static_cast<int64_t>(pairs.size()));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      const Value ka = sort_key((*a.list)[by_value ? 1 : 0], cs), kb = sort_key((*b.list)[by_value ? 1 : 0], cs);
      return rev ? Order(*this, kb, ka, "<") < 0 : Order(*this, ka, kb, "<") < 0;
    });
    return Shallow(Value::MakeList(std::move(pairs)));
  }
  if (name == "sort") {
    const bool rev = Truthy(args.Get(0, "reverse", Value::Bool(false)));
    const bool cs = Truthy(args.Get(1, "case_sensitive", Value::Bool(false)));
    const Value attr = args.Get(2, "attribute", Value::None());
    List l = as_list(v);
    std::vector<Value> keys;
    for (const Value& x : l) keys.push_back(sort_key(attr.kind == K::kNone ? x : attribute(x, attr), cs));
    std::vector<size_t> order(l.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return rev ? Order(*this, keys[b], keys[a], "<") < 0 : Order(*this, keys[a], keys[b], "<") < 0;
    });
    List out;
    for (size_t k : order) out.push_back(l[k]);
    return Value::MakeList(std::move(out));
  }
  if (name == "unique") {
    const bool cs = Truthy(args.Get(0, "case_sensitive", Value::Bool(false)));
    const Value attr = args.Get(1, "attribute", Value::None());
    List out, seen;
    for (const Value& x : as_list(v)) {
      const Value key = sort_key(attr.kind == K::kNone ? x : attribute(x, attr), cs);
      bool dup = false;
      for (const Value& s : seen) dup |= Equal(s, key);
      Count(static_cast<int64_t>(seen.size()));
      if (!dup) {
        seen.push_back(key);
        out.push_back(x);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "min" || name == "max") {
    const bool cs = Truthy(args.Get(0, "case_sensitive", Value::Bool(false)));
    const Value attr = args.Get(1, "attribute", Value::None());
    const List l = as_list(v);
    if (l.empty()) return Value::Undefined(absl::StrCat("no ", name, " item, sequence was empty"));
    size_t best = 0;
    for (size_t k = 1; k < l.size(); ++k) {
      const Value a = sort_key(attr.kind == K::kNone ? l[k] : attribute(l[k], attr), cs);
      const Value b = sort_key(attr.kind == K::kNone ? l[best] : attribute(l[best], attr), cs);
      const int o = Order(*this, a, b, "<");
      if (name == "min" ? o < 0 : o > 0) best = k;
    }
    return l[best];
  }
  if (name == "sum") {
    const Value attr = args.Get(0, "attribute", Value::None());
    Value total = args.Get(1, "start", Value::Int(0));
    for (const Value& x : as_list(v)) total = BinaryOp("+", total, attr.kind == K::kNone ? x : attribute(x, attr));
    return total;
  }
  // jinja2's map and select family yield nothing for a falsy sequence (None, "", []).
  const bool seq_filter = name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr";
  if (seq_filter && !Truthy(v)) return Value::MakeList();
  if (name == "map") {
    Value out = Value::MakeList();
    const List l = as_list(v);
    const Value attr = args.Get(99, "attribute", Value::None());
    if (attr.kind != K::kNone) {
      const Value fallback = args.Get(99, "default", Value::Undefined(""));
      for (const Value& x : l) {
        Value a = attribute(x, attr);
        out.list->push_back(a.undefined() && !fallback.undefined() ? fallback : a);
      }
      return out;
    }
    if (args.positional.empty() || args.positional[0].kind != K::kString) Fail("map needs a filter name or attribute=");
    const std::string filter = args.positional[0].s;
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& x : l) out.list->push_back(ApplyFilter(filter, x, rest));
    return out;
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "select" || name == "selectattr";
    size_t k = 0;
    Value attr;
    if (by_attr) {
      if (args.positional.empty()) Fail(absl::StrCat(name, " needs an attribute name"));
      attr = args.positional[k++];
    }
    std::string test;
    if (k < args.positional.size()) {
      if (args.positional[k].kind != K::kString) Fail(absl::StrCat(name, ": the test name must be a string"));
      test = args.positional[k++].s;
    }
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + std::min(k, args.positional.size()), args.positional.end());
    Value out = Value::MakeList();
    for (const Value& x : as_list(v)) {
      const Value subject = by_attr ? attribute(x, attr) : x;
      const bool pass = test.empty() ? Truthy(subject) : ApplyTest(test, subject, rest);
      if (pass == keep_if) out.list->push_back(x);
    }
    return out;
  }
  if (name == "attr") {
    const Value n = args.Get(0, "name");
    if (n.kind != K::kString) Fail("attr needs a name");
    return GetAttr(v, n.s);
  }
  if (name == "int") {
    const Value fallback = args.Get(0, "default", Value::Int(0));
    if (v.kind == K::kInt) return v;
    if (v.kind == K::kBool) return Value::Int(v.b);
    if (v.kind == K::kFloat && std::isfinite(v.f) && std::fabs(v.f) < 9.2e18) return Value::Int(static_cast<int64_t>(v.f));
    if (v.kind == K::kString) {
      const std::string s = Strip(v.s, true, true);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0' && errno == 0) return Value::Int(x);
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = args.Get(0, "default", Value::Float(0));
    if (v.is_number()) return Value::Float(v.number());
    if (v.kind == K::kString) {
      const std::string s = Strip(v.s, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value::Float(d);
    }
    return fallback;
  }
  if (name == "abs") {
    if (v.kind == K::kInt) {
      if (v.i == INT64_MIN) Fail("integer overflow in abs");
      return Value::Int(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == K::kBool) return Value::Int(v.b);
    if (v.kind == K::kFloat) return Value::Float(std::fabs(v.f));
    Fail(absl::StrCat("bad operand type for abs(): '", TypeName(v), "'"));
  }
  if (name == "round") {
    const Value precision = args.Get(0, "precision", Value::Int(0));
    const Value method = args.Get(1, "method", Value::Str("common"));
    if (!v.is_number() || precision.kind != K::kInt) Fail("round needs a number and an integer precision");
    const double scale = std::pow(10.0, static_cast<double>(precision.i));
    const double x = v.number() * scale;
    double r = method.s == "ceil" ? std::ceil(x) : method.s == "floor" ? std::floor(x) : std::nearbyint(x);  // Python rounds halves to even
    if (method.s != "common" && method.s != "ceil" && method.s != "floor") Fail("round: method must be common, ceil or floor");
    return Value::Float(r / scale);
  }
  if (name == "replace") {
    const Value from = args.Get(0, "old"), to = args.Get(1, "new"), count = args.Get(2, "count", Value::None());
    if (from.undefined() || to.undefined()) Fail("replace needs old and new strings");
    return Value::Str(Replace(need_string_like(), Str(from), Str(to), count.kind == K::kInt ? count.i : -1));
  }
  if (name == "indent") {
    const Value width = args.Get(0, "width", Value::Int(4));
    const bool first = Truthy(args.Get(1, "first", Value::Bool(false)));
    const bool blank = Truthy(args.Get(2, "blank", Value::Bool(false)));
    std::string pad = width.kind == K::kString ? width.s : std::string(width.kind == K::kInt ? std::clamp<int64_t>(width.i, 0, 1024) : 4, ' ');
    std::string s = need_string_like() + "\n";
    std::vector<std::string> lines;
    size_t b = 0;
    for (size_t at; (at = s.find('\n', b)) != std::string::npos; b = at + 1) lines.push_back(s.substr(b, at - b));
    std::string out;
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k > 0) out += "\n";
      if (k > 0 && (blank || !lines[k].empty())) out += pad;
      out += lines[k];
    }
    if (first) out = pad + out;
    if (static_cast<int64_t>(out.size()) > limits_.max_output_bytes) Fail("indent result is too large");
    return Value::Str(out);
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (uint32_t c : Decode(need_string_like())) {
      const bool w = IsWordChar(c);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  Fail(absl::StrCat("no filter named '", name, "'"));
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  try {
    Lexer lexer(source);
    Parser parser(lexer.Run());
    auto node = std::make_shared<Node>();
    node->body = parser.ParseTemplate();
    Template t;
    t.root_ = std::move(node);
    return t;
  } catch (const Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("template syntax error, line ", e.line, ": ", e.message));
  } catch (const std::exception& e) {  // a bug of ours, still a Status for the caller
    return absl::InternalError(absl::StrCat("template parser: unexpected exception: ", e.what()));
  }
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& variables, const Limits& limits) const {
  if (!root_) return absl::FailedPreconditionError("the template was not parsed");
  if (!variables.is_object()) return absl::InvalidArgumentError("template variables must be a JSON object");
  std::string out;
  try {
    Evaluator ev(limits, out);
    Scope globals;
    globals.vars["raise_exception"] = Value::Fn([](Evaluator& e, CallArgs& a) -> Value {
      e.Fail(a.positional.empty() ? "raise_exception() called" : Str(a.positional[0]));
    });
    globals.vars["namespace"] = Value::Fn([](Evaluator& e, CallArgs& a) {
      Value ns = Value::MakeDict(/*is_namespace=*/true);
      for (const Value& p : a.positional) {
        if (p.kind != Value::Kind::kDict) e.Fail("namespace() takes keyword arguments or a mapping");
        for (const auto& [k, v] : p.dict->items) ns.dict->Set(k, v);
      }
      for (const auto& [k, v] : a.keyword) ns.dict->Set(k, v);
      return e.Shallow(ns);
    });
    globals.vars["dict"] = Value::Fn([](Evaluator& e, CallArgs& a) {
      Value d = Value::MakeDict();
      for (const auto& [k, v] : a.keyword) d.dict->Set(k, v);
      return e.Shallow(d);
    });
    globals.vars["range"] = Value::Fn([](Evaluator& e, CallArgs& a) {
      for (const Value& p : a.positional) if (p.kind != Value::Kind::kInt) e.Fail("range() takes integers");
      if (a.positional.empty() || a.positional.size() > 3) e.Fail("range() takes 1 to 3 arguments");
      const int64_t start = a.positional.size() > 1 ? a.positional[0].i : 0;
      const int64_t stop = a.positional.size() > 1 ? a.positional[1].i : a.positional[0].i;
      const int64_t step = a.positional.size() > 2 ? a.positional[2].i : 1;
      if (step == 0) e.Fail("range() arg 3 must not be zero");
      Value out = Value::MakeList();
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        e.Count();
        out.list->push_back(Value::Int(k));
      }
      return out;
    });
    globals.vars["strftime_now"] = Value::Fn([](Evaluator& e, CallArgs& a) {
      const Value fmt = a.Get(0, "format");
      if (fmt.kind != Value::Kind::kString) e.Fail("strftime_now needs a format string");
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, fmt.s.c_str(), &tm);
      return Value::Str(std::string(buf, n));
    });
    Scope vars;
    vars.parent = &globals;
    for (const auto& [k, v] : variables.items()) vars.vars[k] = FromJson(v);
    ev.root_scope = &vars;
    ev.Exec(root_->body, vars);
  } catch (const Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("template error, line ", e.line, ": ", e.message));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("template rendering ran out of memory");
  } catch (const std::exception& e) {  // a bug of ours, still a Status for the caller
    return absl::InternalError(absl::StrCat("template renderer: unexpected exception: ", e.what()));
  }
  return out;
}

}  // namespace oneinfer::jinja
