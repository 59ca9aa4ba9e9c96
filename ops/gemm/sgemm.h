// Float GEMM: packed-panel, register-blocked kernels with run-time ISA dispatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

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
// of kSgemmPanel floats, each K x kSgemmPanel row-major, the last one zero-padded.
inline constexpr int64_t kSgemmPanel = 32;

class PackedMatrixB {
 public:
  PackedMatrixB() = default;
  // pool (may be null) splits the packing over panels.
  static PackedMatrixB Pack(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                            ThreadPool* pool = nullptr);

  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  size_t bytes() const { return static_cast<size_t>(panels()) * k_ * kSgemmPanel * sizeof(float); }
  int64_t panels() const { return (n_ + kSgemmPanel - 1) / kSgemmPanel; }
  // Panel p starts at data() + p * K() * kSgemmPanel.
  const float* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int64_t k_ = 0;
  int64_t n_ = 0;
  std::unique_ptr<float[], Free> data_;
};

// C[M x N] = alpha * A[M x K] * B + beta * C with A row-major (lda) and B pre-packed.
void SgemmPacked(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const PackedMatrixB& B, float beta, float* C, int64_t ldc, ThreadPool* pool);

// "avx512", "avx2" or "portable": the tier in use, chosen by base/kernel_tier.h
// (KernelFamily::kFloat): the best this CPU runs unless SetKernelTier forced one.
const char* SgemmTierName();

}  // namespace oneinfer
