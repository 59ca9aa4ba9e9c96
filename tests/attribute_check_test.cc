// Every node is checked at load against its operator's signature (graph/op_schema.h): crafted
// models with attributes of the wrong type, a list for a scalar, inputs beyond the operator's,
// missing required inputs and attributes, unknown attributes, also inside subgraphs, are each a
// load error naming the node and the attribute or bound (a non-OK Status from the API, exit 1 and
// one `oneinfer: error:` line from the command line). What real exporters write still loads.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

#include "graph/attr.h"
#include "graph/internal_ops.h"
#include "graph/op_schema.h"
#include "oneinfer/session.h"
#include "onnx/defs/schema.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;
namespace fs = std::filesystem;
using AP = onnx::AttributeProto;

onnx::AttributeProto IntAttr(const std::string& name, int64_t v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::INT);
  a.set_i(v);
  return a;
}
onnx::AttributeProto FloatAttr(const std::string& name, float v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::FLOAT);
  a.set_f(v);
  return a;
}
onnx::AttributeProto StringAttr(const std::string& name, const std::string& v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::STRING);
  a.set_s(v);
  return a;
}
onnx::AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}
onnx::AttributeProto FloatsAttr(const std::string& name, const std::vector<float>& v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::FLOATS);
  for (float x : v) a.add_floats(x);
  return a;
}
onnx::AttributeProto StringsAttr(const std::string& name, const std::vector<std::string>& v) {
  AP a;
  a.set_name(name);
  a.set_type(AP::STRINGS);
  for (const auto& x : v) a.add_strings(x);
  return a;
}

onnx::NodeProto With(onnx::NodeProto n, std::initializer_list<onnx::AttributeProto> attrs) {
  for (const auto& a : attrs) *n.add_attribute() = a;
  return n;
}

// A float value of any shape.
onnx::ValueInfoProto FloatInfo(const std::string& name) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  v.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return v;
}

// A graph y = node(...) over x: float [2, 3] and the int64 initializers i = [1, 0] (indices, a
// permutation, axes), a1 = [1] (one axis), p2 = [0, 1] (pads for it), sz = [4, 6] (sizes).
onnx::ModelProto OneNode(const onnx::NodeProto& node, int opset = 21) {
  onnx::ModelProto m = MakeModel(opset);
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2, 3});
  *g->add_initializer() = Int64Tensor("i", {2}, {1, 0});
  *g->add_initializer() = Int64Tensor("a1", {1}, {1});
  *g->add_initializer() = Int64Tensor("p2", {2}, {0, 1});
  *g->add_initializer() = Int64Tensor("sz", {2}, {4, 6});
  *g->add_node() = node;
  *g->add_output() = FloatInfo("y");
  return m;
}

// If(c) whose then branch holds `inner` (reading x from the outer scope) and else branch y = x.
onnx::ModelProto InSubgraph(const onnx::NodeProto& inner) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("c", onnx::TensorProto::BOOL, {});
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2, 3});
  *g->add_initializer() = Int64Tensor("i", {2}, {1, 0});
  auto* n = g->add_node();
  *n = MakeNode("If", {"c"}, {"y"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AP::GRAPH);
    auto* sg = a->mutable_g();
    sg->set_name(name);
    const bool then = std::string(name) == "then_branch";
    *sg->add_node() = then ? inner : MakeNode("Identity", {"x"}, {"y"});
    *sg->add_output() = FloatInfo(then ? inner.output(0) : "y");
  }
  *g->add_output() = FloatInfo("y");
  return m;
}

absl::Status LoadStatus(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  return s.ok() ? absl::OkStatus() : s.status();
}

int CountLines(const std::string& s, const std::string& prefix) {
  int n = 0;
  size_t pos = 0;
  while ((pos = s.find(prefix, pos)) != std::string::npos) ++n, pos += prefix.size();
  return n;
}

struct BadCase {
  const char* what;
  onnx::ModelProto model;
  std::vector<std::string> needles;  // each must be in the message
};

