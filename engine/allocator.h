// The engine's tensor allocator: size-classed free lists so that intermediate buffers released
// after their last use are reused by later nodes, with deterministic in-use and peak counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

// Thrown by Allocator::Allocate when a request cannot be met; a bad_alloc, so the plan turns it
// (like any other out-of-memory) into a ResourceExhausted status for the node.
class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// The largest request served (256 TiB): past every machine's memory and address space, and far
// enough below 2^64 that rounding up to a size class cannot overflow.
inline constexpr size_t kAllocatorMaxBytes = size_t{1} << 48;

// What one allocator may hand out (SessionOptions::max_tensor_bytes, max_intermediate_bytes);
// 0 in either field means the machine's physical memory.
struct AllocatorLimits {
  size_t max_tensor_bytes = 0;
  size_t max_total_bytes = 0;
};

// The machine's physical memory in bytes (the default of both limits).
size_t PhysicalMemoryBytes();

class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  static std::shared_ptr<Allocator> Create(AllocatorLimits limits = {});
  ~Allocator();

  // Storage from the pool, zero-filled unless zero is false (strings come from the heap and
  // are not counted). It returns to the pool when the last tensor referring to it is destroyed.
  // A shape whose size overflows or passes kAllocatorMaxBytes or the limits, or memory the
  // system refuses, throws AllocationError (kernels allocate through OpContext, which returns a reference).
  Tensor Allocate(DType dtype, Shape shape, bool zero = true);
  // The same failures as a ResourceExhausted (or InvalidArgument for a negative dimension) status.
  absl::StatusOr<Tensor> TryAllocate(DType dtype, Shape shape, bool zero = true);

  // Bytes of pooled tensors alive now, and the high-water mark since the last reset.
  size_t bytes_in_use() const;
  size_t peak_bytes() const;
  void ResetPeak();
  // Bytes of freed blocks kept for reuse.
  size_t cached_bytes() const;
  // Returns cached free blocks to the system.
  void Trim();
  // Freed blocks are kept for reuse up to `bytes` more than the 64 MB kept when nothing is in
  // use (and at least that much more while busy): a server keeps a full batch's KV caches, so
  // that a burst of requests after a quiet spell does not fault fresh pages in.
  void KeepCached(size_t bytes);

 private:
  explicit Allocator(AllocatorLimits limits) : limits_(limits) {}
  // nullptr when the system has no memory for it; *over_limit set when in-use would pass the limit.
  void* Take(size_t size_class, bool* over_limit);
  void Give(void* p, size_t size_class);

  const AllocatorLimits limits_;  // both fields non-zero (Create fills the defaults)
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  size_t cached_bytes_ = 0;
  size_t in_use_ = 0;
  size_t peak_ = 0;
  size_t busy_peak_ = 0;  // the most in use since in-use was last zero
  size_t keep_ = 0;       // KeepCached
};

// Rounds a request up to its size class (64-byte granules, then 8 classes per power of two);
// 0 for a request past kAllocatorMaxBytes, which has none.
size_t AllocatorSizeClass(size_t bytes);

}  // namespace oneinfer
