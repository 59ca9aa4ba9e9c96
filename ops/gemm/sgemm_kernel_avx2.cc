// AVX2+FMA micro-kernels: up to 6 rows x 16 columns (two ymm) of C held in registers.
#include <cmath>
#include <immintrin.h>

#include "ops/gemm/sgemm_internal.h"

namespace oneinfer::gemm_internal {
namespace {

#define ONEINFER_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int kMr = 6;
// Sliding window: loading 8 ints at kLaneMask + 8 - n enables the first n lanes.
alignas(64) constexpr int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                               0,  0,  0,  0,  0,  0,  0,  0};

// 8 columns of B as float32: masked past the tile's edge, or float16 widened in register (a
// float16 panel row is 32 wide and zero-padded, so its loads never leave the panel).
template <bool kEdge>
ONEINFER_AVX2 inline __m256 LoadB8(const float* b, __m256i m) {
  return kEdge ? _mm256_maskload_ps(b, m) : _mm256_loadu_ps(b);
}
template <bool kEdge>
ONEINFER_AVX2 inline __m256 LoadB8(const uint16_t* b, __m256i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
}

// c: mr x 16 tile (ldc); a: packed kc x MR or in-place mr x kc (lda); b: kc x 16 (b_ks), float32
// or float16 (the same products: widening is exact). K is summed in blocks of kblock, each added
// to the tile's result as the driver adds a K block to C (C*1 + alpha*block), so a one-row decode
// tile over all of K gives a row the bits a six-row tile fed block by block gives it (batch
// invariance, Session::RunBatch).
template <int MR, bool kPackedA, bool kEdge, typename TB = float>
ONEINFER_AVX2 inline void sgemm_tile_6x16__avx2(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                                const TB* b, int64_t b_ks, float* c,
                                                int64_t ldc, int64_t nr, float alpha, float beta) {
  __m256i m0 = _mm256_set1_epi32(-1), m1 = m0;
  if (kEdge) {
    m0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - (nr < 8 ? nr : 8)));
    m1 = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(kLaneMask + 8 - (nr > 8 ? nr - 8 : 0)));
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 vb = _mm256_set1_ps(beta);
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 x0[MR], x1[MR];  // the tile so far
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) x0[r] = x1[r] = _mm256_setzero_ps();  // kc > 0: overwritten
  for (int64_t k0 = 0; k0 < kc; k0 += kblock) {
    const int64_t k1 = kc - k0 < kblock ? kc : k0 + kblock;
    __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    for (int64_t k = k0; k < k1; ++k) {
      if constexpr (sizeof(TB) == 2) _mm_prefetch(reinterpret_cast<const char*>(b) + kHalfPanelPrefetchBytes, _MM_HINT_T0);
      const __m256 b0 = LoadB8<kEdge>(b, m0);
      const __m256 b1 = LoadB8<kEdge>(b + 8, m1);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m256 av = _mm256_broadcast_ss(kPackedA ? a + k * kMr + r : a + r * lda + k);
        acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
      }
      b += b_ks;
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 y0 = _mm256_mul_ps(acc0[r], va);
      const __m256 y1 = _mm256_mul_ps(acc1[r], va);
      if (k0 > 0) {
        x0[r] = _mm256_fmadd_ps(x0[r], one, y0);
        x1[r] = _mm256_fmadd_ps(x1[r], one, y1);
      } else if (beta != 0.0f) {
        float* cr = c + r * ldc;
        x0[r] = _mm256_fmadd_ps(kEdge ? _mm256_maskload_ps(cr, m0) : _mm256_loadu_ps(cr), vb, y0);
        x1[r] = _mm256_fmadd_ps(kEdge ? _mm256_maskload_ps(cr + 8, m1) : _mm256_loadu_ps(cr + 8), vb, y1);
      } else {
        x0[r] = y0;
        x1[r] = y1;
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    if (kEdge) {
      _mm256_maskstore_ps(cr, m0, x0[r]);
      _mm256_maskstore_ps(cr + 8, m1, x1[r]);
    } else {
      _mm256_storeu_ps(cr, x0[r]);
      _mm256_storeu_ps(cr + 8, x1[r]);
    }
  }
}

template <int MR, bool kPackedA, typename TB = float>
ONEINFER_AVX2 void sgemm_tile_any_nr__avx2(int64_t kc, int64_t kblock, const float* a, int64_t lda, const TB* b,
                                           int64_t b_ks, float* c, int64_t ldc, int64_t nr,
                                           float alpha, float beta) {
  if (nr == 16)
    sgemm_tile_6x16__avx2<MR, kPackedA, false, TB>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
  else
    sgemm_tile_6x16__avx2<MR, kPackedA, true, TB>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
}

ONEINFER_AVX2 void sgemm_tile_packed_a__avx2(int64_t kc, const float* a, const float* b,
                                             int64_t b_ks, float* c, int64_t ldc, int64_t mr,
                                             int64_t nr, float alpha, float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx2<R, true>(kc, kc, a, 0, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3)
    ONEINFER_CASE(4) ONEINFER_CASE(5) ONEINFER_CASE(6)
#undef ONEINFER_CASE
  }
}

