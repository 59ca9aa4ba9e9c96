// Float Conv fast paths (ops/conv_kernels.h) against their plain reference at tile and vector
// edges, for each float tier and 1 and 2 threads; the Conv fusion pass (graph/passes/
// conv_fusion.cc) on graphs built here: what it folds, what it must leave, and that the fused
// session gives the unfused values. ONNX Runtime parity of the same kinds of graphs and of real
// models is tests/conv_models_parity.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "graph/internal_ops.h"
#include "graph/onnx_loader.h"
#include "graph/passes/passes.h"
#include "oneinfer/session.h"
#include "ops/conv_kernels.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using Kind = ConvActivation::Kind;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

Conv2DParams Params(int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t G, int64_t KH, int64_t KW,
                    int64_t S, int64_t D, int64_t pad) {
  Conv2DParams p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.M = M, p.G = G, p.KH = KH, p.KW = KW;
  p.SH = p.SW = S, p.DH = p.DW = D, p.PT = p.PL = pad;
  p.OH = (H + 2 * pad - ((KH - 1) * D + 1)) / S + 1;
  p.OW = (W + 2 * pad - ((KW - 1) * D + 1)) / S + 1;
  return p;
}

std::vector<ConvActivation> Activations() {
  std::vector<ConvActivation> v;
  for (Kind k : {Kind::kNone, Kind::kRelu, Kind::kClip, Kind::kLeakyRelu, Kind::kHardSigmoid, Kind::kSigmoid,
                 Kind::kHardSwish}) {
    ConvActivation a;
    a.kind = k;
    if (k == Kind::kClip) a.alpha = -0.25f, a.beta = 0.5f;
    if (k == Kind::kLeakyRelu) a.alpha = 0.1f;
    if (k == Kind::kHardSigmoid) a.alpha = 0.3f, a.beta = 0.45f;
    v.push_back(a);
  }
  ConvActivation affine;
  affine.kind = Kind::kHardSwish;
  affine.scale = 0.75f, affine.shift = -0.125f;
  v.push_back(affine);
  return v;
}

// Every float tier this CPU runs, each forced in turn (the default restored at the end).
class EachFloatTier : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!SetKernelTier(KernelFamily::kFloat, GetParam())) GTEST_SKIP() << GetParam() << " does not run here";
  }
  void TearDown() override { ResetKernelTier(KernelFamily::kFloat); }
};

// Within float rounding of the double-accumulated reference: each output sums K products of
// |x| <= 1 and |w| <= 1/sqrt(K), so 1e-5 absolute (plus 1e-5 relative) is ~100 roundings.
constexpr float kTol = 1e-5f;

TEST_P(EachFloatTier, ConvFloat2DMatchesTheReferenceAtTileAndVectorEdges) {
  const std::vector<Conv2DParams> shapes = {
      Params(1, 5, 11, 13, 7, 1, 3, 3, 1, 1, 1),       // im2col, odd sizes
      Params(2, 4, 17, 9, 6, 1, 3, 3, 2, 1, 1),        // stride 2
      Params(1, 3, 19, 23, 4, 1, 5, 3, 1, 2, 2),       // dilation 2
      Params(1, 6, 10, 10, 9, 3, 3, 3, 1, 1, 1),       // 3 groups
      Params(1, 24, 15, 21, 40, 1, 1, 1, 1, 1, 0),     // pointwise
      Params(1, 8, 15, 15, 16, 1, 1, 1, 2, 1, 0),      // 1x1 stride 2 (im2col)
      Params(1, 16, 23, 37, 16, 16, 3, 3, 1, 1, 1),    // depthwise, 37 = 4 vectors + 5
      Params(2, 12, 40, 41, 12, 12, 3, 3, 2, 1, 1),    // depthwise stride 2
      Params(1, 8, 20, 20, 8, 8, 5, 5, 1, 1, 2),       // depthwise 5x5
      Params(1, 4, 25, 26, 4, 4, 3, 3, 3, 2, 0),       // depthwise stride 3 (reference taps)
      Params(1, 1, 1, 640, 18, 1, 1, 64, 32, 1, 0),    // 1-D as H = 1
      Params(1, 32, 40, 45, 24, 1, 3, 3, 1, 1, 1),     // 1800 outputs: several tiles, a partial one
      Params(1, 96, 30, 31, 24, 1, 3, 3, 1, 1, 1),     // K = 864: narrow tiles
  };
  std::unique_ptr<ThreadPool> two = std::make_unique<ThreadPool>(2);
  for (size_t s = 0; s < shapes.size(); ++s) {
    const Conv2DParams& p = shapes[s];
    const int64_t K = p.C / p.G * p.KH * p.KW;
    const auto x = Random(p.N * p.C * p.H * p.W, 1 + s);
    const auto w = Random(p.M * K, 100 + s, 1.f / std::sqrt(static_cast<float>(K)));
    const auto b = Random(p.M, 200 + s, 0.5f);
    for (const ConvActivation& act : Activations()) {
      std::vector<float> want(p.N * p.M * p.OH * p.OW), got(want.size());
      ConvFloat2DReference(p, x.data(), w.data(), b.data(), act, want.data());
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), two.get()}) {
        SCOPED_TRACE(::testing::Message() << "shape " << s << " (" << ConvFloat2DPath(p) << "), activation "
                                          << static_cast<int>(act.kind) << ", threads " << (pool ? 2 : 1));
        std::fill(got.begin(), got.end(), NAN);
        ConvFloat2D(p, x.data(), w.data(), b.data(), act, got.data(), pool);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], kTol + kTol * std::fabs(want[i])) << "output " << i;
      }
    }
  }
}

