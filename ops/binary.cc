// Binary arithmetic with numpy broadcasting (Add, Sub, Mul, Div, Pow, Mod, bit shifts and bitwise
// ops, PRelu) and the variadic Sum, Mean, Max, Min.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/elementwise.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

using namespace elementwise;  // NOLINT: the family's shared dispatch and broadcasting helpers

// ---- scalar helpers

template <typename T>
T IntDiv(T x, T y) {
  if (y == 0) return 0;  // no trap on division by zero
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x));  // INT_MIN / -1 wraps
  }
  return static_cast<T>(x / y);
}

template <typename T>
T IntFMod(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return 0;
  }
  return y == 0 ? 0 : static_cast<T>(x % y);
}

// Integer modulo with the sign of the divisor (Python/numpy).
template <typename T>
T IntMod(T x, T y) {
  T r = IntFMod(x, y);
  if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
  }
  return r;
}

template <typename T, typename E>
T IntPow(T base, E e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e % 2) ? -1 : 1) : 0;
  using U = std::make_unsigned_t<T>;  // wraps on overflow instead of UB
  U r = 1, b = static_cast<U>(base);
  for (uint64_t k = static_cast<uint64_t>(e); k; k >>= 1, b = static_cast<U>(b * b)) {
    if (k & 1) r = static_cast<U>(r * b);
  }
  return static_cast<T>(r);
}

template <typename T>
T MaxNaN(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x < y ? y : x;
}
template <typename T>
T MinNaN(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return y < x ? y : x;
}

// ---- Pow: base and exponent may differ in type; the result has the base type.

template <typename TA, typename TB>
TA PowOne(const TA& x, const TB& y) {
  if constexpr (std::is_integral_v<TA> && std::is_integral_v<TB>) {
    return IntPow<TA>(x, y);
  } else if constexpr (kIsFloat<TA> && kIsFloat<TB>) {
    using C = std::conditional_t<std::is_same_v<Acc<TA>, double> || std::is_same_v<Acc<TB>, double>, double, float>;
    return static_cast<TA>(std::pow(static_cast<C>(Acc<TA>(x)), static_cast<C>(Acc<TB>(y))));
  } else {
    return static_cast<TA>(std::pow(static_cast<double>(Acc<TA>(x)), static_cast<double>(Acc<TB>(y))));
  }
}

absl::Status PowKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 2); !s.ok()) return s;
  const Tensor& a = ctx.input(0);
  absl::StatusOr<Tensor> b = LegacyAlign(ctx, a, ctx.input(1));
  if (!b.ok()) return b.status();
  absl::StatusOr<Shape> shape = OutShape(ctx, {a.shape(), b->shape()});
  if (!shape.ok()) return shape.status();
  using BaseTypes = decltype(FloatTypes{} + Types<int32_t, int64_t>{});
  return Dispatch(BaseTypes{}, ctx, a.dtype(), [&](auto ta) -> absl::Status {
    using TA = typename decltype(ta)::type;
    return Dispatch(NumTypes{}, ctx, b->dtype(), [&](auto tb) -> absl::Status {
      using TB = typename decltype(tb)::type;
      Tensor& o = ctx.AllocateOutput(0, a.dtype(), *shape);
      ThreadPool* pool = ctx.thread_pool();
      if constexpr (std::is_same_v<TA, float> && kIsFloat<TB>) {
        // Scalar exponents common in models (x^2 in norms, x^0.5, x^3 in GELU) get vector loops.
        if (b->num_elements() == 1 && *shape == a.shape()) {
          const float e = static_cast<float>(b->data<TB>()[0]);
          auto run = [&](auto vec) { Unary<float, float>(a, o, pool, nullptr, vec); };
          if (e == 2.0f) return run([](const auto& x) { return x.square(); }), absl::OkStatus();
          if (e == 3.0f) return run([](const auto& x) { return x.cube(); }), absl::OkStatus();
          if (e == 1.0f) return run([](const auto& x) { return x; }), absl::OkStatus();
          if (e == 0.5f) return run([](const auto& x) { return x.sqrt(); }), absl::OkStatus();
          if (e == -1.0f) return run([](const auto& x) { return x.inverse(); }), absl::OkStatus();
        }
      }
      Binary<TA, TB, TA>(a, *b, o, pool, [](const TA& x, const TB& y) { return PowOne<TA, TB>(x, y); });
      return absl::OkStatus();
    });
  });
}

