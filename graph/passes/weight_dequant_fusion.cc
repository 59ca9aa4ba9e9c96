// Weight-only quantisation as ONNX spells it: DequantizeLinear(constant integer weight) feeding
// the B operand of MatMuls whose A is float. The pair becomes one internal WeightDequantMatMul
// node whose kernel packs the integer weight into the 4-bit or int8 GEMM's layout once and never
// materialises the float weight (selector: Check below; action: the rewrite in the loop).
#include <cstdlib>
#include <cstring>
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

bool AllBytes(const Tensor& t, uint8_t v) {
  const uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    if (p[i] != v) return false;
  return true;
}

// Empty when the DequantizeLinear can be bound; else why not. Sets axis (normalised) and
// block_size.
std::string Check(const Graph& g, const Node& dq, int64_t* axis, int64_t* block_size) {
  if (g.OpsetFor("") < 10) return "opset below 10";
  const Tensor* w = dq.HasInput(0) ? Const(g, dq.inputs[0]) : nullptr;
  const Tensor* s = dq.HasInput(1) ? Const(g, dq.inputs[1]) : nullptr;
  const Tensor* zp = dq.HasInput(2) ? Const(g, dq.inputs[2]) : nullptr;
  if (w == nullptr || s == nullptr || (dq.HasInput(2) && zp == nullptr))
    return "weight, scale or zero point is not a constant";
  for (const ValueInfo& in : g.inputs)
    for (const std::string* name : {&dq.inputs[0], &dq.inputs[1]})
      if (in.name == *name) return "weight or scale is an overridable graph input";
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

bool WeightDequantFusionEnabled() {
  const char* e = std::getenv("ONEINFER_WEIGHT_FUSION");
  return e == nullptr || std::strcmp(e, "0") != 0;
}

int FuseWeightDequantMatMul(Graph& g, std::vector<std::string>* refused) {
  std::map<std::string, size_t> producer;
  std::map<std::string, std::vector<size_t>> readers;  // plain readers (input slots)
  std::map<std::string, int> other_reads;              // implicit inputs and graph outputs
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const std::string& o : g.nodes[k].outputs) if (!o.empty()) producer[o] = k;
    for (const std::string& i : g.nodes[k].inputs) if (!i.empty()) readers[i].push_back(k);
    for (const std::string& i : g.nodes[k].implicit_inputs) other_reads[i]++;
  }
  for (const ValueInfo& o : g.outputs) other_reads[o.name]++;
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& dq = g.nodes[k];
    if (!IsOp(dq, "DequantizeLinear") || !dq.HasOutput(0)) continue;
    const std::string& out = dq.outputs[0];
    const std::vector<size_t>& rd = readers[out];
    bool only_matmul_b = !rd.empty() && other_reads[out] == 0;
    for (size_t r : rd) {
      const Node& mm = g.nodes[r];
      only_matmul_b = only_matmul_b && IsOp(mm, "MatMul") && mm.inputs.size() == 2 &&
                      mm.inputs[1] == out && mm.inputs[0] != out;
      // A dequantised activation makes this a QDQ group: the exact QDQ fusion's (or, refused
      // or switched off with ONEINFER_QDQ=0, the per-node path's), never a dynamic requantisation.
      auto a = producer.find(mm.inputs.empty() ? std::string() : mm.inputs[0]);
      only_matmul_b = only_matmul_b && !(a != producer.end() && IsOp(g.nodes[a->second], "DequantizeLinear"));
    }
    if (!only_matmul_b) continue;  // not the weight-only pattern: nothing to say
    int64_t axis = 0, block_size = 0;
    const std::string why = Check(g, dq, &axis, &block_size);
    if (!why.empty()) {
      if (refused) refused->push_back(absl::StrCat(dq.Describe(), " -> MatMul left unfused: ", why));
      continue;
    }
    for (size_t r : rd) {
      Node& mm = g.nodes[r];
      Node f;
      f.op_type = "WeightDequantMatMul";
      f.domain = "oneinfer.internal";
      f.name = mm.name;
      f.inputs = {mm.inputs[0], dq.inputs[0], dq.inputs[1]};
      if (dq.HasInput(2)) f.inputs.push_back(dq.inputs[2]);
      f.outputs = {mm.outputs[0]};
      Attribute a;
      a.name = "axis";
      a.type = Attribute::Type::kInt;
      a.i = axis;
      f.attrs["axis"] = a;
      a.name = "block_size";
      a.i = block_size;
      f.attrs["block_size"] = a;
      mm = std::move(f);
    }
    drop[k] = true;
    fused += static_cast<int>(rd.size());
  }
  if (fused == 0) return 0;
  EraseFusedNodes(g, drop);
  return fused;
}

}  // namespace oneinfer
