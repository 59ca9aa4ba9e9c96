// The pass framework: the shared use-def index and its one meaning of "constant", the session's
// pass list run with the index checked after every pass, and the options that switch passes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <set>
#include <vector>

#include "base/half.h"
#include "graph/internal_ops.h"
#include "graph/onnx_loader.h"
#include "graph/passes/passes.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using testing::Int64Tensor;

std::unique_ptr<Model> Load(const onnx::ModelProto& m) {
  auto model = ModelFromProto(m, ".");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

SessionOptions OneThread() {
  SessionOptions o;
  o.num_threads = 1;
  return o;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

// ---------------------------------------------------------------- the index

TEST(UseDefIndex, ProducersReadersAndTheOneMeaningOfConstant) {
  Graph g;
  g.inputs.push_back(ValueInfo{"x", {}});
  g.inputs.push_back(ValueInfo{"fed", {}});  // an initializer a feed can replace
  g.initializers["w"] = Tensor::FromVector(DType::kFloat32, {1}, std::vector<float>{2.f});
  g.initializers["fed"] = Tensor::FromVector(DType::kFloat32, {1}, std::vector<float>{3.f});
  Node c;
  c.op_type = "Constant";
  c.outputs = {"k"};
  Attribute value;
  value.name = "value";
  value.type = Attribute::Type::kTensor;
  value.t = Tensor::FromVector(DType::kFloat32, {1}, std::vector<float>{4.f});
  c.attrs["value"] = value;
  Node add;
  add.op_type = "Add";
  add.inputs = {"x", "w"};
  add.outputs = {"a"};
  Node mul;
  mul.op_type = "Mul";
  mul.inputs = {"a", "a", "fed", "k"};
  mul.outputs = {"y"};
  mul.implicit_inputs = {"x"};
  g.nodes = {c, add, mul};
  g.outputs.push_back(ValueInfo{"y", {}});

  UseDefIndex uses(g);
  EXPECT_EQ(uses.ProducerIndex("a"), 1);
  EXPECT_EQ(uses.Producer("x"), nullptr);
  EXPECT_EQ(uses.Readers("a"), (std::vector<UseDefIndex::Use>{{2, 0}, {2, 1}}));
  EXPECT_EQ(uses.Readers("x"), (std::vector<UseDefIndex::Use>{{1, 0}, {2, UseDefIndex::kImplicit}}));
  EXPECT_TRUE(uses.IsGraphOutput("y"));
  EXPECT_TRUE(uses.Readers("y").empty());
  ASSERT_NE(uses.Const("w"), nullptr);
  EXPECT_EQ(uses.Const("w")->data<float>()[0], 2.f);
  ASSERT_NE(uses.Const("k"), nullptr);  // a Constant node's output
  EXPECT_EQ(uses.Const("k")->data<float>()[0], 4.f);
  EXPECT_TRUE(uses.IsOverridable("fed"));
  EXPECT_EQ(uses.Const("fed"), nullptr);  // overridable: not a constant
  EXPECT_EQ(uses.Const("x"), nullptr);
  EXPECT_EQ(uses.Const("a"), nullptr);
  EXPECT_EQ(uses.Const(""), nullptr);
}

// ---------------------------------------------------------------- RMSNorm and its epsilon

// y = x / sqrt(mean(x^2, last axis) + eps) * w, as opset-21 graphs spell it.
onnx::ModelProto RMSNormModel(bool eps_is_input) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {2, 4});
  if (eps_is_input) *g->add_input() = testing::TensorInfo("eps", onnx::TensorProto::FLOAT, {});
  *g->add_initializer() = testing::FloatTensor("eps", {}, {1e-5f});
  *g->add_initializer() = testing::FloatTensor("w", {4}, {1.f, 2.f, 3.f, 4.f});
  *g->add_initializer() = Int64Tensor("axes", {1}, {-1});
  *g->add_node() = testing::MakeNode("Mul", {"x", "x"}, {"sq"});
  *g->add_node() = testing::MakeNode("ReduceMean", {"sq", "axes"}, {"mean"});
  *g->add_node() = testing::MakeNode("Add", {"mean", "eps"}, {"var"});
  *g->add_node() = testing::MakeNode("Sqrt", {"var"}, {"den"});
  *g->add_node() = testing::MakeNode("Div", {"x", "den"}, {"xn"});
  *g->add_node() = testing::MakeNode("Mul", {"xn", "w"}, {"y"}, "norm");
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 4});
  return m;
}

const std::vector<float> kNormX = {0.5f, -1.f, 2.f, 0.25f, 3.f, 0.f, -0.5f, 1.5f};

std::vector<float> RMSNormReference(float eps) {
  const float w[4] = {1.f, 2.f, 3.f, 4.f};
  std::vector<float> y(8);
  for (int r = 0; r < 2; ++r) {
    float ss = 0;
    for (int d = 0; d < 4; ++d) ss += kNormX[r * 4 + d] * kNormX[r * 4 + d];
    const float den = std::sqrt(ss / 4 + eps);
    for (int d = 0; d < 4; ++d) y[r * 4 + d] = kNormX[r * 4 + d] / den * w[d];
  }
  return y;
}

TEST(RMSNormFusion, AConstantEpsilonBecomesTheAttribute) {
  auto model = Load(RMSNormModel(/*eps_is_input=*/false));
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph;
  ASSERT_TRUE(SortTopologically(g, {}).ok());
  UseDefIndex uses(g);
  ASSERT_EQ(FuseRMSNorm(g, uses), 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& norm = g.nodes[0];
  EXPECT_EQ(norm.op_type, internal_ops::RMSNorm::kName);
  EXPECT_EQ(norm.domain, internal_ops::kDomain);
  EXPECT_EQ(norm.GetFloat(internal_ops::RMSNorm::kEpsilon, 0.f), 1e-5f);
  EXPECT_TRUE(uses == UseDefIndex(g));
}

TEST(RMSNormFusion, AnEpsilonAFeedCanReplaceStaysUnfusedAndIsReadAtRunTime) {
  auto model = Load(RMSNormModel(/*eps_is_input=*/true));
  ASSERT_NE(model, nullptr);
  Graph& g = model->graph;
  ASSERT_TRUE(SortTopologically(g, {}).ok());
  UseDefIndex uses(g);
  EXPECT_EQ(FuseRMSNorm(g, uses), 0);
  EXPECT_EQ(CountOps(g, "Sqrt"), 1);

  const std::string bytes = RMSNormModel(true).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor x = Tensor::FromVector(DType::kFloat32, {2, 4}, kNormX);
  for (float eps : {0.5f, 1e-5f}) {
    SCOPED_TRACE(eps);
    std::vector<Feed> feeds{{"x", x}};
    if (eps == 0.5f) feeds.emplace_back("eps", Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{eps}));
    auto y = (*s)->Run(feeds);  // without the feed, the initializer's 1e-5
    ASSERT_TRUE(y.ok()) << y.status();
    const std::vector<float> expect = RMSNormReference(eps);
    for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR((*y)[0].data<float>()[i], expect[i], 1e-5f) << i;
  }
}

// torch's export of an RMSNorm: x * rsqrt(mean(x^2) + eps) * w, as Pow(x, 2) -> ReduceMean ->
// Add -> Sqrt -> Div(1, .) (or Reciprocal) -> Mul(x, .) -> Mul(w, .); for a float16 model the
// norm runs on Cast(x, float32) and its result is Cast back before the float16 Mul by w.
// `exposed` names an intermediate that is also a graph output (the chain must then stay).
onnx::ModelProto TorchNormModel(bool half, bool reciprocal_op, const std::string& exposed) {
  const int elem = half ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT;
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", elem, {3, 128});
  *g->add_initializer() = testing::FloatTensor("two", {}, {2.f});
  *g->add_initializer() = testing::FloatTensor("one", {}, {1.f});
  *g->add_initializer() = testing::FloatTensor("eps", {}, {1e-6f});
  *g->add_initializer() = Int64Tensor("axes", {1}, {-1});
  onnx::TensorProto w = testing::FloatTensor("w", {128}, std::vector<float>(128, 0.f));
  for (int i = 0; i < 128; ++i) w.set_float_data(i, 1.f + 0.37f * std::sin(static_cast<float>(i)));
  if (half) {  // the same weights as float16 bit patterns
    w.set_data_type(onnx::TensorProto::FLOAT16);
    std::vector<float> f(w.float_data().begin(), w.float_data().end());
    w.clear_float_data();
    for (float v : f) w.add_int32_data(F32ToF16(v));
  }
  *g->add_initializer() = w;
  auto cast = [](const std::string& in, const std::string& out, int to) {
    onnx::NodeProto c = testing::MakeNode("Cast", {in}, {out});
    auto* a = c.add_attribute();
    a->set_name("to");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(to);
    return c;
  };
  const std::string x = half ? "x32" : "x";
  if (half) *g->add_node() = cast("x", "x32", onnx::TensorProto::FLOAT);
  *g->add_node() = testing::MakeNode("Pow", {x, "two"}, {"sq"});
  *g->add_node() = testing::MakeNode("ReduceMean", {"sq", "axes"}, {"var"});
  *g->add_node() = testing::MakeNode("Add", {"var", "eps"}, {"ve"});
  *g->add_node() = testing::MakeNode("Sqrt", {"ve"}, {"den"});
  *g->add_node() = reciprocal_op ? testing::MakeNode("Reciprocal", {"den"}, {"inv"})
                                 : testing::MakeNode("Div", {"one", "den"}, {"inv"});
  *g->add_node() = testing::MakeNode("Mul", {x, "inv"}, {"xn"});
  if (half) *g->add_node() = cast("xn", "xn16", onnx::TensorProto::FLOAT16);
  *g->add_node() = testing::MakeNode("Mul", {"w", half ? "xn16" : "xn"}, {"y"}, "norm");
  *g->add_output() = testing::TensorInfo("y", elem, {3, 128});
  if (!exposed.empty()) *g->add_output() = testing::TensorInfo(exposed, onnx::TensorProto::FLOAT, {3, exposed == "var" ? 1 : 128});
  return m;
}

