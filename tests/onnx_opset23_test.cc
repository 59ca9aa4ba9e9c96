// The ai.onnx operators opset 23 added (RMSNormalization, RotaryEmbedding, Attention) against
// plain references and hand-computed cases, through one-node sessions; the version-23 forms of
// older operators that are refused. ONNX Runtime parity: tests/contrib_ort_parity.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "ops/onnx_attention.h"
#include "ops/op_util.h"
#include "tests/op_harness.h"

namespace oneinfer::testing {
namespace {

using ::testing::HasSubstr;

Tensor Random(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::Empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(rng);
  return t;
}
Tensor F32(const Shape& s, const std::vector<float>& v) { return Tensor::FromVector<float>(DType::kFloat32, s, v); }
Tensor Bools(const Shape& s, const std::vector<bool>& v) {
  Tensor t = Tensor::Empty(DType::kBool, s);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
Tensor I64(const Shape& s, const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(DType::kInt64, s, v); }

// Near within abs + rel * |want|, and masked scores (-inf, qk_matmul_output_mode 2) equal.
void ExpectNearOrSameInf(const Tensor& got, const Tensor& want, double abs_tol, double rel_tol) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = AsDoubles(got), w = AsDoubles(want);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(w[i])) EXPECT_EQ(g[i], w[i]) << "element " << i;
    else EXPECT_NEAR(g[i], w[i], abs_tol + rel_tol * std::fabs(w[i])) << "element " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// RMSNormalization

TEST(OnnxRmsNorm, HandComputedRow) {
  auto y = OneNode{.op = "RMSNormalization", .attrs = {FloatAttr("epsilon", 0.5f)}}.Outputs({F32({1, 2}, {3, 4}), F32({2}, {1, 2})});
  ASSERT_TRUE(y.ok()) << y.status();
  const double rms = std::sqrt((9.0 + 16.0) / 2 + 0.5);  // sqrt(13)
  ExpectTensorNear((*y)[0], F32({1, 2}, {static_cast<float>(3 / rms), static_cast<float>(8 / rms)}), 1e-6);
}

// Y over axes [axis, rank) with the scale broadcast against X: a scale of the normalised shape's
// last dimension, and one that varies over the leading (not normalised) dimension too.
TEST(OnnxRmsNorm, MatchesPlainLoopsWithBroadcastScales) {
  const Tensor x = Random({2, 3, 4}, 1, -2.f, 2.f);
  struct Case {
    int64_t axis;
    Tensor scale;
  };
  const std::vector<Case> cases = {{-1, Random({4}, 2)}, {1, Random({4}, 3)}, {1, Random({3, 4}, 4)},
                                   {-1, Random({2, 1, 4}, 5)}, {2, Random({2, 3, 1}, 6)}, {0, Random({1}, 7)}};
  for (const Case& c : cases) {
    for (int threads : {1, 3}) {
      auto y = OneNode{.op = "RMSNormalization", .attrs = {IntAttr("axis", c.axis)}, .threads = threads}.Outputs({x, c.scale});
      ASSERT_TRUE(y.ok()) << y.status();
      const int64_t ax = c.axis < 0 ? c.axis + 3 : c.axis;
      int64_t h = 1;
      for (int64_t d = ax; d < 3; ++d) h *= x.dim(d);
      Tensor want = Tensor::Empty(DType::kFloat32, x.shape());
      const std::vector<int64_t> st = BroadcastStrides(c.scale.shape(), x.shape());
      for (int64_t r = 0; r < x.num_elements() / h; ++r) {
        double sq = 0;
        for (int64_t i = 0; i < h; ++i) sq += std::pow(x.data<float>()[r * h + i], 2);
        const double inv = 1 / std::sqrt(sq / h + 1e-5);
        for (int64_t i = 0; i < h; ++i) {
          const int64_t e = r * h + i, c0 = e / 12, c1 = e / 4 % 3, c2 = e % 4;
          const float g = c.scale.data<float>()[c0 * st[0] + c1 * st[1] + c2 * st[2]];
          want.data<float>()[e] = static_cast<float>(x.data<float>()[e] * inv * g);
        }
      }
      ExpectTensorNear((*y)[0], want, 1e-6, 1e-6);
    }
  }
}

// The same arithmetic as SimplifiedLayerNormalization (one shared kernel) where both apply;
// float16 is the float32 result rounded once; Y has the scale's type.
TEST(OnnxRmsNorm, SharesSimplifiedLayerNormAndRoundsFloat16Once) {
  const Tensor x = Random({3, 8}, 11), g = Random({8}, 12);
  auto rms = OneNode{.op = "RMSNormalization"}.Outputs({x, g});
  auto sln = OneNode{.op = "SimplifiedLayerNormalization", .opset = 1}.Outputs({x, g});
  ASSERT_TRUE(rms.ok() && sln.ok()) << rms.status() << sln.status();
  ExpectTensorEq((*rms)[0], (*sln)[0]);
  const Tensor xh = ToF16(x), gh = ToF16(g);
  auto y16 = OneNode{.op = "RMSNormalization"}.Outputs({xh, gh});
  auto y32 = OneNode{.op = "RMSNormalization"}.Outputs({ToF32(xh), ToF32(gh)});
  ASSERT_TRUE(y16.ok() && y32.ok()) << y16.status() << y32.status();
  ExpectTensorEq((*y16)[0], ToF16((*y32)[0]));
  auto mixed = OneNode{.op = "RMSNormalization"}.Outputs({ToF32(xh), gh});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ExpectTensorEq((*mixed)[0], (*y16)[0]);
}

TEST(OnnxRmsNorm, BadInputsAreErrorsNamingTheNode) {
  const Tensor x = Random({2, 4}, 1);
  struct Bad {
    std::vector<Attribute> attrs;
    std::vector<Tensor> in;
    const char* needle;
  };
  const std::vector<Bad> bad = {
      {{}, {x, Random({3}, 2)}, "does not broadcast to X"},
      {{}, {x, Random({2, 2, 4}, 2)}, "does not broadcast to X"},
      {{IntAttr("stash_type", 0)}, {x, Random({4}, 2)}, "stash_type 0 is not supported"},
      {{IntAttr("axis", 2)}, {x, Random({4}, 2)}, "axis 2 is out of range"},
      {{}, {I64({2}, {1, 2}), Random({2}, 2)}, "must be float32, float16 or bfloat16"},
  };
  for (const Bad& b : bad) {
    auto y = OneNode{.op = "RMSNormalization", .attrs = b.attrs}.Outputs(b.in);
    ASSERT_FALSE(y.ok()) << b.needle;
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("RMSNormalization 'n'"));
    EXPECT_THAT(std::string(y.status().message()), HasSubstr(b.needle));
  }
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding-23

// The spec's compute_rotary_embedding, element by element in double.
Tensor RotaryByTheSpec(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor* pos, int64_t num_heads,
                       int64_t rot_dim, bool interleaved) {
  const bool four = x.rank() == 4;
  const int64_t B = x.dim(0), S = four ? x.dim(2) : x.dim(1), N = four ? x.dim(1) : num_heads;
  const int64_t H = four ? x.dim(3) : x.dim(2) / N, R = rot_dim > 0 ? rot_dim : H, half = R / 2;
  Tensor y = Tensor::Empty(DType::kFloat32, x.shape());
  const int64_t w = cos.dim(-1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = four ? ((b * N + n) * S + s) * H : ((b * S + s) * N + n) * H;
        const int64_t row = pos ? pos->data<int64_t>()[b * S + s] : b * S + s;
        const float* xi = x.data<float>() + base;
        float* yo = y.data<float>() + base;
        for (int64_t d = R; d < H; ++d) yo[d] = xi[d];
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos.data<float>()[row * w + i], sn = sin.data<float>()[row * w + i];
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          yo[i1] = static_cast<float>(c * xi[i1] - sn * xi[i2]);
          yo[i2] = static_cast<float>(sn * xi[i1] + c * xi[i2]);
        }
      }
  return y;
}

TEST(OnnxRotaryEmbedding, MatchesTheSpecInEveryForm) {
  struct Case {
    Shape x;
    int64_t num_heads, rot_dim;
    bool interleaved, with_pos;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 8}, 0, 0, false, true},   {{2, 3, 4, 8}, 0, 0, true, true},  {{2, 4, 24}, 3, 0, false, true},
      {{2, 4, 24}, 3, 4, true, true},      {{2, 4, 24}, 3, 4, false, false}, {{1, 2, 5, 16}, 2, 8, false, false},
      {{1, 5, 32}, 2, 0, true, false},
  };
  uint32_t seed = 20;
  for (const Case& c : cases) {
    const Tensor x = Random(c.x, ++seed);
    const bool four = c.x.size() == 4;
    const int64_t B = c.x[0], S = four ? c.x[2] : c.x[1];
    const int64_t H = four ? c.x[3] : c.x[2] / c.num_heads, half = (c.rot_dim > 0 ? c.rot_dim : H) / 2;
    const Shape cache = c.with_pos ? Shape{10, half} : Shape{B, S, half};
    const Tensor cos = Random(cache, ++seed), sin = Random(cache, ++seed);
    std::vector<int64_t> p(static_cast<size_t>(B * S));
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>((i * 7 + 3) % 10);
    const Tensor pos = I64({B, S}, p);
    std::vector<Attribute> attrs = {IntAttr("interleaved", c.interleaved)};
    if (c.num_heads) attrs.push_back(IntAttr("num_heads", c.num_heads));
    if (c.rot_dim) attrs.push_back(IntAttr("rotary_embedding_dim", c.rot_dim));
    std::vector<Tensor> in = {x, cos, sin};
    if (c.with_pos) in.push_back(pos);
    for (int threads : {1, 3}) {
      auto y = OneNode{.op = "RotaryEmbedding", .attrs = attrs, .threads = threads}.Outputs(in);
      ASSERT_TRUE(y.ok()) << y.status();
      ExpectTensorNear((*y)[0], RotaryByTheSpec(x, cos, sin, c.with_pos ? &pos : nullptr, c.num_heads, c.rot_dim, c.interleaved),
                       1e-6, 1e-6);
    }
    // float16: the float32 result on the rounded inputs, rounded once.
    std::vector<Tensor> in16;
    for (const Tensor& t : in) in16.push_back(t.dtype() == DType::kFloat32 ? ToF16(t) : t);
    std::vector<Tensor> in32;
    for (const Tensor& t : in16) in32.push_back(t.dtype() == DType::kFloat16 ? ToF32(t) : t);
    auto y16 = OneNode{.op = "RotaryEmbedding", .attrs = attrs}.Outputs(in16);
    auto y32 = OneNode{.op = "RotaryEmbedding", .attrs = attrs}.Outputs(in32);
    ASSERT_TRUE(y16.ok() && y32.ok()) << y16.status() << y32.status();
    ExpectTensorEq((*y16)[0], ToF16((*y32)[0]));
  }
}

