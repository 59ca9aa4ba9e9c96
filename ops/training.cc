// Losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and the
// ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <typename T>
T FromDouble(double v) {
  return static_cast<T>(static_cast<float>(v));
}
template <> double FromDouble<double>(double v) { return v; }

template <typename MakeFn>
KernelFactory Factory(MakeFn make) {
  return [make](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::StatusOr<KernelFn> fn = make(init);
    if (!fn.ok()) return fn.status();
    return MakeFnKernel(*std::move(fn))(init);
  };
}

// ---------------------------------------------------------------------------------------
// Losses

enum class Reduction { kNone, kSum, kMean };

absl::StatusOr<Reduction> ParseReduction(const Node& node) {
  const std::string r = node.GetString("reduction", "mean");
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  return Unimplemented(node, "unsupported reduction '", r, "' (expected none, sum or mean)");
}

struct LossAttrs {
  Reduction reduction;
  std::optional<int64_t> ignore_index;
};

absl::StatusOr<LossAttrs> ParseLoss(const Node& node) {
  absl::StatusOr<Reduction> red = ParseReduction(node);
  if (!red.ok()) return red.status();
  LossAttrs a{*red, std::nullopt};
  if (node.HasAttr("ignore_index")) a.ignore_index = node.GetInt("ignore_index", 0);
  return a;
}

// Checks input [N, C, d...], target [N, d...] and weight [C]; returns {N, C, D}.
absl::Status CheckLossShapes(const OpContext& ctx, const Tensor& x, const Tensor& target, const Tensor* weight,
                             int64_t& n, int64_t& c, int64_t& d) {
  if (x.rank() < 2) return InvalidArgument(ctx, "input must have rank >= 2, got shape ", ShapeToString(x.shape()));
  if (target.dtype() != DType::kInt32 && target.dtype() != DType::kInt64)
    return InvalidArgument(ctx, "target must be int32 or int64, got ", DTypeName(target.dtype()));
  Shape want = {x.shape()[0]};
  want.insert(want.end(), x.shape().begin() + 2, x.shape().end());
  if (target.shape() != want)
    return InvalidArgument(ctx, "target shape ", ShapeToString(target.shape()), " does not match input shape ",
                           ShapeToString(x.shape()));
  n = x.shape()[0];
  c = x.shape()[1];
  d = 1;
  for (int64_t i = 2; i < x.rank(); ++i) d *= x.shape()[i];
  if (weight != nullptr && (weight->rank() != 1 || weight->shape()[0] != c))
    return InvalidArgument(ctx, "weight must have shape [", c, "], got ", ShapeToString(weight->shape()));
  if (weight != nullptr && weight->dtype() != x.dtype())
    return InvalidArgument(ctx, "weight dtype ", DTypeName(weight->dtype()), " differs from input dtype ",
                           DTypeName(x.dtype()));
  return absl::OkStatus();
}

// NLL over log-probabilities lp laid out [N, C, D] (in double); writes output 0.
template <typename T>
absl::Status NllLoss(OpContext& ctx, const LossAttrs& a, const double* lp, int64_t n, int64_t c, int64_t d,
                     const Tensor& target, const Tensor* weight) {
  absl::StatusOr<std::vector<int64_t>> tg = ReadInts(target);
  if (!tg.ok()) return InvalidArgument(ctx, "target: ", tg.status().message());
  std::vector<double> w;
  if (weight != nullptr) {
    absl::StatusOr<Tensor> wd = CastTensor(*weight, DType::kFloat64);
    if (!wd.ok()) return InvalidArgument(ctx, "weight: ", wd.status().message());
    w.assign(wd->data<double>(), wd->data<double>() + c);
  }
  std::vector<double> loss(static_cast<size_t>(n * d));
  double total = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = (*tg)[i * d + j];
      if (a.ignore_index && t == *a.ignore_index) continue;  // contributes 0 with weight 0
      if (t < 0 || t >= c) return InvalidArgument(ctx, "target value ", t, " is out of range [0, ", c, ")");
      const double wt = w.empty() ? 1.0 : w[t];
      const double l = -lp[(i * c + t) * d + j] * wt;
      loss[i * d + j] = l;
      total += l;
      wsum += wt;
    }
  }
  if (a.reduction == Reduction::kNone) {
    Tensor& y = ctx.AllocateOutput(0, DTypeOf<T>(), target.shape());
    T* out = y.data<T>();
    for (size_t i = 0; i < loss.size(); ++i) out[i] = FromDouble<T>(loss[i]);
  } else {
    Tensor& y = ctx.AllocateOutput(0, DTypeOf<T>(), {});
    y.data<T>()[0] = FromDouble<T>(a.reduction == Reduction::kSum ? total : total / wsum);
  }
  return absl::OkStatus();
}

