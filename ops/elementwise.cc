// Elementwise operators: unary math, activations, broadcasting binary ops, variadic
// Sum/Mean/Max/Min, Where, Clip and Cast/CastLike.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "absl/strings/ascii.h"
#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

constexpr int64_t kParallelMin = 1 << 16;  // below this, threading costs more than it saves
constexpr int kLastOpset = 21;
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // for the tanh form of GELU

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;
// Arithmetic type for T: the 16-bit floats compute in float.
template <typename T>
using Acc = std::conditional_t<kIsHalf<T>, float, T>;

// ---- dtype sets and dispatch over them

template <typename... Ts>
struct Types {};
template <typename... A, typename... B>
constexpr Types<A..., B...> operator+(Types<A...>, Types<B...>) { return {}; }
using FloatTypes = Types<float, double, float16, bfloat16>;
using SIntTypes = Types<int8_t, int16_t, int32_t, int64_t>;
using UIntTypes = Types<uint8_t, uint16_t, uint32_t, uint64_t>;
using IntTypes = decltype(SIntTypes{} + UIntTypes{});
using NumTypes = decltype(FloatTypes{} + IntTypes{});
using SignedTypes = decltype(FloatTypes{} + SIntTypes{});
using BoolType = Types<bool>;
using AllTypes = decltype(NumTypes{} + BoolType{} + Types<std::string>{});

template <typename... Ts, typename Fn>
absl::Status Dispatch(Types<Ts...>, const OpContext& ctx, DType d, Fn&& fn) {
  absl::Status s;
  const bool hit = ((d == DTypeOf<Ts>() && (s = fn(TypeTag<Ts>{}), true)) || ...);
  if (!hit) return InvalidArgument(ctx, "element type ", DTypeName(d), " is not supported");
  return s;
}

absl::Status NeedInputs(const OpContext& ctx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "input ", i, " is missing");
  }
  return absl::OkStatus();
}

// ---- broadcasting iteration

// The output index space with adjacent dims merged where every input walks them alike.
struct Bcast {
  std::vector<int64_t> dims;                // outer to inner
  std::vector<std::array<int64_t, 3>> st;   // per dim, per input element stride (0 = broadcast)
  int64_t total = 0;
};

Bcast MakeBcast(const Shape& out, std::initializer_list<const Shape*> ins) {
  Bcast b;
  b.total = NumElements(out);
  std::vector<std::vector<int64_t>> s;
  for (const Shape* in : ins) s.push_back(BroadcastStrides(*in, out));
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::array<int64_t, 3> cur{};
    for (size_t k = 0; k < s.size(); ++k) cur[k] = s[k][d];
    if (!b.dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < s.size(); ++k) merge = merge && b.st.back()[k] == cur[k] * out[d];
      if (merge) {
        b.dims.back() *= out[d];
        b.st.back() = cur;
        continue;
      }
    }
    b.dims.push_back(out[d]);
    b.st.push_back(cur);
  }
  return b;
}

using Offs = std::array<int64_t, 3>;

// Calls body(out_offset, in_offsets, n, inner_strides) for each contiguous run of the output;
// inner strides are 0 (broadcast) or 1.
template <typename Body>
void ForEachRun(const Bcast& b, ThreadPool* pool, const Body& body) {
  if (b.total == 0) return;
  if (b.dims.empty()) {
    body(int64_t{0}, Offs{}, int64_t{1}, Offs{});
    return;
  }
  const int nd = static_cast<int>(b.dims.size());
  const int64_t inner = b.dims.back();
  const Offs ist = b.st.back();
  ParallelFor(pool, b.total, kParallelMin, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    Offs off{};
    int64_t row = begin / inner;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = row % b.dims[d];
      row /= b.dims[d];
      for (int k = 0; k < 3; ++k) off[k] += idx[d] * b.st[d][k];
    }
    int64_t col = begin % inner, pos = begin;
    while (pos < end) {
      const int64_t n = std::min(inner - col, end - pos);
      Offs o;
      for (int k = 0; k < 3; ++k) o[k] = off[k] + col * ist[k];
      body(pos, o, n, ist);
      pos += n;
      col = 0;
      for (int d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < 3; ++k) off[k] += b.st[d][k];
        if (++idx[d] < b.dims[d]) break;
        for (int k = 0; k < 3; ++k) off[k] -= b.dims[d] * b.st[d][k];
        idx[d] = 0;
      }
    }
  });
}

