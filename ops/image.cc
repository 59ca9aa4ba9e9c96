// Image ops: Resize / Upsample, RoiAlign, NonMaxSuppression, GridSample.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

// Reads a float tensor of any floating dtype as doubles.
absl::StatusOr<std::vector<double>> ReadFloats(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  switch (t.dtype()) {
    case DType::kFloat32: for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i]; break;
    case DType::kFloat64: for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<double>()[i]; break;
    case DType::kFloat16: for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<float16>()[i]); break;
    case DType::kBFloat16: for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<bfloat16>()[i]); break;
    default: return absl::InvalidArgumentError(absl::StrCat("expected a float tensor, got ", DTypeName(t.dtype())));
  }
  return v;
}

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    v = std::nearbyint(v);  // integer images: round, then saturate
    v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()), static_cast<double>(std::numeric_limits<T>::max()));
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
  }
}

// ----------------------------------------------------------------------------------------
// Resize (and Upsample / Resize-10, which are asymmetric with "simple" nearest rounding).

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNN, kTfCropAndResize, kHalfPixelSymmetric };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
enum class Mode { kNearest, kLinear, kCubic };

struct ResizeAttrs {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  bool antialias = false;
  std::vector<int64_t> axes;  // empty: all
  int keep_aspect = 0;        // 0 stretch, 1 not_larger, 2 not_smaller
};

// Per output index along one axis: `taps` (input index, weight) pairs and an "outside" flag.
struct AxisPlan {
  int64_t in = 0, out = 0;
  int taps = 0;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> outside;
  bool identity = false;
};

double CubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

AxisPlan PlanAxis(const ResizeAttrs& at, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  AxisPlan p;
  p.in = in;
  p.out = out;
  const double out_w = scale * static_cast<double>(in);  // the reference's (float) output width
  const bool aa = at.antialias && at.mode != Mode::kNearest && scale < 1.0;
  int n = at.mode == Mode::kNearest ? 1 : at.mode == Mode::kLinear ? 2 : 4;
  int first = at.mode == Mode::kCubic ? -1 : 0;  // first tap relative to base
  if (aa) {
    const double support = at.mode == Mode::kLinear ? 1.0 : 2.0;
    first = static_cast<int>(std::floor(-support / scale) + 1);
    n = 2 - 2 * first;
  }
  p.taps = n;
  p.idx.resize(static_cast<size_t>(out * n));
  p.w.resize(static_cast<size_t>(out * n));
  p.outside.assign(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    const double xo = static_cast<double>(o);
    double x = 0;
    switch (at.coord) {
      case Coord::kHalfPixel: x = (xo + 0.5) / scale - 0.5; break;
      case Coord::kPytorchHalfPixel: x = out_w == 1 ? -0.5 : (xo + 0.5) / scale - 0.5; break;
      case Coord::kAlignCorners: x = out_w == 1 ? 0.0 : xo * static_cast<double>(in - 1) / (out_w - 1); break;
      case Coord::kAsymmetric: x = xo / scale; break;
      case Coord::kTfHalfPixelForNN: x = (xo + 0.5) / scale; break;
      case Coord::kTfCropAndResize:
        x = out_w == 1 ? (roi_end - roi_start) * static_cast<double>(in - 1) / 2
                       : xo * (roi_end - roi_start) * static_cast<double>(in - 1) / (out_w - 1);
        x += roi_start * static_cast<double>(in - 1);
        if (x < 0 || x > static_cast<double>(in - 1)) p.outside[static_cast<size_t>(o)] = 1;
        break;
      case Coord::kHalfPixelSymmetric: {
        const double adjustment = static_cast<double>(out) / out_w;
        const double offset = static_cast<double>(in) / 2 * (1 - adjustment);
        x = offset + (xo + 0.5) / scale - 0.5;
        break;
      }
    }
    int64_t* ix = &p.idx[static_cast<size_t>(o * n)];
    double* w = &p.w[static_cast<size_t>(o * n)];
    // base/ratio with ratio in (0, 1]: the pixel left of x is preferred.
    const double fl = std::floor(x);
    const bool integral = fl == x;
    const int64_t base = integral ? static_cast<int64_t>(fl) - 1 : static_cast<int64_t>(fl);
    const double ratio = integral ? 1.0 : x - fl;
    if (at.mode == Mode::kNearest) {
      int64_t pick = 0;
      if (integral) {
        pick = static_cast<int64_t>(fl);
      } else {
        bool up = false;
        switch (at.nearest) {
          case Nearest::kRoundPreferFloor: up = ratio > 0.5; break;
          case Nearest::kRoundPreferCeil: up = ratio >= 0.5; break;
          case Nearest::kFloor: up = false; break;
          case Nearest::kCeil: up = true; break;
          case Nearest::kSimple: up = scale < 1.0; break;
        }
        pick = base + (up ? 1 : 0);
      }
      ix[0] = std::clamp<int64_t>(pick, 0, in - 1);
      w[0] = 1;
      continue;
    }
    double sum = 0;
    for (int k = 0; k < n; ++k) {
      const int64_t i = base + first + k;
      const double d = static_cast<double>(i) - x;  // signed distance of the tap
      double c = 0;
      if (aa) {
        c = at.mode == Mode::kLinear ? std::clamp(1 - std::fabs(d * scale), 0.0, 1.0) : CubicKernel(d * scale, at.cubic_a);
      } else {
        c = at.mode == Mode::kLinear ? (k == 0 ? 1 - ratio : ratio) : CubicKernel(d, at.cubic_a);
      }
      if (at.exclude_outside && (i < 0 || i >= in)) c = 0;
      ix[k] = std::clamp<int64_t>(i, 0, in - 1);
      w[k] = c;
      sum += c;
    }
    if ((aa || at.exclude_outside) && sum != 0) {
      for (int k = 0; k < n; ++k) w[k] /= sum;
    }
  }
  // Identity along this axis: every output reads exactly its own index.
  if (in == out) {
    p.identity = true;
    for (int64_t o = 0; o < out && p.identity; ++o) {
      double self = 0, other = 0;
      for (int k = 0; k < n; ++k) {
        const size_t j = static_cast<size_t>(o * n + k);
        (p.idx[j] == o ? self : other) += std::fabs(p.w[j]);
      }
      if (std::fabs(self - 1) > 1e-12 || other > 1e-12 || p.outside[static_cast<size_t>(o)]) p.identity = false;
    }
  }
  return p;
}

