// Conv with what follows it folded in, one internal FusedConv node per chain:
//   Conv(x, W, B?) [-> BatchNormalization | Mul(c) | Add(c)]*        folded into W and B
//                  [-> Relu | Clip | LeakyRelu | HardSigmoid | Sigmoid | HardSwish
//                      | x * Clip(x + 3, 0, 6) / 6 | x * HardSigmoid(x, 1/6, 0.5)]   the epilogue
//                  [-> Mul(s) | Add(t) | Sub(t) | Div(s)]*           an affine after it (scalars)
// c is a constant broadcast per output channel (a scalar, [M, 1, 1], [1, M, 1, 1]); the weights
// and folded parameters must be float32 constants (UseDefIndex::Const), and every value inside a
// chain must be read by the chain alone (never a graph output). Folding is done in double and
// rounded once, so W' and B' are within one float rounding of the unfused products; the fused
// node's outputs match the unfused graph's within float tolerance (tests/conv_fusion_test.cc).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

using Op = internal_ops::FusedConv;

// The one value of a float32 constant whose dims are all 1 (rank <= max_rank).
bool ScalarConst(const Tensor* t, int64_t max_rank, double* v) {
  if (t == nullptr || t->dtype() != DType::kFloat32 || t->num_elements() != 1 || t->rank() > max_rank) return false;
  *v = t->data<float>()[0];
  return true;
}

// A float32 constant broadcast along the channel axis of a rank-`rank` NC... tensor with M
// channels, as M values; false if it broadcasts any other way (or would change the shape).
bool ChannelConst(const Tensor* t, int64_t M, int64_t rank, std::vector<double>* v) {
  if (t == nullptr || t->dtype() != DType::kFloat32 || t->rank() > rank) return false;
  const int64_t lead = rank - t->rank();  // t's dim j is the output's dim j + lead
  for (int64_t j = 0; j < t->rank(); ++j) {
    const int64_t d = t->dim(j);
    if (d != 1 && !(j + lead == 1 && d == M)) return false;
  }
  const int64_t n = t->num_elements();
  v->resize(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) (*v)[static_cast<size_t>(m)] = t->data<float>()[n == 1 ? 0 : m];
  return true;
}

// The other operand of a binary node reading `cur`, when `cur` may stand on that side.
const std::string* OtherOperand(const Node& n, const std::string& cur, bool commutative) {
  if (n.inputs.size() != 2) return nullptr;
  if (n.inputs[0] == cur) return &n.inputs[1];
  if (commutative && n.inputs[1] == cur) return &n.inputs[0];
  return nullptr;
}

struct Chain {
  std::vector<double> w_scale, b_scale, b_shift;  // W'[m] = W[m] * w_scale[m]; B' = B * b_scale + b_shift
  std::string act;                                // "" = none
  std::vector<float> act_params;
  double post_scale = 1, post_shift = 0;
  std::vector<size_t> nodes;  // fused away (the Conv's readers along the chain)
  std::string out;            // the chain's last value: the fused node's output
};

class ChainMatcher {
 public:
  ChainMatcher(const Graph& g, const UseDefIndex& uses, const std::vector<bool>& drop) : g_(g), uses_(uses), drop_(drop) {}

  // The single node reading `v` (not a graph output, not dropped), or null.
  const Node* SoleReader(const std::string& v) const {
    if (uses_.IsGraphOutput(v)) return nullptr;
    const auto& r = uses_.Readers(v);
    if (r.size() != 1 || r[0].slot == UseDefIndex::kImplicit || drop_[r[0].node]) return nullptr;
    return &g_.nodes[r[0].node];
  }
  size_t Index(const Node* n) const { return static_cast<size_t>(n - g_.nodes.data()); }