using ArrF = Eigen::Array<float, Eigen::Dynamic, 1>;
using MapF = Eigen::Map<ArrF>;
using CMapF = Eigen::Map<const ArrF>;
using NoVec = std::nullptr_t;

// o = f(a, b) elementwise with numpy broadcasting (o already has the broadcast shape).
// vec, when given, computes the same on float Eigen arrays (TA = TB = TO = float).
template <typename TA, typename TB, typename TO, typename F, typename V = NoVec>
void Binary(const Tensor& a, const Tensor& b, Tensor& o, ThreadPool* pool, const F& f,
            const V& vec = nullptr) {
  const Bcast bc = MakeBcast(o.shape(), {&a.shape(), &b.shape()});
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TO* po = o.data<TO>();
  ForEachRun(bc, pool, [&](int64_t oo, const Offs& io, int64_t n, const Offs& s) {
    TO* y = po + oo;
    const TA* x0 = pa + io[0];
    const TB* x1 = pb + io[1];
    if constexpr (!std::is_same_v<V, NoVec>) {
      MapF Y(y, n);
      if (s[0] && s[1]) Y = vec(CMapF(x0, n), CMapF(x1, n));
      else if (s[0]) Y = vec(CMapF(x0, n), ArrF::Constant(n, *x1));
      else if (s[1]) Y = vec(ArrF::Constant(n, *x0), CMapF(x1, n));
      else Y.setConstant(static_cast<TO>(f(*x0, *x1)));
    } else if (s[0] && s[1]) {
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TO>(f(x0[i], x1[i]));
    } else if (s[0]) {
      const TB v = *x1;
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TO>(f(x0[i], v));
    } else if (s[1]) {
      const TA v = *x0;
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TO>(f(v, x1[i]));
    } else {
      std::fill(y, y + n, static_cast<TO>(f(*x0, *x1)));
    }
  });
}

// y = f(x) elementwise; vec, when given, does it on float Eigen arrays.
template <typename TI, typename TO, typename F, typename V = NoVec>
void Unary(const Tensor& x, Tensor& y, ThreadPool* pool, const F& f, const V& vec = nullptr) {
  const TI* px = x.data<TI>();
  TO* py = y.data<TO>();
  ParallelFor(pool, x.num_elements(), kParallelMin, [&](int64_t b, int64_t e) {
    if constexpr (!std::is_same_v<V, NoVec>) {
      MapF(py + b, e - b) = vec(CMapF(px + b, e - b));
    } else {
      for (int64_t i = b; i < e; ++i) py[i] = static_cast<TO>(f(px[i]));
    }
  });
}

// ---- kernel builders

// Builds a kernel at load time: make(init) returns the KernelFn (or an attribute error).
template <typename Make>
KernelFactory WithInit(Make make) {
  return [make](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::StatusOr<KernelFn> fn = make(init);
    if (!fn.ok()) return fn.status();
    return MakeFnKernel(*std::move(fn))(init);
  };
}

// Registers one kernel for each since-version in `since` (each up to the next one, the last up to 21).
void Reg(KernelRegistry& r, const char* op, std::initializer_list<int> since, const KernelFactory& f) {
  const std::vector<int> v(since);
  for (size_t i = 0; i < v.size(); ++i) r.Add("", op, v[i], i + 1 < v.size() ? v[i + 1] - 1 : kLastOpset, f);
}
void RegFn(KernelRegistry& r, const char* op, std::initializer_list<int> since, KernelFn fn) {
  Reg(r, op, since, MakeFnKernel(std::move(fn)));
}

