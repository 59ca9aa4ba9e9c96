// Load-time binding of a model's Q4NX weight file (docs/q4nx.md).
#pragma once

#include "absl/status/status.h"
#include "graph/onnx_loader.h"
#include "quant/q4nx.h"  // kQ4NXWeightsKey

namespace oneinfer {

// When the model names a Q4NX file: opens it and binds each graph input read as MatMul B to the
// file's q4_1 tensor of that name (BindExternalQ4Weights). Does nothing without the key.
absl::Status BindQ4NXWeightFile(Model& model);

}  // namespace oneinfer
