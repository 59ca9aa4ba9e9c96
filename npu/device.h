// The device leg's interface: a device that loads one int8 GEMM design per shape, the buffers
// that design takes, and the per-call timing sections.
//
// The contract is mlir-aie's whole_array int8 GEMM: A is M x K int8 row-major, B is K x N int8
// row-major, C is M x N int32 row-major, for a design compiled for fixed (M, K, N). A call with
// fewer rows pads A with zero rows up to M; K and N must match exactly.
//
// Two backends implement Device: XRT (npu/xrt_backend.cc, real hardware or XRT's noop shim) and
// an emulated device (npu/emulated_device.cc) that computes what the design would. Everything
// above this layer (npu/design.h: buffer layout, padding, weight upload, readback, timing) is
// shared, so emulation checks the same layout code the hardware path runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oneinfer::npu {

// A design's compiled shape: M rows per launch, K and N exactly.
struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  friend bool operator==(const GemmShape&, const GemmShape&) = default;
};

// One entry of the design table: the shape and the two artifacts mlir-aie produces for it.
struct DesignSpec {
  GemmShape shape;
  std::string xclbin_path;  // the xclbin carrying a kernel whose name starts with MLIR_AIE
  std::string insts_path;   // the instruction stream: hex text (one word a line) or raw binary
};

// Per-call timing sections, in nanoseconds, summed over calls. The five sections are the ones a
// device call spends; `epilogue` is the caller's int32 -> output pass, added by the caller.
struct Sections {
  int64_t calls = 0;           // device calls (one per RunGemm, however many launches)
  int64_t launches = 0;        // kernel launches (calls with more rows than the design's M chunk)
  int64_t weight_uploads = 0;  // B images packed and uploaded (cache misses)
  int64_t weight_ns = 0;       // weight pack + upload (+ flush)
  int64_t activation_ns = 0;   // activation write (with zero padding) + flush
  int64_t launch_ns = 0;       // launch + wait (contains the multiply)
  int64_t readback_ns = 0;     // sync from device + copy of the live rows of C
  int64_t epilogue_ns = 0;     // int32 accumulators -> output, reported by the caller

  Sections& operator+=(const Sections& o);
  int64_t total_ns() const {
    return weight_ns + activation_ns + launch_ns + readback_ns + epilogue_ns;
  }
  // "calls=.. launches=.. uploads=.. weight_us=.. act_us=.. launch_us=.. readback_us=.. epilogue_us=.."
  std::string ToString() const;
};

// What a buffer is for; the XRT backend maps each role to its kernel argument's memory group.
enum class BufferRole { kInstructions, kA, kB, kC };

// A device buffer the host reaches through a mapping; syncs move it across.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual std::span<std::byte> host() = 0;
  virtual absl::Status SyncToDevice() = 0;
  virtual absl::Status SyncFromDevice() = 0;
};

// One design loaded on a device: its kernel, and the buffers its arguments take.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(BufferRole role,
                                                                  size_t bytes) = 0;
  // Starts one run: opcode 3, the instruction stream of n_words words, then A, B, C.
  virtual absl::Status Launch(DeviceBuffer& instr, uint32_t n_words, DeviceBuffer& a,
                              DeviceBuffer& b, DeviceBuffer& c) = 0;
  // Blocks until the last launch completes; an error if it did not complete cleanly.
  virtual absl::Status Wait() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  // Loads the design's xclbin and finds its kernel. `instructions` is the parsed instruction
  // stream (the caller reads the file), for backends that want to check it.
  virtual absl::StatusOr<std::unique_ptr<DeviceKernel>> LoadDesign(
      const DesignSpec& spec, std::span<const uint32_t> instructions) = 0;
};

// True when this build has the XRT backend (ONEINFER_HAVE_XRT).
bool XrtCompiledIn();

// How long a device run may take before it is reported and the host runs the call instead.
inline constexpr int64_t kDefaultWaitTimeoutMs = 10000;

// Opens XRT device 0, whose runs wait at most wait_timeout_ms (<= 0: the default). kUnavailable
// when XRT is not compiled in or no device opens (XILINX_XRT unset, no device 0, driver
// missing): the caller then runs on the host. Never throws.
absl::StatusOr<std::unique_ptr<Device>> OpenXrtDevice(int64_t wait_timeout_ms = kDefaultWaitTimeoutMs);

// A device that computes int8 x int8 -> int32 over the padded M on the host, with device-side
// copies of every buffer so a missing flush or readback shows up as wrong numbers.
std::unique_ptr<Device> MakeEmulatedDevice();

}  // namespace oneinfer::npu