// `m` as a session on `feeds`: each requested output's bits (float32, or float16's patterns).
std::vector<std::vector<uint32_t>> RunBits(const onnx::ModelProto& m, const std::vector<Feed>& feeds,
                                           const std::vector<std::string>& outputs, const SessionOptions& options) {
  const std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), options);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto out = (*s)->Run(feeds, outputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  std::vector<std::vector<uint32_t>> bits;
  for (const Tensor& y : *out) {
    bits.emplace_back();
    for (int64_t i = 0; i < y.num_elements(); ++i) {
      bits.back().push_back(y.dtype() == DType::kFloat16 ? y.data<uint16_t>()[i] : std::bit_cast<uint32_t>(y.data<float>()[i]));
    }
  }
  return bits;
}

// Runs `m` through the session's passes (how many rewrites `pass` made into *fused), then as a
// session on `feeds`, and returns output "y"'s bits: the fused and unfused forms of a model are
// compared bit for bit.
std::vector<uint32_t> FusedRunBits(const onnx::ModelProto& m, const char* pass, const std::vector<Feed>& feeds,
                                   const SessionOptions& options, int* fused) {
  auto model = Load(m);
  PassReport report;
  PassContext ctx;
  ctx.report = &report;
  EXPECT_TRUE(RunSessionPasses(model->graph, ctx).ok());
  *fused = report.counts[pass];
  std::vector<std::vector<uint32_t>> bits = RunBits(m, feeds, {"y"}, options);
  return bits.empty() ? std::vector<uint32_t>{} : bits[0];
}

TEST(RMSNormFusion, TorchsRsqrtFormAndItsFloat16CastsRunFusedToTheUnfusedValues) {
  // Rows: mixed magnitudes, all zeros (eps alone), large values (float16's top range).
  std::vector<float> xs(3 * 128);
  for (int i = 0; i < 128; ++i) {
    xs[i] = 0.8f * std::sin(0.7f * i) - 0.1f;
    xs[128 + i] = 0.f;
    xs[256 + i] = 900.f * std::cos(1.3f * i);
  }
  for (bool half : {false, true}) {
    for (bool reciprocal_op : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (half ? "float16" : "float32") << (reciprocal_op ? " Reciprocal" : " Div(1, .)"));
      auto run = [&](const std::string& exposed, int* fused) -> std::vector<uint32_t> {
        Tensor x = Tensor::Empty(half ? DType::kFloat16 : DType::kFloat32, {3, 128});
        for (size_t i = 0; i < xs.size(); ++i) {
          if (half) x.data<uint16_t>()[i] = F32ToF16(xs[i]);
          else x.data<float>()[i] = xs[i];
        }
        return FusedRunBits(TorchNormModel(half, reciprocal_op, exposed), "rms_norm_fusion", {{"x", x}}, OneThread(), fused);
      };
      int fused = 0, unfused = 0, kept = 0;
      const std::vector<uint32_t> want = run("var", &unfused);  // a graph output inside: no fusion
      const std::vector<uint32_t> got = run("", &fused);
      EXPECT_EQ(unfused, 0);
      EXPECT_EQ(fused, 1);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
      // The float32 copy of x read outside the chain: the float16 form must keep its Cast (and so
      // stays unfused); the float32 form fuses around the exposed x.
      const std::vector<uint32_t> shared = run(half ? "x32" : "xn", &kept);
      EXPECT_EQ(kept, 0);
      EXPECT_EQ(shared, want);
    }
  }
}

// Attention as graphs write it: Transpose(k) -> MatMul(q, .) -> Mul(scale) -> Add(mask) ->
// Softmax(-1) -> MatMul(., v); k and v broadcast over q's batch. `exposed` names an intermediate
// also made a graph output (the chain then stays unfused); `mask_first` writes Add(mask, scores).
onnx::ModelProto AttentionModel(const std::string& exposed, bool with_mask, bool mask_first, bool with_scale) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("q", onnx::TensorProto::FLOAT, {2, 3, 4, 8});
  *g->add_input() = testing::TensorInfo("k", onnx::TensorProto::FLOAT, {1, 3, 5, 8});
  *g->add_input() = testing::TensorInfo("v", onnx::TensorProto::FLOAT, {1, 3, 5, 6});
  *g->add_input() = testing::TensorInfo("mask", onnx::TensorProto::FLOAT, {4, 5});
  *g->add_initializer() = testing::FloatTensor("scale", {}, {0.35355339f});
  onnx::NodeProto t = testing::MakeNode("Transpose", {"k"}, {"kt"});
  auto* perm = t.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 3, 2}) perm->add_ints(p);
  *g->add_node() = t;
  *g->add_node() = testing::MakeNode("MatMul", {"q", "kt"}, {"qk"});
  std::string s = "qk";
  if (with_scale) {
    *g->add_node() = testing::MakeNode("Mul", {s, "scale"}, {"scaled"});
    s = "scaled";
  }
  if (with_mask) {
    *g->add_node() = testing::MakeNode("Add", mask_first ? std::vector<std::string>{"mask", s} : std::vector<std::string>{s, "mask"}, {"masked"});
    s = "masked";
  }
  onnx::NodeProto sm = testing::MakeNode("Softmax", {s}, {"probs"});
  auto* axis = sm.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  *g->add_node() = sm;
  *g->add_node() = testing::MakeNode("MatMul", {"probs", "v"}, {"y"}, "attention");
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 3, 4, 6});
  if (!exposed.empty()) *g->add_output() = testing::TensorInfo(exposed, onnx::TensorProto::FLOAT, {2, 3, 4, 5});
  return m;
}

