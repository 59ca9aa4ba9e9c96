// Static shape inference: symbolic dims through an attention block, broadcasting, shape
// arithmetic, and declared types that contradict the graph.
#include <gtest/gtest.h>

#include "engine/session_impl.h"
#include "graph/onnx_loader.h"
#include "graph/passes/passes.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

// A tensor value info whose dims are numbers ("8") or symbols ("seq").
onnx::ValueInfoProto Info(const std::string& name, int elem, const std::vector<std::string>& dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) != 0)) shape->add_dim()->set_dim_value(std::stoll(d));
    else shape->add_dim()->set_dim_param(d);
  }
  return v;
}


onnx::TensorProto Floats(const std::string& name, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i % 7);
  return FloatTensor(name, dims, v);
}

onnx::NodeProto WithInts(onnx::NodeProto n, const std::string& attr, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return n;
}

onnx::NodeProto WithInt(onnx::NodeProto n, const std::string& attr, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return n;
}

// Loads, sorts and infers; the graph is kept for inspection.
absl::StatusOr<std::unique_ptr<Model>> Infer(const onnx::ModelProto& m) {
  auto model = ModelFromProto(m, ".");
  if (!model.ok()) return model.status();
  auto st = SortTopologically((*model)->graph, {});
  if (!st.ok()) return st;
  auto n = InferShapes((*model)->graph);
  if (!n.ok()) return n.status();
  return model;
}

std::string TypeOf(const Model& m, const std::string& name) {
  auto it = m.graph.value_info.find(name);
  return it == m.graph.value_info.end() ? "(none)" : it->second.type.ToString();
}

// A Qwen3-like attention block: 4 query heads over 2 key/value heads of 8, a KV cache
// concatenated along the sequence axis, and an output reshape built from Shape(hidden).
onnx::ModelProto AttentionModel() {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  constexpr int F = onnx::TensorProto::FLOAT;
  *g->add_input() = Info("hidden", F, {"1", "seq", "32"});
  *g->add_input() = Info("past_key", F, {"1", "2", "past", "8"});
  *g->add_input() = Info("past_value", F, {"1", "2", "past", "8"});
  *g->add_output() = Info("out", F, {"1", "seq", "32"});
  *g->add_output() = Info("present_key", F, {"1", "2", "total", "8"});
  *g->add_output() = Info("present_value", F, {"1", "2", "total", "8"});
  *g->add_initializer() = Floats("wq", {32, 32});
  *g->add_initializer() = Floats("wk", {32, 16});
  *g->add_initializer() = Floats("wv", {32, 16});
  *g->add_initializer() = FloatTensor("scale", {}, {0.35f});
  *g->add_initializer() = Int64Tensor("q_shape", {4}, {1, -1, 4, 8});
  *g->add_initializer() = Int64Tensor("kv_shape", {4}, {1, -1, 2, 8});
  *g->add_initializer() = Int64Tensor("axis2", {1}, {2});
  *g->add_initializer() = Int64Tensor("axis0", {1}, {0});
  *g->add_initializer() = Int64Tensor("rep", {5}, {1, 2, 2, 1, 1});
  *g->add_initializer() = Int64Tensor("gqa_shape", {4}, {1, 4, -1, 8});
  *g->add_initializer() = Int64Tensor("i0", {}, {0});
  *g->add_initializer() = Int64Tensor("i1", {}, {1});
  *g->add_initializer() = Int64Tensor("minus_one", {1}, {-1});
  auto add = [&](onnx::NodeProto n) { *g->add_node() = std::move(n); };
  add(MakeNode("MatMul", {"hidden", "wq"}, {"q"}, "q_proj"));
  add(MakeNode("Reshape", {"q", "q_shape"}, {"q4"}));
  add(WithInts(MakeNode("Transpose", {"q4"}, {"qt"}), "perm", {0, 2, 1, 3}));
  for (const std::string kv : {"k", "v"}) {
    const std::string past = kv == "k" ? "past_key" : "past_value";
    const std::string present = kv == "k" ? "present_key" : "present_value";
    add(MakeNode("MatMul", {"hidden", "w" + kv}, {kv}, kv + "_proj"));
    add(MakeNode("Reshape", {kv, "kv_shape"}, {kv + "4"}));
    add(WithInts(MakeNode("Transpose", {kv + "4"}, {kv + "t"}), "perm", {0, 2, 1, 3}));
    add(WithInt(MakeNode("Concat", {past, kv + "t"}, {present}, kv + "_cache"), "axis", 2));
    add(MakeNode("Unsqueeze", {present, "axis2"}, {kv + "5"}));
    add(MakeNode("Expand", {kv + "5", "rep"}, {kv + "e"}));
    add(MakeNode("Reshape", {kv + "e", "gqa_shape"}, {kv + "g"}));
  }
  add(WithInts(MakeNode("Transpose", {"kg"}, {"kT"}), "perm", {0, 1, 3, 2}));
  add(MakeNode("MatMul", {"qt", "kT"}, {"scores"}));
  add(MakeNode("Mul", {"scores", "scale"}, {"scaled"}));
  add(WithInt(MakeNode("Softmax", {"scaled"}, {"probs"}), "axis", -1));
  add(MakeNode("MatMul", {"probs", "vg"}, {"ctx"}));
  add(WithInts(MakeNode("Transpose", {"ctx"}, {"ctx_t"}), "perm", {0, 2, 1, 3}));
  add(MakeNode("Shape", {"hidden"}, {"shp"}));
  add(MakeNode("Gather", {"shp", "i0"}, {"b"}));
  add(MakeNode("Gather", {"shp", "i1"}, {"s"}));
  add(MakeNode("Unsqueeze", {"b", "axis0"}, {"b1"}));
  add(MakeNode("Unsqueeze", {"s", "axis0"}, {"s1"}));
  add(WithInt(MakeNode("Concat", {"b1", "s1", "minus_one"}, {"out_shape"}), "axis", 0));
  add(MakeNode("Reshape", {"ctx_t", "out_shape"}, {"out"}, "o_reshape"));
  return m;
}

