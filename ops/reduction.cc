// Reductions (Reduce*, ArgMax/ArgMin), softmax family, CumSum, TopK, LayerNormalization.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

// Accumulation type: 16-bit floats accumulate in float.
template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<float16> { using type = float; };
template <> struct AccOf<bfloat16> { using type = float; };
template <> struct AccOf<bool> { using type = uint8_t; };  // not vector<bool>
template <typename T> using Acc = typename AccOf<T>::type;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// Elements per parallel chunk: below this, threading costs more than it saves.
constexpr int64_t kGrain = 16384;

int64_t RowsPerChunk(int64_t row_len) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, row_len)); }

// Builds a factory that parses attributes at load time and returns the run function.
template <typename MakeFn>
KernelFactory Factory(MakeFn make) {
  return [make](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::StatusOr<KernelFn> fn = make(init);
    if (!fn.ok()) return fn.status();
    return MakeFnKernel(*std::move(fn))(init);
  };
}

absl::Status CheckInput(const OpContext& ctx, size_t i, const char* what) {
  if (!ctx.has_input(i)) return InvalidArgument(ctx, "missing required input ", i, " (", what, ")");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Reduce*

enum class RK { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <typename A, RK K>
A Identity() {
  if constexpr (K == RK::kProd) return A(1);
  if constexpr (K == RK::kMax) {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  if constexpr (K == RK::kMin) {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  return A(0);
}

template <typename A, RK K>
inline A Combine(A a, A x) {
  if constexpr (K == RK::kProd) return a * x;
  if constexpr (K == RK::kMax) return (x > a || x != x) ? x : a;  // NaN propagates
  if constexpr (K == RK::kMin) return (x < a || x != x) ? x : a;
  else return a + x;
}

// Per-element transform before combining (shift is the row max for LogSumExp).
template <typename A, RK K>
inline A Pre(A x, A shift) {
  if constexpr (K == RK::kL1) return x < A(0) ? A(-x) : x;
  if constexpr (K == RK::kL2 || K == RK::kSumSquare) return x * x;
  if constexpr (K == RK::kLogSumExp) return static_cast<A>(std::exp(static_cast<double>(x - shift)));
  (void)shift;
  return x;
}

template <typename A, RK K>
inline A Finish(A a, int64_t n, A shift) {
  if constexpr (K == RK::kMean) {
    if constexpr (std::is_integral_v<A>) return n == 0 ? A(0) : static_cast<A>(a / static_cast<A>(n));
    else return a / static_cast<A>(n);
  }
  if constexpr (K == RK::kL2) return static_cast<A>(std::sqrt(static_cast<double>(a)));
  if constexpr (K == RK::kLogSum) return static_cast<A>(std::log(static_cast<double>(a)));
  if constexpr (K == RK::kLogSumExp) return static_cast<A>(std::log(static_cast<double>(a)) + static_cast<double>(shift));
  (void)n;
  (void)shift;
  return a;
}

// Input dims with size-1 dims dropped and adjacent dims of the same kind merged.
struct Collapsed {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};

Collapsed Collapse(const Shape& shape, const std::vector<bool>& red) {
  Collapsed c;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!c.dims.empty() && c.reduced.back() == red[i]) {
      c.dims.back() *= shape[i];
    } else {
      c.dims.push_back(shape[i]);
      c.reduced.push_back(red[i]);
    }
  }
  if (c.dims.empty()) {
    c.dims.push_back(1);
    c.reduced.push_back(false);
  }
  return c;
}

// Walks the input in order, calling fn(in_offset, out_offset, len, inner_reduced) for each
// contiguous run of the innermost collapsed dim; dim 0 is restricted to [b, e).
template <typename Fn>
void Walk(const Collapsed& c, int64_t b, int64_t e, Fn&& fn) {
  const size_t m = c.dims.size();
  const int64_t len = c.dims[m - 1];
  const bool inner_red = c.reduced[m - 1];
  if (m == 1) {
    fn(int64_t{0}, int64_t{0}, len, inner_red);
    return;
  }
  std::vector<int64_t> in_stride(m), out_stride(m);
  int64_t is = 1, os = 1;
  for (size_t i = m; i-- > 0;) {
    in_stride[i] = is;
    is *= c.dims[i];
    out_stride[i] = c.reduced[i] ? 0 : os;
    if (!c.reduced[i]) os *= c.dims[i];
  }
  std::vector<int64_t> idx(m - 1, 0);
  idx[0] = b;
  int64_t in_off = b * in_stride[0], out_off = b * out_stride[0];
  if (b >= e) return;
  while (true) {
    fn(in_off, out_off, len, inner_red);
    int64_t k = static_cast<int64_t>(m) - 2;
    for (; k >= 0; --k) {
      ++idx[k];
      in_off += in_stride[k];
      out_off += out_stride[k];
      if (idx[k] < (k == 0 ? e : c.dims[k])) break;
      if (k == 0) return;
      in_off -= c.dims[k] * in_stride[k];
      out_off -= c.dims[k] * out_stride[k];
      idx[k] = 0;
    }
  }
}

// Reduces a contiguous run into `a`; Eigen for float/double (vectorised, pairwise-ish).
template <typename T, RK K>
inline Acc<T> ReduceRun(const T* p, int64_t len, Acc<T> a, Acc<T> shift) {
  using A = Acc<T>;
  if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, double>) && K != RK::kProd) {
    Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> x(p, len);
    if constexpr (K == RK::kSum || K == RK::kMean || K == RK::kLogSum) return a + x.sum();
    if constexpr (K == RK::kSumSquare || K == RK::kL2) return a + x.square().sum();
    if constexpr (K == RK::kL1) return a + x.abs().sum();
    if constexpr (K == RK::kLogSumExp) return a + (x - shift).exp().sum();
    if constexpr (K == RK::kMax || K == RK::kMin) {
      for (int64_t i = 0; i < len; ++i) a = Combine<A, K>(a, p[i]);
      return a;
    }
  }
  for (int64_t i = 0; i < len; ++i) a = Combine<A, K>(a, Pre<A, K>(static_cast<A>(p[i]), shift));
  return a;
}

