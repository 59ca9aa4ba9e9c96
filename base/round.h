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

}  // namespace oneinfer
