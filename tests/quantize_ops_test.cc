// Unit tests for the quantisation ops that the ONNX 1.12 test data does not cover: opset-21 blocked and
// 4/16-bit quantisation, com.microsoft Q/DQ, and the validation errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/round.h"
#include "ops/op_util.h"
#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::IntAttr;

// The libm-free rounding the quantisers use is std::nearbyint, clamped: on ties at every scale,
// on random bit patterns over all exponents (subnormals, huge values, infinities), both types.
TEST(RoundHalfEven, EqualsClampedNearbyint) {
  const auto ref_f = [](float v, float lo, float hi) { return static_cast<int32_t>(std::clamp(std::nearbyint(v), lo, hi)); };
  const auto ref_d = [](double v, double lo, double hi) { return static_cast<int32_t>(std::clamp(std::nearbyint(v), lo, hi)); };
  const std::pair<double, double> ranges[] = {{-128, 127}, {0, 255}, {-383, 127}, {-2147483648.0, 2147483520.0}};
  std::vector<double> probes = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 127.5, -128.5, 255.5, 0.49999997,
                                8388607.5, 4194304.5, 1e30, -1e30, INFINITY, -INFINITY, 1e-40, -1e-45};
  for (int k = -600; k <= 600; ++k) probes.push_back(k + 0.5);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isnan(d)) probes.push_back(d);
    uint32_t b32 = static_cast<uint32_t>(bits >> 11);
    float f;
    std::memcpy(&f, &b32, sizeof f);
    if (!std::isnan(f)) probes.push_back(f);
    probes.push_back(std::ldexp(static_cast<double>(bits % 20001) - 10000.0, -static_cast<int>(bits % 7)));  // small, with ties
  }
  int checked = 0;
  for (const auto& [lo, hi] : ranges) {
    for (double v : probes) {
      ASSERT_EQ(RoundHalfEvenClamped(v, lo, hi), ref_d(v, lo, hi)) << v << " in [" << lo << ", " << hi << "]";
      if (std::abs(lo) < 1e6) {  // float bounds are exact integers only up to 2^24
        const float vf = static_cast<float>(v), lf = static_cast<float>(lo), hf = static_cast<float>(hi);
        ASSERT_EQ(RoundHalfEvenClamped(vf, lf, hf), ref_f(vf, lf, hf)) << vf;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000000);
}

// A node and the tensors it runs on (all fed as graph inputs; an undefined tensor = omitted input).
struct Case {
  testing::OneNode node;
  std::vector<Tensor> inputs;
};

absl::StatusOr<std::vector<Value>> RunOne(const Case& c) { return c.node.Run(c.inputs); }

// Packs 4-bit values, low nibble first.
Tensor Pack4(DType t, Shape shape, const std::vector<int>& v) {
  Tensor x = Tensor::Empty(t, std::move(shape));
  uint8_t* p = x.data<uint8_t>();
  for (size_t i = 0; i < v.size(); ++i) p[i / 2] |= static_cast<uint8_t>((v[i] & 0xF) << ((i % 2) * 4));
  return x;
}

std::vector<int> Unpack4(const Tensor& t) {
  std::vector<int> v;
  const uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int n = (p[i / 2] >> ((i % 2) * 4)) & 0xF;
    if (t.dtype() == DType::kInt4 && n >= 8) n -= 16;
    v.push_back(n);
  }
  return v;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

Tensor F(Shape s, std::vector<float> v) { return Tensor::FromVector(DType::kFloat32, std::move(s), v); }

TEST(QuantizeOps, DequantizeBlockedInt4WithPartialLastBlock) {
  // x [2, 5], axis 1, block 2 -> scale [2, 3]; the last block holds one column.
  const std::vector<int> xv = {-8, -3, 0, 5, 7, 1, 2, -1, -2, 6};
  const std::vector<int> zv = {1, -2, 0, 3, -1, 2};
  const std::vector<float> sv = {0.5f, 2.0f, 0.25f, 1.0f, 3.0f, -1.5f};
  Case spec{{.op = "DequantizeLinear", .opset = 21}, {Pack4(DType::kInt4, {2, 5}, xv), F({2, 3}, sv), Pack4(DType::kInt4, {2, 3}, zv)}};
  spec.node.attrs.push_back(IntAttr("axis", 1));
  spec.node.attrs.push_back(IntAttr("block_size", 2));
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dtype(), DType::kFloat32);
  ASSERT_EQ(y.shape(), (Shape{2, 5}));
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 5; ++c) {
      const int k = r * 3 + c / 2;
      EXPECT_FLOAT_EQ(y.data<float>()[r * 5 + c], static_cast<float>(xv[r * 5 + c] - zv[k]) * sv[k]) << r << "," << c;
    }
  }
}

