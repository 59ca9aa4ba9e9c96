#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace oneinfer {
namespace {

// Live mappings, so that ReleaseMappedPages only ever touches file-backed pages.
std::mutex g_live_mu;
std::set<std::pair<uintptr_t, size_t>> g_live;

// Whether [begin, begin + bytes) lies inside one live mapping; the caller holds g_live_mu.
bool InsideLiveMapping(uintptr_t begin, size_t bytes) {
  for (const auto& [base, size] : g_live) {
    if (begin >= base && begin + bytes <= base + size) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* base = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map '", path, "': ", std::strerror(err)));
    }
    f->base_ = base;
    // Start reading the whole file into the page cache now: the load reads most of it anyway,
    // and what it does not (an embedding table, read a row per token) would otherwise come
    // from the disk one row at a time in the first steps (~15-25 ms a row, measured cold).
    madvise(base, f->size_, MADV_WILLNEED);
    std::lock_guard<std::mutex> lock(g_live_mu);
    g_live.insert({reinterpret_cast<uintptr_t>(f->base_), f->size_});
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (base_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    g_live.erase({reinterpret_cast<uintptr_t>(base_), size_});
  }
  munmap(base_, size_);
}

void ReleaseMappedPages(const void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (!InsideLiveMapping(begin, bytes)) return;
  // Whole pages strictly inside the range: neighbours may still be in use.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + bytes) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

bool IsMappedMemory(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  return InsideLiveMapping(reinterpret_cast<uintptr_t>(p), bytes);
}

}  // namespace oneinfer
