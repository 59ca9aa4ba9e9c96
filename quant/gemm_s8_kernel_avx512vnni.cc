// AVX-512 VNNI tier: vpdpbusd (u8 x s8 -> s32, 4 k per lane), up to 8 rows x 32 columns of C
// in 16 zmm accumulators. s8 activations arrive as a + 128 (u8) and the accumulators start at
// -128 * colsum(w), so the result is exact: sum (a + 128) w - 128 sum w = sum a w.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "quant/gemm_s8.h"
#include "quant/gemm_s8_internal.h"
#include "quant/weight_quant.h"

namespace oneinfer::gemm_s8_internal {
namespace {

#define ONEINFER_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int64_t kQuadBytes = 4 * kGemmS8Panel;  // one k-quad row of a packed panel: 2 zmm

// Both cache lines of the k-quad row kPanelPrefetchBytes ahead of w.
ONEINFER_AVX512VNNI inline void PrefetchQuad(const int8_t* w) {
  const char* p = reinterpret_cast<const char*>(w) + kPanelPrefetchBytes;
  _mm_prefetch(p, _MM_HINT_T0);
  _mm_prefetch(p + 64, _MM_HINT_T0);
}

// One k-quad's share of the next panel: its line, when the quad reaches a line not yet asked for
// (with many row tiles a share is a few lines, and a repeated prefetch takes a load slot).
ONEINFER_AVX512VNNI inline void BringNextLine(const char* start, int64_t step, int64_t& pos, int64_t& last) {
  const int64_t line = pos >> 16;
  if (step != 0 && line != last) {
    _mm_prefetch(start + line * 64, _MM_HINT_T1);
    last = line;
  }
  pos += step;
}

ONEINFER_AVX512VNNI inline __m512i BroadcastQuad(const uint8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm512_set1_epi32(quad);
}

// c[MR x nr] = a[MR x 4kq] (u8, lda) * one packed panel (nr <= 32), bringing its share of the
// next panel into L2 meanwhile: streamed from memory, a 16-row step's first row tile otherwise
// waits on the weights and its second computes with memory idle (Int8Streamed M = 16, K 1024,
// N 3072: 152-161 -> 127-135 us; the LM head's N 151936: 8.1 -> 6.9 ms).
template <int MR, bool kBringNext>
ONEINFER_AVX512VNNI inline void gemm_u8s8_s32_tile__avx512vnni(int64_t kq, const uint8_t* a,
                                                               int64_t lda, const int8_t* w,
                                                               const int32_t* shift_col_sums,
                                                               int32_t* c, int64_t ldc,
                                                               int64_t nr, NextPanelSlice next) {
  const int64_t step = NextPanelLineStep(kq, next);
  const char* const next_start = reinterpret_cast<const char*>(next.start);
  int64_t next_pos = 0, next_line = -1;
  __m512i init0 = _mm512_setzero_si512(), init1 = _mm512_setzero_si512();
  if (shift_col_sums != nullptr) {
    // Start at -128 * colsum. Wrapping int32 arithmetic: exact whenever the final sum
    // fits, whatever the order.
    const __m512i minus128 = _mm512_set1_epi32(-128);
    init0 = _mm512_mullo_epi32(_mm512_loadu_si512(shift_col_sums), minus128);
    init1 = _mm512_mullo_epi32(_mm512_loadu_si512(shift_col_sums + 16), minus128);
  }
  __m512i acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    acc0[r] = init0;
    acc1[r] = init1;
  }
  int64_t q = 0;
  if constexpr (MR <= 2) {
    // Too few accumulators to cover vpdpbusd latency: odd quads go to a second set.
    __m512i odd0[MR], odd1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) odd0[r] = odd1[r] = _mm512_setzero_si512();
    for (; q + 2 <= kq; q += 2, w += 2 * kQuadBytes) {
      PrefetchQuad(w);
      PrefetchQuad(w + kQuadBytes);
      if constexpr (kBringNext) {
        BringNextLine(next_start, step, next_pos, next_line);
        BringNextLine(next_start, step, next_pos, next_line);
      }
      const __m512i w0 = _mm512_loadu_si512(w);
      const __m512i w1 = _mm512_loadu_si512(w + 64);
      const __m512i w2 = _mm512_loadu_si512(w + 128);
      const __m512i w3 = _mm512_loadu_si512(w + 192);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512i a0 = BroadcastQuad(a + r * lda + 4 * q);
        const __m512i a1 = BroadcastQuad(a + r * lda + 4 * q + 4);
        acc0[r] = _mm512_dpbusd_epi32(acc0[r], a0, w0);
        acc1[r] = _mm512_dpbusd_epi32(acc1[r], a0, w1);
        odd0[r] = _mm512_dpbusd_epi32(odd0[r], a1, w2);
        odd1[r] = _mm512_dpbusd_epi32(odd1[r], a1, w3);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      acc0[r] = _mm512_add_epi32(acc0[r], odd0[r]);
      acc1[r] = _mm512_add_epi32(acc1[r], odd1[r]);
    }
  }
  for (; q < kq; ++q, w += kQuadBytes) {
    PrefetchQuad(w);
    if constexpr (kBringNext) BringNextLine(next_start, step, next_pos, next_line);
    const __m512i w0 = _mm512_loadu_si512(w);
    const __m512i w1 = _mm512_loadu_si512(w + 64);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i av = BroadcastQuad(a + r * lda + 4 * q);
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], av, w0);
      acc1[r] = _mm512_dpbusd_epi32(acc1[r], av, w1);
    }
  }
  if (nr == kGemmS8Panel) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      _mm512_storeu_si512(c + r * ldc, acc0[r]);
      _mm512_storeu_si512(c + r * ldc + 16, acc1[r]);
    }
  } else {
    // Edge panel: masked stores so nothing past column nr is touched.
    const __mmask16 m0 = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    const __mmask16 m1 = static_cast<__mmask16>(nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      _mm512_mask_storeu_epi32(c + r * ldc, m0, acc0[r]);
      _mm512_mask_storeu_epi32(c + r * ldc + 16, m1, acc1[r]);
    }
  }
}

