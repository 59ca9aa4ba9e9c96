// Rotary position embedding as Hugging Face's rotate_half writes it (our export, torch's eager
// export in optimum's files):
//   lo = Slice(t, 0, D/2, last axis)   hi = Slice(t, D/2, D, last axis)
//   y = Add(Mul(t, cos), Mul(Concat(Neg(hi), lo, last axis), sin))
// Six nodes and five intermediate tensors per use, two uses per layer (q and k): the chain becomes
// one internal RotateHalf node with the same arithmetic (each product rounded, then the sum).
// float32 only, D even and known, every intermediate read by the chain alone.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

int FuseRotateHalf(Graph& g, UseDefIndex& uses) {
  std::vector<bool> drop(g.nodes.size(), false);
  auto index = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };
  // The producer of `v` if the chain alone reads it (use_def.h) and no match has taken it yet.
  auto inner = [&](const std::string& v, const char* op) -> const Node* {
    const Node* p = uses.SoleUseProducer(v, op);
    return p != nullptr && !drop[index(p)] ? p : nullptr;
  };
  // The rotate_half chain under t * cos (tc) and rot * sin (rs): the nodes and t, cos, sin.
  struct Match {
    std::string t, cos, sin;
    std::vector<const Node*> nodes;  // concat, neg, lo, hi
  };
  auto match = [&](const Node* tc, const Node* rs) -> std::optional<Match> {
    for (size_t side = 0; side < 2; ++side) {
      const Node* concat = inner(rs->inputs[side], "Concat");
      if (concat == nullptr || concat->inputs.size() != 2) continue;
      const Node* neg = inner(concat->inputs[0], "Neg");
      const Node* lo = inner(concat->inputs[1], "Slice");
      const Node* hi = neg != nullptr ? inner(neg->inputs[0], "Slice") : nullptr;
      if (lo == nullptr || hi == nullptr || lo->inputs.empty() || hi->inputs.empty() || lo->inputs[0] != hi->inputs[0]) continue;
      const std::string& t = lo->inputs[0];
      // t * cos, in either order.
      const size_t t_side = tc->inputs[0] == t ? 0 : tc->inputs[1] == t ? 1 : 2;
      if (t_side == 2) continue;
      const TypeInfo* tt = g.FindType(t);
      if (tt == nullptr || tt->kind != TypeInfo::Kind::kTensor || tt->elem != DType::kFloat32 || !tt->shape ||
          tt->shape->empty() || !tt->shape->back().is_fixed()) {
        continue;
      }
      const int64_t rank = static_cast<int64_t>(tt->shape->size()), D = tt->shape->back().value;
      if (D <= 0 || D % 2 != 0) continue;
      const int64_t half = D / 2;
      // Slice(t, starts, ends, axes[, steps = 1]) along the last axis.
      auto slice_of = [&](const Node* s, int64_t* begin, int64_t* end) {
        if (s->inputs.size() < 4 || s->inputs.size() > 5) return false;
        int64_t axis = 0, step = 1;
        if (!uses.ConstInt(s->inputs[1], begin) || !uses.ConstInt(s->inputs[2], end) ||
            !uses.ConstInt(s->inputs[3], &axis) || (s->inputs.size() == 5 && !uses.ConstInt(s->inputs[4], &step))) {
          return false;
        }
        if (axis < 0) axis += rank;
        if (*end > D) *end = D;  // INT64_MAX and other past-the-end bounds mean D
        return axis == rank - 1 && step == 1;
      };
      int64_t lo_b = 0, lo_e = 0, hi_b = 0, hi_e = 0;
      if (!slice_of(lo, &lo_b, &lo_e) || !slice_of(hi, &hi_b, &hi_e) || lo_b != 0 || lo_e != half || hi_b != half || hi_e != D) continue;
      int64_t cat_axis = concat->GetInt("axis", 0);
      if (cat_axis < 0) cat_axis += rank;
      if (cat_axis != rank - 1) continue;
      Match m{t, tc->inputs[1 - t_side], rs->inputs[1 - side], {concat, neg, lo, hi}};
      // cos and sin: float32 of no higher rank than t (they broadcast to it, never beyond).
      bool ok = true;
      for (const std::string& c : {m.cos, m.sin}) {
        const TypeInfo* ct = g.FindType(c);
        ok = ok && ct != nullptr && ct->kind == TypeInfo::Kind::kTensor && ct->elem == DType::kFloat32 && ct->shape &&
             static_cast<int64_t>(ct->shape->size()) <= rank;
      }
      if (ok) return m;
    }
    return std::nullopt;
  };
  int fused = 0;
  for (Node& add : g.nodes) {
    if (!IsOnnxOp(add, "Add") || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const Node* m0 = inner(add.inputs[0], "Mul");
    const Node* m1 = inner(add.inputs[1], "Mul");
    if (m0 == nullptr || m1 == nullptr || m0->inputs.size() != 2 || m1->inputs.size() != 2) continue;
    // One product is rot * sin, the other t * cos, in either order.
    std::optional<Match> m = match(m0, m1);
    if (!m) m = match(m1, m0);
    if (!m) continue;
    Node rot;
    rot.op_type = internal_ops::RotateHalf::kName;
    rot.domain = internal_ops::kDomain;
    rot.name = add.name.empty() ? absl::StrCat("rotate_half_", fused) : add.name;
    rot.inputs = {m->t, m->cos, m->sin};
    rot.outputs = add.outputs;
    for (const Node* n : {m0, m1}) drop[index(n)] = true;
    for (const Node* n : m->nodes) drop[index(n)] = true;
    add = std::move(rot);
    ++fused;
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class RotaryFusionPass : public GraphPass {
 public:
  const char* name() const override { return "rotary_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseRotateHalf(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeRotaryFusionPass() { return std::make_unique<RotaryFusionPass>(); }

}  // namespace oneinfer
