// AVX2+FMA tier of the Conv epilogue and depthwise taps (8 floats a vector). Within float
// rounding of the reference: FMA rounds a*b+c once where the reference rounds twice.
#include <immintrin.h>

#include "ops/conv_kernels_internal.h"

namespace oneinfer::conv_internal {

#define ONEINFER_AVX2 __attribute__((target("avx2,fma")))

ONEINFER_AVX2 void DepthwiseTapAvx2(float* acc, const float* src, int64_t n, int64_t stride, float w) {
  const __m256 wv = _mm256_set1_ps(w);
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(src + i), _mm256_loadu_ps(acc + i)));
  } else if (stride == 2) {
    // Even lanes of two consecutive vectors: src[2i] for 8 outputs.
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (; i + 9 <= n; i += 8) {  // reads src[2i .. 2i + 15], all <= 2 (n - 1)
      const __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + 2 * i), even);
      const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + 2 * i + 8), even);
      const __m256 x = _mm256_permute2f128_ps(a, b, 0x20);
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, x, _mm256_loadu_ps(acc + i)));
    }
  }
  for (; i < n; ++i) acc[i] += w * src[i * stride];
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
