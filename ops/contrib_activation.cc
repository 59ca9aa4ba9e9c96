// com.microsoft activations of ONNX Runtime-optimised BERT / LLM graphs:
//   Gelu(X)            = 0.5 x (1 + erf(x / sqrt 2))
//   BiasGelu(A, B)     = Gelu(A + B), B [hidden] added along the last axis
//   FastGelu(X, bias?) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), x = X (+ bias)
//   QuickGelu(X)       = x * sigmoid(alpha x), alpha default 1.702
// float16 / bfloat16 are widened to float32, computed there and rounded once.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/float_elements.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

constexpr char kMs[] = "com.microsoft";

float GeluErf(float x) { return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2))); }
float GeluTanh(float x) {
  constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(kC * (x + 0.044715f * x * x * x)));
}

// y = f(x + bias[i % hidden]) over X; bias (input bias_index) optional unless required.
template <typename F>
absl::Status BiasedActivation(OpContext& ctx, size_t bias_index, bool bias_required, F f) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat16 && x.dtype() != DType::kBFloat16)
    return InvalidArgument(ctx, "X must be float32, float16 or bfloat16, got ", DTypeName(x.dtype()));
  const bool has_bias = ctx.num_inputs() > bias_index && ctx.has_input(bias_index);
  if (bias_required && !has_bias) return InvalidArgument(ctx, "needs input ", bias_index, " (bias)");
  const Tensor* bias = has_bias ? &ctx.input(bias_index) : nullptr;
  const int64_t hidden = x.rank() > 0 ? x.dim(-1) : 1;
  if (bias != nullptr) {
    if (bias->dtype() != x.dtype()) return InvalidArgument(ctx, "bias must be ", DTypeName(x.dtype()), ", got ", DTypeName(bias->dtype()));
    if (bias->rank() != 1 || bias->dim(0) != hidden)
      return InvalidArgument(ctx, "bias ", ShapeToString(bias->shape()), " must be 1-D of X's last dimension ", hidden);
  }
  Tensor& y = ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
  ParallelFor(ctx.thread_pool(), x.num_elements(), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) SetFloatAt(y, i, f(FloatAt(x, i) + (bias ? FloatAt(*bias, i % hidden) : 0.0f)));
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterContribActivationOps(KernelRegistry& r) {
  r.AddFn(kMs, "Gelu", 1, 1, [](OpContext& ctx) { return BiasedActivation(ctx, 1, false, GeluErf); });
  r.AddFn(kMs, "BiasGelu", 1, 1, [](OpContext& ctx) { return BiasedActivation(ctx, 1, true, GeluErf); });
  r.AddFn(kMs, "FastGelu", 1, 1, [](OpContext& ctx) { return BiasedActivation(ctx, 1, false, GeluTanh); });
  r.AddFn(kMs, "QuickGelu", 1, 1, [](OpContext& ctx) {
    const float alpha = ctx.node().GetFloat("alpha", 1.702f);
    return BiasedActivation(ctx, 1, false, [alpha](float x) { return x / (1.0f + std::exp(-alpha * x)); });
  });
}

}  // namespace oneinfer