TEST(ShapeInference, AttentionBlockKeepsSymbolicSequenceDims) {
  auto m = Infer(AttentionModel());
  ASSERT_TRUE(m.ok()) << m.status();
  const Model& model = **m;
  EXPECT_EQ(TypeOf(model, "q"), "float32[1, seq, 32]");
  EXPECT_EQ(TypeOf(model, "q4"), "float32[1, seq, 4, 8]");
  EXPECT_EQ(TypeOf(model, "qt"), "float32[1, 4, seq, 8]");
  EXPECT_EQ(TypeOf(model, "kt"), "float32[1, 2, seq, 8]");
  // The cache is declared with its own name for past + seq; the model's name wins.
  EXPECT_EQ(TypeOf(model, "present_key"), "float32[1, 2, total, 8]");
  EXPECT_EQ(TypeOf(model, "k5"), "float32[1, 2, 1, total, 8]");
  EXPECT_EQ(TypeOf(model, "ke"), "float32[1, 2, 2, total, 8]");
  EXPECT_EQ(TypeOf(model, "kg"), "float32[1, 4, total, 8]");  // -1 = (2*2*total*8) / (4*8)
  EXPECT_EQ(TypeOf(model, "kT"), "float32[1, 4, 8, total]");
  EXPECT_EQ(TypeOf(model, "scores"), "float32[1, 4, seq, total]");
  EXPECT_EQ(TypeOf(model, "probs"), "float32[1, 4, seq, total]");
  EXPECT_EQ(TypeOf(model, "ctx"), "float32[1, 4, seq, 8]");
  EXPECT_EQ(TypeOf(model, "ctx_t"), "float32[1, seq, 4, 8]");
  EXPECT_EQ(TypeOf(model, "shp"), "int64[3]");
  EXPECT_EQ(TypeOf(model, "s"), "int64[]");
  EXPECT_EQ(TypeOf(model, "out_shape"), "int64[3]");
  EXPECT_EQ(TypeOf(model, "out"), "float32[1, seq, 32]");  // [1, seq, -1] from Shape(hidden)
}

