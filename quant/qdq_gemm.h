// Exact fused QDQ MatMul on the int8 GEMM:
//   DequantizeLinear(x_q, s_x, zp_x), DequantizeLinear(w_q, s_w, zp_w) -> MatMul [-> QuantizeLinear(s_y, zp_y)]
// computed as one integer product and one epilogue, with no dequantised float tensor.
//
// The arithmetic (docs/qdq.md):
//   acc[r][n] = sum_k (a[r][k] - zx[r]) * (w[k][n] - zw[n])                          (exact, int64)
//             = sum_k a*w' - zx[r] * colsum(w')[n] - zw'[n] * rowsum(a)[r] + K * zx[r] * zw'[n]
// where w' is the int8 weight the GEMM multiplies (uint8 weights are shifted: w' = w - 128,
// zw' = zw - 128, so (w - zw) == (w' - zw') exactly). The int32 product sum_k a*w' comes from
// the packed GEMM (or an offload, base/gemm_offload.h); the corrections are int64. colsum(w') is the packed weight's own
// column sums (PackedWeightsS8::column_sums, filled while packing), read only when some zx != 0;
// rowsum(a) is taken per row in the epilogue, only when some zw' != 0.
//
// The epilogue, in this order and in these precisions (ONNX's QLinearMatMul reference formula):
//   quantised out: mult = float32(float32(s_x * s_w) / s_y)            (float32 ops, left to right)
//                  y_q  = saturate(round_half_even(double(acc) * double(mult)) + zp_y)
//                  (zero point added after rounding; NaN saturates to 0)
//   quantised out, returned dequantised (the group's QuantizeLinear was read only by a
//   DequantizeLinear of the same scale and zero point, folded too):
//                  y    = (float32(y_q) - float32(zp_y)) * s_y                      (float32 ops)
//   float out:     y    = float32(double(acc) * double(float32(s_x * s_w)))
//   int32 out:     y    = int32(acc) (MatMulInteger; wraps modulo 2^32 like the ONNX reference)
// The reference below uses the same two inline functions, so fast path and reference are
// bit-identical; against the per-node float path (float32 dequantise, float MatMul, float
// divide) results differ by at most one step where float rounding lands on the other side of a
// rounding tie.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/log.h"
#include "base/round.h"
#include "quant/gemm_s8.h"

namespace oneinfer {

class ThreadPool;

// kInt8AsFloat32 / kUInt8AsFloat32: quantised like kInt8 / kUInt8, then dequantised with the same
// y_scale and y_zero_point into float32 (a Q -> DQ pair folded into the group).
enum class QdqOut { kFloat32, kInt8, kUInt8, kInt32, kInt8AsFloat32, kUInt8AsFloat32 };
// Outputs that go through y_scale / y_zero_point (as stored, or dequantised again).
constexpr bool QdqOutputQuantised(QdqOut out) { return out != QdqOut::kFloat32 && out != QdqOut::kInt32; }
constexpr bool QdqOutputUnsigned(QdqOut out) { return out == QdqOut::kUInt8 || out == QdqOut::kUInt8AsFloat32; }
// Along what a quantised output's scale and zero point vary.
enum class QdqYAxis { kTensor, kRow, kColumn };

// Everything constant about one fused group. Row-indexed vectors (s_x, zp_x, and s_y/zp_y with
// kRow) hold one value, or a period R: activation row r (rows of the flattened [.., R, K] input)
// uses entry r % R. Column vectors (s_w, zp_w, s_y/zp_y with kColumn) hold 1 or N values.
struct QdqGemmParams {
  int64_t K = 0, N = 0;
  const void* w = nullptr;  // K x N row-major, int8 or uint8; must outlive the QdqGemm
  bool w_unsigned = false;
  bool x_unsigned = false;  // the activation type the group was built for
  std::vector<float> s_x{1.0f};
  std::vector<int32_t> zp_x;  // empty = 0
  std::vector<float> s_w{1.0f};
  std::vector<int32_t> zp_w;  // empty = 0
  QdqOut out = QdqOut::kFloat32;
  QdqYAxis y_axis = QdqYAxis::kTensor;
  std::vector<float> s_y;     // quantised outputs only; finite and non-zero
  std::vector<int32_t> zp_y;  // empty = 0
  bool trace = false;         // the qdq_colsum line on stderr too (SessionOptions::qdq_trace)
};

inline int64_t QdqRowIndex(int64_t r, size_t len) { return len <= 1 ? 0 : r % static_cast<int64_t>(len); }
inline int64_t QdqColIndex(int64_t n, size_t len) { return len <= 1 ? 0 : n; }

// float32(float32(s_x * s_w) / s_y): float operands, so the compiler evaluates it in float32.
inline float QdqMultiplier(float sx, float sw, float sy) { return sx * sw / sy; }

// saturate(round_half_even(double(acc) * double(mult)) + zp) under the default rounding mode.
inline int32_t QdqRequantize(int64_t acc, float mult, int32_t zp, int32_t lo, int32_t hi) {
  return SaturateRounded(static_cast<double>(acc) * static_cast<double>(mult), zp, lo, hi);
}

// DequantizeLinear of one requantised output: (float32(q) - float32(zp)) * s, in float32.
inline float QdqDequantizeOutput(int32_t q, int32_t zp, float sy) {
  return (static_cast<float>(q) - static_cast<float>(zp)) * sy;
}

inline float QdqDequantize(int64_t acc, float sx, float sw) {
  return static_cast<float>(static_cast<double>(acc) * static_cast<double>(sx * sw));
}

// Checks the parameters (sizes, types' ranges, output scales); the error names what is wrong.
absl::Status ValidateQdqGemmParams(const QdqGemmParams& p);

class QdqGemm {
 public:
  static absl::StatusOr<std::unique_ptr<QdqGemm>> Create(QdqGemmParams p);

