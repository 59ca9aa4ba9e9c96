// Continuous batching: Session::RunBatch and BatchGenerator. Every sequence in a batch must get
// exactly what it gets alone: the same output bits from RunBatch as from Run, the same tokens
// from BatchGenerator as from Generator::Generate, whatever runs beside it and whenever it joins.
#include "oneinfer/batch_generator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "oneinfer/convert.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "base/huge_pages.h"
#include "engine/session_impl.h"
#include "graph/internal_ops.h"
#include "tests/op_harness.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(100 + 37 * salt + 11 * i);
  return ids;
}

std::vector<int32_t> Alone(const Session& s, const std::vector<int32_t>& prompt, const SequenceOptions& o,
                                  int prefill_chunk = 256) {
  auto gen = Generator::Create(s);
  EXPECT_TRUE(gen.ok()) << gen.status();
  GenerateOptions go;
  go.max_new_tokens = o.max_new_tokens;
  go.sampling = o.sampling;
  go.stop_ids = o.stop_ids;
  go.prefill_chunk = prefill_chunk;
  auto r = (*gen)->Generate(prompt, go);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->generated_ids : std::vector<int32_t>{};
}

// The feeds of one step of the stacked-cache model: ids after `cache`.
std::vector<Feed> StepFeeds(const std::vector<int32_t>& ids, const Tensor& cache) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return {{"input_ids", Tensor::FromVector(DType::kInt64, {1, static_cast<int64_t>(v.size())}, v)}, {"past_kv", cache}};
}

// A one-sequence cache holding no positions.
Tensor EmptyCache(const Session& s) {
  Shape past;
  for (const IOInfo& in : s.inputs()) if (in.name == "past_kv") past = in.shape;
  past[1] = 1;
  past[3] = 0;
  return Tensor::Empty(DType::kFloat32, past);
}

// A random tiny Qwen3 with its stacked cache, loaded as float32 and as dynamic int8.
class Batching : public ::testing::TestWithParam<MatMulPrecision> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("batching"));
    RandomQwen3Options ro;
    ro.seed = 5;
    ASSERT_TRUE(WriteRandomQwen3((*dir_ / "ckpt").string(), ro).ok());
    ExportQwen3Options eo;
    eo.cached = true;
    auto r = ExportQwen3((*dir_ / "ckpt").string(), (*dir_ / "model.onnx").string(), eo);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  static void TearDownTestSuite() {
    sessions_.clear();
    fs::remove_all(*dir_);
    delete dir_;
  }
  const Session& session() {
    auto& s = sessions_[GetParam()];
    if (!s) {
      SessionOptions so;
      so.num_threads = 2;
      so.matmul = GetParam();
      auto loaded = Session::Load((*dir_ / "model.onnx").string(), so);
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      s = std::move(*loaded);
    }
    return *s;
  }
  static fs::path* dir_;
  static std::map<MatMulPrecision, std::unique_ptr<Session>> sessions_;
};
fs::path* Batching::dir_ = nullptr;
std::map<MatMulPrecision, std::unique_ptr<Session>> Batching::sessions_;

// Runs b until every sequence finishes, collecting each one's tokens (joining ones as they come).
std::map<int64_t, std::vector<int32_t>> Drain(BatchGenerator& b, std::map<int64_t, FinishReason>* finish = nullptr) {
  std::map<int64_t, std::vector<int32_t>> tokens;
  for (int guard = 0; b.active() > 0 && guard < 1000; ++guard) {
    auto events = b.Step();
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) break;
    for (const SequenceEvent& e : *events) {
      if (e.has_token) tokens[e.id].push_back(e.token);
      if (finish && e.finish != FinishReason::kNone) (*finish)[e.id] = e.finish;
    }
  }
  return tokens;
}

