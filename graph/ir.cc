#include "graph/ir.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "graph/attr.h"

namespace oneinfer {

std::string CanonicalDomain(const std::string& domain) { return IsDefaultDomain(domain) ? std::string() : domain; }

Attribute Attribute::Int(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = Type::kInt;
  a.i = v;
  return a;
}

Attribute Attribute::Float(const std::string& name, float v) {
  Attribute a;
  a.name = name;
  a.type = Type::kFloat;
  a.f = v;
  return a;
}

Attribute Attribute::String(const std::string& name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = Type::kString;
  a.s = v;
  return a;
}

std::string TypeInfo::ToString() const {
  switch (kind) {
    case Kind::kUnknown: return "unknown";
    case Kind::kSequence: return absl::StrCat("seq(", inner ? inner->ToString() : "?", ")");
    case Kind::kOptional: return absl::StrCat("optional(", inner ? inner->ToString() : "?", ")");
    case Kind::kTensor: break;
  }
  std::string s(DTypeName(elem));
  if (!shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < shape->size(); ++i) {
    if (i) s += ", ";
    const Dim& d = (*shape)[i];
    s += d.is_fixed() ? std::to_string(d.value) : (d.param.empty() ? "?" : d.param);
  }
  return s + "]";
}

const char* AttributeTypeName(Attribute::Type t) {
  using T = Attribute::Type;
  switch (t) {
    case T::kUndefined: return "undefined";
    case T::kFloat: return "float";
    case T::kInt: return "int";
    case T::kString: return "string";
    case T::kTensor: return "tensor";
    case T::kGraph: return "graph";
    case T::kFloats: return "floats";
    case T::kInts: return "ints";
    case T::kStrings: return "strings";
    case T::kTensors: return "tensors";
    case T::kGraphs: return "graphs";
    case T::kTypeProto: return "type_proto";
    case T::kTypeProtos: return "type_protos";
    case T::kSparseTensor: return "sparse_tensor";
  }
  return "unknown";
}

const Attribute* Node::FindAttr(const std::string& n) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? nullptr : &it->second;
}

namespace {

// Where each C++ type lives in an Attribute, and which attribute type holds it.
template <typename T> struct AttrField;
template <> struct AttrField<int64_t> {
  static constexpr Attribute::Type kType = Attribute::Type::kInt;
  static const int64_t& Get(const Attribute& a) { return a.i; }
};
template <> struct AttrField<float> {
  static constexpr Attribute::Type kType = Attribute::Type::kFloat;
  static const float& Get(const Attribute& a) { return a.f; }
};
template <> struct AttrField<std::string> {
  static constexpr Attribute::Type kType = Attribute::Type::kString;
  static const std::string& Get(const Attribute& a) { return a.s; }
};
template <> struct AttrField<std::vector<int64_t>> {
  static constexpr Attribute::Type kType = Attribute::Type::kInts;
  static const std::vector<int64_t>& Get(const Attribute& a) { return a.ints; }
};
template <> struct AttrField<std::vector<float>> {
  static constexpr Attribute::Type kType = Attribute::Type::kFloats;
  static const std::vector<float>& Get(const Attribute& a) { return a.floats; }
};
template <> struct AttrField<std::vector<std::string>> {
  static constexpr Attribute::Type kType = Attribute::Type::kStrings;
  static const std::vector<std::string>& Get(const Attribute& a) { return a.strings; }
};

template <typename T>
T Unchecked(const Node& node, const std::string& n, T def) {
  const Attribute* a = node.FindAttr(n);
  return a != nullptr && a->type == AttrField<T>::kType ? AttrField<T>::Get(*a) : def;
}

}  // namespace

template <typename T>
absl::StatusOr<T> ReadAttr(const Node& node, const std::string& name, T def) {
  const Attribute* a = node.FindAttr(name);
  if (a == nullptr) return def;
  if (a->type != AttrField<T>::kType) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": attribute '", name, "' must be ",
                                                   AttributeTypeName(AttrField<T>::kType), " but is ",
                                                   AttributeTypeName(a->type)));
  }
  return AttrField<T>::Get(*a);
}