// Nearest resize is a gather: out[o_0, .., o_last] = x[idx_0[o_0], .., idx_last[o_last]], one
// output row (all axes but the last fixed) at a time, rows split over the pool.
template <typename T>
void NearestGather(const T* x, const Shape& in, const Shape& out, const std::vector<AxisPlan>& plans, T* y, ThreadPool* pool) {
  const size_t rank = in.size();
  const auto in_st = Strides(in);
  const int64_t width = out[rank - 1];
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < rank; ++a) rows *= out[a];
  const std::vector<int64_t>& last = plans[rank - 1].idx;
  const bool copy_rows = plans[rank - 1].identity;
  ParallelFor(pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(width, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t off = 0, rem = r;
      for (size_t a = rank - 1; a-- > 0;) {
        const int64_t o = rem % out[a];
        rem /= out[a];
        off += (plans[a].identity ? o : plans[a].idx[static_cast<size_t>(o)]) * in_st[a];
      }
      const T* src = x + off;
      T* dst = y + r * width;
      if (copy_rows) {
        std::copy(src, src + width, dst);
      } else {
        for (int64_t j = 0; j < width; ++j) dst[j] = src[last[static_cast<size_t>(j)]];
      }
    }
  });
}

// Past this an axis size is no size (2^62; the allocator refuses far less).
constexpr double kMaxResizedDim = 4611686018427387904.0;

// One separable pass along `axis` of a dense row-major buffer.
template <typename A>
std::vector<A> ResizeAxis(const std::vector<A>& src, const Shape& shape, size_t axis, const AxisPlan& p, ThreadPool* pool) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<A> dst(static_cast<size_t>(outer * p.out * inner));
  ParallelFor(pool, outer * p.out, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ou = r / p.out, o = r % p.out;
      A* d = &dst[static_cast<size_t>(r * inner)];
      for (int k = 0; k < p.taps; ++k) {
        const A w = static_cast<A>(p.w[static_cast<size_t>(o * p.taps + k)]);
        if (w == 0) continue;
        const A* s = &src[static_cast<size_t>((ou * p.in + p.idx[static_cast<size_t>(o * p.taps + k)]) * inner)];
        for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
      }
    }
  });
  return dst;
}

absl::Status ParseResizeAttrs(const Node& n, int64_t opset, bool legacy, ResizeAttrs* at) {
  const std::string mode = n.GetString("mode", "nearest");
  if (mode == "nearest") at->mode = Mode::kNearest;
  else if (mode == "linear" || (legacy && mode == "bilinear")) at->mode = Mode::kLinear;
  else if (mode == "cubic" && !legacy) at->mode = Mode::kCubic;
  else return Unimplemented(n, "unsupported mode '", mode, "'");
  if (legacy) {  // Upsample and Resize-10
    at->coord = Coord::kAsymmetric;
    at->nearest = Nearest::kSimple;
    return absl::OkStatus();
  }
  const std::string ct = n.GetString("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel") at->coord = Coord::kHalfPixel;
  else if (ct == "pytorch_half_pixel") at->coord = Coord::kPytorchHalfPixel;
  else if (ct == "align_corners") at->coord = Coord::kAlignCorners;
  else if (ct == "asymmetric") at->coord = Coord::kAsymmetric;
  else if (ct == "tf_half_pixel_for_nn") at->coord = Coord::kTfHalfPixelForNN;  // opset 11-12; kept later for old exporters
  else if (ct == "tf_crop_and_resize") at->coord = Coord::kTfCropAndResize;
  else if (ct == "half_pixel_symmetric" && opset >= 19) at->coord = Coord::kHalfPixelSymmetric;
  else return Unimplemented(n, "unsupported coordinate_transformation_mode '", ct, "'");
  const std::string nm = n.GetString("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") at->nearest = Nearest::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil") at->nearest = Nearest::kRoundPreferCeil;
  else if (nm == "floor") at->nearest = Nearest::kFloor;
  else if (nm == "ceil") at->nearest = Nearest::kCeil;
  else return Unimplemented(n, "unsupported nearest_mode '", nm, "'");
  at->cubic_a = n.GetFloat("cubic_coeff_a", -0.75f);
  at->exclude_outside = n.GetInt("exclude_outside", 0) != 0;
  at->extrapolation = n.GetFloat("extrapolation_value", 0.0f);
  if (opset >= 18) {
    at->antialias = n.GetInt("antialias", 0) != 0;
    at->axes = n.GetInts("axes");
    const std::string kp = n.GetString("keep_aspect_ratio_policy", "stretch");
    if (kp == "stretch") at->keep_aspect = 0;
    else if (kp == "not_larger") at->keep_aspect = 1;
    else if (kp == "not_smaller") at->keep_aspect = 2;
    else return Unimplemented(n, "unsupported keep_aspect_ratio_policy '", kp, "'");
  }
  return absl::OkStatus();
}

