// The door through which int8 GEMM kernels hand an int8 x int8 -> int32 product to an
// accelerator. The session builds the implementation (npu::Router) from its options and hands it
// to kernels through KernelConfig; kernels never learn where a call runs or why, only whether it
// ran off the host (for their epilogue timing).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"

namespace oneinfer {

// The host int8 GEMM an offload calls when the accelerator does not take a call:
// c (M x N int32, row-major) = a (M x K int8, row-major) * w (K x N int8, row-major).
using HostGemmS8Fn = std::function<void(int64_t M, int64_t K, int64_t N, const int8_t* a,
                                        const int8_t* w, int32_t* c)>;

class Int8GemmOffload {
 public:
  virtual ~Int8GemmOffload() = default;

  // True when some shape may run off the host; false sends every call to `host`, so callers may
  // skip the offload on their hot path.
  virtual bool configured() const = 0;
  // The offload's present answer for (K, N) without opening anything (may turn false later).
  virtual bool HasDesign(int64_t K, int64_t N) const = 0;
  // Opens what (K, N) needs; true when large enough calls of (K, N) will run off the host. Kernels
  // ask it at load to decide whether to keep a row-major int8 copy of a weight.
  virtual bool PrepareDesign(int64_t K, int64_t N) = 0;
  // Calls with fewer rows always run on the host: kernels that split rows into blocks keep every
  // block at least this long so each block can go off the host.
  virtual int64_t min_offload_rows() const = 0;

  // c (M x N int32) = a (M x K int8) * w (K x N int8), off the host or through `host`. The weight
  // is identified by its pointer (w may be null: the call then runs on the host). An error only
  // for invalid arguments; every accelerator problem ends on the host. *offloaded (optional)
  // says whether the accelerator ran the call.
  virtual absl::Status RunGemmS8(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w,
                                 int32_t* c, const HostGemmS8Fn& host, bool* offloaded) = 0;
  // The caller's int32 -> output epilogue time for an offloaded call, for the offload's sections.
  virtual void AddEpilogueNs(int64_t ns) = 0;
  // The weight at w goes away or changes: drop whatever was kept for it.
  virtual void ForgetWeight(const int8_t* w) = 0;
};

}  // namespace oneinfer
