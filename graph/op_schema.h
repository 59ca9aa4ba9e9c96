// Every node is checked at load against its operator's signature: the input and output counts,
// the required inputs, and each attribute's name and type. Signatures come from ONNX's own
// schemas (libonnx, opsets up to kOnnxSchemaOpset) and, for what those do not know, from
// declarations kept here (op_declarations.cc): operators and versions newer than that library,
// the engine's internal ops and the com.microsoft ops the kernels implement.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/attr.h"
#include "graph/ir.h"

namespace oneinfer {

// The newest ai.onnx opset the linked ONNX library has schemas for (17 for ONNX 1.12).
int64_t OnnxSchemaOpset();

// What one version of an operator accepts.
struct OpSignature {
  std::string domain;
  std::string op_type;
  int64_t since_version = 0;
  // Per formal input / output: 'r' required, 'o' optional, 'v' variadic (last only, >= 1 value)
  // or 'w' variadic that may be empty.
  std::string inputs;
  std::string outputs;
  struct Attr {
    Attribute::Type type = Attribute::Type::kUndefined;
    bool required = false;
  };
  std::map<std::string, Attr> attrs;
  // A declaration of a version that changed only its types: the previous version's signature.
  bool same_as_before = false;
  std::string source;  // "ONNX 1.12.0" or "oneinfer", for tests and reports
};

// Our declarations (op_declarations.cc), each newer than what ONNX's library knows of its op.
const std::vector<OpSignature>& OpDeclarations();

// The signature of `op_type` in `domain` at `opset` (the newest version <= opset), or nullopt
// when neither ONNX's schemas nor our declarations know it (the kernel registry then decides).
std::optional<OpSignature> FindOpSignature(const std::string& domain, const std::string& op_type, int64_t opset);

// Checks `node` against its signature at `opset`: InvalidArgument naming the node and, as the
// case may be, the attribute with the type expected and found, the unknown or missing attribute,
// the input count and the signature's bound, or the empty required input. OK when the operator
// has no signature. Subgraphs are not visited (the loader checks each graph as it converts it).
absl::Status CheckNodeSignature(const Node& node, int64_t opset);

}  // namespace oneinfer
