// One registration function per op family file in ops/; KernelRegistry::Global() calls each
// (an explicit list, so the static library needs no whole-archive linking).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "ops/kernel.h"

namespace oneinfer {

// The newest ai.onnx opset whose schemas the kernels follow; a kernel's last range ends here.
constexpr int64_t kNewestOpset = 23;

// Registers an ai.onnx kernel once per schema version: since[i] .. since[i+1] - 1, the last
// through kNewestOpset.
void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since,
                 const KernelFactory& factory, bool non_tensors = false);
void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since, KernelFn fn);

void RegisterUnaryOps(KernelRegistry& r);          // ops/unary.cc (math, activations, Clip)
void RegisterBinaryOps(KernelRegistry& r);         // ops/binary.cc (arithmetic, PRelu, Sum/Mean/Max/Min)
void RegisterLogicOps(KernelRegistry& r);          // ops/logic.cc (comparisons, logic, Where)
void RegisterCastOps(KernelRegistry& r);           // ops/cast.cc (Cast, CastLike)
void RegisterReductionOps(KernelRegistry& r);      // ops/reduction.cc
void RegisterShapeOps(KernelRegistry& r);          // ops/shape.cc (Shape, Reshape, Transpose, ...)
void RegisterSliceConcatOps(KernelRegistry& r);    // ops/slice_concat.cc (Concat, Split, Slice, Pad, Tile)
void RegisterGatherScatterOps(KernelRegistry& r);  // ops/gather_scatter.cc
void RegisterGeneratorOps(KernelRegistry& r);      // ops/generators.cc (Range, ConstantOfShape, OneHot, ...)
void RegisterSelectionOps(KernelRegistry& r);      // ops/selection.cc (NonZero, Compress, Unique, ...)
void RegisterMatMulOps(KernelRegistry& r);         // ops/matmul.cc (MatMul, Gemm, Einsum)
void RegisterNNOps(KernelRegistry& r);             // ops/nn.cc (conv, pool)
void RegisterNNNormOps(KernelRegistry& r);         // ops/nn_norm.cc (normalisation)
void RegisterQuantizeOps(KernelRegistry& r);       // ops/quantize.cc
void RegisterRecurrentOps(KernelRegistry& r);      // ops/recurrent.cc
void RegisterControlFlowOps(KernelRegistry& r);    // ops/control_flow.cc (If, Loop, Scan)
void RegisterSequenceOps(KernelRegistry& r);       // ops/sequence.cc (sequence and optional)
void RegisterImageOps(KernelRegistry& r);          // ops/image.cc (Resize, RoiAlign, NMS, GridSample)
void RegisterSignalOps(KernelRegistry& r);         // ops/signal.cc (DFT, STFT, windows)
void RegisterRandomOps(KernelRegistry& r);         // ops/random.cc
void RegisterStringOps(KernelRegistry& r);         // ops/string.cc
void RegisterTrainingOps(KernelRegistry& r);       // ops/training.cc (optimizers, losses)
void RegisterFusedOps(KernelRegistry& r);          // ops/fused.cc (engine-internal fused nodes)
void RegisterQdqMatMulOps(KernelRegistry& r);      // ops/qdq_matmul.cc (fused QDQ MatMul)
void RegisterWeightDequantOps(KernelRegistry& r);  // ops/weight_dequant.cc (int4/int8 weight MatMul)
void RegisterQ4NXOps(KernelRegistry& r);           // ops/matmul_q4nx.cc (MatMul on Q4NX weights)
void RegisterContribMatMulNBitsOps(KernelRegistry& r);  // ops/contrib_matmul_nbits.cc (com.microsoft MatMulNBits)
void RegisterContribNormOps(KernelRegistry& r);    // ops/contrib_norm.cc (Simplified/Skip LayerNormalization)
void RegisterContribActivationOps(KernelRegistry& r);   // ops/contrib_activation.cc (Gelu, BiasGelu, FastGelu, QuickGelu)
void RegisterContribFusedMatMulOps(KernelRegistry& r);  // ops/contrib_fused_matmul.cc (FusedMatMul)
void RegisterContribAttentionOps(KernelRegistry& r);    // ops/contrib_attention.cc (GroupQueryAttention, RotaryEmbedding)
void RegisterOnnxAttentionOps(KernelRegistry& r);       // ops/onnx_attention.cc (ai.onnx Attention, RotaryEmbedding: opset 23)

}  // namespace oneinfer
