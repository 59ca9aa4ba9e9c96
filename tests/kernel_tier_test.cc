// The one CPU probe and tier selector: the probe agrees with the compiler runtime's, each
// family's choice follows what its kernels were compiled for, and tiers are forced per family.
#include "base/kernel_tier.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "ops/gemm/sgemm.h"
#include "quant/gemm_q4.h"
#include "quant/gemm_s8.h"

namespace oneinfer {
namespace {

constexpr KernelFamily kFamilies[] = {KernelFamily::kFloat, KernelFamily::kInt8, KernelFamily::kQ4};

// libgcc's __builtin_cpu_supports also checks the OS's saved state (XGETBV): an oracle.
TEST(CpuFeatures, AgreesWithTheCompilerRuntime) {
  __builtin_cpu_init();
  const CpuFeatures& c = Cpu();
  EXPECT_EQ(c.avx, __builtin_cpu_supports("avx") != 0);
  EXPECT_EQ(c.avx2, __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(c.fma, __builtin_cpu_supports("fma") != 0);
  EXPECT_EQ(c.avx512f, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(c.avx512bw, __builtin_cpu_supports("avx512bw") != 0);
  EXPECT_EQ(c.avx512dq, __builtin_cpu_supports("avx512dq") != 0);
  EXPECT_EQ(c.avx512vl, __builtin_cpu_supports("avx512vl") != 0);
  EXPECT_EQ(c.avx512vnni, __builtin_cpu_supports("avx512vnni") != 0);
#if !defined(__clang__)
  EXPECT_EQ(c.avxvnni, __builtin_cpu_supports("avxvnni") != 0);  // clang (the sanitizer trees) may lack the name
#endif
  const CpuFeatures again = ProbeCpuFeatures();
  EXPECT_EQ(again.avx2, c.avx2);
  EXPECT_EQ(again.avx512vnni, c.avx512vnni);
}

// Hypothetical CPUs: each family's best tier is the highest its kernels' ISA allows.
TEST(KernelTier, BestTierFollowsTheFeaturesEachFamilyNeeds) {
  CpuFeatures none;
  for (KernelFamily f : kFamilies) EXPECT_EQ(BestKernelTier(f, none), 0) << KernelFamilyName(f);

  CpuFeatures avx2_only;  // no FMA, no F16C: only the int8 AVX2 kernels can run
  avx2_only.avx = avx2_only.avx2 = true;
  EXPECT_EQ(BestKernelTier(KernelFamily::kFloat, avx2_only), 0);
  EXPECT_EQ(BestKernelTier(KernelFamily::kInt8, avx2_only), 1);
  EXPECT_EQ(BestKernelTier(KernelFamily::kQ4, avx2_only), 0);

  CpuFeatures haswell = avx2_only;
  haswell.fma = haswell.f16c = true;
  for (KernelFamily f : kFamilies) EXPECT_EQ(BestKernelTier(f, haswell), 1) << KernelFamilyName(f);

  CpuFeatures skylake_x = haswell;  // AVX-512 without VNNI
  skylake_x.avx512f = skylake_x.avx512bw = skylake_x.avx512dq = skylake_x.avx512vl = true;
  EXPECT_EQ(BestKernelTier(KernelFamily::kFloat, skylake_x), 2);
  EXPECT_EQ(BestKernelTier(KernelFamily::kInt8, skylake_x), 1);
  EXPECT_EQ(BestKernelTier(KernelFamily::kQ4, skylake_x), 1);

  CpuFeatures cascade_lake = skylake_x;
  cascade_lake.avx512vnni = true;
  for (KernelFamily f : kFamilies) EXPECT_EQ(BestKernelTier(f, cascade_lake), 2) << KernelFamilyName(f);
}

// Each family is forced on its own; the drivers run the tier the selector names.
TEST(KernelTier, FamiliesAreForcedIndependently) {
  for (KernelFamily f : kFamilies) ResetKernelTier(f);
  const std::string best_int8 = Int8TierName();
  const std::string best_q4 = Q4TierName();
  EXPECT_EQ(best_int8, SupportedKernelTiers(KernelFamily::kInt8).back());
  EXPECT_EQ(best_q4, SupportedKernelTiers(KernelFamily::kQ4).back());
  EXPECT_EQ(std::string(SgemmTierName()), SupportedKernelTiers(KernelFamily::kFloat).back());

  ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, "reference"));
  EXPECT_STREQ(Int8TierName(), "reference");
  EXPECT_EQ(Q4TierName(), best_q4);
  ASSERT_TRUE(SetKernelTier(KernelFamily::kQ4, "reference"));
  EXPECT_STREQ(Q4TierName(), "reference");
  ResetKernelTier(KernelFamily::kInt8);
  EXPECT_EQ(Int8TierName(), best_int8);
  EXPECT_STREQ(Q4TierName(), "reference");
  ResetKernelTier(KernelFamily::kQ4);
  EXPECT_EQ(Q4TierName(), best_q4);
}

TEST(KernelTier, SupportedTiersMatchTheProbe) {
  for (KernelFamily f : kFamilies) {
    const std::vector<std::string> names = SupportedKernelTiers(f);
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names.back(), [&] {
      ResetKernelTier(f);
      return std::string(ActiveKernelTierName(f));
    }()) << KernelFamilyName(f);
    EXPECT_EQ(BestKernelTier(f, Cpu()), ActiveKernelTier(f));
  }
  EXPECT_STREQ(KernelFamilyName(KernelFamily::kQ4), "4-bit");
}

}  // namespace
}  // namespace oneinfer
