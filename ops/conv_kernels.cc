// Float32 Conv fast paths (ops/conv_kernels.h). Layout stays NCHW: per image and group,
// Y[Mg x P] = W[Mg x Cg*KH*KW] * col[Cg*KH*KW x P] with P = OH*OW. The weights are the GEMM's
// small A operand (Sgemm packs its Mg x K panel per call, O(M*K) against the O(M*K*P) product);
// the columns are built one tile of outputs at a time so the tile, its GEMM and the epilogue stay
// in cache, and tiles are the unit of work split over the thread pool.
#include "ops/conv_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/conv_kernels_internal.h"
#include "ops/gemm/sgemm.h"

namespace oneinfer {

namespace {

using Kind = ConvActivation::Kind;

bool UseAvx2() { return ActiveKernelTier(KernelFamily::kFloat) >= 1; }

bool IsDepthwise(const Conv2DParams& p) { return p.G == p.C && p.M == p.C && p.G > 1; }

bool IsPointwise(const Conv2DParams& p) {
  return p.KH == 1 && p.KW == 1 && p.SH == 1 && p.SW == 1 && p.PT == 0 && p.PL == 0 && p.OH == p.H &&
         p.OW == p.W;
}

// This thread's scratch buffer `slot`, at least n floats, uninitialised and kept between calls
// (a fresh 1 MiB vector per call was a page-faulting, zero-filled mmap every time).
float* Scratch(int slot, int64_t n) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Outputs [lo, hi) of a row whose input column ow * stride + off lies inside [0, width).
void ValidRange(int64_t off, int64_t stride, int64_t width, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  *hi = width - 1 - off < 0 ? 0 : std::min(out, (width - 1 - off) / stride + 1);
  if (*hi < *lo) *hi = *lo;
}

// col[r * tw + (p - p0)] for the outputs p in [p0, p0 + tw) of one group (x: its Cg planes).
void Im2ColTile(const Conv2DParams& p, const float* x, int64_t Cg, int64_t p0, int64_t tw, float* col) {
  const int64_t P = p.OH * p.OW;
  const int64_t p1 = std::min(P, p0 + tw);
  for (int64_t c = 0; c < Cg; ++c) {
    const float* xc = x + c * p.H * p.W;
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        float* dst = col + ((c * p.KH + kh) * p.KW + kw) * tw;
        const int64_t off = kw * p.DW - p.PL;
        int64_t lo, hi;
        ValidRange(off, p.SW, p.W, p.OW, &lo, &hi);
        for (int64_t q = p0; q < p1;) {
          const int64_t oh = q / p.OW, ow0 = q % p.OW, ow1 = std::min(p.OW, ow0 + (p1 - q));
          float* d = dst + (q - p0) - ow0;  // d[ow] for ow in [ow0, ow1)
          const int64_t ih = oh * p.SH - p.PT + kh * p.DH;
          if (ih < 0 || ih >= p.H) {
            std::fill(d + ow0, d + ow1, 0.f);
          } else {
            const float* xr = xc + ih * p.W + off;  // xr[ow * SW]
            const int64_t a = std::clamp(lo, ow0, ow1), b = std::clamp(hi, a, ow1);
            std::fill(d + ow0, d + a, 0.f);
            if (p.SW == 1) {
              std::memcpy(d + a, xr + a, static_cast<size_t>(b - a) * sizeof(float));
            } else {
              for (int64_t ow = a; ow < b; ++ow) d[ow] = xr[ow * p.SW];
            }
            std::fill(d + b, d + ow1, 0.f);
          }
          q += ow1 - ow0;
        }
      }
    }
  }
}

void EpilogueRows(float* y, int64_t rows, int64_t ld, int64_t n, const float* bias, const ConvActivation& act) {
  for (int64_t m = 0; m < rows; ++m) ApplyConvEpilogue(y + m * ld, n, bias ? bias[m] : 0.f, act);
}

