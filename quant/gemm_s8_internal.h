// Internal interface between the int8 GEMM driver (gemm_s8.cc) and its per-ISA panel kernels.
#pragma once

#include <cstdint>

namespace oneinfer::gemm_s8_internal {

// How a tier wants A prepared (once per call, rows of padded_k elements, tail zeroed).
enum class AFormat {
  kU8Shifted,  // uint8: u8 activations as is, s8 activations as a + 128 (vpdpbusd's u8 operand)
  kS16,        // int16: sign- or zero-extended (exact vpmaddwd pairs; also the reference)
};

// A slice of the next weight panel for a panel call to bring into the cache while it computes,
// so that with many rows the stream from memory overlaps the dot products instead of arriving in
// a burst when the next panel's first tile starts. bytes == 0: nothing to bring.
struct NextPanelSlice {
  const int8_t* start = nullptr;
  int64_t bytes = 0;
};

// A tile spreads its slice over its kq k-quads: at k-quad q it asks for line (q * lines / kq),
// lines = min(kq, bytes / 64), kept in 16.16 fixed point; this is the per-quad step (0: none).
inline int64_t NextPanelLineStep(int64_t kq, NextPanelSlice next) {
  const int64_t lines = kq < next.bytes / 64 ? kq : next.bytes / 64;
  return lines > 0 ? (lines << 16) / kq : 0;
}

// c[mr x nr] (ldc) = a * one packed weight panel, over kq k-quads (4 k each).
// a: mr rows of 4 * kq elements (uint8 or int16 per AFormat), row stride lda elements.
// w: one kGemmS8Panel-wide packed panel (see gemm_s8.h); nr <= 32 columns are written.
// shift_col_sums: null, or the panel's 32 column sums to subtract 128x (s8 activations that
// were prepared as a + 128). mr <= the tier's mr. next: a tier may ignore it.
using PanelFn = void (*)(int64_t kq, const void* a, int64_t lda, const int8_t* w,
                         const int32_t* shift_col_sums, int32_t* c, int64_t ldc, int64_t mr,
                         int64_t nr, NextPanelSlice next);

// The tiles prefetch their weight panel this many bytes (32 k-quads) ahead. Streamed from memory
// the panel otherwise arrives no faster than the dot products consume it, one after the other:
// M = 16, K 1024, N 3072 at 2 threads 155-165 -> 118-133 us, M = 1 80-86 -> 71 us
// (bench_int8 Int8Streamed).
inline constexpr int64_t kPanelPrefetchBytes = 4096;

// The dynamic A8W8 row helpers (quant/dynamic_a8w8.cc, the GEMM's epilogue) in a tier's ISA.
// Every element's bits are the same at any vector width: max, IEEE division, the nearest-even
// conversion and the two rounded products are per element, and a NaN anywhere in the row
// makes the whole max NaN, whatever lane it falls in.
using AbsMaxFn = float (*)(const float* x, int64_t K);  // max |x[k]|, or NaN if any x[k] is NaN
// q[k] = QuantizeToS8(x[k], scale) (quant/weight_quant.h) for a finite scale > 0.
using QuantizeRowFn = void (*)(const float* x, int64_t K, float scale, int8_t* q);
// y[n] = (float(c[n]) * row_scale) * col_scales[n].
using DequantizeRowFn = void (*)(const int32_t* c, int64_t N, float row_scale, const float* col_scales, float* y);

struct GemmS8Tier {
  const char* name;
  int64_t mr;  // rows per panel-kernel call
  AFormat a_format;
  PanelFn panel;
  // null: the SSE2 baseline ones (gemm_s8.cc, dynamic_a8w8.cc).
  AbsMaxFn abs_max = nullptr;
  QuantizeRowFn quantize_row = nullptr;
  DequantizeRowFn dequantize_row = nullptr;
  // How many of a panel's first row tiles share bringing in the next panel (NextPanelSlice) when
  // there are two or more; 0: every tile, a lone one too.
  int64_t next_panel_tiles = 0;
};

extern const GemmS8Tier kGemmS8TierReference;
extern const GemmS8Tier kGemmS8TierAvx2;
extern const GemmS8Tier kGemmS8TierAvx512Vnni;

// The tier in use (base/kernel_tier.h, KernelFamily::kInt8).
const GemmS8Tier& ActiveGemmS8Tier();

}  // namespace oneinfer::gemm_s8_internal
