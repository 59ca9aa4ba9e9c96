// QDQ MatMul fusion: DequantizeLinear -> MatMul [-> QuantizeLinear] as one exact int8 node.
//  - bit-exact (0 LSB) against the plain 64-bit integer reference (quant/qdq_gemm.h) through a
//    Session, for per-tensor, per-axis and asymmetric forms, int8/uint8 activations, with and
//    without the output QuantizeLinear;
//  - within 1 LSB of the per-node path (fusion off), with the count of 1-LSB differences printed;
//  - refusals stay per node with the control's output; malformed parameters are errors;
//  - intermediate memory: fused < 1 MB, per node >= 6 MiB on 256x1024x1024;
//  - the NPU leg under the emulated device for the Qwen3-0.6B projection shapes;
//  - QLinearMatMul and MatMulInteger with a constant B on the same kernel, equal to the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/kernel_tier.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "engine/session_impl.h"
#include "graph/internal_ops.h"
#include "graph/onnx_loader.h"
#include "graph/passes/passes.h"
#include "npu/device.h"
#include "npu/router.h"
#include "npu/trace.h"
#include "ops/qdq_matmul.h"
#include "quant/qdq_gemm.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

const QdqKernelLimits kQdqLimits{PackedWeightsS8::kMaxK};

// ---------------------------------------------------------------- graph builders

Tensor Vec(DType t, const std::vector<int32_t>& v, bool scalar) {
  Tensor x = Tensor::Empty(t, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kUInt8) x.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
    else x.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
  }
  return x;
}

Tensor Scales(const std::vector<float>& v) {
  return Tensor::FromVector(DType::kFloat32, v.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(v.size())}, v);
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, bool is_unsigned) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(is_unsigned ? 0 : -128, is_unsigned ? 255 : 127);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(d(rng));
  if (n > 1) {
    v[0] = is_unsigned ? 0 : 0x80;  // the extremes
    v[1] = is_unsigned ? 255 : 127;
  }
  return v;
}

Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}

ValueInfo Declared(const std::string& name, DType t, const Shape& dims) {
  ValueInfo v;
  v.name = name;
  v.type.kind = TypeInfo::Kind::kTensor;
  v.type.elem = t;
  std::vector<Dim> d;
  for (int64_t x : dims) {
    Dim dim;
    if (x >= 0) dim.value = x;
    else dim.param = "rows";
    d.push_back(dim);
  }
  v.type.shape = d;
  return v;
}

struct Case {
  Shape x_shape{8, 16};  // activation shape; the last dim is K
  int64_t N = 6;
  bool x_unsigned = false, w_unsigned = false;
  std::vector<float> s_x{0.0173f};
  std::vector<int32_t> zp_x;  // empty: no zero point input
  int64_t x_axis = 0;         // used when s_x has several values
  std::vector<float> s_w{0.0091f};
  std::vector<int32_t> zp_w;
  int64_t w_axis = 1;
  bool quantize_out = true;
  bool dequantize_out = false;  // a DequantizeLinear of y_q with the same parameters after the Q
  bool y_unsigned = false;
  float s_y = 0.f;  // 0: chosen so the outputs spread over the int8 range
  std::vector<float> s_y_vec;  // per-axis output scale (overrides s_y), along y_axis_attr
  int64_t y_axis_attr = 1;
  std::vector<int32_t> zp_y{0};
  std::string domain;  // "" or "com.microsoft"
  int64_t opset = 21;
  bool weight_is_input = false;  // non-constant weight
  int64_t w_block_size = 0;
  uint32_t seed = 1;
  int64_t K() const { return x_shape.back(); }
  int64_t rows() const { return NumElements(x_shape) / K(); }
};

float AutoOutputScale(const Case& c) {
  return c.s_x[0] * c.s_w[0] * std::sqrt(static_cast<float>(c.K())) * 5500.f / 40.f;
}

struct Built {
  std::unique_ptr<Model> model;
  std::vector<uint8_t> x, w;
};

Built Build(const Case& c) {
  Built b;
  b.model = std::make_unique<Model>();
  Graph& g = b.model->graph;
  g.name = "qdq";
  g.opsets[""] = c.opset;
  if (!c.domain.empty()) g.opsets[c.domain] = 1;
  const DType xt = c.x_unsigned ? DType::kUInt8 : DType::kInt8;
  const DType wt = c.w_unsigned ? DType::kUInt8 : DType::kInt8;
  const int64_t K = c.K(), N = c.N;
  b.x = RandomBytes(static_cast<size_t>(c.rows() * K), c.seed, c.x_unsigned);
  b.w = RandomBytes(static_cast<size_t>(K * N), c.seed + 100, c.w_unsigned);
  g.inputs.push_back(Declared("x_q", xt, c.x_shape));
  Tensor w = Tensor::Empty(wt, {K, N});
  std::memcpy(w.raw_data(), b.w.data(), b.w.size());
  if (c.weight_is_input) g.inputs.push_back(Declared("w_q", wt, {K, N}));
  else g.initializers["w_q"] = w;
  g.initializers["s_x"] = Scales(c.s_x);
  g.initializers["s_w"] = Scales(c.s_w);
  auto dq = [&](const std::string& in, const std::string& s, const std::vector<int32_t>& zp, DType t, bool scalar,
                const std::string& zp_name, const std::string& out, int64_t axis) {
    Node n;
    n.op_type = "DequantizeLinear";
    n.domain = c.domain;
    n.name = "dq_" + in;
    n.inputs = {in, s};
    if (!zp.empty()) {
      g.initializers[zp_name] = Vec(t, zp, scalar);
      n.inputs.push_back(zp_name);
    }
    n.outputs = {out};
    n.attrs["axis"] = IntAttr("axis", axis);
    return n;
  };
  g.nodes.push_back(dq("x_q", "s_x", c.zp_x, xt, c.s_x.size() == 1, "zp_x", "x_dq", c.x_axis));
  Node dqw = dq("w_q", "s_w", c.zp_w, wt, c.s_w.size() == 1, "zp_w", "w_dq", c.w_axis);
  if (c.w_block_size) dqw.attrs["block_size"] = IntAttr("block_size", c.w_block_size);
  g.nodes.push_back(dqw);
  Node mm;
  mm.op_type = "MatMul";
  mm.name = "mm";
  mm.inputs = {"x_dq", "w_dq"};
  mm.outputs = {"y"};
  g.nodes.push_back(mm);
  std::string out = "y";
  if (c.quantize_out) {
    std::vector<float> sy = c.s_y_vec.empty() ? std::vector<float>{c.s_y != 0.f ? c.s_y : AutoOutputScale(c)} : c.s_y_vec;
    g.initializers["s_y"] = Scales(sy);
    Node q;
    q.op_type = "QuantizeLinear";
    q.domain = c.domain;
    q.name = "q";
    q.inputs = {"y", "s_y"};
    if (!c.zp_y.empty()) {
      std::vector<int32_t> zy = c.zp_y;
      if (zy.size() == 1 && sy.size() > 1) zy.assign(sy.size(), c.zp_y[0]);
      g.initializers["zp_y"] = Vec(c.y_unsigned ? DType::kUInt8 : DType::kInt8, zy, sy.size() == 1);
      q.inputs.push_back("zp_y");
    }
    q.attrs["axis"] = IntAttr("axis", c.y_axis_attr);
    q.outputs = {"y_q"};
    g.nodes.push_back(q);
    out = "y_q";
    if (c.dequantize_out) {
      Node dq = q;
      dq.op_type = "DequantizeLinear";
      dq.name = "dq_y";
      dq.inputs[0] = "y_q";
      dq.outputs = {"y_dq"};
      g.nodes.push_back(dq);
      out = "y_dq";
    }
  }
  g.outputs.push_back(ValueInfo{out, {}});
  return b;
}