ONEINFER_AVX2 void sgemm_tile_direct_a__avx2(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                             const float* b, int64_t b_ks, float* c, int64_t ldc,
                                             int64_t mr, int64_t nr, float alpha, float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx2<R, false>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

// c: MR x n (ldc) += alpha * a: MR x R (lda) * b: R x n (ldb), one pass over the R rows of b.
template <int MR, int R>
ONEINFER_AVX2 inline void sgemm_rows_step__avx2(int64_t n, float alpha, const float* a,
                                                int64_t lda, const float* b, int64_t ldb,
                                                float* c, int64_t ldc) {
  __m256 av[MR][R];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) av[r][i] = _mm256_set1_ps(alpha * a[r * lda + i]);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 bv[R];
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) bv[i] = _mm256_loadu_ps(b + i * ldb + j);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      __m256 acc = _mm256_loadu_ps(c + r * ldc + j);
#pragma GCC unroll 32
      for (int i = 0; i < R; ++i) acc = _mm256_fmadd_ps(av[r][i], bv[i], acc);
      _mm256_storeu_ps(c + r * ldc + j, acc);
    }
  }
  if (j < n) {
    const __m256i m =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - (n - j)));
    __m256 bv[R];
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) bv[i] = _mm256_maskload_ps(b + i * ldb + j, m);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      __m256 acc = _mm256_maskload_ps(c + r * ldc + j, m);
#pragma GCC unroll 32
      for (int i = 0; i < R; ++i) acc = _mm256_fmadd_ps(av[r][i], bv[i], acc);
      _mm256_maskstore_ps(c + r * ldc + j, m, acc);
    }
  }
}

// c: MR x n; b rows are consumed R at a time over column chunks that keep c in L1.
template <int MR, int R>
ONEINFER_AVX2 void sgemm_small_m__avx2(int64_t n, int64_t k, float alpha, const float* a,
                                       int64_t lda, const float* b, int64_t ldb, float beta,
                                       float* c, int64_t ldc) {
  constexpr int64_t kNb = 2048;
  for (int64_t j0 = 0; j0 < n; j0 += kNb) {
    const int64_t nb = n - j0 < kNb ? n - j0 : kNb;
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc + j0;
      for (int64_t j = 0; j < nb; ++j) cr[j] = beta == 0.0f ? 0.0f : beta * cr[j];
    }
    int64_t kk = 0;
    for (; kk + R <= k; kk += R)
      sgemm_rows_step__avx2<MR, R>(nb, alpha, a + kk, lda, b + kk * ldb + j0, ldb, c + j0, ldc);
    for (; kk < k; ++kk)
      sgemm_rows_step__avx2<MR, 1>(nb, alpha, a + kk, lda, b + kk * ldb + j0, ldb, c + j0, ldc);
  }
}

ONEINFER_AVX2 void sgemm_small_m_any__avx2(int64_t m, int64_t n, int64_t k, float alpha,
                                           const float* a, int64_t lda, const float* b,
                                           int64_t ldb, float beta, float* c, int64_t ldc) {
  switch (m) {
    case 1: return sgemm_small_m__avx2<1, 8>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 2: return sgemm_small_m__avx2<2, 4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 3: return sgemm_small_m__avx2<3, 2>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 4: return sgemm_small_m__avx2<4, 2>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

ONEINFER_AVX2 void sgemm_tile_direct_a_half__avx2(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                                  const uint16_t* b, int64_t b_ks, float* c, int64_t ldc, int64_t mr,
                                                  int64_t nr, float alpha, float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx2<R, false, uint16_t>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

// c[r][j] = alpha * dot(a row r, b row j) + beta * c[r][j] for MR rows of a against every row of
// b (B transposed, read in place: attention's Q x K^T over the key cache). J rows of b at a time,
// each dot its own FMA chain then one reduction, so a c element's bits do not depend on J or MR;
// J chains in flight hide the FMA latency a lone dot would wait on.
template <int MR, int J>
ONEINFER_AVX2 inline void sgemm_tb_dots__avx2(int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                                              int64_t ldb, float beta, float* c, int64_t ldc) {
  const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - k % 8));
  __m256 s[MR][J];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int u = 0; u < J; ++u) s[r][u] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 av[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) av[r] = _mm256_loadu_ps(a + r * lda + i);
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      const __m256 bv = _mm256_loadu_ps(b + u * ldb + i);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) s[r][u] = _mm256_fmadd_ps(av[r], bv, s[r][u]);
    }
  }
  if (i < k) {
    __m256 av[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) av[r] = _mm256_maskload_ps(a + r * lda + i, tail);
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      const __m256 bv = _mm256_maskload_ps(b + u * ldb + i, tail);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) s[r][u] = _mm256_fmadd_ps(av[r], bv, s[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(s[r][u]), _mm256_extractf128_ps(s[r][u], 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      h = _mm_add_ss(h, _mm_movehdup_ps(h));
      const float d = alpha * _mm_cvtss_f32(h);
      float& out = c[r * ldc + u];
      out = beta == 0.0f ? d : std::fma(beta, out, d);  // one rounding, however the call is inlined
    }
}

template <int MR>
ONEINFER_AVX2 void sgemm_small_m_tb_rows__avx2(int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int kJ = MR <= 2 ? 4 : 2;  // MR x J accumulators, MR rows of a and one of b in 16 ymm
  int64_t j = 0;
  for (; j + kJ <= n; j += kJ) sgemm_tb_dots__avx2<MR, kJ>(k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
  for (; j < n; ++j) sgemm_tb_dots__avx2<MR, 1>(k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
}

ONEINFER_AVX2 void sgemm_small_m_tb__avx2(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  switch (m) {
    case 1: return sgemm_small_m_tb_rows__avx2<1>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 2: return sgemm_small_m_tb_rows__avx2<2>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 3: return sgemm_small_m_tb_rows__avx2<3>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 4: return sgemm_small_m_tb_rows__avx2<4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace

const SgemmTier kSgemmTierAvx2 = {"avx2", kMr, 16, sgemm_tile_packed_a__avx2,
                                  sgemm_tile_direct_a__avx2, sgemm_small_m_any__avx2,
                                  sgemm_tile_direct_a_half__avx2, sgemm_small_m_tb__avx2};

}  // namespace oneinfer::gemm_internal
