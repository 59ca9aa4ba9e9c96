#include <set>

#include "graph/passes/passes.h"

namespace oneinfer {

namespace {
bool NeverFold(const Node& n) {
  static const std::set<std::string> kSkip = {
      // Nondeterministic.
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial",
      // Integer weights stay integer for the int8 kernels.
      "DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear",
      // Sequence and optional values are not tensors.
      "SequenceEmpty", "SequenceConstruct", "Optional", "SplitToSequence"};
  if (!n.domain.empty() || kSkip.count(n.op_type)) return true;
  for (const auto& [name, a] : n.attrs) {
    if (a.g || !a.graphs.empty()) return true;
  }
  return false;
}
}  // namespace

absl::StatusOr<int> FoldConstants(Graph& g, const NodeEvaluator& evaluate, size_t max_output_bytes) {
  std::set<std::string> overridable;  // initializers that are also graph inputs can be fed
  for (const ValueInfo& v : g.inputs) overridable.insert(v.name);
  std::set<std::string> outputs;
  for (const ValueInfo& v : g.outputs) outputs.insert(v.name);
  int folded = 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool constant = !NeverFold(n);
    std::vector<const Tensor*> ins;
    for (const std::string& in : n.inputs) {
      if (!constant) break;
      if (in.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = g.initializers.find(in);
      if (it == g.initializers.end() || overridable.count(in)) constant = false;
      else ins.push_back(&it->second);
    }
    if (!constant) {
      kept.push_back(std::move(n));
      continue;
    }
    auto result = evaluate(n, ins);
    bool small = result.ok();
    if (small) {
      for (const Tensor& t : *result) small &= t.defined() && t.byte_size() <= max_output_bytes;
    }
    if (!small) {  // errors surface again, with context, when the plan runs the node
      kept.push_back(std::move(n));
      continue;
    }
    for (size_t i = 0; i < n.outputs.size() && i < result->size(); ++i) {
      if (!n.outputs[i].empty()) g.initializers[n.outputs[i]] = (*result)[i];
    }
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace oneinfer