TEST(SoftmaxAttentionFusion, TheChainRunsAsOneNodeToTheUnfusedValuesBitForBit) {
  std::vector<float> q(2 * 3 * 4 * 8), k(3 * 5 * 8), v(3 * 5 * 6), mask(4 * 5);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 1.7f * std::sin(0.37f * static_cast<float>(i)) + 0.1f;
  for (size_t i = 0; i < k.size(); ++i) k[i] = 1.3f * std::cos(0.71f * static_cast<float>(i)) - 0.2f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.9f * std::sin(1.9f * static_cast<float>(i) + 0.5f);
  // A causal mask for 4 new rows after one past position: -inf above the diagonal.
  for (int r = 0; r < 4; ++r) for (int c = 0; c < 5; ++c) mask[r * 5 + c] = c <= r + 1 ? 0.f : -INFINITY;
  SessionOptions two;
  two.num_threads = 2;  // the unfused products split across the pool; the fused ones run per batch matrix
  for (int form = 0; form < 4; ++form) {
    const bool with_mask = form != 3, mask_first = form == 1, with_scale = form != 2;
    SCOPED_TRACE(::testing::Message() << "form " << form);
    auto run = [&](const std::string& exposed, int* fused) -> std::vector<uint32_t> {
      return FusedRunBits(AttentionModel(exposed, with_mask, mask_first, with_scale), "attention_fusion",
                          {{"q", Tensor::FromVector(DType::kFloat32, {2, 3, 4, 8}, q)},
                           {"k", Tensor::FromVector(DType::kFloat32, {1, 3, 5, 8}, k)},
                           {"v", Tensor::FromVector(DType::kFloat32, {1, 3, 5, 6}, v)},
                           {"mask", Tensor::FromVector(DType::kFloat32, {4, 5}, mask)}},
                          two, fused);
    };
    int fused = 0, unfused = 0;
    const std::vector<uint32_t> want = run("probs", &unfused);  // the probabilities read outside: no fusion
    const std::vector<uint32_t> got = run("", &fused);
    EXPECT_EQ(unfused, 0);
    EXPECT_EQ(fused, 1);
    ASSERT_EQ(want.size(), 2u * 3 * 4 * 6);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
}

// Grouped-query attention as transformers' eager attention writes it: q [2, 4, 3, 8] (4 heads),
// k [kb, 2, 5, 8] and v [kb, 2, 5, 6] (2 kv heads) each through repeat_kv, Unsqueeze(axes 2) ->
// Expand([2, 2, 2, T, D]) -> Reshape([2, 4, T, D]), then Transpose(k) -> MatMul -> Mul(scale) ->
// Softmax -> MatMul(v). With kb = 1 the Expand also broadcasts the batch: not a plain repeat.
onnx::ModelProto GroupedAttentionModel(const std::string& exposed, int64_t kb) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("q", onnx::TensorProto::FLOAT, {2, 4, 3, 8});
  *g->add_input() = testing::TensorInfo("k", onnx::TensorProto::FLOAT, {kb, 2, 5, 8});
  *g->add_input() = testing::TensorInfo("v", onnx::TensorProto::FLOAT, {kb, 2, 5, 6});
  *g->add_initializer() = testing::FloatTensor("scale", {}, {0.35355339f});
  *g->add_initializer() = Int64Tensor("axes2", {1}, {2});
  for (const char* x : {"k", "v"}) {
    const int64_t d = std::string(x) == "k" ? 8 : 6;
    const std::string p = x;
    *g->add_initializer() = Int64Tensor(p + "_wide", {5}, {2, 2, 2, 5, d});
    *g->add_initializer() = Int64Tensor(p + "_heads", {4}, {2, 4, 5, d});
    *g->add_node() = testing::MakeNode("Unsqueeze", {p, "axes2"}, {p + "_u"});
    *g->add_node() = testing::MakeNode("Expand", {p + "_u", p + "_wide"}, {p + "_e"});
    *g->add_node() = testing::MakeNode("Reshape", {p + "_e", p + "_heads"}, {p + "_r"});
  }
  onnx::NodeProto t = testing::MakeNode("Transpose", {"k_r"}, {"kt"});
  auto* perm = t.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 3, 2}) perm->add_ints(p);
  *g->add_node() = t;
  *g->add_node() = testing::MakeNode("MatMul", {"q", "kt"}, {"qk"});
  *g->add_node() = testing::MakeNode("Mul", {"qk", "scale"}, {"scaled"});
  onnx::NodeProto sm = testing::MakeNode("Softmax", {"scaled"}, {"probs"});
  auto* axis = sm.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  *g->add_node() = sm;
  *g->add_node() = testing::MakeNode("MatMul", {"probs", "v_r"}, {"y"}, "attention");
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 4, 3, 6});
  if (!exposed.empty()) *g->add_output() = testing::TensorInfo(exposed, onnx::TensorProto::FLOAT, {2, 4, 3, 5});
  return m;
}

TEST(SoftmaxAttentionFusion, RepeatKVIsReadInPlaceToTheUnfusedValuesBitForBit) {
  SessionOptions two;
  two.num_threads = 2;
  for (int64_t kb : {2, 1}) {
    SCOPED_TRACE(::testing::Message() << "k batch " << kb);
    std::vector<float> q(2 * 4 * 3 * 8), k(kb * 2 * 5 * 8), v(kb * 2 * 5 * 6);
    for (size_t i = 0; i < q.size(); ++i) q[i] = 1.7f * std::sin(0.37f * static_cast<float>(i)) + 0.1f;
    for (size_t i = 0; i < k.size(); ++i) k[i] = 1.3f * std::cos(0.71f * static_cast<float>(i)) - 0.2f;
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.9f * std::sin(1.9f * static_cast<float>(i) + 0.5f);
    const std::vector<Feed> feeds = {{"q", Tensor::FromVector(DType::kFloat32, {2, 4, 3, 8}, q)},
                                     {"k", Tensor::FromVector(DType::kFloat32, {kb, 2, 5, 8}, k)},
                                     {"v", Tensor::FromVector(DType::kFloat32, {kb, 2, 5, 6}, v)}};
    int fused = 0, unfused = 0;
    const std::vector<uint32_t> want = FusedRunBits(GroupedAttentionModel("probs", kb), "attention_fusion", feeds, two, &unfused);
    const std::vector<uint32_t> got = FusedRunBits(GroupedAttentionModel("", kb), "attention_fusion", feeds, two, &fused);
    EXPECT_EQ(unfused, 0);
    EXPECT_EQ(fused, 1);
    ASSERT_EQ(want.size(), 2u * 4 * 3 * 6);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i << ": " << std::bit_cast<float>(got[i]) << " vs " << std::bit_cast<float>(want[i]);
    // A plain repeat (kb 2) leaves no Expand: the fused node reads k and v with kv_repeat 2.
    auto model = Load(GroupedAttentionModel("", kb));
    ASSERT_TRUE(RunSessionPasses(model->graph, PassContext{}).ok());
    int expands = 0;
    int64_t repeat = 0;
    for (const Node& n : model->graph.nodes) {
      expands += n.op_type == "Expand";
      if (n.op_type == internal_ops::SoftmaxAttention::kName) repeat = n.GetInt(internal_ops::SoftmaxAttention::kKVRepeat, 1);
    }
    EXPECT_EQ(expands, kb == 2 ? 0 : 2);
    EXPECT_EQ(repeat, kb == 2 ? 2 : 1);
  }
}

// rotate_half as Hugging Face writes it: t * cos + Concat(-t[..., 4:], t[..., :4]) * sin, t [1, 3, 4, 8],
// cos and sin [4, 8]. `exposed`: an intermediate also made a graph output (no fusion); `swapped`:
// the products' and the sum's operands in the other order, and the high half ending at INT64_MAX.
onnx::ModelProto RotaryModel(const std::string& exposed, bool swapped, int64_t sin_width = 8) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("t", onnx::TensorProto::FLOAT, {1, 3, 4, 8});
  *g->add_input() = testing::TensorInfo("cos", onnx::TensorProto::FLOAT, {4, 8});
  *g->add_input() = testing::TensorInfo("sin", onnx::TensorProto::FLOAT, {4, sin_width});
  *g->add_initializer() = Int64Tensor("zero", {1}, {0});
  *g->add_initializer() = Int64Tensor("half", {1}, {4});
  *g->add_initializer() = Int64Tensor("end", {1}, {swapped ? std::numeric_limits<int64_t>::max() : 8});
  *g->add_initializer() = Int64Tensor("axis", {1}, {swapped ? -1 : 3});
  *g->add_node() = testing::MakeNode("Slice", {"t", "zero", "half", "axis"}, {"lo"});
  *g->add_node() = testing::MakeNode("Slice", {"t", "half", "end", "axis"}, {"hi"});
  *g->add_node() = testing::MakeNode("Neg", {"hi"}, {"neg"});
  onnx::NodeProto cat = testing::MakeNode("Concat", {"neg", "lo"}, {"rot"});
  auto* axis = cat.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(swapped ? -1 : 3);
  *g->add_node() = cat;
  *g->add_node() = testing::MakeNode("Mul", swapped ? std::vector<std::string>{"cos", "t"} : std::vector<std::string>{"t", "cos"}, {"tc"});
  *g->add_node() = testing::MakeNode("Mul", swapped ? std::vector<std::string>{"sin", "rot"} : std::vector<std::string>{"rot", "sin"}, {"rs"});
  *g->add_node() = testing::MakeNode("Add", swapped ? std::vector<std::string>{"rs", "tc"} : std::vector<std::string>{"tc", "rs"}, {"y"});
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {1, 3, 4, 8});
  if (!exposed.empty()) *g->add_output() = testing::TensorInfo(exposed, onnx::TensorProto::FLOAT, {1, 3, 4, 8});
  return m;
}

TEST(RotaryFusion, RotateHalfRunsAsOneNodeToTheUnfusedValuesBitForBit) {
  std::vector<float> t(3 * 4 * 8), cos(4 * 8), sin(4 * 8);
  for (size_t i = 0; i < t.size(); ++i) t[i] = 2.3f * std::sin(0.61f * static_cast<float>(i)) + 0.07f;
  for (size_t i = 0; i < cos.size(); ++i) {
    cos[i] = std::cos(0.3f * static_cast<float>(i));
    sin[i] = std::sin(0.3f * static_cast<float>(i));
  }
  for (int form = 0; form < 3; ++form) {
    // Form 2: sin [4, 1], broadcast along the rotated axis (the kernel's strided path).
    const bool swapped = form == 1;
    const int64_t sin_width = form == 2 ? 1 : 8;
    SCOPED_TRACE(::testing::Message() << "form " << form);
    auto run = [&](const std::string& exposed, int* fused) -> std::vector<uint32_t> {
      std::vector<float> sin_fed(sin);
      if (sin_width == 1) sin_fed = {sin[0], sin[8], sin[16], sin[24]};
      return FusedRunBits(RotaryModel(exposed, swapped, sin_width), "rotary_fusion",
                          {{"t", Tensor::FromVector(DType::kFloat32, {1, 3, 4, 8}, t)},
                           {"cos", Tensor::FromVector(DType::kFloat32, {4, 8}, cos)},
                           {"sin", Tensor::FromVector(DType::kFloat32, {4, sin_width}, sin_fed)}},
                          OneThread(), fused);
    };
    int fused = 0, unfused = 0;
    const std::vector<uint32_t> want = run("rot", &unfused);  // the rotated copy read outside: no fusion
    const std::vector<uint32_t> got = run("", &fused);
    EXPECT_EQ(unfused, 0);
    EXPECT_EQ(fused, 1);
    ASSERT_EQ(want.size(), t.size());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    // Against the formula too: y = t c + rot s, each product rounded.
    for (size_t i = 0; i < t.size(); ++i) {
      const size_t j = i % 8, row = i / 8, pos = row % 4;
      const float rot = j < 4 ? -t[i + 4] : t[i - 4];
      const float y = t[i] * cos[pos * 8 + j] + rot * sin[pos * 8 + (sin_width == 1 ? 0 : j)];
      ASSERT_EQ(got[i], std::bit_cast<uint32_t>(y)) << i;
    }
  }
}

