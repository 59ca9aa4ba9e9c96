// RMSNorm as opset-21 graphs spell it (RMSNormalization is only in opset 23):
//   Mul(x, x) -> ReduceMean(last axis, keepdims) -> Add(eps) -> Sqrt -> Div(x, .) -> Mul(., w)
// Six nodes and five intermediate tensors per norm; decoding runs four norms per layer, so the
// chain becomes one internal RMSNorm node (selector: the match below; action: the rewrite).
// epsilon and the weight must be constants (UseDefIndex::Const): an epsilon a feed can replace
// is read at run time by the unfused chain, never baked into the attribute.
#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsOp(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

}  // namespace

int FuseRMSNorm(Graph& g, UseDefIndex& uses) {
  using Op = internal_ops::RMSNorm;
  // The producer of `v` if it is an `op` node read only by the chain (never a graph output).
  auto inner = [&](const std::string& v, const char* op) -> const Node* {
    const Node* p = uses.Producer(v);
    if (p == nullptr || uses.Readers(v).size() != 1 || uses.IsGraphOutput(v) || !IsOp(*p, op)) return nullptr;
    return p;
  };
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& mul = g.nodes[k];
    if (!IsOp(mul, "Mul") || mul.inputs.size() != 2) continue;
    // Mul(Div(x, Sqrt(Add(ReduceMean(Mul(x, x)), eps))), w), either operand order.
    for (int side = 0; side < 2; ++side) {
      const Node* div = inner(mul.inputs[side], "Div");
      const Tensor* w = uses.Const(mul.inputs[1 - side]);
      if (!div || !w || w->dtype() != DType::kFloat32 || w->rank() != 1 || div->inputs.size() != 2) continue;
      const std::string& x = div->inputs[0];
      const Node* sqrt = inner(div->inputs[1], "Sqrt");
      const Node* add = sqrt ? inner(sqrt->inputs[0], "Add") : nullptr;
      if (!add || add->inputs.size() != 2) continue;
      const Tensor* eps = uses.Const(add->inputs[1]);
      const Node* mean = inner(add->inputs[0], "ReduceMean");
      if (!eps || eps->dtype() != DType::kFloat32 || eps->num_elements() != 1 || !mean) continue;
      std::vector<int64_t> axes = mean->GetInts("axes");
      if (mean->inputs.size() > 1) {
        const Tensor* a = uses.Const(mean->inputs[1]);
        if (!a || a->dtype() != DType::kInt64) continue;
        axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->num_elements());
      }
      if (axes != std::vector<int64_t>{-1} || mean->GetInt("keepdims", 1) != 1) continue;
      const Node* sq = inner(mean->inputs[0], "Mul");
      if (!sq || sq->inputs.size() != 2 || sq->inputs[0] != x || sq->inputs[1] != x) continue;
      // x is read by the square and the division (and maybe others): at least those two.
      Node norm;
      norm.op_type = Op::kName;
      norm.domain = internal_ops::kDomain;
      norm.name = mul.name.empty() ? absl::StrCat("rms_norm_", fused) : mul.name;
      norm.inputs = {x, mul.inputs[1 - side]};
      norm.outputs = {mul.outputs[0]};
      norm.attrs[Op::kEpsilon] = Attribute::Float(Op::kEpsilon, eps->data<float>()[0]);
      for (const Node* n : {div, sqrt, add, mean, sq}) drop[static_cast<size_t>(n - g.nodes.data())] = true;
      mul = std::move(norm);
      ++fused;
      break;
    }
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class RMSNormFusionPass : public GraphPass {
 public:
  const char* name() const override { return "rms_norm_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseRMSNorm(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeRMSNormFusionPass() { return std::make_unique<RMSNormFusionPass>(); }

}  // namespace oneinfer
