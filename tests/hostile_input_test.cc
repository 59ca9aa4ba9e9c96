// Crafted files an attacker could hand the loader and `oneinfer exec`: each is a clear error
// (a non-OK Status from the API, exit 1 and one `oneinfer: error:` line from the command line).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include <onnx/onnx-data_pb.h>

#include "graph/onnx_loader.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;

int CountLines(const std::string& s, const std::string& prefix) {
  int n = 0;
  size_t pos = 0;
  while ((pos = s.find(prefix, pos)) != std::string::npos) ++n, pos += prefix.size();
  return n;
}

// `oneinfer exec` on the model with an empty input folder: exit 1, one error line holding `needle`.
void ExpectExecError(const fs::path& model, const std::string& needle) {
  const fs::path dir = model.parent_path();
  fs::create_directories(dir / "in");
  const CliResult r = RunCli("exec " + model.string() + " --input-dir " + (dir / "in").string() +
                             " --output-dir " + (dir / "out").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(CountLines(r.out, "oneinfer: error:"), 1) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
}

// A main graph whose If (and, with loops, Loop) nodes nest `depth` levels of subgraphs, the
// deepest computing y<depth> = Identity(x); with If only it runs and returns x.
onnx::ModelProto NestedModel(int depth, bool loops) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("c", onnx::TensorProto::BOOL, {});
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {1});
  *g->add_output() = TensorInfo("y0", onnx::TensorProto::FLOAT, {1});
  onnx::GraphProto* cur = g;
  for (int d = 0; d < depth; ++d) {
    const std::string out = "y" + std::to_string(d), inner = "y" + std::to_string(d + 1);
    const bool loop = loops && d % 2 == 1;
    auto* n = cur->add_node();
    *n = MakeNode(loop ? "Loop" : "If", loop ? std::vector<std::string>{"", "c", "x"} : std::vector<std::string>{"c"},
                  {out}, "level" + std::to_string(d));
    auto* deeper = n->add_attribute();
    deeper->set_name(loop ? "body" : "then_branch");
    deeper->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* next = deeper->mutable_g();
    next->set_name("g" + std::to_string(d + 1));
    if (!loop) {
      auto* other = n->add_attribute();
      other->set_name("else_branch");
      other->set_type(onnx::AttributeProto::GRAPH);
      const std::string e = "e" + std::to_string(d);
      *other->mutable_g()->add_node() = MakeNode("Identity", {"x"}, {e});
      *other->mutable_g()->add_output() = TensorInfo(e, onnx::TensorProto::FLOAT, {1});
    }
    *next->add_output() = TensorInfo(inner, onnx::TensorProto::FLOAT, {1});
    cur = next;
  }
  *cur->add_node() = MakeNode("Identity", {"x"}, {"y" + std::to_string(depth)});
  return m;
}

TEST(HostileInput, EmptyFileIsNotAModel) {
  const fs::path dir = TempDir("hostile_empty");
  const fs::path p = dir / "empty.onnx";
  std::ofstream(p).close();
  auto s = Session::Load(p.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("the file is empty"), std::string::npos) << s.status();
  auto b = Session::LoadFromBuffer("", 0);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("empty"), std::string::npos) << b.status();
  ExpectExecError(p, "the file is empty");
}

TEST(HostileInput, ModelWithoutGraph) {
  const fs::path dir = TempDir("hostile_nograph");
  onnx::ModelProto m = MakeModel();
  m.clear_graph();
  const fs::path p = dir / "nograph.onnx";
  WriteModel(m, p);
  auto s = Session::Load(p.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("has no graph"), std::string::npos) << s.status();
  ExpectExecError(p, "has no graph");
}

TEST(HostileInput, SubgraphsNestedPastTheParserLimit) {
  const fs::path dir = TempDir("hostile_nested");
  const fs::path p = dir / "nested.onnx";
  WriteModel(NestedModel(200, /*loops=*/true), p);
  auto s = Session::Load(p.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("subgraphs 200 levels deep"), std::string::npos) << s.status();
  EXPECT_EQ(s.status().message().find("truncated or malformed"), std::string::npos) << s.status();
  ExpectExecError(p, "subgraphs 200 levels deep");
}

