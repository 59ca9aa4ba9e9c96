#include "oneinfer/tensor.h"

#include <cstring>
#include <limits>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "base/huge_pages.h"
#include "base/checked_math.h"

namespace oneinfer {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
    case DType::kInt4: case DType::kUInt4: return 1;
    case DType::kString: return sizeof(std::string);
    case DType::kUndefined: return 0;
  }
  return 0;
}

size_t StorageBytes(DType t, int64_t n) {
  if (n <= 0) return 0;
  if (t == DType::kInt4 || t == DType::kUInt4) return static_cast<size_t>((n + 1) / 2);
  return static_cast<size_t>(n) * DTypeSize(t);
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
  }
  return "unknown";
}

bool IsFloatingPoint(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

bool IsInteger(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
    case DType::kInt4: case DType::kUInt4:
      return true;
    default:
      return false;
  }
}

int64_t NumElements(const Shape& shape) {
  // A 0 dim makes 0 whatever the others are, and a product past int64 saturates instead of being
  // signed overflow (found by fuzz_tensor_proto: dims {7.8e17, 8044, 0}). Sizes from data are
  // checked before this (base/checked_math.h); the saturated value is never a usable size.
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::Empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // A shape from data may claim more than 64 bits can count: an exception the engine turns into
  // the node's ResourceExhausted, never a wrapped size.
  const absl::StatusOr<int64_t> checked = CheckedByteSize(dtype, t.shape_, absl::StrCat("a ", DTypeName(dtype), " tensor"));
  if (!checked.ok()) throw std::length_error(std::string(checked.status().message()));
  const int64_t n = NumElements(t.shape_);
  if (dtype == DType::kString) {
    auto* strings = new std::string[static_cast<size_t>(n > 0 ? n : 1)];
    t.holder_ = std::shared_ptr<void>(strings, [](void* p) { delete[] static_cast<std::string*>(p); });
    t.data_ = strings;
    return t;
  }
  const size_t bytes = StorageBytes(dtype, n);
  // A big tensor (a weight read from a file, a KV cache) gets huge pages, which are zero already.
  if (bytes >= kHugePageBytes && HugeAllocEnabled()) {
    if (void* p = HugeAlloc(bytes)) {
      t.holder_ = std::shared_ptr<void>(p, [bytes](void* q) { HugeFree(q, bytes); });
      t.data_ = p;
      return t;
    }
  }
  // 64-byte alignment keeps SIMD kernels on their fast paths.
  void* p = ::operator new(bytes > 0 ? bytes : 1, std::align_val_t{64});
  std::memset(p, 0, bytes);
  t.holder_ = std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t{64}); });
  t.data_ = p;
  return t;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::Wrap(DType dtype, Shape shape, std::shared_ptr<void> holder, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.holder_ = std::move(holder);
  t.data_ = data;
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Empty(dtype_, shape_);
  if (dtype_ == DType::kString) {
    const int64_t n = num_elements();
    for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (byte_size() > 0) {
    std::memcpy(t.data_, data_, byte_size());
  }
  return t;
}

}  // namespace oneinfer