class ResizeKernel : public OpKernel {
 public:
  // kind: 0 Resize-11+, 1 Resize-10, 2 Upsample-9, 3 Upsample-7 (scales attribute)
  ResizeKernel(ResizeAttrs at, int kind, std::vector<float> attr_scales)
      : at_(std::move(at)), kind_(kind), attr_scales_(std::move(attr_scales)) {}

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input X");
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    const Shape& ishape = x.shape();
    // Which axes the scales/sizes/roi talk about.
    std::vector<int64_t> axes;
    if (!at_.axes.empty()) {
      std::vector<bool> seen(static_cast<size_t>(rank), false);
      for (int64_t a : at_.axes) {
        auto na = NormalizeAxis(a, rank);
        if (!na.ok()) return InvalidArgument(ctx, "axes: ", na.status().message());
        if (seen[static_cast<size_t>(*na)]) return InvalidArgument(ctx, "duplicate axis in axes");
        seen[static_cast<size_t>(*na)] = true;
        axes.push_back(*na);
      }
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    const size_t na = axes.size();
    std::vector<double> scales_in, roi;
    std::vector<int64_t> sizes_in;
    bool have_scales = false, have_sizes = false;
    if (kind_ == 3) {
      scales_in.assign(attr_scales_.begin(), attr_scales_.end());
      have_scales = true;
    } else {
      const size_t si = kind_ == 0 ? 2 : 1;
      if (ctx.has_input(si) && ctx.input(si).num_elements() > 0) {
        auto s = ReadFloats(ctx.input(si));
        if (!s.ok()) return InvalidArgument(ctx, "scales: ", s.status().message());
        scales_in = *s;
        have_scales = true;
      }
      if (kind_ == 0 && ctx.has_input(3) && ctx.input(3).num_elements() > 0) {
        if (ctx.input(3).dtype() != DType::kInt64) return InvalidArgument(ctx, "sizes must be int64");
        sizes_in.assign(ctx.input(3).data<int64_t>(), ctx.input(3).data<int64_t>() + ctx.input(3).num_elements());
        have_sizes = true;
      }
      if (kind_ == 0 && ctx.has_input(1) && ctx.input(1).num_elements() > 0) {
        auto r = ReadFloats(ctx.input(1));
        if (!r.ok()) return InvalidArgument(ctx, "roi: ", r.status().message());
        roi = *r;
      }
    }
    if (have_scales == have_sizes) return InvalidArgument(ctx, "exactly one of scales and sizes must be given");
    if (have_scales && scales_in.size() != na) {
      return InvalidArgument(ctx, "scales has ", scales_in.size(), " values, expected ", na);
    }
    if (have_sizes && sizes_in.size() != na) return InvalidArgument(ctx, "sizes has ", sizes_in.size(), " values, expected ", na);
    std::vector<double> scale(static_cast<size_t>(rank), 1.0), rs(static_cast<size_t>(rank), 0.0), re(static_cast<size_t>(rank), 1.0);
    Shape oshape = ishape;
    if (at_.coord == Coord::kTfCropAndResize) {
      if (roi.size() != 2 * na) return InvalidArgument(ctx, "roi has ", roi.size(), " values, expected ", 2 * na);
      for (size_t i = 0; i < na; ++i) {
        rs[static_cast<size_t>(axes[i])] = roi[i];
        re[static_cast<size_t>(axes[i])] = roi[na + i];
      }
    }
    if (have_scales) {
      for (size_t i = 0; i < na; ++i) {
        if (!(scales_in[i] > 0) || !std::isfinite(scales_in[i])) return InvalidArgument(ctx, "scales must be positive and finite, got ", scales_in[i]);
        const size_t a = static_cast<size_t>(axes[i]);
        scale[a] = scales_in[i];
        const double o = std::floor(scales_in[i] * static_cast<double>(ishape[a]));
        // A scale from the data must give a size that exists (the allocator then checks the bytes).
        if (!(o < kMaxResizedDim)) return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": scale ", scales_in[i], " makes axis ", a, " of ", ishape[a], " hold ", o, " elements"));
        oshape[a] = static_cast<int64_t>(o);
      }
    } else {
      for (size_t i = 0; i < na; ++i) {
        if (sizes_in[i] < 0) return InvalidArgument(ctx, "sizes must be non-negative");
        const size_t a = static_cast<size_t>(axes[i]);
        if (ishape[a] == 0) return InvalidArgument(ctx, "cannot resize an empty axis");
        oshape[a] = sizes_in[i];
        scale[a] = static_cast<double>(sizes_in[i]) / static_cast<double>(ishape[a]);
      }
      if (at_.keep_aspect != 0) {
        double s = at_.keep_aspect == 1 ? std::numeric_limits<double>::infinity() : 0;
        for (int64_t a : axes) s = at_.keep_aspect == 1 ? std::min(s, scale[static_cast<size_t>(a)]) : std::max(s, scale[static_cast<size_t>(a)]);
        for (int64_t a : axes) {
          scale[static_cast<size_t>(a)] = s;
          const double o = s * static_cast<double>(ishape[static_cast<size_t>(a)]) + 0.5;
          if (!(o < kMaxResizedDim)) return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": axis ", a, " would hold ", o, " elements"));
          oshape[static_cast<size_t>(a)] = static_cast<int64_t>(o);
        }
      }
    }
    for (int64_t a = 0; a < rank; ++a) {
      if (oshape[static_cast<size_t>(a)] > 0 && ishape[static_cast<size_t>(a)] == 0) return InvalidArgument(ctx, "cannot resize an empty axis");
    }
    // The nearest gather writes every output element.
    const bool gather = at_.mode == Mode::kNearest && at_.coord != Coord::kTfCropAndResize && x.dtype() != DType::kBool;
    Tensor& y = gather ? ctx.AllocateOutputUninitialized(0, x.dtype(), oshape) : ctx.AllocateOutput(0, x.dtype(), oshape);
    if (y.num_elements() == 0) return absl::OkStatus();
    if (at_.antialias && at_.mode != Mode::kNearest) {
      // Antialiased shrinking reads about 2 / scale taps per output: a scale from the data that
      // small would make the tap tables larger than any image.
      for (int64_t a = 0; a < rank; ++a) {
        if (scale[static_cast<size_t>(a)] < 1 && 4 / scale[static_cast<size_t>(a)] > 4.0 * static_cast<double>(ishape[static_cast<size_t>(a)]) + 16) {
          return InvalidArgument(ctx, "antialiased scale ", scale[static_cast<size_t>(a)], " is too small for axis ", a, " of ", ishape[static_cast<size_t>(a)]);
        }
      }
    }
    return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return InvalidArgument(ctx, "Resize does not take bool tensors");
      } else {
        using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
        std::vector<AxisPlan> plans(static_cast<size_t>(rank));
        std::vector<size_t> order;
        for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
          plans[a] = PlanAxis(at_, ishape[a], oshape[a], scale[a], rs[a], re[a]);
          if (!plans[a].identity) order.push_back(a);
        }
        if (gather && rank >= 1) {
          NearestGather(x.data<T>(), ishape, oshape, plans, y.data<T>(), ctx.thread_pool());
          return absl::OkStatus();
        }
        // Shrinking axes first keeps the intermediate buffers small.
        std::stable_sort(order.begin(), order.end(), [&](size_t l, size_t r) {
          return static_cast<double>(oshape[l]) / static_cast<double>(ishape[l]) < static_cast<double>(oshape[r]) / static_cast<double>(ishape[r]);
        });
        std::vector<A> buf(static_cast<size_t>(x.num_elements()));
        const T* src = x.data<T>();
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<A>(src[i]);
        Shape cur = ishape;
        for (size_t a : order) {
          if (absl::Status stop = ctx.CheckCancel(); !stop.ok()) return stop;  // each pass is linear in its output
          buf = ResizeAxis(buf, cur, a, plans[a], ctx.thread_pool());
          cur[a] = oshape[a];
        }
        T* out = y.data<T>();
        const int64_t total = y.num_elements();
        if (at_.coord == Coord::kTfCropAndResize) {
          std::vector<int64_t> st = Strides(oshape);
          for (int64_t i = 0; i < total; ++i) {
            bool outside = false;
            for (size_t a = 0; a < static_cast<size_t>(rank) && !outside; ++a) {
              outside = plans[a].outside[static_cast<size_t>((i / st[a]) % oshape[a])] != 0;
            }
            out[i] = FromDouble<T>(outside ? at_.extrapolation : static_cast<double>(buf[static_cast<size_t>(i)]));
          }
        } else {
          for (int64_t i = 0; i < total; ++i) out[i] = FromDouble<T>(static_cast<double>(buf[static_cast<size_t>(i)]));
        }
        return absl::OkStatus();
      }
    });
  }

 private:
  ResizeAttrs at_;
  int kind_;
  std::vector<float> attr_scales_;
};

