// The engine's internal operators: nodes that graph passes write and ops/ kernels run, never
// read from a model file. Their domain, names, input slots and attributes are declared here
// once, for the passes that write them and the kernels that read them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oneinfer::internal_ops {

inline constexpr char kDomain[] = "oneinfer.internal";
inline constexpr int64_t kOpset = 1;  // every internal op has one version

// QdqMatMul (graph/passes/qdq_fusion.cc -> ops/qdq_matmul.cc): an A8W8 QDQ MatMul group, inputs
// in QLinearMatMul's order; "" marks an absent zero point, and y_scale/y_zero_point are present
// only when the output QuantizeLinear was folded (and with it, for the "*_as_float32" outputs, the
// DequantizeLinear that was its only reader).
struct QdqMatMul {
  static constexpr char kName[] = "QdqMatMul";
  enum Input : size_t { kX = 0, kXScale, kXZeroPoint, kW, kWScale, kWZeroPoint, kYScale, kYZeroPoint };
  static constexpr char kOut[] = "out";  // string: "float32", "int8", "uint8", "int8_as_float32", "uint8_as_float32"
  static constexpr char kYAxis[] = "y_axis";  // int: y_scale per tensor (0), row (1) or column (2)
};

// WeightDequantMatMul (weight_dequant_fusion.cc -> ops/weight_dequant.cc): A (float) times the
// dequantised constant integer weight W [K, N], its scale and optional zero point.
struct WeightDequantMatMul {
  static constexpr char kName[] = "WeightDequantMatMul";
  enum Input : size_t { kA = 0, kW, kScale, kZeroPoint };
  static constexpr char kAxis[] = "axis";              // int: the scale's axis, normalised (0 or 1)
  static constexpr char kBlockSize[] = "block_size";  // int: blocks along K (4-bit), else 0
};

// MatMulGroup (matmul_group_fusion.cc -> ops/matmul.cc): MatMuls that read one A, each with a
// constant [K, N_i] weight of one K and type (a layer's q, k and v projections, an MLP's gate and
// up): MatMulGroup(A, W_1, ..., W_n) -> Y_1, ..., Y_n, Y_i = A x W_i as its MatMul computes it.
struct MatMulGroup {
  static constexpr char kName[] = "MatMulGroup";
  enum Input : size_t { kA = 0, kFirstWeight };
};

// MatMulQ4NX (external_weight_binding.cc -> ops/matmul_q4nx.cc): A times a weight bound from a
// Q4NX file, W its q4_1 chunks as a uint8 initializer.
struct MatMulQ4NX {
  static constexpr char kName[] = "MatMulQ4NX";
  enum Input : size_t { kA = 0, kW };
  static constexpr char kK[] = "K";  // int: the weight's rows (reduction length)
  static constexpr char kN[] = "N";  // int: the weight's columns (outputs)
};

// RMSNorm (rms_norm_fusion.cc -> ops/fused.cc): x / sqrt(mean(x^2 over the last axis) + epsilon) * w
// in float32, or x * (1 / sqrt(...)) * w (reciprocal: torch's rsqrt export). x and w float16:
// x widened, the normalised value rounded to float16, times w rounded again (the exporter's
// Cast to float32, norm, Cast back, float16 Mul).
struct RMSNorm {
  static constexpr char kName[] = "RMSNorm";
  enum Input : size_t { kX = 0, kWeight };
  static constexpr char kEpsilon[] = "epsilon";        // float
  static constexpr char kReciprocal[] = "reciprocal";  // int: 1 multiplies by 1 / den
  static constexpr float kDefaultEpsilon = 1e-6f;
};

// SiLU (silu_fusion.cc -> ops/fused.cc): x * sigmoid(x), times m when given (a gated MLP's
// silu(gate) * up), float32 with m of x's shape. The sigmoid is SigmoidF32's (ops/op_util.h,
// the Sigmoid op's), each product rounded as the unfused Mul rounds it.
struct SiLU {
  static constexpr char kName[] = "SiLU";
  enum Input : size_t { kX = 0, kMul };
};

// KVCacheAppend (kv_cache_fusion.cc -> ops/fused.cc): KVCacheAppend(past, new, buffer?) ->
// (slot view, buffer?): slot `slot` of the stacked present buffer = past's slot then new along
// `axis`; the first append (slot 0) allocates the buffer and outputs it, the others take it.
// With `grow` (kv_cache_fusion.cc's MarkGrowableKVCache: every slot view is read by
// SoftmaxAttention alone, the buffer by nothing but the graph's output) and a run that asks for
// it (RunOptions::grow_kv_in_place), the buffer is a block with room for more positions: each
// slot's rows at the block's capacity stride, and a donated past that is such a block with room
// takes the new rows in place.
struct KVCacheAppend {
  static constexpr char kName[] = "KVCacheAppend";
  enum Input : size_t { kPast = 0, kNew, kBuffer };
  enum Output : size_t { kSlotView = 0, kBufferOut };
  static constexpr char kSlot[] = "slot";  // int
  static constexpr char kAxis[] = "axis";  // int: the sequence axis of one slot's dims
  static constexpr char kGrow[] = "grow";  // int: 1 may keep the buffer as a growing block
};

