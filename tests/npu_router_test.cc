// Row routing and the shared device layer under emulation: every Qwen3-0.6B projection shape runs
// on the (emulated) device at 32 rows bit-identical to the host reference, goes to the host at
// 5 rows, and a shape without a design falls back; plus padding, chunking and the weight cache.
#include "npu/router.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "npu/design.h"
#include "npu/trace.h"

namespace oneinfer::npu {
namespace {

// The oracle: a plain loop.
void HostRef(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w, int32_t* c) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t{a[m * K + k]} * int32_t{w[k * N + n]};
      c[m * N + n] = acc;
    }
}

std::vector<int8_t> RandomInt8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(dist(rng));
  if (!v.empty()) v[0] = -128;  // the extremes, whose products are the largest
  if (v.size() > 1) v[1] = 127;
  return v;
}

// Files an emulated design needs: any readable xclbin and a valid instruction stream.
struct DesignFiles {
  std::string xclbin, insts;
  DesignFiles() {
    xclbin = testing::TempDir() + "npu_router_design.xclbin";
    insts = testing::TempDir() + "npu_router_design.txt";
    std::ofstream(xclbin, std::ios::binary) << "xclbin2 (emulated: not parsed)";
    std::ofstream(insts) << "06030100\n00000105\n";
  }
  std::string Entry(int64_t m, int64_t k, int64_t n) const {
    return absl::StrCat(m, "x", k, "x", n, "=", xclbin, ":", insts);
  }
};

Router::DeviceOpener Emulated() {
  return [] { return absl::StatusOr<std::unique_ptr<Device>>(MakeEmulatedDevice()); };
}

struct ProjShape {
  int64_t k, n;
};
// Qwen3-0.6B projections: q (1024->2048), k/v (1024->1024), o (2048->1024), gate/up (1024->3072),
// down (3072->1024).
const ProjShape kQwen3Shapes[] = {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072},
                                  {3072, 1024}};

TEST(NpuRouter, ThresholdIsOneConstant) { EXPECT_EQ(kDeviceMinRows, 16); }

class NpuRouterQwen3 : public testing::TestWithParam<ProjShape> {};

TEST_P(NpuRouterQwen3, DeviceAt32RowsHostBelow16FallbackWithoutDesign) {
  const auto [K, N] = GetParam();
  DesignFiles files;
  // M = 64: the smallest whole_array int8 design (4 rows of m = 16), so 32 rows are padded.
  Router router(files.Entry(64, K, N), Emulated());
  ASSERT_TRUE(router.config_errors().empty());
  const auto a = RandomInt8(32 * K, 1 + K);
  const auto w = RandomInt8(K * N, 2 + N);
  std::vector<int32_t> ref(32 * N), c(32 * N, -1);
  HostRef(32, K, N, a.data(), w.data(), ref.data());
  TraceCapture capture;

  // 32 rows: the device, bit-identical, neither host line.
  ASSERT_TRUE(router.RunGemmS8(32, K, N, a.data(), w.data(), c.data(), HostRef).ok());
  EXPECT_EQ(c, ref);
  EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 0);
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_device m=32 k=", K, " n=", N, " design=64x", K,
                                       "x", N)),
            1);
  EXPECT_EQ(router.counters().device, 1);

  // 5 rows: the host, with its line.
  capture.Clear();
  std::vector<int32_t> c5(5 * N, -1);
  ASSERT_TRUE(router.RunGemmS8(5, K, N, a.data(), w.data(), c5.data(), HostRef).ok());
  EXPECT_TRUE(std::equal(c5.begin(), c5.end(), ref.begin()));
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_host_rows m=5 k=", K, " n=", N, " min=16")), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);

  // A shape without a design (N + 16): the host, with the fallback line.
  capture.Clear();
  const auto w2 = RandomInt8(K * (N + 16), 3);
  std::vector<int32_t> c2(32 * (N + 16)), ref2(32 * (N + 16));
  HostRef(32, K, N + 16, a.data(), w2.data(), ref2.data());
  ASSERT_TRUE(router.RunGemmS8(32, K, N + 16, a.data(), w2.data(), c2.data(), HostRef).ok());
  EXPECT_EQ(c2, ref2);
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_fallback m=32 k=", K, " n=", N + 16)), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);

  const RouterCounters counters = router.counters();
  EXPECT_EQ(counters.device, 1);
  EXPECT_EQ(counters.host_rows, 1);
  EXPECT_EQ(counters.fallback, 1);
  EXPECT_EQ(counters.sections.weight_uploads, 1);
  EXPECT_EQ(counters.sections.launches, 1);
}

