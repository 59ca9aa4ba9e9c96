// The safetensors container: an 8-byte little-endian header length, a JSON table of tensors
// (dtype, shape, data_offsets, plus __metadata__), then the raw data. Shared by the checkpoint
// reader of the exporter (tools/) and the Q4NX weight files the session binds (quant/q4nx.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/half.h"
#include "base/mapped_file.h"

namespace oneinfer {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "BF16", "U8", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t bytes = 0;
};

// A memory-mapped safetensors file, checked once at Open: the header parses, every tensor's
// data_offsets lie inside the data section, and a tensor of a known dtype has exactly
// elements * element-size bytes. Entries point into the mapping, which lives as long as this.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsEntry* Find(const std::string& name) const;
  const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, SafetensorsEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Bytes per element of a safetensors dtype; 0 when unknown.
size_t SafetensorsDTypeSize(const std::string& dtype);

// One tensor to write: (name, dtype, shape, raw bytes).
struct SafetensorsOut {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};
// Writes the tensors in order (data 8-byte aligned) with optional string metadata.
absl::Status WriteSafetensorsFile(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace oneinfer
