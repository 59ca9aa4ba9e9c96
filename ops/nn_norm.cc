// Normalisation ops (BatchNormalization, InstanceNormalization, LRN,
// MeanVarianceNormalization, GroupNormalization) and Dropout.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Reads any numeric tensor as doubles (parameters may have another float type than X).
absl::StatusOr<std::vector<double>> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  absl::Status s = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(t.data<T>()[i]);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return v;
}

// Calls fn(TypeTag<T>) for the floating-point element types.
template <typename Fn>
absl::Status VisitFloat(OpContext& ctx, DType dt, Fn&& fn) {
  if (!IsFloatingPoint(dt)) return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
  return VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) return fn(tag);
    else return absl::OkStatus();
  });
}

// Mean and biased variance of n values read through get(i).
template <typename Get>
void MeanVar(int64_t n, Get get, double* mean, double* var) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) s += get(i);
  const double m = n ? s / static_cast<double>(n) : 0;
  for (int64_t i = 0; i < n; ++i) { const double d = get(i) - m; s2 += d * d; }
  *mean = m;
  *var = n ? s2 / static_cast<double>(n) : 0;
}

// y[n, c, s] = x * a[c] + b[c] (per-element coefficients when coef_per_elem).
template <typename T>
void ApplyAffine(const Tensor& x, Tensor& y, int64_t N, int64_t C, int64_t S, const std::vector<double>& a,
                 const std::vector<double>& b, bool coef_per_elem, ThreadPool* pool) {
  using Acc = AccOf<T>;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  ParallelFor(pool, N * C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t nc = lo; nc < hi; ++nc) {
      const int64_t c = nc % C;
      const T* xi = px + nc * S;
      T* yi = py + nc * S;
      if (coef_per_elem) {
        for (int64_t s = 0; s < S; ++s)
          yi[s] = static_cast<T>(static_cast<Acc>(xi[s]) * static_cast<Acc>(a[c * S + s]) + static_cast<Acc>(b[c * S + s]));
      } else {
        const Acc ac = static_cast<Acc>(a[c]), bc = static_cast<Acc>(b[c]);
        for (int64_t s = 0; s < S; ++s) yi[s] = static_cast<T>(static_cast<Acc>(xi[s]) * ac + bc);
      }
    }
  });
}

// ---------------------------------------------------------------- BatchNormalization