INSTANTIATE_TEST_SUITE_P(NpuQwen3, NpuRouterQwen3, testing::ValuesIn(kQwen3Shapes),
                         [](const testing::TestParamInfo<ProjShape>& info) {
                           return absl::StrCat("k", info.param.k, "_n", info.param.n);
                         });

TEST(NpuRouter, AllQwen3DesignsInOneTableAtTheThresholdEdges) {
  DesignFiles files;
  std::string table;
  for (const ProjShape& s : kQwen3Shapes) absl::StrAppend(&table, files.Entry(32, s.k, s.n), ",");
  Router router(table, Emulated());
  ASSERT_TRUE(router.config_errors().empty());
  const ProjShape s{1024, 1024};
  const auto a = RandomInt8(33 * s.k, 7);
  const auto w = RandomInt8(s.k * s.n, 8);
  std::vector<int32_t> ref(33 * s.n);
  HostRef(33, s.k, s.n, a.data(), w.data(), ref.data());
  for (int64_t rows : {1, 15, 16, 17, 31, 32, 33}) {
    TraceCapture capture;
    std::vector<int32_t> c(rows * s.n, -1);
    ASSERT_TRUE(router.RunGemmS8(rows, s.k, s.n, a.data(), w.data(), c.data(), HostRef).ok());
    EXPECT_TRUE(std::equal(c.begin(), c.end(), ref.begin())) << rows;
    EXPECT_EQ(capture.Count("npu_qdq_host_rows"), rows < kDeviceMinRows ? 1 : 0) << rows;
    EXPECT_EQ(capture.Count("npu_qdq_device"), rows < kDeviceMinRows ? 0 : 1) << rows;
    EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0) << rows;
  }
  // 33 rows through an M=32 design: two launches, the second padded.
  EXPECT_EQ(router.counters().sections.launches, 4 + 2);  // 16, 17, 31, 32, then 33
  EXPECT_EQ(router.counters().sections.weight_uploads, 1);
}

TEST(NpuRouter, KOrNDisagreeingWithEveryDesignFallsBack) {
  DesignFiles files;
  Router router(files.Entry(32, 1024, 2048), Emulated());
  const auto a = RandomInt8(32 * 2048, 1);
  const auto w = RandomInt8(2048 * 2048, 2);
  std::vector<int32_t> c(32 * 2048), ref(32 * 2048);
  TraceCapture capture;
  for (auto [k, n] : {std::pair<int64_t, int64_t>{2048, 2048}, {1024, 1024}, {2048, 1024}}) {
    ASSERT_TRUE(router.RunGemmS8(32, k, n, a.data(), w.data(), c.data(), HostRef).ok());
    HostRef(32, k, n, a.data(), w.data(), ref.data());
    EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + 32 * n, c.begin()));
  }
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=2048 n=2048"), 1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=1024 n=1024"), 1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=2048 n=1024"), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
  EXPECT_FALSE(router.HasDesign(2048, 2048));
  EXPECT_TRUE(router.HasDesign(1024, 2048));
}

TEST(NpuDesign, RunRefusesAMismatchedKOrN) {
  DesignFiles files;
  auto device = MakeEmulatedDevice();
  auto design = Design::Prepare(*device, {{32, 64, 32}, files.xclbin, files.insts}, 1 << 20);
  ASSERT_TRUE(design.ok()) << design.status();
  std::vector<int8_t> a(32 * 64), w(64 * 64);
  std::vector<int32_t> c(32 * 64);
  auto st = (*design)->Run(a.data(), 32, 64, 48, w.data(), c.data(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("K and N must match"), std::string::npos) << st;
  st = (*design)->Run(a.data(), 32, 72, 32, w.data(), c.data(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*design)->Run(a.data(), 32, 64, 32, w.data(), c.data(), nullptr).ok());
}

TEST(NpuRouter, PicksTheSmallestDesignThatHoldsTheRowsAndChunksAboveTheLargest) {
  DesignFiles files;
  Router router(files.Entry(64, 64, 32) + "," + files.Entry(16, 64, 32) + "," +
                    files.Entry(32, 64, 32),
                Emulated());
  const auto a = RandomInt8(200 * 64, 11);
  const auto w = RandomInt8(64 * 32, 12);
  std::vector<int32_t> ref(200 * 32);
  HostRef(200, 64, 32, a.data(), w.data(), ref.data());
  struct Case {
    int64_t rows;
    const char* design;
    int64_t launches;
  };
  for (Case t : {Case{16, "16x64x32", 1}, Case{17, "32x64x32", 1}, Case{40, "64x64x32", 1},
                 Case{200, "64x64x32", 4}}) {
    TraceCapture capture;
    std::vector<int32_t> c(t.rows * 32, -1);
    Sections s;
    ASSERT_TRUE(router.RunGemmS8(t.rows, 64, 32, a.data(), w.data(), c.data(), HostRef, &s).ok());
    EXPECT_TRUE(std::equal(c.begin(), c.end(), ref.begin())) << t.rows;
    EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_device m=", t.rows, " k=64 n=32 design=",
                                         t.design)),
              1)
        << t.rows;
    EXPECT_EQ(s.launches, t.launches) << t.rows;
    EXPECT_EQ(s.calls, 1);
  }
}

