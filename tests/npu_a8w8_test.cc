// The dynamic A8W8 MatMul through the session's NPU router: sessions with SessionOptions::matmul =
// kInt8 and an emulated design table (SessionOptions::npu) run each Qwen3-0.6B projection on the
// device at 32 rows, bit-identical to the host, and on the host at 5 rows or without a design; two
// sessions side by side route as each asked; a row-major weight copy exists only when the device
// takes its shape; and a Qwen3 generation with designs but no device (or a bad table) runs on the
// host with clear notices and the same outputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/session_impl.h"
#include "npu/router.h"
#include "npu/trace.h"
#include "oneinfer/generator.h"
#include "oneinfer/session.h"
#include "quant/dynamic_a8w8.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

namespace fs = std::filesystem;
using npu::Router;
using npu::TraceCapture;

// Files an emulated design needs: any readable xclbin and a valid instruction stream.
struct DesignFiles {
  std::string xclbin, insts;
  explicit DesignFiles(const fs::path& dir) {
    xclbin = (dir / "design.xclbin").string();
    insts = (dir / "design.txt").string();
    std::ofstream(xclbin, std::ios::binary) << "xclbin2 (emulated: not parsed)";
    std::ofstream(insts) << "06030100\n00000105\n";
  }
  std::string Entry(int64_t m, int64_t k, int64_t n) const {
    return absl::StrCat(m, "x", k, "x", n, "=", xclbin, ":", insts);
  }
};

Router::DeviceOpener Emulated() {
  return [] { return absl::StatusOr<std::unique_ptr<npu::Device>>(npu::MakeEmulatedDevice()); };
}

// SessionOptions::npu for a design table on the emulated device.
NpuOptions EmulatedNpu(const std::string& designs, bool trace = false) {
  NpuOptions npu;
  npu.designs = designs;
  npu.emulate = true;
  npu.trace = trace;
  return npu;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Y [N?, N] = X [rows, K] * W, W a constant [K, N] initializer (raw data, so big ones stay quick).
std::string MatMulModel(int64_t K, int64_t N, uint32_t seed) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  *g->add_node() = testing::MakeNode("MatMul", {"X", "W"}, {"Y"}, "proj");
  *g->add_input() = testing::TensorInfo("X", onnx::TensorProto::FLOAT, {-1, K});
  *g->add_output() = testing::TensorInfo("Y", onnx::TensorProto::FLOAT, {-1, N});
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(K);
  w->add_dims(N);
  const std::vector<float> values = RandomFloats(static_cast<size_t>(K * N), seed);
  w->set_raw_data(values.data(), values.size() * sizeof(float));
  return m.SerializeAsString();
}

std::unique_ptr<Session> LoadInt8(const std::string& model, const NpuOptions& npu = {}) {
  SessionOptions options;
  options.matmul = MatMulPrecision::kInt8;
  options.num_threads = 2;
  options.npu = npu;
  auto s = Session::LoadFromBuffer(model.data(), model.size(), options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<float> RunRows(const Session& s, int64_t rows, int64_t K, uint32_t seed) {
  const Tensor x = Tensor::FromVector(DType::kFloat32, {rows, K},
                                      RandomFloats(static_cast<size_t>(rows * K), seed));
  auto out = s.Run({{"X", x}});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const Tensor& y = (*out)[0];
  return std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements());
}

int CountLines(const std::string& text, std::string_view prefix) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    n += absl::StartsWith(line, absl::string_view(prefix.data(), prefix.size()));
  }
  return n;
}

// Bit patterns, so -0.0 vs 0.0 or a NaN would not hide.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct ProjShape {
  int64_t k, n;
};
// Qwen3-0.6B projections: q (1024->2048), k/v (1024->1024), o (2048->1024), gate/up (1024->3072),
// down (3072->1024).
const ProjShape kQwen3Shapes[] = {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072},
                                  {3072, 1024}};

class NpuA8W8Qwen3 : public ::testing::TestWithParam<ProjShape> {};

