// Kernels on the fused QDQ GEMM (quant/qdq_gemm.h): the internal QdqMatMul node that
// the qdq_fusion pass writes, and the constant-weight bindings of QLinearMatMul and MatMulInteger.
#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace oneinfer {

class KernelInit;
class KernelRegistry;
class OpKernel;

// Registers oneinfer.internal QdqMatMul.
void RegisterQdqMatMulOps(KernelRegistry& r);

// QLinearMatMul whose B, scales and zero points are constants that the fused kernel takes
// (B 2-D int8/uint8 with K <= 33025 so no int32 sum can wrap, float32 scales, per-tensor or
// per-row / per-column vectors of matching types and lengths). nullptr when the node does not
// fit: the caller then binds the reference kernel, which also reports any malformed input.
std::unique_ptr<OpKernel> MakeFusedQLinearMatMul(const KernelInit& init);
// MatMulInteger with a constant 2-D B (and constant or absent b_zero_point); a_zero_point may be
// a run-time input (DynamicQuantizeLinear's). nullptr when it does not fit.
std::unique_ptr<OpKernel> MakeFusedMatMulInteger(const KernelInit& init);

}  // namespace oneinfer
