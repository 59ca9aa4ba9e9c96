// oneinfer::Tensor: a dense n-dimensional array that owns or views its memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oneinfer/export.h"

namespace oneinfer {

// Element types. The numeric values are ONNX's TensorProto.DataType codes.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kUInt4 = 21,  // two values per byte, low nibble first
  kInt4 = 22,
};

// Bytes per element; 0 for kUndefined, sizeof(std::string) for kString, 1 for 4-bit
// types (use StorageBytes for their real size).
ONEINFER_API size_t DTypeSize(DType t);
// Bytes needed to store n elements of t (4-bit types pack two per byte).
ONEINFER_API size_t StorageBytes(DType t, int64_t n);
ONEINFER_API const char* DTypeName(DType t);
ONEINFER_API bool IsFloatingPoint(DType t);
ONEINFER_API bool IsInteger(DType t);

using Shape = std::vector<int64_t>;
ONEINFER_API int64_t NumElements(const Shape& shape);
ONEINFER_API std::string ShapeToString(const Shape& shape);

// A tensor shares its storage through a reference-counted holder: copies are cheap
// views of the same memory. Storage is released when the last tensor referring to it
// goes away. A view made with View() does not own its memory; the caller keeps it alive.
// Thread safety: distinct Tensor objects may be used from different threads; writing
// the elements of shared storage from several threads at once is the caller's problem.
class ONEINFER_API Tensor {
 public:
  Tensor() = default;

  // Allocates zero-initialised storage (strings are empty).
  static Tensor Empty(DType dtype, Shape shape);
  // Non-owning view over caller memory.
  static Tensor View(DType dtype, Shape shape, void* data);
  // Shares `holder` (kept alive as long as any tensor refers to it) and points at data.
  static Tensor Wrap(DType dtype, Shape shape, std::shared_ptr<void> holder, void* data);
  // Copies the values into a new tensor.
  template <typename T>
  static Tensor FromVector(DType dtype, Shape shape, const std::vector<T>& values);

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t byte_size() const { return StorageBytes(dtype_, num_elements()); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape with the same element count.
  Tensor Reshaped(Shape shape) const;
  // Deep copy into freshly allocated storage.
  Tensor Clone() const;
  // True when both tensors point at the same first element.
  bool SharesDataWith(const Tensor& other) const { return data_ != nullptr && data_ == other.data_; }
  const std::shared_ptr<void>& holder() const { return holder_; }

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<void> holder_;
  void* data_ = nullptr;
};

template <typename T>
Tensor Tensor::FromVector(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Empty(dtype, std::move(shape));
  T* out = t.data<T>();
  const size_t n = static_cast<size_t>(t.num_elements());
  for (size_t i = 0; i < n && i < values.size(); ++i) out[i] = values[i];
  return t;
}

}  // namespace oneinfer
