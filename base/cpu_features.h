// The one CPU probe: CPUID and XCR0 (XGETBV) read once, as named predicates every kernel family
// asks. A feature is reported only when the OS also saves the registers it uses.
#pragma once

namespace oneinfer {

struct CpuFeatures {
  bool avx = false;   // ymm registers, saved by the OS
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;  // zmm and opmask registers, saved by the OS
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avxvnni = false;  // the VEX-encoded VNNI (ymm), without AVX-512
};

// This CPU and OS, probed on first use (thread-safe); constant for the life of the process.
const CpuFeatures& Cpu();

// Probes again (Cpu() holds the result of one call).
CpuFeatures ProbeCpuFeatures();

}  // namespace oneinfer
