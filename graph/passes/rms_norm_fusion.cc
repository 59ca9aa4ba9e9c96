// RMSNorm as opset-21 graphs spell it (RMSNormalization is only in opset 23):
//   Mul(x, x) -> ReduceMean(last axis, keepdims) -> Add(eps) -> Sqrt -> Div(x, .) -> Mul(., w)
// Six nodes and five intermediate tensors per norm; decoding runs four norms per layer, so the
// chain becomes one internal RMSNorm node (selector: the match below; action: the rewrite).
#include <map>

#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

const Tensor* Const(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  return it == g.initializers.end() ? nullptr : &it->second;
}

bool IsOp(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

}  // namespace

int FuseRMSNorm(Graph& g) {
  std::map<std::string, size_t> producer;
  std::map<std::string, int> readers;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const std::string& o : g.nodes[k].outputs) if (!o.empty()) producer[o] = k;
    for (const std::string& i : g.nodes[k].inputs) if (!i.empty()) readers[i]++;
    for (const std::string& i : g.nodes[k].implicit_inputs) readers[i]++;
  }
  for (const ValueInfo& o : g.outputs) readers[o.name] += 2;  // graph outputs are never inner values
  // The producer of `v` if it is an `op` node read only by the chain.
  auto inner = [&](const std::string& v, const char* op) -> const Node* {
    auto it = producer.find(v);
    if (it == producer.end() || readers[v] != 1 || !IsOp(g.nodes[it->second], op)) return nullptr;
    return &g.nodes[it->second];
  };
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& mul = g.nodes[k];
    if (!IsOp(mul, "Mul") || mul.inputs.size() != 2) continue;
    // Mul(Div(x, Sqrt(Add(ReduceMean(Mul(x, x)), eps))), w), either operand order.
    for (int side = 0; side < 2; ++side) {
      const Node* div = inner(mul.inputs[side], "Div");
      const Tensor* w = Const(g, mul.inputs[1 - side]);
      if (!div || !w || w->dtype() != DType::kFloat32 || w->rank() != 1 || div->inputs.size() != 2) continue;
      const std::string& x = div->inputs[0];
      const Node* sqrt = inner(div->inputs[1], "Sqrt");
      const Node* add = sqrt ? inner(sqrt->inputs[0], "Add") : nullptr;
      if (!add || add->inputs.size() != 2) continue;
      const Tensor* eps = Const(g, add->inputs[1]);
      const Node* mean = inner(add->inputs[0], "ReduceMean");
      if (!eps || eps->dtype() != DType::kFloat32 || eps->num_elements() != 1 || !mean) continue;
      std::vector<int64_t> axes = mean->GetInts("axes");
      if (mean->inputs.size() > 1) {
        const Tensor* a = Const(g, mean->inputs[1]);
        if (!a || a->dtype() != DType::kInt64) continue;
        axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->num_elements());
      }
      if (axes != std::vector<int64_t>{-1} || mean->GetInt("keepdims", 1) != 1) continue;
      const Node* sq = inner(mean->inputs[0], "Mul");
      if (!sq || sq->inputs.size() != 2 || sq->inputs[0] != x || sq->inputs[1] != x) continue;
      // x is read by the square and the division (and maybe others): at least those two.
      Node norm;
      norm.op_type = "RMSNorm";
      norm.domain = "oneinfer.internal";
      norm.name = mul.name.empty() ? absl::StrCat("rms_norm_", fused) : mul.name;
      norm.inputs = {x, mul.inputs[1 - side]};
      norm.outputs = {mul.outputs[0]};
      Attribute a;
      a.name = "epsilon";
      a.type = Attribute::Type::kFloat;
      a.f = eps->data<float>()[0];
      norm.attrs["epsilon"] = a;
      for (const Node* n : {div, sqrt, add, mean, sq}) drop[static_cast<size_t>(n - g.nodes.data())] = true;
      mul = std::move(norm);
      ++fused;
      break;
    }
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop);
  return fused;
}

}  // namespace oneinfer
