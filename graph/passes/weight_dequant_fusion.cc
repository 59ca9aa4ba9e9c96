// Weight-only quantisation as ONNX spells it: DequantizeLinear(constant integer weight) feeding
// the B operand of MatMuls whose A is float. The pair becomes one internal WeightDequantMatMul
// node whose kernel packs the integer weight into the 4-bit or int8 GEMM's layout once and never
// materialises the float weight (selector: Check below; action: the rewrite in the loop).
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool AllBytes(const Tensor& t, uint8_t v) {
  const uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    if (p[i] != v) return false;
  return true;
}

// Empty when the DequantizeLinear can be bound; else why not. Sets axis (normalised) and
// block_size.
std::string Check(const UseDefIndex& uses, const Node& dq, int64_t* axis, int64_t* block_size) {
  const Graph& g = uses.graph();
  if (g.OpsetFor("") < 10) return "opset below 10";
  // Constant, or an initializer a feed can replace (refused below with its own reason).
  auto value = [&](size_t i) -> const Tensor* {
    if (!dq.HasInput(i)) return nullptr;
    if (const Tensor* c = uses.Const(dq.inputs[i])) return c;
    return uses.IsOverridable(dq.inputs[i]) ? &g.initializers.at(dq.inputs[i]) : nullptr;
  };
  const Tensor* w = value(0);
  const Tensor* s = value(1);
  const Tensor* zp = value(2);
  if (w == nullptr || s == nullptr || (dq.HasInput(2) && zp == nullptr))
    return "weight, scale or zero point is not a constant";
  if (uses.IsOverridable(dq.inputs[0]) || uses.IsOverridable(dq.inputs[1]))
    return "weight or scale is an overridable graph input";
  if (dq.HasInput(2) && uses.IsOverridable(dq.inputs[2])) return "zero point is an overridable graph input";
  if (s->dtype() != DType::kFloat32) return "scale is not float32";
  if (w->rank() != 2) return "weight is not a matrix";
  const int64_t K = w->dim(0), N = w->dim(1);
  if (K <= 0 || N <= 0) return "empty weight";
  if (zp != nullptr && zp->dtype() != w->dtype()) return "zero point type differs from the weight's";
  int64_t a = dq.GetInt("axis", 1);
  if (a < 0) a += 2;
  *axis = a;
  *block_size = g.OpsetFor("") >= 21 ? dq.GetInt("block_size", 0) : 0;
  const DType t = w->dtype();
  if (t == DType::kInt4 || t == DType::kUInt4) {
    const int64_t bs = *block_size;
    if (a != 0 || bs <= 0) return "4-bit weights need blocks along K (axis 0, block_size > 0)";
    if (bs % 32 != 0)
      return absl::StrCat("block_size ", bs, " is not a multiple of the 4-bit kernel's 32");
    if (K % bs != 0) return absl::StrCat("block_size ", bs, " does not divide K = ", K);
    if (s->rank() != 2 || s->dim(0) != K / bs || s->dim(1) != N) return "scale shape does not match";
    if (zp != nullptr && zp->shape() != s->shape()) return "zero point shape does not match";
    return "";
  }
  if (t == DType::kInt8 || t == DType::kUInt8) {
    if (*block_size != 0) return "blocked int8 weights";
    const bool per_tensor = s->num_elements() == 1 && s->rank() <= 1;
    if (!per_tensor && !(a == 1 && s->rank() == 1 && s->dim(0) == N))
      return "int8 scales are neither per tensor nor per output column (axis 1)";
    if (zp != nullptr && zp->num_elements() != s->num_elements()) return "zero point shape does not match";
    // The int8 GEMM takes signed codes as they are: int8 with zero point 0, uint8 with 128.
    if (zp != nullptr && !AllBytes(*zp, t == DType::kInt8 ? 0 : 128))
      return "int8 zero points other than 0 (uint8: 128)";
    if (t == DType::kUInt8 && zp == nullptr) return "uint8 weights without zero point 128";
    return "";
  }
  return absl::StrCat("weight type ", DTypeName(t));
}

}  // namespace

int FuseWeightDequantMatMul(Graph& g, UseDefIndex& uses, std::vector<std::string>* refused) {
  using Op = internal_ops::WeightDequantMatMul;
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& dq = g.nodes[k];
    // DequantizeLinear-23's output_dtype is left to its kernel, which checks it.
    if (!IsOnnxOp(dq, "DequantizeLinear") || !dq.HasOutput(0) || dq.GetInt("output_dtype", 0) != 0) continue;
    const std::string& out = dq.outputs[0];
    // Plain readers (input slots); a subgraph read or a graph output keeps the float weight.
    std::vector<size_t> rd;
    bool only_matmul_b = !uses.IsGraphOutput(out);
    for (const UseDefIndex::Use& use : uses.Readers(out)) {
      only_matmul_b = only_matmul_b && use.slot != UseDefIndex::kImplicit;
      if (use.slot != UseDefIndex::kImplicit) rd.push_back(use.node);
    }
    only_matmul_b = only_matmul_b && !rd.empty();
    for (size_t r : rd) {
      const Node& mm = g.nodes[r];
      only_matmul_b = only_matmul_b && IsOnnxOp(mm, "MatMul") && mm.inputs.size() == 2 &&
                      mm.inputs[1] == out && mm.inputs[0] != out;
      // A dequantised activation makes this a QDQ group: the exact QDQ fusion's (or, refused
      // or switched off with SessionOptions::qdq_fusion, the per-node path's), never a dynamic
      // requantisation.
      const Node* a = uses.Producer(mm.inputs.empty() ? std::string() : mm.inputs[0]);
      only_matmul_b = only_matmul_b && !(a != nullptr && IsOnnxOp(*a, "DequantizeLinear"));
    }
    if (!only_matmul_b) continue;  // not the weight-only pattern: nothing to say
    int64_t axis = 0, block_size = 0;
    const std::string why = Check(uses, dq, &axis, &block_size);
    if (!why.empty()) {
      if (refused) refused->push_back(absl::StrCat(dq.Describe(), " -> MatMul left unfused: ", why));
      continue;
    }
    for (size_t r : rd) {
      Node& mm = g.nodes[r];
      Node f;
      f.op_type = Op::kName;
      f.domain = internal_ops::kDomain;
      f.name = mm.name;
      f.inputs = {mm.inputs[0], dq.inputs[0], dq.inputs[1]};
      if (dq.HasInput(2)) f.inputs.push_back(dq.inputs[2]);
      f.outputs = {mm.outputs[0]};
      f.attrs[Op::kAxis] = Attribute::Int(Op::kAxis, axis);
      f.attrs[Op::kBlockSize] = Attribute::Int(Op::kBlockSize, block_size);
      mm = std::move(f);
    }
    drop[k] = true;
    fused += static_cast<int>(rd.size());
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class WeightDequantFusionPass : public GraphPass {
 public:
  const char* name() const override { return "weight_dequant_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext& ctx) const override {
    if (!ctx.weight_fusion) return 0;  // the per-node DequantizeLinear + MatMul path runs
    std::vector<std::string> refused;
    const int fused = FuseWeightDequantMatMul(g, uses, &refused);
    for (const std::string& why : refused) Log(ctx.log_level, LogLevel::kInfo, why);
    return fused;
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeWeightDequantFusionPass() { return std::make_unique<WeightDequantFusionPass>(); }

}  // namespace oneinfer
