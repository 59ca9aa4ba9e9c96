// The one int8 weight quantiser: the Qwen3 exporter's int8 weights, the A8W8 quantizer's QDQ
// weights and the run-time dynamic A8W8 MatMul's packed weights all come from here.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>

namespace oneinfer {

// Symmetric int8 codes reach +-127 (not -128), so that a product of two codes fits the VNNI sums.
inline constexpr float kS8Max = 127.0f;

// round-half-to-even(x / scale) clamped to [-127, 127]: cvtss2si rounds in the MXCSR mode,
// nearest-even in the default floating-point environment, which the engine never changes
// (std::nearbyint is a libm call on the SSE2 baseline; roundss needs SSE4.1). Clamping before
// rounding is the same as after, since the bounds are integers. Weights and activations share it.
inline int8_t QuantizeToS8(float x, float scale) {
  const float v = std::clamp(x / scale, -kS8Max, kS8Max);
  return static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(v)));
}

// Where a weight matrix holds its output columns.
enum class WeightLayout {
  kKN,  // K x N row-major (an ONNX MatMul B): column n is w[k * N + n]
  kNK,  // N x K row-major (a checkpoint's [out, in], Gemm with transB = 1): column n is row n
};

// Symmetric int8: scale = amax / 127 over each output column (per_column) or over the whole
// tensor, q = round-half-to-even(w / scale) clamped to [-127, 127]. q has w's layout (K * N
// codes); scales: N entries per column, 1 per tensor.
// An all-zero column (or tensor) gets scale 1 and codes 0: any scale gives the same zero
// product, but the exported scales are read by other runtimes, where a zero scale is invalid
// (QuantizeLinear divides by it, TensorRT refuses it) and ONNX Runtime's quantizer writes 1.
void QuantizeWeightsS8(const float* w, int64_t K, int64_t N, WeightLayout layout, bool per_column,
                       int8_t* q, float* scales);

}  // namespace oneinfer
