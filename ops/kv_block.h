// The storage of a growing KV cache (KVCacheAppend and KVCacheConcat with `grow`, under
// RunOptions::grow_kv_in_place): a tensor [..., T, ...] whose holder carries a KVBlock deleter has
// the rows of each group (the dims before the sequence axis) `capacity` positions apart, not T.
// Found with std::get_deleter; only the growing appends and concats, SoftmaxAttention and the
// caller that asked for it see one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "oneinfer/tensor.h"

namespace oneinfer {

struct KVBlock {
  int64_t capacity;
  std::shared_ptr<void> storage;  // the allocator's block, returned when the last view goes
  void operator()(void*) { storage.reset(); }
};

// The positions between consecutive groups of rows in t (a KV block or a view into one: its
// capacity), else `rows` (dense).
inline int64_t RowCapacity(const Tensor& t, int64_t rows) {
  const KVBlock* b = std::get_deleter<KVBlock>(t.holder());
  return b != nullptr ? b->capacity : rows;
}

// t is a whole KV block (not a slot view into one): what a growing node may append to in place.
inline bool IsWholeKVBlock(const Tensor& t) {
  return std::get_deleter<KVBlock>(t.holder()) != nullptr && t.raw_data() == t.holder().get();
}

// Groups per task when a KV cache node copies `bytes` per group: a decoding step's few new rows
// are copied inline (a pool dispatch costs more than 64 KB of memcpy).
inline int64_t KVCopyGrain(size_t bytes_per_group) {
  return static_cast<int64_t>(std::max<size_t>(4, (size_t{64} << 10) / std::max<size_t>(1, bytes_per_group)));
}

// storage (a block of `capacity` positions along the sequence axis) tagged as a KV block.
inline std::shared_ptr<void> TagKVBlock(void* data, int64_t capacity, std::shared_ptr<void> storage) {
  return std::shared_ptr<void>(data, KVBlock{capacity, std::move(storage)});
}

}  // namespace oneinfer