TEST_P(EachFloatTier, TheEpilogueMatchesTheReferenceOnEveryTail) {
  for (const ConvActivation& act : Activations()) {
    for (int64_t n = 1; n <= 37; ++n) {
      auto want = Random(n, 7 + n, 8.f);
      auto got = want;
      ApplyConvEpilogueReference(want.data(), n, 0.375f, act);
      ApplyConvEpilogue(got.data(), n, 0.375f, act);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6f + 1e-6f * std::fabs(want[i])) << static_cast<int>(act.kind) << " n " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ConvKernels, EachFloatTier, ::testing::Values("portable", "avx2", "avx512"));

TEST(ConvKernels, PathsAreChosenByShape) {
  EXPECT_STREQ(ConvFloat2DPath(Params(1, 8, 9, 9, 8, 8, 3, 3, 1, 1, 1)), "depthwise");
  EXPECT_STREQ(ConvFloat2DPath(Params(1, 8, 9, 9, 16, 1, 1, 1, 1, 1, 0)), "pointwise");
  EXPECT_STREQ(ConvFloat2DPath(Params(1, 8, 9, 9, 16, 1, 1, 1, 2, 1, 0)), "im2col");
  EXPECT_STREQ(ConvFloat2DPath(Params(1, 8, 9, 9, 16, 1, 3, 3, 1, 1, 1)), "im2col");
}

TEST(ConvKernels, AnUnknownFusedActivationOrWrongParameterCountIsAnError) {
  EXPECT_FALSE(ParseConvActivation("Gelu", {}, {}).ok());
  EXPECT_FALSE(ParseConvActivation("Clip", {0.f}, {}).ok());
  EXPECT_FALSE(ParseConvActivation("Relu", {}, {1.f}).ok());
  auto a = ParseConvActivation("HardSigmoid", {0.2f, 0.5f}, {2.f, 1.f});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Kind::kHardSigmoid);
  EXPECT_EQ(a->scale, 2.f);
}

// ---------------------------------------------------------------- the fusion pass

constexpr int64_t kC = 3, kM = 4, kH = 6, kW = 7;

onnx::TensorProto Floats(const std::string& name, const std::vector<int64_t>& dims, uint32_t seed, float lo, float hi) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return testing::FloatTensor(name, dims, v);
}

onnx::NodeProto Conv3x3(const std::string& out) {
  onnx::NodeProto n = testing::MakeNode("Conv", {"x", "W", "B"}, {out}, "conv");
  auto* pads = n.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  return n;
}

// x -> Conv -> BatchNormalization -> Mul(per channel) -> spelled HardSwish -> Mul(s) -> Add(t) = y,
// and when `conv_is_output`, the Conv's output c is a graph output too.
onnx::ModelProto ChainModel(bool conv_is_output) {
  onnx::ModelProto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {1, kC, kH, kW});
  *g->add_initializer() = Floats("W", {kM, kC, 3, 3}, 1, -0.3f, 0.3f);
  *g->add_initializer() = Floats("B", {kM}, 2, -0.5f, 0.5f);
  *g->add_initializer() = Floats("scale", {kM}, 3, 0.5f, 1.5f);
  *g->add_initializer() = Floats("bias", {kM}, 4, -1.f, 1.f);
  *g->add_initializer() = Floats("mean", {kM}, 5, -0.2f, 0.2f);
  *g->add_initializer() = Floats("var", {kM}, 6, 0.3f, 2.f);
  *g->add_initializer() = Floats("chan", {kM, 1, 1}, 7, 0.5f, 2.f);
  *g->add_initializer() = testing::FloatTensor("three", {}, {3.f});
  *g->add_initializer() = testing::FloatTensor("zero", {}, {0.f});
  *g->add_initializer() = testing::FloatTensor("six", {}, {6.f});
  *g->add_initializer() = testing::FloatTensor("s", {1}, {0.75f});
  *g->add_initializer() = testing::FloatTensor("t", {1}, {-0.125f});
  *g->add_node() = Conv3x3("c");
  *g->add_node() = testing::MakeNode("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"});
  *g->add_node() = testing::MakeNode("Mul", {"chan", "bn"}, {"a"});
  *g->add_node() = testing::MakeNode("Add", {"a", "three"}, {"a3"});
  *g->add_node() = testing::MakeNode("Clip", {"a3", "zero", "six"}, {"gate"});
  *g->add_node() = testing::MakeNode("Mul", {"a", "gate"}, {"ag"});
  *g->add_node() = testing::MakeNode("Div", {"ag", "six"}, {"hs"});
  *g->add_node() = testing::MakeNode("Mul", {"s", "hs"}, {"hs_s"});
  *g->add_node() = testing::MakeNode("Add", {"hs_s", "t"}, {"y"});
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {1, kM, kH, kW});
  if (conv_is_output) *g->add_output() = testing::TensorInfo("c", onnx::TensorProto::FLOAT, {1, kM, kH, kW});
  return m;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

