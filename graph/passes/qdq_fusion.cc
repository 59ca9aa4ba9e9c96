// QDQ MatMul fusion: the A8W8 pattern quantisation tools write (AMD Quark, ONNX Runtime's
// quantizer),
//   DequantizeLinear(x_q, s_x, zp_x) ---.
//                                        MatMul -> y [-> QuantizeLinear(s_y, zp_y) -> y_q]
//   DequantizeLinear(w_q, s_w, zp_w) ---'
// becomes one oneinfer.internal QdqMatMul node reading x_q, w_q and the scales and zero points
// directly, so no dequantised float tensor is ever allocated (ops/qdq_matmul.cc runs it on the
// int8 GEMM; quant/qdq_gemm.h has the arithmetic).
//
// Selector (what is claimed): DQ in ai.onnx or com.microsoft on both MatMul operands; w_q a
// constant 2-D int8/uint8 initializer; every scale and zero point constant; float32 scales;
// x_q int8/uint8 (from its zero point's type or its declared type); scales per tensor, or per
// axis along x's row axis (rank - 2) and w's column axis (1); no block quantisation. The
// QuantizeLinear is folded when it is the MatMul output's only reader and its scale (per tensor,
// per row or per column, finite and non-zero) and zero point (int8/uint8) are constants;
// otherwise the fused node outputs float32 and the QuantizeLinear runs as it is. A folded
// QuantizeLinear whose output's only reader is a DequantizeLinear with the same scale, zero point
// and axis is folded with it: the node quantises and returns the dequantised float32 (out
// "int8_as_float32" / "uint8_as_float32"), the values the pair computes, without the int8 tensor
// and the extra node (the QDQ form writes such a pair after every quantised product).
// Anything else is refused and left on the per-node path, which computes the same function and
// reports malformed parameters itself (refusal `invalid_params`): a scale along K cannot be
// folded (it weighs products inside the sum), a non-constant weight cannot be packed.
// The selector (SelectQdqGroups) only reads the graph, through the shared use-def index, and is
// all `oneinfer inspect` runs. The action (RewriteQdqGroups): the MatMul is replaced in place by
// the fused node (so the order stays topological), a folded QuantizeLinear is removed, and
// DequantizeLinear nodes whose outputs have no other reader are left for RemoveDeadNodes.
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

bool IsQdqDomain(const std::string& d) { return IsDefaultDomain(d) || d == "com.microsoft"; }
bool IsOp(const Node& n, const char* op) { return IsQdqDomain(n.domain) && n.op_type == op; }
bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }
bool Single(const Tensor& t) { return t.num_elements() == 1 && t.rank() <= 1; }

// Declared rank of a value, or -1.
int64_t DeclaredRank(const Graph& g, const std::string& name) {
  const TypeInfo* t = g.FindType(name);
  if (t == nullptr || t->kind != TypeInfo::Kind::kTensor || !t->shape) return -1;
  return static_cast<int64_t>(t->shape->size());
}

DType DeclaredType(const UseDefIndex& u, const std::string& name) {
  if (const Tensor* c = u.Const(name)) return c->dtype();
  const TypeInfo* t = u.graph().FindType(name);
  return t != nullptr && t->kind == TypeInfo::Kind::kTensor ? t->elem : DType::kUndefined;
}

// Fixed size of dim d of a declared value, or -1.
int64_t DeclaredDim(const Graph& g, const std::string& name, int64_t d) {
  const TypeInfo* t = g.FindType(name);
  if (t == nullptr || t->kind != TypeInfo::Kind::kTensor || !t->shape || d < 0 ||
      d >= static_cast<int64_t>(t->shape->size())) {
    return -1;
  }
  return (*t->shape)[static_cast<size_t>(d)].value;
}

bool PerAxisAllowed(const Graph& g, const Node& q) {
  return q.domain == "com.microsoft" || g.OpsetFor(q.domain) >= 13;
}

// A Q/DQ node's scale and zero point: constants, a supported type, matching shapes.
struct QParams {
  const Tensor* scale = nullptr;
  const Tensor* zp = nullptr;  // null when absent
};