TEST(ShapeInference, ConcatNamesTheSumWhenNothingIsDeclared) {
  onnx::ModelProto m = AttentionModel();
  auto* outs = m.mutable_graph()->mutable_output();
  outs->erase(outs->begin() + 1, outs->end());  // drop the declared caches
  auto* g = m.mutable_graph();
  *g->add_output() = Info("present_key", onnx::TensorProto::FLOAT, {});
  g->mutable_output(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto r = Infer(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "present_key"), "float32[1, 2, past + seq, 8]");
  EXPECT_EQ(TypeOf(**r, "present_value"), "float32[1, 2, past + seq, 8]");
  EXPECT_EQ(TypeOf(**r, "scores"), "float32[1, 4, seq, past + seq]");
  EXPECT_EQ(TypeOf(**r, "out"), "float32[1, seq, 32]");
}

TEST(ShapeInference, AttentionBlockRunsWithInferredTypes) {
  const std::string bytes = AttentionModel().SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status();
  const Graph& g = (*s)->impl().graph();
  EXPECT_TRUE(g.value_info.count("probs"));  // the session keeps what inference found
  Tensor hidden = Tensor::Empty(DType::kFloat32, {1, 3, 32});
  Tensor past = Tensor::Empty(DType::kFloat32, {1, 2, 2, 8});
  auto out = (*s)->Run({{"hidden", hidden}, {"past_key", past}, {"past_value", past}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 32}));
  EXPECT_EQ((*out)[1].shape(), (Shape{1, 2, 5, 8}));
}

TEST(ShapeInference, BroadcastingWithSymbols) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  constexpr int F = onnx::TensorProto::FLOAT;
  *g->add_input() = Info("a", F, {"batch", "1", "8"});
  *g->add_input() = Info("b", F, {"seq", "1"});
  *g->add_input() = Info("c", F, {"n", "4"});
  *g->add_input() = Info("d", F, {"m", "4"});
  *g->add_input() = Info("e", F, {"n", "1"});
  *g->add_input() = Info("f", F, {"4"});
  *g->add_input() = Info("cond", onnx::TensorProto::BOOL, {"n", "1"});
  *g->add_initializer() = FloatTensor("zero", {}, {0.f});
  *g->add_node() = MakeNode("Add", {"a", "b"}, {"ab"});          // [batch, seq, 8]
  *g->add_node() = MakeNode("Mul", {"c", "e"}, {"ce"});          // [n, 4]: equal symbols, 1 broadcasts
  *g->add_node() = MakeNode("Sub", {"c", "d"}, {"cd"});          // [?, 4]: n vs m is unknown
  *g->add_node() = MakeNode("Max", {"e", "f", "zero"}, {"ef"});  // [n, 4]
  *g->add_node() = MakeNode("Less", {"c", "f"}, {"lt"});         // bool [n, 4]
  *g->add_node() = MakeNode("Where", {"cond", "f", "zero"}, {"w"});
  *g->add_node() = WithInt(WithInts(MakeNode("ReduceMean", {"ab"}, {"mean"}), "axes", {-1}), "keepdims", 1);
  // Opset 21 ReduceMean takes axes as an input; use an older opset for the attribute form.
  m.mutable_opset_import(0)->set_version(17);
  auto r = Infer(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "ab"), "float32[batch, seq, 8]");
  EXPECT_EQ(TypeOf(**r, "ce"), "float32[n, 4]");
  EXPECT_EQ(TypeOf(**r, "cd"), "float32[?, 4]");
  EXPECT_EQ(TypeOf(**r, "ef"), "float32[n, 4]");
  EXPECT_EQ(TypeOf(**r, "lt"), "bool[n, 4]");
  EXPECT_EQ(TypeOf(**r, "w"), "float32[n, 4]");
  EXPECT_EQ(TypeOf(**r, "mean"), "float32[batch, seq, 1]");
}

