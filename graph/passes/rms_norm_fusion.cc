// RMSNorm as opset-21 graphs spell it (RMSNormalization is only in opset 23), with the square
// Mul(x, x) or Pow(x, 2) and the normalisation either a division or torch's rsqrt export:
//   ReduceMean(last axis, keepdims)(square) -> Add(eps) -> Sqrt = den
//   Div(x, den)  |  Mul(x, Div(1, den))  |  Mul(x, Reciprocal(den))   -> Mul(., w)
// and the float16 form torch writes for a float16 model: x = Cast(x16, float32), the norm, then
// Cast(float16) -> Mul(., w16). Up to nine nodes and eight intermediate tensors per norm, four
// norms per layer: the chain becomes one internal RMSNorm node computing the same arithmetic
// (selector: the match below; action: the rewrite). epsilon and the weight must be constants
// (UseDefIndex::Const): an epsilon a feed can replace is read at run time by the unfused chain,
// never baked into the attribute. Runs after shape inference: the float16 form needs x16's type.
#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsScalar(const Tensor* t, float v) {
  return t != nullptr && t->dtype() == DType::kFloat32 && t->num_elements() == 1 && t->data<float>()[0] == v;
}

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;  // TensorProto::DataType

}  // namespace

int FuseRMSNorm(Graph& g, UseDefIndex& uses) {
  using Op = internal_ops::RMSNorm;
  auto index = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  // den = Sqrt(Add(ReduceMean(square of x), eps)): the chain's nodes into `chain`, eps, or null.
  auto match_den = [&](const std::string& den, const std::string& x, std::vector<const Node*>& chain) -> const Tensor* {
    const Node* sqrt = uses.SoleUseProducer(den, "Sqrt");
    const Node* add = sqrt ? uses.SoleUseProducer(sqrt->inputs[0], "Add") : nullptr;
    if (!add || add->inputs.size() != 2) return nullptr;
    const Tensor* eps = uses.Const(add->inputs[1]);
    const Node* mean = uses.SoleUseProducer(add->inputs[0], "ReduceMean");
    if (!eps || eps->dtype() != DType::kFloat32 || eps->num_elements() != 1 || !mean) return nullptr;
    std::vector<int64_t> axes = mean->GetInts("axes");
    if (mean->inputs.size() > 1) {
      const Tensor* a = uses.Const(mean->inputs[1]);
      if (!a || a->dtype() != DType::kInt64) return nullptr;
      axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->num_elements());
    }
    if (axes != std::vector<int64_t>{-1} || mean->GetInt("keepdims", 1) != 1) return nullptr;
    const Node* sq = uses.SoleUseProducer(mean->inputs[0], "Mul");
    if (sq && (sq->inputs.size() != 2 || sq->inputs[0] != x || sq->inputs[1] != x)) return nullptr;
    if (!sq) {  // Pow(x, 2): the Pow kernel squares with one multiplication, as Mul(x, x) does
      sq = uses.SoleUseProducer(mean->inputs[0], "Pow");
      if (!sq || sq->inputs.size() != 2 || sq->inputs[0] != x || !IsScalar(uses.Const(sq->inputs[1]), 2.0f)) return nullptr;
    }
    chain.insert(chain.end(), {sqrt, add, mean, sq});
    return eps;
  };
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& mul = g.nodes[k];
    if (!IsOnnxOp(mul, "Mul") || mul.inputs.size() != 2) continue;
    // Mul(norm, w), either operand order; norm behind a Cast to float16 when w is float16.
    for (int side = 0; side < 2; ++side) {
      const Tensor* w = uses.Const(mul.inputs[1 - side]);
      if (!w || w->rank() != 1 || (w->dtype() != DType::kFloat32 && w->dtype() != DType::kFloat16)) continue;
      const bool half = w->dtype() == DType::kFloat16;
      std::vector<const Node*> chain;
      std::string norm_out = mul.inputs[side];
      if (half) {
        const Node* narrow = uses.SoleUseProducer(norm_out, "Cast");
        if (!narrow || narrow->GetInt("to", 0) != kOnnxFloat16) continue;
        chain.push_back(narrow);
        norm_out = narrow->inputs[0];
      }
      // Div(x, den), or Mul(x, inv) with inv = Div(1, den) | Reciprocal(den), either order.
      const Node* scale = uses.SoleUseProducer(norm_out, "Div");
      std::string x, den;
      bool reciprocal = false;
      if (scale && scale->inputs.size() == 2) {
        x = scale->inputs[0];
        den = scale->inputs[1];
      } else if ((scale = uses.SoleUseProducer(norm_out, "Mul")) != nullptr && scale->inputs.size() == 2) {
        reciprocal = true;
        for (int s = 0; s < 2 && den.empty(); ++s) {
          const Node* inv = uses.SoleUseProducer(scale->inputs[s], "Div");
          if (inv && inv->inputs.size() == 2 && IsScalar(uses.Const(inv->inputs[0]), 1.0f)) {
            den = inv->inputs[1];
          } else if ((inv = uses.SoleUseProducer(scale->inputs[s], "Reciprocal")) != nullptr) {
            den = inv->inputs[0];
          } else {
            continue;
          }
          chain.push_back(inv);
          x = scale->inputs[1 - s];
        }
      }
      if (!scale || den.empty()) continue;
      chain.push_back(scale);
      const Tensor* eps = match_den(den, x, chain);
      if (!eps) continue;
      std::string input = x;
      if (half) {
        // x = Cast(x16 -> float32), read by the square and the scaling alone.
        const Node* widen = uses.Producer(x);
        const TypeInfo* t = widen ? g.FindType(widen->inputs[0]) : nullptr;
        const size_t square = index(chain.back()), scaling = index(scale);
        bool chain_only = !uses.IsGraphOutput(x);
        for (const UseDefIndex::Use& u : uses.Readers(x)) chain_only &= u.node == square || u.node == scaling;
        if (!widen || !IsOnnxOp(*widen, "Cast") || widen->GetInt("to", 0) != kOnnxFloat || !chain_only || t == nullptr ||
            t->kind != TypeInfo::Kind::kTensor || t->elem != DType::kFloat16) {
          continue;
        }
        chain.push_back(widen);
        input = widen->inputs[0];
      }
      // x is read by the square and the scaling (and maybe others): at least those two.
      Node norm;
      norm.op_type = Op::kName;
      norm.domain = internal_ops::kDomain;
      norm.name = mul.name.empty() ? absl::StrCat("rms_norm_", fused) : mul.name;
      norm.inputs = {input, mul.inputs[1 - side]};
      norm.outputs = {mul.outputs[0]};
      norm.attrs[Op::kEpsilon] = Attribute::Float(Op::kEpsilon, eps->data<float>()[0]);
      if (reciprocal) norm.attrs[Op::kReciprocal] = Attribute::Int(Op::kReciprocal, 1);
      for (const Node* n : chain) drop[index(n)] = true;
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
