// AVX-512 micro-kernels: up to 8 rows x 32 columns (two zmm) of C held in registers.
// GCC 12's _mm512_cvtph_ps and _mm512_reduce_add_ps pass self-initialised "undefined" vectors:
// false warnings.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <algorithm>
#include <array>
#include <cmath>
#include <immintrin.h>
#include <utility>

#include "ops/gemm/sgemm_internal.h"

namespace oneinfer::gemm_internal {
namespace {

#define ONEINFER_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

constexpr int kMr = 8;

// 16 columns of B as float32: masked past the tile's edge, or float16 widened in register (a
// float16 panel row is 32 wide and zero-padded, so its loads never leave the panel).
template <bool kEdge>
ONEINFER_AVX512 inline __m512 LoadB16(const float* b, __mmask16 m) {
  return kEdge ? _mm512_maskz_loadu_ps(m, b) : _mm512_loadu_ps(b);
}
template <bool kEdge>
ONEINFER_AVX512 inline __m512 LoadB16(const uint16_t* b, __mmask16) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
}

// c: mr x 32 tile (ldc); a: packed kc x MR or in-place mr x kc (lda); b: kc x 32 (b_ks), float32
// or float16 (the same products: widening is exact). K is summed in blocks of kblock, each block
// one FMA chain per accumulator added to the tile's result as the driver adds a K block to C
// (C*1 + alpha*block): so a row of C gets the same bits in a one-row decode tile that streams
// all of K as in an eight-row tile fed block by block (batch invariance, Session::RunBatch).
template <int MR, bool kPackedA, bool kEdge, typename TB = float>
ONEINFER_AVX512 inline void sgemm_tile_8x32__avx512(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                                    const TB* b, int64_t b_ks, float* c,
                                                    int64_t ldc, int64_t nr, float alpha,
                                                    float beta) {
  // Edge tiles mask both B loads and C accesses so nothing past column nr is touched.
  const __mmask16 m0 = kEdge ? static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1) : 0xFFFF;
  const __mmask16 m1 =
      kEdge ? static_cast<__mmask16>(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1)
            : 0xFFFF;
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 x0[MR], x1[MR];  // the tile so far
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) x0[r] = x1[r] = _mm512_setzero_ps();  // kc > 0: overwritten
  for (int64_t k0 = 0; k0 < kc; k0 += kblock) {
    const int64_t k1 = kc - k0 < kblock ? kc : k0 + kblock;
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; ++k) {
      if constexpr (sizeof(TB) == 2) _mm_prefetch(reinterpret_cast<const char*>(b) + kHalfPanelPrefetchBytes, _MM_HINT_T0);
      const __m512 b0 = LoadB16<kEdge>(b, m0);
      const __m512 b1 = LoadB16<kEdge>(b + 16, m1);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(kPackedA ? a[k * kMr + r] : a[r * lda + k]);
        acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
      }
      b += b_ks;
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 y0 = _mm512_mul_ps(acc0[r], va);
      const __m512 y1 = _mm512_mul_ps(acc1[r], va);
      if (k0 > 0) {
        x0[r] = _mm512_fmadd_ps(x0[r], one, y0);
        x1[r] = _mm512_fmadd_ps(x1[r], one, y1);
      } else if (beta != 0.0f) {
        float* cr = c + r * ldc;
        x0[r] = _mm512_fmadd_ps(kEdge ? _mm512_maskz_loadu_ps(m0, cr) : _mm512_loadu_ps(cr), vb, y0);
        x1[r] = _mm512_fmadd_ps(kEdge ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_loadu_ps(cr + 16), vb, y1);
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
      _mm512_mask_storeu_ps(cr, m0, x0[r]);
      _mm512_mask_storeu_ps(cr + 16, m1, x1[r]);
    } else {
      _mm512_storeu_ps(cr, x0[r]);
      _mm512_storeu_ps(cr + 16, x1[r]);
    }
  }
}

template <int MR, bool kPackedA, typename TB = float>
ONEINFER_AVX512 void sgemm_tile_any_nr__avx512(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                               const TB* b, int64_t b_ks, float* c, int64_t ldc,
                                               int64_t nr, float alpha, float beta) {
  if (nr == 32)
    sgemm_tile_8x32__avx512<MR, kPackedA, false, TB>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
  else
    sgemm_tile_8x32__avx512<MR, kPackedA, true, TB>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
}

