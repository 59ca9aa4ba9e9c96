// The emulated device: what a whole_array int8 GEMM design computes, on the host.
//
// Each buffer keeps a host copy and a separate "device" copy; syncs copy between them and the
// kernel reads and writes only the device copies. So the shared layer's padding, flushes and
// readback are checked numerically: a missing SyncToDevice or SyncFromDevice gives wrong output.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "npu/device.h"

namespace oneinfer::npu {
namespace {

class EmulatedBuffer final : public DeviceBuffer {
 public:
  EmulatedBuffer(BufferRole role, size_t bytes) : role_(role), host_(bytes), device_(bytes) {}
  std::span<std::byte> host() override { return host_; }
  absl::Status SyncToDevice() override {
    device_ = host_;
    return absl::OkStatus();
  }
  absl::Status SyncFromDevice() override {
    host_ = device_;
    return absl::OkStatus();
  }
  BufferRole role() const { return role_; }
  std::vector<std::byte>& device() { return device_; }

 private:
  BufferRole role_;
  std::vector<std::byte> host_, device_;
};

class EmulatedKernel final : public DeviceKernel {
 public:
  explicit EmulatedKernel(GemmShape shape) : shape_(shape) {}

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(BufferRole role,
                                                          size_t bytes) override {
    if (bytes == 0) return absl::InvalidArgumentError("emulated device: zero-sized buffer");
    return std::make_unique<EmulatedBuffer>(role, bytes);
  }

  absl::Status Launch(DeviceBuffer& instr, uint32_t n_words, DeviceBuffer& a, DeviceBuffer& b,
                      DeviceBuffer& c) override {
    auto* ei = dynamic_cast<EmulatedBuffer*>(&instr);
    auto* ea = dynamic_cast<EmulatedBuffer*>(&a);
    auto* eb = dynamic_cast<EmulatedBuffer*>(&b);
    auto* ec = dynamic_cast<EmulatedBuffer*>(&c);
    if (!ei || !ea || !eb || !ec) {
      return absl::InvalidArgumentError("emulated device: a buffer from another device");
    }
    const auto [M, K, N] = shape_;
    if (ei->role() != BufferRole::kInstructions || ea->role() != BufferRole::kA ||
        eb->role() != BufferRole::kB || ec->role() != BufferRole::kC) {
      return absl::InvalidArgumentError("emulated device: buffers passed in the wrong slots");
    }
    if (n_words == 0 || ei->device().size() < size_t{n_words} * 4 ||
        ea->device().size() != static_cast<size_t>(M * K) ||
        eb->device().size() != static_cast<size_t>(K * N) ||
        ec->device().size() != static_cast<size_t>(M * N) * sizeof(int32_t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "emulated device: buffer sizes do not fit the ", M, "x", K, "x", N, " design"));
    }
    // C = A x B over the whole padded M, int8 x int8 -> int32, as the array would.
    const auto* A = reinterpret_cast<const int8_t*>(ea->device().data());
    const auto* B = reinterpret_cast<const int8_t*>(eb->device().data());
    auto* C = reinterpret_cast<int32_t*>(ec->device().data());
    std::vector<int32_t> row(static_cast<size_t>(N));
    for (int64_t m = 0; m < M; ++m) {
      std::fill(row.begin(), row.end(), 0);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t av = A[m * K + k];
        if (av == 0) continue;
        const int8_t* brow = B + k * N;
        for (int64_t n = 0; n < N; ++n) row[n] += av * static_cast<int32_t>(brow[n]);
      }
      std::memcpy(C + m * N, row.data(), row.size() * sizeof(int32_t));
    }
    launched_ = true;
    return absl::OkStatus();
  }

  absl::Status Wait() override {
    if (!launched_) return absl::FailedPreconditionError("emulated device: wait without launch");
    launched_ = false;
    return absl::OkStatus();
  }

 private:
  GemmShape shape_;
  bool launched_ = false;
};

class EmulatedDevice final : public Device {
 public:
  std::string_view name() const override { return "emulated"; }
  absl::StatusOr<std::unique_ptr<DeviceKernel>> LoadDesign(
      const DesignSpec& spec, std::span<const uint32_t> instructions) override {
    if (instructions.empty()) {
      return absl::InvalidArgumentError("emulated device: empty instruction stream");
    }
    return std::make_unique<EmulatedKernel>(spec.shape);
  }
};

}  // namespace

std::unique_ptr<Device> MakeEmulatedDevice() { return std::make_unique<EmulatedDevice>(); }

}  // namespace oneinfer::npu