// One output plane of a depthwise conv (one channel, one image), tap by tap: the reference tier.
void DepthwisePlane(const Conv2DParams& p, const float* x, const float* w, float bias, const ConvActivation& act,
                    float* y) {
  auto tap = conv_internal::DepthwiseTapReference;
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    float* yr = y + oh * p.OW;
    std::fill(yr, yr + p.OW, 0.f);
    for (int64_t kh = 0; kh < p.KH; ++kh) {
      const int64_t ih = oh * p.SH - p.PT + kh * p.DH;
      if (ih < 0 || ih >= p.H) continue;
      const float* xr = x + ih * p.W;
      for (int64_t kw = 0; kw < p.KW; ++kw) {
        const int64_t off = kw * p.DW - p.PL;
        int64_t lo, hi;
        ValidRange(off, p.SW, p.W, p.OW, &lo, &hi);
        if (lo < hi) tap(yr + lo, xr + lo * p.SW + off, hi - lo, p.SW, w[kh * p.KW + kw]);
      }
    }
    ApplyConvEpilogue(yr, p.OW, bias, act);
  }
}

void ConvDepthwise(const Conv2DParams& p, const float* x, const float* w, const float* bias,
                   const ConvActivation& act, float* y, ThreadPool* pool) {
  const int64_t planes = p.N * p.C, in_plane = p.H * p.W, out_plane = p.OH * p.OW;
  const bool avx2 = UseAvx2() && (p.SW == 1 || p.SW == 2);
  const int64_t min_chunk = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, out_plane * p.KH * p.KW));
  ParallelFor(pool, planes, min_chunk, [&](int64_t b, int64_t e) {
    float* scratch = avx2 ? Scratch(0, conv_internal::DepthwiseScratchFloats(p)) : nullptr;
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t c = pl % p.C;
      const float* wc = w + c * p.KH * p.KW;
      float* yp = y + pl * out_plane;
      if (avx2 && conv_internal::DepthwisePlaneAvx2(p, x + pl * in_plane, wc, yp, scratch)) {
        ApplyConvEpilogue(yp, out_plane, bias ? bias[c] : 0.f, act);
      } else {
        DepthwisePlane(p, x + pl * in_plane, wc, bias ? bias[c] : 0.f, act, yp);
      }
    }
  });
}

// Output columns per tile: the tile's columns (rows x tw floats) about 1 MiB, a multiple of the
// GEMM's 32-wide panel (bench_conv, 3x3 96 -> 24 at 80x80, one thread: 128 KiB tiles 61 GFLOP/s,
// 512 KiB 90, 1 MiB 99, 2 MiB 71).
int64_t TileWidth(int64_t rows, int64_t P) {
  int64_t tw = std::clamp<int64_t>(262144 / std::max<int64_t>(rows, 1), 64, 1024);
  tw = (tw + kSgemmPanel - 1) / kSgemmPanel * kSgemmPanel;
  return std::min(tw, P);
}

void ConvGemm(const Conv2DParams& p, const float* x, const float* w, const float* bias, const ConvActivation& act,
              float* y, ThreadPool* pool) {
  const int64_t Cg = p.C / p.G, Mg = p.M / p.G, rows = Cg * p.KH * p.KW, P = p.OH * p.OW;
  const int64_t in_plane = p.H * p.W;
  const bool pointwise = IsPointwise(p);
  const int64_t tw = TileWidth(rows, P), tiles = (P + tw - 1) / tw;
  const int64_t tasks = p.N * p.G * tiles;
  const int threads = pool ? pool->num_threads() : 1;
  // Enough tiles: one task per tile, each GEMM single-threaded; else the GEMM splits instead.
  const bool split_tiles = threads <= 1 || tasks >= 2 * threads;
  ThreadPool* gemm_pool = split_tiles ? nullptr : pool;
  auto run = [&](int64_t b, int64_t e) {
    float* col = pointwise ? nullptr : Scratch(0, rows * tw);
    for (int64_t t = b; t < e; ++t) {
      const int64_t tile = t % tiles, ng = t / tiles, g = ng % p.G, n = ng / p.G;
      const int64_t p0 = tile * tw, width = std::min(tw, P - p0);
      const float* xg = x + (n * p.C + g * Cg) * in_plane;
      float* yg = y + (n * p.M + g * Mg) * P + p0;
      const float* wg = w + g * Mg * rows;
      if (pointwise) {
        Sgemm(false, false, Mg, width, rows, 1.f, wg, rows, xg + p0, P, 0.f, yg, P, gemm_pool);
      } else {
        Im2ColTile(p, xg, Cg, p0, width, col);
        Sgemm(false, false, Mg, width, rows, 1.f, wg, rows, col, width, 0.f, yg, P, gemm_pool);
      }
      EpilogueRows(yg, Mg, P, width, bias ? bias + g * Mg : nullptr, act);
    }
  };
  if (split_tiles) {
    ParallelFor(pool, tasks, 1, run);
  } else {
    run(0, tasks);
  }
}

