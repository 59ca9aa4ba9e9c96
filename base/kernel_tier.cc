#include "base/kernel_tier.h"

#include <atomic>

namespace oneinfer {
namespace {

struct TierList {
  const KernelTier* tiers;
  int count;
};

TierList Tiers(KernelFamily family) {
  switch (family) {
    case KernelFamily::kFloat: return {kFloatTiers, kFloatTierCount};
    case KernelFamily::kInt8: return {kInt8Tiers, kInt8TierCount};
    case KernelFamily::kQ4: return {kQ4Tiers, kQ4TierCount};
  }
  return {kInt8Tiers, 1};
}

// Per family: the tier index in use, -1 until the first call resolves the default.
std::atomic<int> g_active[kKernelFamilyCount] = {-1, -1, -1};

std::atomic<int>& Slot(KernelFamily family) { return g_active[static_cast<int>(family)]; }

}  // namespace

const char* KernelFamilyName(KernelFamily family) {
  switch (family) {
    case KernelFamily::kFloat: return "float";
    case KernelFamily::kInt8: return "int8";
    case KernelFamily::kQ4: return "4-bit";
  }
  return "?";
}

int BestKernelTier(KernelFamily family, const CpuFeatures& cpu) {
  const TierList list = Tiers(family);
  for (int i = list.count - 1; i > 0; --i)
    if (list.tiers[i].runs_on(cpu)) return i;
  return 0;
}

int ActiveKernelTier(KernelFamily family) {
  std::atomic<int>& slot = Slot(family);
  int i = slot.load(std::memory_order_relaxed);
  if (i >= 0) return i;
  int unresolved = -1;
  i = BestKernelTier(family, Cpu());
  // A tier forced meanwhile wins over the default.
  if (!slot.compare_exchange_strong(unresolved, i, std::memory_order_relaxed)) return unresolved;
  return i;
}

const char* ActiveKernelTierName(KernelFamily family) {
  return Tiers(family).tiers[ActiveKernelTier(family)].name;
}

std::vector<std::string> SupportedKernelTiers(KernelFamily family) {
  const TierList list = Tiers(family);
  std::vector<std::string> names;
  for (int i = 0; i < list.count; ++i)
    if (list.tiers[i].runs_on(Cpu())) names.emplace_back(list.tiers[i].name);
  return names;
}

bool SetKernelTier(KernelFamily family, std::string_view name) {
  const TierList list = Tiers(family);
  for (int i = 0; i < list.count; ++i) {
    if (name == list.tiers[i].name && list.tiers[i].runs_on(Cpu())) {
      Slot(family).store(i, std::memory_order_relaxed);
      return true;
    }
  }
  Slot(family).store(BestKernelTier(family, Cpu()), std::memory_order_relaxed);
  return false;
}

void ResetKernelTier(KernelFamily family) {
  Slot(family).store(BestKernelTier(family, Cpu()), std::memory_order_relaxed);
}

}  // namespace oneinfer
