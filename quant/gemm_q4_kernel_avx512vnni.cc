// AVX-512 VNNI tier: one zmm lane per column; the codes (u8 after unpacking a nibble) are
// vpdpbusd's unsigned operand and a broadcast quad of int8 activations its signed one, so the
// block dot needs no sign shift. Up to 6 rows share each unpacked weight group.
// GCC 12's _mm512_cvtepi32_ps passes a self-initialised "undefined" vector: a false warning.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "quant/gemm_q4.h"
#include "quant/gemm_q4_internal.h"

namespace oneinfer::gemm_q4_internal {
namespace {

#define ONEINFER_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

ONEINFER_AVX512VNNI inline __m512i BroadcastQuad(const int8_t* p) {
  int32_t quad;
  std::memcpy(&quad, p, sizeof(quad));
  return _mm512_set1_epi32(quad);
}

// 16 scales at p: float32, or float16 widened exactly (vcvtph2ps).
template <int Fmt>
ONEINFER_AVX512VNNI inline __m512 LoadScales(const uint8_t* p) {
  if constexpr (Fmt == kFmtF16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  else
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}

// d and m of the block at w (kF32D: m = c d, the product the packer checked exact).
template <int Fmt>
ONEINFER_AVX512VNNI inline void LoadDM(const uint8_t* w, float c, __m512* d, __m512* m) {
  *d = LoadScales<Fmt>(w + kQ4CodeBytes);
  if constexpr (Fmt == kFmtF32D)
    *m = _mm512_mul_ps(*d, _mm512_set1_ps(c));
  else
    *m = LoadScales<Fmt>(w + kQ4CodeBytes + kQ4Panel * kScaleBytes<Fmt>);
}

template <int MR, int Fmt>
ONEINFER_AVX512VNNI void gemm_q4b32_q8_f32_tile__avx512vnni(int64_t kb, const int8_t* q,
                                                            int64_t ldq, const float* s,
                                                            const float* sum, int64_t lds,
                                                            const uint8_t* w, float* y,
                                                            int64_t ldy, int64_t nr, float c) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int64_t b = 0; b < kb; ++b, w += stride) {
    // Low and high nibbles accumulate apart: two dependency chains per row.
    __m512i dlo[MR], dhi[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) dlo[r] = dhi[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512i v = _mm512_loadu_si512(w + 64 * g);
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const int8_t* qr = q + r * ldq + b * kQ4Block + 8 * g;
        dlo[r] = _mm512_dpbusd_epi32(dlo[r], lo, BroadcastQuad(qr));
        dhi[r] = _mm512_dpbusd_epi32(dhi[r], hi, BroadcastQuad(qr + 4));
      }
    }
    __m512 d, m;
    LoadDM<Fmt>(w, c, &d, &m);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(dlo[r], dhi[r]));
      const __m512 t =
          _mm512_fmadd_ps(d, dot, _mm512_mul_ps(m, _mm512_set1_ps(sum[r * lds + b])));
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(s[r * lds + b]), t, acc[r]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, acc[r]);
}

template <int Fmt>
void gemm_q4b32_q8_f32_panel__avx512vnni(int64_t kb, const int8_t* q, int64_t ldq,
                                         const float* s, const float* sum, int64_t lds,
                                         const uint8_t* w, float* y, int64_t ldy, int64_t mr,
                                         int64_t nr, float c) {
  switch (mr) {
    case 1: return gemm_q4b32_q8_f32_tile__avx512vnni<1, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 2: return gemm_q4b32_q8_f32_tile__avx512vnni<2, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 3: return gemm_q4b32_q8_f32_tile__avx512vnni<3, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 4: return gemm_q4b32_q8_f32_tile__avx512vnni<4, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    case 5: return gemm_q4b32_q8_f32_tile__avx512vnni<5, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
    default: return gemm_q4b32_q8_f32_tile__avx512vnni<6, Fmt>(kb, q, ldq, s, sum, lds, w, y, ldy, nr, c);
  }
}

// Float activations (MatMulQ4Float): a zmm lane per column; lane j of group g's 64 bytes holds
// column j's codes for k = 8g .. 8g+7 (low nibbles first), so each k's 16 weights are one shift
// and mask of that vector; the four k mod 4 chains are four accumulators per row.
template <int MR, int Fmt>
ONEINFER_AVX512VNNI void gemm_q4b32_f32_f32_tile__avx512vnni(int64_t kb, const float* a, int64_t lda,
                                                             const uint8_t* w, float* y, int64_t ldy,
                                                             int64_t nr, float c) {
  const __m512i low4 = _mm512_set1_epi32(0x0f);
  __m512 acc[MR][4];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_ps();
  constexpr int64_t stride = kBlockStride<Fmt>;
  for (int64_t b = 0; b < kb; ++b, w += stride) {
    __m512 d, m;
    LoadDM<Fmt>(w, c, &d, &m);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512i v = _mm512_loadu_si512(w + 64 * g);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int shift = (i % 4) * 8 + (i < 4 ? 0 : 4);
        const __m512i code = _mm512_and_si512(_mm512_srli_epi32(v, shift), low4);
        const __m512 wk = _mm512_fmadd_ps(_mm512_cvtepi32_ps(code), d, m);
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
          acc[r][i % 4] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + b * kQ4Block + 8 * g + i]), wk, acc[r][i % 4]);
      }
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1);
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
    _mm512_mask_storeu_ps(y + r * ldy, mask,
                          _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3])));
}

template <int Fmt>
void gemm_q4b32_f32_f32_panel__avx512vnni(int64_t kb, const float* a, int64_t lda, const uint8_t* w, float* y,
                                          int64_t ldy, int64_t mr, int64_t nr, float c) {
  switch (mr) {
    case 1: return gemm_q4b32_f32_f32_tile__avx512vnni<1, Fmt>(kb, a, lda, w, y, ldy, nr, c);
    case 2: return gemm_q4b32_f32_f32_tile__avx512vnni<2, Fmt>(kb, a, lda, w, y, ldy, nr, c);
    case 3: return gemm_q4b32_f32_f32_tile__avx512vnni<3, Fmt>(kb, a, lda, w, y, ldy, nr, c);
    default: return gemm_q4b32_f32_f32_tile__avx512vnni<4, Fmt>(kb, a, lda, w, y, ldy, nr, c);
  }
}

}  // namespace

const GemmQ4Tier kGemmQ4TierAvx512Vnni = {
    "avx512vnni", 6,
    {gemm_q4b32_q8_f32_panel__avx512vnni<kFmtF32>, gemm_q4b32_q8_f32_panel__avx512vnni<kFmtF16>,
     gemm_q4b32_q8_f32_panel__avx512vnni<kFmtF32D>},
    4,
    {gemm_q4b32_f32_f32_panel__avx512vnni<kFmtF32>, gemm_q4b32_f32_f32_panel__avx512vnni<kFmtF16>,
     gemm_q4b32_f32_f32_panel__avx512vnni<kFmtF32D>}};

}  // namespace oneinfer::gemm_q4_internal
