// The contract between the executor and an operator kernel.
//
// A kernel is created once per node when the session is loaded (KernelInit: attributes,
// constant inputs, subgraphs) and then runs many times (OpContext: values of this run).
// Compute() is const: one kernel may serve concurrent Session::Run calls, so any lazy
// state a kernel keeps must be guarded by the kernel itself.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/value.h"
#include "graph/ir.h"
#include "oneinfer/common.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

class Allocator;
class Int8GemmOffload;
class ThreadPool;
class OpContext;

// What kernel factories may know of the session's settings (the engine fills it from
// SessionOptions; kernels never see the options themselves).
struct KernelConfig {
  MatMulPrecision matmul = MatMulPrecision::kFloat32;
  // Where int8 GEMMs may leave the host: the session's NPU router, owned by the session and alive
  // as long as its kernels. Null when SessionOptions::npu configures no design (host only).
  Int8GemmOffload* int8_offload = nullptr;
  // The fused QDQ kernels' trace lines on stderr (SessionOptions::qdq_trace).
  bool qdq_trace = false;
  // The most bytes one tensor may take (SessionOptions::max_tensor_bytes, resolved; 0 = no
  // limit): what kernels that grow a value outside the allocator (Loop's scan outputs) check.
  size_t max_tensor_bytes = 0;
};

// One run's stop requests (the engine fills it from RunOptions). Kernels whose loops take their
// trip counts from data (Loop, Scan, RoiAlign, Resize) check it between iterations through
// OpContext::CheckCancel, so a hostile count or a user's Ctrl-C does not spin forever.
struct RunControl {
  const std::atomic<bool>* cancel = nullptr;
  const std::atomic<bool>* also_cancel = nullptr;  // a caller's flag (RunOptions::also_cancel)
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool grow_kv_in_place = false;  // RunOptions::grow_kv_in_place
  // Cancelled when a flag is set, DeadlineExceeded past the deadline, else OK (atomic loads
  // and, with a deadline, one clock read).
  absl::Status Check() const {
    if ((cancel != nullptr && cancel->load(std::memory_order_relaxed)) ||
        (also_cancel != nullptr && also_cancel->load(std::memory_order_relaxed))) {
      return absl::CancelledError("the run was cancelled");
    }
    if (deadline != std::chrono::steady_clock::time_point::max() && std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError("the run passed its deadline");
    }
    return absl::OkStatus();
  }
};

// Runs a compiled subgraph (If/Loop/Scan bodies). Names the subgraph reads from enclosing
// scopes are resolved through the OpContext of the node that owns it.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual const Graph& graph() const = 0;
  // inputs: one value per subgraph input, in order. Returns one value per subgraph output.
  virtual absl::StatusOr<std::vector<Value>> Run(OpContext& outer, std::vector<Value> inputs) const = 0;
  // OpKernel::PrepareWeights of every kernel of the subgraph (the owning kernel's own
  // PrepareWeights calls it, so a subgraph's weights are packed at load as the main graph's).
  virtual absl::Status PrepareWeights() const { return absl::OkStatus(); }
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual absl::Status Compute(OpContext& ctx) const = 0;
  // One-time preparation of constant operands (weight packing, quantisation). The session
  // calls it once per top-level kernel at load unless SessionOptions::prepare_weights is
  // false; Compute must still work without it (kernels then prepare on their first run), so
  // implementations guard the work with their own once-flag.
  virtual absl::Status PrepareWeights(ThreadPool* /*pool*/) const { return absl::OkStatus(); }
  // Continuous batching (ExecutionPlan::ExecuteBatch): the input whose rows (all dimensions but
  // the last) map one to one onto the rows of each output, every other input being a value the
  // runs share (a constant weight); -1 = none. One call over several runs' rows stacked as
  // [rows, width] must return [rows, out_width] per output and give each row the same bits as a
  // call over that run's rows alone: the kernel computes a row the same way whatever the number
  // of rows.
  virtual int RowwiseInput() const { return -1; }
  // With RowwiseInput() >= 0: an elementwise-by-row kernel (Add, Mul, RMSNorm), whose inputs that
  // differ between the runs are all row inputs (each run's of the RowwiseInput()'s shape) and whose
  // shared inputs broadcast along the last axis only (rank <= 1). Each output element must come
  // from the same arithmetic wherever its row sits among the stacked ones.
  virtual bool RowwiseElementwise() const { return false; }
};

// What a kernel factory sees at load time.
class KernelInit {
 public:
  virtual ~KernelInit() = default;
  virtual const Node& node() const = 0;
  // The opset of the node's domain in this model.
  virtual int64_t opset() const = 0;
  // The value of input i when it is a constant (initializer or folded), else nullptr.
  virtual const Tensor* ConstantInput(size_t i) const = 0;
  // Declared type of input/output i, when the graph says (value_info, inputs, outputs).
  virtual const TypeInfo* InputType(size_t i) const = 0;
  virtual const TypeInfo* OutputType(size_t i) const = 0;
  // Compiles a graph-valued attribute into a runner.
  virtual absl::StatusOr<std::unique_ptr<SubgraphRunner>> CompileSubgraph(const Graph& g) const = 0;
  virtual const KernelConfig& config() const = 0;
};