// Wraps the emulated device to look at A as the kernel receives it.
class RecordingDevice : public Device {
 public:
  std::vector<std::vector<int8_t>> a_at_launch;
  std::string_view name() const override { return "recording"; }
  absl::StatusOr<std::unique_ptr<DeviceKernel>> LoadDesign(
      const DesignSpec& spec, std::span<const uint32_t> instructions) override {
    auto inner = inner_->LoadDesign(spec, instructions);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<DeviceKernel>(new Kernel(std::move(*inner), this));
  }

 private:
  struct Kernel : DeviceKernel {
    Kernel(std::unique_ptr<DeviceKernel> k, RecordingDevice* d) : inner(std::move(k)), dev(d) {}
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(BufferRole r, size_t b) override {
      return inner->Allocate(r, b);
    }
    absl::Status Launch(DeviceBuffer& i, uint32_t n, DeviceBuffer& a, DeviceBuffer& b,
                        DeviceBuffer& c) override {
      auto bytes = a.host();
      dev->a_at_launch.emplace_back(reinterpret_cast<const int8_t*>(bytes.data()),
                                    reinterpret_cast<const int8_t*>(bytes.data()) + bytes.size());
      return inner->Launch(i, n, a, b, c);
    }
    absl::Status Wait() override { return inner->Wait(); }
    std::unique_ptr<DeviceKernel> inner;
    RecordingDevice* dev;
  };
  std::unique_ptr<Device> inner_ = MakeEmulatedDevice();
};

TEST(NpuDesign, PadsWithZeroRowsAfterATallerCall) {
  DesignFiles files;
  RecordingDevice device;
  auto design = Design::Prepare(device, {{32, 16, 16}, files.xclbin, files.insts}, 1 << 20);
  ASSERT_TRUE(design.ok()) << design.status();
  const auto a = RandomInt8(32 * 16, 5);
  const auto w = RandomInt8(16 * 16, 6);
  std::vector<int32_t> c(32 * 16), ref(32 * 16);
  HostRef(32, 16, 16, a.data(), w.data(), ref.data());
  for (int64_t rows : {32, 20, 17, 32, 1}) {
    std::fill(c.begin(), c.end(), -1);
    ASSERT_TRUE((*design)->Run(a.data(), rows, 16, 16, w.data(), c.data(), nullptr).ok());
    EXPECT_TRUE(std::equal(c.begin(), c.begin() + rows * 16, ref.begin())) << rows;
    EXPECT_TRUE(std::all_of(c.begin() + rows * 16, c.end(), [](int32_t v) { return v == -1; }))
        << "wrote past the live rows at " << rows;
    const std::vector<int8_t>& seen = device.a_at_launch.back();
    ASSERT_EQ(seen.size(), 32u * 16u);
    EXPECT_TRUE(std::equal(seen.begin(), seen.begin() + rows * 16, a.begin())) << rows;
    EXPECT_TRUE(std::all_of(seen.begin() + rows * 16, seen.end(), [](int8_t v) { return v == 0; }))
        << "padding rows not zero at " << rows;
  }
}

TEST(NpuDesign, WeightsUploadOncePerPointerAndTheCacheIsBounded) {
  DesignFiles files;
  auto device = MakeEmulatedDevice();
  // Room for two 64x32 images.
  auto design = Design::Prepare(*device, {{16, 64, 32}, files.xclbin, files.insts}, 2 * 64 * 32);
  ASSERT_TRUE(design.ok()) << design.status();
  const auto a = RandomInt8(16 * 64, 1);
  std::vector<std::vector<int8_t>> ws;
  for (uint32_t i = 0; i < 3; ++i) ws.push_back(RandomInt8(64 * 32, 100 + i));
  std::vector<int32_t> c(16 * 32), ref(16 * 32);
  auto run = [&](int i) {
    Sections s;
    EXPECT_TRUE((*design)->Run(a.data(), 16, 64, 32, ws[i].data(), c.data(), &s).ok());
    HostRef(16, 64, 32, a.data(), ws[i].data(), ref.data());
    EXPECT_EQ(c, ref) << i;
    return s.weight_uploads;
  };
  EXPECT_EQ(run(0), 1);
  EXPECT_EQ(run(0), 0);
  EXPECT_EQ(run(1), 1);
  EXPECT_EQ(run(0), 0);
  EXPECT_EQ((*design)->cached_weights(), 2u);
  EXPECT_EQ(run(2), 1);  // evicts 1, the least recently used
  EXPECT_EQ((*design)->cached_weights(), 2u);
  EXPECT_EQ((*design)->cached_weight_bytes(), 2u * 64 * 32);
  EXPECT_EQ(run(0), 0);
  EXPECT_EQ(run(1), 1);
  (*design)->ForgetWeight(ws[1].data());
  EXPECT_EQ(run(1), 1);
}

