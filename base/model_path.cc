#include "base/model_path.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace oneinfer {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ResolveInsideModelDir(const std::string& model_dir, const std::string& location,
                                                  const std::string& what) {
  if (location.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no location"));
  if (fs::path(location).is_absolute()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", location,
                                                   "' is absolute; it must be relative to the model folder"));
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(model_dir.empty() ? "." : model_dir), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(what, " '", location, "': bad model folder"));
  const fs::path full = fs::weakly_canonical(base / location, ec);
  const fs::path rel = full.lexically_relative(base);
  if (ec || rel.empty() || *rel.begin() == ".." || rel == ".") {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", location, "' leaves the model folder"));
  }
  return full.string();
}

}  // namespace oneinfer