template <typename T, RK K>
void ReducePass(const Collapsed& c, const T* in, std::vector<Acc<T>>& acc, const std::vector<Acc<T>>* shift,
                ThreadPool* pool, int64_t total) {
  using A = Acc<T>;
  auto run = [&](int64_t b, int64_t e) {
    Walk(c, b, e, [&](int64_t io, int64_t oo, int64_t len, bool inner_red) {
      const T* p = in + io;
      if (inner_red) {
        const A s = shift ? (*shift)[oo] : A(0);
        acc[oo] = ReduceRun<T, K>(p, len, acc[oo], s);
      } else {
        A* a = acc.data() + oo;
        for (int64_t i = 0; i < len; ++i) {
          const A s = shift ? (*shift)[oo + i] : A(0);
          a[i] = Combine<A, K>(a[i], Pre<A, K>(static_cast<A>(p[i]), s));
        }
      }
    });
  };
  // Chunks over a kept leading dim write disjoint outputs.
  if (c.dims.size() >= 2 && !c.reduced[0] && total > kGrain) {
    ParallelFor(pool, c.dims[0], RowsPerChunk(total / c.dims[0]), run);
  } else {
    run(0, c.dims[0]);
  }
}

template <typename T, RK K>
absl::Status RunReduce(OpContext& ctx, const Tensor& x, const std::vector<bool>& red, Tensor& y) {
  using A = Acc<T>;
  const int64_t out_n = y.num_elements();
  if (out_n == 0) return absl::OkStatus();
  int64_t rc = 1;
  for (size_t i = 0; i < red.size(); ++i)
    if (red[i]) rc *= x.shape()[i];
  const T* in = x.data<T>();
  T* out = y.data<T>();
  std::vector<A> acc(static_cast<size_t>(out_n), Identity<A, K>());
  std::vector<A> shift;
  if (rc > 0) {
    const Collapsed c = Collapse(x.shape(), red);
    if constexpr (K == RK::kLogSumExp) {
      shift.assign(acc.size(), Identity<A, RK::kMax>());
      ReducePass<T, RK::kMax>(c, in, shift, nullptr, ctx.thread_pool(), x.num_elements());
      // A non-finite max would turn exp(x - max) into NaN; shift by 0 then.
      for (A& s : shift)
        if (!std::isfinite(static_cast<double>(s))) s = A(0);
    }
    ReducePass<T, K>(c, in, acc, shift.empty() ? nullptr : &shift, ctx.thread_pool(), x.num_elements());
  }
  for (int64_t i = 0; i < out_n; ++i)
    out[i] = static_cast<T>(Finish<A, K>(acc[i], rc, shift.empty() ? A(0) : shift[i]));
  return absl::OkStatus();
}

