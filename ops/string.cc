// String ops: StringNormalizer, TfIdfVectorizer, StringConcat, RegexFullMatch, StringSplit.
#include <algorithm>
#include <map>
#include <set>
#include <regex>

#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

// ----------------------------------------------------------------------------------------
// Case mapping on UTF-8 text without relying on installed locales: ASCII, Latin-1,
// Latin Extended-A pairs, Greek and Cyrillic. Other code points pass through unchanged.

char32_t MapCase(char32_t c, bool upper) {
  auto shift = [&](char32_t lo_first, char32_t lo_last, char32_t delta) -> bool {
    if (upper && c >= lo_first && c <= lo_last) { c -= delta; return true; }
    if (!upper && c >= lo_first - delta && c <= lo_last - delta) { c += delta; return true; }
    return false;
  };
  if (shift(U'a', U'z', 32)) return c;
  if (c != U'\u00F7' && c != U'\u00D7' && shift(U'\u00E0', U'\u00FE', 32)) return c;
  if (c == U'\u03C2') return upper ? U'\u03A3' : c;  // final sigma
  if (shift(U'\u03B1', U'\u03C9', 32)) return c;
  if (shift(U'\u0430', U'\u044F', 32)) return c;
  if (shift(U'\u0450', U'\u045F', 80)) return c;
  if (c >= 0x0100 && c <= 0x017E && c != 0x0130 && c != 0x0131 && c != 0x0138 && c != 0x0149 && c != 0x0178) {
    // Latin Extended-A pairs: (upper, upper + 1); uppers are even outside 0139-0148 and 0179-017E.
    const bool even_is_upper = c <= 0x0137 || (c >= 0x014A && c <= 0x0177);
    const bool is_upper = ((c & 1) == 0) == even_is_upper;
    if (upper && !is_upper) return c - 1;
    if (!upper && is_upper) return c + 1;
  }
  return c;
}

std::string ChangeCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) {  // invalid UTF-8: copy the byte
      out.push_back(s[i++]);
      continue;
    }
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      const unsigned char cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cb >> 6) != 2) ok = false;
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out.push_back(s[i++]);
      continue;
    }
    const char32_t m = MapCase(c, upper);
    if (m < 0x80) {
      out.push_back(static_cast<char>(m));
    } else if (m < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (m >> 6)));
      out.push_back(static_cast<char>(0x80 | (m & 0x3F)));
    } else if (m < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (m >> 12)));
      out.push_back(static_cast<char>(0x80 | ((m >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (m & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (m >> 18)));
      out.push_back(static_cast<char>(0x80 | ((m >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((m >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (m & 0x3F)));
    }
    i += static_cast<size_t>(len);
  }
  return out;
}

// ----------------------------------------------------------------------------------------
// StringNormalizer

class StringNormalizerKernel : public OpKernel {
 public:
  StringNormalizerKernel(int action, bool case_sensitive, std::vector<std::string> stop)
      : action_(action), case_sensitive_(case_sensitive) {
    for (auto& s : stop) stop_.insert(case_sensitive ? s : ChangeCase(s, false));
  }

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kString) return InvalidArgument(ctx, "input must be a string tensor");
    if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1))) {
      return InvalidArgument(ctx, "input must be [C] or [1, C], got ", ShapeToString(x.shape()));
    }
    std::vector<std::string> kept;
    const std::string* in = x.data<std::string>();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      if (!stop_.empty() && stop_.count(case_sensitive_ ? in[i] : ChangeCase(in[i], false))) continue;
      kept.push_back(action_ == 0 ? in[i] : ChangeCase(in[i], action_ == 2));
    }
    // Everything filtered: a single empty string, as other runtimes do.
    if (kept.empty()) kept.emplace_back();
    const int64_t c = static_cast<int64_t>(kept.size());
    Tensor& y = ctx.AllocateOutput(0, DType::kString, x.rank() == 1 ? Shape{c} : Shape{1, c});
    std::move(kept.begin(), kept.end(), y.data<std::string>());
    return absl::OkStatus();
  }

 private:
  int action_;  // 0 none, 1 lower, 2 upper
  bool case_sensitive_;
  std::set<std::string> stop_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeStringNormalizer(const KernelInit& init) {
  const Node& n = init.node();
  const std::string action = n.GetString("case_change_action", "NONE");
  int a = 0;
  if (action == "NONE") a = 0;
  else if (action == "LOWER") a = 1;
  else if (action == "UPPER") a = 2;
  else return Unimplemented(n, "unsupported case_change_action '", action, "'");
  const std::string locale = n.GetString("locale", "en_US");
  if (locale != "en_US" && locale != "en_US.UTF-8" && !locale.empty()) {
    return Unimplemented(n, "unsupported locale '", locale, "' (only en_US)");
  }
  return std::unique_ptr<OpKernel>(new StringNormalizerKernel(a, n.GetInt("is_case_sensitive", 0) != 0, n.GetStrings("stopwords")));
}

