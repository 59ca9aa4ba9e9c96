#include "oneinfer/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace oneinfer {

namespace {

const IOInfo* Find(const std::vector<IOInfo>& list, const std::string& name) {
  for (const IOInfo& i : list) if (i.name == name) return &i;
  return nullptr;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {

// One sampling candidate: its id, its logit as the order sees it (NaN as -inf) and its weight.
struct Candidate {
  float key;
  int32_t id;
  uint64_t mass;
};

// The order sampling walks candidates in: higher logit first, lower id on ties (a total order,
// so every selection algorithm agrees on it).
bool Before(const Candidate& a, const Candidate& b) { return a.key != b.key ? a.key > b.key : a.id < b.id; }

// Finds, in c[lo, hi) walked in Before order, the candidate at which the running sum of mass
// first exceeds target (target < the range's mass), and returns its position; afterwards
// c[0, pos] hold exactly the candidates up to it. Quickselect on mass: each round splits the
// range in halves (nth_element) and keeps the one holding the target, so the cost is linear in
// the range where a sort would be n log n. Masses are integers, so sums in any order agree.
size_t SelectByMass(std::vector<Candidate>& c, size_t lo, size_t hi, uint64_t target) {
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.begin() + static_cast<long>(lo), c.begin() + static_cast<long>(mid),
                     c.begin() + static_cast<long>(hi), Before);
    uint64_t upper = 0;
    for (size_t i = lo; i < mid; ++i) upper += c[i].mass;
    if (target < upper) {
      hi = mid;
    } else {
      target -= upper;
      lo = mid;
    }
  }
  std::sort(c.begin() + static_cast<long>(lo), c.begin() + static_cast<long>(hi), Before);
  for (size_t i = lo; i < hi; ++i) {
    if (target < c[i].mass) return i;
    target -= c[i].mass;
  }
  return hi - 1;  // reached only when target is not below the range's mass
}

}  // namespace

int32_t SampleToken(const float* logits, int64_t vocab, const SamplingOptions& o, uint64_t step) {
  if (o.temperature <= 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  auto candidate = [&](int32_t i) { return Candidate{std::isnan(logits[i]) ? -INFINITY : logits[i], i, 0}; };
  std::vector<Candidate> c;
  if (o.top_k > 0 && o.top_k < vocab) {
    // The best k in one pass: a heap whose front is the worst kept, replaced by anything before it.
    c.reserve(static_cast<size_t>(o.top_k));
    for (int32_t i = 0; i < vocab; ++i) {
      const Candidate k = candidate(i);
      if (c.size() < static_cast<size_t>(o.top_k)) {
        c.push_back(k);
        std::push_heap(c.begin(), c.end(), Before);
      } else if (Before(k, c.front())) {
        std::pop_heap(c.begin(), c.end(), Before);
        c.back() = k;
        std::push_heap(c.begin(), c.end(), Before);
      }
    }
  } else {
    c.resize(static_cast<size_t>(vocab));
    for (int32_t i = 0; i < vocab; ++i) c[static_cast<size_t>(i)] = candidate(i);
  }
  // Weights exp((logit - max) / T) as 40-bit fixed-point integers: the top token weighs 2^40,
  // and 2^22 tokens (the tokenizer's limit) sum to at most 2^62.
  float top = -INFINITY;
  for (const Candidate& k : c) top = std::max(top, k.key);
  uint64_t total = 0;
  for (Candidate& k : c) {
    const float w = std::exp((k.key - top) / o.temperature);
    k.mass = w >= 0.0f && w <= 1.0f ? static_cast<uint64_t>(static_cast<double>(w) * 0x1.0p40) : 0;  // NaN -> 0
    total += k.mass;
  }
  size_t count = c.size();
  if (o.top_p < 1.0f) {
    // Nucleus: the shortest prefix whose mass reaches top_p of the total.
    const double need = std::ceil(static_cast<double>(o.top_p) * static_cast<double>(total));
    count = SelectByMass(c, 0, c.size(), std::clamp<uint64_t>(static_cast<uint64_t>(need), 1, std::max<uint64_t>(total, 1)) - 1) + 1;
    total = 0;
    for (size_t i = 0; i < count; ++i) total += c[i].mass;
  }
  // A uniform 53-bit draw scaled to the candidates' mass picks the token holding that point.
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + step);
  const uint64_t target = static_cast<uint64_t>((static_cast<unsigned __int128>(rng() >> 11) * total) >> 53);
  return c[SelectByMass(c, 0, count, target)].id;
}

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const Session& session) {
  std::unique_ptr<Generator> g(new Generator(session));
  const IOInfo* ids = Find(session.inputs(), "input_ids");
  const IOInfo* logits = Find(session.outputs(), "logits");
  if (ids == nullptr || logits == nullptr) {
    return absl::InvalidArgumentError("the model does not follow the causal-LM convention: it needs an input "
                                      "'input_ids' and an output 'logits'");
  }
  if (ids->dtype != DType::kInt64) return absl::InvalidArgumentError("input 'input_ids' must be int64");
  if (logits->dtype != DType::kFloat32) return absl::InvalidArgumentError("output 'logits' must be float32");
  if (logits->has_shape && logits->shape.size() == 3) g->vocab_ = logits->shape[2];
  const IOInfo* past = Find(session.inputs(), "past_kv");
  const IOInfo* present = Find(session.outputs(), "present_kv");
  if ((past == nullptr) != (present == nullptr)) {
    return absl::InvalidArgumentError("a cached model needs both 'past_kv' (input) and 'present_kv' (output)");
  }
  if (past != nullptr) {
    if (past->dtype != DType::kFloat32 || !past->has_shape || past->shape.size() != 5 || past->shape[0] <= 0 ||
        past->shape[0] % 2 != 0 || past->shape[2] <= 0 || past->shape[4] <= 0) {
      return absl::InvalidArgumentError("input 'past_kv' must be float32 [2L, 1, KVH, P, D] with 2L, KVH and D fixed");
    }
    g->cached_ = true;
    g->past_shape_ = {past->shape[0], 1, past->shape[2], 0, past->shape[4]};
  }
  for (const IOInfo& in : session.inputs()) {
    if (in.name != "input_ids" && in.name != "past_kv") {
      return absl::InvalidArgumentError(absl::StrCat("the model has an input '", in.name,
                                                     "' outside the causal-LM convention (input_ids, past_kv)"));
    }
  }
  auto it = session.metadata().find("oneinfer.max_positions");
  if (it != session.metadata().end()) g->max_positions_ = std::atoll(it->second.c_str());
  return g;
}

