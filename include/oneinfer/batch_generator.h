// oneinfer::BatchGenerator: continuous batching. Many sequences decode together over one
// Session: each Step is one forward pass over every active sequence (a new sequence's prompt,
// or a chunk of it, beside the last token of each running one), run node by node for all of
// them, with every matrix product against a constant weight done once over all their rows
// (Session::RunBatch), so a decode step reads each weight once however many sequences run.
//
// Batch invariance: a sequence's tokens never depend on what else runs. Its prompt is split
// into the same passes as Generator::Generate would split it, its sampling draws are numbered
// by its own steps, and the kernels compute each row the same way whatever the number of rows
// (docs/serve.md lists which are checked), so greedy and seeded output match a lone
// Generator::Generate of the same request bit for bit.
//
// Thread safety: none; one thread (a server's scheduler) calls every method.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "oneinfer/export.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"

namespace oneinfer {

struct BatchOptions {
  // Sequences decoded at once (the cache slots); Add refuses more with ResourceExhausted.
  int max_sequences = 8;
  // Positions one sequence may reach, prompt and generated tokens together; 0 = the model's
  // max_positions (unbounded when the model does not say). A longer prompt is refused; a
  // sequence whose next pass would exceed it finishes with kLength.
  int64_t context = 0;
  // As GenerateOptions::prefill_chunk: a longer prompt is prefilled a chunk per Step.
  int prefill_chunk = 256;
};

struct SequenceOptions {
  int max_new_tokens = 32;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  // the sequence finishes after emitting one of these
};

enum class FinishReason {
  kNone,       // still running
  kStop,       // emitted a stop id
  kLength,     // reached max_new_tokens or the context
  kCancelled,  // Cancel was called
};

ONEINFER_API const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled"

// What one Step did for one sequence: at most one new token, and whether it is done (a
// finished sequence's slot is free for the next Add).
struct SequenceEvent {
  int64_t id = 0;
  bool has_token = false;
  int32_t token = 0;
  FinishReason finish = FinishReason::kNone;
};

struct StepStats {
  int sequences = 0;  // sequences in the pass
  int64_t rows = 0;   // token rows in the pass (prompt tokens + one per decoding sequence)
  double ms = 0;      // the forward passes of this Step
};

class ONEINFER_API BatchGenerator {
 public:
  // The session's graph must fit one of Generator's conventions. The session's memory pool then
  // keeps max_sequences KV caches of their first block's size (Session::KeepPooledBytes), so the
  // slots' blocks are reused from sequence to sequence, also across quiet spells.
  static absl::StatusOr<std::unique_ptr<BatchGenerator>> Create(const Session& session, const BatchOptions& options = {});
  ~BatchGenerator();

  // Admits a sequence; its prompt runs from the next Step. InvalidArgument for an empty prompt,
  // an id outside the vocabulary or a prompt that does not fit the context; ResourceExhausted
  // when max_sequences are active.
  absl::StatusOr<int64_t> Add(const std::vector<int32_t>& prompt, const SequenceOptions& options);
  // Ends the sequence at the next Step (its event says kCancelled) and frees its slot. Unknown
  // or finished ids are ignored.
  void Cancel(int64_t id);

  // One forward pass over all active sequences; an event for each that produced a token or
  // finished. An error (a kernel failure, run.cancel) ends every active sequence.
  absl::StatusOr<std::vector<SequenceEvent>> Step(const RunOptions* run = nullptr);

  // Runs one pass of max_sequences one-token sequences and drops them, so that the slots' KV
  // cache blocks and a full pass's buffers are faulted in now and pooled: the first burst of
  // requests then does not pay for fresh pages (a server calls it before it answers). Only
  // while no sequence is active (else FailedPrecondition).
  absl::Status Warm();

  int active() const;
  int max_sequences() const { return options_.max_sequences; }
  // Positions one sequence may reach (0 = unbounded).
  int64_t context() const { return context_; }
  int64_t vocab_size() const;
  const StepStats& last_step() const { return last_; }

 private:
  struct Sequence;
  BatchGenerator(const Session& session, std::unique_ptr<Generator> conventions, const BatchOptions& options);

  const Session& session_;
  std::unique_ptr<Generator> gen_;  // the convention: feeds, cache tensors, logits dtype
  BatchOptions options_;
  int64_t context_ = 0;
  int64_t next_id_ = 1;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  StepStats last_;
};

}  // namespace oneinfer