bool IsSmallOutput(const Conv2DParams& p, const ConvPackedWeights* packed) {
  return packed != nullptr && static_cast<int64_t>(packed->groups.size()) == p.G && p.OH * p.OW <= kConvSmallOutputs;
}

// Y^T = col^T * W^T per image and group, then Y (and the epilogue) by one transpose of the small P x Mg block.
void ConvSmallOutput(const Conv2DParams& p, const float* x, const ConvPackedWeights& packed, const float* bias,
                     const ConvActivation& act, float* y, ThreadPool* pool) {
  const int64_t Cg = p.C / p.G, Mg = p.M / p.G, rows = Cg * p.KH * p.KW, P = p.OH * p.OW;
  float* col = Scratch(0, rows * P);
  float* colT = Scratch(1, rows * P);
  float* yT = Scratch(2, P * Mg);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t g = 0; g < p.G; ++g) {
      const float* xg = x + (n * p.C + g * Cg) * p.H * p.W;
      const float* src = xg;
      if (!IsPointwise(p)) {
        Im2ColTile(p, xg, Cg, 0, P, col);
        src = col;
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < P; ++q) colT[q * rows + r] = src[r * P + q];
      SgemmPacked(P, Mg, rows, 1.f, colT, rows, packed.groups[g], 0.f, yT, Mg, pool);
      float* yg = y + (n * p.M + g * Mg) * P;
      for (int64_t m = 0; m < Mg; ++m) {
        for (int64_t q = 0; q < P; ++q) yg[m * P + q] = yT[q * Mg + m];
        ApplyConvEpilogue(yg + m * P, P, bias ? bias[g * Mg + m] : 0.f, act);
      }
    }
}

}  // namespace

ConvPackedWeights PackConvWeights(int64_t M, int64_t groups, int64_t K_per_group, const float* w, ThreadPool* pool) {
  ConvPackedWeights packed;
  const int64_t Mg = M / groups;
  for (int64_t g = 0; g < groups; ++g)
    packed.groups.push_back(PackedMatrixB::Pack(true, K_per_group, Mg, w + g * Mg * K_per_group, K_per_group, pool));
  return packed;
}

namespace conv_internal {

void DepthwiseTapReference(float* acc, const float* src, int64_t n, int64_t stride, float w) {
  for (int64_t i = 0; i < n; ++i) acc[i] += w * src[i * stride];
}

}  // namespace conv_internal

absl::StatusOr<ConvActivation> ParseConvActivation(const std::string& op, const std::vector<float>& params,
                                                   const std::vector<float>& output_affine) {
  ConvActivation a;
  size_t want = 0;
  if (op.empty()) {
    a.kind = Kind::kNone;
  } else if (op == "Relu") {
    a.kind = Kind::kRelu;
  } else if (op == "Clip") {
    a.kind = Kind::kClip;
    want = 2;
  } else if (op == "LeakyRelu") {
    a.kind = Kind::kLeakyRelu;
    want = 1;
  } else if (op == "HardSigmoid") {
    a.kind = Kind::kHardSigmoid;
    want = 2;
  } else if (op == "Sigmoid") {
    a.kind = Kind::kSigmoid;
  } else if (op == "HardSwish") {
    a.kind = Kind::kHardSwish;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported fused Conv activation '", op, "'"));
  }
  if (params.size() != want)
    return absl::InvalidArgumentError(
        absl::StrCat("fused Conv activation ", op, " takes ", want, " parameters, got ", params.size()));
  if (want >= 1) a.alpha = params[0];
  if (want >= 2) a.beta = params[1];
  if (!output_affine.empty() && output_affine.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("output_affine takes [scale, shift], got ", output_affine.size(), " values"));
  if (output_affine.size() == 2) a.scale = output_affine[0], a.shift = output_affine[1];
  return a;
}