// Empty string when usable, else the refusal reason.
std::string ReadQParams(const UseDefIndex& u, const Node& q, QParams* out) {
  const Graph& g = u.graph();
  if (q.inputs.size() < 2) return "invalid_params";
  out->scale = u.Const(q.inputs[1]);
  if (out->scale == nullptr) return "params_not_constant";
  if (q.HasInput(2)) {
    out->zp = u.Const(q.inputs[2]);
    if (out->zp == nullptr) return "params_not_constant";
  }
  if (q.GetInt("block_size", 0) != 0) return "blocked";
  if (out->scale->dtype() != DType::kFloat32) return "unsupported_type";
  if (out->scale->num_elements() < 1 || out->scale->rank() > 1) return "invalid_params";
  if (out->zp != nullptr) {
    if (!Is8Bit(out->zp->dtype())) return "unsupported_type";
    const bool both_single = Single(*out->zp) && Single(*out->scale);
    if (out->zp->shape() != out->scale->shape() && !both_single) return "invalid_params";
  }
  if (!Single(*out->scale) && !PerAxisAllowed(g, q)) return "invalid_params";
  return "";
}

std::vector<int32_t> Ints(const Tensor* t) {
  std::vector<int32_t> v;
  if (t == nullptr) return v;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    v.push_back(t->dtype() == DType::kUInt8 ? int32_t{t->data<uint8_t>()[i]} : int32_t{t->data<int8_t>()[i]});
  }
  return v;
}

bool AnyNonZero(const Tensor* t) {
  for (int32_t v : Ints(t)) {
    if (v != 0) return true;
  }
  return false;
}

// True when DequantizeLinear `dq` (parameters pd) undoes exactly QuantizeLinear `q` (parameters
// pq): equal scales and zero points (an absent zero point only matches an absent one) along the
// same axis of a tensor of rank `rank` (-1: unknown, then the axes must be written alike).
bool SameQuantisation(const Node& q, const QParams& pq, const Node& dq, const QParams& pd, int64_t rank) {
  if (pq.scale->shape() != pd.scale->shape() ||
      std::memcmp(pq.scale->raw_data(), pd.scale->raw_data(), pq.scale->byte_size()) != 0) {
    return false;
  }
  if ((pq.zp == nullptr) != (pd.zp == nullptr)) return false;
  if (pq.zp != nullptr && (pq.zp->dtype() != pd.zp->dtype() || pq.zp->shape() != pd.zp->shape() ||
                           std::memcmp(pq.zp->raw_data(), pd.zp->raw_data(), pq.zp->byte_size()) != 0)) {
    return false;
  }
  if (Single(*pq.scale)) return true;
  int64_t aq = q.GetInt("axis", 1), ad = dq.GetInt("axis", 1);
  if (rank >= 0) {
    aq = aq < 0 ? aq + rank : aq;
    ad = ad < 0 ? ad + rank : ad;
  }
  return aq == ad;
}

const char* AxisName(int64_t y_axis) { return y_axis == 1 ? "row" : y_axis == 2 ? "column" : "tensor"; }

}  // namespace

