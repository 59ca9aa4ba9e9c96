// Helpers shared by the elementwise families (ops/unary.cc, binary.cc, logic.cc, cast.cc): dtype
// sets and dispatch over them, broadcasting iteration, and the builders of same-type unary and
// binary kernels.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer::elementwise {

constexpr int64_t kParallelMin = 1 << 16;  // below this, threading costs more than it saves
// Binary ops stream three arrays with one operation an element: two threads pay from 16K elements
// (a batched decode step's stacked [16, 3072] Mul: ~34 -> ~20 us).
constexpr int64_t kParallelMinBinary = 1 << 14;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;
// Arithmetic type for T: the 16-bit floats compute in float.
template <typename T>
using Acc = std::conditional_t<kIsHalf<T>, float, T>;

// Integer +, -, * wrap around in two's complement, as numpy and ONNX Runtime do. Signed overflow
// is undefined behaviour in C++ (and uint16 * uint16 overflows int after promotion), so integers
// go through an unsigned type at least as wide as unsigned int (found by fuzz_model under UBSan).
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <typename T>
T WrapAdd(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<WrapType<T>>(x) + static_cast<WrapType<T>>(y));
  } else {
    return x + y;
  }
}
template <typename T>
T WrapSub(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<WrapType<T>>(x) - static_cast<WrapType<T>>(y));
  } else {
    return x - y;
  }
}
template <typename T>
T WrapMul(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return static_cast<T>(static_cast<WrapType<T>>(x) * static_cast<WrapType<T>>(y));
  } else {
    return x * y;
  }
}

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

// Error unless the first n inputs are present.
absl::Status NeedInputs(const OpContext& ctx, size_t n);

// ---- broadcasting iteration

// The output index space with adjacent dims merged where every input walks them alike.
struct Bcast {
  std::vector<int64_t> dims;                // outer to inner
  std::vector<std::array<int64_t, 3>> st;   // per dim, per input element stride (0 = broadcast)
  int64_t total = 0;
};

// The broadcast iteration space of `out` for up to three inputs.
Bcast MakeBcast(const Shape& out, std::initializer_list<const Shape*> ins);

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
  ParallelFor(pool, b.total, kParallelMinBinary, [&](int64_t begin, int64_t end) {
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

// float16 o = vec(a, b) for the IEEE operations (+, -, *, /): each run is widened a block at a
// time (F16C), computed in float32 and rounded once, which is what the scalar path computes per
// element (float16 arithmetic in float32, as ONNX Runtime's CPU kernels do), without a software
// conversion per element. o may be a or b itself (same shape: a block is read before it is written).
template <typename V>
void BinaryHalf(const Tensor& a, const Tensor& b, Tensor& o, ThreadPool* pool, const V& vec) {
  const Bcast bc = MakeBcast(o.shape(), {&a.shape(), &b.shape()});
  const auto* pa = reinterpret_cast<const uint16_t*>(a.raw_data());
  const auto* pb = reinterpret_cast<const uint16_t*>(b.raw_data());
  auto* po = reinterpret_cast<uint16_t*>(o.raw_data());
  ForEachRun(bc, pool, [&](int64_t oo, const Offs& io, int64_t n, const Offs& s) {
    constexpr int64_t kBlock = 256;
    float x0[kBlock], x1[kBlock], y[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      if (s[0]) WidenF16(pa + io[0] + i, x0, m);
      else std::fill_n(x0, m, F16ToF32(pa[io[0]]));
      if (s[1]) WidenF16(pb + io[1] + i, x1, m);
      else std::fill_n(x1, m, F16ToF32(pb[io[1]]));
      MapF(y, m) = vec(CMapF(x0, m), CMapF(x1, m));
      NarrowToF16(y, po + oo + i, m);
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

// float16 y = vec(x): blocks widened (F16C), the float32 kernel's arithmetic, rounded once: what
// the float32 op gives on the widened input (ONNX Runtime's CPU provider also runs float16
// activations through float32). y may be x itself (a block is read before it is written).
template <typename V>
void UnaryHalf(const Tensor& x, Tensor& y, ThreadPool* pool, const V& vec) {
  const auto* px = reinterpret_cast<const uint16_t*>(x.raw_data());
  auto* py = reinterpret_cast<uint16_t*>(y.raw_data());
  ParallelFor(pool, x.num_elements(), kParallelMin, [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 256;
    float xf[kBlock], yf[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t m = std::min(kBlock, e - i);
      WidenF16(px + i, xf, m);
      MapF(yf, m) = vec(CMapF(xf, m));
      NarrowToF16(yf, py + i, m);
    }
  });
}

// Same-type unary op over TL: f maps Acc<T> values, vec (optional) float arrays (float16 too).
template <typename TL, typename F, typename V = NoVec>
KernelFn UnaryOp(F f, V vec = nullptr) {
  return [f, vec](OpContext& ctx) -> absl::Status {
    if (absl::Status s = NeedInputs(ctx, 1); !s.ok()) return s;
    const Tensor& x = ctx.input(0);
    return Dispatch(TL{}, ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      Tensor* reused = ctx.ReuseInputAsOutput(0, 0, x.dtype(), x.shape());
      // Not zeroed: every path below writes every element (a 16-sequence step spent ~1 % in memset).
      Tensor& y = reused != nullptr ? *reused : ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
      if constexpr (std::is_same_v<T, float> && !std::is_same_v<V, NoVec>) {
        Unary<float, float>(x, y, ctx.thread_pool(), f, vec);
      } else if constexpr (std::is_same_v<T, float16> && !std::is_same_v<V, NoVec>) {
        UnaryHalf(x, y, ctx.thread_pool(), vec);
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
absl::StatusOr<Tensor> LegacyAlign(const OpContext& ctx, const Tensor& a, const Tensor& b);

// Output shape of a broadcasting op, as an error naming the node.
absl::StatusOr<Shape> OutShape(const OpContext& ctx, const std::vector<Shape>& shapes);

// Same-type binary op over TL with broadcasting; f maps Acc<T> pairs. The result has the
// input type, or bool when kBoolOut. vec (optional) must give f's float results bit for bit
// (the IEEE +, -, *, /): float32 and float16 run through it.
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
      // The result may overwrite an input of its own shape that nothing reads afterwards (b only
      // when LegacyAlign left it as it came).
      Tensor* reused = ctx.ReuseInputAsOutput(0, 0, DTypeOf<TO>(), *shape);
      if (reused == nullptr && b->raw_data() == ctx.input(1).raw_data()) {
        reused = ctx.ReuseInputAsOutput(1, 0, DTypeOf<TO>(), *shape);
      }
      // Not zeroed: Binary and BinaryHalf write every element of the broadcast result.
      Tensor& o = reused != nullptr ? *reused : ctx.AllocateOutputUninitialized(0, DTypeOf<TO>(), *shape);
      if constexpr (std::is_same_v<T, float> && !kBoolOut && !std::is_same_v<V, NoVec>) {
        Binary<float, float, float>(a, *b, o, ctx.thread_pool(), f, vec);
      } else if constexpr (std::is_same_v<T, float16> && !kBoolOut && !std::is_same_v<V, NoVec>) {
        BinaryHalf(a, *b, o, ctx.thread_pool(), vec);
      } else {
        Binary<T, T, TO>(a, *b, o, ctx.thread_pool(),
                         [&](const T& x, const T& y) { return f(static_cast<Acc<T>>(x), static_cast<Acc<T>>(y)); });
      }
      return absl::OkStatus();
    });
  };
}

}  // namespace oneinfer::elementwise
