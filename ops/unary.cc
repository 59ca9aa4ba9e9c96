// Unary elementwise operators: math functions, activations (with their attributes) and Clip.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

using namespace elementwise;  // NOLINT: the family's shared dispatch and broadcasting helpers

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // for the tanh form of GELU

template <typename T>
T Sign(T x) {
  if constexpr (std::is_unsigned_v<T>) return x > 0 ? 1 : 0;
  else return x > 0 ? T(1) : x < 0 ? T(-1) : x;  // keeps 0 and NaN
}


// ---- Clip

KernelFactory ClipFactory() {
  return WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const bool attrs = init.opset() < 11;
    const float amin = init.node().GetFloat("min", std::numeric_limits<float>::lowest());
    const float amax = init.node().GetFloat("max", std::numeric_limits<float>::max());
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      return Dispatch(NumTypes{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        A lo = std::numeric_limits<A>::lowest(), hi = std::numeric_limits<A>::max();
        if (attrs) {
          if constexpr (kIsFloat<T>) {
            lo = static_cast<A>(amin);
            hi = static_cast<A>(amax);
          }
        } else {
          for (size_t i = 1; i <= 2; ++i) {
            if (!ctx.has_input(i) || ctx.input(i).num_elements() == 0) continue;  // empty bound = none
            const Tensor& t = ctx.input(i);
            if (t.dtype() != x.dtype() || t.num_elements() != 1) {
              return InvalidArgument(ctx, i == 1 ? "min" : "max", " must be a ", DTypeName(x.dtype()),
                                     " scalar, got ", DTypeName(t.dtype()), " ", ShapeToString(t.shape()));
            }
            (i == 1 ? lo : hi) = static_cast<A>(t.data<T>()[0]);
          }
        }
        Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
        if constexpr (std::is_same_v<T, float>) {
          Unary<float, float>(x, y, ctx.thread_pool(), nullptr, [&](const auto& v) { return v.max(lo).min(hi); });
        } else {
          Unary<T, T>(x, y, ctx.thread_pool(), [&](const T& v) {
            const A a = static_cast<A>(v);
            return static_cast<T>(a < lo ? lo : (hi < a ? hi : a));
          });
        }
        return absl::OkStatus();
      });
    });
  });
}

// ---- Sigmoid

// float32 through SigmoidF32 (float16 widened a block at a time, rounded once); double as
// 1 / (1 + exp(-x)).
KernelFn SigmoidKernel() {
  const KernelFn generic = UnaryOp<FloatTypes>([](auto x) { return 1 / (1 + std::exp(-x)); });
  return [generic](OpContext& ctx) -> absl::Status {
    if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
    const Tensor& x = ctx.input(0);
    const bool half = x.dtype() == DType::kFloat16;
    if (x.dtype() != DType::kFloat32 && !half) return generic(ctx);
    Tensor* reused = ctx.ReuseInputAsOutput(0, 0, x.dtype(), x.shape());
    Tensor& y = reused != nullptr ? *reused : ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
    ParallelFor(ctx.thread_pool(), x.num_elements(), kParallelMin, [&](int64_t b, int64_t e) {
      if (!half) return SigmoidF32(x.data<float>() + b, y.data<float>() + b, e - b);
      constexpr int64_t kBlock = 256;
      float block[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t m = std::min(kBlock, e - i);
        WidenF16(x.data<uint16_t>() + i, block, m);
        SigmoidF32(block, block, m);
        NarrowToF16(block, y.data<uint16_t>() + i, m);
      }
    });
    return absl::OkStatus();
  };
}

// ---- activations with attributes

// A unary op whose function depends on attributes read at load time: make(node) -> KernelFn.
template <typename Make>
KernelFactory AttrUnary(Make make) {
  return WithInit([make](const KernelInit& init) -> absl::StatusOr<KernelFn> { return make(init.node()); });
}

}  // namespace

