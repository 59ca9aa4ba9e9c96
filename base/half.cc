// Bulk float16 <-> float32: F16C (vcvtph2ps / vcvtps2ph, round to nearest even) where the CPU has
// it, else the scalar conversions of half.h, which give the same values (tests/half_test.cc).
#include "base/half.h"

#include <immintrin.h>

#include "base/cpu_features.h"

namespace oneinfer {

namespace {

#define ONEINFER_F16C __attribute__((target("avx,f16c")))

ONEINFER_F16C void WidenF16C(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

ONEINFER_F16C void NarrowF16C(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

}  // namespace

void WidenF16(const uint16_t* src, float* dst, int64_t n) {
  if (Cpu().f16c) return WidenF16C(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void NarrowToF16(const float* src, uint16_t* dst, int64_t n) {
  if (Cpu().f16c) return NarrowF16C(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

}  // namespace oneinfer