absl::Status DispatchReduce(OpContext& ctx, RK kind, const Tensor& x, const std::vector<bool>& red, Tensor& y) {
  return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      if (kind == RK::kMax) return RunReduce<bool, RK::kMax>(ctx, x, red, y);
      if (kind == RK::kMin) return RunReduce<bool, RK::kMin>(ctx, x, red, y);
      return InvalidArgument(ctx, "bool input is not supported by this reduction");
    } else {
      switch (kind) {
        case RK::kSum: return RunReduce<T, RK::kSum>(ctx, x, red, y);
        case RK::kMean: return RunReduce<T, RK::kMean>(ctx, x, red, y);
        case RK::kMax: return RunReduce<T, RK::kMax>(ctx, x, red, y);
        case RK::kMin: return RunReduce<T, RK::kMin>(ctx, x, red, y);
        case RK::kProd: return RunReduce<T, RK::kProd>(ctx, x, red, y);
        case RK::kL1: return RunReduce<T, RK::kL1>(ctx, x, red, y);
        case RK::kL2: return RunReduce<T, RK::kL2>(ctx, x, red, y);
        case RK::kLogSum: return RunReduce<T, RK::kLogSum>(ctx, x, red, y);
        case RK::kLogSumExp: return RunReduce<T, RK::kLogSumExp>(ctx, x, red, y);
        case RK::kSumSquare: return RunReduce<T, RK::kSumSquare>(ctx, x, red, y);
      }
      return absl::InternalError("unknown reduction");
    }
  });
}

// axes_as_input: the opset where axes moved from attribute to input (13 for ReduceSum, 18 others).
KernelFactory MakeReduce(RK kind, bool axes_as_input) {
  return Factory([kind, axes_as_input](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& n = init.node();
    const bool keepdims = n.GetInt("keepdims", 1) != 0;
    const bool noop = axes_as_input && n.GetInt("noop_with_empty_axes", 0) != 0;
    const bool has_attr_axes = !axes_as_input && n.HasAttr("axes");
    const std::vector<int64_t> attr_axes = n.GetInts("axes");
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "data"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      const int64_t rank = x.rank();
      std::vector<int64_t> axes = attr_axes;
      bool given = has_attr_axes && !axes.empty();
      if (axes_as_input && ctx.num_inputs() > 1 && ctx.has_input(1)) {
        absl::StatusOr<std::vector<int64_t>> a = ReadInts(ctx.input(1));
        if (!a.ok()) return InvalidArgument(ctx, "axes: ", a.status().message());
        axes = *std::move(a);
        given = !axes.empty();
      }
      std::vector<bool> red(static_cast<size_t>(rank), false);
      if (!given) {
        // Empty axes: identity under noop_with_empty_axes, else reduce everything.
        if (!noop) std::fill(red.begin(), red.end(), true);
      } else {
        for (int64_t a : axes) {
          absl::StatusOr<int64_t> ax = NormalizeAxis(a, rank);
          if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
          red[static_cast<size_t>(*ax)] = true;
        }
      }
      Shape out_shape;
      bool any = false;
      for (int64_t i = 0; i < rank; ++i) {
        if (!red[i]) out_shape.push_back(x.shape()[i]);
        else if (keepdims) out_shape.push_back(1);
        any = any || red[i];
      }
      if (!any && (kind == RK::kSum || kind == RK::kMean || kind == RK::kMax || kind == RK::kMin ||
                   kind == RK::kProd)) {
        ctx.SetOutput(0, x);  // nothing reduced: value unchanged
        return absl::OkStatus();
      }
      Tensor& y = ctx.AllocateOutput(0, x.dtype(), out_shape);
      return DispatchReduce(ctx, kind, x, red, y);
    });
  });
}

// ---------------------------------------------------------------------------------------
// ArgMax / ArgMin

