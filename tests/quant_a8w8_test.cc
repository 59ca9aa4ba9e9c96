// Dynamic A8W8: the quantisers' rules, exact plumbing through every int8 tier, and the 1 % gate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm.h"
#include "quant/dynamic_a8w8.h"
#include "quant/gemm_s8.h"

namespace oneinfer {
namespace {

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(QuantizeRowsS8, ScaleRoundHalfEvenClampAndZeroRow) {
  // K = 11: two vector groups of 4 and a scalar tail of 3, ties in both.
  // Row 0: amax 127 -> scale 1, so x / scale is x and the ties show round-half-to-even.
  // Row 1: all zero -> scale 0, q 0. Row 2: amax 2.54 -> scale 0.02.
  constexpr int64_t K = 11;
  const std::vector<float> x = {
      127.0f, 0.5f,  1.5f,  2.5f, -0.5f, -1.5f, -127.0f, 3.49f, -2.5f, 4.5f,  -3.5f,  //
      0.0f,   -0.0f, 0.0f,  0.0f, 0.0f,  0.0f,  0.0f,    0.0f,  0.0f,  0.0f,  0.0f,   //
      2.54f,  -2.54f, 1.0f, 0.01f, 0.03f, 0.0f, -1.0f,   0.5f,  0.05f, -0.07f, 1.27f};
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
  SCOPED_TRACE(tier);
  ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
  std::vector<int8_t> q(3 * K, 99);
  std::vector<float> s(3, -1.0f);
  QuantizeRowsS8(3, K, x.data(), K, q.data(), K, s.data());
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 2.54f / 127.0f);
  const std::vector<int8_t> row0 = {127, 0, 2, 2, 0, -2, -127, 3, -2, 4, -4};
  EXPECT_EQ(std::vector<int8_t>(q.begin(), q.begin() + K), row0);
  EXPECT_EQ(std::vector<int8_t>(q.begin() + K, q.begin() + 2 * K), std::vector<int8_t>(K, 0));
  for (int64_t k = 0; k < K; ++k) {
    const float want = std::clamp(std::nearbyint(x[2 * K + k] / s[2]), -127.0f, 127.0f);
    EXPECT_EQ(q[2 * K + k], static_cast<int8_t>(want)) << k;
  }
  EXPECT_EQ(q[2 * K], 127);
  EXPECT_EQ(q[2 * K + 1], -127);
  }
  ResetKernelTier(KernelFamily::kInt8);
}

// Vector body and tail agree with the definition on many random rows (ldx > K too), on every
// int8 tier (the SSE2 helpers' 4 and 8 lanes, AVX-512's 16 and its masked tail).
TEST(QuantizeRowsS8, MatchesDefinitionOnRandomRows) {
  std::mt19937 rng(9);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8))
  for (int64_t K : {1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 1000, 1024}) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
    const int64_t M = 5, ldx = K + 2;
    std::vector<float> x = RandomFloats(M * ldx, rng);
    for (float& v : x) v *= 3.0f;
    std::vector<int8_t> q(M * K);
    std::vector<float> s(M);
    QuantizeRowsS8(M, K, x.data(), ldx, q.data(), K, s.data());
    for (int64_t m = 0; m < M; ++m) {
      float amax = 0.0f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[m * ldx + k]));
      ASSERT_EQ(s[m], amax / 127.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float want = std::clamp(std::nearbyint(x[m * ldx + k] / s[m]), -127.0f, 127.0f);
        ASSERT_EQ(q[m * K + k], static_cast<int8_t>(want)) << tier << " K=" << K << " " << m << "," << k;
      }
    }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

// A NaN or an infinity anywhere in a row (first lane, a middle lane, the tail) gives that row a
// non-finite scale and zero codes on every tier, so all its outputs are NaN, as a float product
// with a NaN would be, instead of a NaN that one vector width keeps and another drops. The
// other rows keep the bits they have alone.
TEST(MatMulA8W8, NonFiniteRowGivesNaNRowOnEveryTier) {
  constexpr int64_t K = 37, N = 40;
  std::mt19937 rng(21);
  const std::vector<float> w = RandomFloats(K * N, rng);
  const A8W8Weights pw = A8W8Weights::FromFloat(w.data(), K, N);
  const std::vector<float> clean = RandomFloats(K, rng);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
    std::vector<float> alone(N);
    MatMulA8W8(1, clean.data(), pw, alone.data(), nullptr);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      for (int64_t at : {int64_t{0}, int64_t{5}, int64_t{17}, K - 1}) {
        std::vector<float> a(2 * K);
        std::copy(clean.begin(), clean.end(), a.begin());
        std::copy(clean.begin(), clean.end(), a.begin() + K);
        a[K + at] = bad;
        std::vector<int8_t> q(2 * K, 99);
        std::vector<float> sa(2);
        QuantizeRowsS8(2, K, a.data(), K, q.data(), K, sa.data());
        EXPECT_FALSE(std::isfinite(sa[1])) << tier << " " << bad << " at " << at;
        EXPECT_EQ(std::vector<int8_t>(q.begin() + K, q.end()), std::vector<int8_t>(K, 0)) << tier;
        std::vector<float> y(2 * N);
        MatMulA8W8(2, a.data(), pw, y.data(), nullptr);
        for (int64_t n = 0; n < N; ++n) {
          ASSERT_EQ(y[n], alone[n]) << tier << " " << n;
          ASSERT_TRUE(std::isnan(y[N + n])) << tier << " " << bad << " at " << at << " column " << n;
        }
      }
    }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

