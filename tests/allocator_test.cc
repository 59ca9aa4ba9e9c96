// The allocator refuses impossible sizes at once, as a status, and a kernel asking for one fails
// its run with an error naming the node instead of hanging or aborting.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/huge_pages.h"
#include "engine/allocator.h"
#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::OneNode;

TEST(Allocator, SizeClassesRoundUpAndStopAtTheLimit) {
  EXPECT_EQ(AllocatorSizeClass(0), 64u);
  EXPECT_EQ(AllocatorSizeClass(4096), 4096u);
  EXPECT_EQ(AllocatorSizeClass(4097), 4608u);
  EXPECT_EQ(AllocatorSizeClass(kAllocatorMaxBytes), kAllocatorMaxBytes);
  EXPECT_EQ(AllocatorSizeClass(kAllocatorMaxBytes - 1), kAllocatorMaxBytes);
  // These used to loop forever (2^63 and up) or wrap while rounding.
  EXPECT_EQ(AllocatorSizeClass(kAllocatorMaxBytes + 1), 0u);
  EXPECT_EQ(AllocatorSizeClass(size_t{1} << 62), 0u);
  EXPECT_EQ(AllocatorSizeClass(size_t{1} << 63), 0u);
  EXPECT_EQ(AllocatorSizeClass(~size_t{0}), 0u);
}

// Packed weights lie densely: consecutive small blocks are neighbours in one 2 MB-page chunk
// (not each rounded up to 2 MB), and a large block has a chunk of its own that is unmapped when
// it is freed.
TEST(WeightBlocks, SmallBlocksAreDenseAndLargeOnesAreUnmappedWhenFreed) {
  std::vector<void*> small;
  for (size_t bytes : {3u << 20, 100u, 64u, 1u << 20}) {
    void* p = WeightBlockAlloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, 0x5a, bytes);
    small.push_back(p);
  }
  if (HugeAllocEnabled()) {
    const auto at = [&](size_t i) { return reinterpret_cast<uintptr_t>(small[i]); };
    // Each block starts where the one before ended, rounded to 64 bytes; unless a chunk filled.
    const bool same_chunk = at(1) == at(0) + (3u << 20);
    if (same_chunk) {
      EXPECT_EQ(at(2), at(1) + 128);
      EXPECT_EQ(at(3), at(2) + 64);
    }
    const size_t big_bytes = 40u << 20;
    void* big = WeightBlockAlloc(big_bytes);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % kHugePageBytes, 0u);
    std::memset(big, 1, big_bytes);
    unsigned char resident = 0;
    EXPECT_EQ(mincore(big, 4096, &resident), 0);
    WeightBlockFree(big);
    EXPECT_EQ(mincore(big, 4096, &resident), -1);
    EXPECT_EQ(errno, ENOMEM);  // unmapped
  }
  for (void* p : small) WeightBlockFree(p);
}

// A batched decode's step: B caches held, B new ones made from them, the old ones freed, then
// the step's logits. Every new cache of the next step must come back from the pool: when the
// logits evicted a cache block, each step faulted a fresh one in (2 MB page clears were 10 % of
// a 16-sequence decode). Idle, the pool shrinks back to 64 MB.
TEST(Allocator, ABatchStepReusesEveryCacheBlockAndIdleReturnsTheRest) {
  if (!HugeAllocEnabled()) GTEST_SKIP() << "sanitized heap: nothing is pooled";
  auto a = Allocator::Create();
  constexpr int64_t kSeqs = 4, kCacheFloats = 6 << 20;  // 24 MB each: 96 MB held, past the 64 MB floor
  const auto make = [&] {
    std::vector<Tensor> t;
    for (int64_t i = 0; i < kSeqs; ++i) t.push_back(a->Allocate(DType::kFloat32, {kCacheFloats}, false));
    return t;
  };
  const auto sorted_data = [](const std::vector<Tensor>& t) {
    std::vector<const void*> p;
    for (const Tensor& x : t) p.push_back(x.raw_data());
    std::sort(p.begin(), p.end());
    return p;
  };
  std::vector<Tensor> caches = make();
  std::vector<const void*> freed_last_step;
  for (int s = 0; s < 4; ++s) {
    const std::vector<const void*> freed = sorted_data(caches);
    std::vector<Tensor> fresh = make();
    if (s > 0) EXPECT_EQ(sorted_data(fresh), freed_last_step) << "step " << s << " took a block from the system";
    Tensor logits = a->Allocate(DType::kFloat32, {kSeqs, 151936}, false);
    caches = std::move(fresh);  // the old caches go back to the pool, then the logits
    logits = Tensor();
    EXPECT_GE(a->cached_bytes(), static_cast<size_t>(kSeqs * kCacheFloats * 4)) << "step " << s << " dropped a cache block";
    freed_last_step = freed;
  }
  caches.clear();
  EXPECT_EQ(a->bytes_in_use(), 0u);
  EXPECT_LE(a->cached_bytes(), size_t{64} << 20);
}