template <typename T>
absl::StatusOr<T> ReadRequiredAttr(const Node& node, const std::string& name) {
  if (!node.HasAttr(name)) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": attribute '", name, "' is required but missing"));
  }
  return ReadAttr<T>(node, name, T{});
}

#define ONEINFER_ATTR_TYPE(T)                                                       \
  template absl::StatusOr<T> ReadAttr<T>(const Node&, const std::string&, T);      \
  template absl::StatusOr<T> ReadRequiredAttr<T>(const Node&, const std::string&);
ONEINFER_ATTR_TYPE(int64_t)
ONEINFER_ATTR_TYPE(float)
ONEINFER_ATTR_TYPE(std::string)
ONEINFER_ATTR_TYPE(std::vector<int64_t>)
ONEINFER_ATTR_TYPE(std::vector<float>)
ONEINFER_ATTR_TYPE(std::vector<std::string>)
#undef ONEINFER_ATTR_TYPE

int64_t Node::GetInt(const std::string& n, int64_t def) const { return Unchecked<int64_t>(*this, n, def); }
float Node::GetFloat(const std::string& n, float def) const { return Unchecked<float>(*this, n, def); }
std::string Node::GetString(const std::string& n, const std::string& def) const {
  return Unchecked<std::string>(*this, n, def);
}
std::vector<int64_t> Node::GetInts(const std::string& n, std::vector<int64_t> def) const {
  return Unchecked<std::vector<int64_t>>(*this, n, std::move(def));
}
std::vector<float> Node::GetFloats(const std::string& n, std::vector<float> def) const {
  return Unchecked<std::vector<float>>(*this, n, std::move(def));
}
std::vector<std::string> Node::GetStrings(const std::string& n, std::vector<std::string> def) const {
  return Unchecked<std::vector<std::string>>(*this, n, std::move(def));
}

size_t Node::NumInputs() const {
  size_t n = inputs.size();
  while (n > 0 && inputs[n - 1].empty()) --n;
  return n;
}

std::string Node::Describe() const {
  std::string d = domain.empty() ? op_type : absl::StrCat(domain, ".", op_type);
  if (!name.empty()) absl::StrAppend(&d, " '", name, "'");
  else if (!outputs.empty()) absl::StrAppend(&d, " (output '", outputs[0], "')");
  return d;
}

const TypeInfo* Graph::FindType(const std::string& n) const {
  for (const ValueInfo& v : inputs) if (v.name == n) return &v.type;
  for (const ValueInfo& v : outputs) if (v.name == n) return &v.type;
  auto it = value_info.find(n);
  return it == value_info.end() ? nullptr : &it->second.type;
}

int64_t Graph::OpsetFor(const std::string& domain) const {
  auto it = opsets.find(CanonicalDomain(domain));
  return it == opsets.end() ? -1 : it->second;
}

namespace {
void CollectFree(const Graph& g, std::set<std::string>& defined_outer, std::set<std::string>& free) {
  std::set<std::string> defined = defined_outer;
  for (const ValueInfo& v : g.inputs) defined.insert(v.name);
  for (const auto& [n, t] : g.initializers) defined.insert(n);
  for (const Node& node : g.nodes) {
    for (const std::string& out : node.outputs) if (!out.empty()) defined.insert(out);
  }
  for (const Node& node : g.nodes) {
    for (const std::string& in : node.inputs) {
      if (!in.empty() && !defined.count(in)) free.insert(in);
    }
    for (const auto& [an, attr] : node.attrs) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sg : subs) {
        std::set<std::string> inner_free;
        std::set<std::string> none;
        CollectFree(*sg, none, inner_free);
        for (const std::string& n : inner_free) if (!defined.count(n)) free.insert(n);
      }
    }
  }
  // A graph output may name an outer value directly, without any node reading it.
  for (const ValueInfo& o : g.outputs) if (!defined.count(o.name)) free.insert(o.name);
}
}  // namespace

std::vector<std::string> FreeVariables(const Graph& g) {
  std::set<std::string> none, free;
  CollectFree(g, none, free);
  return {free.begin(), free.end()};
}

}  // namespace oneinfer