KernelFactory MakeArg(bool is_max) {
  return Factory([is_max](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& n = init.node();
    const int64_t axis_attr = n.GetInt("axis", 0);
    const bool keepdims = n.GetInt("keepdims", 1) != 0;
    const bool last = n.GetInt("select_last_index", 0) != 0;
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "data"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      absl::StatusOr<int64_t> ax = NormalizeAxis(axis_attr, x.rank());
      if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
      const int64_t axis = *ax;
      const int64_t len = x.shape()[axis];
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[i];
      for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.shape()[i];
      Shape os = x.shape();
      if (keepdims) os[axis] = 1;
      else os.erase(os.begin() + axis);
      if (len == 0 && outer * inner > 0) return InvalidArgument(ctx, "cannot take ", is_max ? "ArgMax" : "ArgMin", " over an empty axis");
      Tensor& y = ctx.AllocateOutput(0, DType::kInt64, os);
      int64_t* out = y.data<int64_t>();
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        using A = std::conditional_t<std::is_same_v<T, bool>, int, Acc<T>>;
        const T* in = x.data<T>();
        ParallelFor(ctx.thread_pool(), outer, RowsPerChunk(len * inner), [&](int64_t b, int64_t e) {
          std::vector<A> best(static_cast<size_t>(inner));
          for (int64_t o = b; o < e; ++o) {
            const T* p = in + o * len * inner;
            int64_t* q = out + o * inner;
            for (int64_t j = 0; j < inner; ++j) {
              best[j] = static_cast<A>(p[j]);
              q[j] = 0;
            }
            for (int64_t i = 1; i < len; ++i) {
              const T* r = p + i * inner;
              for (int64_t j = 0; j < inner; ++j) {
                const A v = static_cast<A>(r[j]);
                const bool better = is_max ? (last ? v >= best[j] : v > best[j]) : (last ? v <= best[j] : v < best[j]);
                if (better) {
                  best[j] = v;
                  q[j] = i;
                }
              }
            }
          }
        });
        return absl::OkStatus();
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax

enum class SM { kSoftmax, kLogSoftmax, kHardmax };

// One contiguous row of length n, computed in A (float or double). Softmax and LogSoftmax work on
// an aligned copy: on an unaligned row Eigen starts its packets where the data becomes aligned,
// so the scalar head (std::exp, not the packet exp) and the sum's order would follow the row's
// address, and one row would round differently in a fused attention's scratch row, in the op's
// output tensor, or in another thread's buffer.
template <typename A, SM M>
void SoftmaxRow(const A* x, A* y, int64_t n) {
  if constexpr (M != SM::kHardmax) {
    using Row = Eigen::Array<A, Eigen::Dynamic, 1>;
    thread_local Row aligned;  // Eigen aligns its storage to its largest packet
    if (aligned.size() < n) aligned.resize(std::max<int64_t>(n, 2 * aligned.size()));
    Eigen::Map<Row, Eigen::AlignedMax> av(aligned.data(), n);
    av = Eigen::Map<const Row>(x, n);
    const A mx = av.maxCoeff();
    if constexpr (M == SM::kSoftmax) {
      av = (av - mx).exp();
      av *= A(1) / av.sum();
    } else {
      const A lse = std::log((av - mx).exp().sum());
      av = av - mx - lse;
    }
    Eigen::Map<Row>(y, n) = av;
  } else {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[best]) best = i;
    std::fill(y, y + n, A(0));
    y[best] = A(1);
  }
}

// Along an axis with inner stride > 1: vectorised across the inner positions.
template <typename A, SM M>
void SoftmaxStrided(const A* x, A* y, int64_t n, int64_t inner, std::vector<A>& m, std::vector<A>& s) {
  m.assign(inner, -std::numeric_limits<A>::infinity());
  s.assign(inner, A(0));
  if constexpr (M == SM::kHardmax) {
    std::vector<int64_t> arg(inner, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j)
        if (i == 0 || x[i * inner + j] > m[j]) {
          m[j] = x[i * inner + j];
          arg[j] = i;
        }
    std::fill(y, y + n * inner, A(0));
    for (int64_t j = 0; j < inner; ++j) y[arg[j] * inner + j] = A(1);
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) m[j] = std::max(m[j], x[i * inner + j]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        const A e = std::exp(x[i * inner + j] - m[j]);
        s[j] += e;
        if constexpr (M == SM::kSoftmax) y[i * inner + j] = e;
      }
    for (int64_t j = 0; j < inner; ++j) s[j] = M == SM::kSoftmax ? A(1) / s[j] : m[j] + std::log(s[j]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        if constexpr (M == SM::kSoftmax) y[i * inner + j] *= s[j];
        else y[i * inner + j] = x[i * inner + j] - s[j];
      }
  }
}

template <typename T, SM M>
void RunSoftmax(OpContext& ctx, const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  using A = Acc<T>;
  const int64_t block = n * inner;
  ParallelFor(ctx.thread_pool(), outer, RowsPerChunk(block), [&](int64_t b, int64_t e) {
    std::vector<A> xa, ya, m, s;
    if constexpr (!std::is_same_v<T, A>) {
      xa.resize(block);
      ya.resize(block);
    }
    for (int64_t o = b; o < e; ++o) {
      const A* x;
      A* y;
      if constexpr (std::is_same_v<T, A>) {
        x = in + o * block;
        y = out + o * block;
      } else {
        for (int64_t i = 0; i < block; ++i) xa[i] = static_cast<A>(in[o * block + i]);
        x = xa.data();
        y = ya.data();
      }
      if (inner == 1) SoftmaxRow<A, M>(x, y, n);
      else SoftmaxStrided<A, M>(x, y, n, inner, m, s);
      if constexpr (!std::is_same_v<T, A>) {
        for (int64_t i = 0; i < block; ++i) out[o * block + i] = static_cast<T>(ya[i]);
      }
    }
  });
}

template <SM M>
KernelFactory MakeSoftmax() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const bool coerce_2d = init.opset() < 13;
    const int64_t axis_attr = init.node().GetInt("axis", coerce_2d ? 1 : -1);
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "input"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      const int64_t r = x.rank();
      int64_t axis = axis_attr;
      // Opset < 13 flattens at axis, so axis == rank is allowed (rows of length 1).
      if (!(coerce_2d && axis == r)) {
        absl::StatusOr<int64_t> ax = NormalizeAxis(axis_attr, r);
        if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
        axis = *ax;
      }
      int64_t outer = 1, n = 1, inner = 1;
      for (int64_t i = 0; i < r; ++i) {
        const int64_t d = x.shape()[i];
        if (i < axis) outer *= d;
        else if (i == axis || coerce_2d) n *= d;
        else inner *= d;
      }
      // Each row is read whole (its max, its sum) before any of it is written: in place is safe.
      Tensor* reused = ctx.ReuseInputAsOutput(0, 0, x.dtype(), x.shape());
      Tensor& y = reused != nullptr ? *reused : ctx.AllocateOutput(0, x.dtype(), x.shape());
      if (x.num_elements() == 0) return absl::OkStatus();
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (!kIsFloat<T>) {
          return InvalidArgument(ctx, "expected a floating-point input, got ", DTypeName(x.dtype()));
        } else {
          RunSoftmax<T, M>(ctx, x.data<T>(), y.data<T>(), outer, n, inner);
          return absl::OkStatus();
        }
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// CumSum

KernelFactory MakeCumSum() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const bool exclusive = init.node().GetInt("exclusive", 0) != 0;
    const bool reverse = init.node().GetInt("reverse", 0) != 0;
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "x"); !s.ok()) return s;
      if (absl::Status s = CheckInput(ctx, 1, "axis"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      absl::StatusOr<std::vector<int64_t>> av = ReadInts(ctx.input(1));
      if (!av.ok()) return InvalidArgument(ctx, "axis: ", av.status().message());
      if (av->size() != 1) return InvalidArgument(ctx, "axis must hold one value, got ", av->size());
      absl::StatusOr<int64_t> ax = NormalizeAxis((*av)[0], x.rank());
      if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
      int64_t outer = 1, inner = 1;
      const int64_t n = x.shape()[*ax];
      for (int64_t i = 0; i < *ax; ++i) outer *= x.shape()[i];
      for (int64_t i = *ax + 1; i < x.rank(); ++i) inner *= x.shape()[i];
      Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
          return InvalidArgument(ctx, "bool input is not supported");
        } else {
          using A = Acc<T>;
          const T* in = x.data<T>();
          T* out = y.data<T>();
          ParallelFor(ctx.thread_pool(), outer, RowsPerChunk(n * inner), [&](int64_t b, int64_t e) {
            std::vector<A> acc(static_cast<size_t>(inner));
            for (int64_t o = b; o < e; ++o) {
              std::fill(acc.begin(), acc.end(), A(0));
              for (int64_t s = 0; s < n; ++s) {
                const int64_t i = reverse ? n - 1 - s : s;
                const T* p = in + (o * n + i) * inner;
                T* q = out + (o * n + i) * inner;
                for (int64_t j = 0; j < inner; ++j) {
                  if (exclusive) {
                    q[j] = static_cast<T>(acc[j]);
                    acc[j] += static_cast<A>(p[j]);
                  } else {
                    acc[j] += static_cast<A>(p[j]);
                    q[j] = static_cast<T>(acc[j]);
                  }
                }
              }
            }
          });
          return absl::OkStatus();
        }
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// TopK

KernelFactory MakeTopK() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& node = init.node();
    const bool k_is_input = init.opset() >= 10;
    if (!k_is_input && !node.HasAttr("k")) return Unimplemented(node, "TopK-1 needs the 'k' attribute");
    const int64_t k_attr = node.GetInt("k", 0);
    const int64_t axis_attr = node.GetInt("axis", -1);
    const bool largest = node.GetInt("largest", 1) != 0;
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "X"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      int64_t k = k_attr;
      if (k_is_input) {
        if (absl::Status s = CheckInput(ctx, 1, "K"); !s.ok()) return s;
        absl::StatusOr<std::vector<int64_t>> kv = ReadInts(ctx.input(1));
        if (!kv.ok()) return InvalidArgument(ctx, "K: ", kv.status().message());
        if (kv->size() != 1) return InvalidArgument(ctx, "K must hold one value, got ", kv->size());
        k = (*kv)[0];
      }
      absl::StatusOr<int64_t> ax = NormalizeAxis(axis_attr, x.rank());
      if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
      const int64_t axis = *ax;
      const int64_t n = x.shape()[axis];
      if (k < 0 || k > n) return InvalidArgument(ctx, "k = ", k, " is out of range for axis of size ", n);
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[i];
      for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.shape()[i];
      Shape os = x.shape();
      os[axis] = k;
      Tensor& vals = ctx.AllocateOutput(0, x.dtype(), os);
      Tensor* idxs = ctx.has_output(1) ? &ctx.AllocateOutput(1, DType::kInt64, os) : nullptr;
      if (k == 0 || outer * inner == 0) return absl::OkStatus();
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        using A = std::conditional_t<std::is_same_v<T, bool>, int, Acc<T>>;
        const T* in = x.data<T>();
        T* vo = vals.data<T>();
        int64_t* io = idxs ? idxs->data<int64_t>() : nullptr;
        ParallelFor(ctx.thread_pool(), outer * inner, RowsPerChunk(n), [&](int64_t b, int64_t e) {
          std::vector<std::pair<A, int64_t>> buf(static_cast<size_t>(n));
          for (int64_t r = b; r < e; ++r) {
            const int64_t o = r / inner, j = r % inner;
            const T* p = in + o * n * inner + j;
            for (int64_t i = 0; i < n; ++i) buf[i] = {static_cast<A>(p[i * inner]), i};
            // Strict weak order: NaN ranks above everything; ties go to the lower index.
            auto cmp = [largest](const std::pair<A, int64_t>& a, const std::pair<A, int64_t>& c) {
              const bool an = a.first != a.first, cn = c.first != c.first;
              if (an != cn) return largest ? an : cn;
              if (!an && a.first != c.first) return largest ? a.first > c.first : a.first < c.first;
              return a.second < c.second;
            };
            std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), cmp);
            for (int64_t i = 0; i < k; ++i) {
              const int64_t off = o * k * inner + i * inner + j;
              vo[off] = static_cast<T>(buf[i].first);
              if (io) io[off] = buf[i].second;
            }
          }
        });
        return absl::OkStatus();
      });
    });
  });
}

