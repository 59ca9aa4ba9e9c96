// oneinfer's own graph IR: what the ONNX loader produces and the passes and planner consume.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

class Graph;

// "ai.onnx" and "" name the same (default) domain: "" for both.
std::string CanonicalDomain(const std::string& domain);
inline bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// One dimension of a declared shape: a fixed size, a symbolic name, or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when fixed
  std::string param;   // symbolic name when not fixed (may be empty = unknown)
  bool is_fixed() const { return value >= 0; }
};

// The type of a graph value: a tensor, a sequence or optional of something, or unknown.
struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSequence, kOptional };
  Kind kind = Kind::kUnknown;
  DType elem = DType::kUndefined;              // for kTensor
  std::optional<std::vector<Dim>> shape;       // for kTensor; nullopt = rank unknown
  std::shared_ptr<TypeInfo> inner;             // for kSequence / kOptional
  std::string ToString() const;
};

struct ValueInfo {
  std::string name;
  TypeInfo type;
};

struct Attribute {
  enum class Type { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings,
                    kTensors, kGraphs, kTypeProto, kTypeProtos, kSparseTensor };
  std::string name;
  Type type = Type::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  TypeInfo tp;

  static Attribute Int(const std::string& name, int64_t v);
  static Attribute Float(const std::string& name, float v);
  static Attribute String(const std::string& name, const std::string& v);
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" for ai.onnx
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::map<std::string, Attribute> attrs;
  // Names from enclosing scopes read by this node's subgraphs (filled by the loader).
  std::vector<std::string> implicit_inputs;

  bool HasAttr(const std::string& n) const { return attrs.count(n) != 0; }
  const Attribute* FindAttr(const std::string& n) const;
  int64_t GetInt(const std::string& n, int64_t def) const;
  float GetFloat(const std::string& n, float def) const;
  std::string GetString(const std::string& n, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(const std::string& n, std::vector<float> def = {}) const;
  std::vector<std::string> GetStrings(const std::string& n, std::vector<std::string> def = {}) const;
  // Number of inputs actually present (trailing omitted inputs do not count).
  size_t NumInputs() const;
  bool HasInput(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  bool HasOutput(size_t i) const { return i < outputs.size() && !outputs[i].empty(); }
  // "Add 'name'" for error messages.
  std::string Describe() const;
};

class Graph {
 public:
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::map<std::string, ValueInfo> value_info;
  std::map<std::string, Tensor> initializers;
  // Opset per domain, shared with subgraphs ("" and "ai.onnx" both mean the default domain).
  std::map<std::string, int64_t> opsets;

  bool IsInitializer(const std::string& n) const { return initializers.count(n) != 0; }
  const TypeInfo* FindType(const std::string& n) const;
  int64_t OpsetFor(const std::string& domain) const;
};

// Names that `g` (including nested subgraphs) reads but does not define.
std::vector<std::string> FreeVariables(const Graph& g);

}  // namespace oneinfer
