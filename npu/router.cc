#include "npu/router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "npu/design_table.h"
#include "npu/trace.h"

namespace oneinfer::npu {
namespace {

std::string ShapeName(const GemmShape& s) { return absl::StrCat(s.m, "x", s.k, "x", s.n); }

Router::DeviceOpener OpenerFor(const RouterConfig& config) {
  if (config.backend == Backend::kEmulated) {
    return [] { return absl::StatusOr<std::unique_ptr<Device>>(MakeEmulatedDevice()); };
  }
  return [ms = config.wait_timeout_ms] { return OpenXrtDevice(ms); };
}

}  // namespace

Router::Router(const RouterConfig& config)
    : Router(config.designs, OpenerFor(config), config.weight_cache_bytes, config.trace) {}

Router::Router(std::string_view designs, DeviceOpener opener, size_t weight_cache_bytes, bool trace)
    : opener_(std::move(opener)), weight_cache_bytes_(weight_cache_bytes), trace_(trace) {
  DesignTableParse table = ParseDesignTable(absl::string_view(designs.data(), designs.size()));
  for (std::string& e : table.errors) {
    config_errors_.push_back(absl::StrCat(e, "; that entry is ignored"));
  }
  for (DesignSpec& spec : table.designs) {
    if (absl::Status st = CheckDesignFiles(spec); !st.ok()) {
      config_errors_.push_back(absl::StrCat("design ", ShapeName(spec.shape), ": ",
                                            st.message(), "; that shape runs on the host"));
      continue;
    }
    entries_.push_back(Entry{std::move(spec), nullptr, false});
  }
  for (const std::string& e : config_errors_) Notice(absl::StrCat("npu: ", e));
}

Router::~Router() = default;

bool Router::HasDesign(int64_t K, int64_t N) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_state_ == DeviceState::kAbsent) return false;
  for (const Entry& e : entries_) {
    if (!e.broken && e.spec.shape.k == K && e.spec.shape.n == N) return true;
  }
  return false;
}

bool Router::PrepareDesign(int64_t K, int64_t N) {
  if (!HasDesign(K, N)) return false;
  return Select(kDeviceMinRows, K, N) != nullptr;
}

Design* Router::Select(int64_t rows, int64_t K, int64_t N) {
  std::lock_guard<std::mutex> lock(mu_);
  for (;;) {
    // The smallest design M that holds every row, else the largest (several launches).
    Entry* best = nullptr;
    for (Entry& e : entries_) {
      if (e.broken || e.spec.shape.k != K || e.spec.shape.n != N) continue;
      if (best == nullptr) {
        best = &e;
        continue;
      }
      const int64_t m = e.spec.shape.m, bm = best->spec.shape.m;
      const bool fits = m >= rows, best_fits = bm >= rows;
      if ((fits && (!best_fits || m < bm)) || (!fits && !best_fits && m > bm)) best = &e;
    }
    if (best == nullptr) return nullptr;
    if (best->design) return best->design.get();

    if (device_state_ == DeviceState::kUnopened) {
      auto device = opener_ ? opener_() : absl::UnavailableError("no device opener");
      if (device.ok() && *device) {
        device_ = std::move(*device);
        device_state_ = DeviceState::kOpen;
      } else {
        device_state_ = DeviceState::kAbsent;
        Notice(absl::StrCat("npu: no NPU device (",
                            device.ok() ? "none returned" : device.status().message(),
                            "); every int8 GEMM runs on the host"));
      }
    }
    if (device_state_ != DeviceState::kOpen) return nullptr;

    auto design = Design::Prepare(*device_, best->spec, weight_cache_bytes_);
    if (design.ok()) {
      best->design = std::move(*design);
      return best->design.get();
    }
    best->broken = true;
    Notice(absl::StrCat("npu: design ", ShapeName(best->spec.shape), " (", best->spec.xclbin_path,
                        ") cannot load on the ", std::string(device_->name()), " device: ",
                        design.status().message(), "; that shape runs on the host"));
  }
}

void Router::MarkBroken(Design* design, const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.design.get() != design || e.broken) continue;
    e.broken = true;
    Notice(absl::StrCat("npu: design ", ShapeName(e.spec.shape), " failed on the device: ",
                        why.message(), "; that shape runs on the host from now on"));
  }
}

absl::Status Router::RunGemmS8(int64_t M, int64_t K, int64_t N, const int8_t* a,
                               const int8_t* w, int32_t* c, const HostGemmFn& host,
                               Sections* call) {
  if (M < 0 || K <= 0 || N <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RunGemmS8: bad shape m=", M, " k=", K, " n=", N));
  }
  if (M == 0) return absl::OkStatus();
  if (a == nullptr || c == nullptr || !host) {
    return absl::InvalidArgumentError("RunGemmS8: null operand or no host kernel");
  }

  if (M < kDeviceMinRows) {
    if (TraceEnabled(trace_)) {
      Trace(absl::StrCat("npu_qdq_host_rows m=", M, " k=", K, " n=", N, " min=", kDeviceMinRows),
            trace_);
    }
    host(M, K, N, a, w, c);
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.host_rows;
    return absl::OkStatus();
  }

  // No row-major weight: nothing the device could take.
  Design* design = w == nullptr ? nullptr : Select(M, K, N);
  if (design != nullptr) {
    Sections s;
    absl::Status st = design->Run(a, M, K, N, w, c, &s);
    if (st.ok()) {
      if (TraceEnabled(trace_)) {
        Trace(absl::StrCat("npu_qdq_device m=", M, " k=", K, " n=", N,
                           " design=", ShapeName(design->spec().shape), " ", s.ToString()),
              trace_);
      }
      if (call != nullptr) *call += s;
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.device;
      counters_.sections += s;
      return absl::OkStatus();
    }
    MarkBroken(design, st);
  }

  if (TraceEnabled(trace_)) Trace(absl::StrCat("npu_qdq_fallback m=", M, " k=", K, " n=", N), trace_);
  host(M, K, N, a, w, c);
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.fallback;
  return absl::OkStatus();
}

absl::Status Router::RunGemmS8(int64_t M, int64_t K, int64_t N, const int8_t* a,
                               const int8_t* w, int32_t* c, const HostGemmFn& host,
                               bool* offloaded) {
  Sections call;
  absl::Status st = RunGemmS8(M, K, N, a, w, c, host, &call);
  if (offloaded != nullptr) *offloaded = st.ok() && call.calls > 0;
  return st;
}

void Router::AddEpilogueNs(int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.sections.epilogue_ns += ns;
}

void Router::ForgetWeight(const int8_t* w) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.design) e.design->ForgetWeight(w);
  }
}

size_t Router::cached_weights() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Entry& e : entries_) {
    if (e.design) n += e.design->cached_weights();
  }
  return n;
}

RouterCounters Router::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void Router::ResetCounters() {
  std::lock_guard<std::mutex> lock(mu_);
  counters_ = RouterCounters{};
}

}  // namespace oneinfer::npu
