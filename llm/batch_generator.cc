#include "oneinfer/batch_generator.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"

namespace oneinfer {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

struct BatchGenerator::Sequence {
  int64_t id = 0;
  SequenceOptions options;
  std::vector<int64_t> tokens;  // the prompt, then each generated token
  size_t fed = 0;               // tokens the cache holds
  std::vector<Tensor> cache;    // as Generator: one tensor per cache input
  int generated = 0;
  bool chunked = false;         // the prompt goes through the cache a chunk per Step first
  bool cancelled = false;
  bool done = false;            // finished in this Step; leaves at its end
};

BatchGenerator::BatchGenerator(const Session& session, std::unique_ptr<Generator> conventions, const BatchOptions& options)
    : session_(session), gen_(std::move(conventions)), options_(options) {}
BatchGenerator::~BatchGenerator() = default;

absl::StatusOr<std::unique_ptr<BatchGenerator>> BatchGenerator::Create(const Session& session, const BatchOptions& options) {
  if (options.max_sequences < 1) return absl::InvalidArgumentError("max_sequences must be >= 1");
  if (options.context < 0) return absl::InvalidArgumentError("context must be >= 0");
  if (options.prefill_chunk < 0) return absl::InvalidArgumentError("prefill_chunk must be >= 0");
  auto gen = Generator::Create(session);
  if (!gen.ok()) return gen.status();
  if (options.context > 0) {
    if (absl::Status s = (*gen)->LimitContext(options.context, "BatchOptions::context"); !s.ok()) return s;
  }
  const int64_t model_max = (*gen)->max_positions();
  if (options.context > 0 && model_max > 0 && options.context > model_max) {
    return absl::InvalidArgumentError(absl::StrCat("context ", options.context, " is longer than the model's ", model_max,
                                                   " positions"));
  }
  std::unique_ptr<BatchGenerator> b(new BatchGenerator(session, std::move(*gen), options));
  b->context_ = options.context > 0 ? options.context : model_max;
  // A KV block has room for 128 positions at first (graph/internal_ops.h kKVCacheCapacityStep);
  // the allocator's size classes round a block up by at most 1/8.
  constexpr int64_t kFirstBlockPositions = 128;
  size_t slot_bytes = 0;
  for (const Tensor& c : b->gen_->EmptyCache()) {
    size_t elements = 1;
    for (int64_t d : c.shape()) elements *= static_cast<size_t>(d == 0 ? kFirstBlockPositions : d);
    slot_bytes += elements * DTypeSize(c.dtype()) / 8 * 9;
  }
  session.KeepPooledBytes(slot_bytes * static_cast<size_t>(options.max_sequences));
  return b;
}

absl::Status BatchGenerator::Warm() {
  if (!seqs_.empty()) return absl::FailedPreconditionError("Warm runs only while no sequence is active");
  SequenceOptions one;
  one.max_new_tokens = 1;
  for (int i = 0; i < options_.max_sequences; ++i) {
    if (auto id = Add({0}, one); !id.ok()) return id.status();
  }
  auto events = Step();
  seqs_.clear();  // every one finished in that Step; cleared also when it failed
  return events.ok() ? absl::OkStatus() : events.status();
}

int BatchGenerator::active() const { return static_cast<int>(seqs_.size()); }
int64_t BatchGenerator::vocab_size() const { return gen_->vocab_size(); }

absl::StatusOr<int64_t> BatchGenerator::Add(const std::vector<int32_t>& prompt, const SequenceOptions& options) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  if (options.max_new_tokens < 1) return absl::InvalidArgumentError("max_new_tokens must be >= 1");
  const int64_t vocab = gen_->vocab_size();
  for (int32_t id : prompt) {
    if (id < 0 || (vocab > 0 && id >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (context_ > 0 && static_cast<int64_t>(prompt.size()) > context_) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt.size(), " tokens; the context is ", context_));
  }
  if (active() >= options_.max_sequences) {
    return absl::ResourceExhaustedError(absl::StrCat("all ", options_.max_sequences, " sequence slots are in use"));
  }
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->options = options;
  s->tokens.assign(prompt.begin(), prompt.end());
  s->cache = gen_->EmptyCache();
  const size_t chunk = static_cast<size_t>(options_.prefill_chunk);
  s->chunked = gen_->cached() && chunk > 0 && prompt.size() > chunk;
  seqs_.push_back(std::move(s));
  return seqs_.back()->id;
}

void BatchGenerator::Cancel(int64_t id) {
  for (auto& s : seqs_) if (s->id == id) s->cancelled = true;
}

