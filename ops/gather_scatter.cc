// Indexed reads and writes: Gather, GatherElements, GatherND, ScatterND, ScatterElements (and its
// deprecated alias Scatter).
#include <algorithm>
#include <string>
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
// Gather family.

absl::Status GatherKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const int64_t dim = data.shape()[static_cast<size_t>(axis)];
  for (int64_t& i : idx) {
    if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for axis ", axis, " of size ", dim);
  }
  Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), ctx.input(1).shape().begin(), ctx.input(1).shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < data.rank(); ++d) inner *= data.shape()[static_cast<size_t>(d)];
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), out_shape);
  const int64_t n = static_cast<int64_t>(idx.size());
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = data.data<U>();
    U* dst = out.data<U>();
    ParallelRows(ctx, outer * n, inner, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / n, j = t % n;
        CopyN(dst + t * inner, src + (o * dim + idx[static_cast<size_t>(j)]) * inner, inner);
      }
    });
    return absl::OkStatus();
  });
}

// Calls fn(out_index, coords) for every index of `shape`, coords being its multi-index.
template <typename Fn>
void ForEachIndex(const Shape& shape, Fn&& fn) {
  const int64_t n = NumElements(shape);
  std::vector<int64_t> c(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(i, c);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
}

// Shared checks of GatherElements / ScatterElements: returns indices normalised into range.
absl::StatusOr<std::vector<int64_t>> ElementIndices(const OpContext& ctx, const Tensor& data, const Tensor& indices,
                                                    int64_t axis) {
  if (indices.rank() != data.rank()) {
    return InvalidArgument(ctx, "indices rank ", indices.rank(), " differs from data rank ", data.rank());
  }
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return InvalidArgument(ctx, "indices shape ", ShapeToString(indices.shape()), " exceeds data shape ",
                             ShapeToString(data.shape()), " outside the axis");
    }
  }
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const int64_t dim = data.dim(axis);
  for (int64_t& i : idx) {
    if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for axis ", axis, " of size ", dim);
  }
  return idx;
}

absl::Status GatherElementsKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, ElementIndices(ctx, data, indices, axis));
  const std::vector<int64_t> st = Strides(data.shape());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), indices.shape());
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = data.data<U>();
    U* dst = out.data<U>();
    ForEachIndex(indices.shape(), [&](int64_t i, const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t k = 0; k < c.size(); ++k) off += (static_cast<int64_t>(k) == axis ? idx[static_cast<size_t>(i)] : c[k]) * st[k];
      dst[i] = src[off];
    });
    return absl::OkStatus();
  });
}

// Element offsets of the slices GatherND/ScatterND address: for each index tuple (batched
// over the first batch_dims dims), the offset of data[batch, i0, ..., ik-1, ...].
absl::StatusOr<std::vector<int64_t>> NDOffsets(const OpContext& ctx, const Tensor& data, const Tensor& indices,
                                               int64_t batch_dims, int64_t* slice_elems) {
  if (indices.rank() < 1) return InvalidArgument(ctx, "indices must have rank >= 1");
  const int64_t k = indices.dim(-1), r = data.rank();
  if (batch_dims < 0 || batch_dims >= std::min(r, indices.rank())) {
    return InvalidArgument(ctx, "batch_dims ", batch_dims, " is out of range");
  }
  if (k < 1 || k > r - batch_dims) {
    return InvalidArgument(ctx, "indices last dimension ", k, " is out of range for data rank ", r);
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data.dim(d) != indices.dim(d)) return InvalidArgument(ctx, "batch dimension ", d, " differs between data and indices");
  }
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const std::vector<int64_t> st = Strides(data.shape());
  *slice_elems = 1;
  for (int64_t d = batch_dims + k; d < r; ++d) *slice_elems *= data.dim(d);
  int64_t batch = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batch *= data.dim(d);
  const int64_t batch_stride = batch_dims > 0 ? st[static_cast<size_t>(batch_dims - 1)] : 0;
  const int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = idx[static_cast<size_t>(t * k + j)];
      const int64_t dim = data.dim(batch_dims + j);
      if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for data dimension ", batch_dims + j, " of size ", dim);
      off += i * st[static_cast<size_t>(batch_dims + j)];
    }
    offsets[static_cast<size_t>(t)] = off;
  }
  return offsets;
}

