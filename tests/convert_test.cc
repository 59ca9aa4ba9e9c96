// The conversion layer called as a library (oneinfer/convert.h), and the one int8 weight
// quantiser (quant/weight_quant.h) that the exporter, the A8W8 quantizer and the run-time A8W8
// MatMul share.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/safetensors.h"
#include "graph/onnx_loader.h"
#include "oneinfer/convert.h"
#include "oneinfer/session.h"
#include "quant/dynamic_a8w8.h"
#include "quant/weight_quant.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;

TEST(WeightQuantS8, ScaleIsAmaxOver127AndCodesRoundHalfToEven) {
  // K x N = 4 x 2; column 0 has amax 127 (scale 1), column 1 amax 254 (scale 2).
  const std::vector<float> w = {2.5f, -254.0f,  //
                                3.5f, 5.0f,     //
                                -2.5f, 3.0f,    //
                                127.0f, 1.0f};
  std::vector<int8_t> q(8);
  std::vector<float> s(2);
  QuantizeWeightsS8(w.data(), 4, 2, WeightLayout::kKN, /*per_column=*/true, q.data(), s.data());
  EXPECT_EQ(s, (std::vector<float>{1.0f, 2.0f}));
  // 2.5 -> 2, 3.5 -> 4, -2.5 -> -2 (ties to even); 5/2 -> 2, 3/2 -> 2, 1/2 -> 0.
  EXPECT_EQ(q, (std::vector<int8_t>{2, -127, 4, 2, -2, 2, 127, 0}));
  // Per tensor: one scale from the whole matrix's amax.
  std::vector<float> st(1);
  QuantizeWeightsS8(w.data(), 4, 2, WeightLayout::kKN, /*per_column=*/false, q.data(), st.data());
  EXPECT_EQ(st[0], 2.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{1, -127, 2, 2, -1, 2, 64, 0}));
}

TEST(WeightQuantS8, AllZeroColumnGetsScaleOneAndZeroCodes) {
  const int64_t K = 3, N = 3;
  // Column 1 is all zero (one of its zeros negative).
  const std::vector<float> w = {1.0f, 0.0f, -4.0f,  //
                                0.5f, -0.0f, 2.0f,  //
                                -0.25f, 0.0f, 1.0f};
  std::vector<int8_t> q(K * N, 99);
  std::vector<float> s(N);
  QuantizeWeightsS8(w.data(), K, N, WeightLayout::kKN, true, q.data(), s.data());
  EXPECT_EQ(s[0], 1.0f / 127.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(s[2], 4.0f / 127.0f);
  for (int64_t k = 0; k < K; ++k) EXPECT_EQ(q[k * N + 1], 0) << "row " << k;

  // The [N, K] layout (a checkpoint's [out, in]) gives the same scales and transposed codes.
  std::vector<float> wt(K * N);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wt[n * K + k] = w[k * N + n];
  std::vector<int8_t> qt(K * N);
  std::vector<float> stt(N);
  QuantizeWeightsS8(wt.data(), K, N, WeightLayout::kNK, true, qt.data(), stt.data());
  EXPECT_EQ(stt, s);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(qt[n * K + k], q[k * N + n]);

  // An all-zero tensor, per tensor: scale 1 as well.
  const std::vector<float> zeros(6, 0.0f);
  std::vector<int8_t> qz(6, 99);
  float sz = 0.0f;
  QuantizeWeightsS8(zeros.data(), 2, 3, WeightLayout::kKN, false, qz.data(), &sz);
  EXPECT_EQ(sz, 1.0f);
  EXPECT_EQ(qz, std::vector<int8_t>(6, 0));

  // The run-time A8W8 weights take the same rule, from either orientation.
  const A8W8Weights a = A8W8Weights::FromFloat(w.data(), K, N);
  EXPECT_EQ(std::vector<float>(a.scales(), a.scales() + N), s);
  const A8W8Weights at = A8W8Weights::FromFloatTransposed(wt.data(), K, N);
  EXPECT_EQ(std::vector<float>(at.scales(), at.scales() + N), s);
}

// A float32 tensor of a written model (inline or in its external data file).
std::vector<float> ReadFloatInit(const onnx::ModelProto& m, const fs::path& dir, const std::string& name) {
  ExternalDataResolver resolver(dir.string());
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != name) continue;
    auto v = TensorFromProto(t, &resolver);
    EXPECT_TRUE(v.ok()) << v.status();
    if (!v.ok() || v->dtype() != DType::kFloat32) return {};
    return std::vector<float>(v->data<float>(), v->data<float>() + v->num_elements());
  }
  ADD_FAILURE() << "no initializer " << name;
  return {};
}