// SiLU as torch exports it, then the gated MLP's product: y = Mul(Mul(x, Sigmoid(x)), m), x [2, 40]
// (40: not a whole number of 16-wide packets). `swapped`: both Muls' operands in the other
// order; `m_shape`: m's shape ([40] broadcasts: the gated Mul stays); `exposed`: an intermediate
// also made a graph output.
onnx::ModelProto SiLUModel(bool swapped, const std::vector<int64_t>& m_shape, const std::string& exposed) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {2, 40});
  *g->add_input() = testing::TensorInfo("m", onnx::TensorProto::FLOAT, m_shape);
  *g->add_node() = testing::MakeNode("Sigmoid", {"x"}, {"s"});
  *g->add_node() = testing::MakeNode("Mul", swapped ? std::vector<std::string>{"s", "x"} : std::vector<std::string>{"x", "s"}, {"a"});
  *g->add_node() = testing::MakeNode("Mul", swapped ? std::vector<std::string>{"m", "a"} : std::vector<std::string>{"a", "m"}, {"y"});
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 40});
  if (!exposed.empty()) *g->add_output() = testing::TensorInfo(exposed, onnx::TensorProto::FLOAT, {2, 40});
  return m;
}

TEST(SiLUFusion, SiLUAndItsGatedProductRunAsOneNodeToTheUnfusedValuesBitForBit) {
  // Wide values: below about -9 Eigen's scalar and packet logistics round differently, and 40
  // leaves a tail that an unaligned or scalar path would take.
  std::vector<float> x(2 * 40), mv(2 * 40);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 30.0f * std::sin(0.83f * static_cast<float>(i)) - 6.0f;
    mv[i] = 1.5f * std::cos(0.29f * static_cast<float>(i)) + 0.2f;
  }
  x[7] = std::numeric_limits<float>::infinity();
  x[8] = -std::numeric_limits<float>::infinity();
  x[79] = -88.5f;
  struct Case {
    bool swapped;
    std::vector<int64_t> m_shape;
    int fused;  // SiLU nodes; the gated product joins when m has x's shape
    bool gated;
  };
  for (const Case& c : {Case{false, {2, 40}, 1, true}, Case{true, {2, 40}, 1, true}, Case{false, {40}, 1, false}}) {
    SCOPED_TRACE(::testing::Message() << "swapped " << c.swapped << ", m rank " << c.m_shape.size());
    std::vector<float> m_fed(mv.begin(), mv.begin() + NumElements(Shape(c.m_shape.begin(), c.m_shape.end())));
    const std::vector<Feed> feeds = {{"x", Tensor::FromVector(DType::kFloat32, {2, 40}, x)},
                                     {"m", Tensor::FromVector(DType::kFloat32, Shape(c.m_shape.begin(), c.m_shape.end()), m_fed)}};
    int fused = 0, unfused = 0;
    const std::vector<uint32_t> want = FusedRunBits(SiLUModel(c.swapped, c.m_shape, "s"), "silu_fusion", feeds, OneThread(), &unfused);
    const std::vector<uint32_t> got = FusedRunBits(SiLUModel(c.swapped, c.m_shape, ""), "silu_fusion", feeds, OneThread(), &fused);
    EXPECT_EQ(unfused, 0);
    EXPECT_EQ(fused, c.fused);
    ASSERT_EQ(want.size(), x.size());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i << ": x " << x[i];
    // The rewrite: one SiLU node, with m as its second input when the product joined it.
    auto model = Load(SiLUModel(c.swapped, c.m_shape, ""));
    ASSERT_TRUE(RunSessionPasses(model->graph, PassContext{}).ok());
    int silu = 0, muls = 0, sigmoids = 0;
    for (const Node& n : model->graph.nodes) {
      if (n.op_type == internal_ops::SiLU::kName) {
        ++silu;
        EXPECT_EQ(n.inputs.size(), c.gated ? 2u : 1u);
      }
      muls += n.op_type == "Mul";
      sigmoids += n.op_type == "Sigmoid";
    }
    EXPECT_EQ(silu, 1);
    EXPECT_EQ(muls, c.gated ? 0 : 1);
    EXPECT_EQ(sigmoids, 0);
  }
  // The SiLU read outside the chain: Sigmoid and Mul fuse, the product stays a Mul.
  int fused = 0;
  FusedRunBits(SiLUModel(false, {2, 40}, "a"), "silu_fusion",
               {{"x", Tensor::FromVector(DType::kFloat32, {2, 40}, x)}, {"m", Tensor::FromVector(DType::kFloat32, {2, 40}, mv)}},
               OneThread(), &fused);
  EXPECT_EQ(fused, 1);
}

// The Sigmoid op gives an element the same bits wherever it sits: in a tensor's odd tail, where a
// thread's chunk starts, or alone. Below about -9 Eigen's scalar logistic (what an array's
// unaligned head and odd tail get) and its packet one round differently about a third of the time.
TEST(SiLUFusion, SigmoidOfAnElementDoesNotDependOnItsPlace) {
  auto run = [](const std::vector<float>& v) {
    onnx::ModelProto m = testing::MakeModel();
    const int64_t n = static_cast<int64_t>(v.size());
    *m.mutable_graph()->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {n});
    *m.mutable_graph()->add_node() = testing::MakeNode("Sigmoid", {"x"}, {"y"});
    *m.mutable_graph()->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {n});
    const std::string bytes = m.SerializeAsString();
    SessionOptions two;
    two.num_threads = 2;
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), two);
    EXPECT_TRUE(s.ok()) << s.status();
    auto y = (*s)->Run({{"x", Tensor::FromVector(DType::kFloat32, {n}, v)}}, {"y"});
    EXPECT_TRUE(y.ok()) << y.status();
    std::vector<uint32_t> bits;
    for (int64_t i = 0; i < n; ++i) bits.push_back(std::bit_cast<uint32_t>((*y)[0].data<float>()[i]));
    return bits;
  };
  // 2 * 65536 + 37 values in [-40, -10]: two threads' chunks and a tail.
  std::vector<float> x(2 * 65536 + 37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -40.0f + 30.0f * static_cast<float>(i % 997) / 997.0f;
  const std::vector<uint32_t> all = run(x);
  for (size_t shift : {1, 3}) {  // every element one or three places on
    std::vector<float> moved(shift, 0.0f);
    moved.insert(moved.end(), x.begin(), x.end());
    const std::vector<uint32_t> got = run(moved);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i + shift], all[i]) << "element " << i << " moved " << shift << ", x " << x[i];
  }
  for (size_t i = 0; i < 24; ++i) {  // alone
    const size_t at = i * (x.size() - 1) / 23;
    EXPECT_EQ(run({x[at]})[0], all[at]) << "element " << at << ", x " << x[at];
  }
}

// A decoder layer's projections as exporters write them: MatMuls of one A against constant
// weights of one K (widths that end mid-panel), one MatMul against a fed B (it stays a MatMul).
// `widths` empty: only the fed MatMul; one width: that MatMul alone (the reference).
constexpr int64_t kGroupK = 200;
onnx::ModelProto ProjectionsModel(bool half, const std::vector<int64_t>& widths, bool fed_b) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  const auto elem = half ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT;
  *g->add_input() = testing::TensorInfo("a", elem, {2, 9, kGroupK});
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string w = "w" + std::to_string(i), y = "y" + std::to_string(i);
    std::vector<float> v(static_cast<size_t>(kGroupK * widths[i]));
    for (size_t j = 0; j < v.size(); ++j) v[j] = 0.9f * std::sin(0.37f * static_cast<float>(j) + static_cast<float>(widths[i]));
    onnx::TensorProto t = testing::FloatTensor(w, {kGroupK, widths[i]}, v);
    if (half) {
      t.set_data_type(onnx::TensorProto::FLOAT16);
      t.clear_float_data();
      for (float f : v) t.add_int32_data(F32ToF16(f));
    }
    *g->add_initializer() = t;
    *g->add_node() = testing::MakeNode("MatMul", {"a", w}, {y}, "proj" + std::to_string(i));
    *g->add_output() = testing::TensorInfo(y, elem, {2, 9, widths[i]});
  }
  if (fed_b) {
    *g->add_input() = testing::TensorInfo("b", elem, {kGroupK, 5});
    *g->add_node() = testing::MakeNode("MatMul", {"a", "b"}, {"yb"});
    *g->add_output() = testing::TensorInfo("yb", elem, {2, 9, 5});
  }
  return m;
}

