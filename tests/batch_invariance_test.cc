// Batch invariance of the GEMMs that Session::RunBatch runs over stacked rows: on every kernel
// tier, each row of an M-row product has the same bits as the product of that row alone, so a
// sequence's logits do not depend on what else is in the batch.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/half.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm.h"
#include "quant/dynamic_a8w8.h"
#include "quant/gemm_q4.h"

namespace oneinfer {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Computes all M rows at once (with threads) and each row alone (without), and compares.
template <typename Multiply>
void ExpectRowsInvariant(const std::string& what, int64_t M, int64_t K, int64_t N, const Multiply& multiply) {
  ThreadPool pool(2);
  std::mt19937 rng(static_cast<unsigned>(M * 1000 + K + N));
  const std::vector<float> a = Random(static_cast<size_t>(M * K), rng, -2.0f, 2.0f);
  std::vector<float> all(static_cast<size_t>(M * N)), one(static_cast<size_t>(N));
  multiply(M, a.data(), all.data(), &pool);
  for (int64_t r = 0; r < M; ++r) {
    multiply(1, a.data() + r * K, one.data(), nullptr);
    for (int64_t n = 0; n < N; ++n) {
      ASSERT_EQ(all[static_cast<size_t>(r * N + n)], one[static_cast<size_t>(n)])
          << what << " M=" << M << " K=" << K << " N=" << N << " row " << r << " column " << n;
    }
  }
}

const std::vector<int64_t> kRows = {2, 3, 5, 8, 9, 13, 24};

TEST(BatchInvariance, FloatGemmOnPackedPanelsEveryTier) {
  std::mt19937 rng(3);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kFloat)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kFloat, tier));
    for (int64_t K : {7, 256, 600})
      for (int64_t N : {5, 33, 70}) {
        const std::vector<float> b = Random(static_cast<size_t>(K * N), rng, -1.0f, 1.0f);
        std::vector<uint16_t> bh(b.size());
        for (size_t i = 0; i < b.size(); ++i) bh[i] = F32ToF16(b[i]);
        const PackedMatrixB packed = PackedMatrixB::Pack(false, K, N, b.data(), N);
        const PackedMatrixB half = PackedMatrixB::PackHalf(false, K, N, bh.data(), N);
        for (int64_t M : kRows) {
          ExpectRowsInvariant(tier + " float32", M, K, N, [&](int64_t m, const float* a, float* y, ThreadPool* pool) {
            SgemmPacked(m, N, K, 1.0f, a, K, packed, 0.0f, y, N, pool);
          });
          ExpectRowsInvariant(tier + " float16", M, K, N, [&](int64_t m, const float* a, float* y, ThreadPool* pool) {
            SgemmPacked(m, N, K, 1.0f, a, K, half, 0.0f, y, N, pool);
          });
        }
      }
  }
  ResetKernelTier(KernelFamily::kFloat);
}

TEST(BatchInvariance, DynamicInt8EveryTier) {
  std::mt19937 rng(4);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier));
    for (int64_t K : {16, 300})
      for (int64_t N : {7, 48}) {
        const std::vector<float> b = Random(static_cast<size_t>(K * N), rng, -1.0f, 1.0f);
        const A8W8Weights w = A8W8Weights::FromFloat(b.data(), K, N);
        for (int64_t M : kRows) {
          ExpectRowsInvariant(tier + " a8w8", M, K, N, [&](int64_t m, const float* a, float* y, ThreadPool* pool) {
            MatMulA8W8(m, a, w, y, pool);
          });
        }
      }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

TEST(BatchInvariance, FourBitBothActivationFormsEveryTier) {
  std::mt19937 rng(5);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kQ4)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kQ4, tier));
    for (int64_t K : {32, 160})
      for (int64_t N : {9, 33}) {
        std::vector<uint8_t> codes(static_cast<size_t>(N * K));
        for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() % 16);
        const std::vector<float> d = Random(static_cast<size_t>(N * K / 32), rng, 0.001f, 0.1f);
        const std::vector<float> m = Random(static_cast<size_t>(N * K / 32), rng, -0.8f, 0.0f);
        auto w = PackedWeightsQ4::Pack(K, N, codes.data(), d.data(), m.data(), nullptr);
        ASSERT_TRUE(w.ok()) << w.status();
        for (int64_t M : kRows) {
          ExpectRowsInvariant(tier + " q4 int8", M, K, N, [&](int64_t r, const float* a, float* y, ThreadPool* pool) {
            MatMulQ4(r, a, *w, y, pool);
          });
          ExpectRowsInvariant(tier + " q4 float", M, K, N, [&](int64_t r, const float* a, float* y, ThreadPool* pool) {
            MatMulQ4Float(r, a, *w, y, pool);
          });
        }
      }
  }
  ResetKernelTier(KernelFamily::kQ4);
}

}  // namespace
}  // namespace oneinfer