std::vector<BadCase> BadCases() {
  std::vector<BadCase> c;
  // An attribute of the wrong type, for each kind of value.
  c.push_back({"floats for ints", OneNode(With(MakeNode("Transpose", {"x"}, {"y"}, "tr"), {FloatsAttr("perm", {1, 0})})),
               {"Transpose 'tr'", "attribute 'perm'", "must be ints but is floats"}});
  c.push_back({"string for int", OneNode(With(MakeNode("Gather", {"x", "i"}, {"y"}, "ga"), {StringAttr("axis", "1")})),
               {"Gather 'ga'", "attribute 'axis'", "must be int but is string"}});
  c.push_back({"int for float", OneNode(With(MakeNode("LeakyRelu", {"x"}, {"y"}, "lr"), {IntAttr("alpha", 1)})),
               {"LeakyRelu 'lr'", "attribute 'alpha'", "must be float but is int"}});
  c.push_back({"int for string", OneNode(With(MakeNode("DepthToSpace", {"x"}, {"y"}, "d2s"),
                                               {IntAttr("blocksize", 1), IntAttr("mode", 0)})),
               {"DepthToSpace 'd2s'", "attribute 'mode'", "must be string but is int"}});
  c.push_back({"float for int (Cast's to)", OneNode(With(MakeNode("Cast", {"x"}, {"y"}, "cast"), {FloatAttr("to", 1)})),
               {"Cast 'cast'", "attribute 'to'", "must be int but is float"}});
  c.push_back({"tensor for graph", [] {
                 onnx::NodeProto n = MakeNode("If", {"x"}, {"y"}, "if");
                 for (const char* name : {"then_branch", "else_branch"}) {
                   auto* a = n.add_attribute();
                   a->set_name(name);
                   a->set_type(AP::TENSOR);
                   *a->mutable_t() = FloatTensor("", {1}, {0});
                 }
                 return OneNode(n);
               }(),
               {"If 'if'", "attribute 'else_branch'", "must be graph but is tensor"}});
  c.push_back({"float for tensor (Constant)", OneNode(With(MakeNode("Constant", {}, {"y"}, "k"), {FloatAttr("value", 1)})),
               {"Constant 'k'", "attribute 'value'", "must be tensor but is float"}});
  // A list where the operator takes one value, and one value where it takes a list.
  c.push_back({"ints for int", OneNode(With(MakeNode("Gather", {"x", "i"}, {"y"}, "gl"), {IntsAttr("axis", {1})})),
               {"Gather 'gl'", "attribute 'axis'", "must be int but is ints"}});
  c.push_back({"strings for string", OneNode(With(MakeNode("Resize", {"x", "", "", "i"}, {"y"}, "rs"),
                                                   {StringsAttr("mode", {"linear"})}), 13),
               {"Resize 'rs'", "attribute 'mode'", "must be string but is strings"}});
  c.push_back({"int for ints", OneNode(With(MakeNode("Transpose", {"x"}, {"y"}, "t1"), {IntAttr("perm", 1)})),
               {"Transpose 't1'", "attribute 'perm'", "must be ints but is int"}});
  c.push_back({"float for floats", OneNode(With(MakeNode("LayerNormalization", {"x", "x"}, {"y"}, "ln"),
                                                 {FloatsAttr("epsilon", {1e-5f})}), 17),
               {"LayerNormalization 'ln'", "attribute 'epsilon'", "must be float but is floats"}});
  // Inputs beyond the operator's.
  c.push_back({"Relu with 2 inputs", OneNode(MakeNode("Relu", {"x", "x"}, {"y"}, "relu")),
               {"Relu 'relu'", "has 2 inputs but Relu-14 takes at most 1"}});
  c.push_back({"Gather with 3 inputs", OneNode(MakeNode("Gather", {"x", "i", "i"}, {"y"}, "g3")),
               {"Gather 'g3'", "has 3 inputs but Gather-13 takes at most 2"}});
  c.push_back({"Pad-13 with axes", OneNode(MakeNode("Pad", {"x", "i", "", "i"}, {"y"}, "pad"), 13),
               {"Pad 'pad'", "has 4 inputs but Pad-13 takes at most 3"}});
  c.push_back({"Pad-18 with 5 inputs", OneNode(MakeNode("Pad", {"x", "i", "", "i", "i"}, {"y"}, "pad5"), 18),
               {"Pad 'pad5'", "has 5 inputs but Pad-18 takes at most 4"}});
  c.push_back({"Add with 2 outputs", OneNode(MakeNode("Add", {"x", "x"}, {"y", "z"}, "add")),
               {"Add 'add'", "has 2 outputs but Add-14 gives at most 1"}});
  // Required inputs missing.
  c.push_back({"Gather with 1 input", OneNode(MakeNode("Gather", {"x"}, {"y"}, "g1")),
               {"Gather 'g1'", "has 1 input but Gather-13 needs at least 2"}});
  c.push_back({"Gather with an empty indices", OneNode(MakeNode("Gather", {"x", ""}, {"y"}, "ge")),
               {"Gather 'ge'", "input 1 is required by Gather-13 but is empty"}});
  c.push_back({"MatMul with no inputs", OneNode(MakeNode("MatMul", {}, {"y"}, "mm")),
               {"MatMul 'mm'", "has 0 inputs but MatMul-13 needs at least 2"}});
  // Required attributes missing, and attributes the operator does not have.
  c.push_back({"Cast without to", OneNode(MakeNode("Cast", {"x"}, {"y"}, "c0")),
               {"Cast 'c0'", "attribute 'to' is required by Cast-21 but missing"}});
  c.push_back({"Concat without axis", OneNode(MakeNode("Concat", {"x", "x"}, {"y"}, "cat")),
               {"Concat 'cat'", "attribute 'axis' is required by Concat-13 but missing"}});
  c.push_back({"Loop without body", OneNode(MakeNode("Loop", {"", "", "x"}, {"y"}, "loop")),
               {"Loop 'loop'", "attribute 'body' is required by Loop-21 but missing"}});
  c.push_back({"Gather with axes", OneNode(With(MakeNode("Gather", {"x", "i"}, {"y"}, "gx"), {IntAttr("axes", 0)})),
               {"Gather 'gx'", "attribute 'axes' is not an attribute of Gather-13 (it has axis)"}});
  c.push_back({"Cast-13 with saturate", OneNode(With(MakeNode("Cast", {"x"}, {"y"}, "sat"), {IntAttr("to", 1), IntAttr("saturate", 1)}), 13),
               {"Cast 'sat'", "attribute 'saturate' is not an attribute of Cast-13"}});
  // Inside a subgraph: the inner node is named.
  c.push_back({"wrong type in a subgraph", InSubgraph(With(MakeNode("Transpose", {"x"}, {"t"}, "inner"), {FloatsAttr("perm", {1, 0})})),
               {"Transpose 'inner'", "attribute 'perm'", "must be ints but is floats"}});
  c.push_back({"extra input in a subgraph", InSubgraph(MakeNode("Gather", {"x", "i", "x"}, {"t"}, "inner_gather")),
               {"Gather 'inner_gather'", "has 3 inputs but Gather-13 takes at most 2"}});
  c.push_back({"missing attribute in a subgraph", InSubgraph(MakeNode("Cast", {"x"}, {"t"}, "inner_cast")),
               {"Cast 'inner_cast'", "attribute 'to' is required by Cast-21 but missing"}});
  return c;
}

