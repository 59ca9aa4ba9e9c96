// Unit tests for the elementwise families (ops/unary.cc, binary.cc, logic.cc, cast.cc):
// broadcasting, integer edge cases, legacy forms, Cast text.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::IntAttr;
using testing::StrAttr;

// A node whose first output is declared with element type `out`.
testing::OneNode Node(const std::string& op, DType out, int opset, std::vector<Attribute> attrs = {}, int threads = 1) {
  return {.op = op, .opset = opset, .attrs = std::move(attrs), .output_types = {out}, .threads = threads};
}

// Runs the node on `inputs` (in0, in1, ...; an undefined tensor leaves its input out); output 0.
Tensor RunOne(const testing::OneNode& node, const std::vector<Tensor>& inputs) {
  auto out = node.Outputs(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return Tensor();
  return (*out)[0];
}

template <typename T>
Tensor Make(DType d, Shape shape, std::vector<T> v) {
  return Tensor::FromVector(d, std::move(shape), v);
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Index of out element `flat` in an input of shape `in` broadcast to `out`.
int64_t BroadcastIndex(const Shape& in, const Shape& out, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    const int64_t c = flat % out[d];
    flat /= out[d];
    const int64_t id = d - static_cast<int64_t>(out.size() - in.size());
    if (id >= 0) {
      if (in[id] != 1) idx += c * stride;
      stride *= in[id];
    }
  }
  return idx;
}

TEST(ElementwiseOps, BroadcastShapesMatchNaive) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {}},        {{}, {2, 3, 4}},        {{2, 3, 4}, {4}},
      {{2, 1, 4}, {3, 1}},    {{2, 3, 1, 5}, {1, 3, 4, 1}}, {{1, 1, 7}, {5, 1, 1}}, {{300, 257}, {257}},
      {{300, 257}, {300, 1}}, {{4, 1, 600}, {1, 50, 600}},  {{2, 0, 3}, {3}}};
  for (int threads : {1, 4}) {
    for (const auto& [sa, sb] : cases) {
      Shape so(std::max(sa.size(), sb.size()), 1);
      for (size_t i = 0; i < so.size(); ++i) {
        const int64_t da = i + sa.size() >= so.size() ? sa[i + sa.size() - so.size()] : 1;
        const int64_t db = i + sb.size() >= so.size() ? sb[i + sb.size() - so.size()] : 1;
        so[i] = da == 1 ? db : da;
      }
      const auto va = Random(NumElements(sa), 1), vb = Random(NumElements(sb), 2);
      for (const char* op : {"Sub", "Div", "Pow", "Less"}) {
        const bool is_bool = std::string(op) == "Less";
        Tensor y = RunOne(Node(op, is_bool ? DType::kBool : DType::kFloat32, 13, {}, threads),
                          {Make(DType::kFloat32, sa, va), Make(DType::kFloat32, sb, vb)});
        ASSERT_EQ(y.shape(), so) << op;
        for (int64_t i = 0; i < NumElements(so); ++i) {
          const float a = va[BroadcastIndex(sa, so, i)], b = vb[BroadcastIndex(sb, so, i)];
          if (is_bool) {
            ASSERT_EQ(y.data<bool>()[i], a < b) << op << " " << i;
            continue;
          }
          const float want = op[0] == 'S' ? a - b : op[0] == 'D' ? a / b : std::pow(a, b);
          const float got = y.data<float>()[i];
          if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << op << " " << i;
          else ASSERT_NEAR(got, want, 1e-5f * std::fabs(want) + 1e-6f) << op << " " << ShapeToString(sa) << " " << ShapeToString(sb) << " " << i;
        }
      }
    }
  }
}

