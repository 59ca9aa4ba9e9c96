// The execution plan: built once per graph at load, run many times.
//
// Phases: every name gets a slot; each node gets its kernel (chosen from the registry by
// domain, op_type and the model's opset); use counts decide after which step each
// intermediate value is released, so its memory returns to the allocator for later nodes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/allocator.h"
#include "ops/kernel.h"
#include "engine/session_config.h"
#include "base/thread_pool.h"

namespace oneinfer {

// Resolves a name defined in an enclosing scope (nullptr if none).
using OuterLookup = std::function<const Value*(const std::string&)>;

// How a lockstep pass ran its steps (ExecutionPlan::ExecuteBatch, for tests).
struct LockstepCounts {
  int stacked = 0;       // steps run once over every member's rows stacked
  int side_by_side = 0;  // stretches of per-member steps run with the members side by side
};

class ExecutionPlan : public SubgraphRunner {
 public:
  struct Resources {
    const SessionConfig* config = nullptr;
    std::shared_ptr<Allocator> allocator;
    ThreadPool* pool = nullptr;
  };

  // `graph` must be topologically sorted. outer_names: names visible from enclosing scopes.
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(std::shared_ptr<const Graph> graph,
                                                              const Resources& resources,
                                                              const std::set<std::string>& outer_names);

  // What a run asks beyond its inputs; empty vectors = every output, whole, nothing donated.
  struct RunRequest {
    // One flag per graph output: only the nodes the wanted outputs depend on run, and an output
    // not wanted comes back as an empty Value.
    std::vector<bool> wanted;
    // One flag per graph output: a flagged output's producer, when it is row-wise
    // (OpKernel::RowwiseInput, not RowwiseElementwise: its other inputs would keep every row) and
    // its row input has size 1 before its last two dimensions, runs on that input's last row
    // alone (RunOptions::last_row_outputs).
    std::vector<bool> last_row;
    // One flag per graph input: the caller hands its storage over, and the one node reading it
    // may update it in place and return it as an output (RunOptions::donated_inputs).
    std::vector<bool> donated;
  };

  // inputs[i] is the value of graph input i, or nullptr to use its initializer. `run` is checked
  // before each node (Cancelled / DeadlineExceeded) and handed to the kernels.
  absl::StatusOr<std::vector<Value>> Execute(const std::vector<const Value*>& inputs,
                                             const OuterLookup& outer, const RunControl& run = {},
                                             const RunRequest& request = {}) const;

  // Runs several independent input sets (top-level graphs only) in lockstep: each step for every
  // set before the next step. A step whose kernel is row-wise (OpKernel::RowwiseInput) runs once
  // over the sets' rows stacked (for a RowwiseElementwise kernel every input that differs between
  // the sets), and each set gets its rows of the result; the others run once per set. Returns
  // each set's outputs as Execute would.
  // counts (optional): how the steps ran (LockstepCounts).
  absl::StatusOr<std::vector<std::vector<Value>>> ExecuteBatch(const std::vector<std::vector<const Value*>>& inputs,
                                                               const RunControl& run = {},
                                                               const RunRequest& request = {},
                                                               LockstepCounts* counts = nullptr) const;

  // SubgraphRunner
  const Graph& graph() const override { return *graph_; }
  absl::StatusOr<std::vector<Value>> Run(OpContext& outer, std::vector<Value> inputs) const override;

  size_t num_steps() const { return steps_.size(); }
  // Calls every step's OpKernel::PrepareWeights (control-flow kernels pass it on to their subgraphs).
  absl::Status PrepareWeights() const override;
  // Times each step of every run and logs the slowest steps after it (off: one branch per step).
  void set_profile(bool on) { profile_ = on; }