// ---- PRelu

absl::Status PReluKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 2); !s.ok()) return s;
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  if (slope.dtype() != x.dtype()) {
    return InvalidArgument(ctx, "slope type ", DTypeName(slope.dtype()), " differs from input ", DTypeName(x.dtype()));
  }
  // Before opset 7 a 1-D slope of size C applies per channel (axis 1).
  if (ctx.opset() < 7 && slope.rank() == 1 && x.rank() > 2 && slope.dim(0) == x.dim(1) && x.dim(1) != 1) {
    Shape s(static_cast<size_t>(x.rank() - 1), 1);
    s[0] = x.dim(1);
    slope = slope.Reshaped(s);
  }
  absl::StatusOr<Shape> shape = OutShape(ctx, {x.shape(), slope.shape()});
  if (!shape.ok()) return shape.status();
  if (*shape != x.shape()) {
    return InvalidArgument(ctx, "slope ", ShapeToString(slope.shape()), " does not broadcast to X ", ShapeToString(x.shape()));
  }
  using TL = decltype(FloatTypes{} + Types<int32_t, int64_t, uint32_t, uint64_t>{});
  return Dispatch(TL{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Tensor& o = ctx.AllocateOutput(0, x.dtype(), x.shape());
    auto f = [](const T& v, const T& s) {
      const Acc<T> a = static_cast<Acc<T>>(v);
      return static_cast<T>(a < 0 ? a * static_cast<Acc<T>>(s) : a);
    };
    if constexpr (std::is_same_v<T, float>) {
      Binary<float, float, float>(x, slope, o, ctx.thread_pool(), f,
                                  [](const auto& v, const auto& s) { return (v < 0.0f).select(v * s, v); });
    } else {
      Binary<T, T, T>(x, slope, o, ctx.thread_pool(), f);
    }
    return absl::OkStatus();
  });
}

// ---- variadic Sum / Mean / Max / Min

template <typename TL, typename F, typename V = NoVec>
KernelFn VariadicOp(bool mean, F f, V vec = nullptr) {
  return [mean, f, vec](OpContext& ctx) -> absl::Status {
    const size_t n = ctx.num_inputs();
    if (n == 0) return InvalidArgument(ctx, "needs at least one input");
    if (absl::Status s = NeedInputs(ctx, n); !s.ok()) return s;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < n; ++i) {
      if (ctx.input(i).dtype() != ctx.input(0).dtype()) {
        return InvalidArgument(ctx, "input ", i, " has type ", DTypeName(ctx.input(i).dtype()), ", input 0 has ",
                               DTypeName(ctx.input(0).dtype()));
      }
      shapes.push_back(ctx.input(i).shape());
    }
    absl::StatusOr<Shape> shape = OutShape(ctx, shapes);
    if (!shape.ok()) return shape.status();
    const Tensor& first = ctx.input(0);
    if (n == 1 && first.shape() == *shape) {
      ctx.SetOutput(0, first);
      return absl::OkStatus();
    }
    return Dispatch(TL{}, ctx, first.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& o = ctx.AllocateOutput(0, first.dtype(), *shape);
      ThreadPool* pool = ctx.thread_pool();
      // o = broadcast(input 0), then o = f(o, input i) in place.
      const T* p0 = first.data<T>();
      T* po = o.data<T>();
      ForEachRun(MakeBcast(*shape, {&first.shape()}), pool, [&](int64_t oo, const Offs& io, int64_t m, const Offs& s) {
        for (int64_t i = 0; i < m; ++i) po[oo + i] = p0[io[0] + i * s[0]];
      });
      for (size_t k = 1; k < n; ++k) {
        if constexpr (std::is_same_v<T, float> && !std::is_same_v<V, NoVec>) {
          Binary<float, float, float>(o, ctx.input(k), o, pool, f, vec);
        } else {
          Binary<T, T, T>(o, ctx.input(k), o, pool,
                          [&](const T& x, const T& y) { return f(static_cast<Acc<T>>(x), static_cast<Acc<T>>(y)); });
        }
      }
      if (mean) {
        const Acc<T> inv_n = static_cast<Acc<T>>(n);
        for (int64_t i = 0; i < o.num_elements(); ++i) po[i] = static_cast<T>(static_cast<Acc<T>>(po[i]) / inv_n);
      }
      return absl::OkStatus();
    });
  };
}