// Same-type unary op over TL: f maps Acc<T> values, vec (optional) float arrays.
template <typename TL, typename F, typename V = NoVec>
KernelFn UnaryOp(F f, V vec = nullptr) {
  return [f, vec](OpContext& ctx) -> absl::Status {
    if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
    const Tensor& x = ctx.input(0);
    return Dispatch(TL{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
      if constexpr (std::is_same_v<T, float> && !std::is_same_v<V, NoVec>) {
        Unary<float, float>(x, y, ctx.thread_pool(), f, vec);
      } else {
        Unary<T, T>(x, y, ctx.thread_pool(), [&](T v) { return static_cast<T>(f(static_cast<Acc<T>>(v))); });
      }
      return absl::OkStatus();
    });
  };
}

// Unary op over TL with a bool result.
template <typename TL, typename F>
KernelFn PredicateOp(F f) {
  return [f](OpContext& ctx) -> absl::Status {
    if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
    const Tensor& x = ctx.input(0);
    return Dispatch(TL{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, DType::kBool, x.shape());
      Unary<T, bool>(x, y, ctx.thread_pool(), [&](T v) { return f(static_cast<Acc<T>>(v)); });
      return absl::OkStatus();
    });
  };
}

// Before opset 7, binary ops broadcast only with broadcast=1, b's dims matching a's from `axis`.
absl::StatusOr<Tensor> LegacyAlign(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.node().GetInt("broadcast", 0) == 0) return b;
  const int64_t ra = a.rank(), rb = b.rank();
  int64_t axis = ctx.node().GetInt("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (rb > ra || axis < 0 || axis + rb > ra) {
    return InvalidArgument(ctx, "cannot broadcast ", ShapeToString(b.shape()), " onto ", ShapeToString(a.shape()),
                           " at axis ", ctx.node().GetInt("axis", ra - rb));
  }
  Shape s(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) s[axis + i] = b.dim(i);
  return b.Reshaped(s);
}

// Output shape of a broadcasting op, as an error naming the node.
absl::StatusOr<Shape> OutShape(const OpContext& ctx, const std::vector<Shape>& shapes) {
  absl::StatusOr<Shape> s = BroadcastShapes(shapes);
  if (!s.ok()) return InvalidArgument(ctx, s.status().message());
  return s;
}