KernelFactory MakeNll() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    absl::StatusOr<LossAttrs> attrs = ParseLoss(init.node());
    if (!attrs.ok()) return attrs.status();
    const LossAttrs a = *attrs;
    return KernelFn([a](OpContext& ctx) -> absl::Status {
      if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "input and target are required");
      const Tensor& x = ctx.input(0);
      const Tensor& target = ctx.input(1);
      const Tensor* weight = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
      int64_t n, c, d;
      if (absl::Status s = CheckLossShapes(ctx, x, target, weight, n, c, d); !s.ok()) return s;
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (!kIsFloat<T>) {
          return InvalidArgument(ctx, "input must be floating point, got ", DTypeName(x.dtype()));
        } else {
          std::vector<double> lp(static_cast<size_t>(x.num_elements()));
          for (size_t i = 0; i < lp.size(); ++i) lp[i] = static_cast<double>(x.data<T>()[i]);
          return NllLoss<T>(ctx, a, lp.data(), n, c, d, target, weight);
        }
      });
    });
  });
}

KernelFactory MakeSce() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    absl::StatusOr<LossAttrs> attrs = ParseLoss(init.node());
    if (!attrs.ok()) return attrs.status();
    const LossAttrs a = *attrs;
    return KernelFn([a](OpContext& ctx) -> absl::Status {
      if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "scores and labels are required");
      const Tensor& x = ctx.input(0);
      const Tensor& target = ctx.input(1);
      const Tensor* weight = ctx.num_inputs() > 2 && ctx.has_input(2) ? &ctx.input(2) : nullptr;
      int64_t n, c, d;
      if (absl::Status s = CheckLossShapes(ctx, x, target, weight, n, c, d); !s.ok()) return s;
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (!kIsFloat<T>) {
          return InvalidArgument(ctx, "scores must be floating point, got ", DTypeName(x.dtype()));
        } else {
          // log_softmax over the class axis (stride d).
          const T* in = x.data<T>();
          std::vector<double> lp(static_cast<size_t>(x.num_elements()));
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < d; ++j) {
              const int64_t base = i * c * d + j;
              double mx = -std::numeric_limits<double>::infinity();
              for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(in[base + k * d]));
              double s = 0;
              for (int64_t k = 0; k < c; ++k) s += std::exp(static_cast<double>(in[base + k * d]) - mx);
              const double lse = mx + std::log(s);
              for (int64_t k = 0; k < c; ++k) lp[base + k * d] = static_cast<double>(in[base + k * d]) - lse;
            }
          }
          if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
            T* out = ctx.AllocateOutput(1, x.dtype(), x.shape()).template data<T>();
            for (size_t i = 0; i < lp.size(); ++i) out[i] = FromDouble<T>(lp[i]);
          }
          return NllLoss<T>(ctx, a, lp.data(), n, c, d, target, weight);
        }
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// Optimizers (ai.onnx.preview.training): inputs R, T, then `groups` lists of n tensors each
// (X..., G..., and the optimizer states); outputs X_new... and the new states.

enum class Opt { kAdagrad, kMomentum, kAdam };

struct OptAttrs {
  double decay_factor = 0, epsilon = 0, norm_coefficient = 0, norm_coefficient_post = 0;
  double alpha = 0, beta = 0;
  bool nesterov = false;
};