TEST(HostileInput, NestingLimitIsWhereTheParserStops) {
  // The deepest subgraph's output type is Graph/ValueInfo/Type/Tensor/Shape/Dim below its graph:
  // 3 levels per subgraph plus 6 fit in 100 up to 31 subgraphs.
  const std::string ok = NestedModel(31, false).SerializeAsString();
  auto model = LoadModelFromBuffer(ok.data(), ok.size(), ".");
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string deep = NestedModel(32, false).SerializeAsString();
  auto too_deep = LoadModelFromBuffer(deep.data(), deep.size(), ".");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("nests messages 102 levels deep (subgraphs 32 levels deep)"),
            std::string::npos) << too_deep.status();
  // A truncated deep model is still "truncated", not "too deep".
  auto cut = LoadModelFromBuffer(deep.data(), deep.size() - 3, ".");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated or malformed"), std::string::npos) << cut.status();
}

TEST(HostileInput, NestedIfsWithinTheLimitRun) {
  const std::string bytes = NestedModel(20, false).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = (*s)->Run({{"c", Tensor::FromVector<bool>(DType::kBool, {}, {true})},
                        {"x", Tensor::FromVector<float>(DType::kFloat32, {1}, {2.5f})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<float>()[0], 2.5f);
}


std::string ReadBytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Empty when equal (dtype, shape and every byte or string), else the first difference.
std::string CompareExact(const Tensor& e, const Tensor& a) {
  if (e.dtype() != a.dtype() || e.shape() != a.shape()) {
    return DTypeName(a.dtype()) + ShapeToString(a.shape()) + " != expected " + DTypeName(e.dtype()) + ShapeToString(e.shape());
  }
  if (e.dtype() == DType::kString) {
    for (int64_t i = 0; i < e.num_elements(); ++i) {
      if (e.data<std::string>()[i] != a.data<std::string>()[i]) return "string " + std::to_string(i) + " differs";
    }
    return "";
  }
  return std::memcmp(e.raw_data(), a.raw_data(), e.byte_size()) == 0 ? "" : "bytes differ";
}

const fs::path kNodeData = "/usr/share/libonnx-testdata/data/node";

// Runs `oneinfer exec` on one ONNX test folder and compares each output file with the expected one.
void ExecMatchesTestData(const std::string& test) {
  SCOPED_TRACE(test);
  const fs::path dir = kNodeData / test;
  if (!fs::exists(dir)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const fs::path out = TempDir("hostile_exec_" + test);
  const CliResult r = RunCli("exec " + (dir / "model.onnx").string() + " --input-dir " +
                             (dir / "test_data_set_0").string() + " --output-dir " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  auto model = LoadModelFromFile((dir / "model.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& outputs = (*model)->graph.outputs;
  ASSERT_FALSE(outputs.empty());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string file = "output_" + std::to_string(i) + ".pb";
    auto expected = ParseValue(ReadBytes(dir / "test_data_set_0" / file), outputs[i].type);
    ASSERT_TRUE(expected.ok()) << expected.status();
    std::string name;
    auto actual = ParseValue(ReadBytes(out / file), outputs[i].type, &name);
    ASSERT_TRUE(actual.ok()) << file << ": " << actual.status();
    EXPECT_EQ(name, outputs[i].name);
    ASSERT_EQ(actual->kind, expected->kind) << file;
    if (expected->is_tensor()) EXPECT_EQ(CompareExact(expected->tensor, actual->tensor), "") << file;
    if (expected->is_sequence()) {
      ASSERT_EQ(actual->sequence.size(), expected->sequence.size()) << file;
      for (size_t k = 0; k < expected->sequence.size(); ++k) {
        EXPECT_EQ(CompareExact(expected->sequence[k], actual->sequence[k]), "") << file << " item " << k;
      }
    }
  }
}

TEST(HostileInput, ExecReadsAndWritesSequences) {
  ExecMatchesTestData("test_sequence_insert_at_back");
  ExecMatchesTestData("test_identity_sequence");
  ExecMatchesTestData("test_sequence_map_identity_2_sequences");
}

TEST(HostileInput, ExecReadsAndWritesOptionals) {
  ExecMatchesTestData("test_optional_get_element_sequence");
  ExecMatchesTestData("test_optional_get_element");
  ExecMatchesTestData("test_optional_has_element_empty");
}

TEST(HostileInput, ExecRefusesASequenceFileForATensorInput) {
  const fs::path src = kNodeData / "test_sequence_insert_at_back" / "test_data_set_0" / "input_0.pb";
  if (!fs::exists(src)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const fs::path dir = TempDir("hostile_seq_for_tensor");
  onnx::ModelProto m = MakeModel();
  *m.mutable_graph()->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {-1});
  *m.mutable_graph()->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {-1});
  *m.mutable_graph()->add_node() = MakeNode("Identity", {"x"}, {"y"});
  WriteModel(m, dir / "m.onnx");
  fs::create_directories(dir / "in");
  fs::copy_file(src, dir / "in" / "input_0.pb");
  const CliResult r = RunCli("exec " + (dir / "m.onnx").string() + " --input-dir " + (dir / "in").string() +
                             " --output-dir " + (dir / "out").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(CountLines(r.out, "oneinfer: error:"), 1) << r.out;
  EXPECT_NE(r.out.find("input_0.pb"), std::string::npos) << r.out;
}

TEST(HostileInput, OptionalAndSequenceProtosRoundTrip) {
  const Tensor a = Tensor::FromVector<float>(DType::kFloat32, {2}, {1.f, 2.f});
  onnx::SequenceProto sp;
  ASSERT_TRUE(ValueToSequenceProto(Value::FromSequence({a, a}, DType::kFloat32), "s", &sp).ok());
  auto seq = ValueFromSequenceProto(sp);
  ASSERT_TRUE(seq.ok()) << seq.status();
  ASSERT_TRUE(seq->is_sequence());
  EXPECT_EQ(seq->sequence.size(), 2u);
  onnx::OptionalProto op;
  ASSERT_TRUE(ValueToOptionalProto(Value::None(), "o", &op).ok());
  auto none = ValueFromOptionalProto(op);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->is_none());
  ASSERT_TRUE(ValueToOptionalProto(Value::FromTensor(a), "o", &op).ok());
  auto some = ValueFromOptionalProto(op);
  ASSERT_TRUE(some.ok());
  ASSERT_TRUE(some->is_tensor());
  EXPECT_EQ(CompareExact(a, some->tensor), "");
  // A sequence of sequences has no Value form: refused, not flattened.
  onnx::SequenceProto nested;
  *nested.add_sequence_values() = sp;
  EXPECT_EQ(ValueFromSequenceProto(nested).status().code(), absl::StatusCode::kUnimplemented);
}

// A model whose output is the initializer `w`, written to dir/m.onnx.
fs::path InitializerModel(const fs::path& dir, const onnx::TensorProto& w) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_initializer() = w;
  *g->add_output() = TensorInfo("y", w.data_type(), {});
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  *g->add_node() = MakeNode("Identity", {"w"}, {"y"});
  WriteModel(m, dir / "m.onnx");
  return dir / "m.onnx";
}

onnx::TensorProto Claimed(int type, const std::vector<int64_t>& dims) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

// Session::Load and `oneinfer exec` both refuse the model with `needle` in one error line.
void ExpectLoadError(const std::string& tag, const onnx::TensorProto& w, const std::string& needle) {
  SCOPED_TRACE(tag);
  const fs::path model = InitializerModel(TempDir("hostile_" + tag), w);
  auto s = Session::Load(model.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("tensor 'w'"), std::string::npos) << s.status();
  ExpectExecError(model, needle);
}

constexpr int64_t k2p31 = int64_t{1} << 31;
constexpr int64_t k2p32 = int64_t{1} << 32;

TEST(HostileInput, RawDataClaimingExabytes) {
  onnx::TensorProto u8 = Claimed(onnx::TensorProto::UINT8, {k2p31, k2p31});  // 2^62 elements
  u8.set_raw_data("abcd");
  ExpectLoadError("raw_u8", u8, "4 bytes of raw data for 4611686018427387904 bytes");
  onnx::TensorProto f32 = Claimed(onnx::TensorProto::FLOAT, {k2p31, k2p31});  // 2^64 bytes
  f32.set_raw_data("abcd");
  ExpectLoadError("raw_f32", f32, "take more bytes than int64 holds");
}

TEST(HostileInput, DimsWhoseProductWraps) {
  onnx::TensorProto t = Claimed(onnx::TensorProto::FLOAT, {k2p32, k2p32, 4});  // 2^66 wraps to 0
  ExpectLoadError("wrap", t, "multiply past the largest int64 element count");
  onnx::TensorProto neg = Claimed(onnx::TensorProto::FLOAT, {-2, -2});  // the product is positive
  neg.add_float_data(0.f);
  neg.add_float_data(0.f);
  neg.add_float_data(0.f);
  neg.add_float_data(0.f);
  ExpectLoadError("negative", neg, "has a negative dimension");
}

TEST(HostileInput, TypedFieldsAndStringsClaimingMoreThanTheyHold) {
  onnx::TensorProto s = Claimed(onnx::TensorProto::STRING, {int64_t{1} << 28});
  s.add_string_data("x");
  ExpectLoadError("strings", s, "has 1 strings for 268435456 elements");
  onnx::TensorProto i64 = Claimed(onnx::TensorProto::INT64, {int64_t{1} << 40});
  i64.add_int64_data(7);
  ExpectLoadError("int64_data", i64, "has 1 values for 1099511627776 elements");
}

// The same claims in a Constant node's value attribute instead of an initializer.
TEST(HostileInput, ConstantNodeClaimingExabytes) {
  for (const auto& [tag, dims, needle] : std::vector<std::tuple<std::string, std::vector<int64_t>, std::string>>{
           {"const_raw", {k2p31, k2p31}, "4 bytes of raw data for 4611686018427387904 bytes"},
           {"const_wrap", {k2p32, k2p32, 4}, "multiply past the largest int64 element count"}}) {
    SCOPED_TRACE(tag);
    onnx::ModelProto m = MakeModel();
    auto* g = m.mutable_graph();
    onnx::NodeProto n = MakeNode("Constant", {}, {"y"}, "claim");
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = Claimed(onnx::TensorProto::UINT8, dims);
    a->mutable_t()->set_raw_data("abcd");
    *g->add_node() = n;
    *g->add_output() = TensorInfo("y", onnx::TensorProto::UINT8, {});
    g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    const fs::path dir = TempDir("hostile_" + tag);
    WriteModel(m, dir / "m.onnx");
    auto s = Session::Load((dir / "m.onnx").string());
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
    ExpectExecError(dir / "m.onnx", needle);
  }
}

TEST(HostileInput, ExternalDataWhoseDimsWrap) {
  const fs::path dir = TempDir("hostile_external");
  std::ofstream(dir / "w.bin", std::ios::binary) << std::string(16, '\0');
  onnx::TensorProto t = Claimed(onnx::TensorProto::FLOAT, {k2p32, k2p32});  // 2^64 elements wrap to 0
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t.add_external_data();
  loc->set_key("location");
  loc->set_value("w.bin");
  auto* len = t.add_external_data();  // length 0 matched the wrapped size before sizes were checked
  len->set_key("length");
  len->set_value("0");
  const fs::path model = InitializerModel(dir, t);
  auto s = Session::Load(model.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("tensor 'w': the dims [4294967296, 4294967296] multiply past"), std::string::npos)
      << s.status();
  ExpectExecError(model, "multiply past the largest int64 element count");
  // Dims whose element count fits but whose bytes do not: 2^62 floats.
  onnx::TensorProto big = Claimed(onnx::TensorProto::FLOAT, {k2p31, k2p31});
  *big.add_external_data() = t.external_data(0);
  big.set_data_location(onnx::TensorProto::EXTERNAL);
  auto b = Session::Load(InitializerModel(dir, big).string());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("take more bytes than int64 holds"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace oneinfer