KernelFactory ResizeFactory(int kind) {
  return [kind](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    ResizeAttrs at;
    const bool legacy = kind != 0;
    auto s = ParseResizeAttrs(init.node(), init.opset(), legacy, &at);
    if (!s.ok()) return s;
    std::vector<float> attr_scales;
    if (kind == 3) {
      attr_scales = init.node().GetFloats("scales");
      if (attr_scales.empty()) return absl::InvalidArgumentError("Upsample-7 needs the scales attribute");
    }
    return std::unique_ptr<OpKernel>(new ResizeKernel(std::move(at), kind, std::move(attr_scales)));
  };
}

// ----------------------------------------------------------------------------------------
// RoiAlign

// The sample indices i in [0, n) whose coordinate start + (i + 0.5) * step may lie in
// [-1, extent], widened by one on each side so that rounding never drops one.
std::pair<int64_t, int64_t> SamplesNear(double start, double step, int64_t n, int64_t extent) {
  if (step == 0 || !std::isfinite(step)) return {0, n};
  double a = (-1.0 - start) / step - 0.5, b = (static_cast<double>(extent) - start) / step - 0.5;
  if (a > b) std::swap(a, b);
  const double lo = std::clamp(std::floor(a) - 1, 0.0, static_cast<double>(n));
  const double hi = std::clamp(std::ceil(b) + 2, 0.0, static_cast<double>(n));
  return {static_cast<int64_t>(lo), std::max(static_cast<int64_t>(lo), static_cast<int64_t>(hi))};
}

