// AVX2 tier: a 16-column panel as two ymm halves of 8 columns; vpmaddubsw multiplies the u8
// codes by int8 activations into int16 pairs (|.| <= 2 * 15 * 127), the 8 of a block add up in
// int16 (|.| <= 30480, no saturation) and one vpmaddwd by ones widens them to the exact int32 dot.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "quant/gemm_q4.h"
#include "quant/gemm_q4_internal.h"

namespace oneinfer::gemm_q4_internal {
namespace {

// F16C (vcvtph2ps) shipped before AVX2 on every x86 CPU that has AVX2.
#define ONEINFER_AVX2 __attribute__((target("avx2,fma,f16c")))

ONEINFER_AVX2 inline __m256i BroadcastQuad(const int8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm256_set1_epi32(quad);
}

// 8 scales at p: float32, or float16 widened exactly.
template <int Fmt>
ONEINFER_AVX2 inline __m256 LoadScales(const uint8_t* p) {
  if constexpr (Fmt == kFmtF16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  else
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

// d and m of columns 8h .. 8h+7 of the block at w (kF32D: m = c d, checked exact by the packer).
template <int Fmt>
ONEINFER_AVX2 inline void LoadDM(const uint8_t* w, int h, float c, __m256* d, __m256* m) {
  *d = LoadScales<Fmt>(w + kQ4CodeBytes + 8 * h * kScaleBytes<Fmt>);
  if constexpr (Fmt == kFmtF32D)
    *m = _mm256_mul_ps(*d, _mm256_set1_ps(c));
  else
    *m = LoadScales<Fmt>(w + kQ4CodeBytes + (kQ4Panel + 8 * h) * kScaleBytes<Fmt>);
}

template <int MR, int Fmt>
ONEINFER_AVX2 void gemm_q4b32_q8_f32_tile__avx2(int64_t kb, const int8_t* q, int64_t ldq,
                                                const float* s, const float* sum, int64_t lds,
                                                const uint8_t* w, float* y, int64_t ldy,
                                                int64_t nr, float c) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int64_t b = 0; b < kb; ++b, w += stride) {
    __m256i d16[MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) d16[r][0] = d16[r][1] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * g + 32 * h));
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const int8_t* qr = q + r * ldq + b * kQ4Block + 8 * g;
          const __m256i plo = _mm256_maddubs_epi16(lo, BroadcastQuad(qr));
          const __m256i phi = _mm256_maddubs_epi16(hi, BroadcastQuad(qr + 4));
          d16[r][h] = _mm256_add_epi16(d16[r][h], _mm256_add_epi16(plo, phi));
        }
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 d, m;
      LoadDM<Fmt>(w, h, c, &d, &m);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(d16[r][h], ones));
        const __m256 t =
            _mm256_fmadd_ps(d, dot, _mm256_mul_ps(m, _mm256_set1_ps(sum[r * lds + b])));
        acc[r][h] = _mm256_fmadd_ps(_mm256_set1_ps(s[r * lds + b]), t, acc[r][h]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (nr == kQ4Panel) {
      _mm256_storeu_ps(y + r * ldy, acc[r][0]);
      _mm256_storeu_ps(y + r * ldy + 8, acc[r][1]);
    } else {
      alignas(32) float tmp[kQ4Panel];
      _mm256_store_ps(tmp, acc[r][0]);
      _mm256_store_ps(tmp + 8, acc[r][1]);
      std::memcpy(y + r * ldy, tmp, nr * sizeof(float));
    }
  }
}

template <int Fmt>
void gemm_q4b32_q8_f32_panel__avx2(int64_t kb, const int8_t* q, int64_t ldq, const float* s,
                                   const float* sum, int64_t lds, const uint8_t* w, float* y,
                                   int64_t ldy, int64_t mr, int64_t nr, float c) {
  switch (mr) {
    case 1: return gemm_q4b32_q8_f32_tile__avx2<1, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 2: return gemm_q4b32_q8_f32_tile__avx2<2, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 3: return gemm_q4b32_q8_f32_tile__avx2<3, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    default: return gemm_q4b32_q8_f32_tile__avx2<4, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
  }
}

// Float activations (MatMulQ4Float): the panel as two halves of 8 columns, each swept over all
// of K on its own so the four k mod 4 chains of two rows fit the 16 ymm registers.
template <int MR, int Fmt>
ONEINFER_AVX2 void gemm_q4b32_f32_f32_tile__avx2(int64_t kb, const float* a, int64_t lda, const uint8_t* w,
                                                 float* y, int64_t ldy, int64_t nr, float c) {
  const __m256i low4 = _mm256_set1_epi32(0x0f);
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int h = 0; h < 2; ++h) {
    __m256 acc[MR][4];
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_ps();
    const uint8_t* wb = w;
    for (int64_t b = 0; b < kb; ++b, wb += stride) {
      __m256 d, m;
      LoadDM<Fmt>(wb, h, c, &d, &m);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 64 * g + 32 * h));
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const int shift = (i % 4) * 8 + (i < 4 ? 0 : 4);
          const __m256i code = _mm256_and_si256(_mm256_srli_epi32(v, shift), low4);
          const __m256 wk = _mm256_fmadd_ps(_mm256_cvtepi32_ps(code), d, m);
#pragma GCC unroll 2
          for (int r = 0; r < MR; ++r)
            acc[r][i % 4] =
                _mm256_fmadd_ps(_mm256_set1_ps(a[r * lda + b * kQ4Block + 8 * g + i]), wk, acc[r][i % 4]);
        }
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < MR; ++r) {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3])));
      const int64_t cols = std::min<int64_t>(8, nr - 8 * h);
      if (cols > 0) std::memcpy(y + r * ldy + 8 * h, tmp, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

template <int Fmt>
void gemm_q4b32_f32_f32_panel__avx2(int64_t kb, const float* a, int64_t lda, const uint8_t* w, float* y,
                                    int64_t ldy, int64_t mr, int64_t nr, float c) {
  if (mr == 1) return gemm_q4b32_f32_f32_tile__avx2<1, Fmt>(kb, a, lda, w, y, ldy, nr, c);
  return gemm_q4b32_f32_f32_tile__avx2<2, Fmt>(kb, a, lda, w, y, ldy, nr, c);
}

}  // namespace

const GemmQ4Tier kGemmQ4TierAvx2 = {
    "avx2", 4,
    {gemm_q4b32_q8_f32_panel__avx2<kFmtF32>, gemm_q4b32_q8_f32_panel__avx2<kFmtF16>,
     gemm_q4b32_q8_f32_panel__avx2<kFmtF32D>},
    2,
    {gemm_q4b32_f32_f32_panel__avx2<kFmtF32>, gemm_q4b32_f32_f32_panel__avx2<kFmtF16>,
     gemm_q4b32_f32_f32_panel__avx2<kFmtF32D>}};

}  // namespace oneinfer::gemm_q4_internal