TEST(QuantizeOps, DequantizeBlockedUInt4Axis0Float16Scale) {
  // x [3, 2] uint4, axis 0, block 2 -> scale [2, 2] float16, output float16.
  const std::vector<int> xv = {15, 0, 3, 9, 12, 1};
  Tensor scale = Tensor::Empty(DType::kFloat16, {2, 2});
  const float sv[] = {0.5f, 1.0f, 2.0f, 0.25f};
  for (int i = 0; i < 4; ++i) scale.data<Eigen::half>()[i] = Eigen::half(sv[i]);
  Case spec{{.op = "DequantizeLinear", .opset = 21}, {Pack4(DType::kUInt4, {3, 2}, xv), scale}};
  spec.node.attrs.push_back(IntAttr("axis", 0));
  spec.node.attrs.push_back(IntAttr("block_size", 2));
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c)
      EXPECT_FLOAT_EQ(static_cast<float>(y.data<Eigen::half>()[r * 2 + c]), xv[r * 2 + c] * sv[(r / 2) * 2 + c]);
}

TEST(QuantizeOps, QuantizeBlockedToInt4ViaOutputDtype) {
  // Round half to even, then saturate to [-8, 7].
  Case spec{{.op = "QuantizeLinear", .opset = 21}, {F({1, 6}, {0.5f, 1.5f, -2.5f, 100.0f, -100.0f, 3.0f}), F({1, 2}, {1.0f, 2.0f})}};
  spec.node.attrs.push_back(IntAttr("axis", 1));
  spec.node.attrs.push_back(IntAttr("block_size", 3));
  spec.node.attrs.push_back(IntAttr("output_dtype", static_cast<int64_t>(DType::kInt4)));
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.dtype(), DType::kInt4);
  EXPECT_EQ(Unpack4(y), (std::vector<int>{0, 2, -2, 7, -8, 2}));
}

TEST(QuantizeOps, QuantizeRoundsHalfToEvenAndAddsZeroPoint) {
  Tensor zp = Tensor::FromVector<int16_t>(DType::kInt16, {}, {1000});
  Case spec{{.op = "QuantizeLinear", .opset = 21}, {F({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1e9f}), F({}, {1.0f}), zp}};
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int16_t>((*out)[0].tensor), (std::vector<int16_t>{1000, 1002, 1002, 1000, 998, 32767}));
}

TEST(QuantizeOps, QuantizePerAxisUInt16) {
  Tensor zp = Tensor::FromVector<uint16_t>(DType::kUInt16, {2}, {0, 65000});
  Case spec{{.op = "QuantizeLinear", .opset = 21}, {F({2, 2}, {10.0f, -1.0f, 1000.0f, 8000.0f}), F({2}, {0.1f, 0.01f}), zp}};
  spec.node.attrs.push_back(IntAttr("axis", 0));
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint16_t>((*out)[0].tensor), (std::vector<uint16_t>{100, 0, 65535, 65535}));
}

TEST(QuantizeOps, MicrosoftDomainQDQ) {
  Tensor zp = Tensor::FromVector<int8_t>(DType::kInt8, {2}, {0, 10});
  Case q{{.op = "QuantizeLinear", .opset = 1, .domain = "com.microsoft"}, {F({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f}), F({2}, {0.5f, 2.0f}), zp}};
  auto out = RunOne(q);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int8_t>((*out)[0].tensor), (std::vector<int8_t>{2, 11, 6, 12}));
  Case dq{{.op = "DequantizeLinear", .opset = 1, .domain = "com.microsoft"}, {(*out)[0].tensor, F({2}, {0.5f, 2.0f}), zp}};
  auto back = RunOne(dq);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<float>((*back)[0].tensor), (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
}

void ExpectError(const Case& spec, absl::StatusCode code, const std::string& fragment) {
  auto out = RunOne(spec);
  ASSERT_FALSE(out.ok()) << "expected an error mentioning '" << fragment << "'";
  EXPECT_EQ(out.status().code(), code) << out.status();
  EXPECT_NE(std::string(out.status().message()).find(fragment), std::string::npos) << out.status();
}

TEST(QuantizeOps, QuantizeRejectsZeroAndNonFiniteScale) {
  ExpectError({{.op = "QuantizeLinear", .opset = 13}, {F({2}, {1, 2}), F({}, {0.0f})}}, absl::StatusCode::kInvalidArgument,
              "non-zero");
  ExpectError({{.op = "QuantizeLinear", .opset = 13}, {F({2}, {1, 2}), F({}, {INFINITY})}}, absl::StatusCode::kInvalidArgument,
              "finite");
  ExpectError({{.op = "QuantizeLinear", .opset = 13}, {F({2}, {1, 2}), F({}, {NAN})}}, absl::StatusCode::kInvalidArgument,
              "finite");
}

