#include "engine/q4nx_binding.h"

#include "absl/strings/str_cat.h"
#include "base/model_path.h"
#include "graph/passes/passes.h"
#include "quant/q4nx.h"

namespace oneinfer {

absl::StatusOr<ExternalWeights> OpenQ4NXWeightFile(const Model& model) {
  auto it = model.metadata.find(kQ4NXWeightsKey);
  if (it == model.metadata.end()) return ExternalWeights{};
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
  ExternalWeights ext;
  ext.lookup = [keep](const std::string& name, int64_t K, int64_t N) -> absl::StatusOr<Tensor> {
    // The graph's B is [K, N] = [in, out]; Q4NX stores [out, in] = N rows of K.
    auto t = keep->FindQ4_1(name, N, K);
    if (!t.ok()) return t.status();
    const int64_t chunk = static_cast<int64_t>(q4nx::kChunkBytesQ4_1);
    return Tensor::Wrap(DType::kUInt8, {static_cast<int64_t>(t->bytes) / chunk, chunk}, keep,
                        const_cast<uint8_t*>(t->chunks));
  };
  ext.source = absl::StrCat("Q4NX file '", location, "'");
  ext.none_bound_error = absl::StrCat("metadata ", kQ4NXWeightsKey, " names '", location,
                                      "' but no MatMul reads a weight from a graph input");
  return ext;
}

absl::Status BindQ4NXWeightFile(Model& model) {
  absl::StatusOr<ExternalWeights> ext = OpenQ4NXWeightFile(model);
  if (!ext.ok() || !ext->lookup) return ext.status();
  PassContext ctx;
  ctx.external_weights = *std::move(ext);
  std::vector<std::unique_ptr<GraphPass>> bind;
  bind.push_back(MakeExternalWeightBindingPass());
  return RunPasses(model.graph, bind, ctx);
}

}  // namespace oneinfer
