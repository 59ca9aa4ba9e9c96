// Loading: storage forms, external data rules, and the bad inputs that must be clear errors.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "graph/onnx_loader.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;

onnx::ModelProto AddModel() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {2});
  *g->add_node() = MakeNode("Identity", {"x"}, {"y"}, "id");
  return m;
}

TEST(Loader, TruncatedProtobufIsAnError) {
  std::string bytes = AddModel().SerializeAsString();
  bytes.resize(bytes.size() / 2);
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("truncated or malformed"), std::string::npos) << s.status();
}

TEST(Loader, InputThatNothingProducesIsNamed) {
  onnx::ModelProto m = AddModel();
  m.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'ghost'"), std::string::npos) << s.status();
}

TEST(Loader, CycleIsAnError) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {2});
  *g->add_node() = MakeNode("Add", {"x", "b"}, {"a"}, "first");
  *g->add_node() = MakeNode("Add", {"a", "x"}, {"b"}, "second");
  *g->add_node() = MakeNode("Identity", {"a"}, {"y"}, "out");
  std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cycle"), std::string::npos) << s.status();
}

TEST(Loader, UnsupportedOperatorIsNamed) {
  onnx::ModelProto m = AddModel();
  m.mutable_graph()->mutable_node(0)->set_op_type("FrobnicateTensor");
  std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("FrobnicateTensor"), std::string::npos) << s.status();
}

// A model whose initializer "w" lives in external data file `location`.
onnx::ModelProto ExternalModel(const std::string& location, int64_t offset, int64_t length,
                               const std::vector<int64_t>& dims) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {1, dims[0]});
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {1, dims[1]});
  *g->add_node() = MakeNode("MatMul", {"x", "w"}, {"y"}, "mm");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) w->add_dims(d);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", location);
  add_kv("offset", std::to_string(offset));
  add_kv("length", std::to_string(length));
  return m;
}

