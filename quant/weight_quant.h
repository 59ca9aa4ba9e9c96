// The one int8 weight quantiser: the Qwen3 exporter's int8 weights, the A8W8 quantizer's QDQ
// weights and the run-time dynamic A8W8 MatMul's packed weights all come from here.
#pragma once

#include <cstdint>

namespace oneinfer {

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
