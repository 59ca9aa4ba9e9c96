#include "oneinfer/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/half.h"

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

// The first index of the largest logit, as std::max_element gives it (a NaN wins only in front),
// from eight independent lanes and then a search for the first equal: max_element's one compare
// chain took 0.56 ms per 151936 logits (3 % of an int8 decode step; 9 ms of a 16-sequence one).
int32_t GreedyToken(const float* x, int64_t n) {
  if (n <= 0 || std::isnan(x[0])) return 0;
  float lane[8];
  for (float& l : lane) l = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float top = lane[0];
  for (int j = 1; j < 8; ++j) top = lane[j] > top ? lane[j] : top;
  for (; i < n; ++i) top = x[i] > top ? x[i] : top;
  int64_t k = 0;
  while (!(x[k] == top)) ++k;  // top is one of the values, so this stops
  return static_cast<int32_t>(k);
}

}  // namespace

int32_t SampleToken(const float* logits, int64_t vocab, const SamplingOptions& o, uint64_t step) {
  if (o.temperature <= 0.0f) return GreedyToken(logits, vocab);
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

namespace {

// "past_key_values.{l}.key" / ".value" -> (l, is_value); false for any other name.
bool ParsePerLayerPast(const std::string& name, int64_t* layer, bool* is_value) {
  static const std::string kPrefix = "past_key_values.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  const size_t dot = name.find('.', kPrefix.size());
  if (dot == std::string::npos || dot == kPrefix.size()) return false;
  const std::string digits = name.substr(kPrefix.size(), dot - kPrefix.size());
  if (digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  const std::string part = name.substr(dot + 1);
  if (part != "key" && part != "value") return false;
  *layer = std::atoll(digits.c_str());
  *is_value = part == "value";
  return true;
}

bool IsIndexType(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// A tensor of `shape` holding start, start + 1, ... in t (int64 or int32).
Tensor Iota(DType t, Shape shape, int64_t start, bool constant = false) {
  Tensor x = Tensor::Empty(t, std::move(shape));
  const int64_t n = x.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = constant ? start : start + i;
    if (t == DType::kInt64) x.data<int64_t>()[i] = v; else x.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return x;
}

constexpr char kConventions[] =
    "the causal-LM conventions: input_ids [+ attention_mask, position_ids] -> logits, with no cache, "
    "oneinfer's stacked past_kv -> present_kv, or optimum / onnxruntime-genai's per-layer "
    "past_key_values.{i}.key/.value -> present.{i}.key/.value";

}  // namespace

struct Generator::CacheSlot {
  std::string input, output;
  DType dtype = DType::kFloat32;
  Shape empty_shape;
};

Generator::Generator(const Session& s) : session_(s) {}
Generator::~Generator() = default;

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const Session& session) {
  std::unique_ptr<Generator> g(new Generator(session));
  const IOInfo* ids = Find(session.inputs(), "input_ids");
  const IOInfo* logits = Find(session.outputs(), "logits");
  if (ids == nullptr || logits == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the model has no input 'input_ids' or no output 'logits'; expected ",
                                                   kConventions));
  }
  if (!IsIndexType(ids->dtype)) return absl::InvalidArgumentError("input 'input_ids' must be int64 or int32");
  if (logits->dtype != DType::kFloat32 && logits->dtype != DType::kFloat16) {
    return absl::InvalidArgumentError("output 'logits' must be float32 or float16");
  }
  g->ids_dtype_ = ids->dtype;
  g->logits_dtype_ = logits->dtype;
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
    g->layout_ = CacheLayout::kStacked;
    g->cache_.push_back({"past_kv", "present_kv", DType::kFloat32, {past->shape[0], 1, past->shape[2], 0, past->shape[4]}});
  }
  // Per-layer caches: every layer 0..L-1 with a key and a value, each with its present output.
  std::map<int64_t, std::pair<const IOInfo*, const IOInfo*>> layers;
  for (const IOInfo& in : session.inputs()) {
    int64_t layer = 0;
    bool is_value = false;
    if (in.name == "input_ids" || in.name == "past_kv") continue;
    if (in.name == "attention_mask" || in.name == "position_ids") {
      if (!IsIndexType(in.dtype)) return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' must be int64 or int32"));
      (in.name == "attention_mask" ? g->mask_dtype_ : g->position_dtype_) = in.dtype;
    } else if (in.name == "use_cache_branch") {
      if (in.dtype != DType::kBool) return absl::InvalidArgumentError("input 'use_cache_branch' must be bool");
      g->has_cache_branch_ = true;
    } else if (ParsePerLayerPast(in.name, &layer, &is_value)) {
      (is_value ? layers[layer].second : layers[layer].first) = &in;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("the model has an input '", in.name, "' outside ", kConventions));
    }
  }
  if (!layers.empty() && past != nullptr) {
    return absl::InvalidArgumentError("the model has both a stacked 'past_kv' and per-layer past_key_values inputs");
  }
  int64_t expected = 0;
  for (const auto& [layer, kv] : layers) {
    if (layer != expected) {
      return absl::InvalidArgumentError(absl::StrCat("per-layer cache inputs skip layer ", expected,
                                                     ": there is no past_key_values.", expected, ".key/.value"));
    }
    ++expected;
    for (const IOInfo* in : {kv.first, kv.second}) {
      const std::string part = in == kv.first ? "key" : "value";
      if (in == nullptr || (kv.first == nullptr) != (kv.second == nullptr)) {
        return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " has past_key_values.", layer, ".",
                                                       kv.first == nullptr ? "value" : "key", " but not its ",
                                                       kv.first == nullptr ? "key" : "value"));
      }
      if ((in->dtype != DType::kFloat32 && in->dtype != DType::kFloat16) || !in->has_shape || in->shape.size() != 4 ||
          in->shape[1] <= 0 || in->shape[3] <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in->name,
                                                       "' must be float32 or float16 [batch, kv_heads, past, head_dim] "
                                                       "with kv_heads and head_dim fixed"));
      }
      const std::string out_name = absl::StrCat("present.", layer, ".", part);
      const IOInfo* out = Find(session.outputs(), out_name);
      if (out == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("input '", in->name, "' has no matching output '", out_name, "'"));
      }
      if (out->dtype != in->dtype) {
        return absl::InvalidArgumentError(absl::StrCat("output '", out_name, "' is ", DTypeName(out->dtype), " but input '",
                                                       in->name, "' is ", DTypeName(in->dtype)));
      }
      if (out->has_shape && out->shape.size() == 4) {
        for (size_t d : {size_t{1}, size_t{3}}) {
          if (out->shape[d] > 0 && out->shape[d] != in->shape[d]) {
            return absl::InvalidArgumentError(absl::StrCat("output '", out_name, "' has ", d == 1 ? "kv_heads " : "head_dim ",
                                                           out->shape[d], " but input '", in->name, "' has ", in->shape[d]));
          }
        }
      }
      g->cache_.push_back({in->name, out_name, in->dtype, {1, in->shape[1], 0, in->shape[3]}});
    }
  }
  if (!layers.empty()) g->layout_ = CacheLayout::kPerLayer;
  g->share_buffer_ = !layers.empty();
  for (const CacheSlot& c : g->cache_) {
    const IOInfo* in = Find(session.inputs(), c.input);
    g->share_buffer_ = g->share_buffer_ && c.dtype == DType::kFloat32 && in != nullptr && in->kv_share_buffer;
  }
  if (g->layout_ != CacheLayout::kPerLayer && g->has_cache_branch_) {
    return absl::InvalidArgumentError("input 'use_cache_branch' without per-layer past_key_values inputs");
  }
  auto it = session.metadata().find("oneinfer.max_positions");
  if (it != session.metadata().end()) g->max_positions_ = std::atoll(it->second.c_str());
  // Generation stops where a rotary table ends instead of failing in the node.
  const int64_t rotary = session.rotary_limit().positions;
  if (rotary > 0 && (g->max_positions_ <= 0 || rotary < g->max_positions_)) g->max_positions_ = rotary;
  return g;
}

