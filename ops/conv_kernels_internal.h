// Internal interface between the Conv driver (ops/conv_kernels.cc) and its ISA tier
// (ops/conv_kernel_avx2.cc); the tier is chosen by base/kernel_tier.h's float family.
#pragma once

#include <cstdint>

#include "ops/conv_kernels.h"

namespace oneinfer::conv_internal {

// acc[i] += w * src[i * stride] for i < n: one depthwise tap over a run of outputs.
void DepthwiseTapReference(float* acc, const float* src, int64_t n, int64_t stride, float w);
void DepthwiseTapAvx2(float* acc, const float* src, int64_t n, int64_t stride, float w);

// y[i] = act(y[i] + bias), without the output affine: the reference's first step.
void ActivationReference(float* y, int64_t n, float bias, const ConvActivation& act);

// y[i] = act(y[i] + bias) * scale + shift; Sigmoid goes through the reference's expf for equal values.
void ConvEpilogueAvx2(float* y, int64_t n, float bias, const ConvActivation& act);

}  // namespace oneinfer::conv_internal