// The reference's parameters for a case, as the fused node reads them.
QdqGemmParams ParamsOf(const Case& c, const Built& b) {
  QdqGemmParams p;
  p.K = c.K();
  p.N = c.N;
  p.w = b.w.data();
  p.w_unsigned = c.w_unsigned;
  p.x_unsigned = c.x_unsigned;
  p.s_x = c.s_x;
  p.zp_x = c.zp_x;
  p.s_w = c.s_w;
  p.zp_w = c.zp_w;
  if (c.quantize_out) {
    p.out = c.y_unsigned ? QdqOut::kUInt8 : QdqOut::kInt8;
    p.s_y = c.s_y_vec.empty() ? std::vector<float>{c.s_y != 0.f ? c.s_y : AutoOutputScale(c)} : c.s_y_vec;
    p.zp_y = c.zp_y;
    if (p.zp_y.size() == 1 && p.s_y.size() > 1) p.zp_y.assign(p.s_y.size(), c.zp_y[0]);
    if (p.s_y.size() > 1) p.y_axis = static_cast<int64_t>(p.s_y.size()) == c.N && c.y_axis_attr == static_cast<int64_t>(c.x_shape.size()) - 1
                                         ? QdqYAxis::kColumn
                                         : QdqYAxis::kRow;
  }
  return p;
}

struct RunResult {
  absl::Status status;
  Tensor y;
  size_t peak = 0;
  QdqFusionReport report;
  std::vector<std::string> debug;
};

RunResult RunCase(const Case& c, bool fuse, int threads = 1, const NpuOptions& npu = {}) {
  RunResult r;
  Built b = Build(c);
  r.report = AnalyzeQdqFusion(b.model->graph, kQdqLimits);
  std::vector<std::string> lines;
  QdqDebugSink prev = SetQdqDebugSink([&](std::string_view l) { lines.emplace_back(l); });
  SessionOptions opts;
  opts.num_threads = threads;
  opts.qdq_fusion = fuse;
  opts.npu = npu;
  // The control runs every node on its own: no weight-only DequantizeLinear fusion either (a
  // pass that claims DQ(w) -> MatMul whatever A is, where one is built in).
  opts.weight_fusion = fuse;
  std::vector<uint8_t> x = b.x, w = b.w;
  auto s = SessionImpl::Create(std::move(b.model), opts);
  if (!s.ok()) {
    SetQdqDebugSink(prev);
    r.status = s.status();
    return r;
  }
  Tensor xt = Tensor::Empty(c.x_unsigned ? DType::kUInt8 : DType::kInt8, c.x_shape);
  std::memcpy(xt.raw_data(), x.data(), x.size());
  std::vector<Feed> feeds{{"x_q", xt}};
  if (c.weight_is_input) {
    Tensor wt = Tensor::Empty(c.w_unsigned ? DType::kUInt8 : DType::kInt8, {c.K(), c.N});
    std::memcpy(wt.raw_data(), w.data(), w.size());
    feeds.emplace_back("w_q", wt);
  }
  (*s)->allocator().ResetPeak();
  auto out = (*s)->Run(feeds, {});
  r.peak = (*s)->allocator().peak_bytes();
  SetQdqDebugSink(prev);
  r.debug = lines;
  if (!out.ok()) {
    r.status = out.status();
    return r;
  }
  r.y = (*out)[0];
  return r;
}

std::vector<int32_t> AsInts(const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::kUInt8 ? int32_t{t.data<uint8_t>()[i]}
           : t.dtype() == DType::kInt8 ? int32_t{t.data<int8_t>()[i]}
                                       : t.data<int32_t>()[i];
  }
  return v;
}

int Count(const std::vector<std::string>& lines, const std::string& prefix) {
  int n = 0;
  for (const auto& l : lines) n += absl::StartsWith(l, prefix) ? 1 : 0;
  return n;
}

// Fused output == the 64-bit reference bit for bit; per-node output within 1 LSB (quantised) or
// a float tolerance; prints how many values differ by one step.
void ExpectExact(const Case& c, const std::string& label) {
  SCOPED_TRACE(label);
  RunResult fused = RunCase(c, true);
  ASSERT_TRUE(fused.status.ok()) << fused.status;
  EXPECT_EQ(fused.report.fused, 1);
  EXPECT_EQ(Count(fused.debug, "qdq_fused count=1"), 1);
  Built b = Build(c);
  const QdqGemmParams p = ParamsOf(c, b);
  const int64_t rows = c.rows(), N = c.N;
  const size_t n = static_cast<size_t>(rows * N);
  ASSERT_EQ(fused.y.num_elements(), static_cast<int64_t>(n));
  RunResult control = RunCase(c, false);
  ASSERT_TRUE(control.status.ok()) << control.status;
  EXPECT_EQ(control.report.fused, 1);  // the analysis sees the group; the session did not fuse it
  EXPECT_EQ(Count(control.debug, "qdq_fused"), 0);
  if (c.quantize_out && c.dequantize_out) {
    // The folded Q -> DQ: the reference's quantised values, dequantised as DequantizeLinear does.
    std::vector<uint8_t> q(n);
    QdqGemmReference(p, rows, b.x.data(), c.x_unsigned, q.data());
    QdqGemmParams pf = p;
    pf.out = c.y_unsigned ? QdqOut::kUInt8AsFloat32 : QdqOut::kInt8AsFloat32;
    std::vector<float> ref(n), direct(n);
    QdqGemmReference(pf, rows, b.x.data(), c.x_unsigned, direct.data());
    for (size_t i = 0; i < n; ++i) {
      const int64_t col = static_cast<int64_t>(i) % N, row = static_cast<int64_t>(i) / N;
      const size_t yi = p.s_y.size() == 1 ? 0 : static_cast<size_t>(p.y_axis == QdqYAxis::kColumn ? col : row);
      const int32_t qi = c.y_unsigned ? int32_t{q[i]} : int32_t{static_cast<int8_t>(q[i])};
      const int32_t zy = p.zp_y.empty() ? 0 : p.zp_y[yi];
      ref[i] = (static_cast<float>(qi) - static_cast<float>(zy)) * p.s_y[yi];
    }
    EXPECT_EQ(std::memcmp(direct.data(), ref.data(), n * sizeof(float)), 0) << "the reference's own dequantised form";
    ASSERT_EQ(fused.y.dtype(), DType::kFloat32);
    EXPECT_EQ(std::memcmp(fused.y.raw_data(), ref.data(), n * sizeof(float)), 0) << "fused differs from the reference";
    EXPECT_EQ(Count(fused.debug, "qdq_group"), 1);
    bool folded = false;
    for (const auto& l : fused.debug) folded = folded || absl::StrContains(l, "dq=folded");
    EXPECT_TRUE(folded) << "the DequantizeLinear after the group was not folded";
    int steps = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t yi = p.s_y.size() == 1 ? 0 : static_cast<size_t>(p.y_axis == QdqYAxis::kColumn ? i % N : i / N);
      const float d = std::abs(fused.y.data<float>()[i] - control.y.data<float>()[i]) / p.s_y[yi];
      EXPECT_LE(d, 1.001f) << i;  // at most one quantisation step from the per-node path
      steps += d > 0.5f;
    }
    std::printf("[ qdq ] %s: fused Q->DQ == reference bit for bit; vs per-node: %d of %zu values one step apart\n",
                label.c_str(), steps, n);
  } else if (c.quantize_out) {
    std::vector<uint8_t> ref(n);
    QdqGemmReference(p, rows, b.x.data(), c.x_unsigned, ref.data());
    ASSERT_EQ(fused.y.dtype(), c.y_unsigned ? DType::kUInt8 : DType::kInt8);
    EXPECT_EQ(std::memcmp(fused.y.raw_data(), ref.data(), n), 0) << "fused differs from the int64 reference";
    const auto fv = AsInts(fused.y), cv = AsInts(control.y);
    int ones = 0, worst = 0, distinct = 0;
    for (size_t i = 0; i < n; ++i) {
      const int d = std::abs(fv[i] - cv[i]);
      worst = std::max(worst, d);
      ones += d == 1;
      distinct += fv[i] != fv[0];
    }
    EXPECT_LE(worst, 1);
    EXPECT_GT(distinct, 0) << "degenerate case: every output is the same";
    std::printf("[ qdq ] %s: fused == int64 reference (0 LSB); vs per-node: %d of %zu values differ by 1 LSB, worst %d\n",
                label.c_str(), ones, n, worst);
  } else {
    std::vector<float> ref(n);
    QdqGemmReference(p, rows, b.x.data(), c.x_unsigned, ref.data());
    ASSERT_EQ(fused.y.dtype(), DType::kFloat32);
    EXPECT_EQ(std::memcmp(fused.y.raw_data(), ref.data(), n * sizeof(float)), 0);
    // Float accumulation error is relative to the output's scale, not to each (possibly
    // cancelled-to-zero) value.
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(static_cast<double>(control.y.data<float>()[i])));
    for (size_t i = 0; i < n; ++i) {
      const double a = fused.y.data<float>()[i], e = control.y.data<float>()[i];
      worst = std::max(worst, std::abs(a - e) / scale);
    }
    EXPECT_LT(worst, 1e-5);
    std::printf("[ qdq ] %s: fused == int64 reference bit for bit (float out); vs per-node worst |d| / max|y| %.3g\n",
                label.c_str(), worst);
  }
}