TEST(Allocator, KeptBytesStayPooledWhenIdleAndAreReused) {
  if (!HugeAllocEnabled()) GTEST_SKIP() << "sanitized heap: nothing is pooled";
  auto a = Allocator::Create();
  constexpr int64_t kSeqs = 4, kCacheFloats = 6 << 20;  // 24 MB each: 96 MB, past the 64 MB floor
  a->KeepCached(size_t{kSeqs * kCacheFloats * 4});
  std::vector<const void*> first;
  for (int round = 0; round < 2; ++round) {
    std::vector<Tensor> caches;
    for (int64_t i = 0; i < kSeqs; ++i) caches.push_back(a->Allocate(DType::kFloat32, {kCacheFloats}, false));
    std::vector<const void*> data;
    for (const Tensor& t : caches) data.push_back(t.raw_data());
    std::sort(data.begin(), data.end());
    if (round == 0) first = data;
    else EXPECT_EQ(data, first) << "a burst after a quiet spell took blocks from the system";
    caches.clear();  // idle: nothing in use
    EXPECT_EQ(a->bytes_in_use(), 0u);
    EXPECT_GE(a->cached_bytes(), static_cast<size_t>(kSeqs * kCacheFloats * 4));
  }
  a->KeepCached(0);  // the next release trims back to the 64 MB floor
  Tensor t = a->Allocate(DType::kFloat32, {16}, false);
  t = Tensor();
  EXPECT_LE(a->cached_bytes(), size_t{64} << 20);
}

TEST(Allocator, HugeRequestsAreRefusedWithTheirSize) {
  auto a = Allocator::Create();
  auto t = a->TryAllocate(DType::kUInt8, {int64_t{1} << 62});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(t.status().message().find("shape [4611686018427387904]: 4611686018427387904 bytes"), std::string::npos)
      << t.status();
  // Element count times element size wraps 64 bits.
  t = a->TryAllocate(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 30});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("its size overflows 64 bits"), std::string::npos) << t.status();
  t = a->TryAllocate(DType::kFloat32, {2, -3});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("negative dimension"), std::string::npos) << t.status();
  EXPECT_THROW(a->Allocate(DType::kFloat64, {int64_t{1} << 61}), AllocationError);
  EXPECT_EQ(a->bytes_in_use(), 0u);
  // An empty tensor with huge other dimensions is still empty.
  auto empty = a->TryAllocate(DType::kFloat32, {int64_t{1} << 62, 0, int64_t{1} << 62});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->num_elements(), 0);
  auto small = a->TryAllocate(DType::kFloat32, {3, 5});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(a->bytes_in_use(), AllocatorSizeClass(0) + AllocatorSizeClass(60));
}

TEST(Allocator, AKernelAskingTooMuchFailsItsRun) {
  Tensor shape = Tensor::Empty(DType::kInt64, {1});
  shape.data<int64_t>()[0] = int64_t{1} << 62;
  auto r = OneNode{.op = "ConstantOfShape"}.Outputs({shape});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("ConstantOfShape"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("its size overflows 64 bits"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace oneinfer
