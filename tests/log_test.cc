// The logger: levels and the profile from SessionOptions only (the environment is the command
// line's business), the load line, the per-run profile, and per-session trace switches.
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

// Loads with `o` and runs once; returns what went to stderr.
std::string LoadAndRun(SessionOptions o) {
  const std::string bytes = TwoNodeModel();
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

std::string LoadAndRun(LogLevel level) {
  SessionOptions o;
  o.log_level = level;
  return LoadAndRun(o);
}

// The library reads no ONEINFER_* variable: the command line translates them into options.
TEST(Log, TheEnvironmentIsNotRead) {
  ScopedEnv log("ONEINFER_LOG", "verbose");
  ScopedEnv profile("ONEINFER_PROFILE", "1");
  ScopedEnv qdq("ONEINFER_QDQ_DEBUG", "1");
  SessionOptions o;
  o.log_level = LogLevel::kWarning;
  o.qdq_fusion = false;  // a session that would write qdq_disabled with its trace on
  EXPECT_EQ(LoadAndRun(o), "");
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

TEST(Log, ProfileOptionWorksAtAnyLevel) {
  SessionOptions o;
  o.log_level = LogLevel::kError;
  o.profile = true;
  const std::string err = LoadAndRun(o);
  EXPECT_NE(err.find("oneinfer: verbose: profile: "), std::string::npos) << err;
  EXPECT_EQ(err.find("loaded"), std::string::npos) << err;
}

// A trace line reaches stderr when its writer says so, and the category's sink in any case.
TEST(Log, TraceReachesStderrOnlyWhenAsked) {
  EXPECT_FALSE(TraceEnabled(LogCategory::kQdq, false));
  EXPECT_TRUE(TraceEnabled(LogCategory::kQdq, true));
  ::testing::internal::CaptureStderr();
  Trace(LogCategory::kQdq, "qdq_test quiet", false);
  Trace(LogCategory::kQdq, "qdq_test loud", true);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "qdq_test loud\n");
  LogCapture capture(LogCategory::kQdq);
  EXPECT_TRUE(TraceEnabled(LogCategory::kQdq, false));
  ::testing::internal::CaptureStderr();
  Trace(LogCategory::kQdq, "qdq_test quiet", false);
  Trace(LogCategory::kNpu, "npu_test other category", false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(capture.lines(), std::vector<std::string>{"qdq_test quiet"});
}

// SessionOptions::qdq_trace is one session's switch: of two sessions in one process, only the one
// that asked writes its QDQ lines to stderr.
TEST(Log, QdqTraceIsPerSession) {
  SessionOptions traced, quiet;
  traced.qdq_fusion = quiet.qdq_fusion = false;  // each load then writes one qdq_disabled line
  traced.qdq_trace = true;
  const std::string bytes = TwoNodeModel();
  ::testing::internal::CaptureStderr();
  auto a = Session::LoadFromBuffer(bytes.data(), bytes.size(), traced);
  auto b = Session::LoadFromBuffer(bytes.data(), bytes.size(), quiet);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(err, "qdq_disabled (ONEINFER_QDQ=0 or SessionOptions::qdq_fusion = false)\n");
}

}  // namespace
}  // namespace oneinfer
