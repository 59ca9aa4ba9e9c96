// Convolution and pooling (they share the window geometry); normalisation and Dropout
// live in ops/nn_norm.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "graph/internal_ops.h"
#include "ops/conv_kernels.h"
#include "ops/families.h"
#include "ops/gemm/sgemm.h"
#include "ops/op_util.h"

namespace oneinfer {



namespace {

// C = op(A) * op(B) (+ C when accumulate) for float or double.
template <typename T>
void Gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    Sgemm(ta, tb, M, N, K, 1.f, A, lda, B, ldb, 0.f, C, ldc, pool);
  } else {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
    Eigen::Map<Mat, 0, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
    Mat a = ta ? Mat(CMap(A, K, M, Eigen::OuterStride<>(lda)).transpose()) : Mat(CMap(A, M, K, Eigen::OuterStride<>(lda)));
    Mat b = tb ? Mat(CMap(B, N, K, Eigen::OuterStride<>(ldb)).transpose()) : Mat(CMap(B, K, N, Eigen::OuterStride<>(ldb)));
    c.noalias() = a * b;
  }
}

// ---------------------------------------------------------------- window geometry

// Attributes shared by Conv, ConvTranspose and the pools (spatial parts only).
struct WindowAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

absl::Status ReadWindowAttrs(const Node& n, bool needs_kernel, WindowAttrs* w) {
  w->kernel = n.GetInts("kernel_shape");
  w->strides = n.GetInts("strides");
  w->dilations = n.GetInts("dilations");
  w->pads = n.GetInts("pads");
  w->auto_pad = n.GetString("auto_pad", "NOTSET");
  w->ceil_mode = n.GetInt("ceil_mode", 0) != 0;
  if (w->auto_pad != "NOTSET" && w->auto_pad != "SAME_UPPER" && w->auto_pad != "SAME_LOWER" &&
      w->auto_pad != "VALID")
    return Unimplemented(n, "unsupported auto_pad '", w->auto_pad, "'");
  if (needs_kernel && w->kernel.empty()) return Unimplemented(n, "attribute kernel_shape is required");
  for (int64_t v : w->kernel) if (v < 1) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": kernel_shape must be positive"));
  for (int64_t v : w->strides) if (v < 1) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": strides must be positive"));
  for (int64_t v : w->dilations) if (v < 1) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": dilations must be positive"));
  for (int64_t v : w->pads) if (v < 0) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": pads must be non-negative"));
  return absl::OkStatus();
}

// Resolved geometry of one forward window op over the spatial dims.
struct Geometry {
  size_t nd = 0;
  Shape in, out, k, s, d, pb, pe;
  int64_t in_size() const { return NumElements(in); }
  int64_t out_size() const { return NumElements(out); }
  int64_t k_size() const { return NumElements(k); }
};

// Computes output size and pads from the attributes (ONNX Conv/Pool rules).
absl::Status ResolveGeometry(const OpContext& ctx, const WindowAttrs& w, const Shape& kernel,
                             const Shape& in_spatial, Geometry* g) {
  const size_t nd = in_spatial.size();
  g->nd = nd;
  g->in = in_spatial;
  g->k = kernel;
  if (kernel.size() != nd) return InvalidArgument(ctx, "kernel_shape has ", kernel.size(), " dims, input has ", nd, " spatial dims");
  g->s = w.strides.empty() ? Shape(nd, 1) : w.strides;
  g->d = w.dilations.empty() ? Shape(nd, 1) : w.dilations;
  if (g->s.size() != nd) return InvalidArgument(ctx, "strides must have ", nd, " values");
  if (g->d.size() != nd) return InvalidArgument(ctx, "dilations must have ", nd, " values");
  if (!w.pads.empty() && w.pads.size() != 2 * nd) return InvalidArgument(ctx, "pads must have ", 2 * nd, " values");
  g->pb.assign(nd, 0);
  g->pe.assign(nd, 0);
  g->out.assign(nd, 0);
  for (size_t i = 0; i < nd; ++i) {
    if (g->k[i] < 1) return InvalidArgument(ctx, "kernel dims must be positive, got ", ShapeToString(kernel));
    const int64_t ek = (g->k[i] - 1) * g->d[i] + 1, in = in_spatial[i], s = g->s[i];
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
      g->pb[i] = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pe[i] = total - g->pb[i];
      g->out[i] = out;
      continue;
    }
    if (w.auto_pad == "NOTSET" && !w.pads.empty()) {
      g->pb[i] = w.pads[i];
      g->pe[i] = w.pads[i + nd];
    }
    const int64_t span = in + g->pb[i] + g->pe[i] - ek;
    if (span < 0) return InvalidArgument(ctx, "kernel larger than padded input in spatial dim ", i);
    int64_t out = (w.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // The last window must start inside the input or the begin padding.
    if (w.ceil_mode && (out - 1) * s >= in + g->pb[i]) --out;
    g->out[i] = out;
  }
  return absl::OkStatus();
}

