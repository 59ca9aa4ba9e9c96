// oneinfer::Generator: text generation over a Session whose graph is a causal LM: input_ids
// [1, S] (int64 or int32) -> logits [1, S, V] (float32 or float16), in one of the KV-cache
// conventions below, detected from the graph's inputs and outputs:
// - none: input_ids -> logits; every step re-runs the whole sequence (attention memory grows
//   with its square); attention_mask / position_ids inputs, if any, are fed as below;
// - stacked (oneinfer's export-qwen3): past_kv float [2L, 1, KVH, P, D] in, present_kv
//   [2L, 1, KVH, P+S, D] out (index 2l = key of layer l, 2l+1 = value);
// - per layer (Hugging Face optimum / transformers.js and the onnxruntime-genai builder):
//   past_key_values.{l}.key / .value [1, KVH, P, D] in, present.{l}.key / .value out, float32 or
//   float16, with attention_mask [1, P+S] (all ones: one unpadded sequence), position_ids [1, S]
//   (P .. P+S-1) when the graph has it, and use_cache_branch (optimum's merged decoders) true once
//   the cache holds tokens. A float32 cache that only GroupQueryAttention reads
//   (IOInfo::kv_share_buffer: onnxruntime-genai's files) is kept with spare rows, doubled when
//   full, and donated to each step (RunOptions::donated_inputs), so the attention appends the
//   step's keys and values in place, as ONNX Runtime's past_present_share_buffer does.
// With a cache the prompt runs as a prefill (in chunks when long) and each new token as one step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/export.h"
#include "oneinfer/session.h"

namespace oneinfer {

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy (argmax)
  int top_k = 0;             // 0 = no limit
  float top_p = 1.0f;        // nucleus: smallest set whose probability reaches top_p
  uint64_t seed = 0;
};

struct GenerateOptions {
  int max_new_tokens = 32;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
  // Cached models take a prompt longer than this many tokens a chunk at a time (0 = all at
  // once): attention then needs chunk x prompt floats per head, not prompt x prompt. The chunks
  // compute the cache alone and the prompt's last token runs by itself, so logits are one row,
  // not one per prompt token. A prompt of at most this many tokens runs in one pass.
  int prefill_chunk = 256;
  // Checked by every forward pass (between nodes, Loop iterations, ...): setting its cancel flag
  // or passing its deadline stops generation, also in the middle of a prefill. nullptr = none.
  const RunOptions* run = nullptr;
};

struct GenerationResult {
  std::vector<int32_t> generated_ids;
  int prompt_tokens = 0;
  double prefill_ms = 0;     // the forward passes over the prompt (its chunks and the first token)
  double decode_ms = 0;      // all later forward passes together
  int decode_steps = 0;
  std::vector<double> decode_step_ms;  // each later pass, in order (decode_ms is their sum)
  bool stopped_by_id = false;
  double decode_ms_per_token() const { return decode_steps ? decode_ms / decode_steps : 0; }
  // The middle pass time (upper middle of an even count): what peers' benchmarks report per token.
  double decode_ms_median() const {
    if (decode_step_ms.empty()) return 0;
    std::vector<double> v = decode_step_ms;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
};

// Called with each generated token and the logits it was chosen from (V floats, last
// position); return false to stop. Runs on the calling thread.
using TokenCallback = std::function<bool(int32_t id, const float* logits, int64_t vocab)>;

// Thread safety: one Generator runs one sequence at a time; several Generators may share a
// Session and run concurrently.
class ONEINFER_API Generator {
 public:
  // Checks the session's inputs and outputs against the conventions above; a graph that fits
  // none gets one error naming what was expected.
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const Session& session);
  ~Generator();

  enum class CacheLayout { kNone, kStacked, kPerLayer };
  CacheLayout cache_layout() const { return layout_; }
  bool cached() const { return layout_ != CacheLayout::kNone; }
  int64_t vocab_size() const { return vocab_; }
  // Maximum positions the model was exported for, or its rotary tables cover
  // (Session::rotary_limit), whichever is fewer (0 when the model says neither).
  int64_t max_positions() const { return max_positions_; }
  // Decodes at most `context` positions (a model folder's ModelContextLength, a server's
  // --context): InvalidArgument naming the node and its cos_cache when the graph's rotary
  // tables cover fewer, and naming `source`.
  absl::Status LimitContext(int64_t context, const std::string& source);

  absl::StatusOr<GenerationResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                            const TokenCallback& on_token = nullptr) const;

 private:
  friend class BatchGenerator;  // drives the same convention for many sequences
  explicit Generator(const Session& s);
  // One cache tensor: the input it is fed as, the output it comes back from, and its empty form
  // for the first step (defined in llm/generator.cc).
  struct CacheSlot;
  // The feeds of one forward pass over sequence[first, first + count) with `cache` holding first tokens.
  std::vector<Feed> Feeds(const std::vector<int64_t>& sequence, size_t first, size_t count,
                          const std::vector<Tensor>& cache) const;
  // The last row of a pass's logits for n tokens, checked, as float32 (float16 widened into
  // *widened); InternalError when the graph returned another shape or type.
  absl::StatusOr<const float*> LastLogits(const Tensor& logits, int64_t n, std::vector<float>* widened) const;
  // The RunOptions of a step: the caller's cancel flag and deadline, asking for the last row of
  // the logits only (the LM head skips the prompt's other rows) and donating the cache (a
  // share-buffer one is updated in place; a stacked or per-layer one then grows in place:
  // RunOptions::grow_kv_in_place).
  // A caller's options that chain a flag of their own (also_cancel) are used as they are.
  const RunOptions& StepRunOptions(const RunOptions& caller, RunOptions* own) const;
  // A share-buffer cache (share_buffer_) holding `held` tokens gets room for `needed`: caches
  // with fewer rows are replaced by ones of max(needed, twice their rows) (rounded up to 64, at
  // most the model's positions), all in one block, with their first `held` rows copied. Other
  // layouts' caches are left as they are.
  void ReserveCache(std::vector<Tensor>& cache, size_t held, size_t needed) const;
  // The cache of a sequence that holds no tokens yet, and the outputs the next cache comes from.
  std::vector<Tensor> EmptyCache() const;
  std::vector<std::string> CacheOutputs() const;

  const Session& session_;
  CacheLayout layout_ = CacheLayout::kNone;
  std::vector<CacheSlot> cache_;
  DType ids_dtype_ = DType::kInt64;
  DType logits_dtype_ = DType::kFloat32;
  DType mask_dtype_ = DType::kUndefined;      // kUndefined: the graph has no attention_mask
  DType position_dtype_ = DType::kUndefined;  // kUndefined: no position_ids
  bool has_cache_branch_ = false;             // optimum's use_cache_branch
  bool share_buffer_ = false;                 // every cache input is IOInfo::kv_share_buffer, float32
  int64_t vocab_ = 0;
  int64_t max_positions_ = 0;
};

// Picks the next token from one row of logits (exposed for tests).
ONEINFER_API int32_t SampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, uint64_t step);

}  // namespace oneinfer