using testing::ReadModel;

// Logits of a causal-LM model for a few ids (all finite).
void ExpectRuns(const fs::path& model) {
  auto s = Session::Load(model.string());
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Feed> feeds;
  feeds.emplace_back("input_ids", Tensor::FromVector(DType::kInt64, {1, 4}, std::vector<int64_t>{9707, 11, 847, 829}));
  auto out = (*s)->Run(feeds, {"logits"});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& t = (*out)[0];
  ASSERT_EQ(t.dim(1), 4);
  for (int64_t i = 0; i < t.num_elements(); ++i) ASSERT_TRUE(std::isfinite(t.data<float>()[i])) << i;
}

class ConvertApi : public ::testing::Test {
 protected:
  // A random tiny Qwen3 whose layer-0 q_proj has output feature 0 all zero.
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("convert_api"));
    const fs::path random = *dir_ / "random";
    RandomQwen3Options ro;
    ro.seed = 5;
    ASSERT_TRUE(WriteRandomQwen3(random.string(), ro).ok());
    auto file = SafetensorsFile::Open((random / "model.safetensors").string());
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<SafetensorsOut> ts;
    for (const auto& [name, e] : (*file)->tensors()) {
      ts.push_back({name, e.dtype, e.shape, std::vector<unsigned char>(e.data, e.data + e.bytes)});
      // [out, in] BF16: row 0 is output feature 0, column 0 of the MatMul weight [in, out].
      if (name == "model.layers.0.self_attn.q_proj.weight") std::memset(ts.back().bytes.data(), 0, e.shape[1] * 2);
    }
    fs::create_directories(*dir_ / "ckpt");
    fs::copy_file(random / "config.json", *dir_ / "ckpt" / "config.json");
    ASSERT_TRUE(WriteSafetensorsFile((*dir_ / "ckpt" / "model.safetensors").string(), ts).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
};
fs::path* ConvertApi::dir_ = nullptr;

