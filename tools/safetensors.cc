#include "tools/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Checkpoint::Mapped {
  void* base = nullptr;
  size_t size = 0;
  ~Mapped() {
    if (base && base != MAP_FAILED) munmap(base, size);
  }
};

Checkpoint::~Checkpoint() = default;

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

absl::Status Checkpoint::AddFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  struct stat st {};
  fstat(fd, &st);
  auto m = std::make_unique<Mapped>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is too short to be a safetensors file"));
  }
  m->base = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m->base == MAP_FAILED) return absl::InternalError(absl::StrCat("cannot map '", path, "'"));
  const auto* bytes = static_cast<const unsigned char*>(m->base);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > m->size - 8) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': header length ", header_len, " passes the end of the file"));
  }
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': bad safetensors header: ", e.what()));
  }
  const size_t data_start = 8 + header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    try {
      SafeTensor t;
      t.dtype = it.value().at("dtype").get<std::string>();
      t.shape = it.value().at("shape").get<std::vector<int64_t>>();
      const auto offs = it.value().at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || data_start + offs[1] > m->size) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "' has data offsets outside the file"));
      }
      t.data = bytes + data_start + offs[0];
      t.bytes = offs[1] - offs[0];
      tensors_[it.key()] = t;
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "': ", e.what()));
    }
  }
  files_.push_back(std::move(m));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream f(index);
    json j;
    try {
      j = json::parse(f);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("'", index.string(), "': ", e.what()));
    }
    std::set<std::string> shards;
    for (auto& [name, file] : j.at("weight_map").items()) shards.insert(file.get<std::string>());
    for (const std::string& s : shards) {
      if (auto st = ck->AddFile((fs::path(dir) / s).string()); !st.ok()) return st;
    }
    return ck;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(single)) {
    return absl::NotFoundError(absl::StrCat("no model.safetensors or model.safetensors.index.json in '", dir, "'"));
  }
  if (auto st = ck->AddFile(single.string()); !st.ok()) return st;
  return ck;
}

absl::StatusOr<std::vector<float>> Checkpoint::ReadF32(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(absl::StrCat("the checkpoint has no tensor '", name, "'"));
  const SafeTensor& t = it->second;
  if (t.shape != shape) {
    auto str = [](const std::vector<int64_t>& s) {
      std::string r = "[";
      for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ", str(t.shape), ", expected ", str(shape)));
  }
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  const size_t es = t.dtype == "F32" ? 4 : (t.dtype == "BF16" || t.dtype == "F16") ? 2 : 0;
  if (es == 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has dtype ", t.dtype, "; supported: F32, BF16, F16"));
  }
  if (t.bytes != n * es) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has ", t.bytes, " bytes for ", n, " elements"));
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    std::memcpy(out.data(), t.data, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, t.data + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? Bf16ToF32(v) : F16ToF32(v);
    }
  }
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<SafeTensorOut>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8) h += ' ';  // keep tensor data 8-byte aligned
  std::ofstream f(path, std::ios::binary);
  if (!f) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  const uint64_t len = h.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!f) return absl::InternalError(absl::StrCat("write to '", path, "' failed"));
  return absl::OkStatus();
}

}  // namespace oneinfer::cli
