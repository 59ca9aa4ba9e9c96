// The graph pass framework: one interface, one context carrying what the passes need from the
// session, and the session's passes listed once, in order (SessionPasses in pipeline.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir.h"
#include "graph/passes/use_def.h"
#include "oneinfer/common.h"

namespace oneinfer {

// What the fused int8 QDQ kernel can take, told by the caller (the graph layer knows no kernel).
struct QdqKernelLimits {
  int64_t max_k = 0;  // the longest reduction the int8 GEMM packs (PackedWeightsS8::kMaxK)
};

// What the QDQ MatMul fusion found: fused groups by form, MatMuls left alone by reason.
struct QdqFusionReport {
  int fused = 0;
  // "a=int8 w=int8 sx=tensor sw=column zp=none out=int8 sy=tensor" -> groups of that form
  std::map<std::string, int> forms;
  // why -> count: not_qdq (a float MatMul), weight_not_constant, scale_along_k, ...
  // (output_quantize_kept counts fused groups whose QuantizeLinear stayed a separate node)
  std::map<std::string, int> refused;
};

// Evaluates one node on constant inputs (provided by the engine, which owns the kernels).
using NodeEvaluator =
    std::function<absl::StatusOr<std::vector<Tensor>>(const Node& node, const std::vector<const Tensor*>& inputs)>;

// Looks up the 4-bit weight for graph input `name`, declared float32 [K, N]: its q4_1 chunks as
// a uint8 tensor, or an error (missing, another chunk kind, wrong size).
using ExternalWeightLookup = std::function<absl::StatusOr<Tensor>(const std::string& name, int64_t K, int64_t N)>;

// Weights the model keeps outside the graph (a Q4NX file), bound by external_weight_binding.
struct ExternalWeights {
  ExternalWeightLookup lookup;  // empty: the model names no such file
  std::string source;           // names the file in errors ("Q4NX file 'w.q4nx'")
  std::string none_bound_error;  // the error when the file is named but no MatMul reads a graph input
};

// What the passes did (PassContext::report).
struct PassReport {
  // pass name -> what its Apply returned (groups fused, nodes removed or folded, values typed),
  // summed over the runs of passes listed twice
  std::map<std::string, int> counts;
  QdqFusionReport qdq;  // the QDQ selector's groups and refusals (empty when qdq_fusion is off)
};

// What the passes need from the session (engine/ fills it from SessionOptions).
struct PassContext {
  bool qdq_fusion = true;        // SessionOptions::qdq_fusion
  bool weight_fusion = true;     // SessionOptions::weight_fusion
  bool constant_folding = true;  // SessionOptions::constant_folding
  // kQdq trace lines (qdq_group, qdq_refused, qdq_fused, qdq_disabled) on stderr as well as the
  // category's sink (SessionOptions::qdq_trace).
  bool qdq_trace = false;
  QdqKernelLimits qdq_limits;
  // Constant folding evaluates nodes with the engine's kernels; outputs larger than
  // max_folded_bytes stay as work.
  NodeEvaluator evaluate;
  size_t max_folded_bytes = size_t{1} << 20;
  ExternalWeights external_weights;
  LogLevel log_level = LogLevel::kWarning;  // weight-only fusion refusals are info lines
  PassReport* report = nullptr;             // may be null
  // Tests: after each pass, check that the index it kept matches one built afresh.
  bool check_uses = false;
};

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  virtual const char* name() const = 0;
  // Runs over g, which `uses` describes on entry; a pass that changes g's nodes, inputs or
  // outputs leaves `uses` describing the new g (UseDefIndex::Rebuild). Returns the pass's count
  // for PassReport::counts.
  virtual absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext& ctx) const = 0;
};

// The passes a session runs at load, in order (listed in pipeline.cc).
const std::vector<std::unique_ptr<GraphPass>>& SessionPasses();

// Runs `passes` over g with one shared use-def index; the first error stops the run and is
// returned as the pass gave it.
absl::Status RunPasses(Graph& g, const std::vector<std::unique_ptr<GraphPass>>& passes, const PassContext& ctx);
inline absl::Status RunSessionPasses(Graph& g, const PassContext& ctx) { return RunPasses(g, SessionPasses(), ctx); }

}  // namespace oneinfer