TEST(ElementwiseOps, IntegerDivAndModEdgeCases) {
  const Shape s{6};
  auto a = Make<int32_t>(DType::kInt32, s, {7, -7, 7, -7, INT32_MIN, 5});
  auto b = Make<int32_t>(DType::kInt32, s, {2, 2, -2, -2, -1, 0});
  Tensor d = RunOne(Node("Div", DType::kInt32, 14), {a, b});
  EXPECT_EQ(std::vector<int32_t>(d.data<int32_t>(), d.data<int32_t>() + 6),
            (std::vector<int32_t>{3, -3, -3, 3, INT32_MIN, 0}));
  Tensor m = RunOne(Node("Mod", DType::kInt32, 13), {a, b});
  EXPECT_EQ(std::vector<int32_t>(m.data<int32_t>(), m.data<int32_t>() + 6), (std::vector<int32_t>{1, 1, -1, -1, 0, 0}));
  Tensor f = RunOne(Node("Mod", DType::kInt32, 13, {IntAttr("fmod", 1)}), {a, b});
  EXPECT_EQ(std::vector<int32_t>(f.data<int32_t>(), f.data<int32_t>() + 6), (std::vector<int32_t>{1, -1, 1, -1, 0, 0}));
}

// Integer arithmetic wraps around in two's complement, as numpy and ONNX Runtime do, without
// undefined behaviour (fuzz_model found int64 Mul overflowing under UBSan:
// tests/data/fuzz/model/int64_mul_overflow).
TEST(ElementwiseOps, IntegerOverflowWrapsAround) {
  const Shape s{3};
  auto a = Make<int64_t>(DType::kInt64, s, {INT64_MAX, int64_t{1} << 62, INT64_MIN});
  auto b = Make<int64_t>(DType::kInt64, s, {1, 4, 1});
  auto values = [](const Tensor& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + 3); };
  EXPECT_EQ(values(RunOne(Node("Add", DType::kInt64, 14), {a, b})), (std::vector<int64_t>{INT64_MIN, (int64_t{1} << 62) + 4, INT64_MIN + 1}));
  EXPECT_EQ(values(RunOne(Node("Mul", DType::kInt64, 14), {a, b})), (std::vector<int64_t>{INT64_MAX, 0, INT64_MIN}));
  EXPECT_EQ(values(RunOne(Node("Sub", DType::kInt64, 14), {b, a})), (std::vector<int64_t>{INT64_MIN + 2, 4 - (int64_t{1} << 62), INT64_MIN + 1}));
  EXPECT_EQ(values(RunOne(Node("Neg", DType::kInt64, 13), {a})), (std::vector<int64_t>{-INT64_MAX, -(int64_t{1} << 62), INT64_MIN}));
  EXPECT_EQ(values(RunOne(Node("Abs", DType::kInt64, 13), {a})), (std::vector<int64_t>{INT64_MAX, int64_t{1} << 62, INT64_MIN}));
  // uint16 * uint16 promotes to int, where 65535 * 65535 would overflow.
  auto u = Make<uint16_t>(DType::kUInt16, {1}, {65535});
  EXPECT_EQ(RunOne(Node("Mul", DType::kUInt16, 14), {u, u}).data<uint16_t>()[0], 1);
}

TEST(ElementwiseOps, LegacyBroadcastAxis) {
  // Opset 6 Add with broadcast=1, axis=1: b [3] lines up with a's dim 1.
  std::vector<float> va(12, 0.0f);
  Tensor y = RunOne(Node("Add", DType::kFloat32, 6, {IntAttr("broadcast", 1), IntAttr("axis", 1)}),
                    {Make(DType::kFloat32, {2, 3, 2}, va), Make<float>(DType::kFloat32, {3}, {1, 2, 3})});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.data<float>()[0], 1);
  EXPECT_EQ(y.data<float>()[2], 2);
  EXPECT_EQ(y.data<float>()[5], 3);
  EXPECT_EQ(y.data<float>()[6], 1);
}

TEST(ElementwiseOps, CastFloatToStringLikeNumpy) {
  const std::vector<float> v = {1.0f, 0.1f, 1e-5f, 1e16f, 123456.7f, -0.5f, 0.0f, -INFINITY, NAN, 3e-4f, 1.5e20f};
  const Shape s{static_cast<int64_t>(v.size())};
  Tensor y = RunOne(Node("Cast", DType::kString, 13, {IntAttr("to", 8)}), {Make(DType::kFloat32, s, v)});
  const std::vector<std::string> want = {"1.0", "0.1", "1e-05", "1e+16", "123456.7", "-0.5", "0.0", "-inf", "nan",
                                         "0.0003", "1.5e+20"};
  ASSERT_EQ(y.dtype(), DType::kString);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(y.data<std::string>()[i], want[i]);
  // float16 prints its own shortest digits.
  Tensor h = RunOne(Node("Cast", DType::kString, 13, {IntAttr("to", 8)}),
                    {Make<Eigen::half>(DType::kFloat16, {2}, {Eigen::half(0.1f), Eigen::half(1000.0f)})});
  EXPECT_EQ(h.data<std::string>()[0], "0.1");
  EXPECT_EQ(h.data<std::string>()[1], "1000.0");
}

