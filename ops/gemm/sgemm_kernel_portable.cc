// Portable micro-kernels: plain C++ tiles the compiler vectorizes for the baseline ISA.
#include "ops/gemm/sgemm_internal.h"

namespace oneinfer::gemm_internal {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 16;

// c: mr x nr tile (ldc); a: packed kc x MR or in-place mr x kc (lda); b: kc x nr (b_ks). K is
// summed in blocks of kblock, each added to the tile's result as the driver adds a K block to C
// (alpha*block + 1*C), so a decode tile over all of K matches tiles fed block by block.
template <int MR, bool kPackedA>
void sgemm_tile_4x16__portable(int64_t kc, int64_t kblock, const float* a, int64_t lda, const float* b,
                               int64_t b_ks, float* c, int64_t ldc, int64_t nr, float alpha,
                               float beta) {
  float x[MR][kNr] = {};  // the tile so far
  for (int64_t k0 = 0; k0 < kc; k0 += kblock) {
    const int64_t k1 = kc - k0 < kblock ? kc : k0 + kblock;
    float acc[MR][kNr] = {};
    if (nr == kNr) {
      // Fixed-width body lets the compiler keep acc in vector registers.
      for (int64_t k = k0; k < k1; ++k, b += b_ks) {
        for (int r = 0; r < MR; ++r) {
          const float av = kPackedA ? a[k * kMr + r] : a[r * lda + k];
          for (int j = 0; j < kNr; ++j) acc[r][j] += av * b[j];
        }
      }
    } else {
      for (int64_t k = k0; k < k1; ++k, b += b_ks) {
        for (int r = 0; r < MR; ++r) {
          const float av = kPackedA ? a[k * kMr + r] : a[r * lda + k];
          for (int64_t j = 0; j < nr; ++j) acc[r][j] += av * b[j];
        }
      }
    }
    for (int r = 0; r < MR; ++r) {
      const float* cr = c + r * ldc;
      for (int64_t j = 0; j < nr; ++j) {
        if (k0 > 0)
          x[r][j] = alpha * acc[r][j] + 1.0f * x[r][j];
        else
          x[r][j] = beta == 0.0f ? alpha * acc[r][j] : alpha * acc[r][j] + beta * cr[j];
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < nr; ++j) cr[j] = x[r][j];
  }
}

void sgemm_tile_packed_a__portable(int64_t kc, const float* a, const float* b, int64_t b_ks,
                                   float* c, int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                   float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_4x16__portable<R, true>(kc, kc, a, 0, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

void sgemm_tile_direct_a__portable(int64_t kc, int64_t kblock, const float* a, int64_t lda, const float* b,
                                   int64_t b_ks, float* c, int64_t ldc, int64_t mr, int64_t nr,
                                   float alpha, float beta) {
  switch (mr) {
#define ONEINFER_CASE(R) \
  case R: return sgemm_tile_4x16__portable<R, false>(kc, kblock, a, lda, b, b_ks, c, ldc, nr, alpha, beta);
    ONEINFER_CASE(1) ONEINFER_CASE(2) ONEINFER_CASE(3) ONEINFER_CASE(4)
#undef ONEINFER_CASE
  }
}

// c: m x n; four rows of b per pass so each c element is loaded and stored once per pass.
void sgemm_small_m__portable(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                             int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                             int64_t ldc) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) c[r * ldc + j] = beta == 0.0f ? 0.0f : beta * c[r * ldc + j];
  int64_t kk = 0;
  for (; kk + 4 <= k; kk += 4) {
    const float* b0 = b + kk * ldb;
    const float *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
    for (int64_t r = 0; r < m; ++r) {
      const float* ar = a + r * lda + kk;
      const float a0 = alpha * ar[0], a1 = alpha * ar[1], a2 = alpha * ar[2], a3 = alpha * ar[3];
      float* cr = c + r * ldc;
      for (int64_t j = 0; j < n; ++j) cr[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
    }
  }
  for (; kk < k; ++kk) {
    for (int64_t r = 0; r < m; ++r) {
      const float ar = alpha * a[r * lda + kk];
      float* cr = c + r * ldc;
      for (int64_t j = 0; j < n; ++j) cr[j] += ar * b[kk * ldb + j];
    }
  }
}

}  // namespace

const SgemmTier kSgemmTierPortable = {"portable", kMr, kNr, sgemm_tile_packed_a__portable,
                                      sgemm_tile_direct_a__portable, sgemm_small_m__portable};

}  // namespace oneinfer::gemm_internal