void SigmoidF32(const float* x, float* y, int64_t n) {
  // Blocks through an aligned buffer whose length is a whole number of packets: no scalar ends.
  constexpr int64_t kBlock = 256;
  alignas(64) float block[kBlock];
  using Block = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
  constexpr int64_t kWidest = 16;  // floats in the widest packet Eigen has (AVX-512)
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    const int64_t padded = (m + kWidest - 1) / kWidest * kWidest;
    std::copy(x + i, x + i + m, block);
    std::fill(block + m, block + padded, 0.0f);
    Block(block, padded) = Block(block, padded).logistic();
    std::copy(block, block + m, y + i);
  }
}

void RegisterUnaryOps(KernelRegistry& r) {
  // ---- unary math
  AddVersions(r, "Abs", {1, 6, 13}, UnaryOp<NumTypes>([](auto x) {
          if constexpr (std::is_unsigned_v<decltype(x)>) return x;
          else return x < 0 ? WrapSub(decltype(x)(0), x) : x;  // |INT_MIN| wraps to itself, as in numpy
        }, [](const auto& x) { return x.abs(); }));
  AddVersions(r, "Neg", {1, 6, 13}, UnaryOp<SignedTypes>([](auto x) { return WrapSub(decltype(x)(0), x); },
                                                   [](const auto& x) { return -x; }));
  AddVersions(r, "Reciprocal", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return decltype(x)(1) / x; },
                                                         [](const auto& x) { return x.inverse(); }));
  AddVersions(r, "Sqrt", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::sqrt(x); },
                                                   [](const auto& x) { return x.sqrt(); }));
  AddVersions(r, "Exp", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::exp(x); },
                                                  [](const auto& x) { return x.exp(); }));
  AddVersions(r, "Log", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::log(x); },
                                                  [](const auto& x) { return x.log(); }));
  AddVersions(r, "Tanh", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::tanh(x); },
                                                   [](const auto& x) { return x.tanh(); }));
  AddVersions(r, "Sigmoid", {1, 6, 13}, SigmoidKernel());
  AddVersions(r, "Erf", {9, 13}, UnaryOp<FloatTypes>([](auto x) { return std::erf(x); }));
  AddVersions(r, "Sin", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::sin(x); }));
  AddVersions(r, "Cos", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::cos(x); }));
  AddVersions(r, "Tan", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::tan(x); }));
  AddVersions(r, "Asin", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::asin(x); }));
  AddVersions(r, "Acos", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::acos(x); }));
  AddVersions(r, "Atan", {7, 22}, UnaryOp<FloatTypes>([](auto x) { return std::atan(x); }));
  AddVersions(r, "Sinh", {9, 22}, UnaryOp<FloatTypes>([](auto x) { return std::sinh(x); }));
  AddVersions(r, "Cosh", {9, 22}, UnaryOp<FloatTypes>([](auto x) { return std::cosh(x); }));
  AddVersions(r, "Asinh", {9, 22}, UnaryOp<FloatTypes>([](auto x) { return std::asinh(x); }));
  AddVersions(r, "Acosh", {9, 22}, UnaryOp<FloatTypes>([](auto x) { return std::acosh(x); }));
  AddVersions(r, "Atanh", {9, 22}, UnaryOp<FloatTypes>([](auto x) { return std::atanh(x); }));
  AddVersions(r, "Floor", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::floor(x); },
                                                    [](const auto& x) { return x.floor(); }));
  AddVersions(r, "Ceil", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::ceil(x); },
                                                   [](const auto& x) { return x.ceil(); }));
  // nearbyint rounds half to even in the default rounding mode.
  AddVersions(r, "Round", {11, 22}, UnaryOp<FloatTypes>([](auto x) { return std::nearbyint(x); }));
  AddVersions(r, "Sign", {9, 13}, UnaryOp<NumTypes>([](auto x) { return Sign(x); }));
  AddVersions(r, "IsNaN", {9, 13, 20}, PredicateOp<FloatTypes>([](auto x) { return std::isnan(x); }));
  AddVersions(r, "IsInf", {10, 20}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const bool pos = init.node().GetInt("detect_positive", 1) != 0;
        const bool neg = init.node().GetInt("detect_negative", 1) != 0;
        return PredicateOp<FloatTypes>([pos, neg](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); });
      }));
  AddVersions(r, "BitwiseNot", {18}, UnaryOp<IntTypes>([](auto x) { return static_cast<decltype(x)>(~x); }));

  // ---- activations
  AddVersions(r, "Relu", {1, 6, 13, 14}, UnaryOp<SignedTypes>([](auto x) { return x > 0 ? x : decltype(x)(0); },
                                                       [](const auto& x) { return x.max(0.0f); }));
  AddVersions(r, "LeakyRelu", {1, 6, 16}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 0.01f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; },
                                   [alpha](const auto& x) { return (x < 0.0f).select(x * alpha, x); });
      }));
  AddVersions(r, "Elu", {1, 6, 22}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x < 0 ? decltype(x)(alpha) * std::expm1(x) : x; });
      }));
  AddVersions(r, "Selu", {1, 6, 22}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.67326319217681884765625f);
        const float gamma = n.GetFloat("gamma", 1.05070102214813232421875f);
        return UnaryOp<FloatTypes>([alpha, gamma](auto x) {
          using T = decltype(x);
          return x > 0 ? T(gamma) * x : T(gamma) * (T(alpha) * std::exp(x) - T(alpha));
        });
      }));
  AddVersions(r, "Celu", {12}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) {
          using T = decltype(x);
          return x > 0 ? x : T(alpha) * std::expm1(x / T(alpha));
        });
      }));
  AddVersions(r, "HardSigmoid", {1, 6, 22}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 0.2f), beta = n.GetFloat("beta", 0.5f);
        return UnaryOp<FloatTypes>([alpha, beta](auto x) {
          using T = decltype(x);
          return std::clamp(T(alpha) * x + T(beta), T(0), T(1));
        });
      }));
  AddVersions(r, "HardSwish", {14, 22}, UnaryOp<FloatTypes>([](auto x) {
          using T = decltype(x);
          return x * std::clamp(x / T(6) + T(0.5), T(0), T(1));
        }));
  AddVersions(r, "Softplus", {1, 22}, UnaryOp<FloatTypes>([](auto x) {
          return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));  // no overflow for big x
        }));
  AddVersions(r, "Softsign", {1, 22}, UnaryOp<FloatTypes>([](auto x) { return x / (1 + std::abs(x)); }));
  AddVersions(r, "Mish", {18, 22}, UnaryOp<FloatTypes>([](auto x) {
          return x * std::tanh(x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
        }));
  AddVersions(r, "ThresholdedRelu", {10, 22}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
      }));
  AddVersions(r, "Shrink", {9}, AttrUnary([](const Node& n) {
        const double lambd = n.GetFloat("lambd", 0.5f), bias = n.GetFloat("bias", 0.0f);
        return UnaryOp<NumTypes>([lambd, bias](auto x) {
          const double v = static_cast<double>(x);
          return static_cast<decltype(x)>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
        });
      }));
  AddVersions(r, "Gelu", {20}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const std::string approx = init.node().GetString("approximate", "none");
        if (approx == "none") {
          return UnaryOp<FloatTypes>([](auto x) {
            using T = decltype(x);
            return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752)));
          });
        }
        if (approx == "tanh") {
          return UnaryOp<FloatTypes>(
              [](auto x) {
                using T = decltype(x);
                return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
              },
              [](const auto& x) { return 0.5f * x * (1.0f + (kSqrt2OverPi * (x + 0.044715f * x.cube())).tanh()); });
        }
        return Unimplemented(init.node(), "unsupported approximate '", approx, "'");
      }));

  // ---- bounds
  AddVersions(r, "Clip", {1, 6, 11, 12, 13}, ClipFactory());
}

}  // namespace oneinfer
