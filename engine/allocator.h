// The engine's tensor allocator: size-classed free lists so that intermediate buffers released
// after their last use are reused by later nodes, with deterministic in-use and peak counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "oneinfer/tensor.h"

namespace oneinfer {

class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  static std::shared_ptr<Allocator> Create();
  ~Allocator();

  // Storage from the pool, zero-filled unless zero is false (strings come from the heap and
  // are not counted). It returns to the pool when the last tensor referring to it is destroyed.
  Tensor Allocate(DType dtype, Shape shape, bool zero = true);

  // Bytes of pooled tensors alive now, and the high-water mark since the last reset.
  size_t bytes_in_use() const;
  size_t peak_bytes() const;
  void ResetPeak();
  // Returns cached free blocks to the system.
  void Trim();

 private:
  Allocator() = default;
  void* Take(size_t size_class);
  void Give(void* p, size_t size_class);

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  size_t cached_bytes_ = 0;
  size_t in_use_ = 0;
  size_t peak_ = 0;
};

// Rounds a request up to its size class (64-byte granules, then 8 classes per power of two).
size_t AllocatorSizeClass(size_t bytes);

}  // namespace oneinfer
