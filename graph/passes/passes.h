// The graph passes, one file each, and the functions they are built on. The session runs them
// through the framework in pass.h, in the order SessionPasses lists (pipeline.cc):
//   external_weight_binding  graph inputs read as MatMul B -> MatMulQ4NX (when the model names a Q4NX file)
//   topological_sort         implicit inputs, validation, node order
//   qdq_fusion               DequantizeLinear x2 -> MatMul [-> QuantizeLinear] -> QdqMatMul
//   weight_dequant_fusion    constant-weight DequantizeLinear -> MatMul B -> WeightDequantMatMul
//   kv_cache_fusion          the stacked KV cache's Gather/Concat chains -> KVCacheAppend/Finish;
//                            per-layer past -> Concat -> present -> KVCacheConcat
//   dead_node_elimination    nodes and initializers nothing reads
//   constant_folding         nodes whose inputs are all constants -> initializers
//   conv_fusion              Conv -> BatchNormalization / channel affine -> activation -> scalar affine -> FusedConv
//   dead_node_elimination    again, after folding and the Conv fusion
//   shape_inference          element types and shapes of every node output
//   rms_norm_fusion          the RMSNorm chain (divide or rsqrt form, float16 casts) -> RMSNorm
//   rotary_fusion            t * cos + Concat(-t[D/2:], t[:D/2]) * sin -> RotateHalf
//   silu_fusion              Mul(x, Sigmoid(x)) [-> Mul(., m)] -> SiLU
//   transpose_matmul_fusion  Transpose(last two axes) -> MatMul -> FusedMatMul
//   attention_fusion         FusedMatMul(q, k^T) -> [Mul scale] -> [Add mask] -> Softmax -> MatMul(v) -> SoftmaxAttention
//   kv_cache_in_place        stacked KV appends whose slots only SoftmaxAttention reads may grow in place
//   matmul_group_fusion      MatMuls of one A against constant weights of one K -> MatMulGroup
// The fusions read the shared UseDefIndex (use_def.h) and write the internal ops of
// graph/internal_ops.h.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/ir.h"
#include "graph/passes/pass.h"
#include "graph/passes/use_def.h"

