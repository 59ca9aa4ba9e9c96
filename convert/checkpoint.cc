#include "convert/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace oneinfer::convert {

namespace fs = std::filesystem;
using json = nlohmann::json;

Checkpoint::~Checkpoint() = default;

absl::Status Checkpoint::AddFile(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  for (const auto& [name, e] : (*file)->tensors()) tensors_[name] = SafeTensor{e.dtype, e.shape, e.data, e.bytes};
  files_.push_back(std::move(*file));
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
  return WriteSafetensorsFile(path, tensors);
}

}  // namespace oneinfer::convert