// ---------------------------------------------------------------- exactness

TEST(QdqFusion, PerTensor8x16x6) {
  Case c;
  ExpectExact(c, "8x16x6 per-tensor");
  c.quantize_out = false;
  ExpectExact(c, "8x16x6 per-tensor, float out");
}

// A QuantizeLinear -> DequantizeLinear pair after the product (what QDQ exporters write after
// every quantised MatMul) folds into the group: float32 out, no int8 tensor, the same values.
TEST(QdqFusion, OutputQuantizeDequantizePairIsFolded) {
  Case c;
  c.dequantize_out = true;
  ExpectExact(c, "8x16x6 per-tensor, Q->DQ");
  c.x_unsigned = true;
  c.zp_x = {131};
  c.y_unsigned = true;
  c.zp_y = {119};
  c.s_w.assign(6, 0.0091f);
  for (size_t i = 0; i < c.s_w.size(); ++i) c.s_w[i] *= 1.0f + 0.1f * static_cast<float>(i);
  ExpectExact(c, "uint8, zero points, per-column weights, Q->DQ");
  c.s_y_vec = {0.9f, 1.1f, 0.7f, 1.3f, 0.8f, 1.2f};
  c.y_axis_attr = 1;
  ExpectExact(c, "per-column output scales, Q->DQ");
  // A prefill-sized block, the form oneinfer quantize writes (uint8 activations with zero points,
  // per-column int8 weights), several blocks of rows.
  Case big;
  big.x_shape = {1, 96, 1024};
  big.N = 1024;
  big.x_unsigned = true;
  big.zp_x = {131};
  big.s_w.assign(1024, 0.0021f);
  for (size_t i = 0; i < big.s_w.size(); ++i) big.s_w[i] *= 1.0f + 0.001f * static_cast<float>(i % 97);
  big.y_unsigned = true;
  big.zp_y = {128};
  big.y_axis_attr = 1;
  big.dequantize_out = true;
  ExpectExact(big, "[1,96,1024] x [1024,1024] uint8, Q->DQ");
}

// The folded node's output keeps its type for the passes after the fusion (shape inference
// knows QdqMatMul): a Transpose -> MatMul reading it still becomes one FusedMatMul.
TEST(QdqFusion, FoldedOutputKeepsItsTypeForLaterFusions) {
  Case c;
  c.dequantize_out = true;
  c.x_shape = {6, 16};
  Built b = Build(c);
  Graph& g = b.model->graph;
  Node tr;
  tr.op_type = "Transpose";
  tr.name = "tr";
  tr.inputs = {"y_dq"};
  tr.outputs = {"y_t"};
  Attribute perm;
  perm.name = "perm";
  perm.type = Attribute::Type::kInts;
  perm.ints = {1, 0};
  tr.attrs["perm"] = perm;
  Node mm;
  mm.op_type = "MatMul";
  mm.name = "self_product";
  mm.inputs = {"y_dq", "y_t"};
  mm.outputs = {"yy"};
  g.nodes.push_back(tr);
  g.nodes.push_back(mm);
  g.outputs = {Declared("yy", DType::kFloat32, {6, 6})};
  auto s = SessionImpl::Create(std::move(b.model), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  int fused = 0, qdq = 0;
  for (const Node& n : (*s)->graph().nodes) {
    fused += n.op_type == "FusedMatMul";
    qdq += n.op_type == internal_ops::QdqMatMul::kName;
  }
  EXPECT_EQ(qdq, 1);
  EXPECT_EQ(fused, 1);
  const TypeInfo* y = (*s)->graph().FindType("y_dq");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->elem, DType::kFloat32);
}

// A QdqMatMul node written by hand (the internal domain is loadable) with an `out` or `y_axis` it
// does not know is a load error naming the node, not a guess.
TEST(QdqFusion, UnknownOutOrAxisOfAWrittenQdqMatMulIsAnError) {
  for (const auto& [out, axis, want] : std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"int16", 0, "out 'int16' is not one of"}, {"uint8_as_float32", 3, "y_axis 3 is not 0"}}) {
    Case c;
    Built b = Build(c);
    Graph& g = b.model->graph;
    g.opsets[internal_ops::kDomain] = internal_ops::kOpset;
    Node f;
    f.op_type = internal_ops::QdqMatMul::kName;
    f.domain = internal_ops::kDomain;
    f.name = "hand_written";
    f.inputs = {"x_q", "s_x", "", "w_q", "s_w", "", "s_y", "zp_y"};
    f.outputs = {"y_q"};
    f.attrs["out"] = Attribute::String("out", out);
    f.attrs["y_axis"] = Attribute::Int("y_axis", axis);
    g.nodes = {f};
    g.outputs = {ValueInfo{"y_q", {}}};
    auto s = SessionImpl::Create(std::move(b.model), SessionOptions{});
    ASSERT_FALSE(s.ok()) << out;
    EXPECT_NE(s.status().message().find(want), std::string::npos) << s.status();
    EXPECT_NE(s.status().message().find("hand_written"), std::string::npos) << s.status();
  }
}

// A DequantizeLinear that does not undo the output quantisation stays a node of its own.
TEST(QdqFusion, DequantizeWithOtherParametersIsNotFolded) {
  Case c;
  c.dequantize_out = true;
  Built b = Build(c);
  Graph& g = b.model->graph;
  g.initializers["s_y2"] = Scales({0.5f});
  g.nodes.back().inputs[1] = "s_y2";
  SessionOptions opts;
  auto s = SessionImpl::Create(std::move(b.model), opts);
  ASSERT_TRUE(s.ok()) << s.status();
  int dq = 0;
  for (const Node& n : (*s)->graph().nodes) dq += n.op_type == "DequantizeLinear";
  EXPECT_EQ(dq, 1);
}

TEST(QdqFusion, PerTensor256x1024x1024) {
  Case c;
  c.x_shape = {256, 1024};
  c.N = 1024;
  ExpectExact(c, "256x1024x1024 per-tensor");
}

TEST(QdqFusion, PerAxis8RowScales6ColumnScales) {
  Case c;
  c.s_x = {0.011f, 0.013f, 0.017f, 0.019f, 0.023f, 0.029f, 0.031f, 0.037f};
  c.s_w = {0.0041f, 0.0043f, 0.0047f, 0.0053f, 0.0059f, 0.0061f};
  c.s_y = 0.0031f;
  ExpectExact(c, "per-axis sx=8 sw=6");
  c.quantize_out = false;
  ExpectExact(c, "per-axis sx=8 sw=6, float out");
}

TEST(QdqFusion, AsymmetricPerTensor) {
  Case c;
  c.zp_x = {-40};
  c.zp_w = {-25};
  c.zp_y = {-7};
  ExpectExact(c, "zp_x=-40 zp_w=-25 zp_y=-7");
  c.x_shape = {64, 512};
  c.N = 96;
  ExpectExact(c, "zp_x=-40 zp_w=-25 zp_y=-7, 64x512x96");
}

