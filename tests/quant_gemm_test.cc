// Int8 GEMM: every tier the CPU has must be bit-identical to the triple-loop reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "quant/gemm_s8.h"

namespace oneinfer {
namespace {

constexpr int32_t kSentinel = 0x5A5A5A5A;

// How operand values are drawn.
enum class Values { kUniform, kExtremes, kMin, kMax };

template <typename T>
std::vector<T> Draw(size_t n, Values v, std::mt19937& rng) {
  constexpr int lo = std::is_signed_v<T> ? -128 : 0;
  constexpr int hi = std::is_signed_v<T> ? 127 : 255;
  std::uniform_int_distribution<int> uni(lo, hi), coin(0, 1);
  std::vector<T> out(n);
  for (T& x : out) {
    switch (v) {
      case Values::kUniform: x = static_cast<T>(uni(rng)); break;
      case Values::kExtremes: x = static_cast<T>(coin(rng) ? hi : lo); break;
      case Values::kMin: x = static_cast<T>(lo); break;
      case Values::kMax: x = static_cast<T>(hi); break;
    }
  }
  return out;
}

struct Case {
  int64_t M, N, K;
  int64_t pad = 0;          // extra leading-dimension elements on a, w and c
  bool transposed = false;  // pack from an [N, K] matrix
  Values a_values = Values::kUniform, w_values = Values::kUniform;
};

std::string Describe(const Case& c, bool s8) {
  return std::string(s8 ? "s8s8" : "u8s8") + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " pad=" + std::to_string(c.pad) + " transposed=" + std::to_string(c.transposed) +
         " a_values=" + std::to_string(static_cast<int>(c.a_values)) +
         " w_values=" + std::to_string(static_cast<int>(c.w_values)) + " tier=" + Int8TierName();
}

// Runs one case and checks every element of C, padding included (must stay untouched).
template <typename A>
void CheckCase(const Case& c, ThreadPool* pool, std::mt19937& rng) {
  constexpr bool kS8 = std::is_signed_v<A>;
  const auto [M, N, K, pad, transposed, av, wv] = c;
  const int64_t lda = K + pad, ldw = N + pad, ldc = N + pad;
  const std::vector<A> a = Draw<A>(M * lda, av, rng);
  const std::vector<int8_t> w = Draw<int8_t>(K * ldw, wv, rng);
  std::vector<int32_t> want(M * ldc, kSentinel), got(M * ldc, kSentinel);
  if constexpr (kS8)
    gemm_s8s8_s32_reference(M, N, K, a.data(), lda, w.data(), ldw, want.data(), ldc);
  else
    gemm_u8s8_s32_reference(M, N, K, a.data(), lda, w.data(), ldw, want.data(), ldc);

  PackedWeightsS8 packed;
  if (transposed) {
    const int64_t ldt = K + pad;
    std::vector<int8_t> wt(N * ldt, 99);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) wt[n * ldt + k] = w[k * ldw + n];
    packed = PackedWeightsS8::PackTransposed(wt.data(), K, N, ldt);
  } else {
    packed = PackedWeightsS8::Pack(w.data(), K, N, ldw);
  }
  ASSERT_EQ(packed.K(), K);
  ASSERT_EQ(packed.N(), N);
  if constexpr (kS8)
    GemmS8S8S32(M, a.data(), lda, packed, got.data(), ldc, pool);
  else
    GemmU8S8S32(M, a.data(), lda, packed, got.data(), ldc, pool);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ldc; ++j)
      ASSERT_EQ(got[i * ldc + j], want[i * ldc + j])
          << (j >= N ? "padding written at " : "mismatch at ") << i << "," << j << " "
          << Describe(c, kS8);
}

// Tile edges of every tier: MR 4, 6 and 8 (and their remainders), the AVX2 tiles of 8/32 columns, the 32-wide
// panel, k-quads of 4 and odd K.
std::vector<Case> GridCases() {
  std::vector<Case> cases;
  int i = 0;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65})
      for (int64_t k : {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 64, 65}) {
        Case c{m, n, k};
        c.pad = (i % 5 == 0) ? 3 : 0;
        c.transposed = (i % 3 == 0);
        ++i;
        cases.push_back(c);
      }
  return cases;
}