// table[i][o * k + t] = input coordinate of output o, tap t along dim i, or -1 when in padding.
std::vector<std::vector<int64_t>> TapTable(const Geometry& g) {
  std::vector<std::vector<int64_t>> tab(g.nd);
  for (size_t i = 0; i < g.nd; ++i) {
    tab[i].resize(static_cast<size_t>(g.out[i] * g.k[i]));
    for (int64_t o = 0; o < g.out[i]; ++o)
      for (int64_t t = 0; t < g.k[i]; ++t) {
        const int64_t c = o * g.s[i] - g.pb[i] + t * g.d[i];
        tab[i][o * g.k[i] + t] = (c >= 0 && c < g.in[i]) ? c : -1;
      }
  }
  return tab;
}

// Advances a multi-index; returns false after the last.
inline bool Next(std::vector<int64_t>& idx, const Shape& ext) {
  for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i >= 0; --i) {
    if (++idx[i] < ext[i]) return true;
    idx[i] = 0;
  }
  return false;
}

// ---------------------------------------------------------------- Conv

struct ConvAttrs {
  WindowAttrs w;
  int64_t group = 1;
  ConvActivation act;  // the fused internal Conv's epilogue (none for ONNX Conv)
};

// Unfolds one group of one image into col[(c * K + t) * P + p].
template <typename T>
void Im2Col(const T* x, int64_t channels, const Geometry& g, const std::vector<std::vector<int64_t>>& tab, T* col,
            ThreadPool* pool) {
  const int64_t K = g.k_size(), P = g.out_size(), inS = g.in_size();
  const auto in_st = Strides(g.in);
  ParallelFor(pool, channels * K, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> tap(g.nd), o(g.nd);
    for (int64_t row = b; row < e; ++row) {
      const int64_t c = row / K;
      int64_t r = row % K;
      for (int64_t i = static_cast<int64_t>(g.nd) - 1; i >= 0; --i) { tap[i] = r % g.k[i]; r /= g.k[i]; }
      const T* xc = x + c * inS;
      T* dst = col + row * P;
      std::fill(o.begin(), o.end(), 0);
      int64_t p = 0;
      do {
        int64_t off = 0;
        bool valid = true;
        for (size_t i = 0; i < g.nd; ++i) {
          const int64_t ci = tab[i][o[i] * g.k[i] + tap[i]];
          if (ci < 0) { valid = false; break; }
          off += ci * in_st[i];
        }
        dst[p++] = valid ? xc[off] : T(0);
      } while (Next(o, g.out));
    }
  });
}

template <typename T>
void ConvCore(const T* x, const T* w, const T* bias, T* y, int64_t N, int64_t C, int64_t M, int64_t G,
              const Geometry& g, ThreadPool* pool) {
  const int64_t Cg = C / G, Mg = M / G, K = g.k_size(), P = g.out_size(), inS = g.in_size();
  const int64_t rows = Cg * K;
  bool direct = true;  // 1x1, stride 1, no padding: the input already is the column matrix
  for (size_t i = 0; i < g.nd; ++i)
    direct = direct && g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
  const auto tab = TapTable(g);
  std::vector<T> col(direct ? 0 : static_cast<size_t>(rows * P));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t gi = 0; gi < G; ++gi) {
      const T* xg = x + (n * C + gi * Cg) * inS;
      const T* src = xg;
      if (!direct) {
        Im2Col(xg, Cg, g, tab, col.data(), pool);
        src = col.data();
      }
      Gemm<T>(false, false, Mg, P, rows, w + gi * Mg * rows, rows, src, P, y + (n * M + gi * Mg) * P, P, pool);
    }
    if (bias != nullptr)
      for (int64_t m = 0; m < M; ++m) {
        T* ym = y + (n * M + m) * P;
        for (int64_t p = 0; p < P; ++p) ym[p] += bias[m];
      }
  }
}

// Runs fn<float or double>; float16/bfloat16 are computed in float32.
template <typename Fn>
absl::Status WithFloatType(OpContext& ctx, DType dt, Fn&& fn) {
  if (dt == DType::kFloat32) return fn(TypeTag<float>{});
  if (dt == DType::kFloat64) return fn(TypeTag<double>{});
  return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
}

// Float32 copies of the present inputs (float16/bfloat16 kernels compute in float32).
absl::StatusOr<std::vector<Tensor>> WidenInputs(OpContext& ctx, size_t n) {
  std::vector<Tensor> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) continue;
    auto c = CastTensor(ctx.input(i), DType::kFloat32);
    if (!c.ok()) return c.status();
    v[i] = *c;
  }
  return v;
}

