// The Generator's KV-cache conventions (include/oneinfer/generator.h) on crafted graphs: what it
// feeds a per-layer (optimum / onnxruntime-genai) graph at each step, float16 caches and logits,
// chunked prompts, and the one clear error for each way a graph can break a convention. Real
// decoders in these layouts are checked against ONNX Runtime by tests/llm_layouts_parity.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "oneinfer/generator.h"
#include "tests/crafted_models.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using ::testing::HasSubstr;
using namespace oneinfer::testing;

constexpr int64_t kVocab = 64, kKvHeads = 2, kHeadDim = 4;

struct Layout {
  int layers = 2;
  int elem = onnx::TensorProto::FLOAT;         // cache and logits type
  bool mask = true, positions = true;
  std::vector<std::string> drop_outputs;        // present outputs left out
  int64_t present_kv_heads = kKvHeads;          // declared on present.0.key
  int64_t past_kv_heads = kKvHeads;             // declared on every past (-1: symbolic)
  int first_layer = 0;
  std::string extra_input;                      // an input outside every convention
};

// TensorInfo with each symbolic dim named (the session holds one name to one size per run).
onnx::ValueInfoProto Info(const std::string& name, int elem, const std::vector<int64_t>& dims,
                          const std::vector<std::string>& params) {
  onnx::ValueInfoProto v = TensorInfo(name, elem, dims);
  auto* shape = v.mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int i = 0; i < shape->dim_size(); ++i)
    if (dims[static_cast<size_t>(i)] < 0) shape->mutable_dim(i)->set_dim_param(params[static_cast<size_t>(i)]);
  return v;
}

