// Cast and CastLike: numeric conversions, and to and from strings as numpy prints and parses them.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

using namespace elementwise;  // NOLINT: the family's shared dispatch and broadcasting helpers

// ---- Cast

// Shortest round-trip digits of v, as numpy's str() prints them.
template <typename T>
std::string FloatToString(T v) {
  const double d = static_cast<double>(static_cast<Acc<T>>(v));
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  char* end = buf;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    end = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific).ptr;
  } else {
    for (int p = 1; p <= 9; ++p) {  // fewest digits that read back as the same 16-bit value
      end = buf + std::snprintf(buf, sizeof(buf), "%.*e", p - 1, d);
      if (static_cast<float>(T(std::strtof(buf, nullptr))) == static_cast<float>(v)) break;
    }
  }
  const std::string s(buf, end);  // [-]d[.ddd]e±x
  const size_t epos = s.find('e');
  const bool neg = s[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < epos; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int e = std::atoi(s.c_str() + epos + 1);
  std::string out = neg ? "-" : "";
  if (e >= -4 && e < 16) {  // numpy prints positionally in [1e-4, 1e16)
    if (e >= 0) {
      const size_t ip = static_cast<size_t>(e) + 1;
      if (digits.size() <= ip) out += digits + std::string(ip - digits.size(), '0') + ".0";
      else out += digits.substr(0, ip) + "." + digits.substr(ip);
    } else {
      out += "0." + std::string(static_cast<size_t>(-e - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::snprintf(buf, sizeof(buf), "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    out += buf;
  }
  return out;
}

template <typename T>
std::string ToString(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
  else if constexpr (kIsFloat<T>) return FloatToString(v);
  else return std::to_string(v);
}

// Parses a whole string (surrounding blanks allowed) as T; false when it is not a number.
template <typename T>
bool ParseString(const std::string& str, T* out) {
  const std::string s(absl::StripAsciiWhitespace(str));
  if (s.empty()) return false;
  char* end = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    const std::string l = absl::AsciiStrToLower(s);
    if (l == "true") return *out = true, true;
    if (l == "false") return *out = false, true;
    const double d = std::strtod(s.c_str(), &end);
    *out = d != 0;
  } else if constexpr (std::is_same_v<T, float> || kIsHalf<T>) {
    *out = static_cast<T>(std::strtof(s.c_str(), &end));
  } else if constexpr (std::is_same_v<T, double>) {
    *out = std::strtod(s.c_str(), &end);
  } else if constexpr (std::is_signed_v<T>) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    *out = static_cast<T>(v);
  } else {
    if (s[0] == '-') return false;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    *out = static_cast<T>(v);
  }
  return end == s.c_str() + s.size();
}

template <typename From, typename To>
To Convert(const From& v) {
  using A = Acc<From>;
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<A>(v) != A(0);
  } else if constexpr (kIsHalf<To>) {
    return To(static_cast<float>(static_cast<A>(v)));
  } else if constexpr (std::is_integral_v<To> && kIsFloat<From>) {
    // Float to integer without UB: in-range values truncate, narrower types wrap like C on x86.
    const double d = static_cast<double>(static_cast<A>(v));
    if (d > -9.2e18 && d < 9.2e18) return static_cast<To>(static_cast<int64_t>(d));
    if (std::is_same_v<To, uint64_t> && d >= 0 && d < 1.8e19) return static_cast<To>(d);
    return std::numeric_limits<To>::min();
  } else {
    return static_cast<To>(static_cast<A>(v));
  }
}

using CastTypes = decltype(NumTypes{} + BoolType{});

absl::Status CastTo(OpContext& ctx, const Tensor& x, DType to) {
  if (x.dtype() == to) {
    ctx.SetOutput(0, x);
    return absl::OkStatus();
  }
  ThreadPool* pool = ctx.thread_pool();
  if (to == DType::kString) {
    return Dispatch(CastTypes{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      Unary<T, std::string>(x, y, pool, [](const T& v) { return ToString(v); });
      return absl::OkStatus();
    });
  }
  if (x.dtype() == DType::kString) {
    return Dispatch(CastTypes{}, ctx, to, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      const std::string* px = x.data<std::string>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        if (!ParseString(px[i], &py[i])) {
          return InvalidArgument(ctx, "cannot parse '", px[i], "' as ", DTypeName(to));
        }
      }
      return absl::OkStatus();
    });
  }
  return Dispatch(CastTypes{}, ctx, x.dtype(), [&](auto from) -> absl::Status {
    using From = typename decltype(from)::type;
    return Dispatch(CastTypes{}, ctx, to, [&](auto tag) -> absl::Status {
      using To = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      Unary<From, To>(x, y, pool, [](const From& v) { return Convert<From, To>(v); });
      return absl::OkStatus();
    });
  });
}

bool CastableType(DType d) {
  switch (d) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
    case DType::kBool: case DType::kString:
      return true;
    default:
      return false;
  }
}

KernelFactory CastFactory() {
  return WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& node = init.node();
    const Attribute* a = node.FindAttr("to");
    if (a == nullptr) return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": attribute 'to' is missing"));
    DType to = DType::kUndefined;
    if (a->type == Attribute::Type::kString) {  // opset 1 names the type
      static const std::pair<const char*, DType> kNames[] = {
          {"FLOAT", DType::kFloat32}, {"DOUBLE", DType::kFloat64}, {"FLOAT16", DType::kFloat16},
          {"BFLOAT16", DType::kBFloat16}, {"INT8", DType::kInt8}, {"INT16", DType::kInt16},
          {"INT32", DType::kInt32}, {"INT64", DType::kInt64}, {"UINT8", DType::kUInt8},
          {"UINT16", DType::kUInt16}, {"UINT32", DType::kUInt32}, {"UINT64", DType::kUInt64},
          {"BOOL", DType::kBool}, {"STRING", DType::kString}};
      for (const auto& [name, d] : kNames) {
        if (absl::AsciiStrToUpper(a->s) == name) to = d;
      }
      if (to == DType::kUndefined) return Unimplemented(node, "unsupported Cast target type '", a->s, "'");
    } else {
      to = static_cast<DType>(a->i);
      if (!CastableType(to)) return Unimplemented(node, "unsupported Cast target type ", a->i);
    }
    return KernelFn([to](OpContext& ctx) -> absl::Status {
      if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
      return CastTo(ctx, ctx.input(0), to);
    });
  });
}

absl::Status CastLikeKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 2); !s.ok()) return s;
  return CastTo(ctx, ctx.input(0), ctx.input(1).dtype());
}

}  // namespace

void RegisterCastOps(KernelRegistry& r) {
  AddVersions(r, "Cast", {1, 6, 9, 13, 19, 21, 23}, CastFactory());
  AddVersions(r, "CastLike", {15, 19, 21, 23}, CastLikeKernel);
}

}  // namespace oneinfer