absl::Status ConvCompute(OpContext& ctx, const ConvAttrs& a, const ConvPackedWeights* packed) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "Conv needs inputs X and W");
  const DType dt = ctx.input(0).dtype();
  std::vector<Tensor> in(3);
  for (size_t i = 0; i < 3; ++i) if (ctx.has_input(i)) in[i] = ctx.input(i);
  const bool half = dt == DType::kFloat16 || dt == DType::kBFloat16;
  if (half) {
    auto v = WidenInputs(ctx, 3);
    if (!v.ok()) return InvalidArgument(ctx, v.status().message());
    in = *v;
  }
  const Tensor &x = in[0], &w = in[1];
  for (size_t i = 1; i < 3; ++i)
    if (in[i].defined() && in[i].dtype() != x.dtype()) return InvalidArgument(ctx, "inputs have different element types");
  if (x.rank() < 3) return InvalidArgument(ctx, "X must have rank >= 3, got ", ShapeToString(x.shape()));
  if (w.rank() != x.rank()) return InvalidArgument(ctx, "W rank ", w.rank(), " differs from X rank ", x.rank());
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), G = a.group;
  if (G < 1 || C % G != 0 || M % G != 0 || w.dim(1) != C / G)
    return InvalidArgument(ctx, "channels do not match: X ", ShapeToString(x.shape()), ", W ", ShapeToString(w.shape()), ", group ", G);
  if (in[2].defined() && (in[2].rank() != 1 || in[2].dim(0) != M)) return InvalidArgument(ctx, "B must have shape [", M, "]");
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  if (!a.w.kernel.empty() && a.w.kernel != kernel) return InvalidArgument(ctx, "kernel_shape does not match W");
  Geometry g;
  auto st = ResolveGeometry(ctx, a.w, kernel, Shape(x.shape().begin() + 2, x.shape().end()), &g);
  if (!st.ok()) return st;
  Shape os = {N, M};
  os.insert(os.end(), g.out.begin(), g.out.end());
  const bool fast = x.dtype() == DType::kFloat32 && g.nd <= 2;
  Tensor yf = half ? Tensor::Empty(DType::kFloat32, os)
                   : (fast ? ctx.AllocateOutputUninitialized(0, dt, os) : ctx.AllocateOutput(0, dt, os));
  if (yf.num_elements() > 0 && fast) {
    // 1-D is 2-D with one row.
    const bool one_d = g.nd == 1;
    Conv2DParams p;
    p.N = N, p.C = C, p.M = M, p.G = G;
    p.H = one_d ? 1 : g.in[0], p.W = g.in[g.nd - 1];
    p.KH = one_d ? 1 : g.k[0], p.KW = g.k[g.nd - 1];
    p.SH = one_d ? 1 : g.s[0], p.SW = g.s[g.nd - 1];
    p.DH = one_d ? 1 : g.d[0], p.DW = g.d[g.nd - 1];
    p.PT = one_d ? 0 : g.pb[0], p.PL = g.pb[g.nd - 1];
    p.OH = one_d ? 1 : g.out[0], p.OW = g.out[g.nd - 1];
    ConvFloat2D(p, x.data<float>(), w.data<float>(), in[2].defined() ? in[2].data<float>() : nullptr, a.act,
                yf.data<float>(), ctx.thread_pool(), half ? nullptr : packed);
  } else if (yf.num_elements() > 0) {
    st = WithFloatType(ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      ConvCore<T>(x.data<T>(), w.data<T>(), in[2].defined() ? in[2].data<T>() : nullptr, yf.data<T>(), N, C, M, G, g,
                  ctx.thread_pool());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    if (a.act.kind != ConvActivation::Kind::kNone || a.act.has_affine()) {
      if (yf.dtype() != DType::kFloat32) return InvalidArgument(ctx, "a fused activation needs float32 or float16");
      ApplyConvEpilogueReference(yf.data<float>(), yf.num_elements(), 0.f, a.act);
    }
  }
  if (half) {
    auto c = CastTensor(yf, dt);
    if (!c.ok()) return InvalidArgument(ctx, c.status().message());
    ctx.SetOutput(0, *c);
  }
  return absl::OkStatus();
}

class ConvKernel : public OpKernel {
 public:
  // weight: the constant W (float32, rank >= 3), or null when W is computed.
  ConvKernel(ConvAttrs a, const Tensor* weight) : a_(std::move(a)), weight_(weight) {}
  absl::Status Compute(OpContext& ctx) const override {
    if (weight_ != nullptr) (void)PrepareWeights(ctx.thread_pool());
    // The packing is of this very tensor (a constant slot never changes, the check is for certainty).
    const bool same = weight_ != nullptr && ctx.has_input(1) && ctx.input(1).raw_data() == weight_->raw_data();
    return ConvCompute(ctx, a_, same ? &packed_ : nullptr);
  }
  // W_g^T packed for the small-output path (ops/conv_kernels.h).
  absl::Status PrepareWeights(ThreadPool* pool) const override {
    if (weight_ == nullptr) return absl::OkStatus();
    std::call_once(packed_once_, [this, pool] {
      const int64_t M = weight_->dim(0);
      if (a_.group >= 1 && M % a_.group == 0)
        packed_ = PackConvWeights(M, a_.group, weight_->num_elements() / M, weight_->data<float>(), pool);
    });
    return absl::OkStatus();
  }