TEST(QdqFusion, FullyPerAxisWithZeroPoints) {
  Case c;
  c.s_x = {0.011f, 0.013f, 0.017f, 0.019f, 0.023f, 0.029f, 0.031f, 0.037f};
  c.zp_x = {-40, -3, 0, 5, 17, -128, 127, 9};
  c.s_w = {0.0041f, 0.0043f, 0.0047f, 0.0053f, 0.0059f, 0.0061f};
  c.zp_w = {-25, 0, 3, -1, 100, -128};
  c.s_y = 0.0057f;
  c.zp_y = {-7};
  ExpectExact(c, "fully per-axis with zero points, zp_y=-7");
  c.quantize_out = false;
  ExpectExact(c, "fully per-axis with zero points, float out");
}

TEST(QdqFusion, Uint8ActivationsAndWeights) {
  Case c;
  c.x_unsigned = true;
  c.zp_x = {131};
  c.zp_w = {-25};
  c.x_shape = {32, 64};
  c.N = 48;
  ExpectExact(c, "uint8 activations, int8 weights");
  c.y_unsigned = true;
  c.zp_y = {120};
  ExpectExact(c, "uint8 activations, uint8 out");
  c.w_unsigned = true;
  c.zp_w = {118};
  ExpectExact(c, "uint8 activations, uint8 weights");
  c.zp_w.clear();  // uint8 weights without a zero point: zw' = -128 in the shifted domain
  c.quantize_out = false;
  ExpectExact(c, "uint8 weights without zero point, float out");
}

TEST(QdqFusion, ComMicrosoftDomainAndBatchedRowScales) {
  Case c;
  c.domain = "com.microsoft";
  c.zp_x = {-3};
  ExpectExact(c, "com.microsoft Q/DQ");
  // [2, 4, 16] activation, per-row scales along axis 1: row r uses scale r % 4.
  Case b;
  b.x_shape = {2, 4, 16};
  b.s_x = {0.011f, 0.013f, 0.017f, 0.019f};
  b.zp_x = {1, -2, 3, -4};
  b.x_axis = 1;
  b.s_y = 0.0031f;
  ExpectExact(b, "[2,4,16] with 4 row scales");
  // Per-column output scale (QuantizeLinear axis 1 of the [8, 6] output).
  Case y;
  y.s_y_vec = {0.011f, 0.012f, 0.013f, 0.014f, 0.015f, 0.016f};
  y.zp_y = {-7};
  y.y_axis_attr = 1;
  ExpectExact(y, "per-column output scale");
}

TEST(QdqFusion, MultiThreadedIsBitIdentical) {
  Case c;
  c.x_shape = {100, 256};
  c.N = 200;
  c.zp_x = {-40};
  c.zp_w = {-25};
  c.zp_y = {-7};
  RunResult one = RunCase(c, true, 1), two = RunCase(c, true, 2);
  ASSERT_TRUE(one.status.ok() && two.status.ok());
  EXPECT_EQ(AsInts(one.y), AsInts(two.y));
}

// The core on its own: random shapes, types, layouts and zero points, fast path == reference on
// every int8 tier this CPU runs.
TEST(QdqGemmCore, RandomFormsMatchTheReferenceOnEveryTier) {
  for (const std::string& tier : SupportedKernelTiers(KernelFamily::kInt8)) {
    SCOPED_TRACE(tier);
    ASSERT_TRUE(SetKernelTier(KernelFamily::kInt8, tier.c_str()));
    std::mt19937 rng(3);
    for (int t = 0; t < 60; ++t) {
      QdqGemmParams p;
      const int64_t M = 1 + rng() % 40, K = 1 + rng() % 300, N = 1 + rng() % 70;
      const bool au = rng() % 2, wu = rng() % 3 == 0;
      std::vector<uint8_t> a = RandomBytes(M * K, rng(), au), w = RandomBytes(K * N, rng(), wu);
      p.K = K;
      p.N = N;
      p.w = w.data();
      p.w_unsigned = wu;
      p.x_unsigned = au;
      const int64_t R = rng() % 2 ? M : 1, C = rng() % 2 ? N : 1;
      p.s_x.resize(R);
      for (auto& v : p.s_x) v = 0.01f + (rng() % 100) * 1e-4f;
      if (rng() % 2) {
        p.zp_x.resize(R);
        for (auto& z : p.zp_x) z = au ? int(rng() % 256) : int(rng() % 256) - 128;
      }
      p.s_w.resize(C);
      for (auto& v : p.s_w) v = 0.001f + (rng() % 100) * 1e-5f;
      if (rng() % 2) {
        p.zp_w.resize(C);
        for (auto& z : p.zp_w) z = wu ? int(rng() % 256) : int(rng() % 256) - 128;
      }
      const int o = rng() % 6;
      constexpr QdqOut kOuts[] = {QdqOut::kFloat32, QdqOut::kInt8, QdqOut::kUInt8, QdqOut::kInt32,
                                  QdqOut::kInt8AsFloat32, QdqOut::kUInt8AsFloat32};
      p.out = kOuts[o];
      if (QdqOutputQuantised(p.out)) {
        const int ya = rng() % 3;
        p.y_axis = ya == 0 ? QdqYAxis::kTensor : ya == 1 ? QdqYAxis::kRow : QdqYAxis::kColumn;
        p.s_y.resize(ya == 0 ? 1 : ya == 1 ? M : N);
        for (auto& v : p.s_y) v = p.s_x[0] * p.s_w[0] * std::sqrt(static_cast<float>(K)) * 100.f * (1 + (rng() % 10) * 0.1f);
        if (rng() % 2) {
          p.zp_y.resize(p.s_y.size());
          for (auto& z : p.zp_y) z = QdqOutputUnsigned(p.out) ? int(rng() % 256) : int(rng() % 256) - 128;
        }
      }
      auto g = QdqGemm::Create(p);
      ASSERT_TRUE(g.ok()) << g.status();
      const size_t es = o == 1 || o == 2 ? 1 : 4;
      std::vector<uint8_t> fast(M * N * es), ref(M * N * es);
      std::vector<int32_t> c(M * N);
      (*g)->Run(M, a.data(), au, fast.data(), c.data(), nullptr);
      QdqGemmReference(p, M, a.data(), au, ref.data());
      EXPECT_EQ(fast, ref) << "case " << t << ": M=" << M << " K=" << K << " N=" << N << " out=" << o;
    }
  }
  ResetKernelTier(KernelFamily::kInt8);
}

// ---------------------------------------------------------------- traces

TEST(QdqFusion, DebugLinesAndLazyColumnSums) {
  Case sym;
  RunResult r = RunCase(sym, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Count(r.debug, "qdq_group node=mm k=16 n=6 a=int8 w=int8 sx=tensor sw=tensor zp=none out=int8"), 1);
  EXPECT_EQ(Count(r.debug, "qdq_colsum"), 0) << "a symmetric graph never needs the column sums";
  Case asym = sym;
  asym.zp_x = {-40};
  r = RunCase(asym, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Count(r.debug, "qdq_colsum k=16 n=6"), 1);
  Case along_k = sym;
  along_k.w_axis = 0;
  along_k.s_w.assign(16, 0.01f);
  r = RunCase(along_k, true);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Count(r.debug, "qdq_refused why=scale_along_k count=1"), 1);
  EXPECT_EQ(Count(r.debug, "qdq_fused count=0"), 1);
  // SessionOptions::qdq_fusion = false (what ONEINFER_QDQ=0 sets): the pass does not run.
  r = RunCase(sym, false);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Count(r.debug, "qdq_fused"), 0);
  EXPECT_EQ(Count(r.debug, "qdq_disabled"), 1);
}

// ---------------------------------------------------------------- refusals

void ExpectRefused(const Case& c, const std::string& why) {
  SCOPED_TRACE(why);
  RunResult fused = RunCase(c, true), control = RunCase(c, false);
  ASSERT_TRUE(fused.status.ok()) << fused.status;
  ASSERT_TRUE(control.status.ok()) << control.status;
  EXPECT_EQ(fused.report.fused, 0);
  EXPECT_EQ(fused.report.refused.count(why), 1u);
  EXPECT_EQ(Count(fused.debug, absl::StrCat("qdq_refused why=", why, " count=1")), 1);
  ASSERT_EQ(fused.y.byte_size(), control.y.byte_size());
  EXPECT_EQ(std::memcmp(fused.y.raw_data(), control.y.raw_data(), fused.y.byte_size()), 0);
}

