// One registration function per op family file in ops/; KernelRegistry::Global() calls each.
#pragma once

namespace oneinfer {

class KernelRegistry;

void RegisterElementwiseOps(KernelRegistry& r);   // ops/elementwise.cc
void RegisterReductionOps(KernelRegistry& r);     // ops/reduction.cc
void RegisterTensorOps(KernelRegistry& r);        // ops/tensor.cc (shape and data movement)
void RegisterMatMulOps(KernelRegistry& r);        // ops/matmul.cc (MatMul, Gemm, Einsum)
void RegisterNNOps(KernelRegistry& r);            // ops/nn.cc (conv, pool, normalisation)
void RegisterQuantizeOps(KernelRegistry& r);      // ops/quantize.cc
void RegisterRecurrentOps(KernelRegistry& r);     // ops/recurrent.cc
void RegisterControlFlowOps(KernelRegistry& r);   // ops/control_flow.cc (If, Loop, Scan)
void RegisterSequenceOps(KernelRegistry& r);      // ops/sequence.cc (sequence and optional)
void RegisterImageOps(KernelRegistry& r);         // ops/image.cc (Resize, RoiAlign, NMS, GridSample)
void RegisterSignalOps(KernelRegistry& r);        // ops/signal.cc (DFT, STFT, windows)
void RegisterRandomOps(KernelRegistry& r);        // ops/random.cc
void RegisterStringOps(KernelRegistry& r);        // ops/string.cc
void RegisterTrainingOps(KernelRegistry& r);      // ops/training.cc (optimizers, losses)
void RegisterFusedOps(KernelRegistry& r);         // ops/fused.cc (engine-internal fused nodes)
void RegisterQdqMatMulOps(KernelRegistry& r);     // ops/qdq_matmul.cc (fused QDQ MatMul)
void RegisterWeightDequantOps(KernelRegistry& r);  // ops/weight_dequant.cc (int4/int8 weight MatMul)
void RegisterQ4NXOps(KernelRegistry& r);          // ops/matmul_q4nx.cc (MatMul on Q4NX weights)

}  // namespace oneinfer