// ----------------------------------------------------------------------------------------
// TfIdfVectorizer

class TfIdfKernel : public OpKernel {
 public:
  int mode_ = 0;  // 0 TF, 1 IDF, 2 TFIDF
  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_size_ = 0;
  std::vector<float> weights_;
  bool strings_ = false;
  // n -> n-gram -> output column
  std::vector<std::map<std::vector<int64_t>, int64_t>> int_grams_;
  std::vector<std::map<std::vector<std::string>, int64_t>> str_grams_;

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
    const Tensor& x = ctx.input(0);
    const bool is_str = x.dtype() == DType::kString;
    if (!is_str && x.dtype() != DType::kInt32 && x.dtype() != DType::kInt64) {
      return InvalidArgument(ctx, "input must be string, int32 or int64, got ", DTypeName(x.dtype()));
    }
    if (is_str != strings_) return InvalidArgument(ctx, "input type does not match the pool (pool_strings vs pool_int64s)");
    if (x.rank() != 1 && x.rank() != 2) return InvalidArgument(ctx, "input must be [C] or [N, C], got ", ShapeToString(x.shape()));
    const int64_t rows = x.rank() == 1 ? 1 : x.dim(0), cols = x.dim(-1);
    Tensor& y = ctx.AllocateOutput(0, DType::kFloat32, x.rank() == 1 ? Shape{out_size_} : Shape{rows, out_size_});
    std::vector<int64_t> ints;
    if (!is_str) {
      auto v = ReadInts(x);
      if (!v.ok()) return v.status();
      ints = std::move(*v);
    }
    std::vector<double> counts(static_cast<size_t>(out_size_));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(counts.begin(), counts.end(), 0.0);
      if (is_str) CountRow(x.data<std::string>() + r * cols, cols, str_grams_, counts);
      else CountRow(ints.data() + r * cols, cols, int_grams_, counts);
      float* o = y.data<float>() + r * out_size_;
      for (int64_t i = 0; i < out_size_; ++i) {
        const double c = counts[static_cast<size_t>(i)];
        const double w = weights_.empty() ? 1.0 : weights_[static_cast<size_t>(i)];
        o[i] = static_cast<float>(mode_ == 0 ? c : mode_ == 1 ? (c > 0 ? w : 0.0) : c * w);
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename K>
  void CountRow(const K* row, int64_t cols, const std::vector<std::map<std::vector<K>, int64_t>>& grams,
                std::vector<double>& counts) const {
    std::vector<K> key;
    for (int64_t skip = 0; skip <= max_skip_; ++skip) {
      const int64_t stride = skip + 1;
      for (int64_t start = 0; start < cols; ++start) {
        key.clear();
        for (int64_t n = 1; n <= max_n_; ++n) {
          const int64_t at = start + (n - 1) * stride;
          if (at >= cols) break;
          key.push_back(row[at]);
          if (n < min_n_ || (n == 1 && skip > 0)) continue;  // unigrams are counted once
          if (static_cast<size_t>(n) >= grams.size()) break;
          auto it = grams[static_cast<size_t>(n)].find(key);
          if (it != grams[static_cast<size_t>(n)].end()) counts[static_cast<size_t>(it->second)] += 1;
        }
      }
    }
  }
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeTfIdf(const KernelInit& init) {
  const Node& n = init.node();
  auto k = std::make_unique<TfIdfKernel>();
  const std::string mode = n.GetString("mode", "");
  if (mode == "TF") k->mode_ = 0;
  else if (mode == "IDF") k->mode_ = 1;
  else if (mode == "TFIDF") k->mode_ = 2;
  else return Unimplemented(n, "unsupported mode '", mode, "'");
  k->min_n_ = n.GetInt("min_gram_length", 1);
  k->max_n_ = n.GetInt("max_gram_length", 1);
  k->max_skip_ = n.GetInt("max_skip_count", 0);
  if (k->min_n_ < 1 || k->max_n_ < k->min_n_ || k->max_skip_ < 0) {
    return absl::InvalidArgumentError("need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  }
  const std::vector<int64_t> counts = n.GetInts("ngram_counts"), indexes = n.GetInts("ngram_indexes");
  const std::vector<int64_t> pool_i = n.GetInts("pool_int64s");
  const std::vector<std::string> pool_s = n.GetStrings("pool_strings");
  k->strings_ = n.HasAttr("pool_strings");
  if (k->strings_ == n.HasAttr("pool_int64s")) return absl::InvalidArgumentError("exactly one of pool_int64s and pool_strings is required");
  const int64_t pool_size = static_cast<int64_t>(k->strings_ ? pool_s.size() : pool_i.size());
  k->weights_ = n.GetFloats("weights");
  if (!k->weights_.empty() && k->weights_.size() != indexes.size()) return absl::InvalidArgumentError("weights and ngram_indexes differ in length");
  for (int64_t v : indexes) {
    if (v < 0) return absl::InvalidArgumentError("ngram_indexes must be non-negative");
    k->out_size_ = std::max(k->out_size_, v + 1);
  }
  // The weights are per n-gram; map them onto output columns.
  if (!k->weights_.empty()) {
    std::vector<float> by_col(static_cast<size_t>(k->out_size_), 0.0f);
    for (size_t i = 0; i < indexes.size(); ++i) by_col[static_cast<size_t>(indexes[i])] = k->weights_[i];
    k->weights_ = std::move(by_col);
  }
  k->int_grams_.resize(static_cast<size_t>(counts.size() + 1));
  k->str_grams_.resize(static_cast<size_t>(counts.size() + 1));
  size_t gram_no = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const int64_t len = static_cast<int64_t>(g) + 1;
    const int64_t begin = counts[g], end = g + 1 < counts.size() ? counts[g + 1] : pool_size;
    if (begin < 0 || end < begin || end > pool_size || (end - begin) % len != 0) {
      return absl::InvalidArgumentError(absl::StrCat("ngram_counts do not describe the pool (", len, "-grams)"));
    }
    for (int64_t p = begin; p < end; p += len, ++gram_no) {
      if (gram_no >= indexes.size()) return absl::InvalidArgumentError("ngram_indexes is shorter than the number of n-grams in the pool");
      if (k->strings_) k->str_grams_[static_cast<size_t>(len)][std::vector<std::string>(pool_s.begin() + p, pool_s.begin() + p + len)] = indexes[gram_no];
      else k->int_grams_[static_cast<size_t>(len)][std::vector<int64_t>(pool_i.begin() + p, pool_i.begin() + p + len)] = indexes[gram_no];
    }
  }
  if (gram_no != indexes.size()) return absl::InvalidArgumentError("ngram_indexes is longer than the number of n-grams in the pool");
  return std::unique_ptr<OpKernel>(std::move(k));
}

// ----------------------------------------------------------------------------------------
// Opset 20 string ops

absl::Status StringConcat(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "X and Y are required");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::kString || b.dtype() != DType::kString) return InvalidArgument(ctx, "inputs must be string tensors");
  auto shape = BroadcastShapes({a.shape(), b.shape()});
  if (!shape.ok()) return InvalidArgument(ctx, shape.status().message());
  Tensor& y = ctx.AllocateOutput(0, DType::kString, *shape);
  const std::vector<int64_t> sa = BroadcastStrides(a.shape(), *shape), sb = BroadcastStrides(b.shape(), *shape), so = Strides(*shape);
  const std::string* pa = a.data<std::string>();
  const std::string* pb = b.data<std::string>();
  std::string* out = y.data<std::string>();
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    int64_t ia = 0, ib = 0, rem = i;
    for (size_t d = 0; d < so.size(); ++d) {
      const int64_t q = rem / so[d];
      rem %= so[d];
      ia += q * sa[d];
      ib += q * sb[d];
    }
    out[i] = pa[ia] + pb[ib];
  }
  return absl::OkStatus();
}

