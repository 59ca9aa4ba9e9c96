// oneinfer::Session: load an ONNX model once, run it many times.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneinfer/export.h"
#include "oneinfer/common.h"
#include "oneinfer/tensor.h"

namespace oneinfer {


// The NPU leg (docs/npu.md): int8 GEMMs of at least 16 rows whose (K, N) has a design in the
// table run on the XDNA device through XRT; everything else runs on the host.
struct NpuOptions {
  // The design table: "MxKxN=path.xclbin:path.insts[,...]" (docs/npu.md). Empty: host only.
  std::string designs;
  // Run the designs on the in-process emulated device instead of XRT (tests, no hardware).
  bool emulate = false;
  // Device memory for resident weight images, per design.
  size_t weight_cache_mb = 2048;
  // A device run that does not complete within this many milliseconds is reported and the
  // host runs the call instead.
  int64_t wait_timeout_ms = 10000;
  // Routing trace lines (npu_qdq_host_rows, npu_qdq_fallback, npu_qdq_device) on stderr.
  bool trace = false;
};

struct SessionOptions {
  // Threads for the heavy kernels, counting the caller; 0 = the machine's cores.
  int num_threads = 0;
  LogLevel log_level = LogLevel::kWarning;
  // Fold subgraphs whose inputs are all constants (shape arithmetic) at load.
  bool constant_folding = true;
  // MatMuls with a constant float weight: float32 (default), or dynamic A8W8 (activations
  // quantised per row at run time, weights per column once; int8 x int8 -> int32 kernels).
  MatMulPrecision matmul = MatMulPrecision::kFloat32;
  // Pack constant weights into the kernels' layouts during Load, so the first Run (a prompt's
  // prefill) does only compute. false: each kernel prepares on its first run instead (a
  // quick load for tools that only inspect a graph).
  bool prepare_weights = true;
  // Fuse DequantizeLinear -> MatMul [-> QuantizeLinear] groups into one exact int8 node
  // (docs/qdq.md).
  bool qdq_fusion = true;
  // The QDQ fusion's trace lines on stderr: each fused group's form, each refusal reason with
  // its count (qdq_group, qdq_refused, qdq_fused, qdq_colsum).
  bool qdq_trace = false;
  // Run weight-only DequantizeLinear -> MatMul groups (int8 per column, int4/uint4 blocked) on
  // the int8 and 4-bit GEMMs without building the float weight (docs/quant.md).
  bool weight_fusion = true;
  // Per-run node timing profile in the log (also on at LogLevel::kVerbose).
  bool profile = false;
  // Embedding tables (big initializers only Gather reads) mapped from the model's file: false
  // drops their pages after every run, so a long prompt keeps few of them resident; true copies
  // them into memory at load and keeps them, so that no run waits on the disk for a row whose
  // page the system evicted (a long-running server; costs the tables' bytes).
  bool resident_tables = false;
  NpuOptions npu;
  // The most bytes one intermediate tensor may take; 0 = the machine's physical memory. A node
  // whose output or scratch would be larger fails with ResourceExhausted naming it and the shape.
  size_t max_tensor_bytes = 0;
  // The most bytes of intermediate tensors alive at once in this session, all runs together;
  // 0 = the machine's physical memory. Past it, the allocating node fails with ResourceExhausted.
  size_t max_intermediate_bytes = 0;
};

// Per-call controls of Session::Run. Another thread (or a signal handler) may set `cancel` while
// the run is going: the run stops at its next check (between nodes, and between iterations of
// loops whose trip counts come from data) and returns Cancelled. Not copyable (the flag is atomic).
struct RunOptions {
  std::atomic<bool> cancel{false};
  // The run stops with DeadlineExceeded at its first check past this time; the default is none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Outputs of which only the last row is wanted (generation needs the last position's logits
  // only). Where such an output comes straight from a row-wise node (a MatMul, Gemm or quantised
  // product against a constant weight: the LM head) whose input has size 1 in every dimension
  // before the last two, that node computes the last row alone and the output has 1 in every
  // dimension but the last ([1, 1, vocab] for [1, n, vocab]); otherwise the output comes whole.
  // The last row has the same bits either way (row-wise kernels compute a row alike for any M).
  std::vector<std::string> last_row_outputs;
  // Another flag this run also stops on (a Generator's runs honour their caller's cancel).
  const std::atomic<bool>* also_cancel = nullptr;
  // Inputs whose storage the caller hands over: the one node reading such an input may update it
  // in place and return it as an output (GroupQueryAttention appends a step's keys and values to
  // a KV cache with spare rows, IOInfo::kv_share_buffer, instead of copying it). The caller must
  // not read a donated tensor after the run except through the outputs.
  std::vector<std::string> donated_inputs;
  // KV caches that only the graph's attention reads, stacked (a past input the graph reads one
  // slot at a time, its present an output: our export's past_kv -> present_kv) or per layer
  // (optimum's past_key_values.N.key -> present.N.key), live in blocks with room for more
  // positions, and a donated past that is such a block takes the step's rows in place instead
  // of being copied. The present then comes back with each (slot, batch, head)'s rows at the
  // block's capacity stride: not dense, fit only to be fed back (donated) as the next run's
  // past. Off, the present is dense. Generator and BatchGenerator set it.
  bool grow_kv_in_place = false;
  // Sets the deadline `seconds` from now (a timeout).
  void SetTimeout(double seconds) {
    deadline = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  }
};

// Declared metadata of a graph input or output. shape is empty with has_shape false
// when the rank is unknown; a dimension is -1 when it is symbolic or unknown, and
// dim_params[i] then holds its symbolic name (possibly empty).
struct IOInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  bool is_tensor = true;  // false for sequence/optional values
  bool has_shape = false;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_params;
  bool has_default = false;  // an input with an initializer behind it may be omitted
  // A KV cache input read only as GroupQueryAttention's past_key / past_value (onnxruntime-genai's
  // layout): it may hold more rows than tokens (ONNX Runtime's past_present_share_buffer form;
  // attention_mask says how many are valid), and donated (RunOptions::donated_inputs) it is
  // appended to in place.
  bool kv_share_buffer = false;
};

