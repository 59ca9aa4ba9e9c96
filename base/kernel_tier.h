// The one run-time ISA tier selector of the GEMM families (float, int8, 4-bit): each family's
// tiers listed lowest first with what the CPU must have (base/cpu_features.h), the best one this
// CPU runs by default, and an API that forces a tier (tests, benches, the command line's
// ONEINFER_*_TIER). Nothing here reads the environment.
#pragma once

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "base/cpu_features.h"

namespace oneinfer {

enum class KernelFamily { kFloat = 0, kInt8 = 1, kQ4 = 2 };
inline constexpr int kKernelFamilyCount = 3;

// A tier: its name and whether a CPU can run it (what its kernels were compiled for).
struct KernelTier {
  const char* name;
  bool (*runs_on)(const CpuFeatures& cpu);
};

namespace kernel_tier_internal {
inline bool Anywhere(const CpuFeatures&) { return true; }
inline bool FloatAvx2(const CpuFeatures& c) { return c.avx2 && c.fma && c.f16c; }  // F16C: float16 panels
inline bool FloatAvx512(const CpuFeatures& c) {
  return c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.fma && c.f16c;
}
inline bool Int8Avx2(const CpuFeatures& c) { return c.avx2; }
inline bool Avx512Vnni(const CpuFeatures& c) {
  return c.avx2 && c.avx512f && c.avx512bw && c.avx512vl && c.avx512vnni;
}
inline bool Q4Avx2(const CpuFeatures& c) { return c.avx2 && c.fma && c.f16c; }
}  // namespace kernel_tier_internal

// Each family's tiers, lowest first; [0] runs everywhere (the reference the others must match
// bit for bit). A family's driver lists its kernels in the same order and checks the count.
inline constexpr KernelTier kFloatTiers[] = {{"portable", kernel_tier_internal::Anywhere},
                                             {"avx2", kernel_tier_internal::FloatAvx2},
                                             {"avx512", kernel_tier_internal::FloatAvx512}};
inline constexpr KernelTier kInt8Tiers[] = {{"reference", kernel_tier_internal::Anywhere},
                                            {"avx2", kernel_tier_internal::Int8Avx2},
                                            {"avx512vnni", kernel_tier_internal::Avx512Vnni}};
inline constexpr KernelTier kQ4Tiers[] = {{"reference", kernel_tier_internal::Anywhere},
                                          {"avx2", kernel_tier_internal::Q4Avx2},
                                          {"avx512vnni", kernel_tier_internal::Avx512Vnni}};
inline constexpr int kFloatTierCount = static_cast<int>(std::size(kFloatTiers));
inline constexpr int kInt8TierCount = static_cast<int>(std::size(kInt8Tiers));
inline constexpr int kQ4TierCount = static_cast<int>(std::size(kQ4Tiers));

// "float", "int8", "4-bit".
const char* KernelFamilyName(KernelFamily family);

// The highest tier of the family that `cpu` runs (0 when none above the reference does).
int BestKernelTier(KernelFamily family, const CpuFeatures& cpu);

// Index (in the family's list) of the tier in use: the forced one, else the best this CPU runs.
// Cheap enough for every GEMM call (one atomic load once resolved).
int ActiveKernelTier(KernelFamily family);
const char* ActiveKernelTierName(KernelFamily family);

// The tiers this CPU and OS can run, lowest first (the reference is always there).
std::vector<std::string> SupportedKernelTiers(KernelFamily family);

// Forces the named tier for the whole process. A name this CPU cannot run, or no tier of the
// family, gets the best available instead (never silently upward). True when the named tier is
// now in use.
bool SetKernelTier(KernelFamily family, std::string_view name);

// Back to the default: the best tier this CPU runs.
void ResetKernelTier(KernelFamily family);

}  // namespace oneinfer
