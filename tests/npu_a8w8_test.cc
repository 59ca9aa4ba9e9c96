// The dynamic A8W8 MatMul through the NPU router: sessions with SessionOptions::matmul = kInt8
// under an emulated device run each Qwen3-0.6B projection on the device at 32 rows, bit-identical
// to the host, and on the host at 5 rows or without a design; a row-major weight copy exists only
// when the device takes its shape; and the `oneinfer` command with ONEINFER_NPU_DESIGNS set but
// no device (or a bad table) runs on the host with clear notices and the same outputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "npu/router.h"
#include "npu/trace.h"
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

// Installs a router as GlobalRouter() for the scope; sessions loaded in it use that router.
class ScopedRouter {
 public:
  ScopedRouter(std::string_view designs, Router::DeviceOpener opener)
      : router_(designs, std::move(opener)), previous_(npu::SetGlobalRouterForTesting(&router_)) {}
  ~ScopedRouter() { npu::SetGlobalRouterForTesting(previous_); }
  Router& router() { return router_; }

 private:
  Router router_;
  Router* previous_;
};

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

std::unique_ptr<Session> LoadInt8(const std::string& model) {
  SessionOptions options;
  options.matmul = MatMulPrecision::kInt8;
  options.num_threads = 2;
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

  // The host run: a router with no designs, which the A8W8 MatMul does not even consult.
  std::vector<float> host32, host5, host_other;
  {
    ScopedRouter host("", Emulated());
    TraceCapture capture;
    auto s = LoadInt8(model);
    ASSERT_NE(s, nullptr);
    host32 = RunRows(*s, 32, K, 1);
    host5 = RunRows(*s, 5, K, 2);
    auto o = LoadInt8(other);
    ASSERT_NE(o, nullptr);
    host_other = RunRows(*o, 32, K, 3);
    EXPECT_TRUE(capture.lines().empty()) << capture.lines()[0];
  }

  ScopedRouter npu(files.Entry(64, K, N) + "," + files.Entry(64, K, N + 16), Emulated());
  ASSERT_TRUE(npu.router().config_errors().empty());
  TraceCapture capture;
  auto s = LoadInt8(model);
  ASSERT_NE(s, nullptr);

  // 32 rows: the device, neither host line, the same bits as the host.
  EXPECT_TRUE(SameBits(RunRows(*s, 32, K, 1), host32));
  EXPECT_EQ(capture.Count("npu_qdq_fallback"), 0);
  EXPECT_EQ(capture.Count("npu_qdq_host_rows"), 0);
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_device m=32 k=", K, " n=", N, " design=64x", K,
                                       "x", N, " ")),
            1);
  EXPECT_EQ(npu.router().counters().device, 1);
  EXPECT_GT(npu.router().counters().sections.epilogue_ns, 0);

  // 5 rows: the host, with its line.
  capture.Clear();
  EXPECT_TRUE(SameBits(RunRows(*s, 5, K, 2), host5));
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_host_rows m=5 k=", K, " n=", N, " min=16")), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);

  // A shape without a design: the host, with the fallback line.
  capture.Clear();
  auto o = LoadInt8(other);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(SameBits(RunRows(*o, 32, K, 3), host_other));
  EXPECT_EQ(capture.Count(absl::StrCat("npu_qdq_fallback m=32 k=", K, " n=", N + 32)), 1);
  EXPECT_EQ(capture.Count("npu_qdq_device"), 0);
  EXPECT_EQ(capture.Count("npu: "), 0) << "no notice expected";
  s.reset();
  o.reset();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(NpuQwen3, NpuA8W8Qwen3, ::testing::ValuesIn(kQwen3Shapes),
                         [](const ::testing::TestParamInfo<ProjShape>& info) {
                           return absl::StrCat("k", info.param.k, "_n", info.param.n);
                         });

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

// ---- The `oneinfer` command on a tiny random Qwen3 with --matmul int8 ----

struct CommandResult {
  int code = -1;
  std::string out, err;
};

// Runs the command with the NPU variables cleared, then `env` (NAME=VALUE ...) set.
CommandResult RunWithEnv(const std::string& env, const std::string& args, const fs::path& dir) {
  const fs::path err = dir / "stderr.txt";
  const std::string cmd = absl::StrCat(
      "env -u XILINX_XRT -u XCL_EMULATION_MODE -u ONEINFER_NPU_DESIGNS -u ONEINFER_NPU_EMULATE "
      "-u ONEINFER_NPU_TRACE ",
      env, " ", testing::CliPath(), " ", args, " 2>", err.string());
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream f(err);
  r.err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return r;
}

int CountLines(const std::string& text, std::string_view prefix) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    n += absl::StartsWith(line, absl::string_view(prefix.data(), prefix.size()));
  }
  return n;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

