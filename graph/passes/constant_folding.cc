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

absl::StatusOr<int> FoldConstants(Graph& g, UseDefIndex& uses, const NodeEvaluator& evaluate, size_t max_output_bytes) {
  int folded = 0;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (NeverFold(n)) continue;
    // Every input a constant (an overridable initializer can be fed); folded outputs are
    // initializers at once, so chains fold in one sweep.
    bool constant = true;
    std::vector<const Tensor*> ins;
    for (const std::string& in : n.inputs) {
      if (in.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor* c = uses.Const(in);
      constant = constant && c != nullptr;
      if (!constant) break;
      ins.push_back(c);
    }
    if (!constant) continue;
    auto result = evaluate(n, ins);
    bool small = result.ok();
    if (small) {
      for (const Tensor& t : *result) small &= t.defined() && t.byte_size() <= max_output_bytes;
    }
    if (!small) continue;  // errors surface again, with context, when the plan runs the node
    for (size_t i = 0; i < n.outputs.size() && i < result->size(); ++i) {
      if (!n.outputs[i].empty()) g.initializers[n.outputs[i]] = (*result)[i];
    }
    drop[k] = true;
    ++folded;
  }
  if (folded == 0) return 0;
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  uses.Rebuild();
  return folded;
}

namespace {

class ConstantFoldingPass : public GraphPass {
 public:
  const char* name() const override { return "constant_folding"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext& ctx) const override {
    if (!ctx.constant_folding || !ctx.evaluate) return 0;
    return FoldConstants(g, uses, ctx.evaluate, ctx.max_folded_bytes);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeConstantFoldingPass() { return std::make_unique<ConstantFoldingPass>(); }

}  // namespace oneinfer
