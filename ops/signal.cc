// Signal ops: DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {
namespace {

using cd = std::complex<double>;

// A DFT of one length and direction: radix-2 for powers of two, Bluestein otherwise.
class FftPlan {
 public:
  FftPlan(int64_t n, bool inverse) : n_(n), inverse_(inverse) {
    if (n <= 1) return;
    if ((n & (n - 1)) == 0) {
      pow2_ = true;
      Twiddles(n, inverse, &tw_);
      return;
    }
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    Twiddles(m_, false, &tw_);
    Twiddles(m_, true, &itw_);
    chirp_.resize(static_cast<size_t>(n));
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t k2 = (k * k) % (2 * n);  // exact phase for large k
      chirp_[static_cast<size_t>(k)] = std::polar(1.0, sign * std::numbers::pi * static_cast<double>(k2) / static_cast<double>(n));
    }
    std::vector<cd> b(static_cast<size_t>(m_));
    b[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < n; ++k) b[static_cast<size_t>(k)] = b[static_cast<size_t>(m_ - k)] = std::conj(chirp_[static_cast<size_t>(k)]);
    Radix2(b, tw_);
    bhat_ = std::move(b);
  }

  // In place, unnormalised.
  void Run(std::vector<cd>& a) const {
    if (n_ <= 1) return;
    if (pow2_) {
      Radix2(a, tw_);
      return;
    }
    std::vector<cd> t(static_cast<size_t>(m_));
    for (int64_t k = 0; k < n_; ++k) t[static_cast<size_t>(k)] = a[static_cast<size_t>(k)] * chirp_[static_cast<size_t>(k)];
    Radix2(t, tw_);
    for (int64_t k = 0; k < m_; ++k) t[static_cast<size_t>(k)] *= bhat_[static_cast<size_t>(k)];
    Radix2(t, itw_);
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) a[static_cast<size_t>(k)] = t[static_cast<size_t>(k)] * inv_m * chirp_[static_cast<size_t>(k)];
  }

 private:
  static void Twiddles(int64_t n, bool inverse, std::vector<cd>* tw) {
    tw->resize(static_cast<size_t>(n / 2));
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n / 2; ++k) (*tw)[static_cast<size_t>(k)] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  }
  static void Radix2(std::vector<cd>& a, const std::vector<cd>& tw) {
    const size_t n = tw.size() * 2;
    for (size_t i = 1, j = 0; i < n; ++i) {
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1) {
      const size_t step = n / len;
      for (size_t i = 0; i < n; i += len) {
        for (size_t k = 0; k < len / 2; ++k) {
          const cd u = a[i + k], v = a[i + k + len / 2] * tw[k * step];
          a[i + k] = u + v;
          a[i + k + len / 2] = u - v;
        }
      }
    }
  }

  int64_t n_;
  bool inverse_;
  bool pow2_ = false;
  int64_t m_ = 0;
  std::vector<cd> tw_, itw_, chirp_, bhat_;
};

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16; }

absl::StatusOr<std::vector<double>> ReadFloats(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  if (!IsFloat(t.dtype())) return absl::InvalidArgumentError(absl::StrCat("expected a float tensor, got ", DTypeName(t.dtype())));
  absl::Status s = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<float>(t.data<T>()[i]));
    if constexpr (std::is_same_v<T, double>) for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<double>()[i];
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return v;
}

// Writes doubles into a tensor of any numeric dtype.
absl::Status WriteDoubles(Tensor& t, const std::vector<double>& v) {
  return VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* o = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) o[i] = static_cast<T>(static_cast<float>(v[i]));
      else o[i] = static_cast<T>(v[i]);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> ReadIntScalar(const OpContext& ctx, size_t i, const char* what) {
  auto v = ReadInts(ctx.input(i));
  if (!v.ok() || v->size() != 1) return InvalidArgument(ctx, what, " must be an int32/int64 scalar");
  return (*v)[0];
}

// ----------------------------------------------------------------------------------------
// DFT

