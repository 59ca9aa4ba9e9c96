// base/half.h against Eigen::half and Eigen::bfloat16: every 16-bit pattern to float, and a
// dense set of floats (ties, subnormals, overflow, infinities, NaNs) back to 16 bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "base/half.h"

namespace oneinfer {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t EigenF16(float f) { return Eigen::half(f).x; }
uint16_t EigenBf16(float f) { return Eigen::bfloat16(f).value; }

bool IsF16NaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool IsBf16NaN(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// The floats every conversion is checked on: each 16-bit value's float and its neighbours one
// float ulp away, the exact midpoints between adjacent 16-bit values (ties) and their
// neighbours, a sweep over all float patterns, and the special values.
std::vector<float> DenseFloats() {
  std::vector<uint32_t> bits;
  auto around = [&](uint32_t b) {
    for (int d = -2; d <= 2; ++d) bits.push_back(b + static_cast<uint32_t>(d));
  };
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    for (float f : {F16ToF32(v), Bf16ToF32(v)}) {
      if (std::isnan(f)) continue;
      around(Bits(f));
    }
    if ((h & 0x7fffu) < 0x7c00u) {  // midpoint to the next float16 of larger magnitude
      const double a = F16ToF32(v), b = F16ToF32(static_cast<uint16_t>(h + 1));
      if (!std::isnan(b)) around(Bits(static_cast<float>((a + b) / 2)));
    }
    if ((h & 0x7fffu) < 0x7f80u) {  // bfloat16 midpoints: the low 16 bits are 0x8000
      around((h << 16) | 0x8000u);
    }
  }
  // The largest finite float16 is 65504; 65520 is the tie that rounds to infinity.
  for (float f : {65504.0f, 65519.996f, 65520.0f, 65520.004f, 1e5f, std::numeric_limits<float>::max(),
                  std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -26),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 0.0f,
                  std::numeric_limits<float>::infinity()}) {
    around(Bits(f));
    around(Bits(-f));
  }
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4099) bits.push_back(static_cast<uint32_t>(b));
  // NaNs: quiet and signalling, payloads high and low, both signs.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7f802000u, 0x7fc00001u}) {
    bits.push_back(nan);
    bits.push_back(nan | 0x80000000u);
  }
  std::vector<float> out;
  out.reserve(bits.size());
  for (uint32_t b : bits) out.push_back(FromBits(b));
  return out;
}

TEST(Half, F16ToF32MatchesEigenOnEveryPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    const float want = static_cast<float>(Eigen::half(Eigen::half_impl::raw_uint16_to_half(v)));
    const float got = F16ToF32(v);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    } else {
      ASSERT_EQ(Bits(got), Bits(want)) << std::hex << "pattern 0x" << h;
    }
  }
}

TEST(Half, Bf16ToF32MatchesEigenOnEveryPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    Eigen::bfloat16 e;
    e.value = v;
    const float want = static_cast<float>(e);
    const float got = Bf16ToF32(v);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    } else {
      ASSERT_EQ(Bits(got), Bits(want)) << std::hex << "pattern 0x" << h;
    }
  }
}

TEST(Half, F32ToF16MatchesEigenOnDenseFloats) {
  const std::vector<float> floats = DenseFloats();
  ASSERT_GT(floats.size(), 1000000u);
  for (float f : floats) {
    const uint16_t got = F32ToF16(f), want = EigenF16(f);
    if (std::isnan(f)) {
      // Eigen returns its one quiet NaN; ours keeps the payload's top bits. Both are quiet NaNs.
      EXPECT_TRUE(IsF16NaN(got) && IsF16NaN(want)) << std::hex << Bits(f);
      EXPECT_TRUE(got & 0x200u) << "not quiet: 0x" << std::hex << got;
      EXPECT_EQ(got & 0x8000u, Bits(f) >> 16 & 0x8000u) << std::hex << Bits(f);
    } else {
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << Bits(f) << " (" << f << ")";
    }
  }
}

TEST(Half, F32ToBf16MatchesEigenOnDenseFloats) {
  const std::vector<float> floats = DenseFloats();
  for (float f : floats) {
    const uint16_t got = F32ToBf16(f), want = EigenBf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(IsBf16NaN(got) && IsBf16NaN(want)) << std::hex << Bits(f);
      EXPECT_TRUE(got & 0x40u) << "not quiet: 0x" << std::hex << got;
      EXPECT_EQ(got & 0x8000u, Bits(f) >> 16 & 0x8000u) << std::hex << Bits(f);
    } else {
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << Bits(f) << " (" << f << ")";
    }
  }
}

TEST(Half, EdgeValuesRoundAsIeeeSays) {
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bffu);  // largest finite
  EXPECT_EQ(F32ToF16(65519.996f), 0x7bffu);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00u);  // the tie rounds to even: infinity
  EXPECT_EQ(F32ToF16(-1e9f), 0xfc00u);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000u);  // tie to even: zero
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002u);  // 1.5 ulp: tie to even 2
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000u);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);   // tie: stays at even 1.0
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82u);   // tie: up to even
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds up to infinity
  EXPECT_EQ(F16ToF32(0x0001u), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x7bffu), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(0xfc00u)) && F16ToF32(0xfc00u) < 0);
}

TEST(Half, EveryFloat16SurvivesARoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    if (IsF16NaN(v)) {
      EXPECT_TRUE(IsF16NaN(F32ToF16(F16ToF32(v))));
      EXPECT_TRUE(ExactInFloat16(F16ToF32(v)));  // NaN counts as exact
      continue;
    }
    ASSERT_EQ(F32ToF16(F16ToF32(v)), v) << std::hex << h;
    ASSERT_TRUE(ExactInFloat16(F16ToF32(v))) << std::hex << h;
    if (!IsBf16NaN(v)) ASSERT_EQ(F32ToBf16(Bf16ToF32(v)), v) << std::hex << h;
  }
  EXPECT_FALSE(ExactInFloat16(0.1f));
  EXPECT_FALSE(ExactInFloat16(65520.0f));
}

// The bulk conversions (F16C where the CPU has it) give the scalar ones' bits: every float16
// pattern widened, and the dense float set narrowed, at lengths that leave a scalar tail.
TEST(Half, BulkConversionsMatchTheScalarOnes) {
  std::vector<uint16_t> all(0x10000u + 5);
  for (size_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  WidenF16(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (size_t h = 0; h < all.size(); ++h) {
    if (IsF16NaN(all[h])) {
      ASSERT_TRUE(std::isnan(wide[h])) << std::hex << h;
      ASSERT_EQ(Bits(wide[h]) >> 31, Bits(F16ToF32(all[h])) >> 31) << std::hex << h;
    } else {
      ASSERT_EQ(Bits(wide[h]), Bits(F16ToF32(all[h]))) << std::hex << h;
    }
  }
  std::vector<float> floats = DenseFloats();
  floats.push_back(1.0f);  // an odd count: a tail after the 8-wide blocks
  std::vector<uint16_t> narrow(floats.size());
  NarrowToF16(floats.data(), narrow.data(), static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    const uint16_t want = F32ToF16(floats[i]);
    if (IsF16NaN(want)) {
      ASSERT_EQ(narrow[i] & 0xfe00u, want & 0xfe00u) << i;  // sign, exponent, quiet bit
    } else {
      ASSERT_EQ(narrow[i], want) << std::hex << Bits(floats[i]);
    }
  }
}

}  // namespace
}  // namespace oneinfer