TEST(AttributeCheck, CraftedModelsAreLoadErrorsNamingNodeAndAttribute) {
  for (const BadCase& c : BadCases()) {
    const absl::Status s = LoadStatus(c.model);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    for (const std::string& needle : c.needles) EXPECT_NE(s.message().find(needle), std::string::npos) << c.what << ": " << s;
  }
}

TEST(AttributeCheck, CommandLineSaysOneErrorLine) {
  const fs::path dir = TempDir("attribute_check_cli");
  fs::create_directories(dir / "in");
  const std::vector<BadCase> cases = BadCases();
  for (size_t k : {size_t{0}, size_t{1}, size_t{7}, size_t{12}, size_t{19}, size_t{24}}) {
    const BadCase& c = cases.at(k);
    const fs::path model = dir / ("m" + std::to_string(k) + ".onnx");
    WriteModel(c.model, model);
    const CliResult r = RunCli("exec " + model.string() + " --input-dir " + (dir / "in").string() + " --output-dir " +
                               (dir / "out").string());
    EXPECT_EQ(r.code, 1) << c.what << ": " << r.out;
    EXPECT_EQ(CountLines(r.out, "oneinfer: error:"), 1) << c.what << ": " << r.out;
    for (const std::string& needle : c.needles) EXPECT_NE(r.out.find(needle), std::string::npos) << c.what << ": " << r.out;
  }
}

