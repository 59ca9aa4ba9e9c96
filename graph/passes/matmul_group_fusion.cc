// MatMuls that read one A against constant weights of one K and type: a decoder layer's q, k and
// v projections of the normed hidden state, its MLP's gate and up. Each alone quantises A (int8),
// hands its panels to the pool and waits for them; as one internal MatMulGroup node A is read and
// quantised once and every weight's panels go out together. The node takes the place of the
// group's first MatMul (A and the constants are defined before it), the others are dropped.
// float32 and float16 weights, each a 2-D initializer with rows and columns.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

int FuseMatMulGroups(Graph& g, UseDefIndex& uses) {
  // The MatMuls that may join a group, by A, K and weight type, in node order.
  std::map<std::tuple<std::string, int64_t, DType>, std::vector<size_t>> groups;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty() || n.op_type != "MatMul" || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        n.inputs[0].empty()) {
      continue;
    }
    const Tensor* w = uses.Const(n.inputs[1]);
    if (w == nullptr || w->rank() != 2 || w->dim(0) <= 0 || w->dim(1) <= 0 ||
        (w->dtype() != DType::kFloat32 && w->dtype() != DType::kFloat16)) {
      continue;
    }
    // The node takes the first member's place: a weight a Constant node makes after it (folding
    // off) cannot join.
    std::vector<size_t>& group = groups[{n.inputs[0], w->dim(0), w->dtype()}];
    if (!group.empty() && uses.ProducerIndex(n.inputs[1]) > static_cast<long>(group.front())) continue;
    group.push_back(k);
  }
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    Node group;
    group.op_type = internal_ops::MatMulGroup::kName;
    group.domain = internal_ops::kDomain;
    const Node& first = g.nodes[members[0]];
    group.name = first.name.empty() ? absl::StrCat("matmul_group_", fused) : absl::StrCat(first.name, "_group");
    group.inputs = {std::get<0>(key)};
    for (size_t k : members) {
      group.inputs.push_back(g.nodes[k].inputs[1]);
      group.outputs.push_back(g.nodes[k].outputs[0]);
      drop[k] = k != members[0];
    }
    g.nodes[members[0]] = std::move(group);
    ++fused;
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class MatMulGroupFusionPass : public GraphPass {
 public:
  const char* name() const override { return "matmul_group_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseMatMulGroups(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeMatMulGroupFusionPass() { return std::make_unique<MatMulGroupFusionPass>(); }

}  // namespace oneinfer
