// Host/device routing of int8 GEMMs: the one place that decides where an int8 x int8 -> int32
// GEMM runs, and says so in the trace.
//
// The rule, in order:
//   1. M < kDeviceMinRows: the host kernel runs; trace `npu_qdq_host_rows m= k= n= min=16`.
//   2. no usable design for (K, N), or no device: the host kernel runs; trace
//      `npu_qdq_fallback m= k= n=`.
//   3. otherwise the device runs (the smallest design M that holds all rows, else the largest in
//      several launches); trace `npu_qdq_device m= k= n= design=MxKxN ...` with its sections.
// So "the device ran this call" is "neither npu_qdq_host_rows nor npu_qdq_fallback was written".
// A device that cannot be opened, a design that cannot load and a failed launch never fail the
// call: they are reported once as a notice and the host kernel runs instead.
//
// The session builds one router from SessionOptions::npu, owns it, and hands it to kernels as
// their Int8GemmOffload (base/gemm_offload.h); two sessions never share one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/gemm_offload.h"
#include "npu/design.h"
#include "npu/device.h"

namespace oneinfer::npu {

// Below this many rows a launch (~45-60 us through XRT) costs more than the host multiply.
inline constexpr int64_t kDeviceMinRows = 16;

// The host int8 GEMM the router calls when the device does not run:
// c (M x N int32, row-major) = a (M x K int8, row-major) * w (K x N int8, row-major).
using HostGemmFn = HostGemmS8Fn;

enum class Backend { kXrt, kEmulated };

// SessionOptions::npu, as the router takes it.
struct RouterConfig {
  std::string designs;              // the design table (docs/npu.md)
  Backend backend = Backend::kXrt;  // kEmulated: the in-process emulated device
  size_t weight_cache_bytes = size_t{2048} << 20;  // per design
  int64_t wait_timeout_ms = kDefaultWaitTimeoutMs;  // XRT: how long one run may take
  bool trace = false;               // routing trace lines on stderr (the sink gets them anyway)
};

// Where calls went and what the device calls cost.
struct RouterCounters {
  int64_t host_rows = 0;  // calls below kDeviceMinRows
  int64_t fallback = 0;   // calls with no usable design or no device
  int64_t device = 0;     // calls the device ran
  Sections sections;      // the device calls' sections (epilogue as reported by callers)
};

class Router final : public Int8GemmOffload {
 public:
  using DeviceOpener = std::function<absl::StatusOr<std::unique_ptr<Device>>()>;

  explicit Router(const RouterConfig& config);
  // For tests and benchmarks: an explicit device (opened on first need).
  Router(std::string_view designs, DeviceOpener opener,
         size_t weight_cache_bytes = size_t{2048} << 20, bool trace = false);
  ~Router() override;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // c (M x N int32) = a (M x K int8) * w (K x N int8), on the device or through `host`.
  // The weight is identified by its pointer: it must stay unchanged while this router may run it
  // (call ForgetWeight before freeing or changing it). w may be null when the caller keeps no
  // row-major copy (PrepareDesign said no): the call then runs on the host, traced as usual.
  // Errors only for invalid arguments; every device problem ends on the host. `call`
  // (optional) receives this call's device sections (calls > 0 when the device ran it).
  absl::Status RunGemmS8(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w,
                         int32_t* c, const HostGemmFn& host, Sections* call = nullptr);
  // The same for kernels (Int8GemmOffload): *offloaded says whether the device ran it.
  absl::Status RunGemmS8(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w,
                         int32_t* c, const HostGemmFn& host, bool* offloaded) override;

  // The caller's int32 -> output epilogue time for a device call, for the sections.
  void AddEpilogueNs(int64_t ns) override;

  // True when a design for (K, N) is configured and not known to be broken. It does not open
  // the device: before the first device call it is the table's answer, and it turns false once
  // the device is found absent or the design fails. PrepareDesign gives the definitive answer.
  bool HasDesign(int64_t K, int64_t N) const override;
  // Opens the device and loads a design for (K, N) if that has not happened yet; true when
  // calls of (K, N) with kDeviceMinRows rows or more will run on the device. Callers use it at
  // load to decide whether to keep a row-major int8 copy of a weight; false (and nothing
  // opened) when no design for (K, N) is configured.
  bool PrepareDesign(int64_t K, int64_t N) override;
  // True when the table has at least one usable entry. Fixed at construction: a router without
  // one sends every call to the host, so callers may skip it on their hot path.
  bool configured() const override { return !entries_.empty(); }
  int64_t min_offload_rows() const override { return kDeviceMinRows; }
  void ForgetWeight(const int8_t* w) override;
  // Weight images resident on the device, over every loaded design.
  size_t cached_weights() const;

  RouterCounters counters() const;
  void ResetCounters();
  // The configuration problems found at construction (also written as notices).
  const std::vector<std::string>& config_errors() const { return config_errors_; }

 private:
  struct Entry {
    DesignSpec spec;
    std::unique_ptr<Design> design;  // loaded on first use
    bool broken = false;
  };
  enum class DeviceState { kUnopened, kOpen, kAbsent };

  // Picks and loads a design for (rows, K, N); null when none is usable or no device.
  Design* Select(int64_t rows, int64_t K, int64_t N);
  void MarkBroken(Design* design, const absl::Status& why);

  DeviceOpener opener_;
  size_t weight_cache_bytes_;
  bool trace_;  // routing lines on stderr
  std::vector<std::string> config_errors_;

  mutable std::mutex mu_;  // device state, entries, counters
  DeviceState device_state_ = DeviceState::kUnopened;
  std::unique_ptr<Device> device_;  // declared before entries_: designs go first
  std::vector<Entry> entries_;
  RouterCounters counters_;
};

}  // namespace oneinfer::npu