absl::Status Generator::LimitContext(int64_t context, const std::string& source) {
  if (context <= 0) return absl::InvalidArgumentError(absl::StrCat(source, ": the context must be positive, got ", context));
  const RotaryLimit& rotary = session_.rotary_limit();
  if (rotary.positions > 0 && context > rotary.positions) {
    return absl::InvalidArgumentError(absl::StrCat(rotary.node, ": cos_cache '", rotary.input, "' covers ", rotary.positions,
                                                   " positions, fewer than the context of ", context, " (", source, ")"));
  }
  if (max_positions_ <= 0 || context < max_positions_) max_positions_ = context;
  return absl::OkStatus();
}

std::vector<Feed> Generator::Feeds(const std::vector<int64_t>& sequence, size_t first, size_t count,
                                   const std::vector<Tensor>& cache) const {
  const int64_t n = static_cast<int64_t>(count);
  Tensor ids = Tensor::Empty(ids_dtype_, {1, n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = sequence[first + static_cast<size_t>(i)];
    if (ids_dtype_ == DType::kInt64) ids.data<int64_t>()[i] = v; else ids.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  std::vector<Feed> feeds = {{"input_ids", ids}};
  // One unpadded sequence: the mask covers the cached tokens and these, all ones.
  if (mask_dtype_ != DType::kUndefined) feeds.emplace_back("attention_mask", Iota(mask_dtype_, {1, static_cast<int64_t>(first) + n}, 1, true));
  if (position_dtype_ != DType::kUndefined) feeds.emplace_back("position_ids", Iota(position_dtype_, {1, n}, static_cast<int64_t>(first)));
  if (has_cache_branch_) {
    Tensor branch = Tensor::Empty(DType::kBool, {1});
    branch.data<bool>()[0] = first > 0;
    feeds.emplace_back("use_cache_branch", branch);
  }
  for (size_t i = 0; i < cache_.size(); ++i) feeds.emplace_back(cache_[i].input, cache[i]);
  return feeds;
}

const RunOptions& Generator::StepRunOptions(const RunOptions& caller, RunOptions* own) const {
  if (caller.also_cancel != nullptr) return caller;
  own->deadline = caller.deadline;
  own->also_cancel = &caller.cancel;
  own->last_row_outputs = {"logits"};
  // The cache each step returns is only fed to the next: handed over, it grows in place.
  if (share_buffer_ || layout_ != CacheLayout::kNone) {
    for (const CacheSlot& c : cache_) own->donated_inputs.push_back(c.input);
  }
  own->grow_kv_in_place = layout_ != CacheLayout::kNone;
  return *own;
}

void Generator::ReserveCache(std::vector<Tensor>& cache, size_t held, size_t needed) const {
  if (!share_buffer_ || cache.empty()) return;
  const int64_t rows = cache[0].dim(2), want = static_cast<int64_t>(needed);
  if (rows >= want) return;
  int64_t cap = (std::max(want, 2 * rows) + 63) / 64 * 64;
  if (max_positions_ > 0) cap = std::max(want, std::min(cap, max_positions_));
  // One block for every layer's key and value (huge pages, zero until written: a block per
  // 256 KB tensor cost ~1 ms of page faults each here), each tensor a view of its part.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const Tensor& c : cache) {
    offsets.push_back(total);
    total += static_cast<size_t>(c.dim(0) * c.dim(1) * cap * c.dim(3)) * DTypeSize(c.dtype());
    total = (total + 63) / 64 * 64;
  }
  Tensor block = Tensor::Empty(DType::kUInt8, {static_cast<int64_t>(total)});
  for (size_t i = 0; i < cache.size(); ++i) {
    Tensor& c = cache[i];
    char* dst = static_cast<char*>(block.raw_data()) + offsets[i];
    const size_t row_bytes = static_cast<size_t>(c.dim(3)) * DTypeSize(c.dtype());
    const int64_t old_rows = c.dim(2);
    const size_t keep = std::min(held, static_cast<size_t>(old_rows)) * row_bytes;
    for (int64_t u = 0; u < c.dim(0) * c.dim(1); ++u) {  // one (batch, kv head) block at a time
      std::memcpy(dst + static_cast<size_t>(u * cap) * row_bytes,
                  static_cast<const char*>(c.raw_data()) + static_cast<size_t>(u * old_rows) * row_bytes, keep);
    }
    c = Tensor::Wrap(c.dtype(), {c.dim(0), c.dim(1), cap, c.dim(3)}, block.holder(), dst);
  }
}

absl::StatusOr<const float*> Generator::LastLogits(const Tensor& logits, int64_t n, std::vector<float>* widened) const {
  // n rows, or the last alone (RunOptions::last_row_outputs).
  if (logits.rank() != 3 || (logits.dim(1) != n && logits.dim(1) != 1) || logits.dim(2) <= 0 ||
      logits.dtype() != logits_dtype_) {
    return absl::InternalError(absl::StrCat("'logits' is ", DTypeName(logits.dtype()), " ",
                                            ShapeToString(logits.shape()), " for ", n, " tokens"));
  }
  const int64_t vocab = logits.dim(2);
  const int64_t last = logits.dim(1) - 1;
  if (logits_dtype_ != DType::kFloat16) return logits.data<float>() + last * vocab;
  const uint16_t* row = logits.data<uint16_t>() + last * vocab;
  widened->resize(static_cast<size_t>(vocab));
  WidenF16(row, widened->data(), vocab);  // in bulk (F16C): a vocabulary is 150k values a step
  return widened->data();
}

std::vector<Tensor> Generator::EmptyCache() const {
  std::vector<Tensor> cache;
  for (const CacheSlot& c : cache_) cache.push_back(Tensor::Empty(c.dtype, c.empty_shape));
  return cache;
}

std::vector<std::string> Generator::CacheOutputs() const {
  std::vector<std::string> names;
  for (const CacheSlot& c : cache_) names.push_back(c.output);
  return names;
}

absl::StatusOr<GenerationResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                                     const TokenCallback& on_token) const {
  static const RunOptions kUnbounded;
  RunOptions own_run;
  const RunOptions& run = StepRunOptions(options.run ? *options.run : kUnbounded, &own_run);
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
  const bool has_cache = layout_ != CacheLayout::kNone;
  std::vector<Tensor> cache = EmptyCache();
  const std::vector<std::string> cache_outputs = CacheOutputs();
  std::vector<std::string> step_outputs = {"logits"};
  step_outputs.insert(step_outputs.end(), cache_outputs.begin(), cache_outputs.end());
  std::vector<float> widened;  // the last row of float16 logits, as float32
  size_t fed = 0;  // tokens of `sequence` the cache already holds
  if (options.prefill_chunk < 0) return absl::InvalidArgumentError("prefill_chunk must be >= 0");
  const size_t chunk = static_cast<size_t>(options.prefill_chunk);
  for (int step = 0; step < options.max_new_tokens; ++step) {
    if (max_positions_ > 0 && static_cast<int64_t>(sequence.size()) > max_positions_) break;
    // A prompt that fits in one chunk runs in one pass, as other runtimes feed it (a graph with
    // per-tensor dynamic quantisation computes other numbers for other splits). A longer one goes
    // through the cache a chunk at a time: each chunk's attention is chunk x (past + chunk), so
    // memory grows linearly with the prompt, not quadratically. The chunks ask for the cache
    // alone, so the session skips their logits; the prompt's last token then runs by itself and
    // its single row of logits chooses the first token.
    const bool chunked = step == 0 && has_cache && chunk > 0 && sequence.size() > chunk;
    while (chunked && sequence.size() - fed > 1) {
      const size_t take = std::min(chunk, sequence.size() - fed - 1);
      const auto t0 = std::chrono::steady_clock::now();
      ReserveCache(cache, fed, fed + take);
      auto outs = session_.Run(Feeds(sequence, fed, take, cache), cache_outputs, run);
      if (!outs.ok()) return outs.status();
      result.prefill_ms += MsSince(t0);
      cache = std::move(*outs);
      fed += take;
    }
    // Only the tokens the cache has not seen go in; without a cache, all of them.
    const size_t first = has_cache ? fed : 0;
    const int64_t n = static_cast<int64_t>(sequence.size() - first);
    const auto t0 = std::chrono::steady_clock::now();
    if (has_cache) ReserveCache(cache, fed, sequence.size());
    auto outs = session_.Run(Feeds(sequence, first, static_cast<size_t>(n), cache), step_outputs, run);
    if (!outs.ok()) return outs.status();
    const double ms = MsSince(t0);
    if (step == 0) {
      result.prefill_ms += ms;
    } else {
      result.decode_ms += ms;
      result.decode_step_ms.push_back(ms);
      ++result.decode_steps;
    }
    const int64_t vocab = (*outs)[0].rank() == 3 ? (*outs)[0].dim(2) : 0;
    auto last_row = LastLogits((*outs)[0], n, &widened);
    if (!last_row.ok()) return last_row.status();
    const float* last = *last_row;
    if (has_cache) {
      // The cache the model returned is the next step's input, not copied.
      cache.assign(std::make_move_iterator(outs->begin() + 1), std::make_move_iterator(outs->end()));
      fed = sequence.size();
    }
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
