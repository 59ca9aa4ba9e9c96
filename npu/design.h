// One prepared design: the shared buffer layout, zero padding, weight upload and readback that
// every backend runs (XRT and emulated alike), with the per-call timing sections.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "npu/device.h"

namespace oneinfer::npu {

// Reads a design's instruction stream: hex text (one 32-bit word a line, optional 0x, blank lines
// and '#' or '//' comments allowed) or raw little-endian binary (size a multiple of 4). A name
// ending in .txt is text, .bin is binary; otherwise the content decides.
absl::StatusOr<std::vector<uint32_t>> ReadInstructionFile(const std::string& path);

// Checks that the design's shape is usable and both of its files can be read.
absl::Status CheckDesignFiles(const DesignSpec& spec);

// B as the whole_array design takes it: K x N int8 row-major, i.e. the graph's own layout, so
// packing is a copy. dst: K * N bytes.
void PackWeightsRowMajor(const int8_t* w, int64_t k, int64_t n, int8_t* dst);

class Design {
 public:
  // Loads spec on device: reads the instruction file, loads the kernel, allocates and fills the
  // instruction, A and C buffers once. weight_cache_bytes bounds the resident B images (LRU);
  // the image in use is always kept.
  static absl::StatusOr<std::unique_ptr<Design>> Prepare(Device& device, const DesignSpec& spec,
                                                         size_t weight_cache_bytes);

  const DesignSpec& spec() const { return spec_; }

  // c (rows x N int32) = a (rows x K int8) * w (K x N int8), rows >= 1, in launches of the
  // design's M rows (the last one zero-padded). k and n must equal the design's. The weight is
  // identified by its pointer: packed and uploaded on first use, then reused. Adds this call's
  // sections to *sections when given.
  absl::Status Run(const int8_t* a, int64_t rows, int64_t k, int64_t n, const int8_t* w,
                   int32_t* c, Sections* sections);

  // Drops a cached B image (its weight is about to be freed or changed).
  void ForgetWeight(const int8_t* w);
  size_t cached_weight_bytes() const;
  size_t cached_weights() const;

 private:
  struct WeightSlot {
    std::unique_ptr<DeviceBuffer> buffer;
    uint64_t last_use = 0;
  };

  Design(DesignSpec spec, size_t weight_cache_bytes)
      : spec_(std::move(spec)), weight_cache_bytes_(weight_cache_bytes) {}

  absl::StatusOr<DeviceBuffer*> WeightBuffer(const int8_t* w, Sections& s);  // mu_ held
  void EvictFor(size_t bytes, const int8_t* keep);                            // mu_ held

  const DesignSpec spec_;
  const size_t weight_cache_bytes_;
  mutable std::mutex mu_;
  std::unique_ptr<DeviceKernel> kernel_;
  std::unique_ptr<DeviceBuffer> instr_, a_, c_;
  uint32_t n_words_ = 0;
  int64_t a_dirty_rows_ = 0;  // leading rows of A that may hold a previous call's data
  absl::flat_hash_map<const int8_t*, WeightSlot> weights_;
  size_t weight_bytes_ = 0;
  uint64_t use_clock_ = 0;
};

}  // namespace oneinfer::npu
