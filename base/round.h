// Round half to even without a libm call: std::nearbyint is a call per element on the SSE2
// baseline (roundss / roundsd need SSE4.1), which made QuantizeLinear and the QDQ epilogue
// cost ~4 ns a value. cvtss2si / cvtsd2si round in the MXCSR mode: nearest-even in the default
// floating-point environment, which the engine never changes.
#pragma once

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>

namespace oneinfer {

// std::nearbyint(v) clamped to [lo, hi], as an int32; lo and hi are integers within int32, so
// clamping before rounding is the same as after. v must not be NaN (callers give NaN its own
// meaning).
inline int32_t RoundHalfEvenClamped(float v, float lo, float hi) {
  return _mm_cvtss_si32(_mm_set_ss(std::clamp(v, lo, hi)));
}
inline int32_t RoundHalfEvenClamped(double v, double lo, double hi) {
  return _mm_cvtsd_si32(_mm_set_sd(std::clamp(v, lo, hi)));
}

// The quantisers' saturate(round_half_even(v) + zp) into [lo, hi]: v is clamped to
// [lo - zp, hi - zp] first (the same as saturating after); NaN has no integer image and gives
// clamp(0, lo, hi), as ONNX's QuantizeLinear. A float v converts to double exactly.
inline int32_t SaturateRounded(double v, int32_t zp, int32_t lo, int32_t hi) {
  if (v != v) return std::clamp(0, lo, hi);
  return RoundHalfEvenClamped(v, static_cast<double>(lo - zp), static_cast<double>(hi - zp)) + zp;
}

}  // namespace oneinfer
