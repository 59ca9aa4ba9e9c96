// The normalisations of ONNX Runtime's LLM and BERT graphs:
//   SimplifiedLayerNormalization (ai.onnx domain, since 1, as ONNX Runtime registers it):
//     Y = X / sqrt(mean(X^2 over axes axis..) + epsilon) * scale, inv_std_var = that 1 / sqrt(...)
//   RMSNormalization (ai.onnx 23): the same Y, the scale unidirectionally broadcast against X.
//   SkipSimplifiedLayerNormalization, SkipLayerNormalization (com.microsoft 1):
//     s = input + skip (+ bias); output = s * inv_std * gamma (RMS form) or
//     (s - mean) * inv_std * gamma (+ beta); outputs mean (0 in the RMS form), inv_std_var
//     (float32, [..., 1]) and
//     input_skip_bias_sum (s in the input's type).
// float16 / bfloat16 are widened to float32, computed there and rounded once at the end (as ONNX
// Runtime's CPU kernels do); statistics accumulate in double. Rows run in parallel.
#include <cmath>
#include <string>
#include <vector>

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

bool IsNormType(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

// One row of `h` values already summed in float: statistics, then the normalised row.
struct RowStats {
  double mean = 0, inv_std = 0;
};
RowStats Stats(const float* s, int64_t h, bool simplified, float epsilon) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < h; ++i) sum += s[i];
  const double mean = sum / static_cast<double>(h);
  for (int64_t i = 0; i < h; ++i) {
    const double d = simplified ? s[i] : s[i] - mean;
    sq += d * d;
  }
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(h) + epsilon)};
}

// --- SimplifiedLayerNormalization, RMSNormalization ----------------------------------------

// The offsets of the scale's element for each of `n` positions of `shape` dims [from, to),
// under unidirectional broadcasting of the scale (right-aligned) against X.
std::vector<int64_t> ScaleOffsets(const Shape& x, const std::vector<int64_t>& strides, size_t from, size_t to) {
  std::vector<int64_t> off(1, 0);
  for (size_t d = from; d < to; ++d) {
    std::vector<int64_t> next;
    next.reserve(off.size() * static_cast<size_t>(x[d]));
    for (int64_t o : off) {
      for (int64_t i = 0; i < x[d]; ++i) next.push_back(o + i * strides[d]);
    }
    off.swap(next);
  }
  return off;
}

