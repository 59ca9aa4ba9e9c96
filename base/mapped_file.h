// Read-only memory-mapped files, and the one registry of live mappings behind ReleaseMappedPages.
// The ONNX loader's external data and the safetensors container (checkpoints, Q4NX) both map
// through here, so a kernel that has repacked a weight can drop its file pages without knowing
// which kind of file holds them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

class MappedFile {
 public:
  // Maps the whole regular file `path` (private, read-only; pages load lazily).
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return static_cast<const uint8_t*>(base_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
};

// After a kernel has copied [p, p + bytes) into its own layout: drops the resident pages
// strictly inside it (re-read from the file if touched again). Does nothing for memory that
// is not inside a live MappedFile.
void ReleaseMappedPages(const void* p, size_t bytes);
inline void ReleaseMappedPages(const Tensor& t) { ReleaseMappedPages(t.raw_data(), t.byte_size()); }
// Whether [p, p + bytes) lies inside a live MappedFile (its pages come from the file).
bool IsMappedMemory(const void* p, size_t bytes);

}  // namespace oneinfer