ONEINFER_AVX512 void sgemm_tile_packed_a__avx512(int64_t kc, const float* a, const float* b,
                                                 int64_t b_ks, float* c, int64_t ldc, int64_t mr,
                                                 int64_t nr, float alpha, float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx512<R, true>(kc, kc, a, 0, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
    ONEINFER_CASE(5) ONEINFER_CASE(6) ONEINFER_CASE(7) ONEINFER_CASE(8)
#undef ONEINFER_CASE
  }
}

ONEINFER_AVX512 void sgemm_tile_direct_a__avx512(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                                 const float* b, int64_t b_ks, float* c,
                                                 int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                                 float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx512<R, false>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

ONEINFER_AVX512 void sgemm_tile_direct_a_half__avx512(int64_t kc, int64_t kblock, const float* a, int64_t lda,
                                                      const uint16_t* b, int64_t b_ks, float* c,
                                                      int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                                      float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_any_nr__avx512<R, false, uint16_t>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

// c: MR x n (ldc) += alpha * a: MR x R (lda) * b: R x n (ldb), one pass over the R rows of b.
template <int MR, int R>
ONEINFER_AVX512 inline void sgemm_rows_step__avx512(int64_t n, float alpha, const float* a,
                                                    int64_t lda, const float* b, int64_t ldb,
                                                    float* c, int64_t ldc) {
  __m512 av[MR][R];
#pragma GCC unroll 32
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) av[r][i] = _mm512_set1_ps(alpha * a[r * lda + i]);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 bv[R];
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) bv[i] = _mm512_loadu_ps(b + i * ldb + j);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      __m512 acc = _mm512_loadu_ps(c + r * ldc + j);
#pragma GCC unroll 32
      for (int i = 0; i < R; ++i) acc = _mm512_fmadd_ps(av[r][i], bv[i], acc);
      _mm512_storeu_ps(c + r * ldc + j, acc);
    }
  }
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 bv[R];
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) bv[i] = _mm512_maskz_loadu_ps(m, b + i * ldb + j);
#pragma GCC unroll 32
    for (int r = 0; r < MR; ++r) {
      __m512 acc = _mm512_maskz_loadu_ps(m, c + r * ldc + j);
#pragma GCC unroll 32
      for (int i = 0; i < R; ++i) acc = _mm512_fmadd_ps(av[r][i], bv[i], acc);
      _mm512_mask_storeu_ps(c + r * ldc + j, m, acc);
    }
  }
}

// c: MR x n; b rows are consumed R at a time over column chunks that keep c in L1.
template <int MR, int R>
ONEINFER_AVX512 void sgemm_small_m__avx512(int64_t n, int64_t k, float alpha, const float* a,
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
      sgemm_rows_step__avx512<MR, R>(nb, alpha, a + kk, lda, b + kk * ldb + j0, ldb, c + j0, ldc);
    for (; kk < k; ++kk)
      sgemm_rows_step__avx512<MR, 1>(nb, alpha, a + kk, lda, b + kk * ldb + j0, ldb, c + j0, ldc);
  }
}

// How many rows ahead sgemm_small_m_regs fetches b: a row is short (one head, 512 bytes), and a
// head's values are only T rows, too few for the hardware prefetcher to get ahead of them.
constexpr int64_t kRowsAhead = 16;

// c: MR x n for n <= 16 * NV, held in registers over all of k (attention's P x V: 2 rows x 128
// columns): each step reads one row of b, front to back, and c never goes through memory. Every
// element sums its k products in order, one FMA each, as sgemm_rows_step does (the same bits).
template <int MR, int NV>
ONEINFER_AVX512 void sgemm_small_m_regs__avx512(int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t last = n - 16 * (NV - 1);
  const __mmask16 last_mask = static_cast<__mmask16>(last >= 16 ? 0xFFFFu : (1u << last) - 1);
  auto mask = [last_mask](int v) { return v == NV - 1 ? last_mask : static_cast<__mmask16>(0xFFFF); };
  __m512 acc[MR][NV];
  const __m512 bv = _mm512_set1_ps(beta);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      acc[r][v] = beta == 0.0f ? _mm512_setzero_ps()
                               : _mm512_mul_ps(bv, _mm512_maskz_loadu_ps(mask(v), c + r * ldc + 16 * v));
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* br = b + kk * ldb;
    if (kk + kRowsAhead < k) {
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) _mm_prefetch(reinterpret_cast<const char*>(br + kRowsAhead * ldb + 16 * v), _MM_HINT_T0);
    }
    __m512 bk[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) bk[v] = _mm512_maskz_loadu_ps(mask(v), br + 16 * v);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(alpha * a[r * lda + kk]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bk[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask(v), acc[r][v]);
}