absl::StatusOr<std::vector<SequenceEvent>> BatchGenerator::Step(const RunOptions* run) {
  static const RunOptions kUnbounded;
  RunOptions own_run;
  const RunOptions& control = gen_->StepRunOptions(run != nullptr ? *run : kUnbounded, &own_run);
  std::vector<SequenceEvent> events;
  last_ = StepStats{};
  // Cancelled sequences leave first: their slots are free before anything runs.
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if ((*it)->cancelled) {
      events.push_back({(*it)->id, false, 0, FinishReason::kCancelled});
      it = seqs_.erase(it);
    } else {
      ++it;
    }
  }
  const std::vector<std::string> cache_outputs = gen_->CacheOutputs();
  const size_t chunk = static_cast<size_t>(options_.prefill_chunk);
  const auto t0 = std::chrono::steady_clock::now();
  // Long prompts advance one chunk (the cache alone) per Step, as Generator splits them: chunks
  // of prefill_chunk tokens until one token is left, which then runs in the main pass.
  std::vector<Sequence*> chunking;
  std::vector<std::vector<Feed>> chunk_feeds;
  for (auto& s : seqs_) {
    if (!s->chunked || s->tokens.size() - s->fed <= 1) continue;
    const size_t take = std::min(chunk, s->tokens.size() - s->fed - 1);
    gen_->ReserveCache(s->cache, s->fed, s->fed + take);
    chunk_feeds.push_back(gen_->Feeds(s->tokens, s->fed, take, s->cache));
    chunking.push_back(s.get());
    last_.rows += static_cast<int64_t>(take);
  }
  if (!chunking.empty()) {
    auto outs = session_.RunBatch(chunk_feeds, cache_outputs, control);
    if (!outs.ok()) {
      seqs_.clear();
      return outs.status();
    }
    for (size_t i = 0; i < chunking.size(); ++i) {
      Sequence& s = *chunking[i];
      s.fed += static_cast<size_t>(chunk_feeds[i][0].second.dim(1));
      s.cache = std::move((*outs)[i]);
    }
  }
  // The main pass: each sequence whose prompt is through the chunks, with the tokens its cache
  // has not seen (without a cache, all of them).
  std::vector<Sequence*> members;
  std::vector<std::vector<Feed>> feeds;
  for (auto& s : seqs_) {
    if (s->chunked && s->tokens.size() - s->fed > 1) continue;
    if (std::find(chunking.begin(), chunking.end(), s.get()) != chunking.end()) continue;
    const size_t first = gen_->cached() ? s->fed : 0;
    if (gen_->cached()) gen_->ReserveCache(s->cache, s->fed, s->tokens.size());
    feeds.push_back(gen_->Feeds(s->tokens, first, s->tokens.size() - first, s->cache));
    members.push_back(s.get());
    last_.rows += static_cast<int64_t>(s->tokens.size() - first);
  }
  last_.sequences = static_cast<int>(members.size() + chunking.size());
  if (!members.empty()) {
    std::vector<std::string> outputs = {"logits"};
    outputs.insert(outputs.end(), cache_outputs.begin(), cache_outputs.end());
    auto outs = session_.RunBatch(feeds, outputs, control);
    if (!outs.ok()) {
      seqs_.clear();
      return outs.status();
    }
    std::vector<float> widened;
    for (size_t i = 0; i < members.size(); ++i) {
      Sequence& s = *members[i];
      std::vector<Tensor>& out = (*outs)[i];
      const int64_t n = feeds[i][0].second.dim(1);
      auto last_row = gen_->LastLogits(out[0], n, &widened);
      if (!last_row.ok()) {
        seqs_.clear();
        return last_row.status();
      }
      const float* last = *last_row;
      const int64_t vocab = out[0].dim(2);
      if (gen_->cached()) {
        s.cache.assign(std::make_move_iterator(out.begin() + 1), std::make_move_iterator(out.end()));
        s.fed = s.tokens.size();
      }
      // The draw is numbered by the sequence's own steps, as Generator numbers them.
      const int32_t next = SampleToken(last, vocab, s.options.sampling, static_cast<uint64_t>(s.generated));
      s.tokens.push_back(next);
      ++s.generated;
      SequenceEvent e{s.id, true, next, FinishReason::kNone};
      const auto& stops = s.options.stop_ids;
      if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
        e.finish = FinishReason::kStop;
      } else if (s.generated >= s.options.max_new_tokens ||
                 (context_ > 0 && static_cast<int64_t>(s.tokens.size()) > context_)) {
        e.finish = FinishReason::kLength;
      }
      s.done = e.finish != FinishReason::kNone;
      events.push_back(e);
    }
  }
  last_.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  seqs_.erase(std::remove_if(seqs_.begin(), seqs_.end(), [](const std::unique_ptr<Sequence>& s) { return s->done; }),
              seqs_.end());
  return events;
}

}  // namespace oneinfer
