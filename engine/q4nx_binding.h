// Load-time binding of a model's Q4NX weight file (docs/q4nx.md).
#pragma once

#include "absl/status/status.h"
#include "graph/onnx_loader.h"

namespace oneinfer {

// metadata_props key naming the Q4NX file, relative to the model's folder.
inline constexpr char kQ4NXWeightsKey[] = "oneinfer.q4nx_weights";

// When the model names a Q4NX file: opens it and binds each graph input read as MatMul B to the
// file's q4_1 tensor of that name (BindExternalQ4Weights). Does nothing without the key.
absl::Status BindQ4NXWeightFile(Model& model);

}  // namespace oneinfer
