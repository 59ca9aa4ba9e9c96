// Helpers shared by the data-movement families (ops/shape.cc, slice_concat.cc, gather_scatter.cc,
// generators.cc, selection.cc): storage-unit dispatch, strided copies, index and axis checks.
//
// Data movement does not look at values, so most kernels dispatch on the element's storage
// unit (1/2/4/8 bytes or std::string) through VisitMove instead of on every numeric type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer::movement {

#define OI_ASSIGN(lhs, expr)                     \
  auto lhs##_or = (expr);                        \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

#define OI_RETURN_IF_ERROR(expr)         \
  do {                                   \
    absl::Status _s = (expr);            \
    if (!_s.ok()) return _s;             \
  } while (0)

// Calls fn(TypeTag<U>{}) with U the storage unit of `dtype` (same-size unsigned int, or string).
template <typename Fn>
absl::Status VisitMove(DType dtype, Fn&& fn) {
  if (dtype == DType::kString) return fn(TypeTag<std::string>{});
  if (dtype == DType::kInt4 || dtype == DType::kUInt4 || dtype == DType::kUndefined) {
    return absl::UnimplementedError(absl::StrCat("unsupported element type ", DTypeName(dtype)));
  }
  switch (DTypeSize(dtype)) {
    case 1: return fn(TypeTag<uint8_t>{});
    case 2: return fn(TypeTag<uint16_t>{});
    case 4: return fn(TypeTag<uint32_t>{});
    case 8: return fn(TypeTag<uint64_t>{});
    default: return absl::UnimplementedError(absl::StrCat("unsupported element type ", DTypeName(dtype)));
  }
}

template <typename T>
inline void CopyN(T* dst, const T* src, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy(src, src + n, dst);
  }
}

// Runs fn(begin, end) over [0, n) items of `item_elems` elements each, in parallel when large.
void ParallelRows(OpContext& ctx, int64_t n, int64_t item_elems, const std::function<void(int64_t, int64_t)>& fn);

// out (contiguous, `shape`) [i...] = in[offset + sum i_k * strides_k]; strides may be 0 or negative.
absl::Status StridedCopyTensor(OpContext& ctx, const Tensor& in, int64_t offset, const Shape& shape,
                               const std::vector<int64_t>& strides, Tensor& out);

// A view of `in` starting `offset` elements in, sharing its storage (no copy).
Tensor SubView(const Tensor& in, int64_t offset, Shape shape);

// True when reading `shape` with `strides` walks one dense block of memory in order.
bool IsDense(const Shape& shape, const std::vector<int64_t>& strides);

// Reads an int tensor input as int64 values.
absl::StatusOr<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i);

// A possibly negative axis normalised against `rank`; the error names the node.
absl::StatusOr<int64_t> Axis(const OpContext& ctx, int64_t axis, int64_t rank);

// Axes (from an attribute or an input) normalised against `rank`, checked for duplicates.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, std::vector<int64_t> axes, int64_t rank);

absl::Status RequireInputs(const OpContext& ctx, std::initializer_list<size_t> required);

// Index into [0, dim) from a possibly negative index; error when out of range.
inline bool FixIndex(int64_t& i, int64_t dim) {
  if (i < -dim || i >= dim) return false;
  if (i < 0) i += dim;
  return true;
}

}  // namespace oneinfer::movement