TEST(QuantizeOps, RejectsMismatchedScaleAndZeroPointShapes) {
  Tensor zp = Tensor::FromVector<uint8_t>(DType::kUInt8, {3}, {0, 0, 0});
  ExpectError({{.op = "QuantizeLinear", .opset = 13}, {F({2, 2}, {1, 2, 3, 4}), F({2}, {1, 1}), zp}},
              absl::StatusCode::kInvalidArgument, "does not match scale shape");
  Tensor x = Tensor::FromVector<uint8_t>(DType::kUInt8, {2, 2}, {1, 2, 3, 4});
  ExpectError({{.op = "DequantizeLinear", .opset = 13}, {x, F({2}, {1, 1}), zp}}, absl::StatusCode::kInvalidArgument,
              "does not match scale shape");
  // Per-axis scale of the wrong length.
  ExpectError({{.op = "DequantizeLinear", .opset = 13}, {x, F({3}, {1, 1, 1})}}, absl::StatusCode::kInvalidArgument,
              "per-axis scale");
}

TEST(QuantizeOps, RejectsZeroPointOfTheWrongType) {
  Tensor x = Tensor::FromVector<int8_t>(DType::kInt8, {2}, {1, 2});
  Tensor zp_u8 = Tensor::FromVector<uint8_t>(DType::kUInt8, {}, {1});
  ExpectError({{.op = "DequantizeLinear", .opset = 13}, {x, F({}, {1.0f}), zp_u8}}, absl::StatusCode::kInvalidArgument,
              "differs from x type");
  Case q{{.op = "QuantizeLinear", .opset = 21}, {F({2}, {1, 2}), F({}, {1.0f}), zp_u8}};
  q.node.attrs.push_back(IntAttr("output_dtype", static_cast<int64_t>(DType::kInt8)));
  ExpectError(q, absl::StatusCode::kInvalidArgument, "differs from output_dtype");
  // 16-bit zero points arrive with opset 21.
  Tensor zp_i16 = Tensor::FromVector<int16_t>(DType::kInt16, {}, {1});
  ExpectError({{.op = "QuantizeLinear", .opset = 19}, {F({2}, {1, 2}), F({}, {1.0f}), zp_i16}}, absl::StatusCode::kInvalidArgument,
              "needs opset 21");
}

TEST(QuantizeOps, RejectsBlockSizeThatDoesNotFitTheScale) {
  Tensor x = Pack4(DType::kInt4, {2, 6}, std::vector<int>(12, 1));
  // ceil(6 / 4) = 2 blocks, but the scale has 3.
  Case dq{{.op = "DequantizeLinear", .opset = 21}, {x, F({2, 3}, {1, 1, 1, 1, 1, 1})}};
  dq.node.attrs.push_back(IntAttr("axis", 1));
  dq.node.attrs.push_back(IntAttr("block_size", 4));
  ExpectError(dq, absl::StatusCode::kInvalidArgument, "block_size 4");
  // Blocked scale of the wrong rank.
  Case dq2{{.op = "DequantizeLinear", .opset = 21}, {x, F({3}, {1, 1, 1})}};
  dq2.node.attrs.push_back(IntAttr("axis", 1));
  dq2.node.attrs.push_back(IntAttr("block_size", 2));
  ExpectError(dq2, absl::StatusCode::kInvalidArgument, "rank 2");
  Case neg{{.op = "DequantizeLinear", .opset = 21}, {x, F({2, 3}, {1, 1, 1, 1, 1, 1})}};
  neg.node.attrs.push_back(IntAttr("block_size", -1));
  ExpectError(neg, absl::StatusCode::kInvalidArgument, "block_size");
}

TEST(QuantizeOps, Float8OutputIsUnimplemented) {
  Case q{{.op = "QuantizeLinear", .opset = 21}, {F({2}, {1, 2}), F({}, {1.0f})}};
  q.node.attrs.push_back(IntAttr("output_dtype", 17));
  ExpectError(q, absl::StatusCode::kUnimplemented, "float8e4m3fn");
}

TEST(QuantizeOps, DynamicQuantizeLinearAllZeros) {
  Case spec{{.op = "DynamicQuantizeLinear", .opset = 11, .num_outputs = 3}, {F({3}, {0, 0, 0})}};
  auto out = RunOne(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<uint8_t>((*out)[0].tensor), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_GT((*out)[1].tensor.data<float>()[0], 0.0f);
  EXPECT_EQ((*out)[2].tensor.data<uint8_t>()[0], 0);
}

TEST(QuantizeOps, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  Tensor a = Tensor::FromVector<uint8_t>(DType::kUInt8, {2, 2}, {10, 20, 30, 40});
  Tensor b = Tensor::FromVector<int8_t>(DType::kInt8, {2, 2}, {1, -2, 3, 4});
  Tensor azp = Tensor::FromVector<uint8_t>(DType::kUInt8, {2}, {10, 0});
  Tensor bzp = Tensor::FromVector<int8_t>(DType::kInt8, {2}, {1, -1});
  auto out = RunOne({{.op = "MatMulInteger", .opset = 10}, {a, b, azp, bzp}});
  ASSERT_TRUE(out.ok()) << out.status();
  // A' = [[0, 10], [30, 40]], B' = [[0, -1], [2, 5]].
  EXPECT_EQ(Values<int32_t>((*out)[0].tensor), (std::vector<int32_t>{20, 50, 80, 170}));
}

}  // namespace
}  // namespace oneinfer