TEST_P(NpuA8W8Qwen3, SessionRunsOnTheDeviceAt32RowsOnTheHostAt5AndWithoutADesign) {
  const auto [K, N] = GetParam();
  const fs::path dir = testing::TempDir("npu_a8w8");
  const DesignFiles files(dir);
  const std::string model = MatMulModel(K, N, static_cast<uint32_t>(K + N));
  // The design for N + 16 that nothing asks for, and no design for the second model's N + 32.
  const std::string other = MatMulModel(K, N + 32, 7);

  // The host run: a session without designs, which has no router at all.
  std::vector<float> host32, host5, host_other;
  {
    TraceCapture capture;
    auto s = LoadInt8(model);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->impl().npu_router(), nullptr);
    host32 = RunRows(*s, 32, K, 1);
    host5 = RunRows(*s, 5, K, 2);
    auto o = LoadInt8(other);
    ASSERT_NE(o, nullptr);
    host_other = RunRows(*o, 32, K, 3);
    EXPECT_TRUE(capture.lines().empty()) << capture.lines()[0];
  }

  const NpuOptions npu = EmulatedNpu(files.Entry(64, K, N) + "," + files.Entry(64, K, N + 16));
  TraceCapture capture;
  auto s = LoadInt8(model, npu);
  ASSERT_NE(s, nullptr);
  Router* router = s->impl().npu_router();
  ASSERT_NE(router, nullptr);
  ASSERT_TRUE(router->config_errors().empty());

  // 32 rows: the device, neither host line, the same bits as the host.
  EXPECT_TRUE(SameBits(RunRows(*s, 32, K, 1), host32));
  EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 0);
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_device m=32 k=", K, " n=", N, " design=64x", K,
                                       "x", N, " ")),
            1);
  EXPECT_EQ(router->counters().device, 1);
  EXPECT_GT(router->counters().sections.epilogue_ns, 0);

  // 5 rows: the host, with its line.
  capture.Clear();
  EXPECT_TRUE(SameBits(RunRows(*s, 5, K, 2), host5));
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_host_rows m=5 k=", K, " n=", N, " min=16")), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);

  // A shape without a design (another session, the same table): the host, with the fallback line.
  capture.Clear();
  auto o = LoadInt8(other, npu);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(SameBits(RunRows(*o, 32, K, 3), host_other));
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_fallback m=32 k=", K, " n=", N + 32)), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
  EXPECT_EQ(capture.Count("npu: "), 0) << "no notice expected";
  EXPECT_EQ(o->impl().npu_router()->counters().fallback, 1);
  s.reset();
  o.reset();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(NpuQwen3, NpuA8W8Qwen3, ::testing::ValuesIn(kQwen3Shapes),
                         [](const ::testing::TestParamInfo<ProjShape>& info) {
                           return absl::StrCat("k", info.param.k, "_n", info.param.n);
                         });

// Each session owns the router its options describe: one session with an emulated design table
// (its routing lines on stderr), one with the same table and no trace, and one without designs,
// loaded together and run side by side in one process, route as each asked, with the same outputs.
TEST(NpuA8W8Sessions, SessionsSideBySideRouteAsEachAsked) {
  const fs::path dir = testing::TempDir("npu_a8w8_sessions");
  const DesignFiles files(dir);
  const int64_t K = 64, N = 32;
  const std::string model = MatMulModel(K, N, 11);
  auto traced = LoadInt8(model, EmulatedNpu(files.Entry(32, K, N), /*trace=*/true));
  auto quiet = LoadInt8(model, EmulatedNpu(files.Entry(32, K, N), /*trace=*/false));
  auto host = LoadInt8(model);
  ASSERT_TRUE(traced && quiet && host);
  Router* traced_router = traced->impl().npu_router();
  Router* quiet_router = quiet->impl().npu_router();
  ASSERT_NE(traced_router, nullptr);
  ASSERT_NE(quiet_router, nullptr);
  EXPECT_NE(traced_router, quiet_router);
  EXPECT_EQ(host->impl().npu_router(), nullptr);

  TraceCapture capture;
  ::testing::internal::CaptureStderr();
  for (uint32_t round = 0; round < 3; ++round) {
    for (int64_t rows : {32, 5}) {
      const std::vector<float> want = RunRows(*host, rows, K, round);
      EXPECT_TRUE(SameBits(RunRows(*traced, rows, K, round), want)) << rows;
      EXPECT_TRUE(SameBits(RunRows(*quiet, rows, K, round), want)) << rows;
    }
  }
  // The two routed sessions at once, on two threads.
  std::vector<float> from_traced, from_quiet;
  std::thread a([&] { from_traced = RunRows(*traced, 32, K, 9); });
  std::thread b([&] { from_quiet = RunRows(*quiet, 32, K, 9); });
  a.join();
  b.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(SameBits(from_traced, RunRows(*host, 32, K, 9)));
  EXPECT_TRUE(SameBits(from_quiet, from_traced));

  for (Router* r : {traced_router, quiet_router}) {
    const npu::RouterCounters c = r->counters();
    EXPECT_EQ(c.device, 4);
    EXPECT_EQ(c.host_rows, 3);
    EXPECT_EQ(c.fallback, 0);
  }
  // Every routing line reaches the sink; stderr gets the traced session's only.
  EXPECT_EQ(capture.Count("npu_qdq_device m=32 k=64 n=32 design=32x64x32"), 8);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows m=5 k=64 n=32 min=16"), 6);
  EXPECT_EQ(CountLines(err, "npu_qdq_device m=32 k=64 n=32 design=32x64x32"), 4) << err;
  EXPECT_EQ(CountLines(err, "npu_qdq_host_rows m=5 k=64 n=32 min=16"), 3) << err;
  EXPECT_EQ(CountLines(err, "npu"), 7) << err;

  // A router goes with its session; the others keep theirs.
  traced.reset();
  EXPECT_TRUE(SameBits(RunRows(*quiet, 32, K, 4), RunRows(*host, 32, K, 4)));
  EXPECT_EQ(quiet_router->counters().device, 5);
  quiet.reset();
  host.reset();
  fs::remove_all(dir);
}