absl::Status Dft(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing input");
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype())) return InvalidArgument(ctx, "input must be a float tensor, got ", DTypeName(x.dtype()));
  const int64_t r = x.rank();
  if (r < 2 || (x.dim(-1) != 1 && x.dim(-1) != 2)) {
    return InvalidArgument(ctx, "input must end in a dimension of 1 (real) or 2 (complex), got ", ShapeToString(x.shape()));
  }
  const Node& n = ctx.node();
  int64_t axis = 0;
  if (ctx.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      auto a = ReadIntScalar(ctx, 2, "axis");
      if (!a.ok()) return a.status();
      axis = *a;
    }
  } else {
    axis = n.GetInt("axis", 1);
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) return InvalidArgument(ctx, "axis out of range for rank ", r);
  const bool inverse = n.GetInt("inverse", 0) != 0, onesided = n.GetInt("onesided", 0) != 0;
  const int64_t comp = x.dim(-1);
  // onesided forward is an RFFT (real in), onesided inverse an IRFFT (half spectrum in, real out).
  const bool irfft = onesided && inverse;
  if (onesided && !inverse && comp != 1) return InvalidArgument(ctx, "onesided forward DFT needs real input (last dim 1)");
  if (irfft && comp != 2) return InvalidArgument(ctx, "onesided inverse DFT needs complex input (last dim 2)");
  const int64_t in_len = x.dim(axis);
  int64_t len = irfft ? 2 * (in_len - 1) : in_len;
  if (ctx.has_input(1)) {
    auto l = ReadIntScalar(ctx, 1, "dft_length");
    if (!l.ok()) return l.status();
    len = *l;
  }
  if (len < 1) return InvalidArgument(ctx, "dft_length must be positive, got ", len);
  const int64_t out_len = onesided && !inverse ? len / 2 + 1 : len;
  const int64_t out_comp = irfft ? 1 : 2;
  Shape oshape = x.shape();
  oshape[static_cast<size_t>(axis)] = out_len;
  oshape.back() = out_comp;
  Tensor& y = ctx.AllocateOutput(0, x.dtype(), oshape);
  if (y.num_elements() == 0) return absl::OkStatus();  // no transform to plan (len may be anything)
  auto xv = ReadFloats(x);
  if (!xv.ok()) return InvalidArgument(ctx, xv.status().message());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r - 1; ++i) inner *= x.dim(i);
  std::vector<double> out(static_cast<size_t>(y.num_elements()));
  FftPlan plan(len, inverse);
  const double norm = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  ParallelFor(ctx.thread_pool(), outer * inner, 1, [&](int64_t b, int64_t e) {
    std::vector<cd> buf(static_cast<size_t>(len));
    for (int64_t li = b; li < e; ++li) {
      const int64_t o = li / inner, i = li % inner;
      auto at_in = [&](int64_t k) {
        const size_t at = static_cast<size_t>(((o * in_len + k) * inner + i) * comp);
        return cd((*xv)[at], comp == 2 ? (*xv)[at + 1] : 0.0);
      };
      std::fill(buf.begin(), buf.end(), cd(0, 0));
      if (irfft) {  // rebuild the Hermitian spectrum from its first half
        for (int64_t k = 0; k <= len / 2 && k < in_len; ++k) buf[static_cast<size_t>(k)] = at_in(k);
        for (int64_t k = len / 2 + 1; k < len; ++k) buf[static_cast<size_t>(k)] = std::conj(buf[static_cast<size_t>(len - k)]);
      } else {
        for (int64_t k = 0; k < std::min(len, in_len); ++k) buf[static_cast<size_t>(k)] = at_in(k);
      }
      plan.Run(buf);
      for (int64_t k = 0; k < out_len; ++k) {
        const size_t at = static_cast<size_t>(((o * out_len + k) * inner + i) * out_comp);
        out[at] = buf[static_cast<size_t>(k)].real() * norm;
        if (out_comp == 2) out[at + 1] = buf[static_cast<size_t>(k)].imag() * norm;
      }
    }
  });
  return WriteDoubles(y, out);
}

// ----------------------------------------------------------------------------------------
// STFT