// Transpose with perm as floats used to transpose anyway (the default reversal); Gather with
// axis as a string or a list used to run with axis 0. A right-typed twin of each runs.
TEST(AttributeCheck, RightTypedTwinsRun) {
  onnx::ModelProto tr = OneNode(With(MakeNode("Transpose", {"x"}, {"y"}, "tr"), {IntsAttr("perm", {1, 0})}));
  onnx::ModelProto ga = OneNode(With(MakeNode("Gather", {"x", "i"}, {"y"}, "ga"), {IntAttr("axis", 1)}));
  const Tensor x = Tensor::FromVector<float>(DType::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
  for (const onnx::ModelProto* m : {&tr, &ga}) {
    const std::string bytes = m->SerializeAsString();
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
    ASSERT_TRUE(s.ok()) << s.status();
    auto y = (*s)->Run({{"x", x}}, {});
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->size(), 1u);
    const Tensor& out = (*y)[0];
    const std::vector<float> want = m == &tr ? std::vector<float>{0, 3, 1, 4, 2, 5} : std::vector<float>{1, 0, 4, 3};
    ASSERT_EQ(out.num_elements(), static_cast<int64_t>(want.size()));
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(out.data<float>()[k], want[k]) << k;
  }
}

// Odd but valid: optional inputs as empty names (in the middle and trailing), attributes given
// at their defaults, attributes the kernel does not need, versions newer than ONNX 1.12 knows.
TEST(AttributeCheck, ValidModelsStillLoad) {
  std::vector<std::pair<const char*, onnx::ModelProto>> ok;
  ok.emplace_back("Clip with an empty min", OneNode(MakeNode("Clip", {"x", "", ""}, {"y"}, "clip")));
  ok.emplace_back("Resize-13 with empty roi and scales",
                  OneNode(With(MakeNode("Resize", {"x", "", "", "sz"}, {"y"}, "rs"), {StringAttr("mode", "nearest")}), 13));
  ok.emplace_back("Gather with axis at its default", OneNode(With(MakeNode("Gather", {"x", "i"}, {"y"}, "g"), {IntAttr("axis", 0)})));
  ok.emplace_back("Dropout with a trailing empty output", OneNode(With(MakeNode("Dropout", {"x"}, {"y", ""}, "drop"), {})));
  ok.emplace_back("Cast-19 with saturate", OneNode(With(MakeNode("Cast", {"x"}, {"y"}, "c19"), {IntAttr("to", 1), IntAttr("saturate", 1)}), 19));
  ok.emplace_back("Split-18 with num_outputs", OneNode(With(MakeNode("Split", {"x"}, {"y", "z"}, "sp"), {IntAttr("num_outputs", 2), IntAttr("axis", 0)}), 18));
  ok.emplace_back("ReduceMax-18 with an axes input", OneNode(With(MakeNode("ReduceMax", {"x", "i"}, {"y"}, "rm"), {IntAttr("noop_with_empty_axes", 0)}), 18));
  ok.emplace_back("Pad-18 with axes", OneNode(With(MakeNode("Pad", {"x", "p2", "", "a1"}, {"y"}, "p"), {StringAttr("mode", "constant")}), 18));
  ok.emplace_back("a valid subgraph", InSubgraph(With(MakeNode("Transpose", {"x"}, {"t"}, "inner"), {IntsAttr("perm", {1, 0})})));
  for (const auto& [what, m] : ok) EXPECT_TRUE(LoadStatus(m).ok()) << what << ": " << LoadStatus(m);
}

TEST(AttributeCheck, TypedReadsRefuseAnotherType) {
  Node n;
  n.name = "n";
  n.op_type = "Custom";
  n.attrs["k"] = Attribute::Int("k", 3);
  n.attrs["f"] = Attribute::Float("f", 0.5f);
  n.attrs["s"] = Attribute::String("s", "x");
  EXPECT_EQ(*ReadAttr<int64_t>(n, "k", 0), 3);
  EXPECT_EQ(*ReadAttr<int64_t>(n, "absent", 7), 7);
  EXPECT_EQ(*ReadAttr<float>(n, "f", 0), 0.5f);
  EXPECT_EQ(*ReadAttr<std::string>(n, "s", ""), "x");
  const absl::StatusOr<float> wrong = ReadAttr<float>(n, "k", 1.0f);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "Custom 'n': attribute 'k' must be float but is int");
  const auto list = ReadAttr<std::vector<int64_t>>(n, "k", {});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().message(), "Custom 'n': attribute 'k' must be ints but is int");
  const auto required = ReadRequiredAttr<std::string>(n, "mode");
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().message(), "Custom 'n': attribute 'mode' is required but missing");
  // The unchecked reads never hand out another field's value.
  EXPECT_EQ(n.GetInt("f", 9), 9);
  EXPECT_EQ(n.GetInts("k", {4}), std::vector<int64_t>{4});
}