 private:
  ConvAttrs a_;
  const Tensor* weight_;
  mutable std::once_flag packed_once_;
  mutable ConvPackedWeights packed_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeConv(const KernelInit& init) {
  ConvAttrs a;
  auto st = ReadWindowAttrs(init.node(), false, &a.w);
  if (!st.ok()) return st;
  a.group = init.node().GetInt("group", 1);
  if (init.node().domain == internal_ops::kDomain) {
    using Op = internal_ops::FusedConv;
    auto act = ParseConvActivation(init.node().GetString(Op::kActivation, ""), init.node().GetFloats(Op::kActivationParams),
                                   init.node().GetFloats(Op::kOutputAffine));
    if (!act.ok()) return absl::InvalidArgumentError(absl::StrCat(init.node().Describe(), ": ", act.status().message()));
    a.act = *act;
  }
  const Tensor* w = init.ConstantInput(1);
  if (w != nullptr && (w->dtype() != DType::kFloat32 || w->rank() < 3 || w->dim(0) < 1)) w = nullptr;
  // The packing serves only the small-output path: none when the output is known to be larger.
  const TypeInfo* out = init.OutputType(0);
  if (w != nullptr && out != nullptr && out->shape && out->shape->size() >= 3) {
    int64_t outputs = 1;
    bool known = true;
    for (size_t i = 2; i < out->shape->size(); ++i) {
      known = known && (*out->shape)[i].is_fixed();
      if (known) outputs *= (*out->shape)[i].value;
    }
    if (known && outputs > kConvSmallOutputs) w = nullptr;
  }
  return std::unique_ptr<OpKernel>(new ConvKernel(std::move(a), w));
}

// ---------------------------------------------------------------- ConvTranspose

struct ConvTAttrs {
  WindowAttrs w;
  int64_t group = 1;
  std::vector<int64_t> output_padding, output_shape;
};

// 2-D col2im of ConvTranspose: y[m] += each tap's rows of col, scattered along their stride
// (g is the equivalent forward conv: g.in is y's spatial shape, g.out the input's).
template <typename T>
void Col2Im2D(const Geometry& g, const T* col, T* y, int64_t channels, ThreadPool* pool) {
  const int64_t IH = g.out[0], IW = g.out[1], OH = g.in[0], OW = g.in[1], KH = g.k[0], KW = g.k[1];
  ParallelFor(pool, channels, 1, [&](int64_t mb, int64_t me) {
    for (int64_t m = mb; m < me; ++m) {
      T* ym = y + m * OH * OW;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const T* src = col + ((m * KH + kh) * KW + kw) * IH * IW;
          const int64_t off = kw * g.d[1] - g.pb[1];  // ox = iw * s + off
          const int64_t lo = off >= 0 ? 0 : (-off + g.s[1] - 1) / g.s[1];
          const int64_t hi = OW - 1 - off < 0 ? 0 : std::min(IW, (OW - 1 - off) / g.s[1] + 1);
          for (int64_t ih = 0; ih < IH; ++ih) {
            const int64_t oy = ih * g.s[0] - g.pb[0] + kh * g.d[0];
            if (oy < 0 || oy >= OH) continue;
            T* yr = ym + oy * OW + off;
            const T* sr = src + ih * IW;
            for (int64_t iw = lo; iw < hi; ++iw) yr[iw * g.s[1]] += sr[iw];
          }
        }
    }
  });
}

