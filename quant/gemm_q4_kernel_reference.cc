// Portable tier: the packed-panel 4-bit kernel in plain C++, nibbles decoded one by one.
#include <cmath>
#include <cstring>


#include "quant/gemm_q4.h"
#include "quant/gemm_q4_internal.h"

namespace oneinfer::gemm_q4_internal {
namespace {

constexpr int64_t P = kQ4Panel;

// d, m of one block as floats (float16 values widened exactly; kF32D: m = c d).
template <int Fmt>
void LoadScales(const uint8_t* block, float* d, float* m, float c) {
  if constexpr (Fmt == kFmtF32D) {
    std::memcpy(d, block + kQ4CodeBytes, P * sizeof(float));
    for (int64_t j = 0; j < P; ++j) m[j] = c * d[j];
  } else if constexpr (Fmt == kFmtF16) {
    uint16_t h[2 * P];
    std::memcpy(h, block + kQ4CodeBytes, sizeof(h));
    for (int64_t j = 0; j < P; ++j) {
      d[j] = F16ToF32(h[j]);
      m[j] = F16ToF32(h[P + j]);
    }
  } else {
    std::memcpy(d, block + kQ4CodeBytes, P * sizeof(float));
    std::memcpy(m, block + kQ4CodeBytes + P * sizeof(float), P * sizeof(float));
  }
}

template <int Fmt>
void gemm_q4b32_q8_f32_panel__reference(int64_t kb, const int8_t* q, int64_t ldq, const float* s,
                                        const float* sum, int64_t lds, const uint8_t* w, float* y,
                                        int64_t ldy, int64_t mr, int64_t nr, float c) {
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int64_t r = 0; r < mr; ++r) {
    float acc[P] = {};
    for (int64_t b = 0; b < kb; ++b) {
      const uint8_t* wb = w + b * stride;
      const int8_t* qb = q + r * ldq + b * kQ4Block;
      float d[P], m[P];
      LoadScales<Fmt>(wb, d, m, c);
      for (int64_t j = 0; j < P; ++j) {
        int32_t dot = 0;
        for (int64_t g = 0; g < 4; ++g)
          for (int64_t t = 0; t < 4; ++t) {
            const uint8_t byte = wb[64 * g + 4 * j + t];
            dot += int32_t{qb[8 * g + t]} * (byte & 0x0f) + int32_t{qb[8 * g + 4 + t]} * (byte >> 4);
          }
        const float tt = std::fma(d[j], static_cast<float>(dot), m[j] * sum[r * lds + b]);
        acc[j] = std::fma(s[r * lds + b], tt, acc[j]);
      }
    }
    std::memcpy(y + r * ldy, acc, nr * sizeof(float));
  }
}

// Float activations: w = fma(code, d, m), four chains by k mod 4 (gemm_q4.h, MatMulQ4Float).
template <int Fmt>
void gemm_q4b32_f32_f32_panel__reference(int64_t kb, const float* a, int64_t lda, const uint8_t* w, float* y,
                                         int64_t ldy, int64_t mr, int64_t nr, float c) {
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int64_t r = 0; r < mr; ++r) {
    float acc[4][P] = {};
    for (int64_t b = 0; b < kb; ++b) {
      const uint8_t* wb = w + b * stride;
      float d[P], m[P];
      LoadScales<Fmt>(wb, d, m, c);
      for (int64_t i = 0; i < kQ4Block; ++i) {
        const int64_t g = i / 8, t = i % 4, shift = (i % 8) < 4 ? 0 : 4;
        const float x = a[r * lda + b * kQ4Block + i];
        for (int64_t j = 0; j < P; ++j) {
          const float code = static_cast<float>((wb[64 * g + 4 * j + t] >> shift) & 0x0f);
          acc[i % 4][j] = std::fma(x, std::fma(code, d[j], m[j]), acc[i % 4][j]);
        }
      }
    }
    for (int64_t j = 0; j < nr; ++j) y[r * ldy + j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
  }
}

}  // namespace

const GemmQ4Tier kGemmQ4TierReference = {
    "reference", 4,
    {gemm_q4b32_q8_f32_panel__reference<kFmtF32>, gemm_q4b32_q8_f32_panel__reference<kFmtF16>,
     gemm_q4b32_q8_f32_panel__reference<kFmtF32D>},
    4,
    {gemm_q4b32_f32_f32_panel__reference<kFmtF32>, gemm_q4b32_f32_f32_panel__reference<kFmtF16>,
     gemm_q4b32_f32_f32_panel__reference<kFmtF32D>}};

}  // namespace oneinfer::gemm_q4_internal