class RoiAlignKernel : public OpKernel {
 public:
  RoiAlignKernel(bool max_mode, bool half_pixel, int64_t oh, int64_t ow, int64_t sampling, float spatial)
      : max_mode_(max_mode), half_pixel_(half_pixel), oh_(oh), ow_(ow), sampling_(sampling), spatial_(spatial) {}

  absl::Status Compute(OpContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i) if (!ctx.has_input(i)) return InvalidArgument(ctx, "missing input ", i);
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    if (x.rank() != 4) return InvalidArgument(ctx, "X must be 4-D (N, C, H, W), got ", ShapeToString(x.shape()));
    if (rois.rank() != 2 || rois.dim(1) != 4) return InvalidArgument(ctx, "rois must be (num_rois, 4), got ", ShapeToString(rois.shape()));
    if (rois.dtype() != x.dtype()) return InvalidArgument(ctx, "rois and X must have the same dtype");
    if (bi.rank() != 1 || bi.dim(0) != rois.dim(0)) return InvalidArgument(ctx, "batch_indices must be (num_rois)");
    auto bidx = ReadInts(bi);
    if (!bidx.ok()) return InvalidArgument(ctx, "batch_indices: ", bidx.status().message());
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
    for (int64_t b : *bidx) if (b < 0 || b >= N) return InvalidArgument(ctx, "batch index ", b, " out of range [0, ", N, ")");
    auto rv = ReadFloats(rois);
    if (!rv.ok()) return InvalidArgument(ctx, "rois: ", rv.status().message());
    for (double v : *rv) if (!std::isfinite(v)) return InvalidArgument(ctx, "rois must be finite");
    auto xv = ReadFloats(x);
    if (!xv.ok()) return InvalidArgument(ctx, "X: ", xv.status().message());
    const double off = half_pixel_ ? 0.5 : 0.0;
    // The sampling grid comes from the data (roi size x spatial_scale): past 2^31 points a side
    // it is refused, and below that only the points inside the image are visited (the others
    // add 0), so a huge ROI costs O(H + W) per bin, not O(grid).
    constexpr double kMaxGrid = 2147483648.0;
    for (int64_t r = 0; r < R; ++r) {
      const double* box = &(*rv)[static_cast<size_t>(r * 4)];
      const double rh = std::abs(box[3] - box[1]) * spatial_, rw = std::abs(box[2] - box[0]) * spatial_;
      const double gh = sampling_ > 0 ? static_cast<double>(sampling_) : std::ceil(rh / static_cast<double>(oh_));
      const double gw = sampling_ > 0 ? static_cast<double>(sampling_) : std::ceil(rw / static_cast<double>(ow_));
      if (!(gh <= kMaxGrid && gw <= kMaxGrid)) {
        return InvalidArgument(ctx, "roi ", r, " with spatial_scale ", spatial_, " needs a sampling grid of ", gh, " x ", gw,
                               " points per bin, past 2^31 a side");
      }
    }
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), {R, C, oh_, ow_});
    std::vector<double> out(static_cast<size_t>(y.num_elements()));
    std::atomic<bool> stopped{false};
    absl::Status stop_status;
    std::mutex stop_mu;
    ParallelFor(ctx.thread_pool(), R * C, 1, [&](int64_t b, int64_t e) {
      int64_t sampled = 0;  // points since the last check of the run's stop flag
      for (int64_t rc = b; rc < e && !stopped.load(std::memory_order_relaxed); ++rc) {
        const int64_t r = rc / C, c = rc % C;
        const double* box = &(*rv)[static_cast<size_t>(r * 4)];
        const double x0 = box[0] * spatial_ - off, y0 = box[1] * spatial_ - off;
        const double x1 = box[2] * spatial_ - off, y1 = box[3] * spatial_ - off;
        double rw = x1 - x0, rh = y1 - y0;
        if (!half_pixel_) {  // legacy: force malformed ROIs to 1x1
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        const double bh = rh / static_cast<double>(oh_), bw = rw / static_cast<double>(ow_);
        const int64_t gh = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh_)));
        const int64_t gw = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow_)));
        const double count = std::max(static_cast<double>(gh) * static_cast<double>(gw), 1.0);
        const double* img = &(*xv)[static_cast<size_t>(((*bidx)[static_cast<size_t>(r)] * C + c) * H * W)];
        for (int64_t ph = 0; ph < oh_; ++ph) {
          // Sample rows iy in [iy0, iy1) may fall inside [-1, H]; the test below still decides.
          const auto [iy0, iy1] = SamplesNear(y0 + static_cast<double>(ph) * bh, bh / static_cast<double>(gh), gh, H);
          for (int64_t pw = 0; pw < ow_; ++pw) {
            const auto [ix0, ix1] = SamplesNear(x0 + static_cast<double>(pw) * bw, bw / static_cast<double>(gw), gw, W);
            double acc = 0;
            bool first = true;
            // Samples outside the window count as 0 (in max mode, 0 joins the maximum).
            if (max_mode_ && (iy1 - iy0) * (ix1 - ix0) < static_cast<double>(gh) * static_cast<double>(gw)) first = false;
            for (int64_t iy = iy0; iy < iy1; ++iy) {
              double yy = y0 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
              for (int64_t ix = ix0; ix < ix1; ++ix) {
                if (++sampled == 65536) {  // a check per 65536 points: negligible, and a stop within milliseconds
                  sampled = 0;
                  if (absl::Status st = ctx.CheckCancel(); !st.ok()) {
                    std::lock_guard<std::mutex> lock(stop_mu);
                    if (!stopped.exchange(true)) stop_status = st;
                  }
                  if (stopped.load(std::memory_order_relaxed)) return;
                }
                double xx = x0 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                double v = 0;
                if (!(yy < -1.0 || yy > static_cast<double>(H) || xx < -1.0 || xx > static_cast<double>(W))) {
                  double ys = std::max(yy, 0.0), xs = std::max(xx, 0.0);
                  int64_t yl = static_cast<int64_t>(ys), xl = static_cast<int64_t>(xs), yh, xh;
                  if (yl >= H - 1) { yh = yl = H - 1; ys = static_cast<double>(yl); } else { yh = yl + 1; }
                  if (xl >= W - 1) { xh = xl = W - 1; xs = static_cast<double>(xl); } else { xh = xl + 1; }
                  const double ly = ys - static_cast<double>(yl), lx = xs - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
                  const double w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
                  const double v1 = img[yl * W + xl], v2 = img[yl * W + xh], v3 = img[yh * W + xl], v4 = img[yh * W + xh];
                  if (max_mode_) {
                    v = std::max(std::max(w1 * v1, w2 * v2), std::max(w3 * v3, w4 * v4));
                  } else {
                    v = w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
                  }
                }
                if (max_mode_) acc = first ? v : std::max(acc, v);
                else acc += v;
                first = false;
              }
            }
            out[static_cast<size_t>(((r * C + c) * oh_ + ph) * ow_ + pw)] = max_mode_ ? acc : acc / count;
          }
        }
      }
    });
    if (stopped.load()) return stop_status;
    return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        T* o = y.data<T>();
        for (size_t i = 0; i < out.size(); ++i) o[i] = FromDouble<T>(out[i]);
        return absl::OkStatus();
      } else {
        return InvalidArgument(ctx, "RoiAlign takes float tensors");
      }
    });
  }

 private:
  bool max_mode_, half_pixel_;
  int64_t oh_, ow_, sampling_;
  float spatial_;
};