// A graph in the per-layer layout whose next token is
//   n = sum(attention_mask) + position_ids[0, -1] + 7 * (sum(attention_mask) - past - S)
// (past: the sequence length of past_key_values.0.key, S: the new tokens), so a correct driver
// sees n = 2 (P + S) - 1 at every step, and a wrong mask, position or cache length shows in the
// tokens. Each present is its past with S zero rows appended.
onnx::ModelProto PerLayerModel(const Layout& o) {
  onnx::ModelProto m = MakeModel(17);
  auto* g = m.mutable_graph();
  auto add = [&](onnx::NodeProto n) { *g->add_node() = std::move(n); };
  const std::vector<std::string> seq = {"", "sequence_length"};
  *g->add_input() = Info("input_ids", onnx::TensorProto::INT64, {1, -1}, seq);
  if (o.mask) *g->add_input() = Info("attention_mask", onnx::TensorProto::INT64, {1, -1}, {"", "total_sequence_length"});
  if (o.positions) *g->add_input() = Info("position_ids", onnx::TensorProto::INT64, {1, -1}, seq);
  if (!o.extra_input.empty()) *g->add_input() = Info(o.extra_input, onnx::TensorProto::INT64, {1, -1}, seq);
  *g->add_initializer() = Int64Tensor("zero", {1}, {0});
  *g->add_initializer() = Int64Tensor("one", {1}, {1});
  *g->add_initializer() = Int64Tensor("two", {1}, {2});
  *g->add_initializer() = Int64Tensor("minus_one", {1}, {-1});
  *g->add_initializer() = Int64Tensor("seven", {}, {7});
  *g->add_initializer() = Int64Tensor("vocab", {}, {kVocab});
  *g->add_initializer() = Int64Tensor("zero_s", {}, {0});
  *g->add_initializer() = Int64Tensor("one_s", {}, {1});
  *g->add_initializer() = Int64Tensor("head", {2}, {1, kKvHeads});
  *g->add_initializer() = Int64Tensor("dim", {1}, {kHeadDim});
  *g->add_initializer() = Int64Tensor("vocab_1", {1}, {kVocab});
  *g->add_initializer() = FloatTensor("zeros", {1, kKvHeads, 1, kHeadDim}, std::vector<float>(kKvHeads * kHeadDim, 0.f));
  add(MakeNode("Shape", {"input_ids"}, {"ids_shape"}));
  add(MakeNode("Slice", {"ids_shape", "one", "two"}, {"S"}));  // [S]
  auto new_shape = MakeNode("Concat", {"head", "S", "dim"}, {"new_shape"});
  AddIntAttr(&new_shape, "axis", 0);
  add(new_shape);
  auto cast_zeros = MakeNode("Cast", {"zeros"}, {"zeros_t"});
  AddIntAttr(&cast_zeros, "to", o.elem);
  add(cast_zeros);
  add(MakeNode("Expand", {"zeros_t", "new_shape"}, {"new_rows"}));
  for (int l = o.first_layer; l < o.layers; ++l) {
    for (const char* part : {"key", "value"}) {
      const std::string past = "past_key_values." + std::to_string(l) + "." + part;
      const std::string present = "present." + std::to_string(l) + "." + part;
      *g->add_input() = Info(past, o.elem, {1, o.past_kv_heads, -1, kHeadDim}, {"", "kv_heads", "past_sequence_length", ""});
      auto cat = MakeNode("Concat", {past, "new_rows"}, {present});
      AddIntAttr(&cat, "axis", 2);
      add(cat);
      bool dropped = false;
      for (const std::string& d : o.drop_outputs) dropped |= d == present;
      if (!dropped)
        *g->add_output() = Info(present, o.elem,
                                {1, l == 0 && std::string(part) == "key" ? o.present_kv_heads : kKvHeads, -1, kHeadDim},
                                {"", "", "total_sequence_length", ""});
    }
  }
  // total = sum(mask) (or P + S without a mask), last = position_ids[0, -1] (or P + S - 1).
  const std::string first_past = "past_key_values." + std::to_string(o.first_layer) + ".key";
  add(MakeNode("Shape", {first_past}, {"past_shape"}));
  add(MakeNode("Slice", {"past_shape", "two", "minus_one"}, {"P"}));  // [P]
  add(MakeNode("Add", {"P", "S"}, {"PS"}));
  if (o.mask) {
    auto sum = MakeNode("ReduceSum", {"attention_mask"}, {"total2"});
    AddIntAttr(&sum, "keepdims", 0);
    add(sum);
    add(MakeNode("Reshape", {"total2", "one"}, {"total"}));
  } else {
    add(MakeNode("Identity", {"PS"}, {"total"}));
  }
  if (o.positions) {
    auto last = MakeNode("Gather", {"position_ids", "minus_one"}, {"last2"});
    AddIntAttr(&last, "axis", 1);
    add(last);
    add(MakeNode("Reshape", {"last2", "one"}, {"last"}));
  } else {
    add(MakeNode("Sub", {"PS", "one"}, {"last"}));
  }
  add(MakeNode("Sub", {"total", "PS"}, {"off"}));
  add(MakeNode("Mul", {"off", "seven"}, {"off7"}));
  add(MakeNode("Add", {"total", "last"}, {"n0"}));
  add(MakeNode("Add", {"n0", "off7"}, {"n"}));
  add(MakeNode("Range", {"zero_s", "vocab", "one_s"}, {"ids"}));
  add(MakeNode("Sub", {"ids", "n"}, {"dist"}));
  add(MakeNode("Abs", {"dist"}, {"adist"}));
  add(MakeNode("Neg", {"adist"}, {"score_i"}));
  auto to_float = MakeNode("Cast", {"score_i"}, {"score"});
  AddIntAttr(&to_float, "to", o.elem);
  add(to_float);
  auto logits_shape = MakeNode("Concat", {"ids_shape", "vocab_1"}, {"logits_shape"});
  AddIntAttr(&logits_shape, "axis", 0);
  add(logits_shape);
  add(MakeNode("Expand", {"score", "logits_shape"}, {"logits"}));
  *g->add_output() = Info("logits", o.elem, {1, -1, kVocab}, seq);
  return m;
}

absl::StatusOr<std::unique_ptr<Session>> Load(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  return Session::LoadFromBuffer(bytes.data(), bytes.size());
}

std::string CreateError(const Layout& o) {
  auto s = Load(PerLayerModel(o));
  if (!s.ok()) return "load failed: " + std::string(s.status().message());
  auto g = Generator::Create(**s);
  return g.ok() ? "" : std::string(g.status().message());
}

