// AVX-512 VNNI tier: vpdpbusd (u8 x s8 -> s32, 4 k per lane), up to 8 rows x 32 columns of C
// in 16 zmm accumulators. s8 activations arrive as a + 128 (u8) and the accumulators start at
// -128 * colsum(w), so the result is exact: sum (a + 128) w - 128 sum w = sum a w.
#include <immintrin.h>

#include <cstring>

#include "quant/gemm_s8.h"
#include "quant/gemm_s8_internal.h"

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

ONEINFER_AVX512VNNI inline __m512i BroadcastQuad(const uint8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm512_set1_epi32(quad);
}

// c[MR x nr] = a[MR x 4kq] (u8, lda) * one packed panel (nr <= 32).
template <int MR>
ONEINFER_AVX512VNNI inline void gemm_u8s8_s32_tile__avx512vnni(int64_t kq, const uint8_t* a,
                                                               int64_t lda, const int8_t* w,
                                                               const int32_t* shift_col_sums,
                                                               int32_t* c, int64_t ldc,
                                                               int64_t nr) {
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

void gemm_u8s8_s32_panel__avx512vnni(int64_t kq, const void* a_in, int64_t lda, const int8_t* w,
                                     const int32_t* shift_col_sums, int32_t* c, int64_t ldc,
                                     int64_t mr, int64_t nr, NextPanelSlice /*next: one pass per
                                     row tile streams the panel with its own prefetch*/) {
  const uint8_t* a = static_cast<const uint8_t*>(a_in);
  switch (mr) {
    case 1: return gemm_u8s8_s32_tile__avx512vnni<1>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 2: return gemm_u8s8_s32_tile__avx512vnni<2>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 3: return gemm_u8s8_s32_tile__avx512vnni<3>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 4: return gemm_u8s8_s32_tile__avx512vnni<4>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 5: return gemm_u8s8_s32_tile__avx512vnni<5>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 6: return gemm_u8s8_s32_tile__avx512vnni<6>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    case 7: return gemm_u8s8_s32_tile__avx512vnni<7>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
    default: return gemm_u8s8_s32_tile__avx512vnni<8>(kq, a, lda, w, shift_col_sums, c, ldc, nr);
  }
}

}  // namespace

const GemmS8Tier kGemmS8TierAvx512Vnni = {"avx512vnni", 8, AFormat::kU8Shifted,
                                          gemm_u8s8_s32_panel__avx512vnni};

}  // namespace oneinfer::gemm_s8_internal