std::vector<Case> LargeCases() {
  return {{1, 1000, 700},       {3, 545, 513, 5},  {200, 600, 530},  {193, 97, 300, 0, true},
          {64, 1024, 64},       {16, 160, 1024},   {1, 3072, 1024},  {9, 33, 2049, 1, true},
          {129, 95, 1027, 0, false}, {600, 70, 130}, {2, 2048, 3071}};
}

class Int8TierTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!SetKernelTier(KernelFamily::kInt8, GetParam()))
      GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { ResetKernelTier(KernelFamily::kInt8); }

  template <typename A>
  void RunAll(const std::vector<Case>& cases, ThreadPool* pool) {
    std::mt19937 rng(1234);
    for (const Case& c : cases) {
      CheckCase<A>(c, pool, rng);
      if (HasFatalFailure()) return;
    }
  }
};

TEST_P(Int8TierTest, UsesRequestedTier) { EXPECT_STREQ(Int8TierName(), GetParam()); }

TEST_P(Int8TierTest, GridS8S8SingleThread) { RunAll<int8_t>(GridCases(), nullptr); }
TEST_P(Int8TierTest, GridU8S8SingleThread) { RunAll<uint8_t>(GridCases(), nullptr); }

TEST_P(Int8TierTest, LargeS8S8SingleThread) { RunAll<int8_t>(LargeCases(), nullptr); }
TEST_P(Int8TierTest, LargeU8S8SingleThread) { RunAll<uint8_t>(LargeCases(), nullptr); }

TEST_P(Int8TierTest, LargeTwoThreads) {
  ThreadPool pool(2);
  RunAll<int8_t>(LargeCases(), &pool);
  RunAll<uint8_t>(LargeCases(), &pool);
}

TEST_P(Int8TierTest, OddThreadCountSplitsMAndN) {
  ThreadPool pool(3);
  const std::vector<Case> cases = {{100, 40, 300}, {2, 300, 300}, {40, 1000, 33}, {97, 131, 257}};
  RunAll<int8_t>(cases, &pool);
  RunAll<uint8_t>(cases, &pool);
}

// -128 * -128 everywhere, 255 * -128, 127 * 127 ...: the largest magnitudes the shift and the
// int16 pairs must carry, with K long enough that partial sums pass +-2^24.
TEST_P(Int8TierTest, ExtremeValues) {
  std::vector<Case> cases;
  for (Values av : {Values::kMin, Values::kMax, Values::kExtremes})
    for (Values wv : {Values::kMin, Values::kMax, Values::kExtremes})
      for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 33, 4099},
                             {9, 65, 1025},
                             {17, 31, 7}}) {
        Case c{m, n, k};
        c.a_values = av;
        c.w_values = wv;
        c.transposed = (k == 1025);
        cases.push_back(c);
      }
  RunAll<int8_t>(cases, nullptr);
  RunAll<uint8_t>(cases, nullptr);
  ThreadPool pool(2);
  RunAll<int8_t>(cases, &pool);
  RunAll<uint8_t>(cases, &pool);
}

// K at the documented limit with the worst-case signs still fits int32.
TEST_P(Int8TierTest, MaxKWorstCase) {
  Case c{2, 33, PackedWeightsS8::kMaxK};
  c.a_values = Values::kMax;  // 255 for u8
  c.w_values = Values::kMin;  // -128
  std::mt19937 rng(5);
  CheckCase<uint8_t>(c, nullptr, rng);
  c.a_values = Values::kMin;  // -128 for s8
  CheckCase<int8_t>(c, nullptr, rng);
}

TEST_P(Int8TierTest, DegenerateShapes) {
  std::vector<int8_t> a(64, 1), w(64, 1);
  std::vector<int32_t> c(16, kSentinel);
  const PackedWeightsS8 p44 = PackedWeightsS8::Pack(w.data(), 4, 4, 4);
  GemmS8S8S32(0, a.data(), 4, p44, c.data(), 4, nullptr);  // M == 0: C untouched
  const PackedWeightsS8 p40 = PackedWeightsS8::Pack(w.data(), 4, 0, 4);
  GemmS8S8S32(4, a.data(), 4, p40, c.data(), 4, nullptr);  // N == 0: C untouched
  for (int32_t x : c) EXPECT_EQ(x, kSentinel);
  const PackedWeightsS8 p04 = PackedWeightsS8::Pack(w.data(), 0, 4, 4);
  EXPECT_EQ(p04.bytes(), 0u);
  GemmS8S8S32(4, a.data(), 1, p04, c.data(), 4, nullptr);  // K == 0: C = 0
  for (int32_t x : c) EXPECT_EQ(x, 0);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, Int8TierTest,
                         ::testing::Values("reference", "avx2", "avx512vnni"),
                         [](const auto& p) { return std::string(p.param); });