// A hand-computed rotation: position 1 of a cache whose angle there is 90 degrees.
TEST(OnnxRotaryEmbedding, HandComputedQuarterTurn) {
  const Tensor x = F32({1, 1, 1, 4}, {1, 2, 3, 4});
  const Tensor cos = F32({2, 2}, {1, 1, 0, 0}), sin = F32({2, 2}, {0, 0, 1, 1});
  auto y = OneNode{.op = "RotaryEmbedding"}.Outputs({x, cos, sin, I64({1, 1}, {1})});
  ASSERT_TRUE(y.ok()) << y.status();
  // halves (1, 3) and (2, 4): (a, b) -> (-b, a).
  ExpectTensorEq((*y)[0], F32({1, 1, 1, 4}, {-3, -4, 1, 2}));
  auto yi = OneNode{.op = "RotaryEmbedding", .attrs = {IntAttr("interleaved", 1)}}.Outputs({x, cos, sin, I64({1, 1}, {1})});
  ASSERT_TRUE(yi.ok()) << yi.status();
  ExpectTensorEq((*yi)[0], F32({1, 1, 1, 4}, {-2, 1, -4, 3}));
}

TEST(OnnxRotaryEmbedding, BadInputsAreErrorsNamingTheNode) {
  const Tensor x3 = Random({1, 2, 8}, 1), x4 = Random({1, 2, 2, 4}, 2);
  const Tensor c2 = Random({4, 2}, 3), c3 = Random({1, 2, 2}, 4);
  struct Bad {
    std::vector<Attribute> attrs;
    std::vector<Tensor> in;
    const char* needle;
  };
  const std::vector<Bad> bad = {
      {{}, {x3, c2, c2, I64({1, 2}, {0, 1})}, "3-D X needs the num_heads attribute"},
      {{IntAttr("num_heads", 3)}, {x3, c2, c2, I64({1, 2}, {0, 1})}, "not a multiple of num_heads"},
      {{}, {x4, c2, c2, I64({1, 2}, {0, 4})}, "position 4 (batch 0, token 1) is outside cos_cache's 4 positions"},
      {{}, {x4, c2, c2}, "without position_ids, cos_cache [4, 2] must be [batch 1, sequence 2"},
      {{}, {x4, c3, c3, I64({1, 2}, {0, 1})}, "with position_ids, cos_cache [1, 2, 2] must be [positions"},
      {{IntAttr("rotary_embedding_dim", 3)}, {x4, c2, c2, I64({1, 2}, {0, 1})}, "must be even"},
      {{IntAttr("num_heads", 4)}, {x4, c2, c2, I64({1, 2}, {0, 1})}, "disagrees with X's 2 heads"},
      {{IntAttr("interleaved", 2)}, {x4, c2, c2, I64({1, 2}, {0, 1})}, "interleaved must be 0 or 1"},
      {{}, {x4, c2, c2, I64({2, 2}, {0, 1, 0, 1})}, "position_ids [2, 2] must be [batch 1, sequence 2]"},
  };
  for (const Bad& b : bad) {
    auto y = OneNode{.op = "RotaryEmbedding", .attrs = b.attrs}.Outputs(b.in);
    ASSERT_FALSE(y.ok()) << b.needle;
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("RotaryEmbedding 'n'"));
    EXPECT_THAT(std::string(y.status().message()), HasSubstr(b.needle));
  }
}

