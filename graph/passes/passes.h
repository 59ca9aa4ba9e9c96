// Graph passes, one file each: ordering and validation, dead-node removal, constant folding,
// shape inference.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir.h"

namespace oneinfer {

// Fills Node::implicit_inputs from each node's subgraphs, checks that every input is produced
// (by a node, a graph input, an initializer or `outer_names`), that no name is produced twice,
// and orders the nodes topologically; a cycle is an error naming a node on it.
absl::Status SortTopologically(Graph& g, const std::set<std::string>& outer_names);

// Removes nodes whose outputs reach no graph output, and initializers nothing reads.
// Returns the number of nodes removed. Requires topological order.
int RemoveDeadNodes(Graph& g);

// The last step of every fusion pass: erases the nodes marked in `drop` (the fused group's
// inner nodes) and declares the oneinfer.internal domain the rewritten nodes belong to.
inline void EraseFusedNodes(Graph& g, const std::vector<bool>& drop) {
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  g.opsets["oneinfer.internal"] = 1;
}

// Evaluates one node on constant inputs (provided by the engine, which owns the kernels).
using NodeEvaluator =
    std::function<absl::StatusOr<std::vector<Tensor>>(const Node& node, const std::vector<const Tensor*>& inputs)>;

// Replaces nodes whose inputs are all constants by initializers holding their outputs
// (shape arithmetic mostly). Skips random ops, nodes with subgraphs, quantisation ops
// (their integer weights are kept for the int8 kernels) and outputs larger than
// max_output_bytes. Returns the number of nodes folded.
absl::StatusOr<int> FoldConstants(Graph& g, const NodeEvaluator& evaluate, size_t max_output_bytes);

// Rewrites the stacked KV-cache pattern (see kv_cache_fusion.cc) into the engine's internal
// KVCacheAppend / KVCacheFinish nodes so each step copies the cache once. Returns the number
// of caches rewritten. Requires topological order; run RemoveDeadNodes and SortTopologically after.
int FuseStackedKVCache(Graph& g);

// Rewrites Mul(x,x) -> ReduceMean(-1) -> Add(eps) -> Sqrt -> Div(x, .) -> Mul(., w) into one
// internal RMSNorm node (see rms_norm_fusion.cc). Returns the number of norms rewritten.
int FuseRMSNorm(Graph& g);

// Rewrites DequantizeLinear(constant int4/uint4 weight blocked along K, or int8/uint8 per
// column or per tensor) -> MatMul B (the DQ output read only as MatMul B operands) into one
// internal WeightDequantMatMul node per MatMul (see weight_dequant_fusion.cc), whose kernel
// runs the 4-bit or int8 GEMM on the integer weights. Returns the number of MatMuls rewritten;
// `refused` (may be null) gets one line per weight-only group left unfused and why.
int FuseWeightDequantMatMul(Graph& g, std::vector<std::string>* refused);
// False when ONEINFER_WEIGHT_FUSION=0 (the per-node DequantizeLinear + MatMul path runs).
bool WeightDequantFusionEnabled();

// Static shape and type inference over a sorted graph: fills g.value_info for every node output
// whose element type and (possibly symbolic) shape follow from declared types, initializers and
// constant inputs; unknown ops and unknown inputs leave outputs unknown. A declared type that
// contradicts the inferred one (element type, rank or a fixed dim) is an InvalidArgument error
// naming the value and both types. Returns the number of values typed.
absl::StatusOr<int> InferShapes(Graph& g);

// What the QDQ MatMul fusion found: fused groups by form, MatMuls left alone by reason.
struct QdqFusionReport {
  int fused = 0;
  // "a=int8 w=int8 sx=tensor sw=column zp=none out=int8 sy=tensor" -> groups of that form
  std::map<std::string, int> forms;
  // why -> count: not_qdq (a float MatMul), weight_not_constant, scale_along_k, ...
  // (output_quantize_kept counts fused groups whose QuantizeLinear stayed a separate node)
  std::map<std::string, int> refused;
};

// What the fused kernel can take, told by the caller (the graph layer knows no kernel).
struct QdqKernelLimits {
  int64_t max_k = 0;  // the longest reduction the int8 GEMM packs (PackedWeightsS8::kMaxK)
};

// Rewrites DequantizeLinear(x_q), DequantizeLinear(w_q constant) -> MatMul [-> QuantizeLinear]
// into one oneinfer.internal QdqMatMul node (see qdq_fusion.cc for what is claimed and refused).
// Traces each group's form and each refusal reason with its count (kQdq; on stderr too with
// trace, the session's SessionOptions::qdq_trace).
// Requires topological order; run RemoveDeadNodes after. Returns the number of groups fused.
int FuseQdqMatMul(Graph& g, const QdqKernelLimits& limits, QdqFusionReport* report = nullptr,
                  bool trace = false);

// The same selection without rewriting anything (oneinfer inspect, examples).
QdqFusionReport AnalyzeQdqFusion(const Graph& g, const QdqKernelLimits& limits);

// False when the environment says ONEINFER_QDQ=0 (the per-node control).
bool QdqFusionEnabledByEnv();

// Looks up the 4-bit weight for graph input `name`, declared float32 [K, N]: its q4_1 chunks as
// a uint8 tensor, or an error (missing, another chunk kind, wrong size).
using ExternalWeightLookup = std::function<absl::StatusOr<Tensor>(const std::string& name, int64_t K, int64_t N)>;

// Every MatMul whose B is a graph input becomes an internal MatMulQ4NX(A, W) node (attributes
// K, N) with W the looked-up chunks as an initializer, and the input leaves the graph's
// interface (see external_weight_binding.cc). A weight that is missing, declared with
// unknown sizes, or also read by another node is an error naming it; `source` names the file
// in errors. Returns the number of MatMuls rewritten.
absl::StatusOr<int> BindExternalQ4Weights(Graph& g, const ExternalWeightLookup& lookup, const std::string& source);

}  // namespace oneinfer
