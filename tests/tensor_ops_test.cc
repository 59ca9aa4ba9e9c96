// Unit tests for the data-movement families (ops/shape.cc, slice_concat.cc, gather_scatter.cc,
// generators.cc, selection.cc): cases the ONNX test data does not reach (opset 18+ versions,
// strings, out-of-range indices, the transpose/concat fast paths on multi-threaded pools).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StrAttr;

Tensor I64(Shape s, std::vector<int64_t> v) { return Tensor::FromVector(DType::kInt64, std::move(s), v); }
Tensor F32(Shape s, std::vector<float> v) { return Tensor::FromVector(DType::kFloat32, std::move(s), v); }
Tensor Str(Shape s, std::vector<std::string> v) { return Tensor::FromVector(DType::kString, std::move(s), v); }

// One node through the shared harness; an undefined tensor input is omitted ("").
absl::StatusOr<std::vector<Value>> RunOp(const std::string& op, int64_t opset, const std::vector<Value>& inputs,
                                         std::vector<Attribute> attrs, size_t n_out = 1, int threads = 1) {
  return testing::OneNode{.op = op, .opset = opset, .attrs = std::move(attrs), .num_outputs = n_out, .threads = threads}
      .RunValues(inputs);
}

Value V(Tensor t) { return Value::FromTensor(std::move(t)); }
Value None() { return V(Tensor()); }

