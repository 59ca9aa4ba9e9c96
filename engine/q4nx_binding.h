// Load-time binding of a model's Q4NX weight file (docs/q4nx.md).
#pragma once

#include "absl/status/statusor.h"
#include "graph/onnx_loader.h"
#include "graph/passes/pass.h"
#include "quant/q4nx.h"  // kQ4NXWeightsKey

namespace oneinfer {

// When the model names a Q4NX file: opens it and returns the lookup the external_weight_binding
// pass binds each graph input read as MatMul B with (the file's q4_1 tensor of that name). An
// empty lookup without the key.
absl::StatusOr<ExternalWeights> OpenQ4NXWeightFile(const Model& model);

// Binds the model's Q4NX file alone, as the session's passes would (oneinfer inspect). Does
// nothing without the key.
absl::Status BindQ4NXWeightFile(Model& model);

}  // namespace oneinfer