TEST_P(Batching, RunBatchOutputsEqualSeparateRunsBitForBit) {
  const Session& s = session();
  auto gen = Generator::Create(s);
  ASSERT_TRUE(gen.ok());
  // Three sets at different points: a 7-token prompt, a 1-token step over a 5-token cache, a 3-token prompt.
  std::vector<std::vector<Feed>> sets;
  const Tensor empty = EmptyCache(s);
  const auto prompt_feeds = StepFeeds;
  auto warm = s.Run(prompt_feeds(Prompt(5, 2), empty), {"present_kv"});
  ASSERT_TRUE(warm.ok()) << warm.status();
  sets.push_back(prompt_feeds(Prompt(7, 1), empty));
  sets.push_back(prompt_feeds({42}, (*warm)[0]));
  sets.push_back(prompt_feeds(Prompt(3, 3), empty));
  LockstepCounts counts;
  auto batch = s.impl().RunBatch(sets, {"logits", "present_kv"}, nullptr, &counts);
  ASSERT_TRUE(batch.ok()) << batch.status();
  // Every MatMul against a weight ran once over the three sets' rows: the rotary frequencies
  // (positions x inverse frequencies), 4 per layer (the q/k/v group, o, the gate/up group,
  // down) and the lm_head; so did each elementwise row step: per layer 4 RMSNorms (input, q, k,
  // post-attention), 2 residual Adds and the MLP's SiLU (silu(gate) * up, one node), and the
  // final norm.
  EXPECT_EQ(counts.stacked, (1 + 2 * 4 + 1) + (2 * 7 + 1));
  ASSERT_EQ(batch->size(), sets.size());
  for (size_t i = 0; i < sets.size(); ++i) {
    auto alone = s.Run(sets[i], {"logits", "present_kv"});
    ASSERT_TRUE(alone.ok()) << alone.status();
    for (size_t o = 0; o < 2; ++o) EXPECT_TRUE(SameBits((*batch)[i][o], (*alone)[o])) << "set " << i << " output " << o;
  }
}

// Alike members take a stretch of per-member steps side by side on the pool, one task each (a
// kernel's own parallel loop, here a Sigmoid of two chunks, then runs inline in the chunks a
// parallel run makes); each member gets the bits of its run alone. A member holding most of the
// work makes the pass run member by member, each with the whole pool.
TEST(LockstepSideBySide, AlikeMembersRunSideBySideToTheBitsOfSeparateRuns) {
  auto s = testing::OneNode{.op = "Sigmoid", .threads = 2}.Load(std::vector<DType>{DType::kFloat32});
  ASSERT_TRUE(s.ok()) << s.status();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  auto input = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    return std::vector<Feed>{{"in0", Tensor::FromVector(DType::kFloat32, {1, n}, x)}};
  };
  const int64_t big = 2 * 65536 + 7;  // two chunks of the element-wise loop's 1 << 16 minimum
  for (const auto& sizes : {std::vector<int64_t>{big, big, big - 3}, std::vector<int64_t>{big, 40, 24}}) {
    std::vector<std::vector<Feed>> sets;
    for (int64_t n : sizes) sets.push_back(input(n));
    LockstepCounts counts;
    auto batch = (*s)->RunBatch(sets, {"out0"}, nullptr, &counts);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(counts.side_by_side, sizes[1] == big ? 1 : 0) << "sizes " << sizes[1];
    EXPECT_EQ(counts.stacked, 0);
    for (size_t i = 0; i < sets.size(); ++i) {
      auto alone = (*s)->Run(sets[i], {"out0"});
      ASSERT_TRUE(alone.ok()) << alone.status();
      EXPECT_TRUE(SameBits((*batch)[i][0], (*alone)[0])) << "set " << i << " of sizes " << sizes[1];
    }
  }
}

// An elementwise row node (Add from opset 7; RMSNorm, Mul, Sub, Div alike) runs once over the
// members' rows when each member's inputs have one shape and whole cache lines a row; otherwise
// (an input broadcast along the rows, rows of 60 floats, opset 6's own broadcasting) member by
// member. Either way each member gets the bits of its run alone.
TEST(LockstepElementwise, RowNodesStackOnlyWhereEveryRowStandsAlone) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  auto tensor = [&](const Shape& shape) {
    std::vector<float> x(static_cast<size_t>(NumElements(shape)));
    for (float& v : x) v = u(rng);
    return Tensor::FromVector(DType::kFloat32, shape, x);
  };
  struct Case {
    int64_t opset;
    std::vector<std::pair<Shape, Shape>> members;  // each member's two input shapes
    int stacked;
  };
  const Case cases[] = {
      {21, {{{1, 3, 64}, {1, 3, 64}}, {{1, 1, 64}, {1, 1, 64}}, {{2, 2, 64}, {2, 2, 64}}}, 1},
      {21, {{{1, 3, 64}, {1, 1, 64}}, {{1, 1, 64}, {1, 1, 64}}}, 0},  // the first broadcasts along rows
      {21, {{{1, 3, 60}, {1, 3, 60}}, {{1, 1, 60}, {1, 1, 60}}}, 0},  // 240-byte rows
      {6, {{{1, 3, 64}, {1, 3, 64}}, {{1, 1, 64}, {1, 1, 64}}}, 0},
  };
  for (const Case& c : cases) {
    auto s = testing::OneNode{.op = "Add", .opset = c.opset, .threads = 2}.Load(
        std::vector<DType>{DType::kFloat32, DType::kFloat32});
    ASSERT_TRUE(s.ok()) << s.status();
    std::vector<std::vector<Feed>> sets;
    for (const auto& [a, b] : c.members) sets.push_back({{"in0", tensor(a)}, {"in1", tensor(b)}});
    LockstepCounts counts;
    auto batch = (*s)->RunBatch(sets, {"out0"}, nullptr, &counts);
    ASSERT_TRUE(batch.ok()) << batch.status();
    const std::string what = absl::StrCat("opset ", c.opset, ", first shapes ", ShapeToString(c.members[0].first),
                                          " + ", ShapeToString(c.members[0].second));
    EXPECT_EQ(counts.stacked, c.stacked) << what;
    for (size_t i = 0; i < sets.size(); ++i) {
      auto alone = (*s)->Run(sets[i], {"out0"});
      ASSERT_TRUE(alone.ok()) << alone.status();
      EXPECT_EQ((*batch)[i][0].shape(), (*alone)[0].shape()) << what;
      EXPECT_TRUE(SameBits((*batch)[i][0], (*alone)[0])) << "set " << i << ", " << what;
    }
  }
}