absl::Status BatchNormCompute(OpContext& ctx) {
  const Node& node = ctx.node();
  for (size_t i = 0; i < 5; ++i)
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "BatchNormalization needs 5 inputs, input ", i, " is missing");
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return InvalidArgument(ctx, "X must have rank >= 2");
  const double eps = node.GetFloat("epsilon", 1e-5f);
  const double momentum = node.GetFloat("momentum", 0.9f);
  const bool spatial = ctx.opset() >= 9 || node.GetInt("spatial", 1) != 0;
  bool training;
  if (ctx.opset() >= 14) training = node.GetInt("training_mode", 0) != 0;
  else training = ctx.num_outputs() > 1 && ctx.has_output(1);  // older: extra outputs mean training
  const int64_t N = x.dim(0), C = x.dim(1), S = (N * C) != 0 ? x.num_elements() / (N * C) : 0;
  const int64_t P = spatial ? C : C * S;
  std::vector<std::vector<double>> prm(4);
  for (size_t i = 0; i < 4; ++i) {
    const Tensor& t = ctx.input(i + 1);
    if (!IsFloatingPoint(t.dtype())) return InvalidArgument(ctx, "input ", i + 1, " must be floating point");
    if (t.num_elements() != P) return InvalidArgument(ctx, "input ", i + 1, " must have ", P, " elements, got shape ", ShapeToString(t.shape()));
    auto v = ToDoubles(t);
    if (!v.ok()) return v.status();
    prm[i] = *v;
  }
  const auto &scale = prm[0], &bias = prm[1];
  std::vector<double> mean = prm[2], var = prm[3];
  if (training && !spatial) return Unimplemented(node, "training with spatial=0 is not supported");
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    std::vector<double> bm(C), bv(C);
    if (training) {
      const T* px = x.data<T>();
      for (int64_t c = 0; c < C; ++c) {
        MeanVar(N * S, [&](int64_t i) { return static_cast<double>(px[((i / S) * C + c) * S + i % S]); }, &bm[c], &bv[c]);
      }
    }
    std::vector<double> a(P), b(P);
    for (int64_t c = 0; c < P; ++c) {
      const double m = training ? bm[c] : mean[c], v = training ? bv[c] : var[c];
      a[c] = scale[c] / std::sqrt(v + eps);
      b[c] = bias[c] - m * a[c];
    }
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    ApplyAffine<T>(x, y, N, C, S, a, b, !spatial, ctx.thread_pool());
    if (!training) return absl::OkStatus();
    // Outputs 1 and 2: running statistics; 3 and 4 (before opset 14): the batch statistics.
    for (size_t o = 1; o < ctx.num_outputs() && o < 5; ++o) {
      if (!ctx.has_output(o)) continue;
      const Tensor& like = ctx.input(o <= 2 ? o + 2 : 3);
      Tensor& t = ctx.AllocateOutput(o, like.dtype(), like.shape());
      absl::Status s = VisitFloat(ctx, like.dtype(), [&](auto tag2) -> absl::Status {
        using U = typename decltype(tag2)::type;
        for (int64_t c = 0; c < C; ++c) {
          double v;
          if (o == 1) v = mean[c] * momentum + bm[c] * (1 - momentum);
          else if (o == 2) v = var[c] * momentum + bv[c] * (1 - momentum);
          else if (o == 3) v = bm[c];
          else v = bv[c];
          t.data<U>()[c] = static_cast<U>(v);
        }
        return absl::OkStatus();
      });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- InstanceNormalization

absl::Status InstanceNormCompute(OpContext& ctx) {
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "InstanceNormalization needs 3 inputs");
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return InvalidArgument(ctx, "X must have rank >= 3");
  const int64_t N = x.dim(0), C = x.dim(1), S = (N * C) != 0 ? x.num_elements() / (N * C) : 0;
  auto sc = ToDoubles(ctx.input(1));
  auto bi = ToDoubles(ctx.input(2));
  if (!sc.ok() || !bi.ok()) return InvalidArgument(ctx, "scale and B must be numeric");
  if (static_cast<int64_t>(sc->size()) != C || static_cast<int64_t>(bi->size()) != C)
    return InvalidArgument(ctx, "scale and B must have ", C, " elements");
  const double eps = ctx.node().GetFloat("epsilon", 1e-5f);
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using Acc = AccOf<T>;
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    ParallelFor(ctx.thread_pool(), N * C, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const T* xi = px + nc * S;
        double m, v;
        MeanVar(S, [&](int64_t i) { return static_cast<double>(xi[i]); }, &m, &v);
        const double a = (*sc)[nc % C] / std::sqrt(v + eps), b = (*bi)[nc % C] - m * a;
        for (int64_t i = 0; i < S; ++i)
          py[nc * S + i] = static_cast<T>(static_cast<Acc>(xi[i]) * static_cast<Acc>(a) + static_cast<Acc>(b));
      }
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- LRN

absl::Status LrnCompute(OpContext& ctx) {
  const Node& node = ctx.node();
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input X");
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return InvalidArgument(ctx, "X must have rank >= 2");
  const int64_t size = node.GetInt("size", 0);
  if (size < 1) return InvalidArgument(ctx, "attribute size must be a positive integer");
  const double alpha = node.GetFloat("alpha", 1e-4f), beta = node.GetFloat("beta", 0.75f),
               bias = node.GetFloat("bias", 1.f);
  const int64_t N = x.dim(0), C = x.dim(1), S = (N * C) != 0 ? x.num_elements() / (N * C) : 0;
  const int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    ParallelFor(ctx.thread_pool(), N * C, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const int64_t n = nc / C, c = nc % C;
        const int64_t c0 = std::max<int64_t>(0, c - lo_off), c1 = std::min<int64_t>(C - 1, c + hi_off);
        for (int64_t s = 0; s < S; ++s) {
          double sq = 0;
          for (int64_t k = c0; k <= c1; ++k) {
            const double v = static_cast<double>(px[(n * C + k) * S + s]);
            sq += v * v;
          }
          py[nc * S + s] = static_cast<T>(static_cast<double>(px[nc * S + s]) / std::pow(bias + alpha / size * sq, beta));
        }
      }
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- MeanVarianceNormalization

absl::Status MvnCompute(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input X");
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  std::vector<int64_t> axes = ctx.node().GetInts("axes", {0, 2, 3});
  Shape red = x.shape();
  for (int64_t& a : axes) {
    auto na = NormalizeAxis(a, rank);
    if (!na.ok()) return InvalidArgument(ctx, na.status().message());
    red[*na] = 1;
  }
  const int64_t groups = NumElements(red), total = x.num_elements();
  const int64_t per = groups ? total / groups : 0;
  // Group (reduced position) of every element, via broadcast strides.
  const auto gst = BroadcastStrides(red, x.shape());
  const auto xs = x.shape();
  std::vector<int64_t> grp(static_cast<size_t>(total));
  {
    std::vector<int64_t> idx(xs.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t g = 0;
      for (size_t d = 0; d < xs.size(); ++d) g += idx[d] * gst[d];
      grp[i] = g;
      for (int64_t d = static_cast<int64_t>(xs.size()) - 1; d >= 0; --d) {
        if (++idx[d] < xs[d]) break;
        idx[d] = 0;
      }
    }
  }
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    std::vector<double> s(groups, 0), s2(groups, 0);
    for (int64_t i = 0; i < total; ++i) {
      const double v = static_cast<double>(px[i]);
      s[grp[i]] += v;
      s2[grp[i]] += v * v;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const double m = s[g] / per;
      s[g] = m;
      s2[g] = std::sqrt(std::max(0.0, s2[g] / per - m * m)) + 1e-9;  // std + epsilon, as the spec's function
    }
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    for (int64_t i = 0; i < total; ++i)
      y.data<T>()[i] = static_cast<T>((static_cast<double>(px[i]) - s[grp[i]]) / s2[grp[i]]);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- GroupNormalization

absl::Status GroupNormCompute(OpContext& ctx) {
  const Node& node = ctx.node();
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "GroupNormalization needs 3 inputs");
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return InvalidArgument(ctx, "X must have rank >= 2");
  if (!node.HasAttr("num_groups")) return InvalidArgument(ctx, "attribute num_groups is required");
  const int64_t G = node.GetInt("num_groups", 1);
  const int64_t N = x.dim(0), C = x.dim(1), S = (N * C) != 0 ? x.num_elements() / (N * C) : 0;
  if (G < 1 || C % G != 0) return InvalidArgument(ctx, "num_groups ", G, " does not divide channels ", C);
  const double eps = node.GetFloat("epsilon", 1e-5f);
  // Opset 18 has one scale/bias per group, opset 21 one per channel.
  const bool per_channel = ctx.opset() >= 21;
  const int64_t P = per_channel ? C : G;
  auto sc = ToDoubles(ctx.input(1));
  auto bi = ToDoubles(ctx.input(2));
  if (!sc.ok() || !bi.ok()) return InvalidArgument(ctx, "scale and bias must be numeric");
  if (static_cast<int64_t>(sc->size()) != P || static_cast<int64_t>(bi->size()) != P)
    return InvalidArgument(ctx, "scale and bias must have ", P, " elements");
  const int64_t Cg = C / G, L = Cg * S;
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    ParallelFor(ctx.thread_pool(), N * G, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ng = lo; ng < hi; ++ng) {
        const int64_t g = ng % G;
        const T* xi = px + ng * L;
        double m, v;
        MeanVar(L, [&](int64_t i) { return static_cast<double>(xi[i]); }, &m, &v);
        const double inv = 1.0 / std::sqrt(v + eps);
        for (int64_t c = 0; c < Cg; ++c) {
          const int64_t pi = per_channel ? g * Cg + c : g;
          const double a = (*sc)[pi] * inv, b = (*bi)[pi] - m * a;
          for (int64_t s = 0; s < S; ++s)
            py[ng * L + c * S + s] = static_cast<T>(static_cast<double>(xi[c * S + s]) * a + b);
        }
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeGroupNorm(const KernelInit& init) {
  const Node& n = init.node();
  const int64_t stash = n.GetInt("stash_type", 1);
  if (stash != 1) return Unimplemented(n, "unsupported stash_type ", stash);
  if (!n.HasAttr("num_groups")) return Unimplemented(n, "attribute num_groups is required");
  return MakeFnKernel(GroupNormCompute)(init);
}

// ---------------------------------------------------------------- Dropout

absl::Status DropoutCompute(OpContext& ctx, bool has_seed, int64_t seed) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input data");
  const Tensor& x = ctx.input(0);
  double ratio = ctx.node().GetFloat("ratio", 0.5f);
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) {
      auto r = ReadScalar(ctx.input(1));
      if (!r.ok()) return InvalidArgument(ctx, "ratio: ", r.status().message());
      ratio = *r;
    }
    if (ctx.has_input(2)) {
      if (ctx.input(2).dtype() != DType::kBool || ctx.input(2).num_elements() != 1)
        return InvalidArgument(ctx, "training_mode must be a bool scalar");
      training = ctx.input(2).data<bool>()[0];
    }
  }
  // Before opset 12 an inference engine always runs Dropout in test mode.
  if (training && !(ratio >= 0 && ratio < 1)) return InvalidArgument(ctx, "ratio must be in [0, 1), got ", ratio);
  const bool want_mask = ctx.num_outputs() > 1 && ctx.has_output(1);
  const DType mask_dt = ctx.opset() >= 10 ? DType::kBool : x.dtype();
  if (!training || ratio == 0) {
    ctx.SetOutput(0, x);
    if (want_mask) {
      Tensor& m = ctx.AllocateOutput(1, mask_dt, x.shape());
      return VisitNumeric(mask_dt, [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        std::fill(m.data<T>(), m.data<T>() + m.num_elements(), static_cast<T>(1));
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  }
  // Training: keep where a uniform [0,1) draw >= ratio. The draws follow numpy's legacy
  // RandomState (MT19937 seeded with `seed`, 53-bit doubles) so a seed is reproducible.
  std::mt19937 gen(has_seed ? static_cast<uint32_t>(seed) : std::random_device{}());
  const int64_t n = x.num_elements();
  std::vector<bool> keep(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = gen() >> 5, b = gen() >> 6;
    const double u = (a * 67108864.0 + b) / 9007199254740992.0;
    keep[i] = u >= ratio;
  }
  const double scale = 1.0 / (1.0 - ratio);
  return VisitFloat(ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using Acc = AccOf<T>;
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
    for (int64_t i = 0; i < n; ++i)
      y.data<T>()[i] = keep[i] ? static_cast<T>(static_cast<Acc>(x.data<T>()[i]) * static_cast<Acc>(scale)) : T(0);
    if (want_mask) {
      Tensor& m = ctx.AllocateOutput(1, DType::kBool, x.shape());
      for (int64_t i = 0; i < n; ++i) m.data<bool>()[i] = keep[i];
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeDropout(const KernelInit& init) {
  const Node& n = init.node();
  const bool has_seed = n.HasAttr("seed");
  const int64_t seed = n.GetInt("seed", 0);
  return MakeFnKernel([has_seed, seed](OpContext& ctx) { return DropoutCompute(ctx, has_seed, seed); })(init);
}

}  // namespace

void RegisterNNNormOps(KernelRegistry& r) {
  AddVersions(r, "BatchNormalization", {1, 6, 7, 9, 14, 15}, BatchNormCompute);
  AddVersions(r, "InstanceNormalization", {1, 6, 22}, InstanceNormCompute);
  AddVersions(r, "LRN", {1, 13}, LrnCompute);
  AddVersions(r, "MeanVarianceNormalization", {9, 13}, MvnCompute);
  AddVersions(r, "GroupNormalization", {18, 21}, MakeGroupNorm);
  AddVersions(r, "Dropout", {1, 6, 7, 10, 12, 13, 22}, MakeDropout);
}

}  // namespace oneinfer
