// Attention as opset-21 graphs write it, after transpose_matmul_fusion has made q k^T one node:
//   s = FusedMatMul(q, k, transB = 1[, alpha]) -> [Mul(s, scale)] -> [Add(., mask)]
//     -> Softmax(last axis) -> MatMul(., v)
// (our export's layers, torch's eager attention in optimum's files). Run as written, each layer
// of each decoding sequence is five nodes and three score tensors; fused, one internal
// SoftmaxAttention node (ops/fused.cc) with the same arithmetic. float32 only, every
// intermediate read by the chain alone, the scale a scalar constant.
// Grouped-query attention's repeat_kv in front of k and v, Reshape(Expand(Unsqueeze(x, 2))) from
// [B, kv heads, T, D] to [B, kv heads * n, T, D] (transformers' eager attention), copies the
// whole cache twice a layer each decoding step; when both k and v come that way with one n (the
// shapes shape inference found say so), the node reads x itself with kv_repeat = n instead.
#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsFloat32(const Graph& g, const std::string& v, size_t min_rank) {
  const TypeInfo* t = g.FindType(v);
  return t != nullptr && t->kind == TypeInfo::Kind::kTensor && t->elem == DType::kFloat32 && t->shape &&
         t->shape->size() >= min_rank;
}

bool SameDim(const Dim& a, const Dim& b) {
  if (a.is_fixed() || b.is_fixed()) return a.value == b.value;
  return !a.param.empty() && a.param == b.param;
}

const std::vector<Dim>* Dims(const Graph& g, const std::string& v, size_t rank) {
  const TypeInfo* t = g.FindType(v);
  if (t == nullptr || t->kind != TypeInfo::Kind::kTensor || !t->shape || t->shape->size() != rank) return nullptr;
  return &*t->shape;
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
  // repeat_kv: v = Reshape(Expand(Unsqueeze(x, axes = [2]))) read by the chain alone, which the
  // inferred shapes show to be x [B, H, T, D] with each head repeated n >= 2 times in a row
  // ([B, H, n, T, D], then [B, H * n, T, D]). Its three nodes, x and n; or no nodes.
  struct Repeat {
    std::vector<const Node*> nodes;
    std::string x;
    int64_t n = 0;
  };
  auto match_repeat = [&](const std::string& v) -> Repeat {
    const Node* reshape = inner(v);
    if (reshape == nullptr || !IsOnnxOp(*reshape, "Reshape") || reshape->inputs.size() != 2) return {};
    const Node* expand = inner(reshape->inputs[0]);
    if (expand == nullptr || !IsOnnxOp(*expand, "Expand") || expand->inputs.size() != 2) return {};
    const Node* unsqueeze = inner(expand->inputs[0]);
    if (unsqueeze == nullptr || !IsOnnxOp(*unsqueeze, "Unsqueeze") || unsqueeze->inputs.empty()) return {};
    std::vector<int64_t> axes = unsqueeze->GetInts("axes");
    if (unsqueeze->inputs.size() == 2) {
      const Tensor* c = uses.Const(unsqueeze->inputs[1]);
      if (c == nullptr || c->dtype() != DType::kInt64) return {};
      axes.assign(c->data<int64_t>(), c->data<int64_t>() + c->num_elements());
    }
    if (axes != std::vector<int64_t>{2} && axes != std::vector<int64_t>{-3}) return {};
    const std::string& x = unsqueeze->inputs[0];
    const std::vector<Dim>* xs = Dims(g, x, 4);
    const std::vector<Dim>* es = Dims(g, expand->outputs[0], 5);
    const std::vector<Dim>* rs = Dims(g, reshape->outputs[0], 4);
    if (xs == nullptr || es == nullptr || rs == nullptr || !(*xs)[1].is_fixed() || !(*es)[2].is_fixed() ||
        !(*rs)[1].is_fixed()) {
      return {};
    }
    const int64_t n = (*es)[2].value;
    const bool repeats = n >= 2 && SameDim((*es)[0], (*xs)[0]) && SameDim((*es)[1], (*xs)[1]) &&
                         SameDim((*es)[3], (*xs)[2]) && SameDim((*es)[4], (*xs)[3]) && SameDim((*rs)[0], (*xs)[0]) &&
                         (*rs)[1].value == (*xs)[1].value * n && SameDim((*rs)[2], (*xs)[2]) &&
                         SameDim((*rs)[3], (*xs)[3]);
    if (!repeats) return {};
    return {{reshape, expand, unsqueeze}, x, n};
  };
  int fused = 0;
  for (Node& mm : g.nodes) {
    if (!IsOnnxOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const Node* sm = inner(mm.inputs[0]);
    if (sm == nullptr || !IsOnnxOp(*sm, "Softmax") || sm->inputs.size() != 1) continue;
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
      if (n != nullptr && IsOnnxOp(*n, "Mul") && n->inputs.size() == 2) {
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
      if (add == nullptr || !IsOnnxOp(*add, "Add") || add->inputs.size() != 2) continue;
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
    if (const Repeat rk = match_repeat(fm->inputs[1]), rv = match_repeat(mm.inputs[1]);
        !rk.nodes.empty() && rk.n == rv.n && fm->inputs[1] != mm.inputs[1]) {
      att.inputs[Op::kK] = rk.x;
      att.inputs[Op::kV] = rv.x;
      att.attrs[Op::kKVRepeat] = Attribute::Int(Op::kKVRepeat, rk.n);
      chain.insert(chain.end(), rk.nodes.begin(), rk.nodes.end());
      chain.insert(chain.end(), rv.nodes.begin(), rv.nodes.end());
    }
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