  // BatchNormalization (inference form) -> per-channel scale and shift.
  bool BatchNorm(const Node& bn, int64_t M, std::vector<double>* s, std::vector<double>* t) const {
    if (bn.inputs.size() != 5 || bn.NumInputs() != 5 || bn.GetInt("training_mode", 0) != 0 || bn.GetInt("spatial", 1) != 1) return false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) if (!bn.outputs[k].empty()) return false;
    const Tensor* p[4];
    for (size_t k = 0; k < 4; ++k) {
      p[k] = uses_.Const(bn.inputs[k + 1]);
      if (!p[k] || p[k]->dtype() != DType::kFloat32 || p[k]->rank() != 1 || p[k]->dim(0) != M) return false;
    }
    const double eps = bn.GetFloat("epsilon", 1e-5f);
    s->resize(static_cast<size_t>(M));
    t->resize(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      const double scale = p[0]->data<float>()[m], bias = p[1]->data<float>()[m];
      const double mean = p[2]->data<float>()[m], var = p[3]->data<float>()[m];
      (*s)[m] = scale / std::sqrt(var + eps);
      (*t)[m] = bias - mean * (*s)[m];
    }
    return true;
  }

  // An activation node reading `cur` -> its name and parameters.
  bool Activation(const Node& n, Chain* c) const {
    if (IsOnnxOp(n, "Relu") || IsOnnxOp(n, "Sigmoid") || IsOnnxOp(n, "HardSwish")) {
      c->act = n.op_type;
      return true;
    }
    if (IsOnnxOp(n, "LeakyRelu")) {
      c->act = n.op_type;
      c->act_params = {n.GetFloat("alpha", 0.01f)};
      return true;
    }
    if (IsOnnxOp(n, "HardSigmoid")) {
      c->act = n.op_type;
      c->act_params = {n.GetFloat("alpha", 0.2f), n.GetFloat("beta", 0.5f)};
      return true;
    }
    if (IsOnnxOp(n, "Clip")) {
      float lo = n.GetFloat("min", -INFINITY), hi = n.GetFloat("max", INFINITY);
      double v;
      for (size_t k = 1; k < n.inputs.size(); ++k) {
        if (n.inputs[k].empty()) continue;
        if (!ScalarConst(uses_.Const(n.inputs[k]), 1, &v)) return false;
        (k == 1 ? lo : hi) = static_cast<float>(v);
      }
      c->act = n.op_type;
      c->act_params = {lo, hi};
      return true;
    }
    return false;
  }

  // x * Clip(x + 3, 0, 6) / 6 or x * HardSigmoid(x, 1/6, 0.5) over x = `cur` (its two readers):
  // true with the nodes and the last value.
  bool DecomposedHardSwish(const std::string& cur, int64_t rank, Chain* c) const {
    if (uses_.IsGraphOutput(cur)) return false;
    const auto& r = uses_.Readers(cur);
    if (r.size() != 2) return false;
    for (int first = 0; first < 2; ++first) {
      const Node& gate = g_.nodes[r[first].node];
      const Node& mul = g_.nodes[r[1 - first].node];
      if (drop_[r[0].node] || drop_[r[1].node] || !IsOnnxOp(mul, "Mul")) continue;
      const std::string* gated = OtherOperand(mul, cur, true);
      if (!gated) continue;
      double v;
      std::vector<size_t> nodes;
      if (IsOnnxOp(gate, "HardSigmoid") && gate.inputs.size() == 1) {
        if (std::fabs(gate.GetFloat("alpha", 0.2f) - 1.0 / 6) > 1e-6 || gate.GetFloat("beta", 0.5f) != 0.5f) continue;
        if (*gated != gate.outputs[0] || SoleReader(gate.outputs[0]) != &mul) continue;
        nodes = {Index(&gate), Index(&mul)};
        c->out = mul.outputs[0];
      } else if (IsOnnxOp(gate, "Add")) {
        const std::string* three = OtherOperand(gate, cur, true);
        if (!three || !ScalarConst(uses_.Const(*three), rank, &v) || v != 3) continue;
        const Node* clip = SoleReader(gate.outputs[0]);
        Chain clip_act;
        if (!clip || !IsOnnxOp(*clip, "Clip") || clip->inputs[0] != gate.outputs[0] || !Activation(*clip, &clip_act) ||
            clip_act.act_params != std::vector<float>{0.f, 6.f})
          continue;
        if (*gated != clip->outputs[0] || SoleReader(clip->outputs[0]) != &mul) continue;
        const Node* div = SoleReader(mul.outputs[0]);
        const std::string* six = div ? OtherOperand(*div, mul.outputs[0], false) : nullptr;
        if (!six || !IsOnnxOp(*div, "Div") || !ScalarConst(uses_.Const(*six), rank, &v) || v != 6) continue;
        nodes = {Index(&gate), Index(clip), Index(&mul), Index(div)};
        c->out = div->outputs[0];
      } else {
        continue;
      }
      c->act = "HardSwish";
      c->nodes.insert(c->nodes.end(), nodes.begin(), nodes.end());
      return true;
    }
    return false;
  }

  // The chain after `conv` (M output channels, W of rank `rank`).
  Chain Match(const Node& conv, int64_t M, int64_t rank) const {
    Chain c;
    c.w_scale.assign(static_cast<size_t>(M), 1.0);
    c.b_scale.assign(static_cast<size_t>(M), 1.0);
    c.b_shift.assign(static_cast<size_t>(M), 0.0);
    c.out = conv.outputs[0];
    std::vector<double> s, t;
    // Affine steps before the activation fold into W and B.
    for (const Node* r = SoleReader(c.out); r != nullptr; r = SoleReader(c.out)) {
      const std::string* other;
      if (IsOnnxOp(*r, "BatchNormalization") && r->inputs[0] == c.out && BatchNorm(*r, M, &s, &t)) {
        for (int64_t m = 0; m < M; ++m) {
          c.w_scale[m] *= s[m];
          c.b_scale[m] *= s[m];
          c.b_shift[m] = c.b_shift[m] * s[m] + t[m];
        }
      } else if (IsOnnxOp(*r, "Mul") && (other = OtherOperand(*r, c.out, true)) && ChannelConst(uses_.Const(*other), M, rank, &s)) {
        for (int64_t m = 0; m < M; ++m) {
          c.w_scale[m] *= s[m];
          c.b_scale[m] *= s[m];
          c.b_shift[m] *= s[m];
        }
      } else if (IsOnnxOp(*r, "Add") && (other = OtherOperand(*r, c.out, true)) && ChannelConst(uses_.Const(*other), M, rank, &t)) {
        for (int64_t m = 0; m < M; ++m) c.b_shift[m] += t[m];
      } else {
        break;
      }
      c.nodes.push_back(Index(r));
      c.out = r->outputs[0];
    }
    // The activation.
    const Node* r = SoleReader(c.out);
    if (r != nullptr && r->inputs[0] == c.out && Activation(*r, &c)) {
      c.nodes.push_back(Index(r));
      c.out = r->outputs[0];
    } else if (!DecomposedHardSwish(c.out, rank, &c)) {
      return c;
    }
    // Scalar affine steps after it.
    double v;
    for (r = SoleReader(c.out); r != nullptr; r = SoleReader(c.out)) {
      const bool commutative = IsOnnxOp(*r, "Mul") || IsOnnxOp(*r, "Add");
      const std::string* other = OtherOperand(*r, c.out, commutative);
      if (!other || !ScalarConst(uses_.Const(*other), rank, &v)) break;
      if (IsOnnxOp(*r, "Mul")) {
        c.post_scale *= v, c.post_shift *= v;
      } else if (IsOnnxOp(*r, "Div") && v != 0) {
        c.post_scale /= v, c.post_shift /= v;
      } else if (IsOnnxOp(*r, "Add")) {
        c.post_shift += v;
      } else if (IsOnnxOp(*r, "Sub")) {
        c.post_shift -= v;
      } else {
        break;
      }
      c.nodes.push_back(Index(r));
      c.out = r->outputs[0];
    }
    return c;
  }

 private:
  const Graph& g_;
  const UseDefIndex& uses_;
  const std::vector<bool>& drop_;
};

}  // namespace

