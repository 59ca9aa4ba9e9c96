// The XRT backend: loads an mlir-aie whole_array design and launches it through XRT.
//
// Built when CMake finds XRT (ONEINFER_HAVE_XRT). Two load paths, picked by XRT's version macros:
//  - XRT >= 2.15 (and the Ryzen AI amdxdna driver, which needs >= 2.17): register_xclbin +
//    hw_context, the kernel created from the context.
//  - XRT 2.13/2.14 (Debian 12): device.load_xclbin + xrt::kernel(device, uuid, name). This cannot
//    drive NPU hardware, but it runs the same plumbing under XRT's noop shim.
// Every XRT call that can throw is caught here and returned as an absl::Status.
#include "npu/device.h"

#ifdef ONEINFER_HAVE_XRT

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "npu/trace.h"

// XRT's headers: -I<xrt include dir>, which holds version.h, xrt/ and experimental/.
#if __has_include(<xrt/detail/version-slim.h>)
#include <xrt/detail/version-slim.h>
#else
#include <version.h>
#endif
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>
#if __has_include(<xrt/experimental/xrt_xclbin.h>)
#include <xrt/experimental/xrt_xclbin.h>
#else
#include <experimental/xrt_xclbin.h>
#endif

// Each XRT version header ships its own XRT_MAJOR/XRT_MINOR for its own encoding.
#if defined(XRT_VERSION_CODE) && defined(XRT_MAJOR) && defined(XRT_MINOR)
#define ONEINFER_XRT_AT_LEAST(maj, min)              \
  (XRT_MAJOR(XRT_VERSION_CODE) > (maj) ||            \
   (XRT_MAJOR(XRT_VERSION_CODE) == (maj) && XRT_MINOR(XRT_VERSION_CODE) >= (min)))
#else
#define ONEINFER_XRT_AT_LEAST(maj, min) 0
#endif

#if ONEINFER_XRT_AT_LEAST(2, 15) && __has_include(<xrt/xrt_hw_context.h>)
#include <xrt/xrt_hw_context.h>
#define ONEINFER_XRT_HW_CONTEXT 1
#else
#define ONEINFER_XRT_HW_CONTEXT 0
#endif

namespace oneinfer::npu {
namespace {

constexpr int kArgInstr = 1, kArgA = 3, kArgB = 4, kArgC = 5;  // MLIR_AIE kernel arguments
constexpr unsigned kOpcode = 3;                                // "run the instruction stream"

template <typename Fn>
absl::Status Guard(const std::string& what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("XRT: ", what, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat("XRT: ", what, ": unknown exception"));
  }
}

class XrtBuffer final : public DeviceBuffer {
 public:
  XrtBuffer(xrt::bo bo, size_t bytes) : bo_(std::move(bo)), bytes_(bytes) {
    map_ = bo_.map<std::byte*>();
  }
  std::span<std::byte> host() override { return {map_, bytes_}; }
  absl::Status SyncToDevice() override {
    return Guard("bo.sync(to device)", [&] {
      bo_.sync(XCL_BO_SYNC_BO_TO_DEVICE);
      return absl::OkStatus();
    });
  }
  absl::Status SyncFromDevice() override {
    return Guard("bo.sync(from device)", [&] {
      bo_.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
      return absl::OkStatus();
    });
  }
  xrt::bo& bo() { return bo_; }