TEST(QdqFusion, RefusalsRunPerNodeWithTheControlsOutput) {
  Case w_k;
  w_k.w_axis = 0;
  w_k.s_w.assign(16, 0.0091f);
  ExpectRefused(w_k, "scale_along_k");
  Case x_k;
  x_k.x_axis = 1;
  x_k.s_x.assign(16, 0.0173f);
  ExpectRefused(x_k, "scale_along_k");
  Case x_k_neg = x_k;
  x_k_neg.x_axis = -1;
  ExpectRefused(x_k_neg, "scale_along_k");
  Case batch;
  batch.x_shape = {2, 4, 16};
  batch.x_axis = 0;
  batch.s_x = {0.01f, 0.02f};
  ExpectRefused(batch, "scale_along_batch");
  Case dynamic_w;
  dynamic_w.weight_is_input = true;
  ExpectRefused(dynamic_w, "weight_not_constant");
}

TEST(QdqFusion, BlockedWeightScalesAreRefused) {
  // A valid blocked DQ: scale [2, 6] for a [16, 6] weight with block_size 8 along axis 0.
  Case c;
  Built b = Build(c);
  Graph& g = b.model->graph;
  g.initializers["s_w"] = Tensor::FromVector(DType::kFloat32, {2, 6}, std::vector<float>(12, 0.0091f));
  for (Node& n : g.nodes) {
    if (n.name == "dq_w_q") {
      n.attrs["axis"] = IntAttr("axis", 0);
      n.attrs["block_size"] = IntAttr("block_size", 8);
    }
  }
  QdqFusionReport rep = AnalyzeQdqFusion(g, kQdqLimits);
  EXPECT_EQ(rep.fused, 0);
  EXPECT_EQ(rep.refused["blocked"], 1);
  SessionOptions opts;
  opts.num_threads = 1;
  auto s = SessionImpl::Create(std::move(b.model), opts);
  ASSERT_TRUE(s.ok()) << s.status();
  Tensor x = Tensor::Empty(DType::kInt8, {8, 16});
  std::memcpy(x.raw_data(), b.x.data(), b.x.size());
  auto out = (*s)->Run({{"x_q", x}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST(QdqFusion, FloatMatMulsAreCountedAsNotQdq) {
  Graph g;
  g.opsets[""] = 21;
  g.inputs.push_back(Declared("a", DType::kFloat32, {2, 3}));
  g.initializers["b"] = Tensor::FromVector(DType::kFloat32, {3, 2}, std::vector<float>(6, 1.f));
  Node mm;
  mm.op_type = "MatMul";
  mm.inputs = {"a", "b"};
  mm.outputs = {"y"};
  g.nodes.push_back(mm);
  g.outputs.push_back(ValueInfo{"y", {}});
  QdqFusionReport rep = AnalyzeQdqFusion(g, kQdqLimits);
  EXPECT_EQ(rep.fused, 0);
  EXPECT_EQ(rep.refused["not_qdq"], 1);
}

TEST(QdqFusion, SharedDequantizedActivationKeepsItsDqForOtherReaders) {
  Case c;
  Built b = Build(c);
  Graph& g = b.model->graph;
  // A second reader of x_dq (and a graph output): the DQ node stays for it.
  Node relu;
  relu.op_type = "Relu";
  relu.inputs = {"x_dq"};
  relu.outputs = {"r"};
  g.nodes.push_back(relu);
  g.outputs.push_back(ValueInfo{"r", {}});
  SessionOptions opts;
  opts.num_threads = 1;
  auto s = SessionImpl::Create(std::move(b.model), opts);
  ASSERT_TRUE(s.ok()) << s.status();
  Tensor x = Tensor::Empty(DType::kInt8, {8, 16});
  std::memcpy(x.raw_data(), b.x.data(), b.x.size());
  auto out = (*s)->Run({{"x_q", x}}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  RunResult plain = RunCase(c, true);
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(AsInts((*out)[0]), AsInts(plain.y));
  for (int64_t i = 0; i < 8 * 16; ++i) {
    EXPECT_EQ((*out)[1].data<float>()[i], std::max(0.f, static_cast<int8_t>(b.x[i]) * 0.0173f));
  }
}

// ---------------------------------------------------------------- bad input

void ExpectError(const Case& c, const std::string& message) {
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "per node");
    RunResult r = RunCase(c, fuse);
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find(message), std::string::npos) << r.status;
  }
}

TEST(QdqFusion, MalformedParametersAreClearErrors) {
  Case shapes;  // scale [8] along rows, zero point [6]
  shapes.s_x = {0.011f, 0.013f, 0.017f, 0.019f, 0.023f, 0.029f, 0.031f, 0.037f};
  {
    Built b = Build(shapes);
    Graph& g = b.model->graph;
    g.initializers["zp_x"] = Vec(DType::kInt8, {1, 2, 3, 4, 5, 6}, false);
    g.nodes[0].inputs.push_back("zp_x");
    EXPECT_EQ(AnalyzeQdqFusion(g, kQdqLimits).refused["invalid_params"], 1);
    SessionOptions opts;
    opts.num_threads = 1;
    auto s = SessionImpl::Create(std::move(b.model), opts);
    ASSERT_TRUE(s.ok()) << s.status();
    Tensor x = Tensor::Empty(DType::kInt8, {8, 16});
    auto out = (*s)->Run({{"x_q", x}}, {});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("zero point shape [6] does not match scale shape [8]"), std::string::npos)
        << out.status();
  }
  Case zero_scale;
  zero_scale.s_y = 0.f;
  zero_scale.s_y_vec = {0.f};
  ExpectError(zero_scale, "y_scale must be finite and non-zero");
  Case inf_scale;
  inf_scale.s_y_vec = {INFINITY};
  ExpectError(inf_scale, "y_scale must be finite and non-zero");
  Case nan_scale;
  nan_scale.s_y_vec = {NAN};
  ExpectError(nan_scale, "y_scale must be finite and non-zero");
  Case wrong_zp;  // uint8 zero point on int8 weights
  wrong_zp.zp_w = {3};
  {
    Built b = Build(wrong_zp);
    Graph& g = b.model->graph;
    g.initializers["zp_w"] = Vec(DType::kUInt8, {3}, true);
    EXPECT_EQ(AnalyzeQdqFusion(g, kQdqLimits).refused["invalid_params"], 1);
    SessionOptions opts;
    opts.num_threads = 1;
    auto s = SessionImpl::Create(std::move(b.model), opts);
    ASSERT_TRUE(s.ok()) << s.status();
    Tensor x = Tensor::Empty(DType::kInt8, {8, 16});
    auto out = (*s)->Run({{"x_q", x}}, {});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("x_zero_point type uint8 differs from x type int8"), std::string::npos)
        << out.status();
  }
  // The kernel's own parameter check, for callers that build a QdqGemm directly.
  QdqGemmParams p;
  p.K = 4;
  p.N = 2;
  int8_t w[8] = {};
  p.w = w;
  p.out = QdqOut::kInt8;
  p.s_y = {0.f};
  EXPECT_FALSE(QdqGemm::Create(p).ok());
  p.s_y = {1.f};
  p.zp_x = {1, 2};
  EXPECT_FALSE(QdqGemm::Create(p).ok());
  p.zp_x = {};
  p.zp_w = {200};
  EXPECT_FALSE(QdqGemm::Create(p).ok());
}

// ---------------------------------------------------------------- memory

TEST(QdqFusion, FusedIntermediatesStayBelow1MBPerNodeNeeds6MiB) {
  Case c;
  c.x_shape = {256, 1024};
  c.N = 1024;
  RunResult fused = RunCase(c, true), control = RunCase(c, false);
  ASSERT_TRUE(fused.status.ok() && control.status.ok());
  std::printf("[ qdq ] 256x1024x1024 peak intermediate bytes: fused %zu, per-node %zu\n", fused.peak, control.peak);
  EXPECT_LT(fused.peak, size_t{1000000});
  EXPECT_GE(control.peak, size_t{6} << 20);  // x_dq 1 MiB + w_dq 4 MiB + y 1 MiB of float32
}