TEST(NpuRouter, NoDeviceRunsEverythingOnTheHostWithOneNotice) {
  DesignFiles files;
  int opens = 0;
  TraceCapture capture;
  Router router(files.Entry(32, 64, 32) + "," + files.Entry(32, 32, 64), [&opens] {
    ++opens;
    return absl::StatusOr<std::unique_ptr<Device>>(
        absl::UnavailableError("XRT cannot open device 0: XILINX_XRT not set"));
  });
  const auto a = RandomInt8(40 * 64, 1);
  const auto w = RandomInt8(64 * 64, 2);
  std::vector<int32_t> c(40 * 64), ref(40 * 64);
  for (int i = 0; i < 3; ++i) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{64, 32}, {32, 64}}) {
      for (int64_t rows : {5, 32, 40}) {
        ASSERT_TRUE(router.RunGemmS8(rows, k, n, a.data(), w.data(), c.data(), HostRef).ok());
        HostRef(rows, k, n, a.data(), w.data(), ref.data());
        EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + rows * n, c.begin()));
      }
    }
  }
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(capture.Count("npu: no NPU device (XRT cannot open device 0: XILINX_XRT not set)"), 1);
  EXPECT_EQ(capture.Count("npu: "), 1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback"), 12);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 6);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
  EXPECT_FALSE(router.HasDesign(64, 32));
}

// A device whose launches fail: the call still succeeds, on the host, and the design is retired.
class FailingDevice : public Device {
 public:
  std::string_view name() const override { return "failing"; }
  absl::StatusOr<std::unique_ptr<DeviceKernel>> LoadDesign(
      const DesignSpec& spec, std::span<const uint32_t> instructions) override {
    struct K : DeviceKernel {
      std::unique_ptr<DeviceKernel> inner;
      absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(BufferRole r, size_t b) override {
        return inner->Allocate(r, b);
      }
      absl::Status Launch(DeviceBuffer&, uint32_t, DeviceBuffer&, DeviceBuffer&,
                          DeviceBuffer&) override {
        return absl::InternalError("XRT: launching MLIR_AIE: device lost");
      }
      absl::Status Wait() override { return absl::OkStatus(); }
    };
    auto k = std::make_unique<K>();
    auto inner = emulated_->LoadDesign(spec, instructions);
    if (!inner.ok()) return inner.status();
    k->inner = std::move(*inner);
    return std::unique_ptr<DeviceKernel>(std::move(k));
  }

 private:
  std::unique_ptr<Device> emulated_ = MakeEmulatedDevice();
};

