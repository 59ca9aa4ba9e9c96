#include "base/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace oneinfer {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0 state components the OS must save for the registers a feature uses.
constexpr uint64_t kXcr0Sse = uint64_t{1} << 1;
constexpr uint64_t kXcr0Avx = uint64_t{1} << 2;  // upper halves of ymm
constexpr uint64_t kXcr0Opmask = uint64_t{1} << 5;
constexpr uint64_t kXcr0ZmmHi256 = uint64_t{1} << 6;
constexpr uint64_t kXcr0Hi16Zmm = uint64_t{1} << 7;

uint64_t ReadXcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
#endif

}  // namespace

CpuFeatures ProbeCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a1, b1, c1, d1, a7, b7, c7, d7, a71, b71, c71, d71;
  if (!__get_cpuid_count(1, 0, &a1, &b1, &c1, &d1)) return f;
  // XGETBV is only defined when the OS enabled XSAVE (OSXSAVE).
  if ((c1 & bit_OSXSAVE) == 0 || !__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) return f;
  if (a7 < 1 || !__get_cpuid_count(7, 1, &a71, &b71, &c71, &d71)) a71 = 0;
  const uint64_t xcr0 = ReadXcr0();
  const bool os_saves_ymm = (xcr0 & (kXcr0Sse | kXcr0Avx)) == (kXcr0Sse | kXcr0Avx);
  const uint64_t zmm_state = kXcr0Sse | kXcr0Avx | kXcr0Opmask | kXcr0ZmmHi256 | kXcr0Hi16Zmm;
  const bool os_saves_zmm = (xcr0 & zmm_state) == zmm_state;

  f.avx = os_saves_ymm && (c1 & bit_AVX) != 0;
  f.avx2 = f.avx && (b7 & bit_AVX2) != 0;
  f.fma = f.avx && (c1 & bit_FMA) != 0;
  f.f16c = f.avx && (c1 & bit_F16C) != 0;
  f.avxvnni = f.avx2 && (a71 & bit_AVXVNNI) != 0;  // CPUID.(7,1):EAX
  const bool zmm = f.avx && os_saves_zmm;
  f.avx512f = zmm && (b7 & bit_AVX512F) != 0;
  f.avx512bw = f.avx512f && (b7 & bit_AVX512BW) != 0;
  f.avx512dq = f.avx512f && (b7 & bit_AVX512DQ) != 0;
  f.avx512vl = f.avx512f && (b7 & bit_AVX512VL) != 0;
  f.avx512vnni = f.avx512f && (c7 & bit_AVX512VNNI) != 0;
#endif
  return f;
}

const CpuFeatures& Cpu() {
  static const CpuFeatures features = ProbeCpuFeatures();
  return features;
}

}  // namespace oneinfer
