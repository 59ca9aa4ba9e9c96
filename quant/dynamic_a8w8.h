// Dynamic A8W8 MatMul: float activations quantised per row at run time, float weights
// quantised per output column once, int8 x int8 -> int32 on the int8 GEMM, then
// y[m][n] = C_s32[m][n] * s_a[m] * s_w[n].
//
// Weights made with an offload (base/gemm_offload.h, the session's NPU router) send the int32
// product through it: the offload decides which calls leave the host, every other call runs the
// packed host GEMM. Both give the same accumulators, so the output does not depend on the side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/gemm_offload.h"
#include "quant/gemm_s8.h"

namespace oneinfer {

class ThreadPool;

// Symmetric int8 with scale = amax / 127 and q = round-half-to-even(x / scale) clamped to
// [-127, 127]; an all-zero group gets scale 0 and q = 0 (no division by zero). A row with a NaN
// or an infinity gets q = 0 and scale NaN or inf (its outputs come out NaN); every int8 tier
// gives the same bits.
// x: M x K row-major (ldx); q: M x K (ldq); scales: M entries, one per row.
void QuantizeRowsS8(int64_t M, int64_t K, const float* x, int64_t ldx, int8_t* q, int64_t ldq,
                    float* scales);

// Constant MatMul weights quantised per output column and packed once; no float copy is kept.
class A8W8Weights {
 public:
  A8W8Weights() = default;
  // w: K x N float row-major (an ONNX MatMul B). With an offload, MatMulA8W8 sends the product
  // through it, and a K x N row-major int8 copy (the device's B) is kept only when
  // offload->PrepareDesign(K, N) says the device takes that shape.
  static A8W8Weights FromFloat(const float* w, int64_t K, int64_t N, Int8GemmOffload* offload = nullptr);
  // w: N x K float row-major (Gemm with transB = 1).
  static A8W8Weights FromFloatTransposed(const float* w, int64_t K, int64_t N);
  // Weights already quantised (an ONNX int8 DequantizeLinear with zero point 0):
  // w: K x N int8 codes row-major (ldw >= N), scales: N entries, W[k][n] = w[k][n] * scales[n].
  // rows_done: as PackedWeightsS8::Pack's.
  static A8W8Weights FromInt8(const int8_t* w, int64_t K, int64_t N, int64_t ldw,
                              const float* scales,
                              const std::function<void(int64_t)>& rows_done = nullptr);

  int64_t K() const { return packed_.K(); }
  int64_t N() const { return packed_.N(); }
  const PackedWeightsS8& packed() const { return packed_; }
  // s_w[n] = amax over column n / 127 (1 for an all-zero column: quant/weight_quant.h).
  const float* scales() const { return scales_.data(); }
  // The offload this weight was made for (null: host only).
  Int8GemmOffload* offload() const { return offload_; }
  // K x N int8 row-major, the weight's identity to the offload; null unless a device design
  // serves (K, N).
  const int8_t* device_copy() const { return device_copy_ ? device_copy_->q.data() : nullptr; }
  // Resident bytes: packed int8 panels, their column sums, the scales and the device copy.
  size_t bytes() const {
    return packed_.bytes() + packed_.panels() * kGemmS8Panel * sizeof(int32_t) +
           scales_.size() * sizeof(float) + (device_copy_ ? device_copy_->q.size() : 0);
  }

 private:
  // Owns the row-major copy and tells the offload to drop its device image when it goes.
  struct DeviceCopy {
    std::vector<int8_t> q;
    Int8GemmOffload* offload = nullptr;
    ~DeviceCopy();
  };

  PackedWeightsS8 packed_;
  std::vector<float> scales_;
  Int8GemmOffload* offload_ = nullptr;
  std::unique_ptr<DeviceCopy> device_copy_;
};

// y[M x N] = a[M x K] * W, both row-major and contiguous, through int8: A is quantised per row
// into a per-thread scratch, multiplied on the int8 GEMM (or the device, through w.offload()) and
// dequantised. pool may be null.
void MatMulA8W8(int64_t M, const float* a, const A8W8Weights& w, float* y, ThreadPool* pool);

// MatMulA8W8 of one a with several weights of the same K (a layer's q, k and v; an MLP's gate
// and up): a quantised once, the host weights' products in one parallel run. y[i] (M x N_i) has
// the bits MatMulA8W8(M, a, *w[i], y[i], pool) gives it.
void MatMulA8W8Group(int64_t M, const float* a, const std::vector<const A8W8Weights*>& w, const std::vector<float*>& y,
                     ThreadPool* pool);

}  // namespace oneinfer