  const QdqGemmParams& params() const { return p_; }
  int64_t K() const { return p_.K; }
  int64_t N() const { return p_.N; }

  // Packs the weight once (thread-safe; later calls return at once).
  void Prepare() const;
  // The int8 weight as the graph holds it (K x N row-major): the offload's operand and weight
  // identity. Null for uint8 weights (the device would need the shifted copy).
  const int8_t* weight_s8() const { return p_.w_unsigned ? nullptr : static_cast<const int8_t*>(p_.w); }
  // True once the epilogue has read the weight column sums (some zx != 0).
  bool colsum_used() const { return colsum_used_.load(std::memory_order_relaxed); }

  // c (rows x N, row-major) = a (rows x K, row-major, int8 or uint8) * w', on the packed GEMM.
  void HostProducts(int64_t rows, const void* a, bool a_unsigned, int32_t* c, ThreadPool* pool) const;

  // Output rows [row0, row0 + rows) (row0: the rows' position in the whole input, for the
  // periodic row parameters) from the raw products c of the same rows of a. zp_x overrides
  // params().zp_x when non-null (MatMulInteger's run-time a_zero_point), length zp_x_len.
  void Epilogue(int64_t rows, int64_t row0, const void* a, bool a_unsigned, const int32_t* c, void* y,
                ThreadPool* pool, const int32_t* zp_x = nullptr, size_t zp_x_len = 0) const;

  // Host products then epilogue for every row: the whole fused op without the NPU.
  void Run(int64_t rows, const void* a, bool a_unsigned, void* y, int32_t* scratch, ThreadPool* pool) const;

 private:
  explicit QdqGemm(QdqGemmParams p);
  QdqGemmParams p_;
  std::vector<int32_t> zw_;       // weight zero points in the int8 domain of w' (1 or N), all 0 = empty
  std::vector<float> col_mult_;   // mult per column when it does not depend on the row
  std::vector<float> col_sxsw_;   // float32(s_x * s_w) per column for float out with one s_x
  mutable std::once_flag packed_once_;
  mutable PackedWeightsS8 packed_;
  mutable std::atomic<bool> colsum_used_{false};
};

// The plain reference: a 64-bit integer triple loop over the original operands (w and zp_w as
// given, no shift) and the same epilogue functions. y as in Epilogue, for `rows` rows from row 0.
void QdqGemmReference(const QdqGemmParams& p, int64_t rows, const void* a, bool a_unsigned, void* y,
                      const int32_t* zp_x = nullptr, size_t zp_x_len = 0);

// Debug lines of the QDQ fusion and kernel: the kQdq category of the library's logger; to_stderr
// is the session's SessionOptions::qdq_trace.
inline bool QdqDebugEnabled(bool to_stderr) { return TraceEnabled(LogCategory::kQdq, to_stderr); }
inline void QdqDebug(std::string_view line, bool to_stderr) { Trace(LogCategory::kQdq, line, to_stderr); }
using QdqDebugSink = LogSink;
inline QdqDebugSink SetQdqDebugSink(QdqDebugSink sink) { return SetLogSink(LogCategory::kQdq, std::move(sink)); }

}  // namespace oneinfer
