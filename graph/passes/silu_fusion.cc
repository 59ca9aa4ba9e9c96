// SiLU (torch's x * sigmoid(x), "Swish") as exporters write it, and the gated MLP's product
// that usually follows it:
//   s = Sigmoid(x)   a = Mul(x, s)            (either operand order)
//   [y = Mul(a, m)]                           (either order; m of x's shape: silu(gate) * up)
// Two or three nodes, one or two intermediate tensors of the MLP's width, and for a batched
// decode step a per-sequence Sigmoid whose rows are copied back together for the Mul: the chain
// becomes one internal SiLU node with the same arithmetic. float32 only, every intermediate read
// by the chain alone; m only when shape inference shows it has x's shape (the unfused Mul would
// broadcast anything else).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsFloat32(const TypeInfo* t) { return t != nullptr && t->kind == TypeInfo::Kind::kTensor && t->elem == DType::kFloat32; }

// Both shapes known and the same, dimension by dimension (equal sizes or the same symbol).
bool SameShape(const TypeInfo* a, const TypeInfo* b) {
  if (!IsFloat32(a) || !IsFloat32(b) || !a->shape || !b->shape || a->shape->size() != b->shape->size()) return false;
  for (size_t d = 0; d < a->shape->size(); ++d) {
    const Dim& x = (*a->shape)[d];
    const Dim& y = (*b->shape)[d];
    if (x.is_fixed() != y.is_fixed()) return false;
    if (x.is_fixed() ? x.value != y.value : (x.param.empty() || x.param != y.param)) return false;
  }
  return true;
}

}  // namespace

int FuseSiLU(Graph& g, UseDefIndex& uses) {
  using Op = internal_ops::SiLU;
  std::vector<bool> drop(g.nodes.size(), false);
  auto index = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  // The producer of `v` if the chain alone reads it (use_def.h) and no match has taken it yet.
  auto inner = [&](const std::string& v, const char* op) -> const Node* {
    const Node* p = uses.SoleUseProducer(v, op);
    return p != nullptr && !drop[index(p)] ? p : nullptr;
  };
  // Mul(x, Sigmoid(x)) in either order: the Sigmoid node, x in *x; null if `mul` is not one.
  auto silu_of = [&](const Node& mul, std::string* x) -> const Node* {
    if (!IsOnnxOp(mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1 || drop[index(&mul)]) return nullptr;
    for (size_t side = 0; side < 2; ++side) {
      const Node* sig = inner(mul.inputs[side], "Sigmoid");
      if (sig == nullptr || sig->inputs.size() != 1 || sig->inputs[0] != mul.inputs[1 - side]) continue;
      if (!IsFloat32(g.FindType(sig->inputs[0]))) continue;
      *x = sig->inputs[0];
      return sig;
    }
    return nullptr;
  };
  auto rewrite = [&](Node& at, const std::string& x, const std::string& m, int fused) {
    Node silu;
    silu.op_type = Op::kName;
    silu.domain = internal_ops::kDomain;
    silu.name = at.name.empty() ? absl::StrCat("silu_", fused) : at.name;
    silu.inputs = {x};
    if (!m.empty()) silu.inputs.push_back(m);
    silu.outputs = at.outputs;
    at = std::move(silu);
  };
  int fused = 0;
  // The gated form first (its inner Mul would otherwise be taken alone), then SiLU alone.
  for (Node& mul : g.nodes) {
    if (!IsOnnxOp(mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    for (size_t side = 0; side < 2; ++side) {
      const Node* act = inner(mul.inputs[side], "Mul");
      std::string x;
      const Node* sig = act != nullptr ? silu_of(*act, &x) : nullptr;
      const std::string m = mul.inputs[1 - side];
      if (sig == nullptr || !SameShape(g.FindType(x), g.FindType(m))) continue;
      drop[index(act)] = drop[index(sig)] = true;
      rewrite(mul, x, m, fused++);
      break;
    }
  }
  for (Node& mul : g.nodes) {
    std::string x;
    const Node* sig = silu_of(mul, &x);
    if (sig == nullptr) continue;
    drop[index(sig)] = true;
    rewrite(mul, x, "", fused++);
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class SiLUFusionPass : public GraphPass {
 public:
  const char* name() const override { return "silu_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override { return FuseSiLU(g, uses); }
};

}  // namespace

std::unique_ptr<GraphPass> MakeSiLUFusionPass() { return std::make_unique<SiLUFusionPass>(); }

}  // namespace oneinfer