// Y = X / sqrt(mean(X^2 over axes axis..) + epsilon) * scale, in float32, rounded once to the
// scale's type. ONNX Runtime's SimplifiedLayerNormalization (onnx_form false) takes a scale of
// exactly the normalised size and may give inv_std_var; ONNX's RMSNormalization-23 (onnx_form)
// takes any scale unidirectionally broadcastable to X and gives Y only.
absl::Status RmsNorm(OpContext& ctx, bool onnx_form) {
  const Tensor& x = ctx.input(0);
  if (!ctx.has_input(1)) return InvalidArgument(ctx, "needs input scale");
  const Tensor& scale = ctx.input(1);
  if (!IsNormType(x.dtype()) || !IsNormType(scale.dtype()))
    return InvalidArgument(ctx, "X and scale must be float32, float16 or bfloat16, got ", DTypeName(x.dtype()), " and ",
                           DTypeName(scale.dtype()));
  const Node& n = ctx.node();
  if (n.GetInt("stash_type", 1) != 1) return InvalidArgument(ctx, "stash_type ", n.GetInt("stash_type", 1), " is not supported (1: float)");
  auto axis = NormalizeAxis(n.GetInt("axis", -1), x.rank());
  if (!axis.ok() || x.rank() == 0) return InvalidArgument(ctx, "axis ", n.GetInt("axis", -1), " is out of range for ", ShapeToString(x.shape()));
  const float epsilon = n.GetFloat("epsilon", 1e-5f);
  const size_t ax = static_cast<size_t>(*axis), rank = x.shape().size();
  const int64_t h = Prod(x.shape(), ax, rank);
  const int64_t rows = Prod(x.shape(), 0, ax);
  std::vector<int64_t> row_off, in_off;
  if (onnx_form) {
    // Unidirectional: every scale dimension (right-aligned) is 1 or X's.
    bool fits = scale.rank() <= x.rank();
    for (int64_t i = 1; fits && i <= scale.rank(); ++i) fits = scale.dim(-i) == 1 || scale.dim(-i) == x.dim(-i);
    if (!fits)
      return InvalidArgument(ctx, "scale ", ShapeToString(scale.shape()), " does not broadcast to X ", ShapeToString(x.shape()));
    const std::vector<int64_t> st = BroadcastStrides(scale.shape(), x.shape());
    row_off = ScaleOffsets(x.shape(), st, 0, ax);
    in_off = ScaleOffsets(x.shape(), st, ax, rank);
  } else {
    if (scale.num_elements() != h)
      return InvalidArgument(ctx, "scale ", ShapeToString(scale.shape()), " does not match the normalised dimensions of X ",
                             ShapeToString(x.shape()), " from axis ", *axis);
    row_off.assign(static_cast<size_t>(rows), 0);
    in_off.resize(static_cast<size_t>(h));
    for (int64_t i = 0; i < h; ++i) in_off[i] = i;
  }
  // ONNX Runtime types Y as the scale (V), which differs from X in mixed graphs; so does ONNX.
  Tensor& y = ctx.AllocateOutputUninitialized(0, scale.dtype(), x.shape());
  Tensor* inv = nullptr;
  if (!onnx_form && ctx.num_outputs() > 1 && ctx.has_output(1)) {
    Shape s = x.shape();
    for (size_t i = ax; i < s.size(); ++i) s[i] = 1;
    inv = &ctx.AllocateOutputUninitialized(1, DType::kFloat32, s);
  }
  if (h == 0 || rows == 0) return absl::OkStatus();
  std::vector<float> g(static_cast<size_t>(scale.num_elements()));
  for (int64_t i = 0; i < scale.num_elements(); ++i) g[i] = FloatAt(scale, i);
  ParallelFor(ctx.thread_pool(), rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(h));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t i = 0; i < h; ++i) row[i] = FloatAt(x, r * h + i);
      const RowStats st = Stats(row.data(), h, /*simplified=*/true, epsilon);
      const float is = static_cast<float>(st.inv_std);
      const float* gr = g.data() + row_off[r];
      for (int64_t i = 0; i < h; ++i) SetFloatAt(y, r * h + i, row[i] * is * gr[in_off[i]]);
      if (inv) inv->data<float>()[r] = is;
    }
  });
  return absl::OkStatus();
}

absl::Status SimplifiedLayerNorm(OpContext& ctx) { return RmsNorm(ctx, /*onnx_form=*/false); }
absl::Status RmsNormalization(OpContext& ctx) { return RmsNorm(ctx, /*onnx_form=*/true); }

// --- SkipLayerNormalization / SkipSimplifiedLayerNormalization ------------------------------

