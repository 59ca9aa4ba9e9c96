// Reduction-family behaviour the ONNX test data (opsets <= 17) does not reach: empty sets,
// noop_with_empty_axes, bool ReduceMax, TopK ties, the parallel fast paths, bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "ops/op_util.h"
#include "tests/op_harness.h"

namespace oneinfer {
namespace {

struct Run1 {
  absl::Status status;
  std::vector<Tensor> outs;
};

// Runs one node at `opset` through the shared harness, without constant folding.
Run1 RunNode(const std::string& op, int64_t opset, const std::vector<Tensor>& ins, size_t n_out,
             std::vector<Attribute> attrs = {}, int threads = 4) {
  testing::OneNode node{.op = op, .opset = opset, .attrs = std::move(attrs), .num_outputs = n_out, .threads = threads,
                        .constant_folding = false};
  Run1 r;
  auto o = node.Outputs(ins);
  if (!o.ok()) r.status = o.status();
  else r.outs = *o;
  return r;
}

using testing::IntAttr;
using testing::IntsAttr;

Tensor F(Shape s, std::vector<float> v) { return Tensor::FromVector(DType::kFloat32, std::move(s), v); }
Tensor I64(Shape s, std::vector<int64_t> v) { return Tensor::FromVector(DType::kInt64, std::move(s), v); }

TEST(Reduce, EmptySetGivesIdentity) {
  const Tensor x = F({2, 0, 4}, {});
  const Tensor axes = I64({1}, {1});
  const float inf = std::numeric_limits<float>::infinity();
  struct C { const char* op; float want; };
  for (const C& c : {C{"ReduceSum", 0.f}, C{"ReduceProd", 1.f}, C{"ReduceMax", -inf}, C{"ReduceMin", inf},
                     C{"ReduceL1", 0.f}, C{"ReduceL2", 0.f}, C{"ReduceSumSquare", 0.f}, C{"ReduceLogSum", -inf},
                     C{"ReduceLogSumExp", -inf}}) {
    Run1 r = RunNode(c.op, 18, {x, axes}, 1);
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status;
    ASSERT_EQ(r.outs[0].shape(), (Shape{2, 1, 4})) << c.op;
    for (int i = 0; i < 8; ++i) EXPECT_EQ(r.outs[0].data<float>()[i], c.want) << c.op;
  }
}

TEST(Reduce, NoopWithEmptyAxes) {
  const Tensor x = F({2, 2}, {1, -2, 3, 4});
  Run1 r = RunNode("ReduceSum", 13, {x, I64({0}, {})}, 1, {IntAttr("noop_with_empty_axes", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outs[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(r.outs[0].data<float>()[1], -2.f);
  r = RunNode("ReduceSumSquare", 18, {x, I64({0}, {})}, 1, {IntAttr("noop_with_empty_axes", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outs[0].data<float>()[1], 4.f);
  // Without noop, empty axes reduce everything.
  r = RunNode("ReduceMean", 18, {x, I64({0}, {})}, 1, {IntAttr("keepdims", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outs[0].rank(), 0);
  EXPECT_FLOAT_EQ(r.outs[0].data<float>()[0], 1.5f);
}

TEST(Reduce, BoolMaxAndBadAxis) {
  Tensor b = Tensor::FromVector(DType::kBool, {2, 2}, std::vector<bool>{false, true, false, false});
  Run1 r = RunNode("ReduceMax", 20, {b, I64({1}, {1})}, 1);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.outs[0].data<bool>()[0]);
  EXPECT_FALSE(r.outs[0].data<bool>()[1]);
  r = RunNode("ReduceSum", 13, {F({2, 2}, {1, 2, 3, 4}), I64({1}, {5})}, 1);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(Reduce, LargeLastAxisMatchesNaive) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t rows = 300, cols = 257;
  std::vector<float> v(rows * cols);
  for (float& f : v) f = u(rng);
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceLogSumExp"}) {
    Run1 r = RunNode(op, 18, {F({rows, cols}, v), I64({1}, {-1})}, 1);
    ASSERT_TRUE(r.status.ok()) << r.status;
    for (int64_t i = 0; i < rows; ++i) {
      double s = 0, e = 0;
      for (int64_t j = 0; j < cols; ++j) s += v[i * cols + j], e += std::exp(v[i * cols + j]);
      const double want = std::string(op) == "ReduceSum" ? s : std::string(op) == "ReduceMean" ? s / cols : std::log(e);
      EXPECT_NEAR(r.outs[0].data<float>()[i], want, 1e-4) << op << " row " << i;
    }
  }
  // Leading and middle axes exercise the strided paths.
  Run1 r = RunNode("ReduceMax", 13, {F({rows, cols}, v)}, 1, {IntsAttr("axes", {0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int64_t j = 0; j < cols; ++j) {
    float m = -1e9f;
    for (int64_t i = 0; i < rows; ++i) m = std::max(m, v[i * cols + j]);
    EXPECT_EQ(r.outs[0].data<float>()[j], m);
  }
}

TEST(Softmax, LargeRowsSumToOne) {
  const int64_t rows = 64, cols = 1000;
  std::vector<float> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) * 0.5f;
  Run1 r = RunNode("Softmax", 13, {F({rows, cols}, v)}, 1);
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += r.outs[0].data<float>()[i * cols + j];
    EXPECT_NEAR(s, 1.0, 1e-4);
  }
}

TEST(TopK, TiesGoToLowerIndex) {
  Run1 r = RunNode("TopK", 11, {F({1, 5}, {1, 3, 3, 2, 3}), I64({1}, {2})}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outs[1].data<int64_t>()[0], 1);
  EXPECT_EQ(r.outs[1].data<int64_t>()[1], 2);
  r = RunNode("TopK", 11, {F({1, 5}, {1, 3, 3, 2, 3}), I64({1}, {6})}, 2);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerNorm, RowsAndStats) {
  const int64_t rows = 100, cols = 512;
  std::vector<float> v(rows * cols), sc(cols, 2.f), b(cols, 1.f);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13);
  Run1 r = RunNode("LayerNormalization", 17, {F({rows, cols}, v), F({cols}, sc), F({cols}, b)}, 3);
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int64_t i = 0; i < rows; i += 17) {
    double m = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) m += v[i * cols + j];
    m /= cols;
    for (int64_t j = 0; j < cols; ++j) var += (v[i * cols + j] - m) * (v[i * cols + j] - m);
    var /= cols;
    EXPECT_NEAR(r.outs[1].data<float>()[i], m, 1e-4);
    EXPECT_NEAR(r.outs[0].data<float>()[i * cols + 3], (v[i * cols + 3] - m) / std::sqrt(var + 1e-5) * 2 + 1, 1e-3);
  }
}

// A softmax row rounds the same wherever it lives: the fused attention's scratch rows, the op's
// output tensor and other threads' buffers sit at different alignments (Eigen's packets start
// where the data is aligned, and its scalar exp differs from the packet one in the last bit).
TEST(Softmax, ARowRoundsTheSameAtEveryAlignment) {
  for (int64_t n : {5, 13, 37, 300}) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = 3.1f * std::sin(0.77f * static_cast<float>(i)) - 1.2f;
    std::vector<float> want(static_cast<size_t>(n));
    SoftmaxRowF32(row.data(), want.data(), n);
    std::vector<float> in(static_cast<size_t>(n + 16)), out(static_cast<size_t>(n + 16));
    for (int64_t shift = 1; shift < 16; ++shift) {
      std::copy(row.begin(), row.end(), in.begin() + shift);
      SoftmaxRowF32(in.data() + shift, out.data() + 15 - shift, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(15 - shift + i)]), std::bit_cast<uint32_t>(want[static_cast<size_t>(i)]))
            << "n " << n << " shift " << shift << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace oneinfer
