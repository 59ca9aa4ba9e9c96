// float16 Add, Sub, Mul and Div: computed in float32 and rounded once per element (the values of
// ONNX Runtime's CPU kernels), through the bulk conversions, bit for bit against the scalar
// reference, over broadcast forms, runs longer than a block, and special values. float16 unary
// ops: the float32 kernel's value on the widened input, rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

bool IsNaN16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(Float16Elementwise, ArithmeticIsTheFloat32ResultRoundedOnce) {
  struct Case { std::vector<int64_t> a, b, y; };
  const Case cases[] = {{{3, 600}, {3, 600}, {3, 600}},  // same shape, runs past one block
                        {{3, 600}, {600}, {3, 600}},     // a row broadcast
                        {{3, 1}, {3, 600}, {3, 600}},    // a column broadcast (a scalar per run)
                        {{}, {5, 7}, {5, 7}}};           // a scalar
  // Random values over the float16 range plus zeros, infinities, NaN and subnormals.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  const uint16_t special[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff, 0x7bff, 0x3c00};
  auto fill = [&](Tensor& t) {
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      t.data<uint16_t>()[i] = i % 11 == 0 ? special[(i / 11) % 9] : static_cast<uint16_t>(bits(rng));
    }
  };
  const std::vector<std::pair<std::string, float (*)(float, float)>> ops = {
      {"Add", [](float x, float y) { return x + y; }}, {"Sub", [](float x, float y) { return x - y; }},
      {"Mul", [](float x, float y) { return x * y; }}, {"Div", [](float x, float y) { return x / y; }}};
  for (const auto& [op, fn] : ops) {
    for (const Case& c : cases) {
      const std::string bytes = BinaryModel(op, onnx::TensorProto::FLOAT16, c.a, c.b, c.y).SerializeAsString();
      SessionOptions o;
      o.num_threads = 2;
      auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
      ASSERT_TRUE(s.ok()) << s.status();
      Tensor a = Tensor::Empty(DType::kFloat16, c.a), b = Tensor::Empty(DType::kFloat16, c.b);
      fill(a);
      fill(b);
      auto y = (*s)->Run({{"a", a}, {"b", b}});
      ASSERT_TRUE(y.ok()) << y.status();
      const int64_t cols = c.y.empty() ? 1 : c.y.back();
      for (int64_t i = 0; i < (*y)[0].num_elements(); ++i) {
        const int64_t r = i / cols, col = i % cols;
        auto at = [&](const Tensor& t, const std::vector<int64_t>& dims) {
          if (dims.empty()) return t.data<uint16_t>()[0];
          if (dims.size() == 1) return t.data<uint16_t>()[col];
          return t.data<uint16_t>()[r * dims.back() + (dims.back() == 1 ? 0 : col)];
        };
        const uint16_t want = F32ToF16(fn(F16ToF32(at(a, c.a)), F16ToF32(at(b, c.b))));
        const uint16_t got = (*y)[0].data<uint16_t>()[i];
        if (IsNaN16(want)) ASSERT_TRUE(IsNaN16(got)) << op << " " << i;
        else ASSERT_EQ(got, want) << op << " element " << i;
      }
    }
  }
}

TEST(Float16Elementwise, UnaryOpsAreTheFloat32KernelRoundedOnce) {
  // Every float16 bit pattern once (runs past a block and split over two threads).
  Tensor x16 = Tensor::Empty(DType::kFloat16, {2, 32768});
  Tensor x32 = Tensor::Empty(DType::kFloat32, {2, 32768});
  for (int64_t i = 0; i < x16.num_elements(); ++i) {
    x16.data<uint16_t>()[i] = static_cast<uint16_t>(i);
    x32.data<float>()[i] = F16ToF32(static_cast<uint16_t>(i));
  }
  for (const std::string op : {"Sigmoid", "Neg", "Relu", "Abs", "Exp", "Log", "Sqrt", "Tanh", "Erf", "Reciprocal",
                               "Softplus", "HardSwish", "Sin", "Floor", "Round"}) {
    auto run = [&](int elem, const Tensor& x) {
      onnx::ModelProto m = MakeModel();
      *m.mutable_graph()->add_input() = TensorInfo("x", elem, {2, 32768});
      *m.mutable_graph()->add_node() = MakeNode(op, {"x"}, {"y"});
      *m.mutable_graph()->add_output() = TensorInfo("y", elem, {2, 32768});
      const std::string bytes = m.SerializeAsString();
      SessionOptions o;
      o.num_threads = 2;
      auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
      EXPECT_TRUE(s.ok()) << op << ": " << s.status();
      auto y = (*s)->Run({{"x", x}});
      EXPECT_TRUE(y.ok()) << op << ": " << y.status();
      return (*y)[0];
    };
    const Tensor y16 = run(onnx::TensorProto::FLOAT16, x16);
    const Tensor y32 = run(onnx::TensorProto::FLOAT, x32);
    for (int64_t i = 0; i < y16.num_elements(); ++i) {
      const uint16_t want = F32ToF16(y32.data<float>()[i]), got = y16.data<uint16_t>()[i];
      if (IsNaN16(want)) ASSERT_TRUE(IsNaN16(got)) << op << " of " << std::hex << i;
      else ASSERT_EQ(got, want) << op << " of 0x" << std::hex << i;
    }
  }
}

}  // namespace
}  // namespace oneinfer