// What a kernel sees while it runs.
class OpContext {
 public:
  virtual ~OpContext() = default;
  virtual const Node& node() const = 0;
  virtual int64_t opset() const = 0;

  virtual size_t num_inputs() const = 0;
  // Present means: named in the node and not the empty name.
  virtual bool has_input(size_t i) const = 0;
  // The input value; nullptr when the input is omitted.
  virtual const Value* input_value(size_t i) const = 0;
  // Input i as a tensor. Precondition: has_input(i) and the value is a tensor
  // (the executor checks value kinds before calling Compute).
  const Tensor& input(size_t i) const { return input_value(i)->tensor; }

  virtual size_t num_outputs() const = 0;
  // False when the node leaves output i unnamed; the kernel may skip computing it.
  virtual bool has_output(size_t i) const = 0;
  // Allocates output i (zero-filled) from the session's allocator and returns it.
  virtual Tensor& AllocateOutput(size_t i, DType dtype, const Shape& shape) = 0;
  // Same, without the zero fill, for kernels that write every element (hot paths).
  virtual Tensor& AllocateOutputUninitialized(size_t i, DType dtype, const Shape& shape) = 0;
  // Input k's own storage as output i, for a kernel whose output element j depends on element j
  // of input k alone (elementwise ops, a softmax row) or that updates input k (an attention that
  // appends to its cache): given when input k is an intermediate that no later node reads and no
  // other tensor shares, or a fed input the run donated (RunOptions::donated_inputs) that this
  // node alone reads, and has this dtype and shape. The kernel then writes its result over the
  // input. nullptr otherwise: allocate as usual.
  virtual Tensor* ReuseInputAsOutput(size_t k, size_t i, DType dtype, const Shape& shape) {
    (void)k, (void)i, (void)dtype, (void)shape;
    return nullptr;
  }
  // True when input k is a fed input the run donated (RunOptions::donated_inputs): the caller
  // will not read it again, so the kernel may write where no reader of this run looks (a stacked
  // KV cache's rows past its length), whoever else reads the rest.
  virtual bool InputDonated(size_t k) const {
    (void)k;
    return false;
  }
  // Sets output i to an existing tensor (a view of an input, a constant, ...).
  virtual void SetOutput(size_t i, Tensor t) = 0;
  virtual void SetOutputValue(size_t i, Value v) = 0;
  // Scratch memory from the session's allocator (zero-filled unless zero is false).
  virtual Tensor AllocateTemp(DType dtype, const Shape& shape, bool zero = true) = 0;

  virtual ThreadPool* thread_pool() const = 0;
  // The run's stop requests (none unless the caller gave RunOptions).
  virtual const RunControl& run_control() const {
    static const RunControl kNone;
    return kNone;
  }
  // OK, or the Cancelled / DeadlineExceeded status that ends the run (naming this node).
  absl::Status CheckCancel() const {
    absl::Status s = run_control().Check();
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(node().Describe(), ": ", s.message()));
  }
  // Resolves a name read by one of this node's subgraphs (an implicit input).
  virtual const Value* LookupOuterScope(const std::string& name) const = 0;
};

using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<OpKernel>>(const KernelInit&)>;

// A kernel that is a plain function of its context.
using KernelFn = std::function<absl::Status(OpContext&)>;
KernelFactory MakeFnKernel(KernelFn fn);
// The same, declared elementwise by row (OpKernel::RowwiseElementwise, input 0 the row input): a
// batched run calls it once over every run's rows.
KernelFactory MakeRowwiseFnKernel(KernelFn fn);

// Kernel registry keyed by (domain, op_type, opset range). Each ops/ family file registers
// its kernels from its own Register*Ops function; Global() calls each once.
class KernelRegistry {
 public:
  struct Entry {
    std::string domain;
    std::string op_type;
    int64_t first_opset;  // the ONNX since_version this implementation follows
    int64_t last_opset;   // the last opset it is known to match (before the next schema change)
    KernelFactory factory;
    // Sequence, optional and control-flow ops take non-tensor values; others get tensors only.
    bool accepts_non_tensors = false;
  };

  static KernelRegistry& Global();

  Entry& Add(std::string domain, std::string op_type, int64_t first_opset, int64_t last_opset,
             KernelFactory factory);
  Entry& AddFn(std::string domain, std::string op_type, int64_t first_opset, int64_t last_opset,
               KernelFn fn) {
    return Add(std::move(domain), std::move(op_type), first_opset, last_opset, MakeFnKernel(std::move(fn)));
  }
  // The entry whose opset range holds `opset`, or nullptr.
  const Entry* Find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  // True if some version of the op is registered (for "unsupported opset" vs "unknown op").
  bool Knows(const std::string& domain, const std::string& op_type) const;

 private:
  std::deque<Entry> entries_;  // deque: Add() hands out references that must stay valid
};

// Error helpers that name the node.
template <typename... Args>
absl::Status InvalidArgument(const OpContext& ctx, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(ctx.node().Describe(), ": ", args...));
}
template <typename... Args>
absl::Status Unimplemented(const Node& node, const Args&... args) {
  return absl::UnimplementedError(absl::StrCat(node.Describe(), ": ", args...));
}

}  // namespace oneinfer
