#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace oneinfer {

namespace {
size_t Span(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }
}  // namespace

bool HugeAllocEnabled() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

void* HugeAlloc(size_t bytes) {
  const size_t span = Span(bytes), mapped = span + kHugePageBytes;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  // Trim the mapping to a 2 MB-aligned span.
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  if (start + mapped > aligned + span) munmap(reinterpret_cast<void*>(aligned + span), start + mapped - aligned - span);
  madvise(reinterpret_cast<void*>(aligned), span, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void HugeFree(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, Span(bytes));
}

}  // namespace oneinfer
