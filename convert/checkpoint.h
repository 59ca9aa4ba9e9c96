// Reading and writing Hugging Face safetensors checkpoints (single file or sharded with an index).
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/safetensors.h"

namespace oneinfer::convert {

struct SafeTensor {
  std::string dtype;           // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;  // into the mapped file
  size_t bytes = 0;
};

class Checkpoint {
 public:
  // dir holds model.safetensors, or model.safetensors.index.json and its shards.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  ~Checkpoint();

  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor converted to float32, checked against the expected shape.
  absl::StatusOr<std::vector<float>> ReadF32(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  absl::Status AddFile(const std::string& path);
  std::vector<std::shared_ptr<SafetensorsFile>> files_;  // the container parser lives in the library
  std::map<std::string, SafeTensor> tensors_;
};

// Writes one safetensors file; tensors are (name, dtype, shape, raw bytes).
using SafeTensorOut = SafetensorsOut;
absl::Status WriteSafetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors);

using oneinfer::Bf16ToF32;
using oneinfer::F16ToF32;
using oneinfer::F32ToBf16;

}  // namespace oneinfer::convert