// RunOptions::last_row_outputs: the LM head computes the last position alone, with the bits of
// the last row of the whole logits, in Run and in RunBatch (prompts of 7 and 3 tokens, a step).
TEST_P(Batching, LastRowLogitsEqualTheLastRowOfTheWholeLogits) {
  const Session& s = session();
  const Tensor empty = EmptyCache(s);
  const auto feeds = StepFeeds;
  auto warm = s.Run(feeds(Prompt(5, 2), empty), {"present_kv"});
  ASSERT_TRUE(warm.ok()) << warm.status();
  const std::vector<std::vector<Feed>> sets = {feeds(Prompt(7, 1), empty), feeds({42}, (*warm)[0]), feeds(Prompt(3, 3), empty)};
  RunOptions last;
  last.last_row_outputs = {"logits"};
  auto batch = s.RunBatch(sets, {"logits", "present_kv"}, last);
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (size_t i = 0; i < sets.size(); ++i) {
    auto whole = s.Run(sets[i], {"logits", "present_kv"});
    auto narrowed = s.Run(sets[i], {"logits", "present_kv"}, last);
    ASSERT_TRUE(whole.ok() && narrowed.ok()) << whole.status() << narrowed.status();
    const Tensor& w = (*whole)[0];
    const int64_t n = w.dim(1), vocab = w.dim(2);
    const Tensor want = Tensor::FromVector(DType::kFloat32, {1, 1, vocab},
                                           std::vector<float>(w.data<float>() + (n - 1) * vocab, w.data<float>() + n * vocab));
    EXPECT_TRUE(SameBits((*narrowed)[0], want)) << "set " << i << ": " << ShapeToString((*narrowed)[0].shape());
    EXPECT_TRUE(SameBits((*batch)[i][0], want)) << "set " << i << " in the batch";
    EXPECT_TRUE(SameBits((*narrowed)[1], (*whole)[1])) << "set " << i << ": the cache is whole";
    EXPECT_TRUE(SameBits((*batch)[i][1], (*whole)[1])) << "set " << i << ": the cache in the batch";
  }
  // An output whose producer is not row-wise comes whole; an unknown name is an error.
  RunOptions cache_only;
  cache_only.last_row_outputs = {"present_kv"};
  auto kept = s.Run(sets[0], {"present_kv"}, cache_only);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)[0].dim(3), 7);
  RunOptions unknown;
  unknown.last_row_outputs = {"no_such_output"};
  auto bad = s.Run(sets[0], {"logits"}, unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown output 'no_such_output'"), std::string::npos) << bad.status();
  // A chained flag cancels like the run's own.
  std::atomic<bool> caller{true};
  RunOptions chained;
  chained.also_cancel = &caller;
  auto cancelled = s.Run(sets[0], {"logits"}, chained);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
}