 private:
  friend class PlanContext;
  friend class PlanInit;
  struct Step {
    const Node* node = nullptr;
    int64_t opset = 0;
    std::unique_ptr<OpKernel> kernel;
    bool accepts_non_tensors = false;
    std::vector<int> inputs;            // -1 = omitted
    std::vector<int> outputs;           // -1 = omitted
    std::vector<int> implicit_inputs;   // slots of names the subgraphs read
    std::vector<std::string> implicit_names;
    std::vector<int> release_after;     // slots whose last use is this step
  };
  enum class SlotKind { kConstant, kInput, kOuter, kNodeOutput };
  struct Slot {
    std::string name;
    SlotKind kind = SlotKind::kNodeOutput;
    int input_index = -1;     // kInput
    Value constant;           // kConstant (and the default of an overridable input)
    bool has_constant = false;
    int readers = 0;          // input and implicit-input uses by the steps
  };

  // The steps a run makes, in order, and the slots released after each (index into steps).
  struct Schedule {
    std::vector<size_t> steps;
    std::vector<std::vector<int>> release_after;
  };

  ExecutionPlan() = default;
  // Points every slot of one run at its constant, feed or outer value (node outputs: null).
  absl::Status BindSlots(const std::vector<const Value*>& inputs, const OuterLookup& outer,
                         std::vector<const Value*>& ptr) const;
  // Runs one step of one run, then releases `release`.
  // donated (optional): one flag per slot, the run's donated inputs (RunRequest::donated).
  absl::Status RunStep(const Step& step, std::vector<const Value*>& ptr, std::vector<Value>& owned,
                       const RunControl& run, const std::vector<int>& release,
                       const std::vector<bool>* donated = nullptr) const;
  static void Release(const std::vector<int>& release, std::vector<const Value*>& ptr, std::vector<Value>& owned);
  // Execute and ExecuteBatch: one run per input set, each step for every set before the next.
  absl::StatusOr<std::vector<std::vector<Value>>> RunLockstep(const std::vector<std::vector<const Value*>>& inputs,
                                                              const OuterLookup& outer, const RunControl& run,
                                                              const RunRequest& request, LockstepCounts* counts) const;
  // For a row-wise step: points each member's row input at a view of its last row, where its
  // shape allows (size 1 before the last two dimensions); `views` keeps the views alive.
  void NarrowToLastRow(const Step& step, std::vector<std::vector<const Value*>>& ptr, std::vector<Value>& views) const;
  // A row-wise step over every member's rows at once; false (nothing run) when their inputs do
  // not stack (different widths or dtypes, a non-shared operand).
  absl::StatusOr<bool> RunStacked(const Step& step, std::vector<std::vector<const Value*>>& ptr,
                                  std::vector<std::vector<Value>>& owned, const RunControl& run,
                                  const std::vector<int>& release) const;
  // A step each member takes on its own, one that may join a side-by-side stretch: not row-wise
  // (never stacked) and reading no outer values through a subgraph.
  static bool PerMember(const Step& step);
  // Whether a stretch of per-member steps starting at `step` runs its members side by side on the
  // pool, one member a task (the kernels' own parallel loops then run inline, in the chunks of a
  // parallel run: the same results): when no member's inputs hold more than one thread's share of
  // all of theirs, e.g. a decoding step's attention, norms and element-wise nodes.
  bool MembersSideBySide(const Step& step, const std::vector<std::vector<const Value*>>& ptr) const;
  // The graph outputs of one run (an output not wanted comes back empty).
  absl::StatusOr<std::vector<Value>> Collect(const std::vector<const Value*>& ptr, const std::vector<bool>& wanted) const;
  // For the steps run in `order` (indices into steps_): the node outputs to release after each,
  // i.e. after their last reader among them (graph outputs are kept).
  std::vector<std::vector<int>> ReleaseLists(const std::vector<size_t>& order) const;
  // The steps that the wanted outputs depend on, with releases after their last needed reader.
  Schedule PrunedSchedule(const std::vector<bool>& wanted) const;
  int SlotOf(const std::string& name) const;
  // ends[j] = when step ran[j] finished; start = when the first began.
  void LogProfile(std::chrono::steady_clock::time_point start, const std::vector<size_t>& ran,
                  const std::vector<std::chrono::steady_clock::time_point>& ends) const;

  std::shared_ptr<const Graph> graph_;
  Resources res_;
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<int> output_slots_;
  std::vector<int> input_slots_;
  bool profile_ = false;
};

}  // namespace oneinfer