// A growing KV cache's block has room for up to this many more positions: the cache grows by one
// position per step, and a block of the same size class comes back from the allocator's pool
// instead of as freshly faulted pages.
inline constexpr int64_t kKVCacheCapacityStep = 128;
// The positions a block for `positions` has room for: rounded up to the step.
inline constexpr int64_t KVCacheCapacity(int64_t positions) {
  return (positions + kKVCacheCapacityStep - 1) / kKVCacheCapacityStep * kKVCacheCapacityStep;
}

// KVCacheConcat (kv_cache_fusion.cc -> ops/slice_concat.cc): Concat(past, new) along `axis`, where
// past is a graph input and the result a graph output (a per-layer present cache, as the optimum
// layout writes it), into a block with room for kKVCacheCapacityStep more positions.
struct KVCacheConcat {
  static constexpr char kName[] = "KVCacheConcat";
  enum Input : size_t { kPast = 0, kNew };
  static constexpr char kAxis[] = "axis";  // int, normalised to [0, rank)
  static constexpr char kGrow[] = "grow";  // int: 1 may keep the present as a growing block (ops/kv_block.h)
};

// KVCacheFinish (kv_cache_fusion.cc -> ops/fused.cc): KVCacheFinish(buffer, slot views...) ->
// buffer, once every append has written its slot (the views are read only for ordering).
struct KVCacheFinish {
  static constexpr char kName[] = "KVCacheFinish";
  enum Input : size_t { kBuffer = 0 };
};

// SoftmaxAttention (attention_fusion.cc -> ops/fused.cc): attention as graphs spell it,
//   Softmax(last axis)(Add(Mul(FusedMatMul(q, k, transB = 1, alpha), scale), mask)) -> MatMul(., v)
// with the Mul and the Add optional: per batch matrix, the scores are q k^T (alpha) times scale,
// plus mask, each row's softmax, times v. Batch axes broadcast as MatMul's do; mask broadcasts to
// the scores. The same roundings as the unfused chain, one node instead of five per layer.
// k and v may be slot views of a growing KV cache (KVCacheAppend `grow`): rows at its stride.
struct SoftmaxAttention {
  static constexpr char kName[] = "SoftmaxAttention";
  enum Input : size_t { kQ = 0, kK, kV, kMask };
  static constexpr char kAlpha[] = "alpha";  // float: FusedMatMul's alpha (default 1)
  static constexpr char kScale[] = "scale";  // float: the Mul's scalar, applied after the product (default: none)
  // int: k and v hold a head for every kv_repeat heads of q (grouped-query attention): their
  // last batch axis is read as if each head were repeated kv_repeat times in a row, as the graph's
  // Unsqueeze -> Expand -> Reshape (repeat_kv) wrote it before the fusion dropped the copy (default 1).
  static constexpr char kKVRepeat[] = "kv_repeat";
};

// RotateHalf (rotary_fusion.cc -> ops/fused.cc): y = t * cos + rotate_half(t) * sin, where
// rotate_half(t) = concat(-t[..., D/2:], t[..., :D/2]) along the last axis; cos and sin broadcast
// to t. Each product rounded, then the sum: the unfused chain's arithmetic.
struct RotateHalf {
  static constexpr char kName[] = "RotateHalf";
  enum Input : size_t { kT = 0, kCos, kSin };
};

// FusedConv (conv_fusion.cc -> ops/nn.cc): Conv (ONNX's inputs and attributes: auto_pad,
// dilations, group, kernel_shape, pads, strides) with a BatchNormalization folded into W and B and
// the activation that read it applied as the epilogue.
struct FusedConv {
  static constexpr char kName[] = "FusedConv";
  enum Input : size_t { kX = 0, kW, kB };
  static constexpr char kActivation[] = "activation";  // string: the ONNX op ("" = none)
  // floats: Clip min, max; LeakyRelu alpha; HardSigmoid alpha, beta; none for the others
  static constexpr char kActivationParams[] = "activation_params";
  // floats [scale, shift], optional: y = activation(conv) * scale + shift
  static constexpr char kOutputAffine[] = "output_affine";
};

}  // namespace oneinfer::internal_ops