class RegexFullMatchKernel : public OpKernel {
 public:
  explicit RegexFullMatchKernel(std::regex re) : re_(std::move(re)) {}
  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kString) return InvalidArgument(ctx, "input must be a string tensor");
    Tensor& y = ctx.AllocateOutput(0, DType::kBool, x.shape());
    for (int64_t i = 0; i < x.num_elements(); ++i) y.data<bool>()[i] = std::regex_match(x.data<std::string>()[i], re_);
    return absl::OkStatus();
  }

 private:
  std::regex re_;  // std::regex is safe for concurrent matching
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeRegexFullMatch(const KernelInit& init) {
  const Node& n = init.node();
  if (!n.HasAttr("pattern")) return absl::InvalidArgumentError("the pattern attribute is required");
  const std::string pattern = n.GetString("pattern", "");
  try {
    // __polynomial (libstdc++) selects the Thompson-NFA executor: no recursion per input character,
    // so long strings cannot overflow the stack; like RE2 it refuses back-references.
    return std::unique_ptr<OpKernel>(new RegexFullMatchKernel(std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial)));
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid pattern '", pattern, "': ", e.what()));
  }
}

// Python str.split semantics: no delimiter splits on runs of whitespace.
std::vector<std::string> SplitString(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delim.empty()) {
    auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
    size_t i = 0;
    while (true) {
      while (i < s.size() && ws(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && ws(s[end - 1])) --end;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !ws(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t i = 0;
  while (true) {
    const size_t j = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) ? std::string::npos : s.find(delim, i);
    if (j == std::string::npos) {
      parts.push_back(s.substr(i));
      break;
    }
    parts.push_back(s.substr(i, j - i));
    i = j + delim.size();
  }
  return parts;
}

absl::Status StringSplit(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kString) return InvalidArgument(ctx, "input must be a string tensor");
  const std::string delim = ctx.node().GetString("delimiter", "");
  const int64_t maxsplit = ctx.node().HasAttr("maxsplit") ? ctx.node().GetInt("maxsplit", -1) : -1;
  const int64_t n = x.num_elements();
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
  int64_t width = 0;
  for (int64_t i = 0; i < n; ++i) {
    parts[static_cast<size_t>(i)] = SplitString(x.data<std::string>()[i], delim, maxsplit);
    width = std::max<int64_t>(width, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
  }
  Shape ys = x.shape();
  ys.push_back(width);
  Tensor& y = ctx.AllocateOutput(0, DType::kString, ys);
  for (int64_t i = 0; i < n; ++i) {
    auto& p = parts[static_cast<size_t>(i)];
    std::move(p.begin(), p.end(), y.data<std::string>() + i * width);
  }
  if (ctx.has_output(1)) {
    Tensor& z = ctx.AllocateOutput(1, DType::kInt64, x.shape());
    for (int64_t i = 0; i < n; ++i) z.data<int64_t>()[i] = static_cast<int64_t>(parts[static_cast<size_t>(i)].size());
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterStringOps(KernelRegistry& r) {
  AddVersions(r, "StringNormalizer", {10}, MakeStringNormalizer);
  AddVersions(r, "TfIdfVectorizer", {9}, MakeTfIdf);
  AddVersions(r, "StringConcat", {20}, StringConcat);
  AddVersions(r, "RegexFullMatch", {20}, MakeRegexFullMatch);
  AddVersions(r, "StringSplit", {20}, StringSplit);
}

}  // namespace oneinfer
