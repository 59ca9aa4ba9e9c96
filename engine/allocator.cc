#include "engine/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/huge_pages.h"

namespace oneinfer {

namespace {
constexpr size_t kAlign = 64;
// Freed blocks are kept for reuse up to this many bytes beyond the larger of the bytes in use and
// what the busy period's peak needs on top of them: a batch of sequences frees and asks again
// for a cache block of tens of MB each per step, which must come back from the pool, not as fresh
// zeroed pages (with a cap of in-use alone, each step's freed logits evicted a cache block that
// the next step faulted in again: 2 MB page clears were 10 % of a 16-sequence decode). Resident
// memory stays under 64 MB past the busy period's peak or twice what is in use; when nothing is
// in use the pool keeps at most 64 MB. A block freed past the cap evicts older sizes (a growing
// KV cache leaves one stale size every 128 positions) instead of being dropped.
constexpr size_t kMaxCachedBytes = size_t{64} << 20;

// Under AddressSanitizer every block comes from (and returns to) the instrumented heap, uncached,
// so that an overrun or a use after release is reported instead of landing in a pooled block.
const bool kSanitizedHeap = !HugeAllocEnabled();

// Big blocks (KV caches, logits, attention scores) are their own huge-page mappings
// (base/huge_pages.h): fewer faults, and unmapping returns them to the system at once, where a
// heap block could stay resident behind glibc's moving mmap threshold.
void* SystemAlloc(size_t size_class) {
  if (kSanitizedHeap || size_class < kHugePageBytes) return std::aligned_alloc(kAlign, size_class);
  return HugeAlloc(size_class);
}

void SystemFree(void* p, size_t size_class) {
  if (kSanitizedHeap || size_class < kHugePageBytes) std::free(p);
  else HugeFree(p, size_class);
}

}  // namespace

size_t AllocatorSizeClass(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > kAllocatorMaxBytes) return 0;
  if (bytes <= 4096) return (bytes + kAlign - 1) / kAlign * kAlign;
  // Eight classes per power of two keeps waste under 12.5%.
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return kAllocatorMaxBytes;
  return std::min(kAllocatorMaxBytes, static_cast<size_t>(pages) * static_cast<size_t>(page));
}

std::shared_ptr<Allocator> Allocator::Create(AllocatorLimits limits) {
  if (limits.max_tensor_bytes == 0) limits.max_tensor_bytes = PhysicalMemoryBytes();
  if (limits.max_total_bytes == 0) limits.max_total_bytes = PhysicalMemoryBytes();
  return std::shared_ptr<Allocator>(new Allocator(limits));
}

Allocator::~Allocator() { Trim(); }

void* Allocator::Take(size_t size_class, bool* over_limit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    *over_limit = in_use_ + size_class > limits_.max_total_bytes;
    if (*over_limit) return nullptr;
    in_use_ += size_class;
    if (in_use_ > peak_) peak_ = in_use_;
    if (in_use_ > busy_peak_) busy_peak_ = in_use_;
    auto it = free_.find(size_class);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= size_class;
      return p;
    }
  }
  void* p = SystemAlloc(size_class);
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= size_class;
  }
  return p;
}