TEST(Loader, ExternalDataIsMappedNotCopied) {
  fs::path dir = TempDir("ext_ok");
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  {
    std::ofstream f(dir / "w.bin", std::ios::binary);
    f.write("pad!", 4);  // offset 4
    f.write(reinterpret_cast<const char*>(w.data()), 24);
  }
  WriteModel(ExternalModel("w.bin", 4, 24, {2, 3}), dir / "m.onnx");
  auto model = LoadModelFromFile((dir / "m.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status();
  const Tensor& t = (*model)->graph.initializers.at("w");
  EXPECT_EQ(t.data<float>()[5], 6.0f);
  EXPECT_NE(t.holder().get(), t.raw_data());  // a view into the mapping, not an owned copy
  fs::remove_all(dir);
}

// An embedding table in external data (a Gather's only input, 1 MB): by default its pages come
// from the file again after each run; SessionOptions::resident_tables copies it at load. Writing
// the file under a live private mapping shows which: the mapping sees the new bytes, a copy not.
TEST(Loader, ResidentTablesAreCopiedAtLoad) {
  constexpr int64_t kRows = 1024, kCols = 256;
  fs::path dir = TempDir("ext_table");
  std::vector<float> table(static_cast<size_t>(kRows * kCols));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  { std::ofstream f(dir / "t.bin", std::ios::binary); f.write(reinterpret_cast<const char*>(table.data()), 4 * kRows * kCols); }
  onnx::ModelProto m = ExternalModel("t.bin", 0, 4 * kRows * kCols, {kRows, kCols});
  auto* g = m.mutable_graph();
  *g->mutable_input(0) = TensorInfo("ids", onnx::TensorProto::INT64, {1});
  *g->mutable_output(0) = TensorInfo("y", onnx::TensorProto::FLOAT, {1, kCols});
  *g->mutable_node(0) = MakeNode("Gather", {"w", "ids"}, {"y"}, "embed");
  WriteModel(m, dir / "m.onnx");
  SessionOptions mapped, resident;
  resident.resident_tables = true;
  auto s_mapped = Session::Load((dir / "m.onnx").string(), mapped);
  auto s_resident = Session::Load((dir / "m.onnx").string(), resident);
  ASSERT_TRUE(s_mapped.ok()) << s_mapped.status();
  ASSERT_TRUE(s_resident.ok()) << s_resident.status();
  const Tensor row7 = Tensor::FromVector<int64_t>(DType::kInt64, {1}, {7});
  for (auto* s : {&*s_mapped, &*s_resident}) {
    auto y = (*s)->Run({{"ids", row7}});
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ((*y)[0].data<float>()[3], 7.0f * kCols + 3);
  }
  {
    std::fstream f(dir / "t.bin", std::ios::binary | std::ios::in | std::ios::out);
    const std::vector<float> changed(static_cast<size_t>(kCols), -1.0f);
    f.seekp(4 * 7 * kCols);
    f.write(reinterpret_cast<const char*>(changed.data()), 4 * kCols);
  }
  auto from_file = (*s_mapped)->Run({{"ids", row7}});
  auto from_copy = (*s_resident)->Run({{"ids", row7}});
  ASSERT_TRUE(from_file.ok() && from_copy.ok());
  EXPECT_EQ((*from_file)[0].data<float>()[3], -1.0f);
  EXPECT_EQ((*from_copy)[0].data<float>()[3], 7.0f * kCols + 3);
  fs::remove_all(dir);
}

// Inline weights: converting a proto it may consume frees each initializer's bytes there once the
// tensor holds its own (a 1 GB file with inline weights peaked at 2.9 GB resident with three
// copies), and the const form leaves the proto whole.
TEST(Loader, InlineWeightsAreFreedFromAConsumedProto) {
  onnx::ModelProto m = AddModel();
  onnx::TensorProto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  w->set_raw_data(values.data(), values.size() * sizeof(float));
  auto kept = ModelFromProto(m, ".");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(m.graph().initializer(0).raw_data().size(), 12u);
  auto consumed = ModelFromProto(std::move(m), ".");
  ASSERT_TRUE(consumed.ok()) << consumed.status();
  EXPECT_TRUE(m.graph().initializer(0).raw_data().empty());  // NOLINT(bugprone-use-after-move): the point
  for (const auto& model : {&*kept, &*consumed}) {
    const Tensor& t = (*model)->graph.initializers.at("w");
    EXPECT_EQ(std::vector<float>(t.data<float>(), t.data<float>() + 3), values);
  }
}

TEST(Loader, ExternalLocationLeavingTheFolderIsRefused) {
  fs::path dir = TempDir("ext_escape");
  fs::create_directories(dir / "inner");
  { std::ofstream f(dir / "w.bin", std::ios::binary); f << std::string(24, '\0'); }
  WriteModel(ExternalModel("../w.bin", 0, 24, {2, 3}), dir / "inner" / "m.onnx");
  auto s = Session::Load((dir / "inner" / "m.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("leaves the model folder"), std::string::npos) << s.status();
  fs::remove_all(dir);
}

TEST(Loader, ExternalRangePastTheEndIsRefused) {
  fs::path dir = TempDir("ext_range");
  { std::ofstream f(dir / "w.bin", std::ios::binary); f << std::string(24, '\0'); }
  WriteModel(ExternalModel("w.bin", 8, 24, {2, 3}), dir / "m.onnx");
  auto s = Session::Load((dir / "m.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("passes the end"), std::string::npos) << s.status();
  fs::remove_all(dir);
}

long ResidentKiB() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(Loader, WeightsOverTwoGigabytesLoadWithoutBeingRead) {
  fs::path dir = TempDir("ext_big");
  const int64_t k = 4, n = int64_t{150} << 20;  // 4 x 150M floats = 2.4 GB
  const int64_t bytes = k * n * 4;
  {
    // A sparse file: the size is real, no block is written.
    std::ofstream f(dir / "big.bin", std::ios::binary);
  }
  fs::resize_file(dir / "big.bin", static_cast<uintmax_t>(bytes));
  WriteModel(ExternalModel("big.bin", 0, bytes, {k, n}), dir / "m.onnx");
  const long before = ResidentKiB();
  SessionOptions lazy;  // the loader alone: weight packing (which reads them) waits for a run
  lazy.prepare_weights = false;
  auto s = Session::Load((dir / "m.onnx").string(), lazy);
  ASSERT_TRUE(s.ok()) << s.status();
  const long grown = ResidentKiB() - before;
  EXPECT_LT(grown, 64 * 1024) << "load made " << grown << " KiB resident for 2.4 GB of weights";
  // The weights are a mapping of the file, not a copy.
  std::ifstream maps("/proc/self/maps");
  std::stringstream ss;
  ss << maps.rdbuf();
  EXPECT_NE(ss.str().find("big.bin"), std::string::npos);
  s->reset();
  fs::remove_all(dir);
}

TEST(Session, FeedsAreValidated) {
  std::string bytes = AddModel().SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status();
  Tensor good = Tensor::FromVector<float>(DType::kFloat32, {2}, {1, 2});
  auto ok = (*s)->Run({{"x", good}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].data<float>()[1], 2.0f);

  auto wrong_type = (*s)->Run({{"x", Tensor::FromVector<int64_t>(DType::kInt64, {2}, {1, 2})}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("input 'x' must be float32"), std::string::npos) << wrong_type.status();

  auto wrong_shape = (*s)->Run({{"x", Tensor::FromVector<float>(DType::kFloat32, {3}, {1, 2, 3})}});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("input 'x' dimension 0 must be 2"), std::string::npos);

  auto wrong_rank = (*s)->Run({{"x", Tensor::FromVector<float>(DType::kFloat32, {1, 2}, {1, 2})}});
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_NE(wrong_rank.status().message().find("rank"), std::string::npos);

  auto unknown = (*s)->Run({{"z", good}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown input 'z'"), std::string::npos);

  auto missing = (*s)->Run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("input 'x' is missing"), std::string::npos);
}

}  // namespace
}  // namespace oneinfer