absl::Status ConvTransposeCompute(OpContext& ctx, const ConvTAttrs& a) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "ConvTranspose needs inputs X and W");
  const DType dt = ctx.input(0).dtype();
  std::vector<Tensor> in(3);
  for (size_t i = 0; i < 3; ++i) if (ctx.has_input(i)) in[i] = ctx.input(i);
  const bool half = dt == DType::kFloat16 || dt == DType::kBFloat16;
  if (half) {
    auto v = WidenInputs(ctx, 3);
    if (!v.ok()) return InvalidArgument(ctx, v.status().message());
    in = *v;
  }
  const Tensor &x = in[0], &w = in[1];
  for (size_t i = 1; i < 3; ++i)
    if (in[i].defined() && in[i].dtype() != x.dtype()) return InvalidArgument(ctx, "inputs have different element types");
  if (x.rank() < 3) return InvalidArgument(ctx, "X must have rank >= 3, got ", ShapeToString(x.shape()));
  if (w.rank() != x.rank()) return InvalidArgument(ctx, "W rank ", w.rank(), " differs from X rank ", x.rank());
  const int64_t N = x.dim(0), C = x.dim(1), G = a.group;
  if (G < 1 || C % G != 0 || w.dim(0) != C) return InvalidArgument(ctx, "channels do not match: X ", ShapeToString(x.shape()), ", W ", ShapeToString(w.shape()));
  const int64_t Mg = w.dim(1), M = Mg * G;
  if (in[2].defined() && (in[2].rank() != 1 || in[2].dim(0) != M)) return InvalidArgument(ctx, "B must have shape [", M, "]");
  const size_t nd = static_cast<size_t>(x.rank() - 2);
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  if (!a.w.kernel.empty() && a.w.kernel != kernel) return InvalidArgument(ctx, "kernel_shape does not match W");
  // Geometry of the equivalent forward conv: its "input" is our output, its "output" ours input.
  Geometry g;
  g.nd = nd;
  g.k = kernel;
  g.out = Shape(x.shape().begin() + 2, x.shape().end());
  g.s = a.w.strides.empty() ? Shape(nd, 1) : a.w.strides;
  g.d = a.w.dilations.empty() ? Shape(nd, 1) : a.w.dilations;
  const Shape opad = a.output_padding.empty() ? Shape(nd, 0) : a.output_padding;
  if (g.s.size() != nd || g.d.size() != nd || opad.size() != nd) return InvalidArgument(ctx, "strides/dilations/output_padding must have ", nd, " values");
  if (!a.w.pads.empty() && a.w.pads.size() != 2 * nd) return InvalidArgument(ctx, "pads must have ", 2 * nd, " values");
  Shape oshape = a.output_shape;
  if (oshape.size() == nd + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (!oshape.empty() && oshape.size() != nd) return InvalidArgument(ctx, "output_shape must have ", nd, " values");
  g.in.assign(nd, 0);
  g.pb.assign(nd, 0);
  g.pe.assign(nd, 0);
  const bool same = a.w.auto_pad == "SAME_UPPER" || a.w.auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < nd; ++i) {
    if (g.k[i] < 1 || g.s[i] < 1 || g.d[i] < 1) return InvalidArgument(ctx, "kernel, strides and dilations must be positive");
    const int64_t ek = (g.k[i] - 1) * g.d[i] + 1;
    const int64_t full = g.s[i] * (g.out[i] - 1) + opad[i] + ek;
    if (!oshape.empty() || same) {
      const int64_t target = !oshape.empty() ? oshape[i] : g.out[i] * g.s[i];
      const int64_t total = full - target;
      // SAME_UPPER puts the extra padding at the end; floor division as the reference does
      // (total may be negative when output_shape asks for more than the natural size).
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g.pb[i] = a.w.auto_pad == "SAME_UPPER" ? half : total - half;
      g.pe[i] = total - g.pb[i];
      g.in[i] = target;
    } else {
      if (a.w.auto_pad == "NOTSET" && !a.w.pads.empty()) {
        g.pb[i] = a.w.pads[i];
        g.pe[i] = a.w.pads[i + nd];
      }
      g.in[i] = full - g.pb[i] - g.pe[i];
    }
    if (g.in[i] < 0) return InvalidArgument(ctx, "negative output size in spatial dim ", i);
  }
  Shape os = {N, M};
  os.insert(os.end(), g.in.begin(), g.in.end());
  Tensor yf = half ? Tensor::Empty(DType::kFloat32, os) : ctx.AllocateOutput(0, dt, os);
  if (yf.num_elements() > 0) {
    auto st = WithFloatType(ctx, x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const int64_t Cg = C / G, K = g.k_size(), Pin = g.out_size(), Pout = g.in_size(), rows = Mg * K;
      const auto tab = TapTable(g);
      const auto out_st = Strides(g.in);
      // Every element is written by the GEMM: scratch from the allocator, not a zero-filled vector.
      Tensor col_t = ctx.AllocateTemp(std::is_same_v<T, double> ? DType::kFloat64 : DType::kFloat32, {rows * Pin}, false);
      T* col = col_t.data<T>();
      T* y = yf.data<T>();
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t gi = 0; gi < G; ++gi) {
          Gemm<T>(true, false, rows, Pin, Cg, w.data<T>() + gi * Cg * rows, rows,
                  x.data<T>() + (n * C + gi * Cg) * Pin, Pin, col, Pin, ctx.thread_pool());
          if (nd == 2) {
            Col2Im2D(g, col, y + (n * M + gi * Mg) * Pout, Mg, ctx.thread_pool());
            continue;
          }
          // col2im: scatter-add each tap back; channels are independent.
          ParallelFor(ctx.thread_pool(), Mg, 1, [&](int64_t mb, int64_t me) {
            std::vector<int64_t> tap(nd), o(nd);
            for (int64_t m = mb; m < me; ++m) {
              T* ym = y + (n * M + gi * Mg + m) * Pout;
              for (int64_t t = 0; t < K; ++t) {
                int64_t r = t;
                for (int64_t i = static_cast<int64_t>(nd) - 1; i >= 0; --i) { tap[i] = r % g.k[i]; r /= g.k[i]; }
                const T* src = col + (m * K + t) * Pin;
                std::fill(o.begin(), o.end(), 0);
                int64_t p = 0;
                do {
                  int64_t off = 0;
                  bool valid = true;
                  for (size_t i = 0; i < nd; ++i) {
                    const int64_t ci = tab[i][o[i] * g.k[i] + tap[i]];
                    if (ci < 0) { valid = false; break; }
                    off += ci * out_st[i];
                  }
                  if (valid) ym[off] += src[p];
                  ++p;
                } while (Next(o, g.out));
              }
            }
          });
        }
        if (in[2].defined())
          for (int64_t m = 0; m < M; ++m) {
            T* ym = y + (n * M + m) * Pout;
            const T bv = in[2].data<T>()[m];
            for (int64_t p = 0; p < Pout; ++p) ym[p] += bv;
          }
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  if (half) {
    auto c = CastTensor(yf, dt);
    if (!c.ok()) return InvalidArgument(ctx, c.status().message());
    ctx.SetOutput(0, *c);
  }
  return absl::OkStatus();
}

class ConvTransposeKernel : public OpKernel {
 public:
  explicit ConvTransposeKernel(ConvTAttrs a) : a_(std::move(a)) {}
  absl::Status Compute(OpContext& ctx) const override { return ConvTransposeCompute(ctx, a_); }

