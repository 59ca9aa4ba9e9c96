// Attention as opset-21 graphs write it, after transpose_matmul_fusion has made q k^T one node:
//   s = FusedMatMul(q, k, transB = 1[, alpha]) -> [Mul(s, scale)] -> [Add(., mask)]
//     -> Softmax(last axis) -> MatMul(., v)
// (our export's layers, torch's eager attention in optimum's files). Run as written, each layer
// of each decoding sequence is five nodes and three score tensors; fused, one internal
// SoftmaxAttention node (ops/fused.cc) with the same arithmetic. float32 only, every
// intermediate read by the chain alone, the scale a scalar constant.
#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsOp(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

bool IsFloat32(const Graph& g, const std::string& v, size_t min_rank) {
  const TypeInfo* t = g.FindType(v);
  return t != nullptr && t->kind == TypeInfo::Kind::kTensor && t->elem == DType::kFloat32 && t->shape &&
         t->shape->size() >= min_rank;
}

}  // namespace

int FuseSoftmaxAttention(Graph& g, UseDefIndex& uses) {
  using Op = internal_ops::SoftmaxAttention;
  std::vector<bool> drop(g.nodes.size(), false);
  // The producer of `v` if it is read by the chain alone (never a graph output).
  auto inner = [&](const std::string& v) -> const Node* {
    const Node* p = uses.Producer(v);
    if (p == nullptr || uses.Readers(v).size() != 1 || uses.IsGraphOutput(v)) return nullptr;
    if (drop[static_cast<size_t>(p - g.nodes.data())]) return nullptr;
    return p;
  };
  auto index = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  const int64_t opset = g.OpsetFor("");
  int fused = 0;
  for (Node& mm : g.nodes) {
    if (!IsOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const Node* sm = inner(mm.inputs[0]);
    if (sm == nullptr || !IsOp(*sm, "Softmax") || sm->inputs.size() != 1) continue;
    // The softmax must run along the last axis (before opset 13 an axis of rank - 1 flattens
    // nothing else, so it is the same row softmax).
    const int64_t axis = sm->GetInt("axis", opset < 13 ? 1 : -1);
    const TypeInfo* st = g.FindType(sm->inputs[0]);
    const bool last_axis = axis == -1 || (st != nullptr && st->shape && static_cast<int64_t>(st->shape->size()) == axis + 1);
    if (!last_axis) continue;
    // scores = [Mul(scale)](FusedMatMul(q, k, transB = 1)): the nodes into `found`, or null.
    struct Scores {
      const Node* fm = nullptr;
      const Node* mul = nullptr;
      float scale = 0.0f;
    };
    auto match_scores = [&](const std::string& v) -> Scores {
      Scores r;
      const Node* n = inner(v);
      if (n != nullptr && IsOp(*n, "Mul") && n->inputs.size() == 2) {
        for (size_t side = 0; side < 2 && r.mul == nullptr; ++side) {
          const Tensor* c = uses.Const(n->inputs[1 - side]);
          if (c == nullptr || c->dtype() != DType::kFloat32 || c->num_elements() != 1) continue;
          r.mul = n;
          r.scale = c->data<float>()[0];
          n = inner(n->inputs[side]);
        }
        if (r.mul == nullptr) return {};
      }
      if (n == nullptr || n->op_type != "FusedMatMul" || n->domain != "com.microsoft" || n->inputs.size() != 2 ||
          n->GetInt("transA", 0) != 0 || n->GetInt("transB", 0) != 1 || n->GetInt("transBatchA", 0) != 0 ||
          n->GetInt("transBatchB", 0) != 0) {
        return {};
      }
      r.fm = n;
      return r;
    };
    std::vector<const Node*> chain = {sm};
    std::string mask;
    Scores sc = match_scores(sm->inputs[0]);
    if (sc.fm == nullptr) {
      const Node* add = inner(sm->inputs[0]);
      if (add == nullptr || !IsOp(*add, "Add") || add->inputs.size() != 2) continue;
      for (size_t side = 0; side < 2 && sc.fm == nullptr; ++side) {
        sc = match_scores(add->inputs[side]);
        mask = add->inputs[1 - side];
      }
      // A mask of higher rank than the scores would broadcast them to more rows: not fused.
      if (sc.fm == nullptr || !IsFloat32(g, mask, 0)) continue;
      const TypeInfo* ft = g.FindType(sc.fm->outputs[0]);
      if (ft == nullptr || !ft->shape || g.FindType(mask)->shape->size() > ft->shape->size()) continue;
      chain.push_back(add);
    }
    const Node* fm = sc.fm;
    if (sc.mul != nullptr) chain.push_back(sc.mul);
    // Rank 2 or more everywhere: MatMul promotes a rank-1 operand, which the fused kernel does not.
    if (!IsFloat32(g, fm->inputs[0], 2) || !IsFloat32(g, fm->inputs[1], 2) || !IsFloat32(g, mm.inputs[1], 2) ||
        !IsFloat32(g, mm.outputs[0], 2)) {
      continue;
    }
    chain.push_back(fm);
    Node att;
    att.op_type = Op::kName;
    att.domain = internal_ops::kDomain;
    att.name = mm.name.empty() ? absl::StrCat("softmax_attention_", fused) : mm.name;
    att.inputs = {fm->inputs[0], fm->inputs[1], mm.inputs[1]};
    if (!mask.empty()) att.inputs.push_back(mask);
    att.outputs = mm.outputs;
    if (fm->HasAttr("alpha")) att.attrs[Op::kAlpha] = Attribute::Float(Op::kAlpha, fm->GetFloat("alpha", 1.0f));
    if (sc.mul != nullptr) att.attrs[Op::kScale] = Attribute::Float(Op::kScale, sc.scale);
    for (const Node* n : chain) drop[index(n)] = true;
    mm = std::move(att);
    ++fused;
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class SoftmaxAttentionFusionPass : public GraphPass {
 public:
  const char* name() const override { return "attention_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseSoftmaxAttention(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeSoftmaxAttentionFusionPass() { return std::make_unique<SoftmaxAttentionFusionPass>(); }

}  // namespace oneinfer