KernelFactory RoiAlignFactory() {
  return [](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    const Node& n = init.node();
    const std::string mode = n.GetString("mode", "avg");
    if (mode != "avg" && mode != "max") return Unimplemented(n, "unsupported mode '", mode, "'");
    bool half_pixel = false;
    if (init.opset() >= 16) {
      const std::string ct = n.GetString("coordinate_transformation_mode", "half_pixel");
      if (ct == "half_pixel") half_pixel = true;
      else if (ct != "output_half_pixel") return Unimplemented(n, "unsupported coordinate_transformation_mode '", ct, "'");
    }
    const int64_t oh = n.GetInt("output_height", 1), ow = n.GetInt("output_width", 1), sr = n.GetInt("sampling_ratio", 0);
    if (oh <= 0 || ow <= 0) return absl::InvalidArgumentError("output_height and output_width must be positive");
    if (sr < 0) return absl::InvalidArgumentError("sampling_ratio must be >= 0");
    return std::unique_ptr<OpKernel>(new RoiAlignKernel(mode == "max", half_pixel, oh, ow, sr, n.GetFloat("spatial_scale", 1.0f)));
  };
}

// ----------------------------------------------------------------------------------------
// NonMaxSuppression

absl::Status NonMaxSuppression(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "boxes and scores are required");
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4) return InvalidArgument(ctx, "boxes must be (batch, spatial, 4), got ", ShapeToString(boxes.shape()));
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    return InvalidArgument(ctx, "scores must be (batch, classes, spatial) matching boxes, got ", ShapeToString(scores.shape()));
  }
  int64_t max_out = 0;
  double iou_th = 0, score_th = 0;
  bool has_score_th = false;
  if (ctx.has_input(2) && ctx.input(2).num_elements() > 0) {
    auto v = ReadInts(ctx.input(2));
    if (!v.ok()) return InvalidArgument(ctx, "max_output_boxes_per_class: ", v.status().message());
    max_out = (*v)[0];
  }
  if (ctx.has_input(3) && ctx.input(3).num_elements() > 0) {
    auto v = ReadScalar(ctx.input(3));
    if (!v.ok()) return InvalidArgument(ctx, "iou_threshold: ", v.status().message());
    iou_th = *v;
    if (iou_th < 0 || iou_th > 1) return InvalidArgument(ctx, "iou_threshold must be in [0, 1], got ", iou_th);
  }
  if (ctx.has_input(4) && ctx.input(4).num_elements() > 0) {
    auto v = ReadScalar(ctx.input(4));
    if (!v.ok()) return InvalidArgument(ctx, "score_threshold: ", v.status().message());
    score_th = *v;
    has_score_th = true;
  }
  auto bv = ReadFloats(boxes);
  if (!bv.ok()) return InvalidArgument(ctx, "boxes: ", bv.status().message());
  auto sv = ReadFloats(scores);
  if (!sv.ok()) return InvalidArgument(ctx, "scores: ", sv.status().message());
  const bool center = ctx.node().GetInt("center_point_box", 0) != 0;
  const int64_t B = boxes.dim(0), S = boxes.dim(1), C = scores.dim(1);
  // Corners normalised to (ymin, xmin, ymax, xmax).
  std::vector<std::array<double, 4>> corners(static_cast<size_t>(B * S));
  for (int64_t i = 0; i < B * S; ++i) {
    const double* b = &(*bv)[static_cast<size_t>(i * 4)];
    auto& c = corners[static_cast<size_t>(i)];
    if (center) {
      c = {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
    } else {
      c = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
    }
  }
  auto suppress = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0 || area_b <= 0) return false;
    const double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]), iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    const double inter = ih * iw;
    return inter / (area_a + area_b - inter) > iou_th;
  };
  std::vector<int64_t> selected;
  if (max_out > 0) {
    std::vector<int64_t> cand, kept;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t c = 0; c < C; ++c) {
        const double* sc = &(*sv)[static_cast<size_t>((b * C + c) * S)];
        cand.clear();
        kept.clear();
        for (int64_t i = 0; i < S; ++i) if (!std::isnan(sc[i]) && (!has_score_th || sc[i] > score_th)) cand.push_back(i);
        std::stable_sort(cand.begin(), cand.end(), [&](int64_t l, int64_t r) { return sc[l] > sc[r]; });
        for (int64_t i : cand) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool ok = true;
          for (int64_t k : kept) {
            if (suppress(corners[static_cast<size_t>(b * S + i)], corners[static_cast<size_t>(b * S + k)])) { ok = false; break; }
          }
          if (!ok) continue;
          kept.push_back(i);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
  }
  Tensor& y = ctx.AllocateOutput(0, DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), y.data<int64_t>());
  return absl::OkStatus();
}