using Feed = std::pair<std::string, Tensor>;

// What the QDQ MatMul fusion did to a session's graph at load (docs/qdq.md; the facts
// `oneinfer inspect` prints): fused DequantizeLinear -> MatMul [-> QuantizeLinear] groups by
// form, and the MatMuls left on the per-node path by reason.
struct QdqFusionSummary {
  int fused_groups = 0;
  // form ("a=int8 w=int8 sx=tensor sw=column zp=none out=int8 sy=tensor") -> groups of it
  std::map<std::string, int> forms;
  // reason (not_qdq, weight_not_constant, scale_along_k, ...) -> MatMuls left alone for it
  std::map<std::string, int> refused;
};

// How many positions a graph's rotary tables cover: the fewest rows of a constant cos_cache
// among its GroupQueryAttention (do_rotary), com.microsoft RotaryEmbedding and ai.onnx
// RotaryEmbedding (with position_ids) nodes; that node cannot run a later position. positions 0:
// the graph has no such table.
struct RotaryLimit {
  int64_t positions = 0;
  std::string node;   // "GroupQueryAttention '<name>'"
  std::string input;  // the cos_cache initializer's name
};

class SessionImpl;

// Thread safety: Run may be called from several threads at once on one Session; each call
// gets its own intermediate values. Loading and destruction must not overlap a Run.
class ONEINFER_API Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Load(const std::string& path,
                                                       const SessionOptions& options = {});
  // base_dir is where external data files are looked up.
  static absl::StatusOr<std::unique_ptr<Session>> LoadFromBuffer(const void* data, size_t size,
                                                                 const SessionOptions& options = {},
                                                                 const std::string& base_dir = ".");
  ~Session();

  const std::vector<IOInfo>& inputs() const;
  const std::vector<IOInfo>& outputs() const;
  // The model's metadata_props (key -> value).
  const std::map<std::string, std::string>& metadata() const;

  // Runs the graph. Feeds are checked by name, dtype, rank and fixed dims; each problem is
  // an InvalidArgument error naming the input. output_names empty = all graph outputs,
  // returned in graph order; otherwise in the order asked, and only the nodes those outputs
  // depend on run (a prefill chunk that asks for the KV cache alone skips the logits).
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Feed>& feeds,
                                          const std::vector<std::string>& output_names = {}) const;
  // The same, stoppable: Cancelled when run.cancel is set, DeadlineExceeded past run.deadline.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Feed>& feeds, const std::vector<std::string>& output_names,
                                          const RunOptions& run) const;

  // Runs several independent feed sets in one pass (continuous batching): node by node for all
  // of them, and a node whose output rows depend only on the matching rows of one input (a
  // MatMul, Gemm or quantised product with a constant weight) runs once over every set's rows,
  // so each weight is read once per pass. Result i holds set i's outputs; each equals what Run
  // returns for that set alone, bit for bit (the kernels compute a row the same way whatever
  // the number of rows). An error in any set fails the whole pass.
  absl::StatusOr<std::vector<std::vector<Tensor>>> RunBatch(const std::vector<std::vector<Feed>>& feeds,
                                                            const std::vector<std::string>& output_names,
                                                            const RunOptions& run) const;

  // The QDQ fusion's report for this session (empty when SessionOptions::qdq_fusion is false
  // or ONEINFER_QDQ=0).
  const QdqFusionSummary& qdq_fusion() const;

  // The graph's rotary tables' reach (RotaryLimit), found at load.
  const RotaryLimit& rotary_limit() const;

  // Memory the runs freed stays pooled for the next ones up to `bytes` more than the 64 MB
  // kept between runs: BatchGenerator keeps a full batch's KV caches this way.
  void KeepPooledBytes(size_t bytes) const;

  // Bytes of intermediate tensors alive at the high-water mark of the runs so far.
  size_t peak_intermediate_bytes() const;
  void ResetPeakIntermediateBytes();

  SessionImpl& impl() { return *impl_; }
  const SessionImpl& impl() const { return *impl_; }

 private:
  explicit Session(std::unique_ptr<SessionImpl> impl);
  std::unique_ptr<SessionImpl> impl_;
};

// The version, the CPU kernel tiers in use (float, int8 and 4-bit GEMMs) and whether the NPU leg
// (XRT) was built: "0.1.0 (kernels: float avx512, int8 avx512vnni, 4-bit avx512vnni; npu: not built)".
ONEINFER_API std::string VersionString();

}  // namespace oneinfer