absl::Status Stft(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "signal and frame_step are required");
  const Tensor& sig = ctx.input(0);
  if (!IsFloat(sig.dtype())) return InvalidArgument(ctx, "signal must be a float tensor");
  if (sig.rank() != 3 || (sig.dim(2) != 1 && sig.dim(2) != 2)) {
    return InvalidArgument(ctx, "signal must be (batch, length, 1 or 2), got ", ShapeToString(sig.shape()));
  }
  auto step = ReadIntScalar(ctx, 1, "frame_step");
  if (!step.ok()) return step.status();
  if (*step < 1) return InvalidArgument(ctx, "frame_step must be positive");
  std::vector<double> window;
  int64_t flen = -1;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1) return InvalidArgument(ctx, "window must be 1-D");
    auto wv = ReadFloats(w);
    if (!wv.ok()) return InvalidArgument(ctx, "window: ", wv.status().message());
    window = *wv;
    flen = w.dim(0);
  }
  if (ctx.has_input(3)) {
    auto fl = ReadIntScalar(ctx, 3, "frame_length");
    if (!fl.ok()) return fl.status();
    if (flen >= 0 && *fl != flen) return InvalidArgument(ctx, "frame_length ", *fl, " differs from the window length ", flen);
    flen = *fl;
  }
  if (flen < 1) return InvalidArgument(ctx, "need a window or a positive frame_length");
  const int64_t B = sig.dim(0), L = sig.dim(1), comp = sig.dim(2);
  if (flen > L) return InvalidArgument(ctx, "frame_length ", flen, " exceeds the signal length ", L);
  const bool onesided = ctx.node().GetInt("onesided", 1) != 0;
  if (onesided && comp == 2) return InvalidArgument(ctx, "onesided output needs a real signal (set onesided=0 for complex input)");
  const int64_t frames = 1 + (L - flen) / *step, bins = onesided ? flen / 2 + 1 : flen;
  Tensor& y = ctx.AllocateOutput(0, sig.dtype(), {B, frames, bins, 2});
  auto sv = ReadFloats(sig);
  if (!sv.ok()) return InvalidArgument(ctx, sv.status().message());
  std::vector<double> out(static_cast<size_t>(y.num_elements()));
  FftPlan plan(flen, false);
  ParallelFor(ctx.thread_pool(), B * frames, 1, [&](int64_t b, int64_t e) {
    std::vector<cd> buf(static_cast<size_t>(flen));
    for (int64_t bf = b; bf < e; ++bf) {
      const int64_t bi = bf / frames, f = bf % frames;
      for (int64_t k = 0; k < flen; ++k) {
        const size_t at = static_cast<size_t>((bi * L + f * *step + k) * comp);
        const double w = window.empty() ? 1.0 : window[static_cast<size_t>(k)];
        buf[static_cast<size_t>(k)] = cd((*sv)[at] * w, comp == 2 ? (*sv)[at + 1] * w : 0.0);
      }
      plan.Run(buf);
      for (int64_t k = 0; k < bins; ++k) {
        const size_t at = static_cast<size_t>((bf * bins + k) * 2);
        out[at] = buf[static_cast<size_t>(k)].real();
        out[at + 1] = buf[static_cast<size_t>(k)].imag();
      }
    }
  });
  return WriteDoubles(y, out);
}

// ----------------------------------------------------------------------------------------
// Windows and MelWeightMatrix

absl::StatusOr<DType> OutputDtype(const Node& n) {
  const auto dt = static_cast<DType>(n.GetInt("output_datatype", 1));
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: case DType::kFloat16: case DType::kBFloat16:
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
      return dt;
    default:
      return Unimplemented(n, "unsupported output_datatype ", static_cast<int>(dt));
  }
}

// a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N)
KernelFn WindowFn(double a0, double a1, double a2) {
  return [a0, a1, a2](OpContext& ctx) -> absl::Status {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "missing size");
    auto size = ReadIntScalar(ctx, 0, "size");
    if (!size.ok()) return size.status();
    if (*size < 0) return InvalidArgument(ctx, "size must be non-negative");
    auto dt = OutputDtype(ctx.node());
    if (!dt.ok()) return dt.status();
    const bool periodic = ctx.node().GetInt("periodic", 1) != 0;
    const double N = static_cast<double>(periodic ? *size : *size - 1);
    // Allocated first: a size from data the session cannot hold is refused before the buffer.
    Tensor& y = ctx.AllocateOutput(0, *dt, {*size});
    std::vector<double> w(static_cast<size_t>(*size));
    for (int64_t k = 0; k < *size; ++k) {
      const double t = N > 0 ? 2 * std::numbers::pi * static_cast<double>(k) / N : 0.0;
      w[static_cast<size_t>(k)] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
    }
    return WriteDoubles(y, w);
  };
}

