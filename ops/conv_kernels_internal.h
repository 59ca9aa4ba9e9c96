// Internal interface between the Conv driver (ops/conv_kernels.cc) and its ISA tier
// (ops/conv_kernel_avx2.cc); the tier is chosen by base/kernel_tier.h's float family.
#pragma once

#include <cstdint>

#include "ops/conv_kernels.h"

namespace oneinfer::conv_internal {

// acc[i] += w * src[i * stride] for i < n: one depthwise tap over a run of outputs.
void DepthwiseTapReference(float* acc, const float* src, int64_t n, int64_t stride, float w);

// Floats of scratch DepthwisePlaneAvx2 needs: the zero-padded input plane plus a row of slack.
int64_t DepthwiseScratchFloats(const Conv2DParams& p);
// One depthwise output plane y [OH x OW] (no bias, no activation) of one input plane x [H x W]
// and its KH x KW filter w: the plane is copied once into scratch with its padding, then each
// run of 8 outputs takes every tap from there in registers. Strides 1 and 2 (others: false).
bool DepthwisePlaneAvx2(const Conv2DParams& p, const float* x, const float* w, float* y, float* scratch);

// y[i] = act(y[i] + bias), without the output affine: the reference's first step.
void ActivationReference(float* y, int64_t n, float bias, const ConvActivation& act);

// y[i] = act(y[i] + bias) * scale + shift; Sigmoid goes through the reference's expf for equal values.
void ConvEpilogueAvx2(float* y, int64_t n, float bias, const ConvActivation& act);

}  // namespace oneinfer::conv_internal