template <typename T>
std::vector<T> Data(const Value& v) {
  const Tensor& t = v.tensor;
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

TEST(TensorOps, ReshapeIsAViewAndHandlesZeroAndMinusOne) {
  Tensor x = F32({2, 3, 4}, std::vector<float>(24, 1.0f));
  auto r = RunOp("Reshape", 14, {V(x), V(I64({3}, {0, -1, 2}))}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tensor.shape(), (Shape{2, 6, 2}));
  EXPECT_EQ((*r)[0].tensor.raw_data(), x.raw_data());
  auto z = RunOp("Reshape", 14, {V(Tensor::Empty(DType::kFloat32, {0, 3})), V(I64({2}, {3, 0}))}, {IntAttr("allowzero", 1)});
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ((*z)[0].tensor.shape(), (Shape{3, 0}));
  auto bad = RunOp("Reshape", 14, {V(x), V(I64({2}, {5, -1}))}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorOps, IdentityPassesSequencesThrough) {
  Value seq = Value::FromSequence({F32({1}, {1.0f}), F32({2}, {2.0f, 3.0f})}, DType::kFloat32);
  auto r = RunOp("Identity", 16, {seq}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*r)[0].is_sequence());
  EXPECT_EQ((*r)[0].sequence.size(), 2u);
}

TEST(TensorOps, OutOfRangeIndicesAreErrors) {
  Tensor data = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(RunOp("Gather", 13, {V(data), V(I64({1}, {3}))}, {IntAttr("axis", 0)}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("Gather", 13, {V(data), V(I64({1}, {-4}))}, {IntAttr("axis", 1)}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("GatherElements", 13, {V(data), V(I64({1, 1}, {7}))}, {}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("GatherND", 13, {V(data), V(I64({1, 2}, {0, 3}))}, {}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("ScatterND", 13, {V(data), V(I64({1, 1}, {2})), V(F32({1, 3}, {0, 0, 0}))}, {}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("ScatterElements", 13, {V(data), V(I64({1, 1}, {-3})), V(F32({1, 1}, {0}))}, {}).status().code(), kInvalid);
  EXPECT_EQ(RunOp("Concat", 13, {V(data), V(F32({3}, {1, 2, 3}))}, {IntAttr("axis", 0)}).status().code(), kInvalid);
  auto ok = RunOp("Gather", 13, {V(data), V(I64({2}, {-1, 0}))}, {IntAttr("axis", 1)});
  ASSERT_TRUE(ok.ok()) << ok.status();
  testing::ExpectTensorEq((*ok)[0].tensor, F32({2, 2}, {3, 1, 6, 4}));
}

TEST(TensorOps, Split18UnevenNumOutputs) {
  auto r = RunOp("Split", 18, {V(I64({7}, {0, 1, 2, 3, 4, 5, 6}))}, {IntAttr("num_outputs", 3)}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data<int64_t>((*r)[0]), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(Data<int64_t>((*r)[1]), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(Data<int64_t>((*r)[2]), (std::vector<int64_t>{6}));
}

TEST(TensorOps, PadWrapAxesAndStrings) {
  auto w = RunOp("Pad", 19, {V(F32({3}, {1, 2, 3})), V(I64({2}, {2, 1}))}, {StrAttr("mode", "wrap")});
  ASSERT_TRUE(w.ok()) << w.status();
  testing::ExpectTensorEq((*w)[0].tensor, F32({6}, {2, 3, 1, 2, 3, 1}));
  auto a = RunOp("Pad", 18, {V(F32({2, 2}, {1, 2, 3, 4})), V(I64({2}, {1, 0})), V(F32({}, {9})), V(I64({1}, {-1}))}, {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].tensor.shape(), (Shape{2, 3}));
  EXPECT_EQ(Data<float>((*a)[0]), (std::vector<float>{9, 1, 2, 9, 3, 4}));
  auto s = RunOp("Pad", 13, {V(Str({2}, {"a", "b"})), V(I64({2}, {1, 1})), V(Str({}, {"z"}))}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Data<std::string>((*s)[0]), (std::vector<std::string>{"z", "a", "b", "z"}));
  auto bad = RunOp("Pad", 13, {V(F32({3}, {1, 2, 3})), V(I64({2}, {1, 1}))}, {StrAttr("mode", "wrap")});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(TensorOps, ScatterReductions) {
  Tensor data = F32({4}, {1, 5, 3, 7});
  auto mx = RunOp("ScatterND", 18, {V(data), V(I64({2, 1}, {0, 1})), V(F32({2}, {4, 2}))}, {StrAttr("reduction", "max")});
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_EQ(Data<float>((*mx)[0]), (std::vector<float>{4, 5, 3, 7}));
  auto mn = RunOp("ScatterElements", 18, {V(data), V(I64({2}, {3, 3})), V(F32({2}, {4, 2}))}, {StrAttr("reduction", "min")});
  ASSERT_TRUE(mn.ok()) << mn.status();
  EXPECT_EQ(Data<float>((*mn)[0]), (std::vector<float>{1, 5, 3, 2}));
  auto bad = RunOp("ScatterND", 16, {V(data), V(I64({1, 1}, {0})), V(F32({1}, {4}))}, {StrAttr("reduction", "max")});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(TensorOps, SliceNegativeStepsAndSentinels) {
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  Tensor x = I64({5}, {0, 1, 2, 3, 4});
  auto r = RunOp("Slice", 13, {V(x), V(I64({1}, {kMax})), V(I64({1}, {kMin})), V(I64({1}, {0})), V(I64({1}, {-2}))}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data<int64_t>((*r)[0]), (std::vector<int64_t>{4, 2, 0}));
  auto s = RunOp("Slice", 13, {V(x), V(I64({1}, {1})), V(I64({1}, {kMax})), None(), V(I64({1}, {kMax}))}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Data<int64_t>((*s)[0]), (std::vector<int64_t>{1}));
}

TEST(TensorOps, TransposeFastPathsMatchNaive) {
  for (int threads : {1, 4}) {
    // 2-D blocked transpose.
    const int64_t R = 1031, C = 517;
    std::vector<float> v(R * C);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    auto t = RunOp("Transpose", 13, {V(F32({R, C}, v))}, {}, 1, threads);
    ASSERT_TRUE(t.ok()) << t.status();
    auto out = Data<float>((*t)[0]);
    for (int64_t i = 0; i < C; ++i)
      for (int64_t j = 0; j < R; ++j) ASSERT_EQ(out[i * R + j], v[j * C + i]);
    // [B,S,H,D] -> [B,H,S,D].
    const int64_t B = 2, S = 257, H = 8, D = 64;
    std::vector<int64_t> w(B * S * H * D);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>(i);
    auto u = RunOp("Transpose", 13, {V(I64({B, S, H, D}, w))}, {IntsAttr("perm", {0, 2, 1, 3})}, 1, threads);
    ASSERT_TRUE(u.ok()) << u.status();
    auto o = Data<int64_t>((*u)[0]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d) ASSERT_EQ(o[((b * H + h) * S + s) * D + d], w[((b * S + s) * H + h) * D + d]);
  }
}

TEST(TensorOps, ConcatKvCacheAxis2AndStrings) {
  std::vector<int64_t> a(2 * 3 * 4 * 2), b(2 * 3 * 1 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int64_t>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1000 + static_cast<int64_t>(i);
  auto r = RunOp("Concat", 13, {V(I64({2, 3, 4, 2}, a)), V(I64({2, 3, 1, 2}, b))}, {IntAttr("axis", 2)}, 1, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tensor.shape(), (Shape{2, 3, 5, 2}));
  auto o = Data<int64_t>((*r)[0]);
  EXPECT_EQ(o[8], 1000);  // first (b,h) block: 4x2 from a, then 1x2 from b
  EXPECT_EQ(o[10], 8);
  auto s = RunOp("Concat", 13, {V(Str({1}, {"x"})), V(Str({2}, {"y", "z"}))}, {IntAttr("axis", 0)});
  ASSERT_TRUE(s.ok()) << s.status();
  testing::ExpectTensorEq((*s)[0].tensor, Str({3}, {"x", "y", "z"}));
}

TEST(TensorOps, UniqueStringsAndExpandBool) {
  auto u = RunOp("Unique", 11, {V(Str({5}, {"b", "a", "b", "c", "a"}))}, {IntAttr("sorted", 0)}, 4);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(Data<std::string>((*u)[0]), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(Data<int64_t>((*u)[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(Data<int64_t>((*u)[2]), (std::vector<int64_t>{0, 1, 0, 2, 1}));
  EXPECT_EQ(Data<int64_t>((*u)[3]), (std::vector<int64_t>{2, 2, 1}));
  Tensor b = Tensor::FromVector<bool>(DType::kBool, {2, 1}, {true, false});
  auto e = RunOp("Expand", 13, {V(b), V(I64({2}, {2, 3}))}, {});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(Data<bool>((*e)[0]), (std::vector<bool>{true, true, true, false, false, false}));
}

TEST(TensorOps, ContiguousSliceAndSplitAreViews) {
  Tensor x = I64({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto r = RunOp("Slice", 13, {V(x), V(I64({1}, {1})), V(I64({1}, {3}))}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data<int64_t>((*r)[0]), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ((*r)[0].tensor.raw_data(), static_cast<const void*>(x.data<int64_t>() + 2));
  auto s = RunOp("Split", 13, {V(x), V(I64({2}, {3, 1}))}, {}, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Data<int64_t>((*s)[1]), (std::vector<int64_t>{6, 7}));
  auto c = RunOp("Slice", 13, {V(x), V(I64({1}, {1})), V(I64({1}, {2})), V(I64({1}, {1}))}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Data<int64_t>((*c)[0]), (std::vector<int64_t>{1, 3, 5, 7}));
}

}  // namespace
}  // namespace oneinfer