TEST(NpuRouter, AFailedLaunchEndsOnTheHostAndRetiresTheDesign) {
  DesignFiles files;
  TraceCapture capture;
  Router router(files.Entry(32, 64, 32), [] {
    return absl::StatusOr<std::unique_ptr<Device>>(std::make_unique<FailingDevice>());
  });
  const auto a = RandomInt8(32 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(32 * 32), ref(32 * 32);
  HostRef(32, 64, 32, a.data(), w.data(), ref.data());
  for (int i = 0; i < 3; ++i) {
    std::fill(c.begin(), c.end(), -1);
    ASSERT_TRUE(router.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
    EXPECT_EQ(c, ref);
  }
  EXPECT_EQ(capture.Count("npu: design 32x64x32 failed on the device: XRT: launching MLIR_AIE: "
                          "device lost"),
            1);
  EXPECT_EQ(capture.Count("npu_qdq_fallback m=32 k=64 n=32"), 3);
  EXPECT_FALSE(router.HasDesign(64, 32));
}

TEST(NpuRouter, InvalidArgumentsAreErrorsNotCrashes) {
  Router router("", Emulated());
  std::vector<int8_t> a(16), w(16);
  std::vector<int32_t> c(16);
  EXPECT_FALSE(router.RunGemmS8(-1, 4, 4, a.data(), w.data(), c.data(), HostRef).ok());
  EXPECT_FALSE(router.RunGemmS8(4, 0, 4, a.data(), w.data(), c.data(), HostRef).ok());
  EXPECT_FALSE(router.RunGemmS8(4, 4, 4, nullptr, w.data(), c.data(), HostRef).ok());
  EXPECT_FALSE(router.RunGemmS8(4, 4, 4, a.data(), w.data(), c.data(), HostGemmFn()).ok());
  EXPECT_TRUE(router.RunGemmS8(0, 4, 4, nullptr, nullptr, nullptr, HostRef).ok());
}

// What SessionOptions::npu becomes (engine/session.cc): a table with one bad entry, the emulated
// backend and a weight cache size.
TEST(NpuRouter, ConfiguredFromItsConfig) {
  DesignFiles files;
  RouterConfig config;
  config.designs = files.Entry(32, 64, 32) + ",junk";
  config.backend = Backend::kEmulated;
  config.weight_cache_bytes = size_t{64} << 20;
  TraceCapture capture;
  Router router(config);
  EXPECT_EQ(router.config_errors().size(), 1u);
  EXPECT_EQ(capture.Count("npu: ONEINFER_NPU_DESIGNS entry 2 'junk'"), 1);
  EXPECT_TRUE(router.configured());
  EXPECT_EQ(router.min_offload_rows(), kDeviceMinRows);
  const auto a = RandomInt8(32 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(32 * 32), ref(32 * 32);
  HostRef(32, 64, 32, a.data(), w.data(), ref.data());
  ASSERT_TRUE(router.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
  EXPECT_EQ(c, ref);
  EXPECT_EQ(capture.Count("npu_qdq_device m=32"), 1);
}

// The kernels' view (Int8GemmOffload): the same routing, and whether the device ran the call.
TEST(NpuRouter, AsAnOffloadSaysWhereEachCallRan) {
  DesignFiles files;
  Router router(files.Entry(32, 64, 32), Emulated());
  Int8GemmOffload& offload = router;
  const auto a = RandomInt8(32 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(32 * 32), ref(32 * 32);
  HostRef(32, 64, 32, a.data(), w.data(), ref.data());
  bool offloaded = false;
  ASSERT_TRUE(offload.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef, &offloaded).ok());
  EXPECT_TRUE(offloaded);
  EXPECT_EQ(c, ref);
  ASSERT_TRUE(offload.RunGemmS8(5, 64, 32, a.data(), w.data(), c.data(), HostRef, &offloaded).ok());
  EXPECT_FALSE(offloaded);
  // Kernels without a row-major copy pass no weight; their host GEMM has its own.
  const HostGemmS8Fn packed_host = [&w](int64_t m, int64_t k, int64_t n, const int8_t* am, const int8_t*,
                                        int32_t* cm) { HostRef(m, k, n, am, w.data(), cm); };
  ASSERT_TRUE(offload.RunGemmS8(32, 64, 32, a.data(), nullptr, c.data(), packed_host, &offloaded).ok());
  EXPECT_FALSE(offloaded) << "no device operand: the host";
  EXPECT_EQ(c, ref);
  const RouterCounters counters = router.counters();
  EXPECT_EQ(counters.device, 1);
  EXPECT_EQ(counters.host_rows, 1);
  EXPECT_EQ(counters.fallback, 1);
}

// Whether routing lines reach stderr is each router's own switch (SessionOptions::npu.trace); the
// sink gets every router's lines.
TEST(NpuRouter, TraceToStderrIsPerRouter) {
  DesignFiles files;
  Router loud(files.Entry(32, 64, 32), Emulated(), size_t{64} << 20, /*trace=*/true);
  Router quiet(files.Entry(32, 64, 32), Emulated(), size_t{64} << 20, /*trace=*/false);
  const auto a = RandomInt8(32 * 64, 1);
  const auto w = RandomInt8(64 * 32, 2);
  std::vector<int32_t> c(32 * 32);
  TraceCapture capture;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(loud.RunGemmS8(5, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
  ASSERT_TRUE(quiet.RunGemmS8(6, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
  ASSERT_TRUE(quiet.RunGemmS8(32, 64, 32, a.data(), w.data(), c.data(), HostRef).ok());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "npu_qdq_host_rows m=5 k=64 n=32 min=16\n");
  EXPECT_EQ(capture.Count("npu_qdq_host_rows m=6 "), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device m=32 "), 1);
}

}  // namespace
}  // namespace oneinfer::npu
