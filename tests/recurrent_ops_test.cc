// Unit tests for RNN/GRU/LSTM load-time validation and attribute handling.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/session_impl.h"
#include "graph/ir.h"

namespace oneinfer {
namespace {

// A one-node RNN-family model with X, W, R as graph inputs and outputs Y, Y_h.
absl::StatusOr<std::unique_ptr<SessionImpl>> BuildRnn(const std::string& op, std::map<std::string, Attribute> attrs) {
  auto model = std::make_unique<Model>();
  Graph& g = model->graph;
  g.name = "rnn";
  g.opsets[""] = 14;
  Node n;
  n.op_type = op;
  n.name = "n";
  n.attrs = std::move(attrs);
  n.inputs = {"X", "W", "R"};
  n.outputs = {"Y", "Y_h"};
  for (const char* in : {"X", "W", "R"}) g.inputs.push_back({in, {}});
  for (const char* out : {"Y", "Y_h"}) g.outputs.push_back({out, {}});
  g.nodes.push_back(n);
  SessionOptions opts;
  opts.num_threads = 1;
  return SessionImpl::Create(std::move(model), opts);
}

Attribute Str(const std::string& name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kString;
  a.s = v;
  return a;
}

Attribute Strs(const std::string& name, std::vector<std::string> v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kStrings;
  a.strings = std::move(v);
  return a;
}

TEST(RecurrentOps, UnknownActivationAndDirectionAreUnimplemented) {
  auto s = BuildRnn("RNN", {{"activations", Strs("activations", {"Gelu"})}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(s.status().message()).find("Gelu"), std::string::npos);
  s = BuildRnn("GRU", {{"direction", Str("direction", "sideways")}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  s = BuildRnn("LSTM", {{"activations", Strs("activations", {"Sigmoid", "Tanh"})}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecurrentOps, BidirectionalSharesOneActivationList) {
  // X = 1, W = [1] forward and [-2] backward, R = 0, Relu: Y = [1, 0], Y_h = [1, 0].
  auto s = BuildRnn("RNN", {{"direction", Str("direction", "bidirectional")},
                            {"activations", Strs("activations", {"Relu"})}});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<std::pair<std::string, Value>> feeds = {
      {"X", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {1, 1, 1}, {1.0f}))},
      {"W", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {2, 1, 1}, {1.0f, -2.0f}))},
      {"R", Value::FromTensor(Tensor::FromVector<float>(DType::kFloat32, {2, 1, 1}, {0.0f, 0.0f}))}};
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