// Same-type binary op over TL with broadcasting; f maps Acc<T> pairs. The result has the
// input type, or bool when kBoolOut.
template <typename TL, bool kBoolOut, typename F, typename V = NoVec>
KernelFn BinaryOp(F f, V vec = nullptr) {
  return [f, vec](OpContext& ctx) -> absl::Status {
    if (absl::Status s = NeedInputs(ctx, 2); !s.ok()) return s;
    const Tensor& a = ctx.input(0);
    if (ctx.input(1).dtype() != a.dtype()) {
      return InvalidArgument(ctx, "input types differ: ", DTypeName(a.dtype()), " and ", DTypeName(ctx.input(1).dtype()));
    }
    absl::StatusOr<Tensor> b = LegacyAlign(ctx, a, ctx.input(1));
    if (!b.ok()) return b.status();
    absl::StatusOr<Shape> shape = OutShape(ctx, {a.shape(), b->shape()});
    if (!shape.ok()) return shape.status();
    return Dispatch(TL{}, ctx, a.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using TO = std::conditional_t<kBoolOut, bool, T>;
      Tensor& o = ctx.AllocateOutput(0, DTypeOf<TO>(), *shape);
      if constexpr (std::is_same_v<T, float> && !kBoolOut && !std::is_same_v<V, NoVec>) {
        Binary<float, float, float>(a, *b, o, ctx.thread_pool(), f, vec);
      } else {
        Binary<T, T, TO>(a, *b, o, ctx.thread_pool(),
                         [&](const T& x, const T& y) { return f(static_cast<Acc<T>>(x), static_cast<Acc<T>>(y)); });
      }
      return absl::OkStatus();
    });
  };
}

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
T Sign(T x) {
  if constexpr (std::is_unsigned_v<T>) return x > 0 ? 1 : 0;
  else return x > 0 ? T(1) : x < 0 ? T(-1) : x;  // keeps 0 and NaN
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

// ---- Where, PRelu

absl::Status WhereKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 3); !s.ok()) return s;
  const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  if (c.dtype() != DType::kBool) return InvalidArgument(ctx, "condition must be bool, got ", DTypeName(c.dtype()));
  if (x.dtype() != y.dtype()) {
    return InvalidArgument(ctx, "X and Y types differ: ", DTypeName(x.dtype()), " and ", DTypeName(y.dtype()));
  }
  absl::StatusOr<Shape> shape = OutShape(ctx, {c.shape(), x.shape(), y.shape()});
  if (!shape.ok()) return shape.status();
  return Dispatch(AllTypes{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    Tensor& o = ctx.AllocateOutput(0, x.dtype(), *shape);
    const Bcast bc = MakeBcast(*shape, {&c.shape(), &x.shape(), &y.shape()});
    const bool* pc = c.data<bool>();
    const T *px = x.data<T>(), *py = y.data<T>();
    T* po = o.data<T>();
    ForEachRun(bc, ctx.thread_pool(), [&](int64_t oo, const Offs& io, int64_t n, const Offs& s) {
      for (int64_t i = 0; i < n; ++i) {
        po[oo + i] = pc[io[0] + i * s[0]] ? px[io[1] + i * s[1]] : py[io[2] + i * s[2]];
      }
    });
    return absl::OkStatus();
  });
}

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

// ---- Cast

