// The session's graph passes, in order: the one list (passes.h says what each does).
#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

const std::vector<std::unique_ptr<GraphPass>>& SessionPasses() {
  static const std::vector<std::unique_ptr<GraphPass>>* passes = [] {
    auto* p = new std::vector<std::unique_ptr<GraphPass>>();
    // Weights from outside the graph first: the fusions then see MatMulQ4NX, not a MatMul.
    p->push_back(MakeExternalWeightBindingPass());
    p->push_back(MakeTopologicalSortPass());
    // QDQ before the weight-only fusion: a DequantizeLinear pair on both operands is a QDQ group.
    p->push_back(MakeQdqFusionPass());
    p->push_back(MakeWeightDequantFusionPass());
    p->push_back(MakeKVCacheFusionPass());
    p->push_back(MakeDeadNodeEliminationPass());
    p->push_back(MakeConstantFoldingPass());
    // After folding: weights computed from constants are initializers by then.
    p->push_back(MakeConvFusionPass());
    p->push_back(MakeDeadNodeEliminationPass());
    p->push_back(MakeShapeInferencePass());
    // These read the element types shape inference found.
    p->push_back(MakeRMSNormFusionPass());
    p->push_back(MakeRotaryFusionPass());
    p->push_back(MakeSiLUFusionPass());
    p->push_back(MakeTransposeMatMulFusionPass());
    p->push_back(MakeSoftmaxAttentionFusionPass());
    p->push_back(MakeKVCacheInPlacePass());
    // Last: the fusions above read MatMul nodes.
    p->push_back(MakeMatMulGroupFusionPass());
    return p;
  }();
  return *passes;
}

absl::Status RunPasses(Graph& g, const std::vector<std::unique_ptr<GraphPass>>& passes, const PassContext& ctx) {
  UseDefIndex uses(g);
  for (const auto& pass : passes) {
    absl::StatusOr<int> count = pass->Apply(g, uses, ctx);
    if (!count.ok()) return count.status();
    if (ctx.report != nullptr) ctx.report->counts[pass->name()] += *count;
    if (ctx.check_uses && !(uses == UseDefIndex(g))) {
      return absl::InternalError(absl::StrCat("graph pass ", pass->name(), " left the use-def index out of date"));
    }
  }
  return absl::OkStatus();
}

}  // namespace oneinfer