TEST(MatMulGroupFusion, ProjectionsOfOneARunAsOneNodeWithTheBitsOfEachMatMulAlone) {
  const std::vector<int64_t> widths = {300, 130, 77};
  for (bool half : {false, true}) {
    auto model = Load(ProjectionsModel(half, widths, true));
    PassReport report;
    PassContext ctx;
    ctx.report = &report;
    ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
    EXPECT_EQ(report.counts["matmul_group_fusion"], 1);
    ASSERT_EQ(CountOps(model->graph, internal_ops::MatMulGroup::kName), 1);
    EXPECT_EQ(CountOps(model->graph, "MatMul"), 1);  // the fed B's
    for (const Node& n : model->graph.nodes) {
      if (n.op_type != internal_ops::MatMulGroup::kName) continue;
      EXPECT_EQ(n.inputs, (std::vector<std::string>{"a", "w0", "w1", "w2"}));
      EXPECT_EQ(n.outputs, (std::vector<std::string>{"y0", "y1", "y2"}));
    }
    // Values across both signs and magnitudes, so int8's per-row scales differ row by row.
    Tensor a = Tensor::Empty(half ? DType::kFloat16 : DType::kFloat32, {2, 9, kGroupK});
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      const float v = (1.0f + static_cast<float>(i / kGroupK)) * std::cos(0.61f * static_cast<float>(i)) - 0.05f;
      if (half) a.data<uint16_t>()[i] = F32ToF16(v);
      else a.data<float>()[i] = v;
    }
    Tensor b = Tensor::Empty(a.dtype(), {kGroupK, 5});
    for (int64_t i = 0; i < b.num_elements(); ++i) {
      if (half) b.data<uint16_t>()[i] = F32ToF16(0.01f * static_cast<float>(i % 17));
      else b.data<float>()[i] = 0.01f * static_cast<float>(i % 17);
    }
    for (MatMulPrecision precision : {MatMulPrecision::kFloat32, MatMulPrecision::kInt8}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << (half ? "float16" : "float32") << ", int8 " << (precision == MatMulPrecision::kInt8)
                                          << ", threads " << threads);
        SessionOptions o;
        o.num_threads = threads;
        o.matmul = precision;
        const auto got = RunBits(ProjectionsModel(half, widths, true), {{"a", a}, {"b", b}}, {"y0", "y1", "y2", "yb"}, o);
        ASSERT_EQ(got.size(), 4u);
        for (size_t i = 0; i < widths.size(); ++i) {
          const auto want = RunBits(ProjectionsModel(half, {widths[i]}, false), {{"a", a}}, {"y0"}, o);
          ASSERT_EQ(want.size(), 1u);
          ASSERT_EQ(got[i].size(), want[0].size());
          for (size_t j = 0; j < want[0].size(); ++j) ASSERT_EQ(got[i][j], want[0][j]) << "y" << i << "[" << j << "]";
        }
        EXPECT_EQ(got[3], RunBits(ProjectionsModel(half, {}, true), {{"a", a}, {"b", b}}, {"yb"}, o)[0]);
      }
    }
  }
}

// A weight a Constant node makes after the group's first MatMul (the loader turns a file's
// Constants into initializers, but a graph built in memory may hold one): that MatMul stays alone,
// as the group node takes the first one's place; the others group.
TEST(MatMulGroupFusion, AWeightMadeAfterTheFirstMatMulDoesNotJoin) {
  Graph g;
  g.inputs.push_back(ValueInfo{"a", {}});
  auto weight = [] { return Tensor::FromVector(DType::kFloat32, {2, 3}, std::vector<float>(6, 0.5f)); };
  g.initializers["w0"] = weight();
  g.initializers["w2"] = weight();
  auto matmul = [](const std::string& w, const std::string& y) {
    Node n;
    n.op_type = "MatMul";
    n.inputs = {"a", w};
    n.outputs = {y};
    return n;
  };
  Node c;
  c.op_type = "Constant";
  c.outputs = {"w1"};
  Attribute value;
  value.name = "value";
  value.type = Attribute::Type::kTensor;
  value.t = weight();
  c.attrs["value"] = value;
  g.nodes = {matmul("w0", "y0"), c, matmul("w1", "y1"), matmul("w2", "y2")};
  for (const char* y : {"y0", "y1", "y2"}) g.outputs.push_back(ValueInfo{y, {}});
  UseDefIndex uses(g);
  ASSERT_NE(uses.Const("w1"), nullptr);
  EXPECT_EQ(FuseMatMulGroups(g, uses), 1);
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].op_type, internal_ops::MatMulGroup::kName);
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"a", "w0", "w2"}));
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y0", "y2"}));
  EXPECT_EQ(g.nodes[2].op_type, "MatMul");
  EXPECT_EQ(g.nodes[2].inputs[1], "w1");
  EXPECT_TRUE(uses == UseDefIndex(g));
}