TEST(ElementwiseOps, CastStringToNumbers) {
  const Shape s{5};
  Tensor x = Make<std::string>(DType::kString, s, {"1.5", " -INF", "+INF", "NaN", "1e3"});
  Tensor y = RunOne(Node("Cast", DType::kFloat32, 13, {IntAttr("to", 1)}), {x});
  EXPECT_EQ(y.data<float>()[0], 1.5f);
  EXPECT_TRUE(std::isinf(y.data<float>()[1]) && y.data<float>()[1] < 0);
  EXPECT_TRUE(std::isinf(y.data<float>()[2]) && y.data<float>()[2] > 0);
  EXPECT_TRUE(std::isnan(y.data<float>()[3]));
  EXPECT_EQ(y.data<float>()[4], 1000.0f);
  auto sess = Node("Cast", DType::kInt32, 13, {IntAttr("to", 6)}).Load({DType::kString});
  ASSERT_TRUE(sess.ok());
  auto bad = (*sess)->Run({{"in0", Make<std::string>(DType::kString, {1}, {"abc"})}}, {});
  EXPECT_FALSE(bad.ok());
}

TEST(ElementwiseOps, WhereStringsAndClipInt) {
  Tensor y = RunOne(Node("Where", DType::kString, 16),
                    {Make<bool>(DType::kBool, {2}, {true, false}), Make<std::string>(DType::kString, {1}, {"a"}),
                     Make<std::string>(DType::kString, {2}, {"b", "c"})});
  EXPECT_EQ(y.data<std::string>()[0], "a");
  EXPECT_EQ(y.data<std::string>()[1], "c");
  Tensor c = RunOne(Node("Clip", DType::kInt8, 13),
                    {Make<int8_t>(DType::kInt8, {3}, {-100, 5, 100}), Tensor(), Make<int8_t>(DType::kInt8, {}, {10})});
  EXPECT_EQ(c.data<int8_t>()[0], -100);
  EXPECT_EQ(c.data<int8_t>()[2], 10);
}

TEST(ElementwiseOps, BadAttributesFailAtLoad) {
  EXPECT_FALSE(Node("Gelu", DType::kFloat32, 20, {StrAttr("approximate", "fast")}).Load({DType::kFloat32}).ok());
  EXPECT_FALSE(
      Node("BitShift", DType::kUInt8, 11, {StrAttr("direction", "UP")}).Load({DType::kUInt8, DType::kUInt8}).ok());
  auto s = Node("Add", DType::kFloat32, 14).Load({DType::kFloat32, DType::kFloat32});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->Run({{"in0", Make<float>(DType::kFloat32, {2}, {1, 2})},
                          {"in1", Make<float>(DType::kFloat32, {3}, {1, 2, 3})}}, {}).ok());
}

// Not a pass/fail check: prints float32 throughput of the decoding-style shapes.
TEST(ElementwiseOps, Float32Throughput) {
  const Shape big{64, 4096}, row{4096}, scalar{};
  const auto va = Random(NumElements(big), 3), vr = Random(4096, 4);
  struct Case { const char* op; Shape b; };
  for (const Case& c : {Case{"Add", big}, Case{"Mul", row}, Case{"Div", scalar}, Case{"Pow", scalar}}) {
    auto s = Node(c.op, DType::kFloat32, 15, {}, 2).Load({DType::kFloat32, DType::kFloat32});
    ASSERT_TRUE(s.ok());
    Tensor a = Make(DType::kFloat32, big, va);
    Tensor b = c.b.empty() ? Make<float>(DType::kFloat32, {}, {2.0f})
                           : Make(DType::kFloat32, c.b, c.b.size() == 1 ? vr : va);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*s)->Run({{"in0", a}, {"in1", b}}, {}).ok());
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
    std::printf("%s [64,4096] x %s: %.1f us/run\n", c.op, ShapeToString(c.b).c_str(), us);
  }
}

}  // namespace
}  // namespace oneinfer
