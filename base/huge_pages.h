// Large anonymous blocks on transparent huge pages: 2 MB-aligned private mappings advised
// MADV_HUGEPAGE, so touching one costs a fault per 2 MB instead of per 4 KB (page faults are the
// dearest part of a fresh KV cache or activation block on a VM), and unmapping returns the
// memory to the system at once. The pages read as zero until written.
#pragma once

#include <cstddef>

namespace oneinfer {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// True where HugeAlloc is used at all: not under AddressSanitizer, whose instrumented heap must
// see every block to report overruns and uses after free.
bool HugeAllocEnabled();
// A zeroed block of at least `bytes` (rounded up to 2 MB), 2 MB-aligned; nullptr when the system
// refuses it.
void* HugeAlloc(size_t bytes);
// Returns a block HugeAlloc gave for the same `bytes`.
void HugeFree(void* p, size_t bytes);

// Long-lived blocks (packed weights), 64-byte aligned, carved out of shared 2 MB-page chunks:
// a model's weights lie densely on huge pages (a 3 MB weight does not round up to 4 MB), and a
// pass over them costs one page-table entry per 2 MB. On a VM with shadow paging that matters
// beyond the TLB: after any large munmap in the process, the next pass over 155 MB of 4 KB pages
// took 100-400 ms more (a fault per page), over 2 MB pages nothing. The contents start
// undefined. nullptr when the system refuses the memory. Plain aligned_alloc where
// HugeAllocEnabled() is false.
void* WeightBlockAlloc(size_t bytes);
// Returns a block of WeightBlockAlloc; a chunk is unmapped once none of its blocks is live.
void WeightBlockFree(void* p);

}  // namespace oneinfer