// The GEMM's dequantising epilogue and DequantizeRowS32 give the same bits on every tier (the
// products are per element whatever the width), tails included.
TEST(DequantizeRowS32, SameBitsOnEveryTier) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> big(-(1 << 24), 1 << 24);
  for (int64_t N : {1, 3, 15, 16, 17, 40, 1000}) {
    std::vector<int32_t> c(N);
    for (int32_t& v : c) v = big(rng);
    const std::vector<float> cs = RandomFloats(N, rng);
    std::vector<float> want(N);
    for (int64_t n = 0; n < N; ++n) want[n] = static_cast<float>(c[n]) * 0.0123f * cs[n];
    for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
      ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
      std::vector<float> y(N + 1, -7.0f);
      DequantizeRowS32(c.data(), N, 0.0123f, cs.data(), y.data());
      EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + N), want) << tier << " N=" << N;
      EXPECT_EQ(y[N], -7.0f) << tier << ": wrote past N";
    }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

TEST(A8W8Weights, PerColumnScalesAndNoFloatCopy) {
  const int64_t K = 5, N = 3;
  // Column 1 is all zero; column 2 has its amax negative.
  const std::vector<float> w = {1.0f, 0.0f, -4.0f, 0.5f, 0.0f, 2.0f, -0.25f, 0.0f, 1.0f,
                                0.0f, 0.0f, 0.0f,  2.0f, 0.0f, 0.1f};
  const A8W8Weights a = A8W8Weights::FromFloat(w.data(), K, N);
  ASSERT_EQ(a.K(), K);
  ASSERT_EQ(a.N(), N);
  EXPECT_EQ(a.scales()[0], 2.0f / 127.0f);
  EXPECT_EQ(a.scales()[1], 1.0f);  // all-zero column: quant/weight_quant.h
  EXPECT_EQ(a.scales()[2], 4.0f / 127.0f);
  // Resident: packed int8 (K padded to 8, one 32-wide panel), column sums, scales.
  EXPECT_EQ(a.bytes(), size_t{8 * 32 + 32 * 4 + 3 * 4});
  // The transposed constructor gives the same packed bytes and scales.
  std::vector<float> wt(N * K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wt[n * K + k] = w[k * N + n];
  const A8W8Weights t = A8W8Weights::FromFloatTransposed(wt.data(), K, N);
  EXPECT_EQ(std::vector<float>(t.scales(), t.scales() + N),
            std::vector<float>(a.scales(), a.scales() + N));
  EXPECT_EQ(std::vector<int8_t>(t.packed().data(), t.packed().data() + t.packed().bytes()),
            std::vector<int8_t>(a.packed().data(), a.packed().data() + a.packed().bytes()));
}

// MatMulA8W8 == quantise -> reference int GEMM -> C * s_a * s_w, bit for bit, on every tier.
TEST(MatMulA8W8, MatchesItsDefinitionOnEveryTier) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 67, 33},
                           {17, 130, 65},
                           {128, 257, 96}}) {
      std::vector<float> a = RandomFloats(M * K, rng), w = RandomFloats(K * N, rng);
      std::fill(a.begin(), a.begin() + K, 0.0f);  // an all-zero row
      const A8W8Weights pw = A8W8Weights::FromFloat(w.data(), K, N);
      std::vector<int8_t> qa(M * K), qw(K * N);
      std::vector<float> sa(M);
      QuantizeRowsS8(M, K, a.data(), K, qa.data(), K, sa.data());
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          const float s = pw.scales()[n];
          qw[k * N + n] = static_cast<int8_t>(
              s == 0.0f ? 0 : std::clamp(std::nearbyint(w[k * N + n] / s), -127.0f, 127.0f));
        }
      std::vector<int32_t> c(M * N);
      gemm_s8s8_s32_reference(M, N, K, qa.data(), K, qw.data(), N, c.data(), N);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(M * N, -1.0f);
        MatMulA8W8(M, a.data(), pw, y.data(), p);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n)
            ASSERT_EQ(y[m * N + n], static_cast<float>(c[m * N + n]) * sa[m] * pw.scales()[n])
                << tier << " M=" << M << " K=" << K << " N=" << N << " at " << m << "," << n;
      }
    }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

// The acceptance gate: random 1024^3, max |error| / max |float reference| <= 1 %.
TEST(MatMulA8W8, RandomSquare1024WithinOnePercent) {
  const int64_t M = 1024, K = 1024, N = 1024;
  std::mt19937 rng(11);
  const std::vector<float> a = RandomFloats(M * K, rng), w = RandomFloats(K * N, rng);
  std::vector<float> ref(M * N), y(M * N);
  Sgemm(false, false, M, N, K, 1.0f, a.data(), K, w.data(), N, 0.0f, ref.data(), N, nullptr);
  ThreadPool pool(2);
  const A8W8Weights pw = A8W8Weights::FromFloat(w.data(), K, N);
  MatMulA8W8(M, a.data(), pw, y.data(), &pool);
  double max_err = 0.0, max_ref = 0.0;
  for (int64_t i = 0; i < M * N; ++i) {
    max_err = std::max(max_err, std::fabs(double{y[i]} - ref[i]));
    max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
  }
  const double rel = max_err / max_ref;
  RecordProperty("max_abs_error", std::to_string(max_err));
  RecordProperty("relative", std::to_string(rel));
  std::printf("A8W8 1024^3 on %s: max|err| %.4g, max|ref| %.4g, ratio %.4g\n", Int8TierName(),
              max_err, max_ref, rel);
  EXPECT_LE(rel, 0.01);
}

}  // namespace
}  // namespace oneinfer
