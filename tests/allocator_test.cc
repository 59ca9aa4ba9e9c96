// The allocator refuses impossible sizes at once, as a status, and a kernel asking for one fails
// its run with an error naming the node instead of hanging or aborting.
#include <gtest/gtest.h>

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