void ApplyConvEpilogueReference(float* y, int64_t n, float bias, const ConvActivation& act) {
  conv_internal::ActivationReference(y, n, bias, act);
  if (act.has_affine())
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * act.scale + act.shift;
}

void ApplyConvEpilogue(float* y, int64_t n, float bias, const ConvActivation& act) {
  if (act.kind == Kind::kNone && bias == 0.f && !act.has_affine()) return;
  if (UseAvx2()) {
    conv_internal::ConvEpilogueAvx2(y, n, bias, act);
  } else {
    ApplyConvEpilogueReference(y, n, bias, act);
  }
}

void conv_internal::ActivationReference(float* y, int64_t n, float bias, const ConvActivation& act) {
  switch (act.kind) {
    case Kind::kNone:
      if (bias != 0.f) for (int64_t i = 0; i < n; ++i) y[i] += bias;
      return;
    case Kind::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i] + bias, 0.f);
      return;
    case Kind::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i] + bias, act.alpha), act.beta);
      return;
    case Kind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i] + bias;
        y[i] = v > 0.f ? v : act.alpha * v;
      }
      return;
    case Kind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.f, std::min(1.f, act.alpha * (y[i] + bias) + act.beta));
      return;
    case Kind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-(y[i] + bias)));
      return;
    case Kind::kHardSwish:
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i] + bias;
        y[i] = v * std::max(0.f, std::min(1.f, v * (1.f / 6.f) + 0.5f));
      }
      return;
  }
}

const char* ConvFloat2DPath(const Conv2DParams& p, bool packed) {
  if (IsDepthwise(p)) return "depthwise";
  if (packed && p.OH * p.OW <= kConvSmallOutputs) return "small-output";
  return IsPointwise(p) ? "pointwise" : "im2col";
}

void ConvFloat2D(const Conv2DParams& p, const float* x, const float* w, const float* bias,
                 const ConvActivation& act, float* y, ThreadPool* pool, const ConvPackedWeights* packed) {
  if (IsDepthwise(p)) {
    ConvDepthwise(p, x, w, bias, act, y, pool);
  } else if (IsSmallOutput(p, packed)) {
    ConvSmallOutput(p, x, *packed, bias, act, y, pool);
  } else {
    ConvGemm(p, x, w, bias, act, y, pool);
  }
}

void ConvFloat2DReference(const Conv2DParams& p, const float* x, const float* w, const float* bias,
                          const ConvActivation& act, float* y) {
  const int64_t Cg = p.C / p.G, Mg = p.M / p.G;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t m = 0; m < p.M; ++m) {
      const int64_t g = m / Mg;
      float* ym = y + (n * p.M + m) * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < p.KH; ++kh)
              for (int64_t kw = 0; kw < p.KW; ++kw) {
                const int64_t ih = oh * p.SH - p.PT + kh * p.DH, iw = ow * p.SW - p.PL + kw * p.DW;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                acc += static_cast<double>(x[((n * p.C + g * Cg + c) * p.H + ih) * p.W + iw]) *
                       w[((m * Cg + c) * p.KH + kh) * p.KW + kw];
              }
          ym[oh * p.OW + ow] = static_cast<float>(acc);
        }
      ApplyConvEpilogueReference(ym, p.OH * p.OW, bias ? bias[m] : 0.f, act);
    }
}

}  // namespace oneinfer
