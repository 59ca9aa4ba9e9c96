// Int8 GEMM: C_s32[M x N] = A[M x K] (int8 or uint8) * W[K x N] (int8), exact int32 results,
// with weights packed once and a run-time ISA tier (reference, avx2, avx512vnni).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"

namespace oneinfer {

class ThreadPool;

// Packed layout: column panels of kGemmS8Panel int8 columns; K padded to a multiple of 4
// (padded_k). Panel p starts at data() + p * padded_k() * kGemmS8Panel and holds, for each
// k-quad q, 32 columns x 4 consecutive k: byte (q, j, t) = W[4q + t][32p + j] at offset
// q * 128 + j * 4 + t. Padding (k >= K or column >= N) is zero. This is the vpdpbusd operand
// order (one 32-bit lane = 4 k of one column); the AVX2 and reference tiers read it as well,
// so one packed matrix serves every tier.
inline constexpr int64_t kGemmS8Panel = 32;

class PackedWeightsS8 {
 public:
  // Largest K for which every tier is exact: |sum| <= K * 255 * 128 < 2^31.
  static constexpr int64_t kMaxK = 65536;

  PackedWeightsS8() = default;
  // w: K x N int8 row-major, leading dim ldw >= N. Requires 0 <= K <= kMaxK.
  // rows_done (optional) is called now and then with the number of rows of w read so far, so a
  // caller can drop a mapped source's pages while a large matrix is packed.
  static PackedWeightsS8 Pack(const int8_t* w, int64_t K, int64_t N, int64_t ldw,
                              const std::function<void(int64_t)>& rows_done = nullptr);
  // w: N x K int8 row-major (ONNX Gemm transB / an [out, in] weight), leading dim ldw >= K.
  static PackedWeightsS8 PackTransposed(const int8_t* w, int64_t K, int64_t N, int64_t ldw);

  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  int64_t padded_k() const { return (k_ + 3) / 4 * 4; }
  int64_t panels() const { return (n_ + kGemmS8Panel - 1) / kGemmS8Panel; }
  size_t bytes() const { return static_cast<size_t>(panels() * padded_k() * kGemmS8Panel); }
  const int8_t* data() const { return data_.get(); }
  // sum_k W[k][n] for n < panels() * kGemmS8Panel (zero past N): the +128 shift correction.
  const int32_t* column_sums() const { return col_sums_.data(); }

 private:
  struct Free {
    void operator()(int8_t* p) const { WeightBlockFree(p); }
  };
  static PackedWeightsS8 Allocate(int64_t K, int64_t N);  // zeroed data, zero column sums
  int64_t k_ = 0;
  int64_t n_ = 0;
  std::unique_ptr<int8_t[], Free> data_;
  std::vector<int32_t> col_sums_;
};

// c[M x N] (ldc) = a[M x K] (lda, row-major) * w. Bit-identical to the references below on
// every tier. pool may be null (single-threaded); decode-sized M splits N, larger M splits M
// and N. Uses a per-thread scratch for the prepared A (M x padded_k bytes or int16s).
void GemmS8S8S32(int64_t M, const int8_t* a, int64_t lda, const PackedWeightsS8& w, int32_t* c,
                 int64_t ldc, ThreadPool* pool);
void GemmU8S8S32(int64_t M, const uint8_t* a, int64_t lda, const PackedWeightsS8& w, int32_t* c,
                 int64_t ldc, ThreadPool* pool);

// y[M x N] (ldy) = (float(a w) * row_scales[m]) * col_scales[n]: GemmS8S8S32 with the dynamic
// A8W8 dequantisation applied to each tile while it is still in L1 (no int32 C in memory, no
// second pass over the rows). The same bits as GemmS8S8S32 then DequantizeRowS32 on each row.
void GemmS8S8F32Scaled(int64_t M, const int8_t* a, int64_t lda, const PackedWeightsS8& w,
                       const float* row_scales, const float* col_scales, float* y, int64_t ldy,
                       ThreadPool* pool);

// One weight of a grouped product and where its scaled result goes (y: M x N, ldy).
struct GemmS8ScaledOutput {
  const PackedWeightsS8* w;
  const float* col_scales;
  float* y;
  int64_t ldy;
};

// GemmS8S8F32Scaled of one a with several weights of the same K (a layer's q, k and v): a is
// prepared once and all their panels are shared out over the pool in one run. Each output has
// the bits GemmS8S8F32Scaled gives it alone.
void GemmS8S8F32ScaledGroup(int64_t M, const int8_t* a, int64_t lda, const std::vector<GemmS8ScaledOutput>& outs,
                            const float* row_scales, ThreadPool* pool);

// y[n] = (float(c[n]) * row_scale) * col_scales[n] for n < N.
void DequantizeRowS32(const int32_t* c, int64_t N, float row_scale, const float* col_scales, float* y);

// Plain triple loops, int32 accumulation, on unpacked row-major w (K x N, ldw): the oracles.
void gemm_s8s8_s32_reference(int64_t M, int64_t N, int64_t K, const int8_t* a, int64_t lda,
                             const int8_t* w, int64_t ldw, int32_t* c, int64_t ldc);
void gemm_u8s8_s32_reference(int64_t M, int64_t N, int64_t K, const uint8_t* a, int64_t lda,
                             const int8_t* w, int64_t ldw, int32_t* c, int64_t ldc);

// "reference", "avx2" or "avx512vnni": the tier in use, chosen by base/kernel_tier.h
// (KernelFamily::kInt8): the best this CPU and OS run unless SetKernelTier forced one.
const char* Int8TierName();

}  // namespace oneinfer
