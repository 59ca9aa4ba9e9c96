// The MatMul binding table: which kernel a MatMul gets, decided by its second operand.
#pragma once

#include "oneinfer/common.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

enum class MatMulBinding {
  kGeneric,      // B is not a constant float32 / float16 matrix: the per-call GEMM (attention products)
  kFloatPacked,  // constant float32 (or float16, kept in 2 bytes) B packed once for the float GEMM
  kInt8A8W8,     // constant B quantised per column once; activations per row each call
};

// b: the constant second operand, or nullptr when B is computed at run time.
MatMulBinding BindMatMul(const Tensor* b, MatMulPrecision precision);

}  // namespace oneinfer
