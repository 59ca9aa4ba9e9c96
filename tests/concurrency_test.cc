// Concurrency: the pool's nested calls, one Session run from several threads at once, Generators
// sharing one Session, and a batch whose alike sequences take their per-sequence steps side by
// side on the pool.
// Each concurrent result must equal the same call made alone. The ThreadSanitizer tree
// (scripts/sanitize.sh thread) runs this file on its own.
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "oneinfer/batch_generator.h"
#include "oneinfer/convert.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;
constexpr int kThreads = 4;

// A task that itself calls the pool (a batch member's kernel inside a side-by-side stretch) runs
// its inner tasks inline, in order, on its own thread: none is lost, none runs twice, no deadlock.
TEST(ThreadPoolNesting, ATaskThatRunsTasksRunsThemInlineInOrder) {
  ThreadPool pool(2);
  constexpr int kOuter = 6, kInner = 5;
  std::vector<std::vector<int>> order(kOuter);
  std::vector<std::thread::id> outer_thread(kOuter);
  std::vector<std::vector<std::thread::id>> inner_thread(kOuter, std::vector<std::thread::id>(kInner));
  std::atomic<int> chunks{0};
  for (int round = 0; round < 20; ++round) {
    for (auto& o : order) o.clear();
    chunks = 0;
    pool.RunTasks(kOuter, [&](int64_t t) {
      outer_thread[t] = std::this_thread::get_id();
      pool.RunTasks(kInner, [&](int64_t i) {
        order[t].push_back(static_cast<int>(i));
        inner_thread[t][i] = std::this_thread::get_id();
      });
      pool.ParallelFor(100, 10, [&](int64_t b, int64_t e) { chunks += static_cast<int>(e - b); });
    });
    EXPECT_EQ(chunks.load(), kOuter * 100);
    for (int t = 0; t < kOuter; ++t) {
      EXPECT_EQ(order[t], (std::vector<int>{0, 1, 2, 3, 4})) << "outer task " << t;
      for (int i = 0; i < kInner; ++i) EXPECT_EQ(inner_thread[t][i], outer_thread[t]);
    }
  }
  // Outside any task the pool runs in parallel again.
  std::atomic<int> after{0};
  pool.RunTasks(4, [&](int64_t) { ++after; });
  EXPECT_EQ(after.load(), 4);
}

// A random tiny Qwen3 (2 layers, real vocabulary) exported with its stacked KV cache, loaded once
// with a two-thread pool that every concurrent run shares.
class Concurrency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("concurrency"));
    RandomQwen3Options ro;
    ro.seed = 11;
    ASSERT_TRUE(WriteRandomQwen3((*dir_ / "ckpt").string(), ro).ok());
    ExportQwen3Options eo;
    eo.cached = true;
    auto r = ExportQwen3((*dir_ / "ckpt").string(), (*dir_ / "model.onnx").string(), eo);
    ASSERT_TRUE(r.ok()) << r.status();
    SessionOptions so;
    so.num_threads = 2;
    auto s = Session::Load((*dir_ / "model.onnx").string(), so);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = s->release();
  }
  static void TearDownTestSuite() {
    delete session_;
    fs::remove_all(*dir_);
    delete dir_;
  }

  // input_ids [1, S] from `ids` and an empty cache: the logits of a whole-prompt run.
  static absl::StatusOr<std::vector<Tensor>> RunPrompt(const std::vector<int64_t>& ids) {
    Shape past;
    for (const IOInfo& in : session_->inputs())
      if (in.name == "past_kv") past = in.shape;
    past[1] = 1;
    past[3] = 0;
    std::vector<Feed> feeds;
    feeds.emplace_back("input_ids", Tensor::FromVector(DType::kInt64, {1, static_cast<int64_t>(ids.size())}, ids));
    Tensor empty = Tensor::Empty(DType::kFloat32, past);
    feeds.emplace_back("past_kv", empty);
    return session_->Run(feeds, {"logits"});
  }

  static std::vector<int64_t> Prompt(int thread) {
    std::vector<int64_t> ids;
    for (int i = 0; i < 6 + thread; ++i) ids.push_back(100 + 37 * thread + 5 * i);
    return ids;
  }

  static fs::path* dir_;
  static Session* session_;
};
fs::path* Concurrency::dir_ = nullptr;
Session* Concurrency::session_ = nullptr;

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

