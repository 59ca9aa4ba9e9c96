#include "base/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer {

using json = nlohmann::json;

namespace {

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&r, i ? ", " : "", s[i]);
  return r + "]";
}

}  // namespace

size_t SafetensorsDTypeSize(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

absl::StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  absl::StatusOr<std::shared_ptr<MappedFile>> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  f->file_ = *std::move(mapped);
  const size_t file_size = f->file_->size();
  if (file_size < 8) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is too short to be a safetensors file"));
  }
  const uint8_t* bytes = f->file_->data();
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > file_size - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': header length ", header_len, " passes the end of the file (", file_size, " bytes)"));
  }
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': bad safetensors header: ", e.what()));
  }
  if (!header.is_object()) return absl::InvalidArgumentError(absl::StrCat("'", path, "': the header is not a JSON object"));
  const size_t data_start = 8 + header_len, data_size = file_size - data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    try {
      if (it.key() == "__metadata__") {
        for (auto m = it.value().begin(); m != it.value().end(); ++m) f->metadata_[m.key()] = m.value().get<std::string>();
        continue;
      }
      SafetensorsEntry t;
      t.dtype = it.value().at("dtype").get<std::string>();
      // Integers only: nlohmann reads a number past 64 bits as a double, and converting that
      // to an integer is undefined behaviour (a fuzzer found one), so each element is checked.
      auto unsigned_ints = [&](const char* field) -> absl::StatusOr<std::vector<uint64_t>> {
        const json& a = it.value().at(field);
        if (!a.is_array()) return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "': ", field, " is not an array"));
        std::vector<uint64_t> v;
        for (const json& e : a) {
          if (!e.is_number_unsigned()) {
            return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "': ", field, " holds ",
                                                           e.dump(), ", not an integer from 0 to 2^64 - 1"));
          }
          v.push_back(e.get<uint64_t>());
        }
        return v;
      };
      auto dims = unsigned_ints("shape");
      if (!dims.ok()) return dims.status();
      // The element count; a zero dimension makes it 0 whatever the others are.
      const bool empty = std::find(dims->begin(), dims->end(), uint64_t{0}) != dims->end();
      uint64_t n = empty ? 0 : 1;
      for (uint64_t d : *dims) {
        if (d > static_cast<uint64_t>(INT64_MAX) || (!empty && __builtin_mul_overflow(n, d, &n))) {
          return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "' has a shape whose size passes 2^64"));
        }
        t.shape.push_back(static_cast<int64_t>(d));
      }
      auto offsets = unsigned_ints("data_offsets");
      if (!offsets.ok()) return offsets.status();
      const std::vector<uint64_t>& offs = *offsets;
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(),
                                                       "' has data offsets outside the file (truncated?)"));
      }
      t.data = bytes + data_start + offs[0];
      t.bytes = offs[1] - offs[0];
      if (const size_t es = SafetensorsDTypeSize(t.dtype); es != 0) {
        uint64_t need = 0;
        if (__builtin_mul_overflow(n, es, &need)) {
          return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "': ", t.dtype, " ",
                                                         ShapeText(t.shape), " needs more than 2^64 bytes"));
        }
        if (t.bytes != need) {
          return absl::InvalidArgumentError(absl::StrCat("'", path, "': tensor '", it.key(), "' holds ", t.bytes,
                                                         " bytes but ", t.dtype, " ", ShapeText(t.shape), " needs ", need));
        }
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