// Shortest round-trip digits of v, as numpy's str() prints them.
template <typename T>
std::string FloatToString(T v) {
  const double d = static_cast<double>(static_cast<Acc<T>>(v));
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  char* end = buf;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    end = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific).ptr;
  } else {
    for (int p = 1; p <= 9; ++p) {  // fewest digits that read back as the same 16-bit value
      end = buf + std::snprintf(buf, sizeof(buf), "%.*e", p - 1, d);
      if (static_cast<float>(T(std::strtof(buf, nullptr))) == static_cast<float>(v)) break;
    }
  }
  const std::string s(buf, end);  // [-]d[.ddd]e±x
  const size_t epos = s.find('e');
  const bool neg = s[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < epos; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int e = std::atoi(s.c_str() + epos + 1);
  std::string out = neg ? "-" : "";
  if (e >= -4 && e < 16) {  // numpy prints positionally in [1e-4, 1e16)
    if (e >= 0) {
      const size_t ip = static_cast<size_t>(e) + 1;
      if (digits.size() <= ip) out += digits + std::string(ip - digits.size(), '0') + ".0";
      else out += digits.substr(0, ip) + "." + digits.substr(ip);
    } else {
      out += "0." + std::string(static_cast<size_t>(-e - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::snprintf(buf, sizeof(buf), "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    out += buf;
  }
  return out;
}

template <typename T>
std::string ToString(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
  else if constexpr (kIsFloat<T>) return FloatToString(v);
  else return std::to_string(v);
}

// Parses a whole string (surrounding blanks allowed) as T; false when it is not a number.
template <typename T>
bool ParseString(const std::string& str, T* out) {
  const std::string s(absl::StripAsciiWhitespace(str));
  if (s.empty()) return false;
  char* end = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    const std::string l = absl::AsciiStrToLower(s);
    if (l == "true") return *out = true, true;
    if (l == "false") return *out = false, true;
    const double d = std::strtod(s.c_str(), &end);
    *out = d != 0;
  } else if constexpr (std::is_same_v<T, float> || kIsHalf<T>) {
    *out = static_cast<T>(std::strtof(s.c_str(), &end));
  } else if constexpr (std::is_same_v<T, double>) {
    *out = std::strtod(s.c_str(), &end);
  } else if constexpr (std::is_signed_v<T>) {
    const long long v = std::strtoll(s.c_str(), &end, 10);
    *out = static_cast<T>(v);
  } else {
    if (s[0] == '-') return false;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    *out = static_cast<T>(v);
  }
  return end == s.c_str() + s.size();
}

template <typename From, typename To>
To Convert(const From& v) {
  using A = Acc<From>;
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<A>(v) != A(0);
  } else if constexpr (kIsHalf<To>) {
    return To(static_cast<float>(static_cast<A>(v)));
  } else if constexpr (std::is_integral_v<To> && kIsFloat<From>) {
    // Float to integer without UB: in-range values truncate, narrower types wrap like C on x86.
    const double d = static_cast<double>(static_cast<A>(v));
    if (d > -9.2e18 && d < 9.2e18) return static_cast<To>(static_cast<int64_t>(d));
    if (std::is_same_v<To, uint64_t> && d >= 0 && d < 1.8e19) return static_cast<To>(d);
    return std::numeric_limits<To>::min();
  } else {
    return static_cast<To>(static_cast<A>(v));
  }
}

using CastTypes = decltype(NumTypes{} + BoolType{});

absl::Status CastTo(OpContext& ctx, const Tensor& x, DType to) {
  if (x.dtype() == to) {
    ctx.SetOutput(0, x);
    return absl::OkStatus();
  }
  ThreadPool* pool = ctx.thread_pool();
  if (to == DType::kString) {
    return Dispatch(CastTypes{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      Unary<T, std::string>(x, y, pool, [](const T& v) { return ToString(v); });
      return absl::OkStatus();
    });
  }
  if (x.dtype() == DType::kString) {
    return Dispatch(CastTypes{}, ctx, to, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      const std::string* px = x.data<std::string>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        if (!ParseString(px[i], &py[i])) {
          return InvalidArgument(ctx, "cannot parse '", px[i], "' as ", DTypeName(to));
        }
      }
      return absl::OkStatus();
    });
  }
  return Dispatch(CastTypes{}, ctx, x.dtype(), [&](auto from) -> absl::Status {
    using From = typename decltype(from)::type;
    return Dispatch(CastTypes{}, ctx, to, [&](auto tag) -> absl::Status {
      using To = typename decltype(tag)::type;
      Tensor& y = ctx.AllocateOutput(0, to, x.shape());
      Unary<From, To>(x, y, pool, [](const From& v) { return Convert<From, To>(v); });
      return absl::OkStatus();
    });
  });
}

bool CastableType(DType d) {
  switch (d) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
    case DType::kBool: case DType::kString:
      return true;
    default:
      return false;
  }
}

KernelFactory CastFactory() {
  return WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& node = init.node();
    const Attribute* a = node.FindAttr("to");
    if (a == nullptr) return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": attribute 'to' is missing"));
    DType to = DType::kUndefined;
    if (a->type == Attribute::Type::kString) {  // opset 1 names the type
      static const std::pair<const char*, DType> kNames[] = {
          {"FLOAT", DType::kFloat32}, {"DOUBLE", DType::kFloat64}, {"FLOAT16", DType::kFloat16},
          {"BFLOAT16", DType::kBFloat16}, {"INT8", DType::kInt8}, {"INT16", DType::kInt16},
          {"INT32", DType::kInt32}, {"INT64", DType::kInt64}, {"UINT8", DType::kUInt8},
          {"UINT16", DType::kUInt16}, {"UINT32", DType::kUInt32}, {"UINT64", DType::kUInt64},
          {"BOOL", DType::kBool}, {"STRING", DType::kString}};
      for (const auto& [name, d] : kNames) {
        if (absl::AsciiStrToUpper(a->s) == name) to = d;
      }
      if (to == DType::kUndefined) return Unimplemented(node, "unsupported Cast target type '", a->s, "'");
    } else {
      to = static_cast<DType>(a->i);
      if (!CastableType(to)) return Unimplemented(node, "unsupported Cast target type ", a->i);
    }
    return KernelFn([to](OpContext& ctx) -> absl::Status {
      if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
      return CastTo(ctx, ctx.input(0), to);
    });
  });
}