// The memory rule: the row-major int8 copy exists only when the device will take the shape.
TEST(NpuA8W8Weights, RowMajorCopyOnlyForAShapeTheDeviceTakes) {
  const fs::path dir = testing::TempDir("npu_a8w8_copy");
  const DesignFiles files(dir);
  const int64_t K = 64, N = 32;
  const std::vector<float> w = RandomFloats(K * N, 5);
  const A8W8Weights plain = A8W8Weights::FromFloat(w.data(), K, N);
  EXPECT_EQ(plain.device_copy(), nullptr);

  {  // A design for (K, N) on a device that opens: the copy, and it is the quantised weight.
    Router router(files.Entry(32, K, N), Emulated());
    const A8W8Weights a = A8W8Weights::FromFloat(w.data(), K, N, &router);
    ASSERT_NE(a.device_copy(), nullptr);
    EXPECT_EQ(a.bytes(), plain.bytes() + static_cast<size_t>(K * N));
    std::vector<int32_t> acc(16 * N), ref(16 * N);
    std::vector<int8_t> ones(16 * K, 1);
    gemm_s8s8_s32_reference(16, N, K, ones.data(), K, a.device_copy(), N, ref.data(), N);
    GemmS8S8S32(16, ones.data(), K, plain.packed(), acc.data(), N, nullptr);
    EXPECT_EQ(acc, ref) << "the device copy is not the packed weight";
  }
  {  // No design for (K, N): no copy, and the device is never opened.
    int opens = 0;
    Router router(files.Entry(32, K, 2 * N), [&opens] {
      ++opens;
      return absl::StatusOr<std::unique_ptr<npu::Device>>(npu::MakeEmulatedDevice());
    });
    const A8W8Weights a = A8W8Weights::FromFloat(w.data(), K, N, &router);
    EXPECT_EQ(a.device_copy(), nullptr);
    EXPECT_EQ(a.bytes(), plain.bytes());
    EXPECT_EQ(opens, 0);
  }
  {  // A design but no device: no copy, one notice at preparation.
    TraceCapture capture;
    Router router(files.Entry(32, K, N), [] {
      return absl::StatusOr<std::unique_ptr<npu::Device>>(
          absl::UnavailableError("XRT cannot open device 0: XILINX_XRT not set"));
    });
    EXPECT_TRUE(router.HasDesign(K, N));  // the table's answer, before the device is tried
    const A8W8Weights a = A8W8Weights::FromFloat(w.data(), K, N, &router);
    const A8W8Weights b = A8W8Weights::FromFloat(w.data(), K, N, &router);
    EXPECT_EQ(a.device_copy(), nullptr);
    EXPECT_EQ(b.device_copy(), nullptr);
    EXPECT_FALSE(router.HasDesign(K, N));
    EXPECT_EQ(capture.Count("npu: no NPU device (XRT cannot open device 0"), 1);
    EXPECT_EQ(capture.Count("npu: "), 1);
  }
  fs::remove_all(dir);
}

