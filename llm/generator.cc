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

int32_t SampleToken(const float* logits, int64_t vocab, const SamplingOptions& o, uint64_t step) {
  if (o.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  // Candidates sorted by logit, cut by top-k, then turned into probabilities.
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  size_t keep = o.top_k > 0 ? std::min<size_t>(static_cast<size_t>(o.top_k), idx.size()) : idx.size();
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(keep), idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  idx.resize(keep);
  const float top = logits[idx[0]];
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((static_cast<double>(logits[idx[i]]) - top) / o.temperature);
  for (double& v : p) v /= sum;
  if (o.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < keep && acc < o.top_p) acc += p[n++];
    p.resize(std::max<size_t>(n, 1));
  }
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + step);
  std::discrete_distribution<size_t> pick(p.begin(), p.end());
  return idx[pick(rng)];
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
  for (int step = 0; step < options.max_new_tokens; ++step) {
    if (max_positions_ > 0 && static_cast<int64_t>(sequence.size()) > max_positions_) break;
    // Only the tokens the cache has not seen go in; without a cache, all of them.
    const size_t first = cached_ ? fed : 0;
    const int64_t n = static_cast<int64_t>(sequence.size() - first);
    Tensor ids = Tensor::Empty(DType::kInt64, {1, n});
    std::copy(sequence.begin() + static_cast<long>(first), sequence.end(), ids.data<int64_t>());
    std::vector<Feed> feeds = {{"input_ids", ids}};
    if (cached_) feeds.emplace_back("past_kv", past);
    const auto t0 = std::chrono::steady_clock::now();
    auto outs = session_.Run(feeds, cached_ ? std::vector<std::string>{"logits", "present_kv"}
                                            : std::vector<std::string>{"logits"});
    if (!outs.ok()) return outs.status();
    const double ms = MsSince(t0);
    if (step == 0) {
      result.prefill_ms = ms;
    } else {
      result.decode_ms += ms;
      ++result.decode_steps;
    }
    const Tensor& logits = (*outs)[0];
    if (logits.rank() != 3 || logits.dim(1) != n) {
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
