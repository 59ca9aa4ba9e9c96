// Sgemm / SgemmPacked against the double-accumulating reference on every tier the CPU has.
#include "ops/gemm/sgemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"

namespace oneinfer {
namespace {

struct Shape {
  int64_t M, N, K;
};

// Tile edges of every tier (MR 4/6/8, NR 16/32) and of the cache blocks (Kc 256, Nc 512, Mc 192).
std::vector<Shape> GridShapes() {
  std::vector<Shape> shapes;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 64, 65})
      for (int64_t k : {1, 7, 256, 257}) shapes.push_back({m, n, k});
  for (Shape s : {Shape{1, 1000, 700}, Shape{3, 545, 513}, Shape{200, 600, 530},
                  Shape{193, 97, 300}, Shape{64, 1024, 64}, Shape{16, 160, 1024}})
    shapes.push_back(s);
  return shapes;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> Abs(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

struct Case {
  bool trans_a, trans_b;
  Shape s;
  float alpha, beta;
  int64_t pad;  // extra leading-dimension elements on A, B and C
};

std::string Describe(const Case& c) {
  return "M=" + std::to_string(c.s.M) + " N=" + std::to_string(c.s.N) +
         " K=" + std::to_string(c.s.K) + " ta=" + std::to_string(c.trans_a) +
         " tb=" + std::to_string(c.trans_b) + " alpha=" + std::to_string(c.alpha) +
         " beta=" + std::to_string(c.beta) + " pad=" + std::to_string(c.pad);
}

// Runs one case through Sgemm (or SgemmPacked) and checks every element of C, padding included.
void CheckCase(const Case& c, bool packed, ThreadPool* pool, std::mt19937& rng) {
  const auto [M, N, K] = c.s;
  const int64_t lda = (c.trans_a ? M : K) + c.pad;
  const int64_t ldb = (c.trans_b ? K : N) + c.pad;
  const int64_t ldc = N + c.pad;
  const std::vector<float> a = Random((c.trans_a ? K : M) * lda, rng);
  const std::vector<float> b = Random((c.trans_b ? N : K) * ldb, rng);
  std::vector<float> c0 = Random(M * ldc, rng);
  // beta == 0 must not read C: poison the live region with NaN.
  if (c.beta == 0.0f)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c0[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();

  std::vector<float> want = c0, got = c0, mag = Abs(c0);
  SgemmReference(c.trans_a, c.trans_b, M, N, K, c.alpha, a.data(), lda, b.data(), ldb, c.beta,
                 want.data(), ldc);
  SgemmReference(c.trans_a, c.trans_b, M, N, K, std::fabs(c.alpha), Abs(a).data(), lda,
                 Abs(b).data(), ldb, std::fabs(c.beta), mag.data(), ldc);
  if (packed) {
    const PackedMatrixB pb = PackedMatrixB::Pack(c.trans_b, K, N, b.data(), ldb);
    ASSERT_EQ(pb.K(), K);
    ASSERT_EQ(pb.N(), N);
    SgemmPacked(M, N, K, c.alpha, a.data(), lda, pb, c.beta, got.data(), ldc, pool);
  } else {
    Sgemm(c.trans_a, c.trans_b, M, N, K, c.alpha, a.data(), lda, b.data(), ldb, c.beta,
          got.data(), ldc, pool);
  }
  // Float accumulation error grows ~sqrt(K); a single dropped term (~mag / K) still fails.
  const double rel = 2e-6 * std::sqrt(static_cast<double>(K) + 1.0);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t idx = i * ldc + j;
      if (j >= N) {
        ASSERT_EQ(got[idx], c0[idx]) << "padding written at " << i << "," << j << " "
                                     << Describe(c);
        continue;
      }
      const double tol = rel * (mag[idx] == 0.0f ? 1.0 : mag[idx]) + 1e-30;
      ASSERT_TRUE(std::isfinite(got[idx])) << i << "," << j << " " << Describe(c);
      ASSERT_NEAR(got[idx], want[idx], tol) << i << "," << j << " " << Describe(c);
    }
  }
}

class SgemmTierTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!SetKernelTier(KernelFamily::kFloat, GetParam()))
      GTEST_SKIP() << GetParam() << " not supported on this CPU";
  }
  void TearDown() override { ResetKernelTier(KernelFamily::kFloat); }

  // Cycles transposes, alpha/beta and padding through the grid so every combination is hit.
  void RunGrid(bool packed, ThreadPool* pool) {
    std::mt19937 rng(1234);
    const float alphas[] = {1.0f, -0.5f, 2.0f};
    const float betas[] = {0.0f, 1.0f, 0.5f, 0.0f};
    const int64_t pads[] = {0, 3, 0, 17};
    int i = 0;
    for (const Shape& s : GridShapes()) {
      for (int t = 0; t < (packed ? 2 : 4); ++t, ++i) {
        const Case c{!packed && (t & 2) != 0, (t & 1) != 0, s, alphas[i % 3], betas[i % 4],
                     pads[(i / 4) % 4]};
        CheckCase(c, packed, pool, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
};

TEST_P(SgemmTierTest, UsesRequestedTier) { EXPECT_STREQ(SgemmTierName(), GetParam()); }

TEST_P(SgemmTierTest, GridSingleThread) { RunGrid(false, nullptr); }

TEST_P(SgemmTierTest, GridTwoThreads) {
  ThreadPool pool(2);
  RunGrid(false, &pool);
}

TEST_P(SgemmTierTest, PackedGridSingleThread) { RunGrid(true, nullptr); }

TEST_P(SgemmTierTest, PackedGridTwoThreads) {
  ThreadPool pool(2);
  RunGrid(true, &pool);
}

TEST_P(SgemmTierTest, OddThreadCountSplitsMAndN) {
  ThreadPool pool(3);
  std::mt19937 rng(7);
  for (Shape s : {Shape{100, 40, 300}, Shape{2, 300, 300}, Shape{40, 1000, 33}}) {
    CheckCase({false, false, s, 1.0f, 0.0f, 0}, false, &pool, rng);
    CheckCase({true, true, s, 1.0f, 1.0f, 5}, false, &pool, rng);
    CheckCase({false, true, s, 0.5f, 0.0f, 0}, true, &pool, rng);
  }
}

// Decode attention's Q x K^T (B transposed, read in place, up to 4 rows): a score's bits do not
// depend on how many rows of A or keys of B the call takes with it (a kernel's key groups and
// tail), so a sequence's scores are the same alone and in a stacked batch of heads.
// N = 37: groups of 16 dots (16 keys of one row, 8 of two, 4 of four) and the keys left over;
// K = 64 and 128 are head sizes with kernels of their own.
TEST_P(SgemmTierTest, TransposedSmallMElementsHaveTheBitsOfOneAlone) {
  std::mt19937 rng(21);
  for (int64_t K : {7, 16, 64, 128, 131}) {
    for (int64_t N : {13, 37}) {
      for (float beta : {0.0f, 0.5f}) {
        const int64_t M = 4;
        const std::vector<float> a = Random(M * K, rng), b = Random(N * K, rng), c0 = Random(M * N, rng);
        std::vector<float> all(M * N), one(1);
        for (int64_t m = 1; m <= M; ++m) {
          all = c0;
          Sgemm(false, true, m, N, K, 0.75f, a.data(), K, b.data(), K, beta, all.data(), N, nullptr);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < N; ++j) {
              one[0] = c0[i * N + j];
              Sgemm(false, true, 1, 1, K, 0.75f, a.data() + i * K, K, b.data() + j * K, K, beta, one.data(), 1, nullptr);
              ASSERT_EQ(std::memcmp(&all[i * N + j], one.data(), sizeof(float)), 0)
                  << "row " << i << " of " << m << ", key " << j << " of " << N << ", K " << K << ", beta " << beta;
            }
          }
        }
      }
    }
  }
}

// Decode attention's P x V (B read in place, up to 4 rows): each row has the bits of that row
// alone, whether the kernel holds the rows in registers (N up to 128 for one or two rows, 80 for
// three, 64 for four) or steps through them in memory (wider N).
TEST_P(SgemmTierTest, SmallMRowsHaveTheBitsOfOneAlone) {
  std::mt19937 rng(22);
  for (int64_t K : {1, 7, 64, 131}) {
    for (int64_t N : {13, 64, 80, 128, 130, 300}) {
      for (float beta : {0.0f, 0.5f}) {
        const int64_t M = 4;
        const std::vector<float> a = Random(M * K, rng), b = Random(K * N, rng), c0 = Random(M * N, rng);
        std::vector<float> all(M * N), one(N);
        for (int64_t m = 1; m <= M; ++m) {
          all = c0;
          Sgemm(false, false, m, N, K, 0.75f, a.data(), K, b.data(), N, beta, all.data(), N, nullptr);
          for (int64_t i = 0; i < m; ++i) {
            std::copy(c0.begin() + i * N, c0.begin() + (i + 1) * N, one.begin());
            Sgemm(false, false, 1, N, K, 0.75f, a.data() + i * K, K, b.data(), N, beta, one.data(), N, nullptr);
            ASSERT_EQ(std::memcmp(&all[i * N], one.data(), N * sizeof(float)), 0)
                << "row " << i << " of " << m << ", N " << N << ", K " << K << ", beta " << beta;
          }
        }
      }
    }
  }
}

TEST_P(SgemmTierTest, DegenerateShapes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a(64, 1.0f), b(64, 1.0f);
  // M == 0 or N == 0: C untouched.
  std::vector<float> c(16, 7.0f);
  Sgemm(false, false, 0, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4, nullptr);
  Sgemm(false, false, 4, 0, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4, nullptr);
  for (float x : c) EXPECT_EQ(x, 7.0f);
  // K == 0: C = beta * C, and beta == 0 overwrites NaN with 0.
  Sgemm(false, false, 4, 4, 0, 1.0f, a.data(), 1, b.data(), 4, 0.5f, c.data(), 4, nullptr);
  for (float x : c) EXPECT_EQ(x, 3.5f);
  std::fill(c.begin(), c.end(), nan);
  Sgemm(true, true, 4, 4, 0, 1.0f, a.data(), 4, b.data(), 1, 0.0f, c.data(), 4, nullptr);
  for (float x : c) EXPECT_EQ(x, 0.0f);
  // alpha == 0 ignores A and B entirely.
  std::fill(c.begin(), c.end(), 2.0f);
  Sgemm(false, false, 4, 4, 4, 0.0f, a.data(), 4, b.data(), 4, 1.5f, c.data(), 4, nullptr);
  for (float x : c) EXPECT_EQ(x, 3.0f);
  // Packing an empty matrix and using it.
  const PackedMatrixB pb = PackedMatrixB::Pack(false, 0, 4, b.data(), 4);
  EXPECT_EQ(pb.bytes(), 0u);
  std::fill(c.begin(), c.end(), nan);
  SgemmPacked(4, 4, 0, 1.0f, a.data(), 1, pb, 0.0f, c.data(), 4, nullptr);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(AllTiers, SgemmTierTest,
                         ::testing::Values("portable", "avx2", "avx512"),
                         [](const auto& p) { return std::string(p.param); });

TEST(SgemmTier, UnknownNameFallsBackToBest) {
  ResetKernelTier(KernelFamily::kFloat);
  const std::string best = SgemmTierName();
  // The default is the best tier this CPU runs.
  EXPECT_EQ(best, SupportedKernelTiers(KernelFamily::kFloat).back());
  EXPECT_FALSE(SetKernelTier(KernelFamily::kFloat, "sse9"));
  EXPECT_EQ(SgemmTierName(), best);
  // The top tier: in use when the CPU has it, else the best available (never upward).
  EXPECT_EQ(SetKernelTier(KernelFamily::kFloat, "avx512"), best == "avx512");
  EXPECT_EQ(SgemmTierName(), best);
  // The old entry point forwards to the same selector.
  EXPECT_TRUE(SetKernelTier(KernelFamily::kFloat, "portable"));
  EXPECT_STREQ(ActiveKernelTierName(KernelFamily::kFloat), "portable");
  ResetKernelTier(KernelFamily::kFloat);
  EXPECT_EQ(SgemmTierName(), best);
}

TEST(PackedMatrixB, LayoutAndSize) {
  std::vector<float> b(3 * 40);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  const PackedMatrixB pb = PackedMatrixB::Pack(false, 3, 40, b.data(), 40);
  ASSERT_EQ(pb.bytes(), 2u * 3 * kSgemmPanel * sizeof(float));
  EXPECT_EQ(pb.data()[kSgemmPanel * 1 + 5], b[1 * 40 + 5]);                  // panel 0, k=1
  EXPECT_EQ(pb.data()[3 * kSgemmPanel + kSgemmPanel * 2 + 7], b[2 * 40 + 39]);  // panel 1, k=2
  EXPECT_EQ(pb.data()[3 * kSgemmPanel + 8], 0.0f);                            // zero padding
}

// float16 panels (PackHalf): the product of the widened values, on every tier, at the tile and
// cache-block edges, both orientations of B, 1 and 3 threads; and bit-identical to the float32
// packing of the same values for every M (decode tiles widen in register, the others in scratch).
TEST(PackedMatrixB, HalfPanelsComputeTheWidenedProduct) {
  ThreadPool pool(3);
  std::mt19937 rng(23);
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kFloat)) {
    ASSERT_TRUE(SetKernelTier(KernelFamily::kFloat, tier));
    for (const Shape& sh : GridShapes()) {
      const int64_t M = sh.M, N = sh.N, K = sh.K;
      for (bool trans_b : {false, true}) {
        const std::vector<float> a = Random(M * K, rng);
        std::vector<uint16_t> bh(static_cast<size_t>(K * N));
        std::vector<float> bw(bh.size());
        const std::vector<float> b = Random(bh.size(), rng);
        for (size_t i = 0; i < bh.size(); ++i) {
          bh[i] = F32ToF16(b[i]);
          bw[i] = F16ToF32(bh[i]);
        }
        const int64_t ldb = trans_b ? K : N;
        const PackedMatrixB ph = PackedMatrixB::PackHalf(trans_b, K, N, bh.data(), ldb);
        const PackedMatrixB pf = PackedMatrixB::Pack(trans_b, K, N, bw.data(), ldb);
        ASSERT_TRUE(ph.half());
        ASSERT_EQ(ph.bytes() * 2, pf.bytes());
        std::vector<float> want(M * N), got(M * N), got_f(M * N);
        SgemmReference(false, trans_b, M, N, K, 1.0f, a.data(), K, bw.data(), ldb, 0.0f, want.data(), N);
        SgemmPacked(M, N, K, 1.0f, a.data(), K, ph, 0.0f, got.data(), N, (M * N) % 2 ? &pool : nullptr);
        SgemmPacked(M, N, K, 1.0f, a.data(), K, pf, 0.0f, got_f.data(), N, (M * N) % 2 ? &pool : nullptr);
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-5 * K + 1e-6) << tier << " M=" << M << " N=" << N << " K=" << K;
          ASSERT_EQ(got[i], got_f[i]) << tier << " M=" << M << " N=" << N << " K=" << K;
        }
      }
    }
  }
  ResetKernelTier(KernelFamily::kFloat);
}

}  // namespace
}  // namespace oneinfer
