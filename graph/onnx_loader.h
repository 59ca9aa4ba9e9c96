// ONNX ModelProto -> oneinfer IR. Big weights stay in external data, memory-mapped, never copied.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/mapped_file.h"
#include "base/value.h"
#include "graph/ir.h"

namespace onnx {
class TensorProto;
class ModelProto;
class GraphProto;
class TypeProto;
class SequenceProto;
class OptionalProto;
}  // namespace onnx

namespace oneinfer {

struct Model {
  int64_t ir_version = 0;
  std::string producer;
  std::string path;      // empty when loaded from memory
  std::string base_dir;  // where external data locations are resolved
  Graph graph;           // graph.opsets holds the model's opset imports
  std::map<std::string, std::string> metadata;  // metadata_props
};

// Reads external data files through one mapping per file.
class ExternalDataResolver {
 public:
  explicit ExternalDataResolver(std::string base_dir) : base_dir_(std::move(base_dir)) {}
  // Returns a tensor viewing [offset, offset+length) of `location` resolved against base_dir;
  // refuses locations that leave base_dir and ranges past the end of the file.
  absl::StatusOr<Tensor> Map(const std::string& tensor_name, const std::string& location,
                             int64_t offset, int64_t length, DType dtype, const Shape& shape);

 private:
  std::string base_dir_;
  std::map<std::string, std::shared_ptr<MappedFile>> mappings_;  // canonical path -> mapping
};

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromFile(const std::string& path);

absl::StatusOr<std::unique_ptr<Model>> LoadModelFromBuffer(const void* data, size_t size,
                                                           const std::string& base_dir);
// Converts a parsed ModelProto (used by tools that build protos in memory).
absl::StatusOr<std::unique_ptr<Model>> ModelFromProto(const onnx::ModelProto& proto,
                                                      const std::string& base_dir);
// The same, freeing each initializer's bytes in the proto as soon as its tensor is made.
absl::StatusOr<std::unique_ptr<Model>> ModelFromProto(onnx::ModelProto&& proto, const std::string& base_dir);

// Protobuf's default recursion limit: a Graph -> Node -> Attribute -> Graph chain spends 3 levels
// per subgraph and the value types inside the deepest up to 5 more, so 31 levels of If/Loop/Scan
// bodies fit (tests/hostile_input_test.cc measures it).
inline constexpr int kMaxMessageNesting = 100;

// Parses a serialized ModelProto with the protobuf size limit raised to 2 GB. An empty buffer,
// a model without a graph and nesting past kMaxMessageNesting each get their own message.
absl::Status ParseModelProto(const void* data, size_t size, onnx::ModelProto* proto);

// TensorProto <-> Tensor. `resolver` may be null when external data is not allowed.
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, ExternalDataResolver* resolver);
absl::Status TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto);
absl::StatusOr<TypeInfo> TypeFromProto(const onnx::TypeProto& proto);

// SequenceProto / OptionalProto (how ONNX test data stores sequence and optional values) <-> Value.
// Sequences of tensors and optionals of a tensor or such a sequence; nested sequences, maps and
// sparse tensors are Unimplemented. An empty sequence has element type kUndefined.
absl::StatusOr<Value> ValueFromSequenceProto(const onnx::SequenceProto& proto);
absl::StatusOr<Value> ValueFromOptionalProto(const onnx::OptionalProto& proto);
absl::Status ValueToSequenceProto(const Value& v, const std::string& name, onnx::SequenceProto* proto);
absl::Status ValueToOptionalProto(const Value& v, const std::string& name, onnx::OptionalProto* proto);
// Parses serialized bytes as the format of `type`'s kind: SequenceProto for a sequence,
// OptionalProto for an optional, else TensorProto. Errors name the format expected. `name`, when
// given, receives the proto's name field.
absl::StatusOr<Value> ParseValue(const std::string& bytes, const TypeInfo& type, std::string* name = nullptr);

}  // namespace oneinfer
