// The logger: levels from SessionOptions and ONEINFER_LOG, the load line, the per-run profile.
#include <gtest/gtest.h>

#include <cstdlib>

#include "base/log.h"
#include "oneinfer/session.h"
#include "tests/test_util.h"

namespace oneinfer {
namespace {

using namespace oneinfer::testing;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

std::string TwoNodeModel() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  *g->add_input() = TensorInfo("x", onnx::TensorProto::FLOAT, {2});
  *g->add_output() = TensorInfo("y", onnx::TensorProto::FLOAT, {2});
  *g->add_node() = MakeNode("Relu", {"x"}, {"r"}, "relu");
  *g->add_node() = MakeNode("Neg", {"r"}, {"y"}, "neg");
  return m.SerializeAsString();
}

// Loads with `level` and runs once; returns what went to stderr.
std::string LoadAndRun(LogLevel level) {
  const std::string bytes = TwoNodeModel();
  SessionOptions o;
  o.log_level = level;
  o.num_threads = 1;
  ::testing::internal::CaptureStderr();
  auto s = Session::LoadFromBuffer(bytes.data(), bytes.size(), o);
  if (s.ok()) {
    auto out = (*s)->Run({{"x", Tensor::FromVector<float>(DType::kFloat32, {2}, {1.f, -1.f})}});
    EXPECT_TRUE(out.ok()) << out.status();
  }
  EXPECT_TRUE(s.ok()) << s.status();
  return ::testing::internal::GetCapturedStderr();
}

TEST(Log, EnvironmentOverridesTheOption) {
  EXPECT_EQ(EffectiveLogLevel(LogLevel::kInfo), LogLevel::kInfo);
  ScopedEnv env("ONEINFER_LOG", "verbose");
  EXPECT_EQ(EffectiveLogLevel(LogLevel::kError), LogLevel::kVerbose);
  ::setenv("ONEINFER_LOG", "error", 1);
  EXPECT_EQ(EffectiveLogLevel(LogLevel::kVerbose), LogLevel::kError);
  ::setenv("ONEINFER_LOG", "loud", 1);  // unknown: the option stands
  EXPECT_EQ(EffectiveLogLevel(LogLevel::kInfo), LogLevel::kInfo);
}

TEST(Log, WarningLevelIsQuiet) { EXPECT_EQ(LoadAndRun(LogLevel::kWarning), ""); }

TEST(Log, InfoLogsOneLoadLine) {
  const std::string err = LoadAndRun(LogLevel::kInfo);
  EXPECT_NE(err.find("oneinfer: info: loaded 2 nodes: 0 folded, 2 plan steps, 1 threads, 0 initializer bytes"),
            std::string::npos) << err;
  EXPECT_EQ(err.find("profile"), std::string::npos) << err;
}

TEST(Log, VerboseProfilesEachRun) {
  const std::string err = LoadAndRun(LogLevel::kVerbose);
  EXPECT_NE(err.find("oneinfer: verbose: profile: "), std::string::npos) << err;
  EXPECT_NE(err.find("ms in 2 steps:"), std::string::npos) << err;
  EXPECT_NE(err.find("Relu 'relu'"), std::string::npos) << err;
  EXPECT_NE(err.find("Neg 'neg'"), std::string::npos) << err;
}

TEST(Log, ProfileEnvWorksAtAnyLevel) {
  ScopedEnv env("ONEINFER_PROFILE", "1");
  const std::string err = LoadAndRun(LogLevel::kError);
  EXPECT_NE(err.find("oneinfer: verbose: profile: "), std::string::npos) << err;
  EXPECT_EQ(err.find("loaded"), std::string::npos) << err;
}

TEST(Log, LogEnvRaisesTheLevel) {
  ScopedEnv env("ONEINFER_LOG", "info");
  const std::string err = LoadAndRun(LogLevel::kError);
  EXPECT_NE(err.find("oneinfer: info: loaded 2 nodes"), std::string::npos) << err;
}

}  // namespace
}  // namespace oneinfer