// ---------------------------------------------------------------------------------------------
// Attention

struct AttnCase {
  const char* what;
  bool three_d = false;
  int64_t B = 1, Hq = 2, Hkv = 2, Sq = 3, L = 3, P = 0, D = 8, Dv = 8;
  bool causal = false;
  std::optional<float> scale;
  float softcap = 0.f;
  int mask = 0;  // 0 none, 1 bool [B, 1, Sq, T], 2 float [Sq, T], 3 float [T], 4 bool [B, Hq, Sq, T]
  int64_t mode = 0;
};

std::vector<AttnCase> AttnCases() {
  std::vector<AttnCase> c;
  c.push_back({"4-D MHA"});
  c.push_back({"3-D MHA", true});
  c.push_back({"3-D GQA 4/2", true, 2, 4, 2, 3, 5});
  c.push_back({"4-D GQA 6/2, Dv != D", false, 2, 6, 2, 2, 4, 0, 16, 8});
  c.push_back({"3-D MQA 4/1", true, 1, 4, 1, 4, 4, 0, 8, 8, true});
  c.push_back({"causal square", false, 2, 2, 2, 4, 4, 0, 8, 8, true});
  c.push_back({"causal cross Sq < L", false, 1, 2, 2, 2, 5, 0, 8, 8, true});
  c.push_back({"causal with past", false, 2, 4, 2, 2, 2, 3, 8, 8, true});
  c.push_back({"causal decode with past, 3-D", true, 2, 4, 1, 1, 1, 5, 8, 8, true});
  c.push_back({"past without causal", true, 1, 2, 2, 3, 2, 4, 16, 16});
  c.push_back({"bool mask", false, 2, 2, 2, 3, 4, 2, 8, 8, false, {}, 0.f, 1});
  c.push_back({"float mask [Sq, T]", true, 1, 4, 2, 3, 3, 1, 8, 8, false, {}, 0.f, 2});
  c.push_back({"float mask [T]", false, 1, 2, 1, 2, 6, 0, 8, 8, false, {}, 0.f, 3});
  c.push_back({"bool mask per head with causal", false, 2, 2, 2, 3, 3, 2, 8, 8, true, {}, 0.f, 4});
  c.push_back({"scale", false, 1, 2, 2, 3, 3, 0, 8, 8, false, 0.3f});
  c.push_back({"softcap with scale", false, 1, 2, 2, 3, 3, 0, 8, 8, false, 2.f, 1.5f});
  c.push_back({"softcap with float mask", true, 1, 2, 2, 3, 3, 0, 8, 8, false, {}, 0.7f, 2});
  for (int64_t mode : {0, 1, 2, 3}) {
    c.push_back({"qk modes with softcap, mask, causal, past", false, 1, 4, 2, 2, 3, 2, 8, 8, true, 1.2f, 0.9f, 2, mode});
  }
  return c;
}

