#include "engine/q4nx_binding.h"

#include "absl/strings/str_cat.h"
#include "base/model_path.h"
#include "graph/passes/passes.h"
#include "quant/q4nx.h"

namespace oneinfer {

absl::Status BindQ4NXWeightFile(Model& model) {
  auto it = model.metadata.find(kQ4NXWeightsKey);
  if (it == model.metadata.end()) return absl::OkStatus();
  const std::string& location = it->second;
  // Same rule as external data: a relative path that stays inside the model's folder.
  absl::StatusOr<std::string> full =
      ResolveInsideModelDir(model.base_dir, location, absl::StrCat("metadata ", kQ4NXWeightsKey, " ="));
  if (!full.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metadata ", kQ4NXWeightsKey, " = '", location,
                                                   "' must be a file name relative to the model folder, inside it"));
  }
  auto file = q4nx::Q4NXFile::Open(*full);
  if (!file.ok()) return file.status();
  std::shared_ptr<q4nx::Q4NXFile> keep = *file;
  auto lookup = [&](const std::string& name, int64_t K, int64_t N) -> absl::StatusOr<Tensor> {
    // The graph's B is [K, N] = [in, out]; Q4NX stores [out, in] = N rows of K.
    auto t = keep->FindQ4_1(name, N, K);
    if (!t.ok()) return t.status();
    const int64_t chunk = static_cast<int64_t>(q4nx::kChunkBytesQ4_1);
    return Tensor::Wrap(DType::kUInt8, {static_cast<int64_t>(t->bytes) / chunk, chunk}, keep,
                        const_cast<uint8_t*>(t->chunks));
  };
  auto bound = BindExternalQ4Weights(model.graph, lookup, absl::StrCat("Q4NX file '", location, "'"));
  if (!bound.ok()) return bound.status();
  if (*bound == 0) {
    return absl::InvalidArgumentError(absl::StrCat("metadata ", kQ4NXWeightsKey, " names '", location,
                                                   "' but no MatMul reads a weight from a graph input"));
  }
  return absl::OkStatus();
}

}  // namespace oneinfer
