// AVX2 tier: A as int16 (sign- or zero-extended), weights sign-extended to int16 in registers,
// vpmaddwd pairs into int32. Exact for u8 and s8 activations alike (no vpmaddubsw saturation).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "quant/gemm_s8.h"
#include "quant/gemm_s8_internal.h"

namespace oneinfer::gemm_s8_internal {
namespace {

#define ONEINFER_AVX2 __attribute__((target("avx2")))

constexpr int64_t kQuadBytes = 4 * kGemmS8Panel;  // one k-quad row of a packed panel

// Columns 0..7 (the first nr of them) from two chunks' accumulators: hadd gives
// (c0 c1 c4 c5 | c2 c3 c6 c7), the qword permute restores column order.
ONEINFER_AVX2 inline void StoreColumnPairs(__m256i lo, __m256i hi, int32_t* dst, int64_t nr) {
  const __m256i h = _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
  if (nr >= 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), h);
  } else if (nr > 0) {
    alignas(32) int32_t tmp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), h);
    std::memcpy(dst, tmp, static_cast<size_t>(nr) * sizeof(int32_t));
  }
}

// c[1 x nr] over the panel's 32 columns (nr <= 32): the one-row tile of a lone decode step.
// One 16-byte chunk = 4 columns x 4 k; as int16 against a broadcast (a0,a1,a2,a3), vpmaddwd
// leaves two partial sums per column (k0+k1, k2+k3), folded by hadd at the end.
ONEINFER_AVX2 inline void gemm_s16s8_s32_row__avx2(int64_t kq, const int16_t* a, const int8_t* w, int32_t* c,
                                                   int64_t nr) {
  constexpr int kChunks = 8;
  __m256i acc[kChunks];
#pragma GCC unroll 8
  for (int ch = 0; ch < kChunks; ++ch) acc[ch] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q, w += kQuadBytes) {
    const __m256i av = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + 4 * q)));
#pragma GCC unroll 8
    for (int ch = 0; ch < kChunks; ++ch) {
      const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * ch)));
      acc[ch] = _mm256_add_epi32(acc[ch], _mm256_madd_epi16(av, wv));
    }
  }
#pragma GCC unroll 4
  for (int ch = 0; ch < kChunks; ch += 2) StoreColumnPairs(acc[ch], acc[ch + 1], c + 4 * ch, nr - 4 * ch);
}

// lo, hi += one row's quad (a0..a3, in every qword) times two widened chunks.
ONEINFER_AVX2 inline void RowTimesChunks(const int16_t* quad, __m256i w0, __m256i w1, __m256i& lo, __m256i& hi) {
  const __m256i av = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quad)));
  lo = _mm256_add_epi32(lo, _mm256_madd_epi16(av, w0));
  hi = _mm256_add_epi32(hi, _mm256_madd_epi16(av, w1));
}

