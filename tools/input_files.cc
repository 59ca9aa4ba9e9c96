#include "tools/input_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/session_impl.h"
#include "graph/onnx_loader.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {
std::string ReadBytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const ValueInfo* FindInput(const Graph& g, const std::string& name) {
  for (const ValueInfo& v : g.inputs) if (v.name == name) return &v;
  return nullptr;
}
}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, Value>>> ReadInputFolder(const std::string& dir,
                                                                           const Session& session) {
  if (!fs::is_directory(dir)) return absl::InvalidArgumentError(absl::StrCat("input folder '", dir, "' does not exist"));
  const auto& inputs = session.inputs();
  const Graph& graph = session.impl().graph();
  std::vector<std::pair<std::string, Value>> feeds;
  for (size_t i = 0;; ++i) {
    const fs::path p = fs::path(dir) / absl::StrCat("input_", i, ".pb");
    if (!fs::exists(p)) break;
    const std::string bytes = ReadBytes(p);
    // The declared type of the input says which format the file is in: first the input at this
    // position, then, when the file names another input of another kind, that one.
    const ValueInfo* declared = i < graph.inputs.size() ? &graph.inputs[i] : nullptr;
    std::string name;
    auto v = ParseValue(bytes, declared ? declared->type : TypeInfo{}, &name);
    if (!name.empty() && (declared == nullptr || declared->name != name)) {
      const ValueInfo* named = FindInput(graph, name);  // an unknown name is refused by the run
      if (named && (declared == nullptr || named->type.kind != declared->type.kind)) v = ParseValue(bytes, named->type);
    }
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(p.string(), ": ", v.status().message()));
    if (name.empty()) {
      if (i >= inputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat(p.string(), " has no name and the model has only ", inputs.size(), " inputs"));
      }
      name = inputs[i].name;
    }
    feeds.emplace_back(name, *std::move(v));
  }
  return feeds;
}

}  // namespace oneinfer::cli
