// Run-time ISA tier choice shared by the quantised GEMMs: tiers listed lowest first, the best one
// the CPU supports, an environment override read once, and a test hook that forces a tier.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace oneinfer {

// Tier is a struct with a `const char* name`; tiers[0] must run everywhere (the reference).
template <typename Tier, int kCount>
class KernelTierSelector {
 public:
  // best_index: the highest index this CPU and OS can run (probed once by the caller).
  // env_vars: consulted in order; the first that is set names the tier.
  KernelTierSelector(const Tier* const (&tiers)[kCount], int (*best_index)(),
                     std::initializer_list<const char*> env_vars)
      : best_index_(best_index), env_vars_(env_vars) {
    for (int i = 0; i < kCount; ++i) tiers_[i] = tiers[i];
  }

  // The forced tier, else the environment's, else the best available.
  const Tier& Active() const {
    if (const Tier* t = forced_.load(std::memory_order_relaxed)) return *t;
    const Tier* t = from_env_.load(std::memory_order_acquire);
    if (t == nullptr) {
      const char* name = nullptr;
      for (const char* var : env_vars_)
        if ((name = std::getenv(var)) != nullptr) break;
      t = Resolve(name);
      from_env_.store(t, std::memory_order_release);
    }
    return *t;
  }

  std::vector<std::string> Supported() const {
    std::vector<std::string> names;
    for (int i = 0; i <= best_index_(); ++i) names.emplace_back(tiers_[i]->name);
    return names;
  }

  // The env var's rules; nullptr drops the override and re-reads the environment on next use.
  // True when the requested tier is now in use.
  bool ForceForTesting(const char* name) {
    if (name == nullptr) {
      forced_.store(nullptr, std::memory_order_relaxed);
      from_env_.store(nullptr, std::memory_order_release);
      return true;
    }
    forced_.store(Resolve(name), std::memory_order_relaxed);
    return std::strcmp(Active().name, name) == 0;
  }

 private:
  // A named tier if the CPU has it, else the best available (never silently upward).
  const Tier* Resolve(const char* name) const {
    const int best = best_index_();
    if (name != nullptr)
      for (int i = 0; i <= best; ++i)
        if (std::strcmp(name, tiers_[i]->name) == 0) return tiers_[i];
    return tiers_[best];
  }

  const Tier* tiers_[kCount];
  int (*best_index_)();
  std::vector<const char*> env_vars_;
  std::atomic<const Tier*> forced_{nullptr};
  mutable std::atomic<const Tier*> from_env_{nullptr};
};

}  // namespace oneinfer