absl::Status MelWeightMatrix(OpContext& ctx) {
  for (size_t i = 0; i < 5; ++i) if (!ctx.has_input(i)) return InvalidArgument(ctx, "missing input ", i);
  auto bins = ReadIntScalar(ctx, 0, "num_mel_bins");
  if (!bins.ok()) return bins.status();
  auto dft = ReadIntScalar(ctx, 1, "dft_length");
  if (!dft.ok()) return dft.status();
  auto sr = ReadIntScalar(ctx, 2, "sample_rate");
  if (!sr.ok()) return sr.status();
  auto lo = ReadScalar(ctx.input(3));
  auto hi = ReadScalar(ctx.input(4));
  if (!lo.ok() || !hi.ok()) return InvalidArgument(ctx, "lower/upper_edge_hertz must be float scalars");
  if (*bins < 1 || *dft < 1 || *sr < 1) return InvalidArgument(ctx, "num_mel_bins, dft_length and sample_rate must be positive");
  if (!(*lo >= 0 && *hi > *lo)) return InvalidArgument(ctx, "need 0 <= lower_edge_hertz < upper_edge_hertz");
  auto dt = OutputDtype(ctx.node());
  if (!dt.ok()) return dt.status();
  const int64_t spec = *dft / 2 + 1, nb = *bins;
  if (nb > (int64_t{1} << 40)) return InvalidArgument(ctx, "num_mel_bins ", nb, " is past 2^40");
  // Allocated first: sizes from data the session cannot hold are refused before the buffers.
  Tensor& y_out = ctx.AllocateOutput(0, *dt, {spec, nb});
  // Mel edges as the ONNX reference computes them (float32 edges, float64 afterwards).
  const float lo_mel = 2595.0f * std::log10(1.0f + static_cast<float>(*lo) / 700.0f);
  const float hi_mel = 2595.0f * std::log10(1.0f + static_cast<float>(*hi) / 700.0f);
  const double step = static_cast<double>(hi_mel - lo_mel) / static_cast<double>(nb + 2);
  std::vector<int64_t> fb(static_cast<size_t>(nb + 2));
  for (int64_t i = 0; i < nb + 2; ++i) {
    const double mel = static_cast<double>(i) * step + static_cast<double>(lo_mel);
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    // Clamped before the conversion (edges from data may be past int64); only [0, spec) is written.
    fb[static_cast<size_t>(i)] = static_cast<int64_t>(std::clamp(std::floor(static_cast<double>(*dft + 1) * hz / static_cast<double>(*sr)), -4e18, 4e18));
  }
  std::vector<double> w(static_cast<size_t>(spec * nb), 0.0);
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j >= 0 && j < spec) w[static_cast<size_t>(j * nb + i)] = v;
  };
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t l = fb[static_cast<size_t>(i)], c = fb[static_cast<size_t>(i + 1)], h = fb[static_cast<size_t>(i + 2)];
    if (c == l) {
      set(c, i, 1.0);
    } else {
      // Only the bins inside [0, spec) are visited: edges from data may lie far outside.
      for (int64_t j = std::max<int64_t>(l, 0); j <= std::min(c, spec - 1); ++j) set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
    }
    if (h > c) {
      for (int64_t j = std::max<int64_t>(c, 0); j < std::min(h, spec); ++j) set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
    }
  }
  return WriteDoubles(y_out, w);
}

}  // namespace

void RegisterSignalOps(KernelRegistry& r) {
  AddVersions(r, "DFT", {17, 20}, Dft);
  AddVersions(r, "STFT", {17}, Stft);
  AddVersions(r, "HannWindow", {17}, WindowFn(0.5, 0.5, 0.0));
  AddVersions(r, "HammingWindow", {17}, WindowFn(25.0 / 46.0, 21.0 / 46.0, 0.0));
  AddVersions(r, "BlackmanWindow", {17}, WindowFn(0.42, 0.5, 0.08));
  AddVersions(r, "MelWeightMatrix", {17}, MelWeightMatrix);
}

}  // namespace oneinfer
