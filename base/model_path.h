// The rule every file a model names must follow (external data, the Q4NX weight file): a
// relative path that stays inside the model's folder once `..` and links are resolved.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace oneinfer {

// The canonical full path of `location` under `model_dir` ("" = the current folder), or
// InvalidArgument "<what> '<location>' ..." when it is empty, absolute or leaves the folder.
absl::StatusOr<std::string> ResolveInsideModelDir(const std::string& model_dir, const std::string& location,
                                                  const std::string& what);

}  // namespace oneinfer
