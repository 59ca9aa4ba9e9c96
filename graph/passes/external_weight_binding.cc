// Binds 4-bit weights that live outside the ONNX graph (a Q4NX file) to the MatMuls that read
// them. The graph declares each such weight as a plain float32 [K, N] graph input named after
// the checkpoint tensor and used as MatMul's B; this pass (selector: MatMul whose B is a graph
// input; action: an internal MatMulQ4NX(A, chunks) node) swaps the input for the file's chunks,
// so the user never feeds it and no float copy is ever built.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsMatMulB(const Node& n, size_t slot) { return slot == 1 && n.op_type == "MatMul" && IsDefaultDomain(n.domain); }

// The subgraphs of a node read `name` from the enclosing scope.
bool SubgraphsRead(const Node& n, const std::string& name) {
  for (const auto& [attr_name, a] : n.attrs) {
    std::vector<std::shared_ptr<Graph>> gs = a.graphs;
    if (a.g) gs.push_back(a.g);
    for (const auto& sub : gs) {
      for (const std::string& v : FreeVariables(*sub)) if (v == name) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<int> BindExternalQ4Weights(Graph& g, UseDefIndex& uses, const ExternalWeightLookup& lookup,
                                          const std::string& source) {
  using Op = internal_ops::MatMulQ4NX;
  // Graph inputs read as MatMul B, in graph-input order.
  std::vector<std::string> names;
  for (const ValueInfo& in : g.inputs) {
    if (g.IsInitializer(in.name)) continue;
    for (const UseDefIndex::Use& use : uses.Readers(in.name)) {
      if (use.slot != UseDefIndex::kImplicit && IsMatMulB(g.nodes[use.node], static_cast<size_t>(use.slot))) {
        names.push_back(in.name);
        break;
      }
    }
  }
  int rewritten = 0;
  for (const std::string& name : names) {
    auto in = std::find_if(g.inputs.begin(), g.inputs.end(), [&](const ValueInfo& v) { return v.name == name; });
    const TypeInfo& t = in->type;
    const bool fixed_2d = t.kind == TypeInfo::Kind::kTensor && t.elem == DType::kFloat32 && t.shape && t.shape->size() == 2 &&
                          (*t.shape)[0].is_fixed() && (*t.shape)[1].is_fixed();
    if (!fixed_2d) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is a MatMul weight bound from ", source,
                                                     "; it must be declared float32 [K, N] with fixed sizes, not ", t.ToString()));
    }
    const int64_t K = (*t.shape)[0].value, N = (*t.shape)[1].value;
    for (const ValueInfo& out : g.outputs) {
      if (out.name == name) return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is bound from ", source, " but is also a graph output"));
    }
    std::string first_reader;
    for (const Node& n : g.nodes) {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != name) continue;
        if (!IsMatMulB(n, i)) {
          return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is bound from ", source, " for MatMul B but ",
                                                         n.Describe(), " also reads it as input ", i));
        }
        if (first_reader.empty()) first_reader = n.Describe();
      }
      // Runs before topological_sort fills implicit inputs: look into the subgraphs.
      if (SubgraphsRead(n, name)) {
        return absl::InvalidArgumentError(absl::StrCat("graph input '", name, "' is bound from ", source, " but a subgraph of ",
                                                       n.Describe(), " reads it"));
      }
    }
    auto chunks = lookup(name, K, N);
    if (!chunks.ok()) {
      return absl::Status(chunks.status().code(), absl::StrCat(first_reader, ": weight '", name, "' [", K, ", ", N, "]: ",
                                                               chunks.status().message()));
    }
    for (const UseDefIndex::Use& use : uses.Readers(name)) {
      Node& n = g.nodes[use.node];  // every reader is a MatMul reading it as B (checked above)
      n.op_type = Op::kName;
      n.domain = internal_ops::kDomain;
      n.attrs[Op::kK] = Attribute::Int(Op::kK, K);
      n.attrs[Op::kN] = Attribute::Int(Op::kN, N);
      ++rewritten;
    }
    g.initializers[name] = std::move(*chunks);
    g.inputs.erase(in);
  }
  if (rewritten > 0) {
    g.opsets[internal_ops::kDomain] = internal_ops::kOpset;
    uses.Rebuild();
  }
  return rewritten;
}

namespace {

class ExternalWeightBindingPass : public GraphPass {
 public:
  const char* name() const override { return "external_weight_binding"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext& ctx) const override {
    const ExternalWeights& ext = ctx.external_weights;
    if (!ext.lookup) return 0;
    auto bound = BindExternalQ4Weights(g, uses, ext.lookup, ext.source);
    if (bound.ok() && *bound == 0) return absl::InvalidArgumentError(ext.none_bound_error);
    return bound;
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeExternalWeightBindingPass() { return std::make_unique<ExternalWeightBindingPass>(); }

}  // namespace oneinfer
