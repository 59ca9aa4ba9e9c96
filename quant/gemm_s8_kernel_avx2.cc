// AVX2 tier: A as int16 (sign- or zero-extended), weights sign-extended to int16 in registers,
// vpmaddwd pairs into int32. Exact for u8 and s8 activations alike (no vpmaddubsw saturation).
#include <immintrin.h>

#include <cstring>

#include "quant/gemm_s8.h"
#include "quant/gemm_s8_internal.h"

namespace oneinfer::gemm_s8_internal {
namespace {

#define ONEINFER_AVX2 __attribute__((target("avx2")))

constexpr int64_t kQuadBytes = 4 * kGemmS8Panel;  // one k-quad row of a packed panel

// c[MR x nr] over 4*NC columns starting where w points inside the panel (nr <= 4*NC).
// One 16-byte chunk = 4 columns x 4 k; as int16 against a broadcast (a0,a1,a2,a3), vpmaddwd
// leaves two partial sums per column (k0+k1, k2+k3), folded by hadd at the end.
template <int MR, int NC>
ONEINFER_AVX2 inline void gemm_s16s8_s32_tile__avx2(int64_t kq, const int16_t* a, int64_t lda,
                                                    const int8_t* w, int32_t* c, int64_t ldc,
                                                    int64_t nr) {
  static_assert(NC % 2 == 0 && MR * NC <= 8, "accumulators must fit the 16 ymm registers");
  __m256i acc[MR][NC];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int ch = 0; ch < NC; ++ch) acc[r][ch] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q, w += kQuadBytes) {
    __m256i av[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int64_t quad;
      std::memcpy(&quad, a + r * lda + 4 * q, sizeof(quad));
      av[r] = _mm256_set1_epi64x(quad);
    }
#pragma GCC unroll 8
    for (int ch = 0; ch < NC; ++ch) {
      const __m256i wv =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * ch)));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        acc[r][ch] = _mm256_add_epi32(acc[r][ch], _mm256_madd_epi16(av[r], wv));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int ch = 0; ch < NC; ch += 2) {
      // hadd gives (c0 c1 c4 c5 | c2 c3 c6 c7); the qword permute restores column order.
      const __m256i h = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][ch], acc[r][ch + 1]),
                                                 0xD8);
      const int64_t col = 4 * ch;
      int32_t* dst = c + r * ldc + col;
      if (col + 8 <= nr) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), h);
      } else if (col < nr) {
        alignas(32) int32_t tmp[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), h);
        std::memcpy(dst, tmp, (nr - col) * sizeof(int32_t));
      }
    }
  }
}

// Sub-tiles of 4*NC columns across the 32-wide panel, skipping those wholly past nr.
template <int MR, int NC>
ONEINFER_AVX2 void PanelInTiles(int64_t kq, const int16_t* a, int64_t lda, const int8_t* w,
                                int32_t* c, int64_t ldc, int64_t nr) {
  constexpr int64_t kCols = 4 * NC;
  for (int64_t j = 0; j < nr; j += kCols)
    gemm_s16s8_s32_tile__avx2<MR, NC>(kq, a, lda, w + 4 * j, c + j, ldc,
                                      nr - j < kCols ? nr - j : kCols);
}

void gemm_s16s8_s32_panel__avx2(int64_t kq, const void* a_in, int64_t lda, const int8_t* w,
                                const int32_t* /*shift_col_sums: never set for kS16*/, int32_t* c,
                                int64_t ldc, int64_t mr, int64_t nr) {
  const int16_t* a = static_cast<const int16_t*>(a_in);
  switch (mr) {
    case 1: return PanelInTiles<1, 8>(kq, a, lda, w, c, ldc, nr);
    case 2: return PanelInTiles<2, 4>(kq, a, lda, w, c, ldc, nr);
    case 3: return PanelInTiles<3, 2>(kq, a, lda, w, c, ldc, nr);
    default: return PanelInTiles<4, 2>(kq, a, lda, w, c, ldc, nr);
  }
}

}  // namespace

const GemmS8Tier kGemmS8TierAvx2 = {"avx2", 4, AFormat::kS16, gemm_s16s8_s32_panel__avx2};

}  // namespace oneinfer::gemm_s8_internal
