// Helpers shared by the fuzz targets.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace oneinfer::fuzz {

// The fuzzer's bytes as a file the path-based readers can open: an anonymous memory file
// (memfd) reached through /proc/self/fd, so no disk and no clean-up are needed.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("oneinfer_fuzz", MFD_CLOEXEC);
    if (fd_ < 0) __builtin_trap();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) __builtin_trap();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace oneinfer::fuzz