TEST(ShapeInference, ShapeArithmeticAndWindows) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  constexpr int F = onnx::TensorProto::FLOAT;
  *g->add_input() = Info("x", F, {"batch", "3", "32", "32"});
  *g->add_input() = Info("t", F, {"seq", "12"});
  *g->add_initializer() = Floats("w", {8, 3, 3, 3});
  *g->add_initializer() = Int64Tensor("starts", {1}, {1});
  *g->add_initializer() = Int64Tensor("ends", {1}, {INT64_MAX});
  *g->add_initializer() = Int64Tensor("splits", {3}, {2, 4, 6});
  *g->add_initializer() = Int64Tensor("reps", {2}, {2, 1});
  *g->add_initializer() = Int64Tensor("pairs", {3}, {-1, 2, 12});
  *g->add_initializer() = Int64Tensor("rows", {2}, {-1, 12});
  auto* conv = g->add_node();
  *conv = WithInts(WithInts(MakeNode("Conv", {"x", "w"}, {"y"}), "pads", {1, 1, 1, 1}), "strides", {2, 2});
  *g->add_node() = WithInts(MakeNode("MaxPool", {"y"}, {"p"}), "kernel_shape", {2, 2});
  *g->add_node() = MakeNode("GlobalAveragePool", {"p"}, {"gp"});
  *g->add_node() = WithInt(MakeNode("Flatten", {"gp"}, {"flat"}), "axis", 1);
  *g->add_node() = MakeNode("Shape", {"x"}, {"xs"});
  *g->add_node() = MakeNode("Slice", {"xs", "starts", "ends"}, {"hw"});  // [3, 32, 32]
  *g->add_node() = MakeNode("ConstantOfShape", {"hw"}, {"zeros"});
  *g->add_node() = WithInt(MakeNode("Split", {"t", "splits"}, {"t0", "t1", "t2"}), "axis", 1);
  *g->add_node() = MakeNode("Transpose", {"t2"}, {"t2T"});
  *g->add_node() = MakeNode("MatMul", {"t2T", "t1"}, {"t21"});  // [6, seq] x [seq, 4]
  *g->add_node() = MakeNode("Size", {"x"}, {"n"});
  *g->add_node() = MakeNode("Tile", {"t", "reps"}, {"tt"});        // [2*seq, 12]
  *g->add_node() = MakeNode("Reshape", {"tt", "pairs"}, {"tp"});   // [seq, 2, 12]
  *g->add_node() = MakeNode("Reshape", {"t", "rows"}, {"tr"});
  *g->add_node() = WithInt(MakeNode("Cast", {"hw"}, {"hwf"}), "to", onnx::TensorProto::FLOAT);
  auto r = Infer(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "y"), "float32[batch, 8, 16, 16]");
  EXPECT_EQ(TypeOf(**r, "p"), "float32[batch, 8, 15, 15]");
  EXPECT_EQ(TypeOf(**r, "gp"), "float32[batch, 8, 1, 1]");
  EXPECT_EQ(TypeOf(**r, "flat"), "float32[batch, 8]");
  EXPECT_EQ(TypeOf(**r, "hw"), "int64[3]");
  EXPECT_EQ(TypeOf(**r, "zeros"), "float32[3, 32, 32]");
  EXPECT_EQ(TypeOf(**r, "t0"), "float32[seq, 2]");
  EXPECT_EQ(TypeOf(**r, "t2T"), "float32[6, seq]");
  EXPECT_EQ(TypeOf(**r, "n"), "int64[]");
  EXPECT_EQ(TypeOf(**r, "hwf"), "float32[3]");
  EXPECT_EQ(TypeOf(**r, "t21"), "float32[6, 4]");
  EXPECT_EQ(TypeOf(**r, "tt"), "float32[2*seq, 12]");
  EXPECT_EQ(TypeOf(**r, "tp"), "float32[seq, 2, 12]");
  EXPECT_EQ(TypeOf(**r, "tr"), "float32[seq, 12]");
}