class NpuQwen3Session : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::TempDir("npu_qwen3"));
    auto r = testing::RunCli("export-qwen3 --random tiny --seed 4 -o " + (*dir_ / "ckpt").string());
    ASSERT_EQ(r.code, 0) << r.out;
    r = testing::RunCli("export-qwen3 " + (*dir_ / "ckpt").string() + " -o " +
                        (*dir_ / "m" / "model.onnx").string() + " --cached");
    ASSERT_EQ(r.code, 0) << r.out;
    files_ = new DesignFiles(*dir_);
    // The reference: no NPU variable at all.
    baseline_ = new CommandResult(RunWithEnv("", Args("base"), *dir_));
    ASSERT_EQ(baseline_->code, 0) << baseline_->out << baseline_->err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete baseline_;
    delete files_;
    delete dir_;
  }
  // A 20-token prompt (a prefill above the row threshold) and 4 decode steps (below it).
  static std::string Args(const std::string& tag) {
    return absl::StrCat("run ", (*dir_ / "m" / "model.onnx").string(),
                        " --prompt-ids 3,14,15,92,65,35,89,79,32,38,46,26,43,38,32,79,50,28,84,19"
                        " -n 4 --threads 2 --matmul int8 --json --dump-logits ",
                        (*dir_ / (tag + ".logits")).string());
  }
  // Same generated ids and text, and the same logits bit for bit, as the run without the variable.
  static void ExpectSameAsBaseline(const CommandResult& r, const std::string& tag) {
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const auto got = nlohmann::json::parse(r.out), want = nlohmann::json::parse(baseline_->out);
    EXPECT_EQ(got["generated_ids"], want["generated_ids"]);
    EXPECT_EQ(got["text"], want["text"]);
    const std::string logits = ReadFile(*dir_ / (tag + ".logits"));
    EXPECT_FALSE(logits.empty());
    EXPECT_TRUE(logits == ReadFile(*dir_ / "base.logits")) << "logits differ";
  }
  // The tiny model's projections (hidden 64, kv 32, mlp 128) at M = 32.
  static std::string TinyDesigns() {
    return absl::StrCat(files_->Entry(32, 64, 64), ",", files_->Entry(32, 64, 32), ",",
                        files_->Entry(32, 64, 128), ",", files_->Entry(32, 128, 64));
  }
  static fs::path* dir_;
  static DesignFiles* files_;
  static CommandResult* baseline_;
};
fs::path* NpuQwen3Session::dir_ = nullptr;
DesignFiles* NpuQwen3Session::files_ = nullptr;
CommandResult* NpuQwen3Session::baseline_ = nullptr;

TEST_F(NpuQwen3Session, DesignsWithoutADeviceRunOnTheHostWithOneNotice) {
  const CommandResult r = RunWithEnv(
      absl::StrCat("ONEINFER_NPU_TRACE=1 ONEINFER_NPU_DESIGNS='", TinyDesigns(), "'"), Args("nodev"),
      *dir_);
  ExpectSameAsBaseline(r, "nodev");
  EXPECT_EQ(CountLines(r.err, "npu: "), 1) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu: no NPU device ("), 1) << r.err;
  EXPECT_NE(r.err.find("every int8 GEMM runs on the host"), std::string::npos) << r.err;
  // The router was consulted: the prefill fell back, the decode steps stayed below the threshold.
  EXPECT_GT(CountLines(r.err, "npu_qdq_fallback m=20 k=64 n=64"), 0) << r.err;
  EXPECT_GT(CountLines(r.err, "npu_qdq_host_rows m=1 k=64 n=64 min=16"), 0) << r.err;
  EXPECT_EQ(CountLines(r.err, "npu_qdq_device"), 0) << r.err;
  // Without the variable, nothing from the NPU leg at all.
  EXPECT_EQ(baseline_->err.find("npu"), std::string::npos) << baseline_->err;
}

TEST_F(NpuQwen3Session, EmulatedDeviceRunsTheProjectionsWithTheSameOutputs) {
  const CommandResult r = RunWithEnv(
      absl::StrCat("ONEINFER_NPU_TRACE=1 ONEINFER_NPU_EMULATE=1 ONEINFER_NPU_DESIGNS='",
                   TinyDesigns(), "'"),
      Args("emulated"), *dir_);
  ExpectSameAsBaseline(r, "emulated");
  EXPECT_EQ(CountLines(r.err, "npu: "), 0) << r.err;
  for (const char* shape : {"k=64 n=64", "k=64 n=32", "k=64 n=128", "k=128 n=64"}) {
    EXPECT_GT(CountLines(r.err, absl::StrCat("npu_qdq_device m=20 ", shape, " design=32x")), 0)
        << shape << "\n" << r.err;
  }
  EXPECT_GT(CountLines(r.err, "npu_qdq_host_rows m=1 "), 0) << r.err;
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
  const CommandResult r = RunWithEnv(
      absl::StrCat("ONEINFER_NPU_TRACE=1 ONEINFER_NPU_EMULATE=1 ONEINFER_NPU_DESIGNS='", table, "'"),
      Args("bad"), *dir_);
  ExpectSameAsBaseline(r, "bad");
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