// Add, Sub, Mul, Div: opsets 1 and 6 (their own broadcast and axis attributes) as plain kernels;
// from 7 (numpy broadcasting) elementwise by row, so that a batched decode step adds every run's
// rows in one call (each element's one IEEE operation is the same wherever it sits).
void AddArithmetic(KernelRegistry& r, const std::string& op, const KernelFn& fn) {
  r.Add("", op, 1, 5, MakeFnKernel(fn));
  r.Add("", op, 6, 6, MakeFnKernel(fn));
  AddVersions(r, op, {7, 13, 14}, MakeRowwiseFnKernel(fn));
}

}  // namespace

void RegisterBinaryOps(KernelRegistry& r) {
  // ---- binary arithmetic
  // Scalar forms wrap integers around (WrapAdd, ...); the vector forms see float arrays only.
  auto add = [](auto x, auto y) { return WrapAdd(x, y); };
  auto sub = [](auto x, auto y) { return WrapSub(x, y); };
  auto mul = [](auto x, auto y) { return WrapMul(x, y); };
  auto vadd = [](const auto& x, const auto& y) { return x + y; };
  auto vsub = [](const auto& x, const auto& y) { return x - y; };
  auto vmul = [](const auto& x, const auto& y) { return x * y; };
  AddArithmetic(r, "Add", BinaryOp<NumTypes, false>(add, vadd));
  AddArithmetic(r, "Sub", BinaryOp<NumTypes, false>(sub, vsub));
  AddArithmetic(r, "Mul", BinaryOp<NumTypes, false>(mul, vmul));
  AddArithmetic(r, "Div", BinaryOp<NumTypes, false>(
                                         [](auto x, auto y) {
                                           if constexpr (std::is_integral_v<decltype(x)>) return IntDiv(x, y);
                                           else return x / y;
                                         },
                                         [](const auto& x, const auto& y) { return x / y; }));
  AddVersions(r, "Pow", {1, 7, 12, 13, 15}, PowKernel);
  AddVersions(r, "Mod", {10, 13}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const int64_t fmod = init.node().GetInt("fmod", 0);
        if (fmod == 1) {
          return BinaryOp<NumTypes, false>([](auto x, auto y) {
            if constexpr (std::is_integral_v<decltype(x)>) return IntFMod(x, y);
            else return std::fmod(x, y);
          });
        }
        if (fmod != 0) return Unimplemented(init.node(), "unsupported fmod ", fmod);
        return BinaryOp<NumTypes, false>([](auto x, auto y) {
          if constexpr (std::is_integral_v<decltype(x)>) {
            return IntMod(x, y);
          } else {  // numpy mod: the result takes the divisor's sign
            auto m = std::fmod(x, y);
            return (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
          }
        });
      }));
  AddVersions(r, "BitShift", {11}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const std::string dir = init.node().GetString("direction", "");
        if (dir != "LEFT" && dir != "RIGHT") return Unimplemented(init.node(), "unsupported direction '", dir, "'");
        const bool left = dir == "LEFT";
        return BinaryOp<UIntTypes, false>([left](auto x, auto y) {
          using T = decltype(x);
          if (y >= sizeof(T) * 8) return T(0);  // shifting out every bit; avoids UB
          return static_cast<T>(left ? x << y : x >> y);
        });
      }));
  AddVersions(r, "BitwiseAnd", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x & y); }));
  AddVersions(r, "BitwiseOr", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x | y); }));
  AddVersions(r, "BitwiseXor", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x ^ y); }));


  AddVersions(r, "PRelu", {1, 6, 7, 9, 16}, PReluKernel);

  // ---- variadic
  AddVersions(r, "Sum", {1, 6, 8, 13}, VariadicOp<NumTypes>(false, add, vadd));
  AddVersions(r, "Mean", {1, 6, 8, 13}, VariadicOp<FloatTypes>(true, add, vadd));
  AddVersions(r, "Max", {1, 6, 8, 12, 13}, VariadicOp<NumTypes>(false, [](auto x, auto y) { return MaxNaN(x, y); }));
  AddVersions(r, "Min", {1, 6, 8, 12, 13}, VariadicOp<NumTypes>(false, [](auto x, auto y) { return MinNaN(x, y); }));
}

}  // namespace oneinfer