// ---------------------------------------------------------------- NPU leg under emulation

struct DesignFiles {
  std::string xclbin, insts;
  DesignFiles() {
    xclbin = ::testing::TempDir() + "qdq_design.xclbin";
    insts = ::testing::TempDir() + "qdq_design.txt";
    std::ofstream(xclbin, std::ios::binary) << "xclbin2 (emulated: not parsed)";
    std::ofstream(insts) << "06030100\n00000105\n";
  }
  std::string Entry(int64_t m, int64_t k, int64_t n) const {
    return absl::StrCat(m, "x", k, "x", n, "=", xclbin, ":", insts);
  }
};

// SessionOptions::npu for a design table on the emulated device.
NpuOptions EmulatedNpu(const std::string& designs) {
  NpuOptions npu;
  npu.designs = designs;
  npu.emulate = true;
  return npu;
}

struct Shape2 {
  int64_t k, n;
};
const Shape2 kQwen3Shapes[] = {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {3072, 1024}};

class QdqFusionNpu : public ::testing::TestWithParam<Shape2> {};

TEST_P(QdqFusionNpu, DeviceAt32RowsHostBelow16FallbackWithoutDesign) {
  const auto [K, N] = GetParam();
  DesignFiles files;
  std::string table;
  for (const Shape2& s : kQwen3Shapes) absl::StrAppend(&table, files.Entry(64, s.k, s.n), ",");
  const NpuOptions device = EmulatedNpu(table);  // each session builds its own router from it
  // The host runs: no designs, so no router; the host GEMM directly.
  // Quark's form: per-tensor activations with a zero point, per-column weights, int8 out.
  Case c;
  c.x_shape = {32, K};
  c.N = N;
  c.zp_x = {-3};
  c.s_w.assign(static_cast<size_t>(N), 0.0f);
  for (int64_t n = 0; n < N; ++n) c.s_w[n] = 0.003f + 0.00001f * static_cast<float>(n % 97);
  c.s_y = AutoOutputScale(c);
  for (int64_t rows : {32, 5}) {
    SCOPED_TRACE(rows);
    c.x_shape = {rows, K};
    const RunResult on_host = RunCase(c, true);
    npu::TraceCapture capture;
    const RunResult on_device = RunCase(c, true, 1, device);
    ASSERT_TRUE(on_host.status.ok() && on_device.status.ok());
    EXPECT_EQ(AsInts(on_device.y), AsInts(on_host.y)) << "device and host accumulators differ";
    if (rows == 32) {
      EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
      EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 0);
      EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_device m=32 k=", K, " n=", N)), 1);
      Built b = Build(c);
      std::vector<int8_t> ref(static_cast<size_t>(rows * N));
      QdqGemmReference(ParamsOf(c, b), rows, b.x.data(), false, ref.data());
      EXPECT_EQ(std::memcmp(on_device.y.raw_data(), ref.data(), ref.size()), 0);
    } else {
      EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_host_rows m=5 k=", K, " n=", N, " min=16")), 1);
      EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
    }
  }
  // A shape without a design: the host, with the fallback line.
  c.x_shape = {32, K};
  c.N = N + 32;
  c.s_w = {0.004f};
  npu::TraceCapture capture;
  RunResult r = RunCase(c, true, 1, device);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_fallback m=32 k=", K, " n=", N + 32)), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
}

INSTANTIATE_TEST_SUITE_P(Qwen3, QdqFusionNpu, ::testing::ValuesIn(kQwen3Shapes),
                         [](const ::testing::TestParamInfo<Shape2>& info) {
                           return absl::StrCat("k", info.param.k, "_n", info.param.n);
                         });

// The options' wiring, two sessions side by side: one built with an emulated design table runs
// the fused group on its own router's device, one without designs has no router; both loaded
// before either runs, with the same outputs, the reference's.
TEST(QdqFusionNpuOptions, EachSessionRoutesAsItsOptionsSay) {
  DesignFiles files;
  Case c;
  c.x_shape = {32, 1024};
  c.N = 1024;
  c.zp_x = {-3};
  auto load = [&](const NpuOptions& npu) {
    SessionOptions opts;
    opts.num_threads = 1;
    opts.npu = npu;
    return SessionImpl::Create(std::move(Build(c).model), opts);
  };
  auto routed = load(EmulatedNpu(files.Entry(64, 1024, 1024)));
  auto host = load({});
  ASSERT_TRUE(routed.ok()) << routed.status();
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_NE((*routed)->npu_router(), nullptr);
  EXPECT_EQ((*host)->npu_router(), nullptr);
  const Built b = Build(c);
  Tensor x = Tensor::Empty(DType::kInt8, c.x_shape);
  std::memcpy(x.raw_data(), b.x.data(), b.x.size());
  std::vector<int8_t> ref(32 * 1024);
  QdqGemmReference(ParamsOf(c, b), 32, b.x.data(), false, ref.data());
  npu::TraceCapture capture;
  for (int round = 0; round < 2; ++round) {
    auto on_device = (*routed)->Run({{"x_q", x}}, {});
    auto on_host = (*host)->Run({{"x_q", x}}, {});
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    ASSERT_TRUE(on_host.ok()) << on_host.status();
    EXPECT_EQ(std::memcmp((*on_device)[0].raw_data(), ref.data(), ref.size()), 0);
    EXPECT_EQ(std::memcmp((*on_host)[0].raw_data(), ref.data(), ref.size()), 0);
  }
  EXPECT_EQ(capture.Count("npu_qdq_device m=32 k=1024 n=1024 design=64x1024x1024"), 2);
  EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 0);
  const npu::RouterCounters counters = (*routed)->npu_router()->counters();
  EXPECT_EQ(counters.device, 2);
  EXPECT_EQ(counters.fallback + counters.host_rows, 0);
}

// SessionOptions::qdq_trace is one session's switch, carried to the fusion pass (qdq_group,
// qdq_fused) and to the fused kernel (qdq_colsum): of two sessions of one model, only the one that
// asked writes to stderr; the sink gets both.
TEST(QdqFusionTrace, StderrLinesComeFromTheSessionThatAsked) {
  Case c;
  c.x_shape = {4, 64};
  c.N = 16;
  c.zp_x = {-3};  // the epilogue reads the weight column sums: one qdq_colsum line per kernel
  auto load = [&](bool trace) {
    SessionOptions opts;
    opts.num_threads = 1;
    opts.qdq_trace = trace;
    return SessionImpl::Create(std::move(Build(c).model), opts);
  };
  const Built b = Build(c);
  Tensor x = Tensor::Empty(DType::kInt8, c.x_shape);
  std::memcpy(x.raw_data(), b.x.data(), b.x.size());
  std::vector<std::string> sunk;
  QdqDebugSink prev = SetQdqDebugSink([&](std::string_view l) { sunk.emplace_back(l); });
  ::testing::internal::CaptureStderr();
  auto traced = load(true);
  auto quiet = load(false);
  const bool loaded = traced.ok() && quiet.ok();
  const bool ran = loaded && (*traced)->Run({{"x_q", x}}, {}).ok() && (*quiet)->Run({{"x_q", x}}, {}).ok();
  const std::string err = ::testing::internal::GetCapturedStderr();
  SetQdqDebugSink(prev);
  ASSERT_TRUE(ran);
  auto count = [](const std::vector<std::string>& lines, std::string_view prefix) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  std::vector<std::string> err_lines;
  for (std::string_view rest = err; !rest.empty();) {
    const size_t nl = std::min(rest.find('\n'), rest.size());
    err_lines.emplace_back(rest.substr(0, nl));
    rest.remove_prefix(std::min(rest.size(), nl + 1));
  }
  for (std::string_view prefix : {"qdq_group node=", "qdq_fused count=1", "qdq_colsum k=64 n=16"}) {
    EXPECT_EQ(count(err_lines, prefix), 1) << prefix << "\n" << err;
    EXPECT_EQ(count(sunk, prefix), 2) << prefix;
  }
  EXPECT_EQ(err_lines.size(), 3u) << err;
}

