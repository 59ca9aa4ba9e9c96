#include "graph/op_schema.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/common/version.h"
#include "onnx/defs/schema.h"

namespace oneinfer {

namespace {

Attribute::Type FromOnnxType(onnx::AttributeProto::AttributeType t) {
  using AP = onnx::AttributeProto;
  using T = Attribute::Type;
  switch (t) {
    case AP::FLOAT: return T::kFloat;
    case AP::INT: return T::kInt;
    case AP::STRING: return T::kString;
    case AP::TENSOR: return T::kTensor;
    case AP::GRAPH: return T::kGraph;
    case AP::FLOATS: return T::kFloats;
    case AP::INTS: return T::kInts;
    case AP::STRINGS: return T::kStrings;
    case AP::TENSORS: return T::kTensors;
    case AP::GRAPHS: return T::kGraphs;
    case AP::TYPE_PROTO: return T::kTypeProto;
    case AP::TYPE_PROTOS: return T::kTypeProtos;
    case AP::SPARSE_TENSOR: return T::kSparseTensor;
    default: return T::kUndefined;
  }
}

char ParamKind(const onnx::OpSchema::FormalParameter& p) {
  switch (p.GetOption()) {
    case onnx::OpSchema::Single: return 'r';
    case onnx::OpSchema::Optional: return 'o';
    case onnx::OpSchema::Variadic: return p.GetMinArity() > 0 ? 'v' : 'w';
  }
  return 'o';
}

OpSignature FromOnnxSchema(const onnx::OpSchema& s, const std::string& domain) {
  OpSignature sig;
  sig.domain = domain;
  sig.op_type = s.Name();
  sig.since_version = s.SinceVersion();
  for (const auto& p : s.inputs()) sig.inputs += ParamKind(p);
  for (const auto& p : s.outputs()) sig.outputs += ParamKind(p);
  for (const auto& [name, a] : s.attributes()) sig.attrs[name] = {FromOnnxType(a.type), a.required};
  sig.source = absl::StrCat("ONNX ", onnx::LAST_RELEASE_VERSION);
  return sig;
}

// The newest declaration of (domain, op) with since <= opset, or null.
const OpSignature* FindDeclaration(const std::string& domain, const std::string& op_type, int64_t opset) {
  const OpSignature* best = nullptr;
  for (const OpSignature& d : OpDeclarations()) {
    if (d.domain != domain || d.op_type != op_type || d.since_version > opset) continue;
    if (best == nullptr || d.since_version > best->since_version) best = &d;
  }
  return best;
}

// Fewest values `kinds` accepts: every position up to the last required one, and a variadic
// tail's minimum; unbounded (INT_MAX) most when the last is variadic.
int MinCount(const std::string& kinds) {
  int min = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] == 'r' || kinds[i] == 'v') min = static_cast<int>(i) + 1;
    if (kinds[i] == 'w') min = std::max(min, static_cast<int>(i));
  }
  return min;
}
int MaxCount(const std::string& kinds) {
  if (!kinds.empty() && (kinds.back() == 'v' || kinds.back() == 'w')) return INT_MAX;
  return static_cast<int>(kinds.size());
}

std::string Plural(size_t n, const char* what) { return absl::StrCat(n, " ", what, n == 1 ? "" : "s"); }

std::string Bound(int n) { return n == INT_MAX ? "any number" : std::to_string(n); }

}  // namespace

int64_t OnnxSchemaOpset() {
  const auto& range = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = range.find(onnx::ONNX_DOMAIN);
  return it == range.end() ? 0 : it->second.second;
}

std::optional<OpSignature> FindOpSignature(const std::string& domain, const std::string& op_type, int64_t opset) {
  const std::string dom = CanonicalDomain(domain);
  const OpSignature* declared = FindDeclaration(dom, op_type, opset);
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(op_type, static_cast<int>(std::min<int64_t>(opset, INT_MAX)), dom);
  // A declaration covers a version ONNX's library does not have, so the newer of the two wins.
  if (declared != nullptr && (schema == nullptr || declared->since_version > schema->SinceVersion())) {
    if (!declared->same_as_before) return *declared;
    // A version that changed only the types: the previous version's signature, relabelled.
    std::optional<OpSignature> before = FindOpSignature(dom, op_type, declared->since_version - 1);
    if (!before) return std::nullopt;
    before->since_version = declared->since_version;
    before->source = declared->source;
    return before;
  }
  if (schema == nullptr || schema->Deprecated()) return std::nullopt;
  return FromOnnxSchema(*schema, dom);
}

absl::Status CheckNodeSignature(const Node& node, int64_t opset) {
  if (opset < 0) return absl::OkStatus();  // an unimported domain: the kernel registry names it
  const std::optional<OpSignature> sig = FindOpSignature(node.domain, node.op_type, opset);
  if (!sig) return absl::OkStatus();
  const std::string op = absl::StrCat(node.domain.empty() ? "" : node.domain + ".", node.op_type, "-", sig->since_version);
  auto fail = [&](const auto&... what) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": ", what...));
  };

  // Inputs: trailing omitted ones do not count against the most; placeholders count toward the fewest.
  const int max_in = MaxCount(sig->inputs), min_in = MinCount(sig->inputs);
  const size_t present = node.NumInputs();
  if (present > static_cast<size_t>(max_in)) {
    return fail("has ", Plural(present, "input"), " but ", op, " takes at most ", Bound(max_in));
  }
  if (node.inputs.size() < static_cast<size_t>(min_in)) {
    return fail("has ", Plural(node.inputs.size(), "input"), " but ", op, " needs at least ", min_in);
  }
  for (size_t i = 0; i < sig->inputs.size() && i < node.inputs.size(); ++i) {
    if (sig->inputs[i] == 'r' && node.inputs[i].empty()) return fail("input ", i, " is required by ", op, " but is empty");
  }
  const int max_out = MaxCount(sig->outputs), min_out = MinCount(sig->outputs);
  size_t outputs = node.outputs.size();
  while (outputs > 0 && node.outputs[outputs - 1].empty()) --outputs;
  if (outputs > static_cast<size_t>(max_out)) {
    return fail("has ", Plural(outputs, "output"), " but ", op, " gives at most ", Bound(max_out));
  }
  if (node.outputs.size() < static_cast<size_t>(min_out)) {
    return fail("has ", Plural(node.outputs.size(), "output"), " but ", op, " gives at least ", min_out);
  }

  for (const auto& [name, attr] : node.attrs) {
    auto it = sig->attrs.find(name);
    if (it == sig->attrs.end()) {
      if (name.rfind("__", 0) == 0) continue;  // ONNX leaves "__"-prefixed names to tools
      std::vector<std::string> known;
      for (const auto& [k, a] : sig->attrs) known.push_back(k);
      return fail("attribute '", name, "' is not an attribute of ", op,
                  known.empty() ? std::string(" (it has none)") : absl::StrCat(" (it has ", absl::StrJoin(known, ", "), ")"));
    }
    if (attr.type != it->second.type) {
      return fail("attribute '", name, "' must be ", AttributeTypeName(it->second.type), " but is ",
                  AttributeTypeName(attr.type));
    }
  }
  for (const auto& [name, a] : sig->attrs) {
    if (a.required && !node.HasAttr(name)) return fail("attribute '", name, "' is required by ", op, " but missing");
  }
  return absl::OkStatus();
}

}  // namespace oneinfer
