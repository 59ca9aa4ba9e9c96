#include <map>
#include <queue>

#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

absl::Status SortTopologically(Graph& g, const std::set<std::string>& outer_names) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    n.implicit_inputs.clear();
    for (const auto& [name, attr] : n.attrs) {
      std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
      if (attr.g) subs.push_back(attr.g);
      for (const auto& sg : subs) {
        for (const std::string& v : FreeVariables(*sg)) n.implicit_inputs.push_back(v);
      }
    }
    for (const std::string& out : n.outputs) {
      if (out.empty()) continue;
      if (producer.count(out)) {
        return absl::InvalidArgumentError(absl::StrCat("value '", out, "' is produced twice (by ",
                                                       g.nodes[producer[out]].Describe(), " and ", n.Describe(), ")"));
      }
      producer[out] = i;
    }
  }
  std::set<std::string> sources = outer_names;
  for (const ValueInfo& v : g.inputs) sources.insert(v.name);
  for (const auto& [name, t] : g.initializers) sources.insert(name);

  // Kahn's algorithm; ties keep the file order so plans are deterministic.
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<int> pending(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<std::string> reads = n.inputs;
    reads.insert(reads.end(), n.implicit_inputs.begin(), n.implicit_inputs.end());
    std::set<size_t> deps;
    for (const std::string& in : reads) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        if (it->second == i) {
          return absl::InvalidArgumentError(absl::StrCat("graph has a cycle: ", n.Describe(), " reads its own output '", in, "'"));
        }
        deps.insert(it->second);
        continue;
      }
      if (!sources.count(in)) {
        return absl::InvalidArgumentError(absl::StrCat(n.Describe(), " reads '", in,
                                                       "', which no node, graph input or initializer produces"));
      }
    }
    for (size_t d : deps) users[d].push_back(i);
    pending[i] = static_cast<int>(deps.size());
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i) if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i]) if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (pending[i] > 0) {
        return absl::InvalidArgumentError(absl::StrCat("graph has a cycle through ", g.nodes[i].Describe()));
      }
    }
  }
  std::vector<Node> sorted;
  sorted.reserve(g.nodes.size());
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);
  return absl::OkStatus();
}

namespace {

class TopologicalSortPass : public GraphPass {
 public:
  const char* name() const override { return "topological_sort"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    if (absl::Status st = SortTopologically(g, {}); !st.ok()) return st;
    uses.Rebuild();  // new order, and the implicit inputs it filled
    return static_cast<int>(g.nodes.size());  // the nodes it ordered
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeTopologicalSortPass() { return std::make_unique<TopologicalSortPass>(); }

}  // namespace oneinfer