// The register-held kernel for m rows of n columns, where they fit in 32 registers beside a row
// of b (n <= 128 for one or two rows, 80 for three, 64 for four); else null.
using RegsFn = void (*)(int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float, float*,
                        int64_t);
template <int MR, int... NV>
constexpr std::array<RegsFn, sizeof...(NV)> RegsKernels(std::integer_sequence<int, NV...>) {
  return {sgemm_small_m_regs__avx512<MR, NV + 1>...};
}
ONEINFER_AVX512 RegsFn SmallMRegsKernel(int64_t m, int64_t n) {
  static constexpr auto k1 = RegsKernels<1>(std::make_integer_sequence<int, 8>{});
  static constexpr auto k2 = RegsKernels<2>(std::make_integer_sequence<int, 8>{});
  static constexpr auto k3 = RegsKernels<3>(std::make_integer_sequence<int, 5>{});
  static constexpr auto k4 = RegsKernels<4>(std::make_integer_sequence<int, 4>{});
  const int64_t nv = (n + 15) / 16;
  switch (m) {
    case 1: return nv <= 8 ? k1[nv - 1] : nullptr;
    case 2: return nv <= 8 ? k2[nv - 1] : nullptr;
    case 3: return nv <= 5 ? k3[nv - 1] : nullptr;
    case 4: return nv <= 4 ? k4[nv - 1] : nullptr;
  }
  return nullptr;
}

ONEINFER_AVX512 void sgemm_small_m_any__avx512(int64_t m, int64_t n, int64_t k, float alpha,
                                               const float* a, int64_t lda, const float* b,
                                               int64_t ldb, float beta, float* c, int64_t ldc) {
  if (n > 0 && k > 0) {
    if (const RegsFn regs = SmallMRegsKernel(m, n)) return regs(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  switch (m) {
    case 1: return sgemm_small_m__avx512<1, 8>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 2: return sgemm_small_m__avx512<2, 8>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 3: return sgemm_small_m__avx512<3, 4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 4: return sgemm_small_m__avx512<4, 4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// c[r][j] = alpha * dot(a row r, b row j) + beta * c[r][j] for MR rows of a against every row of
// b (B transposed, read in place: attention's Q x K^T over the key cache). J rows of b at a time,
// each dot its own FMA chain then one reduction, so a c element's bits do not depend on J or MR;
// J chains in flight hide the FMA latency a lone 128-wide dot would wait on.
template <int MR, int J>
ONEINFER_AVX512 inline void sgemm_tb_dots__avx512(int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                                                  int64_t ldb, float beta, float* c, int64_t ldc) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (k % 16)) - 1);
  __m512 s[MR][J];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int u = 0; u < J; ++u) s[r][u] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 av[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) av[r] = _mm512_loadu_ps(a + r * lda + i);
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      const __m512 bv = _mm512_loadu_ps(b + u * ldb + i);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) s[r][u] = _mm512_fmadd_ps(av[r], bv, s[r][u]);
    }
  }
  if (i < k) {
    __m512 av[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) av[r] = _mm512_maskz_loadu_ps(tail, a + r * lda + i);
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      const __m512 bv = _mm512_maskz_loadu_ps(tail, b + u * ldb + i);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) s[r][u] = _mm512_fmadd_ps(av[r], bv, s[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < J; ++u) {
      const float d = alpha * _mm512_reduce_add_ps(s[r][u]);
      float& out = c[r * ldc + u];
      out = beta == 0.0f ? d : std::fma(beta, out, d);  // one rounding, however the call is inlined
    }
}