// Every kernel the registry holds for ai.onnx, ai.onnx.ml, the training domain and our internal
// ops has a signature at every opset it serves; past ONNX 1.12's opsets, one at least as new as
// the version the kernel follows (a kernel of a newer version needs its declaration).
TEST(AttributeCheck, EveryRegisteredKernelHasASignature) {
  std::set<std::pair<std::string, std::string>> names;
  for (const onnx::OpSchema& s : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    names.insert({CanonicalDomain(s.domain()), s.Name()});
  }
  for (const OpSignature& d : OpDeclarations()) names.insert({d.domain, d.op_type});
  // ai.onnx operators added after ONNX 1.12 (opsets 18 to 24).
  for (const char* op : {"AffineGrid", "Attention", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor",
                         "CenterCropPad", "Col2Im", "DeformConv", "Gelu", "GroupNormalization", "ImageDecoder",
                         "Mish", "RMSNormalization", "RegexFullMatch", "RotaryEmbedding", "StringConcat",
                         "StringSplit", "Swish", "TensorScatter"}) {
    names.insert({"", op});
  }
  for (const char* op : {internal_ops::QdqMatMul::kName, internal_ops::WeightDequantMatMul::kName,
                         internal_ops::MatMulQ4NX::kName, internal_ops::RMSNorm::kName,
                         internal_ops::KVCacheAppend::kName, internal_ops::KVCacheFinish::kName}) {
    EXPECT_TRUE(KernelRegistry::Global().Knows(internal_ops::kDomain, op)) << op;
    names.insert({internal_ops::kDomain, op});
  }
  int checked = 0;
  for (const auto& [domain, op] : names) {
    for (int64_t v = 1; v <= kNewestOpset; ++v) {
      const KernelRegistry::Entry* e = KernelRegistry::Global().Find(domain, op, v);
      if (e == nullptr) continue;
      ++checked;
      const std::optional<OpSignature> sig = FindOpSignature(domain, op, v);
      ASSERT_TRUE(sig.has_value()) << domain << "." << op << " at opset " << v << " has a kernel but no signature";
      if (domain.empty() && v > OnnxSchemaOpset()) {
        EXPECT_GE(sig->since_version, e->first_opset)
            << op << " at opset " << v << ": the kernel follows version " << e->first_opset
            << " but the newest signature is " << sig->since_version << " (declare it in graph/op_declarations.cc)";
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_EQ(OnnxSchemaOpset(), 17);  // ONNX 1.12; a newer library makes some declarations redundant
}

}  // namespace
}  // namespace oneinfer

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

// RandomUniform's seed is a float attribute; fuzz_model found that one past int64's range was
// converted with undefined behaviour (UBSan: tests/data/fuzz/model/random_seed_past_int64). Every
// float seeds a deterministic stream: two sessions with the same seed give the same values.
TEST(AttributeCheck, AnyFloatSeedGivesARepeatableStream) {
  for (float seed : {-1.70141e38f, 1e30f, std::numeric_limits<float>::quiet_NaN(), -3.0f, 7.5f}) {
    onnx::ModelProto m = MakeModel();
    onnx::NodeProto n = MakeNode("RandomUniform", {}, {"y"}, "random");
    auto* a = n.add_attribute();
    a->set_name("seed");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(seed);
    auto* shape = n.add_attribute();
    shape->set_name("shape");
    shape->set_type(onnx::AttributeProto::INTS);
    shape->add_ints(16);
    *m.mutable_graph()->add_node() = n;
    *m.mutable_graph()->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {16});
    const std::string bytes = m.SerializeAsString();
    std::vector<float> first;
    for (int k = 0; k < 2; ++k) {
      auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
      ASSERT_TRUE(s.ok()) << seed << ": " << s.status();
      auto r = (*s)->Run({});
      ASSERT_TRUE(r.ok()) << seed << ": " << r.status();
      const float* y = (*r)[0].data<float>();
      for (int i = 0; i < 16; ++i) ASSERT_TRUE(y[i] >= 0.0f && y[i] < 1.0f) << seed;
      if (k == 0) first.assign(y, y + 16);
      else EXPECT_EQ(std::vector<float>(y, y + 16), first) << seed;
    }
  }
}

}  // namespace
}  // namespace oneinfer