template <Opt O>
absl::Status RunOptimizer(OpContext& ctx, const OptAttrs& a) {
  constexpr int64_t groups = O == Opt::kAdam ? 4 : 3;
  const int64_t ni = static_cast<int64_t>(ctx.num_inputs());
  if (ni < 2 + groups || (ni - 2) % groups != 0)
    return InvalidArgument(ctx, "expected R, T and ", groups, " equal-length tensor lists, got ", ni, " inputs");
  const int64_t cnt = (ni - 2) / groups;
  for (int64_t i = 0; i < ni; ++i)
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "input ", i, " is missing");
  absl::StatusOr<double> r = ReadScalar(ctx.input(0));
  if (!r.ok()) return InvalidArgument(ctx, "R: ", r.status().message());
  absl::StatusOr<double> t = ReadScalar(ctx.input(1));
  if (!t.ok()) return InvalidArgument(ctx, "T: ", t.status().message());
  for (int64_t k = 0; k < cnt; ++k) {
    const Tensor& x = ctx.input(2 + k);
    for (int64_t g = 1; g < groups; ++g) {
      const Tensor& o = ctx.input(2 + g * cnt + k);
      if (o.shape() != x.shape() || o.dtype() != x.dtype())
        return InvalidArgument(ctx, "input ", 2 + g * cnt + k, " (", DTypeName(o.dtype()), " ", ShapeToString(o.shape()),
                               ") does not match X (", DTypeName(x.dtype()), " ", ShapeToString(x.shape()), ")");
    }
    absl::Status st = VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      if constexpr (!kIsFloat<T>) {
        return InvalidArgument(ctx, "tensors must be floating point, got ", DTypeName(x.dtype()));
      } else {
        const T* xp = x.data<T>();
        const T* gp = ctx.input(2 + cnt + k).data<T>();
        const T* s1 = ctx.input(2 + 2 * cnt + k).data<T>();
        const T* s2 = O == Opt::kAdam ? ctx.input(2 + 3 * cnt + k).data<T>() : nullptr;
        T* xo = ctx.has_output(k) ? ctx.AllocateOutput(k, x.dtype(), x.shape()).data<T>() : nullptr;
        T* s1o = ctx.has_output(cnt + k) ? ctx.AllocateOutput(cnt + k, x.dtype(), x.shape()).data<T>() : nullptr;
        T* s2o = nullptr;
        if (O == Opt::kAdam && ctx.has_output(2 * cnt + k)) s2o = ctx.AllocateOutput(2 * cnt + k, x.dtype(), x.shape()).data<T>();
        const int64_t n = x.num_elements();
        const double R = *r, step = *t;
        double r_adj = R;
        if (O == Opt::kAdagrad) r_adj = R / (1 + step * a.decay_factor);
        if (O == Opt::kAdam && step > 0) r_adj = R * std::sqrt(1 - std::pow(a.beta, step)) / (1 - std::pow(a.alpha, step));
        const double beta_adj = step > 0 ? a.beta : 1.0;  // Momentum: full gradient on the first step
        for (int64_t i = 0; i < n; ++i) {
          const double xv = static_cast<double>(xp[i]);
          const double g = a.norm_coefficient * xv + static_cast<double>(gp[i]);
          double xn, s1n, s2n = 0;
          if constexpr (O == Opt::kAdagrad) {
            s1n = static_cast<double>(s1[i]) + g * g;
            xn = xv - r_adj * g / (std::sqrt(s1n) + a.epsilon);
          } else if constexpr (O == Opt::kMomentum) {
            s1n = a.alpha * static_cast<double>(s1[i]) + beta_adj * g;
            xn = a.nesterov ? xv - R * (g + a.alpha * s1n) : xv - R * s1n;
          } else {
            s1n = a.alpha * static_cast<double>(s1[i]) + (1 - a.alpha) * g;
            s2n = a.beta * static_cast<double>(s2[i]) + (1 - a.beta) * g * g;
            xn = (1 - a.norm_coefficient_post) * (xv - r_adj * s1n / (std::sqrt(s2n) + a.epsilon));
          }
          if (xo) xo[i] = FromDouble<T>(xn);
          if (s1o) s1o[i] = FromDouble<T>(s1n);
          if (s2o) s2o[i] = FromDouble<T>(s2n);
        }
        return absl::OkStatus();
      }
    });
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

template <Opt O>
KernelFactory MakeOptimizer() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& node = init.node();
    OptAttrs a;
    a.norm_coefficient = node.GetFloat("norm_coefficient", 0.0f);
    a.epsilon = node.GetFloat("epsilon", 1e-6f);  // schema default for Adagrad and Adam
    if (O == Opt::kAdagrad) a.decay_factor = node.GetFloat("decay_factor", 0.0f);
    if (O == Opt::kAdam) {
      a.alpha = node.GetFloat("alpha", 0.9f);
      a.beta = node.GetFloat("beta", 0.999f);
      a.norm_coefficient_post = node.GetFloat("norm_coefficient_post", 0.0f);
    }
    if (O == Opt::kMomentum) {
      for (const char* req : {"alpha", "beta", "mode", "norm_coefficient"})
        if (!node.HasAttr(req)) return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": missing attribute '", req, "'"));
      a.alpha = node.GetFloat("alpha", 0.0f);
      a.beta = node.GetFloat("beta", 0.0f);
      const std::string mode = node.GetString("mode", "");
      if (mode != "standard" && mode != "nesterov")
        return Unimplemented(node, "unsupported mode '", mode, "' (expected standard or nesterov)");
      a.nesterov = mode == "nesterov";
    }
    return KernelFn([a](OpContext& ctx) { return RunOptimizer<O>(ctx, a); });
  });
}

}  // namespace

void RegisterTrainingOps(KernelRegistry& r) {
  AddVersions(r, "NegativeLogLikelihoodLoss", {12, 13, 22}, MakeNll());
  AddVersions(r, "SoftmaxCrossEntropyLoss", {12, 13}, MakeSce());
  const std::string kTraining = "ai.onnx.preview.training";
  r.Add(kTraining, "Adagrad", 1, 1, MakeOptimizer<Opt::kAdagrad>());
  r.Add(kTraining, "Momentum", 1, 1, MakeOptimizer<Opt::kMomentum>());
  r.Add(kTraining, "Adam", 1, 1, MakeOptimizer<Opt::kAdam>());
}

}  // namespace oneinfer