// c[MR x nr] over 8 columns (nr <= 8) for MR = 2..6 rows: the many-row tiles of prefill and
// batched decode. Two chunks widened once per k-quad serve every row. The accumulators are
// named, not an array: as an array GCC moved each one to a new register every k-quad and spilled
// one (4 rows: ~10 % slower); named, 6 rows fit the 16 registers (12 sums, 2 weights, a quad).
// The panel's first tile (kPrefetch: w at the start of each k-quad row) brings both lines of the
// quad row kPanelPrefetchBytes ahead: it reads one line of each, the later tiles the other.
// Every tile also brings its share of the next panel (next), one line per k-quad at most, evenly
// spread: the panel's 12 tiles at 16 rows then stream it while they compute.
template <int MR, bool kPrefetch>
ONEINFER_AVX2 inline void gemm_s16s8_s32_tile8__avx2(int64_t kq, const int16_t* a, int64_t lda,
                                                     const int8_t* w, int32_t* c, int64_t ldc,
                                                     int64_t nr, NextPanelSlice next) {
  static_assert(MR >= 2 && MR <= 6, "6 rows x 2 chunks fill the 16 ymm registers");
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  // A line already asked for is asked again, which costs a load slot the tile has to spare.
  const int64_t step = NextPanelLineStep(kq, next);
  const char* const next_start = reinterpret_cast<const char*>(next.start);
  int64_t next_pos = 0;
  for (int64_t q = 0; q < kq; ++q, w += kQuadBytes) {
    if constexpr (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(w) + kPanelPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w) + kPanelPrefetchBytes + 64, _MM_HINT_T0);
    }
    if (step != 0) {
      _mm_prefetch(next_start + (next_pos >> 16) * 64, _MM_HINT_T1);
      next_pos += step;
    }
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
    RowTimesChunks(a + 0 * lda + 4 * q, w0, w1, c00, c01);
    RowTimesChunks(a + 1 * lda + 4 * q, w0, w1, c10, c11);
    if constexpr (MR > 2) RowTimesChunks(a + 2 * lda + 4 * q, w0, w1, c20, c21);
    if constexpr (MR > 3) RowTimesChunks(a + 3 * lda + 4 * q, w0, w1, c30, c31);
    if constexpr (MR > 4) RowTimesChunks(a + 4 * lda + 4 * q, w0, w1, c40, c41);
    if constexpr (MR > 5) RowTimesChunks(a + 5 * lda + 4 * q, w0, w1, c50, c51);
  }
  const __m256i sums[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < MR; ++r) StoreColumnPairs(sums[r][0], sums[r][1], c + r * ldc, nr);
}

// The panel's 32 columns in tiles of 8, skipping those wholly past nr; the tiles share next.
template <int MR>
ONEINFER_AVX2 void PanelInTiles(int64_t kq, const int16_t* a, int64_t lda, const int8_t* w,
                                int32_t* c, int64_t ldc, int64_t nr, NextPanelSlice next) {
  const int64_t tiles = (nr + 7) / 8;
  auto share = [&](int64_t t) {
    const int64_t b0 = next.bytes * t / tiles / 64 * 64, b1 = next.bytes * (t + 1) / tiles / 64 * 64;
    return NextPanelSlice{next.start + b0, b1 - b0};
  };
  gemm_s16s8_s32_tile8__avx2<MR, true>(kq, a, lda, w, c, ldc, nr < 8 ? nr : 8, share(0));
  for (int64_t j = 8, t = 1; j < nr; j += 8, ++t)
    gemm_s16s8_s32_tile8__avx2<MR, false>(kq, a, lda, w + 4 * j, c + j, ldc, nr - j < 8 ? nr - j : 8,
                                          share(t));
}

void gemm_s16s8_s32_panel__avx2(int64_t kq, const void* a_in, int64_t lda, const int8_t* w,
                                const int32_t* /*shift_col_sums: never set for kS16*/, int32_t* c,
                                int64_t ldc, int64_t mr, int64_t nr, NextPanelSlice next) {
  const int16_t* a = static_cast<const int16_t*>(a_in);
  switch (mr) {
    case 1: return gemm_s16s8_s32_row__avx2(kq, a, w, c, nr);  // streams its panel in one pass
    case 2: return PanelInTiles<2>(kq, a, lda, w, c, ldc, nr, next);
    case 3: return PanelInTiles<3>(kq, a, lda, w, c, ldc, nr, next);
    case 4: return PanelInTiles<4>(kq, a, lda, w, c, ldc, nr, next);
    case 5: return PanelInTiles<5>(kq, a, lda, w, c, ldc, nr, next);
    default: return PanelInTiles<6>(kq, a, lda, w, c, ldc, nr, next);
  }
}

}  // namespace

const GemmS8Tier kGemmS8TierAvx2 = {"avx2", 6, AFormat::kS16, gemm_s16s8_s32_panel__avx2};

}  // namespace oneinfer::gemm_s8_internal
