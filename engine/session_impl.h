// Session internals shared by the CLI, the tests and the generator (not a public header).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/plan.h"
#include "engine/session_config.h"
#include "base/thread_pool.h"
#include "base/value.h"
#include "graph/onnx_loader.h"
#include "npu/router.h"
#include "oneinfer/session.h"

namespace oneinfer {

class SessionImpl {
 public:
  static absl::StatusOr<std::unique_ptr<SessionImpl>> Create(std::unique_ptr<Model> model,
                                                             const SessionOptions& options);

  const Model& model() const { return *model_; }
  const Graph& graph() const { return *graph_; }
  const std::vector<IOInfo>& inputs() const { return inputs_; }
  const std::vector<IOInfo>& outputs() const { return outputs_; }
  Allocator& allocator() { return *allocator_; }
  const Allocator& allocator() const { return *allocator_; }
  const QdqFusionSummary& qdq_fusion() const { return qdq_fusion_; }
  const RotaryLimit& rotary_limit() const { return rotary_limit_; }
  // The NPU router built from SessionOptions::npu; null when npu.designs is empty.
  npu::Router* npu_router() const { return npu_router_.get(); }

  // Runs with values (tensors, sequences, optionals) fed by name; outputs in graph order.
  // `run` (optional) stops it: Cancelled / DeadlineExceeded. `wanted` (a flag per output; empty =
  // all): only the nodes the wanted outputs need run, and the others come back empty.
  absl::StatusOr<std::vector<Value>> RunValues(const std::vector<std::pair<std::string, Value>>& feeds,
                                               const RunOptions* run = nullptr,
                                               const std::vector<bool>& wanted = {}) const;
  // Named outputs are the only ones computed (a prefill chunk asking for the KV cache alone skips
  // the logits); no names = every output.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Feed>& feeds,
                                          const std::vector<std::string>& output_names,
                                          const RunOptions* run = nullptr) const;
  // Session::RunBatch; counts (optional, for tests): how the pass ran its steps.
  absl::StatusOr<std::vector<std::vector<Tensor>>> RunBatch(const std::vector<std::vector<Feed>>& feeds,
                                                            const std::vector<std::string>& output_names,
                                                            const RunOptions* run = nullptr,
                                                            LockstepCounts* counts = nullptr) const;

 private:
  absl::Status CheckFeed(const IOInfo& info, const Value& v) const;
  // The feeds checked against the graph's inputs: one pointer per graph input (null = its
  // initializer), pointing into `feeds`.
  absl::StatusOr<std::vector<const Value*>> BindFeeds(const std::vector<std::pair<std::string, Value>>& feeds) const;
  static absl::StatusOr<std::vector<std::pair<std::string, Value>>> FeedValues(const std::vector<Feed>& feeds);
  // Output names -> their indices (all, in graph order, when none are named) and the wanted flags.
  absl::Status PickOutputs(const std::vector<std::string>& output_names, std::vector<size_t>* picked,
                           std::vector<bool>* wanted) const;
  absl::StatusOr<std::vector<Tensor>> Picked(const std::vector<Value>& results, const std::vector<size_t>& picked) const;
  // What the plan is asked: the wanted outputs, and RunOptions::last_row_outputs and
  // donated_inputs as flags (empty when none); an unknown name is an InvalidArgument error.
  absl::StatusOr<ExecutionPlan::RunRequest> Request(const RunOptions* run, const std::vector<bool>& wanted) const;

  std::shared_ptr<Model> model_;
  std::shared_ptr<const Graph> graph_;
  SessionConfig config_;
  std::shared_ptr<Allocator> allocator_;
  std::unique_ptr<ThreadPool> pool_;
  // Declared before plan_ so it outlives the kernels that hold it (config_.kernels.int8_offload).
  std::unique_ptr<npu::Router> npu_router_;
  std::unique_ptr<ExecutionPlan> plan_;
  std::vector<IOInfo> inputs_;
  std::vector<IOInfo> outputs_;
  int folded_ = 0;
  QdqFusionSummary qdq_fusion_;
  RotaryLimit rotary_limit_;
  // Mapped embedding tables whose pages each run drops again (GatherOnlyTables in session.cc).
  std::vector<Tensor> gather_only_tables_;
};

}  // namespace oneinfer
