// Long prompts on the cached Qwen3 graph: a prompt longer than one prefill chunk gives the same
// tokens as the whole prompt at once, and the memory a run needs no longer holds a row of logits
// (151,936 floats) for every prompt position.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;
using oneinfer::testing::RunCli;

class LongPrompt : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(oneinfer::testing::TempDir("long_prompt"));
    auto r = RunCli("export-qwen3 --random tiny --seed 11 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(r.code, 0) << r.out;
    r = RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " + (*dir_ / "m" / "model.onnx").string() + " --cached");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::vector<int32_t> Prompt(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 151936);
    return ids;
  }
  // Greedy tokens and the logits they were chosen from.
  struct Run {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
    size_t peak_bytes = 0;
  };
  // The tiny cached model on one thread; gen is null (with a test failure) if it did not load.
  struct Loaded {
    std::unique_ptr<Session> session;
    std::unique_ptr<Generator> gen;
  };
  static Loaded Load() {
    SessionOptions so;
    so.num_threads = 1;
    Loaded m;
    auto session = Session::Load((*dir_ / "m" / "model.onnx").string(), so);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return m;
    m.session = std::move(*session);
    auto gen = Generator::Create(*m.session);
    EXPECT_TRUE(gen.ok()) << gen.status();
    if (gen.ok()) m.gen = std::move(*gen);
    return m;
  }
  static Run Generate(const std::vector<int32_t>& prompt, int chunk, int new_tokens = 8) {
    const Loaded m = Load();
    if (!m.gen) return {};
    EXPECT_TRUE(m.gen->cached());
    GenerateOptions o;
    o.max_new_tokens = new_tokens;
    o.prefill_chunk = chunk;
    Run run;
    auto result = m.gen->Generate(prompt, o, [&](int32_t, const float* logits, int64_t vocab) {
      run.logits.emplace_back(logits, logits + vocab);
      return true;
    });
    EXPECT_TRUE(result.ok()) << result.status();
    if (result.ok()) run.tokens = result->generated_ids;
    run.peak_bytes = m.session->peak_intermediate_bytes();
    return run;
  }
  static fs::path* dir_;
};
fs::path* LongPrompt::dir_ = nullptr;

TEST_F(LongPrompt, ChunkedPrefillGivesTheSameTokens) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<int32_t> prompt = Prompt(100, seed);
    const Run whole = Generate(prompt, 0);
    ASSERT_EQ(whole.tokens.size(), 8u);
    // 100 = 3 x 32 + 4 and 14 x 7 + 2: chunks that do and do not divide the prompt, and a chunk
    // as long as the prompt (one pass, as before).
    for (int chunk : {32, 7, 100}) {
      const Run chunked = Generate(prompt, chunk);
      EXPECT_EQ(chunked.tokens, whole.tokens) << "seed " << seed << " chunk " << chunk;
      ASSERT_EQ(chunked.logits.size(), whole.logits.size());
      for (size_t s = 0; s < whole.logits.size(); ++s) {
        float max_abs = 0, max_diff = 0;
        for (size_t i = 0; i < whole.logits[s].size(); ++i) {
          max_abs = std::max(max_abs, std::fabs(whole.logits[s][i]));
          max_diff = std::max(max_diff, std::fabs(whole.logits[s][i] - chunked.logits[s][i]));
        }
        EXPECT_LE(max_diff, 1e-4f * max_abs) << "seed " << seed << " chunk " << chunk << " step " << s;
      }
    }
  }
}

TEST_F(LongPrompt, ChunkedPrefillComputesNoChunkLogits) {
  // 600 rows of 151,936 logits would be 365 MB. The generator asks for the last row of the logits
  // alone (RunOptions::last_row_outputs), so the whole prompt at once makes one row (608 KB) next
  // to its 600 x 600 attention scores; in chunks of 32 the chunks ask for present_kv alone, so
  // the session never runs their lm_head, and the last token alone makes one row: the peak is
  // that row and a KV cache of 2 x 2 x 2 x 600 x 16 floats, not a chunk's 32 rows (19 MB).
  constexpr size_t kRow = size_t{151936} * 4;
  const std::vector<int32_t> prompt = Prompt(600, 4);
  const Run whole = Generate(prompt, 0, 1);
  const Run chunked = Generate(prompt, 32, 1);
  EXPECT_LT(whole.peak_bytes, 32 * kRow) << whole.peak_bytes;
  EXPECT_LT(chunked.peak_bytes, 4 * kRow) << chunked.peak_bytes;
}

TEST_F(LongPrompt, ANegativeChunkIsRefused) {
  const Loaded m = Load();
  ASSERT_TRUE(m.gen);
  GenerateOptions o;
  o.prefill_chunk = -1;
  auto r = m.gen->Generate({1, 2, 3}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prefill_chunk must be >= 0"), std::string::npos) << r.status();
}

TEST_F(LongPrompt, RunOptionsStopEveryForwardPass) {
  const Loaded m = Load();
  ASSERT_TRUE(m.gen);
  RunOptions run;
  GenerateOptions o;
  o.run = &run;
  o.prefill_chunk = 16;
  int tokens = 0;
  auto count = [&](int32_t, const float*, int64_t) { return ++tokens > 0; };
  // A deadline already past stops the first prefill chunk: no token is made.
  run.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto r = m.gen->Generate(Prompt(40, 3), o, count);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(tokens, 0);
  // A cancel set while the callback says "go on" stops the next forward pass, not the callback.
  run.deadline = std::chrono::steady_clock::time_point::max();
  tokens = 0;
  r = m.gen->Generate(Prompt(40, 3), o, [&](int32_t, const float*, int64_t) {
    ++tokens;
    run.cancel = true;
    return true;
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(tokens, 1);
}

}  // namespace
}  // namespace oneinfer
