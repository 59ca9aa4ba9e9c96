// Binds 4-bit weights that live outside the ONNX graph (a Q4NX file) to the MatMuls that read
// them. The graph declares each such weight as a plain float32 [K, N] graph input named after
// the checkpoint tensor and used as MatMul's B; this pass (selector: MatMul whose B is a graph
// input; action: an internal MatMulQ4NX(A, chunks) node) swaps the input for the file's chunks,
// so the user never feeds it and no float copy is ever built.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsMatMulB(const Node& n, size_t slot) {
  return slot == 1 && n.op_type == "MatMul" && (n.domain.empty() || n.domain == "ai.onnx");
}

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

absl::StatusOr<int> BindExternalQ4Weights(Graph& g, const ExternalWeightLookup& lookup, const std::string& source) {
  // Graph inputs read as MatMul B, in graph-input order.
  std::vector<std::string> names;
  for (const ValueInfo& in : g.inputs) {
    if (g.IsInitializer(in.name)) continue;
    for (const Node& n : g.nodes) {
      bool as_b = false;
      for (size_t i = 0; i < n.inputs.size(); ++i) as_b = as_b || (n.inputs[i] == in.name && IsMatMulB(n, i));
      if (as_b) {
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
    for (Node& n : g.nodes) {
      if (n.inputs.size() < 2 || n.inputs[1] != name || !IsMatMulB(n, 1)) continue;
      n.op_type = "MatMulQ4NX";
      n.domain = "oneinfer.internal";
      for (const char* key : {"K", "N"}) {
        Attribute a;
        a.name = key;
        a.type = Attribute::Type::kInt;
        a.i = key[0] == 'K' ? K : N;
        n.attrs[key] = a;
      }
      ++rewritten;
    }
    g.initializers[name] = std::move(*chunks);
    g.inputs.erase(in);
  }
  if (rewritten > 0) g.opsets["oneinfer.internal"] = 1;
  return rewritten;
}

}  // namespace oneinfer