// ---------------------------------------------------------------------------------------
// LayerNormalization

// Scale/B as `len` floats over the normalised block (shape `norm`): a pointer into the tensor
// when it is already float32 of that size, else an expanded copy in `store`.
absl::StatusOr<const float*> ExpandParam(const Tensor& t, const Shape& norm, std::vector<float>& store) {
  if (t.dtype() == DType::kFloat32 && t.num_elements() == NumElements(norm)) {
    Shape ts = t.shape();
    while (!ts.empty() && ts.front() == 1) ts.erase(ts.begin());
    Shape ns = norm;
    while (!ns.empty() && ns.front() == 1) ns.erase(ns.begin());
    if (ts == ns) return t.data<float>();
  }
  Shape ts = t.shape();
  while (!ts.empty() && ts.front() == 1 && ts.size() > norm.size()) ts.erase(ts.begin());
  if (ts.size() > norm.size()) return absl::InvalidArgumentError("has more dims than the normalised shape");
  for (size_t i = 0; i < ts.size(); ++i) {
    const int64_t d = ts[i], nd = norm[norm.size() - ts.size() + i];
    if (d != nd && d != 1) return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeToString(t.shape()),
                                                                          " does not broadcast to ", ShapeToString(norm)));
  }
  absl::StatusOr<Tensor> f = CastTensor(t, DType::kFloat32);
  if (!f.ok()) return f.status();
  const int64_t len = NumElements(norm);
  std::vector<float>& out = store;
  out.assign(static_cast<size_t>(len), 0.0f);
  const std::vector<int64_t> st = BroadcastStrides(ts, norm);
  const std::vector<int64_t> ns = Strides(norm);
  const float* src = f->data<float>();
  for (int64_t i = 0; i < len; ++i) {
    int64_t off = 0, rem = i;
    for (size_t d = 0; d < norm.size(); ++d) {
      off += (rem / ns[d]) * st[d];
      rem %= ns[d];
    }
    out[i] = src[off];
  }
  return static_cast<const float*>(out.data());
}

