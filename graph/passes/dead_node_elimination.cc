#include <set>

#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

int RemoveDeadNodes(Graph& g) {
  std::set<std::string> live;
  for (const ValueInfo& v : g.outputs) live.insert(v.name);
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    bool needed = false;
    for (const std::string& out : n.outputs) needed |= (!out.empty() && live.count(out));
    if (!needed) continue;
    keep[k] = true;
    for (const std::string& in : n.inputs) if (!in.empty()) live.insert(in);
    for (const std::string& in : n.implicit_inputs) live.insert(in);
  }
  std::vector<Node> kept;
  int removed = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (keep[k]) kept.push_back(std::move(g.nodes[k]));
    else ++removed;
  }
  g.nodes = std::move(kept);
  std::set<std::string> inputs;
  for (const ValueInfo& v : g.inputs) inputs.insert(v.name);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!live.count(it->first) && !inputs.count(it->first)) it = g.initializers.erase(it);
    else ++it;
  }
  return removed;
}

void EraseFusedNodes(Graph& g, const std::vector<bool>& drop, UseDefIndex& uses) {
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  g.opsets[internal_ops::kDomain] = internal_ops::kOpset;
  uses.Rebuild();
}

namespace {

class DeadNodeEliminationPass : public GraphPass {
 public:
  const char* name() const override { return "dead_node_elimination"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    const int removed = RemoveDeadNodes(g);
    if (removed > 0) uses.Rebuild();
    return removed;
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeDeadNodeEliminationPass() { return std::make_unique<DeadNodeEliminationPass>(); }

}  // namespace oneinfer