std::vector<int32_t> Generate(const Layout& o, int prefill_chunk) {
  auto s = Load(PerLayerModel(o));
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto g = Generator::Create(**s);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  EXPECT_EQ((*g)->cache_layout(), Generator::CacheLayout::kPerLayer);
  GenerateOptions opt;
  opt.max_new_tokens = 4;
  opt.prefill_chunk = prefill_chunk;
  auto r = (*g)->Generate({3, 1, 4, 1, 5}, opt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->generated_ids : std::vector<int32_t>{};
}

// 5 prompt tokens: the first token sees 5 positions (n = 9), each later step one more.
const std::vector<int32_t> kExpected = {9, 11, 13, 15};

TEST(GeneratorConventions, PerLayerGetsMaskPositionsAndTheGrownCacheAtEveryStep) {
  for (int chunk : {256, 2, 1, 0}) EXPECT_EQ(Generate(Layout{}, chunk), kExpected) << "prefill_chunk " << chunk;
}

TEST(GeneratorConventions, Float16CacheAndLogits) {
  Layout o;
  o.elem = onnx::TensorProto::FLOAT16;
  EXPECT_EQ(Generate(o, 256), kExpected);
  EXPECT_EQ(Generate(o, 2), kExpected);
}

TEST(GeneratorConventions, MaskAndPositionsAreOptional) {
  Layout o;
  o.mask = false;
  o.positions = false;
  EXPECT_EQ(Generate(o, 3), kExpected);
}

TEST(GeneratorConventions, BrokenConventionsAreOneClearError) {
  Layout missing;
  missing.drop_outputs = {"present.1.value"};
  EXPECT_THAT(CreateError(missing), HasSubstr("input 'past_key_values.1.value' has no matching output 'present.1.value'"));
  Layout heads;
  heads.present_kv_heads = 3;
  // Here the loader's shape check sees it first (the Generator checks the declared shapes for
  // graphs whose attention op hides them); either way one error names the output and the heads.
  const std::string heads_error = CreateError(heads);
  EXPECT_THAT(heads_error, HasSubstr("present.0.key"));
  EXPECT_THAT(heads_error, ::testing::AnyOf(HasSubstr("kv_heads 3 but input 'past_key_values.0.key' has 2"),
                                            HasSubstr("declared float32[1, 3,")));
  Layout gap;
  gap.first_layer = 1;
  EXPECT_THAT(CreateError(gap), HasSubstr("skip layer 0"));
  Layout extra;
  extra.extra_input = "token_type_ids";
  EXPECT_THAT(CreateError(extra), HasSubstr("input 'token_type_ids' outside the causal-LM conventions"));
  Layout symbolic;
  symbolic.past_kv_heads = -1;
  EXPECT_THAT(CreateError(symbolic), HasSubstr("kv_heads and head_dim fixed"));
}

TEST(GeneratorConventions, KeyWithoutValueIsAnError) {
  onnx::ModelProto m = PerLayerModel(Layout{});
  auto* g = m.mutable_graph();
  // Drop past_key_values.1.value as an input: its Concat then reads nothing the graph has, so
  // feed it from an initializer instead.
  for (int i = 0; i < g->input_size(); ++i) {
    if (g->input(i).name() == "past_key_values.1.value") {
      g->mutable_input()->DeleteSubrange(i, 1);
      break;
    }
  }
  *g->add_initializer() = FloatTensor("past_key_values.1.value", {1, kKvHeads, 0, kHeadDim}, {});
  auto s = Load(m);
  ASSERT_TRUE(s.ok()) << s.status();
  auto gen = Generator::Create(**s);
  ASSERT_FALSE(gen.ok());
  EXPECT_THAT(std::string(gen.status().message()), HasSubstr("layer 1 has past_key_values.1.key but not its value"));
}

// A com.microsoft RotaryEmbedding whose cos_cache is a constant of 16 rows: the session reports
// 16 positions and the node; the same table fed as an overridable input is not a limit.
onnx::ModelProto RotaryModel(bool cos_is_input) {
  onnx::ModelProto m = MakeModel();
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {1, 1, 2, 8});
  *g->add_input() = TensorInfo("pos", onnx::TensorProto::INT64, {1, 2});
  if (cos_is_input) *g->add_input() = TensorInfo("cos", onnx::TensorProto::FLOAT, {16, 4});
  *g->add_initializer() = FloatTensor("cos", {16, 4}, std::vector<float>(64, 1.f));
  *g->add_initializer() = FloatTensor("sin", {16, 4}, std::vector<float>(64, 0.f));
  onnx::NodeProto n = MakeNode("RotaryEmbedding", {"x", "pos", "cos", "sin"}, {"y"}, "rope");
  n.set_domain("com.microsoft");
  *g->add_node() = n;
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {1, 1, 2, 8});
  return m;
}

TEST(RotaryLimit, AConstantCosCacheBoundsThePositionsAndNamesItsNode) {
  for (bool fed : {false, true}) {
    const std::string bytes = RotaryModel(fed).SerializeAsString();
    auto s = Session::LoadFromBuffer(bytes.data(), bytes.size());
    ASSERT_TRUE(s.ok()) << s.status();
    const RotaryLimit& r = (*s)->rotary_limit();
    EXPECT_EQ(r.positions, fed ? 0 : 16);
    if (!fed) {
      EXPECT_EQ(r.node, "RotaryEmbedding 'rope'");
      EXPECT_EQ(r.input, "cos");
    }
  }
}

}  // namespace
}  // namespace oneinfer