void Allocator::Give(void* p, size_t size_class) {
  std::vector<std::pair<void*, size_t>> dropped;  // returned to the system outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= size_class;
    const size_t cap = kMaxCachedBytes + std::max({keep_, in_use_, busy_peak_ - in_use_});
    if (in_use_ == 0) busy_peak_ = 0;  // idle: the next busy period sets its own peak
    if (!kSanitizedHeap && size_class <= cap) {
      // Make room by dropping blocks of other sizes, largest first.
      for (auto it = free_.rbegin(); cached_bytes_ + size_class > cap && it != free_.rend();) {
        if (it->first == size_class || it->second.empty()) {
          ++it;
          continue;
        }
        dropped.emplace_back(it->second.back(), it->first);
        it->second.pop_back();
        cached_bytes_ -= it->first;
      }
      if (cached_bytes_ + size_class <= cap) {
        free_[size_class].push_back(p);
        cached_bytes_ += size_class;
        p = nullptr;
      }
    }
    // Idle: the pool shrinks back to kMaxCachedBytes (and what KeepCached asks), largest blocks first.
    const size_t idle_cap = kMaxCachedBytes + keep_;
    for (auto it = free_.rbegin(); in_use_ == 0 && cached_bytes_ > idle_cap && it != free_.rend(); ++it) {
      while (!it->second.empty() && cached_bytes_ > idle_cap) {
        dropped.emplace_back(it->second.back(), it->first);
        it->second.pop_back();
        cached_bytes_ -= it->first;
      }
    }
  }
  for (const auto& [block, cls] : dropped) SystemFree(block, cls);
  if (p != nullptr) SystemFree(p, size_class);
}

absl::StatusOr<Tensor> Allocator::TryAllocate(DType dtype, Shape shape, bool zero) {
  // The byte count is computed with overflow checks: NumElements would wrap on a hostile shape.
  size_t count = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("cannot allocate shape ", ShapeToString(shape), ": negative dimension"));
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) count = 0;
  for (int64_t d : shape) overflow = overflow || __builtin_mul_overflow(count, static_cast<size_t>(d), &count);
  size_t bytes = 0;
  // Strings count their std::string objects (they come from the heap, not the pool).
  const size_t element = dtype == DType::kString ? sizeof(std::string) : DTypeSize(dtype);
  if (dtype == DType::kInt4 || dtype == DType::kUInt4) bytes = count / 2 + count % 2;
  else overflow = overflow || __builtin_mul_overflow(count, element, &bytes);
  const size_t limit = std::min(kAllocatorMaxBytes, limits_.max_tensor_bytes);
  if (overflow || bytes > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate a ", DTypeName(dtype), " tensor of shape ", ShapeToString(shape), ": ",
        overflow ? std::string("its size overflows 64 bits") : absl::StrCat(bytes, " bytes"),
        limit == kAllocatorMaxBytes ? absl::StrCat(", past the allocator's limit of ", kAllocatorMaxBytes, " bytes")
                                    : absl::StrCat(", past this session's limit of ", limit,
                                                   " bytes for one tensor (SessionOptions::max_tensor_bytes)")));
  }
  if (dtype == DType::kString) return Tensor::Empty(dtype, std::move(shape));
  const size_t size_class = AllocatorSizeClass(bytes);
  bool over_limit = false;
  void* p = Take(size_class, &over_limit);
  if (over_limit) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a ", DTypeName(dtype), " tensor of shape ",
                                                     ShapeToString(shape), " (", bytes, " bytes): ", bytes_in_use(),
                                                     " bytes of intermediate tensors are in use and the limit is ",
                                                     limits_.max_total_bytes, " (SessionOptions::max_intermediate_bytes)"));
  }
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory: cannot allocate ", bytes, " bytes for a ",
                                                     DTypeName(dtype), " tensor of shape ", ShapeToString(shape)));
  }
  if (zero) std::memset(p, 0, bytes);
  std::shared_ptr<Allocator> self = shared_from_this();
  std::shared_ptr<void> holder(p, [self, size_class](void* q) { self->Give(q, size_class); });
  return Tensor::Wrap(dtype, std::move(shape), std::move(holder), p);
}

Tensor Allocator::Allocate(DType dtype, Shape shape, bool zero) {
  auto t = TryAllocate(dtype, std::move(shape), zero);
  if (!t.ok()) throw AllocationError(std::string(t.status().message()));
  return *std::move(t);
}

size_t Allocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t Allocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

void Allocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_use_;
}

size_t Allocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

void Allocator::KeepCached(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_ = bytes;
}

void Allocator::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size_class, blocks] : free_) {
    for (void* p : blocks) SystemFree(p, size_class);
  }
  free_.clear();
  cached_bytes_ = 0;
}

}  // namespace oneinfer