// The lane sums of 16 vectors in one: lane j = the sum of v[perm(j)]'s lanes, perm(j) = j % 4 * 4 +
// j / 4 (a 4 x 4 transpose of the index), each in _mm512_reduce_add_ps's tree (lanes i and i + 8,
// then i and i + 4, i and i + 2, i and i + 1), so a sum has the bits of one reduced alone: 45
// instructions for 16 sums instead of ~130.
ONEINFER_AVX512 inline __m512 ReduceAdd16(const __m512* v) {
  __m512 w[8], x[4], y[2];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p)  // i + 8: the 256-bit halves; w[p] = v[2p]'s 8 sums, then v[2p+1]'s
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)  // i + 4: 128-bit lane l of x[q] holds v[4q + l]'s 4 sums
    x[q] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * q], w[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[2 * q], w[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
  for (int r = 0; r < 2; ++r)  // i + 2: lane l of y[r] = v[8r + l]'s 2 sums, then v[8r + 4 + l]'s
    y[r] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * r], x[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x[2 * r], x[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // i + 1: element e of lane l = v[l + 4e]'s sum.
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// sgemm_tb_dots for MR x J = 16 dots: the same FMA chains, reduced together by ReduceAdd16. The
// rows of b are read one after the other, front to back: with J rows interleaved (the short
// rows of a key cache, 512 bytes) the products ran at half the memory's speed. KC > 0: k is
// 16 * KC (a head size), the loop unrolled so that the next rows' chains overlap this one's.
template <int MR, int KC>
ONEINFER_AVX512 inline void sgemm_tb_dots16__avx512(int64_t k, float alpha, const float* a, int64_t lda,
                                                    const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int J = 16 / MR;
  const __mmask16 tail = static_cast<__mmask16>((1u << (k % 16)) - 1);
  // s[d] is dot d = r * J + u, kept at perm(d) so that the reduction's lane d is dot d.
  __m512 s[16];
#pragma GCC unroll 16
  for (int d = 0; d < 16; ++d) s[d] = _mm512_setzero_ps();
  constexpr auto at = [](int d) { return d % 4 * 4 + d / 4; };
  const int64_t full = KC > 0 ? 16 * KC : k / 16 * 16;
#pragma GCC unroll 16
  for (int u = 0; u < J; ++u) {
    const float* bu = b + u * ldb;
#pragma GCC unroll 8
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 bv = _mm512_loadu_ps(bu + i);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) s[at(r * J + u)] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * lda + i), bv, s[at(r * J + u)]);
    }
    if (KC == 0 && full < k) {
      const __m512 bv = _mm512_maskz_loadu_ps(tail, bu + full);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r)
        s[at(r * J + u)] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, a + r * lda + full), bv, s[at(r * J + u)]);
    }
  }
  const __m512 d = _mm512_mul_ps(_mm512_set1_ps(alpha), ReduceAdd16(s));
  const __mmask16 row = static_cast<__mmask16>((1u << J) - 1);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    // Lanes r * J .. r * J + J - 1 are row r's J scores: moved down to lane 0 for the store.
    const __m512 dr = _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(r * J), _mm512_set_epi32(
                                                15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)),
                                            d);
    float* out = c + r * ldc;
    if (beta == 0.0f) {
      _mm512_mask_storeu_ps(out, row, dr);
    } else {  // one rounding, as std::fma(beta, c, d)
      _mm512_mask_storeu_ps(out, row, _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(row, out), dr));
    }
  }
}

// Groups of 16 dots over n rows of b; returns the rows done.
template <int MR, int KC>
ONEINFER_AVX512 int64_t sgemm_tb_groups16__avx512(int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int J = 16 / MR;
  int64_t j = 0;
  for (; j + J <= n; j += J) sgemm_tb_dots16__avx512<MR, KC>(k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
  return j;
}

template <int MR>
ONEINFER_AVX512 void sgemm_small_m_tb_rows__avx512(int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int kJ = 4;
  int64_t j = 0;
  if constexpr (16 % MR == 0) {
    switch (k) {
      case 64: j = sgemm_tb_groups16__avx512<MR, 4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
      case 128: j = sgemm_tb_groups16__avx512<MR, 8>(n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
      default: j = sgemm_tb_groups16__avx512<MR, 0>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
  }
  for (; j + kJ <= n; j += kJ) sgemm_tb_dots__avx512<MR, kJ>(k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
  for (; j < n; ++j) sgemm_tb_dots__avx512<MR, 1>(k, alpha, a, lda, b + j * ldb, ldb, beta, c + j, ldc);
}

ONEINFER_AVX512 void sgemm_small_m_tb__avx512(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                             int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                             int64_t ldc) {
  switch (m) {
    case 1: return sgemm_small_m_tb_rows__avx512<1>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 2: return sgemm_small_m_tb_rows__avx512<2>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 3: return sgemm_small_m_tb_rows__avx512<3>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    case 4: return sgemm_small_m_tb_rows__avx512<4>(n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace

const SgemmTier kSgemmTierAvx512 = {"avx512", kMr, 32, sgemm_tile_packed_a__avx512,
                                    sgemm_tile_direct_a__avx512, sgemm_small_m_any__avx512,
                                    sgemm_tile_direct_a_half__avx512, sgemm_small_m_tb__avx512};

}  // namespace oneinfer::gemm_internal
