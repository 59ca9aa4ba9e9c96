// Generators: Range, ConstantOfShape, EyeLike, Trilu, OneHot.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/movement.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

using namespace movement;  // NOLINT: the family's shared data-movement helpers

// ---------------------------------------------------------------------------------------------
// Generators: Range, ConstantOfShape, EyeLike, Trilu.

absl::Status RangeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const DType dt = ctx.input(0).dtype();
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.input(i).dtype() != dt) return InvalidArgument(ctx, "start, limit and delta must have the same type");
    if (ctx.input(i).num_elements() != 1) return InvalidArgument(ctx, "input ", i, " must be a scalar");
  }
  if (dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kInt16 && dt != DType::kInt32 && dt != DType::kInt64) {
    return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
  }
  return VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      if (delta == T(0)) return InvalidArgument(ctx, "delta is 0");
      int64_t n;
      if constexpr (std::is_integral_v<T>) {
        // 128 bits: limit - start of two int64 values may not fit in 64.
        const __int128 span = static_cast<__int128>(limit) - static_cast<__int128>(start), d = delta;
        const __int128 count = span / d + ((span % d != 0 && ((span < 0) == (d < 0))) ? 1 : 0);
        if (count > std::numeric_limits<int64_t>::max()) return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": the range has more than 2^63 elements"));
        n = static_cast<int64_t>(count);
      } else {
        const double q = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
        if (!std::isfinite(q)) return InvalidArgument(ctx, "the range has no finite length");
        // Checked before the conversion: a double past int64 has no integer value.
        if (q >= 9.2e18) return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": the range has ", q, " elements"));
        n = static_cast<int64_t>(q);
      }
      n = std::max<int64_t>(n, 0);
      T* out = ctx.AllocateOutput(0, dt, {n}).template data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      return absl::OkStatus();
    } else {
      return InvalidArgument(ctx, "unsupported element type");
    }
  });
}

absl::Status ConstantOfShapeCheck(const KernelInit& init) {
  const Attribute* a = init.node().FindAttr("value");
  if (a != nullptr && (a->type != Attribute::Type::kTensor || a->t.num_elements() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(init.node().Describe(), ": 'value' must be a one-element tensor"));
  }
  return absl::OkStatus();
}

absl::Status ConstantOfShapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  OI_ASSIGN(shape, IntsInput(ctx, 0));
  for (int64_t d : shape) if (d < 0) return InvalidArgument(ctx, "shape has a negative dimension ", d);
  const Attribute* a = ctx.node().FindAttr("value");
  const Tensor value = a != nullptr ? a->t : Tensor::Empty(DType::kFloat32, {1});
  Tensor& out = ctx.AllocateOutput(0, value.dtype(), shape);
  return VisitMove(value.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    std::fill(out.data<U>(), out.data<U>() + out.num_elements(), value.data<U>()[0]);
    return absl::OkStatus();
  });
}

absl::Status EyeLikeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  if (in.rank() != 2) return InvalidArgument(ctx, "input must be 2-D, got ", ShapeToString(in.shape()));
  const DType dt = ctx.node().HasAttr("dtype") ? static_cast<DType>(ctx.node().GetInt("dtype", 1)) : in.dtype();
  const int64_t k = ctx.node().GetInt("k", 0), rows = in.dim(0), cols = in.dim(1);
  if (dt == DType::kString) return InvalidArgument(ctx, "unsupported output type string");
  auto s = VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* out = ctx.AllocateOutput(0, dt, in.shape()).template data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < cols) out[i * cols + j] = T(1.0f);
    }
    return absl::OkStatus();
  });
  return s.ok() ? s : InvalidArgument(ctx, s.message());
}

absl::Status TriluKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  if (in.rank() < 2) return InvalidArgument(ctx, "input must have rank >= 2, got ", ShapeToString(in.shape()));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    OI_ASSIGN(kv, IntsInput(ctx, 1));
    if (kv.size() != 1) return InvalidArgument(ctx, "k must be a scalar");
    k = std::clamp<int64_t>(kv[0], -(in.dim(-2) + 1), in.dim(-1) + 1);  // beyond the matrix all k act alike
  }
  const bool upper = ctx.node().GetInt("upper", 1) != 0;
  const int64_t R = in.dim(-2), C = in.dim(-1);
  const int64_t mats = R * C == 0 ? 0 : in.num_elements() / (R * C);
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), in.shape());
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = in.data<U>();
    U* dst = out.data<U>();
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < R; ++i) {
        // Keep j >= i + k (upper) or j <= i + k (lower); the rest stays zero.
        const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, C) : 0;
        const int64_t hi = upper ? C : std::clamp<int64_t>(i + k + 1, 0, C);
        const int64_t base = (m * R + i) * C;
        CopyN(dst + base + lo, src + base + lo, hi - lo);
      }
    }
    return absl::OkStatus();
  });
}
// ---------------------------------------------------------------------------------------------
// OneHot.

// Reads any numeric tensor as int64 values (OneHot accepts float indices and depth).
absl::StatusOr<std::vector<int64_t>> ReadAnyInts(const OpContext& ctx, const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  auto s = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        v[i] = static_cast<int64_t>(t.data<T>()[i]);
      } else {
        // Saturated: a float past int64 (or NaN) has no integer value; depth and indices check the range.
        const double d = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(t.data<T>()[i]));
        v[i] = std::isnan(d) ? std::numeric_limits<int64_t>::min()
               : d >= 9.2e18 ? std::numeric_limits<int64_t>::max()
               : d <= -9.2e18 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(d);
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return InvalidArgument(ctx, s.message());
  return v;
}

absl::Status OneHotKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  OI_ASSIGN(depth_v, ReadAnyInts(ctx, ctx.input(1)));
  if (depth_v.size() != 1) return InvalidArgument(ctx, "depth must be a scalar");
  const int64_t depth = depth_v[0];
  if (depth < 1) return InvalidArgument(ctx, "depth must be positive, got ", depth);
  if (values.num_elements() != 2) return InvalidArgument(ctx, "values must have 2 elements");
  const int64_t rank = indices.rank() + 1;
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", -1), rank));
  OI_ASSIGN(idx, ReadAnyInts(ctx, indices));
  Shape out_shape = indices.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= indices.shape()[static_cast<size_t>(d)];
  const int64_t inner = outer == 0 ? 0 : indices.num_elements() / outer;
  Tensor& out = ctx.AllocateOutput(0, values.dtype(), out_shape);
  return VisitMove(values.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* dst = out.data<U>();
    std::fill(dst, dst + out.num_elements(), values.data<U>()[0]);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = idx[static_cast<size_t>(o * inner + i)];
        if (!FixIndex(v, depth)) continue;  // out-of-range indices give an all-off row
        dst[(o * depth + v) * inner + i] = values.data<U>()[1];
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterGeneratorOps(KernelRegistry& r) {
  AddVersions(r, "Range", {11}, RangeKernel);
  AddVersions(r, "ConstantOfShape", {9, 20, 21, 23}, Checked(ConstantOfShapeCheck, ConstantOfShapeKernel));
  AddVersions(r, "EyeLike", {9, 22}, EyeLikeKernel);
  AddVersions(r, "Trilu", {14}, TriluKernel);
  AddVersions(r, "OneHot", {9, 11}, OneHotKernel);
}

}  // namespace oneinfer