int FuseConvChains(Graph& g, UseDefIndex& uses) {
  std::vector<bool> drop(g.nodes.size(), false);
  ChainMatcher matcher(g, uses, drop);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& conv = g.nodes[k];
    if (drop[k] || !IsOnnxOp(conv, "Conv") || conv.NumInputs() < 2 || conv.outputs.size() != 1) continue;
    const Tensor* w = uses.Const(conv.inputs[1]);
    const Tensor* b = conv.HasInput(2) ? uses.Const(conv.inputs[2]) : nullptr;
    if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || (conv.HasInput(2) && (!b || b->dtype() != DType::kFloat32))) continue;
    const int64_t M = w->dim(0);
    if (b && (b->rank() != 1 || b->dim(0) != M)) continue;
    Chain c = matcher.Match(conv, M, w->rank());
    if (c.nodes.empty()) continue;
    // New weights and bias, rounded once from double.
    const int64_t per = w->num_elements() / std::max<int64_t>(M, 1);
    Tensor w2 = Tensor::Empty(DType::kFloat32, w->shape()), b2 = Tensor::Empty(DType::kFloat32, {M});
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t i = 0; i < per; ++i)
        w2.data<float>()[m * per + i] = static_cast<float>(w->data<float>()[m * per + i] * c.w_scale[m]);
      const double bias = b ? b->data<float>()[m] : 0.0;
      b2.data<float>()[m] = static_cast<float>(bias * c.b_scale[m] + c.b_shift[m]);
    }
    Node f;
    f.op_type = Op::kName;
    f.domain = internal_ops::kDomain;
    f.name = conv.name.empty() ? absl::StrCat("fused_conv_", fused) : conv.name;
    const std::string base = absl::StrCat(f.name, "/fused_conv_", fused);
    g.initializers[base + "/W"] = w2;
    g.initializers[base + "/B"] = b2;
    f.inputs = {conv.inputs[0], base + "/W", base + "/B"};
    f.outputs = {c.out};
    for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) {
      auto it = conv.attrs.find(a);
      if (it != conv.attrs.end()) f.attrs[a] = it->second;
    }
    Attribute act = Attribute::String(Op::kActivation, c.act);
    f.attrs[Op::kActivation] = act;
    std::vector<float> params = c.act_params;
    if (c.post_scale != 1 || c.post_shift != 0) {
      Attribute post;
      post.name = Op::kOutputAffine;
      post.type = Attribute::Type::kFloats;
      post.floats = {static_cast<float>(c.post_scale), static_cast<float>(c.post_shift)};
      f.attrs[Op::kOutputAffine] = post;
    }
    Attribute p;
    p.name = Op::kActivationParams;
    p.type = Attribute::Type::kFloats;
    p.floats = params;
    f.attrs[Op::kActivationParams] = p;
    for (size_t n : c.nodes) drop[n] = true;
    g.nodes[k] = std::move(f);
    ++fused;
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class ConvFusionPass : public GraphPass {
 public:
  const char* name() const override { return "conv_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseConvChains(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeConvFusionPass() { return std::make_unique<ConvFusionPass>(); }

}  // namespace oneinfer
