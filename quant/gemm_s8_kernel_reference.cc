// Portable tier: the packed-panel kernel in plain C++ (int16 A, int32 accumulation).
#include <cstring>

#include "quant/gemm_s8.h"
#include "quant/gemm_s8_internal.h"

namespace oneinfer::gemm_s8_internal {
namespace {

constexpr int64_t P = kGemmS8Panel;

// a: mr x 4kq int16 (lda); w: packed panel; c: mr x nr int32 (ldc).
void gemm_s16s8_s32_panel__reference(int64_t kq, const void* a_in, int64_t lda, const int8_t* w,
                                     const int32_t* /*shift_col_sums: never set for kS16*/,
                                     int32_t* c, int64_t ldc, int64_t mr, int64_t nr,
                                     NextPanelSlice /*next*/) {
  const int16_t* a = static_cast<const int16_t*>(a_in);
  for (int64_t r = 0; r < mr; ++r) {
    int32_t acc[P] = {};
    const int16_t* ar = a + r * lda;
    for (int64_t q = 0; q < kq; ++q) {
      const int8_t* wq = w + q * 4 * P;
      const int32_t a0 = ar[4 * q], a1 = ar[4 * q + 1], a2 = ar[4 * q + 2], a3 = ar[4 * q + 3];
      for (int64_t j = 0; j < P; ++j)
        acc[j] += a0 * wq[4 * j] + a1 * wq[4 * j + 1] + a2 * wq[4 * j + 2] + a3 * wq[4 * j + 3];
    }
    std::memcpy(c + r * ldc, acc, nr * sizeof(int32_t));
  }
}

}  // namespace

const GemmS8Tier kGemmS8TierReference = {"reference", 4, AFormat::kS16,
                                         gemm_s16s8_s32_panel__reference};

}  // namespace oneinfer::gemm_s8_internal
