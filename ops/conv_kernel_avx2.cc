// AVX2+FMA tier of the Conv epilogue and depthwise taps (8 floats a vector). Within float
// rounding of the reference: FMA rounds a*b+c once where the reference rounds twice.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "ops/conv_kernels_internal.h"

namespace oneinfer::conv_internal {

#define ONEINFER_AVX2 __attribute__((target("avx2,fma")))

namespace {

// Outputs per row chunk: V vectors of 8 with V independent accumulators (one FMA chain per
// vector would wait on the FMA latency); 32 where rounding OW up to 32 wastes little, else 16.
int64_t ChunkWidth(const Conv2DParams& p) { return p.OW % 32 == 0 || p.OW >= 96 ? 32 : 16; }
int64_t RoundedWidth(const Conv2DParams& p) { return (p.OW + ChunkWidth(p) - 1) / ChunkWidth(p) * ChunkWidth(p); }

// The padded plane's width: every chunk of outputs (OW rounded up) reads inside it.
int64_t PaddedWidth(const Conv2DParams& p) { return (RoundedWidth(p) - 1) * p.SW + (p.KW - 1) * p.DW + 1 + 8; }
int64_t PaddedHeight(const Conv2DParams& p) { return (p.OH - 1) * p.SH + (p.KH - 1) * p.DH + 1; }

// 8 floats src[0], src[s], ..., src[7 s] for s = 1 or 2.
template <int S>
ONEINFER_AVX2 inline __m256 Load8(const float* src) {
  if constexpr (S == 1) {
    return _mm256_loadu_ps(src);
  } else {
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src), even);
    const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + 8), even);
    return _mm256_permute2f128_ps(a, b, 0x20);
  }
}

// R output rows of one chunk of 8 V outputs: R x V independent FMA chains (FMA latency x 2
// ports needs about 8; one chain per vector left the kernel latency-bound).
template <int S, int V, int R>
ONEINFER_AVX2 inline void DepthwiseChunk(const Conv2DParams& p, const float* pad, int64_t wp, const float* w,
                                         int64_t oh, int64_t ow, float* out, int64_t out_stride) {
  __m256 acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < p.KH; ++kh) {
    const float* row = pad + (oh * p.SH + kh * p.DH) * wp + ow * S;
    const float* wk = w + kh * p.KW;
    for (int64_t kw = 0; kw < p.KW; ++kw) {
      const __m256 wv = _mm256_set1_ps(wk[kw]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          acc[r][v] = _mm256_fmadd_ps(wv, Load8<S>(row + r * p.SH * wp + kw * p.DW + 8 * v * S), acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + r * out_stride + ow + 8 * v, acc[r][v]);
}

// Output rows, two at a time, into row_buf (two rows of RoundedWidth), then the OW real ones into y.
template <int S, int V>
ONEINFER_AVX2 void DepthwiseRows(const Conv2DParams& p, const float* pad, int64_t wp, const float* w, float* y,
                                 float* row_buf) {
  const int64_t width = RoundedWidth(p);
  int64_t oh = 0;
  for (; oh + 2 <= p.OH; oh += 2) {
    for (int64_t ow = 0; ow < width; ow += 8 * V) DepthwiseChunk<S, V, 2>(p, pad, wp, w, oh, ow, row_buf, width);
    for (int r = 0; r < 2; ++r)
      std::memcpy(y + (oh + r) * p.OW, row_buf + r * width, static_cast<size_t>(p.OW) * sizeof(float));
  }
  if (oh < p.OH) {
    for (int64_t ow = 0; ow < width; ow += 8 * V) DepthwiseChunk<S, V, 1>(p, pad, wp, w, oh, ow, row_buf, width);
    std::memcpy(y + oh * p.OW, row_buf, static_cast<size_t>(p.OW) * sizeof(float));
  }
}

}  // namespace

int64_t DepthwiseScratchFloats(const Conv2DParams& p) { return PaddedHeight(p) * PaddedWidth(p) + 16 + 2 * RoundedWidth(p); }

ONEINFER_AVX2 bool DepthwisePlaneAvx2(const Conv2DParams& p, const float* x, const float* w, float* y, float* scratch) {
  if (p.SW != 1 && p.SW != 2) return false;
  const int64_t hp = PaddedHeight(p), wp = PaddedWidth(p);
  // Padded row r holds input row r - PT; column c input column c - PL (zeros outside).
  for (int64_t r = 0; r < hp; ++r) {
    float* dst = scratch + r * wp;
    const int64_t ih = r - p.PT;
    if (ih < 0 || ih >= p.H) {
      std::memset(dst, 0, static_cast<size_t>(wp) * sizeof(float));
      continue;
    }
    const int64_t c0 = std::min<int64_t>(p.PL, wp), c1 = std::max(c0, std::min<int64_t>(wp, p.PL + p.W));
    std::memset(dst, 0, static_cast<size_t>(c0) * sizeof(float));
    std::memcpy(dst + c0, x + ih * p.W + (c0 - p.PL), static_cast<size_t>(c1 - c0) * sizeof(float));
    std::memset(dst + c1, 0, static_cast<size_t>(wp - c1) * sizeof(float));
  }
  float* row_buf = scratch + hp * wp + 16;
  const bool wide = ChunkWidth(p) == 32;
  if (p.SW == 1) {
    wide ? DepthwiseRows<1, 4>(p, scratch, wp, w, y, row_buf) : DepthwiseRows<1, 2>(p, scratch, wp, w, y, row_buf);
  } else {
    wide ? DepthwiseRows<2, 4>(p, scratch, wp, w, y, row_buf) : DepthwiseRows<2, 2>(p, scratch, wp, w, y, row_buf);
  }
  return true;
}

ONEINFER_AVX2 void ConvEpilogueAvx2(float* y, int64_t n, float bias, const ConvActivation& act) {
  using Kind = ConvActivation::Kind;
  if (act.kind == Kind::kSigmoid) {
    ApplyConvEpilogueReference(y, n, bias, act);
    return;
  }
  const __m256 b = _mm256_set1_ps(bias), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  const __m256 alpha = _mm256_set1_ps(act.alpha), beta = _mm256_set1_ps(act.beta);
  const __m256 sixth = _mm256_set1_ps(1.f / 6.f), half = _mm256_set1_ps(0.5f);
  const __m256 scale = _mm256_set1_ps(act.scale), shift = _mm256_set1_ps(act.shift);
  const bool affine = act.has_affine();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(y + i), b);
    switch (act.kind) {
      case Kind::kRelu: v = _mm256_max_ps(v, zero); break;
      case Kind::kClip: v = _mm256_min_ps(_mm256_max_ps(v, alpha), beta); break;
      case Kind::kLeakyRelu:
        v = _mm256_blendv_ps(_mm256_mul_ps(v, alpha), v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
        break;
      case Kind::kHardSigmoid:
        v = _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
        break;
      case Kind::kHardSwish:
        v = _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(sixth, v), half))));
        break;
      default: break;
    }
    if (affine) v = _mm256_add_ps(_mm256_mul_ps(v, scale), shift);
    _mm256_storeu_ps(y + i, v);
  }
  if (i < n) ApplyConvEpilogueReference(y + i, n - i, bias, act);
}

}  // namespace oneinfer::conv_internal