TEST_F(ConvertApi, Int8ExportGivesTheAllZeroColumnScaleOne) {
  ExportQwen3Options o;
  o.weights = Qwen3Weights::kInt8;
  const fs::path model = *dir_ / "int8" / "model.onnx";
  auto r = ExportQwen3((*dir_ / "ckpt").string(), model.string(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, model.string());
  EXPECT_EQ(r->data, model.string() + ".data");
  EXPECT_TRUE(r->q4nx.empty());
  EXPECT_TRUE(fs::exists(r->data));
  const auto scales = ReadFloatInit(ReadModel(model), model.parent_path(), "model.layers.0.self_attn.q_proj.weight_scale");
  ASSERT_EQ(scales.size(), 64u);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_GT(scales[1], 0.0f);
  EXPECT_LT(scales[1], 1.0f);
  ExpectRuns(model);
}

TEST_F(ConvertApi, QuantizeA8W8ReportsWhatItWroteAndEvaluates) {
  const fs::path fl = *dir_ / "float" / "model.onnx";
  ASSERT_TRUE(ExportQwen3((*dir_ / "ckpt").string(), fl.string()).ok());
  const fs::path ids = *dir_ / "ids.txt";
  std::ofstream(ids) << "9707 11 847 829 374 1207\n16948 323 358 1079\n";
  QuantizeA8W8Options o;
  o.calib_ids = ids.string();
  o.eval_ids = ids.string();
  o.calib_seq = 8;
  o.session.num_threads = 2;
  const fs::path out = *dir_ / "a8w8" / "model.onnx";
  auto r = QuantizeA8W8(fl.string(), out.string(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  // 7 projections x 2 layers + lm_head; the rotary outer product (K = 1) stays float.
  EXPECT_EQ(r->quantized_matmuls, 15);
  EXPECT_EQ(r->calibration_runs, 2);
  EXPECT_EQ(r->calibration_tokens, 10);
  EXPECT_EQ(r->calibration_source, ids.string());
  // Left float: the attention products (no constant weight) and the rotary outer product (K = 1).
  int left = 0;
  bool rotary = false;
  for (const auto& [why, count] : r->left_float) {
    left += count;
    rotary |= why.find("K = 1") != std::string::npos && count == 1;
  }
  EXPECT_TRUE(rotary);
  EXPECT_EQ(left, 1 + 2 * 2);
  EXPECT_GT(r->activation_ranges, 15);
  EXPECT_EQ(r->data, (fs::absolute(out).parent_path() / "model.onnx.data").string());
  EXPECT_TRUE(fs::exists(r->data));
  ASSERT_TRUE(r->eval_status.ok()) << r->eval_status;
  EXPECT_EQ(r->eval.positions, 10);
  EXPECT_GE(r->eval.mean_kl, 0.0);
  EXPECT_LE(r->eval.mean_kl, r->eval.max_kl);
  EXPECT_GE(r->eval.top1_agreement, 0.0);
  EXPECT_LE(r->eval.top1_agreement, 1.0);
  EXPECT_GT(r->eval.uniform_kl, 0.0);
  // The same rule as the exporter's for the all-zero weight column.
  const auto scales = ReadFloatInit(ReadModel(out), out.parent_path(), "model.layers.0.self_attn.q_proj.weight_scale");
  ASSERT_EQ(scales.size(), 64u);
  EXPECT_EQ(scales[0], 1.0f);
  ExpectRuns(out);
}

TEST_F(ConvertApi, ErrorsAreStatuses) {
  ExportQwen3Options o;
  o.weights = Qwen3Weights::kQ4NX;
  auto r = ExportQwen3((*dir_ / "ckpt").string(), (*dir_ / "x.q4nx").string(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = ExportQwen3((*dir_ / "nowhere").string(), (*dir_ / "y.onnx").string());
  EXPECT_FALSE(missing.ok());
  RandomQwen3Options ro;
  ro.architecture = "gpt2";
  EXPECT_EQ(WriteRandomQwen3((*dir_ / "z").string(), ro).code(), absl::StatusCode::kInvalidArgument);
  auto q = QuantizeA8W8((*dir_ / "nowhere.onnx").string(), (*dir_ / "q.onnx").string());
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kNotFound);
}

// Configs export-hf cannot follow are refused by name, not exported with the wrong arithmetic.
TEST_F(ConvertApi, UnsupportedConfigsAreNamedErrors) {
  const fs::path ckpt = *dir_ / "ckpt";
  const std::string original = [&] {
    std::ifstream f(ckpt / "config.json");
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }();
  auto export_with = [&](const nlohmann::json& patch) {
    nlohmann::json cfg = nlohmann::json::parse(original);
    cfg.update(patch);
    std::ofstream(ckpt / "config.json") << cfg.dump();
    auto r = ExportQwen3(ckpt.string(), (*dir_ / "cfg" / "model.onnx").string());
    std::ofstream(ckpt / "config.json") << original;
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_THAT(export_with({{"model_type", "gpt2"}}), ::testing::HasSubstr("model_type is 'gpt2', expected qwen3, qwen2, llama or mistral"));
  EXPECT_THAT(export_with({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}),
              ::testing::HasSubstr("rope_scaling type 'yarn' is not supported"));
  EXPECT_THAT(export_with({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                                             {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 8192}}}}),
              ::testing::HasSubstr("high_freq_factor > low_freq_factor"));
  EXPECT_THAT(export_with({{"mlp_bias", true}}), ::testing::HasSubstr("mlp_bias"));
  EXPECT_THAT(export_with({{"hidden_act", "gelu"}}), ::testing::HasSubstr("hidden_act is 'gelu'"));
  // A llama config over Qwen3 weights: no q/k norm is read, so it exports; a qwen2 config needs
  // the q/k/v biases the checkpoint lacks.
  EXPECT_EQ(export_with({{"model_type", "llama"}, {"tie_word_embeddings", true}}), "ok");
  EXPECT_THAT(export_with({{"model_type", "qwen2"}}), ::testing::HasSubstr("model.layers.0.self_attn.q_proj.bias"));
}

}  // namespace
}  // namespace oneinfer