absl::Status CastLikeKernel(OpContext& ctx) {
  if (absl::Status s = NeedInputs(ctx, 2); !s.ok()) return s;
  return CastTo(ctx, ctx.input(0), ctx.input(1).dtype());
}

// ---- activations with attributes

// A unary op whose function depends on attributes read at load time: make(node) -> KernelFn.
template <typename Make>
KernelFactory AttrUnary(Make make) {
  return WithInit([make](const KernelInit& init) -> absl::StatusOr<KernelFn> { return make(init.node()); });
}

}  // namespace

void RegisterElementwiseOps(KernelRegistry& r) {
  // ---- unary math
  RegFn(r, "Abs", {1, 6, 13}, UnaryOp<NumTypes>([](auto x) {
          if constexpr (std::is_unsigned_v<decltype(x)>) return x;
          else return x < 0 ? -x : x;
        }, [](const auto& x) { return x.abs(); }));
  RegFn(r, "Neg", {1, 6, 13}, UnaryOp<SignedTypes>([](auto x) { return -x; }, [](const auto& x) { return -x; }));
  RegFn(r, "Reciprocal", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return decltype(x)(1) / x; },
                                                         [](const auto& x) { return x.inverse(); }));
  RegFn(r, "Sqrt", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::sqrt(x); },
                                                   [](const auto& x) { return x.sqrt(); }));
  RegFn(r, "Exp", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::exp(x); },
                                                  [](const auto& x) { return x.exp(); }));
  RegFn(r, "Log", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::log(x); },
                                                  [](const auto& x) { return x.log(); }));
  RegFn(r, "Tanh", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::tanh(x); },
                                                   [](const auto& x) { return x.tanh(); }));
  RegFn(r, "Sigmoid", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return 1 / (1 + std::exp(-x)); },
                                                      [](const auto& x) { return x.logistic(); }));
  RegFn(r, "Erf", {9, 13}, UnaryOp<FloatTypes>([](auto x) { return std::erf(x); }));
  RegFn(r, "Sin", {7}, UnaryOp<FloatTypes>([](auto x) { return std::sin(x); }));
  RegFn(r, "Cos", {7}, UnaryOp<FloatTypes>([](auto x) { return std::cos(x); }));
  RegFn(r, "Tan", {7}, UnaryOp<FloatTypes>([](auto x) { return std::tan(x); }));
  RegFn(r, "Asin", {7}, UnaryOp<FloatTypes>([](auto x) { return std::asin(x); }));
  RegFn(r, "Acos", {7}, UnaryOp<FloatTypes>([](auto x) { return std::acos(x); }));
  RegFn(r, "Atan", {7}, UnaryOp<FloatTypes>([](auto x) { return std::atan(x); }));
  RegFn(r, "Sinh", {9}, UnaryOp<FloatTypes>([](auto x) { return std::sinh(x); }));
  RegFn(r, "Cosh", {9}, UnaryOp<FloatTypes>([](auto x) { return std::cosh(x); }));
  RegFn(r, "Asinh", {9}, UnaryOp<FloatTypes>([](auto x) { return std::asinh(x); }));
  RegFn(r, "Acosh", {9}, UnaryOp<FloatTypes>([](auto x) { return std::acosh(x); }));
  RegFn(r, "Atanh", {9}, UnaryOp<FloatTypes>([](auto x) { return std::atanh(x); }));
  RegFn(r, "Floor", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::floor(x); },
                                                    [](const auto& x) { return x.floor(); }));
  RegFn(r, "Ceil", {1, 6, 13}, UnaryOp<FloatTypes>([](auto x) { return std::ceil(x); },
                                                   [](const auto& x) { return x.ceil(); }));
  // nearbyint rounds half to even in the default rounding mode.
  RegFn(r, "Round", {11}, UnaryOp<FloatTypes>([](auto x) { return std::nearbyint(x); }));
  RegFn(r, "Sign", {9, 13}, UnaryOp<NumTypes>([](auto x) { return Sign(x); }));
  RegFn(r, "IsNaN", {9, 13, 20}, PredicateOp<FloatTypes>([](auto x) { return std::isnan(x); }));
  Reg(r, "IsInf", {10, 20}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const bool pos = init.node().GetInt("detect_positive", 1) != 0;
        const bool neg = init.node().GetInt("detect_negative", 1) != 0;
        return PredicateOp<FloatTypes>([pos, neg](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); });
      }));
  RegFn(r, "Not", {1}, UnaryOp<BoolType>([](bool x) { return !x; }));
  RegFn(r, "BitwiseNot", {18}, UnaryOp<IntTypes>([](auto x) { return static_cast<decltype(x)>(~x); }));

  // ---- activations
  RegFn(r, "Relu", {1, 6, 13, 14}, UnaryOp<SignedTypes>([](auto x) { return x > 0 ? x : decltype(x)(0); },
                                                       [](const auto& x) { return x.max(0.0f); }));
  Reg(r, "LeakyRelu", {1, 6, 16}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 0.01f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; },
                                   [alpha](const auto& x) { return (x < 0.0f).select(x * alpha, x); });
      }));
  Reg(r, "Elu", {1, 6}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x < 0 ? decltype(x)(alpha) * std::expm1(x) : x; });
      }));
  Reg(r, "Selu", {1, 6}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.67326319217681884765625f);
        const float gamma = n.GetFloat("gamma", 1.05070102214813232421875f);
        return UnaryOp<FloatTypes>([alpha, gamma](auto x) {
          using T = decltype(x);
          return x > 0 ? T(gamma) * x : T(gamma) * (T(alpha) * std::exp(x) - T(alpha));
        });
      }));
  Reg(r, "Celu", {12}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) {
          using T = decltype(x);
          return x > 0 ? x : T(alpha) * std::expm1(x / T(alpha));
        });
      }));
  Reg(r, "HardSigmoid", {1, 6}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 0.2f), beta = n.GetFloat("beta", 0.5f);
        return UnaryOp<FloatTypes>([alpha, beta](auto x) {
          using T = decltype(x);
          return std::clamp(T(alpha) * x + T(beta), T(0), T(1));
        });
      }));
  RegFn(r, "HardSwish", {14}, UnaryOp<FloatTypes>([](auto x) {
          using T = decltype(x);
          return x * std::clamp(x / T(6) + T(0.5), T(0), T(1));
        }));
  RegFn(r, "Softplus", {1}, UnaryOp<FloatTypes>([](auto x) {
          return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));  // no overflow for big x
        }));
  RegFn(r, "Softsign", {1}, UnaryOp<FloatTypes>([](auto x) { return x / (1 + std::abs(x)); }));
  RegFn(r, "Mish", {18}, UnaryOp<FloatTypes>([](auto x) {
          return x * std::tanh(x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
        }));
  Reg(r, "ThresholdedRelu", {10}, AttrUnary([](const Node& n) {
        const float alpha = n.GetFloat("alpha", 1.0f);
        return UnaryOp<FloatTypes>([alpha](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
      }));
  Reg(r, "Shrink", {9}, AttrUnary([](const Node& n) {
        const double lambd = n.GetFloat("lambd", 0.5f), bias = n.GetFloat("bias", 0.0f);
        return UnaryOp<NumTypes>([lambd, bias](auto x) {
          const double v = static_cast<double>(x);
          return static_cast<decltype(x)>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
        });
      }));
  Reg(r, "Gelu", {20}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
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

  // ---- binary arithmetic
  auto add = [](auto x, auto y) { return x + y; };
  auto sub = [](auto x, auto y) { return x - y; };
  auto mul = [](auto x, auto y) { return x * y; };
  RegFn(r, "Add", {1, 6, 7, 13, 14}, BinaryOp<NumTypes, false>(add, add));
  RegFn(r, "Sub", {1, 6, 7, 13, 14}, BinaryOp<NumTypes, false>(sub, sub));
  RegFn(r, "Mul", {1, 6, 7, 13, 14}, BinaryOp<NumTypes, false>(mul, mul));
  RegFn(r, "Div", {1, 6, 7, 13, 14}, BinaryOp<NumTypes, false>(
                                         [](auto x, auto y) {
                                           if constexpr (std::is_integral_v<decltype(x)>) return IntDiv(x, y);
                                           else return x / y;
                                         },
                                         [](const auto& x, const auto& y) { return x / y; }));
  RegFn(r, "Pow", {1, 7, 12, 13, 15}, PowKernel);
  Reg(r, "Mod", {10, 13}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
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
  Reg(r, "BitShift", {11}, WithInit([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
        const std::string dir = init.node().GetString("direction", "");
        if (dir != "LEFT" && dir != "RIGHT") return Unimplemented(init.node(), "unsupported direction '", dir, "'");
        const bool left = dir == "LEFT";
        return BinaryOp<UIntTypes, false>([left](auto x, auto y) {
          using T = decltype(x);
          if (y >= sizeof(T) * 8) return T(0);  // shifting out every bit; avoids UB
          return static_cast<T>(left ? x << y : x >> y);
        });
      }));
  RegFn(r, "BitwiseAnd", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x & y); }));
  RegFn(r, "BitwiseOr", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x | y); }));
  RegFn(r, "BitwiseXor", {18}, BinaryOp<IntTypes, false>([](auto x, auto y) { return static_cast<decltype(x)>(x ^ y); }));

  // ---- comparisons and logic (bool results)
  using EqTypes = decltype(NumTypes{} + BoolType{} + Types<std::string>{});
  RegFn(r, "Equal", {1, 7, 11, 13, 19}, BinaryOp<EqTypes, true>([](const auto& x, const auto& y) { return x == y; }));
  RegFn(r, "Less", {1, 7, 9, 13}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x < y; }));
  RegFn(r, "Greater", {1, 7, 9, 13}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x > y; }));
  RegFn(r, "LessOrEqual", {12, 16}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x <= y; }));
  RegFn(r, "GreaterOrEqual", {12, 16}, BinaryOp<NumTypes, true>([](auto x, auto y) { return x >= y; }));
  RegFn(r, "And", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x && y; }));
  RegFn(r, "Or", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x || y; }));
  RegFn(r, "Xor", {1, 7}, BinaryOp<BoolType, true>([](bool x, bool y) { return x != y; }));

  RegFn(r, "Where", {9, 16}, WhereKernel);
  RegFn(r, "PRelu", {1, 6, 7, 9, 16}, PReluKernel);

  // ---- variadic
  RegFn(r, "Sum", {1, 6, 8, 13}, VariadicOp<NumTypes>(false, add, add));
  RegFn(r, "Mean", {1, 6, 8, 13}, VariadicOp<FloatTypes>(true, add, add));
  RegFn(r, "Max", {1, 6, 8, 12, 13}, VariadicOp<NumTypes>(false, [](auto x, auto y) { return MaxNaN(x, y); }));
  RegFn(r, "Min", {1, 6, 8, 12, 13}, VariadicOp<NumTypes>(false, [](auto x, auto y) { return MinNaN(x, y); }));

  Reg(r, "Clip", {1, 6, 11, 12, 13}, ClipFactory());
  Reg(r, "Cast", {1, 6, 9, 13, 19, 21}, CastFactory());
  RegFn(r, "CastLike", {15, 19, 21}, CastLikeKernel);
}

}  // namespace oneinfer