 private:
  ConvTAttrs a_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeConvTranspose(const KernelInit& init) {
  ConvTAttrs a;
  auto st = ReadWindowAttrs(init.node(), false, &a.w);
  if (!st.ok()) return st;
  a.group = init.node().GetInt("group", 1);
  a.output_padding = init.node().GetInts("output_padding");
  a.output_shape = init.node().GetInts("output_shape");
  return std::unique_ptr<OpKernel>(new ConvTransposeKernel(std::move(a)));
}

// ---------------------------------------------------------------- pools

enum class PoolKind { kMax, kAverage, kLp };

struct PoolAttrs {
  PoolKind kind;
  WindowAttrs w;
  bool count_include_pad = false;
  int64_t storage_order = 0;
  double p = 2;
};

template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void PoolCore(const PoolAttrs& a, const Geometry& g, const T* x, T* y, int64_t* ind, int64_t planes,
              ThreadPool* pool) {
  using Acc = AccOf<T>;
  const int64_t inS = g.in_size(), outS = g.out_size();
  const auto tab = TapTable(g);
  const auto in_st = Strides(g.in);
  // Column-major strides for storage_order = 1 indices.
  std::vector<int64_t> cm_st(g.nd, 1);
  for (size_t i = 1; i < g.nd; ++i) cm_st[i] = cm_st[i - 1] * g.in[i - 1];
  ParallelFor(pool, planes, 1, [&](int64_t b, int64_t e) {
    std::vector<int64_t> o(g.nd), tap(g.nd);
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * inS;
      std::fill(o.begin(), o.end(), 0);
      int64_t q = 0;
      do {
        Acc acc = a.kind == PoolKind::kMax ? -std::numeric_limits<Acc>::infinity() : Acc(0);
        T best = std::numeric_limits<T>::lowest();
        if constexpr (!std::is_integral_v<T>) best = -std::numeric_limits<T>::infinity();
        int64_t best_idx = -1, count = 0;
        std::fill(tap.begin(), tap.end(), 0);
        do {
          int64_t off = 0, cm = 0;
          bool valid = true, in_pad = true;
          for (size_t i = 0; i < g.nd; ++i) {
            const int64_t ci = tab[i][o[i] * g.k[i] + tap[i]];
            if (ci < 0) {
              valid = false;
              const int64_t raw = o[i] * g.s[i] - g.pb[i] + tap[i] * g.d[i];
              if (raw >= g.in[i] + g.pe[i]) in_pad = false;
              continue;
            }
            off += ci * in_st[i];
            cm += ci * cm_st[i];
          }
          if (valid) {
            ++count;
            const T v = xp[off];
            if (a.kind == PoolKind::kMax) {
              if (best_idx < 0 || v > best) { best = v; best_idx = a.storage_order ? cm : off; }
            } else if (a.kind == PoolKind::kAverage) {
              acc += static_cast<Acc>(v);
            } else {
              acc += static_cast<Acc>(std::pow(std::abs(static_cast<double>(v)), a.p));
            }
          } else if (a.count_include_pad && in_pad) {
            ++count;
          }
        } while (Next(tap, g.k));
        T out;
        if (a.kind == PoolKind::kMax) {
          out = best;
          if (ind) ind[pl * outS + q] = best_idx < 0 ? -1 : pl * inS + best_idx;
        } else if (a.kind == PoolKind::kAverage) {
          out = static_cast<T>(count > 0 ? acc / static_cast<Acc>(count) : Acc(0));
        } else {
          out = static_cast<T>(std::pow(static_cast<double>(acc), 1.0 / a.p));
        }
        y[pl * outS + q] = out;
        ++q;
      } while (Next(o, g.out));
    }
  });
}

// 2-D float Max/AveragePool without indices: per output, the window's valid rows and columns
// are a range, so no tap table or multi-index walk.
void Pool2DFloat(const PoolAttrs& a, const Geometry& g, const float* x, float* y, int64_t planes, ThreadPool* pool) {
  const int64_t H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t KH = g.k[0], KW = g.k[1], SH = g.s[0], SW = g.s[1], DH = g.d[0], DW = g.d[1];
  // Taps of output o along a dim: valid (inside the input) and counted (inside input + pads).
  auto taps = [](int64_t o, int64_t s, int64_t pb, int64_t pe, int64_t k, int64_t d, int64_t in, int64_t* first,
                 int64_t* last, int64_t* padded) {
    const int64_t start = o * s - pb;
    *first = start >= 0 ? 0 : (-start + d - 1) / d;
    *last = in - 1 - start < 0 ? 0 : std::min(k, (in - 1 - start) / d + 1);
    if (*last < *first) *last = *first;
    int64_t n = 0;
    for (int64_t t = 0; t < k; ++t) n += start + t * d < in + pe;
    *padded = n;
  };
  std::vector<int64_t> wf(OW), wl(OW), wp(OW);
  for (int64_t ow = 0; ow < OW; ++ow) taps(ow, SW, g.pb[1], g.pe[1], KW, DW, W, &wf[ow], &wl[ow], &wp[ow]);
  const bool is_max = a.kind == PoolKind::kMax;
  ParallelFor(pool, planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const float* xp = x + pl * H * W;
      float* yp = y + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t hf, hl, hp;
        taps(oh, SH, g.pb[0], g.pe[0], KH, DH, H, &hf, &hl, &hp);
        const int64_t ih0 = oh * SH - g.pb[0];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t iw0 = ow * SW - g.pb[1];
          float acc = is_max ? -std::numeric_limits<float>::infinity() : 0.f;
          for (int64_t kh = hf; kh < hl; ++kh) {
            const float* row = xp + (ih0 + kh * DH) * W + iw0;
            for (int64_t kw = wf[ow]; kw < wl[ow]; ++kw) {
              const float v = row[kw * DW];
              if (is_max) {
                acc = v > acc ? v : acc;
              } else {
                acc += v;
              }
            }
          }
          if (!is_max) {
            const int64_t count = a.count_include_pad ? hp * wp[ow] : (hl - hf) * (wl[ow] - wf[ow]);
            acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
          }
          yp[oh * OW + ow] = acc;
        }
      }
    }
  });
}

