// Internal interface between the 4-bit GEMM driver (gemm_q4.cc) and its per-ISA panel kernels.
#pragma once

#include <cstdint>

#include "quant/gemm_q4.h"

namespace oneinfer::gemm_q4_internal {

// The kernels are instantiated per scale format (Q4ScaleFormat, as an int template argument):
// where a block's d and m sit and how m is had.
inline constexpr int kFmtF32 = static_cast<int>(Q4ScaleFormat::kF32);    // d, m float32
inline constexpr int kFmtF16 = static_cast<int>(Q4ScaleFormat::kF16);    // d, m float16
inline constexpr int kFmtF32D = static_cast<int>(Q4ScaleFormat::kF32D);  // d float32, m = c * d
inline constexpr int kFmtCount = 3;
template <int Fmt>
inline constexpr int64_t kBlockStride = Fmt == kFmtF32 ? kQ4BlockStride : kQ4BlockStrideF16;
template <int Fmt>
inline constexpr int64_t kScaleBytes = Fmt == kFmtF16 ? 2 : 4;

// y[mr x nr] (ldy) = quantised activations * one packed panel (see gemm_q4.h), over kb blocks,
// with the exact per-block float sequence of MatMulQ4.
// q: mr rows of 32 kb int8 (row stride ldq); s, sum: mr rows of kb floats (row stride lds);
// w: the panel's first block; nr <= kQ4Panel columns are written; mr <= the tier's mr;
// c: the matrix's m / d (kF32D only).
using PanelFn = void (*)(int64_t kb, const int8_t* q, int64_t ldq, const float* s,
                         const float* sum, int64_t lds, const uint8_t* w, float* y, int64_t ldy,
                         int64_t mr, int64_t nr, float c);

// y[mr x nr] (ldy) = float activations a (mr rows of 32 kb floats, row stride lda) * one packed
// panel with the exact sequence of MatMulQ4Float (gemm_q4.h); mr <= the tier's float_mr.
using FloatPanelFn = void (*)(int64_t kb, const float* a, int64_t lda, const uint8_t* w, float* y,
                              int64_t ldy, int64_t mr, int64_t nr, float c);

struct GemmQ4Tier {
  const char* name;
  int64_t mr;                            // rows per panel-kernel call
  PanelFn panel[kFmtCount];              // by scale format
  int64_t float_mr;                      // rows per float-panel call
  FloatPanelFn float_panel[kFmtCount];   // float activations, by scale format
};

extern const GemmQ4Tier kGemmQ4TierReference;
extern const GemmQ4Tier kGemmQ4TierAvx2;
extern const GemmQ4Tier kGemmQ4TierAvx512Vnni;

}  // namespace oneinfer::gemm_q4_internal
