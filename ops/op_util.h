// Helpers shared by the operator families: dtype dispatch, axes, broadcasting.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ops/kernel.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

using float16 = Eigen::half;
using bfloat16 = Eigen::bfloat16;

template <typename T>
struct TypeTag {
  using type = T;
};

// C++ type -> DType.
template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <> constexpr DType DTypeOf<double>() { return DType::kFloat64; }
template <> constexpr DType DTypeOf<float16>() { return DType::kFloat16; }
template <> constexpr DType DTypeOf<bfloat16>() { return DType::kBFloat16; }
template <> constexpr DType DTypeOf<int8_t>() { return DType::kInt8; }
template <> constexpr DType DTypeOf<int16_t>() { return DType::kInt16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType DTypeOf<uint16_t>() { return DType::kUInt16; }
template <> constexpr DType DTypeOf<uint32_t>() { return DType::kUInt32; }
template <> constexpr DType DTypeOf<uint64_t>() { return DType::kUInt64; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }
template <> constexpr DType DTypeOf<std::string>() { return DType::kString; }

// Calls fn(TypeTag<T>{}) for the C++ type of `dtype`, for the numeric types (and bool).
// Returns an Unimplemented error naming the dtype otherwise.
template <typename Fn>
absl::Status VisitNumeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(TypeTag<float>{});
    case DType::kFloat64: return fn(TypeTag<double>{});
    case DType::kFloat16: return fn(TypeTag<float16>{});
    case DType::kBFloat16: return fn(TypeTag<bfloat16>{});
    case DType::kInt8: return fn(TypeTag<int8_t>{});
    case DType::kInt16: return fn(TypeTag<int16_t>{});
    case DType::kInt32: return fn(TypeTag<int32_t>{});
    case DType::kInt64: return fn(TypeTag<int64_t>{});
    case DType::kUInt8: return fn(TypeTag<uint8_t>{});
    case DType::kUInt16: return fn(TypeTag<uint16_t>{});
    case DType::kUInt32: return fn(TypeTag<uint32_t>{});
    case DType::kUInt64: return fn(TypeTag<uint64_t>{});
    case DType::kBool: return fn(TypeTag<bool>{});
    default:
      return absl::UnimplementedError(absl::StrCat("unsupported element type ", DTypeName(dtype)));
  }
}

// Same, for every type including strings (for data movement ops).
template <typename Fn>
absl::Status VisitAll(DType dtype, Fn&& fn) {
  if (dtype == DType::kString) return fn(TypeTag<std::string>{});
  return VisitNumeric(dtype, std::forward<Fn>(fn));
}

// Normalises a possibly negative axis into [0, rank); error names the node.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Reads a 1-D (or scalar) int32/int64 tensor as int64 values.
absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t);
// Reads a scalar of any numeric type as double.
absl::StatusOr<double> ReadScalar(const Tensor& t);

// Numpy-style multidirectional broadcasting of two or more shapes.
absl::StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes);
// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);
// Strides of `in` read as `out` under broadcasting (0 for broadcast dims); in is
// right-aligned against out.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// y = softmax(x) over one contiguous float32 row of n, exactly as the Softmax op computes it
// (ops/reduction.cc): fused kernels that end in a softmax share its arithmetic.
void SoftmaxRowF32(const float* x, float* y, int64_t n);

// y = sigmoid(x) over n contiguous float32 values, as the Sigmoid op computes it (ops/unary.cc):
// every element by Eigen's packet logistic, wherever it sits. Eigen's scalar logistic, which an
// unaligned or odd-length array gets at its ends, rounds differently below about -9, so an
// element's bits would follow its address (a row alone and in a stacked batch, or a fused
// kernel's block and the op's tensor). y may be x.
void SigmoidF32(const float* x, float* y, int64_t n);

// Copies n elements of src (from element soff) into dst (from element doff); strings too.
void CopyElems(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n);
// Product of s[from, to), clamped to the rank.
int64_t Prod(const Shape& s, size_t from, size_t to);
// 4-bit types pack two elements per byte, so element-wise copies cannot address them.
inline bool IsPacked(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

// Copies a tensor element-wise into another dtype (ONNX Cast semantics for numerics).
absl::StatusOr<Tensor> CastTensor(const Tensor& in, DType to);

// Kernel factories that read the node once at load time, so attribute errors fail the load.
// make(init) returns the KernelFn, or the error.
template <typename Make>
KernelFactory WithInit(Make make) {
  return [make](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::StatusOr<KernelFn> fn = make(init);
    if (!fn.ok()) return fn.status();
    return MakeFnKernel(*std::move(fn))(init);
  };
}
// fn, after check(init) accepts the node.
KernelFactory Checked(std::function<absl::Status(const KernelInit&)> check, KernelFn fn);
// Unimplemented unless string attribute `attr` (default `def`) is one of `allowed`.
absl::Status CheckOneOf(const KernelInit& init, const std::string& attr, const std::string& def,
                        std::initializer_list<const char*> allowed);

}  // namespace oneinfer