QdqSelection SelectQdqGroups(const UseDefIndex& uses, const QdqKernelLimits& limits) {
  const Graph& g = uses.graph();
  QdqSelection sel;
  QdqFusionReport& rep = sel.report;
  auto dq_of = [&](const std::string& v) -> const Node* {
    const Node* p = uses.Producer(v);
    // DequantizeLinear-23's output_dtype is left to its kernel, which checks it.
    return p != nullptr && IsOp(*p, "DequantizeLinear") && p->GetInt("output_dtype", 0) == 0 ? p : nullptr;
  };
  auto index_of = [&](const Node* n) { return static_cast<size_t>(n - g.nodes.data()); };

  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& mm = g.nodes[k];
    if (!IsDefaultDomain(mm.domain) || mm.op_type != "MatMul") continue;
    auto refuse = [&](const std::string& why) { rep.refused[why]++; };
    if (mm.inputs.size() != 2 || !mm.HasOutput(0)) {
      refuse("invalid_params");
      continue;
    }
    const Node* dqx = dq_of(mm.inputs[0]);
    const Node* dqw = dq_of(mm.inputs[1]);
    if (dqx == nullptr && dqw == nullptr) {
      refuse("not_qdq");
      continue;
    }
    if (dqx == nullptr) {
      refuse("activation_not_dequantized");
      continue;
    }
    if (dqw == nullptr) {
      refuse("weight_not_dequantized");
      continue;
    }
    const Tensor* wq = uses.Const(dqw->inputs[0]);
    if (wq == nullptr) {
      refuse("weight_not_constant");
      continue;
    }
    if (!Is8Bit(wq->dtype())) {
      refuse("unsupported_type");
      continue;
    }
    if (wq->rank() != 2) {
      refuse("weight_not_2d");
      continue;
    }
    const int64_t K = wq->dim(0), N = wq->dim(1);
    if (K < 1 || N < 1 || K > limits.max_k) {
      refuse("weight_shape");
      continue;
    }
    QParams pw, px;
    if (std::string why = ReadQParams(uses, *dqw, &pw); !why.empty()) {
      refuse(why);
      continue;
    }
    if (std::string why = ReadQParams(uses, *dqx, &px); !why.empty()) {
      refuse(why);
      continue;
    }
    if (pw.zp != nullptr && pw.zp->dtype() != wq->dtype()) {
      refuse("invalid_params");
      continue;
    }
    // The weight's scale: per tensor, or along axis 1 (one per output column).
    if (!Single(*pw.scale)) {
      const int64_t axis = dqw->GetInt("axis", 1);
      const int64_t a = axis < 0 ? axis + 2 : axis;
      if (a == 0 && pw.scale->dim(0) == K) {
        refuse("scale_along_k");
        continue;
      }
      if (a != 1 || pw.scale->dim(0) != N) {
        refuse("invalid_params");
        continue;
      }
    }
    // The activation type: its zero point's, else its declared type.
    const std::string& xq = dqx->inputs[0];
    DType declared = DeclaredType(uses, xq);
    const Node* qx = uses.Producer(xq);
    if (declared == DType::kUndefined && qx != nullptr && IsOp(*qx, "QuantizeLinear")) {
      // Made by a QuantizeLinear: its zero point's type, else output_dtype, else uint8.
      const Tensor* z = qx->HasInput(2) ? uses.Const(qx->inputs[2]) : nullptr;
      const int64_t od = qx->domain == "com.microsoft" ? 0 : qx->GetInt("output_dtype", 0);
      declared = z != nullptr ? z->dtype() : od != 0 ? static_cast<DType>(od) : DType::kUInt8;
      if (qx->HasInput(2) && z == nullptr) declared = DType::kUndefined;
    }
    const DType xt = px.zp != nullptr ? px.zp->dtype() : declared;
    if (xt == DType::kUndefined) {
      refuse("activation_type_unknown");
      continue;
    }
    if (!Is8Bit(xt)) {
      refuse("unsupported_type");
      continue;
    }
    if (declared != DType::kUndefined && declared != xt) {
      refuse("invalid_params");
      continue;
    }
    // The activation's scale: per tensor, or along its row axis (rank - 2).
    const int64_t xrank = DeclaredRank(g, xq);
    if (!Single(*px.scale)) {
      const int64_t axis = dqx->GetInt("axis", 1);
      if (xrank < 0 && axis >= 0) {
        refuse("activation_rank_unknown");
        continue;
      }
      if (xrank >= 0 && (axis < -xrank || axis >= xrank)) {
        refuse("invalid_params");
        continue;
      }
      const int64_t from_end = xrank >= 0 ? (axis < 0 ? -axis : xrank - axis) : -axis;  // 1 = K, 2 = rows
      if (from_end == 1) {
        refuse("scale_along_k");
        continue;
      }
      if (from_end != 2) {
        refuse("scale_along_batch");
        continue;
      }
      const int64_t rows = xrank >= 0 ? DeclaredDim(g, xq, xrank - 2) : -1;
      if (rows >= 0 && rows != px.scale->dim(0)) {
        refuse("invalid_params");
        continue;
      }
    }

    // The output QuantizeLinear, when it is the only reader of the MatMul's output.
    const std::string& y = mm.outputs[0];
    const Node* q = nullptr;
    QParams py;
    int64_t y_axis = 0;
    DType yt = DType::kFloat32;
    const std::vector<UseDefIndex::Use>& y_readers = uses.Readers(y);
    if (y_readers.size() == 1 && y_readers[0].slot != UseDefIndex::kImplicit && !uses.IsGraphOutput(y)) {
      const Node& cand = g.nodes[y_readers[0].node];
      if (IsOp(cand, "QuantizeLinear") && !cand.inputs.empty() && cand.inputs[0] == y && cand.HasOutput(0) &&
          ReadQParams(uses, cand, &py).empty()) {
        bool ok = true;
        // Output type: the zero point's, else output_dtype (opset 21), else uint8.
        DType t = py.zp != nullptr ? py.zp->dtype() : DType::kUInt8;
        const int64_t od = cand.domain == "com.microsoft" ? 0 : cand.GetInt("output_dtype", 0);
        if (od != 0) {
          ok = ok && (py.zp == nullptr || static_cast<int64_t>(py.zp->dtype()) == od);
          t = static_cast<DType>(od);
        }
        ok = ok && Is8Bit(t);
        for (int64_t i = 0; ok && i < py.scale->num_elements(); ++i) {
          const float s = py.scale->data<float>()[i];
          ok = s != 0.0f && std::isfinite(s);
        }
        if (ok && !Single(*py.scale)) {
          const int64_t axis = cand.GetInt("axis", 1);
          const int64_t yrank = xrank;  // MatMul keeps the activation's rank (>= 2 here)
          const int64_t from_end = axis < 0 ? -axis : (yrank >= 2 ? yrank - axis : 0);
          if (from_end == 1 && py.scale->dim(0) == N) {
            y_axis = 2;
          } else if (from_end == 2 && (yrank < 0 || DeclaredDim(g, xq, yrank - 2) < 0 ||
                                       DeclaredDim(g, xq, yrank - 2) == py.scale->dim(0))) {
            y_axis = 1;
          } else {
            ok = false;
          }
        }
        if (ok) {
          q = &cand;
          yt = t;
        } else {
          rep.refused["output_quantize_kept"]++;
        }
      }
    }
    // The DequantizeLinear after the folded QuantizeLinear, when it is y_q's only reader and
    // undoes exactly that quantisation.
    const Node* dq_out = nullptr;
    if (q != nullptr) {
      const std::string& yq = q->outputs[0];
      const std::vector<UseDefIndex::Use>& yq_readers = uses.Readers(yq);
      const Node* cand = yq_readers.size() == 1 && yq_readers[0].slot != UseDefIndex::kImplicit && !uses.IsGraphOutput(yq)
                             ? &g.nodes[yq_readers[0].node]
                             : nullptr;
      QParams pd;
      if (cand != nullptr && IsOp(*cand, "DequantizeLinear") && cand->inputs[0] == yq && cand->HasOutput(0) &&
          cand->GetInt("output_dtype", 0) == 0 && ReadQParams(uses, *cand, &pd).empty() &&
          SameQuantisation(*q, py, *cand, pd, xrank)) {
        dq_out = cand;
      }
    }

    const bool zx = AnyNonZero(px.zp), zw = AnyNonZero(pw.zp) || wq->dtype() == DType::kUInt8;
    const std::string form = absl::StrCat(
        "a=", DTypeName(xt), " w=", DTypeName(wq->dtype()), " sx=", Single(*px.scale) ? "tensor" : "row",
        " sw=", Single(*pw.scale) ? "tensor" : "column", " zp=", zx && zw ? "x,w" : zx ? "x" : zw ? "w" : "none",
        " out=", DTypeName(yt), q != nullptr ? absl::StrCat(" sy=", AxisName(y_axis)) : "",
        dq_out != nullptr ? " dq=folded" : "");
    rep.forms[form]++;
    ++rep.fused;
    QdqGroup group;
    group.matmul = k;
    group.dq_x = index_of(dqx);
    group.dq_w = index_of(dqw);
    group.quantize = q != nullptr ? static_cast<long>(index_of(q)) : -1;
    group.dequantize = dq_out != nullptr ? static_cast<long>(index_of(dq_out)) : -1;
    group.out = yt;
    group.y_axis = y_axis;
    group.trace = absl::StrCat("qdq_group node=", mm.name.empty() ? y : mm.name, " k=", K, " n=", N, " ", form,
                               " sx_n=", px.scale->num_elements(), " sw_n=", pw.scale->num_elements(),
                               " zp_x=", px.zp ? px.zp->num_elements() : 0, " zp_w=", pw.zp ? pw.zp->num_elements() : 0,
                               q != nullptr ? absl::StrCat(" zp_y=", py.zp && Single(*py.zp) ? Ints(py.zp)[0] : 0)
                                            : std::string());
    sel.groups.push_back(std::move(group));
  }
  return sel;
}

