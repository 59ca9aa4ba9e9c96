#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

namespace oneinfer {

namespace {
size_t Span(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

// Weight blocks: bump-allocated from 64 MB chunks; a block over a quarter chunk gets a chunk of
// its own. Blocks are only freed when a session goes, so freed space is not reused: a chunk
// lives while any of its blocks does.
constexpr size_t kChunkBytes = size_t{64} << 20;
constexpr size_t kBlockAlign = 64;
struct Chunk {
  size_t bytes = 0;  // the HugeAlloc size
  size_t used = 0;   // bump offset
  size_t live = 0;   // blocks not yet freed
};
std::mutex g_chunks_mu;
std::map<uintptr_t, Chunk> g_chunks;  // by base address
uintptr_t g_current = 0;              // the chunk new small blocks come from (0: none)
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

void* WeightBlockAlloc(size_t bytes) {
  const size_t size = (bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign + (bytes == 0 ? kBlockAlign : 0);
  if (!HugeAllocEnabled()) return std::aligned_alloc(kBlockAlign, size);
  std::lock_guard<std::mutex> lock(g_chunks_mu);
  if (size > kChunkBytes / 4) {
    void* p = HugeAlloc(size);
    if (p != nullptr) g_chunks[reinterpret_cast<uintptr_t>(p)] = Chunk{size, size, 1};
    return p;
  }
  if (g_current == 0 || g_chunks[g_current].used + size > kChunkBytes) {
    void* p = HugeAlloc(kChunkBytes);
    if (p == nullptr) return nullptr;
    // The previous chunk (if any) goes once its last block does.
    g_current = reinterpret_cast<uintptr_t>(p);
    g_chunks[g_current] = Chunk{kChunkBytes, 0, 0};
  }
  Chunk& chunk = g_chunks[g_current];
  void* p = reinterpret_cast<void*>(g_current + chunk.used);
  chunk.used += size;
  ++chunk.live;
  return p;
}

void WeightBlockFree(void* p) {
  if (p == nullptr) return;
  if (!HugeAllocEnabled()) {
    std::free(p);
    return;
  }
  std::lock_guard<std::mutex> lock(g_chunks_mu);
  auto it = g_chunks.upper_bound(reinterpret_cast<uintptr_t>(p));
  assert(it != g_chunks.begin() && "not a weight block");
  it = std::prev(it);
  Chunk& chunk = it->second;
  assert(reinterpret_cast<uintptr_t>(p) < it->first + chunk.bytes && chunk.live > 0);
  if (--chunk.live > 0) return;
  HugeFree(reinterpret_cast<void*>(it->first), chunk.bytes);
  if (it->first == g_current) g_current = 0;
  g_chunks.erase(it);
}

}  // namespace oneinfer