TEST_P(Batching, SequencesJoiningARunningBatchGetTheirLoneTokens) {
  const Session& s = session();
  BatchOptions bo;
  bo.max_sequences = 4;
  auto b = BatchGenerator::Create(s, bo);
  ASSERT_TRUE(b.ok()) << b.status();
  SequenceOptions greedy;
  greedy.max_new_tokens = 10;
  SequenceOptions sampled = greedy;
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_k = 40;
  sampled.sampling.top_p = 0.9f;
  sampled.sampling.seed = 7;
  const std::vector<std::pair<std::vector<int32_t>, SequenceOptions>> requests = {
      {Prompt(9, 1), greedy}, {Prompt(4, 2), sampled}, {Prompt(13, 3), greedy}, {Prompt(1, 4), sampled}};
  std::map<int64_t, size_t> request_of;
  std::map<int64_t, std::vector<int32_t>> tokens;
  // Two start together; the others join after two and five steps.
  for (size_t r = 0; r < 2; ++r) request_of[*(*b)->Add(requests[r].first, requests[r].second)] = r;
  for (int step = 0; step < 8; ++step) {
    if (step == 2) request_of[*(*b)->Add(requests[2].first, requests[2].second)] = 2;
    if (step == 5) request_of[*(*b)->Add(requests[3].first, requests[3].second)] = 3;
    auto events = (*b)->Step();
    ASSERT_TRUE(events.ok()) << events.status();
    for (const SequenceEvent& e : *events) if (e.has_token) tokens[e.id].push_back(e.token);
  }
  for (auto& [id, t] : Drain(**b)) tokens[id].insert(tokens[id].end(), t.begin(), t.end());
  ASSERT_EQ(tokens.size(), requests.size());
  for (const auto& [id, got] : tokens) {
    const auto& [prompt, options] = requests[request_of[id]];
    EXPECT_EQ(got, Alone(s, prompt, options)) << "request " << request_of[id];
  }
}

TEST_P(Batching, LongPromptsAreChunkedAsGenerateChunksThem) {
  const Session& s = session();
  BatchOptions bo;
  bo.prefill_chunk = 4;
  auto b = BatchGenerator::Create(s, bo);
  ASSERT_TRUE(b.ok()) << b.status();
  SequenceOptions o;
  o.max_new_tokens = 6;
  const int64_t a = *(*b)->Add(Prompt(11, 5), o);
  const int64_t c = *(*b)->Add(Prompt(3, 6), o);
  auto tokens = Drain(**b);
  EXPECT_EQ(tokens[a], Alone(s, Prompt(11, 5), o, 4));
  EXPECT_EQ(tokens[c], Alone(s, Prompt(3, 6), o, 4));
}

// RunOptions::grow_kv_in_place with the past donated: each step's rows go into the block the
// last step returned (one block while the positions fit its capacity, a new one past it), and
// the logits are the dense cache's bit for bit. Without the donation the past is copied and left
// as it was.
TEST_P(Batching, AStackedCacheGrowsInPlaceToTheDenseCachesLogits) {
  const Session& s = session();
  const Tensor empty = EmptyCache(s);
  const auto feeds = StepFeeds;
  RunOptions grow;
  grow.grow_kv_in_place = true;
  grow.donated_inputs = {"past_kv"};
  RunOptions grow_kept;  // grows, but the caller keeps its past
  grow_kept.grow_kv_in_place = true;
  Tensor dense = empty, growing = empty;
  std::vector<const void*> blocks;  // the growing cache's distinct blocks, in order
  constexpr int kPrompt = 5, kSteps = internal_ops::kKVCacheCapacityStep + 10;  // crosses one capacity
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<int32_t> ids = step == 0 ? Prompt(kPrompt, 4) : std::vector<int32_t>{100 + 7 * step};
    auto want = s.Run(feeds(ids, dense), {"logits", "present_kv"});
    ASSERT_TRUE(want.ok()) << want.status();
    if (step % 40 == 7) {  // now and then a run that may not write into the past
      const std::vector<float> before(growing.data<float>(), growing.data<float>() + growing.num_elements());
      auto kept = s.Run(feeds(ids, growing), {"logits", "present_kv"}, grow_kept);
      ASSERT_TRUE(kept.ok()) << kept.status();
      EXPECT_TRUE(SameBits((*kept)[0], (*want)[0])) << "step " << step << ", past kept";
      EXPECT_NE((*kept)[1].raw_data(), growing.raw_data()) << "step " << step;
      EXPECT_EQ(std::memcmp(before.data(), growing.raw_data(), before.size() * sizeof(float)), 0) << "step " << step;
    }
    auto got = s.Run(feeds(ids, growing), {"logits", "present_kv"}, grow);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(SameBits((*got)[0], (*want)[0])) << "step " << step;
    EXPECT_EQ((*got)[1].shape(), (*want)[1].shape()) << "step " << step;
    if (blocks.empty() || blocks.back() != (*got)[1].raw_data()) blocks.push_back((*got)[1].raw_data());
    dense = (*want)[1];
    growing = (*got)[1];
  }
  // kPrompt + kSteps - 1 positions: the first block holds 128, the second the rest.
  EXPECT_EQ(blocks.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Precisions, Batching, ::testing::Values(MatMulPrecision::kFloat32, MatMulPrecision::kInt8),
                         [](const auto& info) { return info.param == MatMulPrecision::kInt8 ? "int8" : "float32"; });

