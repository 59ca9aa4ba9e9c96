// Typed attribute reads that refuse an attribute of another type.
//
// The loader checks every node against its operator's signature (graph/op_schema.h), so for an
// operator with a signature Node::GetInt and its kin read attributes whose type is proven (and
// read `def` for one of another type, never another field's value). A kernel of an operator
// without a signature reads through these instead.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "graph/ir.h"

namespace oneinfer {

// "int", "floats", "graph", ... as ONNX names attribute types, for messages.
const char* AttributeTypeName(Attribute::Type t);

// The value of attribute `name` of `node`, `def` when absent, and InvalidArgument naming the
// node, the attribute, the type wanted and the type found when it has another type. T is one of
// int64_t, float, std::string and std::vector of those.
template <typename T>
absl::StatusOr<T> ReadAttr(const Node& node, const std::string& name, T def);

// The same for an attribute that must be present (InvalidArgument naming it when absent).
template <typename T>
absl::StatusOr<T> ReadRequiredAttr(const Node& node, const std::string& name);

}  // namespace oneinfer
