// Data-dependent selection and reordering: NonZero, Compress, ReverseSequence, Unique.
#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/movement.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

using namespace movement;  // NOLINT: the family's shared data-movement helpers

template <typename T>
inline bool IsNonZero(const T& v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

absl::Status NonZeroKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> hits;
  auto s = VisitNumeric(in.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* p = in.data<T>();
    for (int64_t i = 0; i < in.num_elements(); ++i) if (IsNonZero(p[i])) hits.push_back(i);
    return absl::OkStatus();
  });
  if (!s.ok()) return InvalidArgument(ctx, s.message());
  const int64_t rank = in.rank(), n = static_cast<int64_t>(hits.size());
  // A scalar is treated as a 1-D tensor of one element, as numpy does.
  const int64_t rows = std::max<int64_t>(rank, 1);
  int64_t* out = ctx.AllocateOutput(0, DType::kInt64, {rows, n}).data<int64_t>();
  const std::vector<int64_t> st = Strides(in.shape());
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    if (rank == 0) out[j] = 0;
    for (int64_t d = 0; d < rank; ++d) {
      out[d * n + j] = rem / st[static_cast<size_t>(d)];
      rem %= st[static_cast<size_t>(d)];
    }
  }
  return absl::OkStatus();
}

absl::Status CompressKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::kBool || cond.rank() != 1) return InvalidArgument(ctx, "condition must be a 1-D bool tensor");
  const bool has_axis = ctx.node().HasAttr("axis");
  int64_t axis = 0;
  Shape shape = in.shape();
  if (has_axis) {
    OI_ASSIGN(a, Axis(ctx, ctx.node().GetInt("axis", 0), in.rank()));
    axis = a;
  } else {
    shape = {in.num_elements()};  // no axis: the flattened input
  }
  const int64_t dim = shape[static_cast<size_t>(axis)];
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.num_elements(); ++i) {
    if (!cond.data<bool>()[i]) continue;
    if (i >= dim) return InvalidArgument(ctx, "condition selects index ", i, " beyond the dimension ", dim);
    keep.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  Shape out_shape = shape;
  out_shape[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* dst = out.data<U>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i : keep) {
        CopyN(dst, in.data<U>() + (o * dim + i) * inner, inner);
        dst += inner;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status ReverseSequenceKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  if (in.rank() < 2) return InvalidArgument(ctx, "input must have rank >= 2");
  const int64_t time_axis = ctx.node().GetInt("time_axis", 0), batch_axis = ctx.node().GetInt("batch_axis", 1);
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0))) {
    return InvalidArgument(ctx, "time_axis and batch_axis must be 0 and 1");
  }
  OI_ASSIGN(lens, IntsInput(ctx, 1));
  const int64_t T = in.dim(time_axis), B = in.dim(batch_axis);
  if (static_cast<int64_t>(lens.size()) != B) return InvalidArgument(ctx, "sequence_lens has ", lens.size(), " entries for batch ", B);
  for (int64_t l : lens) if (l < 0 || l > T) return InvalidArgument(ctx, "sequence length ", l, " is out of range [0, ", T, "]");
  const int64_t inner = in.num_elements() / std::max<int64_t>(1, T * B);
  const int64_t ts = (time_axis == 0 ? B : 1) * inner, bs = (time_axis == 0 ? 1 : T) * inner;
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), in.shape());
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t t = 0; t < T; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        CopyN(out.data<U>() + b * bs + t * ts, in.data<U>() + b * bs + from * ts, inner);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status UniqueKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const bool sorted = ctx.node().GetInt("sorted", 1) != 0;
  const bool has_axis = ctx.node().HasAttr("axis");
  int64_t axis = 0;
  Shape shape = {in.num_elements()};
  if (has_axis) {
    if (in.rank() == 0) return InvalidArgument(ctx, "axis given for a scalar input");
    OI_ASSIGN(a, Axis(ctx, ctx.node().GetInt("axis", 0), in.rank()));
    axis = a;
    shape = in.shape();
  }
  const int64_t n = shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t slice = outer * inner;  // elements of one slice along the axis
  return VisitAll(in.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    auto at = [&](int64_t i, int64_t e) -> const T& { return src[((e / inner) * n + i) * inner + e % inner]; };
    auto less = [&](int64_t a, int64_t b) {
      for (int64_t e = 0; e < slice; ++e) {
        if (at(a, e) < at(b, e)) return true;
        if (at(b, e) < at(a, e)) return false;
      }
      return false;
    };
    auto equal = [&](int64_t a, int64_t b) { return !less(a, b) && !less(b, a); };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), less);
    // Groups of equal slices; each keeps its first occurrence (stable sort puts it first).
    std::vector<int64_t> first, count, group_of(static_cast<size_t>(n));
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || !equal(order[k - 1], order[k])) {
        first.push_back(order[k]);
        count.push_back(0);
      }
      count.back()++;
      group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(first.size()) - 1;
    }
    std::vector<int64_t> rank_of(first.size());  // group -> output position
    std::vector<int64_t> pos(first.size());
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted) std::sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
    for (size_t k = 0; k < pos.size(); ++k) rank_of[static_cast<size_t>(pos[k])] = static_cast<int64_t>(k);
    const int64_t u = static_cast<int64_t>(first.size());
    Shape y_shape = shape;
    y_shape[static_cast<size_t>(axis)] = u;
    T* y = ctx.AllocateOutput(0, in.dtype(), y_shape).template data<T>();
    for (int64_t k = 0; k < u; ++k) {
      const int64_t g = pos[static_cast<size_t>(k)];
      for (int64_t e = 0; e < slice; ++e) y[((e / inner) * u + k) * inner + e % inner] = at(first[static_cast<size_t>(g)], e);
    }
    if (ctx.has_output(1)) {
      int64_t* p = ctx.AllocateOutput(1, DType::kInt64, {u}).data<int64_t>();
      for (int64_t k = 0; k < u; ++k) p[k] = first[static_cast<size_t>(pos[static_cast<size_t>(k)])];
    }
    if (ctx.has_output(2)) {
      int64_t* p = ctx.AllocateOutput(2, DType::kInt64, {n}).data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
    }
    if (ctx.has_output(3)) {
      int64_t* p = ctx.AllocateOutput(3, DType::kInt64, {u}).data<int64_t>();
      for (int64_t k = 0; k < u; ++k) p[k] = count[static_cast<size_t>(pos[static_cast<size_t>(k)])];
    }
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterSelectionOps(KernelRegistry& r) {
  AddVersions(r, "NonZero", {9, 13}, NonZeroKernel);
  AddVersions(r, "Compress", {9, 11}, CompressKernel);
  AddVersions(r, "ReverseSequence", {10}, ReverseSequenceKernel);
  AddVersions(r, "Unique", {11}, UniqueKernel);
}

}  // namespace oneinfer