// The case's inputs, float32 (values up to 2 so scores reach the softcap).
std::vector<Tensor> AttnInputs(const AttnCase& c, uint32_t seed) {
  const int64_t T = c.P + c.L;
  std::vector<Tensor> in;
  in.push_back(c.three_d ? Random({c.B, c.Sq, c.Hq * c.D}, seed, -2, 2) : Random({c.B, c.Hq, c.Sq, c.D}, seed, -2, 2));
  in.push_back(c.three_d ? Random({c.B, c.L, c.Hkv * c.D}, seed + 1, -2, 2) : Random({c.B, c.Hkv, c.L, c.D}, seed + 1, -2, 2));
  in.push_back(c.three_d ? Random({c.B, c.L, c.Hkv * c.Dv}, seed + 2) : Random({c.B, c.Hkv, c.L, c.Dv}, seed + 2));
  Tensor mask;
  std::mt19937 rng(seed + 3);
  auto bools = [&](const Shape& s) {
    std::vector<bool> v(static_cast<size_t>(NumElements(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = rng() % 3 != 0 || i % T == 0;  // key 0 stays visible
    return Bools(s, v);
  };
  if (c.mask == 1) mask = bools({c.B, 1, c.Sq, T});
  if (c.mask == 2) mask = Random({c.Sq, T}, seed + 3, -3, 1);
  if (c.mask == 3) mask = Random({T}, seed + 3, -3, 1);
  if (c.mask == 4) mask = bools({c.B, c.Hq, c.Sq, T});
  in.push_back(mask);
  if (c.P > 0) {
    in.push_back(Random({c.B, c.Hkv, c.P, c.D}, seed + 4, -2, 2));
    in.push_back(Random({c.B, c.Hkv, c.P, c.Dv}, seed + 5));
  }
  return in;
}

std::vector<Attribute> AttnAttrs(const AttnCase& c) {
  std::vector<Attribute> a = {IntAttr("is_causal", c.causal), IntAttr("qk_matmul_output_mode", c.mode)};
  if (c.three_d) a.push_back(IntAttr("q_num_heads", c.Hq)), a.push_back(IntAttr("kv_num_heads", c.Hkv));
  if (c.scale) a.push_back(FloatAttr("scale", *c.scale));
  if (c.softcap > 0) a.push_back(FloatAttr("softcap", c.softcap));
  return a;
}

std::vector<Tensor> Reference(const AttnCase& c, const std::vector<Tensor>& in) {
  AttentionAttrs a;
  if (c.three_d) a.q_num_heads = c.Hq, a.kv_num_heads = c.Hkv;
  a.scale = c.scale;
  a.softcap = c.softcap;
  a.is_causal = c.causal;
  a.qk_matmul_output_mode = c.mode;
  AttentionInputs r{&in[0], &in[1], &in[2]};
  if (in[3].defined()) r.attn_mask = &in[3];
  if (in.size() > 4) r.past_key = &in[4], r.past_value = &in[5];
  return AttentionReference(a, r);
}

TEST(OnnxAttention, KernelMatchesTheReference) {
  uint32_t seed = 100;
  for (const AttnCase& c : AttnCases()) {
    const std::vector<Tensor> in = AttnInputs(c, seed += 10);
    const std::vector<Tensor> want = Reference(c, in);
    for (int threads : {1, 3}) {
      auto y = OneNode{.op = "Attention", .attrs = AttnAttrs(c), .num_outputs = 4, .threads = threads}.Outputs(in);
      ASSERT_TRUE(y.ok()) << c.what << ": " << y.status();
      for (size_t o = 0; o < 4; ++o) {
        SCOPED_TRACE(std::string(c.what) + " output " + std::to_string(o) + " threads " + std::to_string(threads));
        if (o == 1 || o == 2) ExpectTensorEq((*y)[o], want[o]);  // present: the inputs' values
        else ExpectNearOrSameInf((*y)[o], want[o], 2e-5, 2e-5);
      }
    }
  }
}

// Two keys, one query, scale 1: softmax([1, 0]) weighs the value rows.
TEST(OnnxAttention, HandComputedTwoKeys) {
  const Tensor q = F32({1, 1, 1, 2}, {1, 0}), k = F32({1, 1, 2, 2}, {1, 0, 0, 1}), v = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  const double p0 = std::exp(1.0) / (std::exp(1.0) + 1), p1 = 1 - p0;
  const Tensor want = F32({1, 1, 1, 2}, {static_cast<float>(p0 + 3 * p1), static_cast<float>(2 * p0 + 4 * p1)});
  auto y = OneNode{.op = "Attention", .attrs = {FloatAttr("scale", 1.f)}}.Outputs({q, k, v});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectTensorNear((*y)[0], want, 1e-6);
  AttentionAttrs a;
  a.scale = 1.f;
  ExpectTensorNear(AttentionReference(a, {&q, &k, &v})[0], want, 1e-6);
  // A bool mask hiding key 1 leaves value row 0; a float mask of -inf does the same.
  auto m = OneNode{.op = "Attention", .attrs = {FloatAttr("scale", 1.f)}}.Outputs({q, k, v, Bools({2}, {true, false})});
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectTensorEq((*m)[0], F32({1, 1, 1, 2}, {1, 2}));
  auto f = OneNode{.op = "Attention", .attrs = {FloatAttr("scale", 1.f)}}.Outputs({q, k, v, F32({2}, {0, -INFINITY})});
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectTensorEq((*f)[0], F32({1, 1, 1, 2}, {1, 2}));
}

// is_causal with a past: query i sees keys j <= i + past (the bottom-right frontier of the
// ONNX errata), so the last query sees all keys and the first all but the last.
TEST(OnnxAttention, CausalWithPastIsBottomRightAligned) {
  AttnCase c{"", false, 1, 1, 1, 2, 2, 3, 4, 4, true};
  c.mode = 3;
  const std::vector<Tensor> in = AttnInputs(c, 7);
  auto y = OneNode{.op = "Attention", .attrs = AttnAttrs(c), .num_outputs = 4}.Outputs(in);
  ASSERT_TRUE(y.ok()) << y.status();
  const float* p = (*y)[3].data<float>();  // [1, 1, 2, 5] softmax weights
  for (int j = 0; j < 4; ++j) EXPECT_GT(p[j], 0.f) << j;
  EXPECT_EQ(p[4], 0.f);
  for (int j = 0; j < 5; ++j) EXPECT_GT(p[5 + j], 0.f) << j;
}

// A row whose every key is masked gives zeros (Y and the softmax), not NaN.
TEST(OnnxAttention, FullyMaskedRowIsZero) {
  const Tensor q = Random({1, 1, 2, 4}, 1), k = Random({1, 1, 3, 4}, 2), v = Random({1, 1, 3, 4}, 3);
  const Tensor mask = Bools({2, 3}, {false, false, false, true, false, true});
  auto y = OneNode{.op = "Attention", .attrs = {IntAttr("qk_matmul_output_mode", 3)}, .num_outputs = 4}.Outputs({q, k, v, mask});
  ASSERT_TRUE(y.ok()) << y.status();
  for (int d = 0; d < 4; ++d) EXPECT_EQ((*y)[0].data<float>()[d], 0.f) << d;
  for (int j = 0; j < 3; ++j) EXPECT_EQ((*y)[3].data<float>()[j], 0.f) << j;
  EXPECT_GT((*y)[0].data<float>()[4] * (*y)[0].data<float>()[4], 0.f);
}

// float16: within a few float16 units of the reference on the rounded inputs; present exact.
TEST(OnnxAttention, Float16IsWidenedAndRoundedOnce) {
  uint32_t seed = 500;
  for (const AttnCase& c : AttnCases()) {
    std::vector<Tensor> in = AttnInputs(c, seed += 10);
    std::vector<Tensor> in16, in32;
    for (const Tensor& t : in) {
      const bool f = t.defined() && t.dtype() == DType::kFloat32;
      in16.push_back(f ? ToF16(t) : t);
      in32.push_back(f ? ToF32(in16.back()) : t);
    }
    const std::vector<Tensor> want = Reference(c, in32);
    auto y = OneNode{.op = "Attention", .attrs = AttnAttrs(c), .num_outputs = 4}.Outputs(in16);
    ASSERT_TRUE(y.ok()) << c.what << ": " << y.status();
    for (size_t o = 0; o < 4; ++o) {
      SCOPED_TRACE(std::string(c.what) + " output " + std::to_string(o));
      if (o == 1 || o == 2) ExpectTensorEq((*y)[o], ToF16(want[o]));
      else ExpectNearOrSameInf(ToF32((*y)[o]), want[o], 2e-3, 2e-3);
    }
  }
}

TEST(OnnxAttention, BadInputsAreErrorsNamingTheNode) {
  const Tensor q4 = Random({1, 2, 2, 4}, 1), k4 = Random({1, 2, 3, 4}, 2), v4 = Random({1, 2, 3, 4}, 3);
  const Tensor q3 = Random({1, 2, 8}, 4), k3 = Random({1, 3, 8}, 5);
  const Tensor pk = Random({1, 2, 1, 4}, 6);
  const Tensor none;
  struct Bad {
    std::vector<Attribute> attrs;
    std::vector<Tensor> in;
    const char* needle;
  };
  const std::vector<Bad> bad = {
      {{}, {q3, k3, k3}, "3-D inputs need positive q_num_heads and kv_num_heads"},
      {{IntAttr("q_num_heads", 3), IntAttr("kv_num_heads", 2)}, {q3, k3, k3}, "do not split into q_num_heads 3"},
      {{IntAttr("q_num_heads", 2), IntAttr("kv_num_heads", 4)}, {q3, Random({1, 3, 16}, 5), Random({1, 3, 16}, 5)}, "must be a positive multiple of key/value heads 4"},
      {{}, {q4, k4, v4, none, pk}, "past_key and past_value must be given together"},
      {{}, {q4, k4, v4, none, Random({1, 2, 1, 8}, 7), pk}, "past_key [1, 2, 1, 8] must be [1, 2, past, 4]"},
      {{}, {q4, k4, v4, Random({2, 2}, 8)}, "must end in the total sequence length 3"},
      {{}, {q4, k4, v4, Random({3, 3}, 8)}, "does not broadcast to [1, 2, 2, 3]"},
      {{}, {q4, k4, v4, I64({3}, {0, 0, 0})}, "attn_mask must be bool or float32"},
      {{}, {q4, k4, Random({1, 2, 4, 4}, 9)}, "does not match K"},
      {{}, {q4, Random({1, 2, 3, 2}, 9), v4}, "K's head size 2 differs from Q's 4"},
      {{}, {q4, ToF16(k4), v4}, "K and V must be float32 as Q is"},
      {{}, {q3, k4, v4}, "must all be 3-D or all 4-D"},
      {{IntAttr("q_num_heads", 4)}, {q4, k4, v4}, "disagree with the 4-D inputs' heads 2 / 2"},
      {{IntAttr("is_causal", 2)}, {q4, k4, v4}, "is_causal must be 0 or 1"},
      {{IntAttr("qk_matmul_output_mode", 4)}, {q4, k4, v4}, "qk_matmul_output_mode must be 0..3"},
      {{FloatAttr("softcap", -1.f)}, {q4, k4, v4}, "softcap must be 0 (none) or positive"},
      {{IntAttr("softmax_precision", 11)}, {q4, k4, v4}, "softmax_precision 11 is not implemented"},
  };
  for (const Bad& b : bad) {
    auto y = OneNode{.op = "Attention", .attrs = b.attrs}.Outputs(b.in);
    ASSERT_FALSE(y.ok()) << b.needle;
    EXPECT_THAT(std::string(y.status().message()), HasSubstr("Attention 'n'")) << b.needle;
    EXPECT_THAT(std::string(y.status().message()), HasSubstr(b.needle));
  }
  // bfloat16 and double are refused, not computed.
  Tensor qb = Tensor::Empty(DType::kBFloat16, {1, 1, 1, 2});
  for (int64_t i = 0; i < 2; ++i) qb.data<uint16_t>()[i] = F32ToBf16(1.f);
  auto y = OneNode{.op = "Attention"}.Outputs({qb, qb, qb});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("Q of type bfloat16 is not implemented"));
}

// ---------------------------------------------------------------------------------------------
// Version-23 forms of older operators

TEST(Opset23, QuantizeDequantizeNewAttributes) {
  const Tensor x = F32({4}, {0, 1, 2, 3}), s = F32({}, {0.5f});
  // DequantizeLinear-23's output_dtype equal to the scale's type runs; another is refused.
  const Tensor q = Tensor::FromVector<uint8_t>(DType::kUInt8, {4}, {0, 1, 2, 3});
  auto same = OneNode{.op = "DequantizeLinear", .attrs = {IntAttr("output_dtype", 1)}}.Outputs({q, s});
  ASSERT_TRUE(same.ok()) << same.status();
  ExpectTensorEq((*same)[0], F32({4}, {0, 0.5f, 1, 1.5f}));
  auto other = OneNode{.op = "DequantizeLinear", .attrs = {IntAttr("output_dtype", 10)}}.Outputs({q, s});
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("DequantizeLinear 'n': output_dtype float16 differs from x_scale's type float32"));
  auto f4 = OneNode{.op = "DequantizeLinear", .attrs = {IntAttr("output_dtype", 23)}}.Outputs({q, s});
  ASSERT_FALSE(f4.ok());
  EXPECT_THAT(std::string(f4.status().message()), HasSubstr("output_dtype float4e2m1 is not supported"));
  // QuantizeLinear-23's precision: float32 (what the kernel computes) runs; float16 is refused.
  auto p1 = OneNode{.op = "QuantizeLinear", .attrs = {IntAttr("precision", 1)}}.Outputs({x, s});
  ASSERT_TRUE(p1.ok()) << p1.status();
  ExpectTensorEq((*p1)[0], Tensor::FromVector<uint8_t>(DType::kUInt8, {4}, {0, 2, 4, 6}));
  auto p10 = OneNode{.op = "QuantizeLinear", .attrs = {IntAttr("precision", 10)}}.Outputs({x, s});
  ASSERT_FALSE(p10.ok());
  EXPECT_THAT(std::string(p10.status().message()), HasSubstr("QuantizeLinear 'n': precision 10"));
  // float4e2m1, new in 23, is refused as a Cast target.
  auto c = OneNode{.op = "Cast", .attrs = {IntAttr("to", 23)}}.Outputs({x});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("Cast 'n'"));
}

}  // namespace
}  // namespace oneinfer::testing