// ----------------------------------------------------------------------------------------
// GridSample (4-D)

class GridSampleKernel : public OpKernel {
 public:
  GridSampleKernel(int mode, int pad, bool align) : mode_(mode), pad_(pad), align_(align) {}

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "X and grid are required");
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    if (x.rank() != 4) return Unimplemented(ctx.node(), "only 4-D inputs (N, C, H, W) are supported, got ", ShapeToString(x.shape()));
    if (grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2) {
      return InvalidArgument(ctx, "grid must be (N, H_out, W_out, 2), got ", ShapeToString(grid.shape()));
    }
    auto xv = ReadFloats(x);
    if (!xv.ok()) return InvalidArgument(ctx, "X: ", xv.status().message());
    auto gv = ReadFloats(grid);
    if (!gv.ok()) return InvalidArgument(ctx, "grid: ", gv.status().message());
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), OH = grid.dim(1), OW = grid.dim(2);
    Tensor& y = ctx.AllocateOutput(0, x.dtype(), {N, C, OH, OW});
    if (y.num_elements() == 0) return absl::OkStatus();
    if (H == 0 || W == 0) return InvalidArgument(ctx, "X has an empty spatial dimension");
    std::vector<double> out(static_cast<size_t>(y.num_elements()));
    const double xmin = align_ ? 0 : -0.5, xmax = align_ ? static_cast<double>(W) - 1 : static_cast<double>(W) - 0.5;
    const double ymin = align_ ? 0 : -0.5, ymax = align_ ? static_cast<double>(H) - 1 : static_cast<double>(H) - 0.5;
    auto reflect = [](double v, double lo, double hi) {
      const double rng = hi - lo;
      if (rng <= 0) return lo;
      if (v < lo) {
        const double dx = lo - v;
        const double n = std::floor(dx / rng), r = dx - n * rng;
        return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
      }
      if (v > hi) {
        const double dx = v - hi;
        const double n = std::floor(dx / rng), r = dx - n * rng;
        return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
      }
      return v;
    };
    auto denorm = [&](double g, int64_t len) {
      return align_ ? (g + 1) / 2.0 * static_cast<double>(len - 1) : ((g + 1) * static_cast<double>(len) - 1) / 2.0;
    };
    ParallelFor(ctx.thread_pool(), N * OH * OW, 64, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t n = p / (OH * OW), pix = p % (OH * OW);
        double gx = denorm((*gv)[static_cast<size_t>(p * 2)], W), gy = denorm((*gv)[static_cast<size_t>(p * 2 + 1)], H);
        if (!std::isfinite(gx) || !std::isfinite(gy)) continue;  // leaves zeros: nothing sensible to sample
        if (mode_ == 1) {
          gx = std::nearbyint(gx);
          gy = std::nearbyint(gy);
        }
        if (gx < xmin || gx > xmax) gx = pad_ == 1 ? std::clamp(gx, 0.0, static_cast<double>(W - 1)) : pad_ == 2 ? reflect(gx, xmin, xmax) : gx;
        if (gy < ymin || gy > ymax) gy = pad_ == 1 ? std::clamp(gy, 0.0, static_cast<double>(H - 1)) : pad_ == 2 ? reflect(gy, ymin, ymax) : gy;
        for (int64_t c = 0; c < C; ++c) {
          const double* img = &(*xv)[static_cast<size_t>((n * C + c) * H * W)];
          auto at = [&](int64_t r, int64_t col) -> double {
            if (pad_ == 0) return (r >= 0 && r < H && col >= 0 && col < W) ? img[r * W + col] : 0.0;
            if (pad_ == 2) {
              col = static_cast<int64_t>(reflect(static_cast<double>(col), xmin, xmax));
              r = static_cast<int64_t>(reflect(static_cast<double>(r), ymin, ymax));
            }
            return img[std::clamp<int64_t>(r, 0, H - 1) * W + std::clamp<int64_t>(col, 0, W - 1)];
          };
          double v = 0;
          if (mode_ == 1) {
            v = at(static_cast<int64_t>(gy), static_cast<int64_t>(gx));
          } else if (mode_ == 0) {
            const double fx = std::floor(gx), fy = std::floor(gy);
            const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            const double lx = gx - fx, ly = gy - fy;
            v = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x0 + 1)) + ly * ((1 - lx) * at(y0 + 1, x0) + lx * at(y0 + 1, x0 + 1));
          } else {
            const double fx = std::floor(gx), fy = std::floor(gy);
            const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            double cx[4], cy[4];
            for (int k = 0; k < 4; ++k) {
              cx[k] = CubicKernel(gx - fx - (k - 1), -0.75);
              cy[k] = CubicKernel(gy - fy - (k - 1), -0.75);
            }
            for (int i = 0; i < 4; ++i) {
              double row = 0;
              for (int j = 0; j < 4; ++j) row += cx[j] * at(y0 - 1 + i, x0 - 1 + j);
              v += cy[i] * row;
            }
          }
          out[static_cast<size_t>((n * C + c) * OH * OW + pix)] = v;
        }
      }
    });
    return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        T* o = y.data<T>();
        for (size_t i = 0; i < out.size(); ++i) o[i] = FromDouble<T>(out[i]);
        return absl::OkStatus();
      } else {
        return InvalidArgument(ctx, "GridSample takes float tensors");
      }
    });
  }

 private:
  int mode_;  // 0 linear, 1 nearest, 2 cubic
  int pad_;   // 0 zeros, 1 border, 2 reflection
  bool align_;
};