TEST_F(Concurrency, OneSessionRunFromFourThreadsGivesTheOutputsOfSeparateRuns) {
  std::vector<Tensor> expected;
  for (int t = 0; t < kThreads; ++t) {
    auto out = RunPrompt(Prompt(t));
    ASSERT_TRUE(out.ok()) << out.status();
    expected.push_back((*out)[0]);
  }
  // Different prompts per thread, so a run that read another's intermediate values would differ.
  std::vector<std::vector<Tensor>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        auto out = RunPrompt(Prompt(t));
        if (!out.ok()) {
          errors[t] = std::string(out.status().message());
          return;
        }
        got[t].push_back((*out)[0]);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(errors[t].empty()) << "thread " << t << ": " << errors[t];
    ASSERT_EQ(got[t].size(), 3u);
    for (const Tensor& out : got[t]) EXPECT_TRUE(SameBits(out, expected[t])) << "thread " << t;
  }
}

TEST_F(Concurrency, GeneratorsSharingOneSessionGenerateWhatEachDoesAlone) {
  auto generate = [](int t) -> absl::StatusOr<std::vector<int32_t>> {
    auto gen = Generator::Create(*session_);
    if (!gen.ok()) return gen.status();
    GenerateOptions o;
    o.max_new_tokens = 6;
    // Thread 0 greedy, the others sampling with their own seeds.
    o.sampling.temperature = t == 0 ? 0.0f : 0.8f;
    o.sampling.seed = static_cast<uint64_t>(t);
    const std::vector<int64_t> p = Prompt(t);
    auto r = (*gen)->Generate(std::vector<int32_t>(p.begin(), p.end()), o);
    if (!r.ok()) return r.status();
    return r->generated_ids;
  };
  std::vector<std::vector<int32_t>> expected;
  for (int t = 0; t < kThreads; ++t) {
    auto ids = generate(t);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_EQ(ids->size(), 6u);
    expected.push_back(*ids);
  }
  std::vector<absl::StatusOr<std::vector<int32_t>>> got(kThreads, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { got[t] = generate(t); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(got[t].ok()) << "thread " << t << ": " << got[t].status();
    EXPECT_EQ(*got[t], expected[t]) << "thread " << t;
  }
}

// Sequences of one prompt length decode in lockstep: each pass runs their per-sequence steps
// (attention, norms, rotary, element-wise) side by side on the session's two-thread pool.
TEST_F(Concurrency, ABatchOfAlikeSequencesGeneratesWhatEachDoesAlone) {
  constexpr int kSequences = 4, kNew = 6;
  auto prompt = [](int t) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 7; ++i) ids.push_back(200 + 41 * t + 3 * i);
    return ids;
  };
  std::vector<std::vector<int32_t>> expected;
  for (int t = 0; t < kSequences; ++t) {
    auto gen = Generator::Create(*session_);
    ASSERT_TRUE(gen.ok()) << gen.status();
    GenerateOptions o;
    o.max_new_tokens = kNew;
    auto r = (*gen)->Generate(prompt(t), o);
    ASSERT_TRUE(r.ok()) << r.status();
    expected.push_back(r->generated_ids);
  }
  BatchOptions bo;
  bo.max_sequences = kSequences;
  auto batch = BatchGenerator::Create(*session_, bo);
  ASSERT_TRUE(batch.ok()) << batch.status();
  SequenceOptions so;
  so.max_new_tokens = kNew;
  std::vector<int64_t> ids;
  for (int t = 0; t < kSequences; ++t) {
    auto id = (*batch)->Add(prompt(t), so);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  std::vector<std::vector<int32_t>> got(kSequences);
  for (int guard = 0; (*batch)->active() > 0 && guard < 100; ++guard) {
    auto events = (*batch)->Step();
    ASSERT_TRUE(events.ok()) << events.status();
    for (const SequenceEvent& e : *events) {
      for (int t = 0; t < kSequences; ++t) if (e.has_token && e.id == ids[t]) got[t].push_back(e.token);
    }
  }
  for (int t = 0; t < kSequences; ++t) EXPECT_EQ(got[t], expected[t]) << "sequence " << t;
}

}  // namespace
}  // namespace oneinfer
