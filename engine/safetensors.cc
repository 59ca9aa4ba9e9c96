#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer {

using json = nlohmann::json;

namespace {

// Live mappings, so that ReleaseSafetensorsPages only ever touches file-backed pages.
std::mutex g_live_mu;
std::set<std::pair<uintptr_t, size_t>> g_live;

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&r, i ? ", " : "", s[i]);
  return r + "]";
}

}  // namespace

float Bf16ToF32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

size_t SafetensorsDTypeSize(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_ == nullptr || base_ == MAP_FAILED) return;
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    g_live.erase({reinterpret_cast<uintptr_t>(base_), size_});
  }
  munmap(base_, size_);
}

absl::StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is too short to be a safetensors file"));
  }
  f->base_ = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (f->base_ == MAP_FAILED) return absl::InternalError(absl::StrCat("cannot map '", path, "'"));
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    g_live.insert({reinterpret_cast<uintptr_t>(f->base_), f->size_});
  }
  const auto* bytes = static_cast<const uint8_t*>(f->base_);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > f->size_ - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': header length ", header_len, " passes the end of the file (", f->size_, " bytes)"));
  }
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': bad safetensors header: ", e.what()));
  }
  if (!header.is_object()) return absl::InvalidArgumentError(absl::StrCat("'", path, "': the header is not a JSON object"));
  const size_t data_start = 8 + header_len, data_size = f->size_ - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    try {
      if (it.key() == "__metadata__") {
        for (auto m = it.value().begin(); m != it.value().end(); ++m) f->metadata_[m.key()] = m.value().get<std::string>();
        continue;
      }
      SafetensorsEntry t;
      t.dtype = it.value().at("dtype").get<std::string>();
      t.shape = it.value().at("shape").get<std::vector<int64_t>>();
      const auto offs = it.value().at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(),
                                                       "' has data offsets outside the file (truncated?)"));
      }
      t.data = bytes + data_start + offs[0];
      t.bytes = offs[1] - offs[0];
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        if (d < 0) return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "' has a negative dimension"));
        n *= static_cast<uint64_t>(d);
      }
      if (const size_t es = SafetensorsDTypeSize(t.dtype); es != 0 && t.bytes != n * es) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "' holds ", t.bytes,
                                                       " bytes but ", t.dtype, " ", ShapeText(t.shape), " needs ", n * es));
      }
      f->tensors_[it.key()] = std::move(t);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "': ", e.what()));
    }
  }
  return f;
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void ReleaseSafetensorsPages(const void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (const auto& [base, size] : g_live) {
    if (begin < base || begin + bytes > base + size) continue;
    // Whole pages strictly inside the range: neighbours may still be in use.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + bytes) / page * page;
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
    return;
  }
}

absl::Status WriteSafetensorsFile(const std::string& path, const std::vector<SafetensorsOut>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h += ' ';  // keep tensor data 8-byte aligned
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  const uint64_t len = h.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!f) return absl::InternalError(absl::StrCat("write to '", path, "' failed"));
  return absl::OkStatus();
}

}  // namespace oneinfer