KernelFactory GridSampleFactory() {
  return [](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    const Node& n = init.node();
    const bool v20 = init.opset() >= 20;
    const std::string mode = n.GetString("mode", v20 ? "linear" : "bilinear");
    int m = 0;
    if (mode == (v20 ? "linear" : "bilinear")) m = 0;
    else if (mode == "nearest") m = 1;
    else if (mode == (v20 ? "cubic" : "bicubic")) m = 2;
    else return Unimplemented(n, "unsupported mode '", mode, "'");
    const std::string pad = n.GetString("padding_mode", "zeros");
    int p = 0;
    if (pad == "zeros") p = 0;
    else if (pad == "border") p = 1;
    else if (pad == "reflection") p = 2;
    else return Unimplemented(n, "unsupported padding_mode '", pad, "'");
    return std::unique_ptr<OpKernel>(new GridSampleKernel(m, p, n.GetInt("align_corners", 0) != 0));
  };
}

}  // namespace

void RegisterImageOps(KernelRegistry& r) {
  r.Add("", "Upsample", 7, 8, ResizeFactory(3));
  r.Add("", "Upsample", 9, 9, ResizeFactory(2));
  r.Add("", "Resize", 10, 10, ResizeFactory(1));
  AddVersions(r, "Resize", {11, 13, 18, 19}, ResizeFactory(0));
  AddVersions(r, "RoiAlign", {10, 16, 22}, RoiAlignFactory());
  AddVersions(r, "NonMaxSuppression", {10, 11}, NonMaxSuppression);
  AddVersions(r, "GridSample", {16, 20, 22}, GridSampleFactory());
}

}  // namespace oneinfer