int RewriteQdqGroups(Graph& g, UseDefIndex& uses, const QdqSelection& selection) {
  using Op = internal_ops::QdqMatMul;
  if (selection.groups.empty()) return 0;
  std::vector<bool> drop(g.nodes.size(), false);
  int fused = 0;
  for (const QdqGroup& group : selection.groups) {
    ++fused;
    const Node& mm = g.nodes[group.matmul];
    const Node& dqx = g.nodes[group.dq_x];
    const Node& dqw = g.nodes[group.dq_w];
    Node f;
    f.op_type = Op::kName;
    f.domain = internal_ops::kDomain;
    f.name = mm.name.empty() ? absl::StrCat("qdq_matmul_", fused) : mm.name;
    f.inputs.resize(Op::kYScale);
    f.inputs[Op::kX] = dqx.inputs[0];
    f.inputs[Op::kXScale] = dqx.inputs[1];
    f.inputs[Op::kXZeroPoint] = dqx.HasInput(2) ? dqx.inputs[2] : std::string();
    f.inputs[Op::kW] = dqw.inputs[0];
    f.inputs[Op::kWScale] = dqw.inputs[1];
    f.inputs[Op::kWZeroPoint] = dqw.HasInput(2) ? dqw.inputs[2] : std::string();
    if (group.quantize >= 0) {
      const Node& q = g.nodes[static_cast<size_t>(group.quantize)];
      f.inputs.push_back(q.inputs[1]);
      f.inputs.push_back(q.HasInput(2) ? q.inputs[2] : std::string());
      f.outputs = {q.outputs[0]};
      drop[static_cast<size_t>(group.quantize)] = true;
      if (group.dequantize >= 0) {
        f.outputs = {g.nodes[static_cast<size_t>(group.dequantize)].outputs[0]};
        drop[static_cast<size_t>(group.dequantize)] = true;
      }
    } else {
      f.outputs = {mm.outputs[0]};
    }
    const DType yt = group.out;
    const char* out = yt == DType::kInt8 ? "int8" : yt == DType::kUInt8 ? "uint8" : "float32";
    if (group.dequantize >= 0) out = yt == DType::kInt8 ? "int8_as_float32" : "uint8_as_float32";
    f.attrs[Op::kOut] = Attribute::String(Op::kOut, out);
    f.attrs[Op::kYAxis] = Attribute::Int(Op::kYAxis, group.y_axis);
    g.nodes[group.matmul] = std::move(f);
  }
  EraseFusedNodes(g, drop, uses);
  return fused;
}

