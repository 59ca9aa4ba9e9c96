// Float32 2-D convolution fast paths (1-D runs as H = 1): im2col tiles through the packed float
// GEMM, the input itself as the column matrix for pointwise (1x1, stride 1, no padding) convs, a
// direct depthwise kernel, and bias plus an activation applied as the epilogue while a tile is
// still in cache. ops/nn.cc's Conv and the fused internal Conv (graph/passes/conv_fusion.cc) call
// it; the plain reference (ConvFloat2DReference) is what tests and bench_conv hold it against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/gemm/sgemm.h"

namespace oneinfer {

class ThreadPool;

// The activation a Conv's epilogue applies (after the bias), with the unfused op's parameters.
struct ConvActivation {
  enum class Kind { kNone, kRelu, kClip, kLeakyRelu, kHardSigmoid, kSigmoid, kHardSwish };
  Kind kind = Kind::kNone;
  float alpha = 0.f;  // Clip: min; LeakyRelu, HardSigmoid: alpha
  float beta = 0.f;   // Clip: max; HardSigmoid: beta
  float scale = 1.f, shift = 0.f;  // then y = act * scale + shift (affine nodes fused after it)
  bool has_affine() const { return scale != 1.f || shift != 0.f; }
};

// From the fused node's attributes: the ONNX op name ("" = none) and its parameters (Clip: min,
// max; LeakyRelu: alpha; HardSigmoid: alpha, beta; others none). An unknown name or a wrong count
// is an error. output_affine: empty, or [scale, shift].
absl::StatusOr<ConvActivation> ParseConvActivation(const std::string& op, const std::vector<float>& params,
                                                   const std::vector<float>& output_affine);

// y[i] = act(y[i] + bias) for n elements.
void ApplyConvEpilogue(float* y, int64_t n, float bias, const ConvActivation& act);
// The plain loop the tiers are checked against.
void ApplyConvEpilogueReference(float* y, int64_t n, float bias, const ConvActivation& act);

// Resolved geometry of one NCHW convolution (pads already resolved from auto_pad).
struct Conv2DParams {
  int64_t N = 1, C = 1, H = 1, W = 1;  // input
  int64_t M = 1, G = 1;                // output channels, groups
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, DH = 1, DW = 1;
  int64_t PT = 0, PL = 0;  // begin pads (the end pads only bound OH, OW)
  int64_t OH = 1, OW = 1;
};

// Constant weights packed once (at load) for convolutions with few outputs per channel
// (P = OH*OW <= kConvSmallOutputs): there the product runs transposed, Y^T [P x Mg] =
// col^T [P x K] * W_g^T [K x Mg], so the long dimension is the weights' and the GEMM streams
// them from this packing instead of repacking a P-wide column block per call (bench_conv, one
// thread: 3x3 128 -> 128 at 4x4 27 -> 64 GFLOP/s; 1x1 256 -> 128 at 8x8 108 -> 55, so P <= 24).
inline constexpr int64_t kConvSmallOutputs = 24;
struct ConvPackedWeights {
  std::vector<PackedMatrixB> groups;  // W_g^T [Cg*KH*KW x M/G] per group
};
// w [M, C/G, KH, KW] with `groups` groups.
ConvPackedWeights PackConvWeights(int64_t M, int64_t groups, int64_t K_per_group, const float* w,
                                  ThreadPool* pool = nullptr);

// y [N, M, OH, OW] = act(conv(x [N, C, H, W], w [M, C/G, KH, KW]) + bias [M] (may be null)).
// packed (may be null): w's packing, which the small-output path takes when present.
void ConvFloat2D(const Conv2DParams& p, const float* x, const float* w, const float* bias,
                 const ConvActivation& act, float* y, ThreadPool* pool,
                 const ConvPackedWeights* packed = nullptr);

// The same by the definition, one output at a time with double accumulation (tests, benches).
void ConvFloat2DReference(const Conv2DParams& p, const float* x, const float* w, const float* bias,
                          const ConvActivation& act, float* y);

// Which path ConvFloat2D takes for p: "depthwise", "small-output" (with packed weights),
// "pointwise" or "im2col" (tests, benches).
const char* ConvFloat2DPath(const Conv2DParams& p, bool packed = false);

}  // namespace oneinfer