// Two instantiations per row count: a tile with nothing to bring keeps the plain loop (one
// sequence's decode: its tile is alone and memory-bound).
template <int MR>
void TileOf(int64_t kq, const uint8_t* a, int64_t lda, const int8_t* w, const int32_t* shift_col_sums, int32_t* c,
            int64_t ldc, int64_t nr, NextPanelSlice next) {
  if (next.bytes > 0) return gemm_u8s8_s32_tile__avx512vnni<MR, true>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
  gemm_u8s8_s32_tile__avx512vnni<MR, false>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
}

void gemm_u8s8_s32_panel__avx512vnni(int64_t kq, const void* a_in, int64_t lda, const int8_t* w,
                                     const int32_t* shift_col_sums, int32_t* c, int64_t ldc,
                                     int64_t mr, int64_t nr, NextPanelSlice next) {
  const uint8_t* a = static_cast<const uint8_t*>(a_in);
  switch (mr) {
    case 1: return TileOf<1>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 2: return TileOf<2>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 3: return TileOf<3>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 4: return TileOf<4>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 5: return TileOf<5>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 6: return TileOf<6>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    case 7: return TileOf<7>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
    default: return TileOf<8>(kq, a, lda, w, shift_col_sums, c, ldc, nr, next);
  }
}

// The lanes of a 16-wide step with `left` elements to go.
ONEINFER_AVX512VNNI inline __mmask16 LiveLanes(int64_t left) {
  return left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1);
}

// The dynamic A8W8 row helpers, 16 lanes at a time, the tail under a mask (so no scalar code
// with other NaN rules): the same bits as the SSE2 ones (see AbsMaxFn).
ONEINFER_AVX512VNNI float abs_max__avx512(const float* x, int64_t K) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 m = zero;
  __mmask16 nan = 0;
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 live = LiveLanes(K - k);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + k);
    m = _mm512_mask_max_ps(m, live, m, _mm512_abs_ps(v));  // masked: GCC 12 warns on the plain one's undefined source
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  }
  if (nan != 0) return std::numeric_limits<float>::quiet_NaN();
  alignas(64) float lanes[16];  // not _mm512_reduce_max_ps: GCC 12 warns on its undefined halves
  _mm512_store_ps(lanes, m);
  return *std::max_element(lanes, lanes + 16);
}

ONEINFER_AVX512VNNI void quantize_row__avx512(const float* x, int64_t K, float scale, int8_t* q) {
  const __m512 vs = _mm512_set1_ps(scale), lo = _mm512_set1_ps(-kS8Max), hi = _mm512_set1_ps(kS8Max);
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 live = LiveLanes(K - k);
    // The masked-off lanes divide 1 by the scale, which cannot trap or give NaN.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), live, x + k);
    const __m512 r = _mm512_maskz_min_ps(live, _mm512_maskz_max_ps(live, _mm512_div_ps(v, vs), lo), hi);
    _mm_mask_storeu_epi8(q + k, live, _mm512_maskz_cvtsepi32_epi8(live, _mm512_maskz_cvtps_epi32(live, r)));
  }
}

ONEINFER_AVX512VNNI void dequantize_row__avx512(const int32_t* c, int64_t N, float row_scale, const float* col_scales,
                                               float* y) {
  const __m512 vs = _mm512_set1_ps(row_scale);
  for (int64_t n = 0; n < N; n += 16) {
    const __mmask16 live = LiveLanes(N - n);
    const __m512 v = _mm512_maskz_cvtepi32_ps(live, _mm512_maskz_loadu_epi32(live, c + n));
    _mm512_mask_storeu_ps(y + n, live, _mm512_mul_ps(_mm512_mul_ps(v, vs), _mm512_maskz_loadu_ps(live, col_scales + n)));
  }
}

}  // namespace

const GemmS8Tier kGemmS8TierAvx512Vnni = {"avx512vnni",          8,
                                          AFormat::kU8Shifted,   gemm_u8s8_s32_panel__avx512vnni,
                                          abs_max__avx512,       quantize_row__avx512,
                                          dequantize_row__avx512,
                                          // Two: each of the first two row tiles streams half
                                          // the next panel (16 rows: the whole step's weights
                                          // arrive while both compute); more tiles only spend
                                          // load slots (256 rows: 3-6 % slower). A lone
                                          // tile (up to 8 rows) waits on memory anyway, and
                                          // bringing more made one-sequence decode ~5 % slower.
                                          2};

}  // namespace oneinfer::gemm_s8_internal