// A weight prepared for a router forgets its device image when it goes, so a later weight at the
// same address can never be served a stale image.
TEST(NpuA8W8Weights, DroppingAWeightDropsItsDeviceImage) {
  const fs::path dir = testing::TempDir("npu_a8w8_forget");
  const DesignFiles files(dir);
  const int64_t K = 64, N = 32, M = 16;
  Router router(files.Entry(32, K, N), Emulated());
  const std::vector<float> a = RandomFloats(M * K, 9);
  for (uint32_t seed = 0; seed < 4; ++seed) {
    const std::vector<float> w = RandomFloats(K * N, 20 + seed);
    {
      const A8W8Weights routed = A8W8Weights::FromFloat(w.data(), K, N, &router);
      const A8W8Weights host = A8W8Weights::FromFloat(w.data(), K, N);
      ASSERT_NE(routed.device_copy(), nullptr);
      std::vector<float> y_dev(M * N), y_host(M * N);
      MatMulA8W8(M, a.data(), routed, y_dev.data(), nullptr);
      MatMulA8W8(M, a.data(), host, y_host.data(), nullptr);
      EXPECT_TRUE(SameBits(y_dev, y_host)) << seed;
      EXPECT_EQ(router.cached_weights(), 1u);
    }
    EXPECT_EQ(router.cached_weights(), 0u) << "the freed weight's device image is still cached";
  }
  const npu::RouterCounters c = router.counters();
  EXPECT_EQ(c.device, 4);
  // Each weight uploaded once; had an image outlived its weight, a reused address would skip one.
  EXPECT_EQ(c.sections.weight_uploads, 4);
  fs::remove_all(dir);
}

// ---- A tiny random Qwen3 generating with SessionOptions::matmul = kInt8 ----

// What one generation did: the ids, every step's logits, the NPU lines (sink) and stderr.
struct GenerationRun {
  std::vector<int32_t> ids;
  std::vector<float> logits;
  std::vector<std::string> npu_lines;
  std::string err;
  npu::RouterCounters counters;
  bool has_router = false;
};

// A 20-token prompt (a prefill above the row threshold) and 4 greedy decode steps (below it).
GenerationRun Generate(const fs::path& model, const NpuOptions& npu) {
  SessionOptions options;
  options.matmul = MatMulPrecision::kInt8;
  options.num_threads = 2;
  options.npu = npu;
  GenerationRun r;
  TraceCapture capture;
  ::testing::internal::CaptureStderr();
  [&] {
    auto session = Session::Load(model.string(), options);
    ASSERT_TRUE(session.ok()) << session.status();
    auto generator = Generator::Create(**session);
    ASSERT_TRUE(generator.ok()) << generator.status();
    GenerateOptions gen;
    gen.max_new_tokens = 4;
    // 20 tokens: the prompt fits one chunk, so the prefill runs all 20 (m=20) in one pass.
    const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38,
                                         46, 26, 43, 38, 32, 79, 50, 28, 84, 19};
    auto result = (*generator)->Generate(prompt, gen, [&](int32_t, const float* logits, int64_t vocab) {
      r.logits.insert(r.logits.end(), logits, logits + vocab);
      return true;
    });
    ASSERT_TRUE(result.ok()) << result.status();
    r.ids = result->generated_ids;
    if (npu::Router* router = (*session)->impl().npu_router()) {
      r.has_router = true;
      r.counters = router->counters();
    }
  }();
  r.err = ::testing::internal::GetCapturedStderr();
  r.npu_lines = capture.lines();
  return r;
}

class NpuQwen3Session : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("npu_qwen3"));
    auto r = testing::RunCli("export-qwen3 --random tiny --seed 4 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(r.code, 0) << r.out;
    r = testing::RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " + Model().string() + " --cached");
    ASSERT_EQ(r.code, 0) << r.out;
    files_ = new DesignFiles(*dir_);
    // The reference: no design table at all.
    baseline_ = new GenerationRun(Generate(Model(), {}));
    ASSERT_EQ(baseline_->ids.size(), 4u);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete baseline_;
    delete files_;
    delete dir_;
  }
  static fs::path Model() { return *dir_ / "m" / "model.onnx"; }
  // The same generated ids, and the same logits bit for bit, as the run without designs.
  static void ExpectSameAsBaseline(const GenerationRun& r) {
    EXPECT_EQ(r.ids, baseline_->ids);
    EXPECT_FALSE(r.logits.empty());
    EXPECT_TRUE(SameBits(r.logits, baseline_->logits)) << "logits differ";
  }
  // The tiny model's projections (hidden 64, kv 32, mlp 128) at M = 32.
  static std::string TinyDesigns() {
    return absl::StrCat(files_->Entry(32, 64, 64), ",", files_->Entry(32, 64, 32), ",",
                        files_->Entry(32, 64, 128), ",", files_->Entry(32, 128, 64));
  }
  static fs::path* dir_;
  static DesignFiles* files_;
  static GenerationRun* baseline_;
};
fs::path* NpuQwen3Session::dir_ = nullptr;
DesignFiles* NpuQwen3Session::files_ = nullptr;
GenerationRun* NpuQwen3Session::baseline_ = nullptr;

