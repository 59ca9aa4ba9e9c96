// What a run computes and keeps: Session::Run with output names runs only the nodes those outputs
// depend on, elementwise nodes write over an input nobody reads afterwards, and a mapped table
// that only Gather reads does not stay resident after a run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "oneinfer/session.h"
#include "tests/crafted_models.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

std::unique_ptr<Session> LoadModel(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Two outputs over one input x [2]: a = Relu(x), cheap and always valid; b = Reshape(x, s), whose
// shape comes from the feed s and fails at run time when s does not fit.
std::unique_ptr<Session> TwoOutputs() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  *g->add_input() = TensorInfo("s", onnx::TensorProto::INT64, {1});
  *g->add_node() = MakeNode("Relu", {"x"}, {"a"}, "relu");
  *g->add_node() = MakeNode("Reshape", {"x", "s"}, {"b"}, "reshape");
  *g->add_output() = AnyShape("a", onnx::TensorProto::FLOAT);
  *g->add_output() = AnyShape("b", onnx::TensorProto::FLOAT);
  return LoadModel(m);
}

std::vector<Feed> Feeds(int64_t shape) {
  Tensor x = Tensor::Empty(DType::kFloat32, {2});
  x.data<float>()[0] = -1.5f;
  x.data<float>()[1] = 2.5f;
  Tensor s = Tensor::Empty(DType::kInt64, {1});
  s.data<int64_t>()[0] = shape;
  return {{"x", x}, {"s", s}};
}

TEST(RunOutputs, OnlyTheNodesOfTheNamedOutputsRun) {
  auto session = TwoOutputs();
  ASSERT_NE(session, nullptr);
  // s = 3 cannot reshape 2 elements: a run that needs b fails in the Reshape node ...
  auto all = session->Run(Feeds(3));
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("reshape"), std::string::npos) << all.status();
  auto only_b = session->Run(Feeds(3), {"b"});
  ASSERT_FALSE(only_b.ok());
  // ... and a run that asks for a alone never reaches it.
  auto only_a = session->Run(Feeds(3), {"a"});
  ASSERT_TRUE(only_a.ok()) << only_a.status();
  ASSERT_EQ(only_a->size(), 1u);
  EXPECT_EQ((*only_a)[0].data<float>()[0], 0.0f);
  EXPECT_EQ((*only_a)[0].data<float>()[1], 2.5f);
}

TEST(RunOutputs, NamedOutputsComeInTheOrderAsked) {
  auto session = TwoOutputs();
  ASSERT_NE(session, nullptr);
  auto r = session->Run(Feeds(2), {"b", "a"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].data<float>()[0], -1.5f);  // b: x reshaped
  EXPECT_EQ((*r)[1].data<float>()[0], 0.0f);   // a: Relu(x)
  auto unknown = session->Run(Feeds(2), {"c"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown output 'c'"), std::string::npos) << unknown.status();
}

// x [N] -> a = x * 2 -> b = Relu(a) -> c = Sigmoid(b) -> d = Softmax(c) -> y = d + a: a is read
// again at the end, so b, c, d and y may take over their input's storage, a may not (x is a feed).
constexpr int64_t kChain = int64_t{1} << 20;

std::unique_ptr<Session> Chain() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {kChain});
  *g->add_initializer() = FloatTensor("two", {}, {2.0f});
  *g->add_node() = MakeNode("Mul", {"x", "two"}, {"a"}, "double");
  *g->add_node() = MakeNode("Relu", {"a"}, {"b"}, "relu");
  *g->add_node() = MakeNode("Sigmoid", {"b"}, {"c"}, "sigmoid");
  *g->add_node() = MakeNode("Softmax", {"c"}, {"d"}, "softmax");
  *g->add_node() = MakeNode("Add", {"d", "a"}, {"y"}, "add");
  *g->add_output() = AnyShape("y", onnx::TensorProto::FLOAT);
  return LoadModel(m);
}

