// float16 and bfloat16 <-> float32, written once for the whole library (tests/half_test.cc
// checks every 16-bit pattern against Eigen::half and Eigen::bfloat16).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace oneinfer {

inline float Bf16ToF32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, overflow to infinity, NaN stays NaN (quiet), subnormals kept.
inline uint16_t F32ToF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536: inf
  if (abs < 0x38800000u) {  // below the smallest normal float16 (2^-14): subnormal or zero
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero (2^-25 itself is a tie to even 0)
    const uint32_t exp = abs >> 23, man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + 13 - (exp - 127)
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));  // rebias 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still right
  return static_cast<uint16_t>(sign | h);
}

// True when v survives a round trip through float16 unchanged (NaN counts as exact).
inline bool ExactInFloat16(float v) { return std::isnan(v) || F16ToF32(F32ToF16(v)) == v; }

// n values at once, vectorised where the CPU converts in hardware (F16C), with the values of
// F16ToF32 and F32ToF16 (NaNs stay NaN; a signalling NaN may come back quiet).
void WidenF16(const uint16_t* src, float* dst, int64_t n);
void NarrowToF16(const float* src, uint16_t* dst, int64_t n);

}  // namespace oneinfer
