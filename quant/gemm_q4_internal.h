// Internal interface between the 4-bit GEMM driver (gemm_q4.cc) and its per-ISA panel kernels.
#pragma once

#include <cstdint>

namespace oneinfer::gemm_q4_internal {

// y[mr x nr] (ldy) = quantised activations * one packed panel (see gemm_q4.h), over kb blocks,
// with the exact per-block float sequence of MatMulQ4.
// q: mr rows of 32 kb int8 (row stride ldq); s, sum: mr rows of kb floats (row stride lds);
// w: the panel's first block; nr <= kQ4Panel columns are written; mr <= the tier's mr.
using PanelFn = void (*)(int64_t kb, const int8_t* q, int64_t ldq, const float* s,
                         const float* sum, int64_t lds, const uint8_t* w, float* y, int64_t ldy,
                         int64_t mr, int64_t nr);

// y[mr x nr] (ldy) = float activations a (mr rows of 32 kb floats, row stride lda) * one packed
// panel with the exact sequence of MatMulQ4Float (gemm_q4.h); mr <= the tier's float_mr.
using FloatPanelFn = void (*)(int64_t kb, const float* a, int64_t lda, const uint8_t* w, float* y,
                              int64_t ldy, int64_t mr, int64_t nr);

struct GemmQ4Tier {
  const char* name;
  int64_t mr;         // rows per panel-kernel call
  PanelFn panel;      // d, m as float32 (kQ4BlockStride)
  PanelFn panel_f16;  // d, m as float16 (kQ4BlockStrideF16)
  int64_t float_mr;   // rows per float-panel call
  FloatPanelFn float_panel;      // float activations, d, m as float32
  FloatPanelFn float_panel_f16;  // float activations, d, m as float16
};

extern const GemmQ4Tier kGemmQ4TierReference;
extern const GemmQ4Tier kGemmQ4TierAvx2;
extern const GemmQ4Tier kGemmQ4TierAvx512Vnni;

}  // namespace oneinfer::gemm_q4_internal