KernelFactory MakeLayerNorm() {
  return Factory([](const KernelInit& init) -> absl::StatusOr<KernelFn> {
    const Node& node = init.node();
    const int64_t axis_attr = node.GetInt("axis", -1);
    const float eps = node.GetFloat("epsilon", 1e-5f);
    const int64_t stash = node.GetInt("stash_type", 1);
    if (stash != 1) return Unimplemented(node, "stash_type ", stash, " is not supported (only 1 = float32)");
    return KernelFn([=](OpContext& ctx) -> absl::Status {
      if (absl::Status s = CheckInput(ctx, 0, "X"); !s.ok()) return s;
      if (absl::Status s = CheckInput(ctx, 1, "Scale"); !s.ok()) return s;
      const Tensor& x = ctx.input(0);
      absl::StatusOr<int64_t> ax = NormalizeAxis(axis_attr, x.rank());
      if (!ax.ok()) return InvalidArgument(ctx, ax.status().message());
      const int64_t axis = *ax;
      const Shape norm(x.shape().begin() + axis, x.shape().end());
      const int64_t len = NumElements(norm);
      const int64_t rows = len == 0 ? 0 : x.num_elements() / len;
      if (!IsFloatingPoint(x.dtype())) return InvalidArgument(ctx, "X must be floating point, got ", DTypeName(x.dtype()));
      std::vector<float> scale_store, bias_store;
      absl::StatusOr<const float*> scale = ExpandParam(ctx.input(1), norm, scale_store);
      if (!scale.ok()) return InvalidArgument(ctx, "Scale: ", scale.status().message());
      const float* bias = nullptr;
      if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
        absl::StatusOr<const float*> bv = ExpandParam(ctx.input(2), norm, bias_store);
        if (!bv.ok()) return InvalidArgument(ctx, "B: ", bv.status().message());
        bias = *bv;
      }
      Shape stat_shape = x.shape();
      for (int64_t i = axis; i < x.rank(); ++i) stat_shape[i] = 1;
      Tensor& y = ctx.AllocateOutput(0, x.dtype(), x.shape());
      float* mean_out = ctx.has_output(1) ? ctx.AllocateOutput(1, DType::kFloat32, stat_shape).data<float>() : nullptr;
      float* inv_out = ctx.has_output(2) ? ctx.AllocateOutput(2, DType::kFloat32, stat_shape).data<float>() : nullptr;
      if (rows == 0 || len == 0) return absl::OkStatus();
      return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (!kIsFloat<T>) {
          return absl::OkStatus();
        } else {
          using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
          Eigen::Map<const Arr> sc(*scale, len);
          const T* in = x.data<T>();
          T* out = y.data<T>();
          ParallelFor(ctx.thread_pool(), rows, RowsPerChunk(len), [&](int64_t b, int64_t e) {
            Arr buf(len);
            for (int64_t r = b; r < e; ++r) {
              const T* p = in + r * len;
              T* q = out + r * len;
              if constexpr (std::is_same_v<T, float>) buf = Eigen::Map<const Arr>(p, len);
              else for (int64_t i = 0; i < len; ++i) buf[i] = static_cast<float>(p[i]);
              const float mean = buf.sum() / static_cast<float>(len);
              buf -= mean;
              const float var = buf.square().sum() / static_cast<float>(len);
              const float inv = 1.0f / std::sqrt(var + eps);
              if (mean_out) mean_out[r] = mean;
              if (inv_out) inv_out[r] = inv;
              buf = buf * inv * sc;
              if (bias) buf += Eigen::Map<const Arr>(bias, len);
              if constexpr (std::is_same_v<T, float>) Eigen::Map<Arr>(q, len) = buf;
              else for (int64_t i = 0; i < len; ++i) q[i] = static_cast<T>(buf[i]);
            }
          });
          return absl::OkStatus();
        }
      });
    });
  });
}

}  // namespace