template <bool kSimplified>
absl::Status SkipNorm(OpContext& ctx) {
  // Inputs: input, skip, gamma, then beta and bias (SkipLayerNormalization) or bias (simplified).
  const size_t bias_index = kSimplified ? 3 : 4;
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) return InvalidArgument(ctx, "needs input, skip and gamma");
  const Tensor& x = ctx.input(0);
  const Tensor& skip = ctx.input(1);
  const Tensor& gamma = ctx.input(2);
  const Tensor* beta = !kSimplified && ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* bias = ctx.num_inputs() > bias_index && ctx.has_input(bias_index) ? &ctx.input(bias_index) : nullptr;
  if (!IsNormType(x.dtype())) return InvalidArgument(ctx, "input must be float32, float16 or bfloat16, got ", DTypeName(x.dtype()));
  if (x.rank() != 2 && x.rank() != 3) return InvalidArgument(ctx, "input must be 2-D or 3-D, got ", ShapeToString(x.shape()));
  const int64_t h = x.dim(-1), rows = x.num_elements() / std::max<int64_t>(h, 1);
  // skip: the input's shape, or its last two dimensions (one sequence shared by the batch).
  const bool skip_full = skip.shape() == x.shape();
  const bool skip_shared = x.rank() == 3 && skip.num_elements() == x.dim(1) * h && skip.dim(-1) == h &&
                           (skip.rank() == 2 || (skip.rank() == 3 && skip.dim(0) == 1));
  if (!skip_full && !skip_shared)
    return InvalidArgument(ctx, "skip ", ShapeToString(skip.shape()), " does not fit input ", ShapeToString(x.shape()));
  for (const Tensor* t : {&skip, &gamma, beta, bias}) {
    if (t == nullptr) continue;
    if (t->dtype() != x.dtype()) return InvalidArgument(ctx, "every input must be ", DTypeName(x.dtype()), ", got ", DTypeName(t->dtype()));
  }
  for (const Tensor* t : {&gamma, beta, bias}) {
    if (t != nullptr && t->num_elements() != h)
      return InvalidArgument(ctx, "gamma, beta and bias must have hidden_size = ", h, " elements, got ", ShapeToString(t->shape()));
  }
  const float epsilon = ctx.node().GetFloat("epsilon", 1e-12f);
  Tensor& y = ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
  Shape stat_shape = x.shape();
  stat_shape.back() = 1;
  auto optional_out = [&](size_t i, DType t, const Shape& s) -> Tensor* {
    return ctx.num_outputs() > i && ctx.has_output(i) ? &ctx.AllocateOutputUninitialized(i, t, s) : nullptr;
  };
  Tensor* mean_out = optional_out(1, DType::kFloat32, stat_shape);
  Tensor* inv_out = optional_out(2, DType::kFloat32, stat_shape);
  Tensor* sum_out = optional_out(3, x.dtype(), x.shape());
  if (h == 0) return absl::OkStatus();
  const int64_t skip_rows = skip.num_elements() / h;
  std::vector<float> g(h), b(h, 0.f), bi(h, 0.f);
  for (int64_t i = 0; i < h; ++i) {
    g[i] = FloatAt(gamma, i);
    if (beta) b[i] = FloatAt(*beta, i);
    if (bias) bi[i] = FloatAt(*bias, i);
  }
  ParallelFor(ctx.thread_pool(), rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> s(static_cast<size_t>(h));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t sr = r % skip_rows;
      for (int64_t i = 0; i < h; ++i) s[i] = FloatAt(x, r * h + i) + FloatAt(skip, sr * h + i) + bi[i];
      const RowStats st = Stats(s.data(), h, kSimplified, epsilon);
      const float mean = static_cast<float>(st.mean), is = static_cast<float>(st.inv_std);
      for (int64_t i = 0; i < h; ++i) {
        const float v = kSimplified ? s[i] * is * g[i] : (s[i] - mean) * is * g[i] + b[i];
        SetFloatAt(y, r * h + i, v);
        if (sum_out) SetFloatAt(*sum_out, r * h + i, s[i]);
      }
      if (mean_out) mean_out->data<float>()[r] = kSimplified ? 0.f : mean;  // the RMS form has none: 0, as ONNX Runtime writes
      if (inv_out) inv_out->data<float>()[r] = is;
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterContribNormOps(KernelRegistry& r) {
  AddVersions(r, "SimplifiedLayerNormalization", {1}, SimplifiedLayerNorm);
  // ONNX's standard form of the same normalisation (opset 23).
  AddVersions(r, "RMSNormalization", {23}, RmsNormalization);
  r.AddFn(kMs, "SkipSimplifiedLayerNormalization", 1, 1, SkipNorm<true>);
  r.AddFn(kMs, "SkipLayerNormalization", 1, 1, SkipNorm<false>);
}

}  // namespace oneinfer