// A random tiny Qwen3 with its stacked cache, exported into dir and loaded with the defaults.
absl::StatusOr<std::unique_ptr<Session>> TinyCachedQwen3(const fs::path& dir) {
  if (absl::Status st = WriteRandomQwen3((dir / "ckpt").string(), RandomQwen3Options{}); !st.ok()) return st;
  ExportQwen3Options eo;
  eo.cached = true;
  if (auto r = ExportQwen3((dir / "ckpt").string(), (dir / "model.onnx").string(), eo); !r.ok()) return r.status();
  return Session::Load((dir / "model.onnx").string());
}

TEST(BatchGenerator, WarmPoolsEverySlotsCacheBlockAndChangesNoTokens) {
  const fs::path dir = testing::TempDir("batching_warm");
  auto s = TinyCachedQwen3(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  BatchOptions bo;
  bo.max_sequences = 3;
  auto b = BatchGenerator::Create(**s, bo);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Warm().ok());
  EXPECT_EQ((*b)->active(), 0);
  const Allocator& pool = (*s)->impl().allocator();
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  if (HugeAllocEnabled()) {  // else (sanitizers) nothing is pooled
    // Each slot's stacked cache block: past_kv [2 layers, batch, heads, positions, head size]
    // float32 with room for the first block's positions.
    const IOInfo& past = (*s)->inputs()[1];
    ASSERT_EQ(past.name, "past_kv");
    ASSERT_EQ(past.shape.size(), 5u);
    const size_t block = static_cast<size_t>(past.shape[0] * past.shape[2] * past.shape[4] *
                                             internal_ops::kKVCacheCapacityStep) * sizeof(float);
    EXPECT_GE(pool.cached_bytes(), 3 * block);
  }
  SequenceOptions o;
  o.max_new_tokens = 5;
  const int64_t id = *(*b)->Add(Prompt(4, 1), o);
  EXPECT_EQ((*b)->Warm().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Drain(**b)[id], Alone(**s, Prompt(4, 1), o));
  fs::remove_all(dir);
}

TEST(BatchGenerator, SlotsStopsCancelAndBadRequests) {
  const fs::path dir = testing::TempDir("batching_slots");
  auto s = TinyCachedQwen3(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  BatchOptions bo;
  bo.max_sequences = 2;
  bo.context = 12;
  auto b = BatchGenerator::Create(**s, bo);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->context(), 12);
  SequenceOptions o;
  o.max_new_tokens = 100;
  EXPECT_EQ((*b)->Add({}, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*b)->Add(Prompt(13, 1), o).status().code(), absl::StatusCode::kInvalidArgument);  // past the context
  EXPECT_EQ((*b)->Add({-1}, o).status().code(), absl::StatusCode::kInvalidArgument);
  SequenceOptions none = o;
  none.max_new_tokens = 0;
  EXPECT_EQ((*b)->Add({5}, none).status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t first = *(*b)->Add(Prompt(10, 1), o);
  const int64_t second = *(*b)->Add(Prompt(2, 2), o);
  EXPECT_EQ((*b)->Add({5}, o).status().code(), absl::StatusCode::kResourceExhausted);
  (*b)->Cancel(second);
  std::map<int64_t, FinishReason> finish;
  auto tokens = Drain(**b, &finish);
  EXPECT_EQ(finish[second], FinishReason::kCancelled);
  EXPECT_TRUE(tokens[second].empty());
  // 10 prompt tokens + 3 generated pass the context of 12 after the third.
  EXPECT_EQ(finish[first], FinishReason::kLength);
  EXPECT_EQ(tokens[first].size(), 3u);
  // A stop id ends a sequence with kStop, the id included.
  const std::vector<int32_t> lone = Alone(**s, Prompt(2, 2), o);
  SequenceOptions stop = o;
  stop.stop_ids = {lone[1]};
  const int64_t third = *(*b)->Add(Prompt(2, 2), stop);
  tokens = Drain(**b, &finish);
  EXPECT_EQ(finish[third], FinishReason::kStop);
  const auto at = std::find(lone.begin(), lone.end(), lone[1]);
  EXPECT_EQ(tokens[third], std::vector<int32_t>(lone.begin(), at + 1));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace oneinfer