TEST_F(NpuQwen3Session, WithoutDesignsNothingFromTheNpuLeg) {
  EXPECT_FALSE(baseline_->has_router);
  EXPECT_TRUE(baseline_->npu_lines.empty()) << baseline_->npu_lines[0];
  EXPECT_EQ(baseline_->err.find("npu"), std::string::npos) << baseline_->err;
}

TEST_F(NpuQwen3Session, DesignsWithoutADeviceRunOnTheHostWithOneNotice) {
  // XRT reads its environment once per process: with one set, a device might open here.
  if (std::getenv("XILINX_XRT") != nullptr) GTEST_SKIP() << "XILINX_XRT is set";
  NpuOptions npu;
  npu.designs = TinyDesigns();
  npu.trace = true;
  const GenerationRun r = Generate(Model(), npu);
  ExpectSameAsBaseline(r);
  EXPECT_EQ(CountLines(r.err, "npu: "), 1) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu: no NPU device ("), 1) << r.err;
  EXPECT_NE(r.err.find("every int8 GEMM runs on the host"), std::string::npos) << r.err;
  // The router was consulted: the prefill fell back, the decode steps stayed below the threshold.
  EXPECT_GT(CountLines(r.err, "npu_qdq_fallback m=20 k=64 n=64"), 0) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_host_rows m=1 k=64 n=64 min=16"), 0) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu_qdq_device"), 0) << r.err;
  EXPECT_EQ(r.counters.device, 0);
  EXPECT_GT(r.counters.fallback, 0);
}

TEST_F(NpuQwen3Session, EmulatedDeviceRunsTheProjectionsWithTheSameOutputs) {
  const GenerationRun r = Generate(Model(), EmulatedNpu(TinyDesigns(), /*trace=*/true));
  ExpectSameAsBaseline(r);
  EXPECT_EQ(CountLines(r.err, "npu: "), 0) << r.err;
  for (const char* shape : {"k=64 n=64", "k=64 n=32", "k=64 n=128", "k=128 n=64"}) {
    EXPECT_GT(CountLines(r.err, absl::StrCat("npu_qdq_device m=20 ", shape, " design=32x")), 0)
        << shape << "\n" << r.err;
  }
  EXPECT_GT(CountLines(r.err, "npu_qdq_host_rows m=1 "), 0) << r.err;
  EXPECT_GT(r.counters.device, 0);
}

TEST_F(NpuQwen3Session, WithoutTraceTheLinesReachOnlyTheSink) {
  const GenerationRun r = Generate(Model(), EmulatedNpu(TinyDesigns(), /*trace=*/false));
  ExpectSameAsBaseline(r);
  EXPECT_EQ(r.err.find("npu"), std::string::npos) << r.err;
  int device_lines = 0;
  for (const std::string& line : r.npu_lines) device_lines += absl::StartsWith(line, "npu_qdq_device m=20 ");
  EXPECT_GT(device_lines, 0);
  EXPECT_EQ(device_lines, r.counters.device);
}

// A malformed entry, a missing xclbin, an instruction file that does not parse and a design whose
// K or N matches no MatMul: notices for the broken entries, the rest of the table still works,
// and the outputs do not change.
TEST_F(NpuQwen3Session, BadDesignTableIsReportedAndNeverFailsTheRun) {
  const fs::path bad_insts = *dir_ / "bad_insts.txt";
  std::ofstream(bad_insts) << "not hex\n";
  const std::string table = absl::StrCat(
      "64x64=", files_->xclbin, ":", files_->insts, ",",                  // malformed shape
      "32x64x32=", (*dir_ / "missing.xclbin").string(), ":", files_->insts, ",",  // missing xclbin
      "32x64x128=", files_->xclbin, ":", bad_insts.string(), ",",         // unreadable insts
      files_->Entry(32, 64, 48), ",",                                     // N matches nothing
      files_->Entry(32, 72, 64), ",",                                     // K matches nothing
      files_->Entry(32, 64, 64));                                         // a good one
  const GenerationRun r = Generate(Model(), EmulatedNpu(table, /*trace=*/true));
  ExpectSameAsBaseline(r);
  EXPECT_EQ(CountLines(r.err, "npu: ONEINFER_NPU_DESIGNS entry 1 '64x64="), 1) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu: design 32x64x32: "), 1) << r.err;
  EXPECT_NE(r.err.find("missing.xclbin"), std::string::npos) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu: design 32x64x128: "), 1) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu: "), 3) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_device m=20 k=64 n=64 design=32x64x64"), 0) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_fallback m=20 k=64 n=32"), 0) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_fallback m=20 k=64 n=128"), 0) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_fallback m=20 k=128 n=64"), 0) << r.err;
}

}  // namespace
}  // namespace oneinfer