absl::Status PoolCompute(OpContext& ctx, const PoolAttrs& a) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input X");
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  const bool int_ok = a.kind == PoolKind::kMax && (dt == DType::kInt8 || dt == DType::kUInt8);
  if (!IsFloatingPoint(dt) && !int_ok) return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
  if (x.rank() < 3) return InvalidArgument(ctx, "X must have rank >= 3, got ", ShapeToString(x.shape()));
  Geometry g;
  auto st = ResolveGeometry(ctx, a.w, a.w.kernel, Shape(x.shape().begin() + 2, x.shape().end()), &g);
  if (!st.ok()) return st;
  Shape os = {x.dim(0), x.dim(1)};
  os.insert(os.end(), g.out.begin(), g.out.end());
  // The 2-D float path writes every output; the generic one relies on nothing either, but keep its zero fill.
  const bool fast2d = dt == DType::kFloat32 && g.nd == 2 && a.kind != PoolKind::kLp &&
                      !(ctx.num_outputs() > 1 && ctx.has_output(1));
  Tensor& y = fast2d ? ctx.AllocateOutputUninitialized(0, dt, os) : ctx.AllocateOutput(0, dt, os);
  int64_t* ind = nullptr;
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    if (a.kind != PoolKind::kMax) return InvalidArgument(ctx, "only MaxPool has a second output");
    ind = ctx.AllocateOutput(1, DType::kInt64, os).data<int64_t>();
  }
  if (y.num_elements() == 0) return absl::OkStatus();
  const int64_t planes = x.dim(0) * x.dim(1);
  if (fast2d) {
    Pool2DFloat(a, g, x.data<float>(), y.data<float>(), planes, ctx.thread_pool());
    return absl::OkStatus();
  }
  return VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, float16> ||
                  std::is_same_v<T, bfloat16> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
      PoolCore<T>(a, g, x.data<T>(), y.data<T>(), ind, planes, ctx.thread_pool());
      return absl::OkStatus();
    } else {
      return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
    }
  });
}

class PoolKernel : public OpKernel {
 public:
  explicit PoolKernel(PoolAttrs a) : a_(std::move(a)) {}
  absl::Status Compute(OpContext& ctx) const override { return PoolCompute(ctx, a_); }

 private:
  PoolAttrs a_;
};

KernelFactory MakePool(PoolKind kind) {
  return [kind](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    const Node& n = init.node();
    PoolAttrs a;
    a.kind = kind;
    auto st = ReadWindowAttrs(n, true, &a.w);
    if (!st.ok()) return st;
    a.count_include_pad = n.GetInt("count_include_pad", 0) != 0;
    a.storage_order = n.GetInt("storage_order", 0);
    if (a.storage_order != 0 && a.storage_order != 1) return Unimplemented(n, "unsupported storage_order ", a.storage_order);
    if (kind == PoolKind::kLp) {
      // LpPool-1 has a float p; later versions an int.
      const Attribute* p = n.FindAttr("p");
      if (p) a.p = p->type == Attribute::Type::kFloat ? p->f : static_cast<double>(p->i);
      if (!(a.p > 0)) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": p must be positive"));
    }
    return std::unique_ptr<OpKernel>(new PoolKernel(std::move(a)));
  };
}

// Global pools: reduce every spatial dim.
template <bool kMax>
absl::Status GlobalPoolCompute(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input X");
  const Tensor& x = ctx.input(0);
  if (!IsFloatingPoint(x.dtype())) return InvalidArgument(ctx, "unsupported element type ", DTypeName(x.dtype()));
  if (x.rank() < 2) return InvalidArgument(ctx, "X must have rank >= 2");
  Shape os(x.shape().size(), 1);
  os[0] = x.dim(0);
  os[1] = x.dim(1);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t S = planes ? x.num_elements() / planes : 0;
  if (S == 0 && planes > 0) return InvalidArgument(ctx, "empty spatial extent");
  Tensor& y = ctx.AllocateOutput(0, x.dtype(), os);
  return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      using Acc = AccOf<T>;
      if constexpr (std::is_same_v<T, float>) {
        if (!kMax) {
          // Eight partial sums a plane (one float chain was latency-bound; the compiler vectorises these).
          ParallelFor(ctx.thread_pool(), planes, 1, [&](int64_t b, int64_t e) {
            for (int64_t pl = b; pl < e; ++pl) {
              const float* p = x.data<float>() + pl * S;
              float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
              int64_t i = 0;
              for (; i + 8 <= S; i += 8)
                for (int j = 0; j < 8; ++j) part[j] += p[i + j];
              float acc = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
              for (; i < S; ++i) acc += p[i];
              y.data<float>()[pl] = acc / static_cast<float>(S);
            }
          });
          return absl::OkStatus();
        }
      }
      ParallelFor(ctx.thread_pool(), planes, 1, [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T* p = x.data<T>() + pl * S;
          Acc acc = kMax ? static_cast<Acc>(p[0]) : Acc(0);
          for (int64_t i = 0; i < S; ++i) {
            const Acc v = static_cast<Acc>(p[i]);
            if constexpr (kMax) acc = std::max(acc, v); else acc += v;
          }
          y.data<T>()[pl] = static_cast<T>(kMax ? acc : acc / static_cast<Acc>(S));
        }
      });
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- MaxUnpool