TEST(ConvFusion, TheWholeChainBecomesOneFusedConv) {
  auto model = ModelFromProto(ChainModel(false), ".");
  ASSERT_TRUE(model.ok()) << model.status();
  Graph& g = (*model)->graph;
  ASSERT_TRUE(SortTopologically(g, {}).ok());
  UseDefIndex uses(g);
  ASSERT_EQ(FuseConvChains(g, uses), 1);
  EXPECT_TRUE(uses == UseDefIndex(g));
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& f = g.nodes[0];
  EXPECT_EQ(f.op_type, internal_ops::FusedConv::kName);
  EXPECT_EQ(f.GetString(internal_ops::FusedConv::kActivation, ""), "HardSwish");
  EXPECT_EQ(f.GetFloats(internal_ops::FusedConv::kOutputAffine), (std::vector<float>{0.75f, -0.125f}));
  EXPECT_EQ(f.outputs[0], "y");
  EXPECT_EQ(f.GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(ConvFusion, AConvOutputOthersReadStaysAConv) {
  auto model = ModelFromProto(ChainModel(true), ".");
  ASSERT_TRUE(model.ok()) << model.status();
  Graph& g = (*model)->graph;
  ASSERT_TRUE(SortTopologically(g, {}).ok());
  UseDefIndex uses(g);
  EXPECT_EQ(FuseConvChains(g, uses), 0);
  EXPECT_EQ(CountOps(g, "Conv"), 1);
  EXPECT_EQ(CountOps(g, "BatchNormalization"), 1);
}

// The fused session against the same chain run node by node (its Conv output kept as a graph
// output, which stops the fusion): the folded BatchNormalization and the epilogue agree within
// float rounding of the folded weights.
TEST(ConvFusion, TheFusedSessionGivesTheUnfusedValues) {
  const auto x = Random(kC * kH * kW, 11, 2.f);
  auto run = [&](bool conv_is_output) {
    const std::string bytes = ChainModel(conv_is_output).SerializeAsString();
    SessionOptions o;
    o.num_threads = 1;
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
    EXPECT_TRUE(s.ok()) << s.status();
    auto y = (*s)->Run({{"x", Tensor::FromVector(DType::kFloat32, {1, kC, kH, kW}, x)}}, {"y"});
    EXPECT_TRUE(y.ok()) << y.status();
    return std::vector<float>((*y)[0].data<float>(), (*y)[0].data<float>() + (*y)[0].num_elements());
  };
  const auto fused = run(false), unfused = run(true);
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], unfused[i], 2e-6f + 2e-6f * std::fabs(unfused[i])) << i;
}

TEST(ConvFusion, ABadFusedActivationIsALoadError) {
  onnx::ModelProto m = testing::MakeModel(17);
  auto* op = m.add_opset_import();
  op->set_domain(internal_ops::kDomain);
  op->set_version(internal_ops::kOpset);
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {1, kC, kH, kW});
  *g->add_initializer() = Floats("W", {kM, kC, 3, 3}, 1, -0.3f, 0.3f);
  *g->add_initializer() = Floats("B", {kM}, 2, -0.5f, 0.5f);
  onnx::NodeProto n = Conv3x3("y");
  n.set_op_type(internal_ops::FusedConv::kName);
  n.set_domain(internal_ops::kDomain);
  auto* act = n.add_attribute();
  act->set_name(internal_ops::FusedConv::kActivation);
  act->set_type(onnx::AttributeProto::STRING);
  act->set_s("Gelu");
  *g->add_node() = n;
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {1, kM, kH, kW});
  const std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Gelu"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace oneinfer