absl::StatusOr<GenerationResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                                     const TokenCallback& on_token) const {
  static const RunOptions kUnbounded;
  const RunOptions& run = options.run ? *options.run : kUnbounded;
  auto RunOnce = [&](const std::vector<Feed>& feeds, const std::vector<std::string>& names) {
    return session_.Run(feeds, names, run);
  };
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (int32_t id : prompt) {
    if (id < 0 || (vocab_ > 0 && id >= vocab_)) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " is outside the vocabulary [0, ", vocab_, ")"));
    }
  }
  if (max_positions_ > 0 && static_cast<int64_t>(prompt.size()) > max_positions_) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt.size(), " tokens; the model's context is ",
                                                   max_positions_));
  }
  GenerationResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  std::vector<int64_t> sequence(prompt.begin(), prompt.end());
  Tensor past = cached_ ? Tensor::Empty(DType::kFloat32, past_shape_) : Tensor();
  size_t fed = 0;  // tokens of `sequence` the cache already holds
  if (options.prefill_chunk < 0) return absl::InvalidArgumentError("prefill_chunk must be >= 0");
  const size_t chunk = static_cast<size_t>(options.prefill_chunk);
  for (int step = 0; step < options.max_new_tokens; ++step) {
    if (max_positions_ > 0 && static_cast<int64_t>(sequence.size()) > max_positions_) break;
    // A long prompt goes through the cache a chunk at a time: each chunk's attention is
    // chunk x (past + chunk), so memory grows linearly with the prompt, not quadratically.
    // The chunks ask for the cache alone, so the session skips their logits; the prompt's last
    // token then runs by itself and its single row of logits chooses the first token.
    while (step == 0 && cached_ && chunk > 0 && sequence.size() - fed > 1) {
      const size_t take = std::min(chunk, sequence.size() - fed - 1);
      Tensor ids = Tensor::Empty(DType::kInt64, {1, static_cast<int64_t>(take)});
      std::copy(sequence.begin() + static_cast<long>(fed), sequence.begin() + static_cast<long>(fed + take),
                ids.data<int64_t>());
      const auto t0 = std::chrono::steady_clock::now();
      auto outs = RunOnce({{"input_ids", ids}, {"past_kv", past}}, {"present_kv"});
      if (!outs.ok()) return outs.status();
      result.prefill_ms += MsSince(t0);
      past = (*outs)[0];
      fed += take;
    }
    // Only the tokens the cache has not seen go in; without a cache, all of them.
    const size_t first = cached_ ? fed : 0;
    const int64_t n = static_cast<int64_t>(sequence.size() - first);
    Tensor ids = Tensor::Empty(DType::kInt64, {1, n});
    std::copy(sequence.begin() + static_cast<long>(first), sequence.end(), ids.data<int64_t>());
    std::vector<Feed> feeds = {{"input_ids", ids}};
    if (cached_) feeds.emplace_back("past_kv", past);
    const auto t0 = std::chrono::steady_clock::now();
    auto outs = RunOnce(feeds, cached_ ? std::vector<std::string>{"logits", "present_kv"}
                                       : std::vector<std::string>{"logits"});
    if (!outs.ok()) return outs.status();
    const double ms = MsSince(t0);
    if (step == 0) {
      result.prefill_ms += ms;
    } else {
      result.decode_ms += ms;
      ++result.decode_steps;
    }
    const Tensor& logits = (*outs)[0];
    if (logits.rank() != 3 || logits.dim(1) != n || logits.dim(2) <= 0) {
      return absl::InternalError(absl::StrCat("'logits' has shape ", ShapeToString(logits.shape()), " for ", n, " tokens"));
    }
    const int64_t vocab = logits.dim(2);
    if (cached_) {
      past = (*outs)[1];  // the cache the model returned is the next step's input, not copied
      fed = sequence.size();
    }
    const float* last = logits.data<float>() + (n - 1) * vocab;
    const int32_t next = SampleToken(last, vocab, options.sampling, static_cast<uint64_t>(step));
    result.generated_ids.push_back(next);
    sequence.push_back(next);
    const bool keep_going = on_token ? on_token(next, last, vocab) : true;
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
      result.stopped_by_id = true;
      break;
    }
    if (!keep_going) break;
  }
  return result;
}

}  // namespace oneinfer