// A MatMulGroup a file spells itself: weights it cannot bind fail the load, an A of another
// width fails the run; both name the node.
TEST(MatMulGroupFusion, WeightsAndInputsTheKernelCannotTakeAreClearErrors) {
  auto group = [](const std::vector<std::vector<int64_t>>& weights, bool fed_weight) {
    onnx::ModelProto m = testing::MakeModel();
    auto* opset = m.add_opset_import();
    opset->set_domain("oneinfer.internal");
    opset->set_version(1);
    auto* g = m.mutable_graph();
    *g->add_input() = testing::TensorInfo("a", onnx::TensorProto::FLOAT, {2, 8});
    std::vector<std::string> inputs = {"a"}, outputs;
    for (size_t i = 0; i < weights.size(); ++i) {
      const std::string w = "w" + std::to_string(i);
      std::vector<float> v(static_cast<size_t>(NumElements(Shape(weights[i].begin(), weights[i].end()))), 0.5f);
      if (fed_weight && i == 1) *g->add_input() = testing::TensorInfo(w, onnx::TensorProto::FLOAT, weights[i]);
      else *g->add_initializer() = testing::FloatTensor(w, weights[i], v);
      inputs.push_back(w);
      outputs.push_back("y" + std::to_string(i));
    }
    onnx::NodeProto n = testing::MakeNode("MatMulGroup", inputs, outputs, "grouped");
    n.set_domain("oneinfer.internal");
    *g->add_node() = n;
    for (const std::string& y : outputs) {
      onnx::ValueInfoProto out;
      out.set_name(y);
      *g->add_output() = out;
    }
    return m.SerializeAsString();
  };
  auto load_error = [](const std::string& bytes) {
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
    return s.ok() ? absl::OkStatus() : s.status();
  };
  for (const auto& [bytes, says] : std::vector<std::pair<std::string, std::string>>{
           {group({{8, 4}, {8, 3}}, true), "not a constant float matrix"},
           {group({{8, 4}, {6, 3}}, false), "of the first one's K"},
           {group({{8, 4}, {3}}, false), "not a constant float matrix"}}) {
    const absl::Status s = load_error(bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
    EXPECT_NE(s.message().find("grouped"), std::string::npos) << s;
  }
  const std::string bytes = group({{5, 4}, {5, 3}}, false);  // K 5, A's rows 8 wide
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = (*s)->Run({{"a", Tensor::FromVector(DType::kFloat32, {2, 8}, std::vector<float>(16, 1.f))}}, {"y0", "y1"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("inner dimensions differ"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("grouped"), std::string::npos) << r.status();
}

// The fused kernels as a file may also spell them: inputs they cannot compute are an error
// naming the node, never a crash.
TEST(FusedAttentionKernels, InputsTheyCannotComputeAreClearErrors) {
  auto run = [](const std::string& op, const std::vector<std::pair<std::string, Tensor>>& feeds,
                int64_t kv_repeat = 0) -> absl::Status {
    onnx::ModelProto m = testing::MakeModel();
    auto* opset = m.add_opset_import();
    opset->set_domain("oneinfer.internal");
    opset->set_version(1);
    auto* g = m.mutable_graph();
    std::vector<std::string> names;
    for (const auto& [name, t] : feeds) {
      names.push_back(name);
      onnx::ValueInfoProto info;
      info.set_name(name);
      *g->add_input() = info;
    }
    onnx::NodeProto n = testing::MakeNode(op, names, {"y"}, "fused");
    n.set_domain("oneinfer.internal");
    if (kv_repeat != 0) {
      auto* a = n.add_attribute();
      a->set_name(internal_ops::SoftmaxAttention::kKVRepeat);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(kv_repeat);
    }
    *g->add_node() = n;
    onnx::ValueInfoProto out;
    out.set_name("y");
    *g->add_output() = out;
    const std::string bytes = m.SerializeAsString();
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
    if (!s.ok()) return s.status();
    auto r = (*s)->Run(feeds, {"y"});
    return r.ok() ? absl::OkStatus() : r.status();
  };
  auto f32 = [](Shape shape) {
    Tensor t = Tensor::Empty(DType::kFloat32, shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = 0.25f;
    return t;
  };
  struct Case {
    std::string op;
    std::vector<std::pair<std::string, Tensor>> feeds;
    std::string says;
    int64_t kv_repeat = 0;
  };
  const std::vector<Case> cases = {
      {"RotateHalf", {{"t", f32({2, 7})}, {"c", f32({2, 7})}, {"s", f32({2, 7})}}, "even last axis"},
      {"RotateHalf", {{"t", f32({2, 8})}, {"c", f32({3, 8})}, {"s", f32({2, 8})}}, "do not broadcast"},
      {"RotateHalf", {{"t", Tensor::Empty(DType::kInt32, {2, 8})}, {"c", f32({2, 8})}, {"s", f32({2, 8})}}, "float32"},
      {"SiLU", {{"x", Tensor::Empty(DType::kInt32, {2, 8})}}, "float32"},
      {"SiLU", {{"x", f32({2, 8})}, {"m", f32({2, 4})}}, "is not x's shape"},
      {"SoftmaxAttention", {{"q", f32({1, 2, 3, 4})}, {"k", f32({1, 2, 5, 6})}, {"v", f32({1, 2, 5, 4})}}, "do not make q k^T v"},
      {"SoftmaxAttention", {{"q", f32({4})}, {"k", f32({5, 4})}, {"v", f32({5, 4})}}, "rank 2 or more"},
      {"SoftmaxAttention", {{"q", f32({2, 3, 4})}, {"k", f32({3, 5, 4})}, {"v", f32({3, 5, 4})}}, "do not broadcast"},
      {"SoftmaxAttention", {{"q", f32({1, 3, 4})}, {"k", f32({1, 5, 4})}, {"v", f32({1, 5, 4})}, {"m", f32({2, 3, 5})}},
       "does not broadcast to the scores"},
      {"SoftmaxAttention", {{"q", f32({2, 3, 4})}, {"k", f32({5, 4})}, {"v", f32({5, 4})}}, "needs k and v with a head axis", 2},
      {"SoftmaxAttention", {{"q", f32({1, 3, 1, 4})}, {"k", f32({1, 2, 5, 4})}, {"v", f32({1, 2, 5, 4})}}, "do not broadcast", 2},
      {"SoftmaxAttention", {{"q", f32({1, 4, 1, 4})}, {"k", f32({1, 2, 5, 4})}, {"v", f32({1, 2, 5, 4})}}, "kv_repeat must be 1 or more", -1},
  };
  for (const Case& c : cases) {
    const absl::Status s = run(c.op, c.feeds, c.kv_repeat);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.op << ": " << s;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
    EXPECT_NE(s.message().find("fused"), std::string::npos) << s;  // names the node
  }
}

// ---------------------------------------------------------------- the session's pass list

// Two layers' stacked KV cache: past_kv [2, 1, 3, 4] -> Gather(slot) -> Concat(new, axis 1)
// -> Unsqueeze(0) -> Concat(axis 0) = present_kv; each layer also reads its slot (Neg).
onnx::ModelProto StackedKVModel() {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("past_kv", onnx::TensorProto::FLOAT, {2, 1, 3, 4});
  *g->add_initializer() = Int64Tensor("axes0", {1}, {0});
  for (int s = 0; s < 2; ++s) {
    const std::string i = std::to_string(s);
    *g->add_input() = testing::TensorInfo("new" + i, onnx::TensorProto::FLOAT, {1, 1, 4});
    *g->add_initializer() = Int64Tensor("slot" + i, {}, {s});
    *g->add_node() = testing::MakeNode("Gather", {"past_kv", "slot" + i}, {"g" + i});
    onnx::NodeProto concat = testing::MakeNode("Concat", {"g" + i, "new" + i}, {"c" + i});
    auto* axis = concat.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(1);
    *g->add_node() = concat;
    *g->add_node() = testing::MakeNode("Unsqueeze", {"c" + i, "axes0"}, {"u" + i});
    *g->add_node() = testing::MakeNode("Neg", {"c" + i}, {"y" + i});
    *g->add_output() = testing::TensorInfo("y" + i, onnx::TensorProto::FLOAT, {1, 4, 4});
  }
  onnx::NodeProto stack = testing::MakeNode("Concat", {"u0", "u1"}, {"present_kv"});
  auto* axis = stack.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  *g->add_node() = stack;
  *g->add_output() = testing::TensorInfo("present_kv", onnx::TensorProto::FLOAT, {2, 1, 4, 4});
  return m;
}

TEST(GraphPasses, TheSessionListKeepsTheSharedIndexValidAfterEveryPass) {
  for (const onnx::ModelProto& m : {StackedKVModel(), RMSNormModel(false), RMSNormModel(true), AttentionModel("", true, false, true),
                                    RotaryModel("", false), SiLUModel(false, {2, 40}, ""),
                                    ProjectionsModel(false, {8, 4}, true)}) {
    auto model = Load(m);
    ASSERT_NE(model, nullptr);
    PassReport report;
    PassContext ctx;
    ctx.constant_folding = false;
    ctx.check_uses = true;
    ctx.report = &report;
    ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
    EXPECT_EQ(report.counts.size(), 16u);  // every pass ran (dead_node_elimination twice, one entry)
  }
  auto model = Load(StackedKVModel());
  PassReport report;
  PassContext ctx;
  ctx.report = &report;
  ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
  EXPECT_EQ(report.counts["kv_cache_fusion"], 1);
  EXPECT_EQ(report.counts["dead_node_elimination"], 2);  // the two Unsqueezes
  EXPECT_EQ(CountOps(model->graph, internal_ops::KVCacheAppend::kName), 2);
  EXPECT_EQ(CountOps(model->graph, internal_ops::KVCacheFinish::kName), 1);
  EXPECT_EQ(CountOps(model->graph, "Concat"), 0);
  // Its slot views are read by a Neg, which expects dense rows: the cache may not grow in place.
  EXPECT_EQ(report.counts["kv_cache_in_place"], 0);
  for (const Node& n : model->graph.nodes) EXPECT_FALSE(n.HasAttr(internal_ops::KVCacheAppend::kGrow)) << n.name;
}

TEST(GraphPasses, TheStackedKVCacheRunsFusedToTheSameValues) {
  const std::string bytes = StackedKVModel().SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> past(2 * 3 * 4), fresh0(4), fresh1(4);
  for (size_t i = 0; i < past.size(); ++i) past[i] = static_cast<float>(i);
  for (size_t i = 0; i < 4; ++i) fresh0[i] = 100.f + i, fresh1[i] = 200.f + i;
  auto out = (*s)->Run({{"past_kv", Tensor::FromVector(DType::kFloat32, {2, 1, 3, 4}, past)},
                        {"new0", Tensor::FromVector(DType::kFloat32, {1, 1, 4}, fresh0)},
                        {"new1", Tensor::FromVector(DType::kFloat32, {1, 1, 4}, fresh1)}},
                       {"present_kv", "y1"});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* present = (*out)[0].data<float>();
  for (int slot = 0; slot < 2; ++slot) {
    for (int row = 0; row < 4; ++row) {
      for (int d = 0; d < 4; ++d) {
        const float want = row < 3 ? past[static_cast<size_t>((slot * 3 + row) * 4 + d)]
                                   : (slot == 0 ? fresh0 : fresh1)[static_cast<size_t>(d)];
        EXPECT_EQ(present[(slot * 4 + row) * 4 + d], want) << slot << " " << row << " " << d;
        if (slot == 1) {
          EXPECT_EQ((*out)[1].data<float>()[row * 4 + d], -want);
        }
      }
    }
  }
}

// One layer's cache in the optimum layout: past [1, 2, T, 4] (a graph input) -> Concat(new,
// axis -2) -> present (a graph output), which the layer reads too (Neg). With `as_output` false
// the Concat's result is not a graph output: not a cache, left alone.
onnx::ModelProto PerLayerKVModel(bool as_output) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  onnx::ValueInfoProto past = testing::TensorInfo("past", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  past.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("past_len");
  *g->add_input() = past;
  onnx::ValueInfoProto fresh = testing::TensorInfo("new", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  fresh.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("heads");
  *g->add_input() = fresh;
  onnx::NodeProto concat = testing::MakeNode("Concat", {"past", "new"}, {"present"});
  auto* axis = concat.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-2);
  *g->add_node() = concat;
  *g->add_node() = testing::MakeNode("Neg", {"present"}, {"y"});
  auto unshaped = [](const std::string& name) {  // rank and length left to inference
    onnx::ValueInfoProto v;
    v.set_name(name);
    v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return v;
  };
  *g->add_output() = unshaped("y");
  if (as_output) *g->add_output() = unshaped("present");
  return m;
}

TEST(GraphPasses, APerLayerCacheConcatGrowsInPlaceOfTheConcatToTheSameValues) {
  for (bool as_output : {true, false}) {
    auto model = Load(PerLayerKVModel(as_output));
    ASSERT_NE(model, nullptr);
    PassReport report;
    PassContext ctx;
    ctx.report = &report;
    ctx.check_uses = true;
    const absl::Status passes = RunSessionPasses(model->graph, ctx);
    ASSERT_TRUE(passes.ok()) << passes;
    EXPECT_EQ(CountOps(model->graph, internal_ops::KVCacheConcat::kName), as_output ? 1 : 0);
    EXPECT_EQ(CountOps(model->graph, "Concat"), as_output ? 0 : 1);
    EXPECT_EQ(report.counts["kv_cache_in_place"], 0);  // a Neg reads the present: it stays dense

    const std::string bytes = PerLayerKVModel(as_output).SerializeAsString();
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
    ASSERT_TRUE(s.ok()) << s.status();
    for (int64_t T : {0, 3, 130}) {  // empty past, a few positions, past one capacity step
      std::vector<float> past(static_cast<size_t>(2 * T * 4)), fresh(8);
      for (size_t i = 0; i < past.size(); ++i) past[i] = static_cast<float>(i);
      for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = 1000.f + static_cast<float>(i);
      auto out = (*s)->Run({{"past", Tensor::FromVector(DType::kFloat32, {1, 2, T, 4}, past)},
                            {"new", Tensor::FromVector(DType::kFloat32, {1, 2, 1, 4}, fresh)}},
                           {"y"});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].shape(), (Shape{1, 2, T + 1, 4}));
      const float* y = (*out)[0].data<float>();
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t t = 0; t <= T; ++t) {
          for (int64_t d = 0; d < 4; ++d) {
            const float want = t < T ? past[static_cast<size_t>((h * T + t) * 4 + d)] : fresh[static_cast<size_t>(h * 4 + d)];
            ASSERT_EQ(y[(h * (T + 1) + t) * 4 + d], -want) << T << " " << h << " " << t << " " << d;
          }
        }
      }
    }
    // Mismatched heads: the kernel names the shapes (as Concat does), no crash.
    auto bad = (*s)->Run({{"past", Tensor::FromVector(DType::kFloat32, {1, 2, 1, 4}, std::vector<float>(8))},
                          {"new", Tensor::FromVector(DType::kFloat32, {1, 3, 1, 4}, std::vector<float>(12))}},
                         {"y"});
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("differ outside axis"), std::string::npos) << bad.status();
  }
}