namespace oneinfer {

// Fills Node::implicit_inputs from each node's subgraphs, checks that every input is produced
// (by a node, a graph input, an initializer or `outer_names`), that no name is produced twice,
// and orders the nodes topologically; a cycle is an error naming a node on it.
absl::Status SortTopologically(Graph& g, const std::set<std::string>& outer_names);

// Removes nodes whose outputs reach no graph output, and initializers nothing reads.
// Returns the number of nodes removed. Requires topological order.
int RemoveDeadNodes(Graph& g);

// The last step of every fusion pass: erases the nodes marked in `drop` (the fused group's
// inner nodes), declares the internal domain the rewritten nodes belong to, and rebuilds `uses`.
void EraseFusedNodes(Graph& g, const std::vector<bool>& drop, UseDefIndex& uses);

// Replaces nodes whose inputs are all constants (UseDefIndex::Const) by initializers holding
// their outputs (shape arithmetic mostly). Skips random ops, nodes with subgraphs, quantisation
// ops (their integer weights are kept for the int8 kernels) and outputs larger than
// max_output_bytes. Returns the number of nodes folded; rebuilds `uses` when it folds any.
absl::StatusOr<int> FoldConstants(Graph& g, UseDefIndex& uses, const NodeEvaluator& evaluate, size_t max_output_bytes);

// Rewrites the stacked KV-cache pattern (see kv_cache_fusion.cc) into the internal
// KVCacheAppend / KVCacheFinish nodes so each step copies the cache once. Returns the number
// of caches rewritten. Requires topological order; the nodes are out of order after a rewrite
// (the pass sorts them again), and the Unsqueezes left dead await RemoveDeadNodes.
int FuseStackedKVCache(Graph& g, UseDefIndex& uses);

// Marks the KVCacheAppend nodes of each stacked cache `grow` (KVCacheAppend::kGrow) when every
// slot view is read by SoftmaxAttention's k or v (and the finish) alone, the sequence axis is
// the slot's second-to-last, and the present is read by no node: nothing but those kernels and
// the caller then sees a block whose rows lie at its capacity stride. Likewise each per-layer
// KVCacheConcat (KVCacheConcat::kGrow) whose present is read by SoftmaxAttention's k or v alone
// and whose past only it and Shape nodes read. Returns the caches marked.
int MarkGrowableKVCache(Graph& g, UseDefIndex& uses);

// Rewrites Concat(graph input, x, axis 2) -> graph output of rank 4 (a per-layer KV cache
// [batch, heads, positions, head size]: past -> present) into the internal KVCacheConcat, which
// reserves room to grow. Returns the number rewritten.
int FusePerLayerKVCache(Graph& g, UseDefIndex& uses);

// Rewrites square(x) -> ReduceMean(-1) -> Add(eps) -> Sqrt -> Div(x, .) or Mul(x, 1 / .) ->
// Mul(., w), float32 or between float16 casts, into one internal RMSNorm node (see
// rms_norm_fusion.cc), when eps and w are constants. Returns the number of norms rewritten.
int FuseRMSNorm(Graph& g, UseDefIndex& uses);

// MatMul(A, Transpose(B) over the last two axes) -> com.microsoft FusedMatMul(A, B, transB=1)
// for float32 operands whose Transpose has no other reader; returns the count.
int FuseTransposeIntoMatMul(Graph& g, UseDefIndex& uses);

// Add(Mul(t, cos), Mul(Concat(Neg(Slice(t, D/2, D)), Slice(t, 0, D/2)), sin)) over the last
// axis, float32 with D known, -> one internal RotateHalf node (rotary_fusion.cc); returns the count.
int FuseRotateHalf(Graph& g, UseDefIndex& uses);

// Mul(x, Sigmoid(x)), either order, and the Mul by m of x's shape that may follow it, float32
// with every intermediate read by the chain alone, -> one internal SiLU node (silu_fusion.cc);
// returns the count.
int FuseSiLU(Graph& g, UseDefIndex& uses);

// MatMuls that read one A, each against a constant 2-D float32 or float16 weight of one K and
// type, -> one internal MatMulGroup node in the first one's place (matmul_group_fusion.cc);
// returns the number of groups.
int FuseMatMulGroups(Graph& g, UseDefIndex& uses);

// FusedMatMul(q, k, transB=1) -> [Mul(scalar)] -> [Add(mask)] -> Softmax(last axis) -> MatMul(., v),
// float32 with every intermediate read by the chain alone, -> one internal SoftmaxAttention node
// (attention_fusion.cc); returns the count.
int FuseSoftmaxAttention(Graph& g, UseDefIndex& uses);

// Rewrites Conv (constant float32 W, B) and the chain reading it -- BatchNormalization, Mul/Add
// by per-channel constants, one activation (Relu, Clip, LeakyRelu, HardSigmoid, Sigmoid,
// HardSwish or its x * Clip(x + 3, 0, 6) / 6 spelling), then Mul/Add/Sub/Div by scalars -- into one
// internal FusedConv with folded W and B (see conv_fusion.cc). Returns the number of Convs fused.
int FuseConvChains(Graph& g, UseDefIndex& uses);

// Rewrites DequantizeLinear(constant int4/uint4 weight blocked along K, or int8/uint8 per
// column or per tensor) -> MatMul B (the DQ output read only as MatMul B operands) into one
// internal WeightDequantMatMul node per MatMul (see weight_dequant_fusion.cc), whose kernel
// runs the 4-bit or int8 GEMM on the integer weights. Returns the number of MatMuls rewritten;
// `refused` (may be null) gets one line per weight-only group left unfused and why.
int FuseWeightDequantMatMul(Graph& g, UseDefIndex& uses, std::vector<std::string>* refused);

// Static shape and type inference over a sorted graph: fills g.value_info for every node output
// whose element type and (possibly symbolic) shape follow from declared types, initializers and
// constant inputs; unknown ops and unknown inputs leave outputs unknown. A declared type that
// contradicts the inferred one (element type, rank or a fixed dim) is an InvalidArgument error
// naming the value and both types. Returns the number of values typed.
absl::StatusOr<int> InferShapes(Graph& g);

// One QDQ MatMul group the selector claims (node indices into the graph it read).
struct QdqGroup {
  size_t matmul = 0;
  size_t dq_x = 0, dq_w = 0;
  long quantize = -1;  // the folded output QuantizeLinear, or -1 (the fused node outputs float32)
  long dequantize = -1;  // the DequantizeLinear folded after it (same parameters), or -1
  DType out = DType::kFloat32;
  int64_t y_axis = 0;  // y_scale per tensor (0), row (1) or column (2)
  std::string trace;   // the qdq_group trace line
};

// The QDQ selector's answer: the groups to fuse, in node order, and the report (forms, refusals).
struct QdqSelection {
  std::vector<QdqGroup> groups;
  QdqFusionReport report;
};

// The read-only QDQ MatMul selector (see qdq_fusion.cc for what is claimed and refused), given
// what the fused kernel can take. Requires topological order.
QdqSelection SelectQdqGroups(const UseDefIndex& uses, const QdqKernelLimits& limits);

// The action: each selected MatMul becomes a QdqMatMul node in place (so the order stays
// topological) and each folded QuantizeLinear goes; the DequantizeLinear nodes left without
// readers await RemoveDeadNodes. `selection` must come from SelectQdqGroups on g as `uses`
// describes it. Returns the number of groups fused.
int RewriteQdqGroups(Graph& g, UseDefIndex& uses, const QdqSelection& selection);

// The selection alone on a graph (oneinfer inspect, examples, tests).
QdqFusionReport AnalyzeQdqFusion(const Graph& g, const QdqKernelLimits& limits);

// Every MatMul whose B is a graph input becomes an internal MatMulQ4NX(A, W) node (attributes
// K, N) with W the looked-up chunks as an initializer, and the input leaves the graph's
// interface (see external_weight_binding.cc). A weight that is missing, declared with
// unknown sizes, or also read by another node is an error naming it; `source` names the file
// in errors. Returns the number of MatMuls rewritten; rebuilds `uses` when it rewrites any.
absl::StatusOr<int> BindExternalQ4Weights(Graph& g, UseDefIndex& uses, const ExternalWeightLookup& lookup,
                                          const std::string& source);

// The passes over the functions above, each in its function's file (SessionPasses lists them).
std::unique_ptr<GraphPass> MakeExternalWeightBindingPass();  // ctx.external_weights
std::unique_ptr<GraphPass> MakeTopologicalSortPass();
std::unique_ptr<GraphPass> MakeQdqFusionPass();            // ctx.qdq_fusion, qdq_limits, qdq_trace; report->qdq
std::unique_ptr<GraphPass> MakeRMSNormFusionPass();
std::unique_ptr<GraphPass> MakeConvFusionPass();
std::unique_ptr<GraphPass> MakeWeightDequantFusionPass();  // ctx.weight_fusion; refusals at LogLevel::kInfo
std::unique_ptr<GraphPass> MakeKVCacheFusionPass();
std::unique_ptr<GraphPass> MakeKVCacheInPlacePass();  // after attention_fusion: reads its SoftmaxAttention
std::unique_ptr<GraphPass> MakeDeadNodeEliminationPass();
std::unique_ptr<GraphPass> MakeConstantFoldingPass();      // ctx.constant_folding, evaluate, max_folded_bytes
std::unique_ptr<GraphPass> MakeShapeInferencePass();
std::unique_ptr<GraphPass> MakeTransposeMatMulFusionPass();  // after shape inference: needs float32 types
std::unique_ptr<GraphPass> MakeSoftmaxAttentionFusionPass();  // after transpose_matmul_fusion: reads its FusedMatMul
std::unique_ptr<GraphPass> MakeRotaryFusionPass();  // after shape inference: needs D and float32
std::unique_ptr<GraphPass> MakeSiLUFusionPass();    // after shape inference: float32 and m's shape
std::unique_ptr<GraphPass> MakeMatMulGroupFusionPass();  // after the fusions that read MatMuls

}  // namespace oneinfer
