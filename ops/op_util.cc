#include "ops/op_util.h"

#include <algorithm>
#include <cstring>

namespace oneinfer {

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  const int64_t lo = -rank, hi = rank - 1;
  if (axis < lo || axis > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DType::kInt64) {
    std::copy(t.data<int64_t>(), t.data<int64_t>() + out.size(), out.begin());
  } else if (t.dtype() == DType::kInt32) {
    std::copy(t.data<int32_t>(), t.data<int32_t>() + out.size(), out.begin());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an int32 or int64 tensor, got ", DTypeName(t.dtype())));
  }
  return out;
}

absl::StatusOr<double> ReadScalar(const Tensor& t) {
  if (t.num_elements() < 1) return absl::InvalidArgumentError("expected a scalar, got an empty tensor");
  double v = 0;
  absl::Status s = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    v = static_cast<double>(t.data<T>()[0]);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return v;
}

absl::StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    const size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const Shape& x : shapes) absl::StrAppend(&all, all.empty() ? "" : " and ", ShapeToString(x));
      return absl::InvalidArgumentError(absl::StrCat("shapes ", all, " cannot be broadcast"));
    }
  }
  return out;
}

void CopyElems(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::kString) {
    const std::string* s = src.data<std::string>() + soff;
    std::string* d = dst.data<std::string>() + doff;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  const size_t es = DTypeSize(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + doff * es, static_cast<const char*>(src.raw_data()) + soff * es,
              static_cast<size_t>(n) * es);
}

int64_t Prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) p *= s[i];
  return p;
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  const std::vector<int64_t> in_strides = Strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : in_strides[i];
  return s;
}

namespace {
template <typename From, typename To>
To ConvertOne(const From& v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<From, float16> || std::is_same_v<From, bfloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, float16> || std::is_same_v<To, bfloat16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}
}  // namespace

absl::StatusOr<Tensor> CastTensor(const Tensor& in, DType to) {
  if (in.dtype() == to) return in;
  Tensor out = Tensor::Empty(to, in.shape());
  const int64_t n = in.num_elements();
  absl::Status s = VisitNumeric(in.dtype(), [&](auto from_tag) -> absl::Status {
    using From = typename decltype(from_tag)::type;
    return VisitNumeric(to, [&](auto to_tag) -> absl::Status {
      using To = typename decltype(to_tag)::type;
      const From* src = in.data<From>();
      To* dst = out.data<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertOne<From, To>(src[i]);
      return absl::OkStatus();
    });
  });
  if (!s.ok()) return s;
  return out;
}

KernelFactory Checked(std::function<absl::Status(const KernelInit&)> check, KernelFn fn) {
  return [check = std::move(check), fn = std::move(fn)](const KernelInit& init)
             -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::Status s = check(init);
    if (!s.ok()) return s;
    return MakeFnKernel(fn)(init);
  };
}

absl::Status CheckOneOf(const KernelInit& init, const std::string& attr, const std::string& def,
                        std::initializer_list<const char*> allowed) {
  const std::string v = init.node().GetString(attr, def);
  for (const char* a : allowed) if (v == a) return absl::OkStatus();
  return Unimplemented(init.node(), "unsupported ", attr, " '", v, "'");
}

}  // namespace oneinfer