// The room to grow is kKVCacheCapacityStep positions, but never more than the result's own size
// or 16 MB: a wide tensor that happens to flow input -> Concat -> output is not blown up 64x.
// One layer in the optimum layout whose present only its attention reads: past [1, 2, T, 4] ->
// Concat(new, axis 2) -> present (a graph output) -> Transpose -> MatMul(q, .) -> Softmax ->
// MatMul(., present) = y.
onnx::ModelProto PerLayerAttentionModel() {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  onnx::ValueInfoProto past = testing::TensorInfo("past", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  past.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("past_len");
  *g->add_input() = past;
  *g->add_input() = testing::TensorInfo("new", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  *g->add_input() = testing::TensorInfo("q", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  onnx::NodeProto concat = testing::MakeNode("Concat", {"past", "new"}, {"present"});
  auto* axis = concat.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(2);
  *g->add_node() = concat;
  onnx::NodeProto t = testing::MakeNode("Transpose", {"present"}, {"kt"});
  auto* perm = t.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 3, 2}) perm->add_ints(p);
  *g->add_node() = t;
  *g->add_node() = testing::MakeNode("MatMul", {"q", "kt"}, {"scores"});
  onnx::NodeProto sm = testing::MakeNode("Softmax", {"scores"}, {"probs"});
  auto* sm_axis = sm.add_attribute();
  sm_axis->set_name("axis");
  sm_axis->set_type(onnx::AttributeProto::INT);
  sm_axis->set_i(-1);
  *g->add_node() = sm;
  *g->add_node() = testing::MakeNode("MatMul", {"probs", "present"}, {"y"});
  onnx::ValueInfoProto present = testing::TensorInfo("present", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  present.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("total_len");
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {1, 2, 1, 4});
  *g->add_output() = present;
  return m;
}

TEST(GraphPasses, APerLayerCacheReadByAttentionAloneGrowsInPlaceToTheDenseValues) {
  auto model = Load(PerLayerAttentionModel());
  PassReport report;
  PassContext ctx;
  ctx.report = &report;
  ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
  EXPECT_EQ(report.counts["kv_cache_in_place"], 1);
  EXPECT_EQ(CountOps(model->graph, internal_ops::SoftmaxAttention::kName), 1);

  const std::string bytes = PerLayerAttentionModel().SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions grow;
  grow.donated_inputs = {"past"};
  grow.grow_kv_in_place = true;
  Tensor grown = Tensor::Empty(DType::kFloat32, {1, 2, 0, 4});  // fed back strided
  std::vector<float> dense;  // the same cache, [2, T, 4] dense, grown by the test
  std::set<const void*> blocks;
  for (int64_t step = 0; step < 140; ++step) {
    std::vector<float> fresh(8), q(8);
    for (size_t i = 0; i < 8; ++i) {
      fresh[i] = std::sin(0.37f * static_cast<float>(step * 8 + static_cast<int64_t>(i)));
      q[i] = std::cos(0.53f * static_cast<float>(step * 8 + static_cast<int64_t>(i)));
    }
    const int64_t T = step;
    std::vector<float> next(static_cast<size_t>(2 * (T + 1) * 4));
    for (int64_t h = 0; h < 2; ++h) {
      std::copy_n(dense.begin() + h * T * 4, T * 4, next.begin() + h * (T + 1) * 4);
      std::copy_n(fresh.begin() + h * 4, 4, next.begin() + (h * (T + 1) + T) * 4);
    }
    const Tensor fresh_t = Tensor::FromVector(DType::kFloat32, {1, 2, 1, 4}, fresh);
    const Tensor q_t = Tensor::FromVector(DType::kFloat32, {1, 2, 1, 4}, q);
    auto want = (*s)->Run({{"past", Tensor::FromVector(DType::kFloat32, {1, 2, T, 4}, dense)}, {"new", fresh_t}, {"q", q_t}},
                          {"y", "present"});
    auto got = (*s)->Run({{"past", grown}, {"new", fresh_t}, {"q", q_t}}, {"y", "present"}, grow);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    ASSERT_EQ((*got)[1].shape(), (Shape{1, 2, T + 1, 4}));
    for (int64_t i = 0; i < 8; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>((*got)[0].data<float>()[i]), std::bit_cast<uint32_t>((*want)[0].data<float>()[i]))
          << "step " << step << " element " << i;
    }
    EXPECT_EQ(std::vector<float>((*want)[1].data<float>(), (*want)[1].data<float>() + next.size()), next);  // dense without
    grown = (*got)[1];
    blocks.insert(grown.raw_data());
    dense = std::move(next);
  }
  EXPECT_EQ(blocks.size(), 2u);  // 128 positions in the first block, the rest in the second
}

TEST(GraphPasses, APerLayerCacheReservesBoundedRoom) {
  const std::string bytes = PerLayerKVModel(true).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), OneThread());
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = (*s)->Run({{"past", Tensor::FromVector(DType::kFloat32, {1, 2, 3, 4}, std::vector<float>(24))},
                        {"new", Tensor::FromVector(DType::kFloat32, {1, 2, 1, 4}, std::vector<float>(8))}},
                       {"y"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GE((*s)->peak_intermediate_bytes(), size_t{2 * internal_ops::kKVCacheCapacityStep * 4 * 4});

  // Wide rows: two positions of 2 x 1M floats (16 MB); 128 positions would be 1 GB.
  onnx::ModelProto m = PerLayerKVModel(true);
  for (int i = 0; i < 2; ++i) {
    m.mutable_graph()->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(3)->set_dim_value(1 << 20);
  }
  const std::string wide = m.SerializeAsString();
  auto w = Session::LoadFromBuffer(wide.data(), wide.size(), OneThread());
  ASSERT_TRUE(w.ok()) << w.status();
  auto y = (*w)->Run({{"past", Tensor::Empty(DType::kFloat32, {1, 2, 1, 1 << 20})},
                      {"new", Tensor::Empty(DType::kFloat32, {1, 2, 1, 1 << 20})}},
                     {"y"});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_LT((*w)->peak_intermediate_bytes(), size_t{128} << 20);
}

// A pass that edits the nodes without telling the index.
class ForgetfulPass : public GraphPass {
 public:
  const char* name() const override { return "forgetful"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex&, const PassContext&) const override {
    g.nodes.pop_back();
    return 1;
  }
};

TEST(GraphPasses, AStaleIndexIsCaughtAndNamesThePass) {
  auto model = Load(RMSNormModel(false));
  std::vector<std::unique_ptr<GraphPass>> passes;
  passes.push_back(std::make_unique<ForgetfulPass>());
  PassContext ctx;
  ctx.check_uses = true;
  const absl::Status st = RunPasses(model->graph, passes, ctx);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("forgetful"), std::string::npos) << st;
}