// ---------------------------------------------------------------- QLinearMatMul, MatMulInteger

// One node whose B is an initializer (fused kernel) or a graph input (reference kernel).
absl::StatusOr<std::vector<Tensor>> RunOneNode(const std::string& op, const std::vector<Tensor>& ins, size_t b_index,
                                               bool b_constant, const NpuOptions& npu = {}) {
  auto model = std::make_unique<Model>();
  Graph& g = model->graph;
  g.opsets[""] = 21;
  Node n;
  n.op_type = op;
  n.name = "n";
  std::vector<Feed> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) {
      n.inputs.push_back("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    n.inputs.push_back(name);
    if (i == 0 || (i == b_index && !b_constant)) {
      g.inputs.push_back(Declared(name, ins[i].dtype(), ins[i].shape()));
      feeds.emplace_back(name, ins[i]);
    } else {
      g.initializers[name] = ins[i];
    }
  }
  n.outputs = {"y"};
  g.nodes.push_back(n);
  g.outputs.push_back(ValueInfo{"y", {}});
  SessionOptions opts;
  opts.num_threads = 1;
  opts.npu = npu;
  auto s = SessionImpl::Create(std::move(model), opts);
  if (!s.ok()) return s.status();
  return (*s)->Run(feeds, {});
}

Tensor Bytes(DType t, Shape s, uint32_t seed) {
  Tensor x = Tensor::Empty(t, s);
  auto v = RandomBytes(static_cast<size_t>(x.num_elements()), seed, t == DType::kUInt8);
  std::memcpy(x.raw_data(), v.data(), v.size());
  return x;
}

TEST(QdqFusion, QLinearMatMulWithConstantBMatchesTheReference) {
  const int64_t M = 24, K = 80, N = 40;
  struct Q {
    DType a, b, y;
    bool per_axis;
  };
  // A router with a design for another shape: every int8 x int8 call is routed and traced.
  DesignFiles files;
  const NpuOptions other_shape = EmulatedNpu(files.Entry(64, 64, 32));
  for (Q q : {Q{DType::kInt8, DType::kInt8, DType::kInt8, false}, Q{DType::kUInt8, DType::kInt8, DType::kUInt8, false},
              Q{DType::kInt8, DType::kInt8, DType::kInt8, true}, Q{DType::kUInt8, DType::kUInt8, DType::kInt8, true}}) {
    SCOPED_TRACE(absl::StrCat(DTypeName(q.a), " ", DTypeName(q.b), " per_axis=", q.per_axis));
    std::vector<float> sa(q.per_axis ? M : 1), sy(q.per_axis ? M : 1), sb(q.per_axis ? N : 1);
    for (size_t i = 0; i < sa.size(); ++i) sa[i] = 0.02f + 0.001f * i;
    for (size_t i = 0; i < sb.size(); ++i) sb[i] = 0.01f + 0.0003f * i;
    for (size_t i = 0; i < sy.size(); ++i) sy[i] = 2.1f + 0.05f * i;
    auto zps = [&](DType t, size_t n, int v) {
      std::vector<int32_t> z(n);
      for (size_t i = 0; i < n; ++i) z[i] = (t == DType::kUInt8 ? 128 : 0) + v + static_cast<int>(i % 5);
      return Vec(t, z, n == 1);
    };
    std::vector<Tensor> ins = {Bytes(q.a, {M, K}, 1), Scales(sa),      zps(q.a, sa.size(), -9),
                               Bytes(q.b, {K, N}, 2), Scales(sb),      zps(q.b, sb.size(), 4),
                               Scales(sy),            zps(q.y, sy.size(), -3)};
    npu::TraceCapture capture;
    auto fast = RunOneNode("QLinearMatMul", ins, 3, true, other_shape);
    auto ref = RunOneNode("QLinearMatMul", ins, 3, false, other_shape);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(AsInts((*fast)[0]), AsInts((*ref)[0]));
    if (q.a == DType::kInt8 && q.b == DType::kInt8) {
      EXPECT_EQ(capture.Count("npu_qdq_fallback m=24 k=80 n=40"), 1) << "the fused kernel did not run";
    }
  }
  // A zero y_scale: the fused binding declines, the reference reports it.
  std::vector<Tensor> bad = {Bytes(DType::kInt8, {M, K}, 1), Scales({0.1f}), Tensor(), Bytes(DType::kInt8, {K, N}, 2),
                             Scales({0.1f}), Tensor(), Scales({0.f}), Tensor()};
  auto r = RunOneNode("QLinearMatMul", bad, 3, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("y_scale must be finite and non-zero"), std::string::npos) << r.status();
}

TEST(QdqFusion, MatMulIntegerWithConstantBMatchesTheReference) {
  const int64_t M = 24, K = 80, N = 40;
  DesignFiles files;
  const NpuOptions other_shape = EmulatedNpu(files.Entry(64, 64, 32));
  for (DType at : {DType::kInt8, DType::kUInt8}) {
    for (DType bt : {DType::kInt8, DType::kUInt8}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(at), " x ", DTypeName(bt)));
      std::vector<int32_t> zb(N);
      for (int64_t i = 0; i < N; ++i) zb[i] = (bt == DType::kUInt8 ? 128 : 0) + static_cast<int>(i % 9) - 4;
      std::vector<Tensor> ins = {Bytes(at, {2, M, K}, 1), Bytes(bt, {K, N}, 2), Vec(at, {at == DType::kUInt8 ? 131 : -7}, true),
                                 Vec(bt, zb, false)};
      npu::TraceCapture capture;
      auto fast = RunOneNode("MatMulInteger", ins, 1, true, other_shape);
      auto ref = RunOneNode("MatMulInteger", ins, 1, false, other_shape);
      ASSERT_TRUE(fast.ok()) << fast.status();
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_EQ((*fast)[0].shape(), (Shape{2, M, N}));
      EXPECT_EQ(AsInts((*fast)[0]), AsInts((*ref)[0]));
      if (at == DType::kInt8 && bt == DType::kInt8) {
        EXPECT_EQ(capture.Count("npu_qdq_fallback m=48 k=80 n=40"), 1) << "the fused kernel did not run";
      }
    }
  }
}

TEST(QdqFusion, DynamicQuantizeLinearMatMulIntegerOnThePackedGemm) {
  const int64_t M = 12, K = 64, N = 20;
  // ONNX Runtime's dynamic-quant pattern: x -> DynamicQuantizeLinear -> MatMulInteger(., B, a_zp, b_zp).
  for (bool b_constant : {true, false}) {
    auto model = std::make_unique<Model>();
    Graph& g = model->graph;
    g.opsets[""] = 21;
    g.inputs.push_back(Declared("x", DType::kFloat32, {M, K}));
    Tensor b = Bytes(DType::kInt8, {K, N}, 3);
    Tensor bzp = Vec(DType::kInt8, std::vector<int32_t>(N, 0), false);
    for (int64_t i = 0; i < N; ++i) bzp.data<int8_t>()[i] = static_cast<int8_t>(i % 7 - 3);
    if (b_constant) g.initializers["b"] = b;
    else g.inputs.push_back(Declared("b", DType::kInt8, {K, N}));
    g.initializers["b_zp"] = bzp;
    Node dql;
    dql.op_type = "DynamicQuantizeLinear";
    dql.inputs = {"x"};
    dql.outputs = {"a", "a_scale", "a_zp"};
    Node mmi;
    mmi.op_type = "MatMulInteger";
    mmi.inputs = {"a", "b", "a_zp", "b_zp"};
    mmi.outputs = {"y"};
    g.nodes = {dql, mmi};
    g.outputs.push_back(ValueInfo{"y", {}});
    SessionOptions opts;
    opts.num_threads = 1;
    auto s = SessionImpl::Create(std::move(model), opts);
    ASSERT_TRUE(s.ok()) << s.status();
    std::vector<float> xv(M * K);
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.3f, 1.f);
    for (float& v : xv) v = d(rng);
    std::vector<Feed> feeds{{"x", Tensor::FromVector(DType::kFloat32, {M, K}, xv)}};
    if (!b_constant) feeds.emplace_back("b", b);
    auto out = (*s)->Run(feeds, {});
    ASSERT_TRUE(out.ok()) << out.status();
    static std::vector<int32_t> first;
    if (b_constant) first = AsInts((*out)[0]);
    else EXPECT_EQ(AsInts((*out)[0]), first) << "packed MatMulInteger differs from the reference";
  }
}

