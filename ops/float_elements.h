// Element access for kernels that compute in float32 over float32, float16 or bfloat16 tensors
// (ONNX Runtime's CPU kernels do the same: widen, compute, round back once).
#pragma once

#include <cstdint>

#include "base/half.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

// Element i of a float32, float16 or bfloat16 tensor, as float32.
inline float FloatAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat16: return F16ToF32(t.data<uint16_t>()[i]);
    case DType::kBFloat16: return Bf16ToF32(t.data<uint16_t>()[i]);
    default: return t.data<float>()[i];
  }
}

// Stores v into element i, rounded to the tensor's type.
inline void SetFloatAt(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kFloat16: t.data<uint16_t>()[i] = F32ToF16(v); break;
    case DType::kBFloat16: t.data<uint16_t>()[i] = F32ToBf16(v); break;
    default: t.data<float>()[i] = v;
  }
}

}  // namespace oneinfer