void RegisterReductionOps(KernelRegistry& r) {
  // ReduceSum took axes as an input at 13; the others at 18. Max/Min also changed at 12 and
  // 20 (types only).
  struct R { const char* name; RK kind; };
  for (const R& op : {R{"ReduceMean", RK::kMean}, R{"ReduceProd", RK::kProd}, R{"ReduceL1", RK::kL1},
                      R{"ReduceL2", RK::kL2}, R{"ReduceLogSum", RK::kLogSum},
                      R{"ReduceLogSumExp", RK::kLogSumExp}, R{"ReduceSumSquare", RK::kSumSquare}}) {
    r.Add("", op.name, 1, 10, MakeReduce(op.kind, false));
    r.Add("", op.name, 11, 12, MakeReduce(op.kind, false));
    r.Add("", op.name, 13, 17, MakeReduce(op.kind, false));
    AddVersions(r, op.name, {18}, MakeReduce(op.kind, true));
  }
  for (const R& op : {R{"ReduceMax", RK::kMax}, R{"ReduceMin", RK::kMin}}) {
    r.Add("", op.name, 1, 10, MakeReduce(op.kind, false));
    r.Add("", op.name, 11, 11, MakeReduce(op.kind, false));
    r.Add("", op.name, 12, 12, MakeReduce(op.kind, false));
    r.Add("", op.name, 13, 17, MakeReduce(op.kind, false));
    AddVersions(r, op.name, {18, 20}, MakeReduce(op.kind, true));
  }
  r.Add("", "ReduceSum", 1, 10, MakeReduce(RK::kSum, false));
  r.Add("", "ReduceSum", 11, 12, MakeReduce(RK::kSum, false));
  AddVersions(r, "ReduceSum", {13}, MakeReduce(RK::kSum, true));

  for (bool is_max : {true, false}) AddVersions(r, is_max ? "ArgMax" : "ArgMin", {1, 11, 12, 13}, MakeArg(is_max));

  AddVersions(r, "Softmax", {1, 11, 13}, MakeSoftmax<SM::kSoftmax>());
  AddVersions(r, "LogSoftmax", {1, 11, 13}, MakeSoftmax<SM::kLogSoftmax>());
  AddVersions(r, "Hardmax", {1, 11, 13}, MakeSoftmax<SM::kHardmax>());
  AddVersions(r, "CumSum", {11, 14}, MakeCumSum());
  AddVersions(r, "TopK", {1, 10, 11}, MakeTopK());
  AddVersions(r, "LayerNormalization", {17}, MakeLayerNorm());
}

void SoftmaxRowF32(const float* x, float* y, int64_t n) { SoftmaxRow<float, SM::kSoftmax>(x, y, n); }

}  // namespace oneinfer