// The per-node QuantizeLinear / DequantizeLinear fast paths (float32 <-> int8/uint8) keep the
// reference's arithmetic: ties to even, zero point after rounding, NaN -> 0, saturation.
TEST(QdqFusion, PerNodeQuantizeAndDequantizeFastPathsKeepTheFormula) {
  const float s = 0.25f;
  std::vector<float> x = {0.125f, 0.375f, -0.125f, -0.375f, 1.0f, 31.875f, -32.125f, 1e9f, -1e9f,
                          NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.1f, -7.77f};
  for (int i = 0; i < 48; ++i) x.push_back(static_cast<float>(i - 24) * 0.0625f);
  // Ties (x / s = k + 0.5) over the whole int8 / uint8 range and past it, and a length that
  // leaves a tail after the four-wide loop.
  for (int i = 0; i < 1203; ++i) x.push_back(static_cast<float>(i - 601) * 0.125f);
  const int64_t n = static_cast<int64_t>(x.size());
  for (DType t : {DType::kInt8, DType::kUInt8}) {
    SCOPED_TRACE(DTypeName(t));
    const int32_t zp = t == DType::kUInt8 ? 128 : -3, lo = t == DType::kUInt8 ? 0 : -128, hi = t == DType::kUInt8 ? 255 : 127;
    auto model = std::make_unique<Model>();
    Graph& g = model->graph;
    g.opsets[""] = 21;
    g.inputs.push_back(Declared("x", DType::kFloat32, {n}));
    g.initializers["s"] = Scales({s});
    g.initializers["z"] = Vec(t, {zp}, true);
    Node q;
    q.op_type = "QuantizeLinear";
    q.inputs = {"x", "s", "z"};
    q.outputs = {"q"};
    Node dq;
    dq.op_type = "DequantizeLinear";
    dq.inputs = {"q", "s", "z"};
    dq.outputs = {"d"};
    g.nodes = {q, dq};
    g.outputs = {ValueInfo{"q", {}}, ValueInfo{"d", {}}};
    SessionOptions opts;
    opts.num_threads = 2;
    auto sess = SessionImpl::Create(std::move(model), opts);
    ASSERT_TRUE(sess.ok()) << sess.status();
    auto out = (*sess)->Run({{"x", Tensor::FromVector(DType::kFloat32, {n}, x)}}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const auto qv = AsInts((*out)[0]);
    for (int64_t i = 0; i < n; ++i) {
      const float r = std::nearbyint(x[i] / s);
      const int32_t want = std::isnan(r) ? std::clamp(0, lo, hi)
                                         : static_cast<int32_t>(std::clamp(static_cast<double>(r) + zp, double(lo), double(hi)));
      EXPECT_EQ(qv[i], want) << "x=" << x[i];
      EXPECT_EQ((*out)[1].data<float>()[i], (static_cast<float>(want) - static_cast<float>(zp)) * s);
    }
  }
}

// ---------------------------------------------------------------- oneinfer inspect

TEST(QdqFusion, InspectReportsFusedGroupsAndRefusals) {
  namespace tu = oneinfer::testing;
  onnx::ModelProto m = tu::MakeModel(21);
  auto* g = m.mutable_graph();
  *g->add_input() = tu::TensorInfo("x_q", onnx::TensorProto::INT8, {-1, 4});
  *g->add_output() = tu::TensorInfo("y_q", onnx::TensorProto::INT8, {-1, 3});
  *g->add_output() = tu::TensorInfo("z", onnx::TensorProto::FLOAT, {-1, 3});
  auto int8 = [](const std::string& name, const std::vector<int64_t>& dims, const std::vector<int>& v) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT8);
    for (int64_t d : dims) t.add_dims(d);
    for (int x : v) t.add_int32_data(x);
    return t;
  };
  *g->add_initializer() = int8("w_q", {4, 3}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  *g->add_initializer() = tu::FloatTensor("s", {}, {0.5f});
  *g->add_initializer() = tu::FloatTensor("s_k", {4}, {0.5f, 0.25f, 0.5f, 0.25f});
  *g->add_initializer() = int8("zp", {}, {0});
  *g->add_node() = tu::MakeNode("DequantizeLinear", {"x_q", "s", "zp"}, {"x_dq"});
  *g->add_node() = tu::MakeNode("DequantizeLinear", {"w_q", "s", "zp"}, {"w_dq"});
  *g->add_node() = tu::MakeNode("MatMul", {"x_dq", "w_dq"}, {"y"});
  *g->add_node() = tu::MakeNode("QuantizeLinear", {"y", "s", "zp"}, {"y_q"});
  // A weight scale along K: refused.
  onnx::NodeProto dqk = tu::MakeNode("DequantizeLinear", {"w_q", "s_k"}, {"w_dq_k"});
  auto* axis = dqk.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  *g->add_node() = dqk;
  *g->add_node() = tu::MakeNode("MatMul", {"x_dq", "w_dq_k"}, {"z"});
  const auto dir = tu::TempDir("qdq_inspect");
  tu::WriteModel(m, dir / "qdq.onnx");
  const tu::CliResult r = tu::RunCli("inspect " + (dir / "qdq.onnx").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("QDQ fusion: 1 fused groups"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x1  a=int8 w=int8 sx=tensor sw=tensor zp=none out=int8 sy=tensor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not fused: why=scale_along_k count=1"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------- selector and rewrite

TEST(QdqFusion, SelectorReadsOnlyAndTheRewriteDoesWhatItSelected) {
  Case c;
  Built b = Build(c);
  Graph& g = b.model->graph;
  ASSERT_TRUE(SortTopologically(g, {}).ok());
  const size_t nodes = g.nodes.size();
  UseDefIndex uses(g);
  const QdqSelection sel = SelectQdqGroups(uses, kQdqLimits);
  ASSERT_EQ(sel.groups.size(), 1u);
  EXPECT_EQ(sel.report.fused, 1);
  EXPECT_EQ(g.nodes.size(), nodes);  // the selector changed nothing
  EXPECT_EQ(g.nodes[sel.groups[0].matmul].op_type, "MatMul");
  ASSERT_GE(sel.groups[0].quantize, 0);  // the output QuantizeLinear is folded
  EXPECT_EQ(sel.groups[0].out, DType::kInt8);
  EXPECT_EQ(RewriteQdqGroups(g, uses, sel), 1);
  EXPECT_TRUE(uses == UseDefIndex(g));  // the rewrite kept the shared index up to date
  int fused = 0, quantize = 0;
  for (const Node& n : g.nodes) {
    fused += n.op_type == internal_ops::QdqMatMul::kName && n.domain == internal_ops::kDomain;
    quantize += n.op_type == "QuantizeLinear";
  }
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(quantize, 0);
  EXPECT_EQ(g.opsets.at(internal_ops::kDomain), internal_ops::kOpset);
}

TEST(QdqFusion, TheCallersKernelLimitsDecideTheLongestReduction) {
  Case c;  // K = 16
  Built b = Build(c);
  const Graph& g = b.model->graph;
  EXPECT_EQ(AnalyzeQdqFusion(g, QdqKernelLimits{16}).fused, 1);
  const QdqFusionReport too_long = AnalyzeQdqFusion(g, QdqKernelLimits{15});
  EXPECT_EQ(too_long.fused, 0);
  EXPECT_EQ(too_long.refused.at("weight_shape"), 1);
}

TEST(QdqFusion, AnAiOnnxDomainMatMulIsTheDefaultDomain) {
  Case c;
  Built b = Build(c);
  for (Node& n : b.model->graph.nodes) {
    if (n.op_type == "MatMul" || n.op_type == "DequantizeLinear") n.domain = "ai.onnx";
  }
  EXPECT_EQ(AnalyzeQdqFusion(b.model->graph, kQdqLimits).fused, 1);
}

}  // namespace
}  // namespace oneinfer