TEST(RunOutputs, ElementwiseNodesWriteOverInputsNobodyReadsAgain) {
  auto session = Chain();
  ASSERT_NE(session, nullptr);
  Tensor x = Tensor::Empty(DType::kFloat32, {kChain});
  for (int64_t i = 0; i < kChain; ++i) x.data<float>()[i] = static_cast<float>(i % 13) - 6.0f;
  auto r = session->Run({{"x", x}});
  ASSERT_TRUE(r.ok()) << r.status();
  // The same arithmetic in plain loops.
  std::vector<double> c(static_cast<size_t>(kChain));
  double mx = -1e30, sum = 0;
  for (int64_t i = 0; i < kChain; ++i) {
    const double a = 2.0 * x.data<float>()[i];
    c[i] = 1.0 / (1.0 + std::exp(-std::max(a, 0.0)));
    mx = std::max(mx, c[i]);
  }
  for (double v : c) sum += std::exp(v - mx);
  const float* y = (*r)[0].data<float>();
  for (int64_t i = 0; i < kChain; i += 997) {
    const double expect = std::exp(c[i] - mx) / sum + 2.0 * x.data<float>()[i];
    ASSERT_NEAR(y[i], expect, 1e-5) << i;
  }
  // a (kept for the Add) and one buffer that b, c, d and y share: two tensors of 4 MB, where a
  // fresh buffer per node holds three at once (a, b and c while the Sigmoid runs).
  const size_t tensor = kChain * sizeof(float);
  EXPECT_EQ(session->peak_intermediate_bytes(), 2 * tensor);
}

// kB of file-backed pages this process has mapped (RssFile in /proc/self/status).
int64_t RssFileKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

// An embedding table of 8192 rows of 1024 floats (32 MB) in external data, read by one Gather.
std::filesystem::path EmbeddingModel() {
  constexpr int64_t kRows = 8192, kWidth = 1024;
  const std::filesystem::path dir = TempDir("run_outputs_embedding");
  {
    std::vector<float> table(static_cast<size_t>(kRows * kWidth));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 977);
    std::ofstream data(dir / "model.onnx.data", std::ios::binary);
    data.write(reinterpret_cast<const char*>(table.data()), static_cast<std::streamsize>(table.size() * sizeof(float)));
  }
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  onnx::TensorProto* t = g->add_initializer();
  t->set_name("table");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(kRows);
  t->add_dims(kWidth);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value("model.onnx.data");
  *g->add_input() = TensorInfo("ids", onnx::TensorProto::INT64, {-1});
  *g->add_node() = MakeNode("Gather", {"table", "ids"}, {"rows"}, "embed");
  *g->add_output() = AnyShape("rows", onnx::TensorProto::FLOAT);
  WriteModel(m, dir / "model.onnx");
  return dir / "model.onnx";
}

TEST(RunOutputs, AGatherOnlyTableDoesNotStayResident) {
  const int64_t before = RssFileKb();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  auto s = Session::Load(EmbeddingModel().string());
  ASSERT_TRUE(s.ok()) << s.status();
  // 512 rows spread over the table: each fault maps the 64 KB around its row, so without the
  // session dropping the pages about 32 MB (the whole table) would stay mapped.
  Tensor ids = Tensor::Empty(DType::kInt64, {512});
  for (int64_t i = 0; i < 512; ++i) ids.data<int64_t>()[i] = (i * 7919) % 8192;
  auto r = (*s)->Run({{"ids", ids}});
  ASSERT_TRUE(r.ok()) << r.status();
  const float* rows = (*r)[0].data<float>();
  for (int64_t i = 0; i < 512; ++i) {
    const int64_t row = (i * 7919) % 8192;
    ASSERT_EQ(rows[i * 1024 + 5], static_cast<float>((row * 1024 + 5) % 977)) << "row " << row;
  }
  EXPECT_LT(RssFileKb() - before, 8 * 1024) << "the table's pages are still mapped after the run";
}

}  // namespace
}  // namespace oneinfer