absl::Status GatherNDKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t batch_dims = ctx.opset() >= 12 ? ctx.node().GetInt("batch_dims", 0) : 0;
  int64_t slice = 0;
  OI_ASSIGN(offsets, NDOffsets(ctx, data, indices, batch_dims, &slice));
  Shape out_shape(indices.shape().begin(), indices.shape().end() - 1);
  out_shape.insert(out_shape.end(), data.shape().begin() + batch_dims + indices.dim(-1), data.shape().end());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), out_shape);
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    for (size_t t = 0; t < offsets.size(); ++t) {
      CopyN(out.data<U>() + static_cast<int64_t>(t) * slice, data.data<U>() + offsets[t], slice);
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Scatter family.

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::Status ScatterCheck(const KernelInit& init) {
  if (init.opset() >= 18) return CheckOneOf(init, "reduction", "none", {"none", "add", "mul", "max", "min"});
  if (init.opset() >= 16) return CheckOneOf(init, "reduction", "none", {"none", "add", "mul"});
  return absl::OkStatus();
}

Reduction GetReduction(const OpContext& ctx) {
  const std::string r = ctx.opset() >= 16 ? ctx.node().GetString("reduction", "none") : "none";
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Reduction::kNone;
}

template <typename T>
inline void Apply(Reduction red, T& dst, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    dst = v;
  } else {
    switch (red) {
      case Reduction::kNone: dst = v; break;
      case Reduction::kAdd: dst = static_cast<T>(dst + v); break;
      case Reduction::kMul: dst = static_cast<T>(dst * v); break;
      case Reduction::kMax: if (dst < v) dst = v; break;
      case Reduction::kMin: if (v < dst) dst = v; break;
    }
  }
}

// Dispatches on the real element type when a reduction needs arithmetic, else on the storage unit.
template <typename Fn>
absl::Status VisitScatter(const OpContext& ctx, DType dt, Reduction red, Fn&& fn) {
  if (red == Reduction::kNone) return VisitMove(dt, fn);
  if (dt == DType::kString) return InvalidArgument(ctx, "reduction is not defined for strings");
  return VisitNumeric(dt, fn);
}

absl::Status ScatterNDKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (updates.dtype() != data.dtype()) return InvalidArgument(ctx, "updates and data have different element types");
  int64_t slice = 0;
  OI_ASSIGN(offsets, NDOffsets(ctx, data, indices, 0, &slice));
  Shape expect(indices.shape().begin(), indices.shape().end() - 1);
  expect.insert(expect.end(), data.shape().begin() + indices.dim(-1), data.shape().end());
  if (updates.shape() != expect) {
    return InvalidArgument(ctx, "updates shape ", ShapeToString(updates.shape()), " != expected ", ShapeToString(expect));
  }
  const Reduction red = GetReduction(ctx);
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), data.shape());
  return VisitScatter(ctx, data.dtype(), red, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    CopyN(dst, data.data<T>(), data.num_elements());
    const T* up = updates.data<T>();
    for (size_t t = 0; t < offsets.size(); ++t) {
      for (int64_t j = 0; j < slice; ++j) Apply(red, dst[offsets[t] + j], up[static_cast<int64_t>(t) * slice + j]);
    }
    return absl::OkStatus();
  });
}

absl::Status ScatterElementsKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (updates.dtype() != data.dtype()) return InvalidArgument(ctx, "updates and data have different element types");
  if (updates.shape() != indices.shape()) return InvalidArgument(ctx, "updates and indices have different shapes");
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, ElementIndices(ctx, data, indices, axis));
  const Reduction red = GetReduction(ctx);
  const std::vector<int64_t> st = Strides(data.shape());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), data.shape());
  return VisitScatter(ctx, data.dtype(), red, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    CopyN(dst, data.data<T>(), data.num_elements());
    const T* up = updates.data<T>();
    ForEachIndex(indices.shape(), [&](int64_t i, const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t k = 0; k < c.size(); ++k) off += (static_cast<int64_t>(k) == axis ? idx[static_cast<size_t>(i)] : c[k]) * st[k];
      Apply(red, dst[off], up[i]);
    });
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterGatherScatterOps(KernelRegistry& r) {
  AddVersions(r, "Gather", {1, 11, 13}, GatherKernel);
  AddVersions(r, "GatherElements", {11, 13}, GatherElementsKernel);
  AddVersions(r, "GatherND", {11, 12, 13}, GatherNDKernel);
  AddVersions(r, "ScatterND", {11, 13, 16, 18}, Checked(ScatterCheck, ScatterNDKernel));
  AddVersions(r, "ScatterElements", {11, 13, 16, 18}, Checked(ScatterCheck, ScatterElementsKernel));
  r.AddFn("", "Scatter", 9, 10, ScatterElementsKernel);  // deprecated alias of ScatterElements
}

}  // namespace oneinfer