TEST(Int8Tier, SupportedTiersStartWithReference) {
  const std::vector<std::string> tiers = SupportedKernelTiers(KernelFamily::kInt8);
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers.front(), "reference");
  EXPECT_EQ(tiers, SupportedKernelTiers(KernelFamily::kInt8));
  ResetKernelTier(KernelFamily::kInt8);
  EXPECT_EQ(Int8TierName(), tiers.back());
}

TEST(Int8Tier, UnknownOrUnsupportedNameFallsBackToBest) {
  const std::string best = SupportedKernelTiers(KernelFamily::kInt8).back();
  EXPECT_FALSE(SetKernelTier(KernelFamily::kInt8, "sse9"));
  EXPECT_EQ(Int8TierName(), best);
  ResetKernelTier(KernelFamily::kInt8);
}

// SetKernelTier forces each tier the CPU has; a name above it, or unknown, gets the best
// available (never upward); the reset goes back to the best. The old entry point forwards.
TEST(Int8Tier, SetKernelTierForcesTier) {
  const std::vector<std::string> tiers = SupportedKernelTiers(KernelFamily::kInt8);
  for (const std::string& t : tiers) {
    EXPECT_TRUE(SetKernelTier(KernelFamily::kInt8, t));
    EXPECT_EQ(Int8TierName(), t);
  }
  EXPECT_FALSE(SetKernelTier(KernelFamily::kInt8, "no-such-tier"));
  EXPECT_EQ(Int8TierName(), tiers.back());
  ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, "reference"));
  ResetKernelTier(KernelFamily::kInt8);
  EXPECT_EQ(Int8TierName(), tiers.back());
  EXPECT_TRUE(SetKernelTier(KernelFamily::kInt8, "reference"));
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kInt8), "reference");
  ResetKernelTier(KernelFamily::kInt8);
  EXPECT_EQ(Int8TierName(), tiers.back());
}

TEST(PackedWeightsS8, LayoutAndColumnSums) {
  const int64_t K = 6, N = 35;  // K pads to 8, N to two panels
  std::vector<int8_t> w(K * N);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      w[k * N + n] = static_cast<int8_t>((k * 37 + n * 11) % 255 - 127);
  const PackedWeightsS8 p = PackedWeightsS8::Pack(w.data(), K, N, N);
  EXPECT_EQ(p.padded_k(), 8);
  EXPECT_EQ(p.panels(), 2);
  EXPECT_EQ(p.bytes(), size_t{2 * 8 * 32});
  for (int64_t n = 0; n < 64; ++n) {
    int32_t sum = 0;
    for (int64_t k = 0; k < 8; ++k) {
      const int8_t want = (k < K && n < N) ? w[k * N + n] : 0;
      const int8_t got = p.data()[(n / 32) * 8 * 32 + (k / 4) * 128 + (n % 32) * 4 + k % 4];
      EXPECT_EQ(got, want) << "k=" << k << " n=" << n;
      sum += want;
    }
    EXPECT_EQ(p.column_sums()[n], sum) << "n=" << n;
  }
  // PackTransposed of the transpose is byte-identical.
  std::vector<int8_t> wt(N * K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wt[n * K + k] = w[k * N + n];
  const PackedWeightsS8 t = PackedWeightsS8::PackTransposed(wt.data(), K, N, K);
  ASSERT_EQ(t.bytes(), p.bytes());
  EXPECT_EQ(std::vector<int8_t>(t.data(), t.data() + t.bytes()),
            std::vector<int8_t>(p.data(), p.data() + p.bytes()));
  EXPECT_EQ(std::vector<int32_t>(t.column_sums(), t.column_sums() + 64),
            std::vector<int32_t>(p.column_sums(), p.column_sums() + 64));
}

}  // namespace
}  // namespace oneinfer
