// The Qwen3 exporter with --weights q4nx (Qwen3Weights::kQ4NX): the projections and lm_head go to a Q4NX file beside the graph
// as q4_1; the graph reads each as a float32 [in, out] graph input of the checkpoint's name,
// which the session binds from that file at load (docs/q4nx.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/safetensors.h"

namespace onnx {
class GraphProto;
class ModelProto;
}  // namespace onnx

namespace oneinfer::convert {

class Q4NXWeightSink {
 public:
  // file: the Q4NX file to write, beside the graph.
  explicit Q4NXWeightSink(std::filesystem::path file) : file_(std::move(file)) {}
  // Quantises w ([out, in] row-major, the checkpoint's orientation) to q4_1 and declares the
  // graph input `name` float32 [in, out] for the MatMul to read. Returns the input's name.
  absl::StatusOr<std::string> Add(onnx::GraphProto* g, const std::string& name, const std::vector<float>& w,
                                  int64_t out, int64_t in);
  // Writes the file and names it in the model's metadata.
  absl::Status Finish(onnx::ModelProto* model);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::vector<SafetensorsOut> tensors_;
};

}  // namespace oneinfer::convert
