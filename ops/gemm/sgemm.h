// Float GEMM: packed-panel, register-blocked kernels with run-time ISA dispatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "base/huge_pages.h"

namespace oneinfer {

class ThreadPool;

// Row-major: C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C. op = transpose when
// trans_* is true (then A is stored K x M with leading dim lda, B is N x K with ldb).
// beta == 0 means C is not read (may hold NaN). pool may be null (single-threaded).
void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, ThreadPool* pool);

// Plain triple loop with double accumulation: the test oracle.
void SgemmReference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc);

// op(B) [K x N] packed once (at session load) into the kernels' panel layout: column panels
// of kSgemmPanel elements, each K x kSgemmPanel row-major, the last one zero-padded. The
// elements are float32, or float16 (PackHalf: a float16 model's weights keep their 2 bytes, and
// SgemmPacked widens each block of panels to float32, exactly, just before the kernels read it).
inline constexpr int64_t kSgemmPanel = 32;

class PackedMatrixB {
 public:
  PackedMatrixB() = default;
  // pool (may be null) splits the packing over panels.
  static PackedMatrixB Pack(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                            ThreadPool* pool = nullptr);
  // B as float16 bit patterns.
  static PackedMatrixB PackHalf(bool trans_b, int64_t K, int64_t N, const uint16_t* B, int64_t ldb,
                                ThreadPool* pool = nullptr);

  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  bool half() const { return half_; }
  size_t bytes() const {
    return static_cast<size_t>(panels()) * k_ * kSgemmPanel * (half_ ? sizeof(uint16_t) : sizeof(float));
  }
  int64_t panels() const { return (n_ + kSgemmPanel - 1) / kSgemmPanel; }
  // Panel p starts at data() + p * K() * kSgemmPanel (float32 packing).
  const float* data() const { return static_cast<const float*>(data_.get()); }
  // The same for PackHalf: float16 bit patterns.
  const uint16_t* half_data() const { return static_cast<const uint16_t*>(data_.get()); }

 private:
  struct Free {
    void operator()(void* p) const { WeightBlockFree(p); }
  };
  template <typename T>
  static PackedMatrixB PackAs(bool trans_b, int64_t K, int64_t N, const T* B, int64_t ldb, ThreadPool* pool);
  int64_t k_ = 0;
  int64_t n_ = 0;
  bool half_ = false;
  std::unique_ptr<void, Free> data_;
};

// C[M x N] = alpha * A[M x K] * B + beta * C with A row-major (lda) and B pre-packed.
void SgemmPacked(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const PackedMatrixB& B, float beta, float* C, int64_t ldc, ThreadPool* pool);

// "avx512", "avx2" or "portable": the tier in use, chosen by base/kernel_tier.h
// (KernelFamily::kFloat): the best this CPU runs unless SetKernelTier forced one.
const char* SgemmTierName();

}  // namespace oneinfer