// x [2, 3] * DequantizeLinear(int8 weight [3, 2], per-tensor scale, zero point 0).
onnx::ModelProto WeightOnlyModel() {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {2, 3});
  onnx::TensorProto w;
  w.set_name("w_q");
  w.set_data_type(onnx::TensorProto::INT8);
  w.add_dims(3);
  w.add_dims(2);
  for (int v : {1, -2, 3, -4, 5, -6}) w.add_int32_data(v);
  *g->add_initializer() = w;
  onnx::TensorProto zp;
  zp.set_name("w_zp");
  zp.set_data_type(onnx::TensorProto::INT8);
  zp.add_int32_data(0);
  *g->add_initializer() = zp;
  *g->add_initializer() = testing::FloatTensor("w_s", {}, {0.5f});
  *g->add_node() = testing::MakeNode("DequantizeLinear", {"w_q", "w_s", "w_zp"}, {"w"});
  *g->add_node() = testing::MakeNode("MatMul", {"x", "w"}, {"y"}, "mm");
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 2});
  return m;
}

TEST(GraphPasses, WeightFusionIsAnOption) {
  for (bool on : {true, false}) {
    SCOPED_TRACE(on);
    auto model = Load(WeightOnlyModel());
    PassReport report;
    PassContext ctx;
    ctx.weight_fusion = on;
    ctx.constant_folding = false;
    ctx.report = &report;
    ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
    EXPECT_EQ(report.counts["weight_dequant_fusion"], on ? 1 : 0);
    EXPECT_EQ(CountOps(model->graph, internal_ops::WeightDequantMatMul::kName), on ? 1 : 0);
    EXPECT_EQ(CountOps(model->graph, "DequantizeLinear"), on ? 0 : 1);
  }
}

// The fused weight product is typed for the passes after it: y -> Transpose -> MatMul(y, y^T)
// still becomes FusedMatMul (it did not while WeightDequantMatMul had no shape rule).
TEST(GraphPasses, WeightFusionOutputKeepsItsTypeForTheTransposeFusion) {
  onnx::ModelProto m = WeightOnlyModel();
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_output();
  onnx::NodeProto tr = testing::MakeNode("Transpose", {"y"}, {"y_t"}, "tr");
  onnx::AttributeProto* perm = tr.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  *g->add_node() = tr;
  *g->add_node() = testing::MakeNode("MatMul", {"y", "y_t"}, {"yy"}, "self_product");
  *g->add_output() = testing::TensorInfo("yy", onnx::TensorProto::FLOAT, {2, 2});
  auto model = Load(m);
  PassContext ctx;
  ctx.constant_folding = false;
  ASSERT_TRUE(RunSessionPasses(model->graph, ctx).ok());
  EXPECT_EQ(CountOps(model->graph, internal_ops::WeightDequantMatMul::kName), 1);
  EXPECT_EQ(CountOps(model->graph, "FusedMatMul"), 1);
}

TEST(GraphPasses, CanonicalDomainIsOneRule) {
  EXPECT_EQ(CanonicalDomain("ai.onnx"), "");
  EXPECT_EQ(CanonicalDomain(""), "");
  EXPECT_EQ(CanonicalDomain("com.microsoft"), "com.microsoft");
  Graph g;
  g.opsets[""] = 17;
  EXPECT_EQ(g.OpsetFor("ai.onnx"), 17);
}

// MatMul(A, Transpose(B, swap of the last two axes)) [-> Relu] with elem_type for A and B.
onnx::ModelProto TransposedMatMulModel(int elem, std::vector<int64_t> perm, bool transpose_also_output) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("A", elem, {2, 3, 5, 4});
  *g->add_input() = testing::TensorInfo("B", elem, {2, 3, 6, 4});
  onnx::NodeProto t = testing::MakeNode("Transpose", {"B"}, {"BT"});
  auto* a = t.add_attribute();
  a->set_name("perm");
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : perm) a->add_ints(p);
  *g->add_node() = t;
  *g->add_node() = testing::MakeNode("MatMul", {"A", "BT"}, {"Y"});
  *g->add_output() = testing::TensorInfo("Y", elem, {2, 3, 5, 6});
  if (transpose_also_output) *g->add_output() = testing::TensorInfo("BT", elem, {2, 3, 4, 6});
  return m;
}

int FusedMatMulsAfterPasses(const onnx::ModelProto& m) {
  auto model = Load(m);
  EXPECT_NE(model, nullptr);
  if (model == nullptr) return -1;
  PassContext ctx;
  ctx.check_uses = true;
  EXPECT_TRUE(RunSessionPasses(model->graph, ctx).ok());
  return CountOps(model->graph, "FusedMatMul");
}

TEST(GraphPasses, TransposeIntoMatMulOnlyForFloatLastTwoAxesAndASoleReader) {
  EXPECT_EQ(FusedMatMulsAfterPasses(TransposedMatMulModel(onnx::TensorProto::FLOAT, {0, 1, 3, 2}, false)), 1);
  EXPECT_EQ(FusedMatMulsAfterPasses(TransposedMatMulModel(onnx::TensorProto::FLOAT16, {0, 1, 3, 2}, false)), 1);
  EXPECT_EQ(FusedMatMulsAfterPasses(TransposedMatMulModel(onnx::TensorProto::DOUBLE, {0, 1, 3, 2}, false)), 0);
  EXPECT_EQ(FusedMatMulsAfterPasses(TransposedMatMulModel(onnx::TensorProto::FLOAT, {0, 1, 3, 2}, true)), 0);
  EXPECT_EQ(FusedMatMulsAfterPasses(TransposedMatMulModel(onnx::TensorProto::FLOAT, {1, 0, 3, 2}, false)), 0);
}

// The fused product equals the plain definition, for decode-sized and larger row counts (the
// GEMM's dot-product path for transposed B at M <= 4 and its packed path above).
TEST(GraphPasses, TransposeIntoMatMulComputesTheProduct) {
  const std::string bytes = TransposedMatMulModel(onnx::TensorProto::FLOAT, {0, 1, 3, 2}, false).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> a(2 * 3 * 5 * 4), b(2 * 3 * 6 * 4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.21f * static_cast<float>(i));
  auto out = (*s)->Run({{"A", Tensor::FromVector(DType::kFloat32, {2, 3, 5, 4}, a)},
                        {"B", Tensor::FromVector(DType::kFloat32, {2, 3, 6, 4}, b)}});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* y = (*out)[0].data<float>();
  for (int64_t bt = 0; bt < 6; ++bt)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        double want = 0;
        for (int64_t k = 0; k < 4; ++k) want += static_cast<double>(a[(bt * 5 + i) * 4 + k]) * b[(bt * 6 + j) * 4 + k];
        EXPECT_NEAR(y[(bt * 5 + i) * 6 + j], want, 1e-5) << bt << " " << i << " " << j;
      }
}

// float16: the fused product is the float32 product of the widened operands, rounded once (what
// the unfused float16 MatMul computes), for decode-sized M (the GEMM's dot-product path).
TEST(GraphPasses, TransposeIntoMatMulComputesTheFloat16ProductRoundedOnce) {
  const std::string bytes = TransposedMatMulModel(onnx::TensorProto::FLOAT16, {0, 1, 3, 2}, false).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status();
  Tensor a = Tensor::Empty(DType::kFloat16, {2, 3, 5, 4}), b = Tensor::Empty(DType::kFloat16, {2, 3, 6, 4});
  // Multiples of 1/8 below 4: every product and sum is exact in float32.
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<uint16_t>()[i] = F32ToF16(static_cast<float>(i % 29 - 14) / 8);
  for (int64_t i = 0; i < b.num_elements(); ++i) b.data<uint16_t>()[i] = F32ToF16(static_cast<float>(i % 23 - 11) / 8);
  auto out = (*s)->Run({{"A", a}, {"B", b}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kFloat16);
  for (int64_t bt = 0; bt < 6; ++bt)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        float want = 0;
        for (int64_t k = 0; k < 4; ++k)
          want += F16ToF32(a.data<uint16_t>()[(bt * 5 + i) * 4 + k]) * F16ToF32(b.data<uint16_t>()[(bt * 6 + j) * 4 + k]);
        ASSERT_EQ((*out)[0].data<uint16_t>()[(bt * 5 + i) * 6 + j], F32ToF16(want)) << bt << " " << i << " " << j;
      }
}

}  // namespace
}  // namespace oneinfer
