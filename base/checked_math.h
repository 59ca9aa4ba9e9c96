// Element counts and byte sizes multiplied with overflow checks, for shapes that come from files
// or data: a negative dim or a product past int64 is an error naming the value, never a wrapped size.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

// a * b for non-negative a and b; false when the product does not fit in int64.
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}

// The product of `shape`'s dims. `what` names the value in the error ("tensor 'w'").
// A shape with a 0 dim has 0 elements whatever its other dims.
inline absl::StatusOr<int64_t> CheckedElementCount(const Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(what, " has a negative dimension in ", ShapeToString(shape)));
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (!CheckedMul(n, d, &n)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the dims ", ShapeToString(shape),
                                                     " multiply past the largest int64 element count"));
    }
  }
  return n;
}

// The bytes `shape` of `dtype` occupies (StorageBytes's rule: 4-bit types pack two per byte;
// strings count their std::string objects).
inline absl::StatusOr<int64_t> CheckedByteSize(DType dtype, const Shape& shape, const std::string& what) {
  absl::StatusOr<int64_t> n = CheckedElementCount(shape, what);
  if (!n.ok()) return n.status();
  if (dtype == DType::kInt4 || dtype == DType::kUInt4) return *n / 2 + *n % 2;
  int64_t bytes = 0;
  if (!CheckedMul(*n, static_cast<int64_t>(DTypeSize(dtype)), &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", *n, " elements of ", DTypeName(dtype), " ",
                                                   ShapeToString(shape), " take more bytes than int64 holds"));
  }
  return bytes;
}

}  // namespace oneinfer