 private:
  xrt::bo bo_;
  size_t bytes_;
  std::byte* map_ = nullptr;
};

class XrtKernel final : public DeviceKernel {
 public:
  XrtKernel(std::shared_ptr<xrt::device> device, xrt::xclbin xclbin,
#if ONEINFER_XRT_HW_CONTEXT
            xrt::hw_context context,
#endif
            xrt::kernel kernel, std::string name, int64_t wait_timeout_ms)
      : device_(std::move(device)),
        xclbin_(std::move(xclbin)),
#if ONEINFER_XRT_HW_CONTEXT
        context_(std::move(context)),
#endif
        kernel_(std::move(kernel)),
        name_(std::move(name)),
        wait_timeout_ms_(wait_timeout_ms) {
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(BufferRole role,
                                                          size_t bytes) override {
    std::unique_ptr<DeviceBuffer> out;
    absl::Status st = Guard(absl::StrCat("allocating a ", bytes, "-byte buffer"), [&] {
      int arg = kArgInstr;
      xrt::bo::flags flags = xrt::bo::flags::host_only;
      switch (role) {
        case BufferRole::kInstructions:
          arg = kArgInstr;
          flags = xrt::bo::flags::cacheable;
          break;
        case BufferRole::kA: arg = kArgA; break;
        case BufferRole::kB: arg = kArgB; break;
        case BufferRole::kC: arg = kArgC; break;
      }
      xrt::bo bo(*device_, bytes, flags, kernel_.group_id(arg));
      out = std::make_unique<XrtBuffer>(std::move(bo), bytes);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::Status Launch(DeviceBuffer& instr, uint32_t n_words, DeviceBuffer& a, DeviceBuffer& b,
                      DeviceBuffer& c) override {
    auto* xi = dynamic_cast<XrtBuffer*>(&instr);
    auto* xa = dynamic_cast<XrtBuffer*>(&a);
    auto* xb = dynamic_cast<XrtBuffer*>(&b);
    auto* xc = dynamic_cast<XrtBuffer*>(&c);
    if (!xi || !xa || !xb || !xc) {
      return absl::InvalidArgumentError("XRT: a buffer from another device");
    }
    return Guard(absl::StrCat("launching ", name_), [&] {
      run_ = kernel_(kOpcode, xi->bo(), n_words, xa->bo(), xb->bo(), xc->bo());
      return absl::OkStatus();
    });
  }

  absl::Status Wait() override {
    if (!run_) return absl::FailedPreconditionError("XRT: wait without a launch");
    absl::Status st = Guard(absl::StrCat("waiting for ", name_), [&] {
      auto state = run_->wait(std::chrono::milliseconds(wait_timeout_ms_));
      if (state != ERT_CMD_STATE_COMPLETED) {
        return absl::InternalError(absl::StrCat("XRT: run of ", name_,
                                                " ended in state ", static_cast<int>(state),
                                                " (", ERT_CMD_STATE_COMPLETED,
                                                " is completed)"));
      }
      return absl::OkStatus();
    });
    run_.reset();
    return st;
  }

 private:
  std::shared_ptr<xrt::device> device_;
  xrt::xclbin xclbin_;
#if ONEINFER_XRT_HW_CONTEXT
  xrt::hw_context context_;
#endif
  xrt::kernel kernel_;
  std::string name_;
  int64_t wait_timeout_ms_;  // a run that takes longer is reported, not waited on forever
  std::optional<xrt::run> run_;
};

class XrtDevice final : public Device {
 public:
  XrtDevice(std::shared_ptr<xrt::device> device, int64_t wait_timeout_ms)
      : device_(std::move(device)), wait_timeout_ms_(wait_timeout_ms) {}

  std::string_view name() const override { return "xrt"; }

  absl::StatusOr<std::unique_ptr<DeviceKernel>> LoadDesign(
      const DesignSpec& spec, std::span<const uint32_t> instructions) override {
    std::unique_ptr<DeviceKernel> out;
    absl::Status st = Guard(absl::StrCat("loading '", spec.xclbin_path, "'"), [&] {
      xrt::xclbin xclbin(spec.xclbin_path);
      std::string kernel_name;
      for (const auto& k : xclbin.get_kernels()) {
        if (absl::StartsWith(k.get_name(), "MLIR_AIE")) {
          kernel_name = k.get_name();
          break;
        }
      }
      if (kernel_name.empty()) {
        return absl::NotFoundError(absl::StrCat("xclbin '", spec.xclbin_path,
                                                "' has no kernel named MLIR_AIE*"));
      }
      std::lock_guard<std::mutex> lock(mu_);
#if ONEINFER_XRT_HW_CONTEXT
      device_->register_xclbin(xclbin);
      xrt::hw_context context(*device_, xclbin.get_uuid());
      xrt::kernel kernel(context, kernel_name);
      out = std::make_unique<XrtKernel>(device_, std::move(xclbin), std::move(context),
                                        std::move(kernel), kernel_name, wait_timeout_ms_);
#else
      // load_xclbin replaces whatever was loaded: with this XRT one design per process is
      // reliable (enough for the noop shim; NPU hardware needs the hw_context path anyway).
      if (++loaded_ > 1) {
        Notice(absl::StrCat("npu: XRT < 2.15 loads one xclbin at a time; '", spec.xclbin_path,
                            "' replaces the previous design"));
      }
      auto uuid = device_->load_xclbin(xclbin);
      xrt::kernel kernel(*device_, uuid, kernel_name);
      out = std::make_unique<XrtKernel>(device_, std::move(xclbin), std::move(kernel),
                                        kernel_name, wait_timeout_ms_);
#endif
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  std::shared_ptr<xrt::device> device_;
  std::mutex mu_;
  int64_t wait_timeout_ms_;
  int loaded_ = 0;
};

}  // namespace

bool XrtCompiledIn() { return true; }

absl::StatusOr<std::unique_ptr<Device>> OpenXrtDevice(int64_t wait_timeout_ms) {
  if (wait_timeout_ms <= 0) wait_timeout_ms = kDefaultWaitTimeoutMs;
  try {
    auto device = std::make_shared<xrt::device>(0u);
    return std::unique_ptr<Device>(std::make_unique<XrtDevice>(std::move(device), wait_timeout_ms));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("XRT cannot open device 0: ", e.what()));
  } catch (...) {
    return absl::UnavailableError("XRT cannot open device 0: unknown exception");
  }
}

}  // namespace oneinfer::npu

#else  // !ONEINFER_HAVE_XRT

namespace oneinfer::npu {

bool XrtCompiledIn() { return false; }

absl::StatusOr<std::unique_ptr<Device>> OpenXrtDevice(int64_t /*wait_timeout_ms*/) {
  return absl::UnavailableError("this build has no XRT (libxrt-dev was not found)");
}

}  // namespace oneinfer::npu

#endif  // ONEINFER_HAVE_XRT
