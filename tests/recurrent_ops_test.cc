// Unit tests for RNN/GRU/LSTM load-time validation and attribute handling.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/op_harness.h"

namespace oneinfer {
namespace {

using testing::StrAttr;
using testing::StrsAttr;

// A one-node RNN-family model (opset 14) with float inputs X, W, R (in0..in2) and outputs Y, Y_h.
absl::StatusOr<std::unique_ptr<SessionImpl>> BuildRnn(const std::string& op, std::vector<Attribute> attrs) {
  return testing::OneNode{.op = op, .opset = 14, .attrs = std::move(attrs), .num_outputs = 2}.Load(
      {DType::kFloat32, DType::kFloat32, DType::kFloat32});
}

TEST(RecurrentOps, UnknownActivationAndDirectionAreUnimplemented) {
  auto s = BuildRnn("RNN", {StrsAttr("activations", {"Gelu"})});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(s.status().message()).find("Gelu"), std::string::npos);
  s = BuildRnn("GRU", {StrAttr("direction", "sideways")});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  s = BuildRnn("LSTM", {StrsAttr("activations", {"Sigmoid", "Tanh"})});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecurrentOps, BidirectionalSharesOneActivationList) {
  // X = 1, W = [1] forward and [-2] backward, R = 0, Relu: Y = [1, 0], Y_h = [1, 0].
  auto s = BuildRnn("RNN", {StrAttr("direction", "bidirectional"), StrsAttr("activations", {"Relu"})});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<std::pair<std::string, Value>> feeds = {
      {"in0", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {1, 1, 1}, {1.0f}))},
      {"in1", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {2, 1, 1}, {1.0f, -2.0f}))},
      {"in2", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {2, 1, 1}, {0.0f, 0.0f}))}};
  auto out = (*s)->RunValues(feeds);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0].tensor;
  ASSERT_EQ(y.shape(), (Shape{1, 2, 1, 1}));
  EXPECT_EQ(y.data<float>()[0], 1.0f);
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_EQ((*out)[1].tensor.shape(), (Shape{2, 1, 1}));
}

}  // namespace
}  // namespace oneinfer
