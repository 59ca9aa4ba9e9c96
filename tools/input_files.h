// Reading a folder of input_<i>.pb files (ONNX test data sets), shared by `exec` and `bench`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/value.h"
#include "oneinfer/session.h"

namespace oneinfer::cli {

// D/input_0.pb, D/input_1.pb, ... until the first missing index: serialized TensorProto, or
// SequenceProto / OptionalProto for an input declared a sequence / optional. The name field picks
// the graph input; an empty name means the input at that position. An unparsable file is an
// error naming it; a dtype or shape the model refuses is left to the run, which names the input.
absl::StatusOr<std::vector<std::pair<std::string, Value>>> ReadInputFolder(const std::string& dir,
                                                                           const Session& session);

}  // namespace oneinfer::cli