QdqFusionReport AnalyzeQdqFusion(const Graph& g, const QdqKernelLimits& limits) {
  return SelectQdqGroups(UseDefIndex(g), limits).report;
}

namespace {

class QdqFusionPass : public GraphPass {
 public:
  const char* name() const override { return "qdq_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext& ctx) const override {
    // qdq_trace puts this session's lines on stderr; the category's sink gets them either way.
    const bool log = TraceEnabled(LogCategory::kQdq, ctx.qdq_trace);
    auto trace = [&](const std::string& line) { Trace(LogCategory::kQdq, line, ctx.qdq_trace); };
    if (!ctx.qdq_fusion) {
      if (log) trace("qdq_disabled (ONEINFER_QDQ=0 or SessionOptions::qdq_fusion = false)");
      return 0;
    }
    QdqSelection sel = SelectQdqGroups(uses, ctx.qdq_limits);
    if (log) {
      for (const QdqGroup& group : sel.groups) trace(group.trace);
      for (const auto& [why, count] : sel.report.refused) trace(absl::StrCat("qdq_refused why=", why, " count=", count));
      trace(absl::StrCat("qdq_fused count=", sel.groups.size()));
    }
    const int fused = RewriteQdqGroups(g, uses, sel);
    if (ctx.report != nullptr) ctx.report->qdq = std::move(sel.report);
    return fused;
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeQdqFusionPass() { return std::make_unique<QdqFusionPass>(); }

}  // namespace oneinfer