struct UnpoolAttrs {
  WindowAttrs w;
};

absl::Status MaxUnpoolCompute(OpContext& ctx, const UnpoolAttrs& a) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "MaxUnpool needs X and I");
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (ind.dtype() != DType::kInt64) return InvalidArgument(ctx, "I must be int64");
  if (ind.shape() != x.shape()) return InvalidArgument(ctx, "I must have the shape of X");
  if (x.rank() < 3) return InvalidArgument(ctx, "X must have rank >= 3");
  const size_t nd = static_cast<size_t>(x.rank() - 2);
  if (a.w.kernel.size() != nd) return InvalidArgument(ctx, "kernel_shape must have ", nd, " values");
  if (!a.w.strides.empty() && a.w.strides.size() != nd) return InvalidArgument(ctx, "strides must have ", nd, " values");
  if (!a.w.pads.empty() && a.w.pads.size() != 2 * nd) return InvalidArgument(ctx, "pads must have ", 2 * nd, " values");
  // Indices address the inferred output; an explicit output_shape places that at the origin.
  Shape inferred = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < nd; ++i) {
    const int64_t s = a.w.strides.empty() ? 1 : a.w.strides[i];
    const int64_t pb = a.w.pads.empty() ? 0 : a.w.pads[i], pe = a.w.pads.empty() ? 0 : a.w.pads[i + nd];
    inferred.push_back(std::max<int64_t>(0, (x.dim(static_cast<int64_t>(i) + 2) - 1) * s + a.w.kernel[i] - pb - pe));
  }
  Shape os = inferred;
  if (ctx.has_input(2)) {
    auto v = ReadInts(ctx.input(2));
    if (!v.ok()) return InvalidArgument(ctx, v.status().message());
    os = *v;
    if (os.size() != static_cast<size_t>(x.rank())) return InvalidArgument(ctx, "output_shape must have ", x.rank(), " values");
    for (int64_t d : os) if (d < 0) return InvalidArgument(ctx, "negative output_shape");
  }
  Tensor& y = ctx.AllocateOutput(0, x.dtype(), os);
  Tensor tmp = os == inferred ? y : Tensor::Empty(x.dtype(), inferred);
  const int64_t total = tmp.num_elements();
  return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const int64_t* pi = ind.data<int64_t>();
    T* pt = tmp.data<T>();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      if (pi[i] < 0 || pi[i] >= total) return InvalidArgument(ctx, "index ", pi[i], " out of range [0, ", total, ")");
      pt[pi[i]] = px[i];
    }
    if (os == inferred || y.num_elements() == 0) return absl::OkStatus();
    // Copy the overlap of the inferred result into the corner of the requested shape.
    const auto ts = Strides(inferred), ys = Strides(os);
    std::vector<int64_t> idx(os.size(), 0);
    Shape ext(os.size());
    for (size_t d = 0; d < os.size(); ++d) ext[d] = std::min(os[d], inferred[d]);
    if (NumElements(ext) == 0) return absl::OkStatus();
    do {
      int64_t to = 0, yo = 0;
      for (size_t d = 0; d < os.size(); ++d) { to += idx[d] * ts[d]; yo += idx[d] * ys[d]; }
      y.data<T>()[yo] = pt[to];
    } while (Next(idx, ext));
    return absl::OkStatus();
  });
}

class MaxUnpoolKernel : public OpKernel {
 public:
  explicit MaxUnpoolKernel(UnpoolAttrs a) : a_(std::move(a)) {}
  absl::Status Compute(OpContext& ctx) const override { return MaxUnpoolCompute(ctx, a_); }

 private:
  UnpoolAttrs a_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeMaxUnpool(const KernelInit& init) {
  UnpoolAttrs a;
  auto st = ReadWindowAttrs(init.node(), true, &a.w);
  if (!st.ok()) return st;
  return std::unique_ptr<OpKernel>(new MaxUnpoolKernel(std::move(a)));
}

}  // namespace

void RegisterNNOps(KernelRegistry& r) {
  AddVersions(r, "Conv", {1, 11, 22}, MakeConv);
  r.Add(internal_ops::kDomain, internal_ops::FusedConv::kName, internal_ops::kOpset, internal_ops::kOpset, MakeConv);
  AddVersions(r, "ConvTranspose", {1, 11, 22}, MakeConvTranspose);
  AddVersions(r, "MaxPool", {1, 8, 10, 11, 12, 22}, MakePool(PoolKind::kMax));
  AddVersions(r, "AveragePool", {1, 7, 10, 11, 19, 22}, MakePool(PoolKind::kAverage));
  AddVersions(r, "LpPool", {1, 2, 11, 18, 22}, MakePool(PoolKind::kLp));
  AddVersions(r, "GlobalAveragePool", {1, 22}, GlobalPoolCompute<false>);
  AddVersions(r, "GlobalMaxPool", {1, 22}, GlobalPoolCompute<true>);
  AddVersions(r, "MaxUnpool", {9, 11, 22}, MakeMaxUnpool);
}

}  // namespace oneinfer
