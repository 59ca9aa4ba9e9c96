// oneinfer::Generator: text generation over a Session whose graph follows the causal-LM
// convention: input_ids int64 [1, S] -> logits float [1, S, V], optionally with a stacked
// KV cache: past_kv float [2L, 1, KVH, P, D] in, present_kv [2L, 1, KVH, P+S, D] out
// (index 2l = key of layer l, 2l+1 = value). With the cache the prompt runs as a prefill (in
// chunks when long) and each new token as one step; without it every step re-runs the whole
// sequence, and attention memory grows with its square.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  // Cached models take the prompt this many tokens at a time (0 = all at once): attention then
  // needs chunk x prompt floats per head, not prompt x prompt. The chunks compute the cache alone
  // and the prompt's last token runs by itself, so logits are one row, not one per prompt token.
  // Same tokens either way.
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
  bool stopped_by_id = false;
  double decode_ms_per_token() const { return decode_steps ? decode_ms / decode_steps : 0; }
};

// Called with each generated token and the logits it was chosen from (V floats, last
// position); return false to stop. Runs on the calling thread.
using TokenCallback = std::function<bool(int32_t id, const float* logits, int64_t vocab)>;

// Thread safety: one Generator runs one sequence at a time; several Generators may share a
// Session and run concurrently.
class ONEINFER_API Generator {
 public:
  // Checks the session's inputs and outputs against the convention above.
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const Session& session);

  bool cached() const { return cached_; }
  int64_t vocab_size() const { return vocab_; }
  // Maximum positions the model was exported for (0 when the model does not say).
  int64_t max_positions() const { return max_positions_; }

  absl::StatusOr<GenerationResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                            const TokenCallback& on_token = nullptr) const;

 private:
  explicit Generator(const Session& s) : session_(s) {}
  const Session& session_;
  bool cached_ = false;
  int64_t vocab_ = 0;
  int64_t max_positions_ = 0;
  Shape past_shape_;  // [2L, 1, KVH, 0, D] for the first step
};

// Picks the next token from one row of logits (exposed for tests).
ONEINFER_API int32_t SampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, uint64_t step);

}  // namespace oneinfer
