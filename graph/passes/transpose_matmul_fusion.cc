// MatMul(A, Transpose(B, perm swapping the last two axes)) -> com.microsoft FusedMatMul(A, B,
// transB = 1), as ONNX Runtime's MatMul-Transpose fusion does. Attention writes Q x K^T this way
// (torch's `q @ k.transpose(-2, -1)`, our export's scores): run as written, every decode step
// copies the whole key cache into its transpose before the product; fused, the GEMM reads K's rows
// in place. Only float32 or float16 operands (FusedMatMul's kernel), all three of one type, and
// only a Transpose nothing else reads.
#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

// v's element type when it is a known float32 or float16 tensor, else kUndefined.
DType FloatElem(const Graph& g, const std::string& v) {
  const TypeInfo* t = g.FindType(v);
  if (t == nullptr || t->kind != TypeInfo::Kind::kTensor) return DType::kUndefined;
  return t->elem == DType::kFloat32 || t->elem == DType::kFloat16 ? t->elem : DType::kUndefined;
}

// perm = (0, 1, ..., r-3, r-1, r-2) for r >= 2.
bool SwapsLastTwo(const std::vector<int64_t>& perm) {
  const size_t r = perm.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i) if (perm[i] != static_cast<int64_t>(i)) return false;
  return perm[r - 2] == static_cast<int64_t>(r - 1) && perm[r - 1] == static_cast<int64_t>(r - 2);
}

}  // namespace

int FuseTransposeIntoMatMul(Graph& g, UseDefIndex& uses) {
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (Node& mm : g.nodes) {
    if (!IsOnnxOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const std::string& bt = mm.inputs[1];
    const long t = uses.ProducerIndex(bt);
    if (t < 0 || drop[static_cast<size_t>(t)]) continue;
    const Node& tr = g.nodes[static_cast<size_t>(t)];
    if (!IsOnnxOp(tr, "Transpose") || tr.inputs.size() != 1 || uses.Readers(bt).size() != 1 || uses.IsGraphOutput(bt)) continue;
    // Rank 2 or more on both sides: a rank-1 A would be promoted differently by FusedMatMul.
    const TypeInfo* a_type = g.FindType(mm.inputs[0]);
    if (!SwapsLastTwo(tr.GetInts("perm")) || a_type == nullptr || !a_type->shape || a_type->shape->size() < 2) continue;
    const DType elem = FloatElem(g, mm.inputs[0]);
    if (elem == DType::kUndefined || FloatElem(g, tr.inputs[0]) != elem || FloatElem(g, mm.outputs[0]) != elem) continue;
    Node f;
    f.op_type = "FusedMatMul";
    f.domain = "com.microsoft";
    f.name = mm.name.empty() ? absl::StrCat("fused_matmul_", fused) : mm.name;
    f.inputs = {mm.inputs[0], tr.inputs[0]};
    f.outputs = mm.outputs;
    f.attrs["transB"] = Attribute::Int("transB", 1);
    drop[static_cast<size_t>(t)] = true;
    mm = std::move(f);
    ++fused;
  }
  if (fused == 0) return 0;
  if (g.OpsetFor("com.microsoft") < 0) g.opsets["com.microsoft"] = 1;
  EraseFusedNodes(g, drop, uses);
  return fused;
}

namespace {

class TransposeMatMulFusionPass : public GraphPass {
 public:
  const char* name() const override { return "transpose_matmul_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return FuseTransposeIntoMatMul(g, uses);
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeTransposeMatMulFusionPass() { return std::make_unique<TransposeMatMulFusionPass>(); }

}  // namespace oneinfer
