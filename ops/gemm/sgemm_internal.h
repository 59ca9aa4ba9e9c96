// Internal interface between the Sgemm driver and the per-ISA micro-kernels.
#pragma once

#include <cstdint>

namespace oneinfer::gemm_internal {

// c[mr x nr] = alpha * a * b + beta * c (beta == 0: c not read), accumulating over kc.
// a_packed: kc x MR panel, element (r, k) at a[k * MR + r] (rows >= mr are ignored).
// b: kc x nr, element (k, n) at b[k * b_ks + n]; only columns < nr are read.
using TilePackedAFn = void (*)(int64_t kc, const float* a, const float* b, int64_t b_ks, float* c,
                               int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta);
// Same with a read in place: a: mr x kc row-major with leading dim lda, mr <= kDirectMaxM; K is
// summed in blocks of kblock exactly as the driver sums K blocks through C (batch invariance).
using TileDirectAFn = void (*)(int64_t kc, int64_t kblock, const float* a, int64_t lda, const float* b,
                               int64_t b_ks, float* c, int64_t ldc, int64_t mr, int64_t nr,
                               float alpha, float beta);

// Same with b a float16 packed panel (32 columns, zero-padded), widened in register.
using TileDirectAHalfFn = void (*)(int64_t kc, int64_t kblock, const float* a, int64_t lda, const uint16_t* b,
                                   int64_t b_ks, float* c, int64_t ldc, int64_t mr, int64_t nr,
                                   float alpha, float beta);

// c[m x n] = alpha * a[m x k] * b[k x n] + beta * c for m <= kDirectMaxM, all row-major in place:
// streams a few rows of b at a time front to back (GEMV-like, prefetcher-friendly).
using SmallMFn = void (*)(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The float16 decode tiles prefetch their panel this many bytes (64 rows) ahead: one 64-byte
// row per k step leaves the hardware prefetcher too few lines in flight (optimum float16 decode
// at 2 threads: 33.2 -> 31.0 ms; float32 panels, twice the lines per step, do not need it).
inline constexpr int64_t kHalfPanelPrefetchBytes = 4096;

// M at or below this skips A packing and streams B once (GEMV-like decode path).
inline constexpr int64_t kDirectMaxM = 4;

struct SgemmTier {
  const char* name;
  int64_t mr;  // rows per packed-A kernel call
  int64_t nr;  // columns per kernel call; divides the 32-wide B panel
  TilePackedAFn tile_packed_a;
  TileDirectAFn tile_direct_a;
  SmallMFn small_m;
  // null: float16 panels are widened into scratch a block at a time instead.
  TileDirectAHalfFn tile_direct_a_half = nullptr;
  // The same contract as small_m with b stored transposed (n x k, ldb): dot products of rows read
  // in place. null: B is packed block by block instead.
  SmallMFn small_m_tb = nullptr;
};

extern const SgemmTier kSgemmTierPortable;
extern const SgemmTier kSgemmTierAvx2;
extern const SgemmTier kSgemmTierAvx512;

}  // namespace oneinfer::gemm_internal