TEST(ShapeInference, PositionsFromShapeArithmetic) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  *g->add_input() = Info("ids", onnx::TensorProto::INT64, {"1", "seq"});
  *g->add_input() = Info("past", onnx::TensorProto::FLOAT, {"2", "past_len"});
  *g->add_initializer() = Int64Tensor("one", {}, {1});
  *g->add_initializer() = Int64Tensor("zero", {}, {0});
  *g->add_node() = MakeNode("Shape", {"ids"}, {"ids_shape"});
  *g->add_node() = MakeNode("Shape", {"past"}, {"past_shape"});
  *g->add_node() = MakeNode("Gather", {"ids_shape", "one"}, {"S"});
  *g->add_node() = MakeNode("Gather", {"past_shape", "one"}, {"P"});
  *g->add_node() = MakeNode("Add", {"P", "S"}, {"total"});
  *g->add_node() = MakeNode("Range", {"P", "total", "one"}, {"qpos"});
  *g->add_node() = MakeNode("Range", {"zero", "total", "one"}, {"kpos"});
  *g->add_node() = MakeNode("Range", {"S", "total", "one"}, {"rest"});
  auto r = Infer(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "total"), "int64[]");
  EXPECT_EQ(TypeOf(**r, "qpos"), "int64[seq]");
  EXPECT_EQ(TypeOf(**r, "kpos"), "int64[past_len + seq]");
  EXPECT_EQ(TypeOf(**r, "rest"), "int64[past_len]");
}

TEST(ShapeInference, UnknownOpsAndInputsStayUnknown) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  *g->add_input() = Info("x", onnx::TensorProto::FLOAT, {"2", "3"});
  auto* custom = g->add_node();
  *custom = MakeNode("Mystery", {"x"}, {"y"});
  custom->set_domain("com.example");
  *g->add_node() = MakeNode("Relu", {"y"}, {"z"});
  *g->add_node() = MakeNode("Relu", {"x"}, {"r"});
  auto* op = m.add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  auto r = Infer(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "y"), "(none)");
  EXPECT_EQ(TypeOf(**r, "z"), "(none)");
  EXPECT_EQ(TypeOf(**r, "r"), "float32[2, 3]");
}

onnx::ModelProto MatMulModel(const std::vector<std::string>& declared, int elem = onnx::TensorProto::FLOAT) {
  onnx::ModelProto m = MakeModel(21);
  auto* g = m.mutable_graph();
  *g->add_input() = Info("a", onnx::TensorProto::FLOAT, {"n", "3"});
  *g->add_initializer() = Floats("b", {3, 4});
  *g->add_node() = MakeNode("MatMul", {"a", "b"}, {"ab"}, "mm");
  *g->add_node() = MakeNode("Relu", {"ab"}, {"y"});
  *g->add_value_info() = Info("ab", elem, declared);
  *g->add_output() = Info("y", onnx::TensorProto::FLOAT, {"n", "4"});
  return m;
}

TEST(ShapeInference, DeclaredShapeThatContradictsIsAnError) {
  auto r = Infer(MatMulModel({"n", "5"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("'ab'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32[n, 5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32[n, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MatMul 'mm'"), std::string::npos) << msg;

  // The session refuses the model too.
  const std::string bytes = MatMulModel({"n", "5"}).SerializeAsString();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'ab'"), std::string::npos) << s.status();

  auto rank = Infer(MatMulModel({"n", "4", "1"}));
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("rank"), std::string::npos) << rank.status();
  auto elem = Infer(MatMulModel({"n", "4"}, onnx::TensorProto::DOUBLE));
  ASSERT_FALSE(elem.ok());
  EXPECT_NE(elem.status().message().find("element type"), std::string::npos) << elem.status();
}

TEST(ShapeInference, CompatibleDeclarationsRefineEachOther) {
  auto r = Infer(MatMulModel({"rows", ""}));  // symbols are names, never checked against each other
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(TypeOf(**r, "ab"), "float32[rows, 4]");  // the declared name, the inferred size
  EXPECT_EQ(TypeOf(**r, "y"), "float32[n, 4]");      // y's own declaration names it n
}

}  // namespace
}  // namespace oneinfer
