// Static shape and type inference: runs the rules of graph/passes/shape_rules.h over a sorted
// graph and merges what they find with what the model declares.
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"
#include "graph/passes/shape_rules.h"

namespace oneinfer {

namespace {

using shape_rules::Ctx;
using shape_rules::Dims;
using shape_rules::FromTensor;
using shape_rules::FromType;
using shape_rules::Known;
using shape_rules::Rules;

std::string DimsString(DType elem, const std::optional<Dims>& shape) {
  TypeInfo t;
  t.kind = TypeInfo::Kind::kTensor;
  t.elem = elem;
  t.shape = shape;
  return t.ToString();
}

// Merges what was inferred into what the model declares; an error when they cannot both hold.
absl::Status Merge(const std::string& name, const TypeInfo& declared, Known& inferred) {
  if (declared.kind != TypeInfo::Kind::kTensor) return absl::OkStatus();
  const std::string both = absl::StrCat(" (declared ", declared.ToString(), ", inferred ",
                                        DimsString(inferred.elem, inferred.shape), ")");
  auto conflict = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("value '", name, "': the declared ", what,
                                                   " disagrees with the one its inputs give", both));
  };
  if (declared.elem != DType::kUndefined) {
    if (inferred.elem != DType::kUndefined && inferred.elem != declared.elem) return conflict("element type");
    inferred.elem = declared.elem;
  }
  if (!declared.shape) return absl::OkStatus();
  if (!inferred.shape) {
    inferred.shape = declared.shape;
    return absl::OkStatus();
  }
  if (inferred.shape->size() != declared.shape->size()) return conflict("rank");
  for (size_t i = 0; i < inferred.shape->size(); ++i) {
    const Dim& d = (*declared.shape)[i];
    Dim& o = (*inferred.shape)[i];
    if (d.is_fixed() && o.is_fixed() && d.value != o.value) return conflict("shape");
    if (d.is_fixed() || (!o.is_fixed() && !d.param.empty())) o = d;  // the model's own names win
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> InferShapes(Graph& g) {
  std::map<std::string, Known> known;
  std::set<std::string> overridable;
  for (const ValueInfo& v : g.inputs) {
    overridable.insert(v.name);
    known[v.name] = FromType(v.type);
  }
  for (const auto& [name, t] : g.initializers) {
    Known& k = known[name];
    if (!overridable.count(name)) {
      k = FromTensor(t);
    } else if (k.elem == DType::kUndefined) {  // a default that can be fed: its type, not its value
      k = FromTensor(t);
      k.constant = nullptr;
      k.value.reset();
    }
  }
  std::map<std::string, const TypeInfo*> declared;
  for (const auto& [name, v] : g.value_info) declared[name] = &v.type;
  for (const ValueInfo& v : g.outputs) declared[v.name] = &v.type;

  int typed = 0;
  const auto& rules = Rules();
  for (const Node& n : g.nodes) {
    Ctx c{n, g.OpsetFor(n.domain), {}, std::vector<Known>(n.outputs.size())};
    for (const std::string& in : n.inputs) {
      auto it = in.empty() ? known.end() : known.find(in);
      c.in.push_back(it == known.end() ? nullptr : &it->second);
    }
    if (n.domain.empty()) {
      auto rule = rules.find(n.op_type);
      if (rule != rules.end()) rule->second(c);
    } else if (n.domain == internal_ops::kDomain) {
      // The fusions that run before this pass keep their data's element type (later passes read
      // it: a KV cache view feeds attention's products). RMSNorm and SoftmaxAttention are made
      // after it.
      if (n.op_type == internal_ops::KVCacheAppend::kName) {
        for (size_t k = 0; k < c.out.size(); ++k) c.out[k].elem = c.Elem(k == 0 ? 1 : 0);
        // The slot view: the new entries' shape with the sequence axis unknown (past + new).
        const int64_t axis = n.GetInt(internal_ops::KVCacheAppend::kAxis, 1);
        if (!c.out.empty() && c.Shape(1) && axis >= 0 && static_cast<size_t>(axis) < c.Shape(1)->size()) {
          c.out[0].shape = *c.Shape(1);
          (*c.out[0].shape)[static_cast<size_t>(axis)] = Dim{};
        }
      } else if (n.op_type == internal_ops::KVCacheFinish::kName && !c.out.empty()) {
        c.out[0].elem = c.Elem(0);
      } else if (n.op_type == internal_ops::KVCacheConcat::kName) {
        rules.at("Concat")(c);  // ONNX Concat's rule: the same inputs and `axis`
      } else if (n.op_type == internal_ops::FusedConv::kName) {
        rules.at("Conv")(c);  // a Conv's shape rule reads only its inputs and window attributes
      } else if ((n.op_type == internal_ops::WeightDequantMatMul::kName || n.op_type == internal_ops::MatMulQ4NX::kName ||
                  n.op_type == internal_ops::QdqMatMul::kName) &&
                 !c.out.empty()) {
        // The fused products against a constant [K, N] weight: A's shape with N columns last, and
        // typed, so a Transpose -> MatMul behind them still becomes FusedMatMul. QdqMatMul's type
        // is its `out` attribute's (a folded Q -> DQ gives float32); the others keep A's.
        using Qdq = internal_ops::QdqMatMul;
        const bool qdq = n.op_type == Qdq::kName;
        if (qdq) {
          const std::string out = n.GetString(Qdq::kOut, "float32");
          c.out[0].elem = out == "int8" ? DType::kInt8 : out == "uint8" ? DType::kUInt8 : DType::kFloat32;
        } else {
          c.out[0].elem = c.Elem(0);
        }
        const Dims* a = c.Shape(0);  // QdqMatMul's x and the others' A
        const Dims* w = c.Shape(qdq ? static_cast<size_t>(Qdq::kW) : size_t{1});
        std::optional<Dim> cols;
        if (n.op_type == internal_ops::MatMulQ4NX::kName) {
          const int64_t v = n.GetInt(internal_ops::MatMulQ4NX::kN, -1);
          if (v >= 0) cols = shape_rules::Fixed(v);
        } else if (w != nullptr && w->size() == 2) {
          cols = (*w)[1];
        }
        if (a != nullptr && !a->empty() && cols) {
          Dims shape = *a;
          shape.back() = *cols;
          c.out[0].shape = shape;
        }
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& name = n.outputs[k];
      if (name.empty()) continue;
      Known& out = c.out[k];
      const bool inferred = out.elem != DType::kUndefined;
      auto d = declared.find(name);
      if (d != declared.end()) {
        auto st = Merge(name, *d->second, out);
        if (!st.ok()) return absl::Status(st.code(), absl::StrCat(n.Describe(), ": ", st.message()));
      }
      if (inferred) {
        TypeInfo t;
        t.kind = TypeInfo::Kind::kTensor;
        t.elem = out.elem;
        t.shape = out.shape;
        g.value_info[name] = ValueInfo{name, std::move(t)};
        ++typed;
      }
      if (out.elem != DType::kUndefined) known[name] = std::move(out);
    }
  }
  return typed;
}

namespace {

class ShapeInferencePass : public GraphPass {
 public:
  const char* name() const override { return "shape_inference"; }
  // Writes only g.value_info: the index stays as it is.
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex&, const PassContext&) const override { return InferShapes(g); }
};

}  // namespace

std::unique_ptr<GraphPass> MakeShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

}  // namespace oneinfer
